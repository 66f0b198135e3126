/* Op wrappers: push constants, workgroup counts and range splitting. */
#include <math.h>
#include <string.h>

#include "kvlayout/kv_layout.h"
#include "vk/ops_internal.h"
#include "vk/vk_internal.h"

uint64_t vkv_ops_max_range(const vkv_gpu *gpu) { return gpu->caps->max_storage_buffer_range & ~(uint64_t)15; }
uint64_t vkv_ops_align(const vkv_gpu *gpu) { return gpu->caps->min_storage_buffer_offset_alignment; }

vkv_binding vkv_ops_bind(vkv_view v, uint64_t byte_offset, uint64_t size)
{
    uint64_t r = (size + 15) & ~(uint64_t)15;
    uint64_t avail = vkv_buffer_size(v.buf) - (v.offset + byte_offset);
    return (vkv_binding){v.buf, v.offset + byte_offset, r < avail ? r : avail};
}

vkv_status vkv_ops_check_view(const vkv_gpu *gpu, vkv_view v, uint64_t bytes, const char *op, const char *what)
{
    if (!v.buf) return vkv_error(VKV_ERR_ARG, "%s: %s has no buffer", op, what);
    if (v.offset % vkv_ops_align(gpu))
        return vkv_error(VKV_ERR_ARG, "%s: %s offset %llu is not a multiple of the storage alignment %llu", op, what,
                         (unsigned long long)v.offset, (unsigned long long)vkv_ops_align(gpu));
    uint64_t size = vkv_buffer_size(v.buf);
    if (v.offset > size || bytes > size - v.offset)
        return vkv_error(VKV_ERR_ARG, "%s: %s needs %llu bytes at offset %llu of a %llu-byte buffer", op, what,
                         (unsigned long long)bytes, (unsigned long long)v.offset, (unsigned long long)size);
    return VKV_OK;
}

vkv_status vkv_ops_check_single_range(const vkv_gpu *gpu, uint64_t bytes, const char *op, const char *what)
{
    if (bytes > vkv_ops_max_range(gpu))
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %s is %llu bytes, over this device's storage range of %llu", op,
                         what, (unsigned long long)bytes, (unsigned long long)vkv_ops_max_range(gpu));
    return VKV_OK;
}

void vkv_ops_spread_groups(const vkv_gpu *gpu, uint64_t count, uint32_t *gx, uint32_t *gy)
{
    uint64_t mx = gpu->caps->max_workgroup_count[0];
    if (mx > 65535) mx = 65535;
    if (count <= mx) {
        *gx = (uint32_t)count;
        *gy = 1;
    } else {
        *gx = (uint32_t)mx;
        *gy = (uint32_t)((count + mx - 1) / mx);
    }
}


/* Largest count of rows of `row_bytes` that fits one bound range and whose
 * start offsets stay aligned. */
static uint64_t align_step(const vkv_gpu *gpu, uint64_t row_bytes)
{
    uint64_t a = vkv_ops_align(gpu), step = 1;
    while ((step * row_bytes) % a) step++; /* a is a small power of two: few iterations */
    return step;
}

uint64_t vkv_ops_rows_per_range(const vkv_gpu *gpu, uint64_t row_bytes)
{
    uint64_t rows = vkv_ops_max_range(gpu) / row_bytes;
    return rows - rows % align_step(gpu, row_bytes);
}

static vkv_kernel kernel_for_type(vkv_kernel base_f32, vkv_dtype t)
{
    /* Variants follow VKV_DTYPE_LIST's order (VKV_WEIGHT_KERNELS). */
    int i = vkv_dtype_index(t);
    return i < 0 ? VKV_KERNEL_COUNT : (vkv_kernel)(base_f32 + i);
}

