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
 * then logits = rms_norm(x) * output_norm . Wout^T for the rows asked for.
 *
 * The batched decode (vkv_ctx_eval_batch) runs the same layer body over n
 * rows that belong to n sequences, one token each, and the batched prefill
 * (vkv_ctx_eval_chunks) over several sequences' chunks of prompt: everything
 * but attention is row-wise, and attention (with the hooks) runs per
 * sequence on its rows. */
#include "infer/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_pages.h"
#include "vk/ops_attn.h"

_Static_assert(VKV_STEP_MAX <= VKV_KV_STEP_MAX, "a step's sequences must fit one paged step");

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
    vkv_buffer *stage;    /* [4, stage_slot bytes]: rows of q, k, v, attn at aligned offsets */
    vkv_buffer *paged_table; /* host-visible uint32: a paged step's tables, every layer's (vkv_ctx_params.step_seqs) */
    vkv_buffer *paged_part;  /* a paged step's attention partials (paged_part_bytes of them) */
    uint64_t paged_part_bytes;
    uint32_t paged_used;     /* words of paged_table the forward being recorded has written */
    bool borrowed;        /* the buffers above are scratch_from's (vkv_ctx_params) */
    uint32_t buffer_rows; /* rows the buffers above hold: their owner's n_batch */
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
    if (p.scratch_from && p.n_batch > p.scratch_from->p.n_batch) p.n_batch = p.scratch_from->p.n_batch;
    /* a step's sequences are rows of the owner's buffers */
    if (p.scratch_from) p.step_seqs = 0;
    if (p.step_seqs > p.n_batch) p.step_seqs = p.n_batch;
    if (p.step_seqs > VKV_STEP_MAX) p.step_seqs = VKV_STEP_MAX;
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
#define CTX_N_BUFFERS 19

/* Bytes of one staging slot: the widest of a q, k, v or attn row, padded to
 * 256 bytes (the largest minStorageBufferOffsetAlignment Vulkan allows), so
 * the size needs no device. */
static uint64_t stage_slot(const vkv_hparams *hp)
{
    uint64_t q = 4ull * hp->n_head * hp->head_dim, kv = 4ull * hp->n_head_kv * hp->head_dim;
    return ((q > kv ? q : kv) + 255) & ~255ull;
}

/* The most a paged step's partials take: beyond it, a step's sequences of
 * several splits are paged in several dispatches (vkv_kv_append_attend_paged). */
#define PAGED_PART_MAX_BYTES (64ull << 20)

/* A paged step's buffers for p (vkv_ctx_params.step_seqs): table words for
 * every layer, and partials' bytes (at least one sequence's). Zero without
 * paged steps. */
static void paged_sizes(const vkv_hparams *hp, const vkv_ctx_params *p, uint64_t *words, uint64_t *part)
{
    *words = *part = 0;
    if (!p->step_seqs) return;
    const uint32_t n = p->step_seqs, ctx = p->step_ctx ? p->step_ctx : p->n_ctx;
    *words = hp->n_layer * vkv_paged_table_words(n, ctx, VKV_KV_PAGE_SHIFT);
    const vkv_attn_params ap = {.n_q = 1, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv, .head_dim = hp->head_dim};
    const uint64_t one = vkv_paged_scratch_bytes(&ap, 1, ctx), all = vkv_paged_scratch_bytes(&ap, n, ctx);
    *part = all < PAGED_PART_MAX_BYTES ? all : one > PAGED_PART_MAX_BYTES ? one : PAGED_PART_MAX_BYTES;
}

