/* VECTOR's allocation driver. Per layer, on the GPU:
 *   scores[H, n]  = scorer(K, V, captured queries or state)
 *   pool[H, n]    = top (n_kept + a) of scores        (budget relaxation)
 *   eps[H, n]     = ||V - W R^-1 K||^2                 (OLS residual)
 *   apx[H, n]     = top 2a of (pool ? -eps : -inf)     (asymmetric truncation)
 *   tiers[H, n]   = pool ? (apx ? approximated : retained) : evicted
 * then the layer's cache is compacted into the tiered layout.
 * Scorers with a capture (observed, expected, kvzip) get a per-layer state
 * updated from every query of the prefill (or, for KVzip, of the
 * reconstruction pass run here before scoring). With a global selection
 * (KVzip) every layer is scored first, one threshold over all of them gives
 * each (layer, KV head) its own n_kept, and the pool / residual / truncation
 * steps take per-row counts. */
#include "press/vector.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "press/select.h"
#include "press/select_global.h"
#include "ref/ref_attn.h"
#include "vk/ops_vector.h"

struct vkv_press_session {
    vkv_ctx *ctx;
    const vkv_model *m;
    vkv_vector_params p;
    uint32_t n;              /* context tokens */
    uint32_t window;         /* queries captured per layer */
    vkv_buffer **q_window;   /* [n_layer] each [window, n_head, head_dim] f32 */
    /* scorers with a capture (press->capture_gpu), when p_c > 0 */
    vkv_buffer **state;      /* [n_layer] each press->state_bytes() */
    vkv_buffer *scratch;     /* shared by the capture and the scoring */
    bool repeating;          /* inside KVzip's reconstruction pass */
    uint32_t span0, span1;   /* the context tokens that pass repeats */
};

void vkv_vector_report_free(vkv_vector_report *r)
{
    free(r->n_ret);
    free(r->n_apx);
    free(r->n_evict);
    free(r->r2_apx);
    free(r->rel_err_apx);
    free(r->distortion);
    free(r->scores);
    free(r->eps);
    free(r->tiers);
    memset(r, 0, sizeof *r);
}

/* Copies the rows of a chunk's queries that fall in the last `window`
 * positions of the context into the layer's window buffer. */
static vkv_status capture_queries(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view q, uint32_t n_tok, uint32_t pos0)
{
    vkv_press_session *s = user;
    uint32_t first = s->n - s->window; /* position of window row 0 */
    uint32_t lo = pos0 > first ? pos0 : first, hi = pos0 + n_tok < s->n ? pos0 + n_tok : s->n;
    if (lo >= hi) return VKV_OK;
    const vkv_hparams *hp = &s->m->hp;
    uint64_t row = 4ull * hp->n_head * hp->head_dim;
    return vkv_cmd_copy(gpu, q.buf, q.offset + (lo - pos0) * row, s->q_window[layer], (lo - first) * row, (hi - lo) * row);
}

/* What the scorer sees of layer l (k/v views of the plain cache). */
static vkv_press_layer layer_input(const vkv_press_session *s, uint32_t l, vkv_view scratch)
{
    const vkv_hparams *hp = &s->m->hp;
    vkv_view none = {0};
    return (vkv_press_layer){
        .layer = l, .n_layer = hp->n_layer, .n = s->n, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
        .head_dim = hp->head_dim, .n_ctx = vkv_ctx_n_ctx(s->ctx), .kv_type = vkv_ctx_kv_type(s->ctx),
        .k = vkv_ctx_k_cache(s->ctx, l), .v = vkv_ctx_v_cache(s->ctx, l), .window = s->window,
        .q_window = s->window ? vkv_view_of(s->q_window[l]) : none, .scratch = scratch,
        .state = s->state ? vkv_view_of(s->state[l]) : none, .n_rot = hp->n_rot,
        .rope_neox = hp->rope_mode == VKV_ROPE_NEOX, .inv_freq = vkv_view_of(s->m->rope_inv_freq),
        .prefix = s->p.kvzip ? s->p.kvzip->prefix : 0, .span0 = s->span0, .span1 = s->span1,
    };
}

