#include "serve/openai.h"

#include "core/json.h"
#include "core/json_write.h"
#include "core/utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

static void error_vset(vkv_oai_error *err, int http_status, const char *type, const char *param, const char *code,
                       const char *fmt, va_list ap)
{
    err->http_status = http_status;
    err->type = type ? type : http_status >= 500 ? "server_error" : "invalid_request_error";
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
}

void vkv_oai_error_set(vkv_oai_error *err, int http_status, const char *type, const char *param, const char *code,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, http_status, type, param, code, fmt, ap);
    va_end(ap);
}

void vkv_oai_error_from_event(vkv_oai_error *err, const vkv_seq_event *ev)
{
    int status = ev->http_status >= 400 && ev->http_status <= 599 ? ev->http_status : 500;
    vkv_oai_error_set(err, status, ev->type, ev->param, ev->code, "%s",
                      ev->message[0] ? ev->message : "the request failed");
}

/* A 400 naming the parameter; returns false so parsers `return bad(...)`. */
static bool bad(vkv_oai_error *err, const char *param, const char *fmt, ...) VKV_PRINTF(3, 4);
static bool bad(vkv_oai_error *err, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, 400, "invalid_request_error", param, NULL, fmt, ap);
    va_end(ap);
    return false;
}

static bool oom(vkv_oai_error *err)
{
    vkv_oai_error_set(err, 500, "server_error", NULL, NULL, "out of memory reading the request");
    return false;
}

/* ---- typed fields ---- */

/* A member, NULL when absent or null (OpenAI treats a null optional field as absent). */
static const vkv_json *field(const vkv_json *obj, const char *key)
{
    const vkv_json *v = vkv_json_get(obj, key);
    return v && v->type != VKV_JSON_NULL ? v : NULL;
}

static const char *type_name(const vkv_json *v)
{
    switch (v->type) {
    case VKV_JSON_NULL: return "null";
    case VKV_JSON_BOOL: return "a boolean";
    case VKV_JSON_NUMBER: return "a number";
    case VKV_JSON_STRING: return "a string";
    case VKV_JSON_ARRAY: return "an array";
    case VKV_JSON_OBJECT: return "an object";
    }
    return "a value";
}

static bool is_integer(const vkv_json *v) { return v->type == VKV_JSON_NUMBER && isfinite(v->number) && v->number == floor(v->number); }

/* An integer in [lo, hi]. */
static bool get_int(const vkv_json *v, const char *param, double lo, double hi, int64_t *out, vkv_oai_error *err)
{
    if (!is_integer(v)) {
        if (v->type == VKV_JSON_NUMBER) return bad(err, param, "'%s' must be an integer", param);
        return bad(err, param, "'%s' must be an integer, not %s", param, type_name(v));
    }
    if (v->number < lo || v->number > hi)
        return bad(err, param, "'%s' must be in [%.0f, %.0f] (got %g)", param, lo, hi, v->number);
    *out = (int64_t)v->number;
    return true;
}

static bool get_number(const vkv_json *v, const char *param, double *out, vkv_oai_error *err)
{
    if (v->type != VKV_JSON_NUMBER) return bad(err, param, "'%s' must be a number, not %s", param, type_name(v));
    if (!isfinite(v->number)) return bad(err, param, "'%s' is too large", param);
    *out = v->number;
    return true;
}

static bool get_bool(const vkv_json *v, const char *param, bool *out, vkv_oai_error *err)
{
    if (v->type != VKV_JSON_BOOL) return bad(err, param, "'%s' must be a boolean, not %s", param, type_name(v));
    *out = v->boolean;
    return true;
}

/* A string without NUL characters (the engine's strings are NUL-terminated). */
static bool check_string(const vkv_json *v, const char *param, vkv_oai_error *err)
{
    if (v->type != VKV_JSON_STRING) return bad(err, param, "'%s' must be a string, not %s", param, type_name(v));
    if (strlen(v->string) != v->string_len) return bad(err, param, "'%s' must not contain NUL characters", param);
    return true;
}

static bool dup_string(const vkv_json *v, const char *param, char **out, vkv_oai_error *err)
{
    if (!check_string(v, param, err)) return false;
    *out = strdup(v->string);
    return *out ? true : oom(err);
}

/* A string into a fixed buffer, refused when it does not fit. */
static bool copy_string(const vkv_json *v, const char *param, char *out, size_t cap, vkv_oai_error *err)
{
    if (!check_string(v, param, err)) return false;
    if (v->string_len >= cap) return bad(err, param, "'%s' is too long (at most %zu bytes)", param, cap - 1);
    memcpy(out, v->string, v->string_len + 1);
    return true;
}

/* ---- the request's parts ---- */

/* A parameter's path ("messages.[2].content"); a path too long is cut. */
static void path(char *o, size_t cap, const char *fmt, ...) VKV_PRINTF(3, 4);
static void path(char *o, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o, cap, fmt, ap);
    va_end(ap);
}

static bool parse_content(const vkv_json *c, const char *param, char **out, vkv_oai_error *err)
{
    if (c->type == VKV_JSON_STRING) return dup_string(c, param, out, err);
    if (c->type != VKV_JSON_ARRAY)
        return bad(err, param, "'%s' must be a string or an array of content parts, not %s", param, type_name(c));
    /* text parts joined by newlines */
    vkv_strbuf b = {0};
    for (size_t j = 0; j < c->n_items; j++) {
        char p[96];
        const vkv_json *part = c->items[j];
        path(p, sizeof p, "%s.[%zu]", param, j);
        bool ok = false;
        if (part->type != VKV_JSON_OBJECT) {
            bad(err, p, "'%s' must be an object, not %s", p, type_name(part));
        } else {
            const vkv_json *type = field(part, "type"), *text = field(part, "text");
            char pt[96];
            path(pt, sizeof pt, "%s.type", p);
            if (!type) bad(err, pt, "'%s' is required", pt);
            else if (type->type != VKV_JSON_STRING) bad(err, pt, "'%s' must be a string, not %s", pt, type_name(type));
            else if (strcmp(type->string, "text"))
                bad(err, pt, "'%s': only \"text\" content parts are supported", pt);
            else {
                path(pt, sizeof pt, "%s.text", p);
                if (!text) bad(err, pt, "'%s' is required", pt);
                else if (check_string(text, pt, err)) {
                    if (j) vkv_strbuf_put(&b, "\n", 1);
                    vkv_strbuf_put(&b, text->string, text->string_len);
                    ok = true;
                }
            }
        }
        if (!ok) {
            free(b.p);
            return false;
        }
    }
    if (!b.p) vkv_strbuf_put(&b, "", 0);
    if (b.oom) {
        free(b.p);
        return oom(err);
    }
    *out = b.p;
    return true;
}

