/* Type table and codecs (core/dtype.h): hand-built blocks with hand-computed
 * values for every decoder, and quantize -> dequantize error bounds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kvlayout/kv_layout.h"

#define H_0_25 0x3400 /* fp16 bit patterns of exact constants */
#define H_0_5 0x3800
#define H_1 0x3c00

/* Deterministic uniform [-1, 1). */
static uint32_t rng_state = 12345;
static float rand_uniform(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

/* --------------------------------------------------------------- table */

static void dtype_table_matches_ggml_numbering(void **state)
{
    (void)state;
    static const struct { uint32_t type; const char *name; uint32_t bs, bytes; } want[] = {
        {0, "f32", 1, 4},       {1, "f16", 1, 2},       {2, "q4_0", 32, 18},    {3, "q4_1", 32, 20},
        {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},    {10, "q2_K", 256, 84},
        {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210},
        {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136}, {30, "bf16", 1, 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const vkv_dtype_info *info = vkv_dtype_get(want[i].type);
        assert_non_null(info);
        assert_string_equal(info->name, want[i].name);
        assert_int_equal(info->block_size, want[i].bs);
        assert_int_equal(info->block_bytes, want[i].bytes);
    }
    static const uint32_t unsupported[] = {4, 5, 9, 15, 16, 17, 18, 19, 21, 22, 24, 29, 31, 39, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        assert_null(vkv_dtype_get(unsupported[i]));
}

static void dtype_from_name_is_case_insensitive(void **state)
{
    (void)state;
    assert_int_equal(vkv_dtype_from_name("q4_K"), VKV_Q4_K);
    assert_int_equal(vkv_dtype_from_name("Q4_k"), VKV_Q4_K);
    assert_int_equal(vkv_dtype_from_name("F16"), VKV_F16);
    assert_int_equal(vkv_dtype_from_name("bf16"), VKV_BF16);
    assert_int_equal(vkv_dtype_from_name("Q6_K"), VKV_Q6_K);
    assert_int_equal(vkv_dtype_from_name("q8_0"), VKV_Q8_0);
    assert_int_equal(vkv_dtype_from_name("f32"), VKV_F32);
    assert_int_equal(vkv_dtype_from_name("q4_0"), VKV_Q4_0);
    assert_int_equal(vkv_dtype_from_name("q4_1"), VKV_Q4_1);
    assert_int_equal(vkv_dtype_from_name("IQ4_XS"), VKV_IQ4_XS);
    assert_int_equal(vkv_dtype_from_name("q8_1"), -1);
    assert_int_equal(vkv_dtype_from_name("q4_K_M"), -1); /* a file type, not a tensor type */
    assert_int_equal(vkv_dtype_from_name("f3"), -1);
    assert_int_equal(vkv_dtype_from_name(""), -1);
    assert_int_equal(vkv_dtype_from_name(NULL), -1);
}

static void dtype_row_bytes_rejects_partial_blocks(void **state)
{
    (void)state;
    assert_int_equal(vkv_dtype_row_bytes(VKV_F32, 3), 12);
    assert_int_equal(vkv_dtype_row_bytes(VKV_F16, 3), 6);
    assert_int_equal(vkv_dtype_row_bytes(VKV_BF16, 4096), 8192);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q4_0, 64), 36);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q8_0, 4096), 128 * 34);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q4_K, 4096), 16 * 144);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q6_K, 14336), 56 * 210);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q4_0, 33), 0);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q4_K, 128), 0);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q4_K, 0), 0);
    assert_int_equal(vkv_dtype_row_bytes(VKV_Q5_1, 576), 18 * 24);
    assert_int_equal(vkv_dtype_row_bytes(VKV_IQ4_XS, 576), 0);
    assert_int_equal(vkv_dtype_row_bytes((vkv_dtype)4, 32), 0);
}

/* Grouped device rows (core/dtype.h): q6_K, q8_0 and q4_0 blocks in groups
 * of 8, d first, every body 16-byte aligned; other types keep the file's rows. */
