/* vkvector niah: needle in a haystack. Builds prompts of given token lengths
 * from a haystack of text files (the Paul Graham essays), hides a needle
 * sentence at given depths (at a sentence boundary), asks for it, and scores
 * the answer by ROUGE-L F against the needle (the `rouge` package's, as in
 * LongBench). Runs differ by where in the haystack the text starts. Writes
 * the grid as JSON and, with --html, a self-contained heatmap page. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/eval_cli.h"
#include "core/file.h"
#include "core/json_write.h"
#include "core/strbuf.h"
#include "session/session.h"
#include "eval/metrics.h"
#include "eval/kvpress_prompt.h"
#include "eval/prompt.h"

#define DEFAULT_NEEDLE "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
#define DEFAULT_QUESTION "What is the best thing to do in San Francisco?"
#define INTRO "You are a helpful AI bot that answers questions for a user. Keep your response short and direct.\n\n<context>\n"
#define OUTRO "\n</context>\n\n"
#define ASK_SUFFIX " Don't give information outside the document or repeat your findings."

/* ---- specs ---- */

typedef struct dlist {
    double v[4096];
    size_t n;
} dlist;

/* "a,b,c", "a" or "a:b:c" (step = true: c is the step; else c values evenly spaced). */
static bool parse_spec(const char *s, bool step, double lo, double hi, dlist *out)
{
    out->n = 0;
    if (strchr(s, ':')) {
        double a, b, c;
        char extra;
        if (sscanf(s, "%lf:%lf:%lf%c", &a, &b, &c, &extra) != 3 || a < lo || b > hi || b < a) return false;
        if (step) {
            if (c <= 0) return false;
            for (double x = a; x <= b + 1e-9 && out->n < 4096; x += c) out->v[out->n++] = x;
        } else {
            if (c < 1 || c > 4096 || c != floor(c)) return false;
            size_t n = (size_t)c;
            for (size_t i = 0; i < n; i++) out->v[out->n++] = n == 1 ? a : a + (b - a) * (double)i / (double)(n - 1);
        }
        return out->n > 0;
    }
    char *copy = strdup(s);
    if (!copy) return false;
    bool ok = true;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
        double x;
        ok = cli_parse_f64(t, lo, hi, &x) && out->n < 4096;
        if (ok) out->v[out->n++] = x;
    }
    free(copy);
    return ok && out->n > 0;
}

/* ---- haystack ---- */

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The text files of dir (*.txt; every regular file when there is none),
 * concatenated in name order with blank lines between. */
