#include "eval/lb_jsonl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/utf8.h"

/* Reads past the next newline (or to the end of the file). */
static vkv_status skip_line(FILE *f)
{
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {}
    return ferror(f) ? vkv_error(VKV_ERR_IO, "read error: %s", strerror(errno)) : VKV_OK;
}

/* The offset of the first byte of s[0, n) that does not start valid UTF-8, or n. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = vkv_utf8_valid_len(s + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

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
        vkv_status rs = vkv_read_line(r->f, VKV_MAX_LINE_BYTES, &r->line, &r->cap, &len);
        if (rs == VKV_ERR_FORMAT) {
            /* an over-long line: a malformed line like any other, its rest skipped unread */
            char why[160];
            snprintf(why, sizeof why, "%s", vkv_last_error());
            r->line_no++;
            if ((r->error = skip_line(r->f))) {
                vkv_error_context(r->error, "%s:%zu", r->path, r->line_no);
                return false;
            }
            *st = vkv_error(VKV_ERR_FORMAT, "%s", why);
            return true;
        }
        if ((r->error = rs)) {
            vkv_error_context(r->error, "%s:%zu", r->path, r->line_no + 1);
            return false;
        }
        if (!len) return false;
        r->line_no++;
        while (len && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r')) len--;
        size_t i = 0;
        while (i < len && (r->line[i] == ' ' || r->line[i] == '\t')) i++;
        if (i == len) continue;
        size_t bad = utf8_invalid_at((const unsigned char *)r->line, len);
        if (bad < len) {
            *st = vkv_error(VKV_ERR_FORMAT, "invalid UTF-8 at byte %zu of the line", bad + 1);
            return true;
        }
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

/* Every member of an array of strings is a string; NULL, or the reason. */
static const char *strings_only(const vkv_json *v, const char *what, bool null_ok)
{
    if (null_ok && (!v || v->type == VKV_JSON_NULL)) return NULL;
    if (!v || v->type != VKV_JSON_ARRAY) return what;
    for (size_t i = 0; i < v->n_items; i++)
        if (v->items[i]->type != VKV_JSON_STRING) return what;
    return NULL;
}

const char *lb_sample_check(const vkv_json *row)
{
    const vkv_json *v;
    if (!json_get_str(row, "context")) return "no string member \"context\"";
    if ((v = vkv_json_get(row, "input")) && v->type != VKV_JSON_STRING && v->type != VKV_JSON_NULL)
        return "\"input\" is neither a string nor null";
    const char *why = strings_only(vkv_json_get(row, "answers"), "\"answers\" is not an array of strings", false);
    if (!why) why = strings_only(vkv_json_get(row, "all_classes"), "\"all_classes\" is neither null nor an array of strings", true);
    if (why) return why;
    if (!json_get_str(row, "_id")) return "no string member \"_id\"";
    if ((v = vkv_json_get(row, "dataset")) && v->type != VKV_JSON_STRING) return "\"dataset\" is not a string";
    if ((v = vkv_json_get(row, "length")) && v->type != VKV_JSON_NULL &&
        !(v->type == VKV_JSON_NUMBER && v->number >= 0 && v->number == floor(v->number)))
        return "\"length\" is neither a whole number of at least 0 nor null";
    return NULL;
}
