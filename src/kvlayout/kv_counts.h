/* How many tokens each tier of a compressed KV head holds: the pure counting
 * of kvpress and VECTOR, device-free, so reports and unit tests link it
 * without the GPU stack (docs/ARCHITECTURE.md §2).
 *
 * The ratios are doubles end to end: p_c and p_a are the doubles of the
 * decimals the user typed, exactly what Python holds for them. */
#ifndef VKV_KV_COUNTS_H
#define VKV_KV_COUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kvpress's uniform count: max(1, int(n * (1 - p_c))), in double as Python
 * evaluates it: int(1000 * (1 - 0.9)) is 99 there, and here. 0 for n = 0. */
uint32_t vkv_kv_n_kept(double compression_ratio, uint32_t n);

/* kvpress's global selection: int(N * p_c) scores evicted, as Python
 * evaluates it, capped at N; 0 when N * p_c < 1 (nothing evicted). */
uint64_t vkv_kv_n_evicted_global(uint64_t total, double compression_ratio);

/* VECTOR's default approximation ratio: min(p_c / 2, (1 - p_c) / 2). */
double vkv_kv_default_pa(double compression_ratio);

/* Integer counts of one pool scope: n its tokens (n context tokens times its
 * rows) and n_kept the scorer's count over those rows. For a row: a = min(floor(vkv_kv_decimal(p_a n)), n_kept,
 * n - n_kept) (0 without VECTOR); pool = n_kept + a; retained = n_kept - a;
 * approximated = 2a; evicted = n - n_kept - a. Keys held = n_kept + a,
 * values = n_kept - a: exactly n_kept full KV pairs either way, in every
 * scope (the byte equation). */
typedef struct vkv_tier_counts {
    uint32_t n_kept, a, pool, retained, approximated, evicted;
} vkv_tier_counts;
vkv_tier_counts vkv_kv_tier_counts(uint32_t n, uint32_t n_kept, double p_a, bool vector);

/* Fractions of all of a cache's context tokens (every layer and KV head)
 * per tier; they add up to 1. */
typedef struct vkv_tier_fractions {
    double retained, approximated, evicted;
} vkv_tier_fractions;
/* The paper's split of all n tokens (docs/ARCHITECTURE.md §2): retained
 * 1 - p_c - p_a, approximated 2 p_a, evicted p_c - p_a (p_a 0 without VECTOR;
 * p_a < 0: the default). */
vkv_tier_fractions vkv_kv_paper_split(double compression_ratio, double p_a, bool vector);

/* VECTOR's pool scope (docs/ARCHITECTURE.md §2): the rows over which the
 * approximation budget a = floor(p_a n_S), the pool's extension past the
 * scorer's own kept set and the choice of the 2a lowest residuals are taken.
 * ROW: each (layer, KV head) alone; LAYER: the KV heads of a layer together;
 * GLOBAL: every row of the model. DEFAULT: the scorer's default
 * (vkv_press_ops.pool_scope, measured per scorer). */
typedef enum vkv_pool_scope {
    VKV_POOL_DEFAULT = 0,
    VKV_POOL_ROW,
    VKV_POOL_LAYER,
    VKV_POOL_GLOBAL,
} vkv_pool_scope;
/* "row", "layer", "global" ("default" for VKV_POOL_DEFAULT). */
const char *vkv_pool_scope_name(vkv_pool_scope s);
/* Rows per pool of a model with n_layer layers of n_kv_head KV heads. */
uint32_t vkv_pool_rows(vkv_pool_scope s, uint32_t n_layer, uint32_t n_kv_head);

/* The decimal a product or sum of typed decimals stands for: x rounded to
 * 15 significant digits, which removes the binary error (0.3 * 10 =
 * 2.9999999999999996 is 3; 1000 times the default p_a at p_c = 0.9 is 50,
 * not 49.99999999999999) and changes nothing else. */
double vkv_kv_decimal(double x);

/* The cross-parameter rules of compression, in one place: p_c in [0, 1);
 * with VECTOR, p_a < 0 (the default) or p_a in [0, 1] with p_a <= 1 - p_c
 * (the approximated tier takes 2 p_a n keys out of the (1 - p_c) n kept
 * pairs; the sum p_a + p_c taken as vkv_kv_decimal). Returns NULL when they hold, else
 * msg (size bytes) filled with the problem in the CLI's words. */
const char *vkv_kv_check_ratios(double compression_ratio, double p_a, bool vector, char *msg, size_t size);

#endif
