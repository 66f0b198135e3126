#version 450
// ExpectedAttention, the final step, one invocation per (token j, KV head):
// the expected attention p_j = softmax(z) averaged over the query heads of
// the group, then (p_j + epsilon) ||v_j|| when vnorm != 0 (kvpress's
// use_vnorm, its default), p_j alone otherwise (epsilon unused, as kvpress);
// the first n_sink tokens are kept (+inf; kvpress pads them with the maximum
// score). docs/ARCHITECTURE.md §2; the reference is expected_ref_core
// (src/press/expected.c).

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Zbuf { float z[]; };        // [n_head, n - n_sink]
layout(binding = 1) readonly buffer Lbuf { float lse[]; };      // [n_head]
#define KV_BINDING 2
#include "common/kv_vec4.glsl"                                   // [heads of this dispatch, n_ctx, head_dim] values
layout(binding = 3) writeonly buffer Obuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n, n_sink, n_ctx, head_dim, n_head, n_kv_head, kv_head0;
    float epsilon;   // added to p_j before the value norm multiplies it (kvpress's epsilon)
    uint vnorm;      // 1: (p_j + epsilon) ||v_j||; 0: p_j
} pc;

float press_inf() { return uintBitsToFloat(0x7f800000u); }

void main()
{
    const uint j = gl_GlobalInvocationID.x, hl = gl_WorkGroupID.y, kh = pc.kv_head0 + hl;
    if (j >= pc.n) return;
    const uint o = kh * pc.n + j;
    if (j < pc.n_sink) {
        scores[o] = press_inf();
        return;
    }
    const uint group = pc.n_head / pc.n_kv_head, n_z = pc.n - pc.n_sink, d4n = pc.head_dim / 4u;
    float p = 0.0;
    for (uint g = 0u; g < group; g++) {
        const uint h = kh * group + g;
        p += exp(z[h * n_z + j - pc.n_sink] - lse[h]);
    }
    p /= float(group);
    if (pc.vnorm == 0u) {
        scores[o] = p;
        return;
    }
    float v2 = 0.0;
    for (uint d4 = 0u; d4 < d4n; d4++) {
        const vec4 v = kv_load4((hl * pc.n_ctx + j) * d4n + d4);
        v2 += dot(v, v);
    }
    scores[o] = (p + pc.epsilon) * sqrt(v2);
}
