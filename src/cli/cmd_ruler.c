/* vkvector ruler: RULER with kvpress's protocol (docs/ARCHITECTURE.md §5).
 * The samples are kvpress's RULER rows (--data) or generated here from
 * --seed by RULER's rules (src/eval/ruler.h: late 2024's, which made
 * kvpress's rows, or --ruler-version head), filled to each --lengths with
 * the model's tokenizer; --save-rows writes them as kvpress's rows instead
 * of running them. Each sample's context is compressed; its question
 * and answer prefix follow; the answer is generated greedily up to kvpress's
 * per-task length and scored with RULER's string_match_all / _part, once per
 * --compression value (a list sweeps the leaderboard's x axis). One line
 * per sample is appended to the results file (fsync'ed), so an interrupted
 * run resumes where it stopped, and --shard splits a run over jobs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/eval_cli.h"
#include "cli/eval_results.h"
#include "cli/strset.h"
#include "core/json_write.h"
#include "core/out_file.h"
#include "eval/lb_jsonl.h"
#include "eval/niah.h"
#include "eval/ruler.h"
#include "model/gguf.h"
#include "tok/tokenizer.h"

#define RULER_MAX_LENGTHS 32
#define RULER_MAX_ACC (16 * (RULER_MAX_LENGTHS + 1)) /* (p_c, length) pairs: --compression's 16 by the lengths */

/* The command's options. */
typedef struct ruler_opts {
    eval_opts common;
    const char *data_path, *out_path, *tasks_arg, *lengths_arg, *essays_dir, *words_path, *squad_path, *hotpotqa_path;
    const char *version_arg, *save_rows;
    vkv_ruler_version version;
    int64_t samples, shard_i, shard_n, max_new, seed;
    bool strict, quiet;
    bool task_on[VKV_RULER_N_TASKS];
    size_t lengths[RULER_MAX_LENGTHS], n_lengths;
    char essays_buf[1100];
} ruler_opts;

/* Per (p_c, length) score sums by task, for the summary. */
typedef struct ruler_acc {
    double compression;
    size_t length;
    double sum[VKV_RULER_N_TASKS];
    size_t n[VKV_RULER_N_TASKS];
} ruler_acc;

typedef struct ruler_run {
    const ruler_opts *l;
    const eval_opts *o;
    eval_env *e;
    FILE *out;
    const char *source;          /* "data" or "generated" */
    vkv_ruler_sources src;
    vkv_ruler_gen gen;           /* the generator's rules and what it found */
    vkv_ruler_qa_set squad, hotpotqa;
    strset done;                 /* sample_key of the results already in the file */
    ruler_acc acc[RULER_MAX_ACC];
    size_t n_acc;
    size_t n_new, n_bad, n_failed, n_resumed;
    size_t n_rows;             /* --save-rows: rows written */
} ruler_run;

/* ---- results already in the file ---- */

/* Whether a result line's samples are this run's: the same source, and for
 * generated ones the same seed and RULER version. */
static bool same_source(const vkv_json *r, const ruler_run *run)
{
    const char *src = json_get_str(r, "source");
    if (!src || strcmp(src, run->source)) return false;
    if (strcmp(run->source, "generated")) return true;
    const vkv_json *seed = vkv_json_get(r, "seed");
    const char *version = json_get_str(r, "ruler_version");
    return seed && seed->type == VKV_JSON_NUMBER && seed->number == (double)run->l->seed && version &&
           !strcmp(version, vkv_ruler_version_name(run->l->version));
}

/* A result's identity in a file: its p_c (as the settings store it), task, length and index. */
static void sample_key(char *buf, size_t n, double compression, const char *task, size_t length, size_t index)
{
    snprintf(buf, n, "%.17g\n%s\n%zu\n%zu", compression, task, length, index);
}

/* p_c as a result line stores it: 0 for the full cache. */
static double stored_compression(const ruler_run *run)
{
    return run->o->po.press ? run->o->po.compression_ratio : 0;
}

static void count_score(ruler_run *run, double compression, size_t length, int task, double score)
{
    size_t a = 0;
    while (a < run->n_acc && !(run->acc[a].length == length && run->acc[a].compression == compression)) a++;
    if (a == run->n_acc) {
        if (run->n_acc == RULER_MAX_ACC) return; /* the summary shows the first settings only */
        memset(&run->acc[a], 0, sizeof run->acc[a]);
        run->acc[a].compression = compression;
        run->acc[a].length = length;
        run->n_acc++;
    }
    run->acc[a].sum[task] += score;
    run->acc[a].n[task]++;
}