static void ctx_buffers(vkv_ctx *c, const vkv_hparams *hp, ctx_buffer out[CTX_N_BUFFERS])
{
    uint64_t B = c->p.n_batch, paged_words, paged_part;
    paged_sizes(hp, &c->p, &paged_words, &paged_part);
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
        {&c->stage, 4 * stage_slot(hp), VKV_MEM_DEVICE, "batch row staging"},
        {&c->paged_table, 4 * paged_words, VKV_MEM_HOST, "paged step tables"},
        {&c->paged_part, paged_part, VKV_MEM_DEVICE, "paged attention partials"},
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
    m.largest_kv_buffer = vkv_kv_plan_largest_buffer(hp, c.p.n_kv_slots, pk, pv);
    m.scratch_bytes = vkv_kv_plan_scratch_bytes(hp, c.p.n_kv_slots);
    if (c.p.scratch_from) return m; /* borrowed: the owner counts them */
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
    const vkv_ctx *owner = c->p.scratch_from;
    if (owner && (owner->gpu != gpu || owner->m != m)) {
        st = vkv_error(VKV_ERR_ARG, "a context borrows scratch only from one of the same device and model");
        goto error;
    }
    if (c->p.pages && (c->p.compress || c->p.n_kv_slots != c->p.n_ctx || c->p.k_type != vkv_kv_pages_k_type(c->p.pages) ||
                       c->p.v_type != vkv_kv_pages_v_type(c->p.pages))) {
        st = vkv_error(VKV_ERR_ARG, "a paged cache is plain, of n_ctx slots and of its pool's row types");
        goto error;
    }
    st = c->p.pages ? vkv_kv_create_paged(c->p.pages, m, c->p.n_ctx, &c->kv)
                    : vkv_kv_create(gpu, m, c->p.n_ctx, c->p.n_kv_slots, c->p.k_type, c->p.v_type, c->p.compress, &c->kv);
    if (st) goto error;
    ctx_buffer bufs[CTX_N_BUFFERS], owned[CTX_N_BUFFERS];
    ctx_buffers(c, hp, bufs);
    if (owner) {
        /* the same list over a copy of the owner: its buffers, slot for slot */
        vkv_ctx o = *owner;
        ctx_buffers(&o, hp, owned);
        for (int i = 0; i < CTX_N_BUFFERS; i++) *bufs[i].dst = *owned[i].dst;
        c->borrowed = true;
        c->buffer_rows = owner->buffer_rows;
        c->paged_part_bytes = owner->paged_part_bytes;
    } else {
        c->buffer_rows = c->p.n_batch;
        for (int i = 0; i < CTX_N_BUFFERS; i++)
            if ((st = make(gpu, bufs[i].bytes, bufs[i].kind, bufs[i].what, bufs[i].dst))) goto error;
        uint64_t words;
        paged_sizes(hp, &c->p, &words, &c->paged_part_bytes);
    }
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
    if (!c->borrowed) {
        ctx_buffer bufs[CTX_N_BUFFERS];
        ctx_buffers(c, &c->m->hp, bufs);
        for (int i = 0; i < CTX_N_BUFFERS; i++) vkv_buffer_destroy(gpu, *bufs[i].dst);
    }
    free(c);
}

vkv_gpu *vkv_ctx_gpu(const vkv_ctx *c) { return c->gpu; }
uint32_t vkv_ctx_n_past(const vkv_ctx *c) { return c->n_past; }
uint32_t vkv_ctx_n_ctx(const vkv_ctx *c) { return c->p.n_ctx; }
uint32_t vkv_ctx_n_batch(const vkv_ctx *c) { return c->p.n_batch; }
uint32_t vkv_ctx_n_compressed(const vkv_ctx *c) { return vkv_kv_n_compressed_ctx(c->kv); }
uint32_t vkv_ctx_kv_slots(const vkv_ctx *c) { return c->p.n_kv_slots; }
vkv_status vkv_ctx_reset(vkv_ctx *c)
{
    vkv_status st = vkv_kv_reset(c->kv);
    if (st) return st;
    c->n_past = 0;
    return VKV_OK;
}

vkv_status vkv_ctx_copy_prefix(vkv_ctx *c, const vkv_ctx *src, uint32_t n)
{
    if (n > src->n_past) return vkv_error(VKV_ERR_ARG, "a %u-token prefix of a %u-token sequence", n, src->n_past);
    if (n > c->p.n_ctx) return vkv_error(VKV_ERR_ARG, "a %u-token prefix does not fit a %u-token context", n, c->p.n_ctx);
    vkv_status st = vkv_ctx_reset(c);
    if (!st) st = vkv_kv_copy_prefix(c->kv, src->kv, n);
    if (st) return st;
    c->n_past = n;
    return VKV_OK;
}

