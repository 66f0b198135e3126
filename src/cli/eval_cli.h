/* What the evaluation subcommands (longbench, niah) share: the model, press
 * and VECTOR options, and the loaded environment (device, model, tokenizer,
 * calibration, inference context, chat template). */
#ifndef VKV_CLI_EVAL_CLI_H
#define VKV_CLI_EVAL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "session/session.h"

typedef struct eval_opts {
    const char *model_path;
    const char *press_name;      /* NULL: the full cache */
    double compression;          /* < 0 until given */
    bool vector, query_aware;
    double pa;                   /* < 0: the default */
    const char *calib_path;
    int64_t n_ctx, n_batch;      /* 0: the model's context / 512 */
    vkv_dtype kv_type;
    int device;
    const char *chat;            /* "auto" (the model's template), "none", "llama3", "chatml" */
} eval_opts;

void eval_opts_init(eval_opts *o);
/* Consumes argv[*i] (and its value) when it is a shared option: 1 when
 * consumed, 0 when not a shared option, -1 after a usage error (printed). */
int eval_parse_common(const char *cmd, int argc, char **argv, int *i, eval_opts *o);
/* Cross-option checks (printed); false on a usage error. */
bool eval_opts_check(const char *cmd, const eval_opts *o);
/* The usage lines of the shared options. */
void eval_print_common_usage(FILE *f);

typedef struct eval_env {
    vkv_session *s;              /* device, model, tokenizer, calibration, context */
    const vkv_press_ops *press;  /* NULL: the full cache */
    uint32_t n_ctx;              /* the context's slots */
} eval_env;

/* Opens the session. The context's slots: --ctx, else the model's training
 * context, or at most want_ctx when that is not 0. */
vkv_status eval_env_open(const char *cmd, const eval_opts *o, uint32_t want_ctx, eval_env *e);
void eval_env_close(eval_env *e);
/* The compression of the options for a prompt in the chat template (chat)
 * or plain. */
vkv_compression eval_compression(const eval_opts *o, const eval_env *e, bool chat);
/* p_a the run uses (VECTOR), NAN without VECTOR. */
double eval_effective_pa(const eval_opts *o);
/* Appends the JSON members of the run settings: model, press, compression,
 * vector, pa, query_aware. */
struct vkv_json_writer;
void eval_write_settings(struct vkv_json_writer *w, const eval_opts *o, const eval_env *e);

#endif
