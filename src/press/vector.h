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
#include "kvlayout/kv_counts.h"
#include "press/kvzip.h"
#include "press/press.h"

/* Where VECTOR's maps and tier decisions live (docs/ARCHITECTURE.md §2).
 * HEAD: a map per (layer, KV head) and a tier per (layer, KV head, token),
 * the default (the paper says "layer-wise" maps, docs/ARCHITECTURE.md §2).
 * JOINT: one map per layer over all KV heads' keys, so one tier
 * per (layer, token), chosen on the scores (and residuals) pooled over the
 * layer's KV heads (vkv_op_vector_head_mean); the eviction baseline then
 * selects per layer too. */
typedef enum vkv_vector_map {
    VKV_MAP_HEAD = 0,
    VKV_MAP_JOINT,
} vkv_vector_map;
/* "head", "joint". */
const char *vkv_vector_map_name(vkv_vector_map m);

typedef struct vkv_vector_params {
    const vkv_press_ops *press;
    vkv_press_params pp;       /* compression, window, ... */
    bool vector;               /* approximate tier on */
    double pa;                 /* approximation ratio; < 0 = the default (vkv_kv_default_pa) */
    vkv_pool_scope pool;       /* VECTOR's pool scope; VKV_POOL_DEFAULT = the scorer's own (press->pool_scope) */
    const float *w;            /* [n_layer, n_kv_head, head_dim, head_dim] OLS maps (vector only) */
    vkv_vector_map map;        /* per-head or joint maps and tiers */
    const float *w_joint;      /* [n_layer, D, D] joint maps, D = n_kv_head head_dim (map JOINT with vector) */
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
    double pa;                 /* the approximation ratio used */
    vkv_pool_scope pool;       /* the pool scope used */
    vkv_vector_map map;        /* JOINT: every KV head of a layer has the same tiers, and scores / eps
                                * below are the layer's pooled ones, repeated per head */
    uint32_t *n_kept;          /* the scorer's own count (the eviction baseline's) */
    uint32_t *n_ret, *n_apx, *n_evict;
    double *r2_apx;            /* R^2 of the rebuilt values over the approximated tokens (NaN: none) */
    double *rel_err_apx;       /* sum ||v - v^||^2 / sum ||v||^2 over them */
    double *distortion;        /* [n_layer] E = sum_evicted w + sum_apx w ||v - v^||^2/||v||^2 (w: normalised scores) */
    float *scores, *eps;       /* keep_details: [n_layer, n_kv_head, n]; eps NaN outside the pool */
    uint8_t *tiers;            /* keep_details: [n_layer, n_kv_head, n] vkv_tier */
    double seconds;            /* wall time of scoring + allocation + compaction */
} vkv_vector_report;
void vkv_vector_report_free(vkv_vector_report *r);
/* The fractions of all n_layer n_kv_head n context tokens each tier got
 * (all zero for an empty report). */
vkv_tier_fractions vkv_vector_report_achieved(const vkv_vector_report *r);

typedef struct vkv_press_session vkv_press_session;

/* Set up before prefilling n_context tokens into ctx (installs the query
 * capture the scorer needs). Checks the parameters (vkv_kv_check_ratios;
 * VECTOR needs the maps p->w); errors name the problem. */
vkv_status vkv_press_session_create(vkv_ctx *ctx, const vkv_model *m, const vkv_vector_params *p, uint32_t n_context,
                                    vkv_press_session **out);
/* After the prefill: compresses every layer (KVzip: after its
 * reconstruction pass, which evaluates more tokens and drops them). */
vkv_status vkv_press_session_compress(vkv_press_session *s, vkv_vector_report *report);
void vkv_press_session_free(vkv_press_session *s);

#endif
