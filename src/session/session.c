/* The session (see session.h). */
#include "session/session.h"

#include "kvlayout/kv_counts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* KVzip's reconstruction prompt differs for prompts in the chat template and
 * plain ones (LongBench's few-shot and code tasks). */
struct vkv_session_kvzip {
    vkv_kvzip_prompt chat, plain;
    bool have_chat, have_plain;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of host memory"); }

vkv_stopwatch vkv_session_stopwatch(const vkv_session *s)
{
    return (vkv_stopwatch){now_s(), vkv_gpu_pipeline_stats(s->gpu).seconds};
}

double vkv_stopwatch_seconds(const vkv_session *s, vkv_stopwatch w)
{
    return now_s() - w.t0 - (vkv_gpu_pipeline_stats(s->gpu).seconds - w.pipeline0);
}

static vkv_status choose_chat_template(vkv_session *s, const vkv_session_params *p)
{
    s->chat = VKV_CHAT_UNKNOWN;
    if (!p->chat || !strcmp(p->chat, "none") || !s->tok) return VKV_OK;
    if (!strcmp(p->chat, "model")) return vkv_tokenizer_chat_template(s->tok, &s->chat);
    if (strcmp(p->chat, "auto")) {
        s->chat = vkv_chat_template_detect(p->chat);
        return VKV_OK;
    }
    /* A template not recognised is refused with a warning naming it (what it
     * begins with), and prompts go without one. */
    if (vkv_tokenizer_chat_template_source(s->tok) && vkv_tokenizer_chat_template(s->tok, &s->chat))
        fprintf(stderr, "vkvector %s: warning: %s; prompts go without a template (--chat-template NAME chooses one)\n",
                p->cmd ? p->cmd : "", vkv_last_error());
    return VKV_OK;
}

vkv_status vkv_session_open(const vkv_session_params *p, vkv_session **out)
{
    *out = NULL;
    vkv_session *s = calloc(1, sizeof *s);
    if (!s || !(s->kvzip = calloc(1, sizeof *s->kvzip)) || !(s->seq = calloc(1, sizeof *s->seq))) {
        if (s) free(s->kvzip);
        free(s);
        return oom();
    }
    s->seq->s = s;
    /* the file's or the checkpoint folder's name ("dir/" names dir) */
    char trimmed[sizeof s->model_name];
    snprintf(trimmed, sizeof trimmed, "%s", p->model_path);
    for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--) trimmed[n - 1] = 0;
    const char *base = strrchr(trimmed, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", base && base[1] ? base + 1 : trimmed);
    char *dot = strrchr(s->model_name, '.');
    if (dot && !strcmp(dot, ".gguf")) *dot = 0;
    vkv_status st;
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &s->inst)) ||
        (st = vkv_gpu_create(s->inst, p->device, &s->gpu)))
        goto fail;
    double t0 = now_s();
    if ((st = vkv_model_load(s->gpu, p->model_path, &s->model))) goto fail;
    s->load_seconds = now_s() - t0;
    if (!p->no_tokenizer && (st = vkv_session_load_tokenizer(s))) goto fail;
    if ((st = choose_chat_template(s, p))) goto fail;
    s->chat = vkv_chat_template_thinking(s->chat, p->thinking);
    if (p->load_calib) {
        char def[1100];
        const char *path = p->calib_path;
        if (!path) {
            vkv_calib_default_path(p->model_path, def, sizeof def);
            path = def;
        }
        if ((st = vkv_calib_load(path, s->model, &s->calib))) goto fail;
    }
    *out = s;
    return VKV_OK;
fail:
    vkv_session_close(s);
    return st;
}

vkv_status vkv_session_load_tokenizer(vkv_session *s)
{
    if (s->tok) return VKV_OK;
    /* a checkpoint folder's tokenizer is its tokenizer.json */
    return s->model->gguf ? vkv_tokenizer_load(s->model->gguf, &s->tok) : vkv_tokenizer_load_hf(s->model->path, &s->tok);
}

void vkv_session_close(vkv_session *s)
{
    if (!s) return;
    if (s->kvzip->have_chat) vkv_kvzip_prompt_free(&s->kvzip->chat);
    if (s->kvzip->have_plain) vkv_kvzip_prompt_free(&s->kvzip->plain);
    free(s->kvzip);
    vkv_session_seq_free(s->seq);
    vkv_calib_free(s->calib);
    vkv_tokenizer_free(s->tok);
    if (s->gpu) vkv_model_free(s->gpu, s->model);
    vkv_gpu_destroy(s->gpu);
    vkv_instance_destroy(s->inst);
    free(s);
}

/* The one place a sequence's context is made (docs/ARCHITECTURE.md §1, "Sequences"). */
static vkv_status make_ctx(vkv_session *s, const vkv_ctx_params *cp, vkv_ctx **out)
{
    return vkv_ctx_create(s->gpu, s->model, cp, out);
}

vkv_status vkv_session_seq_create(vkv_session *s, const vkv_ctx_params *cp, vkv_session_seq **out)
{
    vkv_session_seq *q = calloc(1, sizeof *q);
    *out = NULL;
    if (!q) return oom();
    q->s = s;
    vkv_status st = make_ctx(s, cp, &q->ctx);
    if (st) {
        free(q);
        return st;
    }
    *out = q;
    return VKV_OK;
}

void vkv_session_seq_free(vkv_session_seq *q)
{
    if (!q) return;
    vkv_session_seq_prefill_end(q, NULL);
    vkv_decode_press_free(q->decode);
    vkv_ctx_free(q->ctx);
    free(q->row_chunk);
    free(q);
}

/* The most bytes one buffer the context binds whole may take on s's device:
 * its storage range (maxStorageBufferRange, rounded down to 16 as the ops
 * bind it) and its largest allocation (maxMemoryAllocationSize). */
static uint64_t buffer_limit(const vkv_session *s)
{
    const vkv_caps *caps = vkv_gpu_caps(s->gpu);
    uint64_t limit = caps->max_storage_buffer_range & ~(uint64_t)15;
    if (caps->max_memory_allocation && caps->max_memory_allocation < limit) limit = caps->max_memory_allocation;
    return limit;
}

/* Whether a context of cp fits s's device: every byte in its heap beside
 * the weights, its largest buffer within buffer_limit. */
static bool ctx_fits(const vkv_session *s, const vkv_ctx_params *cp, uint64_t heap, vkv_ctx_memory *plan)
{
    *plan = vkv_ctx_plan_memory(&s->model->hp, cp);
    return s->model->weight_bytes + plan->scratch_bytes + plan->kv_bytes <= heap &&
           plan->largest_kv_buffer <= buffer_limit(s);
}