vkv_status vkv_op_get_rows(vkv_gpu *gpu, vkv_dtype t, vkv_view table, uint64_t n_table_rows, uint32_t n_cols,
                           vkv_view ids, uint32_t n_ids, vkv_view out)
{
    const char *op = "get_rows";
    vkv_kernel k = kernel_for_type(VKV_K_GET_ROWS_F32, t);
    if (k == VKV_KERNEL_COUNT) return vkv_error(VKV_ERR_UNSUPPORTED, "get_rows: no kernel for type %u", t);
    uint64_t rb = vkv_dtype_device_row_bytes(t, n_cols);
    if (!rb) return vkv_error(VKV_ERR_ARG, "get_rows: %u columns is not a multiple of the block size", n_cols);
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, table, rb * n_table_rows, op, "table")) || (st = vkv_ops_check_view(gpu, ids, 4ull * n_ids, op, "ids")) ||
        (st = vkv_ops_check_view(gpu, out, 4ull * n_ids * n_cols, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, 4ull * n_ids * n_cols, op, "the output")))
        return st;
    uint64_t per = vkv_ops_rows_per_range(gpu, rb);
    uint32_t wg = vkv_kernel_workgroup_size(gpu, k);
    for (uint64_t r0 = 0; r0 < n_table_rows; r0 += per) {
        uint64_t nr = n_table_rows - r0 < per ? n_table_rows - r0 : per;
        vkv_pc_get_rows pc = {n_cols, n_ids, (uint32_t)r0, (uint32_t)nr};
        vkv_binding b[3] = {vkv_ops_bind(table, r0 * rb, nr * rb), vkv_ops_bind(ids, 0, 4ull * n_ids), vkv_ops_bind(out, 0, 4ull * n_ids * n_cols)};
        if ((st = vkv_dispatch(gpu, k, b, 3, &pc, (n_cols + wg - 1) / wg, n_ids, 1))) return st;
    }
    return VKV_OK;
}

vkv_status vkv_op_rms_norm(vkv_gpu *gpu, vkv_view x, vkv_view w, uint32_t rows, uint32_t n, float eps, vkv_view out)
{
    const char *op = "rms_norm";
    uint64_t bytes = 4ull * rows * n;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, x, bytes, op, "input")) || (st = vkv_ops_check_view(gpu, out, bytes, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    bool has_w = w.buf != NULL;
    if (has_w && (st = vkv_ops_check_view(gpu, w, 4ull * n, op, "weight"))) return st;
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, rows, &gx, &gy);
    vkv_pc_rms_norm pc = {rows, n, eps, has_w, gx};
    vkv_binding b[3] = {vkv_ops_bind(x, 0, bytes), has_w ? vkv_ops_bind(w, 0, 4ull * n) : vkv_ops_bind(x, 0, 4), vkv_ops_bind(out, 0, bytes)};
    return vkv_dispatch(gpu, VKV_K_RMS_NORM, b, 3, &pc, gx, gy, 1);
}

bool vkv_matmul_path_supported(const vkv_gpu *gpu, vkv_matmul_path path, vkv_dtype t)
{
    if (kernel_for_type(VKV_K_MATMUL_F32, t) == VKV_KERNEL_COUNT) return false;
    if (path == VKV_MATMUL_COOPMAT) {
        const vkv_caps *c = gpu->caps;
        return c->coopmat_nv && c->coopmat_nv_f16_16x16x16 && c->shader_float16 && c->storage_16bit &&
               c->subgroup_size == 32 && c->max_shared_memory >= 32768;
    }
    return true;
}

/* The matvec variant that reads weights as 16-byte words, for rows whole
 * words long (the same values and arithmetic, so the same bits): float
 * types, q4_K, q5_K, and the grouped device rows of q8_0, q4_0 and q6_K
 * (single column); `fallback` for other types. */
static vkv_kernel matvec_aligned_kernel(vkv_kernel fallback, bool cols, vkv_dtype t)
{
    switch (t) {
    case VKV_F32: return cols ? VKV_K_MATVEC_COLS_ALIGNED_F32 : VKV_K_MATVEC_ALIGNED_F32;
    case VKV_F16: return cols ? VKV_K_MATVEC_COLS_ALIGNED_F16 : VKV_K_MATVEC_ALIGNED_F16;
    case VKV_BF16: return cols ? VKV_K_MATVEC_COLS_ALIGNED_BF16 : VKV_K_MATVEC_ALIGNED_BF16;
    case VKV_Q4_K: return cols ? VKV_K_MATVEC_COLS_ALIGNED_Q4_K : VKV_K_MATVEC_ALIGNED_Q4_K;
    case VKV_Q5_K: return cols ? VKV_K_MATVEC_COLS_ALIGNED_Q5_K : VKV_K_MATVEC_ALIGNED_Q5_K;
    case VKV_Q6_K: return cols ? fallback : VKV_K_MATVEC_ALIGNED_Q6_K;
    case VKV_Q8_0: return cols ? VKV_K_MATVEC_COLS_ALIGNED_Q8_0 : VKV_K_MATVEC_ALIGNED_Q8_0;
    case VKV_Q4_0: return cols ? VKV_K_MATVEC_COLS_ALIGNED_Q4_0 : VKV_K_MATVEC_ALIGNED_Q4_0;
    default: return fallback;
    }
}

