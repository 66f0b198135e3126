/* kvpress's evaluation registry (press/registry.h): every name of
 * evaluation/evaluate_registry.py at kvpress commit 91773cb, the composition
 * vkvector builds for it (the press's structure: its wrapper, inner scorer
 * and fixed parameters), or its refusal by name with the reason; and the
 * command line taking the names under --protocol kvpress only. */
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
#include "press/registry.h"
#include "session/session.h"

/* What each registry name must build: vkvector's press, and what that press
 * must be made of (checked against its ops below). */
typedef enum { BARE, ADAKV, CRITICAL, CRITICAL_ADAKV, CHUNK_OVER_SNAPKV, FULL_CACHE, REFUSED } shape;
static const struct {
    const char *name, *press;
    shape shape;
    bool decoding, expected_inner; /* DecodingPress around it; ExpectedAttention inside */
} want[] = {
    {"adakv_snapkv", "adakv-snapkv", ADAKV, false, false},
    {"block_keydiff", NULL, REFUSED, false, false},
    {"chunkkv", "chunkkv", CHUNK_OVER_SNAPKV, false, false},
    {"critical_adakv_expected_attention", "critical-adakv-expected", CRITICAL_ADAKV, false, true},
    {"critical_adakv_snapkv", "critical-adakv-snapkv", CRITICAL_ADAKV, false, false},
    {"critical_expected_attention", "critical-expected", CRITICAL, false, true},
    {"critical_snapkv", "critical-snapkv", CRITICAL, false, false},
    {"cur", NULL, REFUSED, false, false},
    {"duo_attention", NULL, REFUSED, false, false},
    {"duo_attention_on_the_fly", NULL, REFUSED, false, false},
    {"expected_attention", "adakv-expected", ADAKV, false, true},
    {"fastkvzip", NULL, REFUSED, false, false},
    {"finch", NULL, REFUSED, false, false},
    {"keydiff", "keydiff", BARE, false, false},
    {"kvzip", "kvzip", BARE, false, false},
    {"kvzip_plus", NULL, REFUSED, false, false},
    {"kvzap_linear", NULL, REFUSED, false, false},
    {"kvzap_mlp", NULL, REFUSED, false, false},
    {"kvzap_mlp_head", NULL, REFUSED, false, false},
    {"kvzap_mlp_layer", NULL, REFUSED, false, false},
    {"lagkv", "lagkv", BARE, false, false},
    {"knorm", "knorm", BARE, false, false},
    {"observed_attention", "observed", BARE, false, false},
    {"pyramidkv", "pyramidkv", BARE, false, false},
    {"qfilter", NULL, REFUSED, false, false},
    {"random", "random", BARE, false, false},
    {"snap_think", NULL, REFUSED, false, false},
    {"snapkv", "snapkv", BARE, false, false},
    {"streaming_llm", "streamingllm", BARE, false, false},
    {"think", NULL, REFUSED, false, false},
    {"tova", "tova", BARE, false, false},
    {"compactor", NULL, REFUSED, false, false},
    {"adakv_compactor", NULL, REFUSED, false, false},
    {"no_press", NULL, FULL_CACHE, false, false},
    {"decoding_knorm", "knorm", BARE, true, false},
    {"decoding_streaming_llm", "streamingllm", BARE, true, false},
    {"decoding_tova", "tova", BARE, true, false},
    {"decoding_qfilter", NULL, REFUSED, true, false},
    {"decoding_adakv_expected_attention_e2", NULL, REFUSED, true, false},
    {"decoding_adakv_snapkv", NULL, REFUSED, true, false},
    {"decoding_keydiff", "keydiff", BARE, true, false},
};
enum { N_WANT = sizeof want / sizeof want[0] };

/* The table holds exactly the registry's 41 names, in its order. */
static void the_table_is_kvpress_registry(void **state)
{
    (void)state;
    size_t n;
    const vkv_press_registry_entry *r = vkv_press_registry(&n);
    assert_int_equal(n, N_WANT);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(r[i].kvpress_name, want[i].name);
        assert_ptr_equal(vkv_press_registry_find(want[i].name), &r[i]);
        assert_true(r[i].composition && *r[i].composition);
        assert_int_equal(r[i].decoding, want[i].decoding);
        if (want[i].shape == REFUSED) {
            assert_non_null(r[i].refused);
            assert_null(r[i].press);
        } else {
            assert_null(r[i].refused);
            if (want[i].press) assert_string_equal(r[i].press, want[i].press);
            else assert_null(r[i].press);
        }
    }
    assert_null(vkv_press_registry_find("adakv-snapkv")); /* vkvector's names are not the registry's */
}

