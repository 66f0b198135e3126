/* AdaKV (kvpress's AdaKVPress, alpha_safeguard 0.20) over an inner scorer:
 * head-adaptive budgets. kvpress's rule, per layer of H KV heads and n tokens:
 *   n_kept = int(n (1 - p_c))             (the uniform count; here at least 1)
 *   n_safe = int(n_kept * alpha_safeguard)
 *   each head's n_safe highest inner scores are forced to the top;
 *   the layer keeps the H n_kept highest scores of all its heads together.
 * So the layer's total is the uniform one, each head keeps at least n_safe,
 * and a head whose scores stand out keeps more than n_kept.
 * Here the scorer writes the safeguarded scores: +inf for each head's n_safe
 * (kvpress: the dtype's max), every other score clamped to the largest finite
 * float, so the forced ones outrank the inner scorer's own forced keeps
 * (SnapKV's window, whose forced band, press/press.h, keeps the newest
 * first); the driver (press/vector.c) then takes the layer's top H n_kept
 * (vkv_press_ops.layer_selection, ties by the flat index: earlier head, then
 * earlier position) and each head keeps its share. Ties inside a head's
 * safeguard are broken by position too. docs/ARCHITECTURE.md §2 says what
 * VECTOR's pool does with these per-head budgets.
 * GPU: the inner scorer into the scratch, then vkv_op_topk_select (each row's
 * n_safe) and vkv_op_vector_pool_extend (the forcing and clamping); the CPU
 * reference is vkv_ref_adakv_safeguard (src/ref/ref_select.c).
 * adakv-expected is kvpress's evaluation registry's "expected_attention",
 * AdaKVPress(ExpectedAttentionPress(epsilon=1e-2)): its inner ExpectedAttention
 * always runs with epsilon 1e-2 and the value norms, whatever the caller's
 * vkv_press_params say, and the wrapper carries its query capture
 * (VKV_PRESS_WRAPPER_CAPTURE; docs/ARCHITECTURE.md §2). */
#include "press/press_internal.h"

#include <stdlib.h>

#include "kvlayout/kv_counts.h"
#include "ref/ref_select.h"
#include "vk/ops_select.h"
#include "vk/ops_vector.h"

/* kvpress's AdaKVPress default: each head keeps at least 20% of n_kept. */
#define ADAKV_ALPHA_SAFEGUARD 0.20

/* int(n_kept * alpha_safeguard) in double, as Python evaluates it. */
static uint32_t adakv_n_safe(const vkv_press_params *p, uint32_t n)
{
    return (uint32_t)((double)vkv_kv_n_kept(p->compression_ratio, n) * ADAKV_ALPHA_SAFEGUARD);
}

/* Scratch: the inner scorer's, then the inner scores [H, n] f32, then the
 * safeguard mask [H, n] uint32. */
static uint64_t inner_scores_offset(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_press_align_up(vkv_press_scratch_bytes(inner, p, in));
}

static uint64_t adakv_scratch_bytes(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    const uint64_t hn4 = vkv_press_align_up(4ull * in->n_kv_head * in->n);
    return inner_scores_offset(inner, p, in) + 2 * hn4;
}

static vkv_status adakv_gpu(const vkv_press_ops *inner, const char *name, vkv_gpu *gpu, const vkv_press_params *p,
                            const vkv_press_layer *in, vkv_view scores)
{
    vkv_status st;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_check_scratch(gpu, in, adakv_scratch_bytes(inner, p, in), name)))
        return st;
    const uint64_t off = inner_scores_offset(inner, p, in);
    const uint64_t hn4 = vkv_press_align_up(4ull * in->n_kv_head * in->n);
    const uint32_t total = in->n_kv_head * in->n;
    vkv_view raw = vkv_press_scratch_at(in, off), safe = vkv_press_scratch_at(in, off + hn4);
    if ((st = inner->score_gpu(gpu, p, in, raw)) ||
        (st = vkv_op_topk_select(gpu, raw, in->n_kv_head, in->n, (vkv_view){0}, adakv_n_safe(p, in->n), safe)))
        return st;
    return vkv_op_vector_pool_extend(gpu, safe, raw, total, scores);
}

static vkv_status adakv_ref(const vkv_press_ops *inner, const char *name, const vkv_press_params *p,
                            const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    float *raw = malloc(sizeof *raw * in->n_kv_head * in->n); /* [H, n] the inner scores */
    if (!raw) return vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
    if (!(st = inner->score_ref(p, in, raw)))
        st = vkv_ref_adakv_safeguard(raw, in->n_kv_head, in->n, adakv_n_safe(p, in->n), scores);
    free(raw);
    return st;
}

/* One press per inner scorer: its name "adakv-<inner>" (kvpress's
 * evaluation names adakv_<inner>), its window, mode and capture. */
#define ADAKV_PRESS(id, inner_ops, label) \
    VKV_PRESS_WRAPPER(id, inner_ops, label, adakv_gpu, adakv_ref, adakv_scratch_bytes)

ADAKV_PRESS(adakv_snapkv, vkv_press_snapkv, "adakv-snapkv")
ADAKV_PRESS(adakv_keydiff, vkv_press_keydiff, "adakv-keydiff")

/* kvpress's registry: ExpectedAttentionPress(epsilon=1e-2) under AdaKV, use_vnorm left at its default. */
#define ADAKV_EXPECTED_EPSILON 1e-2f
static vkv_press_params adakv_expected_params(const vkv_press_params *p)
{
    vkv_press_params q = *p;
    q.expected_epsilon = ADAKV_EXPECTED_EPSILON;
    q.expected_no_vnorm = false;
    return q;
}
VKV_PRESS_WRAPPER_CAPTURE(adakv_expected, vkv_press_expected, "adakv-expected", adakv_gpu, adakv_ref,
                          adakv_scratch_bytes, adakv_expected_params)

/* The window and mode are the inner scorer's (press/snapkv.c, keydiff.c). */
const vkv_press_ops vkv_press_adakv_snapkv = {
    .name = "adakv-snapkv",
    .window = 64,
    .query_aware = true,
    .kvpress_query_aware = true,
    .score_gpu = adakv_snapkv_gpu,
    .score_ref = adakv_snapkv_ref,
    .scratch_bytes = adakv_snapkv_scratch,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};

const vkv_press_ops vkv_press_adakv_keydiff = {
    .name = "adakv-keydiff",
    .window = 0,
    .query_aware = false,
    .score_gpu = adakv_keydiff_gpu,
    .score_ref = adakv_keydiff_ref,
    .scratch_bytes = adakv_keydiff_scratch,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};

/* ExpectedAttention's mode and capture; compression during generation refuses
 * it (layer_selection), as every AdaKV press. */
const vkv_press_ops vkv_press_adakv_expected = {
    .name = "adakv-expected",
    .window = 0,
    .query_aware = false,
    .score_gpu = adakv_expected_gpu,
    .score_ref = adakv_expected_ref,
    .scratch_bytes = adakv_expected_scratch,
    .state_bytes = adakv_expected_state,
    .capture_gpu = adakv_expected_capture,
    .layer_selection = true,
    .pool_scope = VKV_POOL_LAYER,
};
