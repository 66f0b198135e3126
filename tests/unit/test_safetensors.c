/* The safetensors reader (src/model/safetensors.c): files written here, valid
 * ones of every dtype, sharded folders, and every malformed case the reader
 * must refuse with an error naming the file instead of reading out of bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"

/* ------------------------------------------------------------ the writer */

typedef struct stbuf {
    uint8_t *p;
    size_t n;
} stbuf;

/* u64 header length | header | data_bytes bytes counting up from 0. */
static stbuf st_build(const char *header, size_t data_bytes)
{
    size_t h = strlen(header);
    stbuf b = {malloc(8 + h + data_bytes + 1), 8 + h + data_bytes};
    assert_non_null(b.p);
    uint64_t len = h;
    memcpy(b.p, &len, 8);
    memcpy(b.p + 8, header, h);
    for (size_t i = 0; i < data_bytes; i++) b.p[8 + h + i] = (uint8_t)i;
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_st(const char *path, const char *header, size_t data_bytes)
{
    stbuf b = st_build(header, data_bytes);
    write_bytes(path, b.p, b.n);
    free(b.p);
}

#define TEST_TMPDIR_NAME "st"
#include "test_tmpdir.h"

static void assert_error_has(const char *want)
{
    const char *msg = vkv_last_error();
    if (!strstr(msg, want)) fail_msg("error '%s' does not contain '%s'", msg, want);
}

/* ------------------------------------------------------------ valid files */

#define SMALL_HEADER                                                                         \
    "{\"__metadata__\":{\"format\":\"pt\"},"                                                 \
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"                     \
    "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"                      \
    "\"c\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[32,40]},"                   \
    "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[40,44]},"                       \
    "\"e\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[44,44]}}    "

static void test_single_file(void **state)
{
    (void)state;
    const char *path = tmp_path("one.safetensors");
    write_st(path, SMALL_HEADER, 44);
    vkv_st *st;
    assert_int_equal(vkv_st_open(path, &st), VKV_OK);
    assert_int_equal(vkv_st_n_tensors(st), 5);
    assert_int_equal(vkv_st_n_files(st), 1);
    assert_string_equal(vkv_st_metadata(st, "format"), "pt");
    assert_null(vkv_st_metadata(st, "nothing"));
    const vkv_st_tensor *a = vkv_st_find(st, "a");
    assert_non_null(a);
    assert_int_equal(a->dtype, VKV_ST_F32);
    assert_int_equal(a->n_dims, 2);
    assert_int_equal(a->shape[0], 2);
    assert_int_equal(a->shape[1], 3);
    assert_int_equal(a->n_elems, 6);
    assert_int_equal(a->nbytes, 24);
    assert_string_equal(a->file, path);
    const uint8_t *d = vkv_st_find(st, "b")->data;
    assert_int_equal(d[0], 24);
    assert_int_equal(d[7], 31);
    assert_int_equal(vkv_st_find(st, "c")->dtype, VKV_ST_BF16);
    const vkv_st_tensor *s = vkv_st_find(st, "s");
    assert_int_equal(s->n_dims, 0);
    assert_int_equal(s->n_elems, 1);
    assert_int_equal(vkv_st_find(st, "e")->n_elems, 0);
    assert_null(vkv_st_find(st, "z"));
    assert_null(vkv_st_find(st, "__metadata__"));
    assert_string_equal(vkv_st_tensor_at(st, 0)->name, "a"); /* file order */
    assert_null(vkv_st_tensor_at(st, 5));
    for (size_t i = 0; i < 5; i++) assert_int_equal(vkv_st_require_float(vkv_st_tensor_at(st, i)), VKV_OK);
    vkv_st_close(st);
}

static void test_every_dtype(void **state)
{
    (void)state;
    char header[4096];
    size_t n = 0, off = 0;
    n += (size_t)snprintf(header + n, sizeof header - n, "{");
    for (int t = 0; t < VKV_ST_DTYPE_COUNT; t++) {
        assert_non_null(vkv_st_dtype_name((vkv_st_dtype)t)); /* every dtype in the reader's table */
        assert_true(vkv_st_dtype_size((vkv_st_dtype)t) > 0);
        size_t bytes = 3 * vkv_st_dtype_size((vkv_st_dtype)t);
        n += (size_t)snprintf(header + n, sizeof header - n, "%s\"t%d\":{\"dtype\":\"%s\",\"shape\":[3],"
                              "\"data_offsets\":[%zu,%zu]}", t ? "," : "", t, vkv_st_dtype_name((vkv_st_dtype)t),
                              off, off + bytes);
        off += bytes;
    }
    snprintf(header + n, sizeof header - n, "}");
    stbuf b = st_build(header, off);
    vkv_st *st;
    assert_int_equal(vkv_st_open_memory(b.p, b.n, "dtypes.safetensors", &st), VKV_OK);
    assert_int_equal(vkv_st_n_tensors(st), VKV_ST_DTYPE_COUNT);
    for (int t = 0; t < VKV_ST_DTYPE_COUNT; t++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", t);
        const vkv_st_tensor *x = vkv_st_find(st, name);
        assert_non_null(x);
        assert_int_equal(x->dtype, t);
        vkv_status s = vkv_st_require_float(x);
        if (t == VKV_ST_F32 || t == VKV_ST_F16 || t == VKV_ST_BF16) {
            assert_int_equal(s, VKV_OK);
        } else {
            assert_int_equal(s, VKV_ERR_UNSUPPORTED);
            assert_error_has(vkv_st_dtype_name((vkv_st_dtype)t));
            assert_error_has(name);
            assert_error_has("dtypes.safetensors");
        }
    }
    assert_int_equal(vkv_st_dtype_size(VKV_ST_I64), 8);
    assert_int_equal(vkv_st_dtype_size(VKV_ST_F8_E4M3), 1);
    vkv_st_close(st);
    free(b.p);
}

/* Every cut of a small file fails, names the file, and never reads past the cut. */
static void test_truncated(void **state)
{
    (void)state;
    stbuf b = st_build(SMALL_HEADER, 44);
    for (size_t len = 0; len < b.n; len++) {
        uint8_t *cut = malloc(len ? len : 1); /* exactly len bytes: ASan sees any read past them */
        assert_non_null(cut);
        memcpy(cut, b.p, len);
        vkv_st *st = (vkv_st *)&st;
        vkv_status s = vkv_st_open_memory(cut, len, "cut.safetensors", &st);
        if (s != VKV_ERR_FORMAT) fail_msg("cut at %zu: status %d", len, s);
        assert_null(st);
        assert_error_has("'cut.safetensors'");
        free(cut);
    }
    /* the same through files, at a few places */
    const size_t cuts[] = {0, 3, 8, 20, b.n - 45, b.n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        const char *path = tmp_path("cut.safetensors");
        write_bytes(path, b.p, cuts[i]);
        vkv_st *st;
        assert_int_equal(vkv_st_open(path, &st), VKV_ERR_FORMAT);
        assert_error_has(path);
    }
    free(b.p);
}

static void test_header_length(void **state)
{
    (void)state;
    stbuf b = st_build(SMALL_HEADER, 44);
    vkv_st *st;
    uint64_t len = b.n - 7; /* one byte past the file */
    memcpy(b.p, &len, 8);
    assert_int_equal(vkv_st_open_memory(b.p, b.n, "long.safetensors", &st), VKV_ERR_FORMAT);
    assert_error_has("'long.safetensors': header length");
    assert_error_has("runs past the end");
    len = (uint64_t)1 << 40;
    memcpy(b.p, &len, 8);
    assert_int_equal(vkv_st_open_memory(b.p, b.n, "huge.safetensors", &st), VKV_ERR_FORMAT);
    assert_error_has("'huge.safetensors': header length 1099511627776 is more than the limit");
    len = UINT64_MAX;
    memcpy(b.p, &len, 8);
    assert_int_equal(vkv_st_open_memory(b.p, b.n, "huge.safetensors", &st), VKV_ERR_FORMAT);
    free(b.p);
}

/* header -> (data bytes, what the error says) */
static const struct {
    const char *header;
    size_t data;
    const char *want;
} bad[] = {
    {"not json at all", 0, "not a JSON object"},
    {"[1,2]", 0, "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],", 0, "header"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "tensor 'a': 'data_offsets' [4, 0] end before"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "tensor 'a': 'data_offsets' [0, 8] run past"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
    {"{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
     "\"a\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}", 16, "overlap"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12, "hold 8 bytes, but 3 elements of F32 take 12"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, "tensor 'a': 'shape'[0] is negative"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "'shape'[0] is not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, "'shape'[0] is a string"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496],\"data_offsets\":[0,0]}}", 0,
     "too many elements"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,1024],\"data_offsets\":[0,0]}}", 0,
     "byte size that overflows"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,0]}}", 0, "not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "more than 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "'shape' is a number"},
    {"{\"a\":{\"dtype\":\"Q4_0\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': unknown dtype 'Q4_0'"},
    {"{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'dtype' is a number"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': has no 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': has no 'shape'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': has no 'data_offsets'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "not an array of two"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, "'data_offsets'[1] is negative"},
    {"{\"a\":[]}", 0, "tensor 'a': is an array, not an object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "tensor 'a' appears twice"},
    {"{\"__metadata__\":{\"n\":1}}", 0, "'__metadata__' entry 'n' is a number, not a string"},
    {"{\"__metadata__\":[]}", 0, "'__metadata__' is an array"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "'__metadata__' appears twice"},
};

static void test_corrupt(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        stbuf b = st_build(bad[i].header, bad[i].data);
        vkv_st *st;
        vkv_status s = vkv_st_open_memory(b.p, b.n, "bad.safetensors", &st);
        if (s != VKV_ERR_FORMAT) fail_msg("case %zu (%s): status %d", i, bad[i].header, s);
        assert_error_has("safetensors: 'bad.safetensors'");
        assert_error_has(bad[i].want);
        free(b.p);
    }
}

