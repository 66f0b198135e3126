/* GGUF reader/writer: round trips, and every malformed-file case the reader
 * must reject with VKV_ERR_FORMAT instead of reading out of bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "model/gguf.h"
#include "model/model.h"

/* ------------------------------------------------ hand-made file builder */

typedef struct tbuf {
    uint8_t *p;
    size_t n, cap;
} tbuf;

static void tb_put(tbuf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void tb_u8(tbuf *b, uint8_t v) { tb_put(b, &v, 1); }
static void tb_u32(tbuf *b, uint32_t v) { tb_put(b, &v, 4); }
static void tb_u64(tbuf *b, uint64_t v) { tb_put(b, &v, 8); }

static void tb_str(tbuf *b, const char *s)
{
    tb_u64(b, strlen(s));
    tb_put(b, s, strlen(s));
}

static void tb_header(tbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    tb_put(b, "GGUF", 4);
    tb_u32(b, version);
    tb_u64(b, n_tensors);
    tb_u64(b, n_kv);
}

static void tb_kv_u32(tbuf *b, const char *key, uint32_t v)
{
    tb_str(b, key);
    tb_u32(b, VKV_GGUF_UINT32);
    tb_u32(b, v);
}

static void tb_tensor_info(tbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           uint64_t offset)
{
    tb_str(b, name);
    tb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) tb_u64(b, ne[d]);
    tb_u32(b, type);
    tb_u64(b, offset);
}

static void tb_pad(tbuf *b, size_t align)
{
    while (b->n % align) tb_u8(b, 0);
}

static void tb_zeros(tbuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) tb_u8(b, 0);
}

/* Opens a copy sized exactly to the bytes, so ASan sees any overread. */
static vkv_status open_bytes(const void *data, size_t n, vkv_gguf **g, void **copy)
{
    *copy = malloc(n ? n : 1);
    assert_non_null(*copy);
    if (n) memcpy(*copy, data, n);
    return vkv_gguf_open_memory(*copy, n, g);
}

/* The file must be rejected as malformed with a message containing `needle`. */
static void expect_format(const tbuf *b, const char *needle)
{
    vkv_gguf *g = NULL;
    void *copy;
    vkv_status s = open_bytes(b->p, b->n, &g, &copy);
    if (s != VKV_ERR_FORMAT || (needle && !strstr(vkv_last_error(), needle)))
        fail_msg("expected FORMAT with '%s', got %s: %s", needle ? needle : "", vkv_status_name(s),
                 vkv_last_error());
    assert_null(g);
    free(copy);
}

/* One f32 tensor of ne elements per name, at the given data offsets. */
typedef struct tinfo {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t offset;
} tinfo;

static void tb_tensor_file(tbuf *b, const tinfo *ts, size_t n, size_t data_bytes)
{
    tb_header(b, 3, n, 0);
    for (size_t i = 0; i < n; i++) tb_tensor_info(b, ts[i].name, ts[i].n_dims, ts[i].ne, ts[i].type, ts[i].offset);
    tb_pad(b, 32);
    tb_zeros(b, data_bytes);
}

/* ------------------------------------------------------ writer fixtures */

/* The writer's file serialised to memory (*data: free() it after closing the
 * handle) and opened; the writer is freed. */
static vkv_gguf *open_written(vkv_gguf_writer *w, void **data, size_t *size)
{
    assert_int_equal(vkv_gguf_writer_to_memory(w, data, size), VKV_OK);
    vkv_gguf_writer_free(w);
    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open_memory(*data, *size, &g), VKV_OK);
    return g;
}

static const char *const k_strs[] = { "hello", "", "wörld", "<0x0A>", "▁the" };
static const uint8_t k_u8[] = { 0, 1, 255 };
static const int8_t k_i8[] = { -128, 0, 127 };
static const uint16_t k_u16[] = { 0, 65535 };
static const int16_t k_i16[] = { -32768, 32767 };
static const uint32_t k_u32[] = { 0, 7, UINT32_MAX };
static const int32_t k_i32[] = { INT32_MIN, -1, INT32_MAX };
static const float k_f32[] = { 1.5f, -0.0f, 1e30f };
static const bool k_bool[] = { true, false, true, true };
static const uint64_t k_u64[] = { 0, UINT64_MAX };
static const int64_t k_i64[] = { INT64_MIN, -2, INT64_MAX };
static const double k_f64[] = { 3.141592653589793, -1e300 };

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* A writer with every value type and three tensors of different dtypes. */
static vkv_gguf_writer *make_writer(uint32_t alignment)
{
    vkv_gguf_writer *w = vkv_gguf_writer_new(alignment);
    assert_non_null(w);
    assert_int_equal(vkv_gguf_set_str(w, "general.architecture", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.block_count", 6), VKV_OK);
    assert_int_equal(vkv_gguf_set_i32(w, "test.i32", -42), VKV_OK);
    assert_int_equal(vkv_gguf_set_u64(w, "test.u64", 0x123456789abcull), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "test.f32", 1e-5f), VKV_OK);
    assert_int_equal(vkv_gguf_set_bool(w, "test.bool", true), VKV_OK);
    assert_int_equal(vkv_gguf_set_str(w, "test.empty_str", ""), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.u8", VKV_GGUF_UINT8, k_u8, N_ELEMS(k_u8)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.i8", VKV_GGUF_INT8, k_i8, N_ELEMS(k_i8)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.u16", VKV_GGUF_UINT16, k_u16, N_ELEMS(k_u16)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.i16", VKV_GGUF_INT16, k_i16, N_ELEMS(k_i16)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.u32", VKV_GGUF_UINT32, k_u32, N_ELEMS(k_u32)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.i32", VKV_GGUF_INT32, k_i32, N_ELEMS(k_i32)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.f32", VKV_GGUF_FLOAT32, k_f32, N_ELEMS(k_f32)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.bool", VKV_GGUF_BOOL, k_bool, N_ELEMS(k_bool)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.u64", VKV_GGUF_UINT64, k_u64, N_ELEMS(k_u64)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.i64", VKV_GGUF_INT64, k_i64, N_ELEMS(k_i64)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.f64", VKV_GGUF_FLOAT64, k_f64, N_ELEMS(k_f64)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr(w, "arr.empty", VKV_GGUF_FLOAT32, NULL, 0), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "tokenizer.ggml.tokens", k_strs, N_ELEMS(k_strs)), VKV_OK);
    assert_int_equal(vkv_gguf_set_arr_str(w, "arr.empty_str", NULL, 0), VKV_OK);

    float emb[8 * 3];          /* [3][8] f32 */
    for (int i = 0; i < 24; i++) emb[i] = (float)i * 0.25f;
    uint16_t half[5];          /* [5] f16 */
    for (int i = 0; i < 5; i++) half[i] = (uint16_t)(0x3c00 + i);
    uint8_t q8[2 * 34];        /* [2][32] q8_0: two blocks */
    for (int i = 0; i < (int)sizeof q8; i++) q8[i] = (uint8_t)(i * 7);
    const uint64_t ne_emb[] = { 8, 3 }, ne_half[] = { 5 }, ne_q8[] = { 32, 1, 2 };
    assert_int_equal(vkv_gguf_add_tensor(w, "token_embd.weight", VKV_F32, 2, ne_emb, emb, sizeof emb), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "output_norm.weight", VKV_F16, 1, ne_half, half, sizeof half), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "blk.0.attn_q.weight", VKV_Q8_0, 3, ne_q8, q8, sizeof q8), VKV_OK);
    return w;
}

static void check_arr(const vkv_gguf *g, const char *key, vkv_gguf_type type, const void *want, size_t n,
                      size_t esize)
{
    vkv_gguf_type et;
    uint64_t count;
    const void *data;
    assert_int_equal(vkv_gguf_get_arr(g, key, &et, &count, &data), VKV_OK);
    assert_int_equal(et, type);
    assert_int_equal(count, n);
    if (n) assert_memory_equal(data, want, n * esize);
}

static bool str_eq(vkv_gguf_str s, const char *c)
{
    return s.len == strlen(c) && memcmp(s.data, c, s.len) == 0;
}

/* ------------------------------------------------------------ round trip */

