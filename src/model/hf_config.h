/* A Hugging Face checkpoint's config.json (and generation_config.json's end
 * tokens) read into plain hyper-parameters, their mapping onto vkv_hparams,
 * and the GGUF name of each checkpoint tensor: the readers the loading of a
 * checkpoint folder builds on (docs/ARCHITECTURE.md §1, "Hugging Face
 * checkpoints").
 *
 * Supported: LlamaForCausalLM (model_type llama), Qwen2ForCausalLM (qwen2),
 * Qwen3ForCausalLM (qwen3); rope_scaling null or llama3. Anything else is
 * refused naming what the file holds. Every missing required key or value of
 * the wrong type is VKV_ERR_FORMAT naming the key and the file. */
#ifndef VKV_HF_CONFIG_H
#define VKV_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "model/hparams.h"

#define VKV_HF_MAX_EOS 16

typedef struct vkv_hf_config {
    vkv_arch arch;
    char architecture[64];       /* architectures[0], "" when absent */
    char model_type[32];         /* "" when absent */
    uint32_t hidden_size;
    uint32_t intermediate_size;
    uint32_t num_hidden_layers;
    uint32_t num_attention_heads;
    uint32_t num_key_value_heads; /* default: num_attention_heads */
    uint32_t head_dim;            /* default: hidden_size / num_attention_heads */
    uint32_t max_position_embeddings;
    uint32_t vocab_size;
    double rms_norm_eps;
    double rope_theta;            /* default 10000 */
    bool tie_word_embeddings;     /* default false */
    bool attention_bias;          /* q/k/v biases: qwen2 always, else the key (default false) */
    char torch_dtype[16];         /* "bfloat16", ...; "" when absent */
    /* rope_scaling {"rope_type": "llama3", ...}; all zero when null */
    bool rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    uint32_t rope_original_max_position_embeddings;
    bool has_bos;
    uint32_t bos_token_id;
    uint32_t n_eos;               /* eos_token_id: one id or a list; 0 when absent or null */
    uint32_t eos_token_ids[VKV_HF_MAX_EOS];
} vkv_hf_config;

/* config.json at path, or its text (name: what messages call it). */
vkv_status vkv_hf_config_read(const char *path, vkv_hf_config *out);
vkv_status vkv_hf_config_parse(const char *text, size_t len, const char *name, vkv_hf_config *out);

/* generation_config.json's eos_token_id (one id or a list) into ids[0, *n),
 * at most VKV_HF_MAX_EOS; *n = 0 when the key is absent or null. */
vkv_status vkv_hf_generation_eos_read(const char *path, uint32_t ids[VKV_HF_MAX_EOS], uint32_t *n);
vkv_status vkv_hf_generation_eos_parse(const char *text, size_t len, const char *name, uint32_t ids[VKV_HF_MAX_EOS],
                                       uint32_t *n);

/* The model's hyper-parameters from a config, checked against the same
 * bounds as the GGUF path's (model/hparams.h); the error names the
 * config.json key. Rotation: a checkpoint stores Q and K for the rotate-half
 * (NeoX) RoPE in every architecture, llama's included, while a GGUF's llama
 * Q and K rows are permuted to the interleaved rotation by its converter. The
 * hparams here say VKV_ROPE_NEOX for all three, which is right for the
 * weights as stored; a loading step that permutes llama's Q and K rows (each
 * head's rows i and i + head_dim/2 to 2i and 2i + 1) must set
 * VKV_ROPE_INTERLEAVED instead. */
vkv_status vkv_hf_config_to_hparams(const vkv_hf_config *c, vkv_hparams *hp);

/* The GGUF name of a checkpoint tensor ("model.layers.3.self_attn.q_proj.weight"
 * -> "blk.3.attn_q.weight"); false, with out empty, for a name that is not
 * one of the model's weights (e.g. "model.rotary_emb.inv_freq", older
 * checkpoints' rotation table) or does not fit out. */
bool vkv_hf_gguf_name(const char *hf_name, char *out, size_t size);
/* The inverse, for messages about a tensor a checkpoint lacks
 * ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"). */
bool vkv_hf_checkpoint_name(const char *gguf_name, char *out, size_t size);

#endif
