/* Each press's query mode: the paper's default per scorer (SnapKV and
 * PyramidKV query-aware, KeyDiff and KVzip query-agnostic; press/press.h),
 * kvpress's evaluation's under --protocol kvpress,
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

/* Every scorer, the mode it runs in by default, and the mode kvpress's
 * evaluation gives it (--protocol kvpress): evaluate.py's query_aware is
 * false unless given, and kvpress's leaderboard script gives --query_aware to
 * snapkv, adakv_snapkv, chunkkv (and finch, not built) alone. TOVA scores with
 * the last query, which is the question's only when the question is in the
 * prefill. */
static const struct {
    const char *name;
    bool query_aware, kvpress_query_aware;
} expected_modes[] = {
    {"knorm", false, false},  {"keydiff", false, false},  {"streamingllm", false, false},
    {"snapkv", true, true},   {"pyramidkv", true, false}, {"tova", true, false},
    {"observed", false, false}, {"expected", false, false}, {"kvzip", false, false},
    {"chunkkv", true, true},  {"chunkkv-knorm", false, false}, {"chunkkv-keydiff", false, false},
    {"chunkkv-tova", true, false},
    {"lagkv", false, false},  {"random", false, false},
    {"adakv-snapkv", true, true}, {"adakv-keydiff", false, false}, /* the inner scorer's mode */
    {"adakv-expected", false, false},
    {"critical-snapkv", true, false}, {"critical-keydiff", false, false}, {"critical-expected", false, false},
    {"critical-adakv-snapkv", true, false}, {"critical-adakv-keydiff", false, false},
    {"critical-adakv-expected", false, false},
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
                for (int kvpress = 0; kvpress < 2; kvpress++) {
                    assert_int_equal(vkv_press_query_aware(*p, VKV_QUERY_DEFAULT, kvpress),
                                     kvpress ? expected_modes[i].kvpress_query_aware : expected_modes[i].query_aware);
                    assert_true(vkv_press_query_aware(*p, VKV_QUERY_AWARE, kvpress));
                    assert_false(vkv_press_query_aware(*p, VKV_QUERY_AGNOSTIC, kvpress));
                }
            }
        if (!found) fail_msg("press '%s' has no expected mode in this test", (*p)->name);
    }
    assert_int_equal(n, sizeof expected_modes / sizeof expected_modes[0]);
}

/* The mode cli_press_opts_check resolves; -1 when it refuses the options. */
static int resolved_mode_under(bool kvpress, const char *press, bool aware_flag, bool agnostic_flag)
{
    cli_press_opts po;
    cli_press_opts_init(&po);
    po.kvpress_protocol = kvpress;
    po.press = press;
    po.compression_ratio = press ? 0.5 : -1;
    po.aware_flag = aware_flag;
    po.agnostic_flag = agnostic_flag;
    const struct vkv_press_ops *ops;
    if (!cli_press_opts_check("test", &po, &ops)) return -1;
    return po.query_aware;
}

static int resolved_mode(const char *press, bool aware_flag, bool agnostic_flag)
{
    return resolved_mode_under(false, press, aware_flag, agnostic_flag);
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

/* Under --protocol kvpress the defaults are kvpress's evaluation's, and the
 * flags still override them. */
static void kvpress_protocol_takes_kvpress_modes(void **state)
{
    (void)state;
    assert_int_equal(resolved_mode_under(true, "snapkv", false, false), 1);
    assert_int_equal(resolved_mode_under(true, "chunkkv", false, false), 1);
    assert_int_equal(resolved_mode_under(true, "adakv-snapkv", false, false), 1);
    assert_int_equal(resolved_mode_under(true, "pyramidkv", false, false), 0);
    assert_int_equal(resolved_mode_under(true, "critical-snapkv", false, false), 0);
    assert_int_equal(resolved_mode_under(true, "chunkkv-tova", false, false), 0);
    assert_int_equal(resolved_mode_under(true, "pyramidkv", true, false), 1);
    assert_int_equal(resolved_mode_under(true, "snapkv", false, true), 0);
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
        cmocka_unit_test(kvpress_protocol_takes_kvpress_modes),
        cmocka_unit_test(conflicting_or_orphan_flags_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
