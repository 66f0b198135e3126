/* The tier dump reader of `vkvector viz` (src/cli/viz_dump.c): reads what
 * `vkvector run --tier-dump` writes, and rejects malformed, truncated or
 * inconsistent dumps with a message that says where and what. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "viz/viz_dump.h"

/* A dump of 4 layers x 2 KV heads x 4 positions, one layer per line, with
 * knobs that break one thing. Head (3, 1) is the one the knobs change. */
typedef struct knobs {
    const char *omit_top;       /* top-level key left out */
    const char *omit_head;      /* key of head (3, 1) left out */
    int n_context, n_layer, n_kv_head, version;  /* what the header claims (0: the truth) */
    const char *tiers31;        /* tiers of head (3, 1) */
    const char *scores31;       /* the scores array of head (3, 1), verbatim */
    int n_retained31;           /* -1: the truth */
    const char *extra_top;      /* verbatim members added after "arch" */
    bool n_context_negative;
} knobs;

static char *make_dump(const knobs *k)
{
    size_t cap = 1 << 16;
    char *b = malloc(cap);
    size_t n = 0;
#define P(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
    P("{\"vkvector_tier_dump\": %d,\n", k->version ? k->version : 1);
    const char *top[][2] = {
        {"model", "\"m/tiny.gguf\""}, {"arch", "\"llama\""}, {"n_layer", NULL}, {"n_kv_head", NULL},
        {"head_dim", "8"}, {"kv_type", "\"f16\""}, {"press", "\"keydiff\""}, {"compression", "0.5"},
        {"approx_ratio", "0.25"}, {"vector", "true"}, {"query_aware", "false"}, {"n_context", NULL},
        {"tokens", "[\"<s>\", \"a\\u00e9\", \"\\n\", \"\\ud83d\\ude00\"]"},
        {"bytes", "{\"uncompressed\": 4096, \"retained\": 1024, \"approximated\": 1024, \"w_matrices\": 2048, "
                  "\"kept_total\": 2048}"},
    };
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
        if (k->omit_top && !strcmp(k->omit_top, top[i][0])) continue;
        if (!strcmp(top[i][0], "n_layer")) P("\"n_layer\": %d,\n", k->n_layer ? k->n_layer : 4);
        else if (!strcmp(top[i][0], "n_kv_head")) P("\"n_kv_head\": %d,\n", k->n_kv_head ? k->n_kv_head : 2);
        else if (!strcmp(top[i][0], "n_context"))
            P("\"n_context\": %s%d,\n", k->n_context_negative ? "-" : "", k->n_context ? k->n_context : 4);
        else P("\"%s\": %s,\n", top[i][0], top[i][1]);
        if (!strcmp(top[i][0], "arch") && k->extra_top) P("%s,\n", k->extra_top);
    }
    if (!(k->omit_top && !strcmp(k->omit_top, "layers"))) {
        P("\"layers\": [\n");
        for (int l = 0; l < 4; l++) {
            P("{\"layer\": %d, \"distortion\": %s, \"bytes_retained\": 256, \"bytes_approximated\": 256, \"heads\": [",
              l, l == 2 ? "null" : "0.125");
            for (int h = 0; h < 2; h++) {
                bool t = l == 3 && h == 1;
                const char *tiers = t && k->tiers31 ? k->tiers31 : "RAAE";
                int nr = t && k->n_retained31 >= 0 ? k->n_retained31 : 1;
                P("%s{", h ? ", " : "");
                const char *hk[][2] = {{"head", NULL}, {"n_retained", NULL}, {"n_approximated", "2"},
                                       {"n_evicted", "1"}, {"r2", "0.75"}, {"rel_err", "1.5e-2"},
                                       {"tiers", NULL}, {"scores", NULL}, {"residuals", "[0.5, 0, 2.25e-3, null]"}};
                bool first = true;
                for (size_t i = 0; i < sizeof hk / sizeof *hk; i++) {
                    if (t && k->omit_head && !strcmp(k->omit_head, hk[i][0])) continue;
                    P("%s\"%s\": ", first ? "" : ", ", hk[i][0]);
                    first = false;
                    if (!strcmp(hk[i][0], "head")) P("%d", h);
                    else if (!strcmp(hk[i][0], "n_retained")) P("%d", nr);
                    else if (!strcmp(hk[i][0], "tiers")) P("\"%s\"", tiers);
                    else if (!strcmp(hk[i][0], "scores"))
                        P("%s", t && k->scores31 ? k->scores31 : "[-0.25, 1e-3, null, 12]");
                    else P("%s", hk[i][1]);
                }
                P("}");
            }
            P("]}%s\n", l < 3 ? "," : "");
        }
        P("],\n");
    }
    P("\"end\": null}\n");
