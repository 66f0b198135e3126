/* vkvector longbench-report: LongBench scores of result files, recomputed
 * from `pred` and `answers` (so a metric fix re-scores old runs), merged over
 * files (shards, resumed runs) and laid out as the paper's Table 1: one row
 * per method and compression ratio, one column per task, and the average.
 * Reads vkvector's own result lines and LongBench's pred/<model>/<task>.jsonl
 * files (task from the file name, model from the directory). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/strset.h"
#include "core/json.h"
#include "core/out_file.h"
#include "eval/lb_jsonl.h"
#include "eval/lb_report.h"
#include "eval/metrics.h"
#include "kvlayout/kv_counts.h"

/* Short column names (LongBench's own abbreviations). */
static const char *const short_names[VKV_LB_N_TASKS] = {
    "NrtvQA", "Qasper", "MF-en", "HotpotQA", "2WikiMQA", "Musique", "GovReport", "QMSum",
    "MultiNews", "TREC", "TriviaQA", "SAMSum", "PCount", "PRe", "Lcc", "RB-P",
};

typedef struct report {
    bool csv, strict, by_pa;
    const char *html_path; /* --html: the plot of the average against p_c */
    vkv_lb_score_opts so;
    vkv_lb_rows rows;
    strset seen;    /* row, task and _id of every sample scored */
    strset unknown; /* task names already warned about */
    size_t n_bad, n_dup, n_lines;
} report;

/* What the table shows: tasks with data in some row, extra columns when rows differ. */
typedef struct layout {
    bool col[VKV_LB_N_TASKS];
    size_t max_n[VKV_LB_N_TASKS];
    bool many_models, mixed_mode, mixed_protocol, show_pa, incomplete;
} layout;

/* Options and files; -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, report *rep, const char **files, size_t max_files, size_t *n_files)
{
    int code_sim = 0; /* index into the choices below */
    cli_str_list list = {.items = files, .cap = max_files};
    const cli_opt opts[] = {
        {.type = CLI_ARGS, .names = "FILE...", .dest = &list, .help = "result files (JSON lines)"},
        {.type = CLI_FLAG, .names = "--csv", .dest = &rep->csv, .help = "CSV instead of Markdown"},
        {.type = CLI_FLAG, .names = "--by-pa", .dest = &rep->by_pa,
         .help = "also the average score with a column per p_a (the baseline as p_a 0)"},
        {.type = CLI_STR, .names = "--html", .metavar = "PLOT.html", .dest = &rep->html_path,
         .help = "also write the average score against p_c as a self-contained HTML/SVG chart:\n"
                 "a line per press and per press + VECTOR, the full cache at p_c 0"},
        {.type = CLI_FLAG, .names = "--strict", .dest = &rep->strict,
         .help = "a malformed line is fatal (default: reported and skipped)"},
        {.type = CLI_ENUM, .names = "--code-sim", .metavar = "KIND", .dest = &code_sim, .choices = "levenshtein|difflib",
         .help = "lcc / repobench-p similarity: levenshtein (fuzzywuzzy with python-Levenshtein,\n"
                 "default) or difflib (fuzzywuzzy's pure-Python fallback)"},
    };
    int parsed = cli_parse("longbench-report", "vkvector longbench-report [--csv] [--html PLOT.html] [--strict] [--code-sim levenshtein|difflib] FILE...\n\n"
                           "Scores LongBench result files (vkvector longbench --out, or LongBench's pred/<model>/<task>.jsonl) and\n"
                           "prints a Markdown table: one row per model, method and p_c; one column per task (100 x the mean score,\n"
                           "2 decimals) and the average over the tasks present. Several files are merged (shards of one run);\n"
                           "a sample seen twice for the same row counts once. --html also writes the averages as a chart.",
                           opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    rep->so.code_sim = code_sim ? VKV_CODE_SIM_DIFFLIB : VKV_CODE_SIM_LEVENSHTEIN;
    *n_files = list.n;
    if (!*n_files) return cli_usage_error("longbench-report", "give one or more result files");
    vkv_status st;
    if (rep->html_path && (st = vkv_out_check("--html", rep->html_path))) return cli_fail("longbench-report", st);
    return -1;
}

/* Scores one line into its row. False when the report must stop (a malformed
 * line under --strict, out of memory). */
