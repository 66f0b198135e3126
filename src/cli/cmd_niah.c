/* vkvector niah: needle in a haystack. Builds prompts of given token lengths
 * from a haystack of text files (the Paul Graham essays), hides a needle
 * sentence at given depths, asks for it, and scores the answer by ROUGE-L F
 * as kvpress does (the `rouge` package's, the needle as the hypothesis:
 * vkv_metric_kvpress_niah). Runs differ by
 * where in the haystack the text starts. Writes the grid as JSON and, with
 * --html, a self-contained heatmap page.
 *
 * This file drives: the options, the session, the grid and the files. The
 * haystack and the prompts are src/eval/niah.h's, the heatmap
 * src/viz/niah_heatmap.h's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/eval_cli.h"
#include "core/json_write.h"
#include "core/out_file.h"
#include "session/session.h"
#include "eval/metrics.h"
#include "eval/niah.h"
#include "viz/niah_heatmap.h"

/* ---- specs ---- */

#define GRID_MAX 4096 /* values a --lengths or --depths grid holds at most */

typedef struct dlist {
    double v[GRID_MAX];
    size_t n;
} dlist;

/* ---- the grid ---- */

typedef struct cell {
    double length, depth;
    double *scores, *needle_depth;
    size_t *prompt_tokens;
    char **answers;
    size_t n_done;
    vkv_tier_fractions achieved_sum; /* over the n_achieved runs that compressed */
    size_t n_achieved;
} cell;

typedef struct niah {
    const eval_opts *o;
    eval_env *e;
    const char *needle, *question, *haystack_dir, *out_path, *html_path, *answer_prefix;
    const char *needle_file;   /* --needle-file: its texts stand where the options are not given */
    vkv_niah_texts file_texts;
    int protocol;              /* vkv_niah_protocol: --protocol's choice */
    dlist lengths, depths;
    size_t runs, n_predict;
    uint64_t seed;
    bool quiet;
    cell *cells;               /* [n_lengths * n_depths], length-major */
    /* set once the session is open */
    bool chat;                 /* prompts in the model's chat template */
    vkv_niah_prompts prompts;  /* what every cell's prompt shares, and its token counts */
    vkv_compression comp;
    vkv_gen_params gen;
} niah;

/* The cell's "achieved": the mean of its runs' tier fractions, null without compression. */
static void write_cell_achieved(vkv_json_writer *w, const cell *c)
{
    const double n = (double)c->n_achieved;
    const vkv_tier_fractions mean = {c->achieved_sum.retained / n, c->achieved_sum.approximated / n,
                                     c->achieved_sum.evicted / n};
    eval_write_achieved(w, c->n_achieved ? &mean : NULL);
}

static double cell_mean(const cell *c)
{
    double s = 0;
    for (size_t r = 0; r < c->n_done; r++) s += c->scores[r];
    return c->n_done ? s / c->n_done : NAN;
}

/* The mean of the cells' means over the cells that ran (*n_ran of them), or
 * NaN when none did. */
static double grid_mean(const niah *g, size_t *n_ran)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < g->lengths.n * g->depths.n; i++)
        if (g->cells[i].n_done) {
            sum += cell_mean(&g->cells[i]);
            n++;
        }
    *n_ran = n;
    return n ? sum / n : NAN;
}

static bool write_json(const niah *g)
{
    vkv_out out;
    if (vkv_out_open(&out, g->out_path)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        return false;
    }
    FILE *f = out.f;
    vkv_json_writer w;
    vkv_json_init(&w, f, true);
    vkv_json_begin_object(&w);
    eval_write_settings(&w, g->o, g->e);
    vkv_json_key(&w, "protocol");
    vkv_json_str(&w, vkv_niah_protocol_name((vkv_niah_protocol)g->protocol));
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
    vkv_json_str(&w, "rouge-l f, the rouge package's get_scores(needle, answer) as kvpress scores, 0..1");
    vkv_json_key(&w, "lengths");
    vkv_json_begin_array(&w);
    for (size_t i = 0; i < g->lengths.n; i++) vkv_json_num(&w, g->lengths.v[i]);
    vkv_json_end_array(&w);
    vkv_json_key(&w, "depths");
    vkv_json_begin_array(&w);
    for (size_t i = 0; i < g->depths.n; i++) vkv_json_num(&w, g->depths.v[i]);
    vkv_json_end_array(&w);
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
        write_cell_achieved(&w, c);
        vkv_json_end_object(&w);
    }
    vkv_json_end_array(&w);
    vkv_json_key(&w, "mean");
    size_t n_ran;
    vkv_json_num(&w, grid_mean(g, &n_ran));
    vkv_json_end_object(&w);
    fputc('\n', f);
    /* every write above is checked by the commit (ferror) */
    if (vkv_out_commit(&out)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        return false;
    }
    return true;
}