static bool parse_messages(const vkv_json *root, vkv_gen_request *g, vkv_oai_error *err)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    const vkv_json *ms = field(root, "messages");
    if (!ms) return bad(err, "messages", "'messages' is required");
    if (ms->type != VKV_JSON_ARRAY) return bad(err, "messages", "'messages' must be an array, not %s", type_name(ms));
    if (!ms->n_items) return bad(err, "messages", "'messages' must hold at least one message");
    g->messages = calloc(ms->n_items, sizeof *g->messages);
    if (!g->messages) return oom(err);
    for (size_t i = 0; i < ms->n_items; i++) {
        const vkv_json *m = ms->items[i];
        char p[96];
        path(p, sizeof p, "messages.[%zu]", i);
        if (m->type != VKV_JSON_OBJECT) return bad(err, p, "'%s' must be an object, not %s", p, type_name(m));
        g->n_messages = i + 1;
        vkv_gen_message *gm = &g->messages[i];
        path(p, sizeof p, "messages.[%zu].role", i);
        const vkv_json *role = field(m, "role");
        if (!role) return bad(err, p, "'%s' is required", p);
        if (!check_string(role, p, err)) return false;
        bool known = false;
        for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) known |= !strcmp(role->string, roles[r]);
        if (!known)
            return bad(err, p, "'%s' is '%s': must be one of system, developer, user, assistant, tool", p,
                       role->string);
        if (!(gm->role = strdup(role->string))) return oom(err);
        path(p, sizeof p, "messages.[%zu].content", i);
        const vkv_json *content = field(m, "content");
        if (!content) {
            /* an assistant's turn may come without content (OpenAI: with tool calls) */
            if (strcmp(role->string, "assistant")) return bad(err, p, "'%s' is required", p);
            if (!(gm->content = strdup(""))) return oom(err);
            continue;
        }
        if (!parse_content(content, p, &gm->content, err)) return false;
    }
    return true;
}

static bool parse_prompt(const vkv_json *root, vkv_gen_request *g, vkv_oai_error *err)
{
    const vkv_json *pr = field(root, "prompt");
    if (!pr) return bad(err, "prompt", "'prompt' is required");
    if (pr->type == VKV_JSON_STRING) {
        g->kind = VKV_GEN_TEXT;
        return dup_string(pr, "prompt", &g->prompt, err);
    }
    if (pr->type != VKV_JSON_ARRAY)
        return bad(err, "prompt", "'prompt' must be a string, an array of one string or an array of token ids, not %s",
                   type_name(pr));
    if (!pr->n_items) return bad(err, "prompt", "'prompt' must not be empty");
    if (pr->items[0]->type == VKV_JSON_STRING) {
        if (pr->n_items != 1) return bad(err, "prompt", "'prompt': one prompt per request (got %zu)", pr->n_items);
        g->kind = VKV_GEN_TEXT;
        return dup_string(pr->items[0], "prompt", &g->prompt, err);
    }
    if (pr->items[0]->type == VKV_JSON_ARRAY)
        return bad(err, "prompt", "'prompt': one prompt per request (got an array of token id arrays)");
    g->kind = VKV_GEN_IDS;
    g->prompt_ids = malloc(pr->n_items * sizeof *g->prompt_ids);
    if (!g->prompt_ids) return oom(err);
    for (size_t i = 0; i < pr->n_items; i++) {
        int64_t id;
        if (!is_integer(pr->items[i]))
            return bad(err, "prompt", "'prompt': element %zu must be a token id (an integer), not %s", i,
                       pr->items[i]->type == VKV_JSON_NUMBER ? "a fraction" : type_name(pr->items[i]));
        if (!get_int(pr->items[i], "prompt", 0, INT32_MAX, &id, err)) return false;
        g->prompt_ids[i] = (int32_t)id;
    }
    g->n_prompt_ids = pr->n_items;
    return true;
}

static bool parse_stop(const vkv_json *root, vkv_gen_request *g, vkv_oai_error *err)
{
    const vkv_json *st = field(root, "stop");
    if (!st) return true;
    const vkv_json *const *items = &st;
    size_t n = 1;
    if (st->type == VKV_JSON_ARRAY) {
        items = (const vkv_json *const *)st->items;
        n = st->n_items;
        if (n > VKV_GEN_MAX_STOP)
            return bad(err, "stop", "'stop' holds at most %d sequences (got %zu)", VKV_GEN_MAX_STOP, n);
    } else if (st->type != VKV_JSON_STRING) {
        return bad(err, "stop", "'stop' must be a string or an array of strings, not %s", type_name(st));
    }
    for (size_t i = 0; i < n; i++) {
        if (!check_string(items[i], "stop", err)) return false;
        if (!items[i]->string_len) return bad(err, "stop", "'stop' sequences must not be empty");
        if (!(g->stop[i] = strdup(items[i]->string))) return oom(err);
        g->n_stop = i + 1;
    }
    return true;
}

static bool parse_press(const vkv_json *root, vkv_press_request *p, vkv_oai_error *err)
{
    const vkv_json *x = field(root, "vkvector"), *v;
    if (!x) return true;
    if (x->type != VKV_JSON_OBJECT) return bad(err, "vkvector", "'vkvector' must be an object, not %s", type_name(x));
    int64_t n;
    if ((v = field(x, "press"))) {
        if (!copy_string(v, "vkvector.press", p->press, sizeof p->press, err)) return false;
        p->has_press = true;
    }
    if ((v = field(x, "compression"))) {
        if (!get_number(v, "vkvector.compression", &p->compression, err)) return false;
        if (!(p->compression >= 0 && p->compression < 1))
            return bad(err, "vkvector.compression", "'vkvector.compression' must be in [0, 1) (got %g)", p->compression);
        p->has_compression = true;
    }
    if ((v = field(x, "vector"))) {
        if (!get_bool(v, "vkvector.vector", &p->vector, err)) return false;
        p->has_vector = true;
    }
    if ((v = field(x, "pa"))) {
        if (!get_number(v, "vkvector.pa", &p->pa, err)) return false;
        if (!(p->pa >= 0 && p->pa <= 1))
            return bad(err, "vkvector.pa", "'vkvector.pa' must be in [0, 1] (got %g)", p->pa);
        p->has_pa = true;
    }
    if ((v = field(x, "kv_type"))) {
        static const char *const types[] = {"f16", "f32", "q8_0", "q4_0"};
        if (!check_string(v, "vkvector.kv_type", err)) return false;
        bool known = false;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) known |= !strcmp(v->string, types[i]);
        if (!known) return bad(err, "vkvector.kv_type", "'vkvector.kv_type' must be one of f16, f32, q8_0, q4_0");
        memcpy(p->kv_type, v->string, v->string_len + 1);
        p->has_kv_type = true;
    }
    if ((v = field(x, "compress_every"))) {
        if (!get_int(v, "vkvector.compress_every", 0, INT32_MAX, &n, err)) return false;
        p->compress_every = (uint32_t)n;
        p->has_compress_every = true;
    }
    if ((v = field(x, "max_kv_tokens"))) {
        if (!get_int(v, "vkvector.max_kv_tokens", 0, INT32_MAX, &n, err)) return false;
        p->max_kv_tokens = (uint32_t)n;
        p->has_max_kv_tokens = true;
    }
    if ((v = field(x, "query_aware"))) {
        if (!get_bool(v, "vkvector.query_aware", &p->query_aware, err)) return false;
        p->has_query_aware = true;
    }
    return true;
}

