#version 450
// The reference (materialised) path of tier-aware attention: for every
// approximated slot t of a tiered layer, V^_ht = sum_s W[s, h] R_pos^-1 K_t
// of KV head (h+s) mod H (S = map_shifts: 1 per-head maps, H the joint map,
// whose heads hold the same tokens in the same slots), written as f32 at the
// key's slot index so attn_tiered (MATERIALIZED) can read it like a value.
// One workgroup per (approximated token, KV head).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Kbuf { uint k_words[]; };   // tiered K rows of KV type
layout(binding = 1) readonly buffer Mbuf { uint meta[]; };      // [n_kv_head, 8]: k_off, v_off, p_off, n_ret, n_apx
layout(binding = 2) readonly buffer Pbuf { int pos[]; };        // positions of compressed slots
layout(binding = 3) readonly buffer Wbuf { float w[]; };        // [map_shifts, n_kv_head, head_dim, head_dim]
layout(binding = 4) readonly buffer Fbuf { float inv_freq[]; }; // [n_rot / 2]
layout(binding = 5) writeonly buffer Obuf { float vhat[]; };    // [K slots, head_dim] f32

layout(push_constant) uniform PC {
    uint head_dim, n_kv_head, n_rot, neox;
    uint max_apx;    // the largest n_apx of any head
    uint groups_x;   // approximated tokens are spread over x and y
    uint map_shifts; // S: map_shifts * head_dim <= VKV_MAP_MAX_DIM
} pc;

#include "common/kv_rows.glsl"

#include "vk/tiles.h"
shared float ku[VKV_MAP_MAX_DIM];

void main()
{
    uint t = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x, h = gl_WorkGroupID.z;
    uint k_off = meta[h * 8u], p_off = meta[h * 8u + 2u], n_ret = meta[h * 8u + 3u], n_apx = meta[h * 8u + 4u];
    if (t >= n_apx) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, hd = pc.head_dim;
    uint slot = k_off + n_ret + t, S = pc.map_shifts;
    int p = pos[p_off + n_ret + t];
    for (uint e = tid; e < S * hd; e += wg) {
        uint src = (h + e / hd) % pc.n_kv_head; // slot n_ret + t of that head: the same token
        ku[e] = unrope_elem(meta[src * 8u] + n_ret + t, hd, e % hd, p);
    }
    barrier();
    for (uint r = tid; r < hd; r += wg) {
        float acc = 0.0;
        for (uint s = 0u; s < S; s++) {
            uint wrow = ((s * pc.n_kv_head + h) * hd + r) * hd;
            for (uint c = 0u; c < hd; c++) acc = fma(w[wrow + c], ku[s * hd + c], acc);
        }
        vhat[slot * hd + r] = acc;
    }
}