static void grouped_device_rows_align_every_body_and_round_trip(void **state)
{
    (void)state;
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q6_K, 1024), 16 + 4 * 208);      /* 4 blocks: 848 */
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q6_K, 2048), 8 * 210);           /* one whole group */
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q6_K, 3072), 8 * 210 + 16 + 4 * 208);
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q8_0, 576), 2 * 272 + 16 + 2 * 32); /* 18 blocks */
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q4_0, 256), 144);
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q6_K, 128), 0);
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q4_0, 48), 0);
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_Q4_K, 4096), vkv_dtype_row_bytes(VKV_Q4_K, 4096));
    assert_int_equal(vkv_dtype_device_row_bytes(VKV_IQ4_NL, 1024), vkv_dtype_row_bytes(VKV_IQ4_NL, 1024));
    /* every other type keeps the file's rows */
    static const vkv_dtype plain[] = {VKV_F32, VKV_F16, VKV_BF16, VKV_Q4_1, VKV_Q5_0, VKV_Q5_1, VKV_Q2_K,
                                      VKV_Q3_K, VKV_Q4_K, VKV_Q5_K, VKV_IQ4_NL, VKV_IQ4_XS};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) assert_false(vkv_dtype_has_device_layout(plain[i]));
    /* type, its d's offset in the block, widths (whole groups, short ones, both) */
    static const struct { vkv_dtype t; size_t d_at; uint64_t widths[5]; } cases[] = {
        {VKV_Q6_K, 208, {256, 1024, 2048, 3072, 4352}},
        {VKV_Q8_0, 0, {32, 256, 576, 1024, 1056}},
        {VKV_Q4_0, 0, {32, 256, 576, 1024, 1056}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t w = 0; w < 5; w++) {
            const vkv_dtype t = cases[c].t;
            const size_t block = vkv_dtype_get(t)->block_bytes, body = block - 2, group = 16 + 8 * body;
            const uint64_t n = cases[c].widths[w], rows = 3, nb = n / vkv_dtype_get(t)->block_size;
            const size_t frb = vkv_dtype_row_bytes(t, n), drb = vkv_dtype_device_row_bytes(t, n);
            assert_true(vkv_dtype_has_device_layout(t));
            assert_int_equal(drb % 16, 0);
            assert_true(drb >= frb && drb - frb <= 14);
            uint8_t *file = malloc(frb * rows), *dev = malloc(drb * rows), *back = malloc(frb * rows);
            assert_non_null(file); assert_non_null(dev); assert_non_null(back);
            for (size_t i = 0; i < frb * rows; i++) file[i] = (uint8_t)(i * 131 + 7);
            vkv_dtype_rows_to_device(t, n, file, dev, rows);
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t b = 0; b < nb; b++) {
                    const uint8_t *blk = file + r * frb + b * block, *row = dev + r * drb;
                    const size_t g = b / 8 * group, at = g + 16 + body * (b % 8), d_at = cases[c].d_at;
                    assert_int_equal(at % 16, 0);
                    /* the body: the block without its d, in order */
                    assert_memory_equal(row + at, blk, d_at);
                    assert_memory_equal(row + at + d_at, blk + d_at + 2, block - d_at - 2);
                    assert_memory_equal(row + g + 2 * (b % 8), blk + d_at, 2);
                }
            if (nb % 8) /* a short last group: its d padded with zeros to 16 bytes */
                for (uint64_t r = 0; r < rows; r++)
                    for (size_t i = 2 * (nb % 8); i < 16; i++) assert_int_equal(dev[r * drb + nb / 8 * group + i], 0);
            vkv_dtype_rows_from_device(t, n, dev, back, rows);
            assert_memory_equal(back, file, frb * rows);
            free(file);
            free(dev);
            free(back);
        }
}

/* ------------------------------------------------------------ decoders */

static void q4_0_dequantize_matches_hand_computed_block(void **state)
{
    (void)state;
    vkv_block_q4_0 b[2];
    b[0].d = H_0_5;
    for (int j = 0; j < 16; j++) b[0].qs[j] = (uint8_t)(j | ((15 - j) << 4));
    b[1].d = 0xc000; /* -2 */
    memset(b[1].qs, 0x3f, sizeof b[1].qs); /* low nibble 15, high nibble 3 */
    float y[64];
    vkv_dequantize_row(VKV_Q4_0, b, y, 64);
    assert_float_equal(y[0], -4.0f, 0);  /* (0 - 8) * 0.5 */
    assert_float_equal(y[8], 0.0f, 0);   /* (8 - 8) * 0.5 */
    assert_float_equal(y[15], 3.5f, 0);  /* (15 - 8) * 0.5 */
    assert_float_equal(y[16], 3.5f, 0);  /* high nibble of qs[0] = 15 */
    assert_float_equal(y[31], -4.0f, 0); /* high nibble of qs[15] = 0 */
    for (int j = 0; j < 16; j++) {
        assert_float_equal(y[j], (j - 8) * 0.5f, 0);
        assert_float_equal(y[j + 16], (7 - j) * 0.5f, 0);
        assert_float_equal(y[32 + j], -14.0f, 0);     /* (15 - 8) * -2 */
        assert_float_equal(y[32 + 16 + j], 10.0f, 0); /* (3 - 8) * -2 */
    }
}

static void q8_0_dequantize_matches_hand_computed_block(void **state)
{
    (void)state;
    vkv_block_q8_0 b;
    b.d = H_0_25;
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j * 8 - 128);
    b.qs[31] = 127;
    float y[32];
    vkv_dequantize_row(VKV_Q8_0, &b, y, 32);
    assert_float_equal(y[0], -32.0f, 0);
    assert_float_equal(y[1], -30.0f, 0);
    assert_float_equal(y[16], 0.0f, 0);
    assert_float_equal(y[30], 28.0f, 0);
    assert_float_equal(y[31], 31.75f, 0);
}

/* Sub-block scales and mins chosen so that sub-blocks 4-7 need their top two
 * bits (values >= 16); the 12 packed bytes below are worked out by hand:
 *   bytes 0-3:  sc[0..3] | (sc[4..7] >> 4) << 6
 *   bytes 4-7:  m[0..3]  | (m[4..7] >> 4) << 6
 *   bytes 8-11: (sc[4..7] & 15) | (m[4..7] & 15) << 4 */
