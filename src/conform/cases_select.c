/* The conformance cases of top-k selection and the press scorers. */
#include "conform/cases.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "press/press.h"
#include "ref/ref_attn.h"
#include "ref/ref_select.h"
#include "vk/ops_select.h"

/* ---------------- topk_select ---------------- */

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
vkv_status case_topk(conform_ctx *c, uint32_t rows, uint32_t n, uint32_t k, bool per_row, topk_data data)
{
    static const char *const data_name[] = {"random", "9 values (ties)", "+-inf, NaN, -0"};
    char shape[96];
    if (per_row) snprintf(shape, sizeof shape, "%ux%u k per row, %s", rows, n, data_name[data]);
    else snprintf(shape, sizeof shape, "%ux%u k %u, %s", rows, n, k, data_name[data]);
    conform_result *r = conform_new_result(c, "topk_select", "f32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    float *x = conform_random_f32(c, sz);
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
    if ((st = conform_guarded_create(c, sz * 4, x, &a.s)) || (st = conform_guarded_create(c, rows * 4ull, ks, &a.k)) ||
        (st = conform_guarded_create(c, sz * 4, NULL, &a.mask)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_topk, &a, &ms)) || (st = conform_guarded_read(c, &a.mask, got, &guards))) goto done;
    size_t wrong = 0;
    for (size_t i = 0; i < sz; i++) wrong += ref[i] != got[i];
    /* Reported as the fraction of mask entries that differ; must be 0. */
    conform_finish(r, (double)wrong / sz, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%zu of %zu mask entries differ", wrong, sz);
done:
    conform_guarded_destroy(c, &a.s); conform_guarded_destroy(c, &a.k); conform_guarded_destroy(c, &a.mask);
    free(x); free(ks); free(ref); free(got);
    return st;
}

/* ---------------- mask_row_counts ---------------- */

typedef struct { guarded mask, counts; uint32_t rows, n; } counts_args;

static vkv_status rec_counts(conform_ctx *c, void *p)
{
    counts_args *a = p;
    return vkv_op_mask_row_counts(c->gpu, a->mask.view, a->rows, a->n, a->counts.view);
}

/* Exact. Row 0 is all set, row 1 (when there is one) empty, the rest random
 * with any nonzero word counting as set. */
vkv_status case_mask_row_counts(conform_ctx *c, uint32_t rows, uint32_t n)
{
    char shape[64];
    snprintf(shape, sizeof shape, "%ux%u", rows, n);
    conform_result *r = conform_new_result(c, "mask_row_counts", "u32", shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t sz = (size_t)rows * n;
    uint32_t *mask = malloc(sz * 4), *ref = malloc(rows * 4ull), *got = malloc(rows * 4ull);
    counts_args a = {.rows = rows, .n = n};
    vkv_status st = VKV_OK;
    if (!mask || !ref || !got) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < sz; i++) {
        size_t row = i / n;
        mask[i] = row == 0 ? 1 : row == 1 ? 0 : vkv_rng_below(&c->rng, 2) * (1 + vkv_rng_below(&c->rng, 3));
    }
    vkv_ref_mask_row_counts(mask, rows, n, ref);
    if ((st = conform_guarded_create(c, sz * 4, mask, &a.mask)) || (st = conform_guarded_create(c, rows * 4ull, NULL, &a.counts)))
        goto done;
    double ms = 0;
    bool guards;
    if ((st = conform_run_recorded(c, rec_counts, &a, &ms)) || (st = conform_guarded_read(c, &a.counts, got, &guards))) goto done;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < rows; i++) wrong += ref[i] != got[i];
    conform_finish(r, (double)wrong / rows, false, guards, NMSE_EXACT, ms);
    if (wrong) snprintf(r->note, sizeof r->note, "%u of %u rows differ", wrong, rows);
done:
    conform_guarded_destroy(c, &a.mask); conform_guarded_destroy(c, &a.counts);
    free(mask); free(ref); free(got);
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
vkv_status case_press(conform_ctx *c, const char *press, vkv_dtype kv, uint32_t n_head, uint32_t n_kv_head,
                             uint32_t hd, uint32_t n, uint32_t n_ctx, uint32_t block)
{
    char op[32], shape[96];
    snprintf(op, sizeof op, "press_%s", press);
    snprintf(shape, sizeof shape, "hd %u heads %u/%u n %u/%u%s", hd, n_head, n_kv_head, n, n_ctx,
             block ? " block" : "");
    if (block) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), " %u", block);
    conform_result *r = conform_new_result(c, op, vkv_dtype_get(kv)->name, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    press_args a = {.ops = vkv_press_find(press), .pp = vkv_press_params_default(0.5f)};
    if (!a.ops) return VKV_ERR_ARG; /* the message names the known presses */
    a.pp.block = block;
    if (!strcmp(press, "random")) { /* a later sample of an evaluation, under seed 0: both reach the shader */
        a.pp.sample = 3;
        a.pp.seed = 0;
    }
    const bool capture = a.ops->capture_gpu != NULL, repeat = a.ops->repeat_pass;
    const uint32_t window = capture ? 0 : n < 64 ? n : 64;
    const uint32_t n_q = !capture ? window : repeat ? 100 : n, n_keys = repeat ? n + n_q : n;
    if (n_keys > n_ctx) return vkv_error(VKV_ERR_ARG, "press case: %u keys in a %u-slot cache", n_keys, n_ctx);
    const size_t qn = (size_t)n_q * n_head * hd, sn = (size_t)n_kv_head * n;
    const size_t cache_bytes = vkv_kv_cache_bytes(kv, n_kv_head, n_ctx, hd);
    vkv_attn_params ap = {.n_kv_head = n_kv_head, .head_dim = hd, .n_ctx_max = n_ctx, .n_kv = n_keys, .k_type = kv, .v_type = kv};
    float *q = conform_random_f32(c, qn), *ksrc = conform_random_f32(c, (size_t)n_keys * n_kv_head * hd);
    float *vsrc = conform_random_f32(c, (size_t)n_keys * n_kv_head * hd);
    /* CriticalKV's W_o [n_embd, n_head hd] f32 (a narrow residual stream keeps the reference quick) */
    const uint32_t n_embd = a.ops->needs_wo ? 48 : 0;
    float *wo = n_embd ? conform_random_f32(c, (size_t)n_embd * n_head * hd) : NULL;
    float *ref = malloc(sn * 4), *got = malloc(sn * 4), inv_freq[128];
    void *kc = malloc(cache_bytes), *vc = malloc(cache_bytes), *zeros = NULL;
    guarded kg = {0}, vg = {0}, qg = {0}, scratch = {0}, stg = {0}, fg = {0}, wg = {0};
    vkv_status st = VKV_OK;
    if (!q || !ksrc || !vsrc || !ref || !got || !kc || !vc || (n_embd && !wo)) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < qn; i++) q[i] *= 4.0f; /* sharper window attention than unit-scale noise gives */
    conform_poison_unused_slots(&ap, kv, kc);
    conform_poison_unused_slots(&ap, kv, vc);
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
                             .q_pos0 = repeat ? n : 0, .n_q = capture ? n_q : 0, .q_host = capture ? q : NULL,
                             .n_embd = n_embd, .wo_host = wo};
    if ((st = a.ops->score_ref(&a.pp, &a.in, ref))) goto done;
    const uint64_t state_bytes = a.ops->state_bytes ? a.ops->state_bytes(&a.pp, &a.in) : 16;
    if (!(zeros = calloc(1, state_bytes))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if ((st = conform_guarded_create(c, cache_bytes, kc, &kg)) || (st = conform_guarded_create(c, cache_bytes, vc, &vg)) ||
        (st = conform_guarded_create(c, qn * 4, q, &qg)) ||
        (st = conform_guarded_create(c, vkv_press_scratch_bytes(a.ops, &a.pp, &a.in), NULL, &scratch)) ||
        (st = conform_guarded_create(c, state_bytes, zeros, &stg)) || (st = conform_guarded_create(c, 2ull * hd, inv_freq, &fg)) ||
        (st = conform_guarded_create(c, sn * 4, NULL, &a.scores)) ||
        (n_embd && (st = conform_guarded_create(c, 4ull * n_embd * n_head * hd, wo, &wg))))
        goto done;
    a.in.wo = wg.view;
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
    if ((st = conform_run_recorded(c, rec_press, &a, &ms)) || (st = conform_guarded_read(c, &a.scores, got, &guards))) goto done;
    void *scr = malloc(scratch.bytes ? scratch.bytes : 1);
    if (!scr) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    st = conform_guarded_read(c, &scratch, scr, &scratch_guards);
    free(scr);
    if (st) goto done;
    /* Forced keeps (+inf, the forced band: press/press.h) and AdaKV's clamped ones
     * (FLT_MAX, press/adakv.c) must match exactly; the error is that of the other
     * scores (they would swamp it). */
    size_t inf_wrong = 0, m = 0;
    for (size_t i = 0; i < sn; i++) {
        const bool forced = vkv_press_is_forced(fabsf(ref[i])) || fabsf(ref[i]) == FLT_MAX;
        if (forced != (vkv_press_is_forced(fabsf(got[i])) || fabsf(got[i]) == FLT_MAX) || (forced && ref[i] != got[i]))
            inf_wrong++;
        if (forced) continue;
        ref[m] = ref[i];
        got[m++] = got[i];
    }
    double err = conform_nmse_f32(ref, got, m, &nanm);
    conform_finish(r, err, nanm || inf_wrong, guards && scratch_guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &kg); conform_guarded_destroy(c, &vg); conform_guarded_destroy(c, &qg); conform_guarded_destroy(c, &scratch);
    conform_guarded_destroy(c, &stg); conform_guarded_destroy(c, &fg); conform_guarded_destroy(c, &a.scores);
    conform_guarded_destroy(c, &wg);
    free(wo);
    free(q); free(ksrc); free(vsrc); free(ref); free(got); free(kc); free(vc); free(zeros);
    return st;
}
