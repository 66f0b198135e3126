/* Scalar CPU reference of every shader op: the oracle of the conformance
 * suite. Written for clarity, accumulating in double; never for speed.
 *
 * Shape notation: [rows, cols] is row-major with cols contiguous. */
#ifndef VKV_REF_OPS_H
#define VKV_REF_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/rope.h"

/* out[n_ids, n_cols] = table[ids[i], :] decoded to f32.
 * table: [n_table_rows, n_cols] of type t. Ids must be < n_table_rows. */
void vkv_ref_get_rows(vkv_dtype t, const void *table, uint64_t n_cols,
                      const int32_t *ids, uint32_t n_ids, float *out);

/* out[rows, n] = x / sqrt(mean(x^2) + eps) * w   (w: [n], or NULL for none).
 * Per-head QK-norm is the same op with rows = tokens*heads and n = head_dim. */
void vkv_ref_rms_norm(const float *x, const float *w, uint32_t rows, uint32_t n, float eps,
                      float *out);

/* y[N, M] = x[N, K] · W[M, K]^T, W of type t (each of the M rows holds K
 * elements). Matrix-vector is N = 1. */
void vkv_ref_matmul(vkv_dtype t, const void *w, uint32_t m, uint32_t k,
                    const float *x, uint32_t n, float *y);

/* out[n_tok, n_heads, head_dim] = RoPE(x) with x of the same shape,
 * token t at position pos[t]. out may equal x. */
void vkv_ref_rope(const vkv_rope_params *p, const float *x, uint32_t n_tok, uint32_t n_heads,
                  const int32_t *pos, float *out);

/* out[rows, cols] = softmax(scale * x) per row. With causal, row r may only
 * see columns j <= r + causal_offset (others get probability 0); a row that
 * sees nothing is all zeros. */
void vkv_ref_softmax(const float *x, uint32_t rows, uint32_t cols, float scale, bool causal,
                     int32_t causal_offset, float *out);

/* out[n] = silu(gate[n]) * up[n], silu(g) = g / (1 + exp(-g)). */
void vkv_ref_silu_mul(const float *gate, const float *up, uint32_t n, float *out);

/* out[n] = a[n] + b[n]. */
void vkv_ref_add(const float *a, const float *b, uint32_t n, float *out);

/* out[rows, width] = a[rows, width] + bias[width]. */
void vkv_ref_add_bias(const float *a, const float *bias, uint32_t rows, uint32_t width, float *out);


/* out[rows] = index of the max of each row of x[rows, n]; ties -> lowest index. */
void vkv_ref_argmax(const float *x, uint32_t rows, uint32_t n, uint32_t *out);

#endif
