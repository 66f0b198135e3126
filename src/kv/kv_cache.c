/* The KV cache's owner (see kv_cache.h). */
#include "kv/kv_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_pages.h"
#include "vk/dispatch.h"
#include "vk/ops_attn.h"
#include "vk/ops_vector.h"

/* One compressed layer: the tiered layout of kvlayout/kv_layout.h. */
typedef struct tiered_layer {
    bool on;
    vkv_buffer *k, *v;        /* tiered K rows [k_rows, head_dim], V rows [v_rows, head_dim] of KV type */
    vkv_buffer *meta;         /* [n_kv_head, 8] uint32 vkv_tier_head */
    vkv_buffer *pos;          /* [p_entries] int32 positions of compressed slots */
    vkv_buffer *vhat;         /* materialised path: [k_rows, head_dim] f32 rebuilt values */
    uint64_t k_rows, v_rows, p_entries;
    uint64_t n_ret_total, n_apx_total;
    uint32_t max_apx, max_comp;
    vkv_tier_head *meta_host; /* [n_kv_head] the metadata's host copy */
    uint32_t n_base;          /* position of appended token 0 (the context length at the last compression) */
    uint32_t cap_new;         /* appended tokens the layout has room for */
} tiered_layer;

struct vkv_kv_cache {
    vkv_gpu *gpu;
    const vkv_model *m;
    uint32_t n_ctx;           /* positions the sequence may reach */
    uint32_t n_slots;         /* slots per KV head of a plain layer (<= n_ctx) */
    vkv_dtype plain_k, plain_v; /* the plain caches' rows (kvlayout/kv_layout.h) */
    vkv_dtype tier_k, tier_v;   /* the tiered layers' rows */
    vkv_buffer **k_cache, **v_cache; /* per plain layer: [n_kv_head, n_slots] rows of plain_k / plain_v */
    vkv_buffer *scratch;      /* plain attention's split decode partials */
    vkv_buffer **w;           /* per layer: [n_kv_head, head_dim, head_dim] f32 OLS maps, or NULL */
    /* VECTOR */
    uint32_t n_ctx0;          /* context length at compression */
    tiered_layer *tiers;      /* [n_layer] */
    vkv_buffer *w_zero;       /* bound as W where nothing is approximated */
    vkv_buffer *tiered_scratch; /* split decode partials of tier-aware attention */
    bool materialized;
    uint32_t map_shifts;      /* W blocks per KV head (kvlayout/kv_layout.h) */
    /* Paged plain caches (vkv_kv_create_paged): per layer the page of each
     * 2^page_shift slots (VKV_KV_NO_PAGE until written), k_cache / v_cache NULL. */
    vkv_kv_pages *pages;
    uint32_t **page_of;       /* [n_layer][n_pages_max] */
    uint32_t n_pages_max;     /* pages of n_slots slots */
};

static vkv_view V(const vkv_buffer *b) { return vkv_view_of(b); }

static vkv_status make(vkv_gpu *gpu, uint64_t bytes, const char *what, vkv_buffer **b)
{
    return vkv_buffer_create(gpu, bytes ? bytes : 16, VKV_MEM_DEVICE, what, b);
}

/* Bytes a buffer of `bytes` takes (make() and the allocator's padding). */
static uint64_t padded(uint64_t bytes) { return bytes ? (bytes + 15) & ~15ull : 16; }

/* Drops layer l's pages from page `from` on. */
static void unmap_pages(vkv_kv_cache *kv, uint32_t l, uint32_t from)
{
    if (!kv->page_of || !kv->page_of[l]) return;
    for (uint32_t i = from; i < kv->n_pages_max; i++)
        if (kv->page_of[l][i] != VKV_KV_NO_PAGE) {
            vkv_kv_pages_unref(kv->pages, kv->page_of[l][i]);
            kv->page_of[l][i] = VKV_KV_NO_PAGE;
        }
}

/* The decode partials do not depend on the cache's types. */
static uint64_t scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx)
{
    vkv_attn_params ap = {.n_q = VKV_ATTN_DECODE_MAX_Q, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
                          .head_dim = hp->head_dim, .n_ctx_max = n_ctx, .n_kv = n_ctx, .k_type = VKV_F16,
                          .v_type = VKV_F16};
    return vkv_attn_scratch_bytes(&ap);
}

uint64_t vkv_kv_plan_cache_bytes(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype k_type, vkv_dtype v_type)
{
    return hp->n_layer * (padded(vkv_kv_cache_bytes(k_type, hp->n_head_kv, n_ctx, hp->head_dim)) +
                          padded(vkv_kv_cache_bytes(v_type, hp->n_head_kv, n_ctx, hp->head_dim)));
}

uint64_t vkv_kv_plan_scratch_bytes(const vkv_hparams *hp, uint32_t n_ctx) { return padded(scratch_bytes(hp, n_ctx)); }

uint64_t vkv_kv_plan_largest_buffer(const vkv_hparams *hp, uint32_t n_ctx, vkv_dtype k_type, vkv_dtype v_type)
{
    uint64_t k = vkv_kv_cache_bytes(k_type, hp->n_head_kv, n_ctx, hp->head_dim);
    uint64_t v = vkv_kv_cache_bytes(v_type, hp->n_head_kv, n_ctx, hp->head_dim);
    return k > v ? k : v;
}

/* The plain caches of one layer. */
static vkv_status make_plain(vkv_kv_cache *kv, uint32_t l)
{
    const vkv_hparams *hp = &kv->m->hp;
    vkv_status st;
    if ((st = make(kv->gpu, vkv_kv_cache_bytes(kv->plain_k, hp->n_head_kv, kv->n_slots, hp->head_dim), "the K cache",
                   &kv->k_cache[l])) ||
        (st = make(kv->gpu, vkv_kv_cache_bytes(kv->plain_v, hp->n_head_kv, kv->n_slots, hp->head_dim), "the V cache",
                   &kv->v_cache[l])))
        return st;
    return VKV_OK;
}

void vkv_kv_plain_types(vkv_dtype k_type, vkv_dtype v_type, bool compress, vkv_dtype *plain_k, vkv_dtype *plain_v)
{
    bool working_f16 = compress && (k_type != v_type || vkv_kv_type_quantized(k_type) || vkv_kv_type_quantized(v_type));
    *plain_k = working_f16 ? VKV_F16 : k_type;
    *plain_v = working_f16 ? VKV_F16 : v_type;
}

vkv_status vkv_kv_create(vkv_gpu *gpu, const vkv_model *m, uint32_t n_ctx, uint32_t n_slots, vkv_dtype k_type,
                         vkv_dtype v_type, bool compress, vkv_kv_cache **out)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    vkv_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return vkv_error(VKV_ERR_OOM, "out of host memory");
    *kv = (vkv_kv_cache){.gpu = gpu, .m = m, .n_ctx = n_ctx, .n_slots = n_slots && n_slots < n_ctx ? n_slots : n_ctx,
                         .tier_k = k_type, .tier_v = v_type, .map_shifts = 1};
    vkv_kv_plain_types(k_type, v_type, compress, &kv->plain_k, &kv->plain_v);
    vkv_status st = VKV_OK;
    if (!(kv->k_cache = calloc(hp->n_layer, sizeof *kv->k_cache)) ||
        !(kv->v_cache = calloc(hp->n_layer, sizeof *kv->v_cache)) || !(kv->w = calloc(hp->n_layer, sizeof *kv->w)) ||
        !(kv->tiers = calloc(hp->n_layer, sizeof *kv->tiers))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((st = make_plain(kv, l))) goto error;
    if ((st = make(gpu, scratch_bytes(hp, kv->n_slots), "attention scratch", &kv->scratch))) goto error;
    *out = kv;
    return VKV_OK;
error:
    vkv_kv_free(kv);
    return st;
}

