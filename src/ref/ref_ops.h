/* Scalar CPU reference of every shader op: the oracle of the conformance
 * suite. Written for clarity, accumulating in double; never for speed.
 *
 * Shape notation: [rows, cols] is row-major with cols contiguous. */
#ifndef VKV_REF_OPS_H
#define VKV_REF_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"

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

typedef enum vkv_rope_mode {
    VKV_ROPE_INTERLEAVED = 0, /* llama: rotate pairs (x[2i], x[2i+1]) */
    VKV_ROPE_NEOX = 2,        /* qwen2/qwen3: rotate pairs (x[i], x[i + n_rot/2]) */
} vkv_rope_mode;

typedef struct vkv_rope_params {
    vkv_rope_mode mode;
    uint32_t head_dim;        /* elements per head */
    uint32_t n_rot;           /* leading dims rotated (even, <= head_dim); the rest pass through */
    float freq_base;          /* theta base, e.g. 10000 or 500000 */
    float freq_scale;         /* linear position scaling (1 = none) */
    const float *freq_factors;/* [n_rot/2] divisors of each pair's frequency (Llama 3.1), or NULL */
    bool inverse;             /* rotate by -theta: recovers pre-RoPE vectors */
} vkv_rope_params;

/* Angle of pair i at position pos: pos * freq_scale * base^(-2i/n_rot) / factor[i]. */
double vkv_rope_theta(const vkv_rope_params *p, int32_t pos, uint32_t pair);

/* out[n_tok, n_heads, head_dim] = RoPE(x) with x of the same shape,
 * token t at position pos[t]. out may equal x. */
void vkv_ref_rope(const vkv_rope_params *p, const float *x, uint32_t n_tok, uint32_t n_heads,
                  const int32_t *pos, float *out);

/* Llama-3 rope scaling ("rope_type llama3"): fills factors[n_rot/2]. */
void vkv_rope_llama3_factors(uint32_t n_rot, float freq_base, float factor, float low_freq_factor,
                             float high_freq_factor, uint32_t original_ctx, float *factors);

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
