/* Vocabulary loading from GGUF metadata, the special-token partition, and the
 * tokenize entry point. Behaviour follows llama.cpp's llama-vocab.cpp so
 * that token ids match it exactly. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

/* ------------------------------------------------------------------ */
/* loading                                                             */
/* ------------------------------------------------------------------ */

static bool key_present(const vkv_gguf *g, const char *key) { return vkv_gguf_find_key(g, key) >= 0; }

/* A metadata string as a NUL-terminated copy; *out stays NULL when absent. */
static vkv_status get_str_copy(const vkv_gguf *g, const char *key, char **out)
{
    *out = NULL;
    if (!key_present(g, key)) return VKV_OK;
    vkv_gguf_str s;
    vkv_status st = vkv_gguf_get_str(g, key, &s);
    if (st) return st;
    char *p = malloc(s.len + 1);
    if (!p) return vkv_error(VKV_ERR_OOM, "out of memory reading %s", key);
    memcpy(p, s.data, s.len);
    p[s.len] = 0;
    *out = p;
    return VKV_OK;
}

/* A special token id. One outside the vocabulary is not an error (llama.cpp
 * loads such files too) but the model would silently lose its BOS or end of
 * turn, so say so: the default id stays, or the token is absent. */
static vkv_status read_special(const vkv_gguf *g, const char *key, int32_t n_vocab, int32_t *id)
{
    if (!key_present(g, key)) return VKV_OK;
    int64_t v;
    vkv_status st = vkv_gguf_get_i64(g, key, &v);
    if (st) return st;
    if (v >= 0 && v < n_vocab) {
        *id = (int32_t)v;
        return VKV_OK;
    }
    fprintf(stderr, "vkvector: warning: %s = %" PRId64 " is outside the vocabulary (ids 0..%" PRId32 "): ", key, v,
            n_vocab - 1);
    if (*id != VKV_TOKEN_NULL) fprintf(stderr, "using the default id %" PRId32 " instead\n", *id);
    else fprintf(stderr, "the vocabulary has no such token\n");
    return VKV_OK;
}

vkv_status tok_alloc_vocab(vkv_tokenizer *tok, size_t text_bytes)
{
    size_t n = (size_t)tok->n_vocab;
    tok->blob = malloc(text_bytes ? text_bytes : 1);
    tok->off = calloc(n, sizeof *tok->off);
    tok->len = calloc(n, sizeof *tok->len);
    tok->score = calloc(n, sizeof *tok->score);
    tok->attr = malloc(n * sizeof *tok->attr);
    tok->eog = calloc(n, 1);
    if (!tok->blob || !tok->off || !tok->len || !tok->score || !tok->attr || !tok->eog)
        return vkv_error(VKV_ERR_OOM, "out of memory for a %zu-token vocabulary", n);
    return VKV_OK;
}

