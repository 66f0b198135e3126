/* The kernel registry and compute pipelines, built once per device on first
 * use from the embedded SPIR-V with the workgroup size as specialization
 * constant 0.
 *
 * The registry is VKV_KERNEL_LIST (vk/kernels.h) expanded: a kernel without a
 * SPIR-V module fails below on VKV_SPIRV_PUSH_BYTES_<name>, a module without a
 * kernel fails in the generated shaders_spirv.c on VKV_K_<NAME>, a struct
 * missing from VKV_PUSH_CONSTANT_LIST on <struct>_id. */
#include <stdio.h>
#include <string.h>

#include "vk/dispatch.h"
#include "vk/vk_internal.h"
#include "shaders_spirv.h" /* generated: VKV_SPIRV_PUSH_BYTES_<name> */

const vkv_spirv *vkv_spirv_table(size_t *count); /* generated: shaders_spirv.c */

/* Each push-constant struct of vk/kernels.h is its GLSL block's size, within
 * the 128 bytes every Vulkan device takes (maxPushConstantsSize's least). */
#define VKV_KERNEL_PUSH_CHECK(e, nm, nb, pc, wg) \
    _Static_assert(sizeof(pc) == VKV_SPIRV_PUSH_BYTES_##nm, #pc " differs from the push constants of " #nm); \
    _Static_assert(sizeof(pc) <= 128, #pc " exceeds the 128 bytes of push constants every device takes");
VKV_KERNEL_LIST(VKV_KERNEL_PUSH_CHECK)
#undef VKV_KERNEL_PUSH_CHECK

static const struct {
    const char *name;
    uint32_t n_bindings, push_bytes;
    vkv_pc_id push_struct;
    vkv_wg_class wg;
} kernel_info[VKV_KERNEL_COUNT] = {
#define VKV_KERNEL_INFO(e, nm, nb, pc, wg) [VKV_K_##e] = {#nm, nb, sizeof(pc), pc##_id, wg},
    VKV_KERNEL_LIST(VKV_KERNEL_INFO)
#undef VKV_KERNEL_INFO
};

static const char *const pc_names[VKV_PC_ID_COUNT] = {
#define VKV_PC_NAME(pc) [pc##_id] = #pc,
    VKV_PUSH_CONSTANT_LIST(VKV_PC_NAME)
#undef VKV_PC_NAME
};

const char *vkv_kernel_name(vkv_kernel k) { return k < VKV_KERNEL_COUNT ? kernel_info[k].name : "?"; }
uint32_t vkv_kernel_n_bindings(vkv_kernel k) { return kernel_info[k].n_bindings; }

uint32_t vkv_kernel_binding_buffers(vkv_kernel k, uint32_t b)
{
#define VKV_ARRAY_BINDING(e, binding, n) \
    if (k == VKV_K_##e && b == (binding)) return (n);
    VKV_KERNEL_ARRAY_BINDINGS(VKV_ARRAY_BINDING)
#undef VKV_ARRAY_BINDING
    return 1;
}

uint32_t vkv_kernel_n_buffers(vkv_kernel k)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < kernel_info[k].n_bindings; b++) n += vkv_kernel_binding_buffers(k, b);
    return n;
}

bool vkv_kernel_arrays_fit(const vkv_gpu *gpu, vkv_kernel k)
{
    const vkv_caps *c = gpu->caps;
    const uint32_t n = vkv_kernel_n_buffers(k);
    if (n == kernel_info[k].n_bindings) return true; /* no arrays */
    return c->storage_buffer_array_dynamic_indexing && n <= VKV_MAX_DESCRIPTORS &&
           n <= c->max_per_stage_storage_buffers && n <= c->max_set_storage_buffers &&
           (!c->push_descriptor || n <= c->max_push_descriptors);
}
vkv_pc_id vkv_kernel_push_struct(vkv_kernel k) { return kernel_info[k].push_struct; }
uint32_t vkv_kernel_push_bytes(vkv_kernel k) { return kernel_info[k].push_bytes; }
const char *vkv_pc_name(vkv_pc_id id) { return id < VKV_PC_ID_COUNT ? pc_names[id] : "?"; }

const vkv_spirv *vkv_spirv_of(vkv_kernel k)
{
    size_t n;
    const vkv_spirv *t = vkv_spirv_table(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i].kernel == k) return &t[i];
    return NULL;
}

