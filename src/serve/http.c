#include "serve/http.h"

#include "serve/openai.h"

#include <microhttpd.h>

#include <ctype.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A wait on the engine lasts at most this long, and this often, events or
 * not, the front looks whether the client is still there. */
#define WAIT_MS 100
/* A body announced bigger than this is refused before it is read (the
 * connection closes); smaller ones over the cap are read and dropped, so the
 * client sees the 413. */
#define DISCARD_LIMIT ((uint64_t)64 << 20)
/* Connections beyond max_connections are still accepted, up to this many
 * more, to be answered 503 and closed (past them MHD closes new ones
 * unanswered); one gets this long to send its request. */
#define SPARE_CONNECTIONS 64u
#define SPARE_TIMEOUT_S 10u
/* The client's sending side ending this soon after its request ended is a
 * half-close (it still reads the response), later the client leaving. */
#define HALF_CLOSE_MS 500
/* How long a browser may keep a preflight's answer (it caps it itself). */
#define PREFLIGHT_MAX_AGE "86400"

enum route {
    R_CHAT, R_COMPLETIONS, R_MODELS, R_MODEL, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE, R_PROPS, R_OTHER, R_COUNT
};
static const char *const route_label[R_COUNT] = {
    "/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/{id}", "/health", "/metrics",
    "/tokenize", "/detokenize", "/props", "other",
};

#define MAX_COUNTS 96

#define MAX_ALIASES 8

/* The socket context of a connection beyond max_connections. */
static char over_limit_mark;

struct vkv_http_server {
    struct MHD_Daemon *d;
    vkv_engine *e;
    char *api_key;
    char *alias_text;            /* --alias, its commas made NULs */
    const char *names[MAX_ALIASES]; /* the model ids served; names[0] answers requests naming none */
    size_t n_names;
    bool strict_model;
    char *cors_origin;
    bool metrics_public;
    size_t max_body;
    unsigned idle_timeout_s;
    unsigned max_connections;
    bool log;
    uint16_t port;
    int64_t created;
    atomic_bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t idle;         /* signalled when `active` drops */
    unsigned active;             /* requests between their first call and their completion */
    unsigned connections;        /* open, not counting those beyond max_connections */
    struct { int route, status; uint64_t n; } counts[MAX_COUNTS];
    size_t n_counts;
    uint64_t disconnects;        /* requests whose client left before their sequence ended */
};

/* One request. Its sequences (one a choice) are released once, by
 * on_completed; a streamed response holds a second reference to the
 * request (the reader's). */
typedef struct req {
    vkv_http_server *srv;
    struct MHD_Connection *conn;
    int route;
    char method[8];
    char url[160];
    struct timespec t0, checked; /* arrival; the last look at the client */
    struct timespec complete;    /* the request's end (its body's) */
    bool half_closed;            /* the client closed its sending side after its request */
    bool over_limit;             /* on a connection beyond max_connections */
    vkv_strbuf body;
    uint64_t body_seen;
    bool too_large;
    vkv_seq **seqs;              /* [n_seqs] a sequence a choice (OpenAI's `n`) */
    bool *seq_done;              /* [n_seqs] its last event was read */
    size_t *text_offsets;        /* [n_seqs] completions' logprobs: its next token's text offset */
    uint32_t n_seqs, n_finished; /* and how many ended with DONE */
    bool answered;               /* the response reached its end (every DONE, or an error) */
    vkv_seq_event total;         /* the DONE of choice 0, with every choice's completion tokens */
    int status;                  /* queued */
    atomic_int refs;
    /* a completion (a stream's, read by its reader) */
    vkv_oai_meta meta;
    bool logprobs;               /* the responses carry logprobs */
    char *echo_prompt;           /* echo of a text prompt: the prompt as given */
    char id[48];
    char model[256];             /* the model the responses name */
    vkv_strbuf out;              /* bytes ready for the client, from out_off */
    size_t out_off;
    bool out_end;                /* nothing more after `out` */
} req;

static void req_unref(req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    free(r->body.p);
    free(r->out.p);
    free(r->echo_prompt);
    free(r->seqs);
    free(r->seq_done);
    free(r->text_offsets);
    free(r);
}

static int64_t ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void count(vkv_http_server *s, int route, int status)
{
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    while (i < s->n_counts && (s->counts[i].route != route || s->counts[i].status != status)) i++;
    if (i == s->n_counts && i < MAX_COUNTS) {
        s->counts[i].route = route;
        s->counts[i].status = status;
        s->counts[i].n = 0;
        s->n_counts++;
    }
    if (i < s->n_counts) s->counts[i].n++;
    pthread_mutex_unlock(&s->mu);
}

/* The client left: it reset the connection, or a read would see the end.
 * TCP shows a client that closed only its sending side (shutdown(SHUT_WR))
 * the same way until something is written to it: an end seen within
 * HALF_CLOSE_MS of the request's is taken as that half-close, and from then
 * on only a reset counts (a stream's writes to a closed socket draw one). */
static bool peer_gone(req *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (r->half_closed) return false;
    char ch;
    bool ended = (p.revents & POLLRDHUP) || recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    if (ended && ms_since(&r->complete) < HALF_CLOSE_MS) r->half_closed = true;
    return ended && !r->half_closed;
}

