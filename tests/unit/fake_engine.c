#include "fake_engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vkv_engine {
    pthread_mutex_t mu;
    char model_id[128];
    unsigned max_in_flight, delay_ms;
    unsigned in_flight;          /* admitted, not released */
    unsigned live;               /* submitted, not released */
    bool draining;
    unsigned long long submitted, rejected, cancelled, released;
    char last[1024];             /* the last request's fields, as metric labels */
};

static char byte_piece[256]; /* byte tokens' pieces, byte_piece[b] == b: filled at create, before any reader */

typedef struct piece {
    char *text;
    size_t len;
} piece;

struct vkv_seq {
    vkv_engine *e;
    pthread_cond_t cv;
    bool counted;                /* holds a place in flight */
    bool released;
    bool cancelled;
    int error_first;             /* an HTTP status, or 0 */
    const char *err_type, *err_param, *err_code;
    char err_msg[128];
    bool fail_midway;
    piece *pieces;
    size_t n_pieces, next;       /* next: pieces handed out */
    bool started_sent, done_sent;
    const char *finish;
    uint32_t prompt_tokens;
    struct timespec t0;
    vkv_press_request press;
};

vkv_engine *fake_engine_create(const fake_engine_params *p)
{
    for (int b = 0; b < 256; b++) byte_piece[b] = (char)b;
    vkv_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    snprintf(e->model_id, sizeof e->model_id, "%s", p->model_id ? p->model_id : "fake-model");
    e->max_in_flight = p->max_in_flight ? p->max_in_flight : 4;
    e->delay_ms = p->delay_ms;
    return e;
}

