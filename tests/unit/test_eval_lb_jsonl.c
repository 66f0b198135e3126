/* LongBench's data lines (src/eval/lb_jsonl.c): a row whose members have the
 * wrong types is malformed, never coerced; the reader refuses invalid UTF-8
 * and treats an over-long line as one malformed line, reading on after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "eval/lb_jsonl.h"

#define GOOD_MEMBERS "\"context\": \"c\", \"input\": \"q\", \"answers\": [\"a\"], \"all_classes\": null, \"length\": 5, " \
                     "\"dataset\": \"hotpotqa\""

/* lb_sample_check of one JSON row: NULL or the reason. */
static const char *check(const char *text)
{
    static char why[256];
    vkv_json_doc *doc = NULL;
    assert_int_equal(vkv_json_parse(text, strlen(text), &doc), VKV_OK);
    const char *r = lb_sample_check(vkv_json_root(doc));
    if (r) snprintf(why, sizeof why, "%s", r);
    vkv_json_free(doc);
    return r ? why : NULL;
}

static void sample_check_accepts_longbench_rows(void **state)
{
    (void)state;
    assert_null(check("{" GOOD_MEMBERS ", \"_id\": \"x1\"}"));
    /* input and all_classes null or absent, length null or absent, classes a list of strings */
    assert_null(check("{\"context\": \"c\", \"answers\": [], \"_id\": \"x\", \"input\": null, \"length\": null}"));
    assert_null(check("{\"context\": \"c\", \"answers\": [\"a\", \"b\"], \"all_classes\": [\"A\", \"B\"], \"_id\": \"x\"}"));
}

/* The reason lb_sample_check gives for a good row with member key's value replaced by value (NULL: removed). */
static const char *check_with(const char *key, const char *value)
{
    static const char *const keys[] = {"context", "input", "answers", "all_classes", "length", "dataset", "_id"};
    static const char *const good[] = {"\"c\"", "\"q\"", "[\"a\"]", "null", "5", "\"hotpotqa\"", "\"x1\""};
    char row[512] = "{";
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = strcmp(keys[i], key) ? good[i] : value;
        if (!v) continue;
        snprintf(row + strlen(row), sizeof row - strlen(row), "%s\"%s\": %s", row[1] ? ", " : "", keys[i], v);
    }
    strcat(row, "}");
    const char *why = check(row);
    assert_non_null(why);
    return why;
}

static void sample_check_rejects_wrong_types(void **state)
{
    (void)state;
    assert_non_null(strstr(check_with("answers", "[1, 2]"), "\"answers\""));
    assert_non_null(strstr(check_with("answers", "\"a\""), "\"answers\""));
    assert_non_null(strstr(check_with("answers", NULL), "\"answers\""));
    assert_non_null(strstr(check_with("all_classes", "[\"A\", 3]"), "\"all_classes\""));
    assert_non_null(strstr(check_with("length", "\"x\""), "\"length\""));
    assert_non_null(strstr(check_with("length", "-1"), "\"length\""));
    assert_non_null(strstr(check_with("length", "2.5"), "\"length\""));
    assert_non_null(strstr(check_with("_id", NULL), "\"_id\""));
    assert_non_null(strstr(check_with("_id", "7"), "\"_id\""));
    assert_non_null(strstr(check_with("dataset", "1"), "\"dataset\""));
    assert_non_null(strstr(check_with("input", "1"), "\"input\""));
    assert_non_null(strstr(check_with("context", NULL), "\"context\""));
}

/* Reads every line of text through jsonl_next: "ok" or "bad" per line. */
static void read_lines(const char *text, size_t len, char *out, size_t size, size_t *n_lines)
{
    char path[] = "/tmp/vkv_lb_jsonl_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    jsonl_reader r;
    assert_true(jsonl_open(&r, path));
    vkv_json_doc *doc;
    vkv_status st;
    out[0] = 0;
    while (jsonl_next(&r, &doc, &st)) {
        snprintf(out + strlen(out), size - strlen(out), "%zu:%s ", r.line_no, st ? "bad" : "ok");
        assert_true(!st == (doc != NULL));
        vkv_json_free(doc);
    }
    assert_int_equal(r.error, VKV_OK);
    *n_lines = r.line_no;
    jsonl_close(&r);
    remove(path);
}

static void reader_refuses_invalid_utf8_by_line(void **state)
{
    (void)state;
    char got[256];
    size_t n;
    const char text[] = "{\"a\": \"\xc3\xa9\"}\n{\"a\": \"\xff\"}\n{\"a\": \"\xc0\xaf\"}\n\n{\"a\": 1}\n";
    read_lines(text, sizeof text - 1, got, sizeof got, &n);
    assert_string_equal(got, "1:ok 2:bad 3:bad 5:ok ");
}

static void reader_skips_an_overlong_line_and_reads_on(void **state)
{
    (void)state;
    const size_t big = VKV_MAX_LINE_BYTES + 10;
    char *text = malloc(big + 64);
    assert_non_null(text);
    size_t o = (size_t)sprintf(text, "{\"a\": 1}\n\"");
    memset(text + o, 'x', big);
    o += big;
    o += (size_t)sprintf(text + o, "\"\n{\"b\": 2}\n");
    char got[256];
    size_t n;
    read_lines(text, o, got, sizeof got, &n);
    free(text);
    assert_string_equal(got, "1:ok 2:bad 3:ok ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sample_check_accepts_longbench_rows),
        cmocka_unit_test(sample_check_rejects_wrong_types),
        cmocka_unit_test(reader_refuses_invalid_utf8_by_line),
        cmocka_unit_test(reader_skips_an_overlong_line_and_reads_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
