/* Every scorer on the GPU against its CPU reference (score_ref): for f32 and
 * f16 caches, the scores agree (NMSE <= 1e-7 over the finite entries, forced
 * keeps at exactly the same places) and the top-k selections at
 * p_c in {0.25, 0.5, 0.9}, made on the device from the GPU scores
 * (vkv_op_topk_select) and on the host from the reference scores
 * (vkv_ref_topk_select), are identical.
 *
 * Identical selections from scores that differ in the last bits need data
 * without near-ties at the selection boundary: each case draws random
 * inputs, and redraws (next seed) while some row's k-th and (k+1)-th
 * reference scores are closer than 1e-5 of the row's score range. Exact
 * ties of forced keeps (+inf) and of the exact constants 0 and 1 (KVzip's
 * never-repeated tokens and sinks) and of integers (LagKV's ranks in
 * different partitions) are fine: both sides break them by position.
 *
 * Scorers with a capture (observed, expected, kvzip) get every query: the
 * capture runs over them in uneven pieces, as the prefill's chunks (KVzip:
 * the reconstruction pass's queries after the context, with the repeated
 * keys in the cache), before score_gpu; as during generation, ObservedAttention
 * gets only the last query (its decode_window), ExpectedAttention the last
 * queries and a gathered layer. ExpectedAttention also runs with kvpress's
 * epsilon and without its value norms (use_vnorm=False), and under the
 * compositions of kvpress's evaluation registry (adakv-expected,
 * critical-expected, critical-adakv-expected; CriticalKV gets a random W_o).
 * The global selection (KVzip) is
 * checked against its reference on scores with many ties.
 *
 * Skips (77) when there is no Vulkan device. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "gpu_test.h"
#include "kvlayout/kv_counts.h"
#include "press/press.h"
#include "press/select_global.h"
#include "ref/ref_attn.h"
#include "ref/ref_select.h"
#include "vk/dispatch.h"
#include "vk/ops_select.h"

static vkv_gpu *gpu;

static const double compressions[] = {0.25, 0.5, 0.9};
/* W_o's rows for CriticalKV (a narrow residual stream keeps the reference quick) */
#define PRESS_N_EMBD 48u
#define N_PC 3
#define MAX_ATTEMPTS 20

typedef struct press_shape {
    uint32_t n_head, n_kv_head, head_dim, n, n_ctx;
    uint32_t block; /* KeyDiff block (0 = whole sequence) */
    /* KVzip: the template prefix, the repeated span and the repeat queries after the context */
    uint32_t prefix, span0, span1, n_repeat;
    /* A scorer with a capture as during generation (vkv_press_ops.decode_window):
     * only the last `decode` queries are captured (0 = all of them). */
    uint32_t decode;
} press_shape;

/* ExpectedAttention's vkv_press_params.expected_epsilon / expected_no_vnorm
 * a case runs with (kvpress's defaults: 0, false). */
typedef struct expected_rescale {
    float epsilon;
    bool no_vnorm;
} expected_rescale;

/* Inputs and the reference of one case. */
typedef struct press_data {
    vkv_press_params pp;
    vkv_press_layer in;
    void *k_cache;    /* [n_kv_head, n_ctx, head_dim] of kv_type; slots >= n_keys are NaN */
    void *v_cache;    /* the same for the values */
    float *q;         /* [n_q, n_head, head_dim] f32: the window, or every captured query */
    float *wo;        /* [PRESS_N_EMBD, n_head head_dim] f32 W_o (CriticalKV: vkv_press_ops.needs_wo), else NULL */
    float inv_freq[128]; /* head_dim <= 256 */
    uint32_t n_q, n_keys;
    float *ref;       /* [n_kv_head, n] reference scores */
    uint32_t k[N_PC]; /* tokens kept per KV head at each compression */
} press_data;