static const uint8_t q4_K_sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
static const uint8_t q4_K_m[8] = {5, 6, 7, 8, 20, 40, 61, 16};
static const uint8_t q4_K_packed[12] = {0x41, 0x82, 0xc3, 0xc4, 0x45, 0x86,
                                        0xc7, 0x48, 0x41, 0x81, 0xd2, 0x0f};

static void q4_K_dequantize_matches_hand_computed_block(void **state)
{
    (void)state;
    vkv_block_q4_K b;
    b.d = H_0_5;
    b.dmin = H_0_25;
    memcpy(b.scales, q4_K_packed, 12);
    /* 64-element group g: low nibble l & 15 (sub-block 2g), high nibble (l + g) & 15 */
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++)
            b.qs[32 * g + l] = (uint8_t)((l & 15) | (((l + g) & 15) << 4));
    float y[256];
    vkv_dequantize_row(VKV_Q4_K, &b, y, 256);

    assert_float_equal(y[0], -1.25f, 0);     /* sb 0, q 0: 0.5*1*0 - 0.25*5 */
    assert_float_equal(y[33], -0.5f, 0);     /* sb 1, q (1+0)&15=1: 0.5*2*1 - 0.25*6 */
    assert_float_equal(y[128 + 5], 37.5f, 0);  /* sb 4, q 5: 0.5*17*5 - 0.25*20 */
    assert_float_equal(y[160], 23.0f, 0);      /* sb 5, q 2: 0.5*33*2 - 0.25*40 */
    assert_float_equal(y[192 + 15], 359.75f, 0); /* sb 6, q 15: 0.5*50*15 - 0.25*61 */
    assert_float_equal(y[255], 59.0f, 0);      /* sb 7, q (31+3)&15=2: 0.5*63*2 - 0.25*16 */
    for (int i = 0; i < 256; i++) {
        const int sb = i / 32, g = i / 64, l = i % 32;
        const int q = sb % 2 == 0 ? (l & 15) : ((l + g) & 15);
        assert_float_equal(y[i], 0.5f * q4_K_sc[sb] * q - 0.25f * q4_K_m[sb], 0);
    }
}

/* Packs 256 6-bit values into q6_K ql/qh, written from the layout spec
 * (element 128h + 32k + l: low 4 bits in ql[64h + 32(k&1) + l], the low
 * nibble for k < 2; top 2 bits at bit 2k of qh[32h + l]). */
static void q6_K_pack(const uint8_t q[256], vkv_block_q6_K *b)
{
    memset(b->ql, 0, sizeof b->ql);
    memset(b->qh, 0, sizeof b->qh);
    for (int i = 0; i < 256; i++) {
        const int h = i / 128, k = (i % 128) / 32, l = i % 32;
        b->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((q[i] & 15) << (k < 2 ? 0 : 4));
        b->qh[32 * h + l] |= (uint8_t)((q[i] >> 4) << (2 * k));
    }
}

static void q6_K_dequantize_matches_hand_computed_block(void **state)
{
    (void)state;
    /* All ql/qh zero (q = 0 -> -32) except one byte trio per half that sets
     * an element in each of the four quadrants. Scales[j] = j - 8, d = 0.5.
     *   half 0: ql[3] = 0xb7, ql[35] = 0x4c, qh[3] = 0x9c = 10 01 11 00b
     *     e3  (k0): 7  | 00 -> q  7, sc -8: 0.5 * -8 * (7 - 32)  = 100
     *     e35 (k1): 12 | 11 -> q 60, sc -6: 0.5 * -6 * 28        = -84
     *     e67 (k2): 11 | 01 -> q 27, sc -4: 0.5 * -4 * -5        = 10
     *     e99 (k3): 4  | 10 -> q 36, sc -2: 0.5 * -2 * 4         = -4
     *   half 1: ql[84] = 0x3e, ql[116] = 0xf1, qh[52] = 0xc9 = 11 00 10 01b
     *     e148 (k0): 14 | 01 -> q 30, sc 1: 0.5 * 1 * -2         = -1
     *     e180 (k1): 1  | 10 -> q 33, sc 3: 0.5 * 3 * 1          = 1.5
     *     e212 (k2): 3  | 00 -> q  3, sc 5: 0.5 * 5 * -29        = -72.5
     *     e244 (k3): 15 | 11 -> q 63, sc 7: 0.5 * 7 * 31         = 108.5 */
    vkv_block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = H_0_5;
    for (int j = 0; j < 16; j++) b.scales[j] = (int8_t)(j - 8);
    b.ql[3] = 0xb7;
    b.ql[35] = 0x4c;
    b.qh[3] = 0x9c;
    b.ql[64 + 20] = 0x3e;
    b.ql[64 + 52] = 0xf1;
    b.qh[32 + 20] = 0xc9;
    float y[256];
    vkv_dequantize_row(VKV_Q6_K, &b, y, 256);
    static const struct { int i; float v; } set[] = {
        {3, 100.0f},   {35, -84.0f}, {67, 10.0f},    {99, -4.0f},
        {148, -1.0f},  {180, 1.5f},  {212, -72.5f},  {244, 108.5f},
    };
    for (int i = 0, s = 0; i < 256; i++) {
        if (s < 8 && set[s].i == i) {
            assert_float_equal(y[i], set[s++].v, 0);
        } else {
            assert_float_equal(y[i], 0.5f * (float)(i / 16 - 8) * -32.0f, 0);
        }
    }

    /* Every element distinct through all four quadrants of both halves. */
    uint8_t q[256];
    for (int i = 0; i < 256; i++) q[i] = (uint8_t)((i * 7 + 3) & 63);
    q6_K_pack(q, &b);
    for (int j = 0; j < 16; j++) b.scales[j] = (int8_t)(j * 17 - 128);
    b.d = 0xb000; /* -0.125 */
    vkv_dequantize_row(VKV_Q6_K, &b, y, 256);
    for (int i = 0; i < 256; i++)
        assert_float_equal(y[i], -0.125f * (float)b.scales[i / 16] * (float)(q[i] - 32), 0);
}

