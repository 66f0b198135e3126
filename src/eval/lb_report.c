#include "eval/lb_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/lb_jsonl.h"
#include "eval/score_plot.h"

bool vkv_lb_same_num(double a, double b) { return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-6 * (1 + fabs(a)); }

const char *vkv_lb_result_read(const vkv_json *r, const char *file_task, const char *file_model, vkv_lb_result *out)
{
    memset(out, 0, sizeof *out);
    const char *why = NULL;
    out->pred = json_get_str(r, "pred");
    if (!out->pred) why = "no string member \"pred\"";
    const vkv_json *ans = vkv_json_get(r, "answers");
    if (!why && (!ans || ans->type != VKV_JSON_ARRAY || !json_string_list(ans, &out->answers, &out->n_answers)))
        why = "\"answers\" is not an array of strings";
    if (!why && !json_string_list(vkv_json_get(r, "all_classes"), &out->classes, &out->n_classes))
        why = "\"all_classes\" is neither null nor an array of strings";
    out->dataset = json_get_str(r, "dataset");
    if (!out->dataset) out->dataset = file_task;
    out->task = vkv_longbench_task(out->dataset);
    /* run settings (absent in LongBench's own files: the full cache) */
    const vkv_json *jp = vkv_json_get(r, "press"), *jc = vkv_json_get(r, "compression");
    const vkv_json *jv = vkv_json_get(r, "vector"), *ja = vkv_json_get(r, "pa");
    const vkv_json *jq = vkv_json_get(r, "query_aware");
    out->model = json_get_str(r, "model");
    if (!out->model) out->model = file_model;
    out->press = jp && jp->type == VKV_JSON_STRING ? jp->string : NULL;
    out->compression_ratio = out->press && jc && jc->type == VKV_JSON_NUMBER ? jc->number : 0;
    out->vector = jv && jv->type == VKV_JSON_BOOL && jv->boolean;
    out->pa = out->vector && ja && ja->type == VKV_JSON_NUMBER ? ja->number : NAN;
    out->query_aware = jq && jq->type == VKV_JSON_BOOL && jq->boolean;
    const char *proto = json_get_str(r, "protocol");
    out->kvpress = proto && !strcmp(proto, "kvpress");
    out->id = json_get_str(r, "_id");
    return why;
}

void vkv_lb_result_free(vkv_lb_result *r)
{
    string_list_free(r->answers);
    string_list_free(r->classes);
    r->answers = r->classes = NULL;
}

void vkv_lb_model_from_path(const char *path, char *out, size_t n)
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

void vkv_lb_task_from_path(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && (!strcmp(dot, ".jsonl") || !strcmp(dot, ".json"))) *dot = 0;
}

static vkv_report_setting row_setting(const vkv_lb_row *r)
{
    return (vkv_report_setting){r->model, r->press, r->compression_ratio, r->pa, r->vector};
}

bool vkv_report_setting_same(const vkv_report_setting *a, const vkv_report_setting *b)
{
    return !strcmp(a->model, b->model) && !a->press == !b->press && (!a->press || !strcmp(a->press, b->press)) &&
           vkv_lb_same_num(a->compression_ratio, b->compression_ratio) && a->vector == b->vector &&
           vkv_lb_same_num(a->pa, b->pa);
}

int vkv_report_setting_cmp(const vkv_report_setting *x, const vkv_report_setting *y)
{
    int c = strcmp(x->model, y->model);
    if (c) return c;
    if (!x->press != !y->press) return x->press ? 1 : -1; /* the full cache first */
    if (x->compression_ratio != y->compression_ratio) return x->compression_ratio < y->compression_ratio ? -1 : 1;
    if (x->press && (c = strcmp(x->press, y->press))) return c;
    if (x->vector != y->vector) return x->vector ? 1 : -1;
    if (!vkv_lb_same_num(x->pa, y->pa)) return isnan(x->pa) ? -1 : isnan(y->pa) ? 1 : (x->pa < y->pa ? -1 : 1);
    return 0;
}

bool vkv_report_setting_copy(const vkv_report_setting *s, char **model, char **press)
{
    *model = strdup(s->model);
    *press = s->press ? strdup(s->press) : NULL;
    if (*model && (!s->press || *press)) return true;
    free(*model);
    free(*press);
    return false;
}

vkv_lb_row *vkv_lb_rows_find(vkv_lb_rows *rs, const vkv_lb_result *res)
{
    const vkv_report_setting want = {res->model, res->press, res->compression_ratio, res->pa, res->vector};
    for (size_t i = 0; i < rs->n; i++) {
        vkv_lb_row *r = &rs->r[i];
        const vkv_report_setting have = row_setting(r);
        if (vkv_report_setting_same(&have, &want) && r->query_aware == res->query_aware && r->kvpress == res->kvpress)
            return r;
    }
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 16;
        vkv_lb_row *g = realloc(rs->r, cap * sizeof *g);
        if (!g) return NULL;
        rs->r = g;
        rs->cap = cap;
    }
    vkv_lb_row *r = &rs->r[rs->n];
    memset(r, 0, sizeof *r);
    if (!vkv_report_setting_copy(&want, &r->model, &r->press)) return NULL;
    r->compression_ratio = res->compression_ratio;
    r->vector = res->vector;
    r->pa = res->pa;
    r->query_aware = res->query_aware;
    r->kvpress = res->kvpress;
    rs->n++;
    return r;
}

