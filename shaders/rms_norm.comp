#version 450
// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w   (w optional).
// One workgroup per row. Per-head QK-norm uses it with rows = tokens*heads.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };   // [rows, n]
layout(binding = 1) readonly buffer Wbuf { float w[]; };   // [n] (unused when has_weight = 0)
layout(binding = 2) writeonly buffer Obuf { float o[]; };  // [rows, n]

layout(push_constant) uniform PC {
    uint rows, n;
    float eps;
    uint has_weight;
    uint groups_x;
} pc;

shared float partial[256];

void main()
{
    uint r = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (r >= pc.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    uint base = r * pc.n;
    float s = 0.0;
    for (uint i = tid; i < pc.n; i += wg) s = fma(x[base + i], x[base + i], s);
    partial[tid] = s;
    barrier();
    for (uint h = wg / 2u; h > 0u; h >>= 1) {
        if (tid < h) partial[tid] += partial[tid + h];
        barrier();
    }
    float scale = inversesqrt(partial[0] / float(pc.n) + pc.eps);
    for (uint i = tid; i < pc.n; i += wg)
        o[base + i] = x[base + i] * scale * (pc.has_weight != 0u ? w[i] : 1.0);
}
