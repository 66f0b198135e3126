/* GGUF v2/v3 reader and writer.
 *
 * File layout (all little-endian, v2 and v3 are identical on disk):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x      { string key | u32 type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   zero padding to `alignment` | data section (each tensor at an aligned offset)
 * string = u64 len | len bytes; array value = u32 elem_type | u64 count | elements.
 *
 * The reader parses everything once at open and keeps only offsets into the
 * mapping, so every later accessor reads bytes that were already bounds-checked. */
#include "model/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/file.h"
#include "core/out_file.h"

/* Values are read and written with memcpy in host order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host"
#endif

#define GGUF_MAGIC "GGUF"
#define GGUF_HEADER_BYTES 24u          /* magic, version, n_tensors, n_kv */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_KEY_ALIGNMENT "general.alignment"
#define GGUF_MAX_ARRAY_DEPTH 8         /* arrays of arrays: deeper is surely garbage */
/* Smallest possible on-disk records, used to bound counts by the bytes left. */
#define GGUF_MIN_KV_BYTES 13u          /* empty key (8) + type (4) + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32u      /* empty name (8) + n_dims (4) + ne[0] (8) + type (4) + offset (8) */
#define GGUF_WRITER_MAX_NAME 63u       /* llama.cpp rejects tensor names of 64+ bytes (GGML_MAX_NAME) */

/* ---------------------------------------------------------------- helpers */

static const char *const gguf_type_names[] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

static bool gguf_type_valid(uint32_t t) { return t <= VKV_GGUF_FLOAT64; }

static const char *gguf_type_name(uint32_t t)
{
    return gguf_type_valid(t) ? gguf_type_names[t] : "invalid";
}

/* Bytes of one element of a fixed-size type; 0 for string and array. */
static size_t gguf_type_size(uint32_t t)
{
    switch (t) {
    case VKV_GGUF_UINT8: case VKV_GGUF_INT8: case VKV_GGUF_BOOL: return 1;
    case VKV_GGUF_UINT16: case VKV_GGUF_INT16: return 2;
    case VKV_GGUF_UINT32: case VKV_GGUF_INT32: case VKV_GGUF_FLOAT32: return 4;
    case VKV_GGUF_UINT64: case VKV_GGUF_INT64: case VKV_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Smallest encoding of one element of type t (to bound array counts). */
static size_t gguf_type_min_size(uint32_t t)
{
    if (t == VKV_GGUF_STRING) return 8;       /* u64 len */
    if (t == VKV_GGUF_ARRAY) return 12;       /* u32 elem_type + u64 count */
    return gguf_type_size(t);
}

static bool gguf_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool gguf_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

static bool gguf_align_up(uint64_t x, uint64_t align, uint64_t *out)
{
    if (!gguf_add_u64(x, align - 1, out)) return false;
    *out &= ~(align - 1);
    return true;
}

static bool gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

static uint32_t gguf_rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t gguf_rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint64_t gguf_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Shown in messages: names come from untrusted files, so cap their length. */
#define GGUF_NAME_SHOWN 96
static int gguf_shown_len(uint64_t len) { return len > GGUF_NAME_SHOWN ? GGUF_NAME_SHOWN : (int)len; }

/* Checks a tensor's shape and computes its byte size: *nbytes = 0 for a type
 * this runtime does not know (the loader reports it when it uses the tensor).
 * Returns what is wrong as a phrase for a message, or NULL. */
static const char *gguf_tensor_size(uint32_t type, uint32_t n_dims, const uint64_t ne[VKV_GGUF_MAX_DIMS],
                                    uint64_t *nbytes)
{
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0) return "has a zero dimension";
        if (!gguf_mul_u64(n_elems, ne[d], &n_elems) || n_elems > (uint64_t)INT64_MAX)
            return "has too many elements (overflows 64 bits)";
    }
    *nbytes = 0;
    const vkv_dtype_info *info = vkv_dtype_get(type);
    if (!info || info->block_size == 0) return NULL;
    if (ne[0] % info->block_size) return "has ne[0] not a multiple of its type's block size";
    uint64_t n = ne[0] / info->block_size * info->block_bytes;
    for (uint32_t d = 1; d < n_dims; d++)
        if (!gguf_mul_u64(n, ne[d], &n)) return "has a byte size that overflows 64 bits";
    *nbytes = n;
    return NULL;
}

/* ----------------------------------------------------------------- reader */

typedef struct gguf_kv {
    vkv_gguf_str key;
    uint64_t key_off;     /* file offset of the key's length field, for messages */
    uint32_t type;
    uint32_t elem_type;   /* arrays only */
    uint64_t count;       /* arrays only */
    size_t value_off;     /* scalar: the value; string: its length field; array: first element */
    uint64_t *str_offs;   /* string arrays: file offset of each element's length field */
} gguf_kv;

/* Open-addressing index: slot holds entry index + 1, 0 = empty. */
typedef struct gguf_index {
    uint64_t *slots;
    uint64_t mask;
} gguf_index;

struct vkv_gguf {
    const uint8_t *base;   /* [size] the file bytes */
    size_t size;
    void *map;             /* the mapping to unmap, NULL for a caller's buffer */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_off;     /* file offset of the data section */

    gguf_kv *kv;           /* [n_kv] */
    size_t n_kv, cap_kv;
    gguf_index kv_index;

    vkv_gguf_tensor *tensors; /* [n_tensors] */
    size_t n_tensors, cap_tensors;
    gguf_index tensor_index;
};

typedef struct gguf_cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
} gguf_cursor;

static vkv_status gguf_need(const gguf_cursor *c, uint64_t n, const char *what)
{
    if (n <= c->size - c->pos) return VKV_OK;
    return vkv_error(VKV_ERR_FORMAT, "%s at offset %zu needs %" PRIu64 " bytes but the file ends at %zu",
                     what, c->pos, n, c->size);
}

static vkv_status gguf_read_u32(gguf_cursor *c, const char *what, uint32_t *out)
{
    vkv_status s = gguf_need(c, 4, what);
    if (s) return s;
    *out = gguf_rd32(c->base + c->pos);
    c->pos += 4;
    return VKV_OK;
}

static vkv_status gguf_read_u64(gguf_cursor *c, const char *what, uint64_t *out)
{
    vkv_status s = gguf_need(c, 8, what);
    if (s) return s;
    *out = gguf_rd64(c->base + c->pos);
    c->pos += 8;
    return VKV_OK;
}

