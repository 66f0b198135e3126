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
#include "eval/lb_jsonl.h"
#include "cli/strset.h"
#include "core/json.h"
#include "core/json_write.h"
#include "eval/generate.h"
#include "eval/metrics.h"
#include "eval/prompt.h"

static void longbench_usage(void)
{
    printf("usage: vkvector longbench --data DIR --out RESULTS.jsonl [options]\n\n"
           "Runs LongBench (THUDM/LongBench, English tasks) with a press and compression ratio and appends one\n"
           "line per sample to RESULTS.jsonl: LongBench's prediction fields (pred, answers, all_classes, length),\n"
           "dataset, _id, score, the run settings, token counts, timings and KV bytes. Samples already in the file\n"
           "(same settings) are skipped, so a run that was stopped resumes where it was.\n\n"
           "  --data DIR            LongBench data: DIR/<task>.jsonl (fields input, context, answers, all_classes,\n"
           "                        length, dataset, _id)\n"
           "  --out FILE            results (JSON lines; appended to, never rewritten)\n"
           "  --tasks LIST          comma-separated tasks (default: the 16 English tasks found in DIR)\n"
           "  --prompts DIR         dataset2prompt.json and dataset2maxlen.json (default: ../shared/longbench)\n"
           "  --limit N             the first N samples of each task\n"
           "  --shard I/N           this job's share: sample k of a task when k mod N = I (0 <= I < N)\n"
           "  --max-length N        LongBench's max_length: prompts over N tokens are cut in the middle\n"
           "                        (default and cap: the context minus the task's generation length and the\n"
           "                        chat template)\n"
           "  --max-new-tokens N    cap on dataset2maxlen's generation lengths\n"
           "  --strict              a malformed data line is fatal (default: reported and skipped)\n"
           "  --quiet               no line per sample\n");
    eval_print_common_usage(stdout);
}

/* ---- run settings, as stored in each result line ---- */

static bool num_eq(const vkv_json *v, double want)
{
    if (isnan(want)) return !v || v->type == VKV_JSON_NULL;
    return v && v->type == VKV_JSON_NUMBER && fabs(v->number - want) <= 1e-6 * (1 + fabs(want));
}

static bool bool_eq(const vkv_json *v, bool want) { return v && v->type == VKV_JSON_BOOL && v->boolean == want; }

/* Whether a result line was made with these settings. */
static bool same_settings(const vkv_json *r, const eval_opts *o, const eval_env *e)
{
    const char *model = json_get_str(r, "model");
    const vkv_json *press = vkv_json_get(r, "press");
    if (!model || strcmp(model, e->model_name)) return false;
    if (o->press_name ? !(press && press->type == VKV_JSON_STRING && !strcmp(press->string, o->press_name))
                      : !(press && press->type == VKV_JSON_NULL))
        return false;
    double pa = eval_effective_pa(o);
    if (!isnan(pa)) pa = (float)pa; /* stored from a float */
    const vkv_json *jpa = vkv_json_get(r, "pa");
    bool pa_ok = isnan(pa) ? (!jpa || jpa->type == VKV_JSON_NULL)
                           : (jpa && jpa->type == VKV_JSON_NUMBER && fabs(jpa->number - pa) <= 1e-6);
    return num_eq(vkv_json_get(r, "compression"), o->press_name ? o->compression : 0) &&
           bool_eq(vkv_json_get(r, "vector"), o->vector) && pa_ok &&
           bool_eq(vkv_json_get(r, "query_aware"), o->query_aware);
}

static void describe_settings(const vkv_json *r, char *buf, size_t n)
{
    const char *model = json_get_str(r, "model"), *press = json_get_str(r, "press");
    const vkv_json *c = vkv_json_get(r, "compression"), *v = vkv_json_get(r, "vector"), *q = vkv_json_get(r, "query_aware");
    snprintf(buf, n, "model %s, press %s, p_c %g%s%s", model ? model : "?", press ? press : "none",
             c && c->type == VKV_JSON_NUMBER ? c->number : 0, v && v->boolean ? ", VECTOR" : "",
             q && q->boolean ? ", query-aware" : "");
}

