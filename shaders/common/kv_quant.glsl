// Reading and writing KV cache rows of a type chosen at run time per buffer:
// f32, f16, q8_0 or q4_0 (ggml's type numbers), in the row format of
// kvlayout/kv_layout.h: a quantized row is blocks of 32 elements (the last one
// shorter when head_dim % 32 != 0), each an f16 scale then int8s (q8_0) or
// nibbles (q4_0: byte j holds element j low, j + n/2 high), the row padded
// to a 32-bit word. The CPU codec is vkv_kv_encode_row / vkv_kv_decode_row.
//
// Readers (unless KVQ_NO_READER): the includer declares `uint k_words[]` and
// `uint v_words[]`, or only k_words with KVQ_ONE_BUFFER. Row r starts at byte
// r * row bytes unless the includer defines KVQ_ROW_BYTE(is_v, row, rb), the
// byte where row `row` starts given rb = its row bytes (a paged cache's rows
// are found through page tables: attn_paged.comp). Writers (KVQ_WRITER): the includer declares, before the
// include, `float kvq_src(uint e)` (element e of the row being written) and
// `void kvq_out(uint w, uint value)` (stores word w), and calls kvq_write_row.

const uint KVT_F32 = 0u, KVT_F16 = 1u, KVT_Q4_0 = 2u, KVT_Q8_0 = 8u;

// Bytes of a row of hd (a multiple of 4) elements of type t.
uint kvq_row_bytes(uint t, uint hd)
{
    uint n_blocks = (hd + 31u) / 32u;
    uint bytes = t == KVT_F32 ? 4u * hd : t == KVT_F16 ? 2u * hd : t == KVT_Q8_0 ? 2u * n_blocks + hd : 2u * n_blocks + hd / 2u;
    return (bytes + 3u) & ~3u;
}

// Bytes of one whole block of 32 elements.
uint kvq_block_bytes(uint t) { return t == KVT_Q8_0 ? 34u : 18u; }

#if !defined(KVQ_NO_READER)
#if defined(KVQ_ONE_BUFFER)
uint kvq_word(bool is_v, uint i) { return k_words[i]; }
#else
uint kvq_word(bool is_v, uint i) { return is_v ? v_words[i] : k_words[i]; }
#endif

// Bytes off..off+3 (any alignment, inside one row) as a little-endian word.
uint kvq_bytes4(bool is_v, uint off)
{
    uint w = off >> 2, s = (off & 3u) * 8u;
    uint lo = kvq_word(is_v, w);
    return s == 0u ? lo : (lo >> s) | (kvq_word(is_v, w + 1u) << (32u - s));
}

// Element j of the q4_0 block of n elements at byte boff, its scale d.
float kvq_q4_elem(bool is_v, uint boff, uint n, uint j, float d)
{
    uint half_n = n / 2u;
    uint off = boff + 2u + (j < half_n ? j : j - half_n);
    uint b = (kvq_word(is_v, off >> 2) >> ((off & 3u) * 8u)) & 0xffu;
    uint q = j < half_n ? b & 15u : b >> 4;
    return float(int(q) - 8) * d;
}

// Elements 4 d4 .. 4 d4 + 3 of row `row` of the buffer (K or V), rows of hd
// elements of type t.
vec4 kvq_load4(bool is_v, uint t, uint hd, uint row, uint d4)
{
#if defined(KVQ_ROW_BYTE)
    uint rb = KVQ_ROW_BYTE(is_v, row, kvq_row_bytes(t, hd));
#else
    uint rb = row * kvq_row_bytes(t, hd);
#endif
    if (t == KVT_F16) {
        uint w = rb / 4u + 2u * d4;
        return vec4(unpackHalf2x16(kvq_word(is_v, w)), unpackHalf2x16(kvq_word(is_v, w + 1u)));
    }
    if (t == KVT_F32) {
        uint w = rb / 4u + 4u * d4;
        return uintBitsToFloat(uvec4(kvq_word(is_v, w), kvq_word(is_v, w + 1u), kvq_word(is_v, w + 2u),
                                     kvq_word(is_v, w + 3u)));
    }
    uint e = 4u * d4, b = e / 32u, j = e % 32u, n = min(32u, hd - 32u * b);
    uint boff = rb + b * kvq_block_bytes(t); // blocks before the last are whole
    uint dw = kvq_word(is_v, boff >> 2);
    float d = unpackHalf2x16((boff & 2u) != 0u ? dw >> 16 : dw).x;
    if (t == KVT_Q8_0) {
        int q = int(kvq_bytes4(is_v, boff + 2u + j));
        return vec4(float(bitfieldExtract(q, 0, 8)) * d, float(bitfieldExtract(q, 8, 8)) * d,
                    float(bitfieldExtract(q, 16, 8)) * d, float(bitfieldExtract(q, 24, 8)) * d);
    }
    return vec4(kvq_q4_elem(is_v, boff, n, j, d), kvq_q4_elem(is_v, boff, n, j + 1u, d),
                kvq_q4_elem(is_v, boff, n, j + 2u, d), kvq_q4_elem(is_v, boff, n, j + 3u, d));
}
#endif

