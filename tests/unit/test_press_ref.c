/* The scorers' CPU references (score_ref of src/press/<scorer>.c), kvpress's token
 * counts and the reference top-k selection, on cases small enough to work
 * out by hand. No GPU is used: score_ref only reads the host copies. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvlayout/kv_counts.h"
#include "press/kvzip.h"
#include "press/press.h"
#include "press/select_global.h"
#include "ref/ref_attn.h"
#include "ref/ref_select.h"

#define HD 4

/* A layer of n tokens, one KV head per query head unless told, f32 cache
 * [n_kv_head, n_ctx = n, HD] given as keys[n_kv_head][n][HD]. */
static vkv_press_layer layer_f32(const float *keys, uint32_t n, uint32_t n_head, uint32_t n_kv_head,
                                 const float *q, uint32_t window)
{
    return (vkv_press_layer){.layer = 0, .n_layer = 1, .n = n, .n_head = n_head, .n_kv_head = n_kv_head,
                             .head_dim = HD, .n_ctx = n, .kv_type = VKV_F32, .window = window,
                             .k_host = keys, .v_host = keys, .q_window_host = q};
}

static void score(const char *name, const vkv_press_params *p, const vkv_press_layer *in, float *out)
{
    const vkv_press_ops *ops = vkv_press_find(name);
    assert_non_null(ops);
    assert_int_equal(ops->score_ref(p, in, out), VKV_OK);
}

static void knorm_scores_minus_the_key_norm(void **state)
{
    (void)state;
    float keys[3 * HD] = {3, 4, 0, 0, /**/ 0, 0, 0, 0, /**/ 1, -2, 2, 4};
    float out[3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 3, 1, 1, NULL, 0);
    score("knorm", &p, &in, out);
    assert_float_equal(out[0], -5.0f, 1e-6);
    assert_float_equal(out[1], 0.0f, 0);
    assert_float_equal(out[2], -5.0f, 1e-6);

    /* The same keys stored as f16 (all exact): the same scores. */
    uint16_t k16[3 * HD];
    vkv_kv_cache_store(VKV_F16, k16, 1, 3, HD, 0, keys, 3);
    in.kv_type = VKV_F16;
    in.k_host = k16;
    float out16[3];
    score("knorm", &p, &in, out16);
    assert_memory_equal(out, out16, sizeof out);
}

static void keydiff_scores_minus_the_cosine_to_the_mean_normalised_key(void **state)
{
    (void)state;
    /* Normalised keys e1, e2, e1 (the third is 2 e1), and a zero key that
     * adds nothing: a = (2/3, 1/3, 0, 0)... divided by n = 4, which does not
     * change a cosine. cos(e1, a) = 2/sqrt(5), cos(e2, a) = 1/sqrt(5). */
    float keys[4 * HD] = {1, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 2, 0, 0, 0, /**/ 0, 0, 0, 0};
    float out[4];
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 4, 1, 1, NULL, 0);
    score("keydiff", &p, &in, out);
    assert_float_equal(out[0], -2.0 / sqrt(5.0), 1e-6);
    assert_float_equal(out[1], -1.0 / sqrt(5.0), 1e-6);
    assert_float_equal(out[2], -2.0 / sqrt(5.0), 1e-6);
    assert_float_equal(out[3], 0.0f, 0); /* zero key: cos = 0 */
}

static void blockwise_keydiff_uses_the_mean_of_every_block_seen_so_far(void **state)
{
    (void)state;
    /* Blocks of 2: block 0 = (e1, e2), anchor (1/2, 1/2): cos 1/sqrt(2) for
     * both. Block 1 = (e2, e2), anchor over all four = (1/4, 3/4):
     * cos(e2, a) = 3/sqrt(10). */
    float keys[4 * HD] = {1, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 0, 5, 0, 0, /**/ 0, 1, 0, 0};
    float out[4];
    vkv_press_params p = vkv_press_params_default(0.5f);
    p.block = 2;
    vkv_press_layer in = layer_f32(keys, 4, 1, 1, NULL, 0);
    score("keydiff", &p, &in, out);
    assert_float_equal(out[0], -1.0 / sqrt(2.0), 1e-6);
    assert_float_equal(out[1], -1.0 / sqrt(2.0), 1e-6);
    assert_float_equal(out[2], -3.0 / sqrt(10.0), 1e-6);
    assert_float_equal(out[3], -3.0 / sqrt(10.0), 1e-6);
    /* A block at least as long as the context is plain KeyDiff. */
    float whole[4];
    p.block = 0;
    score("keydiff", &p, &in, whole);
    p.block = 4;
    score("keydiff", &p, &in, out);
    assert_memory_equal(out, whole, sizeof out);
}

static void streamingllm_keeps_the_sinks_and_the_most_recent_tokens(void **state)
{
    (void)state;
    float keys[10 * HD] = {0}, out[10];
    uint32_t mask[10];
    vkv_press_params p = vkv_press_params_default(0.4);
    vkv_press_layer in = layer_f32(keys, 10, 1, 1, NULL, 0);
    score("streamingllm", &p, &in, out);
    uint32_t k = vkv_kv_n_kept(p.compression_ratio, 10);
    assert_int_equal(k, 6);
    assert_int_equal(vkv_ref_topk_select(out, 1, 10, NULL, k, mask), VKV_OK);
    const uint32_t want[10] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1};
    assert_memory_equal(mask, want, sizeof want);
}

