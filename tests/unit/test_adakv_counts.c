/* AdaKV's head-adaptive counts (press/adakv.c, docs/ARCHITECTURE.md §2) on
 * the host: the safeguard, the per-layer selection and VECTOR's layer pool
 * over the per-head budgets. Every layer keeps the uniform total, each head
 * at least int(n_kept * 0.20), ties go to the earlier (head, position).
 * And CriticalKV's two stages (press/critical.c) on a case worked by hand,
 * and kvpress's evaluation registry's ExpectedAttention compositions
 * (adakv-expected, critical-expected, critical-adakv-expected) over the
 * ExpectedAttention scores of the parameters the registry gives them.
 * No GPU is used: score_ref and the references read host copies. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kvlayout/kv_counts.h"
#include "kvlayout/kv_layout.h"
#include "press/press.h"
#include "ref/ref_attn.h"
#include "ref/ref_pool.h"
#include "ref/ref_select.h"

#define H 4
#define N 60
#define HD 4

static uint32_t n_safe_of(double p_c) { return (uint32_t)(vkv_kv_n_kept(p_c, N) * 0.20); }

/* Deterministic scores [H, N]: head 0 far above the others, head 3 far below. */
static void skewed_scores(float *s, uint32_t seed)
{
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t j = 0; j < N; j++) {
            seed = seed * 1103515245u + 12345u;
            s[h * N + j] = (float)((seed >> 8) % 1000) / 1000.0f + (h == 0 ? 10.0f : h == 3 ? -10.0f : 0.0f);
        }
}

static void layer_keeps_the_uniform_total_and_every_head_its_safeguard(void **state)
{
    (void)state;
    const double ratios[] = {0.3, 0.5, 0.75, 0.9};
    float raw[H * N], safe[H * N];
    uint32_t kept[H];
    for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
        const uint32_t n_kept = vkv_kv_n_kept(ratios[r], N), n_safe = n_safe_of(ratios[r]);
        skewed_scores(raw, 7 + (uint32_t)r);
        assert_int_equal(vkv_ref_adakv_safeguard(raw, H, N, n_safe, safe), VKV_OK);
        assert_int_equal(vkv_ref_select_counts(safe, H, N, H * n_kept, kept), VKV_OK);
        uint32_t total = 0;
        for (uint32_t h = 0; h < H; h++) {
            total += kept[h];
            assert_true(kept[h] >= n_safe);
        }
        assert_int_equal(total, H * n_kept);
        /* head 3's scores are below every other head's: it keeps its safeguard alone */
        assert_int_equal(kept[3], n_safe);
        /* head 0's are above: it keeps all it can */
        assert_int_equal(kept[0], H * n_kept - (H - 1) * n_safe < N ? H * n_kept - (H - 1) * n_safe : N);
    }
}

/* The safeguard forces each row's n_safe highest scores to +inf (ties by
 * position) and clamps the rest below, SnapKV's +inf window included. */
static void safeguard_forces_each_heads_top_and_clamps_the_rest(void **state)
{
    (void)state;
    float raw[2 * 5] = {1, 3, 3, INFINITY, 0, /**/ 2, 2, 2, 2, NAN};
    float out[2 * 5];
    assert_int_equal(vkv_ref_adakv_safeguard(raw, 2, 5, 2, out), VKV_OK);
    assert_true(isinf(out[3]) && out[3] > 0); /* the row's highest */
    assert_true(isinf(out[1]) && out[1] > 0); /* 3 at position 1 beats 3 at position 2 */
    assert_float_equal(out[2], 3.0f, 0);
    assert_float_equal(out[0], 1.0f, 0);
    assert_true(isinf(out[5]) && isinf(out[6])); /* all tied: the earliest two */
    assert_float_equal(out[7], 2.0f, 0);
    assert_true(isinf(out[9]) && out[9] < 0); /* NaN ranks last */
    /* n_safe 0: nothing forced, an +inf clamped to the largest float */
    assert_int_equal(vkv_ref_adakv_safeguard(raw, 2, 5, 0, out), VKV_OK);
    assert_float_equal(out[3], 3.4028234663852886e38f, 0);
}

