/* The subcommands' options as tables: one entry per option (its names, value
 * type, range, destination and help line), one parser that applies the same
 * rules to every command, and --help generated from the same table.
 *
 *     int64_t n = 128;
 *     bool chat = false;
 *     const cli_opt opts[] = {
 *         {.type = CLI_I64, .names = "-n|--n-predict", .metavar = "N", .dest = &n, .min = 0, .max = 1 << 24,
 *          .help = "tokens to generate (default 128)"},
 *         {.type = CLI_FLAG, .names = "--chat", .dest = &chat, .help = "wrap the prompt in the chat template"},
 *     };
 *     int rc = cli_parse("run", "vkvector run [options]", opts, CLI_N(opts), argc, argv);
 *     if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
 *
 * The rules: an option is its names exactly ("-m" or "--model"; a long name
 * also takes "--model=FILE"); the value is the next argument, whatever it
 * starts with ("--temp -1" is a bad temperature, not a missing value); a
 * number must be whole and in range; an option given twice takes its last
 * value (a list collects all); anything else is an unknown option. -h and --help are always there. */
#ifndef VKV_CLI_OPTIONS_H
#define VKV_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "infer/sampler.h"

typedef enum cli_opt_type {
    CLI_SECTION,  /* a heading line in --help (names = the heading text); parses nothing */
    CLI_FLAG,     /* bool: true when given */
    CLI_STR,      /* const char *: the argument itself (points into argv) */
    CLI_I64,      /* int64_t */
    CLI_I32,      /* int32_t */
    CLI_U64,      /* uint64_t */
    CLI_F64,      /* double */
    CLI_F32,      /* float: parsed and range-checked as a double, then rounded to float */
    CLI_ENUM,     /* int: the index of the value in choices ("f16|f32": f16 = 0, f32 = 1) */
    CLI_STR_LIST, /* cli_str_list: every argument after the option up to the next one starting with '-' */
    CLI_ARGS,     /* cli_str_list: the arguments that are not options (names = how --help shows them) */
} cli_opt_type;

/* Entry flags. */
#define CLI_MIN_EXCLUSIVE 1u  /* the value must be > min (an integer: >= min + 1) */
#define CLI_MAX_EXCLUSIVE 2u  /* the value must be < max */

typedef struct cli_opt {
    cli_opt_type type;     /* CLI_SECTION: a heading line in --help (names = the heading text) */
    const char *names;     /* "-m|--model" */
    const char *metavar;   /* "FILE", "N"; NULL for flags (ENUM: NULL shows the choices) */
    void *dest;            /* bool*, const char**, int64_t*, int32_t*, uint64_t*, double*, float*, int* (ENUM: index
                              into choices), cli_str_list* */
    double min, max;       /* numeric range, inclusive (I64/I32/U64/F64/F32) */
    unsigned flags;        /* CLI_MIN_EXCLUSIVE, CLI_MAX_EXCLUSIVE */
    const char *choices;   /* CLI_ENUM: "f16|f32" */
    const char *help;      /* one line; a "\n" starts another, indented to the help column */
    bool *given;           /* optional: set true when the option appears */
} cli_opt;

/* CLI_STR_LIST's destination: the caller's array of cap pointers (argc of
 * them always suffice); the parser appends to items[0..n). */
typedef struct cli_str_list {
    const char **items;
    size_t n, cap;
} cli_str_list;

enum { CLI_OK = 0, CLI_HELP = 1, CLI_USAGE_ERROR = 2 };

/* Parses argv[1..argc). Returns CLI_OK (0), CLI_HELP (printed usage for
 * -h/--help on stdout; the command returns 0) or CLI_USAGE_ERROR (message
 * printed on stderr as "vkvector CMD: ..."; the command returns 2). Error
 * messages name the option as it was typed and the accepted range or
 * choices, e.g. "--ctx wants an integer in 1..16777216, got 'x'". */
