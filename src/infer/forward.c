/* The forward pass: one recording per chunk of tokens.
 *
 * Per layer, for a chunk of n tokens (activations are row-major [n, width]):
 *   xn = rms_norm(x) * attn_norm                       [n, n_embd]
 *   q, k, v = xn Wq^T (+bq), xn Wk^T (+bk), xn Wv^T (+bv)
 *   (qwen3) q, k = per-head rms_norm * q_norm / k_norm
 *   q, k = rope(q), rope(k) at positions n_past..       [n, heads, head_dim]
 *   k_cache[l], v_cache[l] slots n_past.. = k, v        [n_kv_head, n_ctx, head_dim]
 *   a = attention(q, k_cache[l], v_cache[l])            [n, n_head, head_dim]
 *   x = x + a Wo^T
 *   x = x + (silu(xn Wg^T) * (xn Wu^T)) Wd^T   with xn = rms_norm(x) * ffn_norm
 * then logits = rms_norm(x) * output_norm . Wout^T for the rows asked for. */
#include "infer/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_attn.h"
#include "vk/ops_attn.h"
#include "vk/ops_vector.h"

/* One compressed layer: the tiered layout of ref/ref_vector.h. */
typedef struct tiered_layer {
    bool on;
    vkv_buffer *k, *v;        /* tiered K rows [k_rows, head_dim], V rows [v_rows, head_dim] of KV type */
    vkv_buffer *meta;         /* [n_kv_head, 8] uint32 vkv_tier_head */
    vkv_buffer *pos;          /* [p_entries] int32 positions of compressed slots */
    vkv_buffer *w;            /* [n_kv_head, head_dim, head_dim] f32, or NULL (nothing approximated) */
    vkv_buffer *vhat;         /* materialised path: [k_rows, head_dim] f32 rebuilt values */
    uint64_t k_rows, v_rows, p_entries;
    uint64_t n_ret_total, n_apx_total;
    uint32_t max_apx, max_comp;
} tiered_layer;

struct vkv_ctx {
    vkv_gpu *gpu;
    const vkv_model *m;
    vkv_ctx_params p;
    uint32_t n_past;
    vkv_buffer **k_cache, **v_cache; /* per layer: [n_kv_head, n_ctx, head_dim] of kv_type */
    /* Per-chunk inputs (host-visible: written directly by the CPU). */
    vkv_buffer *ids;      /* [n_batch] int32 */
    vkv_buffer *pos;      /* [n_batch] int32 */
    /* Activations for up to n_batch rows. */
    vkv_buffer *x;        /* [n_batch, n_embd] residual stream */
    vkv_buffer *xn;       /* [n_batch, n_embd] normalised input of a block */
    vkv_buffer *q, *q2;   /* [n_batch, n_head * head_dim] (q2: rope / norm output) */
    vkv_buffer *k, *k2;   /* [n_batch, n_kv_head * head_dim] */
    vkv_buffer *v;        /* [n_batch, n_kv_head * head_dim] */
    vkv_buffer *attn;     /* [n_batch, n_head * head_dim] */
    vkv_buffer *proj;     /* [n_batch, n_embd] attention / ffn output before the residual add */
    vkv_buffer *gate, *up;/* [n_batch, n_ff] */
    vkv_buffer *scratch;  /* attention partials */
    vkv_buffer *out_rows; /* [n_batch, n_embd] rows whose logits are wanted */
    vkv_buffer *logits;   /* [n_batch, n_vocab] device */
    vkv_buffer *logits_host; /* [n_batch, n_vocab] host-visible readback */
    vkv_kv_hook kv_hook;
    void *kv_hook_user;
    vkv_q_hook q_hook;
    void *q_hook_user;
    /* VECTOR */
    uint32_t n_ctx0;          /* context length at compression */
    tiered_layer *tiers;      /* [n_layer] */
    vkv_buffer *w_zero;       /* bound as W where nothing is approximated */
    vkv_buffer *tiered_scratch; /* split decode partials of tier-aware attention */
    bool materialized;
};

