/* Tokenizers loaded from GGUF metadata, reproducing llama.cpp's tokenization.
 *
 * Two vocabulary kinds:
 * - SentencePiece-style BPE (`tokenizer.ggml.model` = "llama"): merges guided
 *   by token scores, spaces escaped to U+2581, byte fallback to <0xXX> tokens,
 *   optional space prefix (`tokenizer.ggml.add_space_prefix`, default true).
 * - byte-level BPE (`gpt2`): text split into words by the pre-tokenizer
 *   regexes that `tokenizer.ggml.pre` selects (PCRE2, Unicode properties),
 *   bytes mapped to GPT-2's printable code points, then ranked merges from
 *   `tokenizer.ggml.merges`.
 * Text equal to a special token's text is split out first (control and
 * unknown tokens only with parse_special; user-defined tokens always), as
 * llama.cpp does.
 *
 * A loaded tokenizer is immutable: every function taking a const pointer is
 * safe to call from several threads at once. */
#ifndef VKV_TOKENIZER_H
#define VKV_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "model/gguf.h"

#define VKV_TOKEN_NULL (-1)

typedef enum vkv_vocab_type {
    VKV_VOCAB_SPM = 1,  /* "llama" */
    VKV_VOCAB_BPE = 2,  /* "gpt2" */
} vkv_vocab_type;

/* Values of `tokenizer.ggml.token_type`. */
typedef enum vkv_token_type {
    VKV_TOKEN_UNDEFINED = 0,
    VKV_TOKEN_NORMAL = 1,
    VKV_TOKEN_UNKNOWN = 2,
    VKV_TOKEN_CONTROL = 3,
    VKV_TOKEN_USER_DEFINED = 4,
    VKV_TOKEN_UNUSED = 5,
    VKV_TOKEN_BYTE = 6,
} vkv_token_type;

typedef struct vkv_tokenizer vkv_tokenizer;

/* Reads the vocabulary from the GGUF's metadata; everything is copied, so the
 * GGUF may be closed afterwards. VKV_ERR_FORMAT for missing or inconsistent
 * keys, VKV_ERR_UNSUPPORTED for an unknown model or pre-tokenizer name. A
 * special-token id (bos, eos, eot, pad, ...) outside the vocabulary is only a
 * warning on stderr: the token keeps its default id, or is absent. */
vkv_status vkv_tokenizer_load(const vkv_gguf *g, vkv_tokenizer **out);
/* Reads a Hugging Face tokenizer from the folder dir: tokenizer.json (a
 * byte-level BPE model, its added tokens, an NFC normalizer or none, Split
 * and ByteLevel pre-tokenizers, the ByteLevel decoder, a TemplateProcessing
 * post-processor), tokenizer_config.json when present (bos_token, eos_token,
 * add_bos_token, add_eos_token, pad_token, chat_template) and
 * generation_config.json when present (eos_token_id: every id listed ends
 * generation). Special added tokens are control tokens, the others
 * user-defined. VKV_ERR_FORMAT for malformed files, VKV_ERR_UNSUPPORTED for
 * a model type or component not supported (refused); messages name the file. */
vkv_status vkv_tokenizer_load_hf(const char *dir, vkv_tokenizer **out);
void vkv_tokenizer_free(vkv_tokenizer *tok);

vkv_vocab_type vkv_tokenizer_type(const vkv_tokenizer *tok);
/* The `tokenizer.ggml.pre` name in effect ("default" when absent). */
const char *vkv_tokenizer_pre(const vkv_tokenizer *tok);
int32_t vkv_tokenizer_n_vocab(const vkv_tokenizer *tok);

