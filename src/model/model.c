/* Hyper-parameters and weights from a GGUF file or a Hugging Face checkpoint
 * folder (docs/ARCHITECTURE.md §1, "Hugging Face checkpoints"). */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fp16.h"
#include "core/hash.h"
#include "model/hf_config.h"

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

/* A checkpoint tensor under its GGUF name (vkv_hf_gguf_name), sorted by
 * that name for lookup; `used` finds the tensors no weight took. */
typedef struct hf_entry {
    char gguf_name[64];
    const vkv_st_tensor *t;
    bool used;
} hf_entry;

struct vkv_model_hf {
    vkv_st *st;
    hf_entry *entries; /* [n] sorted by gguf_name */
    size_t n;
};

/* One stored tensor of either format: ne[0] is the contiguous dimension. */
typedef struct weight_src {
    const char *name; /* as the file names it (for messages) */
    vkv_dtype type;
    uint64_t ne[4];
    const void *data;
    uint64_t nbytes;
} weight_src;

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const hf_entry *)a)->gguf_name, ((const hf_entry *)b)->gguf_name);
}

static hf_entry *hf_find(const vkv_model *m, const char *gguf_name)
{
    hf_entry key;
    snprintf(key.gguf_name, sizeof key.gguf_name, "%s", gguf_name);
    return bsearch(&key, m->hf->entries, m->hf->n, sizeof key, entry_cmp);
}

/* The tensor stored for a GGUF name; false when absent. Checkpoint tensors
 * must be f32, f16 or bf16 (refused naming the tensor and file otherwise). */
static vkv_status find_src(const vkv_model *m, const char *gguf_name, weight_src *src, bool *found)
{
    memset(src, 0, sizeof *src);
    *found = false;
    if (m->gguf) {
        const vkv_gguf_tensor *t = vkv_gguf_find_tensor(m->gguf, gguf_name);
        if (!t) return VKV_OK;
        *src = (weight_src){gguf_name, (vkv_dtype)t->type, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, t->data,
                            t->nbytes};
        if (!vkv_dtype_get(t->type) || !t->data)
            return vkv_error(VKV_ERR_UNSUPPORTED,
                             "tensor '%s' has type %u (%s), which this runtime does not support (it reads f32, f16, "
                             "bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K to q6_K, iq4_nl and iq4_xs)",
                             gguf_name, t->type, vkv_ggml_type_name(t->type));
        *found = true;
        return VKV_OK;
    }
    hf_entry *e = hf_find(m, gguf_name);
    if (!e) return VKV_OK;
    const vkv_st_tensor *t = e->t;
    vkv_status st = vkv_st_require_float(t);
    if (st) return st;
    e->used = true;
    static const vkv_dtype types[] = {[VKV_ST_F32] = VKV_F32, [VKV_ST_F16] = VKV_F16, [VKV_ST_BF16] = VKV_BF16};
    *src = (weight_src){t->name, types[t->dtype], {1, 1, 1, 1}, t->data, t->nbytes};
    if (t->n_dims > 4)
        return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': tensor '%s' has %u dimensions, expected 1 or 2", t->file,
                         t->name, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims; d++) src->ne[d] = t->shape[t->n_dims - 1 - d]; /* row-major: last is ne[0] */
    *found = true;
    return VKV_OK;
}

static void release_src(const vkv_model *m, const void *data, uint64_t n)
{
    if (m->gguf) vkv_gguf_release(m->gguf, data, n);
    else vkv_st_release(m->hf->st, data, n);
}

/* Whether a checkpoint's rows must be reordered for the interleaved
 * rotation: llama's Q and K (weights and biases), stored for rotate-half
 * (model/hf_config.h). Returns the rows of one head, 0 for none. */
static uint32_t permuted_head_rows(const vkv_model *m, const char *gguf_name)
{
    if (m->gguf || m->hp.arch != VKV_ARCH_LLAMA) return 0;
    const char *dot = strchr(gguf_name + 4, '.'); /* "blk.N.attn_q.weight" */
    if (strncmp(gguf_name, "blk.", 4) || !dot) return 0;
    if (!strncmp(dot, ".attn_q.", 8) || !strncmp(dot, ".attn_k.", 8)) return m->hp.head_dim;
    return 0;
}

typedef vkv_status (*chunk_fn)(void *ctx, uint64_t off, const void *data, uint64_t n);

