/* Tokenizers from a Hugging Face folder: tokenizer.json (the model, added
 * tokens, normalizer, pre-tokenizer, decoder, post-processor),
 * tokenizer_config.json (BOS, EOS, chat template) and generation_config.json
 * (the stop ids). Only byte-level BPE is read; it becomes the same
 * vkv_tokenizer a GGUF vocabulary gives (docs/ARCHITECTURE.md, "Hugging Face
 * checkpoints"), so tokenizing, decoding and the special-token split are the
 * GGUF path's code. Every value read from a file is checked, and a bad one
 * is refused by a message naming the file, the key and the problem. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/json.h"
#include "model/hf_config.h"
#include "tok/tok_internal.h"

#define SHOWN 48 /* bytes of a token's text quoted in messages */

/* What one load reads and builds; `file` names the file being read. */
typedef struct hf_load {
    const char *file;
    vkv_tokenizer *tok;
    /* id -> text while the vocabulary is gathered (NULL: no token yet) */
    const char **text_of;
    bool *from_added;
    size_t n_slots;
    /* the post-processor's template: the token before and after the text */
    int32_t template_bos, template_eos;
} hf_load;

static vkv_status fail(vkv_status st, const hf_load *h, const char *fmt, ...) VKV_PRINTF(3, 4);
static vkv_status fail(vkv_status st, const hf_load *h, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vkv_error(st, "'%s': %s", h->file, msg);
}

/* A member that is present and not null. */
static const vkv_json *member(const vkv_json *obj, const char *key)
{
    const vkv_json *v = vkv_json_get(obj, key);
    return v && v->type != VKV_JSON_NULL ? v : NULL;
}

static vkv_status want(const hf_load *h, const char *where, const vkv_json *v, vkv_json_type type, const char *what)
{
    if (v->type == type) return VKV_OK;
    return fail(VKV_ERR_FORMAT, h, "%s is %s, not %s", where, vkv_json_type_name(v->type), what);
}

/* An optional boolean member; *out keeps its default when absent. */
static vkv_status opt_bool(const hf_load *h, const vkv_json *obj, const char *where, const char *key, bool *out)
{
    const vkv_json *v = member(obj, key);
    if (!v) return VKV_OK;
    if (v->type != VKV_JSON_BOOL)
        return fail(VKV_ERR_FORMAT, h, "%s%s is %s, not true or false", where, key, vkv_json_type_name(v->type));
    *out = v->boolean;
    return VKV_OK;
}

/* The "type" string of a component (model, normalizer, ...). */
static vkv_status type_of(const hf_load *h, const vkv_json *obj, const char *where, const char **out)
{
    vkv_status st = want(h, where, obj, VKV_JSON_OBJECT, "an object");
    if (st) return st;
    const vkv_json *t = member(obj, "type");
    if (!t) return fail(VKV_ERR_FORMAT, h, "%s has no \"type\"", where);
    if (t->type != VKV_JSON_STRING)
        return fail(VKV_ERR_FORMAT, h, "%s.type is %s, not a string", where, vkv_json_type_name(t->type));
    *out = t->string;
    return VKV_OK;
}

static int32_t find_token(const vkv_tokenizer *tok, const char *text)
{
    return tok_strmap_get(&tok->tokens, text, strlen(text), VKV_TOKEN_NULL);
}

/* ------------------------------------------------------------ the vocabulary */

/* Gives id to text; where says which entry of the file asks. */
static vkv_status claim_id(hf_load *h, const vkv_json *idv, const char *text, bool added, const char *where,
                           int32_t *max_id)
{
    uint64_t id;
    const char *bad = vkv_json_as_uint(idv, &id);
    if (bad) return fail(VKV_ERR_FORMAT, h, "%s ('%.*s') has an id that is %s, not a token id", where, SHOWN, text, bad);
    if (id >= h->n_slots)
        return fail(VKV_ERR_FORMAT, h, "%s ('%.*s') has id %" PRIu64 ", out of range: the file lists %zu tokens",
                    where, SHOWN, text, id, h->n_slots);
    const char *had = h->text_of[id];
    if (had) {
        /* an added token may restate a vocabulary entry (same id, same text) */
        if (!(added && !h->from_added[id] && !strcmp(had, text)))
            return fail(VKV_ERR_FORMAT, h, "id %" PRIu64 " is duplicated: %s ('%.*s') and an earlier entry ('%.*s')",
                        id, where, SHOWN, text, SHOWN, had);
    }
    h->text_of[id] = text;
    h->from_added[id] = added;
    if ((int64_t)id > *max_id) *max_id = (int32_t)id;
    return VKV_OK;
}

