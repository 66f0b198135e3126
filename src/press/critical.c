/* CriticalKV (kvpress's CriticalKVPress, epsilon 1e-4, first_stage_ratio 0.5)
 * over an inner scorer: two stages per KV head h of a layer of n tokens.
 *   1. the int((1 - p_c) n 0.5) highest inner scores are kept whatever follows
 *      (forced to +inf; kvpress: the dtype's max);
 *   2. every other score becomes (score + epsilon) vnorm[h, j], where vnorm is
 *      the L1 norm of the value projected through the attention output:
 *        vnorm[h, j] = mean over the query heads q of h's group of
 *                      sum_c |sum_d V[h, j, d] W_o[c, q head_dim + d]|
 *      (W_o [n_embd, n_head head_dim], the model's o_proj: the value's
 *      contribution to the residual stream through head q).
 * The driver then keeps each head's n_kept highest, as for any scorer. The
 * inner scorer's forced keeps (+inf; SnapKV's window in the forced band,
 * press/press.h) keep their scores through stage 2: above every reweighted
 * score, below stage 1's, the newest window token first (kvpress pads the
 * window with the maximum score, whose finite products keep it too).
 * GPU: the inner scorer into the scratch, vkv_op_topk_select (stage 1),
 * then shaders/press_critical.comp (stage 2 and the merge); the CPU reference's
 * norm is vkv_ref_projected_value_norm (src/ref/ref_attn.c).
 * critical-expected and critical-adakv-expected are kvpress's evaluation
 * registry's CriticalKVPress / CriticalAdaKVPress over
 * ExpectedAttentionPress(use_vnorm=False): their inner ExpectedAttention
 * always runs without the value norms (the expected attention alone, stage 2
 * then weighting it by the projected norm), whatever the caller's
 * vkv_press_params say, and the wrapper carries its query capture
 * (VKV_PRESS_WRAPPER_CAPTURE; docs/ARCHITECTURE.md §2). */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "ref/ref_attn.h"
#include "kvlayout/kv_counts.h"
#include "ref/ref_select.h"
#include "ref/ref_vector.h"
#include "vk/ops_select.h"
#include "vk/ops_vector.h"

#define CRITICAL_EPSILON 1e-4
#define CRITICAL_FIRST_STAGE_RATIO 0.5

/* int((1 - p_c) * n * first_stage_ratio), left to right in double as Python. */
static uint32_t first_stage_budget(const vkv_press_params *p, uint32_t n)
{
    return (uint32_t)((1.0 - p->compression_ratio) * n * CRITICAL_FIRST_STAGE_RATIO);
}

static uint64_t inner_offset(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_press_align_up(vkv_press_scratch_bytes(inner, p, in));
}

/* Scratch: the inner scorer's, then N_BUF buffers [H, n] (scores and masks),
 * then two [H] counts (CriticalAdaKV's budgets and first stages). */
#define N_BUF 4
static uint64_t critical_scratch_bytes(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    return inner_offset(inner, p, in) + N_BUF * vkv_press_align_up(4ull * in->n_kv_head * in->n) +
           2 * vkv_press_align_up(4ull * in->n_kv_head);
}

/* Buffer i of the scratch past the inner scorer's: i < N_BUF an [H, n] one, then the counts. */
static vkv_view scratch_buf(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in, int i)
{
    const uint64_t hn = vkv_press_align_up(4ull * in->n_kv_head * in->n), h4 = vkv_press_align_up(4ull * in->n_kv_head);
    const uint64_t off = inner_offset(inner, p, in) + (i < N_BUF ? i * hn : N_BUF * hn + (i - N_BUF) * h4);
    return vkv_press_scratch_at(in, off);
}

static vkv_status critical_check(vkv_gpu *gpu, const vkv_press_ops *inner, const vkv_press_params *p,
                                 const vkv_press_layer *in, vkv_view scores, const char *name)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    if (!in->n_embd) return vkv_error(VKV_ERR_ARG, "%s: no output projection W_o was given", name);
    if (gpu && ((st = vkv_press_check_views(gpu, in, scores, name)) ||
                (st = vkv_press_check_scratch(gpu, in, critical_scratch_bytes(inner, p, in), name))))
        return st;
    return VKV_OK;
}