vkv_status vkv_ctx_copy_compressed(vkv_ctx *c, const vkv_ctx *src)
{
    const uint32_t n = vkv_kv_n_compressed_ctx(src->kv);
    if (!n || n > src->n_past) return vkv_error(VKV_ERR_ARG, "the source sequence holds no compressed context");
    if (n > c->p.n_ctx) return vkv_error(VKV_ERR_ARG, "a %u-token context does not fit a %u-token one", n, c->p.n_ctx);
    vkv_status st = vkv_ctx_reset(c);
    if (!st) st = vkv_kv_copy_compressed(c->kv, src->kv);
    if (st) return st;
    c->n_past = n;
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

/* What one recording computes: n rows of activations in s's buffers (the
 * context that records; its own or borrowed), owned by n_seq sequences.
 * Sequence i owns the n_tok[i] rows from row[i], at positions
 * seqs[i]->n_past..: one sequence with all n rows (a chunk of vkv_ctx_eval),
 * n sequences of one row each (the batched decode), or sequences' chunks one
 * after the other, each starting at an aligned row (the batched prefill; the
 * rows between are padding nobody reads). */
typedef struct fwd_batch {
    vkv_ctx *s;
    vkv_ctx *const *seqs;
    uint32_t n_seq, n;
    uint32_t row[VKV_STEP_MAX], n_tok[VKV_STEP_MAX]; /* [n_seq] (a batched prefill: at most VKV_BATCH_MAX) */
    vkv_matmul_path path;     /* of every matmul (AUTO for a chunk: its own choice) */
    /* The rows that get logits: n_out runs, run j the out_len[j] rows from
     * out_row[j], gathered in order. */
    uint32_t n_out_runs, out_row[VKV_BATCH_MAX], out_len[VKV_BATCH_MAX];
} fwd_batch;

static vkv_status matmul(const fwd_batch *f, const vkv_weight *w, vkv_view x, uint32_t n, vkv_view y)
{
    return vkv_op_matmul(f->s->gpu, f->path, w->type, W(w), w->rows, w->cols, x, n, y);
}

/* The storage alignment s's recordings keep: the device's, or with
 * stage_rows the largest Vulkan allows (a test posing as such a device). */
static uint64_t storage_alignment(const vkv_ctx *s)
{
    return s->p.stage_rows ? 256 : vkv_gpu_caps(s->gpu)->min_storage_buffer_offset_alignment;
}

/* Rows [r, r + n_rows) of b (rows of `width` floats) as a view the ops
 * accept: in place when the offset is a multiple of the storage alignment,
 * else `slot` of the staging buffer, which gets a copy of the row when `load`
 * (an output is copied back by unstage); with stage_rows every single row
 * but row 0 is staged. Only a single row can take a slot: a chunk's rows
 * start at row 0, and the batched prefill starts every chunk at an aligned
 * row (chunk_rows). */
static vkv_status row_view(vkv_ctx *s, vkv_buffer *b, uint32_t width, uint32_t r, uint32_t n_rows, uint32_t slot,
                           bool load, vkv_view *out)
{
    const uint64_t off = 4ull * width * r;
    const bool misaligned = off % storage_alignment(s) != 0;
    if (!misaligned && !(s->p.stage_rows && r > 0 && n_rows == 1)) {
        *out = (vkv_view){b, off};
        return VKV_OK;
    }
    if (n_rows != 1)
        return vkv_error(VKV_ERR_ARG, "forward: %u rows from row %u are not aligned for a view (only one row can be "
                         "staged)", n_rows, r);
    const uint64_t slot_off = slot * stage_slot(&s->m->hp);
    *out = (vkv_view){s->stage, slot_off};
    return load ? vkv_cmd_copy(s->gpu, b, off, s->stage, slot_off, 4ull * width * n_rows) : VKV_OK;
}

static vkv_status unstage(vkv_ctx *s, vkv_view staged, vkv_buffer *b, uint32_t width, uint32_t r, uint32_t n_rows)
{
    if (staged.buf != s->stage) return VKV_OK;
    return vkv_cmd_copy(s->gpu, s->stage, staged.offset, b, 4ull * width * r, 4ull * width * n_rows);
}

enum { SLOT_Q, SLOT_K, SLOT_V, SLOT_ATTN };

/* Layer l's cache and attention, sequence by sequence: keys and values
 * (q_in / k_in before RoPE, q_out / k_out after) of each sequence's rows go
 * to its cache, its hooks see its rows, and its attention lands in its rows
 * of attn. The kv hooks run before RoPE is recorded (kv_rope does it). */
static vkv_status kv_hooks(const fwd_batch *f, uint32_t l, vkv_buffer *k_in)
{
    const vkv_hparams *hp = &f->s->m->hp;
    const uint32_t kv_dim = hp->n_head_kv * hp->head_dim;
    vkv_status st;
    for (uint32_t i = 0; i < f->n_seq; i++) {
        vkv_ctx *c = f->seqs[i];
        if (!c->kv_hook) continue;
        const uint32_t r = f->row[i], n = f->n_tok[i];
        vkv_view k, v;
        if ((st = row_view(f->s, k_in, kv_dim, r, n, SLOT_K, true, &k)) ||
            (st = row_view(f->s, f->s->v, kv_dim, r, n, SLOT_V, true, &v)) ||
            (st = c->kv_hook(c->kv_hook_user, c->gpu, l, k, v, n, c->n_past)))
            return st;
    }
    return VKV_OK;
}

/* The sequences of a forward whose token goes through a paged step
 * (vkv_kv_append_attend_paged: one append and one attention dispatch for all
 * of them, whatever their lengths; a batched step's, or a batched prefill's
 * one-token chunks), when the recording context has its buffers
 * (vkv_ctx_params.step_seqs) and keeps rows unstaged: one token each, no
 * hooks (they see one sequence's rows at a time), a plain layer with room;
 * sequences whose caches have one row type go together, as many as the
 * step's table still has words for (every layer of the forward takes its
 * own). grouped[i] marks those done here; the rest, and a lone sequence,
 * take the per-sequence path. */
static vkv_status attend_paged(const fwd_batch *f, uint32_t l, vkv_buffer *q_out, vkv_buffer *k_out, bool *grouped)
{
    vkv_ctx *s = f->s;
    memset(grouped, 0, f->n_seq * sizeof *grouped);
    if (f->n_seq < 2 || s->p.stage_rows || !s->paged_part_bytes) return VKV_OK;
    const uint32_t cap = (uint32_t)(vkv_buffer_size(s->paged_table) / 4);
    bool joins[VKV_STEP_MAX];
    for (uint32_t i = 0; i < f->n_seq; i++) {
        const vkv_ctx *c = f->seqs[i];
        joins[i] = f->n_tok[i] == 1 && !c->kv_hook && !c->q_hook && vkv_kv_pageable(c->kv, l, c->n_past) &&
                   vkv_kv_paged_part_bytes(c->kv, c->n_past) <= s->paged_part_bytes;
    }
    for (uint32_t i = 0; i < f->n_seq; i++) {
        if (!joins[i] || grouped[i]) continue;
        vkv_kv_cache *kvs[VKV_STEP_MAX];
        uint32_t n_past[VKV_STEP_MAX], rows[VKV_STEP_MAX], members[VKV_STEP_MAX], n = 0;
        uint64_t words = 0;
        for (uint32_t j = i; j < f->n_seq; j++) {
            const vkv_ctx *c = f->seqs[j];
            if (!joins[j] || grouped[j] || !vkv_kv_same_group(c->kv, f->seqs[i]->kv)) continue;
            const uint64_t w = vkv_kv_paged_words(c->kv, c->n_past);
            if (s->paged_used + words + w > cap) continue;
            words += w;
            kvs[n] = c->kv;
            n_past[n] = c->n_past;
            rows[n] = f->row[j];
            members[n++] = j;
        }
        if (n < 2) continue;
        for (uint32_t g = 0; g < n; g++) grouped[members[g]] = true;
        vkv_status st = vkv_kv_append_attend_paged(kvs, n_past, rows, n, l, vkv_view_of(q_out), vkv_view_of(k_out),
                                                   vkv_view_of(s->v), vkv_view_of(s->attn), f->n, s->paged_table,
                                                   &s->paged_used, vkv_view_of(s->paged_part), s->paged_part_bytes);
        if (st) return st;
    }
    return VKV_OK;
}

static vkv_status attend(const fwd_batch *f, uint32_t l, vkv_buffer *q_out, vkv_buffer *k_out)
{
    vkv_ctx *s = f->s;
    const vkv_hparams *hp = &s->m->hp;
    const uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    bool grouped[VKV_STEP_MAX];
    vkv_status st = attend_paged(f, l, q_out, k_out, grouped);
    if (st) return st;
    for (uint32_t i = 0; i < f->n_seq; i++) {
        if (grouped[i]) continue;
        vkv_ctx *c = f->seqs[i];
        const uint32_t r = f->row[i], per = f->n_tok[i];
        vkv_view q, k, v, a;
        if ((st = row_view(s, q_out, q_dim, r, per, SLOT_Q, true, &q)) ||
            (st = row_view(s, k_out, kv_dim, r, per, SLOT_K, true, &k)) ||
            (st = row_view(s, s->v, kv_dim, r, per, SLOT_V, true, &v)) ||
            (st = row_view(s, s->attn, q_dim, r, per, SLOT_ATTN, false, &a)) ||
            (st = vkv_kv_append_attend(c->kv, l, q, k, v, per, c->n_past, a)))
            return st;
        /* After these keys are in the cache: scorers may attend with the
         * sequence's queries over everything they see. */
        if (c->q_hook && (st = c->q_hook(c->q_hook_user, c->gpu, l, q, per, c->n_past))) return st;
        if ((st = unstage(s, a, s->attn, q_dim, r, per))) return st;
    }
    return VKV_OK;
}

/* Rows of f that get logits. */
static uint32_t out_rows(const fwd_batch *f)
{
    uint32_t n = 0;
    for (uint32_t j = 0; j < f->n_out_runs; j++) n += f->out_len[j];
    return n;
}

/* Records the whole forward of f's rows (ids and positions already written
 * to f->s's buffers), and the logits of its output runs. */
static vkv_status record_forward(const fwd_batch *f)
{
    vkv_ctx *c = f->s;
    const uint32_t n = f->n;
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
            (st = matmul(f, &L->wq, V(c->xn), n, V(c->q))) || (st = matmul(f, &L->wk, V(c->xn), n, V(c->k))) ||
            (st = matmul(f, &L->wv, V(c->xn), n, V(c->v))))
            return st;
        if (hp->has_qkv_bias &&
            ((st = vkv_op_add_bias(gpu, V(c->q), W(&L->bq), n, q_dim, V(c->q))) ||
             (st = vkv_op_add_bias(gpu, V(c->k), W(&L->bk), n, kv_dim, V(c->k))) ||
             (st = vkv_op_add_bias(gpu, V(c->v), W(&L->bv), n, kv_dim, V(c->v)))))
            return st;
        vkv_buffer *q_in = c->q, *k_in = c->k;
        if (hp->has_qk_norm) {
            if ((st = vkv_op_rms_norm(gpu, V(c->q), W(&L->q_norm), n * hp->n_head, hp->head_dim, hp->rms_eps, V(c->q2))) ||
                (st = vkv_op_rms_norm(gpu, V(c->k), W(&L->k_norm), n * hp->n_head_kv, hp->head_dim, hp->rms_eps, V(c->k2))))
                return st;
            q_in = c->q2;
            k_in = c->k2;
        }
        if ((st = kv_hooks(f, l, k_in))) return st;
        /* rope writes the buffer it did not read from */
        vkv_buffer *q_out = q_in == c->q ? c->q2 : c->q, *k_out = k_in == c->k ? c->k2 : c->k;
        if ((st = vkv_op_rope(gpu, &rp, V(q_in), n, hp->n_head, V(c->pos), V(m->rope_inv_freq), V(q_out))) ||
            (st = vkv_op_rope(gpu, &rp, V(k_in), n, hp->n_head_kv, V(c->pos), V(m->rope_inv_freq), V(k_out))))
            return st;
        if ((st = attend(f, l, q_out, k_out))) return st;
        if ((st = matmul(f, &L->wo, V(c->attn), n, V(c->proj))) ||
            (st = vkv_op_add(gpu, V(c->x), V(c->proj), n * hp->n_embd, V(c->x))) ||
            (st = vkv_op_rms_norm(gpu, V(c->x), W(&L->ffn_norm), n, hp->n_embd, hp->rms_eps, V(c->xn))) ||
            (st = matmul(f, &L->w_gate, V(c->xn), n, V(c->gate))) || (st = matmul(f, &L->w_up, V(c->xn), n, V(c->up))) ||
            (st = vkv_op_silu_mul(gpu, V(c->gate), V(c->up), n * hp->n_ff, V(c->gate))) ||
            (st = matmul(f, &L->w_down, V(c->gate), n, V(c->proj))) ||
            (st = vkv_op_add(gpu, V(c->x), V(c->proj), n * hp->n_embd, V(c->x))))
            return st;
    }
    const uint32_t n_out = out_rows(f);
    if (!n_out) return VKV_OK;
    const uint64_t row = 4ull * hp->n_embd;
    for (uint32_t j = 0, gathered = 0; j < f->n_out_runs; gathered += f->out_len[j], j++)
        if ((st = vkv_cmd_copy(gpu, c->x, f->out_row[j] * row, c->out_rows, gathered * row, f->out_len[j] * row)))
            return st;
    if ((st = vkv_op_rms_norm(gpu, V(c->out_rows), W(&m->output_norm), n_out, hp->n_embd, hp->rms_eps, V(c->out_rows))) ||
        (st = matmul(f, &m->output, V(c->out_rows), n_out, V(c->logits))) ||
        (st = vkv_cmd_copy(gpu, c->logits, 0, c->logits_host, 0, 4ull * n_out * hp->n_vocab)))
        return st;
    return VKV_OK;
}

