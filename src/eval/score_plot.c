/* The leaderboard's chart: an HTML page with one inline SVG line chart
 * (score_plot.h). Everything is laid out here, in pixels of a fixed-size
 * chart; the page's colours are the tier visualizer's
 * (src/viz/assets/report.css). */
#include "eval/score_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/html.h"
#include "core/out_file.h"

/* A group's colour: the visualizer's two tier colours first (retained blue,
 * approximated amber), its distortion purple, then more of the same
 * saturation; the groups after the tenth take them again. */
static const char *const group_colors[] = {"#2563eb", "#f59e0b", "#7c3aed", "#059669", "#dc2626",
                                           "#0891b2", "#db2777", "#65a30d", "#ea580c", "#475569"};
#define N_COLORS (sizeof group_colors / sizeof *group_colors)
static const char baseline_color[] = "#1f2933"; /* the page's text colour, --fg */

/* The chart's geometry in pixels: the plot area is PLOT_W x PLOT_H at
 * (LEFT, TOP); the legend starts LEGEND_GAP to its right. */
enum { LEFT = 78, TOP = 24, PLOT_W = 620, PLOT_H = 420, BOTTOM = 64, LEGEND_GAP = 28, LEGEND_ROW = 22 };

/* An axis: [lo, hi] in steps of step, tick labels with decimals digits. */
typedef struct axis {
    double lo, hi, step;
    int decimals, n_ticks;
} axis;

/* Round steps of 1, 2 or 5 times a power of ten, about six of them over
 * [lo, hi], the ends widened to whole steps. */
static axis nice_axis(double lo, double hi)
{
    axis a;
    double raw = (hi - lo) / 6, mag = pow(10, floor(log10(raw))), f = raw / mag;
    a.step = (f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10) * mag;
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    a.decimals = a.step >= 1 ? 0 : (int)ceil(-log10(a.step) - 1e-9);
    a.n_ticks = (int)lround((a.hi - a.lo) / a.step) + 1;
    return a;
}

static double tick_value(const axis *a, int i)
{
    double v = a->lo + i * a->step;
    return fabs(v) < a->step * 1e-9 ? 0 : v; /* no "-0" */
}

static double px_x(const axis *a, double x) { return LEFT + (x - a->lo) / (a->hi - a->lo) * PLOT_W; }
static double px_y(const axis *a, double y) { return TOP + PLOT_H - (y - a->lo) / (a->hi - a->lo) * PLOT_H; }

/* The shortest decimal that reads back as v: the tooltips' and data
 * attributes' exact values ("41.25", "0.5", not "4.125e+01"). */
static void fmt_exact(char *buf, size_t n, double v)
{
    bool plain = v == 0 || (fabs(v) >= 1e-4 && fabs(v) < 1e15);
    for (int prec = plain ? 0 : 1; prec <= 17; prec++) {
        snprintf(buf, n, plain ? "%.*f" : "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
    snprintf(buf, n, "%.17g", v);
}

static const char *text_or_empty(const char *s) { return s ? s : ""; }

vkv_status vkv_score_plot_check(const vkv_score_plot *p)
{
    if (!p->n_series || !p->series) return vkv_error(VKV_ERR_ARG, "score plot: no series to plot");
    for (uint32_t i = 0; i < p->n_series; i++) {
        const vkv_score_series *s = &p->series[i];
        if (!s->label || !*s->label) return vkv_error(VKV_ERR_ARG, "score plot: series %u has no label", i);
        if (!s->n || !s->x || !s->y) return vkv_error(VKV_ERR_ARG, "score plot: series '%s' has no points", s->label);
        for (uint32_t j = 0; j < s->n; j++) {
            if (!isfinite(s->x[j]) || !isfinite(s->y[j]))
                return vkv_error(VKV_ERR_ARG, "score plot: series '%s', point %u: %s is %g (a point needs finite values)",
                                 s->label, j, isfinite(s->x[j]) ? "y" : "x", isfinite(s->x[j]) ? s->y[j] : s->x[j]);
            for (uint32_t k = 0; k < j; k++)
                if (s->x[k] == s->x[j])
                    return vkv_error(VKV_ERR_ARG, "score plot: series '%s' has two points at x = %g (points %u and %u)",
                                     s->label, s->x[j], k, j);
        }
    }
    return VKV_OK;
}

typedef struct point {
    double x, y;
} point;

static int point_cmp(const void *a, const void *b)
{
    const point *p = a, *q = b;
    return p->x < q->x ? -1 : p->x > q->x;
}

/* Each series' colour: its group's, groups coloured in order of first appearance. */
static const char **series_colors(const vkv_score_plot *p)
{
    const char **col = calloc(p->n_series, sizeof *col);
    if (!col) return NULL;
    uint32_t n_groups = 0;
    for (uint32_t i = 0; i < p->n_series; i++) {
        const vkv_score_series *s = &p->series[i];
        if (s->baseline) {
            col[i] = baseline_color;
            continue;
        }
        const char *g = s->group ? s->group : s->label;
        for (uint32_t k = 0; k < i && !col[i]; k++) {
            const vkv_score_series *t = &p->series[k];
            if (!t->baseline && !strcmp(t->group ? t->group : t->label, g)) col[i] = col[k];
        }
        if (!col[i]) col[i] = group_colors[n_groups++ % N_COLORS];
    }
    return col;
}

/* A marker centred at (x, y): a circle, a square (+ VECTOR) or a diamond (baseline). */
static void write_marker(FILE *f, const vkv_score_series *s, const char *color, double x, double y)
{
    if (s->baseline)
        fprintf(f, "<path d=\"M%.2f %.2fl6 6l-6 6l-6 -6z\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1.5\"/>", x, y - 6,
                color);
    else if (s->vector)
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"9\" height=\"9\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1.5\"/>",
                x - 4.5, y - 4.5, color);
    else
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"5\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1.5\"/>", x, y, color);
}

