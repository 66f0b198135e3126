#version 450
// y[m_offset + m] = dot(W[m, :], x)  for m in [0, M): the decode-time
// matrix-vector product. The workgroup's threads form row groups of
// pc.group_threads threads; a row group owns MATVEC_ROWS consecutive weight
// rows: each 32-element chunk of x a thread loads serves all of them, and the
// fixed cost of a workgroup (large on CPU devices) is paid once per
// MATVEC_ROWS rows of each group. A group's threads stride over 32-element
// chunks and reduce with subgroup adds (USE_SUBGROUP) or a shared-memory tree.
// Long rows take the whole workgroup as one group; a short row (fewer chunks
// than threads) takes a group just wide enough, so that no thread idles
// (docs/ARCHITECTURE.md §1, "Matrix-vector row groups").
//
// With MATVEC_COLS (the batched decode, docs/ARCHITECTURE.md §1):
// y[j * ldy + m_offset + m] = dot(W[m, :], x[j, :]) for j < n_cols <= VKV_BATCH_MAX.
// Each weight chunk is decoded once for all columns, and every column goes
// through the single-column arithmetic (the same chunk loop, fma order and
// reduction), so column j is bitwise the single-column kernel's y of x[j].
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in; // at most VKV_MATVEC_MAX_WG (src/vk/pipeline.c)

layout(binding = 0) readonly buffer Wbuf { uint w_words[]; };  // [M, K] of TYPE
#if defined(ALIGNED_ROWS)
layout(binding = 0) readonly buffer Wbuf4 { uvec4 w_vec4[]; }; // the same W, as 16-byte words
#endif
#if defined(MATVEC_COLS)
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [n_cols, K]
layout(binding = 1) readonly buffer Xbuf4 { vec4 x4[]; };      // the same x, as vec4 (when K % 4 == 0)
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [n_cols, ldy]

layout(push_constant) uniform PC {
    uint M;          // rows in this dispatch
    uint K;          // elements per row
    uint m_offset;   // where row 0 of this dispatch lands in each column of y
    uint groups_x;   // workgroups along x (row blocks are spread over x and y)
    uint n_cols;     // columns of x and y, 1..VKV_BATCH_MAX
    uint ldy;        // floats from one column of y to the next
    uint group_threads; // threads of a row group: a power of two dividing the workgroup,
                        // a multiple of the subgroup size with USE_SUBGROUP (host: src/vk/ops.c)
} pc;
#else
layout(binding = 1) readonly buffer Xbuf { float x[]; };       // [K]
layout(binding = 1) readonly buffer Xbuf4 { vec4 x4[]; };      // the same x, as vec4 (chunks start 16-byte aligned)
layout(binding = 2) writeonly buffer Ybuf { float y[]; };      // [m_offset + M]

layout(push_constant) uniform PC {
    uint M;          // rows in this dispatch
    uint K;          // elements per row
    uint m_offset;   // where row 0 of this dispatch lands in y
    uint groups_x;   // workgroups along x (row blocks are spread over x and y)
    uint group_threads; // threads of a row group (as above)
} pc;
#endif

#include "common/weights.glsl"

// Elements [32 c, 32 c + 32) of the row at byte row_off, a whole chunk.
// With ALIGNED_ROWS (rows that are whole 16-byte words, chosen by the host:
// src/vk/ops.c; float weights, q4_K, q5_K and the grouped rows of q8_0 and
// q4_0; q6_K's single-column kernel reads half blocks, q6k_half_load) the
// chunk is read as 16-byte words: the same values, in a fraction of the
// loads, which CPU devices make one lane at a time.
void load_w_chunk(uint row_off, uint c, out float v[32])
{
#if defined(ALIGNED_ROWS) && defined(TYPE_F32)
    const uint b = (row_off >> 4) + c * 8u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        const uvec4 q = w_vec4[b + i];
        v[4u * i] = uintBitsToFloat(q.x);
        v[4u * i + 1u] = uintBitsToFloat(q.y);
        v[4u * i + 2u] = uintBitsToFloat(q.z);
        v[4u * i + 3u] = uintBitsToFloat(q.w);
    }