unsigned fake_engine_live(vkv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    unsigned n = e->live;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void vkv_engine_drain(vkv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    pthread_mutex_unlock(&e->mu);
}

void vkv_engine_free(vkv_engine *e)
{
    if (!e) return;
    vkv_engine_drain(e);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

const char *vkv_engine_model_id(const vkv_engine *e) { return e->model_id; }

/* ---- the vocabulary ---- */

static const char *const fake_words[FAKE_N_WORDS] = {"the", "quick", "brown", "fox", "hello", "world"};
static const char *const fake_special[2] = {"<s>", "</s>"};

void vkv_engine_get_props(const vkv_engine *e, vkv_engine_props *out)
{
    *out = (vkv_engine_props){
        .model_id = e->model_id, .model_path = "/models/fake-model.gguf", .n_ctx = 2048,
        .max_seqs = e->max_in_flight, .n_vocab = FAKE_WORD_ID + FAKE_N_WORDS, .chat_template = "chatml",
        .chat_template_source = "", .bos_token = fake_special[0], .eos_token = fake_special[1],
        .defaults = {.has_press = true, .has_compression = true, .has_vector = true, .has_pa = true,
                     .has_kv_type = true, .has_compress_every = true, .has_max_kv_tokens = true,
                     .has_query_aware = true, .press = "none", .pa = -1, .kv_type = "f16"},
        .sampling = vkv_gen_sampling_defaults(),
    };
}

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

vkv_status vkv_engine_tokenize(const vkv_engine *e, const char *text, size_t len, bool add_special, bool parse_special,
                               int32_t **ids, size_t *n_ids)
{
    (void)e;
    *ids = NULL;
    *n_ids = 0;
    int32_t *v = malloc((len + 1) * sizeof *v); /* at most a token a byte, and BOS */
    if (!v) return vkv_error(VKV_ERR_OOM, "out of memory (fake tokenizer)");
    size_t n = 0;
    if (add_special) v[n++] = 0;
    for (size_t i = 0; i < len;) {
        int32_t id = -1;
        size_t w = 0;
        for (int k = 0; parse_special && k < 2 && id < 0; k++) {
            size_t sl = strlen(fake_special[k]);
            if (len - i >= sl && !memcmp(text + i, fake_special[k], sl)) id = k, w = sl;
        }
        for (int k = 0; k < FAKE_N_WORDS && id < 0 && (i == 0 || !is_letter(text[i - 1])); k++) {
            size_t wl = strlen(fake_words[k]);
            if (len - i >= wl && !memcmp(text + i, fake_words[k], wl) && (i + wl == len || !is_letter(text[i + wl])))
                id = FAKE_WORD_ID + k, w = wl;
        }
        if (id < 0) id = 2 + (unsigned char)text[i], w = 1;
        v[n++] = id;
        i += w;
    }
    *ids = v;
    *n_ids = n;
    return VKV_OK;
}

const char *vkv_engine_token_piece(const vkv_engine *e, int32_t id, bool special, size_t *len)
{
    (void)e;
    *len = 0;
    if (id < 0 || id >= FAKE_WORD_ID + FAKE_N_WORDS) return NULL;
    if (id < 2 && !special) return ""; /* control tokens */
    const char *p = id < 2 ? fake_special[id] : id >= FAKE_WORD_ID ? fake_words[id - FAKE_WORD_ID] : NULL;
    if (p) {
        *len = strlen(p);
        return p;
    }
    *len = 1;
    return &byte_piece[id - 2];
}

/* ---- the reply ---- */

static size_t count_words(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (!*p) break;
        n++;
        while (*p && *p != ' ' && *p != '\n' && *p != '\t') p++;
    }
    return n;
}

static bool add_piece(vkv_seq *q, const char *s, size_t n, bool space)
{
    piece *np = realloc(q->pieces, (q->n_pieces + 1) * sizeof *np);
    if (!np) return false;
    q->pieces = np;
    char *t = malloc(n + 2);
    if (!t) return false;
    size_t k = 0;
    if (space) t[k++] = ' ';
    memcpy(t + k, s, n);
    t[k + n] = 0;
    q->pieces[q->n_pieces++] = (piece){t, k + n};
    return true;
}

/* One piece per word of `src`, at most max (0: all). */
static bool echo(vkv_seq *q, const char *src, uint32_t max)
{
    size_t nw = count_words(src);
    size_t n = max && max < nw ? max : nw;
    q->finish = max && max < nw ? "length" : "stop";
    const char *p = src;
    for (size_t i = 0; i < n; i++) {
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        const char *w = p;
        while (*p && *p != ' ' && *p != '\n' && *p != '\t') p++;
        if (!add_piece(q, w, (size_t)(p - w), i > 0)) return false;
    }
    return true;
}

/* Cuts the reply before the first match of a stop sequence. */
static void apply_stop(vkv_seq *q, char *const *stop, size_t n_stop)
{
    size_t total = 0;
    for (size_t i = 0; i < q->n_pieces; i++) total += q->pieces[i].len;
    char *all = malloc(total + 1);
    if (!all) return;
    size_t k = 0;
    for (size_t i = 0; i < q->n_pieces; i++) {
        memcpy(all + k, q->pieces[i].text, q->pieces[i].len);
        k += q->pieces[i].len;
    }
    all[k] = 0;
    size_t cut = SIZE_MAX;
    for (size_t s = 0; s < n_stop; s++) {
        char *m = strstr(all, stop[s]);
        if (m && (size_t)(m - all) < cut) cut = (size_t)(m - all);
    }
    free(all);
    if (cut == SIZE_MAX) return;
    size_t at = 0, i = 0;
    for (; i < q->n_pieces && at + q->pieces[i].len <= cut; i++) at += q->pieces[i].len;
    if (i < q->n_pieces && cut > at) { /* the piece the match starts in keeps its head */
        q->pieces[i].len = cut - at;
        i++;
    }
    for (size_t j = i; j < q->n_pieces; j++) free(q->pieces[j].text);
    q->n_pieces = i;
    q->finish = "stop";
}

static void label(char *o, size_t cap, const char *key, const char *val)
{
    size_t n = strlen(o);
    if (n + 1 >= cap) return;
    o += n;
    cap -= n;
    int w = snprintf(o, cap, "%s%s=\"", n ? "," : "", key);
    if (w < 0 || (size_t)w >= cap) return;
    size_t k = (size_t)w;
    for (const char *p = val; *p && k + 3 < cap; p++) {
        if (*p == '"' || *p == '\\') o[k++] = '\\';
        if (*p == '\n') { o[k++] = '\\'; o[k++] = 'n'; continue; }
        o[k++] = *p;
    }
    if (k + 1 < cap) o[k++] = '"';
    o[k] = 0;
}

static void describe(vkv_engine *e, const vkv_gen_request *r)
{
    char *o = e->last, v[64];
    const vkv_press_request *p = &r->press;
    o[0] = 0;
    size_t cap = sizeof e->last;
    label(o, cap, "kind", r->kind == VKV_GEN_CHAT ? "chat" : r->kind == VKV_GEN_TEXT ? "text" : "ids");
    snprintf(v, sizeof v, "%u", r->max_tokens);
    label(o, cap, "max_tokens", v);
    snprintf(v, sizeof v, "%g", r->sampling.temperature);
    label(o, cap, "temperature", v);
    snprintf(v, sizeof v, "%g", r->sampling.top_p);
    label(o, cap, "top_p", v);
    snprintf(v, sizeof v, "%llu", (unsigned long long)r->sampling.seed);
    label(o, cap, "seed", v);
    snprintf(v, sizeof v, "%zu", r->n_stop);
    label(o, cap, "n_stop", v);
    label(o, cap, "stream", r->stream ? "true" : "false");
    label(o, cap, "press", p->has_press ? p->press : "-");
    snprintf(v, sizeof v, "%g", p->compression);
    label(o, cap, "compression", p->has_compression ? v : "-");
    label(o, cap, "vector", p->has_vector ? (p->vector ? "true" : "false") : "-");
    snprintf(v, sizeof v, "%g", p->pa);
    label(o, cap, "pa", p->has_pa ? v : "-");
    label(o, cap, "kv_type", p->has_kv_type ? p->kv_type : "-");
    snprintf(v, sizeof v, "%u", p->compress_every);
    label(o, cap, "compress_every", p->has_compress_every ? v : "-");
    snprintf(v, sizeof v, "%u", p->max_kv_tokens);
    label(o, cap, "max_kv_tokens", p->has_max_kv_tokens ? v : "-");
    label(o, cap, "query_aware", p->has_query_aware ? (p->query_aware ? "true" : "false") : "-");
}

static void seq_error(vkv_seq *q, int status, const char *type, const char *param, const char *code, const char *msg)
{
    q->error_first = status;
    q->err_type = type;
    q->err_param = param;
    q->err_code = code;
    snprintf(q->err_msg, sizeof q->err_msg, "%s", msg);
}

static void submit_one(vkv_engine *e, const vkv_gen_request *req, vkv_seq **out);

void vkv_engine_submit(vkv_engine *e, vkv_gen_request *req, vkv_seq **out) { vkv_engine_submit_n(e, req, 1, out); }

/* n sequences of one request: each echoes as one request would */
void vkv_engine_submit_n(vkv_engine *e, vkv_gen_request *req, uint32_t n, vkv_seq **out)
{
    for (uint32_t i = 0; i < (n ? n : 1); i++) submit_one(e, req, &out[i]);
    vkv_gen_request_free(req);
}

static void submit_one(vkv_engine *e, const vkv_gen_request *req, vkv_seq **out)
{
    vkv_seq *q = calloc(1, sizeof *q);
    if (!q) abort(); /* a test helper: no recovery */
    q->e = e;
    pthread_condattr_t ca; /* deadlines are on CLOCK_MONOTONIC */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    clock_gettime(CLOCK_MONOTONIC, &q->t0);
    q->press = req->press;

    /* the text to echo: a chat's last message, a prompt, or its ids as words */
    char *src = NULL;
    size_t words = 0;
    char ids[4096];
    if (req->kind == VKV_GEN_CHAT) {
        for (size_t i = 0; i < req->n_messages; i++) words += count_words(req->messages[i].content);
        src = req->n_messages ? req->messages[req->n_messages - 1].content : "";
    } else if (req->kind == VKV_GEN_TEXT) {
        src = req->prompt;
        words = count_words(src);
    } else {
        size_t k = 0;
        ids[0] = 0;
        for (size_t i = 0; i < req->n_prompt_ids && k + 16 < sizeof ids; i++)
            k += (size_t)snprintf(ids + k, sizeof ids - k, "%st%d", i ? " " : "", req->prompt_ids[i]);
        src = ids;
        words = req->n_prompt_ids;
    }
    q->prompt_tokens = (uint32_t)words;

    pthread_mutex_lock(&e->mu);
    e->submitted++;
    e->live++;
    describe(e, req);
    if (e->draining) {
        seq_error(q, 503, "server_error", NULL, NULL, "the engine is draining");
    } else if (strstr(src, "FAKE_ERROR_500")) {
        seq_error(q, 500, "server_error", NULL, NULL, "the fake engine failed as asked");
    } else if (strstr(src, "FAKE_CONTEXT")) {
        seq_error(q, 400, "invalid_request_error", req->kind == VKV_GEN_CHAT ? "messages" : "prompt",
                  "context_length_exceeded", "the prompt is longer than the context (fake)");
    } else if (e->in_flight >= e->max_in_flight) {
        seq_error(q, 429, "rate_limit_error", NULL, "rate_limit_exceeded", "the queue is full (fake)");
    } else {
        e->in_flight++;
        q->counted = true;
    }
    if (q->error_first) e->rejected++;
    pthread_mutex_unlock(&e->mu);

    if (!q->error_first) {
        q->fail_midway = strstr(src, "FAKE_FAIL_MIDWAY") != NULL;
        if (!echo(q, src, req->max_tokens)) abort();
        apply_stop(q, req->stop, req->n_stop);
    }
    *out = q;
}

static void add_ms(struct timespec *t, int64_t ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (long)(ms % 1000) * 1000000;
    if (t->tv_nsec >= 1000000000) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000;
    }
}

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void fill_done(vkv_seq *q, vkv_seq_event *ev)
{
    ev->kind = VKV_SEQ_DONE;
    ev->finish_reason = q->cancelled ? "stop" : q->finish;
    ev->prompt_tokens = q->prompt_tokens;
    ev->completion_tokens = (uint32_t)q->next;
    const vkv_press_request *p = &q->press;
    vkv_gen_compression *c = &ev->compression;
    bool on = p->has_press && strcmp(p->press, "none");
    c->press = on ? p->press : "none";
    c->compression = on && p->has_compression ? p->compression : 0;
    c->vector = on && p->has_vector && p->vector;
    if (on) {
        /* 2 layers x 2 KV heads; 256 bytes a token's K and V */
        c->n_compressed = q->prompt_tokens;
        uint64_t n = (uint64_t)q->prompt_tokens * 4;
        c->n_evicted = (uint64_t)floor((double)n * c->compression);
        c->n_approximated = c->vector ? (n - c->n_evicted) / 4 : 0;
        c->n_retained = n - c->n_evicted - c->n_approximated;
        c->kv_bytes_before = n * 256;
        c->kv_bytes_after = c->n_retained * 256 + c->n_approximated * 128;
    }
    c->decode_compressions = p->has_compress_every && p->compress_every ? (uint32_t)(q->next / p->compress_every) : 0;
    q->done_sent = true;
}

