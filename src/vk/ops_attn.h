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

/* ---- paged decode (docs/ARCHITECTURE.md §2, "Paged caches") ----
 *
 * A sequence's plain K (V) cache of one layer as pages of page_slots = 1 <<
 * page_shift consecutive slots of every KV head: slot j of KV head h is the
 * row at byte
 *   k_pages[j >> page_shift] + h * k_head_bytes + (j & (page_slots - 1)) * K row bytes
 * of the K pool view (V alike), the pages anywhere in it, in any order. A
 * contiguous cache [n_kv_head, n_slots] at byte `off` is the special case
 * k_pages[i] = off + i * page_slots * row bytes, k_head_bytes = n_slots *
 * row bytes. */
typedef struct vkv_paged_seq {
    uint32_t n_kv;             /* valid slots after this step's token: its query sits at n_kv - 1 */
    uint32_t row;              /* its row of q / out (and of the appended k / v) */
    const uint64_t *k_pages, *v_pages; /* [ceil(n_kv / page_slots)] byte offsets in the pool views */
    uint64_t k_head_bytes, v_head_bytes; /* byte stride between KV heads within a page */
} vkv_paged_seq;

/* A step's table as written into a host-visible buffer of uint32 words, for
 * vkv_op_kv_store_paged and vkv_op_attention_paged to read. */
typedef struct vkv_paged_step {
    uint32_t n_seq, page_shift;
    uint32_t seq_base;          /* word of sequence 0's entry (shaders/attn_paged.comp) */
    uint32_t item_base, n_items; /* work items: (sequence, split) pairs */
    uint32_t list_base, n_list; /* sequences of more than one split, for the reduce pass */
    uint32_t words;             /* words written from seq_base */
    uint64_t part_bytes;        /* scratch the partials take */
    uint64_t k_end, v_end;      /* bytes of the pool views the rows reach */
    uint32_t row_align;         /* 4, 8 or 16: the largest that divides every page offset and head stride */
} vkv_paged_step;

/* Table words one step of n_seq sequences with at most max_kv slots each
 * takes (sizes a table buffer), and the partials' scratch bytes. */
uint64_t vkv_paged_table_words(uint32_t n_seq, uint32_t max_kv, uint32_t page_shift);
uint64_t vkv_paged_scratch_bytes(const vkv_attn_params *p, uint32_t n_seq, uint32_t max_kv);

/* Writes the step's table for seqs (p: the heads, head_dim, row types and
 * scale of every sequence; its n_q, n_kv, pos0 and n_ctx_max are not used)
 * at word *used of table (host-visible, `cap` words), advancing *used. Checks
 * every page offset against the row alignment and its page's end against
 * the 32-bit word range the kernels address. */
vkv_status vkv_paged_step_write(const vkv_attn_params *p, uint32_t page_shift, const vkv_paged_seq *seqs,
                                uint32_t n_seq, vkv_buffer *table, uint32_t cap, uint32_t *used, vkv_paged_step *out);

/* Appends each sequence's token: row seqs[s].row of k_src and v_src
 * [n_rows, n_kv_head, head_dim] f32 goes to slot n_kv - 1 of its pages, as
 * p's K and V types, bitwise what vkv_op_kv_store writes (one dispatch). */
vkv_status vkv_op_kv_store_paged(vkv_gpu *gpu, const vkv_attn_params *p, const vkv_paged_step *step,
                                 const vkv_buffer *table, vkv_view k_src, vkv_view v_src, uint32_t n_rows,
                                 vkv_view k_pool, vkv_view v_pool);

/* For each sequence s, out's row seqs[s].row [n_head, head_dim] f32 = the
 * decode attention of q's row over its n_kv slots, bitwise what
 * vkv_op_attention (AUTO, n_q = 1, pos0 = n_kv - 1) gives for that sequence
 * alone over a contiguous copy of its cache: one attn_paged dispatch for
 * every sequence and split, then one attn_paged_reduce for the sequences of
 * more than one split. q and out: [n_rows, n_head, head_dim] f32; scratch:
 * at least step->part_bytes (unused when no sequence has several splits). */
vkv_status vkv_op_attention_paged(vkv_gpu *gpu, const vkv_attn_params *p, const vkv_paged_step *step,
                                  const vkv_buffer *table, vkv_view q, vkv_view out, uint32_t n_rows,
                                  vkv_view k_pool, vkv_view v_pool, vkv_view scratch);

#endif