#undef P
    assert_true(n < cap);
    return b;
}

static const knobs K0 = {.n_retained31 = -1};

/* Parses text; expects failure with a message containing every needle. */
static void expect_error(const char *text, size_t len, ...)
{
    viz_dump *d = (viz_dump *)1;
    vkv_status st = viz_dump_parse(text, len, &d);
    if (st == VKV_OK) fail_msg("parsed, but should fail");
    assert_int_equal(st, VKV_ERR_FORMAT);
    assert_null(d);
    const char *msg = vkv_last_error();
    va_list ap;
    va_start(ap, len);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
    va_end(ap);
}

static void expect_dump_error(const knobs *k, const char *needle)
{
    char *t = make_dump(k);
    expect_error(t, strlen(t), needle, (const char *)NULL);
    free(t);
}

static void viz_dump_reads_a_valid_dump(void **state)
{
    (void)state;
    knobs k = K0;
    k.extra_top = "\"future_field\": {\"a\": [1, 2.5, {\"b\": null}], \"c\": \"d\"}";
    char *t = make_dump(&k);
    viz_dump *d;
    assert_int_equal(viz_dump_parse(t, strlen(t), &d), VKV_OK);
    free(t);
    assert_int_equal(d->version, 1);
    assert_string_equal(d->model, "m/tiny.gguf");
    assert_string_equal(d->press, "keydiff");
    assert_int_equal(d->n_layer, 4);
    assert_int_equal(d->n_kv_head, 2);
    assert_int_equal(d->n_context, 4);
    assert_true(d->vector && !d->query_aware);
    assert_true(d->compression_ratio == 0.5 && d->approx_ratio == 0.25);
    assert_int_equal(d->n_tokens, 4);
    assert_string_equal(d->tokens[1], "a\xc3\xa9");
    assert_string_equal(d->tokens[2], "\n");
    assert_string_equal(d->tokens[3], "\xf0\x9f\x98\x80");
    assert_int_equal(d->bytes_uncompressed, 4096);
    assert_int_equal(d->bytes_w, 2048);
    assert_int_equal(d->bytes_kept, 2048);
    const viz_head *h = &d->layers[3].heads[1];
    assert_int_equal(h->n_retained, 1);
    assert_int_equal(h->tiers[0], VIZ_TIER_RETAINED);
    assert_int_equal(h->tiers[1], VIZ_TIER_APPROXIMATED);
    assert_int_equal(h->tiers[3], VIZ_TIER_EVICTED);
    assert_true(h->scores[0] == -0.25f && h->scores[1] == 1e-3f && isnan(h->scores[2]) && h->scores[3] == 12);
    assert_true(h->residuals[1] == 0 && h->residuals[2] == 2.25e-3f && isnan(h->residuals[3]));
    assert_true(h->r2 == 0.75 && h->rel_err == 1.5e-2);
    assert_true(isnan(d->layers[2].distortion));
    assert_true(d->layers[1].distortion == 0.125);
    uint64_t r, a, e;
    viz_layer_counts(d, 0, &r, &a, &e);
    assert_true(r == 2 && a == 4 && e == 2);
    viz_dump_free(d);
}

