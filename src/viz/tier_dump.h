/* --tier-dump: per layer and KV head, each context position's tier,
 * importance score and residual, the token text, and byte counts, as JSON
 * (the input of `vkvector viz`). Format, version 1:
 * {
 *   "vkvector_tier_dump": 1,
 *   "model": path, "arch": "llama", "n_layer": L, "n_kv_head": H, "head_dim": d,
 *   "kv_type": "f16" (or "K/V", e.g. "f16/q8_0"), "press": "keydiff", "compression": p_c, "approx_ratio": p_a,
 *   "vector": bool, "query_aware": bool, "n_context": n,
 *   "vector_pool": {"scope": "row" | "layer" | "global", "kept": K, "a": a, "keys": K + a, "values": K - a}
 *     (VECTOR only; K: the scorer's own count over every layer x head),
 *   "achieved": {"retained": f, "approximated": f, "evicted": f}
 *     (each tier's fraction of all L H n context tokens; optional: older dumps lack it),
 *   "tokens": [n strings],
 *   "bytes": {"uncompressed": .., "retained": .., "approximated": .., "w_matrices": .., "kept_total": ..},
 *   "layers": [{"layer": l, "distortion": E, "bytes_retained": .., "bytes_approximated": ..,
 *               "heads": [{"head": h, "n_kept": (the scorer's count), "n_retained": .., "n_approximated": .., "n_evicted": ..,
 *                          "r2": .. | null, "rel_err": .. | null,
 *                          "tiers": "RRAE.." (one letter per position: R retained, A approximated, E evicted),
 *                          "scores": [n numbers | null for +-inf], "residuals": [n numbers | null outside the pool]}]}]
 *     (scores and residuals: the f32 values to 9 significant digits, exact)
 * } */
#ifndef VKV_TIER_DUMP_H
#define VKV_TIER_DUMP_H

#include "press/vector.h"
#include "tok/tokenizer.h"

typedef struct vkv_tier_dump_info {
    const char *model_path, *press;
    const vkv_model *model;
    vkv_dtype k_type, v_type; /* the tiers' rows (kvlayout/kv_layout.h) */
    double compression_ratio; /* written as "compression" */
    bool vector, query_aware;
    const int32_t *ids;      /* the n context tokens */
    const vkv_tokenizer *tok;/* may be NULL: tokens are then written as ids */
    vkv_kv_memory mem;
} vkv_tier_dump_info;

/* Writes `"key": {"retained": f, "approximated": f, "evicted": f}`, the
 * tiers' fractions of all context tokens (as a tier dump's "achieved"; the
 * result lines of longbench and niah write the same object). */
struct vkv_json_writer;
void vkv_json_tier_fractions(struct vkv_json_writer *w, const char *key, vkv_tier_fractions f);

vkv_status vkv_tier_dump_write(const char *path, const vkv_tier_dump_info *info, const vkv_vector_report *r);

#endif
