/* KeyDiff (kvpress's KeyDiffPress): per (layer, KV head), the anchor is the
 * mean of the normalised keys, a = mean_t k_t / ||k_t||, and
 * s_j = -cos(k_j, a): keys that point away from the average direction are
 * the distinctive ones and are kept. A zero key (or anchor) gets cos = 0, what
 * F.normalize / F.cosine_similarity's eps produce.
 *
 * Block-wise variant (params.block = B > 0; the paper uses 128). kvpress's
 * BlockPress is a *selection* procedure: it keeps the first n_kept tokens,
 * then for each following block of B tokens re-scores (kept + block) with an
 * anchor over that set and keeps the top n_kept again. Its result depends on
 * n_kept, so it has no per-token score that a later top-k of another count
 * (VECTOR's pool of n_kept + a tokens) could reuse, and it is sequential in
 * the blocks. What is implemented is the streaming form of the same idea, a
 * score: the anchor of block b is the mean of the normalised keys of every
 * token in blocks 0..b (what a block-by-block prefill has seen when block b
 * arrives), and token j of block b scores -cos(k_j, a_b). The last block
 * thus uses the whole-sequence anchor, and B >= n is the plain KeyDiff.
 *
 * GPU: press_keydiff_sum (normalised-key sums per chunk: the blocks, or 256
 * tokens for parallelism in whole mode), press_keydiff_anchor (prefix or
 * total means), press_keydiff (the cosines). */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "vk/gpu.h"

#define KEYDIFF_CHUNK 256u /* whole-sequence mode: tokens per partial sum */

/* Chunking of the sums: chunk tokens each, n_chunk of them, n_anchor anchors. */
static void keydiff_chunks(const vkv_press_params *p, uint32_t n, uint32_t *chunk, uint32_t *n_chunk,
                           uint32_t *n_anchor)
{
    *chunk = p->block ? p->block : KEYDIFF_CHUNK;
    *n_chunk = (uint32_t)(((uint64_t)n + *chunk - 1) / *chunk);
    if (!*n_chunk) *n_chunk = 1;
    *n_anchor = p->block ? *n_chunk : 1;
}

/* Scratch: sums [n_kv_head, n_chunk, head_dim] f32, then anchors [n_kv_head, n_anchor, head_dim] f32. */
static uint64_t sums_bytes(const vkv_press_layer *in, uint32_t n_chunk)
{
    return 4ull * in->n_kv_head * n_chunk * in->head_dim;
}

static uint64_t keydiff_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    uint32_t chunk, n_chunk, n_anchor;
    keydiff_chunks(p, in->n, &chunk, &n_chunk, &n_anchor);
    return vkv_press_align_up(sums_bytes(in, n_chunk)) + 4ull * in->n_kv_head * n_anchor * in->head_dim;
}