static vkv_status gguf_read_str(gguf_cursor *c, const char *what, vkv_gguf_str *out)
{
    size_t at = c->pos;
    uint64_t len;
    vkv_status s = gguf_read_u64(c, what, &len);
    if (s) return s;
    if (len > c->size - c->pos)
        return vkv_error(VKV_ERR_FORMAT, "%s at offset %zu has length %" PRIu64
                         " but only %zu bytes remain in the file (size %zu)",
                         what, at, len, c->size - c->pos, c->size);
    out->data = (const char *)c->base + c->pos;
    out->len = len;
    c->pos += (size_t)len;
    return VKV_OK;
}

/* Reads an array's header and checks `count` against the bytes left. */
static vkv_status gguf_read_array_header(gguf_cursor *c, uint32_t *elem_type, uint64_t *count)
{
    size_t at = c->pos;
    vkv_status s = gguf_read_u32(c, "array element type", elem_type);
    if (s) return s;
    if (!gguf_type_valid(*elem_type))
        return vkv_error(VKV_ERR_FORMAT, "array at offset %zu has invalid element type %" PRIu32,
                         at, *elem_type);
    if ((s = gguf_read_u64(c, "array length", count))) return s;
    size_t left = c->size - c->pos, min = gguf_type_min_size(*elem_type);
    if (*count > left / min)
        return vkv_error(VKV_ERR_FORMAT, "array at offset %zu has length %" PRIu64 " of %s"
                         " (at least %zu bytes each) but only %zu bytes remain in the file (size %zu)",
                         at, *count, gguf_type_name(*elem_type), min, left, c->size);
    return VKV_OK;
}

/* Skips one value of `type`, checking every length inside it. */
static vkv_status gguf_skip_value(gguf_cursor *c, uint32_t type, int depth)
{
    if (type == VKV_GGUF_STRING) {
        vkv_gguf_str str;
        return gguf_read_str(c, "string", &str);
    }
    if (type != VKV_GGUF_ARRAY) {
        vkv_status s = gguf_need(c, gguf_type_size(type), gguf_type_name(type));
        if (!s) c->pos += gguf_type_size(type);
        return s;
    }
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return vkv_error(VKV_ERR_FORMAT, "array at offset %zu is nested more than %d deep",
                         c->pos, GGUF_MAX_ARRAY_DEPTH);
    uint32_t elem_type;
    uint64_t count;
    vkv_status s = gguf_read_array_header(c, &elem_type, &count);
    if (s) return s;
    size_t esize = gguf_type_size(elem_type);
    if (esize) {
        c->pos += (size_t)(count * esize); /* bounded by the header check */
        return VKV_OK;
    }
    for (uint64_t i = 0; i < count; i++)
        if ((s = gguf_skip_value(c, elem_type, depth + 1)))
            return vkv_error_context(s, "element %" PRIu64, i);
    return VKV_OK;
}

/* Parses the value of kv (its type already read). */
static vkv_status gguf_parse_value(gguf_cursor *c, gguf_kv *kv)
{
    if (kv->type != VKV_GGUF_ARRAY) {
        kv->value_off = c->pos;
        return gguf_skip_value(c, kv->type, 0);
    }
    vkv_status s = gguf_read_array_header(c, &kv->elem_type, &kv->count);
    if (s) return s;
    kv->value_off = c->pos;
    if (kv->elem_type != VKV_GGUF_STRING) {
        size_t esize = gguf_type_size(kv->elem_type);
        if (esize) {
            c->pos += (size_t)(kv->count * esize);
            return VKV_OK;
        }
        for (uint64_t i = 0; i < kv->count; i++)
            if ((s = gguf_skip_value(c, kv->elem_type, 1)))
                return vkv_error_context(s, "element %" PRIu64, i);
        return VKV_OK;
    }
    /* String array: index every element so arr_str is O(1). count <= bytes/8,
     * so the index is never larger than the file. */
    if (kv->count) {
        kv->str_offs = malloc((size_t)kv->count * sizeof *kv->str_offs);
        if (!kv->str_offs)
            return vkv_error(VKV_ERR_OOM, "index of %" PRIu64 " strings", kv->count);
    }
    for (uint64_t i = 0; i < kv->count; i++) {
        kv->str_offs[i] = c->pos;
        vkv_gguf_str str;
        if ((s = gguf_read_str(c, "string", &str)))
            return vkv_error_context(s, "element %" PRIu64, i);
    }
    return VKV_OK;
}

static void gguf_index_free(gguf_index *ix) { free(ix->slots); ix->slots = NULL; }

static vkv_status gguf_index_alloc(gguf_index *ix, size_t n)
{
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap *= 2;  /* load <= 1/2 */
    ix->slots = calloc((size_t)cap, sizeof *ix->slots);
    if (!ix->slots) return vkv_error(VKV_ERR_OOM, "gguf: index of %zu names", n);
    ix->mask = cap - 1;
    return VKV_OK;
}

/* Inserts entry i named (s, n); returns the index of an equal name already
 * present, or -1 after inserting. `name_of` gives the name of an entry. */
typedef vkv_gguf_str (*gguf_name_fn)(const vkv_gguf *g, size_t i);

static int64_t gguf_index_insert(gguf_index *ix, const vkv_gguf *g, gguf_name_fn name_of, size_t i)
{
    vkv_gguf_str name = name_of(g, i);
    for (uint64_t h = gguf_hash(name.data, (size_t)name.len);; h++) {
        uint64_t *slot = &ix->slots[h & ix->mask];
        if (!*slot) {
            *slot = i + 1;
            return -1;
        }
        vkv_gguf_str other = name_of(g, (size_t)(*slot - 1));
        if (other.len == name.len && memcmp(other.data, name.data, (size_t)name.len) == 0)
            return (int64_t)(*slot - 1);
    }
}

static int64_t gguf_index_find(const gguf_index *ix, const vkv_gguf *g, gguf_name_fn name_of,
                               const char *key)
{
    if (!ix->slots || !key) return -1;
    size_t n = strlen(key);
    for (uint64_t h = gguf_hash(key, n);; h++) {
        uint64_t slot = ix->slots[h & ix->mask];
        if (!slot) return -1;
        vkv_gguf_str other = name_of(g, (size_t)(slot - 1));
        if (other.len == n && memcmp(other.data, key, n) == 0) return (int64_t)(slot - 1);
    }
}

static vkv_gguf_str gguf_kv_name(const vkv_gguf *g, size_t i) { return g->kv[i].key; }

static vkv_gguf_str gguf_tensor_name(const vkv_gguf *g, size_t i)
{
    vkv_gguf_str s = { g->tensors[i].name, strlen(g->tensors[i].name) };
    return s;
}

