#include "conform/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_WORD 0xA5C3E1F7u

/* Makes room for k more results, so that the pointers new_result hands out
 * stay valid while a case fills several of them. */
bool conform_reserve_results(conform_ctx *c, size_t k)
{
    if (c->n_results + k <= c->cap_results) return true;
    size_t cap = c->cap_results ? c->cap_results : 64;
    while (cap < c->n_results + k) cap *= 2;
    conform_result *r = realloc(c->results, cap * sizeof *r);
    if (!r) return false;
    c->results = r;
    c->cap_results = cap;
    return true;
}

conform_result *conform_new_result(conform_ctx *c, const char *op, const char *type, const char *shape)
{
    if (c->n_results == c->cap_results) {
        size_t cap = c->cap_results ? c->cap_results * 2 : 64;
        conform_result *r = realloc(c->results, cap * sizeof *r);
        if (!r) return NULL;
        c->results = r;
        c->cap_results = cap;
    }
    conform_result *r = &c->results[c->n_results++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->type, sizeof r->type, "%s", type);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    return r;
}

float *conform_random_f32(conform_ctx *c, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p)
        for (size_t i = 0; i < n; i++) p[i] = vkv_rng_uniform(&c->rng, -1.0f, 1.0f);
    return p;
}


vkv_status conform_guarded_create(conform_ctx *c, uint64_t bytes, const void *init, guarded *g)
{
    vkv_status st;
    g->bytes = bytes;
    uint64_t total = c->guard_bytes * 2 + ((bytes + 15) & ~15ull);
    if ((st = vkv_buffer_create(c->gpu, total, VKV_MEM_DEVICE, "a conformance tensor", &g->buf))) return st;
    g->view = (vkv_view){g->buf, c->guard_bytes};
    if ((st = vkv_buffer_fill(c->gpu, g->buf, 0, vkv_buffer_size(g->buf), GUARD_WORD))) return st;
    if (init && bytes) return vkv_buffer_upload(c->gpu, g->buf, c->guard_bytes, init, bytes);
    return VKV_OK;
}

vkv_status conform_weight_create(conform_ctx *c, vkv_dtype t, uint32_t k, uint64_t rows, const void *rows_file, guarded *g)
{
    const uint64_t bytes = vkv_dtype_device_row_bytes(t, k) * rows;
    void *dev = malloc(bytes ? bytes : 1);
    if (!dev) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_dtype_rows_to_device(t, k, rows_file, dev, rows);
    vkv_status st = conform_guarded_create(c, bytes, dev, g);
    free(dev);
    return st;
}

/* Downloads the data and checks the guard words around it. */
vkv_status conform_guarded_read(conform_ctx *c, guarded *g, void *out, bool *guards_ok)
{
    uint64_t total = vkv_buffer_size(g->buf);
    uint8_t *all = malloc(total);
    if (!all) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = vkv_buffer_download(c->gpu, g->buf, 0, all, total);
    if (!st) {
        memcpy(out, all + c->guard_bytes, g->bytes);
        *guards_ok = true;
        for (uint64_t i = 0; i < total; i += 4) {
            if (i >= c->guard_bytes && i < c->guard_bytes + g->bytes) continue;
            /* Bytes between the data's end and the next word are padding. */
            if (i >= c->guard_bytes + (g->bytes & ~3ull) && i < c->guard_bytes + ((g->bytes + 3) & ~3ull)) continue;
            uint32_t w;
            memcpy(&w, all + i, 4);
            if (w != GUARD_WORD) *guards_ok = false;
        }
    }
    free(all);
    return st;
}

void conform_guarded_destroy(conform_ctx *c, guarded *g)
{
    vkv_buffer_destroy(c->gpu, g->buf);
    g->buf = NULL;
}

/* NMSE of gpu against ref; nan_mismatch when one side is non-finite where the
 * other is not. */
