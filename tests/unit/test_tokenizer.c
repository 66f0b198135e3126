/* Tokenizer tests.
 *
 * Conformance: llama.cpp's test-tokenizer-0 data in ../shared/vocab (or
 * $VKVECTOR_SHARED/vocab): each .inp holds test texts separated by
 * "\n__ggml_vocab_test__\n", each .out one line of expected ids per text,
 * produced with add_special = false and parse_special = false. Every case of
 * every vocabulary but bert-bge (WordPiece, unused here) must match exactly;
 * the suite is skipped only when the shared data is absent altogether. The
 * Llama-3 and Qwen2 vocabularies also check the chat templates' tokens.
 *
 * Unit tests on small vocabularies built in memory: byte fallback, special
 * token parsing, special-token ids outside the vocabulary, the streaming
 * detokenizer on split UTF-8, the unknown pre-tokenizer error, and both chat
 * templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "tok/tokenizer.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */
/* ------------------------------------------------------------------ */

static const char *shared_dir(void)
{
    const char *s = getenv("VKVECTOR_SHARED");
    return s && *s ? s : "../shared";
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Prints text with control and non-ASCII bytes escaped, for failure reports. */
static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') print_message("\\n");
        else if (c == '\t') print_message("\\t");
        else if (c < 0x20 || c >= 0x7F) print_message("\\x%02x", c);
        else print_message("%c", c);
    }
    if (n > 160) print_message("...");
}

static void print_ids(const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) print_message(" %d", ids[i]);
}

/* An in-memory GGUF handed to the tokenizer; the buffer is freed right after
 * loading, which also checks that the tokenizer copied what it needs. */
static vkv_status load_from_writer(vkv_gguf_writer *w, vkv_tokenizer **tok)
{
    void *data;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
    vkv_gguf_writer_free(w);
    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open_memory(data, size, &g), VKV_OK);
    vkv_status st = vkv_tokenizer_load(g, tok);
    vkv_gguf_close(g);
    memset(data, 0xAB, size);
    free(data);
    return st;
}

static void expect_ids(const vkv_tokenizer *tok, const char *text, bool add_special, bool parse_special,
                       const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(vkv_tokenize(tok, text, strlen(text), add_special, parse_special, &ids, &n), VKV_OK);
    if (n != n_want || (n_want && memcmp(ids, want, n_want * sizeof *ids))) {
        print_message("tokenize(\"%s\"): want", text);
        print_ids(want, n_want);
        print_message("\n                 got ");
        print_ids(ids, n);
        print_message("\n");
        fail();
    }
    free(ids);
}

/* ------------------------------------------------------------------ */
/* conformance with llama.cpp                                          */
/* ------------------------------------------------------------------ */

