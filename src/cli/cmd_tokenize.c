/* vkvector tokenize: print the token ids of a text for a GGUF vocabulary or
 * a Hugging Face tokenizer folder. Works on vocabulary-only GGUFs and on
 * folders holding only tokenizer.json; no GPU is touched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/file.h"
#include "core/json.h"
#include "core/json_write.h"
#include "model/gguf.h"
#include "tok/tokenizer.h"

static const char *const CMD = "tokenize";
static const char *const USAGE =
    "vkvector tokenize -m MODEL.gguf|DIR [--text TEXT | --file FILE] [--bos] [--special] [--decode]\n"
    "       vkvector tokenize -m MODEL.gguf|DIR --info\n"
    "       vkvector tokenize [-m MODEL.gguf] --messages FILE.json [--chat-template NAME |\n"
    "                         --chat-template-file FILE] [--think off|on] [--render]\n"
    "\n"
    "Prints the token ids of the text, space-separated on one line, as llama.cpp\n"
    "tokenizes it. With --messages, the text is the conversation rendered in a chat\n"
    "template with the assistant's generation prompt after it (control tokens in it\n"
    "are control tokens); --render prints that text as it is instead of its ids.\n"
    "-m DIR reads a Hugging Face folder's tokenizer.json and tokenizer_config.json.\n"
    "--info prints, as one JSON object, what the tokenizer says about the model:\n"
    "its special ids, every id that ends generation, and its chat template.";

/* Whole file (or stdin) into a malloc'ed buffer, at most VKV_MAX_DOC_BYTES. */
static vkv_status read_text(const char *path, char **out, size_t *len)
{
    if (!path || !strcmp(path, "-")) return vkv_read_stream(stdin, "standard input", VKV_MAX_DOC_BYTES, out, len);
    return vkv_read_file(path, VKV_MAX_DOC_BYTES, out, len);
}

vkv_status cli_load_tokenizer(const char *model, vkv_gguf **g, vkv_tokenizer **tok)
{
    struct stat sb;
    if (stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) return vkv_tokenizer_load_hf(model, tok);
    vkv_status st = vkv_gguf_open(model, g);
    return st ? st : vkv_tokenizer_load(*g, tok);
}

/* --decode: the text of space-separated ids, special tokens' text included,
 * written exactly. */
static vkv_status print_decoded(const vkv_tokenizer *tok, const char *text)
{
    struct {
        int32_t *v;
        size_t n, cap;
    } ids = {0};
    vkv_status st = VKV_OK;
    for (const char *s = text;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v >= vkv_tokenizer_n_vocab(tok)) {
            st = vkv_error(VKV_ERR_ARG, "--decode: '%.20s' is not a token id of this vocabulary (0..%d)", s,
                           vkv_tokenizer_n_vocab(tok) - 1);
            goto done;
        }
        if (ids.n == ids.cap) {
            size_t cap = ids.cap ? ids.cap * 2 : 64;
            int32_t *p = realloc(ids.v, cap * sizeof *p);
            if (!p) {
                st = vkv_error(VKV_ERR_OOM, "out of memory reading ids");
                goto done;
            }
            ids.v = p;
            ids.cap = cap;
        }
        ids.v[ids.n++] = (int32_t)v;
        s = end;
    }
    char *out;
    size_t len;
    if ((st = vkv_detokenize(tok, ids.v, ids.n, true, &out, &len))) goto done;
    fwrite(out, 1, len, stdout);
    free(out);
done:
    free(ids.v);
    return st;
}

/* --info: the tokenizer's facts that generation depends on, as JSON. The
 * end-of-generation ids are the vocabulary's (a Hugging Face folder adds
 * every id of generation_config.json's eos_token_id); the chat template is
 * the built-in one the model's template is recognised as, or null with the
 * reason it was not. */
static void print_info(const vkv_tokenizer *tok)
{
    vkv_json_writer w;
    vkv_json_init(&w, stdout, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "type");
    vkv_json_str(&w, vkv_tokenizer_type(tok) == VKV_VOCAB_SPM ? "spm" : "bpe");
    vkv_json_key(&w, "n_vocab");
    vkv_json_int(&w, vkv_tokenizer_n_vocab(tok));
    const struct { const char *key; int32_t id; } specials[] = {
        {"bos", vkv_tokenizer_bos(tok)}, {"eos", vkv_tokenizer_eos(tok)},
        {"eot", vkv_tokenizer_eot(tok)}, {"pad", vkv_tokenizer_pad(tok)},
    };
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        vkv_json_key(&w, specials[i].key);
        if (specials[i].id == VKV_TOKEN_NULL) vkv_json_null(&w);
        else vkv_json_int(&w, specials[i].id);
    }
    vkv_json_key(&w, "adds_bos");
    vkv_json_bool(&w, vkv_tokenizer_adds_bos(tok));
    vkv_json_key(&w, "end_of_generation");
    vkv_json_begin_array(&w);
    for (int32_t id = 0; id < vkv_tokenizer_n_vocab(tok); id++)
        if (vkv_tokenizer_is_eog(tok, id)) vkv_json_int(&w, id);
    vkv_json_end_array(&w);
    vkv_json_key(&w, "chat_template");
    vkv_chat_template t;
    if (vkv_tokenizer_chat_template(tok, &t)) {
        vkv_json_null(&w);
        vkv_json_key(&w, "chat_template_refused");
        vkv_json_str(&w, vkv_last_error());
    } else {
        vkv_json_str(&w, vkv_chat_template_name(t));
    }
    vkv_json_end_object(&w);
    printf("\n");
}

