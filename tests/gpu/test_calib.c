/* GPU checks of the OLS calibration (calib/):
 *   - GramAccumulationMatchesDoubleOver1MTokens: synthetic keys/values uploaded
 *     in chunks through the gram shader and the double accumulators agree with
 *     a double-precision CPU computation (relative error < 1e-6);
 *   - HookKeysEqualInverseRopeOfCache (llama, qwen2, qwen3): the forward hook's
 *     pre-RoPE keys equal the cached keys with the inverse RoPE shader applied,
 *     and the accumulated Grams of a real forward equal the CPU Grams of the
 *     hook's keys and values;
 *   - CalibFileRoundTripsAndChecksIdentity: calibration of stories260K (real
 *     weights, tinyshakespeare as byte tokens) writes a .vkcal that loads back
 *     for that model (f32 and f16), fails to load for synth-llama with a clear
 *     message, and fails cleanly when truncated.
 * Returns 77 when there is no Vulkan device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/calib.h"
#include "core/rng.h"
#include "gpu_test.h"

static int n_fail;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            printf("FAIL %s:%d: ", __func__, __LINE__);   \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
            n_fail++;                                     \
        }                                                 \
    } while (0)

#define TRY(expr)                                                                        \
    do {                                                                                 \
        vkv_status s_ = (expr);                                                          \
        if (s_) {                                                                        \
            printf("FAIL %s:%d: %s: %s\n", __func__, __LINE__, #expr, vkv_last_error()); \
            n_fail++;                                                                    \
            goto out;                                                                    \
        }                                                                                \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *shared_dir(void)
{
    const char *s = getenv("VKVECTOR_SHARED");
    return s && *s ? s : "../shared";
}

static double rel_err(const double *got, const double *want, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Adds the statistics of a chunk (k [n, Dk], v [n, Dv] f32) into CPU sums
 * laid out as vkv_calib_sums (per head, then joint). */
static void cpu_accumulate(vkv_calib_sums *s, const float *k, const float *v, uint32_t n, uint32_t n_kv, uint32_t dk,
                           uint32_t dv)
{
    uint32_t Dk = n_kv * dk, Dv = n_kv * dv;
    for (uint32_t t = 0; t < n; t++) {
        const float *kt = k + (size_t)t * Dk, *vt = v + (size_t)t * Dv;
        for (uint32_t h = 0; h < n_kv; h++) {
            const float *kh = kt + h * dk, *vh = vt + h * dv;
            for (uint32_t i = 0; i < dk; i++) {
                for (uint32_t j = 0; j < dk; j++) s->g[((size_t)h * dk + i) * dk + j] += (double)kh[i] * kh[j];
                for (uint32_t j = 0; j < dv; j++) s->c[((size_t)h * dk + i) * dv + j] += (double)kh[i] * vh[j];
            }
            for (uint32_t i = 0; i < dv; i++)
                for (uint32_t j = 0; j < dv; j++) s->vv[((size_t)h * dv + i) * dv + j] += (double)vh[i] * vh[j];
        }
        if (s->g_joint)
            for (uint32_t i = 0; i < Dk; i++) {
                for (uint32_t j = 0; j < Dk; j++) s->g_joint[(size_t)i * Dk + j] += (double)kt[i] * kt[j];
                for (uint32_t j = 0; j < Dv; j++) s->c_joint[(size_t)i * Dv + j] += (double)kt[i] * vt[j];
            }
        for (uint32_t j = 0; j < Dv; j++) s->v_sum[j] += vt[j];
        s->n++;
    }
}