#elif defined(ALIGNED_ROWS) && (defined(TYPE_Q4_K) || defined(TYPE_Q5_K))
    // A q4_K block is 144 bytes, nine 16-byte words, a q5_K block 176, eleven:
    // word 0 holds d, dmin and the twelve scale bytes; q5_K's words 1 and 2
    // hold qh (bit j of byte e: bit 4 of element e of chunk j); chunk j's
    // nibbles are the two words at byte 16 (q5_K: 48) + 32 (j / 2), low
    // nibbles for even j, high for odd. Three loads (q5_K: five) instead of
    // twenty (thirty); the values and arithmetic of weights.glsl's decoder.
    const uint blk = (row_off >> 4) + (c >> 3) * (BLOCK_BYTES / 16u), j = c & 7u;
    const uvec4 head = w_vec4[blk];
    const vec2 dm = unpackHalf2x16(head.x);
    // scale byte i of the block is byte (i & 3) of head[1 + i / 4]
    const uint s_hi = head.w;
    const uint sh = (j & 3u) * 8u;
    float sc, mn;
    if (j < 4u) {
        sc = float((head.y >> sh) & 63u);
        mn = float((head.z >> sh) & 63u);
    } else {
        sc = float(((s_hi >> sh) & 0xfu) | (((head.y >> sh) >> 6 & 3u) << 4));
        mn = float(((s_hi >> sh) >> 4 & 0xfu) | (((head.z >> sh) >> 6 & 3u) << 4));
    }
    const float a = dm.x * sc, b = dm.y * mn;
    const uint shift = (j & 1u) * 4u;
#if defined(TYPE_Q5_K)
    const uint q0 = blk + 3u + (j >> 1) * 2u;
#else
    const uint q0 = blk + 1u + (j >> 1) * 2u;
#endif
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
        const uvec4 q = w_vec4[q0 + h];
#if defined(TYPE_Q5_K)
        const uvec4 qh = w_vec4[blk + 1u + h];
#endif
        [[unroll]] for (uint wd = 0u; wd < 4u; wd++) {
            [[unroll]] for (uint by = 0u; by < 4u; by++) {
#if defined(TYPE_Q5_K)
                const uint hb = ((qh[wd] >> (8u * by + j)) & 1u) << 4;
#else
                const uint hb = 0u;
#endif
                v[16u * h + 4u * wd + by] = a * float(((q[wd] >> (8u * by + shift)) & 0xfu) | hb) - b;
            }
        }
    }
#elif defined(ALIGNED_ROWS) && defined(TYPE_Q8_0)
    // a block's 32 quants, two 16-byte words of its grouped body (weights.glsl)
    const float d = w_f16(block_d_off(row_off, c));
    const uint b = block_body_off(row_off, c) >> 4;
    const uvec4 q0 = w_vec4[b], q1 = w_vec4[b + 1u];
    q8_0_values(d, uint[8](q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w), v);
#elif defined(ALIGNED_ROWS) && defined(TYPE_Q4_0)
    // a block's 16 nibble bytes, one 16-byte word of its grouped body
    const float d = w_f16(block_d_off(row_off, c));
    const uvec4 q = w_vec4[block_body_off(row_off, c) >> 4];
    q4_0_values(d, uint[4](q.x, q.y, q.z, q.w), v);
#elif defined(ALIGNED_ROWS) && !defined(TYPE_Q6_K)
    const uint b = (row_off >> 4) + c * 4u;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        const uvec4 q = w_vec4[b + i];
        [[unroll]] for (uint h = 0u; h < 4u; h++) {
#if defined(TYPE_F16)
            const vec2 e = unpackHalf2x16(q[h]);
#else
            const vec2 e = vec2(uintBitsToFloat(q[h] << 16), uintBitsToFloat(q[h] & 0xffff0000u));
#endif
            v[8u * i + 2u * h] = e.x;
            v[8u * i + 2u * h + 1u] = e.y;
        }
    }
#else
    dequant32_k(row_off, c, pc.K, v); // 16-bit rows of odd length start unaligned
#endif
}

#include "vk/tiles.h"