static void check_values(const vkv_gguf *g)
{
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f = 0;
    bool b = false;
    vkv_gguf_str s;

    assert_int_equal(vkv_gguf_version(g), 3);
    assert_int_equal(vkv_gguf_get_str(g, "general.architecture", &s), VKV_OK);
    assert_true(str_eq(s, "llama"));
    assert_int_equal(vkv_gguf_get_u32(g, "llama.block_count", &u32), VKV_OK);
    assert_int_equal(u32, 6);
    assert_int_equal(vkv_gguf_get_i64(g, "test.i32", &i64), VKV_OK);
    assert_int_equal(i64, -42);
    assert_int_equal(vkv_gguf_get_u64(g, "test.u64", &u64), VKV_OK);
    assert_int_equal(u64, 0x123456789abcull);
    assert_int_equal(vkv_gguf_get_f32(g, "test.f32", &f), VKV_OK);
    assert_true(f == 1e-5f);
    assert_int_equal(vkv_gguf_get_bool(g, "test.bool", &b), VKV_OK);
    assert_true(b);
    assert_int_equal(vkv_gguf_get_str(g, "test.empty_str", &s), VKV_OK);
    assert_int_equal(s.len, 0);

    check_arr(g, "arr.u8", VKV_GGUF_UINT8, k_u8, N_ELEMS(k_u8), 1);
    check_arr(g, "arr.i8", VKV_GGUF_INT8, k_i8, N_ELEMS(k_i8), 1);
    check_arr(g, "arr.u16", VKV_GGUF_UINT16, k_u16, N_ELEMS(k_u16), 2);
    check_arr(g, "arr.i16", VKV_GGUF_INT16, k_i16, N_ELEMS(k_i16), 2);
    check_arr(g, "arr.u32", VKV_GGUF_UINT32, k_u32, N_ELEMS(k_u32), 4);
    check_arr(g, "arr.i32", VKV_GGUF_INT32, k_i32, N_ELEMS(k_i32), 4);
    check_arr(g, "arr.f32", VKV_GGUF_FLOAT32, k_f32, N_ELEMS(k_f32), 4);
    check_arr(g, "arr.bool", VKV_GGUF_BOOL, k_bool, N_ELEMS(k_bool), 1);
    check_arr(g, "arr.u64", VKV_GGUF_UINT64, k_u64, N_ELEMS(k_u64), 8);
    check_arr(g, "arr.i64", VKV_GGUF_INT64, k_i64, N_ELEMS(k_i64), 8);
    check_arr(g, "arr.f64", VKV_GGUF_FLOAT64, k_f64, N_ELEMS(k_f64), 8);
    check_arr(g, "arr.empty", VKV_GGUF_FLOAT32, NULL, 0, 4);
    check_arr(g, "arr.empty_str", VKV_GGUF_STRING, NULL, 0, 0);

    vkv_gguf_type et;
    uint64_t count;
    assert_int_equal(vkv_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &count, NULL), VKV_OK);
    assert_int_equal(et, VKV_GGUF_STRING);
    assert_int_equal(count, N_ELEMS(k_strs));
    for (uint64_t i = count; i-- > 0;) { /* any order: the index is random access */
        assert_int_equal(vkv_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s), VKV_OK);
        assert_true(str_eq(s, k_strs[i]));
    }

    /* Index access agrees with lookup by name. */
    int64_t i = vkv_gguf_find_key(g, "arr.f64");
    assert_true(i >= 0);
    assert_true(str_eq(vkv_gguf_key_name(g, i), "arr.f64"));
    assert_int_equal(vkv_gguf_kv_type(g, i), VKV_GGUF_ARRAY);
    assert_int_equal(vkv_gguf_kv_type(g, vkv_gguf_find_key(g, "test.u64")), VKV_GGUF_UINT64);
    assert_int_equal(vkv_gguf_find_key(g, "no.such.key"), -1);
    assert_int_equal(vkv_gguf_find_key(g, "arr.f6"), -1);
    assert_null(vkv_gguf_key_name(g, vkv_gguf_n_kv(g)).data);
}

static void check_tensors(const vkv_gguf *g)
{
    assert_int_equal(vkv_gguf_n_tensors(g), 3);
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_ptr_equal(t, vkv_gguf_tensor_at(g, 0));
    assert_int_equal(t->type, VKV_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 8);
    assert_int_equal(t->ne[1], 3);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->ne[3], 1);
    assert_int_equal(t->nbytes, 96);
    float v;
    memcpy(&v, (const float *)t->data + 23, 4);
    assert_true(v == 23 * 0.25f);

    t = vkv_gguf_find_tensor(g, "output_norm.weight");
    assert_non_null(t);
    assert_int_equal(t->type, VKV_F16);
    assert_int_equal(t->nbytes, 10);
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 8, 2);
    assert_int_equal(h, 0x3c04);

    t = vkv_gguf_find_tensor(g, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->type, VKV_Q8_0);
    assert_int_equal(t->n_dims, 3);
    assert_int_equal(t->ne[2], 2);
    assert_int_equal(t->nbytes, 68);
    assert_int_equal(((const uint8_t *)t->data)[67], (uint8_t)(67 * 7));

    for (int64_t i = 0; i < 3; i++) {
        t = vkv_gguf_tensor_at(g, i);
        assert_int_equal(t->offset % vkv_gguf_alignment(g), 0);
    }
    assert_null(vkv_gguf_tensor_at(g, 3));
    assert_null(vkv_gguf_tensor_at(g, -1));
    assert_null(vkv_gguf_find_tensor(g, "token_embd"));
}

static void gguf_roundtrip_preserves_every_value_type(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    assert_int_equal(vkv_gguf_alignment(g), 32);
    assert_int_equal(vkv_gguf_find_key(g, "general.alignment"), -1); /* default: not written */
    check_values(g);
    vkv_gguf_close(g);
    free(data);
}

static void gguf_roundtrip_preserves_tensors(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
    vkv_gguf_writer_free(w);
    /* llama.cpp's packing: tensors in order, each padded to 32, file ends padded. */
    assert_int_equal(size % 32, 0);

    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open_memory(data, size, &g), VKV_OK);
    check_tensors(g);
    assert_int_equal(vkv_gguf_tensor_at(g, 0)->offset, 0);
    assert_int_equal(vkv_gguf_tensor_at(g, 1)->offset, 96);
    assert_int_equal(vkv_gguf_tensor_at(g, 2)->offset, 128);
    assert_int_equal((const uint8_t *)vkv_gguf_tensor_at(g, 2)->data + 96 - (const uint8_t *)data, size);
    vkv_gguf_close(g);
    free(data);
}

static void gguf_writer_records_non_default_alignment(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(64);
    void *data;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
    vkv_gguf_writer_free(w);
    assert_int_equal(size % 64, 0);

    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open_memory(data, size, &g), VKV_OK);
    uint32_t a = 0;
    assert_int_equal(vkv_gguf_get_u32(g, "general.alignment", &a), VKV_OK);
    assert_int_equal(a, 64);
    assert_int_equal(vkv_gguf_alignment(g), 64);
    assert_int_equal(vkv_gguf_tensor_at(g, 1)->offset, 128);
    assert_int_equal(vkv_gguf_tensor_at(g, 2)->offset, 192);
    check_tensors(g);
    vkv_gguf_close(g);
    free(data);
}

static void gguf_writer_to_file_roundtrips_through_mmap(void **state)
{
    (void)state;
    char path[] = "/tmp/vkv_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);

    vkv_gguf_writer *w = make_writer(0);
    assert_int_equal(vkv_gguf_writer_to_file(w, path), VKV_OK);
    void *mem;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &mem, &size), VKV_OK);
    vkv_gguf_writer_free(w);

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *disk = malloc(size + 1);
    assert_int_equal(fread(disk, 1, size + 1, f), size); /* same bytes, no more */
    fclose(f);
    assert_memory_equal(disk, mem, size);
    free(disk);
    free(mem);

    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open(path, &g), VKV_OK);
    check_values(g);
    check_tensors(g);
    vkv_gguf_close(g);
    remove(path);
}

