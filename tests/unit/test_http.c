/* The HTTP front (src/serve/http.c) in front of the fake engine
 * (fake_engine.c), over plain sockets: routes and status codes, bodies over
 * the cap (announced or chunked), the API key (/metrics included), CORS,
 * 429 with Retry-After, 503 beyond the connection limit, streams, a client
 * that leaves (the engine sees a cancel, every sequence is released once)
 * or only half-closes (it is served), and a stop while a stream runs (it
 * ends with [DONE]). Runs under ASan/UBSan with the other unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fake_engine.h"
#include "serve/http.h"

typedef struct server {
    vkv_engine *e;
    vkv_http_server *s;
    uint16_t port;
} server;

static unsigned idle_timeout_s; /* 0: the front's default */

static server start_with(const vkv_http_params *hp, unsigned max_in_flight, unsigned delay_ms)
{
    server sv;
    fake_engine_params fp = {.model_id = "fake-model", .max_in_flight = max_in_flight, .delay_ms = delay_ms};
    sv.e = fake_engine_create(&fp);
    assert_non_null(sv.e);
    if (vkv_http_start(hp, sv.e, &sv.s)) fail_msg("%s", vkv_last_error());
    sv.port = vkv_http_port(sv.s);
    assert_true(sv.port > 0);
    return sv;
}

static server start(const char *api_key, size_t max_body, unsigned max_in_flight, unsigned delay_ms)
{
    vkv_http_params hp = {.api_key = api_key, .max_body = max_body, .idle_timeout_s = idle_timeout_s};
    return start_with(&hp, max_in_flight, delay_ms);
}

static void stop(server *sv)
{
    vkv_http_stop(sv->s);
    assert_int_equal(fake_engine_live(sv->e), 0); /* every sequence released */
    vkv_engine_free(sv->e);
}

static int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return; /* the server may close early */
        p += w;
        n -= (size_t)w;
    }
}

/* Reads until the server closes (requests say Connection: close). */
static char *read_all(int fd)
{
    size_t n = 0, cap = 4096;
    char *p = malloc(cap);
    assert_non_null(p);
    for (;;) {
        if (n + 1024 > cap) {
            cap *= 2;
            p = realloc(p, cap);
            assert_non_null(p);
        }
        ssize_t r = recv(fd, p + n, cap - n - 1, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    p[n] = 0;
    return p;
}

static int status_of(const char *resp)
{
    int st = 0;
    if (sscanf(resp, "HTTP/1.1 %d", &st) != 1) fail_msg("no status line: '%.200s'", resp);
    return st;
}

/* One request (a body, with its Content-Length), the whole response back;
 * half_close: the client's sending side is shut once the request is sent. */
static char *request_then(uint16_t port, const char *method, const char *path, const char *headers, const char *body,
                          bool half_close)
{
    int fd = dial(port);
    char head[1024];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s", method, path,
                     headers ? headers : "");
    if (body) n += snprintf(head + n, sizeof head - (size_t)n, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                            strlen(body));
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    send_all(fd, head, (size_t)n);
    if (body) send_all(fd, body, strlen(body));
    if (half_close) shutdown(fd, SHUT_WR);
    char *r = read_all(fd);
    close(fd);
    return r;
}

static char *request(uint16_t port, const char *method, const char *path, const char *headers, const char *body)
{
    return request_then(port, method, path, headers, body, false);
}

static void expect(const char *resp, int status, const char *has)
{
    if (status_of(resp) != status || (has && !strstr(resp, has)))
        fail_msg("wanted %d with '%s', got: %.600s", status, has ? has : "", resp);
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

static const char chat[] = "{\"model\":\"fake-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}";

/* vkv_http_start refuses p, its message naming `option`. */
static void refused_at_start(const vkv_http_params *p, const char *option, const char *value)
{
    fake_engine_params fp = {.model_id = "fake-model"};
    vkv_engine *e = fake_engine_create(&fp);
    vkv_http_server *s = NULL;
    if (!vkv_http_start(p, e, &s)) fail_msg("%s '%s' accepted", option, value);
    if (!strstr(vkv_last_error(), option)) fail_msg("%s '%s': the error does not name it: %s", option, value,
                                                    vkv_last_error());
    vkv_engine_free(e);
}

/* --alias lists the ids; --strict-model refuses the others. */
static void aliases_and_strict_model(void **state)
{
    (void)state;
    vkv_http_params hp = {.alias = "llama-3,gpt-4o", .strict_model = true, .idle_timeout_s = idle_timeout_s};
    server sv = start_with(&hp, 4, 0);
    char *r;
    expect(r = request(sv.port, "GET", "/v1/models", NULL, NULL), 200, "\"id\":\"llama-3\"");
    assert_non_null(strstr(r, "\"id\":\"gpt-4o\""));
    assert_null(strstr(r, "fake-model"));
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models/gpt-4o", NULL, NULL), 200, "\"id\":\"gpt-4o\"");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models/fake-model", NULL, NULL), 404, "model_not_found");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL,
                       "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"),
           200, "\"model\":\"gpt-4o\"");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"a b\"}"), 200, "\"model\":\"llama-3\"");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL,
                       "{\"model\":\"other\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"),
           404, "this server serves 'llama-3'");
    free(r);
    expect(r = request(sv.port, "GET", "/props", NULL, NULL), 200, "\"model_alias\":\"llama-3\"");
    free(r);
    stop(&sv);

    /* names that cannot be ids are refused at start */
    const char *bad[] = {"a,,b", "", "with space", "a,b,c,d,e,f,g,h,i"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        refused_at_start(&(vkv_http_params){.alias = bad[i]}, "--alias", bad[i]);
}

