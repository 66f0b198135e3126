/* GPU ops: record one op (one or more dispatches) into the open recording.
 * Each mirrors a CPU reference in src/ref/ref_ops.h with the same semantics
 * and shapes. Tensors are given as views (buffer + byte offset, the offset a
 * multiple of the device's storage offset alignment); ops split work so no
 * bound range exceeds the device's maxStorageBufferRange. */
#ifndef VKV_OPS_H
#define VKV_OPS_H

#include "core/dtype.h"
#include "core/rope.h"
#include "vk/gpu.h"

typedef struct vkv_view {
    const vkv_buffer *buf;
    uint64_t offset;
} vkv_view;

static inline vkv_view vkv_view_of(const vkv_buffer *b) { return (vkv_view){b, 0}; }

/* out[n_ids, n_cols] f32 = rows of table[n_table_rows, n_cols] (type t). */
vkv_status vkv_op_get_rows(vkv_gpu *gpu, vkv_dtype t, vkv_view table, uint64_t n_table_rows, uint32_t n_cols,
                           vkv_view ids, uint32_t n_ids, vkv_view out);

/* out[rows, n] = rms_norm(x[rows, n]) * w[n]; w.buf may be NULL (no weight). */
vkv_status vkv_op_rms_norm(vkv_gpu *gpu, vkv_view x, vkv_view w, uint32_t rows, uint32_t n, float eps,
                           vkv_view out);

typedef enum vkv_matmul_path {
    VKV_MATMUL_AUTO,      /* matvec for n == 1, the multi-column matvec for n <= VKV_BATCH_MAX
                           * (vkv_matmul_auto_is_matvec), else coopmat when available, else tiled */
    VKV_MATMUL_MATVEC,    /* one matvec per activation row */
    VKV_MATMUL_TILED,
    VKV_MATMUL_COOPMAT,
    VKV_MATMUL_MATVEC_COLS, /* n <= VKV_BATCH_MAX rows in one matvec that reads W once; row j is bitwise
                             * MATVEC's row j (the batched decode's path; AUTO's for 2..VKV_BATCH_MAX rows) */
} vkv_matmul_path;

/* y[n, m] = x[n, k] . w[m, k]^T with w of type t. */
vkv_status vkv_op_matmul(vkv_gpu *gpu, vkv_matmul_path path, vkv_dtype t, vkv_view w, uint32_t m, uint32_t k,
                         vkv_view x, uint32_t n, vkv_view y);
/* Whether a path can run on this device for type t. */
bool vkv_matmul_path_supported(const vkv_gpu *gpu, vkv_matmul_path path, vkv_dtype t);
/* Whether AUTO sends n rows to a matrix-vector kernel (MATVEC or
 * MATVEC_COLS, whose rows are each MATVEC's bits) rather than to a tiled
 * product: n <= VKV_BATCH_MAX. */
bool vkv_matmul_auto_is_matvec(uint32_t n);

/* out = RoPE(x) for x[n_tok, n_heads, head_dim]; pos[n_tok] int32 on the GPU;
 * inv_freq[n_rot/2] from vkv_rope_inv_freq(). */
vkv_status vkv_op_rope(vkv_gpu *gpu, const vkv_rope_params *p, vkv_view x, uint32_t n_tok, uint32_t n_heads,
                       vkv_view pos, vkv_view inv_freq, vkv_view out);
/* Per-pair angular frequency including freq_scale and freq_factors (double
 * precision on the host): inv_freq[i] = freq_scale * base^(-2i/n_rot) / factor[i]. */
void vkv_rope_inv_freq(const vkv_rope_params *p, float *inv_freq);

vkv_status vkv_op_softmax(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t cols, float scale, bool causal,
                          int32_t causal_offset, vkv_view out);
vkv_status vkv_op_silu_mul(vkv_gpu *gpu, vkv_view gate, vkv_view up, uint32_t n, vkv_view out);
vkv_status vkv_op_add(vkv_gpu *gpu, vkv_view a, vkv_view b, uint32_t n, vkv_view out);
/* out[rows, width] = a[rows, width] + bias[width] (bias broadcast over rows). */
vkv_status vkv_op_add_bias(vkv_gpu *gpu, vkv_view a, vkv_view bias, uint32_t rows, uint32_t width, vkv_view out);

/* cache[h, slot0 + t, :] = src[t, h, :] for a cache [n_kv_head, n_ctx] rows
 * of head_dim (a multiple of 4) elements of type (f16, f32, q8_0, q4_0; the
 * row format of kvlayout/kv_layout.h, reference vkv_kv_encode_row). */
vkv_status vkv_op_kv_store(vkv_gpu *gpu, vkv_dtype type, vkv_view src, uint32_t n_tok, uint32_t n_kv_head,
                           uint32_t head_dim, vkv_view cache, uint32_t n_ctx, uint32_t slot0);
/* The same into a tiered (compressed) layer: head h's token t goes to the
 * slot after its compressed tokens plus slot0 + t (meta: [n_kv_head, 8]
 * uint32 tier metadata; values selects the V layout). cache_rows: rows the
 * cache buffer holds (for the bounds check). */
vkv_status vkv_op_kv_store_tiered(vkv_gpu *gpu, vkv_dtype type, bool values, vkv_view src, uint32_t n_tok,
                                  uint32_t n_kv_head, uint32_t head_dim, vkv_view cache, uint64_t cache_rows,
                                  vkv_view meta, uint32_t slot0);
/* dst rows [dst_row0, + n_rows) of dst_type = src rows [src_row0, + n_rows) of
 * src_type, decoded and re-encoded (kvlayout/kv_layout.h's row formats; reference
 * vkv_ref_kv_convert_rows); head_dim a multiple of 4. */
vkv_status vkv_op_kv_convert_rows(vkv_gpu *gpu, vkv_view src, vkv_dtype src_type, uint64_t src_row0, vkv_view dst,
                                  vkv_dtype dst_type, uint64_t dst_row0, uint32_t n_rows, uint32_t head_dim);
/* out[rows] uint32 = argmax of each row of x[rows, n]. */
vkv_status vkv_op_argmax(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t n, vkv_view out);

#endif
