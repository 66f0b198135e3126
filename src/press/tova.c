/* TOVA (kvpress's TOVAPress): the attention of the last context query (its
 * softmax over all n keys, scale 1/sqrt(d)) averaged over ALL query heads of
 * the layer, not per group: every KV head gets the same scores (kvpress
 * averages over the heads and repeats the row n_kv_head times). The last
 * token itself is always kept (+inf; kvpress pads it with the max score).
 * It uses the last captured query only (window 1).
 * GPU: the window-attention dispatches with w = 1, then
 * shaders/press_tova.comp (sum over the KV heads' group sums / n_head). */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

static uint64_t tova_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_press_window_scratch_bytes(in, 1, in->n ? in->n - 1 : 0);
}

static vkv_status tova_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "tova";
    vkv_status st;
    uint32_t gx;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_groups_x(gpu, VKV_K_PRESS_TOVA, in->n, name, &gx)) ||
        (st = vkv_press_window_gpu(gpu, in, 1, in->n - 1, name)))
        return st;
    const uint32_t n_pre = in->n - 1;
    const uint64_t rb = 4ull * in->n_kv_head * n_pre;
    vkv_pc_press_tova pc = {in->n, n_pre, in->n_kv_head,
                                                                     (float)(1.0 / in->n_head)};
    vkv_binding b[2] = {vkv_ops_bind(vkv_press_scratch_at(in, vkv_press_window_raw_offset(in, 1)), 0, rb ? rb : 16),
                        vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
    return vkv_dispatch(gpu, VKV_K_PRESS_TOVA, b, 2, &pc, gx, in->n_kv_head, 1);
}

static vkv_status tova_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "tova");
    if (st) return st;
    const uint32_t n_pre = in->n - 1;
    double *raw = malloc(((size_t)in->n_kv_head * n_pre + 1) * sizeof *raw); /* [n_kv_head, n_pre] */
    if (!raw) return vkv_error(VKV_ERR_OOM, "tova: out of host memory");
    if ((st = vkv_press_window_ref(in, 1, n_pre, raw))) {
        free(raw);
        return st;
    }
    for (uint32_t j = 0; j < in->n; j++) {
        float s = INFINITY;
        if (j < n_pre) {
            double acc = 0;
            for (uint32_t kh = 0; kh < in->n_kv_head; kh++) acc += raw[(size_t)kh * n_pre + j];
            s = (float)(acc / in->n_head);
        }
        for (uint32_t h = 0; h < in->n_kv_head; h++) scores[(size_t)h * in->n + j] = s;
    }
    free(raw);
    return VKV_OK;
}

const vkv_press_ops vkv_press_tova = {
    .name = "tova",
    .window = 1,
    .query_aware = true,
    .score_gpu = tova_gpu,
    .score_ref = tova_ref,
    .scratch_bytes = tova_scratch_bytes,
};