/* max_tokens a request leaves out (GET /props reports it) */
#define DEFAULT_MAX_TOKENS 0u /* until the context is full */

/* A sampler's number in [lo, hi], or (lo, hi] when lo_open. */
static bool get_sampler_value(const vkv_json *v, const char *param, double lo, bool lo_open, double hi, float *out,
                              vkv_oai_error *err)
{
    double d = 0;
    if (!get_number(v, param, &d, err)) return false;
    if (!((lo_open ? d > lo : d >= lo) && d <= hi))
        return bad(err, param, "'%s' must be in %c%g, %g] (got %g)", param, lo_open ? '(' : '[', lo, hi, d);
    *out = (float)d;
    return true;
}

/* OpenAI's fields the server does not honour: refused by name unless the
 * value asks for nothing (docs/SERVE.md's field table lists each): the
 * string `ok` or `ok2` (with in_array, an array of just it: modalities'
 * ["text"]), or false when ok_false. */
typedef struct unhonoured_field {
    const char *name;
    const char *why;
    const char *ok, *ok2;
    bool ok_false, in_array;
} unhonoured_field;

static const unhonoured_field UNHONOURED_CHAT[] = {
    {"tools", "tool calling is not supported", NULL, NULL, false, false},
    {"tool_choice", "tool calling is not supported", "none", NULL, false, false},
    {"parallel_tool_calls", "tool calling is not supported", NULL, NULL, false, false},
    {"functions", "function calling is not supported", NULL, NULL, false, false},
    {"function_call", "function calling is not supported", "none", NULL, false, false},
    {"audio", "audio output is not supported", NULL, NULL, false, false},
    {"modalities", "only text output is supported", "text", NULL, false, true},
    {"prediction", "predicted outputs are not supported", NULL, NULL, false, false},
    {"web_search_options", "web search is not supported", NULL, NULL, false, false},
    {"reasoning_effort", "the served model takes no reasoning effort", NULL, NULL, false, false},
    {"verbosity", "the served model takes no verbosity setting", NULL, NULL, false, false},
    {"service_tier", "there is one service tier", "auto", "default", false, false},
    {"store", "completions are not stored", NULL, NULL, true, false},
    {"metadata", "completions are not stored, so they carry no metadata", NULL, NULL, false, false},
};
static const unhonoured_field UNHONOURED_COMPLETIONS[] = {
    {"suffix", "a suffix (insertion) is not supported", "", NULL, false, false},
};

static bool refuse_unhonoured(const vkv_json *root, const unhonoured_field *f, size_t n, vkv_oai_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const vkv_json *v = field(root, f[i].name);
        if (!v) continue;
        const vkv_json *str = !f[i].in_array ? v : v->type == VKV_JSON_ARRAY && v->n_items == 1 ? v->items[0] : NULL;
        if (str && str->type == VKV_JSON_STRING &&
            ((f[i].ok && !strcmp(str->string, f[i].ok)) || (f[i].ok2 && !strcmp(str->string, f[i].ok2))))
            continue;
        if (f[i].ok_false && v->type == VKV_JSON_BOOL && !v->boolean) continue;
        return bad(err, f[i].name, "'%s': %s", f[i].name, f[i].why);
    }
    return true;
}

/* logit_bias: {"token id": bias}, each id an integer (the engine checks it
 * against the vocabulary), each bias in [-100, 100]. */
#define MAX_LOGIT_BIAS 1024
static bool parse_logit_bias(const vkv_json *v, vkv_gen_request *g, vkv_oai_error *err)
{
    if (v->type != VKV_JSON_OBJECT)
        return bad(err, "logit_bias", "'logit_bias' must be an object mapping token ids to biases, not %s",
                   type_name(v));
    if (v->n_items > MAX_LOGIT_BIAS)
        return bad(err, "logit_bias", "'logit_bias' holds at most %d tokens (got %zu)", MAX_LOGIT_BIAS, v->n_items);
    if (!v->n_items) return true;
    if (!(g->logit_bias = malloc(sizeof *g->logit_bias * v->n_items))) return oom(err);
    for (size_t i = 0; i < v->n_items; i++) {
        const char *key = v->keys[i];
        char *end;
        long long id = strtoll(key, &end, 10);
        char p[96];
        path(p, sizeof p, "logit_bias.%.80s", key);
        if (!*key || *end || key[0] == '-' || key[0] == '+' || key[0] == ' ' || id > INT32_MAX)
            return bad(err, p, "'logit_bias': key '%.80s' is not a token id (a non-negative integer)", key);
        double b = 0;
        if (!get_number(v->items[i], p, &b, err)) return false;
        if (!(b >= -100 && b <= 100)) return bad(err, p, "'%s' must be in [-100, 100] (got %g)", p, b);
        for (size_t j = 0; j < i; j++)
            if (g->logit_bias[j].id == (int32_t)id)
                return bad(err, p, "'logit_bias': token %lld is given twice", id);
        g->logit_bias[i] = (vkv_logit_bias){(int32_t)id, (float)b};
    }
    g->sampling.logit_bias = g->logit_bias;
    g->sampling.n_logit_bias = v->n_items;
    return true;
}

/* response_format: {"type": "text"}, {"type": "json_object"}, or
 * {"type": "json_schema", "json_schema": {"name", "schema", "strict",
 * "description"}}, the schema compiled here (serve/json_constraint.h names
 * the keyword it refuses). */
