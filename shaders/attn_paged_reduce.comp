#version 450
// Second pass of attn_paged.comp for its sequences of more than one split:
// combines each one's partials into its output row exactly as
// attn_decode_reduce.comp does for one sequence (same loops, same order, so
// the same bits). One invocation per output vec4 of the listed sequences.
#extension GL_GOOGLE_include_directive : require

#include "vk/tiles.h"

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Tbuf { uint tab[]; };   // attn_paged.comp's table
layout(binding = 1) readonly buffer Pbuf { vec4 part[]; };  // partials: per sequence [n_split, n_head, d4n + 1] vec4
layout(binding = 2) writeonly buffer Obuf { vec4 out4[]; }; // [n_rows, n_head, head_dim] f32

layout(push_constant) uniform PC {
    uint n_head, d4n;
    uint seq_base;  // word index of sequence 0's entry
    uint list_base; // word index of the list of sequences to combine
    uint n_list;
    uint groups_x;  // workgroups along x (the grid spreads over x and y)
} pc;

void main()
{
    uint gid = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    const uint per_seq = pc.n_head * pc.d4n;
    if (gid >= pc.n_list * per_seq) return;
    const uint seq = tab[pc.list_base + gid / per_seq];
    const uint e = pc.seq_base + seq * VKV_PAGED_SEQ_WORDS;
    const uint out_row = tab[e + 1u], n_split = tab[e + 6u], base = tab[e + 7u];
    const uint row = (gid % per_seq) / pc.d4n, d4 = gid % pc.d4n;
    const uint kstride = pc.d4n + 1u, split_stride = pc.n_head * kstride;

    float mx = -3.0e38;
    for (uint s = 0u; s < n_split; s++) {
        vec4 ml = part[base + s * split_stride + row * kstride + pc.d4n];
        if (ml.y > 0.0) mx = max(mx, ml.x);
    }
    vec4 acc = vec4(0.0);
    float l = 0.0;
    for (uint s = 0u; s < n_split; s++) {
        uint b = base + s * split_stride + row * kstride;
        vec4 ml = part[b + pc.d4n];
        if (ml.y > 0.0) { // skip empty splits: their m is a sentinel
            float w = exp(ml.x - mx);
            l += w * ml.y;
            acc += w * part[b + d4];
        }
    }
    out4[(out_row * pc.n_head + row) * pc.d4n + d4] = l > 0.0 ? acc / l : vec4(0.0);
}
