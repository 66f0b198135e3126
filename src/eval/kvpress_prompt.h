/* kvpress's LongBench format, the paper's protocol (docs/ARCHITECTURE.md §5):
 *
 *   context part  = the task's prompt up to its question, {context} filled:
 *                   compressed (with the question too when query-aware);
 *   question part = the question template, {input} filled;
 *   answer prefix = "Answer:", "Summary:", ... per task;
 *   with a chat template the context opens the user message and the
 *   question closes it: question + end of message + assistant header +
 *   answer prefix are evaluated after compression; without one the context
 *   follows BOS and the question is question + "\n" + answer prefix;
 *   the context's tokens are cut to its first max_context (the question
 *   is never cut), and the two parts are tokenized apart.
 *
 * The parts come from LongBench's own dataset2prompt.json (read at run time):
 * every English task's prompt is context part + question part + answer
 * prefix, so a per-task table of where the question starts and of the answer
 * prefix is all this code holds. trec, triviaqa and samsum carry the answer
 * prefix at the end of their input, which is removed (the prompt has the
 * input last); lcc's prompt has no {input}, and its question is the input. */
#ifndef VKV_EVAL_KVPRESS_PROMPT_H
#define VKV_EVAL_KVPRESS_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokenizer.h"

typedef struct vkv_kvpress_parts {
    char *context;             /* malloc'ed */
    char *question;            /* malloc'ed */
    const char *answer_prefix; /* static */
} vkv_kvpress_parts;

/* The parts of one sample of `task` from LongBench's prompt `tmpl` for it.
 * VKV_ERR_ARG for a task without a kvpress format, VKV_ERR_FORMAT when the
 * prompt does not have the layout the table expects (it names the task). */
vkv_status vkv_kvpress_split(const char *task, const char *tmpl, const char *context, const char *input,
                             vkv_kvpress_parts *out);
void vkv_kvpress_parts_free(vkv_kvpress_parts *p);

/* The two texts the pipeline tokenizes: *context_text (BOS not included:
 * tokenize it with BOS, special tokens parsed) and *question_text. t may be
 * VKV_CHAT_UNKNOWN (no template). query_aware: the question ends the context
 * part, and the question part is what follows it. Both malloc'ed. */
vkv_status vkv_kvpress_texts(vkv_chat_template t, const vkv_kvpress_parts *p, bool query_aware, char **context_text,
                             char **question_text);

/* ids = the context text's tokens (BOS first, cut to max_context tokens;
 * 0 = no cut) then the question text's; *n_context = the context's count
 * after the cut, *n_context_orig before it. *ids malloc'ed. */
vkv_status vkv_kvpress_tokenize(const vkv_tokenizer *tok, const char *context_text, const char *question_text,
                                size_t max_context, int32_t **ids, size_t *n_ids, size_t *n_context,
                                size_t *n_context_orig);

/* kvpress's generation length: LongBench's maximum + 20. */
#define VKV_KVPRESS_EXTRA_NEW_TOKENS 20

#endif
