/* What the conformance cases share: the run's context, guarded GPU buffers,
 * NMSE and the verdict. */
#ifndef VKV_CONFORM_HARNESS_H
#define VKV_CONFORM_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conform/conform.h"
#include "core/rng.h"
#include "vk/ops.h"
#include "vk/ops_attn.h"
#include "ref/ref_attn.h"

/* Thresholds (NMSE). Ops computed in f32 on both sides differ only by
 * accumulation order: 1e-7 as in test-backend-ops. The cooperative-matrix path
 * rounds activations and weights to f16: 5e-4 as ggml allows for f16 matmul.
 * RoPE angles are pos * inv_freq in f32 on the GPU (range-reduced before
 * sin/cos) and double in the reference; lavapipe measures ~5e-10 at positions
 * up to 4096, so the f32 threshold holds. */
#define NMSE_F32 1e-7
#define NMSE_EXACT 0.0
#define NMSE_COOPMAT 5e-4

typedef struct conform_ctx {
    vkv_gpu *gpu;
    const vkv_caps *caps;
    vkv_rng rng;
    uint64_t guard_bytes; /* before and after each output: a multiple of the alignment */
    conform_result *results;
    size_t n_results, cap_results;
    const char *filter; /* only ops whose name contains this */
    bool big;           /* include the >128 MiB weight cases */
    vkv_status fatal;   /* a Vulkan failure stops the device's run */
} conform_ctx;

/* A GPU buffer holding `bytes` of data between two guard zones. */
typedef struct guarded {
    vkv_buffer *buf;
    uint64_t bytes;
    vkv_view view;
} guarded;

/* Makes room for k more results, so that the pointers new_result hands out
 * stay valid while a case fills several of them. */
bool conform_reserve_results(conform_ctx *c, size_t k);

conform_result *conform_new_result(conform_ctx *c, const char *op, const char *type, const char *shape);

float *conform_random_f32(conform_ctx *c, size_t n);

vkv_status conform_guarded_create(conform_ctx *c, uint64_t bytes, const void *init, guarded *g);
/* A weight matrix of `rows` rows of k elements of type t, given in the file's
 * layout (rows_file) and created in the device's (core/dtype.h). */
vkv_status conform_weight_create(conform_ctx *c, vkv_dtype t, uint32_t k, uint64_t rows, const void *rows_file, guarded *g);

/* Downloads the data and checks the guard words around it. */
vkv_status conform_guarded_read(conform_ctx *c, guarded *g, void *out, bool *guards_ok);

void conform_guarded_destroy(conform_ctx *c, guarded *g);

/* NMSE of gpu against ref; nan_mismatch when one side is non-finite where the
 * other is not. */
double conform_nmse_f32(const float *ref, const float *gpu, size_t n, bool *nan_mismatch);

void conform_finish(conform_result *r, double nmse, bool nan_mismatch, bool guards_ok, double threshold, double ms);

/* A result that must be bitwise `want` (n floats): passes when every float's
 * bytes match; the verdict's number is the NMSE, at least 1e-30 when any bit
 * differs, and the note counts the floats that differ. */
void conform_finish_bitwise(conform_result *r, const float *want, const float *got, size_t n, bool guards_ok, double ms);

vkv_status conform_run_recorded(conform_ctx *c, vkv_status (*rec)(conform_ctx *, void *), void *arg, double *ms);

/* Fills a cache's slots n_kv..n_ctx_max-1 with NaN: a kernel that reads a
 * slot it must not see turns the output NaN and fails the case. */
void conform_poison_unused_slots(const vkv_attn_params *p, vkv_dtype t, void *cache);

void conform_fill_cache(conform_ctx *c, vkv_dtype t, void *cache, size_t rows, uint32_t hd, float scale);

const char *conform_matmul_path_name(vkv_matmul_path p);

#endif
