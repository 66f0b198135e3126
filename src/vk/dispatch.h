/* Recording a kernel's dispatch: what the op wrappers of vk/ops*.c use, and
 * what code outside vk/ that owns its kernels (the scorers of src/press/, the
 * Gram of calib/) records its dispatches with. Binding views within the
 * device's storage-buffer limits, checking them, spreading workgroups over x
 * and y, and vkv_dispatch: the one path to the device, typed by the kernel's
 * push-constant struct (the contract is described in src/vk/kernels.h). */
#ifndef VKV_DISPATCH_H
#define VKV_DISPATCH_H

#include "vk/ops.h"

/* A bound range of a buffer: [offset, offset+range). Offsets must be multiples
 * of caps.min_storage_buffer_offset_alignment and range <= the max range;
 * callers split large tensors to obey that (vkv_ops_check_single_range). */
typedef struct vkv_binding {
    const vkv_buffer *buf;
    uint64_t offset;
    uint64_t range;   /* 0 = to the end of the buffer (clamped to the max range) */
} vkv_binding;

/* Largest bindable range (maxStorageBufferRange, rounded down to 16). */
uint64_t vkv_ops_max_range(const vkv_gpu *gpu);
/* minStorageBufferOffsetAlignment: every bound offset is a multiple of it. */
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

/* Whether the device takes k's binding arrays (vk/kernels.h,
 * VKV_KERNEL_ARRAY_BINDINGS): dynamic indexing of storage-buffer arrays and
 * enough storage-buffer (and push) descriptors; true for kernels without. */
bool vkv_kernel_arrays_fit(const vkv_gpu *gpu, vkv_kernel k);

/* Records one dispatch of kernel k into the open recording:
 *   vkv_dispatch(gpu, k, bindings, n_bindings, pc_ptr, groups_x, groups_y, groups_z)
 * bindings: one per buffer of the kernel (vkv_kernel_n_buffers: an array
 * binding's buffers in order); pc_ptr: a pointer to one of the
 * push-constant structs of vk/kernels.h (VKV_PUSH_CONSTANT_LIST). Any other
 * pointer does not compile (_Generic has no default); a struct other than the
 * one vk/kernels.h declares for k returns VKV_ERR_ARG naming the kernel and
 * both structs. A full compute->compute memory barrier is placed before the
 * dispatch (ops are ordered, as ggml's Vulkan backend orders them); zero
 * workgroups record nothing. */
#define vkv_dispatch(gpu, k, bindings, n_bindings, pc_ptr, groups_x, groups_y, groups_z)                        \
    vkv_dispatch_typed((gpu), (k), (bindings), (n_bindings), vkv_pc_id_of(pc_ptr), (pc_ptr),                     \
                       (uint32_t)sizeof *(pc_ptr), (groups_x), (groups_y), (groups_z))
/* The id of the push-constant struct pc_ptr points to. */
#define vkv_pc_id_of(pc_ptr) _Generic(*(pc_ptr) VKV_PUSH_CONSTANT_LIST(VKV_PC_ID_ASSOCIATION))
#define VKV_PC_ID_ASSOCIATION(pc) , pc : pc##_id
/* What vkv_dispatch expands to. Call the macro, not this: it derives pc and
 * push_size from the pointer's type. */
vkv_status vkv_dispatch_typed(vkv_gpu *gpu, vkv_kernel k, const vkv_binding *bindings, uint32_t n_bindings,
                              vkv_pc_id pc, const void *push, uint32_t push_size, uint32_t groups_x,
                              uint32_t groups_y, uint32_t groups_z);

#endif
