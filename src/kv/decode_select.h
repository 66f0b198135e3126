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

/* When compression during generation runs and what it keeps
 * (docs/ARCHITECTURE.md §2, "Compression during generation"). */
typedef enum vkv_decoding_rule {
    /* vkvector's: the cache never holds more than max_tokens pairs per head;
     * compress to max_tokens - every when the next token would not fit. The
     * prompt is evaluated under the budget too. */
    VKV_DECODING_BUDGET = 0,
    /* kvpress's DecodingPress: every `every` decoding steps (tokens after the
     * context), the token just computed included, each head holding more
     * than target_tokens is compressed to exactly target_tokens; the context
     * is never compressed and nothing bounds the cache between compressions. */
    VKV_DECODING_KVPRESS,
} vkv_decoding_rule;

/* kvpress's DecodingPress defaults: compression_interval, target_size. */
enum { VKV_KVPRESS_COMPRESSION_INTERVAL = 512, VKV_KVPRESS_TARGET_SIZE = 2048 };

/* kvpress's step counter: it counts decoding steps and fires every
 * `interval` of them, whether or not the cache is larger than the target
 * (it restarts either way). */
typedef struct vkv_decode_counter {
    uint32_t interval;
    uint32_t steps;        /* since the last firing */
} vkv_decode_counter;
/* Steps still to count before the counter fires (at least 1). */
uint32_t vkv_decode_steps_to_fire(const vkv_decode_counter *c);
/* Counts n steps (n <= vkv_decode_steps_to_fire); true when they made it fire. */
bool vkv_decode_count(vkv_decode_counter *c, uint32_t n);

/* The full KV pairs per head a compression keeps (vkv_decode_select's
 * budget): budget rule M - N, kvpress's rule its target. */
uint32_t vkv_decode_target(vkv_decoding_rule rule, uint32_t every, uint32_t max_tokens, uint32_t target_tokens);
/* kvpress's rule: whether a compression changes anything, given the most
 * tokens any head holds (a head at or under the target keeps everything). */
bool vkv_decode_kvpress_compresses(uint32_t most_head_tokens, uint32_t target_tokens);
/* kvpress's rule: the compression ratio DecodingPress hands its scorer for a
 * layer of n tokens, the one whose int(n (1 - ratio)) is target: 0 when n <=
 * target, else 1 - target / n, corrected by bisection on [0, 1] (at most 20
 * halvings, as kvpress's _find_target_compression_ratio). A scorer with its
 * own budget per layer (PyramidKV) derives that budget from this ratio. */
double vkv_decode_kvpress_ratio(uint32_t n, uint32_t target);

#endif
