#version 450
// Causal grouped-query attention over the KV cache, on the tile loop of
// common/attn_tile.glsl (flash attention: keys stream through shared memory
// with an online softmax per row; a workgroup owns tile_q (query, group
// member) rows of one KV head). Query i at position pos0 + i sees slots
// j < n_kv with j <= pos0 + i.
//
// Variants: KV_F16 / KV_F32 pick the cache storage, KV_ANY reads K and V as
// pc.k_type / pc.v_type (ggml numbers: f32, f16, q8_0, q4_0). SPLIT=0 (attn_prefill)
// writes normalised outputs; SPLIT=1 (attn_decode) handles keys
// [split * split_len, (split + 1) * split_len) for split = gl_WorkGroupID.y
// and writes the partial (o, m, l) per row for attn_decode_reduce
// (flash-decoding).
//
// Grid: x = row tiles of tile_q, y = splits (1 for prefill), z = KV heads of
// this dispatch. head_dim % 4 == 0, <= 256; the host picks tile sizes that
// fit the shared arrays (src/vk/ops_attn.c).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };  // [n_q, n_head, head_dim] f32
// K, V (bindings 1, 2; common/attn_tile.glsl): [n_kv_heads of this dispatch, n_ctx_max, head_dim]
#if SPLIT
// [n_split, n_q * n_head, head_dim / 4 + 1] vec4: o (unnormalised), then (m, l, 0, 0)
layout(binding = 3) writeonly buffer Pbuf { vec4 part[]; };
#else
layout(binding = 3) writeonly buffer Obuf { vec4 out4[]; }; // [n_q, n_head, head_dim] f32
#endif

layout(push_constant) uniform PC {
    uint n_q, n_head, n_kv_head, head_dim;
    uint n_ctx_max;  // cache slots per KV head (stride between heads)
    uint n_kv;       // valid slots 0..n_kv-1
    uint pos0;       // position of query 0
    float scale;     // applied to q once, on load
    uint tile_q;     // rows per workgroup; divides the workgroup size
    uint tile_k;     // keys per shared tile
    uint kv_head0;   // first KV head of this dispatch (K/V are bound from it)
    uint split_len;  // keys per split (SPLIT only)
    uint n_split;    // splits (SPLIT only)
    uint k_type, v_type; // KV_ANY: the caches' row types (kvlayout/kv_layout.h)
} pc;

#include "common/attn_tile.glsl"

void main()
{
    attn_place_thread();
    const uint group = pc.n_head / pc.n_kv_head;
    const uint kh_local = gl_WorkGroupID.z, kh = pc.kv_head0 + kh_local;
    const uint rows = pc.n_q * group;
    const uint row0 = gl_WorkGroupID.x * pc.tile_q;
    const uint R = row0 + r;
    const bool row_live = R < rows;
    const uint qi = R / group, h = kh * group + R % group;
    // Slots this row sees, and the union over the tile's rows (the last row sees most).
    n_vis = row_live ? min(pc.n_kv, pc.pos0 + qi + 1u) : 0u;
    const uint last_row = min(row0 + pc.tile_q, rows) - 1u;
    const uint tile_vis = min(pc.n_kv, pc.pos0 + last_row / group + 1u);
#if SPLIT
    const uint split = gl_WorkGroupID.y;
    const uint k_begin = split * pc.split_len;
    const uint k_end = min(tile_vis, k_begin + pc.split_len);
#else
    const uint k_begin = 0u;
    const uint k_end = tile_vis;
#endif

    attn_load_q(row0, rows, group, kh);
    // Slot j of this KV head is K/V row kh_local * n_ctx_max + j.
    const uint kv_row0 = kh_local * pc.n_ctx_max;
    attend_segment(k_begin, k_end, kv_row0, kv_row0, 0u, false);
    attn_sum_groups();

    if (!row_live || grp != 0u) return;
#if SPLIT
    const uint prow = ((split * pc.n_q + qi) * pc.n_head + h) * kstride;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) part[prow + d4] = ov[j];
    }
    if (col == 0u) part[prow + d4n] = vec4(m, l, 0.0, 0.0);
#else
    // A row that saw nothing (n_kv == 0) outputs zeros.
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    const uint orow = (qi * pc.n_head + h) * d4n;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) out4[orow + d4] = ov[j] * inv;
    }
#endif
}