static bool shared_vocab_dir_present(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/vocab", shared_dir());
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int n_vocab_skipped;

/* Loads ggml-vocab-NAME.gguf from the shared data and puts its path in path.
 * Without the shared data the test is skipped; with it, a missing or damaged
 * vocabulary is a failure. */
static vkv_tokenizer *load_shared_vocab(const char *name, char *path, size_t path_size)
{
    if (!shared_vocab_dir_present()) {
        print_message("[  SKIP    ] vocab %s: no %s/vocab\n", name, shared_dir());
        n_vocab_skipped++;
        skip();
    }
    snprintf(path, path_size, "%s/vocab/ggml-vocab-%s.gguf", shared_dir(), name);
    vkv_gguf *g;
    vkv_status st = vkv_gguf_open(path, &g);
    if (st != VKV_OK) print_message("vocab %s: %s: %s: %s\n", name, path, vkv_status_name(st), vkv_last_error());
    assert_int_equal(st, VKV_OK);
    vkv_tokenizer *tok;
    st = vkv_tokenizer_load(g, &tok);
    if (st) print_message("vocab %s: %s\n", name, vkv_last_error());
    assert_int_equal(st, VKV_OK);
    vkv_gguf_close(g);
    return tok;
}

static void test_vocab(void **state)
{
    const char *name = *state;
    char path[4096];
    vkv_tokenizer *tok = load_shared_vocab(name, path, sizeof path);

    size_t inp_len, out_len;
    char inp_path[4200], out_path[4200];
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    char *inp = read_all(inp_path, &inp_len), *out = read_all(out_path, &out_len);
    assert_non_null(inp);
    assert_non_null(out);

    /* test-tokenizer-0's reading: split .inp on the separator (a text may be
     * empty); .out is read line by line */
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t n_cases = 0, n_pass = 0, n_roundtrip = 0, n_lines = 0;
    const char *line = out;
    for (size_t pos = 0; pos < inp_len;) {
        const char *next = memmem(inp + pos, inp_len - pos, sep, sep_len);
        size_t tlen = next ? (size_t)(next - (inp + pos)) : inp_len - pos;
        const char *text = inp + pos;
        pos = next ? pos + tlen + sep_len : inp_len;

        /* the matching .out line */
        int32_t want[4096];
        size_t n_want = 0;
        const char *eol = line < out + out_len ? memchr(line, '\n', (size_t)(out + out_len - line)) : NULL;
        const char *line_end = eol ? eol : out + out_len;
        if (line < out + out_len) n_lines++;
        for (const char *p = line; p < line_end;) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            assert_true(n_want < sizeof want / sizeof want[0]);
            want[n_want++] = (int32_t)v;
            p = e;
        }
        line = eol ? eol + 1 : out + out_len;

        int32_t *ids;
        size_t n;
        assert_int_equal(vkv_tokenize(tok, text, tlen, false, false, &ids, &n), VKV_OK);
        n_cases++;
        if (n == n_want && (n == 0 || !memcmp(ids, want, n * sizeof *ids))) {
            n_pass++;
        } else {
            print_message("vocab %s case %zu \"", name, n_cases);
            print_escaped(text, tlen);
            print_message("\"\n  want");
            print_ids(want, n_want);
            print_message("\n  got ");
            print_ids(ids, n);
            print_message("\n");
        }

        /* detokenizing gives the text back (SPM: after the prefix space) */
        char *back;
        size_t back_len;
        assert_int_equal(vkv_detokenize(tok, ids, n, false, &back, &back_len), VKV_OK);
        bool spm = vkv_tokenizer_type(tok) == VKV_VOCAB_SPM;
        size_t skip_sp = spm && tlen > 0 ? 1 : 0;
        if (back_len == tlen + skip_sp && (!skip_sp || back[0] == ' ') && !memcmp(back + skip_sp, text, tlen))
            n_roundtrip++;
        else {
            print_message("vocab %s case %zu: detokenized text differs: \"", name, n_cases);
            print_escaped(back, back_len);
            print_message("\"\n");
        }
        free(back);
        free(ids);
    }
    print_message("[ VOCAB    ] %-13s %zu/%zu cases match llama.cpp, %zu/%zu round-trip\n", name, n_pass, n_cases,
                  n_roundtrip, n_cases);
    assert_int_equal(n_lines, n_cases);
    assert_int_equal(n_pass, n_cases);
    assert_int_equal(n_roundtrip, n_cases);
    free(inp);
    free(out);
    vkv_tokenizer_free(tok);
}

/* The ids of text, tokenized without special tokens, appended to ids. */
static void append_text_ids(const vkv_tokenizer *tok, const char *text, int32_t *ids, size_t *n, size_t cap)
{
    int32_t *part;
    size_t n_part;
    assert_int_equal(vkv_tokenize(tok, text, strlen(text), false, false, &part, &n_part), VKV_OK);
    assert_true(*n + n_part <= cap);
    memcpy(ids + *n, part, n_part * sizeof *part);
    *n += n_part;
    free(part);
}

/* What the chat templates rely on, on the real Llama-3 and Qwen2
 * vocabularies: BOS, the control tokens parsed as single ids that cut the
 * text around them, and the end-of-generation tokens. */
static void test_real_vocab_chat_tokens(void **state)
{
    (void)state;
    char path[4096];
    vkv_tokenizer *tok = load_shared_vocab("llama-bpe", path, sizeof path);
    assert_true(vkv_tokenizer_adds_bos(tok));
    assert_int_equal(vkv_tokenizer_bos(tok), 128000);  /* <|begin_of_text|> */
    assert_int_equal(vkv_tokenizer_eot(tok), 128009);  /* <|eot_id|> */
    assert_true(vkv_tokenizer_is_eog(tok, 128009));
    assert_false(vkv_tokenizer_is_eog(tok, 128000));
    int32_t want[64];
    size_t n_want = 0;
    want[n_want++] = 128000;
    want[n_want++] = 128006;  /* <|start_header_id|> */
    append_text_ids(tok, "user", want, &n_want, 64);
    want[n_want++] = 128007;  /* <|end_header_id|> */
    append_text_ids(tok, "\n\nHello world", want, &n_want, 64);
    want[n_want++] = 128009;
    expect_ids(tok, "<|start_header_id|>user<|end_header_id|>\n\nHello world<|eot_id|>", true, true, want, n_want);
    vkv_tokenizer_free(tok);

    tok = load_shared_vocab("qwen2", path, sizeof path);
    assert_false(vkv_tokenizer_adds_bos(tok));
    assert_true(vkv_tokenizer_is_eog(tok, 151643));  /* <|endoftext|> */
    assert_true(vkv_tokenizer_is_eog(tok, 151645));  /* <|im_end|> */
    assert_false(vkv_tokenizer_is_eog(tok, 151644)); /* <|im_start|> */
    n_want = 0;
    want[n_want++] = 151644;
    append_text_ids(tok, "user\nHello world", want, &n_want, 64);
    want[n_want++] = 151645;
    append_text_ids(tok, "\n", want, &n_want, 64);
    expect_ids(tok, "<|im_start|>user\nHello world<|im_end|>\n", true, true, want, n_want);
    vkv_tokenizer_free(tok);
}

