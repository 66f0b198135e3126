#version 450
// Span attention (ObservedAttention, KVzip), step 2 of 2: for each KV head and
// each target key j in [t0, t1), the softmax weights exp(s_ij - lse_i) of the
// query rows (query i, query head g of the KV head's group) that see j are
// summed (max_mode 0) or maxed (max_mode 1) and folded into
//   acc[kh * acc_stride + j]   (+= sum, or = max(acc, max)).
// lse_i = m + log(l) combines press_span_lse's per-split (max, sum) pairs.
// Query i at position qpos0 + i sees j when j is in [0, a) U [b, c) U [r0, p_i].
//
// One workgroup per (tile of wg keys, KV head), one key per thread: the query
// rows stream through shared memory TQ at a time and each thread loads its
// key once per tile for all TQ rows.

#extension GL_EXT_control_flow_attributes : require

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };       // [rows, n_head, head_dim] f32
#define KV_BINDING 1
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 2) readonly buffer Pbuf { vec2 part[]; };      // [n_split, nq, n_head] (max, sum)
layout(binding = 3) buffer Abuf { float acc[]; };               // [n_kv_head, acc_stride] f32

layout(push_constant) uniform PC {
    uint nq, n_ctx, head_dim, n_head, n_kv_head;
    uint kv_head0;
    uint q_row0, qpos0;
    uint a, b, c, r0;
    uint t0, t1;      // target keys
    uint split_len;   // (press_span_lse only)
    uint n_split;     // (max, sum) pairs per row
    uint acc_stride;
    uint max_mode;    // 1: max, 0: sum
    float scale;
} pc;

const uint TQ = 16u;
const uint MAX_D4 = 64u;
shared vec4 sq[TQ * MAX_D4];
shared float slse[TQ];

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint hl = gl_WorkGroupID.y, kh = pc.kv_head0 + hl;
    const uint group = pc.n_head / pc.n_kv_head, rows = pc.nq * group;
    const uint d4n = pc.head_dim / 4u;
    const uint j = pc.t0 + gl_WorkGroupID.x * wg + tid;
    const bool live = j < pc.t1;
    const bool in_set = j < pc.a || (j >= pc.b && j < pc.c) || j >= pc.r0;
    const uint krow = (hl * pc.n_ctx + j) * d4n;
    const bool use_max = pc.max_mode != 0u;

    float total = 0.0;
    for (uint rb = 0u; rb < rows; rb += TQ) {
        const uint nr = min(TQ, rows - rb);
        for (uint e = tid; e < TQ * d4n; e += wg) {
            const uint rr = e / d4n, d4 = e % d4n, r = rb + rr;
            vec4 v = vec4(0.0);
            if (rr < nr) v = q4[((pc.q_row0 + r / group) * pc.n_head + kh * group + r % group) * d4n + d4] * pc.scale;
            sq[e] = v;
        }
        if (tid < nr) {
            const uint r = rb + tid, row = (r / group) * pc.n_head + kh * group + r % group;
            float m = -1.0e30, l = 0.0;
            for (uint sp = 0u; sp < pc.n_split; sp++) {
                const vec2 ml = part[sp * pc.nq * pc.n_head + row];
                const float mx = max(m, ml.x);
                l = l * exp(m - mx) + ml.y * exp(ml.x - mx);
                m = mx;
            }
            slse[tid] = m + log(l);
        }
        barrier();
        // Rows rb.. see j when j <= their position: the tile is uniform in that
        // test except at its own diagonal, so the check stays per row.
        if (live && in_set) {
            float s[TQ];
            [[unroll]] for (uint q = 0u; q < TQ; q++) s[q] = 0.0;
            for (uint d4 = 0u; d4 < d4n; d4++) {
                const vec4 k = kv_load4(krow + d4);
                [[unroll]] for (uint q = 0u; q < TQ; q++)
                    if (q < nr) s[q] += dot(sq[q * d4n + d4], k);
            }
            [[unroll]] for (uint q = 0u; q < TQ; q++) {
                if (q < nr && j <= pc.qpos0 + (rb + q) / group) {
                    const float w = exp(s[q] - slse[q]);
                    total = use_max ? max(total, w) : total + w;
                }
            }
        }
        barrier();
    }
    if (live) {
        const uint o = kh * pc.acc_stride + j;
        acc[o] = use_max ? max(acc[o], total) : acc[o] + total;
    }
}
