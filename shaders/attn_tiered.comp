#version 450
// Attention over a tiered (VECTOR-compressed) layer cache. Query i is the
// appended token n_new0 + i; it sees every compressed slot of its KV head
// (retained and approximated) and the appended tokens 0..n_new0 + i. The
// softmax runs over all of them; retained and appended tokens contribute their
// values, approximated ones the value rebuilt from the key:
//   FUSED:        out = sum_v p V + W_h (sum_apx p R^-1 K)   (by linearity of
//                 the map: one d x d matvec per query row, not one per token)
//                 With a joint map (kvlayout/kv_layout.h, S = n_kv_head blocks) the
//                 host runs the kernel once per block s: run s takes the
//                 approximated "values" from KV head (h + s) mod H (the same
//                 tokens in the same slots) and, for s > 0, adds only
//                 W[s, h] (sum_apx p R^-1 K_(h+s)) to out (accumulate).
//   MATERIALIZED: out = sum_v p V + sum_apx p V^, V^ = W_h R^-1 K precomputed
//                 by vector_materialize (the reference path).
// The tile loop is attn.comp's (common/attn_tile.glsl), run over the tier
// segments of each KV head.
// K slots of a head are contiguous: compressed first, then appended, so the
// causal rule is attn.comp's with pos0 = n_comp + n_new0.
// SPLIT=1 (decode): workgroup y handles keys [y * split_len, (y + 1) *
// split_len) and writes its unnormalised (sum_v, sum_apx, m, l) per row for
// attn_tiered_reduce, so long contexts spread over many workgroups.
// KV_ANY: K and V rows of the types pc.k_type / pc.v_type (quantized tiers;
// common/kv_quant.glsl), read through the same load_k / load_v.
// NO_APX (with FUSED): for caches where no head holds approximated slots (the
// eviction baseline): retained and appended slots are then contiguous in K
// and in V, and one segment covers them. The general kernel handles such a
// cache too, but lavapipe pays for each segment and accumulator it compiles.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in; // 256

layout(binding = 0) readonly buffer Qbuf { vec4 q4[]; };        // [n_q, n_head, head_dim] f32 (post-RoPE)
// K, V (bindings 1, 2; common/attn_tile.glsl): the tiered K rows and V rows
#if defined(NO_APX) && !defined(FUSED)
#error "NO_APX binds W as FUSED does"
#endif
layout(binding = 3) readonly buffer Mbuf { uint meta[]; };      // [n_kv_head, 8]: k_off, v_off, p_off, n_ret, n_apx
layout(binding = 4) readonly buffer Pbuf { int pos[]; };        // positions of the compressed slots
#if defined(FUSED)
layout(binding = 5) readonly buffer Wbuf { float w[]; };        // [S, n_kv_head, head_dim, head_dim] f32, block s at w_off
#else
layout(binding = 5) readonly buffer Hbuf { vec4 vhat4[]; };     // [K slots, head_dim] f32, at approximated slots
#endif
layout(binding = 6) readonly buffer Fbuf { float inv_freq[]; }; // [n_rot / 2]
#if SPLIT
// [n_split, n_q * n_head, 2 * head_dim / 4 + 1] vec4: sum_v p V, sum_apx p R^-1 K (or 0), then (m, l, 0, 0)
layout(binding = 7) writeonly buffer PartBuf { vec4 part[]; };
#else
layout(binding = 7) buffer Obuf { vec4 out4[]; };               // [n_q, n_head, head_dim] f32 (read when accumulating)
#endif

layout(push_constant) uniform PC {
    uint n_q, n_head, n_kv_head, head_dim;
    uint n_new0;     // appended tokens before query 0
    uint n_rot, neox;
    float scale;
    uint tile_q;     // rows per workgroup (power of two dividing the workgroup size)
    uint tile_k;     // keys per shared tile
    uint split_len;  // keys per split (SPLIT only)
    uint apx_shift;  // FUSED: approximated values from KV head (h + apx_shift) mod n_kv_head
    uint w_off;      // FUSED: first float of the map block applied
    uint accumulate; // FUSED, not SPLIT: out += the block's approximated part only
    uint k_type, v_type; // KV_ANY: the tiered rows' types (ggml numbers: f32, f16, q8_0, q4_0)
} pc;

#if !defined(NO_APX)
#define ATTN_APX
#if defined(FUSED)
#define ATTN_APX_INTO_OK
#endif
#endif
// sq holds the Q tile, then (FUSED) the rows' sum_apx p R^-1 K.
#include "common/attn_tile.glsl"

