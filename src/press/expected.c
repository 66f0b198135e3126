/* ExpectedAttention (kvpress's ExpectedAttentionPress, defaults
 * n_future_positions 512, n_sink 4, use_covariance, use_vnorm, epsilon 0;
 * use_vnorm and epsilon are vkv_press_params' expected_no_vnorm and
 * expected_epsilon, which the compositions adakv-expected and
 * critical-[adakv-]expected set, docs/ARCHITECTURE.md §2):
 * the attention future queries are expected to pay, from the statistics of
 * the context's queries.
 *   1. per query head, the mean mu and covariance Sigma (biased: / N) of the
 *      pre-RoPE queries of positions n_sink .. n - 1 (N = n - n_sink; after
 *      the q bias and the QK-norm, as kvpress's get_prerope_query_states);
 *   2. the RoPE rotation averaged over the next 512 positions n .. n + 511,
 *      Rbar = mean_t R_{n+t} (the model's own pair layout, rope scaling
 *      included), applied: mu' = Rbar mu, Sigma' = Rbar Sigma Rbar^T;
 *   3. for the non-sink keys j in [n_sink, n) (post-RoPE, from the cache):
 *      z_j = mu' . k_j / sqrt(d) + k_j^T Sigma' k_j / (2 d); softmax over j
 *      per query head; mean over the query heads of the KV head's group,
 *      p_j; then (p_j + epsilon) ||v_j||, or p_j alone without the value
 *      norms (kvpress adds epsilon only when it multiplies by them);
 *   4. the n_sink first tokens are kept (+inf; kvpress pads them with the
 *      maximum score + 1). kvpress asserts n > n_sink: an error here.
 *
 * Capture (during the prefill): the driver hands every chunk's post-RoPE
 * queries; shaders/press_expected_stats.comp undoes RoPE and accumulates
 * shifted sums per head into the layer's state:
 *   c [n_head, hd] | s1 [n_head, hd] | s2 [n_head, hd, hd]  f32
 * (c = the pre-RoPE query at position n_sink; s1, s2 the sums of q - c and of
 * its outer products). score_gpu: press_expected_prep (mu', Sigma' per head),
 * press_expected_logits (z), press_expected_lse (normalisers),
 * press_expected (group mean, value norms, sinks). The reference works in
 * double from q_host (all n queries) with the same f32 RoPE angles as the
 * GPU (float(pos) * inv_freq, what the model's rope.comp rotated by). */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "ref/ref_attn.h"
#include "vk/gpu.h"

extern const vkv_press_ops vkv_press_knorm; /* the value norms during generation */

#define EXPECTED_FUTURE 512u
#define EXPECTED_TA 8u   /* rows of s2 per workgroup (press_expected_stats) */
#define EXPECTED_TK 16u  /* keys per workgroup (press_expected_logits) */

static uint32_t n_sink_of(const vkv_press_params *p) { return p->n_sink; }

/* The shapes; the statistics need more queries than sinks: the context's
 * (prefill), or the window's (during generation). */
static vkv_status check_shapes(const vkv_press_params *p, const vkv_press_layer *in, const char *name, bool window)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    const uint32_t count = window ? in->window : in->n;
    if (count <= n_sink_of(p))
        return vkv_error(VKV_ERR_ARG, "%s: %u %s, not more than its %u sink tokens", name, count,
                         window ? "queries since the last compression" : "context tokens", n_sink_of(p));
    if (in->n_rot % 2 || in->n_rot > in->head_dim)
        return vkv_error(VKV_ERR_ARG, "%s: %u rotated dims of a %u-dim head", name, in->n_rot, in->head_dim);
    return VKV_OK;
}
static vkv_status expected_check(const vkv_press_params *p, const vkv_press_layer *in, const char *name)
{
    return check_shapes(p, in, name, false);
}

static uint64_t state_floats(const vkv_press_layer *in)
{
    return (uint64_t)in->n_head * in->head_dim * (2ull + in->head_dim);
}

static uint64_t expected_state_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return 4ull * state_floats(in);
}

/* Scratch: prep (mu', Sigma') [n_head, hd (1 + hd)] | z [n_head, n - n_sink] | lse [n_head]. */
static uint64_t prep_bytes(const vkv_press_layer *in)
{
    return 4ull * in->n_head * in->head_dim * (1ull + in->head_dim);
}
static uint64_t z_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    const uint64_t nz = in->n > n_sink_of(p) ? in->n - n_sink_of(p) : 1;
    return 4ull * in->n_head * nz;
}

