/* First-fit range allocator with coalescing: hands out aligned [offset, size)
 * ranges of one large block. Pure bookkeeping (no Vulkan), so it is unit
 * tested on its own; src/vk/memory.c puts one over every device allocation. */
#ifndef VKV_RANGE_ALLOC_H
#define VKV_RANGE_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vkv_range {
    uint64_t offset, size;
} vkv_range;

typedef struct vkv_range_alloc {
    uint64_t capacity;
    vkv_range *free;   /* free ranges sorted by offset, never adjacent (always coalesced) */
    uint32_t n_free, cap_free;
    uint64_t used;     /* bytes handed out, including alignment padding */
} vkv_range_alloc;

bool vkv_range_alloc_init(vkv_range_alloc *a, uint64_t capacity);
void vkv_range_alloc_destroy(vkv_range_alloc *a);
/* Finds the first free range that fits size bytes at a multiple of align
 * (a power of two). On success writes the start and returns true. The padding
 * before the aligned start stays free. */
bool vkv_range_alloc_take(vkv_range_alloc *a, uint64_t size, uint64_t align, uint64_t *offset);
/* Returns [offset, offset+size) exactly as taken. */
void vkv_range_alloc_give(vkv_range_alloc *a, uint64_t offset, uint64_t size);
/* Largest free range (for reporting fragmentation). */
uint64_t vkv_range_alloc_largest_free(const vkv_range_alloc *a);

#endif
