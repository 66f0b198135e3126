/* IEEE half and bfloat16 conversions (core/fp16.h): exhaustive round trips
 * against an independent decoder, and round-to-nearest-even at every kind of
 * boundary (mantissa carry, subnormal, overflow). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/fp16.h"

static uint16_t half_of(uint32_t f32_bits) { return vkv_f32_to_fp16(vkv_bits_f32(f32_bits)); }
static uint16_t bf16_of(uint32_t f32_bits) { return vkv_f32_to_bf16(vkv_bits_f32(f32_bits)); }

/* The value a half encodes, from the IEEE 754 definition (not from fp16.h). */
static double half_value(uint16_t h)
{
    const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static void fp16_all_halves_round_trip_through_f32(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = vkv_fp16_to_f32((uint16_t)h);
        const uint32_t exp = (h >> 10) & 31, mant = h & 1023;
        if (exp == 31 && mant != 0) {
            assert_true(isnan(f));
            const uint16_t back = vkv_f32_to_fp16(f);
            assert_int_equal(back & 0x7c00, 0x7c00); /* still NaN: all-ones exponent... */
            assert_int_not_equal(back & 0x3ff, 0);   /* ...and a non-zero mantissa */
            assert_int_equal(back & 0x8000, h & 0x8000);
            continue;
        }
        if (exp == 31)
            assert_true(isinf(f) && (signbit(f) != 0) == ((h & 0x8000) != 0));
        else
            assert_true((double)f == half_value((uint16_t)h));
        assert_int_equal(vkv_f32_to_fp16(f), h); /* exact, -0 included */
    }
}

static void fp16_rounds_halfway_to_even(void **state)
{
    (void)state;
    /* one f32 ulp at 1.0 is 2^-23; a half ulp is 2^-10, so 0x1000 is halfway */
    assert_int_equal(half_of(0x3f801000), 0x3c00); /* 1 + 2^-11: tie, 0x3c00 is even */
    assert_int_equal(half_of(0x3f801001), 0x3c01); /* just above the tie */
    assert_int_equal(half_of(0x3f800fff), 0x3c00); /* just below */
    assert_int_equal(half_of(0x3f803000), 0x3c02); /* 1 + 3*2^-11: tie, 0x3c01 odd -> up */
    assert_int_equal(half_of(0xbf803000), 0xbc02); /* sign does not change the rule */
    /* 2 - 2^-11 ties between 0x3fff (odd) and 2.0: the carry enters the exponent */
    assert_int_equal(half_of(0x3ffff000), 0x4000);
    assert_int_equal(vkv_f32_to_fp16(0.1f), 0x2e66);
    assert_int_equal(vkv_f32_to_fp16(-2.5f), 0xc100);
}

static void fp16_overflows_to_inf(void **state)
{
    (void)state;
    assert_int_equal(vkv_f32_to_fp16(65504.0f), 0x7bff); /* the largest half */
    assert_int_equal(vkv_f32_to_fp16(65519.996f), 0x7bff); /* below the midpoint to 2^16 */
    assert_int_equal(vkv_f32_to_fp16(65520.0f), 0x7c00);  /* midpoint: ties to even = inf */
    assert_int_equal(vkv_f32_to_fp16(1e10f), 0x7c00);
    assert_int_equal(vkv_f32_to_fp16(-1e10f), 0xfc00);
    assert_int_equal(vkv_f32_to_fp16(3.4e38f), 0x7c00);
    assert_int_equal(vkv_f32_to_fp16(INFINITY), 0x7c00);
    assert_int_equal(vkv_f32_to_fp16(-INFINITY), 0xfc00);
    /* a NaN whose payload sits only in bits a plain shift drops must not become inf */
    const uint16_t n = half_of(0x7f800001);
    assert_int_equal(n & 0x7c00, 0x7c00);
    assert_int_not_equal(n & 0x3ff, 0);
    assert_true(isnan(vkv_fp16_to_f32(vkv_f32_to_fp16(NAN))));
}

