/* Prompts for the evaluation harnesses: LongBench's template formatting and
 * middle truncation (THUDM/LongBench pred.py), the chat template around a
 * prompt, and tokenization with the context/question split that query-agnostic
 * compression needs (the tokens before the split are compressed, the rest is
 * evaluated after compression).
 *
 * A "split" is a byte offset into a prompt text: where the question starts.
 * It moves with every transformation (truncation, chat template), and
 * vkv_eval_tokenize_split turns it into a token index. */
#ifndef VKV_EVAL_PROMPT_H
#define VKV_EVAL_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokenizer.h"

/* Python's template.format(context=context, input=input): "{context}" and
 * "{input}" are replaced, "{{" and "}}" become braces; any other field is
 * VKV_ERR_FORMAT. *split: where the {input} text starts, or, for templates
 * without {input}, where the {context} text ends (the instruction after the
 * context then plays the question). *out is malloc'ed. */
vkv_status vkv_lb_format(const char *tmpl, const char *context, const char *input, char **out, size_t *len,
                         size_t *split);

/* The text as the single user message of chat template t, with the
 * generation prompt (assistant header) after it; *out_split is where the
 * byte at `split` of text ended up. */
vkv_status vkv_eval_chat_wrap(vkv_chat_template t, const char *text, size_t len, size_t split, char **out,
                              size_t *out_len, size_t *out_split);
/* Tokens the chat template adds around a user message (rendered empty,
 * without BOS). */
vkv_status vkv_eval_chat_overhead(const vkv_tokenizer *tok, vkv_chat_template t, size_t *n);

/* Tokenizes text as a whole (BOS per the vocabulary's rules; special-token
 * text parsed when parse_special) and returns the index of the first token
 * that ends after byte `split` (ids [0, *n_split) are the context; a token
 * straddling the split goes with the question). When the token pieces do not
 * spell the text (some SentencePiece vocabularies), the two parts are
 * tokenized separately instead. *ids is malloc'ed. */
vkv_status vkv_eval_tokenize_split(const vkv_tokenizer *tok, const char *text, size_t len, size_t split,
                                   bool parse_special, int32_t **ids, size_t *n_ids, size_t *n_split);

/* Byte offsets in text where each token of ids ends, when the tokens' pieces
 * spell the text (a SentencePiece space prefix allowed before any piece);
 * false otherwise. skip_bos: ids[0] is an added BOS (ends[0] = 0). */
bool vkv_eval_token_ends(const vkv_tokenizer *tok, const char *text, size_t len, const int32_t *ids, size_t n,
                         bool skip_bos, bool special, size_t *ends);

/* LongBench's rule for prompts longer than max_len tokens (counted with
 * BOS): keep decode(first max_len/2 tokens) + decode(last max_len/2 tokens),
 * special tokens skipped. Shorter prompts are copied. *n_tokens: the
 * prompt's length before truncation; *truncated: whether it was cut. The
 * split keeps its distance from the end of the text (clamped to the join
 * when the cut went through the question). */
vkv_status vkv_lb_truncate_middle(const vkv_tokenizer *tok, const char *text, size_t len, size_t split, size_t max_len,
                                  char **out, size_t *out_len, size_t *out_split, size_t *n_tokens, bool *truncated);

#endif
