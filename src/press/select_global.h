/* The global selection of KVzip (vkv_press_ops.global_selection), as kvpress's
 * KVzipPress.compress_post does it with layerwise off: over all N = rows * n
 * scores of the model (rows = n_layer * n_kv_head), the threshold is the
 * (max(int(N p_c), 1))-th smallest score, every score <= threshold is evicted
 * (ties included) and each row keeps the count of its scores above it. NaN
 * ranks as -inf. */
#ifndef VKV_PRESS_SELECT_GLOBAL_H
#define VKV_PRESS_SELECT_GLOBAL_H

#include <stdint.h>

#include "vk/ops.h"

/* kept[rows]: tokens each row keeps, for the scores [rows, n] f32 on the
 * device (one storage range). On the GPU: the global top-k mask of the
 * N - max(int(N p_c), 1) largest (vkv_op_topk_select over one row of N), the
 * largest unselected score of each row (shaders/press_global_rows.comp), the
 * threshold (their maximum, on the host), then each row's count above it
 * (the count evicted: vkv_kv_n_evicted_global).
 * Records and submits on its own (no recording may be open). */
vkv_status vkv_global_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, double compression,
                                    uint32_t *kept);
/* The same on the host. */
vkv_status vkv_global_select_counts_ref(const float *scores, uint32_t rows, uint32_t n, double compression,
                                        uint32_t *kept);
#endif
