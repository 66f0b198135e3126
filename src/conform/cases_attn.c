/* The conformance cases of attention (prefill and decode paths). */
#include "conform/cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_attn.h"

/* ---------------- attention (prefill and decode paths) ---------------- */

typedef struct {
    vkv_attn_params p;
    vkv_attn_path path;
    guarded q, k, v, scratch, out;
} attn_args;

static vkv_status rec_attn(conform_ctx *c, void *p)
{
    attn_args *a = p;
    return vkv_op_attention(c->gpu, a->path, &a->p, a->q.view, a->k.view, a->v.view, a->scratch.view, a->out.view);
}

/* One attention call against vkv_ref_attention. The reference reads the same
 * f16-rounded (or quantized) cache as the GPU, so every cache type keeps the
 * f32 threshold: the only differences are f32 vs double accumulation and exp.
 * q_amp > 1 sharpens the softmax (scores of tens) to exercise the running-max
 * rescaling. */
vkv_status case_attention(conform_ctx *c, vkv_attn_path path, vkv_dtype kt, vkv_dtype vt, uint32_t n_head,
                          uint32_t n_kv_head, uint32_t hd, uint32_t n_q, uint32_t pos0, uint32_t n_kv,
                          uint32_t n_ctx_max, float q_amp)
{
    char shape[96], types[32];
    snprintf(shape, sizeof shape, "hd %u heads %u/%u q %u pos0 %u kv %u/%u%s", hd, n_head, n_kv_head, n_q, pos0, n_kv,
             n_ctx_max, q_amp != 1.0f ? " sharp" : "");
    if (kt == vt) snprintf(types, sizeof types, "%s", vkv_dtype_get(kt)->name);
    else snprintf(types, sizeof types, "%s/%s", vkv_dtype_get(kt)->name, vkv_dtype_get(vt)->name); /* K/V */
    conform_result *r = conform_new_result(c, path == VKV_ATTN_DECODE ? "attn_decode" : "attn_prefill", types, shape);
    if (!r) return vkv_error(VKV_ERR_OOM, "out of host memory");
    attn_args a = {.path = path};
    a.p = (vkv_attn_params){n_q, n_head, n_kv_head, hd, n_ctx_max, n_kv, pos0, (float)(1.0 / sqrt(hd)), kt, vt};
    size_t qn = (size_t)n_q * n_head * hd, k_bytes = vkv_kv_cache_bytes(kt, n_kv_head, n_ctx_max, hd);
    size_t v_bytes = vkv_kv_cache_bytes(vt, n_kv_head, n_ctx_max, hd);
    uint64_t scratch_bytes = vkv_attn_scratch_bytes(&a.p);
    float *q = conform_random_f32(c, qn), *ksrc = conform_random_f32(c, (size_t)n_kv * n_kv_head * hd);
    float *vsrc = conform_random_f32(c, (size_t)n_kv * n_kv_head * hd);
    float *ref = malloc(qn * 4), *got = malloc(qn * 4);
    void *kc = malloc(k_bytes), *vc = malloc(v_bytes), *scr = malloc(scratch_bytes);
    vkv_status st = VKV_OK;
    if (!q || !ksrc || !vsrc || !ref || !got || !kc || !vc || !scr) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    for (size_t i = 0; i < qn; i++) q[i] *= q_amp;
    conform_poison_unused_slots(&a.p, kt, kc);
    conform_poison_unused_slots(&a.p, vt, vc);
    vkv_kv_cache_store(kt, kc, n_kv_head, n_ctx_max, hd, 0, ksrc, n_kv);
    vkv_kv_cache_store(vt, vc, n_kv_head, n_ctx_max, hd, 0, vsrc, n_kv);
    vkv_ref_attention(&a.p, q, kc, vc, ref);
    if ((st = conform_guarded_create(c, qn * 4, q, &a.q)) || (st = conform_guarded_create(c, k_bytes, kc, &a.k)) ||
        (st = conform_guarded_create(c, v_bytes, vc, &a.v)) || (st = conform_guarded_create(c, qn * 4, NULL, &a.out)) ||
        (st = conform_guarded_create(c, scratch_bytes, NULL, &a.scratch)))
        goto done;
    double ms = 0;
    bool guards, scratch_guards = true, nanm;
    if ((st = conform_run_recorded(c, rec_attn, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards)) ||
        (st = conform_guarded_read(c, &a.scratch, scr, &scratch_guards)))
        goto done;
    double err = conform_nmse_f32(ref, got, qn, &nanm);
    conform_finish(r, err, nanm, guards && scratch_guards, NMSE_F32, ms);
done:
    conform_guarded_destroy(c, &a.q); conform_guarded_destroy(c, &a.k); conform_guarded_destroy(c, &a.v); conform_guarded_destroy(c, &a.out);
    conform_guarded_destroy(c, &a.scratch);
    free(q); free(ksrc); free(vsrc); free(ref); free(got); free(kc); free(vc); free(scr);
    return st;
}

