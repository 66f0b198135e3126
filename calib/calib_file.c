/* The .vkcal file: a GGUF container of the maps, the report, the corpus
 * statistics and the identity of the model it was made for (calib.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib_internal.h"
#include "calib/ols.h"
#include "core/fp16.h"

#define KEY "vkvector.calib."

static vkv_status set_f32_arr(vkv_gguf_writer *w, const char *key, const double *x, uint32_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (uint32_t i = 0; i < n; i++) f[i] = (float)x[i];
    vkv_status st = vkv_gguf_set_arr(w, key, VKV_GGUF_FLOAT32, f, n);
    free(f);
    return st;
}

/* One map tensor, f32 or (checked to fit) f16. */
static vkv_status add_map(vkv_gguf_writer *w, const char *name, const float *src, const uint64_t ne[3], bool f16,
                          uint16_t *half)
{
    size_t n = (size_t)(ne[0] * ne[1] * ne[2]);
    if (!f16) return vkv_gguf_add_tensor(w, name, VKV_F32, 3, ne, src, n * 4);
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(src[i]) <= 65504.0f))
            return vkv_error(VKV_ERR_ARG, "'%s' has an entry %g that f16 cannot hold; write f32", name, src[i]);
        half[i] = vkv_f32_to_fp16(src[i]);
    }
    return vkv_gguf_add_tensor(w, name, VKV_F16, 3, ne, half, n * 2);
}

static double mean_n(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s / n;
}

/* FNV-1a 64 over a file's bytes, the 8 at off (the checksum's own value)
 * taken as zero (calib.h). */
static uint64_t file_checksum(const uint8_t *d, size_t n, size_t off)
{
    static const uint8_t zero[8];
    uint64_t h = vkv_fnv1a(VKV_FNV1A_INIT, d, off);
    h = vkv_fnv1a(h, zero, 8);
    return vkv_fnv1a(h, d + off + 8, n - off - 8);
}

/* Where the checksum's value sits in g (-1 without a u64 checksum key). */
static int64_t checksum_offset(const vkv_gguf *g)
{
    int64_t i = vkv_gguf_find_key(g, KEY "checksum");
    size_t n;
    vkv_gguf_bytes(g, &n);
    int64_t off = i < 0 || vkv_gguf_kv_type(g, i) != VKV_GGUF_UINT64 ? -1 : vkv_gguf_kv_value_offset(g, i);
    return off >= 0 && (uint64_t)off + 8 <= n ? off : -1;
}

/* The last metadata key: the checksum of the file w writes, computed over
 * its bytes with the key's value 0, then set in place (same bytes else). */
static vkv_status set_checksum(vkv_gguf_writer *w, const char *path)
{
    void *data = NULL;
    size_t size = 0;
    vkv_gguf *g = NULL;
    vkv_status st = vkv_gguf_set_u64(w, KEY "checksum", 0);
    if (!st) st = vkv_gguf_writer_to_memory(w, &data, &size);
    if (!st) st = vkv_gguf_open_memory(data, size, &g);
    if (!st) {
        int64_t off = checksum_offset(g);
        st = off < 0 ? vkv_error(VKV_ERR_ARG, "'%s': the checksum key is not in the written bytes", path)
                     : vkv_gguf_set_u64(w, KEY "checksum", file_checksum(data, size, (size_t)off));
    }
    vkv_gguf_close(g);
    free(data);
    return st;
}

vkv_status vkv_calib_write(const vkv_calib *c, const char *path, bool f16)
{
    uint32_t L = c->id.n_layer, H = c->id.n_head_kv;
    size_t per_layer = (size_t)H * c->d_v * c->d_k, joint_layer = per_layer * H;
    vkv_gguf_writer *w = vkv_gguf_writer_new(32);
    if (!w) return vkv_error(VKV_ERR_OOM, "out of host memory");
    uint16_t *half = f16 ? malloc(joint_layer * sizeof *half) : NULL;
    vkv_status st = VKV_OK;
    char key[128];
    if (f16 && !half) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto out;
    }
