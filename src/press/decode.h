/* Compression during generation (docs/ARCHITECTURE.md §2), by one of two
 * rules (kv/decode_select.h's vkv_decoding_rule):
 *   budget  - the KV cache holds at most max_tokens full KV pairs per head:
 *             when the next token would not fit, every layer is compressed
 *             to max_tokens - every pairs, which leaves room for `every` more;
 *   kvpress - kvpress's DecodingPress: every `every` decoding steps, the token
 *             just computed included, every layer is compressed to exactly
 *             target_tokens pairs per head; the context never is.
 * A compression gathers each layer back into the plain layout (kv_cache.h),
 * re-scores it and compacts it. VECTOR's tiers are kept across compressions:
 * new tokens enter retained, a retained token may be demoted to approximated
 * or evicted, an approximated one only evicted (kv/decode_select.h).
 * Scorers: those that read keys alone (keys_only), positions alone
 * (score_positions) or the queries of the last window of tokens alone (TOVA:
 * the newest token's; SnapKV and PyramidKV: the last 64, all appended since
 * the previous compression, so N >= 64), and those whose prefill reads every
 * query, with what kvpress's DecodingPress hands them instead
 * (vkv_press_ops.decode_window; docs/ARCHITECTURE.md §2):
 *   ObservedAttention - the attention weights of the decoding step, the
 *       newest token's query over the cache, divided by n - j over the
 *       gathered slots as kvpress divides over its own (its cache after a
 *       compression is in top-k order, a gather in position order);
 *   ExpectedAttention - the queries since the last compression, at most 257
 *       (kvpress's buffer), the first 4 left out of the statistics, so N > 4;
 *       the rotation averaged after the window's last position (kvpress: after
 *       the buffer's length), the sinks found by position in the gather;
 *   PyramidKV - each layer's budget at the ratio kvpress's rule hands the
 *       scorer (vkv_decode_kvpress_ratio), capped at M - N under the budget
 *       rule, whose M slots per head bound every layer. */
#ifndef VKV_PRESS_DECODE_H
#define VKV_PRESS_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "infer/forward.h"
#include "kv/decode_select.h"
#include "press/press.h"

typedef struct vkv_decode_params {
    const vkv_press_ops *press;
    vkv_press_params pp;
    bool vector;              /* VECTOR's approximated tier */
    double pa;                /* p_a; < 0: at each compression, the default for each head's ratio
                               * (vkv_kv_default_pa of 1 - budget / tokens held) */
    const float *w;           /* [n_layer, n_kv_head, head_dim, head_dim] per-head maps (vector) */
    vkv_decoding_rule rule;
    uint32_t every;           /* budget: N, tokens between compressions; kvpress: compression_interval */
    uint32_t max_tokens;      /* budget: M, full KV pairs per head the cache may hold (M > N) */
    uint32_t target_tokens;   /* kvpress: target_size, full KV pairs per head after a compression */
} vkv_decode_params;

typedef struct vkv_decode_press vkv_decode_press;

/* Checks the parameters (a scorer of keys, positions or a query window alone,
 * N at least SnapKV's window or more than ExpectedAttention's sinks, M > N,
 * VECTOR's maps) and allocates the gather buffers (K and V; per head 2 M
 * slots, or for kvpress's rule the context's, as the context is never
 * compressed). */
/* With VKVECTOR_CHECK_DECODE=1 in the environment every compression also
 * checks each layer's scores against the scorer's reference on host copies
 * of the gathered layer (an error when they differ; tests). */
vkv_status vkv_decode_press_create(vkv_ctx *ctx, const vkv_model *m, const vkv_decode_params *p, vkv_decode_press **out);
void vkv_decode_press_free(vkv_decode_press *d);

vkv_decoding_rule vkv_decode_rule_of(const vkv_decode_press *d);
/* Call before each evaluation under the press: scorers of a query window
 * (TOVA, SnapKV) capture each layer's last queries through the context's
 * query hook, which a prefill's press session also sets and clears. */
void vkv_decode_watch_queries(vkv_decode_press *d);

/* Budget rule. Tokens the cache takes before the budget or the layout's room runs out. */
uint32_t vkv_decode_room(vkv_decode_press *d);
/* Budget rule. Compresses every layer to M - N pairs per head. */
vkv_status vkv_decode_compress(vkv_decode_press *d);

/* kvpress's rule. Decoding steps (tokens) to evaluate before the next check. */
uint32_t vkv_decode_steps_to_check(const vkv_decode_press *d);
/* kvpress's rule. Counts n decoding steps just evaluated (n <=
 * vkv_decode_steps_to_check); when they complete an interval, compresses
 * every layer to target_tokens pairs per head, unless no head holds more. */
vkv_status vkv_decode_count_steps(vkv_decode_press *d, uint32_t n);

typedef struct vkv_decode_stats {
    uint32_t compressions;
    uint64_t max_rows;        /* the most K + V rows any head held after any token (<= 2 M) */
    double seconds;           /* spent compressing */
    /* kvpress's rule: checks that found no head above the target (nothing
     * compressed). Either rule: the fewest and most tokens (keys) and K + V
     * rows a head held right after a compression, over all compressions,
     * layers and heads (target T: T tokens and 2 T rows without VECTOR; with
     * it T + a keys and at most 2 T rows). */
    uint32_t skipped;
    uint32_t min_tokens_after, max_tokens_after;
    uint32_t min_rows_after, max_rows_after;
} vkv_decode_stats;
vkv_decode_stats vkv_decode_press_stats(const vkv_decode_press *d);
/* Records the rows every head holds now into the stats (call after each token). */
void vkv_decode_observe(vkv_decode_press *d);
/* The fewest and most tokens (keys) a head of `layer` held right after the
 * last compression (0 and 0 before the first): a scorer with its own budget
 * per layer (PyramidKV) keeps a different count in each layer. */
void vkv_decode_layer_tokens(const vkv_decode_press *d, uint32_t layer, uint32_t *min, uint32_t *max);

#endif
