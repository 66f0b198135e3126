/* The HTTP front (src/serve/http.c) in front of the fake engine
 * (fake_engine.c), over plain sockets: routes and status codes, bodies over
 * the cap (announced or chunked), the API key, 429 with Retry-After, streams,
 * a client that leaves (the engine sees a cancel, every sequence is released
 * once), and a stop while a stream runs (it ends with [DONE]). Runs under
 * ASan/UBSan with the other unit tests. */
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

/* One request (a body, with its Content-Length), the whole response back. */
static char *request(uint16_t port, const char *method, const char *path, const char *headers, const char *body)
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
    char *r = read_all(fd);
    close(fd);
    return r;
}

static void expect(const char *resp, int status, const char *has)
{
    if (status_of(resp) != status || (has && !strstr(resp, has)))
        fail_msg("wanted %d with '%s', got: %.600s", status, has ? has : "", resp);
}

static const char chat[] = "{\"model\":\"fake-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}";

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
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fake_engine_params fp = {.model_id = "fake-model"};
        vkv_engine *e = fake_engine_create(&fp);
        vkv_http_server *s = NULL;
        vkv_http_params p = {.alias = bad[i]};
        if (!vkv_http_start(&p, e, &s)) fail_msg("--alias '%s' accepted", bad[i]);
        assert_non_null(strstr(vkv_last_error(), "--alias"));
        vkv_engine_free(e);
    }
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

static void api_key(void **state)
{
    (void)state;
    server sv = start("sekrit", 0, 4, 0);
    char *r;
    expect(r = request(sv.port, "POST", "/v1/chat/completions", NULL, chat), 401, "\"code\":\"invalid_api_key\"");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", "Authorization: Bearer wrong\r\n", chat), 401,
           "Incorrect API key");
    free(r);
    expect(r = request(sv.port, "GET", "/v1/models", "Authorization: Bearer sekrit\r\n", NULL), 200, "fake-model");
    free(r);
    expect(r = request(sv.port, "POST", "/v1/chat/completions", "Authorization: Bearer sekrit\r\n", chat), 200,
           "hello there");
    free(r);
    expect(r = request(sv.port, "GET", "/health", NULL, NULL), 200, NULL);
    free(r);
    stop(&sv);
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

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&t, NULL);
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
    int waited = 0;
    while (metric(sv.port, "fake_engine_cancelled_total") != 1 && waited < 3000) {
        sleep_ms(20);
        waited += 20;
    }
    assert_int_equal(metric(sv.port, "fake_engine_cancelled_total"), 1);
    assert_int_equal(metric(sv.port, "vkvector_http_client_disconnects_total"), 1);
    /* the same for a request that is not streamed */
    fd = dial(sv.port);
    char head[512];
    const char *body = "{\"prompt\":\"a b c d e f g h i j k l m n o p q r s t u v w x y z\"}";
    int n = snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_all(fd, head, (size_t)n);
    while (metric(sv.port, "fake_engine_live") != 1) sleep_ms(10);
    close(fd);
    waited = 0;
    while (metric(sv.port, "fake_engine_cancelled_total") != 2 && waited < 3000) {
        sleep_ms(20);
        waited += 20;
    }
    assert_int_equal(metric(sv.port, "fake_engine_cancelled_total"), 2);
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

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_and_statuses),
        cmocka_unit_test(aliases_and_strict_model),
        cmocka_unit_test(body_over_the_cap),
        cmocka_unit_test(api_key),
        cmocka_unit_test(full_queue_and_disconnect),
        cmocka_unit_test(stop_during_a_stream),
        cmocka_unit_test(slow_generation_outlives_the_idle_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
