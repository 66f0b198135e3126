/* The tier decision of compression during generation (src/kv/decode_select.c):
 * demote only, VECTOR's counts, the byte bound, ties by position; and the
 * two decoding rules' arithmetic: kvpress's step counter and each rule's
 * target. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kv/decode_select.h"
#include "kvlayout/kv_layout.h"

enum { R = VKV_TIER_RETAINED, A = VKV_TIER_APPROXIMATED, E = VKV_TIER_EVICTED };

static void select8(const float *scores, const float *eps, const uint8_t *tier, uint32_t budget, double pa, bool vector,
                    uint8_t *out, uint32_t *n_ret, uint32_t *n_apx)
{
    static const int32_t pos[8] = {0, 3, 5, 9, 10, 11, 40, 41};
    uint32_t scratch[16];
    vkv_decode_head h = {8, scores, eps, pos, tier};
    vkv_decode_select(&h, budget, pa, vector, scratch, out, n_ret, n_apx);
}

/* Without VECTOR: the top `budget` scores, ties to the earlier position. */
static void baseline_keeps_top(void **state)
{
    (void)state;
    const float s[8] = {5, 1, 3, 3, 9, NAN, 2, 8};
    const float e[8] = {0};
    const uint8_t t[8] = {R, R, R, R, R, R, R, R};
    uint8_t out[8];
    uint32_t r, a;
    select8(s, e, t, 4, 0, false, out, &r, &a);
    const uint8_t want[8] = {R, E, R, E, R, E, E, R}; /* 9, 8, 5, then 3 at position 5 before position 9 */
    assert_memory_equal(out, want, 8);
    assert_int_equal(r, 4);
    assert_int_equal(a, 0);
}

