/* VECTOR's allocation on the host (see ref_pool.h), built from the same
 * steps the device runs: per-row top-k, the pool extension, the residual
 * ranking, the tiers. */
#include "ref/ref_pool.h"

#include <stdlib.h>

#include "kvlayout/kv_layout.h"
#include "ref/ref_select.h"
#include "ref/ref_vector.h"

/* One pool of `rows` rows of n tokens, starting at row r0 of the model. */
static vkv_status allocate_pool(const float *scores, const float *eps, const uint32_t *kept, uint32_t rows, uint32_t n,
                                double p_a, bool vector, uint8_t *tiers, uint32_t *scratch_u[3], float *scratch_f)
{
    const uint32_t total = rows * n;
    uint32_t *base = scratch_u[0], *pool = scratch_u[1], *apx = scratch_u[2];
    uint64_t kept_sum = 0;
    for (uint32_t r = 0; r < rows; r++) kept_sum += kept[r] < n ? kept[r] : n;
    vkv_tier_counts tc = vkv_kv_tier_counts(total, (uint32_t)kept_sum, p_a, vector);
    vkv_status st;
    /* B per row, then the pool over the whole scope: B first (+inf), then the next a_S by score. */
    if ((st = vkv_ref_topk_select(scores, rows, n, kept, 0, base))) return st;
    vkv_ref_vector_pool_extend(base, scores, total, scratch_f);
    if ((st = vkv_ref_topk_select(scratch_f, 1, total, NULL, tc.pool, pool))) return st;
    vkv_ref_vector_pool_scores(pool, eps, total, scratch_f);
    if ((st = vkv_ref_topk_select(scratch_f, 1, total, NULL, tc.approximated, apx))) return st;
    vkv_ref_vector_assign_tiers(pool, apx, total, base);
    for (uint32_t i = 0; i < total; i++) tiers[i] = (uint8_t)base[i];
    return VKV_OK;
}

vkv_status vkv_ref_pool_allocate(const float *scores, const float *eps, const uint32_t *kept, uint32_t n_layer,
                                 uint32_t n_kv_head, uint32_t n, double p_a, bool vector, vkv_pool_scope scope,
                                 uint8_t *tiers)
{
    if (scope == VKV_POOL_DEFAULT) return vkv_error(VKV_ERR_ARG, "pool allocation: the scope must be resolved");
    const uint32_t rows_all = n_layer * n_kv_head, rows = vkv_pool_rows(scope, n_layer, n_kv_head);
    const size_t group = (size_t)rows * n;
    if ((uint64_t)rows * n > UINT32_MAX) return vkv_error(VKV_ERR_UNSUPPORTED, "pool allocation: %u x %u tokens", rows, n);
    uint32_t *u = malloc(3 * sizeof *u * (group ? group : 1));
    float *f = malloc(sizeof *f * (group ? group : 1));
    vkv_status st = VKV_OK;
    if (!u || !f) st = vkv_error(VKV_ERR_OOM, "pool allocation: out of host memory");
    uint32_t *scratch_u[3] = {u, u + group, u + 2 * group};
    for (uint32_t r0 = 0; r0 < rows_all && !st; r0 += rows)
        st = allocate_pool(scores + (size_t)r0 * n, eps + (size_t)r0 * n, kept + r0, rows, n, p_a, vector,
                           tiers + (size_t)r0 * n, scratch_u, f);
    free(u);
    free(f);
    return st;
}