/* matvec.comp's row group for rows of k elements of type t: the fewest
 * threads, a power of two from the subgroup size (1 without subgroup
 * arithmetic) up to the workgroup, that give each work item of a row (a
 * 32-element chunk; VKV_MATVEC_Q6_K_CHUNKS of them for q6_K) its own thread.
 * Long rows take the whole workgroup; a short one leaves no thread idle, and
 * the workgroup then holds several groups, each with its own rows. The
 * single- and multi-column kernels take the same group for the same k, so
 * that they reduce alike (docs/ARCHITECTURE.md §1, "Matrix-vector row groups"). */
static uint32_t matvec_group_threads(vkv_dtype t, uint32_t k, uint32_t wg, uint32_t subgroup)
{
    const uint32_t items = (k + 31) / 32 / (t == VKV_Q6_K ? VKV_MATVEC_Q6_K_CHUNKS : 1);
    uint32_t g = subgroup; /* whole subgroups (Vulkan's are at most 128 wide, and so is a matvec workgroup) */
    while (g < items && g < wg) g *= 2;
    return g < wg ? g : wg;
}

/* What matmul.comp's tile takes (vk/tiles.h): a weight chunk of 32 a row a
 * step of K, 8 runs of 4 a row (its swizzle), the activations' runs shared
 * evenly by the threads, and 16 KiB of shared memory, every device's least. */
_Static_assert(VKV_MATMUL_BK == 32, "matmul.comp decodes one 32-element chunk a row a step");
_Static_assert((VKV_MATMUL_BN * VKV_MATMUL_BK / 4) % VKV_MATMUL_WG == 0, "matmul.comp: runs of x per thread");
_Static_assert((VKV_MATMUL_BM + VKV_MATMUL_BN) * VKV_MATMUL_BK * 4 <= 16384, "matmul.comp: Vulkan's least shared memory");

bool vkv_matmul_auto_is_matvec(uint32_t n) { return n <= VKV_BATCH_MAX; }

