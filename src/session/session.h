/* A session: the device, the model, its tokenizer and the calibration, opened
 * once, and the sequences that run on them (docs/ARCHITECTURE.md §1). Every
 * command runs one, the session's default sequence (vkv_session.seq, the
 * vkv_session_* calls below); vkvector serve runs many side by side
 * (vkv_session_seq_*), each with its own context and compression state:
 *
 *   split the prompt into context and question (vkv_session_tokenize),
 *   prefill the part that is compressed, compress it, evaluate the rest
 *   (vkv_session_prefill), then decode (vkv_session_step, vkv_session_generate)
 *   or score the logits.
 *
 * The CLI's subcommands are option handling plus a few of these calls. */
#ifndef VKV_SESSION_H
#define VKV_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calib/calib.h"
#include "infer/forward.h"
#include "press/decode.h"
#include "press/vector.h"
#include "tok/tokenizer.h"

typedef struct vkv_session_params {
    const char *model_path;
    int device;               /* -1: VKVECTOR_DEVICE's choice or the best device */
    bool no_tokenizer;        /* skip the vocabulary (token ids in and out only) */
    bool load_calib;          /* load VECTOR's calibration at open */
    const char *calib_path;   /* NULL: the model's path with .vkcal for .gguf */
    /* The chat template of chat prompts: NULL or "none" (no template), "auto"
     * (the model's own, none with a warning when vkvector does not know it),
     * or a name vkv_chat_template_detect knows ("llama3", "llama31", "chatml",
     * "qwen25", "qwen3"). */
    const char *chat;
    bool thinking;            /* Qwen3's template with thinking on (--think on) */
    const char *cmd;          /* the subcommand, for warnings */
} vkv_session_params;

typedef struct vkv_session_kvzip vkv_session_kvzip;
typedef struct vkv_session vkv_session;
typedef struct vkv_seq_prefill_run vkv_seq_prefill_run;

/* One sequence: its inference context (KV cache and activations) and the
 * state its prefill and decoding keep. Read-only for callers. */
typedef struct vkv_session_seq {
    vkv_session *s;           /* the session it runs on */
    vkv_ctx *ctx;             /* NULL until reserved */
    vkv_decode_press *decode; /* compression during generation of its last prefill (vkv_compression.compress_every) */
    vkv_seq_prefill_run *run; /* the prefill in progress (vkv_session_seq_prefill_begin .. _end) */
    /* [n_ctx] the tokens of the prefill chunk that evaluated each cache row
     * since the last prefill began (0: not evaluated by a prefill chunk): the
     * matrix product it took (vkv_ctx_chunks_share_path), which a reuse of
     * the row must match (vkv_session_seq_reusable); NULL before a prefill */
    uint32_t *row_chunk;
} vkv_session_seq;

/* Read-only for callers; vkv_session_close frees everything. */
struct vkv_session {
    vkv_instance *inst;
    vkv_gpu *gpu;
    vkv_model *model;
    vkv_tokenizer *tok;       /* NULL with no_tokenizer */
    vkv_calib *calib;         /* NULL unless load_calib */
    vkv_session_seq *seq;     /* the default sequence the vkv_session_* calls run; seq->ctx NULL until
                               * vkv_session_reserve */
    vkv_chat_template chat;   /* VKV_CHAT_UNKNOWN: prompts go without a template */
    char model_name[256];     /* the model file's name without .gguf */
    double load_seconds;      /* reading and uploading the weights */
    vkv_session_kvzip *kvzip; /* KVzip's reconstruction prompts, made when first needed */
};

vkv_status vkv_session_open(const vkv_session_params *p, vkv_session **out);
void vkv_session_close(vkv_session *s);
/* Loads the vocabulary of a session opened with no_tokenizer (a command that
 * checks other things first); a no-op when it is loaded. */
vkv_status vkv_session_load_tokenizer(vkv_session *s);

/* Creates the default sequence's inference context (replacing any earlier
 * one, and the compressor of compression during generation made on it)
 * after checking that the weights, its KV cache and its scratch fit the
 * device's heap: a context that does not fit is refused before anything is
 * allocated, with the number of tokens that would. */
vkv_status vkv_session_reserve(vkv_session *s, const vkv_ctx_params *cp);

