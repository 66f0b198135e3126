/* OpenAI's wire format for `vkvector serve`, without I/O: request bodies of
 * POST /v1/chat/completions and POST /v1/completions parsed and checked into a
 * vkv_gen_request (serve/engine.h), and the response objects, stream chunks,
 * model list and error objects written as OpenAI writes them; and
 * llama-server's POST /tokenize, POST /detokenize and GET /props in its shapes.
 *
 * Parsing follows OpenAI: unknown fields are ignored, a null optional field
 * is an absent one, a field of the wrong type or out of range is a 400 whose
 * error names it ("param": "temperature", "messages.[2].content"). Absent
 * sampling fields take OpenAI's defaults (temperature 1, top_p 1); an absent
 * `model` is the served model (OpenAI requires it; its clients always send
 * it). The "vkvector" extension object sets the request's compression; a
 * press name is checked by the engine, not here. */
#ifndef VKV_SERVE_OPENAI_H
#define VKV_SERVE_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "serve/engine.h"

typedef enum vkv_oai_route {
    VKV_OAI_CHAT,        /* POST /v1/chat/completions */
    VKV_OAI_COMPLETIONS, /* POST /v1/completions */
} vkv_oai_route;

/* An OpenAI error object and its HTTP status. */
typedef struct vkv_oai_error {
    int http_status;
    char message[512];
    const char *type;   /* "invalid_request_error", "server_error", ... */
    char param[96];     /* "" writes null */
    const char *code;   /* NULL writes null */
} vkv_oai_error;

typedef struct vkv_oai_request {
    vkv_oai_route route;
    vkv_gen_request gen;
    char model[256];     /* as the client named it; "" when absent */
    uint32_t n;          /* choices (OpenAI's `n`, 1 to 128; 0 when absent: one) */
    bool has_seed;       /* false: the caller draws one (OpenAI's sampling is random without a seed) */
    bool include_usage;  /* stream_options.include_usage */
} vkv_oai_request;

/* Parses body[0, len). On success fills *out (free out->gen with
 * vkv_gen_request_free unless it was submitted); on failure fills *err (400)
 * and leaves nothing to free. The sampling fields a body leaves out take
 * OpenAI's defaults (vkv_gen_sampling_defaults), or with _with, the
 * server's (`vkvector serve --temp` ...). */
bool vkv_oai_parse(vkv_oai_route route, const char *body, size_t len, vkv_oai_request *out, vkv_oai_error *err);
typedef struct vkv_oai_parse_opts {
    const vkv_sampler_params *sampling; /* the server's sampling defaults; NULL: OpenAI's */
    /* The context's tokens: a completions prompt of more token ids is
     * refused (400 context_length_exceeded) by a scan of the body before
     * its JSON tree is built, so a body of millions of ids costs no tree;
     * 0: no limit */
    uint32_t n_ctx;
} vkv_oai_parse_opts;
bool vkv_oai_parse_with(vkv_oai_route route, const char *body, size_t len, const vkv_oai_parse_opts *o,
                        vkv_oai_request *out, vkv_oai_error *err);


/* Sets *err; param NULL writes null. */
void vkv_oai_error_set(vkv_oai_error *err, int http_status, const char *type, const char *param, const char *code,
                       const char *fmt, ...) VKV_PRINTF(6, 7);
/* The error object of an engine's VKV_SEQ_ERROR event. */
void vkv_oai_error_from_event(vkv_oai_error *err, const vkv_seq_event *ev);

/* A token's bytes: with special, control tokens' text too (else ""). NULL
 * for an id outside the vocabulary. */
typedef const char *(*vkv_oai_piece_fn)(const void *ctx, int32_t id, bool special, size_t *len);

/* What every response object of one request shares. */
typedef struct vkv_oai_meta {
    vkv_oai_route route;
    const char *id;      /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;     /* Unix seconds */
    const char *model;
    bool include_usage;  /* streams: "usage": null on each chunk, then the usage chunk */
    uint32_t choice;     /* stream chunks: the index of the choice they carry */
    /* With logprobs: the tokens' text (vkv_engine_token_piece's) */
    vkv_oai_piece_fn piece;
    const void *piece_ctx;
} vkv_oai_meta;

/* The tokens one response object or chunk carries logprobs of (the writers
 * take NULL for "logprobs": null). Completions' text_offset counts bytes of
 * the text from the echoed prompt's start (without echo, from the prompt's
 * end: its length in bytes); control tokens' text (a BOS) is not in the
 * text, so it counts 0. */
