/* Chat templates: the model's Jinja template is recognised by its markers
 * and rendered by a built-in equivalent (llama.cpp's approach) rather than by
 * a Jinja interpreter. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tok/tok_internal.h"

/* The sentence by which Qwen2.5's template is told apart from plain ChatML:
 * its default system message. */
#define QWEN25_DEFAULT_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
#define KNOWN_TEMPLATES "llama3, llama31, chatml, qwen25, qwen3"

vkv_chat_template vkv_chat_template_detect(const char *src)
{
    if (!src) return VKV_CHAT_UNKNOWN;
    static const struct { const char *name; vkv_chat_template t; } names[] = {
        {"chatml", VKV_CHAT_CHATML}, {"llama3", VKV_CHAT_LLAMA3},    {"llama31", VKV_CHAT_LLAMA31},
        {"qwen25", VKV_CHAT_QWEN25}, {"qwen3", VKV_CHAT_QWEN3}, {"qwen3-thinking", VKV_CHAT_QWEN3_THINKING},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(src, names[i].name)) return names[i].t;
    if (strstr(src, "<|im_start|>")) {
        /* Phi-4 and SmolVLM use these markers with a different layout */
        if (strstr(src, "<|im_sep|>") || strstr(src, "<end_of_utterance>")) return VKV_CHAT_UNKNOWN;
        if (strstr(src, "enable_thinking")) return VKV_CHAT_QWEN3;
        return strstr(src, QWEN25_DEFAULT_SYSTEM) ? VKV_CHAT_QWEN25 : VKV_CHAT_CHATML;
    }
    if (strstr(src, "<|start_header_id|>") && strstr(src, "<|end_header_id|>"))
        return strstr(src, "Cutting Knowledge Date") ? VKV_CHAT_LLAMA31 : VKV_CHAT_LLAMA3;
    return VKV_CHAT_UNKNOWN;
}

vkv_chat_template vkv_chat_template_thinking(vkv_chat_template t, bool thinking)
{
    if (t != VKV_CHAT_QWEN3 && t != VKV_CHAT_QWEN3_THINKING) return t;
    return thinking ? VKV_CHAT_QWEN3_THINKING : VKV_CHAT_QWEN3;
}

const char *vkv_chat_template_name(vkv_chat_template t)
{
    switch (t) {
    case VKV_CHAT_LLAMA3: return "llama3";
    case VKV_CHAT_LLAMA31: return "llama31";
    case VKV_CHAT_CHATML: return "chatml";
    case VKV_CHAT_QWEN25: return "qwen25";
    case VKV_CHAT_QWEN3: return "qwen3";
    case VKV_CHAT_QWEN3_THINKING: return "qwen3-thinking";
    default: return "unknown";
    }
}

vkv_status vkv_tokenizer_chat_template(const vkv_tokenizer *tok, vkv_chat_template *out)
{
    *out = VKV_CHAT_UNKNOWN;
    if (!tok->chat_template)
        return vkv_error(VKV_ERR_UNSUPPORTED, "the model has no chat template (tokenizer.chat_template)");
    vkv_chat_template t = vkv_chat_template_detect(tok->chat_template);
    if (t == VKV_CHAT_UNKNOWN)
        return vkv_error(VKV_ERR_UNSUPPORTED,
                         "the model's chat template is not one this build knows (supported: " KNOWN_TEMPLATES
                         "); it begins \"%.60s\"",
                         tok->chat_template);
    *out = t;
    return VKV_OK;
}


static bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* A piece of a message, as the templates' string methods cut it. */
typedef struct text_span {
    const char *p;
    size_t n;
} text_span;

static text_span span_of(const char *s) { return (text_span){s ? s : "", s ? strlen(s) : 0}; }

static text_span trim_newlines_left(text_span t)
{
    while (t.n && *t.p == '\n') t.p++, t.n--;
    return t;
}

static text_span trim_newlines_right(text_span t)
{
    while (t.n && t.p[t.n - 1] == '\n') t.n--;
    return t;
}

/* Where needle first (or last) occurs in t; NULL when it does not. */
static const char *span_find(text_span t, const char *needle, bool last)
{
    size_t nl = strlen(needle);
    const char *found = NULL;
    for (size_t i = 0; i + nl <= t.n; i++) {
        if (memcmp(t.p + i, needle, nl)) continue;
        found = t.p + i;
        if (!last) break;
    }
    return found;
}

static bool span_starts_ends(text_span t, const char *head, const char *tail)
{
    size_t hl = strlen(head), tl = strlen(tail);
    return t.n >= hl && t.n >= tl && !memcmp(t.p, head, hl) && !memcmp(t.p + t.n - tl, tail, tl);
}