static void gguf_writer_replaces_a_key_set_twice(void **state)
{
    (void)state;
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_int_equal(vkv_gguf_set_u32(w, "a", 1), VKV_OK);
    assert_int_equal(vkv_gguf_set_str(w, "b", "x"), VKV_OK);
    assert_int_equal(vkv_gguf_set_str(w, "a", "now a string"), VKV_OK);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    assert_int_equal(vkv_gguf_n_kv(g), 2);
    vkv_gguf_str s;
    assert_int_equal(vkv_gguf_get_str(g, "a", &s), VKV_OK);
    assert_true(str_eq(s, "now a string"));
    vkv_gguf_close(g);
    free(data);
}

static void gguf_writer_rejects_bad_arguments(void **state)
{
    (void)state;
    assert_null(vkv_gguf_writer_new(3));
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    const uint64_t ne[] = { 16, 2 };
    float x[32] = { 0 };
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_F32, 2, ne, x, sizeof x - 4), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_F32, 0, ne, x, sizeof x), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_F32, 5, ne, x, sizeof x), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_Q8_0, 2, ne, x, 68), VKV_ERR_ARG); /* 16 % 32 */
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_F32, 2, ne, x, sizeof x), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "t", VKV_F32, 2, ne, x, sizeof x), VKV_ERR_ARG);
    assert_non_null(strstr(vkv_last_error(), "duplicate tensor name 't'"));
    char longname[80];
    memset(longname, 'a', 64);
    longname[64] = 0;
    assert_int_equal(vkv_gguf_add_tensor(w, longname, VKV_F32, 2, ne, x, sizeof x), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_arr(w, "s", VKV_GGUF_STRING, x, 1), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_arr(w, "s", VKV_GGUF_ARRAY, x, 1), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_arr(w, "s", (vkv_gguf_type)13, x, 1), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_arr(w, "s", VKV_GGUF_UINT64, x, UINT64_MAX / 4), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_u32(w, "general.alignment", 48), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_set_u64(w, "general.alignment", 64), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_writer_to_file(w, "/nonexistent-dir/x.gguf"), VKV_ERR_IO);
    vkv_gguf_writer_free(w);
}

static void gguf_open_keeps_tensor_of_unknown_type(void **state)
{
    (void)state;
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    const uint64_t ne[] = { 7 };
    uint8_t blob[40] = { 1 };
    assert_int_equal(vkv_gguf_add_tensor(w, "exotic", 1000, 1, ne, blob, sizeof blob), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "plain", VKV_F32, 1, ne, NULL, 28), VKV_OK); /* zero-filled */
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(g, "exotic");
    assert_non_null(t);
    assert_int_equal(t->type, 1000);
    assert_int_equal(t->nbytes, 0);
    assert_null(t->data);
    t = vkv_gguf_find_tensor(g, "plain");
    assert_int_equal(t->nbytes, 28);
    assert_int_equal(t->offset, 64);
    assert_int_equal(((const uint8_t *)t->data)[27], 0);
    vkv_gguf_close(g);
    free(data);
}

/* --------------------------------------------------------------- getters */

static void gguf_getters_coerce_integers_with_range_checks(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 11);
    tb_str(&b, "u8"); tb_u32(&b, VKV_GGUF_UINT8); tb_u8(&b, 200);
    tb_str(&b, "i8"); tb_u32(&b, VKV_GGUF_INT8); tb_u8(&b, (uint8_t)-5);
    tb_str(&b, "u16"); tb_u32(&b, VKV_GGUF_UINT16); tb_put(&b, &(uint16_t){ 65535 }, 2);
    tb_str(&b, "i16"); tb_u32(&b, VKV_GGUF_INT16); tb_put(&b, &(int16_t){ -300 }, 2);
    tb_str(&b, "i32"); tb_u32(&b, VKV_GGUF_INT32); tb_put(&b, &(int32_t){ 12345 }, 4);
    tb_str(&b, "u64big"); tb_u32(&b, VKV_GGUF_UINT64); tb_u64(&b, 1ull << 40);
    tb_str(&b, "u64max"); tb_u32(&b, VKV_GGUF_UINT64); tb_u64(&b, UINT64_MAX);
    tb_str(&b, "i64min"); tb_u32(&b, VKV_GGUF_INT64); tb_put(&b, &(int64_t){ INT64_MIN }, 8);
    tb_str(&b, "f64"); tb_u32(&b, VKV_GGUF_FLOAT64); tb_put(&b, &(double){ 0.5 }, 8);
    tb_str(&b, "str"); tb_u32(&b, VKV_GGUF_STRING); tb_str(&b, "7");
    tb_str(&b, "flag"); tb_u32(&b, VKV_GGUF_BOOL); tb_u8(&b, 0);

    vkv_gguf *g;
    void *copy;
    assert_int_equal(open_bytes(b.p, b.n, &g, &copy), VKV_OK);
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool flag = true;

    assert_int_equal(vkv_gguf_get_u32(g, "u8", &u32), VKV_OK);
    assert_int_equal(u32, 200);
    assert_int_equal(vkv_gguf_get_u32(g, "u16", &u32), VKV_OK);
    assert_int_equal(u32, 65535);
    assert_int_equal(vkv_gguf_get_u32(g, "i32", &u32), VKV_OK);
    assert_int_equal(u32, 12345);
    assert_int_equal(vkv_gguf_get_u32(g, "i8", &u32), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "'i8'"));
    assert_int_equal(vkv_gguf_get_u64(g, "i16", &u64), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_i64(g, "i16", &i64), VKV_OK);
    assert_int_equal(i64, -300);
    assert_int_equal(vkv_gguf_get_i64(g, "i8", &i64), VKV_OK);
    assert_int_equal(i64, -5);
    assert_int_equal(vkv_gguf_get_u32(g, "u64big", &u32), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "'u64big'"));
    assert_int_equal(vkv_gguf_get_u64(g, "u64big", &u64), VKV_OK);
    assert_int_equal(u64, 1ull << 40);
    assert_int_equal(vkv_gguf_get_i64(g, "u64max", &i64), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_u64(g, "u64max", &u64), VKV_OK);
    assert_true(u64 == UINT64_MAX);
    assert_int_equal(vkv_gguf_get_i64(g, "i64min", &i64), VKV_OK);
    assert_true(i64 == INT64_MIN);

    assert_int_equal(vkv_gguf_get_f32(g, "f64", &f), VKV_OK);
    assert_true(f == 0.5f);
    assert_int_equal(vkv_gguf_get_f32(g, "i16", &f), VKV_OK);
    assert_true(f == -300.0f);
    assert_int_equal(vkv_gguf_get_u32(g, "f64", &u32), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_u32(g, "str", &u32), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "'str' has type string"));
    assert_int_equal(vkv_gguf_get_f32(g, "str", &f), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_bool(g, "u8", &flag), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_bool(g, "flag", &flag), VKV_OK);
    assert_false(flag);
    vkv_gguf_str s;
    assert_int_equal(vkv_gguf_get_str(g, "u8", &s), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_arr(g, "u8", NULL, NULL, NULL), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_arr_str(g, "str", 0, &s), VKV_ERR_FORMAT);
    vkv_gguf_close(g);
    free(copy);
    free(b.p);
}

static void gguf_getters_name_the_missing_key(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);

    uint32_t u32 = 77;
    float f = 2.5f;
    bool b = true;
    vkv_gguf_str s;
    assert_int_equal(vkv_gguf_get_u32(g, "llama.context_length", &u32), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "'llama.context_length' not found"));
    assert_int_equal(vkv_gguf_get_str(g, "tokenizer.ggml.model", &s), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "tokenizer.ggml.model"));
    assert_int_equal(vkv_gguf_arr_str(g, "tokenizer.ggml.merges", 0, &s), VKV_ERR_FORMAT);
    assert_non_null(strstr(vkv_last_error(), "tokenizer.ggml.merges"));

    /* Optional getters: absent leaves the default, present-but-wrong still fails. */
    assert_int_equal(vkv_gguf_get_u32_opt(g, "llama.context_length", &u32), VKV_OK);
    assert_int_equal(u32, 77);
    assert_int_equal(vkv_gguf_get_f32_opt(g, "llama.rope.freq_base", &f), VKV_OK);
    assert_true(f == 2.5f);
    assert_int_equal(vkv_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &b), VKV_OK);
    assert_true(b);
    assert_int_equal(vkv_gguf_get_u32_opt(g, "llama.block_count", &u32), VKV_OK);
    assert_int_equal(u32, 6);
    assert_int_equal(vkv_gguf_get_u32_opt(g, "general.architecture", &u32), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_bool_opt(g, "test.f32", &b), VKV_ERR_FORMAT);
    assert_int_equal(vkv_gguf_get_f32_opt(g, "test.f32", &f), VKV_OK);
    assert_true(f == 1e-5f);
    vkv_gguf_close(g);
    free(data);
}

