/* Compression during generation: one head's tier decision (decode_select.h). */
#include "kv/decode_select.h"

#include <math.h>
#include <stdlib.h>

#include "kvlayout/kv_counts.h"
#include "kvlayout/kv_layout.h"

/* qsort has no context argument: the head being sorted. */
static _Thread_local const vkv_decode_head *sort_head;

static float key_of(float x) { return isnan(x) ? -INFINITY : x; }

/* Highest score first, then the earlier position. */
static int by_score(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    float sa = key_of(sort_head->scores[a]), sb = key_of(sort_head->scores[b]);
    if (sa != sb) return sa > sb ? -1 : 1;
    return sort_head->pos[a] < sort_head->pos[b] ? -1 : sort_head->pos[a] > sort_head->pos[b];
}

/* Lowest residual first (NaN last), then the earlier position. */
static int by_residual(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    float ea = sort_head->eps[a], eb = sort_head->eps[b];
    if (isnan(ea) != isnan(eb)) return isnan(ea) ? 1 : -1;
    if (!isnan(ea) && ea != eb) return ea < eb ? -1 : 1;
    return sort_head->pos[a] < sort_head->pos[b] ? -1 : sort_head->pos[a] > sort_head->pos[b];
}

void vkv_decode_select(const vkv_decode_head *in, uint32_t budget, double p_a, bool vector, uint32_t *scratch,
                       uint8_t *out, uint32_t *n_ret, uint32_t *n_apx)
{
    const uint32_t n = in->n, K = budget < n ? budget : n;
    const vkv_tier_counts tc = vkv_kv_tier_counts(n, K, p_a, vector);
    uint32_t *order = scratch, *cand = scratch + n;
    for (uint32_t j = 0; j < n; j++) {
        order[j] = j;
        out[j] = VKV_TIER_EVICTED;
    }
    sort_head = in;
    qsort(order, n, sizeof *order, by_score);
    uint32_t forced = 0, n_cand = 0;
    for (uint32_t i = 0; i < tc.pool; i++) {
        uint32_t j = order[i];
        if (in->tier[j] == VKV_TIER_APPROXIMATED) {
            out[j] = VKV_TIER_APPROXIMATED;
            forced++;
        } else {
            out[j] = VKV_TIER_RETAINED;
            cand[n_cand++] = j;
        }
    }
    uint32_t want = tc.approximated > forced ? tc.approximated - forced : 0;
    if (want > n_cand) want = n_cand;
    if (want) {
        qsort(cand, n_cand, sizeof *cand, by_residual);
        for (uint32_t i = 0; i < want; i++) out[cand[i]] = VKV_TIER_APPROXIMATED;
    }
    sort_head = NULL;
    *n_apx = forced + want;
    *n_ret = tc.pool - *n_apx;
}

uint32_t vkv_decode_steps_to_fire(const vkv_decode_counter *c)
{
    return c->steps < c->interval ? c->interval - c->steps : 1;
}

bool vkv_decode_count(vkv_decode_counter *c, uint32_t n)
{
    c->steps += n;
    if (c->steps < c->interval) return false;
    c->steps = 0;
    return true;
}

uint32_t vkv_decode_target(vkv_decoding_rule rule, uint32_t every, uint32_t max_tokens, uint32_t target_tokens)
{
    return rule == VKV_DECODING_KVPRESS ? target_tokens : max_tokens - every;
}

bool vkv_decode_kvpress_compresses(uint32_t most_head_tokens, uint32_t target_tokens)
{
    return most_head_tokens > target_tokens;
}

double vkv_decode_kvpress_ratio(uint32_t n, uint32_t target)
{
    if (n <= target) return 0.0;
    double ratio = 1.0 - (double)target / n, low = 0.0, high = 1.0;
    for (int i = 0; i < 20; i++) {
        const double kept = floor((double)n * (1.0 - ratio)); /* Python's int() of a positive double */
        if (kept == target) break;
        if (kept > target) {
            low = ratio;
            ratio = (ratio + high) / 2;
        } else {
            high = ratio;
            ratio = (low + ratio) / 2;
        }
    }
    return ratio;
}
