/* The KV page pool (see kv_pages.h). */
#include "kv/kv_pages.h"

#include <stdlib.h>
#include <string.h>

#include "kvlayout/kv_layout.h"

#define SLAB_TARGET_BYTES (4ull << 20)

typedef struct slab {
    vkv_buffer *buf;      /* NULL: this slot holds no slab */
    const vkv_buffer *base; /* the buffer over its memory block (vkv_buffer_base), */
    uint64_t base_off;      /* and its byte offset there */
    uint32_t *refs;       /* [slab_pages] */
    uint32_t *free_list;  /* [slab_pages] a stack of free page indices */
    uint32_t n_free;
} slab;

struct vkv_kv_pages {
    vkv_gpu *gpu;
    uint32_t n_kv_head, head_dim;
    vkv_kv_pages_params p;
    uint64_t page_bytes, v_part;
    slab *slabs;
    uint32_t n_slabs, cap_slabs;
    vkv_buffer *staging_k, *staging_v;
    vkv_kv_pages_stats stats;
};

static uint64_t align16(uint64_t b) { return (b + 15) & ~15ull; }

static void part_bytes(const vkv_hparams *hp, vkv_dtype k_type, vkv_dtype v_type, uint32_t page_shift, uint64_t *k,
                       uint64_t *v)
{
    const uint64_t slots = (uint64_t)hp->n_head_kv << page_shift;
    *k = align16(slots * vkv_kv_row_bytes(k_type, hp->head_dim));
    *v = align16(slots * vkv_kv_row_bytes(v_type, hp->head_dim));
}

uint64_t vkv_kv_pages_plan_page_bytes(const vkv_hparams *hp, vkv_dtype k_type, vkv_dtype v_type, uint32_t page_shift)
{
    uint64_t k, v;
    part_bytes(hp, k_type, v_type, page_shift, &k, &v);
    return k + v;
}

vkv_status vkv_kv_pages_create(vkv_gpu *gpu, const vkv_hparams *hp, const vkv_kv_pages_params *p, vkv_kv_pages **out)
{
    *out = NULL;
    if (!vkv_kv_type_ok(p->k_type) || !vkv_kv_type_ok(p->v_type))
        return vkv_error(VKV_ERR_ARG, "KV pages of row types %u / %u (f16, f32, q8_0 or q4_0)", p->k_type, p->v_type);
    if (p->page_shift > 12) return vkv_error(VKV_ERR_ARG, "pages of 2^%u slots (at most 4096)", p->page_shift);
    if (!p->staging_slots) return vkv_error(VKV_ERR_ARG, "KV pages need a staging area of at least one slot");
    vkv_kv_pages *pool = calloc(1, sizeof *pool);
    if (!pool) return vkv_error(VKV_ERR_OOM, "out of host memory");
    pool->gpu = gpu;
    pool->n_kv_head = hp->n_head_kv;
    pool->head_dim = hp->head_dim;
    pool->p = *p;
    /* whole pages: a page is copied to the staging area whole */
    const uint32_t page = 1u << p->page_shift;
    pool->p.staging_slots = (p->staging_slots + page - 1) / page * page;
    uint64_t kb, vb;
    part_bytes(hp, p->k_type, p->v_type, p->page_shift, &kb, &vb);
    pool->v_part = kb;
    pool->page_bytes = kb + vb;
    if (!pool->p.slab_pages) {
        uint64_t n = SLAB_TARGET_BYTES / pool->page_bytes;
        pool->p.slab_pages = n < 1 ? 1 : n > 4096 ? 4096 : (uint32_t)n;
    }
    vkv_status st;
    if ((st = vkv_buffer_create(gpu, vkv_kv_cache_bytes(p->k_type, hp->n_head_kv, pool->p.staging_slots, hp->head_dim),
                                VKV_MEM_DEVICE, "the KV pages' K staging", &pool->staging_k)) ||
        (st = vkv_buffer_create(gpu, vkv_kv_cache_bytes(p->v_type, hp->n_head_kv, pool->p.staging_slots, hp->head_dim),
                                VKV_MEM_DEVICE, "the KV pages' V staging", &pool->staging_v))) {
        vkv_kv_pages_free(pool);
        return st;
    }
    *out = pool;
    return VKV_OK;
}

static void slab_release(vkv_kv_pages *pool, slab *s)
{
    vkv_buffer_destroy(pool->gpu, s->buf);
    free(s->refs);
    free(s->free_list);
    memset(s, 0, sizeof *s);
}

void vkv_kv_pages_free(vkv_kv_pages *pool)
{
    if (!pool) return;
    for (uint32_t i = 0; i < pool->n_slabs; i++) slab_release(pool, &pool->slabs[i]);
    free(pool->slabs);
    vkv_buffer_destroy(pool->gpu, pool->staging_k);
    vkv_buffer_destroy(pool->gpu, pool->staging_v);
    free(pool);
}

uint64_t vkv_kv_pages_page_bytes(const vkv_kv_pages *pool) { return pool->page_bytes; }
uint64_t vkv_kv_pages_v_part(const vkv_kv_pages *pool) { return pool->v_part; }
uint32_t vkv_kv_pages_shift(const vkv_kv_pages *pool) { return pool->p.page_shift; }
vkv_dtype vkv_kv_pages_k_type(const vkv_kv_pages *pool) { return pool->p.k_type; }
vkv_dtype vkv_kv_pages_v_type(const vkv_kv_pages *pool) { return pool->p.v_type; }
uint32_t vkv_kv_pages_staging_slots(const vkv_kv_pages *pool) { return pool->p.staging_slots; }
vkv_gpu *vkv_kv_pages_gpu(const vkv_kv_pages *pool) { return pool->gpu; }
vkv_buffer *vkv_kv_pages_staging_k(const vkv_kv_pages *pool) { return pool->staging_k; }
vkv_buffer *vkv_kv_pages_staging_v(const vkv_kv_pages *pool) { return pool->staging_v; }
vkv_kv_pages_stats vkv_kv_pages_stats_of(const vkv_kv_pages *pool) { return pool->stats; }
void vkv_kv_pages_count_copy(vkv_kv_pages *pool) { pool->stats.copied++; }