/* Time spent waiting on the engine is not idleness: restart the connection's timer. */
static void touch(req *r)
{
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, r->srv->idle_timeout_s);
}

/* ---- responses ---- */

static enum MHD_Result queue(req *r, int status, struct MHD_Response *resp)
{
    if (!resp) return MHD_NO;
    vkv_http_server *s = r->srv;
    if (atomic_load(&s->stopping) || r->over_limit) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    /* every response, errors and streams too: a page reads none without it */
    if (s->cors_origin) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, s->cors_origin);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    }
    touch(r);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    count(r->srv, r->route, status);
    return ret;
}

static enum MHD_Result send_text(req *r, int status, const char *ctype, const char *p, size_t n)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    return queue(r, status, resp);
}

static enum MHD_Result send_json(req *r, int status, vkv_strbuf *b)
{
    enum MHD_Result ret;
    if (b->oom) {
        static const char msg[] = "{\"error\":{\"message\":\"out of memory writing the response\","
                                  "\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        ret = send_text(r, 500, "application/json", msg, sizeof msg - 1);
    } else {
        ret = send_text(r, status, "application/json", b->p ? b->p : "", b->n);
    }
    free(b->p);
    return ret;
}

static enum MHD_Result send_error(req *r, const vkv_oai_error *err, const char *allow)
{
    vkv_strbuf b = {0};
    vkv_oai_write_error(&b, err);
    if (b.oom) return send_json(r, 500, &b);
    struct MHD_Response *resp = MHD_create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_COPY);
    free(b.p);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (err->http_status == 429 || err->http_status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    return queue(r, err->http_status, resp);
}

static enum MHD_Result send_metrics(req *r)
{
    vkv_http_server *s = r->srv;
    vkv_strbuf b = {0};
    vkv_engine_metrics(s->e, &b);
    char line[512];
    vkv_strbuf_puts(&b, "# HELP vkvector_http_requests_total HTTP requests answered, by route and status.\n"
                        "# TYPE vkvector_http_requests_total counter\n");
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_counts; i++) {
        snprintf(line, sizeof line, "vkvector_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                 route_label[s->counts[i].route], s->counts[i].status, (unsigned long long)s->counts[i].n);
        vkv_strbuf_puts(&b, line);
    }
    /* this request is one of them */
    snprintf(line, sizeof line,
             "# HELP vkvector_http_requests_in_flight HTTP requests being answered.\n"
             "# TYPE vkvector_http_requests_in_flight gauge\n"
             "vkvector_http_requests_in_flight %u\n"
             "# HELP vkvector_http_client_disconnects_total Requests whose client left before the end.\n"
             "# TYPE vkvector_http_client_disconnects_total counter\n"
             "vkvector_http_client_disconnects_total %llu\n",
             s->active, (unsigned long long)s->disconnects);
    pthread_mutex_unlock(&s->mu);
    vkv_strbuf_puts(&b, line);
    enum MHD_Result ret;
    if (b.oom) {
        vkv_oai_error err;
        vkv_oai_error_set(&err, 500, "server_error", NULL, NULL, "out of memory writing the metrics");
        ret = send_error(r, &err, NULL);
    } else {
        ret = send_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.p ? b.p : "", b.n);
    }
    free(b.p);
    return ret;
}

/* ---- sequences ---- */

/* An event of choice `which` was read: its sequence's end, and the
 * response's (every choice DONE, or one ERROR). */
static void event_read(req *r, size_t which, const vkv_seq_event *ev)
{
    if (ev->kind != VKV_SEQ_DONE && ev->kind != VKV_SEQ_ERROR) return;
    r->seq_done[which] = true;
    if (ev->kind == VKV_SEQ_ERROR) r->answered = true;
    else if (++r->n_finished == r->n_seqs) r->answered = true;
}

/* The next event of any choice (*which), waiting in slices; false when the
 * client went away first (looked at every WAIT_MS, events or not). */
static bool next_event(req *r, size_t *which, vkv_seq_event *ev)
{
    for (;;) {
        bool got = vkv_seq_next_any(r->seqs, r->n_seqs, WAIT_MS, which, ev);
        if (ms_since(&r->checked) >= WAIT_MS) {
            clock_gettime(CLOCK_MONOTONIC, &r->checked);
            if (peer_gone(r)) {
                if (got) event_read(r, *which, ev);
                vkv_seq_event_clear(ev);
                return false;
            }
            touch(r);
        }
        if (got) break;
    }
    event_read(r, *which, ev);
    return true;
}

/* A choice's DONE into the response's total: choice 0's event (its
 * prompt, cached tokens and compression), every choice's completion tokens. */
static void add_done(req *r, size_t which, const vkv_seq_event *ev)
{
    const uint32_t tokens = r->total.completion_tokens + ev->completion_tokens;
    if (!which) r->total = *ev;
    r->total.completion_tokens = tokens;
}

static void random_chars(char *out, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char bytes[64];
    if (n > sizeof bytes) n = sizeof bytes;
    if (getrandom(bytes, n, 0) != (ssize_t)n) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t x = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bytes[i] = (unsigned char)x;
        }
    }
    for (size_t i = 0; i < n; i++) out[i] = abc[bytes[i] % (sizeof abc - 1)];
    out[n] = 0;
}

