/* vkvector longbench: the LongBench harness (THUDM/LongBench pred.py + eval.py
 * semantics). Reads <task>.jsonl files, builds each prompt from LongBench's
 * dataset2prompt.json, truncates it in the middle to the context, applies the
 * chat template where pred.py does, generates greedily up to
 * dataset2maxlen.json tokens with the chosen press / VECTOR, scores the
 * prediction and appends one line per sample to the results file (fsync'ed),
 * so an interrupted run resumes where it stopped. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/eval_cli.h"
#include "cli/eval_results.h"
#include "eval/lb_jsonl.h"
#include "cli/strset.h"
#include "core/json.h"
#include "core/json_write.h"
#include "core/out_file.h"
#include "session/session.h"
#include "eval/metrics.h"
#include "eval/kvpress_prompt.h"
#include "eval/prompt.h"

/* ---- run settings, as stored in each result line ---- */

/* kvpress's LongBench pipeline (the paper's), or THUDM/LongBench's pred.py. */
enum { LB_PROTOCOL_KVPRESS, LB_PROTOCOL_LONGBENCH };
static const char *const protocol_names[] = {"kvpress", "longbench"};

/* Whether a result line was made with these settings (a line without a
 * protocol predates it: THUDM's prompts). */
static bool same_settings(const vkv_json *r, const eval_opts *o, const eval_env *e, int protocol)
{
    const char *proto = json_get_str(r, "protocol");
    return !strcmp(proto ? proto : "longbench", protocol_names[protocol]) && eval_same_settings(r, o, e);
}

/* ---- per-task score accumulators (the summary at the end) ---- */

typedef struct task_acc {
    double sum;
    size_t n;
} task_acc;

static double rescore(const vkv_json *r, const vkv_lb_task *task, int protocol)
{
    const vkv_lb_score_opts so = {.code_sim = VKV_CODE_SIM_LEVENSHTEIN, .lstrip = protocol == LB_PROTOCOL_KVPRESS};
    const char *pred = json_get_str(r, "pred");
    char **answers = NULL, **classes = NULL;
    size_t na = 0, nc = 0;
    double s = NAN;
    if (pred && json_string_list(vkv_json_get(r, "answers"), &answers, &na) &&
        json_string_list(vkv_json_get(r, "all_classes"), &classes, &nc))
        s = vkv_longbench_score(task, pred, (const char *const *)answers, na, (const char *const *)classes, nc, &so);
    string_list_free(answers);
    string_list_free(classes);
    return s;
}

/* A JSONL reader on path; false (printed) when it cannot be opened. */
static bool open_jsonl(jsonl_reader *rd, const char *path)
{
    if (jsonl_open(rd, path)) return true;
    fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
    return false;
}

/* ---- one sample ---- */

typedef struct lb_sample {
    const char *input, *context, *id, *dataset;
    char **answers, **classes;
    size_t n_answers, n_classes;
    const vkv_json *classes_json, *length;
} lb_sample;

static void sample_free(lb_sample *s)
{
    string_list_free(s->answers);
    string_list_free(s->classes);
}

static bool parse_sample(const vkv_json *r, lb_sample *s, const char **why)
{
    memset(s, 0, sizeof *s);
    if ((*why = lb_sample_check(r))) return false;
    s->context = json_get_str(r, "context");
    s->input = json_get_str(r, "input");
    if (!s->input) s->input = "";
    s->classes_json = vkv_json_get(r, "all_classes");
    if (!json_string_list(vkv_json_get(r, "answers"), &s->answers, &s->n_answers) ||
        !json_string_list(s->classes_json, &s->classes, &s->n_classes)) {
        sample_free(s);
        *why = "out of host memory";
        return false;
    }
    s->id = json_get_str(r, "_id");
    s->dataset = json_get_str(r, "dataset");
    s->length = vkv_json_get(r, "length");
    return true;
}

/* The command's options. */
typedef struct lb_opts {
    eval_opts common;
    const char *data_dir, *out_path, *tasks_arg, *prompts_dir;
    int64_t limit, shard_i, shard_n, max_length, max_new;
    int protocol;              /* LB_PROTOCOL_* */
    bool strict, quiet;
    const char *tasks[64];     /* task names: the --tasks list or all of them */
    size_t n_tasks;
    char *tasks_copy;          /* the names point into it */
    char prompts_buf[1100];
} lb_opts;

