/* `vkvector viz --term`: the tier dump summarised in a terminal. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "viz/viz.h"
#include "core/out_file.h"

#define BAR_WIDTH 32

void viz_fmt_bytes(char *buf, size_t n, double b)
{
    if (b < 1024) snprintf(buf, n, "%.0f B", b);
    else if (b < 1024.0 * 1024) snprintf(buf, n, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

/* One bar of BAR_WIDTH cells split between the tiers by count. In colour,
 * full blocks: blue retained, yellow approximated, grey evicted; else letters. */
static void print_bar(FILE *f, uint64_t r, uint64_t a, uint64_t e, bool color)
{
    uint64_t tot = r + a + e;
    int cr = tot ? (int)llround((double)BAR_WIDTH * (double)r / (double)tot) : 0;
    int ca = tot ? (int)llround((double)BAR_WIDTH * (double)(r + a) / (double)tot) - cr : 0;
    /* a tier that holds anything gets at least one cell */
    if (r && !cr) cr = 1;
    if (a && !ca) ca = 1;
    if (cr + ca > BAR_WIDTH) { if (ca > cr) ca = BAR_WIDTH - cr; else cr = BAR_WIDTH - ca; }
    int ce = BAR_WIDTH - cr - ca;
    static const char *const col[3] = {"\x1b[34m", "\x1b[33m", "\x1b[90m"};
    static const char letter[3] = {'R', 'A', 'E'};
    const int cells[3] = {cr, ca, ce};
    for (int t = 0; t < 3; t++) {
        if (!cells[t]) continue;
        if (color) fputs(col[t], f);
        for (int i = 0; i < cells[t]; i++) {
            if (color) fputs("\xe2\x96\x88", f); /* U+2588 full block */
            else fputc(letter[t], f);
        }
        if (color) fputs("\x1b[0m", f);
    }
}

static void print_count(FILE *f, uint64_t c, uint64_t tot)
{
    fprintf(f, "  %7llu %5.1f%%", (unsigned long long)c, tot ? 100.0 * (double)c / (double)tot : 0.0);
}

static void print_num(FILE *f, double v, int width, const char *fmt)
{
    if (isfinite(v)) fprintf(f, fmt, width, v);
    else fprintf(f, "%*s", width, "-");
}