static uint64_t random_seed(void)
{
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) x = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    return x;
}

/* "data: " + one event's bytes into the stream's buffer. */
static void sse(vkv_strbuf *out, void (*write)(vkv_strbuf *, const vkv_oai_meta *, const vkv_seq_event *),
                const vkv_oai_meta *m, const vkv_seq_event *ev)
{
    vkv_strbuf_puts(out, "data: ");
    write(out, m, ev);
    vkv_strbuf_puts(out, "\n\n");
}

/* The engine's token text, as the writers take it. */
static const char *engine_piece(const void *e, int32_t id, bool special, size_t *len)
{
    return vkv_engine_token_piece(e, id, special, len);
}

/* The text a request's echo puts first: the prompt as given, or its ids'
 * text (without control tokens) into *out. */
static void echo_text(req *r, const vkv_seq_event *started, vkv_strbuf *out)
{
    if (r->echo_prompt) {
        vkv_strbuf_puts(out, r->echo_prompt);
        return;
    }
    for (size_t i = 0; i < started->n_tokens; i++) {
        size_t n;
        const char *p = vkv_engine_token_piece(r->srv->e, started->tokens[i].id, false, &n);
        if (p) vkv_strbuf_put(out, p, n);
    }
}

/* The logprobs of an event's tokens, at its choice's text offset, which
 * moves past them; NULL when the request asked for none. */
static const vkv_oai_logprobs *event_logprobs(req *r, size_t which, const vkv_seq_event *ev, vkv_oai_logprobs *lp)
{
    if (!r->logprobs) return NULL;
    *lp = (vkv_oai_logprobs){.tokens = ev->tokens, .n = ev->n_tokens, .text_offset = r->text_offsets[which]};
    r->text_offsets[which] = vkv_oai_logprobs_end(&r->meta, lp);
    return lp;
}

/* A text chunk of choice `which`: the event's text and its tokens'
 * logprobs; with echo, the STARTED event's prompt. */
static void text_chunk(req *r, size_t which, const vkv_seq_event *ev)
{
    vkv_oai_logprobs lp;
    vkv_strbuf echo = {0};
    const char *text = ev->text;
    size_t len = ev->len;
    if (ev->kind == VKV_SEQ_STARTED) {
        echo_text(r, ev, &echo);
        text = echo.p ? echo.p : "";
        len = echo.n;
    }
    const vkv_oai_logprobs *l = event_logprobs(r, which, ev, &lp);
    r->meta.choice = (uint32_t)which;
    vkv_strbuf_puts(&r->out, "data: ");
    vkv_oai_write_text_chunk(&r->out, &r->meta, text, len, l);
    vkv_strbuf_puts(&r->out, "\n\n");
    if (echo.oom) r->out.oom = true;
    free(echo.p);
}

static void write_error_ev(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_seq_event *ev)
{
    vkv_oai_error err;
    vkv_oai_error_from_event(&err, ev);
    vkv_oai_write_error(out, &err);
}

/* One event of choice `which` of a running stream into r->out: after the
 * last choice's finish chunk, the usage of them all and the end. */
static void stream_event(req *r, size_t which, const vkv_seq_event *ev)
{
    switch (ev->kind) {
    case VKV_SEQ_STARTED:
        if (ev->n_tokens) text_chunk(r, which, ev); /* echo */
        break;
    case VKV_SEQ_TEXT:
        if (ev->len || ev->n_tokens) text_chunk(r, which, ev);
        break;
    case VKV_SEQ_DONE:
        r->meta.choice = (uint32_t)which;
        sse(&r->out, vkv_oai_write_finish_chunk, &r->meta, ev);
        add_done(r, which, ev);
        if (r->n_finished < r->n_seqs) break;
        if (r->meta.include_usage) sse(&r->out, vkv_oai_write_usage_chunk, &r->meta, &r->total);
        vkv_strbuf_puts(&r->out, "data: [DONE]\n\n");
        r->out_end = true;
        break;
    case VKV_SEQ_ERROR:
        /* OpenAI's clients raise an error object sent as an event */
        sse(&r->out, write_error_ev, &r->meta, ev);
        r->out_end = true;
        break;
    }
}

