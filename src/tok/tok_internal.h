/* State and helpers shared by the tokenizer's translation units (not API). */
#ifndef VKV_TOK_INTERNAL_H
#define VKV_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "core/utf8.h"
#include "tok/tokenizer.h"

/* Token attributes, llama.cpp's llama_token_attr: the GGUF token type as a
 * bit, plus the strip flags a few vocabularies set on special tokens. */
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
};

/* Growable id list. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

vkv_status tok_ids_push(tok_ids *ids, int32_t id);

/* Open-addressing hash map from a byte string to an int32 (ids or ranks). The
 * strings are owned by the caller and must outlive the map. */
typedef struct tok_strmap {
    struct tok_strmap_slot {
        const char *key;   /* NULL: empty */
        uint32_t len;
        uint32_t split;    /* pair keys: key[0..split) + key[split+1..len) */
        int32_t val;
    } *slots;
    uint32_t mask;
    uint32_t n;
} tok_strmap;

vkv_status tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
/* overwrite: replace the value of an existing key (llama.cpp's token map keeps
 * the last duplicate, its merge ranks the first). */
void tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val, bool overwrite);
/* A pair key is the string `a SEP b` stored once; looked up from a and b. */
void tok_strmap_put_pair(tok_strmap *m, const char *key, uint32_t len, uint32_t split, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len, int32_t missing);
int32_t tok_strmap_get_pair(const tok_strmap *m, const char *a, size_t alen, const char *b,
                            size_t blen, int32_t missing);

/* Pre-tokenizer: the regexes llama.cpp applies in sequence for one
 * `tokenizer.ggml.pre` value. */
#define TOK_MAX_REGEX 6

typedef struct tok_pretok {
    void *re[TOK_MAX_REGEX];  /* pcre2_code_8 * */
    int n_re;
} tok_pretok;

/* Per-pre-type settings llama.cpp derives from the name. */
typedef struct tok_pre_info {
    bool ignore_merges;  /* a word that is a whole token skips the merges */
    bool add_bos;        /* default for tokenizer.ggml.add_bos_token */
    bool no_bos;         /* the vocabulary has no BOS (chatglm) */
} tok_pre_info;

/* VKV_ERR_UNSUPPORTED naming the value when it is not known. */
vkv_status tok_pretok_init(tok_pretok *p, const char *pre, tok_pre_info *info);
/* The name of the known pre-tokenizer whose regex list is exactly re[0, n),
 * or NULL. */
const char *tok_pretok_known(const char *const *re, int n);
/* Regexes given as they are written (a tokenizer.json's Split patterns),
 * compiled with the same rewriting of \s and \p{S}; `what` names them in
 * messages. */
vkv_status tok_pretok_init_regexes(tok_pretok *p, const char *const *re, int n, const char *what);
void tok_pretok_free(tok_pretok *p);

/* Words of a text fragment. The fragment is first decoded the way llama.cpp
 * does (an invalid byte becomes U+FFFD) and re-encoded into `text`; words are
 * byte ranges of `text`, ends[i] the end of word i (word i starts at
 * ends[i-1], or 0). */
typedef struct tok_words {
    char *text;
    size_t len, cap;
    size_t *ends;
    size_t n, ends_cap;
    /* scratch, reused between calls */
    char *subj;
    size_t subj_cap;
    size_t *cp_text, *cp_subj;  /* byte offset of code point i (+1 entry) */
    size_t cp_text_cap, cp_subj_cap;
    size_t *seg, *seg2;
    size_t seg_cap, seg2_cap;
} tok_words;

vkv_status tok_pretok_split(const tok_pretok *p, const char *frag, size_t len, tok_words *w);
void tok_words_free(tok_words *w);

/* UTF-8 helpers (encoding is core/utf8.h's vkv_utf8_encode). */
static inline size_t tok_utf8_len(unsigned char lead)
{
    static const unsigned char lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[lead >> 4];
}
/* llama.cpp's lenient decoder: accepts overlong forms and surrogates; an
 * invalid byte gives U+FFFD and advances by one. */
uint32_t tok_utf8_decode(const char *s, size_t len, size_t *pos);

struct vkv_tokenizer {
    vkv_vocab_type type;
    int32_t n_vocab;
    char *pre_name;

    char *blob;          /* token texts, each NUL-terminated */
    uint32_t *off;       /* [n_vocab] into blob */
    uint32_t *len;       /* [n_vocab] */
    float *score;        /* [n_vocab] */
    uint16_t *attr;      /* [n_vocab] TOK_ATTR_* */
    tok_strmap tokens;   /* text -> id */

    /* byte-level BPE */
    char *merge_blob;
    tok_strmap merges;   /* (left, right) -> rank */
    tok_pretok pretok;
    bool ignore_merges;

    int32_t byte_token[256];  /* byte -> token, or VKV_TOKEN_NULL */

    int32_t bos, eos, eot, eom, unk, sep, pad;
    bool add_bos, add_eos, add_space_prefix;
    uint8_t *eog;        /* [n_vocab] */

    int32_t *special;    /* partition order: longest text first */
    size_t n_special;

    char *piece_blob;    /* token_to_piece(id, special = true) */
    uint32_t *piece_off, *piece_len;

    char *chat_template;

    /* set by tokenizer.json only (src/tok/hf_tokenizer.c): each text fragment
     * between special tokens is NFC-normalised, and gets a space in front
     * when it does not start with one (ByteLevel's add_prefix_space) */
    bool normalize_nfc;
    bool bpe_prefix_space;
};

/* The steps of loading both sources share. tok_new: a tokenizer with no
 * special ids. tok_alloc_vocab: the per-token arrays for tok->n_vocab tokens
 * and a text blob of text_bytes. tok_index_specials: end-of-generation and
 * FIM tokens found by their text (fim: pre, suf, mid, pad, rep, sep ids known
 * so far), then the special-token partition order. tok_build_pieces: byte
 * tokens and the decoded piece of every token. */
#define TOK_N_FIM 6
vkv_tokenizer *tok_new(void);
vkv_status tok_alloc_vocab(vkv_tokenizer *tok, size_t text_bytes);
vkv_status tok_index_specials(vkv_tokenizer *tok, int32_t fim[TOK_N_FIM]);
vkv_status tok_build_pieces(vkv_tokenizer *tok);

/* NFC of text[0, len) appended to out (src/tok/nfc.c). */
vkv_status tok_nfc_append(vkv_strbuf *out, const char *text, size_t len);

/* Whole-fragment tokenizers; append to out. SPM escapes spaces itself and
 * puts one in front when space_prefix is set. */
vkv_status tok_spm_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, bool space_prefix,
                            tok_ids *out);
vkv_status tok_bpe_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, tok_words *w,
                            tok_ids *out);

/* GPT-2's byte <-> code point mapping. */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);  /* -1 when cp is not one of the 256 */

#endif
