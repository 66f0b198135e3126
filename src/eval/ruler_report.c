/* RULER's report aggregation (see ruler_report.h). */
#include "eval/ruler_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/lb_jsonl.h"
#include "eval/lb_report.h"
#include "eval/score_plot.h"

const char VKV_RULER_REPORT_OOM[] = "out of host memory";

static vkv_report_setting setting_of(const vkv_ruler_setting *s)
{
    return (vkv_report_setting){s->model, s->press, s->compression_ratio, s->pa, s->vector};
}

/* The setting of a line, added when new; SIZE_MAX when out of memory. */
static size_t find_setting(vkv_ruler_report *rep, const vkv_report_setting *want)
{
    for (size_t i = 0; i < rep->n; i++) {
        const vkv_report_setting have = setting_of(&rep->s[i]);
        if (vkv_report_setting_same(&have, want)) return i;
    }
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? rep->cap * 2 : 8;
        vkv_ruler_setting *g = realloc(rep->s, sizeof *g * cap);
        if (!g) return SIZE_MAX;
        rep->s = g;
        rep->cap = cap;
    }
    vkv_ruler_setting *s = &rep->s[rep->n];
    memset(s, 0, sizeof *s);
    if (!vkv_report_setting_copy(want, &s->model, &s->press)) return SIZE_MAX;
    s->compression_ratio = want->compression_ratio;
    s->vector = want->vector;
    s->pa = want->pa;
    return rep->n++;
}

const char *vkv_ruler_report_read(vkv_ruler_report *rep, const vkv_json *r, size_t *setting, int *task,
                                  size_t *length, double *score, char *sample_key, size_t key_cap)
{
    const char *pred = json_get_str(r, "pred"), *name = json_get_str(r, "task"), *model = json_get_str(r, "model");
    const char *source = json_get_str(r, "source");
    const vkv_json *ans = vkv_json_get(r, "answer"), *len = vkv_json_get(r, "length"), *idx = vkv_json_get(r, "index");
    const vkv_json *seed = vkv_json_get(r, "seed");
    if (!pred) return "no string member \"pred\"";
    if (!name) return "no string member \"task\"";
    if ((*task = vkv_ruler_task_index(name)) < 0) return "\"task\" is not one of RULER's 13 tasks";
    if (!model) return "no string member \"model\"";
    if (!len || len->type != VKV_JSON_NUMBER || len->number < 0 || len->number != floor(len->number))
        return "\"length\" is not a whole number";
    if (!idx || idx->type != VKV_JSON_NUMBER || idx->number < 0 || idx->number != floor(idx->number))
        return "\"index\" is not a whole number";
    char **answers = NULL;
    size_t n_answers = 0;
    if (!ans || ans->type != VKV_JSON_ARRAY || !ans->n_items || !json_string_list(ans, &answers, &n_answers))
        return "\"answer\" is not a non-empty array of strings";
    *score = vkv_ruler_score(&vkv_ruler_tasks[*task], pred, (const char *const *)answers, n_answers);
    string_list_free(answers);
    if (isnan(*score)) return VKV_RULER_REPORT_OOM;
    const vkv_json *jp = vkv_json_get(r, "press"), *jc = vkv_json_get(r, "compression");
    const vkv_json *jv = vkv_json_get(r, "vector"), *ja = vkv_json_get(r, "pa");
    const char *press = jp && jp->type == VKV_JSON_STRING ? jp->string : NULL;
    bool vector = jv && jv->type == VKV_JSON_BOOL && jv->boolean;
    double p_c = press && jc && jc->type == VKV_JSON_NUMBER ? jc->number : 0;
    double pa = vector && ja && ja->type == VKV_JSON_NUMBER ? ja->number : NAN;
    const vkv_report_setting want = {model, press, p_c, pa, vector};
    if ((*setting = find_setting(rep, &want)) == SIZE_MAX) return VKV_RULER_REPORT_OOM;
    *length = (size_t)len->number;
    snprintf(sample_key, key_cap, "%s\n%zu\n%s\n%.17g\n%.17g", name, *length, source ? source : "",
             seed && seed->type == VKV_JSON_NUMBER ? seed->number : -1, idx->number);
    return NULL;
}