static uint32_t kept(const vkv_press_ops *ops, const vkv_press_params *p, double compression_ratio, uint32_t n)
{
    vkv_press_params q = *p;
    q.compression_ratio = compression_ratio;
    /* Layer 1 of 4 for PyramidKV (at these n it falls back to round(n (1 - p_c))). */
    return ops->n_kept ? ops->n_kept(&q, 1, 4, n) : vkv_kv_n_kept(compression_ratio, n);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

/* Whether selecting k of the row cannot flip under last-bit differences:
 * the k-th and (k+1)-th scores apart by 1e-5 of the row's range, or of the
 * k-th score itself when `relative` (one query's weights divided by n - j
 * span many orders of magnitude). */
static bool boundary_is_clear(const float *row, uint32_t n, uint32_t k, float *tmp, bool relative)
{
    if (k == 0 || k >= n) return true;
    float range = 0;
    for (uint32_t j = 0; j < n; j++) {
        tmp[j] = isnan(row[j]) ? -INFINITY : row[j];
        /* FLT_MAX: AdaKV's clamped forced keeps (press/adakv.c), exact like +inf and the forced band */
        if (!vkv_press_is_forced(fabsf(tmp[j])) && tmp[j] != FLT_MAX && fabsf(tmp[j]) > range) range = fabsf(tmp[j]);
    }
    qsort(tmp, n, sizeof *tmp, cmp_desc);
    const float a = tmp[k - 1], b = tmp[k];
    if ((vkv_press_is_forced(a) || a == FLT_MAX || a == 0.0f || a == 1.0f) && a == b)
        return true; /* exact on both sides: broken by position */
    if (a == b && a == floorf(a)) return true; /* LagKV's ranks: exact integers on both sides */
    return a - b > 1e-5f * (relative ? fabsf(a) : range);
}

static void data_free(press_data *d)
{
    free(d->k_cache);
    free(d->v_cache);
    free(d->q);
    free(d->wo);
    free(d->ref);
    memset(d, 0, sizeof *d);
}

/* Draws inputs until the reference selections are clear of near-ties. */
static void data_make(const vkv_press_ops *ops, vkv_dtype kv, const press_shape *s, expected_rescale er,
                      press_data *d)
{
    const bool capture = ops->capture_gpu != NULL;
    const uint32_t window = capture ? 0 : s->n < 64 ? s->n : 64, hd = s->head_dim;
    memset(d, 0, sizeof *d);
    d->n_q = !capture ? window : ops->repeat_pass ? s->n_repeat : s->decode ? s->decode : s->n;
    d->n_keys = ops->repeat_pass ? s->n + s->n_repeat : s->n;
    assert_true(d->n_keys <= s->n_ctx);
    const size_t qn = (size_t)d->n_q * s->n_head * hd, kn = (size_t)d->n_keys * s->n_kv_head * hd;
    const size_t sn = (size_t)s->n_kv_head * s->n;
    d->pp = vkv_press_params_default(0.5f);
    d->pp.block = s->block;
    d->pp.expected_epsilon = er.epsilon;
    d->pp.expected_no_vnorm = er.no_vnorm;
    if (ops->needs_wo) {
        const size_t wn = (size_t)PRESS_N_EMBD * s->n_head * hd;
        vkv_rng wrng = vkv_rng_new(0x5eed2000u + s->n);
        d->wo = malloc(wn * sizeof *d->wo);
        assert_non_null(d->wo);
        for (size_t i = 0; i < wn; i++) d->wo[i] = vkv_rng_uniform(&wrng, -1.0f, 1.0f);
    }
    d->k_cache = malloc(vkv_kv_cache_bytes(kv, s->n_kv_head, s->n_ctx, hd));
    d->v_cache = malloc(vkv_kv_cache_bytes(kv, s->n_kv_head, s->n_ctx, hd));
    d->q = malloc(qn * sizeof *d->q);
    d->ref = malloc(sn * sizeof *d->ref);
    float *src = malloc(kn * sizeof *src), *tmp = malloc(s->n * sizeof *tmp);
    assert_true(d->k_cache && d->v_cache && d->q && d->ref && src && tmp);
    /* Unused slots hold NaN so a kernel reading past the keys poisons its scores. */
    for (uint32_t h = 0; h < s->n_kv_head; h++)
        for (uint32_t j = d->n_keys; j < s->n_ctx; j++)
            for (uint32_t e = 0; e < hd; e++) {
                size_t o = ((size_t)h * s->n_ctx + j) * hd + e;
                if (kv == VKV_F16) ((uint16_t *)d->k_cache)[o] = ((uint16_t *)d->v_cache)[o] = 0x7e00u;
                else ((float *)d->k_cache)[o] = ((float *)d->v_cache)[o] = NAN;
            }
    /* RoPE (ExpectedAttention): interleaved pairs for the f32 cache, NeoX halves for f16. */
    vkv_rope_params rp = {.mode = kv == VKV_F16 ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, .head_dim = hd,
                          .n_rot = hd, .freq_base = 10000.0f, .freq_scale = 1.0f};
    vkv_rope_inv_freq(&rp, d->inv_freq);
    bool clear = false;
    for (uint32_t attempt = 0; attempt < MAX_ATTEMPTS && !clear; attempt++) {
        vkv_rng rng = vkv_rng_new(0x5eed0000u + 977u * attempt + 31u * s->n + kv);
        for (size_t i = 0; i < kn; i++) src[i] = vkv_rng_uniform(&rng, -1.0f, 1.0f);
        for (size_t i = 0; i < qn; i++) d->q[i] = vkv_rng_uniform(&rng, -4.0f, 4.0f);
        /* ExpectedAttention: queries with a mean, so the mean's RoPE averaging matters as much as the covariance */
        if (ops->capture_gpu && !ops->repeat_pass)
            for (size_t i = 0; i < qn; i++) d->q[i] += 3.0f * sinf((float)(i % hd));
        vkv_kv_cache_store(kv, d->k_cache, s->n_kv_head, s->n_ctx, hd, 0, src, d->n_keys);
        for (size_t i = 0; i < kn; i++) src[i] = vkv_rng_uniform(&rng, -1.0f, 1.0f);
        vkv_kv_cache_store(kv, d->v_cache, s->n_kv_head, s->n_ctx, hd, 0, src, d->n_keys);
        d->in = (vkv_press_layer){.layer = 1, .n_layer = 4, .n = s->n, .n_head = s->n_head,
                                  .n_kv_head = s->n_kv_head, .head_dim = hd, .n_ctx = s->n_ctx, .kv_type = kv,
                                  .window = window, .k_host = d->k_cache, .v_host = d->v_cache,
                                  .q_window_host = capture ? NULL : d->q, .n_rot = hd,
                                  .rope_neox = rp.mode == VKV_ROPE_NEOX, .inv_freq_host = d->inv_freq,
                                  .prefix = s->prefix, .span0 = s->span0, .span1 = s->span1,
                                  .q_pos0 = ops->repeat_pass ? s->n : s->decode ? s->n - d->n_q : 0,
                                  .n_q = d->n_q, .q_host = capture ? d->q : NULL,
                                  .n_embd = d->wo ? PRESS_N_EMBD : 0, .wo_host = d->wo};
        assert_int_equal(ops->score_ref(&d->pp, &d->in, d->ref), VKV_OK);
        clear = true;
        for (int c = 0; c < N_PC; c++) {
            d->k[c] = kept(ops, &d->pp, compressions[c], s->n);
            for (uint32_t h = 0; h < s->n_kv_head && clear; h++)
                clear = boundary_is_clear(d->ref + (size_t)h * s->n, s->n, d->k[c], tmp, s->decode > 0);
        }
    }
    free(src);
    free(tmp);
    if (!clear) fail_msg("%s: no draw in %d without a near-tie at the selection boundary", ops->name, MAX_ATTEMPTS);
}

static vkv_buffer *upload(const void *data, uint64_t bytes, const char *what)
{
    vkv_buffer *b;
    assert_int_equal(vkv_buffer_create(gpu, bytes ? bytes : 16, VKV_MEM_DEVICE, what, &b), VKV_OK);
    if (data && bytes) assert_int_equal(vkv_buffer_upload(gpu, b, 0, data, bytes), VKV_OK);
    return b;
}

/* One scorer on one cache type: scores and selections against the reference. */
static void check_press_rescaled(const char *name, vkv_dtype kv, const press_shape *s, expected_rescale er)
{
    const vkv_press_ops *ops = vkv_press_find(name);
    assert_non_null(ops);
    press_data d;
    data_make(ops, kv, s, er, &d);
    const size_t sn = (size_t)s->n_kv_head * s->n;
    const uint64_t row_bytes = 4ull * s->n_head * s->head_dim, qb = row_bytes * d.n_q;
    const uint64_t cache_bytes = vkv_kv_cache_bytes(kv, s->n_kv_head, s->n_ctx, s->head_dim);
    vkv_buffer *kb = upload(d.k_cache, cache_bytes, "K cache"), *vb = upload(d.v_cache, cache_bytes, "V cache");
    vkv_buffer *qbuf = upload(d.q, qb, "queries");
    vkv_buffer *fb = upload(d.inv_freq, 2ull * s->head_dim, "RoPE frequencies");
    vkv_buffer *wob = upload(d.wo, d.wo ? 4ull * PRESS_N_EMBD * s->n_head * s->head_dim : 0, "W_o");
    vkv_buffer *scratch = upload(NULL, vkv_press_scratch_bytes(ops, &d.pp, &d.in), "press scratch");
    const uint64_t state_bytes = ops->state_bytes ? ops->state_bytes(&d.pp, &d.in) : 16;
    vkv_buffer *state = upload(NULL, state_bytes, "press state");
    assert_int_equal(vkv_buffer_fill(gpu, state, 0, vkv_buffer_size(state), 0), VKV_OK);
    vkv_buffer *sb = upload(NULL, sn * 4, "scores"), *mb[N_PC];
    for (int c = 0; c < N_PC; c++) mb[c] = upload(NULL, sn * 4, "mask");
    d.in.k = vkv_view_of(kb);
    d.in.v = vkv_view_of(vb);
    d.in.q_window = vkv_view_of(qbuf);
    d.in.scratch = vkv_view_of(scratch);
    d.in.state = vkv_view_of(state);
    d.in.inv_freq = vkv_view_of(fb);
    if (d.wo) d.in.wo = vkv_view_of(wob);

    assert_int_equal(vkv_cmd_begin(gpu), VKV_OK);
    vkv_status st = VKV_OK;
    /* The capture in uneven pieces, as the chunks of a prefill (or of the reconstruction pass). */
    for (uint32_t r0 = 0, piece = 0; ops->capture_gpu && r0 < d.n_q && !st; r0 += piece) {
        static const uint32_t pieces[] = {3, 61, 128, 17, 100};
        piece = pieces[(r0 / 7) % 5];
        if (piece > d.n_q - r0) piece = d.n_q - r0;
        st = ops->capture_gpu(gpu, &d.pp, &d.in, (vkv_view){qbuf, r0 * row_bytes}, piece, d.in.q_pos0 + r0);
    }
    if (!st) st = ops->score_gpu(gpu, &d.pp, &d.in, vkv_view_of(sb));
    for (int c = 0; c < N_PC && !st; c++)
        st = vkv_op_topk_select(gpu, vkv_view_of(sb), s->n_kv_head, s->n, (vkv_view){0}, d.k[c], vkv_view_of(mb[c]));
    vkv_status sub = vkv_cmd_submit(gpu);
    if (st) fail_msg("%s: %s", name, vkv_last_error());
    assert_int_equal(sub, VKV_OK);

    float *got = malloc(sn * 4);
    uint32_t *mask = malloc(sn * 4), *want = malloc(sn * 4);
    assert_true(got && mask && want);
    assert_int_equal(vkv_buffer_download(gpu, sb, 0, got, sn * 4), VKV_OK);
    double num = 0, den = 0;
    for (size_t i = 0; i < sn; i++) {
        if (vkv_press_is_forced(fabsf(d.ref[i])) || vkv_press_is_forced(fabsf(got[i]))) { /* +inf, the forced band */
            if (got[i] != d.ref[i]) fail_msg("%s %s: score %zu is %g, reference %g", name, kv == VKV_F16 ? "f16" : "f32", i, got[i], d.ref[i]);
            continue;
        }
        assert_false(isnan(got[i]));
        num += ((double)got[i] - d.ref[i]) * ((double)got[i] - d.ref[i]);
        den += (double)d.ref[i] * d.ref[i];
    }
    const double nmse = den > 0 ? num / den : num;
    if (nmse > 1e-7) fail_msg("%s %s: NMSE %.3e > 1e-7", name, kv == VKV_F16 ? "f16" : "f32", nmse);
    for (int c = 0; c < N_PC; c++) {
        assert_int_equal(vkv_buffer_download(gpu, mb[c], 0, mask, sn * 4), VKV_OK);
        assert_int_equal(vkv_ref_topk_select(d.ref, s->n_kv_head, s->n, NULL, d.k[c], want), VKV_OK);
        for (size_t i = 0; i < sn; i++)
            if (mask[i] != want[i])
                fail_msg("%s %s p_c %.2f (k %u): token %zu of KV head %zu selected %u by the GPU, %u by the reference",
                         name, kv == VKV_F16 ? "f16" : "f32", compressions[c], d.k[c], i % s->n, i / s->n, mask[i],
                         want[i]);
    }
    free(got);
    free(mask);
    free(want);
    for (int c = 0; c < N_PC; c++) vkv_buffer_destroy(gpu, mb[c]);
    vkv_buffer_destroy(gpu, sb);
    vkv_buffer_destroy(gpu, scratch);
    vkv_buffer_destroy(gpu, state);
    vkv_buffer_destroy(gpu, qbuf);
    vkv_buffer_destroy(gpu, fb);
    vkv_buffer_destroy(gpu, wob);
    vkv_buffer_destroy(gpu, kb);
    vkv_buffer_destroy(gpu, vb);
    data_free(&d);
}

static void check_press(const char *name, vkv_dtype kv, const press_shape *s)
{
    check_press_rescaled(name, kv, s, (expected_rescale){0.0f, false});
}

static void check_both_types(const char *name, const press_shape *s)
{
    check_press(name, VKV_F32, s);
    check_press(name, VKV_F16, s);
}

/* GQA 4:1, head_dim 64, a cache longer than the context. */
static const press_shape gqa = {8, 2, 64, 300, 320, 0, 0, 0, 0, 0, 0};

static void knorm_gpu_matches_reference(void **state) { (void)state; check_both_types("knorm", &gqa); }
static void keydiff_gpu_matches_reference(void **state) { (void)state; check_both_types("keydiff", &gqa); }

static void blockwise_keydiff_gpu_matches_reference(void **state)
{
    (void)state;
    const press_shape s = {8, 2, 64, 300, 320, 128, 0, 0, 0, 0, 0}; /* blocks of 128, 128, 44 */
    check_both_types("keydiff", &s);
}

static void streamingllm_gpu_matches_reference(void **state) { (void)state; check_both_types("streamingllm", &gqa); }
static void snapkv_gpu_matches_reference(void **state) { (void)state; check_both_types("snapkv", &gqa); }
static void pyramidkv_gpu_matches_reference(void **state) { (void)state; check_both_types("pyramidkv", &gqa); }
/* AdaKV's safeguard over two inner scorers (press/adakv.c): the forced +inf match exactly. */
static void adakv_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("adakv-snapkv", &gqa);
    check_both_types("adakv-keydiff", &gqa);
}