static vkv_status read_vocab(hf_load *h, const vkv_json *vocab, const vkv_json *added)
{
    vkv_tokenizer *tok = h->tok;
    vkv_status st;
    size_t n_added = added ? added->n_items : 0;
    h->n_slots = vocab->n_items + n_added;
    if (h->n_slots == 0) return fail(VKV_ERR_FORMAT, h, "model.vocab and added_tokens are empty");
    if (h->n_slots > INT32_MAX / 2) return fail(VKV_ERR_FORMAT, h, "%zu tokens is too many", h->n_slots);
    h->text_of = calloc(h->n_slots, sizeof *h->text_of);
    h->from_added = calloc(h->n_slots, sizeof *h->from_added);
    if (!h->text_of || !h->from_added) return fail(VKV_ERR_OOM, h, "out of memory for %zu tokens", h->n_slots);

    int32_t max_id = -1;
    for (size_t i = 0; i < vocab->n_items; i++)
        if ((st = claim_id(h, vocab->items[i], vocab->keys[i], false, "model.vocab entry", &max_id))) return st;
    for (size_t i = 0; i < n_added; i++) {
        const vkv_json *a = added->items[i];
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if ((st = want(h, where, a, VKV_JSON_OBJECT, "an object"))) return st;
        const vkv_json *content = member(a, "content"), *id = member(a, "id");
        if (!content || content->type != VKV_JSON_STRING)
            return fail(VKV_ERR_FORMAT, h, "%s.content is %s, not a string", where,
                        content ? vkv_json_type_name(content->type) : "missing");
        if (!id) return fail(VKV_ERR_FORMAT, h, "%s ('%.*s') has no id", where, SHOWN, content->string);
        if (content->string_len == 0 || strlen(content->string) != content->string_len)
            return fail(VKV_ERR_FORMAT, h, "%s.content is empty or holds a NUL", where);
        if ((st = claim_id(h, id, content->string, true, where, &max_id))) return st;
    }

    tok->n_vocab = max_id + 1;
    size_t text_bytes = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) text_bytes += (h->text_of[i] ? strlen(h->text_of[i]) : 0) + 1;
    if (text_bytes > UINT32_MAX) return fail(VKV_ERR_FORMAT, h, "token texts too long (%zu bytes)", text_bytes);
    if ((st = tok_alloc_vocab(tok, text_bytes)) || (st = tok_strmap_init(&tok->tokens, (size_t)tok->n_vocab)))
        return st;
    uint32_t o = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        const char *t = h->text_of[i] ? h->text_of[i] : "";
        size_t n = strlen(t);
        memcpy(tok->blob + o, t, n + 1);
        tok->off[i] = o;
        tok->len[i] = (uint32_t)n;
        /* an id no entry names stays an empty, unused slot */
        tok->attr[i] = h->text_of[i] ? TOK_ATTR_NORMAL : TOK_ATTR_UNUSED;
        if (n) {
            int32_t other = tok_strmap_get(&tok->tokens, t, n, VKV_TOKEN_NULL);
            if (other != VKV_TOKEN_NULL)
                return fail(VKV_ERR_FORMAT, h, "token '%.*s' has two ids, %" PRId32 " and %" PRId32, SHOWN, t, other, i);
            tok_strmap_put(&tok->tokens, tok->blob + o, (uint32_t)n, i, true);
        }
        o += (uint32_t)n + 1;
    }

    /* added tokens: special ones are control tokens (split out only when
     * special text is parsed), the others user-defined (always split out) */
    for (size_t i = 0; i < n_added; i++) {
        const vkv_json *a = added->items[i];
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu].", i);
        bool special = false, lstrip = false, rstrip = false, single_word = false;
        if ((st = opt_bool(h, a, where, "special", &special)) || (st = opt_bool(h, a, where, "lstrip", &lstrip)) ||
            (st = opt_bool(h, a, where, "rstrip", &rstrip)) || (st = opt_bool(h, a, where, "single_word", &single_word)))
            return st;
        const char *content = member(a, "content")->string;
        if (single_word)
            return fail(VKV_ERR_UNSUPPORTED, h, "%ssingle_word is true for '%.*s': whole-word matching of added tokens is not supported (refused)", where, SHOWN,
                        content);
        int32_t id = find_token(tok, content);
        uint16_t attr = special ? TOK_ATTR_CONTROL : TOK_ATTR_USER_DEFINED;
        if (lstrip) attr |= TOK_ATTR_LSTRIP;
        if (rstrip) attr |= TOK_ATTR_RSTRIP;
        tok->attr[id] = attr;
    }
    return VKV_OK;
}