/* The heatmap page: the grid handed to src/viz/niah_heatmap.h. */
static bool write_html(const niah *g)
{
    size_t n = g->lengths.n * g->depths.n;
    viz_niah_cell *cells = calloc(n, sizeof *cells);
    if (!cells) {
        fprintf(stderr, "vkvector niah: out of host memory writing '%s'\n", g->html_path);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const cell *c = &g->cells[i];
        cells[i] = (viz_niah_cell){.score = cell_mean(c), .n_runs = c->n_done, .prompt_tokens = c->prompt_tokens,
                                   .needle_depth = c->needle_depth, .answers = c->answers};
    }
    char title[1024];
    snprintf(title, sizeof title, "Needle in a haystack: %s, %s%s", g->e->s->model_name,
             g->o->po.press ? g->o->po.press : "full cache", g->o->po.vector ? " + VECTOR" : "");
    viz_niah_heatmap h = {.title = title, .lengths = g->lengths.v, .n_lengths = g->lengths.n, .depths = g->depths.v,
                          .n_depths = g->depths.n, .cells = cells, .press = g->o->po.press,
                          .compression_ratio = g->o->po.compression_ratio, .query_aware = g->o->po.query_aware,
                          .vector = g->o->po.vector, .pa = eval_effective_pa(g->o), .needle = g->needle,
                          .question = g->question, .haystack = g->haystack_dir, .runs = g->runs};
    vkv_out out;
    if (vkv_out_open(&out, g->html_path)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        free(cells);
        return false;
    }
    viz_write_niah_heatmap(out.f, &h);
    free(cells);
    if (vkv_out_commit(&out)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        return false;
    }
    return true;
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_niah_options(int argc, char **argv, eval_opts *o, niah *g)
{
    eval_opts_init(o);
    *g = (niah){.o = o, .runs = 1, .n_predict = 64};
    const char *lengths = "3000:30000:3000", *depths = NULL;
    int64_t runs = 1, n_predict = 64;
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "--haystack", .metavar = "DIR", .dest = &g->haystack_dir,
         .help = "text files of the haystack, concatenated in name order (default:\n../shared/data/paul_graham_essays)"},
        {.type = CLI_STR, .names = "--lengths", .metavar = "SPEC", .dest = &lengths,
         .help = "prompt lengths in tokens: START:STOP/STEP or START:STOP:STEP (STOP included)\n"
                 "or a list a,b,c (default 3000:30000:3000); lengths over the context are capped to it"},
        {.type = CLI_STR, .names = "--depths", .metavar = "SPEC", .dest = &depths,
         .help = "needle depths in percent of the haystack: START:STOP/STEP (START, START+STEP, ...\n"
                 "up to STOP), START:STOP:COUNT (COUNT evenly spaced values, STOP included) or a list;\n"
                 "default " VKV_NIAH_KVPRESS_DEPTHS " for kvpress (integer percentages, as kvpress's needle_depth),\n"
                 VKV_NIAH_OWN_DEPTHS " for --protocol vkvector"},
        {.type = CLI_ENUM, .names = "--protocol", .dest = &g->protocol, .choices = "kvpress|vkvector",
         .help = "kvpress's (the paper's, default): the length is max_context_length, the haystack\n"
                 "its first length - needle - 150 tokens with the needle at a token index, wrapped\n"
                 "as a story book; the question and answer prefix after compression. vkvector's:\n"
                 "the whole prompt's length, the needle at a sentence boundary"},
        {.type = CLI_STR, .names = "--answer-prefix", .metavar = "TEXT", .dest = &g->answer_prefix,
         .help = "kvpress: text after the question's chat turn, where the answer starts (default none)"},
        {.type = CLI_STR, .names = "--needle-file", .metavar = "FILE", .dest = &g->needle_file,
         .help = "a JSON object with the strings \"needle\", \"question\", \"answer_prefix\" (kvpress's\n"
                 "dataset row's names, any may be absent): used where --needle, --question, --answer-prefix\n"
                 "are not given"},
        {.type = CLI_I64, .names = "--runs", .metavar = "N", .dest = &runs, .min = 1, .max = 1000,
         .help = "runs per cell, each from another offset in the haystack (default 1)"},
        {.type = CLI_U64, .names = "--seed", .metavar = "S", .dest = &g->seed, .min = 0, .max = (double)UINT64_MAX,
         .help = "shifts the runs' offsets (default 0)"},
        {.type = CLI_STR, .names = "--needle", .metavar = "TEXT", .dest = &g->needle,
         .help = "the needle sentence (default: the San Francisco sandwich)"},
        {.type = CLI_STR, .names = "--question", .metavar = "TEXT", .dest = &g->question,
         .help = "the question (default: \"" VKV_NIAH_DEFAULT_QUESTION "\")"},
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
    if (!vkv_niah_parse_grid(lengths, false, 1, 1e8, g->lengths.v, GRID_MAX, &g->lengths.n))
        return cli_usage_error("niah", "--lengths wants START:STOP/STEP, START:STOP:STEP or a list of token counts, got "
                               "'%s'", lengths);
    bool kvpress = g->protocol == VKV_NIAH_PROTOCOL_KVPRESS;
    if (!depths) depths = kvpress ? VKV_NIAH_KVPRESS_DEPTHS : VKV_NIAH_OWN_DEPTHS;
    if (!vkv_niah_parse_grid(depths, true, 0, 100, g->depths.v, GRID_MAX, &g->depths.n))
        return cli_usage_error("niah", "--depths wants START:STOP/STEP, START:STOP:COUNT or a list of percentages in "
                               "[0, 100], got '%s'", depths);
    for (size_t i = 0; kvpress && i < g->depths.n; i++)
        if (g->depths.v[i] != floor(g->depths.v[i])) {
            fprintf(stderr, "vkvector niah: kvpress's needle depths are integer percentages; %g is not (START:STOP/STEP "
                            "gives integer steps)\n", g->depths.v[i]);
            break;
        }
    if (g->needle_file && vkv_niah_read_texts(g->needle_file, &g->file_texts)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        return 1;
    }
    const vkv_niah_texts *f = &g->file_texts;
    if (!g->needle) g->needle = f->needle ? f->needle : VKV_NIAH_DEFAULT_NEEDLE;
    if (!g->question) g->question = f->question ? f->question : VKV_NIAH_DEFAULT_QUESTION;
    if (!g->answer_prefix) g->answer_prefix = f->answer_prefix ? f->answer_prefix : "";
    if (!*g->needle || !*g->question) return cli_usage_error("niah", "the needle and the question must not be empty");
    o->po.kvpress_protocol = g->protocol == VKV_NIAH_PROTOCOL_KVPRESS; /* docs/ARCHITECTURE.md §2, §5 */
    if (!eval_opts_check("niah", o)) return 2;
    /* both outputs can be written: checked before the grid runs (docs/ARCHITECTURE.md §6) */
    vkv_status st;
    if ((st = vkv_out_check("--out", g->out_path)) || (g->html_path && (st = vkv_out_check("--html", g->html_path))))
        return cli_fail("niah", st);
    return -1;
}

