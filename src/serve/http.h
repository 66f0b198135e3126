/* `vkvector serve`'s HTTP front: OpenAI's API (serve/openai.h) over
 * libmicrohttpd, one thread per connection, in front of an engine
 * (serve/engine.h). docs/ARCHITECTURE.md §1 describes its threads.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
 * GET /v1/models/{id}, GET /health, GET /metrics (Prometheus text), and
 * llama-server's POST /tokenize, POST /detokenize and GET /props (answered
 * on the connection's thread, without the scheduler). With an API key, the
 * /v1/ routes and llama-server's want `Authorization: Bearer KEY` (401
 * otherwise); /health and /metrics are open.
 *
 * Statuses: 400 a body that is not JSON or has a field of the wrong type or
 * range (the error names it); 404 an unknown route or `model`; 405 a known
 * route with another method; 413 a body over max_body; 429 (with
 * Retry-After) and the engine's other errors with the status the engine
 * gives; 503 while stopping. A stream's 200 goes after the engine admitted
 * the request; an error after that is sent as an event, {"error": {...}}. */
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
    unsigned max_connections;/* 0: 256 (one thread each) */
    bool log;                /* one line per request on stderr */
    const char *alias;       /* "NAME[,NAME...]": the model ids /v1/models lists; NULL: the engine's */
    bool strict_model;       /* a request naming another model gets 404 (else any model is served) */
} vkv_http_params;

typedef struct vkv_http_server vkv_http_server;

/* Listens and serves on threads of its own until vkv_http_stop. The engine is
 * borrowed: free it after vkv_http_stop. */
vkv_status vkv_http_start(const vkv_http_params *p, vkv_engine *e, vkv_http_server **out);
uint16_t vkv_http_port(const vkv_http_server *s);
/* Stops accepting connections, answers new requests on open ones with 503,
 * lets running requests (streams too) end, then joins every thread and frees. */
void vkv_http_stop(vkv_http_server *s);

#endif
