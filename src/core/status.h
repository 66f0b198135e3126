/* Status codes and the thread-local error message.
 *
 * Library code never exits and never prints errors itself: it returns a
 * vkv_status and records a human-readable message with vkv_error(). Only the
 * CLI decides how to report it. */
#ifndef VKV_STATUS_H
#define VKV_STATUS_H

#include <stdarg.h>

typedef enum vkv_status {
    VKV_OK = 0,
    VKV_ERR_ARG,          /* bad argument or flag */
    VKV_ERR_IO,           /* file could not be opened/read/written */
    VKV_ERR_FORMAT,       /* malformed or truncated input file */
    VKV_ERR_OOM,          /* host or device memory exhausted */
    VKV_ERR_UNSUPPORTED,  /* valid input this build/device cannot handle */
    VKV_ERR_NO_DEVICE,    /* no Vulkan device present / selectable */
    VKV_ERR_VULKAN,       /* a Vulkan call failed */
    VKV_ERR_DEVICE_LOST,  /* VK_ERROR_DEVICE_LOST */
    VKV_ERR_VALIDATION,   /* a validation layer reported an error */
    VKV_ERR_CHECK,        /* a numerical check (conformance, golden) failed */
} vkv_status;

const char *vkv_status_name(vkv_status s);

#if defined(__GNUC__)
#define VKV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define VKV_PRINTF(a, b)
#endif

/* Records a formatted message as the current thread's last error and returns s,
 * so call sites read `return vkv_error(VKV_ERR_FORMAT, "...", ...);`. */
vkv_status vkv_error(vkv_status s, const char *fmt, ...) VKV_PRINTF(2, 3);
/* Prepends context ("loading model: ") to the current message; returns s. */
vkv_status vkv_error_context(vkv_status s, const char *fmt, ...) VKV_PRINTF(2, 3);
const char *vkv_last_error(void);
void vkv_clear_error(void);

#endif
