/* Scalar CPU reference of causal grouped-query attention over the KV cache,
 * the oracle of the attn_prefill / attn_decode kernels. The cache is the
 * plain layout of kvlayout/kv_layout.h. The reference reads the cache in its
 * storage type, so f16 rounding of K/V is identical on both sides. */
#ifndef VKV_REF_ATTN_H
#define VKV_REF_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "kvlayout/kv_layout.h"

/* out[n_q, n_head, head_dim] = softmax_j(scale * q_i . k_j) v_j over the
 * slots j < n_kv with j <= pos0 + i (causal), per query head, with
 * q: [n_q, n_head, head_dim] (already RoPE'd). A query that sees no slot
 * (n_kv == 0) gets zeros. Scores, softmax and the weighted sum run in double
 * with an explicit max-subtracted softmax. */
void vkv_ref_attention(const vkv_attn_params *p, const float *q, const void *k, const void *v, float *out);

/* Stores n_tok tokens of src: [n_tok, n_kv_head, head_dim] f32 (the layout a
 * K/V projection produces) into cache slots slot0.. of a [n_kv_head,
 * n_ctx_max] cache of rows of type t (kvlayout/kv_layout.h: f16 rounded to
 * nearest even, q8_0/q4_0 by the reference quantizers).
 * slot0 + n_tok must be <= n_ctx_max. */
void vkv_kv_cache_store(vkv_dtype t, void *cache, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim,
                        uint32_t slot0, const float *src, uint32_t n_tok);

/* Paged caches (vk/ops_attn.h, "paged decode"): slot j of KV head h is the
 * row of type t at byte pages[j >> page_shift] + h * head_bytes + (j &
 * (2^page_shift - 1)) * row bytes of pool. vkv_ref_paged_gather copies slots
 * 0..n_kv-1 into the plain layout cache [n_kv_head, n_kv] (the layout
 * vkv_ref_attention reads); vkv_ref_paged_store writes src [n_kv_head,
 * head_dim] f32 as slot `slot`, encoded as vkv_kv_cache_store encodes it. */
void vkv_ref_paged_gather(vkv_dtype t, const void *pool, const uint64_t *pages, uint64_t head_bytes,
                          uint32_t page_shift, uint32_t n_kv_head, uint32_t head_dim, uint32_t n_kv, void *cache);
void vkv_ref_paged_store(vkv_dtype t, void *pool, const uint64_t *pages, uint64_t head_bytes, uint32_t page_shift,
                         uint32_t n_kv_head, uint32_t head_dim, uint32_t slot, const float *src);

/* Element (kv head h, slot j, dimension d) of a cache of type t, as f32. */
float vkv_kv_cache_get(vkv_dtype t, const void *cache, uint32_t n_ctx_max, uint32_t head_dim, uint32_t h, uint32_t j,
                       uint32_t d);

/* CriticalKV's projected value norm (press/critical.c): vnorm[h, j] = mean over
 * the query heads q of KV head h's group of sum_c |sum_d V[h, j, d] wo[c, q hd + d]|,
 * for the values [n_kv_head, n_ctx, hd] of type t (tokens j < n) and
 * wo [n_embd, n_head hd] f32, in double. */
double vkv_ref_projected_value_norm(vkv_dtype t, const void *v, uint32_t n_ctx, uint32_t hd, uint32_t n_head,
                                    uint32_t n_kv_head, uint32_t n_embd, const float *wo, uint32_t h, uint32_t j);

#endif
