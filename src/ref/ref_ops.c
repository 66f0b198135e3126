/* Scalar CPU reference ops (see ref_ops.h). Sums run in double, in index
 * order, so results are deterministic and at least as accurate as any
 * shader's; nothing here allocates. */
#include "ref/ref_ops.h"
#include "core/fp16.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

void vkv_ref_get_rows(vkv_dtype t, const void *table, uint64_t n_cols, const int32_t *ids,
                      uint32_t n_ids, float *out)
{
    const size_t row_bytes = vkv_dtype_row_bytes(t, n_cols);
    assert(row_bytes > 0 || n_cols == 0);
    for (uint32_t i = 0; i < n_ids; i++) {
        assert(ids[i] >= 0);
        const uint8_t *row = (const uint8_t *)table + (size_t)ids[i] * row_bytes;
        vkv_dequantize_row(t, row, out + (size_t)i * n_cols, n_cols);
    }
}

void vkv_ref_rms_norm(const float *x, const float *w, uint32_t rows, uint32_t n, float eps,
                      float *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *yr = out + (size_t)r * n;
        double sum2 = 0.0;
        for (uint32_t i = 0; i < n; i++) sum2 += (double)xr[i] * xr[i];
        const double scale = 1.0 / sqrt(sum2 / n + eps);
        for (uint32_t i = 0; i < n; i++) yr[i] = (float)(xr[i] * scale * (w ? w[i] : 1.0));
    }
}

/* W is decoded in chunks of up to 256 elements (a multiple of every block
 * size) into a stack buffer, for tiles of up to 64 rows of x at a time:
 * bounded memory, and each weight row is decoded only ceil(N/64) times. */
#define MATMUL_CHUNK 256
#define MATMUL_TILE 64

void vkv_ref_matmul(vkv_dtype t, const void *w, uint32_t m, uint32_t k, const float *x,
                    uint32_t n, float *y)
{
    const size_t row_bytes = vkv_dtype_row_bytes(t, k);
    const vkv_dtype_info *info = vkv_dtype_get(t);
    assert(info && (row_bytes > 0 || k == 0));
    float wbuf[MATMUL_CHUNK];   /* [chunk] decoded slice of one weight row */
    double acc[MATMUL_TILE];    /* [tile] dot products of x rows n0.. with weight row r */
    for (uint32_t r = 0; r < m; r++) {
        const uint8_t *wrow = (const uint8_t *)w + (size_t)r * row_bytes;
        for (uint32_t n0 = 0; n0 < n; n0 += MATMUL_TILE) {
            const uint32_t nt = n - n0 < MATMUL_TILE ? n - n0 : MATMUL_TILE;
            for (uint32_t i = 0; i < nt; i++) acc[i] = 0.0;
            for (uint32_t k0 = 0; k0 < k; k0 += MATMUL_CHUNK) {
                const uint32_t kc = k - k0 < MATMUL_CHUNK ? k - k0 : MATMUL_CHUNK;
                const size_t off = (size_t)k0 / info->block_size * info->block_bytes;
                vkv_dequantize_row(t, wrow + off, wbuf, kc);
                for (uint32_t i = 0; i < nt; i++) {
                    const float *xr = x + (size_t)(n0 + i) * k + k0;
                    double s = acc[i];
                    for (uint32_t j = 0; j < kc; j++) s += (double)xr[j] * wbuf[j];
                    acc[i] = s;
                }
            }
            for (uint32_t i = 0; i < nt; i++) y[(size_t)(n0 + i) * m + r] = (float)acc[i];
        }
    }
}

void vkv_ref_rope(const vkv_rope_params *p, const float *x, uint32_t n_tok, uint32_t n_heads,
                  const int32_t *pos, float *out)
{
    assert(p->n_rot % 2 == 0 && p->n_rot <= p->head_dim);
    assert(p->mode == VKV_ROPE_INTERLEAVED || p->mode == VKV_ROPE_NEOX);
    const uint32_t half = p->n_rot / 2;
    const double sign = p->inverse ? -1.0 : 1.0;
    for (uint32_t t = 0; t < n_tok; t++) {
        for (uint32_t h = 0; h < n_heads; h++) {
            const size_t base = ((size_t)t * n_heads + h) * p->head_dim;
            const float *xh = x + base;
            float *yh = out + base;
            for (uint32_t i = 0; i < half; i++) {
                const double theta = sign * vkv_rope_theta(p, pos[t], i);
                const double c = cos(theta), s = sin(theta);
                /* index of the pair's first and second element */
                const uint32_t i0 = p->mode == VKV_ROPE_NEOX ? i : 2 * i;
                const uint32_t i1 = p->mode == VKV_ROPE_NEOX ? i + half : 2 * i + 1;
                const double x0 = xh[i0], x1 = xh[i1]; /* read both first: out may be x */
                yh[i0] = (float)(x0 * c - x1 * s);
                yh[i1] = (float)(x0 * s + x1 * c);
            }
            if (yh != xh)
                for (uint32_t i = p->n_rot; i < p->head_dim; i++) yh[i] = xh[i];
        }
    }
}

/* A row whose visible logits are all -inf has no finite maximum to subtract;
 * like a row that sees nothing it yields zeros rather than NaN. */
void vkv_ref_softmax(const float *x, uint32_t rows, uint32_t cols, float scale, bool causal,
                     int32_t causal_offset, float *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = out + (size_t)r * cols;
        uint32_t n_vis = cols; /* columns [0, n_vis) are visible */
        if (causal) {
            const int64_t last = (int64_t)r + causal_offset;
            n_vis = last < 0 ? 0 : last + 1 < (int64_t)cols ? (uint32_t)(last + 1) : cols;
        }
        double max = -INFINITY;
        for (uint32_t j = 0; j < n_vis; j++) max = fmax(max, (double)scale * xr[j]);
        if (max == -INFINITY) { /* nothing visible (or all -inf): all zeros */
            for (uint32_t j = 0; j < cols; j++) yr[j] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (uint32_t j = 0; j < n_vis; j++) sum += exp((double)scale * xr[j] - max);
        for (uint32_t j = 0; j < n_vis; j++) yr[j] = (float)(exp((double)scale * xr[j] - max) / sum);
        for (uint32_t j = n_vis; j < cols; j++) yr[j] = 0.0f;
    }
}

void vkv_ref_silu_mul(const float *gate, const float *up, uint32_t n, float *out)
{
    for (uint32_t i = 0; i < n; i++) {
        const double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
    }
}

void vkv_ref_add(const float *a, const float *b, uint32_t n, float *out)
{
    for (uint32_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* Strictly-greater comparison keeps the first of equal maxima; NaNs never win. */
void vkv_ref_argmax(const float *x, uint32_t rows, uint32_t n, uint32_t *out)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        uint32_t best = 0;
        for (uint32_t j = 1; j < n; j++)
            if (xr[j] > xr[best] || (isnan(xr[best]) && !isnan(xr[j]))) best = j;
        out[r] = best;
    }
}

void vkv_ref_add_bias(const float *a, const float *bias, uint32_t rows, uint32_t width, float *out)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < width; i++) out[(size_t)r * width + i] = a[(size_t)r * width + i] + bias[i];
}
