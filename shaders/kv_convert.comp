#version 450
// Copies n_rows KV cache rows, converting their type:
//   dst[dst_row0 + r] = encode_dst_type(decode_src_type(src[src_row0 + r]))  for r < n_rows,
// rows of head_dim elements in the formats of common/kv_quant.glsl (f32, f16,
// q8_0, q4_0). Compression during generation gathers quantized tiers back
// into the f16 working layout with it. One invocation per row.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { uint k_words[]; }; // source rows of src_type
layout(binding = 1) writeonly buffer Dbuf { uint dst[]; };    // destination rows of dst_type

layout(push_constant) uniform PC {
    uint n_rows, src_row0, dst_row0, head_dim;
    uint src_type, dst_type; // ggml type numbers
} pc;

float kvq_src(uint e);
void kvq_out(uint w, uint value);
#define KVQ_WRITER
#define KVQ_ONE_BUFFER
#include "common/kv_quant.glsl"

uint cur_row; // the source row being converted
float kvq_src(uint e) { return kvq_load4(false, pc.src_type, pc.head_dim, cur_row, e / 4u)[e % 4u]; }
void kvq_out(uint w, uint value) { dst[w] = value; }

void main()
{
    uint r = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (r >= pc.n_rows) return;
    cur_row = pc.src_row0 + r;
    kvq_write_row(pc.dst_type, pc.head_dim, (pc.dst_row0 + r) * (kvq_row_bytes(pc.dst_type, pc.head_dim) / 4u));
}
