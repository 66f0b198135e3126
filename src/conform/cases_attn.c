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

/* ---------------- grouped decode attention (attn_group) ---------------- */

typedef struct {
    vkv_attn_params p;
    vkv_attn_seq seqs[VKV_BATCH_MAX];
    uint32_t n_seq;
    guarded q, out;
} attn_group_args;

static vkv_status rec_attn_group(conform_ctx *c, void *p)
{
    attn_group_args *a = p;
    return vkv_op_attention_group(c->gpu, &a->p, a->seqs, a->n_seq, a->q.view, a->out.view, a->n_seq);
}

/* n_seq sequences of one query each, cache lengths spread over [1, 256]
 * (within one decode split), caches of their own slots per head (n_ctx_max
 * less 3 a sequence), their q / out rows in reverse order, through
 * attn_group: two results, "attn_group"
 * against vkv_ref_attention at the f32 threshold, and "attn_group bitwise"
 * against vkv_op_attention (the per-sequence attn_rows kernel) on each
 * sequence alone, compared by bytes (the batched decode step's rows must be
 * the single-sequence decode's, infer/forward.h). */
vkv_status case_attention_group(conform_ctx *c, vkv_dtype t, uint32_t n_head, uint32_t n_kv_head, uint32_t hd,
                                uint32_t n_seq, uint32_t n_ctx_max)
{
    char shape[96];
    snprintf(shape, sizeof shape, "hd %u heads %u/%u seqs %u slots %u-3i", hd, n_head, n_kv_head, n_seq, n_ctx_max);
    if (!conform_reserve_results(c, 2)) return vkv_error(VKV_ERR_OOM, "out of host memory");
    conform_result *r = conform_new_result(c, "attn_group", vkv_dtype_get(t)->name, shape);
    conform_result *rb = conform_new_result(c, "attn_group bitwise", vkv_dtype_get(t)->name, shape);
    if (!r || !rb) return vkv_error(VKV_ERR_OOM, "out of host memory");
    attn_group_args a = {.n_seq = n_seq};
    a.p = (vkv_attn_params){1, n_head, n_kv_head, hd, n_ctx_max, 0, 0, (float)(1.0 / sqrt(hd)), t, t};
    const size_t row = (size_t)n_head * hd, qn = n_seq * row, cache_bytes = vkv_kv_cache_bytes(t, n_kv_head, n_ctx_max, hd);
    const uint32_t least_slots = n_ctx_max - 3 * (n_seq - 1);
    const uint32_t max_kv = least_slots < VKV_ATTN_SPLIT_KEYS ? least_slots : VKV_ATTN_SPLIT_KEYS;
    guarded k[VKV_BATCH_MAX] = {0}, v[VKV_BATCH_MAX] = {0};
    attn_args one = {.path = VKV_ATTN_AUTO};
    float *q = conform_random_f32(c, qn), *ref = malloc(qn * 4), *got = malloc(qn * 4), *single = malloc(qn * 4);
    void *kc = malloc(cache_bytes), *vc = malloc(cache_bytes);
    vkv_status st = VKV_OK;
    if (n_seq > VKV_BATCH_MAX || n_ctx_max < 3 * n_seq) {
        st = vkv_error(VKV_ERR_ARG, "attn_group case: %u sequences of up to %u slots", n_seq, n_ctx_max);
        goto done;
    }
    if (!q || !ref || !got || !single || !kc || !vc) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto done;
    }
    for (uint32_t i = 0; i < n_seq; i++) {
        /* lengths 1, 38, 75, ...: every sequence its own, in a cache of its own stride */
        const uint32_t n_kv = 1 + (i * 37) % max_kv, n_slots = n_ctx_max - 3 * i;
        const size_t seq_cache_bytes = vkv_kv_cache_bytes(t, n_kv_head, n_slots, hd);
        vkv_attn_params pi = a.p;
        pi.n_ctx_max = n_slots;
        pi.n_kv = n_kv;
        pi.pos0 = n_kv - 1;
        float *ksrc = conform_random_f32(c, (size_t)n_kv * n_kv_head * hd), *vsrc = conform_random_f32(c, (size_t)n_kv * n_kv_head * hd);
        if (!ksrc || !vsrc) {
            free(ksrc); free(vsrc);
            st = vkv_error(VKV_ERR_OOM, "out of host memory");
            goto done;
        }
        conform_poison_unused_slots(&pi, t, kc);
        conform_poison_unused_slots(&pi, t, vc);
        vkv_kv_cache_store(t, kc, n_kv_head, n_slots, hd, 0, ksrc, n_kv);
        vkv_kv_cache_store(t, vc, n_kv_head, n_slots, hd, 0, vsrc, n_kv);
        free(ksrc); free(vsrc);
        const uint32_t qrow = n_seq - 1 - i;
        vkv_ref_attention(&pi, q + qrow * row, kc, vc, ref + qrow * row);
        if ((st = conform_guarded_create(c, seq_cache_bytes, kc, &k[i])) ||
            (st = conform_guarded_create(c, seq_cache_bytes, vc, &v[i])))
            goto done;
        a.seqs[i] = (vkv_attn_seq){k[i].view, v[i].view, n_kv, qrow, n_slots};
    }
    if (!vkv_attn_group_fits(c->gpu, &a.p, a.seqs, n_seq)) {
        r->skipped = r->pass = rb->skipped = rb->pass = true;
        snprintf(r->note, sizeof r->note, "no dynamic indexing of storage-buffer arrays or too few descriptors");
        snprintf(rb->note, sizeof rb->note, "%s", r->note);
        goto done;
    }
    double ms = 0, ms_single = 0;
    bool guards, guards_single = true, nanm;
    if ((st = conform_guarded_create(c, qn * 4, q, &a.q)) || (st = conform_guarded_create(c, qn * 4, NULL, &a.out)) ||
        (st = conform_run_recorded(c, rec_attn_group, &a, &ms)) || (st = conform_guarded_read(c, &a.out, got, &guards)))
        goto done;
    conform_finish(r, conform_nmse_f32(ref, got, qn, &nanm), nanm, guards, NMSE_F32, ms);

    /* Each sequence alone through vkv_op_attention. */
    for (uint32_t i = 0; i < n_seq; i++) {
        double ms1 = 0;
        bool g1;
        one.p = a.p;
        one.p.n_ctx_max = a.seqs[i].n_slots;
        one.p.n_kv = a.seqs[i].n_kv;
        one.p.pos0 = a.seqs[i].n_kv - 1;
        one.k = k[i];
        one.v = v[i];
        const size_t qrow = a.seqs[i].row;
        if ((st = conform_guarded_create(c, row * 4, q + qrow * row, &one.q)) ||
            (st = conform_guarded_create(c, row * 4, NULL, &one.out)) ||
            (st = conform_guarded_create(c, vkv_attn_scratch_bytes(&one.p), NULL, &one.scratch)) ||
            (st = conform_run_recorded(c, rec_attn, &one, &ms1)) ||
            (st = conform_guarded_read(c, &one.out, single + qrow * row, &g1)))
            goto done;
        conform_guarded_destroy(c, &one.q); conform_guarded_destroy(c, &one.out); conform_guarded_destroy(c, &one.scratch);
        guards_single &= g1;
        ms_single += ms1;
    }
    conform_finish_bitwise(rb, single, got, qn, guards_single, ms_single);
done:
    conform_guarded_destroy(c, &one.q); conform_guarded_destroy(c, &one.out); conform_guarded_destroy(c, &one.scratch);
    for (uint32_t i = 0; i < n_seq && i < VKV_BATCH_MAX; i++) {
        conform_guarded_destroy(c, &k[i]);
        conform_guarded_destroy(c, &v[i]);
    }
    conform_guarded_destroy(c, &a.q); conform_guarded_destroy(c, &a.out);
    free(q); free(ref); free(got); free(single); free(kc); free(vc);
    return st;
}
