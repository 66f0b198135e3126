/* Reference attention (ref/ref_attn.h): hand-checkable cases for the causal
 * mask, GQA head mapping, the softmax and the KV cache storage helpers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/fp16.h"
#include "ref/ref_attn.h"

#define HD 4

/* A cache [n_kv_head, n_ctx, HD] f32 whose element (h, j, d) is h*100 + j*10 + d. */
static void fill_pattern(float *cache, uint32_t n_kv_head, uint32_t n_ctx)
{
    for (uint32_t h = 0; h < n_kv_head; h++)
        for (uint32_t j = 0; j < n_ctx; j++)
            for (uint32_t d = 0; d < HD; d++) cache[((size_t)h * n_ctx + j) * HD + d] = (float)(h * 100 + j * 10 + d);
}

static void attention_with_one_visible_slot_returns_its_value(void **state)
{
    (void)state;
    float k[1 * 8 * HD], v[1 * 8 * HD], q[HD] = {0.3f, -1.0f, 2.0f, 0.5f}, out[HD];
    fill_pattern(k, 1, 8);
    fill_pattern(v, 1, 8);
    vkv_attn_params p = {.n_q = 1, .n_head = 1, .n_kv_head = 1, .head_dim = HD, .n_ctx_max = 8, .n_kv = 5,
                         .pos0 = 0, .scale = 0.5f, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_ref_attention(&p, q, k, v, out); /* position 0 sees slot 0 only */
    for (int d = 0; d < HD; d++) assert_float_equal(out[d], v[d], 0.0);
}

static void attention_with_zero_query_averages_the_causally_visible_slots(void **state)
{
    (void)state;
    /* q = 0: equal scores, so each output is the mean of the visible values.
     * Query i at position 2 + i sees slots 0..2+i, capped by n_kv = 4. */
    float k[8 * HD], v[8 * HD], q[3 * HD] = {0}, out[3 * HD];
    fill_pattern(k, 1, 8);
    fill_pattern(v, 1, 8);
    vkv_attn_params p = {.n_q = 3, .n_head = 1, .n_kv_head = 1, .head_dim = HD, .n_ctx_max = 8, .n_kv = 4,
                         .pos0 = 2, .scale = 1.0f, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_ref_attention(&p, q, k, v, out);
    for (int d = 0; d < HD; d++) {
        assert_float_equal(out[0 * HD + d], 10.0f + d, 1e-5); /* slots 0..2: mean j = 1 */
        assert_float_equal(out[1 * HD + d], 15.0f + d, 1e-5); /* slots 0..3: mean j = 1.5 */
        assert_float_equal(out[2 * HD + d], 15.0f + d, 1e-5); /* position 4, but only 4 valid slots */
    }
}

static void attention_maps_query_heads_onto_their_kv_head(void **state)
{
    (void)state;
    /* 4 query heads over 2 KV heads: heads 0, 1 read KV head 0; heads 2, 3 read KV head 1. */
    float k[2 * 4 * HD], v[2 * 4 * HD], q[4 * HD] = {0}, out[4 * HD];
    fill_pattern(k, 2, 4);
    fill_pattern(v, 2, 4);
    vkv_attn_params p = {.n_q = 1, .n_head = 4, .n_kv_head = 2, .head_dim = HD, .n_ctx_max = 4, .n_kv = 2,
                         .pos0 = 1, .scale = 1.0f, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_ref_attention(&p, q, k, v, out);
    for (int d = 0; d < HD; d++) {
        assert_float_equal(out[0 * HD + d], 5.0f + d, 1e-5);
        assert_float_equal(out[1 * HD + d], 5.0f + d, 1e-5);
        assert_float_equal(out[2 * HD + d], 105.0f + d, 1e-4);
        assert_float_equal(out[3 * HD + d], 105.0f + d, 1e-4);
    }
}

static void attention_weights_values_by_the_scaled_softmax(void **state)
{
    (void)state;
    /* keys e0 and 3*e0, q = e0, scale 0.5: scores 0.5 and 1.5; weights 1/(1+e) and e/(1+e). */
    float k[2 * HD] = {1, 0, 0, 0, 3, 0, 0, 0}, v[2 * HD] = {1, 0, 0, 0, 0, 2, 0, 0};
    float q[HD] = {1, 0, 0, 0}, out[HD];
    vkv_attn_params p = {.n_q = 1, .n_head = 1, .n_kv_head = 1, .head_dim = HD, .n_ctx_max = 2, .n_kv = 2,
                         .pos0 = 1, .scale = 0.5f, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_ref_attention(&p, q, k, v, out);
    double e = exp(1.0);
    assert_float_equal(out[0], 1.0 / (1.0 + e), 1e-7);
    assert_float_equal(out[1], 2.0 * e / (1.0 + e), 1e-7);
    assert_float_equal(out[2], 0.0, 0.0);
}

static void attention_never_reads_slots_past_n_kv(void **state)
{
    (void)state;
    uint16_t k[6 * HD], v[6 * HD];
    float src[3 * HD], q[HD] = {0.1f, 0.2f, 0.3f, 0.4f}, out[HD];
    for (int i = 0; i < 6 * HD; i++) k[i] = v[i] = 0x7e00u; /* NaN */
    for (int i = 0; i < 3 * HD; i++) src[i] = 0.25f * (float)i;
    vkv_kv_cache_store(VKV_F16, k, 1, 6, HD, 0, src, 3);
    vkv_kv_cache_store(VKV_F16, v, 1, 6, HD, 0, src, 3);
    vkv_attn_params p = {.n_q = 1, .n_head = 1, .n_kv_head = 1, .head_dim = HD, .n_ctx_max = 6, .n_kv = 3,
                         .pos0 = 5, .scale = 0.5f, .k_type = VKV_F16, .v_type = VKV_F16};
    vkv_ref_attention(&p, q, k, v, out);
    for (int d = 0; d < HD; d++) assert_true(isfinite(out[d]));
}

static void attention_without_visible_slots_outputs_zeros(void **state)
{
    (void)state;
    float k[HD] = {1, 1, 1, 1}, v[HD] = {1, 1, 1, 1}, q[HD] = {1, 1, 1, 1}, out[HD] = {7, 7, 7, 7};
    vkv_attn_params p = {.n_q = 1, .n_head = 1, .n_kv_head = 1, .head_dim = HD, .n_ctx_max = 1, .n_kv = 0,
                         .pos0 = 0, .scale = 1.0f, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_ref_attention(&p, q, k, v, out);
    for (int d = 0; d < HD; d++) assert_float_equal(out[d], 0.0, 0.0);
}

static void kv_cache_store_transposes_tokens_into_head_major_slots(void **state)
{
    (void)state;
    /* src [2 tokens, 2 heads, HD] -> cache [2 heads, 5 slots, HD] at slot 3 */
    float src[2 * 2 * HD], cache32[2 * 5 * HD] = {0};
    uint16_t cache16[2 * 5 * HD] = {0};
    for (int i = 0; i < 2 * 2 * HD; i++) src[i] = 1.0f / 3.0f + (float)i;
    vkv_kv_cache_store(VKV_F32, cache32, 2, 5, HD, 3, src, 2);
    vkv_kv_cache_store(VKV_F16, cache16, 2, 5, HD, 3, src, 2);
    assert_int_equal(vkv_kv_cache_bytes(VKV_F16, 2, 5, HD), sizeof cache16);
    assert_int_equal(vkv_kv_cache_bytes(VKV_F32, 2, 5, HD), sizeof cache32);
    for (uint32_t t = 0; t < 2; t++)
        for (uint32_t h = 0; h < 2; h++)
            for (uint32_t d = 0; d < HD; d++) {
                float x = src[(t * 2 + h) * HD + d];
                assert_float_equal(vkv_kv_cache_get(VKV_F32, cache32, 5, HD, h, 3 + t, d), x, 0.0);
                assert_float_equal(vkv_kv_cache_get(VKV_F16, cache16, 5, HD, h, 3 + t, d),
                                   vkv_fp16_to_f32(vkv_f32_to_fp16(x)), 0.0);
            }
    for (uint32_t h = 0; h < 2; h++) /* slots 0..2 untouched */
        for (uint32_t j = 0; j < 3; j++)
            for (uint32_t d = 0; d < HD; d++) assert_float_equal(vkv_kv_cache_get(VKV_F16, cache16, 5, HD, h, j, d), 0.0, 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attention_with_one_visible_slot_returns_its_value),
        cmocka_unit_test(attention_with_zero_query_averages_the_causally_visible_slots),
        cmocka_unit_test(attention_maps_query_heads_onto_their_kv_head),
        cmocka_unit_test(attention_weights_values_by_the_scaled_softmax),
        cmocka_unit_test(attention_never_reads_slots_past_n_kv),
        cmocka_unit_test(attention_without_visible_slots_outputs_zeros),
        cmocka_unit_test(kv_cache_store_transposes_tokens_into_head_major_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
