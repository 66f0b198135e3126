/* The forward pass: one recording per chunk of tokens.
 *
 * Per layer, for a chunk of n tokens (activations are row-major [n, width]):
 *   xn = rms_norm(x) * attn_norm                       [n, n_embd]
 *   q, k, v = xn Wq^T (+bq), xn Wk^T (+bk), xn Wv^T (+bv)
 *   (qwen3) q, k = per-head rms_norm * q_norm / k_norm
 *   q, k = rope(q), rope(k) at positions n_past..       [n, heads, head_dim]
 *   layer l's KV cache += k, v; a = attention(q, it)     [n, n_head, head_dim]
 *     (kv/kv_cache.h: the plain or the tiered layout, and its kernel)
 *   x = x + a Wo^T
 *   x = x + (silu(xn Wg^T) * (xn Wu^T)) Wd^T   with xn = rms_norm(x) * ffn_norm
 * then logits = rms_norm(x) * output_norm . Wout^T for the rows asked for. */
#include "infer/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vkv_ctx {
    vkv_gpu *gpu;
    const vkv_model *m;
    vkv_ctx_params p;
    uint32_t n_past;
    vkv_kv_cache *kv;     /* the KV cache: its layouts, W and attention kernels */
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
    vkv_buffer *out_rows; /* [n_batch, n_embd] rows whose logits are wanted */
    vkv_buffer *logits;   /* [n_batch, n_vocab] device */
    vkv_buffer *logits_host; /* [n_batch, n_vocab] host-visible readback */
    vkv_kv_hook kv_hook;
    void *kv_hook_user;
    vkv_q_hook q_hook;
    void *q_hook_user;
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

vkv_kv_cache *vkv_ctx_kv(vkv_ctx *c) { return c->kv; }
vkv_view vkv_ctx_k_cache(const vkv_ctx *c, uint32_t layer) { return vkv_kv_k_cache(c->kv, layer); }
vkv_view vkv_ctx_v_cache(const vkv_ctx *c, uint32_t layer) { return vkv_kv_v_cache(c->kv, layer); }
vkv_dtype vkv_ctx_k_type(const vkv_ctx *c) { return vkv_kv_k_type(c->kv); }
vkv_dtype vkv_ctx_v_type(const vkv_ctx *c) { return vkv_kv_v_type(c->kv); }
vkv_dtype vkv_ctx_tier_k_type(const vkv_ctx *c) { return c->p.k_type; }
vkv_dtype vkv_ctx_tier_v_type(const vkv_ctx *c) { return c->p.v_type; }

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
    if (!vkv_kv_type_ok(p.k_type)) p.k_type = VKV_F16;
    if (!vkv_kv_type_ok(p.v_type)) p.v_type = VKV_F16;
    if (!p.n_kv_slots || p.n_kv_slots > p.n_ctx) p.n_kv_slots = p.n_ctx;
    return p;
}

/* The context's buffers besides the KV cache (which holds the attention
 * scratch too), in one list for vkv_ctx_create and vkv_ctx_plan_memory. */
typedef struct ctx_buffer {
    vkv_buffer **dst;
    uint64_t bytes;
    vkv_mem_kind kind;
    const char *what;
} ctx_buffer;
#define CTX_N_BUFFERS 16

static void ctx_buffers(vkv_ctx *c, const vkv_hparams *hp, ctx_buffer out[CTX_N_BUFFERS])
{
    uint64_t B = c->p.n_batch;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim, kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
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
    vkv_dtype pk, pv;
    vkv_kv_plain_types(c.p.k_type, c.p.v_type, c.p.compress, &pk, &pv);
    m.kv_bytes = vkv_kv_plan_cache_bytes(hp, c.p.n_kv_slots, pk, pv);
    m.scratch_bytes = vkv_kv_plan_scratch_bytes(hp, c.p.n_kv_slots);
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
    vkv_status st = vkv_kv_create(gpu, m, c->p.n_ctx, c->p.n_kv_slots, c->p.k_type, c->p.v_type, c->p.compress, &c->kv);
    if (st) goto error;
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
    vkv_kv_free(c->kv);
    vkv_buffer *bufs[] = {c->ids, c->pos, c->x, c->xn, c->q, c->q2, c->k, c->k2, c->v, c->attn, c->proj,
                          c->gate, c->up, c->out_rows, c->logits, c->logits_host};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) vkv_buffer_destroy(gpu, bufs[i]);
    free(c);
}

vkv_gpu *vkv_ctx_gpu(const vkv_ctx *c) { return c->gpu; }
uint32_t vkv_ctx_n_past(const vkv_ctx *c) { return c->n_past; }
uint32_t vkv_ctx_n_ctx(const vkv_ctx *c) { return c->p.n_ctx; }
uint32_t vkv_ctx_n_batch(const vkv_ctx *c) { return c->p.n_batch; }
uint32_t vkv_ctx_kv_slots(const vkv_ctx *c) { return c->p.n_kv_slots; }
vkv_status vkv_ctx_reset(vkv_ctx *c)
{
    vkv_status st = vkv_kv_reset(c->kv);
    if (st) return st;
    c->n_past = 0;
    return VKV_OK;
}

vkv_status vkv_ctx_truncate(vkv_ctx *c, uint32_t n)
{
    if (n > c->n_past) return vkv_error(VKV_ERR_ARG, "cannot truncate %u tokens to %u", c->n_past, n);
    if (vkv_kv_n_compressed_ctx(c->kv)) return vkv_error(VKV_ERR_ARG, "cannot truncate a compressed cache");
    c->n_past = n;
    return VKV_OK;
}

vkv_status vkv_ctx_set_materialized(vkv_ctx *c, bool materialized) { return vkv_kv_set_materialized(c->kv, materialized); }
vkv_kv_memory vkv_ctx_kv_memory(const vkv_ctx *c) { return vkv_kv_memory_of(c->kv, c->n_past); }
uint64_t vkv_ctx_kv_bytes(const vkv_ctx *c) { return vkv_kv_bytes(c->kv); }

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
    vkv_rope_params rp = vkv_model_rope_params(m);

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
        if ((st = vkv_kv_append_attend(c->kv, l, V(q_out), V(k_out), V(c->v), n, c->n_past, V(c->attn)))) return st;
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
