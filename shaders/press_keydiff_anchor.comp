#version 450
// KeyDiff, step 2 of 3: anchors from the chunk sums of normalised keys.
// Whole-sequence mode (block == 0): anchors[h, 0, :] = sum over all chunks / n,
// kvpress's mean_t(k_t / ||k_t||). Block-wise mode (chunks are the blocks):
// anchors[h, b, :] = (sum over chunks 0..b) / (tokens in blocks 0..b), the
// mean over every token seen up to the end of block b.
// One workgroup per KV head, one invocation per vec4 column; the chunks are
// summed in order (a few hundred at most), which keeps the scan trivial.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Ibuf { vec4 sums[]; };     // [n_kv_head, n_chunk, head_dim] f32
layout(binding = 1) writeonly buffer Obuf { vec4 anchors[]; }; // [n_kv_head, block ? n_chunk : 1, head_dim] f32

layout(push_constant) uniform PC {
    uint n, head_dim, chunk, n_chunk;
    uint block_mode; // 1: one anchor per block (chunk == block)
} pc;

void main()
{
    const uint h = gl_WorkGroupID.x, d4n = pc.head_dim / 4u;
    for (uint col = gl_LocalInvocationID.x; col < d4n; col += gl_WorkGroupSize.x) {
        vec4 run = vec4(0.0);
        for (uint c = 0u; c < pc.n_chunk; c++) {
            run += sums[(h * pc.n_chunk + c) * d4n + col];
            if (pc.block_mode != 0u)
                anchors[(h * pc.n_chunk + c) * d4n + col] = run / float(min((c + 1u) * pc.chunk, pc.n));
        }
        if (pc.block_mode == 0u) anchors[h * d4n + col] = run / float(pc.n);
    }
}