uint32_t vkv_kernel_workgroup_size(const vkv_gpu *gpu, vkv_kernel k)
{
    switch (kernel_info[k].wg) {
    case VKV_WG_ROW: return VKV_WG_ROW_SIZE;
    case VKV_WG_NARROW: return VKV_WG_NARROW_SIZE;
    case VKV_WG_MATMUL: return VKV_MATMUL_WG;
    case VKV_WG_MATMUL_CM: return VKV_MATMUL_CM_WG;
    case VKV_WG_MATVEC: {
        /* Enough threads to cover a 4096-wide row in one pass of 32-chunks,
         * at least two subgroups; power of two for the tree reduction. */
        uint32_t wg = gpu->caps->subgroup_size * 4;
        if (wg < 64) wg = 64;
        if (wg > VKV_MATVEC_MAX_WG) wg = VKV_MATVEC_MAX_WG;
        return wg;
    }
    case VKV_WG_WIDE: break;
    }
    return VKV_WG_WIDE_SIZE;
}

static vkv_status pipeline_build(vkv_gpu *gpu, vkv_kernel k, vkv_pipeline *p)
{
    vkv_status st = VKV_OK;
    const char *name = kernel_info[k].name;
    const vkv_spirv *spv = vkv_spirv_of(k);
    if (!spv) return vkv_error(VKV_ERR_UNSUPPORTED, "no embedded SPIR-V for kernel '%s'", name);
    char what[160];
    snprintf(what, sizeof what, "building the '%s' pipeline", name);

    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = spv->size_bytes,
        .pCode = spv->code,
    };
    VK_CHECK(vkCreateShaderModule(gpu->device, &smci, NULL, &gpu->modules[k]), what);
    vkv_debug_name(gpu, VK_OBJECT_TYPE_SHADER_MODULE, (uint64_t)gpu->modules[k], name);

    if (!vkv_kernel_arrays_fit(gpu, k))
        return vkv_error(VKV_ERR_UNSUPPORTED, "kernel '%s' binds arrays of %u storage buffers: '%s' lacks "
                         "shaderStorageBufferArrayDynamicIndexing or that many descriptors", name,
                         vkv_kernel_n_buffers(k), gpu->caps->name);
    VkDescriptorSetLayoutBinding b[VKV_MAX_BINDINGS];
    uint32_t nb = kernel_info[k].n_bindings;
    for (uint32_t i = 0; i < nb; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = vkv_kernel_binding_buffers(k, i),
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dslci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = gpu->caps->push_descriptor ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = nb,
        .pBindings = b,
    };
    VK_CHECK(vkCreateDescriptorSetLayout(gpu->device, &dslci, NULL, &p->set_layout), what);
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 128};
    VkPipelineLayoutCreateInfo plci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pcr,
    };
    VK_CHECK(vkCreatePipelineLayout(gpu->device, &plci, NULL, &p->layout), what);
    vkv_debug_name(gpu, VK_OBJECT_TYPE_PIPELINE_LAYOUT, (uint64_t)p->layout, name);

    uint32_t wg = vkv_kernel_workgroup_size(gpu, k);
    VkSpecializationMapEntry me = {.constantID = 0, .offset = 0, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = 1, .pMapEntries = &me, .dataSize = 4, .pData = &wg};
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = gpu->modules[k],
            .pName = "main",
            .pSpecializationInfo = &si,
        },
        .layout = p->layout,
    };
    if ((st = vkv_pipeline_compile(gpu, &cpci, p, k, what))) return st;
    vkv_debug_name(gpu, VK_OBJECT_TYPE_PIPELINE, (uint64_t)p->pipeline, name);
    return VKV_OK;
error:
    return st;
}

vkv_status vkv_pipeline_get(vkv_gpu *gpu, vkv_kernel k, const vkv_pipeline **out)
{
    vkv_pipeline *p = &gpu->pipelines[k];
    *out = p;
    if (p->pipeline) return VKV_OK;
    double t0 = vkv_pipeline_clock();
    vkv_status st = pipeline_build(gpu, k, p);
    gpu->pipeline_stats.seconds += vkv_pipeline_clock() - t0;
    return st;
}

void vkv_pipelines_destroy(vkv_gpu *gpu)
{
    for (int k = 0; k < VKV_KERNEL_COUNT; k++) {
        vkv_pipeline *p = &gpu->pipelines[k];
        if (p->pipeline) vkDestroyPipeline(gpu->device, p->pipeline, NULL);
        if (p->layout) vkDestroyPipelineLayout(gpu->device, p->layout, NULL);
        if (p->set_layout) vkDestroyDescriptorSetLayout(gpu->device, p->set_layout, NULL);
        if (gpu->modules[k]) vkDestroyShaderModule(gpu->device, gpu->modules[k], NULL);
        memset(p, 0, sizeof *p);
        gpu->modules[k] = VK_NULL_HANDLE;
    }
}