vkv_status vkv_op_matmul(vkv_gpu *gpu, vkv_matmul_path path, vkv_dtype t, vkv_view w, uint32_t m, uint32_t k,
                         vkv_view x, uint32_t n, vkv_view y)
{
    const char *op = "matmul";
    uint64_t rb = vkv_dtype_device_row_bytes(t, k); /* weights in the device's layout */
    if (!rb)
        return vkv_error(VKV_ERR_ARG, "matmul: row length %u is not a multiple of the %s block size", k,
                         vkv_dtype_get(t) ? vkv_dtype_get(t)->name : "?");
    /* A few rows (a short prompt, the tail of a long one) read the weights
     * once through the multi-column matvec: a 64-row tile would mostly
     * compute padding (on lavapipe 16 rows take half the tiled kernel's
     * time: docs/ARCHITECTURE.md, "The batched decode step"). */
    uint64_t x_step = align_step(gpu, 4ull * k), y_step = align_step(gpu, 4ull * m);
    uint64_t xy_step = x_step * y_step; /* a common multiple: both stay aligned */
    if (path == VKV_MATMUL_AUTO)
        path = n == 1                          ? VKV_MATMUL_MATVEC
               : vkv_matmul_auto_is_matvec(n) ? VKV_MATMUL_MATVEC_COLS
               : vkv_matmul_path_supported(gpu, VKV_MATMUL_COOPMAT, t) ? VKV_MATMUL_COOPMAT
                                                                        : VKV_MATMUL_TILED;
    if (!vkv_matmul_path_supported(gpu, path, t))
        return vkv_error(VKV_ERR_UNSUPPORTED, "matmul: this path is not available on '%s' for this type",
                         gpu->caps->name);
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, w, rb * m, op, "weight")) || (st = vkv_ops_check_view(gpu, x, 4ull * n * k, op, "input")) ||
        (st = vkv_ops_check_view(gpu, y, 4ull * n * m, op, "output")))
        return st;

    /* Weight rows per dispatch (bound range limit), and activation rows per
     * dispatch so that both X[n, k] and Y[n, m] fit one range. */
    uint64_t w_rows = vkv_ops_rows_per_range(gpu, rb);
    uint64_t x_rows = vkv_ops_max_range(gpu) / (4ull * (k > m ? k : m));
    x_rows -= x_rows % xy_step;
    if (path == VKV_MATMUL_MATVEC) {
        /* One dispatch per activation row: y is bound whole and addressed by
         * m_offset, so only x needs an aligned row start. */
        if (x_step != 1 && n > 1)
            return vkv_error(VKV_ERR_UNSUPPORTED, "matmul: activation rows of %u floats are not aligned for "
                                                  "row-by-row matrix-vector dispatches", k);
        if ((st = vkv_ops_check_single_range(gpu, 4ull * n * m, op, "the output"))) return st;
        x_rows = 1;
    } else if (path == VKV_MATMUL_MATVEC_COLS) {
        /* Up to VKV_BATCH_MAX columns a dispatch (W read once each); the
         * slices of a longer input must start aligned. */
        x_rows = n < VKV_BATCH_MAX ? n : VKV_BATCH_MAX;
        if (n > x_rows && x_rows % xy_step)
            return vkv_error(VKV_ERR_UNSUPPORTED, "matmul: activation rows of %u and %u floats are not aligned for "
                                                  "slices of %u columns", k, m, VKV_BATCH_MAX);
        if ((st = vkv_ops_check_single_range(gpu, 4ull * x_rows * k, op, "the input")) ||
            (st = vkv_ops_check_single_range(gpu, 4ull * x_rows * m, op, "the output")))
            return st;
    }
    if (!w_rows || !x_rows) return vkv_error(VKV_ERR_UNSUPPORTED, "matmul: one row exceeds the storage range");

    for (uint64_t n0 = 0; n0 < n; n0 += x_rows) {
        uint32_t nn = (uint32_t)(n - n0 < x_rows ? n - n0 : x_rows);
        vkv_binding bx = vkv_ops_bind(x, n0 * 4ull * k, 4ull * nn * k);
        vkv_binding by = path == VKV_MATMUL_MATVEC ? vkv_ops_bind(y, 0, 4ull * n * m) : vkv_ops_bind(y, n0 * 4ull * m, 4ull * nn * m);
        for (uint64_t m0 = 0; m0 < m; m0 += w_rows) {
            uint32_t mm = (uint32_t)(m - m0 < w_rows ? m - m0 : w_rows);
            vkv_binding b[3] = {vkv_ops_bind(w, m0 * rb, mm * rb), bx, by};
            if (path == VKV_MATMUL_MATVEC || path == VKV_MATMUL_MATVEC_COLS) {
                /* The multi-column kernel's shared sums take subgroups of 4 threads or more;
                 * the single-column kernel follows the same rule, so that both reduce alike
                 * and a batched row stays bitwise the single-token decode's. */
                const bool cols = path == VKV_MATMUL_MATVEC_COLS,
                           sg = gpu->caps->subgroup_arithmetic && gpu->caps->subgroup_size >= 4;
                vkv_kernel kk = kernel_for_type(cols ? (sg ? VKV_K_MATVEC_COLS_F32 : VKV_K_MATVEC_COLS_NOSG_F32)
                                                     : (sg ? VKV_K_MATVEC_F32 : VKV_K_MATVEC_NOSG_F32), t);
                if (sg && rb % 16 == 0) kk = matvec_aligned_kernel(kk, cols, t);
                const uint32_t wg = vkv_kernel_workgroup_size(gpu, kk),
                               group = matvec_group_threads(t, k, wg, sg ? gpu->caps->subgroup_size : 1);
                const uint32_t rows = (wg / group) * (cols ? VKV_MATVEC_COLS_ROWS : VKV_MATVEC_ROWS);
                uint32_t gx, gy;
                vkv_ops_spread_groups(gpu, (mm + rows - 1) / rows, &gx, &gy);
                vkv_pc_matvec pc = {mm, k, (uint32_t)(n0 * m + m0), gx, group};
                vkv_pc_matvec_cols pcc = {mm, k, (uint32_t)m0, gx, nn, m, group};
                if ((st = cols ? vkv_dispatch(gpu, kk, b, 3, &pcc, gx, gy, 1) : vkv_dispatch(gpu, kk, b, 3, &pc, gx, gy, 1)))
                    return st;
            } else {
                vkv_kernel kk = kernel_for_type(path == VKV_MATMUL_COOPMAT ? VKV_K_MATMUL_CM_F32 : VKV_K_MATMUL_F32, t);
                vkv_pc_matmul pc = {mm, k, nn, (uint32_t)m0, m};
                if ((st = vkv_dispatch(gpu, kk, b, 3, &pc, (mm + VKV_MATMUL_BM - 1) / VKV_MATMUL_BM,
                                           (nn + VKV_MATMUL_BN - 1) / VKV_MATMUL_BN, 1)))
                    return st;
            }
        }
    }
    return VKV_OK;
}