/* MHD's content reader for a stream, on the connection's thread: blocking
 * here is what thread-per-connection allows, in WAIT_MS slices. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    req *r = cls;
    while (r->out_off == r->out.n) {
        r->out.n = r->out_off = 0;
        if (r->out_end) return MHD_CONTENT_READER_END_OF_STREAM;
        vkv_seq_event ev = {0};
        size_t which;
        if (!next_event(r, &which, &ev)) return MHD_CONTENT_READER_END_WITH_ERROR;
        stream_event(r, which, &ev);
        vkv_seq_event_clear(&ev);
        if (r->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = r->out.n - r->out_off;
    if (n > max) n = max;
    memcpy(buf, r->out.p + r->out_off, n);
    r->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) { req_unref(cls); }

/* A body over the cap was read and dropped: 413. */
static enum MHD_Result send_too_large(req *r)
{
    vkv_oai_error err;
    vkv_oai_error_set(&err, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is larger than %zu bytes", r->srv->max_body);
    return send_error(r, &err, NULL);
}

/* ---- CORS ---- */

/* The headers a preflight asks leave for (Access-Control-Request-Headers),
 * appended to `allow` when every name is a token and they fit; else none
 * are (the browser then refuses the request, as it should). */
static void add_asked_headers(char *allow, size_t cap, const char *asked)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    size_t n = strlen(allow), base = n;
    for (const char *p = asked;;) {
        p += strspn(p, " \t,");
        if (!*p) return;
        size_t len = strspn(p, tchar);
        const char *after = p + len + strspn(p + len, " \t");
        if (!len || (*after && *after != ',') || n + 2 + len >= cap) {
            allow[base] = '\0';
            return;
        }
        bool ours = (len == 13 && !strncasecmp(p, "authorization", len)) ||
                    (len == 12 && !strncasecmp(p, "content-type", len));
        if (!ours) {
            memcpy(allow + n, ", ", 2);
            memcpy(allow + n + 2, p, len);
            n += 2 + len;
            allow[n] = '\0';
        }
        p = after;
    }
}

/* A browser asks whether a page of another origin may call: yes, without
 * the key (a preflight never carries one); queue() adds the origin. */
static enum MHD_Result preflight(req *r)
{
    char allow[512] = "Authorization, Content-Type";
    const char *asked =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCESS_CONTROL_REQUEST_HEADERS);
    if (asked) add_asked_headers(allow, sizeof allow, asked);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS, allow);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, PREFLIGHT_MAX_AGE);
    return queue(r, MHD_HTTP_NO_CONTENT, resp);
}

bool vkv_http_origin_ok(const char *origin)
{
    if (!strcmp(origin, "*")) return true;
    if (strlen(origin) > 255 || !isalpha((unsigned char)*origin)) return false;
    const char *p = origin;
    while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.') p++;
    if (strncmp(p, "://", 3)) return false;
    p += 3;
    const char *host = p;
    if (*p == '[') { /* an IPv6 address */
        p += 1 + strspn(p + 1, "0123456789abcdefABCDEF:.");
        if (*p++ != ']' || p - host < 4) return false;
    } else {
        while (isalnum((unsigned char)*p) || *p == '-' || *p == '.') p++;
        if (p == host) return false;
    }
    if (*p == ':') {
        size_t digits = strspn(p + 1, "0123456789");
        if (!digits || digits > 5) return false;
        p += 1 + digits;
    }
    return *p == '\0';
}

/* ---- llama-server's utility routes ---- */

/* Tokenizing runs here, on the connection's thread: the engine's tokenizer
 * is read-only, so the scheduler's steps go on meanwhile. */
static enum MHD_Result tokenize(req *r)
{
    vkv_engine *e = r->srv->e;
    vkv_oai_error err;
    if (r->too_large) return send_too_large(r);
    vkv_oai_tokenize q;
    if (!vkv_oai_parse_tokenize(r->body.p ? r->body.p : "", r->body.n, &q, &err)) return send_error(r, &err, NULL);
    int32_t *ids = NULL;
    size_t n = 0;
    vkv_status st = vkv_engine_tokenize(e, q.content, q.len, q.add_special, q.parse_special, &ids, &n);
    free(q.content);
    if (st) {
        vkv_oai_error_set(&err, st == VKV_ERR_OOM ? 500 : 400, NULL, st == VKV_ERR_OOM ? NULL : "content", NULL,
                          "cannot tokenize 'content': %s", vkv_last_error());
        vkv_clear_error();
        return send_error(r, &err, NULL);
    }
    /* no tokens: {"tokens": []} either way */
    vkv_oai_piece *pieces = NULL;
    vkv_strbuf b = {0};
    if (q.with_pieces && n && !(pieces = malloc(n * sizeof *pieces))) {
        b.oom = true;
    } else {
        for (size_t i = 0; pieces && i < n; i++) {
            pieces[i].p = vkv_engine_token_piece(e, ids[i], true, &pieces[i].n);
            if (!pieces[i].p) pieces[i] = (vkv_oai_piece){"", 0};
        }
        vkv_oai_write_tokens(&b, ids, n, pieces);
    }
    free(pieces);
    free(ids);
    return send_json(r, 200, &b);
}

static enum MHD_Result detokenize(req *r)
{
    vkv_engine *e = r->srv->e;
    vkv_oai_error err;
    if (r->too_large) return send_too_large(r);
    vkv_engine_props props;
    vkv_engine_get_props(e, &props);
    int32_t *ids;
    size_t n;
    if (!vkv_oai_parse_detokenize(r->body.p ? r->body.p : "", r->body.n, props.n_vocab, &ids, &n, &err))
        return send_error(r, &err, NULL);
    /* every id is in the vocabulary: each has a piece */
    vkv_strbuf text = {0}, b = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = vkv_engine_token_piece(e, ids[i], true, &len);
        if (p) vkv_strbuf_put(&text, p, len);
    }
    free(ids);
    if (text.oom) b.oom = true;
    else vkv_oai_write_content(&b, text.p, text.n);
    free(text.p);
    return send_json(r, 200, &b);
}

