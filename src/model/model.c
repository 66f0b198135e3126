/* Hyper-parameters and weights from GGUF. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"

static vkv_status get_u32_arch(const vkv_gguf *g, const char *arch, const char *suffix, uint32_t *out, bool required)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (vkv_gguf_find_key(g, key) < 0) {
        if (!required) return VKV_OK;
        return vkv_error(VKV_ERR_FORMAT, "model metadata is missing '%s'", key);
    }
    return vkv_gguf_get_u32(g, key, out);
}

static vkv_status get_f32_arch(const vkv_gguf *g, const char *arch, const char *suffix, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return vkv_gguf_get_f32_opt(g, key, out);
}

/* Tensors each block needs at least (norms, q/k/v/output, gate/up/down), so
 * a block count can be checked against the tensors present. */
#define BLOCK_MIN_TENSORS 9u

/* A count or width read from arch.suffix: zero or above max is a format
 * error naming the key. */
static vkv_status check_count(const char *arch, const char *suffix, uint64_t v, uint64_t max)
{
    if (v >= 1 && v <= max) return VKV_OK;
    return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.%s' is %llu: %s %llu", arch, suffix, (unsigned long long)v,
                     v ? "more than the limit of" : "it must be at least", (unsigned long long)(v ? max : 1));
}

/* A float hyper-parameter: NaN, an infinity or a value <= 0 (each one here
 * is a scale, a base or a divisor) would make every output silently garbage. */
static vkv_status check_positive(const char *arch, const char *suffix, float v)
{
    if (isfinite(v) && v > 0) return VKV_OK;
    return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.%s' is %g: it must be a finite number above 0", arch, suffix,
                     (double)v);
}

