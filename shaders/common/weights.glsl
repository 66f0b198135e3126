// Weight decoding for every storage type, reading a tensor bound as raw
// 32-bit words so no 8/16-bit storage feature is needed. Exactly one
// TYPE_* (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K,
// q5_K, q6_K, iq4_nl, iq4_xs) is defined by the build. Block layouts are
// ggml's, as src/core/dtype.h describes them; decoders follow its CPU
// codecs. The includer declares `uint w_words[]`.
//
// Offsets are in bytes from the start of the bound range. Rows hold K
// elements; row_off = row * ROW_BYTES(K).

uint w_byte(uint off) { return (w_words[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
// off must be even.
uint w_u16(uint off) { return (w_words[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float w_f16(uint off) { return unpackHalf2x16(w_u16(off)).x; }
// Byte b (0..3) of word w as a signed 8-bit value.
int word_i8(uint w, uint b) { return int(w << (24u - 8u * b)) >> 24; }
int w_i8(uint off) { return word_i8(w_words[off >> 2], off & 3u); }

// The 16 (32) bytes from byte offset off (even: blocks of q5_0, q3_K and
// iq4_nl are only 2-byte aligned; the grouped rows below align q8_0's, q4_0's
// and q6_K's bodies) as 4 (8) words, byte 4i + b in bits 8b.. of wd[i]:
// funnel-shifted out of five (nine) 4-byte loads instead of eight (sixteen)
// 16-bit reads, without a branch. Loads are clamped to the bound range; what a
// clamped load returns is shifted out.
// One body for both widths (GLSL has no arrays of a parameter's length).
#define W_BYTES(name, n_words)                                          \
    void name(uint off, out uint wd[n_words])                           \
    {                                                                   \
        const uint last_word = uint(w_words.length()) - 1u;             \
        const uint w0 = off >> 2;                                       \
        const bool odd = (off & 2u) != 0u;                              \
        uint lo = w_words[w0];                                          \
        [[unroll]] for (uint i = 0u; i < n_words; i++) {                \
            const uint hi = w_words[min(w0 + i + 1u, last_word)];       \
            wd[i] = odd ? (lo >> 16) | (hi << 16) : lo;                 \
            lo = hi;                                                    \
        }                                                               \
    }
W_BYTES(w_bytes16, 4u)
W_BYTES(w_bytes32, 8u)

#if defined(TYPE_F32)
#define BLOCK_ELEMS 1u
#define BLOCK_BYTES 4u
#define FLOAT_WEIGHTS 1
#elif defined(TYPE_F16) || defined(TYPE_BF16)
#define BLOCK_ELEMS 1u
#define BLOCK_BYTES 2u
#define FLOAT_WEIGHTS 1
#elif defined(TYPE_Q8_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 34u
#elif defined(TYPE_Q4_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
#elif defined(TYPE_Q4_1)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 20u
#elif defined(TYPE_Q5_0)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 22u
#elif defined(TYPE_Q5_1)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 24u
#elif defined(TYPE_IQ4_NL)
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
#elif defined(TYPE_Q2_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 84u
#elif defined(TYPE_Q3_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 110u
#elif defined(TYPE_Q4_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 144u
#elif defined(TYPE_Q5_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 176u
#elif defined(TYPE_IQ4_XS)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 136u
#elif defined(TYPE_Q6_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 210u
#else
#error "no weight TYPE_* defined"
#endif

#if defined(TYPE_Q6_K) || defined(TYPE_Q8_0) || defined(TYPE_Q4_0)
// Grouped device rows (src/core/dtype.c, vkv_dtype_rows_to_device;
// docs/ARCHITECTURE.md §1, "Grouped device rows"): ggml's q6_K (210-byte),
// q8_0 (34) and q4_0 (18) blocks start only 2-byte aligned, so the device
// holds their blocks in groups of 8: the 8 blocks' d (16 bytes), then their
// bodies (the block without its d: q6_K's ql, qh and scales, 208 bytes;
// q8_0's 32 and q4_0's 16 quants). A last group of r < 8 blocks has its r d
// padded to 16 bytes. Every body then starts 16-byte aligned.
#if defined(TYPE_Q6_K)
const uint BODY_BYTES = 208u;
#elif defined(TYPE_Q8_0)
const uint BODY_BYTES = 32u;
#else
const uint BODY_BYTES = 16u;
#endif
const uint GROUP_BYTES = 16u + 8u * BODY_BYTES;
uint row_bytes(uint k)
{
    const uint nb = k / BLOCK_ELEMS, r = nb & 7u;
    return (nb >> 3) * GROUP_BYTES + (r != 0u ? 16u + BODY_BYTES * r : 0u);
}
uint block_d_off(uint row_off, uint blk) { return row_off + (blk >> 3) * GROUP_BYTES + (blk & 7u) * 2u; }
uint block_body_off(uint row_off, uint blk) { return row_off + (blk >> 3) * GROUP_BYTES + 16u + (blk & 7u) * BODY_BYTES; }
#else
uint row_bytes(uint k) { return k / BLOCK_ELEMS * BLOCK_BYTES; }
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// The 6-bit scale and min of sub-block j (0..7) of a q4_K block at `off`.
void q4k_scale_min(uint off, uint j, out float sc, out float mn)
{
    uint s = off + 4u;
    if (j < 4u) {
        sc = float(w_byte(s + j) & 63u);
        mn = float(w_byte(s + j + 4u) & 63u);
    } else {
        sc = float((w_byte(s + j + 4u) & 0xfu) | ((w_byte(s + j - 4u) >> 6) << 4));
        mn = float((w_byte(s + j + 4u) >> 4) | ((w_byte(s + j) >> 6) << 4));
    }
}
#endif

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
const float KVALUES_IQ4NL[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                          1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// 32 iq4 indices (16 bytes at q, nibbles as q4_0) times d.
void iq4_decode32(uint q, float d, out float v[32])
{
    uint wd[4]; // element e < 16: low nibble of byte e; e >= 16: high nibble of byte e - 16
    w_bytes16(q, wd);
    [[unroll]] for (uint e = 0u; e < 16u; e++) {
        const uint b = wd[e >> 2] >> (8u * (e & 3u));
        v[e] = d * KVALUES_IQ4NL[b & 0xfu];
        v[e + 16u] = d * KVALUES_IQ4NL[(b >> 4) & 0xfu];
    }
}
#endif

#if defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
// The 32 unsigned 4- or 5-bit values of a q4_1/q5_0/q5_1 block: low nibbles
// at qs (as q4_0), bit 4 of element j in bit j of the 32-bit qh.
void q45_values(uint qs, uint qh, out float v[32])
{
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint p = w_u16(qs + 2u * i);
        uint j = 2u * i;
        v[j] = float((p & 0xfu) | (((qh >> j) & 1u) << 4));
        v[j + 16u] = float(((p >> 4) & 0xfu) | (((qh >> (j + 16u)) & 1u) << 4));
        v[j + 1u] = float(((p >> 8) & 0xfu) | (((qh >> (j + 1u)) & 1u) << 4));
        v[j + 17u] = float(((p >> 12) & 0xfu) | (((qh >> (j + 17u)) & 1u) << 4));
    }
}
#endif

// The values of one 32-element chunk from its words, for every decoder that
// reads them (dequant32 here; matvec.comp's 16-byte loads): one arithmetic,
// so every kernel gets the same bits.
#if defined(TYPE_Q8_0)
// d times the 32 signed bytes of q
void q8_0_values(float d, uint q[8], out float v[32])
{
    [[unroll]] for (uint e = 0u; e < 32u; e++) v[e] = d * float(word_i8(q[e >> 2], e & 3u));
}
#elif defined(TYPE_Q4_0)
// element e < 16: low nibble of byte e of wd; e >= 16: high nibble of byte e - 16
void q4_0_values(float d, uint wd[4], out float v[32])
{
    [[unroll]] for (uint e = 0u; e < 16u; e++) {
        const uint b = wd[e >> 2] >> (8u * (e & 3u));
        v[e] = d * (float(b & 0xfu) - 8.0);
        v[e + 16u] = d * (float((b >> 4) & 0xfu) - 8.0);
    }
}
#elif defined(TYPE_Q6_K)
// A chunk of a q6_K half block: its low nibbles at ql_shift of l's bytes,
// its high two bits at qh_shift of h's, the scales s0 (elements 0..15) and
// s1 (16..31), d included.
void q6k_values(uint l[8], uint h[8], float s0, float s1, uint ql_shift, uint qh_shift, out float v[32])
{
    [[unroll]] for (uint e = 0u; e < 32u; e++) {
        const uint b = 8u * (e & 3u);
        const float s = e < 16u ? s0 : s1;
        v[e] = s * float(int(((l[e >> 2] >> (b + ql_shift)) & 0xfu) | (((h[e >> 2] >> (b + qh_shift)) & 3u) << 4)) - 32);
    }
}
#endif

// Decodes elements [32*chunk, 32*chunk + 32) of the row starting at row_off.
void dequant32(uint row_off, uint chunk, out float v[32])
{
#if defined(TYPE_F32)
    uint w0 = (row_off >> 2) + chunk * 32u;
    [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = uintBitsToFloat(w_words[w0 + i]);
#elif defined(TYPE_F16)
    uint w0 = (row_off >> 2) + chunk * 16u;
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        vec2 h = unpackHalf2x16(w_words[w0 + i]);
        v[2u * i] = h.x;
        v[2u * i + 1u] = h.y;
    }
#elif defined(TYPE_BF16)
    uint w0 = (row_off >> 2) + chunk * 16u;
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint w = w_words[w0 + i];
        v[2u * i] = uintBitsToFloat(w << 16);
        v[2u * i + 1u] = uintBitsToFloat(w & 0xffff0000u);
    }
#elif defined(TYPE_Q8_0)
    float d = w_f16(block_d_off(row_off, chunk));
    uint q[8];
    w_bytes32(block_body_off(row_off, chunk), q);
    q8_0_values(d, q, v);
#elif defined(TYPE_Q4_0)
    float d = w_f16(block_d_off(row_off, chunk));
    uint wd[4]; // element e < 16: low nibble of byte e; e >= 16: high nibble of byte e - 16
    w_bytes16(block_body_off(row_off, chunk), wd);
    q4_0_values(d, wd, v);
#elif defined(TYPE_Q4_1)
    uint off = row_off + chunk * 20u;
    float d = w_f16(off), m = w_f16(off + 2u);
    q45_values(off + 4u, 0u, v);
    [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = v[i] * d + m;
#elif defined(TYPE_Q5_0)
    uint off = row_off + chunk * 22u;
    float d = w_f16(off);
    q45_values(off + 6u, w_u16(off + 2u) | (w_u16(off + 4u) << 16), v);
    [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = (v[i] - 16.0) * d;
#elif defined(TYPE_Q5_1)
    uint off = row_off + chunk * 24u;
    float d = w_f16(off), m = w_f16(off + 2u);
    q45_values(off + 8u, w_u16(off + 4u) | (w_u16(off + 6u) << 16), v);
    [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = v[i] * d + m;
#elif defined(TYPE_IQ4_NL)
    uint off = row_off + chunk * 18u;
    iq4_decode32(off + 2u, w_f16(off), v);
#elif defined(TYPE_IQ4_XS)
    uint off = row_off + (chunk >> 3) * 136u;
    uint j = chunk & 7u;
    uint ls = ((w_byte(off + 4u + (j >> 1)) >> (4u * (j & 1u))) & 0xfu) | (((w_u16(off + 2u) >> (2u * j)) & 3u) << 4);
    iq4_decode32(off + 8u + 16u * j, w_f16(off) * float(int(ls) - 32), v);
#elif defined(TYPE_Q2_K)
    // Chunk j of a block: quarter s = j % 4 (2-bit field 2s) of the 32 qs
    // bytes of half j / 4; sub-blocks 2j and 2j + 1 (scale bytes).
    uint off = row_off + (chunk >> 3) * 84u;
    uint j = chunk & 7u;
    float d = w_f16(off + 80u), dmin = w_f16(off + 82u);
    uint shift = (j & 3u) * 2u;
    uint q = off + 16u + (j >> 2) * 32u;
    uint sc0 = w_byte(off + 2u * j), sc1 = w_byte(off + 2u * j + 1u);
    float a0 = d * float(sc0 & 0xfu), b0 = dmin * float(sc0 >> 4);
    float a1 = d * float(sc1 & 0xfu), b1 = dmin * float(sc1 >> 4);
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint p = w_u16(q + 2u * i);
        float a = i < 8u ? a0 : a1, b = i < 8u ? b0 : b1;
        v[2u * i] = a * float((p >> shift) & 3u) - b;
        v[2u * i + 1u] = a * float((p >> (8u + shift)) & 3u) - b;
    }
#elif defined(TYPE_Q3_K)
    // As q2_K for the low 2 bits; bit 2 is bit j of hmask[l] (set: no -4).
    uint off = row_off + (chunk >> 3) * 110u;
    uint j = chunk & 7u;
    float d = w_f16(off + 108u);
    uint shift = (j & 3u) * 2u;
    uint q = off + 32u + (j >> 2) * 32u;
    float s2[2];
    [[unroll]] for (uint t = 0u; t < 2u; t++) {
        uint is = 2u * j + t;
        uint lo = is < 8u ? w_byte(off + 96u + is) & 0xfu : w_byte(off + 96u + is - 8u) >> 4;
        uint hi = (w_byte(off + 104u + (is & 3u)) >> (2u * (is >> 2))) & 3u;
        s2[t] = d * float(int(lo | (hi << 4)) - 32);
    }
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint p = w_u16(q + 2u * i), h = w_u16(off + 2u * i);
        float s = i < 8u ? s2[0] : s2[1];
        v[2u * i] = s * float(int((p >> shift) & 3u) - (((h >> j) & 1u) != 0u ? 0 : 4));
        v[2u * i + 1u] = s * float(int((p >> (8u + shift)) & 3u) - (((h >> (8u + j)) & 1u) != 0u ? 0 : 4));
    }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    // Sub-blocks 2p and 2p + 1 share 32 bytes of nibbles; q5_K adds bit 4
    // of element 32j + l as bit j of qh[l].
    uint off = row_off + (chunk >> 3) * BLOCK_BYTES;
    uint j = chunk & 7u;
    float d = w_f16(off), dmin = w_f16(off + 2u);
    float sc, mn;
    q4k_scale_min(off, j, sc, mn);
    float a = d * sc, b = dmin * mn;
#if defined(TYPE_Q5_K)
    uint q = off + 48u + (j >> 1) * 32u;
#else
    uint q = off + 16u + (j >> 1) * 32u;
#endif
    uint shift = (j & 1u) * 4u;
    uint ql[8]; // element e: byte e of the nibbles (and of qh)
    w_bytes32(q, ql);
#if defined(TYPE_Q5_K)
    uint qh[8];
    w_bytes32(off + 16u, qh);
#endif
    [[unroll]] for (uint e = 0u; e < 32u; e++) {
        const uint bit = 8u * (e & 3u);
#if defined(TYPE_Q5_K)
        const uint h = ((qh[e >> 2] >> (bit + j)) & 1u) << 4;
#else
        const uint h = 0u;
#endif
        v[e] = a * float(((ql[e >> 2] >> (bit + shift)) & 0xfu) | h) - b;
    }
#elif defined(TYPE_Q6_K)
    uint off = block_body_off(row_off, chunk >> 3);
    uint j = chunk & 7u;
    uint half_ = j >> 2, quad = j & 3u;
    float d = w_f16(block_d_off(row_off, chunk >> 3));
    uint ql = off + half_ * 64u + ((quad & 1u) != 0u ? 32u : 0u);
    uint qh = off + 128u + half_ * 32u;
    uint ql_shift = quad >= 2u ? 4u : 0u;
    uint qh_shift = quad * 2u;
    uint sc = off + 192u + half_ * 8u + quad * 2u;
    float s0 = d * float(w_i8(sc)), s1 = d * float(w_i8(sc + 1u));
    uint l[8], h[8]; // element e: byte e of each
    w_bytes32(ql, l);
    w_bytes32(qh, h);
    q6k_values(l, h, s0, s1, ql_shift, qh_shift, v);
#endif
}

// Decodes one element i of the row starting at row_off (for gathers).
float dequant1(uint row_off, uint i)
{
#if defined(TYPE_F32)
    return uintBitsToFloat(w_words[(row_off >> 2) + i]);
#elif defined(TYPE_F16)
    return w_f16(row_off + 2u * i);
#elif defined(TYPE_BF16)
    return uintBitsToFloat(w_u16(row_off + 2u * i) << 16);
#elif defined(TYPE_Q8_0)
    return w_f16(block_d_off(row_off, i >> 5)) * float(w_i8(block_body_off(row_off, i >> 5) + (i & 31u)));
#elif defined(TYPE_Q4_0)
    uint e = i & 31u;
    uint b = w_byte(block_body_off(row_off, i >> 5) + (e & 15u));
    return w_f16(block_d_off(row_off, i >> 5)) * (float(e < 16u ? (b & 0xfu) : (b >> 4)) - 8.0);
#else
    float v[32];
    dequant32(row_off, i >> 5, v);
    return v[i & 31u];
#endif
}

// dequant32 for a row of K elements where K need not be a multiple of 32
// (float types only; quantized rows are whole blocks): elements past K are 0.
// Float rows are decoded without branches: a 16-bit row of odd length starts
// 2 bytes into a word, so each pair of elements is funnel-shifted out of two
// neighbouring words. Branch-free because CPU devices such as lavapipe run
// both sides of a branch, even a uniform one; word indices are clamped to the
// bound range, and what a clamped load returns is masked off.
void dequant32_k(uint row_off, uint chunk, uint K, out float v[32])
{
#if defined(FLOAT_WEIGHTS)
    const uint last_word = uint(w_words.length()) - 1u;
    const uint e0 = chunk * 32u;
#if defined(TYPE_F32)
    const uint w0 = (row_off >> 2) + e0;
    [[unroll]] for (uint i = 0u; i < 32u; i++)
        v[i] = e0 + i < K ? uintBitsToFloat(w_words[min(w0 + i, last_word)]) : 0.0;
#else
    const uint w0 = (row_off >> 2) + chunk * 16u;
    const bool odd = (row_off & 2u) != 0u;
    uint lo = w_words[min(w0, last_word)];
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        const uint hi = w_words[min(w0 + i + 1u, last_word)];
        const uint w = odd ? (lo >> 16) | (hi << 16) : lo;
        lo = hi;
#if defined(TYPE_F16)
        const vec2 h = unpackHalf2x16(w);
#else
        const vec2 h = vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
#endif
        v[2u * i] = e0 + 2u * i < K ? h.x : 0.0;
        v[2u * i + 1u] = e0 + 2u * i + 1u < K ? h.y : 0.0;
    }
#endif
#else
    dequant32(row_off, chunk, v);
#endif
}