/* The length member of a result or data row: a whole number, or 0. */
static size_t row_length(const vkv_json *r)
{
    const vkv_json *l = vkv_json_get(r, "length");
    return l && l->type == VKV_JSON_NUMBER && l->number >= 0 && l->number < 1e15 ? (size_t)l->number : 0;
}

/* The p_c of --compression's list whose settings r holds, or -1. */
static int matching_compression(const vkv_json *r, const ruler_run *run)
{
    const cli_press_opts *po = &run->o->po;
    for (int k = 0; k < (po->n_compressions ? po->n_compressions : 1); k++) {
        eval_opts each = *run->o;
        if (po->n_compressions) each.po.compression_ratio = po->compressions[k];
        if (eval_same_settings(r, &each, run->e)) return k;
    }
    return -1;
}

static int resumed_line(void *ctx, const vkv_json *r, size_t line_no)
{
    ruler_run *run = ctx;
    int k = matching_compression(r, run);
    if (k < 0 || !same_source(r, run)) {
        char have[512];
        eval_describe_settings(r, "kvpress", have, sizeof have);
        const char *src = json_get_str(r, "source"), *version = json_get_str(r, "ruler_version");
        fprintf(stderr, "vkvector ruler: %s:%zu holds a result of other settings (%s, %s data%s%s); write this run to "
                        "another --out file\n", run->l->out_path, line_no, have, src ? src : "?",
                src && !strcmp(src, "generated") ? ", RULER version " : "",
                src && !strcmp(src, "generated") ? (version ? version : "before --ruler-version") : "");
        return 2;
    }
    const char *task = json_get_str(r, "task");
    const vkv_json *idx = vkv_json_get(r, "index"), *score = vkv_json_get(r, "score");
    int t = task ? vkv_ruler_task_index(task) : -1;
    if (t < 0 || !idx || idx->type != VKV_JSON_NUMBER) return 0;
    const cli_press_opts *po = &run->o->po;
    double compression = !po->press ? 0 : po->n_compressions ? po->compressions[k] : po->compression_ratio;
    char key[160];
    sample_key(key, sizeof key, compression, task, row_length(r), (size_t)idx->number);
    bool oom = false;
    if (strset_add(&run->done, key, &oom)) {
        run->n_resumed++;
        if (score && score->type == VKV_JSON_NUMBER) count_score(run, compression, row_length(r), t, score->number);
    }
    if (!oom) return 0;
    fprintf(stderr, "vkvector ruler: out of host memory\n");
    return 1;
}

/* ---- one sample ---- */

