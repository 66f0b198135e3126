/* The leaderboard's chart (longbench-report --html, ruler-report --html): one
 * self-contained HTML page holding an SVG line chart of a score (y) against
 * the compression ratio (x), one line with point markers per series and a
 * legend. A press and its "+ VECTOR" variant share a colour (the same group);
 * the variant's line is dashed and its markers square. The full cache is a
 * baseline series: diamonds at its points and a dotted guide across the
 * chart at its score. Every point's <title> (the browser's tooltip) holds its
 * exact values. Plain HTML and SVG in the tier visualizer's colours: no
 * script, nothing fetched from the network.
 *
 * The page is for a browser test too: each series is a <g class="series">
 * with data-label, data-vector, data-baseline and data-color; each point a
 * <g class="point"> with data-x and data-y; each axis a <g class="axis">
 * with data-min and data-max, its ticks <g class="tick" data-value>. */
#ifndef VKV_EVAL_SCORE_PLOT_H
#define VKV_EVAL_SCORE_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef struct vkv_score_series {
    const char *label;     /* the legend's text ("snapkv + VECTOR"): required, not empty */
    const char *group;     /* series of one group share a colour (a press and its + VECTOR); NULL: the label */
    bool vector;           /* a + VECTOR variant: dashed line, square markers */
    bool baseline;         /* the full cache: diamonds and a dotted guide at each of its scores */
    uint32_t n;            /* points, at least one */
    const double *x, *y;   /* [n] finite; no two points of a series at the same x */
} vkv_score_series;

typedef struct vkv_score_plot {
    const char *title;     /* the page's title and heading */
    const char *subtitle;  /* a line under the heading; NULL: none */
    const char *x_label, *y_label;
    const vkv_score_series *series;
    uint32_t n_series;     /* at least one */
} vkv_score_plot;

/* VKV_OK, or VKV_ERR_ARG naming what cannot be plotted: no series, a series
 * without a label or points, a NaN or infinite value (which series, which
 * point), two points of a series at one x. */
vkv_status vkv_score_plot_check(const vkv_score_plot *p);

/* Checks p, then writes the page to f (nothing is written when the check
 * fails); the caller checks ferror(f). VKV_ERR_OOM when out of memory. */
vkv_status vkv_score_plot_fwrite(FILE *f, const vkv_score_plot *p);

/* The page as the file path (core/out_file.h: whole or not at all);
 * VKV_ERR_IO naming path when it cannot be written. */
vkv_status vkv_score_plot_write(const char *path, const vkv_score_plot *p);

/* The reports' charts (longbench-report --html, ruler-report --html): n
 * points given by the report's callbacks, gathered into lines. Lines come in
 * the order of their first points, and each line's points in the points'
 * order; a line's legend, colour group and kind are described by its first
 * point. */
typedef struct vkv_score_points {
    size_t n;
    const void *user;
    /* points i and j lie on one line */
    bool (*same_line)(const void *user, size_t i, size_t j);
    /* the line point i starts: label and group (cap bytes each), + VECTOR, full cache */
    void (*describe)(const void *user, size_t i, char *label, char *group, size_t cap, bool *vector, bool *baseline);
    /* point i's place */
    void (*place)(const void *user, size_t i, double *x, double *y);
} vkv_score_points;

/* Writes p's points as plot's chart (its series and n_series are filled
 * here) to path: vkv_score_plot_write's results, VKV_ERR_ARG for no points,
 * VKV_ERR_OOM. */
vkv_status vkv_score_plot_write_points(const char *path, vkv_score_plot plot, const vkv_score_points *p);

#endif