/* All scores tied: the layer's budget goes to the earlier head, after every
 * head's safeguard. n = 10, p_c 0.5: n_kept 5, n_safe 1, 10 kept in all. */
static void ties_go_to_the_earlier_head_and_position(void **state)
{
    (void)state;
    float raw[2 * 10], safe[2 * 10];
    uint32_t kept[2], mask[2 * 10];
    for (int i = 0; i < 20; i++) raw[i] = 0.5f;
    const uint32_t n_kept = vkv_kv_n_kept(0.5, 10), n_safe = (uint32_t)(n_kept * 0.20);
    assert_int_equal(n_safe, 1);
    assert_int_equal(vkv_ref_adakv_safeguard(raw, 2, 10, n_safe, safe), VKV_OK);
    assert_int_equal(vkv_ref_select_counts(safe, 2, 10, 2 * n_kept, kept), VKV_OK);
    assert_int_equal(kept[0], 9);
    assert_int_equal(kept[1], 1);
    /* each head's kept set is its own top kept[h]: positions 0.. of head 0, position 0 of head 1 */
    assert_int_equal(vkv_ref_topk_select(safe, 2, 10, kept, 0, mask), VKV_OK);
    for (int j = 0; j < 10; j++) {
        assert_int_equal(mask[j], j < 9);
        assert_int_equal(mask[10 + j], j == 0);
    }
}

/* Through the press table: adakv-keydiff's score_ref is KeyDiff's scores
 * with each head's n_safe highest forced to +inf. */
static void adakv_keydiff_forces_the_safeguard_on_keydiffs_scores(void **state)
{
    (void)state;
    const vkv_press_ops *ada = vkv_press_find("adakv-keydiff"), *kd = vkv_press_find("keydiff");
    assert_non_null(ada);
    assert_true(ada->layer_selection && !ada->n_kept && !ada->global_selection);
    float keys[H * N * HD], inner[H * N], got[H * N];
    uint32_t seed = 3;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        seed = seed * 1103515245u + 12345u;
        keys[i] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
    }
    vkv_press_params p = vkv_press_params_default(0.75);
    vkv_press_layer in = {.layer = 0, .n_layer = 1, .n = N, .n_head = H, .n_kv_head = H, .head_dim = HD, .n_ctx = N,
                          .kv_type = VKV_F32, .k_host = keys, .v_host = keys};
    assert_int_equal(kd->score_ref(&p, &in, inner), VKV_OK);
    assert_int_equal(ada->score_ref(&p, &in, got), VKV_OK);
    const uint32_t n_safe = n_safe_of(0.75);
    uint32_t mask[H * N];
    assert_int_equal(vkv_ref_topk_select(inner, H, N, NULL, n_safe, mask), VKV_OK);
    for (uint32_t i = 0; i < H * N; i++) {
        if (mask[i]) assert_true(isinf(got[i]) && got[i] > 0);
        else assert_float_equal(got[i], inner[i], 0);
    }
}

/* VECTOR's pool over AdaKV's per-head budgets (docs/ARCHITECTURE.md §2):
 * the default and the paper's scope are the layer; each layer's pool holds
 * H n_kept + a_S tokens and approximates 2 a_S, a_S = floor(p_a H n): the
 * uniform case's H (n_kept + a) and 2 H a when p_a n is a whole number (p_c
 * 0.5 at n = 60), up to the floor otherwise (0.75: a_S 30, H a 28); each
 * head's pool contains its own kept set. */
