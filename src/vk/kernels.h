/* The kernel contract: every compute kernel is declared once, in
 * VKV_KERNEL_LIST below, with its SPIR-V module, its storage-buffer bindings,
 * its push-constant struct and its workgroup class. The build holds every
 * other list to this one:
 *  - each kernel needs a SPIR-V module of its name (shaders/meson.build), and
 *    each module a kernel VKV_K_<NAME> (shaders/embed_spirv.py writes the
 *    reference into the generated table): either gap is a compile error
 *    naming the kernel (VKV_SPIRV_PUSH_BYTES_<name> or VKV_K_<NAME>
 *    undeclared);
 *  - each push-constant struct is the size of its shader's push-constant
 *    block (_Static_asserts in src/vk/pipeline.c);
 *  - the weight kernels are expanded from VKV_DTYPE_LIST (src/core/dtype.h),
 *    so the weight types are spelled once in C;
 *  - every dispatch goes through vkv_dispatch (src/vk/dispatch.h), which
 *    takes a pointer to one of the structs of VKV_PUSH_CONSTANT_LIST (any
 *    other type does not compile) and checks, when recording, that it is the
 *    struct declared for the kernel. */
#ifndef VKV_KERNELS_H
#define VKV_KERNELS_H

#include <stdint.h>

#include "core/dtype.h"
#include "vk/tiles.h"

/* Push constants, one struct per shader (or shaders with the same block),
 * field for field its GLSL `push_constant` block (documented there).
 * src/vk/pipeline.c checks at compile time that each size equals the block's
 * size in the SPIR-V of every kernel declared with it. A new struct goes into
 * VKV_PUSH_CONSTANT_LIST too. */
typedef struct vkv_pc_add { uint32_t n, nb; } vkv_pc_add;
typedef struct vkv_pc_argmax { uint32_t rows, n; } vkv_pc_argmax;
typedef struct vkv_pc_attn { uint32_t n_q, n_head, n_kv_head, head_dim, n_ctx_max, n_kv, pos0; float scale;
                             uint32_t tile_q, tile_k, kv_head0, split_len, n_split, k_type, v_type; } vkv_pc_attn;
/* attn_paged, attn_paged_reduce, kv_store_paged: the step's table is a buffer (shaders/attn_paged.comp). */
typedef struct vkv_pc_attn_paged { uint32_t n_head, n_kv_head, head_dim; float scale; uint32_t tile_q, tile_k, k_type, v_type,
                                   page_shift, seq_base, item_base; } vkv_pc_attn_paged;
typedef struct vkv_pc_attn_paged_reduce { uint32_t n_head, d4n, seq_base, list_base, n_list, groups_x; } vkv_pc_attn_paged_reduce;
typedef struct vkv_pc_kv_store_paged { uint32_t n_seq, n_kv_head, head_dim, k_type, v_type, page_shift, seq_base; } vkv_pc_kv_store_paged;
typedef struct vkv_pc_attn_decode_reduce { uint32_t rows, d4n, n_split, groups_x; } vkv_pc_attn_decode_reduce;
typedef struct vkv_pc_attn_tiered { uint32_t n_q, n_head, n_kv_head, head_dim, n_new0, n_rot, neox; float scale;
                                    uint32_t tile_q, tile_k, split_len, apx_shift, w_off, accumulate, k_type, v_type; } vkv_pc_attn_tiered;
