/* Reference top-k selection (see ref_select.h): a plain sort per row. */
#include "ref/ref_select.h"

#include <math.h>
#include <stdlib.h>

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
