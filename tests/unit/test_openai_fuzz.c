/* A deterministic mutation fuzzer over OpenAI request bodies
 * (src/serve/openai.c): valid bodies bit-flipped, truncated, spliced into
 * each other, nested deep, given huge numbers, invalid UTF-8 and odd escapes,
 * parsed by both routes. Nothing may crash or leak (the unit tests run under
 * ASan/UBSan); every refusal is a 400 (or a 500 out of memory) with a
 * message; every accepted body gives a request within OpenAI's ranges, whose
 * strings are valid UTF-8 and which the response writers turn into JSON.
 * The same bodies go to llama-server's /tokenize and /detokenize parsers.
 *
 *   test_openai_fuzz [ITERATIONS] [SEED]   (default 100000, 1) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"
#include "core/utf8.h"
#include "serve/openai.h"

static const char *const corpus[] = {
    "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello there\"}]}",
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "[{\"type\": \"text\", \"text\": \"one\"}, {\"type\": \"text\", \"text\": \"t\\u00e9\\ud83d\\ude00\"}]}], "
    "\"max_tokens\": 16, \"temperature\": 0.7, \"top_p\": 0.9, \"seed\": 42, \"stop\": [\"\\n\", \"END\"]}",
    "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": null}], "
    "\"stream\": true, \"stream_options\": {\"include_usage\": true}, \"n\": 1, \"max_completion_tokens\": 3}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"vkvector\": {\"press\": \"snapkv\", \"compression\": 0.5, "
    "\"vector\": true, \"pa\": 0.25, \"kv_type\": \"q8_0\", \"compress_every\": 64, \"max_kv_tokens\": 256, "
    "\"query_aware\": true}}",
    "{\"prompt\": \"Once upon a time\", \"max_tokens\": 5, \"stop\": \"time\", \"stream\": false}",
    "{\"prompt\": [\"a single prompt\"], \"temperature\": 0, \"seed\": -7, \"logprobs\": null, \"user\": \"u\"}",
    "{\"prompt\": [1, 2, 3, 40000], \"stream\": true, \"vkvector\": {\"press\": \"none\"}}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logprobs\": true, \"top_logprobs\": 3, "
    "\"presence_penalty\": 0.5, \"frequency_penalty\": -1, \"logit_bias\": {\"12\": -100, \"7\": 2.5}, "
    "\"tool_choice\": \"none\", \"store\": false, \"response_format\": {\"type\": \"text\"}}",
    "{\"prompt\": [5, 6, 7], \"echo\": true, \"logprobs\": 1, \"max_tokens\": 0, \"best_of\": 1, \"suffix\": \"\"}",
    /* llama-server's /tokenize and /detokenize */
    "{\"content\": \"Hello t\\u00e9 <s>\", \"add_special\": true, \"parse_special\": false, \"with_pieces\": true}",
    "{\"tokens\": [0, 1, 2, 99, 100]}",
};
#define N_CORPUS (sizeof corpus / sizeof *corpus)

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

typedef struct buf {
    char *p;
    size_t n;
} buf;

static void insert(buf *b, size_t at, const char *s, size_t n)
{
    char *p = realloc(b->p, b->n + n + 1);
    assert_non_null(p);
    memmove(p + at + n, p + at, b->n - at);
    memcpy(p + at, s, n);
    b->p = p;
    b->n += n;
    p[b->n] = 0;
}

static const char *const tokens[] = {
    "null", "true", "false", "0", "-0", "1e999999", "-1e999999", "1e-400", "123456789012345678901234567890",
    "9007199254740993", "-9223372036854775809", "0.30000000000000004", "2.5", "[]", "{}", "\"\"",
    "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\\ud800\"", "\"\\uZZZZ\"", "\"\\", "\"", ",", ":", "[", "{", "]", "}",
    "\"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]", "\"n\": 2", "\"messages\": []", "\"prompt\": [[1]]",
    "\"vkvector\": {\"press\": 7}", "\"stream_options\": {}", "\"temperature\": 1e308",
    "\xff", "\xc0\x80", "\xed\xa0\x80", "\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x00",
};

