/* The registry of compute kernels: one entry per compiled shader variant.
 * Names match the SPIR-V blobs embedded by shaders/meson.build. */
#ifndef VKV_KERNELS_H
#define VKV_KERNELS_H

#include <stdint.h>

/* X(enum suffix, spirv name, number of storage-buffer bindings) */
/* One kernel per weight type, in the order of VKV_DTYPE_LIST
 * (src/core/dtype.h): E##_F32 is the first, and vkv_dtype_index() finds the
 * rest. */
#define VKV_WEIGHT_KERNELS(X, E, nm, nb)                                                                  \
    X(E##_F32, nm "_f32", nb) X(E##_F16, nm "_f16", nb) X(E##_BF16, nm "_bf16", nb)                     \
    X(E##_Q8_0, nm "_q8_0", nb) X(E##_Q4_0, nm "_q4_0", nb) X(E##_Q4_1, nm "_q4_1", nb)                 \
    X(E##_Q5_0, nm "_q5_0", nb) X(E##_Q5_1, nm "_q5_1", nb) X(E##_Q2_K, nm "_q2_K", nb)                 \
    X(E##_Q3_K, nm "_q3_K", nb) X(E##_Q4_K, nm "_q4_K", nb) X(E##_Q5_K, nm "_q5_K", nb)                 \
    X(E##_Q6_K, nm "_q6_K", nb) X(E##_IQ4_NL, nm "_iq4_nl", nb) X(E##_IQ4_XS, nm "_iq4_xs", nb)

/* X(enum suffix, spirv name, number of storage-buffer bindings) */
#define VKV_KERNEL_LIST(X)                                   \
    VKV_WEIGHT_KERNELS(X, GET_ROWS, "get_rows", 3)           \
    X(RMS_NORM, "rms_norm", 3)                               \
    VKV_WEIGHT_KERNELS(X, MATVEC, "matvec", 3)               \
    VKV_WEIGHT_KERNELS(X, MATVEC_NOSG, "matvec_nosg", 3)     \
    VKV_WEIGHT_KERNELS(X, MATMUL, "matmul", 3)               \
    VKV_WEIGHT_KERNELS(X, MATMUL_CM, "matmul_cm", 3)         \
    X(ROPE, "rope", 4)                                       \
    X(SOFTMAX, "softmax", 2)                                 \
    X(SILU_MUL, "silu_mul", 3)                               \
    X(ADD, "add", 3)                                         \
    X(ARGMAX, "argmax", 2)                                   \
    X(KV_STORE_F16, "kv_store_f16", 3)                       \
    X(KV_STORE_F32, "kv_store_f32", 3)                       \
    X(VECTOR_RESIDUAL_F16, "vector_residual_f16", 5)         \
    X(VECTOR_RESIDUAL_F32, "vector_residual_f32", 5)         \
    X(VECTOR_MATERIALIZE_F16, "vector_materialize_f16", 6)   \
    X(VECTOR_MATERIALIZE_F32, "vector_materialize_f32", 6)   \
    X(KV_COMPACT, "kv_compact", 7)                           \
    X(ATTN_TIERED_FUSED_F16, "attn_tiered_fused_f16", 8)     \
    X(ATTN_TIERED_FUSED_F32, "attn_tiered_fused_f32", 8)     \
    X(ATTN_TIERED_MAT_F16, "attn_tiered_mat_f16", 8)         \
    X(ATTN_TIERED_MAT_F32, "attn_tiered_mat_f32", 8)         \
    X(ATTN_TIERED_SPLIT_FUSED_F16, "attn_tiered_split_fused_f16", 8) \
    X(ATTN_TIERED_SPLIT_FUSED_F32, "attn_tiered_split_fused_f32", 8) \
    X(ATTN_TIERED_SPLIT_MAT_F16, "attn_tiered_split_mat_f16", 8) \
    X(ATTN_TIERED_SPLIT_MAT_F32, "attn_tiered_split_mat_f32", 8) \
    X(ATTN_TIERED_NOAPX_F16, "attn_tiered_noapx_f16", 8)     \
    X(ATTN_TIERED_NOAPX_F32, "attn_tiered_noapx_f32", 8)     \
    X(ATTN_TIERED_SPLIT_NOAPX_F16, "attn_tiered_split_noapx_f16", 8) \
    X(ATTN_TIERED_SPLIT_NOAPX_F32, "attn_tiered_split_noapx_f32", 8) \
    X(ATTN_TIERED_REDUCE, "attn_tiered_reduce", 4)           \
    X(VECTOR_POOL_SCORES, "vector_pool_scores", 3)           \
    X(VECTOR_ASSIGN_TIERS, "vector_assign_tiers", 3)                       \
    X(ATTN_PREFILL_F32, "attn_prefill_f32", 4)               \
    X(ATTN_PREFILL_F16, "attn_prefill_f16", 4)               \
    X(ATTN_DECODE_F32, "attn_decode_f32", 4)                 \
    X(ATTN_DECODE_F16, "attn_decode_f16", 4)                 \
    X(ATTN_DECODE_REDUCE, "attn_decode_reduce", 2)           \
    X(GRAM, "gram", 3)                                       \
    X(TOPK_SELECT, "topk_select", 3)                         \
    X(PRESS_KNORM_F32, "press_knorm_f32", 2)                 \
    X(PRESS_KNORM_F16, "press_knorm_f16", 2)                 \
    X(PRESS_STREAMINGLLM, "press_streamingllm", 1)           \
    X(PRESS_KEYDIFF_SUM_F32, "press_keydiff_sum_f32", 2)     \
    X(PRESS_KEYDIFF_SUM_F16, "press_keydiff_sum_f16", 2)     \
    X(PRESS_KEYDIFF_ANCHOR, "press_keydiff_anchor", 2)       \
    X(PRESS_KEYDIFF_F32, "press_keydiff_f32", 3)             \
    X(PRESS_KEYDIFF_F16, "press_keydiff_f16", 3)             \
    X(PRESS_WINDOW_LSE_F32, "press_window_lse_f32", 3)       \
    X(PRESS_WINDOW_LSE_F16, "press_window_lse_f16", 3)       \
    X(PRESS_WINDOW_ATTN_F32, "press_window_attn_f32", 4)     \
    X(PRESS_WINDOW_ATTN_F16, "press_window_attn_f16", 4)     \
    X(PRESS_SNAPKV, "press_snapkv", 2)                       \
    X(PRESS_TOVA, "press_tova", 2)                           \
    X(PRESS_SPAN_LSE_F32, "press_span_lse_f32", 3)           \
    X(PRESS_SPAN_LSE_F16, "press_span_lse_f16", 3)           \
    X(PRESS_SPAN_ACCUM_F32, "press_span_accum_f32", 4)       \
    X(PRESS_SPAN_ACCUM_F16, "press_span_accum_f16", 4)       \
    X(PRESS_FROM_STATE, "press_from_state", 2)               \
    X(PRESS_EXPECTED_STATS, "press_expected_stats", 3)       \
    X(PRESS_EXPECTED_PREP, "press_expected_prep", 3)         \
    X(PRESS_EXPECTED_LOGITS_F32, "press_expected_logits_f32", 3) \
    X(PRESS_EXPECTED_LOGITS_F16, "press_expected_logits_f16", 3) \
    X(PRESS_EXPECTED_LSE, "press_expected_lse", 2)           \
    X(PRESS_EXPECTED_F32, "press_expected_f32", 4)           \
    X(PRESS_EXPECTED_F16, "press_expected_f16", 4)           \
    X(PRESS_GLOBAL_ROWS, "press_global_rows", 3)

typedef enum vkv_kernel {
#define VKV_KERNEL_ENUM(e, name, nb) VKV_K_##e,
    VKV_KERNEL_LIST(VKV_KERNEL_ENUM)
#undef VKV_KERNEL_ENUM
    VKV_KERNEL_COUNT
} vkv_kernel;

const char *vkv_kernel_name(vkv_kernel k);
uint32_t vkv_kernel_n_bindings(vkv_kernel k);

/* Embedded SPIR-V (generated at build time by shaders/embed_spirv.py). */
typedef struct vkv_spirv {
    const char *name;
    const uint32_t *code;
    uint32_t size_bytes;
} vkv_spirv;
const vkv_spirv *vkv_spirv_find(const char *name);

#endif
