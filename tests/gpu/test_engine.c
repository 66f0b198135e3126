/* The scheduler of vkvector serve (serve/engine.h) on the default model:
 *
 *  - two sequences' prefills stepped in turns on one session give the logits
 *    of vkv_session_prefill bit for bit;
 *  - twelve requests at once from three threads (plain text, token ids and
 *    chat prompts; no compression, keydiff at p_c 0.75 with and without
 *    VECTOR, compression during generation under a budget smaller than the
 *    prompt, a q8_0 cache, a sampled request) each give the text the
 *    single-sequence session path (the calls `vkvector run` makes, with the
 *    same prefill chunk) gives for it alone, with its finish reason and
 *    token counts; prefill chunks of 8 tokens interleave with decoding;
 *  - a stop sequence cuts the text before its first match ("stop");
 *  - a cancelled sequence leaves, and the pool's bytes go back to zero;
 *  - a full queue answers 429, a prompt over the context 400
 *    (context_length_exceeded), a request whose KV peak is over the whole
 *    pool 400, a compression the gather cannot take 400, and a drained engine 503;
 *  - a request sent as soon as another ends finds that one's place free;
 *  - chat messages to a model without a known template go as ChatML.
 *
 * Skips (77) when there is no Vulkan device. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/forward.h"
#include "kv/kv_pages.h"
#include "press/press.h"
#include "vk/ops_attn.h"
#include "vk/tiles.h"
#include "serve/engine.h"
#include "session/session.h"

#define MODEL "models/vkvector-shakespeare.gguf"
#define CHUNK 8          /* prefill chunk of the engine and the references */
#define N_CTX 256        /* the engine's context */

static int failures;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) fail(__VA_ARGS__);   \
    } while (0)

/* One request of the concurrent set. */
typedef struct tcase {
    const char *name;
    vkv_gen_kind kind;
    const char *text;            /* TEXT, or the user message of CHAT */
    const char *system;          /* CHAT: a system message first, or NULL */
    const char *earlier, *reply; /* CHAT: an earlier user message and the assistant's reply before text, or NULL */
    uint32_t max_tokens;
    const char *press;           /* NULL: none */
    double compression;
    bool vector;
    uint32_t compress_every, max_kv_tokens;
    const char *kv_type;         /* NULL: f16 */
    float temperature;
    uint64_t seed;
    /* the reference */
    char *ref_text;
    size_t ref_len;
    uint32_t ref_prompt, ref_gen;
    bool ref_eog;
    int32_t *ids;                /* IDS: the prompt (TEXT's tokens of text) */
    size_t n_ids;
    uint32_t chunk;              /* the reference's prefill chunk; 0: CHUNK */
} tcase;

static tcase cases[] = {
    {.name = "plain", .kind = VKV_GEN_TEXT, .text = "ROMEO: What light", .max_tokens = 24},
    {.name = "keydiff", .kind = VKV_GEN_TEXT,
     .text = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.", .max_tokens = 24,
     .press = "keydiff", .compression = 0.75},
    {.name = "keydiff-vector", .kind = VKV_GEN_TEXT,
     .text = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.", .max_tokens = 24,
     .press = "keydiff", .compression = 0.75, .vector = true},
    {.name = "budget", .kind = VKV_GEN_TEXT, .text = "MENENIUS: What work's, my countrymen, in hand? where go you",
     .max_tokens = 32, .press = "keydiff", .compress_every = 8, .max_kv_tokens = 16},
    {.name = "chat", .kind = VKV_GEN_CHAT, .text = "Who is Romeo?", .max_tokens = 16},
    {.name = "chat-system-keydiff", .kind = VKV_GEN_CHAT, .system = "You speak as the players do.",
     .text = "Say something of the king.", .max_tokens = 16, .press = "keydiff", .compression = 0.75},
    {.name = "chat-vector", .kind = VKV_GEN_CHAT, .text = "Tell me of Rome and its citizens.", .max_tokens = 16,
     .press = "keydiff", .compression = 0.75, .vector = true},
    {.name = "q8_0", .kind = VKV_GEN_TEXT, .text = "KING HENRY: Once more unto the breach", .max_tokens = 20,
     .kv_type = "q8_0"},
    {.name = "ids", .kind = VKV_GEN_IDS, .text = "JULIET: O Romeo, Romeo!", .max_tokens = 16},
    {.name = "sampled", .kind = VKV_GEN_TEXT, .text = "ROMEO: What light", .max_tokens = 24, .temperature = 0.8f,
     .seed = 7},
    {.name = "keydiff-short", .kind = VKV_GEN_TEXT, .text = "GLOUCESTER: Now is the winter of our discontent",
     .max_tokens = 12, .press = "keydiff", .compression = 0.75},
    {.name = "plain-2", .kind = VKV_GEN_TEXT, .text = "HAMLET: To be, or not to be", .max_tokens = 20},
    /* query-aware: SnapKV compresses the question with the context (past its 64-token window) */
    {.name = "chat-snapkv", .kind = VKV_GEN_CHAT,
     .text = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are "
             "all resolved rather to die than to famish? Who is Caius Marcius?",
     .max_tokens = 12, .press = "snapkv", .compression = 0.5},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static vkv_sampler_params case_sampling(const tcase *c)
{
    vkv_sampler_params sp = vkv_sampler_defaults();
    sp.temperature = c->temperature;
    if (c->seed) sp.seed = c->seed;
    return sp;
}

/* The compression `vkvector run` builds for the case's flags. */
static vkv_compression case_compression(const tcase *c)
{
    const vkv_press_ops *press = c->press ? vkv_press_find(c->press) : NULL;
    return (vkv_compression){.press = press, .compression_ratio = c->compression, .vector = c->vector, .p_a = -1,
                             .query_aware = vkv_press_query_aware(press, VKV_QUERY_DEFAULT, false),
                             .plain_prompt = c->kind != VKV_GEN_CHAT, .compress_every = c->compress_every,
                             .max_kv_tokens = c->max_kv_tokens, .decoding = VKV_DECODING_BUDGET};
}

static vkv_status case_prompt(const vkv_session *s, const tcase *c, vkv_prompt *pr)
{
    size_t len = strlen(c->text);
    if (c->kind != VKV_GEN_CHAT) return vkv_session_tokenize(s, c->text, len, len, false, VKV_SPLIT_APART, pr);
    if (!c->system && !c->earlier) return vkv_session_tokenize(s, c->text, len, len, true, VKV_SPLIT_APART, pr);
    vkv_chat_msg msgs[4];
    size_t n = 0;
    if (c->system) msgs[n++] = (vkv_chat_msg){"system", c->system};
    if (c->earlier) {
        msgs[n++] = (vkv_chat_msg){"user", c->earlier};
        msgs[n++] = (vkv_chat_msg){"assistant", c->reply};
    }
    msgs[n++] = (vkv_chat_msg){"user", c->text};
    return vkv_session_tokenize_chat(s, s->chat, msgs, n, pr);
}

/* The case alone on the session's default sequence, as `vkvector run -n
 * max_tokens --batch CHUNK` runs it: run's context, prefill, sampler and
 * streaming detokenizer. */
static vkv_status reference(vkv_session *s, tcase *c)
{
    vkv_prompt pr;
    vkv_status st = case_prompt(s, c, &pr);
    if (st) return st;
    if (c->kind == VKV_GEN_IDS) {
        c->ids = pr.ids;
        c->n_ids = pr.n;
        pr.n_context = pr.n;
        pr.n_query_end = 0;
    }
    const vkv_hparams *hp = &s->model->hp;
    vkv_compression comp = case_compression(c);
    const int kt = c->kv_type ? vkv_dtype_from_name(c->kv_type) : (int)VKV_F16;
    vkv_ctx_params cp = {.n_batch = c->chunk ? c->chunk : CHUNK, .k_type = (vkv_dtype)kt, .v_type = (vkv_dtype)kt, .compress = comp.press != NULL};
    uint32_t room = 0;
    size_t first = vkv_prompt_compressed_part(&pr, comp.query_aware);
    if ((st = vkv_session_press_room(s, &comp, (uint32_t)first, &room))) goto out;
    if (c->compress_every) {
        cp.n_ctx = (uint32_t)(pr.n + c->max_tokens + room);
        cp.n_kv_slots = vkv_compression_kv_slots(&comp, first, room);
    } else {
        cp.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        if (cp.n_ctx < pr.n + room) cp.n_ctx = (uint32_t)(pr.n + room);
    }
    float *logits = malloc(sizeof *logits * hp->n_vocab);
    vkv_prefill pf;
    vkv_sampler *smp = NULL;
    vkv_detok dt;
    vkv_detok_init(&dt, s->tok, false);
    vkv_strbuf text = {0};
    const vkv_sampler_params sp = case_sampling(c);
    if (!logits) st = vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!st && !(st = vkv_session_reserve(s, &cp)) &&
        !(st = vkv_session_prefill(s, &comp, &pr, VKV_LOGITS_LAST, logits, &pf))) {
        vkv_prefill_free(&pf);
        st = vkv_sampler_create(&sp, (int32_t)hp->n_vocab, &smp);
    }
    for (size_t i = 0; !st && i < pr.n; i++) vkv_sampler_accept(smp, pr.ids[i]);
    c->ref_prompt = (uint32_t)pr.n;
    while (!st && c->ref_gen < c->max_tokens) {
        int32_t id = vkv_sampler_sample(smp, logits);
        vkv_sampler_accept(smp, id);
        c->ref_gen++;
        if (vkv_tokenizer_is_eog(s->tok, id)) {
            c->ref_eog = true;
            break;
        }
        const char *piece;
        size_t len;
        if ((st = vkv_detok_push(&dt, id, &piece, &len))) break;
        vkv_strbuf_put(&text, piece, len);
        if (c->ref_gen == c->max_tokens || vkv_session_full(s)) break;
        st = vkv_session_step(s, id, logits);
    }
    if (!st) {
        const char *rest;
        size_t len;
        vkv_detok_flush(&dt, &rest, &len);
        vkv_strbuf_put(&text, rest, len);
        vkv_strbuf_put(&text, "", 0);
        c->ref_text = text.p ? text.p : calloc(1, 1);
        c->ref_len = text.n;
    } else free(text.p);
    vkv_detok_free(&dt);
    vkv_sampler_free(smp);
    free(logits);
out:
    if (c->kind != VKV_GEN_IDS) vkv_prompt_free(&pr);
    return st;
}