/* Gaps between tensors (alignment padding) are fine. */
static void test_gaps(void **state)
{
    (void)state;
    stbuf b = st_build("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 16);
    vkv_st *st;
    assert_int_equal(vkv_st_open_memory(b.p, b.n, "gaps.safetensors", &st), VKV_OK);
    assert_int_equal(*(const uint8_t *)vkv_st_find(st, "b")->data, 8);
    vkv_st_close(st);
    free(b.p);
}

/* ---------------------------------------------------------------- folders */

#define SHARD1                                                                                    \
    "{\"__metadata__\":{\"format\":\"pt\"},"                                                      \
    "\"model.embed_tokens.weight\":{\"dtype\":\"BF16\",\"shape\":[4,2],\"data_offsets\":[0,16]}," \
    "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}"
#define SHARD2 "{\"lm_head.weight\":{\"dtype\":\"F16\",\"shape\":[4,2],\"data_offsets\":[0,16]}}"

static void write_index(const char *weight_map)
{
    char text[1024];
    snprintf(text, sizeof text, "{\"metadata\":{\"total_size\":40},\"weight_map\":{%s}}", weight_map);
    write_bytes(tmp_path(VKV_ST_INDEX_FILE), text, strlen(text));
}

static void make_dir(const char *name)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tmp_path(name), tmp_path(name));
    assert_int_equal(system(cmd), 0);
}

