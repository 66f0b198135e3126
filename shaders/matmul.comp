#version 450
// Y[n, m_offset + m] = sum_k X[n, k] * W[m, k]: the prefill matrix-matrix
// product, tiled through shared memory. A workgroup of 64 computes a
// 64 (m) x 64 (n) tile, each thread an 8 x 8 block, stepping K by 32: a
// thread's 16 shared reads a step of K feed 64 fmas (docs/ARCHITECTURE.md
// §1, "The prefill matrix product").
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // VKV_MATMUL_WG (64)

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
const uint T = VKV_MATMUL_THREAD_TILE;   // a thread's outputs: T (m) x T (n)
const uint TX = BM / T, TY = BN / T;     // threads along m and n
const uint WG = TX * TY;                 // VKV_MATMUL_WG
const uint BK4 = BK / 4u;               // 8: run q of row r is stored at column q ^ (r & 7)
// The tile as 4-element runs of k, one 16-byte read each. Run q of row r
// sits in column q ^ (r % 8): the 8 rows a group of threads reads at once
// fall in 8 different columns, so 16-byte reads do not conflict in shared
// memory banks on GPUs, without padding: the two arrays are 16 KiB, the
// shared memory every Vulkan device has.
shared vec4 ws[BM][BK4];                 // [m, k / 4] of the tile, decoded (swizzled)
shared vec4 xs[BN][BK4];                 // [n, k / 4] (swizzled)

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    uint tx = tid % TX, ty = tid / TX;
    uint rb = row_bytes(pc.K);
    float acc[T][T]; // [m, n]: outputs (m0 + tx + TX i, n0 + ty + TY j)
    [[unroll]] for (uint i = 0u; i < T; i++)
        [[unroll]] for (uint j = 0u; j < T; j++) acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        for (uint r = tid; r < BM; r += WG) {
            float v[32];
            uint m = m0 + r;
            if (m < pc.M) dequant32_k(m * rb, k0 / 32u, pc.K, v);
            else [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
            [[unroll]] for (uint q = 0u; q < BK4; q++)
                ws[r][q ^ (r & 7u)] = vec4(v[4u * q], v[4u * q + 1u], v[4u * q + 2u], v[4u * q + 3u]);
        }
        [[unroll]] for (uint e = 0u; e < (BN * BK4) / WG; e++) {
            uint idx = e * WG + tid;
            uint r = idx / BK4, q = idx % BK4;
            uint n = n0 + r, k = k0 + 4u * q;
            vec4 xv;
            [[unroll]] for (uint c = 0u; c < 4u; c++) xv[c] = n < pc.N && k + c < pc.K ? x[n * pc.K + k + c] : 0.0;
            xs[r][q ^ (r & 7u)] = xv;
        }
        barrier();
        [[unroll]] for (uint q = 0u; q < BK4; q++) {
            vec4 a[T], b[T];
            [[unroll]] for (uint i = 0u; i < T; i++) a[i] = ws[tx + TX * i][q ^ ((tx + TX * i) & 7u)];
            [[unroll]] for (uint j = 0u; j < T; j++) b[j] = xs[ty + TY * j][q ^ ((ty + TY * j) & 7u)];
            // k in order, as a scalar loop would take it
            [[unroll]] for (uint c = 0u; c < 4u; c++)
                [[unroll]] for (uint i = 0u; i < T; i++)
                    [[unroll]] for (uint j = 0u; j < T; j++) acc[i][j] = fma(a[i][c], b[j][c], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < T; i++) {
        uint m = m0 + tx + TX * i;
        [[unroll]] for (uint j = 0u; j < T; j++) {
            uint n = n0 + ty + TY * j;
            if (m < pc.M && n < pc.N) y[n * pc.ldy + pc.m_offset + m] = acc[i][j];
        }
    }
}
