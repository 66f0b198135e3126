/* Private state shared by the files of src/vk. */
#ifndef VKV_VK_INTERNAL_H
#define VKV_VK_INTERNAL_H

#include <time.h>

#include "core/range_alloc.h"
#include "vk/gpu.h"

/* Checks a VkResult: on failure records "<call> failed with <VkResult> while
 * <what>" and jumps to the enclosing function's `error` label with `st` set. */
#define VK_CHECK(call, what)                                                        \
    do {                                                                            \
        VkResult vk_check_res_ = (call);                                            \
        if (vk_check_res_ != VK_SUCCESS) {                                          \
            st = vkv_vk_error(vk_check_res_, #call, what);                          \
            goto error;                                                             \
        }                                                                           \
    } while (0)

vkv_status vkv_vk_error(VkResult r, const char *call, const char *what);

#define VKV_MAX_DEVICES 16

struct vkv_instance {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    bool validation;
    bool debug_utils; /* VK_EXT_debug_utils is enabled: objects get names */
    uint32_t validation_errors; /* atomically incremented by the callback */
    uint32_t n_devices;
    VkPhysicalDevice phys[VKV_MAX_DEVICES];
    vkv_caps caps[VKV_MAX_DEVICES];
};

/* One large VkDeviceMemory with a range allocator over it. */
typedef struct vkv_mem_block {
    VkDeviceMemory memory;
    uint32_t memory_type;
    vkv_mem_kind kind;
    void *mapped; /* host kind only */
    vkv_range_alloc ranges;
    bool pool;    /* set aside by vkv_memory_reserve: large tensors fit here too */
    struct vkv_buffer *whole; /* a buffer over the whole block (vkv_buffer_base), or NULL */
} vkv_mem_block;

struct vkv_buffer {
    VkBuffer buffer;
    uint64_t size;        /* usable size (padded to 16) */
    vkv_mem_block *block; /* NULL when dedicated */
    VkDeviceMemory dedicated;
    uint64_t offset, reserved; /* range taken from the block */
    vkv_mem_kind kind;
    void *mapped;
};

#define VKV_MAX_TIMESTAMPS 8192

typedef struct vkv_pipeline {
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
} vkv_pipeline;

struct vkv_gpu {
    vkv_instance *inst;
    VkPhysicalDevice phys;
    const vkv_caps *caps;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;

    /* memory */
    VkPhysicalDeviceMemoryProperties mem_props;
    int32_t mem_type_device, mem_type_host;
    vkv_mem_block **blocks; /* stable pointers: buffers point at their block */
    uint32_t n_blocks, cap_blocks;
    uint64_t block_size;
    vkv_mem_stats stats;
    vkv_buffer *staging;

    /* pipelines, built on first use */
    vkv_pipeline pipelines[VKV_KERNEL_COUNT];
    VkShaderModule modules[VKV_KERNEL_COUNT];
    VkPipelineCache pipeline_cache; /* VK_NULL_HANDLE when it could not be created */
    char *pipeline_cache_path;      /* NULL: the cache is not kept on disk */
    uint64_t pipeline_spirv_hash, pipeline_cache_loaded_hash;
    vkv_pipeline_stats pipeline_stats;

    /* fallback when VK_KHR_push_descriptor is missing: one pool reset per submit */
    VkDescriptorPool desc_pool;
    uint32_t desc_pool_capacity, desc_pool_used;

    /* commands */
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkCommandBuffer xfer_cmd; /* synchronous copies outside a recording */
    VkFence xfer_fence;
    bool recording;
    uint32_t n_recorded;

    /* timestamps */
    VkQueryPool query_pool;
    bool profiling;
    uint32_t n_queries;
    vkv_kernel query_kernel[VKV_MAX_TIMESTAMPS / 2];
    double last_submit_ns;
    double kernel_ns[VKV_KERNEL_COUNT];

    /* host cost (vkv_gpu_host_stats); the clocks of the open recording and
     * of the synchronous copy being recorded, ns */
    vkv_host_stats host;
    uint64_t kernel_dispatches[VKV_KERNEL_COUNT]; /* since the last vkv_gpu_reset_host_stats */
    double record_start_ns, record_start_cpu_ns, sync_start_ns;
};

/* Names a Vulkan object for validation messages and debuggers (a no-op
 * without VK_EXT_debug_utils). */
void vkv_debug_name(const vkv_gpu *gpu, VkObjectType type, uint64_t handle, const char *name);

vkv_status vkv_memory_init(vkv_gpu *gpu);
void vkv_memory_destroy(vkv_gpu *gpu);
/* Records into the transfer command buffer, then submits it and waits. */
vkv_status vkv_xfer_begin(vkv_gpu *gpu);
vkv_status vkv_xfer_end(vkv_gpu *gpu, const char *what);
vkv_status vkv_pipeline_get(vkv_gpu *gpu, vkv_kernel k, const vkv_pipeline **out);
void vkv_pipelines_destroy(vkv_gpu *gpu);
/* pipeline_cache.c: reads the device's cache file (never fails: a bad file is
 * ignored with a warning), and writes it back when pipelines were added. */
void vkv_pipeline_cache_open(vkv_gpu *gpu);
void vkv_pipeline_cache_close(vkv_gpu *gpu);
/* Creates p->pipeline through the cache, counts it, and dispatches it once
 * with no workgroups so a driver that compiles at first use does it now. */
vkv_status vkv_pipeline_compile(vkv_gpu *gpu, VkComputePipelineCreateInfo *ci, vkv_pipeline *p, vkv_kernel k,
                                const char *what);
/* Without push descriptors: the pool holds VKV_POOL_BUFFERS_PER_SET storage
 * buffers per set, and a set of n buffers counts as this many of its sets
 * (desc_pool_used), so a kernel's binding arrays never exhaust the pool's
 * buffers before its sets. */
#define VKV_POOL_BUFFERS_PER_SET 8u
static inline uint32_t vkv_pool_set_units(uint32_t n_buffers)
{
    return (n_buffers + VKV_POOL_BUFFERS_PER_SET - 1) / VKV_POOL_BUFFERS_PER_SET;
}
/* Writes of kernel k's bindings: w[b] covers binding b's buffers bi[...]
 * (in order, vkv_kernel_binding_buffers of each). */
void vkv_descriptor_writes(vkv_kernel k, VkDescriptorBufferInfo *bi, VkWriteDescriptorSet *w);
double vkv_pipeline_clock(void); /* seconds, monotonic */
/* Nanoseconds of a clock: CLOCK_MONOTONIC (wall) or CLOCK_THREAD_CPUTIME_ID
 * (the calling thread's CPU time). */
double vkv_clock_ns(clockid_t clock);
vkv_status vkv_cmd_init(vkv_gpu *gpu);
void vkv_cmd_destroy(vkv_gpu *gpu);

#endif