bool vkv_ruler_report_count(vkv_ruler_report *rep, size_t setting, int task, size_t length, double score)
{
    vkv_ruler_setting *s = &rep->s[setting];
    size_t k = 0;
    while (k < s->n_lengths && s->lengths[k] < length) k++;
    if (k == s->n_lengths || s->lengths[k] != length) {
        if (s->n_lengths == VKV_RULER_REPORT_MAX_LENGTHS) return false;
        /* keep the lengths ascending: shift the cells above k up */
        memmove(&s->lengths[k + 1], &s->lengths[k], sizeof s->lengths[0] * (s->n_lengths - k));
        memmove(&s->sum[k + 1], &s->sum[k], sizeof s->sum[0] * (s->n_lengths - k));
        memmove(&s->n[k + 1], &s->n[k], sizeof s->n[0] * (s->n_lengths - k));
        memset(&s->sum[k], 0, sizeof s->sum[k]);
        memset(&s->n[k], 0, sizeof s->n[k]);
        s->lengths[k] = length;
        s->n_lengths++;
    }
    s->sum[k][task] += score;
    s->n[k][task]++;
    return true;
}

static int setting_cmp(const void *a, const void *b)
{
    const vkv_report_setting x = setting_of(a), y = setting_of(b);
    return vkv_report_setting_cmp(&x, &y);
}

void vkv_ruler_report_sort(vkv_ruler_report *rep)
{
    if (rep->n) qsort(rep->s, rep->n, sizeof *rep->s, setting_cmp);
}

void vkv_ruler_report_free(vkv_ruler_report *rep)
{
    for (size_t i = 0; i < rep->n; i++) {
        free(rep->s[i].model);
        free(rep->s[i].press);
    }
    free(rep->s);
    memset(rep, 0, sizeof *rep);
}

void vkv_ruler_averages(const vkv_ruler_report *rep, vkv_ruler_average *out)
{
    for (size_t i = 0; i < rep->n; i++) {
        const vkv_ruler_setting *s = &rep->s[i];
        double sum = 0;
        size_t cells = 0;
        for (size_t k = 0; k < s->n_lengths; k++)
            for (int t = 0; t < VKV_RULER_N_TASKS; t++)
                if (s->n[k][t]) {
                    sum += 100.0 * s->sum[k][t] / (double)s->n[k][t];
                    cells++;
                }
        out[i] = (vkv_ruler_average){.model = s->model, .press = s->press, .compression_ratio = s->compression_ratio,
                                     .pa = s->pa, .vector = s->vector, .score = cells ? sum / (double)cells : NAN,
                                     .n_cells = cells};
    }
}

/* The plot's callbacks (eval/score_plot.h) over the averages. */
typedef struct ruler_plot {
    const vkv_ruler_average *avg;
    bool many_models; /* the model starts each label */
} ruler_plot;

/* Two averages lie on one line when model, press, VECTOR and p_a agree. */
static bool ruler_same_line(const void *user, size_t i, size_t j)
{
    const vkv_ruler_average *a = &((const ruler_plot *)user)->avg[i], *b = &((const ruler_plot *)user)->avg[j];
    return !strcmp(a->model, b->model) && !a->press == !b->press && (!a->press || !strcmp(a->press, b->press)) &&
           a->vector == b->vector && vkv_lb_same_num(a->pa, b->pa);
}

static void ruler_describe(const void *user, size_t i, char *label, char *group, size_t cap, bool *vector,
                           bool *baseline)
{
    const ruler_plot *p = user;
    const vkv_ruler_average *a = &p->avg[i];
    char method[256];
    if (!a->press) snprintf(method, sizeof method, "full cache");
    else if (a->vector && !isnan(a->pa)) snprintf(method, sizeof method, "%s + VECTOR (p_a %g)", a->press, a->pa);
    else snprintf(method, sizeof method, "%s%s", a->press, a->vector ? " + VECTOR" : "");
    snprintf(label, cap, "%s%s%s", p->many_models ? a->model : "", p->many_models ? " · " : "", method);
    snprintf(group, cap, "%s\n%s", a->model, a->press ? a->press : "");
    *vector = a->vector;
    *baseline = !a->press;
}

static void ruler_place(const void *user, size_t i, double *x, double *y)
{
    const vkv_ruler_average *a = &((const ruler_plot *)user)->avg[i];
    *x = a->press ? a->compression_ratio : 0;
    *y = a->score;
}

vkv_status vkv_ruler_write_plot(const vkv_ruler_average *avg, size_t n, const char *subtitle, const char *path)
{
    ruler_plot user = {avg, false};
    for (size_t i = 1; i < n; i++) user.many_models |= strcmp(avg[i].model, avg[0].model) != 0;
    const vkv_score_points pts = {n, &user, ruler_same_line, ruler_describe, ruler_place};
    const vkv_score_plot plot = {.title = "RULER: average score against the compression ratio", .subtitle = subtitle,
                                 .x_label = "compression ratio p_c", .y_label = "average score (0-100)"};
    return vkv_score_plot_write_points(path, plot, &pts);
}