/* One merge, "left right" or ["left", "right"], into its two texts. */
static vkv_status merge_parts(const hf_load *h, const vkv_json *m, size_t i, const char **a, size_t *alen,
                              const char **b, size_t *blen)
{
    if (m->type == VKV_JSON_STRING) {
        const char *sp = m->string_len > 1 ? memchr(m->string + 1, ' ', m->string_len - 1) : NULL;
        if (!sp)
            return fail(VKV_ERR_FORMAT, h, "model.merges[%zu] ('%.*s') is not two tokens separated by a space", i,
                        SHOWN, m->string);
        *a = m->string;
        *alen = (size_t)(sp - m->string);
        *b = sp + 1;
        *blen = m->string_len - *alen - 1;
        return VKV_OK;
    }
    if (m->type != VKV_JSON_ARRAY || m->n_items != 2 || m->items[0]->type != VKV_JSON_STRING ||
        m->items[1]->type != VKV_JSON_STRING)
        return fail(VKV_ERR_FORMAT, h, "model.merges[%zu] is %s, not \"left right\" or [\"left\", \"right\"]", i,
                    m->type == VKV_JSON_ARRAY ? "another array" : vkv_json_type_name(m->type));
    *a = m->items[0]->string;
    *alen = m->items[0]->string_len;
    *b = m->items[1]->string;
    *blen = m->items[1]->string_len;
    return VKV_OK;
}

/* The ranked merges; both halves and their concatenation must be tokens. */
static vkv_status read_merges(hf_load *h, const vkv_json *merges)
{
    vkv_tokenizer *tok = h->tok;
    vkv_status st;
    size_t total = 1;
    for (size_t i = 0; i < merges->n_items; i++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        if ((st = merge_parts(h, merges->items[i], i, &a, &alen, &b, &blen))) return st;
        total += alen + blen + 2;
    }
    if (total > UINT32_MAX || merges->n_items > INT32_MAX / 2)
        return fail(VKV_ERR_FORMAT, h, "model.merges is too long (%zu merges)", merges->n_items);
    tok->merge_blob = malloc(total);
    char *joined = malloc(total);
    if (!tok->merge_blob || !joined || (st = tok_strmap_init(&tok->merges, merges->n_items))) {
        free(joined);
        return fail(VKV_ERR_OOM, h, "out of memory for %zu merges", merges->n_items);
    }
    size_t o = 0;
    for (size_t i = 0; i < merges->n_items; i++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        merge_parts(h, merges->items[i], i, &a, &alen, &b, &blen);
        const char *side[2] = {a, b};
        size_t side_len[2] = {alen, blen};
        for (int s = 0; s < 2; s++)
            if (tok_strmap_get(&tok->tokens, side[s], side_len[s], VKV_TOKEN_NULL) == VKV_TOKEN_NULL) {
                st = fail(VKV_ERR_FORMAT, h, "model.merges[%zu] names '%.*s', which is not a token of model.vocab", i,
                          (int)(side_len[s] < SHOWN ? side_len[s] : SHOWN), side[s]);
                goto done;
            }
        memcpy(joined, a, alen);
        memcpy(joined + alen, b, blen);
        if (tok_strmap_get(&tok->tokens, joined, alen + blen, VKV_TOKEN_NULL) == VKV_TOKEN_NULL) {
            st = fail(VKV_ERR_FORMAT, h, "model.merges[%zu] makes '%.*s', which is not a token of model.vocab", i,
                      (int)(alen + blen < SHOWN ? alen + blen : SHOWN), joined);
            goto done;
        }
        /* stored as "left right", the form the merge map keys on */
        char *m = tok->merge_blob + o;
        memcpy(m, a, alen);
        m[alen] = ' ';
        memcpy(m + alen + 1, b, blen);
        m[alen + 1 + blen] = 0;
        tok_strmap_put_pair(&tok->merges, m, (uint32_t)(alen + 1 + blen), (uint32_t)alen, (int32_t)i);
        o += alen + blen + 2;
    }
done:
    free(joined);
    return st;
}

