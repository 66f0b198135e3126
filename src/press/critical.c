/* CriticalKV (kvpress's CriticalKVPress, epsilon 1e-4, first_stage_ratio 0.5)
 * over an inner scorer: two stages per KV head h of a layer of n tokens.
 *   1. the int((1 - p_c) n 0.5) highest inner scores are kept whatever follows
 *      (forced to +inf; kvpress: the dtype's max);
 *   2. every other score becomes (score + epsilon) vnorm[h, j], where vnorm is
 *      the L1 norm of the value projected through the attention output:
 *        vnorm[h, j] = mean over the query heads q of h's group of
 *                      sum_c |sum_d V[h, j, d] W_o[c, q head_dim + d]|
 *      (W_o [n_embd, n_head head_dim], the model's o_proj: the value's
 *      contribution to the residual stream through head q).
 * The driver then keeps each head's n_kept highest, as for any scorer. The
 * inner scorer's own +inf (SnapKV's window) stay +inf through stage 2, where
 * kvpress's padding with the maximum score gives finite products; both keep
 * them. GPU: the inner scorer into the scratch, vkv_op_topk_select (stage 1),
 * then shaders/press_critical.comp (stage 2 and the merge); the CPU reference's
 * norm is vkv_ref_projected_value_norm (src/ref/ref_attn.c). */
#include "press/press_internal.h"

#include <math.h>
#include <stdlib.h>

#include "ref/ref_attn.h"
#include "ref/ref_select.h"
#include "vk/ops_select.h"

#define CRITICAL_EPSILON 1e-4
#define CRITICAL_FIRST_STAGE_RATIO 0.5

/* int((1 - p_c) * n * first_stage_ratio), left to right in double as Python. */
static uint32_t first_stage_budget(const vkv_press_params *p, uint32_t n)
{
    return (uint32_t)((1.0 - p->compression_ratio) * n * CRITICAL_FIRST_STAGE_RATIO);
}

static uint64_t inner_offset(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_press_align_up(vkv_press_scratch_bytes(inner, p, in));
}

/* Scratch: the inner scorer's, the inner scores [H, n] f32, the first stage's mask [H, n] uint32. */
static uint64_t critical_scratch_bytes(const vkv_press_ops *inner, const vkv_press_params *p, const vkv_press_layer *in)
{
    return inner_offset(inner, p, in) + 2 * vkv_press_align_up(4ull * in->n_kv_head * in->n);
}

static vkv_status critical_check(const vkv_press_params *p, const vkv_press_layer *in, const char *name)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    if (!in->n_embd) return vkv_error(VKV_ERR_ARG, "%s: no output projection W_o was given", name);
    return VKV_OK;
}