#define TRY(expr) do { if ((st = (expr))) goto out; } while (0)
    TRY(vkv_gguf_set_str(w, "general.architecture", "vkvector-calib"));
    TRY(vkv_gguf_set_u32(w, KEY "version", c->version));
    TRY(vkv_gguf_set_str(w, KEY "model.architecture", c->id.arch));
    TRY(vkv_gguf_set_str(w, KEY "model.name", c->model_name));
    TRY(vkv_gguf_set_u32(w, KEY "model.n_layer", L));
    TRY(vkv_gguf_set_u32(w, KEY "model.n_head_kv", H));
    TRY(vkv_gguf_set_u32(w, KEY "model.head_dim", c->id.head_dim));
    TRY(vkv_gguf_set_u32(w, KEY "model.head_dim_v", c->id.head_dim_v));
    TRY(vkv_gguf_set_u32(w, KEY "model.n_embd", c->id.n_embd));
    TRY(vkv_gguf_set_u64(w, KEY "model.kv_hash", c->id.kv_hash));
    TRY(vkv_gguf_set_f32(w, KEY "ridge", (float)c->ridge));
    TRY(vkv_gguf_set_f32(w, KEY "heldout_frac", (float)c->heldout_frac));
    TRY(vkv_gguf_set_u64(w, KEY "corpus.tokens", c->corpus.n_tokens));
    TRY(vkv_gguf_set_u64(w, KEY "corpus.tokens_heldout", c->corpus.n_tokens_heldout));
    TRY(vkv_gguf_set_u32(w, KEY "corpus.sequences", c->corpus.n_seq));
    TRY(vkv_gguf_set_u32(w, KEY "corpus.sequences_heldout", c->corpus.n_seq_heldout));
    TRY(vkv_gguf_set_u32(w, KEY "corpus.seq_len", c->corpus.seq_len));
    TRY(vkv_gguf_set_bool(w, KEY "corpus.byte_tokens", c->corpus.byte_tokens));
    TRY(vkv_gguf_set_arr_str(w, KEY "corpus.sources", (const char *const *)c->corpus.sources, c->corpus.n_sources));
    TRY(vkv_gguf_set_f32(w, KEY "r2_mean", (float)mean_n(c->r2, (size_t)L * H)));
    TRY(vkv_gguf_set_f32(w, KEY "r2_joint_mean", (float)mean_n(c->r2_joint, L)));
    TRY(vkv_gguf_set_f32(w, KEY "r2_mp_mean", (float)mean_n(c->r2_mp, (size_t)L * H)));
    for (uint32_t l = 0; l < L; l++) {
        size_t o = (size_t)l * H;
        snprintf(key, sizeof key, KEY "blk.%u.r2", l);
        TRY(set_f32_arr(w, key, c->r2 + o, H));
        snprintf(key, sizeof key, KEY "blk.%u.r2_train", l);
        TRY(set_f32_arr(w, key, c->r2_train + o, H));
        snprintf(key, sizeof key, KEY "blk.%u.r2_mp", l);
        TRY(set_f32_arr(w, key, c->r2_mp + o, H));
        snprintf(key, sizeof key, KEY "blk.%u.rel_err", l);
        TRY(set_f32_arr(w, key, c->rel_err + o, H));
        snprintf(key, sizeof key, KEY "blk.%u.r2_joint", l);
        TRY(vkv_gguf_set_f32(w, key, (float)c->r2_joint[l]));
        snprintf(key, sizeof key, KEY "blk.%u.ridge_joint", l);
        TRY(vkv_gguf_set_f32(w, key, (float)c->ridge_joint[l]));
    }
    for (uint32_t l = 0; l < L; l++) {
        uint64_t ne[3] = {c->d_k, c->d_v, H};
        snprintf(key, sizeof key, "calib.blk.%u.w", l);
        TRY(add_map(w, key, c->w + (size_t)l * per_layer, ne, f16, half));
        if (!c->w_joint) continue;
        uint64_t ne_joint[3] = {(uint64_t)H * c->d_k, (uint64_t)H * c->d_v, 1};
        snprintf(key, sizeof key, "calib.blk.%u.w_joint", l);
        TRY(add_map(w, key, c->w_joint + (size_t)l * joint_layer, ne_joint, f16, half));
    }
    if (c->version >= 2) TRY(set_checksum(w, path));
    TRY(vkv_gguf_writer_to_file(w, path));
#undef TRY
out:
    free(half);
    vkv_gguf_writer_free(w);
    return st;
}

/* Optional per-head f32 array: NaN when absent or malformed. */
static void get_f32_arr(const vkv_gguf *g, const char *key, double *out, uint32_t n)
{
    vkv_gguf_type t;
    uint64_t count;
    const void *data;
    for (uint32_t i = 0; i < n; i++) out[i] = NAN;
    if (vkv_gguf_find_key(g, key) < 0 || vkv_gguf_get_arr(g, key, &t, &count, &data) || t != VKV_GGUF_FLOAT32 ||
        count != n)
        return;
    for (uint32_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, (const uint8_t *)data + 4ull * i, 4);
        out[i] = f;
    }
}

