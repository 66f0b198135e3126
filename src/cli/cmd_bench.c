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
#include "cli/options.h"
#include "core/rng.h"
#include "kvlayout/kv_counts.h"
#include "session/session.h"
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
            if ((st = record(gpu, arg))) return vkv_cmd_abort(gpu, st);
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

/* The operands of one timed matrix product: W [m, k] random values quantized
 * to t, X [n_cols, k] and Y [n_cols, m] f32. */
typedef struct bench_operands {
    vkv_dtype t;
    uint32_t m, k;
    uint64_t w_bytes;
    vkv_buffer *w, *x, *y;
} bench_operands;

static void bench_operands_free(vkv_gpu *gpu, bench_operands *o)
{
    vkv_buffer_destroy(gpu, o->w);
    vkv_buffer_destroy(gpu, o->x);
    vkv_buffer_destroy(gpu, o->y);
    o->w = o->x = o->y = NULL;
}

static vkv_status bench_operands_create(vkv_gpu *gpu, vkv_rng *rng, vkv_dtype t, uint32_t m, uint32_t k,
                                       uint64_t n_cols, bench_operands *o)
{
    const uint64_t rb = vkv_dtype_row_bytes(t, k);
    /* w_bytes: what the device holds and reads (core/dtype.h's device rows) */
    *o = (bench_operands){.t = t, .m = m, .k = k, .w_bytes = vkv_dtype_device_row_bytes(t, k) * m};
    vkv_status st = VKV_OK;
    uint8_t *host = malloc(rb * m), *dev = malloc(o->w_bytes); /* the file's rows, the device's */
    float *row = malloc(4ull * k);
    if (!host || !dev || !row) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t i = 0; i < m; i++) {
        for (uint32_t j = 0; j < k; j++) row[j] = vkv_rng_uniform(rng, -1, 1);
        vkv_quantize_row(t, row, host + (size_t)i * rb, k);
    }
    vkv_dtype_rows_to_device(t, k, host, dev, m);
    if ((st = vkv_buffer_create(gpu, o->w_bytes, VKV_MEM_DEVICE, "bench weight", &o->w)) ||
        (st = vkv_buffer_upload(gpu, o->w, 0, dev, o->w_bytes)) ||
        (st = vkv_buffer_create(gpu, 4ull * n_cols * k, VKV_MEM_DEVICE, "bench input", &o->x)) ||
        (st = vkv_buffer_fill(gpu, o->x, 0, 4ull * n_cols * k, 0x3c000000u)) ||
        (st = vkv_buffer_create(gpu, 4ull * n_cols * m, VKV_MEM_DEVICE, "bench output", &o->y)))
        goto done;
done:
    if (st) bench_operands_free(gpu, o);
    free(host);
    free(dev);
    free(row);
    return st;
}

/* GPU nanoseconds of one product of o's first n columns on `path` (0
 * without timestamps). */