static vkv_status gguf_parse_kvs(vkv_gguf *g, gguf_cursor *c, uint64_t n_kv)
{
    vkv_status s;
    for (uint64_t i = 0; i < n_kv; i++) {
        /* Grow as entries parse, so memory follows real content, not the claimed count. */
        if (g->n_kv == g->cap_kv) {
            size_t cap = g->cap_kv ? g->cap_kv * 2 : 16;
            gguf_kv *kv = realloc(g->kv, cap * sizeof *kv);
            if (!kv) return vkv_error(VKV_ERR_OOM, "gguf: %zu key/value pairs", cap);
            g->kv = kv;
            g->cap_kv = cap;
        }
        gguf_kv *kv = &g->kv[g->n_kv];
        memset(kv, 0, sizeof *kv);
        kv->key_off = c->pos;
        if ((s = gguf_read_str(c, "key", &kv->key)))
            return vkv_error_context(s, "gguf: key/value pair %" PRIu64, i);
        g->n_kv++;
        int shown = gguf_shown_len(kv->key.len);
        if (memchr(kv->key.data, 0, (size_t)kv->key.len))
            return vkv_error(VKV_ERR_FORMAT, "gguf: key at offset %" PRIu64 " contains a NUL byte",
                             kv->key_off);
        size_t type_off = c->pos;
        if ((s = gguf_read_u32(c, "value type", &kv->type)))
            return vkv_error_context(s, "gguf: key '%.*s'", shown, kv->key.data);
        if (!gguf_type_valid(kv->type))
            return vkv_error(VKV_ERR_FORMAT, "gguf: key '%.*s' has invalid value type %" PRIu32
                             " at offset %zu", shown, kv->key.data, kv->type, type_off);
        if ((s = gguf_parse_value(c, kv)))
            return vkv_error_context(s, "gguf: key '%.*s'", shown, kv->key.data);
    }

    if ((s = gguf_index_alloc(&g->kv_index, g->n_kv))) return s;
    for (size_t i = 0; i < g->n_kv; i++) {
        int64_t dup = gguf_index_insert(&g->kv_index, g, gguf_kv_name, i);
        if (dup >= 0)
            return vkv_error(VKV_ERR_FORMAT, "gguf: duplicate key '%.*s' at offsets %" PRIu64
                             " and %" PRIu64, gguf_shown_len(g->kv[i].key.len), g->kv[i].key.data,
                             g->kv[dup].key_off, g->kv[i].key_off);
    }
    return VKV_OK;
}

static vkv_status gguf_parse_alignment(vkv_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = vkv_gguf_find_key(g, GGUF_KEY_ALIGNMENT);
    if (i < 0) return VKV_OK;
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != VKV_GGUF_UINT32)
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '" GGUF_KEY_ALIGNMENT "' at offset %" PRIu64
                         " has type %s, expected u32", kv->key_off, gguf_type_name(kv->type));
    uint32_t a = gguf_rd32(g->base + kv->value_off);
    if (!gguf_is_pow2(a))
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '" GGUF_KEY_ALIGNMENT "' at offset %zu is %" PRIu32
                         ", expected a nonzero power of two", kv->value_off, a);
    g->alignment = a;
    return VKV_OK;
}

static vkv_status gguf_parse_tensor_info(vkv_gguf *g, gguf_cursor *c, uint64_t i)
{
    if (g->n_tensors == g->cap_tensors) {
        size_t cap = g->cap_tensors ? g->cap_tensors * 2 : 16;
        vkv_gguf_tensor *t = realloc(g->tensors, cap * sizeof *t);
        if (!t) return vkv_error(VKV_ERR_OOM, "gguf: %zu tensor infos", cap);
        g->tensors = t;
        g->cap_tensors = cap;
    }
    vkv_gguf_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);

    size_t at = c->pos;
    vkv_gguf_str name;
    vkv_status s = gguf_read_str(c, "tensor name", &name);
    if (s) return vkv_error_context(s, "gguf: tensor info %" PRIu64, i);
    int shown = gguf_shown_len(name.len);
    if (memchr(name.data, 0, (size_t)name.len))
        return vkv_error(VKV_ERR_FORMAT, "gguf: tensor name at offset %zu contains a NUL byte", at);
    t->name = malloc((size_t)name.len + 1);
    if (!t->name) return vkv_error(VKV_ERR_OOM, "gguf: tensor name of %" PRIu64 " bytes", name.len);
    memcpy(t->name, name.data, (size_t)name.len);
    t->name[name.len] = 0;
    g->n_tensors++;

    size_t dims_off = c->pos;
    if ((s = gguf_read_u32(c, "n_dims", &t->n_dims)))
        return vkv_error_context(s, "gguf: tensor '%.*s'", shown, name.data);
    if (t->n_dims < 1 || t->n_dims > VKV_GGUF_MAX_DIMS)
        return vkv_error(VKV_ERR_FORMAT, "gguf: tensor '%.*s' has n_dims %" PRIu32
                         " at offset %zu, expected 1..%d", shown, name.data, t->n_dims, dims_off,
                         VKV_GGUF_MAX_DIMS);
    size_t ne_off = c->pos;
    for (uint32_t d = 0; d < VKV_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (s = gguf_read_u64(c, "ne", &t->ne[d])))
            return vkv_error_context(s, "gguf: tensor '%.*s'", shown, name.data);
    }
    if ((s = gguf_read_u32(c, "type", &t->type)) || (s = gguf_read_u64(c, "offset", &t->offset)))
        return vkv_error_context(s, "gguf: tensor '%.*s'", shown, name.data);

    const char *bad = gguf_tensor_size(t->type, t->n_dims, t->ne, &t->nbytes);
    if (bad)
        return vkv_error(VKV_ERR_FORMAT, "gguf: tensor '%.*s' (type %" PRIu32 ", shape [%" PRIu64
                         ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "] at offset %zu) %s", shown, name.data,
                         t->type, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne_off, bad);
    return VKV_OK;
}

typedef struct gguf_span {
    uint64_t begin, end;   /* relative to the data section */
    size_t tensor;
} gguf_span;