static bool role_is(const vkv_chat_msg *m, const char *role) { return m->role && !strcmp(m->role, role); }

/* Hugging Face's Llama-3.1 system header, with the template's default date
 * (date_string = "26 Jul 2024") and the system message, if any, trimmed. */
static void llama31_system(vkv_strbuf *b, const char *system)
{
    size_t sl = system ? strlen(system) : 0;
    while (sl && ascii_space(*system)) system++, sl--;
    while (sl && ascii_space(system[sl - 1])) sl--;
    vkv_strbuf_puts(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                       "Today Date: 26 Jul 2024\n\n");
    vkv_strbuf_put(b, system ? system : "", sl);
    vkv_strbuf_puts(b, "<|eot_id|>");
}

static void render_llama3(vkv_strbuf *b, bool llama31, const vkv_chat_msg *msgs, size_t n_msgs)
{
    size_t first = 0;
    if (llama31) {
        /* a leading system message goes into the header */
        bool sys = n_msgs && role_is(&msgs[0], "system");
        llama31_system(b, sys ? msgs[0].content : NULL);
        first = sys;
    }
    for (size_t i = first; i < n_msgs; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cl = strlen(c);
        /* Llama 3's template trims each message */
        while (cl && ascii_space(*c)) c++, cl--;
        while (cl && ascii_space(c[cl - 1])) cl--;
        vkv_strbuf_puts(b, "<|start_header_id|>");
        vkv_strbuf_puts(b, msgs[i].role ? msgs[i].role : "");
        vkv_strbuf_puts(b, "<|end_header_id|>\n\n");
        vkv_strbuf_put(b, c, cl);
        vkv_strbuf_puts(b, "<|eot_id|>");
    }
}

static void put_chatml_turn(vkv_strbuf *b, const char *role, text_span content)
{
    vkv_strbuf_puts(b, "<|im_start|>");
    vkv_strbuf_puts(b, role ? role : "");
    vkv_strbuf_puts(b, "\n");
    vkv_strbuf_put(b, content.p, content.n);
    vkv_strbuf_puts(b, "<|im_end|>\n");
}

/* Qwen's tool results: a run of tool messages is one user turn. */
static void put_qwen_tool(vkv_strbuf *b, const vkv_chat_msg *msgs, size_t n_msgs, size_t i)
{
    if (i == 0 || !role_is(&msgs[i - 1], "tool")) vkv_strbuf_puts(b, "<|im_start|>user");
    vkv_strbuf_puts(b, "\n<tool_response>\n");
    vkv_strbuf_puts(b, msgs[i].content ? msgs[i].content : "");
    vkv_strbuf_puts(b, "\n</tool_response>");
    if (i + 1 == n_msgs || !role_is(&msgs[i + 1], "tool")) vkv_strbuf_puts(b, "<|im_end|>\n");
}

/* Qwen3 renders an assistant turn after the last user query with its
 * reasoning in a think block (always for the conversation's last message, so
 * that the model continues it), and earlier ones without their reasoning.
 * The reasoning is what precedes the first </think>, after its <think>. */
static void put_qwen3_assistant(vkv_strbuf *b, const vkv_chat_msg *m, bool after_last_query, bool last)
{
    text_span content = span_of(m->content), reasoning = {"", 0};
    const char *first_close = span_find(content, "</think>", false);
    if (first_close) {
        const char *last_close = span_find(content, "</think>", true) + strlen("</think>");
        reasoning = trim_newlines_right((text_span){content.p, (size_t)(first_close - content.p)});
        const char *open = span_find(reasoning, "<think>", true);
        if (open) {
            open += strlen("<think>");
            reasoning = (text_span){open, reasoning.n - (size_t)(open - reasoning.p)};
        }
        reasoning = trim_newlines_left(reasoning);
        content = trim_newlines_left((text_span){last_close, content.n - (size_t)(last_close - content.p)});
    }
    vkv_strbuf_puts(b, "<|im_start|>assistant\n");
    if (after_last_query && (last || reasoning.n)) {
        reasoning = trim_newlines_right(trim_newlines_left(reasoning));
        vkv_strbuf_puts(b, "<think>\n");
        vkv_strbuf_put(b, reasoning.p, reasoning.n);
        vkv_strbuf_puts(b, "\n</think>\n\n");
        content = trim_newlines_left(content);
    }
    vkv_strbuf_put(b, content.p, content.n);
    vkv_strbuf_puts(b, "<|im_end|>\n");
}

