/* The needle in a haystack's prompts (vkvector niah; the protocols are
 * docs/ARCHITECTURE.md §5): the haystack read from a directory of text files,
 * each run's stretch of it tokenized, and a cell's prompt built with the needle
 * at the cell's depth. Device-free: the caller hands in the tokenizer, and for
 * this harness's own protocol tokenizes the text itself (the session's prompt
 * split).
 *
 * Units: a cell's length is in tokens, its depth in percent of the haystack
 * (0 = the needle before the haystack, 100 = after it). A run's token ends and
 * the needle's place are byte offsets into the run's text. */
#ifndef VKV_EVAL_NIAH_H
#define VKV_EVAL_NIAH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tok/tokenizer.h"

#define VKV_NIAH_DEFAULT_NEEDLE \
    "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
#define VKV_NIAH_DEFAULT_QUESTION "What is the best thing to do in San Francisco?"

/* The depth grids by default (grid specs: vkv_niah_parse_grid). kvpress's
 * needle_depth is an integer percentage (it has no default grid): 0, 10, ...,
 * 100. The own protocol keeps its 10 evenly spaced depths (0, 11.1, ..., 100). */
#define VKV_NIAH_KVPRESS_DEPTHS "0:100/10"
#define VKV_NIAH_OWN_DEPTHS "0:100:10"

/* A grid of lengths or depths, into v[0, *n) (at most cap values), each in
 * [lo, hi]; false when the spec is malformed, out of range or empty:
 *   "a,b,c"         the values listed;
 *   "START:STOP/STEP" START, START + STEP, ... while <= STOP;
 *   "START:STOP:C"  C evenly spaced values from START to STOP (both included)
 *                   when colon_counts, else C is the step as in START:STOP/C
 *                   (--depths counts, --lengths steps: their older spellings). */
bool vkv_niah_parse_grid(const char *spec, bool colon_counts, double lo, double hi, double *v, size_t cap, size_t *n);

/* The needle, question and answer prefix from a JSON object with the string
 * members "needle", "question" and "answer_prefix" (kvpress's dataset row's
 * names; any may be absent, other members are ignored). Each is malloc'ed, or
 * NULL when absent. */
typedef struct vkv_niah_texts {
    char *needle, *question, *answer_prefix;
} vkv_niah_texts;
vkv_status vkv_niah_read_texts(const char *path, vkv_niah_texts *out);
void vkv_niah_texts_free(vkv_niah_texts *t);

/* kvpress's needle in a haystack (the paper's), or this harness's own; the
 * order of --protocol's choices. */
typedef enum vkv_niah_protocol {
    VKV_NIAH_PROTOCOL_KVPRESS,
    VKV_NIAH_PROTOCOL_OWN,
} vkv_niah_protocol;

/* "kvpress" or "vkvector", as --protocol spells it. */
const char *vkv_niah_protocol_name(vkv_niah_protocol p);

/* Called with a message for something the reader skips (a file it cannot
 * read, the files past the size cap); the caller decides how to show it. */
typedef void vkv_niah_warn_fn(void *ctx, const char *message);

/* The text files of dir (*.txt; every regular file when there is none; no
 * hidden ones), concatenated in name order with `joint` between two files,
 * at most VKV_MAX_DOC_BYTES (core/file.h): files past the cap are not read.
 * *text malloc'ed, *len its bytes. VKV_ERR_IO when dir cannot be opened or
 * holds no text. */
vkv_status vkv_niah_read_dir(const char *dir, const char *joint, vkv_niah_warn_fn *warn, void *warn_ctx, char **text,
                             size_t *len);
/* The haystack: vkv_niah_read_dir with blank lines between the files. */
vkv_status vkv_niah_read_haystack(const char *dir, vkv_niah_warn_fn *warn, void *warn_ctx, char **text, size_t *len);

/* The end of the last sentence that ends at or before byte `at` of t[0, len)
 * (just after its '.', '?' or '!'), or 0. A '.' directly followed by a
 * capital also counts (the essays' paragraph joins). */
size_t vkv_niah_sentence_end_before(const char *t, size_t len, size_t at);
/* The sentence end nearest to byte `at` in [0, len] (0 and len count as
 * ends; a tie goes to the earlier one; an `at` past len gives len). */
