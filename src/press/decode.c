/* Compression during generation (decode.h). Per layer, on a compression:
 *   gathered = the layer's tokens in the plain layout   (kv_cache.h)
 *   scores[H, n] = scorer(gathered K)                    (keys_only scorers)
 *                or scorer(gathered K, last W queries)  (TOVA, SnapKV, PyramidKV: a ring the query hook
 *                                                        fills; ObservedAttention: its capture of them
 *                                                        into a zeroed state, then its scores;
 *                                                        ExpectedAttention: score_window)
 *                or scorer(gathered positions)          (score_positions, on the host)
 *   eps[H, n]    = ||V - W R_pos^-1 K||^2               (VECTOR; positions from the gather)
 * then on the host, per head, with its budget (the rule's target, or
 * PyramidKV's for its layer: head_budget), the demote-only decision of kv/decode_select.h
 * and the compaction into a layout with room for `every` more tokens: the
 * budget rule's next compression, or kvpress's next check, comes then. */
#include "press/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv/decode_select.h"
#include "kv/kv_cache.h"
#include "vk/ops_vector.h"

struct vkv_decode_press {
    vkv_ctx *ctx;
    const vkv_model *m;
    vkv_decode_params p;
    uint32_t slots;                       /* gather room per head: 2 M (budget), the context (kvpress) */
    vkv_decode_counter counter;           /* kvpress's decoding steps */
    vkv_buffer *k_tmp, *v_tmp;            /* [H, slots, head_dim] of the gathered rows' type */
    vkv_buffer *q_tmp;                    /* quantized tiers, VECTOR: [H, slots] rows of a tier's type */
    vkv_buffer *scores, *eps, *pos, *tiers, *scratch; /* [H, slots] */
    /* Scorers of a query window (TOVA, SnapKV): each layer's last `window` queries */
    uint32_t window;                      /* 0: the scorer reads no queries */
    vkv_buffer *q_ring;                   /* [n_layer, window, n_head, head_dim] f32, position p in row p mod window */
    vkv_buffer *q_window;                 /* [window, n_head, head_dim] f32: one layer's ring in position order */
    vkv_buffer *state;                    /* scorers with a capture (captures_window): the layer's state */
    uint64_t state_bytes;
    uint32_t *q_end;                      /* [n_layer] one past the last captured position */
    uint32_t *q_run;                      /* [n_layer] consecutive positions captured up to q_end (<= window) */
    float *scores_host, *eps_host;        /* [H, slots] */
    uint32_t *tiers_host32, *sort;        /* [H, slots], [2 slots] */
    uint8_t *tiers_host;                  /* [H, slots] */
    uint32_t *n_ret, *n_apx;              /* [H] */
    uint32_t *layer_min, *layer_max;      /* [n_layer] the fewest and most tokens a head held after the last compression */
    vkv_decode_stats stats;
    bool check;                           /* VKVECTOR_CHECK_DECODE: scores against the reference (check_scores) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void vkv_decode_press_free(vkv_decode_press *d)
{
    if (!d) return;
    if (d->q_ring) vkv_ctx_set_q_hook(d->ctx, NULL, NULL); /* capture_queries's user is going */
    vkv_gpu *gpu = vkv_ctx_gpu(d->ctx);
    vkv_buffer *bufs[] = {d->k_tmp, d->v_tmp, d->q_tmp, d->scores, d->eps, d->pos, d->tiers, d->scratch, d->q_ring,
                          d->q_window, d->state};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) vkv_buffer_destroy(gpu, bufs[i]);
    free(d->scores_host);
    free(d->eps_host);
    free(d->tiers_host32);
    free(d->sort);
    free(d->tiers_host);
    free(d->n_ret);
    free(d->n_apx);
    free(d->q_end);
    free(d->q_run);
    free(d->layer_min);
    free(d->layer_max);
    free(d);
}