#if defined(TYPE_Q6_K)
// A q6_K block's half (128 elements: chunks 4 h .. 4 h + 3 of the row's
// half blocks) keeps the high two bits of all four chunks in the same 32
// bytes, and the low nibbles of chunks 0 and 2, 1 and 3 in the same 32
// bytes each. A thread takes the four in turn (its work item): the
// single-column kernel loads the half's words once (q6k_half_load) and
// decodes each chunk from them (q6k_chunk) with dequant32_k's arithmetic,
// so the same values from 3 runs of loads instead of 8.
const uint CHUNKS_PER_ITEM = VKV_MATVEC_Q6_K_CHUNKS;
struct q6k_half {
    uint l0[8], l1[8], h[8]; // ql bytes of chunks 0 / 2, 1 / 3; qh bytes
    float s[8];              // d x the 8 sub-block scales of the half
};

void q6k_half_load(uint row_off, uint half_block, out q6k_half q)
{
    const uint blk = half_block >> 1, half_ = half_block & 1u;
    const uint off = block_body_off(row_off, blk);
    const float d = w_f16(block_d_off(row_off, blk));
#if defined(ALIGNED_ROWS)
    // The body as 16-byte words (it starts 16-byte aligned: weights.glsl's
    // device rows): the half's ql are words 4 half_ .. 4 half_ + 3 (chunks
    // 0 / 2, then 1 / 3), its qh words 8 + 2 half_ and 9 + 2 half_, and the
    // scales word 12: seven loads.
    const uint b = off >> 4;
    [[unroll]] for (uint i = 0u; i < 2u; i++) {
        const uvec4 l0 = w_vec4[b + 4u * half_ + i], l1 = w_vec4[b + 4u * half_ + 2u + i],
                    h = w_vec4[b + 8u + 2u * half_ + i];
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            q.l0[4u * i + c] = l0[c];
            q.l1[4u * i + c] = l1[c];
            q.h[4u * i + c] = h[c];
        }
    }
    const uvec4 sc = w_vec4[b + 12u];
    const uint s_lo = half_ != 0u ? sc.z : sc.x, s_hi = half_ != 0u ? sc.w : sc.y;
    [[unroll]] for (uint i = 0u; i < 8u; i++)
        q.s[i] = d * float(word_i8(i < 4u ? s_lo : s_hi, i & 3u));
#else
    w_bytes32(off + half_ * 64u, q.l0);
    w_bytes32(off + half_ * 64u + 32u, q.l1);
    w_bytes32(off + 128u + half_ * 32u, q.h);
    [[unroll]] for (uint i = 0u; i < 8u; i++) q.s[i] = d * float(w_i8(off + 192u + half_ * 8u + i));
#endif
}

// Chunk `quad` (0..3, a constant after unrolling) of the half.
void q6k_chunk(q6k_half q, uint quad, out float v[32])
{
    const uint ql_shift = quad >= 2u ? 4u : 0u, qh_shift = quad * 2u;
    if ((quad & 1u) != 0u) q6k_values(q.l1, q.h, q.s[quad * 2u], q.s[quad * 2u + 1u], ql_shift, qh_shift, v);
    else q6k_values(q.l0, q.h, q.s[quad * 2u], q.s[quad * 2u + 1u], ql_shift, qh_shift, v);
}
#else
const uint CHUNKS_PER_ITEM = 1u;
#endif

#if defined(MATVEC_COLS)
const uint MATVEC_ROWS = VKV_MATVEC_COLS_ROWS;
#else
const uint MATVEC_ROWS = VKV_MATVEC_ROWS;
#endif
const uint MAX_WG = VKV_MATVEC_MAX_WG;
// Loops over columns: the one column unrolled away; with MATVEC_COLS not
// unrolled (acc is then indexed per column at run time), which keeps the
// kernel the single-column one's size and its compile time on CPU devices.
#if defined(MATVEC_COLS)
const uint COLS = VKV_BATCH_MAX;
#define COLUMN_LOOP [[dont_unroll]]
#else
const uint COLS = 1u;
#define COLUMN_LOOP [[unroll]]
#endif

// Columns of x and y.
uint n_cols()
{
#if defined(MATVEC_COLS)
    return min(pc.n_cols, COLS);
#else
    return 1u;
#endif
}

