#version 450
// VECTOR's OLS residual of every context token of every KV head:
//   eps[h, j] = || V_hj - sum_s W[s, h] R_j^-1 K_((h+s) mod H) j ||^2
// over an uncompressed cache (slot j = position j, or pos[j] with has_pos: a
// tiered layer gathered back into that layout); S = map_shifts is 1 for
// the per-head maps and H for the joint map (docs/ARCHITECTURE.md §2). One
// workgroup per (token j, KV head h): the S pre-RoPE keys go to shared
// memory, threads split the rows of W, and the squared error is reduced in
// shared memory.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // power of two, <= 256

layout(binding = 0) readonly buffer Kbuf { uint k_words[]; };   // [n_kv_head, n_ctx, head_dim] of KV type
layout(binding = 1) readonly buffer Vbuf { uint v_words[]; };   // [n_kv_head, n_ctx, head_dim] of KV type
layout(binding = 2) readonly buffer Wbuf { float w[]; };        // [map_shifts, n_kv_head, head_dim (d_v), head_dim (d_k)]
layout(binding = 3) readonly buffer Fbuf { float inv_freq[]; }; // [n_rot / 2]
layout(binding = 4) writeonly buffer Ebuf { float eps[]; };     // [n_kv_head, n]
layout(binding = 5) readonly buffer Pbuf { int pos[]; };        // [n_kv_head, n] positions (has_pos)

layout(push_constant) uniform PC {
    uint n, n_ctx, head_dim, n_kv_head;
    uint n_rot, neox;
    uint groups_x;
    uint map_shifts; // S: map_shifts * head_dim <= VKV_MAP_MAX_DIM
    uint has_pos;    // 0: slot j is at position j
} pc;

#include "common/kv_rows.glsl"

float v_elem(uint slot, uint hd, uint d)
{
#if defined(KV_F16)
    vec2 pair = unpackHalf2x16(v_words[(slot * hd + d) >> 1]);
    return (d & 1u) == 0u ? pair.x : pair.y;
#else
    return uintBitsToFloat(v_words[slot * hd + d]);
#endif
}

#include "vk/tiles.h"
shared float ku[VKV_MAP_MAX_DIM];
shared float red[256];

void main()
{
    uint j = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    uint h = gl_WorkGroupID.z;
    if (j >= pc.n) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, hd = pc.head_dim;
    uint slot = h * pc.n_ctx + j, S = pc.map_shifts;
    for (uint e = tid; e < S * hd; e += wg) {
        uint src = (h + e / hd) % pc.n_kv_head;
        ku[e] = unrope_elem(src * pc.n_ctx + j, hd, e % hd, pc.has_pos != 0u ? pos[src * pc.n + j] : int(j));
    }
    barrier();
    float e = 0.0;
    for (uint r = tid; r < hd; r += wg) {
        float pred = 0.0;
        for (uint s = 0u; s < S; s++) {
            uint wrow = ((s * pc.n_kv_head + h) * hd + r) * hd;
            for (uint c = 0u; c < hd; c++) pred = fma(w[wrow + c], ku[s * hd + c], pred);
        }
        float diff = v_elem(slot, hd, r) - pred;
        e = fma(diff, diff, e);
    }
    red[tid] = e;
    barrier();
    for (uint s = wg / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    if (tid == 0u) eps[h * pc.n + j] = red[0];
}