/* The longest context like cp that fits (ctx_fits), below cp's; 0 when none does. */
static uint32_t longest_fitting_ctx(const vkv_session *s, const vkv_ctx_params *cp, uint64_t heap)
{
    vkv_ctx_params t = *cp;
    vkv_ctx_memory plan;
    uint32_t lo = 0, hi = vkv_ctx_plan_memory(&s->model->hp, cp).n_ctx; /* lo fits (or is 0), hi does not */
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        t.n_ctx = mid;
        t.n_kv_slots = cp->n_kv_slots && cp->n_kv_slots < mid ? cp->n_kv_slots : 0;
        if (ctx_fits(s, &t, heap, &plan)) lo = mid;
        else hi = mid;
    }
    return lo;
}

vkv_status vkv_session_reserve(vkv_session *s, const vkv_ctx_params *cp)
{
    /* the compressors hold the context: they go first */
    vkv_session_seq_prefill_end(s->seq, NULL);
    vkv_decode_press_free(s->seq->decode);
    s->seq->decode = NULL;
    vkv_ctx_free(s->seq->ctx);
    s->seq->ctx = NULL;
    free(s->seq->row_chunk); /* sized to the old context */
    s->seq->row_chunk = NULL;
    vkv_ctx_memory plan;
    const uint64_t heap = vkv_gpu_mem_stats(s->gpu).device_heap_bytes;
    if (ctx_fits(s, cp, heap, &plan)) return make_ctx(s, cp, &s->seq->ctx);
    /* the hint comes from the same limits: a context of that length fits both */
    const uint32_t fit = longest_fitting_ctx(s, cp, heap);
    char hint[96];
    if (fit) snprintf(hint, sizeof hint, "lower --ctx (at most %u tokens fit)", fit);
    else snprintf(hint, sizeof hint, "no context fits beside the weights");
    const uint64_t need = s->model->weight_bytes + plan.scratch_bytes + plan.kv_bytes;
    if (need > heap)
        return vkv_error(VKV_ERR_OOM, "a %u-token context does not fit device '%s': weights %.2f MiB + KV cache %.2f "
                                      "MiB + scratch %.2f MiB = %.2f MiB, over its %.2f MiB memory heap; %s",
                         plan.n_ctx, vkv_gpu_caps(s->gpu)->name, s->model->weight_bytes / 1048576.0,
                         plan.kv_bytes / 1048576.0, plan.scratch_bytes / 1048576.0, need / 1048576.0,
                         heap / 1048576.0, hint);
    return vkv_error(VKV_ERR_UNSUPPORTED, "a %u-token context does not fit device '%s': one layer's K or V cache would be "
                                  "%llu bytes, over the %llu bytes one buffer may take there (its storage buffer "
                                  "range and largest allocation); %s",
                     plan.n_ctx, vkv_gpu_caps(s->gpu)->name, (unsigned long long)plan.largest_kv_buffer,
                     (unsigned long long)buffer_limit(s), hint);
}

void vkv_prompt_free(vkv_prompt *p)
{
    if (!p) return;
    free(p->ids);
    memset(p, 0, sizeof *p);
}

/* Context with BOS, then "\n\n" + question without: the question is
 * separated from the context by a blank line. */
static vkv_status tokenize_apart(const vkv_tokenizer *tok, const char *text, size_t len, size_t split, bool special,
                                 vkv_prompt *out)
{
    int32_t *head = NULL, *tail = NULL;
    size_t n_head = 0, n_tail = 0;
    vkv_status st = vkv_tokenize(tok, text, split, true, special, &head, &n_head);
    if (!st && split < len) {
        size_t tl = len - split + 2;
        char *tail_text = malloc(tl + 1);
        if (!tail_text) st = oom();
        else {
            memcpy(tail_text, "\n\n", 2);
            memcpy(tail_text + 2, text + split, len - split);
            tail_text[tl] = 0;
            st = vkv_tokenize(tok, tail_text, tl, false, special, &tail, &n_tail);
            free(tail_text);
        }
    }
    if (!st && !(out->ids = malloc(sizeof *out->ids * (n_head + n_tail + 1)))) st = oom();
    if (!st) {
        memcpy(out->ids, head, sizeof *head * n_head);
        if (n_tail) memcpy(out->ids + n_head, tail, sizeof *tail * n_tail);
        out->n = n_head + n_tail;
        out->n_context = n_head;
    }
    free(head);
    free(tail);
    return st;
}

size_t vkv_prompt_compressed_part(const vkv_prompt *p, bool query_aware)
{
    size_t n = query_aware ? p->n_query_end : p->n_context;
    return n && n <= p->n ? n : p->n;
}

/* A user message the template cannot trim or split: the text the template
 * puts after it is the turn's closing and the assistant header. */
#define USER_TURN_MARKER "\x01VKVECTOR_TURN_END\x01"

/* Where query-aware compression ends (docs/ARCHITECTURE.md §5): before the
 * tokens of the template's closing of the user turn (and its assistant
 * header) when the question part ends with them, else the whole prompt (a
 * plain prompt has no closing). */
static vkv_status set_query_end(const vkv_session *s, vkv_chat_template t, bool chat, vkv_prompt *pr)
{
    pr->n_query_end = pr->n;
    if (!chat) return VKV_OK;
    vkv_chat_msg msg = {"user", USER_TURN_MARKER};
    char *rendered;
    size_t rendered_len;
    vkv_status st = vkv_chat_apply(t, &msg, 1, true, &rendered, &rendered_len);
    if (st) return st;
    const char *marker = strstr(rendered, USER_TURN_MARKER);
    int32_t *closing = NULL;
    size_t n_closing = 0;
    if (marker) {
        const char *after = marker + strlen(USER_TURN_MARKER);
        st = vkv_tokenize(s->tok, after, strlen(after), false, true, &closing, &n_closing);
    }
    if (!st && n_closing && n_closing <= pr->n - pr->n_context &&
        !memcmp(pr->ids + pr->n - n_closing, closing, n_closing * sizeof *closing))
        pr->n_query_end = pr->n - n_closing;
    free(closing);
    free(rendered);
    return st;
}

