/* The KV page pool (docs/ARCHITECTURE.md §2, "Paged caches"): device memory
 * in pages that every paged plain cache (kv/kv_cache.h, vkv_kv_create_paged)
 * of one server maps, shares and returns. A page holds 2^page_shift
 * consecutive slots of every KV head of one layer: its K rows
 * [n_kv_head, page_slots] of k_type, then its V rows [n_kv_head, page_slots]
 * of v_type, so
 *   K row of slot j, head h = page byte + h * page_slots * K row + (j mod page_slots) * K row
 *   V row                   = page byte + v_part + h * page_slots * V row + ...
 * Pages live in slabs (buffers of slab_pages pages suballocated from the
 * device's memory, the server's reserve), made when no slab has a free page
 * and given back when their last page is. Each page has a reference count:
 * the caches that map it and the prefix cache's entries; a page referenced
 * more than once is never written (its writer copies it first: copy on
 * write). One staging area of [n_kv_head, staging_slots] K and V rows lets
 * a paged cache run the contiguous kernels on a sequence's whole layer. */
#ifndef VKV_KV_PAGES_H
#define VKV_KV_PAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "model/model.h"
#include "vk/gpu.h"

typedef struct vkv_kv_pages vkv_kv_pages;

#define VKV_KV_NO_PAGE UINT32_MAX

typedef struct vkv_kv_pages_params {
    vkv_dtype k_type, v_type;  /* the rows' types (f16, f32, q8_0, q4_0) */
    uint32_t page_shift;       /* log2 of the slots per page */
    uint32_t slab_pages;       /* pages per slab; 0: about 4 MiB of them */
    uint32_t staging_slots;    /* slots per KV head of the staging area (the longest sequence) */
    uint64_t max_pages;        /* the most pages in use at once; 0: no limit but the device's */
} vkv_kv_pages_params;

vkv_status vkv_kv_pages_create(vkv_gpu *gpu, const vkv_hparams *hp, const vkv_kv_pages_params *p, vkv_kv_pages **out);
void vkv_kv_pages_free(vkv_kv_pages *pool);

/* Bytes of one page, of its K part (where its V rows start), the slots a page holds. */
uint64_t vkv_kv_pages_page_bytes(const vkv_kv_pages *pool);
uint64_t vkv_kv_pages_v_part(const vkv_kv_pages *pool);
uint32_t vkv_kv_pages_shift(const vkv_kv_pages *pool);
vkv_dtype vkv_kv_pages_k_type(const vkv_kv_pages *pool);
vkv_dtype vkv_kv_pages_v_type(const vkv_kv_pages *pool);
uint32_t vkv_kv_pages_staging_slots(const vkv_kv_pages *pool);
vkv_gpu *vkv_kv_pages_gpu(const vkv_kv_pages *pool);
/* Page bytes for these dims and types (what a server plans with). */
uint64_t vkv_kv_pages_plan_page_bytes(const vkv_hparams *hp, vkv_dtype k_type, vkv_dtype v_type, uint32_t page_shift);

/* A free page, its count 1, in the memory block of page `near` when one
 * there is free (VKV_KV_NO_PAGE: anywhere); a new slab when no slab has one.
 * Fails, naming the pool's size, past max_pages. */
vkv_status vkv_kv_pages_alloc_near(vkv_kv_pages *pool, uint32_t near, uint32_t *page);
void vkv_kv_pages_ref(vkv_kv_pages *pool, uint32_t page);
/* Drops a reference; the last one frees the page (and its slab when the
 * slab holds no other). Only between recordings: a freed slab's memory goes
 * back to the device allocator at once. */
void vkv_kv_pages_unref(vkv_kv_pages *pool, uint32_t page);
uint32_t vkv_kv_pages_refs(const vkv_kv_pages *pool, uint32_t page);
/* The page's slab and its byte offset in the slab; the buffer over the slab's
 * memory block and its byte offset there (the paged kernels' pool window).
 * NULL for a page not allocated. */
vkv_buffer *vkv_kv_pages_slab(const vkv_kv_pages *pool, uint32_t page, uint64_t *offset);
const vkv_buffer *vkv_kv_pages_base(const vkv_kv_pages *pool, uint32_t page, uint64_t *offset);
/* The staging area's K and V caches [n_kv_head, staging_slots] rows. */
vkv_buffer *vkv_kv_pages_staging_k(const vkv_kv_pages *pool);
vkv_buffer *vkv_kv_pages_staging_v(const vkv_kv_pages *pool);

typedef struct vkv_kv_pages_stats {
    uint64_t in_use;       /* pages with a reference */
    uint64_t shared;       /* pages with more than one */
    uint64_t slab_pages;   /* pages the slabs hold (in use or free) */
    uint64_t n_slabs;
    uint64_t allocated, copied; /* pages handed out and copied on write since the start */
} vkv_kv_pages_stats;
vkv_kv_pages_stats vkv_kv_pages_stats_of(const vkv_kv_pages *pool);
/* Counts a page copied on write (kv_cache.c does the copy). */
void vkv_kv_pages_count_copy(vkv_kv_pages *pool);

#endif
