/* KVzip's global selection (see select_global.h). */
#include "press/select_global.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_counts.h"
#include "press/press_internal.h"
#include "press/select.h"
#include "vk/gpu.h"

typedef struct rows_pc {
    uint32_t rows, n, mode, groups_x;
    float thres;
} rows_pc;

static vkv_status rows_pass(vkv_gpu *gpu, vkv_view scores, vkv_view mask, uint32_t rows, uint32_t n, uint32_t mode,
                            float thres, vkv_buffer *out, uint32_t *host)
{
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, rows, &gx, &gy);
    rows_pc pc = {rows, n, mode, gx, thres};
    const uint64_t bytes = 4ull * rows * n;
    vkv_binding b[3] = {vkv_ops_bind(scores, 0, bytes), vkv_ops_bind(mask.buf ? mask : scores, 0, mode ? 16 : bytes),
                        vkv_ops_bind(vkv_view_of(out), 0, 4ull * rows)};
    vkv_status st = vkv_cmd_dispatch(gpu, VKV_K_PRESS_GLOBAL_ROWS, b, 3, &pc, sizeof pc, gx, gy, 1);
    if (st) return vkv_cmd_abort(gpu, st);
    if ((st = vkv_cmd_submit(gpu))) return st;
    return vkv_buffer_download(gpu, out, 0, host, 4ull * rows);
}

vkv_status vkv_global_select_counts(vkv_gpu *gpu, vkv_view scores, uint32_t rows, uint32_t n, double compression,
                                    uint32_t *kept)
{
    const char *name = "global selection";
    const uint64_t total = (uint64_t)rows * n, bytes = 4 * total;
    if (!total) return VKV_OK;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, scores, bytes, name, "the scores")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, name, "the scores of every layer")))
        return st;
    if (total > UINT32_MAX) return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %llu scores", name, (unsigned long long)total);
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_PRESS_GLOBAL_ROWS);
    if (wg > 256 || (wg & (wg - 1)))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: workgroup size %u is not a power of two <= 256", name, wg);
    const uint32_t k_keep = (uint32_t)(total - vkv_kv_n_evicted_global(total, compression));
    vkv_buffer *mask = NULL, *out = NULL;
    uint32_t *host = malloc(4ull * rows);
    if (!host) return vkv_error(VKV_ERR_OOM, "%s: out of host memory", name);
    if ((st = vkv_buffer_create(gpu, bytes, VKV_MEM_DEVICE, "the global selection mask", &mask)) ||
        (st = vkv_buffer_create(gpu, 4ull * rows, VKV_MEM_DEVICE, "per-row selection figures", &out)) ||
        (st = vkv_cmd_begin(gpu)))
        goto done;
    if ((st = vkv_op_topk_select(gpu, scores, 1, (uint32_t)total, (vkv_view){0}, k_keep, vkv_view_of(mask)))) {
        st = vkv_cmd_abort(gpu, st);
        goto done;
    }
    if ((st = rows_pass(gpu, scores, vkv_view_of(mask), rows, n, 0, 0.0f, out, host))) goto done;
    float thres = -INFINITY;
    for (uint32_t r = 0; r < rows; r++) {
        float f;
        memcpy(&f, &host[r], 4);
        if (f > thres) thres = f;
    }
    if ((st = vkv_cmd_begin(gpu))) goto done;
    if ((st = rows_pass(gpu, scores, (vkv_view){0}, rows, n, 1, thres, out, kept))) goto done;
done:
    vkv_buffer_destroy(gpu, mask);
    vkv_buffer_destroy(gpu, out);
    free(host);
    return st;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

vkv_status vkv_global_select_counts_ref(const float *scores, uint32_t rows, uint32_t n, double compression,
                                        uint32_t *kept)
{
    const uint64_t total = (uint64_t)rows * n;
    if (!total) return VKV_OK;
    float *s = malloc(sizeof *s * total);
    if (!s) return vkv_error(VKV_ERR_OOM, "global selection: out of host memory");
    for (uint64_t i = 0; i < total; i++) s[i] = isnan(scores[i]) ? -INFINITY : scores[i];
    qsort(s, total, sizeof *s, cmp_float);
    const float thres = s[vkv_kv_n_evicted_global(total, compression) - 1];
    free(s);
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t c = 0;
        for (uint32_t j = 0; j < n; j++) {
            float x = scores[(size_t)r * n + j];
            c += !isnan(x) && x > thres;
        }
        kept[r] = c;
    }
    return VKV_OK;
}
