/* The Hugging Face tokenizer reader (src/tok/hf_tokenizer.c): a small
 * byte-level BPE tokenizer.json written here, its ids, BOS/EOS and template;
 * the merge forms, NFC and a known pre-tokenizer regex; each malformed or
 * unsupported file refused with a message naming it; and cut or corrupted
 * copies of the valid file, which must fail cleanly or load, never crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tok/tokenizer.h"

/* "Ġ" (U+0120) is the byte-level form of a space; "Ã©" that of "é" */
#define SPACE "\xC4\xA0"
#define LLAMA3_REGEX                                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+" \
    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

static const char VALID[] =
    "{\"version\":\"1.0\",\n"
    "\"added_tokens\":[\n"
    " {\"id\":15,\"content\":\"<|end|>\",\"special\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
    "\"single_word\":false},\n"
    " {\"id\":16,\"content\":\"<tag>\",\"special\":false},\n"
    " {\"id\":17,\"content\":\"<|begin|>\",\"special\":true}],\n"
    "\"normalizer\":null,\n"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s?\\\\p{L}+|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]},\n"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|begin|>\","
    "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<|begin|>\":"
    "{\"id\":\"<|begin|>\",\"ids\":[17],\"tokens\":[\"<|begin|>\"]}}},\n"
    "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true},\n"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"ignore_merges\":false,\n"
    "\"vocab\":{\"h\":0,\"e\":1,\"l\":2,\"o\":3,\"" SPACE "\":4,\"w\":5,\"r\":6,\"d\":7,\"he\":8,\"ll\":9,"
    "\"hell\":10,\"hello\":11,\"" SPACE "w\":12,\"or\":13,\"" SPACE "wor\":14,"
    "\"\xC3\x83\":18,\"\xC2\xA9\":19,\"\xC3\x83\xC2\xA9\":20},\n"
    "\"merges\":[\"h e\",\"l l\",\"he ll\",\"hell o\",\"" SPACE " w\",\"o r\",\"" SPACE "w or\",\"\xC3\x83 \xC2\xA9\"]}}\n";

static const char CONFIG[] = "{\"bos_token\":\"<|begin|>\",\"eos_token\":{\"content\":\"<|end|>\"},"
                             "\"chat_template\":\"{{ messages }}\",\"tokenizer_class\":\"PreTrainedTokenizerFast\"}";

#define TEST_TMPDIR_NAME "hftok"
#include "test_tmpdir.h"