/* Records f and submits; the logits of its output runs, in order, copied to
 * `logits` ([rows, n_vocab]). */
static vkv_status run_forward(const fwd_batch *f, float *logits)
{
    vkv_ctx *c = f->s;
    vkv_status st = vkv_cmd_begin(c->gpu);
    if (st) return st;
    c->paged_used = 0;
    if ((st = record_forward(f))) return vkv_cmd_abort(c->gpu, st);
    if ((st = vkv_cmd_submit(c->gpu))) return st;
    const uint32_t n_out = out_rows(f);
    if (n_out && logits) memcpy(logits, vkv_buffer_map(c->logits_host), 4ull * n_out * c->m->hp.n_vocab);
    return VKV_OK;
}

static vkv_status check_ids(const vkv_hparams *hp, const int32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= hp->n_vocab)
            return vkv_error(VKV_ERR_ARG, "token id %d at index %u is outside the vocabulary (0..%u)", ids[i], i,
                             hp->n_vocab - 1);
    return VKV_OK;
}

vkv_status vkv_ctx_eval(vkv_ctx *c, const int32_t *ids, uint32_t n, bool all_logits, float *logits)
{
    const vkv_hparams *hp = &c->m->hp;
    if (n == 0) return vkv_error(VKV_ERR_ARG, "no tokens to evaluate");
    if ((uint64_t)c->n_past + n > c->p.n_ctx)
        return vkv_error(VKV_ERR_ARG, "%u tokens after %u do not fit the %u-token context", n, c->n_past, c->p.n_ctx);
    vkv_status st = check_ids(hp, ids, n);
    if (st) return st;
    for (uint32_t done = 0; done < n;) {
        uint32_t chunk = n - done < c->p.n_batch ? n - done : c->p.n_batch;
        bool last = done + chunk == n;
        uint32_t n_out = !logits ? 0 : all_logits ? chunk : last ? 1 : 0;
        uint32_t out_row = all_logits ? 0 : chunk - 1;
        int32_t *id_dst = vkv_buffer_map(c->ids), *pos_dst = vkv_buffer_map(c->pos);
        memcpy(id_dst, ids + done, 4ull * chunk);
        for (uint32_t i = 0; i < chunk; i++) pos_dst[i] = (int32_t)(c->n_past + i);
        const fwd_batch f = {.s = c, .seqs = &c, .n_seq = 1, .n = chunk, .row = {0}, .n_tok = {chunk},
                             .path = VKV_MATMUL_AUTO, .n_out_runs = n_out ? 1 : 0, .out_row = {out_row},
                             .out_len = {n_out}};
        float *dst = !n_out ? NULL : all_logits ? logits + (size_t)done * hp->n_vocab : logits;
        if ((st = run_forward(&f, dst))) return st;
        c->n_past += chunk;
        done += chunk;
    }
    return VKV_OK;
}