#define GOOD_MAP                                                        \
    "\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\"," \
    "\"lm_head.weight\":\"model-00002-of-00002.safetensors\","            \
    "\"model.norm.weight\":\"model-00001-of-00002.safetensors\""

static void write_shards(void)
{
    write_st(tmp_path("model-00001-of-00002.safetensors"), SHARD1, 24);
    write_st(tmp_path("model-00002-of-00002.safetensors"), SHARD2, 16);
}

static void test_sharded(void **state)
{
    (void)state;
    write_shards();
    write_index(GOOD_MAP);
    vkv_st *st;
    assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_OK);
    assert_int_equal(vkv_st_n_files(st), 2);
    assert_int_equal(vkv_st_n_tensors(st), 3);
    const vkv_st_tensor *t = vkv_st_find(st, "lm_head.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, VKV_ST_F16);
    assert_string_equal(t->file, tmp_path("model-00002-of-00002.safetensors"));
    assert_int_equal(((const uint8_t *)t->data)[15], 15);
    t = vkv_st_find(st, "model.norm.weight");
    assert_string_equal(t->file, tmp_path("model-00001-of-00002.safetensors"));
    assert_int_equal(((const uint8_t *)t->data)[0], 16);
    assert_string_equal(vkv_st_metadata(st, "format"), "pt");
    vkv_st_close(st);
    unlink(tmp_path(VKV_ST_INDEX_FILE));
}

