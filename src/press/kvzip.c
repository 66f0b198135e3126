/* KVzip (kvpress's KVzipPress, n_sink 4, layerwise off): the scorer and the
 * reconstruction prompt (see kvzip.h).
 *
 * Scores. While the model repeats the context chunk [span0, span1) (the
 * driver's reconstruction pass), each repeat query at position p >= n attends,
 * as kvpress's score_kvzip subsamples the keys, to the sinks
 * [0, min(n_sink, span0)), the chunk [span0, span1) and the repeated tokens
 * n .. p (causal), softmax in fp32 with scale 1/sqrt(d) over exactly those;
 * a chunk token's score is the largest weight it gets from any repeat query
 * (the prompt's included) and any query head of its KV head's group. Tokens
 * of the template prefix are never repeated: kvpress scores the first
 * n_sink of them 1 (sinks) and the others 0, and the chunk scores overwrite
 * the sinks when there is no prefix; the same here: score = 1 for
 * j < min(n_sink, prefix), else the captured maximum (0 if never repeated).
 *
 * GPU: capture_gpu = span attention (press/span_attn.c) in max mode into the
 * layer's state [n_kv_head, n]; score_gpu = shaders/press_from_state.comp.
 * The reference covers one pass: q_host holds its queries (positions q_pos0
 * >= n), k_host the repeated keys in slots n.. . The selection is global
 * (global_selection: the driver's job). */
#include "press/kvzip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "press/span_attn.h"
#include "vk/gpu.h"

/* ---- the scorer ---- */

static uint64_t kvzip_state_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return 4ull * in->n_kv_head * in->n;
}

static uint64_t kvzip_scratch_bytes(const vkv_press_params *p, const vkv_press_layer *in)
{
    return vkv_span_scratch_bytes(in);
}

static vkv_span_attn kvzip_span(const vkv_press_params *p, const vkv_press_layer *in, uint32_t nq, uint32_t pos0)
{
    const uint32_t sink = p->n_sink < in->span0 ? p->n_sink : in->span0;
    return (vkv_span_attn){.nq = nq, .qpos0 = pos0, .a = sink, .b = in->span0, .c = in->span1, .r0 = in->n,
                           .t0 = in->span0, .t1 = in->span1, .max_mode = true, .acc = in->state,
                           .acc_stride = in->n};
}

static vkv_status kvzip_check(const vkv_press_params *p, const vkv_press_layer *in, uint32_t pos0, const char *name)
{
    vkv_status st = vkv_press_check_layer(p, in, name);
    if (st) return st;
    if (in->span0 > in->span1 || in->span1 > in->n)
        return vkv_error(VKV_ERR_ARG, "%s: repeated tokens [%u, %u) outside the %u-token context", name, in->span0,
                         in->span1, in->n);
    if (pos0 < in->n)
        return vkv_error(VKV_ERR_ARG, "%s: reconstruction queries at position %u, inside the %u-token context", name,
                         pos0, in->n);
    return VKV_OK;
}

static vkv_status kvzip_capture(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view q,
                                uint32_t n_tok, uint32_t pos0)
{
    vkv_status st = kvzip_check(p, in, pos0, "kvzip");
    if (st) return st;
    vkv_span_attn sa = kvzip_span(p, in, n_tok, pos0);
    sa.q = q;
    return vkv_span_gpu(gpu, in, &sa, "kvzip");
}

static uint32_t n_one(const vkv_press_params *p, const vkv_press_layer *in)
{
    return p->n_sink < in->prefix ? p->n_sink : in->prefix;
}

static vkv_status kvzip_gpu(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores)
{
    const char *name = "kvzip";
    vkv_status st;
    uint32_t gx;
    const uint64_t sb = 4ull * in->n_kv_head * in->n;
    if ((st = vkv_press_check_layer(p, in, name)) || (st = vkv_press_check_views(gpu, in, scores, name)) ||
        (st = vkv_ops_check_view(gpu, in->state, sb, name, "the state")) ||
        (st = vkv_press_groups_x(gpu, VKV_K_PRESS_FROM_STATE, in->n, name, &gx)))
        return st;
    vkv_pc_press_from_state pc = {in->n, 1, in->n_head / in->n_kv_head, n_one(p, in)};
    vkv_binding b[2] = {vkv_ops_bind(in->state, 0, sb), vkv_ops_bind(scores, 0, sb)};
    return vkv_dispatch(gpu, VKV_K_PRESS_FROM_STATE, b, 2, &pc, gx, in->n_kv_head, 1);
}

