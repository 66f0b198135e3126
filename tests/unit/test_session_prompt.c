/* The session's one prompt-split function (src/session/session.c,
 * vkv_session_tokenize) on the project's default model's vocabulary
 * (byte-level BPE with the Llama-3 chat template): the two split modes, the
 * chat template around context and question, and the errors. No device: the
 * session here holds only a tokenizer. */
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
#include "session/session.h"

static int setup(void **state)
{
    vkv_gguf *g;
    if (vkv_gguf_open("models/vkvector-shakespeare.gguf", &g)) {
        print_message("cannot open the default model: %s\n", vkv_last_error());
        return -1;
    }
    vkv_session *s = calloc(1, sizeof *s);
    vkv_status st = vkv_tokenizer_load(g, &s->tok);
    vkv_gguf_close(g);
    if (st) return -1;
    s->chat = VKV_CHAT_LLAMA3;
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    vkv_session *s = *state;
    vkv_tokenizer_free(s->tok);
    free(s);
    return 0;
}

/* ids of text (BOS as the vocabulary adds it when bos), special tokens parsed when special. */
static size_t tokens(const vkv_session *s, const char *text, bool bos, bool special, int32_t **ids)
{
    size_t n;
    assert_int_equal(vkv_tokenize(s->tok, text, strlen(text), bos, special, ids, &n), VKV_OK);
    return n;
}

/* pr is head tokenized with BOS, then tail tokenized without. */
static void expect_apart(const vkv_session *s, const vkv_prompt *pr, const char *head, const char *tail, bool special)
{
    int32_t *h, *t;
    size_t n_head = tokens(s, head, true, special, &h), n_tail = tokens(s, tail, false, special, &t);
    assert_int_equal(pr->n_context, n_head);
    assert_int_equal(pr->n, n_head + n_tail);
    assert_memory_equal(pr->ids, h, n_head * sizeof *h);
    assert_memory_equal(pr->ids + n_head, t, n_tail * sizeof *t);
    free(h);
    free(t);
}

static void apart_tokenizes_context_and_question_separately(void **state)
{
    const vkv_session *s = *state;
    const char *text = "It was the best of times.Who said it?";
    size_t split = strlen("It was the best of times.");
    vkv_prompt pr;
    assert_int_equal(vkv_session_tokenize(s, text, strlen(text), split, false, VKV_SPLIT_APART, &pr), VKV_OK);
    expect_apart(s, &pr, "It was the best of times.", "\n\nWho said it?", false);
    vkv_prompt_free(&pr);
    /* No question: everything is context. */
    assert_int_equal(vkv_session_tokenize(s, text, strlen(text), strlen(text), false, VKV_SPLIT_APART, &pr), VKV_OK);
    assert_int_equal(pr.n, pr.n_context);
    vkv_prompt_free(&pr);
}

static void whole_splits_one_tokenization(void **state)
{
    const vkv_session *s = *state;
    const char *text = "The story goes on and on.\n\nQuestion: Who wrote it?";
    size_t split = (size_t)(strstr(text, "Who") - text);
    vkv_prompt pr;
    assert_int_equal(vkv_session_tokenize(s, text, strlen(text), split, false, VKV_SPLIT_WHOLE, &pr), VKV_OK);
    int32_t *ids, *want;
    size_t n, n_split, n_want = tokens(s, text, true, false, &want);
    assert_int_equal(vkv_tokenize_split(s->tok, text, strlen(text), split, false, &ids, &n, &n_split), VKV_OK);
    assert_int_equal(pr.n, n_want); /* the whole text, tokenized once */
    assert_memory_equal(pr.ids, want, n_want * sizeof *want);
    assert_int_equal(pr.n_context, n_split);
    assert_true(pr.n_context > 0 && pr.n_context < pr.n);
    free(ids);
    free(want);
    vkv_prompt_free(&pr);
}