vkv_status vkv_kv_create_paged(vkv_kv_pages *pages, const vkv_model *m, uint32_t n_ctx, vkv_kv_cache **out)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    vkv_gpu *gpu = vkv_kv_pages_gpu(pages);
    if (!n_ctx || n_ctx > vkv_kv_pages_staging_slots(pages))
        return vkv_error(VKV_ERR_ARG, "a paged cache of %u slots (the pool's staging holds %u)", n_ctx,
                         vkv_kv_pages_staging_slots(pages));
    if (vkv_kv_pages_shift(pages) != VKV_KV_PAGE_SHIFT)
        return vkv_error(VKV_ERR_ARG, "a paged cache's pages hold %u slots, the paged step's %u", 1u << vkv_kv_pages_shift(pages),
                         1u << VKV_KV_PAGE_SHIFT);
    vkv_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return vkv_error(VKV_ERR_OOM, "out of host memory");
    const uint32_t page = 1u << vkv_kv_pages_shift(pages);
    *kv = (vkv_kv_cache){.gpu = gpu, .m = m, .n_ctx = n_ctx, .n_slots = n_ctx, .plain_k = vkv_kv_pages_k_type(pages),
                         .plain_v = vkv_kv_pages_v_type(pages), .tier_k = vkv_kv_pages_k_type(pages),
                         .tier_v = vkv_kv_pages_v_type(pages), .map_shifts = 1, .pages = pages,
                         .n_pages_max = (n_ctx + page - 1) / page};
    vkv_status st = VKV_OK;
    if (!(kv->k_cache = calloc(hp->n_layer, sizeof *kv->k_cache)) ||
        !(kv->v_cache = calloc(hp->n_layer, sizeof *kv->v_cache)) || !(kv->w = calloc(hp->n_layer, sizeof *kv->w)) ||
        !(kv->tiers = calloc(hp->n_layer, sizeof *kv->tiers)) ||
        !(kv->page_of = calloc(hp->n_layer, sizeof *kv->page_of))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if (!(kv->page_of[l] = malloc(sizeof **kv->page_of * kv->n_pages_max))) {
            st = vkv_error(VKV_ERR_OOM, "out of host memory");
            goto error;
        }
        for (uint32_t i = 0; i < kv->n_pages_max; i++) kv->page_of[l][i] = VKV_KV_NO_PAGE;
    }
    if ((st = make(gpu, scratch_bytes(hp, kv->n_slots), "attention scratch", &kv->scratch))) goto error;
    *out = kv;
    return VKV_OK;
error:
    vkv_kv_free(kv);
    return st;
}

vkv_kv_page_use vkv_kv_page_use_of(const vkv_kv_cache *kv)
{
    vkv_kv_page_use u = {0};
    for (uint32_t l = 0; kv->pages && l < kv->m->hp.n_layer; l++)
        for (uint32_t i = 0; i < kv->n_pages_max; i++) {
            const uint32_t pg = kv->page_of[l][i];
            if (pg == VKV_KV_NO_PAGE) continue;
            u.mapped++;
            u.shared += vkv_kv_pages_refs(kv->pages, pg) > 1;
        }
    return u;
}

uint32_t vkv_kv_page(const vkv_kv_cache *kv, uint32_t layer, uint32_t index)
{
    return kv->pages && layer < kv->m->hp.n_layer && index < kv->n_pages_max ? kv->page_of[layer][index]
                                                                               : VKV_KV_NO_PAGE;
}

/* Pages of layer l for slots [from, from + n), each mapped by this cache
 * alone: a missing page is allocated (near the layer's first), a shared one
 * copied first (copy on write: recorded into the current recording, so the
 * copy runs before the writes that follow it). */
static vkv_status own_pages(vkv_kv_cache *kv, uint32_t l, uint32_t from, uint32_t n)
{
    if (!n) return VKV_OK;
    const uint32_t shift = vkv_kv_pages_shift(kv->pages);
    const uint32_t first = from >> shift, last = (from + n - 1) >> shift;
    if (last >= kv->n_pages_max)
        return vkv_error(VKV_ERR_ARG, "the paged cache has %u slots per head; %u + %u tokens asked", kv->n_slots, from, n);
    uint32_t *pg = kv->page_of[l];
    for (uint32_t i = first; i <= last; i++) {
        if (pg[i] != VKV_KV_NO_PAGE && vkv_kv_pages_refs(kv->pages, pg[i]) == 1) continue;
        uint32_t fresh;
        vkv_status st = vkv_kv_pages_alloc_near(kv->pages, pg[0] != VKV_KV_NO_PAGE ? pg[0] : pg[i], &fresh);
        if (st) return st;
        if (pg[i] != VKV_KV_NO_PAGE) {
            uint64_t src_off, dst_off;
            const vkv_buffer *src = vkv_kv_pages_slab(kv->pages, pg[i], &src_off);
            vkv_buffer *dst = vkv_kv_pages_slab(kv->pages, fresh, &dst_off);
            if ((st = vkv_cmd_copy(kv->gpu, src, src_off, dst, dst_off, vkv_kv_pages_page_bytes(kv->pages)))) {
                vkv_kv_pages_unref(kv->pages, fresh);
                return st;
            }
            vkv_kv_pages_count_copy(kv->pages);
            vkv_kv_pages_unref(kv->pages, pg[i]); /* still held by its other owners */
        }
        pg[i] = fresh;
    }
    return VKV_OK;
}

/* One copy command of n regions between a slab and the staging area. */
static vkv_status copy_staged(vkv_gpu *gpu, vkv_buffer *slab, vkv_buffer *staging, const vkv_copy_region *reg,
                              uint32_t n, bool to_staging)
{
    return to_staging ? vkv_cmd_copy_regions(gpu, slab, staging, reg, n) : vkv_cmd_copy_regions(gpu, staging, slab, reg, n);
}

/* Moves rows of layer l between its pages and the pool's staging area
 * [n_kv_head, staging_slots]: slots [from, from + n) of every head, K and V,
 * in one copy command each. to_staging: pages -> staging. */
static vkv_status stage_rows(vkv_kv_cache *kv, uint32_t l, uint32_t from, uint32_t n, bool to_staging)
{
    if (!n) return VKV_OK;
    const vkv_hparams *hp = &kv->m->hp;
    const uint32_t shift = vkv_kv_pages_shift(kv->pages), page = 1u << shift, H = hp->n_head_kv;
    const uint32_t stride = vkv_kv_pages_staging_slots(kv->pages);
    const uint32_t first = from >> shift, last = (from + n - 1) >> shift;
    vkv_copy_region *reg = malloc(sizeof *reg * (last - first + 1) * H);
    if (!reg) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = VKV_OK;
    for (int is_v = 0; is_v < 2 && !st; is_v++) {
        const uint64_t row = vkv_kv_row_bytes(is_v ? kv->plain_v : kv->plain_k, hp->head_dim);
        const uint64_t part = is_v ? vkv_kv_pages_v_part(kv->pages) : 0;
        vkv_buffer *staging = is_v ? vkv_kv_pages_staging_v(kv->pages) : vkv_kv_pages_staging_k(kv->pages);
        vkv_buffer *slab = NULL;
        uint32_t n_reg = 0;
        for (uint32_t i = first; i <= last && !st; i++) {
            uint64_t off;
            vkv_buffer *b = kv->page_of[l][i] == VKV_KV_NO_PAGE ? NULL : vkv_kv_pages_slab(kv->pages, kv->page_of[l][i], &off);
            if (!b) {
                st = vkv_error(VKV_ERR_ARG, "layer %u: slot %u has no page", l, i << shift);
                break;
            }
            if (slab && b != slab) { /* one copy command per slab */
                st = copy_staged(kv->gpu, slab, staging, reg, n_reg, to_staging);
                n_reg = 0;
            }
            slab = b;
            const uint32_t s0 = i == first ? from : i << shift, s1 = i == last ? from + n : (i + 1) << shift;
            for (uint32_t h = 0; h < H; h++) {
                const uint64_t in_page = off + part + ((uint64_t)h * page + (s0 & (page - 1))) * row;
                const uint64_t in_staging = ((uint64_t)h * stride + s0) * row;
                reg[n_reg++] = to_staging ? (vkv_copy_region){in_page, in_staging, (uint64_t)(s1 - s0) * row}
                                          : (vkv_copy_region){in_staging, in_page, (uint64_t)(s1 - s0) * row};
            }
        }
        if (!st && n_reg) st = copy_staged(kv->gpu, slab, staging, reg, n_reg, to_staging);
    }
    free(reg);
    return st;
}