/* one cmocka test per vocabulary, named after it */
#define VOCAB_TEST(vocab) {"test_vocab " vocab, test_vocab, NULL, NULL, (void *)(vocab)}

/* ------------------------------------------------------------------ */
/* small synthetic vocabularies                                        */
/* ------------------------------------------------------------------ */

enum { SPM_SP = 259, SPM_H, SPM_I, SPM_HI, SPM_SP_HI, SPM_IM_START, SPM_IM_END, SPM_N };

/* <unk> <s> </s>, 256 byte tokens, then a few pieces and two control tokens;
 * no special-token ids yet. */
static vkv_gguf_writer *make_spm_writer(const char *chat_template)
{
    static char bytes[256][7];
    const char *toks[SPM_N];
    float scores[SPM_N] = {0};
    int32_t types[SPM_N];
    toks[0] = "<unk>";
    toks[1] = "<s>";
    toks[2] = "</s>";
    types[0] = VKV_TOKEN_UNKNOWN;
    types[1] = types[2] = VKV_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[3 + b] = bytes[b];
        types[3 + b] = VKV_TOKEN_BYTE;
    }
    const char *pieces[] = {"\xE2\x96\x81", "h", "i", "hi", "\xE2\x96\x81hi", "<|im_start|>", "<|im_end|>"};
    for (int i = SPM_SP; i < SPM_N; i++) {
        toks[i] = pieces[i - SPM_SP];
        scores[i] = (float)-(i - SPM_SP + 1);
        types[i] = i >= SPM_IM_START ? VKV_TOKEN_CONTROL : VKV_TOKEN_NORMAL;
    }
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_non_null(w);
    assert_int_equal(vkv_gguf_set_str(w, "general.architecture", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, SPM_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.scores", VKV_GGUF_FLOAT32, scores, SPM_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.token_type", VKV_GGUF_INT32, types, SPM_N), VKV_OK);
    if (chat_template) assert_int_equal(vkv_gguf_set_str(w, "tokenizer.chat_template", chat_template), VKV_OK);
    return w;
}

static vkv_tokenizer *make_spm(const char *chat_template)
{
    vkv_gguf_writer *w = make_spm_writer(chat_template);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2), VKV_OK);
    vkv_tokenizer *tok;
    assert_int_equal(load_from_writer(w, &tok), VKV_OK);
    return tok;
}

#define BYTE_TOK(b) (3 + (b))

static void test_spm_merges_and_byte_fallback(void **state)
{
    (void)state;
    vkv_tokenizer *tok = make_spm(NULL);
    assert_int_equal(vkv_tokenizer_type(tok), VKV_VOCAB_SPM);
    assert_int_equal(vkv_tokenizer_n_vocab(tok), SPM_N);
    assert_int_equal(vkv_tokenizer_bos(tok), 1);
    assert_true(vkv_tokenizer_adds_bos(tok));
    assert_true(vkv_tokenizer_is_eog(tok, 2));
    assert_true(vkv_tokenizer_is_eog(tok, SPM_IM_END));  /* recognised by its text */
    assert_false(vkv_tokenizer_is_eog(tok, SPM_HI));

    expect_ids(tok, "hi", false, false, (const int32_t[]){SPM_SP_HI}, 1);
    expect_ids(tok, "hi", true, false, (const int32_t[]){1, SPM_SP_HI}, 2);
    expect_ids(tok, "", true, false, (const int32_t[]){1}, 1);
    expect_ids(tok, "", false, false, NULL, 0);
    /* "é" is no token: its two bytes */
    expect_ids(tok, "h\xC3\xA9", false, false, (const int32_t[]){SPM_SP, SPM_H, BYTE_TOK(0xC3), BYTE_TOK(0xA9)}, 4);

    /* special tokens: parsed only when asked; the text after one gets the
     * space prefix again */
    expect_ids(tok, "<|im_start|>hi<|im_end|>", false, true, (const int32_t[]){SPM_IM_START, SPM_SP_HI, SPM_IM_END}, 3);
    int32_t *ids;
    size_t n;
    assert_int_equal(vkv_tokenize(tok, "<|im_start|>", 12, false, false, &ids, &n), VKV_OK);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], SPM_IM_START);
    free(ids);

    /* pieces */
    size_t len;
    const char *p = vkv_token_to_piece(tok, SPM_SP_HI, false, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(p, " hi", 3);
    p = vkv_token_to_piece(tok, BYTE_TOK(0x41), false, &len);
    assert_int_equal(len, 1);
    assert_int_equal(p[0], 'A');
    vkv_token_to_piece(tok, SPM_IM_START, false, &len);
    assert_int_equal(len, 0);
    p = vkv_token_to_piece(tok, SPM_IM_START, true, &len);
    assert_int_equal(len, 12);
    assert_memory_equal(p, "<|im_start|>", 12);
    vkv_token_to_piece(tok, SPM_N + 5, true, &len);
    assert_int_equal(len, 0);
    vkv_tokenizer_free(tok);
}

