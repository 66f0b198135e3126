/* vkvector bench ops: GPU time, achieved GB/s and GFLOP/s of the matrix-vector
 * and matrix-matrix kernels at LLM shapes, against the device's peak where
 * known. A benchmark prints figures; it never fails on speed. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/load_report.h"
#include "core/rng.h"
#include "calib/calib.h"
#include "infer/forward.h"
#include "press/kvzip.h"
#include "press/vector.h"
#include "tok/tokenizer.h"
#include "vk/ops.h"

/* Peak figures of devices we know (dense fp16 TFLOP/s, memory TB/s). */
typedef struct device_peak {
    const char *name_part;
    double tflops, tbps;
} device_peak;

static const device_peak known_peaks[] = {
    {"H200", 989.0, 4.8},
    {"H100", 989.0, 3.35},
    {"A100", 312.0, 2.0},
    {"RTX 4090", 165.0, 1.008},
    {"RTX 3090", 71.0, 0.936},
};

static const device_peak *find_peak(const char *name)
{
    for (size_t i = 0; i < sizeof known_peaks / sizeof *known_peaks; i++)
        if (strstr(name, known_peaks[i].name_part)) return &known_peaks[i];
    return NULL;
}

/* GPU nanoseconds per dispatch of what `record` records: one warm-up
 * submission, then reps dispatches in one submission (0 without timestamps). */
static vkv_status time_dispatches(vkv_gpu *gpu, int64_t reps, vkv_status (*record)(vkv_gpu *, const void *),
                                  const void *arg, double *ns)
{
    vkv_status st;
    *ns = 0;
    for (int round = 0; round < 2; round++) {
        int64_t count = round ? reps : 1;
        if ((st = vkv_cmd_begin(gpu))) return st;
        for (int64_t r = 0; r < count; r++)
            if ((st = record(gpu, arg))) {
                vkv_cmd_submit(gpu);
                return st;
            }
        if ((st = vkv_cmd_submit(gpu))) return st;
        *ns = vkv_gpu_last_submit_ns(gpu) / (double)count;
    }
    return VKV_OK;
}

typedef struct matmul_call {
    vkv_matmul_path path;
    vkv_dtype type;
    vkv_view w;
    uint32_t m, k;
    vkv_view x;
    uint32_t n;
    vkv_view y;
} matmul_call;

static vkv_status record_matmul(vkv_gpu *gpu, const void *arg)
{
    const matmul_call *c = arg;
    return vkv_op_matmul(gpu, c->path, c->type, c->w, c->m, c->k, c->x, c->n, c->y);
}

typedef struct gram_call {
    const vkv_gram_params *p;
    vkv_view x, y, out;
} gram_call;

static vkv_status record_gram(vkv_gpu *gpu, const void *arg)
{
    const gram_call *c = arg;
    return vkv_op_gram(gpu, c->p, c->x, c->y, c->out);
}

/* The calibration's Gram accumulation (calib/gram.c) at one layer's shapes:
 * n_tok tokens of K and V rows [n_tok, n_kv * hd] f32, summed into the
 * per-head blocks K_h^T V_h and the joint K^T V of the layer (K_h^T K_h
 * and K^T K have the same shapes and cost). */
