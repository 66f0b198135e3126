/* Importance scorers ("presses", as kvpress calls them) and the VECTOR
 * three-way allocation. docs/ARCHITECTURE.md §2 gives the counting rules; this header is the
 * contract between the forward pass, the scorers and the allocation.
 *
 * Flow (query-agnostic: the context alone is prefilled; query-aware: the
 * question is part of the prefill):
 *   1. prefill the context (infer/forward); scorers that need queries get the
 *      last `window` queries of every layer captured during the prefill;
 *   2. per layer, the scorer writes scores[n_kv_head, n] (higher = keep) on
 *      the GPU (score_gpu), mirrored by a CPU reference (score_ref) that the
 *      tests compare selections with;
 *   3. the allocation (press/vector.c) picks, per (layer, KV head), the pool
 *      of the top n_kept + a tokens, ranks the pool by the OLS residual
 *      eps_i = ||V_i - W R^-1 K_i||^2, approximates the 2a lowest, retains the
 *      rest, evicts the others; then the cache is compacted (kv/).
 * Ties in every selection are broken by position (the earlier token wins). */
#ifndef VKV_PRESS_H
#define VKV_PRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "kvlayout/kv_counts.h"
#include "vk/ops.h"

/* What a scorer sees for one layer, after the prefill of n context tokens.
 * Device views; the host copies (for score_ref) use the same layouts. */
typedef struct vkv_press_layer {
    uint32_t layer, n_layer;
    uint32_t n;              /* context tokens: cache slots 0..n-1, slot j = position j */
    uint32_t n_head, n_kv_head, head_dim;
    uint32_t n_ctx;          /* slots per KV head in the cache (stride) */
    vkv_dtype kv_type;       /* VKV_F16 or VKV_F32 */
    vkv_view k;              /* [n_kv_head, n_ctx, head_dim] post-RoPE keys */
    vkv_view v;              /* [n_kv_head, n_ctx, head_dim] values */
    uint32_t window;         /* queries captured (min(n, 64) for SnapKV; 0 if not asked) */
    vkv_view q_window;       /* [window, n_head, head_dim] f32 post-RoPE queries of positions n-window..n-1 */
    const void *k_host, *v_host, *q_window_host; /* same data on the host, for score_ref */
    vkv_view scratch;        /* >= vkv_press_scratch_bytes() bytes of device memory the scorer may overwrite */
    /* Scorers with a capture (vkv_press_ops.capture_gpu): */
    vkv_view state;          /* the layer's state_bytes() bytes: zeroed before the prefill, updated by capture_gpu */
    uint32_t n_rot;          /* RoPE of the model: leading dims rotated (even, <= head_dim) */
    bool rope_neox;          /* NeoX halves (qwen2/qwen3) instead of interleaved pairs (llama) */
    vkv_view inv_freq;       /* [n_rot / 2] f32 angular frequencies (vkv_rope_inv_freq: rope scaling included) */
    const float *inv_freq_host;
    /* KVzip's reconstruction pass (vkv_press_ops.repeat_pass): */
    uint32_t prefix;         /* chat-template tokens at the start of the context, never repeated (kvpress's prefix_length) */
    uint32_t span0, span1;   /* context tokens [span0, span1) the current pass repeats (its queries sit at positions >= n) */
    /* For score_ref of a scorer with a capture: every query it captured. */
    uint32_t q_pos0, n_q;    /* positions q_pos0 .. q_pos0 + n_q - 1 (0 and n for the prefill) */
    const float *q_host;     /* [n_q, n_head, head_dim] f32 post-RoPE queries; for KVzip the repeated keys sit in
                                k_host slots n .. q_pos0 + n_q - 1 */
    /* A gathered layer during generation (vkv_press_ops.score_window): its
     * slots are out of position order. */
    uint32_t window_pos0;    /* the position of q_window's first row (its rows: consecutive positions) */
    const int32_t *slot_pos; /* [n_kv_head, n] host: each slot's position (NULL: slot j is position j) */
    const uint32_t *n_tok;   /* [n_kv_head] host: tokens each head holds in slots 0 .. n_tok - 1 (NULL: n) */
    /* Scorers that project the values through the attention output (vkv_press_ops.needs_wo): */
    uint32_t n_embd;         /* W_o's rows */
    vkv_view wo;             /* [n_embd, n_head * head_dim] f32 the layer's output projection (one storage range) */
    const float *wo_host;    /* the same on the host, for score_ref */
} vkv_press_layer;

