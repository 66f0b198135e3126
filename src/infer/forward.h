/* The transformer forward pass on the GPU: an inference context owns the KV
 * cache and the activation buffers of one sequence and evaluates tokens in
 * chunks (prefill: matrix-matrix kernels and the tiled causal attention;
 * decode: matrix-vector kernels and split-context attention). Only the logits
 * that are asked for come back to the host. */
#ifndef VKV_FORWARD_H
#define VKV_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "vk/tiles.h"

typedef struct vkv_ctx vkv_ctx;

typedef struct vkv_ctx_params {
    uint32_t n_ctx;     /* cache slots (max tokens of the sequence); 0 = the model's training context */
    uint32_t n_batch;   /* prefill chunk (tokens per forward); 0 = 512 */
    vkv_dtype k_type;   /* the K cache's rows: VKV_F16, VKV_F32, VKV_Q8_0 or VKV_Q4_0 (kvlayout/kv_layout.h) */
    vkv_dtype v_type;   /* the V cache's rows, likewise */
    bool compress;      /* a press will compress the cache: with quantized or mixed types the plain
                         * cache is then f16 and the types apply to the tiers (kv/kv_cache.h) */
    uint32_t n_kv_slots; /* slots per KV head of the plain cache; 0 = n_ctx. Fewer than n_ctx for a
                          * budgeted cache (compression during generation): the plain cache then
                          * holds the first n_kv_slots tokens, compression the rest */
    const vkv_ctx *scratch_from; /* NULL: the context allocates its activation, ids, positions and logits
                                  * buffers. Else it borrows those of scratch_from (same device and model;
                                  * n_batch is capped at its n_batch), which must outlive it. The contexts
                                  * that share them must not evaluate at the same time: one forward at a
                                  * time (the serve scheduler's steps), as nothing is kept in them between
                                  * forwards. vkv_ctx_plan_memory then counts no scratch but the cache's. */
    uint32_t step_seqs; /* as the scratch owner of batched steps: the most sequences a step pages
                         * (infer/forward.h, vkv_ctx_eval_batch) and the most tokens each holds
                         * (step_ctx; 0 = n_ctx): the paged step's tables and partials are sized for
                         * them. 0: no paged steps (each sequence's attention then runs on its own) */
    uint32_t step_ctx;
    vkv_kv_pages *pages;        /* non-NULL: the cache is paged from this pool (kv/kv_pages.h), its rows of the
                                 * pool's types (k_type / v_type must name them), n_kv_slots n_ctx or 0 and
                                 * compress false; the pool outlives the context */
    bool stage_rows;    /* tests: a forward led by this context keeps rows as a device of 256-byte storage
                         * alignment must: a batched step copies rows 1.. to aligned staging slots for
                         * attention (vkv_ctx_eval_batch), a batched prefill starts its chunks at rows of
                         * 256-byte offsets and stages its one-token chunks (vkv_ctx_eval_chunks) */
} vkv_ctx_params;

vkv_status vkv_ctx_create(vkv_gpu *gpu, const vkv_model *m, const vkv_ctx_params *p, vkv_ctx **out);

/* The device memory vkv_ctx_create would take, before anything is allocated
 * (run refuses a context that cannot fit): the KV cache, and the rest of the
 * context (activations, logits, attention scratch); host-visible buffers
 * apart. A press session allocates more at compression. */
typedef struct vkv_ctx_memory {
    uint32_t n_ctx;         /* the context length, defaults applied */
    uint64_t kv_bytes;      /* device: K and V caches of every layer */
    uint64_t scratch_bytes; /* device: activations, logits, attention scratch */
    uint64_t host_bytes;    /* host-visible: token ids, positions, logits readback */
    uint64_t largest_kv_buffer; /* device: one layer's K or V cache, bound whole */
} vkv_ctx_memory;
vkv_ctx_memory vkv_ctx_plan_memory(const vkv_hparams *hp, const vkv_ctx_params *p);
void vkv_ctx_free(vkv_ctx *c);

/* Appends n tokens at positions n_past.. and runs the model over them in
 * chunks of n_batch. logits: when all_logits, [n, n_vocab] (every position),
 * else [n_vocab] for the last token; may be NULL to skip the output layer. */
