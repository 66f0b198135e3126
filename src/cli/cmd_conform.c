/* vkvector conform: every GPU op on every Vulkan device against its scalar CPU
 * reference, the way ggml's test-backend-ops does it: random inputs in
 * [-1, 1], NMSE = sum (gpu - ref)^2 / sum ref^2 under a per-op threshold, any
 * NaN/Inf mismatch fails, and guard zones before and after every output catch
 * out-of-bounds writes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/json_write.h"
#include "core/rng.h"
#include "ref/ref_attn.h"
#include "ref/ref_ops.h"
#include "calib/calib.h"
#include "vk/ops.h"
#include "vk/ops_attn.h"
#include "vk/ops_vector.h"
#include "ref/ref_vector.h"
#include "ref/ref_select.h"
#include "press/press.h"
#include "press/select.h"

/* Thresholds (NMSE). Ops computed in f32 on both sides differ only by
 * accumulation order: 1e-7 as in test-backend-ops. The cooperative-matrix path
 * rounds activations and weights to f16: 5e-4 as ggml allows for f16 matmul.
 * RoPE angles are pos * inv_freq in f32 on the GPU (range-reduced before
 * sin/cos) and double in the reference; lavapipe measures ~5e-10 at positions
 * up to 4096, so the f32 threshold holds. */
#define NMSE_F32 1e-7
#define NMSE_EXACT 0.0
#define NMSE_COOPMAT 5e-4

#define GUARD_WORD 0xA5C3E1F7u

typedef struct conform_result {
    char op[32], type[16], shape[96], note[96];
    double nmse, threshold, gpu_ms;
    bool pass, skipped;
} conform_result;

typedef struct conform_ctx {
    vkv_gpu *gpu;
    const vkv_caps *caps;
    vkv_rng rng;
    uint64_t guard_bytes; /* before and after each output: a multiple of the alignment */
    conform_result *results;
    size_t n_results, cap_results;
    const char *filter; /* only ops whose name contains this */
    bool big;           /* include the >128 MiB weight cases */
    vkv_status fatal;   /* a Vulkan failure stops the device's run */
} conform_ctx;

/* Makes room for k more results, so that the pointers new_result hands out
 * stay valid while a case fills several of them. */
static bool reserve_results(conform_ctx *c, size_t k)
{
    if (c->n_results + k <= c->cap_results) return true;
    size_t cap = c->cap_results ? c->cap_results : 64;
    while (cap < c->n_results + k) cap *= 2;
    conform_result *r = realloc(c->results, cap * sizeof *r);
    if (!r) return false;
    c->results = r;
    c->cap_results = cap;
    return true;
}

static conform_result *new_result(conform_ctx *c, const char *op, const char *type, const char *shape)
{
    if (c->n_results == c->cap_results) {
        size_t cap = c->cap_results ? c->cap_results * 2 : 64;
        conform_result *r = realloc(c->results, cap * sizeof *r);
        if (!r) return NULL;
        c->results = r;
        c->cap_results = cap;
    }
    conform_result *r = &c->results[c->n_results++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->type, sizeof r->type, "%s", type);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    return r;
}

static float *random_f32(conform_ctx *c, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p)
        for (size_t i = 0; i < n; i++) p[i] = vkv_rng_uniform(&c->rng, -1.0f, 1.0f);
    return p;
}

/* A GPU buffer holding `bytes` of data between two guard zones. */
typedef struct guarded {
    vkv_buffer *buf;
    uint64_t bytes;
    vkv_view view;
} guarded;

static vkv_status guarded_create(conform_ctx *c, uint64_t bytes, const void *init, guarded *g)
{
    vkv_status st;
    g->bytes = bytes;
    uint64_t total = c->guard_bytes * 2 + ((bytes + 15) & ~15ull);
    if ((st = vkv_buffer_create(c->gpu, total, VKV_MEM_DEVICE, "a conformance tensor", &g->buf))) return st;
    g->view = (vkv_view){g->buf, c->guard_bytes};
    if ((st = vkv_buffer_fill(c->gpu, g->buf, 0, vkv_buffer_size(g->buf), GUARD_WORD))) return st;
    if (init && bytes) return vkv_buffer_upload(c->gpu, g->buf, c->guard_bytes, init, bytes);
    return VKV_OK;
}

/* Downloads the data and checks the guard words around it. */
static vkv_status guarded_read(conform_ctx *c, guarded *g, void *out, bool *guards_ok)
{
    uint64_t total = vkv_buffer_size(g->buf);
    uint8_t *all = malloc(total);
    if (!all) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = vkv_buffer_download(c->gpu, g->buf, 0, all, total);
    if (!st) {
        memcpy(out, all + c->guard_bytes, g->bytes);
        *guards_ok = true;
        for (uint64_t i = 0; i < total; i += 4) {
            if (i >= c->guard_bytes && i < c->guard_bytes + g->bytes) continue;
            /* Bytes between the data's end and the next word are padding. */
            if (i >= c->guard_bytes + (g->bytes & ~3ull) && i < c->guard_bytes + ((g->bytes + 3) & ~3ull)) continue;
            uint32_t w;
            memcpy(&w, all + i, 4);
            if (w != GUARD_WORD) *guards_ok = false;
        }
    }
    free(all);
    return st;
}

static void guarded_destroy(conform_ctx *c, guarded *g)
{
    vkv_buffer_destroy(c->gpu, g->buf);
    g->buf = NULL;
}

/* NMSE of gpu against ref; nan_mismatch when one side is non-finite where the
 * other is not. */
