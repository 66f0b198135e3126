/* vkvector serve: OpenAI's API over HTTP with continuous batching and a
 * compressed cache per request (docs/SERVE.md). Only option handling lives
 * here: the scheduler and the HTTP front are src/serve. The process waits
 * for SIGINT or SIGTERM, then stops accepting, lets running streams end and
 * exits 0. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "calib/calib.h"
#include "serve/engine.h"
#include "serve/http.h"

typedef struct serve_opts {
    cli_model_opts mo;
    cli_press_opts po;
    const char *host, *api_key, *alias, *cors;
    int64_t port, max_seqs, queue, max_body, timeout_s, max_connections;
    double kv_budget_mib;
    bool quiet, no_prefix_cache, no_paged_kv, strict_model, metrics_public, max_connections_given;
    /* the sampling requests get for the fields they leave out: OpenAI's unless flags say */
    double temp, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    int64_t top_k;
    const vkv_press_ops *press;
} serve_opts;

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_serve_options(int argc, char **argv, serve_opts *o)
{
    const vkv_sampler_params openai = vkv_gen_sampling_defaults();
    *o = (serve_opts){.host = "127.0.0.1", .port = 8080, .max_seqs = 0, .queue = 64, .max_body = 4 << 20,
                      .timeout_s = 60, .temp = openai.temperature, .top_p = openai.top_p, .min_p = openai.min_p,
                      .repeat_penalty = openai.repeat_penalty, .presence_penalty = openai.presence_penalty,
                      .frequency_penalty = openai.frequency_penalty, .top_k = openai.top_k};
    cli_model_opts_init(&o->mo);
    cli_press_opts_init(&o->po);
    const cli_opt opts[] = {
        CLI_MODEL_OPTIONS(o->mo),
        {.type = CLI_SECTION, .names = "The server:"},
        {.type = CLI_STR, .names = "--host", .metavar = "ADDR", .dest = &o->host,
         .help = "address to listen on (default 127.0.0.1: this machine only)"},
        {.type = CLI_I64, .names = "--port", .metavar = "N", .dest = &o->port, .min = 0, .max = 65535,
         .help = "port (default 8080; 0: a free one, printed at start)"},
        {.type = CLI_F64, .names = "--kv-budget", .metavar = "MIB", .dest = &o->kv_budget_mib, .min = 0, .max = 1 << 30,
         .flags = CLI_MIN_EXCLUSIVE,
         .help = "the KV pool every sequence's cache lives in, MiB (default: what the device\n"
                 "heap has left after the weights and scratch, less a margin)"},
        {.type = CLI_I64, .names = "--max-seqs", .metavar = "N", .dest = &o->max_seqs, .min = 1, .max = VKV_STEP_MAX,
         .help = "sequences decoded together, one token each per step (at most 256; default: as many\n"
                 "as --batch and the device allow, up to 256)"},
        {.type = CLI_I64, .names = "--queue", .metavar = "N", .dest = &o->queue, .min = 1, .max = 1 << 20,
         .help = "requests waiting for a place beyond those; more get 429 (default 64)"},
        {.type = CLI_STR, .names = "--api-key", .metavar = "KEY", .dest = &o->api_key,
         .help = "require 'Authorization: Bearer KEY' on /v1/, llama-server's routes and /metrics\n"
                 "(default: VKVECTOR_API_KEY, else none)"},
        {.type = CLI_FLAG, .names = "--metrics-public", .dest = &o->metrics_public,
         .help = "serve /metrics without the API key (for a scraper that has none)"},
        {.type = CLI_STR, .names = "--cors", .metavar = "ORIGIN", .dest = &o->cors,
         .help = "let web pages from ORIGIN (SCHEME://HOST[:PORT], or '*' for any) call the server:\n"
                 "answer CORS preflights (OPTIONS) and allow ORIGIN on every response (default: off)"},
        {.type = CLI_I64, .names = "--max-body", .metavar = "BYTES", .dest = &o->max_body, .min = 1024, .max = 64 << 20,
         .help = "larger request bodies are refused with 413 (default 4 MiB, at most 64 MiB)"},
        {.type = CLI_I64, .names = "--timeout", .metavar = "S", .dest = &o->timeout_s, .min = 1, .max = 86400,
         .help = "close a connection idle for S seconds (default 60; a request waiting on\n"
                 "generation is not idle)"},
        {.type = CLI_I64, .names = "--max-connections", .metavar = "N", .dest = &o->max_connections, .min = 1,
         .max = VKV_HTTP_MAX_CONNECTIONS, .given = &o->max_connections_given,
         .help = "connections served at once, a thread each; a request on one more gets 503\n"
                 "with Retry-After (default: --max-seqs + --queue + 32)"},
        {.type = CLI_STR, .names = "--alias", .metavar = "NAME[,NAME]", .dest = &o->alias,
         .help = "the model ids /v1/models lists, the first answering requests that name none\n"
                 "(default: the model's file name)"},
        {.type = CLI_FLAG, .names = "--strict-model", .dest = &o->strict_model,
         .help = "a request naming a model not listed gets 404 (default: any name is served, as\n"
                 "llama-server serves it)"},
        {.type = CLI_F64, .names = "--temp", .metavar = "T", .dest = &o->temp, .min = 0, .max = 2,
         .help = "temperature of requests that give none (default 1, OpenAI's)"},
        {.type = CLI_F64, .names = "--top-p", .metavar = "P", .dest = &o->top_p, .min = 1e-9, .max = 1,
         .help = "top_p of requests that give none (default 1: off)"},
        {.type = CLI_I64, .names = "--top-k", .metavar = "K", .dest = &o->top_k, .min = 0, .max = INT32_MAX,
         .help = "top_k of requests that give none (default 0: off)"},
        {.type = CLI_F64, .names = "--min-p", .metavar = "P", .dest = &o->min_p, .min = 0, .max = 1,
         .help = "min_p of requests that give none (default 0: off)"},
        {.type = CLI_F64, .names = "--repeat-penalty", .metavar = "R", .dest = &o->repeat_penalty, .min = 1e-9, .max = 10,
         .help = "repeat_penalty of requests that give none (default 1: off)"},
        {.type = CLI_F64, .names = "--presence-penalty", .metavar = "X", .dest = &o->presence_penalty, .min = -2, .max = 2,
         .help = "presence_penalty of requests that give none (default 0)"},
        {.type = CLI_F64, .names = "--frequency-penalty", .metavar = "X", .dest = &o->frequency_penalty, .min = -2,
         .max = 2, .help = "frequency_penalty of requests that give none (default 0)"},
        {.type = CLI_FLAG, .names = "--quiet", .dest = &o->quiet, .help = "no line per request and pool change on stderr"},
        {.type = CLI_FLAG, .names = "--no-prefix-cache", .dest = &o->no_prefix_cache,
         .help = "keep no finished prompt's cache for the prompts that start with it"},
        {.type = CLI_FLAG, .names = "--no-paged-kv", .dest = &o->no_paged_kv,
         .help = "allocate every request's cache contiguously instead of as pages of the KV pool (shares no prefix page)"},
        {.type = CLI_SECTION,
         .names = "KV-cache compression, every request's default (a request's \"vkvector\" object overrides it):"},
        CLI_PRESS_OPTIONS(o->po),
    };
    int rc = cli_parse("serve", "vkvector serve [-m MODEL.gguf|DIR] [--host ADDR] [--port N] [options]", opts, CLI_N(opts),
                       argc, argv);
    return rc == CLI_OK ? -1 : rc == CLI_HELP ? 0 : 2;
}