static void layer_pool_keeps_the_uniform_totals_over_per_head_budgets(void **state)
{
    (void)state;
    const vkv_press_ops *ada = vkv_press_find("adakv-snapkv");
    assert_non_null(ada);
    assert_int_equal(vkv_press_pool_scope(ada, VKV_POOL_DEFAULT), VKV_POOL_LAYER);
    assert_int_equal(vkv_press_paper_pool_scope(ada), VKV_POOL_LAYER);
    assert_int_equal(vkv_press_pool_scope(ada, VKV_POOL_ROW), VKV_POOL_ROW);
    const double ratios[] = {0.5, 0.75};
    enum { L = 2 };
    float raw[H * N], scores[L * H * N], eps[L * H * N];
    uint32_t kept[L * H], mask[L * H * N];
    uint8_t tiers[L * H * N];
    for (size_t r = 0; r < 2; r++) {
        const double p_c = ratios[r], p_a = vkv_kv_default_pa(p_c);
        const uint32_t n_kept = vkv_kv_n_kept(p_c, N);
        for (uint32_t l = 0; l < L; l++) {
            skewed_scores(raw, 11 + l);
            assert_int_equal(vkv_ref_adakv_safeguard(raw, H, N, n_safe_of(p_c), scores + l * H * N), VKV_OK);
            assert_int_equal(vkv_ref_select_counts(scores + l * H * N, H, N, H * n_kept, kept + l * H), VKV_OK);
        }
        for (uint32_t i = 0; i < L * H * N; i++) eps[i] = (float)((i * 37u) % 101u);
        assert_int_equal(vkv_ref_topk_select(scores, L * H, N, kept, 0, mask), VKV_OK);
        assert_int_equal(vkv_ref_pool_allocate(scores, eps, kept, L, H, N, p_a, true, VKV_POOL_LAYER, tiers), VKV_OK);
        const vkv_tier_counts layer = vkv_kv_tier_counts(H * N, H * n_kept, p_a, true);
        const vkv_tier_counts row = vkv_kv_tier_counts(N, n_kept, p_a, true);
        assert_int_equal(layer.a, r == 0 ? H * row.a : 30);
        for (uint32_t l = 0; l < L; l++) {
            uint32_t pool = 0, apx = 0;
            for (uint32_t i = l * H * N; i < (l + 1) * H * N; i++) {
                pool += tiers[i] != VKV_TIER_EVICTED;
                apx += tiers[i] == VKV_TIER_APPROXIMATED;
                if (mask[i]) assert_int_not_equal(tiers[i], VKV_TIER_EVICTED);
            }
            assert_int_equal(pool, layer.pool);
            assert_int_equal(apx, layer.approximated);
            if (r == 0) assert_int_equal(pool, H * row.pool);
        }
    }
}

/* critical-keydiff on one KV head of two query heads, head_dim 4, W_o of two
 * rows, the first summing dims 0 and 1 of head 0, the second reading dim 2
 * of head 1: vnorm = (|v0 + v1| + |v2|) / 2. The first int((1 - p_c) n 0.5) KeyDiff scores
 * are forced (+inf), the others are (keydiff + 1e-4) vnorm. */