static double nmse_f32(const float *ref, const float *gpu, size_t n, bool *nan_mismatch)
{
    double num = 0, den = 0;
    *nan_mismatch = false;
    for (size_t i = 0; i < n; i++) {
        bool rf = isfinite(ref[i]), gf = isfinite(gpu[i]);
        if (rf != gf) *nan_mismatch = true;
        if (!rf || !gf) continue;
        double d = (double)gpu[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static void finish(conform_result *r, double nmse, bool nan_mismatch, bool guards_ok, double threshold, double ms)
{
    r->nmse = nmse;
    r->threshold = threshold;
    r->gpu_ms = ms;
    r->pass = !nan_mismatch && guards_ok && nmse <= threshold;
    if (nan_mismatch) snprintf(r->note, sizeof r->note, "NaN/Inf mismatch");
    else if (!guards_ok) snprintf(r->note, sizeof r->note, "write outside the output (guard zone changed)");
}

static vkv_status run_recorded(conform_ctx *c, vkv_status (*rec)(conform_ctx *, void *), void *arg, double *ms)
{
    vkv_status st;
    if ((st = vkv_cmd_begin(c->gpu))) return st;
    st = rec(c, arg);
    if (st) {
        /* Close the recording so the device stays usable; the op's error wins. */
        vkv_status msg_st = st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkv_last_error());
        vkv_cmd_submit(c->gpu);
        return vkv_error(msg_st, "%s", msg);
    }
    if ((st = vkv_cmd_submit(c->gpu))) return st;
    *ms = vkv_gpu_last_submit_ns(c->gpu) / 1e6;
    return VKV_OK;
}

/* ---------------- get_rows ---------------- */

typedef struct { vkv_dtype t; guarded table, ids, out; uint64_t n_rows; uint32_t n_cols, n_ids; } get_rows_args;

static vkv_status rec_get_rows(conform_ctx *c, void *p)
{
    get_rows_args *a = p;
    return vkv_op_get_rows(c->gpu, a->t, a->table.view, a->n_rows, a->n_cols, a->ids.view, a->n_ids, a->out.view);
}

static vkv_status case_get_rows(conform_ctx *c, vkv_dtype t, uint64_t n_rows, uint32_t n_cols, uint32_t n_ids)
{
    char shape[96];
    snprintf(shape, sizeof shape, "table %llux%u, %u ids", (unsigned long long)n_rows, n_cols, n_ids);
    conform_result *r = new_result(c, "get_rows", vkv_dtype_get(t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t rb = vkv_dtype_row_bytes(t, n_cols);
    float *src = random_f32(c, (size_t)n_rows * n_cols);
    uint8_t *table = malloc(rb * n_rows);
    int32_t *ids = malloc(n_ids * sizeof *ids);
    float *ref = malloc((size_t)n_ids * n_cols * 4), *got = malloc((size_t)n_ids * n_cols * 4);
    get_rows_args a = {.t = t, .n_rows = n_rows, .n_cols = n_cols, .n_ids = n_ids};
    vkv_status st = VKV_OK;
    if (!src || !table || !ids || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint64_t i = 0; i < n_rows; i++) vkv_quantize_row(t, src + i * n_cols, table + i * rb, n_cols);
    for (uint32_t i = 0; i < n_ids; i++)
        ids[i] = i == 0 ? 0 : i == 1 ? (int32_t)(n_rows - 1) : (int32_t)vkv_rng_below(&c->rng, (uint32_t)n_rows);
    vkv_ref_get_rows(t, table, n_cols, ids, n_ids, ref);
    if ((st = guarded_create(c, rb * n_rows, table, &a.table)) || (st = guarded_create(c, 4ull * n_ids, ids, &a.ids)) ||
        (st = guarded_create(c, 4ull * n_ids * n_cols, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_get_rows, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, (size_t)n_ids * n_cols, &nanm);
    finish(r, err, nanm, guards, NMSE_EXACT, ms);
done:
    guarded_destroy(c, &a.table);
    guarded_destroy(c, &a.ids);
    guarded_destroy(c, &a.out);
    free(src); free(table); free(ids); free(ref); free(got);
    return st;
}

/* ---------------- rms_norm ---------------- */

typedef struct { guarded x, w, out; uint32_t rows, n; bool weight; } rms_args;

static vkv_status rec_rms(conform_ctx *c, void *p)
{
    rms_args *a = p;
    vkv_view w = a->weight ? a->w.view : (vkv_view){0};
    return vkv_op_rms_norm(c->gpu, a->x.view, w, a->rows, a->n, 1e-5f, a->out.view);
}

static vkv_status case_rms_norm(conform_ctx *c, uint32_t rows, uint32_t n, bool weight, const char *what)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u%s%s", rows, n, weight ? "" : " no weight", what);
    conform_result *r = new_result(c, "rms_norm", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = random_f32(c, sz), *w = random_f32(c, n), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    rms_args a = {.rows = rows, .n = n, .weight = weight};
    vkv_status st = VKV_OK;
    if (!x || !w || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_rms_norm(x, weight ? w : NULL, rows, n, 1e-5f, ref);
    if ((st = guarded_create(c, sz * 4, x, &a.x)) || (st = guarded_create(c, 4ull * n, w, &a.w)) ||
        (st = guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_rms, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, sz, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.x); guarded_destroy(c, &a.w); guarded_destroy(c, &a.out);
    free(x); free(w); free(ref); free(got);
    return st;
}

/* ---------------- matmul (matvec, tiled, coopmat) ---------------- */

typedef struct { vkv_dtype t; vkv_matmul_path path; guarded w, x, y; uint32_t m, k, n; } mm_args;

static vkv_status rec_mm(conform_ctx *c, void *p)
{
    mm_args *a = p;
    return vkv_op_matmul(c->gpu, a->path, a->t, a->w.view, a->m, a->k, a->x.view, a->n, a->y.view);
}

static const char *path_name(vkv_matmul_path p)
{
    return p == VKV_MATMUL_MATVEC ? "matvec" : p == VKV_MATMUL_COOPMAT ? "matmul_coopmat" : "matmul_tiled";
}

static vkv_status case_matmul(conform_ctx *c, vkv_matmul_path path, vkv_dtype t, uint32_t m, uint32_t k, uint32_t n)
{
    char shape[96];
    size_t rb = vkv_dtype_row_bytes(t, k);
    snprintf(shape, sizeof shape, "W %ux%u (%.1f MiB) x %u", m, k, rb * (double)m / 1048576.0, n);
    conform_result *r = new_result(c, path_name(path), vkv_dtype_get(t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!vkv_matmul_path_supported(c->gpu, path, t)) {
        r->skipped = r->pass = true;
        snprintf(r->note, sizeof r->note, "no cooperative matrix support on this device");
        return VKV_OK;
    }
    uint8_t *w = malloc(rb * m);
    float *row = malloc((size_t)k * 4), *x = random_f32(c, (size_t)n * k);
    float *ref = malloc((size_t)n * m * 4), *got = malloc((size_t)n * m * 4);
    mm_args a = {.t = t, .path = path, .m = m, .k = k, .n = n};
    vkv_status st = VKV_OK;
    if (!w || !row || !x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t i = 0; i < m; i++) {
        for (uint32_t j = 0; j < k; j++) row[j] = vkv_rng_uniform(&c->rng, -1.0f, 1.0f);
        vkv_quantize_row(t, row, w + (size_t)i * rb, k);
    }
    vkv_ref_matmul(t, w, m, k, x, n, ref);
    if ((st = guarded_create(c, rb * m, w, &a.w)) || (st = guarded_create(c, 4ull * n * k, x, &a.x)) ||
        (st = guarded_create(c, 4ull * n * m, NULL, &a.y)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_mm, &a, &ms)) || (st = guarded_read(c, &a.y, got, &guards))) goto done;
    double err = nmse_f32(ref, got, (size_t)n * m, &nanm);
    finish(r, err, nanm, guards,
           path == VKV_MATMUL_COOPMAT ? NMSE_COOPMAT : NMSE_F32, ms);
done:
    guarded_destroy(c, &a.w); guarded_destroy(c, &a.x); guarded_destroy(c, &a.y);
    free(w); free(row); free(x); free(ref); free(got);
    return st;
}

/* ---------------- rope ---------------- */

typedef struct { vkv_rope_params p; guarded x, pos, freq, out; uint32_t n_tok, n_heads; } rope_args;

static vkv_status rec_rope(conform_ctx *c, void *p)
{
    rope_args *a = p;
    return vkv_op_rope(c->gpu, &a->p, a->x.view, a->n_tok, a->n_heads, a->pos.view, a->freq.view, a->out.view);
}

static vkv_status case_rope(conform_ctx *c, vkv_rope_mode mode, bool inverse, uint32_t head_dim, uint32_t n_rot,
                            float base, bool llama3, uint32_t n_tok, uint32_t n_heads, int32_t max_pos)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%s%s %ux%ux%u rot %u base %g%s pos<%d", mode == VKV_ROPE_NEOX ? "neox" : "interleaved",
             inverse ? " inverse" : "", n_tok, n_heads, head_dim, n_rot, base, llama3 ? " llama3" : "", max_pos);
    conform_result *r = new_result(c, "rope", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)n_tok * n_heads * head_dim;
    float *x = random_f32(c, sz), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    float factors[512], inv_freq[512];
    int32_t *pos = malloc(n_tok * sizeof *pos);
    rope_args a = {.n_tok = n_tok, .n_heads = n_heads};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got || !pos) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if (llama3) vkv_rope_llama3_factors(n_rot, base, 8.0f, 1.0f, 4.0f, 8192, factors);
    a.p = (vkv_rope_params){mode, head_dim, n_rot, base, 1.0f, llama3 ? factors : NULL, inverse};
    for (uint32_t i = 0; i < n_tok; i++) pos[i] = i == 0 ? 0 : (int32_t)vkv_rng_below(&c->rng, (uint32_t)max_pos);
    vkv_ref_rope(&a.p, x, n_tok, n_heads, pos, ref);
    vkv_rope_inv_freq(&a.p, inv_freq);
    if ((st = guarded_create(c, sz * 4, x, &a.x)) || (st = guarded_create(c, 4ull * n_tok, pos, &a.pos)) ||
        (st = guarded_create(c, 4ull * (n_rot / 2), inv_freq, &a.freq)) || (st = guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_rope, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, sz, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.x); guarded_destroy(c, &a.pos); guarded_destroy(c, &a.freq); guarded_destroy(c, &a.out);
    free(x); free(ref); free(got); free(pos);
    return st;
}

/* ---------------- softmax ---------------- */

typedef struct { guarded x, out; uint32_t rows, cols; float scale; bool causal; int32_t off; } softmax_args;

static vkv_status rec_softmax(conform_ctx *c, void *p)
{
    softmax_args *a = p;
    return vkv_op_softmax(c->gpu, a->x.view, a->rows, a->cols, a->scale, a->causal, a->off, a->out.view);
}

static vkv_status case_softmax(conform_ctx *c, uint32_t rows, uint32_t cols, float scale, bool causal, int32_t off)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u scale %g%s", rows, cols, scale, causal ? " causal" : "");
    if (causal) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " offset %d", off);
    conform_result *r = new_result(c, "softmax", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * cols;
    float *x = random_f32(c, sz), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    softmax_args a = {.rows = rows, .cols = cols, .scale = scale, .causal = causal, .off = off};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < sz; i++) x[i] *= 8.0f; /* logits of a realistic spread */
    vkv_ref_softmax(x, rows, cols, scale, causal, off, ref);
    if ((st = guarded_create(c, sz * 4, x, &a.x)) || (st = guarded_create(c, sz * 4, NULL, &a.out))) goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_softmax, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, sz, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.x); guarded_destroy(c, &a.out);
    free(x); free(ref); free(got);
    return st;
}

/* ---------------- silu_mul, add ---------------- */

typedef struct { bool silu; guarded a, b, out; uint32_t n; } ew_args;

static vkv_status rec_ew(conform_ctx *c, void *p)
{
    ew_args *a = p;
    return a->silu ? vkv_op_silu_mul(c->gpu, a->a.view, a->b.view, a->n, a->out.view)
                   : vkv_op_add(c->gpu, a->a.view, a->b.view, a->n, a->out.view);
}

static vkv_status case_elementwise(conform_ctx *c, bool silu, uint32_t n)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u", n);
    conform_result *r = new_result(c, silu ? "silu_mul" : "add", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    float *x = random_f32(c, n), *y = random_f32(c, n), *ref = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    ew_args a = {.silu = silu, .n = n};
    vkv_status st = VKV_OK;
    if (!x || !y || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if (silu) {
        for (uint32_t i = 0; i < n; i++) x[i] *= 6.0f; /* gates span the curved part of silu */
        vkv_ref_silu_mul(x, y, n, ref);
    } else {
        vkv_ref_add(x, y, n, ref);
    }
    if ((st = guarded_create(c, 4ull * n, x, &a.a)) || (st = guarded_create(c, 4ull * n, y, &a.b)) ||
        (st = guarded_create(c, 4ull * n, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_ew, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, n, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.a); guarded_destroy(c, &a.b); guarded_destroy(c, &a.out);
    free(x); free(y); free(ref); free(got);
    return st;
}

/* ---------------- argmax ---------------- */

typedef struct { guarded x, out; uint32_t rows, n; } argmax_args;

static vkv_status rec_argmax(conform_ctx *c, void *p)
{
    argmax_args *a = p;
    return vkv_op_argmax(c->gpu, a->x.view, a->rows, a->n, a->out.view);
}

static vkv_status case_argmax(conform_ctx *c, uint32_t rows, uint32_t n, bool ties)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u%s", rows, n, ties ? " with ties" : "");
    conform_result *r = new_result(c, "argmax", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = random_f32(c, sz);
    uint32_t *ref = malloc(rows * 4ull), *got = malloc(rows * 4ull);
    argmax_args a = {.rows = rows, .n = n};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if (ties) /* coarse values: many equal maxima per row */
        for (size_t i = 0; i < sz; i++) x[i] = roundf(x[i] * 2.0f);
    vkv_ref_argmax(x, rows, n, ref);
    if ((st = guarded_create(c, sz * 4, x, &a.x)) || (st = guarded_create(c, 4ull * rows, NULL, &a.out))) goto done;
    double ms = 0;
    bool guards;
    if ((st = run_recorded(c, rec_argmax, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < rows; i++) wrong += ref[i] != got[i];
    /* Reported as the fraction of rows whose index differs; must be 0. */
    finish(r, (double)wrong / rows, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u rows picked another index", wrong, rows);
done:
    guarded_destroy(c, &a.x); guarded_destroy(c, &a.out);
    free(x); free(ref); free(got);
    return st;
}

/* ---------------- add_bias ---------------- */

typedef struct { guarded a, b, out; uint32_t rows, width; } bias_args;

static vkv_status rec_bias(conform_ctx *c, void *p)
{
    bias_args *a = p;
    return vkv_op_add_bias(c->gpu, a->a.view, a->b.view, a->rows, a->width, a->out.view);
}

static vkv_status case_add_bias(conform_ctx *c, uint32_t rows, uint32_t width)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u + bias[%u]", rows, width, width);
    conform_result *r = new_result(c, "add_bias", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * width;
    float *x = random_f32(c, sz), *bias = random_f32(c, width), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    bias_args a = {.rows = rows, .width = width};
    vkv_status st = VKV_OK;
    if (!x || !bias || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_add_bias(x, bias, rows, width, ref);
    if ((st = guarded_create(c, sz * 4, x, &a.a)) || (st = guarded_create(c, 4ull * width, bias, &a.b)) ||
        (st = guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_bias, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, sz, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.a); guarded_destroy(c, &a.b); guarded_destroy(c, &a.out);
    free(x); free(bias); free(ref); free(got);
    return st;
}

/* ---------------- kv_store ---------------- */

typedef struct { bool f16; guarded src, cache; uint32_t n_tok, n_kv, hd, n_ctx, slot0; } kv_store_args;

static vkv_status rec_kv_store(conform_ctx *c, void *p)
{
    kv_store_args *a = p;
    return vkv_op_kv_store(c->gpu, a->f16, a->src.view, a->n_tok, a->n_kv, a->hd, a->cache.view, a->n_ctx, a->slot0);
}

/* The cache starts full of other data: slots outside [slot0, slot0+n_tok)
 * must come back unchanged, and the written ones bit-exact. */
static vkv_status case_kv_store(conform_ctx *c, bool f16, uint32_t n_tok, uint32_t n_kv, uint32_t hd, uint32_t n_ctx,
                                uint32_t slot0)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u tokens x %u heads x %u -> slots %u.. of %u", n_tok, n_kv, hd, slot0, n_ctx);
    conform_result *r = new_result(c, "kv_store", f16 ? "f16" : "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t src_n = (size_t)n_tok * n_kv * hd, cache_bytes = (f16 ? 2 : 4) * (size_t)n_kv * n_ctx * hd;
    float *src = random_f32(c, src_n);
    uint8_t *init = malloc(cache_bytes), *ref = malloc(cache_bytes), *got = malloc(cache_bytes);
    kv_store_args a = {.f16 = f16, .n_tok = n_tok, .n_kv = n_kv, .hd = hd, .n_ctx = n_ctx, .slot0 = slot0};
    vkv_status st = VKV_OK;
    if (!src || !init || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < cache_bytes; i++) init[i] = (uint8_t)(vkv_rng_u64(&c->rng) & 0x3f); /* finite values */
    memcpy(ref, init, cache_bytes);
    vkv_kv_cache_store(f16 ? VKV_F16 : VKV_F32, ref, n_kv, n_ctx, hd, slot0, src, n_tok);
    if ((st = guarded_create(c, src_n * 4, src, &a.src)) || (st = guarded_create(c, cache_bytes, init, &a.cache))) goto done;
    double ms = 0;
    bool guards;
    if ((st = run_recorded(c, rec_kv_store, &a, &ms)) || (st = guarded_read(c, &a.cache, got, &guards))) goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < cache_bytes; i++) wrong += ref[i] != got[i];
    finish(r, (double)wrong / cache_bytes, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%zu of %zu cache bytes differ", wrong, cache_bytes);
done:
    guarded_destroy(c, &a.src); guarded_destroy(c, &a.cache);
    free(src); free(init); free(ref); free(got);
    return st;
}

/* ---------------- attention (prefill and decode paths) ---------------- */

typedef struct {
    vkv_attn_params p;
    vkv_attn_path path;
    guarded q, k, v, scratch, out;
} attn_args;

static vkv_status rec_attn(conform_ctx *c, void *p)
{
    attn_args *a = p;
    return vkv_op_attention(c->gpu, a->path, &a->p, a->q.view, a->k.view, a->v.view, a->scratch.view, a->out.view);
}

/* Fills a cache's slots n_kv..n_ctx_max-1 with NaN: a kernel that reads a
 * slot it must not see turns the output NaN and fails the case. */
static void poison_unused_slots(const vkv_attn_params *p, void *cache)
{
    for (uint32_t h = 0; h < p->n_kv_head; h++)
        for (uint32_t j = p->n_kv; j < p->n_ctx_max; j++) {
            size_t o = ((size_t)h * p->n_ctx_max + j) * p->head_dim;
            for (uint32_t d = 0; d < p->head_dim; d++) {
                if (p->kv_type == VKV_F16) ((uint16_t *)cache)[o + d] = 0x7e00u;
                else ((float *)cache)[o + d] = NAN;
            }
        }
}

/* One attention call against vkv_ref_attention. The reference reads the same
 * f16-rounded cache as the GPU, so f16 KV keeps the f32 threshold: the only
 * differences are f32 vs double accumulation and exp. q_amp > 1 sharpens the
 * softmax (scores of tens) to exercise the running-max rescaling. */
static vkv_status case_attention(conform_ctx *c, vkv_attn_path path, vkv_dtype kv, uint32_t n_head, uint32_t n_kv_head,
                                 uint32_t hd, uint32_t n_q, uint32_t pos0, uint32_t n_kv, uint32_t n_ctx_max,
                                 float q_amp)
{
    char shape[96];
    snprintf(shape, sizeof shape, "hd %u heads %u/%u q %u pos0 %u kv %u/%u%s", hd, n_head, n_kv_head, n_q, pos0, n_kv,
             n_ctx_max, q_amp != 1.0f ? " sharp" : "");
    conform_result *r = new_result(c, path == VKV_ATTN_DECODE ? "attn_decode" : "attn_prefill", vkv_dtype_get(kv)->name,
                                   shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    attn_args a = {.path = path};
    a.p = (vkv_attn_params){n_q, n_head, n_kv_head, hd, n_ctx_max, n_kv, pos0, (float)(1.0 / sqrt(hd)), kv};
    size_t qn = (size_t)n_q * n_head * hd, cache_bytes = vkv_kv_cache_bytes(kv, n_kv_head, n_ctx_max, hd);
    uint64_t scratch_bytes = vkv_attn_scratch_bytes(&a.p);
    float *q = random_f32(c, qn), *ksrc = random_f32(c, (size_t)n_kv * n_kv_head * hd);
    float *vsrc = random_f32(c, (size_t)n_kv * n_kv_head * hd);
    float *ref = malloc(qn * 4), *got = malloc(qn * 4);
    void *kc = malloc(cache_bytes), *vc = malloc(cache_bytes), *scr = malloc(scratch_bytes);
    vkv_status st = VKV_OK;
    if (!q || !ksrc || !vsrc || !ref || !got || !kc || !vc || !scr) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < qn; i++) q[i] *= q_amp;
    poison_unused_slots(&a.p, kc);
    poison_unused_slots(&a.p, vc);
    vkv_kv_cache_store(kv, kc, n_kv_head, n_ctx_max, hd, 0, ksrc, n_kv);
    vkv_kv_cache_store(kv, vc, n_kv_head, n_ctx_max, hd, 0, vsrc, n_kv);
    vkv_ref_attention(&a.p, q, kc, vc, ref);
    if ((st = guarded_create(c, qn * 4, q, &a.q)) || (st = guarded_create(c, cache_bytes, kc, &a.k)) ||
        (st = guarded_create(c, cache_bytes, vc, &a.v)) || (st = guarded_create(c, qn * 4, NULL, &a.out)) ||
        (st = guarded_create(c, scratch_bytes, NULL, &a.scratch)))
        goto done;
    double ms = 0;
    bool guards, scratch_guards = true, nanm;
    if ((st = run_recorded(c, rec_attn, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards)) ||
        (st = guarded_read(c, &a.scratch, scr, &scratch_guards)))
        goto done;
    double err = nmse_f32(ref, got, qn, &nanm);
    finish(r, err, nanm, guards && scratch_guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.q); guarded_destroy(c, &a.k); guarded_destroy(c, &a.v); guarded_destroy(c, &a.out);
    guarded_destroy(c, &a.scratch);
    free(q); free(ksrc); free(vsrc); free(ref); free(got); free(kc); free(vc); free(scr);
    return st;
}

/* ---------------- VECTOR: residual, compaction, tiered attention ---------------- */

static void fill_cache(conform_ctx *c, vkv_dtype t, void *cache, size_t rows, uint32_t hd, float scale)
{
    float *row = malloc(sizeof *row * hd);
    for (size_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < hd; d++) row[d] = vkv_rng_uniform(&c->rng, -scale, scale);
        vkv_kv_cache_store(t, cache, 1, (uint32_t)rows, hd, (uint32_t)r, row, 1);
    }
    free(row);
}

typedef struct { vkv_vector_geom g; guarded k, v, w, f, eps; uint32_t n_ctx, n; } resid_args;

static vkv_status rec_resid(conform_ctx *c, void *p)
{
    resid_args *a = p;
    return vkv_op_vector_residual(c->gpu, &a->g, a->k.view, a->v.view, a->n_ctx, a->n, a->w.view, a->f.view, a->eps.view);
}

static vkv_status case_vector_residual(conform_ctx *c, vkv_dtype t, uint32_t n_kv, uint32_t hd, uint32_t n_rot, bool neox,
                                       uint32_t n_ctx, uint32_t n)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u heads x %u tokens (of %u) x %u, rot %u %s", n_kv, n, n_ctx, hd, n_rot,
             neox ? "neox" : "interleaved");
    conform_result *r = new_result(c, "vector_residual", t == VKV_F16 ? "f16" : "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t rows = (size_t)n_kv * n_ctx, cb = (t == VKV_F16 ? 2 : 4) * rows * hd;
    void *k = malloc(cb), *v = malloc(cb);
    float *w = random_f32(c, (size_t)n_kv * hd * hd), inv_freq[128];
    float *ref = malloc(4ull * n_kv * n), *got = malloc(4ull * n_kv * n);
    resid_args a = {.g = {t, n_kv, hd, n_rot, neox}, .n_ctx = n_ctx, .n = n};
    vkv_status st = VKV_OK;
    if (!k || !v || !w || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    fill_cache(c, t, k, rows, hd, 1.0f);
    fill_cache(c, t, v, rows, hd, 1.0f);
    for (size_t i = 0; i < (size_t)n_kv * hd * hd; i++) w[i] /= sqrtf((float)hd);
    vkv_rope_params rp = {neox ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, hd, n_rot, 10000.0f, 1.0f, NULL, false};
    vkv_rope_inv_freq(&rp, inv_freq);
    vkv_ref_vector_residual(&rp, inv_freq, t, k, v, n_kv, n_ctx, hd, n, w, ref);
    if ((st = guarded_create(c, cb, k, &a.k)) || (st = guarded_create(c, cb, v, &a.v)) ||
        (st = guarded_create(c, 4ull * n_kv * hd * hd, w, &a.w)) || (st = guarded_create(c, 4ull * (n_rot / 2), inv_freq, &a.f)) ||
        (st = guarded_create(c, 4ull * n_kv * n, NULL, &a.eps)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_resid, &a, &ms)) || (st = guarded_read(c, &a.eps, got, &guards))) goto done;
    double err = nmse_f32(ref, got, (size_t)n_kv * n, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.k); guarded_destroy(c, &a.v); guarded_destroy(c, &a.w); guarded_destroy(c, &a.f);
    guarded_destroy(c, &a.eps);
    free(k); free(v); free(w); free(ref); free(got);
    return st;
}

/* One tiered layer end to end: compaction of a random allocation (exact),
 * appending tokens after compression (exact), then attention of new queries
 * over it on the fused and the materialised paths (NMSE against the CPU
 * reference, and fused against materialised). */
typedef struct {
    vkv_vector_geom g;
    uint32_t n_ctx, n, n_head, n_q, n_new0, max_apx, max_comp;
    uint64_t k_rows, v_rows, p_entries;
    guarded k, v, tiers, meta, kt, vt, pos, src_k, src_v, q, w, f, vhat, out, scratch, wzero;
    int stage; /* 0 compact, 1 append, 2 fused attention, 3 materialised attention */
} tiered_args;

static vkv_status rec_tiered(conform_ctx *c, void *p)
{
    tiered_args *a = p;
    bool f16 = a->g.kv_type == VKV_F16;
    uint32_t n_app = a->n_new0 + a->n_q;
    switch (a->stage) {
    case 0:
        return vkv_op_kv_compact(c->gpu, &a->g, a->k.view, a->v.view, a->n_ctx, a->n, a->tiers.view, a->meta.view,
                                 a->kt.view, a->k_rows, a->vt.view, a->v_rows, a->pos.view, a->p_entries);
    case 1: {
        vkv_status st = vkv_op_kv_store_tiered(c->gpu, f16, false, a->src_k.view, n_app, a->g.n_kv_head, a->g.head_dim,
                                               a->kt.view, a->k_rows, a->meta.view, 0);
        return st ? st : vkv_op_kv_store_tiered(c->gpu, f16, true, a->src_v.view, n_app, a->g.n_kv_head, a->g.head_dim,
                                                a->vt.view, a->v_rows, a->meta.view, 0);
    }
    default: {
        /* The fused run passes the true bound, so the baseline cases (no approximated slots) run the kernel
         * without the approximated path; the materialised run a loose one, so they also run the general kernel. */
        vkv_tiered_attn ta = {a->n_q, a->n_head, a->n_new0, 1.0f / sqrtf((float)a->g.head_dim), a->stage == 2,
                              a->max_comp, a->scratch.buf ? a->scratch.view : (vkv_view){0}, a->wzero.view,
                              a->stage == 2 ? a->max_apx : a->max_apx + 1};
        if (a->stage == 3) {
            vkv_status st = vkv_op_vector_materialize(c->gpu, &a->g, a->kt.view, a->k_rows, a->meta.view, a->pos.view,
                                                      a->p_entries, a->w.view, a->f.view, a->max_apx, a->vhat.view);
            if (st) return st;
        }
        return vkv_op_attention_tiered(c->gpu, &a->g, &ta, a->q.view, a->kt.view, a->k_rows, a->vt.view, a->v_rows,
                                       a->meta.view, a->pos.view, a->p_entries, a->stage == 2 ? a->w.view : a->vhat.view,
                                       a->f.view, a->out.view);
    }
    }
}

static vkv_status case_tiered(conform_ctx *c, vkv_dtype t, uint32_t n_head, uint32_t n_kv, uint32_t hd, uint32_t n_rot,
                              bool neox, uint32_t n, uint32_t n_ret, uint32_t n_apx, uint32_t n_new0, uint32_t n_q)
{
    char shape[112], rot[32] = "";
    if (n_rot != hd) snprintf(rot, sizeof rot, " (rot %u%s)", n_rot, neox ? " neox" : "");
    snprintf(shape, sizeof shape, "%u/%u heads x %u%s, ctx %u -> R %u A %u, +%u new, %u q", n_head, n_kv, hd, rot, n,
             n_ret, n_apx, n_new0, n_q);
    const char *tn = t == VKV_F16 ? "f16" : "f32";
    if (!reserve_results(c, 5)) return vkv_error(VKV_ERR_OOM, "out of host memory");
    conform_result *rc = new_result(c, "kv_compact", tn, shape), *ra = new_result(c, "kv_store_tiered", tn, shape);
    conform_result *rf = new_result(c, "attn_tiered_fused", tn, shape), *rm = new_result(c, "attn_tiered_mat", tn, shape);
    conform_result *rx = new_result(c, "attn_tiered_fused_vs_mat", tn, shape);
    if (!rc || !ra || !rf || !rm || !rx) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t n_app = n_new0 + n_q, n_ctx = n + 3;
    size_t es = t == VKV_F16 ? 2 : 4, rb = es * hd, plain = (size_t)n_kv * n_ctx;
    tiered_args a = {.g = {t, n_kv, hd, n_rot, neox}, .n_ctx = n_ctx, .n = n, .n_head = n_head, .n_q = n_q,
                     .n_new0 = n_new0, .max_apx = n_apx, .max_comp = n_ret + n_apx};
    a.k_rows = (uint64_t)n_kv * (n_ret + n_apx + n_app);
    a.v_rows = (uint64_t)n_kv * (n_ret + n_app);
    a.p_entries = (uint64_t)n_kv * (n_ret + n_apx);
    void *k = malloc(plain * rb), *v = malloc(plain * rb), *kt = calloc(a.k_rows, rb), *vt = calloc(a.v_rows, rb);
    void *kt_got = malloc(a.k_rows * rb), *vt_got = malloc(a.v_rows * rb);
    uint32_t *tiers = calloc((size_t)n_kv * n, 4);
    uint8_t *tiers8 = calloc((size_t)n_kv * n, 1);
    vkv_tier_head *meta = calloc(n_kv, sizeof *meta);
    int32_t *pos = calloc(a.p_entries + 1, 4), *pos_got = calloc(a.p_entries + 1, 4);
    float *src_k = random_f32(c, (size_t)n_app * n_kv * hd), *src_v = random_f32(c, (size_t)n_app * n_kv * hd);
    float *q = random_f32(c, (size_t)n_q * n_head * hd), *w = random_f32(c, (size_t)n_kv * hd * hd), inv_freq[128];
    float *ref = malloc(4ull * n_q * n_head * hd), *got_f = malloc(4ull * n_q * n_head * hd), *got_m = malloc(4ull * n_q * n_head * hd);
    vkv_status st = VKV_OK;
    if (!k || !v || !kt || !vt || !kt_got || !vt_got || !tiers || !tiers8 || !meta || !pos || !pos_got || !src_k || !src_v ||
        !q || !w || !ref || !got_f || !got_m) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto done;
    }
    fill_cache(c, t, k, plain, hd, 1.0f);
    fill_cache(c, t, v, plain, hd, 1.0f);
    for (size_t i = 0; i < (size_t)n_kv * hd * hd; i++) w[i] /= sqrtf((float)hd);
    for (size_t i = 0; i < (size_t)n_q * n_head * hd; i++) q[i] *= 3.0f; /* peaked softmax */
    /* exactly n_ret retained and n_apx approximated per head, at random positions */
    for (uint32_t h = 0; h < n_kv; h++) {
        uint8_t *th = tiers8 + (size_t)h * n;
        for (uint32_t j = 0; j < n; j++) th[j] = j < n_ret ? VKV_TIER_RETAINED : j < n_ret + n_apx ? VKV_TIER_APPROXIMATED : 0;
        for (uint32_t j = n - 1; j > 0; j--) {
            uint32_t o = vkv_rng_below(&c->rng, j + 1);
            uint8_t x = th[j]; th[j] = th[o]; th[o] = x;
        }
        for (uint32_t j = 0; j < n; j++) tiers[(size_t)h * n + j] = th[j];
        meta[h].k_off = h * (n_ret + n_apx + n_app);
        meta[h].v_off = h * (n_ret + n_app);
        meta[h].p_off = h * (n_ret + n_apx);
        meta[h].n_ret = n_ret;
        meta[h].n_apx = n_apx;
    }
    vkv_ref_kv_compact(t, k, v, n_kv, n_ctx, hd, n, tiers8, meta, kt, vt, pos);
    /* appended tokens, as kv_store_tiered lays them out */
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t tt = 0; tt < n_app; tt++) {
            vkv_kv_cache_store(t, kt, 1, (uint32_t)a.k_rows, hd, meta[h].k_off + n_ret + n_apx + tt,
                               src_k + ((size_t)tt * n_kv + h) * hd, 1);
            vkv_kv_cache_store(t, vt, 1, (uint32_t)a.v_rows, hd, meta[h].v_off + n_ret + tt,
                               src_v + ((size_t)tt * n_kv + h) * hd, 1);
        }
    vkv_rope_params rp = {neox ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, hd, n_rot, 10000.0f, 1.0f, NULL, false};
    vkv_rope_inv_freq(&rp, inv_freq);
    vkv_tiered_attn_params tp = {n_q, n_head, n_kv, hd, n_new0, n, 1.0f / sqrtf((float)hd), t};
    vkv_ref_attention_tiered(&tp, &rp, inv_freq, meta, q, kt, vt, pos, w, ref);

    if ((st = guarded_create(c, plain * rb, k, &a.k)) || (st = guarded_create(c, plain * rb, v, &a.v)) ||
        (st = guarded_create(c, 4ull * n_kv * n, tiers, &a.tiers)) || (st = guarded_create(c, sizeof *meta * n_kv, meta, &a.meta)) ||
        (st = guarded_create(c, a.k_rows * rb, NULL, &a.kt)) || (st = guarded_create(c, a.v_rows * rb, NULL, &a.vt)) ||
        (st = guarded_create(c, 4ull * (a.p_entries + 1), NULL, &a.pos)) ||
        (st = guarded_create(c, 4ull * n_app * n_kv * hd, src_k, &a.src_k)) ||
        (st = guarded_create(c, 4ull * n_app * n_kv * hd, src_v, &a.src_v)) ||
        (st = guarded_create(c, 4ull * n_q * n_head * hd, q, &a.q)) || (st = guarded_create(c, 4ull * n_kv * hd * hd, w, &a.w)) ||
        (st = guarded_create(c, 4ull * (n_rot / 2 ? n_rot / 2 : 1), inv_freq, &a.f)) || (st = guarded_create(c, 4ull * a.k_rows * hd, NULL, &a.vhat)) ||
        (st = guarded_create(c, 4ull * n_q * n_head * hd, NULL, &a.out)) ||
        (st = guarded_create(c, 4ull * n_kv * hd * hd, NULL, &a.wzero)) ||
        (st = vkv_buffer_fill(c->gpu, a.wzero.buf, c->guard_bytes, 4ull * n_kv * hd * hd, 0)))
        goto done;
    uint64_t sbytes = vkv_tiered_attn_scratch_bytes(n_q, n_head, hd, n_ret + n_apx + n_new0 + n_q);
    if (sbytes && (st = guarded_create(c, sbytes, NULL, &a.scratch))) goto done;
    /* The compaction leaves the appended region alone: compare the compressed part only. */
    double ms = 0;
    bool g1, g2, g3, nanm;
    if ((st = run_recorded(c, rec_tiered, &a, &ms)) || (st = guarded_read(c, &a.kt, kt_got, &g1)) ||
        (st = guarded_read(c, &a.vt, vt_got, &g2)) || (st = guarded_read(c, &a.pos, pos_got, &g3)))
        goto done;
    size_t wrong = 0;
    for (uint32_t h = 0; h < n_kv; h++) {
        wrong += memcmp((char *)kt_got + meta[h].k_off * rb, (char *)kt + meta[h].k_off * rb, (n_ret + n_apx) * rb) != 0;
        wrong += memcmp((char *)vt_got + meta[h].v_off * rb, (char *)vt + meta[h].v_off * rb, n_ret * rb) != 0;
    }
    wrong += memcmp(pos_got, pos, 4 * a.p_entries) != 0;
    finish(rc, (double)wrong, false, g1 && g2 && g3, NMSE_EXACT, ms);
    if (wrong) snprintf(rc->note, sizeof rc->note, "%zu heads/tables differ", wrong);
    a.stage = 1;
    if ((st = run_recorded(c, rec_tiered, &a, &ms)) || (st = guarded_read(c, &a.kt, kt_got, &g1)) ||
        (st = guarded_read(c, &a.vt, vt_got, &g2)))
        goto done;
    wrong = (size_t)(memcmp(kt_got, kt, a.k_rows * rb) != 0) + (memcmp(vt_got, vt, a.v_rows * rb) != 0);
    finish(ra, (double)wrong, false, g1 && g2, NMSE_EXACT, ms);
    a.stage = 2;
    if ((st = run_recorded(c, rec_tiered, &a, &ms)) || (st = guarded_read(c, &a.out, got_f, &g1))) goto done;
    double err = nmse_f32(ref, got_f, (size_t)n_q * n_head * hd, &nanm);
    finish(rf, err, nanm, g1, NMSE_F32, ms);
    a.stage = 3;
    if ((st = run_recorded(c, rec_tiered, &a, &ms)) || (st = guarded_read(c, &a.out, got_m, &g1))) goto done;
    err = nmse_f32(ref, got_m, (size_t)n_q * n_head * hd, &nanm);
    finish(rm, err, nanm, g1, NMSE_F32, ms);
    err = nmse_f32(got_m, got_f, (size_t)n_q * n_head * hd, &nanm);
    finish(rx, err, nanm, true, NMSE_F32, 0);
done:
    guarded_destroy(c, &a.k); guarded_destroy(c, &a.v); guarded_destroy(c, &a.tiers); guarded_destroy(c, &a.meta);
    guarded_destroy(c, &a.kt); guarded_destroy(c, &a.vt); guarded_destroy(c, &a.pos); guarded_destroy(c, &a.src_k);
    guarded_destroy(c, &a.src_v); guarded_destroy(c, &a.q); guarded_destroy(c, &a.w); guarded_destroy(c, &a.f);
    guarded_destroy(c, &a.vhat); guarded_destroy(c, &a.out); guarded_destroy(c, &a.scratch); guarded_destroy(c, &a.wzero);
    free(k); free(v); free(kt); free(vt); free(kt_got); free(vt_got); free(tiers); free(tiers8); free(meta); free(pos);
    free(pos_got); free(src_k); free(src_v); free(q); free(w); free(ref); free(got_f); free(got_m);
    return st;
}

/* ---------------- topk_select ---------------- */

typedef enum { TOPK_RANDOM, TOPK_TIES, TOPK_SPECIAL } topk_data;

typedef struct { guarded s, k, mask; uint32_t rows, n, k_uniform; bool per_row; } topk_args;

static vkv_status rec_topk(conform_ctx *c, void *p)
{
    topk_args *a = p;
    return vkv_op_topk_select(c->gpu, a->s.view, a->rows, a->n, a->per_row ? a->k.view : (vkv_view){0},
                              a->k_uniform, a->mask.view);
}

/* Masks must be identical. TOPK_TIES rounds scores to 9 values (ties at the
 * threshold, broken by position); TOPK_SPECIAL adds +inf (forced keeps),
 * -inf, NaN (ranks as -inf) and signed zeros. per_row: k_r random in
 * [0, n + 2], row 0 k = 0, row 1 k = n. */
static vkv_status case_topk(conform_ctx *c, uint32_t rows, uint32_t n, uint32_t k, bool per_row, topk_data data)
{
    static const char *const data_name[] = {"random", "9 values (ties)", "+-inf, NaN, -0"};
    char shape[96];
    if (per_row) snprintf(shape, sizeof shape, "%ux%u k per row, %s", rows, n, data_name[data]);
    else snprintf(shape, sizeof shape, "%ux%u k %u, %s", rows, n, k, data_name[data]);
    conform_result *r = new_result(c, "topk_select", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = random_f32(c, sz);
    uint32_t *ks = malloc(rows * 4ull), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    topk_args a = {.rows = rows, .n = n, .k_uniform = k, .per_row = per_row};
    vkv_status st = VKV_OK;
    if (!x || !ks || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < sz; i++) {
        if (data == TOPK_TIES) x[i] = roundf(x[i] * 4.0f) / 4.0f;
        if (data == TOPK_SPECIAL) {
            uint32_t u = vkv_rng_below(&c->rng, 100);
            x[i] = u < 5 ? INFINITY : u < 10 ? -INFINITY : u < 13 ? NAN : u < 18 ? 0.0f : u < 23 ? -0.0f : x[i];
        }
    }
    for (uint32_t i = 0; i < rows; i++) ks[i] = i == 0 ? 0 : i == 1 ? n : vkv_rng_below(&c->rng, n + 3);
    if ((st = vkv_ref_topk_select(x, rows, n, per_row ? ks : NULL, k, ref))) goto done;
    if ((st = guarded_create(c, sz * 4, x, &a.s)) || (st = guarded_create(c, rows * 4ull, ks, &a.k)) ||
        (st = guarded_create(c, sz * 4, NULL, &a.mask)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = run_recorded(c, rec_topk, &a, &ms)) || (st = guarded_read(c, &a.mask, got, &guards))) goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < sz; i++) wrong += ref[i] != got[i];
    /* Reported as the fraction of mask entries that differ; must be 0. */
    finish(r, (double)wrong / sz, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%zu of %zu mask entries differ", wrong, sz);
done:
    guarded_destroy(c, &a.s); guarded_destroy(c, &a.k); guarded_destroy(c, &a.mask);
    free(x); free(ks); free(ref); free(got);
    return st;
}

/* ---------------- press scorers ---------------- */

typedef struct {
    const vkv_press_ops *ops; vkv_press_params pp; vkv_press_layer in; guarded scores;
    vkv_view q; uint64_t q_row_bytes; /* every query, for a scorer with a capture */
} press_args;

static vkv_status rec_press(conform_ctx *c, void *p)
{
    press_args *a = p;
    vkv_status st = VKV_OK;
    /* A scorer with a capture sees its queries first, in prefill-sized chunks. */
    for (uint32_t r0 = 0; a->ops->capture_gpu && r0 < a->in.n_q && !st; r0 += 512) {
        const uint32_t nt = a->in.n_q - r0 < 512 ? a->in.n_q - r0 : 512;
        st = a->ops->capture_gpu(c->gpu, &a->pp, &a->in, (vkv_view){a->q.buf, a->q.offset + r0 * a->q_row_bytes}, nt,
                                 a->in.q_pos0 + r0);
    }
    return st ? st : a->ops->score_gpu(c->gpu, &a->pp, &a->in, a->scores.view);
}

/* One scorer on one layer: a random cache (slots past n poisoned with NaN:
 * reading them turns scores NaN) and 64 random window queries, against its
 * double-precision score_ref. Forced keeps (+inf) must match exactly.
 * Scorers with a capture get every query instead (captured in chunks of
 * 512, then scored): ObservedAttention and ExpectedAttention (interleaved
 * RoPE for f32 caches, NeoX for f16) those of the n context positions,
 * KVzip 100 reconstruction queries after the context repeating the tokens
 * [n/4, 3n/4) after a 2-token prefix. */
static vkv_status case_press(conform_ctx *c, const char *press, vkv_dtype kv, uint32_t n_head, uint32_t n_kv_head,
                             uint32_t hd, uint32_t n, uint32_t n_ctx, uint32_t block)
{
    char op[32], shape[96];
    snprintf(op, sizeof op, "press_%s", press);
    snprintf(shape, sizeof shape, "hd %u heads %u/%u n %u/%u%s", hd, n_head, n_kv_head, n, n_ctx,
             block ? " block" : "");
    if (block) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " %u", block);
    conform_result *r = new_result(c, op, vkv_dtype_get(kv)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    press_args a = {.ops = vkv_press_find(press), .pp = vkv_press_params_default(0.5f)};
    if (!a.ops) return VKV_ERR_ARG; /* the message names the known presses */
    a.pp.block = block;
    const bool capture = a.ops->capture_gpu != NULL, repeat = a.ops->repeat_pass;
    const uint32_t window = capture ? 0 : n < 64 ? n : 64;
    const uint32_t n_q = !capture ? window : repeat ? 100 : n, n_keys = repeat ? n + n_q : n;
    if (n_keys > n_ctx) return vkv_error(VKV_ERR_ARG, "press case: %u keys in a %u-slot cache", n_keys, n_ctx);
    const size_t qn = (size_t)n_q * n_head * hd, sn = (size_t)n_kv_head * n;
    const size_t cache_bytes = vkv_kv_cache_bytes(kv, n_kv_head, n_ctx, hd);
    vkv_attn_params ap = {.n_kv_head = n_kv_head, .head_dim = hd, .n_ctx_max = n_ctx, .n_kv = n_keys, .kv_type = kv};
    float *q = random_f32(c, qn), *ksrc = random_f32(c, (size_t)n_keys * n_kv_head * hd);
    float *vsrc = random_f32(c, (size_t)n_keys * n_kv_head * hd);
    float *ref = malloc(sn * 4), *got = malloc(sn * 4), inv_freq[128];
    void *kc = malloc(cache_bytes), *vc = malloc(cache_bytes), *zeros = NULL;
    guarded kg = {0}, vg = {0}, qg = {0}, scratch = {0}, stg = {0}, fg = {0};
    vkv_status st = VKV_OK;
    if (!q || !ksrc || !vsrc || !ref || !got || !kc || !vc) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < qn; i++) q[i] *= 4.0f; /* sharper window attention than unit-scale noise gives */
    poison_unused_slots(&ap, kc);
    poison_unused_slots(&ap, vc);
    vkv_kv_cache_store(kv, kc, n_kv_head, n_ctx, hd, 0, ksrc, n_keys);
    vkv_kv_cache_store(kv, vc, n_kv_head, n_ctx, hd, 0, vsrc, n_keys);
    vkv_rope_params rp = {.mode = kv == VKV_F16 ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, .head_dim = hd, .n_rot = hd,
                          .freq_base = 10000.0f, .freq_scale = 1.0f};
    vkv_rope_inv_freq(&rp, inv_freq);
    a.in = (vkv_press_layer){.layer = 0, .n_layer = 1, .n = n, .n_head = n_head, .n_kv_head = n_kv_head,
                             .head_dim = hd, .n_ctx = n_ctx, .kv_type = kv, .window = window,
                             .k_host = kc, .v_host = vc, .q_window_host = capture ? NULL : q, .n_rot = hd,
                             .rope_neox = rp.mode == VKV_ROPE_NEOX, .inv_freq_host = inv_freq,
                             .prefix = repeat ? 2 : 0, .span0 = repeat ? n / 4 : 0, .span1 = repeat ? 3 * n / 4 : 0,
                             .q_pos0 = repeat ? n : 0, .n_q = capture ? n_q : 0, .q_host = capture ? q : NULL};
    if ((st = a.ops->score_ref(&a.pp, &a.in, ref))) goto done;
    const uint64_t state_bytes = a.ops->state_bytes ? a.ops->state_bytes(&a.pp, &a.in) : 16;
    if (!(zeros = calloc(1, state_bytes))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if ((st = guarded_create(c, cache_bytes, kc, &kg)) || (st = guarded_create(c, cache_bytes, vc, &vg)) ||
        (st = guarded_create(c, qn * 4, q, &qg)) ||
        (st = guarded_create(c, vkv_press_scratch_bytes(a.ops, &a.pp, &a.in), NULL, &scratch)) ||
        (st = guarded_create(c, state_bytes, zeros, &stg)) || (st = guarded_create(c, 2ull * hd, inv_freq, &fg)) ||
        (st = guarded_create(c, sn * 4, NULL, &a.scores)))
        goto done;
    a.in.k = kg.view;
    a.in.v = vg.view;
    a.in.q_window = qg.view;
    a.in.scratch = scratch.view;
    a.in.state = stg.view;
    a.in.inv_freq = fg.view;
    a.q = qg.view;
    a.q_row_bytes = 4ull * n_head * hd;
    double ms = 0;
    bool guards, scratch_guards, nanm;
    if ((st = run_recorded(c, rec_press, &a, &ms)) || (st = guarded_read(c, &a.scores, got, &guards))) goto done;
    void *scr = malloc(scratch.bytes ? scratch.bytes : 1);
    if (!scr) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    st = guarded_read(c, &scratch, scr, &scratch_guards);
    free(scr);
    if (st) goto done;
    size_t inf_wrong = 0;
    for (size_t i = 0; i < sn; i++) inf_wrong += isinf(ref[i]) != isinf(got[i]) || (isinf(ref[i]) && ref[i] != got[i]);
    double err = nmse_f32(ref, got, sn, &nanm);
    finish(r, err, nanm || inf_wrong, guards && scratch_guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &kg); guarded_destroy(c, &vg); guarded_destroy(c, &qg); guarded_destroy(c, &scratch);
    guarded_destroy(c, &stg); guarded_destroy(c, &fg); guarded_destroy(c, &a.scores);
    free(q); free(ksrc); free(vsrc); free(ref); free(got); free(kc); free(vc); free(zeros);
    return st;
}

/* ---------------- gram (calibration sums, calib/) ---------------- */

typedef struct { vkv_gram_params p; guarded x, y, out; } gram_args;

static vkv_status rec_gram(conform_ctx *c, void *p)
{
    gram_args *a = p;
    return vkv_op_gram(c->gpu, &a->p, a->x.view, a->y.view, a->out.view);
}

/* x [n_tok, ldx] and y [n_tok, ldy] random; the reference sums in double. */
static vkv_status case_gram(conform_ctx *c, vkv_gram_params p, const char *what)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u tok, %u x [%u, %u]%s%s", p.n_tok, p.n_blocks, p.m, p.n, p.x_ones ? " ones" : "", what);
    conform_result *r = new_result(c, "gram", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t nx = (size_t)p.n_tok * p.ldx + 1, ny = (size_t)p.n_tok * p.ldy, no = (size_t)p.n_blocks * p.m * p.n;
    float *x = random_f32(c, nx), *y = random_f32(c, ny), *ref = malloc(no * 4), *got = malloc(no * 4);
    double *refd = malloc(no * sizeof *refd);
    gram_args a = {.p = p};
    vkv_status st = VKV_OK;
    if (!x || !y || !ref || !got || !refd) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_gram(&p, x, y, refd);
    for (size_t i = 0; i < no; i++) ref[i] = (float)refd[i];
    if ((st = guarded_create(c, nx * 4, x, &a.x)) || (st = guarded_create(c, ny * 4, y, &a.y)) ||
        (st = guarded_create(c, no * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = run_recorded(c, rec_gram, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    double err = nmse_f32(ref, got, no, &nanm);
    finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    guarded_destroy(c, &a.x); guarded_destroy(c, &a.y); guarded_destroy(c, &a.out);
    free(x); free(y); free(ref); free(got); free(refd);
    return st;
}

/* ---------------- VECTOR: the truncation's elementwise steps ---------------- */

typedef struct { bool assign; guarded pool, b, out; uint32_t total; } trunc_args;

static vkv_status rec_trunc(conform_ctx *c, void *p)
{
    trunc_args *a = p;
    return a->assign ? vkv_op_vector_assign_tiers(c->gpu, a->pool.view, a->b.view, a->total, a->out.view)
                     : vkv_op_vector_pool_scores(c->gpu, a->pool.view, a->b.view, a->total, a->out.view);
}

/* Exact: every output word must equal the reference's (inf, NaN residuals included). */
static vkv_status case_vector_truncation(conform_ctx *c, bool assign, uint32_t total)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u tokens%s", total, assign ? "" : " (with inf / NaN residuals)");
    conform_result *r = new_result(c, assign ? "vector_assign_tiers" : "vector_pool_scores", assign ? "u32" : "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t *pool = malloc(4ull * total), *b = malloc(4ull * total), *ref = malloc(4ull * total), *got = malloc(4ull * total);
    trunc_args a = {.assign = assign, .total = total};
    vkv_status st = VKV_OK;
    if (!pool || !b || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t i = 0; i < total; i++) {
        pool[i] = vkv_rng_below(&c->rng, 3) != 0;
        if (assign) b[i] = pool[i] && vkv_rng_below(&c->rng, 2);
        else {
            float e = vkv_rng_uniform(&c->rng, 0, 4);
            if (i % 97 == 5) e = INFINITY;
            if (i % 89 == 7) e = NAN;
            memcpy(&b[i], &e, 4);
        }
    }
    if (assign) vkv_ref_vector_assign_tiers(pool, b, total, ref);
    else vkv_ref_vector_pool_scores(pool, (const float *)b, total, (float *)ref);
    if ((st = guarded_create(c, 4ull * total, pool, &a.pool)) || (st = guarded_create(c, 4ull * total, b, &a.b)) ||
        (st = guarded_create(c, 4ull * total, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = run_recorded(c, rec_trunc, &a, &ms)) || (st = guarded_read(c, &a.out, got, &guards))) goto done;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < total; i++) wrong += ref[i] != got[i];
    finish(r, (double)wrong / total, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u outputs differ", wrong, total);
done:
    guarded_destroy(c, &a.pool); guarded_destroy(c, &a.b); guarded_destroy(c, &a.out);
    free(pool); free(b); free(ref); free(got);
    return st;
}

/* ---------------- the suite ---------------- */

static bool want(const conform_ctx *c, const char *op) { return !c->filter || strstr(op, c->filter); }

#define RUN(expr)                                                  \
    do {                                                           \
        if (!c->fatal) {                                           \
            vkv_status s_ = (expr);                                \
            if (s_) c->fatal = s_;                                 \
        }                                                          \
    } while (0)

/* The attention cases of one model shape: decode (n_q = 1) at several cache
 * lengths (1 and 7 run one split, 300 and 2049 several), a prompt prefill
 * (the cache holds exactly its tokens), a prefill chunk after 100 cached
 * tokens, and a single query through the prefill kernel. */
static void attention_cases(conform_ctx *c, vkv_dtype kv, uint32_t n_head, uint32_t n_kv_head, uint32_t hd)
{
    static const uint32_t decode_kv[] = {1, 7, 300, 2049};
    if (want(c, "attn_decode"))
        for (size_t i = 0; i < sizeof decode_kv / sizeof *decode_kv; i++)
            RUN(case_attention(c, VKV_ATTN_DECODE, kv, n_head, n_kv_head, hd, 1, decode_kv[i] - 1, decode_kv[i],
                               decode_kv[i] + 9, 1.0f));
    if (want(c, "attn_prefill")) {
        RUN(case_attention(c, VKV_ATTN_PREFILL, kv, n_head, n_kv_head, hd, 37, 0, 37, 64, 1.0f));
        RUN(case_attention(c, VKV_ATTN_PREFILL, kv, n_head, n_kv_head, hd, 64, 100, 164, 256, 1.0f));
        RUN(case_attention(c, VKV_ATTN_PREFILL, kv, n_head, n_kv_head, hd, 1, 299, 300, 300, 1.0f));
    }
}

static void run_suite(conform_ctx *c)
{
#define VKV_DTYPE_ENTRY(t) VKV_##t,
    static const vkv_dtype weight_types[] = {VKV_DTYPE_LIST(VKV_DTYPE_ENTRY)};
#undef VKV_DTYPE_ENTRY
    const size_t n_weight_types = sizeof weight_types / sizeof *weight_types;
    if (want(c, "get_rows"))
        for (size_t i = 0; i < n_weight_types; i++) {
            const vkv_dtype t = weight_types[i];
            const bool small_blocks = vkv_dtype_get(t)->block_size <= 32;
            RUN(case_get_rows(c, t, 100, small_blocks ? 64 : 256, 7));
            RUN(case_get_rows(c, t, 37, small_blocks ? 288 : 768, 1));
            RUN(case_get_rows(c, t, 512, 4096, 5));
            /* SmolLM2-135M's width: not a multiple of 256 */
            if (small_blocks) RUN(case_get_rows(c, t, 49, 576, 3));
        }
    /* Qwen3-0.6B's q8_0 embedding (165 MiB): bound in several ranges on lavapipe */
    if (c->big && want(c, "get_rows")) RUN(case_get_rows(c, VKV_Q8_0, 151936, 1024, 9));
    if (want(c, "rms_norm")) {
        RUN(case_rms_norm(c, 1, 4096, true, ""));
        RUN(case_rms_norm(c, 7, 130, true, ""));
        RUN(case_rms_norm(c, 3, 1000, false, ""));
        RUN(case_rms_norm(c, 5 * 8, 64, true, " (per-head: 5 tokens x 8 heads)"));
        RUN(case_rms_norm(c, 70000, 16, true, " (rows over the x group limit)"));
    }
    static const vkv_matmul_path paths[] = {VKV_MATMUL_MATVEC, VKV_MATMUL_TILED, VKV_MATMUL_COOPMAT};
    for (size_t p = 0; p < 3; p++) {
        if (!want(c, path_name(paths[p]))) continue;
        for (size_t i = 0; i < n_weight_types; i++) {
            vkv_dtype t = weight_types[i];
            /* 32-element blocks also at widths that are not multiples of
             * 256 (SmolLM2-135M's 576 and 1536 / 3 = 512 + 64: 1600) */
            const bool small_blocks = vkv_dtype_get(t)->block_size <= 32;
            if (paths[p] == VKV_MATMUL_MATVEC) {
                RUN(case_matmul(c, paths[p], t, 1, 256, 1));
                RUN(case_matmul(c, paths[p], t, 37, 512, 1));
                RUN(case_matmul(c, paths[p], t, 1000, 4096, 1));
                RUN(case_matmul(c, paths[p], t, 3, 768, 2));
                if (small_blocks) RUN(case_matmul(c, paths[p], t, 193, 576, 1));
            } else {
                RUN(case_matmul(c, paths[p], t, 1, 256, 2));
                RUN(case_matmul(c, paths[p], t, 70, 256, 5));
                RUN(case_matmul(c, paths[p], t, 130, 512, 67));
                RUN(case_matmul(c, paths[p], t, 256, 1024, 128));
                if (small_blocks) RUN(case_matmul(c, paths[p], t, 67, 1600, 9));
            }
        }
        /* Float weights may have rows that are not a multiple of 32
         * (stories260K's FFN is 172 wide), even odd for 16-bit types. */
        static const vkv_dtype float_types[] = {VKV_F32, VKV_F16, VKV_BF16};
        for (size_t i = 0; i < 3; i++) {
            bool mv = paths[p] == VKV_MATMUL_MATVEC;
            RUN(case_matmul(c, paths[p], float_types[i], mv ? 37 : 70, 172, mv ? 1 : 5));
            RUN(case_matmul(c, paths[p], float_types[i], mv ? 5 : 33, float_types[i] == VKV_F32 ? 45 : 171, mv ? 1 : 7));
        }
        if (c->big) { /* weights over 128 MiB: bound in several ranges on lavapipe */
            RUN(case_matmul(c, paths[p], VKV_F32, 8500, 4096, paths[p] == VKV_MATMUL_MATVEC ? 1 : 3));
            /* Qwen3-0.6B's tied q8_0 output matrix at decode (row ranges of
             * a 1088-byte row; the tiled path splits as the f32 case does) */
            if (paths[p] == VKV_MATMUL_MATVEC) RUN(case_matmul(c, paths[p], VKV_Q8_0, 151936, 1024, 1));
        }
    }
    if (want(c, "rope")) {
        for (int inv = 0; inv < 2; inv++) {
            RUN(case_rope(c, VKV_ROPE_INTERLEAVED, inv, 64, 64, 10000.0f, false, 7, 4, 4096));
            RUN(case_rope(c, VKV_ROPE_NEOX, inv, 64, 64, 1000000.0f, false, 7, 4, 4096));
            RUN(case_rope(c, VKV_ROPE_NEOX, inv, 128, 64, 10000.0f, false, 3, 2, 512));
            RUN(case_rope(c, VKV_ROPE_INTERLEAVED, inv, 128, 128, 500000.0f, true, 9, 8, 4096));
            RUN(case_rope(c, VKV_ROPE_INTERLEAVED, inv, 8, 8, 10000.0f, false, 33, 3, 512));
        }
    }
    if (want(c, "softmax")) {
        RUN(case_softmax(c, 5, 37, 0.125f, false, 0));
        RUN(case_softmax(c, 64, 1000, 0.088f, true, 936));
        RUN(case_softmax(c, 16, 16, 1.0f, true, 0));
        RUN(case_softmax(c, 4, 20, 1.0f, true, -2)); /* first rows see nothing */
        RUN(case_softmax(c, 1, 32000, 1.0f, false, 0));
    }
    if (want(c, "silu_mul")) {
        RUN(case_elementwise(c, true, 1));
        RUN(case_elementwise(c, true, 1000));
        RUN(case_elementwise(c, true, (1u << 20) + 3));
    }
    if (want(c, "add")) {
        RUN(case_elementwise(c, false, 1));
        RUN(case_elementwise(c, false, 1000));
        RUN(case_elementwise(c, false, (1u << 24) + 7)); /* over the x group limit */
    }
    if (want(c, "add_bias")) {
        RUN(case_add_bias(c, 1, 96));
        RUN(case_add_bias(c, 37, 640));
    }
    if (want(c, "kv_store"))
        for (int f16 = 0; f16 < 2; f16++) {
            RUN(case_kv_store(c, f16, 1, 4, 8, 64, 0));
            RUN(case_kv_store(c, f16, 1, 2, 64, 300, 299));
            RUN(case_kv_store(c, f16, 37, 4, 8, 512, 100));
            RUN(case_kv_store(c, f16, 64, 8, 128, 128, 64));
        }
    if (want(c, "attn_prefill") || want(c, "attn_decode")) {
        static const vkv_dtype kv_types[] = {VKV_F32, VKV_F16};
        for (size_t i = 0; i < 2; i++) {
            attention_cases(c, kv_types[i], 8, 4, 8);    /* stories260K */
            attention_cases(c, kv_types[i], 8, 2, 64);   /* GQA 4:1 */
            attention_cases(c, kv_types[i], 8, 8, 128);  /* MHA */
        }
        if (want(c, "attn_decode")) {
            /* n_q = 4 decode: causal masking inside the splits */
            RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, 8, 2, 64, 4, 296, 300, 320, 1.0f));
            /* scores of tens: the running max must rescale exactly */
            RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, 8, 2, 64, 1, 2048, 2049, 2049, 24.0f));
        }
        if (want(c, "attn_prefill"))
            RUN(case_attention(c, VKV_ATTN_PREFILL, VKV_F16, 8, 2, 64, 64, 100, 164, 256, 24.0f));
        /* other head sizes: 16/32 (small test models), 80 (a tile_k that is no power of
         * two, head_dim not a multiple of the threads per row), 256 (the largest) */
        static const uint32_t more_hd[] = {16, 32, 80, 256};
        for (size_t i = 0; i < sizeof more_hd / sizeof *more_hd; i++) {
            if (want(c, "attn_decode"))
                RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F16, 4, 2, more_hd[i], 1, 299, 300, 300, 1.0f));
            if (want(c, "attn_prefill"))
                RUN(case_attention(c, VKV_ATTN_PREFILL, VKV_F16, 4, 2, more_hd[i], 64, 100, 164, 200, 1.0f));
        }
        if (c->big && want(c, "attn_decode")) /* a cache over 128 MiB: bound per KV head on lavapipe */
            RUN(case_attention(c, VKV_ATTN_DECODE, VKV_F32, 8, 8, 128, 1, 299, 300, 40000, 1.0f));
    }
    if (want(c, "vector_residual"))
        for (int f16 = 0; f16 < 2; f16++) {
            RUN(case_vector_residual(c, f16 ? VKV_F16 : VKV_F32, 4, 8, 8, false, 40, 37));
            RUN(case_vector_residual(c, f16 ? VKV_F16 : VKV_F32, 2, 64, 64, true, 300, 300));
            RUN(case_vector_residual(c, f16 ? VKV_F16 : VKV_F32, 2, 128, 64, true, 70, 65));
        }
    if (want(c, "vector_pool_scores")) {
        RUN(case_vector_truncation(c, false, 1));
        RUN(case_vector_truncation(c, false, 4 * 1000 + 3));
    }
    if (want(c, "vector_assign_tiers")) {
        RUN(case_vector_truncation(c, true, 7));
        RUN(case_vector_truncation(c, true, 8 * 4100));
    }
    if (want(c, "tiered") || want(c, "kv_compact"))
        for (int f16 = 0; f16 < 2; f16++) {
            vkv_dtype t = f16 ? VKV_F16 : VKV_F32;
            RUN(case_tiered(c, t, 8, 4, 8, 8, false, 37, 12, 10, 0, 1));          /* stories260K shape */
            RUN(case_tiered(c, t, 8, 2, 64, 64, true, 300, 100, 50, 5, 1));        /* decode after 5 generated */
            RUN(case_tiered(c, t, 4, 4, 128, 128, false, 600, 150, 300, 0, 23));   /* query-agnostic question prefill */
            RUN(case_tiered(c, t, 4, 2, 64, 64, true, 260, 130, 0, 3, 2));         /* p_a = 0: the eviction baseline */
            RUN(case_tiered(c, t, 2, 1, 256, 256, true, 129, 1, 128, 0, 1));        /* head dim 256, nearly all approximated */
            RUN(case_tiered(c, t, 4, 2, 48, 48, false, 1200, 300, 400, 7, 1));     /* decode split over the keys */
            RUN(case_tiered(c, t, 8, 4, 8, 8, true, 700, 600, 0, 1, 3));          /* split, baseline, 3 queries */
            RUN(case_tiered(c, t, 8, 4, 8, 8, false, 300, 40, 110, 0, 6));       /* stories260K question prefill */
            RUN(case_tiered(c, t, 8, 4, 8, 8, false, 300, 40, 110, 6, 1));       /* stories260K decode after it */
            /* Partial rotation: the un-RoPE's fallbacks (interleaved n_rot % 4 != 0,
             * NeoX n_rot % 8 != 0) and unrotated tail dims. */
            RUN(case_tiered(c, t, 4, 2, 64, 20, true, 300, 60, 90, 2, 1));
            RUN(case_tiered(c, t, 4, 2, 64, 32, true, 300, 60, 90, 0, 5));
            RUN(case_tiered(c, t, 4, 2, 64, 32, false, 300, 60, 90, 2, 1));
            RUN(case_tiered(c, t, 4, 2, 8, 2, false, 300, 60, 90, 0, 5));
            RUN(case_tiered(c, t, 4, 2, 16, 6, false, 300, 60, 90, 1, 1));
        }
    if (want(c, "argmax")) {
        RUN(case_argmax(c, 3, 32000, false));
        RUN(case_argmax(c, 1, 7, false));
        RUN(case_argmax(c, 9, 1000, true));
    }
    if (want(c, "gram")) {
        /* the calibration's sums for stories260K (4 KV heads x 8) and a
         * bigger layer (8 x 64), plus odd shapes, offsets and strides */
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 256, .m = 32, .n = 32, .ldx = 32, .ldy = 32, .n_blocks = 1}, " K^T K"));
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 37, .m = 8, .n = 8, .ldx = 32, .ldy = 32, .x_step = 8, .y_step = 8,
                                           .n_blocks = 4}, " per head"));
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 512, .m = 1, .n = 512, .ldy = 512, .n_blocks = 1, .x_ones = true}, ""));
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 300, .m = 512, .n = 512, .ldx = 512, .ldy = 512, .n_blocks = 1}, " K^T V"));
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 17, .m = 33, .n = 70, .ldx = 50, .ldy = 77, .x0 = 3, .y0 = 5,
                                           .n_blocks = 1}, " strided"));
        RUN(case_gram(c, (vkv_gram_params){.n_tok = 1, .m = 5, .n = 3, .ldx = 20, .ldy = 20, .x0 = 1, .y0 = 2, .x_step = 6,
                                           .y_step = 4, .n_blocks = 3}, " 1 token"));
    }
    if (want(c, "topk_select")) {
        RUN(case_topk(c, 1, 7, 3, false, TOPK_RANDOM));
        RUN(case_topk(c, 5, 1000, 100, false, TOPK_RANDOM));
        RUN(case_topk(c, 5, 1000, 300, false, TOPK_TIES));
        RUN(case_topk(c, 8, 4100, 2050, false, TOPK_TIES));
        RUN(case_topk(c, 8, 4100, 2050, false, TOPK_RANDOM));
        RUN(case_topk(c, 4, 131072, 1000, false, TOPK_RANDOM));
        RUN(case_topk(c, 3, 500, 0, false, TOPK_RANDOM));
        RUN(case_topk(c, 3, 500, 500, false, TOPK_TIES));
        RUN(case_topk(c, 6, 999, 400, false, TOPK_SPECIAL));
        RUN(case_topk(c, 6, 999, 30, false, TOPK_SPECIAL)); /* fewer than the +inf: earliest of them */
        RUN(case_topk(c, 9, 777, 0, true, TOPK_TIES));
    }
    /* Scorers: GQA 4:1 at two head sizes, f32 and f16 caches; n = 64 is all
     * window for SnapKV / PyramidKV; block-wise KeyDiff with a partial last block. */
    static const char *const presses[] = {"knorm", "keydiff", "streamingllm", "snapkv", "pyramidkv", "tova",
                                          "observed", "expected", "kvzip"};
    for (size_t i = 0; i < sizeof presses / sizeof *presses; i++) {
        char op[32];
        snprintf(op, sizeof op, "press_%s", presses[i]);
        if (!want(c, op)) continue;
        const uint32_t room = strcmp(presses[i], "kvzip") ? 0 : 100; /* KVzip's reconstruction queries */
        for (int f16 = 0; f16 < 2; f16++) {
            vkv_dtype kv = f16 ? VKV_F16 : VKV_F32;
            RUN(case_press(c, presses[i], kv, 8, 2, 64, 300, 320 + room, 0));
            /* ObservedAttention and ExpectedAttention take every query: a shorter context */
            const uint32_t n_long = strcmp(presses[i], "observed") && strcmp(presses[i], "expected") ? 1500 : 700;
            RUN(case_press(c, presses[i], kv, 8, 2, 128, n_long, 1536 + room, 0));
        }
        RUN(case_press(c, presses[i], VKV_F16, 4, 4, 32, 64, 64 + room, 0));
        if (!strcmp(presses[i], "keydiff")) RUN(case_press(c, presses[i], VKV_F16, 8, 2, 64, 1000, 1024, 128));
        /* a cache over 128 MiB: bound two KV heads per dispatch on lavapipe */
        if (c->big && (!strcmp(presses[i], "knorm") || !strcmp(presses[i], "keydiff") || !strcmp(presses[i], "snapkv")))
            RUN(case_press(c, presses[i], VKV_F32, 8, 4, 128, 300, 140000, 0));
    }
}