static vkv_status kvzip_ref(const vkv_press_params *p, const vkv_press_layer *in, float *scores)
{
    vkv_status st = kvzip_check(p, in, in->q_pos0, "kvzip");
    if (st) return st;
    if (!in->q_host) return vkv_error(VKV_ERR_ARG, "kvzip: the reference needs the reconstruction queries on the host");
    const size_t sn = (size_t)in->n_kv_head * in->n;
    double *acc = calloc(sn + 1, sizeof *acc);
    if (!acc) return vkv_error(VKV_ERR_OOM, "kvzip: out of host memory");
    vkv_span_attn sa = kvzip_span(p, in, in->n_q, in->q_pos0);
    if ((st = vkv_span_ref(in, &sa, in->q_host, acc))) {
        free(acc);
        return st;
    }
    const uint32_t one = n_one(p, in);
    for (uint32_t h = 0; h < in->n_kv_head; h++)
        for (uint32_t j = 0; j < in->n; j++)
            scores[(size_t)h * in->n + j] = j < one ? 1.0f : (float)acc[(size_t)h * in->n + j];
    free(acc);
    return VKV_OK;
}

const vkv_press_ops vkv_press_kvzip = {
    .name = "kvzip",
    .window = 0,
    .query_aware = false,
    .score_gpu = kvzip_gpu,
    .score_ref = kvzip_ref,
    .scratch_bytes = kvzip_scratch_bytes,
    .state_bytes = kvzip_state_bytes,
    .capture_gpu = kvzip_capture,
    .repeat_pass = true,
    .global_selection = true,
    /* Row, not its own global scope: on the default model the row pool gave the
     * lowest KL averaged over p_c 0.5 / 0.75 / 0.9 (models/README.md, "VECTOR's
     * pool scope"); global won at 0.5 and 0.75 and lost more at 0.9. */
    .pool_scope = VKV_POOL_ROW,
};

/* ---- the reconstruction prompt ---- */

static vkv_status tokenize_into(const vkv_tokenizer *tok, const char *text, size_t len, bool parse_special,
                                int32_t **ids, uint32_t *n)
{
    size_t count = 0;
    vkv_status st = vkv_tokenize(tok, text, len, false, parse_special, ids, &count);
    *n = (uint32_t)count;
    return st;
}

void vkv_kvzip_prompt_free(vkv_kvzip_prompt *p)
{
    if (!p) return;
    free(p->first);
    free(p->next);
    free(p->suffix);
    memset(p, 0, sizeof *p);
}

vkv_status vkv_kvzip_prompt_make(const vkv_tokenizer *tok, vkv_chat_template chat, vkv_kvzip_prompt *out)
{
    static const char first[] = "\n\nRepeat the previous context exactly.";
    static const char next[] = "\n\nRepeat the part of the previous context exactly, starting with";
    memset(out, 0, sizeof *out);
    vkv_status st;
    if ((st = tokenize_into(tok, first, strlen(first), false, &out->first, &out->n_first)) ||
        (st = tokenize_into(tok, next, strlen(next), false, &out->next, &out->n_next)))
        goto fail;
    if (chat == VKV_CHAT_UNKNOWN) {
        if ((st = tokenize_into(tok, "\n", 1, false, &out->suffix, &out->n_suffix))) goto fail;
        return VKV_OK;
    }
    /* kvpress: render one user message "dummy context" + "\n" + "#" * 13 with
     * the generation prompt; the prefix is what precedes the content, the
     * suffix what follows the separator. */
    static const char dummy[] = "dummy context", sep[] = "\n#############";
    char msg_text[sizeof dummy + sizeof sep], *text = NULL;
    size_t len;
    snprintf(msg_text, sizeof msg_text, "%s%s", dummy, sep);
    vkv_chat_msg msg = {"user", msg_text};
    if ((st = vkv_chat_apply(chat, &msg, 1, true, &text, &len))) goto fail;
    const char *at_dummy = strstr(text, dummy), *at_sep = strstr(text, sep);
    if (!at_dummy || !at_sep) {
        free(text);
        st = vkv_error(VKV_ERR_UNSUPPORTED, "kvzip: the chat template does not keep the user message as it is");
        goto fail;
    }
    int32_t *pre = NULL;
    uint32_t n_pre = 0;
    st = tokenize_into(tok, text, (size_t)(at_dummy - text), true, &pre, &n_pre);
    free(pre);
    if (!st) {
        const char *suf = at_sep + strlen(sep);
        st = tokenize_into(tok, suf, strlen(suf), true, &out->suffix, &out->n_suffix);
    }
    free(text);
    if (st) goto fail;
    out->prefix = n_pre + (vkv_tokenizer_adds_bos(tok) ? 1u : 0u);
    return VKV_OK;
fail:
    vkv_kvzip_prompt_free(out);
    return st;
}