/* One axis: its grid lines, ticks and their values, its line and its label;
 * the x axis along the plot's bottom, the y axis along its left side. */
static void write_axis(FILE *f, const axis *a, bool vertical, const char *label)
{
    char lo[32], hi[32];
    fmt_exact(lo, sizeof lo, a->lo);
    fmt_exact(hi, sizeof hi, a->hi);
    fprintf(f, "<g class=\"axis %s\" data-min=\"%s\" data-max=\"%s\">\n", vertical ? "y-axis" : "x-axis", lo, hi);
    for (int i = 0; i < a->n_ticks; i++) {
        double v = tick_value(a, i), at = vertical ? px_y(a, v) : px_x(a, v);
        /* the grid line across the plot, the tick outside it, the value beyond */
        double g[4] = {at, TOP, at, TOP + PLOT_H}, t[4] = {at, TOP + PLOT_H, at, TOP + PLOT_H + 5};
        double tx = at, ty = TOP + PLOT_H + 20;
        if (vertical) {
            g[0] = LEFT, g[1] = at, g[2] = LEFT + PLOT_W, g[3] = at;
            t[0] = LEFT - 5, t[1] = at, t[2] = LEFT, t[3] = at;
            tx = LEFT - 8, ty = at + 4;
        }
        fprintf(f, "<g class=\"tick\" data-value=\"%.*f\">", a->decimals, v);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e3e7ee\"/>", g[0], g[1], g[2], g[3]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#5f6b7a\"/>", t[0], t[1], t[2], t[3]);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\">%.*f</text></g>\n", tx, ty, vertical ? "end" : "middle",
                a->decimals, v);
    }
    if (vertical) {
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#5f6b7a\"/>\n", LEFT, TOP, LEFT, TOP + PLOT_H);
        fprintf(f, "<text class=\"axis-label\" x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">",
                TOP + PLOT_H / 2, TOP + PLOT_H / 2);
    } else {
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#5f6b7a\"/>\n", LEFT, TOP + PLOT_H,
                LEFT + PLOT_W, TOP + PLOT_H);
        fprintf(f, "<text class=\"axis-label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">", LEFT + PLOT_W / 2,
                TOP + PLOT_H + 46);
    }
    vkv_html_text(f, text_or_empty(label));
    fprintf(f, "</text>\n</g>\n");
}

/* One series: its line (or the baseline's guides), then its points, each
 * with its exact values as the tooltip. pts are sorted by x. */
