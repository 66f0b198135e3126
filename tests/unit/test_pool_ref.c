/* VECTOR's pool scopes (src/ref/ref_pool.c, the oracle of the device's
 * selection; docs/ARCHITECTURE.md §2): for each scope, each pool's counts
 * follow vkv_kv_tier_counts, the byte equation holds exactly (keys K_S + a_S,
 * values K_S - a_S: 2 K_S rows, the eviction baseline's), the scorer's kept
 * set is inside the pool, p_a = 0 gives the baseline, and the tiers equal a
 * naive re-implementation written here from the rules. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/rng.h"
#include "kvlayout/kv_counts.h"
#include "kvlayout/kv_layout.h"
#include "ref/ref_pool.h"
#include "ref/ref_select.h"

#define L 4
#define H 3
#define N 57

typedef enum { KEPT_UNIFORM, KEPT_PYRAMID, KEPT_GLOBAL } kept_shape;

typedef struct model_data {
    float scores[L * H * N], eps[L * H * N];
    uint32_t kept[L * H];
} model_data;

static void make_data(model_data *d, kept_shape shape, uint64_t seed)
{
    vkv_rng rng = vkv_rng_new(seed);
    for (size_t i = 0; i < L * H * N; i++) {
        /* 9 score values and 7 residual values: ties everywhere */
        d->scores[i] = roundf(vkv_rng_uniform(&rng, 0, 1) * 8) / 8;
        d->eps[i] = roundf(vkv_rng_uniform(&rng, 0, 1) * 6) / 6;
    }
    d->scores[5] = INFINITY; /* a forced keep, as SnapKV's window */
    d->eps[11] = NAN;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t h = 0; h < H; h++)
            d->kept[l * H + h] = shape == KEPT_UNIFORM ? vkv_kv_n_kept(0.5, N)
                                 : shape == KEPT_PYRAMID ? N - 1 - 12 * l
                                                         : vkv_rng_below(&rng, N + 1);
}

/* (key descending, index ascending); NaN keys last. */
typedef struct ranked {
    double key;
    uint32_t idx;
} ranked;

static int by_key_desc(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static double rank_key(float x) { return isnan(x) ? -INFINITY : x; }

/* The rules of ref_pool.h written out naively over one pool of `rows` rows. */
static void naive_pool(const model_data *d, uint32_t r0, uint32_t rows, double p_a, bool vector, uint8_t *tiers)
{
    const uint32_t total = rows * N;
    ranked *rk = malloc(sizeof *rk * total);
    uint8_t *in_b = calloc(total, 1), *in_pool = calloc(total, 1);
    assert_true(rk && in_b && in_pool);
    uint64_t k_sum = 0;
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t j = 0; j < N; j++) rk[j] = (ranked){rank_key(d->scores[(r0 + r) * N + j]), j};
        qsort(rk, N, sizeof *rk, by_key_desc);
        for (uint32_t i = 0; i < d->kept[r0 + r]; i++) in_b[r * N + rk[i].idx] = 1;
        k_sum += d->kept[r0 + r];
    }
    vkv_tier_counts tc = vkv_kv_tier_counts(total, (uint32_t)k_sum, p_a, vector);
    for (uint32_t i = 0; i < total; i++) {
        float x = d->scores[r0 * N + i];
        rk[i] = (ranked){in_b[i] ? INFINITY : (isnan(x) ? -INFINITY : fmin(x, FLT_MAX)), i};
    }
    qsort(rk, total, sizeof *rk, by_key_desc);
    for (uint32_t i = 0; i < tc.pool; i++) in_pool[rk[i].idx] = 1;
    for (uint32_t i = 0; i < total; i++) {
        float e = d->eps[r0 * N + i];
        rk[i] = (ranked){!in_pool[i] ? -INFINITY : isnan(e) ? -FLT_MAX : fmax(-(double)e, -FLT_MAX), i};
    }
    qsort(rk, total, sizeof *rk, by_key_desc);
    for (uint32_t i = 0; i < total; i++) tiers[i] = in_pool[i] ? VKV_TIER_RETAINED : VKV_TIER_EVICTED;
    for (uint32_t i = 0; i < tc.approximated; i++) tiers[rk[i].idx] = VKV_TIER_APPROXIMATED;
    free(rk);
    free(in_b);
    free(in_pool);
}

