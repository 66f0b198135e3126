#include "ref/ref_vector.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_attn.h"

void vkv_ref_unrope_row(const vkv_rope_params *rope, const float *inv_freq, const float *k, int32_t pos, float *out)
{
    uint32_t half = rope->n_rot / 2;
    memcpy(out, k, sizeof *out * rope->head_dim);
    for (uint32_t i = 0; i < half; i++) {
        uint32_t a = rope->mode == VKV_ROPE_NEOX ? i : 2 * i, b = rope->mode == VKV_ROPE_NEOX ? i + half : 2 * i + 1;
        /* The angle in f32 as the GPU forms it, the rotation in double. */
        float theta = (float)pos * inv_freq[i];
        double c = cos((double)theta), s = -sin((double)theta);
        out[a] = (float)(k[a] * c - k[b] * s);
        out[b] = (float)(k[a] * s + k[b] * c);
    }
}

static void cache_row(vkv_dtype t, const void *cache, uint32_t n_ctx, uint32_t hd, uint32_t h, uint32_t j, float *row)
{
    for (uint32_t d = 0; d < hd; d++) row[d] = vkv_kv_cache_get(t, cache, n_ctx, hd, h, j, d);
}

void vkv_ref_vector_residual(const vkv_rope_params *rope, const float *inv_freq, vkv_dtype kv_type, const void *k,
                             const void *v, uint32_t n_kv_head, uint32_t n_ctx, uint32_t hd, uint32_t n,
                             uint32_t map_shifts, const float *w, const int32_t *pos, float *eps)
{
    const uint32_t S = map_shifts ? map_shifts : 1;
    float *kr = malloc(sizeof *kr * hd), *ku = malloc(sizeof *ku * hd * S), *vr = malloc(sizeof *vr * hd);
    for (uint32_t h = 0; h < n_kv_head; h++)
        for (uint32_t j = 0; j < n; j++) {
            for (uint32_t s = 0; s < S; s++) {
                uint32_t src = (h + s) % n_kv_head;
                cache_row(kv_type, k, n_ctx, hd, src, j, kr);
                vkv_ref_unrope_row(rope, inv_freq, kr, pos ? pos[(size_t)src * n + j] : (int32_t)j, ku + (size_t)s * hd);
            }
            cache_row(kv_type, v, n_ctx, hd, h, j, vr);
            double e = 0;
            for (uint32_t r = 0; r < hd; r++) {
                double pred = 0;
                for (uint32_t s = 0; s < S; s++)
                    for (uint32_t c = 0; c < hd; c++)
                        pred += (double)w[(((size_t)s * n_kv_head + h) * hd + r) * hd + c] * ku[(size_t)s * hd + c];
                double d = vr[r] - pred;
                e += d * d;
            }
            eps[(size_t)h * n + j] = (float)e;
        }
    free(kr);
    free(ku);
    free(vr);
}

void vkv_ref_vector_head_mean(const float *x, uint32_t rows, uint32_t n, float *out)
{
    for (uint32_t j = 0; j < n; j++) {
        float sum = 0.0f;
        for (uint32_t h = 0; h < rows; h++) sum += x[(size_t)h * n + j];
        out[j] = sum / (float)rows;
    }
}

/* One row from a plain cache of type src_t to a tiered buffer of type dst_t:
 * the bytes, or decoded and re-encoded (quantized tiers). */
static void move_row(vkv_dtype src_t, const char *src, vkv_dtype dst_t, char *dst, uint32_t hd)
{
    float x[256];
    if (src_t == dst_t) {
        memcpy(dst, src, vkv_kv_row_bytes(src_t, hd));
        return;
    }
    vkv_kv_decode_row(src_t, hd, src, x);
    vkv_kv_encode_row(dst_t, hd, x, dst);
}

void vkv_ref_kv_convert_rows(vkv_dtype src_t, const void *src, uint64_t src_row0, vkv_dtype dst_t, void *dst,
                             uint64_t dst_row0, uint32_t n_rows, uint32_t hd)
{
    const size_t sb = vkv_kv_row_bytes(src_t, hd), db = vkv_kv_row_bytes(dst_t, hd);
    for (uint32_t r = 0; r < n_rows; r++)
        move_row(src_t, (const char *)src + (src_row0 + r) * sb, dst_t, (char *)dst + (dst_row0 + r) * db, hd);
}

void vkv_ref_kv_compact(vkv_dtype kv_type, vkv_dtype k_tier, vkv_dtype v_tier, const void *k, const void *v,
                        uint32_t n_kv_head, uint32_t n_ctx, uint32_t hd, uint32_t n, const uint8_t *tiers,
                        vkv_tier_head *meta, void *k_out, void *v_out, int32_t *pos_out)
{
    const size_t row = vkv_kv_row_bytes(kv_type, hd), k_row = vkv_kv_row_bytes(k_tier, hd);
    const size_t v_row = vkv_kv_row_bytes(v_tier, hd);
    for (uint32_t h = 0; h < n_kv_head; h++) {
        uint32_t n_ret = 0, n_apx = 0;
        for (uint32_t j = 0; j < n; j++) n_ret += tiers[(size_t)h * n + j] == VKV_TIER_RETAINED;
        uint32_t r = 0, a = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint8_t t = tiers[(size_t)h * n + j];
            if (t == VKV_TIER_EVICTED) continue;
            uint32_t slot = t == VKV_TIER_RETAINED ? r : n_ret + a;
            const char *src_k = (const char *)k + ((size_t)h * n_ctx + j) * row;
            move_row(kv_type, src_k, k_tier, (char *)k_out + (size_t)(meta[h].k_off + slot) * k_row, hd);
            pos_out[meta[h].p_off + slot] = (int32_t)j;
            if (t == VKV_TIER_RETAINED) {
                const char *src_v = (const char *)v + ((size_t)h * n_ctx + j) * row;
                move_row(kv_type, src_v, v_tier, (char *)v_out + (size_t)(meta[h].v_off + r) * v_row, hd);
                r++;
            } else {
                a++;
            }
        }
        n_apx = a;
        meta[h].n_ret = n_ret;
        meta[h].n_apx = n_apx;
    }
}

