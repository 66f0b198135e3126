/* vkvector perplexity: mean negative log-likelihood of text under the model,
 * in windows that each start at position 0 with BOS, and the loss by position
 * (does the model use long context?). With --eval-json it recomputes the
 * windows a training recipe stored and compares with the recipe's numbers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "infer/forward.h"
#include "tok/tokenizer.h"

static void ppl_usage(void)
{
    printf("usage: vkvector perplexity [-m MODEL.gguf] (--text FILE | --eval-json FILE) [options]\n\n"
           "  --text FILE        text to score: tokenized, cut into windows of --ctx tokens, each\n"
           "                     scored from position 0 with BOS\n"
           "  --start-byte B     score the text from byte B on (e.g. a held-out split)\n"
           "  --max-windows W    at most W windows (default: all)\n"
           "  --ctx N            window length in tokens including BOS (default: the model's context)\n"
           "  --eval-json FILE   windows stored by a training recipe (ids + mean_nll): score each and\n"
           "                     compare; with --text-root DIR also re-tokenize each window's bytes of\n"
           "                     DIR/<text> and require the same ids\n"
           "  --tolerance R      with --eval-json: fail (exit 1) when a window's relative perplexity\n"
           "                     difference exceeds R (default 0.01)\n"
           "  --ablation T:S     also score the last T predictions of each window with only S tokens\n"
           "                     of context before them ([BOS] + S + T tokens): the loss the model\n"
           "                     loses without its long context (same text, less context)\n"
           "  --kv-type f16|f32  (default f32)\n"
           "  --device N\n");
}

/* Scores one sequence: sum of -log p(ids[p+1] | ids[..p]) and the per-position
 * losses (pos_nll[p], p < n-1). */
static vkv_status score(vkv_ctx *ctx, const int32_t *ids, uint32_t n, uint32_t n_vocab, float *logits, double *sum,
                        double *pos_nll)
{
    vkv_status st = vkv_ctx_reset(ctx);
    if (!st) st = vkv_ctx_eval(ctx, ids, n, true, logits);
    if (st) return st;
    *sum = 0;
    for (uint32_t p = 0; p + 1 < n; p++) {
        const float *l = logits + (size_t)p * n_vocab;
        double mx = l[0];
        for (uint32_t i = 1; i < n_vocab; i++) mx = l[i] > mx ? l[i] : mx;
        double z = 0;
        for (uint32_t i = 0; i < n_vocab; i++) z += exp(l[i] - mx);
        double nll = -(l[ids[p + 1]] - mx - log(z));
        *sum += nll;
        if (pos_nll) pos_nll[p] = nll;
    }
    return VKV_OK;
}

