/* vkvector eval-ppl: what compression loses, measured. Each window of text is
 * [BOS] + N context tokens + M + 1 continuation tokens. The uncompressed model
 * scores the continuation in one pass; the compressed run prefills the
 * context, compresses it, then evaluates the continuation over the
 * compressed cache. Reported over the M continuation predictions made after
 * compression: perplexity (both runs) and the mean KL divergence
 * KL(uncompressed || compressed) of the next-token distributions.
 * Lists of presses and ratios run the whole grid, baseline and VECTOR. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "kvlayout/kv_counts.h"
#include "session/session.h"

/* Parses "a,b,c" into up to max doubles in [lo, hi). */
static int parse_list(const char *s, double lo, double hi, double *out, int max)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        double v;
        if (n == max || !cli_parse_f64(t, lo, hi, &v) || v >= hi) return -1;
        out[n++] = v;
    }
    return n;
}

/* log-softmax of logits[n] into out (double). */
static void log_softmax(const float *l, uint32_t n, double *out)
{
    double mx = l[0], z = 0;
    for (uint32_t i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (uint32_t i = 0; i < n; i++) z += exp(l[i] - mx);
    double lz = mx + log(z);
    for (uint32_t i = 0; i < n; i++) out[i] = l[i] - lz;
}

typedef struct eppl_opts {
    cli_model_opts mo;
    /* What every row shares (--calib, the query mode, compression during
     * generation); the press, p_c, VECTOR, p_a, pool and map are the grid's. */
    cli_press_opts po;
    const char *text_path, *press_list, *compression_ratio_list, *pa_list;
    double compression_ratios[16];
    int n_compression_ratios;
    double pas[16];            /* --pa LIST; one -1 = the default */
    int n_pas;
    int64_t n_context, n_cont, n_windows, start_byte;
    bool vector_only, both, markdown;
    const vkv_press_ops *presses[16];
    int n_presses;
    const char *pool_list;     /* --vector-pool LIST; NULL: each scorer's own scope */
    vkv_pool_scope pools[3];
    int n_pools;
    const char *map_list;      /* --vector-map LIST; NULL: head */
    vkv_vector_map maps[2];
    int n_maps;
} eppl_opts;

/* --compression's list; false when an item is not a number or not a ratio
 * vkv_kv_check_ratios accepts. */
static bool parse_compression_ratios(eppl_opts *o)
{
    o->n_compression_ratios = parse_list(o->compression_ratio_list, -INFINITY, INFINITY, o->compression_ratios, 16);
    char why[160];
    for (int r = 0; r < o->n_compression_ratios; r++)
        if (vkv_kv_check_ratios(o->compression_ratios[r], -1, false, why, sizeof why)) return false;
    return o->n_compression_ratios > 0;
}

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_eppl_options(int argc, char **argv, eppl_opts *o)
{
    *o = (eppl_opts){.n_windows = 4, .pas = {-1}, .n_pas = 1};
    cli_model_opts_init(&o->mo);
    cli_press_opts_init(&o->po);
    const cli_opt opts[] = {
        CLI_MODEL_PATH_OPTION(o->mo.model_path),
        {.type = CLI_STR, .names = "--text", .metavar = "FILE", .dest = &o->text_path,
         .help = "text to take the windows from (e.g. a held-out split: --start-byte)"},
        {.type = CLI_I64, .names = "--context", .metavar = "N", .dest = &o->n_context, .min = 1, .max = 1 << 22,
         .help = "tokens compressed (after BOS)"},
        {.type = CLI_I64, .names = "--continuation", .metavar = "M", .dest = &o->n_cont, .min = 1, .max = 1 << 22,
         .help = "predictions scored after compression"},
        {.type = CLI_STR, .names = "--press", .metavar = "LIST", .dest = &o->press_list,
         .help = "scorers, comma-separated (keydiff,snapkv,...)"},
        {.type = CLI_STR, .names = "--compression", .metavar = "LIST", .dest = &o->compression_ratio_list,
         .help = "ratios, comma-separated (0.25,0.5,0.75,0.9)"},
        {.type = CLI_FLAG, .names = "--vector", .dest = &o->vector_only,
         .help = "VECTOR only (default: the eviction baseline only)"},
        {.type = CLI_FLAG, .names = "--both", .dest = &o->both, .help = "the eviction baseline and VECTOR"},
        {.type = CLI_STR, .names = "--calib", .metavar = "FILE", .dest = &o->po.calib,
         .help = "calibration for VECTOR (default: beside the model)"},
        {.type = CLI_STR, .names = "--pa", .metavar = "LIST", .dest = &o->pa_list,
         .help = "approximation ratios, comma-separated (default min(p_c/2, (1-p_c)/2)); with\n"
                 "several, one VECTOR row each and a table of KL with a column per p_a"},
        CLI_QUERY_MODE_OPTIONS(o->po.aware_flag, o->po.agnostic_flag),
        {.type = CLI_STR, .names = "--vector-pool", .metavar = "LIST", .dest = &o->pool_list,
         .help = "VECTOR's pool scopes, comma-separated (row,layer,global); one VECTOR row each\n"
                 "(default: each scorer's own scope)"},
        {.type = CLI_STR, .names = "--vector-map", .metavar = "LIST", .dest = &o->map_list,
         .help = "maps, comma-separated (head,joint); each its baseline and VECTOR rows (joint: one\n"
                 "tier per layer and token, the baseline selecting per layer; default head)"},
        {.type = CLI_I64, .names = "--compress-every", .metavar = "N", .dest = &o->po.compress_every, .min = 1,
         .max = 1 << 24, .help = "compress during the continuation too: at most every N tokens, the cache\n"
                                 "under --max-kv-tokens M pairs per head (--decoding kvpress: every N steps;\n"
                                 "keydiff, knorm, streamingllm, tova, observed, expected with N > 4,\n"
                                 "snapkv and pyramidkv with N >= 64)"},
        {.type = CLI_I64, .names = "--max-kv-tokens", .metavar = "M", .dest = &o->po.max_kv_tokens, .min = 2,
         .max = 1 << 24, .help = "the budget of --compress-every (M > N)"},
        CLI_DECODING_OPTIONS(o->po),
        CLI_PRESS_SEED_OPTION(o->po),
        {.type = CLI_I64, .names = "--windows", .metavar = "W", .dest = &o->n_windows, .min = 1, .max = 100000,
         .help = "windows averaged (default 4)"},
        {.type = CLI_I64, .names = "--start-byte", .metavar = "B", .dest = &o->start_byte, .min = 0,
         .max = (double)INT64_MAX, .help = "take the windows from byte B on (default 0)"},
        CLI_KV_TYPE_OPTIONS(o->mo),
        {.type = CLI_FLAG, .names = "--markdown", .dest = &o->markdown, .help = "print the table as Markdown"},
        CLI_DEVICE_OPTION(o->mo.device),
    };
    int rc = cli_parse("eval-ppl", "vkvector eval-ppl [-m MODEL] --text FILE --context N --continuation M --press LIST\n"
                       "                        --compression LIST [--vector | --both] [options]",
                       opts, CLI_N(opts), argc, argv);
    if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
    if (o->pa_list && (o->n_pas = parse_list(o->pa_list, 0, 1.5, o->pas, 16)) <= 0)
        return cli_usage_error("eval-ppl", "--pa wants ratios in [0, 1], comma-separated, got '%s'", o->pa_list);
    for (int i = 0; i < o->n_pas; i++)
        if (o->pas[i] > 1) return cli_usage_error("eval-ppl", "--pa wants ratios in [0, 1], got '%s'", o->pa_list);
    if (o->compression_ratio_list && !parse_compression_ratios(o))
        return cli_usage_error("eval-ppl", "--compression wants ratios in [0, 1), comma-separated, got '%s'",
                               o->compression_ratio_list);
    return -1;
}

/* --vector-pool's list; false (printed) on a bad word. */
static bool parse_pools(eppl_opts *o)
{
    static const vkv_pool_scope scopes[] = {VKV_POOL_ROW, VKV_POOL_LAYER, VKV_POOL_GLOBAL};
    char buf[64];
    snprintf(buf, sizeof buf, "%s", o->pool_list);
    o->n_pools = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < 3 && strcmp(t, vkv_pool_scope_name(scopes[i]))) i++;
        if (i == 3 || o->n_pools == 3) {
            cli_usage_error("eval-ppl", "--vector-pool wants row, layer or global, comma-separated, got '%s'", o->pool_list);
            return false;
        }
        o->pools[o->n_pools++] = scopes[i];
    }
    if (!o->n_pools) cli_usage_error("eval-ppl", "--vector-pool is empty");
    return o->n_pools > 0;
}

