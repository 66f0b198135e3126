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

#include "calib/calib.h"
#include "cli/cli.h"
#include "press/kvzip.h"
#include "press/vector.h"
#include "tok/tokenizer.h"

static void usage(void)
{
    printf("usage: vkvector eval-ppl [-m MODEL] --text FILE --context N --continuation M --press LIST\n"
           "                        --compression LIST [--vector | --both] [options]\n\n"
           "  --text FILE          text to take the windows from (e.g. a held-out split: --start-byte)\n"
           "  --context N          tokens compressed (after BOS)\n"
           "  --continuation M     predictions scored after compression\n"
           "  --press LIST         scorers, comma-separated (keydiff,snapkv,...)\n"
           "  --compression LIST   ratios, comma-separated (0.25,0.5,0.75,0.9)\n"
           "  --vector             VECTOR only; --both: the eviction baseline and VECTOR (default: baseline only)\n"
           "  --calib FILE         calibration for VECTOR (default: beside the model)\n"
           "  --pa X               approximation ratio (default min(p_c/2, (1-p_c)/2))\n"
           "  --query-aware        score with the continuation's first tokens inside the prefill (not default)\n"
           "  --windows W          windows averaged (default 4)\n"
           "  --start-byte B       take the windows from byte B on (default 0)\n"
           "  --kv-type f16|f32    (default f16)\n"
           "  --markdown           print the table as Markdown\n"
           "  --device N\n");
}

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

typedef struct window_result {
    double nll_ref, nll, kl;
} window_result;

