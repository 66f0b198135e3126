#version 450
// Appends one token's keys and values of each of a step's sequences to its
// paged plain caches (docs/ARCHITECTURE.md §2, "Paged caches"; the table of
// attn_paged.comp): the token goes to slot n_kv - 1, the row of KV head h
// found through the sequence's page lists,
//   K row = k_src[row, h, :] as pc.k_type, V row = v_src[row, h, :] as pc.v_type,
// written by common/kv_quant.glsl's kvq_write_row, the writer kv_store.comp's
// conversions share (f16 rounded to nearest even by hand, ggml's q8_0/q4_0
// quantizers), so each cache ends bitwise as kv_store leaves it. One
// invocation per (sequence, KV head, K or V) row.
#extension GL_GOOGLE_include_directive : require

#include "vk/tiles.h"

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Kbuf { float k_src[]; }; // [n_rows, n_kv_head, head_dim] f32
layout(binding = 1) readonly buffer Vbuf { float v_src[]; }; // [n_rows, n_kv_head, head_dim] f32
layout(binding = 2) buffer KPbuf { uint k_pool[]; };          // the K pool window
layout(binding = 3) buffer VPbuf { uint v_pool[]; };          // the V pool window
layout(binding = 4) readonly buffer Tbuf { uint tab[]; };     // attn_paged.comp's table

layout(push_constant) uniform PC {
    uint n_seq, n_kv_head, head_dim;
    uint k_type, v_type; // the rows' types (kvlayout/kv_layout.h)
    uint page_shift;     // log2 of the slots per page
    uint seq_base;       // word index of sequence 0's entry
} pc;

#define KVQ_NO_READER
#define KVQ_WRITER
float kvq_src(uint e);
void kvq_out(uint w, uint value);
#include "common/kv_quant.glsl"

uint src0;      // first element of the source row
bool write_v;   // the row goes to the V pool
float kvq_src(uint e) { return write_v ? v_src[src0 + e] : k_src[src0 + e]; }
void kvq_out(uint w, uint value)
{
    if (write_v) v_pool[w] = value;
    else k_pool[w] = value;
}

void main()
{
    const uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (gid >= pc.n_seq * pc.n_kv_head * 2u) return;
    write_v = (gid & 1u) != 0u;
    const uint h = (gid >> 1) % pc.n_kv_head, seq = (gid >> 1) / pc.n_kv_head;
    const uint e = pc.seq_base + seq * VKV_PAGED_SEQ_WORDS;
    const uint slot = tab[e] - 1u, row = tab[e + 1u];
    const uint t = write_v ? pc.v_type : pc.k_type;
    const uint list = tab[e + (write_v ? 3u : 2u)], head_words = tab[e + (write_v ? 5u : 4u)];
    const uint w0 = tab[list + (slot >> pc.page_shift)] + h * head_words +
                    (slot & ((1u << pc.page_shift) - 1u)) * (kvq_row_bytes(t, pc.head_dim) / 4u);
    src0 = (row * pc.n_kv_head + h) * pc.head_dim;
    kvq_write_row(t, pc.head_dim, w0);
}
