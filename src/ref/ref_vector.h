/* Scalar CPU references of the VECTOR kernels: the OLS residual over the
 * context, the compaction into the tiered layout, and attention over the
 * tiered cache (materialised and fused). Oracles of the conformance suite.
 *
 * Tiered layout of one layer (after compression), per KV head h:
 *   K slots [k_off[h], k_off[h] + n_ret[h] + n_apx[h] + cap_new):
 *     first the retained tokens, then the approximated ones (each tier in
 *     position order), then tokens appended after compression;
 *   V slots [v_off[h], v_off[h] + n_ret[h] + cap_new): retained, then appended
 *     (approximated tokens have no value: it is rebuilt as W R^-1 K);
 *   positions [p_off[h], p_off[h] + n_ret[h] + n_apx[h]) of the compressed
 *     slots (appended token t is at position n_ctx0 + t).
 * Rows are head_dim elements of the cache's type (f16 or f32). */
#ifndef VKV_REF_VECTOR_H
#define VKV_REF_VECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "ref/ref_ops.h"

/* Per-layer tier metadata, mirrored on the device as uint32 [n_kv_head, 8]. */
typedef struct vkv_tier_head {
    uint32_t k_off, v_off, p_off; /* first K slot, V slot, position entry */
    uint32_t n_ret, n_apx;        /* retained and approximated tokens */
    uint32_t pad[3];
} vkv_tier_head;

typedef enum vkv_tier {
    VKV_TIER_EVICTED = 0,
    VKV_TIER_RETAINED = 1,
    VKV_TIER_APPROXIMATED = 2,
} vkv_tier;

/* Pre-RoPE key of a cached post-RoPE key row at position pos:
 * out[head_dim] = R_pos^-1 k (rope->inverse is ignored; inv_freq[n_rot/2]
 * are the model's per-pair frequencies as vkv_rope_inv_freq computes them). */
void vkv_ref_unrope_row(const vkv_rope_params *rope, const float *inv_freq, const float *k, int32_t pos, float *out);

/* eps[h, j] = ||V_j - W_h R_j^-1 K_j||^2 for the n context tokens of every KV
 * head of an uncompressed cache [n_kv_head, n_ctx, head_dim] (slot j =
 * position j); w: [n_kv_head, head_dim (d_v), head_dim (d_k)] f32. */
void vkv_ref_vector_residual(const vkv_rope_params *rope, const float *inv_freq, vkv_dtype kv_type,
                             const void *k, const void *v, uint32_t n_kv_head, uint32_t n_ctx, uint32_t head_dim,
                             uint32_t n, const float *w, float *eps);

/* The asymmetric truncation's two elementwise steps over [n_kv_head, n]:
 * s = pool ? max(-eps, -FLT_MAX) (NaN -> -FLT_MAX) : -inf, and
 * tier = pool ? (apx ? approximated : retained) : evicted. */
void vkv_ref_vector_pool_scores(const uint32_t *pool, const float *eps, uint32_t total, float *s);
void vkv_ref_vector_assign_tiers(const uint32_t *pool, const uint32_t *apx, uint32_t total, uint32_t *tiers);

/* Compaction: tiers[h, j] (n positions per head) -> the tiered layout.
 * meta[h] must hold offsets with room for the counts (n_ret/n_apx are
 * written). k_out/v_out rows are copied bit-exact; pos_out gets positions. */
void vkv_ref_kv_compact(vkv_dtype kv_type, const void *k, const void *v, uint32_t n_kv_head, uint32_t n_ctx,
                        uint32_t head_dim, uint32_t n, const uint8_t *tiers, vkv_tier_head *meta, void *k_out,
                        void *v_out, int32_t *pos_out);

/* Attention of q[n_q, n_head, head_dim] (post-RoPE; query i is appended
 * token n_new0 + i) over a tiered cache: every compressed slot plus the
 * appended tokens 0..n_new0+i; values of approximated slots are
 * W_h R_pos^-1 K. out[n_q, n_head, head_dim]. */
typedef struct vkv_tiered_attn_params {
    uint32_t n_q, n_head, n_kv_head, head_dim;
    uint32_t n_new0;     /* appended tokens before query 0 */
    uint32_t n_ctx0;     /* context length at compression (position of appended token 0) */
    float scale;
    vkv_dtype kv_type;
} vkv_tiered_attn_params;
void vkv_ref_attention_tiered(const vkv_tiered_attn_params *p, const vkv_rope_params *rope, const float *inv_freq,
                              const vkv_tier_head *meta, const float *q, const void *k, const void *v,
                              const int32_t *pos, const float *w, float *out);

#endif
