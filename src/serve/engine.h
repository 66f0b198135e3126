/* The seam between `vkvector serve`'s HTTP front (serve/http.c, speaking
 * OpenAI's API through serve/openai.c) and its scheduler (serve/sched.c,
 * continuous batching over one session's device and model). The front turns
 * each HTTP request into a vkv_gen_request, submits it, and reads the
 * sequence's events until the last; the scheduler owns the GPU on one thread
 * of its own and never blocks on a client (docs/ARCHITECTURE.md §1).
 *
 * Threads: vkv_engine_submit, vkv_seq_next, vkv_seq_cancel, vkv_seq_release,
 * vkv_engine_metrics, vkv_engine_get_props, vkv_engine_tokenize and
 * vkv_engine_token_piece may be called from any thread (one reader per
 * sequence). */
#ifndef VKV_SERVE_ENGINE_H
#define VKV_SERVE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "core/strbuf.h"
#include "infer/sampler.h"
#include "serve/json_constraint.h"
#include "session/session.h"

/* The compression one request asks for: the request's "vkvector" extension
 * object over the server's flags. A field whose has_* flag is false takes the
 * server's default. */
typedef struct vkv_press_request {
    bool has_press, has_compression, has_vector, has_pa, has_kv_type, has_compress_every, has_max_kv_tokens,
        has_query_aware;
    char press[32];             /* a scorer's name ("keydiff", ...) or "none" */
    double compression;         /* p_c in [0, 1) */
    bool vector;                /* VECTOR's approximated tier */
    double pa;                  /* p_a; < 0: the default */
    char kv_type[8];            /* "f16", "f32", "q8_0", "q4_0" */
    uint32_t compress_every;    /* compression during generation: tokens between compressions; 0: off */
    uint32_t max_kv_tokens;     /* and the budget of full KV pairs per head */
    bool query_aware;           /* compress the question with the context */
} vkv_press_request;

typedef struct vkv_gen_message {
    char *role;                 /* "system", "user", "assistant", ... */
    char *content;
} vkv_gen_message;

typedef enum vkv_gen_kind {
    VKV_GEN_CHAT,               /* messages rendered with the model's chat template, generation prompt after */
    VKV_GEN_TEXT,               /* a completion prompt: text tokenized with BOS as the vocabulary adds it */
    VKV_GEN_IDS,                /* a completion prompt given as token ids (no BOS added) */
} vkv_gen_kind;

#define VKV_GEN_MAX_STOP 4      /* OpenAI's limit on stop sequences */
#define VKV_GEN_MAX_TOP_LOGPROBS 20 /* OpenAI's limit on top_logprobs */

/* One token of a response's logprobs. */
typedef struct vkv_token_logprob {
    int32_t id;
    /* log p(id | the tokens before) under the model's logits, before
     * temperature, penalties, bias and constraints (OpenAI's meaning); NAN
     * for a prompt's first token, which has nothing before it */
    float logprob;
    uint32_t n_top;             /* the request's top_logprobs (fewer when the vocabulary is smaller) */
    int32_t top_id[VKV_GEN_MAX_TOP_LOGPROBS]; /* the most likely tokens there, most likely first */
    float top_logprob[VKV_GEN_MAX_TOP_LOGPROBS];
} vkv_token_logprob;

/* One request, parsed and checked for types and ranges by serve/openai.c.
 * The engine takes ownership of what it points to at vkv_engine_submit
 * (success or not); the struct itself stays the caller's (it may live on the
 * caller's stack), so the engine copies it before returning.
 * vkv_gen_request_free frees what it points to and zeroes it; it and
 * vkv_seq_event_clear are defined in serve/openai.c. */
typedef struct vkv_gen_request {
    vkv_gen_kind kind;
    vkv_gen_message *messages;  /* [n_messages] VKV_GEN_CHAT */
    size_t n_messages;
    char *prompt;               /* VKV_GEN_TEXT, NUL-terminated */
    int32_t *prompt_ids;        /* [n_prompt_ids] VKV_GEN_IDS */
    size_t n_prompt_ids;
    uint32_t max_tokens;        /* 0: until the context is full */
    bool no_generation;         /* max_tokens 0 (with echo): the prompt is evaluated, nothing generated */
    vkv_sampler_params sampling;/* its logit_bias points into logit_bias below */
    vkv_logit_bias *logit_bias; /* [sampling.n_logit_bias], the request's */
    bool logprobs;              /* each generated token's log-probability in its TEXT event */
    uint32_t top_logprobs;      /* and its most likely alternatives, [0, VKV_GEN_MAX_TOP_LOGPROBS] */
    bool echo;                  /* the STARTED event carries the prompt's tokens (with logprobs when asked) */
    /* response_format json_object / json_schema: each step samples only
     * tokens that continue a valid document, the end of generation only
     * once it is whole (docs/SERVE.md, "Structured outputs"); NULL: text */
    vkv_json_constraint *constraint;
    char *stop[VKV_GEN_MAX_STOP]; /* stop sequences: generation ends before the first match, which is not returned */
    size_t n_stop;
    bool stream;                /* the front streams; the engine emits the same events either way */
    vkv_press_request press;
} vkv_gen_request;
void vkv_gen_request_free(vkv_gen_request *r);
/* OpenAI's sampling for the fields a request leaves out: the full
 * distribution (temperature 1, top_p 1) with llama-server's extension
 * samplers off (top_k 0, min_p 0, repeat_penalty 1) and no penalties
 * (defined in serve/request.c). */