/* Another sequence on the session, with a context of its own (cp); the
 * caller accounts its memory (vkv_ctx_plan_memory). Free it before closing
 * the session. */
vkv_status vkv_session_seq_create(vkv_session *s, const vkv_ctx_params *cp, vkv_session_seq **out);
void vkv_session_seq_free(vkv_session_seq *q);

/* The compression one prefill applies. */
typedef struct vkv_compression {
    const vkv_press_ops *press; /* NULL: the full cache */
    double compression_ratio;   /* p_c (docs/ARCHITECTURE.md §2) */
    bool vector;                /* VECTOR's approximated tier (needs the calibration) */
    double p_a;                 /* approximation ratio; < 0: the default */
    vkv_pool_scope pool;        /* VECTOR's pool scope; VKV_POOL_DEFAULT: the scorer's own */
    vkv_vector_map map;         /* per-head or joint maps (and per-head or per-layer selection) */
    bool query_aware;           /* compress the question with the context */
    bool materialized;          /* attention rebuilds every approximated value (reference path) */
    bool keep_details;          /* per-token scores, residuals and tiers in the report (tier dump) */
    bool lean;                  /* counts only: no per-head quality figures, no host copies (benchmarks) */
    bool plain_prompt;          /* KVzip: the prompt is not in the chat template */
    /* Compression during generation (press/decode.h): every compress_every
     * tokens at most, the cache held under max_kv_tokens full KV pairs per
     * head; 0: off. The prompt past a prefill compression is evaluated under
     * the budget too. With decoding = VKV_DECODING_KVPRESS, kvpress's rule
     * instead: compress_every is its interval, target_kv_tokens its target,
     * max_kv_tokens unused; every token after the context is a decoding step. */
    uint32_t compress_every, max_kv_tokens;
    vkv_decoding_rule decoding;
    uint32_t target_kv_tokens;
    bool press_seed_set;        /* press_seed was given; else the default (42, vkv_press_params) */
    uint32_t press_seed;        /* RandomPress's seed (0 is a seed, as torch.manual_seed(0)) */
    uint32_t sample;            /* RandomPress: the evaluation sample's index (0: none) */
} vkv_compression;

/* The rules every compression's settings keep, whoever gathered them (a
 * server request, ...): compression during generation needs a press, the
 * budget rule's compress_every and max_kv_tokens go together (M > N), p_c,
 * p_a and VECTOR as vkv_kv_check_ratios takes them, VECTOR needs the
 * session's calibration. NULL when c holds, else the message (in msg). */
const char *vkv_compression_check(const vkv_session *s, const vkv_compression *c, char *msg, size_t size);

/* Compression during generation under the budget rule gathers at most
 * 2 max_kv_tokens tokens of a (layer, KV head); a compression after the
 * prefill first leaves each of them the tokens it keeps of the n_first it
 * compresses (vkv_compression_head_tokens). NULL when they fit, else msg:
 * the problem with the values that work, naming the settings as the caller
 * calls them (m_name: max_kv_tokens, pc_name: compression_ratio). */
const char *vkv_compression_check_first(const vkv_session *s, const vkv_compression *c, size_t n_first,
                                        const char *m_name, const char *pc_name, char *msg, size_t size);
/* The most tokens the compression c of n_first context tokens leaves any
 * (layer, KV head): the scorer's count (per layer for PyramidKV), with VECTOR
 * its pool's extension, at most all of a pool's budget in one head. 0 for a
 * global selection (KVzip: any head may keep any share) or no compression. */
uint32_t vkv_compression_head_tokens(const vkv_session *s, const vkv_compression *c, uint32_t n_first);

/* Slots per KV head of the plain cache under c: a budgeted cache (the budget
 * rule of compression during generation) allocates max_kv_tokens; a
 * compression after the prefill needs the whole compressed part (n_first)
 * and its extra (room, vkv_session_press_room) in them first. 0 (n_ctx's)
 * otherwise. */
uint32_t vkv_compression_kv_slots(const vkv_compression *c, size_t n_first, uint32_t room);

