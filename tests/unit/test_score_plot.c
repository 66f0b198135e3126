/* The leaderboard's chart (src/eval/score_plot.c): a series group and a
 * line per series, a point per value at its place on round axes, a press
 * and its + VECTOR in one colour, the baseline's diamonds and guide, exact
 * values in the tooltips, labels escaped; NaN, infinite, empty and
 * duplicate input refused by name, with nothing written. And
 * longbench-report's series (src/eval/lb_report.c): a line per setting. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define TEST_TMPDIR_NAME "score_plot"
#include "test_tmpdir.h"

#include "core/status.h"
#include "eval/lb_report.h"
#include "eval/score_plot.h"

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* The page, or NULL with the status in *st; *size: bytes written either way. */
static char *render(const vkv_score_plot *p, vkv_status *st, size_t *size)
{
    char *page = NULL;
    FILE *f = open_memstream(&page, size);
    assert_non_null(f);
    *st = vkv_score_plot_fwrite(f, p);
    assert_false(ferror(f));
    assert_int_equal(fclose(f), 0);
    if (*st) {
        free(page);
        return NULL;
    }
    assert_int_equal(strlen(page), *size);
    return page;
}

static char *render_ok(const vkv_score_plot *p)
{
    vkv_status st;
    size_t size;
    char *page = render(p, &st, &size);
    if (st) fail_msg("%s", vkv_last_error());
    return page;
}

/* The text between the n-th `from` and the next `to`. */
static char *slice(const char *page, const char *from, size_t nth, const char *to)
{
    const char *a = page;
    for (size_t i = 0; i <= nth; i++) {
        a = strstr(i ? a + 1 : a, from);
        assert_non_null(a);
    }
    const char *b = strstr(a, to);
    assert_non_null(b);
    return strndup(a, (size_t)(b - a));
}

/* Two presses, each with its + VECTOR, and the full cache. */
static const double px[] = {0.25, 0.5, 0.9}, knorm_y[] = {40, 32.5, 31.5}, snap_y[] = {52, 44, 36},
                    snapv_y[] = {58.25, 50, 41.666666666666664}, full_x[] = {0}, full_y[] = {57};
/* one press's points given out of order: the line runs along x */
static const double kv_x[] = {0.9, 0.25, 0.5}, kv_y[] = {37, 45, 41};

static vkv_score_plot leaderboard(vkv_score_series s[5])
{
    s[0] = (vkv_score_series){.label = "full cache", .baseline = true, .n = 1, .x = full_x, .y = full_y};
    s[1] = (vkv_score_series){.label = "knorm", .n = 3, .x = px, .y = knorm_y};
    s[2] = (vkv_score_series){.label = "snapkv", .n = 3, .x = px, .y = snap_y};
    s[3] = (vkv_score_series){.label = "snapkv + VECTOR", .group = "snapkv", .vector = true, .n = 3, .x = px, .y = snapv_y};
    s[4] = (vkv_score_series){.label = "knorm + VECTOR", .group = "knorm", .vector = true, .n = 3, .x = kv_x, .y = kv_y};
    return (vkv_score_plot){.title = "LongBench", .subtitle = "4 tasks", .x_label = "compression ratio p_c",
                            .y_label = "average score", .series = s, .n_series = 5};
}

