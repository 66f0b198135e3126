/* Tensor storage types, numbered as GGUF/ggml numbers them, and their block
 * layouts. A "block" is the unit of quantization: QK elements stored in
 * block_bytes bytes. Row lengths must be a multiple of the block size. */
#ifndef VKV_DTYPE_H
#define VKV_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vkv_dtype {
    VKV_F32 = 0,
    VKV_F16 = 1,
    VKV_Q4_0 = 2,
    VKV_Q4_1 = 3,
    VKV_Q5_0 = 6,
    VKV_Q5_1 = 7,
    VKV_Q8_0 = 8,
    VKV_Q2_K = 10,
    VKV_Q3_K = 11,
    VKV_Q4_K = 12,
    VKV_Q5_K = 13,
    VKV_Q6_K = 14,
    VKV_IQ4_NL = 20,
    VKV_IQ4_XS = 23,
    VKV_BF16 = 30,
} vkv_dtype;

#define VKV_QK4_0 32
#define VKV_QK8_0 32
#define VKV_QK_K 256

/* Every supported type, in the order the GPU kernel variants are listed:
 * X(enum suffix, name in kernel and shader names, arg). src/vk/kernels.h
 * expands its weight kernels from this list (arg: what they pass through);
 * shaders/meson.build's weight_types must spell the same names, which the
 * build checks (src/vk/kernels.h). */
#define VKV_DTYPE_LIST_ARG(X, arg)                                                                     \
    X(F32, f32, arg) X(F16, f16, arg) X(BF16, bf16, arg) X(Q8_0, q8_0, arg) X(Q4_0, q4_0, arg)         \
        X(Q4_1, q4_1, arg) X(Q5_0, q5_0, arg) X(Q5_1, q5_1, arg) X(Q2_K, q2_K, arg) X(Q3_K, q3_K, arg) \
            X(Q4_K, q4_K, arg) X(Q5_K, q5_K, arg) X(Q6_K, q6_K, arg) X(IQ4_NL, iq4_nl, arg)            \
                X(IQ4_XS, iq4_xs, arg)
/* X(enum suffix) for every supported type, in the same order. */
#define VKV_DTYPE_LIST(X) VKV_DTYPE_LIST_ARG(VKV_DTYPE_SUFFIX, X)
#define VKV_DTYPE_SUFFIX(T, t, X) X(T)
#define VKV_DTYPE_COUNT 15

/* q4_0: x = d * (q - 8), q 4-bit; element j<16 in the low nibble of qs[j],
 * element j+16 in the high nibble. 18 bytes. */
