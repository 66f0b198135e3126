#version 450
// Decode attention of any number of sequences in one dispatch, one query
// each, over plain caches whose rows are found through page tables
// (docs/ARCHITECTURE.md §2, "Paged caches"). A page holds `1 << page_shift`
// consecutive slots of every KV head of one layer's K (or V) cache; slot j of
// KV head kh of a sequence is the row at word
//   list[j >> page_shift] + kh * head_words + (j & (page - 1)) * row_words
// of the K (V) pool window, list being the sequence's page list for this
// layer (the pages may lie anywhere, in any order). Rows are f32, f16, q8_0
// or q4_0 (pc.k_type, pc.v_type; common/kv_quant.glsl).
//
// The keys of a sequence are cut into n_split splits as the per-sequence
// decode path cuts them (vkv_attn_decode_splits, split_len = ceil(n_kv /
// n_split)), on attn.comp's tile loop with its tile sizes, so every output is
// bitwise what vkv_op_attention gives for that sequence alone: a sequence of
// one split writes its normalised output (attn_rows), one of more writes a
// partial per split (attn_decode) that attn_paged_reduce.comp combines.
//
// Grid: x = row tiles of tile_q over the KV head's query heads, y = work
// items (sequence * VKV_PAGED_ITEM_SPLITS + split, listed in the table), z =
// KV heads. The table (binding 3, uint words) holds, from pc.seq_base, an
// entry of VKV_PAGED_SEQ_WORDS per sequence: n_kv (its query sits at n_kv -
// 1 and sees every slot), q / out row, K page list, V page list (word
// indices into the table), K and V head strides in words, n_split and the
// vec4 index of its partials [n_split, n_head, head_dim / 4 + 1].
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };   // [n_rows, n_head, head_dim] f32
// K, V pool windows (bindings 1, 2; common/attn_tile.glsl, KV_PAGED): uint words
layout(binding = 3) readonly buffer Tbuf { uint tab[]; };  // sequence entries, work items, page lists
layout(binding = 4) writeonly buffer Obuf { vec4 out4[]; }; // [n_rows, n_head, head_dim] f32
layout(binding = 5) writeonly buffer Pbuf { vec4 part[]; }; // partials of the sequences of several splits

layout(push_constant) uniform PC {
    uint n_head, n_kv_head, head_dim;
    float scale;     // applied to q once, on load
    uint tile_q;     // rows per workgroup; divides the workgroup size
    uint tile_k;     // keys per shared tile
    uint k_type, v_type; // the rows' types (kvlayout/kv_layout.h)
    uint page_shift; // log2 of the slots per page
    uint seq_base;   // word index of sequence 0's entry
    uint item_base;  // word index of work item 0
} pc;

// The current sequence's page lists and this workgroup's KV head offsets.
uint k_list, v_list, k_head_off, v_head_off;
#define PAGED_ROW_BYTE(is_v, row, rb) \
    (4u * ((is_v) ? tab[v_list + ((row) >> pc.page_shift)] + v_head_off \
                  : tab[k_list + ((row) >> pc.page_shift)] + k_head_off) \
     + ((row) & ((1u << pc.page_shift) - 1u)) * (rb))

#define ATTN_Q_ROW0 q_row
uint q_row; // this sequence's row of q and out (attn_load_q reads it)
#include "common/attn_tile.glsl"

void main()
{
    const uint item = tab[pc.item_base + gl_WorkGroupID.y];
    const uint seq = item / VKV_PAGED_ITEM_SPLITS, split = item % VKV_PAGED_ITEM_SPLITS;
    const uint e = pc.seq_base + seq * VKV_PAGED_SEQ_WORDS;
    const uint n_kv = tab[e], n_split = tab[e + 6u];
    q_row = tab[e + 1u];
    k_list = tab[e + 2u];
    v_list = tab[e + 3u];
    const uint kh = gl_WorkGroupID.z;
    k_head_off = kh * tab[e + 4u];
    v_head_off = kh * tab[e + 5u];

    attn_place_thread();
    const uint group = pc.n_head / pc.n_kv_head;
    const uint rows = group; // one query
    const uint row0 = gl_WorkGroupID.x * pc.tile_q;
    const uint R = row0 + r;
    const bool row_live = R < rows;
    const uint h = kh * group + R % group;
    n_vis = row_live ? n_kv : 0u;
    const uint split_len = (n_kv + n_split - 1u) / n_split;
    const uint k_begin = split * split_len;
    const uint k_end = min(n_kv, k_begin + split_len);

    attn_load_q(row0, rows, group, kh);
    // Slots are rows of this KV head: KVQ_ROW_BYTE adds the head's offset.
    attend_segment(k_begin, k_end, 0u, 0u, 0u, false);
    attn_sum_groups();

    if (!row_live || grp != 0u) return;
    if (n_split > 1u) {
        const uint prow = tab[e + 7u] + (split * pc.n_head + h) * kstride;
        [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
            uint d4 = col + j * span;
            if (d4 < d4n) part[prow + d4] = ov[j];
        }
        if (col == 0u) part[prow + d4n] = vec4(m, l, 0.0, 0.0);
        return;
    }
    // A row that saw nothing (n_kv == 0) outputs zeros.
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    const uint orow = (q_row * pc.n_head + h) * d4n;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) out4[orow + d4] = ov[j] * inv;
    }
}