/* ----------------------------------------------- the other ggml layouts */

/* q5_0: bit 4 of element j is bit j of the little-endian u32 qh; element
 * j + 16 takes the high nibble of qs[j]. Values q - 16, times d. */
static void q5_0_and_q5_1_dequantize_match_hand_computed_blocks(void **state)
{
    (void)state;
    uint8_t q[32];
    for (int j = 0; j < 32; j++) q[j] = (uint8_t)((j * 7 + 3) % 32);
    vkv_block_q5_0 b0;
    vkv_block_q5_1 b1;
    b0.d = b1.d = vkv_f32_to_fp16(0.5f);
    b1.m = vkv_f32_to_fp16(-2.0f);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        b0.qs[j] = b1.qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) b0.qh[k] = b1.qh[k] = (uint8_t)(qh >> (8 * k));
    float y0[32], y1[32];
    vkv_dequantize_row(VKV_Q5_0, &b0, y0, 32);
    vkv_dequantize_row(VKV_Q5_1, &b1, y1, 32);
    for (int j = 0; j < 32; j++) {
        assert_float_equal(y0[j], 0.5f * (q[j] - 16), 0);
        assert_float_equal(y1[j], 0.5f * q[j] - 2.0f, 0);
    }
}

/* q2_K / q3_K: element 128h + 32s + l sits in bits 2s..2s+1 of
 * qs[32h + l], in sub-block (scale) 8h + 2s + l/16; q3_K's third bit is
 * bit 4h + s of hmask[l]. Packed here from that description. */
static void q2_K_and_q3_K_dequantize_match_hand_computed_blocks(void **state)
{
    (void)state;
    vkv_block_q2_K b2;
    vkv_block_q3_K b3;
    memset(&b2, 0, sizeof b2);
    memset(&b3, 0, sizeof b3);
    b2.d = b3.d = vkv_f32_to_fp16(0.25f);
    b2.dmin = vkv_f32_to_fp16(0.125f);
    int sc3[16];
    for (int j = 0; j < 16; j++) {
        b2.scales[j] = (uint8_t)(j | ((15 - j) << 4));
        sc3[j] = (j * 13 + 5) % 64; /* 6-bit, stored with an offset of 32 */
        if (j < 8) b3.scales[j] = (uint8_t)(sc3[j] & 15);
        else b3.scales[j - 8] |= (uint8_t)((sc3[j] & 15) << 4);
        b3.scales[8 + j % 4] |= (uint8_t)((sc3[j] >> 4) << (2 * (j / 4)));
    }
    int v[256];
    for (int e = 0; e < 256; e++) {
        v[e] = (e * 5 + e / 7) % 8; /* 3-bit */
        const int h = e / 128, s = (e % 128) / 32, l = e % 32;
        b2.qs[32 * h + l] |= (uint8_t)((v[e] & 3) << (2 * s));
        b3.qs[32 * h + l] |= (uint8_t)((v[e] & 3) << (2 * s));
        b3.hmask[l] |= (uint8_t)((v[e] >> 2) << (4 * h + s));
    }
    float y2[256], y3[256];
    vkv_dequantize_row(VKV_Q2_K, &b2, y2, 256);
    vkv_dequantize_row(VKV_Q3_K, &b3, y3, 256);
    for (int e = 0; e < 256; e++) {
        const int sb = 8 * (e / 128) + 2 * ((e % 128) / 32) + (e % 32) / 16;
        assert_float_equal(y2[e], 0.25f * sb * (v[e] & 3) - 0.125f * (15 - sb), 1e-6);
        assert_float_equal(y3[e], 0.25f * (sc3[sb] - 32) * (v[e] - 4), 1e-6);
    }
}

/* q5_K: q4_K's scales and nibbles, plus bit j of qh[l] as bit 4 of element
 * 32j + l. */
