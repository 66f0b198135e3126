/* Offline OLS calibration for VECTOR (docs/ARCHITECTURE.md §4): per (layer, KV head) a linear
 * map W [d_v, d_k] with v̂ = W k from the pre-RoPE keys k (after the QK-norm of
 * qwen3) to the values v, fitted on a text corpus run through the model.
 *
 * Pipeline (vkvector calib):
 *   1. corpus -> token sequences of seq_len tokens (each starting with BOS when
 *      the vocabulary adds one): vkv_corpus_sequences;
 *   2. the model runs over every sequence on the GPU; a forward hook records,
 *      per layer and chunk, the gram shader's sums: per KV head G = Σ k kᵀ,
 *      C = Σ k vᵀ and Σ v vᵀ, and Σ v; for the joint per-layer map also G and C
 *      over all heads' keys concatenated (D_k = n_head_kv·d_k);
 *      after each submit the per-chunk f32 sums are added into double
 *      accumulators, separately for the training sequences and the held-out
 *      ones (the last heldout_frac of the sequences): vkv_gram_accum,
 *      vkv_calib_collect;
 *   3. W = ((G/n + λI)^{-1} C/n)ᵀ per head in double (Cholesky; λ = ridge ·
 *      tr(G/n)/d_k, relative to the keys' mean second moment), and the
 *      held-out report: R² of the per-head map, of one joint map per layer over
 *      all KV heads, of the Moore-Penrose map W_V W_K^+ from the model's own
 *      weights, and the relative error Σ||v - Wk||² / Σ||v||², all evaluated
 *      exactly from the held-out sums: vkv_calib_solve;
 *   4. the .vkcal file (a GGUF container) and a JSON report: vkv_calib_write,
 *      vkv_calib_write_json. vkv_calib_load reads a .vkcal back and checks
 *      that it was made for the model in hand.
 *
 * .vkcal format (GGUF v3, vkv_gguf_writer):
 *   tensors  calib.blk.N.w  ne = (d_k, d_v, n_head_kv), f32 or f16: layer N's
 *            maps as [n_head_kv, d_v, d_k] row-major (v̂ = W k)
 *            calib.blk.N.w_joint  ne = (D_k, D_v), f32 or f16, optional (every
 *            layer or none): layer N's joint map as [D_v, D_k] row-major, the
 *            heads' keys (values) concatenated head after head
 *   metadata vkvector.calib.version (u32, VKV_CALIB_VERSION)
 *            vkvector.calib.model.{architecture (str), n_layer, n_head_kv,
 *              head_dim, head_dim_v, n_embd (u32), kv_hash (u64), name (str)}
 *            vkvector.calib.{ridge, heldout_frac (f32)}
 *            vkvector.calib.corpus.{tokens, tokens_heldout (u64), sequences,
 *              sequences_heldout, seq_len (u32), byte_tokens (bool),
 *              sources (str array)}
 *            vkvector.calib.blk.N.{r2, r2_train, r2_mp, rel_err} (f32 arrays
 *              over the KV heads), vkvector.calib.blk.N.{r2_joint, ridge_joint} (f32)
 *            vkvector.calib.{r2_mean, r2_joint_mean, r2_mp_mean} (f32)
 *            vkvector.calib.checksum (u64, version 2 on; the last key): the
 *              64-bit FNV-1a of every byte of the file, this value's own 8
 *              taken as zero; a file whose bytes do not match is refused.
 *              Version 1 files (no checksum) are still read.
 *   A value that must be finite (ridge, heldout_frac, and with joint maps
 *   each layer's ridge_joint, and its r2_joint when there were held-out
 *   tokens) is refused when it is not; NaN elsewhere means "not measured";
 *   infinities are refused everywhere.
 * kv_hash is the 64-bit FNV-1a of the raw bytes of blk.0.attn_k.weight,
 * blk.0.attn_v.weight, blk.1.attn_k.weight, ... in that order. */
#ifndef VKV_CALIB_H
#define VKV_CALIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "calib/ols.h"
#include "infer/forward.h"
#include "tok/tokenizer.h"

#define VKV_CALIB_VERSION 2u

/* ---- the gram op (shaders/gram.comp; reference vkv_ref_gram) ---- */

/* Records out[b, i, j] = Σ_t x[..] y[..] (vkv_gram_params) into the open
 * recording; out is [n_blocks, m, n] f32. x is not read when p->x_ones. */
vkv_status vkv_op_gram(vkv_gpu *gpu, const vkv_gram_params *p, vkv_view x, vkv_view y, vkv_view out);

/* ---- streamed statistics ---- */

typedef enum vkv_calib_set {
    VKV_CALIB_TRAIN = 0,   /* sequences the maps are fitted on */
    VKV_CALIB_HELDOUT = 1, /* sequences the report is computed on */
} vkv_calib_set;

