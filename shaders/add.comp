#version 450
// out[i] = a[i] + b[i % nb]: residual connections (nb = n) and bias rows
// broadcast over tokens (nb = row width).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Abuf { float a[]; };   // [n]
layout(binding = 1) readonly buffer Bbuf { float b[]; };   // [nb]
layout(binding = 2) writeonly buffer Obuf { float o[]; };  // [n]

layout(push_constant) uniform PC { uint n, nb; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.n) return;
    o[i] = a[i] + b[i % pc.nb];
}
