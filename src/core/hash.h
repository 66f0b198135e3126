/* 64-bit FNV-1a: the model's identity in .vkcal files (hashed over the K and
 * V weights as uploaded) and the .vkcal checksum. */
#ifndef VKV_HASH_H
#define VKV_HASH_H

#include <stdint.h>

#define VKV_FNV1A_INIT 0xcbf29ce484222325ull

/* Continues from h (start with VKV_FNV1A_INIT): hashing a buffer in pieces
 * gives the hash of the whole. */
static inline uint64_t vkv_fnv1a(uint64_t h, const void *data, uint64_t n)
{
    const uint8_t *p = data;
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif
