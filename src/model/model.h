/* Transformer models from GGUF or a Hugging Face checkpoint folder
 * (config.json + safetensors, docs/ARCHITECTURE.md §1, "Hugging Face
 * checkpoints"): architecture hyper-parameters and weights uploaded once to
 * device memory in their stored type.
 *
 * Supported `general.architecture` values: llama (Llama 2 / 3.x, rope scaling
 * through rope_freqs.weight or llama3 scaling metadata, tied output
 * embedding), qwen2 (QKV biases, NeoX RoPE), qwen3 (per-head QK RMSNorm, head
 * dim independent of embedding / heads, NeoX RoPE). */
#ifndef VKV_MODEL_H
#define VKV_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "model/gguf.h"
#include "model/hparams.h"
#include "model/safetensors.h"
#include "vk/ops.h"

/* A weight on the device: view + its storage type and shape [rows, cols]. */
typedef struct vkv_weight {
    vkv_buffer *buf;
    vkv_dtype type;
    uint32_t rows, cols; /* rows = output features, cols = input features (ne[1], ne[0]) */
} vkv_weight;

typedef struct vkv_layer_weights {
    vkv_weight attn_norm;              /* [n_embd] f32 */
    vkv_weight wq, wk, wv, wo;         /* [n_head*hd, n_embd], [n_kv*hd, n_embd] x2, [n_embd, n_head*hd_v] */
    vkv_weight bq, bk, bv;             /* qwen2 biases, f32 (buf NULL when absent) */
    vkv_weight q_norm, k_norm;         /* qwen3 per-head norms [head_dim] f32 */
    vkv_weight ffn_norm;               /* [n_embd] f32 */
    vkv_weight w_gate, w_up, w_down;   /* [n_ff, n_embd] x2, [n_embd, n_ff] */
} vkv_layer_weights;

typedef struct vkv_model {
    vkv_hparams hp;
    vkv_gguf *gguf;           /* kept open: tokenizer metadata, tensor data; NULL for a folder */
    struct vkv_model_hf *hf;  /* a checkpoint folder's tensors (path is the folder); NULL for a GGUF */
    uint64_t n_params;        /* elements of every weight in the file(s) */
    vkv_weight tok_embd;      /* [n_vocab, n_embd] */
    vkv_weight output_norm;   /* [n_embd] f32 */
    vkv_weight output;        /* [n_vocab, n_embd] (tok_embd when tied) */
    vkv_layer_weights *layers;
    vkv_buffer *rope_inv_freq;/* [n_rot/2] f32: per-pair frequencies incl. scaling */
    float *rope_factors;      /* [n_rot/2] host copy of rope_freqs.weight, or NULL */
    uint64_t weight_bytes;    /* device bytes of all weights */
    char path[1024];
} vkv_model;

/* Reads hyper-parameters only (no device needed): unknown architecture or
 * missing keys give a clear error naming them. */
vkv_status vkv_hparams_from_gguf(const vkv_gguf *g, vkv_hparams *hp);

/* Opens the GGUF, or the checkpoint folder when path is a directory,
 * validates every tensor's presence, type and shape, and uploads the weights
 * to gpu. A checkpoint's llama Q and K rows are permuted for the interleaved
 * rotation as a GGUF converter does, so both formats of the same weights give
 * the same logits; its bf16 matrices stay bf16 (the kernels read bf16). */
vkv_status vkv_model_load(vkv_gpu *gpu, const char *path, vkv_model **out);
/* True when path names a directory (a checkpoint folder). */
bool vkv_model_path_is_dir(const char *path);
/* 64-bit FNV-1a over every layer's K then V weight bytes as the device holds
 * them: the model's identity in .vkcal files, the same for a GGUF and a
 * checkpoint folder of the same weights and types. */
vkv_status vkv_model_kv_hash(const vkv_model *m, uint64_t *out);
void vkv_model_free(vkv_gpu *gpu, vkv_model *m);

/* RoPE parameters of this model (forward; set .inverse for the inverse). */
vkv_rope_params vkv_model_rope_params(const vkv_model *m);

#endif
