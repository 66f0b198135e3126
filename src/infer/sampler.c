#include "infer/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct vkv_sampler {
    vkv_sampler_params p;
    int32_t n_vocab;
    vkv_rng rng;
    int32_t *recent;     /* ring of the last repeat_last_n tokens */
    int32_t n_recent, recent_head;
    float *work;         /* [n_vocab] adjusted logits */
    int32_t *order;      /* [n_vocab] candidate ids */
    uint32_t *counts;    /* [n_vocab] times each token was generated; NULL without presence/frequency penalties */
    vkv_logit_bias *bias;/* [p.n_logit_bias] */
};

vkv_sampler_params vkv_sampler_defaults(void)
{
    return (vkv_sampler_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 42};
}

vkv_status vkv_sampler_validate(const vkv_sampler_params *p)
{
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return vkv_error(VKV_ERR_ARG, "temperature must be >= 0 (got %g)", p->temperature);
    if (p->top_k < 0) return vkv_error(VKV_ERR_ARG, "top-k must be >= 0 (got %d)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) return vkv_error(VKV_ERR_ARG, "top-p must be in (0, 1] (got %g)", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) return vkv_error(VKV_ERR_ARG, "min-p must be in [0, 1] (got %g)", p->min_p);
    if (!(p->repeat_penalty > 0) || !isfinite(p->repeat_penalty))
        return vkv_error(VKV_ERR_ARG, "repeat penalty must be > 0 (got %g)", p->repeat_penalty);
    if (p->repeat_last_n < 0) return vkv_error(VKV_ERR_ARG, "repeat-last-n must be >= 0 (got %d)", p->repeat_last_n);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return vkv_error(VKV_ERR_ARG, "presence penalty must be in [-2, 2] (got %g)", p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return vkv_error(VKV_ERR_ARG, "frequency penalty must be in [-2, 2] (got %g)", p->frequency_penalty);
    for (size_t i = 0; i < p->n_logit_bias; i++)
        if (!(p->logit_bias[i].bias >= -100 && p->logit_bias[i].bias <= 100))
            return vkv_error(VKV_ERR_ARG, "logit bias of token %d must be in [-100, 100] (got %g)", p->logit_bias[i].id,
                             p->logit_bias[i].bias);
    return VKV_OK;
}

vkv_status vkv_sampler_validate_vocab(const vkv_sampler_params *p, int32_t n_vocab)
{
    for (size_t i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].id < 0 || p->logit_bias[i].id >= n_vocab)
            return vkv_error(VKV_ERR_ARG, "logit bias names token %d, outside the vocabulary (0..%d)",
                             p->logit_bias[i].id, n_vocab - 1);
    return VKV_OK;
}

vkv_status vkv_sampler_create(const vkv_sampler_params *p, int32_t n_vocab, vkv_sampler **out)
{
    *out = NULL;
    vkv_status st = vkv_sampler_validate(p);
    if (st || (st = vkv_sampler_validate_vocab(p, n_vocab))) return st;
    vkv_sampler *s = calloc(1, sizeof *s);
    if (!s) return vkv_error(VKV_ERR_OOM, "out of host memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = vkv_rng_new(p->seed);
    s->recent = malloc(sizeof *s->recent * (size_t)(p->repeat_last_n ? p->repeat_last_n : 1));
    s->work = malloc(sizeof *s->work * (size_t)n_vocab);
    s->order = malloc(sizeof *s->order * (size_t)n_vocab);
    bool penalties = p->presence_penalty != 0 || p->frequency_penalty != 0;
    if (penalties) s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    if (p->n_logit_bias && (s->bias = malloc(sizeof *s->bias * p->n_logit_bias)))
        memcpy(s->bias, p->logit_bias, sizeof *s->bias * p->n_logit_bias);
    s->p.logit_bias = s->bias;
    if (!s->recent || !s->work || !s->order || (penalties && !s->counts) || (p->n_logit_bias && !s->bias)) {
        vkv_sampler_free(s);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    *out = s;
    return VKV_OK;
}

void vkv_sampler_free(vkv_sampler *s)
{
    if (!s) return;
    free(s->recent);
    free(s->work);
    free(s->order);
    free(s->counts);
    free(s->bias);
    free(s);
}

void vkv_sampler_accept(vkv_sampler *s, int32_t id)
{
    if (!s->p.repeat_last_n) return;
    s->recent[s->recent_head] = id;
    s->recent_head = (s->recent_head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

void vkv_sampler_accept_generated(vkv_sampler *s, int32_t id)
{
    vkv_sampler_accept(s, id);
    if (s->counts && id >= 0 && id < s->n_vocab) s->counts[id]++;
}

static const float *sort_keys; /* qsort has no context argument; sampling is single-threaded per process */

/* Descending by value, ascending id on ties: deterministic. */
static int by_logit_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float fx = sort_keys[x], fy = sort_keys[y];
    if (fx != fy) return fx > fy ? -1 : 1;
    return x < y ? -1 : x > y;
}

int32_t vkv_sampler_sample(vkv_sampler *s, const float *logits) { return vkv_sampler_sample_masked(s, logits, NULL); }

int32_t vkv_sampler_sample_masked(vkv_sampler *s, const float *logits, const bool *allowed)
{
    int32_t n = s->n_vocab;
    float *w = s->work;
    memcpy(w, logits, sizeof *w * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        if (isnan(w[i]) || (allowed && !allowed[i])) w[i] = -INFINITY;
    if (s->p.repeat_penalty != 1.0f)
        for (int32_t r = 0; r < s->n_recent; r++) {
            int32_t id = s->recent[r];
            if (id < 0 || id >= n) continue;
            /* A token repeated several times in the window is penalised once. */
            bool seen = false;
            for (int32_t q = 0; q < r && !seen; q++) seen = s->recent[q] == id;
            if (seen) continue;
            w[id] = w[id] > 0 ? w[id] / s->p.repeat_penalty : w[id] * s->p.repeat_penalty;
        }
    if (s->counts)
        for (int32_t i = 0; i < n; i++)
            if (s->counts[i])
                w[i] -= (float)s->counts[i] * s->p.frequency_penalty + s->p.presence_penalty;
    for (size_t b = 0; b < s->p.n_logit_bias; b++) w[s->bias[b].id] += s->bias[b].bias;
    if (s->p.temperature == 0) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++)
            if ((allowed ? allowed[i] : w[i] > -INFINITY) && (best < 0 || w[i] > w[best])) best = i;
        return best < 0 ? 0 : best;
    }
    for (int32_t i = 0; i < n; i++) s->order[i] = i;
    sort_keys = w;
    qsort(s->order, (size_t)n, sizeof *s->order, by_logit_desc);
    int32_t k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    /* softmax over the top k at temperature T */
    double mx = w[s->order[0]], sum = 0;
    double *prob = malloc(sizeof *prob * (size_t)k);
    if (!prob) return s->order[0];
    for (int32_t i = 0; i < k; i++) sum += prob[i] = exp(((double)w[s->order[i]] - mx) / s->p.temperature);
    for (int32_t i = 0; i < k; i++) prob[i] /= sum;
    /* top-p: the smallest prefix whose mass reaches p; min-p: relative floor */
    int32_t keep = k;
    double cum = 0;
    for (int32_t i = 0; i < k; i++) {
        cum += prob[i];
        if (cum >= s->p.top_p) { keep = i + 1; break; }
    }
    int32_t keep_min = 1;
    while (keep_min < keep && prob[keep_min] >= s->p.min_p * prob[0]) keep_min++;
    keep = keep_min;
    double total = 0;
    for (int32_t i = 0; i < keep; i++) total += prob[i];
    double u = vkv_rng_unit(&s->rng) * total;
    int32_t pick = s->order[0];
    for (int32_t i = 0; i < keep; i++) {
        if (prob[i] > 0) pick = s->order[i]; /* rounding left u >= 0 at the end: the last possible token */
        u -= prob[i];
        if (u < 0) break;
    }
    free(prob);
    return pick;
}

double vkv_log_softmax_top(const float *logits, int32_t n, int32_t id, uint32_t k, int32_t *top_ids, float *top_lp)
{
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double z = 0;
    for (int32_t i = 0; i < n; i++) z += exp((double)logits[i] - mx);
    const double log_z = mx + log(z);
    if (k > 32) k = 32;
    if (k > (uint32_t)n) k = (uint32_t)n;
    /* the k largest by insertion into a short sorted list: k <= 32, one pass */
    uint32_t have = 0;
    for (int32_t i = 0; i < n && k; i++) {
        float v = logits[i];
        if (have == k && !(v > logits[top_ids[k - 1]])) continue;
        uint32_t at = have < k ? have++ : k - 1;
        while (at > 0 && v > logits[top_ids[at - 1]]) {
            top_ids[at] = top_ids[at - 1];
            at--;
        }
        top_ids[at] = i;
    }
    for (uint32_t j = 0; j < have; j++) top_lp[j] = (float)((double)logits[top_ids[j]] - log_z);
    return (double)logits[id] - log_z;
}