/* ---- per-task score accumulators (the summary at the end) ---- */

typedef struct task_acc {
    double sum;
    size_t n;
} task_acc;

static double rescore(const vkv_json *r, const vkv_lb_task *task)
{
    const char *pred = json_get_str(r, "pred");
    char **answers = NULL, **classes = NULL;
    size_t na = 0, nc = 0;
    double s = NAN;
    if (pred && json_string_list(vkv_json_get(r, "answers"), &answers, &na) &&
        json_string_list(vkv_json_get(r, "all_classes"), &classes, &nc))
        s = vkv_longbench_score(task, pred, (const char *const *)answers, na, (const char *const *)classes, nc, NULL);
    string_list_free(answers);
    string_list_free(classes);
    return s;
}

/* Reads what an earlier run wrote: the keys ("dataset\n_id") done with these
 * settings, their scores; refuses a file of other settings. *needs_newline:
 * the file ends inside a line (a crash mid-write). */
static int scan_results(const char *path, const eval_opts *o, const eval_env *e, strset *done, task_acc *acc,
                        bool *needs_newline, size_t *n_done)
{
    *needs_newline = false;
    *n_done = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    if (sb.st_size > 0) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "vkvector longbench: cannot read '%s': %s\n", path, strerror(errno));
            return 1;
        }
        if (fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n') *needs_newline = true;
        fclose(f);
    }
    jsonl_reader rd;
    if (!jsonl_open(&rd, path)) {
        fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
        return 1;
    }
    vkv_json_doc *doc;
    vkv_status st;
    int rc = 0;
    while (jsonl_next(&rd, &doc, &st)) {
        if (st) {
            fprintf(stderr, "vkvector longbench: %s:%zu: malformed result line skipped (%s)\n", path, rd.line_no,
                    vkv_last_error());
            continue;
        }
        const vkv_json *r = vkv_json_root(doc);
        if (!same_settings(r, o, e)) {
            char have[512];
            describe_settings(r, have, sizeof have);
            fprintf(stderr, "vkvector longbench: %s:%zu holds a result of other settings (%s); write this run to "
                            "another --out file\n", path, rd.line_no, have);
            vkv_json_free(doc);
            rc = 2;
            break;
        }
        const char *ds = json_get_str(r, "dataset"), *id = json_get_str(r, "_id");
        if (ds && id) {
            size_t kl = strlen(ds) + strlen(id) + 2;
            char *key = malloc(kl);
            bool oom = false;
            if (key) {
                snprintf(key, kl, "%s\n%s", ds, id);
                if (strset_add(done, key, &oom)) {
                    (*n_done)++;
                    int t = vkv_longbench_task_index(ds);
                    double s = t >= 0 ? rescore(r, &vkv_lb_tasks[t]) : NAN;
                    if (t >= 0 && !isnan(s)) {
                        acc[t].sum += s;
                        acc[t].n++;
                    }
                }
                free(key);
            }
            if (!key || oom) {
                fprintf(stderr, "vkvector longbench: out of host memory\n");
                vkv_json_free(doc);
                rc = 1;
                break;
            }
        }
        vkv_json_free(doc);
    }
    if (!rc && rd.error) {
        fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
        rc = 1;
    }
    jsonl_close(&rd);
    return rc;
}

/* ---- one sample ---- */

typedef struct lb_sample {
    const char *input, *context, *id, *dataset;
    char **answers, **classes;
    size_t n_answers, n_classes;
    const vkv_json *classes_json, *length;
} lb_sample;

