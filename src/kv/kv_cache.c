/* The KV cache's owner (see kv_cache.h). */
#include "kv/kv_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/ops_attn.h"
#include "vk/ops_vector.h"

/* One compressed layer: the tiered layout of kv/kv_layout.h. */
typedef struct tiered_layer {
    bool on;
    vkv_buffer *k, *v;        /* tiered K rows [k_rows, head_dim], V rows [v_rows, head_dim] of KV type */
    vkv_buffer *meta;         /* [n_kv_head, 8] uint32 vkv_tier_head */
    vkv_buffer *pos;          /* [p_entries] int32 positions of compressed slots */
    vkv_buffer *vhat;         /* materialised path: [k_rows, head_dim] f32 rebuilt values */
    uint64_t k_rows, v_rows, p_entries;
    uint64_t n_ret_total, n_apx_total;
    uint32_t max_apx, max_comp;
} tiered_layer;

struct vkv_kv_cache {
    vkv_gpu *gpu;
    const vkv_model *m;
    uint32_t n_ctx;
    vkv_dtype kv_type;
    vkv_buffer **k_cache, **v_cache; /* per plain layer: [n_kv_head, n_ctx, head_dim] of kv_type */
    vkv_buffer *scratch;      /* plain attention's split decode partials */
    vkv_buffer **w;           /* per layer: [n_kv_head, head_dim, head_dim] f32 OLS maps, or NULL */
    /* VECTOR */
    uint32_t n_ctx0;          /* context length at compression */
    tiered_layer *tiers;      /* [n_layer] */
    vkv_buffer *w_zero;       /* bound as W where nothing is approximated */
    vkv_buffer *tiered_scratch; /* split decode partials of tier-aware attention */
    bool materialized;
    uint32_t map_shifts;      /* W blocks per KV head (kv/kv_layout.h) */
};

static vkv_view V(const vkv_buffer *b) { return vkv_view_of(b); }

static vkv_status make(vkv_gpu *gpu, uint64_t bytes, const char *what, vkv_buffer **b)
{
    return vkv_buffer_create(gpu, bytes ? bytes : 16, VKV_MEM_DEVICE, what, b);
}

/* Bytes a buffer of `bytes` takes (make() and the allocator's padding). */
static uint64_t padded(uint64_t bytes) { return bytes ? (bytes + 15) & ~15ull : 16; }

static uint64_t scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype kv_type)
{
    vkv_attn_params ap = {.n_q = VKV_ATTN_DECODE_MAX_Q, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
                          .head_dim = hp->head_dim, .n_ctx_max = n_ctx, .n_kv = n_ctx, .kv_type = kv_type};
    return vkv_attn_scratch_bytes(&ap);
}

uint64_t vkv_kv_plan_cache_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype kv_type)
{
    return 2 * hp->n_layer * padded(vkv_kv_cache_bytes(kv_type, hp->n_head_kv, n_ctx, hp->head_dim));
}

uint64_t vkv_kv_plan_scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype kv_type)
{
    return padded(scratch_bytes(hp, n_ctx, kv_type));
}

/* The plain caches of one layer. */
static vkv_status make_plain(vkv_kv_cache *kv, uint32_t l)
{
    const vkv_hparams *hp = &kv->m->hp;
    uint64_t cache_bytes = vkv_kv_cache_bytes(kv->kv_type, hp->n_head_kv, kv->n_ctx, hp->head_dim);
    vkv_status st;
    if ((st = make(kv->gpu, cache_bytes, "the K cache", &kv->k_cache[l])) ||
        (st = make(kv->gpu, cache_bytes, "the V cache", &kv->v_cache[l])))
        return st;
    return VKV_OK;
}

