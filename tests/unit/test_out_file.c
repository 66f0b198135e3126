/* The output path of src/core/out_file.c: atomic files, in-place devices,
 * the check before the work, checked appends, printable strings. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/out_file.h"

static char dir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/vkv_out_test.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    return rmdir(dir);
}

/* Entries of the test directory, "." and ".." left out. */
static int n_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void content_appears_only_at_commit(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/out.json", dir);
    FILE *old = fopen(p, "w");
    fputs("old", old);
    fclose(old);
    vkv_out o;
    assert_int_equal(vkv_out_open(&o, p), VKV_OK);
    fputs("new content", o.f);
    fflush(o.f);
    assert_string_equal(slurp(p), "old");
    assert_int_equal(n_entries(), 2); /* the target and the temporary file beside it */
    assert_int_equal(vkv_out_commit(&o), VKV_OK);
    assert_string_equal(slurp(p), "new content");
    assert_int_equal(n_entries(), 1);
    assert_null(o.f);
}

static void dropped_file_leaves_nothing(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/dropped.html", dir);
    vkv_out o;
    assert_int_equal(vkv_out_open(&o, p), VKV_OK);
    fputs("half a file", o.f);
    vkv_out_drop(&o);
    assert_int_equal(n_entries(), 0);
    vkv_out_drop(&o); /* a closed one: nothing */
}

static void failed_write_names_the_file_and_leaves_nothing(void **state)
{
    (void)state;
    /* /dev/full is written in place: every write fails with ENOSPC */
    vkv_out o;
    assert_int_equal(vkv_out_open(&o, "/dev/full"), VKV_OK);
    for (int i = 0; i < 10000; i++) fputs("0123456789", o.f);
    assert_int_equal(vkv_out_commit(&o), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "/dev/full"));
    assert_non_null(strstr(vkv_last_error(), "No space left on device"));
    /* a short write: only the flush at the commit fails */
    assert_int_equal(vkv_out_write_file("/dev/full", "x", 1), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "No space left on device"));
    /* a target written in place is never removed on failure, nor dropped:
     * as root, removing /dev/full would delete the device */
    assert_int_equal(vkv_out_open(&o, "/dev/full"), VKV_OK);
    vkv_out_drop(&o);
    struct stat sb;
    assert_int_equal(stat("/dev/full", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    /* a rename that fails (the target became a directory): no temporary file stays */
    char p[256];
    snprintf(p, sizeof p, "%s/target", dir);
    assert_int_equal(vkv_out_open(&o, p), VKV_OK);
    fputs("data", o.f);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(vkv_out_commit(&o), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), p));
    assert_int_equal(n_entries(), 1);
    rmdir(p);
}

static void check_refuses_before_the_work(void **state)
{
    (void)state;
    char p[256];
    assert_int_equal(vkv_out_check("--out", dir), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "--out"));
    assert_non_null(strstr(vkv_last_error(), "is a directory"));
    snprintf(p, sizeof p, "%s/missing/x.json", dir);
    assert_int_equal(vkv_out_check("--html", p), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "--html"));
    assert_non_null(strstr(vkv_last_error(), p));
    /* /proc refuses new files, root or not */
    assert_int_equal(vkv_out_check("-o", "/proc/vkv_out_test"), VKV_ERR_IO);
    assert_int_equal(vkv_out_check(NULL, ""), VKV_ERR_ARG);
    snprintf(p, sizeof p, "%s/fine.json", dir);
    assert_int_equal(vkv_out_check("--out", p), VKV_OK);
    assert_int_equal(n_entries(), 0); /* the check leaves nothing */
    assert_int_equal(vkv_out_check("--out", "/dev/null"), VKV_OK);
}

static void appends_are_checked(void **state)
{
    (void)state;
    char p[256];
    snprintf(p, sizeof p, "%s/results.jsonl", dir);
    FILE *f;
    assert_int_equal(vkv_append_open(p, &f), VKV_OK);
    assert_int_equal(vkv_append(f, p, "{}\n", 3), VKV_OK);
    fclose(f);
    assert_int_equal(vkv_append_open(p, &f), VKV_OK);
    assert_int_equal(vkv_append(f, p, "[]\n", 3), VKV_OK);
    fclose(f);
    assert_string_equal(slurp(p), "{}\n[]\n");
    unlink(p);
    assert_int_equal(vkv_append_open("/dev/full", &f), VKV_OK);
    assert_int_equal(vkv_append(f, "/dev/full", "{}\n", 3), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "/dev/full"));
    fclose(f);
    assert_int_equal(vkv_append_open(dir, &f), VKV_ERR_IO);
}

static void printable_escapes_control_characters(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(vkv_printable("a\x1b[31mred\n\x7f", buf, sizeof buf), "a\\x1b[31mred\\x0a\\x7f");
    assert_string_equal(vkv_printable("caf\xc3\xa9", buf, sizeof buf), "caf\xc3\xa9");
    assert_string_equal(vkv_printable("\x1b\x1b", buf, 6), "\\x1b"); /* truncated whole */
    assert_string_equal(vkv_printable(NULL, buf, sizeof buf), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(content_appears_only_at_commit, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(dropped_file_leaves_nothing, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(failed_write_names_the_file_and_leaves_nothing, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(check_refuses_before_the_work, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(appends_are_checked, make_dir, remove_dir),
        cmocka_unit_test(printable_escapes_control_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