void vkv_ctx_set_q_hook(vkv_ctx *c, vkv_q_hook hook, void *user)
{
    c->q_hook = hook;
    c->q_hook_user = user;
}

void vkv_ctx_set_kv_hook(vkv_ctx *c, vkv_kv_hook hook, void *user)
{
    c->kv_hook = hook;
    c->kv_hook_user = user;
}

vkv_view vkv_ctx_k_cache(const vkv_ctx *c, uint32_t layer) { return vkv_view_of(c->k_cache[layer]); }
vkv_view vkv_ctx_v_cache(const vkv_ctx *c, uint32_t layer) { return vkv_view_of(c->v_cache[layer]); }
vkv_dtype vkv_ctx_kv_type(const vkv_ctx *c) { return c->p.kv_type; }

static vkv_view V(const vkv_buffer *b) { return vkv_view_of(b); }
static vkv_view W(const vkv_weight *w) { return vkv_view_of(w->buf); }

static vkv_status make(vkv_gpu *gpu, uint64_t bytes, vkv_mem_kind kind, const char *what, vkv_buffer **b)
{
    return vkv_buffer_create(gpu, bytes ? bytes : 16, kind, what, b);
}

/* vkv_ctx_params with their defaults applied. */
static vkv_ctx_params resolve_params(const vkv_hparams *hp, const vkv_ctx_params *params)
{
    vkv_ctx_params p = *params;
    if (!p.n_ctx) p.n_ctx = hp->n_ctx_train;
    if (!p.n_batch) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.kv_type != VKV_F16 && p.kv_type != VKV_F32) p.kv_type = VKV_F16;
    return p;
}

/* The context's buffers besides the KV cache, in one list for
 * vkv_ctx_create and vkv_ctx_plan_memory. */
typedef struct ctx_buffer {
    vkv_buffer **dst;
    uint64_t bytes;
    vkv_mem_kind kind;
    const char *what;
} ctx_buffer;
#define CTX_N_BUFFERS 17

static void ctx_buffers(vkv_ctx *c, const vkv_hparams *hp, ctx_buffer out[CTX_N_BUFFERS])
{
    uint64_t B = c->p.n_batch;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim, kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    vkv_attn_params ap = {.n_q = VKV_ATTN_DECODE_MAX_Q, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv, .head_dim = hp->head_dim,
                          .n_ctx_max = c->p.n_ctx, .n_kv = c->p.n_ctx, .kv_type = c->p.kv_type};
    const ctx_buffer list[CTX_N_BUFFERS] = {
        {&c->ids, 4 * B, VKV_MEM_HOST, "token ids"},
        {&c->pos, 4 * B, VKV_MEM_HOST, "positions"},
        {&c->x, 4 * B * hp->n_embd, VKV_MEM_DEVICE, "activations"},
        {&c->xn, 4 * B * hp->n_embd, VKV_MEM_DEVICE, "activations"},
        {&c->q, 4 * B * q_dim, VKV_MEM_DEVICE, "queries"},
        {&c->q2, 4 * B * q_dim, VKV_MEM_DEVICE, "queries"},
        {&c->k, 4 * B * kv_dim, VKV_MEM_DEVICE, "keys"},
        {&c->k2, 4 * B * kv_dim, VKV_MEM_DEVICE, "keys"},
        {&c->v, 4 * B * kv_dim, VKV_MEM_DEVICE, "values"},
        {&c->attn, 4 * B * q_dim, VKV_MEM_DEVICE, "attention output"},
        {&c->proj, 4 * B * hp->n_embd, VKV_MEM_DEVICE, "activations"},
        {&c->gate, 4 * B * hp->n_ff, VKV_MEM_DEVICE, "feed-forward activations"},
        {&c->up, 4 * B * hp->n_ff, VKV_MEM_DEVICE, "feed-forward activations"},
        {&c->scratch, vkv_attn_scratch_bytes(&ap), VKV_MEM_DEVICE, "attention scratch"},
        {&c->out_rows, 4 * B * hp->n_embd, VKV_MEM_DEVICE, "output rows"},
        {&c->logits, 4 * B * hp->n_vocab, VKV_MEM_DEVICE, "logits"},
        {&c->logits_host, 4 * B * hp->n_vocab, VKV_MEM_HOST, "logits readback"},
    };
    memcpy(out, list, sizeof list);
}

