// Reading rows of a KV cache stored as f16 (KV_F16: two halves per 32-bit
// word) or f32 (KV_F32), and undoing RoPE on a key. The includer declares the
// buffers `uint k_words[]` (and `uint v_words[]` where needed) and the push
// constants `pc.neox`, `pc.n_rot`.


#if defined(KV_F16)
#define KV_ROW_WORDS(hd) ((hd) / 2u)
float k_elem(uint slot, uint hd, uint d)
{
    vec2 pair = unpackHalf2x16(k_words[(slot * hd + d) >> 1]);
    return (d & 1u) == 0u ? pair.x : pair.y;
}
#elif defined(KV_F32)
#define KV_ROW_WORDS(hd) (hd)
float k_elem(uint slot, uint hd, uint d) { return uintBitsToFloat(k_words[slot * hd + d]); }
#else
#error "define KV_F16 or KV_F32"
#endif

// sin/cos of a possibly large angle, reduced to [-pi, pi] first (as rope.comp).
vec2 kv_sincos(float a)
{
    const float TWO_PI_HI = 6.28318548202514648;
    const float TWO_PI_LO = -1.7484555314695172e-7;
    float k = round(a * 0.15915494309189535);
    float r = fma(-k, TWO_PI_HI, a);
    r = fma(-k, TWO_PI_LO, r);
    return vec2(sin(r), cos(r));
}

// Element d of R_pos^-1 k for the key at `slot`: the inverse rotation of the
// pair d belongs to (interleaved or NeoX), dims past n_rot unchanged.
float unrope_elem(uint slot, uint hd, uint d, int pos)
{
    uint half_rot = pc.n_rot / 2u;
    if (d >= pc.n_rot) return k_elem(slot, hd, d);
    uint pair, partner;
    bool first;
    if (pc.neox != 0u) {
        first = d < half_rot;
        pair = first ? d : d - half_rot;
        partner = first ? d + half_rot : d - half_rot;
    } else {
        first = (d & 1u) == 0u;
        pair = d >> 1;
        partner = first ? d + 1u : d - 1u;
    }
    vec2 sc = kv_sincos(float(pos) * inv_freq[pair]);
    float s = -sc.x, c = sc.y; // rotate by -theta
    float x = k_elem(slot, hd, d), y = k_elem(slot, hd, partner);
    // forward: a' = a c - b s, b' = a s + b c (with the pair (a, b) = (first, second))
    return first ? x * c - y * s : y * s + x * c;
}
