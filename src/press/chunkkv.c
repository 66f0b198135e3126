/* ChunkKV (kvpress's ChunkKVPress): an inner scorer's scores, summed over the
 * KV heads and averaged over chunks of chunk_length (20) tokens, choose whole
 * chunks, the same ones for every head. kvpress keeps
 * max(1, int(n_chunks (1 - p_c))) chunks, where n_chunks counts the partial
 * last chunk (n % chunk_length tokens, scored by its own mean) as one; a
 * context shorter than one chunk is compressed by the inner scorer alone.
 *
 * Here every token of a chunk gets the chunk's score (shaders/press_chunkkv.comp
 * after the inner score_gpu), so a top-k of n_kept = kept chunks x
 * chunk_length (ChunkKV's n_kept) takes the best chunks whole, and VECTOR's
 * larger pool the next ones. The count is data-independent: when the partial
 * chunk is among the best, kvpress keeps chunk_length - n % chunk_length
 * tokens fewer, here the earliest tokens of the next-best chunk fill them
 * (docs/ARCHITECTURE.md §2).
 *
 * On the command line `chunkkv` wraps SnapKV (kvpress's evaluation default);
 * `chunkkv-NAME` wraps the scorer NAME (knorm, keydiff, tova). The inner
 * scorer's window, mode and scratch carry over; its own per-layer budget
 * does not (kvpress calls its score alone). Not during generation: chunks are
 * consecutive positions, which a compressed cache's slots are not. */
#include "press/press_internal.h"

#include <stdlib.h>

extern const vkv_press_ops vkv_press_snapkv, vkv_press_knorm, vkv_press_keydiff, vkv_press_tova;

/* Chunks of n tokens, the partial last one included. */
static uint32_t chunks_of(const vkv_press_params *p, uint32_t n)
{
    const uint32_t len = vkv_press_chunk_length_of(p);
    return n / len + (n % len != 0);
}

static uint32_t chunkkv_n_kept(const vkv_press_params *p, uint32_t layer, uint32_t n_layer, uint32_t n)
{
    (void)layer;
    (void)n_layer;
    const uint32_t len = vkv_press_chunk_length_of(p);
    if (n < len) return vkv_kv_n_kept(p->compression_ratio, n); /* the inner scorer alone */
    /* kvpress's int() of the chunk count times (1 - p_c), at least one chunk */
    const uint64_t kept = vkv_kv_n_kept(p->compression_ratio, chunks_of(p, n)) * (uint64_t)len;
    return kept > n ? n : (uint32_t)kept;
}

static vkv_status chunk_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const uint32_t len = vkv_press_chunk_length_of(p);
    if (in->n < len) return VKV_OK;
    uint32_t gx;
    vkv_status st = vkv_press_groups_x(gpu, VKV_K_PRESS_CHUNKKV, chunks_of(p, in->n), "chunkkv", &gx);
    if (st) return st;
    vkv_pc_press_chunkkv pc = {in->n, in->n_kv_head, len, chunks_of(p, in->n)};
    vkv_binding b[1] = {vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
    return vkv_dispatch(gpu, VKV_K_PRESS_CHUNKKV, b, 1, &pc, gx, 1, 1);
}

/* The chunk step on the host, in double. A chunk holding a forced keep of
 * the inner scorer (press/press.h) is forced: +inf when one is +inf, else the
 * forced band's score of its newest window token, so a budget below the
 * window keeps its newest chunks (a mean of band scores would round their
 * order away). */
static void chunk_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    const uint32_t len = vkv_press_chunk_length_of(p), n = in->n;
    if (n < len) return;
    for (uint32_t j0 = 0; j0 < n; j0 += len) {
        const uint32_t j1 = n - j0 < len ? n : j0 + len;
        double total = 0;
        float forced = 0; /* the chunk's highest forced score, 0 when none */
        for (uint32_t j = j0; j < j1; j++)
            for (uint32_t h = 0; h < in->n_kv_head; h++) {
                const float s = scores[(size_t)h * n + j];
                total += s;
                if (vkv_press_is_forced(s) && s > forced) forced = s;
            }
        const float mean = forced > 0 ? forced : (float)(total / (j1 - j0));
        for (uint32_t h = 0; h < in->n_kv_head; h++)
            for (uint32_t j = j0; j < j1; j++) scores[(size_t)h * n + j] = mean;
    }
}

static vkv_status wrap_gpu(const vkv_press_ops *inner, vkv_gpu *gpu, const vkv_press_params *p,
                              const vkv_press_layer *in, vkv_view scores)
{
    vkv_status st = inner->score_gpu(gpu, p, in, scores);
    return st ? st : chunk_gpu(gpu, p, in, scores);
}

static vkv_status wrap_ref(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in,
                              float *scores)
{
    vkv_status st = inner->score_ref(p, in, scores);
    if (!st) chunk_ref(p, in, scores);
    return st;
}

/* One registered scorer per inner one: its score functions and its ops. The
 * inner scorer's window and mode are repeated here (a static initializer
 * cannot read another object; tests/unit/test_press_modes.c checks they agree);
 * kvpress_aware: kvpress's evaluation runs it query-aware (press/press.h). */
#define CHUNKKV_OF(sym, inner, cli_name, inner_window, inner_aware, kvpress_aware)                                             \
    static vkv_status sym##_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in,          \
                                vkv_view scores)                                                                \
    {                                                                                                           \
        return wrap_gpu(&inner, gpu, p, in, scores);                                                         \
    }                                                                                                           \
    static vkv_status sym##_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)           \
    {                                                                                                           \
        return wrap_ref(&inner, p, in, scores);                                                              \
    }                                                                                                           \
    static uint64_t sym##_scratch(const vkv_press_params *p, const vkv_press_layer *in)                        \
    {                                                                                                           \
        return inner.scratch_bytes ? inner.scratch_bytes(p, in) : 0;                                            \
    }                                                                                                           \
    const vkv_press_ops vkv_press_##sym = {                                                                     \
        .name = cli_name,                                                                                       \
        .window = inner_window,                                                                                  \
        .query_aware = inner_aware,                                                                             \
        .kvpress_query_aware = kvpress_aware,                                                                   \
        .score_gpu = sym##_gpu,                                                                                 \
        .score_ref = sym##_ref,                                                                                 \
        .scratch_bytes = sym##_scratch,                                                                         \
        .n_kept = chunkkv_n_kept,                                                                               \
        .needs_position_order = true,                                                                           \
    };

CHUNKKV_OF(chunkkv, vkv_press_snapkv, "chunkkv", 64, true, true)
CHUNKKV_OF(chunkkv_knorm, vkv_press_knorm, "chunkkv-knorm", 0, false, false)
CHUNKKV_OF(chunkkv_keydiff, vkv_press_keydiff, "chunkkv-keydiff", 0, false, false)
CHUNKKV_OF(chunkkv_tova, vkv_press_tova, "chunkkv-tova", 1, true, false)
