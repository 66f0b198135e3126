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

static void calib_usage(void)
{
    printf("usage: vkvector calib -m MODEL.gguf --corpus FILE... [options]\n\n"
           "Runs the corpus through the model on the GPU, accumulates per layer and KV head the Grams of the\n"
           "pre-RoPE keys and the values, and fits v ≈ W k per (layer, KV head) by least squares in double\n"
           "precision. Prints the held-out R² per layer and head (with a joint per-layer map and the\n"
           "Moore-Penrose map W_V·W_K⁺ for comparison) and writes the maps as a .vkcal file.\n\n"
           "  -m, --model FILE      GGUF model (default: %s)\n"
           "  --corpus FILE...      plain text, or JSONL with a \"text\" member per line (C4 shards: .jsonl or a\n"
           "                        first character '{'); several files may follow, and --corpus may repeat\n"
           "  --tokens N            tokens to run, BOS included (default 1048576); fewer if the corpus ends\n"
           "  --seq-len L           tokens per sequence, starting with BOS when the vocabulary adds one\n"
           "                        (default 512, at most the model's context); the context is reset between them\n"
           "  --heldout FRAC        the last FRAC of the sequences are held out for the R² report (default 0.2)\n"
           "  --ridge R|auto        W = (G/n + λ·I)^-1 C/n with λ = R·tr(G/n)/d_k, i.e. relative to the keys' mean\n"
           "                        second moment (default 0; needed when the keys span fewer than d_k dimensions);\n"
           "                        auto: 0 if every map is solvable, else the smallest power of ten that makes them so\n"
           "  --joint on|off|auto   also fit one map per layer over all KV heads, for the report (default auto: on\n"
           "                        when n_head_kv·head_dim <= 2048)\n"
           "  --byte-tokens         feed the text as byte tokens (id = byte + 3, BOS = 1), for vocabularies\n"
           "                        without merges such as stories260K's placeholder vocabulary\n"
           "  -o FILE               output (default: the model path with .vkcal for .gguf)\n"
           "  --json FILE           JSON report (default: the output path + .json)\n"
           "  --f16                 store the maps as f16 (default f32)\n"
           "  --batch N             forward chunk in tokens (default min(L, 512))\n"
           "  --device N            Vulkan device (default: VKVECTOR_DEVICE or the best one)\n",
           VKV_DEFAULT_MODEL);
}

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

