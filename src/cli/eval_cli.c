/* Shared options and setup of the evaluation subcommands. */
#include "cli/eval_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json_write.h"
#include "kvlayout/kv_counts.h"
#include "viz/tier_dump.h"

void eval_opts_init(eval_opts *o)
{
    memset(o, 0, sizeof *o);
    cli_model_opts_init(&o->mo);
    cli_press_opts_init(&o->po);
}

/* The --chat-template name of an index into EVAL_CHAT_TEMPLATES. */
static const char *chat_template_arg(int i)
{
    static const char *const names[] = {"auto", "none", "llama3", "chatml", "llama31", "qwen25", "qwen3"};
    return names[i >= 0 && i < (int)(sizeof names / sizeof *names) ? i : 0];
}

bool eval_opts_check(const char *cmd, eval_opts *o)
{
    const vkv_press_ops *press;
    return cli_press_opts_check(cmd, &o->po, &press);
}

double eval_effective_pa(const eval_opts *o)
{
    if (!o->po.vector) return NAN;
    return o->po.pa >= 0 ? o->po.pa : vkv_kv_default_pa(o->po.compression_ratio);
}

vkv_status eval_env_open(const char *cmd, const eval_opts *o, uint32_t want_ctx, eval_env *e)
{
    memset(e, 0, sizeof *e);
    if (o->po.press && !(e->press = vkv_press_find(o->po.press)))
        return vkv_error(VKV_ERR_ARG, "%s", vkv_last_error());
    vkv_session_params sp = {.model_path = o->mo.model_path, .device = o->mo.device, .load_calib = o->po.vector,
                             .calib_path = o->po.calib, .chat = chat_template_arg(o->chat), .thinking = o->think == 1,
                             .cmd = cmd};
    vkv_status st = vkv_session_open(&sp, &e->s);
    if (st) return st;
    const vkv_hparams *hp = &e->s->model->hp;
    vkv_ctx_params cp = {.n_ctx = (uint32_t)(o->mo.n_ctx ? o->mo.n_ctx : hp->n_ctx_train),
                         .n_batch = (uint32_t)(o->mo.n_batch ? o->mo.n_batch : 512), .k_type = cli_k_dtype(&o->mo),
                         .v_type = cli_v_dtype(&o->mo), .compress = e->press != NULL};
    if (!cp.n_ctx) cp.n_ctx = 4096;
    if (!o->mo.n_ctx && want_ctx && want_ctx < cp.n_ctx) cp.n_ctx = want_ctx;
    e->n_ctx = cp.n_ctx;
    return vkv_session_reserve(e->s, &cp);
}

void eval_env_close(eval_env *e)
{
    vkv_session_close(e->s);
    memset(e, 0, sizeof *e);
}

vkv_pool_scope eval_pool_scope(const eval_opts *o, const eval_env *e)
{
    return vkv_press_pool_scope(e->press, (vkv_pool_scope)cli_pool_scope(&o->po, e->press));
}

void eval_write_achieved(vkv_json_writer *w, const vkv_tier_fractions *f)
{
    if (f) {
        vkv_json_tier_fractions(w, "achieved", *f);
        return;
    }
    vkv_json_key(w, "achieved");
    vkv_json_null(w);
}

void eval_write_settings(vkv_json_writer *w, const eval_opts *o, const eval_env *e)
{
    vkv_json_key(w, "model");
    vkv_json_str(w, e->s->model_name);
    vkv_json_key(w, "press");
    if (o->po.press) vkv_json_str(w, o->po.press);
    else vkv_json_null(w);
    vkv_json_key(w, "compression");
    vkv_json_num(w, o->po.press ? o->po.compression_ratio : 0);
    vkv_json_key(w, "vector");
    vkv_json_bool(w, o->po.vector);
    vkv_json_key(w, "pa");
    vkv_json_num(w, eval_effective_pa(o)); /* NaN -> null */
    vkv_json_key(w, "vector_pool");
    if (o->po.vector) vkv_json_str(w, vkv_pool_scope_name(eval_pool_scope(o, e)));
    else vkv_json_null(w);
    vkv_json_key(w, "vector_map");
    if (o->po.press) vkv_json_str(w, vkv_vector_map_name((vkv_vector_map)o->po.vector_map));
    else vkv_json_null(w);
    vkv_json_key(w, "query_aware");
    vkv_json_bool(w, o->po.query_aware);
}
