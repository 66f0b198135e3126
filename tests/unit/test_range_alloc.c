/* The range allocator under the device suballocator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "core/range_alloc.h"
#include "core/rng.h"

static void range_alloc_takes_aligned_ranges(void **state)
{
    (void)state;
    vkv_range_alloc a;
    assert_true(vkv_range_alloc_init(&a, 1024));
    uint64_t o1, o2, o3;
    assert_true(vkv_range_alloc_take(&a, 10, 1, &o1));
    assert_int_equal(o1, 0);
    assert_true(vkv_range_alloc_take(&a, 100, 256, &o2));
    assert_int_equal(o2, 256);
    /* the padding [10, 256) stays free and is found by a later request */
    assert_true(vkv_range_alloc_take(&a, 200, 16, &o3));
    assert_int_equal(o3, 16);
    assert_int_equal(a.used, 310);
    vkv_range_alloc_destroy(&a);
}

static void range_alloc_rejects_what_does_not_fit(void **state)
{
    (void)state;
    vkv_range_alloc a;
    assert_true(vkv_range_alloc_init(&a, 1000));
    uint64_t o;
    assert_false(vkv_range_alloc_take(&a, 1001, 1, &o));
    assert_false(vkv_range_alloc_take(&a, 0, 1, &o));
    assert_false(vkv_range_alloc_take(&a, 10, 3, &o)); /* alignment not a power of two */
    assert_true(vkv_range_alloc_take(&a, 1000, 1, &o));
    assert_false(vkv_range_alloc_take(&a, 1, 1, &o));
    vkv_range_alloc_destroy(&a);
}

static void range_alloc_coalesces_freed_neighbours(void **state)
{
    (void)state;
    vkv_range_alloc a;
    assert_true(vkv_range_alloc_init(&a, 300));
    uint64_t o[3];
    for (int i = 0; i < 3; i++) assert_true(vkv_range_alloc_take(&a, 100, 1, &o[i]));
    vkv_range_alloc_give(&a, o[0], 100);
    vkv_range_alloc_give(&a, o[2], 100);
    assert_int_equal(a.n_free, 2);
    assert_int_equal(vkv_range_alloc_largest_free(&a), 100);
    vkv_range_alloc_give(&a, o[1], 100); /* joins both sides */
    assert_int_equal(a.n_free, 1);
    assert_int_equal(vkv_range_alloc_largest_free(&a), 300);
    assert_int_equal(a.used, 0);
    vkv_range_alloc_destroy(&a);
}

/* Random takes and gives against a byte map: no range is handed out twice,
 * everything stays inside the block, and freeing all restores one range. */
static void range_alloc_survives_random_workload(void **state)
{
    (void)state;
    enum { CAP = 1 << 16, N = 64 };
    vkv_range_alloc a;
    assert_true(vkv_range_alloc_init(&a, CAP));
    unsigned char *owner = calloc(CAP, 1);
    uint64_t off[N], size[N];
    int live[N] = {0};
    vkv_rng rng = vkv_rng_new(3);
    for (int step = 0; step < 20000; step++) {
        int i = (int)vkv_rng_below(&rng, N);
        if (live[i]) {
            for (uint64_t b = off[i]; b < off[i] + size[i]; b++) owner[b] = 0;
            vkv_range_alloc_give(&a, off[i], size[i]);
            live[i] = 0;
        } else {
            size[i] = 1 + vkv_rng_below(&rng, 3000);
            uint64_t align = 1ull << vkv_rng_below(&rng, 9);
            if (!vkv_range_alloc_take(&a, size[i], align, &off[i])) continue;
            assert_int_equal(off[i] % align, 0);
            assert_true(off[i] + size[i] <= CAP);
            for (uint64_t b = off[i]; b < off[i] + size[i]; b++) {
                assert_int_equal(owner[b], 0);
                owner[b] = 1;
            }
            live[i] = 1;
        }
    }
    for (int i = 0; i < N; i++)
        if (live[i]) vkv_range_alloc_give(&a, off[i], size[i]);
    assert_int_equal(a.n_free, 1);
    assert_int_equal(a.used, 0);
    assert_int_equal(vkv_range_alloc_largest_free(&a), CAP);
    free(owner);
    vkv_range_alloc_destroy(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(range_alloc_takes_aligned_ranges),
        cmocka_unit_test(range_alloc_rejects_what_does_not_fit),
        cmocka_unit_test(range_alloc_coalesces_freed_neighbours),
        cmocka_unit_test(range_alloc_survives_random_workload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