static bool parse_response_format(const vkv_json *v, vkv_gen_request *g, vkv_oai_error *err)
{
    if (v->type != VKV_JSON_OBJECT)
        return bad(err, "response_format", "'response_format' must be an object, not %s", type_name(v));
    const vkv_json *t = field(v, "type"), *js = field(v, "json_schema"), *x;
    if (!t) return bad(err, "response_format.type", "'response_format.type' is required");
    if (!check_string(t, "response_format.type", err)) return false;
    const vkv_json *schema = NULL;
    if (!strcmp(t->string, "text")) return true;
    if (!strcmp(t->string, "json_schema")) {
        if (!js) return bad(err, "response_format.json_schema", "'response_format.json_schema' is required");
        if (js->type != VKV_JSON_OBJECT)
            return bad(err, "response_format.json_schema", "'response_format.json_schema' must be an object, not %s",
                       type_name(js));
        if ((x = field(js, "name")) && !check_string(x, "response_format.json_schema.name", err)) return false;
        if ((x = field(js, "description")) && !check_string(x, "response_format.json_schema.description", err))
            return false;
        bool strict;
        if ((x = field(js, "strict")) && !get_bool(x, "response_format.json_schema.strict", &strict, err)) return false;
        schema = field(js, "schema");
        if (schema && schema->type != VKV_JSON_OBJECT && schema->type != VKV_JSON_BOOL)
            return bad(err, VKV_JSON_CONSTRAINT_PARAM, "'%s' must be an object, not %s", VKV_JSON_CONSTRAINT_PARAM,
                       type_name(schema));
        if (!schema) return bad(err, VKV_JSON_CONSTRAINT_PARAM, "'%s' is required", VKV_JSON_CONSTRAINT_PARAM);
    } else if (strcmp(t->string, "json_object"))
        return bad(err, "response_format.type", "'response_format.type' is '%.40s': must be text, json_object or "
                   "json_schema", t->string);
    char param[96], msg[400];
    if (!vkv_json_constraint_compile(schema, &g->constraint, param, sizeof param, msg, sizeof msg))
        return param[0] ? bad(err, param, "%s", msg) : oom(err);
    return true;
}

/* logprobs: chat's boolean with top_logprobs, or completions' count of
 * alternatives; echo (completions). */
static bool parse_logprobs(const vkv_json *root, vkv_oai_route route, vkv_gen_request *g, vkv_oai_error *err)
{
    const vkv_json *v;
    int64_t n = 0;
    if (route == VKV_OAI_CHAT) {
        if ((v = field(root, "logprobs")) && !get_bool(v, "logprobs", &g->logprobs, err)) return false;
        if ((v = field(root, "top_logprobs"))) {
            if (!get_int(v, "top_logprobs", 0, VKV_GEN_MAX_TOP_LOGPROBS, &n, err)) return false;
            if (!g->logprobs)
                return bad(err, "top_logprobs", "'top_logprobs' is only allowed when 'logprobs' is true");
            g->top_logprobs = (uint32_t)n;
        }
        return true;
    }
    if ((v = field(root, "logprobs"))) {
        if (!get_int(v, "logprobs", 0, VKV_GEN_MAX_TOP_LOGPROBS, &n, err)) return false;
        g->logprobs = true;
        g->top_logprobs = (uint32_t)n;
    }
    if ((v = field(root, "echo")) && !get_bool(v, "echo", &g->echo, err)) return false;
    if ((v = field(root, "best_of"))) {
        if (!get_int(v, "best_of", 1, 128, &n, err)) return false;
        if (n != 1) return bad(err, "best_of", "'best_of': only one candidate per request is supported (got %lld)", (long long)n);
    }
    return true;
}

/* The fields both routes share; `defaults` for the sampling fields left out. */
static bool parse_common(const vkv_json *root, vkv_oai_request *r, const vkv_sampler_params *defaults,
                         vkv_oai_error *err)
{
    vkv_gen_request *g = &r->gen;
    const vkv_json *v;
    int64_t n;
    if ((v = field(root, "model")) && !copy_string(v, "model", r->model, sizeof r->model, err)) return false;
    if ((v = field(root, "n"))) {
        if (!get_int(v, "n", 1, 128, &n, err)) return false;
        r->n = (uint32_t)n;
    }
    /* max_completion_tokens is the newer name; it wins when both are given */
    g->max_tokens = DEFAULT_MAX_TOKENS;
    const vkv_json *mt = field(root, "max_completion_tokens");
    const char *mt_name = "max_completion_tokens";
    if (!mt) {
        mt = field(root, "max_tokens");
        mt_name = "max_tokens";
    }
    if (!parse_logprobs(root, r->route, g, err)) return false;
    if (mt) {
        /* 0 with echo: the prompt's logprobs alone (what evaluation harnesses ask) */
        const bool echo_only = r->route == VKV_OAI_COMPLETIONS && g->echo;
        if (!get_int(mt, mt_name, echo_only ? 0 : 1, INT32_MAX, &n, err)) return false;
        g->max_tokens = (uint32_t)n;
        g->no_generation = n == 0;
    }
    g->sampling = *defaults;
    g->sampling.logit_bias = NULL; /* the request's own, below */
    g->sampling.n_logit_bias = 0;
    if ((v = field(root, "temperature")) && !get_sampler_value(v, "temperature", 0, false, 2, &g->sampling.temperature, err))
        return false;
    if ((v = field(root, "top_p")) && !get_sampler_value(v, "top_p", 0, true, 1, &g->sampling.top_p, err)) return false;
    /* llama-server's extension samplers, under its names and meanings */
    if ((v = field(root, "top_k"))) {
        if (!get_int(v, "top_k", 0, INT32_MAX, &n, err)) return false;
        g->sampling.top_k = (int32_t)n;
    }
    if ((v = field(root, "min_p")) && !get_sampler_value(v, "min_p", 0, false, 1, &g->sampling.min_p, err)) return false;
    if ((v = field(root, "repeat_penalty")) &&
        !get_sampler_value(v, "repeat_penalty", 0, true, 10, &g->sampling.repeat_penalty, err))
        return false;
    if ((v = field(root, "presence_penalty")) &&
        !get_sampler_value(v, "presence_penalty", -2, false, 2, &g->sampling.presence_penalty, err))
        return false;
    if ((v = field(root, "frequency_penalty")) &&
        !get_sampler_value(v, "frequency_penalty", -2, false, 2, &g->sampling.frequency_penalty, err))
        return false;
    if ((v = field(root, "logit_bias")) && !parse_logit_bias(v, g, err)) return false;
    if ((v = field(root, "response_format")) && !parse_response_format(v, g, err)) return false;
    if (r->route == VKV_OAI_CHAT ? !refuse_unhonoured(root, UNHONOURED_CHAT, sizeof UNHONOURED_CHAT / sizeof *UNHONOURED_CHAT, err)
                                 : !refuse_unhonoured(root, UNHONOURED_COMPLETIONS,
                                                      sizeof UNHONOURED_COMPLETIONS / sizeof *UNHONOURED_COMPLETIONS, err))
        return false;
    /* identifiers OpenAI uses for abuse monitoring and cache routing: checked, not used (the prefix cache
     * matches prompts by their tokens) */
    static const char *const ids[] = {"user", "safety_identifier", "prompt_cache_key"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if ((v = field(root, ids[i])) && !check_string(v, ids[i], err)) return false;
    if ((v = field(root, "seed"))) {
        /* OpenAI's seed is a 64-bit integer (the largest double below 2^63 is the top) */
        if (!get_int(v, "seed", -9223372036854775808.0, 9223372036854774784.0, &n, err)) return false;
        g->sampling.seed = (uint64_t)n;
        r->has_seed = true;
    }
    if (!parse_stop(root, g, err)) return false;
    if ((v = field(root, "stream")) && !get_bool(v, "stream", &g->stream, err)) return false;
    if ((v = field(root, "stream_options"))) {
        if (v->type != VKV_JSON_OBJECT)
            return bad(err, "stream_options", "'stream_options' must be an object, not %s", type_name(v));
        if (!g->stream)
            return bad(err, "stream_options", "'stream_options' is only allowed when 'stream' is true");
        const vkv_json *iu = field(v, "include_usage"), *io = field(v, "include_obfuscation");
        if (iu && !get_bool(iu, "stream_options.include_usage", &r->include_usage, err)) return false;
        bool obfuscation; /* OpenAI's padding against length side channels: never written here */
        if (io && !get_bool(io, "stream_options.include_obfuscation", &obfuscation, err)) return false;
    }
    return parse_press(root, &g->press, err);
}

/* JSON text is UTF-8 (RFC 8259 §8.1): any other byte sequence is refused
 * before parsing, so every string reaching the engine is valid UTF-8. */
static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = vkv_utf8_valid_len((const unsigned char *)s + i, n - i);
        if (!len) return false;
        i += len;
    }
    return true;
}