/* Bytes a buffer of `bytes` takes (make() and the allocator's padding). */
static uint64_t padded(uint64_t bytes) { return bytes ? (bytes + 15) & ~15ull : 16; }

vkv_ctx_memory vkv_ctx_plan_memory(const vkv_hparams *hp, const vkv_ctx_params *params)
{
    vkv_ctx c = {.p = resolve_params(hp, params)};
    vkv_ctx_memory m = {.n_ctx = c.p.n_ctx};
    m.kv_bytes = 2 * hp->n_layer * padded(vkv_kv_cache_bytes(c.p.kv_type, hp->n_head_kv, c.p.n_ctx, hp->head_dim));
    ctx_buffer b[CTX_N_BUFFERS];
    ctx_buffers(&c, hp, b);
    for (int i = 0; i < CTX_N_BUFFERS; i++) *(b[i].kind == VKV_MEM_DEVICE ? &m.scratch_bytes : &m.host_bytes) += padded(b[i].bytes);
    return m;
}

vkv_status vkv_ctx_create(vkv_gpu *gpu, const vkv_model *m, const vkv_ctx_params *params, vkv_ctx **out)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    vkv_ctx *c = calloc(1, sizeof *c);
    if (!c) return vkv_error(VKV_ERR_OOM, "out of host memory");
    c->gpu = gpu;
    c->m = m;
    c->p = resolve_params(hp, params);
    vkv_status st = VKV_OK;
    if (!(c->k_cache = calloc(hp->n_layer, sizeof *c->k_cache)) || !(c->v_cache = calloc(hp->n_layer, sizeof *c->v_cache)) ||
        !(c->tiers = calloc(hp->n_layer, sizeof *c->tiers))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    uint64_t cache_bytes = vkv_kv_cache_bytes(c->p.kv_type, hp->n_head_kv, c->p.n_ctx, hp->head_dim);
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((st = make(gpu, cache_bytes, VKV_MEM_DEVICE, "the K cache", &c->k_cache[l])) ||
            (st = make(gpu, cache_bytes, VKV_MEM_DEVICE, "the V cache", &c->v_cache[l])))
            goto error;
    ctx_buffer bufs[CTX_N_BUFFERS];
    ctx_buffers(c, hp, bufs);
    for (int i = 0; i < CTX_N_BUFFERS; i++)
        if ((st = make(gpu, bufs[i].bytes, bufs[i].kind, bufs[i].what, bufs[i].dst))) goto error;
    *out = c;
    return VKV_OK;
error:
    vkv_ctx_free(c);
    return st;
}

void vkv_ctx_free(vkv_ctx *c)
{
    if (!c) return;
    vkv_gpu *gpu = c->gpu;
    for (uint32_t l = 0; l < c->m->hp.n_layer; l++) {
        if (c->k_cache) vkv_buffer_destroy(gpu, c->k_cache[l]);
        if (c->v_cache) vkv_buffer_destroy(gpu, c->v_cache[l]);
        if (c->tiers) {
            tiered_layer *t = &c->tiers[l];
            vkv_buffer *tb[] = {t->k, t->v, t->meta, t->pos, t->w, t->vhat};
            for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) vkv_buffer_destroy(gpu, tb[i]);
        }
    }
    free(c->k_cache);
    free(c->v_cache);
    free(c->tiers);
    vkv_buffer_destroy(gpu, c->w_zero);
    vkv_buffer_destroy(gpu, c->tiered_scratch);
    vkv_buffer *bufs[] = {c->ids, c->pos, c->x, c->xn, c->q, c->q2, c->k, c->k2, c->v, c->attn, c->proj,
                          c->gate, c->up, c->scratch, c->out_rows, c->logits, c->logits_host};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) vkv_buffer_destroy(gpu, bufs[i]);
    free(c);
}

