/* Calibration driver: the GPU pass over the corpus, the double-precision
 * solve and the R² report (see calib.h). */
#include "calib/calib.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calib/calib_internal.h"
#include "core/json_write.h"
#include "core/out_file.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------- the GPU pass ---------------- */

vkv_status vkv_calib_collect(vkv_gpu *gpu, const vkv_model *m, const int32_t *tokens, const vkv_calib_run_params *p,
                             vkv_gram_accum **out, double *seconds)
{
    *out = NULL;
    const vkv_hparams *hp = &m->hp;
    if (!p->n_seq || p->seq_len < 1) return vkv_error(VKV_ERR_ARG, "calibration: no sequences");
    if (p->n_seq_heldout > p->n_seq) return vkv_error(VKV_ERR_ARG, "calibration: more held-out sequences than sequences");
    if (p->seq_len > hp->n_ctx_train)
        return vkv_error(VKV_ERR_ARG, "calibration: sequences of %u tokens exceed the model's %u-token context", p->seq_len,
                         hp->n_ctx_train);
    vkv_gram_accum *a = NULL;
    vkv_ctx *ctx = NULL;
    uint32_t batch = p->n_batch ? p->n_batch : p->seq_len < 512 ? p->seq_len : 512;
    vkv_ctx_params cp = {.n_ctx = p->seq_len, .n_batch = batch, .k_type = VKV_F32, .v_type = VKV_F32};
    vkv_status st;
    if ((st = vkv_gram_accum_create(gpu, hp->n_layer, hp->n_head_kv, hp->head_dim, hp->head_dim_v, p->joint, &a)) ||
        (st = vkv_ctx_create(gpu, m, &cp, &ctx)))
        goto error;
    vkv_ctx_set_kv_hook(ctx, vkv_gram_accum_hook, a);
    uint64_t total = (uint64_t)p->n_seq * p->seq_len;
    double t0 = now_s();
    for (uint32_t s = 0; s < p->n_seq; s++) {
        vkv_gram_accum_set_target(a, s >= p->n_seq - p->n_seq_heldout ? VKV_CALIB_HELDOUT : VKV_CALIB_TRAIN);
        vkv_ctx_reset(ctx);
        if ((st = vkv_ctx_eval(ctx, tokens + (size_t)s * p->seq_len, p->seq_len, false, NULL))) {
            st = vkv_error_context(st, "calibration sequence %u", s);
            goto error;
        }
        if (p->progress) p->progress(p->progress_user, (uint64_t)(s + 1) * p->seq_len, total);
    }
    vkv_gram_accum_collect(a);
    if (seconds) *seconds = now_s() - t0;
    vkv_ctx_free(ctx);
    *out = a;
    return VKV_OK;
error:
    vkv_ctx_free(ctx);
    vkv_gram_accum_free(a);
    return st;
}

/* ---------------- identity ---------------- */

vkv_status vkv_calib_identity_of(const vkv_model *m, vkv_calib_identity *id)
{
    const vkv_hparams *hp = &m->hp;
    memset(id, 0, sizeof *id);
    snprintf(id->arch, sizeof id->arch, "%s", hp->arch_name);
    id->n_layer = hp->n_layer;
    id->n_head_kv = hp->n_head_kv;
    id->head_dim = hp->head_dim;
    id->head_dim_v = hp->head_dim_v;
    id->n_embd = hp->n_embd;
    return vkv_model_kv_hash(m, &id->kv_hash);
}

/* ---------------- the solve ---------------- */

const float *vkv_calib_map(const vkv_calib *c, uint32_t layer, uint32_t head)
{
    return c->w + ((size_t)layer * c->id.n_head_kv + head) * c->d_v * c->d_k;
}

const float *vkv_calib_joint_map(const vkv_calib *c, uint32_t layer)
{
    size_t per_layer = (size_t)c->id.n_head_kv * c->d_v * c->id.n_head_kv * c->d_k;
    return c->w_joint ? c->w_joint + (size_t)layer * per_layer : NULL;
}