vkv_status vkv_kv_create(vkv_gpu *gpu, const vkv_model *m, uint32_t n_ctx, vkv_dtype kv_type, vkv_kv_cache **out)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    vkv_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return vkv_error(VKV_ERR_OOM, "out of host memory");
    *kv = (vkv_kv_cache){.gpu = gpu, .m = m, .n_ctx = n_ctx, .kv_type = kv_type, .map_shifts = 1};
    vkv_status st = VKV_OK;
    if (!(kv->k_cache = calloc(hp->n_layer, sizeof *kv->k_cache)) ||
        !(kv->v_cache = calloc(hp->n_layer, sizeof *kv->v_cache)) || !(kv->w = calloc(hp->n_layer, sizeof *kv->w)) ||
        !(kv->tiers = calloc(hp->n_layer, sizeof *kv->tiers))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((st = make_plain(kv, l))) goto error;
    if ((st = make(gpu, scratch_bytes(hp, n_ctx, kv_type), "attention scratch", &kv->scratch))) goto error;
    *out = kv;
    return VKV_OK;
error:
    vkv_kv_free(kv);
    return st;
}

static void free_tiers(vkv_kv_cache *kv, tiered_layer *t)
{
    vkv_buffer *tb[] = {t->k, t->v, t->meta, t->pos, t->vhat};
    for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) vkv_buffer_destroy(kv->gpu, tb[i]);
    memset(t, 0, sizeof *t);
}

void vkv_kv_free(vkv_kv_cache *kv)
{
    if (!kv) return;
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) {
        if (kv->k_cache) vkv_buffer_destroy(kv->gpu, kv->k_cache[l]);
        if (kv->v_cache) vkv_buffer_destroy(kv->gpu, kv->v_cache[l]);
        if (kv->w) vkv_buffer_destroy(kv->gpu, kv->w[l]);
        if (kv->tiers) free_tiers(kv, &kv->tiers[l]);
    }
    free(kv->k_cache);
    free(kv->v_cache);
    free(kv->w);
    free(kv->tiers);
    vkv_buffer_destroy(kv->gpu, kv->scratch);
    vkv_buffer_destroy(kv->gpu, kv->w_zero);
    vkv_buffer_destroy(kv->gpu, kv->tiered_scratch);
    free(kv);
}

vkv_view vkv_kv_k_cache(const vkv_kv_cache *kv, uint32_t layer) { return V(kv->k_cache[layer]); }
vkv_view vkv_kv_v_cache(const vkv_kv_cache *kv, uint32_t layer) { return V(kv->v_cache[layer]); }
vkv_dtype vkv_kv_type(const vkv_kv_cache *kv) { return kv->kv_type; }
uint32_t vkv_kv_n_compressed_ctx(const vkv_kv_cache *kv) { return kv->n_ctx0; }

vkv_status vkv_kv_reset(vkv_kv_cache *kv)
{
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) {
        vkv_buffer_destroy(kv->gpu, kv->w[l]);
        kv->w[l] = NULL;
        if (!kv->tiers[l].on) continue;
        free_tiers(kv, &kv->tiers[l]);
        vkv_status st = make_plain(kv, l);
        if (st) return st;
    }
    kv->n_ctx0 = 0;
    return VKV_OK;
}

vkv_status vkv_kv_set_materialized(vkv_kv_cache *kv, bool materialized)
{
    if (kv->n_ctx0 && materialized != kv->materialized)
        return vkv_error(VKV_ERR_ARG, "choose the attention path before compressing");
    kv->materialized = materialized;
    return VKV_OK;
}

vkv_status vkv_kv_set_map_shifts(vkv_kv_cache *kv, uint32_t map_shifts)
{
    if (map_shifts != 1 && map_shifts != kv->m->hp.n_head_kv)
        return vkv_error(VKV_ERR_ARG, "%u map blocks for %u KV heads (1 or all)", map_shifts, kv->m->hp.n_head_kv);
    if (kv->n_ctx0 && map_shifts != kv->map_shifts)
        return vkv_error(VKV_ERR_ARG, "choose the maps before compressing");
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++)
        if (kv->w[l] && map_shifts != kv->map_shifts) return vkv_error(VKV_ERR_ARG, "choose the maps before uploading one");
    if (kv->w_zero && map_shifts != kv->map_shifts) {
        vkv_buffer_destroy(kv->gpu, kv->w_zero);
        kv->w_zero = NULL;
    }
    kv->map_shifts = map_shifts;
    return VKV_OK;
}