/* What a forward over several contexts needs: 1 to `most` distinct
 * contexts on ctxs[0]'s device and model, each with room for n_tok[i] more
 * tokens (n_tok NULL: one each). */
static vkv_status check_contexts(vkv_ctx *const *ctxs, const uint32_t *n_tok, uint32_t n, uint32_t most,
                                 const char *what)
{
    if (n == 0 || n > most) return vkv_error(VKV_ERR_ARG, "a %s takes 1 to %u sequences, not %u", what, most, n);
    for (uint32_t i = 0; i < n; i++) {
        const vkv_ctx *c = ctxs[i];
        if (c->gpu != ctxs[0]->gpu || c->m != ctxs[0]->m)
            return vkv_error(VKV_ERR_ARG, "sequence %u of the %s is on another device or model", i, what);
        for (uint32_t j = 0; j < i; j++)
            if (ctxs[j] == c) return vkv_error(VKV_ERR_ARG, "sequence %u of the %s repeats sequence %u", i, what, j);
        const uint32_t more = n_tok ? n_tok[i] : 1;
        if ((uint64_t)c->n_past + more > c->p.n_ctx)
            return vkv_error(VKV_ERR_ARG, "sequence %u of the %s: %u tokens after %u do not fit its %u-token context",
                             i, what, more, c->n_past, c->p.n_ctx);
    }
    return VKV_OK;
}