vkv_status vkv_ctx_eval(vkv_ctx *c, const int32_t *ids, uint32_t n, bool all_logits, float *logits);

/* Sequences one batched decoding step takes. */
#define VKV_STEP_MAX 256u

/* One decode step of n distinct contexts (1 <= n <= VKV_STEP_MAX, one
 * device and model, each with room for one more token): ids[i] is appended
 * to ctxs[i] at its n_past, in one recording and one submission. Every
 * weight is read once for each VKV_BATCH_MAX rows (the multi-column matvec,
 * in slices of its width above it: each row keeps its bits); attention,
 * the kv hook and the q hook run per context on its row (n_tok 1, pos0 its
 * n_past), so compression during generation keeps working per sequence.
 * Runs in ctxs[0]'s buffers (own or borrowed), which must hold n rows.
 * logits: [n, n_vocab], row i bitwise what vkv_ctx_eval(ctxs[i], &ids[i], 1,
 * false, ...) gives (outputs do not depend on batching); may be NULL. Each
 * context's n_past advances by 1. */
vkv_status vkv_ctx_eval_batch(vkv_ctx *const *ctxs, const int32_t *ids, uint32_t n, float *logits);

/* The prefill of several sequences in one forward: chunk i, the n_tok[i]
 * tokens ids[i], appended to ctxs[i] at its n_past (1 <= n <= VKV_BATCH_MAX
 * distinct contexts of one device and model). Every weight is read once for
 * all chunks' rows; attention and the hooks run per context on its rows.
 * Each chunk is one vkv_ctx_eval would take whole (n_tok[i] <= its context's
 * n_batch), and gives the same bits: cache, and logits[i] (NULL, or
 * [n_vocab] of its last token: what vkv_ctx_eval(ctxs[i], ids[i], n_tok[i],
 * false, ...) returns). The chunks must share a matrix-product path
 * (vkv_ctx_chunks_share_path) and fit ctxs[0]'s buffers (vkv_ctx_chunks_fit),
 * where each starts at a row the storage alignment allows. */
vkv_status vkv_ctx_eval_chunks(vkv_ctx *const *ctxs, const int32_t *const *ids, const uint32_t *n_tok, uint32_t n,
                               float *const *logits);
/* Whether chunks of n_a and n_b tokens take the same matrix product alone
 * (so one forward gives each its own bits): both the matrix-vector kernels
 * (vkv_matmul_auto_is_matvec: up to VKV_BATCH_MAX tokens) or both the tiled
 * or cooperative product. */
bool vkv_ctx_chunks_share_path(uint32_t n_a, uint32_t n_b);
/* Whether a prompt row evaluated in a chunk of n_a tokens has the bits it
 * gets in a chunk of n_b (at the same position, after the same rows): both
 * take the same matrix product (vkv_ctx_chunks_share_path) and the prefill
 * attention kernel, whose every row is its own. Chunks of up to
 * VKV_ATTN_DECODE_MAX_Q tokens take the split decode attention, whose tiles
 * and splits follow the chunk: a row of one is never taken for another's. */
bool vkv_ctx_rows_share_bits(uint32_t n_a, uint32_t n_b);
/* How many of the chunks n_tok[0..n), from the first, one
 * vkv_ctx_eval_chunks in s's buffers (its own or borrowed) takes: those that
 * share the first's path, while their rows fit the buffers and, for short
 * chunks, the matrix-vector kernels (at least 1 when n_tok[0] <= s's n_batch). */
uint32_t vkv_ctx_chunks_fit(const vkv_ctx *s, const uint32_t *n_tok, uint32_t n);

/* Called while a chunk is recorded, once per layer, with the layer's keys
 * before RoPE (after the QK-norm of qwen3, with biases) and its values, both
 * [n_tok, n_kv_head, head_dim] f32 on the device, for tokens at positions
 * pos0..pos0+n_tok-1. The hook may record its own dispatches into the open
 * recording (e.g. calibration statistics); the views are only valid then. */
typedef vkv_status (*vkv_kv_hook)(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view k_pre_rope, vkv_view v,
                                  uint32_t n_tok, uint32_t pos0);
void vkv_ctx_set_kv_hook(vkv_ctx *c, vkv_kv_hook hook, void *user);

