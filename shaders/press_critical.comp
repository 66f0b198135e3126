#version 450
// CriticalKV's second stage (kvpress's CriticalKVPress, docs/ARCHITECTURE.md §2):
// each value projected through its query heads' slices of the attention output
// projection W_o, the L1 norm of the projection averaged over the KV head's
// group, times the inner scorer's score plus epsilon; the first stage's picks
// (mask) stay forced:
//   vnorm[h, j] = mean over q in group(h) of sum_c |sum_d V[h, j, d] W_o[c, q hd + d]|
//   scores[h, j] = first[h, j] ? +inf : raw[h, j] forced ? raw[h, j] : (raw[h, j] + epsilon) * vnorm[h, j]
// (forced: +inf or the forced band of src/press/press.h, SnapKV's window,
// whose order the selection keeps). One invocation per token; workgroups
// along y are the KV heads.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#define KV_BINDING 0
#include "common/kv_vec4.glsl"                                  // [n_kv_head, n_ctx, head_dim] values
layout(binding = 1) readonly buffer Wbuf { vec4 wo[]; };       // [n_embd, n_head * head_dim] f32
layout(binding = 2) readonly buffer Rbuf { float raw[]; };     // [n_kv_head, n] the inner scores
layout(binding = 3) readonly buffer Mbuf { uint first[]; };    // [n_kv_head, n] 1 = the first stage's pick
layout(binding = 4) writeonly buffer Sbuf { float scores[]; }; // [n_kv_head, n]

#include "common/press_forced.glsl"

layout(push_constant) uniform PC {
    uint n;          // context tokens
    uint n_ctx;      // slots per KV head in the cache (stride)
    uint head_dim;
    uint n_embd;     // W_o's rows
    uint group;      // query heads per KV head
    uint n_head;     // query heads: W_o's columns are n_head * head_dim
    float epsilon;
} pc;

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    if (j >= pc.n) return;
    const uint o = h * pc.n + j;
    if (first[o] != 0u) { // stage 1's keeps
        scores[o] = 1.0 / 0.0;
        return;
    }
    if (press_is_forced(raw[o])) { // the inner scorer's forced keeps keep their order
        scores[o] = raw[o];
        return;
    }
    const uint d4n = pc.head_dim / 4u, row = (h * pc.n_ctx + j) * d4n;
    const uint wo4 = pc.n_head * d4n; // vec4s per W_o row
    float l1_sum = 0.0;
    for (uint g = 0u; g < pc.group; g++) {
        const uint col4 = (h * pc.group + g) * d4n;
        for (uint c = 0u; c < pc.n_embd; c++) {
            float acc = 0.0;
            for (uint d4 = 0u; d4 < d4n; d4++) acc += dot(kv_load4(row + d4), wo[c * wo4 + col4 + d4]);
            l1_sum += abs(acc);
        }
    }
    scores[o] = (raw[o] + pc.epsilon) * (l1_sum / float(pc.group));
}
