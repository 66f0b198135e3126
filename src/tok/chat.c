/* Chat templates: the model's Jinja template is recognised by its markers
 * and rendered by a built-in equivalent (llama.cpp's approach) rather than by
 * a Jinja interpreter. */
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "tok/tok_internal.h"

vkv_chat_template vkv_chat_template_detect(const char *src)
{
    if (!src) return VKV_CHAT_UNKNOWN;
    if (!strcmp(src, "chatml")) return VKV_CHAT_CHATML;
    if (!strcmp(src, "llama3")) return VKV_CHAT_LLAMA3;
    if (!strcmp(src, "llama31")) return VKV_CHAT_LLAMA31;
    if (strstr(src, "<|im_start|>")) {
        /* Phi-4 and SmolVLM use these markers with a different layout */
        if (strstr(src, "<|im_sep|>") || strstr(src, "<end_of_utterance>")) return VKV_CHAT_UNKNOWN;
        return VKV_CHAT_CHATML;
    }
    if (strstr(src, "<|start_header_id|>") && strstr(src, "<|end_header_id|>"))
        return strstr(src, "Cutting Knowledge Date") ? VKV_CHAT_LLAMA31 : VKV_CHAT_LLAMA3;
    return VKV_CHAT_UNKNOWN;
}

const char *vkv_chat_template_name(vkv_chat_template t)
{
    switch (t) {
    case VKV_CHAT_LLAMA3: return "llama3";
    case VKV_CHAT_LLAMA31: return "llama31";
    case VKV_CHAT_CHATML: return "chatml";
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
                         "the model's chat template is not one this build knows (supported: llama3, llama31, chatml); it begins \"%.60s\"",
                         tok->chat_template);
    *out = t;
    return VKV_OK;
}


static bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

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

vkv_status vkv_chat_apply(vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs, bool add_generation_prompt,
                          char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    if (t != VKV_CHAT_LLAMA3 && t != VKV_CHAT_LLAMA31 && t != VKV_CHAT_CHATML)
        return vkv_error(VKV_ERR_UNSUPPORTED, "unknown chat template (supported: llama3, llama31, chatml)");
    vkv_strbuf b = {0};
    vkv_strbuf_puts(&b, "");
    size_t first = 0;
    if (t == VKV_CHAT_LLAMA31) {
        /* a leading system message goes into the header */
        bool sys = n_msgs && msgs[0].role && !strcmp(msgs[0].role, "system");
        llama31_system(&b, sys ? msgs[0].content : NULL);
        first = sys;
    }
    for (size_t i = first; i < n_msgs; i++) {
        const char *role = msgs[i].role ? msgs[i].role : "";
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cl = strlen(c);
        if (t == VKV_CHAT_LLAMA3 || t == VKV_CHAT_LLAMA31) {
            /* Llama 3's template trims each message */
            while (cl && ascii_space(*c)) c++, cl--;
            while (cl && ascii_space(c[cl - 1])) cl--;
            vkv_strbuf_puts(&b, "<|start_header_id|>");
            vkv_strbuf_puts(&b, role);
            vkv_strbuf_puts(&b, "<|end_header_id|>\n\n");
            vkv_strbuf_put(&b, c, cl);
            vkv_strbuf_puts(&b, "<|eot_id|>");
        } else {
            vkv_strbuf_puts(&b, "<|im_start|>");
            vkv_strbuf_puts(&b, role);
            vkv_strbuf_puts(&b, "\n");
            vkv_strbuf_put(&b, c, cl);
            vkv_strbuf_puts(&b, "<|im_end|>\n");
        }
    }
    if (add_generation_prompt)
        vkv_strbuf_puts(&b, t == VKV_CHAT_CHATML ? "<|im_start|>assistant\n" : "<|start_header_id|>assistant<|end_header_id|>\n\n");
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
