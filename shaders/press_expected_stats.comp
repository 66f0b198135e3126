#version 450
// ExpectedAttention, the capture: running sums of the layer's pre-RoPE queries
// per query head h, over the positions n_sink .. n - 1 of the context, shifted
// by c_h (the pre-RoPE query at position n_sink, so that the later
// E[qq^T] - mu mu^T does not cancel):
//   state c[h, :]      = q_pre(n_sink)                   (written once)
//   state s1[h, a]    += sum_t (q_pre(t) - c)[a]
//   state s2[h, a, b] += sum_t (q_pre(t) - c)[a] (q_pre(t) - c)[b]
// for the chunk rows t in [t_begin, t_end). q_pre = R_pos^-1 q undoes the
// model's RoPE (interleaved or NeoX pairs, the first n_rot dims) at the row's
// position, with the same f32 angle as rope.comp.
//
// One workgroup per (block of TA rows a of s2, query head): TT tokens at a
// time are un-rotated into shared memory, each thread owns a few (a, b)
// outputs; sums are f32, per TT tokens, then across blocks, then added to the
// state once per chunk.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { float q[]; };         // [n_tok, n_head, head_dim] post-RoPE f32
layout(binding = 1) readonly buffer Fbuf { float inv_freq[]; };  // [n_rot / 2]
layout(binding = 2) buffer Sbuf { float st[]; };                 // c [n_head, hd] | s1 [n_head, hd] | s2 [n_head, hd, hd]

layout(push_constant) uniform PC {
    uint n_head, head_dim, n_rot, neox;
    uint pos0;             // position of chunk row 0
    uint t_begin, t_end;   // chunk rows counted
    uint c_row;            // chunk row at position n_sink, or 0xffffffff (the shift is in the state)
} pc;

const uint TA = 8u;
const uint TT = 16u;
const uint MAX_D = 256u;
const uint MAX_OUT = 32u;  // TA * MAX_D / 64: outputs per thread for a workgroup of >= 64
shared float cvec[MAX_D];
shared float sqt[TT * MAX_D];

vec2 sincos_reduced(float a)
{
    const float TWO_PI_HI = 6.28318548202514648;
    const float TWO_PI_LO = -1.7484555314695172e-7;
    float k = round(a * 0.15915494309189535);
    float r = fma(-k, TWO_PI_HI, a);
    r = fma(-k, TWO_PI_LO, r);
    return vec2(sin(r), cos(r));
}

// Pair p of head h of chunk row `row`, un-rotated: elements i0, i1 and their values.
void unrope_pair(uint row, uint h, uint p, out uint i0, out uint i1, out float o0, out float o1)
{
    const uint base = (row * pc.n_head + h) * pc.head_dim, half_rot = pc.n_rot / 2u;
    if (p >= half_rot) { // dims past n_rot pass through
        i0 = 2u * p;
        i1 = 2u * p + 1u;
        o0 = q[base + i0];
        o1 = q[base + i1];
        return;
    }
    i0 = pc.neox != 0u ? p : 2u * p;
    i1 = pc.neox != 0u ? p + half_rot : 2u * p + 1u;
    const vec2 sc = sincos_reduced(float(pc.pos0 + row) * inv_freq[p]);
    const float a = q[base + i0], b = q[base + i1];
    o0 = a * sc.y + b * sc.x;   // rotation by -theta
    o1 = b * sc.y - a * sc.x;
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    const uint h = gl_WorkGroupID.y, a0 = gl_WorkGroupID.x * TA;
    const uint hd = pc.head_dim, npair = hd / 2u;
    const uint c_off = 0u, s1_off = pc.n_head * hd, s2_off = 2u * pc.n_head * hd;
    const bool have_c = pc.c_row != 0xffffffffu;

    if (have_c) {
        for (uint p = tid; p < npair; p += wg) {
            uint i0, i1;
            float o0, o1;
            unrope_pair(pc.c_row, h, p, i0, i1, o0, o1);
            cvec[i0] = o0;
            cvec[i1] = o1;
        }
    } else {
        for (uint d = tid; d < hd; d += wg) cvec[d] = st[c_off + h * hd + d];
    }
    barrier();
    if (have_c && gl_WorkGroupID.x == 0u)
        for (uint d = tid; d < hd; d += wg) st[c_off + h * hd + d] = cvec[d];

    const uint n_out = TA * hd;
    float acc[MAX_OUT];
    for (uint k = 0u; k < MAX_OUT; k++) acc[k] = 0.0;
    float s1acc[4] = float[4](0.0, 0.0, 0.0, 0.0); // d = tid + k * wg (first workgroup of the head)
    for (uint tb = pc.t_begin; tb < pc.t_end; tb += TT) {
        const uint nt = min(TT, pc.t_end - tb);
        for (uint e = tid; e < TT * npair; e += wg) {
            const uint tt = e / npair, p = e % npair;
            if (tt < nt) {
                uint i0, i1;
                float o0, o1;
                unrope_pair(tb + tt, h, p, i0, i1, o0, o1);
                sqt[tt * hd + i0] = o0 - cvec[i0];
                sqt[tt * hd + i1] = o1 - cvec[i1];
            }
        }
        barrier();
        for (uint k = 0u; k < MAX_OUT; k++) {
            const uint e = tid + k * wg;
            if (e >= n_out) break;
            const uint a = a0 + e / hd, b = e % hd;
            if (a >= hd) break;
            float blk = 0.0;
            for (uint tt = 0u; tt < nt; tt++) blk += sqt[tt * hd + a] * sqt[tt * hd + b];
            acc[k] += blk;
        }
        if (gl_WorkGroupID.x == 0u) {
            for (uint k = 0u; k < 4u; k++) {
                const uint d = tid + k * wg;
                if (d >= hd) break;
                float blk = 0.0;
                for (uint tt = 0u; tt < nt; tt++) blk += sqt[tt * hd + d];
                s1acc[k] += blk;
            }
        }
        barrier();
    }
    if (pc.t_begin >= pc.t_end) return;
    for (uint k = 0u; k < MAX_OUT; k++) {
        const uint e = tid + k * wg;
        if (e >= n_out) break;
        const uint a = a0 + e / hd, b = e % hd;
        if (a >= hd) break;
        const uint o = s2_off + (h * hd + a) * hd + b;
        st[o] += acc[k];
    }
    if (gl_WorkGroupID.x == 0u) {
        for (uint k = 0u; k < 4u; k++) {
            const uint d = tid + k * wg;
            if (d >= hd) break;
            st[s1_off + h * hd + d] += s1acc[k];
        }
    }
}
