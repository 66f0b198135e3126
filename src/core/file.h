/* Reading a whole file into memory. */
#ifndef VKV_FILE_H
#define VKV_FILE_H

#include <stddef.h>

#include "core/status.h"

/* *data: the file's bytes plus a terminating NUL (malloc'ed; free() it),
 * *len: their number. VKV_ERR_IO naming the file and the reason, or
 * VKV_ERR_OOM. */
vkv_status vkv_read_file(const char *path, char **data, size_t *len);

#endif