/* Runs one sample and appends its line. 0, or an exit status. */
static int run_sample(ruler_run *run, const vkv_ruler_task *task, size_t length, size_t index, uint32_t max_gen,
                      const vkv_ruler_sample *s)
{
    const eval_env *e = run->e;
    char where[160];
    if (e->press) snprintf(where, sizeof where, "%s @%zu #%zu p_c %g", task->name, length, index, stored_compression(run));
    else snprintf(where, sizeof where, "%s @%zu #%zu", task->name, length, index);
    vkv_kvpress_parts parts = {.context = s->context, .question = s->question, .answer_prefix = s->answer_prefix};
    eval_prompt p;
    vkv_status st = eval_kvpress_prompt(e, run->o, &parts, max_gen, 0, &p);
    if (st) {
        fprintf(stderr, "vkvector ruler: %s: %s\n", where, vkv_last_error());
        run->n_failed++;
        return st == VKV_ERR_ARG || st == VKV_ERR_FORMAT ? 0 : 1;
    }
    vkv_compression comp;
    cli_press_compression(&run->o->po, e->press, !p.chat, &comp);
    comp.query_aware = false; /* kvpress's prompt carries its split */
    comp.sample = (uint32_t)index; /* RandomPress's draw (docs/ARCHITECTURE.md §2) */
    vkv_gen_params gp = {.max_new = max_gen, .stop_id = VKV_TOKEN_NULL, .strip_spm_space = true};
    vkv_gen_result g;
    int grc = eval_generate("ruler", e, &comp, &p.tokens, &gp, where, &g);
    vkv_prompt_free(&p.tokens);
    if (grc) {
        if (grc < 0) run->n_failed++;
        return grc < 0 ? 0 : grc;
    }
    double score = vkv_ruler_score(task, g.text, (const char *const *)s->answers, s->n_answers);
    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    if (!mf) {
        vkv_gen_result_free(&g);
        fprintf(stderr, "vkvector ruler: out of host memory\n");
        return 1;
    }
    vkv_json_writer w;
    vkv_json_init(&w, mf, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "task");
    vkv_json_str(&w, task->name);
    vkv_json_key(&w, "length");
    vkv_json_uint(&w, length);
    vkv_json_key(&w, "index");
    vkv_json_uint(&w, index);
    vkv_json_key(&w, "source");
    vkv_json_str(&w, run->source);
    vkv_json_key(&w, "seed");
    if (strcmp(run->source, "generated")) vkv_json_null(&w);
    else vkv_json_num(&w, (double)run->l->seed);
    vkv_json_key(&w, "ruler_version");
    if (strcmp(run->source, "generated")) vkv_json_null(&w);
    else vkv_json_str(&w, vkv_ruler_version_name(run->l->version));
    vkv_json_key(&w, "pred");
    vkv_json_strn(&w, g.text, g.len);
    vkv_json_key(&w, "answer");
    eval_write_string_list(&w, s->answers, s->n_answers);
    vkv_json_key(&w, "score");
    vkv_json_num(&w, score);
    vkv_json_key(&w, "max_new_tokens");
    vkv_json_uint(&w, max_gen);
    eval_write_settings(&w, run->o, e);
    vkv_json_key(&w, "protocol");
    vkv_json_str(&w, "kvpress");
    eval_write_generation(&w, &p, &g);
    vkv_json_end_object(&w);
    fputc('\n', mf);
    fclose(mf);
    /* One line, flushed and synced: a crash loses at most the sample in flight. */
    bool ok = eval_append_line("ruler", run->out, run->l->out_path, buf, blen);
    free(buf);
    if (ok) {
        char key[160];
        sample_key(key, sizeof key, stored_compression(run), task->name, length, index);
        strset_add(&run->done, key, NULL);
        count_score(run, stored_compression(run), length, (int)(task - vkv_ruler_tasks), score);
        run->n_new++;
        if (!run->l->quiet)
            fprintf(stderr, "%s: score %.3f | %zu tokens, %u compressed | prefill %.2f s, compress %.2f s, %u tokens "
                            "in %.2f s (%s)\n",
                    where, score, (size_t)g.n_prompt, g.n_compressed, g.prefill_s, g.compress_s, g.n_gen, g.gen_s, g.stop);
    }
    vkv_gen_result_free(&g);
    return ok ? 0 : 1;
}

/* Whether sample `index` of (task, length) is this shard's and not done yet. */
static bool to_run(const ruler_run *run, const vkv_ruler_task *task, size_t length, size_t index)
{
    if (index % (size_t)run->l->shard_n != (size_t)run->l->shard_i) return false;
    char key[160];
    sample_key(key, sizeof key, stored_compression(run), task->name, length, index);
    return !strset_has(&run->done, key);
}

static uint32_t gen_length(const ruler_opts *l, uint32_t task_max)
{
    return l->max_new && l->max_new < task_max ? (uint32_t)l->max_new : task_max;
}

/* ---- the two sources ---- */

/* kvpress's rows: each task's first --samples rows, in file order. 0, or an exit status. */
static int run_data(ruler_run *run)
{
    const ruler_opts *l = run->l;
    jsonl_reader rd;
    if (!jsonl_open(&rd, l->data_path)) {
        fprintf(stderr, "vkvector ruler: %s\n", vkv_last_error());
        return 1;
    }
    size_t seen[VKV_RULER_N_TASKS] = {0};
    vkv_json_doc *doc;
    vkv_status rst;
    int rc = 0;
    while (!rc && jsonl_next(&rd, &doc, &rst)) {
        const vkv_json *r = rst ? NULL : vkv_json_root(doc);
        const char *why = rst ? vkv_last_error() : vkv_ruler_row_check(r);
        if (why) {
            fprintf(stderr, "vkvector ruler: %s:%zu: malformed row%s: %s\n", l->data_path, rd.line_no,
                    l->strict ? "" : " skipped", why);
            run->n_bad++;
            if (l->strict) rc = 1;
            vkv_json_free(doc);
            continue;
        }
        const vkv_ruler_task *task = vkv_ruler_find_task(json_get_str(r, "task"));
        int t = (int)(task - vkv_ruler_tasks);
        size_t length = row_length(r) ? row_length(r) : l->n_lengths ? l->lengths[0] : 0;
        size_t index = seen[t]++;
        if (l->task_on[t] && (l->samples <= 0 || index < (size_t)l->samples) && to_run(run, task, length, index)) {
            vkv_ruler_sample s;
            if (vkv_ruler_row_sample(r, &s)) rc = cli_fail("ruler", VKV_ERR_OOM);
            else {
                uint32_t max_gen = gen_length(l, (uint32_t)vkv_json_get(r, "max_new_tokens")->number);
                rc = run_sample(run, task, length, index, max_gen, &s);
                vkv_ruler_sample_free(&s);
            }
        }
        vkv_json_free(doc);
    }
    bool unreadable = rd.error;
    jsonl_close(&rd);
    if (!rc && unreadable) {
        fprintf(stderr, "vkvector ruler: %s\n", vkv_last_error());
        rc = 1;
    }
    return rc;
}