static vkv_status keydiff_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "keydiff";
    const bool f16 = in->kv_type == VKV_F16;
    uint32_t chunk, n_chunk, n_anchor, heads_per, gx;
    vkv_status st;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_k_heads_per_dispatch(gpu, in, name, &heads_per)))
        return st;
    keydiff_chunks(p, in->n, &chunk, &n_chunk, &n_anchor);
    const uint64_t sb = sums_bytes(in, n_chunk), anchors_off = vkv_press_align_up(sb);
    const uint64_t ab = 4ull * in->n_kv_head * n_anchor * in->head_dim;
    const vkv_kernel ksum = f16 ? VKV_K_PRESS_KEYDIFF_SUM_F16 : VKV_K_PRESS_KEYDIFF_SUM_F32;
    const vkv_kernel kscore = f16 ? VKV_K_PRESS_KEYDIFF_F16 : VKV_K_PRESS_KEYDIFF_F32;
    if ((st = vkv_press_check_scratch(gpu, in, keydiff_scratch_bytes(p, in), name)) ||
        (st = vkv_press_groups_x(gpu, kscore, in->n, name, &gx)))
        return st;
    if (n_chunk > vkv_gpu_caps(gpu)->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "keydiff: %u blocks are too many for one dispatch; use larger blocks",
                         n_chunk);
    if (in->head_dim / 4 > vkv_kernel_workgroup_size(gpu, ksum))
        return vkv_error(VKV_ERR_UNSUPPORTED, "keydiff: head_dim %u is too wide for the workgroup", in->head_dim);
    const vkv_view sums = vkv_press_scratch_at(in, 0), anchors = vkv_press_scratch_at(in, anchors_off);

    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_keydiff_sum pc = {in->n, in->n_ctx, in->head_dim, h0,
                                                                                 chunk, n_chunk};
        vkv_binding b[2] = {vkv_press_bind_k(in, h0, nh), vkv_ops_bind(sums, 0, sb)};
        if ((st = vkv_dispatch(gpu, ksum, b, 2, &pc, n_chunk, nh, 1))) return st;
    }
    vkv_pc_press_keydiff_anchor apc = {in->n, in->head_dim, chunk, n_chunk,
                                                                         p->block != 0};
    vkv_binding ab_[2] = {vkv_ops_bind(sums, 0, sb), vkv_ops_bind(anchors, 0, ab)};
    if ((st = vkv_dispatch(gpu, VKV_K_PRESS_KEYDIFF_ANCHOR, ab_, 2, &apc, in->n_kv_head, 1, 1)))
        return st;
    for (uint32_t h0 = 0; h0 < in->n_kv_head; h0 += heads_per) {
        const uint32_t nh = in->n_kv_head - h0 < heads_per ? in->n_kv_head - h0 : heads_per;
        vkv_pc_press_keydiff pc = {in->n, in->n_ctx, in->head_dim, h0,
                                                                                  p->block, n_anchor};
        vkv_binding b[3] = {vkv_press_bind_k(in, h0, nh), vkv_ops_bind(anchors, 0, ab),
                            vkv_ops_bind(scores, 0, 4ull * in->n_kv_head * in->n)};
        if ((st = vkv_dispatch(gpu, kscore, b, 3, &pc, gx, nh, 1))) return st;
    }
    return VKV_OK;
}

/* The same in double: normalised keys summed in token order, the anchor
 * (prefix) mean at the end of each block, then the cosines. */
static vkv_status keydiff_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = vkv_press_check_layer(p, in, "keydiff");
    if (st) return st;
    const uint32_t hd = in->head_dim, n = in->n, block = p->block && p->block < n ? p->block : n;
    double *sum = calloc(hd, sizeof *sum), *a = malloc(hd * sizeof *a); /* [head_dim] each */
    if (!sum || !a) {
        free(sum);
        free(a);
        return vkv_error(VKV_ERR_OOM, "keydiff: out of host memory");
    }
    for (uint32_t h = 0; h < in->n_kv_head; h++) {
        for (uint32_t d = 0; d < hd; d++) sum[d] = 0;
        for (uint32_t b0 = 0; b0 < n; b0 += block) {
            const uint32_t b1 = n - b0 < block ? n : b0 + block;
            for (uint32_t j = b0; j < b1; j++) {
                double ss = 0;
                for (uint32_t d = 0; d < hd; d++) ss += (double)vkv_press_k_host(in, h, j, d) * vkv_press_k_host(in, h, j, d);
                if (ss > 0)
                    for (uint32_t d = 0; d < hd; d++) sum[d] += vkv_press_k_host(in, h, j, d) / sqrt(ss);
            }
            double aa = 0;
            for (uint32_t d = 0; d < hd; d++) {
                a[d] = sum[d] / b1;
                aa += a[d] * a[d];
            }
            for (uint32_t j = b0; j < b1; j++) {
                double ka = 0, kk = 0;
                for (uint32_t d = 0; d < hd; d++) {
                    double k = vkv_press_k_host(in, h, j, d);
                    ka += k * a[d];
                    kk += k * k;
                }
                scores[(size_t)h * n + j] = kk > 0 && aa > 0 ? (float)-(ka / (sqrt(kk) * sqrt(aa))) : 0.0f;
            }
        }
    }
    free(sum);
    free(a);
    return VKV_OK;
}

const vkv_press_ops vkv_press_keydiff = {
    .name = "keydiff",
    .window = 0,
    .query_aware = false,
    .keys_only = true,
    .score_gpu = keydiff_gpu,
    .score_ref = keydiff_ref,
    .scratch_bytes = keydiff_scratch_bytes,
};