vkv_status vkv_kv_share_prefix(vkv_kv_cache *dst, const vkv_kv_cache *src, uint32_t n)
{
    const vkv_hparams *hp = &dst->m->hp;
    if (!dst->pages || dst->pages != src->pages || dst->m != src->m)
        return vkv_error(VKV_ERR_ARG, "pages are shared between paged caches of one pool and model");
    if (n > dst->n_slots || n > src->n_slots)
        return vkv_error(VKV_ERR_ARG, "a %u-token prefix does not fit %u and %u slots a head", n, src->n_slots,
                         dst->n_slots);
    const uint32_t shift = vkv_kv_pages_shift(dst->pages), np = (n + (1u << shift) - 1) >> shift;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        for (uint32_t i = 0; i < np; i++)
            if (src->page_of[l][i] == VKV_KV_NO_PAGE)
                return vkv_error(VKV_ERR_ARG, "layer %u of the source holds no page for slot %u", l, i << shift);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        unmap_pages(dst, l, 0);
        for (uint32_t i = 0; i < np; i++) {
            dst->page_of[l][i] = src->page_of[l][i];
            vkv_kv_pages_ref(dst->pages, dst->page_of[l][i]);
        }
    }
    return VKV_OK;
}

vkv_status vkv_kv_trim_pages(vkv_kv_cache *kv, uint32_t n)
{
    if (!kv->pages) return vkv_error(VKV_ERR_ARG, "only a paged cache gives pages back");
    const uint32_t shift = vkv_kv_pages_shift(kv->pages), keep = (n + (1u << shift) - 1) >> shift;
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) unmap_pages(kv, l, keep);
    return VKV_OK;
}

static void free_tiers(vkv_kv_cache *kv, tiered_layer *t)
{
    vkv_buffer *tb[] = {t->k, t->v, t->meta, t->pos, t->vhat};
    for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) vkv_buffer_destroy(kv->gpu, tb[i]);
    free(t->meta_host);
    memset(t, 0, sizeof *t);
}

void vkv_kv_free(vkv_kv_cache *kv)
{
    if (!kv) return;
    for (uint32_t l = 0; l < kv->m->hp.n_layer && kv->page_of; l++) {
        unmap_pages(kv, l, 0);
        free(kv->page_of[l]);
    }
    free(kv->page_of);
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
vkv_dtype vkv_kv_k_type(const vkv_kv_cache *kv) { return kv->plain_k; }
vkv_dtype vkv_kv_v_type(const vkv_kv_cache *kv) { return kv->plain_v; }
bool vkv_kv_tiers_typed(const vkv_kv_cache *kv) { return kv->tier_k != kv->plain_k || kv->tier_v != kv->plain_v; }
vkv_dtype vkv_kv_gather_type(const vkv_kv_cache *kv) { return vkv_kv_tiers_typed(kv) ? VKV_F32 : kv->plain_k; }

vkv_status vkv_kv_record_as_tier(vkv_kv_cache *kv, bool values, vkv_view src, vkv_dtype src_type, uint32_t src_stride,
                                 uint32_t n, vkv_view q_tmp, vkv_view dst, uint32_t dst_stride)
{
    const vkv_hparams *hp = &kv->m->hp;
    const vkv_dtype via = values ? kv->tier_v : kv->tier_k;
    vkv_status st = VKV_OK;
    for (uint32_t h = 0; h < hp->n_head_kv && !st; h++) {
        const uint64_t row = (uint64_t)h * dst_stride;
        st = vkv_op_kv_convert_rows(kv->gpu, src, src_type, (uint64_t)h * src_stride, q_tmp, via, row, n, hp->head_dim);
        if (!st) st = vkv_op_kv_convert_rows(kv->gpu, q_tmp, via, row, dst, VKV_F32, row, n, hp->head_dim);
    }
    return st;
}

uint64_t vkv_kv_tier_row_bytes(const vkv_kv_cache *kv)
{
    const uint32_t hd = kv->m->hp.head_dim;
    const uint64_t kb = vkv_kv_row_bytes(kv->tier_k, hd), vb = vkv_kv_row_bytes(kv->tier_v, hd);
    return kb > vb ? kb : vb;
}
uint32_t vkv_kv_n_compressed_ctx(const vkv_kv_cache *kv) { return kv->n_ctx0; }

uint64_t vkv_kv_max_head_rows(const vkv_kv_cache *kv, uint32_t n_past)
{
    uint64_t most = 0;
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        if (!t->on) {
            most = most > 2ull * n_past ? most : 2ull * n_past;
            continue;
        }
        for (uint32_t h = 0; h < kv->m->hp.n_head_kv; h++) {
            uint64_t rows = 2ull * t->meta_host[h].n_ret + t->meta_host[h].n_apx + 2ull * (n_past - t->n_base);
            most = rows > most ? rows : most;
        }
    }
    return most;
}

uint32_t vkv_kv_max_head_tokens(const vkv_kv_cache *kv, uint32_t n_past)
{
    uint32_t most = 0;
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        for (uint32_t h = 0; h < (t->on ? kv->m->hp.n_head_kv : 1); h++) {
            uint32_t tokens = t->on ? t->meta_host[h].n_ret + t->meta_host[h].n_apx + (n_past - t->n_base) : n_past;
            most = tokens > most ? tokens : most;
        }
    }
    return most;
}

uint32_t vkv_kv_room(const vkv_kv_cache *kv, uint32_t n_past)
{
    uint32_t room = n_past < kv->n_ctx ? kv->n_ctx - n_past : 0;
    for (uint32_t l = 0; l < kv->m->hp.n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        if (!t->on) {
            uint32_t left = n_past < kv->n_slots ? kv->n_slots - n_past : 0;
            room = left < room ? left : room;
            continue;
        }
        uint32_t left = t->cap_new - (n_past - t->n_base);
        room = left < room ? left : room;
    }
    return room;
}

