/* vkvector ruler-report: RULER scores of `vkvector ruler` result files,
 * re-scored from pred and answer, merged over files (shards, resumed runs):
 * a table with one row per setting and length and one column per task, then
 * the average per setting (model, press, p_c, VECTOR), the leaderboard's
 * figure, from one array (vkv_ruler_averages) that a plot can take. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/strset.h"
#include "core/out_file.h"
#include "eval/lb_jsonl.h"
#include "eval/ruler_report.h"

typedef struct report {
    bool csv, strict;
    const char *html_path; /* --html: the averages against p_c as the leaderboard's chart */
    vkv_ruler_report rep;
    strset seen;   /* setting and sample of every line counted */
    size_t n_bad, n_dup, n_lines;
} report;

/* Options and files; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, report *r, const char **files, size_t max_files, size_t *n_files)
{
    cli_str_list list = {.items = files, .cap = max_files};
    const cli_opt opts[] = {
        {.type = CLI_ARGS, .names = "FILE...", .dest = &list, .help = "result files of vkvector ruler (JSON lines)"},
        {.type = CLI_FLAG, .names = "--csv", .dest = &r->csv, .help = "CSV instead of Markdown"},
        {.type = CLI_FLAG, .names = "--strict", .dest = &r->strict,
         .help = "a malformed line is fatal (default: reported and skipped)"},
        {.type = CLI_STR, .names = "--html", .metavar = "PLOT.html", .dest = &r->html_path,
         .help = "also write the averages per setting against p_c as a chart: a\n"
                 "self-contained HTML page, a line per press and per press + VECTOR"},
    };
    int parsed = cli_parse("ruler-report", "vkvector ruler-report [--csv] [--strict] [--html PLOT.html] FILE...\n\n"
                           "Scores RULER result files (vkvector ruler --out) and prints a Markdown table: one row per model,\n"
                           "method, p_c and length; one column per task (100 x the mean score, 2 decimals) and the average over\n"
                           "the tasks present; then the average per model, method and p_c (the mean of its task-and-length\n"
                           "cells). Several files are merged (shards of one run); a sample seen twice for the same setting\n"
                           "counts once. --html also writes the averages as the leaderboard's chart.",
                           opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    vkv_status st;
    if (r->html_path && (st = vkv_out_check("--html", r->html_path))) return cli_fail("ruler-report", st);
    *n_files = list.n;
    if (!*n_files) return cli_usage_error("ruler-report", "give one or more result files");
    return -1;
}

/* Counts one line. False when the report must stop (a malformed line under
 * --strict, out of memory). */
static bool count_line(report *r, const char *path, size_t line_no, const vkv_json_doc *doc, vkv_status st)
{
    size_t setting = 0, length = 0;
    int task = 0;
    double score = 0;
    char key[1200];
    const char *why = st ? vkv_last_error()
                         : vkv_ruler_report_read(&r->rep, vkv_json_root(doc), &setting, &task, &length, &score,
                                                 key + 24, sizeof key - 24);
    if (why == VKV_RULER_REPORT_OOM) {
        fprintf(stderr, "vkvector ruler-report: out of host memory\n");
        return false;
    }
    if (why) {
        fprintf(stderr, "vkvector ruler-report: %s:%zu: malformed line%s: %s\n", path, line_no,
                r->strict ? "" : " skipped", why);
        r->n_bad++;
        return !r->strict;
    }
    /* the same sample of the same setting twice (shards given twice) counts once */
    char prefix[24];
    int pl = snprintf(prefix, sizeof prefix, "%zu\n", setting);
    memmove(key + pl, key + 24, strlen(key + 24) + 1);
    memcpy(key, prefix, (size_t)pl);
    bool oom = false;
    if (!strset_add(&r->seen, key, &oom)) {
        if (oom) {
            fprintf(stderr, "vkvector ruler-report: out of host memory\n");
            return false;
        }
        r->n_dup++;
        return true;
    }
    if (!vkv_ruler_report_count(&r->rep, setting, task, length, score)) {
        fprintf(stderr, "vkvector ruler-report: %s:%zu: more than %d lengths in one setting\n", path, line_no,
                VKV_RULER_REPORT_MAX_LENGTHS);
        return false;
    }
    r->n_lines++;
    return true;
}

static bool read_file(report *r, const char *path)
{
    jsonl_reader rd;
    if (!jsonl_open(&rd, path)) {
        fprintf(stderr, "vkvector ruler-report: %s\n", vkv_last_error());
        return false;
    }
    vkv_json_doc *doc;
    vkv_status st;
    bool ok = true;
    while (ok && jsonl_next(&rd, &doc, &st)) {
        ok = count_line(r, path, rd.line_no, doc, st);
        vkv_json_free(doc);
    }
    bool unreadable = ok && rd.error;
    if (unreadable) fprintf(stderr, "vkvector ruler-report: %s\n", vkv_last_error());
    jsonl_close(&rd);
    return ok && !unreadable;
}

static void method_label(const char *press, bool vector, double pa, char *buf, size_t n)
{
    if (!press) snprintf(buf, n, "full");
    else if (vector && !isnan(pa)) snprintf(buf, n, "%s + VECTOR (p_a %g)", press, pa);
    else snprintf(buf, n, "%s%s", press, vector ? " + VECTOR" : "");
}

/* Row cells: "a | b" in Markdown, "a,b" in CSV. */
static void cell_sep(const report *r) { fputs(r->csv ? "," : " | ", stdout); }

