/* VECTOR's integer tier counts and the byte equation (docs/ARCHITECTURE.md §2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "press/vector.h"

static void default_pa_matches_the_paper(void **state)
{
    (void)state;
    assert_true(fabsf(vkv_vector_default_pa(0.25f) - 0.125f) < 1e-5f);
    assert_true(fabsf(vkv_vector_default_pa(0.5f) - 0.25f) < 1e-5f);
    assert_true(fabsf(vkv_vector_default_pa(0.75f) - 0.125f) < 1e-5f);
    assert_true(fabsf(vkv_vector_default_pa(0.9f) - 0.05f) < 1e-5f);
    assert_true(vkv_vector_default_pa(0.0f) == 0.0f);
    /* with the default ratio, n = 1000: a = 125, 250, 125, 50 (not one less) */
    const float pcs[] = {0.25f, 0.5f, 0.75f, 0.9f};
    const uint32_t want_a[] = {125, 250, 125, 50};
    for (int i = 0; i < 4; i++) {
        uint32_t kept = (uint32_t)(1000 * (1 - pcs[i]) + 0.5f);
        vkv_tier_counts c = vkv_vector_counts(1000, kept, vkv_vector_default_pa(pcs[i]), true);
        assert_int_equal(c.a, want_a[i]);
    }
}

static void counts_follow_the_formulas(void **state)
{
    (void)state;
    /* n = 1000, p_c = 0.5, p_a = 0.25: n_kept 500, a 250 */
    vkv_tier_counts c = vkv_vector_counts(1000, 500, 0.25f, true);
    assert_int_equal(c.a, 250);
    assert_int_equal(c.pool, 750);
    assert_int_equal(c.retained, 250);
    assert_int_equal(c.approximated, 500);
    assert_int_equal(c.evicted, 250);
    /* p_c = 0.9: n_kept 100, p_a = 0.05 -> a = 50 */
    c = vkv_vector_counts(1000, 100, 0.05f, true);
    assert_int_equal(c.a, 50);
    assert_int_equal(c.retained, 50);
    assert_int_equal(c.approximated, 100);
    assert_int_equal(c.evicted, 850);
    /* a is capped by n_kept and by n - n_kept */
    c = vkv_vector_counts(100, 10, 0.5f, true);
    assert_int_equal(c.a, 10);
    c = vkv_vector_counts(100, 95, 0.5f, true);
    assert_int_equal(c.a, 5);
    /* VECTOR off, or p_a = 0: the eviction baseline */
    c = vkv_vector_counts(1000, 500, 0.25f, false);
    assert_int_equal(c.a, 0);
    assert_int_equal(c.retained, 500);
    assert_int_equal(c.approximated, 0);
    assert_int_equal(c.evicted, 500);
    c = vkv_vector_counts(1000, 500, 0.0f, true);
    assert_int_equal(c.a, 0);
}

/* Keys held (retained + approximated) plus values held (retained) is exactly
 * 2 n_kept: the same bytes with VECTOR on or off, for every n, ratio and p_a. */
static void bytes_equal_the_baseline_everywhere(void **state)
{
    (void)state;
    const float ratios[] = {0.0f, 0.1f, 0.25f, 0.5f, 0.75f, 0.9f, 0.99f};
    for (uint32_t n = 1; n <= 700; n += 7)
        for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
            uint32_t kept = vkv_press_n_kept_uniform(ratios[r], n);
            for (float pa = 0; pa <= 1.0f - ratios[r] + 1e-6f; pa += 0.05f) {
                vkv_tier_counts c = vkv_vector_counts(n, kept, pa, true), b = vkv_vector_counts(n, kept, pa, false);
                uint32_t keys = c.retained + c.approximated, values = c.retained;
                assert_int_equal(keys + values, 2 * kept);
                assert_int_equal(b.retained * 2, 2 * kept);
                assert_int_equal(c.retained + c.approximated + c.evicted, n);
                assert_true(c.a <= kept && c.a <= n - kept);
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_pa_matches_the_paper),
        cmocka_unit_test(counts_follow_the_formulas),
        cmocka_unit_test(bytes_equal_the_baseline_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