static vkv_status load_tokens(vkv_tokenizer *tok, const vkv_gguf *g)
{
    const char *key = "tokenizer.ggml.tokens";
    if (!key_present(g, key)) return vkv_error(VKV_ERR_FORMAT, "missing %s", key);
    vkv_gguf_type et;
    uint64_t n;
    const void *data;
    vkv_status st = vkv_gguf_get_arr(g, key, &et, &n, &data);
    if (st) return st;
    if (et != VKV_GGUF_STRING) return vkv_error(VKV_ERR_FORMAT, "%s is not a string array", key);
    if (n == 0 || n > INT32_MAX / 2) return vkv_error(VKV_ERR_FORMAT, "%s has %llu entries", key, (unsigned long long)n);
    tok->n_vocab = (int32_t)n;

    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        vkv_gguf_str s;
        if ((st = vkv_gguf_arr_str(g, key, i, &s))) return st;
        total += s.len + 1;
    }
    if (total > UINT32_MAX) return vkv_error(VKV_ERR_FORMAT, "%s: texts too long (%llu bytes)", key, (unsigned long long)total);
    if ((st = tok_alloc_vocab(tok, (size_t)total))) return st;
    uint32_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        vkv_gguf_str s;
        if ((st = vkv_gguf_arr_str(g, key, i, &s))) return st;
        memcpy(tok->blob + o, s.data, s.len);
        tok->blob[o + s.len] = 0;
        tok->off[i] = o;
        tok->len[i] = (uint32_t)s.len;
        o += (uint32_t)s.len + 1;
    }

    key = "tokenizer.ggml.scores";
    if (key_present(g, key)) {
        if ((st = vkv_gguf_get_arr(g, key, &et, &n, &data))) return st;
        if (et != VKV_GGUF_FLOAT32 || n != (uint64_t)tok->n_vocab)
            return vkv_error(VKV_ERR_FORMAT, "%s must be %d float32 values (has %llu of type %d)", key,
                             tok->n_vocab, (unsigned long long)n, (int)et);
        memcpy(tok->score, data, n * sizeof(float));
    }

    key = "tokenizer.ggml.token_type";
    for (int32_t i = 0; i < tok->n_vocab; i++) tok->attr[i] = TOK_ATTR_NORMAL;
    if (key_present(g, key)) {
        if ((st = vkv_gguf_get_arr(g, key, &et, &n, &data))) return st;
        if ((et != VKV_GGUF_INT32 && et != VKV_GGUF_UINT32) || n != (uint64_t)tok->n_vocab)
            return vkv_error(VKV_ERR_FORMAT, "%s must be %d int32 values (has %llu of type %d)", key,
                             tok->n_vocab, (unsigned long long)n, (int)et);
        for (int32_t i = 0; i < tok->n_vocab; i++) {
            int32_t t;
            memcpy(&t, (const char *)data + 4 * (size_t)i, 4);
            switch (t) {
            case VKV_TOKEN_NORMAL: tok->attr[i] = TOK_ATTR_NORMAL; break;
            case VKV_TOKEN_UNKNOWN: tok->attr[i] = TOK_ATTR_UNKNOWN; break;
            case VKV_TOKEN_CONTROL: tok->attr[i] = TOK_ATTR_CONTROL; break;
            case VKV_TOKEN_USER_DEFINED: tok->attr[i] = TOK_ATTR_USER_DEFINED; break;
            case VKV_TOKEN_UNUSED: tok->attr[i] = TOK_ATTR_UNUSED; break;
            case VKV_TOKEN_BYTE: tok->attr[i] = TOK_ATTR_BYTE; break;
            default: tok->attr[i] = TOK_ATTR_UNDEFINED; break;
            }
        }
    }

    if ((st = tok_strmap_init(&tok->tokens, (size_t)tok->n_vocab))) return st;
    for (int32_t i = 0; i < tok->n_vocab; i++)
        tok_strmap_put(&tok->tokens, tok->blob + tok->off[i], tok->len[i], i, true);  /* last duplicate wins */
    return VKV_OK;
}

static vkv_status load_merges(vkv_tokenizer *tok, const vkv_gguf *g)
{
    const char *key = "tokenizer.ggml.merges";
    if (!key_present(g, key)) return vkv_error(VKV_ERR_FORMAT, "missing %s (needed by a gpt2 vocabulary)", key);
    vkv_gguf_type et;
    uint64_t n;
    const void *data;
    vkv_status st = vkv_gguf_get_arr(g, key, &et, &n, &data);
    if (st) return st;
    if (et != VKV_GGUF_STRING) return vkv_error(VKV_ERR_FORMAT, "%s is not a string array", key);
    if (n > INT32_MAX / 2) return vkv_error(VKV_ERR_FORMAT, "%s has %llu entries", key, (unsigned long long)n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        vkv_gguf_str s;
        if ((st = vkv_gguf_arr_str(g, key, i, &s))) return st;
        total += s.len + 1;
    }
    tok->merge_blob = malloc(total ? total : 1);
    if (!tok->merge_blob) return vkv_error(VKV_ERR_OOM, "out of memory for %llu merges", (unsigned long long)n);
    if ((st = tok_strmap_init(&tok->merges, (size_t)n))) return st;
    size_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        vkv_gguf_str s;
        if ((st = vkv_gguf_arr_str(g, key, i, &s))) return st;
        if (s.len > UINT32_MAX / 2) return vkv_error(VKV_ERR_FORMAT, "%s[%llu] is too long", key, (unsigned long long)i);
        char *m = tok->merge_blob + o;
        memcpy(m, s.data, s.len);
        m[s.len] = 0;
        o += s.len + 1;
        /* "left right", split at the first space after the first byte */
        const char *sp = s.len > 1 ? memchr(m + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue;
        tok_strmap_put_pair(&tok->merges, m, (uint32_t)s.len, (uint32_t)(sp - m), (int32_t)i);
    }
    return VKV_OK;
}

