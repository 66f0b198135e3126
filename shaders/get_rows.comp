#version 450
// out[i, :] = table[ids[i], :] decoded to f32, for the ids that fall inside
// this dispatch's bound row range [row_base, row_base + n_rows). Tables larger
// than the device's storage-buffer range are gathered in several dispatches.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [n_rows, n_cols] of TYPE
layout(binding = 1) readonly buffer Ibuf { int ids[]; };       // [n_ids]
layout(binding = 2) writeonly buffer Obuf { float o[]; };      // [n_ids, n_cols]

layout(push_constant) uniform PC {
    uint n_cols;
    uint n_ids;
    uint row_base;   // first table row in the bound range
    uint n_rows;     // table rows in the bound range
} pc;

#include "common/weights.glsl"

void main()
{
    uint i = gl_WorkGroupID.y;   // which id
    uint c = gl_GlobalInvocationID.x;
    if (i >= pc.n_ids || c >= pc.n_cols) return;
    int id = ids[i];
    if (id < int(pc.row_base) || id >= int(pc.row_base + pc.n_rows)) return;
    uint r = uint(id) - pc.row_base;
    o[i * pc.n_cols + c] = dequant1(r * row_bytes(pc.n_cols), c);
}
