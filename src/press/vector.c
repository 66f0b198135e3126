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
 * (KVzip) every layer is scored first, one top-k over all of them gives each
 * (layer, KV head) its own n_kept, and the pool / residual / truncation steps
 * take per-row counts (compress_rows); head-adaptive budgets (AdaKV) take
 * one such top-k per layer instead. With a layer or global pool scope the
 * pool, residual and truncation steps run over several rows at once, a
 * layer's or the model's (compress_group; docs/ARCHITECTURE.md §2).
 * With a joint map (vkv_vector_map) a layer's KV heads share one tier per
 * token: its scores and residuals are pooled over the heads first
 * (vector_head_mean), every step above runs on that single row (R = 1 row
 * per layer instead of H), and the tiers are copied to every head before the
 * compaction. */
#include "press/vector.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "press/select_global.h"
#include "ref/ref_attn.h"
#include "vk/ops_select.h"
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
    vkv_buffer **wo;         /* [n_layer] each [n_embd, n_head * head_dim] f32 W_o (press->needs_wo), made at compression */
};

const char *vkv_vector_map_name(vkv_vector_map m) { return m == VKV_MAP_JOINT ? "joint" : "head"; }

void vkv_vector_report_free(vkv_vector_report *r)
{
    free(r->n_kept);
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

vkv_tier_fractions vkv_vector_report_achieved(const vkv_vector_report *r)
{
    uint64_t ret = 0, apx = 0, ev = 0;
    for (size_t i = 0; r->n_ret && i < (size_t)r->n_layer * r->n_kv_head; i++) {
        ret += r->n_ret[i];
        apx += r->n_apx[i];
        ev += r->n_evict[i];
    }
    const double all = (double)(ret + apx + ev);
    if (!all) return (vkv_tier_fractions){0};
    return (vkv_tier_fractions){.retained = ret / all, .approximated = apx / all, .evicted = ev / all};
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
        .head_dim = hp->head_dim, .n_ctx = vkv_ctx_kv_slots(s->ctx), .kv_type = vkv_ctx_k_type(s->ctx),
        .k = vkv_ctx_k_cache(s->ctx, l), .v = vkv_ctx_v_cache(s->ctx, l), .window = s->window,
        .q_window = s->window ? vkv_view_of(s->q_window[l]) : none, .scratch = scratch,
        .state = s->state ? vkv_view_of(s->state[l]) : none, .n_rot = hp->n_rot,
        .rope_neox = hp->rope_mode == VKV_ROPE_NEOX, .inv_freq = vkv_view_of(s->m->rope_inv_freq),
        .prefix = s->p.kvzip ? s->p.kvzip->prefix : 0, .span0 = s->span0, .span1 = s->span1,
        .n_embd = s->wo ? hp->n_embd : 0, .wo = s->wo ? vkv_view_of(s->wo[l]) : none,
    };
}

/* CriticalKV's W_o of every layer as f32 on the device (the weights may be of
 * any type: downloaded, decoded on the host, uploaded once per session). */