/* Visits a tensor's bytes in the order the device holds them, in slices of
 * at most 64 MB (whole rows) released once visited: the mapped file then
 * holds at most one slice in host memory, however large the model. With head_rows, each
 * head's rows i and i + head_rows/2 go to 2i and 2i + 1 (the interleaved
 * rotation's pairs), a head at a time through a buffer. */
static vkv_status visit_chunks(const vkv_model *m, const weight_src *src, uint32_t head_rows, chunk_fn fn, void *ctx)
{
    vkv_status st = VKV_OK;
    uint64_t n_rows = src->ne[1] * src->ne[2] * src->ne[3];
    uint64_t row_bytes = n_rows ? src->nbytes / n_rows : src->nbytes;
    if (!head_rows) {
        /* whole rows, so that a device layout can be made slice by slice */
        const uint64_t slice = row_bytes && row_bytes < (64ull << 20) ? (64ull << 20) / row_bytes * row_bytes : row_bytes;
        for (uint64_t off = 0; off < src->nbytes && !st; off += slice) {
            const uint8_t *p = (const uint8_t *)src->data + off;
            uint64_t n = src->nbytes - off < slice ? src->nbytes - off : slice;
            st = fn(ctx, off, p, n);
            release_src(m, p, n);
        }
        return st;
    }
    uint64_t head_bytes = row_bytes * head_rows;
    if (n_rows % head_rows || head_rows % 2)
        return vkv_error(VKV_ERR_FORMAT, "tensor '%s' has %llu rows, not whole heads of %u", src->name,
                         (unsigned long long)n_rows, head_rows);
    uint8_t *head = malloc(head_bytes);
    if (!head) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t half = head_rows / 2;
    for (uint64_t off = 0; off < src->nbytes && !st; off += head_bytes) {
        const uint8_t *in = (const uint8_t *)src->data + off;
        for (uint32_t i = 0; i < half; i++) {
            memcpy(head + (2ull * i) * row_bytes, in + (uint64_t)i * row_bytes, row_bytes);
            memcpy(head + (2ull * i + 1) * row_bytes, in + (uint64_t)(i + half) * row_bytes, row_bytes);
        }
        st = fn(ctx, off, head, head_bytes);
        release_src(m, in, head_bytes);
    }
    free(head);
    return st;
}

typedef struct upload_ctx {
    vkv_gpu *gpu;
    vkv_buffer *buf;
    vkv_dtype type;
    uint32_t cols;
} upload_ctx;

/* Whole rows of the file, uploaded in the device's layout (core/dtype.h). */
static vkv_status upload_chunk(void *ctx, uint64_t off, const void *data, uint64_t n)
{
    upload_ctx *u = ctx;
    if (!vkv_dtype_has_device_layout(u->type)) return vkv_buffer_upload(u->gpu, u->buf, off, data, n);
    const uint64_t frb = vkv_dtype_row_bytes(u->type, u->cols), drb = vkv_dtype_device_row_bytes(u->type, u->cols);
    void *dev = malloc(n / frb * drb);
    if (!dev) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_dtype_rows_to_device(u->type, u->cols, data, dev, n / frb);
    vkv_status st = vkv_buffer_upload(u->gpu, u->buf, off / frb * drb, dev, n / frb * drb);
    free(dev);
    return st;
}

static vkv_status hash_chunk(void *ctx, uint64_t off, const void *data, uint64_t n)
{
    (void)off;
    uint64_t *h = ctx;
    *h = vkv_fnv1a(*h, data, n);
    return VKV_OK;
}

/* Gathers a small tensor (norm, bias) in device order into f32. */
typedef struct gather_ctx {
    uint8_t *bytes;
} gather_ctx;

static vkv_status gather_chunk(void *ctx, uint64_t off, const void *data, uint64_t n)
{
    memcpy(((gather_ctx *)ctx)->bytes + off, data, n);
    return VKV_OK;
}

/* Checks a tensor's shape (ne0 = cols, ne1 = rows) and uploads it. Norms and
 * biases are stored as f32 on the device (they may be f16 or bf16 in the
 * file: tiny vectors, converted exactly); matrices keep their stored type. */