vkv_gpu *vkv_ctx_gpu(const vkv_ctx *c) { return c->gpu; }
uint32_t vkv_ctx_n_past(const vkv_ctx *c) { return c->n_past; }
uint32_t vkv_ctx_n_ctx(const vkv_ctx *c) { return c->p.n_ctx; }
static void free_tiers(vkv_ctx *c, tiered_layer *t)
{
    vkv_buffer *tb[] = {t->k, t->v, t->meta, t->pos, t->w, t->vhat};
    for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) vkv_buffer_destroy(c->gpu, tb[i]);
    memset(t, 0, sizeof *t);
}

vkv_status vkv_ctx_reset(vkv_ctx *c)
{
    const vkv_hparams *hp = &c->m->hp;
    uint64_t cache_bytes = vkv_kv_cache_bytes(c->p.kv_type, hp->n_head_kv, c->p.n_ctx, hp->head_dim);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if (!c->tiers[l].on) continue;
        free_tiers(c, &c->tiers[l]);
        vkv_status st;
        if ((st = make(c->gpu, cache_bytes, VKV_MEM_DEVICE, "the K cache", &c->k_cache[l])) ||
            (st = make(c->gpu, cache_bytes, VKV_MEM_DEVICE, "the V cache", &c->v_cache[l])))
            return st;
    }
    c->n_past = 0;
    c->n_ctx0 = 0;
    return VKV_OK;
}

vkv_status vkv_ctx_truncate(vkv_ctx *c, uint32_t n)
{
    if (n > c->n_past) return vkv_error(VKV_ERR_ARG, "cannot truncate %u tokens to %u", c->n_past, n);
    if (c->n_ctx0) return vkv_error(VKV_ERR_ARG, "cannot truncate a compressed cache");
    c->n_past = n;
    return VKV_OK;
}

uint32_t vkv_ctx_n_compressed_ctx(const vkv_ctx *c) { return c->n_ctx0; }

vkv_status vkv_ctx_set_materialized(vkv_ctx *c, bool materialized)
{
    if (c->n_ctx0 && materialized != c->materialized)
        return vkv_error(VKV_ERR_ARG, "choose the attention path before compressing");
    c->materialized = materialized;
    return VKV_OK;
}

