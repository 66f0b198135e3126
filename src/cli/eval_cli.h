/* What the evaluation subcommands (longbench, niah) share: the model, press
 * and VECTOR options, and the loaded environment (device, model, tokenizer,
 * calibration, inference context, chat template). */
#ifndef VKV_CLI_EVAL_CLI_H
#define VKV_CLI_EVAL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/options.h"
#include "session/session.h"

typedef struct eval_opts {
    cli_model_opts mo;           /* --ctx 0: the model's training context */
    cli_press_opts po;           /* press NULL: the full cache */
    int chat;                    /* index into EVAL_CHAT_TEMPLATES */
    int think;                   /* --think: 0 off (the default), 1 on */
} eval_opts;

/* "auto": the model's template when it has one. */
#define EVAL_CHAT_TEMPLATES "auto|none|llama3|chatml|llama31|qwen25|qwen3"

void eval_opts_init(eval_opts *o);
/* The model, compression and device options of the evaluation harnesses, as
 * option-table entries (cli/options.h) writing into eval_opts o. */
#define EVAL_OPTIONS(o)                                                                                        \
    {.type = CLI_SECTION, .names = "Model, compression and device:"}, CLI_MODEL_PATH_OPTION((o).mo.model_path), \
    CLI_PRESS_OPTIONS((o).po),                                                                                 \
    {.type = CLI_ENUM, .names = "--chat-template", .metavar = "T", .dest = &(o).chat,                           \
     .choices = EVAL_CHAT_TEMPLATES,                                                                           \
     .help = "auto (the model's, when it has one), none, llama3, llama31,\nchatml, qwen25 or qwen3 (default auto)"}, \
    /* off: kvpress renders Qwen3 with enable_thinking=False, and the answers are scored short */             \
    CLI_THINK_OPTION((o).think, "off, as kvpress runs it"),                                                   \
    {.type = CLI_I64, .names = "--ctx", .metavar = "N", .dest = &(o).mo.n_ctx, .min = 1, .max = 1 << 24,       \
     .help = "context slots (default: the model's training context)"},                                        \
    {.type = CLI_I64, .names = "--batch", .metavar = "N", .dest = &(o).mo.n_batch, .min = 1, .max = 65536,     \
     .help = "prefill chunk in tokens (default 512)"},                                                        \
    CLI_KV_TYPE_OPTIONS((o).mo), CLI_DEVICE_OPTION((o).mo.device)

/* Cross-option checks (printed); false on a usage error. */
bool eval_opts_check(const char *cmd, eval_opts *o);

typedef struct eval_env {
    vkv_session *s;              /* device, model, tokenizer, calibration, context */
    const vkv_press_ops *press;  /* NULL: the full cache */
    uint32_t n_ctx;              /* the context's slots */
} eval_env;

/* Opens the session. The context's slots: --ctx, else the model's training
 * context, or at most want_ctx when that is not 0. */
vkv_status eval_env_open(const char *cmd, const eval_opts *o, uint32_t want_ctx, eval_env *e);
void eval_env_close(eval_env *e);
/* p_a the run uses (VECTOR), NAN without VECTOR. */
double eval_effective_pa(const eval_opts *o);
/* The pool scope the run uses (cli_pool_scope, then the scorer's own). */
vkv_pool_scope eval_pool_scope(const eval_opts *o, const eval_env *e);
/* Appends the JSON members of the run settings: model, press, compression,
 * vector, pa, query_aware. */
struct vkv_json_writer;
void eval_write_settings(struct vkv_json_writer *w, const eval_opts *o, const eval_env *e);

/* "achieved": the tiers' fractions of all compressed context tokens
 * (vkv_json_tier_fractions), or null without compression (f NULL). */
void eval_write_achieved(struct vkv_json_writer *w, const vkv_tier_fractions *f);

#endif
