/* The press and VECTOR options' cross-option rules, the compression they
 * ask for and --press's help (cli/options.h), apart from the parser so that
 * the parser links without the GPU library. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "kvlayout/kv_counts.h"
#include "press/press.h"
#include "press/registry.h"
#include "session/session.h"

int cli_pool_scope(const cli_press_opts *po, const vkv_press_ops *press)
{
    if (po->vector_pool >= 0) return VKV_POOL_ROW + po->vector_pool;
    return po->kvpress_protocol ? vkv_press_paper_pool_scope(press) : VKV_POOL_DEFAULT;
}

int cli_query_mode(bool aware_flag, bool agnostic_flag)
{
    return aware_flag ? VKV_QUERY_AWARE : agnostic_flag ? VKV_QUERY_AGNOSTIC : VKV_QUERY_DEFAULT;
}

/* p_c as the session takes it: --compression, or 0 when it was not given. */
static double compression_ratio_or_zero(const cli_press_opts *po)
{
    return po->compression_ratio < 0 ? 0 : po->compression_ratio;
}

void cli_press_compression(const cli_press_opts *po, const vkv_press_ops *press, bool plain_prompt,
                           vkv_compression *out)
{
    *out = (vkv_compression){.press = press,
                             .compression_ratio = compression_ratio_or_zero(po),
                             .vector = po->vector,
                             .p_a = po->pa,
                             .pool = (vkv_pool_scope)cli_pool_scope(po, press),
                             .map = (vkv_vector_map)po->vector_map,
                             .query_aware = po->query_aware,
                             .materialized = po->materialized,
                             .plain_prompt = plain_prompt,
                             .compress_every = (uint32_t)po->compress_every,
                             .max_kv_tokens = (uint32_t)po->max_kv_tokens,
                             .decoding = (vkv_decoding_rule)po->decoding,
                             .target_kv_tokens = (uint32_t)po->target_kv_tokens,
                             .press_seed_set = po->press_seed >= 0,
                             .press_seed = po->press_seed >= 0 ? (uint32_t)po->press_seed : 0};
}

const char *cli_decoding_check(cli_press_opts *po)
{
    if (po->decoding != VKV_DECODING_KVPRESS)
        return po->target_kv_tokens ? "--target-kv-tokens needs --decoding kvpress" : NULL;
    if (po->max_kv_tokens)
        return "--max-kv-tokens is --decoding budget's bound; --decoding kvpress compresses to --target-kv-tokens";
    if (!po->compress_every) po->compress_every = VKV_KVPRESS_COMPRESSION_INTERVAL;
    if (!po->target_kv_tokens) po->target_kv_tokens = VKV_KVPRESS_TARGET_SIZE;
    return NULL;
}

/* Help text is wrapped before a word that would take its line past this. */
#define PRESS_HELP_WIDTH 80

const char *cli_press_help(void)
{
    static char help[512];
    if (help[0]) return help;
    size_t used = (size_t)snprintf(help, sizeof help, "importance scorer:"), line = used;
    for (const vkv_press_ops *const *p = vkv_press_all(); *p && used < sizeof help; p++) {
        char word[64];
        size_t len = (size_t)snprintf(word, sizeof word, "%s%s", (*p)->name, p[1] ? "," : "");
        const bool wrap = line + 1 + len > PRESS_HELP_WIDTH;
        used += (size_t)snprintf(help + used, sizeof help - used, "%s%s", wrap ? "\n" : " ", word);
        line = wrap ? len : line + 1 + len;
    }
    return help;
}

/* A ratio option's value, arg: one number in [0, 1] ([0, 1) with
 * below_one), or a comma list of up to 16 where list_ok, into values[*n].
 * The message, or NULL. */
static const char *parse_ratios(const char *name, const char *arg, bool below_one, bool list_ok, double values[16],
                                int *n, char *msg, size_t size)
{
    *n = 0;
    char buf[256];
    bool good = strlen(arg) < sizeof buf;
    snprintf(buf, sizeof buf, "%s", arg);
    /* every comma separates two values: an empty one ("0.25,,0.5", "0.5,") is refused */
    for (char *t = buf, *comma; good; t = comma + 1) {
        comma = strchr(t, ',');
        if (comma) *comma = 0;
        double v;
        good = *n < 16 && *t && cli_parse_f64(t, 0, 1, &v) && !(below_one && v == 1);
        if (good) values[(*n)++] = v;
        if (!comma) break;
    }
    if (good && *n > 0 && (*n == 1 || list_ok)) return NULL;
    snprintf(msg, size, "%s wants a number in [0, 1%s%s, got '%s'", name, below_one ? ")" : "]",
             list_ok ? " or a comma list of up to 16" : "", arg);
    return msg;
}

