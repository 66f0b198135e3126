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
    int32_t *order;      /* [n_vocab] candidate ids, in order */
    double *prob;        /* [n_vocab] their weights */
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
    s->prob = malloc(sizeof *s->prob * (size_t)n_vocab);
    bool penalties = p->presence_penalty != 0 || p->frequency_penalty != 0;
    if (penalties) s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    if (p->n_logit_bias && (s->bias = malloc(sizeof *s->bias * p->n_logit_bias)))
        memcpy(s->bias, p->logit_bias, sizeof *s->bias * p->n_logit_bias);
    s->p.logit_bias = s->bias;
    if (!s->recent || !s->work || !s->order || !s->prob || (penalties && !s->counts) || (p->n_logit_bias && !s->bias)) {
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
    free(s->prob);
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

/* a comes before b among the candidates: a larger logit, then a lower id.
 * A total order, so the top candidates are the same tokens whatever finds them. */
static bool before(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

/* h[0, m) a heap whose root is its last candidate; restores it below i. */
static void sift_down(const float *w, int32_t *h, int32_t m, int32_t i)
{
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= m) return;
        if (c + 1 < m && before(w, h[c], h[c + 1])) c++; /* the later child */
        if (!before(w, h[i], h[c])) return;
        int32_t t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* The m first candidates of w[0, n) in order into out[0, m): a heap of m
 * over one pass, then heapsort, O(n log m) where sorting the vocabulary
 * took O(n log n) (23 ms a token at 152K tokens). */
static void top_candidates(const float *w, int32_t n, int32_t m, int32_t *out)
{
    for (int32_t i = 0; i < m; i++) out[i] = i;
    for (int32_t i = m / 2 - 1; i >= 0; i--) sift_down(w, out, m, i);
    for (int32_t i = m; i < n; i++)
        if (before(w, i, out[0])) {
            out[0] = i;
            sift_down(w, out, m, 0);
        }
    for (int32_t end = m - 1; end > 0; end--) {
        int32_t t = out[0];
        out[0] = out[end];
        out[end] = t;
        sift_down(w, out, end, 0);
    }
}

/* How many of the first candidates decide top-p and min-p, from one pass
 * over the ids (k == n) that also sums the normaliser *z: the tokens of the log-probability
 * bins (1/16 nat wide, most likely first) up to the one where the mass
 * reaches top_p, or the one holding min-p's floor, whichever comes first.
 * Every token of an earlier bin is more likely than any of a later one, so
 * the ordered prefix that decides is among them. */
#define HEAD_BINS 1024
static int32_t head_size(const float *w, int32_t n, double mx, double T, float top_p, float min_p, double *z)
{
    static _Thread_local uint32_t count[HEAD_BINS];
    static _Thread_local double mass[HEAD_BINS];
    memset(count, 0, sizeof count);
    memset(mass, 0, sizeof mass);
    *z = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = (mx - (double)w[i]) / T, e = exp(-d); /* d: -log of the probability relative to the first's */
        int32_t b = d < (HEAD_BINS - 1) / 16.0 ? (int32_t)(d * 16) : HEAD_BINS - 1;
        count[b]++;
        mass[b] += e;
        *z += e;
    }
    const int32_t floor_bin = min_p > 0 && -log(min_p) * 16 < HEAD_BINS - 1 ? (int32_t)(-log(min_p) * 16) : HEAD_BINS - 1;
    int32_t m = 0;
    double cum = 0;
    for (int32_t b = 0; b < HEAD_BINS; b++) {
        m += (int32_t)count[b];
        cum += mass[b];
        if (b == floor_bin || (top_p < 1 && cum >= top_p * *z)) break;
    }
    return m > 0 ? m : 1;
}

/* A draw from weights p[0, n) (not normalised): the index where u * total
 * falls; rounding that leaves u >= 0 at the end takes the last possible. */
static int32_t draw(vkv_rng *rng, const double *p, int32_t n, double total)
{
    double u = vkv_rng_unit(rng) * total;
    int32_t pick = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] > 0) pick = i;
        u -= p[i];
        if (u < 0) break;
    }
    return pick;
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
    const double T = s->p.temperature;
    const int32_t k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (w[i] > mx) mx = w[i];
    double *prob = s->prob;
    if (k == n && s->p.top_p >= 1 && s->p.min_p <= 0) {
        /* the full distribution (OpenAI's default): no order is needed, a draw over the ids */
        double total = 0;
        for (int32_t i = 0; i < n; i++) total += prob[i] = exp(((double)w[i] - mx) / T);
        return draw(&s->rng, prob, n, total);
    }
    /* The first m candidates in order, m the top k, or the head that decides
     * top-p and min-p: the distribution's head, not the vocabulary, is
     * sorted. Probabilities are over the top k (all: z over every id). */
    double z = 0;
    int32_t m = k < n ? k : head_size(w, n, mx, T, s->p.top_p, s->p.min_p, &z), keep;
    for (;;) {
        top_candidates(w, n, m, s->order);
        if (k < n) { /* the top k exactly: normalise over them */
            z = 0;
            for (int32_t i = 0; i < k; i++) z += exp(((double)w[s->order[i]] - mx) / T);
        }
        for (int32_t i = 0; i < m; i++) prob[i] = exp(((double)w[s->order[i]] - mx) / T) / z;
        /* top-p: the smallest prefix whose mass reaches p; min-p: a floor relative to the first */
        keep = -1;
        double cum = 0;
        for (int32_t i = 0; i < m && keep < 0; i++)
            if ((cum += prob[i]) >= s->p.top_p) keep = i + 1;
        if (keep < 0 && m < k && s->p.top_p < 1 && prob[m - 1] >= s->p.min_p * prob[0]) {
            m = m * 2 < k ? m * 2 : k; /* rounding left the head short of top_p (and of min-p's floor): take more */
            continue;
        }
        if (keep < 0) keep = m;
        int32_t keep_min = 1;
        while (keep_min < keep && prob[keep_min] >= s->p.min_p * prob[0]) keep_min++;
        keep = keep_min;
        break;
    }
    double total = 0;
    for (int32_t i = 0; i < keep; i++) total += prob[i];
    return s->order[draw(&s->rng, prob, keep, total)];
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