static vkv_status load_wo(vkv_press_session *s)
{
    if (!s->p.press->needs_wo || s->wo) return VKV_OK;
    const vkv_hparams *hp = &s->m->hp;
    vkv_gpu *gpu = vkv_ctx_gpu(s->ctx);
    if (!(s->wo = calloc(hp->n_layer, sizeof *s->wo))) return vkv_error(VKV_ERR_OOM, "out of host memory for W_o");
    vkv_status st = VKV_OK;
    for (uint32_t l = 0; l < hp->n_layer && !st; l++) {
        const vkv_weight *w = &s->m->layers[l].wo;
        if (w->rows != hp->n_embd || w->cols != hp->n_head * hp->head_dim)
            return vkv_error(VKV_ERR_UNSUPPORTED, "%s: layer %u's W_o is %u x %u, not %u x %u (n_embd x n_head head_dim)",
                             s->p.press->name, l, w->rows, w->cols, hp->n_embd, hp->n_head * hp->head_dim);
        const size_t row_bytes = vkv_dtype_row_bytes(w->type, w->cols), f_bytes = 4ull * w->rows * w->cols,
                     dev_bytes = vkv_dtype_device_row_bytes(w->type, w->cols) * w->rows;
        unsigned char *dev = malloc(dev_bytes);           /* the device's rows (core/dtype.h) */
        unsigned char *raw = malloc(row_bytes * w->rows); /* [rows] rows of the weight's type */
        float *f = malloc(f_bytes);                       /* [rows, cols] */
        if (!dev || !raw || !f) st = vkv_error(VKV_ERR_OOM, "%s: out of host memory for W_o", s->p.press->name);
        if (!st) st = vkv_buffer_download(gpu, w->buf, 0, dev, dev_bytes);
        if (!st) vkv_dtype_rows_from_device(w->type, w->cols, dev, raw, w->rows);
        for (uint32_t r = 0; !st && r < w->rows; r++)
            vkv_dequantize_row(w->type, raw + r * row_bytes, f + (size_t)r * w->cols, w->cols);
        if (!st) st = vkv_buffer_create(gpu, f_bytes, VKV_MEM_DEVICE, "W_o in f32", &s->wo[l]);
        if (!st) st = vkv_buffer_upload(gpu, s->wo[l], 0, f, f_bytes);
        free(dev);
        free(raw);
        free(f);
    }
    return st;
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
    const double compression_ratio = p->pp.compression_ratio;
    if (!p->press) return vkv_error(VKV_ERR_ARG, "no press given");
    char why[160];
    if (vkv_kv_check_ratios(compression_ratio, p->pa, p->vector, why, sizeof why))
        return vkv_error(VKV_ERR_ARG, "%s", why);
    const double pa = p->pa < 0 ? vkv_kv_default_pa(compression_ratio) : p->pa;
    if (p->vector && !p->w) return vkv_error(VKV_ERR_ARG, "VECTOR needs a calibration file (--calib)");
    if (p->vector && p->map == VKV_MAP_JOINT && !p->w_joint)
        return vkv_error(VKV_ERR_ARG, "--vector-map joint needs a calibration file with joint maps (this one has none: "
                                      "recalibrate with 'vkvector calib --joint on')");
    if (p->map == VKV_MAP_JOINT && (uint64_t)m->hp.n_head_kv * m->hp.head_dim > VKV_MAP_MAX_DIM)
        return vkv_error(VKV_ERR_UNSUPPORTED, "--vector-map joint: %u KV heads x %u dims is over the %u-dim joint maps "
                                              "the kernels hold", m->hp.n_head_kv, m->hp.head_dim, VKV_MAP_MAX_DIM);
    if (n_context == 0) return vkv_error(VKV_ERR_ARG, "nothing to compress: the context is empty");
    uint32_t window = vkv_press_queries_needed(p->press, &p->pp);
    if (window && n_context < window)
        return vkv_error(VKV_ERR_ARG, "the context (%u tokens) is shorter than %s's observation window (%u tokens)",
                         n_context, p->press->name, window);
    const bool capture = p->press->capture_gpu && compression_ratio > 0;
    if (capture && p->press->repeat_pass) {
        if (!p->kvzip || !p->context_ids)
            return vkv_error(VKV_ERR_ARG, "%s needs the context's token ids and its reconstruction prompt",
                             p->press->name);
        uint32_t extra = vkv_kvzip_max_pass_tokens(p->kvzip, n_context);
        if ((uint64_t)n_context + extra > vkv_ctx_kv_slots(ctx))
            return vkv_error(VKV_ERR_ARG, "%s repeats the context after it: %u + %u tokens do not fit the %u-token "
                             "cache (make the context at least %u tokens)", p->press->name, n_context, extra,
                             vkv_ctx_kv_slots(ctx), n_context + extra);
    }
    vkv_press_session *s = calloc(1, sizeof *s);
    if (!s) return vkv_error(VKV_ERR_OOM, "out of host memory");
    s->ctx = ctx;
    s->m = m;
    s->p = *p;
    s->p.pa = p->vector ? pa : 0;
    s->p.pool = vkv_press_pool_scope(p->press, p->pool);
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
    if (s->wo)
        for (uint32_t l = 0; l < s->m->hp.n_layer; l++) vkv_buffer_destroy(vkv_ctx_gpu(s->ctx), s->wo[l]);
    free(s->wo);
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

/* A score a scorer computed: not a forced keep (press/press.h). */
static bool real_score(float s) { return isfinite(s) && !vkv_press_is_forced(s); }

/* Distortion of one head: sum of the normalised importance of evicted tokens
 * plus that of approximated tokens weighted by their relative error. Scores
 * are shifted to be >= 0 (forced keeps, +inf or in the forced band, count as
 * the largest real score). */
static double head_distortion(const uint8_t *tiers, const float *scores, const float *eps, const float *vrows, uint32_t n,
                              uint32_t hd)
{
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t j = 0; j < n; j++)
        if (real_score(scores[j])) {
            lo = scores[j] < lo ? scores[j] : lo;
            hi = scores[j] > hi ? scores[j] : hi;
        }
    if (!isfinite(lo)) return NAN;
    double total = 0, e = 0;
    for (uint32_t j = 0; j < n; j++) total += (real_score(scores[j]) ? scores[j] : scores[j] > 0 ? hi : lo) - lo;
    if (!(total > 0)) return NAN;
    for (uint32_t j = 0; j < n; j++) {
        double w = ((real_score(scores[j]) ? scores[j] : scores[j] > 0 ? hi : lo) - lo) / total;
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

/* The buffers and host copies of one compression. Layer buffers hold
 * [n_kv_head, n]; with a global selection or a layer / global pool scope,
 * `all` holds every layer's selection scores [n_layer, R, n] and the group
 * buffers one pool scope's [rows, n]. */
typedef struct compress_job {
    vkv_press_session *s;
    vkv_vector_report *rep;
    vkv_gpu *gpu;
    uint32_t L, H, n, hd;
    uint32_t R;              /* selection rows per layer: H, or 1 with a joint map */
    bool joint;
    vkv_buffer *sel, *eps_sel; /* joint: a layer's pooled scores and residuals [n] */
    float *w_blocks;         /* joint: one layer's map as blocks [H, H, hd, hd] (kvlayout/kv_layout.h) */
    size_t keep;             /* host copies per layer (keep_details: all layers) */
    vkv_buffer *scores, *pool, *eps, *s2, *apx, *tiers, *scratch, *kpool, *kapx;
    vkv_buffer *all;         /* every layer's scores */
    /* typed (quantized) tiers: one layer's K and V rows as the tiers will hold them, decoded to f32
     * [H, n, hd] for the residual, through q_rows [H, n] of the tier's type */
    vkv_buffer *q_rows, *k_f32, *v_f32;
    vkv_buffer *g_base, *g_ext, *g_pool, *g_eps, *g_s2, *g_apx, *g_tiers, *g_kept, *g_counts, *g_counts_apx;
    uint32_t *kept_rows;     /* [L * H] the scorer's count of every (layer, KV head) */
    uint32_t *n_ret, *n_apx, *tiers_u32, *k_pool, *k_apx; /* [H], [H], [H * n], [H], [H] */
    uint32_t *g_counts_host; /* [2 * rows]: pool and approximated counts per row of a group */
    uint32_t *ret_h, *apx_h; /* [H] joint map: a layer's one row of counts, per head */
    float *vhost;            /* [H, n, hd] f32 values (VECTOR) */
    void *vraw;
} compress_job;

static vkv_status job_fail(vkv_gpu *gpu, vkv_status st, uint32_t l)
{
    return vkv_error_context(vkv_cmd_abort(gpu, st), "layer %u", l);
}

/* Report rows of a compression that changed nothing (p_c = 0). */
static void report_untouched(compress_job *j)
{
    vkv_vector_report *rep = j->rep;
    for (size_t i = 0; i < (size_t)j->L * j->H; i++) {
        rep->n_ret[i] = rep->n_kept[i] = j->n;
        rep->r2_apx[i] = rep->rel_err_apx[i] = NAN;
    }
    for (size_t i = 0; i < j->keep; i++) {
        rep->scores[i] = NAN;
        rep->eps[i] = NAN;
        rep->tiers[i] = VKV_TIER_RETAINED;
    }
}

static vkv_status job_alloc(compress_job *j)
{
    vkv_vector_report *rep = j->rep;
    const size_t LH = (size_t)j->L * j->H;
    const bool vector = j->s->p.vector;
    rep->n_ret = calloc(LH, sizeof *rep->n_ret);
    rep->n_apx = calloc(LH, sizeof *rep->n_apx);
    rep->n_evict = calloc(LH, sizeof *rep->n_evict);
    rep->n_kept = calloc(LH, sizeof *rep->n_kept);
    rep->r2_apx = calloc(LH, sizeof *rep->r2_apx);
    rep->rel_err_apx = calloc(LH, sizeof *rep->rel_err_apx);
    rep->distortion = calloc(j->L, sizeof *rep->distortion);
    /* Host copies of one layer (always: the report needs tiers and, with
     * VECTOR, residuals and values); kept for all layers with keep_details. */
    j->keep = j->s->p.keep_details ? LH * j->n : (size_t)j->H * j->n;
    rep->scores = malloc(sizeof *rep->scores * j->keep);
    rep->eps = malloc(sizeof *rep->eps * j->keep);
    rep->tiers = malloc(j->keep);
    j->n_ret = calloc(j->H, 4);
    j->n_apx = calloc(j->H, 4);
    j->tiers_u32 = malloc(4ull * j->H * j->n);
    j->k_pool = malloc(4ull * j->H);
    j->k_apx = malloc(4ull * j->H);
    j->kept_rows = malloc(4 * LH);
    j->g_counts_host = malloc(8 * LH);
    j->ret_h = malloc(4ull * j->H);
    j->apx_h = malloc(4ull * j->H);
    j->vhost = vector ? malloc(sizeof *j->vhost * (size_t)j->H * j->n * j->hd) : NULL;
    j->vraw = vector ? malloc(vkv_kv_cache_bytes(vkv_ctx_v_type(j->s->ctx), j->H, j->n, j->hd)) : NULL;
    j->w_blocks = vector && j->joint ? malloc(sizeof *j->w_blocks * (size_t)j->H * j->H * j->hd * j->hd) : NULL;
    if (!rep->n_ret || !rep->n_apx || !rep->n_evict || !rep->n_kept || !rep->r2_apx || !rep->rel_err_apx ||
        !rep->distortion || !rep->scores || !rep->eps || !rep->tiers || !j->n_ret || !j->n_apx || !j->tiers_u32 ||
        !j->k_pool || !j->k_apx || !j->kept_rows || !j->g_counts_host || !j->ret_h || !j->apx_h || (vector && (!j->vhost || !j->vraw)) ||
        (vector && j->joint && !j->w_blocks))
        return vkv_error(VKV_ERR_OOM, "out of host memory for the compression report");
    return VKV_OK;
}

/* Tiers of other types than the plain cache's (quantized, or K and V apart). */
static bool typed_tiers(const vkv_press_session *s) { return vkv_kv_tiers_typed(vkv_ctx_kv(s->ctx)); }

static vkv_status job_buffers(compress_job *j)
{
    vkv_gpu *gpu = j->gpu;
    const uint64_t hn4 = 4ull * j->H * j->n;
    vkv_status st;
    if ((st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "scores", &j->scores)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "pool mask", &j->pool)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "residuals", &j->eps)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "pool ranking", &j->s2)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "approximation mask", &j->apx)) ||
        (st = vkv_buffer_create(gpu, hn4, VKV_MEM_DEVICE, "tiers", &j->tiers)) ||
        (st = vkv_buffer_create(gpu, 4ull * j->H, VKV_MEM_DEVICE, "pool counts", &j->kpool)) ||
        (st = vkv_buffer_create(gpu, 4ull * j->H, VKV_MEM_DEVICE, "approximation counts", &j->kapx)))
        return st;
    if (j->joint && ((st = vkv_buffer_create(gpu, 4ull * j->n, VKV_MEM_DEVICE, "pooled scores", &j->sel)) ||
                     (st = vkv_buffer_create(gpu, 4ull * j->n, VKV_MEM_DEVICE, "pooled residuals", &j->eps_sel))))
        return st;
    vkv_press_session *s = j->s;
    if (s->p.vector && typed_tiers(s)) {
        const uint64_t rows = (uint64_t)j->H * j->n, fb = rows * vkv_kv_row_bytes(VKV_F32, j->hd);
        if ((st = vkv_buffer_create(gpu, rows * vkv_kv_tier_row_bytes(vkv_ctx_kv(s->ctx)), VKV_MEM_DEVICE,
                                    "rows in a tier's type", &j->q_rows)) ||
            (st = vkv_buffer_create(gpu, fb, VKV_MEM_DEVICE, "decoded keys", &j->k_f32)) ||
            (st = vkv_buffer_create(gpu, fb, VKV_MEM_DEVICE, "decoded values", &j->v_f32)))
            return st;
    }
    if (s->scratch) {
        j->scratch = s->scratch; /* the capture's, kept by the session */
        return VKV_OK;
    }
    const vkv_hparams *hp = &s->m->hp;
    vkv_press_layer shape = {.n_layer = j->L, .n = j->n, .n_head = hp->n_head, .n_kv_head = j->H, .head_dim = j->hd,
                             .n_ctx = vkv_ctx_kv_slots(s->ctx), .kv_type = vkv_ctx_k_type(s->ctx), .window = s->window};
    return vkv_buffer_create(gpu, vkv_press_scratch_bytes(s->p.press, &s->p.pp, &shape), VKV_MEM_DEVICE,
                             "scorer scratch", &j->scratch);
}

