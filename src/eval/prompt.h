/* Prompts for the evaluation harnesses: LongBench's template formatting and
 * middle truncation (THUDM/LongBench pred.py), the chat template around a
 * prompt, and tokenization with the context/question split that query-agnostic
 * compression needs (the tokens before the split are compressed, the rest is
 * evaluated after compression; the chat wrapping and the split tokenization
 * themselves live in tok/tokenizer.h, since the session needs them too).
 *
 * A "split" is a byte offset into a prompt text: where the question starts.
 * It moves with every transformation (truncation, chat template), and
 * vkv_tokenize_split (tok/tokenizer.h) turns it into a token index. */
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

/* LongBench's rule for prompts longer than max_len tokens (counted with
 * BOS): keep decode(first max_len/2 tokens) + decode(last max_len/2 tokens),
 * special tokens skipped. Shorter prompts are copied. *n_tokens: the
 * prompt's length before truncation; *truncated: whether it was cut. The
 * split keeps its distance from the end of the text (clamped to the join
 * when the cut went through the question). */
vkv_status vkv_lb_truncate_middle(const vkv_tokenizer *tok, const char *text, size_t len, size_t split, size_t max_len,
                                  char **out, size_t *out_len, size_t *out_split, size_t *n_tokens, bool *truncated);

#endif