/* Loads the writer's vocabulary with stderr sent to a temporary file; returns
 * what was printed there. */
static char *load_capturing_stderr(vkv_gguf_writer *w, vkv_tokenizer **tok)
{
    FILE *capture = tmpfile();
    assert_non_null(capture);
    fflush(stderr);
    int saved = dup(fileno(stderr));
    assert_true(saved >= 0);
    assert_true(dup2(fileno(capture), fileno(stderr)) >= 0);
    vkv_status st = load_from_writer(w, tok);
    fflush(stderr);
    assert_true(dup2(saved, fileno(stderr)) >= 0);
    close(saved);
    assert_int_equal(st, VKV_OK);

    long size = ftell(capture);
    assert_true(size >= 0);
    char *text = calloc((size_t)size + 1, 1);
    assert_non_null(text);
    rewind(capture);
    assert_int_equal(fread(text, 1, (size_t)size, capture), (size_t)size);
    fclose(capture);
    return text;
}

static void expect_warning(const char *printed, const char *key, const char *id, const char *consequence)
{
    char want[256];
    snprintf(want, sizeof want, "warning: %s = %s is outside the vocabulary (ids 0..%d): %s", key, id, SPM_N - 1,
             consequence);
    if (!strstr(printed, want)) {
        print_message("want \"%s\" in what the load printed:\n%s", want, printed);
        fail();
    }
}

static void test_special_ids_outside_vocabulary_warn(void **state)
{
    (void)state;
    /* in range: nothing printed */
    vkv_tokenizer *tok;
    vkv_gguf_writer *w = make_spm_writer(NULL);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", SPM_N - 1), VKV_OK);
    char *printed = load_capturing_stderr(w, &tok);
    assert_string_equal(printed, "");
    assert_int_equal(vkv_tokenizer_pad(tok), SPM_N - 1);
    free(printed);
    vkv_tokenizer_free(tok);

    /* one past the end, far past it, and negative; each is named with its
     * key and value, and the load goes on */
    w = make_spm_writer(NULL);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", SPM_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 4000000000u), VKV_OK);
    assert_int_equal(vkv_gguf_set_i32(w, "tokenizer.ggml.eot_token_id", -1), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 70000), VKV_OK);
    printed = load_capturing_stderr(w, &tok);
    char past_end[16];
    snprintf(past_end, sizeof past_end, "%d", SPM_N);
    /* SentencePiece's defaults (bos 1, eos 2) stay, as in llama.cpp */
    expect_warning(printed, "tokenizer.ggml.bos_token_id", past_end, "using the default id 1 instead");
    expect_warning(printed, "tokenizer.ggml.eos_token_id", "4000000000", "using the default id 2 instead");
    /* no default: absent */
    expect_warning(printed, "tokenizer.ggml.eot_token_id", "-1", "the vocabulary has no such token");
    expect_warning(printed, "tokenizer.ggml.padding_token_id", "70000", "the vocabulary has no such token");
    assert_int_equal(vkv_tokenizer_bos(tok), 1);
    assert_int_equal(vkv_tokenizer_eos(tok), 2);
    assert_int_equal(vkv_tokenizer_pad(tok), VKV_TOKEN_NULL);
    /* <|im_end|> is found by its text, as when the key is missing */
    assert_int_equal(vkv_tokenizer_eot(tok), SPM_IM_END);
    expect_ids(tok, "hi", true, false, (const int32_t[]){1, SPM_SP_HI}, 2);
    free(printed);
    vkv_tokenizer_free(tok);
}

