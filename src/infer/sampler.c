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
    return VKV_OK;
}

vkv_status vkv_sampler_create(const vkv_sampler_params *p, int32_t n_vocab, vkv_sampler **out)
{
    *out = NULL;
    vkv_status st = vkv_sampler_validate(p);
    if (st) return st;
    vkv_sampler *s = calloc(1, sizeof *s);
    if (!s) return vkv_error(VKV_ERR_OOM, "out of host memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = vkv_rng_new(p->seed);
    s->recent = malloc(sizeof *s->recent * (size_t)(p->repeat_last_n ? p->repeat_last_n : 1));
    s->work = malloc(sizeof *s->work * (size_t)n_vocab);
    s->order = malloc(sizeof *s->order * (size_t)n_vocab);
    if (!s->recent || !s->work || !s->order) {
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
    free(s);
}

void vkv_sampler_accept(vkv_sampler *s, int32_t id)
{
    if (!s->p.repeat_last_n) return;
    s->recent[s->recent_head] = id;
    s->recent_head = (s->recent_head + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
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

int32_t vkv_sampler_sample(vkv_sampler *s, const float *logits)
{
    int32_t n = s->n_vocab;
    float *w = s->work;
    memcpy(w, logits, sizeof *w * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        if (isnan(w[i])) w[i] = -INFINITY;
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
    if (s->p.temperature == 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (w[i] > w[best]) best = i;
        return best;
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
    int32_t pick = s->order[keep - 1];
    for (int32_t i = 0; i < keep; i++) {
        u -= prob[i];
        if (u < 0) { pick = s->order[i]; break; }
    }
    free(prob);
    return pick;
}