/* Called once per layer of a recorded chunk with the queries after RoPE,
 * [n_tok, n_head, head_dim] f32, of positions pos0..pos0+n_tok-1, after the
 * chunk's keys and values are in the layer's cache (scorers capture the last
 * queries of the context, or attend with every query, through it). */
typedef vkv_status (*vkv_q_hook)(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view q, uint32_t n_tok, uint32_t pos0);
void vkv_ctx_set_q_hook(vkv_ctx *c, vkv_q_hook hook, void *user);

/* ---- The KV cache (kv/kv_cache.h) ----
 * After compression a layer's cache is the tiered layout of kvlayout/kv_layout.h
 * (retained K+V, approximated K, evicted nothing), in buffers of exactly that
 * size plus room for the tokens still to come; the original buffers are
 * freed. Tokens evaluated afterwards are appended as retained, at positions
 * continuing from the context length. The press compresses through the
 * cache itself: */
vkv_kv_cache *vkv_ctx_kv(vkv_ctx *c);
/* Attention over compressed layers: the fused path (default) or the
 * reference path that materialises the rebuilt values once. */
vkv_status vkv_ctx_set_materialized(vkv_ctx *c, bool materialized);
/* What the cache holds (vkv_kv_memory_of at the context's length). */
vkv_kv_memory vkv_ctx_kv_memory(const vkv_ctx *c);

/* Views of a layer's plain caches: [n_kv_head, n_kv_slots] rows of the K
 * type (vkv_ctx_k_type) and the V type (vkv_ctx_v_type). */
vkv_view vkv_ctx_k_cache(const vkv_ctx *c, uint32_t layer);
vkv_view vkv_ctx_v_cache(const vkv_ctx *c, uint32_t layer);
vkv_dtype vkv_ctx_k_type(const vkv_ctx *c);
vkv_dtype vkv_ctx_v_type(const vkv_ctx *c);
/* The types asked for (the tiers' when the plain cache is the f16 working cache). */
vkv_dtype vkv_ctx_tier_k_type(const vkv_ctx *c);
vkv_dtype vkv_ctx_tier_v_type(const vkv_ctx *c);

/* The device the context runs on. */
vkv_gpu *vkv_ctx_gpu(const vkv_ctx *c);

/* Tokens in the cache. */
uint32_t vkv_ctx_n_past(const vkv_ctx *c);
uint32_t vkv_ctx_n_ctx(const vkv_ctx *c);
/* The context length at its compression (0: nothing compressed). */
uint32_t vkv_ctx_n_compressed(const vkv_ctx *c);
/* Tokens per forward of vkv_ctx_eval's chunks (n_batch, at most n_ctx). */
uint32_t vkv_ctx_n_batch(const vkv_ctx *c);
/* Slots per KV head of the plain cache (the stride of vkv_ctx_k_cache's views). */
uint32_t vkv_ctx_kv_slots(const vkv_ctx *c);
/* Forgets the sequence (the cache is overwritten from position 0); compressed
 * layers get their plain caches back. */
vkv_status vkv_ctx_reset(vkv_ctx *c);
/* Forgets the sequence, then takes the first n tokens of src's cache as its
 * own (vkv_kv_copy_prefix: bit for bit what src's evaluation wrote): the
 * next evaluation continues at position n. n <= src's n_past; both caches
 * plain, of the same row types. */
vkv_status vkv_ctx_copy_prefix(vkv_ctx *c, const vkv_ctx *src, uint32_t n);
/* Forgets the sequence, then takes src's compressed context as its own
 * (vkv_kv_copy_compressed: what its own compression of the same rows would
 * hold): the next evaluation continues at the context's end. src's tokens
 * after its compression are not taken. */
vkv_status vkv_ctx_copy_compressed(vkv_ctx *c, const vkv_ctx *src);
/* Forgets the tokens after the first n (n <= n_past): the next evaluation
 * continues at position n and overwrites their slots (KVzip's reconstruction
 * pass is dropped this way). Plain caches only: VKV_ERR_ARG once a layer is
 * compressed. */
vkv_status vkv_ctx_truncate(vkv_ctx *c, uint32_t n);
/* Device bytes held by the KV cache (compressed layers: their tiered buffers,
 * including the room for tokens still to come). */
uint64_t vkv_ctx_kv_bytes(const vkv_ctx *c);

#endif
