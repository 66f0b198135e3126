/* ObservedAttention (kvpress's ObservedAttentionPress, H2O-like): the mean
 * attention a token receives from the queries that can see it,
 *   s_j = (1 / group) sum_{g in group} sum_{i >= j} A^g_ij / (n - j),
 * A^g the causal softmax (scale 1/sqrt(d), fp32 here; kvpress takes the eager
 * attention weights of the prefill) of query head g over all context keys.
 * kvpress: attentions.sum(2) / arange(n, 0, -1), then the mean over the query
 * heads of each KV head's group. No token is forced.
 *
 * Every query of the prefill is needed: the capture (capture_gpu, called by
 * the driver after each prefill chunk's keys are cached) adds the chunk's
 * weights column by column into the layer's state acc[n_kv_head, n] (span
 * attention, press/span_attn.c, sum mode over keys 0 .. the chunk's last
 * position); score_gpu divides (shaders/press_from_state.comp). The
 * reference (score_ref) recomputes the whole attention from q_host (all n
 * queries, q_pos0 = 0, or the last n - q_pos0 of them).
 *
 * During generation (press/decode.h) the capture gets the query of the token
 * just computed alone, at the gathered layer's last slot, and the same
 * division follows: kvpress's DecodingPress hands the scorer the attention
 * weights of the decoding step, one query over the whole cache, which
 * kvpress divides by arange(n, 0, -1) over the cache's slots all the same. */
#include "press/span_attn.h"

#include <stdlib.h>

#include "vk/dispatch.h"

static uint64_t observed_state_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return 4ull * in->n_kv_head * in->n;
}

static uint64_t observed_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_span_scratch_bytes(in);
}

static vkv_status observed_capture(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view q,
                                   uint32_t n_tok, uint32_t pos0)
{
    vkv_status st = vkv_press_check_layer(p, in, "observed");
    if (st || pos0 >= in->n) return st; /* tokens after the context are not scored */
    const uint32_t nq = n_tok < in->n - pos0 ? n_tok : in->n - pos0;
    vkv_span_attn sa = {.q = q, .q_row0 = 0, .nq = nq, .qpos0 = pos0, .t0 = 0, .t1 = pos0 + nq,
                        .acc = in->state, .acc_stride = in->n};
    return vkv_span_gpu(gpu, in, &sa, "observed");
}

static vkv_status observed_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "observed";
    vkv_status st;
    uint32_t gx;
    const uint64_t sb = 4ull * in->n_kv_head * in->n;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_ops_check_view(gpu, in->state, sb, name, "the state")) ||
        (st = vkv_press_groups_x(gpu, VKV_K_PRESS_FROM_STATE, in->n, name, &gx)))
        return st;
    vkv_pc_press_from_state pc = {in->n, 0, in->n_head / in->n_kv_head, 0};
    vkv_binding b[2] = {vkv_ops_bind(in->state, 0, sb), vkv_ops_bind(scores, 0, sb)};
    return vkv_dispatch(gpu, VKV_K_PRESS_FROM_STATE, b, 2, &pc, gx, in->n_kv_head, 1);
}

static vkv_status observed_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "observed");
    if (st) return st;
    if (!in->q_host || in->q_pos0 >= in->n || in->q_pos0 + in->n_q < in->n)
        return vkv_error(VKV_ERR_ARG, "observed: the reference needs the context's last queries on the host (%u)", in->n);
    const size_t sn = (size_t)in->n_kv_head * in->n;
    double *acc = calloc(sn + 1, sizeof *acc);
    if (!acc) return vkv_error(VKV_ERR_OOM, "observed: out of host memory");
    vkv_span_attn sa = {.nq = in->n - in->q_pos0, .qpos0 = in->q_pos0, .t0 = 0, .t1 = in->n, .acc_stride = in->n};
    if ((st = vkv_span_ref(in, &sa, in->q_host, acc))) {
        free(acc);
        return st;
    }
    const double group = (double)(in->n_head / in->n_kv_head);
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++)
            scores[(size_t)h * in->n + j] = (float)(acc[(size_t)h * in->n + j] / ((double)(in->n - j) * group));
    free(acc);
    return VKV_OK;
}

const vkv_press_ops vkv_press_observed = {
    .name = "observed",
    .window = 0,
    .query_aware = false,
    .score_gpu = observed_gpu,
    .score_ref = observed_ref,
    .scratch_bytes = observed_scratch_bytes,
    .state_bytes = observed_state_bytes,
    .capture_gpu = observed_capture,
    .decode_window = 1,
};
