/* The sampler's time per token on a vocabulary of real size (152,064: the
 * Qwen2/Qwen3 one), for the settings servers and `vkvector run` use, each
 * row printed as it lands. Synthetic logits (Gaussian, sigma 2.5: flatter
 * than a trained model's, so the top-p rows are a worst case). A benchmark,
 * not a test: `meson test -C build --benchmark sampler`.
 *
 *   bench_sampler [N_VOCAB] [TOKENS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/rng.h"
#include "infer/sampler.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const int32_t n = argc > 1 ? atoi(argv[1]) : 152064;
    const int tokens = argc > 2 ? atoi(argv[2]) : 100;
    if (n < 2 || tokens < 1) {
        fprintf(stderr, "usage: bench_sampler [N_VOCAB >= 2] [TOKENS >= 1]\n");
        return 2;
    }
    float *logits = malloc(sizeof *logits * (size_t)n);
    if (!logits) return 1;
    vkv_rng g = vkv_rng_new(1);
    for (int32_t i = 0; i < n; i++) { /* Box-Muller */
        double u = 1 - vkv_rng_unit(&g), v = vkv_rng_unit(&g);
        logits[i] = (float)(2.5 * sqrt(-2 * log(u)) * cos(2 * M_PI * v));
    }
    const struct { const char *name; float t, top_p, min_p; int32_t top_k; } rows[] = {
        {"OpenAI's default (temperature 1, no cut)", 1, 1, 0, 0},
        {"vkvector run's (0.8, top_k 40, top_p 0.95, min_p 0.05)", 0.8f, 0.95f, 0.05f, 40},
        {"top_p 0.9", 1, 0.9f, 0, 0},
        {"min_p 0.05", 1, 1, 0.05f, 0},
        {"greedy", 0, 1, 0, 0},
    };
    printf("%d-token vocabulary, %d tokens a row\n", n, tokens);
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        vkv_sampler_params p = vkv_sampler_defaults();
        p.temperature = rows[r].t;
        p.top_p = rows[r].top_p;
        p.min_p = rows[r].min_p;
        p.top_k = rows[r].top_k;
        vkv_sampler *s;
        if (vkv_sampler_create(&p, n, &s)) return 1;
        double t0 = now_s();
        long sum = 0;
        for (int i = 0; i < tokens; i++) sum += vkv_sampler_sample(s, logits);
        printf("%-58s %8.3f ms a token (id sum %ld)\n", rows[r].name, (now_s() - t0) * 1e3 / tokens, sum);
        fflush(stdout);
        vkv_sampler_free(s);
    }
    free(logits);
    return 0;
}