void vkv_rope_inv_freq(const vkv_rope_params *p, float *inv_freq)
{
    for (uint32_t i = 0; i < p->n_rot / 2; i++) {
        double f = p->freq_scale * pow(p->freq_base, -2.0 * i / p->n_rot);
        if (p->freq_factors) f /= p->freq_factors[i];
        inv_freq[i] = (float)f;
    }
}

vkv_status vkv_op_rope(vkv_gpu *gpu, const vkv_rope_params *p, vkv_view x, uint32_t n_tok, uint32_t n_heads,
                       vkv_view pos, vkv_view inv_freq, vkv_view out)
{
    const char *op = "rope";
    if (p->n_rot % 2 || p->n_rot > p->head_dim || p->head_dim % 2)
        return vkv_error(VKV_ERR_ARG, "rope: n_rot %u must be even and <= head_dim %u (even)", p->n_rot, p->head_dim);
    uint64_t bytes = 4ull * n_tok * n_heads * p->head_dim;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, x, bytes, op, "input")) || (st = vkv_ops_check_view(gpu, out, bytes, op, "output")) ||
        (st = vkv_ops_check_view(gpu, pos, 4ull * n_tok, op, "positions")) ||
        (st = vkv_ops_check_view(gpu, inv_freq, 4ull * (p->n_rot / 2 ? p->n_rot / 2 : 1), op, "frequencies")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    uint64_t total = (uint64_t)n_tok * n_heads * (p->head_dim / 2);
    uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_ROPE), gx, gy;
    vkv_ops_spread_groups(gpu, (total + wg - 1) / wg, &gx, &gy);
    vkv_pc_rope pc = {
        n_tok, n_heads, p->head_dim, p->n_rot, p->mode == VKV_ROPE_NEOX, p->inverse};
    vkv_binding b[4] = {vkv_ops_bind(x, 0, bytes), vkv_ops_bind(pos, 0, 4ull * n_tok), vkv_ops_bind(inv_freq, 0, 4ull * (p->n_rot / 2 ? p->n_rot / 2 : 1)),
                        vkv_ops_bind(out, 0, bytes)};
    return vkv_dispatch(gpu, VKV_K_ROPE, b, 4, &pc, gx, gy, 1);
}

vkv_status vkv_op_softmax(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t cols, float scale, bool causal,
                          int32_t causal_offset, vkv_view out)
{
    const char *op = "softmax";
    uint64_t bytes = 4ull * rows * cols;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, x, bytes, op, "input")) || (st = vkv_ops_check_view(gpu, out, bytes, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, rows, &gx, &gy);
    vkv_pc_softmax pc = {
        rows, cols, scale, causal, causal_offset, gx};
    vkv_binding b[2] = {vkv_ops_bind(x, 0, bytes), vkv_ops_bind(out, 0, bytes)};
    return vkv_dispatch(gpu, VKV_K_SOFTMAX, b, 2, &pc, gx, gy, 1);
}

/* The checks, bindings and workgroups of add and silu_mul over n elements
 * (b: rows of nb, broadcast); the op then pushes its own struct. */
typedef struct elementwise_dispatch {
    vkv_binding b[3];
    uint32_t gx, gy;
} elementwise_dispatch;

