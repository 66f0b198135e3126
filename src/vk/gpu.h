/* The Vulkan device layer: instance and device selection, capability probe,
 * memory (suballocated buffers, staging), pipelines built from the embedded
 * SPIR-V, and command recording with barriers and GPU timestamps.
 *
 * Every Vulkan failure is returned as a vkv_status with a message naming the
 * call, the VkResult and the operation; nothing here exits or prints errors. */
#ifndef VKV_GPU_H
#define VKV_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include <volk.h>

#include "core/status.h"
#include "vk/kernels.h"

#define VKV_MAX_COOPMAT_SHAPES 16
#define VKV_MAX_HEAPS 8

/* Component types use VkComponentTypeKHR numbering (= the NV numbering):
 * 0 f16, 1 f32, 2 f64, 3 s8, 4 s16, 5 s32, 6 s64, 7 u8 ... */
typedef struct vkv_coopmat_shape {
    uint32_t m, n, k;
    uint32_t a_type, b_type, c_type, result_type;
    uint32_t scope; /* 3 = subgroup */
} vkv_coopmat_shape;

/* What the probe found. Kernels pick their variant from this. */
typedef struct vkv_caps {
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    VkPhysicalDeviceType type;
    uint32_t vendor_id, device_id, api_version;
    /* subgroups */
    uint32_t subgroup_size, subgroup_min_size, subgroup_max_size;
    bool subgroup_basic, subgroup_arithmetic, subgroup_shuffle, subgroup_ballot;
    bool subgroup_size_control;
    /* arithmetic and storage */
    bool shader_float16, shader_int8, shader_int16, shader_int64;
    bool storage_16bit, storage_8bit;
    bool integer_dot_product, integer_dot_product_4x8_accelerated;
    bool bfloat16;
    bool push_descriptor;
    /* arrays of storage buffers indexed by a dynamically uniform value (the
     * grouped decode attention, vk/ops_attn.h) */
    bool storage_buffer_array_dynamic_indexing;
    /* cooperative matrices */
    bool coopmat_khr, coopmat_nv, coopmat2_nv;
    uint32_t n_coopmat_khr_shapes, n_coopmat_nv_shapes;
    vkv_coopmat_shape coopmat_khr_shapes[VKV_MAX_COOPMAT_SHAPES];
    vkv_coopmat_shape coopmat_nv_shapes[VKV_MAX_COOPMAT_SHAPES];
    bool coopmat_nv_f16_16x16x16; /* the shape our NV coopmat matmul uses */
    /* limits */
    uint64_t max_storage_buffer_range;
    uint64_t min_storage_buffer_offset_alignment;
    uint32_t max_shared_memory;
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_count[3];
    uint32_t max_push_constants;
    uint32_t max_push_descriptors;        /* 0 without VK_KHR_push_descriptor */
    uint32_t max_per_stage_storage_buffers, max_set_storage_buffers;
    uint64_t max_memory_allocation;
    /* memory */
    uint32_t n_heaps;
    uint64_t heap_size[VKV_MAX_HEAPS];
    bool heap_device_local[VKV_MAX_HEAPS];
    bool device_local_host_visible; /* unified memory or ReBAR */
    /* timing */
    bool timestamps;
    float timestamp_period_ns;
} vkv_caps;

typedef struct vkv_instance vkv_instance;

/* Creates the instance. With validate, enables VK_LAYER_KHRONOS_validation
 * when installed (error if requested explicitly through `require_validation`
 * and missing) and counts every error-severity message. */
vkv_status vkv_instance_create(bool validate, bool require_validation, vkv_instance **out);
void vkv_instance_destroy(vkv_instance *inst);
uint32_t vkv_instance_n_devices(const vkv_instance *inst);
const vkv_caps *vkv_instance_caps(const vkv_instance *inst, uint32_t i);
/* Index chosen when the user gave none: discrete > integrated > virtual > CPU. */
uint32_t vkv_instance_preferred_device(const vkv_instance *inst);
bool vkv_instance_validation_enabled(const vkv_instance *inst);
/* Number of error-severity validation messages since creation. */
uint32_t vkv_instance_validation_errors(const vkv_instance *inst);
/* True when VKVECTOR_VALIDATE=1 is set (tests always set it). */
bool vkv_validation_requested(void);

