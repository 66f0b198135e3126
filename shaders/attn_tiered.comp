#version 450
// Attention over a tiered (VECTOR-compressed) layer cache. Query i is the
// appended token n_new0 + i; it sees every compressed slot (retained and
// approximated) and the appended tokens 0..n_new0 + i. Softmax runs over all
// of them; retained and appended tokens contribute their values, approximated
// ones the value rebuilt from the key:
//   FUSED:        out = sum_v p V + W_h (sum_apx p R^-1 K)   (one d x d matvec
//                 per query head, by linearity of the map)
//   MATERIALIZED: out = sum_v p V + sum_apx p V^  with V^ = W_h R^-1 K
//                 precomputed by vector_materialize (the reference path).
// One workgroup per (query, query head); keys stream in tiles of the
// workgroup size with an online softmax; thread t owns output dims t, t + wg.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // power of two, 128..256; head_dim <= 2 * wg

layout(binding = 0) readonly buffer Qbuf { float q[]; };        // [n_q, n_head, head_dim] f32 (post-RoPE)
layout(binding = 1) readonly buffer Kbuf { uint k_words[]; };   // tiered K rows of KV type
layout(binding = 2) readonly buffer Vbuf { uint v_words[]; };   // tiered V rows of KV type
layout(binding = 3) readonly buffer Mbuf { uint meta[]; };      // [n_kv_head, 8]: k_off, v_off, p_off, n_ret, n_apx
layout(binding = 4) readonly buffer Pbuf { int pos[]; };        // positions of the compressed slots
#if defined(FUSED)
layout(binding = 5) readonly buffer Wbuf { float w[]; };        // [n_kv_head, head_dim, head_dim]
#else
layout(binding = 5) readonly buffer Hbuf { float vhat[]; };     // [K slots, head_dim] f32 at approximated slots
#endif
layout(binding = 6) readonly buffer Fbuf { float inv_freq[]; }; // [n_rot / 2]
layout(binding = 7) writeonly buffer Obuf { float o[]; };       // [n_q, n_head, head_dim] f32

layout(push_constant) uniform PC {
    uint n_q, n_head, n_kv_head, head_dim;
    uint n_new0;     // appended tokens before query 0
    uint n_rot, neox;
    float scale;
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

const float NEG_BIG = -1.0e30;
shared float qs[256];
shared float ps[256];
shared float red[256];
shared float ks[256];

void main()
{
    uint i = gl_WorkGroupID.x, hq = gl_WorkGroupID.y;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, hd = pc.head_dim;
    uint h = hq / (pc.n_head / pc.n_kv_head);
    uint k_off = meta[h * 8u], v_off = meta[h * 8u + 1u], p_off = meta[h * 8u + 2u];
    uint n_ret = meta[h * 8u + 3u], n_apx = meta[h * 8u + 4u];
    uint n_comp = n_ret + n_apx, n_keys = n_comp + pc.n_new0 + i + 1u;
    uint qbase = (i * pc.n_head + hq) * hd;
    for (uint d = tid; d < hd; d += wg) qs[d] = q[qbase + d] * pc.scale;
    barrier();

    float m = NEG_BIG, l = 0.0;
    float acc_v[2] = float[2](0.0, 0.0), acc_k[2] = float[2](0.0, 0.0);
    for (uint t0 = 0u; t0 < n_keys; t0 += wg) {
        uint t = t0 + tid;
        float s = NEG_BIG;
        if (t < n_keys) {
            s = 0.0;
            for (uint d = 0u; d < hd; d++) s = fma(qs[d], k_elem(k_off + t, hd, d), s);
        }
        red[tid] = s;
        barrier();
        for (uint r = wg / 2u; r > 0u; r >>= 1) {
            if (tid < r) red[tid] = max(red[tid], red[tid + r]);
            barrier();
        }
        float m_new = max(m, red[0]);
        barrier();
        float p = t < n_keys ? exp(s - m_new) : 0.0;
        ps[tid] = p;
        red[tid] = p;
        barrier();
        for (uint r = wg / 2u; r > 0u; r >>= 1) {
            if (tid < r) red[tid] += red[tid + r];
            barrier();
        }
        float f = exp(m - m_new);
        l = l * f + red[0];
        m = m_new;
        for (uint c = 0u; c < 2u; c++) {
            acc_v[c] *= f;
            acc_k[c] *= f;
        }
        uint tile = min(wg, n_keys - t0);
        for (uint tt = 0u; tt < tile; tt++) {
            uint slot = t0 + tt;
            float pr = ps[tt];
            bool apx = slot >= n_ret && slot < n_comp;
            for (uint c = 0u; c < 2u; c++) {
                uint d = tid + c * wg;
                if (d >= hd) break;
                if (!apx) {
                    uint vslot = v_off + (slot < n_ret ? slot : slot - n_apx);
                    acc_v[c] = fma(pr, v_elem(vslot, hd, d), acc_v[c]);
                } else {
#if defined(FUSED)
                    acc_k[c] = fma(pr, unrope_elem(k_off + slot, hd, d, pos[p_off + slot]), acc_k[c]);
#else
                    acc_v[c] = fma(pr, vhat[(k_off + slot) * hd + d], acc_v[c]);
#endif
                }
            }
        }
        barrier();
    }
#if defined(FUSED)
    for (uint c = 0u; c < 2u; c++) {
        uint d = tid + c * wg;
        if (d < hd) ks[d] = acc_k[c];
    }
    barrier();
#endif
    float inv_l = 1.0 / l;
    for (uint c = 0u; c < 2u; c++) {
        uint d = tid + c * wg;
        if (d >= hd) break;
        float r = acc_v[c];
#if defined(FUSED)
        if (n_apx > 0u)
            for (uint e = 0u; e < hd; e++) r = fma(w[(h * hd + d) * hd + e], ks[e], r);
#endif
        o[qbase + d] = r * inv_l;
    }
}
