/* The press and VECTOR options' cross-option rules (cli/options.h), apart
 * from the parser so that the parser links without the GPU library. */
#include "cli/cli.h"
#include "cli/options.h"
#include "kv/kv_counts.h"
#include "press/press.h"

bool cli_press_opts_check(const char *cmd, const cli_press_opts *po, const vkv_press_ops **press)
{
    *press = NULL;
    if (po->press && !(*press = vkv_press_find(po->press))) return cli_usage_error(cmd, "%s", vkv_last_error()), false;
    if (po->press && po->compression < 0) return cli_usage_error(cmd, "--press needs --compression P"), false;
    if (!po->press && (po->compression >= 0 || po->vector || po->pa >= 0 || po->calib || po->query_aware ||
                       po->materialized))
        return cli_usage_error(cmd, "--compression, --vector, --pa, --calib, --query-aware and --materialized need "
                                    "--press NAME"), false;
    if ((po->pa >= 0 || po->calib) && !po->vector) return cli_usage_error(cmd, "--pa and --calib need --vector"), false;
    char why[160];
    if (vkv_kv_check_ratios(po->compression < 0 ? 0 : po->compression, po->pa, po->vector, why, sizeof why))
        return cli_usage_error(cmd, "%s", why), false;
    return true;
}