vkv_status vkv_session_tokenize(const vkv_session *s, const char *text, size_t len, size_t split, bool chat,
                                vkv_split_mode mode, vkv_prompt *out)
{
    memset(out, 0, sizeof *out);
    if (!s->tok) return vkv_error(VKV_ERR_ARG, "text prompts need the model's tokenizer");
    if (split > len) return vkv_error(VKV_ERR_ARG, "the question starts past the end of the prompt");
    char *wrapped = NULL;
    if (chat) {
        if (s->chat == VKV_CHAT_UNKNOWN) return vkv_error(VKV_ERR_ARG, "the prompt wants a chat template; the session has none");
        size_t wl, ws;
        vkv_status st = vkv_chat_wrap(s->chat, text, len, split, &wrapped, &wl, &ws);
        if (st) return st;
        /* Run's prompt without a question is all context, the template's
         * tail (the assistant header) included. */
        split = split == len && mode == VKV_SPLIT_APART ? wl : ws;
        text = wrapped;
        len = wl;
    }
    vkv_status st = mode == VKV_SPLIT_APART
                        ? tokenize_apart(s->tok, text, len, split, chat, out)
                        : vkv_tokenize_split(s->tok, text, len, split, chat, &out->ids, &out->n, &out->n_context);
    free(wrapped);
    if (!st) st = set_query_end(s, s->chat, chat, out);
    if (st) vkv_prompt_free(out);
    return st;
}

/* Where a chat's context ends (docs/SERVE.md, "The compressed-context
 * cache"): before the last user turn when messages come before it, so a
 * conversation's history, system prompt or document is the context and its
 * last question is not; the whole prompt when the last user message is the
 * first (there is nothing else to call the context) or when the rendered
 * history is not a token-aligned start of the rendered chat (the template
 * renders it otherwise alone, or a token straddles the boundary). text[0,
 * len): the chat rendered, out: its tokens, all context so far. */
static vkv_status chat_context_end(const vkv_session *s, vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs,
                                   const char *text, size_t len, vkv_prompt *out)
{
    size_t last_user = n_msgs;
    for (size_t i = 0; i < n_msgs; i++)
        if (!strcmp(msgs[i].role, "user")) last_user = i;
    if (last_user == n_msgs || last_user == 0) return VKV_OK;
    char *history;
    size_t history_len;
    vkv_status st = vkv_chat_apply(t, msgs, last_user, false, &history, &history_len);
    if (st) return st;
    int32_t *head = NULL, *tail = NULL;
    size_t n_head = 0, n_tail = 0;
    if (history_len && history_len < len && !memcmp(history, text, history_len) &&
        !(st = vkv_tokenize(s->tok, text, history_len, true, true, &head, &n_head)) &&
        !(st = vkv_tokenize(s->tok, text + history_len, len - history_len, false, true, &tail, &n_tail)) &&
        n_head + n_tail == out->n && !memcmp(head, out->ids, n_head * sizeof *head) &&
        !memcmp(tail, out->ids + n_head, n_tail * sizeof *tail))
        out->n_context = n_head;
    free(head);
    free(tail);
    free(history);
    return st;
}

vkv_status vkv_session_tokenize_chat(const vkv_session *s, vkv_chat_template t, const vkv_chat_msg *msgs,
                                     size_t n_msgs, vkv_prompt *out)
{
    memset(out, 0, sizeof *out);
    if (!s->tok) return vkv_error(VKV_ERR_ARG, "text prompts need the model's tokenizer");
    if (t == VKV_CHAT_UNKNOWN) return vkv_error(VKV_ERR_ARG, "a chat needs a chat template");
    char *text;
    size_t len;
    vkv_status st = vkv_chat_apply(t, msgs, n_msgs, true, &text, &len);
    if (st) return st;
    st = tokenize_apart(s->tok, text, len, len, true, out);
    if (!st) st = chat_context_end(s, t, msgs, n_msgs, text, len, out);
    free(text);
    if (!st) st = set_query_end(s, t, true, out);
    if (st) vkv_prompt_free(out);
    return st;
}

/* The reconstruction prompt of KVzip for chat or plain prompts, made once. */
static vkv_status kvzip_prompt(vkv_session *s, bool chat, const vkv_kvzip_prompt **out)
{
    vkv_session_kvzip *k = s->kvzip;
    bool *have = chat ? &k->have_chat : &k->have_plain;
    vkv_kvzip_prompt *p = chat ? &k->chat : &k->plain;
    if (!s->tok) return vkv_error(VKV_ERR_ARG, "KVzip needs the model's tokenizer for its reconstruction prompt");
    if (!*have) {
        vkv_status st = vkv_kvzip_prompt_make(s->tok, chat ? s->chat : VKV_CHAT_UNKNOWN, p);
        if (st) return st;
        *have = true;
    }
    *out = p;
    return VKV_OK;
}

/* The scorer's parameters for compression c: kvpress's defaults, the seed if
 * given, the sample's index. */
static vkv_press_params press_params(const vkv_compression *c)
{
    vkv_press_params pp = vkv_press_params_default(c->compression_ratio);
    if (c->press_seed_set) pp.seed = c->press_seed;
    pp.sample = c->sample;
    return pp;
}

/* The press driver's parameters for compression c of the given context. */
static vkv_status vector_params(vkv_session *s, const vkv_compression *c, const int32_t *ids, vkv_vector_params *vp)
{
    *vp = (vkv_vector_params){.press = c->press, .pp = press_params(c),
                              .vector = c->vector, .pa = c->p_a, .pool = c->pool, .map = c->map,
                              .keep_details = c->keep_details, .lean = c->lean, .context_ids = ids};
    if (c->vector) {
        if (!s->calib) return vkv_error(VKV_ERR_ARG, "VECTOR needs the calibration: the session has none");
        vp->w = s->calib->w;
        vp->w_joint = s->calib->w_joint;
    }
    /* At p_c = 0 nothing is scored and KVzip does not repeat the context. */
    if (c->press->repeat_pass && c->compression_ratio > 0) {
        bool chat = !c->plain_prompt && s->chat != VKV_CHAT_UNKNOWN;
        return kvzip_prompt(s, chat, &vp->kvzip);
    }
    return VKV_OK;
}

vkv_status vkv_session_press_room(vkv_session *s, const vkv_compression *c, uint32_t n_first, uint32_t *room)
{
    *room = 0;
    if (!c || !c->press) return VKV_OK;
    vkv_vector_params vp;
    vkv_status st = vector_params(s, c, NULL, &vp);
    if (!st) *room = vkv_press_session_extra_tokens(&vp, n_first);
    return st;
}

