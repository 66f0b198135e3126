/* vkvector run: generate text from a GGUF model, streaming tokens as they
 * come, then a speed and memory summary. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/load_report.h"
#include "cli/options.h"
#include "viz/tier_dump.h"
#include "core/out_file.h"
#include "infer/sampler.h"
#include "session/session.h"

/* "1,2,3" -> ids; false (with a message) on anything else. */
static bool parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return false;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "vkvector run: --ids wants comma-separated non-negative integers, got '%s'\n", s);
            return false;
        }
        if (*n == cap) {
            int32_t *g = realloc(*ids, (cap *= 2) * sizeof **ids);
            if (!g) return false;
            *ids = g;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!*n) fprintf(stderr, "vkvector run: --ids is empty\n");
    return *n > 0;
}

/* Tokens per tier, bytes per tier against the uncompressed cache, and the
 * approximated tier's quality. */
static void print_compression(FILE *f, const char *press, double compression_ratio, bool vector, bool query_aware,
                              const vkv_vector_report *r, vkv_kv_memory mem, double seconds)
{
    uint64_t ret = 0, apx = 0, ev = 0;
    double r2 = 0, rel = 0;
    size_t n_q = 0;
    for (size_t i = 0; i < (size_t)r->n_layer * r->n_kv_head; i++) {
        ret += r->n_ret[i];
        apx += r->n_apx[i];
        ev += r->n_evict[i];
        if (isfinite(r->r2_apx[i])) {
            r2 += r->r2_apx[i];
            rel += r->rel_err_apx[i];
            n_q++;
        }
    }
    uint64_t slots = ret + apx + ev;
    uint64_t kept = mem.k_retained + mem.v_retained + mem.k_approximated;
    fprintf(f, "\n--- compression: %s, p_c %.3g%s%s%s, %u context tokens, %.3f s\n", press, compression_ratio,
            vector ? ", VECTOR" : "", r->map == VKV_MAP_JOINT ? ", joint maps (one tier per layer and token)" : "",
            query_aware ? ", query-aware" : ", query-agnostic", r->n, seconds);
    if (vector) {
        /* The byte equation: keys K + a, values K - a, K the scorer's own count (docs/ARCHITECTURE.md §2). */
        uint64_t k_sum = 0;
        for (size_t i = 0; i < (size_t)r->n_layer * r->n_kv_head; i++) k_sum += r->n_kept[i];
        fprintf(f, "p_a %.4g, %s maps, %s pool: scorer's count K %llu, a %llu, pool %llu; keys held %llu = K + a, values "
                   "held %llu = K - a\n",
                r->pa, vkv_vector_map_name(r->map), vkv_pool_scope_name(r->pool), (unsigned long long)k_sum, (unsigned long long)(ret + apx - k_sum),
                (unsigned long long)(ret + apx), (unsigned long long)(ret + apx), (unsigned long long)ret);
    }
    fprintf(f, "tokens (all layers x KV heads): retained %llu (%.1f%%), approximated %llu (%.1f%%), evicted %llu (%.1f%%)\n",
            (unsigned long long)ret, 100.0 * ret / slots, (unsigned long long)apx, 100.0 * apx / slots,
            (unsigned long long)ev, 100.0 * ev / slots);
    if (vector) {
        /* run keeps each scorer's measured pool scope; --vector-pool global reaches this (docs/ARCHITECTURE.md §2) */
        const vkv_tier_fractions paper = vkv_kv_paper_split(compression_ratio, r->pa, true);
        fprintf(f, "the paper's split: retained %.1f%%, approximated %.1f%%, evicted %.1f%%\n", 100 * paper.retained,
                100 * paper.approximated, 100 * paper.evicted);
    }
    fprintf(f, "bytes: retained K+V %.2f MiB, approximated K %.2f MiB, total %.2f MiB = %.1f%% of the uncompressed "
               "%.2f MiB; OLS maps %.2f MiB; room for new tokens %.2f MiB\n",
            (mem.k_retained + mem.v_retained) / 1048576.0, mem.k_approximated / 1048576.0, kept / 1048576.0,
            100.0 * kept / (double)mem.uncompressed_context, mem.uncompressed_context / 1048576.0, mem.w_bytes / 1048576.0,
            mem.appended_capacity / 1048576.0);
    if (n_q) fprintf(f, "approximated tier: mean R^2 %.4f, mean relative error %.4f (over %zu layer x head)\n", r2 / n_q,
                     rel / n_q, n_q);
}

