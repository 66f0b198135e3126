#version 450
// KeyDiff, step 1 of 3: sums[h, c, :] = sum over the tokens j of chunk c of
// k_j / ||k_j|| (a zero key adds nothing, as F.normalize's eps makes it).
// Chunk c holds tokens [c * chunk, min((c + 1) * chunk, n)); chunks are the
// KeyDiff blocks in block-wise mode, else just a unit of parallel work.
//
// One workgroup per (chunk, KV head). Tokens go through in batches of the
// workgroup size: first each thread takes one token's inverse norm, then the
// threads split as (vec4 column, token lane) to accumulate the batch, and the
// lanes are added up at the end.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#define KV_BINDING 0
#include "common/kv_vec4.glsl"                             // [heads of this dispatch, n_ctx, head_dim] keys
layout(binding = 1) writeonly buffer Obuf { vec4 sums[]; }; // [n_kv_head, n_chunk, head_dim] f32

layout(push_constant) uniform PC {
    uint n, n_ctx, head_dim;
    uint kv_head0;  // first KV head of this dispatch (the cache is bound from it)
    uint chunk;     // tokens per chunk
    uint n_chunk;
} pc;

const uint MAX_WG = 256u;
shared float inv_norm[MAX_WG]; // 1 / ||k|| of the batch's tokens
shared vec4 part[MAX_WG];      // per-thread partial sums, reduced over lanes

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = min(gl_WorkGroupSize.x, MAX_WG);
    const uint c = gl_WorkGroupID.x, hl = gl_WorkGroupID.y;
    const uint d4n = pc.head_dim / 4u, lanes = wg / d4n; // host: d4n <= wg
    const uint col = tid % d4n, lane = tid / d4n;
    const uint t0 = c * pc.chunk, t1 = min(t0 + pc.chunk, pc.n);
    const uint head_base = hl * pc.n_ctx * d4n;
    vec4 acc = vec4(0.0);
    for (uint b0 = t0; b0 < t1; b0 += wg) {
        const uint nb = min(wg, t1 - b0);
        if (tid < nb) {
            float ss = 0.0;
            for (uint d4 = 0u; d4 < d4n; d4++) {
                const vec4 k = kv_load4(head_base + (b0 + tid) * d4n + d4);
                ss += dot(k, k);
            }
            inv_norm[tid] = ss > 0.0 ? 1.0 / sqrt(ss) : 0.0;
        }
        barrier();
        if (lane < lanes)
            for (uint t = lane; t < nb; t += lanes) acc += kv_load4(head_base + (b0 + t) * d4n + col) * inv_norm[t];
        barrier(); // inv_norm is rewritten by the next batch
    }
    if (tid < wg) part[tid] = lane < lanes ? acc : vec4(0.0);
    barrier();
    if (lane == 0u) {
        vec4 s = vec4(0.0);
        for (uint l = 0u; l < lanes; l++) s += part[l * d4n + col];
        sums[((pc.kv_head0 + hl) * pc.n_chunk + c) * d4n + col] = s;
    }
}