static int gguf_span_cmp(const void *a, const void *b)
{
    const gguf_span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Places every tensor's data inside the file, aligned, without overlaps. */
static vkv_status gguf_place_tensors(vkv_gguf *g)
{
    uint64_t data_bytes = g->data_off <= g->size ? g->size - g->data_off : 0;
    size_t n_spans = 0;
    gguf_span *spans = g->n_tensors ? malloc(g->n_tensors * sizeof *spans) : NULL;
    if (g->n_tensors && !spans) return vkv_error(VKV_ERR_OOM, "gguf: %zu tensor spans", g->n_tensors);

    vkv_status s = VKV_OK;
    for (size_t i = 0; i < g->n_tensors; i++) {
        vkv_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment) {
            s = vkv_error(VKV_ERR_FORMAT, "gguf: tensor '%.*s' data offset %" PRIu64
                          " is not a multiple of the alignment %" PRIu64, gguf_shown_len(strlen(t->name)),
                          t->name, t->offset, g->alignment);
            goto done;
        }
        if (t->offset > data_bytes || t->nbytes > data_bytes - t->offset) {
            uint64_t at;
            if (gguf_add_u64(g->data_off, t->offset, &at))
                s = vkv_error(VKV_ERR_FORMAT, "gguf: tensor '%.*s' data [offset %" PRIu64 ", %" PRIu64
                              " bytes) runs past the end of the file (size %zu)",
                              gguf_shown_len(strlen(t->name)), t->name, at, t->nbytes, g->size);
            else
                s = vkv_error(VKV_ERR_FORMAT, "gguf: tensor '%.*s' data offset %" PRIu64
                              " runs past the end of the file (size %zu)",
                              gguf_shown_len(strlen(t->name)), t->name, t->offset, g->size);
            goto done;
        }
        if (t->nbytes == 0) continue; /* unknown type: no data until the loader says so */
        t->data = g->base + g->data_off + t->offset;
        spans[n_spans++] = (gguf_span){ t->offset, t->offset + t->nbytes, i };
    }
    if (n_spans > 1) qsort(spans, n_spans, sizeof *spans, gguf_span_cmp);
    for (size_t k = 1; k < n_spans; k++) {
        if (spans[k].begin >= spans[k - 1].end) continue;
        const vkv_gguf_tensor *a = &g->tensors[spans[k - 1].tensor], *b = &g->tensors[spans[k].tensor];
        s = vkv_error(VKV_ERR_FORMAT, "gguf: tensors '%.*s' [offset %" PRIu64 ", %" PRIu64
                      " bytes) and '%.*s' [offset %" PRIu64 ", %" PRIu64 " bytes) overlap",
                      gguf_shown_len(strlen(a->name)), a->name, g->data_off + a->offset, a->nbytes,
                      gguf_shown_len(strlen(b->name)), b->name, g->data_off + b->offset, b->nbytes);
        goto done;
    }
done:
    free(spans);
    return s;
}

/* Parses and validates the whole file; on failure c->pos is where it stopped. */
static vkv_status gguf_parse(vkv_gguf *g, gguf_cursor *c)
{
    vkv_status s;

    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0) {
        if (g->size < 4)
            return vkv_error(VKV_ERR_FORMAT, "gguf: file of %zu bytes is too short for the magic", g->size);
        return vkv_error(VKV_ERR_FORMAT, "gguf: bad magic %02x %02x %02x %02x at offset 0 (not a GGUF file)",
                         g->base[0], g->base[1], g->base[2], g->base[3]);
    }
    c->pos = 4;
    if ((s = gguf_read_u32(c, "gguf: version", &g->version))) return s;
    if (g->version == 1)
        return vkv_error(VKV_ERR_FORMAT, "gguf: version 1 at offset 4 is not supported (GGUF v2 or v3 required)");
    if (g->version != 2 && g->version != 3) {
        if (g->version == 0x02000000u || g->version == 0x03000000u)
            return vkv_error(VKV_ERR_FORMAT, "gguf: version %" PRIu32 " at offset 4: a big-endian file,"
                             " which is not supported", g->version);
        return vkv_error(VKV_ERR_FORMAT, "gguf: unsupported version %" PRIu32 " at offset 4"
                         " (GGUF v2 or v3 required)", g->version);
    }
    uint64_t n_tensors, n_kv;
    if ((s = gguf_read_u64(c, "gguf: n_tensors", &n_tensors))) return s;
    if ((s = gguf_read_u64(c, "gguf: n_kv", &n_kv))) return s;

    /* The counts claim records of known minimum size: reject what cannot fit. */
    size_t left = g->size - c->pos;
    if (n_kv > left / GGUF_MIN_KV_BYTES)
        return vkv_error(VKV_ERR_FORMAT, "gguf: n_kv %" PRIu64 " at offset 16 is impossible: the remaining"
                         " %zu bytes hold at most %zu key/value pairs", n_kv, left, left / GGUF_MIN_KV_BYTES);
    left -= (size_t)n_kv * GGUF_MIN_KV_BYTES;
    if (n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return vkv_error(VKV_ERR_FORMAT, "gguf: n_tensors %" PRIu64 " at offset 8 is impossible: the"
                         " remaining %zu bytes hold at most %zu tensor infos after %" PRIu64 " key/value pairs",
                         n_tensors, g->size - c->pos, left / GGUF_MIN_TENSOR_BYTES, n_kv);

    if ((s = gguf_parse_kvs(g, c, n_kv))) return s;
    if ((s = gguf_parse_alignment(g))) return s;

    for (uint64_t i = 0; i < n_tensors; i++)
        if ((s = gguf_parse_tensor_info(g, c, i))) return s;
    if ((s = gguf_index_alloc(&g->tensor_index, g->n_tensors))) return s;
    for (size_t i = 0; i < g->n_tensors; i++) {
        int64_t dup = gguf_index_insert(&g->tensor_index, g, gguf_tensor_name, i);
        if (dup >= 0)
            return vkv_error(VKV_ERR_FORMAT, "gguf: duplicate tensor name '%.*s' (tensor infos %" PRId64
                             " and %zu)", gguf_shown_len(strlen(g->tensors[i].name)), g->tensors[i].name,
                             dup, i);
    }

    /* A file without tensor data may end before the padding. */
    if (!gguf_align_up(c->pos, g->alignment, &g->data_off))
        return vkv_error(VKV_ERR_FORMAT, "gguf: data section offset overflows");
    return gguf_place_tensors(g);
}

/* EF BF BD in p[0, n): what a UTF-8 decoder leaves of invalid bytes. */
static bool gguf_has_replacement_char(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 3 <= n; i++)
        if (p[i] == 0xef && p[i + 1] == 0xbf && p[i + 2] == 0xbd) return true;
    return false;
}