static void test_single_dir(void **state)
{
    (void)state;
    make_dir("single");
    char path[300];
    snprintf(path, sizeof path, "%s/" VKV_ST_SINGLE_FILE, tmp_path("single"));
    write_st(path, SHARD1, 24);
    vkv_st *st;
    assert_int_equal(vkv_st_open_dir(tmp_path("single"), &st), VKV_OK);
    assert_int_equal(vkv_st_n_files(st), 1);
    assert_non_null(vkv_st_find(st, "model.norm.weight"));
    vkv_st_close(st);
    make_dir("empty");
    assert_int_equal(vkv_st_open_dir(tmp_path("empty"), &st), VKV_ERR_IO);
    assert_error_has("holds neither");
}

static void test_bad_index(void **state)
{
    (void)state;
    write_shards();
    vkv_st *st;
    static const struct {
        const char *map;
        vkv_status status;
        const char *want;
    } cases[] = {
        {GOOD_MAP ",\"x.weight\":\"model-00003-of-00003.safetensors\"", VKV_ERR_IO,
         "model-00003-of-00003.safetensors"},
        {"\"a\":\"sub/model.safetensors\"", VKV_ERR_FORMAT, "entry 'a' names shard 'sub/model.safetensors', not a plain"},
        {"\"a\":\"../model.safetensors\"", VKV_ERR_FORMAT, "names shard '../model.safetensors'"},
        {"\"a\":\"..\"", VKV_ERR_FORMAT, "not a plain file name"},
        {"\"a\":\"\"", VKV_ERR_FORMAT, "not a plain file name"},
        {"\"a\":3", VKV_ERR_FORMAT, "entry 'a' is a number"},
        {GOOD_MAP ",\"missing.weight\":\"model-00002-of-00002.safetensors\"", VKV_ERR_FORMAT,
         "tensor 'missing.weight' is not in its shard"},
        {"\"lm_head.weight\":\"model-00001-of-00002.safetensors\","
         "\"model.norm.weight\":\"model-00002-of-00002.safetensors\"", VKV_ERR_FORMAT,
         "tensor 'lm_head.weight' is in '"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_index(cases[i].map);
        vkv_status s = vkv_st_open_dir(tmpdir, &st);
        if (s != cases[i].status) fail_msg("case %zu: status %d: %s", i, s, vkv_last_error());
        assert_error_has(cases[i].want);
    }
    write_index("");
    assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
    assert_error_has("'weight_map' is empty");
    const char *no_map = "{\"metadata\":{}}";
    write_bytes(tmp_path(VKV_ST_INDEX_FILE), no_map, strlen(no_map));
    assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
    assert_error_has("no 'weight_map'");
    write_bytes(tmp_path(VKV_ST_INDEX_FILE), "{", 1);
    assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
    assert_error_has(VKV_ST_INDEX_FILE);
    /* a tensor in two shards */
    write_st(tmp_path("model-00002-of-00002.safetensors"), SHARD1, 24);
    write_index(GOOD_MAP);
    assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
    assert_error_has("appears in both");
    unlink(tmp_path(VKV_ST_INDEX_FILE));
}

/* ---------------------------------------------------------------- fuzzing
 * The GGUF reader's targets (tests/unit/test_gguf.c) applied here: seeded
 * random corruption of a valid file, every numeric field of the header set to
 * edge values, and cut or corrupted files of a sharded folder. Every variant
 * either opens, and then every promise of the header holds and every byte it
 * hands out is readable (ASan checks the reads: buffers are exactly the
 * file's size), or fails with VKV_ERR_FORMAT and a message naming the file. */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13; /* xorshift64 */
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void walk_everything(const vkv_st *st, const uint8_t *base, size_t size)
{
    volatile uint8_t sink = 0;
    size_t n = vkv_st_n_tensors(st);
    for (size_t i = 0; i < n; i++) {
        const vkv_st_tensor *t = vkv_st_tensor_at(st, i);
        assert_non_null(t);
        assert_ptr_equal(vkv_st_find(st, t->name), t);
        assert_true(t->dtype < VKV_ST_DTYPE_COUNT);
        assert_true(t->n_dims <= VKV_ST_MAX_DIMS);
        uint64_t elems = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) elems *= t->shape[d];
        assert_int_equal(elems, t->n_elems);
        assert_int_equal(t->nbytes, t->n_elems * vkv_st_dtype_size(t->dtype));
        if (base) {
            const uint8_t *d = t->data;
            assert_true(d >= base && t->nbytes <= size && (size_t)(d - base) <= size - t->nbytes);
        }
        for (uint64_t j = 0; j < t->nbytes; j++) sink ^= ((const uint8_t *)t->data)[j];
        for (const char *c = t->name; *c; c++) sink ^= (uint8_t)*c;
        for (size_t j = 0; j < i; j++) { /* no two tensors share a byte */
            const vkv_st_tensor *u = vkv_st_tensor_at(st, j);
            if (u->file != t->file || !u->nbytes || !t->nbytes) continue;
            const uint8_t *a = t->data, *b = u->data;
            assert_true(a + t->nbytes <= b || b + u->nbytes <= a);
        }
        vkv_status s = vkv_st_require_float(t);
        assert_true(s == VKV_OK || s == VKV_ERR_UNSUPPORTED);
    }
    assert_null(vkv_st_tensor_at(st, n));
    const char *m = vkv_st_metadata(st, "format");
    if (m)
        for (; *m; m++) sink ^= (uint8_t)*m;
    (void)sink;
}

