/* Attention over a layer's KV cache on the GPU: causal grouped-query
 * attention with the semantics of vkv_ref_attention (src/ref/ref_attn.h).
 *
 * Two kernels: attn_prefill (flash attention: a workgroup streams key tiles
 * through shared memory for a tile of (query, head) rows, online softmax,
 * never an n x n score matrix) and attn_decode + attn_decode_reduce
 * (flash-decoding: the keys are cut into splits that run in parallel, each
 * writing a partial (max, sum, weighted values) to a scratch buffer, and a
 * second pass combines them). */
#ifndef VKV_OPS_ATTN_H
#define VKV_OPS_ATTN_H

#include "kvlayout/kv_layout.h"
#include "vk/ops.h"

typedef enum vkv_attn_path {
    VKV_ATTN_AUTO,    /* decode when n_q <= VKV_ATTN_DECODE_MAX_Q, prefill otherwise */
    VKV_ATTN_PREFILL, /* forced (tests) */
    VKV_ATTN_DECODE,  /* forced (tests) */
} vkv_attn_path;

#define VKV_ATTN_DECODE_MAX_Q 4
#define VKV_ATTN_MAX_HEAD_DIM 256
#define VKV_ATTN_SPLIT_KEYS 256 /* decode: about this many keys per split */
#define VKV_ATTN_MAX_SPLITS 64

/* Splits the decode path uses for n_kv cache slots: ceil(n_kv / 256) capped
 * at 64 (at least 1). With one split it runs a single dispatch, no scratch. */
uint32_t vkv_attn_decode_splits(uint32_t n_kv);

/* Bytes of scratch that covers every call with p's heads and head_dim, at
 * most p->n_kv cache slots and at most max(p->n_q, VKV_ATTN_DECODE_MAX_Q)
 * queries, on either path: allocate it once with n_kv = n_ctx_max. Never 0
 * (a buffer of this size can always be created), though prefill and
 * one-split decode calls do not touch it. */
uint64_t vkv_attn_scratch_bytes(const vkv_attn_params *p);

/* out[n_q, n_head, head_dim] f32 = attention of q[n_q, n_head, head_dim] f32
 * over the caches k, v: [n_kv_head, n_ctx_max, head_dim] of p->kv_type (views
 * of one layer's whole cache); path AUTO picks decode for n_q <= 4. scratch:
 * a view of at least vkv_attn_scratch_bytes() bytes for these params (only
 * used when decode runs more than one split). head_dim must be a multiple of
 * 4, <= 256. A cache whose used part exceeds maxStorageBufferRange is bound
 * a few KV heads per dispatch (the per-head stride must then be a multiple
 * of the storage offset alignment); q, out and scratch must each fit one
 * range. */
vkv_status vkv_op_attention(vkv_gpu *gpu, vkv_attn_path path, const vkv_attn_params *p, vkv_view q, vkv_view k,
                            vkv_view v, vkv_view scratch, vkv_view out);

/* One sequence of a grouped decode attention: its layer caches k, v
 * ([n_kv_head, n_slots, head_dim] of the group's types: each sequence has
 * its own slots per head), its valid slots (its query, at position n_kv - 1,
 * sees them all) and the row of q and of out that holds its query and gets
 * its output. */
typedef struct vkv_attn_seq {
    vkv_view k, v;
    uint32_t n_kv, row, n_slots;
} vkv_attn_seq;

/* Whether vkv_op_attention_group takes these sequences with p's shape
 * (p's n_q, n_kv, pos0 and n_ctx_max are not used beyond the checks every
 * attention makes: each sequence has its own): K and V both f32 or both f16, each
 * sequence within one decode split (n_kv <= VKV_ATTN_SPLIT_KEYS, so decode
 * runs attn_rows for it alone), its whole cache in one storage range, and a
 * device that takes attn_group's binding arrays (vkv_kernel_arrays_fit). */
bool vkv_attn_group_fits(const vkv_gpu *gpu, const vkv_attn_params *p, const vkv_attn_seq *seqs, uint32_t n_seq);

/* For each sequence s, out's row seqs[s].row [n_head, head_dim] f32 = the
 * decode attention of q's row seqs[s].row over seqs[s]'s caches: one
 * attn_group dispatch per VKV_ATTN_GROUP sequences, each row bitwise what
 * vkv_op_attention (AUTO, n_q = 1, pos0 = n_kv - 1) gives for it alone. q
 * and out: [n_rows, n_head, head_dim] f32. VKV_ERR_UNSUPPORTED when
 * vkv_attn_group_fits says no. */
vkv_status vkv_op_attention_group(vkv_gpu *gpu, const vkv_attn_params *p, const vkv_attn_seq *seqs, uint32_t n_seq,
                                  vkv_view q, vkv_view out, uint32_t n_rows);

#endif