int cmd_perplexity(int argc, char **argv)
{
    const char *model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *text_path = NULL, *eval_path = NULL, *text_root = NULL;
    int64_t n_ctx = 0, start_byte = 0, max_windows = INT64_MAX;
    double tolerance = 0.01;
    int64_t abl_tail = 0, abl_short = 0;
    vkv_dtype kv_type = VKV_F32;
    int device = cli_device_index_from_env();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
#define VALUE() do { if (!(v = cli_flag_value("perplexity", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { ppl_usage(); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); model_path = v; }
        else if (!strcmp(a, "--text")) { VALUE(); text_path = v; }
        else if (!strcmp(a, "--eval-json")) { VALUE(); eval_path = v; }
        else if (!strcmp(a, "--text-root")) { VALUE(); text_root = v; }
        else if (!strcmp(a, "--ctx")) {
            VALUE();
            if (!cli_parse_i64(v, 2, 1 << 20, &n_ctx)) return cli_usage_error("perplexity", "--ctx wants 2..1048576, got '%s'", v);
        } else if (!strcmp(a, "--start-byte")) {
            VALUE();
            if (!cli_parse_i64(v, 0, INT64_MAX, &start_byte)) return cli_usage_error("perplexity", "--start-byte wants a byte offset, got '%s'", v);
        } else if (!strcmp(a, "--max-windows")) {
            VALUE();
            if (!cli_parse_i64(v, 1, INT64_MAX, &max_windows)) return cli_usage_error("perplexity", "--max-windows wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--ablation")) {
            VALUE();
            char *colon = strchr(v, ':');
            char tail_s[32];
            if (!colon || (size_t)(colon - v) >= sizeof tail_s) return cli_usage_error("perplexity", "--ablation wants T:S, got '%s'", v);
            memcpy(tail_s, v, (size_t)(colon - v));
            tail_s[colon - v] = 0;
            if (!cli_parse_i64(tail_s, 1, 1 << 20, &abl_tail) || !cli_parse_i64(colon + 1, 1, 1 << 20, &abl_short))
                return cli_usage_error("perplexity", "--ablation wants T:S with positive integers, got '%s'", v);
        } else if (!strcmp(a, "--tolerance")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 10, &tolerance)) return cli_usage_error("perplexity", "--tolerance wants a number in [0, 10], got '%s'", v);
        } else if (!strcmp(a, "--kv-type")) {
            VALUE();
            if (!strcmp(v, "f16")) kv_type = VKV_F16;
            else if (!strcmp(v, "f32")) kv_type = VKV_F32;
            else return cli_usage_error("perplexity", "--kv-type wants f16 or f32, got '%s'", v);
        } else if (!strcmp(a, "--device")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("perplexity", "--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else return cli_usage_error("perplexity", "unknown option '%s'", a);
#undef VALUE
    }
    if (!!text_path == !!eval_path) return cli_usage_error("perplexity", "give exactly one of --text and --eval-json");

    int rc = 1;
    vkv_status st;
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *m = NULL;
    vkv_tokenizer *tok = NULL;
    vkv_ctx *ctx = NULL;
    vkv_json_doc *doc = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    float *logits = NULL;
    double *pos_nll = NULL, *pos_sum = NULL;
    size_t *pos_cnt = NULL;

    if (eval_path && (st = vkv_json_parse_file(eval_path, &doc))) goto fail;
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)) ||
        (st = vkv_model_load(gpu, model_path, &m)) || (st = vkv_tokenizer_load(m->gguf, &tok)))
        goto fail;
    uint32_t nv = m->hp.n_vocab;
    if (!n_ctx) n_ctx = m->hp.n_ctx_train;
    const vkv_json *windows = doc ? vkv_json_get(vkv_json_root(doc), "windows") : NULL;
    if (doc) {
        if (!windows || windows->type != VKV_JSON_ARRAY || !windows->n_items) {
            st = vkv_error(VKV_ERR_FORMAT, "%s has no \"windows\" array", eval_path);
            goto fail;
        }
        for (size_t w = 0; w < windows->n_items; w++) {
            const vkv_json *wids = vkv_json_get(windows->items[w], "ids");
            if (!wids || wids->type != VKV_JSON_ARRAY || wids->n_items < 2) {
                st = vkv_error(VKV_ERR_FORMAT, "%s: window %zu has no \"ids\" array", eval_path, w);
                goto fail;
            }
            if ((int64_t)wids->n_items > n_ctx) n_ctx = (int64_t)wids->n_items;
        }
    }
    vkv_ctx_params cp = {.n_ctx = (uint32_t)n_ctx, .n_batch = 512, .kv_type = kv_type};
    if ((st = vkv_ctx_create(gpu, m, &cp, &ctx))) goto fail;
    logits = malloc(sizeof *logits * (size_t)n_ctx * nv);
    pos_nll = calloc((size_t)n_ctx, sizeof *pos_nll);
    pos_sum = calloc((size_t)n_ctx, sizeof *pos_sum);
    pos_cnt = calloc((size_t)n_ctx, sizeof *pos_cnt);
    if (!logits || !pos_nll || !pos_sum || !pos_cnt) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }

    double total = 0, abl_full = 0, abl_cut = 0;
    size_t total_n = 0, n_windows = 0, abl_n = 0;
    if (doc) {
        const char *rel = vkv_json_get(vkv_json_root(doc), "text") ? vkv_json_get(vkv_json_root(doc), "text")->string : NULL;
        size_t text_len = 0;
        if (text_root && rel) {
            char p[2048];
            snprintf(p, sizeof p, "%s/%s", text_root, rel);
            if (!(text = cli_read_file(p, &text_len))) {
                st = VKV_ERR_IO; /* the reader recorded which file and why */
                goto fail;
            }
        }
        int bad = 0;
        printf("%-7s %8s %12s %12s %10s %10s %9s %s\n", "window", "tokens", "nll vkvector", "nll recipe", "ppl vkv",
               "ppl recipe", "rel diff", text ? "tokens match" : "");
        for (size_t w = 0; w < windows->n_items; w++) {
            const vkv_json *win = windows->items[w], *wids = vkv_json_get(win, "ids"), *want = vkv_json_get(win, "mean_nll");
            free(ids);
            n_ids = wids->n_items;
            if (!(ids = malloc(sizeof *ids * n_ids))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
            for (size_t i = 0; i < n_ids; i++) ids[i] = (int32_t)wids->items[i]->number;
            double sum;
            if ((st = score(ctx, ids, (uint32_t)n_ids, nv, logits, &sum, NULL))) goto fail;
            double nll = sum / (double)(n_ids - 1);
            double ref = want ? want->number : NAN;
            double rel_diff = fabs(exp(nll) - exp(ref)) / exp(ref);
            const char *match = "";
            if (text) {
                const vkv_json *b0 = vkv_json_get(win, "byte_start"), *b1 = vkv_json_get(win, "byte_end");
                size_t s0 = b0 ? (size_t)b0->number : 0, s1 = b1 ? (size_t)b1->number : 0;
                int32_t *t_ids = NULL;
                size_t t_n = 0;
                bool same = false;
                if (s0 <= s1 && s1 <= text_len && !vkv_tokenize(tok, text + s0, s1 - s0, false, false, &t_ids, &t_n))
                    same = t_n + 1 == n_ids && !memcmp(t_ids, ids + 1, t_n * sizeof *ids);
                free(t_ids);
                match = same ? "yes" : "NO";
                if (!same) bad++;
            }
            printf("%-7zu %8zu %12.6f %12.6f %10.4f %10.4f %9.5f %s\n", w, n_ids, nll, ref, exp(nll), exp(ref), rel_diff, match);
            if (!(rel_diff <= tolerance)) bad++;
            total += sum;
            total_n += n_ids - 1;
            n_windows++;
        }
        printf("mean nll %.6f (ppl %.4f) over %zu windows; %s\n", total / total_n, exp(total / total_n), n_windows,
               bad ? "MISMATCH" : "all within tolerance");
        rc = bad ? 1 : 0;
        goto out;
    }

    size_t text_len;
    if (!(text = cli_read_file(text_path, &text_len))) {
        st = VKV_ERR_IO; /* the reader recorded which file and why */
        goto fail;
    }
    if ((size_t)start_byte > text_len) {
        st = vkv_error(VKV_ERR_ARG, "--start-byte %lld is past the end of '%s' (%zu bytes)", (long long)start_byte, text_path, text_len);
        goto fail;
    }
    int32_t *all = NULL;
    size_t n_all = 0;
    if ((st = vkv_tokenize(tok, text + start_byte, text_len - (size_t)start_byte, false, false, &all, &n_all))) goto fail;
    int32_t bos = vkv_tokenizer_bos(tok);
    size_t per = (size_t)n_ctx - (bos >= 0 ? 1 : 0);
    if (!(ids = malloc(sizeof *ids * (size_t)n_ctx))) { free(all); st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
    for (size_t off = 0; off + per <= n_all && (int64_t)n_windows < max_windows; off += per) {
        size_t k = 0;
        if (bos >= 0) ids[k++] = bos;
        memcpy(ids + k, all + off, per * sizeof *ids);
        double sum;
        if ((st = score(ctx, ids, (uint32_t)n_ctx, nv, logits, &sum, pos_nll))) { free(all); goto fail; }
        for (int64_t p = 0; p + 1 < n_ctx; p++) { pos_sum[p] += pos_nll[p]; pos_cnt[p]++; }
        total += sum;
        total_n += (size_t)n_ctx - 1;
        if (abl_tail && abl_tail + abl_short + 1 <= n_ctx) {
            /* The same last abl_tail predictions, first with the whole window
             * before them, then with only abl_short tokens of context. */
            for (int64_t p = n_ctx - 1 - abl_tail; p + 1 < n_ctx; p++) abl_full += pos_nll[p];
            size_t k2 = 0;
            int32_t *short_ids = ids + (n_ctx - abl_tail - abl_short - 1);
            int32_t keep0 = short_ids[0];
            if (bos >= 0) short_ids[k2] = bos; /* [BOS] + S + T: overwrite the token before the S */
            double s2;
            if ((st = score(ctx, short_ids, (uint32_t)(abl_short + abl_tail + 1), nv, logits, &s2, pos_nll))) {
                free(all);
                goto fail;
            }
            short_ids[0] = keep0;
            for (int64_t p = abl_short; p < abl_short + abl_tail; p++) abl_cut += pos_nll[p];
            abl_n += (size_t)abl_tail;
        }
        n_windows++;
    }
    free(all);
    if (!n_windows) {
        st = vkv_error(VKV_ERR_ARG, "the text has %zu tokens, fewer than one %lld-token window", n_all, (long long)n_ctx);
        goto fail;
    }
    printf("%zu windows x %lld tokens: mean nll %.6f, perplexity %.4f\n", n_windows, (long long)n_ctx, total / total_n,
           exp(total / total_n));
    printf("loss by position (mean nll of the next token):\n");
    for (int64_t b = 0; b + 1 < n_ctx; b = b ? b * 2 : 64) {
        int64_t e = b ? b * 2 : 64;
        if (e > n_ctx - 1) e = n_ctx - 1;
        double s = 0;
        size_t c = 0;
        for (int64_t p = b; p < e; p++) { s += pos_sum[p]; c += pos_cnt[p]; }
        if (c) printf("  positions %5lld-%-5lld %.4f\n", (long long)b, (long long)e, s / c);
    }
    if (abl_n)
        printf("context ablation: the last %lld predictions of each window: mean nll %.4f with the full window "
               "before them, %.4f with only %lld tokens of context (%+.4f)\n",
               (long long)abl_tail, abl_full / abl_n, abl_cut / abl_n, (long long)abl_short,
               abl_cut / abl_n - abl_full / abl_n);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("perplexity", st);
out:
    free(text);
    free(ids);
    free(logits);
    free(pos_nll);
    free(pos_sum);
    free(pos_cnt);
    vkv_json_free(doc);
    vkv_ctx_free(ctx);
    vkv_tokenizer_free(tok);
    vkv_model_free(gpu, m);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}
