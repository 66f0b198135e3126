/* vkvector calib: the one-time offline OLS calibration VECTOR needs per model
 * (calib/calib.h): runs a corpus through the model on the GPU, fits the
 * per-(layer, KV head) maps v ≈ W k, prints the held-out R² table and writes
 * the .vkcal file and a JSON report. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "core/out_file.h"
#include "session/session.h"

static const char *const USAGE =
    "vkvector calib -m MODEL.gguf|DIR --corpus FILE... [options]\n"
    "\n"
    "Runs the corpus through the model on the GPU, accumulates per layer and KV head the Grams of the\n"
    "pre-RoPE keys and the values, and fits v ≈ W k per (layer, KV head) by least squares in double\n"
    "precision. Prints the held-out R² per layer and head (with a joint per-layer map and the\n"
    "Moore-Penrose map W_V·W_K⁺ for comparison) and writes the maps as a .vkcal file.";

/* --joint's choices, in the order of its table entry's. */
enum { JOINT_ON, JOINT_OFF, JOINT_AUTO };

/* What the command line asks for. */
typedef struct calib_args {
    cli_model_opts mo;        /* -m and --device */
    cli_str_list corpus;
    int64_t n_tokens, seq_len, n_batch;
    double heldout, ridge;
    const char *ridge_arg, *out_arg, *json_arg;
    int joint;                /* JOINT_* */
    bool f16, byte_tokens;
} calib_args;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct progress {
    bool tty;
    double t0, last_print;
    int last_decile;
} progress;

static void fmt_time(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 359999) {
        snprintf(buf, n, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%u:%02u", t / 60, t % 60);
}

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    progress *p = user;
    double now = now_s(), el = now - p->t0, rate = el > 0 ? done / el : 0;
    char eta[32];
    fmt_time(rate > 0 ? (total - done) / rate : -1, eta, sizeof eta);
    if (p->tty) {
        if (done < total && now - p->last_print < 0.1) return;
        p->last_print = now;
        int width = 30, fill = total ? (int)(width * (double)done / total) : width;
        char bar[64];
        for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r[%s] %5.1f%% %llu/%llu tokens  %.0f tokens/s  ETA %s   ", bar, 100.0 * done / total,
                (unsigned long long)done, (unsigned long long)total, rate, eta);
        if (done >= total) fputc('\n', stderr);
    } else {
        int decile = total ? (int)(10 * done / total) : 10;
        if (decile == p->last_decile && done < total) return;
        p->last_decile = decile;
        fprintf(stderr, "calib: %llu/%llu tokens (%.0f%%), %.0f tokens/s, ETA %s\n", (unsigned long long)done,
                (unsigned long long)total, 100.0 * done / total, rate, eta);
    }
    fflush(stderr);
}

static char *with_suffix(const char *path, const char *strip, const char *add)
{
    size_t n = strlen(path), s = strlen(strip);
    if (n >= s && !strcmp(path + n - s, strip)) n -= s;
    char *out = malloc(n + strlen(add) + 1);
    if (out) {
        memcpy(out, path, n);
        strcpy(out + n, add);
    }
    return out;
}

/* Parses the command line into *a (a->corpus.items: room for argc paths);
 * CLI_OK, CLI_HELP or CLI_USAGE_ERROR (message printed). */