/* The rules between options; -1 when they hold, else 2 (printed). */
static int check_serve_options(serve_opts *o)
{
    if (!cli_press_opts_check("serve", &o->po, &o->press)) return 2;
    const char *m = cli_decoding_check(&o->po);
    if (m) return cli_usage_error("serve", "%s", m);
    /* What a request's "vkvector" object cannot say either: one rule, one
     * pool scope and one cache type per request (docs/SERVE.md). */
    if (o->po.decoding != 0) return cli_usage_error("serve", "--decoding kvpress is not served; serve compresses during generation by the budget rule");
    if (o->po.vector_pool >= 0) return cli_usage_error("serve", "--vector-pool is not served: each scorer's own scope is used");
    if (o->po.vector_map != 0) return cli_usage_error("serve", "--vector-map joint is not served: per-head maps are used");
    if (o->po.materialized) return cli_usage_error("serve", "--materialized is not served: attention takes the fused path");
    if (o->mo.k_type >= 0 || o->mo.v_type >= 0)
        return cli_usage_error("serve", "--k-type / --v-type are not served: give --kv-type (one type for K and V)");
    if (o->po.n_pas > 1) return cli_usage_error("serve", "--pa takes one value here");
    if (o->cors && !vkv_http_origin_ok(o->cors))
        return cli_usage_error("serve", "--cors wants %s, got '%s'", VKV_HTTP_ORIGIN_FORM, o->cors);
    if (!o->api_key || !*o->api_key) o->api_key = getenv("VKVECTOR_API_KEY");
    return -1;
}

