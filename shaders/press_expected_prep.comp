#version 450
// ExpectedAttention, step 1: the statistics of the future queries of one query
// head h (one workgroup each), from the captured sums (press_expected_stats):
//   m1 = s1 / N,  mu = c + m1,  Sigma = s2 / N - m1 m1^T      (N = n - n_sink)
// averaged over the RoPE rotations of the next n_fut positions fut0 .. :
//   Rbar = mean_t R_{fut0 + t}, per rotated pair the 2x2 block
//          [[Cbar, -Sbar], [Sbar, Cbar]] (dims past n_rot: identity),
//   mu' = Rbar mu,  Sigma' = Rbar Sigma Rbar^T
// (kvpress's apply_avg_rope, in the model's own pair layout).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float st[]; };        // c | s1 | s2 (press_expected_stats)
layout(binding = 1) readonly buffer Fbuf { float inv_freq[]; };  // [n_rot / 2]
layout(binding = 2) writeonly buffer Obuf { float prep[]; };     // mu' [n_head, hd] | Sigma' [n_head, hd, hd]

layout(push_constant) uniform PC {
    uint n_head, head_dim, n_rot, neox;
    uint n_count;   // N, queries in the sums
    uint fut0;      // first future position (n)
    uint n_fut;     // 512
} pc;

const uint MAX_D = 256u;
shared float cb[MAX_D / 2u], sb[MAX_D / 2u];
shared float m1[MAX_D], mu[MAX_D];

vec2 sincos_reduced(float a)
{
    const float TWO_PI_HI = 6.28318548202514648;
    const float TWO_PI_LO = -1.7484555314695172e-7;
    float k = round(a * 0.15915494309189535);
    float r = fma(-k, TWO_PI_HI, a);
    r = fma(-k, TWO_PI_LO, r);
    return vec2(sin(r), cos(r));
}

// Row d of Rbar: Rbar[d][x0] = w0, Rbar[d][x1] = w1 (x0 = x1, w1 = 0 past n_rot).
void rbar_row(uint d, out uint x0, out float w0, out uint x1, out float w1)
{
    if (d >= pc.n_rot) { x0 = d; w0 = 1.0; x1 = d; w1 = 0.0; return; }
    const uint half_rot = pc.n_rot / 2u;
    uint p, i0, i1;
    bool first;
    if (pc.neox != 0u) {
        first = d < half_rot;
        p = first ? d : d - half_rot;
        i0 = p;
        i1 = p + half_rot;
    } else {
        first = (d & 1u) == 0u;
        p = d / 2u;
        i0 = 2u * p;
        i1 = i0 + 1u;
    }
    x0 = i0;
    x1 = i1;
    if (first) { w0 = cb[p]; w1 = -sb[p]; }
    else { w0 = sb[p]; w1 = cb[p]; }
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint h = gl_WorkGroupID.x, hd = pc.head_dim;
    const uint s1_off = pc.n_head * hd, s2_off = 2u * pc.n_head * hd;
    const float inv_n = 1.0 / float(pc.n_count);

    for (uint p = tid; p < pc.n_rot / 2u; p += wg) {
        float c_tot = 0.0, s_tot = 0.0;
        for (uint t0 = 0u; t0 < pc.n_fut; t0 += 16u) {
            float c_blk = 0.0, s_blk = 0.0;
            for (uint t = t0; t < min(t0 + 16u, pc.n_fut); t++) {
                const vec2 sc = sincos_reduced(float(pc.fut0 + t) * inv_freq[p]);
                s_blk += sc.x;
                c_blk += sc.y;
            }
            c_tot += c_blk;
            s_tot += s_blk;
        }
        cb[p] = c_tot / float(pc.n_fut);
        sb[p] = s_tot / float(pc.n_fut);
    }
    for (uint d = tid; d < hd; d += wg) {
        m1[d] = st[s1_off + h * hd + d] * inv_n;
        mu[d] = st[h * hd + d] + m1[d];
    }
    barrier();
    for (uint d = tid; d < hd; d += wg) {
        uint x0, x1;
        float w0, w1;
        rbar_row(d, x0, w0, x1, w1);
        prep[h * hd + d] = w0 * mu[x0] + w1 * mu[x1];
    }
    const uint sig_off = pc.n_head * hd + h * hd * hd, s2h = s2_off + h * hd * hd;
    for (uint e = tid; e < hd * hd; e += wg) {
        const uint a = e / hd, b = e % hd;
        uint xa[2], yb[2];
        float wa[2], wb[2];
        rbar_row(a, xa[0], wa[0], xa[1], wa[1]);
        rbar_row(b, yb[0], wb[0], yb[1], wb[1]);
        float s = 0.0;
        for (uint u = 0u; u < 2u; u++)
            for (uint v = 0u; v < 2u; v++) {
                const uint x = xa[u], y = yb[v];
                const float sig = st[s2h + x * hd + y] * inv_n - m1[x] * m1[y];
                s += wa[u] * wb[v] * sig;
            }
        prep[sig_off + e] = s;
    }
}