static void critical_keydiff_two_stages_by_hand(void **state)
{
    (void)state;
    enum { n = 8 };
    float keys[n * HD], vals[n * HD], inner[n], got[n], wo[2 * 2 * HD] = {0};
    for (int i = 0; i < n * HD; i++) {
        keys[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
        vals[i] = (float)((i * 5) % 13) / 4.0f - 1.5f;
    }
    wo[0] = 1;              /* row 0: head 0 dim 0 */
    wo[1] = 1;              /* row 0: head 0 dim 1 */
    wo[2 * HD + HD + 2] = 1; /* row 1: head 1 dim 2 */
    const vkv_press_ops *crit = vkv_press_find("critical-keydiff"), *kd = vkv_press_find("keydiff");
    assert_non_null(crit);
    assert_true(crit->needs_wo && !crit->layer_selection);
    vkv_press_params p = vkv_press_params_default(0.5);
    vkv_press_layer in = {.layer = 0, .n_layer = 1, .n = n, .n_head = 2, .n_kv_head = 1, .head_dim = HD, .n_ctx = n,
                          .kv_type = VKV_F32, .k_host = keys, .v_host = vals};
    assert_int_equal(crit->score_ref(&p, &in, got), VKV_ERR_ARG); /* no W_o */
    in.n_embd = 2;
    in.wo_host = wo;
    assert_int_equal(kd->score_ref(&p, &in, inner), VKV_OK);
    assert_int_equal(crit->score_ref(&p, &in, got), VKV_OK);
    const uint32_t first = (uint32_t)((1 - 0.5) * n * 0.5); /* 2 */
    uint32_t mask[n], forced = 0;
    assert_int_equal(vkv_ref_topk_select(inner, 1, n, NULL, first, mask), VKV_OK);
    for (int j = 0; j < n; j++) {
        if (mask[j]) {
            forced++;
            assert_true(isinf(got[j]) && got[j] > 0);
            continue;
        }
        const float *v = vals + j * HD;
        const double vnorm = (fabs(v[0] + v[1]) + fabs(v[2])) / 2;
        assert_float_equal(got[j], (float)((inner[j] + 1e-4) * vnorm), 1e-5);
    }
    assert_int_equal(forced, 2);
}

/* critical-adakv-keydiff: AdaKV's budgets b_h on KeyDiff's safeguarded
 * scores (the layer's total H n_kept, each head at least its safeguard), and
 * exactly b_h forced scores per head, among them its int(b_h 0.5) highest
 * safeguarded ones (the first stage). */
static void critical_adakv_keeps_adakvs_budgets_and_its_first_stage(void **state)
{
    (void)state;
    enum { heads = 2, n = 40, n_embd = 3 };
    float keys[heads * n * HD], vals[heads * n * HD], wo[n_embd * heads * HD], inner[heads * n], safe[heads * n];
    float got[heads * n];
    uint32_t seed = 5;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        seed = seed * 1103515245u + 12345u;
        keys[i] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f + (i < n * HD ? 0.0f : 0.7f); /* head 1 skewed */
        seed = seed * 1103515245u + 12345u;
        vals[i] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
    }
    for (size_t i = 0; i < sizeof wo / sizeof *wo; i++) wo[i] = (float)((i * 7) % 5) - 2.0f;
    const vkv_press_ops *ca = vkv_press_find("critical-adakv-keydiff"), *kd = vkv_press_find("keydiff");
    assert_non_null(ca);
    assert_true(ca->needs_wo && ca->layer_selection);
    const double p_c = 0.75;
    vkv_press_params p = vkv_press_params_default(p_c);
    vkv_press_layer in = {.layer = 0, .n_layer = 1, .n = n, .n_head = heads, .n_kv_head = heads, .head_dim = HD,
                          .n_ctx = n, .kv_type = VKV_F32, .k_host = keys, .v_host = vals, .n_embd = n_embd,
                          .wo_host = wo};
    assert_int_equal(kd->score_ref(&p, &in, inner), VKV_OK);
    assert_int_equal(ca->score_ref(&p, &in, got), VKV_OK);
    const uint32_t n_kept = vkv_kv_n_kept(p_c, n), n_safe = (uint32_t)(n_kept * 0.20);
    uint32_t budget[heads], first[heads], mask[heads * n];
    assert_int_equal(vkv_ref_adakv_safeguard(inner, heads, n, n_safe, safe), VKV_OK);
    assert_int_equal(vkv_ref_select_counts(safe, heads, n, heads * n_kept, budget), VKV_OK);
    assert_int_equal(budget[0] + budget[1], heads * n_kept);
    for (uint32_t h = 0; h < heads; h++) first[h] = budget[h] / 2;
    assert_int_equal(vkv_ref_topk_select(safe, heads, n, first, 0, mask), VKV_OK);
    for (uint32_t h = 0; h < heads; h++) {
        uint32_t forced = 0;
        for (uint32_t j = 0; j < n; j++) {
            const float x = got[h * n + j];
            forced += isinf(x) && x > 0;
            if (mask[h * n + j]) assert_true(isinf(x) && x > 0);
        }
        assert_true(budget[h] >= n_safe);
        assert_int_equal(forced, budget[h]);
    }
    /* the driver's layer selection keeps exactly those */
    uint32_t kept[heads];
    assert_int_equal(vkv_ref_select_counts(got, heads, n, heads * n_kept, kept), VKV_OK);
    assert_memory_equal(kept, budget, sizeof kept);
}