int cmd_eval_ppl(int argc, char **argv)
{
    const char *model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *text_path = NULL, *press_list = NULL, *calib_path = NULL;
    double ratios[16];
    int n_ratios = 0;
    int64_t n_context = 0, n_cont = 0, n_windows = 4, start_byte = 0;
    double pa = -1;
    bool vector_only = false, both = false, query_aware = false, markdown = false;
    vkv_dtype kv_type = VKV_F16;
    int device = cli_device_index_from_env();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
#define VALUE() do { if (!(v = cli_flag_value("eval-ppl", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); model_path = v; }
        else if (!strcmp(a, "--text")) { VALUE(); text_path = v; }
        else if (!strcmp(a, "--press")) { VALUE(); press_list = v; }
        else if (!strcmp(a, "--calib")) { VALUE(); calib_path = v; }
        else if (!strcmp(a, "--compression")) {
            VALUE();
            if ((n_ratios = parse_list(v, 0, 1, ratios, 16)) <= 0)
                return cli_usage_error("eval-ppl", "--compression wants ratios in [0, 1), comma-separated, got '%s'", v);
        } else if (!strcmp(a, "--context")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 1 << 22, &n_context)) return cli_usage_error("eval-ppl", "--context wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--continuation")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 1 << 22, &n_cont)) return cli_usage_error("eval-ppl", "--continuation wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--windows")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 100000, &n_windows)) return cli_usage_error("eval-ppl", "--windows wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--start-byte")) {
            VALUE();
            if (!cli_parse_i64(v, 0, INT64_MAX, &start_byte)) return cli_usage_error("eval-ppl", "--start-byte wants a byte offset, got '%s'", v);
        } else if (!strcmp(a, "--pa")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 1, &pa)) return cli_usage_error("eval-ppl", "--pa wants a ratio in [0, 1], got '%s'", v);
        } else if (!strcmp(a, "--vector")) vector_only = true;
        else if (!strcmp(a, "--both")) both = true;
        else if (!strcmp(a, "--query-aware")) query_aware = true;
        else if (!strcmp(a, "--markdown")) markdown = true;
        else if (!strcmp(a, "--kv-type")) {
            VALUE();
            if (!strcmp(v, "f16")) kv_type = VKV_F16;
            else if (!strcmp(v, "f32")) kv_type = VKV_F32;
            else return cli_usage_error("eval-ppl", "--kv-type wants f16 or f32, got '%s'", v);
        } else if (!strcmp(a, "--device")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("eval-ppl", "--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else return cli_usage_error("eval-ppl", "unknown option '%s'", a);
#undef VALUE
    }
    if (!text_path || !press_list || !n_ratios || !n_context || !n_cont)
        return cli_usage_error("eval-ppl", "--text, --context, --continuation, --press and --compression are required");
    const vkv_press_ops *presses[16];
    int n_presses = 0;
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", press_list);
        for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n_presses == 16 || !(presses[n_presses] = vkv_press_find(t)))
                return cli_usage_error("eval-ppl", "%s", vkv_last_error());
            n_presses++;
        }
    }
    for (int r = 0; r < n_ratios; r++) {
        char why[160];
        if (vkv_kv_check_ratios(ratios[r], pa, vector_only || both, why, sizeof why))
            return cli_usage_error("eval-ppl", "%s", why);
    }

    int rc = 1;
    vkv_status st;
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *m = NULL;
    vkv_tokenizer *tok = NULL;
    vkv_ctx *ctx = NULL;
    vkv_calib *calib = NULL;
    vkv_kvzip_prompt kz = {0};
    char *text = NULL;
    int32_t *all = NULL;
    size_t n_all = 0;
    float *ref_logits = NULL, *logits = NULL;
    double *lp_ref = NULL, *lp = NULL;
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)) ||
        (st = vkv_model_load(gpu, model_path, &m)) || (st = vkv_tokenizer_load(m->gguf, &tok)))
        goto fail;
    if (vector_only || both) {
        char def[1100];
        if (!calib_path) {
            cli_default_calib_path(model_path, def, sizeof def);
            calib_path = def;
        }
        if ((st = vkv_calib_load(calib_path, m, &calib))) goto fail;
    }
    size_t tl;
    if (!(text = cli_read_file(text_path, &tl))) {
        st = VKV_ERR_IO; /* the reader recorded which file and why */
        goto fail;
    }
    if ((size_t)start_byte > tl) {
        st = vkv_error(VKV_ERR_ARG, "--start-byte %lld is past the end of '%s' (%zu bytes)", (long long)start_byte, text_path, tl);
        goto fail;
    }
    if ((st = vkv_tokenize(tok, text + start_byte, tl - (size_t)start_byte, false, false, &all, &n_all))) goto fail;
    uint32_t per = (uint32_t)(n_context + n_cont + 1), total = per + 1; /* + BOS */
    if ((uint64_t)n_all < (uint64_t)per * n_windows) {
        st = vkv_error(VKV_ERR_ARG, "the text has %zu tokens, fewer than %lld windows of %u", n_all, (long long)n_windows, per);
        goto fail;
    }
    uint32_t nv = m->hp.n_vocab;
    /* KVzip's reconstruction passes need room after the context. */
    uint32_t room = 0;
    for (int pi = 0; pi < n_presses; pi++)
        if (presses[pi]->repeat_pass && !kz.first) {
            if ((st = vkv_kvzip_prompt_make(tok, false, &kz))) goto fail;
            room = vkv_kvzip_max_pass_tokens(&kz, (uint32_t)n_context + 2);
        }
    vkv_ctx_params cp = {.n_ctx = total + room, .n_batch = 512, .kv_type = kv_type};
    if ((st = vkv_ctx_create(gpu, m, &cp, &ctx))) goto fail;
    ref_logits = malloc(sizeof *ref_logits * (size_t)total * nv);
    logits = malloc(sizeof *logits * (size_t)total * nv);
    lp_ref = malloc(sizeof *lp_ref * nv);
    lp = malloc(sizeof *lp * nv);
    int32_t *win = malloc(sizeof *win * total);
    if (!ref_logits || !logits || !lp_ref || !lp || !win) { free(win); st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    int32_t bos = vkv_tokenizer_bos(tok);

    printf(markdown ? "| press | p_c | method | p_a | ppl | ppl uncompressed | KL | compress ms |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n"
                    : "%-13s %5s %-8s %6s %10s %12s %10s %11s\n",
           "press", "p_c", "method", "p_a", "ppl", "ppl uncomp", "mean KL", "compress ms");
    /* The uncompressed reference of every window, computed once. */
    double *ref_nll = calloc((size_t)n_windows, sizeof *ref_nll);
    float *ref_all = malloc(sizeof *ref_all * (size_t)n_windows * n_cont * nv);
    if (!ref_nll || !ref_all) { free(win); free(ref_nll); free(ref_all); st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    uint32_t c0 = (uint32_t)n_context + 1; /* position of the first continuation token */
    for (int64_t w = 0; w < n_windows; w++) {
        win[0] = bos >= 0 ? bos : all[(size_t)w * per];
        memcpy(win + 1, all + (size_t)w * per, sizeof *win * per);
        if ((st = vkv_ctx_reset(ctx)) || (st = vkv_ctx_eval(ctx, win, total, true, ref_logits))) {
            free(win); free(ref_nll); free(ref_all);
            goto fail;
        }
        /* predictions at positions c0 .. c0+M-1 (tokens c0+1 ..) */
        memcpy(ref_all + (size_t)w * n_cont * nv, ref_logits + (size_t)c0 * nv, sizeof *ref_all * n_cont * nv);
    }
    for (int pi = 0; pi < n_presses; pi++)
        for (int ri = 0; ri < n_ratios; ri++)
            for (int method = both ? 0 : vector_only ? 1 : 0; method <= (both || vector_only ? 1 : 0); method++) {
                double nll = 0, nll_ref = 0, kl = 0, ms = 0;
                float used_pa = 0;
                for (int64_t w = 0; w < n_windows; w++) {
                    win[0] = bos >= 0 ? bos : all[(size_t)w * per];
                    memcpy(win + 1, all + (size_t)w * per, sizeof *win * per);
                    vkv_vector_params vp = {.press = presses[pi], .pp = vkv_press_params_default(ratios[ri]),
                                            .vector = method == 1, .pa = pa, .w = calib ? calib->w : NULL,
                                            .context_ids = win, .kvzip = presses[pi]->repeat_pass ? &kz : NULL};
                    vkv_press_session *s = NULL;
                    vkv_vector_report rep = {0};
                    uint32_t n_comp = query_aware ? c0 + 1 : c0; /* aware: one continuation token in the prefill */
                    if ((st = vkv_ctx_reset(ctx)) || (st = vkv_press_session_create(ctx, m, &vp, n_comp, &s)) ||
                        (st = vkv_ctx_eval(ctx, win, n_comp, false, NULL)) || (st = vkv_press_session_compress(s, &rep))) {
                        vkv_press_session_free(s);
                        free(win); free(ref_nll); free(ref_all);
                        goto fail;
                    }
                    ms += rep.seconds * 1e3;
                    used_pa = rep.pa;
                    vkv_vector_report_free(&rep);
                    vkv_press_session_free(s);
                    /* continuation tokens c0 .. (or c0+1 .. when aware); logits of each */
                    uint32_t from = n_comp;
                    if ((st = vkv_ctx_eval(ctx, win + from, total - from, true, logits))) {
                        free(win); free(ref_nll); free(ref_all);
                        goto fail;
                    }
                    for (int64_t t = (query_aware ? 1 : 0); t < n_cont; t++) {
                        /* prediction made at position c0 + t: compressed logits row (c0 + t - from) */
                        const float *lr = ref_all + ((size_t)w * n_cont + t) * nv;
                        const float *lc = logits + (size_t)(c0 + t - from) * nv;
                        int32_t next = win[c0 + t + 1];
                        log_softmax(lr, nv, lp_ref);
                        log_softmax(lc, nv, lp);
                        nll_ref -= lp_ref[next];
                        nll -= lp[next];
                        double k = 0;
                        for (uint32_t i = 0; i < nv; i++) k += exp(lp_ref[i]) * (lp_ref[i] - lp[i]);
                        kl += k;
                    }
                }
                double cnt = (double)n_windows * (n_cont - (query_aware ? 1 : 0));
                const char *meth = method ? "VECTOR" : "baseline";
                if (markdown)
                    printf("| %s | %.2f | %s | %.3f | %.3f | %.3f | %.5f | %.1f |\n", presses[pi]->name, ratios[ri], meth,
                           used_pa, exp(nll / cnt), exp(nll_ref / cnt), kl / cnt, ms / n_windows);
                else
                    printf("%-13s %5.2f %-8s %6.3f %10.3f %12.3f %10.5f %11.1f\n", presses[pi]->name, ratios[ri], meth, used_pa,
                           exp(nll / cnt), exp(nll_ref / cnt), kl / cnt, ms / n_windows);
                fflush(stdout);
            }
    free(win);
    free(ref_nll);
    free(ref_all);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("eval-ppl", st);
out:
    free(text);
    free(all);
    free(ref_logits);
    free(logits);
    free(lp_ref);
    free(lp);
    vkv_calib_free(calib);
    vkv_kvzip_prompt_free(&kz);
    vkv_ctx_free(ctx);
    vkv_tokenizer_free(tok);
    vkv_model_free(gpu, m);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}