/* --vector-map's list; false (printed) on a bad word. */
static bool parse_maps(eppl_opts *o)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", o->map_list ? o->map_list : "head");
    o->n_maps = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        vkv_vector_map m = !strcmp(t, "head") ? VKV_MAP_HEAD : !strcmp(t, "joint") ? VKV_MAP_JOINT : (vkv_vector_map)-1;
        if ((int)m < 0 || o->n_maps == 2) {
            cli_usage_error("eval-ppl", "--vector-map wants head or joint, comma-separated, got '%s'", o->map_list);
            return false;
        }
        o->maps[o->n_maps++] = m;
    }
    if (!o->n_maps) cli_usage_error("eval-ppl", "--vector-map is empty");
    return o->n_maps > 0;
}

/* The rules between options; -1 when they hold, else 2 (printed). */
static int check_eppl_options(eppl_opts *o)
{
    if (!o->text_path || !o->press_list || !o->n_compression_ratios || !o->n_context || !o->n_cont)
        return cli_usage_error("eval-ppl", "--text, --context, --continuation, --press and --compression are required");
    if (o->po.aware_flag && o->po.agnostic_flag)
        return cli_usage_error("eval-ppl", "--query-aware and --query-agnostic exclude each other");
    if (o->vector_only && o->both)
        return cli_usage_error("eval-ppl", "--vector (VECTOR only) and --both (the eviction baseline and VECTOR) "
                                           "exclude each other: give one");
    const char *decoding_why = cli_decoding_check(&o->po);
    if (decoding_why) return cli_usage_error("eval-ppl", "%s", decoding_why);
    const bool budget = o->po.decoding == VKV_DECODING_BUDGET;
    if (budget && !o->po.compress_every != !o->po.max_kv_tokens)
        return cli_usage_error("eval-ppl", "--compress-every and --max-kv-tokens go together");
    if (budget && o->po.compress_every && o->po.max_kv_tokens <= o->po.compress_every)
        return cli_usage_error("eval-ppl", "--max-kv-tokens must be larger than --compress-every");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", o->press_list);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->n_presses == 16 || !(o->presses[o->n_presses] = vkv_press_find(t)))
            return cli_usage_error("eval-ppl", "%s", vkv_last_error());
        o->n_presses++;
    }
    if (o->pool_list && !parse_pools(o)) return 2;
    if (!parse_maps(o)) return 2;
    for (int r = 0; r < o->n_compression_ratios; r++)
        for (int k = 0; k < o->n_pas; k++) {
            char why[160];
            if (vkv_kv_check_ratios(o->compression_ratios[r], o->pas[k], o->vector_only || o->both, why, sizeof why))
                return cli_usage_error("eval-ppl", "%s", why);
        }
    return -1;
}

