/* A deterministic mutation fuzzer over response_format schemas
 * (src/serve/json_constraint.c): schema documents bit-flipped, truncated,
 * spliced into each other, given keywords, nested deep and wide, then
 * compiled. Nothing may crash or leak (the unit tests run under ASan/UBSan);
 * every refusal carries a message and a parameter under
 * response_format.json_schema.schema. Each accepted schema's matcher is fed
 * random bytes (a byte refused leaves the state as it was) and walked over
 * random allowed tokens: it is never stuck before the value is complete,
 * and what it completes is JSON.
 *
 *   test_json_constraint_fuzz [ITERATIONS] [SEED]   (default 20000, 1) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "serve/json_constraint.h"

static const char *const corpus[] = {
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"},"
    " \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 3}},"
    " \"required\": [\"name\", \"age\"], \"additionalProperties\": false}",
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"value\": {\"type\": \"integer\"},"
    " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"value\"],"
    " \"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}",
    "{\"type\": \"object\", \"properties\": {\"item\": {\"anyOf\": [{\"type\": \"object\", \"properties\":"
    " {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"number\"}}, \"required\": [\"name\", \"age\"],"
    " \"additionalProperties\": false}, {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
    " \"city\": {\"const\": \"Paris\"}}, \"required\": [\"name\", \"city\"], \"additionalProperties\": false},"
    " {\"type\": \"null\"}]}}, \"required\": [\"item\"], \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {\"type\": \"boolean\"}},"
    " \"required\": [\"a\"]}",
    "{\"type\": \"array\", \"minItems\": 1, \"maxItems\": 4, \"items\": {\"anyOf\": [{\"type\": \"integer\"},"
    " {\"type\": \"string\"}, {\"$ref\": \"#\"}]}}",
    "{\"enum\": [\"a\", \"ab\", \"a\\nb\", 1, 12, -0.5, null, true], \"description\": \"d\"}",
    "{\"type\": [\"string\", \"null\", \"integer\"], \"title\": \"t\"}",
    "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"array\", \"items\": {\"const\": 7}}}",
    "{}",
    "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": -9007199254740991,"
    " \"maximum\": 9007199254740991}, \"p\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 1},"
    " \"k\": {\"type\": \"number\", \"exclusiveMinimum\": 0}}, \"required\": [\"n\", \"p\", \"k\"]}",
    "{\"type\": \"array\", \"items\": {\"anyOf\": [{\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99},"
    " {\"type\": \"number\", \"exclusiveMinimum\": -2.5, \"exclusiveMaximum\": 1e-300}, {\"type\": [\"number\","
    " \"null\"], \"minimum\": 123.456, \"maximum\": 123.457}, {\"enum\": [1, 7, \"x\"], \"minimum\": 5}]}}",
};
#define N_CORPUS (sizeof corpus / sizeof *corpus)

static vkv_rng rng;
static size_t below(size_t n) { return n ? (size_t)(vkv_rng_u64(&rng) % n) : 0; }

/* b with its bytes [at, at + cut) replaced by s[0, n) (s may point into b). */
static void splice(vkv_strbuf *b, size_t at, size_t cut, const char *s, size_t n)
{
    vkv_strbuf o = {0};
    vkv_strbuf_put(&o, b->p, at);
    vkv_strbuf_put(&o, s, n);
    vkv_strbuf_put(&o, b->p + at + cut, b->n - at - cut);
    assert_false(o.oom);
    free(b->p);
    *b = o;
}

/* Members inserted right after a '{' that has some: the JSON stays well formed. */
static const char *const members[] = {
    "\"type\": \"object\", ", "\"type\": \"array\", ", "\"type\": [\"string\", \"null\"], ", "\"type\": \"int\", ",
    "\"type\": [], ", "\"properties\": {\"a\": {}}, ", "\"properties\": {\"a\": {\"$ref\": \"#\"}}, ",
    "\"required\": [\"a\"], ", "\"required\": [\"zz\"], ", "\"additionalProperties\": false, ",
    "\"additionalProperties\": {\"type\": \"string\"}, ", "\"items\": {}, ", "\"items\": {\"$ref\": \"#\"}, ",
    "\"items\": [{}], ", "\"minItems\": 2, ", "\"maxItems\": 0, ", "\"minItems\": 1e9, ", "\"maxItems\": -1, ",
    "\"enum\": [1, \"x\", null, 2.5, \"\\u00e9\"], ", "\"enum\": [], ", "\"enum\": [{}], ", "\"const\": \"c\", ",
    "\"const\": 1e999, ", "\"anyOf\": [{}, {\"type\": \"null\"}], ", "\"anyOf\": [{\"$ref\": \"#\"}], ",
    "\"anyOf\": [], ", "\"$ref\": \"#\", ", "\"$ref\": \"#/$defs/node\", ", "\"$ref\": \"#/$defs/x\", ",
    "\"$defs\": {\"x\": {\"anyOf\": [{\"$ref\": \"#/$defs/x\"}]}}, ", "\"$defs\": {\"x\": {\"type\": \"null\"}}, ",
    "\"pattern\": \"a\", ", "\"oneOf\": [], ", "\"description\": \"d\", ", "\"default\": {\"x\": [1]}, ",
    "\"properties\": {\"\\u0000\": {}, \"\\\"\": {\"const\": \"\\n\"}}, ",
    "\"minimum\": 3, ", "\"minimum\": -1e300, ", "\"maximum\": 0.125, ", "\"maximum\": 9007199254740991, ",
    "\"exclusiveMinimum\": 0, ", "\"exclusiveMaximum\": 1, ", "\"exclusiveMaximum\": -5e-324, ",
    "\"minimum\": 1e31, ", "\"exclusiveMinimum\": true, ", "\"multipleOf\": 2, ", "\"maximum\": \"1\", ",
    "\"type\": \"integer\", \"minimum\": 1.5, \"maximum\": 2.5, ", "\"type\": \"number\", ",
};