/* ---------------- paged decode: append and attention (kv_store_paged, attn_paged) ---------------- */

#define PAGED_CASE_MAX_SEQS 8

typedef struct {
    vkv_attn_params p;
    vkv_paged_seq seqs[PAGED_CASE_MAX_SEQS];
    uint32_t n_seq, n_rows, page_shift;
    vkv_buffer *table;
    vkv_paged_step step;
    guarded pool, k_src, v_src, q, out, scratch;
} attn_paged_args;

static vkv_status rec_attn_paged(conform_ctx *c, void *p)
{
    attn_paged_args *a = p;
    uint32_t used = 0;
    vkv_status st = vkv_paged_step_write(&a->p, a->page_shift, a->seqs, a->n_seq, a->table,
                                         (uint32_t)(vkv_buffer_size(a->table) / 4), &used, &a->step);
    if (!st) st = vkv_op_kv_store_paged(c->gpu, &a->p, &a->step, a->table, a->k_src.view, a->v_src.view, a->n_rows,
                                        a->pool.view, a->pool.view);
    if (!st) st = vkv_op_attention_paged(c->gpu, &a->p, &a->step, a->table, a->q.view, a->out.view, a->n_rows,
                                         a->pool.view, a->pool.view, a->scratch.view);
    return st;
}

/* Places a run of `bytes` at the pool's end (word-aligned). */
static uint64_t pool_take(uint64_t *end, uint64_t bytes)
{
    const uint64_t at = *end;
    *end += (bytes + 3) & ~3ull;
    return at;
}

/* n_seq sequences (at most 8) of lengths 1, a page less one, a page and one,
 * 2 splits, a partly full last page, 3 splits, ... appending their token and
 * attending in one step: K and V pages of every sequence in one pool, in a
 * shuffled order; sequence 1 (when there is one) a contiguous cache with
 * spare slots (the server's plain caches), the others one page for all heads
 * of page_slots slots. Three results: "kv_store_paged" (the pool, bytewise,
 * against vkv_ref_paged_store), "attn_paged" (against vkv_ref_attention over
 * the gathered cache, f32 threshold) and "attn_paged bitwise" (against
 * vkv_op_attention on each sequence alone over its gathered cache). Unused
 * pool bytes are 0xff: NaN in every row type, so a stray read fails. */
