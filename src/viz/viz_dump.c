#include "viz/viz_dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"
#include "kvlayout/kv_counts.h"

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of memory reading the tier dump"); }

/* The next member of an object, its key copied to key[] (reading its value
 * reuses the reader's buffer). */
static vkv_status obj_next(vkv_json_reader *p, bool *first, bool *done, char key[48])
{
    vkv_status st = vkv_json_object_next(p, first, done);
    if (!st && !*done) snprintf(key, 48, "%s", p->buf);
    return st;
}

/* ---- typed fields ---- */

/* A number, or NAN for null when allow_null. */
static vkv_status get_num(vkv_json_reader *p, const char *name, bool allow_null, double *out)
{
    if (allow_null && vkv_json_literal(p, "null")) {
        *out = NAN;
        return VKV_OK;
    }
    if (!vkv_json_number_ahead(p)) {
        if (p->s >= p->end) return vkv_json_syntax(p, "a value");
        vkv_status st = vkv_json_cut_literal(p);
        if (st) return st;
        return vkv_json_field_error(p, p->s, "\"%s\" must be a number%s", name, allow_null ? " or null" : "");
    }
    return vkv_json_read_number(p, out);
}

static vkv_status get_uint(vkv_json_reader *p, const char *name, uint64_t max, uint64_t *out)
{
    const char *at = p->s;
    double v = 0;
    vkv_status st = get_num(p, name, false, &v);
    if (st) return st;
    if (!(v >= 0) || v != floor(v) || v > (double)max)
        return vkv_json_field_error(p, at, "\"%s\" must be a whole number from 0 to %llu, not %.*s", name,
                         (unsigned long long)max, (int)(p->s - at), at);
    *out = (uint64_t)v;
    return VKV_OK;
}

static vkv_status get_u32(vkv_json_reader *p, const char *name, uint32_t *out)
{
    uint64_t v = 0;
    vkv_status st = get_uint(p, name, UINT32_MAX, &v);
    if (!st) *out = (uint32_t)v;
    return st;
}

static vkv_status get_bool(vkv_json_reader *p, const char *name, bool *out)
{
    if (vkv_json_literal(p, "true")) *out = true;
    else if (vkv_json_literal(p, "false")) *out = false;
    else if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    else if (vkv_json_cut_literal(p)) return VKV_ERR_FORMAT;
    else return vkv_json_field_error(p, p->s, "\"%s\" must be true or false", name);
    return VKV_OK;
}

static vkv_status get_str(vkv_json_reader *p, const char *name, char **out, size_t *len_out)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '"') return vkv_json_field_error(p, p->s, "\"%s\" must be a string", name);
    vkv_status st = vkv_json_read_string(p);
    if (st) return st;
    char *s = malloc(p->buf_len + 1);
    if (!s) return oom();
    memcpy(s, p->buf, p->buf_len + 1);
    free(*out); /* a repeated key: the last one wins */
    *out = s;
    if (len_out) *len_out = p->buf_len;
    return VKV_OK;
}

/* [numbers | null], null read as NAN. */
static vkv_status get_float_array(vkv_json_reader *p, const char *name, float **out, size_t *n_out)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '[') return vkv_json_field_error(p, p->s, "\"%s\" must be an array of numbers", name);
    p->s++;
    p->field = name;
    size_t n = 0, cap = 0;
    float *a = NULL;
    bool first = true, done = false;
    vkv_status st;
    for (;;) {
        if ((st = vkv_json_array_next(p, &first, &done))) goto fail;
        if (done) break;
        double v;
        if (vkv_json_literal(p, "null")) v = NAN;
        else if (vkv_json_number_ahead(p)) {
            if ((st = vkv_json_read_number(p, &v))) goto fail;
        } else if (p->s >= p->end) {
            st = vkv_json_syntax(p, "a value");
            goto fail;
        } else if ((st = vkv_json_cut_literal(p))) {
            goto fail;
        } else {
            st = vkv_json_field_error(p, p->s, "\"%s\"[%zu] must be a number or null", name, n);
            goto fail;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            float *na = realloc(a, cap * sizeof *na);
            if (!na) { st = oom(); goto fail; }
            a = na;
        }
        a[n++] = (float)v;
    }
    p->field = NULL;
    free(*out);
    *out = a;
    *n_out = n;
    return VKV_OK;
fail:
    free(a);
    return st;
}