static char *read_haystack(const char *dir, size_t *len)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "vkvector niah: cannot open the haystack directory '%s': %s\n", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0, n_txt = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *g);
            if (!g) break;
            names = g;
        }
        size_t l = strlen(de->d_name);
        n_txt += l > 4 && !strcmp(de->d_name + l - 4, ".txt");
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    vkv_strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        size_t l = strlen(names[i]);
        if (n_txt && !(l > 4 && !strcmp(names[i] + l - 4, ".txt"))) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) || !S_ISREG(sb.st_mode)) continue;
        size_t fl;
        char *t = cli_read_file(path, &fl);
        if (!t) {
            fprintf(stderr, "vkvector niah: %s; the file is skipped\n", vkv_last_error());
            continue;
        }
        /* no context needs more haystack than one document's cap: the rest
         * of the directory would only cost host memory */
        if (b.n + 2 + fl > VKV_MAX_DOC_BYTES) {
            fprintf(stderr, "vkvector niah: the haystack reaches %zu MiB at '%s': it and the files after it are "
                            "not read\n", VKV_MAX_DOC_BYTES >> 20, path);
            free(t);
            break;
        }
        if (b.n) vkv_strbuf_puts(&b, "\n\n");
        vkv_strbuf_put(&b, t, fl);
        free(t);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (b.oom || !b.n) {
        fprintf(stderr, "vkvector niah: no text in the haystack directory '%s'\n", dir);
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static bool sentence_end_at(const char *t, size_t len, size_t i)
{
    if (i == 0 || i > len) return false;
    char c = t[i - 1];
    if (c != '.' && c != '?' && c != '!') return false;
    return i == len || is_ws(t[i]) || (c == '.' && t[i] >= 'A' && t[i] <= 'Z');
}

/* The end of the last sentence that ends at or before `at` (just after its
 * '.', '?' or '!'), or 0. A '.' directly followed by a capital also counts
 * (the essays' paragraph joins). */
static size_t sentence_end_before(const char *t, size_t len, size_t at)
{
    if (at > len) at = len;
    for (size_t i = at; i > 0; i--)
        if (sentence_end_at(t, len, i)) return i;
    return 0;
}

/* The sentence end nearest to `at` in [0, len] (0 and len count as ends). */
static size_t sentence_end_near(const char *t, size_t len, size_t at)
{
    size_t before = sentence_end_before(t, len, at), after = at;
    while (after < len && !sentence_end_at(t, len, after)) after++;
    return at - before <= after - at ? before : after;
}

/* One run's haystack: the text from an offset (at a paragraph start),
 * wrapped around and repeated until it has at least `bytes` bytes. */
static char *run_text(const char *hay, size_t hay_len, size_t offset, size_t bytes, size_t *len)
{
    if (offset) {
        const char *p = strstr(hay + offset, "\n\n");
        offset = p ? (size_t)(p - hay) + 2 : 0;
    }
    vkv_strbuf b = {0};
    vkv_strbuf_put(&b, hay + offset, hay_len - offset);
    while (b.n < bytes && !b.oom) {
        vkv_strbuf_puts(&b, "\n\n");
        vkv_strbuf_put(&b, hay, hay_len);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

/* ---- the grid ---- */

/* kvpress's needle in a haystack (the paper's), or this harness's own. */
enum { NIAH_PROTOCOL_KVPRESS, NIAH_PROTOCOL_OWN };
static const char *const protocol_names[] = {"kvpress", "vkvector"};
/* kvpress's wrapper around the haystack, and the tokens it leaves for the
 * prompt's other parts (its "system prompts and other overhead"). */
#define KVPRESS_BOOK_OPEN "This is a very long story book: <book> "
#define KVPRESS_BOOK_CLOSE " </book>."
#define KVPRESS_OVERHEAD 150

typedef struct cell {
    double length, depth;
    double *scores, *needle_depth;
    size_t *prompt_tokens;
    char **answers;
    size_t n_done;
} cell;

typedef struct niah {
    const eval_opts *o;
    eval_env *e;
    const char *needle, *question, *haystack_dir, *out_path, *html_path, *answer_prefix;
    int protocol;              /* NIAH_PROTOCOL_* */
    dlist lengths, depths;
    size_t runs, n_predict;
    uint64_t seed;
    bool quiet;
    cell *cells;               /* [n_lengths * n_depths], length-major */
    /* set once the session is open */
    bool chat;                 /* prompts in the model's chat template */
    vkv_strbuf ask;            /* the question as asked after the haystack */
    size_t overhead, n_needle; /* tokens of the prompt without the haystack; of the needle */
    size_t kvpress_question;   /* kvpress: a bound on the question part's tokens */
    vkv_compression comp;
    vkv_gen_params gen;
} niah;

/* One run's haystack text and where each of its tokens ends. */
typedef struct haystack_run {
    char *text;
    size_t len;
    int32_t *ids;              /* [n_ids] */
    size_t *ends;              /* [n_ids] byte offsets */
    size_t n_ids;
} haystack_run;

static double cell_mean(const cell *c)
{
    double s = 0;
    for (size_t r = 0; r < c->n_done; r++) s += c->scores[r];
    return c->n_done ? s / c->n_done : NAN;
}

static bool write_json(const niah *g)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", g->out_path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "vkvector niah: cannot write '%s': %s\n", tmp, strerror(errno));
        return false;
    }
    vkv_json_writer w;
    vkv_json_init(&w, f, true);
    vkv_json_begin_object(&w);
    eval_write_settings(&w, g->o, g->e);
    vkv_json_key(&w, "protocol");
    vkv_json_str(&w, protocol_names[g->protocol]);
    vkv_json_key(&w, "answer_prefix");
    vkv_json_str(&w, g->answer_prefix);
    vkv_json_key(&w, "needle");
    vkv_json_str(&w, g->needle);
    vkv_json_key(&w, "question");
    vkv_json_str(&w, g->question);
    vkv_json_key(&w, "haystack");
    vkv_json_str(&w, g->haystack_dir);
    vkv_json_key(&w, "runs");
    vkv_json_uint(&w, g->runs);
    vkv_json_key(&w, "seed");
    vkv_json_uint(&w, g->seed);
    vkv_json_key(&w, "n_predict");
    vkv_json_uint(&w, g->n_predict);
    vkv_json_key(&w, "context");
    vkv_json_uint(&w, g->e->n_ctx);
    vkv_json_key(&w, "chat_template");
    if (g->e->s->chat != VKV_CHAT_UNKNOWN) vkv_json_str(&w, vkv_chat_template_name(g->e->s->chat));
    else vkv_json_null(&w);
    vkv_json_key(&w, "metric");
    vkv_json_str(&w, "rouge-l f (rouge package, as LongBench), 0..1");
    vkv_json_key(&w, "lengths");
    vkv_json_begin_array(&w);
    for (size_t i = 0; i < g->lengths.n; i++) vkv_json_num(&w, g->lengths.v[i]);
    vkv_json_end_array(&w);
    vkv_json_key(&w, "depths");
    vkv_json_begin_array(&w);
    for (size_t i = 0; i < g->depths.n; i++) vkv_json_num(&w, g->depths.v[i]);
    vkv_json_end_array(&w);
    double sum = 0;
    size_t n_sum = 0;
    vkv_json_key(&w, "cells");
    vkv_json_begin_array(&w);
    for (size_t i = 0; i < g->lengths.n * g->depths.n; i++) {
        const cell *c = &g->cells[i];
        vkv_json_begin_object(&w);
        vkv_json_key(&w, "length");
        vkv_json_num(&w, c->length);
        vkv_json_key(&w, "depth");
        vkv_json_num(&w, c->depth);
        vkv_json_key(&w, "score");
        vkv_json_num(&w, cell_mean(c));
        vkv_json_key(&w, "scores");
        vkv_json_begin_array(&w);
        for (size_t r = 0; r < c->n_done; r++) vkv_json_num(&w, c->scores[r]);
        vkv_json_end_array(&w);
        vkv_json_key(&w, "prompt_tokens");
        vkv_json_begin_array(&w);
        for (size_t r = 0; r < c->n_done; r++) vkv_json_uint(&w, c->prompt_tokens[r]);
        vkv_json_end_array(&w);
        vkv_json_key(&w, "needle_depth");
        vkv_json_begin_array(&w);
        for (size_t r = 0; r < c->n_done; r++) vkv_json_num(&w, c->needle_depth[r]);
        vkv_json_end_array(&w);
        vkv_json_key(&w, "answers");
        vkv_json_begin_array(&w);
        for (size_t r = 0; r < c->n_done; r++) vkv_json_str(&w, c->answers[r] ? c->answers[r] : "");
        vkv_json_end_array(&w);
        vkv_json_end_object(&w);
        if (c->n_done) {
            sum += cell_mean(c);
            n_sum++;
        }
    }
    vkv_json_end_array(&w);
    vkv_json_key(&w, "mean");
    vkv_json_num(&w, n_sum ? sum / n_sum : NAN);
    vkv_json_end_object(&w);
    fputc('\n', f);
    bool ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, g->out_path) != 0) {
        fprintf(stderr, "vkvector niah: error writing '%s': %s\n", g->out_path, strerror(errno));
        return false;
    }
    return true;
}