/* Token ids of a prompt and where its context ends. */
typedef struct vkv_prompt {
    int32_t *ids;              /* [n] malloc'ed */
    size_t n;
    size_t n_context;          /* ids [0, n_context) are the context: what query-agnostic compression sees */
    /* ids [0, n_query_end) are what query-aware compression sees: the context
     * and the question up to the user turn's end, so the chat template's
     * closing and the first answer token's logits are evaluated over the
     * compressed cache (docs/ARCHITECTURE.md §5); 0: the whole prompt */
    size_t n_query_end;
} vkv_prompt;
void vkv_prompt_free(vkv_prompt *p);
/* How many of the prompt's first tokens a prefill compresses: n_context, or
 * n_query_end when query-aware (each read as the whole prompt when 0 or past it). */
size_t vkv_prompt_compressed_part(const vkv_prompt *p, bool query_aware);

/* How the question is tokenized after the context. */
typedef enum vkv_split_mode {
    /* Context and "\n\n" + question tokenized apart (BOS before the context):
     * the split is a token boundary by construction (run, kvpress). */
    VKV_SPLIT_APART,
    /* The whole text tokenized at once; the question starts at the first
     * token that ends after the split byte (LongBench's prompts, tokenized
     * as the reference tokenizes them). */
    VKV_SPLIT_WHOLE,
} vkv_split_mode;

/* The one prompt-split function: text[0, split) is the context, text[split,
 * len) the question (split == len: no question). chat: as the single user
 * message of the session's chat template, generation prompt after it (the
 * split moves with the text). Sets n_query_end: before the template's closing
 * of the user turn when there is a question, else n (a plain prompt has no
 * closing). */
vkv_status vkv_session_tokenize(const vkv_session *s, const char *text, size_t len, size_t split, bool chat,
                                vkv_split_mode mode, vkv_prompt *out);

/* A chat as a prompt: the messages rendered with template t (the session's
 * own or another), the generation prompt after them, tokenized as
 * vkv_session_tokenize tokenizes a chat prompt without a question (BOS,
 * special tokens). The context is everything before the last user turn when
 * other messages come before it, else the whole prompt (docs/SERVE.md, "The
 * compressed-context cache"); n_query_end before the closing of the last
 * user turn when the prompt ends with it. */
vkv_status vkv_session_tokenize_chat(const vkv_session *s, vkv_chat_template t, const vkv_chat_msg *msgs,
                                     size_t n_msgs, vkv_prompt *out);

/* Cache slots compression uses past the n_first tokens it compresses (KVzip's
 * reconstruction passes; 0 for the other scorers and without a press). */
vkv_status vkv_session_press_room(vkv_session *s, const vkv_compression *c, uint32_t n_first, uint32_t *room);

typedef enum vkv_logits_want {
    VKV_LOGITS_NONE,
    VKV_LOGITS_LAST,           /* [n_vocab]: the last prompt token's */
    VKV_LOGITS_ALL,            /* [n, n_vocab]: every prompt position */
    VKV_LOGITS_REST,           /* [n - n_first, n_vocab]: the positions evaluated after compression */
    /* [n_batch, n_vocab]: every position of the chunk the last step
     * evaluated, overwritten by the next (the stepped prefill only:
     * vkv_session_seq_prefill_last_chunk says which positions), so a long
     * prompt's logits are read a chunk at a time */
    VKV_LOGITS_CHUNK,
} vkv_logits_want;

/* What a prefill did. */
typedef struct vkv_prefill {
    uint32_t n_first;          /* tokens prefilled before compression (the context, or all when query-aware) */
    bool compressed;
    bool reused;               /* the compressed context is another sequence's (begin_compressed): no report */
    double prefill_s;          /* both prefill chunks, pipeline building excluded (a forward shared with other
                                * sequences' chunks counts whole for each) */
    double compress_s;         /* scoring, allocation and compaction, pipeline building excluded */
    vkv_vector_report report;  /* compressed only */
    vkv_kv_memory memory;      /* the cache after the prefill */
} vkv_prefill;
void vkv_prefill_free(vkv_prefill *p);

/* Resets the default sequence's context and evaluates the prompt: the
 * context (the whole prompt when query-aware) as one part, compression when c
 * has a press, then the rest as a second part. Without a press the same two
 * parts are evaluated, so p_c = 0 gives the uncompressed logits bit for bit.
 * vkv_session_seq_prefill on the default sequence. */
vkv_status vkv_session_prefill(vkv_session *s, const vkv_compression *c, const vkv_prompt *prompt,
                               vkv_logits_want want, float *logits, vkv_prefill *out);
