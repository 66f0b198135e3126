#version 450
// Second pass of flash-decoding: combines the per-split partials of
// attn_decode into the attention output. For a row (query, head) with splits
// s holding (o_s unnormalised, m_s, l_s):
//   M = max_s m_s,  out = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s.
// Splits that saw no key have l_s = 0 and o_s = 0 and drop out; a row with
// no key at all outputs zeros. One invocation per output vec4.

layout(local_size_x_id = 0) in;

// [n_split, rows, d4n + 1] vec4: o_s, then (m_s, l_s, 0, 0)
layout(binding = 0) readonly buffer Pbuf { vec4 part[]; };
layout(binding = 1) writeonly buffer Obuf { vec4 out4[]; }; // [rows, d4n] (= [n_q, n_head, head_dim] f32)

layout(push_constant) uniform PC {
    uint rows;      // n_q * n_head
    uint d4n;       // head_dim / 4
    uint n_split;
    uint groups_x;  // workgroups along x (the grid spreads over x and y)
} pc;

void main()
{
    uint gid = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (gid >= pc.rows * pc.d4n) return;
    uint row = gid / pc.d4n, d4 = gid % pc.d4n;
    uint kstride = pc.d4n + 1u, split_stride = pc.rows * kstride;

    float mx = -3.0e38;
    for (uint s = 0u; s < pc.n_split; s++) {
        vec4 ml = part[s * split_stride + row * kstride + pc.d4n];
        if (ml.y > 0.0) mx = max(mx, ml.x);
    }
    vec4 acc = vec4(0.0);
    float l = 0.0;
    for (uint s = 0u; s < pc.n_split; s++) {
        uint base = s * split_stride + row * kstride;
        vec4 ml = part[base + pc.d4n];
        if (ml.y > 0.0) { // skip empty splits: their m is a sentinel
            float w = exp(ml.x - mx);
            l += w * ml.y;
            acc += w * part[base + d4];
        }
    }
    out4[gid] = l > 0.0 ? acc / l : vec4(0.0);
}