/* Scorers that read the queries of the last `window` positions and nothing
 * else captured, with one count for every layer (TOVA: 1, SnapKV: 64): once
 * those positions are every head's last slots, in order, as they are in a
 * prefill's cache, the window kernels run on the gather unchanged
 * (docs/ARCHITECTURE.md §2). */
static bool reads_query_window(const vkv_press_ops *ops)
{
    return ops->window && !ops->state_bytes && !ops->global_selection && !ops->repeat_pass;
}

/* Scorers with a capture of every query in the prefill that read the last
 * decode_window queries instead during generation (ObservedAttention). */
static bool captures_window(const vkv_press_ops *ops)
{
    return ops->decode_window && ops->state_bytes && ops->capture_gpu && !ops->repeat_pass && !ops->score_window;
}

/* Scorers of their own during generation from the last queries (ExpectedAttention). */
static bool scores_window(const vkv_press_ops *ops) { return ops->decode_window && ops->score_window; }

/* Queries the decode press keeps per layer: the scorer's window, or the last
 * min(decode_window, N), the tokens since the previous compression as
 * kvpress's DecodingPress buffers them. */
static uint32_t decode_queries(const vkv_decode_params *p)
{
    if (reads_query_window(p->press)) return vkv_press_queries_needed(p->press, &p->pp);
    if (!captures_window(p->press) && !scores_window(p->press)) return 0;
    return p->press->decode_window < p->every ? p->press->decode_window : p->every;
}

static uint64_t query_bytes(const vkv_hparams *hp) { return 4ull * hp->n_head * hp->head_dim; }

/* What the scorer sees of a gathered layer. */
static vkv_press_layer gathered_input(const vkv_decode_press *d, uint32_t l, const vkv_kv_gathered *g)
{
    const vkv_hparams *hp = &d->m->hp;
    return (vkv_press_layer){
        .window = d->window,
        .q_window = d->q_window ? vkv_view_of(d->q_window) : (vkv_view){0},
        .layer = l, .n_layer = hp->n_layer, .n = g->n, .n_head = hp->n_head, .n_kv_head = hp->n_head_kv,
        .head_dim = hp->head_dim, .n_ctx = g->stride, .kv_type = g->type, .k = g->k, .v = g->v,
        .scratch = vkv_view_of(d->scratch), .n_rot = hp->n_rot, .rope_neox = hp->rope_mode == VKV_ROPE_NEOX,
        .inv_freq = vkv_view_of(d->m->rope_inv_freq),
        .state = d->state ? vkv_view_of(d->state) : (vkv_view){0},
    };
}

