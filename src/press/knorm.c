/* KnormPress (kvpress): s_j = -||k_j||_2 of the post-RoPE key as cached, per
 * (layer, KV head). Low-norm keys tend to draw the most attention, so the
 * largest norms are evicted first. shaders/press_knorm.comp. */
#include "press/press_internal.h"

#include <math.h>

static vkv_status knorm_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "knorm";
    const vkv_kernel k = in->kv_type == VKV_F16 ? VKV_K_PRESS_KNORM_F16 : VKV_K_PRESS_KNORM_F32;
    uint32_t heads_per, gx;
    vkv_status st;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)) ||
        (st = vkv_press_groups_x(gpu, k, in->n, name, &gx)))
        return st;
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_knorm pc = {in->n, in->n_ctx, in->head_dim, h0};
        vkv_binding b[2] = {vkv_press_bind_k(in, h0, nh), vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
        if ((st = vkv_dispatch(gpu, k, b, 2, &pc, gx, nh, 1))) return st;
    }
    return VKV_OK;
}

/* scores[n_kv_head, n]: the norm in double over the cache's own values (f16
 * keys are widened exactly). */
static vkv_status knorm_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "knorm");
    if (st) return st;
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++) {
            double ss = 0;
            for (uint32_t d = 0; d < in->head_dim; d++) {
                double x = vkv_press_k_host(in, h, j, d);
                ss += x * x;
            }
            scores[(size_t)h * in->n + j] = (float)-sqrt(ss);
        }
    return VKV_OK;
}

const vkv_press_ops vkv_press_knorm = {
    .name = "knorm",
    .window = 0,
    .query_aware = false,
    .keys_only = true,
    .score_gpu = knorm_gpu,
    .score_ref = knorm_ref,
};
