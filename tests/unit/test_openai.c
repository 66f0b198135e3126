/* OpenAI's wire format (src/serve/openai.c): request bodies parsed into
 * engine requests, every bad one refused naming its parameter, and the
 * response objects and stream chunks as OpenAI writes them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"
#include "serve/openai.h"

static bool parse(vkv_oai_route route, const char *body, vkv_oai_request *q, vkv_oai_error *err)
{
    return vkv_oai_parse(route, body, strlen(body), q, err);
}

static void chat_request_parses(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    const char *body =
        "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"one\"}, {\"type\": \"text\", \"text\": \"two\"}]},"
        " {\"role\": \"assistant\", \"content\": null}],"
        " \"max_tokens\": 7, \"max_completion_tokens\": 9, \"temperature\": 0.5, \"top_p\": 0.9, \"seed\": -3,"
        " \"stop\": [\"x\", \"yy\"], \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"n\": 1,"
        " \"frequency_penalty\": 0, \"user\": \"someone\", \"logit_bias\": null,"
        " \"vkvector\": {\"press\": \"snapkv\", \"compression\": 0.75, \"vector\": true, \"pa\": 0.1,"
        " \"kv_type\": \"q8_0\", \"compress_every\": 64, \"max_kv_tokens\": 512, \"query_aware\": false}}";
    assert_true(parse(VKV_OAI_CHAT, body, &q, &err));
    const vkv_gen_request *g = &q.gen;
    assert_int_equal(g->kind, VKV_GEN_CHAT);
    assert_int_equal(q.n, 1);
    assert_string_equal(q.model, "m");
    assert_int_equal(g->n_messages, 3);
    assert_string_equal(g->messages[0].role, "system");
    assert_string_equal(g->messages[0].content, "Be brief.");
    assert_string_equal(g->messages[1].content, "one\ntwo");
    assert_string_equal(g->messages[2].content, "");
    assert_int_equal(g->max_tokens, 9); /* max_completion_tokens wins */
    assert_true(g->sampling.temperature == 0.5f);
    assert_true(g->sampling.top_p == 0.9f);
    assert_true(q.has_seed);
    assert_true(g->sampling.seed == (uint64_t)-3);
    assert_int_equal(g->n_stop, 2);
    assert_string_equal(g->stop[1], "yy");
    assert_true(g->stream);
    assert_true(q.include_usage);
    const vkv_press_request *p = &g->press;
    assert_true(p->has_press && p->has_compression && p->has_vector && p->has_pa && p->has_kv_type &&
                p->has_compress_every && p->has_max_kv_tokens && p->has_query_aware);
    assert_string_equal(p->press, "snapkv");
    assert_true(p->compression == 0.75 && p->vector && p->pa == 0.1);
    assert_string_equal(p->kv_type, "q8_0");
    assert_int_equal(p->compress_every, 64);
    assert_int_equal(p->max_kv_tokens, 512);
    assert_false(p->query_aware);
    vkv_gen_request_free(&q.gen);
}

static void defaults_are_openai_s(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    assert_true(parse(VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop\": \"\\n\"}", &q, &err));
    assert_string_equal(q.model, "");
    assert_int_equal(q.gen.max_tokens, 0);
    assert_true(q.gen.sampling.temperature == 1.0f && q.gen.sampling.top_p == 1.0f);
    /* the full distribution: no extension sampler narrows it unless asked */
    assert_int_equal(q.gen.sampling.top_k, 0);
    assert_true(q.gen.sampling.min_p == 0.0f && q.gen.sampling.repeat_penalty == 1.0f);
    assert_false(q.has_seed);
    assert_false(q.gen.stream);
    assert_int_equal(q.gen.n_stop, 1);
    assert_string_equal(q.gen.stop[0], "\n");
    assert_false(q.gen.press.has_press || q.gen.press.has_compression || q.gen.press.has_vector);
    vkv_gen_request_free(&q.gen);
}

/* llama-server's extension samplers are honoured under its names. */
static void extension_samplers_parse(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"top_k\": 5, \"min_p\": 0.1, \"repeat_penalty\": 1.3}",
                      &q, &err));
    assert_int_equal(q.gen.sampling.top_k, 5);
    assert_true(q.gen.sampling.min_p == 0.1f && q.gen.sampling.repeat_penalty == 1.3f);
    assert_true(q.gen.sampling.temperature == 1.0f && q.gen.sampling.top_p == 1.0f);
    vkv_gen_request_free(&q.gen);
}

static void completion_prompts_parse(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": \"Once upon\"}", &q, &err));
    assert_int_equal(q.gen.kind, VKV_GEN_TEXT);
    assert_string_equal(q.gen.prompt, "Once upon");
    vkv_gen_request_free(&q.gen);
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": [\"a time\"], \"max_tokens\": 3}", &q, &err));
    assert_int_equal(q.gen.kind, VKV_GEN_TEXT);
    assert_string_equal(q.gen.prompt, "a time");
    assert_int_equal(q.gen.max_tokens, 3);
    vkv_gen_request_free(&q.gen);
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": [1, 22, 333]}", &q, &err));
    assert_int_equal(q.gen.kind, VKV_GEN_IDS);
    assert_int_equal(q.gen.n_prompt_ids, 3);
    assert_int_equal(q.gen.prompt_ids[2], 333);
    vkv_gen_request_free(&q.gen);
}

