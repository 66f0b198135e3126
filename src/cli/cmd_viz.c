/* vkvector viz: the tier memory visualizer. Reads a tier dump (vkvector run
 * --press P --tier-dump FILE) and writes a self-contained HTML report and/or
 * prints a terminal summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "viz/viz.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vkvector viz DUMP.json -o REPORT.html [options]\n"
            "       vkvector viz --term DUMP.json [options]\n\n"
            "Shows a tier dump (vkvector run ... --press P --tier-dump DUMP.json): which context positions\n"
            "each layer and KV head retained, approximated or evicted, the memory each tier holds, how well\n"
            "the approximated values are rebuilt (R², relative error) and the distortion E per layer.\n\n"
            "  -o, --output FILE   write a self-contained HTML report (no network needed; open it in a browser)\n"
            "  --values KIND       per-position scores and residuals in the report: f16 (default, ~3 digits),\n"
            "                      u8 (half the size) or none (tiers only, the smallest report)\n"
            "  --term              print a summary to stdout (tier bars, tokens, bytes, R², E)\n"
            "  --heads             with --term: a line per KV head too\n"
            "  --color WHEN        with --term: auto (default: colour when stdout is a terminal and NO_COLOR\n"
            "                      is unset), always or never\n"
            "  -h, --help          this help\n");
}

int cmd_viz(int argc, char **argv)
{
    const char *cmd = "viz", *dump_path = NULL, *out_path = NULL, *color_when = "auto";
    bool term = false, per_head = false;
    viz_html_opts opts = {.values = VIZ_VALUES_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out_path = cli_flag_value(cmd, argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--values")) {
            const char *v = cli_flag_value(cmd, argc, argv, &i);
            if (!v) return 2;
            if (!strcmp(v, "f16")) opts.values = VIZ_VALUES_F16;
            else if (!strcmp(v, "u8")) opts.values = VIZ_VALUES_U8;
            else if (!strcmp(v, "none")) opts.values = VIZ_VALUES_NONE;
            else return cli_usage_error(cmd, "--values wants f16, u8 or none, not '%s'", v);
        } else if (!strcmp(a, "--term")) {
            term = true;
        } else if (!strcmp(a, "--heads")) {
            per_head = true;
        } else if (!strcmp(a, "--color") || !strcmp(a, "--colour")) {
            if (!(color_when = cli_flag_value(cmd, argc, argv, &i))) return 2;
            if (strcmp(color_when, "auto") && strcmp(color_when, "always") && strcmp(color_when, "never"))
                return cli_usage_error(cmd, "--color wants auto, always or never, not '%s'", color_when);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (dump_path) {
            return cli_usage_error(cmd, "one tier dump at a time ('%s' and '%s')", dump_path, a);
        } else {
            dump_path = a;
        }
    }
    if (!dump_path) return cli_usage_error(cmd, "which tier dump? (vkvector viz DUMP.json -o REPORT.html)");
    if (!out_path && !term) return cli_usage_error(cmd, "nothing to do: give -o REPORT.html and/or --term");
    if (per_head && !term) return cli_usage_error(cmd, "--heads goes with --term");

    viz_dump *d;
    vkv_status st = viz_dump_load(dump_path, &d);
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
        viz_print_term(stdout, d, color, per_head);
        if (fflush(stdout)) {
            viz_dump_free(d);
            return cli_fail(cmd, vkv_error(VKV_ERR_IO, "error writing to stdout"));
        }
    }
    viz_dump_free(d);
    return 0;
}
