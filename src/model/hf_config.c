/* Hugging Face config.json and generation_config.json readers, the mapping
 * onto vkv_hparams, and the checkpoint-to-GGUF tensor name table. */
#include "model/hf_config.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"

#define SHOWN 64 /* values from files are capped in messages */

static const struct {
    const char *cls, *type;
    vkv_arch arch;
} archs[] = {
    {"LlamaForCausalLM", "llama", VKV_ARCH_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", VKV_ARCH_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", VKV_ARCH_QWEN3},
};
#define N_ARCHS (sizeof archs / sizeof *archs)
#define SUPPORTED "LlamaForCausalLM/llama, Qwen2ForCausalLM/qwen2, Qwen3ForCausalLM/qwen3"

/* An object of a file being read: messages name the file and prefix keys
 * with where the object is ("rope_scaling."). */
typedef struct cfg {
    const char *file;
    const char *prefix;
    const vkv_json *obj;
} cfg;

/* The member key, NULL when absent or null (every optional key may be null). */
static const vkv_json *member(const cfg *c, const char *key)
{
    const vkv_json *v = vkv_json_get(c->obj, key);
    return v && v->type != VKV_JSON_NULL ? v : NULL;
}

static vkv_status missing(const cfg *c, const char *key)
{
    return vkv_error(VKV_ERR_FORMAT, "'%s': missing required key '%s%s'", c->file, c->prefix, key);
}

static vkv_status wrong(const cfg *c, const char *key, const char *is, const char *want)
{
    return vkv_error(VKV_ERR_FORMAT, "'%s': key '%s%s' is %s, not %s", c->file, c->prefix, key, is, want);
}

/* A u32 of v; key names it in messages. */
static vkv_status as_u32(const cfg *c, const char *key, const vkv_json *v, uint32_t *out)
{
    uint64_t u;
    const char *bad = vkv_json_as_uint(v, &u);
    if (bad) return wrong(c, key, bad, "a non-negative integer");
    if (u > UINT32_MAX)
        return vkv_error(VKV_ERR_FORMAT, "'%s': key '%s%s' is %" PRIu64 ", more than %" PRIu32, c->file, c->prefix,
                         key, u, UINT32_MAX);
    *out = (uint32_t)u;
    return VKV_OK;
}

/* *out keeps its value (the default) when an optional key is absent. */
static vkv_status get_u32(const cfg *c, const char *key, bool required, uint32_t *out)
{
    const vkv_json *v = member(c, key);
    if (!v) return required ? missing(c, key) : VKV_OK;
    return as_u32(c, key, v, out);
}

static vkv_status get_f64(const cfg *c, const char *key, bool required, double *out)
{
    const vkv_json *v = member(c, key);
    if (!v) return required ? missing(c, key) : VKV_OK;
    if (v->type != VKV_JSON_NUMBER) return wrong(c, key, vkv_json_type_name(v->type), "a number");
    *out = v->number;
    return VKV_OK;
}

static vkv_status get_bool(const cfg *c, const char *key, bool *out)
{
    const vkv_json *v = member(c, key);
    if (!v) return VKV_OK;
    if (v->type != VKV_JSON_BOOL) return wrong(c, key, vkv_json_type_name(v->type), "true or false");
    *out = v->boolean;
    return VKV_OK;
}

/* An optional string into out[size]; "" when absent. */
static vkv_status get_str(const cfg *c, const char *key, char *out, size_t size)
{
    out[0] = 0;
    const vkv_json *v = member(c, key);
    if (!v) return VKV_OK;
    if (v->type != VKV_JSON_STRING) return wrong(c, key, vkv_json_type_name(v->type), "a string");
    snprintf(out, size, "%s", v->string);
    return VKV_OK;
}