static bool parse_sample(const vkv_json *r, lb_sample *s, const char **why)
{
    memset(s, 0, sizeof *s);
    const vkv_json *in = vkv_json_get(r, "input");
    if (!(s->context = json_get_str(r, "context"))) { *why = "no string member \"context\""; return false; }
    if (in && in->type != VKV_JSON_STRING && in->type != VKV_JSON_NULL) { *why = "\"input\" is not a string"; return false; }
    s->input = in && in->type == VKV_JSON_STRING ? in->string : "";
    const vkv_json *ans = vkv_json_get(r, "answers");
    if (!ans || ans->type != VKV_JSON_ARRAY || !json_string_list(ans, &s->answers, &s->n_answers)) {
        *why = "\"answers\" is not an array of strings";
        return false;
    }
    s->classes_json = vkv_json_get(r, "all_classes");
    if (!json_string_list(s->classes_json, &s->classes, &s->n_classes)) {
        string_list_free(s->answers);
        *why = "\"all_classes\" is neither null nor an array of strings";
        return false;
    }
    const vkv_json *id = vkv_json_get(r, "_id");
    if (id && id->type != VKV_JSON_STRING) {
        string_list_free(s->answers);
        string_list_free(s->classes);
        *why = "\"_id\" is not a string";
        return false;
    }
    s->id = id ? id->string : NULL;
    s->dataset = json_get_str(r, "dataset");
    s->length = vkv_json_get(r, "length");
    return true;
}

static void sample_free(lb_sample *s)
{
    string_list_free(s->answers);
    string_list_free(s->classes);
}

static void write_string_list(vkv_json_writer *w, char **l, size_t n)
{
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) vkv_json_str(w, l[i]);
    vkv_json_end_array(w);
}

typedef struct lb_run {
    const eval_opts *o;
    eval_env *e;
    FILE *out;
    const char *out_path;
    int64_t max_length, max_new;
    bool quiet;
    size_t chat_overhead;
} lb_run;

/* The prompt's token ids and split for one sample. */
typedef struct lb_prompt {
    int32_t *ids;
    size_t n, n_split, n_orig;
    bool truncated, chat;
    size_t max_len;
} lb_prompt;

static vkv_status build_prompt(const lb_run *run, const vkv_lb_task *task, const char *tmpl, const lb_sample *s,
                               uint32_t max_gen, lb_prompt *p)
{
    memset(p, 0, sizeof *p);
    const eval_env *e = run->e;
    char *text = NULL;
    size_t len, split;
    vkv_status st = vkv_lb_format(tmpl, s->context, s->input, &text, &len, &split);
    if (st) return st;
    p->chat = e->chat != VKV_CHAT_UNKNOWN && !task->no_chat;
    int64_t budget = (int64_t)e->n_ctx - max_gen - 1 - (p->chat ? (int64_t)run->chat_overhead : 0);
    int64_t max_len = run->max_length && run->max_length < budget ? run->max_length : budget;
    for (int attempt = 0; attempt < 8; attempt++) {
        if (max_len < 8) {
            st = vkv_error(VKV_ERR_ARG, "the %u-token context leaves no room for a prompt (generation %u tokens)",
                           e->n_ctx, max_gen);
            break;
        }
        char *t = NULL, *c = NULL;
        size_t tl, ts, cl, cs;
        st = vkv_lb_truncate_middle(e->tok, text, len, split, (size_t)max_len, &t, &tl, &ts, &p->n_orig, &p->truncated);
        if (!st && p->chat) st = vkv_eval_chat_wrap(e->chat, t, tl, ts, &c, &cl, &cs);
        if (!st) {
            free(p->ids);
            p->ids = NULL;
            st = p->chat ? vkv_eval_tokenize_split(e->tok, c, cl, cs, true, &p->ids, &p->n, &p->n_split)
                         : vkv_eval_tokenize_split(e->tok, t, tl, ts, false, &p->ids, &p->n, &p->n_split);
        }
        free(t);
        free(c);
        if (st) break;
        /* Re-tokenizing the cut text can give a few more tokens; KVzip needs
         * room for its reconstruction pass. */
        uint64_t n_first = run->o->query_aware ? p->n : p->n_split;
        uint64_t extra = e->have_kvzip ? vkv_kvzip_max_pass_tokens(p->chat ? &e->kvzip : &e->kvzip_plain,
                                                                   (uint32_t)n_first) : 0;
        uint64_t need = p->n + max_gen + 1 + extra;
        p->max_len = (size_t)max_len;
        if (need <= e->n_ctx) break;
        max_len -= (int64_t)(need - e->n_ctx);
        if (attempt == 7) st = vkv_error(VKV_ERR_ARG, "could not fit the prompt into the %u-token context", e->n_ctx);
    }
    free(text);
    if (st) {
        free(p->ids);
        p->ids = NULL;
    }
    return st;
}