typedef struct lb_run {
    const eval_opts *o;
    eval_env *e;
    FILE *out;
    const char *out_path;
    int64_t max_length, max_new;
    int protocol;
    bool quiet;
    size_t chat_overhead;
    /* progress */
    strset done;               /* "task\nid" of the results already in the file */
    task_acc acc[VKV_LB_N_TASKS];
    size_t n_new, n_bad, n_failed, n_resumed;
} lb_run;

/* kvpress's: the context part (cut at its head to what the context leaves)
 * compressed, the question, the template's closing and the answer prefix
 * after it; the chat template on every task (src/eval/kvpress_prompt.h). */
static vkv_status build_prompt_kvpress(const lb_run *run, const vkv_lb_task *task, const char *tmpl,
                                       const lb_sample *s, uint32_t max_gen, eval_prompt *p)
{
    vkv_kvpress_parts parts;
    vkv_status st = vkv_kvpress_split(task->name, tmpl, s->context, s->input, &parts);
    if (st) return st;
    st = eval_kvpress_prompt(run->e, run->o, &parts, max_gen, run->max_length, p);
    vkv_kvpress_parts_free(&parts);
    return st;
}

/* THUDM's: the whole prompt, cut in the middle; the chat template except on
 * the few-shot and code tasks. */
static vkv_status build_prompt_longbench(const lb_run *run, const vkv_lb_task *task, const char *tmpl,
                                         const lb_sample *s, uint32_t max_gen, eval_prompt *p)
{
    memset(p, 0, sizeof *p);
    const eval_env *e = run->e;
    char *text = NULL;
    size_t len, split;
    vkv_status st = vkv_lb_format(tmpl, s->context, s->input, &text, &len, &split);
    if (st) return st;
    p->chat = e->s->chat != VKV_CHAT_UNKNOWN && !task->no_chat;
    int64_t budget = (int64_t)e->n_ctx - max_gen - 1 - (p->chat ? (int64_t)run->chat_overhead : 0);
    int64_t max_len = run->max_length && run->max_length < budget ? run->max_length : budget;
    for (int attempt = 0; attempt < 8; attempt++) {
        if (max_len < 8) {
            st = vkv_error(VKV_ERR_ARG, "the %u-token context leaves no room for a prompt (generation %u tokens)",
                           e->n_ctx, max_gen);
            break;
        }
        char *t = NULL;
        size_t tl, ts;
        st = vkv_lb_truncate_middle(e->s->tok, text, len, split, (size_t)max_len, &t, &tl, &ts, &p->n_orig, &p->truncated);
        vkv_prompt_free(&p->tokens);
        if (!st) st = vkv_session_tokenize(e->s, t, tl, ts, p->chat, VKV_SPLIT_WHOLE, &p->tokens);
        free(t);
        /* Re-tokenizing the cut text can give a few more tokens; KVzip needs
         * room for its reconstruction pass. */
        uint32_t extra = 0;
        vkv_compression c;
        cli_press_compression(&run->o->po, e->press, !p->chat, &c);
        if (!st) st = vkv_session_press_room(e->s, &c, (uint32_t)vkv_prompt_compressed_part(&p->tokens, run->o->po.query_aware), &extra);
        if (st) break;
        uint64_t need = p->tokens.n + max_gen + 1 + extra;
        p->max_len = (size_t)max_len;
        if (need <= e->n_ctx) break;
        max_len -= (int64_t)(need - e->n_ctx);
        if (attempt == 7) st = vkv_error(VKV_ERR_ARG, "could not fit the prompt into the %u-token context", e->n_ctx);
    }
    free(text);
    if (st) vkv_prompt_free(&p->tokens);
    return st;
}

static vkv_status build_prompt(const lb_run *run, const vkv_lb_task *task, const char *tmpl, const lb_sample *s,
                               uint32_t max_gen, eval_prompt *p)
{
    return run->protocol == LB_PROTOCOL_KVPRESS ? build_prompt_kvpress(run, task, tmpl, s, max_gen, p)
                                                : build_prompt_longbench(run, task, tmpl, s, max_gen, p);
}

