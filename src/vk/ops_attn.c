/* Attention op wrapper (see ops_attn.h): parameter checks, tile sizes that
 * fit the kernels' shared arrays, range binding of the cache and the
 * dispatches of the prefill / decode paths. */
#include "vk/ops_attn.h"
#include "vk/ops_internal.h"

#include <math.h>
#include <string.h>

#include "vk/vk_internal.h"

/* The shared arrays of attn.comp (vk/tiles.h). */
#define ATTN_SHARED_BYTES (16u * VKV_ATTN_SQ_VEC4 + 16u * VKV_ATTN_SKV_VEC4 + 4u * VKV_ATTN_SS_FLOATS) /* 29184 */

/* View rules shared with vk/ops.c. */
static vkv_status check_view(const vkv_gpu *gpu, vkv_view v, uint64_t bytes, const char *what)
{
    return vkv_ops_check_view(gpu, v, bytes, "attention", what);
}

static vkv_status check_single_range(const vkv_gpu *gpu, uint64_t bytes, const char *what)
{
    return vkv_ops_check_single_range(gpu, bytes, "attention", what);
}

/* ---- sizes ---- */

uint32_t vkv_attn_decode_splits(uint32_t n_kv)
{
    uint32_t s = (uint32_t)(((uint64_t)n_kv + VKV_ATTN_SPLIT_KEYS - 1) / VKV_ATTN_SPLIT_KEYS);
    return s < 1 ? 1 : s > VKV_ATTN_MAX_SPLITS ? VKV_ATTN_MAX_SPLITS : s;
}

static vkv_attn_path resolve_path(const vkv_attn_params *p, vkv_attn_path path)
{
    if (path != VKV_ATTN_AUTO) return path;
    return p->n_q <= VKV_ATTN_DECODE_MAX_Q ? VKV_ATTN_DECODE : VKV_ATTN_PREFILL;
}

/* Partials: [n_split, n_q * n_head, head_dim / 4 + 1] vec4. */
static uint64_t partial_bytes(const vkv_attn_params *p, uint32_t n_split)
{
    return (uint64_t)n_split * p->n_q * p->n_head * (p->head_dim / 4 + 1) * 16;
}

uint64_t vkv_attn_scratch_bytes(const vkv_attn_params *p)
{
    vkv_attn_params w = *p;
    if (w.n_q < VKV_ATTN_DECODE_MAX_Q) w.n_q = VKV_ATTN_DECODE_MAX_Q;
    uint64_t bytes = partial_bytes(&w, vkv_attn_decode_splits(p->n_kv));
    return bytes > 16 ? bytes : 16;
}

void vkv_attn_tiles(uint32_t hd, uint32_t rows, bool decode, uint32_t wg, uint32_t *tile_q, uint32_t *tile_k)
{
    uint32_t d4n = hd / 4, tq = VKV_ATTN_MAX_TILE_Q;
    while (tq > 1 && (tq * d4n > VKV_ATTN_SQ_VEC4 || wg % tq || d4n > VKV_ATTN_MAX_COLS * (wg / tq))) tq /= 2;
    if (decode)
        while (tq > 1 && tq / 2 >= rows) tq /= 2;
    uint32_t tk = VKV_ATTN_SKV_VEC4 / (d4n + 1);
    if (tk > VKV_ATTN_SS_FLOATS / tq) tk = VKV_ATTN_SS_FLOATS / tq;
    if (tk > VKV_ATTN_MAX_TILE_K) tk = VKV_ATTN_MAX_TILE_K;
    *tile_q = tq;
    *tile_k = tk;
}

/* ---- the op ---- */

