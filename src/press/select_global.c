/* Selections over several rows: KVzip's global one, AdaKV's per layer (see select_global.h). */
#include "press/select_global.h"

#include "kvlayout/kv_counts.h"
#include "press/press_internal.h"
#include "ref/ref_select.h"
#include "vk/gpu.h"
#include "vk/ops_select.h"

vkv_status vkv_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, uint32_t k_keep, uint32_t *kept)
{
    const char *name = "selection over rows";
    const uint64_t total = (uint64_t)rows * n, bytes = 4 * total;
    if (!total) return VKV_OK;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, scores, bytes, name, "the scores")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, name, "the scores of every row")))
        return st;
    if (total > UINT32_MAX) return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %llu scores", name, (unsigned long long)total);
    vkv_buffer *mask = NULL, *counts = NULL;
    if ((st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "the selection mask", &mask)) ||
        (st = vkv_buffer_create(gpu, 4ull * rows, VKV_MEM_DEVICE, "tokens kept per row", &counts)) ||
        (st = vkv_cmd_begin(gpu)))
        goto done;
    st = vkv_op_topk_select(gpu, scores, 1, (uint32_t)total, (vkv_view){0}, k_keep, vkv_view_of(mask));
    if (!st) st = vkv_op_mask_row_counts(gpu, vkv_view_of(mask), rows, n, vkv_view_of(counts));
    if (st) {
        st = vkv_cmd_abort(gpu, st);
        goto done;
    }
    if (!(st = vkv_cmd_submit(gpu))) st = vkv_buffer_download(gpu, counts, 0, kept, 4ull * rows);
done:
    vkv_buffer_destroy(gpu, mask);
    vkv_buffer_destroy(gpu, counts);
    return st;
}

/* Scores kept by the global selection of rows * n scores. */
static uint32_t global_k_keep(uint32_t rows, uint32_t n, double compression_ratio)
{
    const uint64_t total = (uint64_t)rows * n;
    return (uint32_t)(total - vkv_kv_n_evicted_global(total, compression_ratio));
}

vkv_status vkv_global_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, double compression_ratio,
                                    uint32_t *kept)
{
    return vkv_select_counts(gpu, scores, rows, n, global_k_keep(rows, n, compression_ratio), kept);
}

vkv_status vkv_global_select_counts_ref(const float *scores, uint32_t rows, uint32_t n, double compression_ratio,
                                        uint32_t *kept)
{
    return vkv_ref_select_counts(scores, rows, n, global_k_keep(rows, n, compression_ratio), kept);
}
