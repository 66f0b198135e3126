#version 450
// KnormPress: scores[h, j] = -||k_j|| of the post-RoPE key in cache slot j of
// KV head h (kvpress: -keys.norm(dim=-1)). One invocation per token.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#define KV_BINDING 0
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 1) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n;         // context tokens (slots 0..n-1)
    uint n_ctx;     // slots per KV head in the cache (stride)
    uint head_dim;
    uint kv_head0;  // first KV head of this dispatch (the cache is bound from it)
} pc;

void main()
{
    const uint j = gl_GlobalInvocationID.x, hl = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    const uint d4n = pc.head_dim / 4u, row = (hl * pc.n_ctx + j) * d4n;
    float ss = 0.0;
    for (uint d4 = 0u; d4 < d4n; d4++) {
        const vec4 k = kv_load4(row + d4);
        ss += dot(k, k);
    }
    scores[(pc.kv_head0 + hl) * pc.n + j] = -sqrt(ss);
}