static bool served(const vkv_http_server *s, const char *name)
{
    for (size_t i = 0; i < s->n_names; i++)
        if (!strcmp(s->names[i], name)) return true;
    return false;
}

static enum MHD_Result props(req *r)
{
    vkv_engine_props p;
    vkv_engine_get_props(r->srv->e, &p);
    p.model_id = r->srv->names[0];
    vkv_strbuf b = {0};
    vkv_oai_write_props(&b, &p);
    return send_json(r, 200, &b);
}

/* ---- the generation routes ---- */

/* Completions' text offsets (docs/SERVE.md, "Log-probabilities"): with
 * echo the text starts with the prompt, at 0 (a text prompt is echoed as
 * given: kept here, the engine takes the request's copy); without, the first
 * generated token starts at the prompt's length in bytes. false: out of
 * memory. */
static bool prompt_text_offset(req *r, const vkv_oai_request *q)
{
    const vkv_gen_request *g = &q->gen;
    size_t at = 0;
    if (g->echo) return g->kind != VKV_GEN_TEXT || (r->echo_prompt = strdup(g->prompt ? g->prompt : ""));
    if (g->kind == VKV_GEN_TEXT) at = g->prompt ? strlen(g->prompt) : 0;
    for (size_t i = 0; g->kind == VKV_GEN_IDS && i < g->n_prompt_ids; i++) {
        size_t n = 0;
        vkv_engine_token_piece(r->srv->e, g->prompt_ids[i], false, &n);
        at += n;
    }
    for (uint32_t i = 0; i < r->n_seqs; i++) r->text_offsets[i] = at;
    return true;
}

static enum MHD_Result generate(req *r)
{
    vkv_http_server *s = r->srv;
    vkv_oai_error err;
    if (r->too_large) return send_too_large(r);
    vkv_oai_request q;
    vkv_oai_route route = r->route == R_CHAT ? VKV_OAI_CHAT : VKV_OAI_COMPLETIONS;
    vkv_engine_props props;
    vkv_engine_get_props(s->e, &props);
    const vkv_oai_parse_opts po = {.sampling = &props.sampling, .n_ctx = props.n_ctx};
    if (!vkv_oai_parse_with(route, r->body.p ? r->body.p : "", r->body.n, &po, &q, &err))
        return send_error(r, &err, NULL);
    free(r->body.p);
    r->body = (vkv_strbuf){0};
    /* One model is served: any name is taken, as llama-server takes it, and
     * answered under that name; --strict-model refuses names not listed. */
    if (q.model[0] && s->strict_model && !served(s, q.model)) {
        vkv_oai_error_set(&err, 404, "invalid_request_error", "model", "model_not_found",
                          "The model '%s' does not exist (this server serves '%s')", q.model, s->names[0]);
        vkv_gen_request_free(&q.gen);
        return send_error(r, &err, NULL);
    }
    snprintf(r->model, sizeof r->model, "%s", q.model[0] ? q.model : s->names[0]);
    const char *model = r->model;
    if (!q.has_seed) q.gen.sampling.seed = random_seed();
    bool stream = q.gen.stream;

    snprintf(r->id, sizeof r->id, "%s", route == VKV_OAI_CHAT ? "chatcmpl-" : "cmpl-");
    size_t idn = strlen(r->id);
    random_chars(r->id + idn, 24);
    r->meta = (vkv_oai_meta){.route = route, .id = r->id, .created = (int64_t)time(NULL), .model = model,
                             .include_usage = q.include_usage, .piece = engine_piece, .piece_ctx = s->e};
    r->logprobs = q.gen.logprobs;
    r->n_seqs = q.n ? q.n : 1;
    if (!(r->seqs = calloc(r->n_seqs, sizeof *r->seqs)) || !(r->seq_done = calloc(r->n_seqs, sizeof *r->seq_done)) ||
        !(r->text_offsets = calloc(r->n_seqs, sizeof *r->text_offsets)) ||
        (route == VKV_OAI_COMPLETIONS && !prompt_text_offset(r, &q))) {
        vkv_gen_request_free(&q.gen);
        r->n_seqs = 0;
        vkv_oai_error_set(&err, 500, "server_error", NULL, NULL, "out of host memory");
        return send_error(r, &err, NULL);
    }

