/* The press and VECTOR options' cross-option rules (cli/options.h), apart
 * from the parser so that the parser links without the GPU library. */
#include "cli/cli.h"
#include "cli/options.h"
#include "kv/kv_counts.h"
#include "press/press.h"

int cli_pool_scope(int vector_pool) { return vector_pool < 0 ? VKV_POOL_DEFAULT : VKV_POOL_ROW + vector_pool; }

int cli_query_mode(bool aware_flag, bool agnostic_flag)
{
    return aware_flag ? VKV_QUERY_AWARE : agnostic_flag ? VKV_QUERY_AGNOSTIC : VKV_QUERY_DEFAULT;
}

bool cli_press_opts_check(const char *cmd, cli_press_opts *po, const vkv_press_ops **press)
{
    char ratios[160];
    const char *why = NULL;
    *press = NULL;
    if (po->press && !(*press = vkv_press_find(po->press))) why = vkv_last_error();
    else if (po->press && po->compression < 0) why = "--press needs --compression P";
    else if (!po->press && (po->compression >= 0 || po->vector || po->pa >= 0 || po->calib || po->aware_flag ||
                            po->agnostic_flag || po->materialized || po->vector_pool >= 0))
        why = "--compression, --vector, --pa, --calib, --vector-pool, --query-aware, --query-agnostic and "
              "--materialized need --press NAME";
    else if (po->aware_flag && po->agnostic_flag) why = "--query-aware and --query-agnostic exclude each other";
    else if ((po->pa >= 0 || po->calib || po->vector_pool >= 0) && !po->vector)
        why = "--pa, --calib and --vector-pool need --vector";
    else why = vkv_kv_check_ratios(po->compression < 0 ? 0 : po->compression, po->pa, po->vector, ratios, sizeof ratios);
    if (why) cli_usage_error(cmd, "%s", why);
    else po->query_aware = vkv_press_query_aware(*press, (vkv_query_mode)cli_query_mode(po->aware_flag, po->agnostic_flag));
    return !why;
}