/* The options of a conversation rendered in a chat template. */
typedef struct chat_opts {
    const char *messages;      /* JSON file: [{"role": ..., "content": ...}, ...] */
    const char *template_name; /* a name vkv_chat_template_detect knows */
    const char *template_file; /* a Jinja template, recognised like a model's */
    int think;                 /* 1: Qwen3's thinking on (Hugging Face's default), 0: off */
    bool render;               /* print the text, not its ids */
} chat_opts;

/* The template of --chat-template, --chat-template-file or else the model's. */
static vkv_status choose_template(const chat_opts *c, const vkv_tokenizer *tok, vkv_chat_template *t)
{
    vkv_status st = VKV_OK;
    if (c->template_name) {
        *t = vkv_chat_template_detect(c->template_name); /* a known name: check_options */
    } else if (c->template_file) {
        char *src;
        size_t len;
        if ((st = vkv_read_file(c->template_file, VKV_MAX_DOC_BYTES, &src, &len))) return st;
        if ((*t = vkv_chat_template_detect(src)) == VKV_CHAT_UNKNOWN)
            st = vkv_error(VKV_ERR_UNSUPPORTED, "%s: not a chat template vkvector knows", c->template_file);
        free(src);
    } else {
        st = vkv_tokenizer_chat_template(tok, t);
    }
    if (!st) *t = vkv_chat_template_thinking(*t, c->think == 1);
    return st;
}

/* The conversation in FILE rendered in the template, generation prompt after. */
static vkv_status render_messages(const chat_opts *c, const vkv_tokenizer *tok, char **text, size_t *len)
{
    vkv_chat_template t;
    vkv_json_doc *doc = NULL;
    vkv_chat_msg *msgs = NULL;
    vkv_status st;
    if ((st = choose_template(c, tok, &t)) || (st = vkv_json_parse_file(c->messages, &doc))) goto done;
    const vkv_json *list = vkv_json_root(doc);
    if (list->type != VKV_JSON_ARRAY) {
        st = vkv_error(VKV_ERR_FORMAT, "%s: want a JSON array of {\"role\", \"content\"} objects", c->messages);
        goto done;
    }
    if (!(msgs = calloc(list->n_items + 1, sizeof *msgs))) {
        st = vkv_error(VKV_ERR_OOM, "out of memory reading %s", c->messages);
        goto done;
    }
    for (size_t i = 0; i < list->n_items; i++) {
        const vkv_json *role = vkv_json_get(list->items[i], "role"), *content = vkv_json_get(list->items[i], "content");
        if (!role || role->type != VKV_JSON_STRING || !content || content->type != VKV_JSON_STRING) {
            st = vkv_error(VKV_ERR_FORMAT, "%s: message %zu wants string members \"role\" and \"content\"", c->messages,
                           i);
            goto done;
        }
        msgs[i] = (vkv_chat_msg){role->string, content->string};
    }
    st = vkv_chat_apply(t, msgs, list->n_items, true, text, len);
done:
    free(msgs);
    vkv_json_free(doc);
    return st;
}