/* Runs one sample and appends its line. 0, or an exit status. */
static int run_sample(lb_run *run, const vkv_lb_task *task, const char *task_name, const char *tmpl, uint32_t max_gen,
                      const lb_sample *s, size_t index, const char *id, double *score_out, bool *written,
                      const char *where)
{
    eval_env *e = run->e;
    *written = false;
    eval_prompt p;
    vkv_status st = build_prompt(run, task, tmpl, s, max_gen, &p);
    if (st) {
        fprintf(stderr, "vkvector longbench: %s: %s\n", where, vkv_last_error());
        return st == VKV_ERR_ARG || st == VKV_ERR_FORMAT ? 0 : 1;
    }
    vkv_compression comp;
    cli_press_compression(&run->o->po, e->press, !p.chat, &comp);
    /* kvpress's prompt carries its split: the compressed part ends where the prompt says */
    if (run->protocol == LB_PROTOCOL_KVPRESS) comp.query_aware = false;
    comp.sample = (uint32_t)index; /* RandomPress's draw: the sample's line (docs/ARCHITECTURE.md §2) */
    vkv_gen_params gp = {.max_new = max_gen, .stop_id = VKV_TOKEN_NULL, .strip_spm_space = true};
    if (run->protocol == LB_PROTOCOL_LONGBENCH && !strcmp(task->name, "samsum")) {
        /* pred.py: eos_token_id=[eos, encode("\n")[-1]], min_length=context+1 */
        int32_t *nl = NULL;
        size_t nn = 0;
        if (!vkv_tokenize(e->s->tok, "\n", 1, false, false, &nl, &nn) && nn) gp.stop_id = nl[nn - 1];
        free(nl);
        gp.min_one = true;
    }
    vkv_gen_result g;
    int grc = eval_generate("longbench", e, &comp, &p.tokens, &gp, where, &g);
    vkv_prompt_free(&p.tokens);
    if (grc) return grc < 0 ? 0 : grc;
    const vkv_lb_score_opts so = {.code_sim = VKV_CODE_SIM_LEVENSHTEIN, .lstrip = run->protocol == LB_PROTOCOL_KVPRESS};
    double score = vkv_longbench_score(task, g.text, (const char *const *)s->answers, s->n_answers,
                                       (const char *const *)s->classes, s->n_classes, &so);
    *score_out = score;

    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    if (!mf) {
        vkv_gen_result_free(&g);
        fprintf(stderr, "vkvector longbench: out of host memory\n");
        return 1;
    }
    vkv_json_writer w;
    vkv_json_init(&w, mf, false);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "pred");
    vkv_json_strn(&w, g.text, g.len);
    vkv_json_key(&w, "answers");
    eval_write_string_list(&w, s->answers, s->n_answers);
    vkv_json_key(&w, "all_classes");
    if (s->classes_json && s->classes_json->type == VKV_JSON_ARRAY) eval_write_string_list(&w, s->classes, s->n_classes);
    else vkv_json_null(&w);
    vkv_json_key(&w, "length");
    if (s->length && s->length->type == VKV_JSON_NUMBER) vkv_json_num(&w, s->length->number);
    else vkv_json_null(&w);
    vkv_json_key(&w, "dataset");
    vkv_json_str(&w, task_name);
    vkv_json_key(&w, "_id");
    vkv_json_str(&w, id);
    vkv_json_key(&w, "score");
    vkv_json_num(&w, score);
    eval_write_settings(&w, run->o, e);
    vkv_json_key(&w, "protocol");
    vkv_json_str(&w, protocol_names[run->protocol]);
    eval_write_generation(&w, &p, &g);
    vkv_json_end_object(&w);
    fputc('\n', mf);
    fclose(mf);
    /* One line, flushed and synced: a crash loses at most the sample in flight. */
    bool ok = eval_append_line("longbench", run->out, run->out_path, buf, blen);
    free(buf);
    if (!ok) {
        vkv_gen_result_free(&g);
        return 1;
    }
    *written = true;
    if (!run->quiet)
        fprintf(stderr, "%s: score %.3f | %zu tokens%s, %u compressed | prefill %.2f s, compress %.2f s, %u tokens "
                        "in %.2f s (%s) | KV %.1f%%\n",
                where, score, (size_t)g.n_prompt, p.truncated ? " (truncated)" : "", g.n_compressed, g.prefill_s,
                g.compress_s, g.n_gen, g.gen_s, g.stop, g.kv_bytes_full ? 100.0 * g.kv_bytes / g.kv_bytes_full : 100.0);
    vkv_gen_result_free(&g);
    return 0;
}

/* ---- prompts ---- */