/* Each bad body with the param its error names ("" for null) and a word of its message. */
static const struct bad_case {
    vkv_oai_route route;
    const char *body, *param, *says;
} bad_cases[] = {
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": \"json\"}", "response_format", "object"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {}}", "response_format.type", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"yaml\"}}", "response_format.type", "must be text, json_object or json_schema"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"json_schema\"}}", "response_format.json_schema", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}}", "response_format.json_schema.schema", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": 3, \"schema\": {}}}}", "response_format.json_schema.name", "string"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"strict\": \"yes\", \"schema\": {}}}}", "response_format.json_schema.strict", "boolean"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"format\": \"date\"}}}}}}", "response_format.json_schema.schema.properties.a.format", "not supported"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logprobs\": 1}", "logprobs", "boolean"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"top_logprobs\": 3}", "top_logprobs", "only allowed when"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logprobs\": true, \"top_logprobs\": 21}", "top_logprobs", "[0, 20]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"logprobs\": true}", "logprobs", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"logprobs\": 21}", "logprobs", "[0, 20]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"echo\": 1}", "echo", "boolean"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"max_tokens\": 0}", "max_tokens", "[1,"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"max_tokens\": 0, \"echo\": true}", "max_tokens", "[1,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"best_of\": 2}", "best_of", "one candidate"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"suffix\": \"end\"}", "suffix", "insertion"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"presence_penalty\": 2.5}", "presence_penalty", "[-2, 2]"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"frequency_penalty\": -3}", "frequency_penalty", "[-2, 2]"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"frequency_penalty\": \"1\"}", "frequency_penalty", "number"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logit_bias\": [1]}", "logit_bias", "object"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logit_bias\": {\"abc\": 1}}", "logit_bias.abc", "token id"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logit_bias\": {\"-5\": 1}}", "logit_bias.-5", "token id"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logit_bias\": {\"12\": 101}}", "logit_bias.12", "[-100, 100]"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logit_bias\": {\"12\": \"x\"}}", "logit_bias.12", "number"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}", "tools", "tool calling"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tool_choice\": \"auto\"}", "tool_choice", "tool calling"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"parallel_tool_calls\": true}", "parallel_tool_calls", "tool calling"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"functions\": [{\"name\": \"f\"}]}", "functions", "function calling"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"function_call\": \"auto\"}", "function_call", "function calling"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"audio\": {\"voice\": \"alloy\", \"format\": \"wav\"}}", "audio", "audio"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"modalities\": [\"text\", \"audio\"]}", "modalities", "only text"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"prediction\": {\"type\": \"content\", \"content\": \"x\"}}", "prediction", "predicted"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"web_search_options\": {}}", "web_search_options", "web search"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"reasoning_effort\": \"low\"}", "reasoning_effort", "reasoning"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"verbosity\": \"low\"}", "verbosity", "verbosity"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"service_tier\": \"flex\"}", "service_tier", "one service tier"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"store\": true}", "store", "not stored"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"metadata\": {\"a\": \"b\"}}", "metadata", "not stored"},
    {VKV_OAI_CHAT, "{\"messages\": [", "", "parse"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"top_k\": -1}", "top_k", "[0,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"top_k\": 1.5}", "top_k", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"min_p\": 1.5}", "min_p", "[0, 1]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"min_p\": \"x\"}", "min_p", "number"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"repeat_penalty\": 0}", "repeat_penalty", "(0, 10]"},
    {VKV_OAI_CHAT, "[1]", "", "object"},
    {VKV_OAI_CHAT, "{\"messages\": \"\xff\"}", "", "UTF-8"}, /* a raw 0xff byte */
    {VKV_OAI_CHAT, "{}", "messages", "required"},
    {VKV_OAI_CHAT, "{\"messages\": {}}", "messages", "array"},
    {VKV_OAI_CHAT, "{\"messages\": []}", "messages", "at least one"},
    {VKV_OAI_CHAT, "{\"messages\": [1]}", "messages.[0]", "object"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages.[0].role", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "messages.[0].role", "one of"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages.[0].content", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages.[0].content", "string"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}", "messages.[0].content", "NUL"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
     "messages.[1].content.[0].type", "text"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", "messages.[0].content.[0].text", "required"},
    {VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [7]}]}", "messages.[0].content.[0]", "object"},
    {VKV_OAI_COMPLETIONS, "{}", "prompt", "required"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": []}", "prompt", "empty"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": [\"a\", \"b\"]}", "prompt", "one prompt"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": [[1, 2]]}", "prompt", "one prompt"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": [1, -2]}", "prompt", "[0,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": [1, 2.5]}", "prompt", "token id"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": [1, \"x\"]}", "prompt", "token id"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": true}", "prompt", "string"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"model\": 3}", "model", "string"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"n\": 129}", "n", "[1, 128]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"n\": 0}", "n", "[1, 128]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"n\": \"1\"}", "n", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": 0}", "max_tokens", "[1,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": 1.5}", "max_tokens", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": 1e400}", "max_tokens", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"max_completion_tokens\": -1}", "max_completion_tokens", "[1,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": 2.5}", "temperature", "[0, 2]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": \"hot\"}", "temperature", "number"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"temperature\": -1e999}", "temperature", "too large"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"top_p\": 0}", "top_p", "(0, 1]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"seed\": 1e30}", "seed", "seed"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": 4}", "stop", "string"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", "stop", "string"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": [\"\"]}", "stop", "empty"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop", "at most 4"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stream\": 1}", "stream", "boolean"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", "stream_options", "stream"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": []}", "stream_options", "object"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_usage\": 1}}",
     "stream_options.include_usage", "boolean"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": 1}", "vkvector", "object"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"press\": 1}}", "vkvector.press", "string"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"press\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}",
     "vkvector.press", "too long"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"compression\": 1}}", "vkvector.compression", "[0, 1)"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"vector\": \"yes\"}}", "vkvector.vector", "boolean"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"pa\": -0.5}}", "vkvector.pa", "[0, 1]"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"kv_type\": \"q2_k\"}}", "vkvector.kv_type", "one of"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"compress_every\": -1}}", "vkvector.compress_every", "[0,"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"max_kv_tokens\": 0.5}}", "vkvector.max_kv_tokens", "integer"},
    {VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\", \"vkvector\": {\"query_aware\": 0}}", "vkvector.query_aware", "boolean"},
};

