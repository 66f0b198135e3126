/* The per-sample result lines of the evaluation harnesses (see eval_results.h). */
#include "cli/eval_results.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/json_write.h"
#include "core/out_file.h"
#include "eval/lb_jsonl.h"

static bool num_eq(const vkv_json *v, double want)
{
    if (isnan(want)) return !v || v->type == VKV_JSON_NULL;
    return v && v->type == VKV_JSON_NUMBER && fabs(v->number - want) <= 1e-6 * (1 + fabs(want));
}

static bool bool_eq(const vkv_json *v, bool want) { return v && v->type == VKV_JSON_BOOL && v->boolean == want; }

bool eval_same_settings(const vkv_json *r, const eval_opts *o, const eval_env *e)
{
    const char *pool = json_get_str(r, "vector_pool"), *map = json_get_str(r, "vector_map");
    if (o->po.press && strcmp(map ? map : "head", vkv_vector_map_name((vkv_vector_map)o->po.vector_map))) return false;
    if (o->po.vector && strcmp(pool ? pool : "row", vkv_pool_scope_name(eval_pool_scope(o, e)))) return false;
    const char *model = json_get_str(r, "model");
    const vkv_json *press = vkv_json_get(r, "press");
    if (!model || strcmp(model, e->s->model_name)) return false;
    if (o->po.press ? !(press && press->type == VKV_JSON_STRING && !strcmp(press->string, o->po.press))
                      : !(press && press->type == VKV_JSON_NULL))
        return false;
    double pa = eval_effective_pa(o);
    if (!isnan(pa)) pa = (float)pa; /* stored from a float */
    const vkv_json *jpa = vkv_json_get(r, "pa");
    bool pa_ok = isnan(pa) ? (!jpa || jpa->type == VKV_JSON_NULL)
                           : (jpa && jpa->type == VKV_JSON_NUMBER && fabs(jpa->number - pa) <= 1e-6);
    return num_eq(vkv_json_get(r, "compression"), o->po.press ? o->po.compression_ratio : 0) &&
           bool_eq(vkv_json_get(r, "vector"), o->po.vector) && pa_ok &&
           bool_eq(vkv_json_get(r, "query_aware"), o->po.query_aware);
}

void eval_describe_settings(const vkv_json *r, const char *default_protocol, char *buf, size_t n)
{
    const char *model = json_get_str(r, "model"), *press = json_get_str(r, "press");
    const vkv_json *c = vkv_json_get(r, "compression"), *v = vkv_json_get(r, "vector"), *q = vkv_json_get(r, "query_aware");
    const char *proto = json_get_str(r, "protocol");
    snprintf(buf, n, "%s protocol, model %s, press %s, p_c %g%s%s", proto ? proto : default_protocol,
             model ? model : "?", press ? press : "none", c && c->type == VKV_JSON_NUMBER ? c->number : 0,
             v && v->boolean ? ", VECTOR" : "", q && q->boolean ? ", query-aware" : "");
}

/* Reads path's lines into row. *needs_newline: the file ends inside a line. */
static int scan(const char *cmd, const char *path, eval_result_row_fn *row, void *ctx, bool *needs_newline)
{
    *needs_newline = false;
    struct stat sb;
    /* nothing to resume from a device (/dev/null) or a pipe */
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    if (sb.st_size > 0) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "vkvector %s: cannot read '%s': %s\n", cmd, path, strerror(errno));
            return 1;
        }
        if (fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n') *needs_newline = true;
        fclose(f);
    }
    jsonl_reader rd;
    if (!jsonl_open(&rd, path)) {
        fprintf(stderr, "vkvector %s: %s\n", cmd, vkv_last_error());
        return 1;
    }
    vkv_json_doc *doc;
    vkv_status st;
    int rc = 0;
    while (!rc && jsonl_next(&rd, &doc, &st)) {
        if (st) {
            fprintf(stderr, "vkvector %s: %s:%zu: malformed result line skipped (%s)\n", cmd, path, rd.line_no,
                    vkv_last_error());
            continue;
        }
        rc = row(ctx, vkv_json_root(doc), rd.line_no);
        vkv_json_free(doc);
    }
    if (!rc && rd.error) {
        fprintf(stderr, "vkvector %s: %s\n", cmd, vkv_last_error());
        rc = 1;
    }
    jsonl_close(&rd);
    return rc;
}

int eval_results_resume(const char *cmd, const char *path, eval_result_row_fn *row, void *ctx, FILE **out)
{
    bool needs_newline;
    *out = NULL;
    int rc = scan(cmd, path, row, ctx, &needs_newline);
    if (rc) return rc;
    if (vkv_append_open(path, out)) {
        fprintf(stderr, "vkvector %s: %s\n", cmd, vkv_last_error());
        return 1;
    }
    if (needs_newline) {
        /* The last line was cut by a crash: end it, so it stays one bad line. */
        fprintf(stderr, "vkvector %s: %s ends inside a line (an interrupted write); it is kept and skipped\n", cmd,
                path);
        if (!eval_append_line(cmd, *out, path, "\n", 1)) return 1;
    }
    return 0;
}

