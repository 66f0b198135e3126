/* Type table and the CPU codecs of every supported tensor type.
 *
 * Decoders reproduce ggml's dequantize_row_* operation for operation (same
 * float expression order), so a GPU shader that decodes like ggml can be
 * compared to them tightly. Encoders follow ggml's *_ref quantizers. Block
 * pointers must be 2-byte aligned (GGUF aligns tensor data to 32). */
#include "core/dtype.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/fp16.h"

/* ---------------------------------------------------------------- table */

static const vkv_dtype_info dtype_f32 = {"f32", 1, 4};
static const vkv_dtype_info dtype_f16 = {"f16", 1, 2};
static const vkv_dtype_info dtype_bf16 = {"bf16", 1, 2};
static const vkv_dtype_info dtype_q4_0 = {"q4_0", VKV_QK4_0, sizeof(vkv_block_q4_0)};
static const vkv_dtype_info dtype_q4_1 = {"q4_1", VKV_QK4_0, sizeof(vkv_block_q4_1)};
static const vkv_dtype_info dtype_q5_0 = {"q5_0", VKV_QK4_0, sizeof(vkv_block_q5_0)};
static const vkv_dtype_info dtype_q5_1 = {"q5_1", VKV_QK4_0, sizeof(vkv_block_q5_1)};
static const vkv_dtype_info dtype_q8_0 = {"q8_0", VKV_QK8_0, sizeof(vkv_block_q8_0)};
static const vkv_dtype_info dtype_q2_K = {"q2_K", VKV_QK_K, sizeof(vkv_block_q2_K)};
static const vkv_dtype_info dtype_q3_K = {"q3_K", VKV_QK_K, sizeof(vkv_block_q3_K)};
static const vkv_dtype_info dtype_q4_K = {"q4_K", VKV_QK_K, sizeof(vkv_block_q4_K)};
static const vkv_dtype_info dtype_q5_K = {"q5_K", VKV_QK_K, sizeof(vkv_block_q5_K)};
static const vkv_dtype_info dtype_q6_K = {"q6_K", VKV_QK_K, sizeof(vkv_block_q6_K)};
static const vkv_dtype_info dtype_iq4_nl = {"iq4_nl", VKV_QK4_0, sizeof(vkv_block_iq4_nl)};
static const vkv_dtype_info dtype_iq4_xs = {"iq4_xs", VKV_QK_K, sizeof(vkv_block_iq4_xs)};

const int8_t vkv_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

const vkv_dtype_info *vkv_dtype_get(uint32_t type)
{
    switch (type) {
    case VKV_F32: return &dtype_f32;
    case VKV_F16: return &dtype_f16;
    case VKV_Q4_0: return &dtype_q4_0;
    case VKV_Q4_1: return &dtype_q4_1;
    case VKV_Q5_0: return &dtype_q5_0;
    case VKV_Q5_1: return &dtype_q5_1;
    case VKV_Q8_0: return &dtype_q8_0;
    case VKV_Q2_K: return &dtype_q2_K;
    case VKV_Q3_K: return &dtype_q3_K;
    case VKV_Q4_K: return &dtype_q4_K;
    case VKV_Q5_K: return &dtype_q5_K;
    case VKV_Q6_K: return &dtype_q6_K;
    case VKV_IQ4_NL: return &dtype_iq4_nl;
    case VKV_IQ4_XS: return &dtype_iq4_xs;
    case VKV_BF16: return &dtype_bf16;
    }
    return NULL;
}

const char *vkv_ggml_type_name(uint32_t type)
{
    /* ggml's numbering; the gaps are types ggml has since removed */
    static const char *const names[] = {
        "f32",     "f16",   "q4_0",   "q4_1",   NULL,    NULL,   "q5_0",   "q5_1",  "q8_0",    "q8_1",
        "q2_K",    "q3_K",  "q4_K",   "q5_K",   "q6_K",  "q8_K", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
        "iq4_nl",  "iq3_s", "iq2_s",  "iq4_xs", "i8",    "i16",  "i32",    "i64",   "f64",     "iq1_m",
        "bf16",    NULL,    NULL,     NULL,     "tq1_0", "tq2_0", NULL,    NULL,    NULL,      "mxfp4",
    };
    return type < sizeof names / sizeof *names && names[type] ? names[type] : "unknown";
}

static bool name_equal_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

