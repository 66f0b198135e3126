/* The global selection of KVzip (vkv_press_ops.global_selection), as kvpress's
 * KVzipPress does it with layerwise off: over all N = rows * n scores of the
 * model (rows = n_layer * n_kv_head), exactly int(N p_c) are evicted (none when
 * N p_c < 1) by a top-k (kvpress at the paper's commit takes a top-k, not a threshold);
 * ties are broken by the flat index (layer, head, position: the earlier
 * token wins) and NaN ranks as -inf. Each row keeps the count of its
 * selected scores.
 *
 * An earlier version evicted every score <= the threshold, ties included.
 * On the default model (kvzip, p_c 0.5 / 0.75 / 0.9) that evicted the same
 * count: f32 scores rarely tie (docs/ARCHITECTURE.md §2 has the figures), so
 * the exact top-k is kept for the count it guarantees. */
#ifndef VKV_PRESS_SELECT_GLOBAL_H
#define VKV_PRESS_SELECT_GLOBAL_H

#include <stdint.h>

#include "vk/ops.h"

/* kept[rows]: tokens each row keeps, for the scores [rows, n] f32 on the
 * device (one storage range). On the GPU: the global top-k mask of the
 * N - int(N p_c) largest (vkv_op_topk_select over one row of N),
 * then each row's count of it (vkv_op_mask_row_counts).
 * Records and submits on its own (no recording may be open). */
vkv_status vkv_global_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, double compression_ratio,
                                    uint32_t *kept);
/* The same on the host (vkv_ref_select_counts). */
vkv_status vkv_global_select_counts_ref(const float *scores, uint32_t rows, uint32_t n, double compression_ratio,
                                        uint32_t *kept);

/* kept[rows]: each row's share of one top-k of k_keep over the scores
 * [rows, n] f32 on the device taken as one row (ties by the flat index).
 * AdaKV's per-layer selection (vkv_press_ops.layer_selection) and the
 * global one above. Records and submits on its own. */
vkv_status vkv_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, uint32_t k_keep, uint32_t *kept);
#endif