// Elements [32 c, 32 c + 32) of column j of x. The single column starts
// 16-byte aligned (bound at its row); with MATVEC_COLS column j does only
// when K % 4 == 0, else it is read by floats (the same values).
void load_x_chunk(uint j, uint c, out float xs[32])
{
#if defined(MATVEC_COLS)
    if ((pc.K & 3u) != 0u) {
        [[unroll]] for (uint i = 0u; i < 32u; i++) xs[i] = x[j * pc.K + c * 32u + i];
        return;
    }
#endif
    const uint b4 = (j * pc.K) / 4u + c * 8u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        const vec4 q = x4[b4 + i];
        xs[4u * i] = q.x;
        xs[4u * i + 1u] = q.y;
        xs[4u * i + 2u] = q.z;
        xs[4u * i + 3u] = q.w;
    }
}

shared float partial[MATVEC_ROWS * MAX_WG]; // [MATVEC_ROWS, subgroups or threads]
#if defined(MATVEC_COLS) && USE_SUBGROUP
// Every column's subgroup sums, [column, row, subgroup] (the host keeps
// subgroups of at least 4 threads, so a workgroup has at most MAX_WG / 4).
const uint MAX_SUBGROUPS = MAX_WG / 4u;
shared float col_partial[COLS * MATVEC_ROWS * MAX_SUBGROUPS];
#endif

// One column's sums (acc[r]: row row0 + r, this thread's share) reduced over
// the row group (group g of the workgroup's, thread t of its gt) and written
// at y[y0 + row0 + r]. With one group (gt the workgroup) it is the reduction
// over the whole workgroup.
void reduce_store(float acc[MATVEC_ROWS], uint row0, uint y0, uint g, uint t, uint gt)
{
#if USE_SUBGROUP
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
        const float s = subgroupAdd(acc[r]);
        if (gl_SubgroupInvocationID == 0u) partial[r * MAX_WG + gl_SubgroupID] = s;
    }
    barrier();
    // the group's subgroups, in order (gt is a multiple of the subgroup size);
    // a group narrower than MATVEC_ROWS stores several rows a thread
    const uint per_group = gt / gl_SubgroupSize;
    for (uint r = t; r < MATVEC_ROWS && row0 + r < pc.M; r += gt) {
        float s = 0.0;
        for (uint i = 0u; i < per_group; i++) s += partial[r * MAX_WG + g * per_group + i];
        y[y0 + row0 + r] = s;
    }
#else
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) partial[r * MAX_WG + tid] = acc[r];
    barrier();
    for (uint s = gt / 2u; s > 0u; s >>= 1) {
        if (t < s) {
            [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) partial[r * MAX_WG + tid] += partial[r * MAX_WG + tid + s];
        }
        barrier();
    }
    for (uint r = t; r < MATVEC_ROWS && row0 + r < pc.M; r += gt) y[y0 + row0 + r] = partial[r * MAX_WG + g * gt];
#endif
}

