/* Token sampling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "core/rng.h"
#include "infer/sampler.h"

static vkv_sampler *make(vkv_sampler_params p, int32_t n)
{
    vkv_sampler *s;
    assert_int_equal(vkv_sampler_create(&p, n, &s), VKV_OK);
    return s;
}

static void sampler_greedy_picks_the_lowest_id_among_ties(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 0;
    vkv_sampler *s = make(p, 5);
    float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    assert_int_equal(vkv_sampler_sample(s, logits), 1);
    vkv_sampler_free(s);
}

static void sampler_same_seed_gives_same_tokens(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0;
    float logits[100];
    for (int i = 0; i < 100; i++) logits[i] = (float)(i % 7) * 0.3f;
    int32_t a[50], b[50];
    vkv_sampler *s1 = make(p, 100), *s2 = make(p, 100);
    for (int i = 0; i < 50; i++) a[i] = vkv_sampler_sample(s1, logits);
    for (int i = 0; i < 50; i++) b[i] = vkv_sampler_sample(s2, logits);
    assert_memory_equal(a, b, sizeof a);
    p.seed++;
    vkv_sampler *s3 = make(p, 100);
    int differ = 0;
    for (int i = 0; i < 50; i++) differ += vkv_sampler_sample(s3, logits) != a[i];
    assert_true(differ > 0);
    vkv_sampler_free(s1);
    vkv_sampler_free(s2);
    vkv_sampler_free(s3);
}

static void sampler_top_k_1_is_greedy(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 5.0f;
    p.top_k = 1;
    vkv_sampler *s = make(p, 4);
    float logits[4] = {0.1f, 0.3f, 0.2f, 0.29f};
    for (int i = 0; i < 20; i++) assert_int_equal(vkv_sampler_sample(s, logits), 1);
    vkv_sampler_free(s);
}

static void sampler_top_p_and_min_p_cut_the_tail(void **state)
{
    (void)state;
    /* p = softmax([ln 0.6, ln 0.3, ln 0.1]) = 0.6, 0.3, 0.1 */
    float logits[3] = {-0.5108256f, -1.2039728f, -2.3025851f};
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.min_p = 0;
    p.top_p = 0.85f; /* keeps {0, 1} */
    vkv_sampler *s = make(p, 3);
    for (int i = 0; i < 200; i++) assert_int_not_equal(vkv_sampler_sample(s, logits), 2);
    vkv_sampler_free(s);
    p.top_p = 1.0f;
    p.min_p = 0.6f; /* floor 0.36: keeps only {0} */
    s = make(p, 3);
    for (int i = 0; i < 200; i++) assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_free(s);
}

static void sampler_repeat_penalty_demotes_recent_tokens(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 0;
    p.repeat_penalty = 2.0f;
    vkv_sampler *s = make(p, 3);
    float logits[3] = {1.0f, 0.8f, -1.0f};
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept(s, 0); /* 1.0 / 2 = 0.5 < 0.8 */
    assert_int_equal(vkv_sampler_sample(s, logits), 1);
    vkv_sampler_free(s);
}

static void sampler_rejects_bad_values(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    vkv_sampler *s = NULL;
    p.temperature = -1;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.top_p = 0;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.min_p = 1.5f;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.top_k = -2;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.repeat_penalty = 0;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.presence_penalty = 2.5f;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    p = vkv_sampler_defaults();
    p.frequency_penalty = -2.01f;
    assert_int_equal(vkv_sampler_create(&p, 10, &s), VKV_ERR_ARG);
    assert_null(s);
}

/* OpenAI's penalties count generated tokens only: the prompt's do not move them. */
static void sampler_presence_and_frequency_penalties_count_generated_tokens(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 0;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    vkv_sampler *s = make(p, 4);
    float logits[4] = {2.0f, 1.5f, 0.0f, -1.0f};
    vkv_sampler_accept(s, 0); /* a prompt token: no penalty */
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept_generated(s, 0); /* 2 - 0.25 - 0.5 = 1.25 < 1.5 */
    assert_int_equal(vkv_sampler_sample(s, logits), 1);
    vkv_sampler_accept_generated(s, 1); /* 1.5 - 0.75 = 0.75 < 1.25 */
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept_generated(s, 0); /* 2 - 0.5 - 0.5 = 1 > 0.75 */
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept_generated(s, 0); /* 2 - 0.75 - 0.5 = 0.75, a tie with token 1: the lower id */
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept_generated(s, 0); /* 0.5 < 0.75 */
    assert_int_equal(vkv_sampler_sample(s, logits), 1);
    vkv_sampler_free(s);
    /* a negative penalty favours repetition */
    p.presence_penalty = -2;
    p.frequency_penalty = 0;
    s = make(p, 4);
    vkv_sampler_accept_generated(s, 2); /* 0 + 2 = 2, a tie with token 0 */
    assert_int_equal(vkv_sampler_sample(s, logits), 0);
    vkv_sampler_accept_generated(s, 3); /* on flat: 2 and -0.5 + 2 = 1.5 */
    float flat[4] = {0, 0, 0, -0.5f};
    assert_int_equal(vkv_sampler_sample(s, flat), 2);
    vkv_sampler_free(s);
}

