// Weight decoding for every storage type, reading a tensor bound as raw
// 32-bit words so no 8/16-bit storage feature is needed. Exactly one of
// TYPE_F32, TYPE_F16, TYPE_BF16, TYPE_Q8_0, TYPE_Q4_0, TYPE_Q4_K, TYPE_Q6_K
// is defined by the build. The includer declares `uint w_words[]`.
//
// Offsets are in bytes from the start of the bound range. Rows hold K
// elements; row_off = row * ROW_BYTES(K).

uint w_byte(uint off) { return (w_words[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
// off must be even.
uint w_u16(uint off) { return (w_words[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float w_f16(uint off) { return unpackHalf2x16(w_u16(off)).x; }
int w_i8(uint off) { return int(w_byte(off) << 24) >> 24; }

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
#elif defined(TYPE_Q4_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 144u
#elif defined(TYPE_Q6_K)
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 210u
#else
#error "no weight TYPE_* defined"
#endif

uint row_bytes(uint k) { return k / BLOCK_ELEMS * BLOCK_BYTES; }

#if defined(TYPE_Q4_K)
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
    uint off = row_off + chunk * 34u;
    float d = w_f16(off);
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint p = w_u16(off + 2u + 2u * i);
        v[2u * i] = d * float(int(p << 24) >> 24);
        v[2u * i + 1u] = d * float(int(p << 16) >> 24);
    }
#elif defined(TYPE_Q4_0)
    uint off = row_off + chunk * 18u;
    float d = w_f16(off);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint p = w_u16(off + 2u + 2u * i);
        v[2u * i] = d * (float(p & 0xfu) - 8.0);
        v[2u * i + 16u] = d * (float((p >> 4) & 0xfu) - 8.0);
        v[2u * i + 1u] = d * (float((p >> 8) & 0xfu) - 8.0);
        v[2u * i + 17u] = d * (float((p >> 12) & 0xfu) - 8.0);
    }
#elif defined(TYPE_Q4_K)
    uint off = row_off + (chunk >> 3) * 144u;
    uint j = chunk & 7u;
    float d = w_f16(off), dmin = w_f16(off + 2u);
    float sc, mn;
    q4k_scale_min(off, j, sc, mn);
    float a = d * sc, b = dmin * mn;
    uint q = off + 16u + (j >> 1) * 32u; // 32 bytes per pair of sub-blocks
    uint shift = (j & 1u) * 4u;
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint p = w_u16(q + 2u * i);
        v[2u * i] = a * float((p >> shift) & 0xfu) - b;
        v[2u * i + 1u] = a * float((p >> (8u + shift)) & 0xfu) - b;
    }
#elif defined(TYPE_Q6_K)
    uint off = row_off + (chunk >> 3) * 210u;
    uint j = chunk & 7u;
    uint half_ = j >> 2, quad = j & 3u;
    float d = w_f16(off + 208u);
    uint ql = off + half_ * 64u + ((quad & 1u) != 0u ? 32u : 0u);
    uint qh = off + 128u + half_ * 32u;
    uint ql_shift = quad >= 2u ? 4u : 0u;
    uint qh_shift = quad * 2u;
    uint sc = off + 192u + half_ * 8u + quad * 2u;
    float s0 = d * float(w_i8(sc)), s1 = d * float(w_i8(sc + 1u));
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        uint l = w_u16(ql + 2u * i), h = w_u16(qh + 2u * i);
        float s = i < 8u ? s0 : s1;
        v[2u * i] = s * float(int(((l >> ql_shift) & 0xfu) | (((h >> qh_shift) & 3u) << 4)) - 32);
        v[2u * i + 1u] = s * float(int(((l >> (8u + ql_shift)) & 0xfu) | (((h >> (8u + qh_shift)) & 3u) << 4)) - 32);
    }
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
    uint off = row_off + (i >> 5) * 34u;
    return w_f16(off) * float(w_i8(off + 2u + (i & 31u)));
#elif defined(TYPE_Q4_0)
    uint off = row_off + (i >> 5) * 18u;
    uint e = i & 31u;
    uint b = w_byte(off + 2u + (e & 15u));
    return w_f16(off) * (float(e < 16u ? (b & 0xfu) : (b >> 4)) - 8.0);
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