static int bench_gram(vkv_gpu *gpu, uint32_t n_kv, uint32_t hd, uint32_t n_tok, int64_t reps, double best_matmul_gflops)
{
    const uint32_t width = n_kv * hd;
    const uint64_t in_bytes = 4ull * n_tok * width, out_bytes = 4ull * width * width;
    vkv_buffer *k = NULL, *v = NULL, *out = NULL;
    vkv_status st;
    double best_gflops = 0;
    if ((st = vkv_buffer_create(gpu, in_bytes, VKV_MEM_DEVICE, "bench K rows", &k)) ||
        (st = vkv_buffer_fill(gpu, k, 0, in_bytes, 0x3c000000u)) ||
        (st = vkv_buffer_create(gpu, in_bytes, VKV_MEM_DEVICE, "bench V rows", &v)) ||
        (st = vkv_buffer_fill(gpu, v, 0, in_bytes, 0x3c000000u)) ||
        (st = vkv_buffer_create(gpu, out_bytes, VKV_MEM_DEVICE, "bench Gram output", &out)))
        goto done;
    const struct { const char *name; vkv_gram_params p; } cases[] = {
        {"gram_per_head", {.n_tok = n_tok, .m = hd, .n = hd, .ldx = width, .ldy = width, .x_step = hd, .y_step = hd, .n_blocks = n_kv}},
        {"gram_joint", {.n_tok = n_tok, .m = width, .n = width, .ldx = width, .ldy = width, .n_blocks = 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const vkv_gram_params *p = &cases[c].p;
        gram_call call = {p, vkv_view_of(k), vkv_view_of(v), vkv_view_of(out)};
        double best;
        if ((st = time_dispatches(gpu, reps, record_gram, &call, &best))) goto done;
        char shape[48];
        snprintf(shape, sizeof shape, "%ux%ux%u", p->n_blocks, p->m, p->n);
        if (best <= 0) {
            printf("%-15s %-5s %-14s %6u %10s\n", cases[c].name, "f32", shape, n_tok, "n/a");
            continue;
        }
        double sec = best * 1e-9, flops = 2.0 * p->n_blocks * p->m * p->n * n_tok;
        double bytes = 2.0 * in_bytes + 4.0 * p->n_blocks * p->m * p->n, gfl = flops / sec / 1e9;
        if (gfl > best_gflops) best_gflops = gfl;
        printf("%-15s %-5s %-14s %6u %10.4f %9.1f %10.1f %8s\n", cases[c].name, "f32", shape, n_tok, best / 1e6,
               bytes / sec / 1e9, gfl, "-");
    }
    if (best_gflops > 0 && best_matmul_gflops > 0)
        printf("Gram accumulation: %.1f GFLOP/s = %.0f%% of the fastest matrix product above (%.1f GFLOP/s)\n", best_gflops,
               100.0 * best_gflops / best_matmul_gflops, best_matmul_gflops);
done:
    vkv_buffer_destroy(gpu, k);
    vkv_buffer_destroy(gpu, v);
    vkv_buffer_destroy(gpu, out);
    return st ? cli_fail("bench", st) : 0;
}

static void bench_usage(void)
{
    printf("usage: vkvector bench ops [--device N] [--reps R] [--batch N] [--types LIST] [--quick]\n\n"
           "Times matrix-vector (decode) and matrix-matrix (prefill, N = --batch, default 512)\n"
           "products at LLM shapes (4096x4096, 14336x4096, 4096x14336) for f16, q8_0, q4_0, q4_K\n"
           "weights and prints GPU time, GB/s, GFLOP/s and the ratio to the device's peak.\n"
           "Then times the calibration's Gram accumulation (f32, per-head and joint blocks of\n"
           "Llama-3-8B's K/V: 8 KV heads x 128; 4 x 64 with --quick) over N tokens against the\n"
           "fastest matrix product.\n"
           "  --quick   small shapes (1024x1024, 2048x1024), for slow devices such as lavapipe\n");
}

static int bench_ops(int argc, char **argv)
{
    int device = cli_device_index_from_env();
    int64_t reps = 5, batch = 512;
    bool quick = false;
    const char *types_arg = "f16,q8_0,q4_0,q4_K";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            bench_usage();
            return 0;
        } else if (!strcmp(a, "--device")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("bench", "--device wants an index, got '%s'", v);
            device = (int)iv;
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 1, 10000, &reps)) return cli_usage_error("bench", "--reps wants 1..10000, got '%s'", v);
        } else if (!strcmp(a, "--batch")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 2, 65536, &batch)) return cli_usage_error("bench", "--batch wants 2..65536, got '%s'", v);
        } else if (!strcmp(a, "--types")) {
            if (!(types_arg = cli_flag_value("bench", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--quick")) {
            quick = true;
        } else {
            return cli_usage_error("bench", "unknown option '%s'", a);
        }
    }
    vkv_dtype types[8];
    int n_types = 0;
    char tbuf[128];
    snprintf(tbuf, sizeof tbuf, "%s", types_arg);
    for (char *save, *tok = strtok_r(tbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int t = vkv_dtype_from_name(tok);
        if (t < 0 || n_types == 8) return cli_usage_error("bench", "unknown weight type '%s'", tok);
        types[n_types++] = (vkv_dtype)t;
    }
    const uint32_t shapes_full[3][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
    const uint32_t shapes_quick[2][2] = {{1024, 1024}, {2048, 1024}};
    const uint32_t(*shapes)[2] = quick ? shapes_quick : shapes_full;
    int n_shapes = quick ? 2 : 3;
    if (quick && batch == 512) batch = 64;

    vkv_instance *inst;
    vkv_gpu *gpu = NULL;
    vkv_status st = vkv_instance_create(vkv_validation_requested(), false, &inst);
    if (st) return cli_fail("bench", st);
    if ((st = vkv_gpu_create(inst, device, &gpu))) {
        vkv_instance_destroy(inst);
        return cli_fail("bench", st);
    }
    const vkv_caps *caps = vkv_gpu_caps(gpu);
    const device_peak *peak = find_peak(caps->name);
    printf("device: %s (%s)\n", caps->name, caps->driver_info);
    if (peak) printf("peak: %.0f TFLOP/s dense fp16, %.2f TB/s memory\n", peak->tflops, peak->tbps);
    else printf("peak: unknown for this device (ratios not shown)\n");
    if (!caps->timestamps) printf("note: no GPU timestamps on this device; times are not available\n");
    vkv_gpu_set_profiling(gpu, true);
    printf("%-15s %-5s %-14s %6s %10s %9s %10s %8s\n", "kernel", "type", "M x K", "N", "GPU ms", "GB/s", "GFLOP/s",
           "of peak");
    vkv_rng rng = vkv_rng_new(7);
    int rc = 0;
    double best_matmul_gflops = 0;
    for (int s = 0; s < n_shapes && !rc; s++) {
        uint32_t m = shapes[s][0], k = shapes[s][1];
        for (int ti = 0; ti < n_types && !rc; ti++) {
            vkv_dtype t = types[ti];
            uint64_t rb = vkv_dtype_row_bytes(t, k), wbytes = rb * m;
            vkv_buffer *w = NULL, *x = NULL, *y = NULL;
            uint8_t *host = malloc(wbytes);
            float *row = malloc(4ull * k);
            if (!host || !row) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
            for (uint32_t i = 0; i < m; i++) {
                for (uint32_t j = 0; j < k; j++) row[j] = vkv_rng_uniform(&rng, -1, 1);
                vkv_quantize_row(t, row, host + (size_t)i * rb, k);
            }
            if ((st = vkv_buffer_create(gpu, wbytes, VKV_MEM_DEVICE, "bench weight", &w)) ||
                (st = vkv_buffer_upload(gpu, w, 0, host, wbytes)) ||
                (st = vkv_buffer_create(gpu, 4ull * batch * k, VKV_MEM_DEVICE, "bench input", &x)) ||
                (st = vkv_buffer_fill(gpu, x, 0, 4ull * batch * k, 0x3c000000u)) ||
                (st = vkv_buffer_create(gpu, 4ull * batch * m, VKV_MEM_DEVICE, "bench output", &y)))
                goto fail;
            vkv_matmul_path paths[3] = {VKV_MATMUL_MATVEC, VKV_MATMUL_TILED, VKV_MATMUL_COOPMAT};
            for (int p = 0; p < 3; p++) {
                if (!vkv_matmul_path_supported(gpu, paths[p], t)) continue;
                uint32_t n = paths[p] == VKV_MATMUL_MATVEC ? 1 : (uint32_t)batch;
                matmul_call call = {paths[p], t, vkv_view_of(w), m, k, vkv_view_of(x), n, vkv_view_of(y)};
                double best;
                if ((st = time_dispatches(gpu, reps, record_matmul, &call, &best))) goto fail;
                double sec = best * 1e-9;
                double bytes = (double)wbytes + 4.0 * n * k + 4.0 * n * m;
                double flops = 2.0 * m * k * n;
                const char *name = paths[p] == VKV_MATMUL_MATVEC ? "matvec" : paths[p] == VKV_MATMUL_TILED ? "matmul_tiled" : "matmul_coopmat";
                char mk[32];
                snprintf(mk, sizeof mk, "%ux%u", m, k);
                if (sec <= 0) {
                    printf("%-15s %-5s %-14s %6u %10s\n", name, vkv_dtype_get(t)->name, mk, n, "n/a");
                    continue;
                }
                double gbs = bytes / sec / 1e9, gfl = flops / sec / 1e9;
                if (n > 1 && gfl > best_matmul_gflops) best_matmul_gflops = gfl;
                char ratio[32] = "-";
                if (peak) {
                    /* Decode is bandwidth-bound, prefill compute-bound. */
                    if (n == 1) snprintf(ratio, sizeof ratio, "%.1f%% BW", 100.0 * gbs / (peak->tbps * 1000));
                    else snprintf(ratio, sizeof ratio, "%.1f%% FLOP", 100.0 * gfl / (peak->tflops * 1000));
                }
                printf("%-15s %-5s %-14s %6u %10.4f %9.1f %10.1f %8s\n", name, vkv_dtype_get(t)->name, mk, n, best / 1e6,
                       gbs, gfl, ratio);
                fflush(stdout);
            }
        fail:
            vkv_buffer_destroy(gpu, w);
            vkv_buffer_destroy(gpu, x);
            vkv_buffer_destroy(gpu, y);
            free(host);
            free(row);
            if (st) rc = cli_fail("bench", st);
        }
    }
    if (!rc) rc = bench_gram(gpu, quick ? 4 : 8, quick ? 64 : 128, (uint32_t)batch, reps, best_matmul_gflops);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* llama-bench's two figures: pp (prompt processing: one batch of n_pp tokens)
 * and tg (text generation: n_tg tokens one at a time), tokens per second,
 * mean and standard deviation over reps runs after one warm-up. */
static int bench_model(int argc, char **argv)
{
    const char *path = NULL;
    int64_t n_pp = 512, n_tg = 128, reps = 3;
    int device = cli_device_index_from_env();
    vkv_dtype kv_type = VKV_F16;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(path = cli_flag_value("bench", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "-p")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1 << 20, &n_pp)) return cli_usage_error("bench", "-p wants 0..1048576, got '%s'", v);
        } else if (!strcmp(a, "-n")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1 << 20, &n_tg)) return cli_usage_error("bench", "-n wants 0..1048576, got '%s'", v);
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 1, 1000, &reps)) return cli_usage_error("bench", "--reps wants 1..1000, got '%s'", v);
        } else if (!strcmp(a, "--device")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("bench", "--device wants an index, got '%s'", v);
            device = (int)iv;
        } else if (!strcmp(a, "--kv-type")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!strcmp(v, "f16")) kv_type = VKV_F16;
            else if (!strcmp(v, "f32")) kv_type = VKV_F32;
            else return cli_usage_error("bench", "--kv-type wants f16 or f32, got '%s'", v);
        } else {
            return cli_usage_error("bench", "unknown option '%s'", a);
        }
    }
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *m = NULL;
    vkv_ctx *ctx = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    vkv_status st;
    int rc = 1;
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)))
        goto fail;
    double t_load = now_s();
    if ((st = vkv_model_load(gpu, path, &m))) goto fail;
    t_load = now_s() - t_load;
    uint32_t n_ctx = (uint32_t)(n_pp + n_tg + 1);
    vkv_ctx_params cp = {.n_ctx = n_ctx, .n_batch = n_pp ? (uint32_t)n_pp : 1, .kv_type = kv_type};
    if ((st = vkv_ctx_create(gpu, m, &cp, &ctx))) goto fail;
    ids = malloc(sizeof *ids * (size_t)(n_pp + 1));
    logits = malloc(sizeof *logits * m->hp.n_vocab);
    if (!ids || !logits) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    vkv_rng rng = vkv_rng_new(1);
    for (int64_t i = 0; i < n_pp + 1; i++) ids[i] = (int32_t)vkv_rng_below(&rng, m->hp.n_vocab);
    uint64_t params = 0;
    for (int64_t i = 0; i < vkv_gguf_n_tensors(m->gguf); i++) {
        const vkv_gguf_tensor *t = vkv_gguf_tensor_at(m->gguf, i);
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    printf("| model | size | params | backend | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: |\n");
    for (int test = 0; test < 2; test++) {
        int64_t n = test == 0 ? n_pp : n_tg;
        if (!n) continue;
        double sum = 0, sum2 = 0;
        for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up */
            if ((st = vkv_ctx_reset(ctx))) goto fail;
            double t0 = now_s();
            if (test == 0) {
                if ((st = vkv_ctx_eval(ctx, ids, (uint32_t)n, false, logits))) goto fail;
            } else {
                for (int64_t i = 0; i < n; i++)
                    if ((st = vkv_ctx_eval(ctx, &ids[i % (n_pp + 1)], 1, false, logits))) goto fail;
            }
            double tps = n / (now_s() - t0);
            if (r >= 0) { sum += tps; sum2 += tps * tps; }
        }
        double mean = sum / reps, sd = reps > 1 ? sqrt(fmax(0, (sum2 - reps * mean * mean) / (reps - 1))) : 0;
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        printf("| %s | %.2f MiB | %.2f M | Vulkan (%s) | %s%lld | %.2f ± %.2f |\n", name, m->weight_bytes / 1048576.0,
               params / 1e6, vkv_gpu_caps(gpu)->name, test == 0 ? "pp" : "tg", (long long)n, mean, sd);
        fflush(stdout);
    }
    /* The warm-up runs built every pipeline: the timed runs paid none. */
    printf("\n");
    cli_print_load_report(stdout, t_load, m->weight_bytes, gpu);
    vkv_mem_stats ms = vkv_gpu_mem_stats(gpu);
    printf("device memory: peak in use %.2f MiB, allocated %.2f MiB\n", ms.device_peak_used / 1048576.0,
           ms.device_bytes_allocated / 1048576.0);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("bench", st);