static vkv_status elementwise_bind(vkv_gpu *gpu, vkv_kernel k, const char *op, vkv_view a, vkv_view b, uint32_t n,
                                   uint32_t nb, vkv_view out, elementwise_dispatch *d)
{
    uint64_t bytes = 4ull * n;
    vkv_status st;
    if (!nb || n % nb) return vkv_error(VKV_ERR_ARG, "%s: %u elements is not a multiple of the row width %u", op, n, nb);
    if ((st = vkv_ops_check_view(gpu, a, bytes, op, "first input")) || (st = vkv_ops_check_view(gpu, b, 4ull * nb, op, "second input")) ||
        (st = vkv_ops_check_view(gpu, out, bytes, op, "output")) || (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    uint32_t wg = vkv_kernel_workgroup_size(gpu, k);
    vkv_ops_spread_groups(gpu, ((uint64_t)n + wg - 1) / wg, &d->gx, &d->gy);
    d->b[0] = vkv_ops_bind(a, 0, bytes);
    d->b[1] = vkv_ops_bind(b, 0, 4ull * nb);
    d->b[2] = vkv_ops_bind(out, 0, bytes);
    return VKV_OK;
}

vkv_status vkv_op_silu_mul(vkv_gpu *gpu, vkv_view gate, vkv_view up, uint32_t n, vkv_view out)
{
    elementwise_dispatch d;
    vkv_status st = elementwise_bind(gpu, VKV_K_SILU_MUL, "silu_mul", gate, up, n, n, out, &d);
    if (st) return st;
    vkv_pc_silu_mul pc = {n};
    return vkv_dispatch(gpu, VKV_K_SILU_MUL, d.b, 3, &pc, d.gx, d.gy, 1);
}

static vkv_status add_rows(vkv_gpu *gpu, const char *op, vkv_view a, vkv_view b, uint32_t n, uint32_t nb, vkv_view out)
{
    elementwise_dispatch d;
    vkv_status st = elementwise_bind(gpu, VKV_K_ADD, op, a, b, n, nb, out, &d);
    if (st) return st;
    vkv_pc_add pc = {n, nb};
    return vkv_dispatch(gpu, VKV_K_ADD, d.b, 3, &pc, d.gx, d.gy, 1);
}

vkv_status vkv_op_add(vkv_gpu *gpu, vkv_view a, vkv_view b, uint32_t n, vkv_view out)
{
    return add_rows(gpu, "add", a, b, n, n, out);
}

vkv_status vkv_op_add_bias(vkv_gpu *gpu, vkv_view a, vkv_view bias, uint32_t rows, uint32_t width, vkv_view out)
{
    return add_rows(gpu, "add_bias", a, bias, rows * width, width, out);
}

static vkv_status kv_store(vkv_gpu *gpu, vkv_dtype type, vkv_view src, uint32_t n_tok, uint32_t n_kv_head,
                           uint32_t head_dim, vkv_view cache, uint64_t cache_rows, uint32_t n_ctx, uint32_t slot0,
                           vkv_view meta, uint32_t mode)
{
    const char *op = "kv_store";
    if (!vkv_kv_type_ok(type)) return vkv_error(VKV_ERR_UNSUPPORTED, "kv_store: cache type %u is not f16, f32, q8_0 or q4_0", type);
    if (head_dim % 4) return vkv_error(VKV_ERR_ARG, "kv_store: head dim %u is not a multiple of 4", head_dim);
    uint64_t src_bytes = 4ull * n_tok * n_kv_head * head_dim;
    uint64_t cache_bytes = cache_rows * vkv_kv_row_bytes(type, head_dim);
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, src, src_bytes, op, "input")) ||
        (st = vkv_ops_check_view(gpu, cache, cache_bytes, op, "cache")) ||
        (st = vkv_ops_check_single_range(gpu, cache_bytes, op, "the layer's cache")))
        return st;
    if (mode && (st = vkv_ops_check_view(gpu, meta, 32ull * n_kv_head, op, "tier metadata"))) return st;
    const bool quant = vkv_kv_type_quantized(type);
    vkv_kernel k = quant ? VKV_K_KV_STORE_Q : type == VKV_F16 ? VKV_K_KV_STORE_F16 : VKV_K_KV_STORE_F32;
    /* quantized: one invocation per row; else one per element pair */
    uint64_t total = (uint64_t)n_tok * n_kv_head * (quant ? 1 : head_dim / 2);
    uint32_t wg = vkv_kernel_workgroup_size(gpu, k), gx, gy;
    vkv_ops_spread_groups(gpu, (total + wg - 1) / wg, &gx, &gy);
    vkv_pc_kv_store pc = {n_tok, n_kv_head, head_dim, n_ctx, slot0, mode, type};
    vkv_binding b[3] = {vkv_ops_bind(src, 0, src_bytes), vkv_ops_bind(cache, 0, cache_bytes),
                        mode ? vkv_ops_bind(meta, 0, 32ull * n_kv_head) : vkv_ops_bind(src, 0, 4)};
    return vkv_dispatch(gpu, k, b, 3, &pc, gx, gy, 1);
}

