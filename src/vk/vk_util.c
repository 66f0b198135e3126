/* What every file of vk/ reports through: a failed Vulkan call as a vkvector
 * error, and debug names on Vulkan objects. Kept apart from device.c, which
 * calls the memory, command and pipeline files, so that none of them has to
 * call back into it. */
#include <string.h>

#include "vk/vk_internal.h"

const char *vkv_vk_result_name(VkResult r)
{
    switch (r) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_EVENT_SET) R(VK_EVENT_RESET) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_UNKNOWN) R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    R(VK_ERROR_FRAGMENTATION) R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef R
    default: return "VK_RESULT_UNKNOWN";
    }
}

vkv_status vkv_vk_error(VkResult r, const char *call, const char *what)
{
    vkv_status s = VKV_ERR_VULKAN;
    if (r == VK_ERROR_DEVICE_LOST) s = VKV_ERR_DEVICE_LOST;
    else if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) s = VKV_ERR_OOM;
    /* Keep only the function name of the call expression. */
    char fn[96];
    size_t n = strcspn(call, "(");
    if (n >= sizeof fn) n = sizeof fn - 1;
    memcpy(fn, call, n);
    fn[n] = 0;
    return vkv_error(s, "%s failed with %s while %s", fn, vkv_vk_result_name(r), what);
}

void vkv_debug_name(const vkv_gpu *gpu, VkObjectType type, uint64_t handle, const char *name)
{
    if (!gpu->inst->debug_utils || !vkSetDebugUtilsObjectNameEXT || !handle) return;
    VkDebugUtilsObjectNameInfoEXT ni = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
        .objectType = type,
        .objectHandle = handle,
        .pObjectName = name,
    };
    vkSetDebugUtilsObjectNameEXT(gpu->device, &ni); /* a debugging aid: a failure changes nothing */
}
