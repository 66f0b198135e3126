#include "core/status.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *vkv_status_name(vkv_status s)
{
    switch (s) {
    case VKV_OK: return "ok";
    case VKV_ERR_ARG: return "invalid argument";
    case VKV_ERR_IO: return "I/O error";
    case VKV_ERR_FORMAT: return "malformed input";
    case VKV_ERR_OOM: return "out of memory";
    case VKV_ERR_UNSUPPORTED: return "unsupported";
    case VKV_ERR_NO_DEVICE: return "no Vulkan device";
    case VKV_ERR_VULKAN: return "Vulkan error";
    case VKV_ERR_DEVICE_LOST: return "device lost";
    case VKV_ERR_VALIDATION: return "validation error";
    case VKV_ERR_CHECK: return "check failed";
    }
    return "unknown status";
}

vkv_status vkv_error(vkv_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

vkv_status vkv_error_context(vkv_status s, const char *fmt, ...)
{
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    snprintf(last_error, sizeof last_error, "%.500s: %.500s", prefix, old);
    return s;
}

const char *vkv_last_error(void)
{
    return last_error[0] ? last_error : "(no message)";
}

void vkv_clear_error(void) { last_error[0] = 0; }