/* Zero window / kernel / pyramid_beta mean the defaults (64, 5, 20); n_sink
 * and block are taken as given (0 = no sinks, whole sequence): start from
 * vkv_press_params_default(). */
typedef struct vkv_press_params {
    double compression_ratio; /* p_c in [0, 1): the double of the decimal the user typed */
    uint32_t window;         /* SnapKV / PyramidKV observation window (64) */
    uint32_t kernel;         /* SnapKV pooling kernel (5; odd) */
    uint32_t n_sink;         /* StreamingLLM / ExpectedAttention sinks (4) */
    uint32_t block;          /* block-wise KeyDiff block (0 = whole sequence; paper: 128) */
    float pyramid_beta;      /* PyramidKV beta (20) */
    uint32_t chunk_length;   /* ChunkKV chunk (20; 0 = 20) */
    uint32_t lag_size;       /* LagKV partition (128; 0 = 128) */
    uint32_t seed;           /* RandomPress seed (42, kvpress's evaluation seed; 0 is a seed too) */
    uint32_t sample;         /* RandomPress: the evaluation's sample index (0 outside one); each
                                sample draws its own scores, as kvpress's global generator does */
    /* ExpectedAttention's value-norm rescaling (docs/ARCHITECTURE.md §2):
     * scores (p + expected_epsilon) ||v|| (kvpress's epsilon, 0), or the
     * expected attention p alone when expected_no_vnorm (kvpress's
     * use_vnorm=False, which ignores epsilon). Zero is kvpress's default for
     * both, so a zeroed struct rescales as kvpress does. The compositions set
     * them for their inner scorer: adakv-expected epsilon 1e-2,
     * critical-expected and critical-adakv-expected no_vnorm. */
    float expected_epsilon;
    bool expected_no_vnorm;
} vkv_press_params;

/* kvpress's defaults: window 64, kernel 5, 4 sinks, whole-sequence KeyDiff, beta 20,
 * ChunkKV chunks of 20, LagKV partitions of 128, seed 42, ExpectedAttention's
 * epsilon 0 with the value norms. */
vkv_press_params vkv_press_params_default(double compression_ratio);