static int32_t find_text(const vkv_tokenizer *tok, const char *s)
{
    return tok_strmap_get(&tok->tokens, s, strlen(s), VKV_TOKEN_NULL);
}

static void make_control(vkv_tokenizer *tok, int32_t id)
{
    if (!(tok->attr[id] & TOK_ATTR_CONTROL)) tok->attr[id] = TOK_ATTR_CONTROL;
}

/* Special tokens llama.cpp finds by their text when the metadata does not
 * name them; such a token becomes a control token. */
static void detect_by_text(vkv_tokenizer *tok, int32_t *id, const char *const *texts)
{
    if (*id != VKV_TOKEN_NULL) return;
    for (size_t i = 0; texts[i]; i++) {
        int32_t t = find_text(tok, texts[i]);
        if (t != VKV_TOKEN_NULL) {
            *id = t;
            make_control(tok, t);
            return;
        }
    }
}

static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", /* DeepSeek */
    "<end_of_utterance>", NULL,
};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", NULL,
};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", NULL,
};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", NULL,
};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", "<|file_separator|>", "<fim-sep>", NULL};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", NULL,
};

static bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *a, const void *b)
{
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

vkv_status tok_index_specials(vkv_tokenizer *tok, int32_t fim[TOK_N_FIM])
{
    detect_by_text(tok, &tok->eot, eot_texts);
    detect_by_text(tok, &tok->eom, eom_texts);
    detect_by_text(tok, &fim[0], fim_pre_texts);
    detect_by_text(tok, &fim[1], fim_suf_texts);
    detect_by_text(tok, &fim[2], fim_mid_texts);
    detect_by_text(tok, &fim[3], fim_pad_texts);
    detect_by_text(tok, &fim[4], fim_rep_texts);
    detect_by_text(tok, &fim[5], fim_sep_texts);

    int32_t eog_ids[] = {fim[3], fim[4], fim[5], tok->eos, tok->eot, tok->eom};
    for (size_t i = 0; i < sizeof eog_ids / sizeof eog_ids[0]; i++)
        if (eog_ids[i] != VKV_TOKEN_NULL) tok->eog[eog_ids[i]] = 1;
    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t t = find_text(tok, eog_texts[i]);
        if (t != VKV_TOKEN_NULL) {
            tok->eog[t] = 1;
            make_control(tok, t);
        }
    }

    /* the partition order: longest text first */
    tok->special = malloc((size_t)tok->n_vocab * sizeof *tok->special);
    special_key *keys_sorted = malloc((size_t)tok->n_vocab * sizeof *keys_sorted);
    if (!tok->special || !keys_sorted) {
        free(keys_sorted);
        return vkv_error(VKV_ERR_OOM, "out of memory listing special tokens");
    }
    for (int32_t i = 0; i < tok->n_vocab; i++)
        if ((tok->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) && tok->len[i] > 0)
            keys_sorted[tok->n_special++] = (special_key){tok->len[i], i};
    qsort(keys_sorted, tok->n_special, sizeof *keys_sorted, cmp_special);
    for (size_t i = 0; i < tok->n_special; i++) tok->special[i] = keys_sorted[i].id;
    free(keys_sorted);
    return VKV_OK;
}

