/* The .vkcal file (calib/calib_file.c, format in calib/calib.h): version 2
 * carries a checksum of every byte, so a flipped byte in its metadata or its
 * maps is refused naming the file; a version 1 file (no checksum) is still
 * read; a value that must be finite is refused when it is not. No device. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "calib/calib_internal.h"

/* A 2-layer, 2-KV-head calibration of 4-wide heads with joint maps. */
static vkv_calib *small_calib(uint32_t version)
{
    vkv_calib_identity id = {.arch = "llama", .n_layer = 2, .n_head_kv = 2, .head_dim = 4, .head_dim_v = 4,
                             .n_embd = 16, .kv_hash = 0x1234};
    vkv_calib *c = vkv_calib_alloc(&id);
    assert_non_null(c);
    c->version = version;
    c->ridge = 0.01;
    c->heldout_frac = 0.2;
    c->corpus.n_tokens = 100;
    c->corpus.n_tokens_heldout = 20;
    for (size_t i = 0; i < 2 * 2 * 4 * 4; i++) c->w[i] = (float)i / 7.0f - 1.0f;
    for (size_t i = 0; i < 4; i++) c->r2[i] = c->r2_train[i] = c->r2_mp[i] = c->rel_err[i] = 0.5 + 0.1 * (double)i;
    c->w_joint = malloc(2 * 8 * 8 * sizeof *c->w_joint);
    assert_non_null(c->w_joint);
    for (size_t i = 0; i < 2 * 8 * 8; i++) c->w_joint[i] = (float)i / 100.0f;
    for (uint32_t l = 0; l < 2; l++) c->r2_joint[l] = c->ridge_joint[l] = 0.25;
    return c;
}

static char path[] = "/tmp/vkv_test_calib_file_XXXXXX";

static unsigned char *slurp(size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *d = malloc(*n);
    assert_non_null(d);
    assert_int_equal(fread(d, 1, *n, f), *n);
    fclose(f);
    return d;
}

static void spill(const unsigned char *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    fclose(f);
}

/* Reads path back: the status, the message in why. */
static vkv_status read_back(char *why, size_t size)
{
    vkv_calib *c = NULL;
    vkv_status st = vkv_calib_read(path, &c);
    snprintf(why, size, "%s", st ? vkv_last_error() : "");
    vkv_calib_free(c);
    return st;
}

static size_t find(const unsigned char *d, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(d + i, s, k)) return i;
    fail_msg("'%s' not in the file", s);
    return 0;
}

static void written_file_reads_back(void **state)
{
    (void)state;
    vkv_calib *c = small_calib(VKV_CALIB_VERSION);
    assert_int_equal(vkv_calib_write(c, path, false), VKV_OK);
    vkv_calib *r = NULL;
    assert_int_equal(vkv_calib_read(path, &r), VKV_OK);
    assert_int_equal(r->version, VKV_CALIB_VERSION);
    assert_memory_equal(r->w, c->w, 2 * 2 * 4 * 4 * sizeof *c->w);
    assert_non_null(r->w_joint);
    assert_true(fabs(r->r2_joint[1] - 0.25) < 1e-6);
    vkv_calib_free(r);
    vkv_calib_free(c);
}

static void flipped_byte_is_refused_naming_the_file(void **state)
{
    (void)state;
    vkv_calib *c = small_calib(VKV_CALIB_VERSION);
    assert_int_equal(vkv_calib_write(c, path, false), VKV_OK);
    vkv_calib_free(c);
    size_t n;
    unsigned char *good = slurp(&n);
    /* a byte of an optional key's name, of a value, of a map, of the header */
    const size_t at[] = {find(good, n, "blk.1.r2_joint") + 3, find(good, n, "blk.1.r2_joint") + 14 + 4 + 1, n - 3, 9};
    char why[512];
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        unsigned char *bad = malloc(n);
        assert_non_null(bad);
        memcpy(bad, good, n);
        bad[at[k]] ^= 0x10;
        spill(bad, n);
        free(bad);
        assert_int_not_equal(read_back(why, sizeof why), VKV_OK);
        assert_non_null(strstr(why, path));
    }
    spill(good, n);
    assert_int_equal(read_back(why, sizeof why), VKV_OK);
    free(good);
}

static void version_1_file_without_checksum_is_read(void **state)
{
    (void)state;
    vkv_calib *c = small_calib(1);
    assert_int_equal(vkv_calib_write(c, path, true), VKV_OK);
    vkv_calib_free(c);
    size_t n;
    unsigned char *d = slurp(&n);
    char why[512];
    for (size_t i = 0; i + 8 <= n; i++) assert_false(!memcmp(d + i, "checksum", 8));
    assert_int_equal(read_back(why, sizeof why), VKV_OK);
    free(d);
}

static void non_finite_required_value_is_refused(void **state)
{
    (void)state;
    char why[512];
    /* version 1: no checksum to catch it, the value check does */
    vkv_calib *c = small_calib(1);
    c->r2_joint[1] = NAN;
    assert_int_equal(vkv_calib_write(c, path, false), VKV_OK);
    assert_int_equal(read_back(why, sizeof why), VKV_ERR_FORMAT);
    assert_non_null(strstr(why, "blk.1.r2_joint is nan"));
    /* without held-out tokens the joint R^2 is not measured: NaN is fine */
    c->corpus.n_tokens_heldout = 0;
    assert_int_equal(vkv_calib_write(c, path, false), VKV_OK);
    assert_int_equal(read_back(why, sizeof why), VKV_OK);
    /* an infinity never is */
    c->rel_err[3] = INFINITY;
    assert_int_equal(vkv_calib_write(c, path, false), VKV_OK);
    assert_int_equal(read_back(why, sizeof why), VKV_ERR_FORMAT);
    assert_non_null(strstr(why, "blk.1.rel_err is inf"));
    vkv_calib_free(c);
}

static int setup(void **state)
{
    (void)state;
    int fd = mkstemp(path);
    return fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    remove(path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(written_file_reads_back),
        cmocka_unit_test(flipped_byte_is_refused_naming_the_file),
        cmocka_unit_test(version_1_file_without_checksum_is_read),
        cmocka_unit_test(non_finite_required_value_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