static vkv_status get_tiers(vkv_json_reader *p, viz_head *h)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    const char *at = p->s;
    if (*p->s != '"') return vkv_json_field_error(p, p->s, "\"tiers\" must be a string of R, A and E letters");
    p->field = "tiers";
    vkv_status st = vkv_json_read_string(p);
    if (st) return st;
    p->field = NULL;
    uint8_t *t = malloc(p->buf_len ? p->buf_len : 1);
    if (!t) return oom();
    for (size_t i = 0; i < p->buf_len; i++) {
        char c = p->buf[i];
        if (c == 'R') t[i] = VIZ_TIER_RETAINED;
        else if (c == 'A') t[i] = VIZ_TIER_APPROXIMATED;
        else if (c == 'E') t[i] = VIZ_TIER_EVICTED;
        else {
            free(t);
            unsigned char u = (unsigned char)c;
            if (u >= 0x20 && u < 0x7f)
                return vkv_json_field_error(p, at, "\"tiers\" has '%c' at position %zu (letters must be R, A or E)",
                                            c, i);
            return vkv_json_field_error(p, at,
                                        "\"tiers\" has byte 0x%02x at position %zu (letters must be R, A or E)", u, i);
        }
    }
    free(h->tiers);
    h->tiers = t;
    h->n_tiers = p->buf_len;
    return VKV_OK;
}

/* Required members of an object: a bit each, checked after its '}'. */
static vkv_status check_required(vkv_json_reader *p, uint32_t seen, const char *const *names, size_t n_names,
                                 const char *what)
{
    for (size_t i = 0; i < n_names; i++)
        if (!(seen & (1u << i)))
            return vkv_error(VKV_ERR_FORMAT, "%s%s has no \"%s\" field", p->where, what, names[i]);
    return VKV_OK;
}

static int key_index(const char *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, names[i])) return (int)i;
    return -1;
}

static const char *const head_keys[] = {"head", "n_retained", "n_approximated", "n_evicted", "r2", "rel_err",
                                        "tiers", "scores", "residuals"};

static vkv_status get_head(vkv_json_reader *p, viz_head *h, size_t li, size_t hi)
{
    snprintf(p->where, sizeof p->where, "layer %zu head %zu: ", li, hi);
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '{') return vkv_json_field_error(p, p->s, "each entry of \"heads\" must be an object");
    p->s++;
    bool first = true, done = false;
    char key[48];
    uint32_t seen = 0;
    vkv_status st;
    for (;;) {
        if ((st = obj_next(p, &first, &done, key))) return st;
        if (done) break;
        int k = key_index(key, head_keys, sizeof head_keys / sizeof *head_keys);
        switch (k) {
        case 0: st = get_u32(p, key, &h->head); break;
        case 1: st = get_u32(p, key, &h->n_retained); break;
        case 2: st = get_u32(p, key, &h->n_approximated); break;
        case 3: st = get_u32(p, key, &h->n_evicted); break;
        case 4: st = get_num(p, key, true, &h->r2); break;
        case 5: st = get_num(p, key, true, &h->rel_err); break;
        case 6: st = get_tiers(p, h); break;
        case 7: st = get_float_array(p, key, &h->scores, &h->n_scores); break;
        case 8: st = get_float_array(p, key, &h->residuals, &h->n_residuals); break;
        default: st = vkv_json_skip_value(p);
        }
        if (st) return st;
        if (k >= 0) seen |= 1u << k;
    }
    return check_required(p, seen, head_keys, sizeof head_keys / sizeof *head_keys, "the head");
}

static void free_heads(viz_layer *l)
{
    for (size_t h = 0; h < l->n_heads; h++) {
        free(l->heads[h].tiers);
        free(l->heads[h].scores);
        free(l->heads[h].residuals);
    }
    free(l->heads);
    l->heads = NULL;
    l->n_heads = 0;
}

static const char *const layer_keys[] = {"layer", "distortion", "bytes_retained", "bytes_approximated", "heads"};