static vkv_status load_specials(vkv_tokenizer *tok, const vkv_gguf *g)
{
    vkv_status st;
    int32_t fim[TOK_N_FIM] = {VKV_TOKEN_NULL, VKV_TOKEN_NULL, VKV_TOKEN_NULL,
                              VKV_TOKEN_NULL, VKV_TOKEN_NULL, VKV_TOKEN_NULL};
    struct {
        const char *key;
        int32_t *id;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", &tok->bos},
        {"tokenizer.ggml.eos_token_id", &tok->eos},
        {"tokenizer.ggml.eot_token_id", &tok->eot},
        {"tokenizer.ggml.eom_token_id", &tok->eom},
        {"tokenizer.ggml.unknown_token_id", &tok->unk},
        {"tokenizer.ggml.seperator_token_id", &tok->sep},  /* sic: GGUF's spelling */
        {"tokenizer.ggml.padding_token_id", &tok->pad},
        {"tokenizer.ggml.fim_pre_token_id", &fim[0]},
        {"tokenizer.ggml.fim_suf_token_id", &fim[1]},
        {"tokenizer.ggml.fim_mid_token_id", &fim[2]},
        {"tokenizer.ggml.fim_pad_token_id", &fim[3]},
        {"tokenizer.ggml.fim_rep_token_id", &fim[4]},
        {"tokenizer.ggml.fim_sep_token_id", &fim[5]},
    };
    /* defaults that do not exist in this vocabulary mean "none" */
    int32_t *defaults[] = {&tok->bos, &tok->eos, &tok->unk};
    for (size_t i = 0; i < 3; i++)
        if (*defaults[i] >= tok->n_vocab) *defaults[i] = VKV_TOKEN_NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if ((st = read_special(g, keys[i].key, tok->n_vocab, keys[i].id))) return st;
    if ((st = tok_index_specials(tok, fim))) return st;

    /* llama.cpp's per-model attribute fix-up: Phi-3 strips white space after
     * its special tokens */
    char *name = NULL;
    if ((st = get_str_copy(g, "general.name", &name))) return st;
    if (name) {
        for (char *c = name; *c; c++)
            if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
        if (strstr(name, "phi-3") || strstr(name, "phi3")) {
            for (size_t i = 0; i < tok->n_special; i++) tok->attr[tok->special[i]] |= TOK_ATTR_RSTRIP;
            int32_t t = find_text(tok, "</s>");
            if (t != VKV_TOKEN_NULL) tok->attr[t] |= TOK_ATTR_RSTRIP;
            const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (size_t i = 0; i < 3; i++)
                if ((t = find_text(tok, keep[i])) != VKV_TOKEN_NULL) tok->attr[t] &= (uint16_t)~TOK_ATTR_RSTRIP;
        }
        free(name);
    }
    return VKV_OK;
}

static vkv_status build_piece_blob(vkv_tokenizer *tok)
{
    /* a piece is never longer than its text */
    size_t total = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) total += tok->len[i];
    tok->piece_blob = malloc(total ? total : 1);
    tok->piece_off = malloc((size_t)tok->n_vocab * sizeof *tok->piece_off);
    tok->piece_len = malloc((size_t)tok->n_vocab * sizeof *tok->piece_len);
    if (!tok->piece_blob || !tok->piece_off || !tok->piece_len)
        return vkv_error(VKV_ERR_OOM, "out of memory for token pieces");
    uint32_t o = 0;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        const char *t = tok->blob + tok->off[i];
        size_t n = tok->len[i];
        char *out = tok->piece_blob + o;
        size_t k = 0;
        uint16_t a = tok->attr[i];
        if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            memcpy(out, t, n);
            k = n;
        } else if (a & TOK_ATTR_NORMAL) {
            if (tok->type == VKV_VOCAB_SPM) {
                for (size_t j = 0; j < n;) {
                    if (j + 3 <= n && !memcmp(t + j, "\xE2\x96\x81", 3)) {
                        out[k++] = ' ';
                        j += 3;
                    } else {
                        out[k++] = t[j++];
                    }
                }
            } else {
                for (size_t j = 0; j < n;) {
                    size_t j0 = j;
                    int b = tok_cp_to_byte(tok_utf8_decode(t, n, &j));
                    if (b >= 0) {
                        out[k++] = (char)b;
                    } else {  /* not a byte's code point: keep it as it is */
                        memcpy(out + k, t + j0, j - j0);
                        k += j - j0;
                    }
                }
            }
        } else if ((a & TOK_ATTR_BYTE) && tok->type == VKV_VOCAB_SPM && n == 6 && !memcmp(t, "<0x", 3)) {
            out[k++] = (char)strtol((char[3]){t[3], t[4], 0}, NULL, 16);
        }
        tok->piece_off[i] = o;
        tok->piece_len[i] = (uint32_t)k;
        o += (uint32_t)k;
    }
    return VKV_OK;
}

