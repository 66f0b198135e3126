/* Token sampling from logits: repetition penalty, OpenAI's presence and
 * frequency penalties, logit bias, a mask of allowed tokens (constrained
 * decoding), then top-k, temperature, top-p, min-p and a draw from a seeded
 * generator (greedy when temperature is 0). The same seed and inputs give the
 * same tokens. */
#ifndef VKV_SAMPLER_H
#define VKV_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

/* OpenAI's logit_bias: a value added to one token's logit before sampling. */
typedef struct vkv_logit_bias {
    int32_t id;
    float bias;              /* [-100, 100]: -100 bans the token, +100 all but forces it */
} vkv_logit_bias;

typedef struct vkv_sampler_params {
    float temperature;       /* 0 = greedy (argmax; ties -> lowest id) */
    int32_t top_k;           /* 0 = off */
    float top_p;             /* 1 = off */
    float min_p;             /* 0 = off: drop tokens with p < min_p * p_max */
    float repeat_penalty;    /* 1 = off: logits of recent tokens divided (if > 0) or multiplied */
    int32_t repeat_last_n;   /* how many recent tokens the penalty looks at */
    /* OpenAI's penalties, in [-2, 2] (0 = off), over the tokens generated so
     * far (vkv_sampler_accept_generated): a token's logit loses
     * count * frequency_penalty + (count > 0) * presence_penalty. */
    float presence_penalty;
    float frequency_penalty;
    const vkv_logit_bias *logit_bias; /* [n_logit_bias], borrowed: the sampler copies it */
    size_t n_logit_bias;
    uint64_t seed;
} vkv_sampler_params;

vkv_sampler_params vkv_sampler_defaults(void);
/* Checks every value's range; the message names the bad one. */
vkv_status vkv_sampler_validate(const vkv_sampler_params *p);
/* And the logit bias's ids against the vocabulary. */
vkv_status vkv_sampler_validate_vocab(const vkv_sampler_params *p, int32_t n_vocab);

typedef struct vkv_sampler vkv_sampler;
vkv_status vkv_sampler_create(const vkv_sampler_params *p, int32_t n_vocab, vkv_sampler **out);
void vkv_sampler_free(vkv_sampler *s);
/* Remembers a prompt token for the repetition penalty. */
void vkv_sampler_accept(vkv_sampler *s, int32_t id);
/* Remembers a generated token: the repetition penalty's window, and the
 * counts of the presence and frequency penalties. */
void vkv_sampler_accept_generated(vkv_sampler *s, int32_t id);
/* Picks the next token from logits[n_vocab] (not modified). */
int32_t vkv_sampler_sample(vkv_sampler *s, const float *logits);
/* The same among the tokens with allowed[id] true (NULL: all); at least one
 * must be. */
int32_t vkv_sampler_sample_masked(vkv_sampler *s, const float *logits, const bool *allowed);

/* log p(id) under softmax(logits[n]) (the model's distribution, before
 * temperature and every adjustment above), in double; and the k most likely
 * tokens (k <= 32; 0: none, and the arrays may be NULL) with theirs into
 * top_ids[k], top_lp[k], most likely first
 * (ties: lower id first). */
double vkv_log_softmax_top(const float *logits, int32_t n, int32_t id, uint32_t k, int32_t *top_ids, float *top_lp);

#endif