/* Two sequences' stepped prefills, their steps interleaved, give the
 * logits of every position that the default sequence's vkv_session_prefill
 * gives each alone, bit for bit (keydiff at 0.5 with a question, and a
 * budget under the prompt's length). */
static void stepped_prefills_match_the_prefill(vkv_session *s)
{
    const tcase *cs[2] = {&cases[1], &cases[3]};
    const char *question = "Who speaks?";
    const size_t nv = s->model->hp.n_vocab;
    vkv_prompt pr[2] = {{0}};
    vkv_compression comp[2];
    vkv_session_seq *q[2] = {NULL, NULL};
    float *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        const tcase *c = cs[k];
        size_t lp = strlen(c->text), lq = k == 0 ? strlen(question) : 0;
        char text[512];
        snprintf(text, sizeof text, "%s%s", c->text, k == 0 ? question : "");
        comp[k] = case_compression(c);
        if (k == 0) comp[k].compression_ratio = 0.5;
        if (vkv_session_tokenize(s, text, lp + lq, lp, false, VKV_SPLIT_APART, &pr[k])) {
            fail("stepped: tokenize: %s", vkv_last_error());
            goto out;
        }
        uint32_t room = 0;
        size_t first = vkv_prompt_compressed_part(&pr[k], comp[k].query_aware);
        vkv_ctx_params cp = {.n_ctx = (uint32_t)pr[k].n + 8 + 64, .n_batch = 4, .k_type = VKV_F16, .v_type = VKV_F16,
                             .compress = true};
        if (vkv_session_press_room(s, &comp[k], (uint32_t)first, &room)) goto out;
        cp.n_kv_slots = vkv_compression_kv_slots(&comp[k], first, room);
        want[k] = malloc(sizeof(float) * nv * pr[k].n);
        got[k] = malloc(sizeof(float) * nv * pr[k].n);
        vkv_prefill pf;
        if (vkv_session_reserve(s, &cp) ||
            vkv_session_prefill(s, &comp[k], &pr[k], VKV_LOGITS_ALL, want[k], &pf) ||
            vkv_session_seq_create(s, &cp, &q[k]) ||
            vkv_session_seq_prefill_begin(q[k], &comp[k], &pr[k], VKV_LOGITS_ALL, got[k])) {
            fail("stepped: %s", vkv_last_error());
            goto out;
        }
        vkv_prefill_free(&pf);
    }
    bool done[2] = {false, false};
    uint32_t steps = 0;
    while (!done[0] || !done[1])
        for (int k = 0; k < 2; k++) {
            if (done[k]) continue;
            steps++;
            if (vkv_session_seq_prefill_next(q[k], &done[k])) {
                fail("stepped: step: %s", vkv_last_error());
                goto out;
            }
        }
    for (int k = 0; k < 2; k++) {
        vkv_prefill pf;
        vkv_session_seq_prefill_end(q[k], &pf);
        CHECK(!memcmp(want[k], got[k], sizeof(float) * nv * pr[k].n), "stepped %s: the logits differ", cs[k]->name);
        CHECK(k != 0 || pf.compressed, "stepped: no compression");
        vkv_prefill_free(&pf);
    }
    CHECK(steps > 8, "stepped: %u steps", steps);
out:
    for (int k = 0; k < 2; k++) {
        vkv_session_seq_free(q[k]);
        vkv_prompt_free(&pr[k]);
        free(want[k]);
        free(got[k]);
    }
}

static char *dup(const char *s) { return s ? strdup(s) : NULL; }

/* The case as the front would hand it over (the struct is the caller's,
 * what it points to the engine's). */
static vkv_gen_request make_request(const tcase *c)
{
    vkv_gen_request req = {0}, *r = &req;
    r->kind = c->kind;
    r->max_tokens = c->max_tokens;
    r->sampling = case_sampling(c);
    if (c->kind == VKV_GEN_TEXT) r->prompt = dup(c->text);
    if (c->kind == VKV_GEN_IDS) {
        r->prompt_ids = malloc(c->n_ids * sizeof *r->prompt_ids);
        memcpy(r->prompt_ids, c->ids, c->n_ids * sizeof *r->prompt_ids);
        r->n_prompt_ids = c->n_ids;
    }
    if (c->kind == VKV_GEN_CHAT) {
        r->messages = calloc(4, sizeof *r->messages);
        if (c->system) r->messages[r->n_messages++] = (vkv_gen_message){dup("system"), dup(c->system)};
        if (c->earlier) {
            r->messages[r->n_messages++] = (vkv_gen_message){dup("user"), dup(c->earlier)};
            r->messages[r->n_messages++] = (vkv_gen_message){dup("assistant"), dup(c->reply)};
        }
        r->messages[r->n_messages++] = (vkv_gen_message){dup("user"), dup(c->text)};
    }
    vkv_press_request *p = &r->press;
    if (c->press) {
        p->has_press = p->has_compression = true;
        snprintf(p->press, sizeof p->press, "%s", c->press);
        p->compression = c->compression;
    }
    if (c->vector) p->has_vector = p->vector = true;
    if (c->compress_every) {
        p->has_compress_every = p->has_max_kv_tokens = true;
        p->compress_every = c->compress_every;
        p->max_kv_tokens = c->max_kv_tokens;
    }
    if (c->kv_type) {
        p->has_kv_type = true;
        snprintf(p->kv_type, sizeof p->kv_type, "%s", c->kv_type);
    }
    return req;
}

/* What a sequence sent, read to its last event. */
typedef struct outcome {
    bool started_first;
    char *text;
    size_t len;
    vkv_seq_event last;
    uint32_t n_events;
} outcome;

static void read_all(vkv_seq *q, outcome *o)
{
    memset(o, 0, sizeof *o);
    vkv_strbuf b = {0};
    for (;;) {
        vkv_seq_event ev;
        if (!vkv_seq_next(q, 120000, &ev)) {
            fail("no event in 120 s");
            break;
        }
        if (!o->n_events++) o->started_first = ev.kind == VKV_SEQ_STARTED;
        if (ev.kind == VKV_SEQ_TEXT) vkv_strbuf_put(&b, ev.text, ev.len);
        if (ev.kind == VKV_SEQ_DONE || ev.kind == VKV_SEQ_ERROR) {
            o->last = ev;
            break;
        }
        vkv_seq_event_clear(&ev);
    }
    vkv_strbuf_put(&b, "", 0);
    o->text = b.p;
    o->len = b.n;
    vkv_seq_release(q);
}

static void check_case(const tcase *c, const outcome *o)
{
    CHECK(o->started_first, "%s: the first event is not STARTED", c->name);
    CHECK(o->last.kind == VKV_SEQ_DONE, "%s: ended with %d (%s)", c->name, o->last.kind, o->last.message);
    if (o->last.kind != VKV_SEQ_DONE) return;
    CHECK(o->len == c->ref_len && !memcmp(o->text, c->ref_text, c->ref_len), "%s: text\n  '%s'\nwant\n  '%s'", c->name,
          o->text, c->ref_text);
    const char *want = c->ref_eog ? "stop" : "length";
    CHECK(!strcmp(o->last.finish_reason, want), "%s: finish_reason %s, want %s", c->name, o->last.finish_reason, want);
    CHECK(o->last.prompt_tokens == c->ref_prompt && o->last.completion_tokens == c->ref_gen,
          "%s: %u prompt + %u completion tokens, want %u + %u", c->name, o->last.prompt_tokens,
          o->last.completion_tokens, c->ref_prompt, c->ref_gen);
    const vkv_gen_compression *g = &o->last.compression;
    if (c->press && c->compression > 0) {
        CHECK(!strcmp(g->press, c->press) && g->n_compressed > 0 && g->n_evicted > 0 &&
                  g->kv_bytes_after < g->kv_bytes_before && (g->n_approximated > 0) == c->vector,
              "%s: compression report %s %u tokens, %llu/%llu/%llu, %llu -> %llu bytes", c->name, g->press,
              g->n_compressed, (unsigned long long)g->n_retained, (unsigned long long)g->n_approximated,
              (unsigned long long)g->n_evicted, (unsigned long long)g->kv_bytes_before,
              (unsigned long long)g->kv_bytes_after);
    } else CHECK(!g->n_compressed, "%s: compressed %u tokens without a prefill compression", c->name, g->n_compressed);
    if (c->compress_every)
        CHECK(g->decode_compressions > 0, "%s: no compression during generation", c->name);
}