vkv_status vkv_decode_press_create(vkv_ctx *ctx, const vkv_model *m, const vkv_decode_params *p, vkv_decode_press **out)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    if (!p->press) return vkv_error(VKV_ERR_ARG, "compression during generation needs a scorer (--press)");
    if (p->press->needs_wo)
        return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation does not run %s (it reads the values "
                                              "projected through W_o; compress the context only)", p->press->name);
    if (p->press->layer_selection)
        return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation keeps a count per KV head; %s shares a "
                                              "layer's budget between its heads (compress the context only)",
                         p->press->name);
    if (!p->press->keys_only && !p->press->score_positions && !reads_query_window(p->press) &&
        !captures_window(p->press) && !scores_window(p->press))
        return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation runs scorers that read the keys, the "
                                              "positions or the queries of the last tokens alone (keydiff, knorm, "
                                              "streamingllm, tova, snapkv, pyramidkv, observed, expected); %s needs "
                                              "queries or state a compressed cache no longer holds", p->press->name);
    if (p->press->needs_position_order)
        return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation scores a compressed cache whose slots are "
                                              "out of position order; %s scores chunks of consecutive positions",
                         p->press->name);
    const uint32_t window = decode_queries(p);
    if (scores_window(p->press) && window <= p->pp.n_sink)
        return vkv_error(VKV_ERR_ARG, "%s during generation takes the statistics of the queries since the last "
                                      "compression but its first %u: --compress-every %u must be more than %u",
                         p->press->name, p->pp.n_sink, p->every, p->pp.n_sink);
    /* the window must be the tokens appended since the last compression, every head's last slots in order */
    if (window > 1 && p->every < window)
        return vkv_error(VKV_ERR_ARG, "%s during generation scores with the queries of its last %u tokens, which must "
                                      "all come after the previous compression: --compress-every %u must be at least %u",
                         p->press->name, window, p->every, window);
    if (p->pp.block) return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation: block-wise KeyDiff reads positions");
    if (p->rule == VKV_DECODING_KVPRESS && (!p->every || !p->target_tokens))
        return vkv_error(VKV_ERR_ARG, "kvpress's decoding rule needs an interval and a target of at least 1");
    if (p->rule == VKV_DECODING_BUDGET && (!p->every || p->max_tokens <= p->every))
        return vkv_error(VKV_ERR_ARG, "--max-kv-tokens (%u) must be larger than --compress-every (%u)", p->max_tokens,
                         p->every);
    if (p->vector && !p->w) return vkv_error(VKV_ERR_ARG, "VECTOR needs a calibration file (--calib)");
    vkv_decode_press *d = calloc(1, sizeof *d);
    if (!d) return vkv_error(VKV_ERR_OOM, "out of host memory");
    d->ctx = ctx;
    d->m = m;
    d->p = *p;
    /* kvpress's rule leaves the context whole: a head may hold any number of tokens up to the context */
    d->slots = p->rule == VKV_DECODING_KVPRESS ? vkv_ctx_n_ctx(ctx) : 2 * p->max_tokens;
    d->counter = (vkv_decode_counter){.interval = p->every};
    d->window = window;
    const char *check = getenv("VKVECTOR_CHECK_DECODE");
    d->check = check && *check && strcmp(check, "0") != 0;
    vkv_gpu *gpu = vkv_ctx_gpu(ctx);
    const uint64_t H = hp->n_head_kv, hn = H * d->slots;
    /* scratch for the widest gather, in the gathered rows' type (f32 for quantized tiers) */
    const vkv_dtype gt = vkv_kv_gather_type(vkv_ctx_kv(ctx));
    const uint64_t rows = vkv_kv_cache_bytes(gt, hp->n_head_kv, d->slots, hp->head_dim);
    vkv_kv_gathered shape = {.n = d->slots, .stride = d->slots, .type = gt};
    vkv_press_layer in = gathered_input(d, 0, &shape);
    vkv_status st;
    if ((st = vkv_buffer_create(gpu, rows, VKV_MEM_DEVICE, "gathered keys", &d->k_tmp)) ||
        (st = vkv_buffer_create(gpu, rows, VKV_MEM_DEVICE, "gathered values", &d->v_tmp)) ||
        (st = vkv_buffer_fill(gpu, d->v_tmp, 0, rows, 0)) ||
        (st = vkv_buffer_create(gpu, 4 * hn, VKV_MEM_DEVICE, "decode scores", &d->scores)) ||
        (st = vkv_buffer_create(gpu, 4 * hn, VKV_MEM_DEVICE, "decode residuals", &d->eps)) ||
        (st = vkv_buffer_create(gpu, 4 * hn, VKV_MEM_DEVICE, "gathered positions", &d->pos)) ||
        (st = vkv_buffer_create(gpu, 4 * hn, VKV_MEM_DEVICE, "decode tiers", &d->tiers)) ||
        (st = vkv_buffer_create(gpu, vkv_press_scratch_bytes(p->press, &p->pp, &in), VKV_MEM_DEVICE, "decode scorer scratch",
                                &d->scratch)))
        goto error;
    if (window && ((st = vkv_buffer_create(gpu, (uint64_t)hp->n_layer * window * query_bytes(hp), VKV_MEM_DEVICE,
                                           "last queries", &d->q_ring)) ||
                   (st = vkv_buffer_create(gpu, window * query_bytes(hp), VKV_MEM_DEVICE, "window queries in order",
                                           &d->q_window))))
        goto error;
    if (captures_window(p->press) || scores_window(p->press)) {
        d->state_bytes = p->press->state_bytes(&p->pp, &in);
        if ((st = vkv_buffer_create(gpu, d->state_bytes > 16 ? d->state_bytes : 16, VKV_MEM_DEVICE,
                                    "decode scorer state", &d->state)))
            goto error;
    }
    if (p->vector && vkv_kv_tiers_typed(vkv_ctx_kv(ctx))) {
        if ((st = vkv_buffer_create(gpu, hn * vkv_kv_tier_row_bytes(vkv_ctx_kv(ctx)), VKV_MEM_DEVICE,
                                    "rows in a tier's type", &d->q_tmp)))
            goto error;
    }
    d->scores_host = malloc(4 * hn);
    d->eps_host = malloc(4 * hn);
    d->tiers_host32 = malloc(4 * hn);
    d->sort = malloc(8ull * d->slots);
    d->tiers_host = malloc(hn);
    d->n_ret = malloc(4 * H);
    d->n_apx = malloc(4 * H);
    d->q_end = calloc(hp->n_layer, sizeof *d->q_end);
    d->q_run = calloc(hp->n_layer, sizeof *d->q_run);
    d->layer_min = calloc(hp->n_layer, sizeof *d->layer_min);
    d->layer_max = calloc(hp->n_layer, sizeof *d->layer_max);
    if (!d->scores_host || !d->eps_host || !d->tiers_host32 || !d->sort || !d->tiers_host || !d->n_ret || !d->n_apx ||
        !d->q_end || !d->q_run || !d->layer_min || !d->layer_max) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    *out = d;
    return VKV_OK;
