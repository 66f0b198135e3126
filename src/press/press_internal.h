/* Helpers shared by the scorers of src/press/: parameter defaults, checks of
 * a layer's shapes and views, binding a layer's K cache within the storage
 * range, carving the scratch, and the window attention that SnapKV, PyramidKV
 * and TOVA share (press/window_attn.c). */
#ifndef VKV_PRESS_INTERNAL_H
#define VKV_PRESS_INTERNAL_H

#include "press/press.h"
#include "vk/dispatch.h"

#define VKV_PRESS_MAX_HEAD_DIM 256
/* KV heads of a layer a host reference keeps per-head counts of on the stack (CriticalAdaKV). */
#define VKV_PRESS_MAX_KV_HEADS 1024
/* Scratch sub-buffers start at multiples of this: the largest
 * minStorageBufferOffsetAlignment Vulkan allows. */
#define VKV_PRESS_SCRATCH_ALIGN 256u

static inline uint64_t vkv_press_align_up(uint64_t x)
{
    return (x + VKV_PRESS_SCRATCH_ALIGN - 1) / VKV_PRESS_SCRATCH_ALIGN * VKV_PRESS_SCRATCH_ALIGN;
}

/* Parameters with the zero-means-default rule applied. */
uint32_t vkv_press_window_of(const vkv_press_params *p); /* 64 */
uint32_t vkv_press_kernel_of(const vkv_press_params *p); /* 5 */
double vkv_press_beta_of(const vkv_press_params *p);     /* 20 */
uint32_t vkv_press_chunk_length_of(const vkv_press_params *p); /* 20 */
uint32_t vkv_press_lag_size_of(const vkv_press_params *p);     /* 128 */

/* Shapes every scorer needs: n >= 1, n <= n_ctx, GQA heads, head_dim a
 * multiple of 4 up to 256, an f16/f32 cache, p_c in [0, 1). */
vkv_status vkv_press_check_layer(const vkv_press_params *p, const vkv_press_layer *in, const char *name);
/* Views score_gpu binds: the K cache and scores[n_kv_head, n] (one range). */
vkv_status vkv_press_check_views(vkv_gpu *gpu, const vkv_press_layer *in, vkv_view scores, const char *name);
/* Scorers that read neither cache (StreamingLLM, Random): the layer and
 * scores[n_kv_head, n] (one range) checked, and the workgroups along x of
 * kernel k, one invocation per token (gx; the rows: one workgroup per KV head). */
vkv_status vkv_press_check_positional(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in,
                                     vkv_view scores, vkv_kernel k, const char *name, uint32_t *gx);
/* The scratch holds `bytes` in one range. */
vkv_status vkv_press_check_scratch(vkv_gpu *gpu, const vkv_press_layer *in, uint64_t bytes, const char *name);

/* KV heads per dispatch such that the K cache bound from any head, up to the
 * n used slots of the last bound head, fits one storage range (all heads
 * unless the cache is big; the per-head stride must then be aligned). */
vkv_status vkv_press_k_heads_per_dispatch(vkv_gpu *gpu, const vkv_press_layer *in, const char *name,
                                          uint32_t *heads_per);
/* Binding of heads h0 .. h0 + nh - 1 of in->k (slots 0..n-1 of the last). */
vkv_binding vkv_press_bind_k(const vkv_press_layer *in, uint32_t h0, uint32_t nh);
/* A view `offset` bytes into the scratch (offset: a multiple of VKV_PRESS_SCRATCH_ALIGN). */
static inline vkv_view vkv_press_scratch_at(const vkv_press_layer *in, uint64_t offset)
{
    return (vkv_view){in->scratch.buf, in->scratch.offset + offset};
}
/* Workgroups along x covering `count` invocations of kernel k (one per
 * token); an error past the device's x limit. */
vkv_status vkv_press_groups_x(vkv_gpu *gpu, vkv_kernel k, uint64_t count, const char *name, uint32_t *gx);
/* Element (h, j, d) of the host copy of the K cache, as f32. */
float vkv_press_k_host(const vkv_press_layer *in, uint32_t h, uint32_t j, uint32_t d);

/* ---- window attention (press/window_attn.c) ----
 * The last w captured queries (positions n - w .. n - 1; rows
 * in->window - w .. of q_window) attend causally to the cache with softmax
 * scale 1/sqrt(head_dim); raw[h, j] = sum over those queries and the query
 * heads of KV head h's group of the weight on key j, for j < n_pre. */
