/* Token sampling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

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
    assert_null(s);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