void vkv_calib_free(vkv_calib *c)
{
    if (!c) return;
    free(c->w);
    free(c->r2);
    free(c->r2_train);
    free(c->r2_mp);
    free(c->rel_err);
    free(c->r2_joint);
    free(c->ridge_joint);
    free(c->w_joint);
    for (uint32_t i = 0; i < c->corpus.n_sources; i++) free(c->corpus.sources[i]);
    free(c->corpus.sources);
    free(c);
}

vkv_calib *vkv_calib_alloc(const vkv_calib_identity *id)
{
    vkv_calib *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->version = VKV_CALIB_VERSION;
    c->id = *id;
    c->d_k = id->head_dim;
    c->d_v = id->head_dim_v;
    size_t nh = (size_t)id->n_layer * id->n_head_kv;
    c->w = calloc(nh * c->d_k * c->d_v, sizeof *c->w);
    c->r2 = malloc(nh * sizeof *c->r2);
    c->r2_train = malloc(nh * sizeof *c->r2_train);
    c->r2_mp = malloc(nh * sizeof *c->r2_mp);
    c->rel_err = malloc(nh * sizeof *c->rel_err);
    c->r2_joint = malloc(id->n_layer * sizeof *c->r2_joint);
    c->ridge_joint = malloc(id->n_layer * sizeof *c->ridge_joint);
    if (!c->w || !c->r2 || !c->r2_train || !c->r2_mp || !c->rel_err || !c->r2_joint || !c->ridge_joint) {
        vkv_calib_free(c);
        return NULL;
    }
    for (size_t i = 0; i < nh; i++) c->r2[i] = c->r2_train[i] = c->r2_mp[i] = c->rel_err[i] = NAN;
    for (uint32_t l = 0; l < id->n_layer; l++) c->r2_joint[l] = c->ridge_joint[l] = NAN;
    return c;
}

/* Head h's view of a layer's sums. */
static vkv_ols_sums head_sums(const vkv_calib_sums *s, uint32_t dk, uint32_t dv, uint32_t h)
{
    const double *vv = s->vv + (size_t)h * dv * dv;
    double v_sq = 0;
    for (uint32_t i = 0; i < dv; i++) v_sq += vv[(size_t)i * dv + i];
    return (vkv_ols_sums){.g = s->g + (size_t)h * dk * dk, .ldg = dk, .c = s->c + (size_t)h * dk * dv, .ldc = dv,
                          .v_sq = v_sq, .v_sum = s->v_sum + (size_t)h * dv, .n = (double)s->n};
}

/* The joint view (all heads' keys and values concatenated). */
static vkv_ols_sums layer_sums(const vkv_calib_sums *s, uint32_t n_kv, uint32_t dk, uint32_t dv)
{
    uint32_t Dk = n_kv * dk, Dv = n_kv * dv;
    double v_sq = 0;
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t i = 0; i < dv; i++) v_sq += s->vv[(size_t)h * dv * dv + (size_t)i * dv + i];
    return (vkv_ols_sums){.g = s->g_joint, .ldg = Dk, .c = s->c_joint, .ldc = Dv, .v_sq = v_sq, .v_sum = s->v_sum,
                          .n = (double)s->n};
}

/* Rows [row0, row0 + n_rows) of a 2-D weight, dequantized to double. */
static vkv_status weight_rows(const vkv_gguf *g, const char *name, uint32_t row0, uint32_t n_rows, uint32_t n_cols,
                              double *out)
{
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(g, name);
    if (!t || t->ne[0] != n_cols || t->ne[1] < row0 + n_rows || !vkv_dtype_get(t->type))
        return vkv_error(VKV_ERR_FORMAT, "tensor '%s' is missing or not [%u, >= %u]", name, n_cols, row0 + n_rows);
    size_t rb = vkv_dtype_row_bytes((vkv_dtype)t->type, n_cols);
    float *row = malloc(n_cols * sizeof *row);
    if (!row) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t r = 0; r < n_rows; r++) {
        vkv_dequantize_row((vkv_dtype)t->type, (const uint8_t *)t->data + (size_t)(row0 + r) * rb, row, n_cols);
        for (uint32_t e = 0; e < n_cols; e++) out[(size_t)r * n_cols + e] = row[e];
    }
    free(row);
    return VKV_OK;
}