typedef struct vkv_press_ops {
    const char *name;        /* as on the command line: "keydiff", "snapkv", ... */
    uint32_t window;         /* queries it needs captured per layer (0 = none) */
    bool query_aware;        /* the paper's default mode for this scorer */
    bool kvpress_query_aware; /* the mode kvpress's evaluation gives it under --protocol kvpress: its
                                 evaluate.py runs every press query-agnostic, its leaderboard script
                                 turns query-awareness on for snapkv, adakv_snapkv and chunkkv alone
                                 (docs/ARCHITECTURE.md §5, "Query modes") */
    /* scores[n_kv_head, n] f32 on the device (records into the open recording). */
    vkv_status (*score_gpu)(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view scores);
    /* The same on the host, in double where it matters (VKV_ERR_ARG for the
     * same inputs score_gpu refuses, e.g. a context shorter than SnapKV's
     * window; VKV_ERR_OOM). */
    vkv_status (*score_ref)(const vkv_press_params *p, const vkv_press_layer *in, float *scores);
    /* Device scratch score_gpu needs for this layer shape (in->k, in->v and
     * the host pointers are not looked at); NULL = none. Allocate once for
     * n = n_ctx_max: the size grows with n. */
    uint64_t (*scratch_bytes)(const vkv_press_params *p, const vkv_press_layer *in);
    /* Tokens layer l keeps when not every layer keeps floor(n (1 - p_c))
     * (PyramidKV); NULL = the uniform kvpress count. */
    uint32_t (*n_kept)(const vkv_press_params *p, uint32_t layer, uint32_t n_layer, uint32_t n);
    /* Positions that are always kept whatever their score: StreamingLLM's
     * sinks score +inf; SnapKV's window (and what wraps it) scores in the
     * forced band (vkv_press_forced_score), above every real score, the
     * newest highest. */

    /* Scorers that look at every query rather than a captured window
     * (ObservedAttention, ExpectedAttention, KVzip): per-layer device state of
     * state_bytes() bytes (shapes of `in` only, like scratch_bytes) that the
     * driver zeroes before the prefill; capture_gpu records its update with
     * the post-RoPE queries q [n_tok, n_head, head_dim] f32 of positions
     * pos0 .. pos0 + n_tok - 1, when those tokens' keys are in the cache
     * (in->k holds slots 0 .. pos0 + n_tok - 1; in->n is the context length;
     * in->state, in->scratch and the RoPE fields are set). score_gpu then
     * reads in->state. NULL = none. */
    uint64_t (*state_bytes)(const vkv_press_params *p, const vkv_press_layer *in);
    vkv_status (*capture_gpu)(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, vkv_view q,
                              uint32_t n_tok, uint32_t pos0);
    /* The capture runs during a reconstruction pass after the prefill, not
     * during the prefill (KVzip): the driver appends, chunk by chunk, a prompt
     * asking to repeat the context and the context chunk again (positions
     * continuing after it; in->span0/span1 name the chunk), then drops them. */
    bool repeat_pass;
    /* One selection over every (layer, KV head, token) (KVzip's default): the
     * driver scores all layers, evicts exactly the int(N p_c) lowest
     * of the N = n_layer n_kv_head n scores (kvpress's top-k; ties broken by
     * the flat index, press/select_global.h) and each (layer, KV head) keeps
     * what is left of its row. n_kept is ignored. */
    bool global_selection;
    /* Head-adaptive budgets (AdaKV, CriticalAdaKV: press/adakv.c): the
     * scores already carry the safeguard (each head's share forced to
     * +inf); the driver keeps the layer's H n_kept highest scores of its
     * [n_kv_head, n] scores taken as one row (ties by the flat index,
     * press/select_global.h) and each KV head keeps what is left of its row:
     * the layer's total is the uniform one. n_kept is ignored. */
    bool layer_selection;
    /* The scores read the layer's output projection W_o (in->wo, in->n_embd:
     * CriticalKV, press/critical.c); the driver hands it as f32. */
    bool needs_wo;
    /* VECTOR's default pool scope, picked per scorer from the measured
     * comparison in models/README.md (layer for PyramidKV; row for KVzip,
     * where its own global scope lost on average; 0 = row). */
    vkv_pool_scope pool_scope;
    /* The scores read the keys alone, in any slot order (KeyDiff without
     * blocks, KNorm): the scorers compression during generation can run on a
     * compressed cache gathered back (press/decode.h). */
    bool keys_only;
    /* The scores group consecutive positions (ChunkKV's chunks): compression
     * during generation, whose gathered cache holds its slots out of position
     * order, refuses the scorer. */
    bool needs_position_order;
    /* Scorers whose score is a function of the token's position alone
     * (StreamingLLM): scores[j] of pos[j], j < n, on the host. Compression
     * during generation scores a gathered cache with it, whose slots are
     * not in position order (press/decode.h). NULL = none. */
    void (*score_positions)(const vkv_press_params *p, const int32_t *pos, uint32_t n, float *scores);
    /* Scorers with a capture that compression during generation runs on a
     * gathered cache (press/decode.h): the last decode_window queries stand
     * for every query of the prefill. The driver zeroes the state, calls
     * capture_gpu once with those queries (in->q_window) at the slots
     * n - decode_window .. n - 1, the gathered layer's latest tokens, then
     * score_gpu (ObservedAttention: 1, the attention weights of the decoding
     * step, which is what kvpress's DecodingPress hands it). 0 = none. */
    uint32_t decode_window;
    /* A scorer of a gathered layer during generation that reads the last
     * min(decode_window, N) queries, the tokens since the previous
     * compression as kvpress's DecodingPress buffers them (ExpectedAttention):
     * in->q_window, in->window rows from position in->window_pos0, in->slot_pos
     * and in->n_tok set, in->state (state_bytes) zeroed by the driver.
     * Records, submits, waits and writes scores[n_kv_head, n]
     * on the host (scratch: scratch_bytes). score_window_ref: the same in
     * double from in->q_window_host and the host caches. NULL = none. */
    vkv_status (*score_window)(vkv_gpu *gpu, const vkv_press_params *p, const vkv_press_layer *in, float *scores);
    vkv_status (*score_window_ref)(const vkv_press_params *p, const vkv_press_layer *in, float *scores);
} vkv_press_ops;