static void routes_and_statuses(void **state)
{
    (void)state;
    server sv = start(NULL, 0, 4, 0);
    char *r;
    expect(r = request(sv.port, "GET", "/health", NULL, NULL), 200, "{\"status\":\"ok\"}");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models", NULL, NULL), 200, "\"id\":\"fake-model\"");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models/fake-model", NULL, NULL), 200, "\"object\":\"model\"");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models/other", NULL, NULL), 404, "model_not_found");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, chat), 200, "\"content\":\"hello there\"");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"a b c\",\"max_tokens\":2}"), 200,
           "\"text\":\"a b\"");
    assert_non_null(strstr(r, "\"finish_reason\":\"length\""));
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, "{\"messages\":"), 400, "\"param\":null");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[],\"model\":\"fake-model\"}"), 400,
           "\"param\":\"messages\"");
    free(r);
    /* one model served: any name is taken and answered under that name, as llama-server does */
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL,
                       "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"),
           200, "\"model\":\"gpt-4o\"");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/nothing", NULL, NULL), 404, "Invalid URL (GET /v1/nothing)");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/chat/completions", NULL, NULL), 405, "Allow: POST");
    free(r);
    expect(r = request(sv.port, "DELETE", "/health", NULL, NULL), 405, NULL);
    free(r);
    /* errors the engine reports pass through with their status */
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"FAKE_CONTEXT\"}"), 400,
           "\"code\":\"context_length_exceeded\"");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"FAKE_ERROR_500\",\"stream\":true}"), 500,
           "\"type\":\"server_error\"");
    assert_null(strstr(r, "text/event-stream"));
    free(r);
    expect(r = request(sv.port, "GET", "/metrics", NULL, NULL), 200,
           "vkvector_http_requests_total{route=\"/v1/models/{id}\",status=\"404\"} 1");
    assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
    assert_non_null(strstr(r, "fake_engine_submitted_total"));
    free(r);
    stop(&sv);
}

static void body_over_the_cap(void **state)
{
    (void)state;
    server sv = start(NULL, 1024, 4, 0);
    char *big = malloc(4096);
    assert_non_null(big);
    memset(big, ' ', 4095);
    memcpy(big, "{\"prompt\":\"", 11);
    memcpy(big + 4093, "\"}", 2);
    big[4095] = 0;
    char *r;
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, big), 413, "\"code\":\"request_too_large\"");
    free(r);
    /* chunked: no length announced, the cap found while reading */
    int fd = dial(sv.port);
    const char head[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, head, sizeof head - 1);
    for (int i = 0; i < 8; i++) {
        char chunk[600];
        int n = snprintf(chunk, sizeof chunk, "200\r\n%.*s\r\n", 512, big + 11);
        send_all(fd, chunk, (size_t)n);
    }
    send_all(fd, "0\r\n\r\n", 5);
    r = read_all(fd);
    close(fd);
    expect(r, 413, "request_too_large");
    free(r);
    free(big);
    stop(&sv);
}

/* With a key, the /v1/ routes and /metrics want it (/metrics not with
 * metrics_public); /health never. */
