#version 450
// y[m_offset + m] = dot(W[m, :], x)  for m in [0, M): the decode-time
// matrix-vector product. One workgroup per weight row; threads stride over
// 32-element chunks and reduce with subgroup adds (USE_SUBGROUP) or a
// shared-memory tree.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [M, K] of TYPE
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [K]
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [m_offset + M]

layout(push_constant) uniform PC {
    uint M;          // rows in this dispatch
    uint K;          // elements per row
    uint m_offset;   // where row 0 of this dispatch lands in y
    uint groups_x;   // workgroups along x (rows are spread over x and y)
} pc;

#include "common/weights.glsl"

shared float partial[256];

void main()
{
    uint row = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (row >= pc.M) return; // uniform per workgroup
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint row_off = row * row_bytes(pc.K);
    float acc = 0.0;
    float v[32];
    uint full = pc.K / 32u;
    for (uint c = tid; c < full; c += wg) {
        dequant32_k(row_off, c, pc.K, v); // 16-bit rows of odd length start unaligned
        uint xb = c * 32u;
        [[unroll]] for (uint i = 0u; i < 32u; i++) acc = fma(v[i], x[xb + i], acc);
    }
#if defined(FLOAT_WEIGHTS)
    // A row length that is not a multiple of 32 (float weights only): the tail.
    for (uint e = full * 32u + tid; e < pc.K; e += wg) acc = fma(dequant1(row_off, e), x[e], acc);
#endif
#if USE_SUBGROUP
    acc = subgroupAdd(acc);
    if (gl_SubgroupInvocationID == 0u) partial[gl_SubgroupID] = acc;
    barrier();
    if (tid == 0u) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += partial[i];
        y[pc.m_offset + row] = s;
    }
#else
    partial[tid] = acc;
    barrier();
    for (uint s = wg / 2u; s > 0u; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
    }
    if (tid == 0u) y[pc.m_offset + row] = partial[0];
#endif
}