typedef struct worker {
    vkv_engine *e;
    size_t first, step;
} worker;

static void *run_worker(void *arg)
{
    const worker *w = arg;
    vkv_seq *seqs[N_CASES];
    size_t n = 0;
    for (size_t i = w->first; i < N_CASES; i += w->step) {
        vkv_gen_request r = make_request(&cases[i]);
        vkv_engine_submit(w->e, &r, &seqs[n++]);
    }
    n = 0;
    for (size_t i = w->first; i < N_CASES; i += w->step) {
        outcome o;
        read_all(seqs[n++], &o);
        check_case(&cases[i], &o);
        free(o.text);
    }
    return NULL;
}

/* A metric's value in the Prometheus text (-1 when absent). */
static double metric(vkv_engine *e, const char *name)
{
    vkv_strbuf b = {0};
    vkv_engine_metrics(e, &b);
    vkv_strbuf_put(&b, "", 0);
    double v = -1;
    size_t len = strlen(name);
    for (const char *p = b.p; p && *p;) {
        if (!strncmp(p, name, len) && p[len] == ' ') {
            v = strtod(p + len + 1, NULL);
            break;
        }
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    free(b.p);
    return v;
}

/* Submits one request and reads it through. */
static void one(vkv_engine *e, vkv_gen_request r, outcome *o)
{
    vkv_seq *q;
    vkv_engine_submit(e, &r, &q);
    read_all(q, o);
}

static vkv_gen_request text_request(const char *text, uint32_t max_tokens)
{
    tcase c = {.kind = VKV_GEN_TEXT, .text = text, .max_tokens = max_tokens};
    return make_request(&c);
}

static void concurrent_requests_match_the_session(vkv_session *s)
{
    vkv_engine_params p = {.max_seqs = 4, .queue = 32, .n_ctx = N_CTX, .prefill_chunk = CHUNK, .log = true};
    vkv_engine *e;
    if (vkv_engine_create(s, &p, &e)) {
        fail("vkv_engine_create: %s", vkv_last_error());
        return;
    }
    CHECK(!strcmp(vkv_engine_model_id(e), "vkvector-shakespeare"), "model id %s", vkv_engine_model_id(e));
    pthread_t th[3];
    worker w[3];
    for (size_t i = 0; i < 3; i++) {
        w[i] = (worker){e, i, 3};
        pthread_create(&th[i], NULL, run_worker, &w[i]);
    }
    for (size_t i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") == 0, "pool bytes in use after all finished: %g",
          metric(e, "vkvector_kv_pool_bytes_in_use"));
    CHECK(metric(e, "vkvector_generation_tokens_total") > 0 && metric(e, "vkvector_decode_step_seconds_count") > 0,
          "metrics count no tokens or steps");

    /* a stop sequence: the text before its first match */
    const tcase *plain = &cases[0];
    if (plain->ref_len > 12) {
        char stop[5];
        memcpy(stop, plain->ref_text + 8, 4);
        stop[4] = 0;
        size_t at = (size_t)(strstr(plain->ref_text, stop) - plain->ref_text);
        vkv_gen_request r = make_request(plain);
        r.stop[r.n_stop++] = strdup("\x01never");
        r.stop[r.n_stop++] = strdup(stop);
        outcome o;
        one(e, r, &o);
        CHECK(o.last.kind == VKV_SEQ_DONE && !strcmp(o.last.finish_reason, "stop") && o.len == at &&
                  !memcmp(o.text, plain->ref_text, at),
              "stop '%s': '%s' (%s), want '%.*s'", stop, o.text, o.last.finish_reason ? o.last.finish_reason : "-",
              (int)at, plain->ref_text);
        free(o.text);
    } else fail("the plain reference is too short for the stop test: '%s'", plain->ref_text);

    /* a cancel mid-generation: the sequence leaves and its bytes return */
    vkv_seq *q;
    vkv_gen_request long_one = text_request("ROMEO: What light", 0);
    vkv_engine_submit(e, &long_one, &q);
    vkv_seq_event ev;
    bool texted = false, ended = false;
    while (!texted && !ended && vkv_seq_next(q, 120000, &ev)) {
        texted = ev.kind == VKV_SEQ_TEXT;
        ended = ev.kind == VKV_SEQ_DONE || ev.kind == VKV_SEQ_ERROR;
        vkv_seq_event_clear(&ev);
    }
    if (!texted) {
        fail("the long request sent no text");
        vkv_seq_release(q);
        vkv_engine_free(e);
        return;
    }
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") > 0, "a running sequence holds no pool bytes");
    vkv_seq_cancel(q);
    outcome o;
    read_all(q, &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.code && !strcmp(o.last.code, "cancelled"),
          "cancel: last event %d %s", o.last.kind, o.last.message);
    free(o.text);
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") == 0, "pool bytes after the cancel: %g",
          metric(e, "vkvector_kv_pool_bytes_in_use"));
    CHECK(metric(e, "vkvector_requests_total{outcome=\"cancelled\"}") == 1, "cancelled count %g",
          metric(e, "vkvector_requests_total{outcome=\"cancelled\"}"));
    vkv_engine_free(e);
}

static void refusals(vkv_session *s)
{
    /* one place, one waiting, a pool of 40 tokens, 64-token contexts */
    vkv_ctx_params small = {.n_ctx = 40, .k_type = VKV_F16, .v_type = VKV_F16};
    vkv_engine_params p = {.max_seqs = 1, .queue = 1, .n_ctx = 64, .prefill_chunk = CHUNK,
                           .kv_budget = vkv_ctx_plan_memory(&s->model->hp, &small).kv_bytes, .log = true};
    vkv_engine *e;
    if (vkv_engine_create(s, &p, &e)) {
        fail("vkv_engine_create: %s", vkv_last_error());
        return;
    }
    outcome o;
    char longp[2048] = "";
    for (int i = 0; i < 12; i++) strcat(longp, "First Citizen: Before we proceed any further. ");
    one(e, text_request(longp, 4), &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.http_status == 400 && o.last.code &&
              !strcmp(o.last.code, "context_length_exceeded"),
          "a prompt over the context: %d %d %s", o.last.kind, o.last.http_status, o.last.message);
    free(o.text);
    one(e, text_request("ROMEO: What light", 50), &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.http_status == 400 && strstr(o.last.message, "MiB"),
          "a peak over the pool: %d %d %s", o.last.kind, o.last.http_status, o.last.message);
    free(o.text);
    /* a one-shot compression that keeps more than 2 max_kv_tokens a head: 400 naming the field, before any prefill */
    tcase over = {.kind = VKV_GEN_TEXT, .text = "ROMEO: But soft, what light through yonder window breaks?",
                  .max_tokens = 4, .press = "knorm", .compression = 0.25, .compress_every = 2, .max_kv_tokens = 3};
    one(e, make_request(&over), &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.http_status == 400 && o.last.param &&
              !strcmp(o.last.param, "vkvector.max_kv_tokens") && strstr(o.last.message, "vkvector.compression"),
          "a compression over the gather: %d %d %s %s", o.last.kind, o.last.http_status,
          o.last.param ? o.last.param : "(no param)", o.last.message);
    free(o.text);
    vkv_seq *q[3];
    for (int i = 0; i < 3; i++) {
        vkv_gen_request r = text_request("ROMEO: What light", 4);
        vkv_engine_submit(e, &r, &q[i]);
    }
    read_all(q[2], &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.http_status == 429 && o.n_events == 1, "a full queue: %d %d %s",
          o.last.kind, o.last.http_status, o.last.message);
    free(o.text);
    for (int i = 0; i < 2; i++) {
        read_all(q[i], &o);
        CHECK(o.last.kind == VKV_SEQ_DONE && !strcmp(o.last.finish_reason, "length") && o.last.completion_tokens == 4,
              "a queued request: %d %s", o.last.kind, o.last.message);
        free(o.text);
    }
    /* A place is free when a request's last event arrives: a client that
     * sends its next request at once is not told the server is full. With
     * one running and one waiting, the request sent on reading the first's
     * end must be accepted (the scheduler used to count the first as
     * running until after its last event was queued). */
    for (int round = 0; round < 6; round++) {
        vkv_gen_request ra = text_request("ROMEO: What light", 2), rb = text_request("JULIET: Ay me", 2);
        vkv_seq *a, *b, *c;
        vkv_engine_submit(e, &ra, &a);
        vkv_engine_submit(e, &rb, &b);
        read_all(a, &o);
        free(o.text);
        vkv_gen_request rc = text_request("ROMEO: She speaks", 2);
        vkv_engine_submit(e, &rc, &c);
        read_all(c, &o);
        CHECK(o.last.kind == VKV_SEQ_DONE, "round %d: a request sent as the one before it ended: %d %d %s", round,
              o.last.kind, o.last.http_status, o.last.message);
        free(o.text);
        read_all(b, &o);
        free(o.text);
    }
    vkv_engine_drain(e);
    one(e, text_request("ROMEO: What light", 4), &o);
    CHECK(o.last.kind == VKV_SEQ_ERROR && o.last.http_status == 503, "after drain: %d %d", o.last.kind,
          o.last.http_status);
    free(o.text);
    vkv_engine_free(e);
}

