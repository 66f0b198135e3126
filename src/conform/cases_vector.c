/* The conformance cases of VECTOR: the residual, the truncation's elementwise
 * steps, compaction and tiered attention. */
#include "conform/cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_attn.h"
#include "ref/ref_ops.h"
#include "ref/ref_vector.h"
#include "vk/ops_vector.h"

/* ---------------- VECTOR: residual, compaction, tiered attention ---------------- */

typedef struct { vkv_vector_geom g; guarded k, v, w, f, eps, pos; uint32_t n_ctx, n; } resid_args;

static vkv_status rec_resid(conform_ctx *c, void *p)
{
    resid_args *a = p;
    return vkv_op_vector_residual(c->gpu, &a->g, a->k.view, a->v.view, a->n_ctx, a->n, a->w.view, a->f.view,
                                  a->pos.buf ? a->pos.view : (vkv_view){0}, a->eps.view);
}

vkv_status case_vector_residual(conform_ctx *c, vkv_dtype t, uint32_t n_kv, uint32_t hd, uint32_t n_rot, bool neox,
                                       uint32_t n_ctx, uint32_t n, bool joint, bool with_pos)
{
    char shape[128];
    const uint32_t S = joint ? n_kv : 1;
    snprintf(shape, sizeof shape, "%u heads x %u tokens (of %u) x %u, rot %u %s%s%s", n_kv, n, n_ctx, hd, n_rot,
             neox ? "neox" : "interleaved", joint ? ", joint map" : "", with_pos ? ", gathered positions" : "");
    conform_result *r = conform_new_result(c, "vector_residual", t == VKV_F16 ? "f16" : "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t rows = (size_t)n_kv * n_ctx, cb = (t == VKV_F16 ? 2 : 4) * rows * hd;
    void *k = malloc(cb), *v = malloc(cb);
    const size_t wn = (size_t)S * n_kv * hd * hd;
    float *w = conform_random_f32(c, wn), inv_freq[128];
    float *ref = malloc(4ull * n_kv * n), *got = malloc(4ull * n_kv * n);
    int32_t *pos = with_pos ? malloc(4ull * n_kv * n) : NULL;
    resid_args a = {.g = {t, n_kv, hd, n_rot, neox, S, t, t}, .n_ctx = n_ctx, .n = n};
    vkv_status st = VKV_OK;
    if (!k || !v || !w || !ref || !got || (with_pos && !pos)) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    /* a tiered layer gathered back: increasing positions with gaps, far past the slot count */
    for (uint32_t h = 0; h < n_kv && pos; h++)
        for (uint32_t j = 0, p = 0; j < n; j++, p += 1 + vkv_rng_below(&c->rng, 40)) pos[(size_t)h * n + j] = (int32_t)p;
    conform_fill_cache(c, t, k, rows, hd, 1.0f);
    conform_fill_cache(c, t, v, rows, hd, 1.0f);
    for (size_t i = 0; i < wn; i++) w[i] /= sqrtf((float)(S * hd));
    vkv_rope_params rp = {neox ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, hd, n_rot, 10000.0f, 1.0f, NULL, false};
    vkv_rope_inv_freq(&rp, inv_freq);
    vkv_ref_vector_residual(&rp, inv_freq, t, k, v, n_kv, n_ctx, hd, n, S, w, pos, ref);
    if ((st = conform_guarded_create(c, cb, k, &a.k)) || (st = conform_guarded_create(c, cb, v, &a.v)) ||
        (st = conform_guarded_create(c, 4 * wn, w, &a.w)) || (st = conform_guarded_create(c, 4ull * (n_rot / 2), inv_freq, &a.f)) ||
        (st = conform_guarded_create(c, 4ull * n_kv * n, NULL, &a.eps)) ||
        (pos && (st = conform_guarded_create(c, 4ull * n_kv * n, pos, &a.pos))))
        goto done;
    double ms = 0;
    bool guards, nanm;
    if ((st = conform_run_recorded(c, rec_resid, &a, &ms)) || (st = conform_guarded_read(c, &a.eps, got, &guards))) goto done;
    double err = conform_nmse_f32(ref, got, (size_t)n_kv * n, &nanm);
    conform_finish(r, err, nanm, guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.k); conform_guarded_destroy(c, &a.v); conform_guarded_destroy(c, &a.w); conform_guarded_destroy(c, &a.f);
    conform_guarded_destroy(c, &a.eps); conform_guarded_destroy(c, &a.pos);
    free(k); free(v); free(w); free(ref); free(got); free(pos);
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
    uint32_t n_app = a->n_new0 + a->n_q;
    switch (a->stage) {
    case 0:
        return vkv_op_kv_compact(c->gpu, &a->g, a->k.view, a->v.view, a->n_ctx, a->n, a->tiers.view, a->meta.view,
                                 a->kt.view, a->k_rows, a->vt.view, a->v_rows, a->pos.view, a->p_entries);
    case 1: {
        vkv_status st = vkv_op_kv_store_tiered(c->gpu, a->g.tier_k, false, a->src_k.view, n_app, a->g.n_kv_head, a->g.head_dim,
                                               a->kt.view, a->k_rows, a->meta.view, 0);
        return st ? st : vkv_op_kv_store_tiered(c->gpu, a->g.tier_v, true, a->src_v.view, n_app, a->g.n_kv_head, a->g.head_dim,
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

vkv_status case_tiered(conform_ctx *c, vkv_dtype t, vkv_dtype tk, vkv_dtype tv, uint32_t n_head, uint32_t n_kv, uint32_t hd, uint32_t n_rot,
                              bool neox, uint32_t n, uint32_t n_ret, uint32_t n_apx, uint32_t n_new0, uint32_t n_q, bool joint)
{
    char shape[128], rot[32] = "";
    const uint32_t S = joint ? n_kv : 1;
    const size_t wn = (size_t)S * n_kv * hd * hd;
    if (n_rot != hd) snprintf(rot, sizeof rot, " (rot %u%s)", n_rot, neox ? " neox" : "");
    snprintf(shape, sizeof shape, "%u/%u heads x %u%s, ctx %u -> R %u A %u, +%u new, %u q%s", n_head, n_kv, hd, rot, n,
             n_ret, n_apx, n_new0, n_q, joint ? ", joint map" : "");
    /* quantized tiers (compacted from the f16 working cache): no materialised path */
    const bool quant = tk != t || tv != t;
    char tn[40];
    if (!quant) snprintf(tn, sizeof tn, "%s", vkv_dtype_get(t)->name);
    else snprintf(tn, sizeof tn, "%s/%s", vkv_dtype_get(tk)->name, vkv_dtype_get(tv)->name); /* K/V tiers, from f16 */
    if (!conform_reserve_results(c, 5)) return vkv_error(VKV_ERR_OOM, "out of host memory");
    conform_result *rc = conform_new_result(c, "kv_compact", tn, shape), *ra = conform_new_result(c, "kv_store_tiered", tn, shape);
    conform_result *rf = conform_new_result(c, "attn_tiered_fused", tn, shape);
    conform_result *rm = quant ? NULL : conform_new_result(c, "attn_tiered_mat", tn, shape);
    conform_result *rx = quant ? NULL : conform_new_result(c, "attn_tiered_fused_vs_mat", tn, shape);
    if (!rc || !ra || !rf || (!quant && (!rm || !rx))) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t n_app = n_new0 + n_q, n_ctx = n + 3;
    size_t rb = vkv_kv_row_bytes(t, hd), krb = vkv_kv_row_bytes(tk, hd), vrb = vkv_kv_row_bytes(tv, hd);
    size_t plain = (size_t)n_kv * n_ctx;
    tiered_args a = {.g = {t, n_kv, hd, n_rot, neox, S, tk, tv}, .n_ctx = n_ctx, .n = n, .n_head = n_head, .n_q = n_q,
                     .n_new0 = n_new0, .max_apx = n_apx, .max_comp = n_ret + n_apx};
    a.k_rows = (uint64_t)n_kv * (n_ret + n_apx + n_app);
    a.v_rows = (uint64_t)n_kv * (n_ret + n_app);
    a.p_entries = (uint64_t)n_kv * (n_ret + n_apx);
    void *k = malloc(plain * rb), *v = malloc(plain * rb), *kt = calloc(a.k_rows, krb), *vt = calloc(a.v_rows, vrb);
    void *kt_got = malloc(a.k_rows * krb), *vt_got = malloc(a.v_rows * vrb);
    uint32_t *tiers = calloc((size_t)n_kv * n, 4);
    uint8_t *tiers8 = calloc((size_t)n_kv * n, 1);
    vkv_tier_head *meta = calloc(n_kv, sizeof *meta);
    int32_t *pos = calloc(a.p_entries + 1, 4), *pos_got = calloc(a.p_entries + 1, 4);
    float *src_k = conform_random_f32(c, (size_t)n_app * n_kv * hd), *src_v = conform_random_f32(c, (size_t)n_app * n_kv * hd);
    float *q = conform_random_f32(c, (size_t)n_q * n_head * hd), *w = conform_random_f32(c, wn), inv_freq[128];
    float *ref = malloc(4ull * n_q * n_head * hd), *got_f = malloc(4ull * n_q * n_head * hd), *got_m = malloc(4ull * n_q * n_head * hd);
    vkv_status st = VKV_OK;
    if (!k || !v || !kt || !vt || !kt_got || !vt_got || !tiers || !tiers8 || !meta || !pos || !pos_got || !src_k || !src_v ||
        !q || !w || !ref || !got_f || !got_m) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto done;
    }
    conform_fill_cache(c, t, k, plain, hd, 1.0f);
    conform_fill_cache(c, t, v, plain, hd, 1.0f);
    for (size_t i = 0; i < wn; i++) w[i] /= sqrtf((float)(S * hd));
    for (size_t i = 0; i < (size_t)n_q * n_head * hd; i++) q[i] *= 3.0f; /* peaked softmax */
    /* exactly n_ret retained and n_apx approximated per head, at random
     * positions (the same in every head with a joint map) */
    for (uint32_t h = 0; h < n_kv; h++) {
        uint8_t *th = tiers8 + (size_t)h * n;
        for (uint32_t j = 0; j < n; j++) th[j] = j < n_ret ? VKV_TIER_RETAINED : j < n_ret + n_apx ? VKV_TIER_APPROXIMATED : 0;
        if (joint && h > 0) memcpy(th, tiers8, n);
        else
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
    vkv_ref_kv_compact(t, tk, tv, k, v, n_kv, n_ctx, hd, n, tiers8, meta, kt, vt, pos);
    /* appended tokens, as kv_store_tiered lays them out */
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t tt = 0; tt < n_app; tt++) {
            vkv_kv_cache_store(tk, kt, 1, (uint32_t)a.k_rows, hd, meta[h].k_off + n_ret + n_apx + tt,
                               src_k + ((size_t)tt * n_kv + h) * hd, 1);
            vkv_kv_cache_store(tv, vt, 1, (uint32_t)a.v_rows, hd, meta[h].v_off + n_ret + tt,
                               src_v + ((size_t)tt * n_kv + h) * hd, 1);
        }
    vkv_rope_params rp = {neox ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, hd, n_rot, 10000.0f, 1.0f, NULL, false};
    vkv_rope_inv_freq(&rp, inv_freq);
    vkv_tiered_attn_params tp = {n_q, n_head, n_kv, hd, n_new0, n, 1.0f / sqrtf((float)hd), tk, tv, S};
    vkv_ref_attention_tiered(&tp, &rp, inv_freq, meta, q, kt, vt, pos, w, ref);

    if ((st = conform_guarded_create(c, plain * rb, k, &a.k)) || (st = conform_guarded_create(c, plain * rb, v, &a.v)) ||
        (st = conform_guarded_create(c, 4ull * n_kv * n, tiers, &a.tiers)) || (st = conform_guarded_create(c, sizeof *meta * n_kv, meta, &a.meta)) ||
        (st = conform_guarded_create(c, a.k_rows * krb, NULL, &a.kt)) || (st = conform_guarded_create(c, a.v_rows * vrb, NULL, &a.vt)) ||
        (st = conform_guarded_create(c, 4ull * (a.p_entries + 1), NULL, &a.pos)) ||
        (st = conform_guarded_create(c, 4ull * n_app * n_kv * hd, src_k, &a.src_k)) ||
        (st = conform_guarded_create(c, 4ull * n_app * n_kv * hd, src_v, &a.src_v)) ||
        (st = conform_guarded_create(c, 4ull * n_q * n_head * hd, q, &a.q)) || (st = conform_guarded_create(c, 4 * wn, w, &a.w)) ||
        (st = conform_guarded_create(c, 4ull * (n_rot / 2 ? n_rot / 2 : 1), inv_freq, &a.f)) || (st = conform_guarded_create(c, 4ull * a.k_rows * hd, NULL, &a.vhat)) ||
        (st = conform_guarded_create(c, 4ull * n_q * n_head * hd, NULL, &a.out)) ||
        (st = conform_guarded_create(c, 4ull * n_kv * hd * hd, NULL, &a.wzero)) ||
        (st = vkv_buffer_fill(c->gpu, a.wzero.buf, c->guard_bytes, 4ull * n_kv * hd * hd, 0)))
        goto done;
    uint64_t sbytes = vkv_tiered_attn_scratch_bytes(n_q, n_head, hd, n_ret + n_apx + n_new0 + n_q);
    if (sbytes && (st = conform_guarded_create(c, sbytes, NULL, &a.scratch))) goto done;
    /* The compaction leaves the appended region alone: compare the compressed part only. */
    double ms = 0;
    bool g1, g2, g3, nanm;
    if ((st = conform_run_recorded(c, rec_tiered, &a, &ms)) || (st = conform_guarded_read(c, &a.kt, kt_got, &g1)) ||
        (st = conform_guarded_read(c, &a.vt, vt_got, &g2)) || (st = conform_guarded_read(c, &a.pos, pos_got, &g3)))
        goto done;
    /* Re-encoded rows are exact too: the same quantizer on the same f16 values (lavapipe; a GPU whose 1/d is
     * not correctly rounded may differ at a rounding boundary, and the case then fails and names it). */
    size_t wrong = 0;
    for (uint32_t h = 0; h < n_kv; h++) {
        wrong += memcmp((char *)kt_got + meta[h].k_off * krb, (char *)kt + meta[h].k_off * krb, (n_ret + n_apx) * krb) != 0;
        wrong += memcmp((char *)vt_got + meta[h].v_off * vrb, (char *)vt + meta[h].v_off * vrb, n_ret * vrb) != 0;
    }
    wrong += memcmp(pos_got, pos, 4 * a.p_entries) != 0;
    conform_finish(rc, (double)wrong, false, g1 && g2 && g3, NMSE_EXACT, ms);
    if (wrong) snprintf(rc->note, sizeof rc->note, "%zu heads/tables differ", wrong);
    a.stage = 1;
    if ((st = conform_run_recorded(c, rec_tiered, &a, &ms)) || (st = conform_guarded_read(c, &a.kt, kt_got, &g1)) ||
        (st = conform_guarded_read(c, &a.vt, vt_got, &g2)))
        goto done;
    wrong = (size_t)(memcmp(kt_got, kt, a.k_rows * krb) != 0) + (memcmp(vt_got, vt, a.v_rows * vrb) != 0);
    conform_finish(ra, (double)wrong, false, g1 && g2, NMSE_EXACT, ms);
    a.stage = 2;
    if ((st = conform_run_recorded(c, rec_tiered, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got_f, &g1))) goto done;
    double err = conform_nmse_f32(ref, got_f, (size_t)n_q * n_head * hd, &nanm);
    conform_finish(rf, err, nanm, g1, NMSE_F32, ms);
    if (quant) goto done;
    a.stage = 3;
    if ((st = conform_run_recorded(c, rec_tiered, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got_m, &g1))) goto done;
    err = conform_nmse_f32(ref, got_m, (size_t)n_q * n_head * hd, &nanm);
    conform_finish(rm, err, nanm, g1, NMSE_F32, ms);
    err = conform_nmse_f32(got_m, got_f, (size_t)n_q * n_head * hd, &nanm);
    conform_finish(rx, err, nanm, true, NMSE_F32, 0);
done:
    conform_guarded_destroy(c, &a.k); conform_guarded_destroy(c, &a.v); conform_guarded_destroy(c, &a.tiers); conform_guarded_destroy(c, &a.meta);
    conform_guarded_destroy(c, &a.kt); conform_guarded_destroy(c, &a.vt); conform_guarded_destroy(c, &a.pos); conform_guarded_destroy(c, &a.src_k);
    conform_guarded_destroy(c, &a.src_v); conform_guarded_destroy(c, &a.q); conform_guarded_destroy(c, &a.w); conform_guarded_destroy(c, &a.f);
    conform_guarded_destroy(c, &a.vhat); conform_guarded_destroy(c, &a.out); conform_guarded_destroy(c, &a.scratch); conform_guarded_destroy(c, &a.wzero);
    free(k); free(v); free(kt); free(vt); free(kt_got); free(vt_got); free(tiers); free(tiers8); free(meta); free(pos);
    free(pos_got); free(src_k); free(src_v); free(q); free(w); free(ref); free(got_f); free(got_m);
    return st;
}

/* ---------------- VECTOR: pooling a layer's heads (joint map) ---------------- */

typedef struct { guarded x, out; uint32_t rows, n; } head_mean_args;

static vkv_status rec_head_mean(conform_ctx *c, void *p)
{
    head_mean_args *a = p;
    return vkv_op_vector_head_mean(c->gpu, a->x.view, a->rows, a->n, a->out.view);
}

vkv_status case_vector_head_mean(conform_ctx *c, uint32_t rows, uint32_t n)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%u heads x %u tokens (with +inf forced keeps)", rows, n);
    conform_result *r = conform_new_result(c, "vector_head_mean", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    float *x = conform_random_f32(c, (size_t)rows * n), *ref = malloc(4ull * n), *got = malloc(4ull * n);
    head_mean_args a = {.rows = rows, .n = n};
    vkv_status st = VKV_OK;
    if (!x || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t j = 0; j < n; j += 13)
        for (uint32_t h = 0; h < rows; h++) x[(size_t)h * n + j] = INFINITY; /* a scorer's forced keeps */
    vkv_ref_vector_head_mean(x, rows, n, ref);
    if ((st = conform_guarded_create(c, 4ull * rows * n, x, &a.x)) || (st = conform_guarded_create(c, 4ull * n, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_head_mean, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    /* The same additions in the same order, then one division: bit-exact. */
    uint32_t wrong = 0;
    for (uint32_t j = 0; j < n; j++) wrong += memcmp(&ref[j], &got[j], 4) != 0;
    conform_finish(r, (double)wrong / n, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u outputs differ", wrong, n);
done:
    conform_guarded_destroy(c, &a.x); conform_guarded_destroy(c, &a.out);
    free(x); free(ref); free(got);
    return st;
}

/* ---------------- VECTOR: the truncation's elementwise steps ---------------- */

typedef struct { trunc_kind kind; guarded pool, b, out; uint32_t total; } trunc_args;

static vkv_status rec_trunc(conform_ctx *c, void *p)
{
    trunc_args *a = p;
    switch (a->kind) {
    case TRUNC_ASSIGN_TIERS: return vkv_op_vector_assign_tiers(c->gpu, a->pool.view, a->b.view, a->total, a->out.view);
    case TRUNC_POOL_EXTEND: return vkv_op_vector_pool_extend(c->gpu, a->pool.view, a->b.view, a->total, a->out.view);
    default: return vkv_op_vector_pool_scores(c->gpu, a->pool.view, a->b.view, a->total, a->out.view);
    }
}

/* Exact: every output word must equal the reference's (inf and NaN inputs included). */
vkv_status case_vector_truncation(conform_ctx *c, trunc_kind kind, uint32_t total)
{
    static const char *const names[] = {"vector_pool_scores", "vector_assign_tiers", "vector_pool_extend"};
    const bool assign = kind == TRUNC_ASSIGN_TIERS;
    char shape[96];
    snprintf(shape, sizeof shape, "%u tokens%s", total, assign ? "" : " (with inf / NaN inputs)");
    conform_result *r = conform_new_result(c, names[kind], assign ? "u32" : "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t *pool = malloc(4ull * total), *b = malloc(4ull * total), *ref = malloc(4ull * total), *got = malloc(4ull * total);
    trunc_args a = {.kind = kind, .total = total};
    vkv_status st = VKV_OK;
    if (!pool || !b || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (uint32_t i = 0; i < total; i++) {
        pool[i] = vkv_rng_below(&c->rng, 3) != 0;
        if (assign) b[i] = pool[i] && vkv_rng_below(&c->rng, 2);
        else {
            float e = vkv_rng_uniform(&c->rng, kind == TRUNC_POOL_EXTEND ? -4 : 0, 4);
            if (i % 97 == 5) e = INFINITY;
            if (i % 89 == 7) e = NAN;
            if (kind == TRUNC_POOL_EXTEND && i % 83 == 3) e = -INFINITY;
            memcpy(&b[i], &e, 4);
        }
    }
    if (assign) vkv_ref_vector_assign_tiers(pool, b, total, ref);
    else if (kind == TRUNC_POOL_EXTEND) vkv_ref_vector_pool_extend(pool, (const float *)b, total, (float *)ref);
    else vkv_ref_vector_pool_scores(pool, (const float *)b, total, (float *)ref);
    if ((st = conform_guarded_create(c, 4ull * total, pool, &a.pool)) || (st = conform_guarded_create(c, 4ull * total, b, &a.b)) ||
        (st = conform_guarded_create(c, 4ull * total, NULL, &a.out)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_trunc, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards))) goto done;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < total; i++) wrong += ref[i] != got[i];
    conform_finish(r, (double)wrong / total, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u outputs differ", wrong, total);
done:
    conform_guarded_destroy(c, &a.pool); conform_guarded_destroy(c, &a.b); conform_guarded_destroy(c, &a.out);
    free(pool); free(b); free(ref); free(got);
    return st;
}