typedef struct run_opts {
    cli_model_opts mo;
    vkv_sampler_params sp;
    cli_press_opts po;
    const char *prompt, *ids_arg, *dump_path, *question, *tier_dump;
    int64_t n_predict;
    bool chat, print_ids;
    int think; /* --think: 1 on (Hugging Face's default for Qwen3), 0 off */
    const vkv_press_ops *press;
} run_opts;

/* Returns -1 when the options are good, else the exit status (0 after --help). */
static int parse_run_options(int argc, char **argv, run_opts *o)
{
    *o = (run_opts){.sp = vkv_sampler_defaults(), .n_predict = 128, .think = 1};
    cli_model_opts_init(&o->mo);
    cli_press_opts_init(&o->po);
    const cli_opt opts[] = {
        CLI_MODEL_OPTIONS(o->mo),
        {.type = CLI_STR, .names = "-p|--prompt", .metavar = "TEXT", .dest = &o->prompt,
         .help = "prompt text (tokenized with the model's vocabulary, BOS per its rules)"},
        {.type = CLI_STR, .names = "--ids", .metavar = "LIST", .dest = &o->ids_arg,
         .help = "prompt as comma-separated token ids, fed as they are"},
        {.type = CLI_I64, .names = "-n|--n-predict", .metavar = "N", .dest = &o->n_predict, .min = 0, .max = 1 << 24,
         .help = "tokens to generate (default 128; 0 = only evaluate the prompt)"},
        {.type = CLI_FLAG, .names = "--chat", .dest = &o->chat,
         .help = "wrap the prompt in the model's chat template (Llama-3, ChatML, Qwen)"},
        CLI_THINK_OPTION(o->think, "on, as Hugging Face renders Qwen3"),
        CLI_SAMPLING_OPTIONS(o->sp),
        {.type = CLI_STR, .names = "--dump-logits", .metavar = "FILE", .dest = &o->dump_path,
         .help = "write the logits of every prompt position, raw little-endian f32,\npositions x vocabulary"},
        {.type = CLI_FLAG, .names = "--print-ids", .dest = &o->print_ids, .help = "print generated token ids instead of text"},
        {.type = CLI_SECTION,
         .names = "KV-cache compression (kvpress semantics; the context is compressed once, after its prefill):"},
        CLI_PRESS_OPTIONS(o->po),
        {.type = CLI_STR, .names = "--question", .metavar = "TEXT", .dest = &o->question,
         .help = "text after the context (query-agnostic: appended after compression; query-aware:\n"
                 "compressed with it, the chat template's closing after compression)"},
        {.type = CLI_STR, .names = "--tier-dump", .metavar = "FILE", .dest = &o->tier_dump,
         .help = "write every position's tier, score and residual as JSON (for vkvector viz)"},
    };
    int rc = cli_parse("run", "vkvector run [-m MODEL.gguf|DIR] [-p PROMPT | --ids 1,2,3] [options]", opts, CLI_N(opts),
                       argc, argv);
    return rc == CLI_OK ? -1 : rc == CLI_HELP ? 0 : 2;
}

/* The rules between options; -1 when they hold, else 2 (printed). */
static int check_run_options(run_opts *o)
{
    if (o->prompt && o->ids_arg) return cli_usage_error("run", "give either -p or --ids, not both");
    if (o->tier_dump && !o->po.press) return cli_usage_error("run", "--tier-dump needs --press NAME");
    if (!cli_press_opts_check("run", &o->po, &o->press)) return 2;
    if (o->tier_dump && o->po.compress_every && !(o->po.compression_ratio > 0))
        return cli_usage_error("run", "--tier-dump writes the tiers the compression after the prefill leaves, and "
                                      "--compress-every without --compression P (P > 0) compresses only during "
                                      "generation: give --compression P, or drop --tier-dump");
    if (o->question && o->ids_arg) return cli_usage_error("run", "--question needs a text prompt (-p), not --ids");
    if (o->chat && o->ids_arg) return cli_usage_error("run", "--chat needs a text prompt (-p), not --ids");
    if (!o->prompt && !o->ids_arg) o->prompt = "";
    return -1;
}

