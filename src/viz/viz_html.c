/* The HTML report: the embedded template with the dump's data in between,
 * packed for size. Data blocks (read by src/viz/assets/report.js):
 *   vkv-meta       JSON: settings, bytes, per layer/head counts, R², E, value scales
 *   vkv-tokens     JSON: the n context tokens' text
 *   vkv-tiers      base64: 2 bits per position (0 retained, 1 approximated,
 *                  2 evicted), positions of (layer 0, head 0), (0, 1), ...
 *   vkv-scores     base64: per position, u16 little-endian f16 or u8 (see meta.values)
 *   vkv-residuals  the same for the residuals eps_i
 * 32k tokens x 32 layers x 8 heads is 8.4 M positions: 2.8 MB of tiers and
 * 22 MB (f16) or 11 MB (u8) per value kind once base64-encoded. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/viz.h"
#include "core/fp16.h"
#include "core/json_write.h"
#include "core/out_file.h"

typedef struct b64_out {
    FILE *f;
    unsigned char in[3];
    int n_in;
    char buf[8192];
    size_t n_buf;
} b64_out;

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_emit(b64_out *b, const unsigned char *in, int n)
{
    if (b->n_buf + 4 > sizeof b->buf) {
        fwrite(b->buf, 1, b->n_buf, b->f);
        b->n_buf = 0;
    }
    uint32_t v = (uint32_t)in[0] << 16 | (uint32_t)(n > 1 ? in[1] : 0) << 8 | (n > 2 ? in[2] : 0);
    char *o = b->buf + b->n_buf;
    o[0] = b64_alphabet[v >> 18 & 63];
    o[1] = b64_alphabet[v >> 12 & 63];
    o[2] = n > 1 ? b64_alphabet[v >> 6 & 63] : '=';
    o[3] = n > 2 ? b64_alphabet[v & 63] : '=';
    b->n_buf += 4;
}

static void b64_byte(b64_out *b, unsigned char c)
{
    b->in[b->n_in++] = c;
    if (b->n_in == 3) {
        b64_emit(b, b->in, 3);
        b->n_in = 0;
    }
}

static void b64_finish(b64_out *b)
{
    if (b->n_in) b64_emit(b, b->in, b->n_in);
    fwrite(b->buf, 1, b->n_buf, b->f);
    b->n_buf = 0;
    b->n_in = 0;
}

/* Copies JSON text into the page: '<' becomes \u003c (it can only occur
 * inside strings), so no "</script>" or "<!--" can end the block early. */
static void put_script_json(FILE *f, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<') continue;
        fwrite(s + run, 1, i - run, f);
        fputs("\\u003c", f);
        run = i + 1;
    }
    fwrite(s + run, 1, n - run, f);
}

/* Per (layer, head) value scaling. */
typedef struct strip_scale {
    int exp;            /* f16: value = half * 2^exp */
    double lo, hi;      /* u8: scores affine over [lo, hi]; residuals log-affine over [log lo, log hi] */
} strip_scale;

static strip_scale scale_f16(const float *v, size_t n)
{
    double maxabs = 0;
    for (size_t j = 0; j < n; j++)
        if (isfinite(v[j]) && fabs(v[j]) > maxabs) maxabs = fabs(v[j]);
    strip_scale s = {0, 0, 0};
    if (maxabs > 0) {
        int x;
        frexp(maxabs, &x);       /* maxabs in [2^(x-1), 2^x) */
        s.exp = x - 15;          /* scaled maximum in [2^14, 2^15): f16's whole precision, far from overflow */
    }
    return s;
}

static uint16_t enc_f16(float v, const strip_scale *s)
{
    if (!isfinite(v)) return 0x7e00; /* NaN: null */
    return vkv_f32_to_fp16(ldexpf(v, -s->exp));
}

static strip_scale scale_u8(const float *v, size_t n, bool log_scale)
{
    strip_scale s = {0, INFINITY, -INFINITY};
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(v[j]) || (log_scale && v[j] <= 0)) continue;
        double x = log_scale ? log(v[j]) : v[j];
        if (x < s.lo) s.lo = x;
        if (x > s.hi) s.hi = x;
    }
    if (!(s.lo <= s.hi)) s.lo = s.hi = 0;
    return s;
}

/* u8 codes: 255 null. Scores 0..254 affine. Residuals 0 = zero, 1..254 log-affine. */
static uint8_t enc_u8(float v, const strip_scale *s, bool log_scale)
{
    if (!isfinite(v)) return 255;
    double span = s->hi - s->lo;
    if (log_scale) {
        if (v <= 0) return 0;
        return (uint8_t)(1 + (span > 0 ? lround((log(v) - s->lo) / span * 253) : 0));
    }
    double t = span > 0 ? (v - s->lo) / span : 0;
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    return (uint8_t)lround(t * 254);
}