static vkv_status read_model(hf_load *h, const vkv_json *root)
{
    const vkv_json *model = member(root, "model");
    if (!model) return fail(VKV_ERR_FORMAT, h, "missing \"model\"");
    const char *type;
    vkv_status st = type_of(h, model, "model", &type);
    if (st) return st;
    if (strcmp(type, "BPE"))
        return fail(VKV_ERR_UNSUPPORTED, h, "model type '%s' is not supported: vkvector reads byte-level BPE only", type);
    bool byte_fallback = false;
    if ((st = opt_bool(h, model, "model.", "byte_fallback", &byte_fallback)) ||
        (st = opt_bool(h, model, "model.", "ignore_merges", &h->tok->ignore_merges)))
        return st;
    if (byte_fallback) return fail(VKV_ERR_UNSUPPORTED, h, "model.byte_fallback is true: only byte-level BPE without byte fallback is supported (refused)");
    const vkv_json *dropout = member(model, "dropout");
    if (dropout && !(dropout->type == VKV_JSON_NUMBER && dropout->number == 0))
        return fail(VKV_ERR_UNSUPPORTED, h, "model.dropout is set: BPE dropout (a training-time option) is not supported (refused)");
    const char *affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const vkv_json *v = member(model, affixes[i]);
        if (v && !(v->type == VKV_JSON_STRING && v->string_len == 0))
            return fail(VKV_ERR_UNSUPPORTED, h, "model.%s is set: subword affixes are not supported (refused)", affixes[i]);
    }

    const vkv_json *vocab = member(model, "vocab"), *merges = member(model, "merges");
    const vkv_json *added = member(root, "added_tokens");
    if (!vocab) return fail(VKV_ERR_FORMAT, h, "missing model.vocab");
    if (!merges) return fail(VKV_ERR_FORMAT, h, "missing model.merges");
    if ((st = want(h, "model.vocab", vocab, VKV_JSON_OBJECT, "an object")) ||
        (st = want(h, "model.merges", merges, VKV_JSON_ARRAY, "an array")) ||
        (added && (st = want(h, "added_tokens", added, VKV_JSON_ARRAY, "an array"))))
        return st;
    if ((st = read_vocab(h, vocab, added))) return st;
    const vkv_json *unk = member(model, "unk_token");
    if (unk) {
        if ((st = want(h, "model.unk_token", unk, VKV_JSON_STRING, "a string"))) return st;
        h->tok->unk = find_token(h->tok, unk->string);
    }
    return read_merges(h, merges);
}

/* ------------------------------------------- normalizer and pre-tokenizer */

/* A component that is one step, or a "Sequence" of steps under `key`: *list
 * is that array (NULL for one step) and *count its steps; *type is the
 * component's own type. */
static vkv_status read_steps(hf_load *h, const vkv_json *c, const char *what, const char *key, const char **type,
                             const vkv_json **list, size_t *count)
{
    vkv_status st = type_of(h, c, what, type);
    if (st) return st;
    *list = NULL;
    if (!strcmp(*type, "Sequence")) {
        const vkv_json *l = member(c, key);
        if (!l) return fail(VKV_ERR_FORMAT, h, "%s Sequence has no \"%s\"", what, key);
        char path[64];
        snprintf(path, sizeof path, "%s.%s", what, key);
        if ((st = want(h, path, l, VKV_JSON_ARRAY, "an array"))) return st;
        *list = l;
    }
    *count = *list ? (*list)->n_items : 1;
    return VKV_OK;
}

