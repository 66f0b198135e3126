/* Scalar CPU reference of causal GQA attention (see ref_attn.h). Two passes
 * per (query, head): the max score, then exp-weights and the weighted sum of
 * V, all in double and in slot order; scores are recomputed rather than
 * stored so nothing here allocates. */
#include "ref/ref_attn.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/fp16.h"

#define REF_ATTN_MAX_HEAD_DIM 256

float vkv_kv_cache_get(vkv_dtype t, const void *cache, uint32_t n_ctx_max, uint32_t head_dim, uint32_t h, uint32_t j,
                       uint32_t d)
{
    size_t row = (size_t)h * n_ctx_max + j;
    return vkv_kv_row_get(t, head_dim, (const uint8_t *)cache + row * vkv_kv_row_bytes(t, head_dim), d);
}

void vkv_kv_cache_store(vkv_dtype t, void *cache, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim,
                        uint32_t slot0, const float *src, uint32_t n_tok)
{
    assert(vkv_kv_type_ok(t));
    assert(slot0 <= n_ctx_max && n_tok <= n_ctx_max - slot0);
    const size_t row_bytes = vkv_kv_row_bytes(t, head_dim);
    for (uint32_t s = 0; s < n_tok; s++)
        for (uint32_t h = 0; h < n_kv_head; h++) {
            const float *x = src + ((size_t)s * n_kv_head + h) * head_dim;  /* [head_dim] */
            size_t row = (size_t)h * n_ctx_max + slot0 + s;                   /* cache row */
            vkv_kv_encode_row(t, head_dim, x, (uint8_t *)cache + row * row_bytes);
        }
}

static double dot_q_k(const vkv_attn_params *p, const float *qh, const void *k, uint32_t kh, uint32_t j)
{
    double s = 0.0;
    for (uint32_t d = 0; d < p->head_dim; d++)
        s += (double)qh[d] * vkv_kv_cache_get(p->k_type, k, p->n_ctx_max, p->head_dim, kh, j, d);
    return s * p->scale;
}

void vkv_ref_attention(const vkv_attn_params *p, const float *q, const void *k, const void *v, float *out)
{
    assert(p->n_kv_head && p->n_head % p->n_kv_head == 0);
    assert(p->head_dim <= REF_ATTN_MAX_HEAD_DIM && p->n_kv <= p->n_ctx_max);
    const uint32_t group = p->n_head / p->n_kv_head, hd = p->head_dim;
    double acc[REF_ATTN_MAX_HEAD_DIM]; /* [head_dim] sum of weight * v */
    for (uint32_t i = 0; i < p->n_q; i++) {
        /* Slots visible to query i: j <= pos0 + i, and j < n_kv. */
        uint64_t last = (uint64_t)p->pos0 + i;
        uint32_t n_vis = last + 1 < p->n_kv ? (uint32_t)(last + 1) : p->n_kv;
        for (uint32_t h = 0; h < p->n_head; h++) {
            const float *qh = q + ((size_t)i * p->n_head + h) * hd; /* [head_dim] */
            float *oh = out + ((size_t)i * p->n_head + h) * hd;     /* [head_dim] */
            const uint32_t kh = h / group;
            if (n_vis == 0) {
                memset(oh, 0, hd * sizeof *oh);
                continue;
            }
            double mx = -INFINITY;
            for (uint32_t j = 0; j < n_vis; j++) {
                double s = dot_q_k(p, qh, k, kh, j);
                if (s > mx) mx = s;
            }
            double sum = 0.0;
            for (uint32_t d = 0; d < hd; d++) acc[d] = 0.0;
            for (uint32_t j = 0; j < n_vis; j++) {
                double w = exp(dot_q_k(p, qh, k, kh, j) - mx);
                sum += w;
                for (uint32_t d = 0; d < hd; d++)
                    acc[d] += w * vkv_kv_cache_get(p->v_type, v, p->n_ctx_max, hd, kh, j, d);
            }
            for (uint32_t d = 0; d < hd; d++) oh[d] = (float)(acc[d] / sum);
        }
    }
}

double vkv_ref_projected_value_norm(vkv_dtype t, const void *v, uint32_t n_ctx, uint32_t hd, uint32_t n_head,
                                    uint32_t n_kv_head, uint32_t n_embd, const float *wo, uint32_t h, uint32_t j)
{
    const uint32_t group = n_head / n_kv_head, cols = n_head * hd;
    double l1 = 0;
    for (uint32_t g = 0; g < group; g++)
        for (uint32_t c = 0; c < n_embd; c++) {
            const float *w = wo + (size_t)c * cols + (size_t)(h * group + g) * hd; /* [hd] head q's columns of row c */
            double acc = 0;
            for (uint32_t d = 0; d < hd; d++) acc += (double)vkv_kv_cache_get(t, v, n_ctx, hd, h, j, d) * w[d];
            l1 += fabs(acc);
        }
    return l1 / group;
}

/* Byte of slot j of KV head h in a paged cache (ref_attn.h). */
static uint64_t paged_row(vkv_dtype t, const uint64_t *pages, uint64_t head_bytes, uint32_t page_shift,
                          uint32_t head_dim, uint32_t h, uint32_t j)
{
    return pages[j >> page_shift] + h * head_bytes + (j & ((1u << page_shift) - 1)) * vkv_kv_row_bytes(t, head_dim);
}

void vkv_ref_paged_gather(vkv_dtype t, const void *pool, const uint64_t *pages, uint64_t head_bytes,
                          uint32_t page_shift, uint32_t n_kv_head, uint32_t head_dim, uint32_t n_kv, void *cache)
{
    const size_t rb = vkv_kv_row_bytes(t, head_dim);
    for (uint32_t h = 0; h < n_kv_head; h++)
        for (uint32_t j = 0; j < n_kv; j++)
            memcpy((char *)cache + ((size_t)h * n_kv + j) * rb,
                   (const char *)pool + paged_row(t, pages, head_bytes, page_shift, head_dim, h, j), rb);
}

void vkv_ref_paged_store(vkv_dtype t, void *pool, const uint64_t *pages, uint64_t head_bytes, uint32_t page_shift,
                         uint32_t n_kv_head, uint32_t head_dim, uint32_t slot, const float *src)
{
    for (uint32_t h = 0; h < n_kv_head; h++)
        vkv_kv_encode_row(t, head_dim, src + (size_t)h * head_dim,
                          (char *)pool + paged_row(t, pages, head_bytes, page_shift, head_dim, h, slot));
}