static vkv_status count_tokens(void *ctx, const char *text, size_t *n)
{
    int32_t *ids = NULL;
    vkv_status st = vkv_tokenize(ctx, text, strlen(text), false, false, &ids, n);
    free(ids);
    return st;
}

/* Whether a generated qa task lacks its set: said once, and skipped. */
static bool qa_skipped(const ruler_run *run, int t)
{
    const vkv_ruler_task *task = &vkv_ruler_tasks[t];
    bool squad = t == vkv_ruler_task_index("qa_1");
    if (task->kind != VKV_RULER_QA || (squad ? run->src.squad : run->src.hotpotqa)) return false;
    fprintf(stderr, "vkvector ruler: %s skipped: it is built from %s; give its file with --%s (or kvpress's "
                    "RULER rows with --data)\n", task->name, squad ? "SQuAD" : "HotpotQA",
            squad ? "squad FILE" : "hotpotqa FILE");
    return true;
}

/* What each_generated hands every sample to: 0, or an exit status. */
typedef int (*sample_fn)(ruler_run *run, const vkv_ruler_task *task, size_t length, size_t index,
                         vkv_ruler_sample *s, void *ctx);

/* Generates every sample of the tasks on, at every length, of this shard
 * (with skip_done, not those already written) and hands each to use. A length
 * whose generation fails by its arguments is skipped with the reason (it is the
 * same for every sample). 0, or an exit status. */
static int each_generated(ruler_run *run, bool skip_done, sample_fn use, void *ctx)
{
    const ruler_opts *l = run->l;
    int rc = 0;
    for (int t = 0; t < VKV_RULER_N_TASKS && !rc; t++) {
        const vkv_ruler_task *task = &vkv_ruler_tasks[t];
        if (!l->task_on[t] || qa_skipped(run, t)) continue;
        for (size_t k = 0; k < l->n_lengths && !rc; k++)
            for (size_t i = 0; i < (size_t)l->samples && !rc; i++) {
                if (i % (size_t)l->shard_n != (size_t)l->shard_i) continue;
                if (skip_done && !to_run(run, task, l->lengths[k], i)) continue;
                vkv_ruler_sample s;
                vkv_status st = vkv_ruler_generate(&run->gen, task, &run->src, l->lengths[k], (uint64_t)l->seed, i, &s);
                if (st) {
                    fprintf(stderr, "vkvector ruler: %s @%zu: %s\n", task->name, l->lengths[k], vkv_last_error());
                    if (st != VKV_ERR_ARG) return 1;
                    run->n_failed++;
                    break;
                }
                rc = use(run, task, l->lengths[k], i, &s, ctx);
                vkv_ruler_sample_free(&s);
            }
    }
    return rc;
}

static int run_generated_sample(ruler_run *run, const vkv_ruler_task *task, size_t length, size_t index,
                                vkv_ruler_sample *s, void *ctx)
{
    (void)ctx;
    return run_sample(run, task, length, index, gen_length(run->l, vkv_ruler_max_new_tokens(task)), s);
}

/* Generated samples: every task, length and index. 0, or an exit status. */
static int run_generated(ruler_run *run) { return each_generated(run, true, run_generated_sample, NULL); }