static void tova_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("tova", &gqa);
    const press_shape mha = {4, 4, 32, 200, 200, 0, 0, 0, 0, 0, 0};
    check_press("tova", VKV_F16, &mha);
}

/* ChunkKV over SnapKV (whole chunks only) and over KNorm with a partial last chunk. */
static void chunkkv_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("chunkkv", &gqa);
    const press_shape partial = {8, 2, 64, 310, 320, 0, 0, 0, 0, 0, 0}; /* 15 chunks of 20 and one of 10 */
    check_press("chunkkv-knorm", VKV_F16, &partial);
}

/* LagKV with one scored partition, and with four (ranks tie across partitions). */
static void lagkv_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("lagkv", &gqa);
    const press_shape longer = {8, 2, 64, 700, 720, 0, 0, 0, 0, 0, 0};
    check_press("lagkv", VKV_F16, &longer);
}

static void random_gpu_matches_reference(void **state) { (void)state; check_both_types("random", &gqa); }

static void observed_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("observed", &gqa);
    const press_shape mha = {4, 4, 32, 200, 200, 0, 0, 0, 0, 0, 0};
    check_press("observed", VKV_F16, &mha);
}

/* During generation: the query of the token just computed alone, kvpress's decoding step. */
static void observed_decode_gpu_matches_reference(void **state)
{
    (void)state;
    const vkv_press_ops *ops = vkv_press_find("observed");
    press_shape s = gqa;
    s.decode = ops->decode_window;
    assert_int_equal(s.decode, 1);
    check_both_types("observed", &s);
}