static bool score_line(report *rep, const char *path, size_t line_no, const vkv_json_doc *doc, vkv_status st,
                       const char *file_task, const char *file_model)
{
    vkv_lb_result res;
    const char *why = st ? vkv_last_error() : vkv_lb_result_read(vkv_json_root(doc), file_task, file_model, &res);
    if (st) memset(&res, 0, sizeof res); /* a line that is not JSON: malformed */
    bool ok = true;
    if (!why && !res.task) {
        if (strset_add(&rep->unknown, res.dataset, NULL))
            fprintf(stderr, "vkvector longbench-report: %s:%zu: unknown task '%s' (not one of the 16 English "
                            "LongBench tasks): its lines are skipped\n", path, line_no, res.dataset);
    } else if (why) {
        fprintf(stderr, "vkvector longbench-report: %s:%zu: malformed line%s: %s\n", path, line_no,
                rep->strict ? "" : " skipped", why);
        rep->n_bad++;
        ok = !rep->strict;
    } else {
        rep->n_lines++;
        vkv_lb_row *rw = vkv_lb_rows_find(&rep->rows, &res);
        /* the same sample of the same row twice (shards given twice, a file
         * concatenated from overlapping runs) counts once */
        bool dup = false, oom = !rw;
        if (rw && res.id) {
            char key[1024];
            snprintf(key, sizeof key, "%zu\n%s\n%s", (size_t)(rw - rep->rows.r), res.task->name, res.id);
            dup = !strset_add(&rep->seen, key, &oom);
        }
        if (oom) {
            fprintf(stderr, "vkvector longbench-report: out of host memory\n");
            ok = false;
        } else if (dup) rep->n_dup++;
        else vkv_lb_row_add(rw, &res, &rep->so);
    }
    vkv_lb_result_free(&res);
    return ok;
}

static bool read_file(report *rep, const char *path)
{
    jsonl_reader rd;
    if (!jsonl_open(&rd, path)) {
        fprintf(stderr, "vkvector longbench-report: %s\n", vkv_last_error());
        return false;
    }
    char file_task[256], file_model[256];
    vkv_lb_task_from_path(path, file_task, sizeof file_task);
    vkv_lb_model_from_path(path, file_model, sizeof file_model);
    vkv_json_doc *doc;
    vkv_status st;
    bool ok = true;
    while (ok && jsonl_next(&rd, &doc, &st)) {
        ok = score_line(rep, path, rd.line_no, doc, st, file_task, file_model);
        vkv_json_free(doc);
    }
    bool unreadable = ok && rd.error; /* the rest of the file cannot be read: no report from part of it */
    jsonl_close(&rd);
    if (unreadable) fprintf(stderr, "vkvector longbench-report: %s\n", vkv_last_error());
    return ok && !unreadable;
}

/* The columns, and a warning for each row with fewer samples of a task than another row. */
static void plan_layout(const vkv_lb_rows *rs, layout *lo)
{
    memset(lo, 0, sizeof *lo);
    for (size_t i = 0; i < rs->n; i++) {
        for (int t = 0; t < VKV_LB_N_TASKS; t++) {
            if (rs->r[i].n[t]) lo->col[t] = true;
            if (rs->r[i].n[t] > lo->max_n[t]) lo->max_n[t] = rs->r[i].n[t];
        }
        if (strcmp(rs->r[i].model, rs->r[0].model)) lo->many_models = true;
        if (rs->r[i].query_aware != rs->r[0].query_aware) lo->mixed_mode = true;
        if (rs->r[i].kvpress != rs->r[0].kvpress) lo->mixed_protocol = true;
        if (rs->r[i].vector && !vkv_lb_same_num(rs->r[i].pa, vkv_kv_default_pa(rs->r[i].compression_ratio)))
            lo->show_pa = true;
    }
    for (size_t i = 0; i < rs->n; i++) {
        char m[256], list[2048] = "";
        size_t k = 0;
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (lo->col[t] && rs->r[i].n[t] && rs->r[i].n[t] < lo->max_n[t] && k < sizeof list)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s %zu/%zu", k ? ", " : "", vkv_lb_tasks[t].name,
                                      rs->r[i].n[t], lo->max_n[t]);
        if (!k) continue;
        vkv_lb_method_label(&rs->r[i], lo->show_pa, m, sizeof m);
        char model[1024], pm[1024];
        fprintf(stderr, "vkvector longbench-report: %s, %s, p_c %g has fewer samples than other rows: %s\n",
                vkv_printable(rs->r[i].model, model, sizeof model), vkv_printable(m, pm, sizeof pm),
                rs->r[i].compression_ratio, list);
        lo->incomplete = true;
    }
}

