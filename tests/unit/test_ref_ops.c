/* Scalar reference ops (ref/ref_ops.h): small cases with hand-computed
 * values for each op, plus the identities the GPU tests lean on (rope
 * inverse, quantized matmul == decode then dot). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ref/ref_ops.h"

static uint32_t rng_state = 777;
static float rand_uniform(void) /* deterministic uniform [-1, 1) */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

/* ------------------------------------------------------------- get_rows */

static void get_rows_decodes_the_selected_rows(void **state)
{
    (void)state;
    float table[3 * 32]; /* [3, 32] */
    for (int i = 0; i < 96; i++) table[i] = (float)(i / 32 + 1) * rand_uniform();
    vkv_block_q8_0 q[3];
    vkv_quantize_row(VKV_Q8_0, table, q, 96);
    float want[96];
    vkv_dequantize_row(VKV_Q8_0, q, want, 96);

    const int32_t ids[3] = {2, 0, 2};
    float out[3 * 32];
    vkv_ref_get_rows(VKV_Q8_0, q, 32, ids, 3, out);
    assert_memory_equal(out, want + 64, 32 * sizeof(float));
    assert_memory_equal(out + 32, want, 32 * sizeof(float));
    assert_memory_equal(out + 64, want + 64, 32 * sizeof(float));

    const int32_t one[1] = {1};
    vkv_ref_get_rows(VKV_F32, table, 32, one, 1, out);
    assert_memory_equal(out, table + 32, 32 * sizeof(float));
}

/* ------------------------------------------------------------- rms_norm */

static void rms_norm_matches_hand_computed_rows(void **state)
{
    (void)state;
    /* row 0: mean(x^2) = 30/4 = 7.5; row 1: (9 + 16 + 0 + 0)/4 = 6.25 */
    const float x[8] = {1, 2, 3, 4, 3, -4, 0, 0};
    const float w[4] = {1, 0.5f, 2, -1};
    float y[8];
    vkv_ref_rms_norm(x, w, 2, 4, 0.0f, y);
    assert_float_equal(y[0], 0.36514837f, 1e-7);  /* 1 / sqrt(7.5) */
    assert_float_equal(y[1], 0.36514837f, 1e-7);  /* 2 / sqrt(7.5) * 0.5 */
    assert_float_equal(y[2], 2.19089023f, 1e-6);  /* 3 / sqrt(7.5) * 2 */
    assert_float_equal(y[3], -1.46059349f, 1e-6); /* 4 / sqrt(7.5) * -1 */
    assert_float_equal(y[4], 1.2f, 1e-7);         /* 3 / 2.5 */
    assert_float_equal(y[5], -0.8f, 1e-7);        /* -4 / 2.5 * 0.5 */
    assert_float_equal(y[6], 0.0f, 0);

    /* no weight, eps inside the root: 3 / sqrt(12.5 + 0.5), 4 / sqrt(13) */
    const float x2[2] = {3, 4};
    vkv_ref_rms_norm(x2, NULL, 1, 2, 0.5f, y);
    assert_float_equal(y[0], 0.83205029f, 1e-7);
    assert_float_equal(y[1], 1.10940039f, 1e-6);

    /* all-zero row: eps keeps it finite */
    const float z[3] = {0, 0, 0};
    vkv_ref_rms_norm(z, NULL, 1, 3, 1e-6f, y);
    for (int i = 0; i < 3; i++) assert_float_equal(y[i], 0.0f, 0);
}

/* --------------------------------------------------------------- matmul */

static void matmul_matches_hand_computed_f32_case(void **state)
{
    (void)state;
    const float w[6] = {1, 2, 3, 4, 5, 6};        /* W [2, 3] */
    const float x[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}; /* x [2, 3] */
    float y[4];                                  /* y [2, 2] */
    vkv_ref_matmul(VKV_F32, w, 2, 3, x, 2, y);
    assert_float_equal(y[0], -2.0f, 0); /* 1 - 3 */
    assert_float_equal(y[1], -2.0f, 0); /* 4 - 6 */
    assert_float_equal(y[2], 3.0f, 0);  /* (1 + 2 + 3) / 2 */
    assert_float_equal(y[3], 7.5f, 0);  /* (4 + 5 + 6) / 2 */
}

