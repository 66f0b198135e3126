/* RandomPress (kvpress): scores drawn uniformly in [0, 1), the baseline any
 * scorer must beat. kvpress's evaluation draws them from torch's global
 * generator, seeded once (42), anew at each layer call of each sample; here a
 * counter-based hash of (seed, sample, layer, KV head, token) draws them, so
 * each sample of an evaluation and each layer loses its own positions, the
 * GPU (shaders/press_random.comp) and this reference agree bit for bit on
 * every device, and a run is reproducible from its seed and the samples'
 * indices (vkv_press_params.seed, .sample; docs/ARCHITECTURE.md §2). */
#include "press/press_internal.h"

/* The shader's press_hash, in the same 32-bit arithmetic. */
static uint32_t press_hash(uint32_t v)
{
    const uint32_t state = v * 747796405u + 2891336453u;
    const uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

static float random_score(uint32_t seed, uint32_t sample, uint32_t layer, uint32_t kv_head, uint32_t token)
{
    const uint32_t bits =
        press_hash(token + press_hash(kv_head + press_hash(layer + press_hash(sample + press_hash(seed)))));
    return (float)(bits >> 8) * (1.0f / 16777216.0f); /* 24 bits: exact in f32 */
}

static vkv_status random_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    uint32_t gx;
    vkv_status st = vkv_press_check_positional(gpu, p, in, scores, VKV_K_PRESS_RANDOM, "random", &gx);
    if (st) return st;
    vkv_pc_press_random pc = {in->n, p->seed, in->layer, p->sample};
    vkv_binding b[1] = {vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
    return vkv_dispatch(gpu, VKV_K_PRESS_RANDOM, b, 1, &pc, gx, in->n_kv_head, 1);
}

static vkv_status random_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "random");
    if (st) return st;
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++) scores[(size_t)h * in->n + j] = random_score(p->seed, p->sample, in->layer, h, j);
    return VKV_OK;
}

const vkv_press_ops vkv_press_random = {
    .name = "random",
    .window = 0,
    .query_aware = false,
    .score_gpu = random_gpu,
    .score_ref = random_ref,
};