static void plot_has_a_line_per_series_and_a_point_per_value(void **state)
{
    (void)state;
    vkv_score_series s[5];
    vkv_score_plot p = leaderboard(s);
    char *page = render_ok(&p);
    assert_int_equal(count(page, "<g class=\"series\""), 5);
    assert_int_equal(count(page, "<g class=\"point\""), 13);
    assert_int_equal(count(page, "<g class=\"legend-item\""), 5);
    /* a line through the points of each press series; the baseline's one point has a guide instead */
    assert_int_equal(count(page, "<path class=\"line\""), 4);
    assert_int_equal(count(page, "<line class=\"guide\""), 1);
    /* markers (each legend item has one too): circles for the presses, squares for VECTOR, a diamond for the baseline */
    assert_int_equal(count(page, "<circle"), 6 + 2);
    assert_int_equal(count(page, "<rect x="), 6 + 2);
    assert_int_equal(count(page, "l6 6l-6 6l-6 -6z"), 1 + 1);
    /* + VECTOR dashed, in its press's colour: groups coloured in order of appearance */
    assert_int_equal(count(page, "stroke-dasharray=\"7 5\""), 2 + 2);
    assert_non_null(strstr(page, "data-label=\"full cache\" data-vector=\"0\" data-baseline=\"1\" data-color=\"#1f2933\""));
    assert_non_null(strstr(page, "data-label=\"knorm\" data-vector=\"0\" data-baseline=\"0\" data-color=\"#2563eb\""));
    assert_non_null(strstr(page, "data-label=\"knorm + VECTOR\" data-vector=\"1\" data-baseline=\"0\" data-color=\"#2563eb\""));
    assert_non_null(strstr(page, "data-label=\"snapkv\" data-vector=\"0\" data-baseline=\"0\" data-color=\"#f59e0b\""));
    assert_non_null(strstr(page, "data-label=\"snapkv + VECTOR\" data-vector=\"1\" data-baseline=\"0\" data-color=\"#f59e0b\""));
    /* each series' points in x order, whatever order they came in */
    char *kv = slice(page, "data-label=\"knorm + VECTOR\"", 0, "</g>\n</g>");
    const char *a = strstr(kv, "data-x=\"0.25\""), *b = strstr(kv, "data-x=\"0.5\""), *c = strstr(kv, "data-x=\"0.9\"");
    assert_true(a && b && c && a < b && b < c);
    free(kv);
    /* the title, the subtitle, the axis labels */
    assert_non_null(strstr(page, "<title>LongBench</title>"));
    assert_non_null(strstr(page, "<h1>LongBench</h1>\n<p class=\"lede\">4 tasks</p>"));
    assert_non_null(strstr(page, "text-anchor=\"middle\">compression ratio p_c</text>"));
    assert_non_null(strstr(page, "rotate(-90 18 234)\">average score</text>"));
    /* self-contained: no script, nothing fetched */
    assert_null(strstr(page, "<script"));
    assert_int_equal(count(page, "http"), 1); /* the SVG namespace */
    free(page);
}

static void plot_places_points_on_round_axes(void **state)
{
    (void)state;
    vkv_score_series s[5];
    vkv_score_plot p = leaderboard(s);
    char *page = render_ok(&p);
    /* x from 0 (the baseline) to 0.9: steps of 0.2 up to 1; y 31.5 .. 58.25: steps of 5 from 30 to 60 */
    assert_non_null(strstr(page, "<g class=\"axis x-axis\" data-min=\"0\" data-max=\"1\">"));
    assert_non_null(strstr(page, "<g class=\"axis y-axis\" data-min=\"30\" data-max=\"60\">"));
    char *xa = slice(page, "<g class=\"axis x-axis\"", 0, "class=\"axis-label\"");
    char *ya = slice(page, "<g class=\"axis y-axis\"", 0, "class=\"axis-label\"");
    assert_int_equal(count(xa, "<g class=\"tick\""), 6);
    assert_int_equal(count(ya, "<g class=\"tick\""), 7);
    assert_non_null(strstr(xa, "data-value=\"0.0\""));
    assert_non_null(strstr(xa, "text-anchor=\"middle\">0.6</text>"));
    assert_non_null(strstr(ya, "text-anchor=\"end\">45</text>"));
    free(xa);
    free(ya);
    /* the plot is 620 x 420 px at (78, 24): x 0.5 -> 78 + 310; y 44 of 30..60 -> 24 + 420 * (60 - 44) / 30 */
    assert_non_null(strstr(page, "<g class=\"point\" data-x=\"0.5\" data-y=\"44\"><circle cx=\"388.00\" cy=\"248.00\""));
    /* the baseline's diamond at x 0, y 57, and its guide across the plot */
    assert_non_null(strstr(page, "<g class=\"point\" data-x=\"0\" data-y=\"57\"><path d=\"M78.00 60.00l6 6"));
    assert_non_null(strstr(page, "<line class=\"guide\" x1=\"78\" y1=\"66.00\" x2=\"698\" y2=\"66.00\""));
    /* the squares of + VECTOR centred on their point: 0.9 -> 636, 41.666... -> 280.67 */
    assert_non_null(strstr(page, "data-x=\"0.9\" data-y=\"41.666666666666664\"><rect x=\"631.50\" y=\"276.17\""));
    /* the line through a series' points, in x order */
    assert_non_null(strstr(page, "d=\"M233.00 234.00 L388.00 290.00 L636.00 346.00\""));
    free(page);
}

