#version 450
// A layer's per-head rows pooled into one, for VECTOR's joint map (one tier
// decision per (layer, token); docs/ARCHITECTURE.md §2):
//   out[j] = (sum over h = 0.. rows-1, in order, of x[h, j]) / rows
// over scores or residuals. The mean is TOVA's and CAM's aggregation over KV
// heads in kvpress (ChunkKV sums: the same ranking). One thread per token.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };    // [rows, n]
layout(binding = 1) writeonly buffer Obuf { float o[]; };   // [n]

layout(push_constant) uniform PC { uint rows, n; } pc;

void main()
{
    uint j = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (j >= pc.n) return;
    float sum = 0.0;
    for (uint h = 0u; h < pc.rows; h++) sum += x[h * pc.n + j];
    o[j] = sum / float(pc.rows);
}