static void check_scope(vkv_pool_scope scope, kept_shape shape, double p_a, uint64_t seed)
{
    static model_data d;
    static uint8_t tiers[L * H * N], want[L * H * N], baseline[L * H * N];
    make_data(&d, shape, seed);
    assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, p_a, true, scope, tiers), VKV_OK);
    assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0, true, scope, baseline), VKV_OK);
    const uint32_t rows = vkv_pool_rows(scope, L, H);
    for (uint32_t r0 = 0; r0 < L * H; r0 += rows) {
        naive_pool(&d, r0, rows, p_a, true, want + (size_t)r0 * N);
        uint64_t k_sum = 0, ret = 0, apx = 0;
        for (uint32_t r = r0; r < r0 + rows; r++) k_sum += d.kept[r];
        for (size_t i = (size_t)r0 * N; i < (size_t)(r0 + rows) * N; i++) {
            ret += tiers[i] == VKV_TIER_RETAINED;
            apx += tiers[i] == VKV_TIER_APPROXIMATED;
            /* the scorer's kept set (the p_a = 0 selection) is inside the pool */
            if (baseline[i] != VKV_TIER_EVICTED) assert_int_not_equal(tiers[i], VKV_TIER_EVICTED);
            assert_int_not_equal(baseline[i], VKV_TIER_APPROXIMATED);
        }
        vkv_tier_counts tc = vkv_kv_tier_counts(rows * N, (uint32_t)k_sum, p_a, true);
        assert_int_equal(apx, tc.approximated);
        assert_int_equal(ret, tc.retained);
        /* the byte equation: keys K_S + a_S, values K_S - a_S, 2 K_S rows in all */
        assert_int_equal(ret + apx, k_sum + tc.a);
        assert_int_equal(ret, k_sum - tc.a);
        assert_int_equal(2 * ret + apx, 2 * k_sum);
        if (scope == VKV_POOL_ROW) assert_int_equal(tc.a, vkv_kv_tier_counts(N, d.kept[r0], p_a, true).a);
    }
    assert_memory_equal(tiers, want, sizeof tiers);
}

static void every_scope_keeps_the_byte_equation_and_the_rules(void **state)
{
    (void)state;
    const vkv_pool_scope scopes[] = {VKV_POOL_ROW, VKV_POOL_LAYER, VKV_POOL_GLOBAL};
    const double pas[] = {0.05, 0.25, 0.1};
    for (size_t s = 0; s < 3; s++)
        for (int shape = KEPT_UNIFORM; shape <= KEPT_GLOBAL; shape++)
            for (size_t p = 0; p < 3; p++) check_scope(scopes[s], (kept_shape)shape, pas[p], 100 * s + 10 * shape + p);
}

static void pa_zero_or_no_vector_gives_the_baseline(void **state)
{
    (void)state;
    static model_data d;
    static uint8_t t0[L * H * N], t1[L * H * N], t2[L * H * N];
    make_data(&d, KEPT_PYRAMID, 7);
    for (vkv_pool_scope s = VKV_POOL_ROW; s <= VKV_POOL_GLOBAL; s++) {
        assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0, true, s, t0), VKV_OK);
        assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0.2, false, s, t1), VKV_OK);
        assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0, true, VKV_POOL_ROW, t2), VKV_OK);
        assert_memory_equal(t0, t1, sizeof t0);
        assert_memory_equal(t0, t2, sizeof t0);
        for (uint32_t r = 0; r < L * H; r++) {
            uint32_t c = 0;
            for (uint32_t j = 0; j < N; j++) c += t0[r * N + j] == VKV_TIER_RETAINED;
            assert_int_equal(c, d.kept[r]);
        }
    }
}