static vkv_status gguf_open_bytes(const uint8_t *data, size_t size, void *map, vkv_gguf **out)
{
    vkv_gguf *g = calloc(1, sizeof *g);
    if (!g) return vkv_error(VKV_ERR_OOM, "gguf: handle");
    g->base = data;
    g->size = size;
    g->map = map;
    gguf_cursor c = { data, size, 0 };
    vkv_status s = gguf_parse(g, &c);
    if (s == VKV_ERR_FORMAT && gguf_has_replacement_char(data, c.pos)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkv_last_error());
        vkv_error(s, "%s (the bytes before it contain U+FFFD replacement characters: the file was"
                  " probably damaged by a UTF-8 text conversion)", msg);
    }
    if (s) {
        vkv_gguf_close(g);
        return s;
    }
    *out = g;
    return VKV_OK;
}

vkv_status vkv_gguf_open_memory(const void *data, size_t size, vkv_gguf **out)
{
    if (!out || (!data && size)) return vkv_error(VKV_ERR_ARG, "gguf: open_memory: NULL argument");
    *out = NULL;
    static const uint8_t empty[1];
    return gguf_open_bytes(data ? data : empty, size, NULL, out);
}

vkv_status vkv_gguf_open(const char *path, vkv_gguf **out)
{
    if (!path || !out) return vkv_error(VKV_ERR_ARG, "gguf: open: NULL argument");
    *out = NULL;
    void *map;
    size_t size;
    vkv_status ms = vkv_map_file(path, "gguf", &map, &size);
    if (ms) return ms;
    if (size == 0) return vkv_error(VKV_ERR_FORMAT, "gguf: '%s' is empty", path);
    vkv_status s = gguf_open_bytes(map, size, map, out);
    if (s) return vkv_error_context(s, "%s", path);
    return VKV_OK;
}

void vkv_gguf_close(vkv_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].str_offs);
    for (size_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    gguf_index_free(&g->kv_index);
    gguf_index_free(&g->tensor_index);
    if (g->map) munmap(g->map, g->size);
    free(g);
}

void vkv_gguf_release(const vkv_gguf *g, const void *data, uint64_t size)
{
    vkv_map_release(g->map, g->size, data, size);
}

uint32_t vkv_gguf_version(const vkv_gguf *g) { return g->version; }
uint64_t vkv_gguf_alignment(const vkv_gguf *g) { return g->alignment; }
int64_t vkv_gguf_n_kv(const vkv_gguf *g) { return (int64_t)g->n_kv; }

int64_t vkv_gguf_find_key(const vkv_gguf *g, const char *key)
{
    return gguf_index_find(&g->kv_index, g, gguf_kv_name, key);
}

vkv_gguf_str vkv_gguf_key_name(const vkv_gguf *g, int64_t i)
{
    vkv_gguf_str none = { NULL, 0 };
    return i >= 0 && (uint64_t)i < g->n_kv ? g->kv[i].key : none;
}

int64_t vkv_gguf_kv_value_offset(const vkv_gguf *g, int64_t i)
{
    return i >= 0 && (uint64_t)i < g->n_kv ? (int64_t)g->kv[i].value_off : -1;
}

const uint8_t *vkv_gguf_bytes(const vkv_gguf *g, size_t *size)
{
    *size = g->size;
    return g->base;
}

vkv_gguf_type vkv_gguf_kv_type(const vkv_gguf *g, int64_t i)
{
    return i >= 0 && (uint64_t)i < g->n_kv ? (vkv_gguf_type)g->kv[i].type : (vkv_gguf_type)-1;
}

/* The kv named key, or NULL with a message naming it. */
static const gguf_kv *gguf_lookup(const vkv_gguf *g, const char *key)
{
    int64_t i = vkv_gguf_find_key(g, key);
    if (i < 0) {
        vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' not found", key ? key : "(null)");
        return NULL;
    }
    return &g->kv[i];
}

/* An integer value as sign + magnitude, so every source type compares exactly. */
typedef struct gguf_int {
    bool negative;   /* then `s` holds the value, else `u` */
    int64_t s;
    uint64_t u;
} gguf_int;

static bool gguf_kv_int(const vkv_gguf *g, const gguf_kv *kv, gguf_int *out)
{
    const uint8_t *p = g->base + kv->value_off;
    int64_t sv;
    switch (kv->type) {
    case VKV_GGUF_UINT8: out->u = p[0]; out->negative = false; return true;
    case VKV_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); out->u = v; out->negative = false; return true; }
    case VKV_GGUF_UINT32: out->u = gguf_rd32(p); out->negative = false; return true;
    case VKV_GGUF_UINT64: out->u = gguf_rd64(p); out->negative = false; return true;
    case VKV_GGUF_INT8: sv = (int8_t)p[0]; break;
    case VKV_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); sv = v; break; }
    case VKV_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); sv = v; break; }
    case VKV_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); sv = v; break; }
    default: return false;
    }
    out->negative = sv < 0;
    out->s = sv;
    out->u = sv < 0 ? 0 : (uint64_t)sv;
    return true;
}

static vkv_status gguf_type_mismatch(const char *key, const gguf_kv *kv, const char *expected)
{
    return vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                     gguf_type_name(kv->type), expected);
}

static vkv_status gguf_get_uint(const vkv_gguf *g, const char *key, uint64_t max, uint64_t *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    gguf_int v;
    if (!gguf_kv_int(g, kv, &v)) return gguf_type_mismatch(key, kv, "an integer");
    if (v.negative)
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' is %" PRId64 ", expected a non-negative value", key, v.s);
    if (v.u > max)
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' is %" PRIu64 ", more than %" PRIu64, key, v.u, max);
    *out = v.u;
    return VKV_OK;
}

vkv_status vkv_gguf_get_u32(const vkv_gguf *g, const char *key, uint32_t *out)
{
    uint64_t v = 0;
    vkv_status s = gguf_get_uint(g, key, UINT32_MAX, &v);
    if (!s) *out = (uint32_t)v;
    return s;
}

vkv_status vkv_gguf_get_u64(const vkv_gguf *g, const char *key, uint64_t *out)
{
    return gguf_get_uint(g, key, UINT64_MAX, out);
}

vkv_status vkv_gguf_get_i64(const vkv_gguf *g, const char *key, int64_t *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    gguf_int v;
    if (!gguf_kv_int(g, kv, &v)) return gguf_type_mismatch(key, kv, "an integer");
    if (v.negative) {
        *out = v.s;
        return VKV_OK;
    }
    if (v.u > (uint64_t)INT64_MAX)
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' is %" PRIu64 ", more than INT64_MAX", key, v.u);
    *out = (int64_t)v.u;
    return VKV_OK;
}

