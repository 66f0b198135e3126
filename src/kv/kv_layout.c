/* The KV cache's byte counts (see kv_layout.h). */
#include "kv/kv_layout.h"

#include <assert.h>

size_t vkv_kv_cache_bytes(vkv_dtype t, uint32_t n_kv_head, uint32_t n_ctx_max, uint32_t head_dim)
{
    assert(t == VKV_F16 || t == VKV_F32);
    return (size_t)n_kv_head * n_ctx_max * head_dim * (t == VKV_F16 ? 2 : 4);
}
