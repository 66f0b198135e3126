/* Helpers private to the op wrappers of vk/ (ops.c, ops_attn.c, ops_vector.c,
 * ops_select.c); what code outside vk/ may use is in vk/dispatch.h. */
#ifndef VKV_OPS_INTERNAL_H
#define VKV_OPS_INTERNAL_H

#include "vk/dispatch.h"

/* Rows of `row_bytes` per dispatch so that they fit one bound range and each
 * chunk's start offset stays aligned (0: no such count). */
uint64_t vkv_ops_rows_per_range(const vkv_gpu *gpu, uint64_t row_bytes);
/* Tile sizes of attn.comp and attn_tiered.comp (the shared arrays of
 * vk/tiles.h) for head_dim hd, `rows` (query, head) rows per KV head and
 * workgroup size wg. tile_q: a power of two dividing wg whose Q tile fits
 * and whose rows' threads cover head_dim in VKV_ATTN_MAX_COLS vec4 each;
 * with shrink_to_rows it shrinks to the rows present so idle rows do not
 * waste the workgroup. tile_k: as many keys as the K/V and score arrays hold. */
void vkv_attn_tiles(uint32_t hd, uint32_t rows, bool shrink_to_rows, uint32_t wg, uint32_t *tile_q, uint32_t *tile_k);

#endif