/* Numbers take a fast exact path or strtod: both must agree with strtod. */
static void viz_dump_reads_numbers_like_strtod(void **state)
{
    (void)state;
    const char *nums[] = {"0.1234", "-1.5e-7", "3.4028e38", "12345678901234567890", "1e-45", "0", "-0.0",
                          "9007199254740993", "0.30000000000000004", "7.006e-10", "1E+2"};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        char scores[128];
        snprintf(scores, sizeof scores, "[%s, 1, 2, 3]", nums[i]);
        knobs k = K0;
        k.scores31 = scores;
        char *t = make_dump(&k);
        viz_dump *d;
        assert_int_equal(viz_dump_parse(t, strlen(t), &d), VKV_OK);
        free(t);
        float want = (float)strtod(nums[i], NULL), got = d->layers[3].heads[1].scores[0];
        if (memcmp(&want, &got, sizeof want)) fail_msg("%s read as %.9g, strtod says %.9g", nums[i], got, want);
        viz_dump_free(d);
    }
}

static void viz_dump_rejects_truncation_anywhere(void **state)
{
    (void)state;
    char *t = make_dump(&K0);
    size_t len = strlen(t);
    /* the dump ends with "}\n": every shorter prefix is truncated */
    for (size_t cut = 0; cut + 1 < len; cut++) {
        viz_dump *d = (viz_dump *)1;
        vkv_status st = viz_dump_parse(t, cut, &d);
        if (st != VKV_ERR_FORMAT) fail_msg("a dump cut at %zu bytes of %zu gave status %d", cut, len, (int)st);
        assert_null(d);
        const char *msg = vkv_last_error();
        if (cut > 0 && !strstr(msg, "truncated")) fail_msg("cut at %zu: '%s' does not say truncated", cut, msg);
    }
    expect_error(t, 0, "empty", (const char *)NULL);
    /* the position of the end is reported */
    expect_error(t, 26, "the file ends at line 2, column 1 where a string key was expected", "truncated",
                 (const char *)NULL);
    free(t);
}

static void viz_dump_rejects_syntax_errors_with_line_and_column(void **state)
{
    (void)state;
    const char *t = "{\"vkvector_tier_dump\": 1,\n  \"model\" \"x\"}";
    expect_error(t, strlen(t), "expected ':' at line 2, column 11", (const char *)NULL);
    t = "{\"vkvector_tier_dump\": 1,\n\"tokens\": [\"a\",, \"b\"]}";
    expect_error(t, strlen(t), "line 2, column 16", (const char *)NULL);
    t = "{\"vkvector_tier_dump\": 1, \"n_context\": 01}";
    expect_error(t, strlen(t), "expected ',' or '}' at line 1, column 41", (const char *)NULL);
    t = "{\"vkvector_tier_dump\": 1, \"model\": \"a\\qb\"}";
    expect_error(t, strlen(t), "escape", "line 1, column 39", (const char *)NULL);
    t = "{\"vkvector_tier_dump\": 1} x";
    expect_error(t, strlen(t), "nothing after", "line 1, column 27", (const char *)NULL);
    t = "[1, 2]";
    expect_error(t, strlen(t), "a tier dump is one JSON object", (const char *)NULL);
    t = "{\"model\": \"x\"}";
    expect_error(t, strlen(t), "not a vkvector tier dump", (const char *)NULL);
}