int cli_parse(const char *cmd, const char *usage_line, const cli_opt *opts, size_t n_opts, int argc, char **argv);
/* "usage: " + usage_line (which may go on with more lines, e.g. a paragraph
 * about the command), then every entry: names, metavar and help in two
 * columns, CLI_SECTION entries as headings, and -h, --help last. */
void cli_print_usage(FILE *f, const char *usage_line, const cli_opt *opts, size_t n_opts);

#define CLI_N(arr) (sizeof(arr) / sizeof((arr)[0]))

/* --- Shared groups: each macro expands to table entries writing into its
 * struct (pass the struct itself, not a pointer). --- */

/* Single entries the groups are made of, for commands that take only some. */
#define CLI_MODEL_PATH_OPTION(path_dest)                                                                       \
    {.type = CLI_STR, .names = "-m|--model", .metavar = "PATH", .dest = &(path_dest),                          \
     .help = "GGUF model or Hugging Face checkpoint folder (default: " VKV_DEFAULT_MODEL ")"}
#define CLI_DEVICE_OPTION(int32_dest)                                                                          \
    {.type = CLI_I32, .names = "--device", .metavar = "N", .dest = &(int32_dest), .min = 0, .max = 1024,       \
     .help = "Vulkan device (default: VKVECTOR_DEVICE or the best one)"}
#define CLI_KV_TYPES "f16|f32|q8_0|q4_0"
/* --kv-type, and --k-type / --v-type for one of the two, into a
 * cli_model_opts; default_type: the name --help gives as the default (the
 * command sets mo.kv_type to it: cli_model_opts_init's is f16). */
#define CLI_KV_TYPE_OPTIONS_DEFAULT(mo, default_type)                                                          \
    {.type = CLI_ENUM, .names = "--kv-type", .dest = &(mo).kv_type, .choices = CLI_KV_TYPES,                   \
     .help = "KV cache storage, K and V (default " default_type "; q8_0/q4_0: blocks of 32 along a head's row)"}, \
    {.type = CLI_ENUM, .names = "--k-type", .dest = &(mo).k_type, .choices = CLI_KV_TYPES,                     \
     .help = "the K cache's storage (default: --kv-type)"},                                                   \
    {.type = CLI_ENUM, .names = "--v-type", .dest = &(mo).v_type, .choices = CLI_KV_TYPES,                     \
     .help = "the V cache's storage (default: --kv-type)"}
#define CLI_KV_TYPE_OPTIONS(mo) CLI_KV_TYPE_OPTIONS_DEFAULT(mo, "f16")

typedef struct cli_model_opts {
    const char *model_path; /* VKVECTOR_MODEL, else VKV_DEFAULT_MODEL */
    int32_t device;         /* -1: VKVECTOR_DEVICE or the best device */
    int64_t n_ctx, n_batch; /* 0: the model's context (at most 4096); 512 */
    int kv_type;            /* index in CLI_KV_TYPES: cli_kv_dtype() */
    int k_type, v_type;     /* the same for K or V alone; -1: kv_type */
} cli_model_opts;

void cli_model_opts_init(cli_model_opts *mo);
/* The KV cache type a --kv-type index names. */
vkv_dtype cli_kv_dtype(int kv_type);
/* The K and V caches' types of mo. */
vkv_dtype cli_k_dtype(const cli_model_opts *mo);
vkv_dtype cli_v_dtype(const cli_model_opts *mo);

#define CLI_MODEL_OPTIONS(mo)                                                                                  \
    CLI_MODEL_PATH_OPTION((mo).model_path), CLI_DEVICE_OPTION((mo).device),                                   \
    {.type = CLI_I64, .names = "--ctx", .metavar = "N", .dest = &(mo).n_ctx, .min = 1, .max = 1 << 24,         \
     .help = "context length (default: the model's, at most 4096)"},                                          \
    {.type = CLI_I64, .names = "--batch", .metavar = "N", .dest = &(mo).n_batch, .min = 1, .max = 65536,       \
     .help = "prefill chunk in tokens (default 512)"},                                                        \
    CLI_KV_TYPE_OPTIONS(mo)

