#version 450
// Writes new keys or values into a layer's KV cache:
//   cache[base(h) + slot0 + t, :] = src[t, h, :]   for t < n_tok, h < n_kv_head,
// where base(h) = h * n_ctx for a plain cache [n_kv_head, n_ctx, head_dim], or
// for a tiered (compressed) layer the first slot after head h's compressed
// tokens, read from the tier metadata (K: k_off + n_ret + n_apx; V: v_off + n_ret),
// converting to the cache's storage type (KV_F16: two halves per 32-bit word,
// round to nearest even done by hand, since packHalf2x16's rounding is left
// to the implementation; KV_F32: plain copy). One invocation per element pair.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float src[]; };    // [n_tok, n_kv_head, head_dim]
layout(binding = 1) buffer Cbuf { uint cache[]; };            // cache rows of KV type
layout(binding = 2) readonly buffer Mbuf { uint meta[]; };    // tiered: [n_kv_head, 8] k_off, v_off, p_off, n_ret, n_apx

layout(push_constant) uniform PC {
    uint n_tok, n_kv_head, head_dim;
    uint n_ctx;      // plain cache: slots per head
    uint slot0;      // slot of token 0 after the head's base
    uint mode;       // 0 plain, 1 tiered keys, 2 tiered values
} pc;

#if defined(KV_F16)
// f32 -> f16 bits, round to nearest even (the C reference's rule).
uint f32_to_f16(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u); // inf, nan
    if (a >= 0x477ff000u) return sign | 0x7c00u;                                  // overflow
    if (a < 0x38800000u) {                                                        // subnormal or zero
        if (a < 0x33000000u) return sign;
        uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;
        uint q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u) != 0u)) q++;
        return sign | q;
    }
    uint q = a - 0x38000000u;
    uint r = q & 0x1fffu;
    q >>= 13;
    if (r > 0x1000u || (r == 0x1000u && (q & 1u) != 0u)) q++;
    return sign | q;
}
#endif

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint half_dim = pc.head_dim / 2u;
    if (gid >= pc.n_tok * pc.n_kv_head * half_dim) return;
    uint p = gid % half_dim;
    uint th = gid / half_dim;           // t * n_kv_head + h
    uint h = th % pc.n_kv_head, t = th / pc.n_kv_head;
    vec2 v = vec2(src[th * pc.head_dim + 2u * p], src[th * pc.head_dim + 2u * p + 1u]);
    uint base = pc.mode == 0u ? h * pc.n_ctx
              : pc.mode == 1u ? meta[h * 8u] + meta[h * 8u + 3u] + meta[h * 8u + 4u]
                              : meta[h * 8u + 1u] + meta[h * 8u + 3u];
    uint dst = (base + pc.slot0 + t) * pc.head_dim + 2u * p; // element index
#if defined(KV_F16)
    cache[dst / 2u] = f32_to_f16(v.x) | (f32_to_f16(v.y) << 16);
#else
    cache[dst] = floatBitsToUint(v.x);
    cache[dst + 1u] = floatBitsToUint(v.y);
#endif
}