static uint64_t expected_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    const uint64_t prefill = vkv_press_align_up(prep_bytes(in)) + vkv_press_align_up(z_bytes(p, in)) + 4ull * in->n_head;
    /* during generation: prep | z of every slot | value norms */
    const uint64_t window = vkv_press_align_up(prep_bytes(in)) + vkv_press_align_up(4ull * in->n_head * in->n) +
                            4ull * in->n_kv_head * in->n;
    return prefill > window ? prefill : window;
}

static vkv_status expected_capture(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view q,
                                   uint32_t n_tok, uint32_t pos0)
{
    const char *name = "expected";
    vkv_status st = expected_check(p, in, name);
    if (st) return st;
    const uint32_t sink = n_sink_of(p), end = pos0 + n_tok < in->n ? pos0 + n_tok : in->n;
    const uint32_t first = pos0 > sink ? pos0 : sink;
    const bool has_c = sink >= pos0 && sink < pos0 + n_tok;
    if (first >= end && !has_c) return VKV_OK; /* nothing of this chunk is counted */
    const uint64_t q_bytes = 4ull * n_tok * in->n_head * in->head_dim, sb = expected_state_bytes(p, in);
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_PRESS_EXPECTED_STATS);
    if ((st = vkv_ops_check_view(gpu, q, q_bytes, name, "the queries")) ||
        (st = vkv_ops_check_single_range(gpu, q_bytes, name, "the queries")) ||
        (st = vkv_ops_check_view(gpu, in->state, sb, name, "the state")) ||
        (st = vkv_ops_check_single_range(gpu, sb, name, "the state")) ||
        (in->n_rot && (st = vkv_ops_check_view(gpu, in->inv_freq, 2ull * in->n_rot, name, "the RoPE frequencies"))))
        return st;
    if (wg < 64 || wg > 256 || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two in [64, 256]", name, wg);
    vkv_pc_press_expected_stats pc = {
        in->n_head, in->head_dim, in->n_rot, in->rope_neox, pos0, first < end ? first - pos0 : 0,
        first < end ? end - pos0 : 0, has_c ? sink - pos0 : 0xffffffffu};
    vkv_binding b[3] = {vkv_ops_bind(q, 0, q_bytes),
                        in->n_rot ? vkv_ops_bind(in->inv_freq, 0, 2ull * in->n_rot) : vkv_ops_bind(in->state, 0, 16),
                        vkv_ops_bind(in->state, 0, sb)};
    return vkv_dispatch(gpu, VKV_K_PRESS_EXPECTED_STATS, b, 3, &pc,
                        (in->head_dim + EXPECTED_TA - 1) / EXPECTED_TA, in->n_head, 1);
}

