/* Span attention (see span_attn.h): the (max, sum) normalisers of each query
 * row over the keys it sees, then the per-key sum or max of the weights. */
#include "press/span_attn.h"

#include <math.h>
#include <stdlib.h>

#include "vk/dispatch.h"

#define SPAN_TQ 16u              /* query rows per tile in both shaders */
#define SPAN_MAX_WG 256u
#define SPAN_SPLIT_KEYS 1024u    /* about this many keys per normaliser split */
#define SPAN_MAX_SPLITS 64u

static uint32_t span_splits(uint64_t n_keys)
{
    uint64_t s = (n_keys + SPAN_SPLIT_KEYS - 1) / SPAN_SPLIT_KEYS;
    return s < 1 ? 1 : s > SPAN_MAX_SPLITS ? SPAN_MAX_SPLITS : (uint32_t)s;
}

uint64_t vkv_span_scratch_bytes(const vkv_press_layer *in)
{
    return 8ull * span_splits(in->n_ctx) * VKV_SPAN_QSUB * in->n_head;
}

static vkv_status span_check(const vkv_press_layer *in, const vkv_span_attn *sa, const char *name)
{
    const uint64_t end = (uint64_t)sa->qpos0 + sa->nq;
    if (!(sa->a <= sa->b && sa->b <= sa->c && sa->c <= sa->r0 && sa->r0 <= sa->qpos0))
        return vkv_error(VKV_ERR_ARG, "%s: key ranges [0, %u) [%u, %u) [%u, ..) out of order for queries at %u", name,
                         sa->a, sa->b, sa->c, sa->r0, sa->qpos0);
    if (end > in->n_ctx)
        return vkv_error(VKV_ERR_ARG, "%s: queries up to position %llu in a cache of %u slots", name,
                         (unsigned long long)end, in->n_ctx);
    if (sa->t0 > sa->t1 || sa->t1 > sa->acc_stride || sa->t1 > end)
        return vkv_error(VKV_ERR_ARG, "%s: target keys [%u, %u) outside the %u-wide accumulator or past the queries",
                         name, sa->t0, sa->t1, sa->acc_stride);
    return VKV_OK;
}

vkv_status vkv_span_gpu(vkv_gpu *gpu, const vkv_press_layer *in, const vkv_span_attn *sa, const char *name)
{
    const bool f16 = in->kv_type == VKV_F16;
    const vkv_kernel klse = f16 ? VKV_K_PRESS_SPAN_LSE_F16 : VKV_K_PRESS_SPAN_LSE_F32;
    const vkv_kernel kacc = f16 ? VKV_K_PRESS_SPAN_ACCUM_F16 : VKV_K_PRESS_SPAN_ACCUM_F32;
    const uint32_t group = in->n_head / in->n_kv_head, wg = vkv_kernel_workgroup_size(gpu, klse);
    const uint64_t row_bytes = 4ull * in->n_head * in->head_dim;
    const uint64_t q_bytes = row_bytes * ((uint64_t)sa->q_row0 + sa->nq);
    const uint64_t acc_bytes = 4ull * in->n_kv_head * sa->acc_stride;
    vkv_status st;
    if ((st = span_check(in, sa, name))) return st;
    if (!sa->nq || sa->t0 == sa->t1) return VKV_OK;
    if ((st = vkv_ops_check_view(gpu, sa->q, q_bytes, name, "the queries")) ||
        (st = vkv_ops_check_single_range(gpu, q_bytes, name, "the queries")) ||
        (st = vkv_ops_check_view(gpu, sa->acc, acc_bytes, name, "the accumulator")) ||
        (st = vkv_ops_check_single_range(gpu, acc_bytes, name, "the accumulator")) ||
        (st = vkv_press_check_scratch(gpu, in, vkv_span_scratch_bytes(in), name)))
        return st;
    if (wg > SPAN_MAX_WG || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two <= 256", name, wg);
    const float scale = (float)(1.0 / sqrt((double)in->head_dim));
    const vkv_view parts = vkv_press_scratch_at(in, 0);

    for (uint32_t i0 = 0; i0 < sa->nq; i0 += VKV_SPAN_QSUB) {
        const uint32_t nq = sa->nq - i0 < VKV_SPAN_QSUB ? sa->nq - i0 : VKV_SPAN_QSUB;
        const uint32_t qpos0 = sa->qpos0 + i0;
        /* Keys of the sub-run: bound up to its last query's position. */
        vkv_press_layer kin = *in;
        kin.n = qpos0 + nq;
        uint32_t heads_per, gx;
        /* Observed attention targets the keys seen so far: [t0, min(t1, last + 1)). */
        const uint32_t t1 = sa->t1 < kin.n ? sa->t1 : kin.n;
        if ((st = vkv_press_k_heads_per_dispatch(gpu, &kin, name, &heads_per))) return st;
        const uint64_t n_vis = (uint64_t)sa->a + (sa->c - sa->b) + (qpos0 + nq - sa->r0);
        const uint32_t n_split = span_splits(n_vis), split_len = (uint32_t)((n_vis + n_split - 1) / n_split);
        const uint32_t row_tiles = (nq * group + SPAN_TQ - 1) / SPAN_TQ;
        const uint64_t lb = 8ull * n_split * nq * in->n_head;
        if (sa->t0 >= t1) continue;
        if ((st = vkv_press_groups_x(gpu, kacc, t1 - sa->t0, name, &gx))) return st;
        for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
            const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
            vkv_pc_press_span pc = {nq, in->n_ctx, in->head_dim, in->n_head, in->n_kv_head, h0, sa->q_row0 + i0, qpos0,
                          sa->a, sa->b, sa->c, sa->r0, sa->t0, t1, split_len, n_split, sa->acc_stride,
                          sa->max_mode ? 1u : 0u, scale};
            vkv_binding bl[3] = {vkv_ops_bind(sa->q, 0, q_bytes), vkv_press_bind_k(&kin, h0, nh),
                                 vkv_ops_bind(parts, 0, lb)};
            if ((st = vkv_dispatch(gpu, klse, bl, 3, &pc, row_tiles, nh, n_split))) return st;
            vkv_binding ba[4] = {vkv_ops_bind(sa->q, 0, q_bytes), vkv_press_bind_k(&kin, h0, nh),
                                 vkv_ops_bind(parts, 0, lb), vkv_ops_bind(sa->acc, 0, acc_bytes)};
            if ((st = vkv_dispatch(gpu, kacc, ba, 4, &pc, gx, nh, 1))) return st;
        }
    }
    return VKV_OK;
}