/* During generation StreamingLLM scores a gathered cache by its slots' positions
 * (out of order): the same scores as a prefill's slot j at position j. */
static void streamingllm_scores_gathered_positions(void **state)
{
    (void)state;
    const vkv_press_ops *ops = vkv_press_find("streamingllm");
    assert_non_null(ops->score_positions);
    vkv_press_params p = vkv_press_params_default(0);
    const int32_t pos[6] = {40, 2, 0, 17, 3, 4}; /* retained, approximated, then appended slots */
    float out[6];
    ops->score_positions(&p, pos, 6, out);
    assert_true(isinf(out[1]) && isinf(out[2]) && isinf(out[4])); /* the 4 sinks */
    assert_float_equal(out[0], 40, 0);
    assert_float_equal(out[3], 17, 0);
    assert_float_equal(out[5], 4, 0);
}

/* A scorer refuses a ratio outside [0, 1) by the one rule (vkv_kv_check_ratios)
 * and says which. */
static void scorers_refuse_a_compression_ratio_outside_the_range(void **state)
{
    (void)state;
    float keys[10 * HD] = {0}, out[10];
    vkv_press_layer in = layer_f32(keys, 10, 1, 1, NULL, 0);
    const double refused[] = {1, 1.5, -0.25};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        vkv_press_params p = vkv_press_params_default(refused[i]);
        assert_int_equal(vkv_press_find("keydiff")->score_ref(&p, &in, out), VKV_ERR_ARG);
        if (!strstr(vkv_last_error(), "is outside [0, 1)")) fail_msg("'%s'", vkv_last_error());
    }
    vkv_press_params p = vkv_press_params_default(0.999);
    assert_int_equal(vkv_press_find("keydiff")->score_ref(&p, &in, out), VKV_OK);
}

/* q = 0: every visible key gets the same weight. Window w = 2 of n = 6:
 * query 0 (position 4) sees keys 0..4 (1/5 each), query 1 sees 0..5 (1/6):
 * mean 11/60 on each of the 4 prefix keys. Pool 5 with zero padding,
 * always / 5: the ends have 3 taps inside, the middle 4. */
static void snapkv_pools_the_mean_window_attention_with_zero_padding(void **state)
{
    (void)state;
    float keys[6 * HD], q[2 * 2 * HD] = {0}, out[6];
    for (int i = 0; i < 6 * HD; i++) keys[i] = (float)(i % 7) - 3.0f;
    vkv_press_params p = vkv_press_params_default(0.5f);
    p.window = 2;
    /* Two query heads on one KV head (both q = 0): the group mean changes nothing. */
    vkv_press_layer in = layer_f32(keys, 6, 2, 1, q, 2);
    score("snapkv", &p, &in, out);
    const double m = 11.0 / 60.0;
    assert_float_equal(out[0], 3 * m / 5, 1e-7);
    assert_float_equal(out[1], 4 * m / 5, 1e-7);
    assert_float_equal(out[2], 4 * m / 5, 1e-7);
    assert_float_equal(out[3], 3 * m / 5, 1e-7);
    /* the window is always kept: the forced band, the newest highest */
    assert_true(vkv_press_is_forced(out[4]) && out[5] > out[4] && isfinite(out[5]));
    assert_true(out[4] == vkv_press_forced_score(0) && out[5] == vkv_press_forced_score(1));
    /* PyramidKV scores are SnapKV's. */
    float pyr[6];
    score("pyramidkv", &p, &in, pyr);
    assert_memory_equal(out, pyr, sizeof out);
}

