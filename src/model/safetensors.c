/* Hugging Face safetensors reader: the header is parsed once at open with
 * the project's JSON reader, every tensor is checked against its file, and
 * the handle keeps the parsed headers (the tensor names point into them) and
 * the mappings until vkv_st_close. */
#include "model/safetensors.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/file.h"
#include "core/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_LEN_BYTES 8u      /* the u64 header length */
#define ST_NAME_SHOWN 96     /* names come from untrusted files: capped in messages */

static const struct {
    const char *name;
    size_t size;
} dtypes[VKV_ST_DTYPE_COUNT] = {
    [VKV_ST_F32] = {"F32", 4},         [VKV_ST_F16] = {"F16", 2},   [VKV_ST_BF16] = {"BF16", 2},
    [VKV_ST_F64] = {"F64", 8},         [VKV_ST_I64] = {"I64", 8},   [VKV_ST_U64] = {"U64", 8},
    [VKV_ST_I32] = {"I32", 4},         [VKV_ST_U32] = {"U32", 4},   [VKV_ST_I16] = {"I16", 2},
    [VKV_ST_U16] = {"U16", 2},         [VKV_ST_I8] = {"I8", 1},     [VKV_ST_U8] = {"U8", 1},
    [VKV_ST_BOOL] = {"BOOL", 1},       [VKV_ST_F8_E4M3] = {"F8_E4M3", 1},
    [VKV_ST_F8_E5M2] = {"F8_E5M2", 1}, [VKV_ST_F8_E8M0] = {"F8_E8M0", 1},
};

const char *vkv_st_dtype_name(vkv_st_dtype t) { return (unsigned)t < VKV_ST_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t vkv_st_dtype_size(vkv_st_dtype t) { return (unsigned)t < VKV_ST_DTYPE_COUNT ? dtypes[t].size : 0; }

static int shown(const char *s)
{
    size_t n = strlen(s);
    return n > ST_NAME_SHOWN ? ST_NAME_SHOWN : (int)n;
}

typedef struct st_file {
    char *path;            /* what messages call the file */
    const uint8_t *base;   /* [size] */
    size_t size;
    void *map;             /* to unmap; NULL for a caller's buffer */
    vkv_json_doc *doc;     /* the header; tensor names point into it */
    const vkv_json *meta;  /* __metadata__, or NULL */
    uint64_t data_off;     /* 8 + the header length */
} st_file;

struct vkv_st {
    st_file *files;
    size_t n_files, cap_files;
    vkv_st_tensor *tensors;
    size_t n_tensors, cap_tensors;
    size_t *by_name;       /* tensor indices sorted by name */
};

/* A format error about one file: "safetensors: 'file': ...". */
static vkv_status ferr(const st_file *f, const char *fmt, ...) VKV_PRINTF(2, 3);
static vkv_status ferr(const st_file *f, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': %s", f->path, msg);
}

/* The same about one tensor of it. */
static vkv_status terr(const st_file *f, const char *tensor, const char *fmt, ...) VKV_PRINTF(3, 4);
static vkv_status terr(const st_file *f, const char *tensor, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': tensor '%.*s': %s", f->path, shown(tensor), tensor, msg);
}

static vkv_status read_shape(const st_file *f, const char *name, const vkv_json *shape, vkv_st_tensor *t)
{
    if (!shape) return terr(f, name, "has no 'shape'");
    if (shape->type != VKV_JSON_ARRAY)
        return terr(f, name, "'shape' is %s, not an array", vkv_json_type_name(shape->type));
    if (shape->n_items > VKV_ST_MAX_DIMS)
        return terr(f, name, "'shape' has %zu dimensions, more than %d", shape->n_items, VKV_ST_MAX_DIMS);
    t->n_dims = (uint32_t)shape->n_items;
    t->n_elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        const char *bad = vkv_json_as_uint(shape->items[d], &t->shape[d]);
        if (bad) return terr(f, name, "'shape'[%u] is %s, not a non-negative integer", d, bad);
        if (t->shape[d] && t->n_elems > UINT64_MAX / t->shape[d])
            return terr(f, name, "'shape' has too many elements (overflows 64 bits)");
        t->n_elems *= t->shape[d];
    }
    if (t->n_elems > UINT64_MAX / dtypes[t->dtype].size)
        return terr(f, name, "'shape' has a byte size that overflows 64 bits");
    return VKV_OK;
}

