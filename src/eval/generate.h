/* One greedy generation with optional KV-cache compression, the way
 * `vkvector run` does it: prefill the part that is compressed (the context in
 * query-agnostic mode, the whole prompt in query-aware mode), compress it
 * with the press (and VECTOR), evaluate the rest of the prompt, then decode
 * greedily. Shared by the LongBench and needle-in-a-haystack harnesses. */
#ifndef VKV_EVAL_GENERATE_H
#define VKV_EVAL_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "infer/forward.h"
#include "press/vector.h"
#include "tok/tokenizer.h"

typedef struct vkv_gen_params {
    /* compression (press NULL: the full cache) */
    const vkv_press_ops *press;
    double compression;              /* p_c */
    bool vector;                     /* VECTOR's approximated tier */
    double pa;                       /* p_a; < 0 = the default */
    const float *w;                  /* calibration maps (vector) */
    bool query_aware;                /* compress the question too */
    const vkv_kvzip_prompt *kvzip;   /* KVzip's reconstruction prompt (press->repeat_pass) */
    /* decoding (greedy) */
    uint32_t max_new;                /* tokens to generate at most */
    int32_t stop_id;                 /* another token that ends generation (kept in the text); VKV_TOKEN_NULL = none */
    bool min_one;                    /* the first token may not end generation (LongBench's min_length for samsum) */
    bool strip_spm_space;            /* drop the leading space of a SentencePiece first piece (as HF's decode does) */
} vkv_gen_params;

typedef struct vkv_gen_result {
    char *text;                      /* generated text, special tokens skipped (malloc'ed, NUL-terminated) */
    size_t len;
    uint32_t n_prompt, n_compressed; /* prompt tokens; tokens compression saw (0 without a press) */
    uint32_t n_gen;                  /* tokens generated (the stop token included) */
    const char *stop;                /* "eog", "stop token", "max tokens" or "context full" */
    double pa;                       /* p_a used (VECTOR), else 0 */
    double prefill_s, compress_s, gen_s;
    uint64_t kv_bytes;               /* K/V bytes the compressed context holds (retained K+V, approximated K) */
    uint64_t kv_bytes_full;          /* the same context uncompressed */
} vkv_gen_result;

/* Resets ctx, then generates from ids[0, n_ids); ids [0, n_context) are the
 * context (the part compressed in query-agnostic mode). ctx needs room for
 * the prompt, the generated tokens and vkv_press_session_extra_tokens(). */
vkv_status vkv_generate(vkv_ctx *ctx, const vkv_model *m, const vkv_tokenizer *tok, const int32_t *ids, size_t n_ids,
                        size_t n_context, const vkv_gen_params *p, vkv_gen_result *out);
void vkv_gen_result_free(vkv_gen_result *r);

#endif