    vkv_engine_submit_n(s->e, &q.gen, r->n_seqs, r->seqs);
    if (!r->seqs[0]) { /* the engine had no memory for the sequences */
        r->n_seqs = 0;
        vkv_oai_error_set(&err, 500, "server_error", NULL, NULL, "out of host memory queueing the request");
        return send_error(r, &err, NULL);
    }
    vkv_seq_event ev = {0};
    size_t which;
    if (!next_event(r, &which, &ev)) return MHD_NO; /* the client left: on_completed cancels */
    if (ev.kind == VKV_SEQ_ERROR) {
        vkv_oai_error_from_event(&err, &ev);
        return send_error(r, &err, NULL);
    }
    if (stream) {
        /* admitted: the headers go now (a chat's first chunk a choice), the chunks as the events come */
        for (uint32_t i = 0; i < r->n_seqs; i++) {
            r->meta.choice = i;
            vkv_strbuf first = {0};
            vkv_oai_write_first_chunk(&first, &r->meta);
            if (first.n) {
                vkv_strbuf_puts(&r->out, "data: ");
                vkv_strbuf_put(&r->out, first.p, first.n);
                vkv_strbuf_puts(&r->out, "\n\n");
            }
            if (first.oom) r->out.oom = true;
            free(first.p);
        }
        stream_event(r, which, &ev);
        vkv_seq_event_clear(&ev);
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, r,
                                                                      stream_free);
        if (!resp) return MHD_NO;
        atomic_fetch_add(&r->refs, 1);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        return queue(r, 200, resp);
    }
    /* each choice's whole text and tokens, then the response */
    const uint32_t n = r->n_seqs;
    vkv_strbuf *text = calloc(n, sizeof *text), *tokens = calloc(n, sizeof *tokens); /* tokens: vkv_token_logprob's bytes */
    vkv_seq_event *done = calloc(n, sizeof *done);
    vkv_oai_logprobs *lp = calloc(n, sizeof *lp);
    vkv_oai_choice *choices = calloc(n, sizeof *choices);
    bool oom = !text || !tokens || !done || !lp || !choices, left = false;
    for (;;) {
        if (!oom) {
            if (ev.kind == VKV_SEQ_STARTED && ev.n_tokens) echo_text(r, &ev, &text[which]);
            if (ev.kind == VKV_SEQ_TEXT) vkv_strbuf_put(&text[which], ev.text, ev.len);
            if (r->logprobs && ev.n_tokens)
                vkv_strbuf_put(&tokens[which], (const char *)ev.tokens, ev.n_tokens * sizeof *ev.tokens);
            if (ev.kind == VKV_SEQ_DONE) {
                done[which] = ev;
                add_done(r, which, &ev);
            }
        }
        if (ev.kind == VKV_SEQ_ERROR || r->answered) break;
        vkv_seq_event_clear(&ev);
        if (!next_event(r, &which, &ev)) {
            left = true;
            break;
        }
    }
    vkv_seq_event_clear(&ev);
    vkv_strbuf b = {0};
    if (!left && ev.kind != VKV_SEQ_ERROR) {
        for (uint32_t i = 0; !oom && i < n; i++) {
            oom = text[i].oom || tokens[i].oom;
            lp[i] = (vkv_oai_logprobs){.tokens = (const vkv_token_logprob *)(const void *)tokens[i].p,
                                       .n = tokens[i].n / sizeof *lp[i].tokens, .text_offset = r->text_offsets[i]};
            choices[i] = (vkv_oai_choice){text[i].p ? text[i].p : "", text[i].n, r->logprobs ? &lp[i] : NULL, &done[i]};
        }
        if (oom) b.oom = true;
        else vkv_oai_write_response_n(&b, &r->meta, choices, n, &r->total);
    }
    for (uint32_t i = 0; text && tokens && i < n; i++) {
        free(text[i].p);
        free(tokens[i].p);
    }
    free(text);
    free(tokens);
    free(done);
    free(lp);
    free(choices);
    if (left) return MHD_NO;
    if (ev.kind == VKV_SEQ_ERROR) {
        vkv_oai_error_from_event(&err, &ev);
        return send_error(r, &err, NULL);
    }
    return send_json(r, 200, &b);
}

/* ---- MHD's callbacks ---- */

static int route_of(const char *url)
{
    if (!strcmp(url, "/v1/chat/completions")) return R_CHAT;
    if (!strcmp(url, "/v1/completions")) return R_COMPLETIONS;
    if (!strcmp(url, "/v1/models")) return R_MODELS;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) return R_MODEL;
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strcmp(url, "/tokenize")) return R_TOKENIZE;
    if (!strcmp(url, "/detokenize")) return R_DETOKENIZE;
    if (!strcmp(url, "/props")) return R_PROPS;
    return R_OTHER;
}

static bool authorized(req *r)
{
    const char *key = r->srv->api_key;
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    /* in time independent of where the strings differ */
    size_t hn = strlen(h), kn = strlen(key);
    unsigned char diff = hn != kn;
    for (size_t i = 0; i < kn; i++) diff |= (unsigned char)(key[i] ^ (i < hn ? h[i] : 0));
    return !diff;
}