/* The prefix cache (docs/SERVE.md, "The prefix cache"). */
#define PREFIX_CHUNK 48  /* the tiled product, and pages of 16 that start off its grid */
static const char PREFIX_DOC[] =
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are all "
    "resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know Caius Marcius is "
    "chief enemy to the people. All: We know't, we know't. First Citizen: Let us kill him, and we'll have corn at our "
    "own price. Is't a verdict? All: No more talking on't; let it be done: away, away! Second Citizen: One word, good "
    "citizens.";

/* A session-level check: a prefill that takes n tokens of another
 * sequence's cache (vkv_session_seq_prefill_begin_from, n from
 * vkv_session_seq_reusable) gives the logits of every later position of a
 * prefill from 0, bit for bit, for every row type of the cache. */
static void reused_prefill_matches_the_prefill(vkv_session *s)
{
    const size_t nv = s->model->hp.n_vocab;
    static const char *const types[] = {"f16", "f32", "q8_0", "q4_0"};
    char a_text[1024], b_text[1024];
    snprintf(a_text, sizeof a_text, "%s ROMEO: What light", PREFIX_DOC);
    snprintf(b_text, sizeof b_text, "%s JULIET: O Romeo, Romeo!", PREFIX_DOC);
    vkv_prompt a = {0}, b = {0};
    if (vkv_session_tokenize(s, a_text, strlen(a_text), strlen(a_text), false, VKV_SPLIT_APART, &a) ||
        vkv_session_tokenize(s, b_text, strlen(b_text), strlen(b_text), false, VKV_SPLIT_APART, &b)) {
        fail("reuse: tokenize: %s", vkv_last_error());
        return;
    }
    uint32_t shared = 0;
    while (shared < a.n && shared < b.n && a.ids[shared] == b.ids[shared]) shared++;
    const size_t most = b.n + 16; /* logits rows: b's, and c's below */
    float *want = malloc(sizeof(float) * nv * most), *got = malloc(sizeof(float) * nv * most), *last = malloc(sizeof(float) * nv);
    for (size_t t = 0; t < sizeof types / sizeof *types && want && got && last; t++) {
        const vkv_dtype kt = (vkv_dtype)vkv_dtype_from_name(types[t]);
        vkv_compression none = {.pool = VKV_POOL_DEFAULT, .p_a = -1};
        /* each context its own size: the caches' slots per head differ */
        vkv_ctx_params cp = {.n_ctx = (uint32_t)b.n + 40, .n_batch = PREFIX_CHUNK, .k_type = kt, .v_type = kt};
        vkv_ctx_params cpa = cp;
        cpa.n_ctx = (uint32_t)a.n + 3;
        vkv_session_seq *qa = NULL, *qb = NULL;
        vkv_prefill pf;
        bool done = false;
        uint32_t n_reuse = 0;
        vkv_status st = vkv_session_reserve(s, &cp);
        if (!st) st = vkv_session_prefill(s, &none, &b, VKV_LOGITS_ALL, want, &pf);
        if (!st) vkv_prefill_free(&pf);
        if (!st) st = vkv_session_seq_create(s, &cpa, &qa);
        if (!st) st = vkv_session_seq_prefill(qa, &none, &a, VKV_LOGITS_LAST, last, &pf);
        if (!st) vkv_prefill_free(&pf);
        if (!st) st = vkv_session_seq_create(s, &cp, &qb);
        if (!st) {
            n_reuse = vkv_session_seq_reusable(qb, qa, &b, shared, 16);
            CHECK(n_reuse % 16 == 0 && n_reuse + 48 > shared && n_reuse <= shared,
                  "reuse %s: %u of %u shared tokens reusable", types[t], n_reuse, shared);
        }
        /* every page the rule allows, on the chunk grid and off it */
        uint32_t tried = 0, off_grid_short = 0;
        for (uint32_t l = 16; !st && l <= shared; l += 16) {
            if (vkv_session_seq_reusable(qb, qa, &b, l, 16) != l) continue;
            tried++;
            /* a reuse off the grid whose chunks from l would end in a short one: the grid is what keeps the bits */
            off_grid_short += l % PREFIX_CHUNK && (b.n - l) % PREFIX_CHUNK && (b.n - l) % PREFIX_CHUNK <= 16;
            done = false;
            st = vkv_session_seq_prefill_begin_from(qb, &none, &b, VKV_LOGITS_ALL, got, qa, l);
            while (!st && !done) st = vkv_session_seq_prefill_next(qb, &done);
            if (!st) vkv_session_seq_prefill_end(qb, NULL);
            if (!st)
                CHECK(!memcmp(want + (size_t)l * nv, got + (size_t)l * nv, sizeof(float) * nv * (b.n - l)),
                      "reuse %s: the logits after %u reused tokens differ from the prefill's", types[t], l);
        }
        CHECK(tried >= 3 && off_grid_short, "reuse %s: %u reuses tried, %u off the grid", types[t], tried, off_grid_short);
        if (st) fail("reuse %s: %s", types[t], vkv_last_error());
        /* a reuse past what vkv_session_seq_reusable allows is refused, not silently different */
        if (!st) {
            st = vkv_session_seq_prefill_begin_from(qb, &none, &b, VKV_LOGITS_ALL, got, qa, (uint32_t)b.n);
            CHECK(st == VKV_ERR_ARG, "reuse %s: a reuse of the whole prompt was taken", types[t]);
        }
        vkv_session_seq_free(qa);
        vkv_session_seq_free(qb);
    }
    /* Chunks of `odd` tokens leave a's prefill a last chunk of 3 or 4 (the split decode attention);
     * c is a and a few tokens more, whose prefill from 0 evaluates those rows in a chunk of 5 to 16
     * (the prefill attention, with the same matrix product): they are never reused (a reuse of
     * them is refused), and the reuse up to them gives the bits. */
    vkv_prompt c = {0};
    char c_text[1100];
    snprintf(c_text, sizeof c_text, "%s JULIET: Ay me!", a_text);
    const uint32_t odd = (uint32_t)(a.n - 3) / 2;
    vkv_session_seq *qa = NULL, *qc = NULL;
    vkv_status st = vkv_session_tokenize(s, c_text, strlen(c_text), strlen(c_text), false, VKV_SPLIT_APART, &c);
    if (!st) {
        CHECK(c.n > a.n && !memcmp(c.ids, a.ids, a.n * sizeof *a.ids) && c.n - 2 * odd > VKV_ATTN_DECODE_MAX_Q &&
                  c.n - 2 * odd <= 16, "reuse: c (%zu tokens) no longer extends a (%zu) by a short chunk", c.n, a.n);
        vkv_ctx_params cp = {.n_ctx = (uint32_t)c.n + 8, .n_batch = odd, .k_type = VKV_F16, .v_type = VKV_F16};
        vkv_compression none = {.pool = VKV_POOL_DEFAULT, .p_a = -1};
        vkv_prefill pf;
        bool done = false;
        if (!(st = vkv_session_reserve(s, &cp)) && !(st = vkv_session_prefill(s, &none, &c, VKV_LOGITS_ALL, want, &pf)))
            vkv_prefill_free(&pf);
        if (!st && !(st = vkv_session_seq_create(s, &cp, &qa)) &&
            !(st = vkv_session_seq_prefill(qa, &none, &a, VKV_LOGITS_LAST, last, &pf)))
            vkv_prefill_free(&pf);
        if (!st) st = vkv_session_seq_create(s, &cp, &qc);
        if (!st) {
            const uint32_t n = vkv_session_seq_reusable(qc, qa, &c, (uint32_t)a.n, 1);
            CHECK(n == 2 * odd, "reuse: %u of a's %zu rows reusable, want %u (its short chunk's rows are not)", n, a.n,
                  2 * odd);
            CHECK(vkv_session_seq_prefill_begin_from(qc, &none, &c, VKV_LOGITS_ALL, got, qa, (uint32_t)a.n) ==
                      VKV_ERR_ARG, "reuse: a reuse of a short chunk's rows was taken");
            st = vkv_session_seq_prefill_begin_from(qc, &none, &c, VKV_LOGITS_ALL, got, qa, 2 * odd);
            while (!st && !done) st = vkv_session_seq_prefill_next(qc, &done);
            if (!st) vkv_session_seq_prefill_end(qc, NULL);
            if (!st)
                CHECK(!memcmp(want + (size_t)2 * odd * nv, got + (size_t)2 * odd * nv, sizeof(float) * nv * (c.n - 2 * odd)),
                      "reuse: the logits after %u reused tokens (chunks of %u) differ from the prefill's", 2 * odd, odd);
        }
    }
    if (st) fail("reuse, chunks of %u: %s", odd, vkv_last_error());
    vkv_session_seq_free(qa);
    vkv_session_seq_free(qc);
    vkv_prompt_free(&c);
    free(want);
    free(got);
    free(last);
    vkv_prompt_free(&a);
    vkv_prompt_free(&b);
}

