/* Detokenization: whole sequences and the streaming detokenizer that never
 * splits a UTF-8 character between two outputs. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

vkv_status vkv_detokenize(const vkv_tokenizer *tok, const int32_t *ids, size_t n_ids, bool special, char **text,
                          size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t total = 0, n;
    for (size_t i = 0; i < n_ids; i++) {
        vkv_token_to_piece(tok, ids[i], special, &n);
        total += n;
    }
    char *out = malloc(total + 1);
    if (!out) return vkv_error(VKV_ERR_OOM, "out of memory detokenizing %zu tokens", n_ids);
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        const char *p = vkv_token_to_piece(tok, ids[i], special, &n);
        memcpy(out + k, p, n);
        k += n;
    }
    out[k] = 0;
    *text = out;
    *len = k;
    return VKV_OK;
}

void vkv_detok_init(vkv_detok *d, const vkv_tokenizer *tok, bool special)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->special = special;
}

void vkv_detok_free(vkv_detok *d)
{
    free(d->buf);
    memset(d, 0, sizeof *d);
}

/* Bytes at the end of s that start a character that could still become
 * valid with more bytes; 0 when the text ends on a boundary or the tail can
 * never be valid (then it is passed through as it is). */
static size_t incomplete_tail(const unsigned char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = s[n - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (need <= k) return 0;
        if (k >= 2) {  /* the second byte's range rules out overlong forms and surrogates */
            unsigned char lo = 0x80, hi = 0xBF, c1 = s[n - k + 1];
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
            if (c1 < lo || c1 > hi) return 0;
        }
        return k;
    }
    return 0;
}

vkv_status vkv_detok_push_bytes(vkv_detok *d, const char *bytes, size_t n, const char **text, size_t *len)
{
    size_t total = d->held + n;
    if (total > d->cap) {
        size_t cap = d->cap ? d->cap : 64;
        while (cap < total) cap *= 2;
        char *p = realloc(d->buf, cap);
        if (!p) return vkv_error(VKV_ERR_OOM, "out of memory in the streaming detokenizer");
        d->buf = p;
        d->cap = cap;
    }
    if (d->held) memcpy(d->buf, d->hold, d->held);
    if (n) memcpy(d->buf + d->held, bytes, n);
    size_t tail = incomplete_tail((const unsigned char *)d->buf, total);
    if (tail) memcpy(d->hold, d->buf + total - tail, tail);
    d->held = tail;
    *text = d->buf ? d->buf : "";
    *len = total - tail;
    return VKV_OK;
}

vkv_status vkv_detok_push(vkv_detok *d, int32_t id, const char **text, size_t *len)
{
    size_t n;
    const char *p = vkv_token_to_piece(d->tok, id, d->special, &n);
    return vkv_detok_push_bytes(d, p, n, text, len);
}

void vkv_detok_flush(vkv_detok *d, const char **text, size_t *len)
{
    /* hold[] is separate from buf, so the held bytes can be returned in
     * place; the next push starts clean */
    *text = d->hold;
    *len = d->held;
    d->held = 0;
}