static vkv_status read_normalizer(hf_load *h, const vkv_json *root)
{
    const vkv_json *n = member(root, "normalizer");
    if (!n) return VKV_OK;
    const char *type;
    const vkv_json *list;
    size_t count;
    vkv_status st = read_steps(h, n, "normalizer", "normalizers", &type, &list, &count);
    if (st) return st;
    for (size_t i = 0; i < count; i++) {
        if (list && (st = type_of(h, list->items[i], "normalizer.normalizers[]", &type))) return st;
        if (strcmp(type, "NFC"))
            return fail(VKV_ERR_UNSUPPORTED, h, "normalizer '%s' is not supported (only NFC, or none)", type);
        h->tok->normalize_nfc = true;
    }
    return VKV_OK;
}

/* ByteLevel's own regex, as tokenizer.json's readers define it. */
#define RE_BYTE_LEVEL "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* A Split step: its regex (a String pattern becomes a literal one). *owned
 * is set when the regex was built and must be freed. */
static vkv_status read_split(const hf_load *h, const vkv_json *step, const char **re, char **owned)
{
    const vkv_json *pat = member(step, "pattern"), *behavior = member(step, "behavior");
    bool invert = false;
    vkv_status st = opt_bool(h, step, "pre_tokenizer Split.", "invert", &invert);
    if (st) return st;
    if (!pat || pat->type != VKV_JSON_OBJECT)
        return fail(VKV_ERR_FORMAT, h, "pre_tokenizer Split has no \"pattern\" object");
    if (!behavior || behavior->type != VKV_JSON_STRING || strcmp(behavior->string, "Isolated") || invert)
        return fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer Split: only behavior \"Isolated\" without invert is implemented (has '%s'%s)",
                    behavior && behavior->type == VKV_JSON_STRING ? behavior->string : "?", invert ? ", invert" : "");
    const vkv_json *regex = member(pat, "Regex"), *literal = member(pat, "String");
    if (regex && regex->type == VKV_JSON_STRING && strlen(regex->string) == regex->string_len) {
        *re = regex->string;
        return VKV_OK;
    }
    if (literal && literal->type == VKV_JSON_STRING && literal->string_len && !strstr(literal->string, "\\E") &&
        strlen(literal->string) == literal->string_len) {
        size_t n = literal->string_len + 5;
        if (!(*owned = malloc(n))) return fail(VKV_ERR_OOM, h, "out of memory");
        snprintf(*owned, n, "\\Q%s\\E", literal->string);
        *re = *owned;
        return VKV_OK;
    }
    return fail(VKV_ERR_FORMAT, h, "pre_tokenizer Split.pattern wants a \"Regex\" or a non-empty \"String\"");
}