/* Opens bytes as a file of exactly that size; 1 if it opened (and was walked). */
static int open_and_walk(const uint8_t *bytes, size_t n, const char *name)
{
    uint8_t *exact = malloc(n ? n : 1);
    assert_non_null(exact);
    memcpy(exact, bytes, n);
    vkv_st *st = (vkv_st *)&st;
    vkv_status s = vkv_st_open_memory(exact, n, name, &st);
    int opened = s == VKV_OK;
    if (opened) {
        walk_everything(st, exact, n);
        vkv_st_close(st);
    } else {
        if (s != VKV_ERR_FORMAT) fail_msg("%s: %s: %s", name, vkv_status_name(s), vkv_last_error());
        assert_null(st);
        assert_error_has(name);
    }
    free(exact);
    return opened;
}

/* Tensors of several dtypes and ranks, a gap, metadata and trailing spaces. */
#define FUZZ_HEADER                                                                          \
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"                                  \
    "\"w.q\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"                  \
    "\"w.k\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,28]},"                    \
    "\"w.v\":{\"dtype\":\"F16\",\"shape\":[1,2,2],\"data_offsets\":[28,36]},"                \
    "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[36,44]},"                      \
    "\"u\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[44,48]}}  "
#define FUZZ_DATA 48

static void test_random_corruption(void **state)
{
    (void)state;
    stbuf b = st_build(FUZZ_HEADER, FUZZ_DATA);
    assert_int_equal(open_and_walk(b.p, b.n, "fuzz.safetensors"), 1);
    size_t header_end = 8 + strlen(FUZZ_HEADER);
    static const uint64_t interesting[] = {0, 1, 2, 7, 8, 0xff, 0x7fffffff, 0xffffffff, 1ull << 40,
                                           VKV_ST_MAX_HEADER_BYTES, INT64_MAX, UINT64_MAX};
    static const char json_bytes[] = "0123456789\"{}[],:-.eE \\";
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int n_ok = 0, n_format = 0;
    uint8_t *copy = malloc(b.n);
    assert_non_null(copy);
    for (int v = 0; v < 3000; v++) {
        memcpy(copy, b.p, b.n);
        int n_mut = 1 + (int)(rng_next(&rng) % 3);
        for (int m = 0; m < n_mut; m++) {
            /* Mostly the header: data bytes are opaque to the reader. */
            size_t span = rng_next(&rng) % 8 ? header_end : b.n;
            size_t at = (size_t)(rng_next(&rng) % span);
            switch (rng_next(&rng) % 8) {
            case 0: copy[at] ^= (uint8_t)(1u << (rng_next(&rng) % 8)); break;
            case 1: copy[at] = (uint8_t)rng_next(&rng); break;
            case 2: { /* the length field */
                uint64_t x = interesting[rng_next(&rng) % (sizeof interesting / sizeof *interesting)];
                if (rng_next(&rng) % 2) x = strlen(FUZZ_HEADER) + (rng_next(&rng) % 9) - 4;
                memcpy(copy, &x, 8);
                break;
            }
            default: copy[at] = (uint8_t)json_bytes[rng_next(&rng) % (sizeof json_bytes - 1)]; break;
            }
        }
        size_t n = rng_next(&rng) % 8 ? b.n : (size_t)(rng_next(&rng) % b.n); /* sometimes also cut */
        if (open_and_walk(copy, n, "fuzz.safetensors")) n_ok++;
        else n_format++;
    }
    /* Both outcomes happen, or the mutations exercise nothing. */
    if (n_ok < 50 || n_format < 50) fail_msg("%d opened, %d refused", n_ok, n_format);
    free(copy);
    free(b.p);
}

