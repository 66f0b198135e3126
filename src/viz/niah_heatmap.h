/* The needle in a haystack's heatmap (vkvector niah --html): one
 * self-contained HTML page, a header of the settings and an SVG grid of
 * prompt length (x) by needle depth (y), each cell coloured by its score
 * (red 0, yellow 0.5, green 1) with the runs' answers as its tooltip.
 * Its input is its own: the harness fills it from its grid. */
#ifndef VKV_VIZ_NIAH_HEATMAP_H
#define VKV_VIZ_NIAH_HEATMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* One cell's runs. */
typedef struct viz_niah_cell {
    double score;                /* mean over the runs, 0..1 (ROUGE-L F); NaN when not run */
    size_t n_runs;               /* 0: not run (grey, "not run") */
    const size_t *prompt_tokens; /* [n_runs] each run's prompt, in tokens */
    const double *needle_depth;  /* [n_runs] where the needle went, in percent of the haystack */
    char *const *answers;        /* [n_runs] the answers; a NULL one shows as empty */
} viz_niah_cell;

typedef struct viz_niah_heatmap {
    const char *title;           /* the page's title and heading */
    const double *lengths;       /* [n_lengths] prompt lengths in tokens: the columns */
    size_t n_lengths;
    const double *depths;        /* [n_depths] needle depths in percent: the rows */
    size_t n_depths;
    const viz_niah_cell *cells;  /* [n_lengths * n_depths], length-major */
    /* the header's lines */
    const char *press;           /* NULL: no compression line */
    double compression_ratio;    /* p_c, shown with press */
    bool query_aware;            /* with press: query-aware or query-agnostic */
    bool vector;                 /* VECTOR: a p_a line */
    double pa;                   /* p_a, shown with vector */
    const char *needle, *question, *haystack;
    size_t runs;                 /* runs per cell */
} viz_niah_heatmap;

/* Writes the page to f; the caller checks ferror(f). The overall mean is
 * over the cells that ran. */
void viz_write_niah_heatmap(FILE *f, const viz_niah_heatmap *h);

#endif