static void expect_push(vkv_detok *d, int32_t id, const char *want)
{
    const char *text;
    size_t len;
    assert_int_equal(vkv_detok_push(d, id, &text, &len), VKV_OK);
    assert_int_equal(len, strlen(want));
    if (len) assert_memory_equal(text, want, len);
}

static void test_detok_stream_holds_split_utf8(void **state)
{
    (void)state;
    vkv_tokenizer *tok = make_spm(NULL);
    vkv_detok d;
    vkv_detok_init(&d, tok, false);

    expect_push(&d, SPM_SP_HI, " hi");
    /* U+1F600 as four byte tokens: nothing until the last one */
    expect_push(&d, BYTE_TOK(0xF0), "");
    expect_push(&d, BYTE_TOK(0x9F), "");
    expect_push(&d, BYTE_TOK(0x98), "");
    expect_push(&d, BYTE_TOK(0x80), "\xF0\x9F\x98\x80");
    /* a held prefix comes out together with the text that completes it */
    expect_push(&d, BYTE_TOK(0xC3), "");
    expect_push(&d, BYTE_TOK(0xA9), "\xC3\xA9");
    expect_push(&d, BYTE_TOK(0xE2), "");
    expect_push(&d, BYTE_TOK(0x82), "");
    expect_push(&d, BYTE_TOK(0xAC), "\xE2\x82\xAC");
    /* control tokens print nothing and do not disturb a held prefix */
    expect_push(&d, BYTE_TOK(0xC3), "");
    expect_push(&d, SPM_IM_END, "");
    expect_push(&d, BYTE_TOK(0xA9), "\xC3\xA9");
    /* bytes that can never be valid pass straight through */
    expect_push(&d, BYTE_TOK(0xFF), "\xFF");
    expect_push(&d, BYTE_TOK(0x80), "\x80");
    expect_push(&d, BYTE_TOK(0xE2), "");
    expect_push(&d, SPM_H, "\xE2h");
    expect_push(&d, BYTE_TOK(0xE0), "");
    expect_push(&d, BYTE_TOK(0x80), "\xE0\x80");  /* overlong: E0 needs A0..BF next */

    /* flush returns an unfinished character */
    expect_push(&d, BYTE_TOK(0xF0), "");
    expect_push(&d, BYTE_TOK(0x9F), "");
    const char *text;
    size_t len;
    vkv_detok_flush(&d, &text, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(text, "\xF0\x9F", 2);
    vkv_detok_flush(&d, &text, &len);
    assert_int_equal(len, 0);

    /* raw bytes, split inside a character at every position */
    const char *s = "a\xE2\x82\xAC\xF0\x9F\x98\x80z";
    for (size_t cut = 0; cut <= strlen(s); cut++) {
        char got[32];
        size_t n = 0;
        assert_int_equal(vkv_detok_push_bytes(&d, s, cut, &text, &len), VKV_OK);
        /* what comes out always ends on a character boundary */
        assert_true(len == 0 || ((unsigned char)text[len - 1] & 0xC0) != 0xC0);
        memcpy(got + n, text, len);
        n += len;
        assert_int_equal(vkv_detok_push_bytes(&d, s + cut, strlen(s) - cut, &text, &len), VKV_OK);
        memcpy(got + n, text, len);
        n += len;
        assert_int_equal(n, strlen(s));
        assert_memory_equal(got, s, n);
    }
    vkv_detok_free(&d);

    /* with special set, control tokens print their text */
    vkv_detok_init(&d, tok, true);
    expect_push(&d, SPM_IM_START, "<|im_start|>");
    vkv_detok_free(&d);
    vkv_tokenizer_free(tok);
}

/* A byte-level BPE vocabulary: the 256 byte code points, then merged pieces. */
static vkv_gguf_writer *make_bpe_writer(const char *pre)
{
    static char bytes[256][4];
    const char *toks[256 + 4];
    int32_t types[256 + 4];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = (uint32_t)b;
        if (b <= 32) cp = 256u + (uint32_t)b;
        else if (b >= 127 && b <= 160) cp = 289u + (uint32_t)(b - 127);
        else if (b == 173) cp = 323;
        if (cp < 0x80) {
            bytes[b][0] = (char)cp;
            bytes[b][1] = 0;
        } else {
            bytes[b][0] = (char)(0xC0 | (cp >> 6));
            bytes[b][1] = (char)(0x80 | (cp & 0x3F));
            bytes[b][2] = 0;
        }
        toks[b] = bytes[b];
        types[b] = VKV_TOKEN_NORMAL;
    }
    toks[256] = "hi";
    toks[257] = "\xC4\xA0hi"; /* "Ġhi" */
    toks[258] = "<|im_start|>";
    toks[259] = "<|im_end|>";
    types[256] = types[257] = VKV_TOKEN_NORMAL;
    types[258] = types[259] = VKV_TOKEN_CONTROL;
    const char *merges[] = {"h i", "\xC4\xA0 hi"};
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_non_null(w);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"), VKV_OK);
    if (pre) assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.pre", pre), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 260), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.token_type", VKV_GGUF_INT32, types, 260), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 2), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 259), VKV_OK);
    return w;
}

