/* The KV cache's counting rules (see kv_counts.h). */
#include "kvlayout/kv_counts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Significant digits a double holds exactly for any decimal. */
#define KV_DECIMAL_DIGITS 15

double vkv_kv_decimal(double x)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", KV_DECIMAL_DIGITS, x);
    return strtod(buf, NULL);
}

uint32_t vkv_kv_n_kept(double compression_ratio, uint32_t n)
{
    if (!n) return 0;
    /* int() truncates; the product is >= 0 for p_c <= 1. */
    double kept = floor((double)n * (1.0 - compression_ratio));
    if (kept < 1) return 1;
    return kept > n ? n : (uint32_t)kept;
}

uint64_t vkv_kv_n_evicted_global(uint64_t total, double compression_ratio)
{
    if (!total) return 0;
    /* kvpress's KVzip: a top-k of int(N * p_c) over the negated scores, so
     * exactly that many go, and none when N * p_c < 1 (docs/ARCHITECTURE.md §2). */
    double e = floor((double)total * compression_ratio);
    uint64_t k = e < 1 ? 0 : (uint64_t)e;
    return k > total ? total : k;
}

double vkv_kv_default_pa(double compression_ratio)
{
    /* docs/ARCHITECTURE.md §2: 0.125, 0.25, 0.125, 0.05 at p_c = 0.25, 0.5,
     * 0.75, 0.9 (the last one short by 1e-17, which the counting rule absorbs:
     * a = n/4 at p_c = 0.5 and 50 at p_c = 0.9, n = 1000); the tiers stay
     * non-empty anyway because a <= n_kept and a <= n - n_kept. */
    double a = compression_ratio / 2, b = (1 - compression_ratio) / 2;
    return a < b ? a : b;
}

vkv_tier_fractions vkv_kv_paper_split(double compression_ratio, double p_a, bool vector)
{
    const double pa = !vector ? 0 : p_a < 0 ? vkv_kv_default_pa(compression_ratio) : p_a;
    return (vkv_tier_fractions){.retained = 1 - compression_ratio - pa, .approximated = 2 * pa,
                                .evicted = compression_ratio - pa};
}

const char *vkv_pool_scope_name(vkv_pool_scope s)
{
    switch (s) {
    case VKV_POOL_ROW: return "row";
    case VKV_POOL_LAYER: return "layer";
    case VKV_POOL_GLOBAL: return "global";
    default: return "default";
    }
}

uint32_t vkv_pool_rows(vkv_pool_scope s, uint32_t n_layer, uint32_t n_kv_head)
{
    return s == VKV_POOL_GLOBAL ? n_layer * n_kv_head : s == VKV_POOL_LAYER ? n_kv_head : 1;
}

vkv_tier_counts vkv_kv_tier_counts(uint32_t n, uint32_t n_kept, double p_a, bool vector)
{
    vkv_tier_counts c = {.n_kept = n_kept > n ? n : n_kept};
    if (vector && p_a > 0) {
        double fa = floor(vkv_kv_decimal(p_a * n));
        uint64_t a = (uint64_t)(fa < 0 ? 0 : fa);
        if (a > c.n_kept) a = c.n_kept;
        if (a > n - c.n_kept) a = n - c.n_kept;
        c.a = (uint32_t)a;
    }
    c.pool = c.n_kept + c.a;
    c.retained = c.n_kept - c.a;
    c.approximated = 2 * c.a;
    c.evicted = n - c.n_kept - c.a;
    return c;
}

const char *vkv_kv_check_ratios(double compression_ratio, double p_a, bool vector, char *msg, size_t size)
{
    if (!(compression_ratio >= 0 && compression_ratio < 1))
        snprintf(msg, size, "--compression %g is outside [0, 1)", compression_ratio);
    else if (vector && !(p_a < 0) && !(p_a <= 1 && vkv_kv_decimal(p_a + compression_ratio) <= 1))
        snprintf(msg, size, "--pa %g is too large for --compression %g: it must be at most 1 - p_c = %g", p_a,
                 compression_ratio, 1 - compression_ratio);
    else
        return NULL;
    return msg;
}