/* The last user message that is not a tool's result wrapped as one; -1 with none. */
static ptrdiff_t qwen3_last_query(const vkv_chat_msg *msgs, size_t n_msgs)
{
    for (size_t i = n_msgs; i-- > 0;)
        if (role_is(&msgs[i], "user") &&
            !span_starts_ends(span_of(msgs[i].content), "<tool_response>", "</tool_response>"))
            return (ptrdiff_t)i;
    return (ptrdiff_t)n_msgs - 1;
}

/* ChatML (every role as it is) and Qwen's two templates built on it. */
static void render_chatml(vkv_strbuf *b, vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs)
{
    if (t == VKV_CHAT_CHATML) {
        for (size_t i = 0; i < n_msgs; i++) put_chatml_turn(b, msgs[i].role, span_of(msgs[i].content));
        return;
    }
    if (t == VKV_CHAT_QWEN25 && !(n_msgs && role_is(&msgs[0], "system")))
        put_chatml_turn(b, "system", span_of(QWEN25_DEFAULT_SYSTEM));
    const ptrdiff_t last_query = qwen3_last_query(msgs, n_msgs);
    for (size_t i = 0; i < n_msgs; i++) {
        const vkv_chat_msg *m = &msgs[i];
        if (role_is(m, "system") || role_is(m, "user") || (t == VKV_CHAT_QWEN25 && role_is(m, "assistant")))
            put_chatml_turn(b, m->role, span_of(m->content));
        else if (role_is(m, "assistant"))
            put_qwen3_assistant(b, m, (ptrdiff_t)i > last_query, i + 1 == n_msgs);
        else if (role_is(m, "tool"))
            put_qwen_tool(b, msgs, n_msgs, i);
    }
}

vkv_status vkv_chat_apply(vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs, bool add_generation_prompt,
                          char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    if (!strcmp(vkv_chat_template_name(t), "unknown"))
        return vkv_error(VKV_ERR_UNSUPPORTED, "unknown chat template (supported: " KNOWN_TEMPLATES ")");
    vkv_strbuf b = {0};
    vkv_strbuf_puts(&b, "");
    bool llama = t == VKV_CHAT_LLAMA3 || t == VKV_CHAT_LLAMA31;
    if (llama)
        render_llama3(&b, t == VKV_CHAT_LLAMA31, msgs, n_msgs);
    else
        render_chatml(&b, t, msgs, n_msgs);
    if (add_generation_prompt)
        vkv_strbuf_puts(&b, llama ? "<|start_header_id|>assistant<|end_header_id|>\n\n" : "<|im_start|>assistant\n");
    /* thinking off: the answer starts after an empty think block */
    if (add_generation_prompt && t == VKV_CHAT_QWEN3) vkv_strbuf_puts(&b, "<think>\n\n</think>\n\n");
    if (b.oom) {
        free(b.p);
        return vkv_error(VKV_ERR_OOM, "out of memory applying the chat template");
    }
    *text = b.p;
    *len = b.n;
    return VKV_OK;
}

#define SPLIT_MARKER "\x01VKVECTOR_SPLIT\x01"

vkv_status vkv_chat_wrap(vkv_chat_template t, const char *text, size_t len, size_t split, char **out,
                         size_t *out_len, size_t *out_split)
{
    *out = NULL;
    size_t ml = strlen(SPLIT_MARKER);
    char *marked = malloc(len + ml + 1);
    if (!marked) return vkv_error(VKV_ERR_OOM, "out of host memory wrapping a prompt in the chat template");
    memcpy(marked, text, split);
    memcpy(marked + split, SPLIT_MARKER, ml);
    memcpy(marked + split + ml, text + split, len - split);
    marked[len + ml] = 0;
    vkv_chat_msg msg = {"user", marked};
    char *r;
    size_t rl;
    vkv_status st = vkv_chat_apply(t, &msg, 1, true, &r, &rl);
    free(marked);
    if (st) return st;
    char *m = strstr(r, SPLIT_MARKER);
    if (!m) {
        free(r);
        return vkv_error(VKV_ERR_FORMAT, "the chat template dropped the question marker");
    }
    size_t at = (size_t)(m - r);
    memmove(m, m + ml, rl - at - ml + 1);
    *out = r;
    *out_len = rl - ml;
    *out_split = at;
    return VKV_OK;
}

vkv_status vkv_chat_overhead(const vkv_tokenizer *tok, vkv_chat_template t, size_t *n)
{
    *n = 0;
    vkv_chat_msg msg = {"user", ""};
    char *r;
    size_t rl;
    vkv_status st = vkv_chat_apply(t, &msg, 1, true, &r, &rl);
    if (st) return st;
    int32_t *ids = NULL;
    st = vkv_tokenize(tok, r, rl, false, true, &ids, n);
    free(ids);
    free(r);
    return st;
}
