/* RULER (src/eval/ruler.c): kvpress's string_match_all / string_match_part
 * per sample, kvpress's row checks, and the generator: the same seed gives
 * the same sample, another seed another one, every sample fits its length
 * and holds its answers. Tokens are counted here as white-space separated
 * words, so no model is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eval/ruler.h"
#define TEST_TMPDIR_NAME "ruler"
#include "test_tmpdir.h"

static const vkv_ruler_task *task(const char *name)
{
    const vkv_ruler_task *t = vkv_ruler_find_task(name);
    assert_non_null(t);
    return t;
}

static void match_all_counts_each_reference(void **state)
{
    (void)state;
    const char *refs[] = {"apple", "Pear", "1234567"};
    assert_float_equal(vkv_ruler_match_all("APPLE, pear and 1234567", refs, 3), 1.0, 1e-12);
    assert_float_equal(vkv_ruler_match_all("an apple and a plum", refs, 3), 1.0 / 3, 1e-12);
    assert_float_equal(vkv_ruler_match_all("", refs, 3), 0.0, 1e-12);
    assert_float_equal(vkv_ruler_match_all("pear pear pear", refs, 3), 1.0 / 3, 1e-12); /* a repeat counts once */
    assert_float_equal(vkv_ruler_match_all("anything", refs, 0), 0.0, 1e-12);
}

static void match_part_wants_one_reference(void **state)
{
    (void)state;
    const char *refs[] = {"Paris", "the capital of France"};
    assert_float_equal(vkv_ruler_match_part("It is paris.", refs, 2), 1.0, 1e-12);
    assert_float_equal(vkv_ruler_match_part("THE CAPITAL OF FRANCE", refs, 2), 1.0, 1e-12);
    assert_float_equal(vkv_ruler_match_part("Lyon", refs, 2), 0.0, 1e-12);
    assert_float_equal(vkv_ruler_match_part("", refs, 2), 0.0, 1e-12);
}

static void score_picks_the_metric_and_cleans_the_prediction(void **state)
{
    (void)state;
    const char *refs[] = {"abc", "xyz"};
    /* qa: any reference; the others: the fraction */
    assert_float_equal(vkv_ruler_score(task("qa_1"), "abc", refs, 2), 1.0, 1e-12);
    assert_float_equal(vkv_ruler_score(task("niah_multivalue"), "abc", refs, 2), 0.5, 1e-12);
    assert_float_equal(vkv_ruler_score(task("cwe"), "  xyz\n abc\t", refs, 2), 1.0, 1e-12);
    /* control characters are removed before matching: "a\nbc" holds abc */
    assert_float_equal(vkv_ruler_score(task("vt"), "a\nbc x\x01yz", refs, 2), 1.0, 1e-12);
    assert_float_equal(vkv_ruler_score(task("fwe"), "", refs, 2), 0.0, 1e-12);
}

static void tasks_and_generation_lengths(void **state)
{
    (void)state;
    assert_int_equal(VKV_RULER_N_TASKS, 13);
    assert_null(vkv_ruler_find_task("niah_single_4"));
    assert_int_equal(vkv_ruler_max_new_tokens(task("niah_multiquery")), 128);
    assert_int_equal(vkv_ruler_max_new_tokens(task("vt")), 30);
    assert_int_equal(vkv_ruler_max_new_tokens(task("cwe")), 120);
    assert_int_equal(vkv_ruler_max_new_tokens(task("fwe")), 50);
    assert_int_equal(vkv_ruler_max_new_tokens(task("qa_2")), 32);
}

static const char *row_check(const char *text)
{
    static char why[256];
    vkv_json_doc *doc = NULL;
    assert_int_equal(vkv_json_parse(text, strlen(text), &doc), VKV_OK);
    const char *r = vkv_ruler_row_check(vkv_json_root(doc));
    if (r) snprintf(why, sizeof why, "%s", r);
    vkv_json_free(doc);
    return r ? why : NULL;
}