static bool sums_alloc(vkv_calib_sums *s, uint32_t n_kv, uint32_t dk, uint32_t dv, bool joint)
{
    size_t Dk = (size_t)n_kv * dk, Dv = (size_t)n_kv * dv;
    memset(s, 0, sizeof *s);
    s->g = calloc((size_t)n_kv * dk * dk, sizeof *s->g);
    s->c = calloc((size_t)n_kv * dk * dv, sizeof *s->c);
    s->vv = calloc((size_t)n_kv * dv * dv, sizeof *s->vv);
    s->v_sum = calloc(Dv, sizeof *s->v_sum);
    if (joint) {
        s->g_joint = calloc(Dk * Dk, sizeof *s->g_joint);
        s->c_joint = calloc(Dk * Dv, sizeof *s->c_joint);
    }
    return s->g && s->c && s->vv && s->v_sum && (!joint || (s->g_joint && s->c_joint));
}

static void sums_free(vkv_calib_sums *s)
{
    free(s->g);
    free(s->c);
    free(s->vv);
    free(s->v_sum);
    free(s->g_joint);
    free(s->c_joint);
    memset(s, 0, sizeof *s);
}

static void sums_zero(vkv_calib_sums *s, uint32_t n_kv, uint32_t dk, uint32_t dv)
{
    size_t Dk = (size_t)n_kv * dk, Dv = (size_t)n_kv * dv;
    memset(s->g, 0, sizeof *s->g * n_kv * dk * dk);
    memset(s->c, 0, sizeof *s->c * n_kv * dk * dv);
    memset(s->vv, 0, sizeof *s->vv * n_kv * dv * dv);
    memset(s->v_sum, 0, sizeof *s->v_sum * Dv);
    if (s->g_joint) memset(s->g_joint, 0, sizeof *s->g_joint * Dk * Dk);
    if (s->c_joint) memset(s->c_joint, 0, sizeof *s->c_joint * Dk * Dv);
    s->n = 0;
}

/* The largest relative error over the sums (and n must match). */
static double sums_err(const vkv_calib_sums *got, const vkv_calib_sums *want, uint32_t n_kv, uint32_t dk, uint32_t dv)
{
    size_t Dk = (size_t)n_kv * dk, Dv = (size_t)n_kv * dv;
    if (got->n != want->n || !got->g_joint != !want->g_joint) return INFINITY;
    double e = rel_err(got->g, want->g, (size_t)n_kv * dk * dk);
    e = fmax(e, rel_err(got->c, want->c, (size_t)n_kv * dk * dv));
    e = fmax(e, rel_err(got->vv, want->vv, (size_t)n_kv * dv * dv));
    e = fmax(e, rel_err(got->v_sum, want->v_sum, Dv));
    if (want->g_joint) {
        e = fmax(e, rel_err(got->g_joint, want->g_joint, Dk * Dk));
        e = fmax(e, rel_err(got->c_joint, want->c_joint, Dk * Dv));
    }
    return e;
}

/* ---------------------------------------------------------------------- */