vkv_sampler_params vkv_gen_sampling_defaults(void);

/* What the engine did to the request's cache (the response's "vkvector" object). */
typedef struct vkv_gen_compression {
    const char *press;          /* "none" without a press */
    double compression;         /* p_c asked for */
    bool vector;
    uint32_t n_compressed;      /* tokens compression saw */
    uint64_t n_retained, n_approximated, n_evicted; /* over all (layer, KV head, token) of those tokens */
    uint64_t kv_bytes_before;   /* K/V bytes of those tokens uncompressed */
    uint64_t kv_bytes_after;    /* and as compressed */
    uint32_t decode_compressions; /* compressions during generation */
    /* The compressed-context cache (docs/SERVE.md): "hit" (the context came
     * from it, sharing context_shared_bytes), "miss" (compressed here, and
     * kept for the next request), "not_reusable" (context_cache_reason
     * says why); NULL without a press. */
    const char *context_cache;
    const char *context_cache_reason;
    uint64_t context_shared_bytes;
} vkv_gen_compression;

typedef enum vkv_seq_event_kind {
    VKV_SEQ_STARTED,            /* admitted and prefilled: the first event of a request that will produce text */
    VKV_SEQ_TEXT,               /* a piece of generated text (UTF-8, complete characters) */
    VKV_SEQ_DONE,               /* the last event of a request that ran */
    VKV_SEQ_ERROR,              /* the last event of a refused or failed request */
} vkv_seq_event_kind;

typedef struct vkv_seq_event {
    vkv_seq_event_kind kind;
    /* VKV_SEQ_TEXT: the piece (malloc'ed; the reader frees it with vkv_seq_event_clear) */
    char *text;
    size_t len;
    /* VKV_SEQ_TEXT with logprobs: the tokens whose text this piece ends
     * (a token held back with a possible stop sequence goes with a later
     * piece; an empty piece may carry the last ones); VKV_SEQ_STARTED with
     * echo: the prompt's tokens, their logprobs when asked. malloc'ed, freed
     * by vkv_seq_event_clear. */
    vkv_token_logprob *tokens;
    size_t n_tokens;
    /* VKV_SEQ_DONE */
    const char *finish_reason;  /* "stop" (end of generation or a stop sequence) or "length" */
    uint32_t prompt_tokens, completion_tokens;
    uint32_t cached_tokens;     /* prompt tokens whose KV rows came from the prefix cache */
    vkv_gen_compression compression;
    /* VKV_SEQ_ERROR: an OpenAI error object's fields and its HTTP status */
    int http_status;            /* 400, 404, 429, 500, 503 */
    char message[512];
    const char *type;           /* "invalid_request_error", "server_error", ... */
    const char *param;          /* the offending field, or NULL */
    const char *code;           /* "context_length_exceeded", ... or NULL */
} vkv_seq_event;
void vkv_seq_event_clear(vkv_seq_event *e);

typedef struct vkv_engine vkv_engine;
typedef struct vkv_seq vkv_seq;

typedef struct vkv_engine_params {
    uint32_t max_seqs;          /* sequences decoded together in one step (at most VKV_STEP_MAX and
                                 * prefill_chunk); 0: as many as those and the device allow (up to 256,
                                 * halved while the sequences' scratch would take over a quarter of the
                                 * heap beside the weights) */
    uint32_t queue;             /* requests waiting for a place beyond those (then 429); 0: 64 */
    uint64_t kv_budget;         /* bytes of the KV pool every sequence's cache lives in; 0: what the
                                 * device heap has left after the weights and scratch, less a margin */
    uint32_t n_ctx;             /* tokens a sequence may reach; 0: the model's training context */
    uint32_t prefill_chunk;     /* prompt tokens per chunk, interleaved with decode steps; 0: 512 */
    vkv_press_request defaults; /* the server's flags: every has_* true */
    bool log;                   /* one line per request and pool change on stderr */
    bool no_prefix_cache;       /* finished prompts' caches are not kept for reuse */
    bool no_paged_kv;           /* every cache contiguous, none paged from the page pool (kv/kv_pages.h) */
    uint32_t prefix_page;       /* the prefix cache's unit of reuse in tokens; 0: 16 */
    const char *model_path;     /* the model file as given (GET /props); NULL: unknown. Copied */
    /* What a request gets for the sampling fields it leaves out
     * (`vkvector serve --temp` ...: GET /props reports them); NULL:
     * OpenAI's (vkv_gen_sampling_defaults). Copied */
    const vkv_sampler_params *sampling;
} vkv_engine_params;

