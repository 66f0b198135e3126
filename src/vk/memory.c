/* Device memory: large VkDeviceMemory blocks suballocated with a range
 * allocator, one VkBuffer per tensor bound inside a block, and a host-visible
 * staging buffer for uploads and downloads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/vk_internal.h"

#define STAGING_BYTES (64ull << 20)
#define DEFAULT_BLOCK_BYTES (256ull << 20)

static int32_t find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, VkMemoryPropertyFlags want,
                                VkMemoryPropertyFlags avoid)
{
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & want) == want && !(f & avoid)) return (int32_t)i;
    }
    return -1;
}

vkv_status vkv_memory_init(vkv_gpu *gpu)
{
    vkGetPhysicalDeviceMemoryProperties(gpu->phys, &gpu->mem_props);
    const VkPhysicalDeviceMemoryProperties *mp = &gpu->mem_props;
    gpu->mem_type_device = find_memory_type(mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (gpu->mem_type_device < 0) gpu->mem_type_device = 0;
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    gpu->mem_type_host = find_memory_type(mp, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    if (gpu->mem_type_host < 0) gpu->mem_type_host = find_memory_type(mp, hv, 0);
    if (gpu->mem_type_host < 0)
        return vkv_error(VKV_ERR_UNSUPPORTED, "device '%s' has no host-visible coherent memory", gpu->caps->name);

    /* Blocks are a fraction of the heap so a small heap is not exhausted by one. */
    uint64_t heap = mp->memoryHeaps[mp->memoryTypes[gpu->mem_type_device].heapIndex].size;
    gpu->stats.device_heap_bytes = heap;
    gpu->block_size = DEFAULT_BLOCK_BYTES;
    /* Smaller blocks make every buffer that does not fit allocate (the tests
     * that check where memory comes from set this). */
    const char *block_mib = getenv("VKVECTOR_BLOCK_MIB");
    if (block_mib && atoi(block_mib) > 0) gpu->block_size = (uint64_t)atoi(block_mib) << 20;
    if (gpu->block_size > heap / 4) gpu->block_size = heap / 4;
    if (gpu->caps->max_memory_allocation && gpu->block_size > gpu->caps->max_memory_allocation)
        gpu->block_size = gpu->caps->max_memory_allocation;

    uint64_t staging = STAGING_BYTES;
    if (staging > gpu->caps->max_storage_buffer_range) staging = gpu->caps->max_storage_buffer_range & ~15ull;
    return vkv_buffer_create(gpu, staging, VKV_MEM_HOST, "staging buffer", &gpu->staging);
}

/* The block's whole-block buffer (vkv_buffer_base), if any: a VkBuffer only. */
static void destroy_whole(vkv_gpu *gpu, vkv_mem_block *b)
{
    if (!b->whole) return;
    vkDestroyBuffer(gpu->device, b->whole->buffer, NULL);
    free(b->whole);
    b->whole = NULL;
}

void vkv_memory_destroy(vkv_gpu *gpu)
{
    vkv_buffer_destroy(gpu, gpu->staging);
    gpu->staging = NULL;
    for (uint32_t i = 0; i < gpu->n_blocks; i++) {
        vkv_mem_block *b = gpu->blocks[i];
        destroy_whole(gpu, b);
        if (b->mapped) vkUnmapMemory(gpu->device, b->memory);
        vkFreeMemory(gpu->device, b->memory, NULL);
        vkv_range_alloc_destroy(&b->ranges);
        free(b);
    }
    free(gpu->blocks);
    gpu->blocks = NULL;
    gpu->n_blocks = 0;
}

