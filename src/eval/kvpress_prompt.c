/* kvpress's LongBench format (see kvpress_prompt.h). */
#include "eval/kvpress_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "eval/prompt.h"

/* Where each task's question starts in LongBench's prompt (NULL: the prompt
 * has no question, it is the input itself), its answer prefix, and whether
 * the input ends with that prefix. */
static const struct kvpress_task {
    const char *name, *question_start, *answer_prefix;
    bool input_has_prefix;
} kvpress_tasks[] = {
    {"narrativeqa", "Question: {input}", "Answer:", false},
    {"qasper", "Question: {input}", "Answer:", false},
    {"multifieldqa_en", "Question: {input}", "Answer:", false},
    {"hotpotqa", "Question: {input}", "Answer:", false},
    {"2wikimqa", "Question: {input}", "Answer:", false},
    {"musique", "Question: {input}", "Answer:", false},
    {"gov_report", "Now, write a one-page summary of the report.", "Summary:", false},
    {"qmsum", "Query: {input}", "Answer:", false},
    {"multi_news", "Now, write a one-page summary of all the news.", "Summary:", false},
    {"trec", "{input}", "Type:", true},
    {"triviaqa", "{input}", "Answer:", true},
    {"samsum", "{input}", "Summary:", true},
    {"passage_count", "Please enter the final count", "The final answer is: ", false},
    {"passage_retrieval_en", "{input}", "The answer is: ", false},
    {"lcc", NULL, "Next line of code:\n", false},
    {"repobench-p", "{input}", "Next line of code:\n", false},
};

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory building a kvpress prompt"); }

static char *strndup_or_null(const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

void vkv_kvpress_parts_free(vkv_kvpress_parts *p)
{
    free(p->context);
    free(p->question);
    memset(p, 0, sizeof *p);
}

/* Python's str.format of a template with one field (the other absent). */
static vkv_status fill(const char *tmpl, size_t len, const char *context, const char *input, char **out)
{
    char *t = strndup_or_null(tmpl, len);
    if (!t) return oom();
    size_t n, split;
    vkv_status st = vkv_lb_format(t, context, input, out, &n, &split);
    free(t);
    return st;
}

vkv_status vkv_kvpress_split(const char *task, const char *tmpl, const char *context, const char *input,
                             vkv_kvpress_parts *out)
{
    memset(out, 0, sizeof *out);
    const struct kvpress_task *k = NULL;
    for (size_t i = 0; i < sizeof kvpress_tasks / sizeof *kvpress_tasks; i++)
        if (!strcmp(kvpress_tasks[i].name, task)) k = &kvpress_tasks[i];
    if (!k) return vkv_error(VKV_ERR_ARG, "%s: kvpress's LongBench format has no such task", task);
    /* The question part ends where the answer prefix starts, or at the end
     * when the input carries the prefix. */
    const size_t tl = strlen(tmpl), al = strlen(k->answer_prefix);
    const size_t q_end = k->input_has_prefix ? tl : tl >= al ? tl - al : 0;
    const char *q = k->question_start ? strstr(tmpl, k->question_start) : tmpl + q_end;
    if (tl < al || (!k->input_has_prefix && strcmp(tmpl + q_end, k->answer_prefix)) || !q || q > tmpl + q_end)
        return vkv_error(VKV_ERR_FORMAT, "%s: the prompt does not end with its question and \"%s\" as kvpress's format "
                                         "expects", task, k->answer_prefix);
    /* kvpress removes the answer prefix the input of some tasks ends with */
    size_t il = strlen(input);
    if (k->input_has_prefix && il >= al && !strcmp(input + il - al, k->answer_prefix)) il -= al;
    char *in = strndup_or_null(input, il);
    if (!in) return oom();
    vkv_status st = fill(tmpl, (size_t)(q - tmpl), context, "", &out->context);
    if (!st) st = k->question_start ? fill(q, (size_t)(tmpl + q_end - q), "", in, &out->question)
                                    : ((out->question = strndup_or_null(in, il)) ? VKV_OK : oom());
    free(in);
    out->answer_prefix = k->answer_prefix;
    if (st) vkv_kvpress_parts_free(out);
    return st;
}

/* A marker the context cannot contain, where the chat template's user
 * message is cut (kvpress cuts at a run of '#' longer than the context). */
#define KVPRESS_SEPARATOR "\x02VKVECTOR_QUESTION\x02"

vkv_status vkv_kvpress_texts(vkv_chat_template t, const vkv_kvpress_parts *p, bool query_aware, char **context_text,
                             char **question_text)
{
    *context_text = *question_text = NULL;
    const char *question = p->question;
    vkv_strbuf ctx = {0}, qs = {0};
    vkv_strbuf_put(&ctx, "", 0);
    vkv_strbuf_put(&qs, "", 0);
    vkv_strbuf_puts(&ctx, p->context);
    if (query_aware) {
        vkv_strbuf_puts(&ctx, p->question);
        question = "";
    }
    vkv_strbuf_puts(&qs, question);
    if (t == VKV_CHAT_UNKNOWN) {
        vkv_strbuf_puts(&qs, "\n");
    } else {
        vkv_strbuf_puts(&ctx, KVPRESS_SEPARATOR);
        if (ctx.oom) goto oom;
        vkv_chat_msg msg = {"user", ctx.p};
        char *r;
        size_t rl;
        vkv_status st = vkv_chat_apply(t, &msg, 1, true, &r, &rl);
        if (st) {
            free(ctx.p);
            free(qs.p);
            return st;
        }
        char *m = strstr(r, KVPRESS_SEPARATOR);
        if (!m) {
            free(r);
            free(ctx.p);
            free(qs.p);
            return vkv_error(VKV_ERR_FORMAT, "the chat template dropped the question marker");
        }
        ctx.n = 0;
        vkv_strbuf_put(&ctx, r, (size_t)(m - r));
        vkv_strbuf_puts(&qs, m + strlen(KVPRESS_SEPARATOR));
        free(r);
    }
    vkv_strbuf_puts(&qs, p->answer_prefix);
    if (ctx.oom || qs.oom) goto oom;
    *context_text = ctx.p;
    *question_text = qs.p;
    return VKV_OK;
oom:
    free(ctx.p);
    free(qs.p);
    return oom();
}

vkv_status vkv_kvpress_tokenize(const vkv_tokenizer *tok, const char *context_text, const char *question_text,
                                size_t max_context, int32_t **ids, size_t *n_ids, size_t *n_context,
                                size_t *n_context_orig)
{
    *ids = NULL;
    int32_t *c = NULL, *q = NULL;
    size_t nc = 0, nq = 0;
    vkv_status st = vkv_tokenize(tok, context_text, strlen(context_text), true, true, &c, &nc);
    if (!st) st = vkv_tokenize(tok, question_text, strlen(question_text), false, true, &q, &nq);
    if (st) {
        free(c);
        free(q);
        return st;
    }
    *n_context_orig = nc;
    if (max_context && nc > max_context) nc = max_context;
    int32_t *all = malloc(sizeof *all * (nc + nq ? nc + nq : 1));
    if (!all) {
        free(c);
        free(q);
        return oom();
    }
    memcpy(all, c, sizeof *all * nc);
    memcpy(all + nc, q, sizeof *all * nq);
    free(c);
    free(q);
    *ids = all;
    *n_ids = nc + nq;
    *n_context = nc;
    return VKV_OK;
}
