/* The references of ChunkKV, LagKV and RandomPress (src/press/chunkkv.c,
 * lagkv.c, random.c) on cases worked out by hand, and the counts their
 * selections keep: whole chunks (the partial last chunk counted as one),
 * LagKV's sinks and tail, a seeded random draw. No GPU is used. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kvlayout/kv_counts.h"
#include "press/press.h"
#include "ref/ref_select.h"

#define HD 4

/* A layer of n tokens with n_kv_head heads, f32 cache keys[n_kv_head][n][HD],
 * the values the same as the keys. */
static vkv_press_layer layer_f32(const float *keys, uint32_t n, uint32_t n_kv_head)
{
    return (vkv_press_layer){.layer = 0, .n_layer = 1, .n = n, .n_head = n_kv_head, .n_kv_head = n_kv_head,
                             .head_dim = HD, .n_ctx = n, .kv_type = VKV_F32, .k_host = keys, .v_host = keys};
}

static const vkv_press_ops *press(const char *name)
{
    const vkv_press_ops *ops = vkv_press_find(name);
    assert_non_null(ops);
    return ops;
}

/* The top-k mask of one row of n scores at the press's count for p_c. */
static uint32_t kept_mask(const vkv_press_ops *ops, const vkv_press_params *p, const float *row, uint32_t n,
                          uint32_t *mask)
{
    const uint32_t k = ops->n_kept ? ops->n_kept(p, 0, 1, n) : vkv_kv_n_kept(p->compression_ratio, n);
    assert_int_equal(vkv_ref_topk_select(row, 1, n, NULL, k, mask), VKV_OK);
    uint32_t sum = 0;
    for (uint32_t j = 0; j < n; j++) sum += mask[j];
    assert_int_equal(sum, k);
    return k;
}

/* A key of norm r along the first channel. */
static void set_norm(float *keys, uint32_t j, float r) { keys[(size_t)j * HD] = r; }

/* Chunks of 2 over 7 tokens: 3 whole chunks and a partial one, 4 in all; at
 * p_c 0.5 kvpress keeps int(4 x 0.5) = 2 chunks. KNorm's scores are minus
 * the norms, so the chunks score -1, -5, -2, -3 and chunks 0 and 2 stay. */
static void chunkkv_keeps_the_best_whole_chunks(void **state)
{
    (void)state;
    const float norms[7] = {1, 1, 5, 5, 2, 2, 3};
    float keys[2 * 7 * HD] = {0}, out[2 * 7];
    for (uint32_t h = 0; h < 2; h++)
        for (uint32_t j = 0; j < 7; j++) set_norm(keys + (size_t)h * 7 * HD, j, norms[j] * (h ? 2.0f : 1.0f));
    vkv_press_params p = vkv_press_params_default(0.5);
    p.chunk_length = 2;
    vkv_press_layer in = layer_f32(keys, 7, 2);
    const vkv_press_ops *ops = press("chunkkv-knorm");
    assert_int_equal(ops->score_ref(&p, &in, out), VKV_OK);
    /* summed over the two heads (norms x 1 and x 2), averaged over the chunk */
    const float want[7] = {-3, -3, -15, -15, -6, -6, -9};
    for (uint32_t h = 0; h < 2; h++)
        for (uint32_t j = 0; j < 7; j++) assert_float_equal(out[h * 7 + j], want[j], 1e-6);
    uint32_t mask[7];
    assert_int_equal(kept_mask(ops, &p, out, 7, mask), 4);
    const uint32_t kept[7] = {1, 1, 0, 0, 1, 1, 0};
    assert_memory_equal(mask, kept, sizeof kept);
    /* every head keeps the same chunks */
    assert_memory_equal(out, out + 7, 7 * sizeof *out);
}

/* The partial last chunk is scored by the mean of its own tokens and chosen
 * whole; the count stays kept chunks x chunk_length, the next-best chunk's
 * earliest tokens filling what the short chunk leaves (press/chunkkv.c). */
static void chunkkv_scores_the_partial_chunk_by_its_own_mean(void **state)
{
    (void)state;
    const float norms[7] = {1, 1, 5, 5, 2, 2, 0.5f};
    float keys[7 * HD] = {0}, out[7];
    for (uint32_t j = 0; j < 7; j++) set_norm(keys, j, norms[j]);
    vkv_press_params p = vkv_press_params_default(0.5);
    p.chunk_length = 2;
    vkv_press_layer in = layer_f32(keys, 7, 1);
    const vkv_press_ops *ops = press("chunkkv-knorm");
    assert_int_equal(ops->score_ref(&p, &in, out), VKV_OK);
    assert_float_equal(out[6], -0.5f, 1e-6);
    uint32_t mask[7];
    kept_mask(ops, &p, out, 7, mask);
    const uint32_t kept[7] = {1, 1, 0, 0, 1, 0, 1};
    assert_memory_equal(mask, kept, sizeof kept);
}

