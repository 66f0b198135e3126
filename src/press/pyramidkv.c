/* PyramidKV (kvpress's PyramidKVPress): SnapKV's scores (press/snapkv.c) with
 * a per-layer budget that shrinks with depth, following kvpress's
 * get_layer_budget (from KVCache-Factory) step by step, in double as Python:
 *   C = w + n (1 - p_c);  min = (C - w) / beta;  max = 2 (C - w) - min;
 *   if max >= n - w: max = n - w, min = 2 (C - w) - max;
 *   if not (n >= max >= min >= w): every layer keeps round(n (1 - p_c))
 *     (kvpress "falls back to SnapKV"; docs/ARCHITECTURE.md §3);
 *   else layer l keeps round(max - l (max - min) / (L - 1)).
 * round() is Python's: half to even (rint in the default rounding mode).
 * The budgets are symmetric about C - w = n (1 - p_c), so their mean over the
 * layers is n (1 - p_c) up to rounding, exactly when n (1 - p_c) is an
 * integer (half-even rounding keeps mirrored pairs summing to 2 (C - w)).
 * One layer (L = 1) keeps the uniform count. p_c is the double of the decimal
 * the user wrote, as Python holds it (vkv_kv_n_kept). Layers whose budget is below w keep
 * only part of the window: the earliest window tokens (ties broken by
 * position), where kvpress's topk would pick arbitrary ones. */
#include "press/press_internal.h"

#include <math.h>

#include "kvlayout/kv_counts.h"

static uint32_t pyramid_n_kept(const vkv_press_params *p, uint32_t layer, uint32_t n_layer, uint32_t n)
{
    if (n_layer <= 1) return vkv_kv_n_kept(p->compression_ratio, n);
    const double compression_ratio = p->compression_ratio, w = vkv_press_window_of(p), q_len = n;
    const double cap = w + q_len * (1 - compression_ratio);
    double min_num = (cap - w) / vkv_press_beta_of(p);
    double max_num = (cap - w) * 2 - min_num;
    if (max_num >= q_len - w) {
        max_num = q_len - w;
        min_num = (cap - w) * 2 - max_num;
    }
    double kept;
    if (!(q_len >= max_num && max_num >= min_num && min_num >= w)) {
        kept = rint(q_len * (1 - compression_ratio));
    } else {
        const double steps = (max_num - min_num) / (n_layer - 1);
        kept = rint(max_num - layer * steps);
    }
    return kept < 0 ? 0 : kept > n ? n : (uint32_t)kept;
}

static vkv_status pyramidkv_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    return vkv_snapkv_score_gpu(gpu, p, in, scores, "pyramidkv");
}

static vkv_status pyramidkv_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    return vkv_snapkv_score_ref(p, in, scores, "pyramidkv");
}

const vkv_press_ops vkv_press_pyramidkv = {
    .name = "pyramidkv",
    .window = 64,
    .query_aware = true,
    .score_gpu = pyramidkv_gpu,
    .score_ref = pyramidkv_ref,
    .n_kept = pyramid_n_kept,
    /* Its own per-layer scope, which also gave the lowest mean KL on the
     * default model (models/README.md, "VECTOR's pool scope"). */
    .pool_scope = VKV_POOL_LAYER,
    .scratch_bytes = vkv_snapkv_scratch_bytes,
};