/* Stage 2 on the device: shaders/press_critical.comp over raw and the first stage's mask. */
static vkv_status stage_two_gpu(vkv_gpu *gpu, const vkv_press_layer *in, vkv_view raw, vkv_view first, vkv_view scores,
                                const char *name)
{
    const uint64_t es = in->kv_type == VKV_F16 ? 2 : 4;
    const uint64_t v_bytes = es * in->head_dim * ((uint64_t)in->n_ctx * (in->n_kv_head - 1) + in->n);
    const uint64_t wo_bytes = 4ull * in->n_embd * in->n_head * in->head_dim, hn4 = 4ull * in->n_kv_head * in->n;
    const vkv_kernel k = in->kv_type == VKV_F16 ? VKV_K_PRESS_CRITICAL_F16 : VKV_K_PRESS_CRITICAL_F32;
    vkv_status st;
    uint32_t gx;
    if ((st = vkv_ops_check_view(gpu, in->v, v_bytes, name, "the V cache")) ||
        (st = vkv_ops_check_single_range(gpu, v_bytes, name, "the V cache")) ||
        (st = vkv_ops_check_view(gpu, in->wo, wo_bytes, name, "W_o")) ||
        (st = vkv_ops_check_single_range(gpu, wo_bytes, name, "W_o")) || (st = vkv_press_groups_x(gpu, k, in->n, name, &gx)))
        return st;
    vkv_pc_press_critical pc = {in->n, in->n_ctx, in->head_dim, in->n_embd, in->n_head / in->n_kv_head, in->n_head,
                                (float)CRITICAL_EPSILON};
    vkv_binding b[5] = {vkv_ops_bind(in->v, 0, v_bytes), vkv_ops_bind(in->wo, 0, wo_bytes), vkv_ops_bind(raw, 0, hn4),
                        vkv_ops_bind(first, 0, hn4), vkv_ops_bind(scores, 0, hn4)};
    return vkv_dispatch(gpu, k, b, 5, &pc, gx, in->n_kv_head, 1);
}

static vkv_status critical_gpu(const vkv_press_ops *inner, const char *name, vkv_gpu *gpu, const vkv_press_params *p,
                               const vkv_press_layer *in, vkv_view scores)
{
    vkv_status st;
    if ((st = critical_check(gpu, inner, p, in, scores, name))) return st;
    vkv_view raw = scratch_buf(inner, p, in, 0), first = scratch_buf(inner, p, in, 1);
    if ((st = inner->score_gpu(gpu, p, in, raw)) ||
        (st = vkv_op_topk_select(gpu, raw, in->n_kv_head, in->n, (vkv_view){0}, first_stage_budget(p, in->n), first)))
        return st;
    return stage_two_gpu(gpu, in, raw, first, scores, name);
}

/* Stage 2 on the host: scores = first ? +inf : raw forced ? raw : (raw + epsilon) vnorm. */
static void stage_two_ref(const vkv_press_layer *in, const float *raw, const uint32_t *first, float *scores)
{
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++) {
            const size_t o = (size_t)h * in->n + j;
            scores[o] = first[o]                     ? INFINITY
                        : vkv_press_is_forced(raw[o]) ? raw[o]
                            : (float)(((double)raw[o] + CRITICAL_EPSILON) *
                                      vkv_ref_projected_value_norm(in->kv_type, in->v_host, in->n_ctx, in->head_dim,
                                                                   in->n_head, in->n_kv_head, in->n_embd, in->wo_host,
                                                                   h, j));
        }
}

static vkv_status critical_ref(const vkv_press_ops *inner, const char *name, const vkv_press_params *p,
                               const vkv_press_layer *in, float *scores)
{
    vkv_status st = critical_check(NULL, inner, p, in, (vkv_view){0}, name);
    if (st) return st;
    if (!in->wo_host || !in->v_host) return vkv_error(VKV_ERR_ARG, "%s: no host copy of W_o or of the values", name);
    const size_t hn = (size_t)in->n_kv_head * in->n;
    float *raw = malloc(sizeof *raw * hn);          /* [H, n] the inner scores */
    uint32_t *first = malloc(sizeof *first * hn);   /* [H, n] the first stage's picks */
    if (!raw || !first) {
        st = vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
        goto done;
    }
    if ((st = inner->score_ref(p, in, raw)) ||
        (st = vkv_ref_topk_select(raw, in->n_kv_head, in->n, NULL, first_stage_budget(p, in->n), first)))
        goto done;
    stage_two_ref(in, raw, first, scores);
done:
    free(raw);
    free(first);
    return st;
}

/* ---- CriticalAdaKV (kvpress's CriticalAdaKVPress, alpha_safeguard 0.20) ----
 * AdaKV's per-head budgets b_h (press/adakv.c: the safeguard, then the layer's
 * H n_kept highest), then both stages inside each head's budget: its
 * int(b_h 0.5) highest safeguarded scores forced, the others reweighted by
 * the projected value norm, and the head keeps its b_h highest of those. The
 * scores come out with exactly those H n_kept tokens at +inf and every other
 * below (clamped to the largest float), so the driver's layer selection
 * (layer_selection) keeps them. */