/* Head-adaptive budgets (AdaKV): each layer's rows share the uniform total
 * R n_kept through one top-k over the layer's scores (in j->all), copied to
 * j->scores first (a view at the layer's offset could break the storage
 * alignment). */
static vkv_status layer_selection_counts(compress_job *j)
{
    const uint64_t rn4 = 4ull * j->R * j->n;
    const uint32_t k_keep = j->R * vkv_kv_n_kept(j->s->p.pp.compression_ratio, j->n);
    vkv_status st;
    for (uint32_t l = 0; l < j->L; l++) {
        if ((st = vkv_cmd_begin(j->gpu))) return st;
        if ((st = vkv_cmd_copy(j->gpu, j->all, (uint64_t)l * rn4, j->scores, 0, rn4))) return job_fail(j->gpu, st, l);
        if ((st = vkv_cmd_submit(j->gpu)) ||
            (st = vkv_select_counts(j->gpu, vkv_view_of(j->scores), j->R, j->n, k_keep, j->kept_rows + (size_t)l * j->R)))
            return vkv_error_context(st, "layer %u", l);
    }
    return VKV_OK;
}

/* Selections that need every layer scored first (j->all). */
static bool scores_first(const vkv_press_session *s)
{
    return s->p.press->global_selection || s->p.press->layer_selection;
}