static void snapkv_weights_follow_the_causal_softmax(void **state)
{
    (void)state;
    /* n = 3, w = 1, kernel 1 (no pooling): the last query attends to all 3
     * keys. q . k / sqrt(4) = (ln 2, 0, 0): weights (1/2, 1/4, 1/4); the
     * prefix is keys 0 and 1. */
    float keys[3 * HD] = {1, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 0, 0, 1, 0};
    float q[HD] = {(float)(2 * log(2.0)), 0, 0, 0}, out[3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    p.window = 1;
    p.kernel = 1;
    vkv_press_layer in = layer_f32(keys, 3, 1, 1, q, 1);
    score("snapkv", &p, &in, out);
    assert_float_equal(out[0], 0.5f, 1e-6);
    assert_float_equal(out[1], 0.25f, 1e-6);
    assert_true(vkv_press_is_forced(out[2]));
}

/* A budget below SnapKV's window of 64: the window's tokens all outrank the
 * prefix, and among them the newest win (the forced band's order), for
 * SnapKV, PyramidKV and what wraps SnapKV: AdaKV (the layer's flat top-k),
 * CriticalKV (stage 1's picks, then the window's order through stage 2),
 * CriticalAdaKV and ChunkKV (the newest whole chunk). With +inf for every
 * window token the ties kept the oldest window tokens instead. */
static void snapkv_budget_below_the_window_keeps_its_newest_tokens(void **state)
{
    (void)state;
    enum { N = 80, H = 2, W = 64, EMBD = 6 };
    static float keys[H * N * HD], q[W * H * HD], wo[EMBD * H * HD], scores[H * N];
    uint32_t seed = 12345;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) keys[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 4194304.0f - 2.0f;
    for (size_t i = 0; i < sizeof wo / sizeof *wo; i++) wo[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    vkv_press_params p = vkv_press_params_default(0.875); /* n_kept = int(80 x 0.125) = 10 < 64 */
    assert_int_equal(vkv_kv_n_kept(p.compression_ratio, N), 10);
    vkv_press_layer in = layer_f32(keys, N, H, H, q, W);
    in.n_embd = EMBD;
    in.wo_host = wo;
    static const struct { const char *name; bool layer_wide; uint32_t keep; } cases[] = {
        {"snapkv", false, 10}, {"pyramidkv", false, 10}, {"critical-snapkv", false, 10},
        {"adakv-snapkv", true, 10}, {"critical-adakv-snapkv", true, 10},
        {"chunkkv", false, 20}, /* one whole chunk of 20 (at least one chunk kept) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        score(cases[c].name, &p, &in, scores);
        uint32_t mask[H * N];
        if (cases[c].layer_wide) /* the layer's H n_kept highest of all its heads (press.h, layer_selection) */
            assert_int_equal(vkv_ref_topk_select(scores, 1, H * N, NULL, H * cases[c].keep, mask), VKV_OK);
        else
            assert_int_equal(vkv_ref_topk_select(scores, H, N, NULL, cases[c].keep, mask), VKV_OK);
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t j = 0; j < N; j++)
                if (mask[h * N + j] != (j >= N - cases[c].keep))
                    fail_msg("%s: head %u position %u %s", cases[c].name, h, j, mask[h * N + j] ? "kept" : "evicted");
    }
}

static void snapkv_rejects_a_context_shorter_than_its_window(void **state)
{
    (void)state;
    float keys[10 * HD] = {0}, q[10 * HD] = {0}, out[10];
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 10, 1, 1, q, 10);
    const vkv_press_ops *ops = vkv_press_find("snapkv");
    assert_int_equal(ops->score_ref(&p, &in, out), VKV_ERR_ARG);
    assert_non_null(strstr(vkv_last_error(), "10 tokens"));
    assert_non_null(strstr(vkv_last_error(), "64"));
    p.kernel = 4;
    p.window = 2;
    assert_int_equal(ops->score_ref(&p, &in, out), VKV_ERR_ARG); /* even pooling kernel */
}

static void tova_averages_the_last_query_over_all_heads(void **state)
{
    (void)state;
    /* Two KV heads, one query head each. Head 0: q = 0, weights 1/3 each.
     * Head 1: weights (1/2, 1/4, 1/4) as above. Mean over the heads:
     * (5/12, 7/24) for the first two tokens, the same for both KV heads;
     * the last token is kept. Only the last captured query counts. */
    float keys[2 * 3 * HD] = {1, 2, 3, 4, /**/ 4, 3, 2, 1, /**/ 0, 1, 0, 1, /**/
                              1, 0, 0, 0, /**/ 0, 1, 0, 0, /**/ 0, 0, 1, 0};
    float q[2 * 2 * HD] = {9, 9, 9, 9, /**/ 9, 9, 9, 9, /**/ 0, 0, 0, 0, /**/ (float)(2 * log(2.0)), 0, 0, 0};
    float out[2 * 3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 3, 2, 2, q, 2);
    score("tova", &p, &in, out);
    for (int h = 0; h < 2; h++) {
        assert_float_equal(out[h * 3 + 0], 5.0 / 12.0, 1e-6);
        assert_float_equal(out[h * 3 + 1], 7.0 / 24.0, 1e-6);
        assert_true(isinf(out[h * 3 + 2]));
    }
}

