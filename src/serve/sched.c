/* vkvector serve's scheduler (serve/engine.h): one thread owns the GPU and
 * runs every admitted sequence on the session's device and model, each
 * iteration admitting what fits the KV pool, evaluating one prefill chunk
 * and one decoding step of every decoding sequence (docs/ARCHITECTURE.md §1,
 * "The scheduler"). */
#include "serve/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv/kv_pages.h"
#include "kvlayout/kv_layout.h"
#include "press/press.h"

#define DEFAULT_QUEUE 64
#define DEFAULT_PREFILL_CHUNK 512
/* The default pool leaves this share of the device heap free (driver
 * allocations, press sessions' scoring buffers at compression). */
#define POOL_MARGIN_DIV 16
#define COMPRESSION_F32S 16 /* a compression's buffers: f32s a (token, layer, KV head), at most */

#define DEFAULT_PREFIX_PAGE 16
/* Finished prompts' caches kept at most (the least recently used go first). */
#define MAX_PREFIX_ENTRIES 256

/* Upper bounds (seconds) of the step-time histogram's buckets. */
static const double STEP_BUCKETS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define N_STEP_BUCKETS (sizeof STEP_BUCKETS / sizeof STEP_BUCKETS[0])
/* Request latencies' buckets (seconds), for the vLLM-style metrics a
 * dashboard built for vLLM reads (docs/SERVE.md, "Metrics"). */
static const double LATENCY_BUCKETS[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                         1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640};
#define N_LATENCY_BUCKETS (sizeof LATENCY_BUCKETS / sizeof LATENCY_BUCKETS[0])

/* A Prometheus histogram over LATENCY_BUCKETS (under the engine's mu). */
typedef struct latency_hist {
    uint64_t counts[N_LATENCY_BUCKETS + 1];
    double sum;
    uint64_t count;
} latency_hist;

static void hist_add(latency_hist *h, double s)
{
    size_t b = 0;
    while (b < N_LATENCY_BUCKETS && s > LATENCY_BUCKETS[b]) b++;
    h->counts[b]++;
    h->sum += s;
    h->count++;
}

typedef enum seq_state {
    SEQ_WAITING,                /* queued, not yet tokenized */
    SEQ_READY,                  /* queued, tokenized, its peak known */
    SEQ_FORK,                   /* a follower, started: it waits for its leader's prefill (fork_follower) */
    SEQ_PREFILL,
    SEQ_DECODE,
    SEQ_FINISHED,
} seq_state;

/* How a request's follower began its prefill (vkvector_choice_forks_total). */
typedef enum fork_how { FORK_PAGES, FORK_ROWS, FORK_COMPRESSED, FORK_ALONE, N_FORKS } fork_how;
static const char *const FORK_NAMES[N_FORKS] = {"pages", "rows", "compressed_prompt", "alone"};

/* Outcomes counted by vkvector_requests_total. */
typedef enum outcome {
    OUT_STOP, OUT_LENGTH, OUT_CANCELLED, OUT_INVALID, OUT_QUEUE_FULL, OUT_UNAVAILABLE, OUT_FAILED, N_OUTCOMES
} outcome;
static const char *const OUTCOME_NAMES[N_OUTCOMES] = {"stop",       "length",      "cancelled", "invalid",
                                                      "queue_full", "unavailable", "failed"};

/* A generated token's logprobs, waiting for its text to be sent: bytes
 * [start, end) of the sequence's text are its. */
typedef struct pending_token {
    vkv_token_logprob lp;
    size_t start, end;
} pending_token;

/* One request's sequences: its n choices (OpenAI's `n`; docs/SERVE.md,
 * "Several choices"). member[0], the leader, waits in the queue for the
 * group; the followers are admitted with it and fork from its prefill: they
 * map (or copy) its prompt's cache and evaluate the last prompt token
 * themselves, or take its compressed prompt. The members' event rings share
 * one lock and condition, so one reader of them all waits on one
 * (vkv_seq_next_any). Freed with its last member. */
typedef struct seq_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint refs;           /* members not freed */
    vkv_gen_request request;    /* the caller's, copied at submit: its pointers are the engine's */
    uint32_t n;
    /* The scheduler's. */
    vkv_seq **member;           /* [n] member[0] the leader; NULL once the scheduler let it go */
    uint32_t holding;           /* members still holding the request (freed by the last) */
    uint32_t mapping;           /* followers running that map pages of the leader's */
    uint64_t leader_held;       /* the leader's pool bytes after it ended, counted until no follower maps them */
    uint32_t ended;             /* members that finished or failed after they started */
    bool leader_ran;            /* the leader finished (DONE): the request ran */
    double t_first_token;       /* now_s() at the request's first generated token; 0: none yet */
} seq_group;

struct vkv_seq {
    /* Shared with the reader, under g->mu. */
    seq_group *g;
    uint32_t choice;            /* its index among the group's members */
    vkv_seq_event *ev;          /* a ring of pending events */
    size_t ev_head, ev_n, ev_cap;
    bool reader_done, engine_done; /* freed when both are */
    bool final_read;            /* the reader has had a DONE or ERROR */
    atomic_bool cancelled;

    /* The scheduler's. */
    vkv_engine *e;
    unsigned long long id;
    vkv_gen_request *req;       /* &g->request; NULL once it let it go */
    vkv_seq *next;              /* the waiting list */
    seq_state state;
    vkv_prompt pr;
    vkv_compression c;
    vkv_dtype kv_type;
    vkv_ctx_params cp;
    uint64_t peak;              /* predicted peak KV bytes */
    bool paged;                 /* its cache is paged from the engine's pool (plain, of the pool's type) */
    const vkv_session_seq *mapped_from; /* the prefix entry whose pages it maps (pinned while it runs) */
    bool maps_leader;           /* a follower that maps pages of its leader's (counted in g->mapping) */
    uint64_t held;              /* KV bytes counted in the pool now */
    vkv_session_seq *ss;
    vkv_sampler *smp;
    vkv_detok detok;
    bool detok_on;
    vkv_strbuf text;            /* generated text so far */
    size_t emitted;             /* bytes of it sent */
    float *logits;              /* [n_vocab] the prefill's */
    int32_t next_id;            /* the token the next decoding step appends */
    uint32_t n_gen;
    double t_submit, t_last_token; /* now_s() at submission and at the last token taken */
    vkv_status prompt_st;       /* the prompt's tokenization, done at submission on the caller's thread */
    char prompt_err[400];       /* and its message when it failed */
    vkv_gen_compression comp;
    uint32_t cached_tokens;     /* prompt tokens taken from the prefix cache */
    bool context_reused;        /* its compressed context came from the cache */
    float *context_logits;      /* [n_vocab] its compressed context's last token's, when that is the whole prompt */
    /* logprobs and echo (docs/SERVE.md, "Log-probabilities") */
    vkv_token_logprob *prompt_tokens; /* [pr.n] with echo: the prompt's, sent with STARTED */
    size_t last_row;            /* with echo and logprobs, the logits row of the prompt's last token (a chunk's) */
    pending_token *pending;     /* [n_pending] generated tokens whose text is not sent yet */
    vkv_json_matcher *matcher;  /* response_format: the output so far against its constraint */
    size_t n_pending, cap_pending;
    vkv_seq_event refusal;      /* why prepare refused it */
};

/* A finished prompt's cache kept for the prompts that start with it
 * (docs/SERVE.md, "The prefix cache"): the sequence, whose rows of the prompt
 * tokens ids[0, n_ids) a later prefill copies instead of evaluating them. */
typedef struct prefix_entry {
    vkv_session_seq *ss;
    int32_t *ids;               /* [n_ids] */
    uint32_t n_ids;
    vkv_dtype kv_type;
    uint64_t bytes;             /* its cache's device bytes, counted in the pool */
    uint64_t last_used;         /* the engine's use clock when it was kept or last reused */
    /* A compressed context instead (docs/SERVE.md, "The compressed-context
     * cache"): ss holds only the context ids[0, n_ids) as compression c left
     * it, which a later request with the same context and compression takes
     * whole (vkv_session_seq_prefill_begin_compressed). */
    bool compressed;
    vkv_compression c;
    vkv_gen_compression comp;   /* what the compression did (the reusing responses' counts) */
    float *logits;              /* [n_vocab] the context's last token's when it was a whole prompt, else NULL */
} prefix_entry;

struct vkv_engine {
    vkv_session *s;
    vkv_engine_params p;        /* defaults applied */
    uint64_t budget;
    vkv_chat_template chat;     /* the session's, or ChatML */
    char *model_path;           /* for GET /props; NULL: not known */
    char *bos_text, *eos_text;  /* the special tokens' text, NUL-terminated (GET /props) */
    pthread_t thread;
    bool thread_started;
    /* The activation buffers every sequence's context borrows
     * (vkv_ctx_params.scratch_from): one forward runs at a time, on the
     * scheduler's thread. Its own KV cache is a chunk's. */
    vkv_ctx *scratch_owner;
    /* The KV page pool (kv/kv_pages.h): the caches of plain requests of the
     * default cache type (f16) are pages of it, and the prefix cache keeps
     * and shares their prompts' pages (docs/SERVE.md, "The KV pool"). */
    vkv_kv_pages *pages;
    /* Fault injection for the tests (docs/SERVE.md, "Faults"):
     * VKVECTOR_SERVE_FAULT=decode:N[,M...] fails the Nth (Mth, ...)
     * decoding step, prefill:N[,M...] the Nth prefill forward (one prompt's
     * chunk, or several prompts' together), as a lost device would.
     * decode_steps and prefill_forwards count them. */
    uint64_t fault_steps[8], decode_steps, prefill_forwards;
    uint32_t n_fault_steps;
    bool fault_prefill;         /* fault_steps count prefill forwards, not decoding steps */

    /* Under mu: the waiting list, the stop flag, what metrics read. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    vkv_seq *wait_head, *wait_tail;
    uint32_t n_waiting, n_active;
    uint32_t n_active_peak;     /* the most sequences active at once since the start */
    bool stopping;
    unsigned long long next_id;
    uint64_t pool_used;
    vkv_mem_stats mem;          /* the device's memory as the scheduler last saw it (for /metrics) */
    vkv_kv_pages_stats page_stats; /* and the page pool's counts */
    uint64_t outcomes[N_OUTCOMES];
    uint64_t prompt_tokens, gen_tokens, prefill_compressions, decode_compressions;
    uint64_t step_hist[N_STEP_BUCKETS + 1];
    double step_sum;
    uint64_t step_count;
    latency_hist ttft, itl, e2e; /* time to first token, between tokens, submission to the last event */
    /* response_format's constrained decoding (docs/SERVE.md, "Structured
     * outputs"): the vocabulary's byte trie, its end-of-generation tokens,
     * and the scheduler's mask of the tokens one step may take */
    vkv_json_vocab *json_vocab;
    vkv_sampler_params sampling; /* what requests get for the sampling fields they leave out */
    int32_t *eog_ids;
    size_t n_eog;
    bool *allowed;              /* [n_vocab] */
    uint32_t step_seqs_max;     /* the most sequences one decoding step has held */
    /* the prefix cache: entries (the scheduler's; their count and bytes under mu) */
    prefix_entry *prefix;       /* [MAX_PREFIX_ENTRIES] */
    uint32_t n_prefix;
    uint64_t prefix_bytes;      /* device bytes its entries hold (pool_used does not count them) */
    uint64_t prefix_clock;
    uint64_t prefix_queries, prefix_hits, prefix_evictions; /* prompt tokens looked up, reused; entries dropped */
    uint64_t context_queries, context_hits; /* requests that may reuse a compressed context, and did */
    uint64_t forks[N_FORKS];    /* followers begun, by how (fork_how) */

    /* The scheduler thread's. */
    vkv_seq **active;           /* [max_seqs], in admission order */
    vkv_seq **batch;            /* [max_seqs] a decoding step's sequences */
    vkv_status *batch_st;       /* [max_seqs] each one's outcome */
    uint32_t *batch_row;        /* [max_seqs] each one's row of the evaluation */
    vkv_ctx **eval_ctx;         /* [max_seqs] the evaluation's contexts, */
    int32_t *eval_ids;          /* [max_seqs] tokens, */
    float *eval_logits;         /* [max_seqs, n_vocab] and logits; */
    double last_step_s;         /* wall time of the last decoding step (prefill_iteration's allowance) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double mib(uint64_t b) { return b / 1048576.0; }

static void logf_(const vkv_engine *e, const char *fmt, ...) VKV_PRINTF(2, 3);
static void logf_(const vkv_engine *e, const char *fmt, ...)
{
    if (!e->p.log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vkvector serve: %s\n", line);
}

static void bufprintf(vkv_strbuf *b, const char *fmt, ...) VKV_PRINTF(2, 3);
static void bufprintf(vkv_strbuf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) vkv_strbuf_put(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* ---- requests and events ---- */

static void group_unref(seq_group *g)
{
    if (atomic_fetch_sub(&g->refs, 1) != 1) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->member);
    free(g);
}

static void seq_free(vkv_seq *q)
{
    while (q->ev_n) {
        vkv_seq_event_clear(&q->ev[q->ev_head]);
        q->ev_head = (q->ev_head + 1) % q->ev_cap;
        q->ev_n--;
    }
    free(q->ev);
    seq_group *g = q->g;
    free(q);
    group_unref(g);
}

/* Queues an event for the reader (taking ev's text). false when out of memory. */
static bool push_event(vkv_seq *q, vkv_seq_event *ev)
{
    pthread_mutex_lock(&q->g->mu);
    bool ok = true;
    if (q->ev_n == q->ev_cap) {
        size_t cap = q->ev_cap ? 2 * q->ev_cap : 8;
        vkv_seq_event *g = malloc(cap * sizeof *g);
        if (!g) ok = false;
        else {
            for (size_t i = 0; i < q->ev_n; i++) g[i] = q->ev[(q->ev_head + i) % q->ev_cap];
            free(q->ev);
            q->ev = g;
            q->ev_cap = cap;
            q->ev_head = 0;
        }
    }
    if (ok) q->ev[(q->ev_head + q->ev_n++) % q->ev_cap] = *ev;
    else vkv_seq_event_clear(ev);
    pthread_cond_broadcast(&q->g->cv);
    pthread_mutex_unlock(&q->g->mu);
    return ok;
}

