/* vkvector perplexity: mean negative log-likelihood of text under the model,
 * in windows that each start at position 0 with BOS, and the loss by position
 * (does the model use long context?). With --eval-json it recomputes the
 * windows a training recipe stored and compares with the recipe's numbers.
 * --token-logprobs writes each window's ids and per-token log-probabilities
 * (what `vkvector serve`'s echo with logprobs returns for the same ids). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/json.h"
#include "core/json_write.h"
#include "core/out_file.h"
#include "infer/sampler.h"
#include "session/session.h"

typedef struct ppl_opts {
    cli_model_opts mo;         /* --ctx 0: the model's context; --kv-type f32 by default */
    const char *text_path, *eval_path, *text_root, *logprobs_path;
    int64_t start_byte, max_windows;
    double tolerance;
    int64_t abl_tail, abl_short;   /* --ablation T:S */
} ppl_opts;

/* "T:S" with positive integers. */
static bool parse_ablation(const char *v, int64_t *tail, int64_t *keep)
{
    const char *colon = strchr(v, ':');
    char tail_s[32];
    if (!colon || (size_t)(colon - v) >= sizeof tail_s) return false;
    memcpy(tail_s, v, (size_t)(colon - v));
    tail_s[colon - v] = 0;
    return cli_parse_i64(tail_s, 1, 1 << 20, tail) && cli_parse_i64(colon + 1, 1, 1 << 20, keep);
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_ppl_options(int argc, char **argv, ppl_opts *o)
{
    *o = (ppl_opts){.max_windows = INT64_MAX, .tolerance = 0.01};
    cli_model_opts_init(&o->mo);
    o->mo.kv_type = 1; /* f32: scores match a reference's */
    const char *ablation = NULL;
    const cli_opt opts[] = {
        CLI_MODEL_PATH_OPTION(o->mo.model_path),
        {.type = CLI_STR, .names = "--text", .metavar = "FILE", .dest = &o->text_path,
         .help = "text to score: tokenized, cut into windows of --ctx tokens, each\nscored from position 0 with BOS"},
        {.type = CLI_I64, .names = "--start-byte", .metavar = "B", .dest = &o->start_byte, .min = 0,
         .max = (double)INT64_MAX, .help = "score the text from byte B on (e.g. a held-out split)"},
        {.type = CLI_I64, .names = "--max-windows", .metavar = "W", .dest = &o->max_windows, .min = 1,
         .max = (double)INT64_MAX, .help = "at most W windows (default: all)"},
        {.type = CLI_I64, .names = "--ctx", .metavar = "N", .dest = &o->mo.n_ctx, .min = 2, .max = 1 << 20,
         .help = "window length in tokens including BOS (default: the model's context)"},
        {.type = CLI_STR, .names = "--eval-json", .metavar = "FILE", .dest = &o->eval_path,
         .help = "windows stored by a training recipe (ids + mean_nll): score each and\n"
                 "compare; with --text-root DIR also re-tokenize each window's bytes of\nDIR/<text> and require the same ids"},
        {.type = CLI_STR, .names = "--text-root", .metavar = "DIR", .dest = &o->text_root,
         .help = "with --eval-json: where the recipe's text is"},
        {.type = CLI_F64, .names = "--tolerance", .metavar = "R", .dest = &o->tolerance, .min = 0, .max = 10,
         .help = "with --eval-json: fail (exit 1) when a window's relative perplexity\ndifference exceeds R (default 0.01)"},
        {.type = CLI_STR, .names = "--ablation", .metavar = "T:S", .dest = &ablation,
         .help = "also score the last T predictions of each window with only S tokens\n"
                 "of context before them ([BOS] + S + T tokens): the loss the model\n"
                 "loses without its long context (same text, less context)"},
        {.type = CLI_STR, .names = "--token-logprobs", .metavar = "FILE", .dest = &o->logprobs_path,
         .help = "with --text: write one JSON line per window, {\"window\", \"ids\",\n"
                 "\"logprobs\"}: log p(ids[i] | ids[..i]), null for the first"},
        CLI_KV_TYPE_OPTIONS_DEFAULT(o->mo, "f32"),
        CLI_DEVICE_OPTION(o->mo.device),
    };
    int rc = cli_parse("perplexity", "vkvector perplexity [-m MODEL.gguf|DIR] (--text FILE | --eval-json FILE) [options]",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
    if (ablation && !parse_ablation(ablation, &o->abl_tail, &o->abl_short))
        return cli_usage_error("perplexity", "--ablation wants T:S with positive integers, got '%s'", ablation);
    if (!!o->text_path == !!o->eval_path) return cli_usage_error("perplexity", "give exactly one of --text and --eval-json");
    if (o->logprobs_path && !o->text_path) return cli_usage_error("perplexity", "--token-logprobs goes with --text");
    return -1;
}

/* Scratch of the scoring: logits of a whole window and per-position losses. */
typedef struct ppl_scratch {
    float *logits;             /* [n_ctx, n_vocab] */
    double *pos_nll;           /* [n_ctx] this window's loss by position */
    double *pos_sum;           /* [n_ctx] summed over windows */
    size_t *pos_cnt;           /* [n_ctx] */
} ppl_scratch;

/* Scores one sequence: sum of -log p(ids[p+1] | ids[..p]) and the per-position
 * losses (pos_nll[p], p < n-1). */
static vkv_status score(vkv_session *s, int32_t *ids, uint32_t n, float *logits, double *sum, double *pos_nll)
{
    uint32_t n_vocab = s->model->hp.n_vocab;
    vkv_prompt pr = {.ids = ids, .n = n, .n_context = n};
    vkv_prefill pf;
    vkv_status st = vkv_session_prefill(s, NULL, &pr, VKV_LOGITS_ALL, logits, &pf);
    if (st) return st;
    *sum = 0;
    for (uint32_t p = 0; p + 1 < n; p++) {
        /* the serve's echo logprobs are this same function's (docs/SERVE.md, "Log-probabilities") */
        double nll = -vkv_log_softmax_top(logits + (size_t)p * n_vocab, (int32_t)n_vocab, ids[p + 1], 0, NULL, NULL);
        *sum += nll;
        if (pos_nll) pos_nll[p] = nll;
    }
    return VKV_OK;
}

/* The windows of an --eval-json document; *n_ctx grows to the longest. */
static vkv_status eval_json_windows(const vkv_json_doc *doc, const char *path, int64_t *n_ctx, const vkv_json **out)
{
    const vkv_json *windows = vkv_json_get(vkv_json_root(doc), "windows");
    if (!windows || windows->type != VKV_JSON_ARRAY || !windows->n_items)
        return vkv_error(VKV_ERR_FORMAT, "%s has no \"windows\" array", path);
    for (size_t w = 0; w < windows->n_items; w++) {
        const vkv_json *wids = vkv_json_get(windows->items[w], "ids");
        if (!wids || wids->type != VKV_JSON_ARRAY || wids->n_items < 2)
            return vkv_error(VKV_ERR_FORMAT, "%s: window %zu has no \"ids\" array", path, w);
        if ((int64_t)wids->n_items > *n_ctx) *n_ctx = (int64_t)wids->n_items;
    }
    *out = windows;
    return VKV_OK;
}

/* Whether the window's bytes of the recipe's text tokenize to its ids (after BOS). */
static bool same_tokens(const vkv_session *s, const vkv_json *win, const char *text, size_t text_len,
                        const int32_t *ids, size_t n_ids)
{
    const vkv_json *b0 = vkv_json_get(win, "byte_start"), *b1 = vkv_json_get(win, "byte_end");
    size_t s0 = b0 ? (size_t)b0->number : 0, s1 = b1 ? (size_t)b1->number : 0;
    int32_t *t_ids = NULL;
    size_t t_n = 0;
    bool same = false;
    if (s0 <= s1 && s1 <= text_len && !vkv_tokenize(s->tok, text + s0, s1 - s0, false, false, &t_ids, &t_n))
        same = t_n + 1 == n_ids && !memcmp(t_ids, ids + 1, t_n * sizeof *ids);
    free(t_ids);
    return same;
}

/* --eval-json: recompute each stored window and compare. 0 when all agree. */
static int check_recipe(vkv_session *s, const ppl_opts *o, const vkv_json_doc *doc, const vkv_json *windows,
                        ppl_scratch *sc, vkv_status *st)
{
    const vkv_json *rel = vkv_json_get(vkv_json_root(doc), "text");
    char *text = NULL;
    size_t text_len = 0;
    if (o->text_root && rel && rel->string) {
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", o->text_root, rel->string);
        if (!(text = cli_read_file(p, &text_len))) return *st = VKV_ERR_IO; /* the reader recorded which file and why */
    }
    int bad = 0;
    double total = 0;
    size_t total_n = 0, n_windows = 0;
    printf("%-7s %8s %12s %12s %10s %10s %9s %s\n", "window", "tokens", "nll vkvector", "nll recipe", "ppl vkv",
           "ppl recipe", "rel diff", text ? "tokens match" : "");
    for (size_t w = 0; w < windows->n_items && !*st; w++) {
        const vkv_json *win = windows->items[w], *wids = vkv_json_get(win, "ids"), *want = vkv_json_get(win, "mean_nll");
        size_t n_ids = wids->n_items;
        int32_t *ids = malloc(sizeof *ids * n_ids);
        if (!ids) {
            *st = vkv_error(VKV_ERR_OOM, "out of host memory");
            break;
        }
        for (size_t i = 0; i < n_ids; i++) ids[i] = (int32_t)wids->items[i]->number;
        double sum;
        if (!(*st = score(s, ids, (uint32_t)n_ids, sc->logits, &sum, NULL))) {
            double nll = sum / (double)(n_ids - 1), ref = want ? want->number : NAN;
            double rel_diff = fabs(exp(nll) - exp(ref)) / exp(ref);
            const char *match = "";
            if (text) {
                bool same = same_tokens(s, win, text, text_len, ids, n_ids);
                match = same ? "yes" : "NO";
                bad += !same;
            }
            printf("%-7zu %8zu %12.6f %12.6f %10.4f %10.4f %9.5f %s\n", w, n_ids, nll, ref, exp(nll), exp(ref), rel_diff, match);
            bad += !(rel_diff <= o->tolerance);
            total += sum;
            total_n += n_ids - 1;
            n_windows++;
        }
        free(ids);
    }
    free(text);
    if (*st) return 1;
    printf("mean nll %.6f (ppl %.4f) over %zu windows; %s\n", total / total_n, exp(total / total_n), n_windows,
           bad ? "MISMATCH" : "all within tolerance");
    return bad ? 1 : 0;
}

static void print_text_report(const ppl_opts *o, const ppl_scratch *sc, size_t n_windows, double total, size_t total_n,
                              double abl_full, double abl_cut, size_t abl_n)
{
    int64_t n_ctx = o->mo.n_ctx;
    printf("%zu windows x %lld tokens: mean nll %.6f, perplexity %.4f\n", n_windows, (long long)n_ctx, total / total_n,
           exp(total / total_n));
    printf("loss by position (mean nll of the next token):\n");
    for (int64_t b = 0; b + 1 < n_ctx; b = b ? b * 2 : 64) {
        int64_t e = b ? b * 2 : 64;
        if (e > n_ctx - 1) e = n_ctx - 1;
        double sum = 0;
        size_t c = 0;
        for (int64_t p = b; p < e; p++) { sum += sc->pos_sum[p]; c += sc->pos_cnt[p]; }
        if (c) printf("  positions %5lld-%-5lld %.4f\n", (long long)b, (long long)e, sum / c);
    }
    if (abl_n)
        printf("context ablation: the last %lld predictions of each window: mean nll %.4f with the full window "
               "before them, %.4f with only %lld tokens of context (%+.4f)\n",
               (long long)o->abl_tail, abl_full / abl_n, abl_cut / abl_n, (long long)o->abl_short,
               abl_cut / abl_n - abl_full / abl_n);
}

/* One --token-logprobs line: the window's ids and each one's log-probability. */
static void write_window_logprobs(FILE *f, size_t w, const int32_t *ids, size_t n, const double *pos_nll)
{
    vkv_json_writer jw;
    vkv_json_init(&jw, f, false);
    vkv_json_begin_object(&jw);
    vkv_json_key(&jw, "window");
    vkv_json_uint(&jw, w);
    vkv_json_key(&jw, "ids");
    vkv_json_begin_array(&jw);
    for (size_t i = 0; i < n; i++) vkv_json_int(&jw, ids[i]);
    vkv_json_end_array(&jw);
    vkv_json_key(&jw, "logprobs");
    vkv_json_begin_array(&jw);
    for (size_t i = 0; i < n; i++) {
        if (i) vkv_json_num(&jw, -pos_nll[i - 1]);
        else vkv_json_null(&jw);
    }
    vkv_json_end_array(&jw);
    vkv_json_end_object(&jw);
    fputc('\n', f);
}

/* --text: windows of n_ctx tokens, each from position 0 with BOS. */
static vkv_status score_text(vkv_session *s, const ppl_opts *o, const int32_t *all, size_t n_all, ppl_scratch *sc,
                             FILE *logprobs)
{
    int64_t n_ctx = o->mo.n_ctx, abl_tail = o->abl_tail, abl_short = o->abl_short;
    int32_t bos = vkv_tokenizer_bos(s->tok);
    size_t per = (size_t)n_ctx - (bos >= 0 ? 1 : 0), n_windows = 0, total_n = 0, abl_n = 0;
    double total = 0, abl_full = 0, abl_cut = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)n_ctx);
    if (!ids) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = VKV_OK;
    for (size_t off = 0; off + per <= n_all && (int64_t)n_windows < o->max_windows; off += per) {
        size_t k = 0;
        if (bos >= 0) ids[k++] = bos;
        memcpy(ids + k, all + off, per * sizeof *ids);
        double sum;
        if ((st = score(s, ids, (uint32_t)n_ctx, sc->logits, &sum, sc->pos_nll))) break;
        if (logprobs) write_window_logprobs(logprobs, n_windows, ids, (size_t)n_ctx, sc->pos_nll);
        for (int64_t p = 0; p + 1 < n_ctx; p++) { sc->pos_sum[p] += sc->pos_nll[p]; sc->pos_cnt[p]++; }
        total += sum;
        total_n += (size_t)n_ctx - 1;
        if (abl_tail && abl_tail + abl_short + 1 <= n_ctx) {
            /* The same last abl_tail predictions, first with the whole window
             * before them, then with only abl_short tokens of context. */
            for (int64_t p = n_ctx - 1 - abl_tail; p + 1 < n_ctx; p++) abl_full += sc->pos_nll[p];
            int32_t *short_ids = ids + (n_ctx - abl_tail - abl_short - 1);
            int32_t keep0 = short_ids[0];
            if (bos >= 0) short_ids[0] = bos; /* [BOS] + S + T: overwrite the token before the S */
            double s2;
            if ((st = score(s, short_ids, (uint32_t)(abl_short + abl_tail + 1), sc->logits, &s2, sc->pos_nll))) break;
            short_ids[0] = keep0;
            for (int64_t p = abl_short; p < abl_short + abl_tail; p++) abl_cut += sc->pos_nll[p];
            abl_n += (size_t)abl_tail;
        }
        n_windows++;
    }
    free(ids);
    if (st) return st;
    if (!n_windows)
        return vkv_error(VKV_ERR_ARG, "the text has %zu tokens, fewer than one %lld-token window", n_all, (long long)n_ctx);
    print_text_report(o, sc, n_windows, total, total_n, abl_full, abl_cut, abl_n);
    return VKV_OK;
}

