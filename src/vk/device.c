/* Instance creation, device enumeration, the capability probe and device
 * creation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/vk_internal.h"

/* VK_KHR_cooperative_matrix postdates the Vulkan headers of some distributions
 * (Debian 12 ships 1.3.239): declare what the probe needs. */
#define VKV_STYPE_COOPMAT_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef struct vkv_coopmat_properties_khr {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    uint32_t scope;
} vkv_coopmat_properties_khr;
typedef VkResult(VKAPI_PTR *vkv_pfn_coopmat_khr)(VkPhysicalDevice, uint32_t *, vkv_coopmat_properties_khr *);

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT types,
                                                     const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                     void *user)
{
    vkv_instance *inst = user;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        __atomic_add_fetch(&inst->validation_errors, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "vkvector: VALIDATION ERROR: %s\n", data->pMessage);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        fprintf(stderr, "vkvector: validation warning: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

bool vkv_validation_requested(void)
{
    const char *v = getenv("VKVECTOR_VALIDATE");
    return v && *v && strcmp(v, "0") != 0;
}

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n) return false;
    VkLayerProperties *props = calloc(n, sizeof *props);
    bool found = false;
    if (props && vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(props[i].layerName, name);
    free(props);
    return found;
}

static bool has_instance_ext(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || !n) return false;
    VkExtensionProperties *props = calloc(n, sizeof *props);
    bool found = false;
    if (props && vkEnumerateInstanceExtensionProperties(NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(props[i].extensionName, name);
    free(props);
    return found;
}

static void probe_device(VkInstance instance, VkPhysicalDevice pd, vkv_caps *c)
{
    memset(c, 0, sizeof *c);
    /* extensions */
    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    VkExtensionProperties *exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
    if (exts) vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, exts);
    else n_ext = 0;
    bool ext_int_dot = false;
    for (uint32_t i = 0; i < n_ext; i++) {
        const char *e = exts[i].extensionName;
        if (!strcmp(e, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) c->push_descriptor = true;
        else if (!strcmp(e, "VK_NV_cooperative_matrix")) c->coopmat_nv = true;
        else if (!strcmp(e, "VK_KHR_cooperative_matrix")) c->coopmat_khr = true;
        else if (!strcmp(e, "VK_NV_cooperative_matrix2")) c->coopmat2_nv = true;
        else if (!strcmp(e, "VK_KHR_shader_bfloat16")) c->bfloat16 = true;
        else if (!strcmp(e, "VK_KHR_shader_integer_dot_product")) ext_int_dot = true;
    }
    free(exts);

    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    c->api_version = props.apiVersion;
    bool v13 = VK_API_VERSION_MINOR(props.apiVersion) >= 3 || VK_API_VERSION_MAJOR(props.apiVersion) > 1;

    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlProperties sgc = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceShaderIntegerDotProductProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    sg.pNext = &drv;
    if (v13) { drv.pNext = &sgc; sgc.pNext = &idp; }
    vkGetPhysicalDeviceProperties2(pd, &p2);

    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    f11.pNext = &f12;
    if (v13) f12.pNext = &f13;
    vkGetPhysicalDeviceFeatures2(pd, &f2);

    snprintf(c->name, sizeof c->name, "%s", props.deviceName);
    snprintf(c->driver_name, sizeof c->driver_name, "%s", drv.driverName);
    snprintf(c->driver_info, sizeof c->driver_info, "%s", drv.driverInfo);
    c->type = props.deviceType;
    c->vendor_id = props.vendorID;
    c->device_id = props.deviceID;

    c->subgroup_size = sg.subgroupSize;
    c->subgroup_min_size = v13 && sgc.minSubgroupSize ? sgc.minSubgroupSize : sg.subgroupSize;
    c->subgroup_max_size = v13 && sgc.maxSubgroupSize ? sgc.maxSubgroupSize : sg.subgroupSize;
    bool sg_compute = sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
    c->subgroup_basic = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
    c->subgroup_arithmetic = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    c->subgroup_shuffle = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    c->subgroup_ballot = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
    c->subgroup_size_control = v13 && f13.subgroupSizeControl;

    c->shader_float16 = f12.shaderFloat16;
    c->shader_int8 = f12.shaderInt8;
    c->shader_int16 = f2.features.shaderInt16;
    c->shader_int64 = f2.features.shaderInt64;
    c->storage_16bit = f11.storageBuffer16BitAccess;
    c->storage_8bit = f12.storageBuffer8BitAccess;
    c->integer_dot_product = (v13 && f13.shaderIntegerDotProduct) || ext_int_dot;
    c->integer_dot_product_4x8_accelerated = v13 && idp.integerDotProduct4x8BitPackedSignedAccelerated;

    c->max_storage_buffer_range = props.limits.maxStorageBufferRange;
    c->min_storage_buffer_offset_alignment = props.limits.minStorageBufferOffsetAlignment;
    c->max_shared_memory = props.limits.maxComputeSharedMemorySize;
    c->max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) c->max_workgroup_count[i] = props.limits.maxComputeWorkGroupCount[i];
    c->max_push_constants = props.limits.maxPushConstantsSize;

    c->max_per_stage_storage_buffers = props.limits.maxPerStageDescriptorStorageBuffers;
    c->max_set_storage_buffers = props.limits.maxDescriptorSetStorageBuffers;
    c->storage_buffer_array_dynamic_indexing = f2.features.shaderStorageBufferArrayDynamicIndexing;

    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDevicePushDescriptorPropertiesKHR pdp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
    if (c->push_descriptor) m3.pNext = &pdp;
    VkPhysicalDeviceProperties2 p2b = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(pd, &p2b);
    c->max_memory_allocation = m3.maxMemoryAllocationSize;
    c->max_push_descriptors = c->push_descriptor ? pdp.maxPushDescriptors : 0;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    c->n_heaps = mp.memoryHeapCount < VKV_MAX_HEAPS ? mp.memoryHeapCount : VKV_MAX_HEAPS;
    for (uint32_t i = 0; i < c->n_heaps; i++) {
        c->heap_size[i] = mp.memoryHeaps[i].size;
        c->heap_device_local[i] = mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    }
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
            c->device_local_host_visible = true;
    }

    uint32_t n_qf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_qf, NULL);
    VkQueueFamilyProperties *qf = calloc(n_qf ? n_qf : 1, sizeof *qf);
    if (qf) {
        vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_qf, qf);
        for (uint32_t i = 0; i < n_qf; i++)
            if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].timestampValidBits) c->timestamps = true;
        free(qf);
    }
    c->timestamp_period_ns = props.limits.timestampPeriod;

    if (c->coopmat_nv && vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) {
        uint32_t n = 0;
        vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, NULL);
        VkCooperativeMatrixPropertiesNV *cm = calloc(n ? n : 1, sizeof *cm);
        if (cm) {
            for (uint32_t i = 0; i < n; i++) cm[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
            vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, cm);
            for (uint32_t i = 0; i < n && c->n_coopmat_nv_shapes < VKV_MAX_COOPMAT_SHAPES; i++) {
                vkv_coopmat_shape s = {cm[i].MSize, cm[i].NSize, cm[i].KSize, cm[i].AType, cm[i].BType,
                                       cm[i].CType, cm[i].DType, cm[i].scope};
                c->coopmat_nv_shapes[c->n_coopmat_nv_shapes++] = s;
                if (s.m == 16 && s.n == 16 && s.k == 16 && s.a_type == 0 && s.b_type == 0 && s.c_type == 1 &&
                    s.result_type == 1 && s.scope == VK_SCOPE_SUBGROUP_NV)
                    c->coopmat_nv_f16_16x16x16 = true;
            }
            free(cm);
        }
    }
    vkv_pfn_coopmat_khr get_khr =
        (vkv_pfn_coopmat_khr)vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    if (c->coopmat_khr && get_khr) {
        uint32_t n = 0;
        get_khr(pd, &n, NULL);
        vkv_coopmat_properties_khr *cm = calloc(n ? n : 1, sizeof *cm);
        if (cm) {
            for (uint32_t i = 0; i < n; i++) cm[i].sType = VKV_STYPE_COOPMAT_PROPERTIES_KHR;
            get_khr(pd, &n, cm);
            for (uint32_t i = 0; i < n && c->n_coopmat_khr_shapes < VKV_MAX_COOPMAT_SHAPES; i++)
                c->coopmat_khr_shapes[c->n_coopmat_khr_shapes++] = (vkv_coopmat_shape){
                    cm[i].MSize, cm[i].NSize, cm[i].KSize, cm[i].AType, cm[i].BType, cm[i].CType,
                    cm[i].ResultType, cm[i].scope};
            free(cm);
        }
    }
}

