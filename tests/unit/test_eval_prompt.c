/* Evaluation prompts (src/eval/prompt.c): LongBench's template formatting,
 * the chat template around a prompt, the context/question split in tokens
 * and LongBench's middle truncation. The tokenizer cases use the
 * vocabularies of models/vkvector-shakespeare.gguf and
 * ../shared/models/stories260K-f32.gguf (skipped when absent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eval/prompt.h"
#include "model/gguf.h"

static void format_replaces_fields_and_marks_the_question(void **state)
{
    (void)state;
    char *out;
    size_t len, split;
    assert_int_equal(vkv_lb_format("Read {{this}}.\n\n{context}\n\nQuestion: {input}\nAnswer:", "CTX", "Why?", &out,
                                   &len, &split), VKV_OK);
    assert_string_equal(out, "Read {this}.\n\nCTX\n\nQuestion: Why?\nAnswer:");
    assert_int_equal(len, strlen(out));
    assert_string_equal(out + split, "Why?\nAnswer:");
    free(out);
    /* no {input}: the instruction after the context plays the question */
    assert_int_equal(vkv_lb_format("Summarize:\n{context}\n\nNow, summarize.\n\nSummary:", "CTX", "", &out, &len, &split),
                     VKV_OK);
    assert_string_equal(out + split, "\n\nNow, summarize.\n\nSummary:");
    free(out);
    /* repobench-p: {context}{input} */
    assert_int_equal(vkv_lb_format("Code:\n{context}{input}Next line of code:\n", "A", "B", &out, &len, &split), VKV_OK);
    assert_string_equal(out + split, "BNext line of code:\n");
    free(out);
}

static void format_rejects_unknown_fields(void **state)
{
    (void)state;
    char *out = (char *)1;
    size_t len, split;
    assert_int_equal(vkv_lb_format("{context} {length}", "a", "b", &out, &len, &split), VKV_ERR_FORMAT);
    assert_null(out);
    assert_int_equal(vkv_lb_format("{context", "a", "b", &out, &len, &split), VKV_ERR_FORMAT);
    assert_int_equal(vkv_lb_format("a } b", "a", "b", &out, &len, &split), VKV_ERR_FORMAT);
}

static void chat_wrap_moves_the_split_with_the_template(void **state)
{
    (void)state;
    const char *text = "Context here.\n\nQuestion: Who?";
    size_t split = strstr(text, "Who?") - text;
    char *out;
    size_t len, osplit;
    assert_int_equal(vkv_chat_wrap(VKV_CHAT_LLAMA3, text, strlen(text), split, &out, &len, &osplit), VKV_OK);
    assert_string_equal(out, "<|start_header_id|>user<|end_header_id|>\n\nContext here.\n\nQuestion: Who?<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n");
    assert_int_equal(len, strlen(out));
    assert_memory_equal(out + osplit, "Who?<|eot_id|>", 14);
    free(out);
    assert_int_equal(vkv_chat_wrap(VKV_CHAT_CHATML, text, strlen(text), split, &out, &len, &osplit), VKV_OK);
    assert_string_equal(out, "<|im_start|>user\nContext here.\n\nQuestion: Who?<|im_end|>\n<|im_start|>assistant\n");
    assert_memory_equal(out + osplit, "Who?", 4);
    free(out);
}

/* Vocabularies of real model files: the project's default model (byte-level
 * BPE) and stories260K (SentencePiece whose pieces are bytes). */
static vkv_tokenizer *load_vocab(const char *which)
{
    const char *s = getenv("VKVECTOR_SHARED");
    char path[4096];
    if (!strcmp(which, "bpe")) snprintf(path, sizeof path, "models/vkvector-shakespeare.gguf");
    else snprintf(path, sizeof path, "%s/models/stories260K-f32.gguf", s && *s ? s : "../shared");
    vkv_gguf *g;
    if (vkv_gguf_open(path, &g)) {
        print_message("[  SKIP    ] %s: %s\n", path, vkv_last_error());
        return NULL;
    }
    vkv_tokenizer *tok = NULL;
    vkv_status st = vkv_tokenizer_load(g, &tok);
    vkv_gguf_close(g);
    assert_int_equal(st, VKV_OK);
    return tok;
}

