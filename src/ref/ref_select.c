/* Reference top-k selection (see ref_select.h): a plain sort per row. */
#include "ref/ref_select.h"

#include <math.h>
#include <stdlib.h>

#include "ref/ref_vector.h"

typedef struct ranked {
    float s;    /* the score with NaN -> -inf and -0 -> +0 */
    uint32_t j; /* position */
} ranked;

/* Higher score first, then lower position: a total order, so the result does
 * not depend on the sort algorithm. */
static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->s != b->s) return a->s > b->s ? -1 : 1;
    return a->j < b->j ? -1 : a->j > b->j;
}

vkv_status vkv_ref_topk_select(const float *scores, uint32_t rows, uint32_t n, const uint32_t *k_per_row,
                               uint32_t k_uniform, uint32_t *mask)
{
    ranked *buf = malloc((n ? n : 1) * sizeof *buf); /* [n] one row, sorted */
    if (!buf) return vkv_error(VKV_ERR_OOM, "top-k reference: out of host memory for %u scores", n);
    for (uint32_t r = 0; r < rows; r++) {
        const float *x = scores + (size_t)r * n; /* [n] */
        uint32_t *m = mask + (size_t)r * n;      /* [n] */
        uint32_t k = k_per_row ? k_per_row[r] : k_uniform;
        if (k > n) k = n;
        for (uint32_t j = 0; j < n; j++) {
            float s = isnan(x[j]) ? -INFINITY : x[j];
            buf[j] = (ranked){s == 0.0f ? 0.0f : s, j};
            m[j] = 0;
        }
        qsort(buf, n, sizeof *buf, cmp_ranked);
        for (uint32_t i = 0; i < k; i++) m[buf[i].j] = 1;
    }
    free(buf);
    return VKV_OK;
}

void vkv_ref_mask_row_counts(const uint32_t *mask, uint32_t rows, uint32_t n, uint32_t *counts)
{
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t c = 0;
        for (uint32_t j = 0; j < n; j++) c += mask[(size_t)r * n + j] != 0;
        counts[r] = c;
    }
}

vkv_status vkv_ref_select_counts(const float *scores, uint32_t rows, uint32_t n, uint32_t k_keep, uint32_t *kept)
{
    const uint64_t total = (uint64_t)rows * n;
    if (!total) return VKV_OK;
    if (total > UINT32_MAX) return vkv_error(VKV_ERR_UNSUPPORTED, "selection over rows: %llu scores", (unsigned long long)total);
    uint32_t *mask = malloc(sizeof *mask * total); /* [rows, n] */
    if (!mask) return vkv_error(VKV_ERR_OOM, "selection over rows: out of host memory");
    vkv_status st = vkv_ref_topk_select(scores, 1, (uint32_t)total, NULL, k_keep, mask);
    if (!st) vkv_ref_mask_row_counts(mask, rows, n, kept);
    free(mask);
    return st;
}

vkv_status vkv_ref_adakv_safeguard(const float *scores, uint32_t rows, uint32_t n, uint32_t n_safe, float *out)
{
    const size_t total = (size_t)rows * n;
    uint32_t *safe = malloc(sizeof *safe * (total ? total : 1)); /* [rows, n] 1 = among the row's n_safe */
    if (!safe) return vkv_error(VKV_ERR_OOM, "AdaKV's safeguard: out of host memory");
    vkv_status st = vkv_ref_topk_select(scores, rows, n, NULL, n_safe, safe);
    if (!st) vkv_ref_vector_pool_extend(safe, scores, (uint32_t)total, out);
    free(safe);
    return st;
}