static vkv_status allocate_memory(vkv_gpu *gpu, uint64_t size, uint32_t type, const char *what,
                                  VkDeviceMemory *mem, void **mapped)
{
    vkv_status st = VKV_OK;
    char msg[256];
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = size,
        .memoryTypeIndex = type,
    };
    snprintf(msg, sizeof msg, "allocating %.1f MiB of device memory for %s", size / 1048576.0, what);
    VK_CHECK(vkAllocateMemory(gpu->device, &ai, NULL, mem), msg);
    gpu->stats.n_allocations++;
    vkv_debug_name(gpu, VK_OBJECT_TYPE_DEVICE_MEMORY, (uint64_t)*mem, what);
    *mapped = NULL;
    /* Map only coherent memory: the copies through the mapping neither flush
     * nor invalidate. */
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((gpu->mem_props.memoryTypes[type].propertyFlags & hv) == hv) {
        VkResult r = vkMapMemory(gpu->device, *mem, 0, VK_WHOLE_SIZE, 0, mapped);
        if (r != VK_SUCCESS) {
            vkFreeMemory(gpu->device, *mem, NULL);
            *mem = VK_NULL_HANDLE;
            return vkv_vk_error(r, "vkMapMemory", msg);
        }
    }
    return VKV_OK;
error:
    return st;
}

static void account(vkv_gpu *gpu, vkv_mem_kind kind, int64_t allocated, int64_t used)
{
    if (kind == VKV_MEM_HOST) {
        gpu->stats.host_bytes_allocated += (uint64_t)allocated;
        return;
    }
    gpu->stats.device_bytes_allocated += (uint64_t)allocated;
    gpu->stats.device_bytes_used += (uint64_t)used;
    if (gpu->stats.device_bytes_used > gpu->stats.device_peak_used)
        gpu->stats.device_peak_used = gpu->stats.device_bytes_used;
}

/* Allocates a block of `bytes` that buffers are suballocated from. */
static vkv_status add_block(vkv_gpu *gpu, vkv_mem_kind kind, uint32_t type, uint64_t bytes, const char *what,
                            vkv_mem_block **out)
{
    vkv_status st = VKV_OK;
    *out = NULL;
    if (gpu->n_blocks == gpu->cap_blocks) {
        uint32_t cap = gpu->cap_blocks ? gpu->cap_blocks * 2 : 8;
        vkv_mem_block **nb = realloc(gpu->blocks, cap * sizeof *nb);
        if (!nb) return vkv_error(VKV_ERR_OOM, "out of host memory");
        gpu->blocks = nb;
        gpu->cap_blocks = cap;
    }
    vkv_mem_block *blk = calloc(1, sizeof *blk);
    if (!blk) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if ((st = allocate_memory(gpu, bytes, type, what, &blk->memory, &blk->mapped)) != VKV_OK) {
        free(blk);
        return st;
    }
    if (!vkv_range_alloc_init(&blk->ranges, bytes)) {
        if (blk->mapped) vkUnmapMemory(gpu->device, blk->memory);
        vkFreeMemory(gpu->device, blk->memory, NULL);
        free(blk);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    blk->memory_type = type;
    blk->kind = kind;
    gpu->blocks[gpu->n_blocks++] = blk;
    account(gpu, kind, (int64_t)bytes, 0);
    if (kind == VKV_MEM_DEVICE) gpu->stats.n_blocks++;
    *out = blk;
    return VKV_OK;
}

vkv_status vkv_memory_reserve(vkv_gpu *gpu, uint64_t bytes, const char *what)
{
    /* Blocks as large as the device allows (up to 4 GiB, and never below the
     * ordinary block size), so that few tensors straddle a block's end. */
    uint64_t bsize = bytes < (4ull << 30) ? bytes : (4ull << 30);
    bsize = (bsize + 65535) & ~65535ull;
    if (bsize < gpu->block_size) bsize = gpu->block_size;
    if (gpu->caps->max_memory_allocation && bsize > gpu->caps->max_memory_allocation)
        bsize = gpu->caps->max_memory_allocation; /* block_size is already within it */
    const uint32_t type = (uint32_t)gpu->mem_type_device;
    for (uint64_t done = 0; done < bytes; done += bsize) {
        vkv_mem_block *blk;
        vkv_status st = add_block(gpu, VKV_MEM_DEVICE, type, bsize, what, &blk);
        if (st) return st;
        blk->pool = true;
    }
    return VKV_OK;
}

void vkv_memory_release_reserve(vkv_gpu *gpu)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < gpu->n_blocks; i++) {
        vkv_mem_block *b = gpu->blocks[i];
        if (b->pool && b->ranges.used == 0) {
            destroy_whole(gpu, b);
            account(gpu, b->kind, -(int64_t)b->ranges.capacity, 0);
            if (b->kind == VKV_MEM_DEVICE) gpu->stats.n_blocks--;
            if (b->mapped) vkUnmapMemory(gpu->device, b->memory);
            vkFreeMemory(gpu->device, b->memory, NULL);
            vkv_range_alloc_destroy(&b->ranges);
            free(b);
            continue;
        }
        b->pool = false; /* still holds buffers: an ordinary block from now on */
        gpu->blocks[kept++] = b;
    }
    gpu->n_blocks = kept;
}

