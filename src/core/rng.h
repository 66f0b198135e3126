/* Deterministic pseudo-random numbers (splitmix64): test data, sampling. */
#ifndef VKV_RNG_H
#define VKV_RNG_H

#include <stdint.h>

typedef struct vkv_rng {
    uint64_t state;
} vkv_rng;

static inline vkv_rng vkv_rng_new(uint64_t seed) { return (vkv_rng){seed}; }

static inline uint64_t vkv_rng_u64(vkv_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double vkv_rng_unit(vkv_rng *r) { return (double)(vkv_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Uniform in [lo, hi). */
static inline float vkv_rng_uniform(vkv_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)vkv_rng_unit(r);
}

/* Uniform integer in [0, n). */
static inline uint32_t vkv_rng_below(vkv_rng *r, uint32_t n) { return (uint32_t)(vkv_rng_unit(r) * n); }

#endif
