/* The KV cache of one sequence on the GPU, and its owner: per layer either
 * the plain layout or, after compression, VECTOR's tiered layout
 * (kvlayout/kv_layout.h); appending a chunk's keys and values, compaction, the
 * on-device OLS maps W (uploaded once per layer, read by the residual and by
 * attention), the choice of attention kernel and the byte accounting
 * (docs/ARCHITECTURE.md §2). The forward pass (infer/forward.h) calls it once
 * per layer of a chunk. */
#ifndef VKV_KV_CACHE_H
#define VKV_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvlayout/kv_layout.h"
#include "model/model.h"

typedef struct vkv_kv_cache vkv_kv_cache;

/* Plain caches of n_slots slots (<= n_ctx, the positions the sequence may
 * reach) for every layer of m, K rows of k_type and V rows of v_type (f16,
 * f32, q8_0, q4_0: kvlayout/kv_layout.h); with compress (a press will compress it)
 * and quantized or mixed types, f16 plain caches (the working cache the
 * scorers read) and k_type / v_type for the tiers (vkv_kv_plain_types).
 * Attention scratch for up to VKV_ATTN_DECODE_MAX_Q queries. A layer compressed at n
 * tokens has room for n_slots - n more (n_ctx - n when n_slots = n_ctx). */
vkv_status vkv_kv_create(vkv_gpu *gpu, const vkv_model *m, uint32_t n_ctx, uint32_t n_slots, vkv_dtype k_type,
                         vkv_dtype v_type, bool compress, vkv_kv_cache **out);
/* A paged plain cache of n_ctx slots for every layer of m, rows of the
 * pool's types (docs/ARCHITECTURE.md §2, "Paged caches"): each layer a table
 * of the pool's pages, mapped as tokens are appended (a page shared with
 * another cache is copied before its first write), returned by
 * vkv_kv_trim_pages, vkv_kv_reset and vkv_kv_free. Every output is bitwise
 * the contiguous cache's: appends and attention of a chunk run the
 * contiguous kernels over the pool's staging area (the layer's earlier rows
 * copied in, the chunk's rows copied out to their pages), and a batched
 * step's through the page lists (vkv_kv_append_attend_paged). Such a cache
 * is never compressed and has no contiguous views (vkv_kv_k_cache). The
 * pool outlives it. */
typedef struct vkv_kv_pages vkv_kv_pages;
vkv_status vkv_kv_create_paged(vkv_kv_pages *pages, const vkv_model *m, uint32_t n_ctx, vkv_kv_cache **out);
/* The page holding slots [index << page_shift, ...) of layer `layer` (VKV_KV_NO_PAGE: none). */
uint32_t vkv_kv_page(const vkv_kv_cache *kv, uint32_t layer, uint32_t index);
typedef struct vkv_kv_page_use {
    uint64_t mapped;   /* pages this cache maps, every layer */
    uint64_t shared;   /* of which another cache or a prefix entry maps too */
} vkv_kv_page_use;
vkv_kv_page_use vkv_kv_page_use_of(const vkv_kv_cache *kv);
/* dst (paged, of src's pool and model) maps src's pages of the first n
 * slots of every layer in place of its own: a prefix computed once, shared
 * by reference; the last page, when partly full, is copied on dst's (or
 * src's) next write to it. */
vkv_status vkv_kv_share_prefix(vkv_kv_cache *dst, const vkv_kv_cache *src, uint32_t n);
/* Gives back a paged cache's pages past the first n slots of every layer. */
vkv_status vkv_kv_trim_pages(vkv_kv_cache *kv, uint32_t n);

/* The plain caches' row types for these arguments of vkv_kv_create. */
void vkv_kv_plain_types(vkv_dtype k_type, vkv_dtype v_type, bool compress, vkv_dtype *plain_k, vkv_dtype *plain_v);
void vkv_kv_free(vkv_kv_cache *kv);

/* Device bytes vkv_kv_create takes: the K and V caches of every layer, and
 * the plain attention's scratch. */
uint64_t vkv_kv_plan_cache_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype k_type, vkv_dtype v_type);
uint64_t vkv_kv_plan_scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx);
/* The largest buffer of those caches: one layer's K or V cache, bound whole
 * (it must fit the device's storage range and allocation size). */
uint64_t vkv_kv_plan_largest_buffer(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype k_type, vkv_dtype v_type);

/* Views of a plain layer's caches: [n_kv_head, n_slots, head_dim] of the KV type. */
vkv_view vkv_kv_k_cache(const vkv_kv_cache *kv, uint32_t layer);
vkv_view vkv_kv_v_cache(const vkv_kv_cache *kv, uint32_t layer);
/* The plain caches' K rows' type and V rows'. */
vkv_dtype vkv_kv_k_type(const vkv_kv_cache *kv);
vkv_dtype vkv_kv_v_type(const vkv_kv_cache *kv);

