#include "viz/tier_dump.h"

#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/json_write.h"
#include "core/out_file.h"
#include "core/utf8.h"
#include "kvlayout/kv_layout.h"
#include "ref/ref_vector.h"

static void num_or_null(vkv_json_writer *w, double v)
{
    /* 4 significant digits for the per-head and per-layer figures */
    if (!isfinite(v)) {
        vkv_json_null(w);
        return;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%.4g", v);
    vkv_json_num(w, strtod(buf, NULL));
}

/* VECTOR's pool scope and its totals: K the scorer's own count, a the
 * approximation budget; keys K + a and values K - a (the byte equation). */
static void write_pool(vkv_json_writer *w, const vkv_vector_report *r)
{
    uint64_t k = 0, ret = 0, apx = 0;
    for (size_t i = 0; i < (size_t)r->n_layer * r->n_kv_head; i++) {
        k += r->n_kept[i];
        ret += r->n_ret[i];
        apx += r->n_apx[i];
    }
    vkv_json_key(w, "vector_pool");
    vkv_json_begin_object(w);
    vkv_json_key(w, "scope"); vkv_json_str(w, vkv_pool_scope_name(r->pool));
    vkv_json_key(w, "map"); vkv_json_str(w, vkv_vector_map_name(r->map));
    vkv_json_key(w, "kept"); vkv_json_uint(w, k);
    vkv_json_key(w, "a"); vkv_json_uint(w, ret + apx - k);
    vkv_json_key(w, "keys"); vkv_json_uint(w, ret + apx);
    vkv_json_key(w, "values"); vkv_json_uint(w, ret);
    vkv_json_end_object(w);
}

void vkv_json_tier_fractions(vkv_json_writer *w, const char *key, vkv_tier_fractions f)
{
    vkv_json_key(w, key);
    vkv_json_begin_object(w);
    vkv_json_key(w, "retained"); vkv_json_num(w, f.retained);
    vkv_json_key(w, "approximated"); vkv_json_num(w, f.approximated);
    vkv_json_key(w, "evicted"); vkv_json_num(w, f.evicted);
    vkv_json_end_object(w);
}

vkv_status vkv_tier_dump_write(const char *path, const vkv_tier_dump_info *in, const vkv_vector_report *r)
{
    if (!r->tiers || !r->scores) return vkv_error(VKV_ERR_ARG, "the tier dump needs the compression details");
    vkv_out out;
    vkv_status st = vkv_out_open(&out, path);
    if (st) return st;
    FILE *f = out.f;
    const vkv_hparams *hp = &in->model->hp;
    /* bytes in the tiers' types: keys of K's, values of V's */
    const uint64_t kb = vkv_kv_row_bytes(in->k_type, hp->head_dim), vb = vkv_kv_row_bytes(in->v_type, hp->head_dim);
    char types[24];
    if (in->k_type == in->v_type) snprintf(types, sizeof types, "%s", vkv_dtype_get(in->k_type)->name);
    else snprintf(types, sizeof types, "%s/%s", vkv_dtype_get(in->k_type)->name, vkv_dtype_get(in->v_type)->name);
    vkv_json_writer w;
    vkv_json_init(&w, f, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "vkvector_tier_dump"); vkv_json_int(&w, 1);
    vkv_json_key(&w, "model"); vkv_json_str(&w, in->model_path);
    vkv_json_key(&w, "arch"); vkv_json_str(&w, hp->arch_name);
    vkv_json_key(&w, "n_layer"); vkv_json_uint(&w, r->n_layer);
    vkv_json_key(&w, "n_kv_head"); vkv_json_uint(&w, r->n_kv_head);
    vkv_json_key(&w, "head_dim"); vkv_json_uint(&w, hp->head_dim);
    vkv_json_key(&w, "kv_type"); vkv_json_str(&w, types);
    vkv_json_key(&w, "press"); vkv_json_str(&w, in->press);
    vkv_json_key(&w, "compression"); vkv_json_num(&w, in->compression_ratio);
    vkv_json_key(&w, "approx_ratio"); vkv_json_num(&w, r->pa);
    vkv_json_key(&w, "vector"); vkv_json_bool(&w, in->vector);
    vkv_json_key(&w, "query_aware"); vkv_json_bool(&w, in->query_aware);
    vkv_json_key(&w, "n_context"); vkv_json_uint(&w, r->n);
    if (in->vector) write_pool(&w, r);
    vkv_json_tier_fractions(&w, "achieved", vkv_vector_report_achieved(r));
    vkv_json_key(&w, "tokens");
    vkv_json_begin_array(&w);
    for (uint32_t j = 0; j < r->n; j++) {
        if (in->tok) {
            size_t len;
            const char *piece = vkv_token_to_piece(in->tok, in->ids[j], true, &len);
            /* A byte token may hold part of a character: show such bytes as <0xXX>. */
            bool valid = true;
            for (size_t i = 0; i < len && valid;) {
                size_t l = vkv_utf8_valid_len((const unsigned char *)piece + i, len - i);
                valid = l > 0;
                i += l;
            }
            if (valid) {
                vkv_json_strn(&w, piece, len);
            } else {
                char buf[8 * 6 + 1] = "";
                for (size_t i = 0; i < len && i < 8; i++)
                    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "<0x%02X>", (unsigned char)piece[i]);
                vkv_json_str(&w, buf);
            }
        } else {
            char buf[24];
            snprintf(buf, sizeof buf, "[%d]", in->ids[j]);
            vkv_json_str(&w, buf);
        }
    }
    vkv_json_end_array(&w);
    vkv_json_key(&w, "bytes");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "uncompressed"); vkv_json_uint(&w, in->mem.uncompressed_context);
    vkv_json_key(&w, "retained"); vkv_json_uint(&w, in->mem.k_retained + in->mem.v_retained);
    vkv_json_key(&w, "approximated"); vkv_json_uint(&w, in->mem.k_approximated);
    vkv_json_key(&w, "w_matrices"); vkv_json_uint(&w, in->mem.w_bytes);
    vkv_json_key(&w, "kept_total"); vkv_json_uint(&w, in->mem.k_retained + in->mem.v_retained + in->mem.k_approximated);
    vkv_json_end_object(&w);
    vkv_json_key(&w, "layers");
    vkv_json_begin_array(&w);
    char *tiers = malloc(r->n + 1);
    for (uint32_t l = 0; l < r->n_layer && tiers; l++) {
        uint64_t ret = 0, apx = 0;
        for (uint32_t h = 0; h < r->n_kv_head; h++) {
            ret += r->n_ret[(size_t)l * r->n_kv_head + h];
            apx += r->n_apx[(size_t)l * r->n_kv_head + h];
        }
        vkv_json_begin_object(&w);
        vkv_json_key(&w, "layer"); vkv_json_uint(&w, l);
        vkv_json_key(&w, "distortion"); num_or_null(&w, r->distortion[l]);
        vkv_json_key(&w, "bytes_retained"); vkv_json_uint(&w, (kb + vb) * ret);
        vkv_json_key(&w, "bytes_approximated"); vkv_json_uint(&w, kb * apx);
        vkv_json_key(&w, "heads");
        vkv_json_begin_array(&w);
        for (uint32_t h = 0; h < r->n_kv_head; h++) {
            size_t lh = (size_t)l * r->n_kv_head + h, base = lh * r->n;
            vkv_json_begin_object(&w);
            vkv_json_key(&w, "head"); vkv_json_uint(&w, h);
            vkv_json_key(&w, "n_kept"); vkv_json_uint(&w, r->n_kept[lh]);
            vkv_json_key(&w, "n_retained"); vkv_json_uint(&w, r->n_ret[lh]);
            vkv_json_key(&w, "n_approximated"); vkv_json_uint(&w, r->n_apx[lh]);
            vkv_json_key(&w, "n_evicted"); vkv_json_uint(&w, r->n_evict[lh]);
            vkv_json_key(&w, "r2"); num_or_null(&w, r->r2_apx[lh]);
            vkv_json_key(&w, "rel_err"); num_or_null(&w, r->rel_err_apx[lh]);
            for (uint32_t j = 0; j < r->n; j++) {
                uint8_t t = r->tiers[base + j];
                tiers[j] = t == VKV_TIER_RETAINED ? 'R' : t == VKV_TIER_APPROXIMATED ? 'A' : 'E';
            }
            tiers[r->n] = 0;
            vkv_json_key(&w, "tiers"); vkv_json_str(&w, tiers);
            vkv_json_key(&w, "scores");
            vkv_json_begin_array(&w);
            /* f32 to 9 digits: exact, so the selection can be recomputed from the dump */
            for (uint32_t j = 0; j < r->n; j++) vkv_json_num(&w, r->scores[base + j]);
            vkv_json_end_array(&w);
            vkv_json_key(&w, "residuals");
            vkv_json_begin_array(&w);
            for (uint32_t j = 0; j < r->n; j++) vkv_json_num(&w, r->eps[base + j]);
            vkv_json_end_array(&w);
            vkv_json_end_object(&w);
        }
        vkv_json_end_array(&w);
        vkv_json_end_object(&w);
    }
    if (!tiers) {
        vkv_out_drop(&out);
        return vkv_error(VKV_ERR_OOM, "out of host memory writing '%s'", path);
    }
    free(tiers);
    vkv_json_end_array(&w);
    vkv_json_end_object(&w);
    fputc('\n', f);
    /* every write above is checked by the commit (ferror) */
    return vkv_out_commit(&out);
}