static void build_byte_tokens(vkv_tokenizer *tok)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        int32_t id = VKV_TOKEN_NULL;
        if (tok->type == VKV_VOCAB_SPM) {
            char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
            id = find_text(tok, buf);
            if (id == VKV_TOKEN_NULL) {
                char c = (char)b;
                id = tok_strmap_get(&tok->tokens, &c, 1, VKV_TOKEN_NULL);
            }
        } else {
            char buf[4];
            size_t n = vkv_utf8_encode(tok_byte_to_cp((uint8_t)b), buf);
            id = tok_strmap_get(&tok->tokens, buf, n, VKV_TOKEN_NULL);
        }
        tok->byte_token[b] = id;
    }
}

vkv_status tok_build_pieces(vkv_tokenizer *tok)
{
    build_byte_tokens(tok);
    return build_piece_blob(tok);
}

vkv_tokenizer *tok_new(void)
{
    vkv_tokenizer *tok = calloc(1, sizeof *tok);
    if (tok) tok->bos = tok->eos = tok->eot = tok->eom = tok->unk = tok->sep = tok->pad = VKV_TOKEN_NULL;
    return tok;
}

vkv_status vkv_tokenizer_load(const vkv_gguf *g, vkv_tokenizer **out)
{
    *out = NULL;
    vkv_tokenizer *tok = tok_new();
    if (!tok) return vkv_error(VKV_ERR_OOM, "out of memory loading the tokenizer");

    char *model = NULL;
    vkv_status st = get_str_copy(g, "tokenizer.ggml.model", &model);
    if (st) goto fail;
    if (!model) {
        st = vkv_error(VKV_ERR_FORMAT, "missing tokenizer.ggml.model: the GGUF has no vocabulary");
        goto fail;
    }
    if (!strcmp(model, "llama")) {
        tok->type = VKV_VOCAB_SPM;
    } else if (!strcmp(model, "gpt2")) {
        tok->type = VKV_VOCAB_BPE;
    } else {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "unsupported tokenizer model (tokenizer.ggml.model) '%s': only 'llama' (SentencePiece) and 'gpt2' (byte-level BPE) are implemented", model);
        free(model);
        goto fail;
    }
    free(model);

    if ((st = load_tokens(tok, g))) goto fail;
    if ((st = get_str_copy(g, "tokenizer.ggml.pre", &tok->pre_name))) goto fail;
    if (!tok->pre_name && !(tok->pre_name = strdup("default"))) {
        st = vkv_error(VKV_ERR_OOM, "out of memory loading the tokenizer");
        goto fail;
    }

    if (tok->type == VKV_VOCAB_SPM) {
        tok->bos = 1;
        tok->eos = 2;
        tok->unk = 0;
        tok->add_space_prefix = true;
        tok->add_bos = true;
    } else {
        tok->bos = 11;  /* llama.cpp's defaults for gpt2 vocabularies */
        tok->eos = 11;
        if ((st = load_merges(tok, g))) goto fail;
        tok_pre_info info;
        if ((st = tok_pretok_init(&tok->pretok, tok->pre_name, &info))) goto fail;
        tok->ignore_merges = info.ignore_merges;
        tok->add_bos = info.add_bos;
        if (info.no_bos) tok->bos = VKV_TOKEN_NULL;
    }
    if ((st = vkv_gguf_get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix))) goto fail;
    if ((st = vkv_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &tok->add_bos))) goto fail;
    if ((st = vkv_gguf_get_bool_opt(g, "tokenizer.ggml.add_eos_token", &tok->add_eos))) goto fail;
    if ((st = load_specials(tok, g))) goto fail;
    if ((st = tok_build_pieces(tok))) goto fail;
    if ((st = get_str_copy(g, "tokenizer.chat_template", &tok->chat_template))) goto fail;
    *out = tok;
    return VKV_OK;
fail:
    vkv_tokenizer_free(tok);
    return vkv_error_context(st, "loading the tokenizer: ");
}

