/* OLS calibration numerics (calib/ols.h), no GPU: the solver recovers a known
 * map from streamed sums, Cholesky rejects a singular Gram without a ridge and
 * accepts it with one, the residual and R² from the sums equal a direct
 * computation over the tokens, Moore-Penrose is exact for an invertible W_K,
 * and the gram reference honours strides, blocks and x_ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "calib/ols.h"
#include "core/rng.h"

#define DK 8
#define DV 6

/* Streamed sums of one token set (what the GPU pass accumulates). */
typedef struct sums {
    double g[DK * DK], c[DK * DV], v_sq, v_sum[DV], n;
} sums;

static void add_token(sums *s, const double *k, const double *v)
{
    for (int i = 0; i < DK; i++) {
        for (int j = 0; j < DK; j++) s->g[i * DK + j] += k[i] * k[j];
        for (int j = 0; j < DV; j++) s->c[i * DV + j] += k[i] * v[j];
    }
    for (int j = 0; j < DV; j++) {
        s->v_sq += v[j] * v[j];
        s->v_sum[j] += v[j];
    }
    s->n++;
}

static vkv_ols_sums view(const sums *s)
{
    return (vkv_ols_sums){.g = s->g, .ldg = DK, .c = s->c, .ldc = DV, .v_sq = s->v_sq, .v_sum = s->v_sum, .n = s->n};
}

/* k: correlated, non-centred keys; v = A k + b + noise. */
static void make_token(vkv_rng *r, double a[DV][DK], const double *b, double noise, double *k, double *v)
{
    double z[DK];
    for (int i = 0; i < DK; i++) z[i] = vkv_rng_unit(r) * 2 - 1;
    for (int i = 0; i < DK; i++) k[i] = z[i] + 0.5 * z[(i + 1) % DK] + 0.3 * (i % 3);
    for (int j = 0; j < DV; j++) {
        double s = b ? b[j] : 0;
        for (int i = 0; i < DK; i++) s += a[j][i] * k[i];
        v[j] = s + noise * (vkv_rng_unit(r) * 2 - 1);
    }
}

static void random_map(vkv_rng *r, double a[DV][DK])
{
    for (int j = 0; j < DV; j++)
        for (int i = 0; i < DK; i++) a[j][i] = vkv_rng_unit(r) * 2 - 1;
}

static void solver_recovers_a_known_map_with_small_noise(void **state)
{
    (void)state;
    vkv_rng r = vkv_rng_new(11);
    double a[DV][DK], k[DK], v[DV], w[DV * DK];
    random_map(&r, a);
    sums *train = calloc(1, sizeof *train), *held = calloc(1, sizeof *held);
    assert_non_null(train);
    assert_non_null(held);
    for (int t = 0; t < 20000; t++) {
        make_token(&r, a, NULL, 1e-3, k, v);
        add_token(t % 5 == 4 ? held : train, k, v);
    }
    vkv_ols_sums ts = view(train), hs = view(held);
    assert_int_equal(vkv_ols_fit(&ts, DK, DV, 0.0, "test", w), VKV_OK);
    double num = 0, den = 0;
    for (int j = 0; j < DV; j++)
        for (int i = 0; i < DK; i++) {
            num += (w[j * DK + i] - a[j][i]) * (w[j * DK + i] - a[j][i]);
            den += a[j][i] * a[j][i];
        }
    assert_true(sqrt(num / den) < 1e-3);
    double r2 = vkv_ols_r2(&hs, DK, DV, w);
    assert_true(r2 > 0.999);
    assert_true(r2 <= 1.0);
    /* A tiny relative ridge barely moves the answer. */
    double w2[DV * DK];
    assert_int_equal(vkv_ols_fit(&ts, DK, DV, 1e-9, "test", w2), VKV_OK);
    for (int i = 0; i < DV * DK; i++) assert_true(fabs(w2[i] - w[i]) < 1e-6);
    free(train);
    free(held);
}