/* The prompt's ids: --ids as given, or the text (and question) tokenized.
 * Returns -1, or the exit status after a message. */
static int make_prompt(const vkv_session *s, const run_opts *o, vkv_prompt *pr, vkv_status *st)
{
    const vkv_hparams *hp = &s->model->hp;
    if (o->ids_arg) {
        if (!parse_ids(o->ids_arg, &pr->ids, &pr->n)) return 2;
        pr->n_context = pr->n;
        for (size_t i = 0; i < pr->n; i++)
            if ((uint32_t)pr->ids[i] >= hp->n_vocab) {
                fprintf(stderr, "vkvector run: token id %d is outside the vocabulary (0..%u)\n", pr->ids[i], hp->n_vocab - 1);
                return 2;
            }
        return -1;
    }
    size_t lp = strlen(o->prompt), lq = o->question ? strlen(o->question) : 0;
    char *text = malloc(lp + lq + 1);
    if (!text) {
        *st = vkv_error(VKV_ERR_OOM, "out of host memory");
        return 1;
    }
    memcpy(text, o->prompt, lp);
    memcpy(text + lp, o->question ? o->question : "", lq + 1);
    *st = vkv_session_tokenize(s, text, lp + lq, lp, o->chat, VKV_SPLIT_APART, pr);
    free(text);
    if (*st) return 1;
    if (!pr->n) {
        fprintf(stderr, "vkvector run: the prompt is empty and the vocabulary adds no BOS token; give -p or --ids\n");
        return 2;
    }
    if (o->question && !pr->n_context) {
        fprintf(stderr, "vkvector run: the context before --question is empty; give it with -p\n");
        return 2;
    }
    return -1;
}

static vkv_compression run_compression(const run_opts *o)
{
    vkv_compression c;
    cli_press_compression(&o->po, o->press, !o->chat, &c);
    c.keep_details = o->tier_dump != NULL;
    return c;
}

/* The context: --ctx, else the model's (at most 4096) grown to hold the
 * prompt, the tokens to generate and what compression needs. Returns -1, or
 * the exit status (a message printed, or *st set). */
static int reserve_context(vkv_session *s, const run_opts *o, const vkv_prompt *pr, vkv_status *st)
{
    const vkv_hparams *hp = &s->model->hp;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)o->mo.n_ctx, .n_batch = (uint32_t)o->mo.n_batch,
                         .k_type = cli_k_dtype(&o->mo), .v_type = cli_v_dtype(&o->mo), .compress = o->press != NULL};
    uint32_t room = 0;
    vkv_compression c = run_compression(o);
    if ((*st = vkv_session_press_room(s, &c, (uint32_t)vkv_prompt_compressed_part(pr, o->po.query_aware), &room))) return 1;
    if (!cp.n_ctx && o->po.compress_every) {
        /* a budgeted cache: positions for the whole prompt and generation */
        cp.n_ctx = (uint32_t)(pr->n + o->n_predict + room);
    } else if (!cp.n_ctx) {
        cp.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        if (cp.n_ctx < pr->n + o->n_predict && hp->n_ctx_train >= pr->n + o->n_predict) cp.n_ctx = (uint32_t)(pr->n + o->n_predict);
        if (cp.n_ctx < pr->n + room) cp.n_ctx = (uint32_t)(pr->n + room);
    }
    if (pr->n > cp.n_ctx) {
        fprintf(stderr, "vkvector run: the prompt is %zu tokens, longer than the %u-token context (--ctx)\n", pr->n, cp.n_ctx);
        return 2;
    }
    char why[400];
    if (vkv_compression_check_first(s, &c, vkv_prompt_compressed_part(pr, o->po.query_aware), "--max-kv-tokens",
                                    "--compression", why, sizeof why)) {
        fprintf(stderr, "vkvector run: %s\n", why);
        return 2;
    }
    cp.n_kv_slots = vkv_compression_kv_slots(&c, vkv_prompt_compressed_part(pr, o->po.query_aware), room);
    return (*st = vkv_session_reserve(s, &cp)) ? 1 : -1;
}

/* Prefill (and compression): logits of the last prompt token into logits,
 * every position's into --dump-logits. */