/* --pa's and --compression's lists; the message, or NULL. */
static const char *parse_ratio_options(cli_press_opts *po, char *msg, size_t size)
{
    po->n_pas = 0;
    po->pa = -1;
    if (po->compression_arg) {
        const char *why = parse_ratios("--compression", po->compression_arg, true, po->compression_list_ok,
                                       po->compressions, &po->n_compressions, msg, size);
        if (why) return why;
        po->compression_ratio = po->compressions[0];
    }
    if (!po->pa_arg) return NULL;
    const char *why = parse_ratios("--pa", po->pa_arg, false, po->pa_list_ok, po->pas, &po->n_pas, msg, size);
    if (!why) po->pa = po->pas[0];
    return why;
}

/* Whether a press of vkvector's has this name. */
static bool bare_press(const char *name)
{
    for (const vkv_press_ops *const *p = vkv_press_all(); *p; p++)
        if (!strcmp((*p)->name, name)) return true;
    return false;
}

/* --press naming an entry of kvpress's evaluation registry (press/registry.h):
 * under --protocol kvpress, the press that builds it (with kvpress's
 * DecodingPress rule for the decoding_ names), or the reason it is not built;
 * elsewhere a registry name that is no press of vkvector's is refused with the
 * press to give. The message, or NULL. */
static const char *registry_press(cli_press_opts *po, char *msg, size_t size)
{
    const vkv_press_registry_entry *e = po->press ? vkv_press_registry_find(po->press) : NULL;
    if (!e || (!po->kvpress_protocol && bare_press(po->press))) return NULL;
    if (!po->kvpress_protocol)
        snprintf(msg, size, "'%s' is a name of kvpress's evaluation registry (%s), taken under --protocol kvpress%s%s",
                 e->kvpress_name, e->composition, e->press ? "; vkvector's press for it: " : "",
                 e->press ? e->press : "");
    else if (e->refused)
        snprintf(msg, size, "kvpress's '%s' (%s) is not built: %s", e->kvpress_name, e->composition, e->refused);
    else if (!e->press && po->compression_arg)
        snprintf(msg, size, "kvpress's '%s' is the full cache: --compression does not apply", e->kvpress_name);
    else if (e->decoding && po->compression_arg)
        snprintf(msg, size, "kvpress's '%s' (%s) compresses during generation only, as its DecodingPress ignores "
                 "the compression ratio: drop --compression", e->kvpress_name, e->composition);
    else {
        if (e->decoding) po->decoding = VKV_DECODING_KVPRESS; /* its interval and target: kvpress's defaults */
        po->press = e->press;
        return NULL;
    }
    return msg;
}

bool cli_press_opts_check(const char *cmd, cli_press_opts *po, const vkv_press_ops **press)
{
    char ratios[160], pa_msg[320], registry_msg[640];
    const char *why = parse_ratio_options(po, pa_msg, sizeof pa_msg);
    if (!why) why = registry_press(po, registry_msg, sizeof registry_msg);
    if (!why) why = cli_decoding_check(po);
    const bool budget = po->decoding == VKV_DECODING_BUDGET;
    *press = NULL;
    if (why) {
        cli_usage_error(cmd, "%s", why);
        return false;
    }
    if (po->press && !(*press = vkv_press_find(po->press))) why = vkv_last_error();
    else if (po->press && po->compression_ratio < 0 && !po->compress_every)
        why = "--press needs --compression P (or --compress-every N)";
    else if (budget && !po->compress_every != !po->max_kv_tokens) why = "--compress-every and --max-kv-tokens go together";
    else if (po->compress_every && !po->press) why = "--compress-every needs --press NAME";
    else if (budget && po->compress_every && po->max_kv_tokens <= po->compress_every)
        why = "--max-kv-tokens must be larger than --compress-every";
    else if (!po->press && (po->compression_ratio >= 0 || po->vector || po->pa >= 0 || po->calib || po->aware_flag ||
                            po->agnostic_flag || po->materialized || po->vector_pool >= 0 || po->vector_map))
        why = "--compression, --vector, --pa, --calib, --vector-pool, --vector-map, --query-aware, --query-agnostic "
              "and --materialized need --press NAME";
    else if (po->aware_flag && po->agnostic_flag) why = "--query-aware and --query-agnostic exclude each other";
    else if ((po->pa >= 0 || po->calib || po->vector_pool >= 0) && !po->vector)
        why = "--pa, --calib and --vector-pool need --vector";
    else
        for (int c = 0; c < (po->n_compressions ? po->n_compressions : 1) && !why; c++)
            for (int k = 0; k < (po->n_pas ? po->n_pas : 1) && !why; k++)
                why = vkv_kv_check_ratios(po->n_compressions ? po->compressions[c] : compression_ratio_or_zero(po),
                                          po->n_pas ? po->pas[k] : -1, po->vector, ratios, sizeof ratios);
    if (why) cli_usage_error(cmd, "%s", why);
    else
        po->query_aware = vkv_press_query_aware(*press, (vkv_query_mode)cli_query_mode(po->aware_flag, po->agnostic_flag),
                                                po->kvpress_protocol);
    return !why;
}