error:
    vkv_decode_press_free(d);
    return st;
}

uint32_t vkv_decode_room(vkv_decode_press *d)
{
    vkv_kv_cache *kv = vkv_ctx_kv(d->ctx);
    const uint32_t n_past = vkv_ctx_n_past(d->ctx);
    const uint64_t rows = vkv_kv_max_head_rows(kv, n_past), budget = 2ull * d->p.max_tokens;
    uint64_t room = rows < budget ? (budget - rows) / 2 : 0;
    uint32_t layout = vkv_kv_room(kv, n_past);
    return room < layout ? (uint32_t)room : layout;
}

void vkv_decode_observe(vkv_decode_press *d)
{
    uint64_t rows = vkv_kv_max_head_rows(vkv_ctx_kv(d->ctx), vkv_ctx_n_past(d->ctx));
    if (rows > d->stats.max_rows) d->stats.max_rows = rows;
}

vkv_decode_stats vkv_decode_press_stats(const vkv_decode_press *d) { return d->stats; }

vkv_decoding_rule vkv_decode_rule_of(const vkv_decode_press *d) { return d->p.rule; }

void vkv_decode_layer_tokens(const vkv_decode_press *d, uint32_t layer, uint32_t *min, uint32_t *max)
{
    *min = d->layer_min[layer];
    *max = d->layer_max[layer];
}

/* The window kernels score every head over g->n slots, the last `window` of
 * them the latest positions in order, with those positions' queries. */
static vkv_status check_query_window(const vkv_decode_press *d, uint32_t l, const vkv_kv_gathered *g)
{
    const uint32_t n_past = vkv_ctx_n_past(d->ctx), w = d->window;
    for (uint32_t h = 0; h < d->m->hp.n_head_kv; h++) {
        bool in_order = g->n_tok[h] == g->n && g->n >= w;
        for (uint32_t i = 0; in_order && i < w; i++)
            in_order = g->pos[(size_t)h * g->n + g->n - w + i] == (int32_t)(n_past - w + i);
        if (!in_order)
            return vkv_error(VKV_ERR_UNSUPPORTED, "%s during generation: layer %u's heads do not all end with the last "
                             "%u tokens (a per-head prefill compression, or fewer tokens since the last compression)",
                             d->p.press->name, l, w);
    }
    if (d->q_end[l] != n_past || d->q_run[l] < w)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s during generation: the queries of the last %u tokens were not captured",
                         d->p.press->name, w);
    return VKV_OK;
}