/* The scorer's own count of every selection row [L, R]: one global
 * selection over every layer's scores (in j->all), one per layer
 * (head-adaptive budgets), or each layer's n_kept. */
static vkv_status scorer_counts(compress_job *j)
{
    const vkv_press_session *s = j->s;
    if (s->p.press->global_selection)
        return vkv_global_select_counts(j->gpu, vkv_view_of(j->all), j->L * j->R, j->n, s->p.pp.compression_ratio,
                                        j->kept_rows);
    if (s->p.press->layer_selection) return layer_selection_counts(j);
    for (uint32_t l = 0; l < j->L; l++) {
        uint32_t kept = s->p.press->n_kept ? s->p.press->n_kept(&s->p.pp, l, j->L, j->n)
                                           : vkv_kv_n_kept(s->p.pp.compression_ratio, j->n);
        for (uint32_t r = 0; r < j->R; r++) j->kept_rows[(size_t)l * j->R + r] = kept;
    }
    return VKV_OK;
}

/* Records layer l's scores [H, n] into j->scores and, with a joint map,
 * their mean over the heads into j->sel [n]. */
static vkv_status record_scores(compress_job *j, uint32_t l)
{
    vkv_press_layer in = layer_input(j->s, l, vkv_view_of(j->scratch));
    vkv_status st = j->s->p.press->score_gpu(j->gpu, &j->s->p.pp, &in, vkv_view_of(j->scores));
    if (!st && j->joint) st = vkv_op_vector_head_mean(j->gpu, vkv_view_of(j->scores), j->H, j->n, vkv_view_of(j->sel));
    return st;
}

/* The selection rows of a layer: its scores, or their mean over the heads. */
static vkv_buffer *selection_scores(const compress_job *j) { return j->joint ? j->sel : j->scores; }

/* Every layer's selection scores into j->all [L, R, n] (before anything is
 * compacted). */
static vkv_status score_all_layers(compress_job *j)
{
    const uint64_t rn4 = 4ull * j->R * j->n;
    vkv_status st;
    if ((st = vkv_buffer_create(j->gpu, rn4 * j->L, VKV_MEM_DEVICE, "the scores of every layer", &j->all))) return st;
    for (uint32_t l = 0; l < j->L; l++) {
        if ((st = vkv_cmd_begin(j->gpu))) return st;
        st = record_scores(j, l);
        if (!st) st = vkv_cmd_copy(j->gpu, selection_scores(j), 0, j->all, (uint64_t)l * rn4, rn4);
        if (st) return job_fail(j->gpu, st, l);
        if ((st = vkv_cmd_submit(j->gpu))) return st;
    }
    return VKV_OK;
}

/* Joint map: row 0 of a [H, n] buffer copied to rows 1..H-1 (the layer's
 * one decision, or its pooled score / residual for the report). */
static vkv_status repeat_row(compress_job *j, vkv_buffer *b)
{
    const uint64_t n4 = 4ull * j->n;
    vkv_status st = VKV_OK;
    for (uint32_t h = 1; h < j->H && !st; h++) st = vkv_cmd_copy(j->gpu, b, 0, b, h * n4, n4);
    return st;
}

/* After layer l's tiers are in j->tiers (its scores in j->scores and, when
 * any_apx, its residuals in j->eps): the report's rows of the layer, a check
 * of the counts against ret[H] / apx[H], and the compaction. */
