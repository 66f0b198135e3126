/* Per-row top-k selection on the GPU: the step after every scorer of
 * src/press/ (pick each (layer, KV head)'s n_kept or pool tokens from
 * scores[n_kv_head, n]). The oracle is vkv_ref_topk_select
 * (src/ref/ref_select.h); both give exactly the same mask for any input. */
#ifndef VKV_OPS_SELECT_H
#define VKV_OPS_SELECT_H

#include <stdint.h>

#include "vk/ops.h"

/* mask[rows, n] uint32 = 1 for the k_r largest scores of each row of
 * scores[rows, n] f32, 0 elsewhere. Ties are broken by position (the lower
 * index wins), NaN ranks as -inf, +inf above every finite score (forced
 * keeps), -0 equals +0. k_r = k_per_row[r] (a uint32 [rows] device view) when
 * k_per_row.buf is set, else k_uniform; k_r >= n selects the whole row, 0
 * nothing. One workgroup per row; rows may be any length (4 + 1 or 2 passes
 * over the row, nothing of size n in shared memory). Views larger than one
 * storage range are bound a few rows per dispatch. */
vkv_status vkv_op_topk_select(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, vkv_view k_per_row,
                              uint32_t k_uniform, vkv_view mask);

/* counts[r] uint32 = how many entries of row r of mask[rows, n] uint32 are
 * set: the tokens each (layer, KV head) keeps after a selection over several
 * rows. One workgroup per row; the oracle is vkv_ref_mask_row_counts. */
vkv_status vkv_op_mask_row_counts(vkv_gpu *gpu, vkv_view mask, uint32_t rows, uint32_t n, vkv_view counts);

#endif
