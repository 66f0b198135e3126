/* KVzip (kvpress's KVzipPress): importance from context reconstruction. After
 * the prefill of the context, the model is asked to repeat it, chunk by chunk;
 * a context token's score is the largest attention it receives from the
 * repeat queries (max over the queries and over the query heads of its KV
 * head's group), and the selection is global over (layer, KV head, token).
 *
 * The scorer (press/kvzip.c, vkv_press_kvzip) captures those maxima during the
 * reconstruction pass that the allocation driver (press/vector.c) runs with
 * the token ids built here, the way kvpress's KVzipPress.prepare does:
 *   pass 0:  "\n\nRepeat the previous context exactly." + suffix + chunk 0
 *   pass i:  "\n\nRepeat the part of the previous context exactly, starting with"
 *            + the last 8 ids of chunk i - 1 + suffix + chunk i
 * where the chunks are 2048 ids of the context after its chat-template prefix
 * and the suffix ends the user turn and opens the assistant's (the chat
 * template's text after the user content), or "\n" without a template. Each
 * pass is evaluated at positions n.. after the n context tokens and dropped
 * afterwards (vkv_ctx_truncate). */
#ifndef VKV_PRESS_KVZIP_H
#define VKV_PRESS_KVZIP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokenizer.h"

#define VKV_KVZIP_CHUNK 2048u   /* context ids per reconstruction pass */
#define VKV_KVZIP_POSTFIX 8u    /* ids of the previous chunk quoted in later prompts */

/* The reconstruction prompt's token ids (malloc'ed; vkv_kvzip_prompt_free). */
typedef struct vkv_kvzip_prompt {
    int32_t *first;  uint32_t n_first;   /* "\n\nRepeat the previous context exactly." */
    int32_t *next;   uint32_t n_next;    /* "\n\nRepeat the part of the previous context exactly, starting with" */
    int32_t *suffix; uint32_t n_suffix;  /* end of the user turn + assistant header, or "\n" */
    uint32_t prefix;                     /* ids of the template's prefix at the start of the context (BOS
                                            included): never repeated (kvpress's prefix_length); 0 without a template */
} vkv_kvzip_prompt;

/* The prompt for a context tokenized the way `vkvector run` does it:
 * with chat template `chat`, the text it renders around one user message,
 * tokenized with add_special (BOS) and parse_special; with VKV_CHAT_UNKNOWN,
 * plain text (kvpress's behaviour for a tokenizer without a chat template:
 * prefix 0, suffix "\n"). */
vkv_status vkv_kvzip_prompt_make(const vkv_tokenizer *tok, vkv_chat_template chat, vkv_kvzip_prompt *out);
void vkv_kvzip_prompt_free(vkv_kvzip_prompt *p);

/* Reconstruction passes for an n-token context (0 when n <= prefix). */
uint32_t vkv_kvzip_n_passes(const vkv_kvzip_prompt *kp, uint32_t n);
/* Ids of the longest pass: the cache needs room for n + this many tokens. */
uint32_t vkv_kvzip_max_pass_tokens(const vkv_kvzip_prompt *kp, uint32_t n);
/* Pass i: its ids into ids[] (room for vkv_kvzip_max_pass_tokens), their
 * number, and the context tokens [span0, span1) it repeats. */
void vkv_kvzip_pass(const vkv_kvzip_prompt *kp, const int32_t *context_ids, uint32_t n, uint32_t i, int32_t *ids,
                    uint32_t *n_ids, uint32_t *span0, uint32_t *span1);

#endif
