/* Each press's query mode: the paper's default per scorer (SnapKV and
 * PyramidKV query-aware, KeyDiff and KVzip query-agnostic; press/press.h),
 * and the command line's --query-aware / --query-agnostic overrides as
 * cli_press_opts_check resolves them (src/cli/press_options.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cli/options.h"
#include "press/press.h"

/* Every scorer and the mode it runs in by default. TOVA scores with the last
 * query, which is the question's only when the question is in the prefill. */
static const struct {
    const char *name;
    bool query_aware;
} expected_modes[] = {
    {"knorm", false},  {"keydiff", false},  {"streamingllm", false}, {"snapkv", true}, {"pyramidkv", true},
    {"tova", true},    {"observed", false}, {"expected", false},     {"kvzip", false},
    {"chunkkv", true}, {"chunkkv-knorm", false}, {"chunkkv-keydiff", false}, {"chunkkv-tova", true},
    {"lagkv", false},  {"random", false},
    {"adakv-snapkv", true}, {"adakv-keydiff", false}, /* the inner scorer's mode */
    {"critical-snapkv", true}, {"critical-keydiff", false},
    {"critical-adakv-snapkv", true}, {"critical-adakv-keydiff", false},
};

static void every_press_has_its_papers_mode(void **state)
{
    (void)state;
    size_t n = 0;
    for (const vkv_press_ops *const *p = vkv_press_all(); *p; p++, n++) {
        bool found = false;
        for (size_t i = 0; i < sizeof expected_modes / sizeof expected_modes[0]; i++)
            if (!strcmp(expected_modes[i].name, (*p)->name)) {
                found = true;
                assert_int_equal(vkv_press_query_aware(*p, VKV_QUERY_DEFAULT), expected_modes[i].query_aware);
                assert_true(vkv_press_query_aware(*p, VKV_QUERY_AWARE));
                assert_false(vkv_press_query_aware(*p, VKV_QUERY_AGNOSTIC));
            }
        if (!found) fail_msg("press '%s' has no expected mode in this test", (*p)->name);
    }
    assert_int_equal(n, sizeof expected_modes / sizeof expected_modes[0]);
}

/* The mode cli_press_opts_check resolves; -1 when it refuses the options. */
static int resolved_mode(const char *press, bool aware_flag, bool agnostic_flag)
{
    cli_press_opts po;
    cli_press_opts_init(&po);
    po.press = press;
    po.compression_ratio = press ? 0.5 : -1;
    po.aware_flag = aware_flag;
    po.agnostic_flag = agnostic_flag;
    const struct vkv_press_ops *ops;
    if (!cli_press_opts_check("test", &po, &ops)) return -1;
    return po.query_aware;
}

static void command_line_overrides_the_default(void **state)
{
    (void)state;
    assert_int_equal(resolved_mode("snapkv", false, false), 1);
    assert_int_equal(resolved_mode("pyramidkv", false, false), 1);
    assert_int_equal(resolved_mode("keydiff", false, false), 0);
    assert_int_equal(resolved_mode("kvzip", false, false), 0);
    assert_int_equal(resolved_mode("snapkv", false, true), 0);
    assert_int_equal(resolved_mode("kvzip", true, false), 1);
    assert_int_equal(resolved_mode(NULL, false, false), 0);
}

static void conflicting_or_orphan_flags_are_refused(void **state)
{
    (void)state;
    assert_int_equal(resolved_mode("snapkv", true, true), -1);
    assert_int_equal(resolved_mode(NULL, true, false), -1);
    assert_int_equal(resolved_mode(NULL, false, true), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_press_has_its_papers_mode),
        cmocka_unit_test(command_line_overrides_the_default),
        cmocka_unit_test(conflicting_or_orphan_flags_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