static vkv_status tokenize_text(const vkv_session *s, const ppl_opts *o, int32_t **all, size_t *n_all)
{
    size_t text_len;
    char *text = cli_read_file(o->text_path, &text_len);
    if (!text) return VKV_ERR_IO; /* the reader recorded which file and why */
    vkv_status st;
    if ((size_t)o->start_byte > text_len)
        st = vkv_error(VKV_ERR_ARG, "--start-byte %lld is past the end of '%s' (%zu bytes)", (long long)o->start_byte,
                       o->text_path, text_len);
    else st = vkv_tokenize(s->tok, text + o->start_byte, text_len - (size_t)o->start_byte, false, false, all, n_all);
    free(text);
    return st;
}

int cmd_perplexity(int argc, char **argv)
{
    ppl_opts o;
    int rc = parse_ppl_options(argc, argv, &o);
    if (rc >= 0) return rc;
    vkv_session_params sp = {.model_path = o.mo.model_path, .device = o.mo.device, .cmd = "perplexity"};
    vkv_session *s = NULL;
    vkv_json_doc *doc = NULL;
    const vkv_json *windows = NULL;
    ppl_scratch sc = {0};
    int32_t *all = NULL;
    size_t n_all = 0;
    vkv_out lp_out = {0};
    rc = 1;
    vkv_status st;
    if ((o.logprobs_path && (st = vkv_out_check("--token-logprobs", o.logprobs_path))) ||
        (o.eval_path && (st = vkv_json_parse_file(o.eval_path, &doc))) || (st = vkv_session_open(&sp, &s)))
        goto out;
    if (!o.mo.n_ctx) o.mo.n_ctx = s->model->hp.n_ctx_train;
    if (doc && (st = eval_json_windows(doc, o.eval_path, &o.mo.n_ctx, &windows))) goto out;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)o.mo.n_ctx, .n_batch = 512, .k_type = cli_k_dtype(&o.mo), .v_type = cli_v_dtype(&o.mo)};
    if ((st = vkv_session_reserve(s, &cp))) goto out;
    size_t n = (size_t)o.mo.n_ctx;
    sc.logits = malloc(sizeof *sc.logits * n * s->model->hp.n_vocab);
    sc.pos_nll = calloc(n, sizeof *sc.pos_nll);
    sc.pos_sum = calloc(n, sizeof *sc.pos_sum);
    sc.pos_cnt = calloc(n, sizeof *sc.pos_cnt);
    if (!sc.logits || !sc.pos_nll || !sc.pos_sum || !sc.pos_cnt) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto out;
    }
    if (doc) rc = check_recipe(s, &o, doc, windows, &sc, &st);
    else if (!(st = tokenize_text(s, &o, &all, &n_all)) &&
             !(o.logprobs_path && (st = vkv_out_open(&lp_out, o.logprobs_path))) &&
             !(st = score_text(s, &o, all, n_all, &sc, lp_out.f)) && !(o.logprobs_path && (st = vkv_out_commit(&lp_out))))
        rc = 0;
out:
    vkv_out_drop(&lp_out);
    if (st) rc = cli_fail("perplexity", st);
    free(all);
    free(sc.logits);
    free(sc.pos_nll);
    free(sc.pos_sum);
    free(sc.pos_cnt);
    vkv_json_free(doc);
    vkv_session_close(s);
    return rc;
}