vkv_status vkv_ctx_compress_layer(vkv_ctx *c, uint32_t layer, const vkv_layer_compression *lc)
{
    const vkv_hparams *hp = &c->m->hp;
    vkv_gpu *gpu = c->gpu;
    uint32_t H = hp->n_head_kv, hd = hp->head_dim, n = c->n_past;
    if (layer >= hp->n_layer) return vkv_error(VKV_ERR_ARG, "layer %u does not exist", layer);
    if (c->tiers[layer].on) return vkv_error(VKV_ERR_ARG, "layer %u is already compressed", layer);
    if (c->n_ctx0 && c->n_ctx0 != n)
        return vkv_error(VKV_ERR_ARG, "layers must be compressed at the same context length (%u, now %u)", c->n_ctx0, n);
    uint32_t cap_new = c->p.n_ctx - n; /* room for every token still to come */
    vkv_tier_head *meta = calloc(H, sizeof *meta);
    if (!meta) return vkv_error(VKV_ERR_OOM, "out of host memory");
    tiered_layer t = {.on = true};
    uint64_t k_rows = 0, v_rows = 0, p_entries = 0;
    for (uint32_t h = 0; h < H; h++) {
        if (lc->n_ret[h] + lc->n_apx[h] > n) {
            free(meta);
            return vkv_error(VKV_ERR_ARG, "layer %u head %u keeps %u + %u of %u tokens", layer, h, lc->n_ret[h],
                             lc->n_apx[h], n);
        }
        meta[h] = (vkv_tier_head){(uint32_t)k_rows, (uint32_t)v_rows, (uint32_t)p_entries, lc->n_ret[h], lc->n_apx[h], {0}};
        k_rows += lc->n_ret[h] + lc->n_apx[h] + cap_new;
        v_rows += lc->n_ret[h] + cap_new;
        p_entries += lc->n_ret[h] + lc->n_apx[h];
        t.n_ret_total += lc->n_ret[h];
        t.n_apx_total += lc->n_apx[h];
        if (lc->n_apx[h] > t.max_apx) t.max_apx = lc->n_apx[h];
        if (lc->n_ret[h] + lc->n_apx[h] > t.max_comp) t.max_comp = lc->n_ret[h] + lc->n_apx[h];
    }
    t.k_rows = k_rows ? k_rows : 1;
    t.v_rows = v_rows ? v_rows : 1;
    t.p_entries = p_entries ? p_entries : 1;
    uint64_t rb = (c->p.kv_type == VKV_F16 ? 2ull : 4ull) * hd;
    vkv_vector_geom g = {c->p.kv_type, H, hd, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX};
    vkv_status st;
    if ((st = make(gpu, rb * t.k_rows, VKV_MEM_DEVICE, "the compressed K cache", &t.k)) ||
        (st = make(gpu, rb * t.v_rows, VKV_MEM_DEVICE, "the compressed V cache", &t.v)) ||
        (st = make(gpu, sizeof *meta * H, VKV_MEM_DEVICE, "tier metadata", &t.meta)) ||
        (st = vkv_buffer_upload(gpu, t.meta, 0, meta, sizeof *meta * H)) ||
        (st = make(gpu, 4ull * t.p_entries, VKV_MEM_DEVICE, "tier positions", &t.pos)))
        goto error;
    uint64_t wb = 4ull * H * hd * hd;
    if (t.n_apx_total) {
        if (!lc->w) {
            st = vkv_error(VKV_ERR_ARG, "layer %u approximates tokens but has no OLS map", layer);
            goto error;
        }
        if ((st = make(gpu, wb, VKV_MEM_DEVICE, "the OLS maps", &t.w)) || (st = vkv_buffer_upload(gpu, t.w, 0, lc->w, wb)))
            goto error;
    }
    if (!c->w_zero && ((st = make(gpu, wb, VKV_MEM_DEVICE, "an empty map", &c->w_zero)) ||
                       (st = vkv_buffer_fill(gpu, c->w_zero, 0, wb, 0))))
        goto error;
    uint64_t sb = vkv_tiered_attn_scratch_bytes(VKV_ATTN_DECODE_MAX_Q, hp->n_head, hd, c->p.n_ctx);
    if (sb && !c->tiered_scratch && (st = make(gpu, sb, VKV_MEM_DEVICE, "tiered attention scratch", &c->tiered_scratch)))
        goto error;
    if (c->materialized && (st = make(gpu, 4ull * t.k_rows * hd, VKV_MEM_DEVICE, "rebuilt values", &t.vhat))) goto error;
    if ((st = vkv_cmd_begin(gpu))) goto error;
    st = vkv_op_kv_compact(gpu, &g, V(c->k_cache[layer]), V(c->v_cache[layer]), c->p.n_ctx, n, lc->tiers, V(t.meta),
                           V(t.k), t.k_rows, V(t.v), t.v_rows, V(t.pos), t.p_entries);
    if (!st && c->materialized)
        st = vkv_op_vector_materialize(gpu, &g, V(t.k), t.k_rows, V(t.meta), V(t.pos), t.p_entries,
                                       t.w ? V(t.w) : V(c->w_zero), V(c->m->rope_inv_freq), t.max_apx, V(t.vhat));
    if (st) {
        st = vkv_cmd_abort(gpu, st);
        goto error;
    }
    if ((st = vkv_cmd_submit(gpu))) goto error;
    free(meta);
    /* The plain cache of this layer is no longer needed: free it for real. */
    vkv_buffer_destroy(gpu, c->k_cache[layer]);
    vkv_buffer_destroy(gpu, c->v_cache[layer]);
    c->k_cache[layer] = c->v_cache[layer] = NULL;
    c->tiers[layer] = t;
    c->n_ctx0 = n;
    return VKV_OK;
error:
    free(meta);
    free_tiers(c, &t);
    return st;
}

