/* SnapKV (kvpress's SnapKVPress, window w = 64, pooling kernel 5): the last w
 * context queries "observe" which earlier tokens matter.
 *   1. window attention (press/window_attn.c): softmax over all visible keys,
 *      causal inside the window, fp32, scale 1/sqrt(d); keep the columns of
 *      the n - w prefix tokens;
 *   2. mean over the w window queries;
 *   3. avg_pool1d(kernel 5, stride 1, padding 2) along the prefix, zero
 *      padding counted (PyTorch's count_include_pad default: always / 5);
 *   4. mean over the query heads of the KV head's group;
 *   5. the window's own tokens are always kept: they score in the forced
 *      band, the newest highest (vkv_press_forced_score; kvpress pads them
 *      with the max score, which ties them with each other and with the best
 *      prefix token). A budget below the window keeps its newest tokens.
 * kvpress asserts n > w; here n < w is an error naming both numbers and
 * n = w keeps everything (every token is in the window). The kernel must be
 * odd (an even one changes the pooled length in PyTorch).
 * GPU: the two window-attention dispatches, then shaders/press_snapkv.comp. */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

static vkv_status snapkv_check(const vkv_press_params *p, const vkv_press_layer *in, const char *name)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    if (vkv_press_kernel_of(p) % 2 == 0)
        return vkv_error(VKV_ERR_ARG, "%s: the pooling kernel %u is even; it must be odd", name, vkv_press_kernel_of(p));
    return vkv_press_window_check(in, vkv_press_window_of(p), name);
}

uint64_t vkv_snapkv_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    const uint32_t w = vkv_press_window_of(p);
    return vkv_press_window_scratch_bytes(in, w, in->n > w ? in->n - w : 0);
}

vkv_status vkv_snapkv_score_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores,
                                const char *name)
{
    vkv_status st;
    uint32_t gx;
    if ((st = snapkv_check(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_groups_x(gpu, VKV_K_PRESS_SNAPKV, in->n, name, &gx)))
        return st;
    const uint32_t w = vkv_press_window_of(p), n_pre = in->n - w, kernel = vkv_press_kernel_of(p);
    const uint32_t group = in->n_head / in->n_kv_head;
    if ((st = vkv_press_window_gpu(gpu, in, w, n_pre, name))) return st;
    const uint64_t rb = 4ull * in->n_kv_head * n_pre;
    vkv_pc_press_snapkv pc = {in->n, n_pre, kernel,
                                                                (float)(1.0 / ((double)kernel * w * group))};
    vkv_binding b[2] = {vkv_ops_bind(vkv_press_scratch_at(in, vkv_press_window_raw_offset(in, w)), 0, rb ? rb : 16),
                        vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
    return vkv_dispatch(gpu, VKV_K_PRESS_SNAPKV, b, 2, &pc, gx, in->n_kv_head, 1);
}

vkv_status vkv_snapkv_score_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores, const char *name)
{
    vkv_status st = snapkv_check(p, in, name);
    if (st) return st;
    const uint32_t w = vkv_press_window_of(p), n_pre = in->n - w, half = vkv_press_kernel_of(p) / 2;
    const double div = (double)vkv_press_kernel_of(p) * w * (in->n_head / in->n_kv_head);
    double *raw = malloc(((size_t)in->n_kv_head * n_pre + 1) * sizeof *raw); /* [n_kv_head, n_pre] */
    if (!raw) return vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
    if ((st = vkv_press_window_ref(in, w, n_pre, raw))) {
        free(raw);
        return st;
    }
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++) {
            float s = vkv_press_forced_score(j - n_pre);
            if (j < n_pre) {
                double acc = 0; /* the kernel's taps that fall inside the prefix; outside ones are zeros */
                for (uint32_t t = j > half ? j - half : 0; t <= j + half && t < n_pre; t++)
                    acc += raw[(size_t)h * n_pre + t];
                s = (float)(acc / div);
            }
            scores[(size_t)h * in->n + j] = s;
        }
    free(raw);
    return VKV_OK;
}

static vkv_status snapkv_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    return vkv_snapkv_score_gpu(gpu, p, in, scores, "snapkv");
}

static vkv_status snapkv_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    return vkv_snapkv_score_ref(p, in, scores, "snapkv");
}

const vkv_press_ops vkv_press_snapkv = {
    .name = "snapkv",
    .window = 64,
    .query_aware = true,
    .kvpress_query_aware = true,
    .score_gpu = snapkv_gpu,
    .score_ref = snapkv_ref,
    .scratch_bytes = vkv_snapkv_scratch_bytes,
};