static vkv_status expected_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "expected";
    const bool f16 = in->kv_type == VKV_F16;
    const vkv_kernel klog = f16 ? VKV_K_PRESS_EXPECTED_LOGITS_F16 : VKV_K_PRESS_EXPECTED_LOGITS_F32;
    const vkv_kernel kfin = f16 ? VKV_K_PRESS_EXPECTED_F16 : VKV_K_PRESS_EXPECTED_F32;
    vkv_status st;
    uint32_t heads_per, gx;
    if ((st = expected_check(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_check_scratch(gpu, in, expected_scratch_bytes(p, in), name)) ||
        (st = vkv_ops_check_view(gpu, in->state, expected_state_bytes(p, in), name, "the state")) ||
        (st = vkv_ops_check_single_range(gpu, expected_state_bytes(p, in), name, "the state")) ||
        (in->n_rot && (st = vkv_ops_check_view(gpu, in->inv_freq, 2ull * in->n_rot, name, "the RoPE frequencies"))) ||
        (st = vkv_ops_check_view(gpu, in->v, vkv_kv_cache_bytes(in->kv_type, in->n_kv_head, in->n_ctx, in->head_dim),
                                 name, "the V cache")) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)) ||
        (st = vkv_press_groups_x(gpu, kfin, in->n, name, &gx)))
        return st;
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, klog);
    if (wg < 16 || wg > 256 || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two in [16, 256]", name, wg);
    const uint32_t sink = n_sink_of(p), n_z = in->n - sink;
    const uint64_t pb = prep_bytes(in), zb = z_bytes(p, in), sb = expected_state_bytes(p, in);
    const uint64_t z_off = vkv_press_align_up(pb), lse_off = z_off + vkv_press_align_up(zb);
    const vkv_view prep = vkv_press_scratch_at(in, 0), z = vkv_press_scratch_at(in, z_off);
    const vkv_view lse = vkv_press_scratch_at(in, lse_off);
    const uint64_t lb = 4ull * in->n_head, scb = 4ull * in->n_kv_head * in->n;

    vkv_pc_press_expected_prep ppc = {
        in->n_head, in->head_dim, in->n_rot, in->rope_neox, n_z, in->n, EXPECTED_FUTURE};
    vkv_binding bp[3] = {vkv_ops_bind(in->state, 0, sb),
                         in->n_rot ? vkv_ops_bind(in->inv_freq, 0, 2ull * in->n_rot) : vkv_ops_bind(in->state, 0, 16),
                         vkv_ops_bind(prep, 0, pb)};
    if ((st = vkv_dispatch(gpu, VKV_K_PRESS_EXPECTED_PREP, bp, 3, &ppc, in->n_head, 1, 1))) return st;

    const uint32_t tiles = (n_z + EXPECTED_TK - 1) / EXPECTED_TK;
    if (tiles > vkv_gpu_caps(gpu)->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %u keys need too many workgroups", name, n_z);
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_expected_logits lpc = {
            in->n, sink, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0,
            (float)(1.0 / sqrt((double)in->head_dim)), (float)(0.5 / in->head_dim)};
        vkv_binding bl[3] = {vkv_ops_bind(prep, 0, pb), vkv_press_bind_k(in, h0, nh), vkv_ops_bind(z, 0, zb)};
        if ((st = vkv_dispatch(gpu, klog, bl, 3, &lpc, tiles, nh, 1))) return st;
    }
    vkv_pc_press_expected_lse zpc = {n_z};
    vkv_binding bz[2] = {vkv_ops_bind(z, 0, zb), vkv_ops_bind(lse, 0, lb)};
    if ((st = vkv_dispatch(gpu, VKV_K_PRESS_EXPECTED_LSE, bz, 2, &zpc, in->n_head, 1, 1))) return st;
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_expected fpc = {
            in->n, sink, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0, p->expected_epsilon,
            p->expected_no_vnorm ? 0u : 1u};
        vkv_press_layer vin = *in;
        vin.k = in->v; /* the V cache has the K cache's layout */
        vkv_binding bf[4] = {vkv_ops_bind(z, 0, zb), vkv_ops_bind(lse, 0, lb), vkv_press_bind_k(&vin, h0, nh),
                             vkv_ops_bind(scores, 0, scb)};
        if ((st = vkv_dispatch(gpu, kfin, bf, 4, &fpc, gx, nh, 1))) return st;
    }
    return VKV_OK;
}

/* Pair (i0, i1) of rotated pair p in the model's layout. */
static void pair_dims(const vkv_press_layer *in, uint32_t p, uint32_t *i0, uint32_t *i1)
{
    *i0 = in->rope_neox ? p : 2 * p;
    *i1 = in->rope_neox ? p + in->n_rot / 2 : 2 * p + 1;
}

/* Position of slot j of KV head kh, and whether the head holds it. */
static int64_t slot_position(const vkv_press_layer *in, uint32_t kh, uint32_t j)
{
    return in->slot_pos ? in->slot_pos[(size_t)kh * in->n + j] : (int64_t)j;
}
static uint32_t head_tokens(const vkv_press_layer *in, uint32_t kh) { return in->n_tok ? in->n_tok[kh] : in->n; }

/* The queries the statistics are taken over: rows first .. end - 1 of q
 * ([rows, n_head, head_dim] f32, row i at position pos0 + i), and the first
 * of the future positions the rotation is averaged over. */
typedef struct expected_queries {
    const float *q;
    uint32_t pos0, first, end, fut0;
} expected_queries;

/* kvpress's last step on one slot's group-mean expected attention p:
 * (p + epsilon) vnorm with the value norms (use_vnorm), p without them. */
