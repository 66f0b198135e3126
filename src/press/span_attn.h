/* Span attention: the part ObservedAttention and KVzip share (press/span_attn.c).
 *
 * A run of nq queries (post-RoPE, rows q_row0 .. q_row0 + nq - 1 of a
 * [rows, n_head, head_dim] f32 buffer; row q_row0 + i at position qpos0 + i)
 * attends, with softmax scale 1/sqrt(head_dim) in fp32, over exactly the keys
 *   [0, a)  U  [b, c)  U  [r0, its own position]      (a <= b <= c <= r0 <= qpos0)
 * of the cache: ObservedAttention uses a = b = c = r0 = 0 (plain causal
 * attention); KVzip's repeat queries see the sinks [0, a), the context chunk
 * being repeated [b, c) and the repeated tokens from r0 = n on, as kvpress's
 * KVzipPress subsamples the keys. For every target key j in [t0, t1), the
 * weights exp(s_ij - lse_i) of the (query, query head of the KV head's group)
 * pairs that see j are summed (ObservedAttention) or maxed (KVzip) into
 *   acc[kv_head * acc_stride + j]  (+= sum, or = max(acc, max)).
 *
 * GPU: press_span_lse (per split of the visible keys, the softmax (max, sum)
 * of each query row), then press_span_accum (one key per thread: combines the
 * splits into the log-sum-exp and accumulates the weights); queries go
 * VKV_SPAN_QSUB at a time so the scratch stays bounded. No score matrix is
 * stored. */
#ifndef VKV_PRESS_SPAN_ATTN_H
#define VKV_PRESS_SPAN_ATTN_H

#include "press/press_internal.h"

#define VKV_SPAN_QSUB 256u /* queries per lse / accumulate pair of dispatches */

typedef struct vkv_span_attn {
    vkv_view q;              /* [rows, n_head, head_dim] f32 */
    uint32_t q_row0, nq, qpos0;
    uint32_t a, b, c, r0;    /* visible keys (see above) */
    uint32_t t0, t1;         /* target keys */
    bool max_mode;           /* max instead of sum */
    vkv_view acc;            /* [n_kv_head, acc_stride] f32, read and written */
    uint32_t acc_stride;
} vkv_span_attn;

/* Scratch the GPU path needs for queries that see at most in->n_ctx keys. */
uint64_t vkv_span_scratch_bytes(const vkv_press_layer *in);
/* Records the dispatches (in->k: the cache; in->scratch). */
vkv_status vkv_span_gpu(vkv_gpu *gpu, const vkv_press_layer *in, const vkv_span_attn *sa, const char *name);
/* The same in double on the host: q_host [nq, n_head, head_dim] the run's
 * queries, keys from in->k_host; acc [n_kv_head, acc_stride] updated. */
vkv_status vkv_span_ref(const vkv_press_layer *in, const vkv_span_attn *sa, const float *q_host, double *acc);

#endif
