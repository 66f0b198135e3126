/* Shared options and setup of the evaluation subcommands. */
#include "cli/eval_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json_write.h"
#include "kv/kv_counts.h"

void eval_opts_init(eval_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model_path = getenv("VKVECTOR_MODEL") ? getenv("VKVECTOR_MODEL") : VKV_DEFAULT_MODEL;
    o->compression = -1;
    o->pa = -1;
    o->kv_type = VKV_F16;
    o->device = cli_device_index_from_env();
    o->chat = "auto";
}

void eval_print_common_usage(FILE *f)
{
    fprintf(f,
            "\nModel, compression and device:\n"
            "  -m, --model FILE      GGUF model (default: %s)\n"
            "  --press NAME          importance scorer (knorm, keydiff, streamingllm, snapkv, pyramidkv, tova, ...);\n"
            "                        without it the full cache is used\n"
            "  --compression P       compression ratio p_c in [0, 1)\n"
            "  --vector              VECTOR: approximated tier (K kept, V rebuilt by the calibrated OLS map)\n"
            "  --pa X                approximation ratio (default min(p_c/2, (1-p_c)/2))\n"
            "  --calib FILE          calibration (default: MODEL.vkcal beside the model)\n"
            "  --query-aware         compress context and question together (default: the context only)\n"
            "  --chat-template T     auto (the model's, when it has one), none, llama3 or chatml (default auto)\n"
            "  --ctx N               context slots (default: the model's training context)\n"
            "  --batch N             prefill chunk in tokens (default 512)\n"
            "  --kv-type f16|f32     KV cache storage (default f16)\n"
            "  --device N            Vulkan device (default: VKVECTOR_DEVICE or the best one)\n",
            VKV_DEFAULT_MODEL);
}

int eval_parse_common(const char *cmd, int argc, char **argv, int *i, eval_opts *o)
{
    const char *a = argv[*i], *v;
    int64_t iv;
#define VALUE() do { if (!(v = cli_flag_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VALUE(); o->model_path = v; }
    else if (!strcmp(a, "--press")) { VALUE(); o->press_name = v; }
    else if (!strcmp(a, "--compression")) {
        VALUE();
        if (!cli_parse_f64(v, 0, 1, &o->compression) || o->compression >= 1) {
            cli_usage_error(cmd, "--compression wants a ratio in [0, 1), got '%s'", v);
            return -1;
        }
    } else if (!strcmp(a, "--pa")) {
        VALUE();
        if (!cli_parse_f64(v, 0, 1, &o->pa)) {
            cli_usage_error(cmd, "--pa wants a ratio in [0, 1], got '%s'", v);
            return -1;
        }
    } else if (!strcmp(a, "--vector")) o->vector = true;
    else if (!strcmp(a, "--calib")) { VALUE(); o->calib_path = v; }
    else if (!strcmp(a, "--query-aware")) o->query_aware = true;
    else if (!strcmp(a, "--chat-template")) {
        VALUE();
        if (strcmp(v, "auto") && strcmp(v, "none") && strcmp(v, "llama3") && strcmp(v, "chatml")) {
            cli_usage_error(cmd, "--chat-template wants auto, none, llama3 or chatml, got '%s'", v);
            return -1;
        }
        o->chat = v;
    } else if (!strcmp(a, "--ctx")) {
        VALUE();
        if (!cli_parse_i64(v, 16, 1 << 24, &o->n_ctx)) {
            cli_usage_error(cmd, "--ctx wants an integer >= 16, got '%s'", v);
            return -1;
        }
    } else if (!strcmp(a, "--batch")) {
        VALUE();
        if (!cli_parse_i64(v, 1, 65536, &o->n_batch)) {
            cli_usage_error(cmd, "--batch wants 1..65536, got '%s'", v);
            return -1;
        }
    } else if (!strcmp(a, "--kv-type")) {
        VALUE();
        if (!strcmp(v, "f16")) o->kv_type = VKV_F16;
        else if (!strcmp(v, "f32")) o->kv_type = VKV_F32;
        else {
            cli_usage_error(cmd, "--kv-type wants f16 or f32, got '%s'", v);
            return -1;
        }
    } else if (!strcmp(a, "--device")) {
        VALUE();
        if (!cli_parse_i64(v, 0, 1024, &iv)) {
            cli_usage_error(cmd, "--device wants a device index, got '%s'", v);
            return -1;
        }
        o->device = (int)iv;
    } else return 0;
#undef VALUE
    return 1;
}

bool eval_opts_check(const char *cmd, const eval_opts *o)
{
    if (o->press_name && !vkv_press_find(o->press_name)) {
        cli_usage_error(cmd, "%s", vkv_last_error());
        return false;
    }
    if (o->press_name && o->compression < 0) {
        cli_usage_error(cmd, "--press needs --compression P");
        return false;
    }
    if (!o->press_name && (o->compression >= 0 || o->vector || o->pa >= 0 || o->calib_path || o->query_aware)) {
        cli_usage_error(cmd, "--compression, --vector, --pa, --calib and --query-aware need --press NAME");
        return false;
    }
    if ((o->pa >= 0 || o->calib_path) && !o->vector) {
        cli_usage_error(cmd, "--pa and --calib need --vector");
        return false;
    }
    char why[160];
    if (vkv_kv_check_ratios(o->compression < 0 ? 0 : o->compression, o->pa, o->vector, why, sizeof why)) {
        cli_usage_error(cmd, "%s", why);
        return false;
    }
    return true;
}