/* --think off|on into an int (0 off, 1 on): Qwen3's thinking switch, its
 * template's enable_thinking; templates without one ignore it. The commands
 * that build chat prompts (run, longbench, niah) take it; default_text: the
 * command's default, as --help shows it. */
#define CLI_THINK_OPTION(int_dest, default_text)                                                               \
    {.type = CLI_ENUM, .names = "--think", .dest = &(int_dest), .choices = "off|on",                          \
     .help = "Qwen3's chat template: thinking off (an empty think block\n"                                     \
             "starts the answer) or on (default " default_text ")"}

/* vkv_sampler_params (infer/sampler.h); start from vkv_sampler_defaults(). */
#define CLI_SAMPLING_OPTIONS(sp)                                                                               \
    {.type = CLI_U64, .names = "--seed", .metavar = "S", .dest = &(sp).seed, .min = 0, .max = (double)UINT64_MAX, \
     .help = "sampling seed (default 42)"},                                                                   \
    {.type = CLI_F32, .names = "--temp", .metavar = "T", .dest = &(sp).temperature, .min = 0, .max = 100,     \
     .help = "temperature (default 0.8; 0 = greedy)"},                                                        \
    {.type = CLI_I32, .names = "--top-k", .metavar = "K", .dest = &(sp).top_k, .min = 0, .max = INT32_MAX,    \
     .help = "(default 40; 0 = off)"},                                                                        \
    {.type = CLI_F32, .names = "--top-p", .metavar = "P", .dest = &(sp).top_p, .min = 0, .max = 1,            \
     .flags = CLI_MIN_EXCLUSIVE, .help = "(default 0.95; 1 = off)"},                                          \
    {.type = CLI_F32, .names = "--min-p", .metavar = "P", .dest = &(sp).min_p, .min = 0, .max = 1,            \
     .help = "(default 0.05; 0 = off)"},                                                                      \
    {.type = CLI_F32, .names = "--repeat-penalty", .metavar = "R", .dest = &(sp).repeat_penalty, .min = 0,    \
     .max = 100, .flags = CLI_MIN_EXCLUSIVE, .help = "(default 1.0 = off)"},                                  \
    {.type = CLI_I32, .names = "--repeat-last-n", .metavar = "N", .dest = &(sp).repeat_last_n, .min = 0,      \
     .max = 1 << 20, .help = "tokens the penalty looks back over (default 64)"}

/* The press and VECTOR options, parsed only: the rules between them
 * (--compression with --press, p_a <= 1 - p_c, ...) are checked by the
 * compression parameters' one validation function, not here. */
typedef struct cli_press_opts {
    const char *press;      /* NULL: no compression */
    double compression_ratio; /* --compression's (first) value; -1 when not given */
    const char *compression_arg; /* --compression as given: a number, or a comma list where compression_list_ok */
    double compressions[16]; /* --compression's values (n_compressions of them) */
    int n_compressions;
    bool compression_list_ok; /* the command runs a list of p_c (ruler) */
    bool vector;
    double pa;              /* -1 = default; the first of --pa's list */
    const char *pa_arg;     /* --pa as given: a number, or a comma list where pa_list_ok */
    double pas[16];         /* --pa's values (n_pas of them; none: the default) */
    int n_pas;
    bool pa_list_ok;        /* the command runs a list of p_a (longbench) */
    const char *calib;      /* NULL: MODEL.vkcal beside the model */
    bool aware_flag, agnostic_flag; /* --query-aware / --query-agnostic as given */
    bool query_aware;       /* the mode used: the flags', else the scorer's (cli_press_opts_check) */
    bool materialized;
    int vector_pool;        /* -1: the default (below); else an index into "row|layer|global" */
    bool kvpress_protocol;  /* --protocol kvpress: --vector-pool's default is the scope reaching the
                             * paper's split, not the scorer's measured one, and the query mode's
                             * kvpress's evaluation's (vkv_press_ops.kvpress_query_aware). Set
                             * before cli_press_opts_check */
    int vector_map;         /* an index into "head|joint" (vkv_vector_map) */
    int64_t compress_every; /* compression during generation: every N tokens (0: off) */
    int64_t max_kv_tokens;  /* ... under M full KV pairs per head */
    int decoding;           /* an index into "budget|kvpress" (vkv_decoding_rule) */
    int64_t target_kv_tokens; /* kvpress's rule: pairs per head after a compression (0: its default) */
    int64_t press_seed;     /* --press-seed: RandomPress's seed (-1: not given, its default 42) */
} cli_press_opts;

