#version 450
// Causal grouped-query attention over the KV cache, flash-attention style:
// keys stream through shared memory in tiles of tile_k and each query row
// keeps an online softmax (running max m, running sum l, unnormalised output
// accumulator o), so no score matrix larger than tile_q x tile_k ever exists.
//
// A workgroup owns tile_q "rows" of one KV head, a row being a (query i,
// group member g) pair, g fastest: the query heads that share a KV head are
// processed together, so each K/V tile is read once per KV head instead of
// once per query head. Query i at position pos0 + i sees slots j < n_kv with
// j <= pos0 + i.
//
// Variants: KV_F16 / KV_F32 pick the cache storage (f16 read as 32-bit words
// through unpackHalf2x16, so no 16-bit storage feature is needed). SPLIT=0
// (attn_prefill) writes normalised outputs; SPLIT=1 (attn_decode) handles
// keys [split * split_len, (split + 1) * split_len) for split =
// gl_WorkGroupID.y and writes the partial (o, m, l) per row for
// attn_decode_reduce (flash-decoding).
//
// Grid: x = row tiles of tile_q, y = splits (1 for prefill), z = KV heads of
// this dispatch. Any subgroup size: only shared memory and barriers.
// head_dim % 4 == 0, <= 256; the host picks tile sizes that fit the shared
// arrays below (mirrored in src/vk/ops_attn.c).
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };  // [n_q, n_head, head_dim] f32
#if defined(KV_F16)
// [n_kv_heads of this dispatch, n_ctx_max, head_dim] f16: 4 halves per uvec2
layout(binding = 1) readonly buffer Kbuf { uvec2 k_h4[]; };
layout(binding = 2) readonly buffer Vbuf { uvec2 v_h4[]; };
vec4 load_k(uint i) { uvec2 w = k_h4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 load_v(uint i) { uvec2 w = v_h4[i]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
#elif defined(KV_F32)
// [n_kv_heads of this dispatch, n_ctx_max, head_dim] f32
layout(binding = 1) readonly buffer Kbuf { vec4 k_f4[]; };
layout(binding = 2) readonly buffer Vbuf { vec4 v_f4[]; };
vec4 load_k(uint i) { return k_f4[i]; }
vec4 load_v(uint i) { return v_f4[i]; }
#else
#error "define KV_F16 or KV_F32"
#endif
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
} pc;

// Shared budget (~29 KB, under the 32 KB of lavapipe and most GPUs):
const uint SQ_VEC4 = 512;    // tile_q * head_dim / 4      (Q tile, pre-scaled)
const uint SKV_VEC4 = 1056;  // tile_k * (head_dim / 4 + 1) (K, then V tile; +1 vec4 row pad against bank conflicts)
const uint SS_FLOATS = 1024; // tile_q * tile_k             (scores of the tile)
const uint MAX_COLS = 2;     // vec4 output columns per thread: ceil(head_dim / 4 / (wg / tile_q))
shared vec4 sq[SQ_VEC4];
shared vec4 skv[SKV_VEC4];
shared float ss[SS_FLOATS];

// Finite "minus infinity": exp(NEG_BIG - m) is 0 without inf arithmetic.
const float NEG_BIG = -1.0e30;

void main()
{
    const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    const uint d4n = pc.head_dim / 4u, kstride = d4n + 1u;
    const uint group = pc.n_head / pc.n_kv_head;
    const uint kh_local = gl_WorkGroupID.z, kh = pc.kv_head0 + kh_local;
    const uint rows = pc.n_q * group;
    const uint row0 = gl_WorkGroupID.x * pc.tile_q;
    const uint tpr = wg / pc.tile_q;            // threads per row
    const uint r = tid / tpr, lane = tid % tpr;  // this thread's row in the tile and its lane in the row
    // P V: the row's threads form n_grp key groups of `span` threads; thread
    // (grp, col) accumulates output vec4 columns col, col + span over keys
    // grp, grp + n_grp, ... of each tile, and the groups are summed at the
    // end. With few rows (decode) a row has many more threads than columns:
    // without the groups each would walk every key (and its exp) for nothing.
    const uint span = min(tpr, d4n), n_grp = tpr / span;
    const uint grp = lane / span, col = lane % span;
    const bool pv_live = grp < n_grp;
    const uint R = row0 + r;
    const bool row_live = R < rows;
    const uint qi = R / group, h = kh * group + R % group;
    // Slots this row sees, and the union over the tile's rows (the last row sees most).
    const uint n_vis = row_live ? min(pc.n_kv, pc.pos0 + qi + 1u) : 0u;
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
    const uint kv_base = kh_local * pc.n_ctx_max * d4n; // vec4 index of slot 0 of this KV head

    // Q tile, scaled: row rr of the tile is (query (row0+rr)/group, head kh*group + (row0+rr)%group).
    for (uint e = tid; e < pc.tile_q * d4n; e += wg) {
        uint rr = row0 + e / d4n, d4 = e % d4n;
        vec4 val = vec4(0.0);
        if (rr < rows) val = q4[((rr / group) * pc.n_head + kh * group + rr % group) * d4n + d4] * pc.scale;
        sq[e] = val;
    }

    float m = NEG_BIG, l = 0.0;
    vec4 o[MAX_COLS];
    [[unroll]] for (uint c = 0u; c < MAX_COLS; c++) o[c] = vec4(0.0);

    for (uint k0 = k_begin; k0 < k_end; k0 += pc.tile_k) {
        const uint nk = min(pc.tile_k, k_end - k0);
        // K tile -> shared (rows past nk are never read: no need to fill them).
        for (uint e = tid; e < nk * d4n; e += wg) {
            uint c = e / d4n, d4 = e % d4n;
            skv[c * kstride + d4] = load_k(kv_base + (k0 + c) * d4n + d4);
        }
        barrier(); // also orders the Q tile stores before the first use

        // Scores of this row against the keys lane, lane + tpr, ... it may see.
        const uint nv = n_vis > k0 ? min(nk, n_vis - k0) : 0u;
        for (uint c = lane; c < nv; c += tpr) {
            float s = 0.0;
            for (uint d4 = 0u; d4 < d4n; d4++) s += dot(sq[r * d4n + d4], skv[c * kstride + d4]);
            ss[r * pc.tile_k + c] = s;
        }
        barrier(); // scores complete, K no longer needed

        for (uint e = tid; e < nk * d4n; e += wg) {
            uint c = e / d4n, d4 = e % d4n;
            skv[c * kstride + d4] = load_v(kv_base + (k0 + c) * d4n + d4);
        }
        barrier();

        // Online softmax update of this row, then o += p * V for this thread's columns.
        if (nv > 0u) {
            float mt = NEG_BIG;
            for (uint c = 0u; c < nv; c++) mt = max(mt, ss[r * pc.tile_k + c]);
            const float m_new = max(m, mt);
            const float alpha = exp(m - m_new);
            l *= alpha;
            [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) o[j] *= alpha;
            if (pv_live) {
                for (uint c = grp; c < nv; c += n_grp) {
                    const float p = exp(ss[r * pc.tile_k + c] - m_new);
                    l += p;
                    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
                        uint d4 = col + j * span;
                        if (d4 < d4n) o[j] += p * skv[c * kstride + d4];
                    }
                }
            }
            m = m_new;
        }
        barrier(); // V and scores consumed before the next tile overwrites them
    }

    // Sum the key groups (all saw the same running max m); with several
    // groups span == d4n, so a thread holds one column. The shared arrays
    // are free: the last tile ended with a barrier.
    if (n_grp > 1u) {
        if (pv_live) {
            skv[(r * n_grp + grp) * span + col] = o[0];
            if (col == 0u) ss[r * n_grp + grp] = l;
        }
        barrier();
        if (grp == 0u) {
            for (uint g = 1u; g < n_grp; g++) {
                o[0] += skv[(r * n_grp + g) * span + col];
                l += ss[r * n_grp + g];
            }
        }
    }

    if (!row_live || grp != 0u) return;
#if SPLIT
    const uint prow = ((split * pc.n_q + qi) * pc.n_head + h) * kstride;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) part[prow + d4] = o[j];
    }
    if (col == 0u) part[prow + d4n] = vec4(m, l, 0.0, 0.0);
#else
    // A row that saw nothing (n_kv == 0) outputs zeros.
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    const uint orow = (qi * pc.n_head + h) * d4n;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) out4[orow + d4] = o[j] * inv;
    }
#endif
}