/* One generated sample as a kvpress row on --save-rows' file (ctx: its vkv_out). */
static int write_row(ruler_run *run, const vkv_ruler_task *task, size_t length, size_t index, vkv_ruler_sample *s,
                     void *ctx)
{
    const ruler_opts *l = run->l;
    vkv_json_writer w;
    vkv_json_init(&w, ((vkv_out *)ctx)->f, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "context");
    vkv_json_str(&w, s->context);
    vkv_json_key(&w, "question");
    vkv_json_str(&w, s->question);
    vkv_json_key(&w, "answer_prefix");
    vkv_json_str(&w, s->answer_prefix);
    vkv_json_key(&w, "answer");
    eval_write_string_list(&w, s->answers, s->n_answers);
    vkv_json_key(&w, "task");
    vkv_json_str(&w, task->name);
    vkv_json_key(&w, "max_new_tokens");
    vkv_json_uint(&w, vkv_ruler_max_new_tokens(task));
    vkv_json_key(&w, "length");
    vkv_json_uint(&w, length);
    vkv_json_key(&w, "index");
    vkv_json_uint(&w, index);
    vkv_json_key(&w, "seed");
    vkv_json_num(&w, (double)l->seed);
    vkv_json_key(&w, "ruler_version");
    vkv_json_str(&w, vkv_ruler_version_name(l->version));
    vkv_json_end_object(&w);
    fputc('\n', ((vkv_out *)ctx)->f);
    run->n_rows++;
    return 0;
}

/* --save-rows: the generated samples as kvpress's rows (what --data reads,
 * with the sample's index, seed and RULER version), the model's tokenizer
 * alone loaded. 0, or an exit status. */
static int save_rows(ruler_run *run)
{
    const ruler_opts *l = run->l;
    vkv_gguf *gg = NULL;
    vkv_tokenizer *tok = NULL;
    vkv_status st = cli_load_tokenizer(l->common.mo.model_path, &gg, &tok);
    vkv_gguf_close(gg);
    vkv_out out = {0};
    if (!st) st = vkv_out_open(&out, l->save_rows);
    if (st) {
        vkv_tokenizer_free(tok);
        return cli_fail("ruler", st);
    }
    run->gen.count_ctx = tok;
    const int rc = each_generated(run, false, write_row, &out);
    vkv_tokenizer_free(tok);
    if (rc) {
        vkv_out_drop(&out);
        return rc;
    }
    if ((st = vkv_out_commit(&out))) return cli_fail("ruler", st);
    fprintf(stderr, "vkvector ruler: %zu rows (RULER %s, seed %lld) in %s", run->n_rows, vkv_ruler_version_name(l->version),
            (long long)l->seed, l->save_rows);
    if (run->n_failed) fprintf(stderr, "; %zu task lengths failed (reasons above)", run->n_failed);
    fprintf(stderr, "\n");
    return 0;
}

/* ---- options ---- */

static const char *essays_dir_default(char *buf, size_t n)
{
    const char *shared = getenv("VKVECTOR_SHARED");
    snprintf(buf, n, "%s/data/paul_graham_essays", shared ? shared : "../shared");
    return buf;
}

/* The --tasks list, each one known; all 13 without it. -1, or 2 (printed). */
static int select_tasks(ruler_opts *l)
{
    if (!l->tasks_arg) {
        for (int t = 0; t < VKV_RULER_N_TASKS; t++) l->task_on[t] = true;
        return -1;
    }
    char *copy = strdup(l->tasks_arg);
    if (!copy) return cli_usage_error("ruler", "out of host memory");
    int rc = -1;
    bool any = false;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && rc < 0; t = strtok_r(NULL, ",", &save)) {
        int i = vkv_ruler_task_index(t);
        if (i < 0)
            rc = cli_usage_error("ruler", "unknown task '%s' (RULER's: niah_single_1/2/3, niah_multikey_1/2/3, "
                                          "niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_1, qa_2)", t);
        else l->task_on[i] = any = true;
    }
    free(copy);
    return rc < 0 && !any ? cli_usage_error("ruler", "--tasks is empty") : rc;
}

