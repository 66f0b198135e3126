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
#include "infer/forward.h"
#include "calib/calib.h"
#include "cli/tier_dump.h"
#include "infer/sampler.h"
#include "press/vector.h"
#include "tok/tokenizer.h"

static void run_usage(void)
{
    printf("usage: vkvector run [-m MODEL.gguf] [-p PROMPT | --ids 1,2,3] [options]\n\n"
           "  -m, --model FILE      GGUF model (default: %s)\n"
           "  -p, --prompt TEXT     prompt text (tokenized with the model's vocabulary, BOS per its rules)\n"
           "  --ids LIST            prompt as comma-separated token ids, fed as they are\n"
           "  -n, --n-predict N     tokens to generate (default 128; 0 = only evaluate the prompt)\n"
           "  --chat                wrap the prompt in the model's chat template (Llama-3, ChatML)\n"
           "  --seed S              sampling seed (default 42)\n"
           "  --temp T              temperature (default 0.8; 0 = greedy)\n"
           "  --top-k K             (default 40; 0 = off)\n"
           "  --top-p P             (default 0.95; 1 = off)\n"
           "  --min-p P             (default 0.05; 0 = off)\n"
           "  --repeat-penalty R    (default 1.0 = off)\n"
           "  --repeat-last-n N     tokens the penalty looks back over (default 64)\n"
           "  --ctx N               context length (default: the model's, at most 4096)\n"
           "  --batch N             prefill chunk in tokens (default 512)\n"
           "  --kv-type f16|f32     KV cache storage (default f16)\n"
           "  --dump-logits FILE    write the logits of every prompt position, raw little-endian f32,\n"
           "                        positions x vocabulary\n"
           "  --print-ids           print generated token ids instead of text\n"
           "  --device N            Vulkan device (default: VKVECTOR_DEVICE or the best one)\n"
           "\nKV-cache compression (kvpress semantics; the context is compressed once, after its prefill):\n"
           "  --press NAME          importance scorer: knorm, keydiff, streamingllm, snapkv, pyramidkv, tova,\n"
           "                        observed, expected, kvzip\n"
           "  --compression P       compression ratio p_c in [0, 1)\n"
           "  --question TEXT       text after the context (query-agnostic: appended after compression)\n"
           "  --query-aware         compress context and question together (the question is in the scored prefill)\n"
           "  --vector              VECTOR: approximate tier (K kept, V rebuilt by the calibrated OLS map)\n"
           "  --calib FILE          calibration (default: MODEL.vkcal beside the model)\n"
           "  --pa X                approximation ratio (default min(p_c/2, (1-p_c)/2); 0 = the eviction baseline)\n"
           "  --materialized        attention rebuilds every approximated value (reference path; default: fused)\n"
           "  --tier-dump FILE      write every position's tier, score and residual as JSON (for vkvector viz)\n",
           VKV_DEFAULT_MODEL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds spent building pipelines so far: taken out of the prompt and
 * generation times, which would otherwise count the driver's compilation. */
static double pipeline_seconds(const vkv_gpu *gpu) { return vkv_gpu_pipeline_stats(gpu).seconds; }

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
static void print_compression(FILE *f, const char *press, double pc, bool vector, bool query_aware,
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
    fprintf(f, "\n--- compression: %s, p_c %.3g%s%s, %u context tokens, %.3f s\n", press, pc,
            vector ? ", VECTOR" : "", query_aware ? ", query-aware" : ", query-agnostic", r->n, seconds);
    if (vector) fprintf(f, "p_a %.4g\n", r->pa);
    fprintf(f, "tokens (all layers x KV heads): retained %llu (%.1f%%), approximated %llu (%.1f%%), evicted %llu (%.1f%%)\n",
            (unsigned long long)ret, 100.0 * ret / slots, (unsigned long long)apx, 100.0 * apx / slots,
            (unsigned long long)ev, 100.0 * ev / slots);
    fprintf(f, "bytes: retained K+V %.2f MiB, approximated K %.2f MiB, total %.2f MiB = %.1f%% of the uncompressed "
               "%.2f MiB; OLS maps %.2f MiB; room for new tokens %.2f MiB\n",
            (mem.k_retained + mem.v_retained) / 1048576.0, mem.k_approximated / 1048576.0, kept / 1048576.0,
            100.0 * kept / (double)mem.uncompressed_context, mem.uncompressed_context / 1048576.0, mem.w_bytes / 1048576.0,
            mem.appended_capacity / 1048576.0);
    if (n_q) fprintf(f, "approximated tier: mean R^2 %.4f, mean relative error %.4f (over %zu layer x head)\n", r2 / n_q,
                     rel / n_q, n_q);
}

int cmd_run(int argc, char **argv)
{
    const char *model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *prompt = NULL, *ids_arg = NULL, *dump_path = NULL;
    int64_t n_predict = 128, n_ctx = 0, n_batch = 512;
    bool chat = false, print_ids = false;
    vkv_dtype kv_type = VKV_F16;
    int device = cli_device_index_from_env();
    vkv_sampler_params sp = vkv_sampler_defaults();
    const char *press_name = NULL, *question = NULL, *calib_path = NULL, *tier_dump = NULL;
    double compression = -1, pa = -1;
    bool vector = false, query_aware = false, materialized = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t iv;
        double dv;
#define VALUE() do { if (!(v = cli_flag_value("run", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { run_usage(); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); model_path = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { VALUE(); prompt = v; }
        else if (!strcmp(a, "--ids")) { VALUE(); ids_arg = v; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1 << 24, &n_predict)) return cli_usage_error("run", "-n wants 0..16777216, got '%s'", v);
        } else if (!strcmp(a, "--chat")) chat = true;
        else if (!strcmp(a, "--print-ids")) print_ids = true;
        else if (!strcmp(a, "--seed")) {
            VALUE();
            if (!cli_parse_i64(v, 0, INT64_MAX, &iv)) return cli_usage_error("run", "--seed wants a non-negative integer, got '%s'", v);
            sp.seed = (uint64_t)iv;
        } else if (!strcmp(a, "--temp")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 100, &dv)) return cli_usage_error("run", "--temp wants a number in [0, 100], got '%s'", v);
            sp.temperature = (float)dv;
        } else if (!strcmp(a, "--top-k")) {
            VALUE();
            if (!cli_parse_i64(v, 0, INT32_MAX, &iv)) return cli_usage_error("run", "--top-k wants an integer >= 0, got '%s'", v);
            sp.top_k = (int32_t)iv;
        } else if (!strcmp(a, "--top-p")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 1, &dv) || dv == 0) return cli_usage_error("run", "--top-p wants a number in (0, 1], got '%s'", v);
            sp.top_p = (float)dv;
        } else if (!strcmp(a, "--min-p")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 1, &dv)) return cli_usage_error("run", "--min-p wants a number in [0, 1], got '%s'", v);
            sp.min_p = (float)dv;
        } else if (!strcmp(a, "--repeat-penalty")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 100, &dv) || dv == 0) return cli_usage_error("run", "--repeat-penalty wants a number in (0, 100], got '%s'", v);
            sp.repeat_penalty = (float)dv;
        } else if (!strcmp(a, "--repeat-last-n")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1 << 20, &iv)) return cli_usage_error("run", "--repeat-last-n wants an integer >= 0, got '%s'", v);
            sp.repeat_last_n = (int32_t)iv;
        } else if (!strcmp(a, "--ctx")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 1 << 24, &n_ctx)) return cli_usage_error("run", "--ctx wants a positive integer, got '%s'", v);
        } else if (!strcmp(a, "--batch")) {
            VALUE();
            if (!cli_parse_i64(v, 1, 65536, &n_batch)) return cli_usage_error("run", "--batch wants 1..65536, got '%s'", v);
        } else if (!strcmp(a, "--kv-type")) {
            VALUE();
            if (!strcmp(v, "f16")) kv_type = VKV_F16;
            else if (!strcmp(v, "f32")) kv_type = VKV_F32;
            else return cli_usage_error("run", "--kv-type wants f16 or f32, got '%s'", v);
        } else if (!strcmp(a, "--dump-logits")) { VALUE(); dump_path = v; }
        else if (!strcmp(a, "--press")) { VALUE(); press_name = v; }
        else if (!strcmp(a, "--compression")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 1, &compression) || compression >= 1)
                return cli_usage_error("run", "--compression wants a ratio in [0, 1), got '%s'", v);
        } else if (!strcmp(a, "--pa")) {
            VALUE();
            if (!cli_parse_f64(v, 0, 1, &pa)) return cli_usage_error("run", "--pa wants a ratio in [0, 1], got '%s'", v);
        } else if (!strcmp(a, "--vector")) vector = true;
        else if (!strcmp(a, "--calib")) { VALUE(); calib_path = v; }
        else if (!strcmp(a, "--question")) { VALUE(); question = v; }
        else if (!strcmp(a, "--query-aware")) query_aware = true;
        else if (!strcmp(a, "--materialized")) materialized = true;
        else if (!strcmp(a, "--tier-dump")) { VALUE(); tier_dump = v; }
        else if (!strcmp(a, "--device")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("run", "--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else return cli_usage_error("run", "unknown option '%s'", a);
#undef VALUE
    }
    if (prompt && ids_arg) return cli_usage_error("run", "give either -p or --ids, not both");
    const vkv_press_ops *press = NULL;
    if (press_name && !(press = vkv_press_find(press_name))) return cli_usage_error("run", "%s", vkv_last_error());
    if (press && compression < 0) return cli_usage_error("run", "--press needs --compression P");
    if (!press && (compression >= 0 || vector || pa >= 0 || calib_path || query_aware || tier_dump || materialized))
        return cli_usage_error("run", "--compression, --vector, --pa, --calib, --query-aware, --materialized and "
                                      "--tier-dump need --press NAME");
    if ((pa >= 0 || calib_path) && !vector) return cli_usage_error("run", "--pa and --calib need --vector");
    char why[160];
    if (vkv_kv_check_ratios(compression < 0 ? 0 : compression, pa, vector, why, sizeof why))
        return cli_usage_error("run", "%s", why);
    if (question && ids_arg) return cli_usage_error("run", "--question needs a text prompt (-p), not --ids");
    if (chat && ids_arg) return cli_usage_error("run", "--chat needs a text prompt (-p), not --ids");
    if (!prompt && !ids_arg) prompt = "";

    int rc = 1;
    vkv_status st;
    vkv_instance *inst = NULL;
    vkv_gpu *gpu = NULL;
    vkv_model *model = NULL;
    vkv_tokenizer *tok = NULL;
    vkv_ctx *ctx = NULL;
    vkv_sampler *smp = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    float *logits = NULL;
    char *chat_text = NULL;
    FILE *dump = NULL;
    vkv_detok detok = {0};
    vkv_calib *calib = NULL;
    vkv_press_session *session = NULL;
    vkv_vector_report report = {0};
    vkv_kvzip_prompt kvzip = {0}; /* KVzip's reconstruction prompt */
    uint32_t press_room = 0;      /* slots the press uses past the compressed tokens */

    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)))
        goto fail;
    double t_load = now_s();
    if ((st = vkv_model_load(gpu, model_path, &model))) goto fail;
    t_load = now_s() - t_load;
    const vkv_hparams *hp = &model->hp;
    if (ids_arg) {
        if (!parse_ids(ids_arg, &ids, &n_ids)) { rc = 2; goto out; }
        for (size_t i = 0; i < n_ids; i++)
            if ((uint32_t)ids[i] >= hp->n_vocab) {
                fprintf(stderr, "vkvector run: token id %d is outside the vocabulary (0..%u)\n", ids[i], hp->n_vocab - 1);
                rc = 2;
                goto out;
            }
    }
    /* The tokenizer is needed for text in and text out; --ids with
     * --print-ids works on files without a usable vocabulary. */
    if (!(ids_arg && print_ids) && (st = vkv_tokenizer_load(model->gguf, &tok))) goto fail;
    size_t n_context_ids = 0; /* the part compressed in query-agnostic mode */
    if (!ids_arg) {
        /* The question follows the context; with a chat template both sit in
         * the user turn, and the split is where the question starts. */
        const char *marker = "\x01VKVECTOR_QUESTION\x01";
        char *joined = NULL;
        const char *text = prompt;
        if (question) {
            size_t jl = strlen(prompt) + strlen(question) + strlen(marker) + 3;
            if (!(joined = malloc(jl))) { st = vkv_error(VKV_ERR_OOM, "out of host memory"); goto fail; }
            snprintf(joined, jl, "%s%s%s", prompt, marker, question);
            text = joined;
        }
        if (chat) {
            vkv_chat_template t;
            vkv_chat_msg msg = {"user", text};
            size_t len;
            st = vkv_tokenizer_chat_template(tok, &t);
            if (!st) st = vkv_chat_apply(t, &msg, 1, true, &chat_text, &len);
            free(joined);
            joined = NULL;
            if (st) goto fail;
            text = chat_text;
        }
        const char *split = question ? strstr(text, marker) : NULL;
        size_t head_len = split ? (size_t)(split - text) : strlen(text);
        int32_t *head_ids = NULL, *tail_ids = NULL;
        size_t n_head = 0, n_tail = 0;
        st = vkv_tokenize(tok, text, head_len, true, chat, &head_ids, &n_head);
        if (!st && split) {
            const char *tail = split + strlen(marker);
            /* The question is separated from the context by a blank line. */
            size_t tl = strlen(tail) + 3;
            char *tail_text = malloc(tl);
            if (!tail_text) st = vkv_error(VKV_ERR_OOM, "out of host memory");
            else {
                snprintf(tail_text, tl, "\n\n%s", tail);
                st = vkv_tokenize(tok, tail_text, strlen(tail_text), false, chat, &tail_ids, &n_tail);
                free(tail_text);
            }
        }
        free(joined);
        if (!st && !(ids = malloc(sizeof *ids * (n_head + n_tail + 1)))) st = vkv_error(VKV_ERR_OOM, "out of host memory");
        if (!st) {
            memcpy(ids, head_ids, sizeof *ids * n_head);
            if (n_tail) memcpy(ids + n_head, tail_ids, sizeof *ids * n_tail);
            n_ids = n_head + n_tail;
            n_context_ids = n_head;
        }
        free(head_ids);
        free(tail_ids);
        if (st) goto fail;
        if (!n_ids) {
            fprintf(stderr, "vkvector run: the prompt is empty and the vocabulary adds no BOS token; give -p or --ids\n");
            rc = 2;
            goto out;
        }
    }
    vkv_ctx_params cp = {.n_ctx = (uint32_t)n_ctx, .n_batch = (uint32_t)n_batch, .kv_type = kv_type};
    if (press && press->repeat_pass && compression > 0) {
        if (!tok) {
            fprintf(stderr, "vkvector run: --press %s needs the model's tokenizer (not --print-ids)\n", press->name);
            rc = 2;
            goto out;
        }
        if ((st = vkv_kvzip_prompt_make(tok, chat, &kvzip))) goto fail;
        press_room = vkv_kvzip_max_pass_tokens(&kvzip, (uint32_t)(query_aware || !n_context_ids ? n_ids : n_context_ids));
    }
    if (!cp.n_ctx) {
        cp.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        if (cp.n_ctx < n_ids + n_predict && hp->n_ctx_train >= n_ids + n_predict) cp.n_ctx = (uint32_t)(n_ids + n_predict);
        if (cp.n_ctx < n_ids + press_room) cp.n_ctx = (uint32_t)(n_ids + press_room);
    }
    if (n_ids > cp.n_ctx) {
        fprintf(stderr, "vkvector run: the prompt is %zu tokens, longer than the %u-token context (--ctx)\n", n_ids, cp.n_ctx);
        rc = 2;
        goto out;
    }
    /* Refuse a context the device cannot hold before allocating any of it. */
    vkv_ctx_memory plan = vkv_ctx_plan_memory(hp, &cp);
    uint64_t heap = vkv_gpu_mem_stats(gpu).device_heap_bytes, need = model->weight_bytes + plan.kv_bytes + plan.scratch_bytes;
    if (need > heap) {
        uint64_t per_token = plan.kv_bytes / plan.n_ctx, room = heap > need - plan.kv_bytes ? heap - (need - plan.kv_bytes) : 0;
        st = vkv_error(VKV_ERR_OOM, "a %u-token context does not fit device '%s': weights %.2f MiB + KV cache %.2f MiB + "
                                    "scratch %.2f MiB = %.2f MiB, over its %.2f MiB memory heap; lower --ctx (about %llu "
                                    "tokens fit)",
                       plan.n_ctx, vkv_gpu_caps(gpu)->name, model->weight_bytes / 1048576.0, plan.kv_bytes / 1048576.0,
                       plan.scratch_bytes / 1048576.0, need / 1048576.0, heap / 1048576.0,
                       (unsigned long long)(per_token ? room / per_token : 0));
        goto fail;
    }
    if ((st = vkv_ctx_create(gpu, model, &cp, &ctx)) || (st = vkv_sampler_create(&sp, (int32_t)hp->n_vocab, &smp))) goto fail;
    if (!(logits = malloc(sizeof *logits * hp->n_vocab * (dump_path ? n_ids : 1)))) {
        st = vkv_error(VKV_ERR_OOM, "out of host memory");
        goto fail;
    }
    if (dump_path && !(dump = fopen(dump_path, "wb"))) {
        fprintf(stderr, "vkvector run: cannot write '%s': %s\n", dump_path, strerror(errno));
        goto out;
    }
    if (tok) vkv_detok_init(&detok, tok, false);
    if (question && !n_context_ids) {
        fprintf(stderr, "vkvector run: the context before --question is empty; give it with -p\n");
        rc = 2;
        goto out;
    }
    if (!n_context_ids) n_context_ids = n_ids;

    double t0 = now_s(), pipe0 = pipeline_seconds(gpu);
    if (press) {
        /* Prefill what is compressed, compress, then the rest of the prompt. */
        uint32_t n_compress = (uint32_t)(query_aware ? n_ids : n_context_ids);
        vkv_vector_params vp = {.press = press, .pp = vkv_press_params_default(compression), .vector = vector,
                                .pa = pa, .keep_details = tier_dump != NULL, .context_ids = ids,
                                .kvzip = press->repeat_pass ? &kvzip : NULL};
        char default_calib[1100];
        if (vector && !calib_path) {
            cli_default_calib_path(model_path, default_calib, sizeof default_calib);
            calib_path = default_calib;
        }
        if (vector && (st = vkv_calib_load(calib_path, model, &calib))) goto fail;
        if (calib) vp.w = calib->w;
        if ((st = vkv_ctx_set_materialized(ctx, materialized)) ||
            (st = vkv_press_session_create(ctx, model, &vp, n_compress, &session)) ||
            (st = vkv_ctx_eval(ctx, ids, n_compress, dump_path != NULL, logits)))
            goto fail;
        double tc0 = now_s(), pipe_c0 = pipeline_seconds(gpu);
        if ((st = vkv_press_session_compress(session, &report))) goto fail;
        double t_compress = now_s() - tc0 - (pipeline_seconds(gpu) - pipe_c0);
        if (n_compress < n_ids &&
            (st = vkv_ctx_eval(ctx, ids + n_compress, (uint32_t)(n_ids - n_compress), dump_path != NULL,
                               dump_path ? logits + (size_t)n_compress * hp->n_vocab : logits)))
            goto fail;
        print_compression(stderr, press->name, compression, vector, query_aware, &report,
                          vkv_ctx_kv_memory(ctx), t_compress);
        if (tier_dump) {
            vkv_tier_dump_info di = {model_path, press->name, model, kv_type, compression, vector, query_aware,
                                     ids, tok, vkv_ctx_kv_memory(ctx)};
            if ((st = vkv_tier_dump_write(tier_dump, &di, &report))) goto fail;
        }
    } else {
        /* Context and question are evaluated as separate chunks, as with a
         * press: the same arithmetic, so p_c = 0 gives identical logits. */
        if ((st = vkv_ctx_eval(ctx, ids, (uint32_t)n_context_ids, dump_path != NULL, logits))) goto fail;
        if (n_context_ids < n_ids &&
            (st = vkv_ctx_eval(ctx, ids + n_context_ids, (uint32_t)(n_ids - n_context_ids), dump_path != NULL,
                               dump_path ? logits + n_context_ids * hp->n_vocab : logits)))
            goto fail;
    }
    double t_prompt = now_s() - t0 - (pipeline_seconds(gpu) - pipe0);
    if (dump) {
        size_t n = (size_t)n_ids * hp->n_vocab;
        if (fwrite(logits, sizeof *logits, n, dump) != n || fclose(dump) != 0) {
            dump = NULL;
            fprintf(stderr, "vkvector run: error writing '%s'\n", dump_path);
            goto out;
        }
        dump = NULL;
    }
    for (size_t i = 0; i < n_ids; i++) vkv_sampler_accept(smp, ids[i]);
    const float *last = logits + (dump_path ? (n_ids - 1) * (size_t)hp->n_vocab : 0);
    if (dump_path) memmove(logits, last, sizeof *logits * hp->n_vocab);

    if (!print_ids && prompt && !chat) { fputs(prompt, stdout); fflush(stdout); }
    int64_t n_gen = 0;
    double t1 = now_s(), pipe1 = pipeline_seconds(gpu);
    const char *stop = NULL;
    while (n_gen < n_predict) {
        int32_t id = vkv_sampler_sample(smp, logits);
        vkv_sampler_accept(smp, id);
        n_gen++;
        if (print_ids) printf("%s%d", n_gen > 1 ? " " : "", id);
        else if (!vkv_tokenizer_is_eog(tok, id)) {
            const char *piece;
            size_t len;
            if ((st = vkv_detok_push(&detok, id, &piece, &len))) goto fail;
            fwrite(piece, 1, len, stdout);
        }
        fflush(stdout);
        if (tok && vkv_tokenizer_is_eog(tok, id)) { stop = "end of generation token"; break; }
        if (n_gen == n_predict) break;
        if (vkv_ctx_n_past(ctx) >= vkv_ctx_n_ctx(ctx)) { stop = "context full"; break; }
        if ((st = vkv_ctx_eval(ctx, &id, 1, false, logits))) goto fail;
    }
    double t_gen = now_s() - t1 - (pipeline_seconds(gpu) - pipe1);
    if (tok && !print_ids) {
        const char *rest;
        size_t len;
        vkv_detok_flush(&detok, &rest, &len);
        fwrite(rest, 1, len, stdout);
    }
    printf("\n");
    fflush(stdout);
    vkv_mem_stats ms = vkv_gpu_mem_stats(gpu);
    fprintf(stderr, "\n--- %s on %s\n", model_path, vkv_gpu_caps(gpu)->name);
    cli_print_load_report(stderr, t_load, model->weight_bytes, gpu);
    fprintf(stderr, "prompt:     %zu tokens in %.3f s = %.1f tokens/s (prefill; pipeline building not included)\n", n_ids,
            t_prompt, n_ids / t_prompt);
    /* The first generated token comes from the prompt's logits. */
    if (n_gen > 1) fprintf(stderr, "generation: %lld tokens in %.3f s = %.1f tokens/s\n", (long long)n_gen, t_gen, (n_gen - 1) / t_gen);
    else fprintf(stderr, "generation: %lld tokens\n", (long long)n_gen);
    if (stop) fprintf(stderr, "stopped:    %s\n", stop);
    fprintf(stderr, "KV cache:   %.2f MiB (%s, %u slots x %u layers x %u KV heads x %u dims x K,V)\n",
            vkv_ctx_kv_bytes(ctx) / 1048576.0, kv_type == VKV_F16 ? "f16" : "f32", vkv_ctx_n_ctx(ctx), hp->n_layer,
            hp->n_head_kv, hp->head_dim);
    fprintf(stderr, "device memory: weights %.2f MiB + KV cache %.2f MiB + scratch %.2f MiB = %.2f MiB of the %.2f MiB "
                    "heap; peak in use %.2f MiB, allocated %.2f MiB\n",
            model->weight_bytes / 1048576.0, plan.kv_bytes / 1048576.0, plan.scratch_bytes / 1048576.0,
            (model->weight_bytes + plan.kv_bytes + plan.scratch_bytes) / 1048576.0, ms.device_heap_bytes / 1048576.0,
            ms.device_peak_used / 1048576.0, ms.device_bytes_allocated / 1048576.0);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("run", st);
out:
    if (dump) fclose(dump);
    if (tok) vkv_detok_free(&detok);
    vkv_press_session_free(session);
    vkv_calib_free(calib);
    vkv_vector_report_free(&report);
    vkv_kvzip_prompt_free(&kvzip);
    free(chat_text);
    free(logits);
    free(ids);
    vkv_sampler_free(smp);
    vkv_ctx_free(ctx);
    vkv_tokenizer_free(tok);
    vkv_model_free(gpu, model);
    vkv_gpu_destroy(gpu);
    vkv_instance_destroy(inst);
    return rc;
}