static vkv_status get_layer(vkv_json_reader *p, viz_layer *l, size_t li)
{
    snprintf(p->where, sizeof p->where, "layer %zu: ", li);
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '{') return vkv_json_field_error(p, p->s, "each entry of \"layers\" must be an object");
    p->s++;
    bool first = true, done = false;
    char key[48];
    uint32_t seen = 0;
    vkv_status st;
    for (;;) {
        if ((st = obj_next(p, &first, &done, key))) return st;
        if (done) break;
        int k = key_index(key, layer_keys, sizeof layer_keys / sizeof *layer_keys);
        switch (k) {
        case 0: st = get_u32(p, key, &l->layer); break;
        case 1: st = get_num(p, key, true, &l->distortion); break;
        case 2: st = get_uint(p, key, UINT64_MAX >> 11, &l->bytes_retained); break;
        case 3: st = get_uint(p, key, UINT64_MAX >> 11, &l->bytes_approximated); break;
        case 4: {
            if (p->s >= p->end) { st = vkv_json_syntax(p, "a value"); break; }
            if (*p->s != '[') { st = vkv_json_field_error(p, p->s, "\"heads\" must be an array"); break; }
            free_heads(l);
            p->s++;
            bool afirst = true, adone = false;
            size_t cap = 0;
            for (;;) {
                if ((st = vkv_json_array_next(p, &afirst, &adone)) || adone) break;
                if (l->n_heads == cap) {
                    cap = cap ? cap * 2 : 8;
                    viz_head *nh = realloc(l->heads, cap * sizeof *nh);
                    if (!nh) { st = oom(); break; }
                    l->heads = nh;
                }
                viz_head *h = &l->heads[l->n_heads++];
                memset(h, 0, sizeof *h);
                h->r2 = h->rel_err = NAN;
                if ((st = get_head(p, h, li, l->n_heads - 1))) break;
            }
            if (!st) snprintf(p->where, sizeof p->where, "layer %zu: ", li);
            break;
        }
        default: st = vkv_json_skip_value(p);
        }
        if (st) return st;
        if (k >= 0) seen |= 1u << k;
    }
    return check_required(p, seen, layer_keys, sizeof layer_keys / sizeof *layer_keys, "the layer");
}

static void free_layers(viz_dump *d)
{
    for (size_t i = 0; i < d->n_layers; i++) free_heads(&d->layers[i]);
    free(d->layers);
    d->layers = NULL;
    d->n_layers = 0;
}

static vkv_status get_layers(vkv_json_reader *p, viz_dump *d)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '[') return vkv_json_field_error(p, p->s, "\"layers\" must be an array");
    free_layers(d);
    p->s++;
    bool first = true, done = false;
    size_t cap = 0;
    vkv_status st;
    for (;;) {
        if ((st = vkv_json_array_next(p, &first, &done))) return st;
        if (done) break;
        if (d->n_layers == cap) {
            cap = cap ? cap * 2 : 8;
            viz_layer *nl = realloc(d->layers, cap * sizeof *nl);
            if (!nl) return oom();
            d->layers = nl;
        }
        viz_layer *l = &d->layers[d->n_layers++];
        memset(l, 0, sizeof *l);
        l->distortion = NAN;
        if ((st = get_layer(p, l, d->n_layers - 1))) return st;
        p->where[0] = 0;
    }
    return VKV_OK;
}

static vkv_status get_tokens(vkv_json_reader *p, viz_dump *d)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '[') return vkv_json_field_error(p, p->s, "\"tokens\" must be an array of strings");
    for (size_t i = 0; i < d->n_tokens; i++) free(d->tokens[i]);
    d->n_tokens = 0;
    p->s++;
    p->field = "tokens";
    bool first = true, done = false;
    size_t cap = 0;
    vkv_status st;
    for (;;) {
        if ((st = vkv_json_array_next(p, &first, &done))) return st;
        if (done) break;
        if (p->s >= p->end) return vkv_json_syntax(p, "a value");
        if (*p->s != '"') return vkv_json_field_error(p, p->s, "\"tokens\"[%zu] must be a string", d->n_tokens);
        if (d->n_tokens == cap) {
            cap = cap ? cap * 2 : 1024;
            char **nt = realloc(d->tokens, cap * sizeof *nt);
            if (!nt) return oom();
            d->tokens = nt;
            size_t *nl = realloc(d->token_len, cap * sizeof *nl);
            if (!nl) return oom();
            d->token_len = nl;
        }
        d->tokens[d->n_tokens] = NULL;
        if ((st = get_str(p, "tokens", &d->tokens[d->n_tokens], &d->token_len[d->n_tokens]))) return st;
        d->n_tokens++;
    }
    p->field = NULL;
    return VKV_OK;
}

static const char *const bytes_keys[] = {"uncompressed", "retained", "approximated", "w_matrices", "kept_total"};