/* The server's flags as every request's default compression. */
/* The sampling requests get for the fields they leave out. */
static vkv_sampler_params default_sampling(const serve_opts *o)
{
    vkv_sampler_params p = vkv_gen_sampling_defaults();
    p.temperature = (float)o->temp;
    p.top_p = (float)o->top_p;
    p.top_k = (int32_t)o->top_k;
    p.min_p = (float)o->min_p;
    p.repeat_penalty = (float)o->repeat_penalty;
    p.presence_penalty = (float)o->presence_penalty;
    p.frequency_penalty = (float)o->frequency_penalty;
    return p;
}

/* Says the sampling defaults the server runs with when they are not OpenAI's. */
static void print_sampling(const vkv_sampler_params *p)
{
    const vkv_sampler_params o = vkv_gen_sampling_defaults();
    if (p->temperature == o.temperature && p->top_p == o.top_p && p->top_k == o.top_k && p->min_p == o.min_p &&
        p->repeat_penalty == o.repeat_penalty && p->presence_penalty == o.presence_penalty &&
        p->frequency_penalty == o.frequency_penalty)
        return;
    fprintf(stderr, "vkvector serve: requests that leave sampling fields out get temperature %g, top_p %g, top_k %d, "
                    "min_p %g, repeat_penalty %g, presence_penalty %g, frequency_penalty %g (not OpenAI's: 1, 1, 0, "
                    "0, 1, 0, 0)\n", p->temperature, p->top_p, p->top_k, p->min_p, p->repeat_penalty,
            p->presence_penalty, p->frequency_penalty);
}

static vkv_press_request default_press(const serve_opts *o)
{
    vkv_press_request r = {.has_press = true, .has_compression = true, .has_vector = true, .has_pa = true,
                           .has_kv_type = true, .has_compress_every = true, .has_max_kv_tokens = true,
                           .has_query_aware = true};
    snprintf(r.press, sizeof r.press, "%s", o->press ? o->po.press : "none");
    r.compression = o->po.compression_ratio > 0 ? o->po.compression_ratio : 0;
    r.vector = o->po.vector;
    r.pa = o->po.pa;
    snprintf(r.kv_type, sizeof r.kv_type, "%s", vkv_dtype_get(cli_kv_dtype(o->mo.kv_type))->name);
    r.compress_every = (uint32_t)o->po.compress_every;
    r.max_kv_tokens = (uint32_t)o->po.max_kv_tokens;
    r.query_aware = o->po.query_aware;
    return r;
}

/* After the first stop signal the server finishes its running streams; a
 * second one ends the process at once, unfinished streams cut, with the
 * shell's status for the signal (128 + its number). */
static void *second_signal(void *arg)
{
    const sigset_t *stop_signals = arg;
    int sig = 0;
    while (sigwait(stop_signals, &sig) != 0) {}
    static const char msg[] = "vkvector serve: a second stop signal: exiting now, running streams cut\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
    _exit(128 + sig);
}

