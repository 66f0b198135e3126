/* A scratch folder for a cmocka test group that writes files: the group's
 * setup makes /tmp/vkv_<TEST_TMPDIR_NAME>_XXXXXX, its teardown removes it,
 * and tmp_path names a file in it (four results stay valid at once, so a
 * call can take several paths). Define TEST_TMPDIR_NAME before including. */
#ifndef VKV_TEST_TMPDIR_H
#define VKV_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vkv_%s_XXXXXX", TEST_TMPDIR_NAME);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

#endif