typedef struct vkv_pc_attn_tiered_reduce { uint32_t n_rows, n_head, n_kv_head, head_dim, n_split, w_off, accumulate; } vkv_pc_attn_tiered_reduce;
typedef struct vkv_pc_get_rows { uint32_t n_cols, n_ids, row_base, n_rows; } vkv_pc_get_rows;
typedef struct vkv_pc_gram { uint32_t n_tok, m, n, ldx, ldy, x0, y0, x_step, y_step, x_ones; } vkv_pc_gram;
typedef struct vkv_pc_kv_convert { uint32_t n_rows, src_row0, dst_row0, head_dim, src_type, dst_type; } vkv_pc_kv_convert;
typedef struct vkv_pc_kv_compact { uint32_t n, n_ctx, row_words, head_dim, src_type, k_type, v_type; } vkv_pc_kv_compact;
typedef struct vkv_pc_kv_store { uint32_t n_tok, n_kv_head, head_dim, n_ctx, slot0, mode, kv_type; } vkv_pc_kv_store;
typedef struct vkv_pc_mask_row_counts { uint32_t rows, n, groups_x; } vkv_pc_mask_row_counts;
typedef struct vkv_pc_matmul { uint32_t M, K, N, m_offset, ldy; } vkv_pc_matmul;
typedef struct vkv_pc_matvec { uint32_t M, K, m_offset, groups_x, group_threads; } vkv_pc_matvec;
typedef struct vkv_pc_matvec_cols { uint32_t M, K, m_offset, groups_x, n_cols, ldy, group_threads; } vkv_pc_matvec_cols;
typedef struct vkv_pc_press_expected { uint32_t n, n_sink, n_ctx, head_dim, n_head, n_kv_head, kv_head0;
                                       float epsilon; uint32_t vnorm; } vkv_pc_press_expected;
typedef struct vkv_pc_press_expected_logits { uint32_t n, n_sink, n_ctx, head_dim, n_head, n_kv_head, kv_head0;
                                              float inv_sqrt_d, inv_2d; } vkv_pc_press_expected_logits;
typedef struct vkv_pc_press_expected_lse { uint32_t n_z; } vkv_pc_press_expected_lse;
typedef struct vkv_pc_press_expected_prep { uint32_t n_head, head_dim, n_rot, neox, n_count, fut0, n_fut; } vkv_pc_press_expected_prep;
typedef struct vkv_pc_press_expected_stats { uint32_t n_head, head_dim, n_rot, neox, pos0, t_begin, t_end, c_row; } vkv_pc_press_expected_stats;
typedef struct vkv_pc_press_from_state { uint32_t n, mode, group, n_one; } vkv_pc_press_from_state;
typedef struct vkv_pc_press_keydiff { uint32_t n, n_ctx, head_dim, kv_head0, block, n_anchor; } vkv_pc_press_keydiff;
typedef struct vkv_pc_press_keydiff_anchor { uint32_t n, head_dim, chunk, n_chunk, block_mode; } vkv_pc_press_keydiff_anchor;
typedef struct vkv_pc_press_keydiff_sum { uint32_t n, n_ctx, head_dim, kv_head0, chunk, n_chunk; } vkv_pc_press_keydiff_sum;
typedef struct vkv_pc_press_knorm { uint32_t n, n_ctx, head_dim, kv_head0; } vkv_pc_press_knorm;
typedef struct vkv_pc_press_critical { uint32_t n, n_ctx, head_dim, n_embd, group, n_head; float epsilon; } vkv_pc_press_critical;
typedef struct vkv_pc_press_snapkv { uint32_t n, n_pre, kernel; float inv_div; } vkv_pc_press_snapkv;
typedef struct vkv_pc_press_span {
    uint32_t nq, n_ctx, head_dim, n_head, n_kv_head, kv_head0, q_row0, qpos0, a, b, c, r0;
    uint32_t t0, t1, split_len, n_split, acc_stride, max_mode;
    float scale;
} vkv_pc_press_span;
typedef struct vkv_pc_press_streamingllm { uint32_t n, n_sink; } vkv_pc_press_streamingllm;
typedef struct vkv_pc_press_random { uint32_t n, seed, layer, sample; } vkv_pc_press_random;
typedef struct vkv_pc_press_lagkv { uint32_t n, n_ctx, head_dim, kv_head0, n_sink, lag; } vkv_pc_press_lagkv;
typedef struct vkv_pc_press_chunkkv { uint32_t n, n_kv_head, chunk, n_chunk; } vkv_pc_press_chunkkv;
typedef struct vkv_pc_press_tova { uint32_t n, n_pre, n_kv_head; float inv_heads; } vkv_pc_press_tova;
typedef struct vkv_pc_press_window { uint32_t n, n_ctx, head_dim, n_head, n_kv_head, kv_head0, w, q_row0;
                                     float scale; uint32_t n_pre, split_len, n_split; } vkv_pc_press_window;