static void test_bpe_small_vocab(void **state)
{
    (void)state;
    static const char *const pres[] = {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                                       "starcoder", "falcon", "mpt", "refact", "default", "tekken", "gpt-4o",
                                       "deepseek-v3", "bloom", "viking", "command-r"};
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        vkv_tokenizer *tok;
        assert_int_equal(load_from_writer(make_bpe_writer(pres[i]), &tok), VKV_OK);
        assert_string_equal(vkv_tokenizer_pre(tok), pres[i]);
        expect_ids(tok, "hi hi", false, false, (const int32_t[]){256, 257}, 2);
        expect_ids(tok, "<|im_start|>hi", false, true, (const int32_t[]){258, 256}, 2);
        /* "é" is the bytes C3 A9; this vocabulary lists byte b as id b */
        expect_ids(tok, "\xC3\xA9", false, false, (const int32_t[]){0xC3, 0xA9}, 2);
        assert_true(vkv_tokenizer_is_eog(tok, 259));
        char *back;
        size_t len;
        const int32_t ids[] = {256, 257, 0xC3, 0xA9, 258};
        assert_int_equal(vkv_detokenize(tok, ids, 5, false, &back, &len), VKV_OK);
        assert_string_equal(back, "hi hi\xC3\xA9");
        free(back);
        vkv_tokenizer_free(tok);
    }
    /* no pre key: llama.cpp's "default" */
    vkv_tokenizer *tok;
    assert_int_equal(load_from_writer(make_bpe_writer(NULL), &tok), VKV_OK);
    assert_string_equal(vkv_tokenizer_pre(tok), "default");
    vkv_tokenizer_free(tok);
}

static void test_unknown_pre_is_unsupported(void **state)
{
    (void)state;
    vkv_tokenizer *tok = (vkv_tokenizer *)&tok; /* any non-NULL value: a failed load resets it */
    assert_int_equal(load_from_writer(make_bpe_writer("no-such-pretokenizer"), &tok), VKV_ERR_UNSUPPORTED);
    assert_null(tok);
    assert_non_null(strstr(vkv_last_error(), "'no-such-pretokenizer'"));
    assert_non_null(strstr(vkv_last_error(), "tokenizer.ggml.pre"));
}

static void test_missing_vocabulary_is_format_error(void **state)
{
    (void)state;
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_int_equal(vkv_gguf_set_str(w, "general.architecture", "llama"), VKV_OK);
    vkv_tokenizer *tok;
    assert_int_equal(load_from_writer(w, &tok), VKV_ERR_FORMAT);

    w = vkv_gguf_writer_new(0);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "bert"), VKV_OK);
    assert_int_equal(load_from_writer(w, &tok), VKV_ERR_UNSUPPORTED);
    assert_non_null(strstr(vkv_last_error(), "'bert'"));

    /* gpt2 without merges */
    const char *toks[] = {"a", "b"};
    w = vkv_gguf_writer_new(0);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2), VKV_OK);
    assert_int_equal(load_from_writer(w, &tok), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "tokenizer.ggml.merges"));

    /* scores of the wrong length */
    const float scores[] = {0};
    w = vkv_gguf_writer_new(0);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.scores", VKV_GGUF_FLOAT32, scores, 1), VKV_OK);
    assert_int_equal(load_from_writer(w, &tok), VKV_ERR_FORMAT);
}

static void expect_chat(vkv_chat_template t, bool gen, const char *want)
{
    const vkv_chat_msg msgs[] = {
        {"system", "  You are terse.\n"},
        {"user", "Hi!"},
        {"assistant", "Hello."},
        {"user", "Bye"},
    };
    char *text;
    size_t len;
    assert_int_equal(vkv_chat_apply(t, msgs, 4, gen, &text, &len), VKV_OK);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    free(text);
}

