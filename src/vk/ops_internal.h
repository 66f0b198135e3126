/* Helpers shared by the op wrappers (vk/ops.c, vk/ops_attn.c): the rules for
 * binding views within the device's storage-buffer limits. */
#ifndef VKV_OPS_INTERNAL_H
#define VKV_OPS_INTERNAL_H

#include "vk/ops.h"

/* Largest bindable range (maxStorageBufferRange, rounded down to 16). */
uint64_t vkv_ops_max_range(const vkv_gpu *gpu);
uint64_t vkv_ops_align(const vkv_gpu *gpu);
/* A binding of [byte_offset, byte_offset + size) of a view; the range is
 * rounded up to 16 bytes (kernels read vec4s; buffers are padded to 16). */
vkv_binding vkv_ops_bind(vkv_view v, uint64_t byte_offset, uint64_t size);
/* The view has a buffer, an aligned offset and `bytes` bytes behind it. */
vkv_status vkv_ops_check_view(const vkv_gpu *gpu, vkv_view v, uint64_t bytes, const char *op, const char *what);
/* `bytes` fits one bound range. */
vkv_status vkv_ops_check_single_range(const vkv_gpu *gpu, uint64_t bytes, const char *op, const char *what);
/* Tile sizes of attn.comp and attn_tiered.comp (the shared arrays of
 * vk/tiles.h) for head_dim hd, `rows` (query, head) rows per KV head and
 * workgroup size wg. tile_q: a power of two dividing wg whose Q tile fits
 * and whose rows' threads cover head_dim in VKV_ATTN_MAX_COLS vec4 each;
 * with shrink_to_rows it shrinks to the rows present so idle rows do not
 * waste the workgroup. tile_k: as many keys as the K/V and score arrays hold. */
void vkv_attn_tiles(uint32_t hd, uint32_t rows, bool shrink_to_rows, uint32_t wg, uint32_t *tile_q, uint32_t *tile_k);
/* Spreads `count` workgroups over x and y within the device limit. */
void vkv_ops_spread_groups(const vkv_gpu *gpu, uint64_t count, uint32_t *gx, uint32_t *gy);

#endif