static vkv_status finish_layer(compress_job *j, uint32_t l, const uint32_t *ret, const uint32_t *apx, bool any_apx)
{
    vkv_press_session *s = j->s;
    vkv_vector_report *rep = j->rep;
    vkv_gpu *gpu = j->gpu;
    const uint32_t H = j->H, n = j->n, hd = j->hd;
    const uint64_t hn4 = 4ull * H * n;
    vkv_status st;
    for (uint32_t h = 0; h < H; h++) {
        size_t lh = (size_t)l * H + h;
        rep->n_kept[lh] = j->kept_rows[(size_t)l * j->R + (j->joint ? 0 : h)];
        rep->n_ret[lh] = j->n_ret[h] = ret[h];
        rep->n_apx[lh] = j->n_apx[h] = apx[h];
        rep->n_evict[lh] = n - ret[h] - apx[h];
        rep->r2_apx[lh] = rep->rel_err_apx[lh] = NAN;
    }
    if (s->p.lean) {
        rep->distortion[l] = NAN;
        return vkv_kv_compress_layer(vkv_ctx_kv(s->ctx), l, n, vkv_view_of(j->tiers), j->n_ret, j->n_apx);
    }
    size_t off = s->p.keep_details ? (size_t)l * H * n : 0;
    float *sc = rep->scores + off, *ep = rep->eps + off;
    uint8_t *ti = rep->tiers + off;
    if ((st = vkv_buffer_download(gpu, j->scores, 0, sc, hn4)) || (st = vkv_buffer_download(gpu, j->tiers, 0, j->tiers_u32, hn4)))
        return st;
    if (any_apx) {
        if ((st = vkv_buffer_download(gpu, j->eps, 0, ep, hn4))) return st;
    } else {
        for (size_t i = 0; i < (size_t)H * n; i++) ep[i] = NAN;
    }
    for (size_t i = 0; i < (size_t)H * n; i++) {
        ti[i] = (uint8_t)j->tiers_u32[i];
        if (ti[i] == VKV_TIER_EVICTED) ep[i] = NAN;
    }
    vkv_view v = vkv_ctx_v_cache(s->ctx, l);
    if (any_apx) {
        /* Only the n context rows of each head come back. */
        vkv_dtype vt = vkv_ctx_v_type(s->ctx);
        uint64_t head_rows = vkv_kv_cache_bytes(vt, 1, n, hd);
        uint64_t head_stride = vkv_kv_cache_bytes(vt, 1, vkv_ctx_kv_slots(s->ctx), hd);
        for (uint32_t h = 0; h < H; h++)
            if ((st = vkv_buffer_download(gpu, v.buf, v.offset + h * head_stride, (char *)j->vraw + h * head_rows,
                                          head_rows)))
                return st;
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t t = 0; t < n; t++)
                for (uint32_t d = 0; d < hd; d++)
                    j->vhost[((size_t)h * n + t) * hd + d] = vkv_kv_cache_get(vt, j->vraw, n, hd, h, t, d);
    }
    double e_sum = 0;
    for (uint32_t h = 0; h < H; h++) {
        size_t lh = (size_t)l * H + h;
        const uint8_t *th = ti + (size_t)h * n;
        uint32_t r = 0, a2 = 0;
        for (uint32_t t = 0; t < n; t++) {
            r += th[t] == VKV_TIER_RETAINED;
            a2 += th[t] == VKV_TIER_APPROXIMATED;
        }
        if (r != ret[h] || a2 != apx[h])
            return vkv_error(VKV_ERR_CHECK, "layer %u head %u: the selection kept %u + %u tokens, expected %u + %u", l, h,
                             r, a2, ret[h], apx[h]);
        const float *vh = any_apx ? j->vhost + (size_t)h * n * hd : NULL;
        if (any_apx) apx_quality(th, ep + (size_t)h * n, vh, n, hd, &rep->r2_apx[lh], &rep->rel_err_apx[lh]);
        e_sum += head_distortion(th, sc + (size_t)h * n, ep + (size_t)h * n, vh, n, hd);
    }
    rep->distortion[l] = e_sum / H;
    return vkv_kv_compress_layer(vkv_ctx_kv(s->ctx), l, n, vkv_view_of(j->tiers), j->n_ret, j->n_apx);
}

/* Layer l's maps on the device (the cache uploads them once and keeps them
 * for attention): W [H, hd, hd], or the joint map as blocks [H, H, hd, hd]. */
static vkv_status upload_w(compress_job *j, uint32_t l, vkv_view *w)
{
    const size_t hd2 = (size_t)j->hd * j->hd;
    if (!j->joint) return vkv_kv_layer_w(vkv_ctx_kv(j->s->ctx), l, j->s->p.w + (size_t)l * j->H * hd2, w);
    vkv_vector_joint_blocks(j->s->p.w_joint + (size_t)l * j->H * j->H * hd2, j->H, j->hd, j->w_blocks);
    return vkv_kv_layer_w(vkv_ctx_kv(j->s->ctx), l, j->w_blocks, w);
}

/* Records layer l's OLS residuals eps[H, n] into j->eps (each head's error
 * under its map, the joint one included) and, with a joint map, their mean
 * over the heads into j->eps_sel [n]. With quantized tiers the residual is
 * that of the values they will hold: ||V_q - W R^-1 K_q||^2 (docs/ARCHITECTURE.md §2). */