static void q5_K_dequantize_matches_hand_computed_block(void **state)
{
    (void)state;
    vkv_block_q5_K b;
    memset(&b, 0, sizeof b);
    b.d = vkv_f32_to_fp16(0.5f);
    b.dmin = vkv_f32_to_fp16(0.25f);
    memcpy(b.scales, q4_K_packed, 12);
    uint8_t q[256];
    for (int e = 0; e < 256; e++) {
        q[e] = (uint8_t)((e * 11 + 7) % 32);
        const int j = e / 32, l = e % 32;
        b.qs[32 * (j / 2) + l] |= (uint8_t)((q[e] & 15) << (4 * (j % 2)));
        b.qh[l] |= (uint8_t)((q[e] >> 4) << j);
    }
    float y[256];
    vkv_dequantize_row(VKV_Q5_K, &b, y, 256);
    for (int e = 0; e < 256; e++)
        assert_float_equal(y[e], 0.5f * q4_K_sc[e / 32] * q[e] - 0.25f * q4_K_m[e / 32], 1e-6);
}

/* iq4_nl indexes a fixed 16-value table; iq4_xs adds 6-bit sub-block scales
 * (low nibbles in scales_l, top 2 bits in scales_h) with an offset of 32. */
static void iq4_dequantize_matches_hand_computed_blocks(void **state)
{
    (void)state;
    static const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    vkv_block_iq4_nl bn;
    vkv_block_iq4_xs bx;
    memset(&bx, 0, sizeof bx);
    bn.d = bx.d = vkv_f32_to_fp16(0.125f);
    int ls[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (j * 19 + 9) % 64;
        bx.scales_l[j / 2] |= (uint8_t)((ls[j] & 15) << (4 * (j % 2)));
        bx.scales_h |= (uint16_t)((ls[j] >> 4) << (2 * j));
    }
    uint8_t idx[256];
    for (int e = 0; e < 256; e++) {
        idx[e] = (uint8_t)((e * 7 + e / 16) % 16);
        const int j = e / 32, l = e % 32;
        bx.qs[16 * j + l % 16] |= (uint8_t)(idx[e] << (4 * (l / 16)));
        if (e < 32) bn.qs[l % 16] = (uint8_t)(l < 16 ? idx[e] : bn.qs[l % 16] | idx[e] << 4);
    }
    float yn[32], yx[256];
    vkv_dequantize_row(VKV_IQ4_NL, &bn, yn, 32);
    vkv_dequantize_row(VKV_IQ4_XS, &bx, yx, 256);
    for (int e = 0; e < 32; e++) assert_float_equal(yn[e], 0.125f * table[idx[e]], 0);
    for (int e = 0; e < 256; e++) assert_float_equal(yx[e], 0.125f * (ls[e / 32] - 32) * table[idx[e]], 1e-6);
}

static void f16_and_bf16_rows_decode_each_element(void **state)
{
    (void)state;
    const uint16_t h[4] = {H_1, 0xc000, 0x7c00, 0x0001};
    const uint16_t bf[4] = {0x3f80, 0xc040, 0xff80, 0x0000};
    float y[4];
    vkv_dequantize_row(VKV_F16, h, y, 4);
    assert_float_equal(y[0], 1.0f, 0);
    assert_float_equal(y[1], -2.0f, 0);
    assert_true(isinf(y[2]) && y[2] > 0);
    assert_true(y[3] == ldexpf(1.0f, -24));
    vkv_dequantize_row(VKV_BF16, bf, y, 4);
    assert_float_equal(y[0], 1.0f, 0);
    assert_float_equal(y[1], -3.0f, 0);
    assert_true(isinf(y[2]) && y[2] < 0);
    assert_float_equal(y[3], 0.0f, 0);

    const float x[3] = {1.0f + ldexpf(1.0f, -11), 0.1f, -65520.0f};
    uint16_t out[3];
    vkv_quantize_row(VKV_F16, x, out, 3);
    assert_int_equal(out[0], 0x3c00); /* tie to even */
    assert_int_equal(out[1], 0x2e66);
    assert_int_equal(out[2], 0xfc00);
    vkv_quantize_row(VKV_BF16, x, out, 3);
    assert_int_equal(out[0], 0x3f80);
    assert_int_equal(out[1], 0x3dcd);
    float back[3];
    vkv_quantize_row(VKV_F32, x, back, 3);
    assert_memory_equal(back, x, sizeof x);
}

/* ------------------------------------------------------------ encoders */