static vkv_status prefill(vkv_session *s, const run_opts *o, const vkv_prompt *pr, float *logits, double *seconds)
{
    size_t nv = s->model->hp.n_vocab;
    vkv_compression c = run_compression(o);
    vkv_prefill pf;
    vkv_status st = vkv_session_prefill(s, &c, pr, o->dump_path ? VKV_LOGITS_ALL : VKV_LOGITS_LAST, logits, &pf);
    if (st) return st;
    *seconds = pf.prefill_s + pf.compress_s;
    if (pf.compressed) {
        const cli_press_opts *po = &o->po;
        print_compression(stderr, o->press->name, po->compression_ratio, po->vector, po->query_aware, &pf.report,
                          pf.memory, pf.compress_s);
        if (o->tier_dump) {
            vkv_tier_dump_info di = {o->mo.model_path, o->press->name, s->model, vkv_ctx_tier_k_type(s->seq->ctx),
                                     vkv_ctx_tier_v_type(s->seq->ctx), po->compression_ratio, po->vector, po->query_aware,
                                     pr->ids, s->tok, vkv_ctx_kv_memory(s->seq->ctx)};
            st = vkv_tier_dump_write(o->tier_dump, &di, &pf.report);
        }
    }
    vkv_prefill_free(&pf);
    if (st || !o->dump_path) return st;
    if ((st = vkv_out_write_file(o->dump_path, logits, sizeof *logits * pr->n * nv))) return st;
    memmove(logits, logits + (pr->n - 1) * nv, sizeof *logits * nv);
    return VKV_OK;
}

/* Samples and streams up to -n tokens. */
static vkv_status generate(vkv_session *s, const run_opts *o, const vkv_prompt *pr, float *logits, int64_t *n_gen,
                           const char **stop)
{
    vkv_sampler *smp = NULL;
    vkv_detok detok = {0};
    vkv_status st = vkv_sampler_create(&o->sp, (int32_t)s->model->hp.n_vocab, &smp);
    if (st) return st;
    for (size_t i = 0; i < pr->n; i++) vkv_sampler_accept(smp, pr->ids[i]);
    if (s->tok) vkv_detok_init(&detok, s->tok, false);
    if (!o->print_ids && o->prompt && !o->chat) { fputs(o->prompt, stdout); fflush(stdout); }
    *n_gen = 0;
    while (*n_gen < o->n_predict) {
        int32_t id = vkv_sampler_sample(smp, logits);
        vkv_sampler_accept(smp, id);
        ++*n_gen;
        if (o->print_ids) printf("%s%d", *n_gen > 1 ? " " : "", id);
        else if (!vkv_tokenizer_is_eog(s->tok, id)) {
            const char *piece;
            size_t len;
            if ((st = vkv_detok_push(&detok, id, &piece, &len))) break;
            fwrite(piece, 1, len, stdout);
        }
        /* standard output failed (a full disk, a closed pipe): generating on
         * is pointless; src/cli/main.c reports it at exit */
        if (!vkv_stdout_ok()) { *stop = "standard output failed"; break; }
        if (s->tok && vkv_tokenizer_is_eog(s->tok, id)) { *stop = "end of generation token"; break; }
        if (*n_gen == o->n_predict) break;
        if (vkv_session_full(s)) { *stop = "context full"; break; }
        if ((st = vkv_session_step(s, id, logits))) break;
    }
    if (!st && s->tok && !o->print_ids) {
        const char *rest;
        size_t len;
        vkv_detok_flush(&detok, &rest, &len);
        fwrite(rest, 1, len, stdout);
    }
    printf("\n");
    fflush(stdout);
    if (s->tok) vkv_detok_free(&detok);
    vkv_sampler_free(smp);
    return st;
}