static vkv_status check_params(const vkv_gpu *gpu, const vkv_attn_params *p)
{
    if (!p->n_head || !p->n_kv_head || p->n_head % p->n_kv_head)
        return vkv_error(VKV_ERR_ARG, "attention: %u query heads is not a multiple of %u KV heads", p->n_head,
                         p->n_kv_head);
    if (p->head_dim < 4 || p->head_dim > VKV_ATTN_MAX_HEAD_DIM || p->head_dim % 4)
        return vkv_error(VKV_ERR_UNSUPPORTED, "attention: head_dim %u is not a multiple of 4 in [4, %u]", p->head_dim,
                         VKV_ATTN_MAX_HEAD_DIM);
    if (!p->n_ctx_max || p->n_kv > p->n_ctx_max)
        return vkv_error(VKV_ERR_ARG, "attention: %u valid slots in a cache of %u", p->n_kv, p->n_ctx_max);
    if (!vkv_kv_type_ok(p->k_type) || !vkv_kv_type_ok(p->v_type))
        return vkv_error(VKV_ERR_UNSUPPORTED, "attention: KV cache types %u, %u are not f16, f32, q8_0 or q4_0",
                         p->k_type, p->v_type);
    if (!isfinite(p->scale)) return vkv_error(VKV_ERR_ARG, "attention: scale is not finite");
    if (gpu->caps->max_shared_memory < ATTN_SHARED_BYTES)
        return vkv_error(VKV_ERR_UNSUPPORTED, "attention: needs %u bytes of shared memory, '%s' has %u",
                         ATTN_SHARED_BYTES, gpu->caps->name, gpu->caps->max_shared_memory);
    return VKV_OK;
}