/* A body that is a JSON object (*doc to free, *root its object); else a 400
 * and nothing to free. */
static bool parse_object(const char *body, size_t len, vkv_json_doc **doc, const vkv_json **root, vkv_oai_error *err)
{
    if (!valid_utf8(body, len)) return bad(err, NULL, "the request body is not valid UTF-8");
    if (vkv_json_parse(body, len, doc)) {
        bad(err, NULL, "could not parse the JSON body of the request: %s", vkv_last_error());
        vkv_clear_error();
        return false;
    }
    *root = vkv_json_root(*doc);
    if ((*root)->type == VKV_JSON_OBJECT) return true;
    bad(err, NULL, "the request body must be a JSON object, not %s", type_name(*root));
    vkv_json_free(*doc);
    return false;
}

bool vkv_oai_parse(vkv_oai_route route, const char *body, size_t len, vkv_oai_request *out, vkv_oai_error *err)
{
    return vkv_oai_parse_with(route, body, len, &(vkv_oai_parse_opts){0}, out, err);
}

/* The number of elements of the body's top-level "prompt" array, counting
 * no further than `most` + 1, by the pull reader (no tree, nothing kept);
 * 0 for a body that is not such an object (the tree's parse says why). */
static size_t prompt_elements(const char *body, size_t len, size_t most)
{
    vkv_json_reader r;
    vkv_json_reader_init(&r, body, len);
    size_t n = 0;
    bool first = true, done = false;
    vkv_json_ws(&r);
    if (r.s >= r.end || *r.s != '{') goto out;
    r.s++;
    while (!vkv_json_object_next(&r, &first, &done) && !done) {
        vkv_json_ws(&r);
        if (strcmp(r.buf, "prompt") || r.s >= r.end || *r.s != '[') {
            if (vkv_json_skip_value(&r)) break;
            continue;
        }
        r.s++;
        bool item_first = true, end = false;
        while (n <= most && !vkv_json_array_next(&r, &item_first, &end) && !end && !vkv_json_skip_value(&r)) n++;
        break;
    }
out:
    vkv_clear_error();
    vkv_json_reader_free(&r);
    return n;
}

bool vkv_oai_parse_with(vkv_oai_route route, const char *body, size_t len, const vkv_oai_parse_opts *o,
                        vkv_oai_request *out, vkv_oai_error *err)
{
    memset(out, 0, sizeof *out);
    out->route = route;
    const vkv_sampler_params openai = vkv_gen_sampling_defaults();
    const vkv_sampler_params *defaults = o->sampling ? o->sampling : &openai;
    if (route == VKV_OAI_COMPLETIONS && o->n_ctx && valid_utf8(body, len) &&
        prompt_elements(body, len, o->n_ctx) > o->n_ctx) {
        vkv_oai_error_set(err, 400, "invalid_request_error", "prompt", "context_length_exceeded",
                          "this model's maximum context length is %u tokens; the prompt has more token ids", o->n_ctx);
        return false;
    }
    vkv_json_doc *doc;
    const vkv_json *root;
    if (!parse_object(body, len, &doc, &root, err)) return false;
    out->gen.kind = VKV_GEN_CHAT;
    bool ok = route == VKV_OAI_CHAT ? parse_messages(root, &out->gen, err) : parse_prompt(root, &out->gen, err);
    ok = ok && parse_common(root, out, defaults, err);
    vkv_json_free(doc);
    if (!ok) vkv_gen_request_free(&out->gen);
    return ok;
}

/* ---- llama-server's utility routes ---- */

bool vkv_oai_parse_tokenize(const char *body, size_t len, vkv_oai_tokenize *out, vkv_oai_error *err)
{
    *out = (vkv_oai_tokenize){.parse_special = true}; /* llama-server's defaults */
    vkv_json_doc *doc;
    const vkv_json *root, *v;
    if (!parse_object(body, len, &doc, &root, err)) return false;
    bool ok = true;
    /* llama-server also takes a mixed array of strings and ids; here text only */
    if (!(v = field(root, "content"))) ok = bad(err, "content", "'content' is required");
    else ok = dup_string(v, "content", &out->content, err);
    if (ok) out->len = v->string_len;
    if (ok && (v = field(root, "add_special"))) ok = get_bool(v, "add_special", &out->add_special, err);
    if (ok && (v = field(root, "parse_special"))) ok = get_bool(v, "parse_special", &out->parse_special, err);
    if (ok && (v = field(root, "with_pieces"))) ok = get_bool(v, "with_pieces", &out->with_pieces, err);
    vkv_json_free(doc);
    if (!ok) {
        free(out->content);
        out->content = NULL;
    }
    return ok;
}

bool vkv_oai_parse_detokenize(const char *body, size_t len, int32_t n_vocab, int32_t **ids, size_t *n_ids,
                              vkv_oai_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    vkv_json_doc *doc;
    const vkv_json *root, *v;
    if (!parse_object(body, len, &doc, &root, err)) return false;
    bool ok = true;
    if (!(v = field(root, "tokens"))) ok = bad(err, "tokens", "'tokens' is required");
    else if (v->type != VKV_JSON_ARRAY)
        ok = bad(err, "tokens", "'tokens' must be an array of token ids, not %s", type_name(v));
    else if (v->n_items && !(*ids = malloc(v->n_items * sizeof **ids))) ok = oom(err);
    for (size_t i = 0; ok && i < v->n_items; i++) {
        const vkv_json *t = v->items[i];
        if (!is_integer(t))
            ok = bad(err, "tokens", "'tokens': element %zu must be a token id (an integer), not %s", i,
                     t->type == VKV_JSON_NUMBER ? "a fraction" : type_name(t));
        else if (!(t->number >= 0 && t->number < n_vocab))
            ok = bad(err, "tokens", "'tokens': element %zu (%.0f) is outside the vocabulary (0..%d)", i, t->number,
                     n_vocab - 1);
        else (*ids)[i] = (int32_t)t->number;
    }
    if (ok) *n_ids = v->n_items;
    vkv_json_free(doc);
    if (!ok) {
        free(*ids);
        *ids = NULL;
    }
    return ok;
}

