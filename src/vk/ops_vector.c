/* Op wrappers of the VECTOR kernels. */
#include "vk/ops_vector.h"

#include "vk/ops_internal.h"
#include "vk/vk_internal.h"

/* Bytes of a row of the plain cache, of the tiered K and of the tiered V. */
static uint64_t row_bytes(const vkv_vector_geom *g) { return vkv_kv_row_bytes(g->kv_type, g->head_dim); }
static uint64_t k_row_bytes(const vkv_vector_geom *g) { return vkv_kv_row_bytes(g->tier_k, g->head_dim); }
static uint64_t v_row_bytes(const vkv_vector_geom *g) { return vkv_kv_row_bytes(g->tier_v, g->head_dim); }
/* Tiers stored as the plain cache's rows: copied and read by the kernels of that type. */
static bool tiers_plain(const vkv_vector_geom *g) { return g->tier_k == g->kv_type && g->tier_v == g->kv_type; }

static uint32_t shifts(const vkv_vector_geom *g) { return g->map_shifts ? g->map_shifts : 1; }

/* Bytes of the maps W [S, n_kv_head, head_dim, head_dim] f32. */
static uint64_t map_bytes(const vkv_vector_geom *g)
{
    return 4ull * shifts(g) * g->n_kv_head * g->head_dim * g->head_dim;
}

static vkv_status check_geom(const vkv_vector_geom *g, const char *op)
{
    if (shifts(g) != 1 && shifts(g) != g->n_kv_head)
        return vkv_error(VKV_ERR_ARG, "%s: %u map blocks for %u KV heads (1 or all)", op, shifts(g), g->n_kv_head);
    if ((uint64_t)shifts(g) * g->head_dim > VKV_MAP_MAX_DIM)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: a joint map over %u KV heads of %u dims is over %u dims", op,
                         g->n_kv_head, g->head_dim, VKV_MAP_MAX_DIM);
    if (g->kv_type != VKV_F16 && g->kv_type != VKV_F32)
        return vkv_error(VKV_ERR_ARG, "%s: the KV cache must be f16 or f32", op);
    if (!vkv_kv_type_ok(g->tier_k) || !vkv_kv_type_ok(g->tier_v))
        return vkv_error(VKV_ERR_ARG, "%s: tier types %u, %u are not f16, f32, q8_0 or q4_0", op, g->tier_k, g->tier_v);
    if (!tiers_plain(g) && g->head_dim % 4)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: tiers of other types than the cache need head dim %% 4 == 0, got %u",
                         op, g->head_dim);
    if (!g->head_dim || g->head_dim > 256 || g->head_dim % 2 || g->n_rot > g->head_dim || g->n_rot % 2)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: head dim %u / rotated dims %u unsupported (even, <= 256)", op,
                         g->head_dim, g->n_rot);
    return VKV_OK;
}

vkv_status vkv_op_vector_residual(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, vkv_view v, uint32_t n_ctx,
                                  uint32_t n, vkv_view w, vkv_view inv_freq, vkv_view pos, vkv_view eps)
{
    const char *op = "vector_residual";
    uint64_t cache = row_bytes(g) * g->n_kv_head * n_ctx, wb = map_bytes(g);
    uint64_t fb = 4ull * (g->n_rot / 2 ? g->n_rot / 2 : 1), eb = 4ull * g->n_kv_head * n;
    vkv_status st;
    if ((st = check_geom(g, op)) || (st = vkv_ops_check_view(gpu, k, cache, op, "K cache")) ||
        (st = vkv_ops_check_view(gpu, v, cache, op, "V cache")) || (st = vkv_ops_check_view(gpu, w, wb, op, "W")) ||
        (st = vkv_ops_check_view(gpu, inv_freq, fb, op, "frequencies")) ||
        (st = vkv_ops_check_view(gpu, eps, eb, op, "output")) ||
        (pos.buf && (st = vkv_ops_check_view(gpu, pos, eb, op, "positions"))) ||
        (st = vkv_ops_check_single_range(gpu, cache, op, "the layer's cache")))
        return st;
    if (n > n_ctx) return vkv_error(VKV_ERR_ARG, "%s: %u tokens in a %u-slot cache", op, n, n_ctx);
    if (!n) return VKV_OK;
    vkv_kernel kk = g->kv_type == VKV_F16 ? VKV_K_VECTOR_RESIDUAL_F16 : VKV_K_VECTOR_RESIDUAL_F32;
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, n, &gx, &gy);
    vkv_pc_vector_residual pc = {n, n_ctx, g->head_dim, g->n_kv_head, g->n_rot, g->neox, gx, shifts(g), pos.buf != NULL};
    /* Without positions the eps buffer stands in for the unread binding. */
    vkv_binding b[6] = {vkv_ops_bind(k, 0, cache), vkv_ops_bind(v, 0, cache), vkv_ops_bind(w, 0, wb),
                        vkv_ops_bind(inv_freq, 0, fb), vkv_ops_bind(eps, 0, eb), vkv_ops_bind(pos.buf ? pos : eps, 0, eb)};
    return vkv_dispatch(gpu, kk, b, 6, &pc, gx, gy, g->n_kv_head);
}