vkv_status vkv_kv_reset(vkv_kv_cache *kv)
{
    for (uint32_t l = 0; kv->pages && l < kv->m->hp.n_layer; l++) unmap_pages(kv, l, 0);
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

vkv_status vkv_kv_copy_prefix(vkv_kv_cache *dst, const vkv_kv_cache *src, uint32_t n)
{
    const vkv_hparams *hp = &dst->m->hp;
    if (dst->m != src->m || dst->gpu != src->gpu) return vkv_error(VKV_ERR_ARG, "a prefix copies between caches of one model");
    if (dst->plain_k != src->plain_k || dst->plain_v != src->plain_v)
        return vkv_error(VKV_ERR_ARG, "a prefix of %s/%s rows cannot fill a cache of %s/%s rows",
                         vkv_dtype_get(src->plain_k)->name, vkv_dtype_get(src->plain_v)->name,
                         vkv_dtype_get(dst->plain_k)->name, vkv_dtype_get(dst->plain_v)->name);
    if (dst->n_ctx0 || src->n_ctx0) return vkv_error(VKV_ERR_ARG, "a prefix copies between plain caches only");
    if (dst->pages || src->pages) return vkv_kv_share_prefix(dst, src, n); /* mapped, not copied */
    if (n > dst->n_slots || n > src->n_slots)
        return vkv_error(VKV_ERR_ARG, "a %u-token prefix does not fit %u and %u slots a head", n, src->n_slots,
                         dst->n_slots);
    if (!n) return VKV_OK;
    vkv_status st = vkv_cmd_begin(dst->gpu);
    if (st) return st;
    for (uint32_t l = 0; l < hp->n_layer && !st; l++)
        for (int v = 0; v < 2 && !st; v++) {
            /* [n_kv_head, n_slots] rows: head h's first n rows start at h * n_slots rows */
            const uint64_t row = vkv_kv_row_bytes(v ? dst->plain_v : dst->plain_k, hp->head_dim);
            vkv_buffer *to = v ? dst->v_cache[l] : dst->k_cache[l];
            const vkv_buffer *from = v ? src->v_cache[l] : src->k_cache[l];
            for (uint32_t h = 0; h < hp->n_head_kv && !st; h++)
                st = vkv_cmd_copy(dst->gpu, from, (uint64_t)h * src->n_slots * row, to,
                                  (uint64_t)h * dst->n_slots * row, (uint64_t)n * row);
        }
    return st ? vkv_cmd_abort(dst->gpu, st) : vkv_cmd_submit(dst->gpu);
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
    return (vkv_vector_geom){kv->plain_k, hp->n_head_kv, hp->head_dim, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX,
                             kv->map_shifts, kv->tier_k, kv->tier_v};
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

/* A layer's tiered layout, allocated: per head n_ret / n_apx of n compressed
 * tokens, room for cap_new appended tokens, the first of them at position
 * n_base; the metadata uploaded, the rows and positions not yet written.
 * *meta_out: its host copy (the caller's until it lands in t). */
static vkv_status alloc_tiered(vkv_kv_cache *kv, uint32_t layer, uint32_t n, const uint32_t *n_ret,
                               const uint32_t *n_apx, uint32_t cap_new, uint32_t n_base, tiered_layer *t,
                               vkv_tier_head **meta_out)
{
    const vkv_hparams *hp = &kv->m->hp;
    vkv_gpu *gpu = kv->gpu;
    const uint32_t H = hp->n_head_kv, hd = hp->head_dim;
    *t = (tiered_layer){.on = true, .n_base = n_base, .cap_new = cap_new};
    *meta_out = NULL;
    vkv_tier_head *meta = calloc(H, sizeof *meta);
    if (!meta) return vkv_error(VKV_ERR_OOM, "out of host memory");
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
        t->n_ret_total += n_ret[h];
        t->n_apx_total += n_apx[h];
        if (n_apx[h] > t->max_apx) t->max_apx = n_apx[h];
        if (n_ret[h] + n_apx[h] > t->max_comp) t->max_comp = n_ret[h] + n_apx[h];
    }
    t->k_rows = k_rows ? k_rows : 1;
    t->v_rows = v_rows ? v_rows : 1;
    t->p_entries = p_entries ? p_entries : 1;
    const uint64_t k_rb = vkv_kv_row_bytes(kv->tier_k, hd), v_rb = vkv_kv_row_bytes(kv->tier_v, hd), wb = w_bytes(kv);
    const uint64_t sb = vkv_tiered_attn_scratch_bytes(VKV_ATTN_DECODE_MAX_Q, hp->n_head, hd, kv->n_ctx);
    vkv_status st;
    if (t->n_apx_total && !kv->w[layer])
        st = vkv_error(VKV_ERR_ARG, "layer %u approximates tokens but has no OLS map", layer);
    else if ((st = make(gpu, k_rb * t->k_rows, "the compressed K cache", &t->k)) ||
             (st = make(gpu, v_rb * t->v_rows, "the compressed V cache", &t->v)) ||
             (st = make(gpu, sizeof *meta * H, "tier metadata", &t->meta)) ||
             (st = vkv_buffer_upload(gpu, t->meta, 0, meta, sizeof *meta * H)) ||
             (st = make(gpu, 4ull * t->p_entries, "tier positions", &t->pos)))
        ;
    else if (!kv->w_zero &&
             ((st = make(gpu, wb, "an empty map", &kv->w_zero)) || (st = vkv_buffer_fill(gpu, kv->w_zero, 0, wb, 0))))
        ;
    else if (sb && !kv->tiered_scratch && (st = make(gpu, sb, "tiered attention scratch", &kv->tiered_scratch)))
        ;
    else if (kv->materialized)
        st = make(gpu, 4ull * t->k_rows * hd, "rebuilt values", &t->vhat);
    if (st) {
        free(meta);
        free_tiers(kv, t);
        return st;
    }
    *meta_out = meta;
    return VKV_OK;
}

/* Layer `layer` becomes the tiered layout t (meta its host copy): its
 * previous buffers (plain or tiered) are freed for real. */
static void install_tiered(vkv_kv_cache *kv, uint32_t layer, tiered_layer *t, vkv_tier_head *meta)
{
    t->meta_host = meta;
    vkv_buffer_destroy(kv->gpu, kv->k_cache[layer]);
    vkv_buffer_destroy(kv->gpu, kv->v_cache[layer]);
    kv->k_cache[layer] = kv->v_cache[layer] = NULL;
    free_tiers(kv, &kv->tiers[layer]);
    kv->tiers[layer] = *t;
}

/* A layer's new tiered layout from a source in the plain layout (k, v:
 * [n_kv_head, src_slots, head_dim], tiers [n_kv_head, n] over its first n
 * slots): n_ret / n_apx per head, room for cap_new appended tokens, the first
 * of them at position n_base. pos_host [n_kv_head, n] gives the source slots'
 * positions (NULL: slot j is position j). On success the layer's previous
 * buffers (plain or tiered) are freed. */
static vkv_status build_tiered(vkv_kv_cache *kv, uint32_t layer, vkv_view k_src, vkv_view v_src, vkv_dtype src_type,
                               uint32_t src_slots, uint32_t n, vkv_view tiers, const uint32_t *n_ret,
                               const uint32_t *n_apx, uint32_t cap_new, uint32_t n_base, const int32_t *pos_host,
                               const uint8_t *tiers_host)
{
    const vkv_hparams *hp = &kv->m->hp;
    vkv_gpu *gpu = kv->gpu;
    const uint32_t H = hp->n_head_kv;
    if (kv->plain_k != kv->plain_v || vkv_kv_type_quantized(kv->plain_k))
        return vkv_error(VKV_ERR_UNSUPPORTED, "compressing a plain cache of %s keys and %s values: compression reads "
                         "f16 or f32 rows of one type (reserve the context for compression)",
                         vkv_dtype_get(kv->plain_k)->name, vkv_dtype_get(kv->plain_v)->name);
    tiered_layer t;
    vkv_tier_head *meta;
    vkv_status st = alloc_tiered(kv, layer, n, n_ret, n_apx, cap_new, n_base, &t, &meta);
    if (st) return st;
    vkv_vector_geom g = geom(kv);
    g.kv_type = src_type; /* the plain cache, or a gathered layer */
    int32_t *pos_new = NULL;
    if (pos_host) {
        /* kv_compact writes source slot indices: the positions come from the host's table */
        if (!(pos_new = malloc(4 * t.p_entries))) {
            st = vkv_error(VKV_ERR_OOM, "out of host memory");
            goto error;
        }
        for (uint32_t h = 0; h < H; h++) {
            uint32_t r = 0, a = 0;
            for (uint32_t j = 0; j < n; j++) {
                uint8_t tt = tiers_host[(size_t)h * n + j];
                if (tt == VKV_TIER_RETAINED) pos_new[meta[h].p_off + r++] = pos_host[(size_t)h * n + j];
                else if (tt == VKV_TIER_APPROXIMATED) pos_new[meta[h].p_off + n_ret[h] + a++] = pos_host[(size_t)h * n + j];
            }
        }
    }
    if ((st = vkv_cmd_begin(gpu))) goto error;
    st = vkv_op_kv_compact(gpu, &g, k_src, v_src, src_slots, n, tiers, V(t.meta), V(t.k), t.k_rows, V(t.v), t.v_rows,
                           V(t.pos), t.p_entries);
    if (st) {
        st = vkv_cmd_abort(gpu, st);
        goto error;
    }
    if ((st = vkv_cmd_submit(gpu)) || (pos_new && (st = vkv_buffer_upload(gpu, t.pos, 0, pos_new, 4 * t.p_entries))))
        goto error;
    if (kv->materialized) {
        if ((st = vkv_cmd_begin(gpu))) goto error;
        st = vkv_op_vector_materialize(gpu, &g, V(t.k), t.k_rows, V(t.meta), V(t.pos), t.p_entries,
                                       kv->w[layer] ? V(kv->w[layer]) : V(kv->w_zero), V(kv->m->rope_inv_freq), t.max_apx,
                                       V(t.vhat));
        if (st) {
            st = vkv_cmd_abort(gpu, st);
            goto error;
        }
        if ((st = vkv_cmd_submit(gpu))) goto error;
    }
    free(pos_new);
    install_tiered(kv, layer, &t, meta);
    return VKV_OK;
error:
    free(meta);
    free(pos_new);
    free_tiers(kv, &t);
    return st;
}

vkv_status vkv_kv_copy_compressed(vkv_kv_cache *dst, const vkv_kv_cache *src)
{
    const vkv_hparams *hp = &dst->m->hp;
    const uint32_t n = src->n_ctx0, H = hp->n_head_kv, hd = hp->head_dim;
    if (dst->m != src->m || dst->gpu != src->gpu)
        return vkv_error(VKV_ERR_ARG, "a compressed context copies between caches of one model");
    if (!n) return vkv_error(VKV_ERR_ARG, "the source cache holds no compressed context");
    if (dst->pages) return vkv_error(VKV_ERR_UNSUPPORTED, "a compressed context does not go into a paged cache");
    if (dst->n_ctx0) return vkv_error(VKV_ERR_ARG, "a compressed context copies into a cache that is not compressed");
    if (dst->plain_k != src->plain_k || dst->plain_v != src->plain_v || dst->tier_k != src->tier_k ||
        dst->tier_v != src->tier_v)
        return vkv_error(VKV_ERR_ARG, "a context compressed into %s/%s tiers cannot fill a cache of %s/%s tiers",
                         vkv_dtype_get(src->tier_k)->name, vkv_dtype_get(src->tier_v)->name,
                         vkv_dtype_get(dst->tier_k)->name, vkv_dtype_get(dst->tier_v)->name);
    if (n > dst->n_slots)
        return vkv_error(VKV_ERR_ARG, "a %u-token compressed context does not fit %u slots a head", n, dst->n_slots);
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (!src->tiers[l].on) return vkv_error(VKV_ERR_ARG, "layer %u of the source cache is not compressed", l);
    vkv_status st = vkv_kv_set_map_shifts(dst, src->map_shifts);
    if (st || (st = vkv_kv_set_materialized(dst, src->materialized))) return st;
    const uint64_t k_rb = vkv_kv_row_bytes(dst->tier_k, hd), v_rb = vkv_kv_row_bytes(dst->tier_v, hd);
    uint32_t *n_ret = malloc(sizeof *n_ret * H * 2);
    if (!n_ret) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint32_t *n_apx = n_ret + H;
    for (uint32_t l = 0; l < hp->n_layer && !st; l++) {
        const tiered_layer *from = &src->tiers[l];
        for (uint32_t h = 0; h < H; h++) {
            n_ret[h] = from->meta_host[h].n_ret;
            n_apx[h] = from->meta_host[h].n_apx;
        }
        /* the maps first: a layer that approximates needs them to be laid out */
        if (src->w[l] && !dst->w[l] &&
            ((st = make(dst->gpu, w_bytes(dst), "the OLS maps", &dst->w[l])) ||
             (st = vkv_cmd_begin(dst->gpu)) ||
             (st = vkv_cmd_copy(dst->gpu, src->w[l], 0, dst->w[l], 0, w_bytes(dst))) ||
             (st = vkv_cmd_submit(dst->gpu))))
            break;
        /* room for every token still to come, as vkv_kv_compress_layer leaves it */
        tiered_layer t;
        vkv_tier_head *meta;
        if ((st = alloc_tiered(dst, l, n, n_ret, n_apx, dst->n_slots - n, n, &t, &meta))) break;
        if ((st = vkv_cmd_begin(dst->gpu))) {
            free(meta);
            free_tiers(dst, &t);
            break;
        }
        /* per head: its compressed rows (retained then approximated keys, retained values, and the
         * materialised path's rebuilt values) at its offsets, which the room after them moves */
        for (uint32_t h = 0; h < H && !st; h++) {
            const vkv_tier_head *a = &from->meta_host[h], *b = &meta[h];
            const uint64_t nk = (uint64_t)a->n_ret + a->n_apx, nv = a->n_ret;
            if (nk) st = vkv_cmd_copy(dst->gpu, from->k, a->k_off * k_rb, t.k, b->k_off * k_rb, nk * k_rb);
            if (!st && nv) st = vkv_cmd_copy(dst->gpu, from->v, a->v_off * v_rb, t.v, b->v_off * v_rb, nv * v_rb);
            if (!st && nk && t.vhat)
                st = vkv_cmd_copy(dst->gpu, from->vhat, a->k_off * 4ull * hd, t.vhat, b->k_off * 4ull * hd, nk * 4ull * hd);
        }
        if (!st) st = vkv_cmd_copy(dst->gpu, from->pos, 0, t.pos, 0, 4ull * t.p_entries);
        st = st ? vkv_cmd_abort(dst->gpu, st) : vkv_cmd_submit(dst->gpu);
        if (st) {
            free(meta);
            free_tiers(dst, &t);
            break;
        }
        install_tiered(dst, l, &t, meta);
    }
    free(n_ret);
    if (st) return st;
    dst->n_ctx0 = n;
    return VKV_OK;
}

vkv_status vkv_kv_compress_layer(vkv_kv_cache *kv, uint32_t layer, uint32_t n, vkv_view tiers, const uint32_t *n_ret,
                                 const uint32_t *n_apx)
{
    const vkv_hparams *hp = &kv->m->hp;
    if (layer >= hp->n_layer) return vkv_error(VKV_ERR_ARG, "layer %u does not exist", layer);
    if (kv->tiers[layer].on) return vkv_error(VKV_ERR_ARG, "layer %u is already compressed", layer);
    if (kv->pages) return vkv_error(VKV_ERR_UNSUPPORTED, "a paged cache is not compressed (docs/ARCHITECTURE.md §2)");
    if (kv->n_ctx0 && kv->n_ctx0 != n)
        return vkv_error(VKV_ERR_ARG, "layers must be compressed at the same context length (%u, now %u)", kv->n_ctx0, n);
    uint32_t n_apx_total = 0;
    for (uint32_t h = 0; h < hp->n_head_kv; h++) n_apx_total += n_apx[h];
    if (!n_apx_total) { /* nothing to rebuild: the maps are not kept */
        vkv_buffer_destroy(kv->gpu, kv->w[layer]);
        kv->w[layer] = NULL;
    }
    /* room for every token still to come */
    vkv_status st = build_tiered(kv, layer, V(kv->k_cache[layer]), V(kv->v_cache[layer]), kv->plain_k, kv->n_slots, n,
                                 tiers, n_ret, n_apx, kv->n_slots - n, n, NULL, NULL);
    if (!st) kv->n_ctx0 = n;
    return st;
}

void vkv_kv_gathered_free(vkv_kv_gathered *g)
{
    free(g->pos);
    free(g->tier);
    free(g->n_tok);
    memset(g, 0, sizeof *g);
}

vkv_status vkv_kv_gather(vkv_kv_cache *kv, uint32_t layer, uint32_t n_past, vkv_buffer *k_tmp, vkv_buffer *v_tmp,
                         uint32_t tmp_slots, vkv_kv_gathered *out)
{
    const uint32_t H = kv->m->hp.n_head_kv;
    const tiered_layer *t = &kv->tiers[layer];
    memset(out, 0, sizeof *out);
    if (kv->pages) return vkv_error(VKV_ERR_UNSUPPORTED, "a paged cache is not compressed (docs/ARCHITECTURE.md §2)");
    uint32_t n = 0;
    if (!t->on) {
        n = n_past;
    } else {
        for (uint32_t h = 0; h < H; h++) {
            uint32_t nh = t->meta_host[h].n_ret + t->meta_host[h].n_apx + (n_past - t->n_base);
            n = nh > n ? nh : n;
        }
        if (n > tmp_slots) return vkv_error(VKV_ERR_ARG, "layer %u holds %u tokens, the gather room %u", layer, n, tmp_slots);
    }
    out->n = n;
    out->pos = malloc(4ull * H * (n ? n : 1));
    out->tier = calloc((size_t)H * (n ? n : 1), 1);
    out->n_tok = calloc(H, 4);
    if (!out->pos || !out->tier || !out->n_tok) {
        vkv_kv_gathered_free(out);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    if (!t->on) {
        out->type = kv->plain_k;
        out->k = V(kv->k_cache[layer]);
        out->v = V(kv->v_cache[layer]);
        out->stride = kv->n_slots;
        for (uint32_t h = 0; h < H; h++) {
            out->n_tok[h] = n;
            for (uint32_t j = 0; j < n; j++) {
                out->pos[(size_t)h * n + j] = (int32_t)j;
                out->tier[(size_t)h * n + j] = VKV_TIER_RETAINED;
            }
        }
        return VKV_OK;
    }
    /* Rows of other types than the plain cache's come back decoded into f32 by kv_convert (the
     * scorer and the residual then read the values the tiers hold), else as bytes. */
    const uint32_t hd = kv->m->hp.head_dim;
    const vkv_dtype gt = vkv_kv_gather_type(kv);
    const uint64_t rb = vkv_kv_row_bytes(gt, hd), hs = rb * tmp_slots;
    const bool typed = vkv_kv_tiers_typed(kv);
    out->type = gt;
    const uint32_t n_new = n_past - t->n_base;
    int32_t *comp_pos = malloc(4 * t->p_entries);
    vkv_status st = comp_pos ? vkv_buffer_download(kv->gpu, t->pos, 0, comp_pos, 4 * t->p_entries)
                             : vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!st) st = vkv_cmd_begin(kv->gpu);
    for (uint32_t h = 0; h < H && !st; h++) {
        const vkv_tier_head *m = &t->meta_host[h];
        const uint32_t comp = m->n_ret + m->n_apx;
        out->n_tok[h] = comp + n_new;
        for (uint32_t j = 0; j < comp + n_new; j++) {
            out->pos[(size_t)h * n + j] = j < comp ? comp_pos[m->p_off + j] : (int32_t)(t->n_base + j - comp);
            out->tier[(size_t)h * n + j] = j >= m->n_ret && j < comp ? VKV_TIER_APPROXIMATED : VKV_TIER_RETAINED;
        }
        if (typed) {
            /* K: compressed then appended rows; V: retained, then appended after the approximated slots */
            const uint64_t base = (uint64_t)h * tmp_slots;
            st = vkv_op_kv_convert_rows(kv->gpu, V(t->k), kv->tier_k, m->k_off, V(k_tmp), gt, base,
                                        comp + n_new, hd);
            if (!st) st = vkv_op_kv_convert_rows(kv->gpu, V(t->v), kv->tier_v, m->v_off, V(v_tmp), gt, base,
                                                 m->n_ret, hd);
            if (!st) st = vkv_op_kv_convert_rows(kv->gpu, V(t->v), kv->tier_v, m->v_off + m->n_ret, V(v_tmp),
                                                 gt, base + comp, n_new, hd);
        } else {
            st = vkv_cmd_copy(kv->gpu, t->k, rb * m->k_off, k_tmp, hs * h, rb * (comp + n_new));
            if (!st && m->n_ret) st = vkv_cmd_copy(kv->gpu, t->v, rb * m->v_off, v_tmp, hs * h, rb * m->n_ret);
            if (!st && n_new)
                st = vkv_cmd_copy(kv->gpu, t->v, rb * (m->v_off + m->n_ret), v_tmp, hs * h + rb * comp, rb * n_new);
        }
        if (st) st = vkv_cmd_abort(kv->gpu, st);
    }
    if (!st) st = vkv_cmd_submit(kv->gpu);
    free(comp_pos);
    if (st) {
        vkv_kv_gathered_free(out);
        return st;
    }
    out->k = V(k_tmp);
    out->v = V(v_tmp);
    out->stride = tmp_slots;
    return VKV_OK;
}

vkv_status vkv_kv_recompress(vkv_kv_cache *kv, uint32_t layer, const vkv_kv_gathered *g, vkv_view tiers,
                             const uint8_t *tiers_host, const uint32_t *n_ret, const uint32_t *n_apx, uint32_t cap_new,
                             uint32_t n_past)
{
    const uint32_t H = kv->m->hp.n_head_kv;
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t j = 0; j < g->n; j++)
            if (g->tier[(size_t)h * g->n + j] == VKV_TIER_APPROXIMATED && tiers_host[(size_t)h * g->n + j] == VKV_TIER_RETAINED)
                return vkv_error(VKV_ERR_ARG, "layer %u head %u: an approximated token cannot be retained again", layer, h);
    vkv_status st = build_tiered(kv, layer, g->k, g->v, g->type, g->stride, g->n, tiers, n_ret, n_apx, cap_new, n_past,
                                 g->pos, tiers_host);
    if (!st && !kv->n_ctx0) kv->n_ctx0 = n_past;
    return st;
}