const char *vkv_compression_check(const vkv_session *s, const vkv_compression *c, char *msg, size_t size)
{
    const bool budget = c->decoding == VKV_DECODING_BUDGET;
    if (!c->press && (c->compress_every || c->compression_ratio > 0 || c->vector))
        return "compression, VECTOR and compression during generation need a press";
    if (budget && !c->compress_every != !c->max_kv_tokens) return "compress_every and max_kv_tokens go together";
    if (budget && c->compress_every && c->max_kv_tokens <= c->compress_every)
        return "max_kv_tokens must be larger than compress_every";
    if (c->p_a >= 0 && !c->vector) return "p_a needs VECTOR";
    if (c->vector && !s->calib) return "VECTOR needs the calibration: the session has none";
    return vkv_kv_check_ratios(c->compression_ratio, c->p_a, c->vector, msg, size);
}

/* The most tokens a compression at ratio pc leaves one (layer, KV head) of n. */
static uint32_t head_tokens(const vkv_session *s, const vkv_compression *c, double pc, uint32_t n)
{
    const vkv_hparams *hp = &s->model->hp;
    const vkv_press_ops *press = c->press;
    const vkv_press_params pp = vkv_press_params_default(pc);
    uint32_t most = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        uint32_t kept = press->n_kept ? press->n_kept(&pp, l, hp->n_layer, n) : vkv_kv_n_kept(pc, n);
        if (kept > n) kept = n;
        if (c->vector) {
            /* the pool's budget a over its rows, all of it in one head at most */
            const double pa = c->p_a >= 0 ? c->p_a : vkv_kv_default_pa(pc);
            const uint32_t rows = vkv_pool_rows(vkv_press_pool_scope(press, c->pool), hp->n_layer, hp->n_head_kv);
            const uint64_t pool_n = (uint64_t)n * rows, pool_kept = (uint64_t)kept * rows;
            const uint32_t a = pool_n > UINT32_MAX ? n : vkv_kv_tier_counts((uint32_t)pool_n, (uint32_t)pool_kept, pa, true).a;
            kept += a < n - kept ? a : n - kept;
        }
        if (kept > most) most = kept;
    }
    return most;
}

uint32_t vkv_compression_head_tokens(const vkv_session *s, const vkv_compression *c, uint32_t n_first)
{
    if (!c || !c->press || c->press->global_selection || !(c->compression_ratio > 0)) return 0;
    return head_tokens(s, c, c->compression_ratio, n_first);
}

const char *vkv_compression_check_first(const vkv_session *s, const vkv_compression *c, size_t n_first,
                                        const char *m_name, const char *pc_name, char *msg, size_t size)
{
    if (!c || !c->compress_every || c->decoding != VKV_DECODING_BUDGET || n_first > UINT32_MAX) return NULL;
    const uint32_t n = (uint32_t)n_first, kept = vkv_compression_head_tokens(s, c, n);
    const uint64_t room = 2ull * c->max_kv_tokens;
    if (kept <= room) return NULL;
    /* the least p_c in steps of 0.01 that keeps few enough, if any */
    double pc_ok = -1;
    for (int k = (int)ceil(c->compression_ratio * 100 + 1e-9); k <= 99 && pc_ok < 0; k++)
        if (head_tokens(s, c, k / 100.0, n) <= room && (!c->vector || c->p_a < 0 || c->p_a <= 1 - k / 100.0)) pc_ok = k / 100.0;
    int len = snprintf(msg, size, "%s %g keeps up to %u tokens of a (layer, KV head) of the %u-token context, more "
                                  "than the %llu (2 x %s %u) compression during generation gathers: %s must be at least %u",
                       pc_name, c->compression_ratio, kept, n, (unsigned long long)room, m_name, c->max_kv_tokens,
                       m_name, (kept + 1) / 2);
    if (pc_ok > 0 && len > 0 && (size_t)len < size) snprintf(msg + len, size - (size_t)len, ", or %s at least %g", pc_name, pc_ok);
    return msg;
}

uint32_t vkv_compression_kv_slots(const vkv_compression *c, size_t n_first, uint32_t room)
{
    if (!c || !c->compress_every || c->decoding != VKV_DECODING_BUDGET) return 0;
    uint64_t slots = c->max_kv_tokens, first = c->compression_ratio > 0 ? n_first + room : 0;
    return (uint32_t)(first > slots ? first : slots);
}

void vkv_prefill_free(vkv_prefill *p)
{
    if (!p) return;
    vkv_vector_report_free(&p->report);
    memset(p, 0, sizeof *p);
}

/* A prefill in progress (vkv_session_seq_prefill_begin .. _end). */
struct vkv_seq_prefill_run {
    const vkv_prompt *pr;
    vkv_logits_want want;
    float *logits;
    bool press;                /* compression after the first part */
    size_t n_first;            /* the part compression sees */
    size_t pos;                /* ids [0, pos) are in the cache */
    size_t chunk_from, chunk_to; /* the positions the last step evaluated */
    bool first_done;           /* the first part is in (and compressed): out.memory taken */
    bool on_grid;              /* chunks end on the n_batch grid of their segment (a reused prefix) */
    vkv_press_session *ps;
    vkv_prefill out;
};

/* Where the logits of the chunk ids [from, to) go, as the caller wants
 * them (NULL: nowhere); *all: every position's, not only the last's. */
static float *chunk_logits(const vkv_session_seq *q, size_t from, size_t to, bool *all)
{
    const vkv_seq_prefill_run *r = q->run;
    const size_t nv = q->s->model->hp.n_vocab;
    *all = r->want == VKV_LOGITS_ALL || r->want == VKV_LOGITS_REST || r->want == VKV_LOGITS_CHUNK;
    return r->want == VKV_LOGITS_ALL    ? r->logits + from * nv
           : r->want == VKV_LOGITS_CHUNK ? r->logits
           : r->want == VKV_LOGITS_REST ? (from < r->n_first ? NULL : r->logits + (from - r->n_first) * nv)
           : r->want == VKV_LOGITS_LAST ? (to == r->pr->n ? r->logits : NULL)
                                        : NULL;
}

/* Evaluates ids [from, to) as one chunk, with the logits the caller wants. */
static vkv_status eval_chunk(vkv_session_seq *q, size_t from, size_t to)
{
    bool all;
    float *dst = chunk_logits(q, from, to, &all);
    q->run->chunk_from = from;
    q->run->chunk_to = to;
    return vkv_ctx_eval(q->ctx, q->run->pr->ids + from, (uint32_t)(to - from), all && dst, dst);
}