static void print_summary(const vkv_session *s, const run_opts *o, size_t n_prompt, double t_prompt, int64_t n_gen,
                          double t_gen, const char *stop)
{
    const vkv_hparams *hp = &s->model->hp;
    /* the plain cache's rows: the types asked for, or the f16 working cache of quantized tiers */
    vkv_dtype k_type = vkv_ctx_k_type(s->seq->ctx), v_type = vkv_ctx_v_type(s->seq->ctx);
    vkv_dtype tier_k = vkv_ctx_tier_k_type(s->seq->ctx), tier_v = vkv_ctx_tier_v_type(s->seq->ctx);
    vkv_ctx_params cp = {.n_ctx = vkv_ctx_n_ctx(s->seq->ctx), .n_batch = (uint32_t)o->mo.n_batch, .k_type = tier_k,
                         .v_type = tier_v, .compress = o->press != NULL, .n_kv_slots = vkv_ctx_kv_slots(s->seq->ctx)};
    vkv_ctx_memory plan = vkv_ctx_plan_memory(hp, &cp);
    vkv_mem_stats ms = vkv_gpu_mem_stats(s->gpu);
    uint64_t wb = s->model->weight_bytes;
    fprintf(stderr, "\n--- %s on %s\n", o->mo.model_path, vkv_gpu_caps(s->gpu)->name);
    cli_print_load_report(stderr, s->load_seconds, wb, s->gpu);
    fprintf(stderr, "prompt:     %zu tokens in %.3f s = %.1f tokens/s (prefill; pipeline building not included)\n",
            n_prompt, t_prompt, n_prompt / t_prompt);
    /* The first generated token comes from the prompt's logits. */
    if (n_gen > 1) fprintf(stderr, "generation: %lld tokens in %.3f s = %.1f tokens/s\n", (long long)n_gen, t_gen, (n_gen - 1) / t_gen);
    else fprintf(stderr, "generation: %lld tokens\n", (long long)n_gen);
    if (stop) fprintf(stderr, "stopped:    %s\n", stop);
    if (s->seq->decode && vkv_decode_rule_of(s->seq->decode) == VKV_DECODING_KVPRESS) {
        /* kvpress's rule: what each compression left, against its target */
        vkv_decode_stats ds = vkv_decode_press_stats(s->seq->decode);
        fprintf(stderr, "compression during generation (kvpress's rule, every %lld decoding steps): %u compressions in "
                        "%.3f s, %u checks with no head above the target; after a compression each (layer, KV head) "
                        "held %u to %u tokens and %u to %u K+V rows (target %lld tokens, %lld rows); the most K+V "
                        "rows any held: %llu\n",
                (long long)o->po.compress_every, ds.compressions, ds.seconds, ds.skipped, ds.min_tokens_after,
                ds.max_tokens_after, ds.min_rows_after, ds.max_rows_after, (long long)o->po.target_kv_tokens,
                2 * (long long)o->po.target_kv_tokens, (unsigned long long)ds.max_rows);
    } else if (s->seq->decode) {
        /* The budget check of compression during generation: rows held against 2 M. */
        vkv_decode_stats ds = vkv_decode_press_stats(s->seq->decode);
        /* rows held in the tiers' types (the f16 working cache before the first compression is M slots) */
        uint64_t row_bytes = (vkv_kv_row_bytes(tier_k, hp->head_dim) + vkv_kv_row_bytes(tier_v, hp->head_dim)) / 2;
        fprintf(stderr, "compression during generation: %u compressions in %.3f s; the most K+V rows any (layer, KV head) "
                        "held: %llu of the budget's %llu (%.1f KiB of %.1f KiB per head); after a compression each "
                        "held %u to %u tokens and %u to %u K+V rows (target %lld tokens)\n",
                ds.compressions, ds.seconds, (unsigned long long)ds.max_rows, 2ull * (unsigned long long)o->po.max_kv_tokens,
                ds.max_rows * row_bytes / 1024.0, 2.0 * o->po.max_kv_tokens * row_bytes / 1024.0, ds.min_tokens_after,
                ds.max_tokens_after, ds.min_rows_after, ds.max_rows_after,
                (long long)(o->po.max_kv_tokens - o->po.compress_every));
    }
    if (s->seq->decode && o->press->n_kept) {
        /* a budget per layer (PyramidKV): what each layer kept at the last compression */
        fprintf(stderr, "compression during generation, tokens per (layer, KV head) after the last compression:");
        for (uint32_t l = 0; l < hp->n_layer; l++) {
            uint32_t lo, hi;
            vkv_decode_layer_tokens(s->seq->decode, l, &lo, &hi);
            if (lo == hi) fprintf(stderr, " %u", lo);
            else fprintf(stderr, " %u-%u", lo, hi);
        }
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "KV cache:   %.2f MiB (K %s, V %s: %zu + %zu bytes a row; %u slots x %u layers x %u KV heads x "
                    "%u dims x K,V)\n",
            vkv_ctx_kv_bytes(s->seq->ctx) / 1048576.0, vkv_dtype_get(k_type)->name, vkv_dtype_get(v_type)->name,
            vkv_kv_row_bytes(k_type, hp->head_dim), vkv_kv_row_bytes(v_type, hp->head_dim), vkv_ctx_kv_slots(s->seq->ctx),
            hp->n_layer, hp->n_head_kv, hp->head_dim);
    if (tier_k != k_type || tier_v != v_type)
        fprintf(stderr, "KV tiers:   K %s, V %s: %zu + %zu bytes a row, compacted from the f16 cache above\n",
                vkv_dtype_get(tier_k)->name, vkv_dtype_get(tier_v)->name, vkv_kv_row_bytes(tier_k, hp->head_dim),
                vkv_kv_row_bytes(tier_v, hp->head_dim));
    fprintf(stderr, "device memory: weights %.2f MiB + KV cache %.2f MiB + scratch %.2f MiB = %.2f MiB of the %.2f MiB "
                    "heap; peak in use %.2f MiB, allocated %.2f MiB\n",
            wb / 1048576.0, plan.kv_bytes / 1048576.0, plan.scratch_bytes / 1048576.0,
            (wb + plan.kv_bytes + plan.scratch_bytes) / 1048576.0, ms.device_heap_bytes / 1048576.0,
            ms.device_peak_used / 1048576.0, ms.device_bytes_allocated / 1048576.0);
}