static void GramAccumulationMatchesDoubleOver1MTokens(vkv_gpu *gpu)
{
    const uint32_t n_kv = 2, dk = 8, dv = 8, Dk = n_kv * dk, Dv = n_kv * dv, chunk = 2000;
    const uint64_t total = 1000000;
    vkv_gram_accum *acc = NULL;
    vkv_buffer *kb = NULL, *vb = NULL;
    float *k = malloc(sizeof *k * chunk * Dk), *v = malloc(sizeof *v * chunk * Dv);
    vkv_calib_sums want[2];
    bool ok_alloc = sums_alloc(&want[0], n_kv, dk, dv, true) & sums_alloc(&want[1], n_kv, dk, dv, true);
    vkv_rng rng = vkv_rng_new(7);
    float a[16][16];
    for (uint32_t i = 0; i < Dv; i++)
        for (uint32_t j = 0; j < Dk; j++) a[i][j] = vkv_rng_uniform(&rng, -1, 1);
    if (!k || !v || !ok_alloc) {
        CHECK(false, "out of memory");
        goto out;
    }
    TRY(vkv_gram_accum_create(gpu, 1, n_kv, dk, dv, true, &acc));
    TRY(vkv_buffer_create(gpu, 4ull * chunk * Dk, VKV_MEM_DEVICE, "test keys", &kb));
    TRY(vkv_buffer_create(gpu, 4ull * chunk * Dv, VKV_MEM_DEVICE, "test values", &vb));
    uint64_t done = 0;
    for (uint32_t c = 0; done < total; c++) {
        /* Uneven chunk sizes (not multiples of the shader's 16-token stage). */
        uint32_t n = c % 3 == 2 ? chunk - 37 : chunk;
        if (n > total - done) n = (uint32_t)(total - done);
        for (uint32_t t = 0; t < n; t++) {
            float *kt = k + (size_t)t * Dk, *vt = v + (size_t)t * Dv;
            for (uint32_t j = 0; j < Dk; j++) kt[j] = vkv_rng_uniform(&rng, -1, 1) + 0.25f * (float)(j % 3);
            for (uint32_t i = 0; i < Dv; i++) {
                double s = 0;
                for (uint32_t j = 0; j < Dk; j++) s += a[i][j] * kt[j];
                vt[i] = (float)s + 0.1f * vkv_rng_uniform(&rng, -1, 1);
            }
        }
        vkv_calib_set set = c % 5 == 4 ? VKV_CALIB_HELDOUT : VKV_CALIB_TRAIN;
        cpu_accumulate(&want[set], k, v, n, n_kv, dk, dv);
        TRY(vkv_buffer_upload(gpu, kb, 0, k, 4ull * n * Dk));
        TRY(vkv_buffer_upload(gpu, vb, 0, v, 4ull * n * Dv));
        vkv_gram_accum_set_target(acc, set);
        TRY(vkv_cmd_begin(gpu));
        vkv_status st = vkv_gram_accum_record(acc, 0, vkv_view_of(kb), vkv_view_of(vb), n);
        TRY(st ? vkv_cmd_abort(gpu, st) : vkv_cmd_submit(gpu));
        done += n;
    }
    vkv_gram_accum_collect(acc);
    for (int s = 0; s < 2; s++) {
        double e = sums_err(vkv_gram_accum_sums(acc, 0, s), &want[s], n_kv, dk, dv);
        CHECK(e < 1e-6, "set %d: relative error %.3e over %llu tokens (max 1e-6)", s, e,
              (unsigned long long)want[s].n);
        printf("%-4s gram accumulation, %s set: %llu tokens, relative error %.3e (max 1e-6)\n", e < 1e-6 ? "ok" : "FAIL",
               s ? "held-out" : "training", (unsigned long long)want[s].n, e);
    }
out:
    vkv_buffer_destroy(gpu, kb);
    vkv_buffer_destroy(gpu, vb);
    vkv_gram_accum_free(acc);
    sums_free(&want[0]);
    sums_free(&want[1]);
    free(k);
    free(v);
}

/* ---------------------------------------------------------------------- */

typedef struct hook_state {
    const vkv_model *m;
    vkv_buffer **keys, **vals; /* per layer [n_ctx, n_kv, hd] copies of the hook's views */
    vkv_gram_accum *acc;
} hook_state;

static vkv_status copy_hook(void *user, vkv_gpu *gpu, uint32_t layer, vkv_view k, vkv_view v, uint32_t n_tok,
                            uint32_t pos0)
{
    hook_state *h = user;
    uint64_t row = 4ull * h->m->hp.n_head_kv * h->m->hp.head_dim;
    vkv_status st;
    if ((st = vkv_cmd_copy(gpu, k.buf, k.offset, h->keys[layer], pos0 * row, n_tok * row)) ||
        (st = vkv_cmd_copy(gpu, v.buf, v.offset, h->vals[layer], pos0 * row, n_tok * row)))
        return st;
    return vkv_gram_accum_record(h->acc, layer, k, v, n_tok);
}

