/* Tensor storage types, numbered as GGUF/ggml numbers them, and their block
 * layouts. A "block" is the unit of quantization: QK elements stored in
 * block_bytes bytes. Row lengths must be a multiple of the block size. */
#ifndef VKV_DTYPE_H
#define VKV_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum vkv_dtype {
    VKV_F32 = 0,
    VKV_F16 = 1,
    VKV_Q4_0 = 2,
    VKV_Q8_0 = 8,
    VKV_Q4_K = 12,
    VKV_Q6_K = 14,
    VKV_BF16 = 30,
} vkv_dtype;

#define VKV_QK4_0 32
#define VKV_QK8_0 32
#define VKV_QK_K 256

/* q4_0: x = d * (q - 8), q 4-bit; element j<16 in the low nibble of qs[j],
 * element j+16 in the high nibble. 18 bytes. */
typedef struct { uint16_t d; uint8_t qs[VKV_QK4_0 / 2]; } vkv_block_q4_0;
/* q8_0: x = d * q, q int8. 34 bytes. */
typedef struct { uint16_t d; int8_t qs[VKV_QK8_0]; } vkv_block_q8_0;
/* q4_K: 8 sub-blocks of 32; x = d*sc[j]*q - dmin*m[j], 6-bit sc/m packed in
 * scales[12]; 144 bytes. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[VKV_QK_K / 2]; } vkv_block_q4_K;
/* q6_K: 16 sub-blocks of 16; x = d * sc[j] * (q - 32), q 6-bit split in ql/qh;
 * 210 bytes. */
typedef struct { uint8_t ql[VKV_QK_K / 2]; uint8_t qh[VKV_QK_K / 4]; int8_t scales[VKV_QK_K / 16]; uint16_t d; } vkv_block_q6_K;

_Static_assert(sizeof(vkv_block_q4_0) == 18, "q4_0 block layout");
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
/* Parses "f16", "q4_K" (case-insensitive); returns -1 if unknown. */
int vkv_dtype_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t vkv_dtype_row_bytes(vkv_dtype t, uint64_t n);

/* Decodes n elements (a multiple of the block size) of type t into f32. */
void vkv_dequantize_row(vkv_dtype t, const void *src, float *dst, uint64_t n);
/* Encodes n f32 values into type t (round to nearest; for the quantized types
 * the simple ggml reference quantizers). Used to make test data and models. */
void vkv_quantize_row(vkv_dtype t, const float *src, void *dst, uint64_t n);

#endif