static void fp16_subnormals_round_to_nearest_even(void **state)
{
    (void)state;
    const float tiny = ldexpf(1.0f, -24); /* smallest half subnormal, 0x0001 */
    assert_true(vkv_fp16_to_f32(0x0001) == tiny);
    assert_true(vkv_fp16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(vkv_fp16_to_f32(0x8001) == -tiny);
    assert_int_equal(vkv_f32_to_fp16(tiny), 0x0001);
    assert_int_equal(vkv_f32_to_fp16(ldexpf(1.0f, -25)), 0x0000); /* tie with 0: even */
    assert_int_equal(vkv_f32_to_fp16(ldexpf(1.0f, -25) * 1.0000001f), 0x0001);
    assert_int_equal(vkv_f32_to_fp16(ldexpf(1.0f, -26)), 0x0000);
    assert_int_equal(vkv_f32_to_fp16(ldexpf(3.0f, -25)), 0x0002); /* tie 1|2: even is 2 */
    assert_int_equal(vkv_f32_to_fp16(ldexpf(5.0f, -25)), 0x0002); /* tie 2|3: even is 2 */
    assert_int_equal(vkv_f32_to_fp16(ldexpf(1.0f, -14)), 0x0400); /* smallest normal */
    /* the tie between the largest subnormal and the smallest normal goes up (even) */
    assert_int_equal(vkv_f32_to_fp16(ldexpf(2047.0f, -25)), 0x0400);
    assert_int_equal(vkv_f32_to_fp16(ldexpf(2045.0f, -25)), 0x03fe); /* tie 0x3fe|0x3ff */
    assert_int_equal(vkv_f32_to_fp16(-ldexpf(3.0f, -25)), 0x8002);
    assert_int_equal(vkv_f32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(vkv_f32_to_fp16(-1e-30f), 0x8000); /* underflow keeps the sign */
    assert_int_equal(vkv_f32_to_fp16(ldexpf(1.0f, -149)), 0x0000); /* f32 subnormal */
}

static void bf16_all_values_round_trip_and_nan_stays_nan(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 65536; b++) {
        const float f = vkv_bf16_to_f32((uint16_t)b);
        assert_int_equal(vkv_f32_bits(f), b << 16);
        const uint16_t back = vkv_f32_to_bf16(f);
        if (isnan(f)) {
            assert_int_equal(back & 0x7f80, 0x7f80);
            assert_int_not_equal(back & 0x7f, 0);
            assert_int_equal(back & 0x8000, b & 0x8000);
        } else {
            assert_int_equal(back, b);
        }
    }
    /* payload only in the low 16 bits: truncation would give inf */
    assert_true(isnan(vkv_bf16_to_f32(bf16_of(0x7f800001))));
    assert_true(isnan(vkv_bf16_to_f32(bf16_of(0xffc00000))));
    /* and rounding must not carry a NaN into the sign bit or to inf */
    assert_true(isnan(vkv_bf16_to_f32(bf16_of(0x7fffffff))));
}

static void bf16_rounds_halfway_to_even(void **state)
{
    (void)state;
    assert_int_equal(bf16_of(0x3f808000), 0x3f80); /* tie, 0x3f80 even */
    assert_int_equal(bf16_of(0x3f808001), 0x3f81);
    assert_int_equal(bf16_of(0x3f807fff), 0x3f80);
    assert_int_equal(bf16_of(0x3f818000), 0x3f82); /* tie, 0x3f81 odd -> up */
    assert_int_equal(bf16_of(0xbf818000), 0xbf82);
    assert_int_equal(bf16_of(0x3fff8000), 0x4000); /* carry into the exponent */
    assert_int_equal(bf16_of(0x7f7f7fff), 0x7f7f); /* below the tie with inf */
    assert_int_equal(bf16_of(0x7f7f8000), 0x7f80); /* tie with inf: inf is even */
    assert_int_equal(vkv_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(vkv_f32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(vkv_f32_to_bf16(1.0f / 3.0f), 0x3eab); /* 0x3eaaaaab rounds up */
    assert_int_equal(bf16_of(0x00008000), 0x0000); /* subnormals: same rule */
    assert_int_equal(bf16_of(0x00018000), 0x0002);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp16_all_halves_round_trip_through_f32),
        cmocka_unit_test(fp16_rounds_halfway_to_even),
        cmocka_unit_test(fp16_overflows_to_inf),
        cmocka_unit_test(fp16_subnormals_round_to_nearest_even),
        cmocka_unit_test(bf16_all_values_round_trip_and_nan_stays_nan),
        cmocka_unit_test(bf16_rounds_halfway_to_even),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