/* kvpress's chunk count: int(chunks (1 - p_c)) chunks, at least one; the
 * partial chunk counts; a context shorter than a chunk is the inner scorer's. */
static void chunkkv_counts_whole_chunks(void **state)
{
    (void)state;
    const vkv_press_ops *ops = press("chunkkv");
    vkv_press_params p = vkv_press_params_default(0.25);
    assert_int_equal(ops->n_kept(&p, 3, 8, 300), 220);   /* 15 chunks -> 11 */
    assert_int_equal(ops->n_kept(&p, 0, 8, 310), 240);   /* 16 chunks (one of 10) -> 12 */
    p.compression_ratio = 0.99;
    assert_int_equal(ops->n_kept(&p, 0, 8, 45), 20);     /* 3 chunks -> int(0.03) = 0 -> 1 */
    p.compression_ratio = 0.5;
    assert_int_equal(ops->n_kept(&p, 0, 8, 19), 9);      /* no whole chunk: int(19 x 0.5) */
    assert_int_equal(ops->n_kept(&p, 0, 8, 30), 20);     /* 2 chunks (one of 10) -> 1 whole chunk */
    /* No whole chunk: the inner scores unchanged. */
    float keys[3 * HD] = {0}, chunked[3], plain[3];
    for (uint32_t j = 0; j < 3; j++) set_norm(keys, j, 1.0f + j);
    vkv_press_layer in = layer_f32(keys, 3, 1);
    assert_int_equal(press("chunkkv-knorm")->score_ref(&p, &in, chunked), VKV_OK);
    assert_int_equal(press("knorm")->score_ref(&p, &in, plain), VKV_OK);
    assert_memory_equal(chunked, plain, sizeof plain);
}

/* chunkkv-NAME declares NAME's window and query mode; `chunkkv` is SnapKV's. */
static void chunkkv_carries_the_inner_scorers_window_and_mode(void **state)
{
    (void)state;
    size_t wrapped = 0;
    for (const vkv_press_ops *const *p = vkv_press_all(); *p; p++) {
        if (strncmp((*p)->name, "chunkkv", 7)) continue;
        const vkv_press_ops *inner = press((*p)->name[7] ? (*p)->name + 8 : "snapkv");
        assert_int_equal((*p)->window, inner->window);
        assert_int_equal((*p)->query_aware, inner->query_aware);
        assert_non_null((*p)->n_kept);
        wrapped++;
    }
    assert_true(wrapped >= 4);
}

/* LagKV's reference scores of n tokens of one head (keys and values
 * keys[n][HD]) with 1 sink and partitions of lag tokens, at p_c. */
static const vkv_press_ops *lagkv_scores(float *keys, uint32_t n, uint32_t lag, double pc, vkv_press_params *p,
                                         float *out)
{
    *p = vkv_press_params_default(pc);
    p->n_sink = 1;
    p->lag_size = lag;
    vkv_press_layer in = layer_f32(keys, n, 1);
    const vkv_press_ops *ops = press("lagkv");
    assert_int_equal(ops->score_ref(p, &in, out), VKV_OK);
    return ops;
}

/* LagKV with 1 sink and partitions of 2 over 6 tokens: partition 0 (tokens 1,
 * 2) is scored against partition 1 (tokens 3, 4, the reference, range [0, 1]
 * in every channel); tokens 3.. are the tail. Token 1's key is constant (std
 * 0), token 2's is (0, 1, 0, 1) (std sqrt(1/3)): ranks 0 and 1. */
static void lagkv_ranks_a_partition_against_the_next(void **state)
{
    (void)state;
    float keys[6 * HD] = {
        9, 9, 9, 9, /* sink */
        0, 0, 0, 0, /**/ 0, 1, 0, 1, /* partition 0 */
        0, 0, 0, 0, /**/ 1, 1, 1, 1, /* partition 1, the reference */
        7, 3, 5, 1, /* after the last whole partition */
    };
    float out[6];
    vkv_press_params p;
    const vkv_press_ops *ops = lagkv_scores(keys, 6, 2, 0.5, &p, out);
    assert_true(isinf(out[0]) && out[0] > 0);
    assert_float_equal(out[1], 0, 0);
    assert_float_equal(out[2], 1, 0);
    for (uint32_t j = 3; j < 6; j++) assert_float_equal(out[j], j, 0); /* the tail, above every rank */
    /* p_c 0.5 keeps 3: the sink and the latest tail tokens */
    uint32_t mask[6];
    kept_mask(ops, &p, out, 6, mask);
    const uint32_t kept[6] = {1, 0, 0, 0, 1, 1};
    assert_memory_equal(mask, kept, sizeof kept);
    /* p_c 0.2 keeps 4: the sink and the tail whole */
    p.compression_ratio = 0.2;
    kept_mask(ops, &p, out, 6, mask);
    const uint32_t kept_tail[6] = {1, 0, 0, 1, 1, 1};
    assert_memory_equal(mask, kept_tail, sizeof kept_tail);

    /* A reference with an empty range in every channel: both tokens score the
     * same, the earlier ranks higher. */
    for (uint32_t d = 0; d < HD; d++) keys[4 * HD + d] = 0;
    lagkv_scores(keys, 6, 2, 0.5, &p, out);
    assert_float_equal(out[1], 1, 0);
    assert_float_equal(out[2], 0, 0);
}