static void gguf_arr_str_rejects_out_of_range_index(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    vkv_gguf_str s;
    assert_int_equal(vkv_gguf_arr_str(g, "tokenizer.ggml.tokens", N_ELEMS(k_strs), &s), VKV_ERR_ARG);
    assert_non_null(strstr(vkv_last_error(), "tokenizer.ggml.tokens"));
    assert_int_equal(vkv_gguf_arr_str(g, "tokenizer.ggml.tokens", UINT64_MAX, &s), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_arr_str(g, "arr.empty_str", 0, &s), VKV_ERR_ARG);
    assert_int_equal(vkv_gguf_arr_str(g, "arr.u8", 0, &s), VKV_ERR_FORMAT);
    vkv_gguf_close(g);
    free(data);
}

/* ----------------------------------------------------- header and counts */

static void gguf_open_accepts_v2_and_a_file_without_tensors(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 2, 0, 1);
    tb_kv_u32(&b, "x", 5); /* ends right here: no padding, no data section */
    vkv_gguf *g;
    void *copy;
    assert_int_equal(open_bytes(b.p, b.n, &g, &copy), VKV_OK);
    assert_int_equal(vkv_gguf_version(g), 2);
    assert_int_equal(vkv_gguf_n_tensors(g), 0);
    assert_int_equal(vkv_gguf_n_kv(g), 1);
    assert_null(vkv_gguf_find_tensor(g, "x"));
    vkv_gguf_close(g);
    free(copy);
    free(b.p);
}

static void gguf_open_rejects_bad_magic(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 0);
    b.p[0] = 'g';
    expect_format(&b, "bad magic");
    b.n = 3;
    expect_format(&b, "too short");
    b.n = 0;
    expect_format(&b, "too short");
    free(b.p);
}

static void gguf_open_rejects_version_1(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 1, 0, 0);
    expect_format(&b, "version 1");
    free(b.p);
}

static void gguf_open_rejects_version_99(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 99, 0, 0);
    expect_format(&b, "unsupported version 99");
    free(b.p);
    b = (tbuf){ 0 };
    tb_header(&b, 0x03000000u, 0, 0);
    expect_format(&b, "big-endian");
    free(b.p);
}

static void gguf_open_rejects_absurd_n_tensors(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 1ull << 62, 0);
    tb_zeros(&b, 64);
    expect_format(&b, "n_tensors");
    free(b.p);
    b = (tbuf){ 0 };
    tb_header(&b, 3, UINT64_MAX, 0);
    expect_format(&b, "n_tensors");
    free(b.p);
}

static void gguf_open_rejects_absurd_n_kv(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 1ull << 62);
    tb_zeros(&b, 64);
    expect_format(&b, "n_kv");
    free(b.p);
    /* 3 pairs claimed, room for 2 at most: rejected before parsing any. */
    b = (tbuf){ 0 };
    tb_header(&b, 3, 0, 3);
    tb_zeros(&b, 2 * 13 + 12);
    expect_format(&b, "n_kv 3");
    free(b.p);
}

static void gguf_open_rejects_absurd_string_length(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 1);
    tb_u64(&b, 1ull << 62); /* key length */
    tb_zeros(&b, 16);
    expect_format(&b, "key at offset 24 has length 4611686018427387904");
    free(b.p);

    b = (tbuf){ 0 };
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "general.name");
    tb_u32(&b, VKV_GGUF_STRING);
    tb_u64(&b, UINT64_MAX); /* value length */
    tb_zeros(&b, 8);
    expect_format(&b, "general.name");
    free(b.p);
}

static void gguf_open_rejects_absurd_array_length(void **state)
{
    (void)state;
    const uint32_t types[] = { VKV_GGUF_UINT8, VKV_GGUF_UINT64, VKV_GGUF_STRING, VKV_GGUF_ARRAY };
    const uint64_t counts[] = { 1ull << 62, (1ull << 61) + 1 /* x8 overflows */, UINT64_MAX, 21 };
    for (size_t t = 0; t < N_ELEMS(types); t++) {
        for (size_t c = 0; c < N_ELEMS(counts); c++) {
            tbuf b = { 0 };
            tb_header(&b, 3, 0, 1);
            tb_str(&b, "tokenizer.ggml.tokens");
            tb_u32(&b, VKV_GGUF_ARRAY);
            tb_u32(&b, types[t]);
            tb_u64(&b, counts[c]);
            tb_zeros(&b, 20); /* 20 bytes left: not even 21 u8 fit */
            expect_format(&b, "tokenizer.ggml.tokens");
            free(b.p);
        }
    }
}

static void gguf_open_rejects_invalid_value_type(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k");
    tb_u32(&b, 13);
    tb_zeros(&b, 16);
    expect_format(&b, "invalid value type 13");
    free(b.p);

    b = (tbuf){ 0 };
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "k");
    tb_u32(&b, VKV_GGUF_ARRAY);
    tb_u32(&b, 0xffffffffu);
    tb_u64(&b, 0);
    expect_format(&b, "invalid element type");
    free(b.p);
}

static void tb_nested_arrays(tbuf *b, int depth)
{
    /* depth levels of [1 x ...], innermost a [2 x u16] */
    tb_header(b, 3, 0, 1);
    tb_str(b, "nested");
    tb_u32(b, VKV_GGUF_ARRAY);
    for (int d = 1; d < depth; d++) {
        tb_u32(b, VKV_GGUF_ARRAY);
        tb_u64(b, 1);
    }
    tb_u32(b, VKV_GGUF_UINT16);
    tb_u64(b, 2);
    tb_u32(b, 0x00020001u);
}

static void gguf_open_accepts_nested_arrays(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_nested_arrays(&b, 3);
    vkv_gguf *g;
    void *copy;
    assert_int_equal(open_bytes(b.p, b.n, &g, &copy), VKV_OK);
    vkv_gguf_type et;
    uint64_t count;
    const void *data;
    assert_int_equal(vkv_gguf_get_arr(g, "nested", &et, &count, &data), VKV_OK);
    assert_int_equal(et, VKV_GGUF_ARRAY);
    assert_int_equal(count, 1);
    uint32_t inner;
    memcpy(&inner, data, 4);
    assert_int_equal(inner, VKV_GGUF_ARRAY);
    vkv_gguf_close(g);
    free(copy);
    free(b.p);
}

static void gguf_open_rejects_arrays_nested_too_deep(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_nested_arrays(&b, 100);
    expect_format(&b, "nested more than");
    free(b.p);
}

static void gguf_open_rejects_duplicate_key(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 3);
    tb_kv_u32(&b, "llama.block_count", 1);
    tb_kv_u32(&b, "llama.embedding_length", 2);
    tb_kv_u32(&b, "llama.block_count", 3);
    expect_format(&b, "duplicate key 'llama.block_count'");
    free(b.p);
}

static void gguf_open_rejects_key_with_nul_byte(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 1);
    tb_u64(&b, 3);
    tb_put(&b, "a\0b", 3);
    tb_u32(&b, VKV_GGUF_UINT8);
    tb_u8(&b, 0);
    expect_format(&b, "NUL");
    free(b.p);
}

static void gguf_open_rejects_bad_alignment(void **state)
{
    (void)state;
    const uint32_t bad[] = { 0, 3, 48, 0x80000001u };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        tbuf b = { 0 };
        tb_header(&b, 3, 0, 1);
        tb_kv_u32(&b, "general.alignment", bad[i]);
        expect_format(&b, "power of two");
        free(b.p);
    }
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 1);
    tb_str(&b, "general.alignment");
    tb_u32(&b, VKV_GGUF_UINT64);
    tb_u64(&b, 64);
    expect_format(&b, "expected u32");
    free(b.p);
}

