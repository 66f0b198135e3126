/* Greedy generation with optional compression (see generate.h). */
#include "eval/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* argmax; ties go to the lowest id (the sampler's greedy rule). */
static int32_t argmax(const float *logits, int32_t n, const vkv_tokenizer *tok, int32_t stop_id, bool forbid_stop)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (forbid_stop && (i == stop_id || vkv_tokenizer_is_eog(tok, i))) continue;
        if (best < 0 || logits[i] > logits[best] || (isnan(logits[best]) && !isnan(logits[i]))) best = i;
    }
    return best < 0 ? 0 : best;
}

void vkv_gen_result_free(vkv_gen_result *r)
{
    if (!r) return;
    free(r->text);
    r->text = NULL;
}

vkv_status vkv_generate(vkv_ctx *ctx, const vkv_model *m, const vkv_tokenizer *tok, const int32_t *ids, size_t n_ids,
                        size_t n_context, const vkv_gen_params *p, vkv_gen_result *out)
{
    memset(out, 0, sizeof *out);
    const vkv_hparams *hp = &m->hp;
    if (!n_ids) return vkv_error(VKV_ERR_ARG, "the prompt is empty");
    if (n_context > n_ids) n_context = n_ids;
    if (!n_context) n_context = n_ids;
    out->n_prompt = (uint32_t)n_ids;
    vkv_status st;
    float *logits = NULL;
    int32_t *gen = NULL;
    vkv_press_session *session = NULL;
    vkv_vector_report report = {0};
    if ((st = vkv_ctx_reset(ctx))) return st;
    if ((uint64_t)n_ids + 1 > vkv_ctx_n_ctx(ctx))
        return vkv_error(VKV_ERR_ARG, "the prompt (%zu tokens) does not fit the %u-token context", n_ids,
                         vkv_ctx_n_ctx(ctx));
    if (!(logits = malloc(sizeof *logits * hp->n_vocab)) || !(gen = malloc(sizeof *gen * (p->max_new + 1)))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto out;
    }
    uint32_t n_first = (uint32_t)(p->press && p->query_aware ? n_ids : n_context);
    double t0 = now_s();
    if (p->press) {
        vkv_vector_params vp = {.press = p->press, .pp = vkv_press_params_default(p->compression), .vector = p->vector,
                                .pa = p->pa, .w = p->w, .lean = false, .context_ids = ids, .kvzip = p->kvzip};
        uint32_t extra = vkv_press_session_extra_tokens(&vp, n_first);
        if ((uint64_t)n_first + extra > vkv_ctx_n_ctx(ctx)) {
            st = vkv_error(VKV_ERR_ARG, "%s needs %u + %u cache slots during compression; the context has %u",
                           p->press->name, n_first, extra, vkv_ctx_n_ctx(ctx));
            goto out;
        }
        if ((st = vkv_press_session_create(ctx, m, &vp, n_first, &session)) ||
            (st = vkv_ctx_eval(ctx, ids, n_first, false, logits)))
            goto out;
        double tc = now_s();
        out->prefill_s += tc - t0;
        if ((st = vkv_press_session_compress(session, &report))) goto out;
        out->compress_s = now_s() - tc;
        out->n_compressed = n_first;
        out->pa = p->vector ? report.pa : 0;
        vkv_kv_memory mem = vkv_ctx_kv_memory(ctx);
        out->kv_bytes = mem.k_retained + mem.v_retained + mem.k_approximated;
        out->kv_bytes_full = mem.uncompressed_context;
        double t1 = now_s();
        if (n_first < n_ids && (st = vkv_ctx_eval(ctx, ids + n_first, (uint32_t)(n_ids - n_first), false, logits)))
            goto out;
        out->prefill_s += now_s() - t1;
    } else {
        /* Context and question as separate chunks, as with a press. */
        if ((st = vkv_ctx_eval(ctx, ids, n_first, false, logits))) goto out;
        vkv_kv_memory mem = vkv_ctx_kv_memory(ctx);
        out->kv_bytes = out->kv_bytes_full = mem.uncompressed_context;
        if (n_first < n_ids && (st = vkv_ctx_eval(ctx, ids + n_first, (uint32_t)(n_ids - n_first), false, logits)))
            goto out;
        out->prefill_s = now_s() - t0;
    }

    double tg = now_s();
    out->stop = "max tokens";
    uint32_t n_gen = 0;
    while (n_gen < p->max_new) {
        int32_t id = argmax(logits, (int32_t)hp->n_vocab, tok, p->stop_id, p->min_one && n_gen == 0);
        gen[n_gen++] = id;
        if (vkv_tokenizer_is_eog(tok, id)) { out->stop = "eog"; break; }
        if (id == p->stop_id) { out->stop = "stop token"; break; }
        if (n_gen == p->max_new) break;
        if (vkv_ctx_n_past(ctx) >= vkv_ctx_n_ctx(ctx)) { out->stop = "context full"; break; }
        if ((st = vkv_ctx_eval(ctx, &id, 1, false, logits))) goto out;
    }
    out->gen_s = now_s() - tg;
    out->n_gen = n_gen;
    /* decode(skip_special_tokens=True): end-of-generation tokens are dropped */
    size_t k = 0;
    for (uint32_t i = 0; i < n_gen; i++)
        if (!vkv_tokenizer_is_eog(tok, gen[i])) gen[k++] = gen[i];
    if ((st = vkv_detokenize(tok, gen, k, false, &out->text, &out->len))) goto out;
    if (p->strip_spm_space && vkv_tokenizer_type(tok) == VKV_VOCAB_SPM && out->len && out->text[0] == ' ') {
        memmove(out->text, out->text + 1, out->len);
        out->len--;
    }
out:
    vkv_press_session_free(session);
    vkv_vector_report_free(&report);
    free(logits);
    free(gen);
    if (st) vkv_gen_result_free(out);
    return st;
}
