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