/* The scheduler is done with q (its last event queued). */
static void engine_release(vkv_seq *q)
{
    pthread_mutex_lock(&q->g->mu);
    q->g->member[q->choice] = NULL;
    q->engine_done = true;
    bool gone = q->reader_done;
    pthread_mutex_unlock(&q->g->mu);
    if (gone) seq_free(q);
}

/* q's next event into *ev, under its group's lock; false when none is there. */
static bool take_event(vkv_seq *q, vkv_seq_event *ev)
{
    if (q->ev_n) {
        *ev = q->ev[q->ev_head];
        q->ev_head = (q->ev_head + 1) % q->ev_cap;
        q->ev_n--;
        q->final_read |= ev->kind == VKV_SEQ_DONE || ev->kind == VKV_SEQ_ERROR;
        return true;
    }
    if (q->engine_done && !q->final_read) {
        /* The engine is done but its last event was lost (out of host
         * memory in push_event): the reader gets an error, never a wait. */
        *ev = (vkv_seq_event){.kind = VKV_SEQ_ERROR, .http_status = 500, .type = "server_error"};
        snprintf(ev->message, sizeof ev->message, "the request's last event was lost: out of host memory");
        q->final_read = true;
        return true;
    }
    return false;
}

bool vkv_seq_next_any(vkv_seq *const *qs, size_t n, int timeout_ms, size_t *which, vkv_seq_event *ev)
{
    memset(ev, 0, sizeof *ev);
    seq_group *g = qs[0]->g;
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&g->mu);
    bool got = false;
    for (;;) {
        for (size_t i = 0; i < n && !got; i++)
            if (qs[i]->g == g && take_event(qs[i], ev)) {
                *which = i;
                got = true;
            }
        if (got) break;
        if (timeout_ms < 0) pthread_cond_wait(&g->cv, &g->mu);
        else if (pthread_cond_timedwait(&g->cv, &g->mu, &until)) break;
    }
    pthread_mutex_unlock(&g->mu);
    return got;
}

bool vkv_seq_next(vkv_seq *q, int timeout_ms, vkv_seq_event *ev)
{
    size_t which;
    return vkv_seq_next_any(&q, 1, timeout_ms, &which, ev);
}

void vkv_seq_cancel(vkv_seq *q)
{
    atomic_store(&q->cancelled, true);
    /* wake the scheduler if it sleeps with only this one queued */
    pthread_mutex_lock(&q->e->mu);
    pthread_cond_broadcast(&q->e->cv);
    pthread_mutex_unlock(&q->e->mu);
}

void vkv_seq_release(vkv_seq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->g->mu);
    q->reader_done = true;
    bool gone = q->engine_done;
    pthread_mutex_unlock(&q->g->mu);
    if (gone) seq_free(q);
}

/* A request's outcome (its leader's: a request of n choices counts once). */
static void count_outcome(const vkv_seq *q, outcome o)
{
    vkv_engine *e = q->e;
    if (q->choice) return;
    pthread_mutex_lock(&e->mu);
    e->outcomes[o]++;
    pthread_mutex_unlock(&e->mu);
}

/* q's error event (the last of a request that ends in an error). */
static void error_event(vkv_seq *q, vkv_seq_event *ev, int status, const char *type, const char *code,
                        const char *param, const char *fmt, va_list ap)
{
    *ev = (vkv_seq_event){.kind = VKV_SEQ_ERROR, .http_status = status, .type = type, .code = code, .param = param};
    vsnprintf(ev->message, sizeof ev->message, fmt, ap);
    logf_(q->e, "request %llu ends with %d%s%s: %s", q->id, status, code ? " " : "", code ? code : "", ev->message);
}

static void push_error(vkv_seq *q, int status, const char *type, const char *code, const char *param,
                       const char *fmt, ...) VKV_PRINTF(6, 7);
static void push_error(vkv_seq *q, int status, const char *type, const char *code, const char *param,
                       const char *fmt, ...)
{
    vkv_seq_event ev;
    va_list ap;
    va_start(ap, fmt);
    error_event(q, &ev, status, type, code, param, fmt, ap);
    va_end(ap);
    push_event(q, &ev);
}

/* A waiting request's refusal, kept in q->refusal until it is off the
 * waiting list (so the queue has its place back when the reader sees it). */
static void refuse(vkv_seq *q, int status, const char *type, const char *code, const char *param,
                   const char *fmt, ...) VKV_PRINTF(6, 7);
static void refuse(vkv_seq *q, int status, const char *type, const char *code, const char *param,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_event(q, &q->refusal, status, type, code, param, fmt, ap);
    va_end(ap);
}

/* ---- submission ---- */

/* q lets its group's request go (the last member frees it). */
static void seq_release_request(vkv_seq *q)
{
    if (!q->req) return;
    q->req = NULL;
    if (!--q->g->holding) vkv_gen_request_free(&q->g->request);
}

/* A group of n sequences for req (taken: freed here on failure); NULL when out of host memory. */
static seq_group *group_new(vkv_engine *e, vkv_gen_request *req, uint32_t n)
{
    seq_group *g = calloc(1, sizeof *g);
    if (g && !(g->member = calloc(n, sizeof *g->member))) {
        free(g);
        g = NULL;
    }
    for (uint32_t i = 0; g && i < n; i++) {
        vkv_seq *q = calloc(1, sizeof *q);
        if (!q) {
            for (uint32_t k = 0; k < i; k++) free(g->member[k]);
            free(g->member);
            free(g);
            g = NULL;
            break;
        }
        atomic_init(&q->cancelled, false);
        q->e = e;
        q->g = g;
        q->choice = i;
        q->req = &g->request;
        g->member[i] = q;
    }
    if (!g) {
        vkv_gen_request_free(req);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    atomic_init(&g->refs, n);
    g->request = *req;
    g->n = g->holding = n;
    return g;
}

static vkv_status request_prompt(vkv_seq *q);

void vkv_engine_submit(vkv_engine *e, vkv_gen_request *req, vkv_seq **out) { vkv_engine_submit_n(e, req, 1, out); }

void vkv_engine_submit_n(vkv_engine *e, vkv_gen_request *req, uint32_t n, vkv_seq **out)
{
    if (!n) n = 1;
    seq_group *g = group_new(e, req, n);
    for (uint32_t i = 0; i < n; i++) out[i] = g ? g->member[i] : NULL; /* NULL: no sequence to say it on */
    if (!g) return;
    vkv_seq *q = g->member[0];
    /* The chat template and the tokenizer run here, on the caller's thread
     * (both read only what loading made): a long prompt does not hold up
     * the scheduler's steps. A failure is said when the request is prepared.
     * The followers take the leader's tokens. */
    if ((q->prompt_st = request_prompt(q))) {
        snprintf(q->prompt_err, sizeof q->prompt_err, "%s", vkv_last_error());
        vkv_clear_error();
    }
    for (uint32_t i = 1; i < n && !q->prompt_st; i++) {
        vkv_seq *f = g->member[i];
        f->pr = q->pr;
        if (!(f->pr.ids = malloc((q->pr.n ? q->pr.n : 1) * sizeof *f->pr.ids))) {
            q->prompt_st = VKV_ERR_OOM;
            snprintf(q->prompt_err, sizeof q->prompt_err, "out of host memory");
            f->pr = (vkv_prompt){0};
            break;
        }
        memcpy(f->pr.ids, q->pr.ids, q->pr.n * sizeof *f->pr.ids);
    }
    pthread_mutex_lock(&e->mu);
    const double t = now_s();
    for (uint32_t i = 0; i < n; i++) {
        g->member[i]->id = ++e->next_id;
        g->member[i]->t_submit = t;
    }
    const bool stopping = e->stopping;
    const bool full = e->n_waiting + e->n_active + n > e->p.max_seqs + e->p.queue;
    if (!stopping && !full) {
        if (e->wait_tail) e->wait_tail->next = q;
        else e->wait_head = q;
        e->wait_tail = q;
        e->n_waiting += n;
        pthread_cond_broadcast(&e->cv);
    } else e->outcomes[stopping ? OUT_UNAVAILABLE : OUT_QUEUE_FULL]++;
    pthread_mutex_unlock(&e->mu);
    if (!stopping && !full) return;
    for (uint32_t i = 0; i < n; i++) {
        vkv_seq *m = out[i];
        if (stopping) push_error(m, 503, "server_error", NULL, NULL, "the server is shutting down");
        else
            push_error(m, 429, "rate_limit_error", "queue_full", NULL,
                       "the server is busy: %u sequences run and %u wait; try again later", e->p.max_seqs,
                       e->p.queue);
        seq_release_request(m);
        vkv_prompt_free(&m->pr);
        engine_release(m);
    }
}

/* ---- a sequence's preparation (scheduler thread) ---- */

/* The request's compression over the server's defaults: the compression
 * and the cache type its context uses. 400's message and param on error. */
static bool request_compression(vkv_seq *q, char *msg, size_t size, const char **param)
{
    const vkv_engine *e = q->e;
    const vkv_press_request *r = &q->req->press, *d = &e->p.defaults;
#define PICK(field, flag) (r->flag ? r->field : d->field)
    const char *press = PICK(press, has_press);
    const char *kv_type = PICK(kv_type, has_kv_type);
    vkv_compression *c = &q->c;
    *c = (vkv_compression){.compression_ratio = PICK(compression, has_compression), .vector = PICK(vector, has_vector),
                           .p_a = PICK(pa, has_pa), .pool = VKV_POOL_DEFAULT, .map = VKV_MAP_HEAD,
                           .plain_prompt = q->req->kind != VKV_GEN_CHAT,
                           .compress_every = PICK(compress_every, has_compress_every),
                           .max_kv_tokens = PICK(max_kv_tokens, has_max_kv_tokens),
                           .decoding = VKV_DECODING_BUDGET};
#undef PICK
    if (c->p_a < 0) c->p_a = -1;
    if (press[0] && strcmp(press, "none") && !(c->press = vkv_press_find(press))) {
        snprintf(msg, size, "%s", vkv_last_error());
        *param = "press";
        return false;
    }
    /* query_aware: the request's as given; the server's default true forces it, false leaves the scorer's own */
    c->query_aware = vkv_press_query_aware(c->press, r->has_query_aware ? (r->query_aware ? VKV_QUERY_AWARE : VKV_QUERY_AGNOSTIC)
                                                     : d->query_aware ? VKV_QUERY_AWARE : VKV_QUERY_DEFAULT, false);
    int t = kv_type[0] ? vkv_dtype_from_name(kv_type) : (int)VKV_F16;
    if (t < 0 || !vkv_kv_type_ok((vkv_dtype)t)) {
        snprintf(msg, size, "kv_type '%s' is not a KV cache type (f16, f32, q8_0, q4_0)", kv_type);
        *param = "kv_type";
        return false;
    }
    q->kv_type = (vkv_dtype)t;
    const char *why = vkv_compression_check(e->s, c, msg, size);
    if (why) {
        if (why != msg) snprintf(msg, size, "%s", why);
        *param = "vkvector";
        return false;
    }
    return true;
}

/* The request's prompt as tokens (vkv_engine_submit's, on the caller's thread). */
static vkv_status request_prompt(vkv_seq *q)
{
    vkv_engine *e = q->e;
    const vkv_gen_request *r = q->req;
    switch (r->kind) {
    case VKV_GEN_CHAT: {
        vkv_chat_msg *msgs = calloc(r->n_messages ? r->n_messages : 1, sizeof *msgs);
        if (!msgs) return vkv_error(VKV_ERR_OOM, "out of host memory");
        for (size_t i = 0; i < r->n_messages; i++) msgs[i] = (vkv_chat_msg){r->messages[i].role, r->messages[i].content};
        vkv_status st = vkv_session_tokenize_chat(e->s, e->chat, msgs, r->n_messages, &q->pr);
        free(msgs);
        return st;
    }
    case VKV_GEN_TEXT: {
        const char *t = r->prompt ? r->prompt : "";
        return vkv_session_tokenize(e->s, t, strlen(t), strlen(t), false, VKV_SPLIT_APART, &q->pr);
    }
    case VKV_GEN_IDS:
        if (!(q->pr.ids = malloc((r->n_prompt_ids ? r->n_prompt_ids : 1) * sizeof *q->pr.ids)))
            return vkv_error(VKV_ERR_OOM, "out of host memory");
        memcpy(q->pr.ids, r->prompt_ids, r->n_prompt_ids * sizeof *q->pr.ids);
        q->pr.n = q->pr.n_context = r->n_prompt_ids;
        for (size_t i = 0; i < q->pr.n; i++)
            if (q->pr.ids[i] < 0 || (uint32_t)q->pr.ids[i] >= e->s->model->hp.n_vocab)
                return vkv_error(VKV_ERR_ARG, "token id %d is outside the vocabulary (0..%u)", q->pr.ids[i],
                                 e->s->model->hp.n_vocab - 1);
        return VKV_OK;
    }
    return vkv_error(VKV_ERR_ARG, "unknown request kind");
}

/* The context a sequence gets, sized to its need as `vkvector run` sizes
 * one: the prompt and the tokens to generate (all the server's context
 * when max_tokens is 0), at least the prompt and what compression needs
 * past its compressed part; a budgeted cache's slots per head as
 * vkv_compression_kv_slots gives them. */
static bool plain_prefill(const vkv_seq *q);
static void fork_follower(vkv_seq *f, const vkv_seq *leader, bool compressed);

/* When q is a leader: each of its followers still waiting for its prefill
 * forks from `leader` (NULL: prefills alone). */
static void fork_waiting(const vkv_seq *q, const vkv_seq *leader, bool compressed)
{
    for (uint32_t i = 1; !q->choice && i < q->g->n; i++)
        if (q->g->member[i] && q->g->member[i]->state == SEQ_FORK) fork_follower(q->g->member[i], leader, compressed);
}

/* Pages of every layer that n slots take. */
static uint64_t page_count(const vkv_engine *e, uint32_t n)
{
    const uint32_t page = 1u << vkv_kv_pages_shift(e->pages);
    return (uint64_t)e->s->model->hp.n_layer * ((n + page - 1) / page);
}

static vkv_status plan_context(vkv_seq *q)
{
    vkv_engine *e = q->e;
    const vkv_compression *c = &q->c;
    const size_t n = q->pr.n;
    const bool press = c->press && (c->compression_ratio > 0 || !c->compress_every);
    const size_t first = vkv_prompt_compressed_part(&q->pr, press && c->query_aware);
    uint32_t room = 0;
    vkv_status st = vkv_session_press_room(e->s, c, (uint32_t)first, &room);
    if (st) return st;
    uint64_t want = q->req->no_generation ? n : q->req->max_tokens ? n + q->req->max_tokens : e->p.n_ctx;
    if (want > e->p.n_ctx) want = e->p.n_ctx;
    if (want < n + room) want = n + room;
    q->cp = (vkv_ctx_params){.n_ctx = (uint32_t)want, .n_batch = e->p.prefill_chunk, .k_type = q->kv_type,
                             .v_type = q->kv_type, .compress = c->press != NULL};
    q->cp.n_kv_slots = vkv_compression_kv_slots(c, vkv_prompt_compressed_part(&q->pr, c->query_aware), room);
    q->peak = vkv_ctx_plan_memory(&e->s->model->hp, &q->cp).kv_bytes;
    q->paged = e->pages && plain_prefill(q) && q->kv_type == vkv_kv_pages_k_type(e->pages) &&
               q->kv_type == vkv_kv_pages_v_type(e->pages);
    if (q->paged) { /* every page of its context, each layer */
        q->cp.pages = e->pages;
        q->cp.n_kv_slots = 0;
        q->peak = page_count(e, q->cp.n_ctx) * vkv_kv_pages_page_bytes(e->pages);
    }
    return VKV_OK;
}

/* What admitting q's group counts in the pool: each member's whole peak
 * (a follower's count drops to its own pages when it forks, fork_follower). */
static uint64_t group_peak(const vkv_seq *q) { return q->peak * q->g->n; }

/* Tokenizes a waiting request and predicts its peak; false (its 400 sent)
 * when it can never run. */
static bool prepare(vkv_seq *q)
{
    vkv_engine *e = q->e;
    char msg[400] = "";
    const char *param = NULL;
    vkv_status st;
    if (!request_compression(q, msg, sizeof msg, &param)) {
        refuse(q, 400, "invalid_request_error", NULL, param, "%s", msg);
        return false;
    }
    if ((st = q->prompt_st)) {
        refuse(q, st == VKV_ERR_OOM ? 500 : 400, st == VKV_ERR_OOM ? "server_error" : "invalid_request_error",
                   NULL, q->req->kind == VKV_GEN_CHAT ? "messages" : "prompt", "%s", q->prompt_err);
        return false;
    }
    if (!q->pr.n) {
        refuse(q, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty");
        return false;
    }
    if (vkv_sampler_validate_vocab(&q->req->sampling, (int32_t)e->s->model->hp.n_vocab)) {
        refuse(q, 400, "invalid_request_error", NULL, "logit_bias", "%s", vkv_last_error());
        vkv_clear_error();
        return false;
    }
    if (q->pr.n > e->p.n_ctx) {
        refuse(q, 400, "invalid_request_error", "context_length_exceeded",
                   q->req->kind == VKV_GEN_CHAT ? "messages" : "prompt",
                   "this model's maximum context length is %u tokens; the prompt has %zu", e->p.n_ctx, q->pr.n);
        return false;
    }
    const bool press = q->c.press && (q->c.compression_ratio > 0 || !q->c.compress_every);
    if (vkv_compression_check_first(e->s, &q->c, vkv_prompt_compressed_part(&q->pr, press && q->c.query_aware),
                                    "vkvector.max_kv_tokens", "vkvector.compression", msg, sizeof msg)) {
        refuse(q, 400, "invalid_request_error", NULL, "vkvector.max_kv_tokens", "%s", msg);
        return false;
    }
    if ((st = plan_context(q))) {
        refuse(q, 400, "invalid_request_error", NULL, "vkvector", "%s", vkv_last_error());
        return false;
    }
    if (q->peak > e->budget) {
        refuse(q, 400, "invalid_request_error", NULL, NULL,
                   "the request's KV cache needs %.2f MiB at its peak (a %u-token context, %u slots a head); the "
                   "server's KV pool holds %.2f MiB: shorten the prompt or max_tokens, or compress during generation",
                   mib(q->peak), q->cp.n_ctx, q->cp.n_kv_slots ? q->cp.n_kv_slots : q->cp.n_ctx, mib(e->budget));
        return false;
    }
    seq_group *g = q->g;
    if (g->n > e->p.max_seqs) {
        refuse(q, 400, "invalid_request_error", NULL, "n",
               "'n': %u choices run as %u sequences at once; the server runs at most %u (--max-seqs)", g->n, g->n,
               e->p.max_seqs);
        return false;
    }
    if (group_peak(q) > e->budget) {
        refuse(q, 400, "invalid_request_error", NULL, "n",
               "'n': %u choices are admitted at %.2f MiB of KV cache each (%.2f MiB); the server's KV pool holds "
               "%.2f MiB: ask for fewer choices, or shorten the prompt or max_tokens", g->n, mib(q->peak),
               mib(group_peak(q)), mib(e->budget));
        return false;
    }
    for (uint32_t i = 1; i < g->n; i++) { /* the followers run as the leader does */
        vkv_seq *f = g->member[i];
        f->c = q->c;
        f->kv_type = q->kv_type;
        f->cp = q->cp;
        f->peak = q->peak;
        f->paged = q->paged;
        f->state = SEQ_READY;
    }
    q->state = SEQ_READY;
    return true;
}

/* ---- the prefix cache (docs/SERVE.md, "The prefix cache") ---- */

/* Whether q's prefill compresses nothing (no press, nothing during
 * generation): its peak is its cache, its chunks can share a forward with
 * other such prompts' (vkv_session_seqs_prefill_next), and its prompt's rows
 * can be reused and kept. */
static bool plain_prefill(const vkv_seq *q) { return !q->c.press && !q->c.compress_every; }

static uint32_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return (uint32_t)i;
}

/* How many of ids[0, n) entry p holds the plain rows of (0 for another
 * cache type or a compressed context). */
static uint32_t prefix_shared(const prefix_entry *p, const vkv_seq *q, size_t n)
{
    return p->kv_type == q->kv_type && !p->compressed ? common_prefix(p->ids, p->n_ids, q->pr.ids, n) : 0;
}

/* Frees entry i (the last entry takes its place). */
static void prefix_drop(vkv_engine *e, uint32_t i, bool evicted)
{
    prefix_entry *p = &e->prefix[i];
    vkv_session_seq_free(p->ss);
    free(p->ids);
    free(p->logits);
    pthread_mutex_lock(&e->mu);
    e->prefix_bytes -= p->bytes;
    e->prefix_evictions += evicted;
    *p = e->prefix[--e->n_prefix];
    pthread_mutex_unlock(&e->mu);
}

/* Whether a running sequence maps entry p's pages (they stay while it runs). */
static bool prefix_pinned(const vkv_engine *e, const prefix_entry *p)
{
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++)
        if (e->active[i]->mapped_from == p->ss) return true;
    return false;
}