/* Anything at all, anywhere. */
static const char *const junk[] = {
    "{}", "[]", ":", ",", "\"", "{", "}", "[", "]", "null", "true", "1e999", "-1", "\"\\u0000\"", "\"\\ud800\"",
    "\xff", "\xc0\x80", "\xed\xa0\x80", "\"a~1b\"", "\"#/$defs/a~0\"",
};

/* Wraps the whole schema: deep nesting, or wide anyOf that fork the matcher. */
static void wrap(vkv_strbuf *b)
{
    vkv_strbuf w = {0};
    size_t n = 1 + below(80);
    int how = (int)below(3);
    for (size_t i = 0; i < n; i++)
        vkv_strbuf_puts(&w, how == 0 ? "{\"type\": \"array\", \"items\": " : how == 1 ? "{\"anyOf\": ["
                                                                                    : "{\"properties\": {\"k\": ");
    vkv_strbuf_put(&w, b->p, b->n);
    for (size_t i = 0; i < n; i++) {
        if (how == 1) {
            /* alternatives that agree on their first bytes */
            for (size_t j = below(40); j--;) {
                char alt[96];
                snprintf(alt, sizeof alt, ", {\"type\": \"object\", \"properties\": {\"k%zu\": {\"const\": %zu}}}", j % 7,
                         j);
                vkv_strbuf_puts(&w, alt);
            }
            vkv_strbuf_puts(&w, "]}");
        } else {
            vkv_strbuf_puts(&w, how == 0 ? "}" : "}}");
        }
    }
    assert_false(w.oom);
    free(b->p);
    *b = w;
}

/* A member in some object that has members already. */
static void add_member(vkv_strbuf *b)
{
    const char *t = members[below(sizeof members / sizeof *members)];
    size_t n_open = 0;
    for (size_t i = 0; i + 1 < b->n; i++) n_open += b->p[i] == '{' && b->p[i + 1] == '"';
    for (size_t i = 0, k = below(n_open); i + 1 < b->n; i++)
        if (b->p[i] == '{' && b->p[i + 1] == '"' && !k--) {
            splice(b, i + 1, 0, t, strlen(t));
            return;
        }
}

static void mutate(vkv_strbuf *b)
{
    size_t at = below(b->n + 1);
    switch (below(10)) {
    case 0:
        for (size_t k = 1 + below(8); k-- && b->n;) b->p[below(b->n)] ^= (char)(1u << below(8));
        break;
    case 1: /* cut short */
        splice(b, at, b->n - at, "", 0);
        break;
    case 2: { /* another schema's tail */
        const char *o = corpus[below(N_CORPUS)];
        size_t from = below(strlen(o) + 1);
        splice(b, at, b->n - at, o + from, strlen(o + from));
        break;
    }
    case 3: {
        const char *t = junk[below(sizeof junk / sizeof *junk)];
        splice(b, at, 0, t, strlen(t));
        break;
    }
    case 4: /* a run of itself again */
        if (at < b->n) splice(b, below(b->n + 1), 0, b->p + at, 1 + below(b->n - at));
        break;
    case 5: wrap(b); break;
    default: add_member(b);
    }
}

/* Every byte alone, so that any text can be spelled, and JSON's pieces. */
static vkv_token_bytes vocab[256 + 64];
static size_t n_vocab;
static char vocab_bytes[256];

static void make_vocab(void)
{
    static const char *const pieces[] = {
        "{", "}", "[", "]", "\":", "\",", "{\"", "\"}", ", \"", "\": ", "null", "true", "false", "12", "-0.5e3",
        "\\n", "\\u00e9", "\\ud83d\\ude00", "name", "age", "value", "kids", "item", "city", "Paris", "\"name\"",
        "\"a\": ", "k1", "\"k3\":", "    ", "\n  ", "\xc3\xa9", "\xe6\x97", "\xa5", "\xf0\x9f\x98\x80", "\xff", "<s>",
        "9007199254740991", "123.45", "0.000", "e-3", "E+2", "-9", "99", "1e-300",
    };
    for (int b = 1; b < 256; b++) {
        vocab_bytes[b] = (char)b;
        vocab[n_vocab++] = (vkv_token_bytes){&vocab_bytes[b], 1, false};
    }
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        vocab[n_vocab++] = (vkv_token_bytes){pieces[i], strlen(pieces[i]), !strcmp(pieces[i], "<s>")};
}

