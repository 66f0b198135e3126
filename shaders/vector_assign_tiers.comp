#version 450
// VECTOR's asymmetric truncation, step 2: the tier of every token from the
// pool and the approximated selection:
//   tier = approximated (2) if picked for approximation, retained (1) if in
//   the pool otherwise, evicted (0) if outside the pool.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Pbuf { uint pool[]; };  // [n_kv_head, n] 1 = in the pool
layout(binding = 1) readonly buffer Abuf { uint apx[]; };   // [n_kv_head, n] 1 = approximated
layout(binding = 2) writeonly buffer Tbuf { uint tier[]; }; // [n_kv_head, n]

layout(push_constant) uniform PC { uint total; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i >= pc.total) return;
    tier[i] = pool[i] == 0u ? 0u : apx[i] != 0u ? 2u : 1u;
}