#define ROW(answer, task, mnt) "{\"context\": \"c\", \"question\": \"q\", \"answer_prefix\": \"a\", \"answer\": " answer \
                               ", \"task\": " task ", \"max_new_tokens\": " mnt "}"

static void rows_are_checked(void **state)
{
    (void)state;
    assert_null(row_check(ROW("[\"x\", \"y\"]", "\"vt\"", "30")));
    assert_non_null(strstr(row_check(ROW("[]", "\"vt\"", "30")), "answer"));
    assert_non_null(strstr(row_check(ROW("\"x\"", "\"vt\"", "30")), "answer"));
    assert_non_null(strstr(row_check(ROW("[1]", "\"vt\"", "30")), "answer"));
    assert_non_null(strstr(row_check(ROW("[\"x\"]", "\"vt2\"", "30")), "task"));
    assert_non_null(strstr(row_check(ROW("[\"x\"]", "\"vt\"", "0")), "max_new_tokens"));
    assert_non_null(strstr(row_check(ROW("[\"x\"]", "\"vt\"", "2.5")), "max_new_tokens"));
    assert_non_null(strstr(row_check("{\"question\": \"q\"}"), "context"));
    assert_non_null(row_check("[1, 2]"));
}

/* ---- the generator ---- */

static vkv_status count_words(void *ctx, const char *text, size_t *n)
{
    (void)ctx;
    size_t k = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == '\n') p++;
        if (!*p) break;
        k++;
        while (*p && *p != ' ' && *p != '\n') p++;
    }
    *n = k;
    return VKV_OK;
}

static char **test_words(size_t n)
{
    char **w = calloc(n, sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w[i] = malloc(8);
        snprintf(w[i], 8, "w%c%c%c", 'a' + (int)(i % 26), 'a' + (int)(i / 26 % 26), 'a' + (int)(i / 676 % 26));
    }
    return w;
}

static const char essays[] = "The first essay is short. It has a few sentences! Does it end? Yes, here. "
                             "Then a second one follows with more words in it. And a last line.";

static void check_sample(const vkv_ruler_sample *s, size_t length, const vkv_ruler_task *t)
{
    size_t n = 0;
    char *all = malloc(strlen(s->context) + strlen(s->question) + strlen(s->answer_prefix) + 1);
    strcpy(all, s->context);
    strcat(all, s->question);
    strcat(all, s->answer_prefix);
    count_words(NULL, all, &n);
    free(all);
    assert_true(n + vkv_ruler_max_new_tokens(t) <= length);
    assert_true(n + vkv_ruler_max_new_tokens(t) > length - 40); /* filled close to the length */
    assert_true(s->n_answers > 0);
    for (size_t i = 0; i < s->n_answers; i++) {
        if (t->kind == VKV_RULER_FWE) continue; /* its answers are words of the coded text */
        assert_non_null(strstr(s->context, s->answers[i]));
    }
}

static void generator_is_deterministic(void **state)
{
    (void)state;
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = essays, .essays_len = strlen(essays), .words = words, .n_words = 2000};
    for (int t = 0; t < VKV_RULER_N_TASKS; t++) {
        const vkv_ruler_task *tk = &vkv_ruler_tasks[t];
        vkv_ruler_sample a, b, c;
        if (tk->kind == VKV_RULER_QA) {
            assert_int_equal(vkv_ruler_generate(tk, &src, count_words, NULL, 1024, 7, 0, &a), VKV_ERR_ARG);
            continue;
        }
        assert_int_equal(vkv_ruler_generate(tk, &src, count_words, NULL, 1024, 7, 3, &a), VKV_OK);
        assert_int_equal(vkv_ruler_generate(tk, &src, count_words, NULL, 1024, 7, 3, &b), VKV_OK);
        assert_int_equal(vkv_ruler_generate(tk, &src, count_words, NULL, 1024, 8, 3, &c), VKV_OK);
        assert_string_equal(a.context, b.context);
        assert_string_equal(a.question, b.question);
        assert_string_equal(a.answer_prefix, b.answer_prefix);
        assert_int_equal(a.n_answers, b.n_answers);
        for (size_t i = 0; i < a.n_answers; i++) assert_string_equal(a.answers[i], b.answers[i]);
        assert_true(strcmp(a.context, c.context) != 0); /* another seed, another sample */
        check_sample(&a, 1024, tk);
        vkv_ruler_sample_free(&a);
        vkv_ruler_sample_free(&b);
        vkv_ruler_sample_free(&c);
    }
    for (int i = 0; i < 2000; i++) free(words[i]);
    free(words);
}