bool vkv_seq_next(vkv_seq *q, int timeout_ms, vkv_seq_event *ev)
{
    vkv_engine *e = q->e;
    memset(ev, 0, sizeof *ev);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms >= 0) add_ms(&deadline, timeout_ms);
    pthread_mutex_lock(&e->mu);
    bool got = false;
    for (;;) {
        if (q->done_sent) break; /* nothing after the last event */
        if (q->error_first) {
            ev->kind = VKV_SEQ_ERROR;
            ev->http_status = q->error_first;
            snprintf(ev->message, sizeof ev->message, "%s", q->err_msg);
            ev->type = q->err_type;
            ev->param = q->err_param;
            ev->code = q->err_code;
            q->done_sent = true;
            got = true;
            break;
        }
        if (!q->started_sent) {
            ev->kind = VKV_SEQ_STARTED;
            q->started_sent = true;
            got = true;
            break;
        }
        if (q->cancelled || q->next == q->n_pieces) {
            fill_done(q, ev);
            got = true;
            break;
        }
        if (q->fail_midway && q->next == 2) {
            seq_error(q, 500, "server_error", NULL, NULL, "the fake engine failed midway as asked");
            continue;
        }
        struct timespec due = q->t0, now;
        add_ms(&due, (int64_t)(q->next + 1) * e->delay_ms);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!before(&now, &due)) {
            piece *p = &q->pieces[q->next++];
            ev->kind = VKV_SEQ_TEXT;
            ev->text = p->text;
            ev->len = p->len;
            p->text = NULL;
            got = true;
            break;
        }
        if (timeout_ms >= 0 && !before(&now, &deadline)) break;
        const struct timespec *until = timeout_ms >= 0 && before(&deadline, &due) ? &deadline : &due;
        pthread_cond_timedwait(&q->cv, &e->mu, until);
    }
    pthread_mutex_unlock(&e->mu);
    return got;
}