/* --lengths: whole numbers of tokens, 64 to 2^24. -1, or 2 (printed). */
static int parse_lengths(ruler_opts *l)
{
    if (!l->lengths_arg) return -1;
    double v[RULER_MAX_LENGTHS];
    size_t n = 0;
    if (!vkv_niah_parse_grid(l->lengths_arg, false, 64, 1 << 24, v, RULER_MAX_LENGTHS, &n))
        return cli_usage_error("ruler", "--lengths wants token counts from 64 to 16777216 (\"4096,8192\" or "
                                        "\"START:STOP/STEP\"), got '%s'", l->lengths_arg);
    for (size_t i = 0; i < n; i++) {
        if (v[i] != floor(v[i])) return cli_usage_error("ruler", "--lengths: %g is not a whole number of tokens", v[i]);
        l->lengths[i] = (size_t)v[i];
    }
    l->n_lengths = n;
    return -1;
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_ruler_options(int argc, char **argv, ruler_opts *l)
{
    memset(l, 0, sizeof *l);
    eval_opts *o = &l->common;
    eval_opts_init(o);
    l->samples = -1;
    l->shard_n = 1;
    l->seed = 42; /* RULER's default random_seed */
    const char *shard = NULL;
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "--data", .metavar = "FILE", .dest = &l->data_path,
         .help = "kvpress's RULER rows (JSON lines: context, question, answer_prefix,\n"
                 "answer, task, max_new_tokens, length when present); without it the\n"
                 "synthetic tasks are generated from --seed"},
        {.type = CLI_STR, .names = "--out", .metavar = "FILE", .dest = &l->out_path,
         .help = "results (JSON lines; appended to, never rewritten)"},
        {.type = CLI_STR, .names = "--lengths", .metavar = "LIST", .dest = &l->lengths_arg,
         .help = "generated: the prompt lengths in tokens, generation included\n"
                 "(\"4096,8192\"); --data: the length of rows that have none (one value)"},
        {.type = CLI_STR, .names = "--tasks", .metavar = "LIST", .dest = &l->tasks_arg,
         .help = "comma-separated tasks (default: all 13; generated qa_1/qa_2 need\n"
                 "--squad/--hotpotqa, and are skipped without them)"},
        {.type = CLI_I64, .names = "--samples", .metavar = "N", .dest = &l->samples, .min = 1, .max = 1 << 24,
         .help = "samples per task and length (generated: default 10; --data: the\n"
                 "first N rows of each task, default all)"},
        {.type = CLI_I64, .names = "--seed", .metavar = "S", .dest = &l->seed, .min = 0, .max = (double)INT64_MAX,
         .help = "the generator's seed (default 42, RULER's)"},
        {.type = CLI_STR, .names = "--ruler-version", .metavar = "V", .dest = &l->version_arg,
         .help = "whose rules the generator follows: 2024 (the default: RULER at\n"
                 "commit " VKV_RULER_2024_COMMIT ", October 2024, which generated kvpress's rows;\n"
                 "haystacks grown in steps) or head (RULER's current rules; sized by\n"
                 "bisection)"},
        {.type = CLI_STR, .names = "--save-rows", .metavar = "FILE", .dest = &l->save_rows,
         .help = "write the generated samples as kvpress's rows (JSON lines, what\n"
                 "--data reads) to FILE and stop: no model is run, -m gives the\n"
                 "tokenizer (a vocabulary-only GGUF or a tokenizer folder will do)"},
        {.type = CLI_STR, .names = "--essays", .metavar = "DIR", .dest = &l->essays_dir,
         .help = "the essay haystack's text files (default ../shared/data/paul_graham_essays)"},
        {.type = CLI_STR, .names = "--words", .metavar = "FILE", .dest = &l->words_path,
         .help = "a word list, one a line (default /usr/share/dict/words: Debian's wamerican)"},
        {.type = CLI_STR, .names = "--squad", .metavar = "FILE", .dest = &l->squad_path,
         .help = "SQuAD 2.0's JSON (dev-v2.0.json), for the generated qa_1"},
        {.type = CLI_STR, .names = "--hotpotqa", .metavar = "FILE", .dest = &l->hotpotqa_path,
         .help = "HotpotQA's JSON (hotpot_dev_distractor_v1.json), for the generated qa_2"},
        {.type = CLI_STR, .names = "--shard", .metavar = "I/N", .dest = &shard,
         .help = "this job's share: sample k of a task and length when k mod N = I"},
        {.type = CLI_I64, .names = "--max-new-tokens", .metavar = "N", .dest = &l->max_new, .min = 1, .max = 1 << 20,
         .help = "cap on kvpress's generation lengths"},
        {.type = CLI_FLAG, .names = "--strict", .dest = &l->strict,
         .help = "a malformed data row is fatal (default: reported and skipped)"},
        {.type = CLI_FLAG, .names = "--quiet", .dest = &l->quiet, .help = "no line per sample"},
        EVAL_OPTIONS(*o),
    };
    int rc = cli_parse("ruler", "vkvector ruler --out RESULTS.jsonl (--data FILE.jsonl | --lengths LIST) [options]\n"
                       "       vkvector ruler --save-rows ROWS.jsonl --lengths LIST [options]\n\n"
                       "Runs RULER's tasks with kvpress's protocol (the context compressed, the question and answer prefix\n"
                       "after it, kvpress's generation length per task) with a press at each compression ratio of\n"
                       "--compression (\"0.25,0.5,0.75\" runs them in turn), and appends one line per sample to\n"
                       "RESULTS.jsonl: task, length, index, source, pred, answer, score (RULER's string_match_all,\n"
                       "string_match_part for qa), the run settings, token counts, timings and KV bytes. Samples already in\n"
                       "the file (same settings, any of the ratios) are skipped, so a stopped run resumes where it was.\n"
                       "Generated samples follow RULER's rules as of late 2024 (--ruler-version), as kvpress's rows were made.",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
    if (shard && !eval_parse_shard(shard, &l->shard_i, &l->shard_n))
        return cli_usage_error("ruler", "--shard wants I/N with 0 <= I < N, got '%s'", shard);
    if (l->version_arg && !vkv_ruler_version_parse(l->version_arg, &l->version))
        return cli_usage_error("ruler", "--ruler-version wants 2024 (or %s) or head, got '%s'", VKV_RULER_2024_COMMIT,
                               l->version_arg);
    if (l->save_rows && l->data_path)
        return cli_usage_error("ruler", "--save-rows writes generated samples: give --lengths, not --data");
    if (l->save_rows && l->out_path)
        return cli_usage_error("ruler", "--save-rows writes the samples and runs nothing: leave out --out");
    if (!l->out_path && !l->save_rows) return cli_usage_error("ruler", "give the results file with --out FILE");
    if ((rc = parse_lengths(l)) >= 0) return rc;
    if (!l->data_path && !l->n_lengths)
        return cli_usage_error("ruler", "give the lengths to generate with --lengths LIST, or kvpress's rows with "
                                        "--data FILE");
    if (l->data_path && l->n_lengths > 1)
        return cli_usage_error("ruler", "with --data, --lengths is the one length of rows that have none");
    if (!l->data_path && l->samples < 0) l->samples = 10;
    o->po.compression_list_ok = true; /* the leaderboard's x axis in one run */
    o->po.kvpress_protocol = true; /* docs/ARCHITECTURE.md §2, §5 */
    if (!eval_opts_check("ruler", o)) return 2;
    if (!l->essays_dir) l->essays_dir = essays_dir_default(l->essays_buf, sizeof l->essays_buf);
    if (!l->words_path) l->words_path = "/usr/share/dict/words";
    return select_tasks(l);
}