/* A session-level check: a prefill that takes another sequence's compressed
 * context (vkv_session_seq_prefill_begin_compressed) gives the logits of
 * every position after it, and of the next decoded token, that its own
 * compression of the same context gives, bit for bit: keydiff at 0.75 with
 * and without VECTOR, f16 and q8_0 tiers, the materialised attention, a
 * question after the context and a context that is the whole prompt, in
 * contexts of other sizes than the source's. */
static void reused_compressed_context_matches_the_compression(vkv_session *s)
{
    const size_t nv = s->model->hp.n_vocab;
    static const struct {
        const char *kv_type;
        bool vector, materialized;
    } variants[] = {{"f16", true, false}, {"q8_0", true, false}, {"f16", false, false}, {"f16", true, true}};
    static const char *const questions[] = {"ROMEO: What light", "JULIET: O Romeo, Romeo!", NULL};
    const size_t doc_len = strlen(PREFIX_DOC);
    vkv_prompt pr[3] = {{0}};
    char text[1100];
    for (int i = 0; i < 3; i++) {
        const size_t len = (size_t)snprintf(text, sizeof text, "%s%s%s", PREFIX_DOC, questions[i] ? " " : "",
                                            questions[i] ? questions[i] : "");
        if (vkv_session_tokenize(s, text, len, doc_len, false, VKV_SPLIT_APART, &pr[i])) {
            fail("compressed context: tokenize: %s", vkv_last_error());
            goto out;
        }
    }
    CHECK(pr[0].n_context == pr[1].n_context && pr[0].n_context < pr[0].n && pr[2].n_context == pr[2].n &&
              !memcmp(pr[0].ids, pr[2].ids, pr[2].n * sizeof *pr[2].ids),
          "compressed context: the prompts no longer share their context");
    float *want = malloc(sizeof(float) * nv * 64), *got = malloc(sizeof(float) * nv * 64);
    float *ctx_logits = malloc(sizeof(float) * nv);
    for (size_t v = 0; v < sizeof variants / sizeof *variants && want && got && ctx_logits; v++) {
        const vkv_dtype kt = (vkv_dtype)vkv_dtype_from_name(variants[v].kv_type);
        vkv_compression c = {.press = vkv_press_find("keydiff"), .compression_ratio = 0.75, .vector = variants[v].vector,
                             .p_a = -1, .pool = VKV_POOL_DEFAULT, .materialized = variants[v].materialized,
                             .plain_prompt = true, .decoding = VKV_DECODING_BUDGET};
        /* the source: the whole-prompt context compressed, in a context of its own size */
        vkv_ctx_params cps = {.n_ctx = (uint32_t)pr[2].n + 5, .n_batch = PREFIX_CHUNK, .k_type = kt, .v_type = kt,
                              .compress = true};
        vkv_session_seq *src = NULL, *q = NULL;
        vkv_prefill pf;
        bool done = false;
        vkv_status st = vkv_session_seq_create(s, &cps, &src);
        if (!st) st = vkv_session_seq_prefill(src, &c, &pr[2], VKV_LOGITS_LAST, ctx_logits, &pf);
        if (!st) {
            CHECK(pf.compressed && !pf.reused, "compressed context %zu: the source did not compress", v);
            vkv_prefill_free(&pf);
        }
        for (int i = 0; i < 3 && !st; i++) {
            const size_t rest = pr[i].n - pr[i].n_context;
            const vkv_logits_want w = rest ? VKV_LOGITS_REST : VKV_LOGITS_LAST;
            vkv_ctx_params cp = {.n_ctx = (uint32_t)pr[i].n + 24 + 8 * (uint32_t)i, .n_batch = PREFIX_CHUNK,
                                 .k_type = kt, .v_type = kt, .compress = true};
            /* the reference: its own compression; then one decoded token */
            const size_t rows = rest ? rest : 1;
            int32_t next = (int32_t)(7 + i);
            if ((st = vkv_session_reserve(s, &cp)) || (st = vkv_session_prefill(s, &c, &pr[i], w, want, &pf))) break;
            vkv_prefill_free(&pf);
            if ((st = vkv_session_step(s, next, want + rows * nv))) break;
            /* the reuse */
            if (!q && (st = vkv_session_seq_create(s, &cp, &q))) break;
            if (q && vkv_ctx_n_ctx(q->ctx) != cp.n_ctx) {
                vkv_session_seq_free(q);
                if ((st = vkv_session_seq_create(s, &cp, &q))) break;
            }
            st = vkv_session_seq_prefill_begin_compressed(q, &c, &pr[i], w, got, src, ctx_logits);
            for (done = false; !st && !done;) st = vkv_session_seq_prefill_next(q, &done);
            if (st) break;
            vkv_session_seq_prefill_end(q, &pf);
            CHECK(pf.compressed && pf.reused && pf.n_first == pr[i].n_context,
                  "compressed context %zu/%d: the prefill does not say it reused the context", v, i);
            vkv_prefill_free(&pf);
            if ((st = vkv_session_seq_step(q, next, got + rows * nv))) break;
            CHECK(!memcmp(want, got, sizeof(float) * nv * (rows + 1)),
                  "compressed context %s%s%s, question %d: the logits differ from its own compression's",
                  variants[v].kv_type, variants[v].vector ? " VECTOR" : "", variants[v].materialized ? " materialised" : "",
                  i);
        }
        if (!st) {
            /* what a reuse cannot give is refused */
            vkv_compression qa = c;
            qa.query_aware = true;
            CHECK(vkv_session_seq_prefill_begin_compressed(q, &qa, &pr[0], VKV_LOGITS_REST, got, src, NULL) == VKV_ERR_ARG,
                  "compressed context: a query-aware compression reused one");
            CHECK(vkv_session_seq_prefill_begin_compressed(q, &c, &pr[2], VKV_LOGITS_LAST, got, src, NULL) == VKV_ERR_ARG,
                  "compressed context: a whole-prompt context was reused without its logits");
            CHECK(vkv_session_seq_prefill_begin_compressed(q, &c, &pr[0], VKV_LOGITS_ALL, got, src, NULL) == VKV_ERR_ARG,
                  "compressed context: every position's logits were promised");
        }
        if (st) fail("compressed context %s: %s", variants[v].kv_type, vkv_last_error());
        vkv_session_seq_free(src);
        vkv_session_seq_free(q);
    }
    free(want);
    free(got);
    free(ctx_logits);
out:
    for (int i = 0; i < 3; i++) vkv_prompt_free(&pr[i]);
}

/* The prefix and context caches' engine: two sequences, chunks of
 * PREFIX_CHUNK, the cache off or on, a pool of budget bytes (0: the
 * default). NULL (a failure recorded) when it does not start. */
static vkv_engine *cache_engine(vkv_session *s, bool off, uint64_t budget)
{
    vkv_engine_params p = {.max_seqs = 2, .n_ctx = N_CTX, .prefill_chunk = PREFIX_CHUNK, .log = true,
                           .no_prefix_cache = off, .kv_budget = budget};
    vkv_engine *e;
    if (!vkv_engine_create(s, &p, &e)) return e;
    fail("vkv_engine_create: %s", vkv_last_error());
    return NULL;
}

/* The engine keeps a finished plain prompt's cache: a later prompt that
 * starts with it reuses its rows (cached_tokens, a multiple of the page) and
 * still gives the text the session gives it alone; the entry stays as it was
 * (its own prompt again gives its text); compressing requests and another
 * cache type reuse nothing; --no-prefix-cache reuses nothing; under a pool
 * that holds one sequence, a new prompt evicts the entry. */
