/* Token sampling from logits: repetition penalty, top-k, temperature, top-p,
 * min-p, then a draw from a seeded generator (greedy when temperature is 0).
 * The same seed and inputs give the same tokens. */
#ifndef VKV_SAMPLER_H
#define VKV_SAMPLER_H

#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

typedef struct vkv_sampler_params {
    float temperature;       /* 0 = greedy (argmax; ties -> lowest id) */
    int32_t top_k;           /* 0 = off */
    float top_p;             /* 1 = off */
    float min_p;             /* 0 = off: drop tokens with p < min_p * p_max */
    float repeat_penalty;    /* 1 = off: logits of recent tokens divided (if > 0) or multiplied */
    int32_t repeat_last_n;   /* how many recent tokens the penalty looks at */
    uint64_t seed;
} vkv_sampler_params;

vkv_sampler_params vkv_sampler_defaults(void);
/* Checks every value's range; the message names the bad one. */
vkv_status vkv_sampler_validate(const vkv_sampler_params *p);

typedef struct vkv_sampler vkv_sampler;
vkv_status vkv_sampler_create(const vkv_sampler_params *p, int32_t n_vocab, vkv_sampler **out);
void vkv_sampler_free(vkv_sampler *s);
/* Remembers a token for the repetition penalty (prompt and generated). */
void vkv_sampler_accept(vkv_sampler *s, int32_t id);
/* Picks the next token from logits[n_vocab] (not modified). */
int32_t vkv_sampler_sample(vkv_sampler *s, const float *logits);

#endif
