/* The KV cache's layouts, device-free: the plain cache and VECTOR's tiered
 * layer, as the GPU kernels (vk/ops_attn.h, vk/ops_vector.h), their CPU
 * references (ref/) and the cache's owner (kv/kv_cache.h) all read them
 * (docs/ARCHITECTURE.md §2).
 *
 * Plain cache (per layer): k, v: [n_kv_head, n_ctx_max] rows of head_dim
 * elements, K of k_type and V of v_type (f16, f32, q8_0 or q4_0, each row
 * vkv_kv_row_bytes bytes); slot j holds the token at absolute position j,
 * slots 0..n_kv-1 are valid.
 *
 * A quantized row (q8_0, q4_0) is cut into blocks of 32 elements along the
 * row, the last one shorter when head_dim is not a multiple of 32 (48 = 32 +
 * 16): ggml's blocks (core/dtype.h, vkv_quantize_block_q8_0), one f16 scale
 * per block, then padded to a multiple of 4 bytes so that every row starts
 * on a 32-bit word. With head_dim a multiple of 32 a q8_0 row is ggml's row
 * byte for byte (q4_0: plus 2 bytes of padding per odd block count).
 *
 * Tiered layout of one layer (after compression), per KV head h:
 *   K slots [k_off[h], k_off[h] + n_ret[h] + n_apx[h] + cap_new):
 *     first the retained tokens, then the approximated ones (each tier in
 *     position order), then tokens appended after compression;
 *   V slots [v_off[h], v_off[h] + n_ret[h] + cap_new): retained, then appended
 *     (approximated tokens have no value: it is rebuilt as W R^-1 K);
 *   positions [p_off[h], p_off[h] + n_ret[h] + n_apx[h]) of the compressed
 *     slots (appended token t is at position n_ctx0 + t).
 * Rows are head_dim elements: of the plain cache's type, or (quantized tiers)
 * K rows of one type and V rows of another, compacted from an f16 plain
 * cache (docs/ARCHITECTURE.md §2).
 *
 * VECTOR's maps of one layer on the device, W [S, n_kv_head, head_dim (d_v),
 * head_dim (d_k)] f32: block (s, h) maps the pre-RoPE key of KV head
 * (h + s) mod n_kv_head to the value of KV head h, and a rebuilt value is
 *   V^_h = sum_s W[s, h] R^-1 K_((h + s) mod n_kv_head).
 * S = 1: a map per (layer, KV head), the default (--vector-map head).
 * S = n_kv_head: one joint map per layer over all KV heads' keys
 * (--vector-map joint), its [D, D] matrix (D = n_kv_head head_dim) cut into
 * blocks by vkv_vector_joint_blocks; every head of such a layer then has the
 * same tiers, so the approximated slot t of every head holds the same token
 * (docs/ARCHITECTURE.md §2). */
#ifndef VKV_KV_LAYOUT_H
#define VKV_KV_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

/* Causal grouped-query attention over a plain cache. */
typedef struct vkv_attn_params {
    uint32_t n_q;       /* queries in this call (tokens) */
    uint32_t n_head;    /* query heads; a multiple of n_kv_head */
    uint32_t n_kv_head; /* KV heads: query head h reads KV head h / (n_head / n_kv_head) */
    uint32_t head_dim;  /* elements per head (even, <= 256) */
    uint32_t n_ctx_max; /* cache slots per KV head: the stride between KV heads */
    uint32_t n_kv;      /* valid cache slots 0..n_kv-1 (<= n_ctx_max) */
    uint32_t pos0;      /* absolute position of query 0; query i is at pos0 + i */
    float scale;        /* score scale, usually 1/sqrt(head_dim) */
    vkv_dtype k_type;   /* the K cache's rows: VKV_F16 (default), VKV_F32, VKV_Q8_0, VKV_Q4_0 */
    vkv_dtype v_type;   /* the V cache's rows, likewise */
} vkv_attn_params;

/* True for the types a cache row may have: f16, f32, q8_0, q4_0. */
bool vkv_kv_type_ok(vkv_dtype t);
/* True for q8_0 and q4_0. */
bool vkv_kv_type_quantized(vkv_dtype t);
/* Bytes of one row of head_dim elements of type t (a multiple of 4 for the
 * quantized types). */
size_t vkv_kv_row_bytes(vkv_dtype t, uint32_t head_dim);
/* Bytes of one layer's K (or V) cache: n_kv_head * n_ctx_max rows of t. */
size_t vkv_kv_cache_bytes(vkv_dtype t, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim);
/* One row of head_dim (a multiple of 4) f32 values to type t (f16, f32,
 * q8_0, q4_0) in the row format above (f16: round to nearest even;
 * q8_0/q4_0: blocks of 32, the last shorter, core/dtype.h's reference block
 * quantizers; padding zeroed), and back (kvlayout/kv_rows.c). */
void vkv_kv_encode_row(vkv_dtype t, uint32_t head_dim, const float *x, void *row);
void vkv_kv_decode_row(vkv_dtype t, uint32_t head_dim, const void *row, float *x);
/* Element d of such a row. */
float vkv_kv_row_get(vkv_dtype t, uint32_t head_dim, const void *row, uint32_t d);

/* w_joint [D, D] row-major (v^ = W k over the heads' keys concatenated head
 * after head) -> out [n_kv_head, n_kv_head, head_dim, head_dim], the blocks
 * above: out[s, h] = w_joint[h rows, ((h + s) mod n_kv_head) columns]. */
void vkv_vector_joint_blocks(const float *w_joint, uint32_t n_kv_head, uint32_t head_dim, float *out);

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

/* Attention of n_q queries (query i is appended token n_new0 + i) over a
 * tiered layer: every compressed slot plus the appended tokens 0..n_new0+i. */
typedef struct vkv_tiered_attn_params {
    uint32_t n_q, n_head, n_kv_head, head_dim;
    uint32_t n_new0;     /* appended tokens before query 0 */
    uint32_t n_ctx0;     /* context length at compression (position of appended token 0) */
    float scale;
    vkv_dtype k_type, v_type; /* the tiered K and V rows (f16, f32, q8_0, q4_0) */
    uint32_t map_shifts; /* S of the maps' layout above (0 counts as 1) */
} vkv_tiered_attn_params;

#endif