vkv_status vkv_gguf_get_f32(const vkv_gguf *g, const char *key, float *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    const uint8_t *p = g->base + kv->value_off;
    gguf_int v;
    if (kv->type == VKV_GGUF_FLOAT32) {
        memcpy(out, p, 4);
    } else if (kv->type == VKV_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        *out = (float)d;
    } else if (gguf_kv_int(g, kv, &v)) {
        *out = v.negative ? (float)v.s : (float)v.u;
    } else {
        return gguf_type_mismatch(key, kv, "a number");
    }
    return VKV_OK;
}

vkv_status vkv_gguf_get_bool(const vkv_gguf *g, const char *key, bool *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    if (kv->type != VKV_GGUF_BOOL) return gguf_type_mismatch(key, kv, "bool");
    *out = g->base[kv->value_off] != 0;
    return VKV_OK;
}

vkv_status vkv_gguf_get_str(const vkv_gguf *g, const char *key, vkv_gguf_str *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    if (kv->type != VKV_GGUF_STRING) return gguf_type_mismatch(key, kv, "string");
    out->len = gguf_rd64(g->base + kv->value_off);
    out->data = (const char *)g->base + kv->value_off + 8;
    return VKV_OK;
}

vkv_status vkv_gguf_get_u32_opt(const vkv_gguf *g, const char *key, uint32_t *out)
{
    return vkv_gguf_find_key(g, key) < 0 ? VKV_OK : vkv_gguf_get_u32(g, key, out);
}

vkv_status vkv_gguf_get_f32_opt(const vkv_gguf *g, const char *key, float *out)
{
    return vkv_gguf_find_key(g, key) < 0 ? VKV_OK : vkv_gguf_get_f32(g, key, out);
}

vkv_status vkv_gguf_get_bool_opt(const vkv_gguf *g, const char *key, bool *out)
{
    return vkv_gguf_find_key(g, key) < 0 ? VKV_OK : vkv_gguf_get_bool(g, key, out);
}

vkv_status vkv_gguf_get_arr(const vkv_gguf *g, const char *key, vkv_gguf_type *elem_type,
                            uint64_t *count, const void **data)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    if (kv->type != VKV_GGUF_ARRAY) return gguf_type_mismatch(key, kv, "array");
    if (elem_type) *elem_type = (vkv_gguf_type)kv->elem_type;
    if (count) *count = kv->count;
    if (data) *data = g->base + kv->value_off;
    return VKV_OK;
}

vkv_status vkv_gguf_arr_str(const vkv_gguf *g, const char *key, uint64_t i, vkv_gguf_str *out)
{
    const gguf_kv *kv = gguf_lookup(g, key);
    if (!kv) return VKV_ERR_FORMAT;
    if (kv->type != VKV_GGUF_ARRAY || kv->elem_type != VKV_GGUF_STRING)
        return vkv_error(VKV_ERR_FORMAT, "gguf: key '%s' has type %s%s%s, expected array of string", key,
                         gguf_type_name(kv->type), kv->type == VKV_GGUF_ARRAY ? " of " : "",
                         kv->type == VKV_GGUF_ARRAY ? gguf_type_name(kv->elem_type) : "");
    if (i >= kv->count)
        return vkv_error(VKV_ERR_ARG, "gguf: index %" PRIu64 " is out of range for key '%s' (%" PRIu64
                         " strings)", i, key, kv->count);
    const uint8_t *p = g->base + kv->str_offs[i];
    out->len = gguf_rd64(p);
    out->data = (const char *)p + 8;
    return VKV_OK;
}

int64_t vkv_gguf_n_tensors(const vkv_gguf *g) { return (int64_t)g->n_tensors; }

const vkv_gguf_tensor *vkv_gguf_tensor_at(const vkv_gguf *g, int64_t i)
{
    return i >= 0 && (uint64_t)i < g->n_tensors ? &g->tensors[i] : NULL;
}

const vkv_gguf_tensor *vkv_gguf_find_tensor(const vkv_gguf *g, const char *name)
{
    int64_t i = gguf_index_find(&g->tensor_index, g, gguf_tensor_name, name);
    return i < 0 ? NULL : &g->tensors[i];
}

/* ----------------------------------------------------------------- writer */

typedef struct gguf_wkv {
    char *key;
    uint32_t type;
    uint8_t *value;     /* [value_len] the encoded value, as it goes on disk */
    size_t value_len;
} gguf_wkv;

typedef struct gguf_wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[VKV_GGUF_MAX_DIMS];
    uint8_t *data;      /* [nbytes] */
    uint64_t nbytes;
} gguf_wtensor;

struct vkv_gguf_writer {
    uint32_t alignment;
    gguf_wkv *kv;
    size_t n_kv, cap_kv;
    gguf_wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

static vkv_status gguf_writer_put_kv(vkv_gguf_writer *w, const char *key, uint32_t type,
                                     uint8_t *value, size_t value_len);

vkv_gguf_writer *vkv_gguf_writer_new(uint32_t alignment)
{
    if (alignment == 0) alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!gguf_is_pow2(alignment)) {
        vkv_error(VKV_ERR_ARG, "gguf: writer alignment %" PRIu32 " is not a power of two", alignment);
        return NULL;
    }
    vkv_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        vkv_error(VKV_ERR_OOM, "gguf: writer");
        return NULL;
    }
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    /* A non-default alignment must be recorded, or readers assume 32. */
    if (alignment != GGUF_DEFAULT_ALIGNMENT && vkv_gguf_set_u32(w, GGUF_KEY_ALIGNMENT, alignment)) {
        vkv_gguf_writer_free(w);
        return NULL;
    }
    return w;
}

void vkv_gguf_writer_free(vkv_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->kv);
    free(w->tensors);
    free(w);
}

/* Takes ownership of value (freed on failure too). Setting a key again
 * replaces its value in place, as ggml's gguf_set_* do. */
static vkv_status gguf_writer_put_kv(vkv_gguf_writer *w, const char *key, uint32_t type,
                                     uint8_t *value, size_t value_len)
{
    vkv_status s = VKV_OK;
    if (!key) {
        s = vkv_error(VKV_ERR_ARG, "gguf: NULL key");
        goto fail;
    }
    if (strcmp(key, GGUF_KEY_ALIGNMENT) == 0) {
        if (type != VKV_GGUF_UINT32 || !gguf_is_pow2(gguf_rd32(value))) {
            s = vkv_error(VKV_ERR_ARG, "gguf: key '" GGUF_KEY_ALIGNMENT "' must be a u32 power of two");
            goto fail;
        }
        w->alignment = gguf_rd32(value);
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].value);
            w->kv[i].type = type;
            w->kv[i].value = value;
            w->kv[i].value_len = value_len;
            return VKV_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        gguf_wkv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            s = vkv_error(VKV_ERR_OOM, "gguf: writer key/value pairs");
            goto fail;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        s = vkv_error(VKV_ERR_OOM, "gguf: writer key");
        goto fail;
    }
    w->kv[w->n_kv++] = (gguf_wkv){ k, type, value, value_len };
    return VKV_OK;