static vkv_status time_matmul(vkv_gpu *gpu, const bench_operands *o, vkv_matmul_path path, uint32_t n, int64_t reps,
                              double *ns)
{
    matmul_call call = {path, o->t, vkv_view_of(o->w), o->m, o->k, vkv_view_of(o->x), n, vkv_view_of(o->y)};
    return time_dispatches(gpu, reps, record_matmul, &call, ns);
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

/* --reps of every benchmark: one range for all. */
#define BENCH_REPS_OPTION(reps_dest, default_reps)                                                             \
    {.type = CLI_I64, .names = "--reps", .metavar = "R", .dest = &(reps_dest), .min = 1, .max = 1000,          \
     .help = "timed runs, after one warm-up (default " default_reps ")"}

static const char *const OPS_USAGE =
    "vkvector bench ops [--device N] [--reps R] [--batch N] [--types LIST] [--quick] [--small-batch]\n"
    "\n"
    "Times matrix-vector (decode) and matrix-matrix (prefill, N = --batch, default 512)\n"
    "products at LLM shapes (4096x4096, 14336x4096, 4096x14336) for f16, q8_0, q4_0, q4_K\n"
    "weights and prints GPU time, GB/s, GFLOP/s and the ratio to the device's peak.\n"
    "Then times the calibration's Gram accumulation (f32, per-head and joint blocks of\n"
    "Llama-3-8B's K/V: 8 KV heads x 128; 4 x 64 with --quick) over N tokens against the\n"
    "fastest matrix product.\n"
    "\n"
    "--small-batch times instead, at the same shapes and N = 2, 4, 8 and 16 columns, N\n"
    "single-column matrix-vector dispatches (what a batch replaces), the multi-column\n"
    "matrix-vector kernel (vkvector serve's batched decode) and the tiled matrix product:\n"
    "GPU time, weight bytes read per second and the speed-up over the N dispatches.";

/* One weight type at one M x K shape: a random matrix quantized to t, timed
 * on every matrix product path the device has for t. *best_gflops rises to
 * the fastest matrix-matrix figure. */
static vkv_status bench_matmul_shape(vkv_gpu *gpu, const device_peak *peak, vkv_rng *rng, vkv_dtype t, uint32_t m,
                                     uint32_t k, int64_t batch, int64_t reps, double *best_gflops)
{
    bench_operands o;
    vkv_status st = bench_operands_create(gpu, rng, t, m, k, (uint64_t)batch, &o);
    if (st) return st;
    vkv_matmul_path paths[3] = {VKV_MATMUL_MATVEC, VKV_MATMUL_TILED, VKV_MATMUL_COOPMAT};
    for (int p = 0; p < 3; p++) {
        if (!vkv_matmul_path_supported(gpu, paths[p], t)) continue;
        uint32_t n = paths[p] == VKV_MATMUL_MATVEC ? 1 : (uint32_t)batch;
        double best;
        if ((st = time_matmul(gpu, &o, paths[p], n, reps, &best))) goto done;
        double sec = best * 1e-9;
        double bytes = (double)o.w_bytes + 4.0 * n * k + 4.0 * n * m;
        double flops = 2.0 * m * k * n;
        const char *name = paths[p] == VKV_MATMUL_MATVEC ? "matvec" : paths[p] == VKV_MATMUL_TILED ? "matmul_tiled" : "matmul_coopmat";
        char mk[32];
        snprintf(mk, sizeof mk, "%ux%u", m, k);
        if (sec <= 0) {
            printf("%-15s %-5s %-14s %6u %10s\n", name, vkv_dtype_get(t)->name, mk, n, "n/a");
            continue;
        }
        double gbs = bytes / sec / 1e9, gfl = flops / sec / 1e9;
        if (n > 1 && gfl > *best_gflops) *best_gflops = gfl;
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
done:
    bench_operands_free(gpu, &o);
    return st;
}

/* The column counts of --small-batch: a batched decode step's sequences. */
static const uint32_t small_batch_cols[] = {2, 4, 8, 16};

/* --small-batch at one M x K shape of type t: for each N, the N single-column
 * matvec dispatches a batch replaces, the multi-column matvec (vkvector
 * serve's batched step) and the tiled matmul, each timed as the GPU time of
 * its dispatches (summed timestamps: the barriers between the N matvecs are
 * not counted). W GB/s: weight bytes read (N matrices for the N matvecs, one
 * for the others) per second. */
static vkv_status bench_small_batch_shape(vkv_gpu *gpu, vkv_rng *rng, vkv_dtype t, uint32_t m, uint32_t k, int64_t reps)
{
    bench_operands o;
    vkv_status st = bench_operands_create(gpu, rng, t, m, k, VKV_BATCH_MAX, &o);
    if (st) return st;
    const struct { vkv_matmul_path path; const char *name; } paths[] = {
        {VKV_MATMUL_MATVEC, "matvec x N"}, {VKV_MATMUL_MATVEC_COLS, "matvec_cols"}, {VKV_MATMUL_TILED, "matmul_tiled"}};
    char mk[32];
    snprintf(mk, sizeof mk, "%ux%u", m, k);
    for (size_t c = 0; c < CLI_N(small_batch_cols); c++) {
        const uint32_t n = small_batch_cols[c];
        double singles = 0;
        for (size_t p = 0; p < CLI_N(paths); p++) {
            double ns;
            if ((st = time_matmul(gpu, &o, paths[p].path, n, reps, &ns))) goto done;
            if (ns <= 0) {
                printf("%-15s %-5s %-14s %6u %10s\n", paths[p].name, vkv_dtype_get(t)->name, mk, n, "n/a");
                continue;
            }
            if (p == 0) singles = ns;
            const double reads = paths[p].path == VKV_MATMUL_MATVEC ? n : 1, gbs = reads * (double)o.w_bytes / ns;
            /* a CPU device's tiled matmul reads well under 0.1 GB/s here: three decimals keep it above 0 */
            printf("%-15s %-5s %-14s %6u %10.4f %9.*f %12.2fx\n", paths[p].name, vkv_dtype_get(t)->name, mk, n,
                   ns / 1e6, gbs < 1 ? 3 : 1, gbs, singles / ns);
        }
        fflush(stdout);
    }
done:
    bench_operands_free(gpu, &o);
    return st;
}

/* The --small-batch table: every shape and type (bench_small_batch_shape). */
static int bench_small_batch(vkv_gpu *gpu, vkv_rng *rng, const vkv_dtype *types, int n_types,
                             const uint32_t (*shapes)[2], int n_shapes, int64_t reps)
{
    printf("small batches: N columns as N single-column matvec dispatches (matvec x N: what a batch replaces),\n"
           "the multi-column matvec (matvec_cols: vkvector serve's batched decode) and the tiled matmul;\n"
           "GPU ms: the dispatches' summed GPU time; W GB/s: weight bytes read (N times by matvec x N, once\n"
           "by the others) per second; speed-up: matvec x N's time over the kernel's\n");
    printf("%-15s %-5s %-14s %6s %10s %9s %13s\n", "kernel", "type", "M x K", "N", "GPU ms", "W GB/s", "speed-up");
    vkv_status st = VKV_OK;
    for (int s = 0; s < n_shapes && !st; s++)
        for (int ti = 0; ti < n_types && !st; ti++)
            st = bench_small_batch_shape(gpu, rng, types[ti], shapes[s][0], shapes[s][1], reps);
    return st ? cli_fail("bench", st) : 0;
}

static int bench_ops(int argc, char **argv)
{
    int32_t device = cli_device_index_from_env();
    int64_t reps = 5, batch = 512;
    bool quick = false, batch_given = false, small_batch = false;
    const char *types_arg = "f16,q8_0,q4_0,q4_K";
    const cli_opt opts[] = {
        BENCH_REPS_OPTION(reps, "5"),
        {.type = CLI_I64, .names = "--batch", .metavar = "N", .dest = &batch, .min = 2, .max = 65536,
         .given = &batch_given, .help = "N of the matrix-matrix products and tokens of the Gram accumulation\n"
                                        "(default 512; 64 with --quick)"},
        {.type = CLI_STR, .names = "--types", .metavar = "LIST", .dest = &types_arg,
         .help = "weight types, comma-separated (default f16,q8_0,q4_0,q4_K)"},
        {.type = CLI_FLAG, .names = "--quick", .dest = &quick,
         .help = "small shapes (1024x1024, 2048x1024), for slow devices such as lavapipe"},
        {.type = CLI_FLAG, .names = "--small-batch", .dest = &small_batch,
         .help = "N = 2, 4, 8, 16 columns: N matrix-vector dispatches against the multi-column\n"
                 "matrix-vector kernel and the tiled matrix product (instead of the tables above)"},
        CLI_DEVICE_OPTION(device),
    };
    int parsed = cli_parse("bench ops", OPS_USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    if (small_batch && batch_given)
        return cli_usage_error("bench ops", "--batch does not apply to --small-batch (its N are 2, 4, 8 and 16)");
    vkv_dtype types[8];
    int n_types = 0;
    char tbuf[128];
    snprintf(tbuf, sizeof tbuf, "%s", types_arg);
    for (char *save, *tok = strtok_r(tbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int t = vkv_dtype_from_name(tok);
        if (t < 0 || n_types == 8) return cli_usage_error("bench ops", "unknown weight type '%s'", tok);
        types[n_types++] = (vkv_dtype)t;
    }
    const uint32_t shapes_full[3][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
    const uint32_t shapes_quick[2][2] = {{1024, 1024}, {2048, 1024}};
    const uint32_t(*shapes)[2] = quick ? shapes_quick : shapes_full;
    int n_shapes = quick ? 2 : 3;
    if (quick && !batch_given) batch = 64;

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
    vkv_rng rng = vkv_rng_new(7);
    if (small_batch) {
        int rc = bench_small_batch(gpu, &rng, types, n_types, shapes, n_shapes, reps);
        vkv_gpu_destroy(gpu);
        vkv_instance_destroy(inst);
        return rc;
    }
    printf("%-15s %-5s %-14s %6s %10s %9s %10s %8s\n", "kernel", "type", "M x K", "N", "GPU ms", "GB/s", "GFLOP/s",
           "of peak");
    double best_matmul_gflops = 0;
    for (int s = 0; s < n_shapes && !st; s++)
        for (int ti = 0; ti < n_types && !st; ti++)
            st = bench_matmul_shape(gpu, peak, &rng, types[ti], shapes[s][0], shapes[s][1], batch, reps,
                                    &best_matmul_gflops);
    int rc = st ? cli_fail("bench", st)
                : bench_gram(gpu, quick ? 4 : 8, quick ? 64 : 128, (uint32_t)batch, reps, best_matmul_gflops);
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

/* --profile: timestamps around every dispatch (vk/gpu.h) from here on when
 * `on`, per-kernel totals from zero. */
static void profile_start(vkv_gpu *gpu, bool on)
{
    vkv_gpu_set_profiling(gpu, on);
    vkv_gpu_reset_profile(gpu);
}

/* Adds the per-kernel GPU nanoseconds since profile_start to prof. */
static void profile_add(const vkv_gpu *gpu, double *prof)
{
    for (int k = 0; k < VKV_KERNEL_COUNT; k++) prof[k] += vkv_gpu_kernel_ns(gpu, (vkv_kernel)k);
}

/* The GPU time per kernel of one bench -m test (pp or tg) over its timed
 * runs, most expensive first: ms in all, share of the GPU total and us per
 * token (n_tokens: all tokens of the timed runs). */
static void print_kernel_profile(const char *test, const double *prof, double n_tokens, double wall_s)
{
    int order[VKV_KERNEL_COUNT], n = 0;
    double total = 0;
    for (int k = 0; k < VKV_KERNEL_COUNT; k++) {
        if (prof[k] <= 0) continue;
        total += prof[k];
        int i = n++;
        for (; i > 0 && prof[order[i - 1]] < prof[k]; i--) order[i] = order[i - 1];
        order[i] = k;
    }
    printf("\n%s: GPU time per kernel over the timed runs (%.0f tokens; wall %.1f ms)\n", test, n_tokens, 1e3 * wall_s);
    if (total <= 0) {
        printf("no GPU timestamps on this device: no per-kernel times\n");
        return;
    }
    printf("| kernel | ms | share | us/token |\n| --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++)
        printf("| %s | %.3f | %.1f%% | %.1f |\n", vkv_kernel_name((vkv_kernel)order[i]), 1e-6 * prof[order[i]],
               100.0 * prof[order[i]] / total, 1e-3 * prof[order[i]] / n_tokens);
    printf("| total | %.3f | 100.0%% | %.1f |\n", 1e-6 * total, 1e-3 * total / n_tokens);
}

/* Adds the host counters since the last reset (vk/gpu.h) to sum. */
static void host_stats_add(const vkv_gpu *gpu, vkv_host_stats *sum)
{
    const vkv_host_stats h = vkv_gpu_host_stats(gpu);
    sum->n_submits += h.n_submits;
    sum->n_dispatches += h.n_dispatches;
    sum->n_copies += h.n_copies;
    sum->record_ns += h.record_ns;
    sum->record_cpu_ns += h.record_cpu_ns;
    sum->submit_ns += h.submit_ns;
    sum->fence_wait_ns += h.fence_wait_ns;
    sum->n_sync_submits += h.n_sync_submits;
    sum->sync_ns += h.sync_ns;
}

/* Where the wall time of one bench -m test's timed runs went on the host,
 * per token (n_tokens: all tokens of the timed runs), and what each token
 * recorded. Other host: the wall time outside recording and fence waits. */
static void print_host_cost(const char *test, const vkv_host_stats *h, double n_tokens, double wall_s)
{
    const double us = 1e-3 / n_tokens, wall_ns = 1e9 * wall_s;
    printf("%s host: record+submit %.1f us/token (thread CPU %.1f; end+submit %.1f), fence wait %.1f us/token, "
           "other host %.1f us/token (wall %.1f us/token)\n",
           test, us * h->record_ns, us * h->record_cpu_ns, us * h->submit_ns, us * h->fence_wait_ns,
           us * (wall_ns - h->record_ns - h->fence_wait_ns), us * wall_ns);
    printf("%s recorded: %.2f submits/token, %.1f dispatches/token, %.2f copies/token; %.2f synchronous transfers/token "
           "(%.1f us/token, in other host)\n",
           test, h->n_submits / n_tokens, h->n_dispatches / n_tokens, h->n_copies / n_tokens,
           h->n_sync_submits / n_tokens, us * h->sync_ns);
}

/* llama-bench's two figures: pp (prompt processing: one batch of n_pp tokens)
 * and tg (text generation: n_tg tokens one at a time), tokens per second,
 * mean and standard deviation over reps runs after one warm-up. */
static const char *const MODEL_USAGE =
    "vkvector bench -m MODEL.gguf|DIR [-p 512] [-n 128] [--reps 3] [--kv-type " CLI_KV_TYPES "] [--profile]\n"
    "\n"
    "llama-bench's two figures: pp (prompt processing: one batch of -p tokens) and tg (text\n"
    "generation: -n tokens one at a time), in tokens per second, mean and standard deviation\n"
    "over the runs after one warm-up; then, per token of each, the host's time recording and\n"
    "submitting, waiting for the GPU's fence and otherwise, and the submits, dispatches and\n"
    "copies recorded. --profile adds the GPU time per kernel of each, summed over the timed runs.";

static int bench_model(int argc, char **argv)
{
    const char *path = NULL;
    int64_t n_pp = 512, n_tg = 128, reps = 3;
    bool profile = false;
    cli_model_opts mo; /* --kv-type, --k-type, --v-type and --device only */
    cli_model_opts_init(&mo);
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "-m|--model", .metavar = "PATH", .dest = &path, .help = "GGUF model or checkpoint folder"},
        {.type = CLI_I64, .names = "-p", .metavar = "N", .dest = &n_pp, .min = 0, .max = 1 << 20,
         .help = "pp: prompt tokens, processed as one batch (default 512; 0 = skip)"},
        {.type = CLI_I64, .names = "-n", .metavar = "N", .dest = &n_tg, .min = 0, .max = 1 << 20,
         .help = "tg: tokens generated one at a time (default 128; 0 = skip)"},
        BENCH_REPS_OPTION(reps, "3"),
        CLI_KV_TYPE_OPTIONS(mo),
        {.type = CLI_FLAG, .names = "--profile", .dest = &profile,
         .help = "GPU time per kernel of pp and of tg, summed over the timed runs (timestamps\n"
                 "around every dispatch: the tokens/s of a profiled run are not comparable)"},
        CLI_DEVICE_OPTION(mo.device),
    };
    int parsed = cli_parse("bench", MODEL_USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    vkv_session *s = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    vkv_status st;
    int rc = 1;
    vkv_session_params sp = {.model_path = path, .device = mo.device, .no_tokenizer = true, .cmd = "bench"};
    if ((st = vkv_session_open(&sp, &s))) goto fail;
    const vkv_model *m = s->model;
    vkv_gpu *gpu = s->gpu;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(n_pp + n_tg + 1), .n_batch = n_pp ? (uint32_t)n_pp : 1,
                         .k_type = cli_k_dtype(&mo), .v_type = cli_v_dtype(&mo)};
    if ((st = vkv_session_reserve(s, &cp))) goto fail;
    vkv_ctx *ctx = s->seq->ctx;
    ids = malloc(sizeof *ids * (size_t)(n_pp + 1));
    logits = malloc(sizeof *logits * m->hp.n_vocab);
    if (!ids || !logits) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    vkv_rng rng = vkv_rng_new(1);
    for (int64_t i = 0; i < n_pp + 1; i++) ids[i] = (int32_t)vkv_rng_below(&rng, m->hp.n_vocab);
    uint64_t params = m->n_params;
    printf("| model | size | params | backend | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: |\n");
    double prof[2][VKV_KERNEL_COUNT] = {{0}}, wall[2] = {0};
    vkv_host_stats host[2] = {{0}};
    for (int test = 0; test < 2; test++) {
        int64_t n = test == 0 ? n_pp : n_tg;
        if (!n) continue;
        double sum = 0, sum2 = 0;
        for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up */
            if ((st = vkv_ctx_reset(ctx))) goto fail;
            profile_start(gpu, profile && r >= 0);
            vkv_gpu_reset_host_stats(gpu);
            double t0 = now_s();
            if (test == 0) {
                if ((st = vkv_ctx_eval(ctx, ids, (uint32_t)n, false, logits))) goto fail;
            } else {
                for (int64_t i = 0; i < n; i++)
                    if ((st = vkv_ctx_eval(ctx, &ids[i % (n_pp + 1)], 1, false, logits))) goto fail;
            }
            double sec = now_s() - t0, tps = n / sec;
            if (r >= 0) { sum += tps; sum2 += tps * tps; wall[test] += sec; host_stats_add(gpu, &host[test]); }
            if (profile && r >= 0) profile_add(gpu, prof[test]);
        }
        vkv_gpu_set_profiling(gpu, false);
        double mean = sum / reps, sd = reps > 1 ? sqrt(fmax(0, (sum2 - reps * mean * mean) / (reps - 1))) : 0;
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        printf("| %s | %.2f MiB | %.2f M | Vulkan (%s) | %s%lld | %.2f ± %.2f |\n", name, m->weight_bytes / 1048576.0,
               params / 1e6, vkv_gpu_caps(gpu)->name, test == 0 ? "pp" : "tg", (long long)n, mean, sd);
        fflush(stdout);
    }
    char names[2][32];
    for (int test = 0; test < 2; test++)
        snprintf(names[test], sizeof names[test], "%s%lld", test == 0 ? "pp" : "tg", (long long)(test == 0 ? n_pp : n_tg));
    if (n_pp || n_tg) {
        printf("\nhost time per token over the timed runs%s:\n", profile ? " (with --profile's timestamps written and read)" : "");
        for (int test = 0; test < 2; test++) {
            int64_t n = test == 0 ? n_pp : n_tg;
            if (n) print_host_cost(names[test], &host[test], (double)(n * reps), wall[test]);
        }
        if (vkv_instance_validation_enabled(s->inst))
            printf("note: the validation layers are on; they check every command recorded, which inflates record+submit\n");
        printf("record+submit: wall time from the start of a recording to the return of vkQueueSubmit (the forward's\n"
               "host code between dispatches, command recording, the submit); in brackets the thread's CPU time over\n"
               "it and the wall time of vkEndCommandBuffer with vkQueueSubmit;\n"
               "fence wait: vkWaitForFences after the submit (the GPU's work, which starts at the submit);\n"
               "other host: the rest of the wall time (token ids and positions written, logits copied out,\n"
               "GPU timestamps read with --profile, synchronous transfers).\n");
    }
    for (int test = 0; test < 2 && profile; test++) {
        int64_t n = test == 0 ? n_pp : n_tg;
        if (n) print_kernel_profile(names[test], prof[test], (double)(n * reps), wall[test]);
    }
    /* The warm-up runs built every pipeline: the timed runs paid none. */
    printf("\n");
    cli_print_load_report(stdout, s->load_seconds, m->weight_bytes, gpu);
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
    vkv_session_close(s);
    return rc;
}

/* The serve scheduler's decoding step (vkv_ctx_eval_batch) at several batch
 * sizes: n contexts of one model share one set of activation buffers (a
 * scratch owner sized as the server's), each holds a prompt of --context
 * tokens, and every step appends one token to each. Wall time per step,
 * tokens per second over all sequences and the ratio to the single sequence;
 * the n prompts' prefill one at a time (vkv_ctx_eval) and in shared forwards
 * (vkv_ctx_eval_chunks, as the scheduler runs them); with --profile the GPU
 * time per kernel of a step (docs/SERVE.md, "Measuring"). */
static const char *const BATCH_USAGE =
    "vkvector bench batch [-m MODEL] [--seqs 1,4,16] [--context 32] [--steps 32] [--reps 3] [--profile]\n"
    "\n"
    "The batched decoding step of vkvector serve: wall time per step, tokens/s over all\n"
    "sequences and the ratio to one sequence, and the prefill of the sequences' prompts one\n"
    "at a time and batched (best of the runs after one warm-up).";

/* The prompts of ctx[0..n) (ids[0..n_prompt) each) prefilled from empty
 * caches as the serve scheduler does: chunks that fit one forward together
 * (vkv_ctx_chunks_fit), or, unbatched, one vkv_ctx_eval each. */
static vkv_status bench_prefill(vkv_ctx *const *ctx, uint32_t n, const int32_t *ids, uint32_t n_prompt, bool batched)
{
    vkv_status st;
    for (uint32_t i = 0; i < n; i++)
        if ((st = vkv_ctx_reset(ctx[i])) || (!batched && (st = vkv_ctx_eval(ctx[i], ids, n_prompt, false, NULL))))
            return st;
    if (!batched) return VKV_OK;
    const int32_t *chunk_ids[VKV_STEP_MAX];
    uint32_t n_tok[VKV_STEP_MAX];
    float *no_logits[VKV_STEP_MAX] = {0};
    for (uint32_t i = 0; i < n; i++) {
        chunk_ids[i] = ids;
        n_tok[i] = n_prompt;
    }
    for (uint32_t i = 0; i < n;) {
        const uint32_t k = vkv_ctx_chunks_fit(ctx[i], n_tok + i, n - i);
        if ((st = vkv_ctx_eval_chunks(ctx + i, chunk_ids + i, n_tok + i, k, no_logits))) return st;
        i += k;
    }
    return VKV_OK;
}

/* Parses "1,4,16" into at most BATCH_SIZES sizes, each 1..VKV_STEP_MAX. */
#define BATCH_SIZES 16
static bool parse_batch_sizes(const char *s, uint32_t *sizes, uint32_t *n)
{
    *n = 0;
    while (*s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > VKV_STEP_MAX || *n == BATCH_SIZES) return false;
        sizes[(*n)++] = (uint32_t)v;
        if (!*end) return true;
        if (*end != ',') return false;
        s = end + 1;
    }
    return false;
}

static int bench_batch(int argc, char **argv)
{
    const char *seqs_arg = "1,4,16";
    int64_t n_prompt = 32, n_steps = 32, reps = 3;
    bool profile = false;
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    const cli_opt opts[] = {
        CLI_MODEL_PATH_OPTION(mo.model_path),
        {.type = CLI_STR, .names = "--seqs", .metavar = "LIST", .dest = &seqs_arg,
         .help = "batch sizes, comma-separated, each 1..256 (default 1,4,16)"},
        {.type = CLI_I64, .names = "--context", .metavar = "N", .dest = &n_prompt, .min = 1, .max = 1 << 16,
         .help = "tokens in each sequence's cache before the timed steps (default 32)"},
        {.type = CLI_I64, .names = "--steps", .metavar = "N", .dest = &n_steps, .min = 1, .max = 1 << 16,
         .help = "timed steps per run (default 32)"},
        BENCH_REPS_OPTION(reps, "3"),
        {.type = CLI_FLAG, .names = "--profile", .dest = &profile,
         .help = "GPU time per kernel of a step (timestamps around every dispatch: wall times then differ)"},
        CLI_DEVICE_OPTION(mo.device),
    };
    int parsed = cli_parse("bench", BATCH_USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    uint32_t sizes[BATCH_SIZES], n_sizes = 0, max_seqs = 1;
    if (!parse_batch_sizes(seqs_arg, sizes, &n_sizes))
        return cli_usage_error("bench", "--seqs takes up to %u batch sizes 1..%u separated by commas, not '%s'",
                               BATCH_SIZES, VKV_STEP_MAX, seqs_arg);
    for (uint32_t z = 0; z < n_sizes; z++)
        if (sizes[z] > max_seqs) max_seqs = sizes[z];
    vkv_session *s = NULL;
    vkv_ctx *ctx[VKV_STEP_MAX] = {0}, *owner = NULL;
    int32_t *ids = NULL;
    vkv_status st;
    int rc = 1;
    vkv_session_params sp = {.model_path = mo.model_path, .device = mo.device, .no_tokenizer = true, .cmd = "bench"};
    if ((st = vkv_session_open(&sp, &s))) goto fail;
    const vkv_model *m = s->model;
    vkv_gpu *gpu = s->gpu;
    const uint32_t n_ctx = (uint32_t)(n_prompt + (reps + 1) * n_steps);
    ids = malloc(sizeof *ids * n_ctx);
    if (!ids) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    vkv_rng rng = vkv_rng_new(1);
    for (uint32_t i = 0; i < n_ctx; i++) ids[i] = (int32_t)vkv_rng_below(&rng, m->hp.n_vocab);
    /* the activation buffers: the server's default prefill chunk (512 rows),
     * or one whole prompt */
    const uint32_t owner_rows = n_prompt > 512 ? (uint32_t)n_prompt : 512;
    vkv_ctx_params op = {.n_ctx = owner_rows, .n_batch = owner_rows, .k_type = VKV_F16, .v_type = VKV_F16,
                         .step_seqs = max_seqs, .step_ctx = n_ctx};
    if ((st = vkv_ctx_create(gpu, m, &op, &owner))) goto fail;
    for (uint32_t i = 0; i < max_seqs; i++) {
        vkv_ctx_params cp = {.n_ctx = n_ctx, .n_batch = (uint32_t)n_prompt, .scratch_from = owner};
        if ((st = vkv_ctx_create(gpu, m, &cp, &ctx[i]))) goto fail;
    }
    printf("# the batched decoding step: %s on %s, %lld-token caches, %lld steps a run\n\n", mo.model_path,
           vkv_gpu_caps(gpu)->name, (long long)n_prompt, (long long)n_steps);
    printf("| sequences | ms a step | tokens/s | vs 1 sequence | prefill ms, one at a time | prefill ms, batched |%s\n"
           "| ---: | ---: | ---: | ---: | ---: | ---: |%s\n",
           profile ? " GPU ms a step |" : "", profile ? " ---: |" : "");
    double tps_one = 0;
    for (uint32_t z = 0; z < n_sizes; z++) {
        const uint32_t n = sizes[z];
        double best = 1e30, gpu_ns = 0, best_pf[2] = {1e30, 1e30};
        for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up (pipelines) */
            for (int batched = 0; batched < 2; batched++) { /* the batched prefill last: the steps follow it */
                double t0 = now_s();
                if ((st = bench_prefill(ctx, n, ids, (uint32_t)n_prompt, batched))) goto fail;
                double t = now_s() - t0;
                if (r >= 0 && t < best_pf[batched]) best_pf[batched] = t;
            }
            profile_start(gpu, profile && r == reps - 1);
            double t0 = now_s();
            for (int64_t k = 0; k < n_steps; k++) {
                int32_t step_ids[VKV_STEP_MAX];
                for (uint32_t i = 0; i < n; i++) step_ids[i] = ids[(n_prompt + k + i) % n_ctx];
                if ((st = vkv_ctx_eval_batch(ctx, step_ids, n, NULL))) goto fail;
            }
            double t = (now_s() - t0) / n_steps;
            if (r >= 0 && t < best) best = t;
            if (profile && r == reps - 1)
                for (int k = 0; k < VKV_KERNEL_COUNT; k++) gpu_ns += vkv_gpu_kernel_ns(gpu, (vkv_kernel)k);
        }
        vkv_gpu_set_profiling(gpu, false);
        const double tps = n / best;
        if (n == 1) tps_one = tps;
        printf("| %u | %.2f | %.1f | ", n, 1e3 * best, tps);
        if (tps_one > 0) printf("%.2fx |", tps / tps_one);
        else printf("- |");
        printf(" %.1f | %.1f |", 1e3 * best_pf[0], 1e3 * best_pf[1]);
        if (profile) printf(" %.2f |", 1e-6 * gpu_ns / n_steps);
        printf("\n");
        if (profile) {
            for (int k = 0; k < VKV_KERNEL_COUNT; k++) {
                double ns = vkv_gpu_kernel_ns(gpu, (vkv_kernel)k);
                if (ns > 0) printf("|   %s | %.3f ms | | | | |\n", vkv_kernel_name((vkv_kernel)k), 1e-6 * ns / n_steps);
            }
        }
        fflush(stdout);
    }
    rc = 0;
    goto out;
fail:
    rc = cli_fail("bench", st);
out:
    for (uint32_t i = VKV_STEP_MAX; i-- > 0;) vkv_ctx_free(ctx[i]);
    vkv_ctx_free(owner);
    free(ids);
    vkv_session_close(s);
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
    profile_start(gpu, prof != NULL);
    double t0 = now_s();
    for (int64_t i = 0; i < n_decode && !st; i++) st = vkv_ctx_eval(ctx, &ids[i], 1, false, NULL);
    *seconds += now_s() - t0;
    if (prof) {
        profile_add(gpu, prof);
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
static const char *const VECTOR_USAGE =
    "vkvector bench vector [-m MODEL] [--context 8192] [--press keydiff] [--compression 0.5]\n"
    "                             [--vector [--calib FILE]] [--decode 64] [--reps 3] [--profile]\n"
    "\n"
    "Times the compression step (scoring, allocation, compaction) against the prefill it follows,\n"
    "and decode over the compressed (tiered) cache against decode over a plain cache of as many\n"
    "bytes (and, with --vector, one of as many tokens as the tiered cache attends to).";

typedef struct vector_bench {
    cli_model_opts mo; /* -m and --device only */
    cli_press_opts po; /* --press, --compression, --vector and --calib only */
    int64_t n, n_decode, reps;
    bool profile;
} vector_bench;

/* What the timed runs measured (sums over them) and what they kept. */
typedef struct vector_timing {
    double prefill, compress, dec_tiered, dec_plain, dec_same_tokens;
    uint32_t kept, attended;          /* the plain and the same-token plain caches' tokens */
    uint64_t tiered_rows;             /* K plus V rows of the compressed cache, all layers and KV heads */
    double prof[3][VKV_KERNEL_COUNT]; /* --profile: GPU ns per kernel of the tiered, plain, same-token decodes */
} vector_timing;

static int parse_vector_bench(int argc, char **argv, vector_bench *o)
{
    *o = (vector_bench){.n = 8192, .n_decode = 64, .reps = 3};
    cli_model_opts_init(&o->mo);
    cli_press_opts_init(&o->po);
    o->po.press = "keydiff";
    o->po.compression_ratio = 0.5;
    const cli_opt opts[] = {
        CLI_MODEL_PATH_OPTION(o->mo.model_path),
        {.type = CLI_I64, .names = "--context", .metavar = "N", .dest = &o->n, .min = 64, .max = 1 << 20,
         .help = "context tokens, prefilled then compressed (default 8192)"},
        {.type = CLI_STR, .names = "--press", .metavar = "NAME", .dest = &o->po.press,
         .help = "importance scorer (default keydiff)"},
        {.type = CLI_F64, .names = "--compression", .metavar = "P", .dest = &o->po.compression_ratio, .min = 0,
         .max = 1, .flags = CLI_MIN_EXCLUSIVE | CLI_MAX_EXCLUSIVE, .help = "compression ratio p_c (default 0.5)"},
        {.type = CLI_FLAG, .names = "--vector", .dest = &o->po.vector,
         .help = "VECTOR's approximate tier (default: the eviction baseline)"},
        {.type = CLI_STR, .names = "--calib", .metavar = "FILE", .dest = &o->po.calib,
         .help = "calibration (default: MODEL.vkcal beside the model)"},
        {.type = CLI_I64, .names = "--decode", .metavar = "N", .dest = &o->n_decode, .min = 1, .max = 1 << 16,
         .help = "decode steps timed on each cache (default 64)"},
        BENCH_REPS_OPTION(o->reps, "3"),
        {.type = CLI_FLAG, .names = "--profile", .dest = &o->profile,
         .help = "GPU time per kernel of each decode step (timestamps around every\n"
                 "dispatch: the wall-clock figures of a profiled run are not comparable)"},
        CLI_DEVICE_OPTION(o->mo.device),
    };
    return cli_parse("bench vector", VECTOR_USAGE, opts, CLI_N(opts), argc, argv);
}

static void print_vector_timing(const vector_bench *o, const vkv_press_ops *press, const vkv_gpu *gpu,
                                const vkv_model *m, const vector_timing *t, bool same_tokens)
{
    const char *path = o->mo.model_path, *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const int64_t n = o->n, n_decode = o->n_decode, reps = o->reps;
    const char *method = o->po.vector ? " VECTOR" : " (eviction baseline)";
    printf("model %s on %s; %s p_c %.2f%s; context %lld tokens, %u kept; %lld decode steps; mean of %lld runs\n", name,
           vkv_gpu_caps(gpu)->name, press->name, o->po.compression_ratio, method, (long long)n, t->kept,
           (long long)n_decode, (long long)reps);
    printf("prefill                        %9.1f ms  (%.1f tokens/s)\n", 1e3 * t->prefill / reps,
           n * reps / t->prefill);
    printf("score + allocate + compact     %9.1f ms  = %.1f%% of the prefill (target < 10%%)\n",
           1e3 * t->compress / reps, 100 * t->compress / t->prefill);
    printf("decode, compressed (tiered)    %9.2f tokens/s\n", n_decode * reps / t->dec_tiered);
    printf("decode, plain cache of %u      %9.2f tokens/s\n", t->kept, n_decode * reps / t->dec_plain);
    printf("decode ratio tiered / plain    %9.3f  (target >= 0.95)\n", t->dec_plain / t->dec_tiered);
    /* What a bandwidth-bound device pays: the cached rows each decode step
     * reads (the tokens decoded since are left out: both caches have them). */
    const uint64_t row_bytes = 2ull * m->hp.head_dim, plain_rows = 2ull * t->kept * m->hp.n_layer * m->hp.n_head_kv;
    printf("KV bytes read per decode step  %9.2f MiB tiered, %.2f MiB plain (ratio %.3f)\n",
           (double)(t->tiered_rows * row_bytes) / (1 << 20), (double)(plain_rows * row_bytes) / (1 << 20),
           (double)t->tiered_rows / (double)plain_rows);
    if (same_tokens) {
        /* The tiered cache holds `kept` full pairs' bytes but attends to r + a
         * keys; this isolates the cost of the fused path from that of the
         * extra keys. */
        printf("decode, plain cache of %u      %9.2f tokens/s  (as many tokens as the tiered cache attends to)\n",
               t->attended, n_decode * reps / t->dec_same_tokens);
        printf("decode ratio tiered / same-token plain %6.3f\n", t->dec_same_tokens / t->dec_tiered);
    }
    if (o->profile)
        print_decode_profile((const double *const[3]){t->prof[0], t->prof[1], t->prof[2]}, same_tokens ? 3 : 2,
                             (double)(n_decode * reps));
}

static int bench_vector(int argc, char **argv)
{
    vector_bench o;
    int parsed = parse_vector_bench(argc, argv, &o);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    const int64_t n = o.n, n_decode = o.n_decode, reps = o.reps;
    const bool vector = o.po.vector;
    const vkv_press_ops *press = vkv_press_find(o.po.press);
    if (!press) return cli_usage_error("bench vector", "%s", vkv_last_error());
    vkv_session *s = NULL;
    vkv_ctx *plain = NULL, *same_tokens = NULL;
    int32_t *ids = NULL;
    vkv_status st;
    int rc = 1;
    vkv_session_params sp = {.model_path = o.mo.model_path, .device = o.mo.device, .no_tokenizer = !press->repeat_pass,
                             .load_calib = vector, .calib_path = o.po.calib, .cmd = "bench"};
    if ((st = vkv_session_open(&sp, &s))) goto fail;
    const vkv_model *m = s->model;
    vkv_compression c;
    cli_press_compression(&o.po, press, true, &c);
    c.lean = true;
    uint32_t kept = vkv_kv_n_kept(c.compression_ratio, (uint32_t)n), room; /* room: KVzip's reconstruction passes */
    if ((st = vkv_session_press_room(s, &c, (uint32_t)n, &room))) goto fail;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(n + n_decode + 1) + room, .n_batch = 512, .k_type = VKV_F16, .v_type = VKV_F16};
    vkv_ctx_params pp = {.n_ctx = (uint32_t)(kept + n_decode + 1), .n_batch = 512, .k_type = VKV_F16, .v_type = VKV_F16};
    /* VECTOR attends to more tokens than it holds full pairs for: the third
     * cache holds as many tokens as the tiered one attends to (r + a). */
    vkv_ctx_params tp = {.n_ctx = (uint32_t)(n + n_decode + 1), .n_batch = 512, .k_type = VKV_F16, .v_type = VKV_F16};
    if ((st = vkv_session_reserve(s, &cp)) || (st = vkv_ctx_create(s->gpu, m, &pp, &plain)) ||
        (vector && (st = vkv_ctx_create(s->gpu, m, &tp, &same_tokens))))
        goto fail;
    if (!(ids = malloc(sizeof *ids * (size_t)(n + n_decode)))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    vkv_rng rng = vkv_rng_new(3);
    for (int64_t i = 0; i < n + n_decode; i++) ids[i] = (int32_t)vkv_rng_below(&rng, m->hp.n_vocab);
    vector_timing t = {.kept = kept, .attended = kept};
    const vkv_prompt context = {.ids = ids, .n = (size_t)n, .n_context = (size_t)n};
    for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up */
        vkv_prefill pf;
        if ((st = vkv_session_prefill(s, &c, &context, VKV_LOGITS_NONE, NULL, &pf))) goto fail;
        t.attended = 0;
        t.tiered_rows = 0;
        const vkv_vector_report *rep = &pf.report;
        for (uint32_t i = 0; i < rep->n_layer * rep->n_kv_head; i++) {
            if (rep->n_ret[i] + rep->n_apx[i] > t.attended) t.attended = rep->n_ret[i] + rep->n_apx[i];
            t.tiered_rows += 2ull * rep->n_ret[i] + rep->n_apx[i];
        }
        if (r >= 0) {
            t.prefill += pf.prefill_s;
            t.compress += pf.compress_s;
        }
        vkv_prefill_free(&pf);
        /* The warm-up run (r = -1) is timed into a scratch total. */
        const bool timed = r >= 0, prof = o.profile && timed;
        double warm = 0;
        if ((st = timed_decode(s->gpu, s->seq->ctx, &ids[n], n_decode, timed ? &t.dec_tiered : &warm,
                               prof ? t.prof[0] : NULL)) ||
            (st = vkv_ctx_reset(plain)) || (st = vkv_ctx_eval(plain, ids, kept, false, NULL)) ||
            (st = timed_decode(s->gpu, plain, &ids[n], n_decode, timed ? &t.dec_plain : &warm, prof ? t.prof[1] : NULL)))
            goto fail;
        if (same_tokens &&
            ((st = vkv_ctx_reset(same_tokens)) || (st = vkv_ctx_eval(same_tokens, ids, t.attended, false, NULL)) ||
             (st = timed_decode(s->gpu, same_tokens, &ids[n], n_decode, timed ? &t.dec_same_tokens : &warm,
                                prof ? t.prof[2] : NULL))))
            goto fail;
    }
    print_vector_timing(&o, press, s->gpu, m, &t, same_tokens != NULL);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("bench", st);
out:
    free(ids);
    vkv_ctx_free(plain);
    vkv_ctx_free(same_tokens);
    vkv_session_close(s);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    /* argv[1] picks the benchmark, which parses what follows it (bench -m
     * keeps -m: it is bench model's first option). */
    const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        int skip;
        const char *usage, *summary;
    } benchmarks[] = {
        {"ops", bench_ops, 1, OPS_USAGE, "kernel throughput (see 'vkvector bench ops --help')"},
        {"-m", bench_model, 0, MODEL_USAGE, "llama-bench-style pp / tg tokens per second"},
        {"--model", bench_model, 0, NULL, NULL},
        {"vector", bench_vector, 1, VECTOR_USAGE, "compression cost vs prefill; tiered vs plain decode"},
        {"batch", bench_batch, 1, BATCH_USAGE, "vkvector serve's batched decoding step at several batch sizes"},
    };
    const char *which = argc >= 2 ? argv[1] : "";
    for (size_t i = 0; i < CLI_N(benchmarks); i++) {
        const int skip = benchmarks[i].skip;
        if (!strcmp(which, benchmarks[i].name)) return benchmarks[i].fn(argc - skip, argv + skip);
    }
    if (strcmp(which, "--help") && strcmp(which, "-h"))
        return cli_usage_error("bench", "unknown benchmark '%s' (available: ops, vector, batch, -m MODEL)", which);
    /* Each benchmark's synopsis: its usage up to the blank line. */
    for (size_t i = 0, shown = 0; i < CLI_N(benchmarks); i++) {
        const char *u = benchmarks[i].usage, *end = u ? strstr(u, "\n\n") : NULL;
        if (!u) continue;
        int synopsis_len = (int)(end ? (size_t)(end - u) : strlen(u));
        printf("%s%.*s\n           %s\n", shown++ ? "       " : "usage: ", synopsis_len, u, benchmarks[i].summary);
    }
    printf("\n'vkvector bench ops --help', 'bench -m MODEL --help', 'bench vector --help' and 'bench batch --help'\n"
           "describe their options.\n");
    return 0;
}