static int parse_calib_args(int argc, char **argv, calib_args *a)
{
    a->n_tokens = 1 << 20;
    a->seq_len = 512;
    a->heldout = 0.2;
    a->joint = JOINT_AUTO;
    cli_model_opts_init(&a->mo);
    const cli_opt opts[] = {
        CLI_MODEL_PATH_OPTION(a->mo.model_path),
        {.type = CLI_STR_LIST, .names = "--corpus", .metavar = "FILE...", .dest = &a->corpus,
         .help = "plain text, or JSONL with a \"text\" member per line (C4 shards: .jsonl or a\n"
                 "first character '{'); several files may follow, and --corpus may repeat"},
        {.type = CLI_I64, .names = "--tokens", .metavar = "N", .dest = &a->n_tokens, .min = 2, .max = 0x1p40,
         .help = "tokens to run, BOS included (default 1048576); fewer if the corpus ends"},
        {.type = CLI_I64, .names = "--seq-len", .metavar = "L", .dest = &a->seq_len, .min = 2, .max = 1 << 20,
         .help = "tokens per sequence, starting with BOS when the vocabulary adds one\n"
                 "(default 512, at most the model's context); the context is reset between them"},
        {.type = CLI_F64, .names = "--heldout", .metavar = "FRAC", .dest = &a->heldout, .min = 0, .max = 0.9,
         .help = "the last FRAC of the sequences are held out for the R² report (default 0.2)"},
        {.type = CLI_STR, .names = "--ridge", .metavar = "R|auto", .dest = &a->ridge_arg,
         .help = "W = (G/n + λ·I)^-1 C/n with λ = R·tr(G/n)/d_k, i.e. relative to the keys' mean\n"
                 "second moment (default 0; needed when the keys span fewer than d_k dimensions);\n"
                 "auto: 0 if every map is solvable, else the smallest power of ten that makes them so"},
        {.type = CLI_ENUM, .names = "--joint", .dest = &a->joint, .choices = "on|off|auto",
         .help = "also fit one map per layer over all KV heads, for the report (default auto: on\n"
                 "when n_head_kv·head_dim <= 2048)"},
        {.type = CLI_FLAG, .names = "--byte-tokens", .dest = &a->byte_tokens,
         .help = "feed the text as byte tokens (id = byte + 3, BOS = 1), for vocabularies\n"
                 "without merges such as stories260K's placeholder vocabulary"},
        {.type = CLI_STR, .names = "-o|--output", .metavar = "FILE", .dest = &a->out_arg,
         .help = "output (default: the model path with .vkcal for .gguf)"},
        {.type = CLI_STR, .names = "--json", .metavar = "FILE", .dest = &a->json_arg,
         .help = "JSON report (default: the output path + .json)"},
        {.type = CLI_FLAG, .names = "--f16", .dest = &a->f16, .help = "store the maps as f16 (default f32)"},
        {.type = CLI_I64, .names = "--batch", .metavar = "N", .dest = &a->n_batch, .min = 1, .max = 65536,
         .help = "forward chunk in tokens (default min(L, 512))"},
        CLI_DEVICE_OPTION(a->mo.device),
    };
    int parsed = cli_parse("calib", USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed;
    if (a->ridge_arg && !strcmp(a->ridge_arg, "auto")) a->ridge = VKV_CALIB_RIDGE_AUTO;
    else if (a->ridge_arg && !cli_parse_f64(a->ridge_arg, 0, 1e6, &a->ridge))
        return cli_usage_error("calib", "--ridge wants a number >= 0 or 'auto', got '%s'", a->ridge_arg);
    if (!a->corpus.n) return cli_usage_error("calib", "give the calibration text with --corpus FILE...");
    if (a->n_tokens < a->seq_len)
        return cli_usage_error("calib", "--tokens %lld is less than one sequence of --seq-len %lld",
                               (long long)a->n_tokens, (long long)a->seq_len);
    return CLI_OK;
}

/* Tokenizes the corpus, accumulates the Grams on the GPU, solves the maps,
 * writes them and the JSON report, and prints the R² table. */
static vkv_status calibrate(vkv_gpu *gpu, vkv_model *model, const vkv_tokenizer *tok, const calib_args *a,
                            const char *out_path, const char *json_path)
{
    const vkv_hparams *hp = &model->hp;
    const int64_t seq_len = a->seq_len;
    const uint32_t n_corpus = (uint32_t)a->corpus.n;
    int32_t *tokens = NULL;
    vkv_gram_accum *acc = NULL;
    vkv_calib *cal = NULL;
    vkv_status st;
    double t0 = now_s();
    uint32_t n_seq;
    vkv_corpus_params cp = {.paths = a->corpus.items, .n_paths = n_corpus, .tok = tok, .seq_len = (uint32_t)seq_len,
                            .max_seq = (uint32_t)(a->n_tokens / seq_len)};
    if ((st = vkv_corpus_sequences(&cp, &tokens, &n_seq))) goto done;
    double t_tok = now_s() - t0;
    uint32_t n_ho = (uint32_t)llround(a->heldout * n_seq);
    if (a->heldout > 0 && !n_ho) n_ho = 1;
    if (n_ho >= n_seq) n_ho = n_seq - 1;
    fprintf(stderr, "calib: %s (%s, %u layers, %u KV heads x %u) on %s\n", a->mo.model_path, hp->arch_name,
            hp->n_layer, hp->n_head_kv, hp->head_dim, vkv_gpu_caps(gpu)->name);
    fprintf(stderr, "calib: %u sequences x %lld tokens (%u held out) from %u file(s), %s, tokenized in %.2f s\n", n_seq,
            (long long)seq_len, n_ho, n_corpus, a->byte_tokens ? "byte tokens" : "the model's vocabulary", t_tok);
    if (a->heldout > 0 && !n_ho)
        fprintf(stderr, "calib: only one sequence: nothing to hold out, the R² report is in-sample\n");

    progress pr = {.tty = isatty(2), .t0 = now_s(), .last_decile = -1};
    bool joint = a->joint == JOINT_ON || (a->joint == JOINT_AUTO && vkv_calib_joint_default(hp));
    if (a->joint == JOINT_AUTO && !joint)
        fprintf(stderr, "calib: %u KV heads x %u: skipping the joint per-layer map (its sums grow as the square; "
                        "--joint on forces it)\n", hp->n_head_kv, hp->head_dim);
    vkv_calib_run_params rp = {.seq_len = (uint32_t)seq_len, .n_seq = n_seq, .n_seq_heldout = n_ho,
                               .n_batch = (uint32_t)a->n_batch, .joint = joint, .progress = on_progress,
                               .progress_user = &pr};
    double t_gpu = 0;
    if ((st = vkv_calib_collect(gpu, model, tokens, &rp, &acc, &t_gpu))) goto done;
    double t1 = now_s();
    if ((st = vkv_calib_solve(acc, model, a->ridge, &cal))) goto done;
    double t_solve = now_s() - t1;
    uint64_t total = (uint64_t)n_seq * seq_len;
    cal->heldout_frac = a->heldout;
    cal->corpus = (vkv_calib_corpus){.n_tokens = total, .n_tokens_heldout = (uint64_t)n_ho * seq_len, .n_seq = n_seq,
                                     .n_seq_heldout = n_ho, .seq_len = (uint32_t)seq_len, .byte_tokens = a->byte_tokens};
    if (!(cal->corpus.sources = calloc(n_corpus, sizeof(char *)))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto done;
    }
    for (uint32_t i = 0; i < n_corpus; i++)
        if ((cal->corpus.sources[i] = strdup(a->corpus.items[i]))) cal->corpus.n_sources++;
    double tps = total / t_gpu;
    if ((st = vkv_calib_write(cal, out_path, a->f16)) || (st = vkv_calib_write_json(cal, json_path, tps))) goto done;

    vkv_calib_print_report(cal, stdout);
    fflush(stdout);
    struct stat sb;
    fprintf(stderr, "calibration: %llu tokens in %.2f s = %.1f tokens/s on %s (solve %.2f s)\n", (unsigned long long)total,
            t_gpu, tps, vkv_gpu_caps(gpu)->name, t_solve);
    fprintf(stderr, "wrote %s (%s maps, %.1f KiB) and %s\n", out_path, a->f16 ? "f16" : "f32",
            stat(out_path, &sb) ? 0.0 : sb.st_size / 1024.0, json_path);
done:
    vkv_calib_free(cal);
    vkv_gram_accum_free(acc);
    free(tokens);
    return st;
}

/* Opens the device, the model and its vocabulary, and calibrates; the exit
 * status. */
static int run_calibration(const calib_args *a)
{
    const char *model_path = a->mo.model_path;
    char default_out[1100]; /* MODEL.vkcal beside MODEL.gguf or a checkpoint folder */
    vkv_calib_default_path(model_path, default_out, sizeof default_out);
    char *out_path = strdup(a->out_arg ? a->out_arg : default_out);
    char *json_path = a->json_arg ? strdup(a->json_arg) : out_path ? with_suffix(out_path, "", ".json") : NULL;
    vkv_session *s = NULL;
    vkv_status st;
    int rc = 1;
    if (!out_path || !json_path) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto fail;
    }
    /* both outputs can be written: checked before the model is loaded
     * (docs/ARCHITECTURE.md §6) */
    if ((st = vkv_out_check(a->out_arg ? "-o" : NULL, out_path)) ||
        (st = vkv_out_check(a->json_arg ? "--json" : NULL, json_path)))
        goto fail;
    /* The vocabulary is loaded after the checks (--byte-tokens needs none). */
    vkv_session_params sp = {.model_path = model_path, .device = a->mo.device, .no_tokenizer = true, .cmd = "calib"};
    if ((st = vkv_session_open(&sp, &s))) goto fail;
    const vkv_hparams *hp = &s->model->hp;
    if ((uint64_t)a->seq_len > hp->n_ctx_train) {
        fprintf(stderr, "vkvector calib: --seq-len %lld exceeds the model's %u-token context\n", (long long)a->seq_len,
                hp->n_ctx_train);
        rc = 2;
        goto done;
    }
    if (a->byte_tokens && hp->n_vocab < 259) {
        fprintf(stderr, "vkvector calib: --byte-tokens needs ids up to 258; this vocabulary has %u tokens\n", hp->n_vocab);
        rc = 2;
        goto done;
    }
    if (!a->byte_tokens && (st = vkv_session_load_tokenizer(s))) {
        st = vkv_error_context(st, "loading the vocabulary (for a vocabulary without merges, use --byte-tokens)");
        goto fail;
    }
    if ((st = calibrate(s->gpu, s->model, s->tok, a, out_path, json_path))) goto fail;
    rc = 0;
    goto done;
fail:
    rc = cli_fail("calib", st);
done:
    vkv_session_close(s);
    free(out_path);
    free(json_path);
    return rc;
}

int cmd_calib(int argc, char **argv)
{
    /* --corpus paths: argc of them always suffice */
    calib_args a = {.corpus = {.items = calloc((size_t)argc, sizeof(const char *)), .cap = (size_t)argc}};
    if (!a.corpus.items) return cli_fail("calib", vkv_error(VKV_ERR_OOM, "out of host memory"));
    int parsed = parse_calib_args(argc, argv, &a);
    int rc = parsed == CLI_OK ? run_calibration(&a) : parsed == CLI_HELP ? 0 : 2;
    free(a.corpus.items);
    return rc;
}
