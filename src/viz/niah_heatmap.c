/* The needle in a haystack's heatmap page: plain HTML and inline SVG, no
 * script, nothing fetched from the network. */
#include "viz/niah_heatmap.h"

#include <math.h>

#include "core/html.h"

/* Red (0) -> yellow (0.5) -> green (1); grey when not run. */
static void score_color(double s, char *buf, size_t n)
{
    static const double stops[3][3] = {{215, 48, 39}, {254, 224, 139}, {26, 152, 80}};
    if (isnan(s)) {
        snprintf(buf, n, "#dddddd");
        return;
    }
    s = s < 0 ? 0 : s > 1 ? 1 : s;
    int k = s < 0.5 ? 0 : 1;
    double t = s < 0.5 ? s / 0.5 : (s - 0.5) / 0.5;
    int rgb[3];
    for (int i = 0; i < 3; i++) rgb[i] = (int)lround(stops[k][i] + (stops[k + 1][i] - stops[k][i]) * t);
    snprintf(buf, n, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

static void write_header(FILE *f, const viz_niah_heatmap *h)
{
    double sum = 0;
    size_t n_sum = 0;
    for (size_t i = 0; i < h->n_lengths * h->n_depths; i++)
        if (h->cells[i].n_runs) {
            sum += h->cells[i].score;
            n_sum++;
        }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    vkv_html_text(f, h->title);
    fprintf(f, "</title>\n<style>\nbody{font-family:system-ui,sans-serif;margin:24px;color:#222}\n"
               "h1{font-size:20px}\n.meta{color:#555;font-size:14px;line-height:1.5}\n"
               "svg text{font-family:system-ui,sans-serif}\n</style>\n</head>\n<body>\n<h1>");
    vkv_html_text(f, h->title);
    fprintf(f, "</h1>\n<div class=\"meta\">");
    if (h->press)
        fprintf(f, "p<sub>c</sub> = %g, %s compression<br>\n", h->compression_ratio,
                h->query_aware ? "query-aware" : "query-agnostic");
    if (h->vector) fprintf(f, "p<sub>a</sub> = %g<br>\n", h->pa);
    fprintf(f, "needle: &ldquo;");
    vkv_html_text(f, h->needle);
    fprintf(f, "&rdquo;<br>\nquestion: &ldquo;");
    vkv_html_text(f, h->question);
    fprintf(f, "&rdquo;<br>\nscore: ROUGE-L F of the answer against the needle, mean over %zu run%s; "
               "overall mean %.3f<br>\nhaystack: ", h->runs, h->runs == 1 ? "" : "s", n_sum ? sum / n_sum : 0.0);
    vkv_html_text(f, h->haystack);
    fprintf(f, "</div>\n");
}

void viz_write_niah_heatmap(FILE *f, const viz_niah_heatmap *h)
{
    const size_t nl = h->n_lengths, nd = h->n_depths;
    const int cw = nl > 12 ? 56 : 72, ch = 34, left = 80, top = 60, legend_w = 24;
    const int w = left + (int)nl * cw + 110, hgt = top + (int)nd * ch + 70;
    write_header(f, h);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" aria-label=\"heatmap\">\n", w, hgt, w, hgt);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">prompt length (tokens)</text>\n",
            left + (int)nl * cw / 2, top + (int)nd * ch + 45);
    fprintf(f, "<text x=\"16\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">"
               "needle depth (%%)</text>\n", top + (int)nd * ch / 2, top + (int)nd * ch / 2);
    for (size_t li = 0; li < nl; li++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                left + (int)li * cw + cw / 2, top + (int)nd * ch + 16, h->lengths[li]);
    for (size_t di = 0; di < nd; di++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.0f</text>\n", left - 6,
                top + (int)di * ch + ch / 2 + 4, h->depths[di]);
    for (size_t li = 0; li < nl; li++)
        for (size_t di = 0; di < nd; di++) {
            const viz_niah_cell *c = &h->cells[li * nd + di];
            double s = c->score;
            char col[16];
            score_color(s, col, sizeof col);
            int x = left + (int)li * cw, y = top + (int)di * ch;
            fprintf(f, "<g><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"/>", x, y, cw,
                    ch, col);
            fprintf(f, "<title>length %g, depth %g%%: ", h->lengths[li], h->depths[di]);
            if (c->n_runs) {
                fprintf(f, "score %.3f", s);
                for (size_t r = 0; r < c->n_runs; r++) {
                    fprintf(f, "\nrun %zu (%zu tokens, needle at %.1f%%): ", r, c->prompt_tokens[r], c->needle_depth[r]);
                    vkv_html_text(f, c->answers[r] ? c->answers[r] : "");
                }
            } else fprintf(f, "not run");
            fprintf(f, "</title>");
            if (c->n_runs)
                fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" fill=\"%s\">%.2f</text>",
                        x + cw / 2, y + ch / 2 + 4, s < 0.2 || s > 0.85 ? "#fff" : "#222", s);
            fprintf(f, "</g>\n");
        }
    /* the legend: the colour scale beside the grid */
    int lx = left + (int)nl * cw + 30, lh = (int)nd * ch;
    fprintf(f, "<defs><linearGradient id=\"g\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
               "<stop offset=\"0\" stop-color=\"#d73027\"/><stop offset=\"0.5\" stop-color=\"#fee08b\"/>"
               "<stop offset=\"1\" stop-color=\"#1a9850\"/></linearGradient></defs>\n");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#g)\"/>\n", lx, top, legend_w, lh);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">1.0</text>\n", lx + legend_w + 4, top + 10);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0.5</text>\n", lx + legend_w + 4, top + lh / 2 + 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0.0</text>\n", lx + legend_w + 4, top + lh);
    fprintf(f, "</svg>\n</body>\n</html>\n");
}