void vkv_tokenizer_free(vkv_tokenizer *tok)
{
    if (!tok) return;
    free(tok->pre_name);
    free(tok->blob);
    free(tok->off);
    free(tok->len);
    free(tok->score);
    free(tok->attr);
    tok_strmap_free(&tok->tokens);
    free(tok->merge_blob);
    tok_strmap_free(&tok->merges);
    tok_pretok_free(&tok->pretok);
    free(tok->eog);
    free(tok->special);
    free(tok->piece_blob);
    free(tok->piece_off);
    free(tok->piece_len);
    free(tok->chat_template);
    free(tok);
}

/* ------------------------------------------------------------------ */
/* accessors                                                           */
/* ------------------------------------------------------------------ */

vkv_vocab_type vkv_tokenizer_type(const vkv_tokenizer *tok) { return tok->type; }
const char *vkv_tokenizer_pre(const vkv_tokenizer *tok) { return tok->pre_name; }
int32_t vkv_tokenizer_n_vocab(const vkv_tokenizer *tok) { return tok->n_vocab; }
int32_t vkv_tokenizer_bos(const vkv_tokenizer *tok) { return tok->bos; }
int32_t vkv_tokenizer_eos(const vkv_tokenizer *tok) { return tok->eos; }
int32_t vkv_tokenizer_eot(const vkv_tokenizer *tok) { return tok->eot; }
int32_t vkv_tokenizer_pad(const vkv_tokenizer *tok) { return tok->pad; }
bool vkv_tokenizer_adds_bos(const vkv_tokenizer *tok) { return tok->add_bos && tok->bos != VKV_TOKEN_NULL; }
const char *vkv_tokenizer_chat_template_source(const vkv_tokenizer *tok) { return tok->chat_template; }

bool vkv_tokenizer_is_eog(const vkv_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab && tok->eog[id];
}

const char *vkv_token_to_piece(const vkv_tokenizer *tok, int32_t id, bool special, size_t *len)
{
    if (id < 0 || id >= tok->n_vocab || (!special && (tok->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL)))) {
        *len = 0;
        return "";
    }
    *len = tok->piece_len[id];
    return tok->piece_blob + tok->piece_off[id];
}

/* ------------------------------------------------------------------ */
/* tokenize                                                            */
/* ------------------------------------------------------------------ */

typedef struct frag {
    int32_t id;  /* VKV_TOKEN_NULL: raw text */
    size_t off, len;
} frag;

typedef struct frag_list {
    frag *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, int32_t id, size_t off, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (frag){id, off, len};
    return true;
}

/* llama.cpp's tokenizer_st_partition: for each special token, longest first,
 * every raw fragment is cut at its occurrences (left to right, not
 * overlapping). Control and unknown tokens take part only with
 * parse_special; user-defined ones always. */