out:
    free(ids);
    free(logits);
    vkv_ctx_free(ctx);
    vkv_model_free(gpu, m);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}

/* --profile: GPU time per kernel of the two decodes (timestamps around every
 * dispatch, so the wall-clock figures of a profiled run are not comparable). */
/* n_decode single-token steps of ids on ctx; adds their wall time to
 * *seconds and, when prof is not NULL, their GPU time per kernel to prof. */
static vkv_status timed_decode(vkv_gpu *gpu, vkv_ctx *ctx, const int32_t *ids, int64_t n_decode, double *seconds,
                               double *prof)
{
    vkv_status st = VKV_OK;
    vkv_gpu_set_profiling(gpu, prof != NULL);
    vkv_gpu_reset_profile(gpu);
    double t0 = now_s();
    for (int64_t i = 0; i < n_decode && !st; i++) st = vkv_ctx_eval(ctx, &ids[i], 1, false, NULL);
    *seconds += now_s() - t0;
    if (prof) {
        for (int k = 0; k < VKV_KERNEL_COUNT; k++) prof[k] += vkv_gpu_kernel_ns(gpu, (vkv_kernel)k);
        vkv_gpu_set_profiling(gpu, false);
    }
    return st;
}

/* Columns: tiered, plain of the same bytes and, with VECTOR (n_cols 3),
 * plain of the same tokens. */
