/* Window attention, the part SnapKV, PyramidKV and TOVA share: how much
 * attention the last w context queries (captured during the prefill,
 * post-RoPE) pay to each earlier key, exactly as kvpress's
 * SnapKVPress.compute_window_attention computes it: scores q.k / sqrt(d),
 * window query i (position n - w + i) masked to keys <= n - w + i, softmax in
 * fp32 over all visible keys (the window's own included), then only the
 * columns of the prefix j < n_pre are kept. Here the weights are summed over
 * the window queries and the query heads of each KV head's group; the callers
 * divide (SnapKV: mean over queries and group; TOVA: mean over all heads).
 *
 * GPU: press_window_lse (per split of the keys, the softmax (max, sum) of
 * each (query, head) row) then press_window_attn (combines the splits into
 * the log-sum-exp; per prefix key, the sum of exp(s - lse)); no n x w score
 * matrix is stored. */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "vk/dispatch.h"

#define PRESS_WINDOW_TQ 16u  /* query rows per tile in both shaders */
#define PRESS_WINDOW_MAX_WG 256u
#define PRESS_WINDOW_SPLIT_KEYS 1024u /* about this many keys per normaliser split */
#define PRESS_WINDOW_MAX_SPLITS 64u

static uint32_t window_splits(uint32_t n)
{
    uint32_t s = (n + PRESS_WINDOW_SPLIT_KEYS - 1) / PRESS_WINDOW_SPLIT_KEYS;
    return s < 1 ? 1 : s > PRESS_WINDOW_MAX_SPLITS ? PRESS_WINDOW_MAX_SPLITS : s;
}

vkv_status vkv_press_window_check(const vkv_press_layer *in, uint32_t w, const char *name)
{
    if (in->n < w)
        return vkv_error(VKV_ERR_ARG, "%s: the context has %u tokens, shorter than its window of %u queries", name,
                         in->n, w);
    if (in->window < w)
        return vkv_error(VKV_ERR_ARG, "%s: needs the last %u queries of the prefill, %u were captured", name, w,
                         in->window);
    return VKV_OK;
}

/* Scratch: the (max, sum) pairs [n_split, w, n_head] vec2, then raw. */
static uint64_t parts_bytes(const vkv_press_layer *in, uint32_t w) { return 8ull * window_splits(in->n) * w * in->n_head; }

uint64_t vkv_press_window_raw_offset(const vkv_press_layer *in, uint32_t w)
{
    return vkv_press_align_up(parts_bytes(in, w));
}

uint64_t vkv_press_window_scratch_bytes(const vkv_press_layer *in, uint32_t w, uint32_t n_pre)
{
    const uint64_t rb = 4ull * in->n_kv_head * n_pre;
    return vkv_press_window_raw_offset(in, w) + (rb > 16 ? rb : 16); /* raw is bound even when empty */
}

vkv_status vkv_press_window_gpu(vkv_gpu *gpu, const vkv_press_layer *in, uint32_t w, uint32_t n_pre,
                                const char *name)
{
    const bool f16 = in->kv_type == VKV_F16;
    const vkv_kernel klse = f16 ? VKV_K_PRESS_WINDOW_LSE_F16 : VKV_K_PRESS_WINDOW_LSE_F32;
    const vkv_kernel kattn = f16 ? VKV_K_PRESS_WINDOW_ATTN_F16 : VKV_K_PRESS_WINDOW_ATTN_F32;
    const uint64_t q_bytes = 4ull * in->window * in->n_head * in->head_dim;
    const uint64_t lb = parts_bytes(in, w), raw_off = vkv_press_window_raw_offset(in, w);
    const uint64_t rb = 4ull * in->n_kv_head * n_pre;
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, klse), group = in->n_head / in->n_kv_head;
    uint32_t heads_per, gx;
    vkv_status st;
    if ((st = vkv_press_window_check(in, w, name)) ||
        (st = vkv_ops_check_view(gpu, in->q_window, q_bytes, name, "the window queries")) ||
        (st = vkv_ops_check_single_range(gpu, q_bytes, name, "the window queries")) ||
        (st = vkv_press_check_scratch(gpu, in, vkv_press_window_scratch_bytes(in, w, n_pre), name)) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)) ||
        (st = vkv_press_groups_x(gpu, kattn, n_pre, name, &gx)))
        return st;
    if (wg > PRESS_WINDOW_MAX_WG || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two <= 256", name, wg);
    if (!n_pre) return VKV_OK; /* nothing before the window: no weights to sum */
    const uint32_t row_tiles = (w * group + PRESS_WINDOW_TQ - 1) / PRESS_WINDOW_TQ;
    const uint32_t n_split = window_splits(in->n), split_len = (in->n + n_split - 1) / n_split;
    const vkv_view parts = vkv_press_scratch_at(in, 0), raw = vkv_press_scratch_at(in, raw_off);
    const float scale = (float)(1.0 / sqrt((double)in->head_dim));

    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_window pc = {in->n, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0, w, in->window - w, scale, n_pre,
                        split_len, n_split};
        vkv_binding b[3] = {vkv_ops_bind(in->q_window, 0, q_bytes), vkv_press_bind_k(in, h0, nh),
                            vkv_ops_bind(parts, 0, lb)};
        if ((st = vkv_dispatch(gpu, klse, b, 3, &pc, row_tiles, nh, n_split))) return st;
    }
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_window pc = {in->n, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0, w, in->window - w, scale, n_pre,
                        split_len, n_split};
        vkv_binding b[4] = {vkv_ops_bind(in->q_window, 0, q_bytes), vkv_press_bind_k(in, h0, nh),
                            vkv_ops_bind(parts, 0, lb), vkv_ops_bind(raw, 0, rb)};
        if ((st = vkv_dispatch(gpu, kattn, b, 4, &pc, gx, nh, 1))) return st;
    }
    return VKV_OK;
}

vkv_status vkv_press_window_ref(const vkv_press_layer *in, uint32_t w, uint32_t n_pre, double *raw)
{
    const uint32_t hd = in->head_dim, group = in->n_head / in->n_kv_head, q_row0 = in->window - w;
    const double scale = 1.0 / sqrt((double)hd);
    vkv_status st = vkv_press_window_check(in, w, "window attention");
    if (st) return st;
    if (!in->q_window_host) return vkv_error(VKV_ERR_ARG, "window attention: no host copy of the window queries");
    double *s = malloc((size_t)in->n * sizeof *s); /* [n] scores of one (query, head) row */
    if (!s) return vkv_error(VKV_ERR_OOM, "window attention: out of host memory");
    for (size_t i = 0; i < (size_t)in->n_kv_head * n_pre; i++) raw[i] = 0;
    for (uint32_t h = 0; h < in->n_head; h++) {
        const uint32_t kh = h / group;
        for (uint32_t i = 0; i < w; i++) {
            const float *q = (const float *)in->q_window_host + ((size_t)(q_row0 + i) * in->n_head + h) * hd; /* [hd] */
            const uint32_t n_vis = in->n - w + i + 1; /* keys 0 .. n - w + i */
            double mx = -INFINITY, sum = 0;
            for (uint32_t j = 0; j < n_vis; j++) {
                double dot = 0;
                for (uint32_t d = 0; d < hd; d++) dot += (double)q[d] * vkv_press_k_host(in, kh, j, d);
                s[j] = dot * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (uint32_t j = 0; j < n_vis; j++) sum += exp(s[j] - mx);
            for (uint32_t j = 0; j < n_pre; j++) raw[(size_t)kh * n_pre + j] += exp(s[j] - mx) / sum;
        }
    }
    free(s);
    return VKV_OK;
}