static void bad_bodies_name_their_param(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const struct bad_case *c = &bad_cases[i];
        vkv_oai_request q;
        vkv_oai_error err;
        memset(&err, 0, sizeof err);
        if (parse(c->route, c->body, &q, &err)) {
            vkv_gen_request_free(&q.gen);
            fail_msg("accepted: %s", c->body);
        }
        if (err.http_status != 400 || strcmp(err.param, c->param) || !strstr(err.message, c->says) ||
            strcmp(err.type, "invalid_request_error"))
            fail_msg("%s: status %d, param '%s' (wanted '%s'), message '%s' (wanted '%s')", c->body, err.http_status,
                     err.param, c->param, err.message, c->says);
    }
}

/* ---- writers ---- */

static vkv_json_doc *parsed(vkv_strbuf *b)
{
    assert_false(b->oom);
    vkv_json_doc *d;
    if (vkv_json_parse(b->p, b->n, &d)) fail_msg("not JSON: %s", b->p);
    free(b->p);
    *b = (vkv_strbuf){0};
    return d;
}

static const vkv_json *at(const vkv_json *v, const char *path)
{
    /* "choices.0.message.content" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = tok[0] >= '0' && tok[0] <= '9' ? vkv_json_at(v, (size_t)atoi(tok)) : vkv_json_get(v, tok);
    if (!v) fail_msg("no %s", path);
    return v;
}

static vkv_seq_event done_event(void)
{
    vkv_seq_event ev = {.kind = VKV_SEQ_DONE, .finish_reason = "length", .prompt_tokens = 5, .completion_tokens = 3};
    ev.compression = (vkv_gen_compression){.press = "keydiff", .compression = 0.5, .vector = true, .n_compressed = 5,
                                           .n_retained = 10, .n_approximated = 4, .n_evicted = 6,
                                           .kv_bytes_before = 4096, .kv_bytes_after = 1024, .decode_compressions = 2};
    return ev;
}

static void responses_are_openai_s(void **state)
{
    (void)state;
    vkv_seq_event ev = done_event();
    vkv_oai_meta m = {.route = VKV_OAI_CHAT, .id = "chatcmpl-abc", .created = 1700000000, .model = "llama"};
    vkv_strbuf b = {0};
    vkv_oai_write_response(&b, &m, "hi \"there\"\n", 11, NULL, &ev);
    vkv_json_doc *d = parsed(&b);
    const vkv_json *r = vkv_json_root(d);
    assert_string_equal(at(r, "id")->string, "chatcmpl-abc");
    assert_string_equal(at(r, "object")->string, "chat.completion");
    assert_true(at(r, "created")->number == 1700000000);
    assert_string_equal(at(r, "model")->string, "llama");
    assert_true(at(r, "choices.0.index")->number == 0);
    assert_string_equal(at(r, "choices.0.message.role")->string, "assistant");
    assert_string_equal(at(r, "choices.0.message.content")->string, "hi \"there\"\n");
    assert_int_equal(at(r, "choices.0.logprobs")->type, VKV_JSON_NULL);
    assert_string_equal(at(r, "choices.0.finish_reason")->string, "length");
    assert_true(at(r, "usage.prompt_tokens")->number == 5);
    assert_true(at(r, "usage.completion_tokens")->number == 3);
    assert_true(at(r, "usage.total_tokens")->number == 8);
    assert_string_equal(at(r, "vkvector.press")->string, "keydiff");
    assert_true(at(r, "vkvector.compression")->number == 0.5);
    assert_true(at(r, "vkvector.vector")->boolean);
    assert_true(at(r, "vkvector.n_approximated")->number == 4);
    assert_true(at(r, "vkvector.kv_bytes_after")->number == 1024);
    assert_true(at(r, "vkvector.decode_compressions")->number == 2);
    vkv_json_free(d);

    m = (vkv_oai_meta){.route = VKV_OAI_COMPLETIONS, .id = "cmpl-x", .created = 1, .model = "llama"};
    vkv_oai_write_response(&b, &m, "text", 4, NULL, &ev);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "object")->string, "text_completion");
    assert_string_equal(at(r, "choices.0.text")->string, "text");
    assert_true(at(r, "choices.0.index")->number == 0);
    assert_string_equal(at(r, "choices.0.finish_reason")->string, "length");
    vkv_json_free(d);

    /* n choices: indexed in order, each its finish reason, the usage total's */
    vkv_seq_event stop = ev, total = ev;
    stop.finish_reason = "stop";
    total.completion_tokens = 7;
    const vkv_oai_choice two[2] = {{"ab", 2, NULL, &ev}, {"c", 1, NULL, &stop}};
    for (int route = 0; route < 2; route++) {
        m = (vkv_oai_meta){.route = route ? VKV_OAI_COMPLETIONS : VKV_OAI_CHAT, .id = "x", .created = 1, .model = "l"};
        vkv_oai_write_response_n(&b, &m, two, 2, &total);
        d = parsed(&b);
        r = vkv_json_root(d);
        assert_int_equal(at(r, "choices")->n_items, 2);
        assert_true(at(r, "choices.0.index")->number == 0 && at(r, "choices.1.index")->number == 1);
        assert_string_equal(at(r, route ? "choices.1.text" : "choices.1.message.content")->string, "c");
        assert_string_equal(at(r, "choices.0.finish_reason")->string, "length");
        assert_string_equal(at(r, "choices.1.finish_reason")->string, "stop");
        assert_true(at(r, "usage.completion_tokens")->number == 7 && at(r, "usage.total_tokens")->number == 12);
        vkv_json_free(d);
    }
}