static void print_decode_profile(const double *const prof[3], int n_cols, double steps)
{
    double total[3] = {0};
    for (int k = 0; k < VKV_KERNEL_COUNT; k++)
        for (int c = 0; c < n_cols; c++) total[c] += prof[c][k];
    printf("\nGPU time per decode step, by kernel (us)   tiered      plain%s\n", n_cols == 3 ? "  same-token plain" : "");
    for (int k = 0; k <= VKV_KERNEL_COUNT; k++) {
        const double *row[3];
        double tot[3];
        for (int c = 0; c < n_cols; c++) {
            tot[c] = total[c];
            row[c] = k < VKV_KERNEL_COUNT ? &prof[c][k] : &tot[c];
        }
        bool any = false;
        for (int c = 0; c < n_cols; c++) any |= *row[c] > 0;
        if (!any && k < VKV_KERNEL_COUNT) continue;
        printf("  %-38s", k < VKV_KERNEL_COUNT ? vkv_kernel_name((vkv_kernel)k) : "total");
        for (int c = 0; c < n_cols; c++) printf(" %9.1f ", 1e-3 * *row[c] / steps);
        printf("\n");
    }
}

/* The two speed figures of VECTOR: the scoring + allocation + compaction
 * step against the prefill it follows, and decode over the compressed
 * (tiered) cache against decode over a plain cache holding as many tokens as
 * were kept. */
