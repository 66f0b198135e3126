#version 450
// The matrix-matrix product of matmul.comp on cooperative matrices
// (VK_NV_cooperative_matrix, f16 x f16 -> f32, 16x16x16). A workgroup of 4
// subgroups of 32 computes a 64 (n) x 64 (m) tile; each subgroup a 32 x 32
// quarter as 2 x 2 accumulators. Tiles are staged in shared memory as f16.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in; // VKV_MATMUL_CM_WG (128), subgroup size 32

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [M, K] of TYPE
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [N, K]
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [N, ldy]

layout(push_constant) uniform PC {
    uint M, K, N;
    uint m_offset;
    uint ldy;
} pc;

#include "common/weights.glsl"
#include "vk/tiles.h"

#define BM VKV_MATMUL_BM
#define BN VKV_MATMUL_BN
#define BK VKV_MATMUL_BK
#define LDS (BK + 8u)   // padded stride (elements) of the f16 tiles
shared float16_t ws[BM * LDS]; // ws[m * LDS + k]
shared float16_t xs[BN * LDS]; // xs[n * LDS + k]
shared float outs[BN * BM];    // outs[n * BM + m]

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    uint sg = gl_SubgroupID;
    uint sn = (sg / 2u) * 32u, sm = (sg % 2u) * 32u; // this subgroup's quarter
    uint rb = row_bytes(pc.K);

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        if (tid < BM) {
            float v[32];
            uint m = m0 + tid;
            if (m < pc.M) dequant32_k(m * rb, k0 / 32u, pc.K, v);
            else [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
            [[unroll]] for (uint i = 0u; i < 32u; i++) ws[tid * LDS + i] = float16_t(v[i]);
        }
        [[unroll]] for (uint e = 0u; e < (BN * BK) / 128u; e++) {
            uint idx = e * 128u + tid;
            uint r = idx / BK, c = idx % BK;
            uint n = n0 + r;
            xs[r * LDS + c] = float16_t(n < pc.N && k0 + c < pc.K ? x[n * pc.K + k0 + c] : 0.0);
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[2], b[2];
            // A: rows n, columns k (row-major in xs). B: rows k, columns m =
            // ws read column-major.
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                coopMatLoadNV(a[i], xs, (sn + 16u * i) * LDS + kk, LDS, false);
            [[unroll]] for (uint j = 0u; j < 2u; j++)
                coopMatLoadNV(b[j], ws, (sm + 16u * j) * LDS + kk, LDS, true);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            coopMatStoreNV(acc[i][j], outs, (sn + 16u * i) * BM + sm + 16u * j, BM, false);
    barrier();
    for (uint idx = tid; idx < BN * BM; idx += 128u) {
        uint n = n0 + idx / BM, m = m0 + idx % BM;
        if (m < pc.M && n < pc.N) y[n * pc.ldy + pc.m_offset + m] = outs[idx];
    }
}