void cli_press_opts_init(cli_press_opts *po);
/* The compression po asks for, with the scorer press (cli_press_opts_check's)
 * and plain_prompt: the prompt is not in a chat template (KVzip's passes).
 * The one place a command turns its press options into a vkv_compression;
 * --compression not given is p_c 0. A command that sweeps a value
 * (eval-ppl's grid) sets it in *out afterwards; so does one that wants
 * keep_details or lean. po is taken as checked (cli_press_opts_check). */
struct vkv_compression;
struct vkv_press_ops;
void cli_press_compression(const cli_press_opts *po, const struct vkv_press_ops *press, bool plain_prompt,
                           struct vkv_compression *out);
/* --press's help: the scorers of the press table (press/press.c), in its order. */
const char *cli_press_help(void);
/* The rules between the press and VECTOR options: --press names a scorer and
 * needs --compression, the others need --press, --pa and --calib need
 * --vector, --query-aware and --query-agnostic exclude each other, and the
 * ratios obey vkv_kv_check_ratios (kvlayout/kv_counts.h). Prints the problem and
 * returns false; *press is the scorer (NULL without --press), and
 * po->query_aware the mode the run uses (vkv_press_query_aware). */
bool cli_press_opts_check(const char *cmd, cli_press_opts *po, const struct vkv_press_ops **press);
/* The --query-aware / --query-agnostic pair as the press library's override. */
int cli_query_mode(bool aware_flag, bool agnostic_flag);

/* VECTOR's pool scope with the scorer press, as the press library's
 * vkv_pool_scope (kvlayout/kv_counts.h): --vector-pool's; else, with
 * po->kvpress_protocol, vkv_press_paper_pool_scope; else VKV_POOL_DEFAULT
 * (the scorer's own, docs/ARCHITECTURE.md §2). */
int cli_pool_scope(const cli_press_opts *po, const struct vkv_press_ops *press);

/* The rules of --decoding: kvpress's takes --compress-every (its interval)
 * and --target-kv-tokens, given or kvpress's defaults (filled in here), and
 * not --max-kv-tokens; --target-kv-tokens needs it. The message, or NULL. */
const char *cli_decoding_check(cli_press_opts *po);

/* The query mode's override; default: the scorer's own (press/press.h). */
#define CLI_QUERY_MODE_OPTIONS(aware_dest, agnostic_dest)                                                      \
    {.type = CLI_FLAG, .names = "--query-aware", .dest = &(aware_dest),                                        \
     .help = "compress context and question together (default for snapkv, pyramidkv, tova and\n"           \
             "what wraps them; under --protocol kvpress, for snapkv, adakv-snapkv, chunkkv)"},                \
    {.type = CLI_FLAG, .names = "--query-agnostic", .dest = &(agnostic_dest),                                  \
     .help = "compress the context alone (default for the other scorers)"}