/* Bytes of one layer's maps on the device. */
static uint64_t w_bytes(const vkv_kv_cache *kv)
{
    const vkv_hparams *hp = &kv->m->hp;
    return 4ull * kv->map_shifts * hp->n_head_kv * hp->head_dim * hp->head_dim;
}

static vkv_vector_geom geom(const vkv_kv_cache *kv)
{
    const vkv_hparams *hp = &kv->m->hp;
    return (vkv_vector_geom){kv->kv_type, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX,
                             kv->map_shifts};
}

vkv_status vkv_kv_layer_w(vkv_kv_cache *kv, uint32_t layer, const float *w, vkv_view *out)
{
    const vkv_hparams *hp = &kv->m->hp;
    if (layer >= hp->n_layer) return vkv_error(VKV_ERR_ARG, "layer %u does not exist", layer);
    if (!kv->w[layer]) {
        uint64_t wb = w_bytes(kv);
        vkv_status st;
        if ((st = make(kv->gpu, wb, "the OLS maps", &kv->w[layer]))) return st;
        if ((st = vkv_buffer_upload(kv->gpu, kv->w[layer], 0, w, wb))) {
            vkv_buffer_destroy(kv->gpu, kv->w[layer]);
            kv->w[layer] = NULL;
            return st;
        }
    }
    *out = V(kv->w[layer]);
    return VKV_OK;
}