static void gguf_open_honours_alignment(void **state)
{
    (void)state;
    /* alignment 8: a tensor at offset 8 is fine, at offset 4 is not */
    for (int misaligned = 0; misaligned < 2; misaligned++) {
        tbuf b = { 0 };
        tb_header(&b, 3, 1, 1);
        tb_kv_u32(&b, "general.alignment", 8);
        tb_tensor_info(&b, "t", 1, (uint64_t[]){ 2 }, VKV_F32, misaligned ? 4 : 8);
        tb_pad(&b, 8);
        tb_zeros(&b, 16);
        if (misaligned) {
            expect_format(&b, "not a multiple of the alignment 8");
        } else {
            vkv_gguf *g;
            void *copy;
            assert_int_equal(open_bytes(b.p, b.n, &g, &copy), VKV_OK);
            assert_int_equal(vkv_gguf_alignment(g), 8);
            assert_ptr_equal(vkv_gguf_find_tensor(g, "t")->data, (uint8_t *)copy + b.n - 8);
            vkv_gguf_close(g);
            free(copy);
        }
        free(b.p);
    }
}

/* ---------------------------------------------------------------- tensors */

static void gguf_open_rejects_overlapping_tensors(void **state)
{
    (void)state;
    const tinfo ts[] = {
        { "a", 1, { 16 }, VKV_F32, 64 },   /* [64, 128) */
        { "b", 1, { 8 }, VKV_F32, 0 },     /* [0, 32) */
        { "c", 1, { 9 }, VKV_F32, 96 },    /* [96, 132): overlaps a */
    };
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 3, 160);
    expect_format(&b, "overlap");
    assert_non_null(strstr(vkv_last_error(), "'a'"));
    assert_non_null(strstr(vkv_last_error(), "'c'"));
    free(b.p);
}

static void gguf_open_rejects_tensor_offset_past_end(void **state)
{
    (void)state;
    const tinfo ts[] = { { "blk.0.attn_q.weight", 2, { 4, 4 }, VKV_F32, 32 } }; /* [32, 96) of 64 */
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 1, 64);
    expect_format(&b, "tensor 'blk.0.attn_q.weight' data [offset");
    assert_non_null(strstr(vkv_last_error(), "runs past the end of the file"));
    free(b.p);

    const tinfo far[] = { { "t", 1, { 1 }, VKV_F32, UINT64_MAX - 31 } }; /* aligned, offset + base overflows */
    b = (tbuf){ 0 };
    tb_tensor_file(&b, far, 1, 32);
    expect_format(&b, "runs past the end of the file");
    free(b.p);
}

static void gguf_open_rejects_misaligned_tensor_offset(void **state)
{
    (void)state;
    const tinfo ts[] = { { "t", 1, { 4 }, VKV_F32, 16 } };
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 1, 64);
    expect_format(&b, "offset 16 is not a multiple of the alignment 32");
    free(b.p);
}

static void gguf_open_rejects_zero_dims(void **state)
{
    (void)state;
    const tinfo ts[] = { { "t", 0, { 4 }, VKV_F32, 0 } };
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 1, 64);
    expect_format(&b, "n_dims 0");
    free(b.p);
}

static void gguf_open_rejects_five_dims(void **state)
{
    (void)state;
    tbuf b = { 0 };
    tb_header(&b, 3, 1, 0);
    tb_tensor_info(&b, "t", 5, (uint64_t[]){ 1, 1, 1, 1, 1 }, VKV_F32, 0);
    tb_pad(&b, 32);
    tb_zeros(&b, 32);
    expect_format(&b, "n_dims 5");
    free(b.p);
}

static void gguf_open_rejects_zero_or_overflowing_ne(void **state)
{
    (void)state;
    const tinfo zero[] = { { "t", 2, { 4, 0 }, VKV_F32, 0 } };
    tbuf b = { 0 };
    tb_tensor_file(&b, zero, 1, 64);
    expect_format(&b, "zero dimension");
    free(b.p);

    const tinfo huge[] = { { "t", 3, { 1ull << 32, 1ull << 32, 2 }, VKV_F32, 0 } };
    b = (tbuf){ 0 };
    tb_tensor_file(&b, huge, 1, 64);
    expect_format(&b, "too many elements");
    free(b.p);

    /* elements fit in int64, bytes (x4) do not */
    const tinfo bytes[] = { { "t", 2, { 1ull << 31, 1ull << 31 }, VKV_F32, 0 } };
    b = (tbuf){ 0 };
    tb_tensor_file(&b, bytes, 1, 64);
    expect_format(&b, "'t'");
    free(b.p);
}

static void gguf_open_rejects_ne0_not_multiple_of_block(void **state)
{
    (void)state;
    const tinfo ts[] = { { "blk.0.ffn_up.weight", 2, { 48, 2 }, VKV_Q8_0, 0 } };
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 1, 256);
    expect_format(&b, "not a multiple of its type's block size");
    assert_non_null(strstr(vkv_last_error(), "blk.0.ffn_up.weight"));
    free(b.p);
}

static void gguf_open_rejects_duplicate_tensor_name(void **state)
{
    (void)state;
    const tinfo ts[] = {
        { "output.weight", 1, { 8 }, VKV_F32, 0 },
        { "token_embd.weight", 1, { 8 }, VKV_F32, 32 },
        { "output.weight", 1, { 8 }, VKV_F32, 64 },
    };
    tbuf b = { 0 };
    tb_tensor_file(&b, ts, 3, 96);
    expect_format(&b, "duplicate tensor name 'output.weight'");
    free(b.p);
}

static void gguf_open_hints_at_utf8_text_damage(void **state)
{
    (void)state;
    /* u32 0x180 is 80 01 00 00; a UTF-8 decoder turns the 0x80 into EF BF BD. */
    tbuf b = { 0 };
    tb_header(&b, 3, 0, 2);
    tb_str(&b, "bert.embedding_length");
    tb_u32(&b, VKV_GGUF_UINT32);
    tb_put(&b, "\xef\xbf\xbd\x01\x00\x00", 6);
    tb_kv_u32(&b, "bert.feed_forward_length", 1536);
    expect_format(&b, "UTF-8 text conversion");
    free(b.p);
}

static void gguf_open_rejects_missing_file(void **state)
{
    (void)state;
    vkv_gguf *g = (vkv_gguf *)1;
    assert_int_equal(vkv_gguf_open("/nonexistent/model.gguf", &g), VKV_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(vkv_last_error(), "/nonexistent/model.gguf"));
    assert_int_equal(vkv_gguf_open("/tmp", &g), VKV_ERR_IO);
}

/* ------------------------------------------------- truncation, corruption */

/* Touches every byte the handle exposes, so ASan flags any bad pointer. */
static void walk_everything(const vkv_gguf *g)
{
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < vkv_gguf_n_kv(g); i++) {
        vkv_gguf_str k = vkv_gguf_key_name(g, i);
        for (uint64_t j = 0; j < k.len; j++) sink ^= (uint8_t)k.data[j];
        char key[256];
        if (k.len >= sizeof key) continue;
        memcpy(key, k.data, k.len);
        key[k.len] = 0;
        assert_int_equal(vkv_gguf_find_key(g, key), i);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f;
        bool b;
        vkv_gguf_str s;
        (void)vkv_gguf_get_u32(g, key, &u32);
        (void)vkv_gguf_get_u64(g, key, &u64);
        (void)vkv_gguf_get_i64(g, key, &i64);
        (void)vkv_gguf_get_f32(g, key, &f);
        (void)vkv_gguf_get_bool(g, key, &b);
        if (vkv_gguf_get_str(g, key, &s) == VKV_OK)
            for (uint64_t j = 0; j < s.len; j++) sink ^= (uint8_t)s.data[j];
        vkv_gguf_type et;
        uint64_t count;
        const void *data;
        if (vkv_gguf_get_arr(g, key, &et, &count, &data) != VKV_OK) continue;
        if (et == VKV_GGUF_STRING) {
            for (uint64_t j = 0; j < count; j++) {
                assert_int_equal(vkv_gguf_arr_str(g, key, j, &s), VKV_OK);
                for (uint64_t c = 0; c < s.len; c++) sink ^= (uint8_t)s.data[c];
            }
        } else if (et != VKV_GGUF_ARRAY) {
            size_t esize = et == VKV_GGUF_UINT8 || et == VKV_GGUF_INT8 || et == VKV_GGUF_BOOL ? 1
                         : et == VKV_GGUF_UINT16 || et == VKV_GGUF_INT16                     ? 2
                         : et == VKV_GGUF_UINT64 || et == VKV_GGUF_INT64 || et == VKV_GGUF_FLOAT64 ? 8 : 4;
            for (uint64_t j = 0; j < count * esize; j++) sink ^= ((const uint8_t *)data)[j];
        }
    }
    for (int64_t i = 0; i < vkv_gguf_n_tensors(g); i++) {
        const vkv_gguf_tensor *t = vkv_gguf_tensor_at(g, i);
        assert_ptr_equal(vkv_gguf_find_tensor(g, t->name), t);
        for (uint64_t j = 0; j < t->nbytes; j++) sink ^= ((const uint8_t *)t->data)[j];
    }
    (void)sink;
}