/* The compressor of compression during generation for c (NULL when off). */
static vkv_status make_decode_press(vkv_session_seq *q, const vkv_compression *c)
{
    vkv_session *s = q->s;
    vkv_decode_press_free(q->decode);
    q->decode = NULL;
    if (!c || !c->compress_every) return VKV_OK;
    if (c->vector && !s->calib) return vkv_error(VKV_ERR_ARG, "VECTOR needs the calibration: the session has none");
    if (c->map == VKV_MAP_JOINT) return vkv_error(VKV_ERR_UNSUPPORTED, "compression during generation runs per-head maps");
    vkv_decode_params dp = {.press = c->press, .pp = press_params(c),
                            .vector = c->vector, .pa = c->p_a, .w = c->vector ? s->calib->w : NULL,
                            .rule = c->decoding, .every = c->compress_every, .max_tokens = c->max_kv_tokens,
                            .target_tokens = c->target_kv_tokens};
    return vkv_decode_press_create(q->ctx, s->model, &dp, &q->decode);
}

/* Compression reads an f16 or f32 plain cache of one type (the working
 * cache of a context reserved with .compress); quantized tiers are not
 * materialised. */
static vkv_status check_cache_types(const vkv_ctx *ctx, const vkv_compression *c, bool press)
{
    vkv_dtype kt = vkv_ctx_k_type(ctx), vt = vkv_ctx_v_type(ctx);
    vkv_dtype tk = vkv_ctx_tier_k_type(ctx), tv = vkv_ctx_tier_v_type(ctx);
    const char *kn = vkv_dtype_get(tk)->name, *vn = vkv_dtype_get(tv)->name;
    if (!c || (!press && !c->compress_every)) return VKV_OK;
    if (kt != vt || vkv_kv_type_quantized(kt))
        return vkv_error(VKV_ERR_UNSUPPORTED, "compression reads f16 or f32 caches of one type; this context holds %s "
                         "keys and %s values (reserve it with .compress for quantized tiers)", kn, vn);
    if (tk == kt && tv == vt) return VKV_OK;
    if (c->materialized)
        return vkv_error(VKV_ERR_UNSUPPORTED, "--materialized reads f16 or f32 tiers of one type, not %s keys and %s "
                         "values", kn, vn);
    return VKV_OK;
}

vkv_status vkv_session_seq_prefill_begin(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *pr,
                                         vkv_logits_want want, float *logits)
{
    vkv_session *s = q->s;
    vkv_session_seq_prefill_end(q, NULL);
    if (!q->ctx) return vkv_error(VKV_ERR_ARG, "the session has no context yet (vkv_session_reserve)");
    if (!pr->n) return vkv_error(VKV_ERR_ARG, "the prompt is empty");
    if (pr->n > vkv_ctx_n_ctx(q->ctx))
        return vkv_error(VKV_ERR_ARG, "the prompt (%zu tokens) does not fit the %u-token context", pr->n,
                         vkv_ctx_n_ctx(q->ctx));
    bool press = c && c->press && (c->compression_ratio > 0 || !c->compress_every);
    char why[400];
    if (press && vkv_compression_check_first(s, c, vkv_prompt_compressed_part(pr, c->query_aware), "max_kv_tokens",
                                             "compression", why, sizeof why))
        return vkv_error(VKV_ERR_ARG, "%s", why);
    vkv_status st = check_cache_types(q->ctx, c, press);
    if (st) return st;
    vkv_seq_prefill_run *r = calloc(1, sizeof *r);
    if (!r) return oom();
    *r = (vkv_seq_prefill_run){.pr = pr, .want = want, .logits = logits, .press = press,
                               .n_first = vkv_prompt_compressed_part(pr, press && c->query_aware)};
    r->out.n_first = (uint32_t)r->n_first;
    if (!q->row_chunk && !(q->row_chunk = malloc(sizeof *q->row_chunk * vkv_ctx_n_ctx(q->ctx)))) {
        st = oom();
        goto fail;
    }
    memset(q->row_chunk, 0, sizeof *q->row_chunk * vkv_ctx_n_ctx(q->ctx));
    if ((st = vkv_ctx_reset(q->ctx)) || (st = make_decode_press(q, c))) goto fail;
    if (press) {
        vkv_vector_params vp;
        if ((st = vector_params(s, c, pr->ids, &vp))) goto fail;
        uint32_t extra = vkv_press_session_extra_tokens(&vp, (uint32_t)r->n_first);
        if ((uint64_t)r->n_first + extra > vkv_ctx_kv_slots(q->ctx)) {
            st = vkv_error(VKV_ERR_ARG, "%s needs %zu + %u cache slots during compression; the cache has %u",
                           c->press->name, r->n_first, extra, vkv_ctx_kv_slots(q->ctx));
            goto fail;
        }
        if ((st = vkv_ctx_set_materialized(q->ctx, c->materialized)) ||
            (st = vkv_press_session_create(q->ctx, s->model, &vp, (uint32_t)r->n_first, &r->ps)))
            goto fail;
    }
    q->run = r;
    return VKV_OK;
fail:
    vkv_press_session_free(r->ps);
    free(r);
    return st;
}

/* The tokens the next chunk at r->pos takes under compression during
 * generation, at most `most`: up to the room the budget leaves (compressing
 * when none is left), or up to where kvpress's step counter fires (every
 * token after the context is a decoding step). *watched: the chunk runs
 * under the decode press; *counted: its tokens count as decoding steps. */
static vkv_status decode_chunk_limit(vkv_session_seq *q, size_t seg_to, size_t *most, bool *watched, bool *counted)
{
    const vkv_seq_prefill_run *r = q->run;
    *watched = *counted = false;
    if (!q->decode || (r->press && r->pos < r->n_first)) return VKV_OK;
    if (vkv_decode_rule_of(q->decode) == VKV_DECODING_KVPRESS) {
        if (seg_to <= r->n_first) return VKV_OK;
        uint32_t left = vkv_decode_steps_to_check(q->decode);
        if (*most > left) *most = left;
        *watched = *counted = true;
        return VKV_OK;
    }
    uint32_t room = vkv_decode_room(q->decode);
    vkv_status st;
    if (!room && ((st = vkv_decode_compress(q->decode)) || !(room = vkv_decode_room(q->decode))))
        return st ? st : vkv_error(VKV_ERR_ARG, "compression during generation left no room for a token");
    if (*most > room) *most = room;
    *watched = true;
    return VKV_OK;
}

/* Where the segment of the next chunk ends: the first part (what
 * compression sees), then the rest of the prompt. */
static size_t segment_end(const vkv_seq_prefill_run *r) { return r->pos < r->n_first ? r->n_first : r->pr->n; }

/* The chunk of a prefill from 0 that evaluates position pos: [*from, *to),
 * n_batch tokens from the start of its segment (the first part, what
 * compression sees, or the rest) on. */