static char *gguf_strdup(vkv_gguf_str s)
{
    char *p = malloc(s.len + 1);
    if (p) {
        memcpy(p, s.data, s.len);
        p[s.len] = 0;
    }
    return p;
}

/* Tensor `name` of shape ne (f32 or f16) into dst as f32, every entry finite. */
static vkv_status read_map(const vkv_gguf *g, const char *path, const char *name, const uint64_t ne[3], float *dst)
{
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(g, name);
    if (!t) return vkv_error(VKV_ERR_FORMAT, "'%s' has no tensor '%s'", path, name);
    if (t->ne[0] != ne[0] || t->ne[1] != ne[1] || t->ne[2] != ne[2] || t->ne[3] != 1 ||
        (t->type != VKV_F32 && t->type != VKV_F16))
        return vkv_error(VKV_ERR_FORMAT, "'%s': tensor '%s' is %llux%llux%llu of type %u, expected %llux%llux%llu f32 or f16",
                         path, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                         (unsigned long long)t->ne[2], t->type, (unsigned long long)ne[0], (unsigned long long)ne[1],
                         (unsigned long long)ne[2]);
    size_t n = (size_t)(ne[0] * ne[1] * ne[2]);
    if (t->type == VKV_F32) {
        memcpy(dst, t->data, n * 4);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t hbits;
            memcpy(&hbits, (const uint8_t *)t->data + 2 * i, 2);
            dst[i] = vkv_fp16_to_f32(hbits);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i])) return vkv_error(VKV_ERR_FORMAT, "'%s': tensor '%s' has a non-finite entry", path, name);
    return VKV_OK;
}

/* NaN marks a figure not measured (no held-out tokens, a head whose values
 * are all zero); an infinity is never written. Where a finite value is
 * required, anything else is a damaged file: the ridge and held-out share,
 * each layer's joint ridge when the joint maps are there, and their held-out
 * R^2 when there were held-out tokens. */
static vkv_status check_finite(const vkv_calib *c, const char *path)
{
    const uint32_t L = c->id.n_layer, H = c->id.n_head_kv;
    if (!isfinite(c->ridge) || !isfinite(c->heldout_frac))
        return vkv_error(VKV_ERR_FORMAT, "'%s' is damaged: its ridge (%g) and held-out share (%g) must be finite", path,
                         c->ridge, c->heldout_frac);
    const struct {
        const char *name;
        const double *x;
        size_t n;
    } arrays[] = {{"r2", c->r2, (size_t)L * H},           {"r2_train", c->r2_train, (size_t)L * H},
                  {"r2_mp", c->r2_mp, (size_t)L * H},     {"rel_err", c->rel_err, (size_t)L * H},
                  {"r2_joint", c->r2_joint, L},           {"ridge_joint", c->ridge_joint, L}};
    for (size_t a = 0; a < sizeof arrays / sizeof *arrays; a++)
        for (size_t i = 0; i < arrays[a].n; i++) {
            const double x = arrays[a].x[i];
            const uint32_t l = (uint32_t)(arrays[a].n == L ? i : i / H);
            const bool required = c->w_joint && (!strcmp(arrays[a].name, "ridge_joint") ||
                                                 (!strcmp(arrays[a].name, "r2_joint") && c->corpus.n_tokens_heldout));
            if (isinf(x) || (required && isnan(x)))
                return vkv_error(VKV_ERR_FORMAT, "'%s' is damaged: " KEY "blk.%u.%s is %g, where a finite value is "
                                                 "required", path, l, arrays[a].name, x);
        }
    return VKV_OK;
}