/* Every number of the header in turn set to each edge value (the header
 * length follows the text, so the JSON stays readable). */
static void test_field_mutations(void **state)
{
    (void)state;
    static const char *const edge[] = {"0", "1", "-1", "-0", "0.5", "1e3", "1e308", "4294967295", "4294967296",
                                       "9223372036854775807", "9223372036854775808", "18446744073709551615",
                                       "18446744073709551616", "99999999999999999999999", "12", "48", "49"};
    const char *h = FUZZ_HEADER;
    size_t len = strlen(h);
    char *text = malloc(len + 64);
    assert_non_null(text);
    int n_fields = 0, n_ok = 0;
    for (size_t i = 0; i < len; i++) {
        if (h[i] < '0' || h[i] > '9' || (i && h[i - 1] >= '0' && h[i - 1] <= '9')) continue;
        size_t end = i;
        while (h[end] >= '0' && h[end] <= '9') end++;
        n_fields++;
        for (size_t e = 0; e < sizeof edge / sizeof *edge; e++) {
            size_t n_edge = strlen(edge[e]);
            memcpy(text, h, i);
            memcpy(text + i, edge[e], n_edge);
            memcpy(text + i + n_edge, h + end, len - end + 1);
            stbuf b = st_build(text, FUZZ_DATA);
            n_ok += open_and_walk(b.p, b.n, "field.safetensors");
            free(b.p);
        }
    }
    assert_true(n_fields >= 15); /* every shape and offset number was visited */
    assert_true(n_ok > 0);       /* some edits keep the file valid (e.g. the same value) */
    free(text);
}