static void grid_chunk(size_t pos, size_t n_first, size_t n, uint32_t n_batch, size_t *from, size_t *to)
{
    const size_t seg_from = pos < n_first ? 0 : n_first, seg_to = pos < n_first ? n_first : n;
    *from = seg_from + (pos - seg_from) / n_batch * n_batch;
    *to = *from + n_batch < seg_to ? *from + n_batch : seg_to;
}

/* The tokens of the next chunk before compression during generation limits
 * it: the segment's rest, at most the context's n_batch (on the grid: up to
 * the end of the grid's chunk). */
static size_t plain_chunk(const vkv_session_seq *q)
{
    const vkv_seq_prefill_run *r = q->run;
    if (r->on_grid) {
        size_t from, to;
        grid_chunk(r->pos, r->n_first, r->pr->n, vkv_ctx_n_batch(q->ctx), &from, &to);
        return to - r->pos;
    }
    size_t take = segment_end(r) - r->pos;
    return take < vkv_ctx_n_batch(q->ctx) ? take : vkv_ctx_n_batch(q->ctx);
}

/* After a chunk of `take` tokens that took `seconds`: the position, the
 * first part's end (without compression its memory is taken there), done. */
static void chunk_done(vkv_session_seq *q, size_t take, double seconds, bool *done)
{
    vkv_seq_prefill_run *r = q->run;
    r->out.prefill_s += seconds;
    for (size_t i = r->pos; i < r->pos + take; i++) q->row_chunk[i] = (uint32_t)take;
    r->pos += take;
    if (r->pos == r->n_first && !r->press) {
        r->out.memory = vkv_ctx_kv_memory(q->ctx);
        r->first_done = true;
    }
    *done = r->pos == r->pr->n && r->first_done;
}

vkv_status vkv_session_seq_prefill_next(vkv_session_seq *q, bool *done)
{
    vkv_seq_prefill_run *r = q->run;
    vkv_session *s = q->s;
    *done = false;
    if (!r) return vkv_error(VKV_ERR_ARG, "no prefill in progress (vkv_session_seq_prefill_begin)");
    r->chunk_from = r->chunk_to = r->pos;
    if (r->pos == r->pr->n && r->first_done) {
        *done = true; /* a reused compressed context that is the whole prompt */
        return VKV_OK;
    }
    vkv_status st;
    if (r->pos == r->n_first && !r->first_done) {
        /* the compressed part is in: compress it, a step of its own */
        vkv_stopwatch sw = vkv_session_stopwatch(s);
        if ((st = vkv_press_session_compress(r->ps, &r->out.report))) return st;
        r->out.compress_s = vkv_stopwatch_seconds(s, sw);
        r->out.compressed = true;
        r->out.memory = vkv_ctx_kv_memory(q->ctx);
        r->first_done = true;
        *done = r->pos == r->pr->n;
        return VKV_OK;
    }
    /* the next chunk: the first part, then the rest over the (compressed) cache */
    size_t seg_to = segment_end(r), take = plain_chunk(q);
    bool watched, counted;
    if ((st = decode_chunk_limit(q, seg_to, &take, &watched, &counted))) return st;
    vkv_stopwatch sw = vkv_session_stopwatch(s);
    if (watched) vkv_decode_watch_queries(q->decode);
    if ((st = eval_chunk(q, r->pos, r->pos + take))) return st;
    if (watched) vkv_decode_observe(q->decode);
    if (counted && (st = vkv_decode_count_steps(q->decode, (uint32_t)take))) return st;
    chunk_done(q, take, vkv_stopwatch_seconds(s, sw), done);
    return VKV_OK;
}

void vkv_session_seq_prefill_last_chunk(const vkv_session_seq *q, size_t *from, size_t *to)
{
    *from = q->run ? q->run->chunk_from : 0;
    *to = q->run ? q->run->chunk_to : 0;
}

uint32_t vkv_session_seq_reusable(const vkv_session_seq *q, const vkv_session_seq *from, const vkv_prompt *pr,
                                  uint32_t n_match, uint32_t page)
{
    return vkv_session_reusable(vkv_ctx_n_batch(q->ctx), vkv_ctx_n_ctx(q->ctx), from, pr, n_match, page);
}

uint32_t vkv_session_reusable(uint32_t n_batch, uint32_t n_ctx, const vkv_session_seq *from, const vkv_prompt *pr,
                              uint32_t n_match, uint32_t page)
{
    if (!from->row_chunk || !page || !pr->n) return 0;
    const size_t n = pr->n, n_first = vkv_prompt_compressed_part(pr, false);
    size_t most = n_match < n - 1 ? n_match : n - 1;
    if (most > vkv_ctx_n_past(from->ctx)) most = vkv_ctx_n_past(from->ctx);
    if (most > n_ctx) most = n_ctx;
    /* the rows from 0 on whose chunk took the kernels a prefill from 0 of pr gives them */
    size_t same = 0, from_g, to_g;
    while (same < most && from->row_chunk[same]) {
        grid_chunk(same, n_first, n, n_batch, &from_g, &to_g);
        if (!vkv_ctx_rows_share_bits(from->row_chunk[same], (uint32_t)(to_g - from_g))) break;
        same++;
    }
    for (size_t l = same / page * page; l; l -= page) {
        /* the first chunk after the prefix is the rest of the grid's chunk of l (the chunk itself when l starts it) */
        grid_chunk(l, n_first, n, n_batch, &from_g, &to_g);
        if (l == from_g || vkv_ctx_rows_share_bits((uint32_t)(to_g - l), (uint32_t)(to_g - from_g))) return (uint32_t)l;
    }
    return 0;
}

vkv_status vkv_session_seq_prefill_begin_from(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *pr,
                                              vkv_logits_want want, float *logits, const vkv_session_seq *from,
                                              uint32_t n_reuse)
{
    if (c && (c->press || c->compress_every))
        return vkv_error(VKV_ERR_ARG, "a prefill that compresses evaluates its whole prompt (its scorer watches it)");
    if (n_reuse && n_reuse >= pr->n)
        return vkv_error(VKV_ERR_ARG, "%u reused tokens of a %zu-token prompt (its last is evaluated)", n_reuse, pr->n);
    if (n_reuse && n_reuse > vkv_ctx_n_past(from->ctx))
        return vkv_error(VKV_ERR_ARG, "%u reused tokens of a %u-token cache", n_reuse, vkv_ctx_n_past(from->ctx));
    /* the rule, at exactly n_reuse (the caller vouches for the ids) */
    if (n_reuse && vkv_session_seq_reusable(q, from, pr, n_reuse, n_reuse) != n_reuse)
        return vkv_error(VKV_ERR_ARG, "%u reused tokens would not give a prefill's bits (vkv_session_seq_reusable)",
                         n_reuse);
    vkv_status st = vkv_session_seq_prefill_begin(q, c, pr, want, logits);
    if (st || !n_reuse) return st;
    st = vkv_ctx_copy_prefix(q->ctx, from->ctx, n_reuse);
    if (st) {
        vkv_session_seq_prefill_end(q, NULL);
        return st;
    }
    memcpy(q->row_chunk, from->row_chunk, sizeof *q->row_chunk * n_reuse);
    q->run->pos = n_reuse;
    q->run->on_grid = true;
    if (n_reuse >= q->run->n_first) {
        /* the first part is in (nothing compresses it) */
        q->run->out.memory = vkv_ctx_kv_memory(q->ctx);
        q->run->first_done = true;
    }
    return VKV_OK;
}