static enum MHD_Result respond(req *r)
{
    vkv_http_server *s = r->srv;
    vkv_oai_error err;
    if (atomic_load(&s->stopping)) {
        vkv_oai_error_set(&err, 503, "server_error", NULL, NULL, "the server is shutting down");
        return send_error(r, &err, NULL);
    }
    if (r->over_limit) {
        vkv_oai_error_set(&err, 503, "server_error", NULL, NULL,
                          "too many connections (this server serves %u at once): retry later", s->max_connections);
        return send_error(r, &err, NULL);
    }
    bool post = !strcmp(r->method, "POST"), get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    if (r->route == R_OTHER) {
        vkv_oai_error_set(&err, 404, "invalid_request_error", NULL, NULL, "Invalid URL (%s %s)", r->method, r->url);
        return send_error(r, &err, NULL);
    }
    if (s->cors_origin && !strcmp(r->method, MHD_HTTP_METHOD_OPTIONS)) return preflight(r);
    bool wants_post = r->route == R_CHAT || r->route == R_COMPLETIONS || r->route == R_TOKENIZE ||
                      r->route == R_DETOKENIZE;
    if (wants_post ? !post : !get) {
        vkv_oai_error_set(&err, 405, "invalid_request_error", NULL, NULL, "%s %s: method not allowed (use %s)",
                          r->method, r->url, wants_post ? "POST" : "GET");
        return send_error(r, &err, wants_post ? "POST" : "GET, HEAD");
    }
    if (r->route == R_HEALTH) {
        static const char ok[] = "{\"status\":\"ok\"}";
        return send_text(r, 200, "application/json", ok, sizeof ok - 1);
    }
    bool keyless = r->route == R_METRICS && s->metrics_public;
    if (!keyless && !authorized(r)) {
        bool given = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        vkv_oai_error_set(&err, 401, "invalid_request_error", NULL, "invalid_api_key",
                          given ? "Incorrect API key provided" :
                                  "You didn't provide an API key (Authorization: Bearer KEY)");
        return send_error(r, &err, NULL);
    }
    if (r->route == R_METRICS) return send_metrics(r);
    if (r->route == R_TOKENIZE) return tokenize(r);
    if (r->route == R_DETOKENIZE) return detokenize(r);
    if (r->route == R_PROPS) return props(r);
    vkv_strbuf b = {0};
    if (r->route == R_MODELS) {
        vkv_oai_write_models(&b, s->names, s->n_names, s->created);
        return send_json(r, 200, &b);
    }
    if (r->route == R_MODEL) {
        const char *id = r->url + strlen("/v1/models/");
        if (!served(s, id)) {
            vkv_oai_error_set(&err, 404, "invalid_request_error", "model", "model_not_found",
                              "The model '%s' does not exist", id);
            return send_error(r, &err, NULL);
        }
        vkv_oai_write_model(&b, id, s->created);
        return send_json(r, 200, &b);
    }
    return generate(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    vkv_http_server *s = cls;
    req *r = *con_cls;
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        atomic_init(&r->refs, 1);
        r->srv = s;
        r->conn = c;
        r->route = route_of(url);
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->url, sizeof r->url, "%s", url);
        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        r->checked = r->t0;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->over_limit = ci && ci->socket_context == &over_limit_mark;
        pthread_mutex_lock(&s->mu);
        s->active++;
        pthread_mutex_unlock(&s->mu);
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            unsigned long long n = strtoull(cl, NULL, 10);
            r->too_large = n > s->max_body;
            if (n > DISCARD_LIMIT) {
                vkv_oai_error err;
                vkv_oai_error_set(&err, 413, "invalid_request_error", NULL, "request_too_large",
                                  "the request body is larger than %zu bytes", s->max_body);
                return send_error(r, &err, NULL);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        r->body_seen += n;
        if (!r->too_large && r->body.n + n > s->max_body) {
            r->too_large = true;
            free(r->body.p);
            r->body = (vkv_strbuf){0};
        }
        if (!r->too_large && !r->over_limit) vkv_strbuf_put(&r->body, upload_data, n);
        *upload_data_size = 0;
        /* a body that never ends is not drained forever */
        return r->body_seen > DISCARD_LIMIT ? MHD_NO : MHD_YES;
    }
    if (r->status) return MHD_YES; /* answered already */
    clock_gettime(CLOCK_MONOTONIC, &r->complete);
    if (r->body.oom) {
        vkv_oai_error err;
        vkv_oai_error_set(&err, 500, "server_error", NULL, NULL, "out of memory reading the request");
        return send_error(r, &err, NULL);
    }
    return respond(r);
}

/* Counts the connections served; one beyond max_connections is marked, to
 * be answered 503 and closed. MHD calls this on its listening thread, before
 * the connection's own thread starts. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    vkv_http_server *s = cls;
    pthread_mutex_lock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        if (s->connections < s->max_connections) s->connections++;
        else *socket_context = &over_limit_mark;
    } else if (*socket_context != &over_limit_mark) {
        s->connections--;
    }
    pthread_mutex_unlock(&s->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED && *socket_context == &over_limit_mark)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                                  s->idle_timeout_s < SPARE_TIMEOUT_S ? s->idle_timeout_s : SPARE_TIMEOUT_S);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    vkv_http_server *s = cls;
    req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    /* the client left before the response's end: its sequences are cancelled (and any a refusal left unread) */
    bool left = r->n_seqs && !r->answered;
    if (left) {
        pthread_mutex_lock(&s->mu);
        s->disconnects++;
        pthread_mutex_unlock(&s->mu);
    }
    for (uint32_t i = 0; i < r->n_seqs; i++) {
        if (!r->seq_done[i]) vkv_seq_cancel(r->seqs[i]);
        vkv_seq_release(r->seqs[i]);
    }
    r->n_seqs = 0;
    if (s->log)
        fprintf(stderr, "serve: %s %s %d %lldms%s\n", r->method, r->url, r->status, (long long)ms_since(&r->t0),
                left ? " (client left)" : toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed)");
    pthread_mutex_lock(&s->mu);
    s->active--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    req_unref(r);
}

/* ---- start and stop ---- */