static int bench_vector(int argc, char **argv)
{
    const char *path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *press_name = "keydiff", *calib_path = NULL;
    int64_t n = 8192, n_decode = 64, reps = 3;
    double pc = 0.5;
    bool vector = false, profile = false;
    int device = cli_device_index_from_env();
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(path = cli_flag_value("bench", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--profile")) {
            profile = true;
        } else if (!strcmp(a, "--context")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 64, 1 << 20, &n)) return cli_usage_error("bench", "--context wants 64..1048576, got '%s'", v);
        } else if (!strcmp(a, "--decode")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 1, 1 << 16, &n_decode)) return cli_usage_error("bench", "--decode wants 1..65536, got '%s'", v);
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 1, 100, &reps)) return cli_usage_error("bench", "--reps wants 1..100, got '%s'", v);
        } else if (!strcmp(a, "--press")) {
            if (!(press_name = cli_flag_value("bench", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--compression")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_f64(v, 0, 1, &pc) || pc <= 0 || pc >= 1) return cli_usage_error("bench", "--compression wants (0, 1), got '%s'", v);
        } else if (!strcmp(a, "--vector")) {
            vector = true;
        } else if (!strcmp(a, "--calib")) {
            if (!(calib_path = cli_flag_value("bench", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--device")) {
            if (!(v = cli_flag_value("bench", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("bench", "--device wants an index, got '%s'", v);
            device = (int)iv;
        } else {
            return cli_usage_error("bench", "unknown option '%s'", a);
        }
    }
    const vkv_press_ops *press = vkv_press_find(press_name);
    if (!press) return cli_usage_error("bench", "%s", vkv_last_error());
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *m = NULL;
    vkv_ctx *ctx = NULL, *plain = NULL, *same_tokens = NULL;
    vkv_calib *calib = NULL;
    vkv_tokenizer *tok = NULL;
    vkv_kvzip_prompt kz = {0};
    int32_t *ids = NULL;
    vkv_status st;
    int rc = 1;
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)) ||
        (st = vkv_model_load(gpu, path, &m)))
        goto fail;
    if (vector) {
        char def[1100];
        if (!calib_path) {
            cli_default_calib_path(path, def, sizeof def);
            calib_path = def;
        }
        if ((st = vkv_calib_load(calib_path, m, &calib))) goto fail;
    }
    uint32_t kept = vkv_kv_n_kept(pc, (uint32_t)n), room = 0;
    if (press->repeat_pass) { /* KVzip: room for its reconstruction passes */
        if ((st = vkv_tokenizer_load(m->gguf, &tok)) || (st = vkv_kvzip_prompt_make(tok, false, &kz))) goto fail;
        room = vkv_kvzip_max_pass_tokens(&kz, (uint32_t)n);
    }
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(n + n_decode + 1) + room, .n_batch = 512, .kv_type = VKV_F16};
    vkv_ctx_params pp = {.n_ctx = (uint32_t)(kept + n_decode + 1), .n_batch = 512, .kv_type = VKV_F16};
    /* VECTOR attends to more tokens than it holds full pairs for: the third
     * cache holds as many tokens as the tiered one attends to (r + a). */
    vkv_ctx_params tp = {.n_ctx = (uint32_t)(n + n_decode + 1), .n_batch = 512, .kv_type = VKV_F16};
    if ((st = vkv_ctx_create(gpu, m, &cp, &ctx)) || (st = vkv_ctx_create(gpu, m, &pp, &plain)) ||
        (vector && (st = vkv_ctx_create(gpu, m, &tp, &same_tokens))))
        goto fail;
    if (!(ids = malloc(sizeof *ids * (size_t)(n + n_decode)))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    vkv_rng rng = vkv_rng_new(3);
    for (int64_t i = 0; i < n + n_decode; i++) ids[i] = (int32_t)vkv_rng_below(&rng, m->hp.n_vocab);
    double prefill = 0, compress = 0, dec_tiered = 0, dec_plain = 0, dec_same_tokens = 0;
    uint32_t attended = kept;
    uint64_t tiered_rows = 0; /* K plus V rows of the compressed cache, all layers and KV heads */
    double prof_tiered[VKV_KERNEL_COUNT] = {0}, prof_plain[VKV_KERNEL_COUNT] = {0}, prof_same[VKV_KERNEL_COUNT] = {0};
    for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up */
        vkv_vector_params vp = {.press = press, .pp = vkv_press_params_default(pc), .vector = vector, .pa = -1,
                                .w = calib ? calib->w : NULL, .lean = true, .context_ids = ids,
                                .kvzip = press->repeat_pass ? &kz : NULL};
        vkv_press_session *s = NULL;
        vkv_vector_report rep = {0};
        if ((st = vkv_ctx_reset(ctx)) || (st = vkv_press_session_create(ctx, m, &vp, (uint32_t)n, &s))) goto fail;
        double t0 = now_s();
        st = vkv_ctx_eval(ctx, ids, (uint32_t)n, false, NULL);
        double t1 = now_s();
        if (!st) st = vkv_press_session_compress(s, &rep);
        double t2 = now_s();
        if (!st) {
            attended = 0;
            tiered_rows = 0;
            for (uint32_t i = 0; i < rep.n_layer * rep.n_kv_head; i++) {
                if (rep.n_ret[i] + rep.n_apx[i] > attended) attended = rep.n_ret[i] + rep.n_apx[i];
                tiered_rows += 2ull * rep.n_ret[i] + rep.n_apx[i];
            }
        }
        vkv_vector_report_free(&rep);
        vkv_press_session_free(s);
        if (st) goto fail;
        /* The warm-up run (r = -1) is timed into a scratch total. */
        const bool timed = r >= 0, prof = profile && timed;
        double warm = 0;
        if ((st = timed_decode(gpu, ctx, &ids[n], n_decode, timed ? &dec_tiered : &warm, prof ? prof_tiered : NULL)) ||
            (st = vkv_ctx_reset(plain)) || (st = vkv_ctx_eval(plain, ids, kept, false, NULL)) ||
            (st = timed_decode(gpu, plain, &ids[n], n_decode, timed ? &dec_plain : &warm, prof ? prof_plain : NULL)))
            goto fail;
        if (same_tokens &&
            ((st = vkv_ctx_reset(same_tokens)) || (st = vkv_ctx_eval(same_tokens, ids, attended, false, NULL)) ||
             (st = timed_decode(gpu, same_tokens, &ids[n], n_decode, timed ? &dec_same_tokens : &warm,
                                prof ? prof_same : NULL))))
            goto fail;
        if (r >= 0) {
            prefill += t1 - t0;
            compress += t2 - t1;
        }
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("model %s on %s; %s p_c %.2f%s; context %lld tokens, %u kept; %lld decode steps; mean of %lld runs\n", name,
           vkv_gpu_caps(gpu)->name, press->name, pc, vector ? " VECTOR" : " (eviction baseline)", (long long)n, kept,
           (long long)n_decode, (long long)reps);
    printf("prefill                        %9.1f ms  (%.1f tokens/s)\n", 1e3 * prefill / reps, n * reps / prefill);
    printf("score + allocate + compact     %9.1f ms  = %.1f%% of the prefill (target < 10%%)\n", 1e3 * compress / reps,
           100 * compress / prefill);
    printf("decode, compressed (tiered)    %9.2f tokens/s\n", n_decode * reps / dec_tiered);
    printf("decode, plain cache of %u      %9.2f tokens/s\n", kept, n_decode * reps / dec_plain);
    printf("decode ratio tiered / plain    %9.3f  (target >= 0.95)\n", dec_plain / dec_tiered);
    /* What a bandwidth-bound device pays: the cached rows each decode step
     * reads (the tokens decoded since are left out: both caches have them). */
    const uint64_t row_bytes = 2ull * m->hp.head_dim, plain_rows = 2ull * kept * m->hp.n_layer * m->hp.n_head_kv;
    printf("KV bytes read per decode step  %9.2f MiB tiered, %.2f MiB plain (ratio %.3f)\n",
           (double)(tiered_rows * row_bytes) / (1 << 20), (double)(plain_rows * row_bytes) / (1 << 20),
           (double)tiered_rows / (double)plain_rows);
    if (same_tokens) {
        /* The tiered cache holds `kept` full pairs' bytes but attends to r + a
         * keys; this isolates the cost of the fused path from that of the
         * extra keys. */
        printf("decode, plain cache of %u      %9.2f tokens/s  (as many tokens as the tiered cache attends to)\n",
               attended, n_decode * reps / dec_same_tokens);
        printf("decode ratio tiered / same-token plain %6.3f\n", dec_same_tokens / dec_tiered);
    }
    if (profile) print_decode_profile((const double *const[3]){prof_tiered, prof_plain, prof_same}, same_tokens ? 3 : 2,
                                      (double)(n_decode * reps));
    rc = 0;
    goto out;
fail:
    rc = cli_fail("bench", st);
out:
    free(ids);
    vkv_calib_free(calib);
    vkv_kvzip_prompt_free(&kz);
    vkv_tokenizer_free(tok);
    vkv_ctx_free(ctx);
    vkv_ctx_free(plain);
    vkv_ctx_free(same_tokens);
    vkv_model_free(gpu, m);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "vector")) return bench_vector(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "ops")) return bench_ops(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "-m") || !strcmp(argv[1], "--model"))) return bench_model(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vkvector bench ops [options]   kernel throughput (see 'vkvector bench ops --help')\n"
               "       vkvector bench -m MODEL.gguf [-p 512] [-n 128] [--reps 3] [--kv-type f16|f32]\n"
               "                                     llama-bench-style pp / tg tokens per second\n"
               "       vkvector bench vector [-m MODEL] [--context 8192] [--press keydiff] [--compression 0.5]\n"
               "                             [--vector [--calib FILE]] [--decode 64] [--reps 3]\n"
               "                             [--profile]\n"
               "                                     compression cost vs prefill; tiered vs plain decode\n");
        return 0;
    }
    return cli_usage_error("bench", "unknown benchmark '%s' (available: ops, vector, -m MODEL)", argc >= 2 ? argv[1] : "");
}