/* What the selected generated tasks need: the essays, the word list. 0, or 1 (printed). */
static int read_sources(ruler_run *run, char **essays)
{
    const ruler_opts *l = run->l;
    bool need_essays = false, need_words = false;
    for (int t = 0; t < VKV_RULER_N_TASKS; t++) {
        const vkv_ruler_task *k = &vkv_ruler_tasks[t];
        if (!l->task_on[t]) continue;
        need_essays |= k->kind == VKV_RULER_NIAH && k->haystack == VKV_RULER_ESSAY;
        need_words |= k->kind == VKV_RULER_CWE || (k->kind == VKV_RULER_NIAH && k->key == VKV_RULER_WORDS);
    }
    if (need_essays && vkv_ruler_read_essays(l->essays_dir, essays, &run->src.essays_len)) {
        fprintf(stderr, "vkvector ruler: the essay haystack: %s (give its directory with --essays DIR)\n",
                vkv_last_error());
        return 1;
    }
    run->src.essays = *essays;
    if (need_words && vkv_ruler_read_words(l->words_path, &run->src.words, &run->src.n_words)) {
        fprintf(stderr, "vkvector ruler: the word list: %s (install Debian's wamerican, or give one with --words "
                        "FILE)\n", vkv_last_error());
        return 1;
    }
    const char *qa_paths[2] = {l->task_on[vkv_ruler_task_index("qa_1")] ? l->squad_path : NULL,
                               l->task_on[vkv_ruler_task_index("qa_2")] ? l->hotpotqa_path : NULL};
    for (int k = 0; k < 2; k++) {
        if (!qa_paths[k]) continue;
        vkv_ruler_qa_set *set = k ? &run->hotpotqa : &run->squad;
        if ((k ? vkv_ruler_read_hotpotqa : vkv_ruler_read_squad)(qa_paths[k], set)) {
            fprintf(stderr, "vkvector ruler: %s\n", vkv_last_error());
            return 1;
        }
        if (k) run->src.hotpotqa = set;
        else run->src.squad = set;
    }
    return 0;
}