static void write_bytes(const char *name, const void *p, size_t n)
{
    FILE *f = fopen(tmp_path(name), "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *name, const char *text) { write_bytes(name, text, strlen(text)); }

/* text with the first occurrence of `from` replaced by `to` (malloc'ed). */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    if (!at) fail_msg("'%s' not in the file", from);
    size_t n = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    assert_non_null(out);
    size_t head = (size_t)(at - text);
    memcpy(out, text, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

static void write_folder(const char *tokenizer_json, const char *config)
{
    write_text("tokenizer.json", tokenizer_json);
    unlink(tmp_path("generation_config.json"));
    if (config) write_text("tokenizer_config.json", config);
    else unlink(tmp_path("tokenizer_config.json"));
}

static void expect_ids(const vkv_tokenizer *tok, const char *text, bool add_special, bool parse_special,
                       const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(vkv_tokenize(tok, text, strlen(text), add_special, parse_special, &ids, &n), VKV_OK);
    if (n != n_want) fail_msg("'%s': %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++)
        if (ids[i] != want[i]) fail_msg("'%s': id %zu is %d, want %d", text, i, ids[i], want[i]);
    free(ids);
}
#define EXPECT(tok, text, add, parse, ...)                                                            \
    do {                                                                                              \
        const int32_t want_[] = {__VA_ARGS__};                                                        \
        expect_ids(tok, text, add, parse, want_, sizeof want_ / sizeof want_[0]);                     \
    } while (0)

static vkv_tokenizer *load_ok(void)
{
    vkv_tokenizer *tok = NULL;
    vkv_status st = vkv_tokenizer_load_hf(tmpdir, &tok);
    if (st) fail_msg("load failed: %s", vkv_last_error());
    assert_non_null(tok);
    return tok;
}

static void expect_error(vkv_status want, const char *file, const char *words)
{
    vkv_tokenizer *tok = (vkv_tokenizer *)&tok;
    vkv_status st = vkv_tokenizer_load_hf(tmpdir, &tok);
    if (st != want) fail_msg("status %s, want %s (%s)", vkv_status_name(st), vkv_status_name(want), vkv_last_error());
    assert_null(tok);
    const char *msg = vkv_last_error();
    if (!strstr(msg, tmp_path(file))) fail_msg("error '%s' does not name %s", msg, file);
    if (!strstr(msg, words)) fail_msg("error '%s' does not say '%s'", msg, words);
}

/* ------------------------------------------------------------ valid files */

static void test_ids_and_specials(void **state)
{
    (void)state;
    write_folder(VALID, CONFIG);
    vkv_tokenizer *tok = load_ok();
    assert_int_equal(vkv_tokenizer_n_vocab(tok), 21);
    assert_int_equal(vkv_tokenizer_type(tok), VKV_VOCAB_BPE);
    assert_string_equal(vkv_tokenizer_pre(tok), "tokenizer.json");
    assert_int_equal(vkv_tokenizer_bos(tok), 17);
    assert_int_equal(vkv_tokenizer_eos(tok), 15);
    assert_true(vkv_tokenizer_adds_bos(tok));
    assert_true(vkv_tokenizer_is_eog(tok, 15));
    assert_string_equal(vkv_tokenizer_chat_template_source(tok), "{{ messages }}");

    EXPECT(tok, "hello world", false, false, 11, 14, 2, 7);
    EXPECT(tok, "hello world", true, false, 17, 11, 14, 2, 7);
    /* special tokens split out only when parsed; the non-special one always */
    EXPECT(tok, "hello<|end|>hello<tag>", false, true, 11, 15, 11, 16);
    EXPECT(tok, "hello<tag>", false, false, 11, 16);

    const int32_t ids[] = {17, 11, 14, 2, 7, 16, 15};
    char *text;
    size_t len;
    assert_int_equal(vkv_detokenize(tok, ids, 7, true, &text, &len), VKV_OK);
    assert_string_equal(text, "<|begin|>hello world<tag><|end|>");
    free(text);
    assert_int_equal(vkv_detokenize(tok, ids, 7, false, &text, &len), VKV_OK);
    assert_string_equal(text, "hello world<tag>");
    free(text);
    vkv_tokenizer_free(tok);
}

/* Without tokenizer_config.json the post-processor's template decides. */
static void test_template_alone(void **state)
{
    (void)state;
    write_folder(VALID, NULL);
    vkv_tokenizer *tok = load_ok();
    assert_int_equal(vkv_tokenizer_bos(tok), 17);
    assert_true(vkv_tokenizer_adds_bos(tok));
    assert_null(vkv_tokenizer_chat_template_source(tok));
    vkv_tokenizer_free(tok);

    /* add_bos_token false wins over the template */
    write_folder(VALID, "{\"add_bos_token\":false,\"bos_token\":null}");
    tok = load_ok();
    assert_false(vkv_tokenizer_adds_bos(tok));
    EXPECT(tok, "hello", true, false, 11);
    vkv_tokenizer_free(tok);
}

/* [a, b] merges, ignore_merges, generation_config.json's stop ids. */
static void test_array_merges_and_stops(void **state)
{
    (void)state;
    char *a = replaced(VALID, "\"hell o\"", "[\"hell\",\"o\"]");
    char *b = replaced(a, "\"h e\"", "[\"h\",\"e\"]");
    write_folder(b, CONFIG);
    write_text("generation_config.json", "{\"eos_token_id\":[15,16]}");
    vkv_tokenizer *tok = load_ok();
    EXPECT(tok, "hello", false, false, 11);
    assert_true(vkv_tokenizer_is_eog(tok, 16));
    vkv_tokenizer_free(tok);

    /* without the merge "he ll", "hello" is no longer reached by merging,
     * but ignore_merges takes a word that is a token as it is */
    char *c = replaced(b, "\"he ll\",", "");
    write_folder(c, CONFIG);
    tok = load_ok();
    EXPECT(tok, "hello", false, false, 8, 9, 3);
    vkv_tokenizer_free(tok);
    char *d = replaced(c, "\"ignore_merges\":false", "\"ignore_merges\":true");
    write_folder(d, CONFIG);
    tok = load_ok();
    EXPECT(tok, "hello", false, false, 11);
    vkv_tokenizer_free(tok);
    free(a);
    free(b);
    free(c);
    free(d);
}

static void test_nfc_and_known_regex(void **state)
{
    (void)state;
    /* "e" + U+0301 COMBINING ACUTE ACCENT is "é" in NFC */
    char *nfc = replaced(VALID, "\"normalizer\":null", "\"normalizer\":{\"type\":\"NFC\"}");
    write_folder(nfc, CONFIG);
    vkv_tokenizer *tok = load_ok();
    EXPECT(tok, "e\xCC\x81", false, false, 20);
    EXPECT(tok, "\xC3\xA9", false, false, 20);
    vkv_tokenizer_free(tok);

    /* Llama 3's regex as tokenizer.json spells it runs as the llama3 list */
    char *llama = replaced(VALID, "\\\\s?\\\\p{L}+|\\\\s+", LLAMA3_REGEX);
    write_folder(llama, CONFIG);
    tok = load_ok();
    assert_string_equal(vkv_tokenizer_pre(tok), "llama3");
    EXPECT(tok, "hello world", false, false, 11, 14, 2, 7);
    vkv_tokenizer_free(tok);
    free(nfc);
    free(llama);
}

/* ------------------------------------------------------------ bad files */

typedef struct bad_case {
    const char *from, *to;
    vkv_status status;
    const char *words;
} bad_case;

static void test_malformed(void **state)
{
    (void)state;
    const bad_case cases[] = {
        {"\"type\":\"BPE\"", "\"type\":\"WordPiece\"", VKV_ERR_UNSUPPORTED, "model type 'WordPiece'"},
        {"\"type\":\"BPE\"", "\"type\":\"Unigram\"", VKV_ERR_UNSUPPORTED, "model type 'Unigram'"},
        {"\"hell o\"", "\"hell q\"", VKV_ERR_FORMAT, "names 'q', which is not a token"},
        {"\"hell o\"", "\"o hell\"", VKV_ERR_FORMAT, "makes 'ohell', which is not a token"},
        {"\"hell o\"", "\"hello\"", VKV_ERR_FORMAT, "not two tokens separated by a space"},
        {"\"hell o\"", "[\"hell\"]", VKV_ERR_FORMAT, "not \"left right\""},
        {"\"w\":5", "\"w\":4", VKV_ERR_FORMAT, "id 4 is duplicated"},
        {"\"id\":16", "\"id\":15", VKV_ERR_FORMAT, "id 15 is duplicated"},
        {"\"id\":16", "\"id\":0", VKV_ERR_FORMAT, "id 0 is duplicated"},
        {"\"d\":7", "\"d\":99", VKV_ERR_FORMAT, "id 99, out of range"},
        {"\"d\":7", "\"d\":-7", VKV_ERR_FORMAT, "negative"},
        {"\"d\":7", "\"d\":\"7\"", VKV_ERR_FORMAT, "a string, not a token id"},
        {"\"vocab\":{", "\"vocab\":[{", VKV_ERR_FORMAT, ""},
        {"\"merges\":[", "\"merges\":{\"m\":[", VKV_ERR_FORMAT, ""},
        {"\"normalizer\":null", "\"normalizer\":{\"type\":\"Lowercase\"}", VKV_ERR_UNSUPPORTED, "normalizer 'Lowercase'"},
        {"\"type\":\"Split\"", "\"type\":\"Digits\"", VKV_ERR_UNSUPPORTED, "pre_tokenizer 'Digits' is not supported"},
        {"\"use_regex\":false}]", "\"use_regex\":false},{\"type\":\"Split\"}]", VKV_ERR_UNSUPPORTED,
         "a 'Split' step after ByteLevel is not supported"},
        {"\"add_prefix_space\":false,\"trim", "\"add_prefix_space\":true,\"trim", VKV_ERR_UNSUPPORTED,
         "ByteLevel add_prefix_space after a Split is not supported"},
        {"\"post_processor\":{\"type\":\"TemplateProcessing\"", "\"post_processor\":{\"type\":\"BertProcessing\"",
         VKV_ERR_UNSUPPORTED, "post_processor 'BertProcessing' is not supported"},
        {"\"behavior\":\"Isolated\"", "\"behavior\":\"Removed\"", VKV_ERR_UNSUPPORTED, "Isolated"},
        {"\"Regex\":\"", "\"Regex\":\"(", VKV_ERR_UNSUPPORTED, "does not compile"},
        {"\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"WordPiece\"", VKV_ERR_UNSUPPORTED,
         "decoder 'WordPiece'"},
        {"\"special\":false}", "\"special\":\"no\"}", VKV_ERR_FORMAT, "special is a string"},
        {"\"ids\":[17]", "\"ids\":[170]", VKV_ERR_FORMAT, "not one id of the vocabulary"},
        {"\"model\":{", "\"modelx\":{", VKV_ERR_FORMAT, "missing \"model\""},
        /* options of the format vkvector refuses by name */
        {"\"single_word\":false", "\"single_word\":true", VKV_ERR_UNSUPPORTED, "single_word is true for '<|end|>'"},
        {"\"dropout\":null", "\"dropout\":null,\"byte_fallback\":true", VKV_ERR_UNSUPPORTED, "model.byte_fallback is true"},
        {"\"dropout\":null", "\"dropout\":0.1", VKV_ERR_UNSUPPORTED, "model.dropout is set"},
        {"\"dropout\":null", "\"dropout\":null,\"continuing_subword_prefix\":\"##\"", VKV_ERR_UNSUPPORTED,
         "model.continuing_subword_prefix is set"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = replaced(VALID, cases[i].from, cases[i].to);
        write_folder(text, CONFIG);
        expect_error(cases[i].status, "tokenizer.json", cases[i].words);
        free(text);
    }

    /* a truncated file: the JSON parser's message, naming the file */
    write_folder(VALID, CONFIG);
    write_bytes("tokenizer.json", VALID, sizeof VALID / 2);
    expect_error(VKV_ERR_FORMAT, "tokenizer.json", "");

    /* tokenizer_config.json naming a token the vocabulary lacks */
    write_folder(VALID, "{\"eos_token\":\"</s>\"}");
    expect_error(VKV_ERR_FORMAT, "tokenizer_config.json", "eos_token '</s>' is not a token");
    write_folder(VALID, "{\"add_bos_token\":1}");
    expect_error(VKV_ERR_FORMAT, "tokenizer_config.json", "add_bos_token is a number");
    write_folder(VALID, "[1,2");
    expect_error(VKV_ERR_FORMAT, "tokenizer_config.json", "");
    write_folder(VALID, CONFIG);
    write_text("generation_config.json", "{\"eos_token_id\":[15,500]}");
    expect_error(VKV_ERR_FORMAT, "generation_config.json", "out of range");

    /* no tokenizer.json at all */
    unlink(tmp_path("tokenizer.json"));
    expect_error(VKV_ERR_IO, "tokenizer.json", "");
}

/* ------------------------------------------------------------ fuzzing */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13; /* xorshift64 */
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A loaded tokenizer is used a little, so a bad table shows up under ASan.
 * 1 if it loaded; a refusal must leave no handle and say why. */
static int load_and_use(void)
{
    vkv_tokenizer *tok = (vkv_tokenizer *)&tok;
    vkv_status st = vkv_tokenizer_load_hf(tmpdir, &tok);
    if (st) {
        if (st != VKV_ERR_FORMAT && st != VKV_ERR_UNSUPPORTED)
            fail_msg("status %s: %s", vkv_status_name(st), vkv_last_error());
        assert_null(tok);
        assert_true(strstr(vkv_last_error(), ".json") != NULL); /* names the file */
        return 0;
    }
    int32_t *ids;
    size_t n;
    const char *text = "hello world <|end|><tag> \xC3\xA9!";
    assert_int_equal(vkv_tokenize(tok, text, strlen(text), true, true, &ids, &n), VKV_OK);
    char *out;
    size_t len;
    assert_int_equal(vkv_detokenize(tok, ids, n, true, &out, &len), VKV_OK);
    free(out);
    free(ids);
    vkv_tokenizer_free(tok);
    return 1;
}

/* The GGUF reader's fuzz targets (tests/unit/test_gguf.c) for one file of the
 * folder: every cut fails, and seeded flips and overwrites either load a
 * usable tokenizer or are refused with a message naming the file. */
static void fuzz_file(const char *name, const char *valid, int iterations, uint64_t seed)
{
    size_t size = strlen(valid);
    for (size_t n = 0; n < size - 1; n++) {
        write_bytes(name, valid, n);
        vkv_tokenizer *tok = (vkv_tokenizer *)&tok;
        vkv_status st = vkv_tokenizer_load_hf(tmpdir, &tok);
        if (st != VKV_ERR_FORMAT) fail_msg("%s cut at %zu: %s", name, n, vkv_status_name(st));
        assert_null(tok);
        if (!strstr(vkv_last_error(), name)) fail_msg("%s cut at %zu: '%s'", name, n, vkv_last_error());
    }
    char *copy = malloc(size);
    assert_non_null(copy);
    uint64_t rng = seed;
    int n_loaded = 0;
    for (int iter = 0; iter < iterations; iter++) {
        memcpy(copy, valid, size);
        int n_mut = 1 + (int)(rng_next(&rng) % 3);
        for (int m = 0; m < n_mut; m++) {
            size_t at = (size_t)(rng_next(&rng) % size);
            switch (rng_next(&rng) % 3) {
            case 0: copy[at] ^= (char)(1u << (rng_next(&rng) % 8)); break;
            case 1: copy[at] = "0123456789\"{}[],:-"[rng_next(&rng) % 18]; break;
            default: copy[at] = (char)rng_next(&rng); break;
            }
        }
        write_bytes(name, copy, size);
        n_loaded += load_and_use();
    }
    /* Both outcomes happen, or the mutations exercise nothing. */
    if (n_loaded < iterations / 20 || n_loaded > iterations - iterations / 20)
        fail_msg("%s: %d of %d variants loaded", name, n_loaded, iterations);
    write_bytes(name, valid, size);
    free(copy);
}

static void test_fuzz(void **state)
{
    (void)state;
    write_folder(VALID, CONFIG);
    fuzz_file("tokenizer.json", VALID, 1500, 0x9e3779b97f4a7c15ull);
    fuzz_file("tokenizer_config.json", CONFIG, 600, 0x2545f4914f6cdd1dull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_and_specials), cmocka_unit_test(test_template_alone),
        cmocka_unit_test(test_array_merges_and_stops), cmocka_unit_test(test_nfc_and_known_regex),
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