static vkv_status partition(const vkv_tokenizer *tok, const char *text, size_t len, bool parse_special,
                            frag_list *out)
{
    frag_list a = {0}, b = {0};
    if (len && !frag_push(&a, VKV_TOKEN_NULL, 0, len)) goto oom;

    /* byte pairs present in the text: a cheap filter before memmem */
    uint8_t *pairs = NULL, first[32] = {0};
    if (len && tok->n_special) {
        pairs = calloc(65536 / 8, 1);
        if (!pairs) goto oom;
        for (size_t i = 0; i < len; i++) {
            unsigned c = (unsigned char)text[i];
            first[c >> 3] |= (uint8_t)(1u << (c & 7));
            if (i + 1 < len) {
                unsigned p = c << 8 | (unsigned char)text[i + 1];
                pairs[p >> 3] |= (uint8_t)(1u << (p & 7));
            }
        }
    }

    for (size_t s = 0; s < tok->n_special && len; s++) {
        int32_t id = tok->special[s];
        uint16_t attr = tok->attr[id];
        if (!parse_special && (attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        const char *t = tok->blob + tok->off[id];
        size_t tl = tok->len[id];
        unsigned c0 = (unsigned char)t[0];
        if (tl > len || !(first[c0 >> 3] & (1u << (c0 & 7)))) continue;
        if (tl >= 2) {
            unsigned p = c0 << 8 | (unsigned char)t[1];
            if (!(pairs[p >> 3] & (1u << (p & 7)))) continue;
        }
        if (!memmem(text, len, t, tl)) continue;

        b.n = 0;
        for (size_t f = 0; f < a.n; f++) {
            frag fr = a.v[f];
            if (fr.id != VKV_TOKEN_NULL) {
                if (!frag_push(&b, fr.id, 0, 0)) goto oom_pairs;
                continue;
            }
            size_t off = fr.off, end = fr.off + fr.len;
            while (off < end) {
                const char *m = memmem(text + off, end - off, t, tl);
                if (!m) break;
                size_t mo = (size_t)(m - text);
                if (mo > off) {
                    size_t ll = mo - off;
                    if (attr & TOK_ATTR_LSTRIP)
                        while (ll > 0 && ascii_space(text[off + ll - 1])) ll--;
                    if (ll > 0 && !frag_push(&b, VKV_TOKEN_NULL, off, ll)) goto oom_pairs;
                }
                if (!frag_push(&b, id, 0, 0)) goto oom_pairs;
                off = mo + tl;
                if (attr & TOK_ATTR_RSTRIP)
                    while (off < end && ascii_space(text[off])) off++;
            }
            if (off < end && !frag_push(&b, VKV_TOKEN_NULL, off, end - off)) goto oom_pairs;
        }
        frag_list t2 = a;
        a = b;
        b = t2;
    }
    free(pairs);
    free(b.v);
    *out = a;
    return VKV_OK;
oom_pairs:
    free(pairs);
oom:
    free(a.v);
    free(b.v);
    return vkv_error(VKV_ERR_OOM, "out of memory tokenizing %zu bytes", len);
}

/* A byte-level BPE fragment, after what a tokenizer.json asks of each text
 * between special tokens: NFC, then ByteLevel's prefix space. */
static vkv_status bpe_fragment(const vkv_tokenizer *tok, const char *text, size_t len, tok_words *w,
                               vkv_strbuf *norm, tok_ids *out)
{
    if (tok->normalize_nfc || tok->bpe_prefix_space) {
        norm->n = 0;
        if (tok->bpe_prefix_space && (len == 0 || text[0] != ' ')) vkv_strbuf_put(norm, " ", 1);
        vkv_status st = VKV_OK;
        if (tok->normalize_nfc) st = tok_nfc_append(norm, text, len);
        else vkv_strbuf_put(norm, text, len);
        if (st) return st;
        if (norm->oom) return vkv_error(VKV_ERR_OOM, "out of memory tokenizing %zu bytes", len);
        text = norm->p;
        len = norm->n;
    }
    return tok_bpe_tokenize(tok, text, len, w, out);
}

vkv_status vkv_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return vkv_error(VKV_ERR_ARG, "vkv_tokenize: NULL text");
    frag_list frags = {0};
    vkv_status st = partition(tok, text, len, parse_special, &frags);
    if (st) return st;

    tok_ids out = {0};
    tok_words words = {0};
    vkv_strbuf norm = {0};
    if (add_special && tok->add_bos && tok->bos != VKV_TOKEN_NULL && (st = tok_ids_push(&out, tok->bos))) goto done;
    bool prev_special = true;  /* SPM: the first text gets the space prefix */
    for (size_t f = 0; f < frags.n; f++) {
        const frag *fr = &frags.v[f];
        if (fr->id != VKV_TOKEN_NULL) {
            if ((st = tok_ids_push(&out, fr->id))) goto done;
            prev_special = true;
            continue;
        }
        if (tok->type == VKV_VOCAB_SPM)
            st = tok_spm_tokenize(tok, text + fr->off, fr->len, tok->add_space_prefix && prev_special, &out);
        else
            st = bpe_fragment(tok, text + fr->off, fr->len, &words, &norm, &out);
        if (st) goto done;
        prev_special = false;
    }
    if (add_special && tok->add_eos && tok->eos != VKV_TOKEN_NULL && (st = tok_ids_push(&out, tok->eos))) goto done;
done:
    free(frags.v);
    free(norm.p);
    tok_words_free(&words);
    if (st) {
        free(out.v);
        return st;
    }
    *ids = out.v;
    *n_ids = out.n;
    return VKV_OK;
}
