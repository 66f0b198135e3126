/* SentencePiece-style BPE (`tokenizer.ggml.model` = "llama"), llama.cpp's
 * llm_tokenizer_spm_session: spaces become U+2581, the text is split into
 * UTF-8 characters, and the adjacent pair whose concatenation is the
 * highest-scoring vocabulary token is merged first (leftmost on ties). A
 * character that is no token falls back to its <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t start, n;  /* n = 0 once merged away */
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

/* Max-heap on score, then min left. */
static bool bigram_before(const spm_bigram *a, const spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_work {
    const vkv_tokenizer *tok;
    const char *text;
    spm_sym *sym;
    spm_bigram *heap;
    size_t n_heap, cap_heap;
} spm_work;

static bool heap_push(spm_work *w, spm_bigram x)
{
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        spm_bigram *v = realloc(w->heap, cap * sizeof *v);
        if (!v) return false;
        w->heap = v;
        w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&x, &w->heap[parent])) break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = x;
    return true;
}

static spm_bigram heap_pop(spm_work *w)
{
    spm_bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->n_heap) break;
        if (c + 1 < w->n_heap && bigram_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->n_heap) w->heap[i] = last;
    return top;
}

static bool try_add_bigram(spm_work *w, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return true;
    const spm_sym *l = &w->sym[left], *r = &w->sym[right];
    uint32_t size = l->n + r->n;  /* symbols are contiguous: left's start spans both */
    int32_t id = tok_strmap_get(&w->tok->tokens, w->text + l->start, size, VKV_TOKEN_NULL);
    if (id == VKV_TOKEN_NULL) return true;
    spm_bigram b = {w->tok->score[id], left, right, size};
    return heap_push(w, b);
}

vkv_status tok_spm_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, bool space_prefix,
                            tok_ids *out)
{
    /* escape: ' ' -> U+2581 (3 bytes) */
    size_t n_sp = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t n = len + (space_prefix ? 1 : 0) + 2 * n_sp;
    if (n == 0) return VKV_OK;
    char *buf = malloc(n);
    spm_sym *sym = malloc(n * sizeof *sym);
    spm_work w = {tok, buf, sym, NULL, 0, 0};
    vkv_status st = VKV_OK;
    if (!buf || !sym) {
        st = vkv_error(VKV_ERR_OOM, "out of memory tokenizing %zu bytes", len);
        goto done;
    }
    size_t k = 0;
    if (space_prefix) {
        memcpy(buf, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            buf[k++] = text[i];
        }
    }

    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = tok_utf8_len((unsigned char)buf[off]);
        if (cl > n - off) cl = n - off;
        sym[n_sym].start = (uint32_t)off;
        sym[n_sym].n = (uint32_t)cl;
        sym[n_sym].prev = n_sym - 1;
        off += cl;
        sym[n_sym].next = off == n ? -1 : n_sym + 1;
        n_sym++;
    }

    for (int32_t i = 1; i < n_sym; i++)
        if (!try_add_bigram(&w, i - 1, i)) goto oom;

    while (w.n_heap) {
        spm_bigram b = heap_pop(&w);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!try_add_bigram(&w, l->prev, b.left) || !try_add_bigram(&w, b.left, l->next)) goto oom;
    }

    /* every merged symbol is a token; a single character may not be, and
     * then its bytes are emitted as byte tokens */
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        int32_t id = tok_strmap_get(&tok->tokens, buf + sym[i].start, sym[i].n, VKV_TOKEN_NULL);
        if (id != VKV_TOKEN_NULL) {
            if ((st = tok_ids_push(out, id))) goto done;
            continue;
        }
        for (uint32_t j = 0; j < sym[i].n; j++) {
            int32_t bt = tok->byte_token[(unsigned char)buf[sym[i].start + j]];
            if (bt == VKV_TOKEN_NULL) bt = tok->unk;
            if (bt != VKV_TOKEN_NULL && (st = tok_ids_push(out, bt))) goto done;
        }
    }
    goto done;
oom:
    st = vkv_error(VKV_ERR_OOM, "out of memory tokenizing %zu bytes", len);
done:
    free(buf);
    free(sym);
    free(w.heap);
    return st;
}
