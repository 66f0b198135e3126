#include "eval/lb_jsonl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"

bool jsonl_open(jsonl_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->f = vkv_open_regular(path, NULL);
    return r->f != NULL;
}

bool jsonl_next(jsonl_reader *r, vkv_json_doc **doc, vkv_status *st)
{
    *doc = NULL;
    for (;;) {
        size_t len;
        if ((r->error = vkv_read_line(r->f, VKV_MAX_LINE_BYTES, &r->line, &r->cap, &len))) {
            vkv_error_context(r->error, "%s:%zu", r->path, r->line_no + 1);
            return false;
        }
        if (!len) return false;
        r->line_no++;
        while (len && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r')) len--;
        size_t i = 0;
        while (i < len && (r->line[i] == ' ' || r->line[i] == '\t')) i++;
        if (i == len) continue;
        *st = vkv_json_parse(r->line, len, doc);
        if (!*st && vkv_json_root(*doc)->type != VKV_JSON_OBJECT) {
            vkv_json_free(*doc);
            *doc = NULL;
            *st = vkv_error(VKV_ERR_FORMAT, "not a JSON object");
        }
        return true;
    }
}

void jsonl_close(jsonl_reader *r)
{
    if (r->f) fclose(r->f);
    free(r->line);
    memset(r, 0, sizeof *r);
}

void string_list_free(char **l)
{
    if (!l) return;
    for (char **p = l; *p; p++) free(*p);
    free(l);
}

bool json_string_list(const vkv_json *v, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cnt = (v && v->type == VKV_JSON_ARRAY) ? v->n_items : 0;
    if (v && v->type != VKV_JSON_ARRAY && v->type != VKV_JSON_NULL) return false;
    char **l = calloc(cnt + 1, sizeof *l);
    if (!l) return false;
    for (size_t i = 0; i < cnt; i++) {
        const vkv_json *e = v->items[i];
        char buf[64];
        const char *s;
        if (e->type == VKV_JSON_STRING) s = e->string;
        else if (e->type == VKV_JSON_NUMBER) {
            if (e->number == floor(e->number) && fabs(e->number) < 1e15) snprintf(buf, sizeof buf, "%.0f", e->number);
            else snprintf(buf, sizeof buf, "%.17g", e->number);
            s = buf;
        } else {
            string_list_free(l);
            return false;
        }
        if (!(l[i] = strdup(s))) {
            string_list_free(l);
            return false;
        }
    }
    *out = l;
    *n = cnt;
    return true;
}

const char *json_get_str(const vkv_json *obj, const char *key)
{
    const vkv_json *v = vkv_json_get(obj, key);
    return v && v->type == VKV_JSON_STRING ? v->string : NULL;
}