static void plot_tooltips_hold_exact_values(void **state)
{
    (void)state;
    vkv_score_series s[5];
    vkv_score_plot p = leaderboard(s);
    char *page = render_ok(&p);
    assert_non_null(strstr(page, "<title>snapkv + VECTOR\ncompression ratio p_c: 0.9\naverage score: 41.666666666666664</title>"));
    assert_non_null(strstr(page, "<title>knorm\ncompression ratio p_c: 0.5\naverage score: 32.5</title>"));
    assert_non_null(strstr(page, "<title>full cache\ncompression ratio p_c: 0\naverage score: 57</title>"));
    free(page);
}

static void plot_escapes_labels_and_titles(void **state)
{
    (void)state;
    const double x[] = {0.5}, y[] = {1};
    vkv_score_series s = {.label = "<b>x & \"y\" 'z'</b>", .n = 1, .x = x, .y = y};
    vkv_score_plot p = {.title = "a</title><script>", .x_label = "p<c", .y_label = "s>1", .series = &s, .n_series = 1};
    char *page = render_ok(&p);
    const char *esc = "&lt;b&gt;x &amp; &quot;y&quot; &#39;z&#39;&lt;/b&gt;";
    /* the series' group, its point's tooltip, the legend item and its text */
    assert_int_equal(count(page, esc), 4);
    assert_null(strstr(page, "<b>"));
    assert_null(strstr(page, "<script"));
    assert_int_equal(count(page, "a&lt;/title&gt;&lt;script&gt;"), 3); /* <title>, <h1>, aria-label */
    assert_non_null(strstr(page, ">p&lt;c</text>"));
    assert_non_null(strstr(page, ">s&gt;1</text>"));
    /* one score: y from 0 (not below, it is not negative) to a unit above */
    assert_non_null(strstr(page, "<g class=\"axis y-axis\" data-min=\"0\" data-max=\"2\">"));
    free(page);
}

/* Refused with VKV_ERR_ARG and a message holding `why`; nothing written. */
static void expect_refused(const vkv_score_plot *p, const char *why)
{
    vkv_status st;
    size_t size;
    char *page = render(p, &st, &size);
    assert_null(page);
    assert_int_equal(st, VKV_ERR_ARG);
    assert_int_equal(size, 0);
    if (!strstr(vkv_last_error(), why)) fail_msg("message '%s' lacks '%s'", vkv_last_error(), why);
    assert_int_equal(vkv_score_plot_check(p), VKV_ERR_ARG);
}

static void plot_refuses_what_it_cannot_draw(void **state)
{
    (void)state;
    const double x[] = {0.25, 0.5}, y[] = {10, 20}, y_nan[] = {10, NAN}, x_inf[] = {INFINITY, 0.5}, x_dup[] = {0.5, 0.5};
    vkv_score_series s = {.label = "snapkv", .n = 2, .x = x, .y = y};
    vkv_score_plot p = {.title = "t", .series = &s, .n_series = 1};
    free(render_ok(&p));

    p.n_series = 0;
    expect_refused(&p, "score plot: no series to plot");
    p.n_series = 1;
    s.y = y_nan;
    expect_refused(&p, "score plot: series 'snapkv', point 1: y is nan (a point needs finite values)");
    s.y = y;
    s.x = x_inf;
    expect_refused(&p, "series 'snapkv', point 0: x is inf");
    s.x = x_dup;
    expect_refused(&p, "series 'snapkv' has two points at x = 0.5 (points 0 and 1)");
    s.x = x;
    s.n = 0;
    expect_refused(&p, "series 'snapkv' has no points");
    s.n = 2;
    s.label = "";
    expect_refused(&p, "series 0 has no label");
    s.label = NULL;
    expect_refused(&p, "series 0 has no label");
}

static void plot_file_is_written_whole_or_refused(void **state)
{
    (void)state;
    vkv_score_series s[5];
    vkv_score_plot p = leaderboard(s);
    const char *path = tmp_path("plot.html");
    assert_int_equal(vkv_score_plot_write(path, &p), VKV_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[64] = {0};
    assert_true(fread(buf, 1, 15, f) == 15);
    fclose(f);
    assert_string_equal(buf, "<!DOCTYPE html>");
    /* a missing directory: the path named */
    assert_int_equal(vkv_score_plot_write(tmp_path("no/such/plot.html"), &p), VKV_ERR_IO);
    assert_non_null(strstr(vkv_last_error(), "no/such/plot.html"));
    /* bad input: refused before the file is made */
    const double nan_y[] = {NAN};
    s[0].y = nan_y;
    const char *bad = tmp_path("bad.html");
    assert_int_equal(vkv_score_plot_write(bad, &p), VKV_ERR_ARG);
    assert_null(fopen(bad, "rb"));
}

/* A file's text; NULL when it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void lb_row(vkv_lb_rows *rs, const char *model, const char *press, double pc, bool vector, double pa, double score)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 8;
        rs->r = realloc(rs->r, rs->cap * sizeof *rs->r);
        assert_non_null(rs->r);
    }
    vkv_lb_row *r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    r->model = strdup(model);
    r->press = press ? strdup(press) : NULL;
    r->compression_ratio = pc;
    r->vector = vector;
    r->pa = pa;
    r->sum[0] = score; /* one sample of the first task */
    r->n[0] = 1;
}