static void generator_follows_ruler_templates(void **state)
{
    (void)state;
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = essays, .essays_len = strlen(essays), .words = words, .n_words = 2000};
    vkv_ruler_sample s;
    assert_int_equal(vkv_ruler_generate(task("niah_single_1"), &src, count_words, NULL, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(s.n_answers, 1);
    assert_int_equal(strlen(s.answers[0]), 7); /* a 7-digit number */
    assert_non_null(strstr(s.context, "A special magic number is hidden"));
    assert_non_null(strstr(s.context, "The grass is green."));
    assert_non_null(strstr(s.question, "What is the special magic number for "));
    assert_non_null(strstr(s.answer_prefix, "mentioned in the provided text is"));
    vkv_ruler_sample_free(&s);
    assert_int_equal(vkv_ruler_generate(task("niah_multiquery"), &src, count_words, NULL, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(s.n_answers, 4);
    assert_non_null(strstr(s.question, "What are all the special magic numbers for "));
    assert_non_null(strstr(s.question, ", and "));
    vkv_ruler_sample_free(&s);
    assert_int_equal(vkv_ruler_generate(task("niah_multikey_3"), &src, count_words, NULL, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(strlen(s.answers[0]), 36); /* a UUID */
    assert_int_equal(s.answers[0][14], '4');
    vkv_ruler_sample_free(&s);
    assert_int_equal(vkv_ruler_generate(task("vt"), &src, count_words, NULL, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(s.n_answers, 5);
    assert_non_null(strstr(s.answer_prefix, "5 variables are assigned the value"));
    vkv_ruler_sample_free(&s);
    /* too short for the task's generation plus its smallest prompt */
    assert_int_equal(vkv_ruler_generate(task("cwe"), &src, count_words, NULL, 130, 1, 0, &s), VKV_ERR_ARG);
    assert_int_equal(vkv_ruler_generate(task("fwe"), &src, count_words, NULL, 100, 1, 0, &s), VKV_ERR_ARG);
    /* no essays */
    vkv_ruler_sources none = {.words = words, .n_words = 2000};
    assert_int_equal(vkv_ruler_generate(task("niah_single_2"), &none, count_words, NULL, 512, 1, 0, &s), VKV_ERR_ARG);
    for (int i = 0; i < 2000; i++) free(words[i]);
    free(words);
}

static const char *write_file(const char *name, const char *text)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* SQuAD's and HotpotQA's layouts: the documents sorted and unique, impossible
 * questions left out, the gold and same-article documents; then qa_1 and
 * qa_2 generated from them hold their gold documents and answers. */
static void qa_sets_are_read_and_generated(void **state)
{
    (void)state;
    const char *squad = write_file("squad.json",
        "{\"data\": [{\"paragraphs\": ["
        "{\"context\": \"Paris is the capital of France.\", \"qas\": [{\"question\": \"What is the capital of France?\", "
        "\"answers\": [{\"text\": \"Paris\"}, {\"text\": \"paris\"}], \"is_impossible\": false}, {\"question\": \"Who?\", "
        "\"answers\": [], \"is_impossible\": true}]},"
        "{\"context\": \"France is in Europe.\", \"qas\": []}]},"
        "{\"paragraphs\": [{\"context\": \"Berlin is in Germany.\", \"qas\": []},"
        "{\"context\": \"Rome is old.\", \"qas\": []}, {\"context\": \"Madrid is in Spain.\", \"qas\": []}]}]}");
    vkv_ruler_qa_set sq, hp;
    assert_int_equal(vkv_ruler_read_squad(squad, &sq), VKV_OK);
    assert_int_equal(sq.n_docs, 5);
    assert_string_equal(sq.docs[0], "Berlin is in Germany.");
    assert_int_equal(sq.n_qas, 1);
    assert_int_equal(sq.qas[0].n_answers, 2);
    assert_int_equal(sq.qas[0].n_gold, 1);
    assert_string_equal(sq.docs[sq.qas[0].gold[0]], "Paris is the capital of France.");
    assert_int_equal(sq.qas[0].n_more, 1);
    assert_string_equal(sq.docs[sq.qas[0].more[0]], "France is in Europe.");
    const char *hotpot = write_file("hotpot.json",
        "[{\"question\": \"Which river runs through the city where Ada was born?\", \"answer\": \"Thames\", "
        "\"context\": [[\"Ada\", [\"Ada was born in London.\", \" She wrote notes.\"]], [\"London\", "
        "[\"London lies on the Thames.\"]]]}, {\"question\": \"Q2?\", \"answer\": \"A2\", \"context\": [[\"Ada\", "
        "[\"Ada was born in London.\", \" She wrote notes.\"]], [\"Oslo\", [\"Oslo is cold.\"]]]}]");
    assert_int_equal(vkv_ruler_read_hotpotqa(hotpot, &hp), VKV_OK);
    assert_int_equal(hp.n_docs, 3); /* Ada's document once */
    assert_string_equal(hp.docs[0], "Ada\nAda was born in London. She wrote notes.");
    assert_int_equal(hp.qas[0].n_gold, 2);
    assert_string_equal(hp.qas[0].answers[0], "Thames");
    /* not their layouts */
    vkv_ruler_qa_set bad;
    assert_int_equal(vkv_ruler_read_squad(hotpot, &bad), VKV_ERR_FORMAT);
    assert_int_equal(vkv_ruler_read_hotpotqa(squad, &bad), VKV_ERR_FORMAT);
    assert_int_equal(vkv_ruler_read_squad(tmp_path("absent.json"), &bad), VKV_ERR_IO);

    char **words = test_words(2000);
    vkv_ruler_sources src = {.words = words, .n_words = 2000, .squad = &sq, .hotpotqa = &hp};
    vkv_ruler_sample a, b;
    assert_int_equal(vkv_ruler_generate(task("qa_1"), &src, count_words, NULL, 150, 3, 0, &a), VKV_OK);
    assert_int_equal(vkv_ruler_generate(task("qa_1"), &src, count_words, NULL, 150, 3, 0, &b), VKV_OK);
    assert_string_equal(a.context, b.context);
    assert_non_null(strstr(a.context, "Paris is the capital of France."));
    assert_non_null(strstr(a.context, "Document 1:\n"));
    assert_non_null(strstr(a.question, "Question: What is the capital of France? "));
    assert_string_equal(a.answer_prefix, "Answer:");
    assert_int_equal(a.n_answers, 2);
    vkv_ruler_sample_free(&a);
    vkv_ruler_sample_free(&b);
    assert_int_equal(vkv_ruler_generate(task("qa_2"), &src, count_words, NULL, 150, 3, 0, &a), VKV_OK);
    assert_non_null(strstr(a.context, "London lies on the Thames."));
    assert_non_null(strstr(a.context, "Ada was born in London."));
    assert_string_equal(a.answers[0], "Thames");
    vkv_ruler_sample_free(&a);
    vkv_ruler_qa_set_free(&sq);
    vkv_ruler_qa_set_free(&hp);
    for (int i = 0; i < 2000; i++) free(words[i]);
    free(words);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(match_all_counts_each_reference),
        cmocka_unit_test(match_part_wants_one_reference),
        cmocka_unit_test(score_picks_the_metric_and_cleans_the_prediction),
        cmocka_unit_test(tasks_and_generation_lengths),
        cmocka_unit_test(rows_are_checked),
        cmocka_unit_test(generator_is_deterministic),
        cmocka_unit_test(generator_follows_ruler_templates),
        cmocka_unit_test(qa_sets_are_read_and_generated),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
