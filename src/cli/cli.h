/* Shared helpers of the vkvector subcommands. Each subcommand is
 * `int cmd_<name>(int argc, char **argv)` with argv[0] = the subcommand name,
 * returning the process exit status. Only the CLI prints errors and exits. */
#ifndef VKV_CLI_H
#define VKV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

int cmd_devices(int argc, char **argv);
int cmd_conform(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calib(int argc, char **argv);
int cmd_calib_report(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_eval_ppl(int argc, char **argv);
int cmd_viz(int argc, char **argv);
int cmd_longbench(int argc, char **argv);
int cmd_longbench_report(int argc, char **argv);
int cmd_ruler(int argc, char **argv);
int cmd_ruler_report(int argc, char **argv);
int cmd_niah(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Prints "vkvector <cmd>: <status name>: <last error>" to stderr; returns 1. */
int cli_fail(const char *cmd, vkv_status s);
/* Prints "vkvector <cmd>: <message>" plus a hint to run --help; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) VKV_PRINTF(2, 3);

/* Strict number parsing: the whole string must be a number in range. */
bool cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
bool cli_parse_f64(const char *s, double min, double max, double *out);

/* A whole regular file of at most VKV_MAX_DOC_BYTES, NUL-terminated
 * (malloc'ed); NULL on failure, with the reason as the last error
 * (vkv_read_file). */
char *cli_read_file(const char *path, size_t *len);

/* --device N / VKVECTOR_DEVICE, or -1 for automatic choice. */
int cli_device_index_from_env(void);

/* The tokenizer of a model path: a GGUF (*g stays open; close it after the
 * tokenizer's last use, or at once: the tokenizer copies what it reads), or a
 * folder holding a Hugging Face tokenizer.json (*g stays NULL). In
 * cmd_tokenize.c. */
struct vkv_gguf;
struct vkv_tokenizer;
vkv_status cli_load_tokenizer(const char *model, struct vkv_gguf **g, struct vkv_tokenizer **tok);

#endif