static void tokenize_split_cuts_at_the_question(void **state)
{
    (void)state;
    const char *text = "The story goes on and on.\n\nQuestion: Who wrote it?\nAnswer:";
    const char *question = "Who wrote it?";
    size_t len = strlen(text), split = (size_t)(strstr(text, question) - text);
    int n_run = 0;
    vkv_tokenizer *tok = load_vocab("bpe");
    if (tok) {
        /* the pieces spell the text: one tokenization of the whole, cut at the question */
        int32_t *ids, *whole;
        size_t n, n_split, n_whole;
        assert_int_equal(vkv_tokenize_split(tok, text, len, split, false, &ids, &n, &n_split), VKV_OK);
        assert_int_equal(vkv_tokenize(tok, text, len, true, false, &whole, &n_whole), VKV_OK);
        assert_int_equal(n, n_whole);
        assert_memory_equal(ids, whole, n * sizeof *ids);
        assert_true(n_split > 1 && n_split < n);
        char *tail;
        size_t tl;
        assert_int_equal(vkv_detokenize(tok, ids + n_split, n - n_split, false, &tail, &tl), VKV_OK);
        /* the token that straddles the split (" Who") goes with the question */
        assert_true(!strncmp(tail, question, strlen(question)) || (tail[0] == ' ' && !strncmp(tail + 1, question, 3)));
        free(tail);
        free(ids);
        /* the split at the very end: everything is context */
        assert_int_equal(vkv_tokenize_split(tok, text, len, len, false, &ids, &n, &n_split), VKV_OK);
        assert_int_equal(n_split, n);
        free(ids);
        free(whole);
        vkv_tokenizer_free(tok);
        n_run++;
    }
    if ((tok = load_vocab("spm"))) {
        /* the pieces are bytes of U+2581, not the text's spaces: the two parts are tokenized apart */
        int32_t *ids, *head, *tail;
        size_t n, n_split, nh, nt;
        assert_int_equal(vkv_tokenize_split(tok, text, len, split, false, &ids, &n, &n_split), VKV_OK);
        assert_int_equal(vkv_tokenize(tok, text, split, true, false, &head, &nh), VKV_OK);
        assert_int_equal(vkv_tokenize(tok, text + split, len - split, false, false, &tail, &nt), VKV_OK);
        assert_int_equal(n_split, nh);
        assert_int_equal(n, nh + nt);
        assert_memory_equal(ids, head, nh * sizeof *ids);
        assert_memory_equal(ids + nh, tail, nt * sizeof *ids);
        free(ids);
        free(head);
        free(tail);
        vkv_tokenizer_free(tok);
        n_run++;
    }
    if (!n_run) skip();
}

static void truncate_middle_keeps_both_ends_and_the_question(void **state)
{
    (void)state;
    vkv_tokenizer *tok = load_vocab("bpe");
    if (!tok) skip();
    char text[8192];
    size_t len = 0;
    len += (size_t)snprintf(text + len, sizeof text - len, "Instructions first.\n\n");
    for (int i = 0; i < 200; i++) len += (size_t)snprintf(text + len, sizeof text - len, "Sentence number %d. ", i);
    len += (size_t)snprintf(text + len, sizeof text - len, "\n\nQuestion: What was sentence 3?\nAnswer:");
    const char *question = "What was sentence 3?";
    size_t split = (size_t)(strstr(text, question) - text);
    char *out;
    size_t ol, osplit, n_tokens;
    bool truncated;
    /* short enough: a copy */
    assert_int_equal(vkv_lb_truncate_middle(tok, text, len, split, 100000, &out, &ol, &osplit, &n_tokens, &truncated),
                     VKV_OK);
    assert_false(truncated);
    assert_int_equal(ol, len);
    assert_int_equal(osplit, split);
    assert_true(n_tokens > 600);
    free(out);
    /* cut to 120 tokens: the start and the question survive, the middle goes */
    assert_int_equal(vkv_lb_truncate_middle(tok, text, len, split, 120, &out, &ol, &osplit, &n_tokens, &truncated),
                     VKV_OK);
    assert_true(truncated);
    assert_true(ol < len);
    assert_memory_equal(out, "Instructions first.", 19);
    assert_string_equal(out + osplit, "What was sentence 3?\nAnswer:");
    assert_null(strstr(out, "Sentence number 100."));
    int32_t *ids;
    size_t n;
    assert_int_equal(vkv_tokenize(tok, out, ol, true, false, &ids, &n), VKV_OK);
    assert_true(n >= 110 && n <= 124); /* re-tokenizing the joined text moves a few tokens */
    free(ids);
    free(out);
    /* a cut through the question: the split sits at the join */
    assert_int_equal(vkv_lb_truncate_middle(tok, text, len, split, 8, &out, &ol, &osplit, &n_tokens, &truncated), VKV_OK);
    assert_true(osplit <= ol);
    free(out);
    vkv_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(format_replaces_fields_and_marks_the_question),
        cmocka_unit_test(format_rejects_unknown_fields),
        cmocka_unit_test(chat_wrap_moves_the_split_with_the_template),
        cmocka_unit_test(tokenize_split_cuts_at_the_question),
        cmocka_unit_test(truncate_middle_keeps_both_ends_and_the_question),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