/* Double-precision sums of one layer over one token set. D_k = n_head_kv·d_k,
 * D_v = n_head_kv·d_v; a token's k (v) is the concatenation of its heads'. */
typedef struct vkv_calib_sums {
    double *g;        /* [n_head_kv, d_k, d_k]  Σ k_h k_hᵀ per head */
    double *c;        /* [n_head_kv, d_k, d_v]  Σ k_h v_hᵀ */
    double *vv;       /* [n_head_kv, d_v, d_v]  Σ v_h v_hᵀ */
    double *v_sum;    /* [D_v]  Σ v */
    double *g_joint;  /* [D_k, D_k]  Σ k kᵀ over all heads jointly, NULL without the joint map */
    double *c_joint;  /* [D_k, D_v]  Σ k vᵀ */
    uint64_t n;       /* tokens */
} vkv_calib_sums;

typedef struct vkv_gram_accum vkv_gram_accum;

/* joint: also accumulate the cross-head sums of the joint per-layer map
 * ([D_k, D_k] + [D_k, D_v] per layer on the device and twice in host doubles). */
vkv_status vkv_gram_accum_create(vkv_gpu *gpu, uint32_t n_layer, uint32_t n_head_kv, uint32_t d_k, uint32_t d_v,
                                 bool joint, vkv_gram_accum **out);
void vkv_gram_accum_free(vkv_gram_accum *a);
/* The set the chunks recorded from now on belong to. */
void vkv_gram_accum_set_target(vkv_gram_accum *a, vkv_calib_set s);
/* Records the sums of one layer's chunk (k [n_tok, n_head_kv, d_k],
 * v [n_tok, n_head_kv, d_v], f32 on the device) into the open recording.
 * The results of that layer's previous chunk (already submitted) are added
 * into the accumulators first. */
vkv_status vkv_gram_accum_record(vkv_gram_accum *a, uint32_t layer, vkv_view k, vkv_view v, uint32_t n_tok);
/* Adds every recorded, submitted chunk into the accumulators. Call after the
 * last submit (vkv_calib_collect does). */
void vkv_gram_accum_collect(vkv_gram_accum *a);
const vkv_calib_sums *vkv_gram_accum_sums(const vkv_gram_accum *a, uint32_t layer, vkv_calib_set s);
/* A vkv_kv_hook (forward.h) that records into the accumulator `user`. */
vkv_status vkv_gram_accum_hook(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view k_pre_rope, vkv_view v,
                               uint32_t n_tok, uint32_t pos0);

/* ---- corpus ---- */

typedef struct vkv_corpus_params {
    const char *const *paths;  /* plain text, or JSONL with a "text" member per line (C4 shards):
                                  .jsonl files or files whose first non-blank byte is '{' */
    uint32_t n_paths;
    const vkv_tokenizer *tok;  /* NULL: byte tokens (id = byte + 3, BOS = 1), for vocabularies
                                  without merges such as stories260K's placeholder vocabulary */
    uint32_t seq_len;          /* tokens per sequence, BOS included */
    uint32_t max_seq;          /* stop after this many sequences */
} vkv_corpus_params;

/* Documents (files, JSONL lines) are joined with "\n\n" into one stream,
 * tokenized, and cut into sequences of seq_len tokens, each starting with BOS
 * when the vocabulary adds one (always with byte tokens). *tokens is
 * [*n_seq, seq_len] (free() it). VKV_ERR_ARG when the corpus is too short for
 * one sequence. */
vkv_status vkv_corpus_sequences(const vkv_corpus_params *p, int32_t **tokens, uint32_t *n_seq);

/* ---- the GPU pass ---- */

typedef void (*vkv_calib_progress_fn)(void *user, uint64_t tokens_done, uint64_t tokens_total);

typedef struct vkv_calib_run_params {
    uint32_t seq_len;        /* tokens per sequence */
    uint32_t n_seq;          /* sequences in `tokens` */
    uint32_t n_seq_heldout;  /* the last n_seq_heldout sequences are held out */
    uint32_t n_batch;        /* forward chunk (0 = min(seq_len, 512)) */
    bool joint;              /* accumulate the joint per-layer sums (vkv_calib_joint_default) */
    vkv_calib_progress_fn progress;
    void *progress_user;
} vkv_calib_run_params;

/* Whether the joint per-layer map is affordable by default: D_k <= 2048
 * (its sums grow as D_k²; multi-head models such as Llama-2-7B have 4096). */
bool vkv_calib_joint_default(const vkv_hparams *hp);

/* Runs the model over tokens [n_seq, seq_len] (the context reset between
 * sequences; f32 KV cache; no logits) and returns the accumulated sums;
 * *seconds = wall time of the pass. */
