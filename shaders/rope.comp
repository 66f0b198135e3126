#version 450
// Rotary position embedding, forward or inverse, for x[n_tok, n_heads, head_dim].
// One invocation per (token, head, pair). Pair p < n_rot/2 is rotated by
// theta = pos * inv_freq[p] (inv_freq computed on the host in double, with
// rope scaling folded in); pairs past n_rot are copied.
// Layouts: interleaved (llama) pairs (2p, 2p+1); NeoX (qwen) pairs (p, p + n_rot/2).

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Xbuf { float x[]; };        // [n_tok, n_heads, head_dim]
layout(binding = 1) readonly buffer Pbuf { int pos[]; };        // [n_tok]
layout(binding = 2) readonly buffer Fbuf { float inv_freq[]; }; // [n_rot / 2]
layout(binding = 3) writeonly buffer Obuf { float o[]; };       // [n_tok, n_heads, head_dim]

layout(push_constant) uniform PC {
    uint n_tok, n_heads, head_dim, n_rot;
    uint neox;       // 1 = NeoX halves, 0 = interleaved pairs
    uint inverse;    // 1 = rotate by -theta
} pc;

// sin/cos of a possibly large angle: reduce to [-pi, pi] first (two-part 2*pi)
// because GPU sin/cos lose accuracy far from zero.
vec2 sincos_reduced(float a)
{
    const float TWO_PI_HI = 6.28318548202514648;
    const float TWO_PI_LO = -1.7484555314695172e-7;
    float k = round(a * 0.15915494309189535);
    float r = fma(-k, TWO_PI_HI, a);
    r = fma(-k, TWO_PI_LO, r);
    return vec2(sin(r), cos(r));
}

void main()
{
    uint half_dim = pc.head_dim / 2u;
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint total = pc.n_tok * pc.n_heads * half_dim;
    if (gid >= total) return;
    uint p = gid % half_dim;
    uint th = gid / half_dim;          // token * n_heads + head
    uint t = th / pc.n_heads;
    uint base = th * pc.head_dim;
    uint half_rot = pc.n_rot / 2u;
    if (p >= half_rot) {               // pass-through dims [n_rot, head_dim)
        o[base + 2u * p] = x[base + 2u * p];
        o[base + 2u * p + 1u] = x[base + 2u * p + 1u];
        return;
    }
    uint i0 = pc.neox != 0u ? p : 2u * p;
    uint i1 = pc.neox != 0u ? p + half_rot : 2u * p + 1u;
    vec2 sc = sincos_reduced(float(pos[t]) * inv_freq[p]);
    float s = pc.inverse != 0u ? -sc.x : sc.x;
    float c = sc.y;
    float a = x[base + i0], b = x[base + i1];
    o[base + i0] = a * c - b * s;
    o[base + i1] = a * s + b * c;
}