size_t vkv_niah_sentence_end_near(const char *t, size_t len, size_t at);

/* One run's haystack text and where each of its tokens ends. */
typedef struct vkv_niah_run {
    char *text;                /* [len] malloc'ed */
    size_t len;
    int32_t *ids;              /* [n_ids] malloc'ed, no BOS */
    size_t *ends;              /* [n_ids] byte offsets into text where each token ends */
    size_t n_ids;
} vkv_niah_run;

/* Run `run` of `runs`: the haystack from its own offset (shifted by seed,
 * moved to a paragraph start), wrapped around and repeated until it has
 * enough text for max_length tokens, then tokenized. *out's previous contents
 * are freed first, so one vkv_niah_run serves every run. Where the token
 * pieces do not spell the text (vocabularies of byte pieces), the ends are
 * spread evenly over it. */
vkv_status vkv_niah_run_make(const vkv_tokenizer *tok, const char *hay, size_t hay_len, size_t run, size_t runs,
                             uint64_t seed, double max_length, vkv_niah_run *out);
void vkv_niah_run_free(vkv_niah_run *r);

/* What every cell's prompt shares: the texts, the protocol, and what they
 * cost in tokens (vkv_niah_prompts_measure). */
typedef struct vkv_niah_prompts {
    vkv_niah_protocol protocol;
    const char *needle, *question;    /* borrowed */
    const char *answer_prefix;        /* kvpress: after the question's chat turn; borrowed, "" for none */
    vkv_chat_template chat;           /* VKV_CHAT_UNKNOWN: no chat template */
    bool query_aware;                 /* kvpress: the question ends the compressed part */
    /* set by vkv_niah_prompts_measure */
    char *ask;                        /* own protocol: the question as asked after the haystack; malloc'ed */
    size_t overhead;                  /* tokens of the prompt without the haystack (kvpress: its fixed 150) */
    size_t n_needle;                  /* tokens of the needle */
    size_t kvpress_question;          /* kvpress: a bound on the tokens after the length's (the question
                                         part); 0 for the own protocol, whose length includes them */
} vkv_niah_prompts;

/* Fills p's token counts (and, for the own protocol, p->ask) from the other
 * fields, which the caller sets. */
vkv_status vkv_niah_prompts_measure(vkv_niah_prompts *p, const vkv_tokenizer *tok);
void vkv_niah_prompts_free(vkv_niah_prompts *p);

/* This harness's own prompt of a cell, as text: the haystack cut at the
 * sentence end before the cell's length's worth of tokens (the prompt's other
 * parts counted), the needle at the sentence end nearest the depth, wrapped
 * in the fixed introduction and followed by p->ask. *split: where the
 * question starts (the caller tokenizes with the session's prompt split, the
 * whole text at once); *needle_depth: where the needle went, in percent of
 * the cut haystack. *text malloc'ed. length must be at least p->overhead +
 * p->n_needle + 1. */
vkv_status vkv_niah_own_prompt(const vkv_niah_prompts *p, const vkv_niah_run *run, double length, double depth,
                               char **text, size_t *len, size_t *split, double *needle_depth);

/* kvpress's context of a cell: the run's first length - needle - 150 tokens,
 * the needle inserted at token int(n depth / 100), inside the story-book
 * wrapper. *needle_depth: where the needle went, in percent of the haystack.
 * *text malloc'ed, NUL-terminated. */
vkv_status vkv_niah_kvpress_context(const vkv_niah_prompts *p, const vkv_niah_run *run, double length, double depth,
                                    char **text, double *needle_depth);

/* kvpress's prompt of a cell, tokenized: vkv_niah_kvpress_context, then
 * kvpress's pipeline (eval/kvpress_prompt.h) with the length as the context
 * part's cap. ids [0, *n_context) are the context (BOS first), the rest the
 * question part. *ids malloc'ed. */
vkv_status vkv_niah_kvpress_prompt(const vkv_niah_prompts *p, const vkv_tokenizer *tok, const vkv_niah_run *run,
                                   double length, double depth, int32_t **ids, size_t *n_ids, size_t *n_context,
                                   double *needle_depth);

#endif
