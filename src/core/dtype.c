/* Type table and the CPU codecs of every supported tensor type.
 *
 * Decoders reproduce ggml's dequantize_row_* operation for operation (same
 * float expression order), so a GPU shader that decodes like ggml can be
 * compared to them tightly. Encoders follow ggml's *_ref quantizers. Block
 * pointers must be 2-byte aligned (GGUF aligns tensor data to 32). */
#include "core/dtype.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "core/fp16.h"

/* ---------------------------------------------------------------- table */

static const vkv_dtype_info dtype_f32 = {"f32", 1, 4};
static const vkv_dtype_info dtype_f16 = {"f16", 1, 2};
static const vkv_dtype_info dtype_bf16 = {"bf16", 1, 2};
static const vkv_dtype_info dtype_q4_0 = {"q4_0", VKV_QK4_0, sizeof(vkv_block_q4_0)};
static const vkv_dtype_info dtype_q8_0 = {"q8_0", VKV_QK8_0, sizeof(vkv_block_q8_0)};
static const vkv_dtype_info dtype_q4_K = {"q4_K", VKV_QK_K, sizeof(vkv_block_q4_K)};
static const vkv_dtype_info dtype_q6_K = {"q6_K", VKV_QK_K, sizeof(vkv_block_q6_K)};

const vkv_dtype_info *vkv_dtype_get(uint32_t type)
{
    switch (type) {
    case VKV_F32: return &dtype_f32;
    case VKV_F16: return &dtype_f16;
    case VKV_Q4_0: return &dtype_q4_0;
    case VKV_Q8_0: return &dtype_q8_0;
    case VKV_Q4_K: return &dtype_q4_K;
    case VKV_Q6_K: return &dtype_q6_K;
    case VKV_BF16: return &dtype_bf16;
    }
    return NULL;
}

static bool name_equal_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

int vkv_dtype_from_name(const char *name)
{
    static const vkv_dtype all[] = {VKV_F32, VKV_F16, VKV_Q4_0, VKV_Q8_0, VKV_Q4_K, VKV_Q6_K,
                                    VKV_BF16};
    if (!name) return -1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (name_equal_nocase(name, vkv_dtype_get(all[i])->name)) return (int)all[i];
    return -1;
}

size_t vkv_dtype_row_bytes(vkv_dtype t, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    if (!info || n % info->block_size) return 0;
    return (size_t)(n / info->block_size * info->block_bytes);
}

/* ------------------------------------------------------------- decoders */

/* Scale j and min j (6 bits each) of a q4_K block: sub-blocks 0-3 keep theirs
 * in the low 6 bits of scales[j] / scales[j+4]; sub-blocks 4-7 keep their low
 * 4 bits in the nibbles of scales[j+4] and their top 2 bits in the spare top
 * bits of scales[j-4] (scale) and scales[j] (min). */