static vkv_status read_tensor(const st_file *f, const char *name, const vkv_json *v, vkv_st_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->file = f->path;
    if (v->type != VKV_JSON_OBJECT) return terr(f, name, "is %s, not an object", vkv_json_type_name(v->type));
    const vkv_json *dtype = vkv_json_get(v, "dtype");
    if (!dtype) return terr(f, name, "has no 'dtype'");
    if (dtype->type != VKV_JSON_STRING)
        return terr(f, name, "'dtype' is %s, not a string", vkv_json_type_name(dtype->type));
    unsigned k = 0;
    while (k < VKV_ST_DTYPE_COUNT && strcmp(dtype->string, dtypes[k].name)) k++;
    if (k == VKV_ST_DTYPE_COUNT) return terr(f, name, "unknown dtype '%.*s'", shown(dtype->string), dtype->string);
    t->dtype = (vkv_st_dtype)k;
    vkv_status s = read_shape(f, name, vkv_json_get(v, "shape"), t);
    if (s) return s;

    const vkv_json *offs = vkv_json_get(v, "data_offsets");
    if (!offs) return terr(f, name, "has no 'data_offsets'");
    if (offs->type != VKV_JSON_ARRAY || offs->n_items != 2)
        return terr(f, name, "'data_offsets' is not an array of two numbers [begin, end]");
    uint64_t be[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const char *bad = vkv_json_as_uint(offs->items[i], &be[i]);
        if (bad) return terr(f, name, "'data_offsets'[%d] is %s, not a non-negative integer", i, bad);
    }
    uint64_t data_bytes = f->size - f->data_off;
    if (be[0] > be[1])
        return terr(f, name, "'data_offsets' [%" PRIu64 ", %" PRIu64 "] end before they begin", be[0], be[1]);
    if (be[1] > data_bytes)
        return terr(f, name, "'data_offsets' [%" PRIu64 ", %" PRIu64 "] run past the end of the data section (%" PRIu64
                    " bytes)", be[0], be[1], data_bytes);
    t->begin = be[0];
    t->nbytes = be[1] - be[0];
    if (t->nbytes != t->n_elems * dtypes[t->dtype].size)
        return terr(f, name, "'data_offsets' [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64 " bytes, but %" PRIu64
                    " elements of %s take %" PRIu64, be[0], be[1], t->nbytes, t->n_elems, dtypes[t->dtype].name,
                    t->n_elems * dtypes[t->dtype].size);
    t->data = f->base + f->data_off + t->begin;
    return VKV_OK;
}

