#include "core/strbuf.h"

#include <stdlib.h>
#include <string.h>

void vkv_strbuf_put(vkv_strbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void vkv_strbuf_puts(vkv_strbuf *b, const char *s) { vkv_strbuf_put(b, s, strlen(s)); }