static double finish_score(const vkv_press_params *p, double prob, double vnorm)
{
    return p->expected_no_vnorm ? prob : (prob + (double)p->expected_epsilon) * vnorm;
}

/* The reference in double of both paths: the statistics of the queries eq,
 * the softmax over the slots whose position is not a sink (and that the head
 * holds), the group mean p, then (p + epsilon) ||v|| or p alone
 * (finish_score); sinks +inf, slots past a head's tokens 0. */
static vkv_status expected_ref_core(const vkv_press_params *p, const vkv_press_layer *in, const expected_queries *eq,
                                    float *scores)
{
    vkv_status st = VKV_OK;
    if (in->n_rot && !in->inv_freq_host)
        return vkv_error(VKV_ERR_ARG, "expected: no host copy of the RoPE frequencies");
    if (!in->v_host) return vkv_error(VKV_ERR_ARG, "expected: no host copy of the V cache");
    const uint32_t hd = in->head_dim, sink = n_sink_of(p), n = in->n, npair = in->n_rot / 2;
    const uint32_t group = in->n_head / in->n_kv_head, nq = eq->end - eq->first;
    const size_t hd2 = (size_t)hd * hd;
    double *qp = malloc(sizeof *qp * (size_t)nq * hd);   /* [nq, hd] pre-RoPE queries of one head */
    double *mu = malloc(sizeof *mu * hd * 2), *mu2 = mu ? mu + hd : NULL;
    double *cov = malloc(sizeof *cov * hd2 * 2), *cov2 = cov ? cov + hd2 : NULL;
    double *cb = malloc(sizeof *cb * (npair + 1) * 2), *sb = cb ? cb + npair + 1 : NULL;
    double *z = malloc(sizeof *z * n), *acc = calloc((size_t)in->n_kv_head * n + 1, sizeof *acc);
    if (!qp || !mu || !cov || !cb || !z || !acc) {
        st = vkv_error(VKV_ERR_OOM, "expected: out of host memory");
        goto done;
    }
    for (uint32_t pr = 0; pr < npair; pr++) {
        double c = 0, s = 0;
        for (uint32_t t = 0; t < EXPECTED_FUTURE; t++) {
            const double th = (double)((float)(eq->fut0 + t) * in->inv_freq_host[pr]);
            c += cos(th);
            s += sin(th);
        }
        cb[pr] = c / EXPECTED_FUTURE;
        sb[pr] = s / EXPECTED_FUTURE;
    }
    for (uint32_t h = 0; h < in->n_head; h++) {
        const uint32_t kh = h / group;
        /* 1. pre-RoPE queries, mean, covariance */
        for (uint32_t i = 0; i < nq; i++) {
            const uint32_t row = eq->first + i, pos = eq->pos0 + row;
            const float *q = eq->q + ((size_t)row * in->n_head + h) * hd;
            double *o = qp + (size_t)i * hd;
            for (uint32_t d = 0; d < hd; d++) o[d] = q[d];
            for (uint32_t pr = 0; pr < npair; pr++) {
                uint32_t i0, i1;
                pair_dims(in, pr, &i0, &i1);
                const double th = (double)((float)pos * in->inv_freq_host[pr]), c = cos(th), s = sin(th);
                const double a = q[i0], b = q[i1];
                o[i0] = a * c + b * s;
                o[i1] = b * c - a * s;
            }
        }
        for (uint32_t d = 0; d < hd; d++) {
            double m = 0;
            for (uint32_t i = 0; i < nq; i++) m += qp[(size_t)i * hd + d];
            mu[d] = m / nq;
        }
        for (uint32_t a = 0; a < hd; a++)
            for (uint32_t b = 0; b < hd; b++) {
                double s = 0;
                for (uint32_t i = 0; i < nq; i++)
                    s += (qp[(size_t)i * hd + a] - mu[a]) * (qp[(size_t)i * hd + b] - mu[b]);
                cov[(size_t)a * hd + b] = s / nq;
            }
        /* 2. Rbar applied: rows of Rbar are [C, -S] / [S, C] on each pair, identity past n_rot */
        for (uint32_t d = 0; d < hd; d++) mu2[d] = mu[d];
        for (size_t e = 0; e < hd2; e++) cov2[e] = cov[e];
        for (uint32_t pr = 0; pr < npair; pr++) {
            uint32_t i0, i1;
            pair_dims(in, pr, &i0, &i1);
            mu2[i0] = cb[pr] * mu[i0] - sb[pr] * mu[i1];
            mu2[i1] = sb[pr] * mu[i0] + cb[pr] * mu[i1];
        }
        /* cov' = Rbar cov Rbar^T: rows first (into cov2 from cov), then columns in place */
        for (uint32_t pr = 0; pr < npair; pr++) {
            uint32_t i0, i1;
            pair_dims(in, pr, &i0, &i1);
            for (uint32_t b = 0; b < hd; b++) {
                const double x0 = cov[(size_t)i0 * hd + b], x1 = cov[(size_t)i1 * hd + b];
                cov2[(size_t)i0 * hd + b] = cb[pr] * x0 - sb[pr] * x1;
                cov2[(size_t)i1 * hd + b] = sb[pr] * x0 + cb[pr] * x1;
            }
        }
        for (uint32_t pr = 0; pr < npair; pr++) {
            uint32_t i0, i1;
            pair_dims(in, pr, &i0, &i1);
            for (uint32_t a = 0; a < hd; a++) {
                const double x0 = cov2[(size_t)a * hd + i0], x1 = cov2[(size_t)a * hd + i1];
                cov2[(size_t)a * hd + i0] = cb[pr] * x0 - sb[pr] * x1;
                cov2[(size_t)a * hd + i1] = sb[pr] * x0 + cb[pr] * x1;
            }
        }
        /* 3. z, softmax over the non-sink slots, group sum */
        double mx = -INFINITY, sum = 0;
        const uint32_t nt = head_tokens(in, kh);
        for (uint32_t j = 0; j < nt; j++) {
            z[j] = -INFINITY;
            if (slot_position(in, kh, j) < sink) continue;
            double lin = 0, quad = 0;
            for (uint32_t a = 0; a < hd; a++) {
                const double ka = vkv_press_k_host(in, kh, j, a);
                double y = 0;
                for (uint32_t b = 0; b < hd; b++) y += cov2[(size_t)a * hd + b] * vkv_press_k_host(in, kh, j, b);
                lin += mu2[a] * ka;
                quad += ka * y;
            }
            z[j] = lin / sqrt((double)hd) + quad / (2.0 * hd);
            if (z[j] > mx) mx = z[j];
        }
        for (uint32_t j = 0; j < nt; j++) sum += exp(z[j] - mx);
        for (uint32_t j = 0; j < nt; j++) acc[(size_t)kh * n + j] += exp(z[j] - mx) / sum;
    }
    /* 4. group mean, value norms, sinks */
    for (uint32_t kh = 0; kh < in->n_kv_head; kh++)
        for (uint32_t j = 0; j < n; j++) {
            float s = 0;
            if (j >= head_tokens(in, kh)) {
            } else if (slot_position(in, kh, j) < sink) {
                s = INFINITY;
            } else {
                double v2 = 0;
                for (uint32_t d = 0; d < hd; d++) {
                    const double v = vkv_kv_cache_get(in->kv_type, in->v_host, in->n_ctx, hd, kh, j, d);
                    v2 += v * v;
                }
                s = (float)finish_score(p, acc[(size_t)kh * n + j] / group, sqrt(v2));
            }
            scores[(size_t)kh * n + j] = s;
        }
done:
    free(qp);
    free(mu);
    free(cov);
    free(cb);
    free(z);
    free(acc);
    return st;
}

