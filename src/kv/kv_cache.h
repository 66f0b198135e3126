/* The KV cache of one sequence on the GPU, and its owner: per layer either
 * the plain layout or, after compression, VECTOR's tiered layout
 * (kv/kv_layout.h); appending a chunk's keys and values, compaction, the
 * on-device OLS maps W (uploaded once per layer, read by the residual and by
 * attention), the choice of attention kernel and the byte accounting
 * (docs/ARCHITECTURE.md §2). The forward pass (infer/forward.h) calls it once
 * per layer of a chunk. */
#ifndef VKV_KV_CACHE_H
#define VKV_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/kv_layout.h"
#include "model/model.h"

typedef struct vkv_kv_cache vkv_kv_cache;

/* Plain caches of n_ctx slots of kv_type (VKV_F16 or VKV_F32) for every layer
 * of m; attention scratch for up to VKV_ATTN_DECODE_MAX_Q queries. */
vkv_status vkv_kv_create(vkv_gpu *gpu, const vkv_model *m, uint32_t n_ctx, vkv_dtype kv_type, vkv_kv_cache **out);
void vkv_kv_free(vkv_kv_cache *kv);

/* Device bytes vkv_kv_create takes: the K and V caches of every layer, and
 * the plain attention's scratch. */
uint64_t vkv_kv_plan_cache_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype kv_type);
uint64_t vkv_kv_plan_scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype kv_type);

/* Views of a plain layer's caches: [n_kv_head, n_ctx, head_dim] of the KV type. */
vkv_view vkv_kv_k_cache(const vkv_kv_cache *kv, uint32_t layer);
vkv_view vkv_kv_v_cache(const vkv_kv_cache *kv, uint32_t layer);
vkv_dtype vkv_kv_type(const vkv_kv_cache *kv);

/* Records, for n tokens at positions n_past.. of layer `layer`: k (post-RoPE)
 * and v [n, n_kv_head, head_dim] f32 appended to the cache, then out[n,
 * n_head, head_dim] = attention of q (post-RoPE) over everything the cache
 * holds. The kernel: the plain cache's attention (prefill or split decode),
 * or on a tiered layer the fused path (W applied once per query head) or the
 * materialised one (vkv_kv_set_materialized). */
vkv_status vkv_kv_append_attend(vkv_kv_cache *kv, uint32_t layer, vkv_view q, vkv_view k, vkv_view v, uint32_t n,
                                uint32_t n_past, vkv_view out);

/* Forgets every token: compressed layers get their plain caches back. */
vkv_status vkv_kv_reset(vkv_kv_cache *kv);

/* Layer `layer`'s OLS maps w [S, n_kv_head, head_dim, head_dim] f32 (S:
 * vkv_kv_set_map_shifts; kv/kv_layout.h) on the device, uploaded on the
 * first call: the residual reads them, and the compressed layer keeps them
 * for attention. *out: the view. */
vkv_status vkv_kv_layer_w(vkv_kv_cache *kv, uint32_t layer, const float *w, vkv_view *out);

/* Compacts a plain layer holding the n context tokens into the tiered layout
 * (tiers [n_kv_head, n] uint32 vkv_tier on the device; n_ret / n_apx
 * [n_kv_head] its counts). A layer that approximates anything needs its maps
 * from vkv_kv_layer_w. Records and submits on its own; the plain cache is
 * freed. Every layer is compressed at the same n. */
vkv_status vkv_kv_compress_layer(vkv_kv_cache *kv, uint32_t layer, uint32_t n, vkv_view tiers, const uint32_t *n_ret,
                                 const uint32_t *n_apx);
/* Attention over compressed layers: the fused path (default) or the
 * reference path that materialises the rebuilt values once. */
vkv_status vkv_kv_set_materialized(vkv_kv_cache *kv, bool materialized);
/* The maps' blocks per KV head: 1 (per-head maps, the default) or n_kv_head
 * (one joint map per layer; every compressed layer's heads then hold the
 * same tiers). Before anything is compressed. */
vkv_status vkv_kv_set_map_shifts(vkv_kv_cache *kv, uint32_t map_shifts);
/* Context length at compression (0 when nothing is compressed). */
uint32_t vkv_kv_n_compressed_ctx(const vkv_kv_cache *kv);

typedef struct vkv_kv_memory {
    uint64_t k_retained, v_retained;   /* bytes of retained keys / values (all layers) */
    uint64_t k_approximated;           /* bytes of approximated keys */
    uint64_t appended_capacity;        /* bytes reserved for tokens after compression */
    uint64_t w_bytes;                  /* OLS maps on the device */
    uint64_t uncompressed_context;     /* the same context, uncompressed */
} vkv_kv_memory;
/* What the cache holds for n_past tokens. */
vkv_kv_memory vkv_kv_memory_of(const vkv_kv_cache *kv, uint32_t n_past);
/* Device bytes of the caches (compressed layers: their tiered buffers,
 * including the room for tokens still to come). */
uint64_t vkv_kv_bytes(const vkv_kv_cache *kv);

#endif