static void print_header(bool csv, const layout *lo)
{
    if (csv) {
        printf("model,press,vector,pa,query_aware,compression");
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (lo->col[t]) printf(",%s", vkv_lb_tasks[t].name);
        printf(",avg\n");
        return;
    }
    printf("|%s Method |%s%s p_c |", lo->many_models ? " Model |" : "", lo->mixed_protocol ? " Protocol |" : "",
           lo->mixed_mode ? " Mode |" : "");
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (lo->col[t]) printf(" %s |", short_names[t]);
    printf(" Avg |\n|%s---|%s%s---:|", lo->many_models ? "---|" : "", lo->mixed_protocol ? "---|" : "",
           lo->mixed_mode ? "---|" : "");
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (lo->col[t]) printf("---:|");
    printf("---:|\n");
}

static void print_row(bool csv, const layout *lo, const vkv_lb_row *r)
{
    bool all;
    double avg = vkv_lb_row_avg(r, lo->col, &all);
    /* model and press names come from the result files: printed with their
     * control characters escaped (docs/ARCHITECTURE.md §6) */
    char model[1024], press[256];
    vkv_printable(r->model, model, sizeof model);
    if (csv) {
        printf("%s,%s,%s,", model, vkv_printable(r->press, press, sizeof press), r->vector ? "true" : "false");
        if (!isnan(r->pa)) printf("%.6g", r->pa);
        printf(",%s,%g", r->query_aware ? "true" : "false", r->compression_ratio);
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (lo->col[t]) {
                if (r->n[t]) printf(",%.2f", 100.0 * r->sum[t] / r->n[t]);
                else printf(",");
            }
        printf(",%.2f\n", avg);
        return;
    }
    char m[256], pm[1024];
    vkv_lb_method_label(r, lo->show_pa, m, sizeof m);
    printf("|");
    if (lo->many_models) printf(" %s |", model);
    printf(" %s |", vkv_printable(m, pm, sizeof pm));
    if (lo->mixed_protocol) printf(" %s |", r->kvpress ? "kvpress" : "longbench");
    if (lo->mixed_mode) printf(" %s |", r->press ? (r->query_aware ? "query-aware" : "query-agnostic") : "");
    if (r->press) printf(" %g |", r->compression_ratio);
    else printf(" 0 |");
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (lo->col[t]) {
            if (r->n[t]) printf(" %.2f |", 100.0 * r->sum[t] / r->n[t]);
            else printf(" — |");
        }
    printf(" %.2f%s |\n", avg, all ? "" : "*");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p_a sweep: one row per (model, press, p_c, mode), the baseline's
 * average then VECTOR's at each p_a found (the paper's Figure 3 as a table). */
static void print_pa_table(const vkv_lb_rows *rs, const layout *lo)
{
    double pas[64];
    size_t n_pa = 0;
    for (size_t i = 0; i < rs->n; i++) {
        bool seen = false;
        for (size_t k = 0; k < n_pa; k++) seen |= vkv_lb_same_num(pas[k], rs->r[i].pa);
        if (rs->r[i].vector && !seen && n_pa < 64) pas[n_pa++] = rs->r[i].pa;
    }
    qsort(pas, n_pa, sizeof *pas, cmp_double);
    printf("\n| Model | Method | Mode | p_c | baseline |");
    for (size_t k = 0; k < n_pa; k++) printf(" p_a %g |", pas[k]);
    printf("\n|---|---|---|---:|---:|");
    for (size_t k = 0; k < n_pa; k++) printf("---:|");
    printf("\n");
    for (size_t i = 0; i < rs->n; i++) {
        const vkv_lb_row *r = &rs->r[i];
        bool first = r->press != NULL, all;
        for (size_t j = 0; j < i && first; j++) /* one line per setting: its first row */
            first = !(rs->r[j].press && !strcmp(rs->r[j].press, r->press) && !strcmp(rs->r[j].model, r->model) &&
                      rs->r[j].compression_ratio == r->compression_ratio && rs->r[j].query_aware == r->query_aware);
        if (!first) continue;
        char model[1024], press[256];
        printf("| %s | %s | %s | %g |", vkv_printable(r->model, model, sizeof model),
               vkv_printable(r->press, press, sizeof press), r->query_aware ? "query-aware" : "query-agnostic",
               r->compression_ratio);
        double cells[65];
        for (size_t k = 0; k <= n_pa; k++) cells[k] = NAN;
        for (size_t j = 0; j < rs->n; j++) {
            const vkv_lb_row *q = &rs->r[j];
            if (!q->press || strcmp(q->press, r->press) || strcmp(q->model, r->model) ||
                q->compression_ratio != r->compression_ratio || q->query_aware != r->query_aware)
                continue;
            for (size_t k = 0; k <= n_pa; k++)
                if (k == 0 ? !q->vector : q->vector && vkv_lb_same_num(q->pa, pas[k - 1])) cells[k] = vkv_lb_row_avg(q, lo->col, &all);
        }
        for (size_t k = 0; k <= n_pa; k++) printf(isnan(cells[k]) ? " — |" : " %.2f |", cells[k]);
        printf("\n");
    }
}