static slab *slab_of(const vkv_kv_pages *pool, uint32_t page, uint32_t *k)
{
    const uint32_t i = page / pool->p.slab_pages;
    *k = page % pool->p.slab_pages;
    return i < pool->n_slabs && pool->slabs[i].buf ? &pool->slabs[i] : NULL;
}

/* A new slab in the first empty slot of the table. */
static vkv_status slab_add(vkv_kv_pages *pool, uint32_t *index)
{
    uint32_t i = 0;
    while (i < pool->n_slabs && pool->slabs[i].buf) i++;
    if (i == pool->n_slabs) {
        if (pool->n_slabs == pool->cap_slabs) {
            uint32_t cap = pool->cap_slabs ? 2 * pool->cap_slabs : 16;
            slab *grown = realloc(pool->slabs, sizeof *grown * cap);
            if (!grown) return vkv_error(VKV_ERR_OOM, "out of host memory");
            pool->slabs = grown;
            pool->cap_slabs = cap;
        }
        memset(&pool->slabs[pool->n_slabs++], 0, sizeof(slab));
    }
    slab *s = &pool->slabs[i];
    const uint32_t n = pool->p.slab_pages;
    if (!(s->refs = calloc(n, sizeof *s->refs)) || !(s->free_list = malloc(sizeof *s->free_list * n))) {
        slab_release(pool, s);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    vkv_status st = vkv_buffer_create(pool->gpu, pool->page_bytes * n, VKV_MEM_DEVICE, "KV pages", &s->buf);
    if (!st) st = vkv_buffer_base(pool->gpu, s->buf, &s->base, &s->base_off);
    if (st) {
        slab_release(pool, s);
        return st;
    }
    /* popped lowest first, so a sequence's pages tend to lie in order */
    for (uint32_t k = 0; k < n; k++) s->free_list[k] = n - 1 - k;
    s->n_free = n;
    pool->stats.slab_pages += n;
    pool->stats.n_slabs++;
    *index = i;
    return VKV_OK;
}

vkv_status vkv_kv_pages_alloc_near(vkv_kv_pages *pool, uint32_t near, uint32_t *page)
{
    *page = VKV_KV_NO_PAGE;
    if (pool->p.max_pages && pool->stats.in_use >= pool->p.max_pages)
        return vkv_error(VKV_ERR_OOM, "the KV page pool is full: %llu pages of %llu bytes in use",
                         (unsigned long long)pool->stats.in_use, (unsigned long long)pool->page_bytes);
    uint32_t near_k;
    const slab *ns = near == VKV_KV_NO_PAGE ? NULL : slab_of(pool, near, &near_k);
    /* the first slab with a free page (in near's memory block if one has it),
     * so the last slabs empty and go back */
    uint32_t i = 0;
    if (ns)
        while (i < pool->n_slabs && !(pool->slabs[i].buf && pool->slabs[i].n_free && pool->slabs[i].base == ns->base)) i++;
    if (!ns || i == pool->n_slabs) {
        i = 0;
        while (i < pool->n_slabs && !(pool->slabs[i].buf && pool->slabs[i].n_free)) i++;
    }
    vkv_status st;
    if (i == pool->n_slabs && (st = slab_add(pool, &i))) return st;
    slab *s = &pool->slabs[i];
    const uint32_t k = s->free_list[--s->n_free];
    s->refs[k] = 1;
    pool->stats.in_use++;
    pool->stats.allocated++;
    *page = i * pool->p.slab_pages + k;
    return VKV_OK;
}

void vkv_kv_pages_ref(vkv_kv_pages *pool, uint32_t page)
{
    uint32_t k;
    slab *s = slab_of(pool, page, &k);
    if (!s || !s->refs[k]) return;
    if (++s->refs[k] == 2) pool->stats.shared++;
}

void vkv_kv_pages_unref(vkv_kv_pages *pool, uint32_t page)
{
    uint32_t k;
    slab *s = slab_of(pool, page, &k);
    if (!s || !s->refs[k]) return;
    if (--s->refs[k] == 1) pool->stats.shared--;
    if (s->refs[k]) return;
    s->free_list[s->n_free++] = k;
    pool->stats.in_use--;
    if (s->n_free == pool->p.slab_pages) {
        pool->stats.slab_pages -= pool->p.slab_pages;
        pool->stats.n_slabs--;
        slab_release(pool, s);
    }
}

uint32_t vkv_kv_pages_refs(const vkv_kv_pages *pool, uint32_t page)
{
    uint32_t k;
    const slab *s = slab_of(pool, page, &k);
    return s ? s->refs[k] : 0;
}

vkv_buffer *vkv_kv_pages_slab(const vkv_kv_pages *pool, uint32_t page, uint64_t *offset)
{
    uint32_t k;
    const slab *s = slab_of(pool, page, &k);
    *offset = s ? k * pool->page_bytes : 0;
    return s ? s->buf : NULL;
}

const vkv_buffer *vkv_kv_pages_base(const vkv_kv_pages *pool, uint32_t page, uint64_t *offset)
{
    uint32_t k;
    const slab *s = slab_of(pool, page, &k);
    *offset = s ? s->base_off + k * pool->page_bytes : 0;
    return s ? s->base : NULL;
}