vkv_kv_memory vkv_ctx_kv_memory(const vkv_ctx *c)
{
    const vkv_hparams *hp = &c->m->hp;
    uint64_t rb = (c->p.kv_type == VKV_F16 ? 2ull : 4ull) * hp->head_dim;
    vkv_kv_memory mem = {0};
    uint32_t n = c->n_ctx0 ? c->n_ctx0 : c->n_past;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const tiered_layer *t = &c->tiers[l];
        mem.uncompressed_context += 2 * rb * hp->n_head_kv * n;
        if (!t->on) {
            mem.k_retained += rb * hp->n_head_kv * n;
            mem.v_retained += rb * hp->n_head_kv * n;
            continue;
        }
        mem.k_retained += rb * t->n_ret_total;
        mem.v_retained += rb * t->n_ret_total;
        mem.k_approximated += rb * t->n_apx_total;
        mem.appended_capacity += 2 * rb * hp->n_head_kv * (uint64_t)(c->p.n_ctx - c->n_ctx0);
        if (t->w) mem.w_bytes += vkv_buffer_size(t->w);
    }
    return mem;
}
uint64_t vkv_ctx_kv_bytes(const vkv_ctx *c)
{
    const vkv_hparams *hp = &c->m->hp;
    uint64_t total = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const tiered_layer *t = &c->tiers[l];
        if (t->on) total += vkv_buffer_size(t->k) + vkv_buffer_size(t->v);
        else total += 2ull * vkv_kv_cache_bytes(c->p.kv_type, hp->n_head_kv, c->p.n_ctx, hp->head_dim);
    }
    return total;
}


static vkv_status matmul(vkv_ctx *c, const vkv_weight *w, vkv_view x, uint32_t n, vkv_view y)
{
    return vkv_op_matmul(c->gpu, VKV_MATMUL_AUTO, w->type, W(w), w->rows, w->cols, x, n, y);
}

/* Records the whole forward of n tokens at positions n_past.. (ids and
 * positions already written). n_out rows starting at out_row get logits. */
