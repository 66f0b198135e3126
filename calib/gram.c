/* The gram op and the streamed accumulator of the calibration statistics.
 *
 * Per layer, each recorded chunk writes its sums into the layer's device
 * buffer (sections aligned for binding):
 *   G  [n_head_kv, d_k, d_k]  Σ k_h k_hᵀ          C  [n_head_kv, d_k, d_v]  Σ k_h v_hᵀ
 *   VV [n_head_kv, d_v, d_v]  Σ v_h v_hᵀ          VS [D_v]                  Σ v
 *   GJ [D_k, D_k], CJ [D_k, D_v]  the same over all heads jointly (optional)
 * and a copy of the buffer to a host-visible twin. The chunk's f32 sums are
 * added into the double accumulators of the chunk's set when the layer is
 * next recorded (the previous submit has completed by then: the forward
 * submits and waits per chunk) or at vkv_gram_accum_collect. */
#include <stdlib.h>
#include <string.h>

#include "calib/calib.h"
#include "vk/dispatch.h"

vkv_status vkv_op_gram(vkv_gpu *gpu, const vkv_gram_params *p, vkv_view x, vkv_view y, vkv_view out)
{
    const char *op = "gram";
    if (!p->m || !p->n || !p->n_blocks) return vkv_error(VKV_ERR_ARG, "gram: empty output (%u x %u x %u)", p->n_blocks, p->m, p->n);
    uint64_t out_bytes = 4ull * p->n_blocks * p->m * p->n;
    /* Floats up to the last element read (0 when there are no tokens). */
    uint64_t y_need = p->n_tok ? (uint64_t)(p->n_tok - 1) * p->ldy + p->y0 + (uint64_t)(p->n_blocks - 1) * p->y_step + p->n : 0;
    uint64_t x_need = p->n_tok && !p->x_ones ? (uint64_t)(p->n_tok - 1) * p->ldx + p->x0 + (uint64_t)(p->n_blocks - 1) * p->x_step + p->m : 0;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, out, out_bytes, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, out_bytes, op, "the output")) ||
        (st = vkv_ops_check_view(gpu, y, 4 * y_need, op, "y")) || (st = vkv_ops_check_single_range(gpu, 4 * y_need, op, "y")))
        return st;
    if (!p->x_ones &&
        ((st = vkv_ops_check_view(gpu, x, 4 * x_need, op, "x")) || (st = vkv_ops_check_single_range(gpu, 4 * x_need, op, "x"))))
        return st;
    if (p->x_ones) x = y; /* bound but not read */
    const vkv_caps *caps = vkv_gpu_caps(gpu);
    uint32_t gx = (p->m + 31) / 32, gy = (p->n + 31) / 32;
    if (gx > caps->max_workgroup_count[0] || gy > caps->max_workgroup_count[1] || p->n_blocks > caps->max_workgroup_count[2])
        return vkv_error(VKV_ERR_UNSUPPORTED, "gram: %u x %u x %u blocks exceed this device's workgroup counts", p->n_blocks,
                         p->m, p->n);
    vkv_pc_gram pc = {
        p->n_tok, p->m, p->n, p->ldx, p->ldy, p->x0, p->y0, p->x_step, p->y_step, p->x_ones};
    vkv_binding b[3] = {vkv_ops_bind(x, 0, x_need ? 4 * x_need : 4), vkv_ops_bind(y, 0, y_need ? 4 * y_need : 4),
                        vkv_ops_bind(out, 0, out_bytes)};
    return vkv_dispatch(gpu, VKV_K_GRAM, b, 3, &pc, gx, gy, p->n_blocks);
}