static void gguf_open_rejects_truncated_file(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
    vkv_gguf_writer_free(w);

    /* Every cut before the end of the last tensor's data loses something;
     * cuts in the final tensor's padding lose nothing. */
    vkv_gguf *g;
    assert_int_equal(vkv_gguf_open_memory(data, size, &g), VKV_OK);
    const vkv_gguf_tensor *last = vkv_gguf_tensor_at(g, vkv_gguf_n_tensors(g) - 1);
    size_t data_end = (size_t)((const uint8_t *)last->data + last->nbytes - (const uint8_t *)data);
    vkv_gguf_close(g);
    assert_true(data_end < size); /* the test covers both kinds of cut */

    for (size_t n = 0; n < size; n++) {
        void *copy;
        g = NULL;
        vkv_status s = open_bytes(data, n, &g, &copy);
        if (n < data_end) {
            if (s != VKV_ERR_FORMAT) fail_msg("cut at %zu of %zu: %s", n, size, vkv_status_name(s));
            assert_null(g);
        } else {
            assert_int_equal(s, VKV_OK);
            walk_everything(g);
            vkv_gguf_close(g);
        }
        free(copy);
    }
    free(data);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13; /* xorshift64 */
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void gguf_open_survives_random_corruption(void **state)
{
    (void)state;
    vkv_gguf_writer *w = make_writer(0);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    size_t header_end = (size_t)((const uint8_t *)vkv_gguf_tensor_at(g, 0)->data - (const uint8_t *)data);
    vkv_gguf_close(g);

    static const uint64_t interesting[] = { 0, 1, 2, 3, 7, 13, 32, 0xff, 0x7fffffff, 0xffffffff,
                                            1ull << 62, INT64_MAX, UINT64_MAX };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int n_ok = 0, n_format = 0;
    uint8_t *copy = malloc(size);
    for (int v = 0; v < 2000; v++) {
        memcpy(copy, data, size);
        int n_mut = 1 + (int)(rng_next(&rng) % 4);
        for (int m = 0; m < n_mut; m++) {
            /* Mostly the header and metadata: tensor bytes are opaque to the reader. */
            size_t span = rng_next(&rng) % 8 ? header_end : size;
            size_t at = (size_t)(rng_next(&rng) % span);
            switch (rng_next(&rng) % 4) {
            case 0: copy[at] ^= (uint8_t)(1u << (rng_next(&rng) % 8)); break;
            case 1: copy[at] = (uint8_t)rng_next(&rng); break;
            case 2: copy[at] = rng_next(&rng) % 2 ? 0xff : 0x00; break;
            default: {
                uint64_t x = interesting[rng_next(&rng) % N_ELEMS(interesting)];
                size_t n = size - at < 8 ? size - at : 8;
                memcpy(copy + at, &x, n);
            }
            }
        }
        /* Sometimes also cut the file short. */
        size_t n = rng_next(&rng) % 8 ? size : (size_t)(rng_next(&rng) % size);
        void *exact;
        g = NULL;
        vkv_status s = open_bytes(copy, n, &g, &exact);
        if (s == VKV_OK) {
            walk_everything(g);
            vkv_gguf_close(g);
            n_ok++;
        } else {
            if (s != VKV_ERR_FORMAT) fail_msg("variant %d: %s: %s", v, vkv_status_name(s), vkv_last_error());
            assert_null(g);
            n_format++;
        }
        free(exact);
    }
    /* Both outcomes happen, or the mutations are not exercising anything. */
    assert_true(n_ok > 50);
    assert_true(n_format > 50);
    free(copy);
    free(data);
}

/* ------------------------------------------------------ real shared files */

static const char *shared_dir(void)
{
    const char *s = getenv("VKVECTOR_SHARED");
    return s && *s ? s : "../shared";
}

static void gguf_open_reads_stories260k(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K-f32.gguf", shared_dir());
    if (access(path, R_OK) != 0) skip();

    vkv_gguf *g;
    if (vkv_gguf_open(path, &g) != VKV_OK) fail_msg("%s", vkv_last_error());
    vkv_gguf_str arch;
    assert_int_equal(vkv_gguf_get_str(g, "general.architecture", &arch), VKV_OK);
    assert_true(str_eq(arch, "llama"));
    const vkv_gguf_tensor *t = vkv_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 512);
    assert_int_equal(t->type, VKV_F32);
    assert_int_equal(t->nbytes, 64 * 512 * 4);
    walk_everything(g);
    vkv_gguf_close(g);
}

/* Copies every key and tensor of g into a writer, in file order; false when
 * a value has a type the writer API cannot express (the caller skips). */
static bool copy_to_writer(const vkv_gguf *g, vkv_gguf_writer *w)
{
    for (int64_t i = 0; i < vkv_gguf_n_kv(g); i++) {
        vkv_gguf_str k = vkv_gguf_key_name(g, i);
        char key[256];
        if (k.len >= sizeof key) return false;
        memcpy(key, k.data, k.len);
        key[k.len] = 0;
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f;
        bool b;
        vkv_gguf_str str;
        vkv_gguf_type et;
        uint64_t count;
        const void *data;
        switch (vkv_gguf_kv_type(g, i)) {
        case VKV_GGUF_UINT32:
            assert_int_equal(vkv_gguf_get_u32(g, key, &u32), VKV_OK);
            assert_int_equal(vkv_gguf_set_u32(w, key, u32), VKV_OK);
            break;
        case VKV_GGUF_INT32:
            assert_int_equal(vkv_gguf_get_i64(g, key, &i64), VKV_OK);
            assert_int_equal(vkv_gguf_set_i32(w, key, (int32_t)i64), VKV_OK);
            break;
        case VKV_GGUF_UINT64:
            assert_int_equal(vkv_gguf_get_u64(g, key, &u64), VKV_OK);
            assert_int_equal(vkv_gguf_set_u64(w, key, u64), VKV_OK);
            break;
        case VKV_GGUF_FLOAT32:
            assert_int_equal(vkv_gguf_get_f32(g, key, &f), VKV_OK);
            assert_int_equal(vkv_gguf_set_f32(w, key, f), VKV_OK);
            break;
        case VKV_GGUF_BOOL:
            assert_int_equal(vkv_gguf_get_bool(g, key, &b), VKV_OK);
            assert_int_equal(vkv_gguf_set_bool(w, key, b), VKV_OK);
            break;
        case VKV_GGUF_STRING: {
            assert_int_equal(vkv_gguf_get_str(g, key, &str), VKV_OK);
            char *c = strndup(str.data, str.len);
            bool ok = strlen(c) == str.len;
            if (ok) assert_int_equal(vkv_gguf_set_str(w, key, c), VKV_OK);
            free(c);
            if (!ok) return false;
            break;
        }
        case VKV_GGUF_ARRAY:
            assert_int_equal(vkv_gguf_get_arr(g, key, &et, &count, &data), VKV_OK);
            if (et == VKV_GGUF_ARRAY) return false;
            if (et != VKV_GGUF_STRING) {
                assert_int_equal(vkv_gguf_set_arr(w, key, et, data, count), VKV_OK);
                break;
            }
            char **strs = calloc(count ? count : 1, sizeof *strs);
            bool ok = true;
            for (uint64_t j = 0; j < count; j++) {
                assert_int_equal(vkv_gguf_arr_str(g, key, j, &str), VKV_OK);
                strs[j] = strndup(str.data, str.len);
                ok = ok && strlen(strs[j]) == str.len;
            }
            if (ok) assert_int_equal(vkv_gguf_set_arr_str(w, key, (const char *const *)strs, count), VKV_OK);
            for (uint64_t j = 0; j < count; j++) free(strs[j]);
            free(strs);
            if (!ok) return false;
            break;
        default:
            return false; /* u8/i8/u16/i16/i64/f64 scalars: no setter */
        }
    }
    for (int64_t i = 0; i < vkv_gguf_n_tensors(g); i++) {
        const vkv_gguf_tensor *t = vkv_gguf_tensor_at(g, i);
        if (!t->data) return false; /* a type this build does not know */
        assert_int_equal(vkv_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes), VKV_OK);
    }
    return true;
}