void viz_print_term(FILE *f, const viz_dump *d, bool color, bool per_head)
{
    const char *bold = color ? "\x1b[1m" : "", *reset = color ? "\x1b[0m" : "";
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    /* the dump's strings are shown with their control characters escaped:
     * a dump is untrusted input, and this goes to a terminal */
    char model[1024], arch[128], kv_type[128], press[256];
    fprintf(f, "%stier dump%s  %s (%s): %u layers x %u KV heads x head_dim %u, KV cache %s\n", bold, reset,
            vkv_printable(d->model, model, sizeof model), vkv_printable(d->arch, arch, sizeof arch), d->n_layer,
            d->n_kv_head, d->head_dim, vkv_printable(d->kv_type, kv_type, sizeof kv_type));
    fprintf(f, "press %s, p_c %.3g, p_a %.3g, VECTOR %s, %s, %u context tokens\n",
            vkv_printable(d->press, press, sizeof press), d->compression_ratio,
            d->approx_ratio, d->vector ? "on" : "off", d->query_aware ? "query-aware" : "query-agnostic",
            d->n_context);
    if (color)
        fprintf(f, "legend: \x1b[34m\xe2\x96\x88\x1b[0m retained (K+V)  \x1b[33m\xe2\x96\x88\x1b[0m approximated "
                   "(K only, V = W K)  \x1b[90m\xe2\x96\x88\x1b[0m evicted\n\n");
    else
        fprintf(f, "legend: R retained (K+V), A approximated (K only, V = W K), E evicted\n\n");

    double layer_unc = d->n_layer ? (double)d->bytes_uncompressed / d->n_layer : 0;
    fprintf(f, "%slayer  %-*s%16s%16s%16s  %10s %6s  %-22s %8s%s\n", bold, BAR_WIDTH, "tiers (all heads)",
            "retained", "approximated", "evicted", "kept", "of it", "R2 apx mean (min..max)", "E", reset);
    uint64_t tr = 0, ta = 0, te = 0;
    double esum = 0;
    int en = 0;
    for (uint32_t l = 0; l < d->n_layers; l++) {
        const viz_layer *ly = &d->layers[l];
        uint64_t r, a, e;
        viz_layer_counts(d, l, &r, &a, &e);
        tr += r; ta += a; te += e;
        uint64_t tot = r + a + e, kept = ly->bytes_retained + ly->bytes_approximated;
        double rmin = INFINITY, rmax = -INFINITY, rsum = 0;
        int rn = 0;
        for (size_t h = 0; h < ly->n_heads; h++) {
            double v = ly->heads[h].r2;
            if (!isfinite(v)) continue;
            rsum += v; rn++;
            if (v < rmin) rmin = v;
            if (v > rmax) rmax = v;
        }
        fprintf(f, "%5u  ", l);
        print_bar(f, r, a, e, color);
        print_count(f, r, tot);
        print_count(f, a, tot);
        print_count(f, e, tot);
        viz_fmt_bytes(b1, sizeof b1, (double)kept);
        fprintf(f, "  %10s %5.1f%%  ", b1, layer_unc > 0 ? 100.0 * (double)kept / layer_unc : 0.0);
        if (rn) fprintf(f, "%6.3f (%6.3f..%6.3f) ", rsum / rn, rmin, rmax);
        else fprintf(f, "%-23s", "     -");
        print_num(f, ly->distortion, 8, "%*.4f");
        if (isfinite(ly->distortion)) { esum += ly->distortion; en++; }
        fputc('\n', f);
        if (!per_head) continue;
        for (size_t h = 0; h < ly->n_heads; h++) {
            const viz_head *hd = &ly->heads[h];
            uint64_t ht = (uint64_t)hd->n_retained + hd->n_approximated + hd->n_evicted;
            fprintf(f, "   h%-2zu ", h);
            print_bar(f, hd->n_retained, hd->n_approximated, hd->n_evicted, color);
            print_count(f, hd->n_retained, ht);
            print_count(f, hd->n_approximated, ht);
            print_count(f, hd->n_evicted, ht);
            fprintf(f, "  %19s", "");
            if (isfinite(hd->r2)) fprintf(f, "%6.3f   rel err %.3g", hd->r2, hd->rel_err);
            fputc('\n', f);
        }
    }
    uint64_t tt = tr + ta + te;
    fprintf(f, "%s  all  ", bold);
    print_bar(f, tr, ta, te, color);
    print_count(f, tr, tt);
    print_count(f, ta, tt);
    print_count(f, te, tt);
    viz_fmt_bytes(b1, sizeof b1, (double)d->bytes_kept);
    fprintf(f, "  %10s %5.1f%%  %-23s", b1,
            d->bytes_uncompressed ? 100.0 * (double)d->bytes_kept / (double)d->bytes_uncompressed : 0.0, "");
    if (en) fprintf(f, "%8.4f", esum / en);
    fprintf(f, "%s\n\n", reset);

    viz_fmt_bytes(b1, sizeof b1, (double)d->bytes_uncompressed);
    viz_fmt_bytes(b2, sizeof b2, (double)d->bytes_retained);
    viz_fmt_bytes(b3, sizeof b3, (double)d->bytes_approximated);
    viz_fmt_bytes(b4, sizeof b4, (double)d->bytes_kept);
    viz_fmt_bytes(b5, sizeof b5, (double)d->bytes_w);
    double unc = (double)d->bytes_uncompressed;
    fprintf(f, "memory: uncompressed %s; kept %s = retained K+V %s + approximated K %s\n", b1, b4, b2, b3);
    if (unc > 0)
        fprintf(f, "compression achieved: %s%.1f%%%s (target p_c %.1f%%); with the OLS maps (%s) %.1f%%\n", bold,
                100.0 * (1 - (double)d->bytes_kept / unc), reset, 100.0 * d->compression_ratio, b5,
                100.0 * (1 - (double)(d->bytes_kept + d->bytes_w) / unc));
    if (en) fprintf(f, "distortion E (layer mean): %.4f   (E = sum over evicted w + sum over approximated w*|V-V^|^2/|V|^2)\n",
                    esum / en);
}