static vkv_status expected_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = expected_check(p, in, "expected");
    if (st) return st;
    if (!in->q_host || in->q_pos0 != 0 || in->n_q < in->n)
        return vkv_error(VKV_ERR_ARG, "expected: the reference needs all %u context queries on the host", in->n);
    const expected_queries eq = {in->q_host, 0, n_sink_of(p), in->n, in->n};
    return expected_ref_core(p, in, &eq, scores);
}

/* ---- During generation (press/decode.h) ----
 * kvpress's DecodingPress hands the scorer its buffer of the hidden states of
 * the steps since the previous compression (at most 256 kept between steps,
 * plus the current one: decode_window 257). ExpectedAttention drops the
 * buffer's first n_sink rows and takes the statistics of the rest, and its
 * sinks are the cache's first n_sink tokens, positions 0 .. n_sink - 1 (they
 * always stay, so kvpress's slots 0 .. n_sink - 1 hold them). Here: the
 * window's queries, rows n_sink .. of in->q_window; the rotation averaged
 * over the next 512 positions after the window (kvpress passes the buffer's
 * length as the next position, a prefill's); the sinks found by position in
 * the gather (with VECTOR they may sit among the approximated slots), so the
 * softmax over the other slots is finished on the host: the device computes
 * the statistics, mu', Sigma', every slot's logit z (press_expected_logits
 * with no sinks) and the value norms (press_knorm over the V cache). */