/* The ridges tried when one is needed (--ridge auto, the joint maps). */
static const double ridge_ladder[] = {1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1};
#define N_LADDER (sizeof ridge_ladder / sizeof *ridge_ladder)

typedef struct solve_job {
    const vkv_gram_accum *a;
    const vkv_model *m;
    vkv_calib *c;
    double ridge;
    uint32_t next_layer;        /* work queue */
    pthread_mutex_t lock;
    vkv_status st;              /* first error */
    char msg[1024];
} solve_job;

static vkv_status solve_layer(solve_job *j, uint32_t l)
{
    vkv_calib *c = j->c;
    const vkv_hparams *hp = &j->m->hp;
    uint32_t n_kv = c->id.n_head_kv, dk = c->d_k, dv = c->d_v, Dk = n_kv * dk, Dv = n_kv * dv;
    const vkv_calib_sums *tr = vkv_gram_accum_sums(j->a, l, VKV_CALIB_TRAIN);
    const vkv_calib_sums *ho = vkv_gram_accum_sums(j->a, l, VKV_CALIB_HELDOUT);
    if (!ho->n) ho = tr; /* no held-out sequences: in-sample report */
    size_t wmax = (size_t)Dk * Dv;
    double *w = malloc(wmax * sizeof *w);
    double *wk = malloc((size_t)dk * hp->n_embd * sizeof *wk), *wv = malloc((size_t)dv * hp->n_embd * sizeof *wv);
    vkv_status st = VKV_OK;
    if (!w || !wk || !wv) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto out;
    }
    char what[64], kname[64], vname[64];
    snprintf(kname, sizeof kname, "blk.%u.attn_k.weight", l);
    snprintf(vname, sizeof vname, "blk.%u.attn_v.weight", l);
    for (uint32_t h = 0; h < n_kv; h++) {
        size_t i = (size_t)l * n_kv + h;
        vkv_ols_sums ts = head_sums(tr, dk, dv, h), hs = head_sums(ho, dk, dv, h);
        snprintf(what, sizeof what, "layer %u KV head %u", l, h);
        if ((st = vkv_ols_fit(&ts, dk, dv, j->ridge, what, w))) goto out;
        float *dst = c->w + i * dk * dv;
        for (size_t e = 0; e < (size_t)dk * dv; e++) dst[e] = (float)w[e];
        c->r2[i] = vkv_ols_r2(&hs, dk, dv, w);
        c->r2_train[i] = vkv_ols_r2(&ts, dk, dv, w);
        c->rel_err[i] = hs.v_sq > 0 ? vkv_ols_residual(&hs, dk, dv, w) / hs.v_sq : NAN;
        /* Moore-Penrose from the model's own weights; a failure only leaves NaN. */
        if (!weight_rows(j->m->gguf, kname, h * dk, dk, hp->n_embd, wk) &&
            !weight_rows(j->m->gguf, vname, h * dv, dv, hp->n_embd, wv) &&
            !vkv_ols_moore_penrose(wk, wv, dk, dv, hp->n_embd, w))
            c->r2_mp[i] = vkv_ols_r2(&hs, dk, dv, w);
    }
    /* One joint map over all KV heads (--vector-map joint; a singular joint
     * Gram leaves NaN, and vkv_calib_solve then drops every joint map). */
    if (tr->g_joint) {
        vkv_ols_sums tj = layer_sums(tr, n_kv, dk, dv), hj = layer_sums(ho, n_kv, dk, dv);
        snprintf(what, sizeof what, "layer %u (all KV heads)", l);
        /* The joint keys may span fewer dimensions than the per-head ones
         * (heads can be linearly dependent): escalate its ridge if needed. */
        double r = j->ridge;
        for (size_t i = 0; i < N_LADDER && !vkv_ols_solvable(&tj, Dk, r); i++)
            if (ridge_ladder[i] > r) r = ridge_ladder[i];
        if (!vkv_ols_fit(&tj, Dk, Dv, r, what, w)) {
            c->r2_joint[l] = vkv_ols_r2(&hj, Dk, Dv, w);
            c->ridge_joint[l] = r;
            float *dst = c->w_joint + (size_t)l * Dk * Dv;
            for (size_t e = 0; e < (size_t)Dk * Dv; e++) dst[e] = (float)w[e];
        }
    }