struct vkv_gram_accum {
    vkv_gpu *gpu;
    uint32_t n_layer, n_kv, dk, dv;
    bool joint;
    uint64_t off[6], layer_bytes;                /* byte offsets of G, C, VV, VS, GJ, CJ */
    size_t count[6];                             /* their float counts */
    vkv_buffer **dev, **host;                    /* per layer */
    bool *pending;                               /* per layer: a submitted chunk not yet added */
    vkv_calib_set *pending_set;
    uint32_t *pending_n;
    vkv_calib_set target;
    vkv_calib_sums *sums;                        /* [n_layer][2] */
};

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static double **section(vkv_calib_sums *cs, int i)
{
    double **p[6] = {&cs->g, &cs->c, &cs->vv, &cs->v_sum, &cs->g_joint, &cs->c_joint};
    return p[i];
}

vkv_status vkv_gram_accum_create(vkv_gpu *gpu, uint32_t n_layer, uint32_t n_kv, uint32_t dk, uint32_t dv, bool joint,
                                 vkv_gram_accum **out)
{
    *out = NULL;
    if (!n_layer || !n_kv || !dk || !dv) return vkv_error(VKV_ERR_ARG, "gram accumulator: empty shape");
    vkv_gram_accum *a = calloc(1, sizeof *a);
    if (!a) return vkv_error(VKV_ERR_OOM, "out of host memory");
    a->gpu = gpu;
    a->n_layer = n_layer;
    a->n_kv = n_kv;
    a->dk = dk;
    a->dv = dv;
    a->joint = joint;
    uint64_t al = vkv_gpu_caps(gpu)->min_storage_buffer_offset_alignment;
    if (al < 16) al = 16;
    size_t Dk = (size_t)n_kv * dk, Dv = (size_t)n_kv * dv;
    size_t count[6] = {(size_t)n_kv * dk * dk, (size_t)n_kv * dk * dv, (size_t)n_kv * dv * dv, Dv,
                       joint ? Dk * Dk : 0, joint ? Dk * Dv : 0};
    uint64_t off = 0;
    for (int i = 0; i < 6; i++) {
        a->count[i] = count[i];
        a->off[i] = off;
        off = round_up(off + 4 * count[i], al);
    }
    a->layer_bytes = off;
    vkv_status st = VKV_OK;
    if (!(a->dev = calloc(n_layer, sizeof *a->dev)) || !(a->host = calloc(n_layer, sizeof *a->host)) ||
        !(a->pending = calloc(n_layer, sizeof *a->pending)) || !(a->pending_set = calloc(n_layer, sizeof *a->pending_set)) ||
        !(a->pending_n = calloc(n_layer, sizeof *a->pending_n)) || !(a->sums = calloc(2ull * n_layer, sizeof *a->sums))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    for (uint32_t l = 0; l < n_layer; l++) {
        if ((st = vkv_buffer_create(gpu, a->layer_bytes, VKV_MEM_DEVICE, "calibration sums", &a->dev[l])) ||
            (st = vkv_buffer_create(gpu, a->layer_bytes, VKV_MEM_HOST, "calibration sums readback", &a->host[l])))
            goto error;
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 6; i++) {
                if (!count[i]) continue;
                if (!(*section(&a->sums[2 * l + s], i) = calloc(count[i], sizeof(double)))) {
                    st = vkv_error(VKV_ERR_OOM, "out of host memory for the calibration sums (%u layers, D_k %zu%s)",
                                   n_layer, Dk, joint ? ", joint map" : "");
                    goto error;
                }
            }
    }
    *out = a;
    return VKV_OK;
error:
    vkv_gram_accum_free(a);
    return st;
}

void vkv_gram_accum_free(vkv_gram_accum *a)
{
    if (!a) return;
    for (uint32_t l = 0; l < a->n_layer; l++) {
        if (a->dev) vkv_buffer_destroy(a->gpu, a->dev[l]);
        if (a->host) vkv_buffer_destroy(a->gpu, a->host[l]);
        if (a->sums)
            for (int s = 0; s < 2; s++)
                for (int i = 0; i < 6; i++) free(*section(&a->sums[2 * l + s], i));
    }
    free(a->dev);
    free(a->host);
    free(a->pending);
    free(a->pending_set);
    free(a->pending_n);
    free(a->sums);
    free(a);
}