static vkv_status expected_window_record(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in,
                                         vkv_view neg_vnorm)
{
    const char *name = "expected";
    const vkv_kernel klog = in->kv_type == VKV_F16 ? VKV_K_PRESS_EXPECTED_LOGITS_F16 : VKV_K_PRESS_EXPECTED_LOGITS_F32;
    const uint32_t sink = n_sink_of(p), w = in->window, stats_wg = vkv_kernel_workgroup_size(gpu, VKV_K_PRESS_EXPECTED_STATS);
    const uint32_t log_wg = vkv_kernel_workgroup_size(gpu, klog);
    const uint64_t q_bytes = 4ull * w * in->n_head * in->head_dim, sb = expected_state_bytes(p, in);
    const uint64_t pb = prep_bytes(in), zb = 4ull * in->n_head * in->n;
    const vkv_view prep = vkv_press_scratch_at(in, 0), z = vkv_press_scratch_at(in, vkv_press_align_up(pb));
    vkv_status st;
    uint32_t heads_per;
    if ((st = vkv_ops_check_view(gpu, in->q_window, q_bytes, name, "the queries")) ||
        (st = vkv_ops_check_view(gpu, in->state, sb, name, "the state")) ||
        (st = vkv_ops_check_single_range(gpu, sb, name, "the state")) ||
        (st = vkv_press_check_scratch(gpu, in, vkv_press_align_up(pb) + zb, name)) ||
        (in->n_rot && (st = vkv_ops_check_view(gpu, in->inv_freq, 2ull * in->n_rot, name, "the RoPE frequencies"))) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)))
        return st;
    if (stats_wg < 64 || stats_wg > 256 || (stats_wg & (stats_wg - 1)) || log_wg < 16 || log_wg > 256 ||
        (log_wg & (log_wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup sizes %u, %u are not powers of two in range", name,
                         stats_wg, log_wg);
    const vkv_binding freq = in->n_rot ? vkv_ops_bind(in->inv_freq, 0, 2ull * in->n_rot) : vkv_ops_bind(in->state, 0, 16);
    /* 1. the sums of rows sink .. w - 1 (c: row sink) */
    vkv_pc_press_expected_stats spc = {in->n_head, in->head_dim, in->n_rot, in->rope_neox, in->window_pos0, sink, w, sink};
    vkv_binding bs[3] = {vkv_ops_bind(in->q_window, 0, q_bytes), freq, vkv_ops_bind(in->state, 0, sb)};
    if ((st = vkv_dispatch(gpu, VKV_K_PRESS_EXPECTED_STATS, bs, 3, &spc,
                           (in->head_dim + EXPECTED_TA - 1) / EXPECTED_TA, in->n_head, 1)))
        return st;
    /* 2. mu', Sigma' over the 512 positions after the window */
    vkv_pc_press_expected_prep ppc = {in->n_head, in->head_dim, in->n_rot, in->rope_neox, w - sink, in->window_pos0 + w,
                                      EXPECTED_FUTURE};
    vkv_binding bp[3] = {vkv_ops_bind(in->state, 0, sb), freq, vkv_ops_bind(prep, 0, pb)};
    if ((st = vkv_dispatch(gpu, VKV_K_PRESS_EXPECTED_PREP, bp, 3, &ppc, in->n_head, 1, 1))) return st;
    /* 3. z of every slot */
    const uint32_t tiles = (in->n + EXPECTED_TK - 1) / EXPECTED_TK;
    if (tiles > vkv_gpu_caps(gpu)->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %u keys need too many workgroups", name, in->n);
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_expected_logits lpc = {
            in->n, 0, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0,
            (float)(1.0 / sqrt((double)in->head_dim)), (float)(0.5 / in->head_dim)};
        vkv_binding bl[3] = {vkv_ops_bind(prep, 0, pb), vkv_press_bind_k(in, h0, nh), vkv_ops_bind(z, 0, zb)};
        if ((st = vkv_dispatch(gpu, klog, bl, 3, &lpc, tiles, nh, 1))) return st;
    }
    /* 4. -||v|| of every slot: KNorm over the V cache (its layout is the K cache's) */
    vkv_press_layer vin = *in;
    vin.k = in->v;
    return vkv_press_knorm.score_gpu(gpu, p, &vin, neg_vnorm);
}

static vkv_status expected_window(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    const char *name = "expected";
    vkv_status st = check_shapes(p, in, name, true);
    if (st) return st;
    const uint64_t zb = 4ull * in->n_head * in->n, sn = (uint64_t)in->n_kv_head * in->n;
    const uint32_t sink = n_sink_of(p), group = in->n_head / in->n_kv_head;
    /* the value norms land in the scratch after z */
    const uint64_t z_off = vkv_press_align_up(prep_bytes(in)), v_off = z_off + vkv_press_align_up(zb);
    if ((st = vkv_press_check_scratch(gpu, in, v_off + 4 * sn, name)) ||
        (st = vkv_cmd_begin(gpu)))
        return st;
    if ((st = expected_window_record(gpu, p, in, vkv_press_scratch_at(in, v_off)))) return vkv_cmd_abort(gpu, st);
    double *acc = calloc(sn + 1, sizeof *acc);
    float *z = malloc(zb + 4 * sn);
    if (!acc || !z) {
        free(acc);
        free(z);
        return vkv_cmd_abort(gpu, vkv_error(VKV_ERR_OOM, "expected: out of host memory"));
    }
    float *vn = z + (size_t)in->n_head * in->n;
    if ((st = vkv_cmd_submit(gpu)) ||
        (st = vkv_buffer_download(gpu, in->scratch.buf, in->scratch.offset + z_off, z, zb)) ||
        (st = vkv_buffer_download(gpu, in->scratch.buf, in->scratch.offset + v_off, vn, 4 * sn)))
        goto done;
    /* 5. per query head, the softmax over its KV head's slots that are not sinks */
    for (uint32_t h = 0; h < in->n_head; h++) {
        const uint32_t kh = h / group, nt = head_tokens(in, kh);
        const float *zh = z + (size_t)h * in->n;
        double mx = -INFINITY, sum = 0;
        for (uint32_t j = 0; j < nt; j++)
            if (slot_position(in, kh, j) >= sink && zh[j] > mx) mx = zh[j];
        for (uint32_t j = 0; j < nt; j++)
            if (slot_position(in, kh, j) >= sink) sum += exp(zh[j] - mx);
        for (uint32_t j = 0; j < nt; j++)
            if (slot_position(in, kh, j) >= sink) acc[(size_t)kh * in->n + j] += exp(zh[j] - mx) / sum;
    }
    for (uint32_t kh = 0; kh < in->n_kv_head; kh++)
        for (uint32_t j = 0; j < in->n; j++) {
            const size_t o = (size_t)kh * in->n + j;
            scores[o] = j >= head_tokens(in, kh)             ? 0.0f
                        : slot_position(in, kh, j) < sink ? INFINITY
                                                          : (float)finish_score(p, acc[o] / group, -(double)vn[o]);
        }
done:
    free(acc);
    free(z);
    return st;
}

static vkv_status expected_window_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = check_shapes(p, in, "expected", true);
    if (st) return st;
    if (!in->q_window_host) return vkv_error(VKV_ERR_ARG, "expected: no host copy of the window's queries");
    const expected_queries eq = {in->q_window_host, in->window_pos0, n_sink_of(p), in->window,
                                 in->window_pos0 + in->window};
    return expected_ref_core(p, in, &eq, scores);
}

const vkv_press_ops vkv_press_expected = {
    .name = "expected",
    .window = 0,
    .query_aware = false,
    .score_gpu = expected_gpu,
    .score_ref = expected_ref,
    .scratch_bytes = expected_scratch_bytes,
    .state_bytes = expected_state_bytes,
    .capture_gpu = expected_capture,
    .decode_window = 257,
    .score_window = expected_window,
    .score_window_ref = expected_window_ref,
};