/* begin with prompt ids [0, n_first) taken from `from`'s compressed cache
 * (begin_compressed's and begin_sibling's common part). */
static vkv_status begin_from_compressed(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *pr,
                                        vkv_logits_want want, float *logits, const vkv_session_seq *from,
                                        const float *context_logits, size_t n_first)
{
    if (!from->ctx || vkv_ctx_n_compressed(from->ctx) != n_first)
        return vkv_error(VKV_ERR_ARG, "the source sequence did not compress a %zu-token context", n_first);
    /* the context's chunks (a context no longer than n_batch is one chunk; a copy's n_batch is at most its context) */
    const size_t from_chunk = vkv_ctx_n_batch(from->ctx) < n_first ? vkv_ctx_n_batch(from->ctx) : n_first;
    const size_t q_chunk = vkv_ctx_n_batch(q->ctx) < n_first ? vkv_ctx_n_batch(q->ctx) : n_first;
    if (from_chunk != q_chunk)
        return vkv_error(VKV_ERR_ARG, "the source sequence prefilled the context in chunks of %zu tokens, this one "
                         "takes %zu", from_chunk, q_chunk);
    if (want == VKV_LOGITS_ALL || want == VKV_LOGITS_CHUNK)
        return vkv_error(VKV_ERR_ARG, "a reused compressed context has no logits of its own positions");
    if (want == VKV_LOGITS_LAST && n_first == pr->n && !context_logits)
        return vkv_error(VKV_ERR_ARG, "the context is the whole prompt: its last token's logits must come with it");
    /* begin without the press (nothing here scores), then the compressed context in place of the first part */
    vkv_compression plain = *c;
    plain.press = NULL;
    vkv_status st = vkv_session_seq_prefill_begin(q, &plain, pr, want, logits);
    if (st) return st;
    if ((st = vkv_ctx_copy_compressed(q->ctx, from->ctx))) {
        vkv_session_seq_prefill_end(q, NULL);
        return st;
    }
    vkv_seq_prefill_run *r = q->run;
    if (want == VKV_LOGITS_LAST && n_first == pr->n)
        memcpy(logits, context_logits, sizeof *logits * q->s->model->hp.n_vocab);
    r->n_first = n_first; /* a query-aware sibling's part runs past the plain begin's */
    r->out.n_first = (uint32_t)n_first;
    r->pos = n_first;
    r->first_done = true;
    r->out.compressed = r->out.reused = true;
    r->out.memory = vkv_ctx_kv_memory(q->ctx);
    return VKV_OK;
}

vkv_status vkv_session_seq_prefill_begin_compressed(vkv_session_seq *q, const vkv_compression *c,
                                                    const vkv_prompt *pr, vkv_logits_want want, float *logits,
                                                    const vkv_session_seq *from, const float *context_logits)
{
    if (!c || !c->press || c->query_aware || c->compress_every)
        return vkv_error(VKV_ERR_ARG, "only a query-agnostic compression after the prefill reuses a compressed context");
    return begin_from_compressed(q, c, pr, want, logits, from, context_logits, vkv_prompt_compressed_part(pr, false));
}

vkv_status vkv_session_seq_prefill_begin_sibling(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *pr,
                                                 vkv_logits_want want, float *logits, const vkv_session_seq *from,
                                                 const float *from_logits)
{
    if (!c || !c->press || c->compress_every)
        return vkv_error(VKV_ERR_ARG, "a sibling takes a compression after the prefill (a press, nothing during "
                         "generation)");
    return begin_from_compressed(q, c, pr, want, logits, from, from_logits,
                                 vkv_prompt_compressed_part(pr, c->query_aware));
}

uint32_t vkv_session_seq_prefill_chunk(const vkv_session_seq *q)
{
    const vkv_seq_prefill_run *r = q->run;
    if (!r || r->press || r->out.reused || q->decode || (r->want != VKV_LOGITS_LAST && r->want != VKV_LOGITS_NONE))
        return 0;
    return (uint32_t)plain_chunk(q);
}

vkv_status vkv_session_seqs_prefill_next(vkv_session_seq *const *qs, uint32_t n, bool *done)
{
    if (!n || n > VKV_BATCH_MAX)
        return vkv_error(VKV_ERR_ARG, "a batched prefill takes 1 to %u sequences, not %u", VKV_BATCH_MAX, n);
    memset(done, 0, n * sizeof *done);
    vkv_ctx *ctxs[VKV_BATCH_MAX];
    const int32_t *ids[VKV_BATCH_MAX];
    uint32_t n_tok[VKV_BATCH_MAX];
    float *logits[VKV_BATCH_MAX];
    for (uint32_t i = 0; i < n; i++) {
        const vkv_seq_prefill_run *r = qs[i]->run;
        if (!(n_tok[i] = vkv_session_seq_prefill_chunk(qs[i])))
            return vkv_error(VKV_ERR_ARG, "sequence %u of the batched prefill has no plain chunk to evaluate "
                             "(vkv_session_seq_prefill_chunk)", i);
        bool all; /* false: a plain chunk wants the last logits or none */
        ctxs[i] = qs[i]->ctx;
        ids[i] = r->pr->ids + r->pos;
        logits[i] = chunk_logits(qs[i], r->pos, r->pos + n_tok[i], &all);
    }
    vkv_stopwatch sw = vkv_session_stopwatch(qs[0]->s);
    vkv_status st = vkv_ctx_eval_chunks(ctxs, ids, n_tok, n, logits);
    if (st) return st;
    const double seconds = vkv_stopwatch_seconds(qs[0]->s, sw);
    for (uint32_t i = 0; i < n; i++) chunk_done(qs[i], n_tok[i], seconds, &done[i]);
    return VKV_OK;
}