static void q4_0_quantize_uses_the_signed_max(void **state)
{
    (void)state;
    float x[32] = {0};
    float y[32];
    vkv_block_q4_0 b;

    /* negative max -4: d = -4 / -8 = 0.5, -4 -> q 0 exactly */
    x[0] = -4.0f;
    x[1] = 1.3f;  /* 1.3 * 2 + 8.5 = 11.1 -> 11 -> 1.5 */
    x[17] = 3.9f; /* 7.8 + 8.5 = 16.3 -> clamped to 15 -> 3.5 */
    vkv_quantize_row(VKV_Q4_0, x, &b, 32);
    assert_int_equal(b.d, H_0_5);
    assert_int_equal(b.qs[0] & 15, 0);
    assert_int_equal(b.qs[1] & 15, 11);
    assert_int_equal(b.qs[1] >> 4, 15); /* element 17 */
    assert_int_equal(b.qs[2] & 15, 8); /* zero */
    vkv_dequantize_row(VKV_Q4_0, &b, y, 32);
    assert_float_equal(y[0], -4.0f, 0);
    assert_float_equal(y[1], 1.5f, 0);
    assert_float_equal(y[17], 3.5f, 0);

    /* positive max 4: d = -0.5, 4 -> q 0 -> 4 exactly; -4 clamps to q 15 -> -3.5 */
    x[0] = 4.0f;
    x[1] = 1.3f; /* 1.3 * -2 + 8.5 = 5.9 -> 5 -> (5 - 8) * -0.5 = 1.5 */
    x[17] = -4.0f;
    vkv_quantize_row(VKV_Q4_0, x, &b, 32);
    assert_int_equal(b.d, 0xb800);
    vkv_dequantize_row(VKV_Q4_0, &b, y, 32);
    assert_float_equal(y[0], 4.0f, 0);
    assert_float_equal(y[1], 1.5f, 0);
    assert_float_equal(y[17], -3.5f, 0);

    memset(x, 0, sizeof x); /* all zero: d = 0 and every value decodes to 0 */
    vkv_quantize_row(VKV_Q4_0, x, &b, 32);
    vkv_dequantize_row(VKV_Q4_0, &b, y, 32);
    for (int j = 0; j < 32; j++) assert_float_equal(y[j], 0.0f, 0);
}

static void q8_0_quantize_rounds_half_away_from_zero(void **state)
{
    (void)state;
    float x[32] = {0};
    x[0] = 127.0f; /* amax 127 -> d = 1 */
    x[1] = 1.5f;
    x[2] = -2.5f;
    x[3] = 0.49f;
    x[4] = -127.0f;
    vkv_block_q8_0 b;
    vkv_quantize_row(VKV_Q8_0, x, &b, 32);
    assert_int_equal(b.d, H_1);
    assert_int_equal(b.qs[0], 127);
    assert_int_equal(b.qs[1], 2);
    assert_int_equal(b.qs[2], -3);
    assert_int_equal(b.qs[3], 0);
    assert_int_equal(b.qs[4], -127);
}

static double rel_rms_error(vkv_dtype t, const float *x, int n)
{
    static uint8_t q[8192 * 4];
    static float y[8192];
    assert_true(n <= 8192 && vkv_dtype_row_bytes(t, (uint64_t)n) <= sizeof q);
    vkv_quantize_row(t, x, q, (uint64_t)n);
    vkv_dequantize_row(t, q, y, (uint64_t)n);
    double e2 = 0, x2 = 0;
    for (int i = 0; i < n; i++) {
        assert_false(isnan(y[i]));
        e2 += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        x2 += (double)x[i] * x[i];
    }
    return x2 > 0 ? sqrt(e2 / x2) : sqrt(e2);
}

/* ------------------------------------------------------- KV cache rows */

/* A head of whole blocks: a cache row is ggml's row of the type. */
static void kv_rows_of_whole_blocks_are_ggml_rows(void **state)
{
    (void)state;
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = rand_uniform() * 3.0f;
    uint8_t row[256], ggml[256]; /* the f32 row is the longest */
    const vkv_dtype types[] = {VKV_Q8_0, VKV_Q4_0, VKV_F16, VKV_F32};
    for (int t = 0; t < 4; t++) {
        size_t n = vkv_dtype_row_bytes(types[t], 64);
        assert_int_equal(vkv_kv_row_bytes(types[t], 64), n);
        vkv_kv_encode_row(types[t], 64, x, row);
        vkv_quantize_row(types[t], x, ggml, 64);
        assert_memory_equal(row, ggml, n);
    }
}

/* head_dim 48: a block of 32 and one of 16, each with its own scale; q4_0's
 * short block pairs element j with j + 8. */
static void kv_row_cuts_a_short_last_block(void **state)
{
    (void)state;
    float x[48] = {0};
    x[0] = 127.0f;  /* block 0: amax 127, d = 1 */
    x[5] = -3.0f;
    x[32] = 63.5f;  /* block 1: amax 63.5, d = 0.5 */
    x[40] = 10.0f;
    uint8_t row[52];
    assert_int_equal(vkv_kv_row_bytes(VKV_Q8_0, 48), 52); /* 2 + 32 + 2 + 16 */
    vkv_kv_encode_row(VKV_Q8_0, 48, x, row);
    uint16_t d0, d1;
    memcpy(&d0, row, 2);
    memcpy(&d1, row + 34, 2);
    assert_int_equal(d0, H_1);
    assert_int_equal(d1, H_0_5);
    assert_int_equal((int8_t)row[2 + 5], -3);
    assert_int_equal((int8_t)row[36 + 8], 20);
    assert_int_equal((int8_t)row[36], 127);

    float y[48] = {0};
    y[32] = -8.0f; /* block 1: signed max -8, d = 1 */
    y[33] = 3.0f;
    y[41] = -2.0f;
    uint8_t q4[28];
    assert_int_equal(vkv_kv_row_bytes(VKV_Q4_0, 48), 28); /* 2 + 16 + 2 + 8 */
    vkv_kv_encode_row(VKV_Q4_0, 48, y, q4);
    memcpy(&d1, q4 + 18, 2);
    assert_int_equal(d1, H_1);
    assert_int_equal(q4[20], 0x80); /* element 32 (q 0) low, element 40 (0 -> q 8) high */
    assert_int_equal(q4[21], 0x6b); /* element 33 (3 -> q 11) low, element 41 (-2 -> q 6) high */
    float back[48];
    vkv_kv_decode_row(VKV_Q4_0, 48, q4, back);
    assert_true(back[32] == -8.0f && back[33] == 3.0f && back[41] == -2.0f && back[40] == 0.0f);
}