/* An id or a list of ids (eos_token_id). */
static vkv_status get_ids(const cfg *c, const char *key, uint32_t ids[VKV_HF_MAX_EOS], uint32_t *n)
{
    *n = 0;
    const vkv_json *v = member(c, key);
    if (!v) return VKV_OK;
    if (v->type == VKV_JSON_NUMBER) {
        *n = 1;
        return as_u32(c, key, v, &ids[0]);
    }
    if (v->type != VKV_JSON_ARRAY) return wrong(c, key, vkv_json_type_name(v->type), "a token id or a list of them");
    if (v->n_items > VKV_HF_MAX_EOS)
        return vkv_error(VKV_ERR_FORMAT, "'%s': key '%s%s' lists %zu ids, more than %d", c->file, c->prefix, key,
                         v->n_items, VKV_HF_MAX_EOS);
    for (size_t i = 0; i < v->n_items; i++) {
        uint64_t u;
        const char *bad = vkv_json_as_uint(v->items[i], &u);
        if (bad || u > UINT32_MAX)
            return vkv_error(VKV_ERR_FORMAT, "'%s': key '%s%s' item %zu is %s, not a token id", c->file, c->prefix, key,
                             i, bad ? bad : "too large");
        ids[i] = (uint32_t)u;
    }
    *n = (uint32_t)v->n_items;
    return VKV_OK;
}

/* architectures[0] and model_type: both known and agreeing, or one known and
 * the other absent. */
static vkv_status read_arch(const cfg *c, vkv_hf_config *o)
{
    const vkv_json *list = member(c, "architectures");
    if (list) {
        const vkv_json *first = vkv_json_at(list, 0);
        if (list->type != VKV_JSON_ARRAY || !first || first->type != VKV_JSON_STRING)
            return wrong(c, "architectures", list->type == VKV_JSON_ARRAY ? "not a list of names" :
                         vkv_json_type_name(list->type), "a list of class names");
        snprintf(o->architecture, sizeof o->architecture, "%s", first->string);
    }
    vkv_status s = get_str(c, "model_type", o->model_type, sizeof o->model_type);
    if (s) return s;
    if (!o->architecture[0] && !o->model_type[0])
        return vkv_error(VKV_ERR_FORMAT, "'%s': missing required key 'architectures' (or 'model_type')", c->file);
    size_t by_cls = N_ARCHS, by_type = N_ARCHS;
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (!strcmp(o->architecture, archs[i].cls)) by_cls = i;
        if (!strcmp(o->model_type, archs[i].type)) by_type = i;
    }
    if ((o->architecture[0] && by_cls == N_ARCHS) || (o->model_type[0] && by_type == N_ARCHS))
        return vkv_error(VKV_ERR_UNSUPPORTED, "'%s': architecture '%.*s' (model_type '%.*s') is not supported "
                         "(supported: " SUPPORTED ")", c->file, SHOWN, o->architecture, SHOWN, o->model_type);
    if (by_cls != N_ARCHS && by_type != N_ARCHS && by_cls != by_type)
        return vkv_error(VKV_ERR_FORMAT, "'%s': architectures[0] '%s' and model_type '%s' name different models",
                         c->file, o->architecture, o->model_type);
    o->arch = archs[by_cls != N_ARCHS ? by_cls : by_type].arch;
    return VKV_OK;
}

static vkv_status read_rope_scaling(const cfg *c, vkv_hf_config *o)
{
    const vkv_json *v = member(c, "rope_scaling");
    if (!v) return VKV_OK;
    if (v->type != VKV_JSON_OBJECT) return wrong(c, "rope_scaling", vkv_json_type_name(v->type), "an object or null");
    cfg r = {c->file, "rope_scaling.", v};
    char type[32];
    const char *type_key = member(&r, "rope_type") ? "rope_type" : "type";
    vkv_status s = get_str(&r, type_key, type, sizeof type);
    if (s) return s;
    if (!type[0]) return missing(&r, "rope_type");
    if (!strcmp(type, "default")) return VKV_OK; /* transformers' name for none */
    if (strcmp(type, "llama3"))
        return vkv_error(VKV_ERR_UNSUPPORTED, "'%s': rope_scaling type '%s' is not supported (supported: llama3)",
                         c->file, type);
    o->rope_llama3 = true;
    if ((s = get_f64(&r, "factor", true, &o->rope_factor)) ||
        (s = get_f64(&r, "low_freq_factor", true, &o->rope_low_freq_factor)) ||
        (s = get_f64(&r, "high_freq_factor", true, &o->rope_high_freq_factor)) ||
        (s = get_u32(&r, "original_max_position_embeddings", true, &o->rope_original_max_position_embeddings)))
        return s;
    return VKV_OK;
}

