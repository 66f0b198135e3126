#version 450
// kv_store for a group: one token's keys and values of each of up to
// VKV_ATTN_GROUP sequences, appended to its own plain caches in one dispatch:
//   k_caches[s][h * n_slots[s] + slot[s], :] = k_src[row[s], h, :]   (and V alike)
// for s < the dispatch's sequences, h < n_kv_head. Bindings 2 and 3 are the
// arrays of the sequences' K and V caches; a workgroup's sequence is
// gl_WorkGroupID.y, the same for all its invocations, so indexing the arrays
// with it is legal (the device needs shaderStorageBufferArrayDynamicIndexing,
// as attn_group.comp does). One invocation per element pair of a head row
// writes it to both caches, converted as kv_store.comp converts it (KV_F16:
// round to nearest even by hand; KV_F32: a copy), so every cache ends bitwise
// as two kv_store dispatches per sequence leave it (src/vk/ops.c,
// vkv_op_kv_store_group).
#extension GL_GOOGLE_include_directive : require

#include "vk/tiles.h"

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Kbuf { float k_src[]; };          // [batch rows, n_kv_head, head_dim] f32
layout(binding = 1) readonly buffer Vbuf { float v_src[]; };          // [batch rows, n_kv_head, head_dim] f32
layout(binding = 2) buffer KCbuf { uint w[]; } k_caches[VKV_ATTN_GROUP]; // each [n_kv_head, n_slots[s], head_dim]
layout(binding = 3) buffer VCbuf { uint w[]; } v_caches[VKV_ATTN_GROUP]; // each [n_kv_head, n_slots[s], head_dim]

layout(push_constant) uniform PC {
    uvec4 slot_lo, slot_hi; // the new token's slot in sequences 0-3, 4-7
    uvec4 row_lo, row_hi;   // its row of k_src and v_src in sequences 0-3, 4-7
    uvec4 n_slots_lo, n_slots_hi; // slots per head (the stride between heads) of sequences 0-3, 4-7
    uint n_kv_head, head_dim;
} pc;

#define KVQ_NO_READER
#include "common/kv_quant.glsl" // kvq_f32_to_f16

void main()
{
    const uint s = gl_WorkGroupID.y;
    const uint half_dim = pc.head_dim / 2u;
    const uint gid = gl_GlobalInvocationID.x;
    if (gid >= pc.n_kv_head * half_dim) return;
    const uint p = gid % half_dim, h = gid / half_dim;
    const uint slot = (s < 4u ? pc.slot_lo : pc.slot_hi)[s & 3u], row = (s < 4u ? pc.row_lo : pc.row_hi)[s & 3u];
    const uint n_slots = (s < 4u ? pc.n_slots_lo : pc.n_slots_hi)[s & 3u];
    const uint src = (row * pc.n_kv_head + h) * pc.head_dim + 2u * p;
    const uint dst = (h * n_slots + slot) * pc.head_dim + 2u * p; // element index
    const vec2 k = vec2(k_src[src], k_src[src + 1u]), v = vec2(v_src[src], v_src[src + 1u]);
#if defined(KV_F16)
    k_caches[s].w[dst / 2u] = kvq_f32_to_f16(k.x) | (kvq_f32_to_f16(k.y) << 16);
    v_caches[s].w[dst / 2u] = kvq_f32_to_f16(v.x) | (kvq_f32_to_f16(v.y) << 16);
#else
    k_caches[s].w[dst] = floatBitsToUint(k.x);
    k_caches[s].w[dst + 1u] = floatBitsToUint(k.y);
    v_caches[s].w[dst] = floatBitsToUint(v.x);
    v_caches[s].w[dst + 1u] = floatBitsToUint(v.y);
#endif
}
