#version 450
// y[m_offset + m] = dot(W[m, :], x)  for m in [0, M): the decode-time
// matrix-vector product. A workgroup owns MATVEC_ROWS consecutive weight
// rows: each 32-element chunk of x a thread loads serves all of them, and the
// fixed cost of a workgroup (large on CPU devices) is paid once per
// MATVEC_ROWS rows. Threads stride over 32-element chunks and reduce with
// subgroup adds (USE_SUBGROUP) or a shared-memory tree.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in; // at most VKV_MATVEC_MAX_WG (src/vk/pipeline.c)

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [M, K] of TYPE
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [K]
layout(binding = 1) readonly buffer Xbuf4 { vec4 x4[]; };      // the same x, as vec4 (chunks start 16-byte aligned)
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [m_offset + M]

layout(push_constant) uniform PC {
    uint M;          // rows in this dispatch
    uint K;          // elements per row
    uint m_offset;   // where row 0 of this dispatch lands in y
    uint groups_x;   // workgroups along x (row blocks are spread over x and y)
} pc;

#include "common/weights.glsl"

#include "vk/tiles.h"

const uint MATVEC_ROWS = VKV_MATVEC_ROWS;
const uint MAX_WG = VKV_MATVEC_MAX_WG;

// Elements [32 c, 32 c + 32) of x (chunks start 16-byte aligned).
void load_x_chunk(uint c, out float xs[32])
{
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        const vec4 q = x4[c * 8u + i];
        xs[4u * i] = q.x;
        xs[4u * i + 1u] = q.y;
        xs[4u * i + 2u] = q.z;
        xs[4u * i + 3u] = q.w;
    }
}

shared float partial[MATVEC_ROWS * MAX_WG]; // [MATVEC_ROWS, subgroups or threads]

void main()
{
    const uint row0 = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * MATVEC_ROWS;
    if (row0 >= pc.M) return; // uniform per workgroup
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    // Rows past M (the last block) repeat row M - 1 rather than branch, and
    // are not written.
    uint row_off[MATVEC_ROWS];
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) row_off[r] = min(row0 + r, pc.M - 1u) * row_bytes(pc.K);
    float acc[MATVEC_ROWS];
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) acc[r] = 0.0;
    float xs[32], v[32];
    const uint full = pc.K / 32u;
    for (uint c = tid; c < full; c += wg) {
        load_x_chunk(c, xs);
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
            dequant32_k(row_off[r], c, pc.K, v); // 16-bit rows of odd length start unaligned
            [[unroll]] for (uint i = 0u; i < 32u; i++) acc[r] = fma(v[i], xs[i], acc[r]);
        }
    }
#if defined(FLOAT_WEIGHTS)
    // A row length that is not a multiple of 32 (float weights only): the tail.
    for (uint e = full * 32u + tid; e < pc.K; e += wg) {
        const float xe = x[e];
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) acc[r] = fma(dequant1(row_off[r], e), xe, acc[r]);
    }
#endif
#if USE_SUBGROUP
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
        const float s = subgroupAdd(acc[r]);
        if (gl_SubgroupInvocationID == 0u) partial[r * MAX_WG + gl_SubgroupID] = s;
    }
    barrier();
    if (tid < MATVEC_ROWS && row0 + tid < pc.M) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += partial[tid * MAX_WG + i];
        y[pc.m_offset + row0 + tid] = s;
    }
#else
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) partial[r * MAX_WG + tid] = acc[r];
    barrier();
    for (uint s = wg / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) partial[r * MAX_WG + tid] += partial[r * MAX_WG + tid + s];
        }
        barrier();
    }
    if (tid < MATVEC_ROWS && row0 + tid < pc.M) y[pc.m_offset + row0 + tid] = partial[tid * MAX_WG];
#endif
}