/* ---- writers: the project's JSON writer into a memory stream ---- */

typedef struct jout {
    FILE *f;
    char *p;
    size_t n;
    vkv_json_writer w;
} jout;

static bool jout_open(jout *j, vkv_strbuf *out)
{
    j->p = NULL;
    j->n = 0;
    j->f = out->oom ? NULL : open_memstream(&j->p, &j->n);
    if (!j->f) {
        out->oom = true;
        return false;
    }
    vkv_json_init(&j->w, j->f, false);
    return true;
}

static void jout_close(jout *j, vkv_strbuf *out)
{
    if (fclose(j->f)) out->oom = true;
    else vkv_strbuf_put(out, j->p, j->n);
    free(j->p);
}

static void str_or_null(vkv_json_writer *w, const char *key, const char *s)
{
    vkv_json_key(w, key);
    if (s && *s) vkv_json_str(w, s);
    else vkv_json_null(w);
}

static void write_head(vkv_json_writer *w, const vkv_oai_meta *m, const char *object)
{
    vkv_json_key(w, "id");
    vkv_json_str(w, m->id);
    vkv_json_key(w, "object");
    vkv_json_str(w, object);
    vkv_json_key(w, "created");
    vkv_json_int(w, m->created);
    vkv_json_key(w, "model");
    vkv_json_str(w, m->model);
}

static void write_usage(vkv_json_writer *w, const vkv_seq_event *done)
{
    vkv_json_key(w, "usage");
    vkv_json_begin_object(w);
    vkv_json_key(w, "prompt_tokens");
    vkv_json_uint(w, done->prompt_tokens);
    vkv_json_key(w, "completion_tokens");
    vkv_json_uint(w, done->completion_tokens);
    vkv_json_key(w, "total_tokens");
    vkv_json_uint(w, (uint64_t)done->prompt_tokens + done->completion_tokens);
    vkv_json_key(w, "prompt_tokens_details");
    vkv_json_begin_object(w);
    vkv_json_key(w, "cached_tokens");
    vkv_json_uint(w, done->cached_tokens);
    vkv_json_end_object(w);
    vkv_json_end_object(w);
}

static void write_compression(vkv_json_writer *w, const vkv_gen_compression *c)
{
    vkv_json_key(w, "vkvector");
    vkv_json_begin_object(w);
    vkv_json_key(w, "press");
    vkv_json_str(w, c->press ? c->press : "none");
    vkv_json_key(w, "compression");
    vkv_json_num(w, c->compression);
    vkv_json_key(w, "vector");
    vkv_json_bool(w, c->vector);
    const struct { const char *key; uint64_t v; } counts[] = {
        {"n_compressed", c->n_compressed}, {"n_retained", c->n_retained}, {"n_approximated", c->n_approximated},
        {"n_evicted", c->n_evicted}, {"kv_bytes_before", c->kv_bytes_before}, {"kv_bytes_after", c->kv_bytes_after},
        {"decode_compressions", c->decode_compressions},
    };
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        vkv_json_key(w, counts[i].key);
        vkv_json_uint(w, counts[i].v);
    }
    if (c->context_cache) {
        /* the compressed-context cache (docs/SERVE.md) */
        vkv_json_key(w, "context_cache");
        vkv_json_begin_object(w);
        vkv_json_key(w, "status");
        vkv_json_str(w, c->context_cache);
        vkv_json_key(w, "shared_bytes");
        vkv_json_uint(w, c->context_shared_bytes);
        vkv_json_key(w, "reason");
        if (c->context_cache_reason) vkv_json_str(w, c->context_cache_reason);
        else vkv_json_null(w);
        vkv_json_end_object(w);
    }
    vkv_json_end_object(w);
}

/* A logprob as a JSON number: OpenAI writes -9999 for an impossible token. */
static void logprob_num(vkv_json_writer *w, float lp) { vkv_json_num(w, isfinite(lp) ? (double)lp : -9999.0); }

/* A token's text and, for chat, its bytes. */
static void token_fields(vkv_json_writer *w, const vkv_oai_meta *m, int32_t id, float lp)
{
    size_t n = 0;
    const char *p = m->piece ? m->piece(m->piece_ctx, id, true, &n) : NULL;
    vkv_json_key(w, "token");
    vkv_json_strn(w, p ? p : "", p ? n : 0);
    vkv_json_key(w, "logprob");
    logprob_num(w, lp);
    vkv_json_key(w, "bytes");
    vkv_json_begin_array(w);
    for (size_t k = 0; p && k < n; k++) vkv_json_int(w, (unsigned char)p[k]);
    vkv_json_end_array(w);
}

size_t vkv_oai_logprobs_end(const vkv_oai_meta *m, const vkv_oai_logprobs *lp)
{
    size_t at = lp->text_offset;
    for (size_t i = 0; i < lp->n; i++) {
        size_t n = 0;
        if (m->piece) m->piece(m->piece_ctx, lp->tokens[i].id, false, &n);
        at += n;
    }
    return at;
}

/* The choice's "logprobs": chat's {"content": [...], "refusal": null}, or
 * completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static void write_logprobs(vkv_json_writer *w, const vkv_oai_meta *m, const vkv_oai_logprobs *lp)
{
    vkv_json_key(w, "logprobs");
    if (!lp) {
        vkv_json_null(w);
        return;
    }
    vkv_json_begin_object(w);
    if (m->route == VKV_OAI_CHAT) {
        vkv_json_key(w, "content");
        vkv_json_begin_array(w);
        for (size_t i = 0; i < lp->n; i++) {
            const vkv_token_logprob *t = &lp->tokens[i];
            vkv_json_begin_object(w);
            token_fields(w, m, t->id, t->logprob);
            vkv_json_key(w, "top_logprobs");
            vkv_json_begin_array(w);
            for (uint32_t k = 0; k < t->n_top; k++) {
                vkv_json_begin_object(w);
                token_fields(w, m, t->top_id[k], t->top_logprob[k]);
                vkv_json_end_object(w);
            }
            vkv_json_end_array(w);
            vkv_json_end_object(w);
        }
        vkv_json_end_array(w);
        vkv_json_key(w, "refusal");
        vkv_json_null(w);
        vkv_json_end_object(w);
        return;
    }
    size_t n;
    const char *p;
    vkv_json_key(w, "tokens");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < lp->n; i++) {
        p = m->piece ? m->piece(m->piece_ctx, lp->tokens[i].id, true, &n) : NULL;
        vkv_json_strn(w, p ? p : "", p ? n : 0);
    }
    vkv_json_end_array(w);
    vkv_json_key(w, "token_logprobs");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < lp->n; i++) {
        if (isnan(lp->tokens[i].logprob)) vkv_json_null(w); /* a prompt's first token */
        else logprob_num(w, lp->tokens[i].logprob);
    }
    vkv_json_end_array(w);
    vkv_json_key(w, "top_logprobs");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < lp->n; i++) {
        const vkv_token_logprob *t = &lp->tokens[i];
        if (isnan(t->logprob)) {
            vkv_json_null(w);
            continue;
        }
        vkv_json_begin_object(w);
        for (uint32_t k = 0; k < t->n_top; k++) {
            p = m->piece ? m->piece(m->piece_ctx, t->top_id[k], true, &n) : NULL;
            char key[512];
            size_t kn = p ? (n < sizeof key - 1 ? n : sizeof key - 1) : 0;
            memcpy(key, p ? p : "", kn);
            key[kn] = 0;
            vkv_json_key(w, key);
            logprob_num(w, t->top_logprob[k]);
        }
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
    vkv_json_key(w, "text_offset");
    vkv_json_begin_array(w);
    size_t at = lp->text_offset;
    for (size_t i = 0; i < lp->n; i++) {
        vkv_json_uint(w, at);
        n = 0;
        if (m->piece) m->piece(m->piece_ctx, lp->tokens[i].id, false, &n);
        at += n;
    }
    vkv_json_end_array(w);
    vkv_json_end_object(w);
}