static vkv_status read_metadata(const st_file *f, const vkv_json *meta)
{
    if (meta->type != VKV_JSON_OBJECT)
        return ferr(f, "'__metadata__' is %s, not an object", vkv_json_type_name(meta->type));
    for (size_t i = 0; i < meta->n_items; i++)
        if (meta->items[i]->type != VKV_JSON_STRING)
            return ferr(f, "'__metadata__' entry '%.*s' is %s, not a string", shown(meta->keys[i]), meta->keys[i],
                        vkv_json_type_name(meta->items[i]->type));
    return VKV_OK;
}

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static int cmp_begin(const void *a, const void *b, void *ctx)
{
    const vkv_st_tensor *t = ctx;
    return cmp_u64(t[*(const size_t *)a].begin, t[*(const size_t *)b].begin);
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const vkv_st_tensor *t = ctx;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

/* Tensors [first, st->n_tensors) of file f: no two of them overlap. */
static vkv_status check_overlaps(vkv_st *st, const st_file *f, size_t first)
{
    size_t n = 0, *ix = malloc((st->n_tensors - first + 1) * sizeof *ix);
    if (!ix) return vkv_error(VKV_ERR_OOM, "safetensors: '%s': tensor spans", f->path);
    for (size_t i = first; i < st->n_tensors; i++)
        if (st->tensors[i].nbytes) ix[n++] = i; /* an empty tensor overlaps nothing */
    qsort_r(ix, n, sizeof *ix, cmp_begin, st->tensors);
    vkv_status s = VKV_OK;
    for (size_t k = 1; k < n && !s; k++) {
        const vkv_st_tensor *a = &st->tensors[ix[k - 1]], *b = &st->tensors[ix[k]];
        if (b->begin < a->begin + a->nbytes)
            s = ferr(f, "tensors '%.*s' [%" PRIu64 ", %" PRIu64 ") and '%.*s' [%" PRIu64 ", %" PRIu64 ") overlap",
                     shown(a->name), a->name, a->begin, a->begin + a->nbytes, shown(b->name), b->name, b->begin,
                     b->begin + b->nbytes);
    }
    free(ix);
    return s;
}

/* Parses the file just added as st->files[st->n_files - 1]. */
static vkv_status parse_file(vkv_st *st, st_file *f)
{
    if (f->size < ST_LEN_BYTES)
        return ferr(f, "file of %zu bytes is too short for the 8-byte header length", f->size);
    uint64_t n;
    memcpy(&n, f->base, sizeof n);
    if (n > VKV_ST_MAX_HEADER_BYTES)
        return ferr(f, "header length %" PRIu64 " is more than the limit of %" PRIu64 " bytes", n,
                    VKV_ST_MAX_HEADER_BYTES);
    if (n > f->size - ST_LEN_BYTES)
        return ferr(f, "header length %" PRIu64 " runs past the end of the file (%zu bytes)", n, f->size);
    f->data_off = ST_LEN_BYTES + n;
    const char *text = (const char *)f->base + ST_LEN_BYTES;
    if (n == 0 || text[0] != '{') return ferr(f, "the header is not a JSON object (it does not start with '{')");
    vkv_status s = vkv_json_parse(text, (size_t)n, &f->doc);
    if (s) return vkv_error_context(s, "safetensors: '%s': header", f->path);
    const vkv_json *root = vkv_json_root(f->doc);
    if (root->type != VKV_JSON_OBJECT) return ferr(f, "the header is not a JSON object");

    size_t first = st->n_tensors;
    for (size_t i = 0; i < root->n_items; i++) {
        const char *key = root->keys[i];
        if (!strcmp(key, "__metadata__")) {
            if (f->meta) return ferr(f, "'__metadata__' appears twice");
            if ((s = read_metadata(f, root->items[i]))) return s;
            f->meta = root->items[i];
            continue;
        }
        if (st->n_tensors == st->cap_tensors) {
            size_t cap = st->cap_tensors ? st->cap_tensors * 2 : 64;
            vkv_st_tensor *nt = realloc(st->tensors, cap * sizeof *nt);
            if (!nt) return vkv_error(VKV_ERR_OOM, "safetensors: '%s': %zu tensors", f->path, cap);
            st->tensors = nt;
            st->cap_tensors = cap;
        }
        if ((s = read_tensor(f, key, root->items[i], &st->tensors[st->n_tensors]))) return s;
        st->n_tensors++;
    }
    return check_overlaps(st, f, first);
}

static st_file *add_file(vkv_st *st, const char *path)
{
    if (st->n_files == st->cap_files) {
        size_t cap = st->cap_files ? st->cap_files * 2 : 4;
        st_file *nf = realloc(st->files, cap * sizeof *nf);
        if (!nf) return NULL;
        st->files = nf;
        st->cap_files = cap;
    }
    st_file *f = &st->files[st->n_files];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path))) return NULL;
    st->n_files++;
    return f;
}

/* Maps path and parses it into st. */
static vkv_status load_file(vkv_st *st, const char *path)
{
    st_file *f = add_file(st, path);
    if (!f) return vkv_error(VKV_ERR_OOM, "safetensors: '%s'", path);
    void *map;
    vkv_status s = vkv_map_file(path, "safetensors", &map, &f->size);
    if (s) return s;
    f->map = map;
    f->base = map;
    if (f->size < ST_LEN_BYTES) return ferr(f, "file of %zu bytes is too short for the 8-byte header length", f->size);
    return parse_file(st, f);
}