/* A layer whose budget is small shares its layer's (or the model's) pool:
 * the row scope clamps a to each row's kept count, the wider scopes do not. */
static void wider_scopes_spread_the_budget_over_rows(void **state)
{
    (void)state;
    static model_data d;
    static uint8_t t[L * H * N];
    make_data(&d, KEPT_PYRAMID, 9);
    for (uint32_t h = 0; h < H; h++) d.kept[(L - 1) * H + h] = 2; /* the deepest layer keeps 2 per head */
    uint64_t apx_row = 0, apx_global = 0, k_sum = 0;
    assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0.2, true, VKV_POOL_ROW, t), VKV_OK);
    for (size_t i = 0; i < sizeof t; i++) apx_row += t[i] == VKV_TIER_APPROXIMATED;
    assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, 0.2, true, VKV_POOL_GLOBAL, t), VKV_OK);
    for (size_t i = 0; i < sizeof t; i++) apx_global += t[i] == VKV_TIER_APPROXIMATED;
    for (uint32_t r = 0; r < L * H; r++) k_sum += d.kept[r];
    /* row: a = min(floor(0.2 * 57) = 11, kept) per row; global: floor(0.2 * 684) = 136 */
    assert_int_equal(apx_global, 2 * 136);
    assert_true(apx_row < apx_global);
    assert_true(k_sum >= 136);
}

/* Tokens of tiers (n_all of them) off the paper's split at p_c, p_a
 * (docs/ARCHITECTURE.md §2): the pool's, a's (approximated / 2) and the
 * retained tier's distance from (1 - p_c + p_a), p_a and (1 - p_c - p_a)
 * times n_all. */
typedef struct split_error {
    double pool, a, retained;
} split_error;

static split_error paper_split_error(const uint8_t *tiers, size_t n_all, double p_c, double p_a)
{
    uint64_t ret = 0, apx = 0;
    for (size_t i = 0; i < n_all; i++) {
        ret += tiers[i] == VKV_TIER_RETAINED;
        apx += tiers[i] == VKV_TIER_APPROXIMATED;
    }
    const vkv_tier_fractions paper = vkv_kv_paper_split(p_c, p_a, true);
    return (split_error){.pool = (double)(ret + apx) - (1 - p_c + p_a) * n_all,
                         .a = apx / 2.0 - paper.approximated / 2 * n_all,
                         .retained = (double)ret - paper.retained * n_all};
}

/* The scorer's kept counts of KVzip (kvpress's global top-k: int(n_all p_c)
 * evicted) and of a pyramid-shaped budget over the same total, whose deepest
 * layer keeps a few tokens per head. */
static void kept_kvzip(const model_data *d, double p_c, uint32_t *kept)
{
    static uint32_t mask[L * H * N];
    const uint32_t n_all = L * H * N;
    assert_int_equal(vkv_ref_topk_select(d->scores, 1, n_all, NULL,
                                         (uint32_t)(n_all - vkv_kv_n_evicted_global(n_all, p_c)), mask), VKV_OK);
    vkv_ref_mask_row_counts(mask, L * H, N, kept);
}

static void kept_pyramid(double p_c, uint32_t *kept)
{
    const uint32_t n_all = L * H * N, per_row = vkv_kv_n_kept(p_c, N);
    const uint32_t down = (per_row - 1) / 3, up = (N - 1 - per_row) / 3, step = down < up ? down : up;
    /* L = 4 layers: per_row + 3, 1, -1, -3 steps; then the total's remainder, one token per row */
    for (uint32_t r = 0; r < L * H; r++) kept[r] = per_row + (3 - 2 * (r / H)) * step;
    const uint32_t remainder = (uint32_t)(n_all - vkv_kv_n_evicted_global(n_all, p_c)) - L * H * per_row;
    assert_true(remainder <= L * H);
    for (uint32_t r = 0; r < remainder; r++) kept[r]++;
}