static void print_usage(void)
{
    printf("usage: vkvector conform [--device N] [--op NAME] [--json FILE] [--no-big] [--seed S]\n\n"
           "Runs every GPU op on every Vulkan device (or device N) against its CPU reference and\n"
           "prints a table per device. Exit status is 1 when any case fails or any validation\n"
           "error is reported (VKVECTOR_VALIDATE=1 enables the validation layers).\n\n"
           "  --device N   only device N (default: all devices; also VKVECTOR_DEVICE)\n"
           "  --op NAME    only ops whose name contains NAME (get_rows, rms_norm, matvec,\n"
           "               matmul_tiled, matmul_coopmat, rope, softmax, silu_mul, add, argmax,\n"
           "               attn_prefill, attn_decode, topk_select, press_<scorer>, gram)\n"
           "  --json FILE  also write the results as JSON\n"
           "  --no-big     skip the cases with a weight over 128 MiB\n"
           "  --seed S     random seed (default 1)\n");
}

static void write_json_device(vkv_json_writer *w, const vkv_caps *caps, uint32_t index, const conform_ctx *c,
                              const char *error, uint32_t validation_errors)
{
    vkv_json_begin_object(w);
    vkv_json_key(w, "device_index"); vkv_json_uint(w, index);
    vkv_json_key(w, "device"); vkv_json_str(w, caps->name);
    vkv_json_key(w, "driver"); vkv_json_str(w, caps->driver_name);
    vkv_json_key(w, "driver_info"); vkv_json_str(w, caps->driver_info);
    vkv_json_key(w, "validation_errors"); vkv_json_uint(w, validation_errors);
    vkv_json_key(w, "error");
    if (error) vkv_json_str(w, error);
    else vkv_json_null(w);
    vkv_json_key(w, "results");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < c->n_results; i++) {
        const conform_result *r = &c->results[i];
        vkv_json_begin_object(w);
        vkv_json_key(w, "op"); vkv_json_str(w, r->op);
        vkv_json_key(w, "type"); vkv_json_str(w, r->type);
        vkv_json_key(w, "shape"); vkv_json_str(w, r->shape);
        vkv_json_key(w, "nmse"); vkv_json_num(w, r->nmse);
        vkv_json_key(w, "threshold"); vkv_json_num(w, r->threshold);
        vkv_json_key(w, "pass"); vkv_json_bool(w, r->pass);
        vkv_json_key(w, "skipped"); vkv_json_bool(w, r->skipped);
        vkv_json_key(w, "gpu_ms"); vkv_json_num(w, r->gpu_ms);
        vkv_json_key(w, "note"); vkv_json_str(w, r->note);
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
    vkv_json_end_object(w);
}