void vkv_gram_accum_set_target(vkv_gram_accum *a, vkv_calib_set s) { a->target = s; }

const vkv_calib_sums *vkv_gram_accum_sums(const vkv_gram_accum *a, uint32_t layer, vkv_calib_set s)
{
    return layer < a->n_layer ? &a->sums[2 * layer + s] : NULL;
}

static void fold(vkv_gram_accum *a, uint32_t l)
{
    if (!a->pending[l]) return;
    const uint8_t *h = vkv_buffer_map(a->host[l]);
    vkv_calib_sums *cs = &a->sums[2 * l + a->pending_set[l]];
    for (int i = 0; i < 6; i++) {
        const float *src = (const float *)(h + a->off[i]);
        double *dst = *section(cs, i);
        for (size_t e = 0; e < a->count[i]; e++) dst[e] += src[e];
    }
    cs->n += a->pending_n[l];
    a->pending[l] = false;
}

void vkv_gram_accum_collect(vkv_gram_accum *a)
{
    for (uint32_t l = 0; l < a->n_layer; l++) fold(a, l);
}

vkv_status vkv_gram_accum_record(vkv_gram_accum *a, uint32_t l, vkv_view k, vkv_view v, uint32_t n_tok)
{
    if (l >= a->n_layer) return vkv_error(VKV_ERR_ARG, "gram accumulator: layer %u of %u", l, a->n_layer);
    fold(a, l);
    uint32_t Dk = a->n_kv * a->dk, Dv = a->n_kv * a->dv, H = a->n_kv, dk = a->dk, dv = a->dv;
    const vkv_buffer *d = a->dev[l];
    /* Per head: blocks of [d_k, d_k], [d_k, d_v], [d_v, d_v]; then Σ v; then
     * the joint [D_k, D_k] and [D_k, D_v]. */
    vkv_gram_params p[6] = {
        {.n_tok = n_tok, .m = dk, .n = dk, .ldx = Dk, .ldy = Dk, .x_step = dk, .y_step = dk, .n_blocks = H},
        {.n_tok = n_tok, .m = dk, .n = dv, .ldx = Dk, .ldy = Dv, .x_step = dk, .y_step = dv, .n_blocks = H},
        {.n_tok = n_tok, .m = dv, .n = dv, .ldx = Dv, .ldy = Dv, .x_step = dv, .y_step = dv, .n_blocks = H},
        {.n_tok = n_tok, .m = 1, .n = Dv, .ldy = Dv, .n_blocks = 1, .x_ones = true},
        {.n_tok = n_tok, .m = Dk, .n = Dk, .ldx = Dk, .ldy = Dk, .n_blocks = 1},
        {.n_tok = n_tok, .m = Dk, .n = Dv, .ldx = Dk, .ldy = Dv, .n_blocks = 1},
    };
    vkv_view xs[6] = {k, k, v, v, k, k}, ys[6] = {k, v, v, v, k, v};
    vkv_status st;
    for (int i = 0; i < (a->joint ? 6 : 4); i++)
        if ((st = vkv_op_gram(a->gpu, &p[i], xs[i], ys[i], (vkv_view){d, a->off[i]}))) return st;
    if ((st = vkv_cmd_copy(a->gpu, a->dev[l], 0, a->host[l], 0, a->layer_bytes))) return st;
    a->pending[l] = true;
    a->pending_set[l] = a->target;
    a->pending_n[l] = n_tok;
    return VKV_OK;
}

vkv_status vkv_gram_accum_hook(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view k_pre_rope, vkv_view v,
                               uint32_t n_tok, uint32_t pos0)
{
    (void)gpu;
    (void)pos0;
    return vkv_gram_accum_record(user, layer, k_pre_rope, v, n_tok);
}

bool vkv_calib_joint_default(const vkv_hparams *hp) { return (uint64_t)hp->n_head_kv * hp->head_dim <= 2048; }