/* The text's tokens and the windows cut from them. */
typedef struct eppl_data {
    int32_t *all;              /* [n_all] the text's tokens */
    size_t n_all;
    uint32_t per, total;       /* tokens per window from the text; + BOS */
    uint32_t c0;               /* position of the first continuation token */
    int32_t bos;
    float *ref;                /* [n_windows, n_cont, n_vocab] uncompressed logits of the scored predictions */
    float *logits;             /* [total, n_vocab] */
    double *lp_ref, *lp;       /* [n_vocab] log-probabilities */
    int32_t *win;              /* [total] */
} eppl_data;

static void eppl_data_free(eppl_data *d)
{
    free(d->all);
    free(d->ref);
    free(d->logits);
    free(d->lp_ref);
    free(d->lp);
    free(d->win);
}

static vkv_status tokenize_text(const vkv_session *s, const eppl_opts *o, eppl_data *d)
{
    size_t tl;
    char *text = cli_read_file(o->text_path, &tl);
    if (!text) return VKV_ERR_IO; /* the reader recorded which file and why */
    vkv_status st = VKV_OK;
    if ((size_t)o->start_byte > tl)
        st = vkv_error(VKV_ERR_ARG, "--start-byte %lld is past the end of '%s' (%zu bytes)", (long long)o->start_byte,
                       o->text_path, tl);
    else st = vkv_tokenize(s->tok, text + o->start_byte, tl - (size_t)o->start_byte, false, false, &d->all, &d->n_all);
    free(text);
    if (st) return st;
    d->per = (uint32_t)(o->n_context + o->n_cont + 1);
    d->total = d->per + 1;
    d->c0 = (uint32_t)o->n_context + 1;
    d->bos = vkv_tokenizer_bos(s->tok);
    if ((uint64_t)d->n_all < (uint64_t)d->per * o->n_windows)
        return vkv_error(VKV_ERR_ARG, "the text has %zu tokens, fewer than %lld windows of %u", d->n_all,
                         (long long)o->n_windows, d->per);
    size_t nv = s->model->hp.n_vocab;
    d->ref = malloc(sizeof *d->ref * (size_t)o->n_windows * o->n_cont * nv);
    d->logits = malloc(sizeof *d->logits * d->total * nv);
    d->lp_ref = malloc(sizeof *d->lp_ref * nv);
    d->lp = malloc(sizeof *d->lp * nv);
    d->win = malloc(sizeof *d->win * d->total);
    if (!d->ref || !d->logits || !d->lp_ref || !d->lp || !d->win) return vkv_error(VKV_ERR_OOM, "out of host memory");
    return VKV_OK;
}