static void chunks_are_openai_s(void **state)
{
    (void)state;
    vkv_seq_event ev = done_event();
    vkv_oai_meta m = {.route = VKV_OAI_CHAT, .id = "chatcmpl-abc", .created = 2, .model = "llama", .include_usage = true};
    vkv_strbuf b = {0};
    vkv_oai_write_first_chunk(&b, &m);
    vkv_json_doc *d = parsed(&b);
    const vkv_json *r = vkv_json_root(d);
    assert_string_equal(at(r, "object")->string, "chat.completion.chunk");
    assert_string_equal(at(r, "choices.0.delta.role")->string, "assistant");
    assert_string_equal(at(r, "choices.0.delta.content")->string, "");
    assert_int_equal(at(r, "choices.0.finish_reason")->type, VKV_JSON_NULL);
    assert_int_equal(at(r, "usage")->type, VKV_JSON_NULL);
    vkv_json_free(d);

    vkv_oai_write_text_chunk(&b, &m, "tok", 3, NULL);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "choices.0.delta.content")->string, "tok");
    assert_null(vkv_json_get(at(r, "choices.0.delta"), "role"));
    vkv_json_free(d);

    vkv_oai_write_finish_chunk(&b, &m, &ev);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_int_equal(at(r, "choices.0.delta")->n_items, 0);
    assert_string_equal(at(r, "choices.0.finish_reason")->string, "length");
    assert_string_equal(at(r, "vkvector.press")->string, "keydiff");
    vkv_json_free(d);

    vkv_oai_write_usage_chunk(&b, &m, &ev);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_int_equal(at(r, "choices")->type, VKV_JSON_ARRAY);
    assert_int_equal(at(r, "choices")->n_items, 0);
    assert_true(at(r, "usage.total_tokens")->number == 8);
    vkv_json_free(d);

    /* completions: no role chunk; text chunks are text_completion objects */
    m = (vkv_oai_meta){.route = VKV_OAI_COMPLETIONS, .id = "cmpl-x", .created = 2, .model = "llama"};
    vkv_oai_write_first_chunk(&b, &m);
    assert_int_equal(b.n, 0);
    vkv_oai_write_text_chunk(&b, &m, "t", 1, NULL);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "object")->string, "text_completion");
    assert_string_equal(at(r, "choices.0.text")->string, "t");
    assert_null(vkv_json_get(r, "usage"));
    vkv_json_free(d);
}