static void write_values(FILE *f, const viz_dump *d, viz_values kind, bool residuals, const strip_scale *sc)
{
    b64_out b = {.f = f};
    for (size_t l = 0; l < d->n_layers; l++)
        for (size_t h = 0; h < d->layers[l].n_heads; h++) {
            const viz_head *hd = &d->layers[l].heads[h];
            const float *v = residuals ? hd->residuals : hd->scores;
            const strip_scale *s = &sc[l * d->n_kv_head + h];
            for (size_t j = 0; j < d->n_context; j++) {
                if (kind == VIZ_VALUES_F16) {
                    uint16_t x = enc_f16(v[j], s);
                    b64_byte(&b, (unsigned char)(x & 0xff));
                    b64_byte(&b, (unsigned char)(x >> 8));
                } else {
                    b64_byte(&b, enc_u8(v[j], s, residuals));
                }
            }
        }
    b64_finish(&b);
}

static void write_tiers(FILE *f, const viz_dump *d)
{
    b64_out b = {.f = f};
    unsigned acc = 0;
    size_t k = 0;
    for (size_t l = 0; l < d->n_layers; l++)
        for (size_t h = 0; h < d->layers[l].n_heads; h++) {
            const uint8_t *t = d->layers[l].heads[h].tiers;
            for (size_t j = 0; j < d->n_context; j++, k++) {
                acc |= (unsigned)t[j] << ((k & 3) * 2);
                if ((k & 3) == 3) {
                    b64_byte(&b, (unsigned char)acc);
                    acc = 0;
                }
            }
        }
    if (k & 3) b64_byte(&b, (unsigned char)acc);
    b64_finish(&b);
}

static void write_scales(vkv_json_writer *w, const char *key, const strip_scale *s, size_t n, viz_values kind)
{
    if (kind == VIZ_VALUES_F16) {
        vkv_json_key(w, key);
        vkv_json_begin_array(w);
        for (size_t i = 0; i < n; i++) vkv_json_int(w, s[i].exp);
        vkv_json_end_array(w);
        return;
    }
    char k[64];
    snprintf(k, sizeof k, "%s_lo", key);
    vkv_json_key(w, k);
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) vkv_json_num(w, s[i].lo);
    vkv_json_end_array(w);
    snprintf(k, sizeof k, "%s_hi", key);
    vkv_json_key(w, k);
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) vkv_json_num(w, s[i].hi);
    vkv_json_end_array(w);
}

static void write_meta(FILE *mf, const viz_dump *d, const viz_html_opts *o, const strip_scale *ss,
                       const strip_scale *rs)
{
    vkv_json_writer w;
    vkv_json_init(&w, mf, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "format"); vkv_json_int(&w, 1);
    vkv_json_key(&w, "source"); vkv_json_str(&w, o->source ? o->source : "");
    vkv_json_key(&w, "model"); vkv_json_str(&w, d->model);
    vkv_json_key(&w, "arch"); vkv_json_str(&w, d->arch);
    vkv_json_key(&w, "kv_type"); vkv_json_str(&w, d->kv_type);
    vkv_json_key(&w, "press"); vkv_json_str(&w, d->press);
    vkv_json_key(&w, "compression"); vkv_json_num(&w, d->compression_ratio);
    vkv_json_key(&w, "approx_ratio"); vkv_json_num(&w, d->approx_ratio);
    vkv_json_key(&w, "vector"); vkv_json_bool(&w, d->vector);
    vkv_json_key(&w, "query_aware"); vkv_json_bool(&w, d->query_aware);
    vkv_json_key(&w, "n_layer"); vkv_json_uint(&w, d->n_layer);
    vkv_json_key(&w, "n_kv_head"); vkv_json_uint(&w, d->n_kv_head);
    vkv_json_key(&w, "head_dim"); vkv_json_uint(&w, d->head_dim);
    vkv_json_key(&w, "n_context"); vkv_json_uint(&w, d->n_context);
    vkv_json_key(&w, "bytes");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "uncompressed"); vkv_json_uint(&w, d->bytes_uncompressed);
    vkv_json_key(&w, "retained"); vkv_json_uint(&w, d->bytes_retained);
    vkv_json_key(&w, "approximated"); vkv_json_uint(&w, d->bytes_approximated);
    vkv_json_key(&w, "w_matrices"); vkv_json_uint(&w, d->bytes_w);
    vkv_json_key(&w, "kept_total"); vkv_json_uint(&w, d->bytes_kept);
    vkv_json_end_object(&w);
    vkv_json_key(&w, "layers");
    vkv_json_begin_array(&w);
    for (size_t l = 0; l < d->n_layers; l++) {
        const viz_layer *ly = &d->layers[l];
        vkv_json_begin_object(&w);
        vkv_json_key(&w, "layer"); vkv_json_uint(&w, ly->layer);
        vkv_json_key(&w, "distortion"); vkv_json_num(&w, ly->distortion);
        vkv_json_key(&w, "bytes_retained"); vkv_json_uint(&w, ly->bytes_retained);
        vkv_json_key(&w, "bytes_approximated"); vkv_json_uint(&w, ly->bytes_approximated);
        vkv_json_key(&w, "heads");
        vkv_json_begin_array(&w);
        for (size_t h = 0; h < ly->n_heads; h++) {
            const viz_head *hd = &ly->heads[h];
            vkv_json_begin_object(&w);
            vkv_json_key(&w, "n_retained"); vkv_json_uint(&w, hd->n_retained);
            vkv_json_key(&w, "n_approximated"); vkv_json_uint(&w, hd->n_approximated);
            vkv_json_key(&w, "n_evicted"); vkv_json_uint(&w, hd->n_evicted);
            vkv_json_key(&w, "r2"); vkv_json_num(&w, hd->r2);
            vkv_json_key(&w, "rel_err"); vkv_json_num(&w, hd->rel_err);
            vkv_json_end_object(&w);
        }
        vkv_json_end_array(&w);
        vkv_json_end_object(&w);
    }
    vkv_json_end_array(&w);
    size_t n_strips = (size_t)d->n_layer * d->n_kv_head;
    vkv_json_key(&w, "values");
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "encoding");
    vkv_json_str(&w, o->values == VIZ_VALUES_F16 ? "f16" : o->values == VIZ_VALUES_U8 ? "u8" : "none");
    if (o->values != VIZ_VALUES_NONE) {
        write_scales(&w, o->values == VIZ_VALUES_F16 ? "score_exp" : "score", ss, n_strips, o->values);
        write_scales(&w, o->values == VIZ_VALUES_F16 ? "residual_exp" : "residual_log", rs, n_strips, o->values);
    }
    vkv_json_end_object(&w);
    vkv_json_end_object(&w);
}