vkv_status vkv_session_seq_prefill(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *prompt,
                                   vkv_logits_want want, float *logits, vkv_prefill *out);

/* The same prefill in steps, so a scheduler can put other sequences' work
 * between them (docs/ARCHITECTURE.md §1, "Sequences"). begin checks, resets
 * the context and sets up the compression (c, prompt and logits are
 * borrowed until _end); each _next evaluates one chunk of at most the
 * context's n_batch tokens, or compresses once the compressed part is in,
 * and sets *done after the prompt's last chunk; _end hands the result over
 * (out may be NULL to drop it, after an error too). The chunks are the ones
 * vkv_session_seq_prefill evaluates, so cache and logits are the same bit
 * for bit. */
vkv_status vkv_session_seq_prefill_begin(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *prompt,
                                         vkv_logits_want want, float *logits);
vkv_status vkv_session_seq_prefill_next(vkv_session_seq *q, bool *done);
/* begin without a press or compression during generation, its first
 * n_reuse prompt tokens taken from `from`'s cache instead of evaluated
 * (vkv_ctx_copy_prefix): the chunks after them end on the grid of n_batch
 * chunks a prefill from 0 takes, so cache and logits are the same bit for
 * bit as begin's. n_reuse must be a count vkv_session_seq_reusable accepts
 * (it returns n_reuse for n_match = page = n_reuse; VKV_ERR_ARG otherwise),
 * and the caller vouches that those tokens' ids are the ones from's prefill
 * evaluated. `from` is read only here. */
vkv_status vkv_session_seq_prefill_begin_from(vkv_session_seq *q, const vkv_compression *c, const vkv_prompt *prompt,
                                              vkv_logits_want want, float *logits, const vkv_session_seq *from,
                                              uint32_t n_reuse);
/* begin for a query-agnostic compression c (a press, no compression during
 * generation) whose compressed context (prompt ids [0, n_context)) is taken
 * from `from`'s cache instead of evaluated and compressed
 * (vkv_ctx_copy_compressed): only the rest of the prompt is evaluated, over
 * it, in the chunks begin's prefill takes, so cache and logits are the same
 * bit for bit as begin's. The caller vouches that from's prefill compressed
 * those same ids with the same compression (press, p_c, VECTOR and its
 * settings, row types, calibration: docs/SERVE.md, "The compressed-context
 * cache"); both contexts take the context in the same chunks (the same
 * n_batch, or both at least the context). When the context is
 * the whole prompt, the last token's logits are context_logits [n_vocab]
 * (from's, kept when it was evaluated), else NULL. want: LAST, REST or NONE
 * (the context's rows are not evaluated here). out.reused says so;
 * out.report is empty. */
vkv_status vkv_session_seq_prefill_begin_compressed(vkv_session_seq *q, const vkv_compression *c,
                                                    const vkv_prompt *prompt, vkv_logits_want want, float *logits,
                                                    const vkv_session_seq *from, const float *context_logits);
/* begin_compressed for a sibling: one request's choices (docs/SERVE.md,
 * "Several choices") share its prompt, so a query-aware compression's part
 * (prompt ids [0, n_query_end), the question included) is taken too. The
 * caller vouches that `from` prefilled this very prompt with c; from_logits
 * [n_vocab]: its last token's logits, needed when the compressed part is the
 * whole prompt. */
vkv_status vkv_session_seq_prefill_begin_sibling(vkv_session_seq *q, const vkv_compression *c,
                                                 const vkv_prompt *prompt, vkv_logits_want want, float *logits,
                                                 const vkv_session_seq *from, const float *from_logits);
/* The most of prompt's first tokens a plain prefill on q (its n_batch) may
 * take from `from`'s cache and still give begin's bits: a multiple of page,
 * at most n_match (the tokens of prompt whose ids equal those from's prefill
 * evaluated: the caller knows them), below prompt->n (the last token's
 * logits are evaluated), every row evaluated by a chunk of the matrix product
 * its chunk of a prefill from 0 takes, and the first chunk evaluated after
 * them of that product too (docs/SERVE.md, "The prefix cache"). 0: none. */
uint32_t vkv_session_seq_reusable(const vkv_session_seq *q, const vkv_session_seq *from, const vkv_prompt *prompt,
                                  uint32_t n_match, uint32_t page);