#define VKV_DTYPE_ENTRY(t) VKV_##t,
static const vkv_dtype all_dtypes[] = {VKV_DTYPE_LIST(VKV_DTYPE_ENTRY)};
#undef VKV_DTYPE_ENTRY
_Static_assert(sizeof all_dtypes / sizeof all_dtypes[0] == VKV_DTYPE_COUNT, "VKV_DTYPE_COUNT");

int vkv_dtype_index(vkv_dtype t)
{
    for (int i = 0; i < VKV_DTYPE_COUNT; i++)
        if (all_dtypes[i] == t) return i;
    return -1;
}

int vkv_dtype_from_name(const char *name)
{
    const vkv_dtype *all = all_dtypes;
    if (!name) return -1;
    for (size_t i = 0; i < VKV_DTYPE_COUNT; i++)
        if (name_equal_nocase(name, vkv_dtype_get(all[i])->name)) return (int)all[i];
    return -1;
}

size_t vkv_dtype_row_bytes(vkv_dtype t, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    if (!info || n % info->block_size) return 0;
    return (size_t)(n / info->block_size * info->block_bytes);
}

/* Grouped device rows (core/dtype.h): blocks of 2-byte-aligned types in
 * groups of 8, the 8 d first (16 bytes), then the bodies (a block without
 * its d), so that every body starts 16-byte aligned. */
enum { GROUP_BLOCKS = 8, GROUP_HEAD = 16 };

/* Where a type keeps its d (the 2 bytes that leave the body), and whether
 * it is grouped at all. */
static bool grouped_d_offset(vkv_dtype t, size_t *d_at)
{
    switch (t) {
    case VKV_Q6_K: *d_at = offsetof(vkv_block_q6_K, d); return true;
    case VKV_Q8_0: *d_at = offsetof(vkv_block_q8_0, d); return true;
    case VKV_Q4_0: *d_at = offsetof(vkv_block_q4_0, d); return true;
    default: return false;
    }
}

bool vkv_dtype_has_device_layout(vkv_dtype t)
{
    size_t d_at;
    return grouped_d_offset(t, &d_at);
}

size_t vkv_dtype_device_row_bytes(vkv_dtype t, uint64_t n)
{
    size_t rb = vkv_dtype_row_bytes(t, n);
    if (!rb || !vkv_dtype_has_device_layout(t)) return rb;
    const vkv_dtype_info *info = vkv_dtype_get(t);
    const uint64_t nb = n / info->block_size, r = nb % GROUP_BLOCKS, body = info->block_bytes - 2;
    return (size_t)(nb / GROUP_BLOCKS * (GROUP_HEAD + GROUP_BLOCKS * body) + (r ? GROUP_HEAD + body * r : 0));
}

/* n bytes between a file row and a device row, in the direction asked. */
static void copy_bytes(bool to_device, uint8_t *file, uint8_t *dev, size_t n)
{
    if (to_device) memcpy(dev, file, n);
    else memcpy(file, dev, n);
}

/* One routine for both directions: to_device copies file -> device. */
static void grouped_rows_convert(vkv_dtype t, uint64_t n, const uint8_t *src, uint8_t *dst, uint64_t rows,
                                 bool to_device)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    size_t d_at = 0;
    grouped_d_offset(t, &d_at);
    const size_t frb = vkv_dtype_row_bytes(t, n), drb = vkv_dtype_device_row_bytes(t, n);
    const size_t block = info->block_bytes, body = block - 2, group = GROUP_HEAD + GROUP_BLOCKS * body;
    const uint64_t nb = n / info->block_size;
    for (uint64_t r = 0; r < rows; r++) {
        /* the rows as both sides see them (src is only read) */
        uint8_t *file = (uint8_t *)(to_device ? src + r * frb : dst + r * frb);
        uint8_t *dev = (uint8_t *)(to_device ? dst + r * drb : src + r * drb);
        if (to_device) memset(dev, 0, drb); /* the padding of a last short group */
        for (uint64_t b = 0; b < nb; b++) {
            uint8_t *blk = file + b * block, *dev_group = dev + b / GROUP_BLOCKS * group;
            uint8_t *dev_body = dev_group + GROUP_HEAD + body * (b % GROUP_BLOCKS);
            /* the body: the block's bytes before its d, then those after */
            copy_bytes(to_device, blk, dev_body, d_at);
            copy_bytes(to_device, blk + d_at + 2, dev_body + d_at, block - d_at - 2);
            copy_bytes(to_device, blk + d_at, dev_group + 2 * (b % GROUP_BLOCKS), 2);
        }
    }
}

