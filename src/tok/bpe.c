/* Byte-level BPE (`tokenizer.ggml.model` = "gpt2"), llama.cpp's
 * llm_tokenizer_bpe_session: each pre-tokenizer word is mapped to GPT-2's
 * printable code points, split into characters, and adjacent pairs are merged
 * lowest merge rank first (leftmost on ties) until no ranked pair is left. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
 * other 68 to U+0100.. in byte order. */
uint32_t tok_byte_to_cp(uint8_t b)
{
    if (b <= 32) return 256u + b;
    if (b >= 127 && b <= 160) return 256u + 33 + (b - 127u);
    if (b == 173) return 256u + 33 + 34;
    return b;
}

int tok_cp_to_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t start, n;  /* bytes of the encoded word; n = 0 once merged away */
} bpe_sym;

typedef struct bpe_bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t size;  /* bytes of left + right when queued: detects stale entries */
} bpe_bigram;

/* Min-heap on (rank, left). */
typedef struct bpe_heap {
    bpe_bigram *v;
    size_t n, cap;
} bpe_heap;

static bool bigram_before(const bpe_bigram *a, const bpe_bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static bool heap_push(bpe_heap *h, bpe_bigram x)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bpe_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&x, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = x;
    return true;
}

static bpe_bigram heap_pop(bpe_heap *h)
{
    bpe_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

typedef struct bpe_work {
    char *enc;
    size_t enc_cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_heap heap;
} bpe_work;

static bool add_bigram(const vkv_tokenizer *tok, bpe_work *wk, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return true;
    const bpe_sym *l = &wk->sym[left], *r = &wk->sym[right];
    int32_t rank = tok_strmap_get_pair(&tok->merges, wk->enc + l->start, l->n, wk->enc + r->start, r->n, -1);
    if (rank < 0) return true;
    bpe_bigram b = {rank, left, right, l->n + r->n};
    return heap_push(&wk->heap, b);
}

/* Tokens for the final symbols: the symbol's token, else its single bytes
 * that happen to be tokens (llama.cpp drops the others). */
static vkv_status emit(const vkv_tokenizer *tok, const char *s, size_t n, tok_ids *out)
{
    int32_t id = tok_strmap_get(&tok->tokens, s, n, VKV_TOKEN_NULL);
    if (id != VKV_TOKEN_NULL) return tok_ids_push(out, id);
    for (size_t i = 0; i < n; i++) {
        id = tok_strmap_get(&tok->tokens, s + i, 1, VKV_TOKEN_NULL);
        if (id != VKV_TOKEN_NULL) {
            vkv_status st = tok_ids_push(out, id);
            if (st) return st;
        }
    }
    return VKV_OK;
}

static vkv_status bpe_word(const vkv_tokenizer *tok, const char *word, size_t len, bpe_work *wk, tok_ids *out)
{
    /* bytes -> GPT-2 code points (1 or 2 UTF-8 bytes each) */
    if (len * 2 > wk->enc_cap) {
        char *p = realloc(wk->enc, len * 2);
        if (!p) return vkv_error(VKV_ERR_OOM, "out of memory in BPE");
        wk->enc = p;
        wk->enc_cap = len * 2;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += vkv_utf8_encode(tok_byte_to_cp((uint8_t)word[i]), wk->enc + n);

    if (tok->ignore_merges) {
        int32_t id = tok_strmap_get(&tok->tokens, wk->enc, n, VKV_TOKEN_NULL);
        if (id != VKV_TOKEN_NULL) return tok_ids_push(out, id);
    }

    if (n > wk->sym_cap) {
        bpe_sym *s = realloc(wk->sym, n * sizeof *s);
        if (!s) return vkv_error(VKV_ERR_OOM, "out of memory in BPE");
        wk->sym = s;
        wk->sym_cap = n;
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = tok_utf8_len((unsigned char)wk->enc[off]);
        if (cl > n - off) cl = n - off;
        bpe_sym *s = &wk->sym[n_sym];
        s->start = (uint32_t)off;
        s->n = (uint32_t)cl;
        s->prev = n_sym - 1;
        off += cl;
        s->next = off == n ? -1 : n_sym + 1;
        n_sym++;
    }

    wk->heap.n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!add_bigram(tok, wk, i - 1, i)) return vkv_error(VKV_ERR_OOM, "out of memory in BPE");

    while (wk->heap.n) {
        bpe_bigram b = heap_pop(&wk->heap);
        bpe_sym *l = &wk->sym[b.left], *r = &wk->sym[b.right];
        /* the left symbol's start never moves, so the pair is unchanged iff
         * both still exist and their total length is the queued one */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size || l->next != b.right) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) wk->sym[r->next].prev = b.left;
        if (!add_bigram(tok, wk, l->prev, b.left) || !add_bigram(tok, wk, b.left, l->next))
            return vkv_error(VKV_ERR_OOM, "out of memory in BPE");
    }

    for (int32_t i = 0; i >= 0 && n_sym > 0; i = wk->sym[i].next) {
        vkv_status st = emit(tok, wk->enc + wk->sym[i].start, wk->sym[i].n, out);
        if (st) return st;
    }
    return VKV_OK;
}

vkv_status tok_bpe_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, tok_words *w, tok_ids *out)
{
    vkv_status st = tok_pretok_split(&tok->pretok, text, len, w);
    if (st) return st;
    bpe_work wk = {0};
    size_t start = 0;
    for (size_t i = 0; i < w->n && !st; i++) {
        st = bpe_word(tok, w->text + start, w->ends[i] - start, &wk, out);
        start = w->ends[i];
    }
    free(wk.enc);
    free(wk.sym);
    free(wk.heap.v);
    return st;
}