/* Runs one sample and appends its line. 0, or an exit status. */
static int run_sample(lb_run *run, const vkv_lb_task *task, const char *task_name, const char *tmpl, uint32_t max_gen,
                      const lb_sample *s, const char *id, double *score_out, bool *written, const char *where)
{
    eval_env *e = run->e;
    *written = false;
    lb_prompt p;
    vkv_status st = build_prompt(run, task, tmpl, s, max_gen, &p);
    if (st) {
        fprintf(stderr, "vkvector longbench: %s: %s\n", where, vkv_last_error());
        return st == VKV_ERR_ARG || st == VKV_ERR_FORMAT ? 0 : 1;
    }
    vkv_gen_params gp = eval_gen_params(run->o, e, p.chat);
    gp.max_new = max_gen;
    gp.strip_spm_space = true;
    if (!strcmp(task->name, "samsum")) {
        /* pred.py: eos_token_id=[eos, encode("\n")[-1]], min_length=context+1 */
        int32_t *nl = NULL;
        size_t nn = 0;
        if (!vkv_tokenize(e->tok, "\n", 1, false, false, &nl, &nn) && nn) gp.stop_id = nl[nn - 1];
        free(nl);
        gp.min_one = true;
    }
    vkv_gen_result g;
    st = vkv_generate(e->ctx, e->model, e->tok, p.ids, p.n, p.n_split, &gp, &g);
    free(p.ids);
    if (st) {
        fprintf(stderr, "vkvector longbench: %s: %s: %s\n", where, vkv_status_name(st), vkv_last_error());
        return st == VKV_ERR_ARG ? 0 : cli_fail("longbench", st);
    }
    double score = vkv_longbench_score(task, g.text, (const char *const *)s->answers, s->n_answers,
                                       (const char *const *)s->classes, s->n_classes, NULL);
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
    write_string_list(&w, s->answers, s->n_answers);
    vkv_json_key(&w, "all_classes");
    if (s->classes_json && s->classes_json->type == VKV_JSON_ARRAY) write_string_list(&w, s->classes, s->n_classes);
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
    vkv_json_key(&w, "chat_template");
    vkv_json_bool(&w, p.chat);
    vkv_json_key(&w, "prompt_tokens");
    vkv_json_uint(&w, g.n_prompt);
    vkv_json_key(&w, "prompt_tokens_untruncated");
    vkv_json_uint(&w, p.n_orig);
    vkv_json_key(&w, "truncated");
    vkv_json_bool(&w, p.truncated);
    vkv_json_key(&w, "compressed_tokens");
    vkv_json_uint(&w, g.n_compressed);
    vkv_json_key(&w, "generated_tokens");
    vkv_json_uint(&w, g.n_gen);
    vkv_json_key(&w, "stop");
    vkv_json_str(&w, g.stop);
    vkv_json_key(&w, "prefill_s");
    vkv_json_num(&w, g.prefill_s);
    vkv_json_key(&w, "compress_s");
    vkv_json_num(&w, g.compress_s);
    vkv_json_key(&w, "generate_s");
    vkv_json_num(&w, g.gen_s);
    vkv_json_key(&w, "kv_bytes");
    vkv_json_uint(&w, g.kv_bytes);
    vkv_json_key(&w, "kv_bytes_full");
    vkv_json_uint(&w, g.kv_bytes_full);
    vkv_json_end_object(&w);
    fputc('\n', mf);
    fclose(mf);
    /* One line, flushed and synced: a crash loses at most the sample in flight. */
    bool ok = fwrite(buf, 1, blen, run->out) == blen && fflush(run->out) == 0 && fsync(fileno(run->out)) == 0;
    free(buf);
    if (!ok) {
        fprintf(stderr, "vkvector longbench: error writing '%s': %s\n", run->out_path, strerror(errno));
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

static bool parse_shard(const char *s, int64_t *i, int64_t *n)
{
    const char *slash = strchr(s, '/');
    if (!slash) return false;
    char a[32];
    size_t l = (size_t)(slash - s);
    if (l == 0 || l >= sizeof a) return false;
    memcpy(a, s, l);
    a[l] = 0;
    return cli_parse_i64(a, 0, 1 << 20, i) && cli_parse_i64(slash + 1, 1, 1 << 20, n) && *i < *n;
}

int cmd_longbench(int argc, char **argv)
{
    eval_opts o;
    eval_opts_init(&o);
    const char *data_dir = NULL, *out_path = NULL, *tasks_arg = NULL, *prompts_dir = NULL;
    int64_t limit = -1, shard_i = 0, shard_n = 1, max_length = 0, max_new = 0;
    bool strict = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = eval_parse_common("longbench", argc, argv, &i, &o);
        if (r < 0) return 2;
        if (r > 0) continue;
#define VALUE() do { if (!(v = cli_flag_value("longbench", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { longbench_usage(); return 0; }
        else if (!strcmp(a, "--data")) { VALUE(); data_dir = v; }
        else if (!strcmp(a, "--out")) { VALUE(); out_path = v; }
        else if (!strcmp(a, "--tasks")) { VALUE(); tasks_arg = v; }
        else if (!strcmp(a, "--prompts")) { VALUE(); prompts_dir = v; }
        else if (!strcmp(a, "--limit")) {
            VALUE();
            if (!cli_parse_i64(v, 1, INT64_MAX, &limit)) return cli_usage_error("longbench", "--limit wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--shard")) {
            VALUE();
            if (!parse_shard(v, &shard_i, &shard_n)) return cli_usage_error("longbench", "--shard wants I/N with 0 <= I < N, got '%s'", v);
        } else if (!strcmp(a, "--max-length")) {
            VALUE();
            if (!cli_parse_i64(v, 16, 1 << 24, &max_length)) return cli_usage_error("longbench", "--max-length wants an integer >= 16, got '%s'", v);
        } else if (!strcmp(a, "--max-new-tokens")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 1 << 20, &max_new)) return cli_usage_error("longbench", "--max-new-tokens wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--strict")) strict = true;
        else if (!strcmp(a, "--quiet")) quiet = true;
        else return cli_usage_error("longbench", "unknown option '%s'", a);
#undef VALUE
    }
    if (!data_dir) return cli_usage_error("longbench", "give the LongBench data directory with --data DIR");
    if (!out_path) return cli_usage_error("longbench", "give the results file with --out FILE");
    if (!eval_opts_check("longbench", &o)) return 2;
    char pbuf[1100];
    if (!prompts_dir && !(prompts_dir = prompts_dir_default(pbuf, sizeof pbuf)))
        return cli_usage_error("longbench", "give the directory of dataset2prompt.json and dataset2maxlen.json with "
                                            "--prompts DIR (LongBench's config/)");

    /* tasks: the list, each known and with a data file */
    const char *tasks[64];
    size_t n_tasks = 0;
    char *tasks_copy = tasks_arg ? strdup(tasks_arg) : NULL;
    if (tasks_arg) {
        for (char *save = NULL, *t = strtok_r(tasks_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!*t) continue;
            if (n_tasks == 64) { free(tasks_copy); return cli_usage_error("longbench", "too many tasks"); }
            if (!vkv_longbench_task(t)) {
                int rc = cli_usage_error("longbench", "unknown task '%s' (the 16 English LongBench tasks, or their "
                                                      "LongBench-E versions '<task>_e')", t);
                free(tasks_copy);
                return rc;
            }
            tasks[n_tasks++] = t;
        }
        if (!n_tasks) { free(tasks_copy); return cli_usage_error("longbench", "--tasks is empty"); }
    } else
        for (int t = 0; t < VKV_LB_N_TASKS; t++) tasks[n_tasks++] = vkv_lb_tasks[t].name;

    int rc = 1;
    vkv_status st;
    eval_env e = {0};
    vkv_json_doc *prompts = NULL, *maxlens = NULL;
    FILE *out = NULL;
    strset done = {0};
    task_acc acc[VKV_LB_N_TASKS] = {0};
    char path[2048];
    snprintf(path, sizeof path, "%s/dataset2prompt.json", prompts_dir);
    if ((st = vkv_json_parse_file(path, &prompts))) goto fail;
    snprintf(path, sizeof path, "%s/dataset2maxlen.json", prompts_dir);
    if ((st = vkv_json_parse_file(path, &maxlens))) goto fail;

    /* which tasks have data */
    size_t n_run = 0;
    for (size_t t = 0; t < n_tasks; t++) {
        snprintf(path, sizeof path, "%s/%s.jsonl", data_dir, tasks[t]);
        if (access(path, R_OK) != 0) {
            if (tasks_arg) {
                fprintf(stderr, "vkvector longbench: cannot read '%s': %s\n", path, strerror(errno));
                rc = 1;
                goto out;
            }
            continue;
        }
        const vkv_lb_task *task = vkv_longbench_task(tasks[t]);
        const vkv_json *pt = vkv_json_get(vkv_json_root(prompts), task->name);
        const vkv_json *ml = vkv_json_get(vkv_json_root(maxlens), task->name);
        if (!pt || pt->type != VKV_JSON_STRING || !ml || ml->type != VKV_JSON_NUMBER || ml->number < 1) {
            fprintf(stderr, "vkvector longbench: %s has no prompt or generation length for '%s'\n", prompts_dir,
                    task->name);
            rc = 1;
            goto out;
        }
        tasks[n_run++] = tasks[t];
    }
    if (!n_run) {
        fprintf(stderr, "vkvector longbench: no LongBench task files (<task>.jsonl) in '%s'\n", data_dir);
        rc = 1;
        goto out;
    }

    if ((st = eval_env_open("longbench", &o, 0, &e))) goto fail;
    bool needs_newline;
    size_t n_done;
    if ((rc = scan_results(out_path, &o, &e, &done, acc, &needs_newline, &n_done))) goto out;
    if (!(out = fopen(out_path, "ab"))) {
        fprintf(stderr, "vkvector longbench: cannot write '%s': %s\n", out_path, strerror(errno));
        rc = 1;
        goto out;
    }
    if (needs_newline) {
        /* The last line was cut by a crash: end it, so it stays one bad line. */
        fprintf(stderr, "vkvector longbench: %s ends inside a line (an interrupted write); it is kept and skipped\n",
                out_path);
        if (fputc('\n', out) == EOF || fflush(out) || fsync(fileno(out))) {
            fprintf(stderr, "vkvector longbench: error writing '%s': %s\n", out_path, strerror(errno));
            rc = 1;
            goto out;
        }
    }
    lb_run run = {&o, &e, out, out_path, max_length, max_new, quiet, 0};
    if (e.chat != VKV_CHAT_UNKNOWN && (st = vkv_eval_chat_overhead(e.tok, e.chat, &run.chat_overhead))) goto fail;
    fprintf(stderr, "vkvector longbench: %s, %s%s, %u-token context%s%s; %zu results already in %s\n", e.model_name,
            o.press_name ? o.press_name : "full cache", o.vector ? " + VECTOR" : "", e.n_ctx,
            e.chat != VKV_CHAT_UNKNOWN ? ", chat template " : "",
            e.chat != VKV_CHAT_UNKNOWN ? vkv_chat_template_name(e.chat) : "", n_done, out_path);
    if (o.press_name)
        fprintf(stderr, "vkvector longbench: p_c %g, %s\n", o.compression, o.query_aware ? "query-aware" : "query-agnostic");

    size_t n_new = 0, n_bad = 0, n_failed = 0;
    for (size_t t = 0; t < n_run; t++) {
        const vkv_lb_task *task = vkv_longbench_task(tasks[t]);
        int ti = vkv_longbench_task_index(tasks[t]);
        const char *tmpl = vkv_json_get(vkv_json_root(prompts), task->name)->string;
        double ml = vkv_json_get(vkv_json_root(maxlens), task->name)->number;
        uint32_t max_gen = (uint32_t)(max_new && max_new < ml ? max_new : ml);
        snprintf(path, sizeof path, "%s/%s.jsonl", data_dir, tasks[t]);
        jsonl_reader rd;
        if (!jsonl_open(&rd, path)) {
            fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
            rc = 1;
            goto out;
        }
        vkv_json_doc *doc;
        size_t k = 0; /* sample index: non-blank lines, malformed ones included */
        while (jsonl_next(&rd, &doc, &st)) {
            size_t idx = k++;
            if (limit > 0 && idx >= (size_t)limit) {
                vkv_json_free(doc);
                break;
            }
            if (idx % (size_t)shard_n != (size_t)shard_i) {
                vkv_json_free(doc);
                continue;
            }
            lb_sample s;
            const char *why = NULL;
            if (st || !parse_sample(vkv_json_root(doc), &s, &why)) {
                fprintf(stderr, "vkvector longbench: %s:%zu: malformed sample %s (%s)\n", path, rd.line_no,
                        strict ? "" : "skipped", st ? vkv_last_error() : why);
                vkv_json_free(doc);
                n_bad++;
                if (strict) {
                    jsonl_close(&rd);
                    rc = 1;
                    goto out;
                }
                continue;
            }
            char idbuf[64];
            const char *id = s.id;
            if (!id) {
                snprintf(idbuf, sizeof idbuf, "#%zu", idx);
                id = idbuf;
            }
            size_t kl = strlen(tasks[t]) + strlen(id) + 2;
            char *key = malloc(kl);
            if (!key) {
                sample_free(&s);
                vkv_json_free(doc);
                jsonl_close(&rd);
                st = vkv_error(VKV_ERR_OOM, "out of host memory");
                goto fail;
            }
            snprintf(key, kl, "%s\n%s", tasks[t], id);
            if (strset_has(&done, key)) {
                free(key);
                sample_free(&s);
                vkv_json_free(doc);
                continue;
            }
            char where[512];
            snprintf(where, sizeof where, "%s #%zu (%s)", tasks[t], idx, id);
            double score = 0;
            bool written = false;
            int r = run_sample(&run, task, tasks[t], tmpl, max_gen, &s, id, &score, &written, where);
            if (written) strset_add(&done, key, NULL); /* a repeated _id in the data runs once */
            free(key);
            sample_free(&s);
            vkv_json_free(doc);
            if (r) {
                jsonl_close(&rd);
                rc = r;
                goto out;
            }
            if (written) {
                acc[ti].sum += score;
                acc[ti].n++;
                n_new++;
            } else n_failed++;
        }
        bool unreadable = rd.error; /* a read error or an over-long line: the rest of the task is unknown */
        jsonl_close(&rd);
        if (unreadable) {
            fprintf(stderr, "vkvector longbench: %s\n", vkv_last_error());
            rc = 1;
            goto out;
        }
    }
    fprintf(stderr, "\nvkvector longbench: %zu new results in %s", n_new, out_path);
    if (n_bad) fprintf(stderr, "; %zu malformed sample lines skipped", n_bad);
    if (n_failed) fprintf(stderr, "; %zu samples failed (reasons above; a rerun retries them)", n_failed);
    fprintf(stderr, "\n");
    printf("task,samples,score\n");
    for (int t = 0; t < VKV_LB_N_TASKS; t++)
        if (acc[t].n) printf("%s,%zu,%.2f\n", vkv_lb_tasks[t].name, acc[t].n, 100.0 * acc[t].sum / acc[t].n);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("longbench", st);
out:
    if (out) fclose(out);
    strset_free(&done);
    vkv_json_free(prompts);
    vkv_json_free(maxlens);
    eval_env_close(&e);
    free(tasks_copy);
    return rc;
}