void vkv_dtype_rows_to_device(vkv_dtype t, uint64_t n, const void *src, void *dst, uint64_t rows)
{
    if (vkv_dtype_has_device_layout(t)) grouped_rows_convert(t, n, src, dst, rows, true);
    else memcpy(dst, src, vkv_dtype_row_bytes(t, n) * rows);
}

void vkv_dtype_rows_from_device(vkv_dtype t, uint64_t n, const void *src, void *dst, uint64_t rows)
{
    if (vkv_dtype_has_device_layout(t)) grouped_rows_convert(t, n, src, dst, rows, false);
    else memcpy(dst, src, vkv_dtype_row_bytes(t, n) * rows);
}

/* ------------------------------------------------------------- decoders */

/* Scale j and min j (6 bits each) of a q4_K block: sub-blocks 0-3 keep theirs
 * in the low 6 bits of scales[j] / scales[j+4]; sub-blocks 4-7 keep their low
 * 4 bits in the nibbles of scales[j+4] and their top 2 bits in the spare top
 * bits of scales[j-4] (scale) and scales[j] (min). */
static void q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void vkv_dequantize_block_q4_0(const uint8_t *src, int n, float *y)
{
    uint16_t d16;
    memcpy(&d16, src, 2);
    const float d = vkv_fp16_to_f32(d16);
    for (int j = 0; j < n / 2; j++) {
        y[j] = (float)((src[2 + j] & 0xF) - 8) * d;
        y[j + n / 2] = (float)((src[2 + j] >> 4) - 8) * d;
    }
}

static void dequantize_q4_0(const vkv_block_q4_0 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) vkv_dequantize_block_q4_0((const uint8_t *)&b[i], VKV_QK4_0, y);
}

void vkv_dequantize_block_q8_0(const uint8_t *src, int n, float *y)
{
    uint16_t d16;
    memcpy(&d16, src, 2);
    const float d = vkv_fp16_to_f32(d16);
    for (int j = 0; j < n; j++) y[j] = (float)(int8_t)src[2 + j] * d;
}

static void dequantize_q8_0(const vkv_block_q8_0 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK8_0) vkv_dequantize_block_q8_0((const uint8_t *)&b[i], VKV_QK8_0, y);
}

/* One q4_K or q5_K block: each 64 elements share 32 bytes of qs, low
 * nibbles for sub-block 2k, high nibbles for 2k+1; q5_K adds bit 4 of
 * element 32j + l as bit j of qh[l] (qh NULL for q4_K). */
static void dequantize_k4_block(uint16_t d16, uint16_t dmin16, const uint8_t scales[12], const uint8_t *q,
                                const uint8_t *qh, float *y)
{
    const float d = vkv_fp16_to_f32(d16), dmin = vkv_fp16_to_f32(dmin16);
    for (int j = 0; j < VKV_QK_K / 64; j++, q += 32) {
        uint8_t sc, m;
        q4_K_scale_min(2 * j, scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        q4_K_scale_min(2 * j + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((q[l] & 0xF) + (qh && (qh[l] >> (2 * j)) & 1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((q[l] >> 4) + (qh && (qh[l] >> (2 * j + 1)) & 1 ? 16 : 0)) - m2;
    }
}

static void dequantize_q4_K(const vkv_block_q4_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK_K)
        dequantize_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, NULL, y);
}

/* Each 128-element half uses 64 bytes of ql and 32 of qh. Element l (< 32)
 * of quadrant k (element index 32k + l) takes its low 4 bits from
 * ql[l + 32*(k&1)] (low nibble for k < 2, high nibble otherwise) and its top
 * 2 bits from bits 2k..2k+1 of qh[l]. Scales are per 16 elements. */
static void dequantize_q6_K(const vkv_block_q6_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * (float)q1;
                y[l + 32] = d * sc[is + 2] * (float)q2;
                y[l + 64] = d * sc[is + 4] * (float)q3;
                y[l + 96] = d * sc[is + 6] * (float)q4;
            }
        }
    }
}

