/* A growable, always NUL-terminated byte string. Running out of memory sets
 * `oom` and drops further appends, so builders check once at the end. */
#ifndef VKV_STRBUF_H
#define VKV_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vkv_strbuf {
    char *p;      /* malloc'ed; NULL until the first append */
    size_t n, cap;
    bool oom;
} vkv_strbuf;

void vkv_strbuf_put(vkv_strbuf *b, const char *s, size_t n);
void vkv_strbuf_puts(vkv_strbuf *b, const char *s);

#endif