/* Window w as a prompt: [BOS] + per tokens; the context is its first n_first. */
static vkv_prompt window_prompt(eppl_data *d, int64_t w, uint32_t n_first)
{
    d->win[0] = d->bos >= 0 ? d->bos : d->all[(size_t)w * d->per];
    memcpy(d->win + 1, d->all + (size_t)w * d->per, sizeof *d->win * d->per);
    return (vkv_prompt){.ids = d->win, .n = d->total, .n_context = n_first};
}

/* The uncompressed reference of every window, computed once: the logits of
 * the predictions at positions c0 .. c0+M-1. */
static vkv_status reference_pass(vkv_session *s, const eppl_opts *o, eppl_data *d)
{
    size_t nv = s->model->hp.n_vocab;
    for (int64_t w = 0; w < o->n_windows; w++) {
        vkv_prompt pr = window_prompt(d, w, d->total);
        vkv_prefill pf;
        vkv_status st = vkv_session_prefill(s, NULL, &pr, VKV_LOGITS_ALL, d->logits, &pf);
        if (st) return st;
        memcpy(d->ref + (size_t)w * o->n_cont * nv, d->logits + (size_t)d->c0 * nv, sizeof *d->ref * o->n_cont * nv);
    }
    return VKV_OK;
}

/* One row of the table: press, p_c and method over every window, in the
 * press's query mode (its own unless overridden). */