static void test_chat_templates(void **state)
{
    (void)state;
    const char *llama3_src =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
        "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    const char *chatml_src =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
        "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    assert_int_equal(vkv_chat_template_detect(llama3_src), VKV_CHAT_LLAMA3);
    assert_int_equal(vkv_chat_template_detect(chatml_src), VKV_CHAT_CHATML);
    assert_int_equal(vkv_chat_template_detect("llama3"), VKV_CHAT_LLAMA3);
    assert_int_equal(vkv_chat_template_detect("chatml"), VKV_CHAT_CHATML);
    assert_int_equal(vkv_chat_template_detect("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), VKV_CHAT_UNKNOWN);
    assert_int_equal(vkv_chat_template_detect(NULL), VKV_CHAT_UNKNOWN);
    assert_string_equal(vkv_chat_template_name(VKV_CHAT_CHATML), "chatml");

    expect_chat(VKV_CHAT_LLAMA3, true,
                "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_chat(VKV_CHAT_CHATML, true,
                "<|im_start|>system\n  You are terse.\n<|im_end|>\n"
                "<|im_start|>user\nHi!<|im_end|>\n"
                "<|im_start|>assistant\nHello.<|im_end|>\n"
                "<|im_start|>user\nBye<|im_end|>\n"
                "<|im_start|>assistant\n");
    expect_chat(VKV_CHAT_CHATML, false,
                "<|im_start|>system\n  You are terse.\n<|im_end|>\n"
                "<|im_start|>user\nHi!<|im_end|>\n"
                "<|im_start|>assistant\nHello.<|im_end|>\n"
                "<|im_start|>user\nBye<|im_end|>\n");

    char *text;
    size_t len;
    assert_int_equal(vkv_chat_apply(VKV_CHAT_UNKNOWN, NULL, 0, true, &text, &len), VKV_ERR_UNSUPPORTED);

    /* from the model's metadata */
    vkv_chat_template t;
    vkv_tokenizer *tok = make_spm(chatml_src);
    assert_string_equal(vkv_tokenizer_chat_template_source(tok), chatml_src);
    assert_int_equal(vkv_tokenizer_chat_template(tok, &t), VKV_OK);
    assert_int_equal(t, VKV_CHAT_CHATML);
    /* the rendered prompt tokenizes into the control tokens */
    const vkv_chat_msg msg = {"user", "hi"};
    assert_int_equal(vkv_chat_apply(t, &msg, 1, false, &text, &len), VKV_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(vkv_tokenize(tok, text, len, true, true, &ids, &n), VKV_OK);
    assert_true(n >= 4);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], SPM_IM_START);
    free(ids);
    free(text);
    vkv_tokenizer_free(tok);

    tok = make_spm("{{ '[INST] ' + message['content'] + ' [/INST]' }}");
    assert_int_equal(vkv_tokenizer_chat_template(tok, &t), VKV_ERR_UNSUPPORTED);
    assert_non_null(strstr(vkv_last_error(), "[INST]"));
    vkv_tokenizer_free(tok);
    tok = make_spm(NULL);
    assert_int_equal(vkv_tokenizer_chat_template(tok, &t), VKV_ERR_UNSUPPORTED);
    assert_non_null(strstr(vkv_last_error(), "no chat template"));
    vkv_tokenizer_free(tok);
}

static void expect_render(vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs, const char *want)
{
    char *text;
    size_t len;
    assert_int_equal(vkv_chat_apply(t, msgs, n_msgs, true, &text, &len), VKV_OK);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    free(text);
}

#define QWEN25_SYSTEM                                                                                        \
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
#define QWEN3_NO_THINKING "<|im_start|>assistant\n<think>\n\n</think>\n\n"

static void test_qwen_chat_templates(void **state)
{
    (void)state;
    /* recognised by what their Jinja sources say */
    assert_int_equal(vkv_chat_template_detect("{{- '<|im_start|>' + message.role }}{%- if enable_thinking is defined "
                                              "and enable_thinking is false %}"),
                     VKV_CHAT_QWEN3);
    assert_int_equal(vkv_chat_template_detect("{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You "
                                              "are a helpful assistant.<|im_end|>\\n' }}"),
                     VKV_CHAT_QWEN25);
    assert_int_equal(vkv_chat_template_detect("qwen25"), VKV_CHAT_QWEN25);
    assert_int_equal(vkv_chat_template_detect("qwen3-thinking"), VKV_CHAT_QWEN3_THINKING);
    assert_int_equal(vkv_chat_template_thinking(VKV_CHAT_QWEN3, true), VKV_CHAT_QWEN3_THINKING);
    assert_int_equal(vkv_chat_template_thinking(VKV_CHAT_QWEN3_THINKING, false), VKV_CHAT_QWEN3);
    assert_int_equal(vkv_chat_template_thinking(VKV_CHAT_CHATML, true), VKV_CHAT_CHATML);
    assert_string_equal(vkv_chat_template_name(VKV_CHAT_QWEN3_THINKING), "qwen3-thinking");

    /* Qwen2.5: its default system message unless the conversation has one;
     * tool results become a user turn, unknown roles are left out */
    const vkv_chat_msg ask[] = {{"user", "Hi"}};
    expect_render(VKV_CHAT_QWEN25, ask, 1, QWEN25_SYSTEM "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect_render(VKV_CHAT_CHATML, ask, 1, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const vkv_chat_msg tools[] = {{"system", "S"}, {"user", "Q"}, {"tool", "r"}, {"developer", "x"}};
    expect_render(VKV_CHAT_QWEN25, tools, 4,
                  "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>assistant\n");

    /* Qwen3: thinking off ends the generation prompt in an empty think block */
    expect_render(VKV_CHAT_QWEN3, ask, 1, "<|im_start|>user\nHi<|im_end|>\n" QWEN3_NO_THINKING);
    expect_render(VKV_CHAT_QWEN3_THINKING, ask, 1, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    /* the reasoning of an answer before the last query is dropped */
    const vkv_chat_msg earlier[] = {
        {"user", "Hi"}, {"assistant", "<think>\nplan\n</think>\n\nHello."}, {"user", "Bye"}};
    expect_render(VKV_CHAT_QWEN3, earlier, 3,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                  "<|im_start|>user\nBye<|im_end|>\n" QWEN3_NO_THINKING);
    /* after the last query: kept when there is some, always for the last
     * message; a run of tool results is one user turn */
    const vkv_chat_msg after[] = {{"user", "Q"},  {"assistant", "Calling."},
                                  {"tool", "r1"}, {"tool", "r2"},
                                  {"assistant", "<think>\n\nwhy\n</think>\nA."}};
    expect_render(VKV_CHAT_QWEN3, after, 5,
                  "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nCalling.<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>"
                  "<|im_end|>\n<|im_start|>assistant\n<think>\nwhy\n</think>\n\nA.<|im_end|>\n" QWEN3_NO_THINKING);
    const vkv_chat_msg last_answer[] = {{"user", "Q"}, {"assistant", "A"}};
    expect_render(VKV_CHAT_QWEN3, last_answer, 2,
                  "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"
                  QWEN3_NO_THINKING);
    /* a user message that wraps a tool's result is not a query */
    const vkv_chat_msg wrapped[] = {{"user", "Q"},
                                    {"assistant", "<think>r</think>x"},
                                    {"user", "<tool_response>ok</tool_response>"},
                                    {"developer", "dropped"}};
    expect_render(VKV_CHAT_QWEN3, wrapped, 4,
                  "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nx<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>ok</tool_response><|im_end|>\n" QWEN3_NO_THINKING);
    /* a system message and the rest as ChatML has them */
    expect_chat(VKV_CHAT_QWEN3, true,
                "<|im_start|>system\n  You are terse.\n<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
                "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n" QWEN3_NO_THINKING);
}

int main(void)
{
    /* every llama.cpp vocabulary with test cases in the shared data, except
     * bert-bge: WordPiece, which no model here uses */
    const struct CMUnitTest tests[] = {
        VOCAB_TEST("llama-bpe"),
        VOCAB_TEST("qwen2"),
        VOCAB_TEST("llama-spm"),
        VOCAB_TEST("phi-3"),
        VOCAB_TEST("gpt-2"),
        VOCAB_TEST("deepseek-llm"),
        cmocka_unit_test(test_real_vocab_chat_tokens),
        cmocka_unit_test(test_spm_merges_and_byte_fallback),
        cmocka_unit_test(test_special_ids_outside_vocabulary_warn),
        cmocka_unit_test(test_detok_stream_holds_split_utf8),
        cmocka_unit_test(test_bpe_small_vocab),
        cmocka_unit_test(test_unknown_pre_is_unsupported),
        cmocka_unit_test(test_missing_vocabulary_is_format_error),
        cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_qwen_chat_templates),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* without its conformance data the suite has not shown what it is for:
     * report it as skipped (77) rather than passed */
    if (!failed && n_vocab_skipped) {
        print_message("no llama.cpp vocabularies (%d tests): reporting the suite as skipped\n", n_vocab_skipped);
        return 77;
    }
    return failed;
}
