#include "eval/lb_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/lb_jsonl.h"

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