vkv_status vkv_op_kv_compact(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, vkv_view v, uint32_t n_ctx,
                             uint32_t n, vkv_view tiers, vkv_view meta, vkv_view k_out, uint64_t k_rows,
                             vkv_view v_out, uint64_t v_rows, vkv_view pos_out, uint64_t p_entries)
{
    const char *op = "kv_compact";
    uint64_t rb = row_bytes(g), cache = rb * g->n_kv_head * n_ctx, kb = k_row_bytes(g) * k_rows;
    uint64_t vb = v_row_bytes(g) * (v_rows ? v_rows : 1);
    vkv_status st;
    if ((st = check_geom(g, op)) || (st = vkv_ops_check_view(gpu, k, cache, op, "K cache")) ||
        (st = vkv_ops_check_view(gpu, v, cache, op, "V cache")) ||
        (st = vkv_ops_check_view(gpu, tiers, 4ull * g->n_kv_head * n, op, "tiers")) ||
        (st = vkv_ops_check_view(gpu, meta, 32ull * g->n_kv_head, op, "tier metadata")) ||
        (st = vkv_ops_check_view(gpu, k_out, kb, op, "tiered K")) ||
        (st = vkv_ops_check_view(gpu, v_out, v_row_bytes(g) * v_rows, op, "tiered V")) ||
        (st = vkv_ops_check_view(gpu, pos_out, 4ull * p_entries, op, "positions")) ||
        (st = vkv_ops_check_single_range(gpu, cache, op, "the layer's cache")) ||
        (st = vkv_ops_check_single_range(gpu, kb, op, "the tiered K")))
        return st;
    /* Tiers of the cache's own type are word copies; others are re-encoded row by row. */
    vkv_kernel kk = tiers_plain(g) ? VKV_K_KV_COMPACT : VKV_K_KV_COMPACT_CONVERT;
    vkv_pc_kv_compact pc = {n, n_ctx, (uint32_t)(rb / 4), g->head_dim, g->kv_type, g->tier_k, g->tier_v};
    vkv_binding b[7] = {vkv_ops_bind(k, 0, cache), vkv_ops_bind(v, 0, cache), vkv_ops_bind(tiers, 0, 4ull * g->n_kv_head * n),
                        vkv_ops_bind(meta, 0, 32ull * g->n_kv_head), vkv_ops_bind(k_out, 0, kb),
                        vkv_ops_bind(v_out, 0, vb), vkv_ops_bind(pos_out, 0, 4ull * (p_entries ? p_entries : 1))};
    return vkv_dispatch(gpu, kk, b, 7, &pc, g->n_kv_head, 1, 1);
}

vkv_status vkv_op_vector_materialize(vkv_gpu *gpu, const vkv_vector_geom *g, vkv_view k, uint64_t k_rows,
                                     vkv_view meta, vkv_view pos, uint64_t p_entries, vkv_view w, vkv_view inv_freq,
                                     uint32_t max_apx, vkv_view vhat)
{
    const char *op = "vector_materialize";
    uint64_t rb = k_row_bytes(g), wb = map_bytes(g);
    uint64_t fb = 4ull * (g->n_rot / 2 ? g->n_rot / 2 : 1), hb = 4ull * k_rows * g->head_dim;
    vkv_status st;
    if ((st = check_geom(g, op)) || (st = vkv_ops_check_view(gpu, k, rb * k_rows, op, "tiered K")) ||
        (st = vkv_ops_check_view(gpu, meta, 32ull * g->n_kv_head, op, "tier metadata")) ||
        (st = vkv_ops_check_view(gpu, pos, 4ull * p_entries, op, "positions")) ||
        (st = vkv_ops_check_view(gpu, w, wb, op, "W")) || (st = vkv_ops_check_view(gpu, inv_freq, fb, op, "frequencies")) ||
        (st = vkv_ops_check_view(gpu, vhat, hb, op, "output")) || (st = vkv_ops_check_single_range(gpu, hb, op, "the output")))
        return st;
    if (g->tier_k != VKV_F16 && g->tier_k != VKV_F32)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: the materialised path reads f16 or f32 keys, not %s", op,
                         vkv_dtype_get(g->tier_k)->name);
    if (!max_apx) return VKV_OK;
    vkv_kernel kk = g->tier_k == VKV_F16 ? VKV_K_VECTOR_MATERIALIZE_F16 : VKV_K_VECTOR_MATERIALIZE_F32;
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, max_apx, &gx, &gy);
    vkv_pc_vector_materialize pc = {g->head_dim, g->n_kv_head, g->n_rot, g->neox, max_apx, gx, shifts(g)};
    vkv_binding b[6] = {vkv_ops_bind(k, 0, rb * k_rows), vkv_ops_bind(meta, 0, 32ull * g->n_kv_head),
                        vkv_ops_bind(pos, 0, 4ull * (p_entries ? p_entries : 1)), vkv_ops_bind(w, 0, wb),
                        vkv_ops_bind(inv_freq, 0, fb), vkv_ops_bind(vhat, 0, hb)};
    return vkv_dispatch(gpu, kk, b, 6, &pc, gx, gy, g->n_kv_head);
}

