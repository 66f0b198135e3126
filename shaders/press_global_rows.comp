#version 450
// KVzip's global selection, per row r of scores[rows, n] (one row per
// (layer, KV head)), one workgroup per row:
//   mode 0: out[r] = the largest score of the row NOT selected by the global
//           top-k mask (float bits; -inf when the row is all selected): the
//           host takes the maximum over the rows, the global threshold;
//   mode 1: out[r] = how many scores of the row are > thres (uint): the
//           tokens the row keeps (kvpress evicts every score <= threshold).
// NaN ranks as -inf, as in topk_select.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float scores[]; };   // [rows, n]
layout(binding = 1) readonly buffer Mbuf { uint mask[]; };      // [rows, n] (mode 0)
layout(binding = 2) writeonly buffer Obuf { uint outv[]; };     // [rows]

layout(push_constant) uniform PC {
    uint rows, n, mode, groups_x;
    float thres;
} pc;

const uint MAX_WG = 256u;
shared float red_f[MAX_WG];
shared uint red_u[MAX_WG];

float neg_inf() { return uintBitsToFloat(0xff800000u); }

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = min(gl_WorkGroupSize.x, MAX_WG);
    const uint r = gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x;
    if (r >= pc.rows) return; // uniform over the workgroup
    float mx = neg_inf();
    uint cnt = 0u;
    if (tid < wg) {
        for (uint j = tid; j < pc.n; j += wg) {
            float s = scores[r * pc.n + j];
            if (isnan(s)) s = neg_inf();
            if (pc.mode == 0u) {
                if (mask[r * pc.n + j] == 0u) mx = max(mx, s);
            } else if (s > pc.thres) {
                cnt++;
            }
        }
        red_f[tid] = mx;
        red_u[tid] = cnt;
    }
    barrier();
    for (uint half_n = wg / 2u; half_n > 0u; half_n >>= 1) {
        if (tid < half_n) {
            red_f[tid] = max(red_f[tid], red_f[tid + half_n]);
            red_u[tid] += red_u[tid + half_n];
        }
        barrier();
    }
    if (tid == 0u) outv[r] = pc.mode == 0u ? floatBitsToUint(red_f[0]) : red_u[0];
}
