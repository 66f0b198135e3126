/* RoPE's parameters and the host-side math on them (the angle, Llama 3's
 * frequency factors). They sit in core/ because every layer that rotates
 * needs them: the model loader fills them, the GPU op (vk/ops.h) and the CPU
 * reference (ref/ref_ops.h) take them, and vk/ must not depend on ref/ nor on
 * model/, which sits above it. */
#ifndef VKV_CORE_ROPE_H
#define VKV_CORE_ROPE_H

#include <stdbool.h>
#include <stdint.h>

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

/* Llama-3 rope scaling ("rope_type llama3"): fills factors[n_rot/2]. */
void vkv_rope_llama3_factors(uint32_t n_rot, float freq_base, float factor, float low_freq_factor,
                             float high_freq_factor, uint32_t original_ctx, float *factors);

#endif