static void q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void dequantize_q4_0(const vkv_block_q4_0 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) {
        const float d = vkv_fp16_to_f32(b[i].d);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) {
            y[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            y[j + VKV_QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequantize_q8_0(const vkv_block_q8_0 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK8_0) {
        const float d = vkv_fp16_to_f32(b[i].d);
        for (int j = 0; j < VKV_QK8_0; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

/* Each 64 elements share 32 bytes of qs: low nibbles are sub-block 2k,
 * high nibbles sub-block 2k+1. */
static void dequantize_q4_K(const vkv_block_q4_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d);
        const float dmin = vkv_fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < VKV_QK_K / 64; j++, q += 32) {
            uint8_t sc, m;
            q4_K_scale_min(2 * j, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            q4_K_scale_min(2 * j + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Each 128-element half uses 64 bytes of ql and 32 of qh. Element l (< 32)
 * of quadrant k (element index 32k + l) takes its low 4 bits from
 * ql[l + 32*(k&1)] (low nibble for k < 2, high nibble otherwise) and its top
 * 2 bits from bits 2k..2k+1 of qh[l]. Scales are per 16 elements. */
static void dequantize_q6_K(const vkv_block_q6_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * (float)q1;
                y[l + 32] = d * sc[is + 2] * (float)q2;
                y[l + 64] = d * sc[is + 4] * (float)q3;
                y[l + 96] = d * sc[is + 6] * (float)q4;
            }
        }
    }
}

void vkv_dequantize_row(vkv_dtype t, const void *src, float *dst, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    assert(info && n % info->block_size == 0);
    if (!info) return;
    const uint64_t nb = n / info->block_size;
    switch (t) {
    case VKV_F32: memcpy(dst, src, n * sizeof(float)); break;
    case VKV_F16: {
        const uint16_t *h = src;
        for (uint64_t i = 0; i < n; i++) dst[i] = vkv_fp16_to_f32(h[i]);
        break;
    }
    case VKV_BF16: {
        const uint16_t *h = src;
        for (uint64_t i = 0; i < n; i++) dst[i] = vkv_bf16_to_f32(h[i]);
        break;
    }
    case VKV_Q4_0: dequantize_q4_0(src, dst, nb); break;
    case VKV_Q8_0: dequantize_q8_0(src, dst, nb); break;
    case VKV_Q4_K: dequantize_q4_K(src, dst, nb); break;
    case VKV_Q6_K: dequantize_q6_K(src, dst, nb); break;
    }
}

/* ------------------------------------------------------------- encoders */

/* Round half to even through the float adder, as ggml's nearest_int does
 * (valid for |x| < 2^22; every caller stays far below). */
static int nearest_int(float x)
{
    assert(fabsf(x) <= 4194303.f);
    float v = x + 12582912.f; /* 1.5 * 2^23: the integer lands in the low mantissa bits */
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* d = signed max / -8 so the largest magnitude maps exactly to q = 0. */
static void quantize_q4_0(const float *x, vkv_block_q4_0 *b, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < VKV_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vkv_f32_to_fp16(d);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) {
            /* x*id is in [-8, 8]; truncating x*id + 8.5 rounds to nearest */
            const int q0 = clampi((int)(x[j] * id + 8.5f), 0, 15);
            const int q1 = clampi((int)(x[j + VKV_QK4_0 / 2] * id + 8.5f), 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void quantize_q8_0(const float *x, vkv_block_q8_0 *b, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < VKV_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vkv_f32_to_fp16(d);
        for (int j = 0; j < VKV_QK8_0; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* Fits x ~ scale*L - min with L in [0, nmax] (ggml's make_qkx2_quants):
 * starts from the min/max grid, then tries nstep+1 stretched grids and keeps
 * the weighted least-squares fit of scale and min with the lowest error.
 * Returns scale; *the_min >= 0 is the subtracted offset. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep)
{
    uint8_t Laux[32];
    assert(n <= 32);
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0; /* the offset only ever lowers the grid */
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * Laux[i] + this_min - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* ggml's quantize_row_q4_K_ref: fit each sub-block of 32, quantize the eight
 * scales and mins to 6 bits against the block maxima, then requantize the
 * elements with the scales actually stored. */
static void quantize_q4_K(const float *x, vkv_block_q4_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    float w[32], scales[8], mins[8];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; j++) {
            const float *xs = x + 32 * j;
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
            scales[j] = fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int j = 0; j < 8; j++) {
            const int ls = clampi(nearest_int(inv_scale * scales[j]), 0, 63);
            const int lm = clampi(nearest_int(inv_min * mins[j]), 0, 63);
            if (j < 4) {
                b[i].scales[j] = (uint8_t)ls;
                b[i].scales[j + 4] = (uint8_t)lm;
            } else {
                b[i].scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                b[i].scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
                b[i].scales[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        b[i].d = vkv_f32_to_fp16(max_scale / 63.0f);
        b[i].dmin = vkv_f32_to_fp16(max_min / 63.0f);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            q4_K_scale_min(j, b[i].scales, &sc, &m);
            const float d = vkv_fp16_to_f32(b[i].d) * sc;
            if (d == 0.0f) continue; /* keep the fit's L: every value decodes to -dm */
            const float dm = vkv_fp16_to_f32(b[i].dmin) * m;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)clampi(nearest_int((x[32 * j + l] + dm) / d), 0, 15);
        }
        uint8_t *q = b[i].qs;
        for (int j = 0; j < VKV_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* Symmetric fit x ~ scale*(L - nmax), L in [0, 2*nmax) (ggml's make_qx_quants
 * with weights x^2): tries 19 grids around -nmax/max and keeps the one whose
 * least-squares scale explains the most of x. The sign of scale is opposite
 * to the signed max, so the extreme value lands on -nmax. */
static float fit_scale_symmetric(int n, int nmax, const float *x, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 > 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ggml's quantize_row_q6_K_ref: fit each sub-block of 16, store the sixteen
 * scales as int8 against the largest, requantize with the stored scales. */
static void quantize_q6_K(const float *x, vkv_block_q6_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    float scales[VKV_QK_K / 16];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < VKV_QK_K / 16; ib++) {
            scales[ib] = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (max_abs_scale < 1e-15f) continue; /* all zero: d = 0 decodes to zeros */
        const float iscale = -128.0f / max_scale;
        b[i].d = vkv_f32_to_fp16(1 / iscale);
        for (int ib = 0; ib < VKV_QK_K / 16; ib++)
            b[i].scales[ib] = (int8_t)clampi(nearest_int(iscale * scales[ib]), -128, 127);
        for (int j = 0; j < VKV_QK_K / 16; j++) {
            const float d = vkv_fp16_to_f32(b[i].d) * b[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(clampi(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int j = 0; j < VKV_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t *q = L + j + l; /* quadrants at q[0], q[32], q[64], q[96] */
                ql[l] = (uint8_t)((q[0] & 0xF) | ((q[64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q[32] & 0xF) | ((q[96] & 0xF) << 4));
                qh[l] = (uint8_t)((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) |
                                  ((q[96] >> 4) << 6));
            }
        }
    }
}

void vkv_quantize_row(vkv_dtype t, const float *src, void *dst, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    assert(info && n % info->block_size == 0);
    if (!info) return;
    const uint64_t nb = n / info->block_size;
    switch (t) {
    case VKV_F32: memcpy(dst, src, n * sizeof(float)); break;
    case VKV_F16: {
        uint16_t *h = dst;
        for (uint64_t i = 0; i < n; i++) h[i] = vkv_f32_to_fp16(src[i]);
        break;
    }
    case VKV_BF16: {
        uint16_t *h = dst;
        for (uint64_t i = 0; i < n; i++) h[i] = vkv_f32_to_bf16(src[i]);
        break;
    }
    case VKV_Q4_0: quantize_q4_0(src, dst, nb); break;
    case VKV_Q8_0: quantize_q8_0(src, dst, nb); break;
    case VKV_Q4_K: quantize_q4_K(src, dst, nb); break;
    case VKV_Q6_K: quantize_q6_K(src, dst, nb); break;
    }
}