static void observed_averages_the_attention_over_the_queries_that_see_a_token(void **state)
{
    (void)state;
    /* q = 0: query i spreads 1 / (i + 1) over keys 0..i. Column sums
     * 1 + 1/2 + 1/3, 1/2 + 1/3, 1/3 over n - j = 3, 2, 1 queries. */
    float keys[3 * HD] = {1, 2, 3, 4, /**/ -1, 0, 2, 0, /**/ 0, 0, 0, 5}, q[3 * HD] = {0}, out[3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 3, 1, 1, NULL, 0);
    in.q_host = q;
    in.n_q = 3;
    score("observed", &p, &in, out);
    assert_float_equal(out[0], 11.0 / 18.0, 1e-7);
    assert_float_equal(out[1], 5.0 / 12.0, 1e-7);
    assert_float_equal(out[2], 1.0 / 3.0, 1e-7);
    /* Two query heads on one KV head: the group mean. Head 1 puts weight 4 on
     * key 0 (q . k0 / 2 = ln 4): query 1 gives key 0 4/5, key 1 1/5; query 2
     * 4/6, 1/6, 1/6. With head 0 (q = 0) the group mean of key 0 is
     * ((1 + 4/5 + 4/6) + 11/6) / 2 / 3. */
    float keys2[3 * HD] = {1, 0, 0, 0, /**/ 0, 0, 0, 0, /**/ 0, 0, 0, 0};
    float q2[3 * 2 * HD] = {0};
    for (int i = 0; i < 3; i++) q2[(i * 2 + 1) * HD] = (float)(2 * log(4.0));
    in = layer_f32(keys2, 3, 2, 1, NULL, 0);
    in.q_host = q2;
    in.n_q = 3;
    score("observed", &p, &in, out);
    assert_float_equal(out[0], ((1 + 0.8 + 4.0 / 6) + 11.0 / 6) / 2 / 3, 1e-6);
    assert_float_equal(out[1], ((0.2 + 1.0 / 6) + 5.0 / 6) / 2 / 2, 1e-6);
    assert_float_equal(out[2], (1.0 / 6 + 1.0 / 3) / 2, 1e-6);
    /* The reference needs every query. */
    in.n_q = 2;
    assert_int_equal(vkv_press_find("observed")->score_ref(&p, &in, out), VKV_ERR_ARG);
}