static const char *prompts_dir_default(char *buf, size_t n)
{
    const char *shared = getenv("VKVECTOR_SHARED");
    snprintf(buf, n, "%s/longbench", shared ? shared : "../shared");
    char f[1200];
    snprintf(f, sizeof f, "%s/dataset2prompt.json", buf);
    return access(f, R_OK) == 0 ? buf : NULL;
}

/* The --tasks list, each one known; all tasks without it. -1, or 2 (printed). */
static int select_tasks(lb_opts *l)
{
    if (!l->tasks_arg) {
        for (int t = 0; t < VKV_LB_N_TASKS; t++) l->tasks[l->n_tasks++] = vkv_lb_tasks[t].name;
        return -1;
    }
    if (!(l->tasks_copy = strdup(l->tasks_arg))) return cli_usage_error("longbench", "out of host memory");
    for (char *save = NULL, *t = strtok_r(l->tasks_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!*t) continue;
        if (l->n_tasks == 64) return cli_usage_error("longbench", "too many tasks");
        if (!vkv_longbench_task(t))
            return cli_usage_error("longbench", "unknown task '%s' (the 16 English LongBench tasks, or their "
                                                "LongBench-E versions '<task>_e')", t);
        l->tasks[l->n_tasks++] = t;
    }
    return l->n_tasks ? -1 : cli_usage_error("longbench", "--tasks is empty");
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_longbench_options(int argc, char **argv, lb_opts *l)
{
    memset(l, 0, sizeof *l);
    eval_opts *o = &l->common;
    eval_opts_init(o);
    o->po.pa_list_ok = true;
    l->limit = -1;
    l->shard_n = 1;
    const char *shard = NULL;
    const cli_opt opts[] = {
        {.type = CLI_STR, .names = "--data", .metavar = "DIR", .dest = &l->data_dir,
         .help = "LongBench data: DIR/<task>.jsonl (fields input, context, answers, all_classes,\n"
                 "length, dataset, _id)"},
        {.type = CLI_STR, .names = "--out", .metavar = "FILE", .dest = &l->out_path,
         .help = "results (JSON lines; appended to, never rewritten)"},
        {.type = CLI_STR, .names = "--tasks", .metavar = "LIST", .dest = &l->tasks_arg,
         .help = "comma-separated tasks (default: the 16 English tasks found in DIR)"},
        {.type = CLI_STR, .names = "--prompts", .metavar = "DIR", .dest = &l->prompts_dir,
         .help = "dataset2prompt.json and dataset2maxlen.json (default: ../shared/longbench)"},
        {.type = CLI_I64, .names = "--limit", .metavar = "N", .dest = &l->limit, .min = 1, .max = (double)INT64_MAX,
         .help = "the first N samples of each task"},
        {.type = CLI_STR, .names = "--shard", .metavar = "I/N", .dest = &shard,
         .help = "this job's share: sample k of a task when k mod N = I (0 <= I < N)"},
        {.type = CLI_ENUM, .names = "--protocol", .dest = &l->protocol, .choices = "kvpress|longbench",
         .help = "the prompts: kvpress's LongBench pipeline, the paper's (default), or\n"
                 "THUDM/LongBench's pred.py"},
        {.type = CLI_I64, .names = "--max-length", .metavar = "N", .dest = &l->max_length, .min = 16, .max = 1 << 24,
         .help = "kvpress: max_context_length, the context part's first N tokens are kept;\n"
                 "longbench: max_length, prompts over N tokens are cut in the middle\n"
                 "(default and cap: what the context leaves for them)"},
        {.type = CLI_I64, .names = "--max-new-tokens", .metavar = "N", .dest = &l->max_new, .min = 1, .max = 1 << 20,
         .help = "cap on dataset2maxlen's generation lengths"},
        {.type = CLI_FLAG, .names = "--strict", .dest = &l->strict,
         .help = "a malformed data line is fatal (default: reported and skipped)"},
        {.type = CLI_FLAG, .names = "--quiet", .dest = &l->quiet, .help = "no line per sample"},
        EVAL_OPTIONS(*o),
    };
    int rc = cli_parse("longbench", "vkvector longbench --data DIR --out RESULTS.jsonl [options]\n\n"
                       "Runs LongBench (THUDM/LongBench, English tasks) with a press and compression ratio and appends one\n"
                       "line per sample to RESULTS.jsonl: LongBench's prediction fields (pred, answers, all_classes, length),\n"
                       "dataset, _id, score, the run settings, token counts, timings and KV bytes. Samples already in the file\n"
                       "(same settings) are skipped, so a run that was stopped resumes where it was.",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
    if (shard && !eval_parse_shard(shard, &l->shard_i, &l->shard_n))
        return cli_usage_error("longbench", "--shard wants I/N with 0 <= I < N, got '%s'", shard);
    if (!l->data_dir) return cli_usage_error("longbench", "give the LongBench data directory with --data DIR");
    if (!l->out_path) return cli_usage_error("longbench", "give the results file with --out FILE");
    o->po.kvpress_protocol = l->protocol == LB_PROTOCOL_KVPRESS; /* docs/ARCHITECTURE.md §2, §5 */
    if (!eval_opts_check("longbench", o)) return 2;
    if (!l->prompts_dir && !(l->prompts_dir = prompts_dir_default(l->prompts_buf, sizeof l->prompts_buf)))
        return cli_usage_error("longbench", "give the directory of dataset2prompt.json and dataset2maxlen.json with "
                                            "--prompts DIR (LongBench's config/)");
    return select_tasks(l);
}

/* Keeps the tasks that have a data file (all must with --tasks) and a
 * prompt and generation length in LongBench's config. 0, or 1 (printed). */
static int tasks_with_data(lb_opts *l, const vkv_json_doc *prompts, const vkv_json_doc *maxlens)
{
    char path[2048];
    size_t n_run = 0;
    for (size_t t = 0; t < l->n_tasks; t++) {
        snprintf(path, sizeof path, "%s/%s.jsonl", l->data_dir, l->tasks[t]);
        if (access(path, R_OK) != 0) {
            if (!l->tasks_arg) continue;
            fprintf(stderr, "vkvector longbench: cannot read '%s': %s\n", path, strerror(errno));
            return 1;
        }
        const vkv_lb_task *task = vkv_longbench_task(l->tasks[t]);
        const vkv_json *pt = vkv_json_get(vkv_json_root(prompts), task->name);
        const vkv_json *ml = vkv_json_get(vkv_json_root(maxlens), task->name);
        if (!pt || pt->type != VKV_JSON_STRING || !ml || ml->type != VKV_JSON_NUMBER || ml->number < 1) {
            fprintf(stderr, "vkvector longbench: %s has no prompt or generation length for '%s'\n", l->prompts_dir,
                    task->name);
            return 1;
        }
        l->tasks[n_run++] = l->tasks[t];
    }
    l->n_tasks = n_run;
    if (!n_run) fprintf(stderr, "vkvector longbench: no LongBench task files (<task>.jsonl) in '%s'\n", l->data_dir);
    return n_run ? 0 : 1;
}

/* One line of an earlier run: refused when of other settings, else its key
 * ("dataset\n_id") marked done and its score counted. */
static int resumed_line(void *ctx, const vkv_json *r, size_t line_no)
{
    lb_run *run = ctx;
    if (!same_settings(r, run->o, run->e, run->protocol)) {
        char have[512];
        eval_describe_settings(r, "longbench", have, sizeof have);
        fprintf(stderr, "vkvector longbench: %s:%zu holds a result of other settings (%s); write this run to "
                        "another --out file\n", run->out_path, line_no, have);
        return 2;
    }
    const char *ds = json_get_str(r, "dataset"), *id = json_get_str(r, "_id");
    if (!ds || !id) return 0;
    size_t kl = strlen(ds) + strlen(id) + 2;
    char *key = malloc(kl);
    bool oom = false;
    if (key) {
        snprintf(key, kl, "%s\n%s", ds, id);
        if (strset_add(&run->done, key, &oom)) {
            run->n_resumed++;
            int t = vkv_longbench_task_index(ds);
            double s = t >= 0 ? rescore(r, &vkv_lb_tasks[t], run->protocol) : NAN;
            if (t >= 0 && !isnan(s)) {
                run->acc[t].sum += s;
                run->acc[t].n++;
            }
        }
        free(key);
    }
    if (key && !oom) return 0;
    fprintf(stderr, "vkvector longbench: out of host memory\n");
    return 1;
}

/* Opens the results file for appending after reading what it holds. 0, or an exit status (printed). */
static int open_results(lb_run *run, size_t *n_done)
{
    run->n_resumed = 0;
    int rc = eval_results_resume("longbench", run->out_path, resumed_line, run, &run->out);
    *n_done = run->n_resumed;
    return rc;
}

/* One line of a task's data: skipped when malformed, outside the shard or
 * already done, else run. 0, or the exit status. */
static int run_line(lb_run *run, const lb_opts *l, const char *task_name, const char *tmpl, uint32_t max_gen,
                    size_t idx, const vkv_json_doc *doc, vkv_status read_st, const char *path, size_t line_no)
{
    const vkv_lb_task *task = vkv_longbench_task(task_name);
    if (idx % (size_t)l->shard_n != (size_t)l->shard_i) return 0;
    lb_sample s;
    const char *why = NULL;
    if (read_st || !parse_sample(vkv_json_root(doc), &s, &why)) {
        fprintf(stderr, "vkvector longbench: %s:%zu: malformed sample%s: %s\n", path, line_no,
                l->strict ? "" : " skipped", read_st ? vkv_last_error() : why);
        run->n_bad++;
        return l->strict ? 1 : 0;
    }
    const char *id = s.id; /* lb_sample_check: always there */
    size_t kl = strlen(task_name) + strlen(id) + 2;
    char *key = malloc(kl);
    if (!key) {
        sample_free(&s);
        return cli_fail("longbench", vkv_error(VKV_ERR_OOM, "out of host memory"));
    }
    snprintf(key, kl, "%s\n%s", task_name, id);
    int r = 0;
    if (!strset_has(&run->done, key)) {
        char where[512];
        snprintf(where, sizeof where, "%s #%zu (%s)", task_name, idx, id);
        double score = 0;
        bool written = false;
        r = run_sample(run, task, task_name, tmpl, max_gen, &s, idx, id, &score, &written, where);
        if (written) {
            strset_add(&run->done, key, NULL); /* a repeated _id in the data runs once */
            int ti = vkv_longbench_task_index(task_name);
            run->acc[ti].sum += score;
            run->acc[ti].n++;
            run->n_new++;
        } else if (!r) run->n_failed++;
    }
    free(key);
    sample_free(&s);
    return r;
}

/* Every sample of one task. 0, or the exit status. */
static int run_task(lb_run *run, const lb_opts *l, const char *task_name, const vkv_json_doc *prompts,
                    const vkv_json_doc *maxlens)
{
    const vkv_lb_task *task = vkv_longbench_task(task_name);
    const char *tmpl = vkv_json_get(vkv_json_root(prompts), task->name)->string;
    double ml = vkv_json_get(vkv_json_root(maxlens), task->name)->number;
    if (run->protocol == LB_PROTOCOL_KVPRESS) ml += VKV_KVPRESS_EXTRA_NEW_TOKENS; /* kvpress's generosity */
    uint32_t max_gen = (uint32_t)(l->max_new && l->max_new < ml ? l->max_new : ml);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s.jsonl", l->data_dir, task_name);
    jsonl_reader rd;
    if (!open_jsonl(&rd, path)) return 1;
    vkv_json_doc *doc;
    vkv_status st;
    int rc = 0;
    size_t k = 0; /* sample index: non-blank lines, malformed ones included */
    while (!rc && jsonl_next(&rd, &doc, &st)) {
        size_t idx = k++;
        if (l->limit > 0 && idx >= (size_t)l->limit) {
            vkv_json_free(doc);
            break;
        }
        rc = run_line(run, l, task_name, tmpl, max_gen, idx, doc, st, path, rd.line_no);
        vkv_json_free(doc);
    }
    bool unreadable = rd.error; /* a read error or an over-long line: the rest of the task is unknown */
    jsonl_close(&rd);
    if (!rc && unreadable) {
        fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
        rc = 1;
    }
    return rc;
}

static void print_summary(const lb_run *run)
{
    fprintf(stderr, "\nvkvector longbench: %zu new results in %s", run->n_new, run->out_path);
    if (run->n_bad) fprintf(stderr, "; %zu malformed sample lines skipped", run->n_bad);
    if (run->n_failed) fprintf(stderr, "; %zu samples failed (reasons above; a rerun retries them)", run->n_failed);
    fprintf(stderr, "\n");
    printf("task,samples,score\n");
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (run->acc[t].n)
            printf("%s,%zu,%.2f\n", vkv_lb_tasks[t].name, run->acc[t].n, 100.0 * run->acc[t].sum / run->acc[t].n);
}

static void print_banner(const lb_run *run, const eval_opts *o, size_t n_done)
{
    const vkv_session *s = run->e->s;
    bool chat = s->chat != VKV_CHAT_UNKNOWN;
    fprintf(stderr, "vkvector longbench: %s protocol, %s, %s%s, %u-token context%s%s; %zu results already in %s\n",
            protocol_names[run->protocol], s->model_name, o->po.press ? o->po.press : "full cache",
            o->po.vector ? " + VECTOR" : "", run->e->n_ctx,
            chat ? ", chat template " : "", chat ? vkv_chat_template_name(s->chat) : "", n_done, run->out_path);
    if (o->po.press)
        fprintf(stderr, "vkvector longbench: p_c %g, %s\n", o->po.compression_ratio,
                o->po.query_aware ? "query-aware" : "query-agnostic");
}

/* OUT.jsonl -> OUT.pa0.1.jsonl: the results file of one p_a of a list. */
static void per_pa_path(const char *out, double pa, char *buf, size_t n)
{
    size_t len = strlen(out);
    bool jsonl = len > 6 && !strcmp(out + len - 6, ".jsonl");
    snprintf(buf, n, "%.*s.pa%g%s", (int)(jsonl ? len - 6 : len), out, pa, jsonl ? ".jsonl" : "");
}

/* Every task of one setting into run->out_path; 0, or the exit status. */
static int run_setting(lb_run *run, const lb_opts *l, const vkv_json_doc *prompts, const vkv_json_doc *maxlens)
{
    size_t n_done;
    strset_free(&run->done);
    memset(run->acc, 0, sizeof run->acc);
    run->n_new = run->n_bad = run->n_failed = 0;
    int rc = open_results(run, &n_done);
    if (rc) return rc;
    print_banner(run, run->o, n_done);
    for (size_t t = 0; t < l->n_tasks && !rc; t++) rc = run_task(run, l, l->tasks[t], prompts, maxlens);
    if (!rc) print_summary(run);
    fclose(run->out);
    run->out = NULL;
    return rc;
}

int cmd_longbench(int argc, char **argv)
{
    lb_opts l;
    int rc = parse_longbench_options(argc, argv, &l);
    if (rc >= 0) {
        free(l.tasks_copy);
        return rc;
    }
    const eval_opts *o = &l.common;
    eval_env e = {0};
    lb_run run = {.o = o, .e = &e, .out_path = l.out_path, .max_length = l.max_length, .max_new = l.max_new,
                  .protocol = l.protocol, .quiet = l.quiet};
    vkv_json_doc *prompts = NULL, *maxlens = NULL;
    char path[2048];
    vkv_status st = VKV_OK;
    rc = 1;
    /* every results file can be appended to: checked before the model is
     * loaded (docs/ARCHITECTURE.md §6) */
    for (int k = 0; k < (l.common.po.n_pas > 1 ? l.common.po.n_pas : 1) && !st; k++) {
        if (l.common.po.n_pas > 1) per_pa_path(l.out_path, l.common.po.pas[k], path, sizeof path);
        st = vkv_append_check("--out", l.common.po.n_pas > 1 ? path : l.out_path);
    }
    if (st) goto out;
    snprintf(path, sizeof path, "%s/dataset2prompt.json", l.prompts_dir);
    if ((st = vkv_json_parse_file(path, &prompts))) goto out;
    snprintf(path, sizeof path, "%s/dataset2maxlen.json", l.prompts_dir);
    if ((st = vkv_json_parse_file(path, &maxlens))) goto out;
    if (tasks_with_data(&l, prompts, maxlens)) goto out;
    if ((st = eval_env_open("longbench", o, 0, &e))) goto out;
    if (e.s->chat != VKV_CHAT_UNKNOWN && (st = vkv_chat_overhead(e.s->tok, e.s->chat, &run.chat_overhead))) goto out;
    rc = 0;
    /* A list of p_a (the paper's Figure 3): each in turn, one results file each. */
    for (int k = 0; k < (l.common.po.n_pas > 1 ? l.common.po.n_pas : 1) && !rc; k++) {
        if (l.common.po.n_pas > 1) {
            l.common.po.pa = l.common.po.pas[k];
            per_pa_path(l.out_path, l.common.po.pa, path, sizeof path);
            run.out_path = path;
        }
        rc = run_setting(&run, &l, prompts, maxlens);
    }
out:
    if (st) rc = cli_fail("longbench", st);
    if (run.out) fclose(run.out);
    strset_free(&run.done);
    vkv_json_free(prompts);
    vkv_json_free(maxlens);
    eval_env_close(&e);
    free(l.tasks_copy);
    return rc;
}
