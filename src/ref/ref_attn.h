/* Scalar CPU reference of causal grouped-query attention over the KV cache,
 * the oracle of the attn_prefill / attn_decode kernels.
 *
 * Cache layout (per layer): k, v: [n_kv_head, n_ctx_max, head_dim] of
 * kv_type (VKV_F16 or VKV_F32); slot j holds the token at absolute position
 * j, slots 0..n_kv-1 are valid. The reference reads the cache in its storage
 * type, so f16 rounding of K/V is identical on both sides. */
#ifndef VKV_REF_ATTN_H
#define VKV_REF_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

typedef struct vkv_attn_params {
    uint32_t n_q;       /* queries in this call (tokens) */
    uint32_t n_head;    /* query heads; a multiple of n_kv_head */
    uint32_t n_kv_head; /* KV heads: query head h reads KV head h / (n_head / n_kv_head) */
    uint32_t head_dim;  /* elements per head (even, <= 256) */
    uint32_t n_ctx_max; /* cache slots per KV head: the stride between KV heads */
    uint32_t n_kv;      /* valid cache slots 0..n_kv-1 (<= n_ctx_max) */
    uint32_t pos0;      /* absolute position of query 0; query i is at pos0 + i */
    float scale;        /* score scale, usually 1/sqrt(head_dim) */
    vkv_dtype kv_type;  /* VKV_F16 (default) or VKV_F32 */
} vkv_attn_params;

/* out[n_q, n_head, head_dim] = softmax_j(scale * q_i . k_j) v_j over the
 * slots j < n_kv with j <= pos0 + i (causal), per query head, with
 * q: [n_q, n_head, head_dim] (already RoPE'd). A query that sees no slot
 * (n_kv == 0) gets zeros. Scores, softmax and the weighted sum run in double
 * with an explicit max-subtracted softmax. */
void vkv_ref_attention(const vkv_attn_params *p, const float *q, const void *k, const void *v, float *out);

/* Bytes of one layer's K (or V) cache: n_kv_head * n_ctx_max * head_dim
 * elements of t (f16 or f32). */
size_t vkv_kv_cache_bytes(vkv_dtype t, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim);

/* Stores n_tok tokens of src: [n_tok, n_kv_head, head_dim] f32 (the layout a
 * K/V projection produces) into cache slots slot0.. of a [n_kv_head,
 * n_ctx_max, head_dim] cache of type t, rounding to nearest-even for f16.
 * slot0 + n_tok must be <= n_ctx_max. */
void vkv_kv_cache_store(vkv_dtype t, void *cache, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim,
                        uint32_t slot0, const float *src, uint32_t n_tok);

/* Element (kv head h, slot j, dimension d) of a cache of type t, as f32. */
float vkv_kv_cache_get(vkv_dtype t, const void *cache, uint32_t n_ctx_max, uint32_t head_dim, uint32_t h, uint32_t j,
                       uint32_t d);

#endif