/* Decode (few queries) over many keys splits the keys across workgroups. */
#define TIERED_SPLIT_KEYS 256
#define TIERED_MAX_SPLITS 64
#define TIERED_SPLIT_MAX_Q 4

static uint32_t tiered_splits(uint32_t n_q, uint32_t max_keys)
{
    if (n_q > TIERED_SPLIT_MAX_Q || max_keys <= TIERED_SPLIT_KEYS) return 1;
    uint32_t s = (max_keys + TIERED_SPLIT_KEYS - 1) / TIERED_SPLIT_KEYS;
    return s > TIERED_MAX_SPLITS ? TIERED_MAX_SPLITS : s;
}

uint64_t vkv_tiered_attn_scratch_bytes(uint32_t n_q, uint32_t n_head, uint32_t head_dim, uint32_t max_keys)
{
    uint32_t splits = tiered_splits(n_q, max_keys);
    if (splits == 1) return 0;
    return 16ull * splits * n_q * n_head * (2 * (head_dim / 4) + 1);
}

vkv_status vkv_op_attention_tiered(vkv_gpu *gpu, const vkv_vector_geom *g, const vkv_tiered_attn *a, vkv_view q,
                                   vkv_view k, uint64_t k_rows, vkv_view v, uint64_t v_rows, vkv_view meta,
                                   vkv_view pos, uint64_t p_entries, vkv_view w_or_vhat, vkv_view inv_freq,
                                   vkv_view out)
{
    const char *op = "attn_tiered";
    uint64_t kb = k_row_bytes(g) * k_rows, vb = v_row_bytes(g) * (v_rows ? v_rows : 1);
    uint64_t qb = 4ull * a->n_q * a->n_head * g->head_dim;
    uint64_t fb = 4ull * (g->n_rot / 2 ? g->n_rot / 2 : 1);
    uint64_t wb = a->fused ? map_bytes(g) : 4ull * k_rows * g->head_dim;
    vkv_status st;
    if (!a->n_head || a->n_head % g->n_kv_head)
        return vkv_error(VKV_ERR_ARG, "%s: %u query heads for %u KV heads", op, a->n_head, g->n_kv_head);
    if ((st = check_geom(g, op)) || (st = vkv_ops_check_view(gpu, q, qb, op, "q")) ||
        (st = vkv_ops_check_view(gpu, out, qb, op, "output")) ||
        (st = vkv_ops_check_view(gpu, k, kb, op, "tiered K")) || (st = vkv_ops_check_view(gpu, v, vb, op, "tiered V")) ||
        (st = vkv_ops_check_view(gpu, meta, 32ull * g->n_kv_head, op, "tier metadata")) ||
        (st = vkv_ops_check_view(gpu, pos, 4ull * (p_entries ? p_entries : 1), op, "positions")) ||
        (st = vkv_ops_check_view(gpu, w_or_vhat, wb, op, a->fused ? "W" : "rebuilt values")) ||
        (st = vkv_ops_check_view(gpu, inv_freq, fb, op, "frequencies")) ||
        (st = vkv_ops_check_single_range(gpu, kb, op, "the tiered K")))
        return st;
    if (!a->n_q) return VKV_OK;
    /* f16 or f32 tiers of one type have their own kernels; the rest read each row type at run time. */
    const bool any = g->tier_k != g->tier_v || vkv_kv_type_quantized(g->tier_k);
    const bool f16 = g->tier_k == VKV_F16, no_apx = a->max_apx == 0;
    if (any && !a->fused && !no_apx)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: the materialised path reads f16 or f32 tiers of one type", op);
    vkv_kernel kk = no_apx     ? (any ? VKV_K_ATTN_TIERED_NOAPX_ANY : f16 ? VKV_K_ATTN_TIERED_NOAPX_F16 : VKV_K_ATTN_TIERED_NOAPX_F32)
                    : a->fused ? (any ? VKV_K_ATTN_TIERED_FUSED_ANY : f16 ? VKV_K_ATTN_TIERED_FUSED_F16 : VKV_K_ATTN_TIERED_FUSED_F32)
                               : (f16 ? VKV_K_ATTN_TIERED_MAT_F16 : VKV_K_ATTN_TIERED_MAT_F32);
    uint32_t wg = vkv_kernel_workgroup_size(gpu, kk), d4n = g->head_dim / 4;
    /* attn_tiered.comp sums its key groups (two accumulators) through 2 vec4 of the K/V tile per thread. */
    if (2 * wg > VKV_ATTN_SKV_VEC4)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup of %u exceeds the shared tile", op, wg);
    if (g->head_dim % 4) return vkv_error(VKV_ERR_UNSUPPORTED, "%s: head dim %u is not a multiple of 4", op, g->head_dim);
    uint32_t rows = a->n_q * (a->n_head / g->n_kv_head), tile_q, tile_k;
    vkv_attn_tiles(g->head_dim, rows, true, wg, &tile_q, &tile_k);
    if ((wg / tile_q) * VKV_ATTN_MAX_COLS < d4n) return vkv_error(VKV_ERR_UNSUPPORTED, "%s: head dim %u too large", op, g->head_dim);
    uint32_t max_keys = a->max_comp + a->n_new0 + a->n_q;
    uint32_t splits = a->scratch.buf ? tiered_splits(a->n_q, max_keys) : 1;
    uint32_t split_len = (max_keys + splits - 1) / splits;
    split_len = (split_len + tile_k - 1) / tile_k * tile_k; /* whole key tiles per split */
    /* A joint map: one run per block s (attn_tiered.comp), s > 0 adding to out. */
    const uint32_t runs = a->fused && !no_apx ? shifts(g) : 1, block = g->n_kv_head * g->head_dim * g->head_dim;
    vkv_pc_attn_tiered pc = {a->n_q, a->n_head, g->n_kv_head, g->head_dim, a->n_new0, g->n_rot, g->neox, a->scale,
                             tile_q, tile_k, split_len, 0, 0, 0, g->tier_k, g->tier_v};
    vkv_binding b[8] = {vkv_ops_bind(q, 0, qb), vkv_ops_bind(k, 0, kb), vkv_ops_bind(v, 0, vb),
                        vkv_ops_bind(meta, 0, 32ull * g->n_kv_head), vkv_ops_bind(pos, 0, 4ull * (p_entries ? p_entries : 1)),
                        vkv_ops_bind(w_or_vhat, 0, wb), vkv_ops_bind(inv_freq, 0, fb), vkv_ops_bind(out, 0, qb)};
    const uint32_t groups_q = (rows + tile_q - 1) / tile_q;
    if (splits == 1) {
        for (uint32_t s = 0; s < runs; s++) {
            pc.apx_shift = s;
            pc.w_off = s * block;
            pc.accumulate = s > 0;
            if ((st = vkv_dispatch(gpu, kk, b, 8, &pc, groups_q, 1, g->n_kv_head))) return st;
        }
        return VKV_OK;
    }

    /* Split decode: partials, then the combining pass with the map. */
    uint64_t sb = vkv_tiered_attn_scratch_bytes(a->n_q, a->n_head, g->head_dim, max_keys);
    uint64_t wbytes = a->fused ? map_bytes(g) : 4ull * g->n_kv_head * g->head_dim * g->head_dim;
    vkv_view wmap = a->fused ? w_or_vhat : a->w;
    if ((st = vkv_ops_check_view(gpu, a->scratch, sb, op, "split scratch")) ||
        (st = vkv_ops_check_single_range(gpu, sb, op, "the split scratch")) ||
        (st = vkv_ops_check_view(gpu, wmap, wbytes, op, "W for the reduce")))
        return st;
    vkv_kernel ks = no_apx     ? (any ? VKV_K_ATTN_TIERED_SPLIT_NOAPX_ANY : f16 ? VKV_K_ATTN_TIERED_SPLIT_NOAPX_F16 : VKV_K_ATTN_TIERED_SPLIT_NOAPX_F32)
                    : a->fused ? (any ? VKV_K_ATTN_TIERED_SPLIT_FUSED_ANY : f16 ? VKV_K_ATTN_TIERED_SPLIT_FUSED_F16 : VKV_K_ATTN_TIERED_SPLIT_FUSED_F32)
                               : (f16 ? VKV_K_ATTN_TIERED_SPLIT_MAT_F16 : VKV_K_ATTN_TIERED_SPLIT_MAT_F32);
    b[7] = vkv_ops_bind(a->scratch, 0, sb);
    vkv_pc_attn_tiered_reduce rp = {a->n_q * a->n_head, a->n_head, g->n_kv_head, g->head_dim, splits, 0, 0};
    vkv_binding rb2[4] = {vkv_ops_bind(a->scratch, 0, sb), vkv_ops_bind(meta, 0, 32ull * g->n_kv_head),
                          vkv_ops_bind(wmap, 0, wbytes), vkv_ops_bind(out, 0, qb)};
    for (uint32_t s = 0; s < runs; s++) {
        pc.apx_shift = s;
        rp.w_off = s * block;
        rp.accumulate = s > 0;
        if ((st = vkv_dispatch(gpu, ks, b, 8, &pc, groups_q, splits, g->n_kv_head)) ||
            (st = vkv_dispatch(gpu, VKV_K_ATTN_TIERED_REDUCE, rb2, 4, &rp, a->n_q * a->n_head, 1, 1)))
            return st;
    }
    return VKV_OK;
}