vkv_status vkv_buffer_create(vkv_gpu *gpu, uint64_t size, vkv_mem_kind kind, const char *what, vkv_buffer **out)
{
    vkv_status st = VKV_OK;
    *out = NULL;
    if (size == 0) return vkv_error(VKV_ERR_ARG, "zero-sized buffer for %s", what);
    size = (size + 15) & ~15ull;
    vkv_buffer *b = calloc(1, sizeof *b);
    if (!b) return vkv_error(VKV_ERR_OOM, "out of host memory");
    b->size = size;
    b->kind = kind;
    char msg[256];
    snprintf(msg, sizeof msg, "creating a %.1f MiB buffer for %s", size / 1048576.0, what);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VK_CHECK(vkCreateBuffer(gpu->device, &bci, NULL, &b->buffer), msg);
    vkv_debug_name(gpu, VK_OBJECT_TYPE_BUFFER, (uint64_t)b->buffer, what);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(gpu->device, b->buffer, &req);
    uint32_t type = (uint32_t)(kind == VKV_MEM_HOST ? gpu->mem_type_host : gpu->mem_type_device);
    if (!(req.memoryTypeBits & (1u << type))) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "%s: no compatible memory type for storage buffers", msg);
        goto error;
    }
    uint64_t align = req.alignment;
    if (align < gpu->caps->min_storage_buffer_offset_alignment) align = gpu->caps->min_storage_buffer_offset_alignment;

    /* A large tensor goes to a reserved block when one has room (the pool
     * vkv_memory_reserve set aside), else to its own allocation, which keeps it
     * from fragmenting the ordinary blocks; the rest go to the first block
     * with room, or a new one. */
    const bool large = req.size > gpu->block_size / 2;
    vkv_mem_block *blk = NULL;
    uint64_t off = 0;
    for (uint32_t i = 0; i < gpu->n_blocks && !blk; i++)
        if ((!large || gpu->blocks[i]->pool) && gpu->blocks[i]->memory_type == type &&
            vkv_range_alloc_take(&gpu->blocks[i]->ranges, req.size, align, &off))
            blk = gpu->blocks[i];
    if (!blk && large) {
        if ((st = allocate_memory(gpu, req.size, type, what, &b->dedicated, &b->mapped)) != VKV_OK) goto error;
        VK_CHECK(vkBindBufferMemory(gpu->device, b->buffer, b->dedicated, 0), msg);
        b->reserved = req.size;
        account(gpu, kind, (int64_t)req.size, (int64_t)req.size);
        if (kind == VKV_MEM_DEVICE) gpu->stats.n_blocks++;
    } else {
        if (!blk) {
            uint64_t bsize = kind == VKV_MEM_HOST ? STAGING_BYTES : gpu->block_size;
            if (bsize < req.size) bsize = req.size;
            if ((st = add_block(gpu, kind, type, bsize, "a memory block", &blk)) != VKV_OK) goto error;
            vkv_range_alloc_take(&blk->ranges, req.size, align, &off);
        }
        b->block = blk;
        b->offset = off;
        b->reserved = req.size;
        VK_CHECK(vkBindBufferMemory(gpu->device, b->buffer, blk->memory, off), msg);
        if (blk->mapped) b->mapped = (char *)blk->mapped + off;
        account(gpu, kind, 0, (int64_t)req.size);
    }
    *out = b;
    return VKV_OK;