/* The least recently used entry other than `keep` and those running
 * sequences map (-1: none). */
static int prefix_lru(const vkv_engine *e, int keep)
{
    int best = -1;
    for (uint32_t i = 0; i < e->n_prefix; i++)
        if ((int)i != keep && !prefix_pinned(e, &e->prefix[i]) &&
            (best < 0 || e->prefix[i].last_used < e->prefix[best].last_used))
            best = (int)i;
    return best;
}

/* The entry sharing the longest start with q's prompt, at least a page (-1: none). */
static int prefix_match(const vkv_engine *e, const vkv_seq *q)
{
    int best = -1;
    uint32_t most = e->p.prefix_page - 1;
    if (e->p.no_prefix_cache || !plain_prefill(q)) return -1;
    for (uint32_t i = 0; i < e->n_prefix; i++) {
        const uint32_t m = prefix_shared(&e->prefix[i], q, q->pr.n);
        if (m > most) {
            most = m;
            best = (int)i;
        }
    }
    return best;
}

/* Whether q wants its prompt's logprobs: every prompt row is evaluated,
 * none taken from a cache. */
static bool prompt_logprobs(const vkv_seq *q) { return q->req->echo && q->req->logprobs; }

/* The entry q reuses most rows of (-1: none), and their count: the same
 * before q starts (its admission) as after. */
static int prefix_find(vkv_engine *e, const vkv_seq *q, uint32_t *n_reuse)
{
    int best = -1;
    *n_reuse = 0;
    if (e->p.no_prefix_cache || !plain_prefill(q) || prompt_logprobs(q)) return -1;
    for (uint32_t i = 0; i < e->n_prefix; i++) {
        const prefix_entry *p = &e->prefix[i];
        const uint32_t m = prefix_shared(p, q, q->pr.n);
        /* the context q's sequence gets (or got): its n_batch is the chunk, at most its context */
        const uint32_t n_batch = e->p.prefill_chunk < q->cp.n_ctx ? e->p.prefill_chunk : q->cp.n_ctx;
        uint32_t r = m >= e->p.prefix_page
                         ? vkv_session_reusable(n_batch, q->cp.n_ctx, p->ss, &q->pr, m, e->p.prefix_page) : 0;
        if (r > *n_reuse) {
            *n_reuse = r;
            best = (int)i;
        }
    }
    return best;
}

static uint64_t paged_held(const vkv_seq *q, uint32_t n_mapped);

/* What admitting q's group adds to the pool's count: group_peak, less the
 * cached prefix pages a paged request will map (counted in their entry,
 * which its run pins), as start then counts it. */
static uint64_t admit_peak(vkv_engine *e, const vkv_seq *q)
{
    uint32_t n_reuse = 0;
    const uint64_t first = q->paged && prefix_find(e, q, &n_reuse) >= 0 ? paged_held(q, n_reuse) : q->peak;
    return first + (uint64_t)(q->g->n - 1) * q->peak;
}

/* Why q's compressed context may not come from the cache or go into it
 * (NULL: it may): the response's context_cache.reason. */
static const char *context_not_cached(const vkv_seq *q)
{
    if (!q->c.press) return "no press";
    if (q->c.compress_every) return "compression during generation changes the cache as the answer grows";
    if (q->c.query_aware) return "a query-aware press scores the context with the question";
    if (q->e->p.no_prefix_cache) return "the server runs with --no-prefix-cache";
    if (prompt_logprobs(q)) return "echo with logprobs evaluates every prompt token";
    return NULL;
}

/* Whether two compressions of one context leave the same cache: press, p_c,
 * VECTOR and its settings, the attention path and the prompt KVzip
 * reconstructs (the calibration and the cache types are the server's and
 * the entry's). */
static bool same_compression(const vkv_compression *a, const vkv_compression *b)
{
    return a->press == b->press && a->compression_ratio == b->compression_ratio && a->vector == b->vector &&
           a->p_a == b->p_a && a->pool == b->pool && a->map == b->map && a->materialized == b->materialized &&
           a->plain_prompt == b->plain_prompt && a->press_seed_set == b->press_seed_set &&
           a->press_seed == b->press_seed && a->sample == b->sample;
}

/* The cached compressed context q may take whole (-1: none): its context's
 * ids, compressed as q asks, into q's cache type, with the last token's
 * logits when the context is q's whole prompt. */
static int context_find(const vkv_engine *e, const vkv_seq *q)
{
    if (context_not_cached(q)) return -1;
    const size_t n = vkv_prompt_compressed_part(&q->pr, false);
    for (uint32_t i = 0; i < e->n_prefix; i++) {
        const prefix_entry *p = &e->prefix[i];
        if (p->compressed && p->kv_type == q->kv_type && p->n_ids == n && same_compression(&p->c, &q->c) &&
            (n < q->pr.n || p->logits) && !memcmp(p->ids, q->pr.ids, n * sizeof *p->ids))
            return (int)i;
    }
    return -1;
}

/* Drops entries, the least recently used first, until q's peak fits the
 * pool beside them, when dropping them all would make it fit; the entry q
 * would reuse goes last. */
static void prefix_make_room(vkv_engine *e, const vkv_seq *q)
{
    pthread_mutex_lock(&e->mu);
    const uint64_t used = e->pool_used;
    pthread_mutex_unlock(&e->mu);
    if (used + group_peak(q) > e->budget) return;
    int keep = plain_prefill(q) ? prefix_match(e, q) : context_find(e, q);
    while (e->n_prefix && used + e->prefix_bytes + admit_peak(e, q) > e->budget) {
        int i = prefix_lru(e, keep);
        if (i < 0 && (keep < 0 || prefix_pinned(e, &e->prefix[keep]))) break; /* what is left is in use */
        if (i < 0) i = keep;
        logf_(e, "request %llu: the prefix cache drops a %u-token %s (%.2f MiB) to make room", q->id,
              e->prefix[i].n_ids, e->prefix[i].compressed ? "compressed context" : "prompt's cache",
              mib(e->prefix[i].bytes));
        prefix_drop(e, (uint32_t)i, true);
        if (i == keep) break;
        if (keep == (int)e->n_prefix) keep = i; /* the last entry took the dropped one's place */
    }
}

/* q's bytes leave the pool's count, once its cache is gone or kept: a
 * leader's stay counted (g->leader_held) while followers map its pages, and
 * leave with the last of them. */