static void write_series(FILE *f, const vkv_score_plot *p, const vkv_score_series *s, const point *pts,
                         const char *color, const axis *ax, const axis *ay)
{
    fprintf(f, "<g class=\"series\" data-label=\"");
    vkv_html_text(f, s->label);
    fprintf(f, "\" data-vector=\"%d\" data-baseline=\"%d\" data-color=\"%s\">\n", s->vector, s->baseline, color);
    if (s->baseline)
        for (uint32_t j = 0; j < s->n; j++) /* the full cache's score across the chart, for comparison */
            fprintf(f, "<line class=\"guide\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"%s\" "
                       "stroke-width=\"1.2\" stroke-dasharray=\"2 4\"/>\n",
                    LEFT, px_y(ay, pts[j].y), LEFT + PLOT_W, px_y(ay, pts[j].y), color);
    if (s->n > 1) {
        fprintf(f, "<path class=\"line\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\"%s d=\"", color,
                s->vector ? " stroke-dasharray=\"7 5\"" : "");
        for (uint32_t j = 0; j < s->n; j++)
            fprintf(f, "%s%.2f %.2f", j ? " L" : "M", px_x(ax, pts[j].x), px_y(ay, pts[j].y));
        fprintf(f, "\"/>\n");
    }
    for (uint32_t j = 0; j < s->n; j++) {
        char xs[32], ys[32];
        fmt_exact(xs, sizeof xs, pts[j].x);
        fmt_exact(ys, sizeof ys, pts[j].y);
        fprintf(f, "<g class=\"point\" data-x=\"%s\" data-y=\"%s\">", xs, ys);
        write_marker(f, s, color, px_x(ax, pts[j].x), px_y(ay, pts[j].y));
        fprintf(f, "<title>");
        vkv_html_text(f, s->label);
        fprintf(f, "\n");
        vkv_html_text(f, text_or_empty(p->x_label));
        fprintf(f, ": %s\n", xs);
        vkv_html_text(f, text_or_empty(p->y_label));
        fprintf(f, ": %s</title></g>\n", ys);
    }
    fprintf(f, "</g>\n");
}

static void write_legend(FILE *f, const vkv_score_plot *p, const char **colors)
{
    const int x = LEFT + PLOT_W + LEGEND_GAP;
    fprintf(f, "<g class=\"legend\">\n");
    for (uint32_t i = 0; i < p->n_series; i++) {
        const vkv_score_series *s = &p->series[i];
        int y = TOP + 10 + (int)i * LEGEND_ROW;
        fprintf(f, "<g class=\"legend-item\" data-label=\"");
        vkv_html_text(f, s->label);
        fprintf(f, "\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.2\"%s/>", x, y, x + 30, y,
                colors[i], s->vector ? " stroke-dasharray=\"7 5\"" : s->baseline ? " stroke-dasharray=\"2 4\"" : "");
        write_marker(f, s, colors[i], x + 15, y);
        fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 40, y + 4);
        vkv_html_text(f, s->label);
        fprintf(f, "</text></g>\n");
    }
    fprintf(f, "</g>\n");
}

/* The page's frame: the visualizer's palette and type (src/viz/assets/report.css). */
static void write_head(FILE *f, const vkv_score_plot *p)
{
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    vkv_html_text(f, text_or_empty(p->title));
    fprintf(f, "</title>\n<style>\n"
               ":root{--fg:#1f2933;--muted:#5f6b7a;--line:#e3e7ee;--panel:#fff;--bg:#f6f7f9;"
               "font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,sans-serif;"
               "font-size:14px;color:var(--fg);background:var(--bg)}\n"
               "body{margin:0}\nheader.top{padding:18px 28px 8px}\nh1{margin:0;font-size:22px;font-weight:650}\n"
               ".lede{margin:6px 0 0;color:var(--muted);font-size:14px}\nmain{padding:0 28px 12px}\n"
               "section{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:14px 16px;"
               "margin:12px 0;overflow-x:auto}\n"
               "footer{padding:4px 28px 20px;color:var(--muted);font-size:12px}\n"
               "svg text{font-family:inherit;font-size:12px;fill:var(--fg)}\n"
               "svg .axis-label{font-size:13px;fill:var(--muted)}\nsvg .legend text{font-size:13px}\n"
               ".point{cursor:default}\n.point:hover>:first-child{stroke:var(--fg);stroke-width:2}\n"
               "</style>\n</head>\n<body>\n<header class=\"top\">\n<h1>");
    vkv_html_text(f, text_or_empty(p->title));
    fprintf(f, "</h1>\n");
    if (p->subtitle) {
        fprintf(f, "<p class=\"lede\">");
        vkv_html_text(f, p->subtitle);
        fprintf(f, "</p>\n");
    }
    fprintf(f, "</header>\n<main>\n<section>\n");
}