/* llama.cpp wrote these files: rewriting one with our writer must give the
 * same bytes, which pins our layout (order, padding, offsets) to theirs. */
static void gguf_writer_reproduces_shared_models_byte_for_byte(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", shared_dir());
    DIR *d = opendir(dir);
    if (!d) skip();
    char names[64][256];
    int n_names = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_names < 64) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= sizeof names[0] || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        memcpy(names[n_names++], e->d_name, len + 1);
    }
    closedir(d);

    int n_same = 0;
    for (int f = 0; f < n_names; f++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%.255s", dir, names[f]);
        vkv_gguf *g;
        if (vkv_gguf_open(path, &g) != VKV_OK) fail_msg("%s", vkv_last_error());
        vkv_gguf_writer *w = vkv_gguf_writer_new((uint32_t)vkv_gguf_alignment(g));
        assert_non_null(w);
        if (!copy_to_writer(g, w)) {
            print_message("note: %s uses types the writer cannot copy; not compared\n", path);
        } else {
            void *data;
            size_t size;
            assert_int_equal(vkv_gguf_writer_to_memory(w, &data, &size), VKV_OK);
            FILE *fp = fopen(path, "rb");
            assert_non_null(fp);
            uint8_t *orig = malloc(size + 1);
            size_t n = fread(orig, 1, size + 1, fp);
            fclose(fp);
            if (n != size || memcmp(orig, data, size) != 0) {
                size_t at = 0;
                while (at < size && at < n && orig[at] == ((uint8_t *)data)[at]) at++;
                fail_msg("%s: rewrite differs at byte %zu (sizes %zu vs %zu)", path, at, n, size);
            }
            free(orig);
            free(data);
            n_same++;
        }
        vkv_gguf_writer_free(w);
        vkv_gguf_close(g);
    }
    if (n_same == 0) skip();
}

/* Offset of the first U+FFFD (EF BF BD) in the file, or -1. A binary file
 * that went through a UTF-8 text decoder has each invalid byte replaced by
 * it, which shifts everything after: no reader can recover such a file. */
static long first_replacement_char(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    long at = -1, pos = 0;
    int c, state = 0; /* bytes of EF BF BD matched so far */
    while ((c = fgetc(f)) != EOF && at < 0) {
        state = c == 0xef ? 1 : (state == 1 && c == 0xbf) ? 2 : (state == 2 && c == 0xbd) ? 3 : 0;
        if (state == 3) at = pos - 2;
        pos++;
    }
    fclose(f);
    return at;
}

static void gguf_open_reads_every_vocab(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/vocab", shared_dir());
    DIR *d = opendir(dir);
    if (!d) skip();
    char names[64][256];
    int n_names = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_names < 64) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= sizeof names[0] || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        memcpy(names[n_names++], e->d_name, len + 1);
    }
    closedir(d);

    int n_read = 0;
    for (int f = 0; f < n_names; f++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%.255s", dir, names[f]);
        vkv_gguf *g;
        vkv_status s = vkv_gguf_open(path, &g);
        if (s != VKV_OK) {
            /* A damaged copy must still be rejected cleanly; it says nothing
             * about the reader, so it does not fail the test. */
            long bad = first_replacement_char(path);
            if (s != VKV_ERR_FORMAT || bad < 0 || !strstr(vkv_last_error(), "U+FFFD"))
                fail_msg("%s", vkv_last_error());
            print_message("note: %s is damaged (U+FFFD replacement bytes from offset %ld: it went"
                          " through a UTF-8 text decoder) and is rejected: %s\n", path, bad,
                          vkv_last_error());
            continue;
        }
        vkv_gguf_type et;
        uint64_t count = 0;
        assert_int_equal(vkv_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &count, NULL), VKV_OK);
        assert_int_equal(et, VKV_GGUF_STRING);
        assert_true(count > 0);
        /* Random access over the whole vocabulary (100k+ strings) stays cheap. */
        size_t total = 0;
        for (uint64_t i = count; i-- > 0;) {
            vkv_gguf_str str;
            assert_int_equal(vkv_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &str), VKV_OK);
            total += str.len;
        }
        assert_true(total > 0);
        walk_everything(g);
        vkv_gguf_close(g);
        n_read++;
    }
    if (n_read == 0) skip();
}

/* ---------------------------- hyper-parameters that the reader accepts but
 * the model cannot use (model.c): each a format error naming the key. */

/* A llama file vkv_hparams_from_gguf accepts: width 8, two heads of 4, feed-
 * forward 16, vocabulary 4, and n_blocks blocks of the nine tensors each needs
 * (their values are never read, so every tensor is 8 zeros). */
static vkv_gguf_writer *hp_writer(uint32_t n_blocks)
{
    static const char *const block_tensors[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down" };
    static const float zeros[8 * 4];
    const uint64_t ne_emb[] = { 8, 4 }, ne_vec[] = { 8 };
    vkv_gguf_writer *w = vkv_gguf_writer_new(0);
    assert_non_null(w);
    assert_int_equal(vkv_gguf_set_str(w, "general.architecture", "llama"), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.embedding_length", 8), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.block_count", n_blocks), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.feed_forward_length", 16), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.head_count", 2), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "llama.rope.freq_base", 10000.0f), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "token_embd.weight", VKV_F32, 2, ne_emb, zeros, sizeof zeros), VKV_OK);
    assert_int_equal(vkv_gguf_add_tensor(w, "output_norm.weight", VKV_F32, 1, ne_vec, zeros, 32), VKV_OK);
    for (uint32_t b = 0; b < n_blocks; b++)
        for (size_t i = 0; i < N_ELEMS(block_tensors); i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", b, block_tensors[i]);
            assert_int_equal(vkv_gguf_add_tensor(w, name, VKV_F32, 1, ne_vec, zeros, 32), VKV_OK);
        }
    return w;
}

/* vkv_hparams_from_gguf on the writer's file (then freed) gives `want`, and
 * on failure a message containing both needles (NULL: none). */
static void expect_hparams(vkv_gguf_writer *w, vkv_status want, const char *needle, const char *needle2)
{
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    vkv_hparams hp;
    vkv_clear_error();
    vkv_status s = vkv_hparams_from_gguf(g, &hp);
    const char *msg = vkv_last_error();
    if (s != want || (needle && !strstr(msg, needle)) || (needle2 && !strstr(msg, needle2)))
        fail_msg("expected %s with '%s' and '%s', got %s: %s", vkv_status_name(want), needle ? needle : "",
                 needle2 ? needle2 : "", vkv_status_name(s), msg);
    vkv_gguf_close(g);
    free(data);
}

static void hparams_accept_the_fixture(void **state)
{
    (void)state;
    /* the rejections below fail on the value they change, not on the rest */
    expect_hparams(hp_writer(1), VKV_OK, NULL, NULL);
    expect_hparams(hp_writer(3), VKV_OK, NULL, NULL);
}

static void hparams_reject_a_query_width_that_wraps_32_bits(void **state)
{
    (void)state;
    /* 2^31 + 1 heads of 2: 2^32 + 2 wraps to a query width of 2 in 32 bits */
    vkv_gguf_writer *w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.head_count", 2147483649u), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.head_count_kv", 2147483649u), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.key_length", 2), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.value_length", 2), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.attention.head_count' is 2147483649", NULL);
    /* each key within its own bound, the product 2^12 x 2^20 = 2^32 wraps to 0 */
    w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.head_count", 4096), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.key_length", 1u << 20), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.value_length", 1u << 20), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.attention.key_length'", "query width of 4294967296");
    w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.attention.key_length", 0x80000000u), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.attention.key_length' is 2147483648", NULL);
}