static vkv_status grid_cell(vkv_session *s, const eppl_opts *o, eppl_data *d, const vkv_press_ops *press,
                            double compression_ratio, bool vector, vkv_vector_map map, vkv_pool_scope pool, double pa,
                            double *kl_out)
{
    uint32_t nv = s->model->hp.n_vocab;
    vkv_compression c;
    cli_press_compression(&o->po, press, true, &c);
    c.compression_ratio = compression_ratio; /* the cell's values of the grid's lists */
    c.vector = vector;
    c.p_a = pa;
    c.pool = pool;
    c.map = map;
    const bool query_aware =
        vkv_press_query_aware(press, (vkv_query_mode)cli_query_mode(o->po.aware_flag, o->po.agnostic_flag), false);
    /* query-aware: one continuation token inside the compressed prefill */
    uint32_t n_comp = query_aware ? d->c0 + 1 : d->c0;
    double nll = 0, nll_ref = 0, kl = 0, ms = 0, used_pa = 0, kib = 0;
    vkv_tier_fractions achieved = {0}; /* summed over the windows */
    for (int64_t w = 0; w < o->n_windows; w++) {
        vkv_prompt pr = window_prompt(d, w, n_comp);
        vkv_prefill pf;
        /* logits of the continuation tokens evaluated after compression */
        vkv_status st = vkv_session_prefill(s, &c, &pr, VKV_LOGITS_REST, d->logits, &pf);
        if (st) return st;
        ms += pf.report.seconds * 1e3;
        /* the compressed context's bytes: retained K+V and approximated K, in their row types */
        kib += (pf.memory.k_retained + pf.memory.v_retained + pf.memory.k_approximated) / 1024.0;
        const vkv_tier_fractions f = vkv_vector_report_achieved(&pf.report);
        achieved.retained += f.retained;
        achieved.approximated += f.approximated;
        achieved.evicted += f.evicted;
        if (s->seq->decode) ms += vkv_decode_press_stats(s->seq->decode).seconds * 1e3; /* the compressions during the continuation */
        /* compression during generation resolves the default p_a per head at each compression: nan */
        used_pa = c.compress_every && vector ? (pa >= 0 ? pa : NAN) : pf.report.pa;
        vkv_prefill_free(&pf);
        for (int64_t t = (query_aware ? 1 : 0); t < o->n_cont; t++) {
            /* prediction made at position c0 + t: compressed logits row (c0 + t - n_comp) */
            const float *lr = d->ref + ((size_t)w * o->n_cont + t) * nv;
            const float *lc = d->logits + (size_t)(d->c0 + t - n_comp) * nv;
            int32_t next = d->win[d->c0 + t + 1];
            log_softmax(lr, nv, d->lp_ref);
            log_softmax(lc, nv, d->lp);
            nll_ref -= d->lp_ref[next];
            nll -= d->lp[next];
            double k = 0;
            for (uint32_t i = 0; i < nv; i++) k += exp(d->lp_ref[i]) * (d->lp_ref[i] - d->lp[i]);
            kl += k;
        }
    }
    double cnt = (double)o->n_windows * (o->n_cont - (query_aware ? 1 : 0));
    *kl_out = kl / cnt;
    const char *mode = query_aware ? "aware" : "agnostic";
    /* baseline, VECTOR, then /joint for the joint maps' (per-layer) selection, then the pool scope */
    char meth[40];
    snprintf(meth, sizeof meth, "%s%s%s%s%s", vector ? "VECTOR" : "baseline", map == VKV_MAP_JOINT ? "/joint" : "",
             vector && pool ? "/" : "", vector && pool ? vkv_pool_scope_name(pool) : "",
             !o->po.compress_every ? "" : o->po.decoding == VKV_DECODING_KVPRESS ? "/kvpress" : "/decode");
    /* the achieved split, the window's mean: retained/approximated/evicted percent of all context tokens */
    const double pct = 100.0 / o->n_windows;
    if (o->markdown)
        printf("| %s | %s | %.2f | %s | %.3f | %.3f | %.3f | %.5f | %.1f | %.1f | %.1f/%.1f/%.1f |\n", press->name, mode,
               compression_ratio, meth, used_pa, exp(nll / cnt), exp(nll_ref / cnt), kl / cnt, ms / o->n_windows,
               kib / o->n_windows, achieved.retained * pct, achieved.approximated * pct, achieved.evicted * pct);
    else
        printf("%-13s %-8s %5.2f %-19s %6.3f %10.3f %12.3f %10.5f %11.1f %9.1f %4.1f/%4.1f/%4.1f\n", press->name, mode,
               compression_ratio, meth, used_pa, exp(nll / cnt), exp(nll_ref / cnt), kl / cnt, ms / o->n_windows,
               kib / o->n_windows, achieved.retained * pct, achieved.approximated * pct, achieved.evicted * pct);
    fflush(stdout);
    return VKV_OK;
}

/* True when K and V are one unquantized type: the reference then runs on
 * caches of the grid's types; else on f16 caches, the ones a quantized or
 * mixed cache replaces. */
static bool reference_types_are_grid_types(const eppl_opts *o)
{
    return cli_k_dtype(&o->mo) == cli_v_dtype(&o->mo) && !vkv_kv_type_quantized(cli_k_dtype(&o->mo));
}

/* Under a budget and without a compression after the context (p_c 0), the
 * grid's plain cache holds M slots; the reference holds the whole window. */
static bool grid_has_budget_slots(const eppl_opts *o)
{
    bool prefill_press = false;
    for (int ri = 0; ri < o->n_compression_ratios; ri++) prefill_press |= o->compression_ratios[ri] > 0;
    return o->po.compress_every && o->po.decoding == VKV_DECODING_BUDGET && !prefill_press;
}