out:
    free(w);
    free(wk);
    free(wv);
    return st;
}

static void *solve_worker(void *arg)
{
    solve_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t l = j->st ? j->c->id.n_layer : j->next_layer++;
        pthread_mutex_unlock(&j->lock);
        if (l >= j->c->id.n_layer) return NULL;
        vkv_status st = solve_layer(j, l);
        if (st) {
            pthread_mutex_lock(&j->lock);
            if (!j->st) {
                j->st = st;
                snprintf(j->msg, sizeof j->msg, "%s", vkv_last_error());
            }
            pthread_mutex_unlock(&j->lock);
        }
    }
}

vkv_status vkv_calib_solve(const vkv_gram_accum *a, const vkv_model *m, double ridge, vkv_calib **out)
{
    *out = NULL;
    vkv_calib_identity id;
    vkv_status st = vkv_calib_identity_of(m, &id);
    if (st) return st;
    const vkv_calib_sums *s0 = vkv_gram_accum_sums(a, 0, VKV_CALIB_TRAIN);
    if (!s0 || !s0->n) return vkv_error(VKV_ERR_ARG, "calibration: no training tokens were accumulated");
    vkv_calib *c = vkv_calib_alloc(&id);
    if (!c) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_gguf_str name;
    if (!vkv_gguf_get_str(m->gguf, "general.name", &name) && name.len)
        snprintf(c->model_name, sizeof c->model_name, "%.*s", (int)(name.len < 255 ? name.len : 255), name.data);
    else {
        const char *b = strrchr(m->path, '/');
        snprintf(c->model_name, sizeof c->model_name, "%.255s", b ? b + 1 : m->path);
    }
    /* Every per-head map must be solvable with the ridge: count those that
     * are not, and find the smallest power of ten that fixes them all. */
    uint32_t L = id.n_layer, H = id.n_head_kv;
    double want = ridge < 0 ? 0 : ridge;
    uint32_t n_bad = 0, bad_l = 0, bad_h = 0;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t h = 0; h < H; h++) {
            vkv_ols_sums ts = head_sums(vkv_gram_accum_sums(a, l, VKV_CALIB_TRAIN), c->d_k, c->d_v, h);
            if (!vkv_ols_solvable(&ts, c->d_k, want) && !n_bad++) {
                bad_l = l;
                bad_h = h;
            }
        }
    if (n_bad) {
        double enough = NAN;
        for (size_t r = 0; r < N_LADDER && isnan(enough); r++) {
            if (ridge_ladder[r] <= want) continue;
            bool all = true;
            for (uint32_t l = 0; l < L && all; l++)
                for (uint32_t h = 0; h < H && all; h++) {
                    vkv_ols_sums ts = head_sums(vkv_gram_accum_sums(a, l, VKV_CALIB_TRAIN), c->d_k, c->d_v, h);
                    all = vkv_ols_solvable(&ts, c->d_k, ridge_ladder[r]);
                }
            if (all) enough = ridge_ladder[r];
        }
        if (ridge < 0 && !isnan(enough)) {
            want = enough;
        } else {
            /* The first failing head's own message, then the way out. */
            char what[64], first[700];
            double *w = malloc(sizeof *w * c->d_k * c->d_v);
            vkv_ols_sums ts = head_sums(vkv_gram_accum_sums(a, bad_l, VKV_CALIB_TRAIN), c->d_k, c->d_v, bad_h);
            snprintf(what, sizeof what, "layer %u KV head %u", bad_l, bad_h);
            if (w) vkv_ols_fit(&ts, c->d_k, c->d_v, want, what, w);
            snprintf(first, sizeof first, "%s", w ? vkv_last_error() : what);
            free(w);
            vkv_calib_free(c);
            if (isnan(enough))
                return vkv_error(VKV_ERR_CHECK, "%s (%u of %u maps fail); no ridge up to 0.1 makes them solvable", first,
                                 n_bad, L * H);
            return vkv_error(VKV_ERR_CHECK, "%s (%u of %u maps fail); --ridge %g makes every map solvable (or --ridge auto)",
                             first, n_bad, L * H, enough);
        }
    }
    c->ridge = ridge = want;
    const size_t joint_floats = (size_t)L * H * c->d_k * H * c->d_v;
    if (s0->g_joint && !(c->w_joint = calloc(joint_floats, sizeof *c->w_joint))) {
        vkv_calib_free(c);
        return vkv_error(VKV_ERR_OOM, "out of host memory for the joint maps");
    }
    /* Layers are independent: solve them on all cores (the joint maps of big
     * models are [n_kv·d_k]² systems per layer). */
    solve_job j = {.a = a, .m = m, .c = c, .ridge = ridge};
    pthread_mutex_init(&j.lock, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t n_threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (uint32_t)ncpu;
    if (n_threads > id.n_layer) n_threads = id.n_layer;
    pthread_t th[64];
    uint32_t started = 0;
    for (uint32_t t = 1; t < n_threads; t++)
        if (!pthread_create(&th[started], NULL, solve_worker, &j)) started++;
    solve_worker(&j);
    for (uint32_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.st) {
        vkv_calib_free(c);
        return vkv_error(j.st, "%s", j.msg);
    }
    for (uint32_t l = 0; l < L && c->w_joint; l++)
        if (isnan(c->ridge_joint[l])) { /* joint maps are all or nothing */
            free(c->w_joint);
            c->w_joint = NULL;
        }
    *out = c;
    return VKV_OK;
}

