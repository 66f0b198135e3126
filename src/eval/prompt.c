/* Evaluation prompts: formatting, chat template, truncation, split tokenization. */
#include "eval/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory building a prompt"); }

vkv_status vkv_lb_format(const char *tmpl, const char *context, const char *input, char **out, size_t *len,
                         size_t *split)
{
    *out = NULL;
    vkv_strbuf b = {0};
    vkv_strbuf_put(&b, "", 0);
    bool have_input = false, have_context = false;
    size_t input_at = 0, context_end = 0;
    for (const char *p = tmpl; *p;) {
        if (p[0] == '{' && p[1] == '{') { vkv_strbuf_put(&b, "{", 1); p += 2; continue; }
        if (p[0] == '}' && p[1] == '}') { vkv_strbuf_put(&b, "}", 1); p += 2; continue; }
        if (p[0] == '}') {
            free(b.p);
            return vkv_error(VKV_ERR_FORMAT, "prompt template: single '}' at offset %zu", (size_t)(p - tmpl));
        }
        if (p[0] == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                free(b.p);
                return vkv_error(VKV_ERR_FORMAT, "prompt template: unterminated '{' at offset %zu", (size_t)(p - tmpl));
            }
            size_t n = (size_t)(e - p - 1);
            if (n == 7 && !strncmp(p + 1, "context", 7)) {
                vkv_strbuf_puts(&b, context);
                have_context = true;
                context_end = b.n;
            } else if (n == 5 && !strncmp(p + 1, "input", 5)) {
                if (!have_input) input_at = b.n;
                have_input = true;
                vkv_strbuf_puts(&b, input);
            } else {
                free(b.p);
                return vkv_error(VKV_ERR_FORMAT, "prompt template: unknown field '{%.*s}' (LongBench's have {context} "
                                                 "and {input})", (int)n, p + 1);
            }
            p = e + 1;
            continue;
        }
        const char *q = p;
        while (*q && *q != '{' && *q != '}') q++;
        vkv_strbuf_put(&b, p, (size_t)(q - p));
        p = q;
    }
    if (b.oom) {
        free(b.p);
        return oom();
    }
    *out = b.p;
    *len = b.n;
    *split = have_input ? input_at : have_context ? context_end : b.n;
    return VKV_OK;
}

#define SPLIT_MARKER "\x01VKVECTOR_SPLIT\x01"

vkv_status vkv_eval_chat_wrap(vkv_chat_template t, const char *text, size_t len, size_t split, char **out,
                              size_t *out_len, size_t *out_split)
{
    *out = NULL;
    size_t ml = strlen(SPLIT_MARKER);
    char *marked = malloc(len + ml + 1);
    if (!marked) return oom();
    memcpy(marked, text, split);
    memcpy(marked + split, SPLIT_MARKER, ml);
    memcpy(marked + split + ml, text + split, len - split);
    marked[len + ml] = 0;
    vkv_chat_msg msg = {"user", marked};
    char *r;
    size_t rl;
    vkv_status st = vkv_chat_apply(t, &msg, 1, true, &r, &rl);
    free(marked);
    if (st) return st;
    char *m = strstr(r, SPLIT_MARKER);
    if (!m) {
        free(r);
        return vkv_error(VKV_ERR_FORMAT, "the chat template dropped the question marker");
    }
    size_t at = (size_t)(m - r);
    memmove(m, m + ml, rl - at - ml + 1);
    *out = r;
    *out_len = rl - ml;
    *out_split = at;
    return VKV_OK;
}

vkv_status vkv_eval_chat_overhead(const vkv_tokenizer *tok, vkv_chat_template t, size_t *n)
{
    *n = 0;
    vkv_chat_msg msg = {"user", ""};
    char *r;
    size_t rl;
    vkv_status st = vkv_chat_apply(t, &msg, 1, true, &r, &rl);
    if (st) return st;
    int32_t *ids = NULL;
    st = vkv_tokenize(tok, r, rl, false, true, &ids, n);
    free(ids);
    free(r);
    return st;
}

bool vkv_eval_token_ends(const vkv_tokenizer *tok, const char *text, size_t len, const int32_t *ids, size_t n,
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

vkv_status vkv_eval_tokenize_split(const vkv_tokenizer *tok, const char *text, size_t len, size_t split,
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
    if (vkv_eval_token_ends(tok, text, len, t, n, skip_bos, parse_special, ends)) {
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

vkv_status vkv_lb_truncate_middle(const vkv_tokenizer *tok, const char *text, size_t len, size_t split, size_t max_len,
                                  char **out, size_t *out_len, size_t *out_split, size_t *n_tokens, bool *truncated)
{
    *out = NULL;
    *truncated = false;
    int32_t *t;
    size_t n;
    vkv_status st = vkv_tokenize(tok, text, len, true, false, &t, &n);
    if (st) return st;
    *n_tokens = n;
    if (n <= max_len) {
        free(t);
        char *c = malloc(len + 1);
        if (!c) return oom();
        memcpy(c, text, len);
        c[len] = 0;
        *out = c;
        *out_len = len;
        *out_split = split;
        return VKV_OK;
    }
    size_t half = max_len / 2;
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    st = vkv_detokenize(tok, t, half, false, &a, &la);
    if (!st) st = vkv_detokenize(tok, t + n - half, half, false, &b, &lb);
    free(t);
    if (st) {
        free(a);
        free(b);
        return st;
    }
    /* SentencePiece: the decoded start carries the added space prefix, which
     * Hugging Face's decode drops (and re-tokenizing would add again). */
    size_t skip = vkv_tokenizer_type(tok) == VKV_VOCAB_SPM && la && a[0] == ' ' && (!len || text[0] != ' ');
    char *c = malloc(la - skip + lb + 1);
    if (!c) {
        free(a);
        free(b);
        return oom();
    }
    memcpy(c, a + skip, la - skip);
    memcpy(c + la - skip, b, lb);
    size_t cl = la - skip + lb;
    c[cl] = 0;
    free(a);
    free(b);
    size_t from_end = len - (split < len ? split : len);
    *out_split = from_end <= lb ? cl - from_end : la - skip;
    *out = c;
    *out_len = cl;
    *truncated = true;
    return VKV_OK;
}