fail:
    free(value);
    return s;
}

static vkv_status gguf_writer_put_scalar(vkv_gguf_writer *w, const char *key, uint32_t type,
                                         const void *v, size_t n)
{
    uint8_t *value = malloc(n);
    if (!value) return vkv_error(VKV_ERR_OOM, "gguf: writer value");
    memcpy(value, v, n);
    return gguf_writer_put_kv(w, key, type, value, n);
}

vkv_status vkv_gguf_set_u32(vkv_gguf_writer *w, const char *key, uint32_t v)
{
    return gguf_writer_put_scalar(w, key, VKV_GGUF_UINT32, &v, 4);
}

vkv_status vkv_gguf_set_i32(vkv_gguf_writer *w, const char *key, int32_t v)
{
    return gguf_writer_put_scalar(w, key, VKV_GGUF_INT32, &v, 4);
}

vkv_status vkv_gguf_set_u64(vkv_gguf_writer *w, const char *key, uint64_t v)
{
    return gguf_writer_put_scalar(w, key, VKV_GGUF_UINT64, &v, 8);
}

vkv_status vkv_gguf_set_f32(vkv_gguf_writer *w, const char *key, float v)
{
    return gguf_writer_put_scalar(w, key, VKV_GGUF_FLOAT32, &v, 4);
}

vkv_status vkv_gguf_set_bool(vkv_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return gguf_writer_put_scalar(w, key, VKV_GGUF_BOOL, &b, 1);
}

vkv_status vkv_gguf_set_str(vkv_gguf_writer *w, const char *key, const char *v)
{
    if (!v) return vkv_error(VKV_ERR_ARG, "gguf: NULL string for key '%s'", key ? key : "(null)");
    uint64_t len = strlen(v);
    uint8_t *value = malloc(8 + (size_t)len);
    if (!value) return vkv_error(VKV_ERR_OOM, "gguf: writer string");
    memcpy(value, &len, 8);
    memcpy(value + 8, v, (size_t)len);
    return gguf_writer_put_kv(w, key, VKV_GGUF_STRING, value, 8 + (size_t)len);
}

vkv_status vkv_gguf_set_arr(vkv_gguf_writer *w, const char *key, vkv_gguf_type elem_type,
                            const void *data, uint64_t count)
{
    size_t esize = gguf_type_valid(elem_type) ? gguf_type_size(elem_type) : 0;
    if (!esize)
        return vkv_error(VKV_ERR_ARG, "gguf: set_arr '%s': element type %s is not a fixed-size type"
                         " (use set_arr_str for strings)", key ? key : "(null)", gguf_type_name(elem_type));
    uint64_t bytes, total;
    if (!gguf_mul_u64(count, esize, &bytes) || !gguf_add_u64(bytes, 12, &total) || total > SIZE_MAX)
        return vkv_error(VKV_ERR_ARG, "gguf: set_arr '%s': %" PRIu64 " elements is too many",
                         key ? key : "(null)", count);
    if (count && !data) return vkv_error(VKV_ERR_ARG, "gguf: set_arr '%s': NULL data", key ? key : "(null)");
    uint8_t *value = malloc((size_t)total);
    if (!value) return vkv_error(VKV_ERR_OOM, "gguf: writer array of %" PRIu64 " bytes", total);
    uint32_t et = elem_type;
    memcpy(value, &et, 4);
    memcpy(value + 4, &count, 8);
    if (bytes) memcpy(value + 12, data, (size_t)bytes);
    return gguf_writer_put_kv(w, key, VKV_GGUF_ARRAY, value, (size_t)total);
}

vkv_status vkv_gguf_set_arr_str(vkv_gguf_writer *w, const char *key, const char *const *strs,
                                uint64_t count)
{
    uint64_t total = 12;
    if (count && !strs) return vkv_error(VKV_ERR_ARG, "gguf: set_arr_str '%s': NULL strings", key ? key : "(null)");
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i])
            return vkv_error(VKV_ERR_ARG, "gguf: set_arr_str '%s': string %" PRIu64 " is NULL",
                             key ? key : "(null)", i);
        if (!gguf_add_u64(total, 8 + (uint64_t)strlen(strs[i]), &total) || total > SIZE_MAX)
            return vkv_error(VKV_ERR_ARG, "gguf: set_arr_str '%s': too large", key ? key : "(null)");
    }
    uint8_t *value = malloc((size_t)total);
    if (!value) return vkv_error(VKV_ERR_OOM, "gguf: writer string array of %" PRIu64 " bytes", total);
    uint32_t et = VKV_GGUF_STRING;
    memcpy(value, &et, 4);
    memcpy(value + 4, &count, 8);
    size_t pos = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len = strlen(strs[i]);
        memcpy(value + pos, &len, 8);
        memcpy(value + pos + 8, strs[i], (size_t)len);
        pos += 8 + (size_t)len;
    }
    return gguf_writer_put_kv(w, key, VKV_GGUF_ARRAY, value, (size_t)total);
}