double vkv_calib_layer_mean(const vkv_calib *c, const double *per_head, uint32_t layer)
{
    double s = 0;
    for (uint32_t h = 0; h < c->id.n_head_kv; h++) s += per_head[(size_t)layer * c->id.n_head_kv + h];
    return s / c->id.n_head_kv;
}

double vkv_calib_mean(const vkv_calib *c, const double *per_head)
{
    double s = 0;
    size_t n = (size_t)c->id.n_layer * c->id.n_head_kv;
    for (size_t i = 0; i < n; i++) s += per_head[i];
    return s / n;
}

static double mean_n(const double *x, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++) s += x[i];
    return s / n;
}

/* ---------------- report ---------------- */

void vkv_calib_print_report(const vkv_calib *c, FILE *f)
{
    uint32_t L = c->id.n_layer, H = c->id.n_head_kv;
    bool in_sample = c->corpus.n_seq_heldout == 0;
    fprintf(f, "%s R² of v ≈ W k (pre-RoPE keys), %s; per-head maps are stored, the joint map (one per layer over\n"
               "all %u KV heads) and Moore-Penrose W_V·W_K⁺ are for comparison; rel.err = Σ‖v−Wk‖²/Σ‖v‖² (per-head map)\n",
            in_sample ? "in-sample" : "held-out", in_sample ? "no held-out sequences" : "fitted on the training sequences", H);
    /* Per-head columns, at most 8 per line of the table. */
    uint32_t shown = H < 8 ? H : 8;
    fprintf(f, "%5s ", "layer");
    for (uint32_t h = 0; h < shown; h++) fprintf(f, " %6s%-2u", "head ", h);
    if (H > shown) fprintf(f, " %4s", "...");
    fprintf(f, " %8s %8s %9s %9s %8s\n", "mean", "joint", "MP mean", "MP min", "rel.err");
    bool ols_beats_mp = true, any_escalated = false;
    for (uint32_t l = 0; l < L; l++) {
        fprintf(f, "%5u ", l);
        for (uint32_t h = 0; h < shown; h++) fprintf(f, " %8.4f", c->r2[(size_t)l * H + h]);
        if (H > shown) fprintf(f, " %4s", "");
        double mp_min = INFINITY;
        for (uint32_t h = 0; h < H; h++) mp_min = fmin(mp_min, c->r2_mp[(size_t)l * H + h]);
        double mean = vkv_calib_layer_mean(c, c->r2, l), mp = vkv_calib_layer_mean(c, c->r2_mp, l);
        bool escalated = c->ridge_joint[l] > c->ridge;
        any_escalated |= escalated;
        if (isnan(c->r2_joint[l])) fprintf(f, " %8.4f %8s", mean, "-");
        else fprintf(f, " %8.4f %7.4f%c", mean, c->r2_joint[l], escalated ? '*' : ' ');
        fprintf(f, " %9.3f %9.3f %8.4f\n", mp, mp_min, vkv_calib_layer_mean(c, c->rel_err, l));
        if (!(mean > mp) && !isnan(mp)) ols_beats_mp = false;
    }
    fprintf(f, "%5s ", "mean");
    for (uint32_t h = 0; h < shown; h++) fprintf(f, " %8s", "");
    if (H > shown) fprintf(f, " %4s", "");
    double jm = mean_n(c->r2_joint, L);
    if (isnan(jm)) fprintf(f, " %8.4f %8s", vkv_calib_mean(c, c->r2), "-");
    else fprintf(f, " %8.4f %8.4f", vkv_calib_mean(c, c->r2), jm);
    fprintf(f, " %9.3f %9s %8.4f\n", vkv_calib_mean(c, c->r2_mp), "", vkv_calib_mean(c, c->rel_err));
    if (any_escalated)
        fprintf(f, "* the joint map of this layer needed a larger ridge (its keys span fewer dimensions): see the JSON\n");
    fprintf(f, "per-head OLS %s Moore-Penrose on every layer; in-sample (training) R² mean %.4f; ridge %g\n",
            ols_beats_mp ? "beats" : "does NOT beat", vkv_calib_mean(c, c->r2_train), c->ridge);
}