vkv_status vkv_instance_create(bool validate, bool require_validation, vkv_instance **out)
{
    vkv_status st = VKV_OK;
    *out = NULL;
    if (volkInitialize() != VK_SUCCESS)
        return vkv_error(VKV_ERR_NO_DEVICE,
                         "the Vulkan loader (libvulkan.so.1) was not found; install it "
                         "(Debian: libvulkan1 and a driver such as mesa-vulkan-drivers)");
    vkv_instance *inst = calloc(1, sizeof *inst);
    if (!inst) return vkv_error(VKV_ERR_OOM, "out of host memory creating the Vulkan instance");

    const char *layers[1];
    uint32_t n_layers = 0;
    if (validate) {
        if (has_layer("VK_LAYER_KHRONOS_validation")) {
            layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
            inst->validation = true;
        } else if (require_validation) {
            free(inst);
            return vkv_error(VKV_ERR_UNSUPPORTED,
                             "validation was requested but VK_LAYER_KHRONOS_validation is not "
                             "installed (Debian: vulkan-validationlayers)");
        }
    }
    const char *exts[3];
    uint32_t n_exts = 0;
    const bool debug_utils = inst->validation && has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (debug_utils) exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    inst->debug_utils = debug_utils;
    VkInstanceCreateFlags flags = 0;
    if (has_instance_ext("VK_KHR_portability_enumeration")) {
        exts[n_exts++] = "VK_KHR_portability_enumeration";
        flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
    }

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkvector",
        .applicationVersion = 1,
        .pEngineName = "vkvector",
        .apiVersion = VK_API_VERSION_1_3,
    };
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = debug_callback,
        .pUserData = inst,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug_utils ? &dbg : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateInstance(&ci, NULL, &inst->instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        free(inst);
        return vkv_error(VKV_ERR_NO_DEVICE,
                         "no Vulkan driver found (vkCreateInstance returned "
                         "VK_ERROR_INCOMPATIBLE_DRIVER); install one (Debian: mesa-vulkan-drivers)");
    }
    if (r != VK_SUCCESS) {
        free(inst);
        return vkv_vk_error(r, "vkCreateInstance", "creating the Vulkan instance");
    }
    volkLoadInstance(inst->instance);
    if (debug_utils)
        VK_CHECK(vkCreateDebugUtilsMessengerEXT(inst->instance, &dbg, NULL, &inst->messenger),
                 "installing the validation message callback");

    uint32_t n = 0;
    VK_CHECK(vkEnumeratePhysicalDevices(inst->instance, &n, NULL), "counting physical devices");
    if (n > VKV_MAX_DEVICES) n = VKV_MAX_DEVICES;
    r = vkEnumeratePhysicalDevices(inst->instance, &n, inst->phys);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) VK_CHECK(r, "listing physical devices");
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(inst->phys[i], &p);
        if (VK_API_VERSION_MAJOR(p.apiVersion) == 1 && VK_API_VERSION_MINOR(p.apiVersion) < 2) continue;
        inst->phys[inst->n_devices] = inst->phys[i];
        probe_device(inst->instance, inst->phys[i], &inst->caps[inst->n_devices]);
        inst->n_devices++;
    }
    if (!inst->n_devices) {
        st = vkv_error(VKV_ERR_NO_DEVICE, n ? "no Vulkan 1.2+ device found (%u older device(s) ignored)"
                                            : "no Vulkan device found; install a driver (Debian: "
                                              "mesa-vulkan-drivers provides the CPU device lavapipe)",
                       n);
        goto error;
    }
    *out = inst;
    return VKV_OK;
