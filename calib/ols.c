/* OLS calibration numerics in double precision (see ols.h). */
#include "ols.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t vkv_cholesky(double *a, uint32_t n, double *pivot)
{
    /* A pivot at or below this fraction of the largest diagonal entry is
     * treated as zero: the factor would be numerically meaningless. */
    double max_diag = 0;
    for (uint32_t i = 0; i < n; i++)
        if (fabs(a[(size_t)i * n + i]) > max_diag) max_diag = fabs(a[(size_t)i * n + i]);
    double tol = 1e-12 * max_diag;
    for (uint32_t j = 0; j < n; j++) {
        double *rj = a + (size_t)j * n;
        double d = rj[j];
        for (uint32_t k = 0; k < j; k++) d -= rj[k] * rj[k];
        if (!(d > tol)) { /* also catches NaN */
            if (pivot) *pivot = d;
            return j + 1;
        }
        double ljj = sqrt(d);
        rj[j] = ljj;
        for (uint32_t i = j + 1; i < n; i++) {
            double *ri = a + (size_t)i * n;
            double s = ri[j];
            for (uint32_t k = 0; k < j; k++) s -= ri[k] * rj[k];
            ri[j] = s / ljj;
        }
        for (uint32_t k = j + 1; k < n; k++) rj[k] = 0;
    }
    return 0;
}

void vkv_cholesky_solve(const double *l, uint32_t n, double *b, uint32_t nrhs, uint32_t ldb)
{
    /* Row-oriented so the inner loops run over contiguous right-hand sides. */
    for (uint32_t i = 0; i < n; i++) { /* L Y = B */
        double *bi = b + (size_t)i * ldb;
        for (uint32_t k = 0; k < i; k++) {
            double lik = l[(size_t)i * n + k];
            const double *bk = b + (size_t)k * ldb;
            for (uint32_t c = 0; c < nrhs; c++) bi[c] -= lik * bk[c];
        }
        double inv = 1.0 / l[(size_t)i * n + i];
        for (uint32_t c = 0; c < nrhs; c++) bi[c] *= inv;
    }
    for (uint32_t i = n; i-- > 0;) { /* Lᵀ X = Y */
        double *bi = b + (size_t)i * ldb;
        for (uint32_t k = i + 1; k < n; k++) {
            double lki = l[(size_t)k * n + i];
            const double *bk = b + (size_t)k * ldb;
            for (uint32_t c = 0; c < nrhs; c++) bi[c] -= lki * bk[c];
        }
        double inv = 1.0 / l[(size_t)i * n + i];
        for (uint32_t c = 0; c < nrhs; c++) bi[c] *= inv;
    }
}

/* Solves A X = B (A [dk, dk] SPD, B [dk, dv]) and stores w = Xᵀ [dv, dk].
 * a and b are overwritten. Returns the failing pivot index or 0. */
static uint32_t solve_transposed(double *a, double *b, uint32_t dk, uint32_t dv, double *w, double *pivot)
{
    uint32_t bad = vkv_cholesky(a, dk, pivot);
    if (bad) return bad;
    vkv_cholesky_solve(a, dk, b, dv, dv);
    for (uint32_t i = 0; i < dv; i++)
        for (uint32_t j = 0; j < dk; j++) w[(size_t)i * dk + j] = b[(size_t)j * dv + i];
    return 0;
}

/* a = G/n + ridge·tr(G/n)/dk·I [dk, dk]; b = C/n [dk, dv] when b is given. */
static void normal_matrix(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, double ridge, double *a, double *b)
{
    double inv_n = 1.0 / s->n, mean_diag = 0;
    for (uint32_t i = 0; i < dk; i++) mean_diag += s->g[(size_t)i * s->ldg + i] * inv_n;
    mean_diag /= dk;
    for (uint32_t i = 0; i < dk; i++) {
        for (uint32_t j = 0; j < dk; j++) a[(size_t)i * dk + j] = s->g[(size_t)i * s->ldg + j] * inv_n;
        a[(size_t)i * dk + i] += ridge * mean_diag;
        if (b)
            for (uint32_t j = 0; j < dv; j++) b[(size_t)i * dv + j] = s->c[(size_t)i * s->ldc + j] * inv_n;
    }
}

bool vkv_ols_solvable(const vkv_ols_sums *s, uint32_t dk, double ridge)
{
    if (!(s->n > 0) || !(ridge >= 0)) return false;
    double *a = malloc(sizeof *a * dk * dk);
    if (!a) return false;
    normal_matrix(s, dk, 0, ridge, a, NULL);
    bool ok = vkv_cholesky(a, dk, NULL) == 0;
    free(a);
    return ok;
}