/* Records, for n tokens at positions n_past.. of layer `layer`: k (post-RoPE)
 * and v [n, n_kv_head, head_dim] f32 appended to the cache, then out[n,
 * n_head, head_dim] = attention of q (post-RoPE) over everything the cache
 * holds. The kernel: the plain cache's attention (prefill or split decode),
 * or on a tiered layer the fused path (W applied once per query head) or the
 * materialised one (vkv_kv_set_materialized). */
vkv_status vkv_kv_append_attend(vkv_kv_cache *kv, uint32_t layer, vkv_view q, vkv_view k, vkv_view v, uint32_t n,
                                uint32_t n_past, vkv_view out);

/* Whether two caches can share a paged step: same device, model and row
 * types (each keeps its own slots per head). */
bool vkv_kv_same_group(const vkv_kv_cache *a, const vkv_kv_cache *b);

/* Paged decode steps (docs/ARCHITECTURE.md §2, "Paged caches"): the slots
 * per page the step's page lists use for plain caches, as a shift. */
#define VKV_KV_PAGE_SHIFT 4u
/* The most sequences one paged step takes. */
#define VKV_KV_STEP_MAX 256u
/* Whether layer `layer` of kv can join a paged decode step for a token at
 * n_past: a plain layer with a slot for it, whose K and V caches each fit
 * one storage range. */
bool vkv_kv_pageable(const vkv_kv_cache *kv, uint32_t layer, uint32_t n_past);
/* Table words and partials' bytes a sequence of kv at n_past adds to a
 * paged step of one layer (vk/ops_attn.h, vkv_paged_table_words). */
uint64_t vkv_kv_paged_words(const vkv_kv_cache *kv, uint32_t n_past);
uint64_t vkv_kv_paged_part_bytes(const vkv_kv_cache *kv, uint32_t n_past);
/* One token of each of n_seq sequences at layer `layer`: row rows[i] of k
 * and v [n_rows, n_kv_head, head_dim] f32 appended to kvs[i] at n_past[i],
 * then row rows[i] of out [n_rows, n_head, head_dim] = attention of q's row
 * rows[i] over its cache, through page lists: each cache's rows in the
 * buffer over its memory block (vkv_buffer_base), the step's table written
 * at word *table_used of `table` (host-visible, read when the recording
 * runs, so each layer of a forward takes its own words; *table_used
 * advances), the partials in scratch (scratch_bytes; at least one
 * sequence's). One kv_store_paged and one attn_paged dispatch (+ one reduce)
 * for all of them, more only when their caches lie in different memory
 * blocks or more than one storage range apart, or their partials exceed the
 * scratch. Every cache vkv_kv_pageable at its n_past and every pair
 * vkv_kv_same_group; outputs bitwise vkv_kv_append_attend's. */
vkv_status vkv_kv_append_attend_paged(vkv_kv_cache *const *kvs, const uint32_t *n_past, const uint32_t *rows,
                                      uint32_t n_seq, uint32_t layer, vkv_view q, vkv_view k, vkv_view v,
                                      vkv_view out, uint32_t n_rows, vkv_buffer *table, uint32_t *table_used,
                                      vkv_view scratch, uint64_t scratch_bytes);

/* Copies the first n tokens' K and V rows of every layer of src into dst,
 * head by head (each cache keeps its own slots per head), on the device: the
 * bytes as stored, so dst then holds what src's evaluation of them wrote, bit
 * for bit (a prefix computed once: docs/SERVE.md, "The prefix cache"). Both
 * plain on every layer, of the same model and row types; n at most either's
 * slots. Records and submits on its own. Paged caches share the pages
 * instead (vkv_kv_share_prefix; both paged, of one pool). */
vkv_status vkv_kv_copy_prefix(vkv_kv_cache *dst, const vkv_kv_cache *src, uint32_t n);

/* Copies src's compressed context (every layer tiered at the same n tokens:
 * vkv_kv_n_compressed_ctx) into dst, which holds nothing compressed, on the
 * device: each layer's tiered rows, positions, maps and rebuilt values as
 * stored, laid out with the room for appended tokens dst's own compression
 * of them would leave (n_slots - n), so dst then holds what its own
 * compression would have made of the same rows, bit for bit (a context
 * compressed once: docs/SERVE.md, "The compressed-context cache"). src's
 * tokens appended after its compression are not copied. Same model, row and
 * tier types. Records and submits on its own. */
vkv_status vkv_kv_copy_compressed(vkv_kv_cache *dst, const vkv_kv_cache *src);

/* Forgets every token: compressed layers get their plain caches back. */
vkv_status vkv_kv_reset(vkv_kv_cache *kv);

/* Layer `layer`'s OLS maps w [S, n_kv_head, head_dim, head_dim] f32 (S:
 * vkv_kv_set_map_shifts; kvlayout/kv_layout.h) on the device, uploaded on the
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
/* After n_past tokens: the most K + V rows any (layer, KV head) holds, and
 * the tokens every layer's layout still has room for. */