static void pool_release(vkv_seq *q)
{
    vkv_engine *e = q->e;
    seq_group *g = q->g;
    uint64_t release = q->held;
    if (!q->choice && g->mapping) {
        g->leader_held += q->held;
        release = 0;
    }
    if (q->maps_leader) {
        q->maps_leader = false;
        if (!--g->mapping) {
            release += g->leader_held;
            g->leader_held = 0;
        }
    }
    pthread_mutex_lock(&e->mu);
    e->pool_used -= release;
    pthread_mutex_unlock(&e->mu);
    q->held = 0;
}

/* Keeps a finished q's cache for the prompts that start with its prompt:
 * the rows its prefill evaluated (an entry already holding them is used
 * instead; entries holding a part of them go). Its bytes move from the
 * sequence's count to the cache's. */
static void prefix_keep(vkv_seq *q)
{
    vkv_engine *e = q->e;
    if (e->p.no_prefix_cache || !plain_prefill(q) || !q->ss || !q->ss->row_chunk) return;
    uint32_t n = 0;
    while (n < q->pr.n && n < vkv_ctx_n_past(q->ss->ctx) && q->ss->row_chunk[n]) n++;
    if (n < e->p.prefix_page) return;
    for (uint32_t i = 0; i < e->n_prefix;) {
        prefix_entry *p = &e->prefix[i];
        const uint32_t m = prefix_shared(p, q, n);
        if (m == n) {
            p->last_used = ++e->prefix_clock; /* it holds them all already */
            return;
        }
        if (m && m == p->n_ids) prefix_drop(e, i, false); /* a part of them */
        else i++;
    }
    if (e->n_prefix == MAX_PREFIX_ENTRIES) {
        const int lru = prefix_lru(e, -1);
        prefix_drop(e, lru >= 0 ? (uint32_t)lru : 0, true);
    }
    int32_t *ids = malloc(sizeof *ids * n);
    if (!ids) return;
    memcpy(ids, q->pr.ids, sizeof *ids * n);
    /* a paged cache keeps its prompt's whole pages only (reuse comes in whole pages) */
    const uint32_t page = q->paged ? 1u << vkv_kv_pages_shift(e->pages) : 1;
    if (q->paged && vkv_kv_trim_pages(vkv_ctx_kv(q->ss->ctx), n / page * page)) {
        free(ids);
        return;
    }
    const uint64_t bytes = vkv_ctx_kv_bytes(q->ss->ctx);
    e->prefix[e->n_prefix] = (prefix_entry){.ss = q->ss, .ids = ids, .n_ids = n, .kv_type = q->kv_type,
                                            .bytes = bytes, .last_used = ++e->prefix_clock};
    q->ss = NULL;
    pthread_mutex_lock(&e->mu);
    e->n_prefix++;
    e->prefix_bytes += bytes;
    pthread_mutex_unlock(&e->mu);
    pool_release(q);
    logf_(e, "request %llu: its %u prompt tokens' cache is kept for reuse (%.2f MiB; %u kept, %.2f MiB)", q->id, n,
          mib(bytes), e->n_prefix, mib(e->prefix_bytes));
}

/* Keeps a finished q's compressed context for the requests with the same
 * context and compression: copied into a sequence of its own, as long as
 * the context (its room for appended tokens and q's tokens after the
 * context are not kept). An entry already holding it is used instead. */
static void context_keep(vkv_seq *q)
{
    vkv_engine *e = q->e;
    if (context_not_cached(q) || !q->ss || !q->ss->ctx) return;
    const size_t n = vkv_prompt_compressed_part(&q->pr, false);
    if (vkv_ctx_n_compressed(q->ss->ctx) != n) return;
    const int have = context_find(e, q);
    if (have >= 0) {
        e->prefix[have].last_used = ++e->prefix_clock;
        return;
    }
    if (n == q->pr.n && !q->context_logits) return; /* a whole prompt's context needs its logits */
    if (e->n_prefix == MAX_PREFIX_ENTRIES) {
        const int lru = prefix_lru(e, -1);
        prefix_drop(e, lru >= 0 ? (uint32_t)lru : 0, true);
    }
    vkv_ctx_params cp = {.n_ctx = (uint32_t)n, .n_batch = q->cp.n_batch, .k_type = q->kv_type, .v_type = q->kv_type,
                         .compress = true, .scratch_from = e->scratch_owner};
    vkv_session_seq *ss = NULL;
    int32_t *ids = malloc(sizeof *ids * n);
    vkv_status st = ids ? vkv_session_seq_create(e->s, &cp, &ss) : vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!st) st = vkv_ctx_copy_compressed(ss->ctx, q->ss->ctx);
    if (st) {
        logf_(e, "request %llu: its compressed context is not kept: %s", q->id, vkv_last_error());
        vkv_session_seq_free(ss);
        free(ids);
        return;
    }
    memcpy(ids, q->pr.ids, sizeof *ids * n);
    const uint64_t bytes = vkv_ctx_kv_bytes(ss->ctx);
    e->prefix[e->n_prefix] = (prefix_entry){.ss = ss, .ids = ids, .n_ids = (uint32_t)n, .kv_type = q->kv_type,
                                            .bytes = bytes, .last_used = ++e->prefix_clock, .compressed = true,
                                            .c = q->c, .comp = q->comp, .logits = q->context_logits};
    q->context_logits = NULL;
    pthread_mutex_lock(&e->mu);
    e->n_prefix++;
    e->prefix_bytes += bytes;
    pthread_mutex_unlock(&e->mu);
    logf_(e, "request %llu: its %zu-token compressed context is kept for reuse (%.2f MiB; %u kept, %.2f MiB)", q->id,
          n, mib(bytes), e->n_prefix, mib(e->prefix_bytes));
}

/* ---- a sequence's end ---- */

/* Frees what the sequence holds on the scheduler's side and returns its
 * bytes to the pool. */
static void seq_drop_resources(vkv_seq *q)
{
    if (q->ss) {
        vkv_session_seq_free(q->ss);
        q->ss = NULL;
    }
    pool_release(q);
    q->mapped_from = NULL;
    vkv_sampler_free(q->smp);
    q->smp = NULL;
    if (q->detok_on) vkv_detok_free(&q->detok);
    q->detok_on = false;
    free(q->logits);
    q->logits = NULL;
    free(q->context_logits);
    q->context_logits = NULL;
    free(q->prompt_tokens);
    q->prompt_tokens = NULL;
    free(q->pending);
    q->pending = NULL;
    q->n_pending = q->cap_pending = 0;
    vkv_json_matcher_free(q->matcher);
    q->matcher = NULL;
    free(q->text.p);
    memset(&q->text, 0, sizeof q->text);
    vkv_prompt_free(&q->pr);
    seq_release_request(q);
}

/* Removes q from the active list (if there), before its last event is
 * queued: a client that sends its next request on reading it finds the place
 * free, not a full server. */
static void seq_leave_active(vkv_seq *q)
{
    vkv_engine *e = q->e;
    uint32_t k = 0;
    bool was_active = false;
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++) {
        if (e->active[i] == q) was_active = true;
        else e->active[k++] = e->active[i];
    }
    for (uint32_t i = k; i < e->p.max_seqs; i++) e->active[i] = NULL;
    if (was_active) {
        pthread_mutex_lock(&e->mu);
        e->n_active--;
        pthread_mutex_unlock(&e->mu);
    }
}

/* After q's last event: the scheduler lets it go. */
static void seq_retire(vkv_seq *q)
{
    q->state = SEQ_FINISHED;
    engine_release(q);
}

/* A started q ended (ran: with DONE): once its group's last member ends,
 * the request's end-to-end latency, when its first choice ran to its end
 * (vkvector:e2e_request_latency_seconds counts requests, as
 * vkvector:request_success_total does). */
static void group_ended(vkv_seq *q, bool ran)
{
    seq_group *g = q->g;
    if (!q->choice) g->leader_ran = ran;
    if (++g->ended < g->n || !g->leader_ran) return;
    pthread_mutex_lock(&q->e->mu);
    hist_add(&q->e->e2e, now_s() - q->t_submit);
    pthread_mutex_unlock(&q->e->mu);
}

/* Ends q with an error event (its resources freed first). */
static void seq_fail(vkv_seq *q, outcome o, int status, const char *type, const char *code, const char *msg)
{
    group_ended(q, false); /* only admitted sequences fail here (a waiting group ends in group_end) */
    seq_drop_resources(q);
    count_outcome(q, o);
    seq_leave_active(q);
    push_error(q, status, type, code, NULL, "%s", msg);
    fork_waiting(q, NULL, false); /* a leader that fails before its prefill ends: its followers prefill alone */
    seq_retire(q);
}

static void seq_fail_status(vkv_seq *q, vkv_status st)
{
    const bool client = st == VKV_ERR_ARG || st == VKV_ERR_UNSUPPORTED;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", vkv_last_error());
    seq_fail(q, client ? OUT_INVALID : OUT_FAILED, client ? 400 : 500,
             client ? "invalid_request_error" : "server_error", NULL, msg);
}

/* Sends text[emitted, upto) with the pending tokens whose text ends there;
 * at the end (`last`), those whose text starts before upto too (a stop
 * sequence cut inside them, or their bytes were never a whole character). */
static void emit_text(vkv_seq *q, size_t upto, bool last)
{
    size_t n_tok = 0;
    while (n_tok < q->n_pending && (last ? q->pending[n_tok].start < upto || q->pending[n_tok].end <= upto
                                         : q->pending[n_tok].end <= upto))
        n_tok++;
    if (upto <= q->emitted && !n_tok) return;
    size_t n = upto > q->emitted ? upto - q->emitted : 0;
    vkv_seq_event ev = {.kind = VKV_SEQ_TEXT, .text = malloc(n + 1), .len = n};
    if (n_tok) ev.tokens = malloc(sizeof *ev.tokens * n_tok);
    if (!ev.text || (n_tok && !ev.tokens)) {
        vkv_seq_event_clear(&ev);
        return;
    }
    if (n) memcpy(ev.text, q->text.p + q->emitted, n);
    ev.text[n] = 0;
    for (size_t i = 0; i < n_tok; i++) ev.tokens[i] = q->pending[i].lp;
    ev.n_tokens = n_tok;
    if (n_tok) memmove(q->pending, q->pending + n_tok, sizeof *q->pending * (q->n_pending - n_tok));
    q->n_pending -= n_tok;
    if (upto > q->emitted) q->emitted = upto;
    push_event(q, &ev);
}

/* The logprobs of `id` under logits [n_vocab] (the model's distribution). */
static void token_logprob(const vkv_seq *q, const float *logits, int32_t id, vkv_token_logprob *out)
{
    const int32_t nv = (int32_t)q->e->s->model->hp.n_vocab;
    out->id = id;
    out->n_top = q->req->top_logprobs < (uint32_t)nv ? q->req->top_logprobs : (uint32_t)nv;
    out->logprob = (float)vkv_log_softmax_top(logits, nv, id, out->n_top, out->top_id, out->top_logprob);
}

/* Ends a sequence that ran: the rest of its text (unless a stop sequence
 * cut it at `cut`), then DONE. */
static void seq_finish(vkv_seq *q, const char *reason, bool stopped_at_match)
{
    vkv_engine *e = q->e;
    if (!stopped_at_match) {
        if (q->detok_on) {
            const char *rest;
            size_t len;
            vkv_detok_flush(&q->detok, &rest, &len);
            vkv_strbuf_put(&q->text, rest, len);
        }
        emit_text(q, q->text.n, true);
    }
    if (q->ss && q->ss->decode) q->comp.decode_compressions = vkv_decode_press_stats(q->ss->decode).compressions;
    vkv_seq_event ev = {.kind = VKV_SEQ_DONE, .finish_reason = reason, .prompt_tokens = (uint32_t)q->pr.n,
                        .completion_tokens = q->n_gen, .cached_tokens = q->cached_tokens, .compression = q->comp};
    logf_(e, "request %llu done (%s): %u prompt + %u generated tokens, %u compressions during generation", q->id,
          reason, ev.prompt_tokens, q->n_gen, q->comp.decode_compressions);
    pthread_mutex_lock(&e->mu);
    e->decode_compressions += q->comp.decode_compressions;
    pthread_mutex_unlock(&e->mu);
    group_ended(q, true);
    prefix_keep(q);
    context_keep(q);
    seq_drop_resources(q);
    count_outcome(q, !strcmp(reason, "length") ? OUT_LENGTH : OUT_STOP);
    seq_leave_active(q);
    if (e->pages) { /* /metrics shows the pages as this end left them to a reader of its last event */
        pthread_mutex_lock(&e->mu);
        e->page_stats = vkv_kv_pages_stats_of(e->pages);
        pthread_mutex_unlock(&e->mu);
    }
    push_event(q, &ev);
    seq_retire(q);
}

/* ---- stop sequences ---- */

/* Where the first stop sequence found in text[from, n) starts (n: none). */
static size_t stop_match(const vkv_gen_request *r, const char *t, size_t n, size_t from)
{
    size_t best = n;
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t len = strlen(r->stop[i]);
        if (!len) continue;
        size_t start = from >= len - 1 ? from - (len - 1) : 0;
        const char *hit = start < n ? memmem(t + start, n - start, r->stop[i], len) : NULL;
        if (hit && (size_t)(hit - t) < best) best = (size_t)(hit - t);
    }
    return best;
}

