#version 450
// Batched Gram / cross-product blocks summed over tokens, for the offline OLS
// calibration (calib/): for block b < n_blocks,
//   out[b, i, j] = sum_{t < n_tok} x[t*ldx + x0 + b*x_step + i] * y[t*ldy + y0 + b*y_step + j]
// for i < m, j < n (out is [n_blocks, m, n], row-major). With x_ones, x is
// taken as 1 (not read): row 0 then holds the column sums of y.
// One workgroup per 32x32 output tile of one block; 256 threads, 2x2 outputs
// each; the tokens are staged through shared memory 16 at a time and summed
// in f32 (the host adds the per-chunk results in double).

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

shared float xs[STAGE][TILE];
shared float ys[STAGE][TILE];

void main()
{
    uint lid = gl_LocalInvocationID.x;
    uint tx = lid % 16u, ty = lid / 16u;
    uint i0 = gl_WorkGroupID.x * TILE, j0 = gl_WorkGroupID.y * TILE, b = gl_WorkGroupID.z;
    uint xb = pc.x0 + b * pc.x_step + i0, yb = pc.y0 + b * pc.y_step + j0;
    float a00 = 0.0, a01 = 0.0, a10 = 0.0, a11 = 0.0;
    for (uint t0 = 0u; t0 < pc.n_tok; t0 += STAGE) {
        for (uint e = lid; e < STAGE * TILE; e += 256u) {
            uint s = e / TILE, c = e % TILE, t = t0 + s;
            float xv = 0.0, yv = 0.0;
            if (t < pc.n_tok) {
                if (i0 + c < pc.m) xv = pc.x_ones != 0u ? 1.0 : x[t * pc.ldx + xb + c];
                if (j0 + c < pc.n) yv = y[t * pc.ldy + yb + c];
            }
            xs[s][c] = xv;
            ys[s][c] = yv;
        }
        barrier();
        for (uint s = 0u; s < STAGE; s++) {
            float p0 = xs[s][ty], p1 = xs[s][ty + 16u];
            float q0 = ys[s][tx], q1 = ys[s][tx + 16u];
            a00 += p0 * q0;
            a01 += p0 * q1;
            a10 += p1 * q0;
            a11 += p1 * q1;
        }
        barrier();
    }
    uint ob = b * pc.m * pc.n;
    uint r0 = i0 + ty, r1 = i0 + ty + 16u, c0 = j0 + tx, c1 = j0 + tx + 16u;
    if (r0 < pc.m && c0 < pc.n) o[ob + r0 * pc.n + c0] = a00;
    if (r0 < pc.m && c1 < pc.n) o[ob + r0 * pc.n + c1] = a01;
    if (r1 < pc.m && c0 < pc.n) o[ob + r1 * pc.n + c0] = a10;
    if (r1 < pc.m && c1 < pc.n) o[ob + r1 * pc.n + c1] = a11;
}