vkv_status vkv_calib_read(const char *path, vkv_calib **out)
{
    *out = NULL;
    vkv_gguf *g;
    vkv_status st = vkv_gguf_open(path, &g);
    if (st) return vkv_error_context(st, "cannot read the calibration file");
    vkv_calib *c = NULL;
    vkv_calib_identity id = {0};
    uint32_t version = 0;
    vkv_gguf_str arch, s;
    if (vkv_gguf_find_key(g, KEY "version") < 0) {
        st = vkv_error(VKV_ERR_FORMAT, "'%s' is not a vkvector calibration file (no " KEY "version key)", path);
        goto error;
    }
    if ((st = vkv_gguf_get_u32(g, KEY "version", &version))) goto error;
    if (version == 0 || version > VKV_CALIB_VERSION) {
        st = vkv_error(VKV_ERR_UNSUPPORTED, "'%s' has calibration format version %u; this build reads up to %u", path,
                       version, VKV_CALIB_VERSION);
        goto error;
    }
    if (version >= 2) {
        /* every byte checked before any is believed (version 1 files have no checksum) */
        size_t n;
        const uint8_t *bytes = vkv_gguf_bytes(g, &n);
        int64_t off = checksum_offset(g);
        uint64_t want = 0;
        if (off < 0) {
            st = vkv_error(VKV_ERR_FORMAT, "'%s' is damaged: a version %u calibration file has a u64 " KEY "checksum "
                                           "key, and this one has none", path, version);
            goto error;
        }
        memcpy(&want, bytes + off, 8);
        if (file_checksum(bytes, n, (size_t)off) != want) {
            st = vkv_error(VKV_ERR_FORMAT, "'%s' is damaged: its bytes do not match its checksum (a byte of its "
                                           "metadata or maps has changed); run 'vkvector calib' again", path);
            goto error;
        }
    }
    if ((st = vkv_gguf_get_str(g, KEY "model.architecture", &arch)) ||
        (st = vkv_gguf_get_u32(g, KEY "model.n_layer", &id.n_layer)) ||
        (st = vkv_gguf_get_u32(g, KEY "model.n_head_kv", &id.n_head_kv)) ||
        (st = vkv_gguf_get_u32(g, KEY "model.head_dim", &id.head_dim)) ||
        (st = vkv_gguf_get_u32(g, KEY "model.head_dim_v", &id.head_dim_v)) ||
        (st = vkv_gguf_get_u32(g, KEY "model.n_embd", &id.n_embd)) ||
        (st = vkv_gguf_get_u64(g, KEY "model.kv_hash", &id.kv_hash)))
        goto error;
    snprintf(id.arch, sizeof id.arch, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.data);
    if (!id.n_layer || !id.n_head_kv || !id.head_dim || !id.head_dim_v || id.n_layer > 4096 || id.n_head_kv > 4096 ||
        id.head_dim > 4096 || id.head_dim_v > 4096) {
        st = vkv_error(VKV_ERR_FORMAT, "'%s': implausible shape (%u layers, %u KV heads, head dims %u/%u)", path,
                       id.n_layer, id.n_head_kv, id.head_dim, id.head_dim_v);
        goto error;
    }
    if (!(c = vkv_calib_alloc(&id))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto error;
    }
    c->version = version;
    if (!vkv_gguf_get_str(g, KEY "model.name", &s))
        snprintf(c->model_name, sizeof c->model_name, "%.*s", (int)(s.len < 255 ? s.len : 255), s.data);
    vkv_clear_error();
    float f;
    if (!vkv_gguf_get_f32(g, KEY "ridge", &f)) c->ridge = f;
    if (!vkv_gguf_get_f32(g, KEY "heldout_frac", &f)) c->heldout_frac = f;
    vkv_gguf_get_u64(g, KEY "corpus.tokens", &c->corpus.n_tokens);
    vkv_gguf_get_u64(g, KEY "corpus.tokens_heldout", &c->corpus.n_tokens_heldout);
    vkv_gguf_get_u32_opt(g, KEY "corpus.sequences", &c->corpus.n_seq);
    vkv_gguf_get_u32_opt(g, KEY "corpus.sequences_heldout", &c->corpus.n_seq_heldout);
    vkv_gguf_get_u32_opt(g, KEY "corpus.seq_len", &c->corpus.seq_len);
    vkv_gguf_get_bool_opt(g, KEY "corpus.byte_tokens", &c->corpus.byte_tokens);
    vkv_gguf_type t;
    uint64_t count;
    const void *data;
    if (vkv_gguf_find_key(g, KEY "corpus.sources") >= 0 && !vkv_gguf_get_arr(g, KEY "corpus.sources", &t, &count, &data) &&
        t == VKV_GGUF_STRING && count < 1u << 20 && (c->corpus.sources = calloc(count ? count : 1, sizeof(char *)))) {
        for (uint64_t i = 0; i < count; i++)
            if (!vkv_gguf_arr_str(g, KEY "corpus.sources", i, &s) && (c->corpus.sources[c->corpus.n_sources] = gguf_strdup(s)))
                c->corpus.n_sources++;
    }
    vkv_clear_error();
    char key[128];
    uint32_t H = id.n_head_kv;
    size_t per_layer = (size_t)H * c->d_v * c->d_k;
    for (uint32_t l = 0; l < id.n_layer; l++) {
        size_t o = (size_t)l * H;
        snprintf(key, sizeof key, KEY "blk.%u.r2", l);
        get_f32_arr(g, key, c->r2 + o, H);
        snprintf(key, sizeof key, KEY "blk.%u.r2_train", l);
        get_f32_arr(g, key, c->r2_train + o, H);
        snprintf(key, sizeof key, KEY "blk.%u.r2_mp", l);
        get_f32_arr(g, key, c->r2_mp + o, H);
        snprintf(key, sizeof key, KEY "blk.%u.rel_err", l);
        get_f32_arr(g, key, c->rel_err + o, H);
        snprintf(key, sizeof key, KEY "blk.%u.r2_joint", l);
        if (vkv_gguf_find_key(g, key) >= 0 && !vkv_gguf_get_f32(g, key, &f)) c->r2_joint[l] = f;
        snprintf(key, sizeof key, KEY "blk.%u.ridge_joint", l);
        if (vkv_gguf_find_key(g, key) >= 0 && !vkv_gguf_get_f32(g, key, &f)) c->ridge_joint[l] = f;
        vkv_clear_error();

        snprintf(key, sizeof key, "calib.blk.%u.w", l);
        uint64_t ne[3] = {c->d_k, c->d_v, H};
        if ((st = read_map(g, path, key, ne, c->w + (size_t)l * per_layer))) goto error;
    }
    /* The joint maps: every layer's or none (a calibration made without them). */
    snprintf(key, sizeof key, "calib.blk.0.w_joint");
    if (vkv_gguf_find_tensor(g, key)) {
        uint64_t ne[3] = {(uint64_t)H * c->d_k, (uint64_t)H * c->d_v, 1};
        size_t joint_layer = per_layer * H;
        if (!(c->w_joint = malloc(joint_layer * id.n_layer * sizeof *c->w_joint))) {
            st = vkv_error(VKV_ERR_OOM, "out of host memory for the joint maps");
            goto error;
        }
        for (uint32_t l = 0; l < id.n_layer; l++) {
            snprintf(key, sizeof key, "calib.blk.%u.w_joint", l);
            if ((st = read_map(g, path, key, ne, c->w_joint + (size_t)l * joint_layer))) goto error;
        }
    }
    if ((st = check_finite(c, path))) goto error;
    vkv_gguf_close(g);
    *out = c;
    return VKV_OK;
error:
    vkv_calib_free(c);
    vkv_gguf_close(g);
    return st;
}