/* The rules between the options; -1 when they hold, else 2 (printed). */
static int check_options(const char *model, const char *text, const char *file, bool decode, bool bos, bool special,
                         bool info, const chat_opts *c)
{
    if (info && (text || file || decode || bos || special || c->messages))
        return cli_usage_error(CMD, "--info takes only -m");
    if (info && !model) return cli_usage_error(CMD, "--info needs -m MODEL.gguf or -m DIR");
    bool named = c->template_name || c->template_file;
    if (text && file) return cli_usage_error(CMD, "--text and --file exclude each other");
    if (c->messages && (text || file)) return cli_usage_error(CMD, "--messages excludes --text and --file");
    if (decode && (c->messages || bos || special))
        return cli_usage_error(CMD, "--decode excludes --messages, --bos and --special");
    if (c->template_name && c->template_file)
        return cli_usage_error(CMD, "--chat-template and --chat-template-file exclude each other");
    if (c->template_name && vkv_chat_template_detect(c->template_name) == VKV_CHAT_UNKNOWN)
        return cli_usage_error(CMD, "--chat-template: no template is named '%s' (%s)", c->template_name,
                               "llama3, llama31, chatml, qwen25, qwen3");
    if (!c->messages && (named || c->render || c->think >= 0))
        return cli_usage_error(CMD, "--chat-template, --chat-template-file, --think and --render need --messages");
    if (!model && !(c->render && named))
        return cli_usage_error(CMD, "-m MODEL.gguf or -m DIR is required (--render with a template given needs none)");
    return -1;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL;
    bool bos = false, special = false, decode = false, info = false;
    chat_opts chat = {.think = -1};
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "-m|--model", .metavar = "PATH", .dest = &model,
         .help = "GGUF file holding the vocabulary (vocabulary-only files work), or a\n"
                 "folder holding a Hugging Face tokenizer.json and tokenizer_config.json"},
        {.type = CLI_STR, .names = "--text", .metavar = "TEXT", .dest = &text, .help = "the text to tokenize"},
        {.type = CLI_STR, .names = "--file", .metavar = "FILE", .dest = &file,
         .help = "read the text from FILE ('-': standard input); without\n"
                 "--text, --file or --messages the text is read from standard input"},
        {.type = CLI_FLAG, .names = "--bos", .dest = &bos, .help = "put the vocabulary's BOS token first"},
        {.type = CLI_FLAG, .names = "--special", .dest = &special,
         .help = "text equal to a control token's text (e.g. <|im_start|>) is\n"
                 "that token; without it such text is tokenized as plain text"},
        {.type = CLI_FLAG, .names = "--decode", .dest = &decode,
         .help = "the input is token ids (space-separated): print their text exactly,\n"
                 "special tokens' text included"},
        {.type = CLI_FLAG, .names = "--info", .dest = &info,
         .help = "print the tokenizer's special ids, end-of-generation ids and chat\n"
                 "template as one JSON object, and nothing else"},
        {.type = CLI_SECTION, .names = "Chat templates:"},
        {.type = CLI_STR, .names = "--messages", .metavar = "FILE", .dest = &chat.messages,
         .help = "the text is this conversation (a JSON array of {\"role\", \"content\"})\n"
                 "in the chat template, with the generation prompt"},
        {.type = CLI_STR, .names = "--chat-template", .metavar = "NAME", .dest = &chat.template_name,
         .help = "llama3, llama31, chatml, qwen25 or qwen3 (default: the model's)"},
        {.type = CLI_STR, .names = "--chat-template-file", .metavar = "FILE", .dest = &chat.template_file,
         .help = "the template vkvector recognises in this Jinja source"},
        CLI_THINK_OPTION(chat.think, "on, as Hugging Face renders Qwen3"),
        {.type = CLI_FLAG, .names = "--render", .dest = &chat.render,
         .help = "print the rendered conversation exactly, not its ids"},
    };
    int parsed = cli_parse(CMD, USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    int usage = check_options(model, text, file, decode, bos, special, info, &chat);
    if (usage >= 0) return usage;
    if (chat.think < 0) chat.think = 1;

    vkv_gguf *g = NULL;
    vkv_tokenizer *tok = NULL;
    char *buf = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 0;
    vkv_status st = VKV_OK;
    if (model && (st = cli_load_tokenizer(model, &g, &tok))) goto done;
    if (info) {
        print_info(tok);
        goto done;
    }
    if (chat.messages) {
        if ((st = render_messages(&chat, tok, &buf, &len))) goto done;
        special = true; /* the template's markers are control tokens */
    } else if (text) {
        len = strlen(text);
    } else if ((st = read_text(file, &buf, &len))) {
        goto done;
    }
    /* standard output is checked at exit (src/cli/main.c) */
    if (chat.render) {
        fwrite(buf, 1, len, stdout);
        goto done;
    }
    if (decode) {
        st = print_decoded(tok, text ? text : buf);
        goto done;
    }
    if (bos && vkv_tokenizer_bos(tok) == VKV_TOKEN_NULL) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "--bos: the vocabulary in %s has no BOS token", model);
        goto done;
    }
    if ((st = vkv_tokenize(tok, text ? text : buf, len, false, special, &ids, &n))) goto done;
    if (bos) printf("%d%s", vkv_tokenizer_bos(tok), n ? " " : "");
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
done:
    if (st) rc = cli_fail(CMD, st);
    free(ids);
    vkv_tokenizer_free(tok);
    vkv_gguf_close(g);
    free(buf);
    return rc;
}