error:
    vkv_instance_destroy(inst);
    return st;
}

void vkv_instance_destroy(vkv_instance *inst)
{
    if (!inst) return;
    if (inst->messenger) vkDestroyDebugUtilsMessengerEXT(inst->instance, inst->messenger, NULL);
    if (inst->instance) vkDestroyInstance(inst->instance, NULL);
    free(inst);
}

uint32_t vkv_instance_n_devices(const vkv_instance *inst) { return inst->n_devices; }
const vkv_caps *vkv_instance_caps(const vkv_instance *inst, uint32_t i)
{
    return i < inst->n_devices ? &inst->caps[i] : NULL;
}
bool vkv_instance_validation_enabled(const vkv_instance *inst) { return inst->validation; }
uint32_t vkv_instance_validation_errors(const vkv_instance *inst)
{
    return __atomic_load_n(&inst->validation_errors, __ATOMIC_RELAXED);
}

static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

uint32_t vkv_instance_preferred_device(const vkv_instance *inst)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < inst->n_devices; i++)
        if (type_rank(inst->caps[i].type) > type_rank(inst->caps[best].type)) best = i;
    return best;
}

vkv_status vkv_gpu_create(vkv_instance *inst, int index, vkv_gpu **out)
{
    vkv_status st = VKV_OK;
    *out = NULL;
    if (index >= (int)inst->n_devices)
        return vkv_error(VKV_ERR_ARG, "device %d does not exist (%u device(s): 0..%u; see 'vkvector devices')",
                         index, inst->n_devices, inst->n_devices - 1);
    uint32_t di = index < 0 ? vkv_instance_preferred_device(inst) : (uint32_t)index;
    vkv_gpu *gpu = calloc(1, sizeof *gpu);
    if (!gpu) return vkv_error(VKV_ERR_OOM, "out of host memory");
    gpu->inst = inst;
    gpu->phys = inst->phys[di];
    gpu->caps = &inst->caps[di];
    const vkv_caps *c = gpu->caps;

    uint32_t n_qf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(gpu->phys, &n_qf, NULL);
    VkQueueFamilyProperties qf[32];
    if (n_qf > 32) n_qf = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(gpu->phys, &n_qf, qf);
    int family = -1;
    /* Prefer a compute queue with timestamps; a graphics+compute one is fine. */
    for (uint32_t i = 0; i < n_qf && family < 0; i++)
        if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].timestampValidBits) family = (int)i;
    for (uint32_t i = 0; i < n_qf && family < 0; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = (int)i;
    if (family < 0) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "device '%s' has no compute queue", c->name);
        goto error;
    }
    gpu->queue_family = (uint32_t)family;

    const char *exts[4];
    uint32_t n_exts = 0;
    if (c->push_descriptor) exts[n_exts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    bool use_coopmat = c->coopmat_nv && c->coopmat_nv_f16_16x16x16 && c->shader_float16 && c->storage_16bit;
    if (use_coopmat) exts[n_exts++] = "VK_NV_cooperative_matrix";

    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .cooperativeMatrix = VK_TRUE,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = use_coopmat ? &fcm : NULL,
        .storageBuffer16BitAccess = c->storage_16bit,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = &f11,
        .shaderFloat16 = c->shader_float16,
        .shaderInt8 = c->shader_int8,
        .storageBuffer8BitAccess = c->storage_8bit,
        .vulkanMemoryModel = use_coopmat,
    };
    VkPhysicalDeviceFeatures2 f2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &f12,
        .features = {.shaderInt16 = c->shader_int16, .shaderInt64 = c->shader_int64,
                     .shaderStorageBufferArrayDynamicIndexing = c->storage_buffer_array_dynamic_indexing},
    };
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = gpu->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f2,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    char what[320];
    snprintf(what, sizeof what, "opening device '%s'", c->name);
    VK_CHECK(vkCreateDevice(gpu->phys, &dci, NULL, &gpu->device), what);
    volkLoadDevice(gpu->device);
    vkGetDeviceQueue(gpu->device, gpu->queue_family, 0, &gpu->queue);
    vkv_pipeline_cache_open(gpu);

    if ((st = vkv_memory_init(gpu)) != VKV_OK) goto error;
    if ((st = vkv_cmd_init(gpu)) != VKV_OK) goto error;
    *out = gpu;
    return VKV_OK;
error:
    vkv_gpu_destroy(gpu);
    return st;
}

void vkv_gpu_destroy(vkv_gpu *gpu)
{
    if (!gpu) return;
    if (gpu->device) {
        vkDeviceWaitIdle(gpu->device);
        vkv_pipeline_cache_close(gpu);
        vkv_cmd_destroy(gpu);
        vkv_pipelines_destroy(gpu);
        vkv_memory_destroy(gpu);
        vkDestroyDevice(gpu->device, NULL);
    }
    free(gpu);
}

const vkv_caps *vkv_gpu_caps(const vkv_gpu *gpu) { return gpu->caps; }