// sin/cos of a possibly large angle, reduced to [-pi, pi] first (as rope.comp).
const float TWO_PI_HI = 6.28318548202514648;
const float TWO_PI_LO = -1.7484555314695172e-7;
vec2 sincos_reduced(float a)
{
    float k = round(a * 0.15915494309189535);
    float r = fma(-k, TWO_PI_HI, a);
    r = fma(-k, TWO_PI_LO, r);
    return vec2(sin(r), cos(r));
}

float k_scalar(uint row, uint d) { return load_k(row, d / 4u)[d % 4u]; }

// Element d of R_pos^-1 k for the key of K row `row`.
float unrope_elem(uint row, uint d, int p)
{
    uint half_rot = pc.n_rot / 2u;
    if (d >= pc.n_rot) return k_scalar(row, d);
    bool first = pc.neox != 0u ? d < half_rot : (d & 1u) == 0u;
    uint pair = pc.neox != 0u ? (first ? d : d - half_rot) : d >> 1;
    uint partner = pc.neox != 0u ? (first ? d + half_rot : d - half_rot) : (first ? d + 1u : d - 1u);
    vec2 sc = sincos_reduced(float(p) * inv_freq[pair]);
    float s = -sc.x, c = sc.y; // rotate by -theta
    float x = k_scalar(row, d), y = k_scalar(row, partner);
    return first ? x * c - y * s : y * s + x * c;
}

#if defined(FUSED)
// Replaces the K tile in skv (nk slots from K row k_row0, positions from
// pos[p_idx0]) by R^-1 K. Interleaved pairs (2i, 2i+1) share a vec4 and NeoX
// pairs (i, i + n_rot/2) sit n_rot/8 vec4 apart, so each thread rotates
// whole vec4s it alone touches; a rotated span that does not fill whole
// vec4s is rebuilt from the stored key instead.
void unrope_tile_in_place(uint k_row0, uint p_idx0, uint nk, uint kstride)
{
    const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    if (pc.neox == 0u && pc.n_rot % 4u == 0u) {
        const uint rot4 = pc.n_rot / 4u;
        for (uint e = tid; e < nk * rot4; e += wg) {
            uint c = e / rot4, d4 = e % rot4;
            float p = float(pos[p_idx0 + c]);
            vec2 sc0 = sincos_reduced(p * inv_freq[2u * d4]);
            vec2 sc1 = sincos_reduced(p * inv_freq[2u * d4 + 1u]);
            vec4 kv = skv[c * kstride + d4];
            // rotate by -theta: (a c + b s, b c - a s)
            skv[c * kstride + d4] = vec4(kv.x * sc0.y + kv.y * sc0.x, kv.y * sc0.y - kv.x * sc0.x,
                                         kv.z * sc1.y + kv.w * sc1.x, kv.w * sc1.y - kv.z * sc1.x);
        }
    } else if (pc.neox != 0u && pc.n_rot % 8u == 0u) {
        const uint half4 = pc.n_rot / 8u;
        for (uint e = tid; e < nk * half4; e += wg) {
            uint c = e / half4, d4 = e % half4;
            float p = float(pos[p_idx0 + c]);
            // Four pairs at once: sincos_reduced's reduction, vectorised (writing
            // the components of a vec4 one by one in a loop miscompiled on lavapipe).
            const uint f = 4u * d4;
            vec4 a = p * vec4(inv_freq[f], inv_freq[f + 1u], inv_freq[f + 2u], inv_freq[f + 3u]);
            vec4 kk = round(a * 0.15915494309189535);
            a = fma(-kk, vec4(TWO_PI_HI), a);
            a = fma(-kk, vec4(TWO_PI_LO), a);
            vec4 cs = cos(a), sn = sin(a);
            vec4 x = skv[c * kstride + d4], y = skv[c * kstride + d4 + half4];
            skv[c * kstride + d4] = x * cs + y * sn;
            skv[c * kstride + d4 + half4] = y * cs - x * sn;
        }
    } else {
        const uint rot4 = (pc.n_rot + 3u) / 4u;
        for (uint e = tid; e < nk * rot4; e += wg) {
            uint c = e / rot4, d4 = e % rot4, kr = k_row0 + c;
            int p = pos[p_idx0 + c];
            skv[c * kstride + d4] = vec4(unrope_elem(kr, 4u * d4, p), unrope_elem(kr, 4u * d4 + 1u, p),
                                         unrope_elem(kr, 4u * d4 + 2u, p), unrope_elem(kr, 4u * d4 + 3u, p));
        }
    }
}
#endif