vkv_status vkv_kv_compress_layer(vkv_kv_cache *kv, uint32_t layer, uint32_t n, vkv_view tiers, const uint32_t *n_ret,
                                 const uint32_t *n_apx)
{
    const vkv_hparams *hp = &kv->m->hp;
    vkv_gpu *gpu = kv->gpu;
    uint32_t H = hp->n_head_kv, hd = hp->head_dim;
    if (layer >= hp->n_layer) return vkv_error(VKV_ERR_ARG, "layer %u does not exist", layer);
    if (kv->tiers[layer].on) return vkv_error(VKV_ERR_ARG, "layer %u is already compressed", layer);
    if (kv->n_ctx0 && kv->n_ctx0 != n)
        return vkv_error(VKV_ERR_ARG, "layers must be compressed at the same context length (%u, now %u)", kv->n_ctx0, n);
    uint32_t cap_new = kv->n_ctx - n; /* room for every token still to come */
    vkv_tier_head *meta = calloc(H, sizeof *meta);
    if (!meta) return vkv_error(VKV_ERR_OOM, "out of host memory");
    tiered_layer t = {.on = true};
    uint64_t k_rows = 0, v_rows = 0, p_entries = 0;
    for (uint32_t h = 0; h < H; h++) {
        if (n_ret[h] + n_apx[h] > n) {
            free(meta);
            return vkv_error(VKV_ERR_ARG, "layer %u head %u keeps %u + %u of %u tokens", layer, h, n_ret[h], n_apx[h], n);
        }
        if (kv->map_shifts > 1 && (n_ret[h] != n_ret[0] || n_apx[h] != n_apx[0])) {
            free(meta);
            return vkv_error(VKV_ERR_ARG, "layer %u: a joint map needs the same tiers in every head (head %u keeps %u + %u, "
                             "head 0 %u + %u)", layer, h, n_ret[h], n_apx[h], n_ret[0], n_apx[0]);
        }
        meta[h] = (vkv_tier_head){(uint32_t)k_rows, (uint32_t)v_rows, (uint32_t)p_entries, n_ret[h], n_apx[h], {0}};
        k_rows += n_ret[h] + n_apx[h] + cap_new;
        v_rows += n_ret[h] + cap_new;
        p_entries += n_ret[h] + n_apx[h];
        t.n_ret_total += n_ret[h];
        t.n_apx_total += n_apx[h];
        if (n_apx[h] > t.max_apx) t.max_apx = n_apx[h];
        if (n_ret[h] + n_apx[h] > t.max_comp) t.max_comp = n_ret[h] + n_apx[h];
    }
    t.k_rows = k_rows ? k_rows : 1;
    t.v_rows = v_rows ? v_rows : 1;
    t.p_entries = p_entries ? p_entries : 1;
    uint64_t rb = (kv->kv_type == VKV_F16 ? 2ull : 4ull) * hd;
    vkv_vector_geom g = geom(kv);
    vkv_status st;
    if (t.n_apx_total && !kv->w[layer]) {
        st = vkv_error(VKV_ERR_ARG, "layer %u approximates tokens but has no OLS map", layer);
        goto error;
    }
    if (!t.n_apx_total) { /* nothing to rebuild: the maps are not kept */
        vkv_buffer_destroy(gpu, kv->w[layer]);
        kv->w[layer] = NULL;
    }
    if ((st = make(gpu, rb * t.k_rows, "the compressed K cache", &t.k)) ||
        (st = make(gpu, rb * t.v_rows, "the compressed V cache", &t.v)) ||
        (st = make(gpu, sizeof *meta * H, "tier metadata", &t.meta)) ||
        (st = vkv_buffer_upload(gpu, t.meta, 0, meta, sizeof *meta * H)) ||
        (st = make(gpu, 4ull * t.p_entries, "tier positions", &t.pos)))
        goto error;
    uint64_t wb = w_bytes(kv);
    if (!kv->w_zero && ((st = make(gpu, wb, "an empty map", &kv->w_zero)) || (st = vkv_buffer_fill(gpu, kv->w_zero, 0, wb, 0))))
        goto error;
    uint64_t sb = vkv_tiered_attn_scratch_bytes(VKV_ATTN_DECODE_MAX_Q, hp->n_head, hd, kv->n_ctx);
    if (sb && !kv->tiered_scratch && (st = make(gpu, sb, "tiered attention scratch", &kv->tiered_scratch))) goto error;
    if (kv->materialized && (st = make(gpu, 4ull * t.k_rows * hd, "rebuilt values", &t.vhat))) goto error;
    if ((st = vkv_cmd_begin(gpu))) goto error;
    st = vkv_op_kv_compact(gpu, &g, V(kv->k_cache[layer]), V(kv->v_cache[layer]), kv->n_ctx, n, tiers, V(t.meta), V(t.k),
                           t.k_rows, V(t.v), t.v_rows, V(t.pos), t.p_entries);
    if (!st && kv->materialized)
        st = vkv_op_vector_materialize(gpu, &g, V(t.k), t.k_rows, V(t.meta), V(t.pos), t.p_entries,
                                       kv->w[layer] ? V(kv->w[layer]) : V(kv->w_zero), V(kv->m->rope_inv_freq), t.max_apx,
                                       V(t.vhat));
    if (st) {
        st = vkv_cmd_abort(gpu, st);
        goto error;
    }
    if ((st = vkv_cmd_submit(gpu))) goto error;
    free(meta);
    /* The plain cache of this layer is no longer needed: free it for real. */
    vkv_buffer_destroy(gpu, kv->k_cache[layer]);
    vkv_buffer_destroy(gpu, kv->v_cache[layer]);
    kv->k_cache[layer] = kv->v_cache[layer] = NULL;
    kv->tiers[layer] = t;
    kv->n_ctx0 = n;
    return VKV_OK;
error:
    free(meta);
    free_tiers(kv, &t);
    return st;
}