vkv_status vkv_op_kv_store(vkv_gpu *gpu, vkv_dtype type, vkv_view src, uint32_t n_tok, uint32_t n_kv_head,
                           uint32_t head_dim, vkv_view cache, uint32_t n_ctx, uint32_t slot0)
{
    if (slot0 + n_tok > n_ctx)
        return vkv_error(VKV_ERR_ARG, "kv_store: %u tokens at slot %u do not fit a %u-slot cache", n_tok, slot0, n_ctx);
    return kv_store(gpu, type, src, n_tok, n_kv_head, head_dim, cache, (uint64_t)n_kv_head * n_ctx, n_ctx, slot0,
                    (vkv_view){0}, 0);
}

vkv_status vkv_op_kv_store_tiered(vkv_gpu *gpu, vkv_dtype type, bool values, vkv_view src, uint32_t n_tok,
                                  uint32_t n_kv_head, uint32_t head_dim, vkv_view cache, uint64_t cache_rows,
                                  vkv_view meta, uint32_t slot0)
{
    return kv_store(gpu, type, src, n_tok, n_kv_head, head_dim, cache, cache_rows, 0, slot0, meta, values ? 2 : 1);
}

vkv_status vkv_op_kv_convert_rows(vkv_gpu *gpu, vkv_view src, vkv_dtype src_type, uint64_t src_row0, vkv_view dst,
                                  vkv_dtype dst_type, uint64_t dst_row0, uint32_t n_rows, uint32_t head_dim)
{
    const char *op = "kv_convert";
    if (!vkv_kv_type_ok(src_type) || !vkv_kv_type_ok(dst_type))
        return vkv_error(VKV_ERR_UNSUPPORTED, "kv_convert: row types %u -> %u are not f16, f32, q8_0 or q4_0", src_type,
                         dst_type);
    if (head_dim % 4) return vkv_error(VKV_ERR_ARG, "kv_convert: head dim %u is not a multiple of 4", head_dim);
    if (!n_rows) return VKV_OK;
    const uint64_t sb = vkv_kv_row_bytes(src_type, head_dim), db = vkv_kv_row_bytes(dst_type, head_dim);
    const uint64_t src_bytes = sb * (src_row0 + n_rows), dst_bytes = db * (dst_row0 + n_rows);
    if (src_row0 + n_rows > UINT32_MAX || dst_row0 + n_rows > UINT32_MAX)
        return vkv_error(VKV_ERR_ARG, "kv_convert: row index over 2^32");
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, src, src_bytes, op, "source rows")) ||
        (st = vkv_ops_check_view(gpu, dst, dst_bytes, op, "destination rows")) ||
        (st = vkv_ops_check_single_range(gpu, src_bytes, op, "the source")) ||
        (st = vkv_ops_check_single_range(gpu, dst_bytes, op, "the destination")))
        return st;
    uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_KV_CONVERT), gx, gy;
    vkv_ops_spread_groups(gpu, ((uint64_t)n_rows + wg - 1) / wg, &gx, &gy);
    vkv_pc_kv_convert pc = {n_rows, (uint32_t)src_row0, (uint32_t)dst_row0, head_dim, src_type, dst_type};
    vkv_binding b[2] = {vkv_ops_bind(src, 0, src_bytes), vkv_ops_bind(dst, 0, dst_bytes)};
    return vkv_dispatch(gpu, VKV_K_KV_CONVERT, b, 2, &pc, gx, gy, 1);
}

vkv_status vkv_op_argmax(vkv_gpu *gpu, vkv_view x, uint32_t rows, uint32_t n, vkv_view out)
{
    const char *op = "argmax";
    uint64_t bytes = 4ull * rows * n;
    vkv_status st;
    if ((st = vkv_ops_check_view(gpu, x, bytes, op, "input")) || (st = vkv_ops_check_view(gpu, out, 4ull * rows, op, "output")) ||
        (st = vkv_ops_check_single_range(gpu, bytes, op, "the input")))
        return st;
    if (rows > gpu->caps->max_workgroup_count[0]) return vkv_error(VKV_ERR_ARG, "argmax: too many rows");
    vkv_pc_argmax pc = {rows, n};
    vkv_binding b[2] = {vkv_ops_bind(x, 0, bytes), vkv_ops_bind(out, 0, 4ull * rows)};
    return vkv_dispatch(gpu, VKV_K_ARGMAX, b, 2, &pc, rows, 1, 1);
}