/* The tables, then the plot with --html; false when the plot fails. */
static bool print_tables(const report *r, const bool *col)
{
    const vkv_ruler_report *rep = &r->rep;
    /* one row per setting and length */
    printf(r->csv ? "model,method,p_c,length" : "| model | method | p_c | length");
    for (int t = 0; t < VKV_RULER_N_TASKS; t++)
        if (col[t]) {
            cell_sep(r);
            fputs(vkv_ruler_tasks[t].name, stdout);
        }
    printf(r->csv ? ",average\n" : " | average |\n");
    if (!r->csv) {
        printf("|---|---|---|---");
        for (int t = 0; t < VKV_RULER_N_TASKS; t++)
            if (col[t]) printf("|---");
        printf("|---|\n");
    }
    char method[256];
    for (size_t i = 0; i < rep->n; i++) {
        const vkv_ruler_setting *s = &rep->s[i];
        method_label(s->press, s->vector, s->pa, method, sizeof method);
        for (size_t k = 0; k < s->n_lengths; k++) {
            printf(r->csv ? "%s,%s,%g,%zu" : "| %s | %s | %g | %zu", s->model, method, s->compression_ratio,
                   s->lengths[k]);
            double sum = 0;
            size_t cells = 0;
            for (int t = 0; t < VKV_RULER_N_TASKS; t++) {
                if (!col[t]) continue;
                cell_sep(r);
                if (!s->n[k][t]) {
                    fputs(r->csv ? "" : "-", stdout);
                    continue;
                }
                double v = 100.0 * s->sum[k][t] / (double)s->n[k][t];
                printf("%.2f", v);
                sum += v;
                cells++;
            }
            cell_sep(r);
            if (cells) printf("%.2f", sum / (double)cells);
            printf(r->csv ? "\n" : " |\n");
        }
    }
    /* the average per setting: the leaderboard's figure */
    vkv_ruler_average *avg = malloc(sizeof *avg * (rep->n ? rep->n : 1));
    if (!avg) {
        fprintf(stderr, "vkvector ruler-report: out of host memory\n");
        return false;
    }
    vkv_ruler_averages(rep, avg);
    printf(r->csv ? "\nmodel,method,p_c,average,cells\n"
                  : "\n| model | method | p_c | average | cells |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < rep->n; i++) {
        method_label(avg[i].press, avg[i].vector, avg[i].pa, method, sizeof method);
        printf(r->csv ? "%s,%s,%g,%.2f,%zu\n" : "| %s | %s | %g | %.2f | %zu |\n", avg[i].model, method,
               avg[i].compression_ratio, avg[i].score, avg[i].n_cells);
    }
    bool ok = true;
    if (r->html_path) {
        /* the subtitle names the tasks and lengths the averages are over */
        char sub[1024];
        size_t k = (size_t)snprintf(sub, sizeof sub, "Mean over the (task, length) cells of 100 x the mean score; tasks: ");
        for (int t = 0, i = 0; t < VKV_RULER_N_TASKS && k < sizeof sub; t++)
            if (col[t]) k += (size_t)snprintf(sub + k, sizeof sub - k, "%s%s", i++ ? ", " : "", vkv_ruler_tasks[t].name);
        if (vkv_ruler_write_plot(avg, rep->n, sub, r->html_path)) {
            fprintf(stderr, "vkvector ruler-report: %s\n", vkv_last_error());
            ok = false;
        } else {
            fprintf(stderr, "vkvector ruler-report: plot written to %s\n", r->html_path);
        }
    }
    free(avg);
    return ok;
}

int cmd_ruler_report(int argc, char **argv)
{
    report r = {0};
    const char *files[256];
    size_t n_files = 0;
    int rc = parse_args(argc, argv, &r, files, 256, &n_files);
    if (rc >= 0) return rc;
    rc = 0;
    for (size_t f = 0; f < n_files && !rc; f++)
        if (!read_file(&r, files[f])) rc = 1;
    if (!rc && !r.n_lines) {
        fprintf(stderr, "vkvector ruler-report: no result lines in the files given\n");
        rc = 1;
    }
    if (!rc) {
        vkv_ruler_report_sort(&r.rep);
        bool col[VKV_RULER_N_TASKS] = {0};
        for (size_t i = 0; i < r.rep.n; i++)
            for (size_t k = 0; k < r.rep.s[i].n_lengths; k++)
                for (int t = 0; t < VKV_RULER_N_TASKS; t++) col[t] |= r.rep.s[i].n[k][t] > 0;
        if (!print_tables(&r, col)) rc = 1;
        /* the tasks with no result, named: the leaderboard's average is over all 13 */
        char missing[256] = "";
        for (int t = 0; t < VKV_RULER_N_TASKS; t++)
            if (!col[t]) {
                size_t l = strlen(missing);
                snprintf(missing + l, sizeof missing - l, "%s%s", l ? ", " : "", vkv_ruler_tasks[t].name);
            }
        if (*missing)
            fprintf(stderr, "vkvector ruler-report: no results for %s (the averages are over the tasks present; "
                            "generated runs skip qa_1/qa_2 without --squad/--hotpotqa)\n", missing);
        if (r.n_bad) fprintf(stderr, "vkvector ruler-report: %zu malformed lines skipped\n", r.n_bad);
        if (r.n_dup) fprintf(stderr, "vkvector ruler-report: %zu repeated samples counted once\n", r.n_dup);
    }
    vkv_ruler_report_free(&r.rep);
    strset_free(&r.seen);
    return rc;
}
