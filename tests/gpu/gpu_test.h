/* What every GPU test opens and closes: the instance (validation layers as
 * asked), the preferred device, and at the end the count of validation errors. */
#ifndef VKV_TESTS_GPU_TEST_H
#define VKV_TESTS_GPU_TEST_H

#include <stdio.h>

#include "vk/gpu.h"

/* 0 when *inst and *gpu are open; else the test's exit status: 77 (skip)
 * without a Vulkan device, 1 on another error (printed, naming the test). */
static inline int gpu_test_open(const char *test, bool validate, vkv_instance **inst, vkv_gpu **gpu)
{
    vkv_status st = vkv_instance_create(validate, false, inst);
    if (st == VKV_ERR_NO_DEVICE) {
        fprintf(stderr, "%s: skipped: %s\n", test, vkv_last_error());
        return 77;
    }
    if (st || (st = vkv_gpu_create(*inst, -1, gpu))) {
        fprintf(stderr, "%s: %s\n", test, vkv_last_error());
        return 1;
    }
    return 0;
}

/* The index of x's largest value (the first of equals): a greedy token. */
static inline int32_t gpu_test_argmax(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* Closes both; returns the validation errors reported since the opening. */
static inline uint32_t gpu_test_close(vkv_instance *inst, vkv_gpu *gpu)
{
    uint32_t verr = vkv_instance_validation_errors(inst);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return verr;
}

#endif