static vkv_status read_config(const cfg *c, vkv_hf_config *o)
{
    memset(o, 0, sizeof *o);
    if (c->obj->type != VKV_JSON_OBJECT) return vkv_error(VKV_ERR_FORMAT, "'%s': not a JSON object", c->file);
    vkv_status s = read_arch(c, o);
    if (s) return s;
    o->rope_theta = 10000.0;
    if ((s = get_u32(c, "hidden_size", true, &o->hidden_size)) ||
        (s = get_u32(c, "intermediate_size", true, &o->intermediate_size)) ||
        (s = get_u32(c, "num_hidden_layers", true, &o->num_hidden_layers)) ||
        (s = get_u32(c, "num_attention_heads", true, &o->num_attention_heads)) ||
        (s = get_u32(c, "max_position_embeddings", true, &o->max_position_embeddings)) ||
        (s = get_u32(c, "vocab_size", true, &o->vocab_size)) ||
        (s = get_f64(c, "rms_norm_eps", true, &o->rms_norm_eps)) ||
        (s = get_f64(c, "rope_theta", false, &o->rope_theta)))
        return s;
    o->num_key_value_heads = o->num_attention_heads;
    o->head_dim = o->num_attention_heads ? o->hidden_size / o->num_attention_heads : 0;
    o->attention_bias = o->arch == VKV_ARCH_QWEN2; /* by architecture: its config has no such key */
    bool sliding = false;
    if ((s = get_u32(c, "num_key_value_heads", false, &o->num_key_value_heads)) ||
        (s = get_u32(c, "head_dim", false, &o->head_dim)) ||
        (s = get_bool(c, "tie_word_embeddings", &o->tie_word_embeddings)) ||
        (s = get_bool(c, "attention_bias", &o->attention_bias)) ||
        (s = get_bool(c, "use_sliding_window", &sliding)) ||
        (s = get_str(c, "torch_dtype", o->torch_dtype, sizeof o->torch_dtype)) ||
        (s = read_rope_scaling(c, o)) || (s = get_ids(c, "eos_token_id", o->eos_token_ids, &o->n_eos)))
        return s;
    if (!o->torch_dtype[0] && (s = get_str(c, "dtype", o->torch_dtype, sizeof o->torch_dtype))) return s;
    if (o->arch == VKV_ARCH_QWEN2) o->attention_bias = true;
    /* the layer the model runs: SiLU-gated feed-forward without biases */
    char act[32];
    bool mlp_bias = false;
    if ((s = get_str(c, "hidden_act", act, sizeof act)) || (s = get_bool(c, "mlp_bias", &mlp_bias))) return s;
    if (act[0] && strcmp(act, "silu"))
        return vkv_error(VKV_ERR_UNSUPPORTED, "'%s': 'hidden_act' is '%s': only silu is supported", c->file, act);
    if (mlp_bias)
        return vkv_error(VKV_ERR_UNSUPPORTED, "'%s': 'mlp_bias' is true: feed-forward biases are not supported",
                         c->file);
    if (sliding)
        return vkv_error(VKV_ERR_UNSUPPORTED, "'%s': 'use_sliding_window' is true: sliding-window attention is not "
                         "supported", c->file);
    o->has_bos = member(c, "bos_token_id") != NULL;
    return get_u32(c, "bos_token_id", false, &o->bos_token_id);
}

/* Parses text as one JSON object and hands it to read (with its file name). */
static vkv_status with_doc(const char *text, size_t len, const char *name, vkv_status (*read)(const cfg *, void *),
                           void *out)
{
    vkv_json_doc *doc;
    vkv_status s = vkv_json_parse(text, len, &doc);
    if (s) return vkv_error_context(s, "'%s'", name);
    cfg c = {name, "", vkv_json_root(doc)};
    s = read(&c, out);
    vkv_json_free(doc);
    return s;
}

static vkv_status read_file_with(const char *path, vkv_status (*read)(const cfg *, void *), void *out)
{
    char *text;
    size_t len;
    vkv_status s = vkv_read_file(path, VKV_MAX_DOC_BYTES, &text, &len);
    if (s) return s;
    s = with_doc(text, len, path, read, out);
    free(text);
    return s;
}

static vkv_status read_config_cb(const cfg *c, void *out) { return read_config(c, out); }

vkv_status vkv_hf_config_parse(const char *text, size_t len, const char *name, vkv_hf_config *out)
{
    return with_doc(text, len, name, read_config_cb, out);
}

vkv_status vkv_hf_config_read(const char *path, vkv_hf_config *out)
{
    return read_file_with(path, read_config_cb, out);
}