static vkv_status record_residual(compress_job *j, uint32_t l, vkv_view w)
{
    const vkv_hparams *hp = &j->s->m->hp;
    vkv_press_layer in = layer_input(j->s, l, vkv_view_of(j->scratch));
    vkv_status st = VKV_OK;
    if (j->q_rows) {
        vkv_kv_cache *kv = vkv_ctx_kv(j->s->ctx);
        if ((st = vkv_kv_record_as_tier(kv, false, in.k, in.kv_type, in.n_ctx, j->n, vkv_view_of(j->q_rows),
                                        vkv_view_of(j->k_f32), j->n)) ||
            (st = vkv_kv_record_as_tier(kv, true, in.v, in.kv_type, in.n_ctx, j->n, vkv_view_of(j->q_rows),
                                        vkv_view_of(j->v_f32), j->n)))
            return st;
        in.k = vkv_view_of(j->k_f32);
        in.v = vkv_view_of(j->v_f32);
        in.kv_type = VKV_F32;
        in.n_ctx = j->n;
    }
    vkv_vector_geom g = {in.kv_type, j->H, j->hd, hp->n_rot, hp->rope_mode == VKV_ROPE_NEOX, j->joint ? j->H : 1,
                         in.kv_type, in.kv_type};
    st = vkv_op_vector_residual(j->gpu, &g, in.k, in.v, in.n_ctx, j->n, w,
                                           vkv_view_of(j->s->m->rope_inv_freq), (vkv_view){0}, vkv_view_of(j->eps));
    if (!st && j->joint) st = vkv_op_vector_head_mean(j->gpu, vkv_view_of(j->eps), j->H, j->n, vkv_view_of(j->eps_sel));
    return st;
}

/* The residuals the selection ranks: per head, or pooled. */
static vkv_buffer *selection_eps(const compress_job *j) { return j->joint ? j->eps_sel : j->eps; }

/* Joint map, before finish_layer: the layer's one tier row and its pooled
 * scores (row 0 of j->tiers, j->sel) repeated for every head. */
static vkv_status record_joint_rows(compress_job *j)
{
    vkv_status st = repeat_row(j, j->tiers);
    if (!st) st = vkv_cmd_copy(j->gpu, j->sel, 0, j->scores, 0, 4ull * j->n);
    if (!st) st = repeat_row(j, j->scores);
    return st;
}

/* finish_layer's per-head counts from per-row ones: the same with one row
 * per head, else the layer's one row for every head (joint map). */
static const uint32_t *head_counts(const compress_job *j, const uint32_t *rows, uint32_t *heads)
{
    if (!j->joint) return rows;
    for (uint32_t h = 0; h < j->H; h++) heads[h] = rows[0];
    return heads;
}

/* Row scope: each selection row (a (layer, KV head), or a layer with a joint
 * map) its own pool, per-row top-k counts. */
static vkv_status compress_rows(compress_job *j)
{
    vkv_press_session *s = j->s;
    vkv_gpu *gpu = j->gpu;
    const uint32_t H = j->H, R = j->R, n = j->n;
    const uint64_t hn4 = 4ull * H * n, rn4 = 4ull * R * n;
    const bool global = scores_first(s);
    vkv_view vs = vkv_view_of(selection_scores(j)), vp = vkv_view_of(j->pool), v2 = vkv_view_of(j->s2);
    vkv_view va = vkv_view_of(j->apx), none = {0};
    vkv_status st;
    for (uint32_t l = 0; l < j->L; l++) {
        uint32_t a_max = 0, same = 1;
        for (uint32_t r = 0; r < R; r++) {
            vkv_tier_counts tc = vkv_kv_tier_counts(n, j->kept_rows[(size_t)l * R + r], s->p.pa, s->p.vector);
            j->k_pool[r] = tc.pool;
            j->k_apx[r] = tc.approximated;
            j->g_counts_host[r] = tc.retained;
            if (tc.a > a_max) a_max = tc.a;
            same &= tc.pool == j->k_pool[0];
        }
        /* Per-row counts through a buffer only when the rows differ (a global selection). */
        const bool per_row = global || !same;
        if (per_row && ((st = vkv_buffer_upload(gpu, j->kpool, 0, j->k_pool, 4ull * R)) ||
                        (st = vkv_buffer_upload(gpu, j->kapx, 0, j->k_apx, 4ull * R))))
            return st;
        if (!a_max && (st = vkv_buffer_fill(gpu, j->apx, 0, hn4, 0))) return st;
        if ((st = vkv_cmd_begin(gpu))) return st;
        st = global ? vkv_cmd_copy(gpu, j->all, (uint64_t)l * rn4, selection_scores(j), 0, rn4) : record_scores(j, l);
        if (!st) st = vkv_op_topk_select(gpu, vs, R, n, per_row ? vkv_view_of(j->kpool) : none, j->k_pool[0], vp);
        if (st) return job_fail(gpu, st, l);
        if ((st = vkv_cmd_submit(gpu))) return st;
        if (a_max) {
            /* The residual reads W on the device: the cache uploads it once
             * and keeps it for attention; the truncation in a second recording. */
            vkv_view w;
            if ((st = upload_w(j, l, &w)) || (st = vkv_cmd_begin(gpu))) return st;
            st = record_residual(j, l, w);
            if (!st) st = vkv_op_vector_pool_scores(gpu, vp, vkv_view_of(selection_eps(j)), R * n, v2);
            if (!st) st = vkv_op_topk_select(gpu, v2, R, n, per_row ? vkv_view_of(j->kapx) : none, j->k_apx[0], va);
            if (st) return job_fail(gpu, st, l);
            if ((st = vkv_cmd_submit(gpu))) return st;
        }
        if ((st = vkv_cmd_begin(gpu))) return st;
        st = vkv_op_vector_assign_tiers(gpu, vp, va, R * n, vkv_view_of(j->tiers));
        if (!st && j->joint) st = record_joint_rows(j);
        if (st) return vkv_cmd_abort(gpu, st);
        if ((st = vkv_cmd_submit(gpu)) ||
            (st = finish_layer(j, l, head_counts(j, j->g_counts_host, j->ret_h), head_counts(j, j->k_apx, j->apx_h),
                               a_max > 0)))
            return st;
    }
    return VKV_OK;
}