static void expected_scores_the_gaussian_expected_attention_times_the_value_norm(void **state)
{
    (void)state;
    /* No RoPE (n_rot 0), one sink. Queries of positions 1, 2: (2,0,0,0) and
     * (0,0,0,0): mu = (1,0,0,0), Sigma = diag(1, 0, 0, 0) (biased). Keys
     * k1 = e1: z = 1/2 + 1/8; k2 = 2 e2: z = 0. Softmax over keys 1, 2, times
     * ||v|| (v = k here): 1 and 2. The sink is kept. */
    float keys[3 * HD] = {5, 5, 5, 5, /**/ 1, 0, 0, 0, /**/ 0, 2, 0, 0};
    float q[3 * HD] = {7, 7, 7, 7, /**/ 2, 0, 0, 0, /**/ 0, 0, 0, 0}, out[3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    p.n_sink = 1;
    vkv_press_layer in = layer_f32(keys, 3, 1, 1, NULL, 0);
    in.q_host = q;
    in.n_q = 3;
    score("expected", &p, &in, out);
    const double e = exp(0.625);
    assert_true(isinf(out[0]) && out[0] > 0);
    assert_float_equal(out[1], e / (e + 1), 1e-6);
    assert_float_equal(out[2], 2 / (e + 1), 1e-6);

    /* RoPE: interleaved, pair 0 at a quarter turn per position (its rotation
     * averages to 0 over the 512 future positions), pair 1 not rotating. The
     * same pre-RoPE query (1, 1, 3, 0) at positions 1 and 2, given rotated:
     * mu = that query, Sigma = 0, mu' = (0, 0, 3, 0). k1 = e1: z = 0;
     * k2 = e3: z = 3/2. */
    const float inv_freq[2] = {(float)(M_PI / 2), 0.0f};
    float keys3[3 * HD] = {0, 0, 0, 0, /**/ 1, 0, 0, 0, /**/ 0, 0, 1, 0}, q3[3 * HD] = {0};
    for (int pos = 1; pos < 3; pos++) {
        const double th = (double)((float)pos * inv_freq[0]);
        q3[pos * HD + 0] = (float)(cos(th) - sin(th));
        q3[pos * HD + 1] = (float)(sin(th) + cos(th));
        q3[pos * HD + 2] = 3;
    }
    in = layer_f32(keys3, 3, 1, 1, NULL, 0);
    in.q_host = q3;
    in.n_q = 3;
    in.n_rot = 4;
    in.inv_freq_host = inv_freq;
    score("expected", &p, &in, out);
    const double e15 = exp(1.5);
    assert_float_equal(out[1], 1 / (1 + e15), 1e-5);
    assert_float_equal(out[2], e15 / (1 + e15), 1e-5);
    /* n <= n_sink is refused (kvpress asserts). */
    p.n_sink = 3;
    assert_int_equal(vkv_press_find("expected")->score_ref(&p, &in, out), VKV_ERR_ARG);
}

/* kvpress's last step, scores = (p + epsilon) ||v|| with use_vnorm and p
 * alone without it (epsilon then unused), on the first case above: p1 =
 * e / (e + 1), p2 = 1 / (e + 1), ||v1|| = 1, ||v2|| = 2 (e = exp(0.625)). */
static void expected_adds_epsilon_before_the_value_norm_and_drops_both_without_it(void **state)
{
    (void)state;
    float keys[3 * HD] = {5, 5, 5, 5, /**/ 1, 0, 0, 0, /**/ 0, 2, 0, 0};
    float q[3 * HD] = {7, 7, 7, 7, /**/ 2, 0, 0, 0, /**/ 0, 0, 0, 0}, out[3];
    vkv_press_params p = vkv_press_params_default(0.5f);
    assert_true(p.expected_epsilon == 0.0f && !p.expected_no_vnorm); /* kvpress's defaults */
    p.n_sink = 1;
    p.expected_epsilon = 0.25f;
    vkv_press_layer in = layer_f32(keys, 3, 1, 1, NULL, 0);
    in.q_host = q;
    in.n_q = 3;
    const double e = exp(0.625), p1 = e / (e + 1), p2 = 1 / (e + 1);
    score("expected", &p, &in, out);
    assert_true(isinf(out[0]) && out[0] > 0);
    assert_float_equal(out[1], (p1 + 0.25) * 1, 1e-6);
    assert_float_equal(out[2], (p2 + 0.25) * 2, 1e-6);
    p.expected_no_vnorm = true; /* epsilon stays 0.25 and is ignored */
    score("expected", &p, &in, out);
    assert_true(isinf(out[0]) && out[0] > 0);
    assert_float_equal(out[1], p1, 1e-6);
    assert_float_equal(out[2], p2, 1e-6);
}

static void kvzip_scores_the_largest_attention_from_the_repeat_queries(void **state)
{
    (void)state;
    /* Context of 4 tokens, prefix 1 (the sink gets 1), the pass repeats
     * [1, 4): queries at positions 4 and 5 see key 0 (sink), keys 1..3 and
     * the repeat keys 4.. up to themselves. Query head 0 has q = 0 (1/5 then
     * 1/6 everywhere); head 1 puts weight 4 on key 3 (1/2 then 4/9). The max
     * over the queries and the group: key 3 1/2, keys 1, 2 1/5. */
    float keys[6 * HD] = {0, 0, 0, 0, /**/ 0, 0, 0, 0, /**/ 0, 0, 0, 0, /**/ 1, 0, 0, 0, /**/ 0, 0, 0, 0, /**/ 0, 0, 0, 0};
    float q[2 * 2 * HD] = {0}, out[4];
    q[1 * HD] = q[3 * HD] = (float)(2 * log(4.0));
    vkv_press_params p = vkv_press_params_default(0.5f);
    vkv_press_layer in = layer_f32(keys, 4, 2, 1, NULL, 0);
    in.n_ctx = 6; /* the repeated keys sit after the context */
    in.prefix = 1;
    in.span0 = 1;
    in.span1 = 4;
    in.q_host = q;
    in.q_pos0 = 4;
    in.n_q = 2;
    score("kvzip", &p, &in, out);
    assert_float_equal(out[0], 1.0f, 0);
    assert_float_equal(out[1], 0.2, 1e-7);
    assert_float_equal(out[2], 0.2, 1e-7);
    assert_float_equal(out[3], 0.5, 1e-7);
    /* A later pass over [3, 4) after a prefix of 3: the first min(4, 3)
     * tokens are sinks (1), the softmax sees keys 0..2, key 3 and the repeat
     * keys: key 3 gets max(1/5, 4/8, 1/6, 4/9). */
    in.prefix = 3;
    in.span0 = 3;
    score("kvzip", &p, &in, out);
    assert_float_equal(out[0], 1.0f, 0);
    assert_float_equal(out[2], 1.0f, 0);
    assert_float_equal(out[3], 0.5, 1e-7);
    /* Without a prefix nothing is forced and tokens outside the pass stay 0. */
    in.prefix = 0;
    score("kvzip", &p, &in, out);
    assert_float_equal(out[0], 0.0f, 0);
    assert_float_equal(out[3], 0.5, 1e-7);
    assert_true(vkv_press_find("kvzip")->global_selection && vkv_press_find("kvzip")->repeat_pass);
}

static void kvzip_passes_chunk_the_context_after_its_prefix(void **state)
{
    (void)state;
    int32_t first[2] = {901, 902}, next[3] = {911, 912, 913}, suffix[1] = {920};
    vkv_kvzip_prompt kp = {first, 2, next, 3, suffix, 1, 3};
    enum { N = 5000 };
    static int32_t ctx[N], ids[3000];
    for (int i = 0; i < N; i++) ctx[i] = i;
    /* 4997 tokens after the prefix: chunks of 2048, 2048, 901 */
    assert_int_equal(vkv_kvzip_n_passes(&kp, N), 3);
    assert_int_equal(vkv_kvzip_max_pass_tokens(&kp, N), 3 + 8 + 1 + 2048);
    uint32_t n_ids, s0, s1;
    vkv_kvzip_pass(&kp, ctx, N, 0, ids, &n_ids, &s0, &s1);
    assert_int_equal(n_ids, 2 + 1 + 2048);
    assert_int_equal(s0, 3);
    assert_int_equal(s1, 3 + 2048);
    assert_int_equal(ids[0], 901);
    assert_int_equal(ids[2], 920);
    assert_int_equal(ids[3], 3);
    assert_int_equal(ids[n_ids - 1], 2050);
    vkv_kvzip_pass(&kp, ctx, N, 2, ids, &n_ids, &s0, &s1);
    assert_int_equal(n_ids, 3 + 8 + 1 + 901);
    assert_int_equal(s0, 3 + 4096);
    assert_int_equal(s1, N);
    assert_int_equal(ids[2], 913);
    assert_int_equal(ids[3], 3 + 4096 - 8); /* the previous chunk's last 8 ids */
    assert_int_equal(ids[10], 3 + 4096 - 1);
    assert_int_equal(ids[11], 920);
    assert_int_equal(ids[12], 3 + 4096);
    /* a context that fits one chunk; nothing after the prefix: no pass */
    assert_int_equal(vkv_kvzip_n_passes(&kp, 2051), 1);
    assert_int_equal(vkv_kvzip_n_passes(&kp, 2052), 2);
    assert_int_equal(vkv_kvzip_n_passes(&kp, 3), 0);
}

/* A SentencePiece vocabulary of byte tokens and ChatML's two control tokens,
 * with the "chatml" template or none. */
enum { V_IM_START = 259, V_IM_END, V_N };
static vkv_tokenizer *byte_vocab(const char *chat_template)
{
    static char bytes[256][7];
    const char *toks[V_N] = {"<unk>", "<s>", "</s>"};
    float scores[V_N] = {0};
    int32_t types[V_N] = {VKV_TOKEN_UNKNOWN, VKV_TOKEN_CONTROL, VKV_TOKEN_CONTROL};
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[3 + b] = bytes[b];
        types[3 + b] = VKV_TOKEN_BYTE;
    }
    toks[V_IM_START] = "<|im_start|>";
    toks[V_IM_END] = "<|im_end|>";
    types[V_IM_START] = types[V_IM_END] = VKV_TOKEN_CONTROL;
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_non_null(w);
    assert_int_equal(vkv_gguf_set_str(w, "general.architecture", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_str(w, "tokenizer.ggml.model", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, V_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.scores", VKV_GGUF_FLOAT32, scores, V_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "tokenizer.ggml.token_type", VKV_GGUF_INT32, types, V_N), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2), VKV_OK);
    assert_int_equal(vkv_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false), VKV_OK);
    if (chat_template) assert_int_equal(vkv_gguf_set_str(w, "tokenizer.chat_template", chat_template), VKV_OK);
    void *data;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
    vkv_gguf_writer_free(w);
    vkv_gguf *g;
    vkv_tokenizer *tok;
    assert_int_equal(vkv_gguf_open_memory(data, size, &g), VKV_OK);
    assert_int_equal(vkv_tokenizer_load(g, &tok), VKV_OK);
    vkv_gguf_close(g);
    free(data);
    return tok;
}

static void kvzip_prompt_follows_the_chat_template(void **state)
{
    (void)state;
    /* ChatML around "dummy context\n#...": prefix "<|im_start|>user\n" after
     * BOS (1 + 1 + 5 bytes), suffix "<|im_end|>\n<|im_start|>assistant\n". */
    vkv_tokenizer *tok = byte_vocab("chatml");
    vkv_kvzip_prompt kp;
    assert_int_equal(vkv_kvzip_prompt_make(tok, VKV_CHAT_CHATML, &kp), VKV_OK);
    assert_int_equal(kp.prefix, 7);
    const int32_t suffix[] = {V_IM_END, 3 + '\n', V_IM_START, 3 + 'a', 3 + 's', 3 + 's', 3 + 'i', 3 + 's', 3 + 't',
                              3 + 'a', 3 + 'n', 3 + 't', 3 + '\n'};
    assert_int_equal(kp.n_suffix, sizeof suffix / sizeof *suffix);
    assert_memory_equal(kp.suffix, suffix, sizeof suffix);
    /* plain text, byte by byte, spaces escaped to U+2581 (3 bytes) */
    const char *first = "\n\nRepeat the previous context exactly.";
    assert_int_equal(kp.n_first, strlen(first) + 2 * 4);
    for (uint32_t i = 0; i < 8; i++) assert_int_equal(kp.first[i], 3 + (unsigned char)first[i]);
    assert_int_equal(kp.n_next, strlen("\n\nRepeat the part of the previous context exactly, starting with") + 2 * 9);
    vkv_kvzip_prompt_free(&kp);
    /* Without the template: no prefix, suffix "\n". */
    assert_int_equal(vkv_kvzip_prompt_make(tok, VKV_CHAT_UNKNOWN, &kp), VKV_OK);
    assert_int_equal(kp.prefix, 0);
    assert_int_equal(kp.n_suffix, 1);
    assert_int_equal(kp.suffix[0], 3 + '\n');
    vkv_kvzip_prompt_free(&kp);
    /* Qwen3 with thinking off: the suffix goes on with the empty think block,
     * byte by byte (docs/ARCHITECTURE.md §1: the session passes its template). */
    assert_int_equal(vkv_kvzip_prompt_make(tok, VKV_CHAT_QWEN3, &kp), VKV_OK);
    assert_int_equal(kp.n_suffix, sizeof suffix / sizeof *suffix + strlen("<think>\n\n</think>\n\n"));
    assert_memory_equal(kp.suffix, suffix, sizeof suffix);
    vkv_kvzip_prompt_free(&kp);
    vkv_tokenizer_free(tok);
}

static void global_selection_evicts_exactly_int_n_pc_ties_by_position(void **state)
{
    (void)state;
    /* N = 8, p_c 0.5: exactly 4 go, as kvpress's top-k. Three scores tie at
     * 0.2 across the boundary: the earliest (row 0, position 2) stays. A
     * threshold rule (<= the 4th smallest) would evict all three: 5 of 8. */
    const float s[2 * 4] = {0.1f, 0.5f, 0.2f, 0.2f, /**/ 0.2f, 0.9f, 0.05f, 0.3f};
    uint32_t kept[2];
    assert_int_equal(vkv_global_select_counts_ref(s, 2, 4, 0.5, kept), VKV_OK);
    assert_int_equal(kept[0], 2);
    assert_int_equal(kept[1], 2);
    /* All equal: still exactly int(N p_c), the earliest positions kept. */
    const float flat[3 * 5] = {0};
    uint32_t kept3[3];
    assert_int_equal(vkv_global_select_counts_ref(flat, 3, 5, 0.6, kept3), VKV_OK);
    assert_int_equal(kept3[0], 5);
    assert_int_equal(kept3[1], 1);
    assert_int_equal(kept3[2], 0);
    /* int(8 * 0.01) = 0: kvpress's top-k of 0 evicts nothing */
    assert_int_equal(vkv_kv_n_evicted_global(8, 0.01), 0);
    assert_int_equal(vkv_global_select_counts_ref(s, 2, 4, 0.01, kept), VKV_OK);
    assert_int_equal(kept[0], 4);
    assert_int_equal(kept[1], 4);
    /* int(8 * 0.125) = 1: the lowest score (row 1, position 2) goes */
    assert_int_equal(vkv_global_select_counts_ref(s, 2, 4, 0.125, kept), VKV_OK);
    assert_int_equal(kept[0], 4);
    assert_int_equal(kept[1], 3);
    /* Python: int(1000 * 0.9) = 900 */
    assert_int_equal(vkv_kv_n_evicted_global(1000, 0.9), 900);
}

static void uniform_count_is_kvpress_int_of_n_times_one_minus_pc(void **state)
{
    (void)state;
    assert_int_equal(vkv_kv_n_kept(0.5, 1000), 500);
    assert_int_equal(vkv_kv_n_kept(0.25, 1000), 750);
    /* Python: int(1000 * (1 - 0.9)) = int(99.99999999999997) = 99. */
    assert_int_equal(vkv_kv_n_kept(0.9, 1000), 99);
    assert_int_equal(vkv_kv_n_kept(0.0, 7), 7);
    assert_int_equal(vkv_kv_n_kept(0.9, 3), 1); /* max(1, ...) */
    assert_int_equal(vkv_kv_n_kept(0.5, 0), 0);
}

static double pyramid_mean(const vkv_press_ops *ops, const vkv_press_params *p, uint32_t L, uint32_t n)
{
    double sum = 0;
    for (uint32_t l = 0; l < L; l++) sum += ops->n_kept(p, l, L, n);
    return sum / L;
}

static void pyramid_budgets_shrink_with_depth_and_average_n_times_one_minus_pc(void **state)
{
    (void)state;
    const vkv_press_ops *ops = vkv_press_find("pyramidkv");
    assert_non_null(ops->n_kept);
    vkv_press_params p = vkv_press_params_default(0.5f);
    /* n = 10000, p_c = 0.5: C - w = 5000, min = 250, max = 9750 (<= n - w). */
    assert_int_equal(ops->n_kept(&p, 0, 32, 10000), 9750);
    assert_int_equal(ops->n_kept(&p, 31, 32, 10000), 250);
    for (uint32_t l = 1; l < 32; l++) assert_true(ops->n_kept(&p, l, 32, 10000) <= ops->n_kept(&p, l - 1, 32, 10000));
    assert_float_equal(pyramid_mean(ops, &p, 32, 10000), 5000.0, 0);
    assert_float_equal(pyramid_mean(ops, &p, 5, 10000), 5000.0, 0);
    /* A fractional n (1 - p_c) = 5000.5: within the rounding. */
    assert_float_equal(pyramid_mean(ops, &p, 32, 10001), 5000.5, 0.5);
    /* One layer: the uniform count. */
    assert_int_equal(ops->n_kept(&p, 0, 1, 10000), 5000);
}

static void pyramid_clamps_the_top_budget_to_the_prefix(void **state)
{
    (void)state;
    const vkv_press_ops *ops = vkv_press_find("pyramidkv");
    vkv_press_params p = vkv_press_params_default(0.25f);
    /* C - w = 7500: max = 14625 > n - w = 9936, so max = 9936 and
     * min = 15000 - 9936 = 5064; the mean stays 7500. */
    assert_int_equal(ops->n_kept(&p, 0, 32, 10000), 9936);
    assert_int_equal(ops->n_kept(&p, 31, 32, 10000), 5064);
    assert_float_equal(pyramid_mean(ops, &p, 32, 10000), 7500.0, 0);
}

static void pyramid_falls_back_to_snapkv_when_the_pyramid_does_not_fit(void **state)
{
    (void)state;
    const vkv_press_ops *ops = vkv_press_find("pyramidkv");
    /* n = 1000, p_c = 0.9: min = 5 < w = 64, so kvpress keeps
     * round(n (1 - p_c)) on every layer: round(99.99999999999997) = 100,
     * one more than the uniform int() count. */
    vkv_press_params p = vkv_press_params_default(0.9);
    for (uint32_t l = 0; l < 8; l++) assert_int_equal(ops->n_kept(&p, l, 8, 1000), 100);
    /* round() is Python's half-to-even: 1002 * 0.25 = 250.5 -> 250. */
    p.compression_ratio = 0.75f;
    assert_int_equal(ops->n_kept(&p, 3, 8, 1002), 250);
}

static void topk_reference_breaks_ties_by_position(void **state)
{
    (void)state;
    /* NaN ranks as -inf, -0 equals +0, +inf first; ties: the earlier wins. */
    const float s[8] = {0.5f, NAN, INFINITY, 0.5f, -0.0f, 0.0f, -INFINITY, 0.5f};
    uint32_t m[8];
    assert_int_equal(vkv_ref_topk_select(s, 1, 8, NULL, 3, m), VKV_OK);
    const uint32_t want3[8] = {1, 0, 1, 1, 0, 0, 0, 0};
    assert_memory_equal(m, want3, sizeof m);
    assert_int_equal(vkv_ref_topk_select(s, 1, 8, NULL, 5, m), VKV_OK);
    const uint32_t want5[8] = {1, 0, 1, 1, 1, 0, 0, 1};
    assert_memory_equal(m, want5, sizeof m);
    assert_int_equal(vkv_ref_topk_select(s, 1, 8, NULL, 7, m), VKV_OK); /* -inf before NaN (earlier position) */
    const uint32_t want7[8] = {1, 1, 1, 1, 1, 1, 0, 1};
    assert_memory_equal(m, want7, sizeof m);
    const uint32_t ks[2] = {0, 99}; /* per row: none, all */
    const float two[2 * 8] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8};
    uint32_t m2[16];
    assert_int_equal(vkv_ref_topk_select(two, 2, 8, ks, 0, m2), VKV_OK);
    for (int j = 0; j < 8; j++) {
        assert_int_equal(m2[j], 0);
        assert_int_equal(m2[8 + j], 1);
    }
}

static void find_names_every_press_and_rejects_unknown_ones(void **state)
{
    (void)state;
    const vkv_press_ops *const *all = vkv_press_all();
    size_t count = 0;
    for (; all[count]; count++) assert_ptr_equal(vkv_press_find(all[count]->name), all[count]);
    assert_true(count >= 9);
    assert_null(vkv_press_find("h2o-but-misspelled"));
    assert_non_null(strstr(vkv_last_error(), "snapkv"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(knorm_scores_minus_the_key_norm),
        cmocka_unit_test(keydiff_scores_minus_the_cosine_to_the_mean_normalised_key),
        cmocka_unit_test(blockwise_keydiff_uses_the_mean_of_every_block_seen_so_far),
        cmocka_unit_test(streamingllm_keeps_the_sinks_and_the_most_recent_tokens),
        cmocka_unit_test(streamingllm_scores_gathered_positions),
        cmocka_unit_test(scorers_refuse_a_compression_ratio_outside_the_range),
        cmocka_unit_test(snapkv_pools_the_mean_window_attention_with_zero_padding),
        cmocka_unit_test(snapkv_weights_follow_the_causal_softmax),
        cmocka_unit_test(snapkv_budget_below_the_window_keeps_its_newest_tokens),
        cmocka_unit_test(snapkv_rejects_a_context_shorter_than_its_window),
        cmocka_unit_test(tova_averages_the_last_query_over_all_heads),
        cmocka_unit_test(observed_averages_the_attention_over_the_queries_that_see_a_token),
        cmocka_unit_test(expected_scores_the_gaussian_expected_attention_times_the_value_norm),
        cmocka_unit_test(expected_adds_epsilon_before_the_value_norm_and_drops_both_without_it),
        cmocka_unit_test(kvzip_scores_the_largest_attention_from_the_repeat_queries),
        cmocka_unit_test(kvzip_passes_chunk_the_context_after_its_prefix),
        cmocka_unit_test(kvzip_prompt_follows_the_chat_template),
        cmocka_unit_test(global_selection_evicts_exactly_int_n_pc_ties_by_position),
        cmocka_unit_test(uniform_count_is_kvpress_int_of_n_times_one_minus_pc),
        cmocka_unit_test(pyramid_budgets_shrink_with_depth_and_average_n_times_one_minus_pc),
        cmocka_unit_test(pyramid_clamps_the_top_budget_to_the_prefix),
        cmocka_unit_test(pyramid_falls_back_to_snapkv_when_the_pyramid_does_not_fit),
        cmocka_unit_test(topk_reference_breaks_ties_by_position),
        cmocka_unit_test(find_names_every_press_and_rejects_unknown_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