static vkv_status record_chunk(vkv_ctx *c, uint32_t n, uint32_t out_row, uint32_t n_out)
{
    const vkv_model *m = c->m;
    const vkv_hparams *hp = &m->hp;
    vkv_gpu *gpu = c->gpu;
    vkv_status st;
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    bool kv_f16 = c->p.kv_type == VKV_F16;
    vkv_rope_params rp = vkv_model_rope_params(m);
    vkv_attn_params ap = {.n_q = n, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv, .head_dim = hp->head_dim,
                          .n_ctx_max = c->p.n_ctx, .n_kv = c->n_past + n, .pos0 = c->n_past,
                          .scale = 1.0f / sqrtf((float)hp->head_dim), .kv_type = c->p.kv_type};

    if ((st = vkv_op_get_rows(gpu, m->tok_embd.type, W(&m->tok_embd), hp->n_vocab, hp->n_embd, V(c->ids), n, V(c->x))))
        return st;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const vkv_layer_weights *L = &m->layers[l];
        if ((st = vkv_op_rms_norm(gpu, V(c->x), W(&L->attn_norm), n, hp->n_embd, hp->rms_eps, V(c->xn))) ||
            (st = matmul(c, &L->wq, V(c->xn), n, V(c->q))) || (st = matmul(c, &L->wk, V(c->xn), n, V(c->k))) ||
            (st = matmul(c, &L->wv, V(c->xn), n, V(c->v))))
            return st;
        if (hp->has_qkv_bias &&
            ((st = vkv_op_add_bias(gpu, V(c->q), W(&L->bq), n, q_dim, V(c->q))) ||
             (st = vkv_op_add_bias(gpu, V(c->k), W(&L->bk), n, kv_dim, V(c->k))) ||
             (st = vkv_op_add_bias(gpu, V(c->v), W(&L->bv), n, kv_dim, V(c->v)))))
            return st;
        const vkv_buffer *q_in = c->q, *k_in = c->k;
        if (hp->has_qk_norm) {
            if ((st = vkv_op_rms_norm(gpu, V(c->q), W(&L->q_norm), n * hp->n_head, hp->head_dim, hp->rms_eps, V(c->q2))) ||
                (st = vkv_op_rms_norm(gpu, V(c->k), W(&L->k_norm), n * hp->n_head_kv, hp->head_dim, hp->rms_eps, V(c->k2))))
                return st;
            q_in = c->q2;
            k_in = c->k2;
        }
        if (c->kv_hook && (st = c->kv_hook(c->kv_hook_user, gpu, l, V(k_in), V(c->v), n, c->n_past))) return st;
        /* rope writes the buffer it did not read from */
        vkv_buffer *q_out = q_in == c->q ? c->q2 : c->q, *k_out = k_in == c->k ? c->k2 : c->k;
        if ((st = vkv_op_rope(gpu, &rp, V(q_in), n, hp->n_head, V(c->pos), V(m->rope_inv_freq), V(q_out))) ||
            (st = vkv_op_rope(gpu, &rp, V(k_in), n, hp->n_head_kv, V(c->pos), V(m->rope_inv_freq), V(k_out))))
            return st;
        const tiered_layer *T = &c->tiers[l];
        if (T->on) {
            uint32_t n_new0 = c->n_past - c->n_ctx0;
            vkv_vector_geom g = {c->p.kv_type, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX};
            vkv_tiered_attn ta = {n, hp->n_head, n_new0, ap.scale, !c->materialized, T->max_comp,
                                  c->tiered_scratch ? V(c->tiered_scratch) : (vkv_view){0}, V(c->w_zero), T->max_apx};
            const vkv_buffer *w_or_vhat = c->materialized ? T->vhat : T->w ? T->w : c->w_zero;
            if ((st = vkv_op_kv_store_tiered(gpu, kv_f16, false, V(k_out), n, hp->n_head_kv, hp->head_dim, V(T->k),
                                             T->k_rows, V(T->meta), n_new0)) ||
                (st = vkv_op_kv_store_tiered(gpu, kv_f16, true, V(c->v), n, hp->n_head_kv, hp->head_dim, V(T->v),
                                             T->v_rows, V(T->meta), n_new0)) ||
                (st = vkv_op_attention_tiered(gpu, &g, &ta, V(q_out), V(T->k), T->k_rows, V(T->v), T->v_rows, V(T->meta),
                                              V(T->pos), T->p_entries, V(w_or_vhat), V(m->rope_inv_freq), V(c->attn))))
                return st;
        } else if ((st = vkv_op_kv_store(gpu, kv_f16, V(k_out), n, hp->n_head_kv, hp->head_dim, V(c->k_cache[l]),
                                         c->p.n_ctx, c->n_past)) ||
                   (st = vkv_op_kv_store(gpu, kv_f16, V(c->v), n, hp->n_head_kv, hp->head_dim, V(c->v_cache[l]),
                                         c->p.n_ctx, c->n_past)) ||
                   (st = vkv_op_attention(gpu, VKV_ATTN_AUTO, &ap, V(q_out), V(c->k_cache[l]), V(c->v_cache[l]),
                                          V(c->scratch), V(c->attn))))
            return st;
        /* After this chunk's keys are in the cache: scorers may attend with
         * the chunk's queries over everything they see. */
        if (c->q_hook && (st = c->q_hook(c->q_hook_user, gpu, l, V(q_out), n, c->n_past))) return st;
        if ((st = matmul(c, &L->wo, V(c->attn), n, V(c->proj))) ||
            (st = vkv_op_add(gpu, V(c->x), V(c->proj), n * hp->n_embd, V(c->x))) ||
            (st = vkv_op_rms_norm(gpu, V(c->x), W(&L->ffn_norm), n, hp->n_embd, hp->rms_eps, V(c->xn))) ||
            (st = matmul(c, &L->w_gate, V(c->xn), n, V(c->gate))) || (st = matmul(c, &L->w_up, V(c->xn), n, V(c->up))) ||
            (st = vkv_op_silu_mul(gpu, V(c->gate), V(c->up), n * hp->n_ff, V(c->gate))) ||
            (st = matmul(c, &L->w_down, V(c->gate), n, V(c->proj))) ||
            (st = vkv_op_add(gpu, V(c->x), V(c->proj), n * hp->n_embd, V(c->x))))
            return st;
    }
    if (!n_out) return VKV_OK;
    uint64_t row = 4ull * hp->n_embd;
    if ((st = vkv_cmd_copy(gpu, c->x, out_row * row, c->out_rows, 0, n_out * row)) ||
        (st = vkv_op_rms_norm(gpu, V(c->out_rows), W(&m->output_norm), n_out, hp->n_embd, hp->rms_eps, V(c->out_rows))) ||
        (st = matmul(c, &m->output, V(c->out_rows), n_out, V(c->logits))) ||
        (st = vkv_cmd_copy(gpu, c->logits, 0, c->logits_host, 0, 4ull * n_out * hp->n_vocab)))
        return st;
    return VKV_OK;
}