typedef struct eos_out {
    uint32_t *ids, *n;
} eos_out;

static vkv_status read_eos_cb(const cfg *c, void *out)
{
    eos_out *e = out;
    *e->n = 0;
    if (c->obj->type != VKV_JSON_OBJECT) return vkv_error(VKV_ERR_FORMAT, "'%s': not a JSON object", c->file);
    return get_ids(c, "eos_token_id", e->ids, e->n);
}

vkv_status vkv_hf_generation_eos_parse(const char *text, size_t len, const char *name, uint32_t ids[VKV_HF_MAX_EOS],
                                       uint32_t *n)
{
    eos_out e = {ids, n};
    return with_doc(text, len, name, read_eos_cb, &e);
}

vkv_status vkv_hf_generation_eos_read(const char *path, uint32_t ids[VKV_HF_MAX_EOS], uint32_t *n)
{
    eos_out e = {ids, n};
    return read_file_with(path, read_eos_cb, &e);
}

/* ------------------------------------------------------------- hparams */

static vkv_status check_count(const char *key, uint64_t v, uint64_t max)
{
    if (v >= 1 && v <= max) return VKV_OK;
    return vkv_error(VKV_ERR_FORMAT, "config.json '%s' is %llu: %s %llu", key, (unsigned long long)v,
                     v ? "more than the limit of" : "it must be at least", (unsigned long long)(v ? max : 1));
}

/* A float hyper-parameter, as the model holds it (float): finite and above 0. */
static vkv_status check_positive(const char *key, double v, float *out)
{
    *out = (float)v;
    if (isfinite(*out) && *out > 0) return VKV_OK;
    return vkv_error(VKV_ERR_FORMAT, "config.json '%s' is %g: it must be a finite number above 0", key, v);
}

vkv_status vkv_hf_config_to_hparams(const vkv_hf_config *c, vkv_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = c->arch;
    for (size_t i = 0; i < N_ARCHS; i++)
        if (archs[i].arch == c->arch) snprintf(hp->arch_name, sizeof hp->arch_name, "%s", archs[i].type);
    vkv_status s;
    if ((s = check_count("vocab_size", c->vocab_size, VKV_HP_MAX_VOCAB)) ||
        (s = check_count("max_position_embeddings", c->max_position_embeddings, VKV_HP_MAX_CTX)) ||
        (s = check_count("hidden_size", c->hidden_size, VKV_HP_MAX_WIDTH)) ||
        (s = check_count("num_hidden_layers", c->num_hidden_layers, UINT32_MAX)) ||
        (s = check_count("intermediate_size", c->intermediate_size, VKV_HP_MAX_WIDTH)) ||
        (s = check_count("num_attention_heads", c->num_attention_heads, VKV_HP_MAX_HEADS)) ||
        (s = check_count("num_key_value_heads", c->num_key_value_heads, VKV_HP_MAX_HEADS)))
        return s;
    if (c->num_attention_heads % c->num_key_value_heads)
        return vkv_error(VKV_ERR_FORMAT, "config.json 'num_attention_heads' (%u) is not a multiple of "
                         "'num_key_value_heads' (%u)", c->num_attention_heads, c->num_key_value_heads);
    if ((s = check_count("head_dim", c->head_dim, VKV_HP_MAX_WIDTH))) return s;
    uint64_t q_dim = (uint64_t)c->num_attention_heads * c->head_dim;
    if (q_dim > VKV_HP_MAX_WIDTH)
        return vkv_error(VKV_ERR_FORMAT, "config.json 'num_attention_heads' (%u) x 'head_dim' (%u) is a query width "
                         "of %llu, more than the limit of %u", c->num_attention_heads, c->head_dim,
                         (unsigned long long)q_dim, VKV_HP_MAX_WIDTH);
    if (c->head_dim % 2)
        return vkv_error(VKV_ERR_UNSUPPORTED, "config.json 'head_dim' is %u: rotation needs an even head width",
                         c->head_dim);
    hp->n_vocab = c->vocab_size;
    hp->n_ctx_train = c->max_position_embeddings;
    hp->n_embd = c->hidden_size;
    hp->n_layer = c->num_hidden_layers;
    hp->n_ff = c->intermediate_size;
    hp->n_head = c->num_attention_heads;
    hp->n_head_kv = c->num_key_value_heads;
    hp->head_dim = hp->head_dim_v = hp->n_rot = c->head_dim;
    if ((s = check_positive("rms_norm_eps", c->rms_norm_eps, &hp->rms_eps)) ||
        (s = check_positive("rope_theta", c->rope_theta, &hp->rope_base)))
        return s;
    hp->rope_freq_scale = 1.0f;
    hp->rope_mode = VKV_ROPE_NEOX; /* the weights as stored: see hf_config.h */
    hp->has_qkv_bias = c->attention_bias;
    hp->has_qk_norm = c->arch == VKV_ARCH_QWEN3;
    hp->tied_output = c->tie_word_embeddings;
    if (c->rope_llama3) {
        hp->llama3_scaling = true;
        hp->llama3_original_ctx = c->rope_original_max_position_embeddings;
        if ((s = check_positive("rope_scaling.factor", c->rope_factor, &hp->llama3_factor)) ||
            (s = check_positive("rope_scaling.low_freq_factor", c->rope_low_freq_factor, &hp->llama3_low_freq_factor)) ||
            (s = check_positive("rope_scaling.high_freq_factor", c->rope_high_freq_factor,
                                &hp->llama3_high_freq_factor)) ||
            (s = check_count("rope_scaling.original_max_position_embeddings", hp->llama3_original_ctx,
                             VKV_HP_MAX_CTX)))
            return s;
        /* the blend between them divides by their difference */
        if (!(hp->llama3_high_freq_factor > hp->llama3_low_freq_factor))
            return vkv_error(VKV_ERR_FORMAT, "config.json 'rope_scaling.high_freq_factor' (%g) must be above "
                             "'rope_scaling.low_freq_factor' (%g)", (double)hp->llama3_high_freq_factor,
                             (double)hp->llama3_low_freq_factor);
    }
    return VKV_OK;
}