vkv_status vkv_ctx_eval_batch(vkv_ctx *const *ctxs, const int32_t *ids, uint32_t n, float *logits)
{
    vkv_status st = check_contexts(ctxs, NULL, n, VKV_STEP_MAX, "batched step");
    if (st) return st;
    vkv_ctx *s = ctxs[0];
    if (s->buffer_rows < n)
        return vkv_error(VKV_ERR_ARG, "%u sequences need a first context whose buffers hold %u rows (they hold %u)",
                         n, n, s->buffer_rows);
    if ((st = check_ids(&s->m->hp, ids, n))) return st;
    int32_t *id_dst = vkv_buffer_map(s->ids), *pos_dst = vkv_buffer_map(s->pos);
    memcpy(id_dst, ids, 4ull * n);
    for (uint32_t i = 0; i < n; i++) pos_dst[i] = (int32_t)ctxs[i]->n_past;
    /* MATVEC_COLS: each row bitwise the single-token decode's (which AUTO
     * sends to the matvec kernel); one row takes that kernel itself, the
     * faster of the two for a single column */
    const vkv_matmul_path path = n == 1 ? VKV_MATMUL_MATVEC : VKV_MATMUL_MATVEC_COLS;
    fwd_batch f = {.s = s, .seqs = ctxs, .n_seq = n, .n = n, .path = path, .n_out_runs = logits ? 1 : 0,
                   .out_row = {0}, .out_len = {n}};
    for (uint32_t i = 0; i < n; i++) {
        f.row[i] = i;
        f.n_tok[i] = 1;
    }
    if ((st = run_forward(&f, logits))) return st;
    for (uint32_t i = 0; i < n; i++) ctxs[i]->n_past++;
    return VKV_OK;
}