/* Every weight type against "decode the whole matrix, then naive double
 * dot"; n = 70 crosses the 64-row tile and k = 768 the 256-element chunk. */
static void matmul_with_quantized_weight_matches_dequantize_then_dot(void **state)
{
    (void)state;
    enum { M = 5, K = 768, N = 70 };
    static float wf[M * K], x[N * K], wd[M * K], y[N * M];
    static uint8_t wq[M * K * 4];
    for (int i = 0; i < M * K; i++) wf[i] = rand_uniform();
    for (int i = 0; i < N * K; i++) x[i] = rand_uniform();
#define VKV_DTYPE_ENTRY(t) VKV_##t,
    static const vkv_dtype types[] = {VKV_DTYPE_LIST(VKV_DTYPE_ENTRY)};
#undef VKV_DTYPE_ENTRY
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const size_t row_bytes = vkv_dtype_row_bytes(types[t], K);
        for (int r = 0; r < M; r++) {
            vkv_quantize_row(types[t], wf + r * K, wq + r * row_bytes, K);
            vkv_dequantize_row(types[t], wq + r * row_bytes, wd + r * K, K);
        }
        vkv_ref_matmul(types[t], wq, M, K, x, N, y);
        for (int n = 0; n < N; n++) {
            for (int m = 0; m < M; m++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)x[n * K + k] * wd[m * K + k];
                assert_float_equal(y[n * M + m], (float)s, 0); /* same sums, same order */
            }
        }
    }
}

/* ----------------------------------------------------------------- rope */

static void rope_interleaved_and_neox_rotate_different_pairs(void **state)
{
    (void)state;
    /* head_dim 6, n_rot 4, base 10000, pos 1: theta_0 = 1, theta_1 = 10000^(-1/2) = 0.01.
     * interleaved rotates (x0, x1) by 1 and (x2, x3) by 0.01;
     * neox rotates (x0, x2) by 1 and (x1, x3) by 0.01; x4, x5 pass through. */
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const int32_t pos[1] = {1};
    vkv_rope_params p = {.mode = VKV_ROPE_INTERLEAVED, .head_dim = 6, .n_rot = 4,
                         .freq_base = 10000.0f, .freq_scale = 1.0f};
    float y[6];
    vkv_ref_rope(&p, x, 1, 1, pos, y);
    assert_float_equal(y[0], -1.14263966f, 1e-6); /* 1 cos 1 - 2 sin 1 */
    assert_float_equal(y[1], 1.92207560f, 1e-6);  /* 1 sin 1 + 2 cos 1 */
    assert_float_equal(y[2], 2.95985067f, 1e-6);  /* 3 cos .01 - 4 sin .01 */
    assert_float_equal(y[3], 4.02979950f, 1e-6);  /* 3 sin .01 + 4 cos .01 */
    assert_float_equal(y[4], 5.0f, 0);
    assert_float_equal(y[5], 6.0f, 0);

    p.mode = VKV_ROPE_NEOX;
    vkv_ref_rope(&p, x, 1, 1, pos, y);
    assert_float_equal(y[0], -1.98411065f, 1e-6); /* 1 cos 1 - 3 sin 1 */
    assert_float_equal(y[1], 1.95990067f, 1e-6);  /* 2 cos .01 - 4 sin .01 */
    assert_float_equal(y[2], 2.46237790f, 1e-6);  /* 1 sin 1 + 3 cos 1 */
    assert_float_equal(y[3], 4.01979967f, 1e-6);  /* 2 sin .01 + 4 cos .01 */
    assert_float_equal(y[4], 5.0f, 0);
    assert_float_equal(y[5], 6.0f, 0);

    /* position 0 is the identity in both modes */
    const int32_t zero[1] = {0};
    vkv_ref_rope(&p, x, 1, 1, zero, y);
    assert_memory_equal(y, x, sizeof x);
}