/* Sorts the name index and refuses duplicate names. */
static vkv_status index_names(vkv_st *st)
{
    st->by_name = malloc((st->n_tensors + 1) * sizeof *st->by_name);
    if (!st->by_name) return vkv_error(VKV_ERR_OOM, "safetensors: index of %zu tensors", st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++) st->by_name[i] = i;
    qsort_r(st->by_name, st->n_tensors, sizeof *st->by_name, cmp_name, st->tensors);
    for (size_t k = 1; k < st->n_tensors; k++) {
        const vkv_st_tensor *a = &st->tensors[st->by_name[k - 1]], *b = &st->tensors[st->by_name[k]];
        if (strcmp(a->name, b->name)) continue;
        if (a->file == b->file)
            return vkv_error(VKV_ERR_FORMAT, "safetensors: '%s': tensor '%.*s' appears twice", a->file,
                             shown(a->name), a->name);
        return vkv_error(VKV_ERR_FORMAT, "safetensors: tensor '%.*s' appears in both '%s' and '%s'", shown(a->name),
                         a->name, a->file, b->file);
    }
    return VKV_OK;
}

void vkv_st_close(vkv_st *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->n_files; i++) {
        st_file *f = &st->files[i];
        vkv_json_free(f->doc);
        if (f->map) munmap(f->map, f->size);
        free(f->path);
    }
    free(st->files);
    free(st->tensors);
    free(st->by_name);
    free(st);
}

/* Ends an open: on success indexes the names and hands st over. */
static vkv_status finish(vkv_st *st, vkv_status s, vkv_st **out)
{
    if (!s) s = index_names(st);
    if (s) {
        vkv_st_close(st);
        return s;
    }
    *out = st;
    return VKV_OK;
}

vkv_status vkv_st_open(const char *path, vkv_st **out)
{
    if (!path || !out) return vkv_error(VKV_ERR_ARG, "safetensors: open: NULL argument");
    *out = NULL;
    vkv_st *st = calloc(1, sizeof *st);
    if (!st) return vkv_error(VKV_ERR_OOM, "safetensors: handle");
    return finish(st, load_file(st, path), out);
}

vkv_status vkv_st_open_memory(const void *data, size_t size, const char *name, vkv_st **out)
{
    if (!out || !name || (!data && size)) return vkv_error(VKV_ERR_ARG, "safetensors: open_memory: NULL argument");
    *out = NULL;
    vkv_st *st = calloc(1, sizeof *st);
    if (!st) return vkv_error(VKV_ERR_OOM, "safetensors: handle");
    st_file *f = add_file(st, name);
    if (!f) return finish(st, vkv_error(VKV_ERR_OOM, "safetensors: '%s'", name), out);
    static const uint8_t empty[1];
    f->base = data ? data : empty;
    f->size = size;
    return finish(st, parse_file(st, f), out);
}

/* dir/name into a fresh string (NULL when out of memory). */
static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* A shard's name in an index: a plain file name of the same folder. */
static bool plain_file_name(const vkv_json *v)
{
    const char *s = v->string;
    return v->string_len && strlen(s) == v->string_len && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..") &&
           strcmp(s, ".");
}