static vkv_status elementwise3(vkv_gpu *gpu, vkv_kernel k, const char *op, vkv_view a, vkv_view b, uint32_t total,
                               vkv_view out)
{
    uint64_t bytes = 4ull * total;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, a, bytes, op, "first input")) || (st = vkv_ops_check_view(gpu, b, bytes, op, "second input")) ||
        (st = vkv_ops_check_view(gpu, out, bytes, op, "output")) || (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    if (!total) return VKV_OK;
    uint32_t wg = vkv_kernel_workgroup_size(gpu, k), gx, gy;
    vkv_ops_spread_groups(gpu, ((uint64_t)total + wg - 1) / wg, &gx, &gy);
    vkv_pc_vector_elementwise pc = {total};
    vkv_binding bb[3] = {vkv_ops_bind(a, 0, bytes), vkv_ops_bind(b, 0, bytes), vkv_ops_bind(out, 0, bytes)};
    return vkv_dispatch(gpu, k, bb, 3, &pc, gx, gy, 1);
}

vkv_status vkv_op_vector_pool_scores(vkv_gpu *gpu, vkv_view pool, vkv_view eps, uint32_t total, vkv_view s)
{
    return elementwise3(gpu, VKV_K_VECTOR_POOL_SCORES, "vector_pool_scores", pool, eps, total, s);
}