static vkv_status read_pre_tokenizer(hf_load *h, const vkv_json *root)
{
    vkv_tokenizer *tok = h->tok;
    const vkv_json *p = member(root, "pre_tokenizer");
    if (!p) return fail(VKV_ERR_UNSUPPORTED, h, "no pre_tokenizer: only byte-level BPE (a ByteLevel pre-tokenizer) is implemented");
    const char *type;
    const vkv_json *steps;
    size_t n_steps;
    vkv_status st = read_steps(h, p, "pre_tokenizer", "pretokenizers", &type, &steps, &n_steps);
    if (st) return st;
    const char *re[TOK_MAX_REGEX + 1];
    char *owned[TOK_MAX_REGEX + 1] = {0};
    int n_re = 0;
    bool byte_level = false;
    for (size_t i = 0; i < n_steps && !st; i++) {
        const vkv_json *step = steps ? steps->items[i] : p;
        if (steps && (st = type_of(h, step, "pre_tokenizer.pretokenizers[]", &type))) break;
        if (byte_level) {
            st = fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer: a '%s' step after ByteLevel is not supported (refused)", type);
        } else if (n_re == TOK_MAX_REGEX) {
            st = fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer: more than %d regexes", TOK_MAX_REGEX);
        } else if (!strcmp(type, "Split")) {
            st = read_split(h, step, &re[n_re], &owned[n_re]);
            n_re++;
        } else if (!strcmp(type, "ByteLevel")) {
            byte_level = true;
            bool use_regex = true, prefix = true; /* the format's defaults */
            if ((st = opt_bool(h, step, "pre_tokenizer ByteLevel.", "use_regex", &use_regex)) ||
                (st = opt_bool(h, step, "pre_tokenizer ByteLevel.", "add_prefix_space", &prefix)))
                break;
            /* after a Split the prefix would go in front of every piece */
            if (prefix && n_re)
                st = fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer: ByteLevel add_prefix_space after a Split is not supported (refused)");
            tok->bpe_prefix_space = prefix;
            if (use_regex) re[n_re++] = RE_BYTE_LEVEL;
        } else {
            st = fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer '%s' is not supported (refused; Split and ByteLevel are)", type);
        }
    }
    if (!st && !byte_level)
        st = fail(VKV_ERR_UNSUPPORTED, h, "pre_tokenizer has no ByteLevel step: only byte-level BPE is implemented");
    if (!st) {
        /* a known regex list runs as the GGUF vocabulary of the same name */
        const char *known = tok_pretok_known(re, n_re);
        tok_pre_info info;
        if (known) {
            st = tok_pretok_init(&tok->pretok, known, &info);
        } else {
            char what[300];
            snprintf(what, sizeof what, "'%s': pre_tokenizer", h->file);
            st = tok_pretok_init_regexes(&tok->pretok, re, n_re, what);
        }
        if (!st && !(tok->pre_name = strdup(known ? known : "tokenizer.json")))
            st = fail(VKV_ERR_OOM, h, "out of memory");
    }
    for (int i = 0; i <= TOK_MAX_REGEX; i++) free(owned[i]);
    return st;
}

/* ------------------------------------------- decoder and post-processor */

static vkv_status read_decoder(hf_load *h, const vkv_json *root)
{
    const vkv_json *d = member(root, "decoder");
    if (!d) return VKV_OK;
    const char *type;
    vkv_status st = type_of(h, d, "decoder", &type);
    if (st) return st;
    if (strcmp(type, "ByteLevel"))
        return fail(VKV_ERR_UNSUPPORTED, h, "decoder '%s' is not supported (refused; ByteLevel is)", type);
    return VKV_OK;
}

/* The id a TemplateProcessing names by its special_tokens key. */
static vkv_status template_token(hf_load *h, const vkv_json *proc, const vkv_json *item, int32_t *id)
{
    const vkv_json *name = member(item, "id");
    if (!name || name->type != VKV_JSON_STRING)
        return fail(VKV_ERR_FORMAT, h, "post_processor: a SpecialToken without a string \"id\"");
    const vkv_json *entry = member(member(proc, "special_tokens"), name->string);
    const vkv_json *ids = member(entry, "ids");
    if (ids) {
        uint64_t u;
        if (ids->type != VKV_JSON_ARRAY || ids->n_items != 1 || vkv_json_as_uint(ids->items[0], &u) ||
            u >= (uint64_t)h->tok->n_vocab)
            return fail(VKV_ERR_FORMAT, h, "post_processor: special_tokens['%.*s'].ids is not one id of the vocabulary",
                        SHOWN, name->string);
        *id = (int32_t)u;
        return VKV_OK;
    }
    if ((*id = find_token(h->tok, name->string)) == VKV_TOKEN_NULL)
        return fail(VKV_ERR_FORMAT, h, "post_processor names '%.*s', which is not a token", SHOWN, name->string);
    return VKV_OK;
}

/* TemplateProcessing's "single": at most one special token before the
 * sequence (a BOS, as Llama 3's) and one after it. */
static vkv_status read_template(hf_load *h, const vkv_json *proc)
{
    const vkv_json *single = member(proc, "single");
    if (!single || single->type != VKV_JSON_ARRAY)
        return fail(VKV_ERR_FORMAT, h, "post_processor TemplateProcessing has no \"single\" array");
    bool seen_sequence = false;
    for (size_t i = 0; i < single->n_items; i++) {
        const vkv_json *item = single->items[i], *sp = member(item, "SpecialToken");
        if (member(item, "Sequence")) {
            seen_sequence = true;
            continue;
        }
        if (!sp) return fail(VKV_ERR_FORMAT, h, "post_processor single[%zu] is neither SpecialToken nor Sequence", i);
        int32_t *slot = seen_sequence ? &h->template_eos : &h->template_bos;
        if (*slot != VKV_TOKEN_NULL)
            return fail(VKV_ERR_UNSUPPORTED, h, "post_processor: more than one special token %s the text",
                        seen_sequence ? "after" : "before");
        vkv_status st = template_token(h, proc, sp, slot);
        if (st) return st;
    }
    return VKV_OK;
}