typedef struct vkv_pc_rms_norm { uint32_t rows, n; float eps; uint32_t has_weight, groups_x; } vkv_pc_rms_norm;
typedef struct vkv_pc_rope { uint32_t n_tok, n_heads, head_dim, n_rot, neox, inverse; } vkv_pc_rope;
typedef struct vkv_pc_silu_mul { uint32_t n; } vkv_pc_silu_mul;
typedef struct vkv_pc_softmax { uint32_t rows, cols; float scale; uint32_t causal; int32_t causal_offset;
                                uint32_t groups_x; } vkv_pc_softmax;
typedef struct vkv_pc_topk_select { uint32_t rows, n, k_uniform, use_k_buf, row0, groups_x; } vkv_pc_topk_select;
/* vector_pool_scores, vector_pool_extend and vector_assign_tiers: one element per invocation. */
typedef struct vkv_pc_vector_elementwise { uint32_t total; } vkv_pc_vector_elementwise;
typedef struct vkv_pc_vector_head_mean { uint32_t rows, n; } vkv_pc_vector_head_mean;
typedef struct vkv_pc_vector_materialize { uint32_t head_dim, n_kv_head, n_rot, neox, max_apx, groups_x, map_shifts; } vkv_pc_vector_materialize;
typedef struct vkv_pc_vector_residual { uint32_t n, n_ctx, head_dim, n_kv_head, n_rot, neox, groups_x, map_shifts, has_pos; } vkv_pc_vector_residual;

/* Every push-constant struct above: the types vkv_dispatch accepts. */
#define VKV_PUSH_CONSTANT_LIST(X) \
    X(vkv_pc_add) X(vkv_pc_argmax) X(vkv_pc_attn) X(vkv_pc_attn_decode_reduce) X(vkv_pc_attn_tiered) \
    X(vkv_pc_attn_paged) X(vkv_pc_attn_paged_reduce) X(vkv_pc_kv_store_paged) \
    X(vkv_pc_attn_tiered_reduce) X(vkv_pc_get_rows) X(vkv_pc_gram) X(vkv_pc_kv_convert) \
    X(vkv_pc_kv_compact) X(vkv_pc_kv_store) X(vkv_pc_mask_row_counts) X(vkv_pc_matmul) X(vkv_pc_matvec) X(vkv_pc_matvec_cols) \
    X(vkv_pc_press_expected) X(vkv_pc_press_expected_logits) X(vkv_pc_press_expected_lse) \
    X(vkv_pc_press_expected_prep) X(vkv_pc_press_expected_stats) X(vkv_pc_press_from_state) \
    X(vkv_pc_press_keydiff) X(vkv_pc_press_keydiff_anchor) X(vkv_pc_press_keydiff_sum) \
    X(vkv_pc_press_knorm) X(vkv_pc_press_critical) X(vkv_pc_press_snapkv) X(vkv_pc_press_span) X(vkv_pc_press_streamingllm) \
    X(vkv_pc_press_random) X(vkv_pc_press_lagkv) X(vkv_pc_press_chunkkv) \
    X(vkv_pc_press_tova) X(vkv_pc_press_window) X(vkv_pc_rms_norm) X(vkv_pc_rope) X(vkv_pc_silu_mul) \
    X(vkv_pc_softmax) X(vkv_pc_topk_select) X(vkv_pc_vector_elementwise) X(vkv_pc_vector_head_mean) \
    X(vkv_pc_vector_materialize) X(vkv_pc_vector_residual)