/* Bytes at the end of text[0, n) that could still become a stop sequence. */
static size_t stop_hold(const vkv_gen_request *r, const char *t, size_t n)
{
    size_t hold = 0;
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t len = strlen(r->stop[i]);
        for (size_t k = len ? len - 1 : 0; k > hold; k--)
            if (k <= n && !memcmp(t + n - k, r->stop[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* The tokens a constrained sequence may take next into e->allowed: those
 * that continue a valid document, and the end of generation once it is
 * whole. false (a 500 sent) when none may, which the constraint rules out. */
static bool constrain(vkv_seq *q)
{
    vkv_engine *e = q->e;
    const size_t nv = e->s->model->hp.n_vocab;
    if (!vkv_json_matcher_allowed(q->matcher, e->json_vocab, e->allowed)) {
        seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory constraining the output");
        return false;
    }
    if (vkv_json_matcher_complete(q->matcher))
        for (size_t i = 0; i < e->n_eog; i++) e->allowed[e->eog_ids[i]] = true;
    for (size_t i = 0; i < nv; i++)
        if (e->allowed[i]) return true;
    seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "response_format: no token of the vocabulary continues the output");
    return false;
}

/* Samples the next token from logits and acts on it: the end of the
 * sequence, or its text and the token the next step appends. */
static void take_token(vkv_seq *q, const float *logits)
{
    vkv_engine *e = q->e;
    const vkv_tokenizer *tok = e->s->tok;
    if (q->matcher && !constrain(q)) return;
    int32_t id = vkv_sampler_sample_masked(q->smp, logits, q->matcher ? e->allowed : NULL);
    vkv_sampler_accept_generated(q->smp, id);
    q->n_gen++;
    const double t = now_s();
    pthread_mutex_lock(&e->mu);
    e->gen_tokens++;
    /* the request's first token is its time to first token; a later choice's first is a gap after it */
    const bool first = q->n_gen == 1 && !q->g->t_first_token;
    if (first) q->g->t_first_token = t;
    hist_add(first ? &e->ttft : &e->itl,
             t - (first ? q->t_submit : q->n_gen == 1 ? q->g->t_first_token : q->t_last_token));
    pthread_mutex_unlock(&e->mu);
    q->t_last_token = t;
    if (tok && vkv_tokenizer_is_eog(tok, id)) {
        seq_finish(q, "stop", false);
        return;
    }
    if (q->matcher) {
        size_t n;
        const char *bytes = vkv_token_to_piece(tok, id, false, &n);
        if (!vkv_json_matcher_advance(q->matcher, bytes, n)) { /* the mask allowed it: out of memory */
            seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory constraining the output");
            return;
        }
    }
    if (q->req->logprobs && q->n_pending == q->cap_pending) {
        size_t cap = q->cap_pending ? 2 * q->cap_pending : 8;
        pending_token *grown = realloc(q->pending, sizeof *grown * cap);
        if (!grown) {
            seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory");
            return;
        }
        q->pending = grown;
        q->cap_pending = cap;
    }
    pending_token *pt = q->req->logprobs ? &q->pending[q->n_pending++] : NULL;
    if (pt) {
        token_logprob(q, logits, id, &pt->lp);
        pt->start = pt->end = q->text.n;
    }
    if (q->detok_on) {
        const char *piece;
        size_t len, before = q->text.n;
        vkv_status st = vkv_detok_push(&q->detok, id, &piece, &len);
        if (st) {
            seq_fail_status(q, st);
            return;
        }
        vkv_strbuf_put(&q->text, piece, len);
        if (q->text.oom) {
            seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory");
            return;
        }
        if (pt) pt->end = q->text.n;
        size_t at = stop_match(q->req, q->text.p, q->text.n, before);
        if (at < q->text.n) {
            emit_text(q, at, true);
            seq_finish(q, "stop", true);
            return;
        }
        emit_text(q, q->text.n - stop_hold(q->req, q->text.p, q->text.n), false);
    }
    if ((q->req->max_tokens && q->n_gen >= q->req->max_tokens) || vkv_session_seq_full(q->ss)) {
        seq_finish(q, "length", false);
        return;
    }
    q->next_id = id;
    q->state = SEQ_DECODE;
}

/* ---- admission ---- */

/* The pool's count of q's bytes becomes `bytes`. */
static void pool_set(vkv_seq *q, uint64_t bytes)
{
    vkv_engine *e = q->e;
    pthread_mutex_lock(&e->mu);
    e->pool_used = e->pool_used - q->held + bytes;
    pthread_mutex_unlock(&e->mu);
    q->held = bytes;
}

/* A choice's seed: the request's for the first (so n = 1 and choice 0 of n
 * agree), distinct ones for the others (splitmix64 of seed and index). */
static uint64_t choice_seed(uint64_t seed, uint32_t choice)
{
    if (!choice) return seed;
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * choice;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Opens a started sequence: its peak counted, its buffers, context, sampler
 * and output constraint. false when it failed (its error sent). */
static bool seq_open(vkv_seq *q)
{
    vkv_engine *e = q->e;
    const uint32_t nv = e->s->model->hp.n_vocab;
    vkv_status st;
    pool_set(q, q->peak);
    /* the prompt's logprobs are read a chunk of logits at a time */
    const size_t logit_rows = prompt_logprobs(q) ? e->p.prefill_chunk : 1;
    if (!(q->logits = malloc(sizeof *q->logits * nv * logit_rows)) ||
        (q->req->echo && !(q->prompt_tokens = calloc(q->pr.n, sizeof *q->prompt_tokens)))) {
        seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory");
        return false;
    }
    q->cp.scratch_from = e->scratch_owner;
    vkv_sampler_params sp = q->req->sampling;
    sp.seed = choice_seed(sp.seed, q->choice);
    if ((st = vkv_session_seq_create(e->s, &q->cp, &q->ss)) || (st = vkv_sampler_create(&sp, (int32_t)nv, &q->smp))) {
        seq_fail_status(q, st);
        return false;
    }
    if (q->req->constraint && !(q->matcher = vkv_json_matcher_new(q->req->constraint))) {
        seq_fail(q, OUT_FAILED, 500, "server_error", NULL, "out of host memory");
        return false;
    }
    return true;
}

/* The response's context_cache status before any reuse: q's compressed
 * context is looked up (a miss until found), not reusable, or the cache is off. */
static void context_cache_status(vkv_seq *q)
{
    q->comp.context_cache_reason = context_not_cached(q);
    q->comp.context_cache = !q->c.press ? NULL : q->e->p.no_prefix_cache ? "off"
                            : q->comp.context_cache_reason ? "not_reusable" : "miss";
    if (!q->c.press) q->comp.context_cache_reason = NULL;
}

/* After q's prefill began: its sampler has seen the prompt, its text
 * decoder is ready, and it prefills. */
static void seq_begun(vkv_seq *q)
{
    vkv_engine *e = q->e;
    for (size_t i = 0; i < q->pr.n; i++) vkv_sampler_accept(q->smp, q->pr.ids[i]);
    if (e->s->tok) {
        vkv_detok_init(&q->detok, e->s->tok, false);
        q->detok_on = true;
    }
    q->comp.press = q->c.press ? q->c.press->name : "none";
    q->comp.compression = q->c.compression_ratio;
    q->comp.vector = q->c.vector;
    q->state = SEQ_PREFILL;
}

/* The echoed prompt's tokens, without logprobs until the prefill gives them. */
static void prompt_tokens_init(vkv_seq *q)
{
    for (size_t i = 0; q->prompt_tokens && i < q->pr.n; i++)
        q->prompt_tokens[i] = (vkv_token_logprob){.id = q->pr.ids[i], .logprob = NAN};
}

/* What a paged q holds when it maps its first n_mapped tokens' pages from
 * another cache: the rest of its context's pages, and one more a layer
 * when the last mapped page is partly full (copied on its first write). */
static uint64_t paged_held(const vkv_seq *q, uint32_t n_mapped)
{
    const vkv_engine *e = q->e;
    const uint64_t page = 1ull << vkv_kv_pages_shift(e->pages), L = e->s->model->hp.n_layer;
    const uint64_t shared = L * ((n_mapped + page - 1) / page), slack = n_mapped % page ? L : 0;
    return (page_count(e, q->cp.n_ctx) - shared + slack) * vkv_kv_pages_page_bytes(e->pages);
}

/* Begins q's prefill of its whole prompt, nothing taken from elsewhere
 * (with echo and logprobs, every chunk's logits). */
static vkv_status begin_alone(vkv_seq *q)
{
    return vkv_session_seq_prefill_begin(q->ss, &q->c, &q->pr, prompt_logprobs(q) ? VKV_LOGITS_CHUNK : VKV_LOGITS_LAST,
                                         q->logits);
}

/* Starts a ready sequence (a request's only one, or its leader): its
 * context, sampler and prefill, which may take a cached prefix or
 * compressed context. */
static void start(vkv_seq *q)
{
    vkv_engine *e = q->e;
    vkv_status st;
    if (!seq_open(q)) return;
    uint32_t n_reuse = 0;
    const int from = prefix_find(e, q, &n_reuse), context = context_find(e, q);
    if (context >= 0) {
        const prefix_entry *p = &e->prefix[context];
        st = vkv_session_seq_prefill_begin_compressed(q->ss, &q->c, &q->pr, VKV_LOGITS_LAST, q->logits, p->ss,
                                                      p->logits);
    } else if (from >= 0)
        st = vkv_session_seq_prefill_begin_from(q->ss, &q->c, &q->pr, VKV_LOGITS_LAST, q->logits, e->prefix[from].ss,
                                                n_reuse);
    else st = begin_alone(q);
    prompt_tokens_init(q);
    if (st) {
        seq_fail_status(q, st);
        return;
    }
    context_cache_status(q);
    if (context >= 0) {
        prefix_entry *p = &e->prefix[context];
        p->last_used = ++e->prefix_clock;
        q->cached_tokens = p->n_ids;
        q->context_reused = true;
        q->comp = p->comp; /* what the compression that made it did */
        q->comp.decode_compressions = 0;
        q->comp.context_cache = "hit";
        q->comp.context_cache_reason = NULL;
        q->comp.context_shared_bytes = p->bytes;
    } else if (from >= 0) {
        e->prefix[from].last_used = ++e->prefix_clock;
        q->cached_tokens = n_reuse;
    }
    if (q->paged) {
        /* The entry's pages it maps are the entry's (pinned while it runs) */
        if (from >= 0) q->mapped_from = e->prefix[from].ss;
        pool_set(q, paged_held(q, from >= 0 ? n_reuse : 0));
    } else {
        pool_set(q, vkv_ctx_kv_bytes(q->ss->ctx) > q->peak ? vkv_ctx_kv_bytes(q->ss->ctx) : q->peak);
    }
    seq_begun(q);
    pthread_mutex_lock(&e->mu);
    e->prompt_tokens += q->pr.n;
    if (!e->p.no_prefix_cache && plain_prefill(q)) {
        e->prefix_queries += q->pr.n;
        e->prefix_hits += q->cached_tokens;
    }
    if (!context_not_cached(q)) {
        e->context_queries++;
        e->context_hits += q->context_reused;
    }
    uint64_t used = e->pool_used;
    pthread_mutex_unlock(&e->mu);
    logf_(e, "request %llu admitted: %zu prompt tokens (%u from the prefix cache%s), a %u-token context, press %s, peak "
             "KV %.2f MiB; pool %.2f of %.2f MiB", q->id, q->pr.n, q->cached_tokens,
          q->context_reused ? ", its compressed context" : "", q->cp.n_ctx, q->comp.press,
          mib(q->peak), mib(used), mib(e->budget));
}

/* Starts a follower: opened, it waits for its leader's prefill
 * (fork_follower), or prefills alone when the leader failed first. */
static void start_follower(vkv_seq *f)
{
    if (!seq_open(f)) return;
    f->state = SEQ_FORK;
    const vkv_seq *leader = f->g->member[0];
    if (!leader || leader->state != SEQ_PREFILL) fork_follower(f, NULL, false);
}

/* Begins a follower's prefill at its leader's prefill end, before the
 * leader samples (its logits are the prompt's last token's): the prompt's
 * rows are the leader's, mapped (paged) or copied, with the last token
 * evaluated again (vkv_session_seq_prefill_begin_from: the same bits), or
 * the leader's compressed prompt taken whole when its prefill compressed
 * (vkv_session_seq_prefill_begin_sibling). leader NULL (it failed first),
 * echo with logprobs (every prompt token's logits) and compression during
 * generation (its watcher sees the prompt) prefill alone. */
static void fork_follower(vkv_seq *f, const vkv_seq *leader, bool compressed)
{
    vkv_engine *e = f->e;
    uint32_t n_reuse = 0;
    vkv_status st;
    const bool alone = !leader || !leader->ss || prompt_logprobs(f) || f->c.compress_every;
    if (!alone && compressed)
        st = vkv_session_seq_prefill_begin_sibling(f->ss, &f->c, &f->pr, VKV_LOGITS_LAST, f->logits, leader->ss,
                                                   leader->logits);
    else if (!alone && plain_prefill(f) &&
             (n_reuse = vkv_session_seq_reusable(f->ss, leader->ss, &f->pr, (uint32_t)f->pr.n, 1)))
        st = vkv_session_seq_prefill_begin_from(f->ss, &f->c, &f->pr, VKV_LOGITS_LAST, f->logits, leader->ss,
                                                n_reuse);
    else st = begin_alone(f);
    prompt_tokens_init(f);
    if (st) {
        seq_fail_status(f, st);
        return;
    }
    const fork_how how = alone ? FORK_ALONE : compressed ? FORK_COMPRESSED : !n_reuse ? FORK_ALONE
                         : f->paged ? FORK_PAGES : FORK_ROWS;
    if (how != FORK_ALONE) { /* the leader's prompt: its compression, cache status and cached tokens */
        f->comp = leader->comp;
        f->cached_tokens = leader->cached_tokens;
        f->context_reused = leader->context_reused;
    } else context_cache_status(f);
    if (f->paged && n_reuse) {
        /* the pages it maps stay counted in the leader's (leader_held after it ends) */
        f->maps_leader = true;
        f->g->mapping++;
        f->mapped_from = leader->mapped_from; /* the entry the leader maps, if any: pinned by both */
        pool_set(f, paged_held(f, n_reuse));
    }
    seq_begun(f);
    pthread_mutex_lock(&e->mu);
    e->forks[how]++;
    pthread_mutex_unlock(&e->mu);
    if (how == FORK_ALONE) logf_(e, "request %llu: choice %u prefills its prompt alone", f->id, f->choice);
    else if (how == FORK_COMPRESSED)
        logf_(e, "request %llu: choice %u takes request %llu's compressed prompt", f->id, f->choice, leader->id);
    else
        logf_(e, "request %llu: choice %u takes request %llu's first %u prompt tokens (%s) and evaluates the other %zu",
              f->id, f->choice, leader->id, n_reuse, f->paged ? "pages mapped" : "rows copied", f->pr.n - n_reuse);
}

/* Ends a group none of whose members started (refused, cancelled or
 * drained while waiting): each gets ev, an error event. */
static void group_end(vkv_seq *q, const vkv_seq_event *ev)
{
    seq_group *g = q->g;
    const vkv_seq_event end = *ev; /* ev may be q's own (its refusal), and q may be freed in the loop */
    atomic_fetch_add(&g->refs, 1);  /* g outlives its members here */
    for (uint32_t i = 0; i < g->n; i++) {
        vkv_seq *m = g->member[i];
        if (!m) continue;
        vkv_seq_event copy = end;
        seq_drop_resources(m);
        push_event(m, &copy);
        m->state = SEQ_FINISHED;
        engine_release(m);
    }
    group_unref(g);
}

/* Whether a member of q's group was cancelled. */
static bool group_cancelled(const vkv_seq *q)
{
    for (uint32_t i = 0; i < q->g->n; i++)
        if (q->g->member[i] && atomic_load(&q->g->member[i]->cancelled)) return true;
    return false;
}

/* Takes cancelled requests off the waiting list. */
static void reap_waiting(vkv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    vkv_seq *gone = NULL, **link = &e->wait_head;
    e->wait_tail = NULL;
    while (*link) {
        vkv_seq *q = *link;
        if (group_cancelled(q)) {
            *link = q->next;
            q->next = gone;
            gone = q;
            e->n_waiting -= q->g->n;
        } else {
            e->wait_tail = q;
            link = &q->next;
        }
    }
    pthread_mutex_unlock(&e->mu);
    while (gone) {
        vkv_seq *q = gone;
        gone = q->next;
        count_outcome(q, OUT_CANCELLED);
        vkv_seq_event ev = {.kind = VKV_SEQ_ERROR, .http_status = 400, .type = "invalid_request_error",
                            .code = "cancelled"};
        snprintf(ev.message, sizeof ev.message, "the request was cancelled");
        group_end(q, &ev);
    }
}

/* Whether an active sequence is still prefilling a prompt that compresses. */
static bool any_compressing_prefill(const vkv_engine *e)
{
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++)
        if (e->active[i]->state == SEQ_PREFILL && !plain_prefill(e->active[i])) return true;
    return false;
}

/* Whether an active sequence is still prefilling. */
static bool any_prefilling(const vkv_engine *e)
{
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++)
        if (e->active[i]->state == SEQ_PREFILL) return true;
    return false;
}

/* Admits waiting requests in order while the head fits: a free place, its
 * predicted peak within the pool, and, if it or a prompt being prefilled
 * compresses, no other prompt being prefilled. Such prompts go one at a time, so the pool holds one
 * uncompressed prompt at most beside compressed caches (docs/SERVE.md, "The
 * KV pool"); prompts that compress nothing are admitted together and
 * prefilled in shared forwards (prefill_step), as their peaks are their
 * caches anyway. A request that can never run is refused at once, prefill
 * or not. */
static void admit(vkv_engine *e)
{
    for (;;) {
        pthread_mutex_lock(&e->mu);
        vkv_seq *q = e->wait_head;
        const bool room = e->n_active < e->p.max_seqs;
        pthread_mutex_unlock(&e->mu);
        if (!q || !room) return;
        bool ok = q->state == SEQ_READY || prepare(q);
        seq_group *g = q->g;
        const uint32_t n = g->n;
        if (ok && (plain_prefill(q) ? any_compressing_prefill(e) : any_prefilling(e))) return;
        if (ok) prefix_make_room(e, q);
        const uint64_t need = ok ? admit_peak(e, q) : 0; /* outside the lock: it walks the prefix entries */
        pthread_mutex_lock(&e->mu);
        const bool fits = ok && e->n_active + n <= e->p.max_seqs && e->pool_used + e->prefix_bytes + need <= e->budget;
        if (!ok || fits) {
            e->wait_head = q->next;
            if (!e->wait_head) e->wait_tail = NULL;
            e->n_waiting -= n;
            q->next = NULL;
            if (!fits) e->outcomes[q->refusal.http_status == 500 ? OUT_FAILED : OUT_INVALID]++;
            else if ((e->n_active += n) > e->n_active_peak) e->n_active_peak = e->n_active;
        }
        pthread_mutex_unlock(&e->mu);
        if (!ok) {
            group_end(q, &q->refusal);
            continue;
        }
        if (!fits) return;
        /* the group's places, the leader first (admission order) */
        for (uint32_t i = 0, k = 0; i < n; i++) {
            while (e->active[k]) k++;
            e->active[k] = g->member[i];
        }
        start(q);
        for (uint32_t i = 1; i < n; i++) start_follower(g->member[i]);
    }
}

/* ---- the work of one iteration ---- */

/* Whether VKVECTOR_SERVE_FAULT fails decoding step (prefill: prefill
 * forward) `step`. */
static bool injected_fault(const vkv_engine *e, bool prefill, uint64_t step)
{
    for (uint32_t i = 0; i < e->n_fault_steps && prefill == e->fault_prefill; i++)
        if (e->fault_steps[i] == step) return true;
    return false;
}

/* After a prefill step of q (st its outcome, shared: a forward with other
 * prompts' chunks; past: its tokens before): the pool's count, and at the
 * prompt's end its first token. Returns the prompt tokens the step
 * evaluated. A shared forward's failure is none of its requests' doing (a
 * lost device, or the scheduler's own mistake): each fails as a server error. */
static uint32_t prefill_stepped(vkv_engine *e, vkv_seq *q, vkv_status st, bool shared, bool done, uint32_t past)
{
    if (st) {
        logf_(e, "request %llu: prefill failed: %s", q->id, vkv_last_error());
        if (shared) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s", vkv_last_error());
            seq_fail(q, OUT_FAILED, 500, "server_error", NULL, msg);
        } else seq_fail_status(q, st);
        return 0;
    }
    if (prompt_logprobs(q)) {
        /* each row of the chunk's logits predicts the prompt token after it */
        const size_t nv = e->s->model->hp.n_vocab;
        size_t from, to;
        vkv_session_seq_prefill_last_chunk(q->ss, &from, &to);
        for (size_t p = from; p < to && p + 1 < q->pr.n; p++)
            token_logprob(q, q->logits + (p - from) * nv, q->pr.ids[p + 1], &q->prompt_tokens[p + 1]);
        if (to == q->pr.n && to > from) q->last_row = to - 1 - from;
    }
    const uint32_t n_tok = vkv_ctx_n_past(q->ss->ctx) - past;
    uint64_t before = q->held, now = vkv_ctx_kv_bytes(q->ss->ctx);
    if (now < before && !q->paged) { /* a paged one holds its whole context's pages from the start */
        pool_set(q, now);
        pthread_mutex_lock(&e->mu);
        uint64_t used = e->pool_used;
        pthread_mutex_unlock(&e->mu);
        logf_(e, "request %llu holds %.2f MiB of KV cache (was %.2f); pool %.2f of %.2f MiB", q->id, mib(now),
              mib(before), mib(used), mib(e->budget));
    }
    if (!done) return n_tok;
    vkv_prefill pf;
    vkv_session_seq_prefill_end(q->ss, &pf);
    if (pf.compressed && !pf.reused) {
        const vkv_vector_report *r = &pf.report;
        for (size_t i = 0; i < (size_t)r->n_layer * r->n_kv_head; i++) {
            q->comp.n_retained += r->n_ret[i];
            q->comp.n_approximated += r->n_apx[i];
            q->comp.n_evicted += r->n_evict[i];
        }
        q->comp.n_compressed = pf.n_first;
        q->comp.kv_bytes_before = pf.memory.uncompressed_context;
        q->comp.kv_bytes_after = pf.memory.k_retained + pf.memory.v_retained + pf.memory.k_approximated;
        pthread_mutex_lock(&e->mu);
        e->prefill_compressions++;
        pthread_mutex_unlock(&e->mu);
    }
    /* a whole prompt compressed: its last token's logits go with the context into the cache (the sampler may
     * change q->logits) */
    if (pf.compressed && !pf.reused && pf.n_first == q->pr.n && !context_not_cached(q) &&
        (q->context_logits = malloc(sizeof *q->context_logits * e->s->model->hp.n_vocab)))
        memcpy(q->context_logits, q->logits, sizeof *q->context_logits * e->s->model->hp.n_vocab);
    const bool compressed = pf.compressed;
    vkv_prefill_free(&pf);
    fork_waiting(q, q, compressed); /* its followers fork now, while its cache and logits are the prompt's */
    vkv_seq_event ev = {.kind = VKV_SEQ_STARTED, .prompt_tokens = (uint32_t)q->pr.n, .tokens = q->prompt_tokens,
                        .n_tokens = q->prompt_tokens ? q->pr.n : 0};
    q->prompt_tokens = NULL; /* the event's now */
    push_event(q, &ev);
    if (q->req->no_generation) seq_finish(q, "length", false);
    else take_token(q, q->logits + q->last_row * e->s->model->hp.n_vocab);
    return n_tok;
}

/* One prefill step: the oldest prefilling sequence's next chunk (or its
 * compression), in one forward with the next chunks of the other prompts
 * that compress nothing, as many as share its matrix product and fit the
 * scratch (vkv_ctx_chunks_fit; each gets the bits of its own chunk). false
 * when none is prefilling; *n_tok: the prompt tokens evaluated. */
static bool prefill_step(vkv_engine *e, uint32_t *n_tok)
{
    *n_tok = 0;
    vkv_seq *group[VKV_BATCH_MAX];
    vkv_session_seq *ss[VKV_BATCH_MAX];
    uint32_t chunk[VKV_BATCH_MAX], past[VKV_BATCH_MAX], n = 0;
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i] && n < VKV_BATCH_MAX; i++) {
        vkv_seq *q = e->active[i];
        if (q->state != SEQ_PREFILL) continue;
        const uint32_t c = vkv_session_seq_prefill_chunk(q->ss);
        if (n && (!c || !vkv_ctx_chunks_share_path(chunk[0], c))) continue;
        group[n] = q;
        ss[n] = q->ss;
        chunk[n] = c;
        past[n++] = vkv_ctx_n_past(q->ss->ctx);
        if (!c) break; /* the oldest's step runs alone */
    }
    if (!n) return false;
    bool done[VKV_BATCH_MAX] = {0};
    const bool fault = injected_fault(e, true, ++e->prefill_forwards);
    const vkv_status injected = fault ? vkv_error(VKV_ERR_DEVICE_LOST, "prefill forward %llu failed: a fault injected "
                                                 "by VKVECTOR_SERVE_FAULT", (unsigned long long)e->prefill_forwards)
                                      : VKV_OK;
    if (!chunk[0]) {
        vkv_status st = fault ? injected : vkv_session_seq_prefill_next(ss[0], &done[0]);
        *n_tok = prefill_stepped(e, group[0], st, false, done[0], past[0]);
        return true;
    }
    n = vkv_ctx_chunks_fit(ss[0]->ctx, chunk, n); /* in the first one's (borrowed) buffers */
    if (!n) n = 1; /* not so (its chunk is one its context takes): it then fails alone */
    vkv_status st = fault ? injected : vkv_session_seqs_prefill_next(ss, n, done);
    for (uint32_t i = 0; i < n; i++) *n_tok += prefill_stepped(e, group[i], st, n > 1, done[i], past[i]);
    return true;
}

