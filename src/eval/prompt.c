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
