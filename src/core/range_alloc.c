#include "core/range_alloc.h"

#include <stdlib.h>
#include <string.h>

bool vkv_range_alloc_init(vkv_range_alloc *a, uint64_t capacity)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->cap_free = 16;
    a->free = malloc(a->cap_free * sizeof *a->free);
    if (!a->free) return false;
    a->free[0] = (vkv_range){0, capacity};
    a->n_free = capacity ? 1 : 0;
    return true;
}

void vkv_range_alloc_destroy(vkv_range_alloc *a)
{
    free(a->free);
    memset(a, 0, sizeof *a);
}

static bool ensure_slot(vkv_range_alloc *a)
{
    if (a->n_free < a->cap_free) return true;
    uint32_t cap = a->cap_free * 2;
    vkv_range *f = realloc(a->free, cap * sizeof *f);
    if (!f) return false;
    a->free = f;
    a->cap_free = cap;
    return true;
}

static void remove_at(vkv_range_alloc *a, uint32_t i)
{
    memmove(&a->free[i], &a->free[i + 1], (a->n_free - i - 1) * sizeof *a->free);
    a->n_free--;
}

static void insert_at(vkv_range_alloc *a, uint32_t i, vkv_range r)
{
    memmove(&a->free[i + 1], &a->free[i], (a->n_free - i) * sizeof *a->free);
    a->free[i] = r;
    a->n_free++;
}

bool vkv_range_alloc_take(vkv_range_alloc *a, uint64_t size, uint64_t align, uint64_t *offset)
{
    if (size == 0 || align == 0 || (align & (align - 1))) return false;
    for (uint32_t i = 0; i < a->n_free; i++) {
        vkv_range r = a->free[i];
        uint64_t start = (r.offset + align - 1) & ~(align - 1);
        if (start < r.offset || start - r.offset > r.size || r.size - (start - r.offset) < size) continue;
        uint64_t pad = start - r.offset, tail = r.size - pad - size;
        /* Splitting may need one extra slot (padding before and tail after). */
        if (pad && tail && !ensure_slot(a)) return false;
        if (pad && tail) {
            a->free[i].size = pad;
            insert_at(a, i + 1, (vkv_range){start + size, tail});
        } else if (pad) {
            a->free[i].size = pad;
        } else if (tail) {
            a->free[i] = (vkv_range){start + size, tail};
        } else {
            remove_at(a, i);
        }
        a->used += size;
        *offset = start;
        return true;
    }
    return false;
}

void vkv_range_alloc_give(vkv_range_alloc *a, uint64_t offset, uint64_t size)
{
    if (!size) return;
    uint32_t i = 0; /* first free range after offset */
    while (i < a->n_free && a->free[i].offset < offset) i++;
    bool merge_prev = i > 0 && a->free[i - 1].offset + a->free[i - 1].size == offset;
    bool merge_next = i < a->n_free && offset + size == a->free[i].offset;
    a->used -= size;
    if (merge_prev && merge_next) {
        a->free[i - 1].size += size + a->free[i].size;
        remove_at(a, i);
    } else if (merge_prev) {
        a->free[i - 1].size += size;
    } else if (merge_next) {
        a->free[i].offset = offset;
        a->free[i].size += size;
    } else {
        /* Without a slot the range is leaked rather than corrupting the list;
         * only reachable when the host is out of memory. */
        if (!ensure_slot(a)) return;
        insert_at(a, i, (vkv_range){offset, size});
    }
}

uint64_t vkv_range_alloc_largest_free(const vkv_range_alloc *a)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < a->n_free; i++)
        if (a->free[i].size > m) m = a->free[i].size;
    return m;
}
