/* The aggregation behind `vkvector longbench-report`: a result line's fields
 * and run settings, and the rows of the report (one per model, method and
 * compression ratio), each a score sum and count per task. */
#ifndef VKV_EVAL_LB_REPORT_H
#define VKV_EVAL_LB_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "core/status.h"
#include "eval/metrics.h"

/* One result line: vkvector's own, or a line of LongBench's
 * pred/<model>/<task>.jsonl (no run settings: the full cache). */
typedef struct vkv_lb_result {
    const char *pred, *dataset, *model, *press, *id; /* point into the line's JSON */
    char **answers, **classes;                       /* NULL-terminated copies */
    size_t n_answers, n_classes;
    const vkv_lb_task *task;                         /* NULL: not one of the 16 English tasks */
    double compression_ratio, pa;                    /* pa NaN: no VECTOR; compression_ratio 0 without a press */
    bool vector, query_aware;
    bool kvpress;                                    /* made with kvpress's protocol (scored as kvpress does) */
} vkv_lb_result;

/* Reads a line's fields; the dataset, when absent, is file_task and the model
 * file_model. Returns NULL, or why the line is malformed. Free with
 * vkv_lb_result_free either way. */
const char *vkv_lb_result_read(const vkv_json *line, const char *file_task, const char *file_model,
                               vkv_lb_result *out);
void vkv_lb_result_free(vkv_lb_result *r);

/* The model and task of a LongBench pred file: its directory's name ("?" if
 * none) and its name without .jsonl. */
void vkv_lb_model_from_path(const char *path, char *out, size_t n);
void vkv_lb_task_from_path(const char *path, char *out, size_t n);

typedef struct vkv_lb_row {
    char *model, *press;      /* press NULL: full cache */
    double compression_ratio, pa;            /* pa NaN: no VECTOR */
    bool vector, query_aware, kvpress;
    double sum[VKV_LB_N_TASKS];
    size_t n[VKV_LB_N_TASKS];
} vkv_lb_row;

typedef struct vkv_lb_rows {
    vkv_lb_row *r;
    size_t n, cap;
} vkv_lb_rows;

/* The row of a result's run settings, added when new; NULL when out of memory. */
vkv_lb_row *vkv_lb_rows_find(vkv_lb_rows *rs, const vkv_lb_result *res);
/* Adds a sample's score to its row's task. */
void vkv_lb_row_add(vkv_lb_row *row, const vkv_lb_result *res, const vkv_lb_score_opts *opts);
/* The report's order: by model, the full cache first, then p_c, press, VECTOR, p_a, mode. */
void vkv_lb_rows_sort(vkv_lb_rows *rs);
void vkv_lb_rows_free(vkv_lb_rows *rs);

/* Two settings read from JSON are the same (NaN equals NaN). */
bool vkv_lb_same_num(double a, double b);

/* A row's method as the report names it: "full", "snapkv", "snapkv + VECTOR",
 * that with " (p_a 0.1)" when show_pa. */
void vkv_lb_method_label(const vkv_lb_row *r, bool show_pa, char *buf, size_t n);

/* A row's average over the tasks marked in col: the mean of 100 x each
 * task's mean score over the tasks it has (NaN: none); *all: it has them all. */
double vkv_lb_row_avg(const vkv_lb_row *r, const bool col[VKV_LB_N_TASKS], bool *all);

/* The report's plot (longbench-report --html): what the table shows, as
 * eval/score_plot.h's chart. */
typedef struct vkv_lb_plot_opts {
    const bool *col;        /* [VKV_LB_N_TASKS] the tasks averaged, the table's columns */
    bool show_model;        /* rows of several models: the model starts each label */
    bool show_pa;           /* some VECTOR row has a p_a other than its p_c's default: a line per p_a */
    bool show_mode;         /* both query-aware and query-agnostic rows: the mode ends each label */
    bool show_protocol;     /* both protocols: the protocol too */
    const char *subtitle;   /* the line under the title */
} vkv_lb_plot_opts;

/* Writes the average score against p_c to path: a line per model, press and
 * VECTOR (and p_a, mode, protocol as o says), the press and its + VECTOR in
 * one colour; the full cache of each model (and protocol) as baseline points
 * at p_c 0. rs is sorted (vkv_lb_rows_sort). VKV_ERR_IO naming path, or
 * VKV_ERR_OOM. */
vkv_status vkv_lb_write_plot(const vkv_lb_rows *rs, const vkv_lb_plot_opts *o, const char *path);

/* A run setting as the reports group by it (LongBench's and RULER's): a view
 * of a row's members. */
typedef struct vkv_report_setting {
    const char *model, *press;    /* press NULL: the full cache */
    double compression_ratio, pa; /* pa NaN: no VECTOR */
    bool vector;
} vkv_report_setting;
bool vkv_report_setting_same(const vkv_report_setting *a, const vkv_report_setting *b);
/* The reports' order: by model, the full cache first, then p_c, press, VECTOR, p_a. */
int vkv_report_setting_cmp(const vkv_report_setting *a, const vkv_report_setting *b);
/* Copies of the setting's model and press (press NULL stays NULL); false
 * (nothing kept) when out of memory. */
bool vkv_report_setting_copy(const vkv_report_setting *s, char **model, char **press);

#endif