static void sampler_logit_bias_bans_and_forces(void **state)
{
    (void)state;
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 1;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    float logits[5] = {3.0f, 2.5f, 2.0f, 0.0f, -1.0f};
    vkv_logit_bias ban[2] = {{0, -100}, {1, -100}};
    p.logit_bias = ban;
    p.n_logit_bias = 2;
    vkv_sampler *s = make(p, 5);
    for (int i = 0; i < 300; i++) {
        int32_t id = vkv_sampler_sample(s, logits);
        assert_true(id >= 2);
    }
    vkv_sampler_free(s);
    vkv_logit_bias force = {4, 100};
    p.logit_bias = &force;
    p.n_logit_bias = 1;
    s = make(p, 5);
    for (int i = 0; i < 300; i++) assert_int_equal(vkv_sampler_sample(s, logits), 4);
    vkv_sampler_free(s);
    /* ids outside the vocabulary and biases outside [-100, 100] are refused */
    vkv_logit_bias outside = {5, 1};
    p.logit_bias = &outside;
    assert_int_equal(vkv_sampler_create(&p, 5, &s), VKV_ERR_ARG);
    vkv_logit_bias too_big = {1, 101};
    p.logit_bias = &too_big;
    assert_int_equal(vkv_sampler_create(&p, 5, &s), VKV_ERR_ARG);
    assert_null(s);
}

static void sampler_mask_keeps_to_allowed_tokens(void **state)
{
    (void)state;
    float logits[6] = {5.0f, 4.0f, 1.0f, 0.5f, 0.0f, 3.0f};
    bool allowed[6] = {false, false, true, false, true, false};
    vkv_sampler_params p = vkv_sampler_defaults();
    p.temperature = 0;
    vkv_sampler *s = make(p, 6);
    assert_int_equal(vkv_sampler_sample_masked(s, logits, allowed), 2);
    vkv_sampler_free(s);
    p.temperature = 1.5f;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    s = make(p, 6);
    int seen[6] = {0};
    for (int i = 0; i < 400; i++) seen[vkv_sampler_sample_masked(s, logits, allowed)]++;
    assert_int_equal(seen[0] + seen[1] + seen[3] + seen[5], 0);
    assert_true(seen[2] > 0 && seen[4] > 0);
    vkv_sampler_free(s);
}

static void log_softmax_top_matches_the_definition(void **state)
{
    (void)state;
    float logits[7] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 2.0f, -40.0f};
    double z = 0;
    for (int i = 0; i < 7; i++) z += exp(logits[i]);
    int32_t ids[4];
    float lp[4];
    double chosen = vkv_log_softmax_top(logits, 7, 4, 4, ids, lp);
    assert_true(fabs(chosen - (0.5 - log(z))) < 1e-12);
    const int32_t want[4] = {1, 3, 5, 0}; /* ties: the lower id first */
    for (int j = 0; j < 4; j++) {
        assert_int_equal(ids[j], want[j]);
        assert_true(fabs(lp[j] - (logits[want[j]] - log(z))) < 1e-6);
    }
    /* more alternatives than tokens: every token once */
    int32_t all[32];
    float all_lp[32];
    vkv_log_softmax_top(logits, 7, 0, 20, all, all_lp);
    assert_int_equal(all[6], 6);
    assert_true(all_lp[5] > all_lp[6]);
}

static const float *ref_keys;
static int ref_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ref_keys[x] != ref_keys[y]) return ref_keys[x] > ref_keys[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The sampler's distribution, by the definition (sort everything, cut at
 * top-k, top-p and min-p, renormalise), into want[n]. */