/* VECTOR: pool K + a, the 2a lowest residuals approximated; keys K + a, values K - a. */
static void vector_counts_and_residuals(void **state)
{
    (void)state;
    const float s[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    const float e[8] = {9, 1, 8, 2, 7, 0, 0, 0};
    const uint8_t t[8] = {R, R, R, R, R, R, R, R};
    uint8_t out[8];
    uint32_t r, a;
    select8(s, e, t, 4, 0.125, true, out, &r, &a); /* a = 1: pool 5, 2 approximated */
    const uint8_t want[8] = {R, A, R, A, R, E, E, E};
    assert_memory_equal(out, want, 8);
    assert_int_equal(r, 3);
    assert_int_equal(a, 2);
}

/* Demote only: approximated pool tokens stay approximated, even past 2a; the rows held stay under 2K. */
static void approximated_never_retained(void **state)
{
    (void)state;
    const float s[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    const float e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t t[8] = {A, A, A, R, R, A, R, R};
    uint8_t out[8];
    uint32_t r, a;
    select8(s, e, t, 4, 0.125, true, out, &r, &a);
    const uint8_t want[8] = {A, A, A, R, R, E, E, E}; /* 3 forced > 2a = 2 */
    assert_memory_equal(out, want, 8);
    assert_int_equal(a, 3);
    assert_int_equal(r, 2);
    assert_true(2 * r + a <= 2 * 4);
    for (int j = 0; j < 8; j++) assert_false(t[j] == A && out[j] == R);
}

/* Fewer tokens than the budget: everything stays (a = 0: no room to relax). */
static void under_budget_keeps_all(void **state)
{
    (void)state;
    const float s[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const float e[8] = {0};
    const uint8_t t[8] = {R, A, R, R, R, R, R, R};
    uint8_t out[8];
    uint32_t r, a;
    select8(s, e, t, 100, 0.25, true, out, &r, &a);
    const uint8_t want[8] = {R, A, R, R, R, R, R, R};
    assert_memory_equal(out, want, 8);
    assert_int_equal(r + a, 8);
}

/* kvpress's counter fires every `interval` steps, however they are cut into chunks, and restarts. */
static void kvpress_counter_fires_every_interval(void **state)
{
    (void)state;
    vkv_decode_counter c = {.interval = 16};
    assert_int_equal(vkv_decode_steps_to_fire(&c), 16);
    assert_false(vkv_decode_count(&c, 15));
    assert_int_equal(vkv_decode_steps_to_fire(&c), 1);
    assert_true(vkv_decode_count(&c, 1)); /* the 16th step: the token just computed is compressed with the rest */
    assert_int_equal(vkv_decode_steps_to_fire(&c), 16);
    uint32_t fired = 0, steps = 0;
    for (uint32_t chunk = 1; steps + chunk <= 100; chunk = chunk % 7 + 1) {
        uint32_t take = chunk < vkv_decode_steps_to_fire(&c) ? chunk : vkv_decode_steps_to_fire(&c);
        fired += vkv_decode_count(&c, take);
        steps += take;
    }
    assert_int_equal(fired, steps / 16);
    vkv_decode_counter every_step = {.interval = 1};
    assert_true(vkv_decode_count(&every_step, 1));
    assert_true(vkv_decode_count(&every_step, 1));
}

/* The pairs a compression keeps: M - N under the budget, the target under kvpress's rule. */
static void targets_of_both_rules(void **state)
{
    (void)state;
    assert_int_equal(vkv_decode_target(VKV_DECODING_BUDGET, 8, 64, 0), 56);
    assert_int_equal(vkv_decode_target(VKV_DECODING_KVPRESS, 512, 0, 2048), 2048);
    assert_int_equal(VKV_KVPRESS_COMPRESSION_INTERVAL, 512);
    assert_int_equal(VKV_KVPRESS_TARGET_SIZE, 2048);
}

/* kvpress's rule at or under the target compresses nothing; one token over, it does. */
static void kvpress_compresses_only_above_target(void **state)
{
    (void)state;
    assert_false(vkv_decode_kvpress_compresses(10, 24));
    assert_false(vkv_decode_kvpress_compresses(24, 24));
    assert_true(vkv_decode_kvpress_compresses(25, 24));
}

/* kvpress's rule without VECTOR: exactly `target` tokens stay, the newest token competing like the rest. */
static void kvpress_target_exact(void **state)
{
    (void)state;
    const float s[8] = {1, 2, 3, 4, 5, 6, 7, 9}; /* the last slot: the token just computed, the best score */
    const float e[8] = {0};
    const uint8_t t[8] = {R, R, R, R, R, R, R, R};
    uint8_t out[8];
    uint32_t r, a;
    select8(s, e, t, vkv_decode_target(VKV_DECODING_KVPRESS, 16, 0, 3), 0, false, out, &r, &a);
    const uint8_t want[8] = {E, E, E, E, E, R, R, R};
    assert_memory_equal(out, want, 8);
    assert_int_equal(r + a, 3);
}

/* The ratio kvpress's rule hands a scorer: int(n (1 - ratio)) is the target, 0 at or under it. */
static void kvpress_ratio_hits_target(void **state)
{
    (void)state;
    assert_true(vkv_decode_kvpress_ratio(24, 24) == 0.0);
    assert_true(vkv_decode_kvpress_ratio(10, 24) == 0.0);
    for (uint32_t n = 25; n < 3000; n += 7)
        for (uint32_t t = 1; t < n; t += 1 + t / 3) {
            const double r = vkv_decode_kvpress_ratio(n, t);
            assert_true(r > 0 && r < 1);
            assert_int_equal((uint32_t)((double)n * (1.0 - r)), t);
        }
    /* 1 - 80 / 96 = 1/6 rounds below: 96 * (5/6) is 80 in double, kept as is */
    assert_true(vkv_decode_kvpress_ratio(96, 80) == 1.0 - 80.0 / 96);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(baseline_keeps_top),
        cmocka_unit_test(vector_counts_and_residuals),
        cmocka_unit_test(approximated_never_retained),
        cmocka_unit_test(under_budget_keeps_all),
        cmocka_unit_test(kvpress_counter_fires_every_interval),
        cmocka_unit_test(targets_of_both_rules),
        cmocka_unit_test(kvpress_compresses_only_above_target),
        cmocka_unit_test(kvpress_target_exact),
        cmocka_unit_test(kvpress_ratio_hits_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