vkv_status vkv_hparams_from_gguf(const vkv_gguf *g, vkv_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    vkv_gguf_str arch;
    vkv_status st = vkv_gguf_get_str(g, "general.architecture", &arch);
    if (st) return st;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.data);
    if (!strcmp(hp->arch_name, "llama")) hp->arch = VKV_ARCH_LLAMA;
    else if (!strcmp(hp->arch_name, "qwen2")) hp->arch = VKV_ARCH_QWEN2;
    else if (!strcmp(hp->arch_name, "qwen3")) hp->arch = VKV_ARCH_QWEN3;
    else
        return vkv_error(VKV_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (supported: llama, qwen2, qwen3)",
                         (int)(arch.len < 64 ? arch.len : 64), arch.data);
    const char *a = hp->arch_name;
    hp->n_ctx_train = 2048;
    if ((st = get_u32_arch(g, a, "context_length", &hp->n_ctx_train, false)) ||
        (st = get_u32_arch(g, a, "embedding_length", &hp->n_embd, true)) ||
        (st = get_u32_arch(g, a, "block_count", &hp->n_layer, true)) ||
        (st = get_u32_arch(g, a, "feed_forward_length", &hp->n_ff, true)) ||
        (st = get_u32_arch(g, a, "attention.head_count", &hp->n_head, true)))
        return st;
    hp->n_head_kv = hp->n_head;
    if ((st = get_u32_arch(g, a, "attention.head_count_kv", &hp->n_head_kv, false))) return st;
    if ((st = check_count(a, "context_length", hp->n_ctx_train, VKV_HP_MAX_CTX)) ||
        (st = check_count(a, "embedding_length", hp->n_embd, VKV_HP_MAX_WIDTH)) ||
        (st = check_count(a, "block_count", hp->n_layer, UINT32_MAX)) ||
        (st = check_count(a, "feed_forward_length", hp->n_ff, VKV_HP_MAX_WIDTH)) ||
        (st = check_count(a, "attention.head_count", hp->n_head, VKV_HP_MAX_HEADS)) ||
        (st = check_count(a, "attention.head_count_kv", hp->n_head_kv, VKV_HP_MAX_HEADS)))
        return st;
    /* Every block is allocated up front: the count must fit the tensors
     * present (a 100 KB file claiming 10^9 blocks is damaged, not big). */
    uint64_t n_tensors = (uint64_t)vkv_gguf_n_tensors(g);
    if (hp->n_layer > n_tensors / BLOCK_MIN_TENSORS)
        return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.block_count' is %u, but the file holds %llu tensors, "
                                         "enough for at most %llu blocks of %u tensors",
                         a, hp->n_layer, (unsigned long long)n_tensors,
                         (unsigned long long)(n_tensors / BLOCK_MIN_TENSORS), BLOCK_MIN_TENSORS);
    char last_block[64];
    snprintf(last_block, sizeof last_block, "blk.%u.attn_norm.weight", hp->n_layer ? hp->n_layer - 1 : 0);
    if (hp->n_layer && !vkv_gguf_find_tensor(g, last_block))
        return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.block_count' is %u, but the file has no tensor '%s' "
                                         "(the last block's)", a, hp->n_layer, last_block);
    /* every count is at least 1 here (check_count) */
    if (hp->n_head % hp->n_head_kv)
        return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.attention.head_count' (%u) is not a multiple of "
                                         "'%s.attention.head_count_kv' (%u)",
                         a, hp->n_head, a, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = get_u32_arch(g, a, "attention.key_length", &hp->head_dim, false))) return st;
    hp->head_dim_v = hp->head_dim;
    if ((st = get_u32_arch(g, a, "attention.value_length", &hp->head_dim_v, false))) return st;
    hp->n_rot = hp->head_dim;
    if ((st = get_u32_arch(g, a, "rope.dimension_count", &hp->n_rot, false))) return st;
    /* The widths are products of two keys: computed in 64 bits, where
     * 2^31 + 1 heads cannot wrap to a small width that passes. kv widths
     * are at most this (kv heads divide heads). */
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.key_length", a);
    if (!hp->head_dim && vkv_gguf_find_key(g, key) < 0)
        return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.embedding_length' (%u) is less than "
                                         "'%s.attention.head_count' (%u): the heads have no width",
                         a, hp->n_embd, a, hp->n_head);
    if ((st = check_count(a, "attention.key_length", hp->head_dim, VKV_HP_MAX_WIDTH)) ||
        (st = check_count(a, "attention.value_length", hp->head_dim_v, VKV_HP_MAX_WIDTH)))
        return st;
    if (q_dim > VKV_HP_MAX_WIDTH)
        return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.attention.head_count' (%u) x '%s.attention.key_length' "
                                         "(%u) is a query width of %llu, more than the limit of %u",
                         a, hp->n_head, a, hp->head_dim, (unsigned long long)q_dim, VKV_HP_MAX_WIDTH);
    if (!hp->head_dim || hp->head_dim_v != hp->head_dim || hp->n_rot > hp->head_dim || hp->n_rot % 2 || hp->head_dim % 2)
        return vkv_error(VKV_ERR_UNSUPPORTED, "unsupported head layout: key length %u, value length %u, rotated %u",
                         hp->head_dim, hp->head_dim_v, hp->n_rot);
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    float scale_linear = 1.0f;
    if ((st = get_f32_arch(g, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps)) ||
        (st = get_f32_arch(g, a, "rope.freq_base", &hp->rope_base)) ||
        (st = get_f32_arch(g, a, "rope.scaling.factor", &scale_linear)))
        return st;
    if (scale_linear == 0.0f) scale_linear = 1.0f; /* a factor of 0 means no scaling, as llama.cpp reads it */
    if ((st = check_positive(a, "attention.layer_norm_rms_epsilon", hp->rms_eps)) ||
        (st = check_positive(a, "rope.freq_base", hp->rope_base)) ||
        (st = check_positive(a, "rope.scaling.factor", scale_linear)))
        return st;
    hp->rope_freq_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    vkv_gguf_str stype = {0};
    if (vkv_gguf_find_key(g, key) >= 0 && (st = vkv_gguf_get_str(g, key, &stype))) return st;
    if (stype.len == 6 && !memcmp(stype.data, "linear", 6)) hp->rope_freq_scale = 1.0f / scale_linear;
    else if (stype.len == 6 && !memcmp(stype.data, "llama3", 6)) {
        hp->llama3_scaling = true;
        hp->llama3_factor = scale_linear;
        hp->llama3_low_freq_factor = 1.0f;
        hp->llama3_high_freq_factor = 4.0f;
        hp->llama3_original_ctx = 8192;
        if ((st = get_f32_arch(g, a, "rope.scaling.low_freq_factor", &hp->llama3_low_freq_factor)) ||
            (st = get_f32_arch(g, a, "rope.scaling.high_freq_factor", &hp->llama3_high_freq_factor)) ||
            (st = get_u32_arch(g, a, "rope.scaling.original_context_length", &hp->llama3_original_ctx, false)) ||
            (st = check_positive(a, "rope.scaling.low_freq_factor", hp->llama3_low_freq_factor)) ||
            (st = check_positive(a, "rope.scaling.high_freq_factor", hp->llama3_high_freq_factor)) ||
            (st = check_count(a, "rope.scaling.original_context_length", hp->llama3_original_ctx, VKV_HP_MAX_CTX)))
            return st;
        /* the blend between them divides by their difference */
        if (!(hp->llama3_high_freq_factor > hp->llama3_low_freq_factor))
            return vkv_error(VKV_ERR_FORMAT, "model metadata '%s.rope.scaling.high_freq_factor' (%g) must be above "
                                             "'%s.rope.scaling.low_freq_factor' (%g)",
                             a, (double)hp->llama3_high_freq_factor, a, (double)hp->llama3_low_freq_factor);
    } else if (stype.len && !(stype.len == 4 && !memcmp(stype.data, "none", 4)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "unsupported rope scaling type '%.*s'", (int)stype.len, stype.data);
    hp->rope_mode = hp->arch == VKV_ARCH_LLAMA ? VKV_ROPE_INTERLEAVED : VKV_ROPE_NEOX;
    hp->has_qkv_bias = hp->arch == VKV_ARCH_QWEN2;
    hp->has_qk_norm = hp->arch == VKV_ARCH_QWEN3;

    /* Vocabulary size: metadata, else the token list, else the embedding. */
    if ((st = get_u32_arch(g, a, "vocab_size", &hp->n_vocab, false))) return st;
    if (hp->n_vocab && (st = check_count(a, "vocab_size", hp->n_vocab, VKV_HP_MAX_VOCAB))) return st;
    const vkv_gguf_tensor *emb = vkv_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return vkv_error(VKV_ERR_FORMAT, "model is missing tensor 'token_embd.weight'");
    if (!hp->n_vocab) {
        if (emb->ne[1] > VKV_HP_MAX_VOCAB) /* checked before narrowing to 32 bits */
            return vkv_error(VKV_ERR_FORMAT, "tensor 'token_embd.weight' has %llu rows, a vocabulary over the limit "
                                             "of %u", (unsigned long long)emb->ne[1], VKV_HP_MAX_VOCAB);
        hp->n_vocab = (uint32_t)emb->ne[1];
    }
    hp->tied_output = vkv_gguf_find_tensor(g, "output.weight") == NULL;
    return VKV_OK;
}

