#version 450
// Y[n, m_offset + m] = sum_k X[n, k] * W[m, k]: the prefill matrix-matrix
// product, tiled through shared memory. A workgroup of 256 computes a
// 64 (m) x 64 (n) tile, each thread a 4 x 4 block, stepping K by 32.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // VKV_MATMUL_WG (256)

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [M, K] of TYPE
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [N, K]
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [N, ldy]

layout(push_constant) uniform PC {
    uint M, K, N;
    uint m_offset;   // column of Y where row 0 of W lands
    uint ldy;        // row stride of Y (the full M)
} pc;

#include "common/weights.glsl"
#include "vk/tiles.h"

#define BM VKV_MATMUL_BM
#define BN VKV_MATMUL_BN
#define BK VKV_MATMUL_BK
shared float ws[BM][BK + 1u];
shared float xs[BN][BK + 1u];

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    uint tx = tid % 16u, ty = tid / 16u;
    uint rb = row_bytes(pc.K);
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        if (tid < BM) {
            float v[32];
            uint m = m0 + tid;
            if (m < pc.M) dequant32_k(m * rb, k0 / 32u, pc.K, v);
            else [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
            [[unroll]] for (uint i = 0u; i < 32u; i++) ws[tid][i] = v[i];
        }
        [[unroll]] for (uint e = 0u; e < (BN * BK) / 256u; e++) {
            uint idx = e * 256u + tid;
            uint r = idx / BK, c = idx % BK;
            uint n = n0 + r;
            xs[r][c] = n < pc.N && k0 + c < pc.K ? x[n * pc.K + k0 + c] : 0.0;
        }
        barrier();
        [[unroll]] for (uint k = 0u; k < BK; k++) {
            float a[4], b[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) a[i] = ws[tx + 16u * i][k];
            [[unroll]] for (uint j = 0u; j < 4u; j++) b[j] = xs[ty + 16u * j][k];
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + tx + 16u * i;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint n = n0 + ty + 16u * j;
            if (m < pc.M && n < pc.N) y[n * pc.ldy + pc.m_offset + m] = acc[i][j];
        }
    }
}