void main()
{
    const uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    // row group g of n_groups; thread t of its gt
    const uint gt = pc.group_threads, n_groups = wg / gt, g = tid / gt, t = tid % gt;
    const uint wg_row0 = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * n_groups * MATVEC_ROWS;
    if (wg_row0 >= pc.M) return; // uniform per workgroup
    const uint row0 = wg_row0 + g * MATVEC_ROWS;
    // Rows past M (the last block) repeat row M - 1 rather than branch, and
    // are not written.
    uint row_off[MATVEC_ROWS];
    [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) row_off[r] = min(row0 + r, pc.M - 1u) * row_bytes(pc.K);
    float acc[COLS * MATVEC_ROWS]; // [column, row]
    [[unroll]] for (uint a = 0u; a < COLS * MATVEC_ROWS; a++) acc[a] = 0.0;
    float xs[32];
    const uint full = pc.K / 32u;
    // a thread's work items: CHUNKS_PER_ITEM consecutive chunks (full is a
    // multiple of it: q6_K rows are whole 256-element blocks)
    for (uint item = t; item < full / CHUNKS_PER_ITEM; item += gt) {
#if defined(TYPE_Q6_K) && !defined(MATVEC_COLS)
        q6k_half half_words[MATVEC_ROWS];
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) q6k_half_load(row_off[r], item, half_words[r]);
#endif
        [[unroll]] for (uint sub = 0u; sub < CHUNKS_PER_ITEM; sub++) {
            const uint c = item * CHUNKS_PER_ITEM + sub;
#if defined(MATVEC_COLS)
            // the chunk of every row decoded once, then each column's chunk
            // loaded once and used by every row
            float vr[MATVEC_ROWS][32];
            [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) load_w_chunk(row_off[r], c, vr[r]);
            COLUMN_LOOP for (uint j = 0u; j < n_cols(); j++) {
                load_x_chunk(j, c, xs);
                [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
                    // acc is indexed by the run-time column: one load and one
                    // store of it per 32 fmas (CPU devices lower such indexing
                    // to branches), the fmas on a local in the same order
                    float a = acc[j * MATVEC_ROWS + r];
                    [[unroll]] for (uint i = 0u; i < 32u; i++) a = fma(vr[r][i], xs[i], a);
                    acc[j * MATVEC_ROWS + r] = a;
                }
            }
#else
            float v[32];
            load_x_chunk(0u, c, xs); // one column: loaded once for every row
            [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
#if defined(TYPE_Q6_K)
                q6k_chunk(half_words[r], sub, v);
#else
                load_w_chunk(row_off[r], c, v);
#endif
                [[unroll]] for (uint i = 0u; i < 32u; i++) acc[r] = fma(v[i], xs[i], acc[r]);
            }
#endif
        }
    }
#if defined(FLOAT_WEIGHTS)
    // A row length that is not a multiple of 32 (float weights only): the tail.
    for (uint e = full * 32u + t; e < pc.K; e += gt) {
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
            const float we = dequant1(row_off[r], e);
            COLUMN_LOOP for (uint j = 0u; j < n_cols(); j++)
                acc[j * MATVEC_ROWS + r] = fma(we, x[j * pc.K + e], acc[j * MATVEC_ROWS + r]);
        }
    }
#endif
#if defined(MATVEC_COLS)
    const uint ldy = pc.ldy;
#else
    const uint ldy = 0u;
#endif
#if defined(MATVEC_COLS) && USE_SUBGROUP
    // Every column's subgroup sums first, then one barrier and every
    // column's sum over subgroups (reduce_store's, in its order): a barrier
    // per workgroup rather than one per column.
    COLUMN_LOOP for (uint j = 0u; j < n_cols(); j++) { // uniform
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) {
            const float s = subgroupAdd(acc[j * MATVEC_ROWS + r]);
            if (gl_SubgroupInvocationID == 0u) col_partial[(j * MATVEC_ROWS + r) * MAX_SUBGROUPS + gl_SubgroupID] = s;
        }
    }
    barrier();
    // (column, group, row) triples; a group's subgroups summed in order
    const uint per_group = gt / gl_SubgroupSize, wg_rows = n_groups * MATVEC_ROWS;
    for (uint u = tid; u < n_cols() * wg_rows; u += wg) {
        const uint j = u / wg_rows, gr = u % wg_rows, ug = gr / MATVEC_ROWS, r = gr % MATVEC_ROWS;
        if (wg_row0 + gr < pc.M) {
            float s = 0.0;
            for (uint i = 0u; i < per_group; i++)
                s += col_partial[(j * MATVEC_ROWS + r) * MAX_SUBGROUPS + ug * per_group + i];
            y[j * ldy + pc.m_offset + wg_row0 + gr] = s;
        }
    }
#else
    // One column at a time: partial holds one column's sums (the shared
    // budget of the single-column kernel).
    COLUMN_LOOP for (uint j = 0u; j < n_cols(); j++) { // uniform
        float col[MATVEC_ROWS];
        [[unroll]] for (uint r = 0u; r < MATVEC_ROWS; r++) col[r] = acc[j * MATVEC_ROWS + r];
        reduce_store(col, row0, j * ldy + pc.m_offset, g, t, gt);
#if defined(MATVEC_COLS)
        barrier(); // the next column overwrites partial
#endif
    }
#endif
}
