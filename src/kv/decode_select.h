/* The tier decision of compression during generation, device-free
 * (docs/ARCHITECTURE.md §2): one KV head's tokens, each retained or
 * approximated already, re-ranked to fit a budget of K full KV pairs.
 *
 * VECTOR's rule with one constraint, demote only:
 *   a    = vkv_kv_tier_counts(n, K, p_a, vector).a;
 *   pool = the K + a highest scores (ties: the earlier position);
 *   approximated = the pool's already approximated tokens (their values are
 *          gone), then its retained tokens of lowest residual until there are
 *          2a (more when the pool holds more than 2a approximated ones);
 *   retained = the rest of the pool; evicted = everything else.
 * Keys held K + a, values K + a - approximated <= K - a: never more than 2K
 * rows, the eviction baseline's bytes. */
#ifndef VKV_KV_DECODE_SELECT_H
#define VKV_KV_DECODE_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vkv_decode_head {
    uint32_t n;            /* tokens the head holds */
    const float *scores;   /* [n] higher = keep; NaN counts as the lowest */
    const float *eps;      /* [n] OLS residuals (read for retained pool tokens when a > 0) */
    const int32_t *pos;    /* [n] positions (tie-break) */
    const uint8_t *tier;   /* [n] vkv_tier now: retained or approximated */
} vkv_decode_head;

/* out [n] the new tiers; *n_ret, *n_apx their counts. scratch: 2n uint32. */
void vkv_decode_select(const vkv_decode_head *in, uint32_t budget, double p_a, bool vector, uint32_t *scratch,
                       uint8_t *out, uint32_t *n_ret, uint32_t *n_apx);

#endif