static void api_key(void **state)
{
    (void)state;
    server sv = start("sekrit", 0, 4, 0);
    char *r;
    const char *method[] = {"POST", "GET"}, *path[] = {"/v1/chat/completions", "/metrics"}, *body[] = {chat, NULL};
    for (int i = 0; i < 2; i++) {
        expect(r = request(sv.port, method[i], path[i], NULL, body[i]), 401, "\"code\":\"invalid_api_key\"");
        assert_null(strstr(r, "vkvector_http_requests_total"));
        free(r);
        expect(r = request(sv.port, method[i], path[i], "Authorization: Bearer wrong\r\n", body[i]), 401,
               "Incorrect API key");
        free(r);
    }
    expect(r = request(sv.port, "GET", "/v1/models", "Authorization: Bearer sekrit\r\n", NULL), 200, "fake-model");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", "Authorization: Bearer sekrit\r\n", chat), 200,
           "hello there");
    free(r);
    expect(r = request(sv.port, "GET", "/metrics", "Authorization: Bearer sekrit\r\n", NULL), 200,
           "vkvector_http_requests_total{route=\"/metrics\",status=\"401\"} 2");
    free(r);
    expect(r = request(sv.port, "GET", "/health", NULL, NULL), 200, NULL);
    free(r);
    stop(&sv);

    vkv_http_params hp = {.api_key = "sekrit", .metrics_public = true, .idle_timeout_s = idle_timeout_s};
    sv = start_with(&hp, 4, 0);
    expect(r = request(sv.port, "GET", "/metrics", NULL, NULL), 200, "vkvector_http_requests_in_flight 1");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models", NULL, NULL), 401, "invalid_api_key");
    free(r);
    stop(&sv);
}

static const char preflight_asks[] = "Origin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n"
                                     "Access-Control-Request-Headers: authorization,content-type,x-stainless-os\r\n";

/* Without cors_origin: OPTIONS is a method no route takes, and no response
 * says anything of CORS. */
static void no_cors_by_default(void **state)
{
    (void)state;
    server sv = start(NULL, 0, 4, 0);
    char *r;
    expect(r = request(sv.port, "OPTIONS", "/v1/chat/completions", preflight_asks, NULL), 405, "Allow: POST\r\n");
    assert_null(strstr(r, "Access-Control-"));
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", "Origin: http://localhost:3000\r\n", chat), 200, NULL);
    assert_null(strstr(r, "Access-Control-"));
    free(r);
    stop(&sv);
}

/* A preflight on every known route is answered 204 without the key; every
 * response, errors and streams too, allows the origin. */
static void cors_preflight_and_responses(void **state)
{
    (void)state;
    vkv_http_params hp = {.api_key = "sekrit", .cors_origin = "http://localhost:3000", .idle_timeout_s = idle_timeout_s};
    server sv = start_with(&hp, 4, 0);
    static const char allow_origin[] = "Access-Control-Allow-Origin: http://localhost:3000\r\n";
    const char *routes[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/fake-model", "/health",
                            "/metrics", "/tokenize", "/detokenize", "/props"};
    char *r;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        expect(r = request(sv.port, "OPTIONS", routes[i], preflight_asks, NULL), 204, allow_origin);
        const char *want[] = {"Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n",
                              "Access-Control-Allow-Headers: Authorization, Content-Type, x-stainless-os\r\n",
                              "Access-Control-Max-Age: 86400\r\n", "Vary: Origin\r\n"};
        for (size_t j = 0; j < sizeof want / sizeof *want; j++)
            if (!strstr(r, want[j])) fail_msg("OPTIONS %s: no '%s' in %s", routes[i], want[j], r);
        free(r);
    }
    /* a list of header names that is not one: only ours are allowed */
    expect(r = request(sv.port, "OPTIONS", "/v1/models", "Access-Control-Request-Headers: x-ok, not a name\r\n", NULL),
           204, "Access-Control-Allow-Headers: Authorization, Content-Type\r\n");
    free(r);
    expect(r = request(sv.port, "OPTIONS", "/v1/nothing", preflight_asks, NULL), 404, allow_origin);
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", "Authorization: Bearer sekrit\r\n", chat), 200,
           allow_origin);
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, chat), 401, allow_origin);
    free(r);
    expect(r = request(sv.port, "POST", "/v1/completions", "Authorization: Bearer sekrit\r\n",
                       "{\"prompt\":\"a b\",\"stream\":true}"),
           200, allow_origin);
    assert_non_null(strstr(r, "text/event-stream"));
    assert_non_null(strstr(r, "data: [DONE]"));
    free(r);
    expect(r = request(sv.port, "GET", "/v1/chat/completions", "Authorization: Bearer sekrit\r\n", NULL), 405,
           allow_origin);
    free(r);
    stop(&sv);

    hp = (vkv_http_params){.cors_origin = "*", .idle_timeout_s = idle_timeout_s};
    sv = start_with(&hp, 4, 0);
    expect(r = request(sv.port, "GET", "/health", NULL, NULL), 200, "Access-Control-Allow-Origin: *\r\n");
    free(r);
    stop(&sv);

    const char *good[] = {"*", "https://example.com", "http://localhost:3000", "http://[::1]:8080", "app+x://h-1.local"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!vkv_http_origin_ok(good[i])) fail_msg("origin '%s' refused", good[i]);
    /* what no browser sends as an Origin, or a header could not carry */
    const char *bad[] = {"", "http://localhost:3000/", "localhost:3000", "http://", "http://a b", "http://x:123456",
                         "null", "http://x\r\nX-Injected: 1", "**"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (vkv_http_origin_ok(bad[i])) fail_msg("origin '%s' accepted", bad[i]);
        refused_at_start(&(vkv_http_params){.cors_origin = bad[i]}, "--cors", bad[i]);
    }
}

