/* VECTOR's integer tier counts, the byte equation and the ratio checks
 * (docs/ARCHITECTURE.md §2). Links the device-free kv counting alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "kvlayout/kv_counts.h"

static void default_pa_matches_the_paper(void **state)
{
    (void)state;
    assert_true(fabs(vkv_kv_default_pa(0.25) - 0.125) < 1e-12);
    assert_true(fabs(vkv_kv_default_pa(0.5) - 0.25) < 1e-12);
    assert_true(fabs(vkv_kv_default_pa(0.75) - 0.125) < 1e-12);
    assert_true(fabs(vkv_kv_default_pa(0.9) - 0.05) < 1e-12);
    assert_true(vkv_kv_default_pa(0.0) == 0.0);
    /* with the default ratio, n = 1000: a = 125, 250, 125, 50 (not one less) */
    const double pcs[] = {0.25, 0.5, 0.75, 0.9};
    const uint32_t want_a[] = {125, 250, 125, 50};
    for (int i = 0; i < 4; i++) {
        uint32_t kept = vkv_kv_n_kept(pcs[i], 1000);
        vkv_tier_counts c = vkv_kv_tier_counts(1000, kept, vkv_kv_default_pa(pcs[i]), true);
        assert_int_equal(c.a, want_a[i]);
    }
}

/* The counting rule: n_kept is kvpress's int() in double, bit for bit; a is
 * the floor of p_a n taken as the decimal it stands for. */
static void counts_follow_the_decimals_typed(void **state)
{
    (void)state;
    /* Python: int(1000 * (1 - 0.9)) = int(99.99999999999999) = 99 */
    assert_int_equal(vkv_kv_n_kept(0.9, 1000), 99);
    assert_int_equal(vkv_kv_n_kept(0.3, 10), 7);
    assert_int_equal(vkv_kv_n_kept(0.1, 1000), 900);
    /* 0.3 * 10 = 2.9999999999999996 in double: a = 3, as the decimals say */
    assert_int_equal(vkv_kv_tier_counts(10, 7, 0.3, true).a, 3);
    assert_int_equal(vkv_kv_tier_counts(1000, 900, 0.1, true).a, 100);
    assert_int_equal(vkv_kv_tier_counts(1000, 100, 0.05, true).a, 50);
    /* (1 - 0.9) / 2 = 0.04999999999999999: still 50 */
    assert_int_equal(vkv_kv_tier_counts(1000, 100, (1 - 0.9) / 2, true).a, 50);
    assert_true(vkv_kv_decimal(2.9999999999999996) == 3.0);
    assert_true(vkv_kv_decimal(0.1 + 0.2) == 0.3);
    assert_true(vkv_kv_decimal(2.5) == 2.5);
    /* kvpress's global count: int(1000 * 0.9) = 900; int(N p_c) = 0 below N p_c = 1: none */
    assert_int_equal(vkv_kv_n_evicted_global(1000, 0.9), 900);
    assert_int_equal(vkv_kv_n_evicted_global(8, 0.01), 0);
    assert_int_equal(vkv_kv_n_evicted_global(99, 0.01), 0);
    assert_int_equal(vkv_kv_n_evicted_global(100, 0.01), 1);
    assert_int_equal(vkv_kv_n_evicted_global(0, 0.5), 0);
}

static void counts_follow_the_formulas(void **state)
{
    (void)state;
    /* n = 1000, p_c = 0.5, p_a = 0.25: n_kept 500, a 250 */
    vkv_tier_counts c = vkv_kv_tier_counts(1000, 500, 0.25, true);
    assert_int_equal(c.a, 250);
    assert_int_equal(c.pool, 750);
    assert_int_equal(c.retained, 250);
    assert_int_equal(c.approximated, 500);
    assert_int_equal(c.evicted, 250);
    /* p_c = 0.9: n_kept 100, p_a = 0.05 -> a = 50 */
    c = vkv_kv_tier_counts(1000, 100, 0.05, true);
    assert_int_equal(c.a, 50);
    assert_int_equal(c.retained, 50);
    assert_int_equal(c.approximated, 100);
    assert_int_equal(c.evicted, 850);
    /* a is capped by n_kept and by n - n_kept */
    c = vkv_kv_tier_counts(100, 10, 0.5, true);
    assert_int_equal(c.a, 10);
    c = vkv_kv_tier_counts(100, 95, 0.5, true);
    assert_int_equal(c.a, 5);
    /* VECTOR off, or p_a = 0: the eviction baseline */
    c = vkv_kv_tier_counts(1000, 500, 0.25, false);
    assert_int_equal(c.a, 0);
    assert_int_equal(c.retained, 500);
    assert_int_equal(c.approximated, 0);
    assert_int_equal(c.evicted, 500);
    c = vkv_kv_tier_counts(1000, 500, 0.0, true);
    assert_int_equal(c.a, 0);
}

/* Keys held (retained + approximated) plus values held (retained) is exactly
 * 2 n_kept: the same bytes with VECTOR on or off, for every n, ratio and p_a. */
static void bytes_equal_the_baseline_everywhere(void **state)
{
    (void)state;
    const double ratios[] = {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99};
    for (uint32_t n = 1; n <= 700; n += 7)
        for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
            uint32_t kept = vkv_kv_n_kept(ratios[r], n);
            for (int step = 0; step * 0.05 <= 1.0 - ratios[r] + 1e-9; step++) {
                const double pa = step * 0.05;
                vkv_tier_counts c = vkv_kv_tier_counts(n, kept, pa, true), b = vkv_kv_tier_counts(n, kept, pa, false);
                uint32_t keys = c.retained + c.approximated, values = c.retained;
                assert_int_equal(keys + values, 2 * kept);
                assert_int_equal(b.retained * 2, 2 * kept);
                assert_int_equal(c.retained + c.approximated + c.evicted, n);
                assert_true(c.a <= kept && c.a <= n - kept);
            }
        }
}

/* One place checks the ratios; its messages are what the CLI prints. */
static void ratio_checks_take_decimals(void **state)
{
    (void)state;
    char msg[160];
    assert_null(vkv_kv_check_ratios(0.5, -1, true, msg, sizeof msg));
    assert_null(vkv_kv_check_ratios(0.5, 0.5, true, msg, sizeof msg));
    /* 0.1 + 0.9 and 0.3 + 0.7 are 1 as decimals */
    assert_null(vkv_kv_check_ratios(0.9, 0.1, true, msg, sizeof msg));
    assert_null(vkv_kv_check_ratios(0.7, 0.3, true, msg, sizeof msg));
    assert_null(vkv_kv_check_ratios(0.5, 0.6, false, msg, sizeof msg)); /* p_a unused without VECTOR */
    assert_non_null(vkv_kv_check_ratios(0.5, 0.6, true, msg, sizeof msg));
    assert_non_null(strstr(msg, "too large for --compression"));
    assert_non_null(vkv_kv_check_ratios(1.0, -1, false, msg, sizeof msg));
    assert_non_null(vkv_kv_check_ratios(-0.1, -1, false, msg, sizeof msg));
    assert_non_null(vkv_kv_check_ratios(0.5, NAN, true, msg, sizeof msg));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_pa_matches_the_paper),
        cmocka_unit_test(counts_follow_the_decimals_typed),
        cmocka_unit_test(counts_follow_the_formulas),
        cmocka_unit_test(bytes_equal_the_baseline_everywhere),
        cmocka_unit_test(ratio_checks_take_decimals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
