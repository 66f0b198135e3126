/* `vkvector serve`'s HTTP front: OpenAI's API (serve/openai.h) over
 * libmicrohttpd, one thread per connection, in front of an engine
 * (serve/engine.h). docs/ARCHITECTURE.md §1 describes its threads.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
 * GET /v1/models/{id}, GET /health, GET /metrics (Prometheus text), and
 * llama-server's POST /tokenize, POST /detokenize and GET /props (answered
 * on the connection's thread, without the scheduler). With an API key, the
 * /v1/ routes, llama-server's and /metrics (unless metrics_public) want
 * `Authorization: Bearer KEY` (401 otherwise); /health is open.
 *
 * With cors_origin, OPTIONS on a known route is a CORS preflight (204, no
 * key needed: browsers send none) and every response carries
 * Access-Control-Allow-Origin.
 *
 * Statuses: 400 a body that is not JSON or has a field of the wrong type or
 * range (the error names it); 404 an unknown route or `model`; 405 a known
 * route with another method; 413 a body over max_body; 429 (with
 * Retry-After) and the engine's other errors with the status the engine
 * gives; 503 (with Retry-After) while stopping and on a connection beyond
 * max_connections, which is then closed. A stream's 200 goes after the
 * engine admitted the request; an error after that is sent as an event,
 * {"error": {...}}.
 *
 * A client may close its sending side (shutdown(SHUT_WR)) right after its
 * request and still read the whole response: TCP cannot tell that from a
 * client that left, so an end seen within half a second of the request's end
 * is taken as the former; later, as the client leaving (its request is
 * cancelled). */
#ifndef VKV_SERVE_HTTP_H
#define VKV_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "serve/engine.h"

typedef struct vkv_http_params {
    const char *host;        /* address or name to listen on; NULL: 127.0.0.1 */
    uint16_t port;           /* 0: a free port (vkv_http_port tells which) */
    const char *api_key;     /* NULL or "": no authentication */
    size_t max_body;         /* request bodies over this are refused (413) unread; 0: 4 MiB */
    unsigned idle_timeout_s; /* an idle keep-alive connection is closed after this; 0: 60 */
    unsigned max_connections;/* served at once, one thread each; 0: 256; at most VKV_HTTP_MAX_CONNECTIONS */
    bool log;                /* one line per request on stderr */
    const char *alias;       /* "NAME[,NAME...]": the model ids /v1/models lists; NULL: the engine's */
    bool strict_model;       /* a request naming another model gets 404 (else any model is served) */
    const char *cors_origin; /* NULL: no CORS; "*" or an origin (vkv_http_origin_ok) browsers' pages may call from */
    bool metrics_public;     /* /metrics wants no API key */
} vkv_http_params;

#define VKV_HTTP_MAX_CONNECTIONS 16384u
#define VKV_HTTP_ORIGIN_FORM "'*' or an origin SCHEME://HOST[:PORT] with no path"

/* A value cors_origin takes: "*", or SCHEME://HOST[:PORT] as browsers send
 * it in Origin (no path, not even "/": it would never match). */
bool vkv_http_origin_ok(const char *origin);

typedef struct vkv_http_server vkv_http_server;

/* Listens and serves on threads of its own until vkv_http_stop. The engine is
 * borrowed: free it after vkv_http_stop. */
vkv_status vkv_http_start(const vkv_http_params *p, vkv_engine *e, vkv_http_server **out);
uint16_t vkv_http_port(const vkv_http_server *s);
/* Stops accepting connections, answers new requests on open ones with 503,
 * lets running requests (streams too) end, then joins every thread and frees. */
void vkv_http_stop(vkv_http_server *s);

#endif
