#version 450
// Span attention (ObservedAttention, KVzip), step 1 of 2: the softmax
// normaliser of each query row as partial (max, sum) pairs over splits of the
// keys it sees: part[split, i, h] = (m, l), l = sum_{j in split, visible}
// exp(s_ij - m), s_ij = (q_i . k_j) / sqrt(head_dim). Query i sits at position
// p_i = qpos0 + i and sees the keys [0, a) U [b, c) U [r0, p_i]
// (a <= b <= c <= r0 <= qpos0), walked as one "virtual" index
// v -> key_of(v): the sinks, the span, then the causal run. The query rows of
// a KV head are its (query i, group member g) pairs, r = i * group + g.
//
// One workgroup per (tile of TQ rows, KV head, split of split_len virtual
// keys): the tile's queries sit in shared memory (pre-scaled); each thread
// walks the split's keys j = tid, tid + wg, ... loading each key once for all
// TQ rows with an online (max, sum) per row; the per-thread pairs are then
// combined by a tree in shared memory (press_window_lse's scheme).

#extension GL_EXT_control_flow_attributes : require

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };       // [rows, n_head, head_dim] f32
#define KV_BINDING 1
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 2) writeonly buffer Pbuf { vec2 part[]; };     // [n_split, nq, n_head] (max, sum)

layout(push_constant) uniform PC {
    uint nq, n_ctx, head_dim, n_head, n_kv_head;
    uint kv_head0;  // first KV head of this dispatch (the cache is bound from it)
    uint q_row0;    // row of q4 holding query 0
    uint qpos0;     // position of query 0
    uint a, b, c, r0;
    uint t0, t1;    // (press_span_accum only)
    uint split_len; // virtual keys per split (gl_WorkGroupID.z)
    uint n_split;
    uint acc_stride, max_mode; // (press_span_accum only)
    float scale;    // 1 / sqrt(head_dim)
} pc;

const uint TQ = 16u;       // query rows per workgroup
const uint MAX_D4 = 64u;   // head_dim <= 256
const uint MAX_WG = 256u;  // power of two (tree reduction)
shared vec4 sq[TQ * MAX_D4];
shared float red_m[MAX_WG], red_l[MAX_WG];

const float NEG_BIG = -1.0e30; // finite: exp(NEG_BIG - m) is 0 without inf arithmetic

uint key_of(uint v)
{
    if (v < pc.a) return v;
    v -= pc.a;
    const uint span = pc.c - pc.b;
    if (v < span) return pc.b + v;
    return pc.r0 + (v - span);
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint hl = gl_WorkGroupID.y, kh = pc.kv_head0 + hl;
    const uint group = pc.n_head / pc.n_kv_head, rows = pc.nq * group;
    const uint r0 = gl_WorkGroupID.x * TQ, nr = min(TQ, rows - r0);
    const uint d4n = pc.head_dim / 4u;

    for (uint e = tid; e < TQ * d4n; e += wg) {
        const uint rr = e / d4n, d4 = e % d4n, r = r0 + rr;
        vec4 v = vec4(0.0);
        if (rr < nr) v = q4[((pc.q_row0 + r / group) * pc.n_head + kh * group + r % group) * d4n + d4] * pc.scale;
        sq[e] = v;
    }
    barrier();

    // Virtual keys row r sees: a + (c - b) + (p_i - r0 + 1); the tile's last row sees the most.
    const uint vis0 = pc.a + (pc.c - pc.b) + (pc.qpos0 - pc.r0) + 1u;
    const uint v_begin = gl_WorkGroupID.z * pc.split_len;
    const uint v_end = min(vis0 + (r0 + nr - 1u) / group, v_begin + pc.split_len);
    float m[TQ], l[TQ];
    [[unroll]] for (uint q = 0u; q < TQ; q++) { m[q] = NEG_BIG; l[q] = 0.0; }
    const uint head_base = hl * pc.n_ctx * d4n;
    for (uint v = v_begin + tid; v < v_end; v += wg) {
        const uint j = key_of(v);
        float s[TQ];
        [[unroll]] for (uint q = 0u; q < TQ; q++) s[q] = 0.0;
        for (uint d4 = 0u; d4 < d4n; d4++) {
            const vec4 k = kv_load4(head_base + j * d4n + d4);
            [[unroll]] for (uint q = 0u; q < TQ; q++)
                if (q < nr) s[q] += dot(sq[q * d4n + d4], k);
        }
        [[unroll]] for (uint q = 0u; q < TQ; q++) {
            if (q < nr && v < vis0 + (r0 + q) / group) {
                if (s[q] > m[q]) {
                    l[q] = l[q] * exp(m[q] - s[q]) + 1.0;
                    m[q] = s[q];
                } else {
                    l[q] += exp(s[q] - m[q]);
                }
            }
        }
    }

    [[unroll]] for (uint q = 0u; q < TQ; q++) {
        if (tid < MAX_WG) { red_m[tid] = m[q]; red_l[tid] = l[q]; }
        barrier();
        for (uint half_n = min(wg, MAX_WG) / 2u; half_n > 0u; half_n >>= 1) {
            if (tid < half_n) {
                const float m1 = red_m[tid], m2 = red_m[tid + half_n];
                const float mx = max(m1, m2);
                red_l[tid] = red_l[tid] * exp(m1 - mx) + red_l[tid + half_n] * exp(m2 - mx);
                red_m[tid] = mx;
            }
            barrier();
        }
        if (tid == 0u && q < nr) {
            const uint r = r0 + q;
            part[(gl_WorkGroupID.z * pc.nq + r / group) * pc.n_head + kh * group + r % group] = vec2(red_m[0], red_l[0]);
        }
        barrier();
    }
}
