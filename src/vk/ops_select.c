/* The selection op wrappers (see ops_select.h): checks, row chunks that fit
 * one storage range, and the dispatches of shaders/topk_select.comp and
 * shaders/mask_row_counts.comp. */
#include "vk/ops_select.h"

#include "vk/ops_internal.h"

vkv_status vkv_op_topk_select(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, vkv_view k_per_row,
                              uint32_t k_uniform, vkv_view mask)
{
    const char *op = "topk_select";
    const uint64_t row_bytes = 4ull * n, bytes = row_bytes * rows;
    const bool use_k = k_per_row.buf != NULL;
    vkv_status st;
    if (!rows || !n) return VKV_OK;
    if ((st = vkv_ops_check_view(gpu, scores, bytes, op, "the scores")) ||
        (st = vkv_ops_check_view(gpu, mask, bytes, op, "the mask")) ||
        (use_k && (st = vkv_ops_check_view(gpu, k_per_row, 4ull * rows, op, "k per row"))) ||
        (use_k && (st = vkv_ops_check_single_range(gpu, 4ull * rows, op, "k per row"))) ||
        (st = vkv_ops_check_single_range(gpu, row_bytes, op, "one row of scores")))
        return st;

    /* Rows per dispatch: all when they fit one range, else the most that do
     * and keep the next chunk's offset aligned. */
    uint64_t per = rows;
    if (bytes > vkv_ops_max_range(gpu) && !(per = vkv_ops_rows_per_range(gpu, row_bytes)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "topk_select: rows of %u scores cannot be bound at aligned offsets "
                         "within this device's storage range", n);
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        const uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        uint32_t gx, gy;
        vkv_ops_spread_groups(gpu, nr, &gx, &gy);
        vkv_pc_topk_select pc = {nr, n, k_uniform, use_k, (uint32_t)r0, gx};
        vkv_binding b[3] = {vkv_ops_bind(scores, r0 * row_bytes, nr * row_bytes),
                            use_k ? vkv_ops_bind(k_per_row, 0, 4ull * rows) : vkv_ops_bind(scores, 0, 4),
                            vkv_ops_bind(mask, r0 * row_bytes, nr * row_bytes)};
        if ((st = vkv_dispatch(gpu, VKV_K_TOPK_SELECT, b, 3, &pc, gx, gy, 1))) return st;
    }
    return VKV_OK;
}

vkv_status vkv_op_mask_row_counts(vkv_gpu *gpu, vkv_view mask, uint32_t rows, uint32_t n, vkv_view counts)
{
    const char *op = "mask_row_counts";
    const uint64_t bytes = 4ull * rows * n;
    vkv_status st;
    if (!rows) return VKV_OK;
    if ((st = vkv_ops_check_view(gpu, mask, bytes, op, "the mask")) ||
        (st = vkv_ops_check_view(gpu, counts, 4ull * rows, op, "the counts")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, op, "the mask")))
        return st;
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_MASK_ROW_COUNTS);
    if (wg > 256 || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two <= 256", op, wg);
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, rows, &gx, &gy);
    vkv_pc_mask_row_counts pc = {rows, n, gx};
    vkv_binding b[2] = {vkv_ops_bind(mask, 0, bytes ? bytes : 4), vkv_ops_bind(counts, 0, 4ull * rows)};
    return vkv_dispatch(gpu, VKV_K_MASK_ROW_COUNTS, b, 2, &pc, gx, gy, 1);
}