/* Rows are padded to whole 32-bit words with zeros; one element decodes as
 * the whole row does. */
static void kv_rows_are_word_padded_and_decode_per_element(void **state)
{
    (void)state;
    const vkv_dtype types[] = {VKV_Q8_0, VKV_Q4_0, VKV_F16, VKV_F32};
    const uint32_t hds[] = {36, 48, 64, 128};
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 4; k++) {
            uint32_t hd = hds[k];
            size_t rb = vkv_kv_row_bytes(types[t], hd);
            assert_int_equal(rb % 4, 0);
            float x[128], y[128];
            for (uint32_t i = 0; i < hd; i++) x[i] = rand_uniform();
            uint8_t row[512];
            memset(row, 0xff, sizeof row);
            vkv_kv_encode_row(types[t], hd, x, row);
            if (types[t] == VKV_Q4_0 && hd == 36) assert_true(rb == 24 && row[22] == 0 && row[23] == 0);
            vkv_kv_decode_row(types[t], hd, row, y);
            for (uint32_t i = 0; i < hd; i++) {
                assert_true(vkv_kv_row_get(types[t], hd, row, i) == y[i]);
                assert_true(fabsf(y[i] - x[i]) <= (types[t] == VKV_Q4_0 ? 0.15f : 0.01f));
            }
        }
}

/* Compression during generation decodes quantized tiers into f32 rows and
 * compacts them again: re-encoding a decoded row must give its bytes back
 * (each block's extreme value maps to the same scale), else every compression
 * would drift the values it keeps. (Through f16 it would not: d q needs up to
 * 18 significant bits.) */
static void kv_rows_reencode_to_the_same_bytes(void **state)
{
    (void)state;
    const vkv_dtype types[] = {VKV_Q8_0, VKV_Q4_0};
    const uint32_t hds[] = {36, 48, 64, 128};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 4; k++)
            for (int rep = 0; rep < 200; rep++) {
                uint32_t hd = hds[k];
                float x[128], y[128], z[128];
                for (uint32_t i = 0; i < hd; i++) x[i] = rand_uniform() * (rep % 2 ? 100.0f : 0.01f);
                uint8_t a[136], b[136], c[512];
                vkv_kv_encode_row(types[t], hd, x, a);
                vkv_kv_decode_row(types[t], hd, a, y);
                /* through the f32 rows a gather decodes them into (vkv_kv_gather_type) */
                vkv_kv_encode_row(VKV_F32, hd, y, c);
                vkv_kv_decode_row(VKV_F32, hd, c, z);
                vkv_kv_encode_row(types[t], hd, z, b);
                assert_memory_equal(a, b, vkv_kv_row_bytes(types[t], hd));
            }
}