static vkv_status group_buffers(compress_job *j, uint64_t bytes)
{
    vkv_gpu *gpu = j->gpu;
    const uint64_t rows = bytes / (4ull * j->n);
    vkv_status st;
    if ((st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: the scorer's kept set", &j->g_base)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: extension ranking", &j->g_ext)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: pool mask", &j->g_pool)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: residuals", &j->g_eps)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: residual ranking", &j->g_s2)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: approximation mask", &j->g_apx)) ||
        (st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "pool scope: tiers", &j->g_tiers)) ||
        (st = vkv_buffer_create(gpu, 4 * rows, VKV_MEM_DEVICE, "pool scope: kept per row", &j->g_kept)) ||
        (st = vkv_buffer_create(gpu, 4 * rows, VKV_MEM_DEVICE, "pool scope: pool tokens per row", &j->g_counts)) ||
        (st = vkv_buffer_create(gpu, 4 * rows, VKV_MEM_DEVICE, "pool scope: approximated per row", &j->g_counts_apx)))
        return st;
    return VKV_OK;
}

/* One pool over layers [l0, l0 + nl) (all their selection rows): the
 * scorer's kept set of every row, extended by the scope's a_S highest other
 * scores, the 2 a_S lowest residuals of the pool approximated
 * (docs/ARCHITECTURE.md §2). */
static vkv_status compress_group(compress_job *j, uint32_t l0, uint32_t nl)
{
    vkv_press_session *s = j->s;
    vkv_gpu *gpu = j->gpu;
    const uint32_t R = j->R, n = j->n, rows = nl * R, total = rows * n;
    const uint64_t rn4 = 4ull * R * n, bytes = 4ull * total;
    const uint32_t *kept = j->kept_rows + (size_t)l0 * R;
    uint64_t k_sum = 0;
    for (uint32_t r = 0; r < rows; r++) k_sum += kept[r];
    const vkv_tier_counts tc = vkv_kv_tier_counts(total, (uint32_t)k_sum, s->p.pa, s->p.vector);
    /* The scope's scores: every layer's buffer, or one layer's copied out of
     * it (a view at l0's offset could break the storage alignment). */
    vkv_view gs = nl == j->L ? vkv_view_of(j->all) : vkv_view_of(j->s2), none = {0};
    vkv_view base = vkv_view_of(j->g_base), pool = tc.a ? vkv_view_of(j->g_pool) : base, apx = vkv_view_of(j->g_apx);
    vkv_status st;
    if ((st = vkv_buffer_upload(gpu, j->g_kept, 0, kept, 4ull * rows))) return st;
    if (!tc.a && (st = vkv_buffer_fill(gpu, j->g_apx, 0, bytes, 0))) return st;
    if (tc.a) {
        /* residuals of every layer of the scope, side by side */
        for (uint32_t l = l0; l < l0 + nl; l++) {
            vkv_view w;
            if ((st = upload_w(j, l, &w)) || (st = vkv_cmd_begin(gpu))) return st;
            st = record_residual(j, l, w);
            if (!st) st = vkv_cmd_copy(gpu, selection_eps(j), 0, j->g_eps, (uint64_t)(l - l0) * rn4, rn4);
            if (st) return job_fail(gpu, st, l);
            if ((st = vkv_cmd_submit(gpu))) return st;
        }
    }
    if ((st = vkv_cmd_begin(gpu))) return st;
    st = nl == j->L ? VKV_OK : vkv_cmd_copy(gpu, j->all, (uint64_t)l0 * rn4, j->s2, 0, rn4 * nl);
    if (!st) st = vkv_op_topk_select(gpu, gs, rows, n, vkv_view_of(j->g_kept), 0, base);
    if (!st && tc.a) st = vkv_op_vector_pool_extend(gpu, base, gs, total, vkv_view_of(j->g_ext));
    if (!st && tc.a) st = vkv_op_topk_select(gpu, vkv_view_of(j->g_ext), 1, total, none, tc.pool, pool);
    if (!st && tc.a) st = vkv_op_vector_pool_scores(gpu, pool, vkv_view_of(j->g_eps), total, vkv_view_of(j->g_s2));
    if (!st && tc.a) st = vkv_op_topk_select(gpu, vkv_view_of(j->g_s2), 1, total, none, tc.approximated, apx);
    if (!st) st = vkv_op_vector_assign_tiers(gpu, pool, apx, total, vkv_view_of(j->g_tiers));
    if (!st) st = vkv_op_mask_row_counts(gpu, pool, rows, n, vkv_view_of(j->g_counts));
    if (!st) st = vkv_op_mask_row_counts(gpu, apx, rows, n, vkv_view_of(j->g_counts_apx));
    if (st) return job_fail(gpu, st, l0);
    if ((st = vkv_cmd_submit(gpu)) || (st = vkv_buffer_download(gpu, j->g_counts, 0, j->g_counts_host, 4ull * rows)) ||
        (st = vkv_buffer_download(gpu, j->g_counts_apx, 0, j->g_counts_host + rows, 4ull * rows)))
        return st;
    uint32_t *pool_rows = j->g_counts_host, *apx_rows = j->g_counts_host + rows;
    uint64_t pool_sum = 0, apx_sum = 0;
    for (uint32_t r = 0; r < rows; r++) {
        pool_sum += pool_rows[r];
        apx_sum += apx_rows[r];
        pool_rows[r] -= apx_rows[r]; /* now the retained count */
    }
    if (pool_sum != tc.pool || apx_sum != tc.approximated)
        return vkv_error(VKV_ERR_CHECK, "layers %u..%u: the %s pool holds %llu tokens, %llu approximated; expected %u, %u",
                         l0, l0 + nl - 1, vkv_pool_scope_name(s->p.pool), (unsigned long long)pool_sum,
                         (unsigned long long)apx_sum, tc.pool, tc.approximated);
    for (uint32_t l = l0; l < l0 + nl; l++) {
        const uint64_t off = (uint64_t)(l - l0) * rn4;
        vkv_view w;
        /* a joint map's per-head residuals (the report's) are recomputed per layer */
        if (tc.a && j->joint && (st = upload_w(j, l, &w))) return st;
        if ((st = vkv_cmd_begin(gpu))) return st;
        st = vkv_cmd_copy(gpu, j->g_tiers, off, j->tiers, 0, rn4);
        if (!st) st = vkv_cmd_copy(gpu, j->all, (uint64_t)l * rn4, selection_scores(j), 0, rn4);
        if (!st && tc.a) st = j->joint ? record_residual(j, l, w) : vkv_cmd_copy(gpu, j->g_eps, off, j->eps, 0, rn4);
        if (!st && j->joint) st = record_joint_rows(j);
        if (st) return job_fail(gpu, st, l);
        const uint32_t *ret_r = pool_rows + (size_t)(l - l0) * R, *apx_r = apx_rows + (size_t)(l - l0) * R;
        if ((st = vkv_cmd_submit(gpu)) ||
            (st = finish_layer(j, l, head_counts(j, ret_r, j->ret_h), head_counts(j, apx_r, j->apx_h), tc.a > 0)))
            return st;
    }
    return VKV_OK;
}