vkv_status vkv_op_attention(vkv_gpu *gpu, vkv_attn_path path, const vkv_attn_params *p, vkv_view q, vkv_view k,
                            vkv_view v, vkv_view scratch, vkv_view out)
{
    vkv_status st;
    if ((st = check_params(gpu, p))) return st;
    if (!p->n_q) return VKV_OK;
    path = resolve_path(p, path);
    const bool decode = path == VKV_ATTN_DECODE;
    const uint32_t group = p->n_head / p->n_kv_head, hd = p->head_dim;
    const uint64_t qo_bytes = 4ull * p->n_q * p->n_head * hd;     /* q and out */
    /* The larger of the K and V rows sets how many heads one range holds. */
    const uint64_t k_row = vkv_kv_row_bytes(p->k_type, hd), v_row = vkv_kv_row_bytes(p->v_type, hd);
    const uint64_t row = k_row > v_row ? k_row : v_row;
    const uint64_t head_bytes = row * p->n_ctx_max;                  /* stride between KV heads */
    const uint64_t used_last = row * (p->n_kv ? p->n_kv : 1);       /* slots read in the last head bound */
    if ((st = check_view(gpu, q, qo_bytes, "q")) || (st = check_view(gpu, out, qo_bytes, "the output")) ||
        (st = check_view(gpu, k, k_row * p->n_ctx_max * p->n_kv_head, "the K cache")) ||
        (st = check_view(gpu, v, v_row * p->n_ctx_max * p->n_kv_head, "the V cache")) ||
        (st = check_single_range(gpu, qo_bytes, "q")))
        return st;

    /* KV heads per dispatch: all of them when their used part fits one
     * bound range, else as many as fit, starting at aligned offsets. */
    uint64_t heads_per = p->n_kv_head;
    if (head_bytes * (p->n_kv_head - 1) + used_last > vkv_ops_max_range(gpu)) {
        if (used_last > vkv_ops_max_range(gpu))
            return vkv_error(VKV_ERR_UNSUPPORTED,
                             "attention: one KV head's %u slots are %llu bytes, over this device's storage range of %llu",
                             p->n_kv, (unsigned long long)used_last, (unsigned long long)vkv_ops_max_range(gpu));
        if (k_row * p->n_ctx_max % vkv_ops_align(gpu) || v_row * p->n_ctx_max % vkv_ops_align(gpu))
            return vkv_error(VKV_ERR_UNSUPPORTED,
                             "attention: the cache exceeds one storage range and its per-head stride of %llu bytes "
                             "is not a multiple of the storage alignment %llu",
                             (unsigned long long)(k_row * p->n_ctx_max), (unsigned long long)vkv_ops_align(gpu));
        heads_per = (vkv_ops_max_range(gpu) - used_last) / head_bytes + 1;
    }
    if (heads_per > gpu->caps->max_workgroup_count[2]) heads_per = gpu->caps->max_workgroup_count[2];

    const uint32_t rows = p->n_q * group; /* (query, head) rows per KV head */
    uint32_t n_split = decode ? vkv_attn_decode_splits(p->n_kv) : 1;
    const uint32_t split_len = (uint32_t)(((uint64_t)p->n_kv + n_split - 1) / n_split);
    /* f16 or f32 caches of one type have their own kernels; the rest read each
     * row type at run time. The decode path's kernels (split, or one pass over
     * few rows) run narrow workgroups: a tile of a few rows leaves most of a
     * wide one idle, and CPU devices pay for every idle invocation. */
    const bool any = p->k_type != p->v_type || vkv_kv_type_quantized(p->k_type), f16 = p->k_type == VKV_F16;
    vkv_kernel kern = n_split > 1 ? (any ? VKV_K_ATTN_DECODE_ANY : f16 ? VKV_K_ATTN_DECODE_F16 : VKV_K_ATTN_DECODE_F32)
                    : decode      ? (any ? VKV_K_ATTN_ROWS_ANY : f16 ? VKV_K_ATTN_ROWS_F16 : VKV_K_ATTN_ROWS_F32)
                                  : (any ? VKV_K_ATTN_PREFILL_ANY : f16 ? VKV_K_ATTN_PREFILL_F16 : VKV_K_ATTN_PREFILL_F32);
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, kern);
    /* attn.comp sums its key groups through one vec4 of the K/V tile per thread. */
    if (wg > VKV_ATTN_SKV_VEC4) return vkv_error(VKV_ERR_UNSUPPORTED, "attention: workgroup of %u exceeds the shared tile", wg);
    uint32_t tq, tk;
    vkv_attn_tiles(hd, rows, decode, wg, &tq, &tk);
    const uint64_t row_tiles = ((uint64_t)rows + tq - 1) / tq;
    if (row_tiles > gpu->caps->max_workgroup_count[0])
        return vkv_error(VKV_ERR_UNSUPPORTED, "attention: %u queries x %u heads per KV head is too many for one call; "
                                              "split the batch", p->n_q, group);

    vkv_view dst = out;
    uint64_t dst_bytes = qo_bytes;
    if (n_split > 1) {
        dst_bytes = partial_bytes(p, n_split);
        if ((st = check_view(gpu, scratch, dst_bytes, "the decode scratch")) ||
            (st = check_single_range(gpu, dst_bytes, "the decode scratch")))
            return st;
        dst = scratch;
    }

    for (uint32_t h0 = 0; h0 < p->n_kv_head; h0 += (uint32_t)heads_per) {
        uint32_t nh = p->n_kv_head - h0 < heads_per ? p->n_kv_head - h0 : (uint32_t)heads_per;
        const uint64_t n_used = (uint64_t)p->n_ctx_max * (nh - 1) + (p->n_kv ? p->n_kv : 1); /* rows bound */
        vkv_pc_attn pc = {p->n_q, p->n_head, p->n_kv_head, hd, p->n_ctx_max, p->n_kv, p->pos0, p->scale,
                          tq, tk, h0, split_len, n_split, p->k_type, p->v_type};
        vkv_binding b[4] = {vkv_ops_bind(q, 0, qo_bytes), vkv_ops_bind(k, k_row * p->n_ctx_max * h0, k_row * n_used),
                            vkv_ops_bind(v, v_row * p->n_ctx_max * h0, v_row * n_used), vkv_ops_bind(dst, 0, dst_bytes)};
        if ((st = vkv_dispatch(gpu, kern, b, 4, &pc, (uint32_t)row_tiles, n_split, nh))) return st;
    }
    if (n_split == 1) return VKV_OK;

    /* Combine the splits: one invocation per output vec4. */
    const uint64_t n_vec4 = (uint64_t)p->n_q * p->n_head * (hd / 4);
    const uint32_t rwg = vkv_kernel_workgroup_size(gpu, VKV_K_ATTN_DECODE_REDUCE);
    uint64_t groups = (n_vec4 + rwg - 1) / rwg, mx = gpu->caps->max_workgroup_count[0];
    if (mx > 65535) mx = 65535;
    uint32_t gx = (uint32_t)(groups < mx ? groups : mx), gy = (uint32_t)((groups + gx - 1) / gx);
    vkv_pc_attn_decode_reduce rpc = {p->n_q * p->n_head, hd / 4, n_split, gx};
    vkv_binding rb[2] = {vkv_ops_bind(scratch, 0, dst_bytes), vkv_ops_bind(out, 0, qo_bytes)};
    return vkv_dispatch(gpu, VKV_K_ATTN_DECODE_REDUCE, rb, 2, &rpc, gx, gy, 1);
}