static float row_get(vkv_dtype t, const void *base, size_t slot, uint32_t hd, uint32_t d)
{
    /* a tiered buffer is a plain array of rows: treat it as one head */
    return vkv_kv_cache_get(t, base, (uint32_t)(slot + 1), hd, 0, (uint32_t)slot, d);
}

void vkv_ref_attention_tiered(const vkv_tiered_attn_params *p, const vkv_rope_params *rope, const float *inv_freq,
                              const vkv_tier_head *meta, const float *q, const void *k, const void *v,
                              const int32_t *pos, const float *w, float *out)
{
    uint32_t hd = p->head_dim, group = p->n_head / p->n_kv_head, S = p->map_shifts ? p->map_shifts : 1;
    float *kr = malloc(sizeof *kr * hd), *ku = malloc(sizeof *ku * hd);
    for (uint32_t i = 0; i < p->n_q; i++)
        for (uint32_t hq = 0; hq < p->n_head; hq++) {
            uint32_t h = hq / group;
            const vkv_tier_head *m = &meta[h];
            uint32_t n_comp = m->n_ret + m->n_apx, n_keys = n_comp + p->n_new0 + i + 1;
            const float *qi = q + ((size_t)i * p->n_head + hq) * hd;
            double *s = malloc(sizeof *s * n_keys), mx = -INFINITY;
            for (uint32_t t = 0; t < n_keys; t++) {
                double dot = 0;
                for (uint32_t d = 0; d < hd; d++) dot += (double)qi[d] * row_get(p->k_type, k, m->k_off + t, hd, d);
                s[t] = dot * p->scale;
                if (s[t] > mx) mx = s[t];
            }
            double z = 0;
            for (uint32_t t = 0; t < n_keys; t++) z += s[t] = exp(s[t] - mx);
            double acc[512] = {0};
            for (uint32_t t = 0; t < n_keys; t++) {
                double pr = s[t] / z;
                if (t >= m->n_ret && t < n_comp) { /* approximated: sum_s W[s, h] R^-1 K of head (h+s) */
                    for (uint32_t sh = 0; sh < S; sh++) {
                        const vkv_tier_head *src = &meta[(h + sh) % p->n_kv_head];
                        for (uint32_t d = 0; d < hd; d++) kr[d] = row_get(p->k_type, k, src->k_off + t, hd, d);
                        vkv_ref_unrope_row(rope, inv_freq, kr, pos[m->p_off + t], ku);
                        const float *blk = w + ((size_t)sh * p->n_kv_head + h) * hd * hd;
                        for (uint32_t r = 0; r < hd; r++) {
                            double vh = 0;
                            for (uint32_t c = 0; c < hd; c++) vh += (double)blk[(size_t)r * hd + c] * ku[c];
                            acc[r] += pr * vh;
                        }
                    }
                } else {
                    uint32_t vs = m->v_off + (t < m->n_ret ? t : t - m->n_apx);
                    for (uint32_t d = 0; d < hd; d++) acc[d] += pr * row_get(p->v_type, v, vs, hd, d);
                }
            }
            for (uint32_t d = 0; d < hd; d++) out[((size_t)i * p->n_head + hq) * hd + d] = (float)acc[d];
            free(s);
        }
    free(kr);
    free(ku);
}

void vkv_ref_vector_pool_scores(const uint32_t *pool, const float *eps, uint32_t total, float *s)
{
    for (uint32_t i = 0; i < total; i++) {
        float e = eps[i];
        s[i] = !pool[i] ? -INFINITY : isnan(e) ? -FLT_MAX : (-e > -FLT_MAX ? -e : -FLT_MAX);
    }
}

void vkv_ref_vector_pool_extend(const uint32_t *base, const float *scores, uint32_t total, float *s)
{
    for (uint32_t i = 0; i < total; i++) {
        float x = scores[i];
        s[i] = base[i] ? INFINITY : isnan(x) ? -INFINITY : (x < FLT_MAX ? x : FLT_MAX);
    }
}

void vkv_ref_vector_assign_tiers(const uint32_t *pool, const uint32_t *apx, uint32_t total, uint32_t *tiers)
{
    for (uint32_t i = 0; i < total; i++)
        tiers[i] = !pool[i] ? VKV_TIER_EVICTED : apx[i] ? VKV_TIER_APPROXIMATED : VKV_TIER_RETAINED;
}
