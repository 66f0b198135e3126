/* GPU ops of VECTOR: the OLS residual over the context, the compaction into
 * the tiered layout, attention over a tiered layer (fused and materialised
 * paths) and the materialisation of rebuilt values. Semantics and layouts:
 * src/ref/ref_vector.h. */
#ifndef VKV_OPS_VECTOR_H
#define VKV_OPS_VECTOR_H

#include "kvlayout/kv_layout.h"
#include "vk/ops.h"

/* The geometry of one layer's caches and its RoPE (for undoing it). */
typedef struct vkv_vector_geom {
    vkv_dtype kv_type;       /* the plain cache's rows: VKV_F16 or VKV_F32 */
    uint32_t n_kv_head, head_dim;
    uint32_t n_rot;
    bool neox;
    uint32_t map_shifts;     /* S of the maps W [S, n_kv_head, head_dim, head_dim] (kvlayout/kv_layout.h):
                              * 1 per-head maps, n_kv_head the joint map; 0 counts as 1 */
    vkv_dtype tier_k, tier_v; /* the tiered layout's K and V rows (f16, f32, q8_0, q4_0): kv_compact
                               * converts to them, attention and materialisation read them */
} vkv_vector_geom;

/* eps[n_kv_head, n] = ||V_hj - sum_s W[s, h] R_pj^-1 K_((h+s) mod H) j||^2 over
 * a plain cache [n_kv_head, n_ctx, head_dim]; w [S, n_kv_head, head_dim,
 * head_dim] f32; inv_freq [n_rot/2] f32; pos [n_kv_head, n] int32 the
 * positions p_j of the slots (pos.buf NULL: p_j = j). */
vkv_status vkv_op_vector_residual(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, vkv_view v, uint32_t n_ctx,
                                  uint32_t n, vkv_view w, vkv_view inv_freq, vkv_view pos, vkv_view eps);

/* Gathers the tiers [n_kv_head, n] uint32 (vkv_tier values) of a plain cache
 * into the tiered buffers described by meta [n_kv_head, 8] uint32 (offsets
 * and counts filled in by the host). k_rows / v_rows / p_entries: sizes of
 * the outputs for the bounds checks. */
vkv_status vkv_op_kv_compact(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, vkv_view v, uint32_t n_ctx,
                             uint32_t n, vkv_view tiers, vkv_view meta, vkv_view k_out, uint64_t k_rows,
                             vkv_view v_out, uint64_t v_rows, vkv_view pos_out, uint64_t p_entries);

/* vhat[slot, :] = sum_s W[s, h] R_pos^-1 K of head (h+s) mod H at the same
 * slot offset, f32, at every approximated K slot (vhat has k_rows rows of
 * head_dim). max_apx: the largest n_apx. With S > 1 every head must hold the
 * same tiers. */
vkv_status vkv_op_vector_materialize(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, uint64_t k_rows,
                                     vkv_view meta, vkv_view pos, uint64_t p_entries, vkv_view w, vkv_view inv_freq,
                                     uint32_t max_apx, vkv_view vhat);

/* s[h, j] = pool ? -eps : -inf over [n_kv_head, n] (pool: uint32 0/1). */
vkv_status vkv_op_vector_pool_scores(vkv_gpu *gpu, vkv_view pool, vkv_view eps, uint32_t total, vkv_view s);
/* s = base ? +inf : (NaN ? -inf : min(x, FLT_MAX)) over [rows, n] (base:
 * uint32 0/1, the scorer's kept set): a top-k over s keeps base and extends
 * it by the highest scores outside it (VECTOR's layer and global pools). */
vkv_status vkv_op_vector_pool_extend(vkv_gpu *gpu, vkv_view base, vkv_view scores, uint32_t total, vkv_view s);
/* tier = pool ? (apx ? 2 : 1) : 0 over [n_kv_head, n] uint32. */
vkv_status vkv_op_vector_assign_tiers(vkv_gpu *gpu, vkv_view pool, vkv_view apx, uint32_t total, vkv_view tiers);

/* out[n] = (sum over rows h of x[h, n]) / rows (f32, heads in order): a
 * layer's scores or residuals pooled over its KV heads (--vector-map joint). */
vkv_status vkv_op_vector_head_mean(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t n, vkv_view out);

typedef struct vkv_tiered_attn {
    uint32_t n_q, n_head;
    uint32_t n_new0;     /* appended tokens before query 0 */
    float scale;
    bool fused;          /* true: w_or_vhat is W; false: it is vhat (materialised) */
    uint32_t max_comp;   /* the largest n_ret + n_apx of any head (sizes the key splits) */
    vkv_view scratch;    /* split decode partials: vkv_tiered_attn_scratch_bytes(); buf may be NULL (no split) */
    vkv_view w;          /* split path, materialised: a zero map [n_kv_head, head_dim, head_dim] for the reduce */
    uint32_t max_apx;    /* an upper bound on any head's n_apx; 0 promises none approximates, which selects a
                          * kernel without the approximated path (the eviction baseline's caches) */
} vkv_tiered_attn;

/* Bytes of scratch the split decode path needs for n_q <= 4 queries and up
 * to max_keys keys per head (0 when it does not split). */
uint64_t vkv_tiered_attn_scratch_bytes(uint32_t n_q, uint32_t n_head, uint32_t head_dim, uint32_t max_keys);

/* out[n_q, n_head, head_dim] = attention of q over the tiered layer. The
 * fused path with a joint map (S > 1, every head the same tiers) runs the
 * kernel once per map block; w_or_vhat (fused) is W [S, n_kv_head, head_dim,
 * head_dim]; a->w (split, materialised) is a zero map [n_kv_head, ...]. */
vkv_status vkv_op_attention_tiered(vkv_gpu *gpu, const vkv_vector_geom *g, const vkv_tiered_attn *a, vkv_view q,
                                   vkv_view k, uint64_t k_rows, vkv_view v, uint64_t v_rows, vkv_view meta,
                                   vkv_view pos, uint64_t p_entries, vkv_view w_or_vhat, vkv_view inv_freq,
                                   vkv_view out);

#endif