static void print_table(const report *rep, layout *out_lo)
{
    const vkv_lb_rows *rs = &rep->rows;
    layout lo;
    plan_layout(rs, &lo);
    *out_lo = lo;
    print_header(rep->csv, &lo);
    for (size_t i = 0; i < rs->n; i++) print_row(rep->csv, &lo, &rs->r[i]);
    if (rep->by_pa && !rep->csv) print_pa_table(rs, &lo);
    if (!rep->csv) {
        bool any_missing = false;
        for (size_t i = 0; i < rs->n; i++)
            for (int t = 0; t < VKV_LB_N_TASKS; t++) any_missing |= lo.col[t] && !rs->r[i].n[t];
        if (any_missing) printf("\n\\* average over the tasks this row has\n");
        if (!lo.mixed_mode && rs->n && rs->r[rs->n - 1].press)
            printf("\n%s compression%s\n", rs->r[rs->n - 1].query_aware ? "Query-aware" : "Query-agnostic",
                   lo.incomplete ? "; some rows have fewer samples than others (see the warnings)" : "");
    }
    fprintf(stderr, "vkvector longbench-report: %zu lines scored%s", rep->n_lines, rep->n_bad || rep->n_dup ? "" : "\n");
    if (rep->n_dup) fprintf(stderr, ", %zu duplicates ignored", rep->n_dup);
    if (rep->n_bad) fprintf(stderr, ", %zu malformed lines skipped", rep->n_bad);
    if (rep->n_bad || rep->n_dup) fprintf(stderr, "\n");
}

/* --html: the table's averages as a chart (eval/lb_report.h), its lines
 * told apart as the table's rows are. */
static bool write_plot(const report *rep, const layout *lo)
{
    const vkv_lb_rows *rs = &rep->rows;
    char sub[1024];
    size_t k = 0, n_tasks = 0;
    for (int t = 0; t < VKV_LB_N_TASKS; t++) n_tasks += lo->col[t];
    k += (size_t)snprintf(sub, sizeof sub, "Average over %zu task%s (", n_tasks, n_tasks == 1 ? "" : "s");
    for (int t = 0, i = 0; t < VKV_LB_N_TASKS && k < sizeof sub; t++)
        if (lo->col[t]) k += (size_t)snprintf(sub + k, sizeof sub - k, "%s%s", i++ ? ", " : "", short_names[t]);
    if (k < sizeof sub)
        k += (size_t)snprintf(sub + k, sizeof sub - k, ") of 100 x the mean score%s%s%s", lo->mixed_mode ? "" : "; ",
                              lo->mixed_mode ? "" : rs->r[rs->n - 1].query_aware ? "query-aware" : "query-agnostic",
                              lo->mixed_mode ? "" : " compression");
    if (!lo->many_models && k < sizeof sub) snprintf(sub + k, sizeof sub - k, "; model %s", rs->r[0].model);
    vkv_lb_plot_opts o = {.col = lo->col, .show_model = lo->many_models, .show_pa = lo->show_pa,
                          .show_mode = lo->mixed_mode, .show_protocol = lo->mixed_protocol, .subtitle = sub};
    if (vkv_lb_write_plot(rs, &o, rep->html_path)) {
        fprintf(stderr, "vkvector longbench-report: %s\n", vkv_last_error());
        return false;
    }
    fprintf(stderr, "vkvector longbench-report: plot written to %s\n", rep->html_path);
    return true;
}

int cmd_longbench_report(int argc, char **argv)
{
    report rep = {.so = {VKV_CODE_SIM_LEVENSHTEIN}};
    const char *files[4096];
    size_t n_files = 0;
    int rc = parse_args(argc, argv, &rep, files, sizeof files / sizeof *files, &n_files);
    if (rc >= 0) return rc;
    rc = 1;
    for (size_t fi = 0; fi < n_files; fi++)
        if (!read_file(&rep, files[fi])) goto out;
    if (!rep.rows.n) {
        fprintf(stderr, "vkvector longbench-report: no scorable lines in the files given\n");
        goto out;
    }
    vkv_lb_rows_sort(&rep.rows);
    layout lo;
    print_table(&rep, &lo);
    if (rep.html_path && !write_plot(&rep, &lo)) goto out;
    rc = 0;
out:
    vkv_lb_rows_free(&rep.rows);
    strset_free(&rep.seen);
    strset_free(&rep.unknown);
    return rc;
}