#if defined(ATTN_APX)
void attn_apx_value_tile(uint k_row0, uint p_idx0, uint nk)
{
#if defined(FUSED)
    if (pc.apx_shift != 0u) {
        // Another head's keys of the same tokens: its slots sit at the same
        // offsets from its own k_off (joint maps keep the heads' tiers equal).
        const uint kh = gl_WorkGroupID.z, src = (kh + pc.apx_shift) % pc.n_kv_head;
        k_row0 = k_row0 - meta[kh * 8u] + meta[src * 8u];
        const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
        for (uint e = tid; e < nk * d4n; e += wg) {
            uint c = e / d4n, d4 = e % d4n;
            skv[c * kstride + d4] = load_k(k_row0 + c, d4);
        }
        barrier();
    }
    unrope_tile_in_place(k_row0, p_idx0, nk, kstride);
#else
    const uint wg = gl_WorkGroupSize.x, tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < nk * d4n; e += wg) {
        uint c = e / d4n, d4 = e % d4n;
        skv[c * kstride + d4] = vhat4[(k_row0 + c) * d4n + d4];
    }
#endif
}
#endif

void main()
{
    attn_place_thread();
    const uint group = pc.n_head / pc.n_kv_head;
    const uint kh = gl_WorkGroupID.z;
    const uint k_off = meta[kh * 8u], v_off = meta[kh * 8u + 1u], p_off = meta[kh * 8u + 2u];
    const uint n_ret = meta[kh * 8u + 3u], n_apx = meta[kh * 8u + 4u], n_comp = n_ret + n_apx;
    const uint pos0 = n_comp + pc.n_new0, n_kv = pos0 + pc.n_q;
    const uint rows = pc.n_q * group;
    const uint row0 = gl_WorkGroupID.x * pc.tile_q;
    const uint R = row0 + r;
    const bool row_live = R < rows;
    const uint qi = R / group, h = kh * group + R % group;
    n_vis = row_live ? min(n_kv, pos0 + qi + 1u) : 0u;
    const uint last_row = min(row0 + pc.tile_q, rows) - 1u;
    const uint tile_vis = min(n_kv, pos0 + last_row / group + 1u);

    attn_load_q(row0, rows, group, kh);

#if SPLIT
    const uint k_begin = gl_WorkGroupID.y * pc.split_len;
    const uint k_end = min(tile_vis, k_begin + pc.split_len);
#else
    const uint k_begin = 0u;
    const uint k_end = tile_vis;
#endif
    // This workgroup's keys by tier: retained [0, n_ret) and appended
    // [n_comp, ...) have V rows (appended ones n_apx rows earlier, as
    // approximated slots have none), approximated [n_ret, n_comp) do not.
    // Softmax order does not matter, so the two value-bearing segments go first.
    barrier(); // the Q tile is complete before the first scores
#if defined(NO_APX)
    attend_segment(k_begin, k_end, k_off, v_off, p_off, false);
#else
    attend_segment(k_begin, min(k_end, n_ret), k_off, v_off, p_off, false);
    attend_segment(max(k_begin, n_comp), k_end, k_off, v_off - n_apx, p_off, false);
    attend_segment(max(k_begin, n_ret), min(k_end, n_comp), k_off, v_off, p_off, true);
#endif

    attn_sum_groups();

#if SPLIT
    if (!row_live || grp != 0u) return;
    const uint prow = ((gl_WorkGroupID.y * pc.n_q + qi) * pc.n_head + h) * (2u * d4n + 1u);
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 < d4n) {
            part[prow + d4] = ov[j];
            part[prow + d4n + d4] = ok[j];
        }
    }
    if (col == 0u) part[prow + 2u * d4n] = vec4(m, l, 0.0, 0.0);
#else
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
#if defined(FUSED)
    // W_h (sum_apx p R^-1 K) / l: gather the row's vector in shared memory,
    // then each thread takes its output columns of the matvec.
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (grp == 0u && d4 < d4n) sq[r * d4n + d4] = ok[j] * inv;
    }
    barrier();
#endif
    if (!row_live || grp != 0u) return;
    const uint orow = (qi * pc.n_head + h) * d4n;
    [[unroll]] for (uint j = 0u; j < MAX_COLS; j++) {
        uint d4 = col + j * span;
        if (d4 >= d4n) continue;
        vec4 res = ov[j] * inv;
#if defined(FUSED)
        if (pc.accumulate != 0u) res = out4[orow + d4];
        if (n_apx > 0u) {
            uint hd = pc.head_dim;
            for (uint e4 = 0u; e4 < d4n; e4++) {
                vec4 kv = sq[r * d4n + e4];
                [[unroll]] for (uint jj = 0u; jj < 4u; jj++) {
                    uint row = pc.w_off + (kh * hd + 4u * d4 + jj) * hd + 4u * e4;
                    res[jj] += dot(vec4(w[row], w[row + 1u], w[row + 2u], w[row + 3u]), kv);
                }
            }
        }
#endif
        out4[orow + d4] = res;
    }
#endif
}