static void viz_dump_rejects_wrong_counts(void **state)
{
    (void)state;
    knobs k = K0;
    k.tiers31 = "RAA";
    expect_dump_error(&k, "layer 3 head 1: tiers has 3 letters, n_context is 4");
    k = K0;
    k.scores31 = "[1, 2, 3]";
    expect_dump_error(&k, "layer 3 head 1: scores has 3 numbers, n_context is 4");
    k = K0;
    k.n_context = 5;
    expect_dump_error(&k, "tokens has 4 strings, n_context is 5");
    k = K0;
    k.n_layer = 5;
    expect_dump_error(&k, "layers has 4 entries, n_layer is 5");
    k = K0;
    k.n_kv_head = 3;
    expect_dump_error(&k, "layer 0: heads has 2 entries, n_kv_head is 3");
    k = K0;
    k.n_retained31 = 2;
    expect_dump_error(&k, "layer 3 head 1: n_retained is 2 but tiers has 1 'R'");
    k = K0;
    k.tiers31 = "RAXE";
    expect_dump_error(&k, "layer 3 head 1: \"tiers\" has 'X' at position 2 (letters must be R, A or E) (line 20");
}

static void viz_dump_rejects_missing_fields(void **state)
{
    (void)state;
    const char *top[] = {"model", "n_layer", "n_context", "tokens", "bytes", "layers", "press", "vector"};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
        knobs k = K0;
        k.omit_top = top[i];
        char needle[64];
        snprintf(needle, sizeof needle, "the dump has no \"%s\" field", top[i]);
        expect_dump_error(&k, needle);
    }
    const char *head[] = {"tiers", "scores", "residuals", "n_evicted", "r2", "head"};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++) {
        knobs k = K0;
        k.omit_head = head[i];
        char needle[80];
        snprintf(needle, sizeof needle, "layer 3 head 1: the head has no \"%s\" field", head[i]);
        expect_dump_error(&k, needle);
    }
    const char *t = "{\"vkvector_tier_dump\": 1, \"bytes\": {\"uncompressed\": 1}}";
    expect_error(t, strlen(t), "\"bytes\" has no \"retained\" field", (const char *)NULL);
}

static void viz_dump_rejects_wrong_types_and_versions(void **state)
{
    (void)state;
    knobs k = K0;
    k.scores31 = "\"x\"";
    expect_dump_error(&k, "layer 3 head 1: \"scores\" must be an array of numbers (line 20");
    k = K0;
    k.scores31 = "[1, true, 3, 4]";
    expect_dump_error(&k, "layer 3 head 1: \"scores\"[1] must be a number or null");
    k = K0;
    k.n_context_negative = true;
    expect_dump_error(&k, "\"n_context\" must be a whole number from 0 to 4294967295, not -4");
    k = K0;
    k.version = 2;
    expect_dump_error(&k, "tier dump version 2 is not supported");
    k = K0;
    k.extra_top = "\"vector\": 1";
    expect_dump_error(&k, "\"vector\" must be true or false");
    const char *t = "{\"vkvector_tier_dump\": 1, \"layers\": [{\"layer\": 0, \"heads\": {}}]}";
    expect_error(t, strlen(t), "layer 0: \"heads\" must be an array", (const char *)NULL);
    t = "{\"vkvector_tier_dump\": 1, \"tokens\": [\"a\", 3]}";
    expect_error(t, strlen(t), "\"tokens\"[1] must be a string", (const char *)NULL);
}

static void viz_dump_load_reports_the_path(void **state)
{
    (void)state;
    viz_dump *d;
    assert_int_equal(viz_dump_load("/nonexistent/dump.json", &d), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "/nonexistent/dump.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(viz_dump_reads_a_valid_dump),
        cmocka_unit_test(viz_dump_reads_numbers_like_strtod),
        cmocka_unit_test(viz_dump_rejects_truncation_anywhere),
        cmocka_unit_test(viz_dump_rejects_syntax_errors_with_line_and_column),
        cmocka_unit_test(viz_dump_rejects_wrong_counts),
        cmocka_unit_test(viz_dump_rejects_missing_fields),
        cmocka_unit_test(viz_dump_rejects_wrong_types_and_versions),
        cmocka_unit_test(viz_dump_load_reports_the_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
