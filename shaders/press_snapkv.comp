#version 450
// SnapKV (and PyramidKV), the final step: scores[h, j] for the prefix
// j < n_pre = n - w is avg_pool1d(kernel, stride 1, pad kernel / 2, zero
// padding counted) of the window attention, averaged over the w window
// queries and the query heads of h's group:
//   scores[h, j] = sum_{|t - j| <= kernel / 2, 0 <= t < n_pre} raw[h, t] / (kernel * w * group)
// (all three means are linear, so their order does not matter); the window
// itself scores in the forced band, the newest highest, so it is always kept
// and a budget below it keeps its newest. One invocation per (token, KV head).

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Rbuf { float raw[]; };      // [n_kv_head, n_pre] f32
layout(binding = 1) writeonly buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n, n_pre;
    uint kernel;    // odd
    float inv_div;  // 1 / (kernel * w * group)
} pc;

#include "common/press_forced.glsl"

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    if (j >= pc.n_pre) { // the window
        scores[h * pc.n + j] = press_forced_score(j - pc.n_pre);
        return;
    }
    const uint half_k = pc.kernel / 2u;
    const uint t0 = j > half_k ? j - half_k : 0u, t1 = min(j + half_k + 1u, pc.n_pre);
    float acc = 0.0;
    for (uint t = t0; t < t1; t++) acc += raw[h * pc.n_pre + t];
    scores[h * pc.n + j] = acc * pc.inv_div;
}