/* One id per push-constant struct: vkv_pc_add_id for vkv_pc_add, ... */
typedef enum vkv_pc_id {
#define VKV_PC_ID_ENUM(pc) pc##_id,
    VKV_PUSH_CONSTANT_LIST(VKV_PC_ID_ENUM)
#undef VKV_PC_ID_ENUM
    VKV_PC_ID_COUNT
} vkv_pc_id;

/* Workgroup size (specialization constant 0) by class; sizes in vk/tiles.h. */
typedef enum vkv_wg_class {
    VKV_WG_WIDE,      /* VKV_WG_WIDE_SIZE: the default */
    VKV_WG_ROW,       /* VKV_WG_ROW_SIZE: one row reduced per workgroup */
    VKV_WG_NARROW,    /* VKV_WG_NARROW_SIZE */
    VKV_WG_MATMUL,    /* VKV_MATMUL_WG: 8 x 8 threads, 8 x 8 outputs each */
    VKV_WG_MATMUL_CM, /* VKV_MATMUL_CM_WG: 4 subgroups of 32 */
    VKV_WG_MATVEC,    /* 4 subgroups, within [64, VKV_MATVEC_MAX_WG] */
} vkv_wg_class;

/* X(enum suffix, SPIR-V name, storage-buffer bindings, push-constant struct, workgroup class)
 * for one kernel per weight type of VKV_DTYPE_LIST, in its order: E##_F32 is
 * the first, and vkv_dtype_index() finds the rest. The SPIR-V names are
 * nm##_<type as VKV_DTYPE_LIST spells it in lower case>: get_rows_q4_K. */
#define VKV_WEIGHT_KERNELS(X, E, nm, nb, pc, wg) VKV_DTYPE_LIST_ARG(VKV_WEIGHT_KERNEL, (X, E, nm, nb, pc, wg))
/* The kernel's arguments travel as one parenthesised argument through
 * VKV_DTYPE_LIST_ARG and are unpacked here. */
#define VKV_WEIGHT_KERNEL(T, t, kernel) VKV_WEIGHT_KERNEL_UNPACKED(T, t, VKV_UNPARENTHESISE kernel)
#define VKV_WEIGHT_KERNEL_UNPACKED(...) VKV_WEIGHT_KERNEL_OF_TYPE(__VA_ARGS__)
#define VKV_WEIGHT_KERNEL_OF_TYPE(T, t, X, E, nm, nb, pc, wg) X(E##_##T, nm##_##t, nb, pc, wg)
#define VKV_UNPARENTHESISE(...) __VA_ARGS__