uint64_t vkv_kv_max_head_rows(const vkv_kv_cache *kv, uint32_t n_past);
/* The most tokens (keys) any (layer, KV head) holds after n_past tokens. */
uint32_t vkv_kv_max_head_tokens(const vkv_kv_cache *kv, uint32_t n_past);
uint32_t vkv_kv_room(const vkv_kv_cache *kv, uint32_t n_past);

/* One layer's tokens back in the plain layout, for compression during
 * generation (docs/ARCHITECTURE.md §2): k, v [n_kv_head, stride, head_dim] of
 * the KV type hold each head's tokens in slots 0..n_tok[h]-1 (a tiered
 * layer's retained, approximated, then appended rows, copied; an
 * approximated slot's V row holds nothing); host tables [n_kv_head, n] of the
 * slots' positions and tiers (vkv_tier; evicted past n_tok[h]). A plain
 * layer's views are its own caches. */
typedef struct vkv_kv_gathered {
    vkv_view k, v;
    vkv_dtype type;         /* their rows' type (both): the plain cache's, or vkv_kv_gather_type's */
    uint32_t stride;        /* slots per head in k and v */
    uint32_t n;             /* slots of the widest head */
    int32_t *pos;           /* [n_kv_head, n] */
    uint8_t *tier;          /* [n_kv_head, n] */
    uint32_t *n_tok;        /* [n_kv_head] */
} vkv_kv_gathered;
void vkv_kv_gathered_free(vkv_kv_gathered *g);

/* True when the tiers hold other types than the plain cache (quantized, or K and V apart). */
bool vkv_kv_tiers_typed(const vkv_kv_cache *kv);
/* Bytes of the wider of a K tier row and a V tier row. */
uint64_t vkv_kv_tier_row_bytes(const vkv_kv_cache *kv);
/* Records, for each KV head h, rows [h src_stride, + n) of src (type src_type)
 * encoded in the K tier's type (values: the V tier's) into q_tmp, then decoded
 * into f32 rows [h dst_stride, + n) of dst: the values the tiers will hold,
 * which VECTOR's residual reads (kv_convert twice). q_tmp holds n_kv_head
 * dst_stride rows of vkv_kv_tier_row_bytes. */
vkv_status vkv_kv_record_as_tier(vkv_kv_cache *kv, bool values, vkv_view src, vkv_dtype src_type, uint32_t src_stride,
                                 uint32_t n, vkv_view q_tmp, vkv_view dst, uint32_t dst_stride);
/* The rows' type a tiered layer is gathered into: the plain cache's, or f32
 * for tiers of other types (a decoded q8_0/q4_0 value is exact in f32, not
 * always in f16, and re-encoding it must give the tier's bytes back). */
vkv_dtype vkv_kv_gather_type(const vkv_kv_cache *kv);
/* Layer `layer` after n_past tokens, gathered into k_tmp / v_tmp (each at
 * least n_kv_head * tmp_slots rows of vkv_kv_gather_type) when it is tiered. */
vkv_status vkv_kv_gather(vkv_kv_cache *kv, uint32_t layer, uint32_t n_past, vkv_buffer *k_tmp, vkv_buffer *v_tmp,
                         uint32_t tmp_slots, vkv_kv_gathered *out);

/* Compacts a gathered layer into a new tiered layout: tiers [n_kv_head, g->n]
 * uint32 on the device (tiers_host the same as bytes) with n_ret / n_apx per
 * head; an approximated slot must not become retained (its value is gone).
 * Room for cap_new tokens after it, the first at position n_past. */
vkv_status vkv_kv_recompress(vkv_kv_cache *kv, uint32_t layer, const vkv_kv_gathered *g, vkv_view tiers,
                             const uint8_t *tiers_host, const uint32_t *n_ret, const uint32_t *n_apx, uint32_t cap_new,
                             uint32_t n_past);

typedef struct vkv_kv_memory {
    uint64_t k_retained, v_retained;   /* bytes of retained keys / values (all layers) */
    uint64_t k_approximated;           /* bytes of approximated keys */
    uint64_t appended_capacity;        /* bytes reserved for tokens after compression */
    uint64_t appended;                 /* bytes of the tokens appended since the last compression */
    uint64_t w_bytes;                  /* OLS maps on the device */
    uint64_t uncompressed_context;     /* the same context, uncompressed */
} vkv_kv_memory;
/* What the cache holds for n_past tokens. */
vkv_kv_memory vkv_kv_memory_of(const vkv_kv_cache *kv, uint32_t n_past);
/* Device bytes of the caches (compressed layers: their tiered buffers,
 * including the room for tokens still to come). */
uint64_t vkv_kv_bytes(const vkv_kv_cache *kv);

#endif