/* An ExpectedAttention layer: kvh KV heads of 2 query heads each, head_dim
 * HD, n tokens, no RoPE (n_rot 0), every query on the host, values of
 * different norms; W_o [n_embd = 3, 2 kvh HD] for CriticalKV. */
enum { EXP_N = 40, EXP_KVH = 2, EXP_HEADS = 2 * EXP_KVH, EXP_EMBD = 3 };
typedef struct expected_case {
    float keys[EXP_KVH * EXP_N * HD], vals[EXP_KVH * EXP_N * HD], q[EXP_N * EXP_HEADS * HD];
    float wo[EXP_EMBD * EXP_HEADS * HD];
    vkv_press_layer in;
} expected_case;

static void expected_case_make(expected_case *c, uint32_t seed)
{
    for (size_t i = 0; i < sizeof c->keys / sizeof *c->keys; i++) {
        seed = seed * 1103515245u + 12345u;
        c->keys[i] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
        seed = seed * 1103515245u + 12345u;
        c->vals[i] = ((float)((seed >> 8) % 2000) / 1000.0f - 1.0f) * (float)(1 + (i / HD) % 5);
    }
    for (size_t i = 0; i < sizeof c->q / sizeof *c->q; i++) {
        seed = seed * 1103515245u + 12345u;
        c->q[i] = (float)((seed >> 8) % 2000) / 500.0f - 2.0f + (i % HD == 0 ? 1.5f : 0.0f);
    }
    for (size_t i = 0; i < sizeof c->wo / sizeof *c->wo; i++) c->wo[i] = (float)((i * 7) % 5) - 2.0f;
    c->in = (vkv_press_layer){.layer = 0, .n_layer = 1, .n = EXP_N, .n_head = EXP_HEADS, .n_kv_head = EXP_KVH,
                              .head_dim = HD, .n_ctx = EXP_N, .kv_type = VKV_F32, .k_host = c->keys,
                              .v_host = c->vals, .q_host = c->q, .q_pos0 = 0, .n_q = EXP_N, .n_embd = EXP_EMBD,
                              .wo_host = c->wo};
}

/* ExpectedAttention's scores with the given epsilon / value norms. */
static void expected_scores(const vkv_press_params *base, const vkv_press_layer *in, float eps, bool no_vnorm,
                            float *out)
{
    vkv_press_params p = *base;
    p.expected_epsilon = eps;
    p.expected_no_vnorm = no_vnorm;
    assert_int_equal(vkv_press_find("expected")->score_ref(&p, in, out), VKV_OK);
}

/* kvpress's registry's "expected_attention": AdaKVPress(ExpectedAttentionPress(epsilon=1e-2)).
 * adakv-expected's scores are AdaKV's safeguard over ExpectedAttention's
 * (p + 1e-2) ||v||, whatever epsilon / use_vnorm the caller's parameters hold;
 * the plain ExpectedAttention's (epsilon 0) give other scores. */
