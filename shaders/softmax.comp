#version 450
// out[r, :] = softmax(scale * x[r, :]) with an optional causal mask: row r sees
// columns j <= r + causal_offset; masked entries are 0, and a row that sees
// nothing is all zeros. One workgroup per row.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };   // [rows, cols]
layout(binding = 1) writeonly buffer Obuf { float o[]; };  // [rows, cols]

layout(push_constant) uniform PC {
    uint rows, cols;
    float scale;
    uint causal;
    int causal_offset;
    uint groups_x;
} pc;

shared float red[256];

void main()
{
    uint r = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (r >= pc.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint base = r * pc.cols;
    int last = pc.causal != 0u ? int(r) + pc.causal_offset : int(pc.cols) - 1;
    uint visible = last < 0 ? 0u : min(uint(last) + 1u, pc.cols);

    float mx = -1.0 / 0.0;
    for (uint j = tid; j < visible; j += wg) mx = max(mx, pc.scale * x[base + j]);
    red[tid] = mx;
    barrier();
    for (uint h = wg / 2u; h > 0u; h >>= 1) {
        if (tid < h) red[tid] = max(red[tid], red[tid + h]);
        barrier();
    }
    mx = red[0];
    barrier();
    float s = 0.0;
    for (uint j = tid; j < visible; j += wg) s += exp(pc.scale * x[base + j] - mx);
    red[tid] = s;
    barrier();
    for (uint h = wg / 2u; h > 0u; h >>= 1) {
        if (tid < h) red[tid] += red[tid + h];
        barrier();
    }
    float inv = visible > 0u ? 1.0 / red[0] : 0.0;
    for (uint j = tid; j < pc.cols; j += wg)
        o[base + j] = j < visible ? exp(pc.scale * x[base + j] - mx) * inv : 0.0;
}