#define CRITICAL_ALPHA_SAFEGUARD 0.20

static uint32_t n_safe_of(const vkv_press_params *p, uint32_t n)
{
    return (uint32_t)((double)vkv_kv_n_kept(p->compression_ratio, n) * CRITICAL_ALPHA_SAFEGUARD);
}

static vkv_status critical_adakv_gpu(const vkv_press_ops *inner, const char *name, vkv_gpu *gpu,
                                     const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    vkv_status st;
    if ((st = critical_check(gpu, inner, p, in, scores, name))) return st;
    const uint32_t H = in->n_kv_head, n = in->n, total = H * n, k_layer = H * vkv_kv_n_kept(p->compression_ratio, n);
    vkv_view raw = scratch_buf(inner, p, in, 0), safe = scratch_buf(inner, p, in, 1), mask = scratch_buf(inner, p, in, 2);
    vkv_view stage2 = scratch_buf(inner, p, in, 3), budget = scratch_buf(inner, p, in, N_BUF);
    vkv_view first = scratch_buf(inner, p, in, N_BUF + 1), none = {0};
    vkv_pc_vector_elementwise pc = {H};
    uint32_t gx;
    if ((st = vkv_press_groups_x(gpu, VKV_K_PRESS_FIRST_STAGE_COUNTS, H, name, &gx))) return st;
    vkv_binding b[2] = {vkv_ops_bind(budget, 0, 4ull * H), vkv_ops_bind(first, 0, 4ull * H)};
    if ((st = inner->score_gpu(gpu, p, in, raw)) ||
        /* AdaKV's safeguard and budgets */
        (st = vkv_op_topk_select(gpu, raw, H, n, none, n_safe_of(p, n), mask)) ||
        (st = vkv_op_vector_pool_extend(gpu, mask, raw, total, safe)) ||
        (st = vkv_op_topk_select(gpu, safe, 1, total, none, k_layer, mask)) ||
        (st = vkv_op_mask_row_counts(gpu, mask, H, n, budget)) ||
        /* the first stage inside each budget, then the second */
        (st = vkv_dispatch(gpu, VKV_K_PRESS_FIRST_STAGE_COUNTS, b, 2, &pc, gx, 1, 1)) ||
        (st = vkv_op_topk_select(gpu, safe, H, n, first, 0, mask)) ||
        (st = stage_two_gpu(gpu, in, safe, mask, stage2, name)) ||
        /* each head's b_h highest forced, the rest clamped below */
        (st = vkv_op_topk_select(gpu, stage2, H, n, budget, 0, mask)))
        return st;
    return vkv_op_vector_pool_extend(gpu, mask, stage2, total, scores);
}

static vkv_status critical_adakv_ref(const vkv_press_ops *inner, const char *name, const vkv_press_params *p,
                                     const vkv_press_layer *in, float *scores)
{
    vkv_status st = critical_check(NULL, inner, p, in, (vkv_view){0}, name);
    if (st) return st;
    if (!in->wo_host || !in->v_host) return vkv_error(VKV_ERR_ARG, "%s: no host copy of W_o or of the values", name);
    const uint32_t H = in->n_kv_head, n = in->n;
    const size_t hn = (size_t)H * n;
    float *raw = malloc(sizeof *raw * hn), *safe = malloc(sizeof *safe * hn); /* [H, n] inner, safeguarded */
    uint32_t *mask = malloc(sizeof *mask * hn), budget[VKV_PRESS_MAX_KV_HEADS], first[VKV_PRESS_MAX_KV_HEADS];
    if (H > VKV_PRESS_MAX_KV_HEADS) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "%s: %u KV heads, over %u", name, H, VKV_PRESS_MAX_KV_HEADS);
        goto done;
    }
    if (!raw || !safe || !mask) {
        st = vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
        goto done;
    }
    if ((st = inner->score_ref(p, in, raw)) || (st = vkv_ref_adakv_safeguard(raw, H, n, n_safe_of(p, n), safe)) ||
        (st = vkv_ref_select_counts(safe, H, n, H * vkv_kv_n_kept(p->compression_ratio, n), budget)))
        goto done;
    for (uint32_t h = 0; h < H; h++) first[h] = (uint32_t)(budget[h] * CRITICAL_FIRST_STAGE_RATIO);
    if ((st = vkv_ref_topk_select(safe, H, n, first, 0, mask))) goto done;
    stage_two_ref(in, safe, mask, raw); /* raw now holds the second stage's scores */
    if ((st = vkv_ref_topk_select(raw, H, n, budget, 0, mask))) goto done;
    vkv_ref_vector_pool_extend(mask, raw, (uint32_t)hn, scores);
