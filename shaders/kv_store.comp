#version 450
// Writes new keys or values into a layer's KV cache:
//   cache[h, slot0 + t, :] = src[t, h, :]   for t < n_tok, h < n_kv_head,
// converting to the cache's storage type (KV_F16: two halves per 32-bit word,
// round to nearest even; KV_F32: plain copy). One invocation per element pair.

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Sbuf { float src[]; };    // [n_tok, n_kv_head, head_dim]
layout(binding = 1) buffer Cbuf { uint cache[]; };            // [n_kv_head, n_ctx, head_dim] of KV type

layout(push_constant) uniform PC {
    uint n_tok, n_kv_head, head_dim;
    uint n_ctx;      // slots per head in the cache
    uint slot0;      // slot of token 0
} pc;

void main()
{
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint half_dim = pc.head_dim / 2u;
    if (gid >= pc.n_tok * pc.n_kv_head * half_dim) return;
    uint p = gid % half_dim;
    uint th = gid / half_dim;           // t * n_kv_head + h
    uint h = th % pc.n_kv_head, t = th / pc.n_kv_head;
    vec2 v = vec2(src[th * pc.head_dim + 2u * p], src[th * pc.head_dim + 2u * p + 1u]);
    uint dst = (h * pc.n_ctx + pc.slot0 + t) * pc.head_dim + 2u * p; // element index
#if defined(KV_F16)
    cache[dst / 2u] = packHalf2x16(v);
#else
    cache[dst] = floatBitsToUint(v.x);
    cache[dst + 1u] = floatBitsToUint(v.y);
#endif
}
