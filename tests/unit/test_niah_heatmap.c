/* The needle in a haystack's heatmap page (src/viz/niah_heatmap.c): one SVG
 * cell per length x depth, coloured by score, grey with "not run" for a cell
 * without runs, the settings' lines, the answers escaped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "viz/niah_heatmap.h"

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static char *render(const viz_niah_heatmap *h)
{
    char *page = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&page, &size);
    assert_non_null(f);
    viz_write_niah_heatmap(f, h);
    assert_false(ferror(f));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(strlen(page), size);
    return page;
}

static void heatmap_has_a_cell_per_length_and_depth(void **state)
{
    (void)state;
    const double lengths[] = {1000, 2000}, depths[] = {0, 50, 100};
    const size_t tokens[] = {990};
    const double where[] = {49.5};
    char *answers[] = {"a <b> & \"c\""};
    viz_niah_cell cells[6];
    for (size_t i = 0; i < 6; i++)
        cells[i] = (viz_niah_cell){.score = i == 5 ? NAN : i / 4.0, .n_runs = i == 5 ? 0 : 1, .prompt_tokens = tokens,
                                   .needle_depth = where, .answers = answers};
    viz_niah_heatmap h = {.title = "Needle in a haystack: m, snapkv + VECTOR", .lengths = lengths, .n_lengths = 2,
                          .depths = depths, .n_depths = 3, .cells = cells, .press = "snapkv", .compression_ratio = 0.5,
                          .vector = true, .pa = 0.25, .needle = "N", .question = "Q?", .haystack = "dir", .runs = 1};
    char *page = render(&h);
    /* six cells and the legend's bar */
    assert_int_equal(count(page, "<rect x="), 7);
    assert_int_equal(count(page, "<g><rect"), 6);
    /* scores 0, 0.25, 0.5, 0.75, 1: red, ..., yellow, ..., green; the last cell not run */
    assert_non_null(strstr(page, "fill=\"#d73027\""));
    assert_non_null(strstr(page, "fill=\"#fee08b\""));
    assert_non_null(strstr(page, "fill=\"#1a9850\" stroke"));
    assert_int_equal(count(page, "fill=\"#dddddd\""), 1);
    assert_non_null(strstr(page, "<title>length 2000, depth 100%: not run</title>"));
    assert_non_null(strstr(page, "<title>length 1000, depth 50%: score 0.250\nrun 0 (990 tokens, needle at 49.5%): "
                                 "a &lt;b&gt; &amp; &quot;c&quot;</title>"));
    /* the settings, and the mean over the five cells that ran: (0 + .25 + .5 + .75 + 1) / 5 */
    assert_non_null(strstr(page, "<title>Needle in a haystack: m, snapkv + VECTOR</title>"));
    assert_non_null(strstr(page, "p<sub>c</sub> = 0.5, query-agnostic compression<br>\np<sub>a</sub> = 0.25<br>\n"));
    assert_non_null(strstr(page, "mean over 1 run; overall mean 0.500<br>\nhaystack: dir</div>"));
    free(page);
}

static void heatmap_without_press_has_no_compression_line(void **state)
{
    (void)state;
    const double lengths[] = {1000}, depths[] = {50};
    viz_niah_cell cell = {.score = NAN};
    viz_niah_heatmap h = {.title = "T", .lengths = lengths, .n_lengths = 1, .depths = depths, .n_depths = 1,
                          .cells = &cell, .needle = "N", .question = "Q?", .haystack = "dir", .runs = 3};
    char *page = render(&h);
    assert_null(strstr(page, "p<sub>c</sub>"));
    assert_null(strstr(page, "p<sub>a</sub>"));
    assert_non_null(strstr(page, "mean over 3 runs; overall mean 0.000"));
    assert_int_equal(count(page, "<rect x="), 2);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(heatmap_has_a_cell_per_length_and_depth),
        cmocka_unit_test(heatmap_without_press_has_no_compression_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