done:
    free(raw);
    free(safe);
    free(mask);
    return st;
}

#define CRITICAL_ADAKV_PRESS(id, inner_ops, label) \
    VKV_PRESS_WRAPPER(id, inner_ops, label, critical_adakv_gpu, critical_adakv_ref, critical_scratch_bytes)

CRITICAL_ADAKV_PRESS(critical_adakv_snapkv, vkv_press_snapkv, "critical-adakv-snapkv")
CRITICAL_ADAKV_PRESS(critical_adakv_keydiff, vkv_press_keydiff, "critical-adakv-keydiff")

/* kvpress's registry: ExpectedAttentionPress(use_vnorm=False) under both CriticalKV presses. */
static vkv_press_params critical_expected_params(const vkv_press_params *p)
{
    vkv_press_params q = *p;
    q.expected_no_vnorm = true;
    return q;
}
VKV_PRESS_WRAPPER_CAPTURE(critical_adakv_expected, vkv_press_expected, "critical-adakv-expected", critical_adakv_gpu,
                          critical_adakv_ref, critical_scratch_bytes, critical_expected_params)

/* One press per inner scorer: "critical-<inner>" (kvpress's evaluation names critical_<inner>). */
#define CRITICAL_PRESS(id, inner_ops, label) \
    VKV_PRESS_WRAPPER(id, inner_ops, label, critical_gpu, critical_ref, critical_scratch_bytes)

CRITICAL_PRESS(critical_snapkv, vkv_press_snapkv, "critical-snapkv")
CRITICAL_PRESS(critical_keydiff, vkv_press_keydiff, "critical-keydiff")
VKV_PRESS_WRAPPER_CAPTURE(critical_expected, vkv_press_expected, "critical-expected", critical_gpu, critical_ref,
                          critical_scratch_bytes, critical_expected_params)

/* The window and mode are the inner scorer's (press/snapkv.c, keydiff.c). */
const vkv_press_ops vkv_press_critical_snapkv = {
    .name = "critical-snapkv",
    .window = 64,
    .query_aware = true,
    .score_gpu = critical_snapkv_gpu,
    .score_ref = critical_snapkv_ref,
    .scratch_bytes = critical_snapkv_scratch,
    .needs_wo = true,
};

const vkv_press_ops vkv_press_critical_keydiff = {
    .name = "critical-keydiff",
    .window = 0,
    .query_aware = false,
    .score_gpu = critical_keydiff_gpu,
    .score_ref = critical_keydiff_ref,
    .scratch_bytes = critical_keydiff_scratch,
    .needs_wo = true,
};

/* Head-adaptive like AdaKV: VECTOR's pool per layer (docs/ARCHITECTURE.md §2). */
const vkv_press_ops vkv_press_critical_adakv_snapkv = {
    .name = "critical-adakv-snapkv",
    .window = 64,
    .query_aware = true,
    .score_gpu = critical_adakv_snapkv_gpu,
    .score_ref = critical_adakv_snapkv_ref,
    .scratch_bytes = critical_adakv_snapkv_scratch,
    .needs_wo = true,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};

const vkv_press_ops vkv_press_critical_adakv_keydiff = {
    .name = "critical-adakv-keydiff",
    .window = 0,
    .query_aware = false,
    .score_gpu = critical_adakv_keydiff_gpu,
    .score_ref = critical_adakv_keydiff_ref,
    .scratch_bytes = critical_adakv_keydiff_scratch,
    .needs_wo = true,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};

/* ExpectedAttention's mode and capture; compression during generation refuses
 * both (needs_wo). */
const vkv_press_ops vkv_press_critical_expected = {
    .name = "critical-expected",
    .window = 0,
    .query_aware = false,
    .score_gpu = critical_expected_gpu,
    .score_ref = critical_expected_ref,
    .scratch_bytes = critical_expected_scratch,
    .state_bytes = critical_expected_state,
    .capture_gpu = critical_expected_capture,
    .needs_wo = true,
};

const vkv_press_ops vkv_press_critical_adakv_expected = {
    .name = "critical-adakv-expected",
    .window = 0,
    .query_aware = false,
    .score_gpu = critical_adakv_expected_gpu,
    .score_ref = critical_adakv_expected_ref,
    .scratch_bytes = critical_adakv_expected_scratch,
    .state_bytes = critical_adakv_expected_state,
    .capture_gpu = critical_adakv_expected_capture,
    .needs_wo = true,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};