/* The shape of a plain layer's attention for n tokens after n_past. */
static vkv_attn_params plain_attn_params(const vkv_kv_cache *kv, uint32_t n, uint32_t n_past)
{
    const vkv_hparams *hp = &kv->m->hp;
    return (vkv_attn_params){.n_q = n, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv, .head_dim = hp->head_dim,
                             .n_ctx_max = kv->n_slots, .n_kv = n_past + n, .pos0 = n_past,
                             .scale = 1.0f / sqrtf((float)hp->head_dim), .k_type = kv->plain_k, .v_type = kv->plain_v};
}

vkv_status vkv_kv_append_attend(vkv_kv_cache *kv, uint32_t layer, vkv_view q, vkv_view k, vkv_view v, uint32_t n,
                                uint32_t n_past, vkv_view out)
{
    const vkv_model *m = kv->m;
    const vkv_hparams *hp = &m->hp;
    vkv_gpu *gpu = kv->gpu;
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    const tiered_layer *T = &kv->tiers[layer];
    vkv_status st;
    if (T->on) {
        uint32_t n_new0 = n_past - T->n_base;
        if (n_new0 + n > T->cap_new)
            return vkv_error(VKV_ERR_ARG, "layer %u: the compressed cache has room for %u tokens after compression, "
                             "%u + %u asked", layer, T->cap_new, n_new0, n);
        vkv_vector_geom g = geom(kv);
        vkv_tiered_attn ta = {n, hp->n_head, n_new0, scale, !kv->materialized, T->max_comp,
                              kv->tiered_scratch ? V(kv->tiered_scratch) : (vkv_view){0}, V(kv->w_zero), T->max_apx};
        const vkv_buffer *w_or_vhat = kv->materialized ? T->vhat : kv->w[layer] ? kv->w[layer] : kv->w_zero;
        if ((st = vkv_op_kv_store_tiered(gpu, kv->tier_k, false, k, n, hp->n_head_kv, hp->head_dim, V(T->k), T->k_rows,
                                         V(T->meta), n_new0)) ||
            (st = vkv_op_kv_store_tiered(gpu, kv->tier_v, true, v, n, hp->n_head_kv, hp->head_dim, V(T->v), T->v_rows,
                                         V(T->meta), n_new0)) ||
            (st = vkv_op_attention_tiered(gpu, &g, &ta, q, V(T->k), T->k_rows, V(T->v), T->v_rows, V(T->meta), V(T->pos),
                                          T->p_entries, V(w_or_vhat), V(m->rope_inv_freq), out)))
            return st;
        return VKV_OK;
    }
    if ((uint64_t)n_past + n > kv->n_slots)
        return vkv_error(VKV_ERR_ARG, "the plain cache has %u slots per head; %u + %u tokens need compressing first",
                         kv->n_slots, n_past, n);
    vkv_attn_params ap = plain_attn_params(kv, n, n_past);
    if (kv->pages) {
        /* The layer's rows go through the pool's staging area: the pages
         * before n_past in, this chunk's rows stored and attended there by
         * the contiguous kernels (so every bit is theirs), then its rows out
         * to the pages they belong to. */
        vkv_buffer *sk = vkv_kv_pages_staging_k(kv->pages), *sv = vkv_kv_pages_staging_v(kv->pages);
        const uint32_t stride = vkv_kv_pages_staging_slots(kv->pages);
        ap.n_ctx_max = stride;
        if ((st = own_pages(kv, layer, n_past, n)) || (st = stage_rows(kv, layer, 0, n_past, true)) ||
            (st = vkv_op_kv_store(gpu, kv->plain_k, k, n, hp->n_head_kv, hp->head_dim, V(sk), stride, n_past)) ||
            (st = vkv_op_kv_store(gpu, kv->plain_v, v, n, hp->n_head_kv, hp->head_dim, V(sv), stride, n_past)) ||
            (st = vkv_op_attention(gpu, VKV_ATTN_AUTO, &ap, q, V(sk), V(sv), V(kv->scratch), out)) ||
            (st = stage_rows(kv, layer, n_past, n, false)))
            return st;
        return VKV_OK;
    }
    if ((st = vkv_op_kv_store(gpu, kv->plain_k, k, n, hp->n_head_kv, hp->head_dim, V(kv->k_cache[layer]), kv->n_slots, n_past)) ||
        (st = vkv_op_kv_store(gpu, kv->plain_v, v, n, hp->n_head_kv, hp->head_dim, V(kv->v_cache[layer]), kv->n_slots, n_past)) ||
        (st = vkv_op_attention(gpu, VKV_ATTN_AUTO, &ap, q, V(kv->k_cache[layer]), V(kv->v_cache[layer]), V(kv->scratch),
                               out)))
        return st;
    return VKV_OK;
}