/* The same for a sequence not created yet: its context's n_batch and n_ctx
 * (what its admission predicts with). */
uint32_t vkv_session_reusable(uint32_t n_batch, uint32_t n_ctx, const vkv_session_seq *from, const vkv_prompt *prompt,
                              uint32_t n_match, uint32_t page);
void vkv_session_seq_prefill_end(vkv_session_seq *q, vkv_prefill *out);
/* The prompt positions [*from, *to) the last _next evaluated (empty when it
 * compressed instead): with VKV_LOGITS_CHUNK, rows [0, *to - *from) of the
 * logits. */
void vkv_session_seq_prefill_last_chunk(const vkv_session_seq *q, size_t *from, size_t *to);
/* The tokens of q's next prefill step when it is a plain chunk that can run
 * beside other sequences' (no compression after this prefill nor during
 * generation, logits of the last token or none), else 0. */
uint32_t vkv_session_seq_prefill_chunk(const vkv_session_seq *q);
/* _next for n sequences whose steps are plain chunks, in one forward
 * (vkv_ctx_eval_chunks: the chunks must share its path and fit the first
 * context's buffers, vkv_ctx_chunks_fit); done[i] as _next sets it. Each
 * sequence's cache and logits are bitwise what its own _next gives. */
vkv_status vkv_session_seqs_prefill_next(vkv_session_seq *const *qs, uint32_t n, bool *done);

/* Appends one generated token; logits: [n_vocab] of its successor. VKV_ERR_ARG
 * when the context is full (vkv_session_full says so beforehand). */
vkv_status vkv_session_step(vkv_session *s, int32_t id, float *logits);
bool vkv_session_full(const vkv_session *s);
vkv_status vkv_session_seq_step(vkv_session_seq *q, int32_t id, float *logits);
bool vkv_session_seq_full(const vkv_session_seq *q);
/* vkv_session_seq_step in three parts, for evaluating many sequences' tokens
 * in one call: _before (the full check, and compression during generation
 * making room), then the token's evaluation on q->ctx (vkv_ctx_eval of the
 * one token), then _after (compression's bookkeeping of the new token). */
vkv_status vkv_session_seq_step_before(vkv_session_seq *q);
vkv_status vkv_session_seq_step_after(vkv_session_seq *q);

/* Wall-clock timing with the driver's pipeline building taken out (it would
 * otherwise count the first use of every kernel). */
typedef struct vkv_stopwatch {
    double t0, pipeline0;
} vkv_stopwatch;
vkv_stopwatch vkv_session_stopwatch(const vkv_session *s);
double vkv_stopwatch_seconds(const vkv_session *s, vkv_stopwatch w);

/* Greedy generation after a prefill (LongBench, needle in a haystack). */
typedef struct vkv_gen_params {
    uint32_t max_new;          /* tokens to generate at most */
    int32_t stop_id;           /* another token that ends generation (kept in the text); VKV_TOKEN_NULL = none */
    bool min_one;              /* the first token may not end generation (LongBench's min_length for samsum) */
    bool strip_spm_space;      /* drop the leading space of a SentencePiece first piece (as HF's decode does) */
} vkv_gen_params;

typedef struct vkv_gen_result {
    char *text;                /* generated text, special tokens skipped (malloc'ed, NUL-terminated) */
    size_t len;
    uint32_t n_prompt, n_compressed; /* prompt tokens; tokens compression saw (0 without a press) */
    uint32_t n_gen;            /* tokens generated (the stop token included) */
    const char *stop;          /* "eog", "stop token", "max tokens" or "context full" */
    double pa;                 /* p_a used (VECTOR), else 0 */
    vkv_tier_fractions achieved; /* the compressed context's tiers over all its tokens; all 0 without a press */
    double prefill_s, compress_s, gen_s;
    uint64_t kv_bytes;         /* K/V bytes the compressed context holds (retained K+V, approximated K) */
    uint64_t kv_bytes_full;    /* the same context uncompressed */
} vkv_gen_result;

/* Prefills the prompt with compression c, then decodes greedily. */
vkv_status vkv_session_generate(vkv_session *s, const vkv_compression *c, const vkv_prompt *prompt,
                                const vkv_gen_params *g, vkv_gen_result *out);
void vkv_gen_result_free(vkv_gen_result *r);

#endif