static void job_free(compress_job *j)
{
    vkv_buffer *bufs[] = {j->scores, j->pool, j->eps, j->s2, j->apx, j->tiers, j->kpool, j->kapx, j->all, j->sel, j->eps_sel,
                          j->q_rows, j->k_f32, j->v_f32,
                          j->g_base, j->g_ext, j->g_pool, j->g_eps, j->g_s2, j->g_apx, j->g_tiers, j->g_kept,
                          j->g_counts, j->g_counts_apx};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) vkv_buffer_destroy(j->gpu, bufs[i]);
    if (j->scratch != j->s->scratch) vkv_buffer_destroy(j->gpu, j->scratch);
    free(j->kept_rows);
    free(j->n_ret);
    free(j->n_apx);
    free(j->tiers_u32);
    free(j->k_pool);
    free(j->k_apx);
    free(j->g_counts_host);
    free(j->ret_h);
    free(j->apx_h);
    free(j->vhost);
    free(j->vraw);
    free(j->w_blocks);
}

vkv_status vkv_press_session_compress(vkv_press_session *s, vkv_vector_report *rep)
{
    double t0 = now_s();
    const vkv_hparams *hp = &s->m->hp;
    if (vkv_ctx_n_past(s->ctx) != s->n)
        return vkv_error(VKV_ERR_ARG, "compress: the cache holds %u tokens, the session was set up for %u",
                         vkv_ctx_n_past(s->ctx), s->n);
    memset(rep, 0, sizeof *rep);
    const bool joint = s->p.map == VKV_MAP_JOINT;
    compress_job j = {.s = s, .rep = rep, .gpu = vkv_ctx_gpu(s->ctx), .L = hp->n_layer, .H = hp->n_head_kv, .n = s->n,
                      .hd = hp->head_dim, .R = joint ? 1 : hp->n_head_kv, .joint = joint};
    rep->n_layer = j.L;
    rep->n_kv_head = j.H;
    rep->n = j.n;
    rep->pa = s->p.pa;
    rep->pool = s->p.pool;
    rep->map = s->p.map;
    vkv_status st = job_alloc(&j);
    if (st) goto done;
    if (s->p.pp.compression_ratio == 0 && !typed_tiers(s)) {
        /* kvpress leaves the cache untouched at p_c = 0: so do we, which makes
         * the output bit-identical to no compression. Quantized tiers still
         * take every token: the cache is then stored in their types. */
        report_untouched(&j);
        goto done;
    }
    /* Without an approximated tier every scope is the scorer's own selection. */
    const bool wide = s->p.pool != VKV_POOL_ROW && s->p.vector && s->p.pa > 0;
    /* The cache's maps follow this compression's (a session's cache outlives one compression). */
    if ((st = vkv_kv_set_map_shifts(vkv_ctx_kv(s->ctx), joint && s->p.vector ? j.H : 1))) goto done;
    if (wide && (uint64_t)j.L * j.R * j.n > UINT32_MAX) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "the %s pool of %u x %u x %u tokens is over 2^32", vkv_pool_scope_name(s->p.pool),
                       j.L, j.H, j.n);
        goto done;
    }
    if ((st = job_buffers(&j)) || (st = load_wo(s))) goto done;
    if (s->p.press->repeat_pass && (st = repeat_pass(s))) goto done;
    if ((scores_first(s) || wide) && (st = score_all_layers(&j))) goto done;
    if ((st = scorer_counts(&j))) goto done;
    if (!wide) {
        st = compress_rows(&j);
    } else {
        const uint32_t nl = s->p.pool == VKV_POOL_GLOBAL ? j.L : 1;
        if (!(st = group_buffers(&j, 4ull * nl * j.R * j.n)))
            for (uint32_t l0 = 0; l0 < j.L && !st; l0 += nl) st = compress_group(&j, l0, nl);
    }
done:
    rep->seconds = now_s() - t0;
    job_free(&j);
    if (st) vkv_vector_report_free(rep);
    return st;
}