int cmd_calib(int argc, char **argv)
{
    const char *model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *out_arg = NULL, *json_arg = NULL;
    int64_t n_tokens = 1 << 20, seq_len = 512, n_batch = 0;
    double heldout = 0.2, ridge = 0;
    bool f16 = false, byte_tokens = false;
    int joint_mode = -1; /* auto */
    int device = cli_device_index_from_env();
    const char **corpus = calloc((size_t)argc + 1, sizeof *corpus);
    uint32_t n_corpus = 0;
    if (!corpus) return cli_fail("calib", vkv_error(VKV_ERR_OOM, "out of host memory"));
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
#define VALUE() do { if (!(v = cli_flag_value("calib", argc, argv, &i))) goto out; } while (0)
#define USAGE(...) do { rc = cli_usage_error("calib", __VA_ARGS__); goto out; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { calib_usage(); rc = 0; goto out; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); model_path = v; }
        else if (!strcmp(a, "--corpus")) {
            int before = n_corpus;
            while (i + 1 < argc && argv[i + 1][0] != '-') corpus[n_corpus++] = argv[++i];
            if ((int)n_corpus == before) USAGE("--corpus needs at least one file");
        } else if (!strcmp(a, "--tokens")) {
            VALUE();
            if (!cli_parse_i64(v, 2, (int64_t)1 << 40, &n_tokens)) USAGE("--tokens wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--seq-len")) {
            VALUE();
            if (!cli_parse_i64(v, 2, 1 << 20, &seq_len)) USAGE("--seq-len wants an integer >= 2, got '%s'", v);
        } else if (!strcmp(a, "--heldout")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 0.9, &heldout)) USAGE("--heldout wants a fraction in [0, 0.9], got '%s'", v);
        } else if (!strcmp(a, "--ridge")) {
            VALUE();
            if (!strcmp(v, "auto")) ridge = VKV_CALIB_RIDGE_AUTO;
            else if (!cli_parse_f64(v, 0, 1e6, &ridge)) USAGE("--ridge wants a number >= 0 or 'auto', got '%s'", v);
        } else if (!strcmp(a, "--joint")) {
            VALUE();
            if (!strcmp(v, "on")) joint_mode = 1;
            else if (!strcmp(v, "off")) joint_mode = 0;
            else if (!strcmp(v, "auto")) joint_mode = -1;
            else USAGE("--joint wants on, off or auto, got '%s'", v);
        } else if (!strcmp(a, "--batch")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 65536, &n_batch)) USAGE("--batch wants 1..65536, got '%s'", v);
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { VALUE(); out_arg = v; }
        else if (!strcmp(a, "--json")) { VALUE(); json_arg = v; }
        else if (!strcmp(a, "--f16")) f16 = true;
        else if (!strcmp(a, "--byte-tokens")) byte_tokens = true;
        else if (!strcmp(a, "--device")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1024, &iv)) USAGE("--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else USAGE("unknown option '%s'", a);
#undef VALUE
#undef USAGE
    }
    if (!n_corpus) {
        rc = cli_usage_error("calib", "give the calibration text with --corpus FILE...");
        goto out;
    }
    if (n_tokens < seq_len) {
        rc = cli_usage_error("calib", "--tokens %lld is less than one sequence of --seq-len %lld", (long long)n_tokens,
                             (long long)seq_len);
        goto out;
    }
    rc = 1;
    char *out_path = out_arg ? strdup(out_arg) : with_suffix(model_path, ".gguf", ".vkcal");
    char *json_path = json_arg ? strdup(json_arg) : out_path ? with_suffix(out_path, "", ".json") : NULL;
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *model = NULL;
    vkv_tokenizer *tok = NULL;
    int32_t *tokens = NULL;
    vkv_gram_accum *acc = NULL;
    vkv_calib *cal = NULL;
    vkv_status st;
    if (!out_path || !json_path) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto fail;
    }
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)) ||
        (st = vkv_model_load(gpu, model_path, &model)))
        goto fail;
    const vkv_hparams *hp = &model->hp;
    if ((uint64_t)seq_len > hp->n_ctx_train) {
        fprintf(stderr, "vkvector calib: --seq-len %lld exceeds the model's %u-token context\n", (long long)seq_len,
                hp->n_ctx_train);
        rc = 2;
        goto done;
    }
    if (byte_tokens && hp->n_vocab < 259) {
        fprintf(stderr, "vkvector calib: --byte-tokens needs ids up to 258; this vocabulary has %u tokens\n", hp->n_vocab);
        rc = 2;
        goto done;
    }
    if (!byte_tokens && (st = vkv_tokenizer_load(model->gguf, &tok))) {
        st = vkv_error_context(st, "loading the vocabulary (for a vocabulary without merges, use --byte-tokens)");
        goto fail;
    }

    double t0 = now_s();
    uint32_t n_seq;
    vkv_corpus_params cp = {.paths = corpus, .n_paths = n_corpus, .tok = tok, .seq_len = (uint32_t)seq_len,
                            .max_seq = (uint32_t)(n_tokens / seq_len)};
    if ((st = vkv_corpus_sequences(&cp, &tokens, &n_seq))) goto fail;
    double t_tok = now_s() - t0;
    uint32_t n_ho = (uint32_t)llround(heldout * n_seq);
    if (heldout > 0 && !n_ho) n_ho = 1;
    if (n_ho >= n_seq) n_ho = n_seq - 1;
    fprintf(stderr, "calib: %s (%s, %u layers, %u KV heads x %u) on %s\n", model_path, hp->arch_name, hp->n_layer,
            hp->n_head_kv, hp->head_dim, vkv_gpu_caps(gpu)->name);
    fprintf(stderr, "calib: %u sequences x %lld tokens (%u held out) from %u file(s), %s, tokenized in %.2f s\n", n_seq,
            (long long)seq_len, n_ho, n_corpus, byte_tokens ? "byte tokens" : "the model's vocabulary", t_tok);
    if (heldout > 0 && !n_ho)
        fprintf(stderr, "calib: only one sequence: nothing to hold out, the R² report is in-sample\n");

    progress pr = {.tty = isatty(2), .t0 = now_s(), .last_decile = -1};
    bool joint = joint_mode == 1 || (joint_mode < 0 && vkv_calib_joint_default(hp));
    if (joint_mode < 0 && !joint)
        fprintf(stderr, "calib: %u KV heads x %u: skipping the joint per-layer map (its sums grow as the square; "
                        "--joint on forces it)\n", hp->n_head_kv, hp->head_dim);
    vkv_calib_run_params rp = {.seq_len = (uint32_t)seq_len, .n_seq = n_seq, .n_seq_heldout = n_ho,
                               .n_batch = (uint32_t)n_batch, .joint = joint, .progress = on_progress,
                               .progress_user = &pr};
    double t_gpu = 0;
    if ((st = vkv_calib_collect(gpu, model, tokens, &rp, &acc, &t_gpu))) goto fail;
    double t1 = now_s();
    if ((st = vkv_calib_solve(acc, model, ridge, &cal))) goto fail;
    double t_solve = now_s() - t1;
    uint64_t total = (uint64_t)n_seq * seq_len;
    cal->heldout_frac = heldout;
    cal->corpus = (vkv_calib_corpus){.n_tokens = total, .n_tokens_heldout = (uint64_t)n_ho * seq_len, .n_seq = n_seq,
                                     .n_seq_heldout = n_ho, .seq_len = (uint32_t)seq_len, .byte_tokens = byte_tokens};
    if (!(cal->corpus.sources = calloc(n_corpus, sizeof(char *)))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n_corpus; i++)
        if ((cal->corpus.sources[i] = strdup(corpus[i]))) cal->corpus.n_sources++;
    double tps = total / t_gpu;
    if ((st = vkv_calib_write(cal, out_path, f16)) || (st = vkv_calib_write_json(cal, json_path, tps))) goto fail;

    vkv_calib_print_report(cal, stdout);
    fflush(stdout);
    struct stat sb;
    fprintf(stderr, "calibration: %llu tokens in %.2f s = %.1f tokens/s on %s (solve %.2f s)\n", (unsigned long long)total,
            t_gpu, tps, vkv_gpu_caps(gpu)->name, t_solve);
    fprintf(stderr, "wrote %s (%s maps, %.1f KiB) and %s\n", out_path, f16 ? "f16" : "f32",
            stat(out_path, &sb) ? 0.0 : sb.st_size / 1024.0, json_path);
    rc = 0;
    goto done;
fail:
    rc = cli_fail("calib", st);
done:
    vkv_calib_free(cal);
    vkv_gram_accum_free(acc);
    free(tokens);
    vkv_tokenizer_free(tok);
    vkv_model_free(gpu, model);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    free(out_path);
    free(json_path);
out:
    free(corpus);
    return rc;
}
