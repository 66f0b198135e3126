/* Reader of the tier dumps `vkvector run --tier-dump` writes (format: see
 * viz/tier_dump.h), for `vkvector viz`.
 *
 * A dump of a long context is big (32k tokens x 32 layers x 8 KV heads is
 * 8.4 M positions, two numbers each: ~130 MB of JSON), so it is read with
 * core/json's pull reader straight into flat arrays instead of a JSON tree. Errors are precise: a syntax error gives the line and column, a field
 * that is missing, of the wrong type or inconsistent names the field and where
 * it is ("layer 3 head 1: tiers has 99 letters, n_context is 100"). */
#ifndef VKV_VIZ_DUMP_H
#define VKV_VIZ_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Tier codes as the visualizer packs them (2 bits per position). */
enum { VIZ_TIER_RETAINED = 0, VIZ_TIER_APPROXIMATED = 1, VIZ_TIER_EVICTED = 2 };

typedef struct viz_head {
    uint32_t head;
    uint32_t n_retained, n_approximated, n_evicted;
    double r2, rel_err;     /* NAN when the dump says null (nothing approximated) */
    uint8_t *tiers;         /* [n_context] VIZ_TIER_* */
    float *scores;          /* [n_context] importance; NAN where the dump has null (+-inf) */
    float *residuals;       /* [n_context] eps_i; NAN outside the pool */
    size_t n_tiers, n_scores, n_residuals; /* as read (checked == n_context) */
} viz_head;

typedef struct viz_layer {
    uint32_t layer;
    double distortion;      /* E, NAN when null */
    uint64_t bytes_retained, bytes_approximated;
    viz_head *heads;
    size_t n_heads;
} viz_layer;

typedef struct viz_dump {
    uint32_t version;
    char *model, *arch, *kv_type, *press;
    uint32_t n_layer, n_kv_head, head_dim, n_context;
    double compression_ratio, approx_ratio; /* "compression", "approx_ratio" */
    bool vector, query_aware;
    char **tokens;          /* [n_tokens] UTF-8 (may hold NULs: see token_len) */
    size_t *token_len;
    size_t n_tokens;
    uint64_t bytes_uncompressed, bytes_retained, bytes_approximated, bytes_w, bytes_kept;
    viz_layer *layers;
    size_t n_layers;
} viz_dump;

/* Parses and checks a whole dump held in text[0, len). */
vkv_status viz_dump_parse(const char *text, size_t len, viz_dump **out);
vkv_status viz_dump_load(const char *path, viz_dump **out);
void viz_dump_free(viz_dump *d);

/* Tokens of each tier summed over the heads of layer l. */
void viz_layer_counts(const viz_dump *d, uint32_t l, uint64_t *ret, uint64_t *apx, uint64_t *evict);

#endif