/* Red (0) -> yellow (0.5) -> green (1). */
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

static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static bool write_html(const niah *g)
{
    FILE *f = fopen(g->html_path, "wb");
    if (!f) {
        fprintf(stderr, "vkvector niah: cannot write '%s': %s\n", g->html_path, strerror(errno));
        return false;
    }
    const size_t nl = g->lengths.n, nd = g->depths.n;
    const int cw = nl > 12 ? 56 : 72, ch = 34, left = 80, top = 60, legend_w = 24;
    const int w = left + (int)nl * cw + 110, h = top + (int)nd * ch + 70;
    double sum = 0;
    size_t n_sum = 0;
    for (size_t i = 0; i < nl * nd; i++)
        if (g->cells[i].n_done) {
            sum += cell_mean(&g->cells[i]);
            n_sum++;
        }
    char title[1024];
    snprintf(title, sizeof title, "Needle in a haystack: %s, %s%s", g->e->s->model_name,
             g->o->po.press ? g->o->po.press : "full cache", g->o->po.vector ? " + VECTOR" : "");
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    html_text(f, title);
    fprintf(f, "</title>\n<style>\nbody{font-family:system-ui,sans-serif;margin:24px;color:#222}\n"
               "h1{font-size:20px}\n.meta{color:#555;font-size:14px;line-height:1.5}\n"
               "svg text{font-family:system-ui,sans-serif}\n</style>\n</head>\n<body>\n<h1>");
    html_text(f, title);
    fprintf(f, "</h1>\n<div class=\"meta\">");
    if (g->o->po.press)
        fprintf(f, "p<sub>c</sub> = %g%s, %s compression<br>\n", g->o->po.compression_ratio,
                g->o->po.vector ? "" : "", g->o->po.query_aware ? "query-aware" : "query-agnostic");
    if (g->o->po.vector) fprintf(f, "p<sub>a</sub> = %g<br>\n", eval_effective_pa(g->o));
    fprintf(f, "needle: &ldquo;");
    html_text(f, g->needle);
    fprintf(f, "&rdquo;<br>\nquestion: &ldquo;");
    html_text(f, g->question);
    fprintf(f, "&rdquo;<br>\nscore: ROUGE-L F of the answer against the needle, mean over %zu run%s; "
               "overall mean %.3f<br>\nhaystack: ", g->runs, g->runs == 1 ? "" : "s", n_sum ? sum / n_sum : 0.0);
    html_text(f, g->haystack_dir);
    fprintf(f, "</div>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" aria-label=\"heatmap\">\n", w, h, w, h);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">prompt length (tokens)</text>\n",
            left + (int)nl * cw / 2, top + (int)nd * ch + 45);
    fprintf(f, "<text x=\"16\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">"
               "needle depth (%%)</text>\n", top + (int)nd * ch / 2, top + (int)nd * ch / 2);
    for (size_t li = 0; li < nl; li++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                left + (int)li * cw + cw / 2, top + (int)nd * ch + 16, g->lengths.v[li]);
    for (size_t di = 0; di < nd; di++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">%.0f</text>\n", left - 6,
                top + (int)di * ch + ch / 2 + 4, g->depths.v[di]);
    for (size_t li = 0; li < nl; li++)
        for (size_t di = 0; di < nd; di++) {
            const cell *c = &g->cells[li * nd + di];
            double s = cell_mean(c);
            char col[16];
            score_color(s, col, sizeof col);
            int x = left + (int)li * cw, y = top + (int)di * ch;
            fprintf(f, "<g><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"/>", x, y, cw,
                    ch, col);
            fprintf(f, "<title>length %g, depth %g%%: ", c->length, c->depth);
            if (c->n_done) {
                fprintf(f, "score %.3f", s);
                for (size_t r = 0; r < c->n_done; r++) {
                    fprintf(f, "\nrun %zu (%zu tokens, needle at %.1f%%): ", r, c->prompt_tokens[r], c->needle_depth[r]);
                    html_text(f, c->answers[r] ? c->answers[r] : "");
                }
            } else fprintf(f, "not run");
            fprintf(f, "</title>");
            if (c->n_done)
                fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" fill=\"%s\">%.2f</text>",
                        x + cw / 2, y + ch / 2 + 4, s < 0.2 || s > 0.85 ? "#fff" : "#222", s);
            fprintf(f, "</g>\n");
        }
    /* legend */
    int lx = left + (int)nl * cw + 30, lh = (int)nd * ch;
    fprintf(f, "<defs><linearGradient id=\"g\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
               "<stop offset=\"0\" stop-color=\"#d73027\"/><stop offset=\"0.5\" stop-color=\"#fee08b\"/>"
               "<stop offset=\"1\" stop-color=\"#1a9850\"/></linearGradient></defs>\n");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#g)\"/>\n", lx, top, legend_w, lh);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">1.0</text>\n", lx + legend_w + 4, top + 10);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0.5</text>\n", lx + legend_w + 4, top + lh / 2 + 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0.0</text>\n", lx + legend_w + 4, top + lh);
    fprintf(f, "</svg>\n</body>\n</html>\n");
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok) fprintf(stderr, "vkvector niah: error writing '%s'\n", g->html_path);
    return ok;
}

