/* A model's hyper-parameters, whatever file they come from: the GGUF's
 * metadata (model/model.c) or a Hugging Face config.json
 * (model/hf_config.c). Device-free, so that the readers link without Vulkan.
 *
 * Supported architectures: llama (Llama 2 / 3.x, rope scaling through
 * rope_freqs.weight or llama3 scaling metadata, tied output embedding), qwen2
 * (QKV biases, NeoX RoPE), qwen3 (per-head QK RMSNorm, head dim independent
 * of embedding / heads, NeoX RoPE). */
#ifndef VKV_HPARAMS_H
#define VKV_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rope.h"

/* Bounds on the hyper-parameters, far above any published model (the widest
 * have embeddings of 16,384, 128 query heads, feed-forward widths of 53,248,
 * vocabularies of 262,144 and contexts of 10M tokens) yet low enough that
 * every width derived from them (heads x head width) fits in 32 bits with
 * room to spare. A value past them is a damaged or crafted file: refusing it
 * when it is read, naming the key, beats a wrapped width or an allocation
 * failure later. */
#define VKV_HP_MAX_WIDTH (1u << 20) /* embedding, feed-forward, head width, q/k/v widths */
#define VKV_HP_MAX_HEADS (1u << 14)
#define VKV_HP_MAX_VOCAB (1u << 24)
#define VKV_HP_MAX_CTX (1u << 26)

typedef enum vkv_arch {
    VKV_ARCH_LLAMA,
    VKV_ARCH_QWEN2,
    VKV_ARCH_QWEN3,
} vkv_arch;

typedef struct vkv_hparams {
    vkv_arch arch;
    char arch_name[32];
    uint32_t n_vocab;
    uint32_t n_ctx_train;   /* context length the model was trained for */
    uint32_t n_embd;        /* residual stream width */
    uint32_t n_layer;
    uint32_t n_ff;          /* feed-forward hidden width */
    uint32_t n_head;        /* query heads */
    uint32_t n_head_kv;     /* key/value heads (GQA: n_head is a multiple) */
    uint32_t head_dim;      /* per-head width of q and k (attention.key_length) */
    uint32_t head_dim_v;    /* per-head width of v (attention.value_length) */
    uint32_t n_rot;         /* rotated dims per head */
    float rms_eps;
    float rope_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    vkv_rope_mode rope_mode;
    bool has_qkv_bias, has_qk_norm, tied_output;
    /* Llama-3 rope scaling computed from metadata when the file has no
     * rope_freqs.weight tensor. */
    bool llama3_scaling;
    float llama3_factor, llama3_low_freq_factor, llama3_high_freq_factor;
    uint32_t llama3_original_ctx;
} vkv_hparams;

#endif
