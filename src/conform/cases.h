/* The conformance cases: one function per op family, called once per shape
 * by the suite's table (conform/suite.c). Each makes random inputs, records
 * the op, runs its CPU reference and adds one result (or more) to the run. */
#ifndef VKV_CONFORM_CASES_H
#define VKV_CONFORM_CASES_H

#include "calib/calib.h"
#include "conform/harness.h"

/* topk_select's scores: uniform, with ties, or with infinities and NaN (see case_topk). */
typedef enum { TOPK_RANDOM, TOPK_TIES, TOPK_SPECIAL } topk_data;

vkv_status case_get_rows(conform_ctx *c, vkv_dtype t, uint64_t n_rows, uint32_t n_cols, uint32_t n_ids);
vkv_status case_rms_norm(conform_ctx *c, uint32_t rows, uint32_t n, bool weight, const char *what);
vkv_status case_matmul(conform_ctx *c, vkv_matmul_path path, vkv_dtype t, uint32_t m, uint32_t k, uint32_t n);
vkv_status case_rope(conform_ctx *c, vkv_rope_mode mode, bool inverse, uint32_t head_dim, uint32_t n_rot,
                     float base, bool llama3, uint32_t n_tok, uint32_t n_heads, int32_t max_pos);
vkv_status case_softmax(conform_ctx *c, uint32_t rows, uint32_t cols, float scale, bool causal, int32_t off);
vkv_status case_elementwise(conform_ctx *c, bool silu, uint32_t n);
vkv_status case_argmax(conform_ctx *c, uint32_t rows, uint32_t n, bool ties);
vkv_status case_add_bias(conform_ctx *c, uint32_t rows, uint32_t width);
vkv_status case_kv_convert(conform_ctx *c, vkv_dtype src, vkv_dtype dst, uint32_t hd, uint32_t n_rows,
                           uint32_t src_row0, uint32_t dst_row0);
vkv_status case_kv_store(conform_ctx *c, vkv_dtype t, uint32_t n_tok, uint32_t n_kv, uint32_t hd, uint32_t n_ctx,
                         uint32_t slot0);
vkv_status case_attention(conform_ctx *c, vkv_attn_path path, vkv_dtype kt, vkv_dtype vt, uint32_t n_head, uint32_t n_kv_head,
                          uint32_t hd, uint32_t n_q, uint32_t pos0, uint32_t n_kv, uint32_t n_ctx_max,
                          float q_amp);
/* A paged decode step of n_seq (<= 8) sequences: kv_store_paged then
 * attn_paged over pages of 2^page_shift slots (>= 16), out of order. */
vkv_status case_attention_paged(conform_ctx *c, vkv_dtype kt, vkv_dtype vt, uint32_t n_head, uint32_t n_kv_head,
                                uint32_t hd, uint32_t page_shift, uint32_t n_seq);
/* with_pos: the residual reads each slot's position from a table (a tiered
 * layer gathered back into the plain layout for decode-time compression).
 * joint: the maps are one joint map per layer (S = n_kv blocks, kvlayout/kv_layout.h);
 * for case_tiered every head then holds the same tiers. */
vkv_status case_vector_residual(conform_ctx *c, vkv_dtype t, uint32_t n_kv, uint32_t hd, uint32_t n_rot, bool neox,
                                uint32_t n_ctx, uint32_t n, bool joint, bool with_pos);
/* case_tiered: t the plain cache's rows, tk / tv the tiers' (quantized tiers
 * from an f16 cache; no materialised stages then). */
vkv_status case_tiered(conform_ctx *c, vkv_dtype t, vkv_dtype tk, vkv_dtype tv, uint32_t n_head, uint32_t n_kv,
                       uint32_t hd, uint32_t n_rot, bool neox, uint32_t n, uint32_t n_ret, uint32_t n_apx, uint32_t n_new0, uint32_t n_q, bool joint);
vkv_status case_vector_head_mean(conform_ctx *c, uint32_t rows, uint32_t n);
vkv_status case_topk(conform_ctx *c, uint32_t rows, uint32_t n, uint32_t k, bool per_row, topk_data data);
vkv_status case_press(conform_ctx *c, const char *press, vkv_dtype kv, uint32_t n_head, uint32_t n_kv_head,
                      uint32_t hd, uint32_t n, uint32_t n_ctx, uint32_t block);
vkv_status case_gram(conform_ctx *c, vkv_gram_params p, const char *what);
/* VECTOR's elementwise selection steps (ops_vector.h). */
typedef enum { TRUNC_POOL_SCORES, TRUNC_ASSIGN_TIERS, TRUNC_POOL_EXTEND } trunc_kind;
vkv_status case_vector_truncation(conform_ctx *c, trunc_kind kind, uint32_t total);
vkv_status case_mask_row_counts(conform_ctx *c, uint32_t rows, uint32_t n);

#endif
