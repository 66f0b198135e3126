/* The KV cache's byte counts (see kv_layout.h). */
#include "kvlayout/kv_layout.h"

#include <assert.h>

bool vkv_kv_type_ok(vkv_dtype t) { return t == VKV_F16 || t == VKV_F32 || vkv_kv_type_quantized(t); }
bool vkv_kv_type_quantized(vkv_dtype t) { return t == VKV_Q8_0 || t == VKV_Q4_0; }

size_t vkv_kv_row_bytes(vkv_dtype t, uint32_t head_dim)
{
    assert(vkv_kv_type_ok(t) && (!vkv_kv_type_quantized(t) || head_dim % 4 == 0));
    size_t n_blocks = (head_dim + 31) / 32, bytes;
    switch (t) {
    case VKV_F32: return 4ull * head_dim;
    case VKV_F16: return 2ull * head_dim;
    case VKV_Q8_0: bytes = 2 * n_blocks + head_dim; break;
    default: bytes = 2 * n_blocks + head_dim / 2; break;
    }
    return (bytes + 3) & ~(size_t)3;
}

size_t vkv_kv_cache_bytes(vkv_dtype t, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim)
{
    return (size_t)n_kv_head * n_ctx_max * vkv_kv_row_bytes(t, head_dim);
}

void vkv_vector_joint_blocks(const float *w_joint, uint32_t n_kv_head, uint32_t hd, float *out)
{
    const size_t D = (size_t)n_kv_head * hd;
    for (uint32_t s = 0; s < n_kv_head; s++)
        for (uint32_t h = 0; h < n_kv_head; h++) {
            uint32_t src = (h + s) % n_kv_head;
            float *blk = out + ((size_t)s * n_kv_head + h) * hd * hd;
            for (uint32_t r = 0; r < hd; r++)
                for (uint32_t c = 0; c < hd; c++) blk[(size_t)r * hd + c] = w_joint[((size_t)h * hd + r) * D + (size_t)src * hd + c];
        }
}