/* The context: a window, plus what KVzip's reconstruction passes need; the
 * reference's cache types when reference is set, else --kv-type's. */
static vkv_status reserve_windows(vkv_session *s, const eppl_opts *o, const eppl_data *d, bool reference)
{
    uint32_t room = 0;
    for (int pi = 0; pi < o->n_presses; pi++)
        for (int ri = 0; ri < o->n_compression_ratios; ri++) {
            vkv_compression c;
            cli_press_compression(&o->po, o->presses[pi], true, &c);
            c.compression_ratio = o->compression_ratios[ri];
            uint32_t r;
            vkv_status st = vkv_session_press_room(s, &c, (uint32_t)o->n_context + 2, &r);
            if (st) return st;
            if (r > room) room = r;
        }
    const bool f16 = reference && !reference_types_are_grid_types(o);
    vkv_ctx_params cp = {.n_ctx = d->total + room, .n_batch = 512, .k_type = f16 ? VKV_F16 : cli_k_dtype(&o->mo),
                         .v_type = f16 ? VKV_F16 : cli_v_dtype(&o->mo), .compress = !reference};
    if (!reference && grid_has_budget_slots(o)) cp.n_kv_slots = (uint32_t)o->po.max_kv_tokens;
    return vkv_session_reserve(s, &cp);
}

/* The KL of one (press, p_c, pool) row of the p_a table: the baseline's, then one per p_a. */
typedef struct pa_row {
    const char *press;
    double compression_ratio, base_kl, kl[16];
    vkv_vector_map map;
    vkv_pool_scope pool;
} pa_row;

static void print_pa_table(const eppl_opts *o, const pa_row *rows, int n)
{
    printf(o->markdown ? "\n| press | p_c | map | pool | baseline |" : "\nmean KL by p_a\n%-13s %5s %-5s %-7s %9s", "press", "p_c",
           "map", "pool", "baseline");
    for (int k = 0; k < o->n_pas; k++) printf(o->markdown ? " p_a %g |" : " %9.3g", o->pas[k]);
    if (o->markdown) {
        printf("\n| --- | ---: | --- | --- | ---: |");
        for (int k = 0; k < o->n_pas; k++) printf(" ---: |");
    }
    printf("\n");
    for (int i = 0; i < n; i++) {
        const char *pool = rows[i].pool ? vkv_pool_scope_name(rows[i].pool) : "own";
        printf(o->markdown ? "| %s | %.2f | %s | %s | %.5f |" : "%-13s %5.2f %-5s %-7s %9.5f", rows[i].press,
               rows[i].compression_ratio, vkv_vector_map_name(rows[i].map), pool, rows[i].base_kl);
        for (int k = 0; k < o->n_pas; k++) printf(o->markdown ? " %.5f |" : " %9.5f", rows[i].kl[k]);
        printf("\n");
    }
}

/* Every row of the table: press x p_c x map x (baseline, VECTOR x pool x
 * p_a); with several p_a, a second table of the KLs with a column per p_a. */
static vkv_status run_grid(vkv_session *s, const eppl_opts *o, eppl_data *d)
{
    const int n_pools = o->n_pools ? o->n_pools : 1;
    const bool baseline = !o->vector_only, vector = o->vector_only || o->both;
    pa_row *rows = calloc((size_t)o->n_presses * o->n_compression_ratios * o->n_maps * n_pools, sizeof *rows);
    if (!rows) return vkv_error(VKV_ERR_OOM, "out of host memory");
    vkv_status st = VKV_OK;
    int n = 0;
    for (int pi = 0; pi < o->n_presses && !st; pi++)
        for (int ri = 0; ri < o->n_compression_ratios && !st; ri++)
            for (int mi = 0; mi < o->n_maps && !st; mi++) {
                const double compression_ratio = o->compression_ratios[ri];
                const vkv_vector_map map = o->maps[mi];
                double base_kl = NAN;
                if (baseline)
                    st = grid_cell(s, o, d, o->presses[pi], compression_ratio, false, map, VKV_POOL_DEFAULT, -1,
                                   &base_kl);
                for (int k = 0; vector && k < n_pools && !st; k++) {
                    pa_row *r = &rows[n++];
                    *r = (pa_row){.press = o->presses[pi]->name, .compression_ratio = compression_ratio,
                                  .base_kl = base_kl, .map = map, .pool = o->n_pools ? o->pools[k] : VKV_POOL_DEFAULT};
                    for (int a = 0; a < o->n_pas && !st; a++)
                        st = grid_cell(s, o, d, o->presses[pi], compression_ratio, true, map, r->pool, o->pas[a],
                                       &r->kl[a]);
                }
            }
    if (!st && vector && o->n_pas > 1) print_pa_table(o, rows, n);
    free(rows);
    return st;
}

