/* vkvector viz: the tier memory visualizer. Reads a tier dump (vkvector run
 * --press P --tier-dump FILE) and writes a self-contained HTML report and/or
 * prints a terminal summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "viz/viz.h"
#include "core/out_file.h"

int cmd_viz(int argc, char **argv)
{
    const char *cmd = "viz", *out_path = NULL, *dumps_given[2];
    bool term = false, per_head = false;
    int values_index = 0, color_index = 0; /* into the choices below */
    cli_str_list dumps = {.items = dumps_given, .cap = 2};
    const cli_opt table[] = {
        {.type = CLI_ARGS, .names = "DUMP.json", .dest = &dumps, .help = "the tier dump to show"},
        {.type = CLI_STR, .names = "-o|--output", .metavar = "FILE", .dest = &out_path,
         .help = "write a self-contained HTML report (no network needed; open it in a browser)"},
        {.type = CLI_ENUM, .names = "--values", .metavar = "KIND", .dest = &values_index, .choices = "f16|u8|none",
         .help = "per-position scores and residuals in the report: f16 (default, ~3 digits),\n"
                 "u8 (half the size) or none (tiers only, the smallest report)"},
        {.type = CLI_FLAG, .names = "--term", .dest = &term, .help = "print a summary to stdout (tier bars, tokens, bytes, R², E)"},
        {.type = CLI_FLAG, .names = "--heads", .dest = &per_head, .help = "with --term: a line per KV head too"},
        {.type = CLI_ENUM, .names = "--color|--colour", .metavar = "WHEN", .dest = &color_index, .choices = "auto|always|never",
         .help = "with --term: auto (default: colour when stdout is a terminal and NO_COLOR\n"
                 "is unset), always or never"},
    };
    int parsed = cli_parse(cmd, "vkvector viz DUMP.json -o REPORT.html [options]\n"
                           "       vkvector viz --term DUMP.json [options]\n\n"
                           "Shows a tier dump (vkvector run ... --press P --tier-dump DUMP.json): which context positions\n"
                           "each layer and KV head retained, approximated or evicted, the memory each tier holds, how well\n"
                           "the approximated values are rebuilt (R², relative error) and the distortion E per layer.",
                           table, CLI_N(table), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    if (dumps.n > 1) return cli_usage_error(cmd, "one tier dump at a time ('%s' and '%s')", dumps.items[0], dumps.items[1]);
    const char *dump_path = dumps.n ? dumps.items[0] : NULL;
    static const viz_values kinds[] = {VIZ_VALUES_F16, VIZ_VALUES_U8, VIZ_VALUES_NONE};
    static const char *const whens[] = {"auto", "always", "never"};
    viz_html_opts opts = {.values = kinds[values_index]};
    const char *color_when = whens[color_index];
    if (!dump_path) return cli_usage_error(cmd, "which tier dump? (vkvector viz DUMP.json -o REPORT.html)");
    if (!out_path && !term) return cli_usage_error(cmd, "nothing to do: give -o REPORT.html and/or --term");
    if (per_head && !term) return cli_usage_error(cmd, "--heads goes with --term");

    vkv_status st;
    if (out_path && (st = vkv_out_check("-o", out_path))) return cli_fail(cmd, st);
    viz_dump *d;
    st = viz_dump_load(dump_path, &d);
    if (st) return cli_fail(cmd, st);
    if (out_path) {
        const char *base = strrchr(dump_path, '/');
        opts.source = base ? base + 1 : dump_path;
        uint64_t size = 0;
        if ((st = viz_write_html(d, out_path, &opts, &size))) {
            viz_dump_free(d);
            return cli_fail(cmd, st);
        }
        char sz[32];
        viz_fmt_bytes(sz, sizeof sz, (double)size);
        /* stdout may hold the terminal summary: the note goes to stderr */
        fprintf(stderr, "wrote %s (%s): %u layers x %u KV heads x %u positions\n", out_path, sz, d->n_layer,
                d->n_kv_head, d->n_context);
    }
    if (term) {
        const char *nc = getenv("NO_COLOR");
        bool color = !strcmp(color_when, "always") ||
                     (!strcmp(color_when, "auto") && isatty(STDOUT_FILENO) && !(nc && *nc));
        /* standard output is checked at exit (src/cli/main.c) */
        viz_print_term(stdout, d, color, per_head);
    }
    viz_dump_free(d);
    return 0;
}
