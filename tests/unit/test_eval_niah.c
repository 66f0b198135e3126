/* The needle in a haystack's prompts (src/eval/niah.c) without a model: the
 * haystack directory's reading, sentence ends, and where each protocol puts
 * the needle and cuts the haystack. A run's tokens are faked as one token per
 * word (its leading space included), so every cut is known by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "eval/niah.h"

/* Token i ends after word i:  One| two.| Three| four| five.| Six.|
 *                             3    8     14     19    25     30 */
#define HAY "One two. Three four five. Six."

static vkv_niah_run word_run(const char *text)
{
    vkv_niah_run r = {.text = strdup(text), .len = strlen(text)};
    r.ends = malloc((r.len + 1) * sizeof *r.ends);
    assert_non_null(r.text);
    assert_non_null(r.ends);
    for (size_t i = 1; i <= r.len; i++)
        if (i == r.len || (text[i] == ' ' && text[i - 1] != ' ')) r.ends[r.n_ids++] = i;
    return r;
}

/* The own protocol's prompt with 2 tokens of overhead and a one-token needle:
 * length - 3 tokens of haystack. */
static vkv_niah_prompts own_prompts(void)
{
    return (vkv_niah_prompts){.protocol = VKV_NIAH_PROTOCOL_OWN, .needle = "NEEDLE.", .question = "Q?",
                              .answer_prefix = "", .chat = VKV_CHAT_UNKNOWN, .ask = "ASK", .overhead = 2,
                              .n_needle = 1};
}

/* The haystack part of an own prompt (between the context tags), which must
 * be followed by the question at the split. */
static char *own_haystack(const vkv_niah_prompts *p, const vkv_niah_run *r, double length, double depth,
                          double *needle_depth)
{
    char *text;
    size_t len, split;
    assert_int_equal(vkv_niah_own_prompt(p, r, length, depth, &text, &len, &split, needle_depth), VKV_OK);
    assert_int_equal(len, strlen(text));
    assert_string_equal(text + split, "ASK");
    const char *open = strstr(text, "<context>\n"), *close = strstr(text, "\n</context>\n\n");
    assert_non_null(open);
    assert_non_null(close);
    assert_ptr_equal(close + strlen("\n</context>\n\n"), text + split);
    open += strlen("<context>\n");
    char *hay = strndup(open, (size_t)(close - open));
    free(text);
    return hay;
}

static void sentence_ends(void **state)
{
    (void)state;
    const char *t = HAY;
    size_t n = strlen(t);
    assert_int_equal(vkv_niah_sentence_end_before(t, n, 7), 0);
    assert_int_equal(vkv_niah_sentence_end_before(t, n, 8), 8);
    assert_int_equal(vkv_niah_sentence_end_before(t, n, 24), 8);
    assert_int_equal(vkv_niah_sentence_end_before(t, n, 1000), 30); /* clamped to the end */
    /* nearest, a tie to the earlier end */
    assert_int_equal(vkv_niah_sentence_end_near(t, n, 14), 8);
    assert_int_equal(vkv_niah_sentence_end_near(t, n, 20), 25);
    assert_int_equal(vkv_niah_sentence_end_near(t, 25, 4), 0); /* 0 counts as an end */
    assert_int_equal(vkv_niah_sentence_end_near(t, 25, 5), 8);
    assert_int_equal(vkv_niah_sentence_end_near("ab. cd", 6, 3), 3);
    assert_int_equal(vkv_niah_sentence_end_near("a.b cd", 6, 4), 6); /* "a.b" is no end; the text's end is */
    assert_int_equal(vkv_niah_sentence_end_near(t, 8, 19), 8); /* past the end: the end */
    /* a '.' before a capital ends a sentence (joined paragraphs); before a digit or a lower case letter not */
    assert_int_equal(vkv_niah_sentence_end_before("end.Next", 8, 6), 4);
    assert_int_equal(vkv_niah_sentence_end_before("pi 3.14", 7, 7), 0);
    assert_int_equal(vkv_niah_sentence_end_before("e.g. this", 9, 9), 4);
    assert_int_equal(vkv_niah_sentence_end_before("Why?\nYes!", 9, 8), 4);
}