/* Special ids; VKV_TOKEN_NULL when the vocabulary has none. */
int32_t vkv_tokenizer_bos(const vkv_tokenizer *tok);
int32_t vkv_tokenizer_eos(const vkv_tokenizer *tok);
int32_t vkv_tokenizer_eot(const vkv_tokenizer *tok);
int32_t vkv_tokenizer_pad(const vkv_tokenizer *tok);
/* Whether tokenizing with add_special prepends BOS. */
bool vkv_tokenizer_adds_bos(const vkv_tokenizer *tok);
/* End of generation: EOS, EOT, EOM and the end-of-turn tokens llama.cpp
 * recognises by their text (<|eot_id|>, <|im_end|>, <|end|>, ...). */
bool vkv_tokenizer_is_eog(const vkv_tokenizer *tok, int32_t id);

/* The raw `tokenizer.chat_template` string, or NULL. */
const char *vkv_tokenizer_chat_template_source(const vkv_tokenizer *tok);

/* Text -> ids into a malloc'ed array (*ids; free() it; NULL when *n_ids is 0).
 * add_special: add BOS/EOS as the vocabulary's add_bos/add_eos rules say
 *   (llama.cpp's add_special).
 * parse_special: text equal to a control token's text becomes that token;
 *   otherwise it is tokenized as plain text. */
vkv_status vkv_tokenize(const vkv_tokenizer *tok, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, size_t *n_ids);

/* The bytes one token stands for: SPM U+2581 -> ' ' and <0xXX> -> the byte;
 * BPE the inverse GPT-2 byte mapping. Control and unknown tokens give ""
 * unless special is true (then their text); user-defined tokens give their
 * text. Points into the tokenizer (valid until it is freed); not
 * NUL-terminated in general; "" for an id out of range. */
const char *vkv_token_to_piece(const vkv_tokenizer *tok, int32_t id, bool special, size_t *len);

/* All pieces concatenated into a malloc'ed, NUL-terminated string. */
vkv_status vkv_detokenize(const vkv_tokenizer *tok, const int32_t *ids, size_t n_ids, bool special,
                          char **text, size_t *len);

/* Streaming detokenizer for generation: tokens go in one at a time, and only
 * complete UTF-8 characters come out; the bytes of a character split across
 * tokens (byte-fallback or byte-level pieces) are held until it is complete.
 * Byte sequences that can never become valid UTF-8 are passed through as they
 * are, as soon as that is certain. */
typedef struct vkv_detok {
    const vkv_tokenizer *tok;
    bool special;
    char *buf;    /* output of the last push, then the held bytes */
    size_t cap;
    size_t held;  /* bytes of an incomplete character kept for later (<= 3) */
    char hold[4];
} vkv_detok;

void vkv_detok_init(vkv_detok *d, const vkv_tokenizer *tok, bool special);
/* Appends the token's piece; *text, *len: the bytes ready to print now, valid
 * until the next call. */
vkv_status vkv_detok_push(vkv_detok *d, int32_t id, const char **text, size_t *len);
/* Same for raw bytes (what push does with the token's piece). */
vkv_status vkv_detok_push_bytes(vkv_detok *d, const char *bytes, size_t n, const char **text,
                                size_t *len);
/* Ends the stream: returns whatever is still held (an incomplete character). */
void vkv_detok_flush(vkv_detok *d, const char **text, size_t *len);
void vkv_detok_free(vkv_detok *d);

/* Chat templates, recognised from `tokenizer.chat_template` by their markers
 * (or given by name) and rendered as Hugging Face renders the model's own
 * template (tests/e2e/chat_templates.sh compares them for Qwen3 and Llama 3). */