/* The output files can be written: checked before the model is loaded
 * (docs/ARCHITECTURE.md §6). -1 when they can, else 1 (printed). */
static int check_run_outputs(const run_opts *o)
{
    vkv_status st;
    if ((o->dump_path && (st = vkv_out_check("--dump-logits", o->dump_path))) ||
        (o->tier_dump && (st = vkv_out_check("--tier-dump", o->tier_dump))))
        return cli_fail("run", st);
    return -1;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse_run_options(argc, argv, &o);
    if (rc >= 0 || (rc = check_run_options(&o)) >= 0 || (rc = check_run_outputs(&o)) >= 0) return rc;
    /* The tokenizer is needed for text in and text out; --ids with
     * --print-ids works on files without a usable vocabulary. */
    vkv_session_params sp = {.model_path = o.mo.model_path, .device = o.mo.device,
                             .no_tokenizer = o.ids_arg && o.print_ids, .load_calib = o.po.vector,
                             .calib_path = o.po.calib, .chat = o.chat ? "model" : NULL, .thinking = o.think == 1,
                             .cmd = "run"};
    vkv_session *s = NULL;
    vkv_prompt pr = {0};
    float *logits = NULL;
    vkv_status st = vkv_session_open(&sp, &s);
    rc = 1;
    if (st) goto out;
    if (o.press && o.press->repeat_pass && o.po.compression_ratio > 0 && !s->tok) {
        fprintf(stderr, "vkvector run: --press %s needs the model's tokenizer (not --print-ids)\n", o.press->name);
        rc = 2;
        goto out;
    }
    if ((rc = make_prompt(s, &o, &pr, &st)) >= 0 || (rc = reserve_context(s, &o, &pr, &st)) >= 0) goto out;
    rc = 1;
    size_t nv = s->model->hp.n_vocab;
    if (!(logits = malloc(sizeof *logits * nv * (o.dump_path ? pr.n : 1)))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto out;
    }
    double t_prompt;
    if ((st = prefill(s, &o, &pr, logits, &t_prompt))) goto out;
    int64_t n_gen = 0;
    const char *stop = NULL;
    vkv_stopwatch sw = vkv_session_stopwatch(s);
    if ((st = generate(s, &o, &pr, logits, &n_gen, &stop))) goto out;
    double t_gen = vkv_stopwatch_seconds(s, sw);
    print_summary(s, &o, pr.n, t_prompt, n_gen, t_gen, stop);
    rc = 0;
out:
    if (st) rc = cli_fail("run", st);
    free(logits);
    vkv_prompt_free(&pr);
    vkv_session_close(s);
    return rc;
}
