/* The numerical core of the OLS calibration, in double precision and free of
 * any device code (unit-tested on its own):
 *
 *   - Cholesky factorisation and solves of symmetric positive definite systems;
 *   - the OLS map from streamed sums: W = (G/n + λI)^{-1} (C/n), transposed to
 *     W[d_v, d_k] so that v̂ = W k, from G = Σ k kᵀ and C = Σ k vᵀ;
 *   - the residual Σ ||v - W k||² and R² of a map evaluated from the sums of a
 *     token set alone (no activations stored):
 *       Σ ||v - W k||² = tr(V) - 2 tr(W C) + tr(W G Wᵀ),   tr(V) = Σ ||v||²,
 *       Σ ||v - v̄||²  = tr(V) - ||Σ v||² / n;
 *   - the scalar reference of the gram shader (shaders/gram.comp).
 *
 * Matrices are row-major; a block inside a bigger matrix is given by its
 * first element and the leading dimension (elements between rows). */
#ifndef VKV_CALIB_OLS_H
#define VKV_CALIB_OLS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hash.h"
#include "core/status.h"

/* In-place Cholesky A = L Lᵀ of the n x n symmetric matrix a (only the lower
 * triangle is read; L overwrites it, the strict upper triangle is zeroed).
 * Returns 0, or the 1-based index of the first pivot that is not positive
 * (then *pivot, if given, receives its value) -- a is then not positive
 * definite (numerically). */
uint32_t vkv_cholesky(double *a, uint32_t n, double *pivot);

/* Solves (L Lᵀ) X = B in place for B [n, nrhs] (leading dimension ldb) with L
 * from vkv_cholesky. */
void vkv_cholesky_solve(const double *l, uint32_t n, double *b, uint32_t nrhs, uint32_t ldb);

/* Sums of one token set for one map: G = Σ k kᵀ [dk, dk], C = Σ k vᵀ [dk, dv],
 * v_sq = Σ ||v||², v_sum = Σ v [dv], n tokens. */
typedef struct vkv_ols_sums {
    const double *g;
    uint32_t ldg;
    const double *c;
    uint32_t ldc;
    double v_sq;
    const double *v_sum;
    double n;
} vkv_ols_sums;

/* w[dv, dk] = ((G/n + λ I)^{-1} C/n)^T with λ = ridge · tr(G/n) / dk: the
 * ridge is relative to the keys' mean second moment, so its effect depends
 * neither on the corpus size nor on the scale of the keys.
 * VKV_ERR_CHECK when G/n + ridge I is not positive definite (the message names
 * the pivot and suggests a ridge; `what` prefixes it, e.g. "layer 3 KV head 1"). */
vkv_status vkv_ols_fit(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, double ridge, const char *what, double *w);

/* Whether vkv_ols_fit would succeed with this ridge (G/n + λI factors). */
bool vkv_ols_solvable(const vkv_ols_sums *s, uint32_t dk, double ridge);

/* Σ ||v - W k||² over the token set (clamped at 0 against rounding). */
double vkv_ols_residual(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, const double *w);
/* Σ ||v - v̄||² with v̄ the set's own mean. */
double vkv_ols_total(const vkv_ols_sums *s, uint32_t dv);
/* 1 - residual / total (NaN when the set is empty or has no variance). */
double vkv_ols_r2(const vkv_ols_sums *s, uint32_t dk, uint32_t dv, const double *w);

/* The Moore-Penrose map W_V W_K^+ of one head from its weight rows
 * wk [dk, n_embd] and wv [dv, n_embd] (W_K full row rank):
 * W_K^+ = W_Kᵀ (W_K W_Kᵀ)^{-1}, so w[dv, dk] = W_V W_Kᵀ (W_K W_Kᵀ)^{-1}.
 * VKV_ERR_CHECK when W_K W_Kᵀ is singular. */
vkv_status vkv_ols_moore_penrose(const double *wk, const double *wv, uint32_t dk, uint32_t dv, uint32_t n_embd,
                                 double *w);

/* The gram shader's operation (shapes in calib/calib.h, vkv_gram_params):
 * out[b, i, j] = Σ_t x[t*ldx + x0 + b*x_step + i] * y[t*ldy + y0 + b*y_step + j],
 * accumulated in double (x taken as 1 when x_ones). */
typedef struct vkv_gram_params {
    uint32_t n_tok;           /* tokens (rows) summed over */
    uint32_t m, n;            /* each output block is [m, n] */
    uint32_t ldx, ldy;        /* floats from one token's row to the next */
    uint32_t x0, y0;          /* first column of block 0 */
    uint32_t x_step, y_step;  /* column advance from one block to the next */
    uint32_t n_blocks;        /* output blocks, stored one after the other */
    bool x_ones;              /* x ≡ 1 (not read): row 0 holds the column sums of y */
} vkv_gram_params;

void vkv_ref_gram(const vkv_gram_params *p, const float *x, const float *y, double *out);

/* vkv_fnv1a: core/hash.h */

#endif