void vkv_session_seq_prefill_end(vkv_session_seq *q, vkv_prefill *out)
{
    vkv_seq_prefill_run *r = q->run;
    if (!r) {
        if (out) memset(out, 0, sizeof *out);
        return;
    }
    vkv_press_session_free(r->ps);
    if (out) *out = r->out;
    else vkv_prefill_free(&r->out);
    free(r);
    q->run = NULL;
}

vkv_status vkv_session_seq_prefill(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *pr,
                                   vkv_logits_want want, float *logits, vkv_prefill *out)
{
    memset(out, 0, sizeof *out);
    vkv_status st = vkv_session_seq_prefill_begin(q, c, pr, want, logits);
    for (bool done = false; !st && !done;) st = vkv_session_seq_prefill_next(q, &done);
    vkv_session_seq_prefill_end(q, st ? NULL : out);
    return st;
}

vkv_status vkv_session_prefill(vkv_session *s, const vkv_compression *c, const vkv_prompt *pr, vkv_logits_want want,
                               float *logits, vkv_prefill *out)
{
    return vkv_session_seq_prefill(s->seq, c, pr, want, logits, out);
}

bool vkv_session_seq_full(const vkv_session_seq *q) { return vkv_ctx_n_past(q->ctx) >= vkv_ctx_n_ctx(q->ctx); }
bool vkv_session_full(const vkv_session *s) { return vkv_session_seq_full(s->seq); }

vkv_status vkv_session_seq_step_before(vkv_session_seq *q)
{
    if (vkv_session_seq_full(q)) return vkv_error(VKV_ERR_ARG, "the %u-token context is full", vkv_ctx_n_ctx(q->ctx));
    if (!q->decode) return VKV_OK;
    vkv_status st;
    const bool kvpress = vkv_decode_rule_of(q->decode) == VKV_DECODING_KVPRESS;
    if (!kvpress && !vkv_decode_room(q->decode) && (st = vkv_decode_compress(q->decode))) return st;
    vkv_decode_watch_queries(q->decode);
    return VKV_OK;
}

vkv_status vkv_session_seq_step_after(vkv_session_seq *q)
{
    /* the token's row is a decoding step's, not a prefill chunk's */
    const uint32_t pos = vkv_ctx_n_past(q->ctx);
    if (q->row_chunk && pos && pos <= vkv_ctx_n_ctx(q->ctx)) q->row_chunk[pos - 1] = 0;
    if (!q->decode) return VKV_OK;
    vkv_decode_observe(q->decode);
    /* kvpress's rule: the token just computed is in the cache the check compresses */
    return vkv_decode_rule_of(q->decode) == VKV_DECODING_KVPRESS ? vkv_decode_count_steps(q->decode, 1) : VKV_OK;
}

vkv_status vkv_session_seq_step(vkv_session_seq *q, int32_t id, float *logits)
{
    vkv_status st = vkv_session_seq_step_before(q);
    if (!st) st = vkv_ctx_eval(q->ctx, &id, 1, false, logits);
    return st ? st : vkv_session_seq_step_after(q);
}

vkv_status vkv_session_step(vkv_session *s, int32_t id, float *logits) { return vkv_session_seq_step(s->seq, id, logits); }

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

/* decode(skip_special_tokens=True): end-of-generation tokens are dropped. */
static vkv_status detokenize_skipping_eog(const vkv_tokenizer *tok, int32_t *gen, uint32_t n_gen, bool strip_spm_space,
                                          vkv_gen_result *out)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n_gen; i++)
        if (!vkv_tokenizer_is_eog(tok, gen[i])) gen[k++] = gen[i];
    vkv_status st = vkv_detokenize(tok, gen, k, false, &out->text, &out->len);
    if (!st && strip_spm_space && vkv_tokenizer_type(tok) == VKV_VOCAB_SPM && out->len && out->text[0] == ' ') {
        memmove(out->text, out->text + 1, out->len);
        out->len--;
    }
    return st;
}

vkv_status vkv_session_generate(vkv_session *s, const vkv_compression *c, const vkv_prompt *pr,
                                const vkv_gen_params *g, vkv_gen_result *out)
{
    memset(out, 0, sizeof *out);
    out->n_prompt = (uint32_t)pr->n;
    if (s->seq->ctx && (uint64_t)pr->n + 1 > vkv_ctx_n_ctx(s->seq->ctx))
        return vkv_error(VKV_ERR_ARG, "the prompt (%zu tokens) does not fit the %u-token context", pr->n,
                         vkv_ctx_n_ctx(s->seq->ctx));
    const vkv_hparams *hp = &s->model->hp;
    float *logits = malloc(sizeof *logits * hp->n_vocab);
    int32_t *gen = malloc(sizeof *gen * (g->max_new + 1));
    vkv_prefill pf = {0};
    vkv_status st = !logits || !gen ? oom() : vkv_session_prefill(s, c, pr, VKV_LOGITS_LAST, logits, &pf);
    if (st) goto out;
    out->prefill_s = pf.prefill_s;
    out->compress_s = pf.compress_s;
    out->n_compressed = pf.compressed ? pf.n_first : 0;
    out->pa = pf.compressed && c->vector ? pf.report.pa : 0;
    if (pf.compressed) out->achieved = vkv_vector_report_achieved(&pf.report);
    out->kv_bytes = pf.compressed ? pf.memory.k_retained + pf.memory.v_retained + pf.memory.k_approximated
                                  : pf.memory.uncompressed_context;
    out->kv_bytes_full = pf.memory.uncompressed_context;

    vkv_stopwatch sw = vkv_session_stopwatch(s);
    out->stop = "max tokens";
    uint32_t n_gen = 0;
    while (n_gen < g->max_new) {
        int32_t id = argmax(logits, (int32_t)hp->n_vocab, s->tok, g->stop_id, g->min_one && n_gen == 0);
        gen[n_gen++] = id;
        if (vkv_tokenizer_is_eog(s->tok, id)) { out->stop = "eog"; break; }
        if (id == g->stop_id) { out->stop = "stop token"; break; }
        if (n_gen == g->max_new) break;
        if (vkv_session_full(s)) { out->stop = "context full"; break; }
        if ((st = vkv_session_step(s, id, logits))) goto out;
    }
    out->gen_s = vkv_stopwatch_seconds(s, sw);
    out->n_gen = n_gen;
    st = detokenize_skipping_eog(s->tok, gen, n_gen, g->strip_spm_space, out);
out:
    vkv_prefill_free(&pf);
    free(logits);
    free(gen);
    if (st) vkv_gen_result_free(out);
    return st;
}