/* Shorter than n_sink + 2 lag_size: no partition to score, the sinks and the
 * latest tokens stay (StreamingLLM's scores). */
static void lagkv_without_a_scored_partition_keeps_sinks_and_latest(void **state)
{
    (void)state;
    float keys[5 * HD] = {0}, out[5];
    vkv_press_params p;
    const vkv_press_ops *ops = lagkv_scores(keys, 5, 4, 0.4, &p, out);
    assert_true(isinf(out[0]));
    for (uint32_t j = 1; j < 5; j++) assert_float_equal(out[j], j, 0);
    uint32_t mask[5];
    assert_int_equal(kept_mask(ops, &p, out, 5, mask), 3);
    const uint32_t kept[5] = {1, 0, 0, 1, 1};
    assert_memory_equal(mask, kept, sizeof kept);
}

/* The defaults are kvpress's: 4 sinks, partitions of 128, chunks of 20, seed 42. */
static void defaults_are_kvpress(void **state)
{
    (void)state;
    vkv_press_params p = vkv_press_params_default(0.5);
    assert_int_equal(p.n_sink, 4);
    assert_int_equal(p.lag_size, 128);
    assert_int_equal(p.chunk_length, 20);
    assert_int_equal(p.seed, 42);
}

/* Uniform in [0, 1), the same for the same (seed, sample, layer), another
 * draw for another seed, sample or layer (seed 0 included: a seed like any
 * other); the count is kvpress's. */
static void random_is_seeded_per_sample_and_layer(void **state)
{
    (void)state;
    enum { N = 500 };
    static float keys[2 * N * HD], a[2 * N], b[2 * N], c[2 * N], d[2 * N], z[2 * N];
    vkv_press_params p = vkv_press_params_default(0.5);
    vkv_press_layer in = layer_f32(keys, N, 2);
    const vkv_press_ops *ops = press("random");
    assert_int_equal(ops->score_ref(&p, &in, a), VKV_OK);
    assert_int_equal(ops->score_ref(&p, &in, b), VKV_OK);
    assert_memory_equal(a, b, sizeof a);
    double mean = 0;
    for (uint32_t i = 0; i < 2 * N; i++) {
        assert_true(a[i] >= 0 && a[i] < 1);
        mean += a[i] / (2 * N);
    }
    assert_true(fabs(mean - 0.5) < 0.05);
    assert_true(memcmp(a, a + N, N * sizeof *a)); /* each head its own draw */
    p.seed = 7;
    assert_int_equal(ops->score_ref(&p, &in, b), VKV_OK);
    in.layer = 1;
    p.seed = 42;
    assert_int_equal(ops->score_ref(&p, &in, c), VKV_OK);
    in.layer = 0;
    p.sample = 1; /* the next sample of an evaluation: its own draw */
    assert_int_equal(ops->score_ref(&p, &in, d), VKV_OK);
    p.sample = 0;
    p.seed = 0;
    assert_int_equal(ops->score_ref(&p, &in, z), VKV_OK);
    size_t same_seed = 0, same_layer = 0, same_sample = 0, same_zero = 0;
    for (uint32_t i = 0; i < 2 * N; i++) {
        same_seed += a[i] == b[i];
        same_layer += a[i] == c[i];
        same_sample += a[i] == d[i];
        same_zero += a[i] == z[i];
    }
    assert_true(same_seed < 5 && same_layer < 5 && same_sample < 5 && same_zero < 5);
    p.seed = 42;
    uint32_t mask[N];
    assert_int_equal(kept_mask(ops, &p, a, N, mask), 250);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunkkv_keeps_the_best_whole_chunks),
        cmocka_unit_test(chunkkv_scores_the_partial_chunk_by_its_own_mean),
        cmocka_unit_test(chunkkv_counts_whole_chunks),
        cmocka_unit_test(chunkkv_carries_the_inner_scorers_window_and_mode),
        cmocka_unit_test(lagkv_ranks_a_partition_against_the_next),
        cmocka_unit_test(lagkv_without_a_scored_partition_keeps_sinks_and_latest),
        cmocka_unit_test(defaults_are_kvpress),
        cmocka_unit_test(random_is_seeded_per_sample_and_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