/* One choice object. whole: the response's (the message with its role and
 * text); else a stream chunk's (the chat delta with role and/or content,
 * text NULL for none). done: its finish reason; NULL: null. */
static void write_choice(vkv_json_writer *w, const vkv_oai_meta *m, bool whole, bool role, uint32_t index,
                         const char *text, size_t len, const vkv_oai_logprobs *lp, const vkv_seq_event *done)
{
    vkv_json_begin_object(w);
    if (m->route == VKV_OAI_CHAT) {
        vkv_json_key(w, "index");
        vkv_json_uint(w, index);
        vkv_json_key(w, whole ? "message" : "delta");
        vkv_json_begin_object(w);
        if (role) {
            vkv_json_key(w, "role");
            vkv_json_str(w, "assistant");
        }
        if (text) {
            vkv_json_key(w, "content");
            vkv_json_strn(w, text, len);
        }
        vkv_json_end_object(w);
    } else {
        vkv_json_key(w, "text");
        vkv_json_strn(w, text ? text : "", text ? len : 0);
        vkv_json_key(w, "index");
        vkv_json_uint(w, index);
    }
    write_logprobs(w, m, lp);
    vkv_json_key(w, "finish_reason");
    if (done) vkv_json_str(w, done->finish_reason ? done->finish_reason : "stop");
    else vkv_json_null(w);
    vkv_json_end_object(w);
}

/* A completion object. whole: the response with choices[0, n) and the
 * usage of `total`; else a stream chunk of one choice (m->choice). total:
 * the usage and the "vkvector" object (a chunk's: its finish reason too);
 * NULL: a chunk before the end. */
static void write_completion(vkv_strbuf *out, const vkv_oai_meta *m, bool whole, bool role,
                             const vkv_oai_choice *choices, size_t n, const vkv_seq_event *total)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_writer *w = &j.w;
    bool chat = m->route == VKV_OAI_CHAT;
    vkv_json_begin_object(w);
    write_head(w, m, !chat ? "text_completion" : whole ? "chat.completion" : "chat.completion.chunk");
    vkv_json_key(w, "choices");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++)
        write_choice(w, m, whole, role, whole ? (uint32_t)i : m->choice, choices[i].text, choices[i].len,
                     choices[i].lp, choices[i].done);
    vkv_json_end_array(w);
    if (whole) {
        write_usage(w, total);
    } else if (m->include_usage) {
        vkv_json_key(w, "usage");
        vkv_json_null(w);
    }
    if (total) write_compression(w, &total->compression);
    vkv_json_end_object(w);
    jout_close(&j, out);
}

void vkv_oai_write_response_n(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_oai_choice *choices, size_t n,
                              const vkv_seq_event *total)
{
    write_completion(out, m, true, true, choices, n, total);
}

void vkv_oai_write_response(vkv_strbuf *out, const vkv_oai_meta *m, const char *text, size_t len,
                            const vkv_oai_logprobs *lp, const vkv_seq_event *done)
{
    const vkv_oai_choice c = {text ? text : "", text ? len : 0, lp, done};
    write_completion(out, m, true, true, &c, 1, done);
}

void vkv_oai_write_first_chunk(vkv_strbuf *out, const vkv_oai_meta *m)
{
    const vkv_oai_choice c = {"", 0, NULL, NULL};
    if (m->route == VKV_OAI_CHAT) write_completion(out, m, false, true, &c, 1, NULL);
}

void vkv_oai_write_text_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const char *text, size_t len,
                              const vkv_oai_logprobs *lp)
{
    const vkv_oai_choice c = {text ? text : "", text ? len : 0, lp, NULL};
    write_completion(out, m, false, false, &c, 1, NULL);
}

void vkv_oai_write_finish_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_seq_event *done)
{
    const vkv_oai_choice c = {NULL, 0, NULL, done};
    write_completion(out, m, false, false, &c, 1, done);
}

void vkv_oai_write_usage_chunk(vkv_strbuf *out, const vkv_oai_meta *m, const vkv_seq_event *done)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_writer *w = &j.w;
    vkv_json_begin_object(w);
    write_head(w, m, m->route == VKV_OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    vkv_json_key(w, "choices");
    vkv_json_begin_array(w);
    vkv_json_end_array(w);
    write_usage(w, done);
    vkv_json_end_object(w);
    jout_close(&j, out);
}

static void write_model_obj(vkv_json_writer *w, const char *model_id, int64_t created)
{
    vkv_json_begin_object(w);
    vkv_json_key(w, "id");
    vkv_json_str(w, model_id);
    vkv_json_key(w, "object");
    vkv_json_str(w, "model");
    vkv_json_key(w, "created");
    vkv_json_int(w, created);
    vkv_json_key(w, "owned_by");
    vkv_json_str(w, "vkvector");
    vkv_json_end_object(w);
}

void vkv_oai_write_models(vkv_strbuf *out, const char *const *model_ids, size_t n_ids, int64_t created)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_begin_object(&j.w);
    vkv_json_key(&j.w, "object");
    vkv_json_str(&j.w, "list");
    vkv_json_key(&j.w, "data");
    vkv_json_begin_array(&j.w);
    for (size_t i = 0; i < n_ids; i++) write_model_obj(&j.w, model_ids[i], created);
    vkv_json_end_array(&j.w);
    vkv_json_end_object(&j.w);
    jout_close(&j, out);
}