static vkv_status read_post_processor(hf_load *h, const vkv_json *root)
{
    const vkv_json *p = member(root, "post_processor");
    if (!p) return VKV_OK;
    const char *type;
    const vkv_json *list;
    size_t count;
    vkv_status st = read_steps(h, p, "post_processor", "processors", &type, &list, &count);
    if (st) return st;
    for (size_t i = 0; i < count; i++) {
        const vkv_json *proc = list ? list->items[i] : p;
        if (list && (st = type_of(h, proc, "post_processor.processors[]", &type))) return st;
        if (!strcmp(type, "ByteLevel")) continue; /* offsets only */
        if (strcmp(type, "TemplateProcessing"))
            return fail(VKV_ERR_UNSUPPORTED, h, "post_processor '%s' is not supported (refused; ByteLevel and TemplateProcessing are)", type);
        if ((st = read_template(h, proc))) return st;
    }
    return VKV_OK;
}

/* ------------------------------------------------- tokenizer_config.json */

/* A token given as its text or as {"content": text}; *id stays when the
 * key is absent or null. */
static vkv_status config_token(const hf_load *h, const vkv_json *cfg, const char *key, int32_t *id)
{
    const vkv_json *v = member(cfg, key);
    if (!v) return VKV_OK;
    if (v->type == VKV_JSON_OBJECT) v = member(v, "content");
    if (!v || v->type != VKV_JSON_STRING)
        return fail(VKV_ERR_FORMAT, h, "%s is %s, not a token's text", key, v ? vkv_json_type_name(v->type) : "an object without \"content\"");
    if ((*id = find_token(h->tok, v->string)) == VKV_TOKEN_NULL)
        return fail(VKV_ERR_FORMAT, h, "%s '%.*s' is not a token of tokenizer.json", key, SHOWN, v->string);
    return VKV_OK;
}

/* chat_template: a string, or a list of {name, template} (the "default"). */
static vkv_status config_chat_template(const hf_load *h, const vkv_json *cfg, char **out)
{
    const vkv_json *v = member(cfg, "chat_template");
    if (v && v->type == VKV_JSON_ARRAY) {
        const vkv_json *list = v;
        v = NULL;
        for (size_t i = 0; i < list->n_items; i++) {
            const vkv_json *name = member(list->items[i], "name");
            if (name && name->type == VKV_JSON_STRING && !strcmp(name->string, "default"))
                v = member(list->items[i], "template");
        }
    }
    if (!v) return VKV_OK;
    if (v->type != VKV_JSON_STRING)
        return fail(VKV_ERR_FORMAT, h, "chat_template is %s, not a string", vkv_json_type_name(v->type));
    if (!(*out = strdup(v->string))) return fail(VKV_ERR_OOM, h, "out of memory");
    return VKV_OK;
}

static vkv_status read_config(hf_load *h, const vkv_json *cfg)
{
    vkv_tokenizer *tok = h->tok;
    vkv_status st = want(h, "the file", cfg, VKV_JSON_OBJECT, "an object");
    if (st) return st;
    /* the post-processor's template decides unless add_*_token say */
    tok->bos = h->template_bos;
    tok->add_bos = h->template_bos != VKV_TOKEN_NULL;
    tok->add_eos = h->template_eos != VKV_TOKEN_NULL;
    if ((st = config_token(h, cfg, "bos_token", &tok->bos)) || (st = config_token(h, cfg, "eos_token", &tok->eos)) ||
        (st = config_token(h, cfg, "pad_token", &tok->pad)) || (st = config_token(h, cfg, "unk_token", &tok->unk)) ||
        (st = opt_bool(h, cfg, "", "add_bos_token", &tok->add_bos)) ||
        (st = opt_bool(h, cfg, "", "add_eos_token", &tok->add_eos)) ||
        (st = config_chat_template(h, cfg, &tok->chat_template)))
        return st;
    if (tok->add_bos && tok->bos == VKV_TOKEN_NULL)
        return fail(VKV_ERR_FORMAT, h, "add_bos_token is true but no bos_token is given");
    if (tok->eos == VKV_TOKEN_NULL) tok->eos = h->template_eos;
    if (tok->add_eos && tok->eos == VKV_TOKEN_NULL)
        return fail(VKV_ERR_FORMAT, h, "add_eos_token is true but no eos_token is given");
    return VKV_OK;
}