typedef struct vkv_gpu vkv_gpu;

/* Opens device `index` (or the preferred one when index < 0). */
vkv_status vkv_gpu_create(vkv_instance *inst, int index, vkv_gpu **out);
void vkv_gpu_destroy(vkv_gpu *gpu);
const vkv_caps *vkv_gpu_caps(const vkv_gpu *gpu);

/* ---- memory ---- */

typedef struct vkv_buffer vkv_buffer;

typedef enum vkv_mem_kind {
    VKV_MEM_DEVICE,   /* device-local: weights, activations, KV cache */
    VKV_MEM_HOST,     /* host-visible, coherent: staging and readback */
} vkv_mem_kind;

/* A buffer suballocated from a large device allocation. Sizes are padded to
 * 16 bytes so shaders may read whole 32-bit words at the end. */
vkv_status vkv_buffer_create(vkv_gpu *gpu, uint64_t size, vkv_mem_kind kind, const char *what,
                             vkv_buffer **out);
void vkv_buffer_destroy(vkv_gpu *gpu, vkv_buffer *buf);
uint64_t vkv_buffer_size(const vkv_buffer *buf);
/* The buffer `buf` lies in, whole, and buf's byte offset in it: a buffer
 * over buf's memory block (made on the first call for that block; a
 * VkBuffer, no memory), or buf itself when it has its own allocation. The
 * paged kernels bind it for the caches of many sequences at once
 * (vk/ops_attn.h, vkv_op_attention_paged). */
vkv_status vkv_buffer_base(vkv_gpu *gpu, const vkv_buffer *buf, const vkv_buffer **base, uint64_t *offset);
/* Host pointer for VKV_MEM_HOST buffers, NULL otherwise. */
void *vkv_buffer_map(const vkv_buffer *buf);

/* Synchronous copies through the staging buffer (chunked). */
vkv_status vkv_buffer_upload(vkv_gpu *gpu, vkv_buffer *dst, uint64_t offset, const void *src,
                             uint64_t size);
vkv_status vkv_buffer_download(vkv_gpu *gpu, const vkv_buffer *src, uint64_t offset, void *dst,
                               uint64_t size);
vkv_status vkv_buffer_fill(vkv_gpu *gpu, vkv_buffer *dst, uint64_t offset, uint64_t size,
                           uint32_t word);

typedef struct vkv_mem_stats {
    uint64_t device_bytes_allocated; /* VkDeviceMemory held (device kind) */
    uint64_t device_bytes_used;      /* of which handed out to buffers */
    uint64_t device_peak_used;
    uint64_t host_bytes_allocated;
    uint32_t n_blocks;
    uint64_t device_heap_bytes;      /* size of the heap device-kind buffers come from */
    uint64_t n_allocations;          /* vkAllocateMemory calls so far, every kind */
} vkv_mem_stats;
vkv_mem_stats vkv_gpu_mem_stats(const vkv_gpu *gpu);
/* Allocates device memory for `bytes` of later buffers at once (a server's KV
 * pool: docs/SERVE.md, "How it works"), so that buffers created afterwards,
 * tensors larger than half an ordinary block included, are suballocated from
 * it instead of allocating. */
vkv_status vkv_memory_reserve(vkv_gpu *gpu, uint64_t bytes, const char *what);
/* Frees the reserved blocks no buffer holds any more (a server's end); the
 * others become ordinary blocks. */
void vkv_memory_release_reserve(vkv_gpu *gpu);

/* ---- command recording ---- */

/* Starts recording into the device's command buffer. One recording at a time. */
vkv_status vkv_cmd_begin(vkv_gpu *gpu);
/* Dispatches are recorded with vkv_dispatch (vk/dispatch.h), typed by the
 * kernel's push-constant struct. */
/* Records a buffer copy (with barriers around it). */
vkv_status vkv_cmd_copy(vkv_gpu *gpu, const vkv_buffer *src, uint64_t src_off, vkv_buffer *dst,
                        uint64_t dst_off, uint64_t size);
/* One copy command of n regions from src to dst (one barrier before it, as
 * vkv_cmd_copy): what a paged cache's page moves take (kv/kv_cache.h). */