vkv_status vkv_ols_fit(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, double ridge, const char *what, double *w)
{
    if (!(s->n > 0)) return vkv_error(VKV_ERR_ARG, "%s: no tokens to fit the map on", what);
    if (!(ridge >= 0)) return vkv_error(VKV_ERR_ARG, "%s: the ridge must be >= 0", what);
    double *a = malloc(sizeof *a * dk * dk), *b = malloc(sizeof *b * dk * dv);
    if (!a || !b) {
        free(a);
        free(b);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    normal_matrix(s, dk, dv, ridge, a, b);
    double pivot = 0;
    uint32_t bad = solve_transposed(a, b, dk, dv, w, &pivot);
    free(a);
    free(b);
    if (!bad) return VKV_OK;
    if (ridge == 0)
        return vkv_error(VKV_ERR_CHECK,
                         "%s: the keys' Gram matrix is not positive definite (pivot %u of %u is %.3g): the keys span "
                         "fewer than %u dimensions on this corpus (to the precision of the sums); add a ridge (--ridge)",
                         what, bad, dk, pivot, dk);
    return vkv_error(VKV_ERR_CHECK,
                     "%s: the keys' Gram matrix plus the ridge %g is not positive definite (pivot %u of %u is %.3g); "
                     "use a larger --ridge",
                     what, ridge, bad, dk, pivot);
}

double vkv_ols_residual(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, const double *w)
{
    double cross = 0, quad = 0;
    for (uint32_t i = 0; i < dv; i++) {
        const double *wi = w + (size_t)i * dk;
        for (uint32_t a = 0; a < dk; a++) {
            cross += wi[a] * s->c[(size_t)a * s->ldc + i];
            const double *ga = s->g + (size_t)a * s->ldg;
            double t = 0;
            for (uint32_t b = 0; b < dk; b++) t += ga[b] * wi[b];
            quad += wi[a] * t;
        }
    }
    double r = s->v_sq - 2 * cross + quad;
    return r > 0 ? r : 0;
}

double vkv_ols_total(const vkv_ols_sums *s, uint32_t dv)
{
    if (!(s->n > 0)) return NAN;
    double m2 = 0;
    for (uint32_t i = 0; i < dv; i++) m2 += s->v_sum[i] * s->v_sum[i];
    return s->v_sq - m2 / s->n;
}

double vkv_ols_r2(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, const double *w)
{
    double tot = vkv_ols_total(s, dv);
    if (!(tot > 0)) return NAN;
    return 1.0 - vkv_ols_residual(s, dk, dv, w) / tot;
}

vkv_status vkv_ols_moore_penrose(const double *wk, const double *wv, uint32_t dk, uint32_t dv, uint32_t n_embd,
                                 double *w)
{
    double *a = malloc(sizeof *a * dk * dk), *b = malloc(sizeof *b * dk * dv);
    if (!a || !b) {
        free(a);
        free(b);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    /* a = W_K W_Kᵀ, b = W_K W_Vᵀ: w = (a^{-1} b)ᵀ = W_V W_Kᵀ (W_K W_Kᵀ)^{-1}. */
    for (uint32_t i = 0; i < dk; i++) {
        const double *ki = wk + (size_t)i * n_embd;
        for (uint32_t j = 0; j < dk; j++) {
            const double *kj = wk + (size_t)j * n_embd;
            double t = 0;
            for (uint32_t e = 0; e < n_embd; e++) t += ki[e] * kj[e];
            a[(size_t)i * dk + j] = t;
        }
        for (uint32_t j = 0; j < dv; j++) {
            const double *vj = wv + (size_t)j * n_embd;
            double t = 0;
            for (uint32_t e = 0; e < n_embd; e++) t += ki[e] * vj[e];
            b[(size_t)i * dv + j] = t;
        }
    }
    double pivot = 0;
    uint32_t bad = solve_transposed(a, b, dk, dv, w, &pivot);
    free(a);
    free(b);
    if (bad)
        return vkv_error(VKV_ERR_CHECK, "W_K W_Kᵀ is singular (pivot %u of %u is %.3g): W_K has no right inverse", bad,
                         dk, pivot);
    return VKV_OK;
}

void vkv_ref_gram(const vkv_gram_params *p, const float *x, const float *y, double *out)
{
    for (uint32_t b = 0; b < p->n_blocks; b++)
        for (uint32_t i = 0; i < p->m; i++)
            for (uint32_t j = 0; j < p->n; j++) {
                double s = 0;
                for (uint32_t t = 0; t < p->n_tok; t++) {
                    double xv = p->x_ones ? 1.0 : x[(size_t)t * p->ldx + p->x0 + (size_t)b * p->x_step + i];
                    s += xv * y[(size_t)t * p->ldy + p->y0 + (size_t)b * p->y_step + j];
                }
                out[((size_t)b * p->m + i) * p->n + j] = s;
            }
}