static void mutate(buf *b)
{
    switch (below(7)) {
    case 0: /* bit flips */
        for (size_t k = 1 + below(8); k-- && b->n;) b->p[below(b->n)] ^= (char)(1u << below(8));
        break;
    case 1: /* truncation */
        b->n = below(b->n + 1);
        b->p[b->n] = 0;
        break;
    case 2: { /* a splice: this body's head, another's tail */
        const char *o = corpus[below(N_CORPUS)];
        size_t on = strlen(o), at = below(b->n + 1), from = below(on + 1);
        b->n = at;
        insert(b, at, o + from, on - from);
        break;
    }
    case 3: { /* deep nesting at some place */
        size_t depth = 1 + below(600), at = below(b->n + 1);
        char *open = malloc(depth * 2), c = below(2) ? '[' : '{';
        assert_non_null(open);
        memset(open, c, depth);
        if (c == '[' && below(2)) memset(open + depth, ']', depth);
        else memset(open + depth, c == '[' ? ']' : '}', below(2) ? depth : depth / 2);
        insert(b, at, open, depth * 2);
        free(open);
        break;
    }
    case 4: { /* a token somewhere */
        const char *t = tokens[below(sizeof tokens / sizeof *tokens)];
        insert(b, below(b->n + 1), t, t[0] ? strlen(t) : 1);
        break;
    }
    case 5: { /* a number made huge or odd, where a digit was */
        for (size_t k = 0; k < 8 && b->n; k++) {
            size_t at = below(b->n);
            if (b->p[at] >= '0' && b->p[at] <= '9') {
                static const char *const nums[] = {"e999", "e-999", "000000000000000000000000", ".5", "e+",
                                                   "999999999999999999999999"};
                const char *t = nums[below(sizeof nums / sizeof *nums)];
                insert(b, at + 1, t, strlen(t));
                break;
            }
        }
        break;
    }
    default: { /* a piece of itself repeated */
        if (!b->n) break;
        size_t from = below(b->n), len = 1 + below(b->n - from);
        char *piece = malloc(len);
        assert_non_null(piece);
        memcpy(piece, b->p + from, len);
        insert(b, below(b->n + 1), piece, len);
        free(piece);
        break;
    }
    }
}

static bool utf8_ok(const char *s)
{
    if (!s) return true;
    for (size_t i = 0, n = strlen(s); i < n;) {
        size_t len = (unsigned char)s[i] < 0x80 ? 1 : vkv_utf8_valid_len((const unsigned char *)s + i, n - i);
        if (!len) return false;
        i += len;
    }
    return true;
}

/* What an accepted request must be, and the writers on its text. */
static void check_request(const vkv_oai_request *q)
{
    const vkv_gen_request *g = &q->gen;
    assert_true(g->n_stop <= VKV_GEN_MAX_STOP);
    assert_true(g->sampling.temperature >= 0 && g->sampling.temperature <= 2);
    assert_true(g->sampling.top_p > 0 && g->sampling.top_p <= 1);
    assert_int_equal(vkv_sampler_validate(&g->sampling), VKV_OK); /* penalties and logit_bias in range */
    assert_true(g->sampling.n_logit_bias <= 1024 && (!g->sampling.n_logit_bias || g->sampling.logit_bias == g->logit_bias));
    for (size_t i = 0; i < g->sampling.n_logit_bias; i++) assert_true(g->logit_bias[i].id >= 0);
    assert_true(g->top_logprobs <= VKV_GEN_MAX_TOP_LOGPROBS && (g->logprobs || !g->top_logprobs));
    assert_true(!g->no_generation || (g->echo && q->route == VKV_OAI_COMPLETIONS));
    assert_true(!g->press.has_compression || (g->press.compression >= 0 && g->press.compression < 1));
    const char *text = "";
    if (q->route == VKV_OAI_CHAT) {
        assert_int_equal(g->kind, VKV_GEN_CHAT);
        assert_true(g->n_messages > 0);
        for (size_t i = 0; i < g->n_messages; i++) {
            assert_non_null(g->messages[i].role);
            assert_non_null(g->messages[i].content);
            assert_true(utf8_ok(g->messages[i].content));
        }
        text = g->messages[g->n_messages - 1].content;
    } else if (g->kind == VKV_GEN_TEXT) {
        assert_true(utf8_ok(g->prompt));
        text = g->prompt;
    } else {
        assert_int_equal(g->kind, VKV_GEN_IDS);
        assert_true(g->n_prompt_ids > 0);
        for (size_t i = 0; i < g->n_prompt_ids; i++) assert_true(g->prompt_ids[i] >= 0);
    }
    for (size_t i = 0; i < g->n_stop; i++) assert_true(utf8_ok(g->stop[i]) && g->stop[i][0]);
    vkv_seq_event done = {.kind = VKV_SEQ_DONE, .finish_reason = "stop"};
    done.compression.press = g->press.has_press ? g->press.press : NULL;
    vkv_oai_meta m = {.route = q->route, .id = "x", .created = 1, .model = q->model, .include_usage = q->include_usage};
    vkv_strbuf b = {0};
    vkv_oai_write_response(&b, &m, text, strlen(text), NULL, &done);
    vkv_json_doc *d;
    assert_false(b.oom);
    assert_int_equal(vkv_json_parse(b.p, b.n, &d), VKV_OK);
    vkv_json_free(d);
    free(b.p);
}

