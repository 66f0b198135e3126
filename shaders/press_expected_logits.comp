#version 450
// ExpectedAttention, step 2: the expected attention logit of every non-sink
// key j in [n_sink, n) for every query head h of the KV head's group
// (kvpress: mu' k / sqrt(d) + k^T Sigma' k / (2 d)):
//   z[h, j - n_sink] = sum_a k_a (mu'_a / sqrt(d) + (Sigma'^T k)_a / (2 d)).
//
// One workgroup per (tile of TK keys, KV head): the keys sit in shared memory
// (rows padded by one float against bank conflicts); thread (t, slice) owns
// key t and the rows a = slice, slice + slices, ...: y_a = sum_b Sigma'[b][a]
// k_b (consecutive slices read consecutive a: coalesced, and the TK threads
// of a slice read the same element); the slices' partial sums are then added
// by a tree in shared memory.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Pbuf { float prep[]; };    // mu' [n_head, hd] | Sigma' [n_head, hd, hd]
#define KV_BINDING 1
#include "common/kv_vec4.glsl"                                  // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 2) writeonly buffer Zbuf { float z[]; };      // [n_head, n - n_sink]

layout(push_constant) uniform PC {
    uint n, n_sink, n_ctx, head_dim, n_head, n_kv_head, kv_head0;
    float inv_sqrt_d;  // 1 / sqrt(head_dim)
    float inv_2d;      // 1 / (2 head_dim)
} pc;

const uint TK = 16u;
const uint MAX_D = 256u;
const uint MAX_WG = 256u;
shared float sk[TK * (MAX_D + 1u)];
shared float red[MAX_WG];

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = min(gl_WorkGroupSize.x, MAX_WG);
    const uint hl = gl_WorkGroupID.y, kh = pc.kv_head0 + hl;
    const uint group = pc.n_head / pc.n_kv_head, hd = pc.head_dim, d4n = hd / 4u, sks = hd + 1u;
    const uint n_z = pc.n - pc.n_sink;
    const uint j0 = pc.n_sink + gl_WorkGroupID.x * TK, nk = min(TK, pc.n - j0);

    for (uint e = tid; e < TK * d4n; e += gl_WorkGroupSize.x) {
        const uint t = e / d4n, d4 = e % d4n;
        vec4 k = vec4(0.0);
        if (t < nk) k = kv_load4((hl * pc.n_ctx + j0 + t) * d4n + d4);
        sk[t * sks + 4u * d4] = k.x;
        sk[t * sks + 4u * d4 + 1u] = k.y;
        sk[t * sks + 4u * d4 + 2u] = k.z;
        sk[t * sks + 4u * d4 + 3u] = k.w;
    }
    barrier();

    const uint slices = wg / TK, t = tid % TK, sl = tid / TK;
    const bool live_t = tid < wg;
    for (uint g = 0u; g < group; g++) {
        const uint h = kh * group + g, mu_off = h * hd, sig_off = pc.n_head * hd + h * hd * hd;
        float part = 0.0;
        if (live_t) {
            for (uint a = sl; a < hd; a += slices) {
                float y = 0.0;
                for (uint b = 0u; b < hd; b++) y += prep[sig_off + b * hd + a] * sk[t * sks + b];
                part += sk[t * sks + a] * (prep[mu_off + a] * pc.inv_sqrt_d + y * pc.inv_2d);
            }
            red[tid] = part;
        }
        barrier();
        for (uint half_s = slices / 2u; half_s > 0u; half_s >>= 1) {
            if (live_t && sl < half_s) red[tid] += red[tid + half_s * TK];
            barrier();
        }
        if (tid < nk) z[h * n_z + (j0 - pc.n_sink) + tid] = red[tid];
        barrier();
    }
}