int cmd_serve(int argc, char **argv)
{
    serve_opts o;
    int rc = parse_serve_options(argc, argv, &o);
    if (rc >= 0 || (rc = check_serve_options(&o)) >= 0) return rc;

    /* The signals are waited for here, on this thread: block them before any
     * other thread (the scheduler's, the HTTP front's) is started. */
    static sigset_t stop_signals; /* static: second_signal reads it after a first signal */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not the end of the process */

    /* The calibration is loaded whenever it is there, so a request may ask
     * for VECTOR though the server's default is off. */
    char calib_path[1100];
    vkv_calib_default_path(o.mo.model_path, calib_path, sizeof calib_path);
    bool calib = o.po.vector || o.po.calib || access(calib_path, R_OK) == 0;
    vkv_session_params sp = {.model_path = o.mo.model_path, .device = o.mo.device, .load_calib = calib,
                             .calib_path = o.po.calib, .chat = "auto", .cmd = "serve"};
    vkv_session *s = NULL;
    vkv_engine *e = NULL;
    vkv_http_server *http = NULL;
    vkv_status st = vkv_session_open(&sp, &s);
    if (st) goto out;
    vkv_engine_params ep = {.max_seqs = (uint32_t)o.max_seqs, .queue = (uint32_t)o.queue,
                            .kv_budget = (uint64_t)(o.kv_budget_mib * 1048576.0), .n_ctx = (uint32_t)o.mo.n_ctx,
                            .prefill_chunk = (uint32_t)o.mo.n_batch, .defaults = default_press(&o), .log = !o.quiet,
                            .no_prefix_cache = o.no_prefix_cache, .no_paged_kv = o.no_paged_kv, .model_path = o.mo.model_path};
    const vkv_sampler_params sampling = default_sampling(&o);
    ep.sampling = &sampling;
    if ((st = vkv_engine_create(s, &ep, &e))) goto out;
    vkv_engine_props props;
    vkv_engine_get_props(e, &props); /* the --max-seqs the engine chose when none was given */
    o.max_seqs = props.max_seqs;
    /* a connection for every running and waiting request, and some for /health, /metrics and refusals (429) */
    if (!o.max_connections_given) {
        o.max_connections = o.max_seqs + o.queue + 32;
        if (o.max_connections > VKV_HTTP_MAX_CONNECTIONS) o.max_connections = VKV_HTTP_MAX_CONNECTIONS;
    }
    vkv_http_params hp = {.host = o.host, .port = (uint16_t)o.port, .api_key = o.api_key, .max_body = (size_t)o.max_body,
                          .log = !o.quiet, .alias = o.alias, .strict_model = o.strict_model,
                          .idle_timeout_s = (unsigned)o.timeout_s, .max_connections = (unsigned)o.max_connections,
                          .cors_origin = o.cors, .metrics_public = o.metrics_public};
    if ((st = vkv_http_start(&hp, e, &http))) goto out;
    bool v6 = strchr(o.host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    fprintf(stderr, "vkvector serve: listening on http://%s%s%s:%u (model %s, up to %lld sequences at once)\n",
            v6 ? "[" : "", o.host, v6 ? "]" : "", vkv_http_port(http), vkv_engine_model_id(e), (long long)o.max_seqs);
    print_sampling(&sampling);
    fflush(stderr);
    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0) {}
    fprintf(stderr, "vkvector serve: %s: no new requests; finishing the running ones (a second signal cuts them)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    pthread_t impatient;
    if (pthread_create(&impatient, NULL, second_signal, &stop_signals) == 0) pthread_detach(impatient);
    vkv_engine_stop_admitting(e); /* queued requests get 503 now; the running ones go on */
out:
    vkv_http_stop(http);   /* running streams end first: the engine still runs them */
    vkv_engine_free(e);
    vkv_session_close(s);
    if (st) return cli_fail("serve", st);
    fprintf(stderr, "vkvector serve: stopped\n");
    return 0;
}