static vkv_status open_index(vkv_st *st, const char *dir, const char *index_path)
{
    vkv_json_doc *doc;
    vkv_status s = vkv_json_parse_file(index_path, &doc);
    if (s) return vkv_error_context(s, "safetensors index");
    const vkv_json *map = vkv_json_get(vkv_json_root(doc), "weight_map");
    if (!map || map->type != VKV_JSON_OBJECT) {
        s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': %s", index_path,
                      map ? "'weight_map' is not an object" : "no 'weight_map'");
        goto done;
    }
    if (!map->n_items) {
        s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': 'weight_map' is empty", index_path);
        goto done;
    }
    /* every shard, once, in the order the map first names it */
    for (size_t i = 0; i < map->n_items && !s; i++) {
        const vkv_json *v = map->items[i];
        if (v->type != VKV_JSON_STRING) {
            s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': 'weight_map' entry '%.*s' is %s, not a file name",
                          index_path, shown(map->keys[i]), map->keys[i], vkv_json_type_name(v->type));
            break;
        }
        if (!plain_file_name(v)) {
            s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': 'weight_map' entry '%.*s' names shard '%.*s', "
                          "not a plain file name in the same folder", index_path, shown(map->keys[i]), map->keys[i],
                          shown(v->string), v->string);
            break;
        }
        char *path = join(dir, v->string);
        if (!path) {
            s = vkv_error(VKV_ERR_OOM, "safetensors index '%s'", index_path);
            break;
        }
        size_t k = 0;
        while (k < st->n_files && strcmp(st->files[k].path, path)) k++;
        if (k == st->n_files) s = load_file(st, path);
        free(path);
    }
    if (!s) s = index_names(st);
    for (size_t i = 0; i < map->n_items && !s; i++) {
        const vkv_st_tensor *t = vkv_st_find(st, map->keys[i]);
        char *path = join(dir, map->items[i]->string);
        if (!path) s = vkv_error(VKV_ERR_OOM, "safetensors index '%s'", index_path);
        else if (!t)
            s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': tensor '%.*s' is not in its shard '%s'", index_path,
                          shown(map->keys[i]), map->keys[i], path);
        else if (strcmp(t->file, path))
            s = vkv_error(VKV_ERR_FORMAT, "safetensors index '%s': tensor '%.*s' is in '%s', not in its shard '%s'",
                          index_path, shown(map->keys[i]), map->keys[i], t->file, path);
        free(path);
    }
done:
    vkv_json_free(doc);
    return s;
}

vkv_status vkv_st_open_dir(const char *dir, vkv_st **out)
{
    if (!dir || !out) return vkv_error(VKV_ERR_ARG, "safetensors: open_dir: NULL argument");
    *out = NULL;
    vkv_st *st = calloc(1, sizeof *st);
    char *index = join(dir, VKV_ST_INDEX_FILE), *single = join(dir, VKV_ST_SINGLE_FILE);
    vkv_status s;
    if (!st || !index || !single) s = vkv_error(VKV_ERR_OOM, "safetensors: '%s'", dir);
    else if (access(index, F_OK) == 0) {
        s = open_index(st, dir, index);
        if (!s) { /* indexed already: hand over as is */
            free(index);
            free(single);
            *out = st;
            return VKV_OK;
        }
    } else if (access(single, F_OK) == 0) s = load_file(st, single);
    else
        s = vkv_error(VKV_ERR_IO, "safetensors: '%s' holds neither " VKV_ST_INDEX_FILE " nor " VKV_ST_SINGLE_FILE, dir);
    free(index);
    free(single);
    if (!st) return s;
    if (s) {
        vkv_st_close(st);
        return s;
    }
    return finish(st, s, out);
}

size_t vkv_st_n_tensors(const vkv_st *st) { return st->n_tensors; }
size_t vkv_st_n_files(const vkv_st *st) { return st->n_files; }

const vkv_st_tensor *vkv_st_tensor_at(const vkv_st *st, size_t i)
{
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const vkv_st_tensor *vkv_st_find(const vkv_st *st, const char *name)
{
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[st->by_name[mid]].name, name);
        if (!c) return &st->tensors[st->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *vkv_st_metadata(const vkv_st *st, const char *key)
{
    for (size_t i = 0; i < st->n_files; i++) {
        const vkv_json *v = vkv_json_get(st->files[i].meta, key);
        if (v) return v->string;
    }
    return NULL;
}

vkv_status vkv_st_require_float(const vkv_st_tensor *t)
{
    if (t->dtype == VKV_ST_F32 || t->dtype == VKV_ST_F16 || t->dtype == VKV_ST_BF16) return VKV_OK;
    return vkv_error(VKV_ERR_UNSUPPORTED, "safetensors: '%s': tensor '%.*s' has dtype %s, which vkvector does not "
                     "read weights from (F32, F16 or BF16)", t->file, shown(t->name), t->name,
                     vkv_st_dtype_name(t->dtype));
}

void vkv_st_release(const vkv_st *st, const void *data, uint64_t size)
{
    for (size_t i = 0; i < st->n_files; i++) vkv_map_release(st->files[i].map, st->files[i].size, data, size);
}