/* Token count of text (no BOS). */
static vkv_status count_tokens(const vkv_tokenizer *tok, const char *text, size_t *n)
{
    int32_t *ids = NULL;
    vkv_status st = vkv_tokenize(tok, text, strlen(text), false, false, &ids, n);
    free(ids);
    return st;
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_niah_options(int argc, char **argv, eval_opts *o, niah *g)
{
    eval_opts_init(o);
    *g = (niah){.o = o, .needle = DEFAULT_NEEDLE, .question = DEFAULT_QUESTION, .runs = 1, .n_predict = 64,
                .answer_prefix = ""};
    const char *lengths = "3000:30000:3000", *depths = "0:100:10";
    int64_t runs = 1, n_predict = 64;
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "--haystack", .metavar = "DIR", .dest = &g->haystack_dir,
         .help = "text files of the haystack, concatenated in name order (default:\n../shared/data/paul_graham_essays)"},
        {.type = CLI_STR, .names = "--lengths", .metavar = "SPEC", .dest = &lengths,
         .help = "prompt lengths in tokens: START:STOP:STEP (STOP included) or a list a,b,c\n"
                 "(default 3000:30000:3000); lengths over the context are capped to it"},
        {.type = CLI_STR, .names = "--depths", .metavar = "SPEC", .dest = &depths,
         .help = "needle depths in percent of the haystack: START:STOP:COUNT (COUNT evenly\n"
                 "spaced values, STOP included) or a list (default 0:100:10)"},
        {.type = CLI_ENUM, .names = "--protocol", .dest = &g->protocol, .choices = "kvpress|vkvector",
         .help = "kvpress's (the paper's, default): the length is max_context_length, the haystack\n"
                 "its first length - needle - 150 tokens with the needle at a token index, wrapped\n"
                 "as a story book; the question and answer prefix after compression. vkvector's:\n"
                 "the whole prompt's length, the needle at a sentence boundary"},
        {.type = CLI_STR, .names = "--answer-prefix", .metavar = "TEXT", .dest = &g->answer_prefix,
         .help = "kvpress: text after the question's chat turn, where the answer starts (default none)"},
        {.type = CLI_I64, .names = "--runs", .metavar = "N", .dest = &runs, .min = 1, .max = 1000,
         .help = "runs per cell, each from another offset in the haystack (default 1)"},
        {.type = CLI_U64, .names = "--seed", .metavar = "S", .dest = &g->seed, .min = 0, .max = (double)UINT64_MAX,
         .help = "shifts the runs' offsets (default 0)"},
        {.type = CLI_STR, .names = "--needle", .metavar = "TEXT", .dest = &g->needle,
         .help = "the needle sentence (default: the San Francisco sandwich)"},
        {.type = CLI_STR, .names = "--question", .metavar = "TEXT", .dest = &g->question,
         .help = "the question (default: \"" DEFAULT_QUESTION "\")"},
        {.type = CLI_I64, .names = "-n|--n-predict", .metavar = "N", .dest = &n_predict, .min = 1, .max = 1 << 16,
         .help = "answer tokens at most (default 64)"},
        {.type = CLI_STR, .names = "--out", .metavar = "FILE", .dest = &g->out_path,
         .help = "the grid as JSON (rewritten as cells complete)"},
        {.type = CLI_STR, .names = "--html", .metavar = "FILE", .dest = &g->html_path,
         .help = "a self-contained heatmap page"},
        {.type = CLI_FLAG, .names = "--quiet", .dest = &g->quiet, .help = "no line per cell"},
        EVAL_OPTIONS(*o),
    };
    int rc = cli_parse("niah", "vkvector niah --out GRID.json [options]\n\n"
                       "Needle in a haystack: for every prompt length x needle depth, hides the needle in the haystack text,\n"
                       "asks the question, and scores the answer by ROUGE-L F against the needle (mean over the runs).",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
    g->runs = (size_t)runs;
    g->n_predict = (size_t)n_predict;
    if (!g->out_path) return cli_usage_error("niah", "give the grid's JSON file with --out FILE");
    if (!parse_spec(lengths, true, 1, 1e8, &g->lengths))
        return cli_usage_error("niah", "--lengths wants START:STOP:STEP or a list of token counts, got '%s'", lengths);
    if (!parse_spec(depths, false, 0, 100, &g->depths))
        return cli_usage_error("niah", "--depths wants START:STOP:COUNT or a list of percentages in [0, 100], got '%s'",
                               depths);
    if (!*g->needle || !*g->question) return cli_usage_error("niah", "the needle and the question must not be empty");
    if (!eval_opts_check("niah", o)) return 2;
    return -1;
}