int cmd_conform(int argc, char **argv)
{
    const char *json_path = NULL, *filter = NULL;
    int device = cli_device_index_from_env();
    bool big = true;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage();
            return 0;
        } else if (!strcmp(a, "--json")) {
            if (!(json_path = cli_flag_value("conform", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--op")) {
            if (!(filter = cli_flag_value("conform", argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--device")) {
            if (!(v = cli_flag_value("conform", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("conform", "--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = cli_flag_value("conform", argc, argv, &i))) return 2;
            if (!cli_parse_i64(v, 0, INT64_MAX, &iv)) return cli_usage_error("conform", "--seed wants a number, got '%s'", v);
            seed = (uint64_t)iv;
        } else if (!strcmp(a, "--no-big")) {
            big = false;
        } else {
            return cli_usage_error("conform", "unknown option '%s'", a);
        }
    }
    vkv_instance *inst;
    vkv_status st = vkv_instance_create(vkv_validation_requested(), vkv_validation_requested(), &inst);
    if (st) return cli_fail("conform", st);
    uint32_t n_dev = vkv_instance_n_devices(inst);
    if (device >= (int)n_dev) {
        vkv_instance_destroy(inst);
        fprintf(stderr, "vkvector conform: device %d does not exist (%u device(s); see 'vkvector devices')\n", device, n_dev);
        return 1;
    }
    FILE *jf = NULL;
    vkv_json_writer jw;
    if (json_path) {
        if (!(jf = fopen(json_path, "w"))) {
            vkv_instance_destroy(inst);
            fprintf(stderr, "vkvector conform: cannot write '%s'\n", json_path);
            return 1;
        }
        vkv_json_init(&jw, jf, true);
        vkv_json_begin_object(&jw);
        vkv_json_key(&jw, "validation_layers"); vkv_json_bool(&jw, vkv_instance_validation_enabled(inst));
        vkv_json_key(&jw, "devices");
        vkv_json_begin_array(&jw);
    }
    printf("vkvector conform: %u device(s), validation layers %s\n", n_dev,
           vkv_instance_validation_enabled(inst) ? "on" : "off");
    size_t total_fail = 0, total_pass = 0, total_skip = 0;
    bool any_error = false;
    for (uint32_t d = 0; d < n_dev; d++) {
        if (device >= 0 && (uint32_t)device != d) continue;
        const vkv_caps *caps = vkv_instance_caps(inst, d);
        conform_ctx c = {.rng = vkv_rng_new(seed), .filter = filter, .big = big, .caps = caps};
        uint32_t verr_before = vkv_instance_validation_errors(inst);
        char error[1024] = "";
        st = vkv_gpu_create(inst, (int)d, &c.gpu);
        if (!st) {
            vkv_gpu_set_profiling(c.gpu, true);
            uint64_t a = caps->min_storage_buffer_offset_alignment;
            c.guard_bytes = a > 256 ? a : 256;
            run_suite(&c);
            st = c.fatal;
        }
        if (st) snprintf(error, sizeof error, "%s: %s", vkv_status_name(st), vkv_last_error());
        vkv_gpu_destroy(c.gpu);
        uint32_t verr = vkv_instance_validation_errors(inst) - verr_before;

        printf("\ndevice %u: %s  (driver %s, %s)\n", d, caps->name, caps->driver_name, caps->driver_info);
        printf("%-24s %-6s %-52s %11s %9s %-5s %10s\n", "op", "type", "shape", "NMSE", "threshold", "pass", "GPU ms");
        size_t fail = 0, pass = 0, skip = 0;
        for (size_t i = 0; i < c.n_results; i++) {
            const conform_result *r = &c.results[i];
            if (r->skipped) {
                printf("%-24s %-6s %-52s %11s %9s %-5s %10s  %s\n", r->op, r->type, r->shape, "-", "-", "skip", "-", r->note);
                skip++;
                continue;
            }
            printf("%-24s %-6s %-52s %11.3e %9.0e %-5s %10.3f%s%s\n", r->op, r->type, r->shape, r->nmse, r->threshold,
                   r->pass ? "yes" : "NO", r->gpu_ms, r->note[0] ? "  " : "", r->note);
            if (r->pass) pass++;
            else fail++;
        }
        if (error[0]) {
            printf("ERROR on device %u: %s\n", d, error);
            any_error = true;
        }
        if (verr) printf("%u validation error(s) on device %u\n", verr, d);
        printf("device %u: %zu passed, %zu failed, %zu skipped%s\n", d, pass, fail, skip,
               caps->timestamps ? "" : " (no GPU timestamps)");
        total_fail += fail + (verr ? 1 : 0);
        total_pass += pass;
        total_skip += skip;
        if (jf) write_json_device(&jw, caps, d, &c, error[0] ? error : NULL, verr);
        free(c.results);
    }
    if (jf) {
        vkv_json_end_array(&jw);
        vkv_json_end_object(&jw);
        fclose(jf);
    }
    vkv_instance_destroy(inst);
    printf("\nconform: %zu passed, %zu failed, %zu skipped\n", total_pass, total_fail + (any_error ? 1 : 0), total_skip);
    return total_fail || any_error ? 1 : 0;
}