vkv_status vkv_press_window_check(const vkv_press_layer *in, uint32_t w, const char *name);
/* Scratch: the normaliser pairs [n_split, w, n_head] vec2, then raw [n_kv_head, n_pre] f32. */
uint64_t vkv_press_window_scratch_bytes(const vkv_press_layer *in, uint32_t w, uint32_t n_pre);
uint64_t vkv_press_window_raw_offset(const vkv_press_layer *in, uint32_t w);
/* Records the two dispatches; raw lands at vkv_press_window_raw_offset(). */
vkv_status vkv_press_window_gpu(vkv_gpu *gpu, const vkv_press_layer *in, uint32_t w, uint32_t n_pre,
                                const char *name);
/* raw[n_kv_head, n_pre] in double on the host (VKV_ERR_OOM only). */
vkv_status vkv_press_window_ref(const vkv_press_layer *in, uint32_t w, uint32_t n_pre, double *raw);

/* ---- wrappers over an inner scorer (press/adakv.c, press/critical.c) ----
 * The three functions of a wrapper press `id` around inner_ops: id_gpu,
 * id_ref and id_scratch call gpu_fn / ref_fn / scratch_fn with the inner
 * scorer (and the press's name, label, for messages). */
#define VKV_PRESS_WRAPPER(id, inner_ops, label, gpu_fn, ref_fn, scratch_fn)                                          \
    extern const vkv_press_ops inner_ops;                                                                              \
    static vkv_status id##_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)   \
    {                                                                                                                  \
        return gpu_fn(&inner_ops, label, gpu, p, in, scores);                                                          \
    }                                                                                                                  \
    static vkv_status id##_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)                   \
    {                                                                                                                  \
        return ref_fn(&inner_ops, label, p, in, scores);                                                               \
    }                                                                                                                  \
    static uint64_t id##_scratch(const vkv_press_params *p, const vkv_press_layer *in)                                 \
    {                                                                                                                  \
        return scratch_fn(&inner_ops, p, in);                                                                          \
    }

/* A wrapper whose inner scorer has a capture (ExpectedAttention) and runs
 * with the composition's own parameters (kvpress's evaluation registry
 * builds ExpectedAttentionPress(epsilon=1e-2) under AdaKV and
 * ExpectedAttentionPress(use_vnorm=False) under CriticalKV;
 * docs/ARCHITECTURE.md §2): adjust(p) returns the copy of *p that the
 * wrapper and its inner scorer see. Defines id_gpu, id_ref and id_scratch as
 * VKV_PRESS_WRAPPER does, and id_state and id_capture, the inner scorer's
 * state_bytes and capture_gpu, for the wrapper's ops: the driver then captures
 * the prefill's queries into the inner scorer's state through the wrapper. */
#define VKV_PRESS_WRAPPER_CAPTURE(id, inner_ops, label, gpu_fn, ref_fn, scratch_fn, adjust)                            \
    extern const vkv_press_ops inner_ops;                                                                              \
    static vkv_status id##_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)    \
    {                                                                                                                  \
        const vkv_press_params q = adjust(p);                                                                          \
        return gpu_fn(&inner_ops, label, gpu, &q, in, scores);                                                         \
    }                                                                                                                  \
    static vkv_status id##_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)                    \
    {                                                                                                                  \
        const vkv_press_params q = adjust(p);                                                                          \
        return ref_fn(&inner_ops, label, &q, in, scores);                                                              \
    }                                                                                                                  \
    static uint64_t id##_scratch(const vkv_press_params *p, const vkv_press_layer *in)                                 \
    {                                                                                                                  \
        const vkv_press_params q = adjust(p);                                                                          \
        return scratch_fn(&inner_ops, &q, in);                                                                         \
    }                                                                                                                  \
    static uint64_t id##_state(const vkv_press_params *p, const vkv_press_layer *in)                                   \
    {                                                                                                                  \
        const vkv_press_params q = adjust(p);                                                                          \
        return inner_ops.state_bytes(&q, in);                                                                          \
    }                                                                                                                  \
    static vkv_status id##_capture(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view qv,    \
                                   uint32_t n_tok, uint32_t pos0)                                                      \
    {                                                                                                                  \
        const vkv_press_params q = adjust(p);                                                                          \
        return inner_ops.capture_gpu(gpu, &q, in, qv, n_tok, pos0);                                                    \
    }

/* ---- SnapKV's scores, shared with PyramidKV (press/snapkv.c) ---- */
vkv_status vkv_snapkv_score_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores,
                                const char *name);
vkv_status vkv_snapkv_score_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores,
                                const char *name);
uint64_t vkv_snapkv_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in);

#endif