vkv_status vkv_span_ref(const vkv_press_layer *in, const vkv_span_attn *sa, const float *q_host, double *acc)
{
    const uint32_t hd = in->head_dim, group = in->n_head / in->n_kv_head;
    const double scale = 1.0 / sqrt((double)hd);
    vkv_status st = span_check(in, sa, "span attention");
    if (st) return st;
    if (!q_host || !in->k_host) return vkv_error(VKV_ERR_ARG, "span attention: no host copy of the queries or keys");
    const uint32_t n_keys = sa->qpos0 + sa->nq;
    double *s = malloc(((size_t)n_keys + 1) * sizeof *s); /* [n_keys] scores of one (query, head) row */
    if (!s) return vkv_error(VKV_ERR_OOM, "span attention: out of host memory");
    for (uint32_t h = 0; h < in->n_head; h++) {
        const uint32_t kh = h / group;
        for (uint32_t i = 0; i < sa->nq; i++) {
            const float *q = q_host + ((size_t)i * in->n_head + h) * hd; /* [hd] */
            const uint32_t p = sa->qpos0 + i;
            double mx = -INFINITY, sum = 0;
            for (uint32_t j = 0; j <= p; j++) {
                if (!(j < sa->a || (j >= sa->b && j < sa->c) || j >= sa->r0)) continue;
                double dot = 0;
                for (uint32_t d = 0; d < hd; d++) dot += (double)q[d] * vkv_press_k_host(in, kh, j, d);
                s[j] = dot * scale;
                if (s[j] > mx) mx = s[j];
            }
            for (uint32_t j = 0; j <= p; j++)
                if (j < sa->a || (j >= sa->b && j < sa->c) || j >= sa->r0) sum += exp(s[j] - mx);
            for (uint32_t j = sa->t0; j < sa->t1 && j <= p; j++) {
                if (!(j < sa->a || (j >= sa->b && j < sa->c) || j >= sa->r0)) continue;
                const double w = exp(s[j] - mx) / sum;
                double *o = &acc[(size_t)kh * sa->acc_stride + j];
                *o = sa->max_mode ? (w > *o ? w : *o) : *o + w;
            }
        }
    }
    free(s);
    return VKV_OK;
}