/* Whether an active sequence is decoding. */
static bool any_decoding(const vkv_engine *e)
{
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++)
        if (e->active[i]->state == SEQ_DECODE) return true;
    return false;
}

/* The prefill work of one iteration: prefill steps (prefill_step: the
 * waiting prompts that compress nothing share forwards, the others go one at
 * a time), admitting waiting requests before each, until a chunk's worth of
 * prompt tokens (--batch) is evaluated or, while other sequences decode, the
 * time of their last step is spent. A long prompt thus takes one chunk per
 * iteration, and a burst of short ones starts in one or a few forwards,
 * while a running stream waits about a decoding step and one forward at
 * most for its next token (docs/SERVE.md, "How it works"). */
static void prefill_iteration(vkv_engine *e)
{
    uint32_t evaluated = 0, n_tok;
    const double t0 = now_s();
    /* calls: a cap for prompts that evaluate nothing (a compression call, a
     * failed prefill), two a place */
    for (uint32_t calls = 0; evaluated < e->p.prefill_chunk && calls < 2 * e->p.max_seqs; calls++) {
        if (calls && any_decoding(e) && now_s() - t0 >= e->last_step_s) return;
        admit(e);
        if (!prefill_step(e, &n_tok)) return;
        evaluated += n_tok;
    }
}

/* VKVECTOR_SERVE_FAULT's steps: "decode:N[,M...]" or "prefill:N[,M...]",
 * each >= 1, at most 8. */
static vkv_status parse_faults(vkv_engine *e, const char *spec)
{
    e->fault_prefill = !strncmp(spec, "prefill:", 8);
    if (!e->fault_prefill && strncmp(spec, "decode:", 7)) goto bad;
    const char *p = strchr(spec, ':') + 1;
    for (;;) {
        char *end = NULL;
        errno = 0;
        unsigned long long n = strtoull(p, &end, 10);
        if (end == p || !n || errno || e->n_fault_steps == 8 || *p == '-') goto bad;
        e->fault_steps[e->n_fault_steps++] = n;
        if (!*end) return VKV_OK;
        if (*end != ',') goto bad;
        p = end + 1;
    }
bad:
    return vkv_error(VKV_ERR_ARG, "VKVECTOR_SERVE_FAULT is 'decode:N[,M...]' or 'prefill:N[,M...]' (up to 8 steps, "
                     "each >= 1), not '%s'", spec);
}

/* One decoding step of the n sequences: each appends its pending token and
 * gets its successor's logits, row batch_row[i] of eval_logits; batch_st[i]
 * is sequence i's outcome. Compression during generation stays per sequence
 * around the evaluation, which is one batched forward over the contexts
 * (vkv_ctx_eval_batch: every weight read once for all rows, each row bit for
 * bit the single-token decode's, so outputs do not depend on batching). */