static void rope_theta_applies_freq_scale_and_factors(void **state)
{
    (void)state;
    const float factors[2] = {1.0f, 4.0f};
    vkv_rope_params p = {.mode = VKV_ROPE_NEOX, .head_dim = 4, .n_rot = 4,
                         .freq_base = 10000.0f, .freq_scale = 0.5f, .freq_factors = factors};
    assert_float_equal(vkv_rope_theta(&p, 8, 0), 4.0, 1e-12);  /* 8 * 0.5 */
    assert_float_equal(vkv_rope_theta(&p, 8, 1), 0.01, 1e-12); /* 8 * 0.5 * 0.01 / 4 */
    assert_float_equal(vkv_rope_theta(&p, -3, 0), -1.5, 1e-12);
    p.inverse = true; /* inverse negates the rotation, not the reported angle */
    assert_float_equal(vkv_rope_theta(&p, 8, 0), 4.0, 1e-12);

    /* the factor divides the angle: (x1, x3) at pos 8 turn by 0.01 */
    p.inverse = false;
    const float x[4] = {0, 2, 0, 4};
    const int32_t pos[1] = {8};
    float y[4];
    vkv_ref_rope(&p, x, 1, 1, pos, y);
    assert_float_equal(y[1], 1.95990067f, 1e-6);
    assert_float_equal(y[3], 4.01979967f, 1e-6);
}

static void rope_forward_then_inverse_is_identity(void **state)
{
    (void)state;
    enum { T = 5, H = 3, D = 64 };
    static float x[T * H * D], y[T * H * D];
    for (int i = 0; i < T * H * D; i++) x[i] = rand_uniform();
    const int32_t pos[T] = {0, 1, 17, 4095, 100000};
    float factors[24];
    vkv_rope_llama3_factors(48, 500000.0f, 8.0f, 1.0f, 4.0f, 8192, factors);
    for (int mode = 0; mode < 2; mode++) {
        vkv_rope_params p = {.mode = mode ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED,
                             .head_dim = D, .n_rot = 48, .freq_base = 500000.0f,
                             .freq_scale = 0.25f, .freq_factors = factors};
        vkv_ref_rope(&p, x, T, H, pos, y);
        /* heads of one token share the position: head 1 of token 3 differs from x */
        double moved = 0;
        for (int i = 0; i < 48; i++) moved += fabs(y[(3 * H + 1) * D + i] - x[(3 * H + 1) * D + i]);
        assert_true(moved > 0.1);
        p.inverse = true;
        vkv_ref_rope(&p, y, T, H, pos, y); /* in place */
        for (int i = 0; i < T * H * D; i++) assert_float_equal(y[i], x[i], 1e-6);
    }
}

static void rope_applies_each_tokens_own_position(void **state)
{
    (void)state;
    /* two tokens x two heads, same vectors; token 1 at position 0 is untouched */
    const float x[16] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};
    const int32_t pos[2] = {1, 0};
    vkv_rope_params p = {.mode = VKV_ROPE_INTERLEAVED, .head_dim = 4, .n_rot = 4,
                         .freq_base = 10000.0f, .freq_scale = 1.0f};
    float y[16];
    vkv_ref_rope(&p, x, 2, 2, pos, y);
    for (int h = 0; h < 2; h++) {
        assert_float_equal(y[4 * h + 0], -1.14263966f, 1e-6);
        assert_float_equal(y[4 * h + 3], 4.02979950f, 1e-6);
    }
    assert_memory_equal(y + 8, x + 8, 8 * sizeof(float));
}

/* Factors for n_rot 8, base 10000: wavelengths 2*pi*{1, 10, 100, 1000}. With
 * original_ctx 100, low 1, high 4: 6.28 < 25 -> 1; 628 and 6283 > 100 ->
 * factor; 62.83 is in between: smooth = (100/62.83 - 1)/3 = 0.197183,
 * divisor 1/((1 - smooth)/8 + smooth) = 3.3609463. */