static void own_prompt_places_the_needle_at_sentence_ends(void **state)
{
    (void)state;
    vkv_niah_run r = word_run(HAY);
    assert_int_equal(r.n_ids, 6);
    vkv_niah_prompts p = own_prompts();
    double d;
    /* length 8: 5 haystack tokens end at byte 25, a sentence end: the cut */
    char *h = own_haystack(&p, &r, 8, 0, &d);
    assert_string_equal(h, "NEEDLE. One two. Three four five.");
    assert_true(d == 0);
    free(h);
    /* depth 50: token 2 ends at byte 14; the nearest sentence end is 8 */
    h = own_haystack(&p, &r, 8, 50, &d);
    assert_string_equal(h, "One two. NEEDLE. Three four five.");
    assert_true(d == 100.0 * 8 / 25);
    free(h);
    h = own_haystack(&p, &r, 8, 100, &d);
    assert_string_equal(h, "One two. Three four five. NEEDLE.");
    assert_true(d == 100);
    free(h);
    /* length 7: 4 haystack tokens end mid-sentence (byte 19): cut back to 8 */
    h = own_haystack(&p, &r, 7, 0, &d);
    assert_string_equal(h, "NEEDLE. One two.");
    free(h);
    /* depth 75: token 3 ends at byte 19, past the cut at 8: the needle goes at the cut */
    h = own_haystack(&p, &r, 7, 75, &d);
    assert_string_equal(h, "One two. NEEDLE.");
    assert_true(d == 100);
    free(h);
    /* longer than the run: all of it */
    h = own_haystack(&p, &r, 1000, 100, &d);
    assert_string_equal(h, HAY " NEEDLE.");
    free(h);
    vkv_niah_run_free(&r);
    assert_null(r.text);
}

static void kvpress_context_cuts_at_a_token(void **state)
{
    (void)state;
    vkv_niah_run r = word_run(HAY);
    vkv_niah_prompts p = {.protocol = VKV_NIAH_PROTOCOL_KVPRESS, .needle = "NEEDLE", .question = "Q?",
                          .answer_prefix = "", .n_needle = 1};
    char *text;
    double d;
    /* length 155: 155 - 1 - 150 = 4 haystack tokens; depth 50: the needle after token int(4 * 0.5) = 2 */
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 155, 50, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> One two.NEEDLE Three four </book>.");
    assert_true(d == 100.0 * 8 / 19);
    free(text);
    /* depth 0 and 100; a depth between token ends rounds down (int(4 * 0.6) = 2) */
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 155, 0, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> NEEDLEOne two. Three four </book>.");
    assert_true(d == 0);
    free(text);
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 155, 100, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> One two. Three fourNEEDLE </book>.");
    assert_true(d == 100);
    free(text);
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 155, 60, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> One two.NEEDLE Three four </book>.");
    free(text);
    /* no room for the haystack: one token; past the run's end: all of it */
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 100, 100, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> OneNEEDLE </book>.");
    free(text);
    assert_int_equal(vkv_niah_kvpress_context(&p, &r, 5000, 0, &text, &d), VKV_OK);
    assert_string_equal(text, "This is a very long story book: <book> NEEDLE" HAY " </book>.");
    free(text);
    vkv_niah_run_free(&r);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void count_warning(void *ctx, const char *message)
{
    (void)message;
    ++*(int *)ctx;
}

static void haystack_reads_text_files_in_name_order(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkv_niah_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *text;
    size_t len;
    int warnings = 0;
    /* empty: no text */
    assert_int_equal(vkv_niah_read_haystack(dir, count_warning, &warnings, &text, &len), VKV_ERR_IO);
    assert_null(text);
    /* no *.txt: every regular file, by name */
    write_file(dir, "b.md", "Bee.");
    write_file(dir, "a.md", "Ay.");
    assert_int_equal(vkv_niah_read_haystack(dir, count_warning, &warnings, &text, &len), VKV_OK);
    assert_string_equal(text, "Ay.\n\nBee.");
    assert_int_equal(len, strlen(text));
    free(text);
    /* with *.txt files, only those; hidden files never */
    write_file(dir, "d.txt", "Dee.");
    write_file(dir, "c.txt", "See.");
    write_file(dir, ".e.txt", "Hidden.");
    assert_int_equal(vkv_niah_read_haystack(dir, count_warning, &warnings, &text, &len), VKV_OK);
    assert_string_equal(text, "See.\n\nDee.");
    free(text);
    assert_int_equal(warnings, 0);
    const char *names[] = {"a.md", "b.md", "c.txt", "d.txt", ".e.txt"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(vkv_niah_read_haystack(dir, NULL, NULL, &text, &len), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "cannot open the haystack directory"));
}

/* v[0, n) == want[0, n_want) exactly. */
static void expect_grid(const char *spec, bool colon_counts, const double *want, size_t n_want)
{
    double v[64];
    size_t n;
    assert_true(vkv_niah_parse_grid(spec, colon_counts, 0, 100, v, 64, &n));
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) assert_true(v[i] == want[i]);
}