/* Layer l's ring, oldest position first, into q_window. */
static vkv_status record_window_in_order(vkv_decode_press *d, uint32_t l)
{
    vkv_gpu *gpu = vkv_ctx_gpu(d->ctx);
    const uint64_t row = query_bytes(&d->m->hp), ring = (uint64_t)l * d->window * row;
    const uint32_t oldest = vkv_ctx_n_past(d->ctx) % d->window, tail = d->window - oldest;
    vkv_status st = vkv_cmd_copy(gpu, d->q_ring, ring + oldest * row, d->q_window, 0, tail * row);
    if (!st && oldest) st = vkv_cmd_copy(gpu, d->q_ring, ring, d->q_window, tail * row, oldest * row);
    return st;
}

/* VKVECTOR_CHECK_DECODE=1 (tests/e2e/decode_common.sh): every layer's
 * scores against the scorer's reference (score_window_ref, or score_ref) on
 * host copies of the gathered keys, values and window queries; an error
 * (VKV_ERR_CHECK) when they differ by an NMSE above 1e-6 over the tokens the
 * heads hold, or in where the forced keeps (+inf) are. Scorers of positions
 * are scored on the host already and not checked. */
static vkv_status check_scores(vkv_decode_press *d, uint32_t l, const vkv_kv_gathered *g, vkv_press_layer in)
{
    vkv_gpu *gpu = vkv_ctx_gpu(d->ctx);
    const vkv_hparams *hp = &d->m->hp;
    const vkv_press_ops *ops = d->p.press;
    const uint64_t cache = vkv_kv_cache_bytes(g->type, hp->n_head_kv, g->stride, hp->head_dim);
    const uint64_t qb = (uint64_t)d->window * query_bytes(hp), sn = (uint64_t)hp->n_head_kv * g->n;
    void *k = malloc(cache), *v = malloc(cache);
    float *q = malloc(qb + 4), *freq = malloc(2ull * hp->n_rot + 4), *ref = malloc(4 * sn);
    vkv_status st = VKV_OK;
    if (!k || !v || !q || !freq || !ref) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto done;
    }
    if ((st = vkv_buffer_download(gpu, g->k.buf, g->k.offset, k, cache)) ||
        (st = vkv_buffer_download(gpu, g->v.buf, g->v.offset, v, cache)) ||
        (d->window && (st = vkv_buffer_download(gpu, d->q_window, 0, q, qb))) ||
        (hp->n_rot && (st = vkv_buffer_download(gpu, d->m->rope_inv_freq, 0, freq, 2ull * hp->n_rot))))
        goto done;
    in.kv_type = g->type;
    in.k_host = k;
    in.v_host = v;
    in.q_window_host = q;
    in.inv_freq_host = freq;
    in.window_pos0 = vkv_ctx_n_past(d->ctx) - d->window;
    in.slot_pos = g->pos;
    in.n_tok = g->n_tok;
    in.q_host = q; /* a capture scorer's queries: the window's, at the last slots */
    in.q_pos0 = g->n - d->window;
    in.n_q = d->window;
    if ((st = ops->score_window ? ops->score_window_ref(&d->p.pp, &in, ref) : ops->score_ref(&d->p.pp, &in, ref)))
        goto done;
    double num = 0, den = 0;
    for (uint32_t h = 0; h < hp->n_head_kv; h++)
        for (uint32_t j = 0; j < g->n_tok[h]; j++) {
            const size_t i = (size_t)h * g->n + j;
            const double a = d->scores_host[i], b = ref[i];
            if (isinf(a) || isinf(b)) {
                if (a != b) {
                    st = vkv_error(VKV_ERR_CHECK, "%s during generation, layer %u: head %u slot %u scored %g, its "
                                   "reference %g", ops->name, l, h, j, a, b);
                    goto done;
                }
                continue;
            }
            num += (a - b) * (a - b);
            den += b * b;
        }
    if (!(num <= 1e-6 * den))
        st = vkv_error(VKV_ERR_CHECK, "%s during generation, layer %u: scores off their reference by an NMSE of %.3g",
                       ops->name, l, den > 0 ? num / den : num);