static void describe(const vkv_calib_identity *id, char *buf, size_t n)
{
    snprintf(buf, n, "%s, %u layers, %u KV heads of %u/%u dims, n_embd %u, K/V weight hash %016llx", id->arch,
             id->n_layer, id->n_head_kv, id->head_dim, id->head_dim_v, id->n_embd, (unsigned long long)id->kv_hash);
}

vkv_status vkv_calib_check_model(const vkv_calib *c, const char *calib_path, const vkv_model *m)
{
    vkv_calib_identity mid;
    vkv_status st = vkv_calib_identity_of(m, &mid);
    if (st) return st;
    const vkv_calib_identity *a = &c->id;
    bool same_shape = !strcmp(a->arch, mid.arch) && a->n_layer == mid.n_layer && a->n_head_kv == mid.n_head_kv &&
                      a->head_dim == mid.head_dim && a->head_dim_v == mid.head_dim_v && a->n_embd == mid.n_embd;
    if (same_shape && a->kv_hash == mid.kv_hash) return VKV_OK;
    char want[256], have[256], name[300] = "another model";
    describe(a, want, sizeof want);
    describe(&mid, have, sizeof have);
    if (c->model_name[0]) snprintf(name, sizeof name, "the model \"%s\"", c->model_name);
    return vkv_error(VKV_ERR_ARG,
                     "calibration file '%s' was made for %s (%s), but this model (%s) has %s; "
                     "run 'vkvector calib -m %s' to calibrate this model",
                     calib_path, name, want, m->path, have, m->path);
}

void vkv_calib_default_path(const char *model_path, char *out, size_t size)
{
    snprintf(out, size, "%s", model_path);
    /* a checkpoint folder "dir/" gets "dir.vkcal" beside it, as a GGUF does */
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) out[n - 1] = 0;
    char *dot = strrchr(out, '.');
    if (dot && !strcmp(dot, ".gguf")) *dot = 0;
    strncat(out, ".vkcal", size - strlen(out) - 1);
}

vkv_status vkv_calib_load(const char *path, const vkv_model *m, vkv_calib **out)
{
    *out = NULL;
    vkv_calib *c;
    vkv_status st = vkv_calib_read(path, &c);
    if (st) return st;
    if ((st = vkv_calib_check_model(c, path, m))) {
        vkv_calib_free(c);
        return st;
    }
    *out = c;
    return VKV_OK;
}