typedef struct vkv_copy_region {
    uint64_t src_off, dst_off, size;
} vkv_copy_region;
vkv_status vkv_cmd_copy_regions(vkv_gpu *gpu, const vkv_buffer *src, vkv_buffer *dst, const vkv_copy_region *regions,
                                uint32_t n);
/* Submits, waits for completion and collects timestamps. */
vkv_status vkv_cmd_submit(vkv_gpu *gpu);
/* Ends a recording that failed with `st`: submits what was recorded so the
 * device stays usable, and returns `st` with its message (the submit's own
 * status and message are dropped: the first error wins). */
vkv_status vkv_cmd_abort(vkv_gpu *gpu, vkv_status st);

/* GPU timing: when enabled, every dispatch is bracketed by timestamps and the
 * per-kernel totals accumulate until reset. */
void vkv_gpu_set_profiling(vkv_gpu *gpu, bool on);
/* Nanoseconds of GPU time of the dispatches of the last submit (0 when
 * timestamps are unsupported or profiling is off). */
double vkv_gpu_last_submit_ns(const vkv_gpu *gpu);
/* Accumulated nanoseconds per kernel since the last reset. */
double vkv_gpu_kernel_ns(const vkv_gpu *gpu, vkv_kernel k);
void vkv_gpu_reset_profile(vkv_gpu *gpu);

/* Host cost of GPU work, counted always (six clock readings a submit,
 * whatever profiling says): what a decode step costs the CPU beside the GPU's
 * own time. Sums since the last reset. */
typedef struct vkv_host_stats {
    uint64_t n_submits;    /* op recordings submitted (vkv_cmd_submit, vkv_cmd_abort) */
    uint64_t n_dispatches; /* vkCmdDispatch calls recorded in them (empty dispatches are not recorded) */
    uint64_t n_copies;     /* vkCmdCopyBuffer calls recorded in them (vkv_cmd_copy) */
    /* Wall ns from the start of vkv_cmd_begin to the return of vkQueueSubmit:
     * command recording, the caller's host code between its dispatches, and
     * the submit; the GPU starts only at the submit. */
    double record_ns;
    double record_cpu_ns;  /* the calling thread's CPU ns over the same spans */
    double submit_ns;      /* of record_ns, the wall ns of vkEndCommandBuffer and vkQueueSubmit */
    double fence_wait_ns;  /* wall ns in vkWaitForFences after those submits */
    /* Submissions of the synchronous copies (buffer upload, download, fill;
     * a pipeline's first dispatch) and their wall ns, recording to fence,
     * when outside an op recording (inside one they are in record_ns). */
    uint64_t n_sync_submits;
    double sync_ns;
} vkv_host_stats;
vkv_host_stats vkv_gpu_host_stats(const vkv_gpu *gpu);
void vkv_gpu_reset_host_stats(vkv_gpu *gpu);
/* Dispatches of kernel k recorded since the last vkv_gpu_reset_host_stats
 * (tests count a step's dispatches per kernel). */
uint64_t vkv_gpu_kernel_dispatches(const vkv_gpu *gpu, vkv_kernel k);

/* ---- pipelines ----
 * Built on first use, through a VkPipelineCache kept on disk per device
 * (README.md, "Device choice"); the time includes the driver's compilation
 * even where it is deferred to the first dispatch. */
typedef struct vkv_pipeline_stats {
    uint32_t n_created;          /* pipelines built on this device so far */
    uint32_t n_from_cache;       /* of which the driver reported a pipeline-cache hit */
    bool hits_reported;          /* the driver reports hits (pipeline creation feedback) */
    double seconds;              /* host time building them */
    uint64_t cache_bytes_loaded; /* pipeline-cache data read from the cache file (0: none) */
    const char *cache_path;      /* the cache file, NULL when the cache is not kept on disk */
} vkv_pipeline_stats;
vkv_pipeline_stats vkv_gpu_pipeline_stats(const vkv_gpu *gpu);

/* Workgroup size (specialization constant 0) kernel k is built with on this
 * device: callers size their dispatches by it. */
uint32_t vkv_kernel_workgroup_size(const vkv_gpu *gpu, vkv_kernel k);

/* Name of a VkResult, e.g. "VK_ERROR_OUT_OF_DEVICE_MEMORY". */
const char *vkv_vk_result_name(VkResult r);

#endif