static void adakv_expected_is_adakv_over_expected_attention_with_epsilon_1e2(void **state)
{
    (void)state;
    static expected_case c;
    expected_case_make(&c, 17);
    const vkv_press_ops *ada = vkv_press_find("adakv-expected");
    assert_non_null(ada);
    assert_true(ada->layer_selection && !ada->needs_wo && ada->capture_gpu && ada->state_bytes && !ada->window);
    assert_int_equal(ada->pool_scope, VKV_POOL_LAYER);
    const double p_c = 0.75;
    vkv_press_params p = vkv_press_params_default(p_c);
    float inner[EXP_KVH * EXP_N], want[EXP_KVH * EXP_N], got[EXP_KVH * EXP_N];
    expected_scores(&p, &c.in, 1e-2f, false, inner);
    assert_int_equal(vkv_ref_adakv_safeguard(inner, EXP_KVH, EXP_N, (uint32_t)(vkv_kv_n_kept(p_c, EXP_N) * 0.20), want),
                     VKV_OK);
    const float eps_given[] = {0.0f, 0.5f, 0.0f};
    const bool no_vnorm_given[] = {false, false, true};
    for (int t = 0; t < 3; t++) {
        p.expected_epsilon = eps_given[t];
        p.expected_no_vnorm = no_vnorm_given[t];
        assert_int_equal(ada->score_ref(&p, &c.in, got), VKV_OK);
        assert_memory_equal(got, want, sizeof got);
    }
    /* the capture's state is ExpectedAttention's */
    assert_int_equal(ada->state_bytes(&p, &c.in), vkv_press_find("expected")->state_bytes(&p, &c.in));
    /* epsilon changes the scores: without it the non-forced ones differ */
    float plain[EXP_KVH * EXP_N];
    expected_scores(&p, &c.in, 0.0f, false, plain);
    size_t differ = 0;
    for (size_t i = 0; i < EXP_KVH * EXP_N; i++) differ += isfinite(inner[i]) && plain[i] != inner[i];
    assert_true(differ > EXP_N);
}

/* kvpress's registry's "critical_expected_attention":
 * CriticalKVPress(ExpectedAttentionPress(use_vnorm=False)). With inner =
 * ExpectedAttention's expected attention alone (sinks +inf), each head's
 * int((1 - p_c) n 0.5) highest inner scores are forced and every other is
 * (inner + 1e-4) vnorm, vnorm the projected value norm. */
static void critical_expected_reweights_expected_attention_without_the_value_norm(void **state)
{
    (void)state;
    static expected_case c;
    expected_case_make(&c, 29);
    const vkv_press_ops *crit = vkv_press_find("critical-expected");
    assert_non_null(crit);
    assert_true(crit->needs_wo && !crit->layer_selection && crit->capture_gpu && crit->state_bytes && !crit->window);
    const double p_c = 0.5;
    vkv_press_params p = vkv_press_params_default(p_c);
    p.expected_epsilon = 0.3f; /* ignored: the registry's inner press has no value norms */
    float inner[EXP_KVH * EXP_N], got[EXP_KVH * EXP_N], with_vnorm[EXP_KVH * EXP_N];
    expected_scores(&p, &c.in, 0.0f, true, inner);
    expected_scores(&p, &c.in, 0.0f, false, with_vnorm);
    assert_int_equal(crit->score_ref(&p, &c.in, got), VKV_OK);
    const uint32_t first = (uint32_t)((1 - p_c) * EXP_N * 0.5); /* 10 */
    uint32_t mask[EXP_KVH * EXP_N];
    assert_int_equal(vkv_ref_topk_select(inner, EXP_KVH, EXP_N, NULL, first, mask), VKV_OK);
    size_t differ = 0;
    for (uint32_t h = 0; h < EXP_KVH; h++) {
        uint32_t forced = 0;
        for (uint32_t j = 0; j < EXP_N; j++) {
            const size_t i = (size_t)h * EXP_N + j;
            if (mask[i] || isinf(inner[i])) { /* the first stage and the sinks */
                forced++;
                assert_true(isinf(got[i]) && got[i] > 0);
                continue;
            }
            const double vnorm = vkv_ref_projected_value_norm(VKV_F32, c.vals, EXP_N, HD, EXP_HEADS, EXP_KVH, EXP_EMBD,
                                                              c.wo, h, j);
            assert_float_equal(got[i], (float)((inner[i] + 1e-4) * vnorm), 1e-6 * fabs(got[i]) + 1e-12);
            differ += fabsf(got[i] - (float)((with_vnorm[i] + 1e-4) * vnorm)) > 1e-6f * fabsf(got[i]);
        }
        assert_int_equal(forced, first); /* the 4 sinks (+inf) are 4 of the first stage's 10 */
    }
    assert_true(differ > 0);
}