static void decode_step(vkv_engine *e, vkv_seq *const *seqs, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if ((e->batch_st[i] = vkv_session_seq_step_before(seqs[i]->ss))) continue;
        e->eval_ctx[m] = seqs[i]->ss->ctx;
        e->eval_ids[m] = seqs[i]->next_id;
        e->batch_row[i] = m++;
    }
    /* One forward for every row: a failure fails them all. */
    const vkv_status st =
        injected_fault(e, false, ++e->decode_steps)
            ? vkv_error(VKV_ERR_DEVICE_LOST, "decoding step %llu failed: a fault injected by VKVECTOR_SERVE_FAULT",
                        (unsigned long long)e->decode_steps)
        : m ? vkv_ctx_eval_batch(e->eval_ctx, e->eval_ids, m, e->eval_logits)
            : VKV_OK;
    for (uint32_t i = 0; i < n; i++)
        if (!e->batch_st[i] && !(e->batch_st[i] = st))
            e->batch_st[i] = vkv_session_seq_step_after(seqs[i]->ss);
}

static void record_step_time(vkv_engine *e, double s, uint32_t n_seqs)
{
    size_t b = 0;
    while (b < N_STEP_BUCKETS && s > STEP_BUCKETS[b]) b++;
    pthread_mutex_lock(&e->mu);
    if (n_seqs > e->step_seqs_max) e->step_seqs_max = n_seqs;
    e->step_hist[b]++;
    e->step_sum += s;
    e->step_count++;
    pthread_mutex_unlock(&e->mu);
}

/* A decoding step for every decoding sequence, then each one's next token. */
static void decode_all(vkv_engine *e)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i]; i++)
        if (e->active[i]->state == SEQ_DECODE) e->batch[n++] = e->active[i];
    if (!n) return;
    double t0 = now_s();
    decode_step(e, e->batch, n);
    e->last_step_s = now_s() - t0;
    record_step_time(e, e->last_step_s, n);
    const size_t nv = e->s->model->hp.n_vocab;
    for (uint32_t i = 0; i < n; i++) {
        vkv_seq *q = e->batch[i];
        if (e->batch_st[i]) {
            logf_(e, "request %llu: decoding step failed: %s", q->id, vkv_last_error());
            seq_fail_status(q, e->batch_st[i]);
            continue;
        }
        if (q->ss->decode) pool_set(q, vkv_ctx_kv_bytes(q->ss->ctx));
        take_token(q, e->eval_logits + e->batch_row[i] * nv);
    }
}

/* Cancelled active sequences leave now; their memory returns to the pool. */
static void reap_active(vkv_engine *e)
{
    for (uint32_t i = 0; i < e->p.max_seqs && e->active[i];) {
        vkv_seq *q = e->active[i];
        if (!atomic_load(&q->cancelled)) {
            i++;
            continue;
        }
        seq_fail(q, OUT_CANCELLED, 400, "invalid_request_error", "cancelled", "the request was cancelled");
    }
}

static void *sched_main(void *arg)
{
    vkv_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        e->mem = vkv_gpu_mem_stats(e->s->gpu); /* only this thread touches the device */
        if (e->pages) e->page_stats = vkv_kv_pages_stats_of(e->pages);
        while (!e->stopping && !e->wait_head && !e->n_active) pthread_cond_wait(&e->cv, &e->mu);
        vkv_seq *refused = NULL;
        if (e->stopping) {
            /* drain: what has not started is refused */
            refused = e->wait_head;
            for (const vkv_seq *w = e->wait_head; w; w = w->next) e->outcomes[OUT_UNAVAILABLE]++; /* requests */
            e->wait_head = e->wait_tail = NULL;
            e->n_waiting = 0;
        }
        const bool exit_now = e->stopping && !e->n_active;
        pthread_mutex_unlock(&e->mu);
        while (refused) {
            vkv_seq *q = refused;
            refused = q->next;
            vkv_seq_event ev = {.kind = VKV_SEQ_ERROR, .http_status = 503, .type = "server_error"};
            snprintf(ev.message, sizeof ev.message, "the server is shutting down");
            group_end(q, &ev);
        }
        if (exit_now) break;
        reap_waiting(e);
        reap_active(e);
        prefill_iteration(e);
        decode_all(e);
    }
    logf_(e, "scheduler stopped");
    return NULL;
}

/* ---- the engine ---- */

/* A special token's text as a string of its own; "" for VKV_TOKEN_NULL. */
static char *token_text(const vkv_tokenizer *tok, int32_t id)
{
    size_t n = 0;
    const char *p = id == VKV_TOKEN_NULL ? "" : vkv_token_to_piece(tok, id, true, &n);
    char *t = malloc(n + 1);
    if (!t) return NULL;
    memcpy(t, p, n);
    t[n] = 0;
    return t;
}

/* The server's defaults with every field given: the caller's where its has_*
 * is set, else no compression on an f16 cache. */
static vkv_press_request server_defaults(const vkv_press_request *d)
{
    vkv_press_request r = {.press = "none", .pa = -1, .kv_type = "f16"};
#define TAKE(field, flag)        \
    if (d->flag) r.field = d->field; \
    r.flag = true
    TAKE(compression, has_compression);
    TAKE(vector, has_vector);
    TAKE(pa, has_pa);
    TAKE(compress_every, has_compress_every);
    TAKE(max_kv_tokens, has_max_kv_tokens);
    TAKE(query_aware, has_query_aware);
#undef TAKE
    if (d->has_press) memcpy(r.press, d->press, sizeof r.press);
    if (d->has_kv_type) memcpy(r.kv_type, d->kv_type, sizeof r.kv_type);
    r.has_press = r.has_kv_type = true;
    return r;
}

/* The vocabulary's byte trie for response_format, once: each token's text
 * as generated text shows it, the end-of-generation tokens special (the
 * scheduler allows them when the document is whole). false: out of memory. */
static bool json_vocab_make(vkv_engine *e)
{
    const vkv_tokenizer *tok = e->s->tok;
    const size_t nv = e->s->model->hp.n_vocab, n_tok = (size_t)vkv_tokenizer_n_vocab(tok);
    vkv_token_bytes *tb = calloc(nv, sizeof *tb);
    e->allowed = calloc(nv, sizeof *e->allowed);
    e->eog_ids = calloc(nv, sizeof *e->eog_ids);
    if (!tb || !e->allowed || !e->eog_ids) {
        free(tb);
        return false;
    }
    for (size_t i = 0; i < nv; i++) {
        /* ids past the tokenizer's (a padded output layer) have no text: never allowed */
        tb[i].p = i < n_tok ? vkv_token_to_piece(tok, (int32_t)i, false, &tb[i].n) : "";
        tb[i].special = i >= n_tok || vkv_tokenizer_is_eog(tok, (int32_t)i);
        if (i < n_tok && vkv_tokenizer_is_eog(tok, (int32_t)i)) e->eog_ids[e->n_eog++] = (int32_t)i;
    }
    e->json_vocab = vkv_json_vocab_new(tb, nv);
    free(tb);
    return e->json_vocab != NULL;
}

/* The scratch owner's context: the activation buffers every sequence
 * borrows, once, for a prefill chunk or a step of max_seqs rows, beside a
 * chunk-sized KV cache of its own. */
static vkv_ctx_params owner_params(const vkv_engine_params *p)
{
    return (vkv_ctx_params){.n_ctx = p->prefill_chunk, .n_batch = p->prefill_chunk, .k_type = VKV_F16,
                            .v_type = VKV_F16, .step_seqs = p->max_seqs, .step_ctx = p->n_ctx};
}

/* What the pool holds beyond the KV bytes the admission counts: every
 * sequence's attention partials, the buffers of the compressions that may
 * run at once (one after a prefill, others during generation: up to
 * COMPRESSION_F32S f32 a (token, layer, KV head) each for scores, masks,
 * residuals and tiers, two of them counted), and the page pool's staging
 * area (one layer of the longest sequence). */
static uint64_t pool_headroom(const vkv_hparams *hp, const vkv_engine_params *p)
{
    const uint64_t compression_bytes = 4ull * COMPRESSION_F32S * p->n_ctx * hp->n_head_kv * hp->n_layer;
    const uint64_t staging = 2 * vkv_kv_cache_bytes(VKV_F16, hp->n_head_kv, p->n_ctx + (1u << VKV_KV_PAGE_SHIFT),
                                                    hp->head_dim);
    return (uint64_t)p->max_seqs * vkv_kv_plan_scratch_bytes(hp, p->n_ctx) + 2 * compression_bytes + staging;
}

/* --max-seqs when none is given: as many as one step takes (VKV_STEP_MAX,
 * and no more than the prefill chunk, whose buffers hold a step's rows),
 * halved while the sequences' scratch (the owner's step buffers and every
 * sequence's attention partials) would take more than a quarter of what
 * the device heap has beside the weights: on a small device the KV pool
 * keeps most of the memory. */
static uint32_t auto_max_seqs(const vkv_session *s, const vkv_engine_params *p)
{
    const vkv_hparams *hp = &s->model->hp;
    const uint64_t heap = vkv_gpu_mem_stats(s->gpu).device_heap_bytes, weights = s->model->weight_bytes;
    const uint64_t free_bytes = heap > weights + heap / POOL_MARGIN_DIV ? heap - weights - heap / POOL_MARGIN_DIV : 0;
    vkv_engine_params q = *p;
    q.max_seqs = p->prefill_chunk < VKV_STEP_MAX ? p->prefill_chunk : VKV_STEP_MAX;
    for (; q.max_seqs > 1; q.max_seqs /= 2) {
        const vkv_ctx_params owner = owner_params(&q);
        const vkv_ctx_memory plan = vkv_ctx_plan_memory(hp, &owner);
        if (plan.scratch_bytes + plan.kv_bytes + pool_headroom(hp, &q) <= free_bytes / 4) break;
    }
    return q.max_seqs;
}

