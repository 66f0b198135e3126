#version 450
// out = silu(gate) * up, elementwise (SwiGLU). silu(g) = g / (1 + exp(-g)).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Gbuf { float g[]; };   // [n]
layout(binding = 1) readonly buffer Ubuf { float u[]; };   // [n]
layout(binding = 2) writeonly buffer Obuf { float o[]; };  // [n]

layout(push_constant) uniform PC { uint n; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.n) return;
    float v = g[i];
    o[i] = v / (1.0 + exp(-v)) * u[i];
}