vkv_status vkv_gguf_add_tensor(vkv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                               const uint64_t *ne, const void *data, uint64_t nbytes)
{
    if (!name || !ne) return vkv_error(VKV_ERR_ARG, "gguf: add_tensor: NULL name or shape");
    size_t name_len = strlen(name);
    if (name_len > GGUF_WRITER_MAX_NAME)
        return vkv_error(VKV_ERR_ARG, "gguf: tensor name '%s' is longer than %u bytes (llama.cpp's limit)",
                         name, GGUF_WRITER_MAX_NAME);
    if (n_dims < 1 || n_dims > VKV_GGUF_MAX_DIMS)
        return vkv_error(VKV_ERR_ARG, "gguf: tensor '%s' has n_dims %" PRIu32 ", expected 1..%d",
                         name, n_dims, VKV_GGUF_MAX_DIMS);
    gguf_wtensor t = { .type = type, .n_dims = n_dims, .ne = { 1, 1, 1, 1 } };
    memcpy(t.ne, ne, n_dims * sizeof *ne);
    uint64_t expect;
    const char *bad = gguf_tensor_size(type, n_dims, t.ne, &expect);
    if (bad) return vkv_error(VKV_ERR_ARG, "gguf: tensor '%s' %s", name, bad);
    /* A type unknown here is written as given; readers that know it check it. */
    if (expect && nbytes != expect)
        return vkv_error(VKV_ERR_ARG, "gguf: tensor '%s' has %" PRIu64 " bytes, its shape and type need %"
                         PRIu64, name, nbytes, expect);
    if (nbytes > SIZE_MAX) return vkv_error(VKV_ERR_ARG, "gguf: tensor '%s' is too large", name);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return vkv_error(VKV_ERR_ARG, "gguf: duplicate tensor name '%s'", name);

    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        gguf_wtensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) return vkv_error(VKV_ERR_OOM, "gguf: writer tensors");
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    t.nbytes = nbytes;
    t.name = strdup(name);
    t.data = data ? malloc(nbytes ? (size_t)nbytes : 1) : calloc(1, nbytes ? (size_t)nbytes : 1);
    if (!t.name || !t.data) {
        free(t.name);
        free(t.data);
        return vkv_error(VKV_ERR_OOM, "gguf: tensor '%s' of %" PRIu64 " bytes", name, nbytes);
    }
    if (data && nbytes) memcpy(t.data, data, (size_t)nbytes);
    w->tensors[w->n_tensors++] = t;
    return VKV_OK;
}

/* Output: a preallocated buffer or a FILE. */
typedef struct gguf_sink {
    uint8_t *mem;
    size_t pos;
    FILE *file;
    bool failed;
} gguf_sink;

static void gguf_sink_put(gguf_sink *k, const void *p, size_t n)
{
    if (k->failed || n == 0) return;
    if (k->mem) {
        memcpy(k->mem + k->pos, p, n);
    } else if (fwrite(p, 1, n, k->file) != n) {
        k->failed = true;
        return;
    }
    k->pos += n;
}

static void gguf_sink_u32(gguf_sink *k, uint32_t v) { gguf_sink_put(k, &v, 4); }
static void gguf_sink_u64(gguf_sink *k, uint64_t v) { gguf_sink_put(k, &v, 8); }

static void gguf_sink_pad(gguf_sink *k, uint64_t align)
{
    static const uint8_t zeros[256];
    uint64_t end;
    if (!gguf_align_up(k->pos, align, &end)) return; /* cannot happen: the layout was checked */
    while (k->pos < end && !k->failed) {
        size_t n = end - k->pos < sizeof zeros ? (size_t)(end - k->pos) : sizeof zeros;
        gguf_sink_put(k, zeros, n);
    }
}

/* Total file size; fails only when it does not fit in 64 bits. */
static bool gguf_writer_layout(const vkv_gguf_writer *w, uint64_t *total)
{
    uint64_t pos = GGUF_HEADER_BYTES;
    for (size_t i = 0; i < w->n_kv; i++)
        if (!gguf_add_u64(pos, 12 + strlen(w->kv[i].key) + w->kv[i].value_len, &pos)) return false;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!gguf_add_u64(pos, 24 + strlen(w->tensors[i].name) + 8 * w->tensors[i].n_dims, &pos)) return false;
    if (!gguf_align_up(pos, w->alignment, &pos)) return false;
    for (size_t i = 0; i < w->n_tensors; i++) {
        uint64_t padded;
        if (!gguf_align_up(w->tensors[i].nbytes, w->alignment, &padded) || !gguf_add_u64(pos, padded, &pos))
            return false;
    }
    *total = pos;
    return true;
}

static void gguf_writer_emit(const vkv_gguf_writer *w, gguf_sink *k)
{
    gguf_sink_put(k, GGUF_MAGIC, 4);
    gguf_sink_u32(k, 3);
    gguf_sink_u64(k, w->n_tensors);
    gguf_sink_u64(k, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t len = strlen(w->kv[i].key);
        gguf_sink_u64(k, len);
        gguf_sink_put(k, w->kv[i].key, (size_t)len);
        gguf_sink_u32(k, w->kv[i].type);
        gguf_sink_put(k, w->kv[i].value, w->kv[i].value_len);
    }
    /* Tensors follow each other in the order given, each padded to the
     * alignment: llama.cpp requires exactly this packing. */
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const gguf_wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        gguf_sink_u64(k, len);
        gguf_sink_put(k, t->name, (size_t)len);
        gguf_sink_u32(k, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) gguf_sink_u64(k, t->ne[d]);
        gguf_sink_u32(k, t->type);
        gguf_sink_u64(k, offset);
        gguf_align_up(offset + t->nbytes, w->alignment, &offset); /* layout already checked */
    }
    gguf_sink_pad(k, w->alignment);
    for (size_t i = 0; i < w->n_tensors; i++) {
        gguf_sink_put(k, w->tensors[i].data, (size_t)w->tensors[i].nbytes);
        gguf_sink_pad(k, w->alignment);
    }
}

vkv_status vkv_gguf_writer_to_memory(vkv_gguf_writer *w, void **data, size_t *size)
{
    if (!w || !data || !size) return vkv_error(VKV_ERR_ARG, "gguf: writer_to_memory: NULL argument");
    uint64_t total;
    if (!gguf_writer_layout(w, &total) || total > SIZE_MAX)
        return vkv_error(VKV_ERR_ARG, "gguf: file too large for memory");
    gguf_sink k = { .mem = malloc((size_t)total) };
    if (!k.mem) return vkv_error(VKV_ERR_OOM, "gguf: file buffer of %" PRIu64 " bytes", total);
    gguf_writer_emit(w, &k);
    *data = k.mem;
    *size = k.pos;
    return VKV_OK;
}

vkv_status vkv_gguf_writer_to_file(vkv_gguf_writer *w, const char *path)
{
    if (!w || !path) return vkv_error(VKV_ERR_ARG, "gguf: writer_to_file: NULL argument");
    uint64_t total;
    if (!gguf_writer_layout(w, &total)) return vkv_error(VKV_ERR_ARG, "gguf: file size overflows");
    vkv_out out;
    vkv_status st = vkv_out_open(&out, path);
    if (st) return vkv_error_context(st, "gguf");
    gguf_sink k = { .file = out.f };
    gguf_writer_emit(w, &k);
    /* a failed write sets the stream's error too: the commit reports it, and
     * leaves no half file (docs/ARCHITECTURE.md §6) */
    if ((st = vkv_out_commit(&out))) return vkv_error_context(st, "gguf");
    return VKV_OK;
}