static void cholesky_rejects_singular_gram_without_ridge_and_accepts_it_with_one(void **state)
{
    (void)state;
    vkv_rng r = vkv_rng_new(5);
    double a[DV][DK], k[DK], v[DV], w[DV * DK];
    random_map(&r, a);
    sums *s = calloc(1, sizeof *s);
    assert_non_null(s);
    for (int t = 0; t < 1000; t++) {
        make_token(&r, a, NULL, 0.01, k, v);
        k[DK - 1] = k[0] - 2 * k[1]; /* keys span DK - 1 dimensions */
        for (int j = 0; j < DV; j++) {
            v[j] = 0.01 * (vkv_rng_unit(&r) * 2 - 1);
            for (int i = 0; i < DK; i++) v[j] += a[j][i] * k[i];
        }
        add_token(s, k, v);
    }
    vkv_ols_sums vs = view(s);
    assert_int_equal(vkv_ols_fit(&vs, DK, DV, 0.0, "layer 3 KV head 1", w), VKV_ERR_CHECK);
    assert_non_null(strstr(vkv_last_error(), "layer 3 KV head 1"));
    assert_non_null(strstr(vkv_last_error(), "not positive definite"));
    assert_non_null(strstr(vkv_last_error(), "--ridge"));
    assert_int_equal(vkv_ols_fit(&vs, DK, DV, 1e-6, "layer 3 KV head 1", w), VKV_OK);
    for (int i = 0; i < DV * DK; i++) assert_true(isfinite(w[i]));
    /* The ridge solution still predicts v (the null direction is harmless). */
    assert_true(vkv_ols_r2(&vs, DK, DV, w) > 0.99);

    /* The factorisation itself: a zero matrix fails at pivot 1, an SPD one
     * factors and solves. */
    double z[4] = {0, 0, 0, 0}, piv = 1;
    assert_int_equal(vkv_cholesky(z, 2, &piv), 1);
    assert_true(piv <= 0);
    double m[9] = {4, 2, 0.4, 2, 5, 1, 0.4, 1, 3}, m0[9], b[3] = {1, 2, 3}, x[3];
    memcpy(m0, m, sizeof m);
    memcpy(x, b, sizeof b);
    assert_int_equal(vkv_cholesky(m, 3, NULL), 0);
    vkv_cholesky_solve(m, 3, x, 1, 1);
    for (int i = 0; i < 3; i++) {
        double s2 = 0;
        for (int j = 0; j < 3; j++) s2 += m0[i * 3 + j] * x[j];
        assert_true(fabs(s2 - b[i]) < 1e-12);
    }
    free(s);
}

static void r2_from_grams_equals_direct_computation(void **state)
{
    (void)state;
    vkv_rng r = vkv_rng_new(99);
    double a[DV][DK], bias[DV] = {0.5, -1, 2, 0, 0.25, -0.75};
    random_map(&r, a);
    enum { N = 3000 };
    double *ks = malloc(sizeof *ks * N * DK), *vs = malloc(sizeof *vs * N * DV);
    sums *s = calloc(1, sizeof *s);
    assert_non_null(ks);
    assert_non_null(vs);
    assert_non_null(s);
    for (int t = 0; t < N; t++) {
        make_token(&r, a, bias, 0.3, ks + t * DK, vs + t * DV);
        add_token(s, ks + t * DK, vs + t * DV);
    }
    /* Any map, not only the optimum (here: a perturbed truth). */
    double w[DV * DK];
    for (int j = 0; j < DV; j++)
        for (int i = 0; i < DK; i++) w[j * DK + i] = a[j][i] + 0.2 * (vkv_rng_unit(&r) - 0.5);
    double res = 0, mean[DV] = {0}, tot = 0;
    for (int t = 0; t < N; t++)
        for (int j = 0; j < DV; j++) {
            double p = 0;
            for (int i = 0; i < DK; i++) p += w[j * DK + i] * ks[t * DK + i];
            double e = vs[t * DV + j] - p;
            res += e * e;
            mean[j] += vs[t * DV + j] / N;
        }
    for (int t = 0; t < N; t++)
        for (int j = 0; j < DV; j++) tot += (vs[t * DV + j] - mean[j]) * (vs[t * DV + j] - mean[j]);
    vkv_ols_sums v = view(s);
    assert_true(fabs(vkv_ols_residual(&v, DK, DV, w) - res) <= 1e-9 * res);
    assert_true(fabs(vkv_ols_total(&v, DV) - tot) <= 1e-9 * tot);
    assert_true(fabs(vkv_ols_r2(&v, DK, DV, w) - (1 - res / tot)) < 1e-9);
    free(ks);
    free(vs);
    free(s);
}