/* Token budget: the prompt without the haystack, the needle, the answer. */
static vkv_status measure_prompt(niah *g)
{
    const vkv_session *s = g->e->s;
    g->chat = s->chat != VKV_CHAT_UNKNOWN;
    g->prompts = (vkv_niah_prompts){.protocol = (vkv_niah_protocol)g->protocol, .needle = g->needle,
                                    .question = g->question, .answer_prefix = g->answer_prefix, .chat = s->chat,
                                    .query_aware = g->o->po.query_aware};
    vkv_status st = vkv_niah_prompts_measure(&g->prompts, s->tok);
    if (st) return st;
    cli_press_compression(&g->o->po, g->e->press, !g->chat, &g->comp);
    /* kvpress: the split is in the prompt (src/eval/kvpress_prompt.h) */
    if (g->protocol == VKV_NIAH_PROTOCOL_KVPRESS) g->comp.query_aware = false;
    g->gen = (vkv_gen_params){.max_new = (uint32_t)g->n_predict, .stop_id = VKV_TOKEN_NULL, .strip_spm_space = true};
    return VKV_OK;
}

/* Lengths over the context are capped (once), too short ones dropped; false
 * (printed) when none is left. */
static bool plan_lengths(niah *g)
{
    uint32_t n_ctx = g->e->n_ctx;
    const vkv_niah_prompts *p = &g->prompts;
    size_t least = p->overhead + p->n_needle + 16;
    size_t after = g->n_predict + 1 + p->kvpress_question; /* what follows the length's tokens */
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
                    L, p->overhead + p->n_needle);
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

/* A cell's prompt of run h, tokenized; *needle_depth: where the needle went,
 * in percent of the haystack. */
static vkv_status cell_prompt(const niah *g, const vkv_niah_run *h, const cell *c, vkv_prompt *pr,
                              double *needle_depth)
{
    const vkv_session *s = g->e->s;
    if (g->protocol == VKV_NIAH_PROTOCOL_KVPRESS) {
        *pr = (vkv_prompt){0};
        return vkv_niah_kvpress_prompt(&g->prompts, s->tok, h, c->length, c->depth, &pr->ids, &pr->n,
                                       &pr->n_context, needle_depth);
    }
    char *text;
    size_t len, split;
    vkv_status st = vkv_niah_own_prompt(&g->prompts, h, c->length, c->depth, &text, &len, &split, needle_depth);
    if (st) return st;
    st = vkv_session_tokenize(s, text, len, split, g->chat, VKV_SPLIT_WHOLE, pr);
    free(text);
    return st;
}