/* Every cell of the grid against the gather of compression during
 * generation (vkv_compression_check_first), before the reference pass: -1
 * when all can run, else 2 (printed). */
static int check_grid_gather(vkv_session *s, const eppl_opts *o, const eppl_data *d)
{
    const bool baseline = !o->vector_only, vector = o->vector_only || o->both;
    for (int pi = 0; pi < o->n_presses; pi++)
        for (int ri = 0; ri < o->n_compression_ratios; ri++)
            for (int v = baseline ? 0 : 1; v <= (vector ? 1 : 0); v++)
                for (int k = 0; k < (v && o->n_pools ? o->n_pools : 1); k++)
                    for (int a = 0; a < (v ? o->n_pas : 1); a++) {
                        vkv_compression c;
                        cli_press_compression(&o->po, o->presses[pi], true, &c);
                        c.compression_ratio = o->compression_ratios[ri];
                        c.vector = v;
                        c.p_a = v ? o->pas[a] : -1;
                        c.pool = v && o->n_pools ? o->pools[k] : VKV_POOL_DEFAULT;
                        const bool aware = vkv_press_query_aware(
                            o->presses[pi], (vkv_query_mode)cli_query_mode(o->po.aware_flag, o->po.agnostic_flag),
                            false);
                        char why[400];
                        if (vkv_compression_check_first(s, &c, aware ? d->c0 + 1 : d->c0, "--max-kv-tokens",
                                                        "--compression", why, sizeof why)) {
                            fprintf(stderr, "vkvector eval-ppl: --press %s: %s\n", o->presses[pi]->name, why);
                            return 2;
                        }
                    }
    return -1;
}

int cmd_eval_ppl(int argc, char **argv)
{
    eppl_opts o;
    int rc = parse_eppl_options(argc, argv, &o);
    if (rc >= 0 || (rc = check_eppl_options(&o)) >= 0) return rc;
    vkv_session_params sp = {.model_path = o.mo.model_path, .device = o.mo.device, .load_calib = o.vector_only || o.both,
                             .calib_path = o.po.calib, .cmd = "eval-ppl"};
    vkv_session *s = NULL;
    eppl_data d = {0};
    vkv_status st;
    if ((st = vkv_session_open(&sp, &s)) || (st = tokenize_text(s, &o, &d))) goto out;
    if ((rc = check_grid_gather(s, &o, &d)) >= 0) {
        eppl_data_free(&d);
        vkv_session_close(s);
        return rc;
    }
    if ((st = reserve_windows(s, &o, &d, true))) goto out;
    printf(o.markdown ? "| press | query | p_c | method | p_a | ppl | ppl uncompressed | KL | compress ms | KV KiB | ret/apx/evi %% |\n"
                        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
                      : "%-13s %-8s %5s %-19s %6s %10s %12s %10s %11s %9s %s\n",
           "press", "query", "p_c", "method", "p_a", "ppl", "ppl uncomp", "mean KL", "compress ms", "KV KiB", "ret/apx/evi %");
    if ((st = reference_pass(s, &o, &d))) goto out;
    if (!reference_types_are_grid_types(&o))
        fprintf(stderr, "eval-ppl: K cache %s, V cache %s; the reference ran on f16 caches\n",
                vkv_dtype_get(cli_k_dtype(&o.mo))->name, vkv_dtype_get(cli_v_dtype(&o.mo))->name);
    if ((!reference_types_are_grid_types(&o) || grid_has_budget_slots(&o)) && (st = reserve_windows(s, &o, &d, false)))
        goto out;
    st = run_grid(s, &o, &d);
out:
    rc = st ? cli_fail("eval-ppl", st) : 0;
    eppl_data_free(&d);
    vkv_session_close(s);
    return rc;
}
