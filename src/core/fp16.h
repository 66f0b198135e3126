/* IEEE half and bfloat16 <-> float conversion (round to nearest even). */
#ifndef VKV_FP16_H
#define VKV_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t vkv_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float vkv_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float vkv_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return vkv_bits_f32(sign);
        /* subnormal: value = mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return vkv_bits_f32(sign | 0x7f800000u | (mant << 13));
    return vkv_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t vkv_f32_to_fp16(float f)
{
    uint32_t x = vkv_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan; keep nan quiet and non-zero */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < half the smallest subnormal */
        uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = absx - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t r = q & 0x1fffu;
    q >>= 13;
    if (r > 0x1000u || (r == 0x1000u && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

static inline float vkv_bf16_to_f32(uint16_t b) { return vkv_bits_f32((uint32_t)b << 16); }

static inline uint16_t vkv_f32_to_bf16(float f)
{
    uint32_t x = vkv_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
