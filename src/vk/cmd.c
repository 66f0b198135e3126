/* Command recording: one primary command buffer per device, a full compute
 * barrier between dispatches, push descriptors (or a pool reset per submit),
 * timestamp queries around each dispatch when profiling, and the host's time
 * recording, submitting and waiting, always (vkv_host_stats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/dispatch.h"
#include "vk/vk_internal.h"

#define FALLBACK_SETS 4096

vkv_status vkv_cmd_init(vkv_gpu *gpu)
{
    vkv_status st = VKV_OK;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = gpu->queue_family,
    };
    VK_CHECK(vkCreateCommandPool(gpu->device, &pci, NULL, &gpu->cmd_pool), "creating the command pool");
    VkCommandBuffer cbs[2];
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = gpu->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 2,
    };
    VK_CHECK(vkAllocateCommandBuffers(gpu->device, &ai, cbs), "allocating command buffers");
    gpu->cmd = cbs[0];
    gpu->xfer_cmd = cbs[1];
    vkv_debug_name(gpu, VK_OBJECT_TYPE_COMMAND_BUFFER, (uint64_t)(uintptr_t)gpu->cmd, "the op recording");
    vkv_debug_name(gpu, VK_OBJECT_TYPE_COMMAND_BUFFER, (uint64_t)(uintptr_t)gpu->xfer_cmd, "synchronous copies");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(gpu->device, &fci, NULL, &gpu->fence), "creating a fence");
    VK_CHECK(vkCreateFence(gpu->device, &fci, NULL, &gpu->xfer_fence), "creating a fence");
    if (gpu->caps->timestamps) {
        VkQueryPoolCreateInfo qci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = VKV_MAX_TIMESTAMPS,
        };
        VK_CHECK(vkCreateQueryPool(gpu->device, &qci, NULL, &gpu->query_pool), "creating the timestamp query pool");
    }
    if (!gpu->caps->push_descriptor) {
        VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, FALLBACK_SETS * VKV_POOL_BUFFERS_PER_SET};
        VkDescriptorPoolCreateInfo dpci = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            .maxSets = FALLBACK_SETS,
            .poolSizeCount = 1,
            .pPoolSizes = &ps,
        };
        VK_CHECK(vkCreateDescriptorPool(gpu->device, &dpci, NULL, &gpu->desc_pool), "creating the descriptor pool");
        gpu->desc_pool_capacity = FALLBACK_SETS;
    }
    return VKV_OK;
error:
    return st;
}

void vkv_cmd_destroy(vkv_gpu *gpu)
{
    if (gpu->desc_pool) vkDestroyDescriptorPool(gpu->device, gpu->desc_pool, NULL);
    if (gpu->query_pool) vkDestroyQueryPool(gpu->device, gpu->query_pool, NULL);
    if (gpu->fence) vkDestroyFence(gpu->device, gpu->fence, NULL);
    if (gpu->xfer_fence) vkDestroyFence(gpu->device, gpu->xfer_fence, NULL);
    if (gpu->cmd_pool) vkDestroyCommandPool(gpu->device, gpu->cmd_pool, NULL);
}

vkv_status vkv_cmd_begin(vkv_gpu *gpu)
{
    vkv_status st = VKV_OK;
    if (gpu->recording) return vkv_error(VKV_ERR_ARG, "vkv_cmd_begin: a recording is already open");
    gpu->record_start_ns = vkv_clock_ns(CLOCK_MONOTONIC);
    gpu->record_start_cpu_ns = vkv_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VK_CHECK(vkResetCommandBuffer(gpu->cmd, 0), "resetting the command buffer");
    VK_CHECK(vkBeginCommandBuffer(gpu->cmd, &bi), "starting a command recording");
    if (gpu->desc_pool) {
        VK_CHECK(vkResetDescriptorPool(gpu->device, gpu->desc_pool, 0), "resetting the descriptor pool");
        gpu->desc_pool_used = 0;
    }
    if (gpu->query_pool && gpu->profiling) vkCmdResetQueryPool(gpu->cmd, gpu->query_pool, 0, VKV_MAX_TIMESTAMPS);
    /* Uploads done before this recording must be visible to its shaders. */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(gpu->cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    gpu->recording = true;
    gpu->n_recorded = 0;
    gpu->n_queries = 0;
    return VKV_OK;
error:
    return st;
}

