/* VECTOR's three-way allocation on top of a scorer, and its driver: capture
 * what the scorer needs during the context's prefill, then per layer score,
 * pick the pool, rank it by OLS residual, assign tiers and compact the cache
 * (docs/ARCHITECTURE.md §2). With the approximation off (or p_a = 0) this is the plain
 * kvpress eviction baseline, through the very same code. */
#ifndef VKV_PRESS_VECTOR_H
#define VKV_PRESS_VECTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "infer/forward.h"
#include "press/kvzip.h"
#include "press/press.h"

/* Default approximation ratio: min(p_c / 2, (1 - p_c - eps) / 2). */
float vkv_vector_default_pa(float p_c);

/* Integer counts of one (layer, KV head) with n context tokens and n_kept
 * the scorer's count: a = min(floor(p_a n), n_kept, n - n_kept) (0 without
 * VECTOR); pool = n_kept + a; retained = n_kept - a; approximated = 2a;
 * evicted = n - n_kept - a. Keys held = n_kept + a, values = n_kept - a:
 * exactly n_kept full KV pairs either way. */
typedef struct vkv_tier_counts {
    uint32_t n_kept, a, pool, retained, approximated, evicted;
} vkv_tier_counts;
vkv_tier_counts vkv_vector_counts(uint32_t n, uint32_t n_kept, float p_a, bool vector);

typedef struct vkv_vector_params {
    const vkv_press_ops *press;
    vkv_press_params pp;       /* compression, window, ... */
    bool vector;               /* approximate tier on */
    float pa;                  /* approximation ratio; < 0 = the default */
    const float *w;            /* [n_layer, n_kv_head, head_dim, head_dim] OLS maps (vector only) */
    bool keep_details;         /* keep per-token scores, residuals and tiers for a tier dump */
    bool lean;                 /* benchmarks: no per-head quality figures, no host copies (counts only) */
    /* KVzip (press->repeat_pass): the context's token ids ([n_context], valid
     * until compress returns) and the reconstruction prompt (press/kvzip.h,
     * vkv_kvzip_prompt_make). The context must have room for
     * vkv_press_session_extra_tokens() more tokens during compression. */
    const int32_t *context_ids;
    const vkv_kvzip_prompt *kvzip;
} vkv_vector_params;

/* Cache slots past the n_context tokens that compression uses for a while
 * (KVzip's longest reconstruction pass; 0 for the other scorers, or without
 * p->kvzip): create the context with n_ctx >= n_context + this. */
uint32_t vkv_press_session_extra_tokens(const vkv_vector_params *p, uint32_t n_context);

/* What compression did, per layer and KV head ([n_layer * n_kv_head] arrays,
 * layer-major) and, with keep_details, per token ([.. * n]). */
typedef struct vkv_vector_report {
    uint32_t n_layer, n_kv_head, n;
    float pa;                  /* the approximation ratio used */
    uint32_t *n_ret, *n_apx, *n_evict;
    double *r2_apx;            /* R^2 of the rebuilt values over the approximated tokens (NaN: none) */
    double *rel_err_apx;       /* sum ||v - v^||^2 / sum ||v||^2 over them */
    double *distortion;        /* [n_layer] E = sum_evicted w + sum_apx w ||v - v^||^2/||v||^2 (w: normalised scores) */
    float *scores, *eps;       /* keep_details: [n_layer, n_kv_head, n]; eps NaN outside the pool */
    uint8_t *tiers;            /* keep_details: [n_layer, n_kv_head, n] vkv_tier */
    double seconds;            /* wall time of scoring + allocation + compaction */
} vkv_vector_report;
void vkv_vector_report_free(vkv_vector_report *r);

typedef struct vkv_press_session vkv_press_session;

/* Set up before prefilling n_context tokens into ctx (installs the query
 * capture the scorer needs). Checks the parameters: p_c in [0, 1), p_a in
 * [0, 1 - p_c] ... errors name the problem. */
vkv_status vkv_press_session_create(vkv_ctx *ctx, const vkv_model *m, const vkv_vector_params *p, uint32_t n_context,
                                    vkv_press_session **out);
/* After the prefill: compresses every layer (KVzip: after its
 * reconstruction pass, which evaluates more tokens and drops them). */
vkv_status vkv_press_session_compress(vkv_press_session *s, vkv_vector_report *report);
void vkv_press_session_free(vkv_press_session *s);

#endif