bool vkv_kv_same_group(const vkv_kv_cache *a, const vkv_kv_cache *b)
{
    return a->gpu == b->gpu && a->m == b->m && a->plain_k == b->plain_k && a->plain_v == b->plain_v;
}

/* Where layer l's pages of slots [0, n_past] lie: the buffer over their
 * memory block (NULL: none mapped yet) and the span [lo, hi) of their bytes
 * there; false when they lie in two blocks. */
static bool page_span(const vkv_kv_cache *kv, uint32_t l, uint32_t n_past, const vkv_buffer **base, uint64_t *lo,
                      uint64_t *hi)
{
    const uint64_t pb = vkv_kv_pages_page_bytes(kv->pages);
    *base = NULL;
    *lo = UINT64_MAX;
    *hi = 0;
    for (uint32_t i = 0; i <= (n_past >> vkv_kv_pages_shift(kv->pages)); i++) {
        const uint32_t pg = kv->page_of[l][i];
        if (pg == VKV_KV_NO_PAGE) continue;
        uint64_t off;
        const vkv_buffer *b = vkv_kv_pages_base(kv->pages, pg, &off);
        if (*base && b != *base) return false;
        *base = b;
        *lo = off < *lo ? off : *lo;
        *hi = off + pb > *hi ? off + pb : *hi;
    }
    return true;
}