/* ---- paged decode: every sequence of a step, one query each ---- */

_Static_assert(VKV_PAGED_ITEM_SPLITS >= VKV_ATTN_MAX_SPLITS, "a work item's split must fit its field");

/* Entry words of one sequence (shaders/attn_paged.comp). */
enum { PAGED_N_KV, PAGED_ROW, PAGED_K_LIST, PAGED_V_LIST, PAGED_K_HEAD, PAGED_V_HEAD, PAGED_N_SPLIT, PAGED_PART };

static uint64_t pages_for(uint32_t n_kv, uint32_t page_shift)
{
    return ((uint64_t)n_kv + (1ull << page_shift) - 1) >> page_shift;
}

uint64_t vkv_paged_table_words(uint32_t n_seq, uint32_t max_kv, uint32_t page_shift)
{
    /* entries, work items, the reduce list, and a K and a V page list each */
    return (uint64_t)n_seq * (VKV_PAGED_SEQ_WORDS + vkv_attn_decode_splits(max_kv) + 1 + 2 * pages_for(max_kv, page_shift));
}

/* Partials of one sequence of n_split splits: [n_split, n_head, head_dim / 4 + 1] vec4. */
static uint64_t paged_part_bytes(const vkv_attn_params *p, uint32_t n_split)
{
    return n_split > 1 ? (uint64_t)n_split * p->n_head * (p->head_dim / 4 + 1) * 16 : 0;
}

uint64_t vkv_paged_scratch_bytes(const vkv_attn_params *p, uint32_t n_seq, uint32_t max_kv)
{
    uint64_t bytes = n_seq * paged_part_bytes(p, vkv_attn_decode_splits(max_kv));
    return bytes > 16 ? bytes : 16;
}