/* Token budget: the prompt without the haystack, the needle, the answer. */
static vkv_status measure_prompt(niah *g)
{
    const vkv_session *s = g->e->s;
    g->chat = s->chat != VKV_CHAT_UNKNOWN;
    if (g->protocol == NIAH_PROTOCOL_KVPRESS) {
        /* kvpress: the length is the context part's cap; the question comes on top */
        size_t n_q;
        vkv_status st;
        if ((st = count_tokens(s->tok, g->needle, &g->n_needle)) || (st = count_tokens(s->tok, g->question, &n_q)))
            return st;
        g->overhead = KVPRESS_OVERHEAD;
        g->kvpress_question = n_q + 16 + strlen(g->answer_prefix); /* + the chat turn's close, a bound */
        cli_press_compression(&g->o->po, g->e->press, !g->chat, &g->comp);
        g->comp.query_aware = false; /* the split is in the prompt (src/eval/kvpress_prompt.h) */
        g->gen = (vkv_gen_params){.max_new = (uint32_t)g->n_predict, .stop_id = VKV_TOKEN_NULL, .strip_spm_space = true};
        return VKV_OK;
    }
    vkv_strbuf_puts(&g->ask, g->question);
    vkv_strbuf_puts(&g->ask, ASK_SUFFIX);
    if (!g->chat) vkv_strbuf_puts(&g->ask, "\nAnswer:");
    if (g->ask.oom) return vkv_error(VKV_ERR_OOM, "out of host memory");
    size_t n_fixed, n_q, n_chat = 0;
    vkv_status st;
    if ((st = count_tokens(s->tok, INTRO OUTRO, &n_fixed)) || (st = count_tokens(s->tok, g->ask.p, &n_q)) ||
        (st = count_tokens(s->tok, g->needle, &g->n_needle)) ||
        (g->chat && (st = vkv_chat_overhead(s->tok, s->chat, &n_chat))))
        return st;
    g->overhead = n_fixed + n_q + n_chat + 1 /* BOS */ + 4 /* joins */;
    cli_press_compression(&g->o->po, g->e->press, !g->chat, &g->comp);
    g->gen = (vkv_gen_params){.max_new = (uint32_t)g->n_predict, .stop_id = VKV_TOKEN_NULL, .strip_spm_space = true};
    return VKV_OK;
}