/* ------------------------------------------------------------- loading */

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static vkv_status read_tokenizer_json(hf_load *h, const vkv_json *root)
{
    vkv_status st = want(h, "the file", root, VKV_JSON_OBJECT, "an object");
    if (st || (st = read_model(h, root)) || (st = read_normalizer(h, root)) || (st = read_pre_tokenizer(h, root)) ||
        (st = read_decoder(h, root)) || (st = read_post_processor(h, root)))
        return st;
    return VKV_OK;
}

/* generation_config.json's eos_token_id: every one ends generation. */
static vkv_status read_generation_eos(hf_load *h, const char *path)
{
    uint32_t ids[VKV_HF_MAX_EOS], n;
    vkv_status st = vkv_hf_generation_eos_read(path, ids, &n);
    if (st) return st;
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] >= (uint32_t)h->tok->n_vocab)
            return fail(VKV_ERR_FORMAT, h, "eos_token_id %" PRIu32 " is out of range (the vocabulary has %" PRId32 " ids)",
                        ids[i], h->tok->n_vocab);
        h->tok->eog[ids[i]] = 1;
        if (h->tok->eos == VKV_TOKEN_NULL) h->tok->eos = (int32_t)ids[i];
    }
    return VKV_OK;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

vkv_status vkv_tokenizer_load_hf(const char *dir, vkv_tokenizer **out)
{
    *out = NULL;
    hf_load h = {.template_bos = VKV_TOKEN_NULL, .template_eos = VKV_TOKEN_NULL};
    char *tok_path = join(dir, "tokenizer.json"), *cfg_path = join(dir, "tokenizer_config.json");
    char *gen_path = join(dir, "generation_config.json");
    vkv_json_doc *doc = NULL;
    vkv_status st = VKV_OK;
    if (!tok_path || !cfg_path || !gen_path || !(h.tok = tok_new())) {
        st = vkv_error(VKV_ERR_OOM, "out of memory loading the tokenizer");
        goto done;
    }
    h.tok->type = VKV_VOCAB_BPE;
    h.file = tok_path;
    if ((st = vkv_json_parse_file(tok_path, &doc)) || (st = read_tokenizer_json(&h, vkv_json_root(doc)))) goto done;
    vkv_json_free(doc);
    doc = NULL;

    h.file = cfg_path;
    if (exists(cfg_path)) {
        if ((st = vkv_json_parse_file(cfg_path, &doc)) || (st = read_config(&h, vkv_json_root(doc)))) goto done;
    } else {
        h.tok->bos = h.template_bos;
        h.tok->add_bos = h.template_bos != VKV_TOKEN_NULL;
        h.tok->eos = h.template_eos;
        h.tok->add_eos = h.template_eos != VKV_TOKEN_NULL;
    }
    h.file = gen_path;
    if (exists(gen_path) && (st = read_generation_eos(&h, gen_path))) goto done;

    int32_t fim[TOK_N_FIM] = {VKV_TOKEN_NULL, VKV_TOKEN_NULL, VKV_TOKEN_NULL,
                              VKV_TOKEN_NULL, VKV_TOKEN_NULL, VKV_TOKEN_NULL};
    if ((st = tok_index_specials(h.tok, fim)) || (st = tok_build_pieces(h.tok))) goto done;
done:
    vkv_json_free(doc);
    free(h.text_of);
    free(h.from_added);
    free(tok_path);
    free(cfg_path);
    free(gen_path);
    if (st) {
        vkv_tokenizer_free(h.tok);
        return vkv_error_context(st, "loading the tokenizer of '%s'", dir);
    }
    *out = h.tok;
    return VKV_OK;
}
