/* The set-up figures `vkvector run` and `vkvector bench -m` print alike:
 * model load, pipeline building (and what the pipeline cache saved), and
 * host and device memory. */
#ifndef VKV_LOAD_REPORT_H
#define VKV_LOAD_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "vk/gpu.h"

/* Peak resident host memory of the process (VmHWM of /proc/self/status), 0
 * where the system does not say. */
uint64_t cli_peak_host_bytes(void);

/* "load:", "pipelines:" and "host memory:" lines: load_seconds is the time
 * vkv_model_load took, weight_bytes what it put on the device. */
void cli_print_load_report(FILE *f, double load_seconds, uint64_t weight_bytes, const vkv_gpu *gpu);

#endif