/* Lengths over the context are capped (once), too short ones dropped; false
 * (printed) when none is left. */
static bool plan_lengths(niah *g)
{
    uint32_t n_ctx = g->e->n_ctx;
    size_t least = g->overhead + g->n_needle + 16;
    size_t after = g->n_predict + 1 + g->kvpress_question; /* what follows the length's tokens */
    size_t cap = n_ctx > after + least ? n_ctx - after : 0;
    if (!cap) {
        fprintf(stderr, "vkvector niah: the %u-token context has no room for a haystack\n", n_ctx);
        return false;
    }
    size_t k = 0;
    bool capped = false;
    for (size_t i = 0; i < g->lengths.n; i++) {
        double L = floor(g->lengths.v[i]);
        if (L > cap) {
            L = (double)cap;
            capped = true;
        }
        if (L < least) {
            fprintf(stderr, "vkvector niah: length %g is too short for the prompt and the needle (%zu tokens); skipped\n",
                    L, g->overhead + g->n_needle);
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < k; j++) dup |= g->lengths.v[j] == L;
        if (!dup) g->lengths.v[k++] = L;
    }
    g->lengths.n = k;
    if (capped)
        fprintf(stderr, "vkvector niah: lengths over %zu tokens do not fit the model's %u-token context with a "
                        "%zu-token answer: capped at %zu\n", cap, n_ctx, g->n_predict, cap);
    if (!g->lengths.n) fprintf(stderr, "vkvector niah: no length left to run\n");
    return g->lengths.n > 0;
}