static void prefix_cache(vkv_session *s)
{
    char a_text[1024], b_text[1024];
    uint32_t reuse_a = 0;
    double entry_pages_a = 0;
    snprintf(a_text, sizeof a_text, "%s ROMEO: What light", PREFIX_DOC);
    snprintf(b_text, sizeof b_text, "%s JULIET: O Romeo, Romeo!", PREFIX_DOC);
    tcase ca = {.name = "prefix-a", .kind = VKV_GEN_TEXT, .text = a_text, .max_tokens = 12, .chunk = PREFIX_CHUNK};
    tcase cb = {.name = "prefix-b", .kind = VKV_GEN_TEXT, .text = b_text, .max_tokens = 12, .chunk = PREFIX_CHUNK};
    if (reference(s, &ca) || reference(s, &cb)) {
        fail("prefix: the references: %s", vkv_last_error());
        goto out;
    }
    for (int off = 0; off < 2; off++) {
        vkv_engine *e = cache_engine(s, off, 0);
        if (!e) goto out;
        const tcase *order[] = {&ca, &cb, &ca};
        uint32_t cached_sum = 0;
        if (!off) reuse_a = 0;
        for (int i = 0; i < 3; i++) {
            outcome o;
            one(e, make_request(order[i]), &o);
            check_case(order[i], &o);
            const uint32_t c = o.last.cached_tokens;
            cached_sum += c;
            if (!off && i == 2) reuse_a = c; /* what a's own entry gives it */
            if (!off && !i) entry_pages_a = metric(e, "vkvector_kv_pages_in_use") / s->model->hp.n_layer; /* its entry's */
            if (off || !i) CHECK(c == 0, "prefix %s request %d: %u cached tokens", off ? "off" : "on", i, c);
            else
                CHECK(c % 16 == 0 && c >= ca.ref_prompt / 2 && c < o.last.prompt_tokens,
                      "prefix request %d: %u cached tokens of %u", i, c, o.last.prompt_tokens);
            free(o.text);
        }
        CHECK(metric(e, "vkvector_prefix_cache_hits_total") == cached_sum, "prefix hits metric %g, want %u",
              metric(e, "vkvector_prefix_cache_hits_total"), cached_sum);
        CHECK(metric(e, "vkvector_prefix_cache_entries") == (off ? 0 : 2), "prefix %s: %g entries", off ? "off" : "on",
              metric(e, "vkvector_prefix_cache_entries"));
        /* a compressing request and a q8_0 cache reuse nothing */
        tcase kd = ca, q8 = ca;
        kd.press = "keydiff";
        kd.compression = 0.5;
        q8.kv_type = "q8_0";
        const tcase *others[] = {&kd, &q8};
        for (int i = 0; i < 2; i++) {
            outcome o;
            one(e, make_request(others[i]), &o);
            CHECK(o.last.kind == VKV_SEQ_DONE && o.last.cached_tokens == 0, "prefix: %s request: %d, %u cached tokens",
                  i ? "a q8_0" : "a compressing", o.last.kind, o.last.cached_tokens);
            free(o.text);
        }
        vkv_engine_free(e);
    }
    /* a pool of one sequence's pages and the entry's pages it does not map:
     * the entry keeps its prompt's whole pages; its own prompt again is
     * admitted beside it, mapping them (its admission counts only its own
     * pages); a prompt whose context needs them all evicts it, and runs */
    const vkv_hparams *hp = &s->model->hp;
    const uint32_t n_one = ca.ref_prompt + ca.max_tokens + 8, page = 1u << VKV_KV_PAGE_SHIFT;
    const uint32_t entry_pages = (uint32_t)entry_pages_a, mapped_pages = reuse_a / page;
    CHECK(reuse_a % page == 0 && mapped_pages && mapped_pages <= entry_pages, "pressure: a reused %u tokens", reuse_a);
    vkv_engine *e = cache_engine(s, false, vkv_kv_pages_plan_page_bytes(hp, VKV_F16, VKV_F16, VKV_KV_PAGE_SHIFT) *
                                               hp->n_layer * ((n_one + page - 1) / page + entry_pages - mapped_pages));
    if (!e) goto out;
    outcome o;
    one(e, make_request(&ca), &o);
    check_case(&ca, &o);
    free(o.text);
    CHECK(metric(e, "vkvector_prefix_cache_entries") == 1, "pressure: %g entries", metric(e, "vkvector_prefix_cache_entries"));
    const double kept = metric(e, "vkvector_kv_pages_in_use"), whole = hp->n_layer * ((n_one + page - 1) / page);
    CHECK(kept == (double)entry_pages * hp->n_layer && kept < whole,
          "pressure: the entry keeps %g pages, not its prompt's whole pages (%u a layer) (of %g)", kept, entry_pages,
          whole);
    one(e, make_request(&ca), &o);
    check_case(&ca, &o);
    CHECK(o.last.cached_tokens == reuse_a && metric(e, "vkvector_prefix_cache_evictions_total") == 0,
          "pressure: the entry's own prompt took %u cached tokens (want %u) with %g evictions: its admission counted "
          "the pages it maps", o.last.cached_tokens, reuse_a, metric(e, "vkvector_prefix_cache_evictions_total"));
    free(o.text);
    one(e, text_request("ROMEO: What light", ca.ref_prompt + ca.max_tokens), &o);
    CHECK(o.last.kind == VKV_SEQ_DONE, "pressure: a new prompt: %d %s", o.last.kind, o.last.message);
    free(o.text);
    CHECK(metric(e, "vkvector_prefix_cache_evictions_total") == 1, "pressure: %g evictions",
          metric(e, "vkvector_prefix_cache_evictions_total"));
    one(e, make_request(&ca), &o);
    check_case(&ca, &o);
    CHECK(o.last.cached_tokens == 0, "pressure: %u cached tokens of an evicted prompt", o.last.cached_tokens);
    free(o.text);
    vkv_engine_free(e);
out:
    free(ca.ref_text);
    free(cb.ref_text);
}

/* The engine keeps a query-agnostic compression's context (a chat's
 * history before its last user turn; a completion's whole prompt) as
 * compressed: a later request with the same context and compression takes
 * it (context_cache "hit", cached_tokens its tokens) and gives the text its
 * own compression gives (the session's, alone); a query-aware compression
 * reuses nothing and says why; --no-prefix-cache says "off"; under a pool
 * that holds one request, another context evicts the entry. */
static const char CONTEXT_DOC[] =
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You are all "
    "resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know Caius Marcius is "
    "chief enemy to the people.";

static void context_cache(vkv_session *s)
{
    tcase c1 = {.name = "context-1", .kind = VKV_GEN_CHAT, .earlier = CONTEXT_DOC, .reply = "Speak.",
                .text = "Who is the chief enemy?", .max_tokens = 12, .press = "keydiff", .compression = 0.75,
                .vector = true, .chunk = PREFIX_CHUNK};
    tcase c2 = c1, c3 = c1, c4 = c1;
    c2.name = "context-2";
    c2.text = "What do the citizens want?";
    c3 = (tcase){.name = "context-whole", .kind = VKV_GEN_TEXT, .text = CONTEXT_DOC, .max_tokens = 12,
                 .press = "keydiff", .compression = 0.75, .vector = true, .chunk = PREFIX_CHUNK};
    c4.name = "context-other";
    c4.reply = "Speak, speak.";
    tcase *refs[] = {&c1, &c2, &c3, &c4};
    for (int i = 0; i < 4; i++)
        if (reference(s, refs[i])) {
            fail("context cache: the reference of %s: %s", refs[i]->name, vkv_last_error());
            goto out;
        }
    vkv_prompt p1;
    if (case_prompt(s, &c1, &p1)) {
        fail("context cache: tokenize: %s", vkv_last_error());
        goto out;
    }
    const uint32_t ctx_tokens = (uint32_t)p1.n_context;
    CHECK(p1.n_context > 64 && p1.n_context + 8 < p1.n, "context cache: a chat's context is %zu of %zu tokens",
          p1.n_context, p1.n);
    vkv_prompt_free(&p1);
    for (int off = 0; off < 2; off++) {
        vkv_engine *e = cache_engine(s, off, 0);
        if (!e) goto out;
        static const char *const want_on[] = {"miss", "hit", "hit", "miss", "hit"};
        const tcase *order[] = {&c1, &c2, &c1, &c3, &c3};
        for (int i = 0; i < 5; i++) {
            outcome o;
            one(e, make_request(order[i]), &o);
            check_case(order[i], &o);
            const vkv_gen_compression *g = &o.last.compression;
            const char *want = off ? "off" : want_on[i];
            const bool hit = !strcmp(want, "hit");
            const uint32_t cached = !hit ? 0 : order[i] == &c3 ? c3.ref_prompt : ctx_tokens;
            CHECK(o.last.kind == VKV_SEQ_DONE && g->context_cache && !strcmp(g->context_cache, want) &&
                      o.last.cached_tokens == cached && (g->context_shared_bytes > 0) == hit &&
                      (g->context_shared_bytes < g->kv_bytes_before),
                  "context cache %s, request %d (%s): status %s, %u cached tokens (want %s, %u), %llu shared bytes",
                  off ? "off" : "on", i, order[i]->name, g->context_cache ? g->context_cache : "(none)",
                  o.last.cached_tokens, want, cached, (unsigned long long)g->context_shared_bytes);
            free(o.text);
        }
        CHECK(metric(e, "vkvector_context_cache_hits_total") == (off ? 0 : 3), "context cache %s: %g hits",
              off ? "off" : "on", metric(e, "vkvector_context_cache_hits_total"));
        CHECK(metric(e, "vkvector_prefix_cache_entries") == (off ? 0 : 2), "context cache %s: %g entries",
              off ? "off" : "on", metric(e, "vkvector_prefix_cache_entries"));
        /* a query-aware compression of the same context reuses nothing, and says why */
        vkv_gen_request r = make_request(&c2);
        r.press.has_query_aware = r.press.query_aware = true;
        outcome o;
        one(e, r, &o);
        const vkv_gen_compression *g = &o.last.compression;
        CHECK(o.last.kind == VKV_SEQ_DONE && o.last.cached_tokens == 0 && g->context_cache &&
                  !strcmp(g->context_cache, off ? "off" : "not_reusable") &&
                  (off || (g->context_cache_reason && strstr(g->context_cache_reason, "query-aware"))),
              "context cache: a query-aware request: %s (%s), %u cached tokens", g->context_cache ? g->context_cache : "-",
              g->context_cache_reason ? g->context_cache_reason : "-", o.last.cached_tokens);
        free(o.text);
        vkv_engine_free(e);
    }
    /* a pool of one request's peak: another context evicts the entry */
    vkv_prompt p4;
    if (case_prompt(s, &c4, &p4)) {
        fail("context cache: tokenize: %s", vkv_last_error());
        goto out;
    }
    vkv_ctx_params one_seq = {.n_ctx = (uint32_t)p4.n + c4.max_tokens, .k_type = VKV_F16, .v_type = VKV_F16,
                              .compress = true};
    vkv_prompt_free(&p4);
    vkv_engine *e = cache_engine(s, false, vkv_ctx_plan_memory(&s->model->hp, &one_seq).kv_bytes + 64);
    if (!e) goto out;
    const tcase *order[] = {&c1, &c4, &c1};
    for (int i = 0; i < 3; i++) {
        outcome o;
        one(e, make_request(order[i]), &o);
        check_case(order[i], &o);
        CHECK(o.last.cached_tokens == 0, "context pressure %d: %u cached tokens", i, o.last.cached_tokens);
        free(o.text);
    }
    CHECK(metric(e, "vkvector_prefix_cache_evictions_total") == 2, "context pressure: %g evictions",
          metric(e, "vkvector_prefix_cache_evictions_total"));
    vkv_engine_free(e);
out:
    for (int i = 0; i < 4; i++) free(refs[i]->ref_text);
}

