#version 450
// How many entries of each row of a 0/1 mask are set, one workgroup per row:
//   counts[r] = #{ j : mask[r, j] != 0 }
// The tokens each (layer, KV head) keeps after a selection over several rows
// (KVzip's global top-k, VECTOR's layer and global pools).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Mbuf { uint mask[]; };      // [rows, n]
layout(binding = 1) writeonly buffer Cbuf { uint counts[]; };   // [rows]

layout(push_constant) uniform PC { uint rows, n, groups_x; } pc;

const uint MAX_WG = 256u;
shared uint partial[MAX_WG];

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = min(gl_WorkGroupSize.x, MAX_WG);
    const uint r = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (r >= pc.rows) return; // uniform over the workgroup
    uint cnt = 0u;
    if (tid < wg) {
        for (uint j = tid; j < pc.n; j += wg) cnt += mask[r * pc.n + j] != 0u ? 1u : 0u;
        partial[tid] = cnt;
    }
    barrier();
    for (uint half_n = wg / 2u; half_n > 0u; half_n >>= 1) {
        if (tid < half_n) partial[tid] += partial[tid + half_n];
        barrier();
    }
    if (tid == 0u) counts[r] = partial[0];
}