static void dequantize_q4_1(const vkv_block_q4_1 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) {
        const float d = vkv_fp16_to_f32(b[i].d), m = vkv_fp16_to_f32(b[i].m);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) {
            y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            y[j + VKV_QK4_0 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_u32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 5-bit values of a q5_0/q5_1 block: element j (< 16) and j + 16. */
static void q5_values(const uint8_t qh_bytes[4], const uint8_t qs[16], int j, int *q0, int *q1)
{
    const uint32_t qh = load_u32_le(qh_bytes);
    *q0 = (qs[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10);
    *q1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
}

static void dequantize_q5_0(const vkv_block_q5_0 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) {
        const float d = vkv_fp16_to_f32(b[i].d);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) {
            int q0, q1;
            q5_values(b[i].qh, b[i].qs, j, &q0, &q1);
            y[j] = (float)(q0 - 16) * d;
            y[j + VKV_QK4_0 / 2] = (float)(q1 - 16) * d;
        }
    }
}

static void dequantize_q5_1(const vkv_block_q5_1 *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) {
        const float d = vkv_fp16_to_f32(b[i].d), m = vkv_fp16_to_f32(b[i].m);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) {
            int q0, q1;
            q5_values(b[i].qh, b[i].qs, j, &q0, &q1);
            y[j] = (float)q0 * d + m;
            y[j + VKV_QK4_0 / 2] = (float)q1 * d + m;
        }
    }
}

/* Each 128-element half uses 32 bytes of qs; its four 32-element quarters
 * are the four 2-bit fields of those bytes. */
static void dequantize_q2_K(const vkv_block_q2_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d), dmin = vkv_fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs, *sc = b[i].scales;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++, sc++) {
                    const float dl = d * (*sc & 0xF), ml = dmin * (*sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* The 6-bit scale j (0..15) of a q3_K block, minus its offset of 32. */
static int q3_K_scale(const uint8_t s[12], int j)
{
    const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | high << 4) - 32;
}

static void dequantize_q3_K(const vkv_block_q3_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d);
        const uint8_t *q = b[i].qs, *hm = b[i].hmask;
        int is = 0, hbit = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, hbit++) {
                for (int part = 0; part < 2; part++, is++) {
                    const float dl = d * (float)q3_K_scale(b[i].scales, is);
                    for (int l = 16 * part; l < 16 * part + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] >> hbit) & 1 ? 0 : 4));
                }
            }
        }
    }
}

static void dequantize_q5_K(const vkv_block_q5_K *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK_K)
        dequantize_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, y);
}

/* 32 elements of iq4 indices (nibbles as q4_0) scaled by d. */
static void iq4_decode32(const uint8_t qs[16], float d, float *y)
{
    for (int j = 0; j < 16; j++) {
        y[j] = d * vkv_kvalues_iq4nl[qs[j] & 0xF];
        y[j + 16] = d * vkv_kvalues_iq4nl[qs[j] >> 4];
    }
}

static void dequantize_iq4_nl(const vkv_block_iq4_nl *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, y += VKV_QK4_0) iq4_decode32(b[i].qs, vkv_fp16_to_f32(b[i].d), y);
}

/* The 6-bit scale j (0..7) of an iq4_xs block. */
static int iq4_xs_scale(const vkv_block_iq4_xs *b, int j)
{
    return ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b->scales_h >> (2 * j)) & 3) << 4);
}

static void dequantize_iq4_xs(const vkv_block_iq4_xs *b, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        const float d = vkv_fp16_to_f32(b[i].d);
        for (int j = 0; j < VKV_QK_K / 32; j++, y += 32)
            iq4_decode32(b[i].qs + 16 * j, d * (float)(iq4_xs_scale(&b[i], j) - 32), y);
    }
}

void vkv_dequantize_row(vkv_dtype t, const void *src, float *dst, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    assert(info && n % info->block_size == 0);
    if (!info) return;
    const uint64_t nb = n / info->block_size;
    switch (t) {
    case VKV_F32: memcpy(dst, src, n * sizeof(float)); break;
    case VKV_F16: {
        const uint16_t *h = src;
        for (uint64_t i = 0; i < n; i++) dst[i] = vkv_fp16_to_f32(h[i]);
        break;
    }
    case VKV_BF16: {
        const uint16_t *h = src;
        for (uint64_t i = 0; i < n; i++) dst[i] = vkv_bf16_to_f32(h[i]);
        break;
    }
    case VKV_Q4_0: dequantize_q4_0(src, dst, nb); break;
    case VKV_Q8_0: dequantize_q8_0(src, dst, nb); break;
    case VKV_Q4_1: dequantize_q4_1(src, dst, nb); break;
    case VKV_Q5_0: dequantize_q5_0(src, dst, nb); break;
    case VKV_Q5_1: dequantize_q5_1(src, dst, nb); break;
    case VKV_Q2_K: dequantize_q2_K(src, dst, nb); break;
    case VKV_Q3_K: dequantize_q3_K(src, dst, nb); break;
    case VKV_Q4_K: dequantize_q4_K(src, dst, nb); break;
    case VKV_Q5_K: dequantize_q5_K(src, dst, nb); break;
    case VKV_Q6_K: dequantize_q6_K(src, dst, nb); break;
    case VKV_IQ4_NL: dequantize_iq4_nl(src, dst, nb); break;
    case VKV_IQ4_XS: dequantize_iq4_xs(src, dst, nb); break;
    }
}