void vkv_oai_write_model(vkv_strbuf *out, const char *model_id, int64_t created)
{
    jout j;
    if (!jout_open(&j, out)) return;
    write_model_obj(&j.w, model_id, created);
    jout_close(&j, out);
}

void vkv_oai_write_error(vkv_strbuf *out, const vkv_oai_error *err)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_writer *w = &j.w;
    vkv_json_begin_object(w);
    vkv_json_key(w, "error");
    vkv_json_begin_object(w);
    vkv_json_key(w, "message");
    vkv_json_str(w, err->message);
    vkv_json_key(w, "type");
    vkv_json_str(w, err->type ? err->type : "invalid_request_error");
    str_or_null(w, "param", err->param);
    str_or_null(w, "code", err->code);
    vkv_json_end_object(w);
    vkv_json_end_object(w);
    jout_close(&j, out);
}

/* ---- llama-server's utility routes' responses ---- */

void vkv_oai_write_tokens(vkv_strbuf *out, const int32_t *ids, size_t n, const vkv_oai_piece *pieces)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_writer *w = &j.w;
    vkv_json_begin_object(w);
    vkv_json_key(w, "tokens");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) {
        if (!pieces) {
            vkv_json_int(w, ids[i]);
            continue;
        }
        vkv_json_begin_object(w);
        vkv_json_key(w, "id");
        vkv_json_int(w, ids[i]);
        vkv_json_key(w, "piece");
        /* a piece may be part of a character (byte-level and byte-fallback
         * tokens): then its bytes, as llama-server gives them */
        if (valid_utf8(pieces[i].p, pieces[i].n)) {
            vkv_json_strn(w, pieces[i].p, pieces[i].n);
        } else {
            vkv_json_begin_array(w);
            for (size_t k = 0; k < pieces[i].n; k++) vkv_json_int(w, (unsigned char)pieces[i].p[k]);
            vkv_json_end_array(w);
        }
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
    vkv_json_end_object(w);
    jout_close(&j, out);
}

void vkv_oai_write_content(vkv_strbuf *out, const char *text, size_t len)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_begin_object(&j.w);
    vkv_json_key(&j.w, "content");
    vkv_json_strn(&j.w, text ? text : "", text ? len : 0);
    vkv_json_end_object(&j.w);
    jout_close(&j, out);
}

/* The server's compression flags, as a request's "vkvector" object names them. */
static void write_press_defaults(vkv_json_writer *w, const vkv_press_request *d)
{
    vkv_json_key(w, "vkvector");
    vkv_json_begin_object(w);
    vkv_json_key(w, "press");
    vkv_json_str(w, d->press);
    vkv_json_key(w, "compression");
    vkv_json_num(w, d->compression);
    vkv_json_key(w, "vector");
    vkv_json_bool(w, d->vector);
    vkv_json_key(w, "pa");
    if (d->pa < 0) vkv_json_null(w); /* VECTOR's own default */
    else vkv_json_num(w, d->pa);
    vkv_json_key(w, "kv_type");
    vkv_json_str(w, d->kv_type);
    vkv_json_key(w, "compress_every");
    vkv_json_uint(w, d->compress_every);
    vkv_json_key(w, "max_kv_tokens");
    vkv_json_uint(w, d->max_kv_tokens);
    vkv_json_key(w, "query_aware");
    vkv_json_bool(w, d->query_aware);
    vkv_json_end_object(w);
}

void vkv_oai_write_props(vkv_strbuf *out, const vkv_engine_props *p)
{
    jout j;
    if (!jout_open(&j, out)) return;
    vkv_json_writer *w = &j.w;
    const vkv_sampler_params sp = p->sampling;
    /* llama-server writes -1 for "no limit" */
    const int64_t n_predict = DEFAULT_MAX_TOKENS ? (int64_t)DEFAULT_MAX_TOKENS : -1;
    vkv_json_begin_object(w);
    vkv_json_key(w, "default_generation_settings");
    vkv_json_begin_object(w);
    vkv_json_key(w, "n_ctx");
    vkv_json_uint(w, p->n_ctx);
    vkv_json_key(w, "params");
    vkv_json_begin_object(w);
    vkv_json_key(w, "n_predict");
    vkv_json_int(w, n_predict);
    vkv_json_key(w, "max_tokens");
    vkv_json_int(w, n_predict);
    /* floats as the request fields give them, not widened (0.95f is 0.95) */
    const struct { const char *key; float v; } nums[] = {
        {"temperature", sp.temperature}, {"top_p", sp.top_p}, {"min_p", sp.min_p}, {"repeat_penalty", sp.repeat_penalty},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        char b[32];
        snprintf(b, sizeof b, "%g", nums[i].v);
        vkv_json_key(w, nums[i].key);
        vkv_json_num(w, strtod(b, NULL));
    }
    vkv_json_key(w, "top_k");
    vkv_json_int(w, sp.top_k);
    vkv_json_key(w, "repeat_last_n");
    vkv_json_int(w, sp.repeat_last_n);
    vkv_json_key(w, "presence_penalty");
    vkv_json_num(w, sp.presence_penalty);
    vkv_json_key(w, "frequency_penalty");
    vkv_json_num(w, sp.frequency_penalty);
    vkv_json_key(w, "stop");
    vkv_json_begin_array(w);
    vkv_json_end_array(w);
    vkv_json_key(w, "stream");
    vkv_json_bool(w, false);
    write_press_defaults(w, &p->defaults);
    vkv_json_end_object(w);
    vkv_json_end_object(w);
    vkv_json_key(w, "total_slots");
    vkv_json_uint(w, p->max_seqs);
    vkv_json_key(w, "model_alias");
    vkv_json_str(w, p->model_id);
    vkv_json_key(w, "model_path");
    vkv_json_str(w, p->model_path);
    vkv_json_key(w, "modalities");
    vkv_json_begin_object(w);
    vkv_json_key(w, "vision");
    vkv_json_bool(w, false);
    vkv_json_key(w, "audio");
    vkv_json_bool(w, false);
    vkv_json_end_object(w);
    /* llama-server gives the template's source; a model without one gets the
     * name of the built-in template its chats are rendered with */
    vkv_json_key(w, "chat_template");
    vkv_json_str(w, p->chat_template_source[0] ? p->chat_template_source : p->chat_template);
    vkv_json_key(w, "bos_token");
    vkv_json_str(w, p->bos_token);
    vkv_json_key(w, "eos_token");
    vkv_json_str(w, p->eos_token);
    vkv_json_key(w, "vkvector");
    vkv_json_begin_object(w);
    vkv_json_key(w, "model_id");
    vkv_json_str(w, p->model_id);
    vkv_json_key(w, "chat_template");
    vkv_json_str(w, p->chat_template);
    vkv_json_key(w, "n_vocab");
    vkv_json_int(w, p->n_vocab);
    vkv_json_end_object(w);
    vkv_json_end_object(w);
    jout_close(&j, out);
}