/* The score of a token kept whatever the others score, with an order among
 * such tokens: SnapKV's observation window (PyramidKV's, and AdaKV's,
 * CriticalKV's and ChunkKV's over SnapKV), whose token `order` places
 * (0 the oldest) scores 2^100 (1 + order 2^-23), bits 0x71800000 + order:
 * above every real score, the newest highest, so a budget below the window
 * keeps its newest tokens (kvpress pads the window with the maximum score,
 * a tie that keeps no particular ones; docs/ARCHITECTURE.md §2). Sums of up
 * to 2^27 of them stay finite (ChunkKV's chunk sums over heads). The
 * shaders write the same bits. */
#define VKV_PRESS_FORCED_BITS 0x71800000u
static inline float vkv_press_forced_score(uint32_t order)
{
    const union { uint32_t u; float f; } b = {VKV_PRESS_FORCED_BITS + order};
    return b.f;
}
/* Whether a score is a forced keep: +inf, or in the forced band. */
static inline bool vkv_press_is_forced(float score)
{
    return score >= vkv_press_forced_score(0);
}

/* Whether the question is compressed with the context. The paper runs
 * SnapKV and PyramidKV query-aware and KeyDiff and KVzip query-agnostic
 * (vkv_press_ops.query_aware holds each scorer's mode); under kvpress's
 * protocol the default is kvpress's evaluation's (kvpress_query_aware); a
 * command line may override either way. */
typedef enum vkv_query_mode {
    VKV_QUERY_DEFAULT = 0,     /* the scorer's own mode */
    VKV_QUERY_AWARE,
    VKV_QUERY_AGNOSTIC,
} vkv_query_mode;
bool vkv_press_query_aware(const vkv_press_ops *ops, vkv_query_mode mode, bool kvpress_protocol);

/* The pool scope a run uses: the requested one, or the scorer's own. */
vkv_pool_scope vkv_press_pool_scope(const vkv_press_ops *ops, vkv_pool_scope requested);
/* The narrowest scope whose counts reach the paper's split of all tokens
 * (docs/ARCHITECTURE.md §2): row when every row keeps the same count, global
 * when the scorer's budget differs per row (PyramidKV's n_kept, KVzip's
 * global selection), where a row's or a layer's cap a <= n_kept loses
 * approximation budget; layer for head-adaptive budgets (layer_selection),
 * whose layers each keep the uniform total. The default under --protocol kvpress. */
vkv_pool_scope vkv_press_paper_pool_scope(const vkv_press_ops *ops);

/* All scorers, NULL-terminated; one file per scorer under src/press/. */
const vkv_press_ops *const *vkv_press_all(void);
/* By name; NULL (with a message listing the names) when unknown. */
const vkv_press_ops *vkv_press_find(const char *name);

/* Queries the prefill must capture per layer for this scorer: ops->window,
 * except that a scorer declaring the default SnapKV window (64) uses
 * params.window instead (PyramidKV / SnapKV with another window). */
uint32_t vkv_press_queries_needed(const vkv_press_ops *ops, const vkv_press_params *p);

/* Bytes of in->scratch the scorer needs (its scratch_bytes, at least 16 so a
 * buffer of that size can always be created). */
uint64_t vkv_press_scratch_bytes(const vkv_press_ops *ops, const vkv_press_params *p, const vkv_press_layer *in);

#endif
