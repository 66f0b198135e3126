/* CPU reference of VECTOR's whole allocation, in every pool scope (the
 * oracle of vkv_press_session_compress's selection; docs/ARCHITECTURE.md §2).
 * Per pool S (one row, the rows of a layer, or every row, by scope):
 *   B    = each row's scorer-kept set: its kept[r] highest scores;
 *   a_S  = vkv_kv_tier_counts(n * rows(S), sum of kept[r] over S, p_a).a;
 *   pool = B plus the a_S highest scores of S outside B;
 *   approximated = the 2 a_S lowest residuals of the pool; retained = the
 *   rest of the pool; evicted = the rest.
 * Every ranking sorts by value, then by flat index (layer, head, position:
 * the earlier token wins); NaN ranks last, as in vkv_ref_topk_select. */
#ifndef VKV_REF_POOL_H
#define VKV_REF_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "kvlayout/kv_counts.h"

/* scores, eps: [n_layer, n_kv_head, n] f32 (eps is read inside the pool
 * only); kept: [n_layer * n_kv_head] the scorer's counts; tiers: [n_layer,
 * n_kv_head, n] vkv_tier values out. scope must not be VKV_POOL_DEFAULT.
 * VKV_ERR_OOM when the sort buffers cannot be allocated. */
vkv_status vkv_ref_pool_allocate(const float *scores, const float *eps, const uint32_t *kept, uint32_t n_layer,
                                 uint32_t n_kv_head, uint32_t n, double p_a, bool vector, vkv_pool_scope scope,
                                 uint8_t *tiers);

#endif