error:
    if (b->block) vkv_range_alloc_give(&b->block->ranges, b->offset, b->reserved);
    if (b->dedicated) { /* allocated, then binding failed */
        if (b->mapped) vkUnmapMemory(gpu->device, b->dedicated);
        vkFreeMemory(gpu->device, b->dedicated, NULL);
    }
    if (b->buffer) vkDestroyBuffer(gpu->device, b->buffer, NULL);
    free(b);
    return st;
}

void vkv_buffer_destroy(vkv_gpu *gpu, vkv_buffer *b)
{
    if (!b) return;
    vkDestroyBuffer(gpu->device, b->buffer, NULL);
    if (b->dedicated) {
        if (b->mapped) vkUnmapMemory(gpu->device, b->dedicated);
        vkFreeMemory(gpu->device, b->dedicated, NULL);
        account(gpu, b->kind, -(int64_t)b->reserved, -(int64_t)b->reserved);
        if (b->kind == VKV_MEM_DEVICE) gpu->stats.n_blocks--;
    } else if (b->block) {
        vkv_range_alloc_give(&b->block->ranges, b->offset, b->reserved);
        account(gpu, b->kind, 0, -(int64_t)b->reserved);
    }
    free(b);
}

vkv_status vkv_buffer_base(vkv_gpu *gpu, const vkv_buffer *b, const vkv_buffer **base, uint64_t *offset)
{
    vkv_mem_block *blk = b->block;
    if (!blk) { /* its own allocation */
        *base = b;
        *offset = 0;
        return VKV_OK;
    }
    if (!blk->whole) {
        vkv_buffer *w = calloc(1, sizeof *w);
        if (!w) return vkv_error(VKV_ERR_OOM, "out of host memory");
        w->size = blk->ranges.capacity & ~15ull;
        w->kind = blk->kind;
        VkBufferCreateInfo bci = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .size = w->size,
            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                     VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        };
        VkResult r = vkCreateBuffer(gpu->device, &bci, NULL, &w->buffer);
        if (r != VK_SUCCESS) {
            free(w);
            return vkv_vk_error(r, "vkCreateBuffer", "creating a buffer over a memory block");
        }
        vkv_debug_name(gpu, VK_OBJECT_TYPE_BUFFER, (uint64_t)w->buffer, "a whole memory block");
        /* The block's memory type already holds storage buffers bound at any
         * aligned offset; one at offset 0 of the same size is within it. */
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(gpu->device, w->buffer, &req);
        if (!(req.memoryTypeBits & (1u << blk->memory_type)) || req.size > blk->ranges.capacity) {
            vkDestroyBuffer(gpu->device, w->buffer, NULL);
            free(w);
            return vkv_error(VKV_ERR_UNSUPPORTED, "a buffer over a whole memory block does not fit its memory");
        }
        VkResult br = vkBindBufferMemory(gpu->device, w->buffer, blk->memory, 0);
        if (br != VK_SUCCESS) {
            vkDestroyBuffer(gpu->device, w->buffer, NULL);
            free(w);
            return vkv_vk_error(br, "vkBindBufferMemory", "binding a buffer over a memory block");
        }
        blk->whole = w;
    }
    *base = blk->whole;
    *offset = b->offset;
    return VKV_OK;
}

uint64_t vkv_buffer_size(const vkv_buffer *b) { return b->size; }
void *vkv_buffer_map(const vkv_buffer *b) { return b->kind == VKV_MEM_HOST ? b->mapped : NULL; }
vkv_mem_stats vkv_gpu_mem_stats(const vkv_gpu *gpu) { return gpu->stats; }