typedef enum vkv_chat_template {
    VKV_CHAT_UNKNOWN = 0,
    VKV_CHAT_LLAMA3 = 1,  /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
    VKV_CHAT_CHATML = 2,  /* <|im_start|>role\ncontent<|im_end|>\n (Qwen) */
    /* Llama 3 as Hugging Face's Llama-3.1 template renders it: a system
     * header "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"
     * (its default date) before the first message, always. */
    VKV_CHAT_LLAMA31 = 3,
    /* ChatML as Qwen2.5's template renders it: its default system message
     * ("You are Qwen, created by Alibaba Cloud. ...") when the conversation
     * does not start with one; roles other than system, user, assistant and
     * tool are left out. */
    VKV_CHAT_QWEN25 = 4,
    /* Qwen3's template with thinking off (enable_thinking=False, as kvpress
     * renders it): the generation prompt ends in an empty think block. The
     * reasoning of assistant turns before the last user query is dropped. */
    VKV_CHAT_QWEN3 = 5,
    /* Qwen3's template with thinking on (Hugging Face's default): no think
     * block after the generation prompt's assistant header. */
    VKV_CHAT_QWEN3_THINKING = 6,
} vkv_chat_template;

typedef struct vkv_chat_msg {
    const char *role;     /* "system", "user", "assistant", ... */
    const char *content;
} vkv_chat_msg;

/* A template from its Jinja source or its name ("llama3", "llama31", "chatml",
 * "qwen25", "qwen3", "qwen3-thinking"); VKV_CHAT_UNKNOWN when neither
 * matches. Qwen3's source (it reads enable_thinking) gives VKV_CHAT_QWEN3:
 * vkv_chat_template_thinking chooses the thinking side. */
vkv_chat_template vkv_chat_template_detect(const char *source);
/* t with thinking on or off, for a template that has the switch (Qwen3);
 * any other template comes back unchanged. */
vkv_chat_template vkv_chat_template_thinking(vkv_chat_template t, bool thinking);
/* The model's template: VKV_ERR_UNSUPPORTED (naming the problem) when the
 * GGUF has no template or one that is not recognised. */
vkv_status vkv_tokenizer_chat_template(const vkv_tokenizer *tok, vkv_chat_template *out);
const char *vkv_chat_template_name(vkv_chat_template t);
/* Renders the conversation into a malloc'ed, NUL-terminated string. The BOS
 * token is not included: tokenize the result with add_special and
 * parse_special. add_generation_prompt appends the assistant header. */
vkv_status vkv_chat_apply(vkv_chat_template t, const vkv_chat_msg *msgs, size_t n_msgs,
                          bool add_generation_prompt, char **text, size_t *len);

/* A prompt split into a context and a question: `split` is the byte offset in
 * the text where the question starts. It moves with the chat template, and
 * vkv_tokenize_split turns it into a token index (the tokens before it are
 * the context a press compresses). */
/* The text as the single user message of chat template t, with the
 * generation prompt (assistant header) after it; *out_split is where the
 * byte at `split` of text ended up. */
vkv_status vkv_chat_wrap(vkv_chat_template t, const char *text, size_t len, size_t split, char **out,
                         size_t *out_len, size_t *out_split);
/* Tokens the chat template adds around a user message (rendered empty,
 * without BOS). */
vkv_status vkv_chat_overhead(const vkv_tokenizer *tok, vkv_chat_template t, size_t *n);

/* Tokenizes text as a whole (BOS per the vocabulary's rules; special-token
 * text parsed when parse_special) and returns the index of the first token
 * that ends after byte `split` (ids [0, *n_split) are the context; a token
 * straddling the split goes with the question). When the token pieces do not
 * spell the text (some SentencePiece vocabularies), the two parts are
 * tokenized separately instead. *ids is malloc'ed. */
vkv_status vkv_tokenize_split(const vkv_tokenizer *tok, const char *text, size_t len, size_t split,
                              bool parse_special, int32_t **ids, size_t *n_ids, size_t *n_split);

/* Byte offsets in text where each token of ids ends, when the tokens' pieces
 * spell the text (a SentencePiece space prefix allowed before any piece);
 * false otherwise. skip_bos: ids[0] is an added BOS (ends[0] = 0). */
bool vkv_token_ends(const vkv_tokenizer *tok, const char *text, size_t len, const int32_t *ids, size_t n,
                    bool skip_bos, bool special, size_t *ends);

#endif