static void hparams_reject_widths_and_counts_out_of_range(void **state)
{
    (void)state;
    static const struct { const char *key; uint32_t v; const char *needle; } cases[] = {
        { "llama.embedding_length", 0x80000001u, "'llama.embedding_length' is 2147483649" },
        { "llama.embedding_length", 0, "'llama.embedding_length' is 0" },
        { "llama.feed_forward_length", UINT32_MAX, "'llama.feed_forward_length' is 4294967295" },
        { "llama.attention.head_count_kv", 1u << 20, "'llama.attention.head_count_kv' is 1048576" },
        { "llama.context_length", UINT32_MAX, "'llama.context_length' is 4294967295" },
        { "llama.vocab_size", UINT32_MAX, "'llama.vocab_size' is 4294967295" },
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        vkv_gguf_writer *w = hp_writer(1);
        assert_int_equal(vkv_gguf_set_u32(w, cases[i].key, cases[i].v), VKV_OK);
        expect_hparams(w, VKV_ERR_FORMAT, cases[i].needle, NULL);
    }
}

static void hparams_reject_a_block_count_beyond_the_tensors(void **state)
{
    (void)state;
    /* 10^9 blocks in a file of 11 tensors: refused before anything is
     * allocated per block */
    vkv_gguf_writer *w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.block_count", 1000000000u), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.block_count' is 1000000000", "holds 11 tensors");
    /* enough tensors for three blocks, but the third block is not there */
    w = hp_writer(2);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.block_count", 3), VKV_OK);
    const uint64_t ne[] = { 1 };
    static const float zero;
    for (int i = 0; i < 9; i++) {
        char name[32];
        snprintf(name, sizeof name, "extra.%d", i);
        assert_int_equal(vkv_gguf_add_tensor(w, name, VKV_F32, 1, ne, &zero, 4), VKV_OK);
    }
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.block_count' is 3", "no tensor 'blk.2.attn_norm.weight'");
}

static void hparams_reject_non_finite_or_non_positive_floats(void **state)
{
    (void)state;
    static const char *const keys[] = { "llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base",
                                        "llama.rope.scaling.factor" };
    const float bad[] = { INFINITY, -INFINITY, NAN, 0.0f, -1.0f };
    const char *const shown[] = { "is inf", "is -inf", "nan", "is 0", "is -1" };
    for (size_t k = 0; k < N_ELEMS(keys); k++)
        for (size_t v = 0; v < N_ELEMS(bad); v++) {
            if (bad[v] == 0.0f && strstr(keys[k], "scaling")) continue; /* 0: no scaling (below) */
            vkv_gguf_writer *w = hp_writer(1);
            assert_int_equal(vkv_gguf_set_f32(w, keys[k], bad[v]), VKV_OK);
            char needle[96];
            snprintf(needle, sizeof needle, "'%s'", keys[k]);
            expect_hparams(w, VKV_ERR_FORMAT, needle, shown[v]);
        }
    /* Llama-3 scaling: its factors divide, and the blend divides by their difference */
    static const char *const l3_keys[] = { "llama.rope.scaling.low_freq_factor", "llama.rope.scaling.high_freq_factor" };
    for (size_t k = 0; k < N_ELEMS(l3_keys); k++) {
        vkv_gguf_writer *w = hp_writer(1);
        assert_int_equal(vkv_gguf_set_str(w, "llama.rope.scaling.type", "llama3"), VKV_OK);
        assert_int_equal(vkv_gguf_set_f32(w, l3_keys[k], NAN), VKV_OK);
        char needle[96];
        snprintf(needle, sizeof needle, "'%s'", l3_keys[k]);
        expect_hparams(w, VKV_ERR_FORMAT, needle, "nan");
    }
    /* A scaling factor of 0 is llama.cpp's "no scaling", not an error. */
    vkv_gguf_writer *w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_str(w, "llama.rope.scaling.type", "linear"), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "llama.rope.scaling.factor", 0.0f), VKV_OK);
    void *data;
    size_t size;
    vkv_gguf *g = open_written(w, &data, &size);
    vkv_hparams hp;
    assert_int_equal(vkv_hparams_from_gguf(g, &hp), VKV_OK);
    assert_float_equal(hp.rope_freq_scale, 1.0f, 0);
    vkv_gguf_close(g);
    free(data);
    w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_str(w, "llama.rope.scaling.type", "llama3"), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "llama.rope.scaling.low_freq_factor", 4.0f), VKV_OK);
    assert_int_equal(vkv_gguf_set_f32(w, "llama.rope.scaling.high_freq_factor", 4.0f), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.rope.scaling.high_freq_factor' (4) must be above", NULL);
    w = hp_writer(1);
    assert_int_equal(vkv_gguf_set_str(w, "llama.rope.scaling.type", "llama3"), VKV_OK);
    assert_int_equal(vkv_gguf_set_u32(w, "llama.rope.scaling.original_context_length", 0), VKV_OK);
    expect_hparams(w, VKV_ERR_FORMAT, "'llama.rope.scaling.original_context_length' is 0", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gguf_roundtrip_preserves_every_value_type),
        cmocka_unit_test(gguf_roundtrip_preserves_tensors),
        cmocka_unit_test(gguf_writer_records_non_default_alignment),
        cmocka_unit_test(gguf_writer_to_file_roundtrips_through_mmap),
        cmocka_unit_test(gguf_writer_replaces_a_key_set_twice),
        cmocka_unit_test(gguf_writer_rejects_bad_arguments),
        cmocka_unit_test(gguf_open_keeps_tensor_of_unknown_type),
        cmocka_unit_test(gguf_getters_coerce_integers_with_range_checks),
        cmocka_unit_test(gguf_getters_name_the_missing_key),
        cmocka_unit_test(gguf_arr_str_rejects_out_of_range_index),
        cmocka_unit_test(gguf_open_accepts_v2_and_a_file_without_tensors),
        cmocka_unit_test(gguf_open_rejects_bad_magic),
        cmocka_unit_test(gguf_open_rejects_version_1),
        cmocka_unit_test(gguf_open_rejects_version_99),
        cmocka_unit_test(gguf_open_rejects_absurd_n_tensors),
        cmocka_unit_test(gguf_open_rejects_absurd_n_kv),
        cmocka_unit_test(gguf_open_rejects_absurd_string_length),
        cmocka_unit_test(gguf_open_rejects_absurd_array_length),
        cmocka_unit_test(gguf_open_rejects_invalid_value_type),
        cmocka_unit_test(gguf_open_accepts_nested_arrays),
        cmocka_unit_test(gguf_open_rejects_arrays_nested_too_deep),
        cmocka_unit_test(gguf_open_rejects_duplicate_key),
        cmocka_unit_test(gguf_open_rejects_key_with_nul_byte),
        cmocka_unit_test(gguf_open_rejects_bad_alignment),
        cmocka_unit_test(gguf_open_honours_alignment),
        cmocka_unit_test(gguf_open_rejects_overlapping_tensors),
        cmocka_unit_test(gguf_open_rejects_tensor_offset_past_end),
        cmocka_unit_test(gguf_open_rejects_misaligned_tensor_offset),
        cmocka_unit_test(gguf_open_rejects_zero_dims),
        cmocka_unit_test(gguf_open_rejects_five_dims),
        cmocka_unit_test(gguf_open_rejects_zero_or_overflowing_ne),
        cmocka_unit_test(gguf_open_rejects_ne0_not_multiple_of_block),
        cmocka_unit_test(gguf_open_rejects_duplicate_tensor_name),
        cmocka_unit_test(gguf_open_hints_at_utf8_text_damage),
        cmocka_unit_test(gguf_open_rejects_missing_file),
        cmocka_unit_test(gguf_open_rejects_truncated_file),
        cmocka_unit_test(gguf_open_survives_random_corruption),
        cmocka_unit_test(gguf_open_reads_stories260k),
        cmocka_unit_test(gguf_open_reads_every_vocab),
        cmocka_unit_test(gguf_writer_reproduces_shared_models_byte_for_byte),
        cmocka_unit_test(hparams_accept_the_fixture),
        cmocka_unit_test(hparams_reject_a_query_width_that_wraps_32_bits),
        cmocka_unit_test(hparams_reject_widths_and_counts_out_of_range),
        cmocka_unit_test(hparams_reject_a_block_count_beyond_the_tensors),
        cmocka_unit_test(hparams_reject_non_finite_or_non_positive_floats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