static void chat_wraps_both_parts_in_the_user_turn(void **state)
{
    const vkv_session *s = *state;
    const char *text = "Context here.Who?";
    size_t split = strlen("Context here.");
    vkv_prompt pr;
    assert_int_equal(vkv_session_tokenize(s, text, strlen(text), split, true, VKV_SPLIT_APART, &pr), VKV_OK);
    /* The context ends where the question starts inside the user message; the
     * question part carries the end of the turn and the assistant header. */
    char *wrapped;
    size_t wl, ws;
    assert_int_equal(vkv_chat_wrap(VKV_CHAT_LLAMA3, text, strlen(text), split, &wrapped, &wl, &ws), VKV_OK);
    char *head = strndup(wrapped, ws), tail[256];
    snprintf(tail, sizeof tail, "\n\n%s", wrapped + ws);
    expect_apart(s, &pr, head, tail, true);
    free(head);
    free(wrapped);
    vkv_prompt_free(&pr);
}

/* Query-aware compression ends with the user turn: the template's closing and
 * assistant header (docs/ARCHITECTURE.md §5) come after it, in both split
 * modes; a plain prompt, or one without a question, is compressed whole. */
static void query_aware_part_ends_with_the_user_turn(void **state)
{
    const vkv_session *s = *state;
    const char *text = "It was the best of times.Who said it";
    size_t split = strlen("It was the best of times.");
    int32_t *closing;
    size_t n_closing = tokens(s, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", false, true, &closing);
    const vkv_split_mode modes[] = {VKV_SPLIT_APART, VKV_SPLIT_WHOLE};
    for (size_t m = 0; m < 2; m++) {
        vkv_prompt pr;
        assert_int_equal(vkv_session_tokenize(s, text, strlen(text), split, true, modes[m], &pr), VKV_OK);
        assert_int_equal(pr.n_query_end, pr.n - n_closing);
        assert_true(pr.n_query_end > pr.n_context);
        assert_memory_equal(pr.ids + pr.n_query_end, closing, n_closing * sizeof *closing);
        assert_int_equal(vkv_prompt_compressed_part(&pr, true), pr.n_query_end);
        assert_int_equal(vkv_prompt_compressed_part(&pr, false), pr.n_context);
        vkv_prompt_free(&pr);
        /* plain: no closing to leave out */
        assert_int_equal(vkv_session_tokenize(s, text, strlen(text), split, false, modes[m], &pr), VKV_OK);
        assert_int_equal(vkv_prompt_compressed_part(&pr, true), pr.n);
        vkv_prompt_free(&pr);
    }
    /* no question: all context, the assistant header included, as before */
    vkv_prompt pr;
    assert_int_equal(vkv_session_tokenize(s, text, strlen(text), strlen(text), true, VKV_SPLIT_APART, &pr), VKV_OK);
    assert_int_equal(vkv_prompt_compressed_part(&pr, true), pr.n);
    vkv_prompt_free(&pr);
    /* a prompt made by hand (0: the whole prompt) */
    vkv_prompt ids = {.n = 5};
    assert_int_equal(vkv_prompt_compressed_part(&ids, true), 5);
    assert_int_equal(vkv_prompt_compressed_part(&ids, false), 5);
    free(closing);
}

static void bad_requests_are_errors(void **state)
{
    vkv_session *s = *state;
    vkv_prompt pr;
    assert_int_equal(vkv_session_tokenize(s, "abc", 3, 4, false, VKV_SPLIT_APART, &pr), VKV_ERR_ARG);
    assert_null(pr.ids);
    vkv_chat_template keep = s->chat;
    s->chat = VKV_CHAT_UNKNOWN;
    assert_int_equal(vkv_session_tokenize(s, "abc", 3, 3, true, VKV_SPLIT_WHOLE, &pr), VKV_ERR_ARG);
    s->chat = keep;
    vkv_tokenizer *tok = s->tok;
    s->tok = NULL;
    assert_int_equal(vkv_session_tokenize(s, "abc", 3, 3, false, VKV_SPLIT_APART, &pr), VKV_ERR_ARG);
    s->tok = tok;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(apart_tokenizes_context_and_question_separately),
        cmocka_unit_test(whole_splits_one_tokenization),
        cmocka_unit_test(chat_wraps_both_parts_in_the_user_turn),
        cmocka_unit_test(query_aware_part_ends_with_the_user_turn),
        cmocka_unit_test(bad_requests_are_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