/* Chunk i of the context after the prefix: [start, start + len). */
static void chunk_of(const vkv_kvzip_prompt *kp, uint32_t n, uint32_t i, uint32_t *start, uint32_t *len)
{
    const uint32_t m = n > kp->prefix ? n - kp->prefix : 0;
    const uint64_t s = (uint64_t)i * VKV_KVZIP_CHUNK;
    *start = kp->prefix + (uint32_t)s;
    *len = s >= m ? 0 : (m - s < VKV_KVZIP_CHUNK ? (uint32_t)(m - s) : VKV_KVZIP_CHUNK);
}

uint32_t vkv_kvzip_n_passes(const vkv_kvzip_prompt *kp, uint32_t n)
{
    const uint32_t m = n > kp->prefix ? n - kp->prefix : 0;
    return (m + VKV_KVZIP_CHUNK - 1) / VKV_KVZIP_CHUNK;
}

static uint32_t pass_tokens(const vkv_kvzip_prompt *kp, uint32_t n, uint32_t i)
{
    uint32_t start, len, prev_start, prev_len;
    chunk_of(kp, n, i, &start, &len);
    if (i == 0) return kp->n_first + kp->n_suffix + len;
    chunk_of(kp, n, i - 1, &prev_start, &prev_len);
    return kp->n_next + (prev_len < VKV_KVZIP_POSTFIX ? prev_len : VKV_KVZIP_POSTFIX) + kp->n_suffix + len;
}

uint32_t vkv_kvzip_max_pass_tokens(const vkv_kvzip_prompt *kp, uint32_t n)
{
    uint32_t mx = 0;
    for (uint32_t i = 0; i < vkv_kvzip_n_passes(kp, n); i++) {
        uint32_t t = pass_tokens(kp, n, i);
        if (t > mx) mx = t;
    }
    return mx;
}

static void put(int32_t *ids, uint32_t *k, const int32_t *src, uint32_t count)
{
    if (count) memcpy(ids + *k, src, sizeof *ids * count);
    *k += count;
}

void vkv_kvzip_pass(const vkv_kvzip_prompt *kp, const int32_t *context_ids, uint32_t n, uint32_t i, int32_t *ids,
                    uint32_t *n_ids, uint32_t *span0, uint32_t *span1)
{
    uint32_t start, len, k = 0;
    chunk_of(kp, n, i, &start, &len);
    if (i == 0) {
        put(ids, &k, kp->first, kp->n_first);
    } else {
        uint32_t prev_start, prev_len;
        chunk_of(kp, n, i - 1, &prev_start, &prev_len);
        const uint32_t q = prev_len < VKV_KVZIP_POSTFIX ? prev_len : VKV_KVZIP_POSTFIX;
        put(ids, &k, kp->next, kp->n_next);
        put(ids, &k, context_ids + prev_start + prev_len - q, q);
    }
    put(ids, &k, kp->suffix, kp->n_suffix);
    put(ids, &k, context_ids + start, len);
    *n_ids = k;
    *span0 = start;
    *span1 = start + len;
}