static void llama3_factors_match_hand_computed_values(void **state)
{
    (void)state;
    float f[4];
    vkv_rope_llama3_factors(8, 10000.0f, 8.0f, 1.0f, 4.0f, 100, f);
    assert_float_equal(f[0], 1.0f, 0);
    assert_float_equal(f[1], 3.3609463f, 1e-6);
    assert_float_equal(f[2], 8.0f, 0);
    assert_float_equal(f[3], 8.0f, 0);

    /* Llama-3.1 (n_rot 128, base 500000, factor 8, 1/4, 8192): pairs 0-28
     * are unscaled, 35-63 fully scaled, 29-34 blend upwards */
    float g[64];
    vkv_rope_llama3_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192, g);
    for (int i = 0; i < 64; i++) {
        if (i <= 28) assert_float_equal(g[i], 1.0f, 0);
        else if (i >= 35) assert_float_equal(g[i], 8.0f, 0);
        else assert_true(g[i] > g[i - 1] && g[i] > 1.0f && g[i] < 8.0f);
    }
    assert_float_equal(g[29], 1.2074839f, 1e-6);
    assert_float_equal(g[34], 5.2573266f, 1e-6);
}

/* Pair 1 has wavelength 2*pi*10 = 62.8319. Moving a boundary wavelength
 * across it must not jump: the blend is 1 at the high-frequency boundary and
 * factor at the low-frequency one. */
static void llama3_factors_are_continuous_at_the_boundary_wavelengths(void **state)
{
    (void)state;
    float f[4];
    /* high boundary 100/hff just above 62.83: pair 1 is high-frequency, exactly 1 */
    vkv_rope_llama3_factors(8, 10000.0f, 8.0f, 1.0f, 100.0f / 62.84f, 100, f);
    assert_float_equal(f[1], 1.0f, 0);
    /* just below: blended, but still ~1 */
    vkv_rope_llama3_factors(8, 10000.0f, 8.0f, 1.0f, 100.0f / 62.82f, 100, f);
    assert_true(f[1] > 1.0f);
    assert_float_equal(f[1], 1.0f, 1e-3);
    /* low boundary 100/lff just below 62.83: pair 1 is low-frequency, exactly 8 */
    vkv_rope_llama3_factors(8, 10000.0f, 8.0f, 100.0f / 62.82f, 4.0f, 100, f);
    assert_float_equal(f[1], 8.0f, 0);
    /* just above: blended, but still ~8 */
    vkv_rope_llama3_factors(8, 10000.0f, 8.0f, 100.0f / 62.84f, 4.0f, 100, f);
    assert_true(f[1] < 8.0f);
    assert_float_equal(f[1], 8.0f, 1e-2);
}

/* -------------------------------------------------------------- softmax */

static void softmax_matches_hand_computed_row(void **state)
{
    (void)state;
    /* softmax(0.5 * {1, 2, 3}) = e^{.5, 1, 1.5} / 8.8486918 */
    const float x[3] = {1, 2, 3};
    float y[3];
    vkv_ref_softmax(x, 1, 3, 0.5f, false, 0, y);
    assert_float_equal(y[0], 0.18632372f, 1e-7);
    assert_float_equal(y[1], 0.30719589f, 1e-7);
    assert_float_equal(y[2], 0.50648039f, 1e-7);
    /* large logits do not overflow */
    const float big[2] = {1000, 1000};
    vkv_ref_softmax(big, 1, 2, 1.0f, false, 0, y);
    assert_float_equal(y[0], 0.5f, 0);
    assert_float_equal(y[1], 0.5f, 0);
}