/* longbench-report's plot: a line per model, press and VECTOR (and p_a when
 * shown), the full cache at 0, the table's averages as the points. */
static void longbench_plot_has_a_line_per_setting(void **state)
{
    (void)state;
    vkv_lb_rows rs = {0};
    lb_row(&rs, "m1", "snapkv", 0.75, false, NAN, 0.4);
    lb_row(&rs, "m1", "snapkv", 0.5, true, 0.25, 0.6);
    lb_row(&rs, "m2", "snapkv", 0.5, false, NAN, 0.3);
    lb_row(&rs, "m1", NULL, 0, false, NAN, 0.9);
    lb_row(&rs, "m1", "snapkv", 0.5, false, NAN, 0.5);
    lb_row(&rs, "m1", "snapkv", 0.75, true, 0.125, 0.625);
    vkv_lb_rows_sort(&rs);
    bool col[VKV_LB_N_TASKS] = {true};
    vkv_lb_plot_opts o = {.col = col, .show_model = true, .subtitle = "sub"};
    const char *path = tmp_path("lb.html");
    assert_int_equal(vkv_lb_write_plot(&rs, &o, path), VKV_OK);
    char *page = slurp(path);
    assert_non_null(page);
    /* p_a at each p_c's default, not shown: one + VECTOR line through both */
    assert_int_equal(count(page, "<g class=\"series\""), 4);
    assert_non_null(strstr(page, "data-label=\"m1 · full cache\" data-vector=\"0\" data-baseline=\"1\""));
    assert_non_null(strstr(page, "data-label=\"m1 · snapkv\" data-vector=\"0\" data-baseline=\"0\" data-color=\"#2563eb\""));
    assert_non_null(strstr(page, "data-label=\"m1 · snapkv + VECTOR\" data-vector=\"1\" data-baseline=\"0\" data-color=\"#2563eb\""));
    assert_non_null(strstr(page, "data-label=\"m2 · snapkv\" data-vector=\"0\" data-baseline=\"0\" data-color=\"#f59e0b\""));
    char *v = slice(page, "data-label=\"m1 · snapkv + VECTOR\"", 0, "</g>\n</g>");
    assert_int_equal(count(v, "<g class=\"point\""), 2);
    assert_non_null(strstr(v, "data-x=\"0.5\" data-y=\"60\""));
    assert_non_null(strstr(v, "data-x=\"0.75\" data-y=\"62.5\""));
    free(v);
    assert_non_null(strstr(page, "<g class=\"point\" data-x=\"0\" data-y=\"90\">"));
    assert_non_null(strstr(page, "<p class=\"lede\">sub</p>"));
    free(page);
    /* p_a shown: a line per p_a */
    o.show_pa = true;
    assert_int_equal(vkv_lb_write_plot(&rs, &o, path), VKV_OK);
    page = slurp(path);
    assert_int_equal(count(page, "<g class=\"series\""), 5);
    assert_non_null(strstr(page, "data-label=\"m1 · snapkv + VECTOR (p_a 0.25)\""));
    assert_non_null(strstr(page, "data-label=\"m1 · snapkv + VECTOR (p_a 0.125)\""));
    free(page);
    vkv_lb_rows_free(&rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plot_has_a_line_per_series_and_a_point_per_value),
        cmocka_unit_test(plot_places_points_on_round_axes),
        cmocka_unit_test(plot_tooltips_hold_exact_values),
        cmocka_unit_test(plot_escapes_labels_and_titles),
        cmocka_unit_test(plot_refuses_what_it_cannot_draw),
        cmocka_unit_test(plot_file_is_written_whole_or_refused),
        cmocka_unit_test(longbench_plot_has_a_line_per_setting),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
