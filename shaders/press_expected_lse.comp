#version 450
// ExpectedAttention, step 3: the softmax normaliser of each query head's
// expected logits over the non-sink keys, lse[h] = log sum_j exp(z[h, j]).
// One workgroup per query head: an online (max, sum) per thread, then a tree.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Zbuf { float z[]; };       // [n_head, n_z]
layout(binding = 1) writeonly buffer Lbuf { float lse[]; };    // [n_head]

layout(push_constant) uniform PC {
    uint n_z;
} pc;

const uint MAX_WG = 256u;
shared float red_m[MAX_WG], red_l[MAX_WG];

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = min(gl_WorkGroupSize.x, MAX_WG), h = gl_WorkGroupID.x;
    float m = -1.0e30, l = 0.0;
    if (tid < wg) {
        for (uint j = tid; j < pc.n_z; j += wg) {
            const float s = z[h * pc.n_z + j];
            if (s > m) {
                l = l * exp(m - s) + 1.0;
                m = s;
            } else {
                l += exp(s - m);
            }
        }
        red_m[tid] = m;
        red_l[tid] = l;
    }
    barrier();
    for (uint half_n = wg / 2u; half_n > 0u; half_n >>= 1) {
        if (tid < half_n) {
            const float m1 = red_m[tid], m2 = red_m[tid + half_n];
            const float mx = max(m1, m2);
            red_l[tid] = red_l[tid] * exp(m1 - mx) + red_l[tid + half_n] * exp(m2 - mx);
            red_m[tid] = mx;
        }
        barrier();
    }
    if (tid == 0u) lse[h] = red_m[0] + log(red_l[0]);
}
