/* The aggregation behind `vkvector ruler-report`: result lines of
 * `vkvector ruler` re-scored from pred and answer, summed per setting
 * (model, press, p_c, VECTOR, p_a) and per (task, length), and the average
 * per setting in one array (what a score plot takes: vkv_ruler_averages). */
#ifndef VKV_EVAL_RULER_REPORT_H
#define VKV_EVAL_RULER_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "core/status.h"
#include "eval/ruler.h"

#define VKV_RULER_REPORT_MAX_LENGTHS 64

typedef struct vkv_ruler_setting {
    char *model, *press;          /* press NULL: the full cache */
    double compression_ratio, pa; /* pa NaN: no VECTOR */
    bool vector;
    size_t lengths[VKV_RULER_REPORT_MAX_LENGTHS], n_lengths; /* ascending */
    double sum[VKV_RULER_REPORT_MAX_LENGTHS][VKV_RULER_N_TASKS];
    size_t n[VKV_RULER_REPORT_MAX_LENGTHS][VKV_RULER_N_TASKS];
} vkv_ruler_setting;

typedef struct vkv_ruler_report {
    vkv_ruler_setting *s;
    size_t n, cap;
} vkv_ruler_report;

/* Reads one result line: its setting (added when new), task, length, and
 * its score re-scored from "pred" and "answer" (so a metric fix re-scores old
 * runs); sample_key (key_cap >= 160) gets the sample's identity in its
 * setting ("task\nlength\nsource\nseed\nindex"), for the caller's duplicate
 * check. NULL, or why the line is malformed; VKV_RULER_REPORT_OOM when out
 * of memory. */
extern const char VKV_RULER_REPORT_OOM[];
const char *vkv_ruler_report_read(vkv_ruler_report *rep, const vkv_json *line, size_t *setting, int *task,
                                  size_t *length, double *score, char *sample_key, size_t key_cap);
/* Adds a sample's score to its setting's (task, length) cell; false past
 * VKV_RULER_REPORT_MAX_LENGTHS lengths. */
bool vkv_ruler_report_count(vkv_ruler_report *rep, size_t setting, int task, size_t length, double score);
/* The report's order: by model, the full cache first, then p_c, press, VECTOR, p_a. */
void vkv_ruler_report_sort(vkv_ruler_report *rep);
void vkv_ruler_report_free(vkv_ruler_report *rep);

/* One setting's average: the mean over its (task, length) cells of 100 x
 * their mean score. */
typedef struct vkv_ruler_average {
    const char *model, *press;    /* borrowed from the report */
    double compression_ratio, pa;
    bool vector;
    double score;
    size_t n_cells;
} vkv_ruler_average;
/* The average of every setting, in the report's order, into out[rep->n]. */
void vkv_ruler_averages(const vkv_ruler_report *rep, vkv_ruler_average *out);

/* `ruler-report --html`: the averages (avg[n], the report's order) against
 * p_c as eval/score_plot.h's chart, the leaderboard's: a line per model,
 * press and VECTOR (and p_a), a press and its + VECTOR in one colour, the full
 * cache of each model as a baseline point at p_c 0; subtitle under the
 * title. VKV_ERR_IO naming path, VKV_ERR_OOM, or the plot's refusal. */
vkv_status vkv_ruler_write_plot(const vkv_ruler_average *avg, size_t n, const char *subtitle, const char *path);

#endif
