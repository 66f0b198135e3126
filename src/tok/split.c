/* Tokenizing a prompt that is split into a context and a question: the split
 * is a byte offset into the text, turned here into a token index
 * (docs/ARCHITECTURE.md §1, the session's prompt split). */
#include "tok/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory tokenizing a prompt"); }

bool vkv_token_ends(const vkv_tokenizer *tok, const char *text, size_t len, const int32_t *ids, size_t n,
                    bool skip_bos, bool special, size_t *ends)
{
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && skip_bos) {
            ends[i] = 0;
            continue;
        }
        size_t pl;
        const char *p = vkv_token_to_piece(tok, ids[i], special, &pl);
        if (pl <= len - pos && !memcmp(text + pos, p, pl)) pos += pl;
        else if (pl && p[0] == ' ' && pl - 1 <= len - pos && !memcmp(text + pos, p + 1, pl - 1)) pos += pl - 1;
        else return false;
        ends[i] = pos;
    }
    return pos == len;
}

vkv_status vkv_tokenize_split(const vkv_tokenizer *tok, const char *text, size_t len, size_t split,
                              bool parse_special, int32_t **ids, size_t *n_ids, size_t *n_split)
{
    *ids = NULL;
    *n_ids = *n_split = 0;
    if (split > len) split = len;
    int32_t *t;
    size_t n;
    vkv_status st = vkv_tokenize(tok, text, len, true, parse_special, &t, &n);
    if (st) return st;
    bool skip_bos = n && vkv_tokenizer_adds_bos(tok) && t[0] == vkv_tokenizer_bos(tok);
    size_t *ends = malloc((n + 1) * sizeof *ends);
    if (!ends) {
        free(t);
        return oom();
    }
    if (vkv_token_ends(tok, text, len, t, n, skip_bos, parse_special, ends)) {
        size_t k = skip_bos ? 1 : 0;
        while (k < n && ends[k] <= split) k++;
        free(ends);
        *ids = t;
        *n_ids = n;
        *n_split = split >= len ? n : k;
        return VKV_OK;
    }
    /* The pieces do not spell the text: tokenize the parts separately. */
    free(ends);
    free(t);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    st = vkv_tokenize(tok, text, split, true, parse_special, &a, &na);
    if (!st && split < len) st = vkv_tokenize(tok, text + split, len - split, false, parse_special, &b, &nb);
    if (!st && !(t = malloc((na + nb + 1) * sizeof *t))) st = oom();
    if (!st) {
        if (na) memcpy(t, a, na * sizeof *t);
        if (nb) memcpy(t + na, b, nb * sizeof *t);
        *ids = t;
        *n_ids = na + nb;
        *n_split = na;
    }
    free(a);
    free(b);
    return st;
}