static bool put_json_block(FILE *f, const char *id, const viz_dump *d, const viz_html_opts *o,
                           const strip_scale *ss, const strip_scale *rs)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    if (!mf) return false;
    if (!strcmp(id, "vkv-meta")) {
        write_meta(mf, d, o, ss, rs);
    } else {
        vkv_json_writer w;
        vkv_json_init(&w, mf, false);
        vkv_json_begin_array(&w);
        for (size_t j = 0; j < d->n_tokens; j++) vkv_json_strn(&w, d->tokens[j], d->token_len[j]);
        vkv_json_end_array(&w);
    }
    if (fclose(mf)) {
        free(text);
        return false;
    }
    fprintf(f, "<script type=\"application/json\" id=\"%s\">", id);
    put_script_json(f, text, len);
    fputs("</script>\n", f);
    free(text);
    return true;
}

vkv_status viz_write_html(const viz_dump *d, const char *path, const viz_html_opts *o, uint64_t *size)
{
    size_t n_strips = (size_t)d->n_layer * d->n_kv_head;
    strip_scale *ss = calloc(n_strips ? n_strips : 1, sizeof *ss);
    strip_scale *rs = calloc(n_strips ? n_strips : 1, sizeof *rs);
    if (!ss || !rs) {
        free(ss);
        free(rs);
        return vkv_error(VKV_ERR_OOM, "out of memory writing the report");
    }
    for (size_t l = 0; l < d->n_layers; l++)
        for (size_t h = 0; h < d->layers[l].n_heads; h++) {
            const viz_head *hd = &d->layers[l].heads[h];
            size_t i = l * d->n_kv_head + h;
            if (o->values == VIZ_VALUES_F16) {
                ss[i] = scale_f16(hd->scores, d->n_context);
                rs[i] = scale_f16(hd->residuals, d->n_context);
            } else if (o->values == VIZ_VALUES_U8) {
                ss[i] = scale_u8(hd->scores, d->n_context, false);
                rs[i] = scale_u8(hd->residuals, d->n_context, true);
            }
        }
    vkv_out out;
    vkv_status st = vkv_out_open(&out, path);
    if (st) {
        free(ss);
        free(rs);
        return st;
    }
    FILE *f = out.f;
    fwrite(vkv_viz_html_head, 1, vkv_viz_html_head_len, f);
    bool ok = put_json_block(f, "vkv-meta", d, o, ss, rs) && put_json_block(f, "vkv-tokens", d, o, ss, rs);
    fputs("<script type=\"application/octet-stream\" id=\"vkv-tiers\">", f);
    write_tiers(f, d);
    fputs("</script>\n", f);
    if (o->values != VIZ_VALUES_NONE) {
        fputs("<script type=\"application/octet-stream\" id=\"vkv-scores\">", f);
        write_values(f, d, o->values, false, ss);
        fputs("</script>\n<script type=\"application/octet-stream\" id=\"vkv-residuals\">", f);
        write_values(f, d, o->values, true, rs);
        fputs("</script>\n", f);
    }
    fwrite(vkv_viz_html_tail, 1, vkv_viz_html_tail_len, f);
    free(ss);
    free(rs);
    long pos = ftell(f);
    /* every write above is checked here: the commit fails on any (ferror) */
    if (!ok) {
        vkv_out_drop(&out);
        return vkv_error(VKV_ERR_IO, "error writing '%s'", path);
    }
    if ((st = vkv_out_commit(&out))) return st;
    if (size) *size = pos > 0 ? (uint64_t)pos : 0;
    return VKV_OK;
}