/* The global scope reaches the paper's split with a non-uniform budget: the
 * pool and a within one token of (1 - p_c + p_a) n and p_a n (each is the
 * floor of its product over the whole model), the retained tier, their
 * difference, within two; the row scope falls short where a row keeps less
 * than p_a n. */
static void global_scope_reaches_the_papers_split(void **state)
{
    (void)state;
    static model_data d;
    static uint8_t t[L * H * N];
    const double pcs[] = {0.25, 0.5, 0.75, 0.9};
    for (size_t c = 0; c < sizeof pcs / sizeof *pcs; c++) {
        const double p_c = pcs[c], p_a = vkv_kv_default_pa(p_c);
        for (int pyramid = 0; pyramid < 2; pyramid++) {
            make_data(&d, KEPT_UNIFORM, 31 + c);
            if (pyramid) kept_pyramid(p_c, d.kept);
            else kept_kvzip(&d, p_c, d.kept);
            assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, p_a, true, VKV_POOL_GLOBAL, t),
                             VKV_OK);
            const split_error e = paper_split_error(t, L * H * N, p_c, p_a);
            assert_true(fabs(e.pool) < 1 + 1e-9);
            assert_true(fabs(e.a) < 1 + 1e-9);
            assert_true(fabs(e.retained) < 2 + 1e-9);
            if (pyramid && p_c >= 0.5) {
                assert_int_equal(vkv_ref_pool_allocate(d.scores, d.eps, d.kept, L, H, N, p_a, true, VKV_POOL_ROW, t),
                                 VKV_OK);
                assert_true(paper_split_error(t, L * H * N, p_c, p_a).a <= -H); /* a deep row's cap a <= n_kept */
            }
        }
    }
}

/* kvpress's KVzip evicts int(n_all p_c): none when n_all p_c < 1, so every
 * row keeps all and the tiers are the uniform count's. */
static void kvzip_count_below_one_token_evicts_nothing(void **state)
{
    (void)state;
    static model_data d;
    make_data(&d, KEPT_UNIFORM, 5);
    const double p_c = 0.5 / (L * H * N); /* n_all p_c = 0.5 */
    assert_int_equal(vkv_kv_n_evicted_global(L * H * N, p_c), 0);
    kept_kvzip(&d, p_c, d.kept);
    for (uint32_t r = 0; r < L * H; r++) assert_int_equal(d.kept[r], N);
    assert_int_equal(vkv_kv_n_evicted_global(L * H * N, 1.0 / (L * H * N)), 1);
    assert_int_equal(vkv_kv_n_evicted_global(L * H * N, 1.5 / (L * H * N)), 1);
}

static void scope_names_and_rows(void **state)
{
    (void)state;
    assert_string_equal(vkv_pool_scope_name(VKV_POOL_ROW), "row");
    assert_string_equal(vkv_pool_scope_name(VKV_POOL_LAYER), "layer");
    assert_string_equal(vkv_pool_scope_name(VKV_POOL_GLOBAL), "global");
    assert_int_equal(vkv_pool_rows(VKV_POOL_ROW, 32, 8), 1);
    assert_int_equal(vkv_pool_rows(VKV_POOL_LAYER, 32, 8), 8);
    assert_int_equal(vkv_pool_rows(VKV_POOL_GLOBAL, 32, 8), 256);
    assert_int_equal(vkv_ref_pool_allocate(NULL, NULL, NULL, 1, 1, 1, 0, true, VKV_POOL_DEFAULT, NULL), VKV_ERR_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_scope_keeps_the_byte_equation_and_the_rules),
        cmocka_unit_test(pa_zero_or_no_vector_gives_the_baseline),
        cmocka_unit_test(wider_scopes_spread_the_budget_over_rows),
        cmocka_unit_test(global_scope_reaches_the_papers_split),
        cmocka_unit_test(kvzip_count_below_one_token_evicts_nothing),
        cmocka_unit_test(scope_names_and_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
