#version 450
// LagKV: the score of a token in partition p of lag tokens (the tokens after
// the n_sink sinks, cut into partitions) from partition p + 1, its reference:
// per channel d, the key is normalised by the reference keys' range,
// x_d = (k_d - min_d) / (max_d - min_d) (0 where the range is 0), and
// s_k = softmax over the partition of std_d(x) (unbiased); the same for the
// values gives s_v; the token's score is its rank (0 = lowest) of
// (s_k + s_v) / 2 within the partition (kvpress's argsort of argsort, ties
// ranked lower for the later token, so the earlier one wins). Written for
// partitions 0 .. n_part - 1; the sinks, the last partition and the tail are
// scored by the host's StreamingLLM dispatch before this one
// (src/press/lagkv.c, docs/ARCHITECTURE.md §2).
// One workgroup per (partition, KV head of this dispatch).

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#define KV_BINDING 0
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
#if defined(KV_F16)
layout(binding = 1) readonly buffer Vbuf { uvec2 v_h4[]; };     // [heads of this dispatch, n_ctx, head_dim] values
vec4 v_load4(uint i)
{
    uvec2 w = v_h4[i];
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}
#else
layout(binding = 1) readonly buffer Vbuf { vec4 v_f4[]; };      // [heads of this dispatch, n_ctx, head_dim] values
vec4 v_load4(uint i) { return v_f4[i]; }
#endif
layout(binding = 2) buffer Sbuf { float scores[]; };            // [n_kv_head, n] f32

layout(push_constant) uniform PC {
    uint n;         // context tokens
    uint n_ctx;     // slots per KV head in the cache (stride)
    uint head_dim;
    uint kv_head0;  // first KV head of this dispatch (the caches are bound from it)
    uint n_sink;    // tokens before partition 0
    uint lag;       // tokens per partition (<= MAX_LAG)
} pc;

#define MAX_LAG 1024u
#define MAX_D4 64u  // head_dim / 4 <= 64

shared vec4 ref_lo[2u * MAX_D4];  // [K, V][head_dim / 4]: the reference partition's minima
shared vec4 ref_hi[2u * MAX_D4];  // its maxima
shared float sd_k[MAX_LAG];       // [lag] std of the normalised keys, then the combined scores
shared float sd_v[MAX_LAG];       // [lag] std of the normalised values
shared float norm[4];             // max_k, sum_k, max_v, sum_v of the softmaxes

// x / range, 0 where the range is 0 (a constant channel in the reference).
vec4 safe_div(vec4 x, vec4 range) { return mix(x / range, vec4(0.0), equal(range, vec4(0.0))); }

void main()
{
    const uint p = gl_WorkGroupID.x, hl = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
    const uint d4n = pc.head_dim / 4u, first = pc.n_sink + p * pc.lag, ref0 = first + pc.lag;
    const uint head_row = hl * pc.n_ctx;
    for (uint d4 = lid; d4 < d4n; d4 += gl_WorkGroupSize.x) {
        vec4 klo = kv_load4((head_row + ref0) * d4n + d4), khi = klo;
        vec4 vlo = v_load4((head_row + ref0) * d4n + d4), vhi = vlo;
        for (uint t = 1u; t < pc.lag; t++) {
            const vec4 k = kv_load4((head_row + ref0 + t) * d4n + d4), v = v_load4((head_row + ref0 + t) * d4n + d4);
            klo = min(klo, k); khi = max(khi, k);
            vlo = min(vlo, v); vhi = max(vhi, v);
        }
        ref_lo[d4] = klo; ref_hi[d4] = khi;
        ref_lo[MAX_D4 + d4] = vlo; ref_hi[MAX_D4 + d4] = vhi;
    }
    barrier();
    const float dn = float(pc.head_dim);
    for (uint t = lid; t < pc.lag; t += gl_WorkGroupSize.x) {
        const uint row = (head_row + first + t) * d4n;
        vec4 mk = vec4(0.0), mv = vec4(0.0);
        for (uint d4 = 0u; d4 < d4n; d4++) {
            mk += safe_div(kv_load4(row + d4) - ref_lo[d4], ref_hi[d4] - ref_lo[d4]);
            mv += safe_div(v_load4(row + d4) - ref_lo[MAX_D4 + d4], ref_hi[MAX_D4 + d4] - ref_lo[MAX_D4 + d4]);
        }
        const float mean_k = (mk.x + mk.y + mk.z + mk.w) / dn, mean_v = (mv.x + mv.y + mv.z + mv.w) / dn;
        float ssk = 0.0, ssv = 0.0;
        for (uint d4 = 0u; d4 < d4n; d4++) {
            const vec4 ek = safe_div(kv_load4(row + d4) - ref_lo[d4], ref_hi[d4] - ref_lo[d4]) - mean_k;
            const vec4 ev = safe_div(v_load4(row + d4) - ref_lo[MAX_D4 + d4], ref_hi[MAX_D4 + d4] - ref_lo[MAX_D4 + d4]) - mean_v;
            ssk += dot(ek, ek);
            ssv += dot(ev, ev);
        }
        sd_k[t] = sqrt(ssk / (dn - 1.0));
        sd_v[t] = sqrt(ssv / (dn - 1.0));
    }
    barrier();
    if (lid == 0u) {
        float max_k = sd_k[0], max_v = sd_v[0];
        for (uint t = 1u; t < pc.lag; t++) { max_k = max(max_k, sd_k[t]); max_v = max(max_v, sd_v[t]); }
        float sum_k = 0.0, sum_v = 0.0;
        for (uint t = 0u; t < pc.lag; t++) { sum_k += exp(sd_k[t] - max_k); sum_v += exp(sd_v[t] - max_v); }
        norm[0] = max_k; norm[1] = sum_k; norm[2] = max_v; norm[3] = sum_v;
    }
    barrier();
    float combined[MAX_LAG / 128u];  // this invocation's tokens (gl_WorkGroupSize.x >= 128)
    for (uint t = lid, i = 0u; t < pc.lag; t += gl_WorkGroupSize.x, i++)
        combined[i] = 0.5 * (exp(sd_k[t] - norm[0]) / norm[1] + exp(sd_v[t] - norm[2]) / norm[3]);
    barrier();
    for (uint t = lid, i = 0u; t < pc.lag; t += gl_WorkGroupSize.x, i++) sd_k[t] = combined[i];
    barrier();
    for (uint t = lid; t < pc.lag; t += gl_WorkGroupSize.x) {
        const float c = sd_k[t];
        uint rank = 0u;
        for (uint u = 0u; u < pc.lag; u++) rank += uint(sd_k[u] < c || (sd_k[u] == c && u > t));
        scores[(pc.kv_head0 + hl) * pc.n + first + t] = float(rank);
    }
}