static void HookKeysEqualInverseRopeOfCache(vkv_gpu *gpu, const char *model_file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", shared_dir(), model_file);
    const uint32_t n = 50, n_ctx = 64;
    vkv_model *m = NULL;
    vkv_ctx *ctx = NULL;
    hook_state hs = {0};
    vkv_buffer *pos = NULL, *out = NULL;
    float *hook_k = NULL, *hook_v = NULL, *unrot = NULL;
    int32_t ids[64], posv[64];
    vkv_calib_sums want;
    bool have_want = false;
    TRY(vkv_model_load(gpu, path, &m));
    const vkv_hparams *hp = &m->hp;
    uint32_t L = hp->n_layer, H = hp->n_head_kv, hd = hp->head_dim;
    size_t row = (size_t)H * hd;
    hs.m = m;
    hs.keys = calloc(L, sizeof *hs.keys);
    hs.vals = calloc(L, sizeof *hs.vals);
    hook_k = malloc(4 * n_ctx * row);
    hook_v = malloc(4 * n_ctx * row);
    unrot = malloc(4 * n * hd);
    have_want = sums_alloc(&want, H, hd, hd, true);
    if (!hs.keys || !hs.vals || !hook_k || !hook_v || !unrot || !have_want) {
        CHECK(false, "out of memory");
        goto out;
    }
    for (uint32_t l = 0; l < L; l++) {
        TRY(vkv_buffer_create(gpu, 4 * n_ctx * row, VKV_MEM_DEVICE, "hook keys", &hs.keys[l]));
        TRY(vkv_buffer_create(gpu, 4 * n_ctx * row, VKV_MEM_DEVICE, "hook values", &hs.vals[l]));
    }
    TRY(vkv_gram_accum_create(gpu, L, H, hd, hd, true, &hs.acc));
    /* Several chunks (n_batch 16): pos0 > 0 is part of the check. */
    vkv_ctx_params cp = {.n_ctx = n_ctx, .n_batch = 16, .k_type = VKV_F32, .v_type = VKV_F32};
    TRY(vkv_ctx_create(gpu, m, &cp, &ctx));
    vkv_ctx_set_kv_hook(ctx, copy_hook, &hs);
    vkv_rng rng = vkv_rng_new(3);
    for (uint32_t i = 0; i < n; i++) ids[i] = i == 0 ? 1 : (int32_t)(3 + vkv_rng_below(&rng, hp->n_vocab - 3));
    for (uint32_t i = 0; i < n_ctx; i++) posv[i] = (int32_t)i;
    TRY(vkv_ctx_eval(ctx, ids, n, false, NULL));
    vkv_gram_accum_collect(hs.acc);
    TRY(vkv_buffer_create(gpu, 4ull * n_ctx, VKV_MEM_DEVICE, "positions", &pos));
    TRY(vkv_buffer_upload(gpu, pos, 0, posv, 4ull * n_ctx));
    TRY(vkv_buffer_create(gpu, 4ull * H * n * hd, VKV_MEM_DEVICE, "unrotated keys", &out));
    vkv_rope_params rp = vkv_model_rope_params(m);
    rp.inverse = true;
    double worst = 0, worst_gram = 0;
    for (uint32_t l = 0; l < L; l++) {
        vkv_view cache = vkv_ctx_k_cache(ctx, l);
        /* A head's slots are contiguous [n_ctx, hd] rows: RoPE per head with
         * n_heads = 1 and slot j = position j. */
        TRY(vkv_cmd_begin(gpu));
        vkv_status st = VKV_OK;
        for (uint32_t h = 0; h < H && !st; h++)
            st = vkv_op_rope(gpu, &rp, (vkv_view){cache.buf, cache.offset + 4ull * h * n_ctx * hd}, n, 1,
                             vkv_view_of(pos), vkv_view_of(m->rope_inv_freq), (vkv_view){out, 4ull * h * n * hd});
        TRY(st ? vkv_cmd_abort(gpu, st) : vkv_cmd_submit(gpu));
        TRY(vkv_buffer_download(gpu, hs.keys[l], 0, hook_k, 4 * n * row));
        TRY(vkv_buffer_download(gpu, hs.vals[l], 0, hook_v, 4 * n * row));
        double num = 0, den = 0;
        for (uint32_t h = 0; h < H; h++) {
            TRY(vkv_buffer_download(gpu, out, 4ull * h * n * hd, unrot, 4ull * n * hd));
            for (uint32_t t = 0; t < n; t++)
                for (uint32_t d = 0; d < hd; d++) {
                    double a = hook_k[t * row + h * hd + d], b = unrot[t * hd + d];
                    num += (a - b) * (a - b);
                    den += a * a;
                }
        }
        double nmse = num / den;
        if (nmse > worst) worst = nmse;
        /* The accumulated Grams of this forward against the CPU's. */
        sums_zero(&want, H, hd, hd);
        cpu_accumulate(&want, hook_k, hook_v, n, H, hd, hd);
        double e = sums_err(vkv_gram_accum_sums(hs.acc, l, VKV_CALIB_TRAIN), &want, H, hd, hd);
        if (e > worst_gram) worst_gram = e;
    }
    CHECK(worst <= 1e-10, "%s: pre-RoPE hook keys vs inverse RoPE of the cache: NMSE %.3e (max 1e-10)", model_file, worst);
    CHECK(worst_gram <= 1e-6, "%s: forward Grams vs CPU: relative error %.3e (max 1e-6)", model_file, worst_gram);
    printf("%-4s %s (%s): hook keys vs inverse-RoPE cache NMSE %.3e (max 1e-10); Grams vs CPU %.3e (max 1e-6)\n",
           worst <= 1e-10 && worst_gram <= 1e-6 ? "ok" : "FAIL", model_file, hp->arch_name, worst, worst_gram);
out:
    if (hs.keys)
        for (uint32_t l = 0; m && l < m->hp.n_layer; l++) vkv_buffer_destroy(gpu, hs.keys[l]);
    if (hs.vals)
        for (uint32_t l = 0; m && l < m->hp.n_layer; l++) vkv_buffer_destroy(gpu, hs.vals[l]);
    free(hs.keys);
    free(hs.vals);
    vkv_gram_accum_free(hs.acc);
    vkv_buffer_destroy(gpu, pos);
    vkv_buffer_destroy(gpu, out);
    vkv_ctx_free(ctx);
    vkv_model_free(gpu, m);
    if (have_want) sums_free(&want);
    free(hook_k);
    free(hook_v);
    free(unrot);
}