done:
    free(k);
    free(v);
    free(q);
    free(freq);
    free(ref);
    return st;
}

/* Scores (and residuals) of a gathered layer, back on the host. */
static vkv_status score_layer(vkv_decode_press *d, uint32_t l, const vkv_kv_gathered *g, bool residual)
{
    vkv_gpu *gpu = vkv_ctx_gpu(d->ctx);
    const vkv_hparams *hp = &d->m->hp;
    const uint64_t hn4 = 4ull * hp->n_head_kv * g->n;
    vkv_press_layer in = gathered_input(d, l, g);
    const vkv_press_layer scored = in; /* what the scorer reads (the residual may change in.kv_type below) */
    vkv_view w = {0};
    vkv_status st;
    if (d->window && (st = check_query_window(d, l, g))) return st;
    if (residual && ((st = vkv_kv_layer_w(vkv_ctx_kv(d->ctx), l, d->p.w + (size_t)l * hp->n_head_kv * hp->head_dim *
                                                                          hp->head_dim, &w)) ||
                     (st = vkv_buffer_upload(gpu, d->pos, 0, g->pos, hn4))))
        return st;
    const bool by_position = d->p.press->score_positions != NULL;
    /* a scorer with a capture: the window's queries at the last slots, into a zeroed state */
    if (d->state && (st = vkv_buffer_fill(gpu, d->state, 0, d->state_bytes, 0))) return st;
    if ((st = vkv_cmd_begin(gpu))) return st;
    if (d->window) st = record_window_in_order(d, l);
    if (!st && captures_window(d->p.press))
        st = d->p.press->capture_gpu(gpu, &d->p.pp, &in, vkv_view_of(d->q_window), d->window, g->n - d->window);
    const bool own = scores_window(d->p.press); /* the scorer records and submits after this recording */
    if (!st && !by_position && !own) st = d->p.press->score_gpu(gpu, &d->p.pp, &in, vkv_view_of(d->scores));
    if (!st && residual) {
        vkv_view k = g->k, v = g->v;
        uint32_t stride = g->stride;
        if (d->q_tmp && g->type != vkv_kv_gather_type(vkv_ctx_kv(d->ctx))) {
            /* the plain cache, before its first compression: its rows as the tiers will hold them, in the
             * (here unused) gather room */
            vkv_kv_cache *kv = vkv_ctx_kv(d->ctx);
            st = vkv_kv_record_as_tier(kv, false, g->k, g->type, g->stride, g->n, vkv_view_of(d->q_tmp),
                                       vkv_view_of(d->k_tmp), d->slots);
            if (!st) st = vkv_kv_record_as_tier(kv, true, g->v, g->type, g->stride, g->n, vkv_view_of(d->q_tmp),
                                                vkv_view_of(d->v_tmp), d->slots);
            in.kv_type = vkv_kv_gather_type(kv);
            k = vkv_view_of(d->k_tmp);
            v = vkv_view_of(d->v_tmp);
            stride = d->slots;
        }
        vkv_vector_geom geo = {in.kv_type, hp->n_head_kv, hp->head_dim, hp->n_rot, in.rope_neox, 1, in.kv_type, in.kv_type};
        if (!st) st = vkv_op_vector_residual(gpu, &geo, k, v, stride, g->n, w, in.inv_freq, vkv_view_of(d->pos),
                                             vkv_view_of(d->eps));
    }
    if (st) return vkv_error_context(vkv_cmd_abort(gpu, st), "layer %u", l);
    if ((st = vkv_cmd_submit(gpu)) ||
        (!by_position && !own && (st = vkv_buffer_download(gpu, d->scores, 0, d->scores_host, hn4))) ||
        (residual && (st = vkv_buffer_download(gpu, d->eps, 0, d->eps_host, hn4))))
        return st;
    if (own) {
        vkv_press_layer win = scored;
        win.window_pos0 = vkv_ctx_n_past(d->ctx) - d->window;
        win.slot_pos = g->pos;
        win.n_tok = g->n_tok;
        if ((st = d->p.press->score_window(gpu, &d->p.pp, &win, d->scores_host)))
            return vkv_error_context(st, "layer %u", l);
    }
    if (d->check && !by_position && (st = check_scores(d, l, g, scored))) return st;
    /* the gather's slots are out of position order: score each slot by its own position */
    for (uint32_t h = 0; by_position && h < hp->n_head_kv; h++)
        d->p.press->score_positions(&d->p.pp, g->pos + (size_t)h * g->n, g->n_tok[h], d->scores_host + (size_t)h * g->n);
    return VKV_OK;
}