/* Records and runs one command buffer of copies/fills synchronously. */
vkv_status vkv_xfer_begin(vkv_gpu *gpu)
{
    vkv_status st = VKV_OK;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    gpu->sync_start_ns = vkv_clock_ns(CLOCK_MONOTONIC);
    VK_CHECK(vkResetCommandBuffer(gpu->xfer_cmd, 0), "resetting the transfer command buffer");
    VK_CHECK(vkBeginCommandBuffer(gpu->xfer_cmd, &bi), "recording a transfer");
    /* Order after any earlier GPU work on the buffers. */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(gpu->xfer_cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    return VKV_OK;
error:
    return st;
}

vkv_status vkv_xfer_end(vkv_gpu *gpu, const char *what)
{
    vkv_status st = VKV_OK;
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(gpu->xfer_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    VK_CHECK(vkEndCommandBuffer(gpu->xfer_cmd), what);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &gpu->xfer_cmd};
    VK_CHECK(vkResetFences(gpu->device, 1, &gpu->xfer_fence), what);
    VK_CHECK(vkQueueSubmit(gpu->queue, 1, &si, gpu->xfer_fence), what);
    VK_CHECK(vkWaitForFences(gpu->device, 1, &gpu->xfer_fence, VK_TRUE, UINT64_MAX), what);
    gpu->host.n_sync_submits++;
    if (!gpu->recording) gpu->host.sync_ns += vkv_clock_ns(CLOCK_MONOTONIC) - gpu->sync_start_ns;
    return VKV_OK;
error:
    return st;
}

static vkv_status check_range(const vkv_buffer *b, uint64_t offset, uint64_t size, const char *op)
{
    if (offset > b->size || size > b->size - offset)
        return vkv_error(VKV_ERR_ARG, "%s of %llu bytes at offset %llu is outside a %llu-byte buffer", op,
                         (unsigned long long)size, (unsigned long long)offset, (unsigned long long)b->size);
    return VKV_OK;
}

vkv_status vkv_buffer_upload(vkv_gpu *gpu, vkv_buffer *dst, uint64_t offset, const void *src, uint64_t size)
{
    vkv_status st = check_range(dst, offset, size, "upload");
    if (st) return st;
    if (dst->mapped) {
        memcpy((char *)dst->mapped + offset, src, size);
        return VKV_OK;
    }
    uint64_t chunk = gpu->staging->size;
    for (uint64_t done = 0; done < size; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        memcpy(gpu->staging->mapped, (const char *)src + done, n);
        if ((st = vkv_xfer_begin(gpu))) return st;
        VkBufferCopy region = {0, offset + done, n};
        vkCmdCopyBuffer(gpu->xfer_cmd, gpu->staging->buffer, dst->buffer, 1, &region);
        if ((st = vkv_xfer_end(gpu, "uploading to the device"))) return st;
    }
    return VKV_OK;
}

vkv_status vkv_buffer_download(vkv_gpu *gpu, const vkv_buffer *src, uint64_t offset, void *dst, uint64_t size)
{
    vkv_status st = check_range(src, offset, size, "download");
    if (st) return st;
    if (src->mapped) {
        memcpy(dst, (const char *)src->mapped + offset, size);
        return VKV_OK;
    }
    uint64_t chunk = gpu->staging->size;
    for (uint64_t done = 0; done < size; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        if ((st = vkv_xfer_begin(gpu))) return st;
        VkBufferCopy region = {offset + done, 0, n};
        vkCmdCopyBuffer(gpu->xfer_cmd, src->buffer, gpu->staging->buffer, 1, &region);
        if ((st = vkv_xfer_end(gpu, "downloading from the device"))) return st;
        memcpy((char *)dst + done, gpu->staging->mapped, n);
    }
    return VKV_OK;
}

vkv_status vkv_buffer_fill(vkv_gpu *gpu, vkv_buffer *dst, uint64_t offset, uint64_t size, uint32_t word)
{
    vkv_status st = check_range(dst, offset, size, "fill");
    if (st) return st;
    if ((offset | size) & 3) return vkv_error(VKV_ERR_ARG, "fill offset and size must be multiples of 4");
    if ((st = vkv_xfer_begin(gpu))) return st;
    vkCmdFillBuffer(gpu->xfer_cmd, dst->buffer, offset, size, word);
    return vkv_xfer_end(gpu, "filling a buffer");
}