static vkv_status get_bytes(vkv_json_reader *p, viz_dump *d)
{
    if (p->s >= p->end) return vkv_json_syntax(p, "a value");
    if (*p->s != '{') return vkv_json_field_error(p, p->s, "\"bytes\" must be an object");
    p->s++;
    snprintf(p->where, sizeof p->where, "bytes: ");
    bool first = true, done = false;
    char key[48];
    uint32_t seen = 0;
    vkv_status st;
    uint64_t *dst[] = {&d->bytes_uncompressed, &d->bytes_retained, &d->bytes_approximated, &d->bytes_w,
                       &d->bytes_kept};
    for (;;) {
        if ((st = obj_next(p, &first, &done, key))) return st;
        if (done) break;
        int k = key_index(key, bytes_keys, sizeof bytes_keys / sizeof *bytes_keys);
        st = k >= 0 ? get_uint(p, key, UINT64_MAX >> 11, dst[k]) : vkv_json_skip_value(p);
        if (st) return st;
        if (k >= 0) seen |= 1u << k;
    }
    p->where[0] = 0;
    return check_required(p, seen, bytes_keys, sizeof bytes_keys / sizeof *bytes_keys, "\"bytes\"");
}

static const char *const top_keys[] = {"vkvector_tier_dump", "model", "arch", "n_layer", "n_kv_head", "head_dim",
                                       "kv_type", "press", "compression", "approx_ratio", "vector",
                                       "query_aware", "n_context", "tokens", "bytes", "layers"};

static vkv_status parse_top(vkv_json_reader *p, viz_dump *d, uint32_t *seen)
{
    vkv_json_ws(p);
    if (p->s >= p->end) return vkv_error(VKV_ERR_FORMAT, "the file is empty (not a tier dump)");
    if (*p->s != '{') return vkv_json_syntax(p, "'{' (a tier dump is one JSON object)");
    p->s++;
    bool first = true, done = false;
    char key[48];
    vkv_status st;
    for (;;) {
        if ((st = obj_next(p, &first, &done, key))) return st;
        if (done) break;
        int k = key_index(key, top_keys, sizeof top_keys / sizeof *top_keys);
        const char *at = p->s;
        switch (k) {
        case 0:
            if ((st = get_u32(p, key, &d->version))) return st;
            if (d->version != 1)
                return vkv_json_field_error(p, at,
                                            "tier dump version %u is not supported (this vkvector reads version 1)",
                                 d->version);
            break;
        case 1: st = get_str(p, key, &d->model, NULL); break;
        case 2: st = get_str(p, key, &d->arch, NULL); break;
        case 3: st = get_u32(p, key, &d->n_layer); break;
        case 4: st = get_u32(p, key, &d->n_kv_head); break;
        case 5: st = get_u32(p, key, &d->head_dim); break;
        case 6: st = get_str(p, key, &d->kv_type, NULL); break;
        case 7: st = get_str(p, key, &d->press, NULL); break;
        case 8: st = get_num(p, key, false, &d->compression_ratio); break;
        case 9: st = get_num(p, key, false, &d->approx_ratio); break;
        case 10: st = get_bool(p, key, &d->vector); break;
        case 11: st = get_bool(p, key, &d->query_aware); break;
        case 12: st = get_u32(p, key, &d->n_context); break;
        case 13: st = get_tokens(p, d); break;
        case 14: st = get_bytes(p, d); break;
        case 15: st = get_layers(p, d); break;
        default: st = vkv_json_skip_value(p);
        }
        if (st) return st;
        if (k >= 0) *seen |= 1u << k;
    }
    vkv_json_ws(p);
    if (p->s < p->end) return vkv_json_syntax(p, "nothing after the tier dump's closing '}'");
    return VKV_OK;
}

/* Consistency of what was read: every per-position array has n_context
 * entries, the counts match the letters, layers and heads are in order. */