/* The query hook of scorers with a capture: the window copy (if any) and the
 * scorer's own update, during the prefill or the reconstruction pass. */
static vkv_status press_hook(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view q, uint32_t n_tok, uint32_t pos0)
{
    vkv_press_session *s = user;
    vkv_status st;
    if (s->window && !s->repeating && (st = capture_queries(user, gpu, layer, q, n_tok, pos0))) return st;
    if (s->repeating != s->p.press->repeat_pass) return VKV_OK;
    vkv_press_layer in = layer_input(s, layer, vkv_view_of(s->scratch));
    return s->p.press->capture_gpu(gpu, &s->p.pp, &in, q, n_tok, pos0);
}

uint32_t vkv_press_session_extra_tokens(const vkv_vector_params *p, uint32_t n_context)
{
    if (!p->press || !p->press->repeat_pass || !p->kvzip) return 0;
    return vkv_kvzip_max_pass_tokens(p->kvzip, n_context);
}

vkv_status vkv_press_session_create(vkv_ctx *ctx, const vkv_model *m, const vkv_vector_params *p, uint32_t n_context,
                                    vkv_press_session **out)
{
    *out = NULL;
    const double pc = p->pp.compression;
    if (!p->press) return vkv_error(VKV_ERR_ARG, "no press given");
    char why[160];
    if (vkv_kv_check_ratios(pc, p->pa, p->vector, why, sizeof why)) return vkv_error(VKV_ERR_ARG, "%s", why);
    const double pa = p->pa < 0 ? vkv_kv_default_pa(pc) : p->pa;
    if (p->vector && !p->w) return vkv_error(VKV_ERR_ARG, "VECTOR needs a calibration file (--calib)");
    if (n_context == 0) return vkv_error(VKV_ERR_ARG, "nothing to compress: the context is empty");
    uint32_t window = vkv_press_queries_needed(p->press, &p->pp);
    if (window && n_context < window)
        return vkv_error(VKV_ERR_ARG, "the context (%u tokens) is shorter than %s's observation window (%u tokens)",
                         n_context, p->press->name, window);
    const bool capture = p->press->capture_gpu && pc > 0;
    if (capture && p->press->repeat_pass) {
        if (!p->kvzip || !p->context_ids)
            return vkv_error(VKV_ERR_ARG, "%s needs the context's token ids and its reconstruction prompt",
                             p->press->name);
        uint32_t extra = vkv_kvzip_max_pass_tokens(p->kvzip, n_context);
        if ((uint64_t)n_context + extra > vkv_ctx_n_ctx(ctx))
            return vkv_error(VKV_ERR_ARG, "%s repeats the context after it: %u + %u tokens do not fit the %u-token "
                             "cache (make the context at least %u tokens)", p->press->name, n_context, extra,
                             vkv_ctx_n_ctx(ctx), n_context + extra);
    }
    vkv_press_session *s = calloc(1, sizeof *s);
    if (!s) return vkv_error(VKV_ERR_OOM, "out of host memory");
    s->ctx = ctx;
    s->m = m;
    s->p = *p;
    s->p.pa = p->vector ? pa : 0;
    s->n = n_context;
    s->window = window;
    const vkv_hparams *hp = &m->hp;
    vkv_status st = VKV_OK;
    if (window) {
        if (!(s->q_window = calloc(hp->n_layer, sizeof *s->q_window))) {
            st = vkv_error(VKV_ERR_OOM, "out of host memory");
            goto error;
        }
        /* Hand this to the gpu through the ctx's device. */
        for (uint32_t l = 0; l < hp->n_layer; l++)
            if ((st = vkv_buffer_create(vkv_ctx_gpu(ctx), 4ull * window * hp->n_head * hp->head_dim, VKV_MEM_DEVICE,
                                        "captured queries", &s->q_window[l])))
                goto error;
        if (!capture) vkv_ctx_set_q_hook(ctx, capture_queries, s);
    }
    if (capture) {
        vkv_gpu *gpu = vkv_ctx_gpu(ctx);
        vkv_press_layer shape = layer_input(s, 0, (vkv_view){0});
        uint64_t sb = p->press->state_bytes ? p->press->state_bytes(&p->pp, &shape) : 16;
        if (!(s->state = calloc(hp->n_layer, sizeof *s->state))) {
            st = vkv_error(VKV_ERR_OOM, "out of host memory");
            goto error;
        }
        for (uint32_t l = 0; l < hp->n_layer; l++)
            if ((st = vkv_buffer_create(gpu, sb < 16 ? 16 : sb, VKV_MEM_DEVICE, "scorer state", &s->state[l])) ||
                (st = vkv_buffer_fill(gpu, s->state[l], 0, vkv_buffer_size(s->state[l]), 0)))
                goto error;
        if ((st = vkv_buffer_create(gpu, vkv_press_scratch_bytes(p->press, &p->pp, &shape), VKV_MEM_DEVICE,
                                    "scorer scratch", &s->scratch)))
            goto error;
        vkv_ctx_set_q_hook(ctx, press_hook, s);
    }
    *out = s;
    return VKV_OK;
error:
    vkv_press_session_free(s);
    return st;
}