/* X(enum suffix, SPIR-V name, storage-buffer bindings, push-constant struct, workgroup class) */
#define VKV_KERNEL_LIST(X)                                                                             \
    VKV_WEIGHT_KERNELS(X, GET_ROWS, get_rows, 3, vkv_pc_get_rows, VKV_WG_WIDE)                         \
    X(RMS_NORM, rms_norm, 3, vkv_pc_rms_norm, VKV_WG_ROW)                                              \
    VKV_WEIGHT_KERNELS(X, MATVEC, matvec, 3, vkv_pc_matvec, VKV_WG_MATVEC)                             \
    VKV_WEIGHT_KERNELS(X, MATVEC_NOSG, matvec_nosg, 3, vkv_pc_matvec, VKV_WG_MATVEC)                   \
    VKV_WEIGHT_KERNELS(X, MATVEC_COLS, matvec_cols, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)              \
    VKV_WEIGHT_KERNELS(X, MATVEC_COLS_NOSG, matvec_cols_nosg, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)    \
    X(MATVEC_ALIGNED_F32, matvec_aligned_f32, 3, vkv_pc_matvec, VKV_WG_MATVEC)                         \
    X(MATVEC_ALIGNED_F16, matvec_aligned_f16, 3, vkv_pc_matvec, VKV_WG_MATVEC)                         \
    X(MATVEC_ALIGNED_BF16, matvec_aligned_bf16, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_COLS_ALIGNED_F32, matvec_cols_aligned_f32, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)          \
    X(MATVEC_COLS_ALIGNED_F16, matvec_cols_aligned_f16, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)          \
    X(MATVEC_COLS_ALIGNED_BF16, matvec_cols_aligned_bf16, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)        \
    X(MATVEC_ALIGNED_Q4_K, matvec_aligned_q4_K, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_COLS_ALIGNED_Q4_K, matvec_cols_aligned_q4_K, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)        \
    X(MATVEC_ALIGNED_Q5_K, matvec_aligned_q5_K, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_COLS_ALIGNED_Q5_K, matvec_cols_aligned_q5_K, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)        \
    X(MATVEC_ALIGNED_Q6_K, matvec_aligned_q6_K, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_ALIGNED_Q8_0, matvec_aligned_q8_0, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_COLS_ALIGNED_Q8_0, matvec_cols_aligned_q8_0, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)        \
    X(MATVEC_ALIGNED_Q4_0, matvec_aligned_q4_0, 3, vkv_pc_matvec, VKV_WG_MATVEC)                       \
    X(MATVEC_COLS_ALIGNED_Q4_0, matvec_cols_aligned_q4_0, 3, vkv_pc_matvec_cols, VKV_WG_MATVEC)        \
    VKV_WEIGHT_KERNELS(X, MATMUL, matmul, 3, vkv_pc_matmul, VKV_WG_MATMUL)                             \
    VKV_WEIGHT_KERNELS(X, MATMUL_CM, matmul_cm, 3, vkv_pc_matmul, VKV_WG_MATMUL_CM)                    \
    X(ROPE, rope, 4, vkv_pc_rope, VKV_WG_WIDE)                                                         \
    X(SOFTMAX, softmax, 2, vkv_pc_softmax, VKV_WG_ROW)                                                 \
    X(SILU_MUL, silu_mul, 3, vkv_pc_silu_mul, VKV_WG_WIDE)                                             \
    X(ADD, add, 3, vkv_pc_add, VKV_WG_WIDE)                                                            \
    X(ARGMAX, argmax, 2, vkv_pc_argmax, VKV_WG_ROW)                                                    \
    X(KV_STORE_F16, kv_store_f16, 3, vkv_pc_kv_store, VKV_WG_WIDE)                                     \
    X(KV_STORE_F32, kv_store_f32, 3, vkv_pc_kv_store, VKV_WG_WIDE)                                     \
    X(KV_STORE_Q, kv_store_q, 3, vkv_pc_kv_store, VKV_WG_WIDE)                                         \
    X(VECTOR_RESIDUAL_F16, vector_residual_f16, 6, vkv_pc_vector_residual, VKV_WG_NARROW)              \
    X(VECTOR_RESIDUAL_F32, vector_residual_f32, 6, vkv_pc_vector_residual, VKV_WG_NARROW)              \
    X(VECTOR_MATERIALIZE_F16, vector_materialize_f16, 6, vkv_pc_vector_materialize, VKV_WG_NARROW)     \
    X(VECTOR_MATERIALIZE_F32, vector_materialize_f32, 6, vkv_pc_vector_materialize, VKV_WG_NARROW)     \
    X(KV_COMPACT, kv_compact, 7, vkv_pc_kv_compact, VKV_WG_WIDE)                                       \
    X(KV_COMPACT_CONVERT, kv_compact_convert, 7, vkv_pc_kv_compact, VKV_WG_WIDE)                       \
    X(KV_CONVERT, kv_convert, 2, vkv_pc_kv_convert, VKV_WG_WIDE)                                       \
    X(ATTN_TIERED_FUSED_F16, attn_tiered_fused_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_FUSED_F32, attn_tiered_fused_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_MAT_F16, attn_tiered_mat_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                    \
    X(ATTN_TIERED_MAT_F32, attn_tiered_mat_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                    \
    X(ATTN_TIERED_SPLIT_FUSED_F16, attn_tiered_split_fused_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_SPLIT_FUSED_F32, attn_tiered_split_fused_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_SPLIT_MAT_F16, attn_tiered_split_mat_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)        \
    X(ATTN_TIERED_SPLIT_MAT_F32, attn_tiered_split_mat_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)        \
    X(ATTN_TIERED_NOAPX_F16, attn_tiered_noapx_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_NOAPX_F32, attn_tiered_noapx_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_SPLIT_NOAPX_F16, attn_tiered_split_noapx_f16, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_SPLIT_NOAPX_F32, attn_tiered_split_noapx_f32, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_FUSED_ANY, attn_tiered_fused_any, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_SPLIT_FUSED_ANY, attn_tiered_split_fused_any, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_NOAPX_ANY, attn_tiered_noapx_any, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)                \
    X(ATTN_TIERED_SPLIT_NOAPX_ANY, attn_tiered_split_noapx_any, 8, vkv_pc_attn_tiered, VKV_WG_WIDE)    \
    X(ATTN_TIERED_REDUCE, attn_tiered_reduce, 4, vkv_pc_attn_tiered_reduce, VKV_WG_NARROW)             \
    X(VECTOR_POOL_SCORES, vector_pool_scores, 3, vkv_pc_vector_elementwise, VKV_WG_WIDE)               \
    X(VECTOR_POOL_EXTEND, vector_pool_extend, 3, vkv_pc_vector_elementwise, VKV_WG_WIDE)               \
    X(VECTOR_ASSIGN_TIERS, vector_assign_tiers, 3, vkv_pc_vector_elementwise, VKV_WG_WIDE)             \
    X(VECTOR_HEAD_MEAN, vector_head_mean, 2, vkv_pc_vector_head_mean, VKV_WG_WIDE)                     \
    X(ATTN_PREFILL_F32, attn_prefill_f32, 4, vkv_pc_attn, VKV_WG_WIDE)                                 \
    X(ATTN_PREFILL_F16, attn_prefill_f16, 4, vkv_pc_attn, VKV_WG_WIDE)                                 \
    X(ATTN_DECODE_F32, attn_decode_f32, 4, vkv_pc_attn, VKV_WG_NARROW)                                 \
    X(ATTN_DECODE_F16, attn_decode_f16, 4, vkv_pc_attn, VKV_WG_NARROW)                                 \
    X(ATTN_PREFILL_ANY, attn_prefill_any, 4, vkv_pc_attn, VKV_WG_WIDE)                                 \
    X(ATTN_DECODE_ANY, attn_decode_any, 4, vkv_pc_attn, VKV_WG_NARROW)                                 \
    X(ATTN_ROWS_F32, attn_rows_f32, 4, vkv_pc_attn, VKV_WG_NARROW)                                     \
    X(ATTN_ROWS_F16, attn_rows_f16, 4, vkv_pc_attn, VKV_WG_NARROW)                                     \
    X(ATTN_ROWS_ANY, attn_rows_any, 4, vkv_pc_attn, VKV_WG_NARROW)                                     \
    X(ATTN_DECODE_REDUCE, attn_decode_reduce, 2, vkv_pc_attn_decode_reduce, VKV_WG_WIDE)               \
    X(ATTN_PAGED_F16, attn_paged_f16, 6, vkv_pc_attn_paged, VKV_WG_NARROW)                             \
    X(ATTN_PAGED_F32, attn_paged_f32, 6, vkv_pc_attn_paged, VKV_WG_NARROW)                             \
    X(ATTN_PAGED_ANY, attn_paged_any, 6, vkv_pc_attn_paged, VKV_WG_NARROW)                             \
    X(ATTN_PAGED_REDUCE, attn_paged_reduce, 3, vkv_pc_attn_paged_reduce, VKV_WG_WIDE)                  \
    X(KV_STORE_PAGED, kv_store_paged, 5, vkv_pc_kv_store_paged, VKV_WG_NARROW)                         \
    X(GRAM, gram, 3, vkv_pc_gram, VKV_WG_WIDE)                                                         \
    X(TOPK_SELECT, topk_select, 3, vkv_pc_topk_select, VKV_WG_WIDE)                                    \
    X(PRESS_KNORM_F32, press_knorm_f32, 2, vkv_pc_press_knorm, VKV_WG_WIDE)                            \
    X(PRESS_KNORM_F16, press_knorm_f16, 2, vkv_pc_press_knorm, VKV_WG_WIDE)                            \
    X(PRESS_CRITICAL_F32, press_critical_f32, 5, vkv_pc_press_critical, VKV_WG_WIDE)                    \
    X(PRESS_CRITICAL_F16, press_critical_f16, 5, vkv_pc_press_critical, VKV_WG_WIDE)                    \
    X(PRESS_FIRST_STAGE_COUNTS, press_first_stage_counts, 2, vkv_pc_vector_elementwise, VKV_WG_WIDE)    \
    X(PRESS_STREAMINGLLM, press_streamingllm, 1, vkv_pc_press_streamingllm, VKV_WG_WIDE)               \
    X(PRESS_RANDOM, press_random, 1, vkv_pc_press_random, VKV_WG_WIDE)                                 \
    X(PRESS_LAGKV_F32, press_lagkv_f32, 3, vkv_pc_press_lagkv, VKV_WG_ROW)                             \
    X(PRESS_LAGKV_F16, press_lagkv_f16, 3, vkv_pc_press_lagkv, VKV_WG_ROW)                             \
    X(PRESS_CHUNKKV, press_chunkkv, 1, vkv_pc_press_chunkkv, VKV_WG_WIDE)                              \
    X(PRESS_KEYDIFF_SUM_F32, press_keydiff_sum_f32, 2, vkv_pc_press_keydiff_sum, VKV_WG_WIDE)          \
    X(PRESS_KEYDIFF_SUM_F16, press_keydiff_sum_f16, 2, vkv_pc_press_keydiff_sum, VKV_WG_WIDE)          \
    X(PRESS_KEYDIFF_ANCHOR, press_keydiff_anchor, 2, vkv_pc_press_keydiff_anchor, VKV_WG_WIDE)         \
    X(PRESS_KEYDIFF_F32, press_keydiff_f32, 3, vkv_pc_press_keydiff, VKV_WG_WIDE)                      \
    X(PRESS_KEYDIFF_F16, press_keydiff_f16, 3, vkv_pc_press_keydiff, VKV_WG_WIDE)                      \
    X(PRESS_WINDOW_LSE_F32, press_window_lse_f32, 3, vkv_pc_press_window, VKV_WG_WIDE)                 \
    X(PRESS_WINDOW_LSE_F16, press_window_lse_f16, 3, vkv_pc_press_window, VKV_WG_WIDE)                 \
    X(PRESS_WINDOW_ATTN_F32, press_window_attn_f32, 4, vkv_pc_press_window, VKV_WG_WIDE)               \
    X(PRESS_WINDOW_ATTN_F16, press_window_attn_f16, 4, vkv_pc_press_window, VKV_WG_WIDE)               \
    X(PRESS_SNAPKV, press_snapkv, 2, vkv_pc_press_snapkv, VKV_WG_WIDE)                                 \
    X(PRESS_TOVA, press_tova, 2, vkv_pc_press_tova, VKV_WG_WIDE)                                       \
    X(PRESS_SPAN_LSE_F32, press_span_lse_f32, 3, vkv_pc_press_span, VKV_WG_WIDE)                       \
    X(PRESS_SPAN_LSE_F16, press_span_lse_f16, 3, vkv_pc_press_span, VKV_WG_WIDE)                       \
    X(PRESS_SPAN_ACCUM_F32, press_span_accum_f32, 4, vkv_pc_press_span, VKV_WG_WIDE)                   \
    X(PRESS_SPAN_ACCUM_F16, press_span_accum_f16, 4, vkv_pc_press_span, VKV_WG_WIDE)                   \
    X(PRESS_FROM_STATE, press_from_state, 2, vkv_pc_press_from_state, VKV_WG_WIDE)                     \
    X(PRESS_EXPECTED_STATS, press_expected_stats, 3, vkv_pc_press_expected_stats, VKV_WG_WIDE)         \
    X(PRESS_EXPECTED_PREP, press_expected_prep, 3, vkv_pc_press_expected_prep, VKV_WG_WIDE)            \
    X(PRESS_EXPECTED_LOGITS_F32, press_expected_logits_f32, 3, vkv_pc_press_expected_logits, VKV_WG_WIDE) \
    X(PRESS_EXPECTED_LOGITS_F16, press_expected_logits_f16, 3, vkv_pc_press_expected_logits, VKV_WG_WIDE) \
    X(PRESS_EXPECTED_LSE, press_expected_lse, 2, vkv_pc_press_expected_lse, VKV_WG_WIDE)               \
    X(PRESS_EXPECTED_F32, press_expected_f32, 4, vkv_pc_press_expected, VKV_WG_WIDE)                   \
    X(PRESS_EXPECTED_F16, press_expected_f16, 4, vkv_pc_press_expected, VKV_WG_WIDE)                   \
    X(MASK_ROW_COUNTS, mask_row_counts, 2, vkv_pc_mask_row_counts, VKV_WG_WIDE)

/* Bindings that are arrays of buffers: X(enum suffix, binding, buffers). A
 * dispatch passes one vkv_binding per buffer, an array's in order; every
 * other binding holds one buffer. */
#define VKV_KERNEL_ARRAY_BINDINGS(X) /* none today: the paged kernels bind one pool buffer */
/* Bindings and buffers a kernel has at most (src/vk/cmd.c records them on the stack). */
#define VKV_MAX_BINDINGS 8
#define VKV_MAX_DESCRIPTORS 32

typedef enum vkv_kernel {
#define VKV_KERNEL_ENUM(e, name, nb, pc, wg) VKV_K_##e,
    VKV_KERNEL_LIST(VKV_KERNEL_ENUM)
#undef VKV_KERNEL_ENUM
    VKV_KERNEL_COUNT
} vkv_kernel;

const char *vkv_kernel_name(vkv_kernel k);
uint32_t vkv_kernel_n_bindings(vkv_kernel k);
/* Buffers of binding b of k (1 unless VKV_KERNEL_ARRAY_BINDINGS says more),
 * and of all its bindings: the vkv_binding count a dispatch of k passes. */
uint32_t vkv_kernel_binding_buffers(vkv_kernel k, uint32_t b);
uint32_t vkv_kernel_n_buffers(vkv_kernel k);
/* The kernel's push-constant struct (what each dispatch pushes) and its size. */
vkv_pc_id vkv_kernel_push_struct(vkv_kernel k);
uint32_t vkv_kernel_push_bytes(vkv_kernel k);
/* The struct's C name, "vkv_pc_add", for error messages. */
const char *vkv_pc_name(vkv_pc_id id);

/* Embedded SPIR-V (generated at build time by shaders/embed_spirv.py), one
 * module per kernel. */
typedef struct vkv_spirv {
    const char *name;
    vkv_kernel kernel;
    const uint32_t *code;
    uint32_t size_bytes;
} vkv_spirv;
const vkv_spirv *vkv_spirv_of(vkv_kernel k);

#endif