static void quantize_dequantize_error_is_bounded_per_type(void **state)
{
    (void)state;
    static float x[8192];
    for (int i = 0; i < 8192; i++) x[i] = rand_uniform();
    /* expected roughly: step/sqrt(12) relative to rms(x) = 1/sqrt(3) */
    static const struct { vkv_dtype t; double bound; } cases[] = {
        {VKV_F32, 0.0},   {VKV_F16, 1e-3},  {VKV_BF16, 5e-3}, {VKV_Q8_0, 0.01},
        {VKV_Q4_0, 0.1},  {VKV_Q4_K, 0.1},  {VKV_Q6_K, 0.03}, {VKV_Q4_1, 0.1},
        {VKV_Q5_0, 0.05}, {VKV_Q5_1, 0.05}, {VKV_Q2_K, 0.35}, {VKV_Q3_K, 0.2},
        {VKV_Q5_K, 0.05}, {VKV_IQ4_NL, 0.1}, {VKV_IQ4_XS, 0.1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const double e = rel_rms_error(cases[c].t, x, 8192);
        if (e > cases[c].bound)
            fail_msg("%s: relative RMS error %g > %g", vkv_dtype_get(cases[c].t)->name, e,
                     cases[c].bound);
    }
}

static void k_quants_stay_accurate_on_skewed_blocks(void **state)
{
    (void)state;
    /* sub-block magnitudes spanning 100x, all-positive and all-negative
     * sub-blocks (q4_K mins of 0 and of the full range), and an offset block */
    static float x[1024];
    for (int i = 0; i < 1024; i++) {
        const int sb = i / 32;
        const float mag = 0.01f + 0.99f * (float)(sb % 8) / 7.0f;
        float v = rand_uniform() * mag;
        if (sb % 3 == 1) v = fabsf(v);
        if (sb % 3 == 2) v = -fabsf(v);
        if (i >= 768) v = 5.0f + 0.5f * rand_uniform();
        x[i] = v;
    }
    const double e4 = rel_rms_error(VKV_Q4_K, x, 1024);
    const double e6 = rel_rms_error(VKV_Q6_K, x, 1024);
    if (e4 > 0.1) fail_msg("q4_K relative RMS error %g", e4);
    if (e6 > 0.03) fail_msg("q6_K relative RMS error %g", e6);
}

static void k_quants_encode_zero_blocks_as_zero(void **state)
{
    (void)state;
    static float x[256];
    float y[256];
    vkv_block_q4_K b4;
    vkv_block_q6_K b6;
    memset(x, 0, sizeof x);
    vkv_quantize_row(VKV_Q4_K, x, &b4, 256);
    vkv_dequantize_row(VKV_Q4_K, &b4, y, 256);
    for (int i = 0; i < 256; i++) assert_float_equal(y[i], 0.0f, 0);
    vkv_quantize_row(VKV_Q6_K, x, &b6, 256);
    vkv_dequantize_row(VKV_Q6_K, &b6, y, 256);
    for (int i = 0; i < 256; i++) assert_float_equal(y[i], 0.0f, 0);

    /* one constant sub-block among zeros: decodes close to its value */
    for (int i = 64; i < 96; i++) x[i] = -0.75f;
    vkv_quantize_row(VKV_Q4_K, x, &b4, 256);
    vkv_dequantize_row(VKV_Q4_K, &b4, y, 256);
    for (int i = 0; i < 256; i++) assert_float_equal(y[i], x[i], 0.01);
    vkv_quantize_row(VKV_Q6_K, x, &b6, 256);
    vkv_dequantize_row(VKV_Q6_K, &b6, y, 256);
    for (int i = 0; i < 256; i++) assert_float_equal(y[i], x[i], 0.01);
}

/* The q4_K encoder must use the high-bit packing for sub-blocks 4-7: give
 * them the largest ranges so their 6-bit scales exceed 15. */
static void q4_K_quantize_packs_high_sub_block_scales(void **state)
{
    (void)state;
    static float x[256];
    for (int i = 0; i < 256; i++) x[i] = rand_uniform() * (i < 128 ? 0.05f : 1.0f);
    vkv_block_q4_K b;
    vkv_quantize_row(VKV_Q4_K, x, &b, 256);
    int high_bits = 0;
    for (int j = 0; j < 8; j++) high_bits |= b.scales[j] >> 6;
    assert_int_not_equal(high_bits, 0);
    float y[256];
    vkv_dequantize_row(VKV_Q4_K, &b, y, 256);
    for (int i = 0; i < 256; i++) assert_float_equal(y[i], x[i], i < 128 ? 0.01 : 0.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtype_table_matches_ggml_numbering),
        cmocka_unit_test(dtype_from_name_is_case_insensitive),
        cmocka_unit_test(dtype_row_bytes_rejects_partial_blocks),
        cmocka_unit_test(grouped_device_rows_align_every_body_and_round_trip),
        cmocka_unit_test(q4_0_dequantize_matches_hand_computed_block),
        cmocka_unit_test(q8_0_dequantize_matches_hand_computed_block),
        cmocka_unit_test(q4_K_dequantize_matches_hand_computed_block),
        cmocka_unit_test(q6_K_dequantize_matches_hand_computed_block),
        cmocka_unit_test(q5_0_and_q5_1_dequantize_match_hand_computed_blocks),
        cmocka_unit_test(q2_K_and_q3_K_dequantize_match_hand_computed_blocks),
        cmocka_unit_test(q5_K_dequantize_matches_hand_computed_block),
        cmocka_unit_test(iq4_dequantize_matches_hand_computed_blocks),
        cmocka_unit_test(f16_and_bf16_rows_decode_each_element),
        cmocka_unit_test(q4_0_quantize_uses_the_signed_max),
        cmocka_unit_test(q8_0_quantize_rounds_half_away_from_zero),
        cmocka_unit_test(quantize_dequantize_error_is_bounded_per_type),
        cmocka_unit_test(k_quants_stay_accurate_on_skewed_blocks),
        cmocka_unit_test(k_quants_encode_zero_blocks_as_zero),
        cmocka_unit_test(q4_K_quantize_packs_high_sub_block_scales),
        cmocka_unit_test(kv_rows_of_whole_blocks_are_ggml_rows),
        cmocka_unit_test(kv_row_cuts_a_short_last_block),
        cmocka_unit_test(kv_rows_are_word_padded_and_decode_per_element),
        cmocka_unit_test(kv_rows_reencode_to_the_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
