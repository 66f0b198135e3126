#version 450
// Window attention (SnapKV, PyramidKV, TOVA), step 2 of 2: for each KV head h
// and each prefix key j < n_pre, raw[h, j] = sum over the window queries i and
// the query heads g of h's group of the softmax weight exp(s_ij - lse[i, g]).
// lse[i, g] = m + log(l) combines press_window_lse's per-split (max, sum)
// pairs. Every window query sees every prefix key (j < n_pre <= n - w <=
// n - w + i), so no mask is needed here; the normalisation covered the
// window keys.
//
// One workgroup per (tile of wg keys, KV head), one key per thread: the query
// rows stream through shared memory TQ at a time and each thread loads its key
// once per tile for all TQ rows.

#extension GL_EXT_control_flow_attributes : require

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };       // [window captured, n_head, head_dim] f32
#define KV_BINDING 1
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 2) readonly buffer Pbuf { vec2 part[]; };      // [n_split, w, n_head] (max, sum)
layout(binding = 3) writeonly buffer Rbuf { float raw[]; };     // [n_kv_head, n_pre] f32

layout(push_constant) uniform PC {
    uint n, n_ctx, head_dim, n_head, n_kv_head;
    uint kv_head0;  // first KV head of this dispatch (the cache is bound from it)
    uint w;         // window queries used: positions n - w .. n - 1
    uint q_row0;    // row of q4 holding window query 0
    float scale;    // 1 / sqrt(head_dim)
    uint n_pre;     // keys scored: 0 .. n_pre - 1
    uint split_len; // (press_window_lse only)
    uint n_split;   // (max, sum) pairs per row
} pc;

const uint TQ = 16u;
const uint MAX_D4 = 64u;
shared vec4 sq[TQ * MAX_D4];
shared float slse[TQ];

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint hl = gl_WorkGroupID.y, kh = pc.kv_head0 + hl;
    const uint group = pc.n_head / pc.n_kv_head, rows = pc.w * group;
    const uint d4n = pc.head_dim / 4u;
    const uint j = gl_WorkGroupID.x * wg + tid;
    const bool live = j < pc.n_pre;
    const uint krow = (hl * pc.n_ctx + j) * d4n;

    float total = 0.0;
    for (uint r0 = 0u; r0 < rows; r0 += TQ) {
        const uint nr = min(TQ, rows - r0);
        for (uint e = tid; e < TQ * d4n; e += wg) {
            const uint rr = e / d4n, d4 = e % d4n, r = r0 + rr;
            vec4 v = vec4(0.0);
            if (rr < nr) v = q4[((pc.q_row0 + r / group) * pc.n_head + kh * group + r % group) * d4n + d4] * pc.scale;
            sq[e] = v;
        }
        if (tid < nr) {
            const uint r = r0 + tid, row = (r / group) * pc.n_head + kh * group + r % group;
            float m = -1.0e30, l = 0.0;
            for (uint sp = 0u; sp < pc.n_split; sp++) {
                const vec2 ml = part[sp * pc.w * pc.n_head + row];
                const float mx = max(m, ml.x);
                l = l * exp(m - mx) + ml.y * exp(ml.x - mx);
                m = mx;
            }
            slse[tid] = m + log(l);
        }
        barrier();
        if (live) {
            float s[TQ];
            [[unroll]] for (uint q = 0u; q < TQ; q++) s[q] = 0.0;
            for (uint d4 = 0u; d4 < d4n; d4++) {
                const vec4 k = kv_load4(krow + d4);
                [[unroll]] for (uint q = 0u; q < TQ; q++)
                    if (q < nr) s[q] += dot(sq[q * d4n + d4], k); // uniform: idle rows skipped
            }
            [[unroll]] for (uint q = 0u; q < TQ; q++)
                if (q < nr) total += exp(s[q] - slse[q]);
        }
        barrier(); // the next tile overwrites sq / slse
    }
    if (live) raw[kh * pc.n_pre + j] = total;
}
