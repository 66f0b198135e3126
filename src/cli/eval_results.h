/* What the harnesses that write one result line per sample (longbench,
 * ruler) share: the run settings a line must match to be resumed, reading an
 * earlier run's lines and opening the file for appending, the --shard
 * option, kvpress's prompt of a sample's parts, one sample's generation and
 * the generation's fields of its line. */
#ifndef VKV_CLI_EVAL_RESULTS_H
#define VKV_CLI_EVAL_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/eval_cli.h"
#include "core/json.h"
#include "eval/kvpress_prompt.h"

/* Whether a result line holds these settings: model, press, compression,
 * VECTOR with its p_a, pool scope and map, query-awareness (a line without a
 * pool scope or a map predates them: row pools, per-head maps). */
bool eval_same_settings(const vkv_json *r, const eval_opts *o, const eval_env *e);
/* The settings of a result line, for a message ("<protocol> protocol, model
 * M, press P, p_c X, VECTOR, query-aware"); default_protocol when the line
 * names none. */
void eval_describe_settings(const vkv_json *r, const char *default_protocol, char *buf, size_t n);

/* Called for each well-formed line of an earlier run (line_no 1-based):
 * 0 to go on, or an exit status to stop (printed by the callee). */
typedef int eval_result_row_fn(void *ctx, const vkv_json *r, size_t line_no);
/* Reads path's result lines (nothing to read from a missing file, a device
 * or a pipe; a malformed line is reported and skipped), hands each to row,
 * then opens path for appending into *out, first ending a line cut by a
 * crash. 0, or an exit status (printed, prefixed by "vkvector CMD: "). */
int eval_results_resume(const char *cmd, const char *path, eval_result_row_fn *row, void *ctx, FILE **out);

/* "I/N" with 0 <= I < N. */
bool eval_parse_shard(const char *s, int64_t *i, int64_t *n);

/* The prompt's token ids and split for one sample. */
typedef struct eval_prompt {
    vkv_prompt tokens;
    size_t n_orig;             /* its tokens before the context was cut */
    bool truncated, chat;
    size_t max_len;            /* the context part's cap */
} eval_prompt;

/* kvpress's prompt of a sample's parts (eval/kvpress_prompt.h): the chat
 * template when the session has one, the context's head cut to what the
 * context slots leave after the question, max_gen generated tokens and the
 * press's extra passes, and to max_length when not 0. */
vkv_status eval_kvpress_prompt(const eval_env *e, const eval_opts *o, const vkv_kvpress_parts *parts, uint32_t max_gen,
                               int64_t max_length, eval_prompt *p);

/* Generates one sample with the run's press: the options are checked
 * against the prompt first. 0 with *g filled; otherwise g is empty and the
 * result is an exit status (2: the options cannot work for this sample, 1:
 * a fatal error) or -1 (this sample failed, the run goes on); the reason is
 * printed with `where`. */
int eval_generate(const char *cmd, const eval_env *e, const vkv_compression *comp,
                  const vkv_prompt *tokens, const vkv_gen_params *gp, const char *where, vkv_gen_result *g);

/* The generation's members of a result line: prompt_tokens, prompt_tokens_untruncated,
 * truncated, compressed_tokens, generated_tokens, stop, timings, KV bytes and
 * the achieved tiers. */
struct vkv_json_writer;
void eval_write_generation(struct vkv_json_writer *w, const eval_prompt *p, const vkv_gen_result *g);

/* A JSON array of the n strings of l. */
void eval_write_string_list(struct vkv_json_writer *w, char **l, size_t n);

/* Appends one finished line (buf[0, len)) and syncs it; false (printed) on an error. */
bool eval_append_line(const char *cmd, FILE *out, const char *path, const char *buf, size_t len);

#endif
