#version 450
// Batched Gram / cross-product blocks summed over tokens, for the offline OLS
// calibration (calib/): for block b < n_blocks,
//   out[b, i, j] = sum_{t < n_tok} x[t*ldx + x0 + b*x_step + i] * y[t*ldy + y0 + b*y_step + j]
// for i < m, j < n (out is [n_blocks, m, n], row-major). With x_ones, x is
// taken as 1 (not read): row 0 then holds the column sums of y.
//
// One workgroup per 32x32 output tile of one block; 256 threads, each owning
// the outputs (i, j), (i+16, j), (i, j+16), (i+16, j+16). Every thread streams
// the tokens itself (neighbouring threads read the same x element and
// consecutive y elements, so the loads are broadcast / coalesced and cached):
// no shared memory and no barriers, so threads outside the block return at
// once -- the per-head blocks of small heads (8 x 8) waste little. Sums are
// f32, two-level (16 tokens, then across those partials): rounding grows
// with 16 + n_tok/16 rather than n_tok. The host adds the per-chunk results
// in double.

layout(local_size_x = 256) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };
layout(binding = 1) readonly buffer Ybuf { float y[]; };
layout(binding = 2) writeonly buffer Obuf { float o[]; };

layout(push_constant) uniform PC {
    uint n_tok, m, n;
    uint ldx, ldy;       // floats from one token's row to the next
    uint x0, y0;         // first column of block 0
    uint x_step, y_step; // column advance per block
    uint x_ones;
} pc;

#define TILE 32u
#define STAGE 16u

void main()
{
    uint lid = gl_LocalInvocationID.x;
    uint i = gl_WorkGroupID.x * TILE + lid / 16u, j = gl_WorkGroupID.y * TILE + lid % 16u;
    uint b = gl_WorkGroupID.z;
    if (i >= pc.m || j >= pc.n) return;
    bool row1 = i + 16u < pc.m, col1 = j + 16u < pc.n, ones = pc.x_ones != 0u;
    uint xb = pc.x0 + b * pc.x_step + i, yb = pc.y0 + b * pc.y_step + j;
    float a00 = 0.0, a01 = 0.0, a10 = 0.0, a11 = 0.0;
    for (uint t0 = 0u; t0 < pc.n_tok; t0 += STAGE) {
        uint t1 = min(t0 + STAGE, pc.n_tok);
        float s00 = 0.0, s01 = 0.0, s10 = 0.0, s11 = 0.0;
        for (uint t = t0; t < t1; t++) {
            uint xo = t * pc.ldx + xb, yo = t * pc.ldy + yb;
            float p0 = ones ? 1.0 : x[xo];
            float p1 = row1 ? x[xo + 16u] : 0.0;
            float q0 = y[yo];
            float q1 = col1 ? y[yo + 16u] : 0.0;
            s00 += p0 * q0;
            s01 += p0 * q1;
            s10 += p1 * q0;
            s11 += p1 * q1;
        }
        a00 += s00;
        a01 += s01;
        a10 += s10;
        a11 += s11;
    }
    uint ob = b * pc.m * pc.n;
    o[ob + i * pc.n + j] = a00;
    if (col1) o[ob + i * pc.n + j + 16u] = a01;
    if (row1) o[ob + (i + 16u) * pc.n + j] = a10;
    if (row1 && col1) o[ob + (i + 16u) * pc.n + j + 16u] = a11;
}