/* ---------------------------------------------------------- tensor names */

/* Checkpoint name -> GGUF name, for the whole model and for each block
 * ("model.layers.N." -> "blk.N."). q/k/v biases are qwen2's, q_norm/k_norm
 * qwen3's. Q and K are stored for the rotate-half rotation (see hf_config.h). */
static const struct {
    const char *hf, *gguf;
} global_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
}, block_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

bool vkv_hf_gguf_name(const char *hf, char *out, size_t size)
{
    if (size) out[0] = 0;
    for (size_t i = 0; i < sizeof global_names / sizeof *global_names; i++)
        if (!strcmp(hf, global_names[i].hf)) {
            int n = snprintf(out, size, "%s", global_names[i].gguf);
            if (n < 0 || (size_t)n >= size) break;
            return true;
        }
    static const char prefix[] = "model.layers.";
    if (strncmp(hf, prefix, sizeof prefix - 1)) goto none;
    const char *p = hf + sizeof prefix - 1, *digits = p;
    uint64_t layer = 0;
    while (*p >= '0' && *p <= '9' && p - digits < 10) layer = layer * 10 + (uint64_t)(*p++ - '0');
    /* decimal, no leading zeros, fits 32 bits, then a dot */
    if (p == digits || *p != '.' || (*digits == '0' && p - digits > 1) || layer > UINT32_MAX) goto none;
    p++;
    for (size_t i = 0; i < sizeof block_names / sizeof *block_names; i++)
        if (!strcmp(p, block_names[i].hf)) {
            int n = snprintf(out, size, "blk.%" PRIu64 ".%s", layer, block_names[i].gguf);
            if (n < 0 || (size_t)n >= size) break;
            return true;
        }
none:
    if (size) out[0] = 0;
    return false;
}

bool vkv_hf_checkpoint_name(const char *gguf, char *out, size_t size)
{
    if (size) out[0] = 0;
    for (size_t i = 0; i < sizeof global_names / sizeof *global_names; i++)
        if (!strcmp(gguf, global_names[i].gguf)) {
            int n = snprintf(out, size, "%s", global_names[i].hf);
            return n >= 0 && (size_t)n < size;
        }
    unsigned layer;
    int used = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &used) != 1 || !used) return false;
    for (size_t i = 0; i < sizeof block_names / sizeof *block_names; i++)
        if (!strcmp(gguf + used, block_names[i].gguf)) {
            int n = snprintf(out, size, "model.layers.%u.%s", layer, block_names[i].hf);
            return n >= 0 && (size_t)n < size;
        }
    return false;
}