/* Checks a tensor's shape (ne0 = cols, ne1 = rows) and uploads it. Norms and
 * biases are stored as f32 on the device (they may be f16 in the file: tiny
 * vectors, converted exactly); matrices keep their stored type. */
static vkv_status upload_tensor(vkv_gpu *gpu, vkv_model *m, const char *name, uint32_t rows, uint32_t cols, bool matrix,
                                bool optional, vkv_weight *w)
{
    memset(w, 0, sizeof *w);
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (optional) return VKV_OK;
        return vkv_error(VKV_ERR_FORMAT, "model is missing tensor '%s'", name);
    }
    uint64_t want1 = matrix ? rows : 1;
    if (t->ne[0] != cols || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return vkv_error(VKV_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%u, %llu]", name,
                         (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                         (unsigned long long)t->ne[3], cols, (unsigned long long)want1);
    const vkv_dtype_info *info = vkv_dtype_get(t->type);
    if (!info || !t->data)
        return vkv_error(VKV_ERR_UNSUPPORTED,
                         "tensor '%s' has type %u (%s), which this runtime does not support (it reads f32, f16, "
                         "bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K to q6_K, iq4_nl and iq4_xs)",
                         name, t->type, vkv_ggml_type_name(t->type));
    vkv_status st;
    w->rows = matrix ? rows : 1;
    w->cols = cols;
    if (matrix) {
        w->type = (vkv_dtype)t->type;
        if ((st = vkv_buffer_create(gpu, t->nbytes, VKV_MEM_DEVICE, name, &w->buf))) return st;
        /* In slices released once on the device: the mapped file then holds
         * at most one slice in host memory, however large the model. */
        const uint64_t slice = 64ull << 20;
        for (uint64_t off = 0; off < t->nbytes; off += slice) {
            const uint8_t *src = (const uint8_t *)t->data + off;
            uint64_t n = t->nbytes - off < slice ? t->nbytes - off : slice;
            st = vkv_buffer_upload(gpu, w->buf, off, src, n);
            vkv_gguf_release(m->gguf, src, n);
            if (st) return st;
        }
        m->weight_bytes += t->nbytes;
        return VKV_OK;
    }
    w->type = VKV_F32;
    float *tmp = malloc(4ull * cols);
    if (!tmp) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_dequantize_row((vkv_dtype)t->type, t->data, tmp, cols);
    vkv_gguf_release(m->gguf, t->data, t->nbytes);
    st = vkv_buffer_create(gpu, 4ull * cols, VKV_MEM_DEVICE, name, &w->buf);
    if (!st) st = vkv_buffer_upload(gpu, w->buf, 0, tmp, 4ull * cols);
    free(tmp);
    m->weight_bytes += 4ull * cols;
    return st;
}