static vkv_status upload_tensor(vkv_gpu *gpu, vkv_model *m, const char *name, uint32_t rows, uint32_t cols, bool matrix,
                                bool optional, vkv_weight *w)
{
    memset(w, 0, sizeof *w);
    weight_src t;
    bool found;
    vkv_status st = find_src(m, name, &t, &found);
    if (st) return st;
    if (!found) {
        if (optional) return VKV_OK;
        if (m->gguf) return vkv_error(VKV_ERR_FORMAT, "model is missing tensor '%s'", name);
        char hf_name[128];
        vkv_hf_checkpoint_name(name, hf_name, sizeof hf_name);
        return vkv_error(VKV_ERR_FORMAT, "the checkpoint's safetensors have no tensor '%s' (config.json says %u "
                                         "layers, %s)", hf_name, m->hp.n_layer, m->hp.arch_name);
    }
    uint64_t want1 = matrix ? rows : 1;
    if (t.ne[0] != cols || t.ne[1] != want1 || t.ne[2] != 1 || t.ne[3] != 1) {
        if (m->gguf)
            return vkv_error(VKV_ERR_FORMAT, "tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%u, %llu]",
                             name, (unsigned long long)t.ne[0], (unsigned long long)t.ne[1],
                             (unsigned long long)t.ne[2], (unsigned long long)t.ne[3], cols, (unsigned long long)want1);
        const hf_entry *e = hf_find(m, name);
        char shape[96] = "";
        for (uint32_t d = 0; d < e->t->n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", d ? ", " : "",
                     (unsigned long long)e->t->shape[d]);
        if (matrix)
            return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': tensor '%s' has shape [%s], config.json gives [%u, %u]",
                             e->t->file, e->t->name, shape, rows, cols);
        return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': tensor '%s' has shape [%s], config.json gives [%u]",
                         e->t->file, e->t->name, shape, cols);
    }
    uint32_t head_rows = permuted_head_rows(m, name);
    w->rows = matrix ? rows : 1;
    w->cols = cols;
    if (matrix) {
        w->type = t.type;
        const uint64_t device_bytes = vkv_dtype_device_row_bytes(t.type, cols) * (uint64_t)rows;
        if ((st = vkv_buffer_create(gpu, device_bytes, VKV_MEM_DEVICE, name, &w->buf))) return st;
        upload_ctx u = {gpu, w->buf, t.type, cols};
        if ((st = visit_chunks(m, &t, head_rows, upload_chunk, &u))) return st;
        m->weight_bytes += device_bytes;
        return VKV_OK;
    }
    w->type = VKV_F32;
    float *tmp = malloc(4ull * cols);
    gather_ctx g = {malloc(t.nbytes)};
    if (!tmp || !g.bytes) {
        free(tmp);
        free(g.bytes);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    /* a bias is one row per output feature: one value a "row" of a head */
    weight_src as_rows = t;
    as_rows.ne[1] = t.ne[0];
    as_rows.ne[0] = 1;
    st = visit_chunks(m, &as_rows, head_rows, gather_chunk, &g);
    if (!st) {
        vkv_dequantize_row(t.type, g.bytes, tmp, cols);
        st = vkv_buffer_create(gpu, 4ull * cols, VKV_MEM_DEVICE, name, &w->buf);
    }
    if (!st) st = vkv_buffer_upload(gpu, w->buf, 0, tmp, 4ull * cols);
    free(tmp);
    free(g.bytes);
    m->weight_bytes += 4ull * cols;
    return st;
}

vkv_status vkv_model_kv_hash(const vkv_model *m, uint64_t *out)
{
    uint64_t h = VKV_FNV1A_INIT;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        for (int kv = 0; kv < 2; kv++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.attn_%c.weight", l, kv ? 'v' : 'k');
            weight_src t;
            bool found;
            vkv_status st = find_src(m, name, &t, &found);
            if (st) return st;
            if (!found) return vkv_error(VKV_ERR_FORMAT, "the model has no tensor '%s'", name);
            if ((st = visit_chunks(m, &t, permuted_head_rows(m, name), hash_chunk, &h))) return st;
        }
    *out = h;
    return VKV_OK;
}

bool vkv_model_path_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* A checkpoint folder: config.json's hyper-parameters and the safetensors'
 * tensors under their GGUF names. Two tensors for one weight (the same name
 * in two shards is refused by the reader) and tensors of layers config.json
 * does not have are refused by name. */