vkv_status case_attention_paged(conform_ctx *c, vkv_dtype kt, vkv_dtype vt, uint32_t n_head, uint32_t n_kv_head,
                                uint32_t hd, uint32_t page_shift, uint32_t n_seq)
{
    char shape[96], types[32];
    const uint32_t page = 1u << page_shift;
    snprintf(shape, sizeof shape, "hd %u heads %u/%u seqs %u page %u", hd, n_head, n_kv_head, n_seq, page);
    if (kt == vt) snprintf(types, sizeof types, "%s", vkv_dtype_get(kt)->name);
    else snprintf(types, sizeof types, "%s/%s", vkv_dtype_get(kt)->name, vkv_dtype_get(vt)->name);
    if (!conform_reserve_results(c, 3)) return vkv_error(VKV_ERR_OOM, "out of host memory");
    conform_result *rs = conform_new_result(c, "kv_store_paged", types, shape);
    conform_result *r = conform_new_result(c, "attn_paged", types, shape);
    conform_result *rb = conform_new_result(c, "attn_paged bitwise", types, shape);
    if (!rs || !r || !rb) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if (n_seq < 1 || n_seq > PAGED_CASE_MAX_SEQS)
        return vkv_error(VKV_ERR_ARG, "attn_paged case: %u sequences (1 to %u)", n_seq, PAGED_CASE_MAX_SEQS);
    const uint32_t lens[PAGED_CASE_MAX_SEQS] = {1, page - 1, 300, 2 * page + 3, 600, 17, 256, 257};
    attn_paged_args a = {.n_seq = n_seq, .n_rows = n_seq + 1, .page_shift = page_shift};
    a.p = (vkv_attn_params){1, n_head, n_kv_head, hd, 1, 0, 0, (float)(1.0 / sqrt(hd)), kt, vt};
    const uint64_t k_row = vkv_kv_row_bytes(kt, hd), v_row = vkv_kv_row_bytes(vt, hd);
    const size_t qrow = (size_t)n_head * hd, kvrow = (size_t)n_kv_head * hd;
    uint64_t *pages[2][PAGED_CASE_MAX_SEQS] = {{0}};
    uint32_t n_pages[PAGED_CASE_MAX_SEQS];
    float *q = conform_random_f32(c, a.n_rows * qrow), *k_src = conform_random_f32(c, a.n_rows * kvrow);
    float *v_src = conform_random_f32(c, a.n_rows * kvrow);
    float *ref = calloc(a.n_rows * qrow, 4), *got = calloc(a.n_rows * qrow, 4), *single = calloc(a.n_rows * qrow, 4);
    uint8_t *pool = NULL, *want = NULL, *gpu_pool = NULL, *kc = NULL, *vc = NULL;
    attn_args one = {.path = VKV_ATTN_AUTO};
    vkv_status st = VKV_OK;
    if (!q || !k_src || !v_src || !ref || !got || !single) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    /* The pages: every (sequence, K or V, page) in a shuffled order; sequence 1's whole cache is one run. */
    uint32_t order[2 * PAGED_CASE_MAX_SEQS * 64], n_order = 0;
    for (uint32_t s = 0; s < n_seq; s++) {
        n_pages[s] = (lens[s] + page - 1) / page;
        if (n_pages[s] > 64) { st = vkv_error(VKV_ERR_ARG, "attn_paged case: pages of %u slots are too small", page); goto done; }
        for (int kv = 0; kv < 2; kv++) {
            if (!(pages[kv][s] = malloc(n_pages[s] * sizeof(uint64_t)))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
            for (uint32_t i = 0; i < (s == 1 ? 1u : n_pages[s]); i++) order[n_order++] = (s << 8) | (kv << 7) | i;
        }
    }
    for (uint32_t i = n_order; i > 1; i--) { /* Fisher-Yates */
        uint32_t j = (uint32_t)(vkv_rng_u64(&c->rng) % i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    uint64_t end = 0;
    for (uint32_t o = 0; o < n_order; o++) {
        const uint32_t s = order[o] >> 8, kv = (order[o] >> 7) & 1, i = order[o] & 127;
        const uint64_t row = kv ? v_row : k_row;
        if (s == 1) { /* contiguous, two spare slots a head: [n_kv_head, n_slots] rows */
            const uint32_t n_slots = n_pages[s] * page + 2;
            const uint64_t at = pool_take(&end, row * n_kv_head * n_slots);
            for (uint32_t p = 0; p < n_pages[s]; p++) pages[kv][s][p] = at + (uint64_t)p * page * row;
            if (kv) a.seqs[s].v_head_bytes = row * n_slots;
            else a.seqs[s].k_head_bytes = row * n_slots;
        } else {
            pages[kv][s][i] = pool_take(&end, row * n_kv_head * page);
            if (kv) a.seqs[s].v_head_bytes = row * page;
            else a.seqs[s].k_head_bytes = row * page;
        }
    }
    end = (end + 15) & ~15ull;
    pool = malloc(end);
    want = malloc(end);
    gpu_pool = malloc(end);
    kc = malloc(k_row * n_kv_head * 600);
    vc = malloc(v_row * n_kv_head * 600);
    if (!pool || !want || !gpu_pool || !kc || !vc) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    memset(pool, 0xff, end);
    for (uint32_t s = 0; s < n_seq; s++) {
        vkv_paged_seq *sq = &a.seqs[s];
        sq->n_kv = lens[s];
        sq->row = n_seq - 1 - s; /* rows in reverse order, the last row nobody's */
        sq->k_pages = pages[0][s];
        sq->v_pages = pages[1][s];
        for (uint32_t j = 0; j + 1 < sq->n_kv; j++) { /* the tokens before this step's */
            float *kx = conform_random_f32(c, kvrow), *vx = conform_random_f32(c, kvrow);
            if (!kx || !vx) { free(kx); free(vx); st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
            vkv_ref_paged_store(kt, pool, sq->k_pages, sq->k_head_bytes, page_shift, n_kv_head, hd, j, kx);
            vkv_ref_paged_store(vt, pool, sq->v_pages, sq->v_head_bytes, page_shift, n_kv_head, hd, j, vx);
            free(kx); free(vx);
        }
    }
    memcpy(want, pool, end);
    for (uint32_t s = 0; s < n_seq; s++) {
        const vkv_paged_seq *sq = &a.seqs[s];
        vkv_ref_paged_store(kt, want, sq->k_pages, sq->k_head_bytes, page_shift, n_kv_head, hd, sq->n_kv - 1, k_src + sq->row * kvrow);
        vkv_ref_paged_store(vt, want, sq->v_pages, sq->v_head_bytes, page_shift, n_kv_head, hd, sq->n_kv - 1, v_src + sq->row * kvrow);
        vkv_attn_params pi = a.p;
        pi.n_ctx_max = pi.n_kv = sq->n_kv;
        pi.pos0 = sq->n_kv - 1;
        vkv_ref_paged_gather(kt, want, sq->k_pages, sq->k_head_bytes, page_shift, n_kv_head, hd, sq->n_kv, kc);
        vkv_ref_paged_gather(vt, want, sq->v_pages, sq->v_head_bytes, page_shift, n_kv_head, hd, sq->n_kv, vc);
        vkv_ref_attention(&pi, q + sq->row * qrow, kc, vc, ref + sq->row * qrow);
    }
    const uint64_t table_words = vkv_paged_table_words(n_seq, 600, page_shift);
    if ((st = vkv_buffer_create(c->gpu, 4 * table_words, VKV_MEM_HOST, "a paged step's table", &a.table)) ||
        (st = conform_guarded_create(c, end, pool, &a.pool)) ||
        (st = conform_guarded_create(c, a.n_rows * kvrow * 4, k_src, &a.k_src)) ||
        (st = conform_guarded_create(c, a.n_rows * kvrow * 4, v_src, &a.v_src)) ||
        (st = conform_guarded_create(c, a.n_rows * qrow * 4, q, &a.q)) ||
        (st = conform_guarded_create(c, a.n_rows * qrow * 4, NULL, &a.out)) ||
        (st = conform_guarded_create(c, vkv_paged_scratch_bytes(&a.p, n_seq, 600), NULL, &a.scratch)))
        goto done;
    double ms = 0, ms_single = 0;
    bool g_pool, g_out, g_scr, g_single = true, nanm;
    float *scr = malloc(vkv_paged_scratch_bytes(&a.p, n_seq, 600));
    if (!scr) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto done; }
    if ((st = conform_run_recorded(c, rec_attn_paged, &a, &ms)) || (st = conform_guarded_read(c, &a.pool, gpu_pool, &g_pool)) ||
        (st = conform_guarded_read(c, &a.out, got, &g_out)) || (st = conform_guarded_read(c, &a.scratch, scr, &g_scr))) {
        free(scr);
        goto done;
    }
    free(scr);
    conform_finish_bitwise(rs, (const float *)want, (const float *)gpu_pool, end / 4, g_pool, ms);
    /* the spare row (nobody's) is zeros on both sides: calloc, and never written */
    conform_finish(r, conform_nmse_f32(ref, got, n_seq * qrow, &nanm), nanm, g_out && g_scr, NMSE_F32, ms);

    /* Each sequence alone through vkv_op_attention over its gathered (contiguous) cache. */
    for (uint32_t s = 0; s < n_seq; s++) {
        const vkv_paged_seq *sq = &a.seqs[s];
        double ms1 = 0;
        bool g1;
        one.p = a.p;
        one.p.n_ctx_max = one.p.n_kv = sq->n_kv;
        one.p.pos0 = sq->n_kv - 1;
        vkv_ref_paged_gather(kt, want, sq->k_pages, sq->k_head_bytes, page_shift, n_kv_head, hd, sq->n_kv, kc);
        vkv_ref_paged_gather(vt, want, sq->v_pages, sq->v_head_bytes, page_shift, n_kv_head, hd, sq->n_kv, vc);
        if ((st = conform_guarded_create(c, k_row * n_kv_head * sq->n_kv, kc, &one.k)) ||
            (st = conform_guarded_create(c, v_row * n_kv_head * sq->n_kv, vc, &one.v)) ||
            (st = conform_guarded_create(c, qrow * 4, q + sq->row * qrow, &one.q)) ||
            (st = conform_guarded_create(c, qrow * 4, NULL, &one.out)) ||
            (st = conform_guarded_create(c, vkv_attn_scratch_bytes(&one.p), NULL, &one.scratch)) ||
            (st = conform_run_recorded(c, rec_attn, &one, &ms1)) ||
            (st = conform_guarded_read(c, &one.out, single + sq->row * qrow, &g1)))
            goto done;
        conform_guarded_destroy(c, &one.k); conform_guarded_destroy(c, &one.v); conform_guarded_destroy(c, &one.q);
        conform_guarded_destroy(c, &one.out); conform_guarded_destroy(c, &one.scratch);
        g_single &= g1;
        ms_single += ms1;
    }
    conform_finish_bitwise(rb, single, got, n_seq * qrow, g_single, ms_single);
done:
    conform_guarded_destroy(c, &one.k); conform_guarded_destroy(c, &one.v); conform_guarded_destroy(c, &one.q);
    conform_guarded_destroy(c, &one.out); conform_guarded_destroy(c, &one.scratch);
    conform_guarded_destroy(c, &a.pool); conform_guarded_destroy(c, &a.k_src); conform_guarded_destroy(c, &a.v_src);
    conform_guarded_destroy(c, &a.q); conform_guarded_destroy(c, &a.out); conform_guarded_destroy(c, &a.scratch);
    vkv_buffer_destroy(c->gpu, a.table);
    for (uint32_t s = 0; s < PAGED_CASE_MAX_SEQS; s++) { free(pages[0][s]); free(pages[1][s]); }
    free(q); free(k_src); free(v_src); free(ref); free(got); free(single);
    free(pool); free(want); free(gpu_pool); free(kc); free(vc);
    return st;
}
