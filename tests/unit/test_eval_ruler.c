/* RULER (src/eval/ruler.c): kvpress's string_match_all / string_match_part
 * per sample, kvpress's row checks, and the generator in both versions:
 * the same seed gives the same sample, another seed another one, every
 * sample fits its length and holds its answers; late 2024's steps, vt and
 * cwe examples and fwe vocabulary against head's; the essay needles
 * between Punkt's sentences; the essays read as RULER reads them. Tokens
 * are counted here as white-space separated words, so no model is needed. */
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

static void free_words(char **w, size_t n)
{
    for (size_t i = 0; i < n; i++) free(w[i]);
    free(w);
}

static const char essays[] = "The first essay is short. It has a few sentences! Does it end? Yes, here. "
                             "Then a second one follows with more words in it. And a last line.";

/* A sample's prompt: context, question and answer prefix. */
static char *prompt(const vkv_ruler_sample *s)
{
    char *all = malloc(strlen(s->context) + strlen(s->question) + strlen(s->answer_prefix) + 1);
    strcpy(all, s->context);
    strcat(all, s->question);
    strcat(all, s->answer_prefix);
    return all;
}

static size_t prompt_words(const vkv_ruler_sample *s)
{
    char *all = prompt(s);
    size_t n = 0;
    count_words(NULL, all, &n);
    free(all);
    return n;
}

static void check_sample(const vkv_ruler_sample *s, size_t length, const vkv_ruler_task *t, vkv_ruler_version v)
{
    size_t n = prompt_words(s);
    /* late-2024 fwe fits its prompt alone, as RULER did */
    size_t gen = v == VKV_RULER_2024 && t->kind == VKV_RULER_FWE ? 0 : vkv_ruler_max_new_tokens(t);
    assert_true(n + gen <= length);
    if (v == VKV_RULER_HEAD) assert_true(n + gen > length - 40); /* filled close to the length */
    assert_true(s->n_answers > 0);
    for (size_t i = 0; i < s->n_answers; i++) {
        if (t->kind == VKV_RULER_FWE) continue; /* its answers are words of the coded text */
        assert_non_null(strstr(s->context, s->answers[i]));
    }
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void generator_is_deterministic(void **state)
{
    (void)state;
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = essays, .essays_len = strlen(essays), .words = words, .n_words = 2000};
    for (int v = 0; v < 2; v++) {
        vkv_ruler_gen run = {.version = v ? VKV_RULER_HEAD : VKV_RULER_2024, .count = count_words};
        for (int t = 0; t < VKV_RULER_N_TASKS; t++) {
            const vkv_ruler_task *tk = &vkv_ruler_tasks[t];
            vkv_ruler_sample a, b, c;
            if (tk->kind == VKV_RULER_QA) {
                assert_int_equal(vkv_ruler_generate(&run, tk, &src, 1024, 7, 0, &a), VKV_ERR_ARG);
                continue;
            }
            assert_int_equal(vkv_ruler_generate(&run, tk, &src, 1024, 7, 3, &a), VKV_OK);
            assert_int_equal(vkv_ruler_generate(&run, tk, &src, 1024, 7, 3, &b), VKV_OK);
            assert_int_equal(vkv_ruler_generate(&run, tk, &src, 1024, 8, 3, &c), VKV_OK);
            assert_string_equal(a.context, b.context);
            assert_string_equal(a.question, b.question);
            assert_string_equal(a.answer_prefix, b.answer_prefix);
            assert_int_equal(a.n_answers, b.n_answers);
            for (size_t i = 0; i < a.n_answers; i++) assert_string_equal(a.answers[i], b.answers[i]);
            assert_true(strcmp(a.context, c.context) != 0); /* another seed, another sample */
            check_sample(&a, 1024, tk, run.version);
            vkv_ruler_sample_free(&a);
            vkv_ruler_sample_free(&b);
            vkv_ruler_sample_free(&c);
        }
        /* late 2024 sizes each (task, length, seed) once: 11 tasks, two seeds */
        assert_int_equal(run.n_sizes, v ? 0 : 22);
        vkv_ruler_gen_free(&run);
        assert_int_equal(run.n_sizes, 0);
    }
    free_words(words, 2000);
}