/* Compression during generation's rule (docs/ARCHITECTURE.md §2). */
#define CLI_DECODING_OPTIONS(po)                                                                               \
    {.type = CLI_ENUM, .names = "--decoding", .dest = &(po).decoding, .choices = "budget|kvpress",              \
     .help = "compression during generation's rule: budget (--compress-every N --max-kv-tokens M:\n"            \
             "never more than M pairs per head; the default) or kvpress (its DecodingPress: every\n"          \
             "--compress-every N decoding steps, default 512, compress to --target-kv-tokens)"},                \
    {.type = CLI_I64, .names = "--target-kv-tokens", .metavar = "T", .dest = &(po).target_kv_tokens, .min = 1, \
     .max = 1 << 24, .help = "--decoding kvpress: pairs per head kept by a compression (default 2048)"}

/* --press-seed, the random scorer's seed (eval-ppl takes it too). */
#define CLI_PRESS_SEED_OPTION(po)                                                                              \
    {.type = CLI_I64, .names = "--press-seed", .metavar = "S", .dest = &(po).press_seed, .min = 0,             \
     .max = UINT32_MAX, .help = "the random scorer's seed (default 42, kvpress's evaluation seed)"}

#define CLI_PRESS_OPTIONS(po)                                                                                  \
    {.type = CLI_STR, .names = "--press", .metavar = "NAME", .dest = &(po).press, .help = cli_press_help()},      \
    {.type = CLI_STR, .names = "--compression", .metavar = "P", .dest = &(po).compression_arg,                 \
     .help = "compression ratio p_c in [0, 1) (ruler: a comma list runs each)"},                             \
    CLI_QUERY_MODE_OPTIONS((po).aware_flag, (po).agnostic_flag),                                               \
    {.type = CLI_FLAG, .names = "--vector", .dest = &(po).vector,                                              \
     .help = "VECTOR: approximate tier (K kept, V rebuilt by the calibrated OLS map)"},                       \
    {.type = CLI_STR, .names = "--calib", .metavar = "FILE", .dest = &(po).calib,                              \
     .help = "calibration (default: MODEL.vkcal beside the model)"},                                          \
    {.type = CLI_STR, .names = "--pa", .metavar = "X", .dest = &(po).pa_arg,                                   \
     .help = "approximation ratio (default min(p_c/2, (1-p_c)/2); 0 = the eviction baseline;\n"                \
             "longbench: a comma list runs each, one results file per value)"},                                   \
    {.type = CLI_ENUM, .names = "--vector-pool", .dest = &(po).vector_pool, .choices = "row|layer|global",        \
     .help = "where VECTOR's budget, pool and residual ranking are taken (default: layer for\n"                \
             "pyramidkv, row otherwise, as measured in models/README.md)"},                                       \
    {.type = CLI_ENUM, .names = "--vector-map", .dest = &(po).vector_map, .choices = "head|joint",              \
     .help = "VECTOR's maps: one per (layer, KV head), or one joint map per layer over all KV\n"             \
             "heads, whose tiers are chosen per layer on the heads' mean score (the baseline\n"                \
             "then selects per layer too); default head"},                                                      \
    {.type = CLI_I64, .names = "--compress-every", .metavar = "N", .dest = &(po).compress_every, .min = 1,      \
     .max = 1 << 24, .help = "compress during generation: at most every N tokens, with --max-kv-tokens\n"        \
                             "(--decoding kvpress: every N decoding steps; scorers keydiff, knorm,\n"             \
                             "streamingllm, tova, observed, expected (N > 4), snapkv and pyramidkv\n"            \
                             "(N >= 64); VECTOR's tiers kept, demoted only)"},                                    \
    {.type = CLI_I64, .names = "--max-kv-tokens", .metavar = "M", .dest = &(po).max_kv_tokens, .min = 2,        \
     .max = 1 << 24, .help = "the KV pairs per head the cache never exceeds (M > N)"},                          \
    CLI_DECODING_OPTIONS(po),                                                                                  \
    CLI_PRESS_SEED_OPTION(po),                                                                                 \
    {.type = CLI_FLAG, .names = "--materialized", .dest = &(po).materialized,                                  \
     .help = "attention rebuilds every approximated value (reference path; default: fused)"}

#endif
