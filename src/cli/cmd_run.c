/* vkvector run: generate text from a GGUF model, streaming tokens as they
 * come, then a speed and memory summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "infer/forward.h"
#include "infer/sampler.h"
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
           "  --device N            Vulkan device (default: VKVECTOR_DEVICE or the best one)\n",
           VKV_DEFAULT_MODEL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

int cmd_run(int argc, char **argv)
{
    const char *model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    const char *prompt = NULL, *ids_arg = NULL, *dump_path = NULL;
    int64_t n_predict = 128, n_ctx = 0, n_batch = 512;
    bool chat = false, print_ids = false;
    vkv_dtype kv_type = VKV_F16;
    int device = cli_device_index_from_env();
    vkv_sampler_params sp = vkv_sampler_defaults();
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
        else if (!strcmp(a, "--device")) {
            VALUE();
            if (!cli_parse_i64(v, 0, 1024, &iv)) return cli_usage_error("run", "--device wants a device index, got '%s'", v);
            device = (int)iv;
        } else return cli_usage_error("run", "unknown option '%s'", a);
#undef VALUE
    }
    if (prompt && ids_arg) return cli_usage_error("run", "give either -p or --ids, not both");
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

    if ((st = vkv_instance_create(vkv_validation_requested(), false, &inst)) || (st = vkv_gpu_create(inst, device, &gpu)) ||
        (st = vkv_model_load(gpu, model_path, &model)))
        goto fail;
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
    if (!ids_arg) {
        const char *text = prompt;
        if (chat) {
            vkv_chat_template t;
            vkv_chat_msg msg = {"user", prompt};
            size_t len;
            if ((st = vkv_tokenizer_chat_template(tok, &t)) || (st = vkv_chat_apply(t, &msg, 1, true, &chat_text, &len)))
                goto fail;
            text = chat_text;
        }
        if ((st = vkv_tokenize(tok, text, strlen(text), true, chat, &ids, &n_ids))) goto fail;
        if (!n_ids) {
            fprintf(stderr, "vkvector run: the prompt is empty and the vocabulary adds no BOS token; give -p or --ids\n");
            rc = 2;
            goto out;
        }
    }
    vkv_ctx_params cp = {.n_ctx = (uint32_t)n_ctx, .n_batch = (uint32_t)n_batch, .kv_type = kv_type};
    if (!cp.n_ctx) {
        cp.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
        if (cp.n_ctx < n_ids + n_predict && hp->n_ctx_train >= n_ids + n_predict) cp.n_ctx = (uint32_t)(n_ids + n_predict);
    }
    if (n_ids > cp.n_ctx) {
        fprintf(stderr, "vkvector run: the prompt is %zu tokens, longer than the %u-token context (--ctx)\n", n_ids, cp.n_ctx);
        rc = 2;
        goto out;
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

    double t0 = now_s();
    if ((st = vkv_ctx_eval(ctx, ids, (uint32_t)n_ids, dump_path != NULL, logits))) goto fail;
    double t_prompt = now_s() - t0;
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
    double t1 = now_s();
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
    double t_gen = now_s() - t1;
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
    fprintf(stderr, "prompt:     %zu tokens in %.3f s = %.1f tokens/s\n", n_ids, t_prompt, n_ids / t_prompt);
    /* The first generated token comes from the prompt's logits. */
    if (n_gen > 1) fprintf(stderr, "generation: %lld tokens in %.3f s = %.1f tokens/s\n", (long long)n_gen, t_gen, (n_gen - 1) / t_gen);
    else fprintf(stderr, "generation: %lld tokens\n", (long long)n_gen);
    if (stop) fprintf(stderr, "stopped:    %s\n", stop);
    fprintf(stderr, "KV cache:   %.2f MiB (%s, %u slots x %u layers x %u KV heads x %u dims x K,V)\n",
            vkv_ctx_kv_bytes(ctx) / 1048576.0, kv_type == VKV_F16 ? "f16" : "f32", vkv_ctx_n_ctx(ctx), hp->n_layer,
            hp->n_head_kv, hp->head_dim);
    fprintf(stderr, "device memory: weights %.2f MiB, peak in use %.2f MiB, allocated %.2f MiB\n",
            model->weight_bytes / 1048576.0, ms.device_peak_used / 1048576.0, ms.device_bytes_allocated / 1048576.0);
    rc = 0;
    goto out;
fail:
    rc = cli_fail("run", st);
out:
    if (dump) fclose(dump);
    if (tok) vkv_detok_free(&detok);
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