vkv_status vkv_calib_collect(vkv_gpu *gpu, const vkv_model *m, const int32_t *tokens, const vkv_calib_run_params *p,
                             vkv_gram_accum **out, double *seconds);

/* ---- the result ---- */

typedef struct vkv_calib_identity {
    char arch[32];
    uint32_t n_layer, n_head_kv, head_dim, head_dim_v, n_embd;
    uint64_t kv_hash;
} vkv_calib_identity;

/* The identity of a model, GGUF or checkpoint folder (hashes the K/V weight
 * bytes as the device holds them: vkv_model_kv_hash). */
vkv_status vkv_calib_identity_of(const vkv_model *m, vkv_calib_identity *id);

typedef struct vkv_calib_corpus {
    uint64_t n_tokens, n_tokens_heldout;
    uint32_t n_seq, n_seq_heldout, seq_len;
    bool byte_tokens;
    char **sources;          /* file names as given */
    uint32_t n_sources;
} vkv_calib_corpus;

typedef struct vkv_calib {
    uint32_t version;
    vkv_calib_identity id;
    char model_name[256];
    uint32_t d_k, d_v;       /* = id.head_dim, id.head_dim_v */
    float *w;                /* [n_layer, n_head_kv, d_v, d_k] */
    double ridge, heldout_frac;
    vkv_calib_corpus corpus;
    /* Report (NaN where not computed), per (layer, head) [n_layer·n_head_kv]
     * or per layer [n_layer]. R² is held-out unless there are no held-out
     * sequences (then in-sample, and r2 == r2_train). */
    double *r2;              /* the per-head map (the one stored) */
    double *r2_train;        /* the same on the training sequences */
    double *r2_mp;           /* Moore-Penrose W_V W_K^+ */
    double *rel_err;         /* Σ||v - Wk||² / Σ||v||² */
    double *r2_joint;        /* [n_layer] one map over all KV heads jointly */
    double *ridge_joint;     /* [n_layer] the ridge that map needed (>= ridge; the
                                smallest power of ten that made it solvable) */
    float *w_joint;          /* [n_layer, D_v, D_k] the joint maps (--vector-map joint),
                                NULL when calibrated without them or any layer's failed */
} vkv_calib;

/* Layer l, KV head h: W [d_v, d_k] row-major. */
const float *vkv_calib_map(const vkv_calib *c, uint32_t layer, uint32_t head);
/* Layer l's joint map [D_v, D_k] row-major, or NULL without joint maps. */
const float *vkv_calib_joint_map(const vkv_calib *c, uint32_t layer);

/* The ridge vkv_calib_solve picks itself: 0 when every per-head map is
 * solvable without one, else the smallest of 1e-9, 1e-8, ..., 1e-1 that makes
 * every one solvable. */
#define VKV_CALIB_RIDGE_AUTO (-1.0)

/* Fits the per-head maps on the training sums (and the joint and
 * Moore-Penrose maps for the report) and evaluates the report on the held-out
 * sums. Fills identity, maps, ridge and report; the corpus fields are the
 * caller's. When a map is not solvable with the given ridge, VKV_ERR_CHECK
 * names it, counts the others and gives the smallest ridge that would do. */
vkv_status vkv_calib_solve(const vkv_gram_accum *a, const vkv_model *m, double ridge, vkv_calib **out);

/* Layer means of a per-(layer, head) report array, and the mean over all. */
double vkv_calib_layer_mean(const vkv_calib *c, const double *per_head, uint32_t layer);
double vkv_calib_mean(const vkv_calib *c, const double *per_head);

void vkv_calib_free(vkv_calib *c);

/* ---- files ---- */

vkv_status vkv_calib_write(const vkv_calib *c, const char *path, bool f16);
/* Reads a .vkcal without checking it against a model. */
vkv_status vkv_calib_read(const char *path, vkv_calib **out);
/* VKV_ERR_ARG naming every mismatch when c was made for another model. */
vkv_status vkv_calib_check_model(const vkv_calib *c, const char *calib_path, const vkv_model *m);
/* Reads and checks: the loader VECTOR uses. */
vkv_status vkv_calib_load(const char *path, const vkv_model *m, vkv_calib **out);
/* Where a model's calibration lives unless told otherwise: the model's path
 * with .vkcal in place of .gguf, or a checkpoint folder's path (trailing '/'
 * dropped) with .vkcal added (truncated to size). */
void vkv_calib_default_path(const char *model_path, char *out, size_t size);

/* The report as a table (layer x head) and as JSON. */
void vkv_calib_print_report(const vkv_calib *c, FILE *f);
vkv_status vkv_calib_write_json(const vkv_calib *c, const char *path, double tokens_per_s);

#endif