/* ------------------------------------------------------------- encoders */

/* Round half to even through the float adder, as ggml's nearest_int does
 * (valid for |x| < 2^22; every caller stays far below). */
static int nearest_int(float x)
{
    assert(fabsf(x) <= 4194303.f);
    float v = x + 12582912.f; /* 1.5 * 2^23: the integer lands in the low mantissa bits */
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value of largest magnitude, with its sign (the first of ties). */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max)
{
    *min = *max = x[0];
    for (int j = 1; j < n; j++) {
        *min = fminf(*min, x[j]);
        *max = fmaxf(*max, x[j]);
    }
}

/* d = signed max / -8 so the largest magnitude maps exactly to q = 0. A
 * block of n (even) elements: byte j holds element j (low nibble) and
 * j + n/2 (high); n = 32 is ggml's q4_0 block. */
void vkv_quantize_block_q4_0(const float *x, int n, uint8_t *dst)
{
    const float max = signed_absmax(x, n);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t d16 = vkv_f32_to_fp16(d);
    memcpy(dst, &d16, 2);
    for (int j = 0; j < n / 2; j++) {
        /* x*id is in [-8, 8]; truncating x*id + 8.5 rounds to nearest */
        const int q0 = clampi((int)(x[j] * id + 8.5f), 0, 15);
        const int q1 = clampi((int)(x[j + n / 2] * id + 8.5f), 0, 15);
        dst[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void quantize_q4_0(const float *x, vkv_block_q4_0 *b, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) vkv_quantize_block_q4_0(x, VKV_QK4_0, (uint8_t *)&b[i]);
}

/* d = max |x| / 127; n elements, n = 32 is ggml's q8_0 block. */
void vkv_quantize_block_q8_0(const float *x, int n, uint8_t *dst)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint16_t d16 = vkv_f32_to_fp16(d);
    memcpy(dst, &d16, 2);
    for (int j = 0; j < n; j++) dst[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void quantize_q8_0(const float *x, vkv_block_q8_0 *b, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK8_0) vkv_quantize_block_q8_0(x, VKV_QK8_0, (uint8_t *)&b[i]);
}

/* Fits x ~ scale*L - min with L in [0, nmax] (ggml's make_qkx2_quants):
 * starts from the min/max grid, then tries nstep+1 stretched grids and keeps
 * the weighted least-squares fit of scale and min with the lowest error.
 * Returns scale; *the_min >= 0 is the subtracted offset. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep)
{
    uint8_t Laux[32];
    assert(n <= 32);
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0; /* the offset only ever lowers the grid */
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += w[i] * diff * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * Laux[i] + this_min - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Stores the eight 6-bit scales and mins of a q4_K/q5_K block. */
static void pack_scale_min_k4(const int ls[8], const int lm[8], uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = (uint8_t)ls[j];
            s[j + 4] = (uint8_t)lm[j];
        } else {
            s[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            s[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* The shared part of ggml's quantize_row_q4_K_ref / q5_K_ref: fit each
 * sub-block of 32 to values in [0, nmax], quantize the eight scales and
 * mins to 6 bits against the block maxima, then requantize the elements
 * with the scales actually stored. Fills L, scales, d and dmin. */
static void fit_k_block(const float *x, int nmax, float rmin, int nstep, uint8_t L[VKV_QK_K], uint8_t scales12[12],
                        uint16_t *d_out, uint16_t *dmin_out)
{
    float w[32], scales[8], mins[8];
    int ls[8], lm[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        ls[j] = clampi(nearest_int(inv_scale * scales[j]), 0, 63);
        lm[j] = clampi(nearest_int(inv_min * mins[j]), 0, 63);
    }
    pack_scale_min_k4(ls, lm, scales12);
    *d_out = vkv_f32_to_fp16(max_scale / 63.0f);
    *dmin_out = vkv_f32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        q4_K_scale_min(j, scales12, &sc, &m);
        const float d = vkv_fp16_to_f32(*d_out) * sc;
        if (d == 0.0f) continue; /* keep the fit's L: every value decodes to -dm */
        const float dm = vkv_fp16_to_f32(*dmin_out) * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

static void quantize_q4_K(const float *x, vkv_block_q4_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        fit_k_block(x, 15, -1.0f, 20, L, b[i].scales, &b[i].d, &b[i].dmin);
        uint8_t *q = b[i].qs;
        for (int j = 0; j < VKV_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* q4_K's fit with 5-bit values; bit 4 goes to qh. */
static void quantize_q5_K(const float *x, vkv_block_q5_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        fit_k_block(x, 31, -0.5f, 15, L, b[i].scales, &b[i].d, &b[i].dmin);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int p = 0; p < 4; p++) {
            const uint8_t *lo = L + 64 * p, *hi = lo + 32;
            for (int l = 0; l < 32; l++) {
                b[i].qs[32 * p + l] = (uint8_t)((lo[l] & 0xF) | ((hi[l] & 0xF) << 4));
                b[i].qh[l] |= (uint8_t)(((lo[l] >> 4) << (2 * p)) | ((hi[l] >> 4) << (2 * p + 1)));
            }
        }
    }
}

/* Symmetric fit x ~ scale*(L - nmax), L in [0, 2*nmax) (ggml's make_qx_quants
 * with weights x^2): tries 19 grids around -nmax/max and keeps the one whose
 * least-squares scale explains the most of x. The sign of scale is opposite
 * to the signed max, so the extreme value lands on -nmax. */
static float fit_scale_symmetric(int n, int nmax, const float *x, uint8_t *L)
{
    const float max = signed_absmax(x, n);
    if (fabsf(max) < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 > 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ggml's quantize_row_q6_K_ref: fit each sub-block of 16, store the sixteen
 * scales as int8 against the largest, requantize with the stored scales. */
static void quantize_q6_K(const float *x, vkv_block_q6_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    float scales[VKV_QK_K / 16];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < VKV_QK_K / 16; ib++) {
            scales[ib] = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (max_abs_scale < 1e-15f) continue; /* all zero: d = 0 decodes to zeros */
        const float iscale = -128.0f / max_scale;
        b[i].d = vkv_f32_to_fp16(1 / iscale);
        for (int ib = 0; ib < VKV_QK_K / 16; ib++)
            b[i].scales[ib] = (int8_t)clampi(nearest_int(iscale * scales[ib]), -128, 127);
        for (int j = 0; j < VKV_QK_K / 16; j++) {
            const float d = vkv_fp16_to_f32(b[i].d) * b[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(clampi(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int j = 0; j < VKV_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t *q = L + j + l; /* quadrants at q[0], q[32], q[64], q[96] */
                ql[l] = (uint8_t)((q[0] & 0xF) | ((q[64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q[32] & 0xF) | ((q[96] & 0xF) << 4));
                qh[l] = (uint8_t)((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) |
                                  ((q[96] >> 4) << 6));
            }
        }
    }
}

/* The min/max grid of q4_1 and q5_1: x = d * q + m, m the block minimum,
 * q in [0, nmax]. */
static void fit_min_grid(const float *x, int nmax, int q[VKV_QK4_0], uint16_t *d_out, uint16_t *m_out)
{
    float min, max;
    min_max(x, VKV_QK4_0, &min, &max);
    const float d = (max - min) / (float)nmax;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = vkv_f32_to_fp16(d);
    *m_out = vkv_f32_to_fp16(min);
    for (int j = 0; j < VKV_QK4_0; j++) q[j] = clampi((int)((x[j] - min) * id + 0.5f), 0, nmax);
}

static void quantize_q4_1(const float *x, vkv_block_q4_1 *b, uint64_t nb)
{
    int q[VKV_QK4_0];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) {
        fit_min_grid(x, 15, q, &b[i].d, &b[i].m);
        for (int j = 0; j < VKV_QK4_0 / 2; j++) b[i].qs[j] = (uint8_t)(q[j] | (q[j + VKV_QK4_0 / 2] << 4));
    }
}

/* Stores 32 5-bit values: low nibbles as q4_0, bit 4 of element j in bit j
 * of the little-endian qh. */
static void q5_pack(const int q[32], uint8_t qh_bytes[4], uint8_t qs[16])
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        qh |= (uint32_t)((q[j] >> 4) & 1) << j;
        qh |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh_bytes[k] = (uint8_t)(qh >> (8 * k));
}

/* As q4_0: d = signed max / -16 so the largest magnitude maps to q = 0. */
static void quantize_q5_0(const float *x, vkv_block_q5_0 *b, uint64_t nb)
{
    int q[VKV_QK4_0];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) {
        const float max = signed_absmax(x, VKV_QK4_0);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vkv_f32_to_fp16(d);
        for (int j = 0; j < VKV_QK4_0; j++) q[j] = clampi((int)(x[j] * id + 16.5f), 0, 31);
        q5_pack(q, b[i].qh, b[i].qs);
    }
}

static void quantize_q5_1(const float *x, vkv_block_q5_1 *b, uint64_t nb)
{
    int q[VKV_QK4_0];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) {
        fit_min_grid(x, 31, q, &b[i].d, &b[i].m);
        q5_pack(q, b[i].qh, b[i].qs);
    }
}

/* The low 2 bits of 256 values in the q2_K/q3_K order: element
 * 128h + 32s + l in bits 2s.. of qs[32h + l]. */
static void pack_2bit(const uint8_t L[VKV_QK_K], uint8_t qs[VKV_QK_K / 4])
{
    for (int j = 0; j < VKV_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((L[j + l] & 3) | (L[j + l + 32] & 3) << 2 | (L[j + l + 64] & 3) << 4 |
                                      (L[j + l + 96] & 3) << 6);
}

/* ggml's quantize_row_q2_K_ref in outline: a scale-and-min fit per
 * sub-block of 16 (weights |x|), both quantized to 4 bits against their
 * maxima, elements requantized with the stored values. */
static void quantize_q2_K(const float *x, vkv_block_q2_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    float w[16], scales[16], mins[16];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15);
            max_scale = fmaxf(max_scale, scales[j]);
            max_min = fmaxf(max_min, mins[j]);
        }
        const float inv_scale = max_scale > 0 ? 15.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 15.0f / max_min : 0.0f;
        for (int j = 0; j < 16; j++) {
            const int ls = clampi(nearest_int(inv_scale * scales[j]), 0, 15);
            const int lm = clampi(nearest_int(inv_min * mins[j]), 0, 15);
            b[i].scales[j] = (uint8_t)(ls | (lm << 4));
        }
        b[i].d = vkv_f32_to_fp16(max_scale / 15.0f);
        b[i].dmin = vkv_f32_to_fp16(max_min / 15.0f);
        for (int j = 0; j < 16; j++) {
            const float d = vkv_fp16_to_f32(b[i].d) * (b[i].scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = vkv_fp16_to_f32(b[i].dmin) * (b[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clampi(nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, b[i].qs);
    }
}

/* A symmetric fit per sub-block of 16 (q in [-4, 3]), the sixteen scales
 * stored as 6-bit signed values against the largest. */
static void quantize_q3_K(const float *x, vkv_block_q3_K *b, uint64_t nb)
{
    uint8_t L[VKV_QK_K];
    float scales[16];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_symmetric(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (amax < 1e-15f) continue; /* d = 0 decodes to zeros */
        const float iscale = -32.0f / max_scale;
        b[i].d = vkv_f32_to_fp16(1 / iscale);
        for (int j = 0; j < 16; j++) {
            const int l = clampi(nearest_int(iscale * scales[j]), -32, 31) + 32;
            if (j < 8) b[i].scales[j] = (uint8_t)(l & 0xF);
            else b[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            b[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        for (int j = 0; j < 16; j++) {
            const float d = vkv_fp16_to_f32(b[i].d) * (float)q3_K_scale(b[i].scales, j);
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(clampi(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        pack_2bit(L, b[i].qs);
        for (int e = 0; e < VKV_QK_K; e++)
            if (L[e] > 3) b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
    }
}

/* The index of the iq4 table value nearest to v. */
static int iq4_nearest(float v)
{
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf(vkv_kvalues_iq4nl[k] - v) < fabsf(vkv_kvalues_iq4nl[best] - v)) best = k;
    return best;
}

/* Fits 32 values to d * kvalues[q]: d from the signed maximum (it lands on
 * the table's -127), then one least-squares refit of d over the chosen
 * indices. Returns d; q gets the indices. */
static float iq4_fit32(const float *x, uint8_t q[32])
{
    const float max = signed_absmax(x, 32);
    if (fabsf(max) < 1e-15f) {
        memset(q, 8, 32); /* kvalues[8] = 1: times d = 0 */
        return 0.0f;
    }
    float d = max / vkv_kvalues_iq4nl[0];
    for (int pass = 0; pass < 2; pass++) {
        float sum_xq = 0, sum_q2 = 0;
        for (int j = 0; j < 32; j++) {
            q[j] = (uint8_t)iq4_nearest(x[j] / d);
            const float v = vkv_kvalues_iq4nl[q[j]];
            sum_xq += x[j] * v;
            sum_q2 += v * v;
        }
        if (pass == 0 && sum_q2 > 0) d = sum_xq / sum_q2;
    }
    return d;
}

static void iq4_pack32(const uint8_t q[32], uint8_t qs[16])
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

static void quantize_iq4_nl(const float *x, vkv_block_iq4_nl *b, uint64_t nb)
{
    uint8_t q[32];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK4_0) {
        b[i].d = vkv_f32_to_fp16(iq4_fit32(x, q));
        iq4_pack32(q, b[i].qs);
    }
}

/* Per sub-block iq4 fits, their scales stored as 6-bit signed multiples of
 * d = -max / 32, indices re-chosen with the stored scales. */
static void quantize_iq4_xs(const float *x, vkv_block_iq4_xs *b, uint64_t nb)
{
    uint8_t q[32];
    float scales[8];
    for (uint64_t i = 0; i < nb; i++, x += VKV_QK_K) {
        float amax = 0, max_scale = 0;
        for (int j = 0; j < 8; j++) {
            scales[j] = iq4_fit32(x + 32 * j, q);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        const float d = -max_scale / 32.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = vkv_f32_to_fp16(d);
        const float d_stored = vkv_fp16_to_f32(b[i].d);
        for (int j = 0; j < 8; j++) {
            const int l = clampi(nearest_int(id * scales[j]), -32, 31);
            b[i].scales_l[j / 2] |= (uint8_t)(((l + 32) & 0xF) << (4 * (j % 2)));
            b[i].scales_h |= (uint16_t)(((l + 32) >> 4) << (2 * j));
            const float dl = d_stored * (float)l;
            for (int k = 0; k < 32; k++) q[k] = dl != 0.0f ? (uint8_t)iq4_nearest(x[32 * j + k] / dl) : 8;
            iq4_pack32(q, b[i].qs + 16 * j);
        }
    }
}

void vkv_quantize_row(vkv_dtype t, const float *src, void *dst, uint64_t n)
{
    const vkv_dtype_info *info = vkv_dtype_get(t);
    assert(info && n % info->block_size == 0);
    if (!info) return;
    const uint64_t nb = n / info->block_size;
    switch (t) {
    case VKV_F32: memcpy(dst, src, n * sizeof(float)); break;
    case VKV_F16: {
        uint16_t *h = dst;
        for (uint64_t i = 0; i < n; i++) h[i] = vkv_f32_to_fp16(src[i]);
        break;
    }
    case VKV_BF16: {
        uint16_t *h = dst;
        for (uint64_t i = 0; i < n; i++) h[i] = vkv_f32_to_bf16(src[i]);
        break;
    }
    case VKV_Q4_0: quantize_q4_0(src, dst, nb); break;
    case VKV_Q8_0: quantize_q8_0(src, dst, nb); break;
    case VKV_Q4_1: quantize_q4_1(src, dst, nb); break;
    case VKV_Q5_0: quantize_q5_0(src, dst, nb); break;
    case VKV_Q5_1: quantize_q5_1(src, dst, nb); break;
    case VKV_Q2_K: quantize_q2_K(src, dst, nb); break;
    case VKV_Q3_K: quantize_q3_K(src, dst, nb); break;
    case VKV_Q4_K: quantize_q4_K(src, dst, nb); break;
    case VKV_Q5_K: quantize_q5_K(src, dst, nb); break;
    case VKV_Q6_K: quantize_q6_K(src, dst, nb); break;
    case VKV_IQ4_NL: quantize_iq4_nl(src, dst, nb); break;
    case VKV_IQ4_XS: quantize_iq4_xs(src, dst, nb); break;
    }
}