static void models_and_errors(void **state)
{
    (void)state;
    vkv_strbuf b = {0};
    const char *const ids[] = {"llama", "gpt-4o"};
    vkv_oai_write_models(&b, ids, 2, 3);
    vkv_json_doc *d = parsed(&b);
    const vkv_json *r = vkv_json_root(d);
    assert_string_equal(at(r, "object")->string, "list");
    assert_string_equal(at(r, "data.0.id")->string, "llama");
    assert_string_equal(at(r, "data.1.id")->string, "gpt-4o");
    assert_string_equal(at(r, "data.0.object")->string, "model");
    assert_string_equal(at(r, "data.0.owned_by")->string, "vkvector");
    vkv_json_free(d);

    vkv_seq_event ev = {.kind = VKV_SEQ_ERROR, .http_status = 400, .type = "invalid_request_error",
                        .param = "messages", .code = "context_length_exceeded"};
    snprintf(ev.message, sizeof ev.message, "too long");
    vkv_oai_error err;
    vkv_oai_error_from_event(&err, &ev);
    assert_int_equal(err.http_status, 400);
    vkv_oai_write_error(&b, &err);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "error.message")->string, "too long");
    assert_string_equal(at(r, "error.type")->string, "invalid_request_error");
    assert_string_equal(at(r, "error.param")->string, "messages");
    assert_string_equal(at(r, "error.code")->string, "context_length_exceeded");
    vkv_json_free(d);

    /* an event without status, type or message is a server error; null param and code */
    ev = (vkv_seq_event){.kind = VKV_SEQ_ERROR};
    vkv_oai_error_from_event(&err, &ev);
    assert_int_equal(err.http_status, 500);
    vkv_oai_write_error(&b, &err);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "error.type")->string, "server_error");
    assert_int_equal(at(r, "error.param")->type, VKV_JSON_NULL);
    assert_int_equal(at(r, "error.code")->type, VKV_JSON_NULL);
    vkv_json_free(d);
}

