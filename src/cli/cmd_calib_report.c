/* vkvector calib-report: the paper's R² tables from calibration files, no
 * device needed. Per file, the per-layer table (the paper's Table 6 form):
 * the held-out R² of the per-head OLS maps (mean, min and max over the KV
 * heads), of one joint map per layer over all KV heads, and of the
 * Moore–Penrose map W_V W_K^+; then one row per file (Table 2 form). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "calib/calib.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "core/out_file.h"

static void per_layer_table(const char *path, const vkv_calib *c, bool md)
{
    const uint32_t L = c->id.n_layer, H = c->id.n_head_kv;
    const char *what = c->corpus.n_seq_heldout ? "held-out" : "in-sample (no held-out sequences)";
    /* names from the file and the command line, printed with their control
     * characters escaped (docs/ARCHITECTURE.md §6) */
    char name[1024], file[4096];
    printf(md ? "\n### %s (%s): %s R²\n\n| layer | OLS mean | OLS min | OLS max | joint | Moore–Penrose |\n"
                "| ---: | ---: | ---: | ---: | ---: | ---: |\n"
              : "\n%s (%s): %s R²\n%5s %9s %9s %9s %9s %14s\n",
           vkv_printable(c->model_name, name, sizeof name), vkv_printable(path, file, sizeof file), what, "layer",
           "OLS mean", "OLS min", "OLS max", "joint", "Moore-Penrose");
    for (uint32_t l = 0; l < L; l++) {
        double lo = INFINITY, hi = -INFINITY;
        for (uint32_t h = 0; h < H; h++) {
            lo = fmin(lo, c->r2[(size_t)l * H + h]);
            hi = fmax(hi, c->r2[(size_t)l * H + h]);
        }
        printf(md ? "| %u | %.4f | %.4f | %.4f | %.4f | %.3f |\n" : "%5u %9.4f %9.4f %9.4f %9.4f %14.3f\n", l,
               vkv_calib_layer_mean(c, c->r2, l), lo, hi, c->r2_joint[l], vkv_calib_layer_mean(c, c->r2_mp, l));
    }
}

static double layer_mean_of(const double *per_layer, uint32_t n)
{
    double s = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isnan(per_layer[i])) s += per_layer[i], k++;
    return k ? s / k : NAN;
}

int cmd_calib_report(int argc, char **argv)
{
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) return cli_fail("calib-report", vkv_error(VKV_ERR_OOM, "out of host memory"));
    cli_str_list list = {.items = files, .cap = (size_t)argc};
    bool md = false;
    const cli_opt opts[] = {
        {.type = CLI_ARGS, .names = "FILE.vkcal...", .dest = &list, .help = "calibration files (vkvector calib's)"},
        {.type = CLI_FLAG, .names = "--markdown", .dest = &md, .help = "Markdown tables"},
    };
    int rc = cli_parse("calib-report", "vkvector calib-report FILE.vkcal... [--markdown]\n\n"
                       "The held-out R² of VECTOR's maps per layer (OLS per head, one joint map per layer,\n"
                       "Moore-Penrose W_V W_K^+), then one row per file.",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) {
        free(files);
        return rc == CLI_HELP ? 0 : 2;
    }
    if (!list.n) {
        free(files);
        return cli_usage_error("calib-report", "give one or more calibration files");
    }
    vkv_calib **cals = calloc(list.n, sizeof *cals);
    vkv_status st = cals ? VKV_OK : vkv_error(VKV_ERR_OOM, "out of host memory");
    for (size_t i = 0; i < list.n && !st; i++)
        if ((st = vkv_calib_read(list.items[i], &cals[i]))) st = vkv_error_context(st, "%s", list.items[i]);
    for (size_t i = 0; i < list.n && !st; i++) per_layer_table(list.items[i], cals[i], md);
    if (!st) {
        printf(md ? "\n| model | layers | KV heads | OLS R² | joint R² | Moore–Penrose R² |\n"
                    "| --- | ---: | ---: | ---: | ---: | ---: |\n"
                  : "\n%-32s %6s %8s %9s %9s %14s\n", "model", "layers", "KV heads", "OLS R²", "joint R²", "Moore-Penrose R²");
        for (size_t i = 0; i < list.n; i++) {
            const vkv_calib *c = cals[i];
            char name[1024];
            printf(md ? "| %s | %u | %u | %.4f | %.4f | %.3f |\n" : "%-32s %6u %8u %9.4f %9.4f %14.3f\n",
                   vkv_printable(c->model_name, name, sizeof name),
                   c->id.n_layer, c->id.n_head_kv, vkv_calib_mean(c, c->r2), layer_mean_of(c->r2_joint, c->id.n_layer),
                   vkv_calib_mean(c, c->r2_mp));
        }
    }
    for (size_t i = 0; cals && i < list.n; i++) vkv_calib_free(cals[i]);
    free(cals);
    free(files);
    return st ? cli_fail("calib-report", st) : 0;
}