typedef struct vkv_oai_logprobs {
    const vkv_token_logprob *tokens;
    size_t n;
    size_t text_offset;  /* of tokens[0] */
} vkv_oai_logprobs;
/* The text offset after tokens[0, n) (the next object's text_offset). */
size_t vkv_oai_logprobs_end(const vkv_oai_meta *m, const vkv_oai_logprobs *lp);

/* The writers append one JSON object to *out (no newline); out->oom on
 * failure. */

/* chat.completion or text_completion: the whole text, its logprobs, and
 * the DONE event's finish reason, usage and "vkvector" compression object. */
void vkv_oai_write_response(vkv_strbuf *out, const vkv_oai_meta *m, const char *text, size_t len,
                            const vkv_oai_logprobs *lp, const vkv_seq_event *done);
/* One choice of a response: its text, its logprobs (NULL: null) and its DONE event (the finish reason). */
typedef struct vkv_oai_choice {
    const char *text;
    size_t len;
    const vkv_oai_logprobs *lp;
    const vkv_seq_event *done;
} vkv_oai_choice;
/* The same with n choices (OpenAI's `n`), indexed 0 to n - 1; the usage and
 * the "vkvector" object are total's (the completion tokens of them all, the
 * prompt counted once). */
void vkv_oai_write_response_n(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_oai_choice *choices, size_t n,
                              const vkv_seq_event *total);
/* Stream chunks. The first chunk of a chat stream: delta {role, content ""};
 * completions have none (vkv_oai_write_first_chunk writes nothing). */
void vkv_oai_write_first_chunk(vkv_strbuf *out, const vkv_oai_meta *m);
void vkv_oai_write_text_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const char *text, size_t len,
                              const vkv_oai_logprobs *lp);
/* The chunk with finish_reason (empty delta / text), carrying the "vkvector" object. */
void vkv_oai_write_finish_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_seq_event *done);
/* With include_usage: "choices": [] and the usage. */
void vkv_oai_write_usage_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_seq_event *done);
/* GET /v1/models (a list of one) and GET /v1/models/{id}. */
/* The list of the model ids served (--alias, else the model's). */
void vkv_oai_write_models(vkv_strbuf *out, const char *const *model_ids, size_t n_ids, int64_t created);
void vkv_oai_write_model(vkv_strbuf *out, const char *model_id, int64_t created);
/* {"error": {"message", "type", "param", "code"}} */
void vkv_oai_write_error(vkv_strbuf *out, const vkv_oai_error *err);

/* ---- llama-server's utility routes, in its shapes (docs/SERVE.md) ----
 * Bodies are checked as the routes above check theirs: not JSON, a field of
 * the wrong type or range, a missing required field: a 400 naming it. */

/* POST /tokenize: {"content", "add_special" (default false), "parse_special"
 * (default true), "with_pieces" (default false)}. On success free
 * out->content. */
typedef struct vkv_oai_tokenize {
    char *content;       /* NUL-terminated, without NUL characters */
    size_t len;
    bool add_special, parse_special, with_pieces;
} vkv_oai_tokenize;
bool vkv_oai_parse_tokenize(const char *body, size_t len, vkv_oai_tokenize *out, vkv_oai_error *err);
/* POST /detokenize: {"tokens": [ids]}, each an integer in [0, n_vocab).
 * *ids is malloc'ed (NULL when there are none). */
bool vkv_oai_parse_detokenize(const char *body, size_t len, int32_t n_vocab, int32_t **ids, size_t *n_ids,
                              vkv_oai_error *err);

/* One token's bytes. */
typedef struct vkv_oai_piece {
    const char *p;
    size_t n;
} vkv_oai_piece;
/* {"tokens": [ids]}; with pieces (non-NULL, [n]) {"tokens": [{"id", "piece"}]},
 * each piece a string when it is valid UTF-8, else its bytes as numbers. */
void vkv_oai_write_tokens(vkv_strbuf *out, const int32_t *ids, size_t n, const vkv_oai_piece *pieces);
/* {"content": text} (bytes that are not UTF-8 become U+FFFD) */
void vkv_oai_write_content(vkv_strbuf *out, const char *text, size_t len);
/* GET /props: the model, its context, the chat template, the slots and
 * default_generation_settings: what a request that gives no sampling field
 * gets (p->sampling) and the server's compression flags. */
void vkv_oai_write_props(vkv_strbuf *out, const vkv_engine_props *p);

#endif