/* llama-server's /tokenize, /detokenize and /props: its bodies and shapes. */
static void llama_server_routes(void **state)
{
    (void)state;
    vkv_oai_tokenize t;
    vkv_oai_error err;
    const char *body = "{\"content\": \"a\\nb\"}";
    assert_true(vkv_oai_parse_tokenize(body, strlen(body), &t, &err));
    assert_string_equal(t.content, "a\nb");
    assert_int_equal(t.len, 3);
    assert_true(!t.add_special && t.parse_special && !t.with_pieces); /* llama-server's defaults */
    free(t.content);
    body = "{\"content\": \"x\", \"add_special\": true, \"parse_special\": false, \"with_pieces\": true}";
    assert_true(vkv_oai_parse_tokenize(body, strlen(body), &t, &err));
    assert_true(t.add_special && !t.parse_special && t.with_pieces);
    free(t.content);
    static const struct { const char *body, *param; } bad_tok[] = {
        {"{}", "content"}, {"{\"content\": null}", "content"}, {"{\"content\": [1, 2]}", "content"},
        {"{\"content\": \"a\\u0000b\"}", "content"}, {"{\"content\": \"x\", \"with_pieces\": 1}", "with_pieces"},
        {"{\"content\": \"x\", \"add_special\": \"no\"}", "add_special"}, {"[\"x\"]", ""}, {"{\"content\": \"x", ""},
    };
    for (size_t i = 0; i < sizeof bad_tok / sizeof *bad_tok; i++) {
        t.content = (char *)1;
        assert_false(vkv_oai_parse_tokenize(bad_tok[i].body, strlen(bad_tok[i].body), &t, &err));
        assert_int_equal(err.http_status, 400);
        assert_string_equal(err.param, bad_tok[i].param);
        assert_null(t.content);
    }

    int32_t *ids;
    size_t n;
    body = "{\"tokens\": [0, 5, 9]}";
    assert_true(vkv_oai_parse_detokenize(body, strlen(body), 10, &ids, &n, &err));
    assert_int_equal(n, 3);
    assert_true(ids[0] == 0 && ids[1] == 5 && ids[2] == 9);
    free(ids);
    body = "{\"tokens\": []}";
    assert_true(vkv_oai_parse_detokenize(body, strlen(body), 10, &ids, &n, &err));
    assert_int_equal(n, 0);
    static const char *const bad_detok[] = {
        "{\"tokens\": [10]}", "{\"tokens\": [-1]}", "{\"tokens\": [1.5]}", "{\"tokens\": [\"1\"]}", "{\"tokens\": 3}",
        "{}", "{\"tokens\": [1e300]}",
    };
    for (size_t i = 0; i < sizeof bad_detok / sizeof *bad_detok; i++) {
        assert_false(vkv_oai_parse_detokenize(bad_detok[i], strlen(bad_detok[i]), 10, &ids, &n, &err));
        assert_int_equal(err.http_status, 400);
        assert_string_equal(err.param, "tokens");
        assert_null(ids);
    }

    vkv_strbuf b = {0};
    const int32_t tids[] = {7, 8};
    vkv_oai_write_tokens(&b, tids, 2, NULL);
    assert_string_equal(b.p, "{\"tokens\":[7,8]}");
    free(b.p);
    b = (vkv_strbuf){0};
    const vkv_oai_piece pieces[] = {{"h\xc3\xa9", 3}, {"\xc3", 1}};
    vkv_oai_write_tokens(&b, tids, 2, pieces);
    assert_string_equal(b.p, "{\"tokens\":[{\"id\":7,\"piece\":\"h\xc3\xa9\"},{\"id\":8,\"piece\":[195]}]}");
    free(b.p);
    b = (vkv_strbuf){0};
    vkv_oai_write_content(&b, "ok\n", 3);
    assert_string_equal(b.p, "{\"content\":\"ok\\n\"}");
    free(b.p);
    b = (vkv_strbuf){0};

    vkv_engine_props p = {.model_id = "m", .model_path = "/x/m.gguf", .n_ctx = 512, .max_seqs = 3, .n_vocab = 10,
                          .chat_template = "chatml", .chat_template_source = "", .bos_token = "<s>", .eos_token = "</s>",
                          .defaults = {.press = "keydiff", .compression = 0.75, .pa = -1, .kv_type = "q8_0"},
                          .sampling = vkv_gen_sampling_defaults()};
    vkv_oai_write_props(&b, &p);
    vkv_json_doc *d = parsed(&b);
    const vkv_json *r = vkv_json_root(d);
    assert_true(at(r, "default_generation_settings.n_ctx")->number == 512);
    assert_true(at(r, "total_slots")->number == 3);
    assert_string_equal(at(r, "model_path")->string, "/x/m.gguf");
    assert_string_equal(at(r, "model_alias")->string, "m");
    assert_string_equal(at(r, "chat_template")->string, "chatml");
    /* what a request without sampling fields gets (defaults_are_openai_s) */
    vkv_oai_request q;
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": \"x\"}", &q, &err));
    assert_true(at(r, "default_generation_settings.params.temperature")->number == q.gen.sampling.temperature);
    assert_true(at(r, "default_generation_settings.params.top_p")->number == q.gen.sampling.top_p);
    assert_true(at(r, "default_generation_settings.params.top_k")->number == q.gen.sampling.top_k);
    assert_true((float)at(r, "default_generation_settings.params.min_p")->number == q.gen.sampling.min_p);
    assert_true(at(r, "default_generation_settings.params.n_predict")->number == (q.gen.max_tokens ? (double)q.gen.max_tokens : -1.0));
    vkv_gen_request_free(&q.gen);
    vkv_json_free(d);
    /* a server's own defaults (vkvector serve --temp ...): in /props, and what a request leaving them out gets */
    p.sampling.temperature = 0.25f;
    p.sampling.top_k = 7;
    p.sampling.frequency_penalty = 0.5f;
    vkv_oai_write_props(&b, &p);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_true(at(r, "default_generation_settings.params.temperature")->number == 0.25);
    assert_true(at(r, "default_generation_settings.params.top_k")->number == 7);
    assert_true(at(r, "default_generation_settings.params.frequency_penalty")->number == 0.5);
    const char *leaves_out = "{\"prompt\": \"x\", \"top_k\": 2}";
    assert_true(vkv_oai_parse_with(VKV_OAI_COMPLETIONS, leaves_out, strlen(leaves_out),
                                   &(vkv_oai_parse_opts){.sampling = &p.sampling}, &q, &err));
    assert_true(q.gen.sampling.temperature == 0.25f && q.gen.sampling.top_k == 2 && q.gen.sampling.frequency_penalty == 0.5f);
    vkv_gen_request_free(&q.gen);
    assert_string_equal(at(r, "default_generation_settings.params.vkvector.press")->string, "keydiff");
    assert_true(at(r, "default_generation_settings.params.vkvector.compression")->number == 0.75);
    assert_int_equal(at(r, "default_generation_settings.params.vkvector.pa")->type, VKV_JSON_NULL);
    assert_string_equal(at(r, "default_generation_settings.params.vkvector.kv_type")->string, "q8_0");
    vkv_json_free(d);
    /* a model's own template source is given as llama-server gives it */
    p.chat_template_source = "{% for m in messages %}{{ m.content }}{% endfor %}";
    vkv_oai_write_props(&b, &p);
    d = parsed(&b);
    assert_string_equal(at(vkv_json_root(d), "chat_template")->string, p.chat_template_source);
    assert_string_equal(at(vkv_json_root(d), "vkvector.chat_template")->string, "chatml");
    vkv_json_free(d);
}