static void depth_grids(void **state)
{
    (void)state;
    /* kvpress's default: integer percentages, 11 of them */
    const double tens[] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
    expect_grid(VKV_NIAH_KVPRESS_DEPTHS, true, tens, 11);
    expect_grid("0:100/10", false, tens, 11); /* the step spelling means the same for --lengths */
    expect_grid("0:100:10", false, tens, 11); /* --lengths' older spelling: C is the step */
    /* the own protocol's default: 10 evenly spaced depths, so 100/9 apart (11.1, 22.2, ...) */
    double v[64];
    size_t n;
    assert_true(vkv_niah_parse_grid(VKV_NIAH_OWN_DEPTHS, true, 0, 100, v, 64, &n));
    assert_int_equal(n, 10);
    assert_true(v[0] == 0 && v[9] == 100 && fabs(v[1] - 100.0 / 9) < 1e-12);
    const double three[] = {0, 50, 100}, one[] = {25}, steps[] = {10, 22.5, 35}, list[] = {5, 50, 95};
    expect_grid("0:100:3", true, three, 3);
    expect_grid("25:75:1", true, one, 1);
    expect_grid("10:40/12.5", true, steps, 3); /* STOP is a bound, not a value */
    expect_grid("0:100/12.5", true, (const double[]){0, 12.5, 25, 37.5, 50, 62.5, 75, 87.5, 100}, 9);
    expect_grid("5,50,95", true, list, 3);
    expect_grid("50", true, list + 1, 1);
    /* refused: a count of 0 or not whole, a step <= 0, out of [lo, hi], STOP < START, junk */
    const char *bad[] = {"0:100:0", "0:100:2.5", "0:100/0", "0:100/-5", "120", "0:120/10", "50:10/5", "1,,2",
                         "1,x", "0:100", "0:100:10:1", "", "nan"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(vkv_niah_parse_grid(bad[i], true, 0, 100, v, 64, &n));
    /* the cap bounds a step grid */
    assert_true(vkv_niah_parse_grid("0:100/1", true, 0, 100, v, 64, &n));
    assert_int_equal(n, 64);
}

static void texts_from_a_json_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/vkv_niah_texts_XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_file(dir, "row.json", "{\"context\": \"ignored\", \"needle\": \"N.\", \"question\": \"Q?\", "
                                "\"answer_prefix\": \"A:\", \"max_new_tokens\": 20}");
    write_file(dir, "part.json", "{\"needle\": \"Only the needle.\"}");
    write_file(dir, "bad.json", "{\"question\": 3}");
    write_file(dir, "list.json", "[\"needle\"]");
    char path[4200];
    vkv_niah_texts t;
    snprintf(path, sizeof path, "%s/row.json", dir);
    assert_int_equal(vkv_niah_read_texts(path, &t), VKV_OK);
    assert_string_equal(t.needle, "N.");
    assert_string_equal(t.question, "Q?");
    assert_string_equal(t.answer_prefix, "A:");
    vkv_niah_texts_free(&t);
    snprintf(path, sizeof path, "%s/part.json", dir);
    assert_int_equal(vkv_niah_read_texts(path, &t), VKV_OK);
    assert_string_equal(t.needle, "Only the needle.");
    assert_null(t.question);
    assert_null(t.answer_prefix);
    vkv_niah_texts_free(&t);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    assert_int_equal(vkv_niah_read_texts(path, &t), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "\"question\" wants a string"));
    assert_null(t.needle);
    snprintf(path, sizeof path, "%s/list.json", dir);
    assert_int_equal(vkv_niah_read_texts(path, &t), VKV_ERR_FORMAT);
    const char *names[] = {"row.json", "part.json", "bad.json", "list.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sentence_ends),
        cmocka_unit_test(own_prompt_places_the_needle_at_sentence_ends),
        cmocka_unit_test(kvpress_context_cuts_at_a_token),
        cmocka_unit_test(haystack_reads_text_files_in_name_order),
        cmocka_unit_test(depth_grids),
        cmocka_unit_test(texts_from_a_json_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
