#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vkv_status vkv_read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return vkv_error(VKV_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!nb) {
                free(buf);
                fclose(f);
                return vkv_error(VKV_ERR_OOM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (!r) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return vkv_error(VKV_ERR_IO, "error reading '%s'", path);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return VKV_OK;
}
