#version 450
// KeyDiff, step 3 of 3: scores[h, j] = -cos(k_j, a) with a the anchor of
// token j (the whole-sequence anchor, or that of j's block); 0 when either
// vector is zero. One invocation per token.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#define KV_BINDING 0
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 1) readonly buffer Abuf { vec4 anchors[]; };   // [n_kv_head, n_anchor, head_dim] f32
layout(binding = 2) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n, n_ctx, head_dim;
    uint kv_head0;  // first KV head of this dispatch (the cache is bound from it)
    uint block;     // 0: one anchor per head; else tokens per block
    uint n_anchor;  // anchors per head
} pc;

void main()
{
    const uint j = gl_GlobalInvocationID.x, hl = gl_WorkGroupID.y, h = pc.kv_head0 + hl;
    if (j >= pc.n) return;
    const uint d4n = pc.head_dim / 4u, row = (hl * pc.n_ctx + j) * d4n;
    const uint arow = (h * pc.n_anchor + (pc.block != 0u ? j / pc.block : 0u)) * d4n;
    float ka = 0.0, kk = 0.0, aa = 0.0;
    for (uint d4 = 0u; d4 < d4n; d4++) {
        const vec4 k = kv_load4(row + d4), a = anchors[arow + d4];
        ka += dot(k, a);
        kk += dot(k, k);
        aa += dot(a, a);
    }
    scores[h * pc.n + j] = kk > 0.0 && aa > 0.0 ? -(ka / (sqrt(kk) * sqrt(aa))) : 0.0;
}