/* GET /health on a connection kept open, and its answer read. */
static void health_on(int fd)
{
    static const char get[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, get, sizeof get - 1);
    char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    while (n < sizeof buf - 1 && !strstr(buf, "{\"status\":\"ok\"}")) {
        ssize_t got = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (got <= 0) break;
        n += (size_t)got;
        buf[n] = 0;
    }
    expect(buf, 200, "{\"status\":\"ok\"}");
}

/* With max_connections open, a request on one more is answered 503 (with
 * Retry-After and the error object) and its connection closed; once one of
 * them closes, a new one is served. */
static void connections_beyond_the_limit(void **state)
{
    (void)state;
    vkv_http_params hp = {.max_connections = 2, .idle_timeout_s = idle_timeout_s};
    server sv = start_with(&hp, 4, 0);
    int held[2];
    for (int i = 0; i < 2; i++) health_on(held[i] = dial(sv.port));
    char *r;
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, chat), 503, "Retry-After: 1\r\n");
    assert_non_null(strstr(r, "\"type\":\"server_error\""));
    assert_non_null(strstr(r, "too many connections (this server serves 2 at once)"));
    assert_non_null(strstr(r, "Connection: close\r\n"));
    free(r);
    expect(r = request(sv.port, "GET", "/health", NULL, NULL), 503, NULL);
    free(r);
    health_on(held[0]); /* the ones held are still served */
    close(held[1]);
    int st = 503;
    for (int waited = 0; st == 503 && waited < 3000; waited += 20) {
        r = request(sv.port, "GET", "/health", NULL, NULL);
        st = status_of(r);
        free(r);
        if (st == 503) sleep_ms(20);
    }
    assert_int_equal(st, 200);
    close(held[0]);
    stop(&sv);
    refused_at_start(&(vkv_http_params){.max_connections = VKV_HTTP_MAX_CONNECTIONS + 1}, "connections", "16385");
}

/* Starts a streamed request and reads its response headers. */
static int open_stream(uint16_t port, const char *body)
{
    int fd = dial(port);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, head, (size_t)n);
    char buf[256];
    ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
    assert_true(r > 0);
    buf[r] = 0;
    if (!strstr(buf, "200 OK") || !strstr(buf, "text/event-stream")) fail_msg("not a stream: %s", buf);
    return fd;
}

static const char slow[] = "{\"prompt\":\"w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20\","
                           "\"stream\":true}";

static unsigned long long metric(uint16_t port, const char *name)
{
    char *r = request(port, "GET", "/metrics", NULL, NULL);
    const char *p = strstr(r, name);
    while (p && (p[-1] != '\n' || p[strlen(name)] != ' ')) p = strstr(p + 1, name); /* a sample's line */
    unsigned long long v = p ? strtoull(p + strlen(name) + 1, NULL, 10) : ~0ull;
    free(r);
    return v;
}

/* A metric once it reached `want`, or its value after 3 s. */
static unsigned long long wait_metric(uint16_t port, const char *name, unsigned long long want)
{
    unsigned long long v;
    for (int waited = 0; (v = metric(port, name)) != want && waited < 3000; waited += 20) sleep_ms(20);
    return v;
}