static void moore_penrose_is_exact_for_an_invertible_wk(void **state)
{
    (void)state;
    /* n_embd = d_k: W_K is square, k = W_K x, v = W_V x, so v = W_V W_K^-1 k. */
    vkv_rng r = vkv_rng_new(1);
    double wk[DK * DK], wv[DV * DK], w[DV * DK];
    for (int i = 0; i < DK * DK; i++) wk[i] = (vkv_rng_unit(&r) - 0.5) + (i % (DK + 1) == 0 ? 2.0 : 0.0);
    for (int i = 0; i < DV * DK; i++) wv[i] = vkv_rng_unit(&r) - 0.5;
    assert_int_equal(vkv_ols_moore_penrose(wk, wv, DK, DV, DK, w), VKV_OK);
    sums *s = calloc(1, sizeof *s);
    assert_non_null(s);
    for (int t = 0; t < 500; t++) {
        double x[DK], k[DK], v[DV];
        for (int i = 0; i < DK; i++) x[i] = vkv_rng_unit(&r) - 0.5;
        for (int i = 0; i < DK; i++) {
            k[i] = 0;
            for (int e = 0; e < DK; e++) k[i] += wk[i * DK + e] * x[e];
        }
        for (int j = 0; j < DV; j++) {
            v[j] = 0;
            for (int e = 0; e < DK; e++) v[j] += wv[j * DK + e] * x[e];
        }
        add_token(s, k, v);
    }
    vkv_ols_sums v = view(s);
    assert_true(vkv_ols_r2(&v, DK, DV, w) > 1 - 1e-9);
    /* A rank-deficient W_K is refused. */
    for (int e = 0; e < DK; e++) wk[DK + e] = 2 * wk[e];
    assert_int_equal(vkv_ols_moore_penrose(wk, wv, DK, DV, DK, w), VKV_ERR_CHECK);
    free(s);
}

static void ref_gram_honours_strides_blocks_and_ones(void **state)
{
    (void)state;
    /* x, y: 3 tokens x 4 columns: x[t][c] = t + 10c, y[t][c] = 1 + t*c. */
    float x[12], y[12];
    for (int t = 0; t < 3; t++)
        for (int c = 0; c < 4; c++) {
            x[t * 4 + c] = (float)(t + 10 * c);
            y[t * 4 + c] = (float)(1 + t * c);
        }
    /* Two blocks of [2, 1]: block b uses x columns 2b..2b+1 and y column 1+b. */
    vkv_gram_params p = {.n_tok = 3, .m = 2, .n = 1, .ldx = 4, .ldy = 4, .x0 = 0, .y0 = 1, .x_step = 2, .y_step = 1,
                         .n_blocks = 2};
    double out[4];
    vkv_ref_gram(&p, x, y, out);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++) {
            double want = 0;
            for (int t = 0; t < 3; t++) want += (double)(t + 10 * (2 * b + i)) * (1 + t * (1 + b));
            assert_true(out[b * 2 + i] == want);
        }
    vkv_gram_params q = {.n_tok = 3, .m = 1, .n = 4, .ldy = 4, .n_blocks = 1, .x_ones = true};
    vkv_ref_gram(&q, NULL, y, out);
    for (int c = 0; c < 4; c++) assert_true(out[c] == 3 + 3.0 * c);
}

static void fnv1a_matches_published_vectors(void **state)
{
    (void)state;
    assert_true(vkv_fnv1a(VKV_FNV1A_INIT, "", 0) == 0xcbf29ce484222325ull);
    assert_true(vkv_fnv1a(VKV_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(vkv_fnv1a(VKV_FNV1A_INIT, "foobar", 6) == 0x85944171f73967e8ull);
    /* Streaming in pieces equals one call. */
    assert_true(vkv_fnv1a(vkv_fnv1a(VKV_FNV1A_INIT, "foo", 3), "bar", 3) == 0x85944171f73967e8ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(solver_recovers_a_known_map_with_small_noise),
        cmocka_unit_test(cholesky_rejects_singular_gram_without_ridge_and_accepts_it_with_one),
        cmocka_unit_test(r2_from_grams_equals_direct_computation),
        cmocka_unit_test(moore_penrose_is_exact_for_an_invertible_wk),
        cmocka_unit_test(ref_gram_honours_strides_blocks_and_ones),
        cmocka_unit_test(fnv1a_matches_published_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