/* Each buildable name's press has the composition's structure: AdaKV's
 * layer-wide budget, CriticalKV's W_o, ChunkKV's chunk counts over SnapKV's
 * window, ExpectedAttention's query capture inside the wrappers. */
static void each_name_builds_its_composition(void **state)
{
    (void)state;
    const vkv_press_ops *snapkv = vkv_press_find("snapkv");
    assert_non_null(snapkv);
    for (size_t i = 0; i < N_WANT; i++) {
        if (want[i].shape == REFUSED || want[i].shape == FULL_CACHE) continue;
        const vkv_press_ops *ops = vkv_press_find(want[i].press);
        if (!ops) fail_msg("%s: no press '%s'", want[i].name, want[i].press);
        const bool adakv = want[i].shape == ADAKV || want[i].shape == CRITICAL_ADAKV;
        const bool critical = want[i].shape == CRITICAL || want[i].shape == CRITICAL_ADAKV;
        if (ops->layer_selection != adakv || ops->needs_wo != critical)
            fail_msg("%s: '%s' is not the registry's composition", want[i].name, ops->name);
        if (want[i].expected_inner && (!ops->capture_gpu || !ops->state_bytes || ops->window ||
                                       ops->decode_window))
            fail_msg("%s: '%s' does not capture ExpectedAttention's queries", want[i].name, ops->name);
        if (!want[i].expected_inner && want[i].shape != BARE && ops->window != snapkv->window)
            fail_msg("%s: '%s' lacks SnapKV's window", want[i].name, ops->name);
        if (want[i].shape == CHUNK_OVER_SNAPKV && (!ops->n_kept || !ops->needs_position_order))
            fail_msg("%s: '%s' is not ChunkKV", want[i].name, ops->name);
    }
    /* the fixed parameters: adakv-expected's epsilon 1e-2 and the critical ones' missing value norms are
     * the presses' own (tests/unit/test_adakv_counts.c compares their scores with the inner's) */
}

/* cli_press_opts_check with --press name (and --compression 0.5 when pc);
 * -1 when refused, else 1 with the press and rule it resolved. */
static int check(bool kvpress, const char *name, bool pc, const char **press, int *decoding)
{
    cli_press_opts po;
    cli_press_opts_init(&po);
    po.kvpress_protocol = kvpress;
    po.press = name;
    po.compression_arg = pc ? "0.5" : NULL;
    const struct vkv_press_ops *ops;
    if (!cli_press_opts_check("test", &po, &ops)) return -1;
    *press = ops ? ops->name : NULL;
    *decoding = po.decoding;
    return 1;
}

static void the_command_line_takes_the_names_under_kvpress_protocol(void **state)
{
    (void)state;
    const char *press;
    int decoding;
    for (size_t i = 0; i < N_WANT; i++) {
        const bool builds = want[i].shape != REFUSED;
        const int rc = check(true, want[i].name, builds && !want[i].decoding && want[i].shape != FULL_CACHE, &press,
                             &decoding);
        if (rc != (builds ? 1 : -1)) fail_msg("%s: %s", want[i].name, builds ? "refused" : "accepted");
        if (!builds) continue; /* the message names it and the reason (printed above) */
        if (want[i].press ? !press || strcmp(press, want[i].press) : press != NULL)
            fail_msg("%s built '%s'", want[i].name, press ? press : "(full cache)");
        assert_int_equal(decoding, want[i].decoding ? VKV_DECODING_KVPRESS : VKV_DECODING_BUDGET);
    }
    /* a DecodingPress takes no compression ratio, nor does the full cache */
    assert_int_equal(check(true, "decoding_keydiff", true, &press, &decoding), -1);
    assert_int_equal(check(true, "no_press", true, &press, &decoding), -1);
    /* outside --protocol kvpress: the bare names stay, the registry's own are refused */
    assert_int_equal(check(false, "keydiff", true, &press, &decoding), 1);
    assert_string_equal(press, "keydiff");
    assert_int_equal(check(false, "expected_attention", true, &press, &decoding), -1);
    assert_int_equal(check(false, "adakv-expected", true, &press, &decoding), 1);
    assert_int_equal(check(true, "adakv-expected", true, &press, &decoding), 1); /* vkvector's names too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_table_is_kvpress_registry),
        cmocka_unit_test(each_name_builds_its_composition),
        cmocka_unit_test(the_command_line_takes_the_names_under_kvpress_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
