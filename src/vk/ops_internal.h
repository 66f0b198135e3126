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
/* Spreads `count` workgroups over x and y within the device limit. */
void vkv_ops_spread_groups(const vkv_gpu *gpu, uint64_t count, uint32_t *gx, uint32_t *gy);

#endif
