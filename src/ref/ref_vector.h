/* Scalar CPU references of the VECTOR kernels: the OLS residual over the
 * context, the compaction into the tiered layout, and attention over the
 * tiered cache (materialised and fused), on the tiered layout of
 * kvlayout/kv_layout.h. Oracles of the conformance suite. */
#ifndef VKV_REF_VECTOR_H
#define VKV_REF_VECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "kvlayout/kv_layout.h"
#include "ref/ref_ops.h"

/* Pre-RoPE key of a cached post-RoPE key row at position pos:
 * out[head_dim] = R_pos^-1 k (rope->inverse is ignored; inv_freq[n_rot/2]
 * are the model's per-pair frequencies as vkv_rope_inv_freq computes them). */
void vkv_ref_unrope_row(const vkv_rope_params *rope, const float *inv_freq, const float *k, int32_t pos, float *out);

/* eps[h, j] = ||V_hj - V^_hj||^2 for the n context tokens of every KV head of
 * an uncompressed cache [n_kv_head, n_ctx, head_dim] (slot j = position j),
 * V^_hj = sum_s W[s, h] R_j^-1 K_((h+s) mod n_kv_head) j with w [map_shifts,
 * n_kv_head, head_dim (d_v), head_dim (d_k)] f32 (kvlayout/kv_layout.h: 1 for the
 * per-head maps, n_kv_head for the joint map); pos [n_kv_head, n] the slots'
 * positions (NULL: slot j is position j). */
void vkv_ref_vector_residual(const vkv_rope_params *rope, const float *inv_freq, vkv_dtype kv_type,
                             const void *k, const void *v, uint32_t n_kv_head, uint32_t n_ctx, uint32_t head_dim,
                             uint32_t n, uint32_t map_shifts, const float *w, const int32_t *pos, float *eps);

/* out[j] = (sum over rows h, in order, of x[h, j]) / rows in f32: a layer's
 * scores or residuals pooled over its KV heads (--vector-map joint). */
void vkv_ref_vector_head_mean(const float *x, uint32_t rows, uint32_t n, float *out);

/* The asymmetric truncation's elementwise steps over [n_kv_head, n]:
 * s = pool ? max(-eps, -FLT_MAX) (NaN -> -FLT_MAX) : -inf;
 * the pool extension's s = base ? +inf : (NaN ? -inf : min(x, FLT_MAX));
 * tier = pool ? (apx ? approximated : retained) : evicted. */
void vkv_ref_vector_pool_scores(const uint32_t *pool, const float *eps, uint32_t total, float *s);
void vkv_ref_vector_pool_extend(const uint32_t *base, const float *scores, uint32_t total, float *s);
void vkv_ref_vector_assign_tiers(const uint32_t *pool, const uint32_t *apx, uint32_t total, uint32_t *tiers);

/* Rows [src_row0, + n_rows) of src (type src_t) into rows [dst_row0, +
 * n_rows) of dst (type dst_t): copied, or decoded and re-encoded. */
void vkv_ref_kv_convert_rows(vkv_dtype src_t, const void *src, uint64_t src_row0, vkv_dtype dst_t, void *dst,
                             uint64_t dst_row0, uint32_t n_rows, uint32_t head_dim);

/* Compaction: tiers[h, j] (n positions per head) of a plain cache of
 * kv_type -> the tiered layout, K rows of k_tier and V rows of v_tier.
 * meta[h] must hold offsets with room for the counts (n_ret/n_apx are
 * written). Rows of the plain type are copied bit-exact, others decoded and
 * re-encoded (vkv_kv_encode_row); pos_out gets positions. head_dim <= 256. */
void vkv_ref_kv_compact(vkv_dtype kv_type, vkv_dtype k_tier, vkv_dtype v_tier, const void *k, const void *v,
                        uint32_t n_kv_head, uint32_t n_ctx, uint32_t head_dim, uint32_t n, const uint8_t *tiers,
                        vkv_tier_head *meta, void *k_out, void *v_out, int32_t *pos_out);

/* Attention of q[n_q, n_head, head_dim] (post-RoPE; query i is appended
 * token n_new0 + i) over a tiered cache: every compressed slot plus the
 * appended tokens 0..n_new0+i; the value of approximated slot t of head h is
 * sum_s W[s, h] R_pos^-1 K_t of head (h+s) mod n_kv_head (w [p->map_shifts,
 * n_kv_head, head_dim, head_dim]). out[n_q, n_head, head_dim]. */
void vkv_ref_attention_tiered(const vkv_tiered_attn_params *p, const vkv_rope_params *rope, const float *inv_freq,
                              const vkv_tier_head *meta, const float *q, const void *k, const void *v,
                              const int32_t *pos, const float *w, float *out);

#endif
