// The tile loop of attn.comp and attn_tiered.comp, flash-attention style:
// keys stream through shared memory in tiles of pc.tile_k and each query row
// keeps an online softmax (running max m, running sum l, unnormalised output
// accumulators), so no score matrix larger than tile_q x tile_k ever exists.
//
// A workgroup owns pc.tile_q "rows" of one KV head, a row being a (query i,
// group member g) pair, g fastest: the query heads that share a KV head are
// processed together, so each K/V tile is read once per KV head.
//
// The including shader declares its push constants first (pc.n_head,
// head_dim, scale, tile_q, tile_k) and may define:
//   ATTN_APX          the cache has approximated segments (attn_tiered): the
//                     shader defines attn_apx_value_tile, and the ok[]
//                     accumulators follow the softmax;
//   ATTN_APX_INTO_OK  approximated values accumulate into ok[] (fused
//                     attn_tiered), not into ov[].
// K and V: KV_F16 / KV_F32 pick the storage (f16 read as 32-bit words through
// unpackHalf2x16, so no 16-bit storage feature is needed), KV_ANY reads each
// as the type its push constant names (quantized caches, K and V of different
// types), KV_PAGED does so through page tables; bindings 1 and 2.
// Any subgroup size: only shared memory and barriers.

#include "vk/tiles.h"

