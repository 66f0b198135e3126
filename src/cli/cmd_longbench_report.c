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
#include "cli/lb_jsonl.h"
#include "cli/strset.h"
#include "core/json.h"
#include "eval/metrics.h"
#include "kv/kv_counts.h"

static void report_usage(void)
{
    printf("usage: vkvector longbench-report [--csv] [--strict] [--code-sim levenshtein|difflib] FILE...\n\n"
           "Scores LongBench result files (vkvector longbench --out, or LongBench's pred/<model>/<task>.jsonl) and\n"
           "prints a Markdown table: one row per model, method and p_c; one column per task (100 x the mean score,\n"
           "2 decimals) and the average over the tasks present. Several files are merged (shards of one run);\n"
           "a sample seen twice for the same row counts once.\n\n"
           "  --csv                 CSV instead of Markdown\n"
           "  --strict              a malformed line is fatal (default: reported and skipped)\n"
           "  --code-sim KIND       lcc / repobench-p similarity: levenshtein (fuzzywuzzy with python-Levenshtein,\n"
           "                        default) or difflib (fuzzywuzzy's pure-Python fallback)\n");
}

/* Short column names (LongBench's own abbreviations). */
static const char *const short_names[VKV_LB_N_TASKS] = {
    "NrtvQA", "Qasper", "MF-en", "HotpotQA", "2WikiMQA", "Musique", "GovReport", "QMSum",
    "MultiNews", "TREC", "TriviaQA", "SAMSum", "PCount", "PRe", "Lcc", "RB-P",
};

typedef struct row {
    char *model, *press;      /* press NULL: full cache */
    double pc, pa;            /* pa NaN: no VECTOR */
    bool vector, query_aware;
    double sum[VKV_LB_N_TASKS];
    size_t n[VKV_LB_N_TASKS];
} row;

typedef struct rows {
    row *r;
    size_t n, cap;
} rows;

static bool same_num(double a, double b) { return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-6 * (1 + fabs(a)); }

static row *find_row(rows *rs, const char *model, const char *press, double pc, bool vector, double pa, bool qa)
{
    for (size_t i = 0; i < rs->n; i++) {
        row *r = &rs->r[i];
        if (!strcmp(r->model, model) && ((!r->press && !press) || (r->press && press && !strcmp(r->press, press))) &&
            same_num(r->pc, pc) && r->vector == vector && same_num(r->pa, pa) && r->query_aware == qa)
            return r;
    }
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 16;
        row *g = realloc(rs->r, cap * sizeof *g);
        if (!g) return NULL;
        rs->r = g;
        rs->cap = cap;
    }
    row *r = &rs->r[rs->n];
    memset(r, 0, sizeof *r);
    r->model = strdup(model);
    r->press = press ? strdup(press) : NULL;
    if (!r->model || (press && !r->press)) {
        free(r->model);
        free(r->press);
        return NULL;
    }
    r->pc = pc;
    r->vector = vector;
    r->pa = pa;
    r->query_aware = qa;
    rs->n++;
    return r;
}

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    if (c) return c;
    if (!x->press != !y->press) return x->press ? 1 : -1; /* the full cache first */
    if (x->pc != y->pc) return x->pc < y->pc ? -1 : 1;
    if (x->press && (c = strcmp(x->press, y->press))) return c;
    if (x->vector != y->vector) return x->vector ? 1 : -1;
    if (!same_num(x->pa, y->pa)) return isnan(x->pa) ? -1 : isnan(y->pa) ? 1 : (x->pa < y->pa ? -1 : 1);
    return (int)x->query_aware - (int)y->query_aware;
}

/* The model of a LongBench pred file: its directory's name. */
static void model_from_path(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, n, "?");
        return;
    }
    const char *p = slash;
    while (p > path && p[-1] != '/') p--;
    snprintf(out, n, "%.*s", (int)(slash - p), p);
    if (!*out) snprintf(out, n, "?");
}

/* The task of a LongBench pred file: its name without .jsonl. */
static void task_from_path(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && (!strcmp(dot, ".jsonl") || !strcmp(dot, ".json"))) *dot = 0;
}