static void logprobs_penalties_and_bias_parse(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    assert_true(parse(VKV_OAI_CHAT,
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"logprobs\": true, \"top_logprobs\": 5,"
                      " \"presence_penalty\": -1.5, \"frequency_penalty\": 2, \"logit_bias\": {\"7\": -100, \"0\": 3.5},"
                      " \"tool_choice\": \"none\", \"store\": false, \"modalities\": [\"text\"], \"service_tier\": \"auto\","
                      " \"parallel_tool_calls\": null, \"echo\": 1}",
                      &q, &err));
    const vkv_gen_request *g = &q.gen;
    assert_true(g->logprobs);
    assert_int_equal(g->top_logprobs, 5);
    assert_false(g->echo); /* not a chat field: ignored, as OpenAI ignores unknown fields */
    assert_true(g->sampling.presence_penalty == -1.5f && g->sampling.frequency_penalty == 2.0f);
    assert_int_equal(g->sampling.n_logit_bias, 2);
    assert_ptr_equal(g->sampling.logit_bias, g->logit_bias);
    assert_int_equal(g->logit_bias[0].id, 7);
    assert_true(g->logit_bias[0].bias == -100.0f);
    assert_int_equal(g->logit_bias[1].id, 0);
    assert_true(g->logit_bias[1].bias == 3.5f);
    vkv_gen_request_free(&q.gen);

    /* completions: logprobs N, echo, and max_tokens 0 with echo (the prompt's logprobs alone) */
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": [1, 2, 3], \"logprobs\": 0, \"echo\": true, \"max_tokens\": 0,"
                      " \"best_of\": 1, \"suffix\": \"\"}", &q, &err));
    assert_true(q.gen.logprobs && q.gen.echo && q.gen.no_generation);
    assert_int_equal(q.gen.top_logprobs, 0);
    vkv_gen_request_free(&q.gen);
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"logprobs\": 20, \"max_tokens\": 2}", &q, &err));
    assert_true(q.gen.logprobs && !q.gen.echo && !q.gen.no_generation);
    assert_int_equal(q.gen.top_logprobs, 20);
    assert_int_equal(q.gen.max_tokens, 2);
    vkv_gen_request_free(&q.gen);

    /* response_format: text is none; json_object and json_schema compile a constraint the request owns */
    assert_true(parse(VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": "
                      "{\"type\": \"text\"}}", &q, &err));
    assert_null(q.gen.constraint);
    vkv_gen_request_free(&q.gen);
    assert_true(parse(VKV_OAI_COMPLETIONS, "{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_object\"}}", &q, &err));
    assert_non_null(q.gen.constraint);
    vkv_gen_request_free(&q.gen);
    assert_true(parse(VKV_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"response_format\": "
                      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", \"strict\": true, \"schema\": "
                      "{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [\"x\", \"y\"]}}, \"required\": [\"a\"], "
                      "\"additionalProperties\": false}}}}", &q, &err));
    assert_non_null(q.gen.constraint);
    vkv_json_matcher *m = vkv_json_matcher_new(q.gen.constraint);
    assert_true(vkv_json_matcher_advance(m, "{\"a\":\"y\"}", 9));
    assert_true(vkv_json_matcher_complete(m));
    vkv_json_matcher_free(m);
    vkv_gen_request_free(&q.gen);
}

/* A token-id prompt longer than the context is refused by a scan of the
 * body, before a tree of its ids is built. */
static void long_id_prompts_are_refused_before_the_tree(void **state)
{
    (void)state;
    vkv_oai_request q;
    vkv_oai_error err;
    const vkv_oai_parse_opts o = {.n_ctx = 4};
    const char *fits = "{\"max_tokens\": 2, \"stop\": [\"a\"], \"prompt\": [1, 2, 3, 4], \"echo\": false}";
    assert_true(vkv_oai_parse_with(VKV_OAI_COMPLETIONS, fits, strlen(fits), &o, &q, &err));
    assert_int_equal(q.gen.n_prompt_ids, 4);
    vkv_gen_request_free(&q.gen);
    const char *over = "{\"n\": {\"prompt\": [1, 2, 3, 4, 5, 6]}, \"prompt\": [1, 2, 3, 4, 5]}";
    assert_false(vkv_oai_parse_with(VKV_OAI_COMPLETIONS, over, strlen(over), &o, &q, &err));
    assert_int_equal(err.http_status, 400);
    assert_string_equal(err.param, "prompt");
    assert_string_equal(err.code, "context_length_exceeded");
    /* a million ids: refused after the first five, no tree */
    size_t n = 1000000, len = 0;
    char *big = malloc(16 + 2 * n);
    assert_non_null(big);
    len += (size_t)sprintf(big, "{\"prompt\": [");
    for (size_t i = 0; i < n; i++) { big[len++] = '7'; big[len++] = i + 1 < n ? ',' : ']'; }
    big[len++] = '}';
    assert_false(vkv_oai_parse_with(VKV_OAI_COMPLETIONS, big, len, &o, &q, &err));
    assert_string_equal(err.code, "context_length_exceeded");
    free(big);
    /* a body that is not such an object is the tree parser's to refuse */
    assert_false(vkv_oai_parse_with(VKV_OAI_COMPLETIONS, "{\"prompt\": [1, 2", 16, &o, &q, &err));
    assert_null(err.code);
}

/* Token text for the writers' tests: id i is "t<i>", 1 is a BOS-like control token. */
static const char *test_piece(const void *ctx, int32_t id, bool special, size_t *len)
{
    (void)ctx;
    static char buf[8][16];
    static int next;
    if (id == 1) {
        *len = special ? 3 : 0;
        return "<s>";
    }
    char *b = buf[next++ % 8];
    *len = (size_t)snprintf(b, 16, "t%d", id);
    return b;
}