double eval_effective_pa(const eval_opts *o)
{
    if (!o->vector) return NAN;
    return o->pa >= 0 ? o->pa : vkv_kv_default_pa(o->compression);
}

vkv_status eval_env_open(const char *cmd, const eval_opts *o, uint32_t want_ctx, eval_env *e)
{
    memset(e, 0, sizeof *e);
    e->chat = VKV_CHAT_UNKNOWN;
    vkv_status st;
    const char *base = strrchr(o->model_path, '/');
    snprintf(e->model_name, sizeof e->model_name, "%s", base ? base + 1 : o->model_path);
    char *dot = strrchr(e->model_name, '.');
    if (dot && !strcmp(dot, ".gguf")) *dot = 0;
    if (o->press_name && !(e->press = vkv_press_find(o->press_name)))
        return vkv_error(VKV_ERR_ARG, "%s", vkv_last_error());
    if ((st = vkv_instance_create(vkv_validation_requested(), false, &e->inst)) ||
        (st = vkv_gpu_create(e->inst, o->device, &e->gpu)) || (st = vkv_model_load(e->gpu, o->model_path, &e->model)) ||
        (st = vkv_tokenizer_load(e->model->gguf, &e->tok)))
        return st;
    if (!strcmp(o->chat, "auto")) {
        if (vkv_tokenizer_chat_template_source(e->tok)) {
            if (vkv_tokenizer_chat_template(e->tok, &e->chat))
                fprintf(stderr, "vkvector %s: the model's chat template is not one vkvector knows (llama3, chatml); "
                                "prompts go without a template (--chat-template NAME chooses one)\n", cmd);
        }
    } else if (strcmp(o->chat, "none")) e->chat = vkv_chat_template_detect(o->chat);
    if (o->vector) {
        char def[1100];
        const char *path = o->calib_path;
        if (!path) {
            cli_default_calib_path(o->model_path, def, sizeof def);
            path = def;
        }
        if ((st = vkv_calib_load(path, e->model, &e->calib))) return st;
    }
    if (e->press && e->press->repeat_pass) {
        if ((st = vkv_kvzip_prompt_make(e->tok, e->chat != VKV_CHAT_UNKNOWN, &e->kvzip))) return st;
        if ((st = vkv_kvzip_prompt_make(e->tok, false, &e->kvzip_plain))) {
            vkv_kvzip_prompt_free(&e->kvzip);
            return st;
        }
        e->have_kvzip = true;
    }
    const vkv_hparams *hp = &e->model->hp;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(o->n_ctx ? o->n_ctx : hp->n_ctx_train),
                         .n_batch = (uint32_t)(o->n_batch ? o->n_batch : 512), .kv_type = o->kv_type};
    if (!cp.n_ctx) cp.n_ctx = 4096;
    if (!o->n_ctx && want_ctx && want_ctx < cp.n_ctx) cp.n_ctx = want_ctx;
    e->n_ctx = cp.n_ctx;
    return vkv_ctx_create(e->gpu, e->model, &cp, &e->ctx);
}

void eval_env_close(eval_env *e)
{
    vkv_ctx_free(e->ctx);
    if (e->have_kvzip) {
        vkv_kvzip_prompt_free(&e->kvzip);
        vkv_kvzip_prompt_free(&e->kvzip_plain);
    }
    vkv_calib_free(e->calib);
    vkv_tokenizer_free(e->tok);
    if (e->gpu) vkv_model_free(e->gpu, e->model);
    vkv_gpu_destroy(e->gpu);
    vkv_instance_destroy(e->inst);
    memset(e, 0, sizeof *e);
}

vkv_gen_params eval_gen_params(const eval_opts *o, const eval_env *e, bool chat)
{
    vkv_gen_params p = {0};
    p.press = e->press;
    p.compression = o->compression < 0 ? 0 : o->compression;
    p.vector = o->vector;
    p.pa = o->pa;
    p.w = e->calib ? e->calib->w : NULL;
    p.query_aware = o->query_aware;
    p.kvzip = !e->have_kvzip ? NULL : chat && e->chat != VKV_CHAT_UNKNOWN ? &e->kvzip : &e->kvzip_plain;
    p.stop_id = VKV_TOKEN_NULL;
    return p;
}

void eval_write_settings(vkv_json_writer *w, const eval_opts *o, const eval_env *e)
{
    vkv_json_key(w, "model");
    vkv_json_str(w, e->model_name);
    vkv_json_key(w, "press");
    if (o->press_name) vkv_json_str(w, o->press_name);
    else vkv_json_null(w);
    vkv_json_key(w, "compression");
    vkv_json_num(w, o->press_name ? o->compression : 0);
    vkv_json_key(w, "vector");
    vkv_json_bool(w, o->vector);
    vkv_json_key(w, "pa");
    vkv_json_num(w, eval_effective_pa(o)); /* NaN -> null */
    vkv_json_key(w, "query_aware");
    vkv_json_bool(w, o->query_aware);
}