// f32 -> f16 bits, round to nearest even (the C reference's rule; packHalf2x16
// leaves the rounding to the implementation).
uint kvq_f32_to_f16(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u); // inf, nan
    if (a >= 0x477ff000u) return sign | 0x7c00u;                                  // overflow
    if (a < 0x38800000u) {                                                        // subnormal or zero
        if (a < 0x33000000u) return sign;
        uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;
        uint q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u) != 0u)) q++;
        return sign | q;
    }
    uint q = a - 0x38000000u;
    uint r = q & 0x1fffu;
    q >>= 13;
    if (r > 0x1000u || (r == 0x1000u && (q & 1u) != 0u)) q++;
    return sign | q;
}

#if defined(KVQ_WRITER)
// C's roundf: halves away from zero (GLSL's round leaves them open).
int kvq_round_away(float v)
{
    float t = trunc(v);
    if (abs(v - t) >= 0.5) t += sign(v);
    return int(t);
}

// Bytes go out through a word accumulator: a row starts on a word and is
// whole words long, so the invocation writing it owns its words.
uint kvq_acc, kvq_n, kvq_w;
void kvq_put_byte(uint b)
{
    kvq_acc |= (b & 0xffu) << (8u * kvq_n);
    if (++kvq_n == 4u) {
        kvq_out(kvq_w++, kvq_acc);
        kvq_acc = 0u;
        kvq_n = 0u;
    }
}

// Writes the row kvq_src(0 .. hd-1) as type t at word w0: ggml's reference
// quantizers per block (vkv_kv_encode_row), `precise` so that no product is
// fused into an fma the C code does not do.
void kvq_write_row(uint t, uint hd, uint w0)
{
    kvq_acc = 0u;
    kvq_n = 0u;
    kvq_w = w0;
    if (t == KVT_F32) {
        for (uint e = 0u; e < hd; e++) kvq_out(w0 + e, floatBitsToUint(kvq_src(e)));
        return;
    }
    if (t == KVT_F16) {
        for (uint e = 0u; e < hd; e += 2u) kvq_out(w0 + e / 2u, kvq_f32_to_f16(kvq_src(e)) | (kvq_f32_to_f16(kvq_src(e + 1u)) << 16));
        return;
    }
    for (uint b = 0u; 32u * b < hd; b++) {
        uint n = min(32u, hd - 32u * b), e0 = 32u * b;
        if (t == KVT_Q8_0) {
            float amax = 0.0;
            for (uint j = 0u; j < n; j++) amax = max(amax, abs(kvq_src(e0 + j)));
            precise float d = amax / 127.0;
            precise float id = d != 0.0 ? 1.0 / d : 0.0;
            uint d16 = kvq_f32_to_f16(d);
            kvq_put_byte(d16);
            kvq_put_byte(d16 >> 8);
            for (uint j = 0u; j < n; j++) {
                precise float v = kvq_src(e0 + j) * id;
                kvq_put_byte(uint(kvq_round_away(v)));
            }
        } else { // q4_0: d = the signed value of largest magnitude / -8 (the first of ties)
            float amax = 0.0, mx = 0.0;
            for (uint j = 0u; j < n; j++) {
                float x = kvq_src(e0 + j);
                if (amax < abs(x)) {
                    amax = abs(x);
                    mx = x;
                }
            }
            precise float d = mx / -8.0;
            precise float id = d != 0.0 ? 1.0 / d : 0.0;
            uint d16 = kvq_f32_to_f16(d);
            kvq_put_byte(d16);
            kvq_put_byte(d16 >> 8);
            for (uint j = 0u; j < n / 2u; j++) {
                precise float v0 = kvq_src(e0 + j) * id + 8.5, v1 = kvq_src(e0 + j + n / 2u) * id + 8.5;
                kvq_put_byte(uint(clamp(int(v0), 0, 15)) | (uint(clamp(int(v1), 0, 15)) << 4));
            }
        }
    }
    while (kvq_n != 0u) kvq_put_byte(0u); // the row's padding
}
#endif