static vkv_status check_dump(const viz_dump *d)
{
    if (d->n_tokens != d->n_context)
        return vkv_error(VKV_ERR_FORMAT, "tokens has %zu strings, n_context is %u", d->n_tokens, d->n_context);
    if (d->n_layers != d->n_layer)
        return vkv_error(VKV_ERR_FORMAT, "layers has %zu entries, n_layer is %u", d->n_layers, d->n_layer);
    char why[160];
    if (vkv_kv_check_ratios(d->compression_ratio, -1, false, why, sizeof why)) /* the message names the file's key */
        return vkv_error(VKV_ERR_FORMAT, "compression is %g, outside [0, 1)", d->compression_ratio);
    if (d->approx_ratio < 0 || d->approx_ratio >= 1)
        return vkv_error(VKV_ERR_FORMAT, "approx_ratio is %g, outside [0, 1)", d->approx_ratio);
    for (size_t li = 0; li < d->n_layers; li++) {
        const viz_layer *l = &d->layers[li];
        if (l->layer != li)
            return vkv_error(VKV_ERR_FORMAT, "layers[%zu] says \"layer\": %u (layers must be in order)", li, l->layer);
        if (l->n_heads != d->n_kv_head)
            return vkv_error(VKV_ERR_FORMAT, "layer %zu: heads has %zu entries, n_kv_head is %u", li, l->n_heads,
                             d->n_kv_head);
        for (size_t hi = 0; hi < l->n_heads; hi++) {
            const viz_head *h = &l->heads[hi];
            if (h->head != hi)
                return vkv_error(VKV_ERR_FORMAT, "layer %zu: heads[%zu] says \"head\": %u (heads must be in order)",
                                 li, hi, h->head);
            if (h->n_tiers != d->n_context)
                return vkv_error(VKV_ERR_FORMAT, "layer %zu head %zu: tiers has %zu letters, n_context is %u", li, hi,
                                 h->n_tiers, d->n_context);
            if (h->n_scores != d->n_context)
                return vkv_error(VKV_ERR_FORMAT, "layer %zu head %zu: scores has %zu numbers, n_context is %u", li,
                                 hi, h->n_scores, d->n_context);
            if (h->n_residuals != d->n_context)
                return vkv_error(VKV_ERR_FORMAT, "layer %zu head %zu: residuals has %zu numbers, n_context is %u",
                                 li, hi, h->n_residuals, d->n_context);
            uint32_t c[3] = {0, 0, 0};
            for (size_t j = 0; j < h->n_tiers; j++) c[h->tiers[j]]++;
            const uint32_t want[3] = {h->n_retained, h->n_approximated, h->n_evicted};
            static const char *const names[3] = {"n_retained", "n_approximated", "n_evicted"};
            static const char letters[3] = {'R', 'A', 'E'};
            for (int t = 0; t < 3; t++)
                if (c[t] != want[t])
                    return vkv_error(VKV_ERR_FORMAT, "layer %zu head %zu: %s is %u but tiers has %u '%c'", li, hi,
                                     names[t], want[t], c[t], letters[t]);
        }
    }
    return VKV_OK;
}

vkv_status viz_dump_parse(const char *text, size_t len, viz_dump **out)
{
    *out = NULL;
    viz_dump *d = calloc(1, sizeof *d);
    if (!d) return oom();
    vkv_json_reader p = {.start = text, .s = text, .end = text + len};
    uint32_t seen = 0;
    vkv_status st = parse_top(&p, d, &seen);
    vkv_json_reader_free(&p);
    if (!st && !(seen & 1u))
        st = vkv_error(VKV_ERR_FORMAT, "not a vkvector tier dump (no \"vkvector_tier_dump\" field; "
                       "write one with vkvector run --tier-dump)");
    if (!st) st = check_required(&p, seen, top_keys, sizeof top_keys / sizeof *top_keys, "the dump");
    if (!st) st = check_dump(d);
    if (st) {
        viz_dump_free(d);
        return st;
    }
    *out = d;
    return VKV_OK;
}

vkv_status viz_dump_load(const char *path, viz_dump **out)
{
    *out = NULL;
    char *text;
    size_t len;
    vkv_status st = vkv_read_file(path, VKV_MAX_DOC_BYTES, &text, &len);
    if (st) return st;
    st = viz_dump_parse(text, len, out);
    free(text);
    if (st) return vkv_error_context(st, "%s", path);
    return VKV_OK;
}

void viz_dump_free(viz_dump *d)
{
    if (!d) return;
    free(d->model);
    free(d->arch);
    free(d->kv_type);
    free(d->press);
    for (size_t i = 0; i < d->n_tokens; i++) free(d->tokens[i]);
    free(d->tokens);
    free(d->token_len);
    free_layers(d);
    free(d);
}

void viz_layer_counts(const viz_dump *d, uint32_t l, uint64_t *ret, uint64_t *apx, uint64_t *evict)
{
    *ret = *apx = *evict = 0;
    for (size_t h = 0; h < d->layers[l].n_heads; h++) {
        *ret += d->layers[l].heads[h].n_retained;
        *apx += d->layers[l].heads[h].n_approximated;
        *evict += d->layers[l].heads[h].n_evicted;
    }
}
