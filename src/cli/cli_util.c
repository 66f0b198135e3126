#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/file.h"

int cli_fail(const char *cmd, vkv_status s)
{
    fprintf(stderr, "vkvector %s: %s: %s\n", cmd, vkv_status_name(s), vkv_last_error());
    /* Test harnesses (meson) read exit status 77 as "skipped": GPU tests may
     * skip only when there is no Vulkan device at all. */
    const char *skip = getenv("VKVECTOR_SKIP_WITHOUT_DEVICE");
    if (s == VKV_ERR_NO_DEVICE && skip && *skip == '1') return 77;
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vkvector %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run 'vkvector %s --help' for usage)\n", cmd);
    return 2;
}

bool cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

bool cli_parse_f64(const char *s, double min, double max, double *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max) return false;
    *out = v;
    return true;
}

int cli_device_index_from_env(void)
{
    const char *s = getenv("VKVECTOR_DEVICE");
    int64_t v;
    if (s && cli_parse_i64(s, 0, 1024, &v)) return (int)v;
    return -1;
}

char *cli_read_file(const char *path, size_t *len)
{
    char *data;
    return vkv_read_file(path, VKV_MAX_DOC_BYTES, &data, len) ? NULL : data;
}