void vkv_press_session_free(vkv_press_session *s)
{
    if (!s) return;
    vkv_ctx_set_q_hook(s->ctx, NULL, NULL);
    if (s->q_window)
        for (uint32_t l = 0; l < s->m->hp.n_layer; l++) vkv_buffer_destroy(vkv_ctx_gpu(s->ctx), s->q_window[l]);
    free(s->q_window);
    if (s->state)
        for (uint32_t l = 0; l < s->m->hp.n_layer; l++) vkv_buffer_destroy(vkv_ctx_gpu(s->ctx), s->state[l]);
    free(s->state);
    vkv_buffer_destroy(vkv_ctx_gpu(s->ctx), s->scratch);
    free(s);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Approximated-tier quality of one head from host copies: R^2 and relative
 * error of the rebuilt values. */
static void apx_quality(const uint8_t *tiers, const float *eps, const float *vrows, uint32_t n, uint32_t hd,
                        double *r2, double *rel)
{
    double sum_eps = 0, sum_v2 = 0, mean[512] = {0};
    uint32_t cnt = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (tiers[j] != VKV_TIER_APPROXIMATED) continue;
        cnt++;
        sum_eps += eps[j];
        for (uint32_t d = 0; d < hd; d++) {
            double v = vrows[(size_t)j * hd + d];
            sum_v2 += v * v;
            mean[d] += v;
        }
    }
    if (!cnt) {
        *r2 = *rel = NAN;
        return;
    }
    double centred = sum_v2;
    for (uint32_t d = 0; d < hd; d++) centred -= mean[d] * mean[d] / cnt;
    *r2 = centred > 0 ? 1 - sum_eps / centred : NAN;
    *rel = sum_v2 > 0 ? sum_eps / sum_v2 : NAN;
}

/* Distortion of one head: sum of the normalised importance of evicted tokens
 * plus that of approximated tokens weighted by their relative error. Scores
 * are shifted to be >= 0 (forced keeps count as the largest finite score). */
static double head_distortion(const uint8_t *tiers, const float *scores, const float *eps, const float *vrows, uint32_t n,
                              uint32_t hd)
{
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t j = 0; j < n; j++)
        if (isfinite(scores[j])) {
            lo = scores[j] < lo ? scores[j] : lo;
            hi = scores[j] > hi ? scores[j] : hi;
        }
    if (!isfinite(lo)) return NAN;
    double total = 0, e = 0;
    for (uint32_t j = 0; j < n; j++) total += (isfinite(scores[j]) ? scores[j] : scores[j] > 0 ? hi : lo) - lo;
    if (!(total > 0)) return NAN;
    for (uint32_t j = 0; j < n; j++) {
        double w = ((isfinite(scores[j]) ? scores[j] : scores[j] > 0 ? hi : lo) - lo) / total;
        if (tiers[j] == VKV_TIER_EVICTED) e += w;
        else if (tiers[j] == VKV_TIER_APPROXIMATED && vrows) {
            double v2 = 0;
            for (uint32_t d = 0; d < hd; d++) v2 += (double)vrows[(size_t)j * hd + d] * vrows[(size_t)j * hd + d];
            if (v2 > 0) e += w * eps[j] / v2;
        }
    }
    return e;
}

