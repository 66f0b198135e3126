/* vkvector: command-line entry point. Dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/out_file.h"

typedef struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"run", cmd_run, "generate text from a GGUF model or checkpoint folder (streams tokens, prints speed and memory)"},
    {"perplexity", cmd_perplexity, "perplexity of text under a model, and loss by position"},
    {"calib", cmd_calib, "offline OLS calibration of the V-from-K maps VECTOR needs (writes a .vkcal)"},
    {"calib-report", cmd_calib_report, "the R² tables of calibration files (OLS, joint, Moore-Penrose per layer)"},
    {"eval-ppl", cmd_eval_ppl, "what KV compression loses: perplexity and KL over a continuation"},
    {"viz", cmd_viz, "the tier memory visualizer: an HTML report or terminal summary of a --tier-dump"},
    {"longbench", cmd_longbench, "the LongBench harness: predictions and scores of a press / VECTOR setting"},
    {"longbench-report", cmd_longbench_report, "LongBench scores of result files as the paper's table (Markdown, CSV)"},
    {"ruler", cmd_ruler, "the RULER harness (kvpress's protocol): predictions and scores of a press / VECTOR setting"},
    {"ruler-report", cmd_ruler_report, "RULER scores of result files per task and length, and the average per setting"},
    {"niah", cmd_niah, "needle in a haystack: a length x depth grid, JSON and an HTML heatmap"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server: continuous batching, a compressed cache per request"},
    {"devices", cmd_devices, "list Vulkan devices and their probed capabilities"},
    {"conform", cmd_conform, "run every GPU op against its CPU reference on every device"},
    {"bench", cmd_bench, "benchmarks (bench ops: matrix-vector / matrix-matrix throughput)"},
    {"tokenize", cmd_tokenize, "print the token ids of a text for a GGUF vocabulary"},
};

static void print_usage(FILE *f)
{
    fprintf(f, "usage: vkvector <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-16s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\n'vkvector <command> --help' describes a command's options.\n");
}

/* Standard output redirected to a file or a pipe is checked at exit: a full
 * disk or a closed pipe fails the command (docs/ARCHITECTURE.md §6). */
static int finish(int rc)
{
    if (isatty(STDOUT_FILENO)) return rc;
    if (vkv_close_stdout()) {
        fprintf(stderr, "vkvector: %s\n", vkv_last_error());
        return rc ? rc : 1;
    }
    return rc;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) return subcommands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "vkvector: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    return finish(dispatch(argc, argv));
}