vkv_status vkv_score_plot_fwrite(FILE *f, const vkv_score_plot *p)
{
    vkv_status st = vkv_score_plot_check(p);
    if (st) return st;
    /* the axes: x from 0 (the full cache's place) or below, y over the scores */
    double x0 = 0, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    size_t n_points = 0, max_label = 0;
    for (uint32_t i = 0; i < p->n_series; i++) {
        const vkv_score_series *s = &p->series[i];
        for (uint32_t j = 0; j < s->n; j++) {
            x0 = fmin(x0, s->x[j]);
            x1 = fmax(x1, s->x[j]);
            y0 = fmin(y0, s->y[j]);
            y1 = fmax(y1, s->y[j]);
        }
        n_points += s->n;
        if (strlen(s->label) > max_label) max_label = strlen(s->label);
    }
    if (!(x1 > x0)) x1 = x0 + 1;
    if (!(y1 > y0)) { /* one score: a unit either side, not below 0 when it is not */
        y0 = y0 >= 0 && y0 - 1 < 0 ? 0 : y0 - 1;
        y1 += 1;
    }
    axis ax = nice_axis(x0, x1), ay = nice_axis(y0, y1);
    point *pts = malloc(n_points * sizeof *pts);
    const char **colors = series_colors(p);
    if (!pts || !colors) {
        free(pts);
        free(colors);
        return vkv_error(VKV_ERR_OOM, "score plot: out of host memory");
    }
    /* room for the legend's 13 px text: at most about 8 px a character */
    int legend_w = 56 + (int)(max_label < 60 ? max_label : 60) * 8;
    int w = LEFT + PLOT_W + LEGEND_GAP + legend_w;
    int h = TOP + PLOT_H + BOTTOM, legend_h = TOP + 10 + (int)p->n_series * LEGEND_ROW;
    if (legend_h > h) h = legend_h;
    write_head(f, p);
    fprintf(f, "<svg id=\"score-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
            w, h, w, h);
    vkv_html_text(f, text_or_empty(p->title));
    fprintf(f, "\">\n");
    fprintf(f, "<rect class=\"plot-area\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
               "stroke=\"#e3e7ee\"/>\n", LEFT, TOP, PLOT_W, PLOT_H);
    write_axis(f, &ax, false, p->x_label);
    write_axis(f, &ay, true, p->y_label);
    point *sp = pts;
    /* the baseline first, so the presses' lines are drawn over its guides */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < p->n_series; i++) {
            const vkv_score_series *s = &p->series[i];
            if (s->baseline != (pass == 0)) continue;
            for (uint32_t j = 0; j < s->n; j++) sp[j] = (point){s->x[j], s->y[j]};
            qsort(sp, s->n, sizeof *sp, point_cmp);
            write_series(f, p, s, sp, colors[i], &ax, &ay);
            sp += s->n;
        }
    write_legend(f, p, colors);
    fprintf(f, "</svg>\n</section>\n</main>\n<footer>Hover a point for its exact values. Written by vkvector.</footer>\n"
               "</body>\n</html>\n");
    free(pts);
    free(colors);
    return VKV_OK;
}

vkv_status vkv_score_plot_write(const char *path, const vkv_score_plot *p)
{
    vkv_status st = vkv_score_plot_check(p);
    if (st) return st;
    vkv_out out;
    if ((st = vkv_out_open(&out, path))) return st;
    if ((st = vkv_score_plot_fwrite(out.f, p))) {
        vkv_out_drop(&out);
        return st;
    }
    return vkv_out_commit(&out);
}

vkv_status vkv_score_plot_write_points(const char *path, vkv_score_plot plot, const vkv_score_points *p)
{
    enum { CAP = 512 };
    const size_t n = p->n;
    if (!n) return vkv_error(VKV_ERR_ARG, "writing the plot: no points to plot");
    vkv_status st = VKV_OK;
    size_t *line_of = malloc(n * sizeof *line_of), *first = malloc(n * sizeof *first);
    vkv_score_series *series = calloc(n, sizeof *series);
    double *xs = malloc(n * sizeof *xs), *ys = malloc(n * sizeof *ys);
    char (*labels)[CAP] = malloc(n * sizeof *labels), (*groups)[CAP] = malloc(n * sizeof *groups);
    if (!line_of || !first || !series || !xs || !ys || !labels || !groups) {
        st = vkv_error(VKV_ERR_OOM, "writing the plot: out of host memory");
        goto out;
    }
    size_t n_lines = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = 0;
        while (l < n_lines && !p->same_line(p->user, first[l], i)) l++;
        if (l == n_lines) first[n_lines++] = i;
        line_of[i] = l;
    }
    size_t k = 0;
    for (size_t l = 0; l < n_lines; l++) {
        bool vector = false, baseline = false;
        p->describe(p->user, first[l], labels[l], groups[l], CAP, &vector, &baseline);
        series[l] = (vkv_score_series){.label = labels[l], .group = groups[l], .vector = vector,
                                       .baseline = baseline, .x = xs + k, .y = ys + k};
        for (size_t i = 0; i < n; i++) {
            if (line_of[i] != l) continue;
            p->place(p->user, i, &xs[k], &ys[k]);
            k++;
            series[l].n++;
        }
    }
    plot.series = series;
    plot.n_series = (uint32_t)n_lines;
    st = vkv_score_plot_write(path, &plot);
out:
    free(line_of);
    free(first);
    free(series);
    free(xs);
    free(ys);
    free(labels);
    free(groups);
    return st;
}