typedef struct { uint16_t d; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_q4_0;
/* q8_0: x = d * q, q int8. 34 bytes. */
typedef struct { uint16_t d; int8_t qs[VKV_QK8_0]; } vkv_block_q8_0;
/* q4_1: x = d * q + m, q 4-bit, nibbles as q4_0. 20 bytes. */
typedef struct { uint16_t d, m; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_q4_1;
/* q5_0: x = d * (q - 16), q 5-bit: low 4 bits as q4_0's nibbles, bit 4 of
 * element j in bit j of the little-endian u32 qh. 22 bytes. */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_q5_0;
/* q5_1: x = d * q + m, q 5-bit laid out as q5_0. 24 bytes. */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_q5_1;
/* q2_K: 16 sub-blocks of 16; x = d*(sc[j]&15)*q - dmin*(sc[j]>>4), q 2-bit.
 * Element 128h + 32s + l (l < 32) is bits 2s..2s+1 of qs[32h + l]; its
 * sub-block is 8h + 2s + l/16. 84 bytes. */
typedef struct { uint8_t scales[VKV_QK_K / 16]; uint8_t qs[VKV_QK_K / 4]; uint16_t d, dmin; } vkv_block_q2_K;
/* q3_K: 16 sub-blocks of 16; x = d * (sc[j] - 32) * (q - 4), q 3-bit: low 2
 * bits placed as q2_K's, bit 2 in bit 4h + s of hmask[l]. The 6-bit scales
 * are packed in scales[12]: low nibbles in scales[0..7] (j < 8: low nibble
 * of scales[j], else high nibble of scales[j-8]), top 2 bits of scale j in
 * bits 2(j/4).. of scales[8 + j%4]. 110 bytes. */
typedef struct { uint8_t hmask[VKV_QK_K / 8]; uint8_t qs[VKV_QK_K / 4]; uint8_t scales[12]; uint16_t d; } vkv_block_q3_K;
/* q4_K: 8 sub-blocks of 32; x = d*sc[j]*q - dmin*m[j], 6-bit sc/m packed in
 * scales[12]; 144 bytes. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[VKV_QK_K / 2]; } vkv_block_q4_K;
/* q5_K: q4_K with a fifth bit: bit j of qh[l] is bit 4 of element 32j + l.
 * 176 bytes. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[VKV_QK_K / 8]; uint8_t qs[VKV_QK_K / 2]; } vkv_block_q5_K;
/* q6_K: 16 sub-blocks of 16; x = d * sc[j] * (q - 32), q 6-bit split in ql/qh;
 * 210 bytes. */
typedef struct { uint8_t ql[VKV_QK_K / 2]; uint8_t qh[VKV_QK_K / 4]; int8_t scales[VKV_QK_K / 16]; uint16_t d; } vkv_block_q6_K;

/* iq4_nl: x = d * kvalues_iq4nl[q], q 4-bit index into a fixed non-uniform
 * table, nibbles as q4_0. 18 bytes. */
typedef struct { uint16_t d; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_iq4_nl;
/* iq4_xs: 8 sub-blocks of 32 laid out as iq4_nl; x = d * (ls[j] - 32) *
 * kvalues_iq4nl[q], ls 6-bit: low 4 bits in the nibbles of scales_l, top 2
 * bits in bits 2j..2j+1 of scales_h. 136 bytes. */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[VKV_QK_K / 64]; uint8_t qs[VKV_QK_K / 2]; } vkv_block_iq4_xs;

/* The 16 values an iq4 index selects (ggml's kvalues_iq4nl). */
extern const int8_t vkv_kvalues_iq4nl[16];

_Static_assert(sizeof(vkv_block_q4_0) == 18, "q4_0 block layout");
_Static_assert(sizeof(vkv_block_q4_1) == 20, "q4_1 block layout");
_Static_assert(sizeof(vkv_block_q5_0) == 22, "q5_0 block layout");
_Static_assert(sizeof(vkv_block_q5_1) == 24, "q5_1 block layout");
_Static_assert(sizeof(vkv_block_q2_K) == 84, "q2_K block layout");
_Static_assert(sizeof(vkv_block_q3_K) == 110, "q3_K block layout");
_Static_assert(sizeof(vkv_block_q5_K) == 176, "q5_K block layout");
_Static_assert(sizeof(vkv_block_iq4_nl) == 18, "iq4_nl block layout");
_Static_assert(sizeof(vkv_block_iq4_xs) == 136, "iq4_xs block layout");
_Static_assert(sizeof(vkv_block_q8_0) == 34, "q8_0 block layout");
_Static_assert(sizeof(vkv_block_q4_K) == 144, "q4_K block layout");
_Static_assert(sizeof(vkv_block_q6_K) == 210, "q6_K block layout");

typedef struct vkv_dtype_info {
    const char *name;    /* "f32", "q4_K", ... as ggml spells them */
    uint32_t block_size; /* elements per block */
    uint32_t block_bytes;
} vkv_dtype_info;

/* NULL for a type number this runtime does not support. */
const vkv_dtype_info *vkv_dtype_get(uint32_t type);
/* ggml's name of any type number it has used ("iq2_xxs", "mxfp4", ...), so
 * that an unsupported tensor type can be named; "unknown" for the rest. */
const char *vkv_ggml_type_name(uint32_t type);
/* The position of t in VKV_DTYPE_LIST (kernel variants are listed in that
 * order); -1 for a type this runtime does not support. */
int vkv_dtype_index(vkv_dtype t);
/* Parses "f16", "q4_K" (case-insensitive); returns -1 if unknown. */
int vkv_dtype_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t vkv_dtype_row_bytes(vkv_dtype t, uint64_t n);

/* Weight rows as the device holds them (docs/ARCHITECTURE.md §1, "Grouped
 * device rows"). Every type keeps the file's rows but q6_K, q8_0 and q4_0,
 * whose blocks (210, 34 and 18 bytes) start only 2-byte aligned: their
 * blocks go in groups of 8, the 8 blocks' d first (16 bytes), then the 8
 * bodies (the block without its d: 208, 32 or 16 bytes), so that every body
 * starts 16-byte aligned, for 16-byte loads; a last group of r < 8 blocks
 * pads its r d to 16 bytes, and a row grows by at most 14 bytes.
 * shaders/common/weights.glsl reads this layout. */
/* Whether t's device rows differ from the file's (even where no padding
 * makes them longer: the bytes are reordered). */
bool vkv_dtype_has_device_layout(vkv_dtype t);
/* Bytes of a device row of n elements; 0 as vkv_dtype_row_bytes. */
size_t vkv_dtype_device_row_bytes(vkv_dtype t, uint64_t n);
/* `rows` rows of n elements: the file's layout at src to the device's at dst
 * (rows x vkv_dtype_device_row_bytes bytes), and back. */
void vkv_dtype_rows_to_device(vkv_dtype t, uint64_t n, const void *src, void *dst, uint64_t rows);
void vkv_dtype_rows_from_device(vkv_dtype t, uint64_t n, const void *src, void *dst, uint64_t rows);

/* Decodes n elements (a multiple of the block size) of type t into f32. */
void vkv_dequantize_row(vkv_dtype t, const void *src, float *dst, uint64_t n);
/* Encodes n f32 values into type t (round to nearest; for the quantized types
 * the simple ggml reference quantizers). Used to make test data and models. */
void vkv_quantize_row(vkv_dtype t, const float *src, void *dst, uint64_t n);

/* One q8_0 / q4_0 block of n elements (n <= 32, even for q4_0): an f16 scale
 * d, then n int8 (q8_0, x = d q) or n/2 bytes whose byte j holds element j in
 * its low nibble and j + n/2 in its high one (q4_0, x = d (q - 8)). n = 32 is
 * ggml's block; the KV cache cuts its rows into such blocks, the last one
 * shorter (kvlayout/kv_layout.h). 2 + n or 2 + n/2 bytes, no alignment needed. */
void vkv_quantize_block_q8_0(const float *x, int n, uint8_t *dst);
void vkv_quantize_block_q4_0(const float *x, int n, uint8_t *dst);
void vkv_dequantize_block_q8_0(const uint8_t *src, int n, float *y);
void vkv_dequantize_block_q4_0(const uint8_t *src, int n, float *y);

#endif