vkv_status vkv_paged_step_write(const vkv_attn_params *p, uint32_t page_shift, const vkv_paged_seq *seqs,
                                uint32_t n_seq, vkv_buffer *table, uint32_t cap, uint32_t *used, vkv_paged_step *out)
{
    memset(out, 0, sizeof *out);
    uint32_t *tab = vkv_buffer_map(table);
    if (!tab) return vkv_error(VKV_ERR_ARG, "paged attention: the step's table must be a host-visible buffer");
    if (page_shift > 16) return vkv_error(VKV_ERR_ARG, "paged attention: pages of 2^%u slots", page_shift);
    if (cap > vkv_buffer_size(table) / 4) cap = (uint32_t)(vkv_buffer_size(table) / 4);
    const uint64_t k_row = vkv_kv_row_bytes(p->k_type, p->head_dim), v_row = vkv_kv_row_bytes(p->v_type, p->head_dim);
    const uint64_t page = 1ull << page_shift;
    uint64_t words = (uint64_t)n_seq * (VKV_PAGED_SEQ_WORDS + 1);
    for (uint32_t s = 0; s < n_seq; s++)
        words += vkv_attn_decode_splits(seqs[s].n_kv) + 2 * pages_for(seqs[s].n_kv, page_shift);
    if (*used > cap || words > cap - *used)
        return vkv_error(VKV_ERR_ARG, "paged attention: the step's table needs %llu words, %u are left",
                         (unsigned long long)words, *used <= cap ? cap - *used : 0);
    vkv_paged_step st = {.n_seq = n_seq, .page_shift = page_shift, .seq_base = *used, .row_align = 16};
    st.item_base = st.seq_base + n_seq * VKV_PAGED_SEQ_WORDS;
    uint32_t w = st.item_base;
    /* work items first (their count is known), then the reduce list, then the page lists */
    for (uint32_t s = 0; s < n_seq; s++)
        for (uint32_t k = 0; k < vkv_attn_decode_splits(seqs[s].n_kv); k++) tab[w++] = s * VKV_PAGED_ITEM_SPLITS + k;
    st.n_items = w - st.item_base;
    st.list_base = w;
    for (uint32_t s = 0; s < n_seq; s++)
        if (vkv_attn_decode_splits(seqs[s].n_kv) > 1) tab[w++] = s;
    st.n_list = w - st.list_base;
    uint64_t part = 0;
    for (uint32_t s = 0; s < n_seq; s++) {
        const vkv_paged_seq *q = &seqs[s];
        if (!q->n_kv) return vkv_error(VKV_ERR_ARG, "paged attention: sequence %u has no slot for its token", s);
        const uint32_t n_split = vkv_attn_decode_splits(q->n_kv);
        const uint64_t n_pages = pages_for(q->n_kv, page_shift);
        uint32_t *e = tab + st.seq_base + s * VKV_PAGED_SEQ_WORDS;
        if (q->k_head_bytes % 4 || q->v_head_bytes % 4 || q->k_head_bytes / 4 > UINT32_MAX / p->n_kv_head ||
            q->v_head_bytes / 4 > UINT32_MAX / p->n_kv_head)
            return vkv_error(VKV_ERR_ARG, "paged attention: sequence %u's head strides %llu, %llu bytes are not "
                             "32-bit word counts", s, (unsigned long long)q->k_head_bytes, (unsigned long long)q->v_head_bytes);
        while (q->k_head_bytes % st.row_align || q->v_head_bytes % st.row_align) st.row_align /= 2;
        e[PAGED_N_KV] = q->n_kv;
        e[PAGED_ROW] = q->row;
        e[PAGED_K_HEAD] = (uint32_t)(q->k_head_bytes / 4);
        e[PAGED_V_HEAD] = (uint32_t)(q->v_head_bytes / 4);
        e[PAGED_N_SPLIT] = n_split;
        e[PAGED_PART] = (uint32_t)(part / 16);
        part += paged_part_bytes(p, n_split);
        for (int kv = 0; kv < 2; kv++) {
            const uint64_t *pages = kv ? q->v_pages : q->k_pages;
            const uint64_t row = kv ? v_row : k_row, head = kv ? q->v_head_bytes : q->k_head_bytes;
            e[kv ? PAGED_V_LIST : PAGED_K_LIST] = w;
            for (uint64_t i = 0; i < n_pages; i++) {
                /* the last row of the last head this page holds */
                const uint64_t rows_in = i + 1 < n_pages ? page : q->n_kv - i * page;
                const uint64_t end = pages[i] + (p->n_kv_head - 1) * head + rows_in * row;
                if (pages[i] % 4 || end > (uint64_t)UINT32_MAX + 1)
                    return vkv_error(VKV_ERR_ARG, "paged attention: sequence %u's %s page %llu at byte %llu is not "
                                     "word-aligned or reaches past 4 GiB", s, kv ? "V" : "K",
                                     (unsigned long long)i, (unsigned long long)pages[i]);
                while (pages[i] % st.row_align) st.row_align /= 2;
                uint64_t *reach = kv ? &st.v_end : &st.k_end;
                if (end > *reach) *reach = end;
                tab[w++] = (uint32_t)(pages[i] / 4);
            }
        }
    }
    st.words = w - st.seq_base;
    st.part_bytes = part;
    *used = w;
    *out = st;
    return VKV_OK;
}