bool eval_append_line(const char *cmd, FILE *out, const char *path, const char *buf, size_t len)
{
    if (!vkv_append(out, path, buf, len)) return true;
    fprintf(stderr, "vkvector %s: %s\n", cmd, vkv_last_error());
    return false;
}

bool eval_parse_shard(const char *s, int64_t *i, int64_t *n)
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

vkv_status eval_kvpress_prompt(const eval_env *e, const eval_opts *o, const vkv_kvpress_parts *parts, uint32_t max_gen,
                               int64_t max_length, eval_prompt *p)
{
    memset(p, 0, sizeof *p);
    char *ctx_text = NULL, *q_text = NULL;
    p->chat = e->s->chat != VKV_CHAT_UNKNOWN;
    vkv_status st = vkv_kvpress_texts(e->s->chat, parts, o->po.query_aware, &ctx_text, &q_text);
    int32_t *ids = NULL;
    size_t n = 0, n_ctx = 0, n_orig = 0;
    if (!st) st = vkv_kvpress_tokenize(e->s->tok, ctx_text, q_text, 0, &ids, &n, &n_ctx, &n_orig);
    /* What the context may keep: the cache minus the question, the answer and KVzip's passes. */
    uint32_t extra = 0;
    vkv_compression c;
    cli_press_compression(&o->po, e->press, !p->chat, &c);
    if (!st) st = vkv_session_press_room(e->s, &c, (uint32_t)n_ctx, &extra);
    int64_t room = (int64_t)e->n_ctx - (int64_t)(n - n_ctx) - max_gen - 1 - extra;
    int64_t max_ctx = max_length && max_length < room ? max_length : room;
    if (!st && max_ctx < 8)
        st = vkv_error(VKV_ERR_ARG, "the %u-token context leaves no room for the context part (question %zu tokens, "
                       "generation %u)", e->n_ctx, n - n_ctx, max_gen);
    if (!st && n_ctx > (size_t)max_ctx) {
        free(ids);
        ids = NULL;
        st = vkv_kvpress_tokenize(e->s->tok, ctx_text, q_text, (size_t)max_ctx, &ids, &n, &n_ctx, &n_orig);
    }
    if (!st) {
        p->tokens = (vkv_prompt){.ids = ids, .n = n, .n_context = n_ctx};
        p->n_orig = n - n_ctx + n_orig;
        p->truncated = n_orig > n_ctx;
        p->max_len = (size_t)max_ctx;
    } else {
        free(ids);
    }
    free(ctx_text);
    free(q_text);
    return st;
}

int eval_generate(const char *cmd, const eval_env *e, const vkv_compression *comp,
                  const vkv_prompt *tokens, const vkv_gen_params *gp, const char *where, vkv_gen_result *g)
{
    memset(g, 0, sizeof *g);
    char why[400];
    if (vkv_compression_check_first(e->s, comp, vkv_prompt_compressed_part(tokens, comp->query_aware),
                                    "--max-kv-tokens", "--compression", why, sizeof why)) {
        /* the options cannot work for this sample: refused before its prefill */
        fprintf(stderr, "vkvector %s: %s: %s\n", cmd, where, why);
        return 2;
    }
    vkv_status st = vkv_session_generate(e->s, comp, tokens, gp, g);
    if (st) {
        fprintf(stderr, "vkvector %s: %s: %s: %s\n", cmd, where, vkv_status_name(st), vkv_last_error());
        return st == VKV_ERR_ARG ? -1 : cli_fail(cmd, st);
    }
    return 0;
}

void eval_write_string_list(vkv_json_writer *w, char **l, size_t n)
{
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n; i++) vkv_json_str(w, l[i]);
    vkv_json_end_array(w);
}

void eval_write_generation(vkv_json_writer *w, const eval_prompt *p, const vkv_gen_result *g)
{
    vkv_json_key(w, "chat_template");
    vkv_json_bool(w, p->chat);
    vkv_json_key(w, "prompt_tokens");
    vkv_json_uint(w, g->n_prompt);
    vkv_json_key(w, "prompt_tokens_untruncated");
    vkv_json_uint(w, p->n_orig);
    vkv_json_key(w, "truncated");
    vkv_json_bool(w, p->truncated);
    vkv_json_key(w, "compressed_tokens");
    vkv_json_uint(w, g->n_compressed);
    vkv_json_key(w, "generated_tokens");
    vkv_json_uint(w, g->n_gen);
    vkv_json_key(w, "stop");
    vkv_json_str(w, g->stop);
    vkv_json_key(w, "prefill_s");
    vkv_json_num(w, g->prefill_s);
    vkv_json_key(w, "compress_s");
    vkv_json_num(w, g->compress_s);
    vkv_json_key(w, "generate_s");
    vkv_json_num(w, g->gen_s);
    vkv_json_key(w, "kv_bytes");
    vkv_json_uint(w, g->kv_bytes);
    vkv_json_key(w, "kv_bytes_full");
    vkv_json_uint(w, g->kv_bytes_full);
    eval_write_achieved(w, g->n_compressed ? &g->achieved : NULL);
}
