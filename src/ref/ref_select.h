/* CPU reference of the per-row top-k selection (the oracle of
 * vkv_op_topk_select in vk/ops_select.h): sort each row by (score descending,
 * position ascending) and take the first k. NaN ranks as -inf, -0 equals +0,
 * +inf is above every finite score (the scorers' forced keeps). */
#ifndef VKV_REF_SELECT_H
#define VKV_REF_SELECT_H

#include <stdint.h>

#include "core/status.h"

/* mask[rows, n] = 1 for the k_r selected positions of each row of
 * scores[rows, n], 0 elsewhere; k_r = k_per_row[r] when k_per_row is not
 * NULL, else k_uniform; k_r >= n selects the whole row. VKV_ERR_OOM when the
 * sort buffer cannot be allocated. */
vkv_status vkv_ref_topk_select(const float *scores, uint32_t rows, uint32_t n, const uint32_t *k_per_row,
                               uint32_t k_uniform, uint32_t *mask);

/* counts[r] = how many entries of row r of mask[rows, n] are nonzero. */
void vkv_ref_mask_row_counts(const uint32_t *mask, uint32_t rows, uint32_t n, uint32_t *counts);

#endif