/* Checks shared by the store and the attention: shapes, and the pools' reach. */
static vkv_status check_paged(const vkv_gpu *gpu, const vkv_attn_params *p, const vkv_paged_step *step,
                              vkv_view k_pool, vkv_view v_pool, const char *op)
{
    vkv_status st;
    if ((st = check_params(gpu, p))) return st;
    if ((st = vkv_ops_check_view(gpu, k_pool, step->k_end, op, "the K pool")) ||
        (st = vkv_ops_check_view(gpu, v_pool, step->v_end, op, "the V pool")) ||
        (st = vkv_ops_check_single_range(gpu, step->k_end, op, "the K pool's reach")) ||
        (st = vkv_ops_check_single_range(gpu, step->v_end, op, "the V pool's reach")) ||
        (st = vkv_ops_check_single_range(gpu, 4ull * (step->seq_base + step->words), op, "the step's table")))
        return st;
    if (p->n_kv_head > gpu->caps->max_workgroup_count[2] || step->n_items > gpu->caps->max_workgroup_count[1])
        return vkv_error(VKV_ERR_UNSUPPORTED, "%s: %u work items x %u KV heads exceed the device's grid", op,
                         step->n_items, p->n_kv_head);
    return VKV_OK;
}

vkv_status vkv_op_kv_store_paged(vkv_gpu *gpu, const vkv_attn_params *p, const vkv_paged_step *step,
                                 const vkv_buffer *table, vkv_view k_src, vkv_view v_src, uint32_t n_rows,
                                 vkv_view k_pool, vkv_view v_pool)
{
    vkv_status st;
    const char *op = "paged append";
    if (!step->n_seq) return VKV_OK;
    if ((st = check_paged(gpu, p, step, k_pool, v_pool, op))) return st;
    const uint64_t src_bytes = 4ull * n_rows * p->n_kv_head * p->head_dim;
    if ((st = vkv_ops_check_view(gpu, k_src, src_bytes, op, "the keys")) ||
        (st = vkv_ops_check_view(gpu, v_src, src_bytes, op, "the values")) ||
        (st = vkv_ops_check_single_range(gpu, src_bytes, op, "the keys")))
        return st;
    const uint32_t *tab = vkv_buffer_map(table);
    for (uint32_t s = 0; s < step->n_seq; s++)
        if (tab[step->seq_base + s * VKV_PAGED_SEQ_WORDS + PAGED_ROW] >= n_rows)
            return vkv_error(VKV_ERR_ARG, "%s: sequence %u's row is outside the %u rows", op, s, n_rows);
    vkv_pc_kv_store_paged pc = {step->n_seq, p->n_kv_head, p->head_dim, p->k_type,
                                p->v_type, step->page_shift, step->seq_base};
    vkv_binding b[5] = {vkv_ops_bind(k_src, 0, src_bytes), vkv_ops_bind(v_src, 0, src_bytes),
                        vkv_ops_bind(k_pool, 0, step->k_end), vkv_ops_bind(v_pool, 0, step->v_end),
                        vkv_ops_bind(vkv_view_of(table), 0, 4ull * (step->seq_base + step->words))};
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, VKV_K_KV_STORE_PAGED);
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, ((uint64_t)step->n_seq * p->n_kv_head * 2 + wg - 1) / wg, &gx, &gy);
    return vkv_dispatch(gpu, VKV_K_KV_STORE_PAGED, b, 5, &pc, gx, gy, 1);
}

