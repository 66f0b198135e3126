/* RoPE's host-side math (see rope.h), in double. */
#include "core/rope.h"

#include <math.h>

#define ROPE_PI 3.14159265358979323846

double vkv_rope_theta(const vkv_rope_params *p, int32_t pos, uint32_t pair)
{
    const double freq = pow((double)p->freq_base, -2.0 * pair / p->n_rot);
    const double factor = p->freq_factors ? p->freq_factors[pair] : 1.0;
    return (double)pos * p->freq_scale * freq / factor;
}

void vkv_rope_llama3_factors(uint32_t n_rot, float freq_base, float factor, float low_freq_factor,
                             float high_freq_factor, uint32_t original_ctx, float *factors)
{
    const double low_freq_wavelen = (double)original_ctx / low_freq_factor;
    const double high_freq_wavelen = (double)original_ctx / high_freq_factor;
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        const double freq = pow((double)freq_base, -2.0 * i / n_rot);
        const double wavelen = 2.0 * ROPE_PI / freq;
        double f;
        if (wavelen < high_freq_wavelen) {
            f = 1.0; /* high frequencies: unscaled */
        } else if (wavelen > low_freq_wavelen) {
            f = factor; /* low frequencies: fully interpolated */
        } else { /* blend linearly in 1/divisor; continuous at both ends */
            const double smooth = (original_ctx / wavelen - low_freq_factor) /
                                  ((double)high_freq_factor - low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        factors[i] = (float)f;
    }
}
