/* The conformance suite: every GPU op against its scalar CPU reference, the
 * way ggml's test-backend-ops does it: random inputs in [-1, 1], NMSE = sum
 * (gpu - ref)^2 / sum ref^2 under a per-op threshold, any NaN/Inf mismatch
 * fails, and guard zones before and after every output catch out-of-bounds
 * writes. `vkvector conform` drives it on each device. */
#ifndef VKV_CONFORM_H
#define VKV_CONFORM_H

#include <stdbool.h>
#include <stdint.h>

#include "vk/gpu.h"

typedef struct conform_result {
    char op[32], type[16], shape[96], note[96];
    double nmse, threshold, gpu_ms;
    bool pass, skipped;
} conform_result;

/* Runs the cases whose op name contains filter (all when NULL), the cases
 * with a weight over 128 MiB only when big. *results (free() it) holds every
 * case run, also when a Vulkan failure stopped the run: that failure is the
 * return value. */
vkv_status vkv_conform_device(vkv_gpu *gpu, const vkv_caps *caps, uint64_t seed, const char *filter, bool big,
                              conform_result **results, size_t *n_results);

#endif