vkv_rope_params vkv_model_rope_params(const vkv_model *m)
{
    const vkv_hparams *hp = &m->hp;
    return (vkv_rope_params){hp->rope_mode, hp->head_dim, hp->n_rot, hp->rope_base, hp->rope_freq_scale,
                             m->rope_factors, false};
}

vkv_status vkv_model_load(vkv_gpu *gpu, const char *path, vkv_model **out)
{
    *out = NULL;
    vkv_model *m = calloc(1, sizeof *m);
    if (!m) return vkv_error(VKV_ERR_OOM, "out of host memory");
    snprintf(m->path, sizeof m->path, "%s", path);
    vkv_status st = vkv_gguf_open(path, &m->gguf);
    if (st) goto error;
    if ((st = vkv_hparams_from_gguf(m->gguf, &m->hp))) goto error;
    vkv_hparams *hp = &m->hp;
    /* at most VKV_HP_MAX_WIDTH each (vkv_hparams_from_gguf): 32 bits hold them */
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    uint32_t v_dim = hp->n_head_kv * hp->head_dim_v, o_in = hp->n_head * hp->head_dim_v;

    if ((st = upload_tensor(gpu, m, "token_embd.weight", hp->n_vocab, hp->n_embd, true, false, &m->tok_embd)) ||
        (st = upload_tensor(gpu, m, "output_norm.weight", 1, hp->n_embd, false, false, &m->output_norm)))
        goto error;
    if (hp->tied_output) m->output = m->tok_embd;
    else if ((st = upload_tensor(gpu, m, "output.weight", hp->n_vocab, hp->n_embd, true, false, &m->output)))
        goto error;

    /* RoPE frequencies: rope_freqs.weight divides each pair's frequency
     * (Llama 3.1 files carry it); llama3 metadata computes the same factors. */
    uint32_t n_pairs = hp->n_rot / 2;
    const vkv_gguf_tensor *rf = vkv_gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (rf) {
        if (rf->ne[0] != n_pairs || rf->ne[1] != 1 || !rf->data || !vkv_dtype_get(rf->type)) {
            st = vkv_error(VKV_ERR_FORMAT, "tensor 'rope_freqs.weight' has %llu elements, expected %u",
                           (unsigned long long)rf->ne[0], n_pairs);
            goto error;
        }
        if (!(m->rope_factors = malloc(4ull * n_pairs))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto error; }
        vkv_dequantize_row((vkv_dtype)rf->type, rf->data, m->rope_factors, n_pairs);
        for (uint32_t i = 0; i < n_pairs; i++) /* each divides a frequency */
            if (!isfinite(m->rope_factors[i]) || !(m->rope_factors[i] > 0)) {
                st = vkv_error(VKV_ERR_FORMAT, "tensor 'rope_freqs.weight' holds %g at %u: every factor must be a "
                                               "finite number above 0", (double)m->rope_factors[i], i);
                goto error;
            }
    } else if (hp->llama3_scaling) {
        if (!(m->rope_factors = malloc(4ull * n_pairs))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto error; }
        vkv_rope_llama3_factors(hp->n_rot, hp->rope_base, hp->llama3_factor, hp->llama3_low_freq_factor,
                                hp->llama3_high_freq_factor, hp->llama3_original_ctx, m->rope_factors);
    }
    {
        vkv_rope_params rp = vkv_model_rope_params(m);
        float inv[512];
        if (n_pairs > 512) { st = vkv_error(VKV_ERR_UNSUPPORTED, "head dimension %u too large", hp->n_rot); goto error; }
        vkv_rope_inv_freq(&rp, inv);
        if ((st = vkv_buffer_create(gpu, 4ull * (n_pairs ? n_pairs : 1), VKV_MEM_DEVICE, "rope frequencies", &m->rope_inv_freq)) ||
            (n_pairs && (st = vkv_buffer_upload(gpu, m->rope_inv_freq, 0, inv, 4ull * n_pairs))))
            goto error;
    }

    if (!(m->layers = calloc(hp->n_layer, sizeof *m->layers))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto error; }
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        vkv_layer_weights *L = &m->layers[l];
        char n[96];
#define W(field, suffix, rows, cols, matrix, optional)                                           \
    snprintf(n, sizeof n, "blk.%u.%s", l, suffix);                                               \
    if ((st = upload_tensor(gpu, m, n, rows, cols, matrix, optional, &L->field))) goto error;
        W(attn_norm, "attn_norm.weight", 1, hp->n_embd, false, false)
        W(wq, "attn_q.weight", q_dim, hp->n_embd, true, false)
        W(wk, "attn_k.weight", kv_dim, hp->n_embd, true, false)
        W(wv, "attn_v.weight", v_dim, hp->n_embd, true, false)
        W(wo, "attn_output.weight", hp->n_embd, o_in, true, false)
        W(ffn_norm, "ffn_norm.weight", 1, hp->n_embd, false, false)
        W(w_gate, "ffn_gate.weight", hp->n_ff, hp->n_embd, true, false)
        W(w_up, "ffn_up.weight", hp->n_ff, hp->n_embd, true, false)
        W(w_down, "ffn_down.weight", hp->n_embd, hp->n_ff, true, false)
        if (hp->has_qkv_bias) {
            W(bq, "attn_q.bias", 1, q_dim, false, false)
            W(bk, "attn_k.bias", 1, kv_dim, false, false)
            W(bv, "attn_v.bias", 1, v_dim, false, false)
        }
        if (hp->has_qk_norm) {
            W(q_norm, "attn_q_norm.weight", 1, hp->head_dim, false, false)
            W(k_norm, "attn_k_norm.weight", 1, hp->head_dim, false, false)
        }
#undef W
    }
    *out = m;
    return VKV_OK;
error:
    vkv_error_context(st, "loading model '%s'", path);
    vkv_model_free(gpu, m);
    return st;
}

static void free_weight(vkv_gpu *gpu, vkv_weight *w)
{
    vkv_buffer_destroy(gpu, w->buf);
    w->buf = NULL;
}

void vkv_model_free(vkv_gpu *gpu, vkv_model *m)
{
    if (!m) return;
    if (m->layers)
        for (uint32_t l = 0; l < m->hp.n_layer; l++) {
            vkv_layer_weights *L = &m->layers[l];
            vkv_weight *all[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv,
                                 &L->q_norm, &L->k_norm, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_weight(gpu, all[i]);
        }
    free(m->layers);
    if (!m->hp.tied_output) free_weight(gpu, &m->output);
    free_weight(gpu, &m->tok_embd);
    free_weight(gpu, &m->output_norm);
    vkv_buffer_destroy(gpu, m->rope_inv_freq);
    free(m->rope_factors);
    vkv_gguf_close(m->gguf);
    free(m);
}