vkv_status vkv_engine_create(vkv_session *s, const vkv_engine_params *p, vkv_engine **out)
{
    *out = NULL;
    if (!s->tok) return vkv_error(VKV_ERR_ARG, "vkvector serve needs the model's tokenizer");
    vkv_engine *e = calloc(1, sizeof *e);
    if (!e) return vkv_error(VKV_ERR_OOM, "out of host memory");
    e->s = s;
    e->p = *p;
    const vkv_hparams *hp = &s->model->hp;
    if (!e->p.queue) e->p.queue = DEFAULT_QUEUE;
    if (!e->p.n_ctx) e->p.n_ctx = hp->n_ctx_train;
    if (!e->p.prefill_chunk) e->p.prefill_chunk = DEFAULT_PREFILL_CHUNK;
    if (!e->p.max_seqs) e->p.max_seqs = auto_max_seqs(s, &e->p);
    if (!e->p.prefix_page) e->p.prefix_page = DEFAULT_PREFIX_PAGE;
    e->p.defaults = server_defaults(&p->defaults);
    if (e->p.max_seqs > VKV_STEP_MAX || e->p.max_seqs > e->p.prefill_chunk) {
        /* a step's rows live in the scratch owner's buffers of one prefill chunk */
        vkv_status st = vkv_error(VKV_ERR_ARG, "up to %u sequences at once, and no more than the prefill chunk (%u tokens), "
                                  "not %u", VKV_STEP_MAX, e->p.prefill_chunk, e->p.max_seqs);
        free(e);
        return st;
    }
    vkv_ctx_params owner = owner_params(&e->p);
    vkv_ctx_memory plan = vkv_ctx_plan_memory(hp, &owner);
    const uint64_t heap = vkv_gpu_mem_stats(s->gpu).device_heap_bytes;
    const uint64_t scratch = plan.scratch_bytes + plan.kv_bytes, others = s->model->weight_bytes + scratch;
    const uint64_t margin = heap / POOL_MARGIN_DIV;
    const uint64_t headroom = pool_headroom(hp, &e->p);
    e->budget = e->p.kv_budget ? e->p.kv_budget
              : heap > others + margin + headroom ? heap - others - margin - headroom : 0;
    /* the smallest sequence: a one-token prompt and one new token */
    vkv_ctx_params one = {.n_ctx = 2, .n_batch = 2, .k_type = VKV_F16, .v_type = VKV_F16};
    const uint64_t smallest = vkv_ctx_plan_memory(hp, &one).kv_bytes;
    if (e->budget > heap) {
        vkv_status st = vkv_error(VKV_ERR_ARG, "--kv-budget %.2f MiB is larger than the %.2f MiB heap of device '%s'",
                                  mib(e->budget), mib(heap), vkv_gpu_caps(s->gpu)->name);
        free(e);
        return st;
    }
    if (e->budget < smallest) {
        vkv_status st = vkv_error(VKV_ERR_OOM, "the KV pool (%.2f MiB) cannot hold one sequence (%.4f MiB): device "
                                  "'%s' has a %.2f MiB heap, the weights take %.2f MiB and the sequences' scratch %.2f MiB",
                                  mib(e->budget), mib(smallest), vkv_gpu_caps(s->gpu)->name, mib(heap),
                                  mib(s->model->weight_bytes), mib(scratch));
        free(e);
        return st;
    }
    vkv_status st = vkv_ctx_create(s->gpu, s->model, &owner, &e->scratch_owner);
    if (st) {
        free(e);
        return st;
    }
    const char *fault = getenv("VKVECTOR_SERVE_FAULT");
    if (fault && *fault && (st = parse_faults(e, fault))) {
        vkv_ctx_free(e->scratch_owner);
        free(e);
        return st;
    }
    /* The pool is allocated here, once: every sequence's cache, its attention
     * partials and its compression's buffers are suballocated from it
     * (docs/SERVE.md, "How it works"). */
    const uint64_t reserve = e->budget + headroom;
    if ((st = vkv_memory_reserve(s->gpu, reserve, "the KV pool"))) {
        st = vkv_error_context(st, "cannot allocate the KV pool of %.2f MiB (a %.2f MiB budget and %.2f MiB of %u "
                               "sequences' scratch; give a smaller --kv-budget or --max-seqs): ", mib(reserve),
                               mib(e->budget), mib(headroom), e->p.max_seqs);
        vkv_memory_release_reserve(s->gpu); /* what was reserved before the failure */
        vkv_ctx_free(e->scratch_owner);
        free(e);
        return st;
    }
    vkv_kv_pages_params pp = {.k_type = VKV_F16, .v_type = VKV_F16, .page_shift = VKV_KV_PAGE_SHIFT,
                              .staging_slots = e->p.n_ctx};
    if (!e->p.no_paged_kv && (st = vkv_kv_pages_create(s->gpu, hp, &pp, &e->pages))) {
        vkv_memory_release_reserve(s->gpu);
        vkv_ctx_free(e->scratch_owner);
        free(e);
        return st;
    }
    e->mem = vkv_gpu_mem_stats(s->gpu);
    e->chat = s->chat;
    if (e->chat == VKV_CHAT_UNKNOWN) {
        e->chat = VKV_CHAT_CHATML;
        logf_(e, "the model has no chat template vkvector knows; chat messages are rendered as ChatML");
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    const uint32_t m = e->p.max_seqs;
    e->active = calloc(m, sizeof *e->active);
    e->batch = calloc(m, sizeof *e->batch);
    e->batch_st = calloc(m, sizeof *e->batch_st);
    e->batch_row = calloc(m, sizeof *e->batch_row);
    e->eval_ctx = calloc(m, sizeof *e->eval_ctx);
    e->eval_ids = calloc(m, sizeof *e->eval_ids);
    e->eval_logits = malloc(sizeof *e->eval_logits * m * hp->n_vocab);
    e->prefix = calloc(MAX_PREFIX_ENTRIES, sizeof *e->prefix);
    e->p.model_path = NULL; /* the caller's: the copy is e->model_path */
    e->sampling = p->sampling ? *p->sampling : vkv_gen_sampling_defaults();
    e->p.sampling = NULL;
    e->model_path = p->model_path ? strdup(p->model_path) : NULL;
    e->bos_text = token_text(s->tok, vkv_tokenizer_bos(s->tok));
    e->eos_text = token_text(s->tok, vkv_tokenizer_eos(s->tok));
    const bool json_ok = json_vocab_make(e);
    if (!e->prefix || !e->active || !e->batch || !e->batch_st || !e->batch_row || !e->eval_ctx || !e->eval_ids || !e->eval_logits ||
        (p->model_path && !e->model_path) || !e->bos_text || !e->eos_text || !json_ok) {
        vkv_engine_free(e);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    if (pthread_create(&e->thread, NULL, sched_main, e)) {
        vkv_engine_free(e);
        return vkv_error(VKV_ERR_OOM, "cannot start the scheduler thread");
    }
    e->thread_started = true;
    logf_(e, "%s: up to %u sequences, %u queued, %u-token contexts, prefill chunks of %u; KV pool %.2f MiB",
          s->model_name, m, e->p.queue, e->p.n_ctx, e->p.prefill_chunk, mib(e->budget));
    *out = e;
    return VKV_OK;
}

void vkv_engine_stop_admitting(vkv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void vkv_engine_drain(vkv_engine *e)
{
    vkv_engine_stop_admitting(e);
    if (e->thread_started) {
        pthread_join(e->thread, NULL);
        e->thread_started = false;
    }
}

void vkv_engine_free(vkv_engine *e)
{
    if (!e) return;
    vkv_engine_drain(e);
    while (e->n_prefix) prefix_drop(e, e->n_prefix - 1, false);
    free(e->prefix);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->active);
    free(e->batch);
    free(e->batch_st);
    free(e->batch_row);
    free(e->eval_ctx);
    free(e->eval_ids);
    free(e->eval_logits);
    free(e->model_path);
    free(e->bos_text);
    free(e->eos_text);
    vkv_json_vocab_free(e->json_vocab);
    free(e->eog_ids);
    free(e->allowed);
    vkv_ctx_free(e->scratch_owner); /* after the thread: every borrower is gone */
    vkv_kv_pages_free(e->pages);    /* after every sequence and entry */
    vkv_memory_release_reserve(e->s->gpu); /* the pool, reserved before anything could call this */
    free(e);
}

const char *vkv_engine_model_id(const vkv_engine *e) { return e->s->model_name; }

void vkv_engine_get_props(const vkv_engine *e, vkv_engine_props *out)
{
    const vkv_tokenizer *tok = e->s->tok;
    const char *src = vkv_tokenizer_chat_template_source(tok);
    *out = (vkv_engine_props){
        .model_id = e->s->model_name, .model_path = e->model_path ? e->model_path : "", .n_ctx = e->p.n_ctx,
        .max_seqs = e->p.max_seqs, .n_vocab = vkv_tokenizer_n_vocab(tok),
        .chat_template = vkv_chat_template_name(e->chat), .chat_template_source = src ? src : "",
        .bos_token = e->bos_text, .eos_token = e->eos_text, .defaults = e->p.defaults, .sampling = e->sampling,
    };
}

/* The session's tokenizer is read-only once loaded (vkv_engine_create
 * refuses a session without one): these need neither the lock nor the
 * scheduler. */
vkv_status vkv_engine_tokenize(const vkv_engine *e, const char *text, size_t len, bool add_special, bool parse_special,
                               int32_t **ids, size_t *n_ids)
{
    return vkv_tokenize(e->s->tok, text, len, add_special, parse_special, ids, n_ids);
}

const char *vkv_engine_token_piece(const vkv_engine *e, int32_t id, bool special, size_t *len)
{
    *len = 0;
    if (id < 0 || id >= vkv_tokenizer_n_vocab(e->s->tok)) return NULL;
    return vkv_token_to_piece(e->s->tok, id, special, len);
}

/* A latency histogram under vLLM's naming: `vkvector:NAME`. */
static void latency_metric(vkv_strbuf *out, const char *name, const char *help, const latency_hist *h)
{
    bufprintf(out, "# HELP vkvector:%s %s\n# TYPE vkvector:%s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t b = 0; b < N_LATENCY_BUCKETS; b++) {
        cum += h->counts[b];
        bufprintf(out, "vkvector:%s_bucket{le=\"%g\"} %llu\n", name, LATENCY_BUCKETS[b], (unsigned long long)cum);
    }
    bufprintf(out, "vkvector:%s_bucket{le=\"+Inf\"} %llu\nvkvector:%s_sum %.6f\nvkvector:%s_count %llu\n", name,
              (unsigned long long)h->count, name, h->sum, name, (unsigned long long)h->count);
}

/* The metrics dashboards built for vLLM read, under its names with the
 * vkvector: prefix (docs/SERVE.md, "Metrics"). Under e->mu. */
static void vllm_style_metrics(const vkv_engine *e, vkv_strbuf *out)
{
    const struct { const char *name, *type, *help; double v; } plain[] = {
        {"prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", (double)e->prompt_tokens},
        {"generation_tokens_total", "counter", "Tokens generated.", (double)e->gen_tokens},
        {"num_requests_running", "gauge", "Requests prefilling or decoding.", (double)e->n_active},
        {"num_requests_waiting", "gauge", "Requests waiting for admission.", (double)e->n_waiting},
        {"kv_cache_usage_perc", "gauge", "The KV pool's use, as a fraction (1 = full).",
         e->budget ? (double)e->pool_used / (double)e->budget : 0},
    };
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        bufprintf(out, "# HELP vkvector:%s %s\n# TYPE vkvector:%s %s\nvkvector:%s %.17g\n", plain[i].name, plain[i].help,
                  plain[i].name, plain[i].type, plain[i].name, plain[i].v);
    bufprintf(out, "# HELP vkvector:request_success_total Requests that ran to their end, by finish reason.\n"
                   "# TYPE vkvector:request_success_total counter\n"
                   "vkvector:request_success_total{finished_reason=\"stop\"} %llu\n"
                   "vkvector:request_success_total{finished_reason=\"length\"} %llu\n",
              (unsigned long long)e->outcomes[OUT_STOP], (unsigned long long)e->outcomes[OUT_LENGTH]);
    latency_metric(out, "time_to_first_token_seconds", "From submission to the first generated token.", &e->ttft);
    latency_metric(out, "inter_token_latency_seconds", "Between a request's consecutive generated tokens.", &e->itl);
    latency_metric(out, "e2e_request_latency_seconds", "From submission to the last event of a request that ran.",
                   &e->e2e);
}

/* One unlabelled metric with its HELP and TYPE lines. */
static void metric(vkv_strbuf *out, const char *name, const char *type, const char *help, uint64_t value)
{
    bufprintf(out, "# HELP vkvector_%s %s\n# TYPE vkvector_%s %s\nvkvector_%s %llu\n", name, help, name, type, name,
              (unsigned long long)value);
}

void vkv_engine_metrics(vkv_engine *e, vkv_strbuf *out)
{
    pthread_mutex_lock(&e->mu);
    bufprintf(out, "# HELP vkvector_requests_total Requests by outcome.\n# TYPE vkvector_requests_total counter\n");
    for (int o = 0; o < N_OUTCOMES; o++)
        bufprintf(out, "vkvector_requests_total{outcome=\"%s\"} %llu\n", OUTCOME_NAMES[o],
                  (unsigned long long)e->outcomes[o]);
    metric(out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", e->prompt_tokens);
    metric(out, "generation_tokens_total", "counter", "Tokens generated.", e->gen_tokens);
    metric(out, "sequences_active", "gauge", "Sequences prefilling or decoding.", e->n_active);
    metric(out, "sequences_active_peak", "gauge", "The most sequences active at once since the start.", e->n_active_peak);
    metric(out, "decode_step_sequences_max", "gauge", "The most sequences one decoding step has held since the start.",
           e->step_seqs_max);
    metric(out, "sequences_queued", "gauge", "Requests waiting for admission.", e->n_waiting);
    metric(out, "kv_pool_bytes_in_use", "gauge", "Device bytes the sequences' KV caches hold.", e->pool_used);
    metric(out, "kv_pool_budget_bytes", "gauge", "The KV pool's size.", e->budget);
    metric(out, "device_allocations_total", "counter",
           "Device memory allocations (vkAllocateMemory) since the start, the weights' and the pool's included.",
           e->mem.n_allocations);
    metric(out, "device_memory_bytes", "gauge", "Device memory allocated: weights, scratch and the KV pool.",
           e->mem.device_bytes_allocated);
    metric(out, "device_memory_used_bytes", "gauge", "Of that, the bytes buffers hold.", e->mem.device_bytes_used);
    metric(out, "kv_pages_in_use", "gauge", "Pages of the KV page pool that a cache or a prefix entry maps.",
           e->page_stats.in_use);
    metric(out, "kv_pages_shared", "gauge", "Of those, pages mapped more than once (never written while so).",
           e->page_stats.shared);
    metric(out, "kv_pages_slab_pages", "gauge", "Pages the pool's slabs hold, in use or free.", e->page_stats.slab_pages);
    metric(out, "kv_pages_copied_total", "counter", "Shared pages copied before a write (copy on write).",
           e->page_stats.copied);
    metric(out, "kv_page_bytes", "gauge", "Bytes of one page (16 slots of every KV head of one layer, K and V).",
           e->pages ? vkv_kv_pages_page_bytes(e->pages) : 0);
    metric(out, "prefix_cache_entries", "gauge", "Finished prompts' caches and compressed contexts kept for reuse.",
           e->n_prefix);
    metric(out, "prefix_cache_bytes", "gauge", "Device bytes of the pool the prefix cache holds.", e->prefix_bytes);
    metric(out, "prefix_cache_queries_total", "counter", "Prompt tokens of requests that may reuse a cached prefix.",
           e->prefix_queries);
    metric(out, "prefix_cache_hits_total", "counter", "Prompt tokens taken from the prefix cache.", e->prefix_hits);
    metric(out, "prefix_cache_evictions_total", "counter", "Cached prefixes dropped to make room.", e->prefix_evictions);
    metric(out, "context_cache_queries_total", "counter",
           "Requests whose query-agnostic compression may take a cached compressed context.", e->context_queries);
    metric(out, "context_cache_hits_total", "counter", "Requests that took a cached compressed context.",
           e->context_hits);
    bufprintf(out, "# HELP vkvector_choice_forks_total Choices after a request's first (OpenAI's n) begun, by what they "
                   "took of the first one's prefill: its prompt's pages mapped, its rows copied, its compressed prompt, "
                   "or nothing (prefilled alone).\n# TYPE vkvector_choice_forks_total counter\n");
    for (int i = 0; i < N_FORKS; i++)
        bufprintf(out, "vkvector_choice_forks_total{from=\"%s\"} %llu\n", FORK_NAMES[i], (unsigned long long)e->forks[i]);
    bufprintf(out, "# HELP vkvector_compressions_total KV-cache compressions, after a prefill or during generation.\n"
                   "# TYPE vkvector_compressions_total counter\n"
                   "vkvector_compressions_total{when=\"prefill\"} %llu\nvkvector_compressions_total{when=\"decode\"} %llu\n",
              (unsigned long long)e->prefill_compressions, (unsigned long long)e->decode_compressions);
    bufprintf(out, "# HELP vkvector_decode_step_seconds Time of one decoding step of all decoding sequences.\n"
                   "# TYPE vkvector_decode_step_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b < N_STEP_BUCKETS; b++) {
        cum += e->step_hist[b];
        bufprintf(out, "vkvector_decode_step_seconds_bucket{le=\"%g\"} %llu\n", STEP_BUCKETS[b], (unsigned long long)cum);
    }
    bufprintf(out, "vkvector_decode_step_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)e->step_count);
    bufprintf(out, "vkvector_decode_step_seconds_sum %.6f\nvkvector_decode_step_seconds_count %llu\n", e->step_sum,
              (unsigned long long)e->step_count);
    vllm_style_metrics(e, out);
    pthread_mutex_unlock(&e->mu);
}
