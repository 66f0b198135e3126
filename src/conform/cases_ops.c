/* The conformance cases of the basic ops: get_rows, rms_norm, the matmul paths,
 * RoPE, softmax, the elementwise ops, argmax, add_bias, kv_store and gram. */
#include "conform/cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_ops.h"
#include "ref/ref_vector.h"
#include "vk/ops_vector.h"

/* ---------------- get_rows ---------------- */

typedef struct { vkv_dtype t; guarded table, ids, out; uint64_t n_rows; uint32_t n_cols, n_ids; } get_rows_args;

static vkv_status rec_get_rows(conform_ctx *c, void *p)
{
    get_rows_args *a = p;
    return vkv_op_get_rows(c->gpu, a->t, a->table.view, a->n_rows, a->n_cols, a->ids.view, a->n_ids, a->out.view);
}

vkv_status case_get_rows(conform_ctx *c, vkv_dtype t, uint64_t n_rows, uint32_t n_cols, uint32_t n_ids)
{
    char shape[96];
    snprintf(shape, sizeof shape, "table %llux%u, %u ids", (unsigned long long)n_rows, n_cols, n_ids);
    conform_result *r = conform_new_result(c, "get_rows", vkv_dtype_get(t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t rb = vkv_dtype_row_bytes(t, n_cols);
    float *src = conform_random_f32(c, (size_t)n_rows * n_cols);
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
    if ((st = conform_weight_create(c, t, n_cols, n_rows, table, &a.table)) || (st = conform_guarded_create(c, 4ull * n_ids, ids, &a.ids)) ||
        (st = conform_guarded_create(c, 4ull * n_ids * n_cols, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_get_rows, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, (size_t)n_ids * n_cols, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_EXACT, ms);
done:
    conform_guarded_destroy(c, &a.table);
    conform_guarded_destroy(c, &a.ids);
    conform_guarded_destroy(c, &a.out);
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

vkv_status case_rms_norm(conform_ctx *c, uint32_t rows, uint32_t n, bool weight, const char *what)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u%s%s", rows, n, weight ? "" : " no weight", what);
    conform_result *r = conform_new_result(c, "rms_norm", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = conform_random_f32(c, sz), *w = conform_random_f32(c, n), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    rms_args a = {.rows = rows, .n = n, .weight = weight};
    vkv_status st = VKV_OK;
    if (!x || !w || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_rms_norm(x, weight ? w : NULL, rows, n, 1e-5f, ref);
    if ((st = conform_guarded_create(c, sz * 4, x, &a.x)) || (st = conform_guarded_create(c, 4ull * n, w, &a.w)) ||
        (st = conform_guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_rms, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, sz, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.w); conform_guarded_destroy(c, &a.out);
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

/* The batched decode needs more than closeness (infer/forward.h): every
 * column of the multi-column matvec, got[n, m], must be bitwise what the
 * single-column kernel gives for that column. A second result, "matvec_cols
 * bitwise": the single-column kernel on each column x[j, :] of x[n, k] by
 * itself (its own buffer: rows of any length), compared by bytes. */
static vkv_status matvec_cols_bitwise(conform_ctx *c, const mm_args *a, const float *x, const float *got,
                                      const char *shape)
{
    conform_result *r = conform_new_result(c, "matvec_cols bitwise", vkv_dtype_get(a->t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    const size_t count = (size_t)a->n * a->m;
    float *single = malloc(count * 4);
    mm_args s = *a;
    s.path = VKV_MATMUL_MATVEC;
    s.n = 1;
    s.x = s.y = (guarded){0};
    vkv_status st = VKV_OK;
    double ms = 0;
    bool guards_all = true;
    if (!single) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t j = 0; j < a->n; j++) {
        double ms1 = 0;
        bool guards;
        if ((st = conform_guarded_create(c, 4ull * a->k, x + (size_t)j * a->k, &s.x)) ||
            (st = conform_guarded_create(c, 4ull * a->m, NULL, &s.y)) || (st = conform_run_recorded(c, rec_mm, &s, &ms1)) ||
            (st = conform_guarded_read(c, &s.y, single + (size_t)j * a->m, &guards)))
            goto done;
        conform_guarded_destroy(c, &s.x);
        conform_guarded_destroy(c, &s.y);
        guards_all &= guards;
        ms += ms1;
    }
    conform_finish_bitwise(r, single, got, count, guards_all, ms);
done:
    conform_guarded_destroy(c, &s.x);
    conform_guarded_destroy(c, &s.y);
    free(single);
    return st;
}

vkv_status case_matmul(conform_ctx *c, vkv_matmul_path path, vkv_dtype t, uint32_t m, uint32_t k, uint32_t n)
{
    char shape[96];
    size_t rb = vkv_dtype_row_bytes(t, k);
    snprintf(shape, sizeof shape, "W %ux%u (%.1f MiB) x %u", m, k, rb * (double)m / 1048576.0, n);
    conform_result *r = conform_new_result(c, conform_matmul_path_name(path), vkv_dtype_get(t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!vkv_matmul_path_supported(c->gpu, path, t)) {
        r->skipped = r->pass = true;
        snprintf(r->note, sizeof r->note, "no cooperative matrix support on this device");
        return VKV_OK;
    }
    uint8_t *w = malloc(rb * m);
    float *row = malloc((size_t)k * 4), *x = conform_random_f32(c, (size_t)n * k);
    float *ref = malloc((size_t)n * m * 4), *got = malloc((size_t)n * m * 4);
    mm_args a = {.t = t, .path = path, .m = m, .k = k, .n = n};
    vkv_status st = VKV_OK;
    if (!w || !row || !x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t i = 0; i < m; i++) {
        for (uint32_t j = 0; j < k; j++) row[j] = vkv_rng_uniform(&c->rng, -1.0f, 1.0f);
        vkv_quantize_row(t, row, w + (size_t)i * rb, k);
    }
    vkv_ref_matmul(t, w, m, k, x, n, ref);
    if ((st = conform_weight_create(c, t, k, m, w, &a.w)) || (st = conform_guarded_create(c, 4ull * n * k, x, &a.x)) ||
        (st = conform_guarded_create(c, 4ull * n * m, NULL, &a.y)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_mm, &a, &ms)) || (st = conform_guarded_read(c, &a.y, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, (size_t)n * m, &nanm);
    conform_finish(r, err, nanm, guards,
           path == VKV_MATMUL_COOPMAT ? NMSE_COOPMAT : NMSE_F32, ms);
    if (path == VKV_MATMUL_MATVEC_COLS) st = matvec_cols_bitwise(c, &a, x, got, shape);
done:
    conform_guarded_destroy(c, &a.w); conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.y);
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

vkv_status case_rope(conform_ctx *c, vkv_rope_mode mode, bool inverse, uint32_t head_dim, uint32_t n_rot,
                            float base, bool llama3, uint32_t n_tok, uint32_t n_heads, int32_t max_pos)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%s%s %ux%ux%u rot %u base %g%s pos<%d", mode == VKV_ROPE_NEOX ? "neox" : "interleaved",
             inverse ? " inverse" : "", n_tok, n_heads, head_dim, n_rot, base, llama3 ? " llama3" : "", max_pos);
    conform_result *r = conform_new_result(c, "rope", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)n_tok * n_heads * head_dim;
    float *x = conform_random_f32(c, sz), *ref = malloc(sz * 4), *got = malloc(sz * 4);
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
    if ((st = conform_guarded_create(c, sz * 4, x, &a.x)) || (st = conform_guarded_create(c, 4ull * n_tok, pos, &a.pos)) ||
        (st = conform_guarded_create(c, 4ull * (n_rot / 2), inv_freq, &a.freq)) || (st = conform_guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_rope, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, sz, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.pos); conform_guarded_destroy(c, &a.freq); conform_guarded_destroy(c, &a.out);
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

vkv_status case_softmax(conform_ctx *c, uint32_t rows, uint32_t cols, float scale, bool causal, int32_t off)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u scale %g%s", rows, cols, scale, causal ? " causal" : "");
    if (causal) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " offset %d", off);
    conform_result *r = conform_new_result(c, "softmax", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * cols;
    float *x = conform_random_f32(c, sz), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    softmax_args a = {.rows = rows, .cols = cols, .scale = scale, .causal = causal, .off = off};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < sz; i++) x[i] *= 8.0f; /* logits of a realistic spread */
    vkv_ref_softmax(x, rows, cols, scale, causal, off, ref);
    if ((st = conform_guarded_create(c, sz * 4, x, &a.x)) || (st = conform_guarded_create(c, sz * 4, NULL, &a.out))) goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_softmax, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, sz, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.out);
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

vkv_status case_elementwise(conform_ctx *c, bool silu, uint32_t n)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u", n);
    conform_result *r = conform_new_result(c, silu ? "silu_mul" : "add", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    float *x = conform_random_f32(c, n), *y = conform_random_f32(c, n), *ref = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    ew_args a = {.silu = silu, .n = n};
    vkv_status st = VKV_OK;
    if (!x || !y || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if (silu) {
        for (uint32_t i = 0; i < n; i++) x[i] *= 6.0f; /* gates span the curved part of silu */
        vkv_ref_silu_mul(x, y, n, ref);
    } else {
        vkv_ref_add(x, y, n, ref);
    }
    if ((st = conform_guarded_create(c, 4ull * n, x, &a.a)) || (st = conform_guarded_create(c, 4ull * n, y, &a.b)) ||
        (st = conform_guarded_create(c, 4ull * n, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_ew, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, n, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.a); conform_guarded_destroy(c, &a.b); conform_guarded_destroy(c, &a.out);
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

vkv_status case_argmax(conform_ctx *c, uint32_t rows, uint32_t n, bool ties)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u%s", rows, n, ties ? " with ties" : "");
    conform_result *r = conform_new_result(c, "argmax", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = conform_random_f32(c, sz);
    uint32_t *ref = malloc(rows * 4ull), *got = malloc(rows * 4ull);
    argmax_args a = {.rows = rows, .n = n};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if (ties) /* coarse values: many equal maxima per row */
        for (size_t i = 0; i < sz; i++) x[i] = roundf(x[i] * 2.0f);
    vkv_ref_argmax(x, rows, n, ref);
    if ((st = conform_guarded_create(c, sz * 4, x, &a.x)) || (st = conform_guarded_create(c, 4ull * rows, NULL, &a.out))) goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_argmax, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < rows; i++) wrong += ref[i] != got[i];
    /* Reported as the fraction of rows whose index differs; must be 0. */
    conform_finish(r, (double)wrong / rows, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u rows picked another index", wrong, rows);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.out);
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

vkv_status case_add_bias(conform_ctx *c, uint32_t rows, uint32_t width)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%ux%u + bias[%u]", rows, width, width);
    conform_result *r = conform_new_result(c, "add_bias", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * width;
    float *x = conform_random_f32(c, sz), *bias = conform_random_f32(c, width), *ref = malloc(sz * 4), *got = malloc(sz * 4);
    bias_args a = {.rows = rows, .width = width};
    vkv_status st = VKV_OK;
    if (!x || !bias || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_add_bias(x, bias, rows, width, ref);
    if ((st = conform_guarded_create(c, sz * 4, x, &a.a)) || (st = conform_guarded_create(c, 4ull * width, bias, &a.b)) ||
        (st = conform_guarded_create(c, sz * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_bias, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, sz, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.a); conform_guarded_destroy(c, &a.b); conform_guarded_destroy(c, &a.out);
    free(x); free(bias); free(ref); free(got);
    return st;
}

/* ---------------- kv_store ---------------- */

typedef struct { vkv_dtype t; guarded src, cache; uint32_t n_tok, n_kv, hd, n_ctx, slot0; } kv_store_args;

static vkv_status rec_kv_store(conform_ctx *c, void *p)
{
    kv_store_args *a = p;
    return vkv_op_kv_store(c->gpu, a->t, a->src.view, a->n_tok, a->n_kv, a->hd, a->cache.view, a->n_ctx, a->slot0);
}

/* Error of a quantized store: NMSE of the decoded cache against the
 * reference's decoded cache, over every row (the untouched ones must match
 * exactly too). A GPU whose 1/d is not correctly rounded may put a value
 * one step the other side of a rounding boundary (~1e-7); truncating instead
 * of rounding costs ~6e-5, a wrong layout or scale far more. */
#define NMSE_KV_QUANT 1e-6

static double decoded_nmse(vkv_dtype t, uint32_t hd, size_t rows, const uint8_t *ref, const uint8_t *got)
{
    const size_t rb = vkv_kv_row_bytes(t, hd);
    float *a = malloc(sizeof *a * rows * hd), *b = malloc(sizeof *b * rows * hd);
    double err = INFINITY;
    bool nanm = false;
    if (a && b) {
        for (size_t r = 0; r < rows; r++) {
            vkv_kv_decode_row(t, hd, ref + r * rb, a + r * hd);
            vkv_kv_decode_row(t, hd, got + r * rb, b + r * hd);
        }
        err = conform_nmse_f32(a, b, rows * hd, &nanm);
    }
    free(a);
    free(b);
    return nanm ? INFINITY : err;
}

/* The cache starts full of other data: slots outside [slot0, slot0+n_tok)
 * must come back unchanged, and the written ones bit-exact (f16, f32) or
 * within NMSE_KV_QUANT of the reference quantizer (q8_0, q4_0). */
vkv_status case_kv_store(conform_ctx *c, vkv_dtype t, uint32_t n_tok, uint32_t n_kv, uint32_t hd, uint32_t n_ctx,
                         uint32_t slot0)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u tokens x %u heads x %u -> slots %u.. of %u", n_tok, n_kv, hd, slot0, n_ctx);
    conform_result *r = conform_new_result(c, "kv_store", vkv_dtype_get(t)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t src_n = (size_t)n_tok * n_kv * hd, cache_bytes = vkv_kv_cache_bytes(t, n_kv, n_ctx, hd);
    float *src = conform_random_f32(c, src_n);
    uint8_t *init = malloc(cache_bytes), *ref = malloc(cache_bytes), *got = malloc(cache_bytes);
    kv_store_args a = {.t = t, .n_tok = n_tok, .n_kv = n_kv, .hd = hd, .n_ctx = n_ctx, .slot0 = slot0};
    vkv_status st = VKV_OK;
    if (!src || !init || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < cache_bytes; i++) init[i] = (uint8_t)(vkv_rng_u64(&c->rng) & 0x3f); /* finite values */
    memcpy(ref, init, cache_bytes);
    vkv_kv_cache_store(t, ref, n_kv, n_ctx, hd, slot0, src, n_tok);
    if ((st = conform_guarded_create(c, src_n * 4, src, &a.src)) || (st = conform_guarded_create(c, cache_bytes, init, &a.cache))) goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_kv_store, &a, &ms)) || (st = conform_guarded_read(c, &a.cache, got, &guards))) goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < cache_bytes; i++) wrong += ref[i] != got[i];
    if (vkv_kv_type_quantized(t))
        conform_finish(r, decoded_nmse(t, hd, (size_t)n_kv * n_ctx, ref, got), false, guards, NMSE_KV_QUANT, ms);
    else
        conform_finish(r, (double)wrong / cache_bytes, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%zu of %zu cache bytes differ", wrong, cache_bytes);
done:
    conform_guarded_destroy(c, &a.src); conform_guarded_destroy(c, &a.cache);
    free(src); free(init); free(ref); free(got);
    return st;
}

/* ---------------- kv_convert ---------------- */

typedef struct {
    vkv_dtype src_t, dst_t;
    guarded src, dst;
    uint32_t hd, n_rows, src_row0, dst_row0;
} kv_convert_args;

static vkv_status rec_kv_convert(conform_ctx *c, void *p)
{
    kv_convert_args *a = p;
    return vkv_op_kv_convert_rows(c->gpu, a->src.view, a->src_t, a->src_row0, a->dst.view, a->dst_t, a->dst_row0,
                                  a->n_rows, a->hd);
}

/* Rows outside the destination range must come back unchanged; the converted
 * ones bit-exact (a row of the same type, or decoded into f16/f32) or within
 * NMSE_KV_QUANT of the reference quantizer. */
vkv_status case_kv_convert(conform_ctx *c, vkv_dtype src_t, vkv_dtype dst_t, uint32_t hd, uint32_t n_rows,
                           uint32_t src_row0, uint32_t dst_row0)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u rows x %u from row %u -> row %u", n_rows, hd, src_row0, dst_row0);
    char types[32];
    snprintf(types, sizeof types, "%s>%s", vkv_dtype_get(src_t)->name, vkv_dtype_get(dst_t)->name);
    conform_result *r = conform_new_result(c, "kv_convert", types, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    const uint32_t src_rows = src_row0 + n_rows + 2, dst_rows = dst_row0 + n_rows + 3;
    const size_t sbytes = vkv_kv_row_bytes(src_t, hd) * src_rows, dbytes = vkv_kv_row_bytes(dst_t, hd) * dst_rows;
    float *x = conform_random_f32(c, (size_t)src_rows * hd);
    uint8_t *src = malloc(sbytes), *init = malloc(dbytes), *ref = malloc(dbytes), *got = malloc(dbytes);
    kv_convert_args a = {.src_t = src_t, .dst_t = dst_t, .hd = hd, .n_rows = n_rows, .src_row0 = src_row0,
                         .dst_row0 = dst_row0};
    vkv_status st = VKV_OK;
    if (!x || !src || !init || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_kv_cache_store(src_t, src, 1, src_rows, hd, 0, x, src_rows);
    for (size_t i = 0; i < dbytes; i++) init[i] = (uint8_t)(vkv_rng_u64(&c->rng) & 0x3f); /* finite values */
    memcpy(ref, init, dbytes);
    vkv_ref_kv_convert_rows(src_t, src, src_row0, dst_t, ref, dst_row0, n_rows, hd);
    if ((st = conform_guarded_create(c, sbytes, src, &a.src)) || (st = conform_guarded_create(c, dbytes, init, &a.dst)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_kv_convert, &a, &ms)) || (st = conform_guarded_read(c, &a.dst, got, &guards)))
        goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < dbytes; i++) wrong += ref[i] != got[i];
    if (vkv_kv_type_quantized(dst_t) && src_t != dst_t)
        conform_finish(r, decoded_nmse(dst_t, hd, dst_rows, ref, got), false, guards, NMSE_KV_QUANT, ms);
    else
        conform_finish(r, (double)wrong / dbytes, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%zu of %zu bytes differ", wrong, dbytes);
done:
    conform_guarded_destroy(c, &a.src); conform_guarded_destroy(c, &a.dst);
    free(x); free(src); free(init); free(ref); free(got);
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
vkv_status case_gram(conform_ctx *c, vkv_gram_params p, const char *what)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u tok, %u x [%u, %u]%s%s", p.n_tok, p.n_blocks, p.m, p.n, p.x_ones ? " ones" : "", what);
    conform_result *r = conform_new_result(c, "gram", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t nx = (size_t)p.n_tok * p.ldx + 1, ny = (size_t)p.n_tok * p.ldy, no = (size_t)p.n_blocks * p.m * p.n;
    float *x = conform_random_f32(c, nx), *y = conform_random_f32(c, ny), *ref = malloc(no * 4), *got = malloc(no * 4);
    double *refd = malloc(no * sizeof *refd);
    gram_args a = {.p = p};
    vkv_status st = VKV_OK;
    if (!x || !y || !ref || !got || !refd) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    vkv_ref_gram(&p, x, y, refd);
    for (size_t i = 0; i < no; i++) ref[i] = (float)refd[i];
    if ((st = conform_guarded_create(c, nx * 4, x, &a.x)) || (st = conform_guarded_create(c, ny * 4, y, &a.y)) ||
        (st = conform_guarded_create(c, no * 4, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_gram, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, no, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.y); conform_guarded_destroy(c, &a.out);
    free(x); free(y); free(ref); free(got); free(refd);
    return st;
}