double conform_nmse_f32(const float *ref, const float *gpu, size_t n, bool *nan_mismatch)
{
    double num = 0, den = 0;
    *nan_mismatch = false;
    for (size_t i = 0; i < n; i++) {
        bool rf = isfinite(ref[i]), gf = isfinite(gpu[i]);
        if (rf != gf) *nan_mismatch = true;
        if (!rf || !gf) continue;
        double d = (double)gpu[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

void conform_finish(conform_result *r, double nmse, bool nan_mismatch, bool guards_ok, double threshold, double ms)
{
    r->nmse = nmse;
    r->threshold = threshold;
    r->gpu_ms = ms;
    r->pass = !nan_mismatch && guards_ok && nmse <= threshold;
    if (nan_mismatch) snprintf(r->note, sizeof r->note, "NaN/Inf mismatch");
    else if (!guards_ok) snprintf(r->note, sizeof r->note, "write outside the output (guard zone changed)");
}

void conform_finish_bitwise(conform_result *r, const float *want, const float *got, size_t n, bool guards_ok, double ms)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&got[i], &want[i], 4) != 0;
    /* the NMSE as the verdict's number, at least 1e-30 when any bit differs */
    bool nanm;
    double err = conform_nmse_f32(want, got, n, &nanm);
    conform_finish(r, differ ? (err > 1e-30 ? err : 1e-30) : 0.0, nanm, guards_ok, NMSE_EXACT, ms);
    if (differ && r->note[0] == 0) snprintf(r->note, sizeof r->note, "%zu of %zu floats differ", differ, n);
}

vkv_status conform_run_recorded(conform_ctx *c, vkv_status (*rec)(conform_ctx *, void *), void *arg, double *ms)
{
    vkv_status st;
    if ((st = vkv_cmd_begin(c->gpu))) return st;
    st = rec(c, arg);
    if (st) return vkv_cmd_abort(c->gpu, st); /* the device stays usable; the op's error wins */
    if ((st = vkv_cmd_submit(c->gpu))) return st;
    *ms = vkv_gpu_last_submit_ns(c->gpu) / 1e6;
    return VKV_OK;
}

/* Fills a cache's slots n_kv..n_ctx_max-1 with NaN: a kernel that reads a
 * slot it must not see turns the output NaN and fails the case. */
void conform_poison_unused_slots(const vkv_attn_params *p, vkv_dtype t, void *cache)
{
    const size_t row_bytes = vkv_kv_row_bytes(t, p->head_dim);
    const uint16_t nan16 = 0x7e00u;
    const float nan32 = NAN;
    for (uint32_t h = 0; h < p->n_kv_head; h++)
        for (uint32_t j = p->n_kv; j < p->n_ctx_max; j++) {
            uint8_t *row = (uint8_t *)cache + ((size_t)h * p->n_ctx_max + j) * row_bytes;
            if (t == VKV_F32) {
                for (uint32_t d = 0; d < p->head_dim; d++) memcpy(row + 4 * d, &nan32, 4);
            } else if (t == VKV_F16) {
                for (uint32_t d = 0; d < p->head_dim; d++) memcpy(row + 2 * d, &nan16, 2);
            } else { /* a NaN scale in every block */
                for (uint32_t b = 0; 32 * b < p->head_dim; b++) memcpy(row + b * (t == VKV_Q8_0 ? 34 : 18), &nan16, 2);
            }
        }
}

void conform_fill_cache(conform_ctx *c, vkv_dtype t, void *cache, size_t rows, uint32_t hd, float scale)
{
    float *row = malloc(sizeof *row * hd);
    for (size_t r = 0; r < rows; r++) {
        for (uint32_t d = 0; d < hd; d++) row[d] = vkv_rng_uniform(&c->rng, -scale, scale);
        vkv_kv_cache_store(t, cache, 1, (uint32_t)rows, hd, (uint32_t)r, row, 1);
    }
    free(row);
}

const char *conform_matmul_path_name(vkv_matmul_path p)
{
    return p == VKV_MATMUL_MATVEC        ? "matvec"
           : p == VKV_MATMUL_MATVEC_COLS ? "matvec_cols"
           : p == VKV_MATMUL_COOPMAT     ? "matmul_coopmat"
                                         : "matmul_tiled";
}
