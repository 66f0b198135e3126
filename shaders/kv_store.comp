#version 450
// Writes new keys or values into a layer's KV cache:
//   cache[base(h) + slot0 + t, :] = src[t, h, :]   for t < n_tok, h < n_kv_head,
// where base(h) = h * n_ctx for a plain cache [n_kv_head, n_ctx, head_dim], or
// for a tiered (compressed) layer the first slot after head h's compressed
// tokens, read from the tier metadata (K: k_off + n_ret + n_apx; V: v_off + n_ret),
// converting to the cache's storage type (KV_F16: two halves per 32-bit word,
// round to nearest even done by hand, since packHalf2x16's rounding is left
// to the implementation; KV_F32: plain copy; one invocation per element
// pair) or quantizing (KV_QUANT: pc.kv_type q8_0 or q4_0, ggml's reference
// quantizers per block, rows of common/kv_quant.glsl; one invocation per row,
// which writes whole words).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float src[]; };    // [n_tok, n_kv_head, head_dim]
layout(binding = 1) buffer Cbuf { uint cache[]; };            // cache rows of KV type
layout(binding = 2) readonly buffer Mbuf { uint meta[]; };    // tiered: [n_kv_head, 8] k_off, v_off, p_off, n_ret, n_apx

layout(push_constant) uniform PC {
    uint n_tok, n_kv_head, head_dim;
    uint n_ctx;      // plain cache: slots per head
    uint slot0;      // slot of token 0 after the head's base
    uint mode;       // 0 plain, 1 tiered keys, 2 tiered values
    uint kv_type;    // KV_QUANT: the cache's type (ggml's number: 8 q8_0, 2 q4_0)
} pc;

// First slot of head h (see the top).
uint head_base(uint h)
{
    return pc.mode == 0u ? h * pc.n_ctx
         : pc.mode == 1u ? meta[h * 8u] + meta[h * 8u + 3u] + meta[h * 8u + 4u]
                         : meta[h * 8u + 1u] + meta[h * 8u + 3u];
}

#define KVQ_NO_READER
#if defined(KV_QUANT)
float kvq_src(uint e);
void kvq_out(uint w, uint value);
#define KVQ_WRITER
#endif
#include "common/kv_quant.glsl" // kvq_f32_to_f16 for KV_F16 too

#if defined(KV_QUANT)
uint row_src; // first element of the row being written in src
float kvq_src(uint e) { return src[row_src + e]; }
void kvq_out(uint w, uint value) { cache[w] = value; }

// One invocation per row (th = t * n_kv_head + h).
void main()
{
    uint th = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (th >= pc.n_tok * pc.n_kv_head) return;
    uint h = th % pc.n_kv_head, t = th / pc.n_kv_head;
    row_src = th * pc.head_dim;
    kvq_write_row(pc.kv_type, pc.head_dim, (head_base(h) + pc.slot0 + t) * (kvq_row_bytes(pc.kv_type, pc.head_dim) / 4u));
}
#else
void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint half_dim = pc.head_dim / 2u;
    if (gid >= pc.n_tok * pc.n_kv_head * half_dim) return;
    uint p = gid % half_dim;
    uint th = gid / half_dim;           // t * n_kv_head + h
    uint h = th % pc.n_kv_head, t = th / pc.n_kv_head;
    vec2 v = vec2(src[th * pc.head_dim + 2u * p], src[th * pc.head_dim + 2u * p + 1u]);
    uint dst = (head_base(h) + pc.slot0 + t) * pc.head_dim + 2u * p; // element index
#if defined(KV_F16)
    cache[dst / 2u] = kvq_f32_to_f16(v.x) | (kvq_f32_to_f16(v.y) << 16);
#else
    cache[dst] = floatBitsToUint(v.x);
    cache[dst + 1u] = floatBitsToUint(v.y);
#endif
}
#endif
