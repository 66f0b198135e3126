#version 450
// ChunkKV, the chunk step over an inner scorer's scores (in place): the
// context is cut into chunks of `chunk` tokens (the last one partial when
// chunk does not divide n); every token of a chunk gets the chunk's score,
// the mean over its tokens of the inner scores summed over the KV heads
// (kvpress: scores.sum over heads, then the mean over the chunk), in every
// head's row, so any top-k takes whole chunks, the best first
// (src/press/chunkkv.c). A chunk holding an inner forced keep (+inf, or the
// forced band of src/press/press.h: SnapKV's window) takes the highest of
// them, so the newest window chunks come first. One invocation per chunk: it
// alone reads and writes its chunk's columns.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) buffer Sbuf { float scores[]; };  // [n_kv_head, n] f32: the inner scores, then the chunk scores

layout(push_constant) uniform PC {
    uint n;          // context tokens
    uint n_kv_head;
    uint chunk;      // tokens per chunk
    uint n_chunk;    // ceil(n / chunk)
} pc;

#include "common/press_forced.glsl"

void main()
{
    const uint c = gl_GlobalInvocationID.x;
    if (c >= pc.n_chunk) return;
    const uint j0 = c * pc.chunk, j1 = min(j0 + pc.chunk, pc.n);
    float total = 0.0, forced = 0.0;
    for (uint j = j0; j < j1; j++) {
        float over_heads = 0.0;
        for (uint h = 0u; h < pc.n_kv_head; h++) {
            const float s = scores[h * pc.n + j];
            over_heads += s;
            if (press_is_forced(s)) forced = max(forced, s);
        }
        total += over_heads;
    }
    const float mean = forced > 0.0 ? forced : total / float(j1 - j0);
    for (uint h = 0u; h < pc.n_kv_head; h++)
        for (uint j = j0; j < j1; j++) scores[h * pc.n + j] = mean;
}