bool vkv_kv_pageable(const vkv_kv_cache *kv, uint32_t layer, uint32_t n_past)
{
    const vkv_hparams *hp = &kv->m->hp;
    const uint64_t k = vkv_kv_cache_bytes(kv->plain_k, hp->n_head_kv, kv->n_slots, hp->head_dim);
    const uint64_t v = vkv_kv_cache_bytes(kv->plain_v, hp->n_head_kv, kv->n_slots, hp->head_dim);
    /* each cache within one storage range with its alignment slack */
    const uint64_t limit = vkv_ops_max_range(kv->gpu) - vkv_ops_align(kv->gpu);
    if (kv->tiers[layer].on || (uint64_t)n_past + 1 > kv->n_slots) return false;
    if (!kv->pages) return k <= limit && v <= limit;
    /* every page in one memory block, within one storage range */
    const vkv_buffer *base;
    uint64_t lo, hi;
    return page_span(kv, layer, n_past, &base, &lo, &hi) && (!base || hi - lo <= limit);
}

uint64_t vkv_kv_paged_words(const vkv_kv_cache *kv, uint32_t n_past)
{
    return vkv_paged_table_words(1, n_past + 1, VKV_KV_PAGE_SHIFT);
}

uint64_t vkv_kv_paged_part_bytes(const vkv_kv_cache *kv, uint32_t n_past)
{
    const vkv_attn_params ap = plain_attn_params(kv, 1, n_past);
    return vkv_attn_decode_splits(n_past + 1) > 1 ? vkv_paged_scratch_bytes(&ap, 1, n_past + 1) : 0;
}

/* Where a sequence's layer caches lie: the buffers over their memory blocks
 * and their byte ranges in them. */
typedef struct paged_place {
    const vkv_buffer *k_base, *v_base;
    uint64_t k_off, v_off, k_bytes, v_bytes;
} paged_place;

/* One paged step over sequences that share their pool buffers within one
 * storage range each: their page lists relative to the windows' starts. */
static vkv_status paged_dispatch(vkv_kv_cache *const *kvs, uint32_t layer, const uint32_t *n_past, const uint32_t *rows,
                                 const paged_place *pl, const uint32_t *members, uint32_t n, vkv_view q, vkv_view k,
                                 vkv_view v, vkv_view out, uint32_t n_rows, vkv_buffer *table, uint32_t *table_used,
                                 vkv_view scratch)
{
    const vkv_kv_cache *kv0 = kvs[members[0]];
    vkv_gpu *gpu = kv0->gpu;
    const uint64_t align = vkv_ops_align(gpu);
    const uint64_t page = 1ull << VKV_KV_PAGE_SHIFT;
    const uint64_t k_row = vkv_kv_row_bytes(kv0->plain_k, kv0->m->hp.head_dim);
    const uint64_t v_row = vkv_kv_row_bytes(kv0->plain_v, kv0->m->hp.head_dim);
    uint64_t k_lo = UINT64_MAX, v_lo = UINT64_MAX, n_pages = 0;
    for (uint32_t i = 0; i < n; i++) {
        const paged_place *p = &pl[members[i]];
        if (p->k_off < k_lo) k_lo = p->k_off;
        if (p->v_off < v_lo) v_lo = p->v_off;
        n_pages += (n_past[members[i]] + page) / page; /* pages of n_past + 1 slots */
    }
    k_lo -= k_lo % align;
    v_lo -= v_lo % align;
    vkv_paged_seq seqs[VKV_KV_STEP_MAX];
    uint64_t *lists = malloc(2 * n_pages * sizeof *lists), *at = lists;
    if (!lists) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t s = members[i];
        const paged_place *p = &pl[s];
        const uint32_t n_kv = n_past[s] + 1, np = (uint32_t)((n_kv + page - 1) / page);
        const vkv_kv_cache *kv = kvs[s];
        seqs[i] = (vkv_paged_seq){.n_kv = n_kv, .row = rows[s], .k_pages = at, .v_pages = at + np,
                                  .k_head_bytes = k_row * kv->n_slots, .v_head_bytes = v_row * kv->n_slots};
        if (kv->pages) { /* pages of every head's page slots: K rows, then V rows */
            seqs[i].k_head_bytes = k_row * page;
            seqs[i].v_head_bytes = v_row * page;
            for (uint32_t j = 0; j < np; j++) {
                uint64_t off;
                vkv_kv_pages_base(kv->pages, kv->page_of[layer][j], &off);
                at[j] = off - k_lo;
                at[np + j] = off + vkv_kv_pages_v_part(kv->pages) - v_lo;
            }
        } else { /* a contiguous cache [n_kv_head, n_slots]: its pages in order */
            for (uint32_t j = 0; j < np; j++) {
                at[j] = p->k_off - k_lo + j * page * k_row;
                at[np + j] = p->v_off - v_lo + j * page * v_row;
            }
        }
        at += 2 * np;
    }
    const vkv_attn_params ap = plain_attn_params(kv0, 1, 0);
    vkv_paged_step step;
    vkv_status st = vkv_paged_step_write(&ap, VKV_KV_PAGE_SHIFT, seqs, n, table,
                                         (uint32_t)(vkv_buffer_size(table) / 4), table_used, &step);
    free(lists);
    const vkv_view k_pool = {pl[members[0]].k_base, k_lo}, v_pool = {pl[members[0]].v_base, v_lo};
    if (!st) st = vkv_op_kv_store_paged(gpu, &ap, &step, table, k, v, n_rows, k_pool, v_pool);
    if (!st) st = vkv_op_attention_paged(gpu, &ap, &step, table, q, out, n_rows, k_pool, v_pool, scratch);
    return st;
}