/* --alias NAME[,NAME...]: each name non-empty, printable, at most 255 bytes. */
static vkv_status set_aliases(vkv_http_server *s, const char *list)
{
    if (!(s->alias_text = strdup(list))) return vkv_error(VKV_ERR_OOM, "serve: out of memory");
    for (char *name = s->alias_text, *next; name; name = next) {
        next = strchr(name, ',');
        if (next) *next++ = '\0';
        size_t n = strlen(name);
        bool printable = n > 0 && n < 256;
        for (size_t i = 0; i < n && printable; i++) printable = (unsigned char)name[i] > 0x20 && name[i] != 0x7f;
        if (!printable)
            return vkv_error(VKV_ERR_ARG, "--alias '%s': each name must be 1 to 255 bytes without spaces or "
                             "control characters", list);
        if (s->n_names == MAX_ALIASES) return vkv_error(VKV_ERR_ARG, "--alias: at most %d names", MAX_ALIASES);
        s->names[s->n_names++] = name;
    }
    return VKV_OK;
}

/* Each connection holds a descriptor: the soft limit (often 1024) is raised
 * toward the hard one when they need more, else MHD would stop accepting
 * short of them, leaving clients waiting unanswered. */
static void fit_descriptor_limit(unsigned connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)connections + 256; /* and the model's files, the driver's, stdio */
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want) return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < want)
        fprintf(stderr, "serve: warning: %u connections want about %llu file descriptors; the limit (ulimit -n) "
                "allows fewer\n", connections, (unsigned long long)want);
}

vkv_status vkv_http_start(const vkv_http_params *p, vkv_engine *e, vkv_http_server **out)
{
    *out = NULL;
    if (p->max_connections > VKV_HTTP_MAX_CONNECTIONS)
        return vkv_error(VKV_ERR_ARG, "serve: at most %u connections at once, not %u", VKV_HTTP_MAX_CONNECTIONS,
                         p->max_connections);
    if (p->cors_origin && !vkv_http_origin_ok(p->cors_origin))
        return vkv_error(VKV_ERR_ARG, "--cors wants %s, got '%s'", VKV_HTTP_ORIGIN_FORM, p->cors_origin);
    const char *host = p->host && *p->host ? p->host : "127.0.0.1";
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)p->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *ai;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai) return vkv_error(VKV_ERR_ARG, "serve: cannot listen on %s: %s", host, gai_strerror(gai));

    vkv_http_server *s = calloc(1, sizeof *s);
    if (!s) {
        freeaddrinfo(ai);
        return vkv_error(VKV_ERR_OOM, "serve: out of memory");
    }
    s->e = e;
    s->max_body = p->max_body ? p->max_body : (size_t)4 << 20;
    s->idle_timeout_s = p->idle_timeout_s ? p->idle_timeout_s : 60;
    s->max_connections = p->max_connections ? p->max_connections : 256;
    s->metrics_public = p->metrics_public;
    s->log = p->log;
    s->created = (int64_t)time(NULL);
    atomic_init(&s->stopping, false);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    if ((p->api_key && *p->api_key && !(s->api_key = strdup(p->api_key))) ||
        (p->cors_origin && !(s->cors_origin = strdup(p->cors_origin)))) {
        freeaddrinfo(ai);
        vkv_http_stop(s);
        return vkv_error(VKV_ERR_OOM, "serve: out of memory");
    }
    s->strict_model = p->strict_model;
    vkv_status st = VKV_OK;
    if (p->alias) st = set_aliases(s, p->alias);
    else s->names[s->n_names++] = vkv_engine_model_id(e);
    if (st) {
        freeaddrinfo(ai);
        vkv_http_stop(s);
        return st;
    }
    /* poll, not select: descriptors past FD_SETSIZE (1024) are served too */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (p->log) flags |= MHD_USE_ERROR_LOG;
    /* MHD closes connections past its own limit unanswered: it is set higher,
     * and on_connection marks those past ours, which get 503 */
    unsigned accepted = s->max_connections + SPARE_CONNECTIONS;
    fit_descriptor_limit(accepted);
    s->d = MHD_start_daemon(flags, p->port, NULL, NULL, on_request, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, s->idle_timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, accepted,
                            MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        vkv_http_stop(s);
        return vkv_error(VKV_ERR_IO, "serve: cannot listen on %s port %u (in use, or not an address of this host?)",
                         host, (unsigned)p->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    *out = s;
    return VKV_OK;
}

uint16_t vkv_http_port(const vkv_http_server *s) { return s->port; }

void vkv_http_stop(vkv_http_server *s)
{
    if (!s) return;
    if (s->d) {
        atomic_store(&s->stopping, true);
        MHD_socket fd = MHD_quiesce_daemon(s->d);
        if (fd != MHD_INVALID_SOCKET) close(fd);
        /* running requests end (each waits on the engine in bounded slices) */
        pthread_mutex_lock(&s->mu);
        while (s->active) pthread_cond_wait(&s->idle, &s->mu);
        pthread_mutex_unlock(&s->mu);
        MHD_stop_daemon(s->d);
    }
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s->api_key);
    free(s->cors_origin);
    free(s->alias_text);
    free(s);
}