/* ExpectedAttention during generation (vkv_press_ops.score_window): the last
 * w queries at positions 900 .. 999 and a gathered layer out of position
 * order, as VECTOR's tiers leave it: KV head 0 holds its sink positions 0 .. 3
 * at slots 150 .. 153, KV head 1 at slots 0 .. 3 and 20 slots fewer (the
 * rest NaN). The device's scores, finished on the host, against
 * score_window_ref: NMSE <= 1e-7, sinks +inf at the same slots, and the same
 * top-k selections at p_c {0.25, 0.5, 0.9} of each head's tokens. */
static void check_expected_window(vkv_dtype kv, float epsilon, bool no_vnorm)
{
    const vkv_press_ops *ops = vkv_press_find("expected");
    assert_non_null(ops);
    assert_non_null(ops->score_window);
    enum { H = 8, KVH = 2, HD = 64, N = 300, CTX = 320, W = 100, END = 1000 };
    const uint32_t n_tok[KVH] = {N, N - 20};
    int32_t pos[KVH * N];
    for (uint32_t h = 0; h < KVH; h++) {
        /* slots of head h: the non-sink earlier positions in order, the sinks at `at`, the window last */
        const uint32_t at = h == 0 ? 150 : 0, nt = n_tok[h], early = nt - W - 4;
        uint32_t e = 0;
        for (uint32_t j = 0; j < nt; j++) {
            int32_t *o = &pos[h * N + j];
            if (j >= nt - W) *o = END - (int32_t)(nt - j);
            else if (j >= at && j < at + 4) *o = (int32_t)(j - at);
            else *o = 4 + (int32_t)(e++ * (END - W - 4) / early);
        }
        for (uint32_t j = nt; j < N; j++) pos[h * N + j] = -1;
    }
    const size_t qn = (size_t)W * H * HD, kn = (size_t)N * KVH * HD, sn = (size_t)KVH * N;
    const uint64_t cache_bytes = vkv_kv_cache_bytes(kv, KVH, CTX, HD);
    void *kc = malloc(cache_bytes), *vc = malloc(cache_bytes);
    float *q = malloc(qn * 4), *src = malloc(kn * 4), *ref = malloc(sn * 4), *got = malloc(sn * 4), *tmp = malloc(N * 4);
    float inv_freq[HD / 2];
    uint32_t *m_got = malloc(sn * 4), *m_ref = malloc(sn * 4);
    assert_true(kc && vc && q && src && ref && got && tmp && m_got && m_ref);
    vkv_rope_params rp = {.mode = kv == VKV_F16 ? VKV_ROPE_NEOX : VKV_ROPE_INTERLEAVED, .head_dim = HD, .n_rot = HD,
                          .freq_base = 10000.0f, .freq_scale = 1.0f};
    vkv_rope_inv_freq(&rp, inv_freq);
    vkv_press_params pp = vkv_press_params_default(0.5);
    pp.expected_epsilon = epsilon;
    pp.expected_no_vnorm = no_vnorm;
    vkv_press_layer in = {.layer = 1, .n_layer = 4, .n = N, .n_head = H, .n_kv_head = KVH, .head_dim = HD,
                          .n_ctx = CTX, .kv_type = kv, .window = W, .k_host = kc, .v_host = vc, .q_window_host = q,
                          .n_rot = HD, .rope_neox = rp.mode == VKV_ROPE_NEOX, .inv_freq_host = inv_freq,
                          .window_pos0 = END - W, .slot_pos = pos, .n_tok = n_tok};
    bool clear = false;
    for (uint32_t attempt = 0; attempt < MAX_ATTEMPTS && !clear; attempt++) {
        vkv_rng rng = vkv_rng_new(0x5eed1000u + 977u * attempt + kv);
        for (int c = 0; c < 2; c++) {
            for (size_t i = 0; i < kn; i++) src[i] = vkv_rng_uniform(&rng, -1.0f, 1.0f);
            vkv_kv_cache_store(kv, c ? vc : kc, KVH, CTX, HD, 0, src, N);
        }
        for (uint32_t h = 0; h < KVH; h++) /* slots a head does not hold: NaN */
            for (uint32_t j = n_tok[h]; j < CTX; j++)
                for (uint32_t d = 0; d < HD; d++) {
                    const size_t o = ((size_t)h * CTX + j) * HD + d;
                    if (kv == VKV_F16) ((uint16_t *)kc)[o] = ((uint16_t *)vc)[o] = 0x7e00u;
                    else ((float *)kc)[o] = ((float *)vc)[o] = NAN;
                }
        for (size_t i = 0; i < qn; i++) q[i] = vkv_rng_uniform(&rng, -4.0f, 4.0f) + 3.0f * sinf((float)(i % HD));
        assert_int_equal(ops->score_window_ref(&pp, &in, ref), VKV_OK);
        clear = true;
        for (int c = 0; c < N_PC; c++)
            for (uint32_t h = 0; h < KVH && clear; h++)
                clear = boundary_is_clear(ref + (size_t)h * N, n_tok[h], vkv_kv_n_kept(compressions[c], n_tok[h]), tmp,
                                          false);
    }
    if (!clear) fail_msg("expected window: no draw in %d without a near-tie at the selection boundary", MAX_ATTEMPTS);
    vkv_buffer *kb = upload(kc, cache_bytes, "K cache"), *vb = upload(vc, cache_bytes, "V cache");
    vkv_buffer *qb = upload(q, qn * 4, "queries"), *fb = upload(inv_freq, 2ull * HD, "RoPE frequencies");
    vkv_buffer *scratch = upload(NULL, vkv_press_scratch_bytes(ops, &pp, &in), "press scratch");
    vkv_buffer *stb = upload(NULL, ops->state_bytes(&pp, &in), "press state");
    assert_int_equal(vkv_buffer_fill(gpu, stb, 0, vkv_buffer_size(stb), 0), VKV_OK);
    in.k = vkv_view_of(kb);
    in.v = vkv_view_of(vb);
    in.q_window = vkv_view_of(qb);
    in.inv_freq = vkv_view_of(fb);
    in.scratch = vkv_view_of(scratch);
    in.state = vkv_view_of(stb);
    if (ops->score_window(gpu, &pp, &in, got)) fail_msg("expected window: %s", vkv_last_error());
    double num = 0, den = 0;
    for (uint32_t h = 0; h < KVH; h++)
        for (uint32_t j = 0; j < n_tok[h]; j++) {
            const size_t i = (size_t)h * N + j;
            if (isinf(ref[i]) || isinf(got[i])) {
                if (got[i] != ref[i]) fail_msg("expected window: score %zu is %g, reference %g", i, got[i], ref[i]);
                assert_true(pos[i] < 4);
                continue;
            }
            assert_false(isnan(got[i]));
            num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
    if (num > 1e-7 * den) fail_msg("expected window %s: NMSE %.3e > 1e-7", kv == VKV_F16 ? "f16" : "f32", num / den);
    for (int c = 0; c < N_PC; c++)
        for (uint32_t h = 0; h < KVH; h++) {
            const uint32_t k = vkv_kv_n_kept(compressions[c], n_tok[h]);
            assert_int_equal(vkv_ref_topk_select(got + (size_t)h * N, 1, n_tok[h], NULL, k, m_got), VKV_OK);
            assert_int_equal(vkv_ref_topk_select(ref + (size_t)h * N, 1, n_tok[h], NULL, k, m_ref), VKV_OK);
            assert_memory_equal(m_got, m_ref, 4ull * n_tok[h]);
        }
    vkv_buffer *bufs[] = {kb, vb, qb, fb, scratch, stb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) vkv_buffer_destroy(gpu, bufs[i]);
    free(kc);
    free(vc);
    free(q);
    free(src);
    free(ref);
    free(got);
    free(tmp);
    free(m_got);
    free(m_ref);
}

static void expected_decode_gpu_matches_reference(void **state)
{
    (void)state;
    check_expected_window(VKV_F32, 0.0f, false);
    check_expected_window(VKV_F16, 0.0f, false);
}

/* The same with kvpress's epsilon, and without the value norms. */
static void expected_decode_rescaling_gpu_matches_reference(void **state)
{
    (void)state;
    check_expected_window(VKV_F32, 1e-2f, false);
    check_expected_window(VKV_F16, 1e-2f, true);
}

static void expected_gpu_matches_reference(void **state)
{
    (void)state;
    check_both_types("expected", &gqa);
    const press_shape mha = {4, 4, 32, 200, 200, 0, 0, 0, 0, 0, 0};
    check_press("expected", VKV_F32, &mha);
}

/* kvpress's epsilon (the registry's 1e-2) before the value norm, and no
 * value norm (use_vnorm=False, an epsilon then unused): the reference's
 * formula is tests/unit/test_press_ref.c's, these the device's. */
static void expected_rescaling_gpu_matches_reference(void **state)
{
    (void)state;
    const expected_rescale eps = {1e-2f, false}, bare = {0.5f, true};
    for (int f16 = 0; f16 < 2; f16++) {
        check_press_rescaled("expected", f16 ? VKV_F16 : VKV_F32, &gqa, eps);
        check_press_rescaled("expected", f16 ? VKV_F16 : VKV_F32, &gqa, bare);
    }
}

/* kvpress's evaluation registry's ExpectedAttention compositions: AdaKV over
 * epsilon 1e-2, CriticalKV and CriticalAdaKV over no value norms (the
 * wrappers set those; press/adakv.c, press/critical.c), each capturing its
 * queries through the wrapper. */
static void expected_compositions_gpu_match_reference(void **state)
{
    (void)state;
    check_both_types("adakv-expected", &gqa);
    check_both_types("critical-expected", &gqa);
    check_both_types("critical-adakv-expected", &gqa);
}

static void kvzip_gpu_matches_reference(void **state)
{
    (void)state;
    /* the first chunk (no sinks in the softmax: span0 = prefix < 4) and a later one */
    const press_shape first = {8, 2, 64, 300, 360, 0, 3, 3, 300, 57, 0};
    check_both_types("kvzip", &first);
    const press_shape later = {8, 2, 64, 300, 400, 0, 6, 100, 250, 90, 0};
    check_both_types("kvzip", &later);
}

/* KVzip's global threshold on the GPU (a top-k over one row of every score,
 * then per-row figures) against the sorted reference, with many ties at the
 * threshold: each row keeps exactly its scores above it. */
static void global_selection_matches_reference(void **state)
{
    (void)state;
    const uint32_t rows = 10, n = 997;
    const double pcs[] = {0.25, 0.5, 0.9, 0.0001};
    float *sc = malloc(4ull * rows * n);
    uint32_t got[10], want[10];
    assert_non_null(sc);
    vkv_rng rng = vkv_rng_new(77);
    for (size_t i = 0; i < (size_t)rows * n; i++) sc[i] = roundf(vkv_rng_uniform(&rng, 0.0f, 1.0f) * 64) / 64;
    sc[5] = NAN;
    sc[17] = INFINITY;
    vkv_buffer *b = upload(sc, 4ull * rows * n, "scores");
    for (size_t c = 0; c < sizeof pcs / sizeof *pcs; c++) {
        assert_int_equal(vkv_global_select_counts_ref(sc, rows, n, pcs[c], want), VKV_OK);
        if (vkv_global_select_counts(gpu, vkv_view_of(b), rows, n, pcs[c], got)) fail_msg("%s", vkv_last_error());
        uint64_t kept = 0;
        for (uint32_t r = 0; r < rows; r++) {
            assert_int_equal(got[r], want[r]);
            kept += got[r];
        }
        /* exactly int(N p_c) go, whatever the ties (the scores take 65 values); none at p_c 0.0001 */
        assert_int_equal(kept, (uint64_t)rows * n - vkv_kv_n_evicted_global((uint64_t)rows * n, pcs[c]));
    }
    vkv_buffer_destroy(gpu, b);
    free(sc);
}

/* Closes a recording whose one call returned st: the call was refused with
 * VKV_ERR_ARG, and its message names both `what` and `why`. */
static void assert_refused_with(vkv_status st, const char *what, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", vkv_last_error());
    assert_int_equal(vkv_cmd_submit(gpu), VKV_OK);
    assert_int_equal(st, VKV_ERR_ARG);
    assert_non_null(strstr(msg, what));
    assert_non_null(strstr(msg, why));
}

/* The error reaches the caller with both numbers; nothing is recorded. */
static void snapkv_gpu_rejects_a_context_shorter_than_its_window(void **state)
{
    (void)state;
    const press_shape s = {4, 2, 32, 40, 48, 0, 0, 0, 0, 0, 0};
    const vkv_press_ops *ops = vkv_press_find("snapkv");
    vkv_press_params pp = vkv_press_params_default(0.5f);
    vkv_buffer *kb = upload(NULL, vkv_kv_cache_bytes(VKV_F32, 2, 48, 32), "K cache");
    vkv_buffer *qb = upload(NULL, 4ull * 40 * 4 * 32, "q"), *sb = upload(NULL, 4ull * 2 * 40, "scores");
    vkv_press_layer in = {.n = s.n, .n_layer = 1, .n_head = 4, .n_kv_head = 2, .head_dim = 32, .n_ctx = 48,
                          .kv_type = VKV_F32, .k = vkv_view_of(kb), .v = vkv_view_of(kb), .window = 40,
                          .q_window = vkv_view_of(qb), .scratch = vkv_view_of(sb)};
    assert_int_equal(vkv_cmd_begin(gpu), VKV_OK);
    assert_refused_with(ops->score_gpu(gpu, &pp, &in, vkv_view_of(sb)), "40 tokens", "64");
    vkv_buffer_destroy(gpu, kb);
    vkv_buffer_destroy(gpu, qb);
    vkv_buffer_destroy(gpu, sb);
}

/* Scorers record their own dispatches: pushing a struct other than the one
 * src/vk/kernels.h declares for the kernel is refused, naming the kernel and
 * both structs, and nothing is recorded. */
static void dispatch_rejects_another_kernels_push_constants(void **state)
{
    (void)state;
    vkv_buffer *b = upload(NULL, 64, "scores");
    vkv_binding bindings[1] = {vkv_ops_bind(vkv_view_of(b), 0, 64)};
    vkv_pc_press_knorm knorm = {0};
    assert_int_equal(vkv_cmd_begin(gpu), VKV_OK);
    assert_refused_with(vkv_dispatch(gpu, VKV_K_PRESS_STREAMINGLLM, bindings, 1, &knorm, 1, 1, 1),
                        "'press_streamingllm' pushes vkv_pc_press_knorm", "declares vkv_pc_press_streamingllm");
    vkv_buffer_destroy(gpu, b);
}

int main(void)
{
    vkv_instance *inst;
    int open_rc = gpu_test_open("test_press", vkv_validation_requested(), &inst, &gpu);
    if (open_rc) return open_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(knorm_gpu_matches_reference),
        cmocka_unit_test(keydiff_gpu_matches_reference),
        cmocka_unit_test(blockwise_keydiff_gpu_matches_reference),
        cmocka_unit_test(streamingllm_gpu_matches_reference),
        cmocka_unit_test(snapkv_gpu_matches_reference),
        cmocka_unit_test(pyramidkv_gpu_matches_reference),
        cmocka_unit_test(adakv_gpu_matches_reference),
        cmocka_unit_test(tova_gpu_matches_reference),
        cmocka_unit_test(chunkkv_gpu_matches_reference),
        cmocka_unit_test(lagkv_gpu_matches_reference),
        cmocka_unit_test(random_gpu_matches_reference),
        cmocka_unit_test(observed_gpu_matches_reference),
        cmocka_unit_test(observed_decode_gpu_matches_reference),
        cmocka_unit_test(expected_gpu_matches_reference),
        cmocka_unit_test(expected_decode_gpu_matches_reference),
        cmocka_unit_test(expected_rescaling_gpu_matches_reference),
        cmocka_unit_test(expected_decode_rescaling_gpu_matches_reference),
        cmocka_unit_test(expected_compositions_gpu_match_reference),
        cmocka_unit_test(kvzip_gpu_matches_reference),
        cmocka_unit_test(global_selection_matches_reference),
        cmocka_unit_test(snapkv_gpu_rejects_a_context_shorter_than_its_window),
        cmocka_unit_test(dispatch_rejects_another_kernels_push_constants),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    uint32_t verr = gpu_test_close(inst, gpu);
    if (verr) {
        fprintf(stderr, "test_press: %u validation error(s)\n", verr);
        return 1;
    }
    return failed ? 1 : 0;
}