vkv_status vkv_op_vector_pool_extend(vkv_gpu *gpu, vkv_view base, vkv_view scores, uint32_t total, vkv_view s)
{
    return elementwise3(gpu, VKV_K_VECTOR_POOL_EXTEND, "vector_pool_extend", base, scores, total, s);
}

vkv_status vkv_op_vector_assign_tiers(vkv_gpu *gpu, vkv_view pool, vkv_view apx, uint32_t total, vkv_view tiers)
{
    return elementwise3(gpu, VKV_K_VECTOR_ASSIGN_TIERS, "vector_assign_tiers", pool, apx, total, tiers);
}

vkv_status vkv_op_vector_head_mean(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t n, vkv_view out)
{
    const char *op = "vector_head_mean";
    uint64_t xb = 4ull * rows * n, ob = 4ull * n;
    vkv_status st;
    if (!rows) return vkv_error(VKV_ERR_ARG, "%s: no rows", op);
    if ((st = vkv_ops_check_view(gpu, x, xb, op, "input")) || (st = vkv_ops_check_view(gpu, out, ob, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, xb, op, "the input")))
        return st;
    if (!n) return VKV_OK;
    uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_VECTOR_HEAD_MEAN), gx, gy;
    vkv_ops_spread_groups(gpu, ((uint64_t)n + wg - 1) / wg, &gx, &gy);
    vkv_pc_vector_head_mean pc = {rows, n};
    vkv_binding b[2] = {vkv_ops_bind(x, 0, xb), vkv_ops_bind(out, 0, ob)};
    return vkv_dispatch(gpu, VKV_K_VECTOR_HEAD_MEAN, b, 2, &pc, gx, gy, 1);
}