static void softmax_causal_mask_with_offset(void **state)
{
    (void)state;
    /* offset 1: row r sees columns j <= r + 1. Masked entries hold garbage
     * (inf, NaN) that must not leak into the visible ones. */
    const float x[12] = {0, 0, INFINITY, NAN,
                         0, 0, 0, NAN,
                         0, 0, 0, 0};
    float y[12];
    vkv_ref_softmax(x, 3, 4, 1.0f, true, 1, y);
    const float want[12] = {0.5f, 0.5f, 0, 0,
                            1 / 3.0f, 1 / 3.0f, 1 / 3.0f, 0,
                            0.25f, 0.25f, 0.25f, 0.25f};
    for (int i = 0; i < 12; i++) assert_float_equal(y[i], want[i], 1e-7);
    assert_true(y[2] == 0.0f && !signbit(y[2])); /* exactly +0 */
    assert_true(y[7] == 0.0f);

    /* offset -1: row 0 sees nothing -> all zeros; row 1 sees only column 0 */
    vkv_ref_softmax(x, 3, 4, 1.0f, true, -1, y);
    for (int j = 0; j < 4; j++) assert_float_equal(y[j], 0.0f, 0);
    assert_float_equal(y[4], 1.0f, 0);
    for (int j = 5; j < 8; j++) assert_float_equal(y[j], 0.0f, 0);
    assert_float_equal(y[8], 0.5f, 0);
    assert_float_equal(y[9], 0.5f, 0);

    /* offset past the last column: everything visible (the last row here) */
    vkv_ref_softmax(x + 8, 1, 4, 1.0f, true, 100, y);
    for (int j = 0; j < 4; j++) assert_float_equal(y[j], 0.25f, 0);

    /* a visible row of -inf only behaves like a row that sees nothing */
    const float ninf[2] = {-INFINITY, -INFINITY};
    vkv_ref_softmax(ninf, 1, 2, 1.0f, false, 0, y);
    assert_float_equal(y[0], 0.0f, 0);
    assert_float_equal(y[1], 0.0f, 0);
}

/* ------------------------------------------------------ silu_mul, add */

static void silu_mul_matches_hand_computed_values(void **state)
{
    (void)state;
    const float g[5] = {0, 1, -1, 20, -100};
    const float u[5] = {3, 2, 2, 1, 1};
    float y[5];
    vkv_ref_silu_mul(g, u, 5, y);
    assert_float_equal(y[0], 0.0f, 0);
    assert_float_equal(y[1], 1.46211716f, 1e-6);  /* 2 / (1 + e^-1) */
    assert_float_equal(y[2], -0.53788284f, 1e-6); /* -2 / (1 + e) */
    assert_float_equal(y[3], 20.0f, 1e-6);
    assert_true(y[4] <= 0.0f && y[4] > -1e-40f); /* -100 / (1 + e^100) = -3.7e-42 */
}

static void add_is_elementwise_and_may_alias(void **state)
{
    (void)state;
    float a[3] = {1, -2, 0.5f};
    const float b[3] = {0.25f, 2, -3};
    float y[3];
    vkv_ref_add(a, b, 3, y);
    assert_float_equal(y[0], 1.25f, 0);
    assert_float_equal(y[1], 0.0f, 0);
    assert_float_equal(y[2], -2.5f, 0);
    vkv_ref_add(a, b, 3, a);
    assert_memory_equal(a, y, sizeof y);
}

/* --------------------------------------------------------------- argmax */

static void argmax_ties_pick_lowest_index(void **state)
{
    (void)state;
    const float x[5 * 4] = {
        1, 3, 3, 2,
        -5, -5, -5, -5,
        0, -INFINITY, INFINITY, INFINITY,
        NAN, 1, 2, 2,
        -1, -0.5f, NAN, -0.75f,
    };
    uint32_t idx[5];
    vkv_ref_argmax(x, 5, 4, idx);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    assert_int_equal(idx[2], 2);
    assert_int_equal(idx[3], 2); /* NaN never wins */
    assert_int_equal(idx[4], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_rows_decodes_the_selected_rows),
        cmocka_unit_test(rms_norm_matches_hand_computed_rows),
        cmocka_unit_test(matmul_matches_hand_computed_f32_case),
        cmocka_unit_test(matmul_with_quantized_weight_matches_dequantize_then_dot),
        cmocka_unit_test(rope_interleaved_and_neox_rotate_different_pairs),
        cmocka_unit_test(rope_theta_applies_freq_scale_and_factors),
        cmocka_unit_test(rope_forward_then_inverse_is_identity),
        cmocka_unit_test(rope_applies_each_tokens_own_position),
        cmocka_unit_test(llama3_factors_match_hand_computed_values),
        cmocka_unit_test(llama3_factors_are_continuous_at_the_boundary_wavelengths),
        cmocka_unit_test(softmax_matches_hand_computed_row),
        cmocka_unit_test(softmax_causal_mask_with_offset),
        cmocka_unit_test(silu_mul_matches_hand_computed_values),
        cmocka_unit_test(add_is_elementwise_and_may_alias),
        cmocka_unit_test(argmax_ties_pick_lowest_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
