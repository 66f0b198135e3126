/* The KV cache's row codec on the host: f32 values to the row format of
 * kvlayout/kv_layout.h and back, as the kv_store and kv_convert kernels and
 * their CPU references write and read rows (docs/ARCHITECTURE.md §2). */
#include "kvlayout/kv_layout.h"

#include <string.h>

#include "core/fp16.h"

/* Elements of block b of a quantized row: 32, the last one fewer. */
static int block_len(uint32_t hd, uint32_t b) { return hd - 32 * b < 32 ? (int)(hd - 32 * b) : 32; }

void vkv_kv_encode_row(vkv_dtype t, uint32_t hd, const float *x, void *row)
{
    uint8_t *out = row;
    memset(out, 0, vkv_kv_row_bytes(t, hd));
    if (t == VKV_F32 || t == VKV_F16) {
        vkv_quantize_row(t, x, row, hd);
        return;
    }
    for (uint32_t b = 0, off = 0; 32 * b < hd; b++) {
        int n = block_len(hd, b);
        if (t == VKV_Q8_0) vkv_quantize_block_q8_0(x + 32 * b, n, out + off);
        else vkv_quantize_block_q4_0(x + 32 * b, n, out + off);
        off += 2 + (t == VKV_Q8_0 ? n : n / 2);
    }
}

void vkv_kv_decode_row(vkv_dtype t, uint32_t hd, const void *row, float *x)
{
    const uint8_t *in = row;
    if (t == VKV_F32 || t == VKV_F16) {
        vkv_dequantize_row(t, row, x, hd);
        return;
    }
    for (uint32_t b = 0, off = 0; 32 * b < hd; b++) {
        int n = block_len(hd, b);
        if (t == VKV_Q8_0) vkv_dequantize_block_q8_0(in + off, n, x + 32 * b);
        else vkv_dequantize_block_q4_0(in + off, n, x + 32 * b);
        off += 2 + (t == VKV_Q8_0 ? n : n / 2);
    }
}

float vkv_kv_row_get(vkv_dtype t, uint32_t hd, const void *row, uint32_t d)
{
    const uint8_t *in = row;
    if (t == VKV_F16) {
        uint16_t h;
        memcpy(&h, in + 2 * d, 2);
        return vkv_fp16_to_f32(h);
    }
    if (t == VKV_F32) {
        float f;
        memcpy(&f, in + 4 * d, 4);
        return f;
    }
    uint32_t b = d / 32, j = d % 32;
    int n = block_len(hd, b);
    const uint8_t *blk = in + b * (t == VKV_Q8_0 ? 34 : 18); /* blocks before the last are whole */
    uint16_t d16;
    memcpy(&d16, blk, 2);
    const float scale = vkv_fp16_to_f32(d16);
    if (t == VKV_Q8_0) return (float)(int8_t)blk[2 + j] * scale;
    uint32_t half = (uint32_t)n / 2;
    uint8_t q = j < half ? blk[2 + j] & 0xF : blk[2 + j - half] >> 4;
    return (float)(q - 8) * scale;
}