#if defined(KV_F16)
layout(binding = 1) readonly buffer Kbuf { uvec2 k_h4[]; };  // K rows, f16: 4 halves per uvec2
layout(binding = 2) readonly buffer Vbuf { uvec2 v_h4[]; };  // V rows, f16
// Elements 4 d4 .. 4 d4 + 3 of K (V) row `row`.
vec4 load_k(uint row, uint d4) { uvec2 w = k_h4[row * (pc.head_dim / 4u) + d4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 load_v(uint row, uint d4) { uvec2 w = v_h4[row * (pc.head_dim / 4u) + d4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
#elif defined(KV_F32)
layout(binding = 1) readonly buffer Kbuf { vec4 k_f4[]; };   // K rows, f32
layout(binding = 2) readonly buffer Vbuf { vec4 v_f4[]; };   // V rows, f32
vec4 load_k(uint row, uint d4) { return k_f4[row * (pc.head_dim / 4u) + d4]; }
vec4 load_v(uint row, uint d4) { return v_f4[row * (pc.head_dim / 4u) + d4]; }
#elif defined(KV_PAGED)
// Rows through page tables (attn_paged.comp): bindings 1 and 2 are windows
// of the KV pool; the shader defines PAGED_ROW_BYTE(is_v, row, rb), the byte
// where a slot's row of the current sequence and KV head starts (rb: its row
// bytes). Each tile's rows are looked up once, into s_krow / s_vrow
// (attn_tile_rows), not once per element. KV_PAGED_F16 / KV_PAGED_F32 read
// rows of that one type (K and V) as 8- / 16-byte words, as KV_F16 / KV_F32
// do (the host checks that every page and head stride is so aligned);
// otherwise each as its push constant's type, decoded at run time.
shared uint s_krow[VKV_ATTN_MAX_TILE_K], s_vrow[VKV_ATTN_MAX_TILE_K];
uint attn_tile_row0; // the slot of the tile's first row
#if defined(KV_PAGED_F16)
layout(binding = 1) readonly buffer Kbuf { uvec2 k_h4[]; };
layout(binding = 2) readonly buffer Vbuf { uvec2 v_h4[]; };
vec4 load_k(uint row, uint d4) { uvec2 w = k_h4[s_krow[row - attn_tile_row0] / 8u + d4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 load_v(uint row, uint d4) { uvec2 w = v_h4[s_vrow[row - attn_tile_row0] / 8u + d4]; return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
uint paged_k_row_bytes() { return 2u * pc.head_dim; }
uint paged_v_row_bytes() { return 2u * pc.head_dim; }
#elif defined(KV_PAGED_F32)
layout(binding = 1) readonly buffer Kbuf { vec4 k_f4[]; };
layout(binding = 2) readonly buffer Vbuf { vec4 v_f4[]; };
vec4 load_k(uint row, uint d4) { return k_f4[s_krow[row - attn_tile_row0] / 16u + d4]; }
vec4 load_v(uint row, uint d4) { return v_f4[s_vrow[row - attn_tile_row0] / 16u + d4]; }
uint paged_k_row_bytes() { return 4u * pc.head_dim; }
uint paged_v_row_bytes() { return 4u * pc.head_dim; }
#else
layout(binding = 1) readonly buffer Kbuf { uint k_words[]; };
layout(binding = 2) readonly buffer Vbuf { uint v_words[]; };
#define KVQ_ROW_BYTE(is_v, row, rb) ((is_v) ? s_vrow[(row) - attn_tile_row0] : s_krow[(row) - attn_tile_row0])
#include "common/kv_quant.glsl"
vec4 load_k(uint row, uint d4) { return kvq_load4(false, pc.k_type, pc.head_dim, row, d4); }
vec4 load_v(uint row, uint d4) { return kvq_load4(true, pc.v_type, pc.head_dim, row, d4); }
uint paged_k_row_bytes() { return kvq_row_bytes(pc.k_type, pc.head_dim); }
uint paged_v_row_bytes() { return kvq_row_bytes(pc.v_type, pc.head_dim); }
#endif
// The K and V row bytes of the tile's nk slots from `row0`, for every thread
// to read after a barrier.
void attn_tile_rows(uint row0, uint nk)
{
    attn_tile_row0 = row0;
    const uint kb = paged_k_row_bytes(), vb = paged_v_row_bytes();
    for (uint c = gl_LocalInvocationID.x; c < nk; c += gl_WorkGroupSize.x) {
        s_krow[c] = PAGED_ROW_BYTE(false, row0 + c, kb);
        s_vrow[c] = PAGED_ROW_BYTE(true, row0 + c, vb);
    }
}
#elif defined(KV_ANY)
// K and V of the types pc.k_type, pc.v_type (f16, f32, q8_0, q4_0), decoded
// at run time (common/kv_quant.glsl).
layout(binding = 1) readonly buffer Kbuf { uint k_words[]; };
layout(binding = 2) readonly buffer Vbuf { uint v_words[]; };
#include "common/kv_quant.glsl"
vec4 load_k(uint row, uint d4) { return kvq_load4(false, pc.k_type, pc.head_dim, row, d4); }
vec4 load_v(uint row, uint d4) { return kvq_load4(true, pc.v_type, pc.head_dim, row, d4); }
#else
#error "define KV_F16, KV_F32, KV_PAGED or KV_ANY"
#endif

// Shared budget (vk/tiles.h); the host picks tile sizes that fit.
const uint SQ_VEC4 = VKV_ATTN_SQ_VEC4;     // tile_q * head_dim / 4: the Q tile, pre-scaled
const uint SKV_VEC4 = VKV_ATTN_SKV_VEC4;   // tile_k * (head_dim / 4 + 1): K, then the value tile (+1 vec4 row pad against bank conflicts)
const uint SS_FLOATS = VKV_ATTN_SS_FLOATS; // tile_q * tile_k: the scores of the tile
const uint MAX_COLS = VKV_ATTN_MAX_COLS;   // vec4 output columns per thread: ceil(head_dim / 4 / (wg / tile_q))
shared vec4 sq[SQ_VEC4];
shared vec4 skv[SKV_VEC4];
shared float ss[SS_FLOATS];

// Finite "minus infinity": exp(NEG_BIG - m) is 0 without inf arithmetic.
const float NEG_BIG = -1.0e30;

// The thread's place (set by attn_place_thread) and its row's running
// softmax state; n_vis, the keys its row may see, is set by the shader.
uint d4n, kstride, r, lane, tpr, span, n_grp, grp, col, n_vis;
bool pv_live;
float m = NEG_BIG, l = 0.0;
vec4 ov[MAX_COLS]; // sum p V
vec4 ok[MAX_COLS]; // ATTN_APX_INTO_OK: sum_apx p R^-1 K, else 0

#if defined(ATTN_APX)
// Replaces the K tile in skv (nk slots from K row k_row0, positions from
// index p_idx0) by what stands for the values of approximated slots.
void attn_apx_value_tile(uint k_row0, uint p_idx0, uint nk);
#endif

// Row r of the tile and lane among the row's tpr threads. P V: the row's
// threads form n_grp key groups of `span` threads; thread (grp, col)
// accumulates output vec4 columns col, col + span over keys grp, grp + n_grp,
// ... of each tile, and attn_sum_groups adds the groups at the end. With few
// rows (decode) a row has many more threads than columns: without the groups
// each would walk every key (and its exp) for nothing.
void attn_place_thread()
{
    const uint tid = gl_LocalInvocationID.x;
    d4n = pc.head_dim / 4u;
    kstride = d4n + 1u;
    tpr = gl_WorkGroupSize.x / pc.tile_q;
    r = tid / tpr;
    lane = tid % tpr;
    span = min(tpr, d4n);
    n_grp = tpr / span;
    grp = lane / span;
    col = lane % span;
    pv_live = grp < n_grp;
    [[unroll]] for (uint c = 0u; c < MAX_COLS; c++) {
        ov[c] = vec4(0.0);
        ok[c] = vec4(0.0);
    }
}

// The Q tile, scaled: row rr of the tile is (query (row0+rr)/group, head
// kh*group + (row0+rr)%group), queries counted from q4's row ATTN_Q_ROW0
// (0 unless the shader defines it); rows past `rows` are zeros.
#if !defined(ATTN_Q_ROW0)
#define ATTN_Q_ROW0 0u
#endif
void attn_load_q(uint row0, uint rows, uint group, uint kh)
{
    const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < pc.tile_q * d4n; e += wg) {
        uint rr = row0 + e / d4n, d4 = e % d4n;
        vec4 val = vec4(0.0);
        if (rr < rows) val = q4[((ATTN_Q_ROW0 + rr / group) * pc.n_head + kh * group + rr % group) * d4n + d4] * pc.scale;
        sq[e] = val;
    }
}

// Online softmax over keys [kb, ke) of one segment: their K rows start at
// k_row0 + kb and, unless apx, their V rows at v_row0 + kb. apx is a
// constant at each call, so each call site compiles to one kind of tile with
// no branch on it: lavapipe runs both sides of even a uniform branch, masked.
void attend_segment(uint kb, uint ke, uint k_row0, uint v_row0, uint p_idx0, bool apx)
{
    const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    for (uint k0 = kb; k0 < ke; k0 += pc.tile_k) {
        const uint nk = min(pc.tile_k, ke - k0);
#if defined(KV_PAGED)
        attn_tile_rows(k_row0 + k0, nk); // k_row0 = v_row0: slots
        barrier();
#endif
        // K tile -> shared (rows past nk are never read: no need to fill them).
        for (uint e = tid; e < nk * d4n; e += wg) {
            uint c = e / d4n, d4 = e % d4n;
            skv[c * kstride + d4] = load_k(k_row0 + k0 + c, d4);
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
        // The value tile: stored values, or what stands for an approximated one.
        if (!apx) {
            for (uint e = tid; e < nk * d4n; e += wg) {
                uint c = e / d4n, d4 = e % d4n;
                skv[c * kstride + d4] = load_v(v_row0 + k0 + c, d4);
            }
        }
#if defined(ATTN_APX)
        else {
            attn_apx_value_tile(k_row0 + k0, p_idx0 + k0, nk);
        }
#endif
        barrier();
        // Online softmax update of this row, then o += p * V for this thread's columns.
        if (nv > 0u) {
            float mt = NEG_BIG;
            for (uint c = 0u; c < nv; c++) mt = max(mt, ss[r * pc.tile_k + c]);
            const float m_new = max(m, mt);
            const float alpha = exp(m - m_new);
            l *= alpha;
            [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
                ov[j] *= alpha;
#if defined(ATTN_APX)
                ok[j] *= alpha;
#endif
            }
            for (uint c = grp; pv_live && c < nv; c += n_grp) {
                const float p = exp(ss[r * pc.tile_k + c] - m_new);
                l += p;
                [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
                    uint d4 = col + j * span;
                    if (d4 < d4n) {
#if defined(ATTN_APX_INTO_OK)
                        if (apx) ok[j] += p * skv[c * kstride + d4];
                        else
#endif
                            ov[j] += p * skv[c * kstride + d4];
                    }
                }
            }
            m = m_new;
        }
        barrier(); // values and scores consumed before the next tile overwrites them
    }
}

// Sums the key groups into group 0 (all saw the same running max m); with
// several groups span == d4n, so a thread holds one column. The shared arrays
// are free: the last tile ended with a barrier.
void attn_sum_groups()
{
    if (n_grp <= 1u) return;
    const uint slot = (r * n_grp + grp) * span + col, half_slots = gl_WorkGroupSize.x;
    if (pv_live) {
        skv[slot] = ov[0];
#if defined(ATTN_APX)
        skv[half_slots + slot] = ok[0];
#endif
        if (col == 0u) ss[r * n_grp + grp] = l;
    }
    barrier();
    if (grp == 0u) {
        for (uint g = 1u; g < n_grp; g++) {
            uint o = (r * n_grp + g) * span + col;
            ov[0] += skv[o];
#if defined(ATTN_APX)
            ok[0] += skv[half_slots + o];
#endif
            l += ss[r * n_grp + g];
        }
    }
}