/* Starts the scheduler thread on an open session (its device, model,
 * tokenizer and calibration; borrowed: close it after vkv_engine_free).
 * Refuses, naming the numbers, a budget that cannot hold one sequence. */
vkv_status vkv_engine_create(vkv_session *s, const vkv_engine_params *p, vkv_engine **out);
/* Drains (vkv_engine_drain) and frees. */
void vkv_engine_free(vkv_engine *e);

/* Renders the chat template and tokenizes the prompt on the caller's thread
 * (so a long prompt holds up only its own connection, never the scheduler's
 * steps), then queues the request. On success *out is the sequence to read events from;
 * when the queue is full (429), the engine is stopping (503), or the request
 * can never run (a prompt longer than the context, a KV peak over the whole
 * budget: 400), *out still comes back and its first event is the error. */
void vkv_engine_submit(vkv_engine *e, vkv_gen_request *req, vkv_seq **out);
/* The same for n choices of one request (OpenAI's `n`, 1 <= n; docs/SERVE.md,
 * "Several choices"): out[0, n) are their sequences, admitted together; the
 * others fork from the first's prefill, sharing its prompt's pages, and
 * sample with seeds of their own (the first with the request's). Each
 * sequence has its own events; a refusal comes to all. All NULL when out of
 * host memory. */
void vkv_engine_submit_n(vkv_engine *e, vkv_gen_request *req, uint32_t n, vkv_seq **out);
/* The next event, waiting up to timeout_ms (< 0: forever). false on timeout. */
bool vkv_seq_next(vkv_seq *q, int timeout_ms, vkv_seq_event *ev);
/* The next event of any of qs[0, n) (the sequences of one vkv_engine_submit_n,
 * in any order and subset), the lowest index first; *which: its index in qs.
 * Those whose last event was read are skipped. false on timeout. */
bool vkv_seq_next_any(vkv_seq *const *qs, size_t n, int timeout_ms, size_t *which, vkv_seq_event *ev);
/* The client went away: the sequence leaves the batch at the next step and
 * its memory returns to the pool. Events after it may still arrive. */
void vkv_seq_cancel(vkv_seq *q);
/* The reader is done (after the last event, or after cancelling). */
void vkv_seq_release(vkv_seq *q);

/* Prometheus text (exposition format 0.0.4) of the engine's counters and gauges. */
void vkv_engine_metrics(vkv_engine *e, vkv_strbuf *out);
/* The model's id as /v1/models lists it (the GGUF file's name without .gguf). */
const char *vkv_engine_model_id(const vkv_engine *e);

/* What GET /props reports: the served model and the engine's settings.
 * Strings point into the engine or its tokenizer (valid until
 * vkv_engine_free); none is NULL. */
typedef struct vkv_engine_props {
    const char *model_id;       /* vkv_engine_model_id */
    const char *model_path;     /* the model file as the server was given it ("" when not known) */
    uint32_t n_ctx;             /* tokens a sequence may reach */
    uint32_t max_seqs;          /* sequences decoded together */
    int32_t n_vocab;
    /* The template chat requests are rendered with ("chatml", "llama3", ...:
     * vkv_chat_template_name), and the model's own Jinja source ("" when the
     * GGUF has none; it may be one vkvector does not know, then rendered as
     * chat_template says). */
    const char *chat_template;
    const char *chat_template_source;
    const char *bos_token, *eos_token; /* their text ("" when the vocabulary has none) */
    vkv_press_request defaults; /* the server's compression flags, every has_* true */
    vkv_sampler_params sampling;/* the sampling a request gets for the fields it leaves out */
} vkv_engine_props;
void vkv_engine_get_props(const vkv_engine *e, vkv_engine_props *out);

/* POST /tokenize and /detokenize run these on the caller's thread, never the
 * scheduler's: the tokenizer is immutable after load (tok/tokenizer.h), so
 * any number of threads may call them at once, beside running steps. */
/* Text to ids (malloc'ed, NULL when none): BOS first when add_special and the
 * vocabulary adds one; parse_special: special tokens' text becomes them. */
vkv_status vkv_engine_tokenize(const vkv_engine *e, const char *text, size_t len, bool add_special, bool parse_special,
                               int32_t **ids, size_t *n_ids);
/* The bytes one token stands for (not NUL-terminated; valid until
 * vkv_engine_free); control tokens' text only with special (else "", as
 * generated text shows them); NULL for an id outside [0, n_vocab). */
const char *vkv_engine_token_piece(const vkv_engine *e, int32_t id, bool special, size_t *len);
/* Stops admitting at once, without waiting: waiting requests and new submits
 * get 503; running sequences go on to their end (serve's first step of a
 * shutdown, before the HTTP front stops). */
void vkv_engine_stop_admitting(vkv_engine *e);
/* Stops admitting; running sequences finish; returns when the scheduler thread has exited. */
void vkv_engine_drain(vkv_engine *e);

#endif