/* Polls each in turn: the fake's events are due at fixed times anyway. */
bool vkv_seq_next_any(vkv_seq *const *qs, size_t n, int timeout_ms, size_t *which, vkv_seq_event *ev)
{
    struct timespec deadline, now;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    add_ms(&deadline, timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        for (size_t i = 0; i < n; i++)
            if (vkv_seq_next(qs[i], 0, ev)) {
                *which = i;
                return true;
            }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (timeout_ms >= 0 && !before(&now, &deadline)) return false;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

void vkv_seq_cancel(vkv_seq *q)
{
    pthread_mutex_lock(&q->e->mu);
    if (!q->cancelled) q->e->cancelled++;
    q->cancelled = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->e->mu);
}

void vkv_seq_release(vkv_seq *q)
{
    vkv_engine *e = q->e;
    pthread_mutex_lock(&e->mu);
    if (q->released) {
        fprintf(stderr, "fake engine: a sequence released twice\n");
        abort();
    }
    q->released = true;
    e->released++;
    e->live--;
    if (q->counted) e->in_flight--;
    pthread_mutex_unlock(&e->mu);
    for (size_t i = 0; i < q->n_pieces; i++) free(q->pieces[i].text);
    free(q->pieces);
    pthread_cond_destroy(&q->cv);
    free(q);
}

void vkv_engine_metrics(vkv_engine *e, vkv_strbuf *out)
{
    char b[2048];
    pthread_mutex_lock(&e->mu);
    snprintf(b, sizeof b,
             "# TYPE fake_engine_submitted_total counter\nfake_engine_submitted_total %llu\n"
             "# TYPE fake_engine_rejected_total counter\nfake_engine_rejected_total %llu\n"
             "# TYPE fake_engine_cancelled_total counter\nfake_engine_cancelled_total %llu\n"
             "# TYPE fake_engine_released_total counter\nfake_engine_released_total %llu\n"
             "# TYPE fake_engine_live gauge\nfake_engine_live %u\n"
             "# TYPE fake_engine_last_request gauge\nfake_engine_last_request{%s} 1\n",
             e->submitted, e->rejected, e->cancelled, e->released, e->live, e->last);
    pthread_mutex_unlock(&e->mu);
    vkv_strbuf_puts(out, b);
}
