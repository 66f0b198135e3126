/* Compression during generation (kvpress's DecodingPress; docs/ARCHITECTURE.md
 * §2): the KV cache holds at most max_tokens full KV pairs per head. When
 * the next token would not fit, every layer is gathered back into the plain
 * layout (kv_cache.h), re-scored, and compacted to max_tokens - every pairs,
 * which leaves room for `every` more tokens. VECTOR's tiers are kept across
 * compressions: new tokens enter retained, a retained token may be demoted
 * to approximated or evicted, an approximated one only evicted
 * (kv/decode_select.h). Scorers: those that read keys alone (keys_only). */
#ifndef VKV_PRESS_DECODE_H
#define VKV_PRESS_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "infer/forward.h"
#include "press/press.h"

typedef struct vkv_decode_params {
    const vkv_press_ops *press;
    vkv_press_params pp;
    bool vector;              /* VECTOR's approximated tier */
    double pa;                /* p_a; < 0: at each compression, the default for each head's ratio
                               * (vkv_kv_default_pa of 1 - budget / tokens held) */
    const float *w;           /* [n_layer, n_kv_head, head_dim, head_dim] per-head maps (vector) */
    uint32_t every;           /* N: tokens between compressions */
    uint32_t max_tokens;      /* M: full KV pairs per head the cache may hold (M > N) */
} vkv_decode_params;

typedef struct vkv_decode_press vkv_decode_press;

/* Checks the parameters (a keys_only scorer, M > N, VECTOR's maps) and
 * allocates the gather buffers (2 M slots per head, K and V). */
vkv_status vkv_decode_press_create(vkv_ctx *ctx, const vkv_model *m, const vkv_decode_params *p, vkv_decode_press **out);
void vkv_decode_press_free(vkv_decode_press *d);

/* Tokens the cache takes before the budget or the layout's room runs out. */
uint32_t vkv_decode_room(vkv_decode_press *d);
/* Compresses every layer to M - N pairs per head. */
vkv_status vkv_decode_compress(vkv_decode_press *d);

typedef struct vkv_decode_stats {
    uint32_t compressions;
    uint64_t max_rows;        /* the most K + V rows any head held after any token (<= 2 M) */
    double seconds;           /* spent compressing */
} vkv_decode_stats;
vkv_decode_stats vkv_decode_press_stats(const vkv_decode_press *d);
/* Records the rows every head holds now into the stats (call after each token). */
void vkv_decode_observe(vkv_decode_press *d);

#endif