vkv_status vkv_ctx_eval(vkv_ctx *c, const int32_t *ids, uint32_t n, bool all_logits, float *logits)
{
    const vkv_hparams *hp = &c->m->hp;
    if (n == 0) return vkv_error(VKV_ERR_ARG, "no tokens to evaluate");
    if ((uint64_t)c->n_past + n > c->p.n_ctx)
        return vkv_error(VKV_ERR_ARG, "%u tokens after %u do not fit the %u-token context", n, c->n_past, c->p.n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= hp->n_vocab)
            return vkv_error(VKV_ERR_ARG, "token id %d at index %u is outside the vocabulary (0..%u)", ids[i], i,
                             hp->n_vocab - 1);
    for (uint32_t done = 0; done < n;) {
        uint32_t chunk = n - done < c->p.n_batch ? n - done : c->p.n_batch;
        bool last = done + chunk == n;
        uint32_t n_out = !logits ? 0 : all_logits ? chunk : last ? 1 : 0;
        uint32_t out_row = all_logits ? 0 : chunk - 1;
        int32_t *id_dst = vkv_buffer_map(c->ids), *pos_dst = vkv_buffer_map(c->pos);
        memcpy(id_dst, ids + done, 4ull * chunk);
        for (uint32_t i = 0; i < chunk; i++) pos_dst[i] = (int32_t)(c->n_past + i);
        vkv_status st = vkv_cmd_begin(c->gpu);
        if (st) return st;
        if ((st = record_chunk(c, chunk, out_row, n_out))) return vkv_cmd_abort(c->gpu, st);
        if ((st = vkv_cmd_submit(c->gpu))) return st;
        if (n_out) {
            const float *src = vkv_buffer_map(c->logits_host);
            float *dst = all_logits ? logits + (size_t)done * hp->n_vocab : logits;
            memcpy(dst, src, 4ull * n_out * hp->n_vocab);
        }
        c->n_past += chunk;
        done += chunk;
    }
    return VKV_OK;
}