void vkv_lb_row_add(vkv_lb_row *row, const vkv_lb_result *res, const vkv_lb_score_opts *opts)
{
    int t = (int)(res->task - vkv_lb_tasks);
    vkv_lb_score_opts o = opts ? *opts : (vkv_lb_score_opts){.code_sim = VKV_CODE_SIM_LEVENSHTEIN};
    o.lstrip = res->kvpress;
    row->sum[t] += vkv_longbench_score(res->task, res->pred, (const char *const *)res->answers, res->n_answers,
                                       (const char *const *)res->classes, res->n_classes, &o);
    row->n[t]++;
}

static int row_cmp(const void *a, const void *b)
{
    const vkv_lb_row *x = a, *y = b;
    const vkv_report_setting sx = row_setting(x), sy = row_setting(y);
    int c = vkv_report_setting_cmp(&sx, &sy);
    if (c) return c;
    if (x->query_aware != y->query_aware) return (int)x->query_aware - (int)y->query_aware;
    return (int)x->kvpress - (int)y->kvpress;
}

void vkv_lb_rows_sort(vkv_lb_rows *rs) { qsort(rs->r, rs->n, sizeof *rs->r, row_cmp); }

void vkv_lb_rows_free(vkv_lb_rows *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->r[i].model);
        free(rs->r[i].press);
    }
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

void vkv_lb_method_label(const vkv_lb_row *r, bool show_pa, char *buf, size_t n)
{
    if (!r->press) {
        snprintf(buf, n, "full");
        return;
    }
    int k = snprintf(buf, n, "%s%s", r->press, r->vector ? " + VECTOR" : "");
    if (show_pa && r->vector && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " (p_a %g)", r->pa);
}

double vkv_lb_row_avg(const vkv_lb_row *r, const bool col[VKV_LB_N_TASKS], bool *all)
{
    double avg = 0;
    size_t n_avg = 0;
    *all = true;
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (col[t]) {
            if (r->n[t]) {
                avg += 100.0 * r->sum[t] / r->n[t];
                n_avg++;
            } else *all = false;
        }
    return n_avg ? avg / n_avg : NAN;
}

/* Rows on one line of the plot: the same settings but for p_c, and for p_a
 * when p_a is not shown (each p_c's default then). */
static bool same_line(const vkv_lb_row *a, const vkv_lb_row *b, const vkv_lb_plot_opts *o)
{
    if (strcmp(a->model, b->model) || !a->press != !b->press || a->kvpress != b->kvpress) return false;
    if (a->vector != b->vector || a->query_aware != b->query_aware) return false;
    if (!a->press) return vkv_lb_same_num(a->pa, b->pa); /* every setting: one point each, at 0 */
    return !strcmp(a->press, b->press) && (!o->show_pa || vkv_lb_same_num(a->pa, b->pa));
}

/* A line's legend: [model · ]method[, mode][, protocol]. */
static void line_label(const vkv_lb_row *r, const vkv_lb_plot_opts *o, char *buf, size_t n)
{
    char m[256];
    vkv_lb_method_label(r, o->show_pa, m, sizeof m);
    snprintf(buf, n, "%s%s%s%s%s", o->show_model ? r->model : "", o->show_model ? " · " : "", r->press ? m : "full cache",
             o->show_mode && r->press ? (r->query_aware ? ", query-aware" : ", query-agnostic") : "",
             o->show_protocol ? (r->kvpress ? ", kvpress protocol" : ", LongBench protocol") : "");
}

/* The plot's callbacks (eval/score_plot.h) over the sorted rows. */
typedef struct lb_plot {
    const vkv_lb_rows *rs;
    const vkv_lb_plot_opts *o;
} lb_plot;

static bool lb_same_line(const void *user, size_t i, size_t j)
{
    const lb_plot *p = user;
    return same_line(&p->rs->r[i], &p->rs->r[j], p->o);
}

static void lb_describe(const void *user, size_t i, char *label, char *group, size_t cap, bool *vector, bool *baseline)
{
    const lb_plot *p = user;
    const vkv_lb_row *r = &p->rs->r[i];
    line_label(r, p->o, label, cap);
    snprintf(group, cap, "%s\n%s", r->model, r->press ? r->press : "");
    *vector = r->vector;
    *baseline = !r->press;
}

static void lb_place(const void *user, size_t i, double *x, double *y)
{
    const lb_plot *p = user;
    bool all;
    *x = p->rs->r[i].press ? p->rs->r[i].compression_ratio : 0;
    *y = vkv_lb_row_avg(&p->rs->r[i], p->o->col, &all);
}

vkv_status vkv_lb_write_plot(const vkv_lb_rows *rs, const vkv_lb_plot_opts *o, const char *path)
{
    /* the lines in the rows' order (the full cache first), each line's points
     * in that order (p_c ascending) */
    const lb_plot user = {rs, o};
    const vkv_score_points pts = {rs->n, &user, lb_same_line, lb_describe, lb_place};
    const vkv_score_plot plot = {.title = "LongBench: average score against the compression ratio",
                                 .subtitle = o->subtitle, .x_label = "compression ratio p_c",
                                 .y_label = "average score (0-100)"};
    return vkv_score_plot_write_points(path, plot, &pts);
}
