/* LagKV (kvpress's LagKVPress): the tokens after the n_sink sinks are cut
 * into partitions of lag_size; each partition but the last is scored against
 * the next one, its reference: per channel the keys are normalised by the
 * reference keys' min-max range, the std over the channels (unbiased) goes
 * through a softmax over the partition, the same for the values, and the
 * token's score is its rank of the mean of the two within its partition
 * (0 .. lag_size - 1; kvpress divides the rank by lag_size, the same order).
 * The sinks, the last whole partition and the tokens after it (kvpress's
 * tail) are always kept: kvpress scores them 1, above every rank / lag_size;
 * here they get StreamingLLM's scores (+inf for the sinks, else the position,
 * which is >= n_sink + lag_size > every rank), so a top-k takes the sinks,
 * then the tail from its latest token, then the best ranks. A context
 * shorter than n_sink + 2 lag_size has no partition to score: kvpress then
 * keeps the sinks and the latest tokens, which StreamingLLM's scores are.
 * A reference channel with an empty range (max = min) contributes 0 (kvpress
 * divides by zero there and gets NaN scores). Ties of ranks across
 * partitions are broken by position, as every selection here
 * (docs/ARCHITECTURE.md §2). GPU: press_streamingllm, then
 * shaders/press_lagkv.comp over the scored partitions. */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "ref/ref_attn.h"

#define LAGKV_MAX_LAG 1024u /* the shader's shared arrays */

extern const vkv_press_ops vkv_press_streamingllm;

/* Partitions scored: 0 when the context is too short for one and its reference. */
static uint32_t scored_partitions(const vkv_press_params *p, uint32_t n)
{
    const uint32_t lag = vkv_press_lag_size_of(p);
    if (n < p->n_sink + 2ull * lag) return 0;
    return (n - p->n_sink) / lag - 1;
}

static vkv_status lagkv_check(const vkv_press_params *p, const vkv_press_layer *in, const char *name)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    if (vkv_press_lag_size_of(p) > LAGKV_MAX_LAG)
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: lag_size %u is over %u", name, vkv_press_lag_size_of(p), LAGKV_MAX_LAG);
    return VKV_OK;
}

static vkv_binding bind_v(const vkv_press_layer *in, uint32_t h0, uint32_t nh)
{
    const uint64_t es = in->kv_type == VKV_F16 ? 2 : 4, head_bytes = es * in->n_ctx * in->head_dim;
    return vkv_ops_bind(in->v, head_bytes * h0, head_bytes * (nh - 1) + es * in->n * in->head_dim);
}

static vkv_status lagkv_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "lagkv";
    const vkv_kernel k = in->kv_type == VKV_F16 ? VKV_K_PRESS_LAGKV_F16 : VKV_K_PRESS_LAGKV_F32;
    const uint64_t head_bytes = (in->kv_type == VKV_F16 ? 2ull : 4ull) * in->n_ctx * in->head_dim;
    uint32_t heads_per;
    vkv_status st;
    if ((st = lagkv_check(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_ops_check_view(gpu, in->v, head_bytes * in->n_kv_head, name, "the V cache")) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)) ||
        (st = vkv_press_streamingllm.score_gpu(gpu, p, in, scores)))
        return st;
    const uint32_t n_part = scored_partitions(p, in->n);
    if (!n_part) return VKV_OK;
    if (n_part > vkv_gpu_caps(gpu)->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %u partitions are over this device's workgroup limit", name, n_part);
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_lagkv pc = {in->n, in->n_ctx, in->head_dim, h0, p->n_sink, vkv_press_lag_size_of(p)};
        vkv_binding b[3] = {vkv_press_bind_k(in, h0, nh), bind_v(in, h0, nh),
                            vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
        if ((st = vkv_dispatch(gpu, k, b, 3, &pc, n_part, nh, 1))) return st;
    }
    return VKV_OK;
}