/* KVzip's reconstruction pass: each chunk's repeat prompt evaluated after the
 * context (the capture hook updates every layer's state), then dropped. */
static vkv_status repeat_pass(vkv_press_session *s)
{
    const vkv_kvzip_prompt *kp = s->p.kvzip;
    const uint32_t passes = vkv_kvzip_n_passes(kp, s->n), room = vkv_kvzip_max_pass_tokens(kp, s->n);
    int32_t *ids = malloc(sizeof *ids * (room ? room : 1));
    if (!ids) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = VKV_OK;
    for (uint32_t i = 0; i < passes && !st; i++) {
        uint32_t n_ids;
        vkv_kvzip_pass(kp, s->p.context_ids, s->n, i, ids, &n_ids, &s->span0, &s->span1);
        s->repeating = true;
        st = vkv_ctx_eval(s->ctx, ids, n_ids, false, NULL);
        s->repeating = false;
        vkv_status tr = vkv_ctx_truncate(s->ctx, s->n);
        if (!st) st = tr;
    }
    free(ids);
    return st;
}

vkv_status vkv_press_session_compress(vkv_press_session *s, vkv_vector_report *rep)
{
    double t0 = now_s();
    vkv_ctx *ctx = s->ctx;
    vkv_gpu *gpu = vkv_ctx_gpu(ctx);
    const vkv_hparams *hp = &s->m->hp;
    uint32_t H = hp->n_head_kv, L = hp->n_layer, n = s->n, hd = hp->head_dim;
    if (vkv_ctx_n_past(ctx) != n)
        return vkv_error(VKV_ERR_ARG, "compress: the cache holds %u tokens, the session was set up for %u",
                         vkv_ctx_n_past(ctx), n);
    memset(rep, 0, sizeof *rep);
    rep->n_layer = L;
    rep->n_kv_head = H;
    rep->n = n;
    rep->pa = s->p.pa;
    size_t LH = (size_t)L * H, LHn = LH * n;
    rep->n_ret = calloc(LH, sizeof *rep->n_ret);
    rep->n_apx = calloc(LH, sizeof *rep->n_apx);
    rep->n_evict = calloc(LH, sizeof *rep->n_evict);
    rep->r2_apx = calloc(LH, sizeof *rep->r2_apx);
    rep->rel_err_apx = calloc(LH, sizeof *rep->rel_err_apx);
    rep->distortion = calloc(L, sizeof *rep->distortion);
    /* Host copies of one layer (always: the report needs tiers and, with
     * VECTOR, residuals and values); kept for all layers with keep_details. */
    size_t keep = s->p.keep_details ? LHn : (size_t)H * n;
    rep->scores = malloc(sizeof *rep->scores * keep);
    rep->eps = malloc(sizeof *rep->eps * keep);
    rep->tiers = malloc(keep);
    uint32_t *n_ret = calloc(H, 4), *n_apx = calloc(H, 4), *tiers_u32 = malloc(4ull * H * n);
    float *vhost = s->p.vector ? malloc(sizeof *vhost * (size_t)H * n * hd) : NULL;
    void *vraw = s->p.vector ? malloc(vkv_kv_cache_bytes(vkv_ctx_kv_type(ctx), H, n, hd)) : NULL;
    vkv_buffer *b_scores = NULL, *b_pool = NULL, *b_eps = NULL, *b_s2 = NULL, *b_apx = NULL, *b_tiers = NULL;
    vkv_buffer *b_scratch = NULL, *b_all = NULL, *b_kpool = NULL, *b_kapx = NULL;
    const bool global = s->p.press->global_selection;
    /* per (KV head) counts of the layer; with a global selection, the kept count of every (layer, head) */
    vkv_tier_counts *tcs = malloc(sizeof *tcs * H);
    uint32_t *kept_rows = global ? malloc(4 * LH) : NULL, *k_pool = malloc(4ull * H), *k_apx = malloc(4ull * H);
    vkv_status st = VKV_OK;
    if (!rep->n_ret || !rep->n_apx || !rep->n_evict || !rep->r2_apx || !rep->rel_err_apx || !rep->distortion ||
        !rep->scores || !rep->eps || !rep->tiers || !n_ret || !n_apx || !tiers_u32 ||
        (s->p.vector && (!vhost || !vraw)) || !tcs || (global && !kept_rows) || !k_pool || !k_apx) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory for the compression report");
        goto done;
    }
    if (s->p.pp.compression == 0) {
        /* kvpress leaves the cache untouched at p_c = 0: so do we, which makes
         * the output bit-identical to no compression. */
        for (size_t i = 0; i < LH; i++) {
            rep->n_ret[i] = n;
            rep->r2_apx[i] = rep->rel_err_apx[i] = NAN;
        }
        for (size_t i = 0; i < keep; i++) {
            rep->scores[i] = NAN;
            rep->eps[i] = NAN;
            rep->tiers[i] = VKV_TIER_RETAINED;
        }
        rep->seconds = now_s() - t0;
        goto done;
    }
    uint64_t hn4 = 4ull * H * n;
    if ((st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "scores", &b_scores)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "pool mask", &b_pool)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "residuals", &b_eps)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "pool ranking", &b_s2)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "approximation mask", &b_apx)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "tiers", &b_tiers)))
        goto done;
    if (s->scratch) {
        b_scratch = s->scratch; /* the capture's, kept by the session */
    } else {
        vkv_press_layer shape = {.n_layer = L, .n = n, .n_head = hp->n_head, .n_kv_head = H, .head_dim = hd,
                                 .n_ctx = vkv_ctx_n_ctx(ctx), .kv_type = vkv_ctx_kv_type(ctx), .window = s->window};
        if ((st = vkv_buffer_create(gpu, vkv_press_scratch_bytes(s->p.press, &s->p.pp, &shape), VKV_MEM_DEVICE,
                                    "scorer scratch", &b_scratch)))
            goto done;
    }
    vkv_view vs = vkv_view_of(b_scores), vp = vkv_view_of(b_pool), ve = vkv_view_of(b_eps), v2 = vkv_view_of(b_s2);
    vkv_view va = vkv_view_of(b_apx), vt = vkv_view_of(b_tiers);
    vkv_view none = {0};
    if (s->p.press->repeat_pass && (st = repeat_pass(s))) goto done;
    if (global) {
        /* Every layer's scores side by side, one threshold over all of them. */
        if ((st = vkv_buffer_create(gpu, 4 * LHn, VKV_MEM_DEVICE, "the scores of every layer", &b_all)) ||
            (st = vkv_buffer_create(gpu, 4ull * H, VKV_MEM_DEVICE, "pool counts", &b_kpool)) ||
            (st = vkv_buffer_create(gpu, 4ull * H, VKV_MEM_DEVICE, "approximation counts", &b_kapx)))
            goto done;
        for (uint32_t l = 0; l < L; l++) {
            vkv_press_layer in = layer_input(s, l, vkv_view_of(b_scratch));
            if ((st = vkv_cmd_begin(gpu))) goto done;
            st = s->p.press->score_gpu(gpu, &s->p.pp, &in, vs);
            if (!st) st = vkv_cmd_copy(gpu, b_scores, 0, b_all, (uint64_t)l * hn4, hn4);
            if (st) {
                st = vkv_error_context(vkv_cmd_abort(gpu, st), "layer %u", l);
                goto done;
            }
            if ((st = vkv_cmd_submit(gpu))) goto done;
        }
        if ((st = vkv_global_select_counts(gpu, vkv_view_of(b_all), (uint32_t)LH, n, s->p.pp.compression, kept_rows)))
            goto done;
    }
    for (uint32_t l = 0; l < L; l++) {
        uint32_t kept = s->p.press->n_kept ? s->p.press->n_kept(&s->p.pp, l, L, n)
                                           : vkv_kv_n_kept(s->p.pp.compression, n);
        vkv_tier_counts tc = vkv_kv_tier_counts(n, kept, s->p.pa, s->p.vector);
        /* Per-head counts: all tc, or each (layer, head)'s own under a global selection. */
        uint32_t a_max = 0;
        for (uint32_t h = 0; h < H; h++) {
            tcs[h] = global ? vkv_kv_tier_counts(n, kept_rows[(size_t)l * H + h], s->p.pa, s->p.vector) : tc;
            k_pool[h] = tcs[h].pool;
            k_apx[h] = tcs[h].approximated;
            if (tcs[h].a > a_max) a_max = tcs[h].a;
        }
        tc.a = a_max; /* whether this layer approximates anything */
        vkv_press_layer in = layer_input(s, l, vkv_view_of(b_scratch));
        if (global && ((st = vkv_buffer_upload(gpu, b_kpool, 0, k_pool, 4ull * H)) ||
                       (st = vkv_buffer_upload(gpu, b_kapx, 0, k_apx, 4ull * H))))
            goto done;
        if (!tc.a && (st = vkv_buffer_fill(gpu, b_apx, 0, hn4, 0))) goto done;
        if ((st = vkv_cmd_begin(gpu))) goto done;
        if (global) {
            st = vkv_cmd_copy(gpu, b_all, (uint64_t)l * hn4, b_scores, 0, hn4);
            if (!st) st = vkv_op_topk_select(gpu, vs, H, n, vkv_view_of(b_kpool), 0, vp);
        } else {
            st = s->p.press->score_gpu(gpu, &s->p.pp, &in, vs);
            if (!st) st = vkv_op_topk_select(gpu, vs, H, n, none, tc.pool, vp);
        }
        if (st) {
            st = vkv_error_context(vkv_cmd_abort(gpu, st), "layer %u", l);
            goto done;
        }
        if ((st = vkv_cmd_submit(gpu))) goto done;
        if (tc.a) {
            /* The residual reads W on the device: the cache uploads it once
             * and keeps it for attention; the truncation in a second recording. */
            vkv_vector_geom g = {in.kv_type, H, hd, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX};
            vkv_view w;
            if ((st = vkv_kv_layer_w(vkv_ctx_kv(ctx), l, s->p.w + (size_t)l * H * hd * hd, &w)) ||
                (st = vkv_cmd_begin(gpu)))
                goto done;
            st = vkv_op_vector_residual(gpu, &g, in.k, in.v, in.n_ctx, n, w, vkv_view_of(s->m->rope_inv_freq), ve);
            if (!st) st = vkv_op_vector_pool_scores(gpu, vp, ve, H * n, v2);
            if (!st) st = global ? vkv_op_topk_select(gpu, v2, H, n, vkv_view_of(b_kapx), 0, va)
                              : vkv_op_topk_select(gpu, v2, H, n, none, tc.approximated, va);
            if (st) {
                st = vkv_error_context(vkv_cmd_abort(gpu, st), "layer %u", l);
                goto done;
            }
            if ((st = vkv_cmd_submit(gpu))) goto done;
        }
        if ((st = vkv_cmd_begin(gpu))) goto done;
        if ((st = vkv_op_vector_assign_tiers(gpu, vp, va, H * n, vt))) {
            st = vkv_cmd_abort(gpu, st);
            goto done;
        }
        if ((st = vkv_cmd_submit(gpu))) goto done;

        if (s->p.lean) {
            for (uint32_t h = 0; h < H; h++) {
                size_t lh = (size_t)l * H + h;
                n_ret[h] = rep->n_ret[lh] = tcs[h].retained;
                n_apx[h] = rep->n_apx[lh] = tcs[h].approximated;
                rep->n_evict[lh] = tcs[h].evicted;
                rep->r2_apx[lh] = rep->rel_err_apx[lh] = NAN;
            }
            rep->distortion[l] = NAN;
        } else {
            size_t off = s->p.keep_details ? (size_t)l * H * n : 0;
            float *sc = rep->scores + off, *ep = rep->eps + off;
            uint8_t *ti = rep->tiers + off;
            if ((st = vkv_buffer_download(gpu, b_scores, 0, sc, hn4)) || (st = vkv_buffer_download(gpu, b_tiers, 0, tiers_u32, hn4)))
                goto done;
            if (tc.a) {
                if ((st = vkv_buffer_download(gpu, b_eps, 0, ep, hn4))) goto done;
            } else {
                for (size_t i = 0; i < (size_t)H * n; i++) ep[i] = NAN;
            }
            for (size_t i = 0; i < (size_t)H * n; i++) ti[i] = (uint8_t)tiers_u32[i];
            for (size_t i = 0; i < (size_t)H * n; i++)
                if (ti[i] == VKV_TIER_EVICTED) ep[i] = NAN;
            if (tc.a) {
                /* Only the n context rows of each head come back. */
                vkv_dtype kt = vkv_ctx_kv_type(ctx);
                uint64_t head_rows = vkv_kv_cache_bytes(kt, 1, n, hd);
                uint64_t head_stride = vkv_kv_cache_bytes(kt, 1, vkv_ctx_n_ctx(ctx), hd);
                for (uint32_t h = 0; h < H; h++)
                    if ((st = vkv_buffer_download(gpu, in.v.buf, in.v.offset + h * head_stride,
                                                  (char *)vraw + h * head_rows, head_rows)))
                        goto done;
                for (uint32_t h = 0; h < H; h++)
                    for (uint32_t j = 0; j < n; j++)
                        for (uint32_t d = 0; d < hd; d++)
                            vhost[((size_t)h * n + j) * hd + d] = vkv_kv_cache_get(kt, vraw, n, hd, h, j, d);
            }
            double e_sum = 0;
            for (uint32_t h = 0; h < H; h++) {
                size_t lh = (size_t)l * H + h;
                const uint8_t *th = ti + (size_t)h * n;
                uint32_t r = 0, a2 = 0;
                for (uint32_t j = 0; j < n; j++) {
                    r += th[j] == VKV_TIER_RETAINED;
                    a2 += th[j] == VKV_TIER_APPROXIMATED;
                }
                if (r != tcs[h].retained || a2 != tcs[h].approximated) {
                    st = vkv_error(VKV_ERR_CHECK, "layer %u head %u: the selection kept %u + %u tokens, expected %u + %u", l, h,
                                   r, a2, tcs[h].retained, tcs[h].approximated);
                    goto done;
                }
                n_ret[h] = r;
                n_apx[h] = a2;
                rep->n_ret[lh] = r;
                rep->n_apx[lh] = a2;
                rep->n_evict[lh] = n - r - a2;
                const float *vh = tc.a ? vhost + (size_t)h * n * hd : NULL;
                if (tc.a) apx_quality(th, ep + (size_t)h * n, vh, n, hd, &rep->r2_apx[lh], &rep->rel_err_apx[lh]);
                else rep->r2_apx[lh] = rep->rel_err_apx[lh] = NAN;
                e_sum += head_distortion(th, sc + (size_t)h * n, ep + (size_t)h * n, vh, n, hd);
            }
            rep->distortion[l] = e_sum / H;
        }
        if ((st = vkv_kv_compress_layer(vkv_ctx_kv(ctx), l, n, vt, n_ret, n_apx))) goto done;
    }
    rep->seconds = now_s() - t0;
done:
    vkv_buffer_destroy(gpu, b_scores);
    vkv_buffer_destroy(gpu, b_pool);
    vkv_buffer_destroy(gpu, b_eps);
    vkv_buffer_destroy(gpu, b_s2);
    vkv_buffer_destroy(gpu, b_apx);
    vkv_buffer_destroy(gpu, b_tiers);
    if (b_scratch != s->scratch) vkv_buffer_destroy(gpu, b_scratch);
    vkv_buffer_destroy(gpu, b_all);
    vkv_buffer_destroy(gpu, b_kpool);
    vkv_buffer_destroy(gpu, b_kapx);
    free(tcs);
    free(kept_rows);
    free(k_pool);
    free(k_apx);
    free(n_ret);
    free(n_apx);
    free(tiers_u32);
    free(vhost);
    free(vraw);
    if (st) vkv_vector_report_free(rep);
    return st;
}