static void method_label(const row *r, bool show_pa, char *buf, size_t n)
{
    if (!r->press) {
        snprintf(buf, n, "full");
        return;
    }
    int k = snprintf(buf, n, "%s%s", r->press, r->vector ? " + VECTOR" : "");
    if (show_pa && r->vector && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " (p_a %g)", r->pa);
}

int cmd_longbench_report(int argc, char **argv)
{
    bool csv = false, strict = false;
    vkv_lb_score_opts so = {VKV_CODE_SIM_LEVENSHTEIN};
    const char *files[4096];
    size_t n_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { report_usage(); return 0; }
        else if (!strcmp(a, "--csv")) csv = true;
        else if (!strcmp(a, "--strict")) strict = true;
        else if (!strcmp(a, "--code-sim")) {
            const char *v = cli_flag_value("longbench-report", argc, argv, &i);
            if (!v) return 2;
            if (!strcmp(v, "levenshtein")) so.code_sim = VKV_CODE_SIM_LEVENSHTEIN;
            else if (!strcmp(v, "difflib")) so.code_sim = VKV_CODE_SIM_DIFFLIB;
            else return cli_usage_error("longbench-report", "--code-sim wants levenshtein or difflib, got '%s'", v);
        } else if (a[0] == '-' && a[1]) return cli_usage_error("longbench-report", "unknown option '%s'", a);
        else {
            if (n_files == sizeof files / sizeof *files) return cli_usage_error("longbench-report", "too many files");
            files[n_files++] = a;
        }
    }
    if (!n_files) return cli_usage_error("longbench-report", "give one or more result files");

    rows rs = {0};
    strset seen = {0};
    int rc = 1;
    size_t n_bad = 0, n_dup = 0, n_lines = 0;
    strset unknown = {0};
    for (size_t fi = 0; fi < n_files; fi++) {
        jsonl_reader rd;
        if (!jsonl_open(&rd, files[fi])) {
            fprintf(stderr, "vkvector longbench-report: %s\n", vkv_last_error());
            goto out;
        }
        char file_task[256], file_model[256];
        task_from_path(files[fi], file_task, sizeof file_task);
        model_from_path(files[fi], file_model, sizeof file_model);
        vkv_json_doc *doc;
        vkv_status st;
        while (jsonl_next(&rd, &doc, &st)) {
            const vkv_json *r = doc ? vkv_json_root(doc) : NULL;
            const char *why = st ? vkv_last_error() : NULL;
            const char *pred = r ? json_get_str(r, "pred") : NULL;
            char **answers = NULL, **classes = NULL;
            size_t na = 0, nc = 0;
            if (!why && !pred) why = "no string member \"pred\"";
            const vkv_json *ans = r ? vkv_json_get(r, "answers") : NULL;
            if (!why && (!ans || ans->type != VKV_JSON_ARRAY || !json_string_list(ans, &answers, &na)))
                why = "\"answers\" is not an array of strings";
            if (!why && !json_string_list(vkv_json_get(r, "all_classes"), &classes, &nc))
                why = "\"all_classes\" is neither null nor an array of strings";
            const char *ds = r ? json_get_str(r, "dataset") : NULL;
            if (!ds) ds = file_task;
            const vkv_lb_task *task = vkv_longbench_task(ds);
            if (!why && !task) {
                if (strset_add(&unknown, ds, NULL))
                    fprintf(stderr, "vkvector longbench-report: %s:%zu: unknown task '%s' (not one of the 16 English "
                                    "LongBench tasks): its lines are skipped\n", files[fi], rd.line_no, ds);
                string_list_free(answers);
                string_list_free(classes);
                vkv_json_free(doc);
                continue;
            }
            /* run settings (absent in LongBench's own files: the full cache) */
            const vkv_json *jp = r ? vkv_json_get(r, "press") : NULL, *jc = r ? vkv_json_get(r, "compression") : NULL;
            const vkv_json *jv = r ? vkv_json_get(r, "vector") : NULL, *ja = r ? vkv_json_get(r, "pa") : NULL;
            const vkv_json *jq = r ? vkv_json_get(r, "query_aware") : NULL;
            const char *model = r ? json_get_str(r, "model") : NULL;
            if (!model) model = file_model;
            const char *press = jp && jp->type == VKV_JSON_STRING ? jp->string : NULL;
            double pc = jc && jc->type == VKV_JSON_NUMBER ? jc->number : 0;
            bool vector = jv && jv->type == VKV_JSON_BOOL && jv->boolean;
            double pa = vector && ja && ja->type == VKV_JSON_NUMBER ? ja->number : NAN;
            bool qa = jq && jq->type == VKV_JSON_BOOL && jq->boolean;
            if (!press) pc = 0;
            if (why) {
                fprintf(stderr, "vkvector longbench-report: %s:%zu: malformed line %s (%s)\n", files[fi], rd.line_no,
                        strict ? "" : "skipped", why);
                string_list_free(answers);
                string_list_free(classes);
                vkv_json_free(doc);
                n_bad++;
                if (strict) {
                    jsonl_close(&rd);
                    goto out;
                }
                continue;
            }
            n_lines++;
            row *rw = find_row(&rs, model, press, pc, vector, pa, qa);
            if (!rw) {
                fprintf(stderr, "vkvector longbench-report: out of host memory\n");
                jsonl_close(&rd);
                goto out;
            }
            /* the same sample of the same row twice (shards given twice, a file
             * concatenated from overlapping runs) counts once */
            const char *id = json_get_str(r, "_id");
            bool dup = false;
            if (id) {
                char key[1024];
                snprintf(key, sizeof key, "%zu\n%s\n%s", (size_t)(rw - rs.r), task->name, id);
                bool oom = false;
                dup = !strset_add(&seen, key, &oom);
                if (oom) {
                    fprintf(stderr, "vkvector longbench-report: out of host memory\n");
                    jsonl_close(&rd);
                    goto out;
                }
            }
            if (dup) n_dup++;
            else {
                int t = (int)(task - vkv_lb_tasks);
                rw->sum[t] += vkv_longbench_score(task, pred, (const char *const *)answers, na,
                                                  (const char *const *)classes, nc, &so);
                rw->n[t]++;
            }
            string_list_free(answers);
            string_list_free(classes);
            vkv_json_free(doc);
        }
        bool unreadable = rd.error; /* the rest of the file cannot be read: no report from part of it */
        jsonl_close(&rd);
        if (unreadable) {
            fprintf(stderr, "vkvector longbench-report: %s\n", vkv_last_error());
            goto out;
        }
    }
    if (!rs.n) {
        fprintf(stderr, "vkvector longbench-report: no scorable lines in the files given\n");
        goto out;
    }
    qsort(rs.r, rs.n, sizeof *rs.r, row_cmp);

    /* columns: tasks with data in some row; extra columns when rows differ */
    bool col[VKV_LB_N_TASKS] = {0};
    size_t max_n[VKV_LB_N_TASKS] = {0};
    bool many_models = false, mixed_mode = false, show_pa = false;
    for (size_t i = 0; i < rs.n; i++) {
        for (int t = 0; t < VKV_LB_N_TASKS; t++) {
            if (rs.r[i].n[t]) col[t] = true;
            if (rs.r[i].n[t] > max_n[t]) max_n[t] = rs.r[i].n[t];
        }
        if (strcmp(rs.r[i].model, rs.r[0].model)) many_models = true;
        if (rs.r[i].query_aware != rs.r[0].query_aware) mixed_mode = true;
        if (rs.r[i].vector && !same_num(rs.r[i].pa, vkv_kv_default_pa(rs.r[i].pc))) show_pa = true;
    }
    bool incomplete = false;
    for (size_t i = 0; i < rs.n; i++) {
        char m[256], list[2048] = "";
        size_t k = 0;
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (col[t] && rs.r[i].n[t] && rs.r[i].n[t] < max_n[t] && k < sizeof list)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s %zu/%zu", k ? ", " : "", vkv_lb_tasks[t].name,
                                      rs.r[i].n[t], max_n[t]);
        if (!k) continue;
        method_label(&rs.r[i], show_pa, m, sizeof m);
        fprintf(stderr, "vkvector longbench-report: %s, %s, p_c %g has fewer samples than other rows: %s\n",
                rs.r[i].model, m, rs.r[i].pc, list);
        incomplete = true;
    }

    if (csv) {
        printf("model,press,vector,pa,query_aware,compression");
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (col[t]) printf(",%s", vkv_lb_tasks[t].name);
        printf(",avg\n");
    } else {
        printf("|%s Method |%s p_c |", many_models ? " Model |" : "", mixed_mode ? " Mode |" : "");
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (col[t]) printf(" %s |", short_names[t]);
        printf(" Avg |\n|%s---|%s---:|", many_models ? "---|" : "", mixed_mode ? "---|" : "");
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (col[t]) printf("---:|");
        printf("---:|\n");
    }
    for (size_t i = 0; i < rs.n; i++) {
        const row *r = &rs.r[i];
        double avg = 0;
        size_t n_avg = 0;
        bool all = true;
        for (int t = 0; t < VKV_LB_N_TASKS; t++)
            if (col[t]) {
                if (r->n[t]) {
                    avg += 100.0 * r->sum[t] / r->n[t];
                    n_avg++;
                } else all = false;
            }
        avg = n_avg ? avg / n_avg : NAN;
        if (csv) {
            printf("%s,%s,%s,", r->model, r->press ? r->press : "", r->vector ? "true" : "false");
            if (!isnan(r->pa)) printf("%.6g", r->pa);
            printf(",%s,%g", r->query_aware ? "true" : "false", r->pc);
            for (int t = 0; t < VKV_LB_N_TASKS; t++)
                if (col[t]) {
                    if (r->n[t]) printf(",%.2f", 100.0 * r->sum[t] / r->n[t]);
                    else printf(",");
                }
            printf(",%.2f\n", avg);
        } else {
            char m[256];
            method_label(r, show_pa, m, sizeof m);
            printf("|");
            if (many_models) printf(" %s |", r->model);
            printf(" %s |", m);
            if (mixed_mode) printf(" %s |", r->press ? (r->query_aware ? "query-aware" : "query-agnostic") : "");
            if (r->press) printf(" %g |", r->pc);
            else printf(" 0 |");
            for (int t = 0; t < VKV_LB_N_TASKS; t++)
                if (col[t]) {
                    if (r->n[t]) printf(" %.2f |", 100.0 * r->sum[t] / r->n[t]);
                    else printf(" — |");
                }
            printf(" %.2f%s |\n", avg, all ? "" : "*");
        }
    }
    if (!csv) {
        bool any_missing = false;
        for (size_t i = 0; i < rs.n; i++)
            for (int t = 0; t < VKV_LB_N_TASKS; t++) any_missing |= col[t] && !rs.r[i].n[t];
        if (any_missing) printf("\n\\* average over the tasks this row has\n");
        if (!mixed_mode && rs.n && rs.r[rs.n - 1].press)
            printf("\n%s compression%s\n", rs.r[rs.n - 1].query_aware ? "Query-aware" : "Query-agnostic",
                   incomplete ? "; some rows have fewer samples than others (see the warnings)" : "");
    }
    fprintf(stderr, "vkvector longbench-report: %zu lines scored%s", n_lines, n_bad || n_dup ? "" : "\n");
    if (n_dup) fprintf(stderr, ", %zu duplicates ignored", n_dup);
    if (n_bad) fprintf(stderr, ", %zu malformed lines skipped", n_bad);
    if (n_bad || n_dup) fprintf(stderr, "\n");
    rc = 0;
out:
    for (size_t i = 0; i < rs.n; i++) {
        free(rs.r[i].model);
        free(rs.r[i].press);
    }
    free(rs.r);
    strset_free(&seen);
    strset_free(&unknown);
    return rc;
}