/* The pairs a head of layer l holding n tokens keeps when the rule's target
 * is `target`: the target, or for a scorer with its own budget per layer
 * (PyramidKV) that budget at the ratio kvpress's rule hands it
 * (vkv_decode_kvpress_ratio), capped at the target under the budget rule,
 * whose M pairs per head bound every layer (docs/ARCHITECTURE.md §2). A head
 * at or under the target keeps all its tokens, as kvpress's ratio 0 does. */
static uint32_t head_budget(const vkv_decode_press *d, uint32_t l, uint32_t n, uint32_t target)
{
    if (!d->p.press->n_kept || n <= target) return target;
    vkv_press_params pp = d->p.pp;
    pp.compression_ratio = vkv_decode_kvpress_ratio(n, target);
    const uint32_t b = d->p.press->n_kept(&pp, l, d->m->hp.n_layer, n);
    return d->p.rule == VKV_DECODING_BUDGET && b > target ? target : b;
}

static vkv_status compress_layer(vkv_decode_press *d, uint32_t l, uint32_t n_past, uint32_t target)
{
    vkv_gpu *gpu = vkv_ctx_gpu(d->ctx);
    vkv_kv_cache *kv = vkv_ctx_kv(d->ctx);
    const uint32_t H = d->m->hp.n_head_kv;
    vkv_kv_gathered g;
    vkv_status st = vkv_kv_gather(kv, l, n_past, d->k_tmp, d->v_tmp, d->slots, &g);
    if (st) return st;
    if (g.n > d->slots) {
        vkv_kv_gathered_free(&g);
        return vkv_error(VKV_ERR_ARG, "layer %u holds %u tokens per head, more than the %u the gather holds", l, g.n,
                         d->slots);
    }
    bool any_apx = false;
    for (size_t i = 0; i < (size_t)H * g.n; i++) any_apx |= g.tier[i] == VKV_TIER_APPROXIMATED;
    st = score_layer(d, l, &g, d->p.vector || any_apx);
    uint32_t *n_ret = d->n_ret, *n_apx = d->n_apx;
    for (uint32_t h = 0; h < H && !st; h++) {
        const size_t o = (size_t)h * g.n;
        vkv_decode_head head = {g.n_tok[h], d->scores_host + o, d->eps_host + o, g.pos + o, g.tier + o};
        const uint32_t budget = head_budget(d, l, g.n_tok[h], target);
        /* p_a's default from this head's own ratio: budget of n_tok */
        const double pa = !d->p.vector ? 0
                          : d->p.pa >= 0 ? d->p.pa
                          : g.n_tok[h] > budget ? vkv_kv_default_pa(1.0 - (double)budget / g.n_tok[h]) : 0;
        memset(d->tiers_host + o, VKV_TIER_EVICTED, g.n);
        vkv_decode_select(&head, budget, pa, d->p.vector, d->sort, d->tiers_host + o, &n_ret[h], &n_apx[h]);
        for (uint32_t j = 0; j < g.n; j++) d->tiers_host32[o + j] = d->tiers_host[o + j];
        const uint32_t tokens = n_ret[h] + n_apx[h], rows = 2 * n_ret[h] + n_apx[h];
        vkv_decode_stats *ds = &d->stats;
        if (!ds->max_tokens_after || tokens < ds->min_tokens_after) ds->min_tokens_after = tokens;
        if (!ds->max_rows_after || rows < ds->min_rows_after) ds->min_rows_after = rows;
        if (tokens > ds->max_tokens_after) ds->max_tokens_after = tokens;
        if (rows > ds->max_rows_after) ds->max_rows_after = rows;
        if (!h || tokens < d->layer_min[l]) d->layer_min[l] = tokens;
        if (!h || tokens > d->layer_max[l]) d->layer_max[l] = tokens;
    }
    if (!st) st = vkv_buffer_upload(gpu, d->tiers, 0, d->tiers_host32, 4ull * H * g.n);
    if (!st)
        st = vkv_kv_recompress(kv, l, &g, vkv_view_of(d->tiers), d->tiers_host, n_ret, n_apx, d->p.every, n_past);
    vkv_kv_gathered_free(&g);
    return st;
}

