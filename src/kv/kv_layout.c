/* The KV cache's byte counts (see kv_layout.h). */
#include "kv/kv_layout.h"

#include <assert.h>

size_t vkv_kv_cache_bytes(vkv_dtype t, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim)
{
    assert(t == VKV_F16 || t == VKV_F32);
    return (size_t)n_kv_head * n_ctx_max * head_dim * (t == VKV_F16 ? 2 : 4);
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