static vkv_status alloc_cells(niah *g)
{
    size_t nd = g->depths.n, n = g->lengths.n * nd;
    if (!(g->cells = calloc(n, sizeof *g->cells))) return vkv_error(VKV_ERR_OOM, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        cell *c = &g->cells[i];
        c->length = g->lengths.v[i / nd];
        c->depth = g->depths.v[i % nd];
        c->scores = calloc(g->runs, sizeof *c->scores);
        c->needle_depth = calloc(g->runs, sizeof *c->needle_depth);
        c->prompt_tokens = calloc(g->runs, sizeof *c->prompt_tokens);
        c->answers = calloc(g->runs, sizeof *c->answers);
        if (!c->scores || !c->needle_depth || !c->prompt_tokens || !c->answers)
            return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    return VKV_OK;
}

static void free_cells(niah *g)
{
    if (g->cells)
        for (size_t i = 0; i < g->lengths.n * g->depths.n; i++) {
            free(g->cells[i].scores);
            free(g->cells[i].needle_depth);
            free(g->cells[i].prompt_tokens);
            if (g->cells[i].answers)
                for (size_t r = 0; r < g->runs; r++) free(g->cells[i].answers[r]);
            free(g->cells[i].answers);
        }
    free(g->cells);
    g->cells = NULL;
}

static void haystack_run_free(haystack_run *h)
{
    free(h->text);
    free(h->ids);
    free(h->ends);
    memset(h, 0, sizeof *h);
}

/* Run r's haystack, from its own offset into the essays, tokenized once. */
static vkv_status haystack_for_run(const niah *g, const char *hay, size_t hay_len, size_t r, double max_len,
                                   haystack_run *h)
{
    const vkv_tokenizer *tok = g->e->s->tok;
    haystack_run_free(h);
    size_t offset = (size_t)(((double)r / g->runs + (double)(g->seed % 1000003) / 1000003.0) * hay_len) % hay_len;
    if (!(h->text = run_text(hay, hay_len, offset, (size_t)(max_len * 12) + 4096, &h->len)))
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = vkv_tokenize(tok, h->text, h->len, false, false, &h->ids, &h->n_ids);
    if (st) return st;
    if (!(h->ends = malloc((h->n_ids + 1) * sizeof *h->ends))) return vkv_error(VKV_ERR_OOM, "out of host memory");
    if (!h->n_ids) return vkv_error(VKV_ERR_FORMAT, "the haystack gives no tokens");
    /* where each token ends in the text; proportional when the pieces do
     * not spell the text (vocabularies of byte pieces) */
    if (!vkv_token_ends(tok, h->text, h->len, h->ids, h->n_ids, false, false, h->ends))
        for (size_t i = 0; i < h->n_ids; i++) h->ends[i] = (size_t)((double)(i + 1) * h->len / h->n_ids);
    return VKV_OK;
}

/* This harness's own prompt of a cell: a prompt of the cell's length with the
 * needle at the sentence boundary nearest the depth. */
static vkv_status own_cell_prompt(const niah *g, const haystack_run *h, const cell *c, vkv_prompt *pr, double *ins_frac)
{
    const char *text = h->text;
    size_t hay_tokens = (size_t)c->length - g->overhead - g->n_needle;
    if (hay_tokens > h->n_ids) hay_tokens = h->n_ids;
    size_t cut = sentence_end_before(text, h->len, h->ends[hay_tokens - 1]);
    if (!cut) cut = h->ends[hay_tokens - 1];
    size_t target = c->depth >= 100 ? cut : h->ends[(size_t)(hay_tokens * c->depth / 100.0)];
    size_t ins = c->depth >= 100 ? cut : c->depth <= 0 ? 0 : sentence_end_near(text, cut, target);
    vkv_strbuf u = {0};
    vkv_strbuf_puts(&u, INTRO);
    vkv_strbuf_put(&u, text, ins);
    if (ins && !is_ws(text[ins - 1])) vkv_strbuf_puts(&u, " ");
    vkv_strbuf_puts(&u, g->needle);
    if (ins < cut && !is_ws(text[ins])) vkv_strbuf_puts(&u, " ");
    vkv_strbuf_put(&u, text + ins, cut - ins);
    vkv_strbuf_puts(&u, OUTRO);
    size_t split = u.n;
    vkv_strbuf_puts(&u, g->ask.p);
    if (u.oom) {
        free(u.p);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    vkv_status st = vkv_session_tokenize(g->e->s, u.p, u.n, split, g->chat, VKV_SPLIT_WHOLE, pr);
    free(u.p);
    *ins_frac = cut ? 100.0 * (double)ins / (double)cut : 0;
    return st;
}

/* kvpress's prompt of a cell: the haystack's first length - needle - 150
 * tokens, the needle inserted at token int(n depth / 100), the story-book
 * wrapper, then kvpress's pipeline (src/eval/kvpress_prompt.h). *ins_frac:
 * where the needle went, in percent of the haystack. */
static vkv_status kvpress_cell_prompt(const niah *g, const haystack_run *h, const cell *c, vkv_prompt *pr,
                                      double *ins_frac)
{
    size_t limit = (size_t)c->length > g->n_needle + KVPRESS_OVERHEAD ? (size_t)c->length - g->n_needle - KVPRESS_OVERHEAD : 1;
    if (limit > h->n_ids) limit = h->n_ids;
    size_t at_token = (size_t)((double)limit * c->depth / 100.0);
    size_t at = at_token ? h->ends[at_token - 1] : 0, end = h->ends[limit - 1];
    vkv_strbuf u = {0};
    vkv_strbuf_puts(&u, KVPRESS_BOOK_OPEN);
    vkv_strbuf_put(&u, h->text, at);
    vkv_strbuf_puts(&u, g->needle);
    vkv_strbuf_put(&u, h->text + at, end - at);
    vkv_strbuf_puts(&u, KVPRESS_BOOK_CLOSE);
    vkv_kvpress_parts parts = {.context = u.p, .question = strdup(g->question), .answer_prefix = g->answer_prefix};
    char *ctx_text = NULL, *q_text = NULL;
    vkv_status st = u.oom || !parts.question ? vkv_error(VKV_ERR_OOM, "out of host memory") : VKV_OK;
    if (!st) st = vkv_kvpress_texts(g->e->s->chat, &parts, g->o->po.query_aware, &ctx_text, &q_text);
    size_t n, n_ctx, n_orig;
    int32_t *ids = NULL;
    if (!st) st = vkv_kvpress_tokenize(g->e->s->tok, ctx_text, q_text, (size_t)c->length, &ids, &n, &n_ctx, &n_orig);
    if (!st) *pr = (vkv_prompt){.ids = ids, .n = n, .n_context = n_ctx};
    *ins_frac = end ? 100.0 * (double)at / (double)end : 0;
    free(ctx_text);
    free(q_text);
    vkv_kvpress_parts_free(&parts);
    return st;
}

/* One cell of one run: the needle at the cell's depth in a haystack of the
 * cell's length, the question, the answer scored. */
static vkv_status run_cell(niah *g, const haystack_run *h, cell *c, size_t r)
{
    vkv_prompt pr;
    double ins_frac = 0;
    vkv_status st = g->protocol == NIAH_PROTOCOL_KVPRESS ? kvpress_cell_prompt(g, h, c, &pr, &ins_frac)
                                                           : own_cell_prompt(g, h, c, &pr, &ins_frac);
    if (st) return st;
    size_t pn = pr.n;
    vkv_gen_result res;
    if (pn + g->n_predict + 1 > g->e->n_ctx) st = vkv_error(VKV_ERR_ARG, "the prompt is %zu tokens: no room for the answer", pn);
    else st = vkv_session_generate(g->e->s, &g->comp, &pr, &g->gen, &res);
    vkv_prompt_free(&pr);
    if (st) {
        fprintf(stderr, "vkvector niah: length %g, depth %g, run %zu: %s: %s\n", c->length, c->depth, r,
                vkv_status_name(st), vkv_last_error());
        return st == VKV_ERR_ARG ? VKV_OK : st;
    }
    double score = vkv_metric_rouge_l(res.text, g->needle);
    c->scores[c->n_done] = score;
    c->prompt_tokens[c->n_done] = pn;
    c->needle_depth[c->n_done] = ins_frac;
    c->answers[c->n_done] = res.text;
    res.text = NULL;
    c->n_done++;
    if (!g->quiet)
        fprintf(stderr, "length %6g  depth %5.1f%%  run %zu: %5zu tokens, score %.3f  %.2f s + %.2f s | %s\n", c->length,
                c->depth, r, pn, score, res.prefill_s + res.compress_s, res.gen_s, c->answers[c->n_done - 1]);
    vkv_gen_result_free(&res);
    return VKV_OK;
}

/* Every run over the grid; the JSON is rewritten after each length. Returns
 * 0, or the exit status. */
static int run_grid(niah *g, const char *hay, size_t hay_len, vkv_status *st)
{
    double max_len = 0;
    for (size_t i = 0; i < g->lengths.n; i++) max_len = g->lengths.v[i] > max_len ? g->lengths.v[i] : max_len;
    size_t nl = g->lengths.n, nd = g->depths.n;
    haystack_run h = {0};
    int rc = 0;
    for (size_t r = 0; r < g->runs && !rc; r++) {
        if ((*st = haystack_for_run(g, hay, hay_len, r, max_len, &h))) rc = 1;
        for (size_t li = 0; li < nl && !rc; li++) {
            for (size_t di = 0; di < nd && !rc; di++)
                if ((*st = run_cell(g, &h, &g->cells[li * nd + di], r))) rc = 1;
            if (!rc && !write_json(g)) rc = 1;
        }
    }
    haystack_run_free(&h);
    return rc;
}

int cmd_niah(int argc, char **argv)
{
    eval_opts o;
    niah g;
    int rc = parse_niah_options(argc, argv, &o, &g);
    if (rc >= 0) return rc;
    char hbuf[1100];
    if (!g.haystack_dir) {
        const char *shared = getenv("VKVECTOR_SHARED");
        snprintf(hbuf, sizeof hbuf, "%s/data/paul_graham_essays", shared ? shared : "../shared");
        g.haystack_dir = hbuf;
    }
    eval_env e = {0};
    g.e = &e;
    size_t hay_len = 0;
    char *hay = read_haystack(g.haystack_dir, &hay_len);
    if (!hay) return 1;
    double want = 0;
    for (size_t i = 0; i < g.lengths.n; i++) want = g.lengths.v[i] > want ? g.lengths.v[i] : want;
    want += (double)g.n_predict + 1;
    rc = 1;
    vkv_status st;
    if ((st = eval_env_open("niah", &o, want < 1 << 24 ? (uint32_t)want : 0, &e)) || (st = measure_prompt(&g))) goto out;
    if (!plan_lengths(&g)) goto out;
    if ((st = alloc_cells(&g))) goto out;
    fprintf(stderr, "vkvector niah: %s, %s%s, %u-token context, %zu lengths x %zu depths x %zu runs\n", e.s->model_name,
            o.po.press ? o.po.press : "full cache", o.po.vector ? " + VECTOR" : "", e.n_ctx, g.lengths.n, g.depths.n,
            g.runs);
    if (run_grid(&g, hay, hay_len, &st) || !write_json(&g) || (g.html_path && !write_html(&g))) goto out;
    double sum = 0;
    size_t n_sum = 0;
    for (size_t i = 0; i < g.lengths.n * g.depths.n; i++)
        if (g.cells[i].n_done) {
            sum += cell_mean(&g.cells[i]);
            n_sum++;
        }
    printf("mean ROUGE-L F over %zu cells: %.4f\n", n_sum, n_sum ? sum / n_sum : 0.0);
    printf("grid: %s%s%s\n", g.out_path, g.html_path ? ", heatmap: " : "", g.html_path ? g.html_path : "");
    rc = 0;
out:
    if (st) rc = cli_fail("niah", st);
    free_cells(&g);
    free(g.ask.p);
    free(hay);
    eval_env_close(&e);
    return rc;
}