vkv_status vkv_kv_append_attend_paged(vkv_kv_cache *const *kvs, const uint32_t *n_past, const uint32_t *rows,
                                      uint32_t n_seq, uint32_t layer, vkv_view q, vkv_view k, vkv_view v,
                                      vkv_view out, uint32_t n_rows, vkv_buffer *table, uint32_t *table_used,
                                      vkv_view scratch, uint64_t scratch_bytes)
{
    if (!n_seq) return VKV_OK;
    if (n_seq > VKV_KV_STEP_MAX) return vkv_error(VKV_ERR_ARG, "a paged step of %u sequences (at most %u)", n_seq, VKV_KV_STEP_MAX);
    vkv_gpu *gpu = kvs[0]->gpu;
    const uint64_t max_range = vkv_ops_max_range(gpu), align = vkv_ops_align(gpu);
    paged_place pl[VKV_KV_STEP_MAX];
    vkv_status st;
    for (uint32_t i = 0; i < n_seq; i++) {
        vkv_kv_cache *kv = kvs[i];
        if (!vkv_kv_pageable(kv, layer, n_past[i]) || !vkv_kv_same_group(kv, kvs[0]))
            return vkv_error(VKV_ERR_ARG, "layer %u: sequence %u's cache cannot join this paged step "
                             "(vkv_kv_pageable, vkv_kv_same_group)", layer, i);
        const vkv_hparams *hp = &kv->m->hp;
        paged_place *p = &pl[i];
        if (kv->pages) {
            /* the token's page, its own; then the window its pages span */
            uint64_t lo, hi;
            if ((st = own_pages(kv, layer, n_past[i], 1))) return st;
            if (!page_span(kv, layer, n_past[i], &p->k_base, &lo, &hi))
                return vkv_error(VKV_ERR_UNSUPPORTED, "layer %u: sequence %u's pages lie in two memory blocks", layer, i);
            /* K parts from the first page's start, V parts to the last page's end */
            const uint64_t v_part = vkv_kv_pages_v_part(kv->pages), pb = vkv_kv_pages_page_bytes(kv->pages);
            p->v_base = p->k_base;
            p->k_off = lo;
            p->v_off = lo + v_part;
            p->k_bytes = hi - lo - (pb - v_part);
            p->v_bytes = hi - lo - v_part;
        } else if ((st = vkv_buffer_base(gpu, kv->k_cache[layer], &p->k_base, &p->k_off)) ||
                   (st = vkv_buffer_base(gpu, kv->v_cache[layer], &p->v_base, &p->v_off))) {
            return st;
        } else {
            p->k_bytes = vkv_kv_cache_bytes(kv->plain_k, hp->n_head_kv, kv->n_slots, hp->head_dim);
            p->v_bytes = vkv_kv_cache_bytes(kv->plain_v, hp->n_head_kv, kv->n_slots, hp->head_dim);
        }
        if (vkv_kv_paged_part_bytes(kv, n_past[i]) > scratch_bytes)
            return vkv_error(VKV_ERR_ARG, "layer %u: sequence %u's partials exceed the paged step's scratch", layer, i);
    }
    /* Dispatches: sequences whose caches share the buffers and whose windows
     * stay within one storage range each, and whose partials fit the scratch
     * together; the first sequence not yet placed opens the next. */
    bool done[VKV_KV_STEP_MAX] = {false};
    uint32_t members[VKV_KV_STEP_MAX];
    for (uint32_t first = 0; first < n_seq; first++) {
        if (done[first]) continue;
        const paged_place *p0 = &pl[first];
        uint64_t k_lo = p0->k_off, k_hi = p0->k_off + p0->k_bytes, v_lo = p0->v_off, v_hi = p0->v_off + p0->v_bytes;
        uint64_t part = 0;
        uint32_t n = 0;
        for (uint32_t i = first; i < n_seq; i++) {
            const paged_place *p = &pl[i];
            if (done[i] || p->k_base != p0->k_base || p->v_base != p0->v_base) continue;
            const uint64_t nk_lo = p->k_off < k_lo ? p->k_off : k_lo, nk_hi = p->k_off + p->k_bytes > k_hi ? p->k_off + p->k_bytes : k_hi;
            const uint64_t nv_lo = p->v_off < v_lo ? p->v_off : v_lo, nv_hi = p->v_off + p->v_bytes > v_hi ? p->v_off + p->v_bytes : v_hi;
            const uint64_t pb = vkv_kv_paged_part_bytes(kvs[i], n_past[i]);
            if (nk_hi - (nk_lo - nk_lo % align) > max_range || nv_hi - (nv_lo - nv_lo % align) > max_range ||
                part + pb > scratch_bytes)
                continue;
            k_lo = nk_lo, k_hi = nk_hi, v_lo = nv_lo, v_hi = nv_hi;
            part += pb;
            done[i] = true;
            members[n++] = i;
        }
        if (!n) return vkv_error(VKV_ERR_UNSUPPORTED, "layer %u: sequence %u's cache exceeds one storage range", layer, first);
        if ((st = paged_dispatch(kvs, layer, n_past, rows, pl, members, n, q, k, v, out, n_rows, table, table_used, scratch)))
            return st;
    }
    return VKV_OK;
}

vkv_kv_memory vkv_kv_memory_of(const vkv_kv_cache *kv, uint32_t n_past)
{
    const vkv_hparams *hp = &kv->m->hp;
    /* In bytes: K and V rows may have different types, the tiers others than the plain cache's. */
    const uint64_t kb = vkv_kv_row_bytes(kv->plain_k, hp->head_dim), vb = vkv_kv_row_bytes(kv->plain_v, hp->head_dim);
    const uint64_t tkb = vkv_kv_row_bytes(kv->tier_k, hp->head_dim), tvb = vkv_kv_row_bytes(kv->tier_v, hp->head_dim);
    vkv_kv_memory mem = {0};
    uint32_t n = kv->n_ctx0 ? kv->n_ctx0 : n_past;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const tiered_layer *t = &kv->tiers[l];
        mem.uncompressed_context += (kb + vb) * hp->n_head_kv * n;
        if (!t->on) {
            mem.k_retained += kb * hp->n_head_kv * n;
            mem.v_retained += vb * hp->n_head_kv * n;
            continue;
        }
        mem.k_retained += tkb * t->n_ret_total;
        mem.v_retained += tvb * t->n_ret_total;
        mem.k_approximated += tkb * t->n_apx_total;
        mem.appended_capacity += (tkb + tvb) * hp->n_head_kv * (uint64_t)t->cap_new;
        if (n_past > t->n_base) mem.appended += (tkb + tvb) * hp->n_head_kv * (uint64_t)(n_past - t->n_base);
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
        else if (kv->pages) {
            for (uint32_t i = 0; i < kv->n_pages_max; i++)
                total += kv->page_of[l][i] != VKV_KV_NO_PAGE ? vkv_kv_pages_page_bytes(kv->pages) : 0;
        } else total += vkv_kv_cache_bytes(kv->plain_k, hp->n_head_kv, kv->n_slots, hp->head_dim) +
                      vkv_kv_cache_bytes(kv->plain_v, hp->n_head_kv, kv->n_slots, hp->head_dim);
    }
    return total;
}