/* kvpress's registry's "critical_adakv_expected_attention":
 * CriticalAdaKVPress(ExpectedAttentionPress(use_vnorm=False)). AdaKV's
 * budgets b_h from the safeguarded expected attention (without value norms),
 * exactly b_h forced scores per head among which its int(b_h 0.5) highest
 * safeguarded ones; the caller's epsilon / use_vnorm change nothing. */
static void critical_adakv_expected_keeps_budgets_of_expected_attention_without_the_value_norm(void **state)
{
    (void)state;
    static expected_case c;
    expected_case_make(&c, 41);
    const vkv_press_ops *ca = vkv_press_find("critical-adakv-expected");
    assert_non_null(ca);
    assert_true(ca->needs_wo && ca->layer_selection && ca->capture_gpu && ca->state_bytes && !ca->window);
    assert_int_equal(ca->pool_scope, VKV_POOL_LAYER);
    const double p_c = 0.75;
    vkv_press_params p = vkv_press_params_default(p_c);
    float inner[EXP_KVH * EXP_N], safe[EXP_KVH * EXP_N], got[EXP_KVH * EXP_N], again[EXP_KVH * EXP_N];
    expected_scores(&p, &c.in, 0.0f, true, inner);
    assert_int_equal(ca->score_ref(&p, &c.in, got), VKV_OK);
    const uint32_t n_kept = vkv_kv_n_kept(p_c, EXP_N), n_safe = (uint32_t)(n_kept * 0.20);
    uint32_t budget[EXP_KVH], first[EXP_KVH], mask[EXP_KVH * EXP_N], kept[EXP_KVH];
    assert_int_equal(vkv_ref_adakv_safeguard(inner, EXP_KVH, EXP_N, n_safe, safe), VKV_OK);
    assert_int_equal(vkv_ref_select_counts(safe, EXP_KVH, EXP_N, EXP_KVH * n_kept, budget), VKV_OK);
    for (uint32_t h = 0; h < EXP_KVH; h++) first[h] = budget[h] / 2;
    assert_int_equal(vkv_ref_topk_select(safe, EXP_KVH, EXP_N, first, 0, mask), VKV_OK);
    for (uint32_t h = 0; h < EXP_KVH; h++) {
        uint32_t forced = 0;
        for (uint32_t j = 0; j < EXP_N; j++) {
            const float x = got[h * EXP_N + j];
            forced += isinf(x) && x > 0;
            if (mask[h * EXP_N + j]) assert_true(isinf(x) && x > 0);
        }
        assert_true(budget[h] >= n_safe);
        assert_int_equal(forced, budget[h]);
    }
    assert_int_equal(vkv_ref_select_counts(got, EXP_KVH, EXP_N, EXP_KVH * n_kept, kept), VKV_OK);
    assert_memory_equal(kept, budget, sizeof kept);
    p.expected_epsilon = 0.5f;
    p.expected_no_vnorm = false;
    assert_int_equal(ca->score_ref(&p, &c.in, again), VKV_OK);
    assert_memory_equal(again, got, sizeof got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_keeps_the_uniform_total_and_every_head_its_safeguard),
        cmocka_unit_test(safeguard_forces_each_heads_top_and_clamps_the_rest),
        cmocka_unit_test(ties_go_to_the_earlier_head_and_position),
        cmocka_unit_test(adakv_keydiff_forces_the_safeguard_on_keydiffs_scores),
        cmocka_unit_test(layer_pool_keeps_the_uniform_totals_over_per_head_budgets),
        cmocka_unit_test(critical_keydiff_two_stages_by_hand),
        cmocka_unit_test(critical_adakv_keeps_adakvs_budgets_and_its_first_stage),
        cmocka_unit_test(adakv_expected_is_adakv_over_expected_attention_with_epsilon_1e2),
        cmocka_unit_test(critical_expected_reweights_expected_attention_without_the_value_norm),
        cmocka_unit_test(critical_adakv_expected_keeps_budgets_of_expected_attention_without_the_value_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
