/* The paper's protocol: kvpress's LongBench prompts (src/eval/kvpress_prompt.c)
 * against expected prompts kept as test data (tests/data/kvpress_longbench.json,
 * built by hand from kvpress's per-task templates and its pipeline's rules; see
 * tests/data/README.md). One sample of every English task with Hugging Face's
 * Llama-3.1 chat template, one without a template and one query-aware. The
 * expected texts are tokenized the way kvpress does (special tokens parsed,
 * no token added) with the Llama-3 vocabulary of ../shared/vocab, and must
 * give exactly vkvector's context ids, question ids and split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"
#include "eval/kvpress_prompt.h"
#include "eval/metrics.h"
#include "model/gguf.h"

typedef struct fixture {
    vkv_tokenizer *tok;
    vkv_json_doc *data, *prompts;
} fixture;

static const char *shared_dir(void)
{
    const char *s = getenv("VKVECTOR_SHARED");
    return s && *s ? s : "../shared";
}

static int setup(void **state)
{
    static fixture f;
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-bpe.gguf", shared_dir());
    vkv_gguf *g;
    if (vkv_gguf_open(path, &g)) {
        print_message("%s: %s\n", path, vkv_last_error());
        return -1;
    }
    vkv_status st = vkv_tokenizer_load(g, &f.tok);
    vkv_gguf_close(g);
    snprintf(path, sizeof path, "%s/longbench/dataset2prompt.json", shared_dir());
    if (st || vkv_json_parse_file("tests/data/kvpress_longbench.json", &f.data) || vkv_json_parse_file(path, &f.prompts)) {
        print_message("setup: %s\n", vkv_last_error());
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vkv_tokenizer_free(f->tok);
    vkv_json_free(f->data);
    vkv_json_free(f->prompts);
    return 0;
}

static const char *str(const vkv_json *obj, const char *key)
{
    const vkv_json *v = vkv_json_get(obj, key);
    assert_non_null(v);
    assert_int_equal(v->type, VKV_JSON_STRING);
    return v->string;
}

/* kvpress's tokenization of an expected text: special tokens parsed, none added. */
static int32_t *expected_ids(const fixture *f, const char *text, size_t *n)
{
    int32_t *ids = NULL;
    assert_int_equal(vkv_tokenize(f->tok, text, strlen(text), false, true, &ids, n), VKV_OK);
    return ids;
}

/* One sample: texts equal, ids equal, split equal; max_context cuts the context. */
static void check_sample(const fixture *f, const vkv_json *s, size_t max_context)
{
    const char *task = str(s, "task");
    const vkv_json *tmpl = vkv_json_get(vkv_json_root(f->prompts), task), *qa = vkv_json_get(s, "query_aware");
    assert_non_null(tmpl);
    vkv_chat_template t = strcmp(str(s, "chat_template"), "none") ? vkv_chat_template_detect(str(s, "chat_template"))
                                                                   : VKV_CHAT_UNKNOWN;
    vkv_kvpress_parts parts;
    char *ctx_text, *q_text;
    if (vkv_kvpress_split(task, tmpl->string, str(s, "context"), str(s, "input"), &parts)) fail_msg("%s", vkv_last_error());
    assert_int_equal(vkv_kvpress_texts(t, &parts, qa && qa->boolean, &ctx_text, &q_text), VKV_OK);
    /* kvpress's context text starts with the BOS text; vkvector adds BOS as a token */
    const char *want_ctx = str(s, "expected_context"), *bos = "<|begin_of_text|>";
    assert_memory_equal(want_ctx, bos, strlen(bos));
    assert_string_equal(ctx_text, want_ctx + strlen(bos));
    assert_string_equal(q_text, str(s, "expected_question"));

    int32_t *ids;
    size_t n, n_ctx, n_orig, n_want_c, n_want_q;
    assert_int_equal(vkv_kvpress_tokenize(f->tok, ctx_text, q_text, max_context, &ids, &n, &n_ctx, &n_orig), VKV_OK);
    int32_t *want_c = expected_ids(f, want_ctx, &n_want_c), *want_q = expected_ids(f, str(s, "expected_question"), &n_want_q);
    assert_int_equal(n_orig, n_want_c);
    size_t cut = max_context && n_want_c > max_context ? max_context : n_want_c;
    assert_int_equal(n_ctx, cut);
    assert_int_equal(n, cut + n_want_q);
    assert_memory_equal(ids, want_c, sizeof *ids * cut);
    assert_memory_equal(ids + cut, want_q, sizeof *ids * n_want_q);
    free(ids);
    free(want_c);
    free(want_q);
    free(ctx_text);
    free(q_text);
    vkv_kvpress_parts_free(&parts);
}

static void every_task_matches_the_expected_prompt(void **state)
{
    const fixture *f = *state;
    const vkv_json *samples = vkv_json_get(vkv_json_root(f->data), "samples");
    assert_non_null(samples);
    bool seen[VKV_LB_N_TASKS] = {0};
    for (size_t i = 0; i < samples->n_items; i++) {
        check_sample(f, samples->items[i], 0);
        for (size_t k = 0; k < VKV_LB_N_TASKS; k++) seen[k] |= !strcmp(vkv_lb_tasks[k].name, str(samples->items[i], "task"));
    }
    for (size_t k = 0; k < VKV_LB_N_TASKS; k++)
        if (!seen[k]) fail_msg("no sample of %s", vkv_lb_tasks[k].name);
}

/* kvpress keeps the first max_context_length tokens of the context. */
static void the_context_is_cut_at_its_head(void **state)
{
    const fixture *f = *state;
    const vkv_json *samples = vkv_json_get(vkv_json_root(f->data), "samples");
    check_sample(f, samples->items[0], 40);
}

static void unknown_tasks_and_foreign_prompts_are_refused(void **state)
{
    (void)state;
    vkv_kvpress_parts p;
    assert_int_equal(vkv_kvpress_split("dureader", "{context}{input}", "c", "i", &p), VKV_ERR_ARG);
    assert_int_equal(vkv_kvpress_split("hotpotqa", "{context}\n\nQ: {input}\nA:", "c", "i", &p), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "hotpotqa"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_task_matches_the_expected_prompt),
        cmocka_unit_test(the_context_is_cut_at_its_head),
        cmocka_unit_test(unknown_tasks_and_foreign_prompts_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