static void print_summary(const ruler_run *run)
{
    fprintf(stderr, "\nvkvector ruler: %zu new results in %s", run->n_new, run->l->out_path);
    if (run->n_bad) fprintf(stderr, "; %zu malformed rows skipped", run->n_bad);
    if (run->n_failed) fprintf(stderr, "; %zu samples failed (reasons above; a rerun retries them)", run->n_failed);
    fprintf(stderr, "\n");
    printf("task,compression,length,samples,score\n");
    for (size_t a = 0; a < run->n_acc; a++)
        for (int t = 0; t < VKV_RULER_N_TASKS; t++)
            if (run->acc[a].n[t])
                printf("%s,%g,%zu,%zu,%.2f\n", vkv_ruler_tasks[t].name, run->acc[a].compression, run->acc[a].length,
                       run->acc[a].n[t], 100.0 * run->acc[a].sum[t] / run->acc[a].n[t]);
}

int cmd_ruler(int argc, char **argv)
{
    ruler_opts l;
    int rc = parse_ruler_options(argc, argv, &l);
    if (rc >= 0) return rc;
    const eval_opts *o = &l.common;
    eval_env e = {0};
    ruler_run run = {.l = &l, .o = o, .e = &e, .source = l.data_path ? "data" : "generated",
                     .gen = {.version = l.version, .count = count_tokens}};
    char *essays = NULL;
    rc = 1;
    /* the output can be written and the data read: checked before the model is loaded */
    vkv_status st = l.save_rows ? vkv_out_check("--save-rows", l.save_rows) : vkv_append_check("--out", l.out_path);
    if (!st && l.data_path && access(l.data_path, R_OK) != 0) {
        fprintf(stderr, "vkvector ruler: cannot read '%s': %s\n", l.data_path, strerror(errno));
        goto out;
    }
    if (st || (!l.data_path && read_sources(&run, &essays))) goto out;
    if (l.save_rows) {
        rc = save_rows(&run);
        goto out;
    }
    size_t want = 0;
    for (size_t i = 0; i < l.n_lengths; i++) want = l.lengths[i] > want ? l.lengths[i] : want;
    /* the chat template's turn around the generated prompt */
    if ((st = eval_env_open("ruler", o, want ? (uint32_t)(want + 64) : 0, &e))) goto out;
    run.gen.count_ctx = (void *)e.s->tok;
    rc = eval_results_resume("ruler", l.out_path, resumed_line, &run, &run.out);
    if (rc) goto out;
    fprintf(stderr, "vkvector ruler: kvpress protocol, %s data, %s, %s%s%s%s, %u-token context; %zu results already "
                    "in %s\n", run.source, e.s->model_name, o->po.press ? o->po.press : "full cache",
            o->po.vector ? " + VECTOR" : "", o->po.compression_arg ? ", p_c " : "",
            o->po.compression_arg ? o->po.compression_arg : "", e.n_ctx, run.n_resumed, l.out_path);
    /* each p_c in turn (one pass without --compression); the samples' order within a pass is the file's */
    cli_press_opts *po = &l.common.po;
    for (int k = 0; k < (po->n_compressions ? po->n_compressions : 1) && !rc; k++) {
        if (po->n_compressions) po->compression_ratio = po->compressions[k];
        rc = l.data_path ? run_data(&run) : run_generated(&run);
    }
    if (!rc) print_summary(&run);
out:
    if (st) rc = cli_fail("ruler", st);
    if (run.out) fclose(run.out);
    strset_free(&run.done);
    vkv_ruler_gen_free(&run.gen);
    free(essays);
    vkv_ruler_words_free(run.src.words, run.src.n_words);
    vkv_ruler_qa_set_free(&run.squad);
    vkv_ruler_qa_set_free(&run.hotpotqa);
    eval_env_close(&e);
    return rc;
}