vkv_status vkv_op_attention_paged(vkv_gpu *gpu, const vkv_attn_params *p, const vkv_paged_step *step,
                                  const vkv_buffer *table, vkv_view q, vkv_view out, uint32_t n_rows,
                                  vkv_view k_pool, vkv_view v_pool, vkv_view scratch)
{
    vkv_status st;
    const char *op = "paged attention";
    if (!step->n_seq) return VKV_OK;
    if ((st = check_paged(gpu, p, step, k_pool, v_pool, op))) return st;
    const uint32_t group = p->n_head / p->n_kv_head, hd = p->head_dim;
    const uint64_t qo_bytes = 4ull * n_rows * p->n_head * hd;
    const uint64_t part = step->part_bytes ? step->part_bytes : 16;
    if ((st = check_view(gpu, q, qo_bytes, "q")) || (st = check_view(gpu, out, qo_bytes, "the output")) ||
        (st = check_single_range(gpu, qo_bytes, "q")) ||
        (step->part_bytes && ((st = check_view(gpu, scratch, part, "the partials")) ||
                              (st = check_single_range(gpu, part, "the partials")))))
        return st;
    const uint32_t *tab = vkv_buffer_map(table);
    for (uint32_t s = 0; s < step->n_seq; s++)
        if (tab[step->seq_base + s * VKV_PAGED_SEQ_WORDS + PAGED_ROW] >= n_rows)
            return vkv_error(VKV_ERR_ARG, "%s: sequence %u's row is outside the %u rows", op, s, n_rows);
    /* attn_rows' (and attn_decode's) workgroup and tiles for one query: the same arithmetic */
    /* one row type for K and V, every row on its words: its own kernel; the
     * rest decoded at run time */
    const vkv_kernel kern = p->k_type != p->v_type                          ? VKV_K_ATTN_PAGED_ANY
                          : p->k_type == VKV_F16 && step->row_align >= 8  ? VKV_K_ATTN_PAGED_F16
                          : p->k_type == VKV_F32 && step->row_align >= 16 ? VKV_K_ATTN_PAGED_F32
                                                                          : VKV_K_ATTN_PAGED_ANY;
    const uint32_t wg = vkv_kernel_workgroup_size(gpu, kern);
    if (wg > VKV_ATTN_SKV_VEC4) return vkv_error(VKV_ERR_UNSUPPORTED, "attention: workgroup of %u exceeds the shared tile", wg);
    uint32_t tq, tk;
    vkv_attn_tiles(hd, group, true, wg, &tq, &tk);
    const uint32_t row_tiles = (group + tq - 1) / tq;
    const uint64_t tab_bytes = 4ull * (step->seq_base + step->words);
    vkv_pc_attn_paged pc = {p->n_head, p->n_kv_head, hd, p->scale, tq, tk, p->k_type,
                            p->v_type, step->page_shift, step->seq_base, step->item_base};
    /* the partials' binding needs a buffer even when nothing writes it */
    const vkv_view part_view = step->part_bytes ? scratch : out;
    vkv_binding b[6] = {vkv_ops_bind(q, 0, qo_bytes), vkv_ops_bind(k_pool, 0, step->k_end),
                        vkv_ops_bind(v_pool, 0, step->v_end), vkv_ops_bind(vkv_view_of(table), 0, tab_bytes),
                        vkv_ops_bind(out, 0, qo_bytes), vkv_ops_bind(part_view, 0, step->part_bytes ? part : qo_bytes)};
    if ((st = vkv_dispatch(gpu, kern, b, 6, &pc, row_tiles, step->n_items, p->n_kv_head))) return st;
    if (!step->n_list) return VKV_OK;
    const uint32_t rwg = vkv_kernel_workgroup_size(gpu, VKV_K_ATTN_PAGED_REDUCE);
    uint32_t gx, gy;
    vkv_ops_spread_groups(gpu, ((uint64_t)step->n_list * p->n_head * (hd / 4) + rwg - 1) / rwg, &gx, &gy);
    vkv_pc_attn_paged_reduce rpc = {p->n_head, hd / 4, step->seq_base, step->list_base, step->n_list, gx};
    vkv_binding rb[3] = {vkv_ops_bind(vkv_view_of(table), 0, tab_bytes), vkv_ops_bind(scratch, 0, part),
                         vkv_ops_bind(out, 0, qo_bytes)};
    return vkv_dispatch(gpu, VKV_K_ATTN_PAGED_REDUCE, rb, 3, &rpc, gx, gy, 1);
}
