/* StreamingLLM (kvpress's StreamingLLMPress): keep the first n_sink "attention
 * sink" tokens and the most recent ones. kvpress scores 1 for the sinks and
 * the tail and 0 for the n - n_kept tokens right after the sinks; here
 * scores[h, j] = +inf for j < n_sink, else j, which makes any top-k (n_kept,
 * or VECTOR's larger pool) the sinks plus the latest tokens: the same set for
 * n_kept, and a meaningful one for every other count. Scores are exact
 * integers up to 2^24 on both sides. shaders/press_streamingllm.comp. During
 * generation the same rule reads the gathered cache's positions. */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

static vkv_status streamingllm_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in,
                                   vkv_view scores)
{
    uint32_t gx;
    vkv_status st = vkv_press_check_positional(gpu, p, in, scores, VKV_K_PRESS_STREAMINGLLM, "streamingllm", &gx);
    if (st) return st;
    vkv_pc_press_streamingllm pc = {in->n, p->n_sink};
    vkv_binding b[1] = {vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
    return vkv_dispatch(gpu, VKV_K_PRESS_STREAMINGLLM, b, 1, &pc, gx, in->n_kv_head, 1);
}

/* The score of the token at position pos; a prefill's slot j holds position j. */
static void streamingllm_positions(const vkv_press_params *p, const int32_t *pos, uint32_t n, float *scores)
{
    for (uint32_t j = 0; j < n; j++) scores[j] = (uint32_t)pos[j] < p->n_sink ? INFINITY : (float)pos[j];
}

static vkv_status streamingllm_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "streamingllm");
    if (st) return st;
    int32_t *slots = malloc(sizeof *slots * (in->n ? in->n : 1));
    if (!slots) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t j = 0; j < in->n; j++) slots[j] = (int32_t)j;
    for (uint32_t h = 0; h < in->n_kv_head; h++) streamingllm_positions(p, slots, in->n, scores + (size_t)h * in->n);
    free(slots);
    return VKV_OK;
}

const vkv_press_ops vkv_press_streamingllm = {
    .name = "streamingllm",
    .window = 0,
    .query_aware = false,
    .score_gpu = streamingllm_gpu,
    .score_ref = streamingllm_ref,
    .score_positions = streamingllm_positions,
};