/* One cell of one run: the needle at the cell's depth in a haystack of the
 * cell's length, the question, the answer scored. */
static vkv_status run_cell(niah *g, const vkv_niah_run *h, cell *c, size_t r)
{
    vkv_prompt pr;
    double needle_depth = 0;
    vkv_status st = cell_prompt(g, h, c, &pr, &needle_depth);
    if (st) return st;
    size_t pn = pr.n;
    char why[400];
    if (vkv_compression_check_first(g->e->s, &g->comp, vkv_prompt_compressed_part(&pr, g->comp.query_aware),
                                    "--max-kv-tokens", "--compression", why, sizeof why)) {
        /* the options cannot work for this cell: refused before its prefill, and the grid stops */
        vkv_prompt_free(&pr);
        return vkv_error(VKV_ERR_ARG, "length %g, depth %g: %s", c->length, c->depth, why);
    }
    vkv_gen_result res;
    /* RandomPress's draw: the cell's index in grid order over every run (docs/ARCHITECTURE.md §2) */
    g->comp.sample = (uint32_t)(r * g->lengths.n * g->depths.n + (size_t)(c - g->cells));
    if (pn + g->n_predict + 1 > g->e->n_ctx) st = vkv_error(VKV_ERR_ARG, "the prompt is %zu tokens: no room for the answer", pn);
    else st = vkv_session_generate(g->e->s, &g->comp, &pr, &g->gen, &res);
    vkv_prompt_free(&pr);
    if (st) {
        fprintf(stderr, "vkvector niah: length %g, depth %g, run %zu: %s: %s\n", c->length, c->depth, r,
                vkv_status_name(st), vkv_last_error());
        return st == VKV_ERR_ARG ? VKV_OK : st;
    }
    double score = vkv_metric_kvpress_niah(g->needle, res.text);
    c->scores[c->n_done] = score;
    c->prompt_tokens[c->n_done] = pn;
    c->needle_depth[c->n_done] = needle_depth;
    if (res.n_compressed) {
        c->achieved_sum.retained += res.achieved.retained;
        c->achieved_sum.approximated += res.achieved.approximated;
        c->achieved_sum.evicted += res.achieved.evicted;
        c->n_achieved++;
    }
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
    vkv_niah_run h = {0};
    int rc = 0;
    for (size_t r = 0; r < g->runs && !rc; r++) {
        if ((*st = vkv_niah_run_make(g->e->s->tok, hay, hay_len, r, g->runs, g->seed, max_len, &h))) rc = 1;
        for (size_t li = 0; li < nl && !rc; li++) {
            for (size_t di = 0; di < nd && !rc; di++)
                if ((*st = run_cell(g, &h, &g->cells[li * nd + di], r))) rc = 1;
            if (!rc && !write_json(g)) rc = 1;
        }
    }
    vkv_niah_run_free(&h);
    return rc;
}

/* The haystack reader's notes on what it skipped. */
static void print_warning(void *ctx, const char *message) { fprintf(stderr, "vkvector niah: %s\n", message); }

int cmd_niah(int argc, char **argv)
{
    eval_opts o;
    niah g;
    int rc = parse_niah_options(argc, argv, &o, &g);
    if (rc >= 0) {
        vkv_niah_texts_free(&g.file_texts);
        return rc;
    }
    char hbuf[1100];
    if (!g.haystack_dir) {
        const char *shared = getenv("VKVECTOR_SHARED");
        snprintf(hbuf, sizeof hbuf, "%s/data/paul_graham_essays", shared ? shared : "../shared");
        g.haystack_dir = hbuf;
    }
    eval_env e = {0};
    g.e = &e;
    size_t hay_len = 0;
    char *hay;
    if (vkv_niah_read_haystack(g.haystack_dir, print_warning, NULL, &hay, &hay_len)) {
        fprintf(stderr, "vkvector niah: %s\n", vkv_last_error());
        return 1;
    }
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
    size_t n_ran;
    double mean = grid_mean(&g, &n_ran);
    printf("mean ROUGE-L F over %zu cells: %.4f\n", n_ran, n_ran ? mean : 0.0);
    printf("grid: %s%s%s\n", g.out_path, g.html_path ? ", heatmap: " : "", g.html_path ? g.html_path : "");
    rc = 0;
out:
    if (st) rc = cli_fail("niah", st);
    free_cells(&g);
    vkv_niah_prompts_free(&g.prompts);
    vkv_niah_texts_free(&g.file_texts);
    free(hay);
    eval_env_close(&e);
    return rc;
}