/* A sharded folder with one of its files cut or corrupted: the folder is
 * refused with a message naming a file of the folder, or (a change the
 * checks cannot see, such as a data byte) opens and walks. */
static void open_dir_and_walk(const char *changed)
{
    vkv_st *st = (vkv_st *)&st;
    vkv_status s = vkv_st_open_dir(tmpdir, &st);
    if (s == VKV_OK) {
        walk_everything(st, NULL, 0);
        vkv_st_close(st);
        return;
    }
    /* A changed shard name in the index names a file that is not there. */
    bool index = !strcmp(changed, VKV_ST_INDEX_FILE);
    if (s != VKV_ERR_FORMAT && !(index && s == VKV_ERR_IO))
        fail_msg("%s changed: %s: %s", changed, vkv_status_name(s), vkv_last_error());
    assert_null(st);
    if (!strstr(vkv_last_error(), "safetensors")) fail_msg("%s changed: '%s' names no file", changed, vkv_last_error());
}

static void test_sharded_corruption(void **state)
{
    (void)state;
    static const char *const shard_name[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    const stbuf shard[] = {st_build(SHARD1, 24), st_build(SHARD2, 16)};
    char index[1024];
    snprintf(index, sizeof index, "{\"metadata\":{\"total_size\":40},\"weight_map\":{%s}}", GOOD_MAP);
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (int f = 0; f < 2; f++) {
        write_shards();
        write_index(GOOD_MAP);
        /* every cut of the shard fails and names it */
        for (size_t n = 0; n < shard[f].n; n++) {
            write_bytes(tmp_path(shard_name[f]), shard[f].p, n);
            vkv_st *st;
            assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
            assert_error_has(shard_name[f]);
        }
        uint8_t *copy = malloc(shard[f].n);
        assert_non_null(copy);
        for (int v = 0; v < 300; v++) {
            memcpy(copy, shard[f].p, shard[f].n);
            for (int m = 0; m < 2; m++) copy[rng_next(&rng) % shard[f].n] ^= (uint8_t)(1u << (rng_next(&rng) % 8));
            write_bytes(tmp_path(shard_name[f]), copy, shard[f].n);
            open_dir_and_walk(shard_name[f]);
        }
        free(copy);
    }
    write_shards();
    size_t len = strlen(index);
    for (size_t n = 0; n < len; n++) { /* the index cut short */
        write_bytes(tmp_path(VKV_ST_INDEX_FILE), index, n);
        vkv_st *st;
        assert_int_equal(vkv_st_open_dir(tmpdir, &st), VKV_ERR_FORMAT);
        assert_error_has(VKV_ST_INDEX_FILE);
    }
    char copy[1024];
    for (int v = 0; v < 500; v++) { /* and corrupted */
        memcpy(copy, index, len);
        for (int m = 0; m < 2; m++) {
            size_t at = rng_next(&rng) % len;
            copy[at] = rng_next(&rng) % 2 ? (char)(copy[at] ^ (1 << (rng_next(&rng) % 8))) : "0-\"{}[],:."[rng_next(&rng) % 10];
        }
        write_bytes(tmp_path(VKV_ST_INDEX_FILE), copy, len);
        open_dir_and_walk(VKV_ST_INDEX_FILE);
    }
    unlink(tmp_path(VKV_ST_INDEX_FILE));
    free(shard[0].p);
    free(shard[1].p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),   cmocka_unit_test(test_every_dtype), cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_length), cmocka_unit_test(test_corrupt),     cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_sharded),       cmocka_unit_test(test_single_dir),  cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_random_corruption), cmocka_unit_test(test_field_mutations),
        cmocka_unit_test(test_sharded_corruption),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