static void versions_are_named(void **state)
{
    (void)state;
    vkv_ruler_version v = VKV_RULER_HEAD;
    assert_true(vkv_ruler_version_parse("2024", &v) && v == VKV_RULER_2024);
    assert_true(vkv_ruler_version_parse("head", &v) && v == VKV_RULER_HEAD);
    assert_true(vkv_ruler_version_parse(VKV_RULER_2024_COMMIT, &v) && v == VKV_RULER_2024);
    assert_false(vkv_ruler_version_parse("2025", &v));
    assert_string_equal(vkv_ruler_version_name(VKV_RULER_2024), "2024");
    assert_string_equal(vkv_ruler_version_name(VKV_RULER_HEAD), "head");
}

static void generator_follows_ruler_templates(void **state)
{
    (void)state;
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = essays, .essays_len = strlen(essays), .words = words, .n_words = 2000};
    vkv_ruler_gen run = {.version = VKV_RULER_HEAD, .count = count_words};
    vkv_ruler_sample s;
    assert_int_equal(vkv_ruler_generate(&run, task("niah_single_1"), &src, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(s.n_answers, 1);
    assert_int_equal(strlen(s.answers[0]), 7); /* a 7-digit number */
    assert_non_null(strstr(s.context, "A special magic number is hidden"));
    assert_non_null(strstr(s.context, "The grass is green."));
    assert_non_null(strstr(s.question, "What is the special magic number for "));
    assert_non_null(strstr(s.answer_prefix, "mentioned in the provided text is"));
    vkv_ruler_sample_free(&s);
    assert_int_equal(vkv_ruler_generate(&run, task("niah_multiquery"), &src, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(s.n_answers, 4);
    assert_non_null(strstr(s.question, "What are all the special magic numbers for "));
    assert_non_null(strstr(s.question, ", and "));
    vkv_ruler_sample_free(&s);
    assert_int_equal(vkv_ruler_generate(&run, task("niah_multikey_3"), &src, 512, 1, 0, &s), VKV_OK);
    assert_int_equal(strlen(s.answers[0]), 36); /* a UUID */
    assert_int_equal(s.answers[0][14], '4');
    vkv_ruler_sample_free(&s);
    /* too short for the task's generation plus its smallest prompt */
    assert_int_equal(vkv_ruler_generate(&run, task("cwe"), &src, 130, 1, 0, &s), VKV_ERR_ARG);
    assert_int_equal(vkv_ruler_generate(&run, task("fwe"), &src, 100, 1, 0, &s), VKV_ERR_ARG);
    /* no essays */
    vkv_ruler_sources none = {.words = words, .n_words = 2000};
    assert_int_equal(vkv_ruler_generate(&run, task("niah_single_2"), &none, 512, 1, 0, &s), VKV_ERR_ARG);
    vkv_ruler_gen_free(&run);
    free_words(words, 2000);
}

/* What tells the versions apart in the samples: vt's noise joining, its
 * spelling and solved example, cwe's example answer, fwe's vocabulary. */
static void versions_differ_as_ruler_did(void **state)
{
    (void)state;
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = essays, .essays_len = strlen(essays), .words = words, .n_words = 2000};
    vkv_ruler_gen late = {.version = VKV_RULER_2024, .count = count_words};
    vkv_ruler_gen head = {.version = VKV_RULER_HEAD, .count = count_words};
    vkv_ruler_sample a, b, c;

    /* vt, late 2024: the solved example first (3-letter variables, the template's
     * last word "above." dropped), the noise ending with "\n" joined by spaces */
    assert_int_equal(vkv_ruler_generate(&late, task("vt"), &src, 2048, 1, 0, &a), VKV_OK);
    assert_int_equal(vkv_ruler_generate(&late, task("vt"), &src, 1024, 1, 5, &b), VKV_OK);
    const char *ex = " Memorize and track the chain(s) of variable assignment hidden in the following text. ";
    assert_memory_equal(a.context, ex, strlen(ex));
    assert_non_null(strstr(a.context, " in the text Answer: According to the chain(s) of variable assignment in the "
                                      "text above, 5 variables are assgined the value "));
    const char *task_start = strstr(a.context, "\n\n\n\nMemorize and track the chain(s) of variable assignment hidden "
                                               "in the following text.\n\nThe grass is green.");
    assert_non_null(task_start);
    /* the same example at every length and sample of the seed */
    assert_true((size_t)(strstr(b.context, "\n\n\n\nMemorize") - b.context) == (size_t)(task_start - a.context));
    assert_memory_equal(a.context, b.context, (size_t)(task_start - a.context));
    assert_int_equal(strlen(strstr(a.context, "VAR ") + 4), strlen(strstr(a.context, "VAR ") + 4)); /* a chain there */
    assert_true(strchr(a.context, '=') < task_start);
    char ex_var[8] = {0};
    memcpy(ex_var, strstr(a.context, "VAR ") + 4, 4);
    assert_true(ex_var[3] == ' '); /* the example's variables: 3 letters */
    assert_non_null(strstr(task_start, "again.\n The grass is green."));
    assert_non_null(strstr(task_start, "again.\n VAR "));
    assert_null(strstr(task_start, "again.\nThe grass"));
    assert_non_null(strstr(a.answer_prefix, "5 variables are assgined the value"));
    assert_int_equal(strlen(a.answers[0]), 5);
    vkv_ruler_sample_free(&a);
    vkv_ruler_sample_free(&b);
    /* vt, head: one item a line, "assigned", no example */
    assert_int_equal(vkv_ruler_generate(&head, task("vt"), &src, 1024, 1, 0, &a), VKV_OK);
    assert_memory_equal(a.context, "Memorize and track", 18);
    assert_non_null(strstr(a.context, "again.\nThe grass is green."));
    assert_non_null(strstr(a.context, "\nVAR "));
    assert_null(strstr(a.context, "\n VAR "));
    assert_non_null(strstr(a.answer_prefix, "5 variables are assigned the value"));
    vkv_ruler_sample_free(&a);

    /* cwe's solved example: "are:1. w" in late 2024, "are: 1. w" in head */
    assert_int_equal(vkv_ruler_generate(&late, task("cwe"), &src, 2048, 1, 0, &a), VKV_OK);
    assert_int_equal(vkv_ruler_generate(&head, task("cwe"), &src, 2048, 1, 0, &b), VKV_OK);
    assert_non_null(strstr(a.context, "in the list are:1. w"));
    assert_null(strstr(a.context, "in the list are: 1."));
    assert_non_null(strstr(b.context, "in the list are: 1. w"));
    vkv_ruler_sample_free(&a);
    vkv_ruler_sample_free(&b);

    /* fwe's vocabulary: 1024 / 50 = 20 coded words (one of them "...") in
     * late 2024, (1024 - 50) / 50 = 19 in head */
    for (int v = 0; v < 2; v++) {
        assert_int_equal(vkv_ruler_generate(v ? &head : &late, task("fwe"), &src, 1024, 1, 0, &c), VKV_OK);
        const char *p = strstr(c.context, "coded words. ") + strlen("coded words. ");
        char seen[64][8];
        size_t n_seen = 0;
        while (*p && *p != '\n') {
            char w[8] = {0};
            size_t l = strcspn(p, " \n");
            memcpy(w, p, l < 7 ? l : 7);
            bool dup = false;
            for (size_t i = 0; i < n_seen && !dup; i++) dup = !strcmp(seen[i], w);
            if (!dup) strcpy(seen[n_seen++], w);
            p += l;
            if (*p == ' ') p++;
        }
        assert_int_equal(n_seen, v ? 19 : 20);
        vkv_ruler_sample_free(&c);
    }
    vkv_ruler_gen_free(&late);
    vkv_ruler_gen_free(&head);
    free_words(words, 2000);
}

/* Late 2024 grows the haystack in steps (noise lines 25, 5 under 4096
 * tokens; essay words 500; vt lines 10; cwe words 10), so a sample holds a
 * whole number of steps and one more would not fit; head fills closer. */
static void late_2024_grows_in_steps(void **state)
{
    (void)state;
    char **words = test_words(2000);
    /* a long essay text: the short one 200 times */
    size_t el = strlen(essays);
    char *long_essays = malloc(200 * (el + 1) + 1);
    for (int i = 0; i < 200; i++) {
        memcpy(long_essays + i * (el + 1), essays, el);
        long_essays[i * (el + 1) + el] = ' ';
    }
    long_essays[200 * (el + 1)] = 0;
    vkv_ruler_sources src = {.essays = long_essays, .essays_len = strlen(long_essays), .words = words, .n_words = 2000};
    vkv_ruler_gen late = {.version = VKV_RULER_2024, .count = count_words};
    vkv_ruler_gen head = {.version = VKV_RULER_HEAD, .count = count_words};
    static const struct {
        const char *task, *unit;
        size_t length, step, unit_words;
    } cases[] = {
        {"niah_single_1", "The grass is green.", 4096, 25, 19},
        {"niah_single_1", "The grass is green.", 2048, 5, 19},
        {"vt", "The grass is green.", 4096, 10, 19},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        vkv_ruler_sample a, b;
        assert_int_equal(vkv_ruler_generate(&late, task(cases[k].task), &src, cases[k].length, 3, 0, &a), VKV_OK);
        assert_int_equal(vkv_ruler_generate(&head, task(cases[k].task), &src, cases[k].length, 3, 0, &b), VKV_OK);
        const char *hay = cases[k].task[0] == 'v' ? strstr(a.context, "\n\n\n\nMemorize") : a.context;
        size_t units = count_of(hay, cases[k].unit), gen = vkv_ruler_max_new_tokens(task(cases[k].task));
        assert_int_equal(units % cases[k].step, 0);
        size_t n = prompt_words(&a);
        assert_true(n + gen <= cases[k].length);
        assert_true(n + gen + cases[k].step * cases[k].unit_words > cases[k].length); /* one more step: too long */
        assert_true(count_of(b.context, cases[k].unit) % cases[k].step != 0 || prompt_words(&b) > n);
        vkv_ruler_sample_free(&a);
        vkv_ruler_sample_free(&b);
    }
    /* the essays: a multiple of 500 words (the needle and template aside) */
    vkv_ruler_sample a;
    assert_int_equal(vkv_ruler_generate(&late, task("niah_single_2"), &src, 2048, 3, 0, &a), VKV_OK);
    size_t n = prompt_words(&a);
    assert_int_equal((n - prompt_words(&(vkv_ruler_sample){.context = "A special magic number is hidden within the "
        "following text. Make sure to memorize it. I will quiz you about the number afterwards.\n", .question = a.question,
        .answer_prefix = a.answer_prefix}) - 10) % 500, 0); /* the needle: "One of the special magic numbers for k is: v." */
    assert_true(n + 128 + 500 > 2048);
    vkv_ruler_sample_free(&a);
    /* cwe: its list holds a multiple of 10 distinct words; sample 1 reuses the run's size */
    size_t sizes = late.n_sizes;
    vkv_ruler_sample c0, c1;
    assert_int_equal(vkv_ruler_generate(&late, task("cwe"), &src, 2048, 3, 0, &c0), VKV_OK);
    assert_int_equal(vkv_ruler_generate(&late, task("cwe"), &src, 2048, 3, 1, &c1), VKV_OK);
    assert_int_equal(late.n_sizes, sizes + 1);
    const char *list0 = strrchr(c0.context, ':'), *list1 = strrchr(c1.context, ':');
    list0 = strstr(list0, "\n1. ");
    list1 = strstr(list1, "\n1. ");
    assert_non_null(list0);
    assert_non_null(list1);
    /* under 4096 tokens: common words 6 times, the others once: entries = 60 + (words - 10) */
    size_t entries0 = count_of(list0, ". w"), entries1 = count_of(list1, ". w");
    assert_int_equal((entries0 - 60 + 10) % 10, 0);
    /* RULER's fixed-seed shuffle: the common words at the same places in every sample of the size */
    assert_int_equal(entries0, entries1);
    {
        for (int i = 0; i < 10; i++) {
            char w0[16], w1[16];
            snprintf(w0, sizeof w0, " %s", c0.answers[i]);
            snprintf(w1, sizeof w1, " %s", c1.answers[i]);
            assert_int_equal(count_of(list0, w0), 6);
            assert_int_equal(count_of(list1, w1), 6);
        }
        /* entry k of both lists is a common word in one exactly when it is in the other */
        const char *p0 = list0, *p1 = list1;
        for (size_t k = 0; k < entries0; k++) {
            p0 = strstr(p0, ". w") + 2;
            p1 = strstr(p1, ". w") + 2;
            char e0[8] = {0}, e1[8] = {0};
            memcpy(e0, p0, strcspn(p0, " \n"));
            memcpy(e1, p1, strcspn(p1, " \n"));
            bool common0 = false, common1 = false;
            for (int i = 0; i < 10; i++) {
                common0 |= !strcmp(e0, c0.answers[i]);
                common1 |= !strcmp(e1, c1.answers[i]);
            }
            assert_int_equal(common0, common1);
        }
    }
    vkv_ruler_sample_free(&c0);
    vkv_ruler_sample_free(&c1);
    vkv_ruler_gen_free(&late);
    vkv_ruler_gen_free(&head);
    free(long_essays);
    free_words(words, 2000);
}

/* The essay needles go between NLTK Punkt's sentences: never after an
 * abbreviation such as "Mr." or inside "3.14", where a split at ". "
 * would put some. */
static void essay_needles_go_between_sentences(void **state)
{
    (void)state;
    char **words = test_words(2000);
    const char *unit = "Mr. Brown paid 3.14 dollars. Dr. Green, e.g. his friend, came at 5 p.m. too. ";
    size_t ul = strlen(unit);
    char *text = malloc(40 * ul + 1);
    for (int i = 0; i < 40; i++) memcpy(text + i * ul, unit, ul);
    text[40 * ul] = 0;
    vkv_ruler_sources src = {.essays = text, .essays_len = strlen(text), .words = words, .n_words = 2000};
    for (int v = 0; v < 2; v++) {
        vkv_ruler_gen run = {.version = v ? VKV_RULER_HEAD : VKV_RULER_2024, .count = count_words};
        for (uint64_t seed = 1; seed <= 12; seed++) {
            vkv_ruler_sample s;
            assert_int_equal(vkv_ruler_generate(&run, task("niah_multikey_1"), &src, 1024, seed, 0, &s), VKV_OK);
            assert_int_equal(count_of(s.context, "One of the special magic numbers for "), 4);
            for (const char *p = s.context; (p = strstr(p, " One of the special magic")); p++) {
                /* not after an abbreviation or inside a number (a needle may
                 * follow the haystack's last, cut-off sentence) */
                assert_true(p - s.context >= 4);
                assert_true(strncmp(p - 3, "Mr.", 3) && strncmp(p - 3, "Dr.", 3) && strncmp(p - 4, "e.g.", 4) &&
                            strncmp(p - 4, "p.m.", 4) && strncmp(p - 4, "3.14", 4));
            }
            vkv_ruler_sample_free(&s);
        }
        vkv_ruler_gen_free(&run);
    }
    free(text);
    free_words(words, 2000);
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
    vkv_ruler_gen run = {.version = VKV_RULER_HEAD, .count = count_words};
    vkv_ruler_sample a, b;
    assert_int_equal(vkv_ruler_generate(&run, task("qa_1"), &src, 150, 3, 0, &a), VKV_OK);
    assert_int_equal(vkv_ruler_generate(&run, task("qa_1"), &src, 150, 3, 0, &b), VKV_OK);
    assert_string_equal(a.context, b.context);
    assert_non_null(strstr(a.context, "Paris is the capital of France."));
    assert_non_null(strstr(a.context, "Document 1:\n"));
    assert_non_null(strstr(a.question, "Question: What is the capital of France? "));
    assert_string_equal(a.answer_prefix, "Answer:");
    assert_int_equal(a.n_answers, 2);
    vkv_ruler_sample_free(&a);
    vkv_ruler_sample_free(&b);
    assert_int_equal(vkv_ruler_generate(&run, task("qa_2"), &src, 150, 3, 0, &a), VKV_OK);
    assert_non_null(strstr(a.context, "London lies on the Thames."));
    assert_non_null(strstr(a.context, "Ada was born in London."));
    assert_string_equal(a.answers[0], "Thames");
    vkv_ruler_sample_free(&a);
    /* late 2024: 10 documents a step, at most every document once (here all 3) */
    vkv_ruler_gen late = {.version = VKV_RULER_2024, .count = count_words};
    assert_int_equal(vkv_ruler_generate(&late, task("qa_2"), &src, 150, 3, 0, &a), VKV_OK);
    assert_int_equal(count_of(a.context, "Document "), 3);
    assert_non_null(strstr(a.context, "London lies on the Thames."));
    vkv_ruler_sample_free(&a);
    vkv_ruler_gen_free(&late);
    vkv_ruler_gen_free(&run);
    vkv_ruler_qa_set_free(&sq);
    vkv_ruler_qa_set_free(&hp);
    for (int i = 0; i < 2000; i++) free(words[i]);
    free(words);
}

/* The essays as RULER reads them: the .txt files in name order, one after
 * another as they are; words split at any white space (Python's). */
static void essays_are_read_as_ruler_reads_them(void **state)
{
    (void)state;
    write_file("b.txt", "Second essay.");
    write_file("a.txt", "First\xc2\xa0" "essay ends.");
    write_file("c.md", "Not an essay.");
    char *text;
    size_t len;
    assert_int_equal(vkv_ruler_read_essays(tmpdir, &text, &len), VKV_OK);
    assert_string_equal(text, "First\xc2\xa0" "essay ends.Second essay.");
    assert_int_equal(len, strlen(text));
    char **words = test_words(2000);
    vkv_ruler_sources src = {.essays = text, .essays_len = len, .words = words, .n_words = 2000};
    vkv_ruler_gen run = {.version = VKV_RULER_2024, .count = count_words};
    vkv_ruler_sample s;
    assert_int_equal(vkv_ruler_generate(&run, task("niah_single_2"), &src, 512, 1, 0, &s), VKV_OK);
    /* the no-break space splits words; the files' junction does not */
    assert_non_null(strstr(s.context, "First essay"));
    assert_non_null(strstr(s.context, "ends.Second essay."));
    vkv_ruler_sample_free(&s);
    vkv_ruler_gen_free(&run);
    free_words(words, 2000);
    free(text);
    assert_int_equal(vkv_ruler_read_essays(tmp_path("absent"), &text, &len), VKV_ERR_IO);
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
        cmocka_unit_test(versions_are_named),
        cmocka_unit_test(generator_follows_ruler_templates),
        cmocka_unit_test(versions_differ_as_ruler_did),
        cmocka_unit_test(late_2024_grows_in_steps),
        cmocka_unit_test(essay_needles_go_between_sentences),
        cmocka_unit_test(qa_sets_are_read_and_generated),
        cmocka_unit_test(essays_are_read_as_ruler_reads_them),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