/* 64 requests at once, every one in the engine's steps together (one step
 * takes them all, in matrix-vector slices of VKV_BATCH_MAX columns): each
 * gives the text the session gives it alone. */
#define WIDE_SEQS 64
static void sixty_four_sequences(vkv_session *s)
{
    static const char *const lines[] = {"ROMEO: What light", "JULIET: Ay me", "HAMLET: To be, or not",
                                        "MENENIUS: What work's", "KING HENRY: Once more", "BRUTUS: There is a tide",
                                        "PORTIA: The quality of mercy", "GLOUCESTER: Now is the winter"};
    tcase *cs = calloc(WIDE_SEQS, sizeof *cs);
    char (*texts)[64] = calloc(WIDE_SEQS, sizeof *texts);
    vkv_seq **q = calloc(WIDE_SEQS, sizeof *q);
    vkv_engine *e = NULL;
    if (!cs || !texts || !q) {
        fail("64 sequences: out of host memory");
        goto out;
    }
    for (int i = 0; i < WIDE_SEQS; i++) {
        snprintf(texts[i], sizeof texts[i], "%s%.*s", lines[i % 8], i / 8, "!?,;.-:'");
        cs[i] = (tcase){.name = texts[i], .kind = VKV_GEN_TEXT, .text = texts[i], .max_tokens = 32, .chunk = WIDE_SEQS};
        if (i % 16 == 5) { /* a few that compress, prefilled alone between the others' steps */
            cs[i].press = "keydiff";
            cs[i].compression = 0.5;
        }
        if (reference(s, &cs[i])) {
            fail("64 sequences: the reference of '%s': %s", texts[i], vkv_last_error());
            goto out;
        }
    }
    vkv_engine_params p = {.max_seqs = WIDE_SEQS, .n_ctx = N_CTX, .prefill_chunk = WIDE_SEQS, .log = false};
    if (vkv_engine_create(s, &p, &e)) {
        fail("64 sequences: vkv_engine_create: %s", vkv_last_error());
        goto out;
    }
    for (int i = 0; i < WIDE_SEQS; i++) {
        vkv_gen_request r = make_request(&cs[i]);
        vkv_engine_submit(e, &r, &q[i]);
    }
    for (int i = 0; i < WIDE_SEQS; i++) {
        outcome o;
        read_all(q[i], &o);
        check_case(&cs[i], &o);
        free(o.text);
    }
    CHECK(metric(e, "vkvector_decode_step_sequences_max") > 2 * VKV_BATCH_MAX,
          "64 sequences: the widest step held %g sequences", metric(e, "vkvector_decode_step_sequences_max"));
out:
    vkv_engine_free(e);
    for (int i = 0; cs && i < WIDE_SEQS; i++) free(cs[i].ref_text);
    free(cs);
    free(texts);
    free(q);
}

/* The events of one vkv_engine_submit_n's sequences, read through
 * vkv_seq_next_any in whatever order they come, into o[0, n). */
static void read_group(vkv_seq **q, size_t n, outcome *o)
{
    vkv_strbuf *b = calloc(n, sizeof *b);
    memset(o, 0, n * sizeof *o);
    for (size_t open = n; open && b;) {
        vkv_seq_event ev;
        size_t w;
        if (!vkv_seq_next_any(q, n, 120000, &w, &ev)) {
            fail("a group: no event in 120 s");
            break;
        }
        if (!o[w].n_events++) o[w].started_first = ev.kind == VKV_SEQ_STARTED;
        if (ev.kind == VKV_SEQ_TEXT) vkv_strbuf_put(&b[w], ev.text, ev.len);
        if (ev.kind == VKV_SEQ_DONE || ev.kind == VKV_SEQ_ERROR) {
            o[w].last = ev;
            open--;
            continue;
        }
        vkv_seq_event_clear(&ev);
    }
    for (size_t i = 0; i < n; i++) {
        if (b) {
            vkv_strbuf_put(&b[i], "", 0);
            o[i].text = b[i].p;
            o[i].len = b[i].n;
        }
        vkv_seq_release(q[i]);
    }
    free(b);
}

static double fork_count(vkv_engine *e, const char *from)
{
    char name[96];
    snprintf(name, sizeof name, "vkvector_choice_forks_total{from=\"%s\"}", from);
    return metric(e, name);
}

#define CHOICES 3
/* OpenAI's n (vkv_engine_submit_n, docs/SERVE.md "Several choices"): every
 * choice at temperature 0 is the case's reference, whatever its follower
 * took of the first one's prefill (its prompt's pages for a plain prompt,
 * its compressed prompt for a query-agnostic or query-aware press, nothing
 * with compression during generation); sampled, choice 0 is the reference
 * with the request's seed and the others draw their own. A request counts
 * once, the pool is empty after, a group of more choices than places is
 * refused, a cancel ends them all, and when the first choice's prefill
 * fails the others prefill alone. */
static void several_choices(vkv_session *s)
{
    static const char *const names[] = {"plain", "keydiff", "budget", "chat-vector", "chat-snapkv", "q8_0", "sampled"};
    vkv_engine_params p = {.max_seqs = 2 * CHOICES, .n_ctx = N_CTX, .prefill_chunk = CHUNK, .log = true};
    vkv_engine *e;
    if (vkv_engine_create(s, &p, &e)) {
        fail("several choices: vkv_engine_create: %s", vkv_last_error());
        return;
    }
    outcome o[2 * CHOICES + 1];
    vkv_seq *q[2 * CHOICES + 1];
    const double stops_before = metric(e, "vkvector_requests_total{outcome=\"stop\"}") +
                                metric(e, "vkvector_requests_total{outcome=\"length\"}");
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const tcase *c = NULL;
        for (size_t i = 0; i < N_CASES; i++)
            if (!strcmp(cases[i].name, names[k])) c = &cases[i];
        if (!c) {
            fail("several choices: no case %s", names[k]);
            continue;
        }
        const double pages = fork_count(e, "pages"), rows = fork_count(e, "rows"),
                     compressed = fork_count(e, "compressed_prompt"), alone = fork_count(e, "alone");
        vkv_gen_request r = make_request(c);
        vkv_engine_submit_n(e, &r, CHOICES, q);
        read_group(q, CHOICES, o);
        const bool sampled = c->temperature > 0;
        check_case(c, &o[0]);
        for (int i = 1; i < CHOICES; i++) {
            if (!sampled) check_case(c, &o[i]);
            else CHECK(o[i].last.kind == VKV_SEQ_DONE, "%s: choice %d ended with %d", c->name, i, o[i].last.kind);
        }
        if (sampled)
            CHECK((o[1].len != o[0].len || memcmp(o[1].text, o[0].text, o[0].len)) ||
                      (o[2].len != o[0].len || memcmp(o[2].text, o[0].text, o[0].len)),
                  "%s: every choice sampled '%s': their seeds are the request's", c->name, o[0].text);
        /* how the followers began */
        const char *want = c->compress_every ? "alone" : c->press ? "compressed_prompt" : c->kv_type ? "rows" : "pages";
        const double got = !strcmp(want, "alone") ? fork_count(e, "alone") - alone
                           : !strcmp(want, "rows") ? fork_count(e, "rows") - rows
                           : !strcmp(want, "pages") ? fork_count(e, "pages") - pages
                                                    : fork_count(e, "compressed_prompt") - compressed;
        CHECK(got == CHOICES - 1, "%s: %g of %d followers began from %s", c->name, got, CHOICES - 1, want);
        for (int i = 0; i < CHOICES; i++) free(o[i].text);
    }
    CHECK(metric(e, "vkvector_requests_total{outcome=\"stop\"}") + metric(e, "vkvector_requests_total{outcome=\"length\"}") -
              stops_before == sizeof names / sizeof *names,
          "a request of %d choices counts once: %g requests ended", CHOICES,
          metric(e, "vkvector_requests_total{outcome=\"stop\"}") +
              metric(e, "vkvector_requests_total{outcome=\"length\"}") - stops_before);
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") == 0, "several choices: pool bytes in use after: %g",
          metric(e, "vkvector_kv_pool_bytes_in_use"));

    /* more choices than places: every one is refused, naming n */
    vkv_gen_request r = make_request(&cases[0]);
    vkv_engine_submit_n(e, &r, 2 * CHOICES + 1, q);
    read_group(q, 2 * CHOICES + 1, o);
    for (int i = 0; i < 2 * CHOICES + 1; i++) {
        CHECK(o[i].last.kind == VKV_SEQ_ERROR && o[i].last.http_status == 400 && o[i].last.param &&
                  !strcmp(o[i].last.param, "n") && o[i].n_events == 1,
              "choice %d of too many: %d %d %s", i, o[i].last.kind, o[i].last.http_status, o[i].last.message);
        free(o[i].text);
    }

    /* the front's way: the first refusal read, then every sequence released at once, the others' events unread
     * (the scheduler must not read the first one's refusal after its release freed it) */
    vkv_seq_event ev;
    for (int round = 0; round < 8; round++) {
        r = make_request(&cases[0]);
        vkv_engine_submit_n(e, &r, 2 * CHOICES + 1, q);
        CHECK(vkv_seq_next(q[0], 120000, &ev) && ev.kind == VKV_SEQ_ERROR && ev.param && !strcmp(ev.param, "n"),
              "a refusal read first: %d %s", ev.kind, ev.message);
        vkv_seq_event_clear(&ev);
        for (int i = 0; i < 2 * CHOICES + 1; i++) vkv_seq_release(q[i]);
    }

    /* a cancel mid-generation ends every choice, and the pool is empty after */
    r = text_request("ROMEO: What light", 0);
    vkv_engine_submit_n(e, &r, CHOICES, q);
    size_t w;
    bool texted = false;
    while (!texted && vkv_seq_next_any(q, CHOICES, 120000, &w, &ev)) {
        texted = ev.kind == VKV_SEQ_TEXT;
        const bool ended = ev.kind == VKV_SEQ_DONE || ev.kind == VKV_SEQ_ERROR;
        vkv_seq_event_clear(&ev);
        if (ended) break;
    }
    CHECK(texted, "the cancelled group sent no text");
    for (int i = 0; i < CHOICES; i++) vkv_seq_cancel(q[i]);
    read_group(q, CHOICES, o);
    for (int i = 0; i < CHOICES; i++) {
        CHECK(o[i].last.kind == VKV_SEQ_ERROR && o[i].last.code && !strcmp(o[i].last.code, "cancelled"),
              "cancelled choice %d: %d %s", i, o[i].last.kind, o[i].last.message);
        free(o[i].text);
    }
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") == 0, "pool bytes after the cancelled group: %g",
          metric(e, "vkvector_kv_pool_bytes_in_use"));
    vkv_engine_free(e);

    /* the first choice's prefill fails (a lost device, injected): the others prefill alone and give the reference */
    setenv("VKVECTOR_SERVE_FAULT", "prefill:1", 1);
    const vkv_status st = vkv_engine_create(s, &p, &e);
    unsetenv("VKVECTOR_SERVE_FAULT");
    if (st) {
        fail("several choices: vkv_engine_create with a fault: %s", vkv_last_error());
        return;
    }
    r = make_request(&cases[0]);
    vkv_engine_submit_n(e, &r, CHOICES, q);
    read_group(q, CHOICES, o);
    CHECK(o[0].last.kind == VKV_SEQ_ERROR && o[0].last.http_status == 500, "the failed first choice: %d %d %s",
          o[0].last.kind, o[0].last.http_status, o[0].last.message);
    for (int i = 1; i < CHOICES; i++) check_case(&cases[0], &o[i]);
    CHECK(fork_count(e, "alone") == CHOICES - 1, "%g followers prefilled alone after their first failed",
          fork_count(e, "alone"));
    for (int i = 0; i < CHOICES; i++) free(o[i].text);
    CHECK(metric(e, "vkvector_kv_pool_bytes_in_use") == 0, "pool bytes after the failed group: %g",
          metric(e, "vkvector_kv_pool_bytes_in_use"));
    vkv_engine_free(e);
}