static void json_arr(vkv_json_writer *w, const double *x, size_t n)
{
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) vkv_json_num(w, x[i]);
    vkv_json_end_array(w);
}

vkv_status vkv_calib_write_json(const vkv_calib *c, const char *path, double tokens_per_s)
{
    vkv_out out;
    vkv_status st = vkv_out_open(&out, path);
    if (st) return st;
    FILE *f = out.f;
    uint32_t L = c->id.n_layer, H = c->id.n_head_kv;
    vkv_json_writer w;
    vkv_json_init(&w, f, true);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "version"); vkv_json_uint(&w, c->version);
    vkv_json_key(&w, "model");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "name"); vkv_json_str(&w, c->model_name);
    vkv_json_key(&w, "architecture"); vkv_json_str(&w, c->id.arch);
    vkv_json_key(&w, "n_layer"); vkv_json_uint(&w, L);
    vkv_json_key(&w, "n_head_kv"); vkv_json_uint(&w, H);
    vkv_json_key(&w, "head_dim"); vkv_json_uint(&w, c->id.head_dim);
    vkv_json_key(&w, "head_dim_v"); vkv_json_uint(&w, c->id.head_dim_v);
    vkv_json_key(&w, "n_embd"); vkv_json_uint(&w, c->id.n_embd);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)c->id.kv_hash);
    vkv_json_key(&w, "kv_hash"); vkv_json_str(&w, hash);
    vkv_json_end_object(&w);
    vkv_json_key(&w, "corpus");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "tokens"); vkv_json_uint(&w, c->corpus.n_tokens);
    vkv_json_key(&w, "tokens_heldout"); vkv_json_uint(&w, c->corpus.n_tokens_heldout);
    vkv_json_key(&w, "sequences"); vkv_json_uint(&w, c->corpus.n_seq);
    vkv_json_key(&w, "sequences_heldout"); vkv_json_uint(&w, c->corpus.n_seq_heldout);
    vkv_json_key(&w, "seq_len"); vkv_json_uint(&w, c->corpus.seq_len);
    vkv_json_key(&w, "byte_tokens"); vkv_json_bool(&w, c->corpus.byte_tokens);
    vkv_json_key(&w, "sources");
    vkv_json_begin_array(&w);
    for (uint32_t i = 0; i < c->corpus.n_sources; i++) vkv_json_str(&w, c->corpus.sources[i]);
    vkv_json_end_array(&w);
    vkv_json_end_object(&w);
    vkv_json_key(&w, "ridge"); vkv_json_num(&w, c->ridge);
    vkv_json_key(&w, "heldout_frac"); vkv_json_num(&w, c->heldout_frac);
    vkv_json_key(&w, "r2_is_heldout"); vkv_json_bool(&w, c->corpus.n_seq_heldout > 0);
    if (tokens_per_s > 0) {
        vkv_json_key(&w, "tokens_per_s"); vkv_json_num(&w, tokens_per_s);
    }
    vkv_json_key(&w, "summary");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "r2_mean"); vkv_json_num(&w, vkv_calib_mean(c, c->r2));
    vkv_json_key(&w, "r2_joint_mean"); vkv_json_num(&w, mean_n(c->r2_joint, L));
    vkv_json_key(&w, "r2_mp_mean"); vkv_json_num(&w, vkv_calib_mean(c, c->r2_mp));
    vkv_json_key(&w, "r2_train_mean"); vkv_json_num(&w, vkv_calib_mean(c, c->r2_train));
    vkv_json_key(&w, "rel_err_mean"); vkv_json_num(&w, vkv_calib_mean(c, c->rel_err));
    vkv_json_end_object(&w);
    vkv_json_key(&w, "layers");
    vkv_json_begin_array(&w);
    for (uint32_t l = 0; l < L; l++) {
        size_t o = (size_t)l * H;
        vkv_json_begin_object(&w);
        vkv_json_key(&w, "layer"); vkv_json_uint(&w, l);
        vkv_json_key(&w, "r2_mean"); vkv_json_num(&w, vkv_calib_layer_mean(c, c->r2, l));
        vkv_json_key(&w, "r2_joint"); vkv_json_num(&w, c->r2_joint[l]);
        vkv_json_key(&w, "ridge_joint"); vkv_json_num(&w, c->ridge_joint[l]);
        vkv_json_key(&w, "r2_mp_mean"); vkv_json_num(&w, vkv_calib_layer_mean(c, c->r2_mp, l));
        vkv_json_key(&w, "r2"); json_arr(&w, c->r2 + o, H);
        vkv_json_key(&w, "r2_train"); json_arr(&w, c->r2_train + o, H);
        vkv_json_key(&w, "r2_mp"); json_arr(&w, c->r2_mp + o, H);
        vkv_json_key(&w, "rel_err"); json_arr(&w, c->rel_err + o, H);
        vkv_json_end_object(&w);
    }
    vkv_json_end_array(&w);
    vkv_json_end_object(&w);
    fputc('\n', f);
    /* every write above is checked by the commit (ferror) */
    return vkv_out_commit(&out);
}