vkv_status vkv_decode_compress(vkv_decode_press *d)
{
    double t0 = now_s();
    const uint32_t n_past = vkv_ctx_n_past(d->ctx);
    const uint32_t target = vkv_decode_target(d->p.rule, d->p.every, d->p.max_tokens, d->p.target_tokens);
    vkv_status st = VKV_OK;
    for (uint32_t l = 0; l < d->m->hp.n_layer && !st; l++) st = compress_layer(d, l, n_past, target);
    d->stats.compressions++;
    d->stats.seconds += now_s() - t0;
    return st;
}

/* The query hook: the last `window` queries of each evaluated chunk into the
 * layer's ring, position p in row p mod window. */
static vkv_status capture_queries(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view q, uint32_t n_tok, uint32_t pos0)
{
    vkv_decode_press *d = user;
    const uint64_t row = query_bytes(&d->m->hp), ring = (uint64_t)layer * d->window * row;
    const uint32_t w = d->window, take = n_tok < w ? n_tok : w;
    const uint32_t end = pos0 + n_tok;
    const uint32_t run = d->q_end[layer] == pos0 ? d->q_run[layer] + n_tok : n_tok;
    d->q_run[layer] = run < w ? run : w;
    d->q_end[layer] = end;
    vkv_status st = VKV_OK;
    /* positions end - take .. end - 1, cut where the ring wraps */
    for (uint32_t p = end - take; p < end && !st;) {
        const uint32_t r = p % w, len = end - p < w - r ? end - p : w - r;
        st = vkv_cmd_copy(gpu, q.buf, q.offset + (uint64_t)(p - pos0) * row, d->q_ring, ring + r * row, len * row);
        p += len;
    }
    return st;
}

void vkv_decode_watch_queries(vkv_decode_press *d)
{
    if (d->q_ring) vkv_ctx_set_q_hook(d->ctx, capture_queries, d);
}

uint32_t vkv_decode_steps_to_check(const vkv_decode_press *d) { return vkv_decode_steps_to_fire(&d->counter); }

vkv_status vkv_decode_count_steps(vkv_decode_press *d, uint32_t n)
{
    if (!vkv_decode_count(&d->counter, n)) return VKV_OK;
    /* kvpress asks its scorer for a ratio of 0 then: every token stays */
    const uint32_t most = vkv_kv_max_head_tokens(vkv_ctx_kv(d->ctx), vkv_ctx_n_past(d->ctx));
    if (!vkv_decode_kvpress_compresses(most, d->p.target_tokens)) {
        d->stats.skipped++;
        return VKV_OK;
    }
    return vkv_decode_compress(d);
}