static void reference_distribution(const float *l, int32_t n, float T, int32_t top_k, float top_p, float min_p,
                                   double *want)
{
    int32_t *order = malloc(sizeof *order * (size_t)n);
    double *p = malloc(sizeof *p * (size_t)n);
    for (int32_t i = 0; i < n; i++) order[i] = i;
    ref_keys = l;
    qsort(order, (size_t)n, sizeof *order, ref_desc);
    int32_t k = top_k > 0 && top_k < n ? top_k : n, keep = k;
    double z = 0, cum = 0;
    for (int32_t i = 0; i < k; i++) z += p[i] = exp(((double)l[order[i]] - l[order[0]]) / T);
    for (int32_t i = 0; i < k; i++) p[i] /= z;
    for (int32_t i = 0; i < k; i++)
        if ((cum += p[i]) >= top_p) { keep = i + 1; break; }
    int32_t keep_min = 1;
    while (keep_min < keep && p[keep_min] >= min_p * p[0]) keep_min++;
    double total = 0;
    for (int32_t i = 0; i < keep_min; i++) total += p[i];
    for (int32_t i = 0; i < n; i++) want[i] = 0;
    for (int32_t i = 0; i < keep_min; i++) want[order[i]] = p[i] / total;
    free(order);
    free(p);
}

/* Only the head of the distribution is ordered (not the vocabulary): the
 * draws still follow the definition, and never leave its support. */
static void sampler_draws_follow_the_definition(void **state)
{
    (void)state;
    const int32_t n = 1000;
    float *l = malloc(sizeof *l * (size_t)n);
    vkv_rng g = vkv_rng_new(5);
    for (int32_t i = 0; i < n; i++) l[i] = (float)(4 * vkv_rng_unit(&g) * vkv_rng_unit(&g) * vkv_rng_unit(&g));
    l[17] = l[18] = 4.5f; /* a tie at the top */
    const struct { float T; int32_t top_k; float top_p, min_p; } cfg[] = {
        {1, 0, 1, 0}, {0.7f, 0, 0.8f, 0}, {1, 0, 1, 0.2f}, {1.3f, 50, 0.9f, 0}, {0.9f, 0, 0.95f, 0.05f}, {2, 0, 0.5f, 0},
    };
    double *want = malloc(sizeof *want * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        vkv_sampler_params p = vkv_sampler_defaults();
        p.temperature = cfg[c].T;
        p.top_k = cfg[c].top_k;
        p.top_p = cfg[c].top_p;
        p.min_p = cfg[c].min_p;
        p.seed = 100 + c;
        reference_distribution(l, n, p.temperature, p.top_k, p.top_p, p.min_p, want);
        vkv_sampler *s = make(p, n);
        const int draws = 12000;
        for (int32_t i = 0; i < n; i++) got[i] = 0;
        for (int d = 0; d < draws; d++) got[vkv_sampler_sample(s, l)] += 1.0 / draws;
        /* by rank buckets [2^b - 1, 2^(b+1) - 1) of the definition's order (per-token counts would be noise) */
        double bucket_want[16] = {0}, bucket_got[16] = {0};
        int32_t *rank = malloc(sizeof *rank * (size_t)n);
        for (int32_t i = 0; i < n; i++) rank[i] = i;
        ref_keys = l;
        qsort(rank, (size_t)n, sizeof *rank, ref_desc);
        for (int32_t r = 0; r < n; r++) {
            int32_t i = rank[r], b = 0;
            if (got[i] > 0 && want[i] == 0) fail_msg("config %zu drew token %d, outside the distribution", c, i);
            while (b < 15 && r + 1 >= (2 << b)) b++;
            bucket_want[b] += want[i];
            bucket_got[b] += got[i];
        }
        for (int b = 0; b < 16; b++)
            if (fabs(bucket_got[b] - bucket_want[b]) > 0.015)
                fail_msg("config %zu, ranks from %d: drew %.4f of the mass, the definition gives %.4f", c, (1 << b) - 1,
                         bucket_got[b], bucket_want[b]);
        free(rank);
        vkv_sampler_free(s);
    }
    free(l);
    free(want);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampler_greedy_picks_the_lowest_id_among_ties),
        cmocka_unit_test(sampler_same_seed_gives_same_tokens),
        cmocka_unit_test(sampler_top_k_1_is_greedy),
        cmocka_unit_test(sampler_top_p_and_min_p_cut_the_tail),
        cmocka_unit_test(sampler_repeat_penalty_demotes_recent_tokens),
        cmocka_unit_test(sampler_rejects_bad_values),
        cmocka_unit_test(sampler_presence_and_frequency_penalties_count_generated_tokens),
        cmocka_unit_test(sampler_logit_bias_bans_and_forces),
        cmocka_unit_test(sampler_mask_keeps_to_allowed_tokens),
        cmocka_unit_test(log_softmax_top_matches_the_definition),
        cmocka_unit_test(sampler_draws_follow_the_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