static vkv_status critical_gpu(const vkv_press_ops *inner, const char *name, vkv_gpu *gpu, const vkv_press_params *p,
                               const vkv_press_layer *in, vkv_view scores)
{
    const uint64_t es = in->kv_type == VKV_F16 ? 2 : 4;
    const uint64_t v_bytes = es * in->head_dim * ((uint64_t)in->n_ctx * (in->n_kv_head - 1) + in->n);
    const uint64_t wo_bytes = 4ull * in->n_embd * in->n_head * in->head_dim, hn4 = 4ull * in->n_kv_head * in->n;
    vkv_status st;
    uint32_t gx;
    const vkv_kernel k = in->kv_type == VKV_F16 ? VKV_K_PRESS_CRITICAL_F16 : VKV_K_PRESS_CRITICAL_F32;
    if ((st = critical_check(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_press_check_scratch(gpu, in, critical_scratch_bytes(inner, p, in), name)) ||
        (st = vkv_ops_check_view(gpu, in->v, v_bytes, name, "the V cache")) ||
        (st = vkv_ops_check_single_range(gpu, v_bytes, name, "the V cache")) ||
        (st = vkv_ops_check_view(gpu, in->wo, wo_bytes, name, "W_o")) ||
        (st = vkv_ops_check_single_range(gpu, wo_bytes, name, "W_o")) ||
        (st = vkv_press_groups_x(gpu, k, in->n, name, &gx)))
        return st;
    const uint64_t off = inner_offset(inner, p, in);
    vkv_view raw = vkv_press_scratch_at(in, off), first = vkv_press_scratch_at(in, off + vkv_press_align_up(hn4));
    if ((st = inner->score_gpu(gpu, p, in, raw)) ||
        (st = vkv_op_topk_select(gpu, raw, in->n_kv_head, in->n, (vkv_view){0}, first_stage_budget(p, in->n), first)))
        return st;
    vkv_pc_press_critical pc = {in->n, in->n_ctx, in->head_dim, in->n_embd, in->n_head / in->n_kv_head, in->n_head,
                                (float)CRITICAL_EPSILON};
    vkv_binding b[5] = {vkv_ops_bind(in->v, 0, v_bytes), vkv_ops_bind(in->wo, 0, wo_bytes), vkv_ops_bind(raw, 0, hn4),
                        vkv_ops_bind(first, 0, hn4), vkv_ops_bind(scores, 0, hn4)};
    return vkv_dispatch(gpu, k, b, 5, &pc, gx, in->n_kv_head, 1);
}

static vkv_status critical_ref(const vkv_press_ops *inner, const char *name, const vkv_press_params *p,
                               const vkv_press_layer *in, float *scores)
{
    vkv_status st = critical_check(p, in, name);
    if (st) return st;
    if (!in->wo_host || !in->v_host) return vkv_error(VKV_ERR_ARG, "%s: no host copy of W_o or of the values", name);
    const size_t hn = (size_t)in->n_kv_head * in->n;
    float *raw = malloc(sizeof *raw * hn);          /* [H, n] the inner scores */
    uint32_t *first = malloc(sizeof *first * hn);   /* [H, n] the first stage's picks */
    if (!raw || !first) {
        st = vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
        goto done;
    }
    if ((st = inner->score_ref(p, in, raw)) ||
        (st = vkv_ref_topk_select(raw, in->n_kv_head, in->n, NULL, first_stage_budget(p, in->n), first)))
        goto done;
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++) {
            const size_t o = (size_t)h * in->n + j;
            scores[o] = first[o] ? INFINITY
                                 : (float)(((double)raw[o] + CRITICAL_EPSILON) *
                                           vkv_ref_projected_value_norm(in->kv_type, in->v_host, in->n_ctx, in->head_dim,
                                                                        in->n_head, in->n_kv_head, in->n_embd,
                                                                        in->wo_host, h, j));
        }
done:
    free(raw);
    free(first);
    return st;
}

/* One press per inner scorer: "critical-<inner>" (kvpress's evaluation names critical_<inner>). */
#define CRITICAL_PRESS(id, inner_ops, label) \
    VKV_PRESS_WRAPPER(id, inner_ops, label, critical_gpu, critical_ref, critical_scratch_bytes)

CRITICAL_PRESS(critical_snapkv, vkv_press_snapkv, "critical-snapkv")
CRITICAL_PRESS(critical_keydiff, vkv_press_keydiff, "critical-keydiff")

/* The window and mode are the inner scorer's (press/snapkv.c, keydiff.c). */
const vkv_press_ops vkv_press_critical_snapkv = {
    .name = "critical-snapkv",
    .window = 64,
    .query_aware = true,
    .score_gpu = critical_snapkv_gpu,
    .score_ref = critical_snapkv_ref,
    .scratch_bytes = critical_snapkv_scratch,
    .needs_wo = true,
};

const vkv_press_ops vkv_press_critical_keydiff = {
    .name = "critical-keydiff",
    .window = 0,
    .query_aware = false,
    .score_gpu = critical_keydiff_gpu,
    .score_ref = critical_keydiff_ref,
    .scratch_bytes = critical_keydiff_scratch,
    .needs_wo = true,
};
