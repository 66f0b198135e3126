#version 450
// Decode attention of up to VKV_ATTN_GROUP sequences in one dispatch: one
// query row per sequence, each over its own K/V cache. Binding 1 is the array
// of the sequences' K caches, binding 2 of their V caches (common/attn_tile.glsl,
// ATTN_KV_GROUP); a workgroup's sequence is gl_WorkGroupID.y, the same for
// all its invocations, so indexing the arrays with it is legal (the device
// must have shaderStorageBufferArrayDynamicIndexing). The tile loop, tile
// sizes and workgroup size are attn.comp's one-pass build (attn_rows_*), so
// each sequence's output is bitwise what attn_rows gives for it alone
// (src/vk/ops_attn.c, vkv_op_attention_group).
//
// Grid: x = row tiles of tile_q over the KV head's query heads, y = sequences
// of this dispatch, z = KV heads. Sequence s's query, row row[s] of q (and of
// out), sits at position n_kv[s] - 1: it sees all its n_kv[s] cache slots.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };    // [batch rows, n_head, head_dim] f32
// K, V (bindings 1, 2; common/attn_tile.glsl): VKV_ATTN_GROUP x [n_kv_head, n_slots[s], head_dim]
layout(binding = 3) writeonly buffer Obuf { vec4 out4[]; }; // [batch rows, n_head, head_dim] f32

layout(push_constant) uniform PC {
    uvec4 n_kv_lo, n_kv_hi;  // valid slots of sequences 0-3, 4-7
    uvec4 row_lo, row_hi;    // q and out rows of sequences 0-3, 4-7
    uvec4 n_slots_lo, n_slots_hi; // cache slots per KV head (stride between heads) of sequences 0-3, 4-7
    uint n_head, n_kv_head, head_dim;
    float scale;     // applied to q once, on load
    uint tile_q;     // rows per workgroup; divides the workgroup size
    uint tile_k;     // keys per shared tile
} pc;

#define ATTN_KV_GROUP VKV_ATTN_GROUP
#define ATTN_Q_ROW0 q_row
uint q_row; // this workgroup's sequence's row of q and out (attn_load_q reads it)
#include "common/attn_tile.glsl"

void main()
{
    attn_seq = gl_WorkGroupID.y;
    const uint n_kv = (attn_seq < 4u ? pc.n_kv_lo : pc.n_kv_hi)[attn_seq & 3u];
    q_row = (attn_seq < 4u ? pc.row_lo : pc.row_hi)[attn_seq & 3u];
    const uint n_slots = (attn_seq < 4u ? pc.n_slots_lo : pc.n_slots_hi)[attn_seq & 3u];
    attn_place_thread();
    const uint group = pc.n_head / pc.n_kv_head;
    const uint kh = gl_WorkGroupID.z;
    const uint rows = group; // one query
    const uint row0 = gl_WorkGroupID.x * pc.tile_q;
    const uint R = row0 + r;
    const bool row_live = R < rows;
    const uint h = kh * group + R % group;
    n_vis = row_live ? n_kv : 0u;
    const uint tile_vis = n_kv;

    attn_load_q(row0, rows, group, kh);
    // Slot j of this KV head is K/V row kh * n_slots + j.
    const uint kv_row0 = kh * n_slots;
    attend_segment(0u, tile_vis, kv_row0, kv_row0, 0u, false);
    attn_sum_groups();

    if (!row_live || grp != 0u) return;
    // A row that saw nothing (n_kv == 0) outputs zeros.
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    const uint orow = (q_row * pc.n_head + h) * d4n;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) out4[orow + d4] = ov[j] * inv;
    }
}
