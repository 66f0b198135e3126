/* `vkvector viz`: the tier memory visualizer. The HTML report's template
 * (src/viz/assets/report.{html,css,js}) is embedded at build time by
 * src/viz/assets/embed_assets.py, split where the data goes. */
#ifndef VKV_VIZ_H
#define VKV_VIZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "viz/viz_dump.h"

extern const unsigned char vkv_viz_html_head[];
extern const size_t vkv_viz_html_head_len;
extern const unsigned char vkv_viz_html_tail[];
extern const size_t vkv_viz_html_tail_len;

/* How the report stores each position's score and residual. */
typedef enum viz_values {
    VIZ_VALUES_F16,  /* f16 with a power-of-two scale per (layer, head): ~3 significant digits */
    VIZ_VALUES_U8,   /* u8: scores affine, residuals log-scaled per (layer, head) */
    VIZ_VALUES_NONE, /* tiers only */
} viz_values;

typedef struct viz_html_opts {
    viz_values values;
    const char *source;   /* the dump's file name, shown in the report */
} viz_html_opts;

/* Writes the self-contained report; *size gets the file's size. */
vkv_status viz_write_html(const viz_dump *d, const char *path, const viz_html_opts *o, uint64_t *size);

/* The terminal summary: per-layer tier bars (ANSI colour when color), token
 * counts, bytes, R² and E; per_head adds a line per KV head. */
void viz_print_term(FILE *f, const viz_dump *d, bool color, bool per_head);

/* "1.5 KiB" */
void viz_fmt_bytes(char *buf, size_t n, double bytes);

#endif