/* /tokenize and /detokenize: a 400 or 500 with a message, or text without
 * NUL / ids in the vocabulary (of 100) that the writers turn into JSON. */
static void check_llama_routes(const buf *b, unsigned long it, unsigned long *accepted)
{
    vkv_oai_tokenize t;
    vkv_oai_error err = {0};
    if (vkv_oai_parse_tokenize(b->p, b->n, &t, &err)) {
        assert_true(utf8_ok(t.content) && strlen(t.content) == t.len);
        free(t.content);
        ++*accepted;
    } else if (!(err.http_status == 400 || err.http_status == 500) || !err.message[0]) {
        fail_msg("iteration %lu: /tokenize refusal with status %d, message '%s'", it, err.http_status, err.message);
    }
    int32_t *ids;
    size_t n;
    if (vkv_oai_parse_detokenize(b->p, b->n, 100, &ids, &n, &err)) {
        vkv_oai_piece *pieces = calloc(n + 1, sizeof *pieces);
        assert_non_null(pieces);
        for (size_t i = 0; i < n; i++) {
            assert_true(ids[i] >= 0 && ids[i] < 100);
            pieces[i] = (vkv_oai_piece){"\xe9x", (size_t)ids[i] % 3};
        }
        vkv_strbuf w = {0};
        vkv_oai_write_tokens(&w, ids, n, pieces);
        vkv_json_doc *d;
        assert_false(w.oom);
        assert_int_equal(vkv_json_parse(w.p, w.n, &d), VKV_OK);
        vkv_json_free(d);
        free(w.p);
        free(pieces);
        free(ids);
        ++*accepted;
    } else if (!(err.http_status == 400 || err.http_status == 500) || !err.message[0]) {
        fail_msg("iteration %lu: /detokenize refusal with status %d, message '%s'", it, err.http_status, err.message);
    }
}

static unsigned long iterations = 100000, seed = 1;

static void fuzz_parse(void **state)
{
    (void)state;
    rng_state = 0x9e3779b97f4a7c15ull ^ seed;
    unsigned long accepted = 0, refused = 0, llama_accepted = 0;
    for (unsigned long it = 0; it < iterations; it++) {
        const char *src = corpus[below(N_CORPUS)];
        buf b = {0};
        insert(&b, 0, src, strlen(src));
        for (size_t k = 1 + below(3); k--;) mutate(&b);
        for (int route = 0; route < 2; route++) {
            vkv_oai_request q;
            vkv_oai_error err;
            memset(&err, 0, sizeof err);
            /* every other body with a small context: the scan before the tree reads it too */
            const vkv_oai_parse_opts o = {.n_ctx = it % 2 ? 3 : 0};
            if (vkv_oai_parse_with((vkv_oai_route)route, b.p, b.n, &o, &q, &err)) {
                check_request(&q);
                if (o.n_ctx && route == VKV_OAI_COMPLETIONS) assert_true(q.gen.n_prompt_ids <= o.n_ctx);
                vkv_gen_request_free(&q.gen);
                accepted++;
            } else {
                if (!(err.http_status == 400 || err.http_status == 500) || !err.message[0])
                    fail_msg("iteration %lu: refusal with status %d, message '%s'", it, err.http_status, err.message);
                refused++;
            }
        }
        check_llama_routes(&b, it, &llama_accepted);
        free(b.p);
    }
    printf("fuzz: %lu iterations (seed %lu): %lu parses accepted, %lu refused; %lu /tokenize and /detokenize bodies "
           "accepted\n", iterations, seed, accepted, refused, llama_accepted);
    /* the mutations leave some bodies valid and break most */
    assert_true(accepted > iterations / 50);
    assert_true(refused > iterations / 2);
    assert_true(llama_accepted > iterations / 200);
}

int main(int argc, char **argv)
{
    if (argc > 1) iterations = strtoul(argv[1], NULL, 10);
    if (argc > 2) seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fuzz_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