static void compute_barrier(vkv_gpu *gpu)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(gpu->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
}

void vkv_descriptor_writes(vkv_kernel k, VkDescriptorBufferInfo *bi, VkWriteDescriptorSet *w)
{
    for (uint32_t i = 0, first = 0; i < vkv_kernel_n_bindings(k); i++) {
        const uint32_t n = vkv_kernel_binding_buffers(k, i);
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstBinding = i,
            .descriptorCount = n,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[first],
        };
        first += n;
    }
}

/* The one dispatch path (vkv_dispatch): the push-constant struct's type was
 * fixed at compile time; here it must be the one vk/kernels.h declares for k. */
vkv_status vkv_dispatch_typed(vkv_gpu *gpu, vkv_kernel k, const vkv_binding *bindings, uint32_t n_bindings,
                              vkv_pc_id pc, const void *push, uint32_t push_size, uint32_t gx, uint32_t gy,
                              uint32_t gz)
{
    vkv_status st = VKV_OK;
    if (k >= VKV_KERNEL_COUNT) return vkv_error(VKV_ERR_ARG, "dispatch of kernel %d: no such kernel", (int)k);
    if (!gpu->recording) return vkv_error(VKV_ERR_ARG, "dispatch of '%s' outside a recording", vkv_kernel_name(k));
    if (pc != vkv_kernel_push_struct(k))
        return vkv_error(VKV_ERR_ARG, "dispatch of '%s' pushes %s, but src/vk/kernels.h declares %s for it",
                         vkv_kernel_name(k), vkv_pc_name(pc), vkv_pc_name(vkv_kernel_push_struct(k)));
    if (n_bindings != vkv_kernel_n_buffers(k) || n_bindings > VKV_MAX_DESCRIPTORS ||
        push_size != vkv_kernel_push_bytes(k))
        return vkv_error(VKV_ERR_ARG, "dispatch of '%s': %u buffers / %u push bytes do not match the kernel",
                         vkv_kernel_name(k), n_bindings, push_size);
    const vkv_caps *c = gpu->caps;
    if (!gx || !gy || !gz) return VKV_OK; /* nothing to do */
    if (gx > c->max_workgroup_count[0] || gy > c->max_workgroup_count[1] || gz > c->max_workgroup_count[2])
        return vkv_error(VKV_ERR_ARG, "dispatch of '%s': %u x %u x %u workgroups exceeds the device limit",
                         vkv_kernel_name(k), gx, gy, gz);
    const vkv_pipeline *p;
    if ((st = vkv_pipeline_get(gpu, k, &p))) return st;

    VkDescriptorBufferInfo bi[VKV_MAX_DESCRIPTORS];
    VkWriteDescriptorSet w[VKV_MAX_BINDINGS];
    for (uint32_t i = 0; i < n_bindings; i++) {
        const vkv_binding *b = &bindings[i];
        uint64_t range = b->range ? b->range : b->buf->size - b->offset;
        if (b->offset % c->min_storage_buffer_offset_alignment || b->offset > b->buf->size ||
            range > b->buf->size - b->offset || range > c->max_storage_buffer_range || range == 0)
            return vkv_error(VKV_ERR_ARG,
                             "dispatch of '%s': buffer %u [offset %llu, %llu bytes) of a %llu-byte buffer is "
                             "misaligned, out of bounds or over the %llu-byte storage range limit",
                             vkv_kernel_name(k), i, (unsigned long long)b->offset, (unsigned long long)range,
                             (unsigned long long)b->buf->size, (unsigned long long)c->max_storage_buffer_range);
        bi[i] = (VkDescriptorBufferInfo){b->buf->buffer, b->offset, range};
    }
    const uint32_t n_writes = vkv_kernel_n_bindings(k);
    vkv_descriptor_writes(k, bi, w);
    if (gpu->n_recorded) compute_barrier(gpu);
    vkCmdBindPipeline(gpu->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (c->push_descriptor) {
        vkCmdPushDescriptorSetKHR(gpu->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, n_writes, w);
    } else {
        if (gpu->desc_pool_used + vkv_pool_set_units(n_bindings) > gpu->desc_pool_capacity)
            return vkv_error(VKV_ERR_UNSUPPORTED, "more than %u dispatches in one submission without "
                                                  "VK_KHR_push_descriptor", gpu->desc_pool_capacity);
        VkDescriptorSet set;
        VkDescriptorSetAllocateInfo dai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = gpu->desc_pool,
            .descriptorSetCount = 1,
            .pSetLayouts = &p->set_layout,
        };
        VK_CHECK(vkAllocateDescriptorSets(gpu->device, &dai, &set), "allocating a descriptor set");
        gpu->desc_pool_used += vkv_pool_set_units(n_bindings);
        for (uint32_t i = 0; i < n_writes; i++) w[i].dstSet = set;
        vkUpdateDescriptorSets(gpu->device, n_writes, w, 0, NULL);
        vkCmdBindDescriptorSets(gpu->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    }
    if (push_size) vkCmdPushConstants(gpu->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    bool timed = gpu->profiling && gpu->query_pool && gpu->n_queries + 2 <= VKV_MAX_TIMESTAMPS;
    if (timed) vkCmdWriteTimestamp(gpu->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, gpu->query_pool, gpu->n_queries);
    vkCmdDispatch(gpu->cmd, gx, gy, gz);
    gpu->host.n_dispatches++;
    gpu->kernel_dispatches[k]++;
    if (timed) {
        vkCmdWriteTimestamp(gpu->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, gpu->query_pool, gpu->n_queries + 1);
        gpu->query_kernel[gpu->n_queries / 2] = k;
        gpu->n_queries += 2;
    }
    gpu->n_recorded++;
    return VKV_OK;
error:
    return st;
}

vkv_status vkv_cmd_copy(vkv_gpu *gpu, const vkv_buffer *src, uint64_t src_off, vkv_buffer *dst, uint64_t dst_off,
                        uint64_t size)
{
    if (!gpu->recording) return vkv_error(VKV_ERR_ARG, "copy outside a recording");
    if (src_off > src->size || size > src->size - src_off || dst_off > dst->size || size > dst->size - dst_off)
        return vkv_error(VKV_ERR_ARG, "copy of %llu bytes is out of bounds", (unsigned long long)size);
    if (!size) return VKV_OK;
    if (gpu->n_recorded) compute_barrier(gpu);
    VkBufferCopy region = {src_off, dst_off, size};
    vkCmdCopyBuffer(gpu->cmd, src->buffer, dst->buffer, 1, &region);
    gpu->n_recorded++;
    gpu->host.n_copies++;
    return VKV_OK;
}

vkv_status vkv_cmd_copy_regions(vkv_gpu *gpu, const vkv_buffer *src, vkv_buffer *dst, const vkv_copy_region *regions,
                                uint32_t n)
{
    if (!gpu->recording) return vkv_error(VKV_ERR_ARG, "copy outside a recording");
    if (!n) return VKV_OK;
    VkBufferCopy *vr = malloc(sizeof *vr * n);
    if (!vr) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        const vkv_copy_region *r = &regions[i];
        if (r->src_off > src->size || r->size > src->size - r->src_off || r->dst_off > dst->size ||
            r->size > dst->size - r->dst_off || !r->size) {
            free(vr);
            return vkv_error(VKV_ERR_ARG, "copy region %u (%llu bytes) is out of bounds or empty", i,
                             (unsigned long long)r->size);
        }
        vr[i] = (VkBufferCopy){r->src_off, r->dst_off, r->size};
    }
    if (gpu->n_recorded) compute_barrier(gpu);
    vkCmdCopyBuffer(gpu->cmd, src->buffer, dst->buffer, n, vr);
    free(vr);
    gpu->n_recorded++;
    gpu->host.n_copies++;
    return VKV_OK;
}

vkv_status vkv_cmd_submit(vkv_gpu *gpu)
{
    vkv_status st = VKV_OK;
    if (!gpu->recording) return vkv_error(VKV_ERR_ARG, "submit without a recording");
    gpu->recording = false;
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT,
    };
    vkCmdPipelineBarrier(gpu->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    const double end_ns = vkv_clock_ns(CLOCK_MONOTONIC);
    VK_CHECK(vkEndCommandBuffer(gpu->cmd), "finishing a command recording");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &gpu->cmd};
    VK_CHECK(vkResetFences(gpu->device, 1, &gpu->fence), "resetting a fence");
    VK_CHECK(vkQueueSubmit(gpu->queue, 1, &si, gpu->fence), "submitting GPU work");
    const double submitted_ns = vkv_clock_ns(CLOCK_MONOTONIC);
    gpu->host.n_submits++;
    gpu->host.record_ns += submitted_ns - gpu->record_start_ns;
    gpu->host.submit_ns += submitted_ns - end_ns;
    gpu->host.record_cpu_ns += vkv_clock_ns(CLOCK_THREAD_CPUTIME_ID) - gpu->record_start_cpu_ns;
    VK_CHECK(vkWaitForFences(gpu->device, 1, &gpu->fence, VK_TRUE, UINT64_MAX), "waiting for GPU work");
    gpu->host.fence_wait_ns += vkv_clock_ns(CLOCK_MONOTONIC) - submitted_ns;
    gpu->last_submit_ns = 0;
    if (gpu->n_queries) {
        uint64_t ts[VKV_MAX_TIMESTAMPS];
        VK_CHECK(vkGetQueryPoolResults(gpu->device, gpu->query_pool, 0, gpu->n_queries, sizeof(uint64_t) * gpu->n_queries,
                                       ts, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                 "reading GPU timestamps");
        for (uint32_t i = 0; i < gpu->n_queries; i += 2) {
            double ns = (double)(ts[i + 1] - ts[i]) * gpu->caps->timestamp_period_ns;
            vkv_kernel k = gpu->query_kernel[i / 2];
            gpu->kernel_ns[k] += ns;
            gpu->last_submit_ns += ns;
        }
    }
    return VKV_OK;
error:
    return st;
}

vkv_status vkv_cmd_abort(vkv_gpu *gpu, vkv_status st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", vkv_last_error());
    vkv_cmd_submit(gpu); /* releases the recording; its status would hide the first error */
    return vkv_error(st, "%s", msg);
}

void vkv_gpu_set_profiling(vkv_gpu *gpu, bool on) { gpu->profiling = on; }
double vkv_gpu_last_submit_ns(const vkv_gpu *gpu) { return gpu->last_submit_ns; }
double vkv_gpu_kernel_ns(const vkv_gpu *gpu, vkv_kernel k) { return gpu->kernel_ns[k]; }
void vkv_gpu_reset_profile(vkv_gpu *gpu) { memset(gpu->kernel_ns, 0, sizeof gpu->kernel_ns); }
vkv_host_stats vkv_gpu_host_stats(const vkv_gpu *gpu) { return gpu->host; }
void vkv_gpu_reset_host_stats(vkv_gpu *gpu)
{
    gpu->host = (vkv_host_stats){0};
    memset(gpu->kernel_dispatches, 0, sizeof gpu->kernel_dispatches);
}

uint64_t vkv_gpu_kernel_dispatches(const vkv_gpu *gpu, vkv_kernel k) { return gpu->kernel_dispatches[k]; }

double vkv_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
