#version 450
// out[r] = index of the largest element of x[r, :]; ties go to the lowest
// index, NaNs are never chosen (an all-NaN row gives 0). One workgroup per row.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };   // [rows, n]
layout(binding = 1) writeonly buffer Obuf { uint o[]; };   // [rows]

layout(push_constant) uniform PC { uint rows, n; } pc;

shared float best_v[256];
shared uint best_i[256];

// (va, ia) beats (vb, ib)?
bool better(float va, uint ia, float vb, uint ib)
{
    return va > vb || (va == vb && ia < ib);
}

void main()
{
    uint r = gl_WorkGroupID.x;
    if (r >= pc.rows) return;
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    float bv = -1.0 / 0.0;
    uint bi = 0xffffffffu;
    for (uint j = tid; j < pc.n; j += wg) {
        float v = x[r * pc.n + j];
        if (!isnan(v) && (bi == 0xffffffffu || better(v, j, bv, bi))) { bv = v; bi = j; }
    }
    best_v[tid] = bv;
    best_i[tid] = bi;
    barrier();
    for (uint h = wg / 2u; h > 0u; h >>= 1) {
        if (tid < h) {
            float ov = best_v[tid + h];
            uint oi = best_i[tid + h];
            if (oi != 0xffffffffu && (best_i[tid] == 0xffffffffu || better(ov, oi, best_v[tid], best_i[tid]))) {
                best_v[tid] = ov;
                best_i[tid] = oi;
            }
        }
        barrier();
    }
    if (tid == 0u) o[r] = best_i[0] == 0xffffffffu ? 0u : best_i[0];
}