static vkv_status open_hf(vkv_model *m, const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vkv_error(VKV_ERR_IO, "'%s' is a folder without config.json: -m takes a GGUF file or a Hugging Face "
                                     "checkpoint folder (config.json and safetensors)", dir);
    vkv_hf_config cfg;
    vkv_status st = vkv_hf_config_read(path, &cfg); /* its errors name the file */
    if (st) return st;
    if ((st = vkv_hf_config_to_hparams(&cfg, &m->hp))) return vkv_error_context(st, "'%s'", path);
    /* The loader permutes llama's Q and K rows for the interleaved rotation,
     * as GGUF converters do (model/hf_config.h), so the same kernels and
     * logits as the converted GGUF. */
    if (m->hp.arch == VKV_ARCH_LLAMA) m->hp.rope_mode = VKV_ROPE_INTERLEAVED;
    if (!(m->hf = calloc(1, sizeof *m->hf))) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if ((st = vkv_st_open_dir(dir, &m->hf->st))) return st;
    size_t n = vkv_st_n_tensors(m->hf->st);
    if (!(m->hf->entries = calloc(n ? n : 1, sizeof *m->hf->entries))) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const vkv_st_tensor *t = vkv_st_tensor_at(m->hf->st, i);
        hf_entry *e = &m->hf->entries[m->hf->n];
        if (!vkv_hf_gguf_name(t->name, e->gguf_name, sizeof e->gguf_name)) continue;
        e->t = t;
        m->hf->n++;
        m->n_params += t->n_elems;
    }
    qsort(m->hf->entries, m->hf->n, sizeof *m->hf->entries, entry_cmp);
    for (size_t i = 1; i < m->hf->n; i++)
        if (!strcmp(m->hf->entries[i].gguf_name, m->hf->entries[i - 1].gguf_name))
            return vkv_error(VKV_ERR_FORMAT, "safetensors: tensors '%s' ('%s') and '%s' ('%s') are the same weight",
                             m->hf->entries[i - 1].t->name, m->hf->entries[i - 1].t->file, m->hf->entries[i].t->name,
                             m->hf->entries[i].t->file);
    /* lm_head.weight absent: the output is the embedding (tied) */
    if (!hf_find(m, "output.weight")) m->hp.tied_output = true;
    hf_entry *emb = hf_find(m, "token_embd.weight");
    if (!emb)
        return vkv_error(VKV_ERR_FORMAT, "the checkpoint's safetensors have no tensor 'model.embed_tokens.weight'");
    return VKV_OK;
}

/* Every checkpoint weight must have been taken by the model: one left over
 * (a layer beyond config.json's count, a bias the architecture has no use
 * for) means the config and the weights disagree. */
static vkv_status check_all_used(const vkv_model *m)
{
    for (size_t i = 0; i < m->hf->n; i++) {
        const hf_entry *e = &m->hf->entries[i];
        if (e->used || (m->hp.tied_output && !strcmp(e->gguf_name, "output.weight"))) continue;
        return vkv_error(VKV_ERR_FORMAT,
                         "safetensors: '%s': tensor '%s' is not a weight of the model config.json describes "
                         "(%u layers, %s)", e->t->file, e->t->name, m->hp.n_layer, m->hp.arch_name);
    }
    return VKV_OK;
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
    vkv_status st;
    if (vkv_model_path_is_dir(path)) {
        if ((st = open_hf(m, path))) goto error;
    } else {
        if ((st = vkv_gguf_open(path, &m->gguf))) {
            /* a file that is not a GGUF: say what -m takes */
            if (st == VKV_ERR_FORMAT)
                vkv_error_context(st, "-m takes a GGUF file or a Hugging Face checkpoint folder (config.json and "
                                      "safetensors), and '%s' is not a GGUF file", path);
            goto error;
        }
        if ((st = vkv_hparams_from_gguf(m->gguf, &m->hp))) goto error;
        for (int64_t i = 0; i < vkv_gguf_n_tensors(m->gguf); i++) {
            const vkv_gguf_tensor *t = vkv_gguf_tensor_at(m->gguf, i);
            m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        }
    }
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
    const vkv_gguf_tensor *rf = m->gguf ? vkv_gguf_find_tensor(m->gguf, "rope_freqs.weight") : NULL;
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
    if (m->hf && (st = check_all_used(m))) goto error;
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
    if (m->hf) {
        vkv_st_close(m->hf->st);
        free(m->hf->entries);
        free(m->hf);
    }
    free(m);
}