static double v_host(const vkv_press_layer *in, uint32_t h, uint32_t j, uint32_t d)
{
    return vkv_kv_cache_get(in->kv_type, in->v_host, in->n_ctx, in->head_dim, h, j, d);
}

/* The std over the channels of token j's keys (values: !keys) normalised by
 * the reference range [lo, hi] (head_dim each). */
static double normalised_std(const vkv_press_layer *in, bool keys, uint32_t h, uint32_t j, const double *lo,
                             const double *hi)
{
    const uint32_t hd = in->head_dim;
    double x[VKV_PRESS_MAX_HEAD_DIM], mean = 0, ss = 0;
    for (uint32_t d = 0; d < hd; d++) {
        const double e = keys ? vkv_press_k_host(in, h, j, d) : v_host(in, h, j, d), range = hi[d] - lo[d];
        x[d] = range == 0 ? 0 : (e - lo[d]) / range;
        mean += x[d];
    }
    mean /= hd;
    for (uint32_t d = 0; d < hd; d++) ss += (x[d] - mean) * (x[d] - mean);
    return sqrt(ss / (hd - 1));
}

/* Softmax over the lag stds in place. */
static void softmax_in_place(double *s, uint32_t lag)
{
    double mx = s[0], sum = 0;
    for (uint32_t t = 1; t < lag; t++) mx = s[t] > mx ? s[t] : mx;
    for (uint32_t t = 0; t < lag; t++) sum += s[t] = exp(s[t] - mx);
    for (uint32_t t = 0; t < lag; t++) s[t] /= sum;
}

/* Partition p of head h: ranks into scores (the head's row). */
static void score_partition(const vkv_press_layer *in, const vkv_press_params *p, uint32_t h, uint32_t part,
                            double *work, float *scores)
{
    const uint32_t lag = vkv_press_lag_size_of(p), hd = in->head_dim, first = p->n_sink + part * lag, ref0 = first + lag;
    double *lo = work, *hi = lo + hd, *sk = hi + hd, *sv = sk + lag;
    for (int keys = 1; keys >= 0; keys--) {
        for (uint32_t d = 0; d < hd; d++) {
            lo[d] = INFINITY;
            hi[d] = -INFINITY;
            for (uint32_t t = 0; t < lag; t++) {
                const double e = keys ? vkv_press_k_host(in, h, ref0 + t, d) : v_host(in, h, ref0 + t, d);
                lo[d] = e < lo[d] ? e : lo[d];
                hi[d] = e > hi[d] ? e : hi[d];
            }
        }
        double *s = keys ? sk : sv;
        for (uint32_t t = 0; t < lag; t++) s[t] = normalised_std(in, keys, h, first + t, lo, hi);
        softmax_in_place(s, lag);
    }
    for (uint32_t t = 0; t < lag; t++) sk[t] = 0.5 * (sk[t] + sv[t]);
    for (uint32_t t = 0; t < lag; t++) {
        uint32_t rank = 0;
        for (uint32_t u = 0; u < lag; u++) rank += sk[u] < sk[t] || (sk[u] == sk[t] && u > t);
        scores[first + t] = (float)rank;
    }
}

static vkv_status lagkv_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = lagkv_check(p, in, "lagkv");
    if (st || (st = vkv_press_streamingllm.score_ref(p, in, scores))) return st;
    const uint32_t n_part = scored_partitions(p, in->n), lag = vkv_press_lag_size_of(p);
    if (!n_part) return VKV_OK;
    double *work = malloc(sizeof *work * (2ull * in->head_dim + 2ull * lag));
    if (!work) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t part = 0; part < n_part; part++) score_partition(in, p, h, part, work, scores + (size_t)h * in->n);
    free(work);
    return VKV_OK;
}

const vkv_press_ops vkv_press_lagkv = {
    .name = "lagkv",
    .window = 0,
    .query_aware = false,
    .score_gpu = lagkv_gpu,
    .score_ref = lagkv_ref,
};
