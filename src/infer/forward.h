/* The transformer forward pass on the GPU: an inference context owns the KV
 * cache and the activation buffers of one sequence and evaluates tokens in
 * chunks (prefill: matrix-matrix kernels and the tiled causal attention;
 * decode: matrix-vector kernels and split-context attention). Only the logits
 * that are asked for come back to the host. */
#ifndef VKV_FORWARD_H
#define VKV_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef struct vkv_ctx_params {
    uint32_t n_ctx;     /* cache slots (max tokens of the sequence); 0 = the model's training context */
    uint32_t n_batch;   /* prefill chunk (tokens per forward); 0 = 512 */
    vkv_dtype kv_type;  /* VKV_F16 (default) or VKV_F32 */
} vkv_ctx_params;

typedef struct vkv_ctx vkv_ctx;

vkv_status vkv_ctx_create(vkv_gpu *gpu, const vkv_model *m, const vkv_ctx_params *p, vkv_ctx **out);
void vkv_ctx_free(vkv_ctx *c);

/* Appends n tokens at positions n_past.. and runs the model over them in
 * chunks of n_batch. logits: when all_logits, [n, n_vocab] (every position),
 * else [n_vocab] for the last token; may be NULL to skip the output layer. */
vkv_status vkv_ctx_eval(vkv_ctx *c, const int32_t *ids, uint32_t n, bool all_logits, float *logits);

/* Tokens in the cache. */
uint32_t vkv_ctx_n_past(const vkv_ctx *c);
uint32_t vkv_ctx_n_ctx(const vkv_ctx *c);
/* Forgets the sequence (the cache is overwritten from position 0). */
void vkv_ctx_reset(vkv_ctx *c);
/* Device bytes held by the KV cache. */
uint64_t vkv_ctx_kv_bytes(const vkv_ctx *c);

#endif
