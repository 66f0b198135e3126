/* The tokenizers' small containers, shared by the vocabulary loader
 * (tokenizer.c), the BPE and SentencePiece models and the pre-tokenizer:
 * growing id lists, the string -> id map, UTF-8 decoding. They call nothing
 * else in tok/, so the tokenizer's files form no circle. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

vkv_status tok_ids_push(tok_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) return vkv_error(VKV_ERR_OOM, "out of memory storing token ids");
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return VKV_OK;
}

#define FNV_INIT 0xcbf29ce484222325ull

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t pair_hash(const char *a, size_t alen, const char *b, size_t blen)
{
    return fnv(fnv(fnv(FNV_INIT, a, alen), "\xff", 1), b, blen);
}

vkv_status tok_strmap_init(tok_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return vkv_error(VKV_ERR_OOM, "out of memory for a %zu-entry token map", expected);
    m->mask = (uint32_t)(cap - 1);
    m->n = 0;
    return VKV_OK;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The map is sized for its final count at init, so it never fills up. */
void tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val, bool overwrite)
{
    uint32_t i = (uint32_t)fnv(FNV_INIT, key, len) & m->mask;
    for (; m->slots[i].key; i = (i + 1) & m->mask) {
        struct tok_strmap_slot *s = &m->slots[i];
        if (s->len == len && s->split == UINT32_MAX && !memcmp(s->key, key, len)) {
            if (overwrite) s->val = val;
            return;
        }
    }
    m->slots[i] = (struct tok_strmap_slot){key, len, UINT32_MAX, val};
    m->n++;
}

void tok_strmap_put_pair(tok_strmap *m, const char *key, uint32_t len, uint32_t split, int32_t val)
{
    const char *b = key + split + 1;
    uint32_t blen = len - split - 1;
    uint32_t i = (uint32_t)pair_hash(key, split, b, blen) & m->mask;
    for (; m->slots[i].key; i = (i + 1) & m->mask) {
        struct tok_strmap_slot *s = &m->slots[i];
        if (s->split == split && s->len == len && !memcmp(s->key, key, split) && !memcmp(s->key + split + 1, b, blen))
            return;  /* first rank wins */
    }
    m->slots[i] = (struct tok_strmap_slot){key, len, split, val};
    m->n++;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len, int32_t missing)
{
    if (!m->slots) return missing;
    uint32_t i = (uint32_t)fnv(FNV_INIT, key, len) & m->mask;
    for (; m->slots[i].key; i = (i + 1) & m->mask) {
        const struct tok_strmap_slot *s = &m->slots[i];
        if (s->len == len && s->split == UINT32_MAX && !memcmp(s->key, key, len)) return s->val;
    }
    return missing;
}

int32_t tok_strmap_get_pair(const tok_strmap *m, const char *a, size_t alen, const char *b, size_t blen,
                            int32_t missing)
{
    if (!m->slots) return missing;
    uint32_t i = (uint32_t)pair_hash(a, alen, b, blen) & m->mask;
    for (; m->slots[i].key; i = (i + 1) & m->mask) {
        const struct tok_strmap_slot *s = &m->slots[i];
        if (s->split == alen && s->len == alen + 1 + blen && !memcmp(s->key, a, alen) &&
            !memcmp(s->key + alen + 1, b, blen))
            return s->val;
    }
    return missing;
}

/* ------------------------------------------------------------------ */
/* UTF-8                                                               */
/* ------------------------------------------------------------------ */

static bool is_cont(const char *s, size_t len, size_t i)
{
    return i < len && ((unsigned char)s[i] & 0xC0) == 0x80;
}

uint32_t tok_utf8_decode(const char *s, size_t len, size_t *pos)
{
    size_t i = *pos;
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) {
        *pos = i + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && is_cont(s, len, i + 1)) {
        *pos = i + 2;
        return ((uint32_t)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && is_cont(s, len, i + 1) && is_cont(s, len, i + 2)) {
        *pos = i + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)((unsigned char)s[i + 1] & 0x3F) << 6) |
               ((unsigned char)s[i + 2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && is_cont(s, len, i + 1) && is_cont(s, len, i + 2) && is_cont(s, len, i + 3)) {
        *pos = i + 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)((unsigned char)s[i + 1] & 0x3F) << 12) |
               ((uint32_t)((unsigned char)s[i + 2] & 0x3F) << 6) | ((unsigned char)s[i + 3] & 0x3F);
    }
    *pos = i + 1;
    return 0xFFFD;
}