/* ---- the batched prefill ---- */

bool vkv_ctx_chunks_share_path(uint32_t n_a, uint32_t n_b)
{
    /* AUTO's matrix-vector kernels (whose columns are each the single-column
     * kernel's bits) for short chunks, the tiled or cooperative product
     * (whose every output is the same k-ordered sum wherever its row sits)
     * for long ones */
    return vkv_matmul_auto_is_matvec(n_a) == vkv_matmul_auto_is_matvec(n_b);
}

bool vkv_ctx_rows_share_bits(uint32_t n_a, uint32_t n_b)
{
    return n_a > VKV_ATTN_DECODE_MAX_Q && n_b > VKV_ATTN_DECODE_MAX_Q && vkv_ctx_chunks_share_path(n_a, n_b);
}

/* The first row of every chunk is a multiple of this: q, k, v and attention
 * rows then start at offsets the storage alignment divides (a power of two,
 * as every row count that does is a multiple of the least one). */
static uint32_t chunk_row_step(const vkv_ctx *s)
{
    const vkv_hparams *hp = &s->m->hp;
    const uint64_t a = storage_alignment(s);
    const uint64_t widths[2] = {4ull * hp->n_head * hp->head_dim, 4ull * hp->n_head_kv * hp->head_dim};
    uint32_t step = 1;
    for (int i = 0; i < 2; i++)
        while ((step * widths[i]) % a) step *= 2;
    return step;
}

/* Rows of s's buffers that chunks n_tok[0..n) take, padding included; row[i]
 * (may be NULL): chunk i's first row. */
static uint64_t chunk_rows(const vkv_ctx *s, const uint32_t *n_tok, uint32_t n, uint32_t *row)
{
    const uint32_t step = chunk_row_step(s);
    uint64_t r = 0;
    for (uint32_t i = 0; i < n; i++) {
        r = (r + step - 1) / step * step;
        if (row) row[i] = (uint32_t)r;
        r += n_tok[i];
    }
    return r;
}

