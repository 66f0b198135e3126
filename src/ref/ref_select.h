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

/* kept[rows]: each row's share of one top-k of k_keep over all rows * n
 * scores taken as one row (ties by the flat index: the earlier row, then the
 * earlier position, wins). The counts of KVzip's global selection and of
 * AdaKV's per-layer one. VKV_ERR_OOM; VKV_ERR_UNSUPPORTED past 2^32 scores. */
vkv_status vkv_ref_select_counts(const float *scores, uint32_t rows, uint32_t n, uint32_t k_keep, uint32_t *kept);

/* AdaKV's safeguard (docs/ARCHITECTURE.md §2): out[rows, n] = +inf for the
 * n_safe highest scores of each row (ties by position), every other score
 * clamped to the largest finite float (NaN to -inf), so a top-k over the
 * rows together takes every row's n_safe first. The oracle of the safeguard
 * on the device (vkv_op_topk_select, then vkv_op_vector_pool_extend).
 * VKV_ERR_OOM. */
vkv_status vkv_ref_adakv_safeguard(const float *scores, uint32_t rows, uint32_t n, uint32_t n_safe, float *out);

#endif