/* Random bytes fed one at a time: a refused byte changes nothing. */
static void feed_random(const vkv_json_constraint *c)
{
    vkv_json_matcher *m = vkv_json_matcher_new(c);
    assert_non_null(m);
    for (size_t i = 0, n = below(64); i < n; i++) {
        const vkv_token_bytes *t = &vocab[below(n_vocab)];
        bool done = vkv_json_matcher_complete(m);
        if (!vkv_json_matcher_advance(m, t->p, t->n)) {
            assert_int_equal(vkv_json_matcher_complete(m), done);
            assert_false(vkv_json_matcher_advance(m, t->p, t->n));
        }
    }
    vkv_json_matcher_free(m);
}

/* A walk over random allowed tokens: some token is allowed until the value
 * is complete, each one the mask allows advances, and the end is JSON. */
static void walk(const vkv_json_constraint *c, const vkv_json_vocab *tv, unsigned long it)
{
    vkv_json_matcher *m = vkv_json_matcher_new(c);
    bool allowed[sizeof vocab / sizeof *vocab];
    char out[4096];
    size_t n = 0;
    assert_non_null(m);
    for (size_t step = 0; step < 48 && !vkv_json_matcher_complete(m); step++) {
        assert_true(vkv_json_matcher_allowed(m, tv, allowed));
        size_t count = 0;
        for (size_t i = 0; i < n_vocab; i++) count += allowed[i];
        if (!count) fail_msg("iteration %lu: stuck after '%.*s'", it, (int)n, out);
        /* closing bytes grow likelier as the walk goes on */
        size_t pick = below(count), chosen = 0;
        for (size_t i = 0; i < n_vocab; i++) {
            if (!allowed[i]) continue;
            if (step > 24 && strchr("}]\"0", vocab[i].p[0]) && below(2)) {
                chosen = i;
                break;
            }
            if (!pick--) {
                chosen = i;
                break;
            }
        }
        const vkv_token_bytes *t = &vocab[chosen];
        assert_false(t->special);
        assert_true(vkv_json_matcher_advance(m, t->p, t->n));
        memcpy(out + n, t->p, t->n);
        n += t->n;
    }
    if (vkv_json_matcher_complete(m)) {
        vkv_json_doc *d;
        if (vkv_json_parse(out, n, &d)) fail_msg("iteration %lu: '%.*s' is not JSON", it, (int)n, out);
        vkv_json_free(d);
    }
    vkv_json_matcher_free(m);
}

static unsigned long iterations = 20000, seed = 1;

static void fuzz_compile(void **state)
{
    (void)state;
    rng = vkv_rng_new(seed);
    make_vocab();
    vkv_json_vocab *tv = vkv_json_vocab_new(vocab, n_vocab);
    assert_non_null(tv);
    unsigned long parsed = 0, accepted = 0, refused = 0;
    for (unsigned long it = 0; it < iterations; it++) {
        vkv_strbuf b = {0};
        vkv_strbuf_puts(&b, corpus[below(N_CORPUS)]);
        for (size_t k = 1 + below(3); k--;) mutate(&b);
        vkv_json_doc *d;
        if (vkv_json_parse(b.p, b.n, &d)) {
            free(b.p);
            continue;
        }
        parsed++;
        vkv_json_constraint *c = (vkv_json_constraint *)1;
        char param[128], msg[256];
        if (vkv_json_constraint_compile(vkv_json_root(d), &c, param, sizeof param, msg, sizeof msg)) {
            accepted++;
            feed_random(c);
            walk(c, tv, it);
            vkv_json_constraint_free(c);
        } else {
            refused++;
            assert_null(c);
            if (!msg[0] || strncmp(param, VKV_JSON_CONSTRAINT_PARAM, strlen(VKV_JSON_CONSTRAINT_PARAM)))
                fail_msg("iteration %lu: refusal with param '%s', message '%s'", it, param, msg);
        }
        vkv_json_free(d);
        free(b.p);
    }
    printf("fuzz: %lu iterations (seed %lu): %lu schemas parsed, %lu compiled, %lu refused\n", iterations, seed,
           parsed, accepted, refused);
    /* the mutations leave many schemas valid and break many */
    assert_true(accepted > parsed / 10);
    assert_true(refused > parsed / 10);
    vkv_json_vocab_free(tv);
}

int main(int argc, char **argv)
{
    if (argc > 1) iterations = strtoul(argv[1], NULL, 10);
    if (argc > 2) seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fuzz_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