/* --max-seqs left out: as many as a step takes (256) and the prefill chunk
 * holds, halved only when memory is short (the default model's scratch is
 * small beside lavapipe's heap). */
static void default_max_seqs(vkv_session *s)
{
    const uint32_t chunks[] = {CHUNK, 0};
    for (size_t i = 0; i < 2; i++) {
        vkv_engine_params p = {.n_ctx = N_CTX, .prefill_chunk = chunks[i]};
        vkv_engine *e;
        if (vkv_engine_create(s, &p, &e)) {
            fail("default --max-seqs: vkv_engine_create: %s", vkv_last_error());
            return;
        }
        vkv_engine_props props;
        vkv_engine_get_props(e, &props);
        const uint32_t most = chunks[i] ? chunks[i] : VKV_STEP_MAX;
        CHECK(props.max_seqs == most, "default --max-seqs with %u-token chunks: %u, want %u", chunks[i], props.max_seqs,
              most);
        vkv_engine_free(e);
    }
}

/* A model without a chat template vkvector knows: chat messages go as
 * ChatML, the text the chat case gives on the ChatML session. */
static void chat_falls_back_to_chatml(void)
{
    vkv_session_params sp = {.model_path = MODEL, .device = -1, .cmd = "test"};
    vkv_session *s;
    if (vkv_session_open(&sp, &s)) {
        fail("a session without a template: %s", vkv_last_error());
        return;
    }
    CHECK(s->chat == VKV_CHAT_UNKNOWN, "the default model has a chat template: the fallback is not tested");
    vkv_engine_params p = {.max_seqs = 1, .n_ctx = N_CTX, .prefill_chunk = CHUNK, .log = true};
    vkv_engine *e;
    if (vkv_engine_create(s, &p, &e)) fail("vkv_engine_create: %s", vkv_last_error());
    else {
        const tcase *c = &cases[4];
        outcome o;
        one(e, make_request(c), &o);
        CHECK(o.last.kind == VKV_SEQ_DONE && o.len == c->ref_len && !memcmp(o.text, c->ref_text, c->ref_len),
              "ChatML fallback: '%s', want '%s'", o.text, c->ref_text);
        free(o.text);
        vkv_engine_free(e);
    }
    CHECK(!vkv_instance_validation_errors(s->inst), "validation errors on the session without a template");
    vkv_session_close(s);
}

int main(void)
{
    vkv_session_params sp = {.model_path = MODEL, .device = -1, .load_calib = true, .chat = "chatml", .cmd = "test"};
    vkv_session *s;
    vkv_status st = vkv_session_open(&sp, &s);
    if (st == VKV_ERR_NO_DEVICE) {
        fprintf(stderr, "test_engine: skipped: %s\n", vkv_last_error());
        return 77;
    }
    if (st) {
        fprintf(stderr, "test_engine: %s\n", vkv_last_error());
        return 1;
    }
    for (size_t i = 0; i < N_CASES; i++)
        if ((st = reference(s, &cases[i]))) fail("%s: the reference: %s", cases[i].name, vkv_last_error());
    /* a one-message chat is the chat prompt run --chat makes */
    vkv_prompt a, b;
    vkv_chat_msg msg = {"user", (char *)cases[4].text};
    if (!vkv_session_tokenize_chat(s, s->chat, &msg, 1, &a) &&
        !vkv_session_tokenize(s, msg.content, strlen(msg.content), strlen(msg.content), true, VKV_SPLIT_APART, &b)) {
        CHECK(a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof *a.ids) && a.n_context == b.n_context &&
                  a.n_query_end == b.n_query_end,
              "a one-message chat tokenizes apart from run --chat's prompt");
        vkv_prompt_free(&a);
        vkv_prompt_free(&b);
    } else fail("chat tokenization: %s", vkv_last_error());
    /* a chat's context is its history before the last user turn: the history's own tokens */
    vkv_chat_msg conv[3] = {{"user", "Who is Romeo?"}, {"assistant", "A Montague."}, {"user", "And Juliet?"}};
    char *history = NULL;
    size_t history_len = 0, n_history = 0;
    int32_t *history_ids = NULL;
    if (!vkv_session_tokenize_chat(s, s->chat, conv, 3, &a) &&
        !vkv_chat_apply(s->chat, conv, 2, false, &history, &history_len) &&
        !vkv_tokenize(s->tok, history, history_len, true, true, &history_ids, &n_history)) {
        CHECK(a.n_context == n_history && !memcmp(a.ids, history_ids, n_history * sizeof *history_ids) &&
                  a.n_query_end > a.n_context && a.n_query_end < a.n,
              "a chat's context: %zu of %zu tokens (the history has %zu), the question ends at %zu", a.n_context, a.n,
              n_history, a.n_query_end);
        vkv_prompt_free(&a);
    } else fail("chat context: %s", vkv_last_error());
    free(history);
    free(history_ids);
    if (!failures) {
        stepped_prefills_match_the_prefill(s);
        concurrent_requests_match_the_session(s);
        refusals(s);
        reused_prefill_matches_the_prefill(s);
        reused_compressed_context_matches_the_compression(s);
        prefix_cache(s);
        context_cache(s);
        several_choices(s);
        default_max_seqs(s);
        sixty_four_sequences(s);
        chat_falls_back_to_chatml();
    }
    uint32_t verr = vkv_instance_validation_errors(s->inst);
    CHECK(!verr, "%u validation errors", verr);
    for (size_t i = 0; i < N_CASES; i++) {
        free(cases[i].ref_text);
        free(cases[i].ids);
    }
    vkv_session_close(s);
    if (failures) fprintf(stderr, "test_engine: %d failures\n", failures);
    else fprintf(stderr, "test_engine: all passed\n");
    return failures ? 1 : 0;
}