vkv_status vkv_kv_append_attend(vkv_kv_cache *kv, uint32_t layer, vkv_view q, vkv_view k, vkv_view v, uint32_t n,
                                uint32_t n_past, vkv_view out)
{
    const vkv_model *m = kv->m;
    const vkv_hparams *hp = &m->hp;
    vkv_gpu *gpu = kv->gpu;
    const bool kv_f16 = kv->kv_type == VKV_F16;
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    const tiered_layer *T = &kv->tiers[layer];
    vkv_status st;
    if (T->on) {
        uint32_t n_new0 = n_past - kv->n_ctx0;
        vkv_vector_geom g = geom(kv);
        vkv_tiered_attn ta = {n, hp->n_head, n_new0, scale, !kv->materialized, T->max_comp,
                              kv->tiered_scratch ? V(kv->tiered_scratch) : (vkv_view){0}, V(kv->w_zero), T->max_apx};
        const vkv_buffer *w_or_vhat = kv->materialized ? T->vhat : kv->w[layer] ? kv->w[layer] : kv->w_zero;
        if ((st = vkv_op_kv_store_tiered(gpu, kv_f16, false, k, n, hp->n_head_kv, hp->head_dim, V(T->k), T->k_rows,
                                         V(T->meta), n_new0)) ||
            (st = vkv_op_kv_store_tiered(gpu, kv_f16, true, v, n, hp->n_head_kv, hp->head_dim, V(T->v), T->v_rows,
                                         V(T->meta), n_new0)) ||
            (st = vkv_op_attention_tiered(gpu, &g, &ta, q, V(T->k), T->k_rows, V(T->v), T->v_rows, V(T->meta), V(T->pos),
                                          T->p_entries, V(w_or_vhat), V(m->rope_inv_freq), out)))
            return st;
        return VKV_OK;
    }
    vkv_attn_params ap = {.n_q = n, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv, .head_dim = hp->head_dim,
                          .n_ctx_max = kv->n_ctx, .n_kv = n_past + n, .pos0 = n_past, .scale = scale,
                          .kv_type = kv->kv_type};
    if ((st = vkv_op_kv_store(gpu, kv_f16, k, n, hp->n_head_kv, hp->head_dim, V(kv->k_cache[layer]), kv->n_ctx, n_past)) ||
        (st = vkv_op_kv_store(gpu, kv_f16, v, n, hp->n_head_kv, hp->head_dim, V(kv->v_cache[layer]), kv->n_ctx, n_past)) ||
        (st = vkv_op_attention(gpu, VKV_ATTN_AUTO, &ap, q, V(kv->k_cache[layer]), V(kv->v_cache[layer]), V(kv->scratch),
                               out)))
        return st;
    return VKV_OK;
}

vkv_kv_memory vkv_kv_memory_of(const vkv_kv_cache *kv, uint32_t n_past)
{
    const vkv_hparams *hp = &kv->m->hp;
    uint64_t rb = (kv->kv_type == VKV_F16 ? 2ull : 4ull) * hp->head_dim;
    vkv_kv_memory mem = {0};
    uint32_t n = kv->n_ctx0 ? kv->n_ctx0 : n_past;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        mem.uncompressed_context += 2 * rb * hp->n_head_kv * n;
        if (!t->on) {
            mem.k_retained += rb * hp->n_head_kv * n;
            mem.v_retained += rb * hp->n_head_kv * n;
            continue;
        }
        mem.k_retained += rb * t->n_ret_total;
        mem.v_retained += rb * t->n_ret_total;
        mem.k_approximated += rb * t->n_apx_total;
        mem.appended_capacity += 2 * rb * hp->n_head_kv * (uint64_t)(kv->n_ctx - kv->n_ctx0);
        if (kv->w[l]) mem.w_bytes += vkv_buffer_size(kv->w[l]);
    }
    return mem;
}

uint64_t vkv_kv_bytes(const vkv_kv_cache *kv)
{
    const vkv_hparams *hp = &kv->m->hp;
    uint64_t total = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        if (t->on) total += vkv_buffer_size(t->k) + vkv_buffer_size(t->v);
        else total += 2ull * vkv_kv_cache_bytes(kv->kv_type, hp->n_head_kv, kv->n_ctx, hp->head_dim);
    }
    return total;
}