/* ---------------------------------------------------------------------- */

static bool write_prefix(const char *src, const char *dst, long bytes)
{
    FILE *f = fopen(src, "rb"), *g = fopen(dst, "wb");
    bool ok = f && g;
    for (long i = 0; ok && i < bytes; i++) {
        int ch = fgetc(f);
        if (ch == EOF) break;
        fputc(ch, g);
    }
    if (f) fclose(f);
    if (g && fclose(g)) ok = false;
    return ok;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void CalibFileRoundTripsAndChecksIdentity(vkv_gpu *gpu)
{
    char model_path[1024], other_path[1024], corpus_path[1024], out[512], out16[512], cut[512];
    snprintf(model_path, sizeof model_path, "%s/models/stories260K-f32.gguf", shared_dir());
    snprintf(other_path, sizeof other_path, "%s/models/synth-llama-f32.gguf", shared_dir());
    snprintf(corpus_path, sizeof corpus_path, "%s/data/tinyshakespeare.txt", shared_dir());
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(out, sizeof out, "%s/vkv_test_calib_%d.vkcal", tmp, (int)getpid());
    snprintf(out16, sizeof out16, "%s/vkv_test_calib_%d_f16.vkcal", tmp, (int)getpid());
    snprintf(cut, sizeof cut, "%s/vkv_test_calib_%d_cut.vkcal", tmp, (int)getpid());
    vkv_model *m = NULL, *other = NULL;
    int32_t *tokens = NULL;
    vkv_gram_accum *acc = NULL;
    vkv_calib *cal = NULL, *back = NULL, *back16 = NULL, *bad = NULL;
    TRY(vkv_model_load(gpu, model_path, &m));
    TRY(vkv_model_load(gpu, other_path, &other));
    const char *paths[1] = {corpus_path};
    uint32_t n_seq;
    vkv_corpus_params cp = {.paths = paths, .n_paths = 1, .tok = NULL, .seq_len = 128, .max_seq = 12};
    TRY(vkv_corpus_sequences(&cp, &tokens, &n_seq));
    CHECK(n_seq == 12 && tokens[0] == 1 && tokens[128] == 1 && tokens[1] == 'F' + 3,
          "byte-token sequences: %u sequences, first ids %d %d, second sequence starts with %d", n_seq, tokens[0],
          tokens[1], tokens[128]);
    vkv_calib_run_params rp = {.seq_len = 128, .n_seq = n_seq, .n_seq_heldout = 3, .joint = true};
    double secs = 0;
    TRY(vkv_calib_collect(gpu, m, tokens, &rp, &acc, &secs));
    /* Byte tokens make stories260K's layer-0 keys nearly rank-deficient: the
     * default (no ridge) must refuse with a way out, auto must pick one. */
    vkv_status st0 = vkv_calib_solve(acc, m, 0.0, &cal);
    printf("     no ridge: %s\n", st0 ? vkv_last_error() : "solvable");
    CHECK(st0 == VKV_OK || (st0 == VKV_ERR_CHECK && strstr(vkv_last_error(), "--ridge") && !cal),
          "solve without a ridge: status %d: %s", st0, vkv_last_error());
    vkv_calib_free(cal);
    cal = NULL;
    TRY(vkv_calib_solve(acc, m, VKV_CALIB_RIDGE_AUTO, &cal));
    printf("     ridge auto: %g\n", cal->ridge);
    cal->heldout_frac = 0.25;
    cal->corpus = (vkv_calib_corpus){.n_tokens = 12 * 128, .n_tokens_heldout = 3 * 128, .n_seq = 12, .n_seq_heldout = 3,
                                     .seq_len = 128, .byte_tokens = true};
    cal->corpus.sources = calloc(1, sizeof(char *));
    if (cal->corpus.sources && (cal->corpus.sources[0] = strdup(corpus_path))) cal->corpus.n_sources = 1;
    printf("     stories260K, %u x 128 byte tokens in %.2f s: held-out R² per layer", n_seq, secs);
    bool beats = true;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        double r2 = vkv_calib_layer_mean(cal, cal->r2, l), mp = vkv_calib_layer_mean(cal, cal->r2_mp, l);
        printf(" %.3f", r2);
        if (!(r2 > mp)) beats = false;
    }
    printf("\n");
    CHECK(beats, "per-head OLS does not beat Moore-Penrose on every layer");
    TRY(vkv_calib_write(cal, out, false));
    TRY(vkv_calib_write(cal, out16, true));
    TRY(vkv_calib_load(out, m, &back));
    size_t nw = (size_t)m->hp.n_layer * m->hp.n_head_kv * cal->d_k * cal->d_v;
    CHECK(!memcmp(back->w, cal->w, nw * sizeof *cal->w), "f32 maps differ after the round trip");
    CHECK(back->corpus.n_seq == 12 && back->corpus.n_sources == 1 && back->corpus.byte_tokens &&
              fabs(back->r2[3] - cal->r2[3]) < 1e-6 && fabs(back->r2_joint[2] - cal->r2_joint[2]) < 1e-6,
          "metadata differ after the round trip");
    CHECK(vkv_calib_map(back, 2, 1) == back->w + (2 * m->hp.n_head_kv + 1) * cal->d_k * cal->d_v, "map accessor");
    /* The joint maps (--vector-map joint) travel with the per-head ones. */
    size_t nj = (size_t)m->hp.n_layer * m->hp.n_head_kv * cal->d_k * m->hp.n_head_kv * cal->d_v;
    CHECK(cal->w_joint && back->w_joint && !memcmp(back->w_joint, cal->w_joint, nj * sizeof *cal->w_joint),
          "joint maps missing or different after the round trip");
    CHECK(vkv_calib_joint_map(back, 3) == back->w_joint + nj / m->hp.n_layer * 3, "joint map accessor");
    {
        /* A calibration without them loads with none. */
        float *wj = cal->w_joint;
        vkv_calib *plain = NULL;
        cal->w_joint = NULL;
        st0 = vkv_calib_write(cal, cut, false);
        cal->w_joint = wj;
        if (!st0) st0 = vkv_calib_load(cut, m, &plain);
        CHECK(!st0 && plain && !plain->w_joint && !vkv_calib_joint_map(plain, 0), "a file without joint maps: %s",
              st0 ? vkv_last_error() : "loaded with some");
        vkv_calib_free(plain);
    }
    TRY(vkv_calib_load(out16, m, &back16));
    double maxd = 0;
    for (size_t i = 0; i < nw; i++) maxd = fmax(maxd, fabs(back16->w[i] - cal->w[i]) / (fabs(cal->w[i]) + 1e-3));
    CHECK(maxd < 1e-2, "f16 maps differ by %.3g", maxd);
    printf("%-4s .vkcal written and loaded back (f32 identical, f16 within %.1e)\n", n_fail ? "FAIL" : "ok", maxd);

    /* Another model: refused, naming why. */
    vkv_status st = vkv_calib_load(out, other, &bad);
    const char *msg = vkv_last_error();
    bool clear = st == VKV_ERR_ARG && strstr(msg, "was made for") && strstr(msg, "5 layers") && !bad;
    CHECK(clear, "loading for synth-llama: status %d, message: %s", st, msg);
    printf("%-4s refused for synth-llama-f32: %s\n", clear ? "ok" : "FAIL", msg);

    /* Truncated files: every cut fails with a format error, never a crash. */
    long size = file_size(out);
    long cuts[] = {0, 4, 20, size / 4, size / 2, size - 100, size - 1};
    bool all_rejected = true;
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        if (cuts[i] < 0 || !write_prefix(out, cut, cuts[i])) continue;
        vkv_calib *t = NULL;
        st = vkv_calib_load(cut, m, &t);
        if (st == VKV_OK || t) {
            all_rejected = false;
            printf("     truncated to %ld of %ld bytes: accepted\n", cuts[i], size);
        }
        vkv_calib_free(t);
    }
    CHECK(all_rejected, "a truncated .vkcal was accepted");
    write_prefix(out, cut, size / 2);
    st = vkv_calib_load(cut, m, &bad);
    printf("%-4s truncated .vkcal rejected (%s)\n", all_rejected ? "ok" : "FAIL", vkv_last_error());