static void logprobs_are_written_in_openai_s_shapes(void **state)
{
    (void)state;
    vkv_seq_event ev = done_event();
    vkv_token_logprob toks[3] = {
        {.id = 1, .logprob = NAN},
        {.id = 25, .logprob = -0.5f, .n_top = 2, .top_id = {25, 3}, .top_logprob = {-0.5f, -1.25f}},
        {.id = 4, .logprob = -INFINITY, .n_top = 1, .top_id = {9}, .top_logprob = {-0.25f}},
    };
    vkv_oai_meta m = {.route = VKV_OAI_CHAT, .id = "chatcmpl-abc", .created = 1, .model = "llama", .piece = test_piece};
    vkv_oai_logprobs lp = {.tokens = toks + 1, .n = 2};
    vkv_strbuf b = {0};
    vkv_oai_write_response(&b, &m, "t25t4", 5, &lp, &ev);
    vkv_json_doc *d = parsed(&b);
    const vkv_json *r = vkv_json_root(d);
    assert_int_equal(at(r, "choices.0.logprobs.content")->n_items, 2);
    assert_string_equal(at(r, "choices.0.logprobs.content.0.token")->string, "t25");
    assert_true(at(r, "choices.0.logprobs.content.0.logprob")->number == -0.5);
    assert_int_equal(at(r, "choices.0.logprobs.content.0.bytes")->n_items, 3);
    assert_true(at(r, "choices.0.logprobs.content.0.bytes.0")->number == 't');
    assert_int_equal(at(r, "choices.0.logprobs.content.0.top_logprobs")->n_items, 2);
    assert_string_equal(at(r, "choices.0.logprobs.content.0.top_logprobs.1.token")->string, "t3");
    assert_true(at(r, "choices.0.logprobs.content.0.top_logprobs.1.logprob")->number == -1.25);
    assert_true(at(r, "choices.0.logprobs.content.1.logprob")->number == -9999); /* impossible */
    assert_int_equal(at(r, "choices.0.logprobs.refusal")->type, VKV_JSON_NULL);
    vkv_json_free(d);
    vkv_oai_write_text_chunk(&b, &m, "t4", 2, &(vkv_oai_logprobs){.tokens = toks + 2, .n = 1});
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "choices.0.logprobs.content.0.token")->string, "t4");
    vkv_json_free(d);

    /* completions, echoed: the prompt's first token has no logprob; the control token takes no text */
    m.route = VKV_OAI_COMPLETIONS;
    lp = (vkv_oai_logprobs){.tokens = toks, .n = 3, .text_offset = 0};
    assert_int_equal(vkv_oai_logprobs_end(&m, &lp), 5);
    vkv_oai_write_response(&b, &m, "t25t4", 5, &lp, &ev);
    d = parsed(&b);
    r = vkv_json_root(d);
    assert_string_equal(at(r, "choices.0.logprobs.tokens.0")->string, "<s>");
    assert_string_equal(at(r, "choices.0.logprobs.tokens.2")->string, "t4");
    assert_int_equal(at(r, "choices.0.logprobs.token_logprobs.0")->type, VKV_JSON_NULL);
    assert_true(at(r, "choices.0.logprobs.token_logprobs.1")->number == -0.5);
    assert_int_equal(at(r, "choices.0.logprobs.top_logprobs.0")->type, VKV_JSON_NULL);
    assert_true(at(r, "choices.0.logprobs.top_logprobs.1.t3")->number == -1.25);
    assert_true(at(r, "choices.0.logprobs.top_logprobs.2.t9")->number == -0.25);
    assert_true(at(r, "choices.0.logprobs.text_offset.0")->number == 0);
    assert_true(at(r, "choices.0.logprobs.text_offset.1")->number == 0);
    assert_true(at(r, "choices.0.logprobs.text_offset.2")->number == 3);
    vkv_json_free(d);
    /* without logprobs asked: null */
    vkv_oai_write_text_chunk(&b, &m, "x", 1, NULL);
    d = parsed(&b);
    assert_int_equal(at(vkv_json_root(d), "choices.0.logprobs")->type, VKV_JSON_NULL);
    vkv_json_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chat_request_parses),
        cmocka_unit_test(defaults_are_openai_s),
        cmocka_unit_test(extension_samplers_parse),
        cmocka_unit_test(completion_prompts_parse),
        cmocka_unit_test(bad_bodies_name_their_param),
        cmocka_unit_test(responses_are_openai_s),
        cmocka_unit_test(chunks_are_openai_s),
        cmocka_unit_test(models_and_errors),
        cmocka_unit_test(llama_server_routes),
        cmocka_unit_test(logprobs_penalties_and_bias_parse),
        cmocka_unit_test(long_id_prompts_are_refused_before_the_tree),
        cmocka_unit_test(logprobs_are_written_in_openai_s_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