static void full_queue_and_disconnect(void **state)
{
    (void)state;
    server sv = start(NULL, 0, 1, 50);
    int fd = open_stream(sv.port, slow);
    char *r;
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\"}"), 429, "Retry-After: 1");
    assert_non_null(strstr(r, "rate_limit_exceeded"));
    free(r);
    /* the client leaves mid-stream: the engine sees a cancel soon after */
    close(fd);
    assert_int_equal(wait_metric(sv.port, "fake_engine_cancelled_total", 1), 1);
    assert_int_equal(metric(sv.port, "vkvector_http_client_disconnects_total"), 1);
    /* the same for a request that is not streamed (closed after the time in
     * which a closed sending side is taken as a half-close) */
    fd = dial(sv.port);
    char head[512];
    const char *body = "{\"prompt\":\"a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n\"}";
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, head, (size_t)n);
    while (metric(sv.port, "fake_engine_live") != 1) sleep_ms(10);
    sleep_ms(700);
    close(fd);
    assert_int_equal(wait_metric(sv.port, "fake_engine_cancelled_total", 2), 2);
    stop(&sv);
}

static void *stopper(void *p)
{
    vkv_http_stop(p);
    return NULL;
}

static void stop_during_a_stream(void **state)
{
    (void)state;
    server sv = start(NULL, 0, 4, 20);
    int fd = open_stream(sv.port, slow);
    pthread_t t;
    pthread_create(&t, NULL, stopper, sv.s);
    sleep_ms(100);
    /* new requests are refused meanwhile (or find the door closed) */
    char *r = read_all(fd);
    close(fd);
    pthread_join(t, NULL);
    assert_non_null(strstr(r, "data: [DONE]\n\n"));
    assert_non_null(strstr(r, "w20"));
    free(r);
    assert_int_equal(fake_engine_live(sv.e), 0);
    vkv_engine_free(sv.e);
}

/* Generation longer than the idle timeout is not idleness, streamed or not. */
static void slow_generation_outlives_the_idle_timeout(void **state)
{
    (void)state;
    idle_timeout_s = 1;
    server sv = start(NULL, 0, 4, 60); /* 40 words: 2.4 s */
    idle_timeout_s = 0;
    const char *body = "{\"prompt\":\"a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n\"}";
    char *r;
    expect(r = request(sv.port, "POST", "/v1/completions", NULL, body), 200, "\"finish_reason\":\"stop\"");
    free(r);
    int fd = open_stream(sv.port, "{\"prompt\":\"a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n\","
                                  "\"stream\":true}");
    r = read_all(fd);
    close(fd);
    assert_non_null(strstr(r, "data: [DONE]"));
    free(r);
    stop(&sv);
}

/* A client that shuts its sending side once its request is sent still reads
 * the whole response, streamed or not; one that then leaves is noticed. */
static void half_closed_client_is_served(void **state)
{
    (void)state;
    server sv = start(NULL, 0, 4, 30); /* 16 words: 0.5 s, a few looks at the client */
    const char *words = "a b c d e f g h i j k l m n o p";
    char body[160];
    snprintf(body, sizeof body, "{\"prompt\":\"%s\"}", words);
    char *r, text[64];
    snprintf(text, sizeof text, "\"text\":\"%s\"", words);
    expect(r = request_then(sv.port, "POST", "/v1/completions", NULL, body, true), 200, text);
    free(r);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"stream\":true}", words);
    expect(r = request_then(sv.port, "POST", "/v1/completions", NULL, body, true), 200, "data: [DONE]\n\n");
    assert_non_null(strstr(r, "\"text\":\" p\""));
    free(r);
    expect(r = request_then(sv.port, "GET", "/health", NULL, NULL, true), 200, "{\"status\":\"ok\"}");
    free(r);
    assert_int_equal(metric(sv.port, "fake_engine_cancelled_total"), 0);
    assert_int_equal(metric(sv.port, "vkvector_http_client_disconnects_total"), 0);

    /* half-closed, then gone mid-stream: its reset is seen */
    int fd = open_stream(sv.port, slow);
    shutdown(fd, SHUT_WR);
    sleep_ms(200);
    close(fd);
    assert_int_equal(wait_metric(sv.port, "fake_engine_cancelled_total", 1), 1);
    stop(&sv);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_and_statuses),
        cmocka_unit_test(aliases_and_strict_model),
        cmocka_unit_test(body_over_the_cap),
        cmocka_unit_test(api_key),
        cmocka_unit_test(no_cors_by_default),
        cmocka_unit_test(cors_preflight_and_responses),
        cmocka_unit_test(connections_beyond_the_limit),
        cmocka_unit_test(half_closed_client_is_served),
        cmocka_unit_test(full_queue_and_disconnect),
        cmocka_unit_test(stop_during_a_stream),
        cmocka_unit_test(slow_generation_outlives_the_idle_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