out:
    remove(out);
    remove(out16);
    remove(cut);
    vkv_calib_free(cal);
    vkv_calib_free(back);
    vkv_calib_free(back16);
    vkv_calib_free(bad);
    vkv_gram_accum_free(acc);
    free(tokens);
    vkv_model_free(gpu, m);
    vkv_model_free(gpu, other);
}

int main(void)
{
    vkv_instance *inst;
    vkv_gpu *gpu;
    int open_rc = gpu_test_open("test_calib", true, &inst, &gpu);
    if (open_rc) return open_rc;
    double t = now_s();
    GramAccumulationMatchesDoubleOver1MTokens(gpu);
    printf("     (%.1f s)\n", now_s() - t);
    t = now_s();
    HookKeysEqualInverseRopeOfCache(gpu, "stories260K-f32.gguf");
    HookKeysEqualInverseRopeOfCache(gpu, "synth-qwen2-f32.gguf");
    HookKeysEqualInverseRopeOfCache(gpu, "synth-qwen3-f32.gguf");
    printf("     (%.1f s)\n", now_s() - t);
    t = now_s();
    CalibFileRoundTripsAndChecksIdentity(gpu);
    printf("     (%.1f s)\n", now_s() - t);
    uint32_t verr = gpu_test_close(inst, gpu);
    if (verr) {
        printf("FAIL %u validation error(s)\n", verr);
        n_fail++;
    }
    printf("calib: %s\n", n_fail ? "FAILED" : "all passed");
    return n_fail ? 1 : 0;
}
