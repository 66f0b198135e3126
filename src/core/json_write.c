#include "core/json_write.h"

#include "core/utf8.h"

#include <math.h>
#include <string.h>

void vkv_json_init(vkv_json_writer *w, FILE *f, bool pretty)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->pretty = pretty;
    w->first[0] = true;
}

static void before_value(vkv_json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (!w->first[w->depth]) fputc(',', w->f);
    if (w->pretty && w->depth > 0) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++) fputs("  ", w->f);
    }
    w->first[w->depth] = false;
}

static void open(vkv_json_writer *w, char c)
{
    before_value(w);
    fputc(c, w->f);
    if (w->depth + 1 < VKV_JSON_MAX_DEPTH) w->depth++;
    w->first[w->depth] = true;
}

static void close_(vkv_json_writer *w, char c)
{
    bool empty = w->first[w->depth];
    if (w->depth > 0) w->depth--;
    if (w->pretty && !empty) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++) fputs("  ", w->f);
    }
    fputc(c, w->f);
    if (w->depth == 0 && w->pretty) fputc('\n', w->f);
}

void vkv_json_begin_object(vkv_json_writer *w) { open(w, '{'); }
void vkv_json_end_object(vkv_json_writer *w) { close_(w, '}'); }
void vkv_json_begin_array(vkv_json_writer *w) { open(w, '['); }
void vkv_json_end_array(vkv_json_writer *w) { close_(w, ']'); }

void vkv_json_escape(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            /* JSON text is UTF-8: a byte that is not part of a valid
             * sequence becomes U+FFFD. */
            size_t len = vkv_utf8_valid_len((const unsigned char *)s + i, n - i);
            if (!len) fputs("\\ufffd", f);
            else fwrite(s + i, 1, len, f);
            i += len ? len - 1 : 0;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
    fputc('"', f);
}

void vkv_json_key(vkv_json_writer *w, const char *key)
{
    before_value(w);
    vkv_json_escape(w->f, key, strlen(key));
    fputs(w->pretty ? ": " : ":", w->f);
    w->after_key = true;
}

void vkv_json_strn(vkv_json_writer *w, const char *s, size_t n)
{
    before_value(w);
    vkv_json_escape(w->f, s, n);
}
void vkv_json_str(vkv_json_writer *w, const char *s) { vkv_json_strn(w, s, strlen(s)); }
void vkv_json_int(vkv_json_writer *w, int64_t v) { before_value(w); fprintf(w->f, "%lld", (long long)v); }
void vkv_json_uint(vkv_json_writer *w, uint64_t v) { before_value(w); fprintf(w->f, "%llu", (unsigned long long)v); }
void vkv_json_num(vkv_json_writer *w, double v)
{
    before_value(w);
    if (isfinite(v)) fprintf(w->f, "%.9g", v);
    else fputs("null", w->f);
}
void vkv_json_bool(vkv_json_writer *w, bool v) { before_value(w); fputs(v ? "true" : "false", w->f); }
void vkv_json_null(vkv_json_writer *w) { before_value(w); fputs("null", w->f); }