/* Whether one batched prefill of `rows` rows, of chunks like n_tok0's, fits
 * s's buffers and keeps AUTO's choice: short chunks must stay on the
 * matrix-vector kernels all together (vkv_ctx_chunks_share_path). */
static bool chunk_rows_fit(const vkv_ctx *s, uint32_t n_tok0, uint64_t rows)
{
    return rows <= s->buffer_rows && (!vkv_matmul_auto_is_matvec(n_tok0) || vkv_matmul_auto_is_matvec((uint32_t)rows));
}

uint32_t vkv_ctx_chunks_fit(const vkv_ctx *s, const uint32_t *n_tok, uint32_t n)
{
    uint32_t k = 0;
    while (k < n && k < VKV_BATCH_MAX && vkv_ctx_chunks_share_path(n_tok[0], n_tok[k]) &&
           chunk_rows_fit(s, n_tok[0], chunk_rows(s, n_tok, k + 1, NULL)))
        k++;
    return k;
}

vkv_status vkv_ctx_eval_chunks(vkv_ctx *const *ctxs, const int32_t *const *ids, const uint32_t *n_tok, uint32_t n,
                               float *const *logits)
{
    vkv_status st = check_contexts(ctxs, n_tok, n, VKV_BATCH_MAX, "batched prefill");
    if (st) return st;
    vkv_ctx *s = ctxs[0];
    const vkv_hparams *hp = &s->m->hp;
    for (uint32_t i = 0; i < n; i++) {
        if (!n_tok[i] || n_tok[i] > ctxs[i]->p.n_batch)
            return vkv_error(VKV_ERR_ARG, "sequence %u of the batched prefill: a chunk of %u tokens, not 1 to its "
                             "n_batch %u", i, n_tok[i], ctxs[i]->p.n_batch);
        if (!vkv_ctx_chunks_share_path(n_tok[0], n_tok[i]))
            return vkv_error(VKV_ERR_ARG, "the batched prefill's chunks of %u and %u tokens take different matrix "
                             "products (vkv_ctx_chunks_share_path)", n_tok[0], n_tok[i]);
        if ((st = check_ids(hp, ids[i], n_tok[i]))) return st;
    }
    fwd_batch f = {.s = s, .seqs = ctxs, .n_seq = n};
    const uint64_t rows = chunk_rows(s, n_tok, n, f.row);
    if (!chunk_rows_fit(s, n_tok[0], rows))
        return vkv_error(VKV_ERR_ARG, "the batched prefill's chunks of %u tokens and more take %llu rows: more than "
                         "the first context's buffers hold (%u) or the matrix-vector kernels take (vkv_ctx_chunks_fit)",
                         n_tok[0], (unsigned long long)rows, s->buffer_rows);
    f.n = (uint32_t)rows;
    int32_t *id_dst = vkv_buffer_map(s->ids), *pos_dst = vkv_buffer_map(s->pos);
    memset(id_dst, 0, 4ull * f.n); /* padding rows: token 0 at position 0, computed and never read */
    memset(pos_dst, 0, 4ull * f.n);
    for (uint32_t i = 0; i < n; i++) {
        f.n_tok[i] = n_tok[i];
        memcpy(id_dst + f.row[i], ids[i], 4ull * n_tok[i]);
        for (uint32_t t = 0; t < n_tok[i]; t++) pos_dst[f.row[i] + t] = (int32_t)(ctxs[i]->n_past + t);
        if (logits[i]) {
            f.out_row[f.n_out_runs] = f.row[i] + n_tok[i] - 1;
            f.out_len[f.n_out_runs++] = 1;
        }
    }
    /* AUTO makes each chunk's choice alone: short chunks share at most
     * VKV_BATCH_MAX rows, so the matvec for one row, else its columns; long
     * ones the tiled or cooperative product. The last rows' logits (at most
     * VKV_BATCH_MAX) take the matvec's bits, as vkv_ctx_eval's one row does. */
    f.path = VKV_MATMUL_AUTO;
    if ((st = run_forward(&f, NULL))) return st;
    const float *out = vkv_buffer_map(s->logits_host);
    for (uint32_t i = 0, j = 0; i < n; i++) {
        if (logits[i]) memcpy(logits[i], out + (size_t)j++ * hp->n_vocab, 4ull * hp->n_vocab);
        ctxs[i]->n_past += n_tok[i];
    }
    return VKV_OK;
}
