#include "core/json.h"

#include "core/file.h"
#include "core/utf8.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

/* Every node, string and child array comes from a chain of arena chunks. */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct vkv_json_doc {
    arena_chunk *chunks;
    vkv_json *root;
};

typedef struct parser {
    const char *s, *end, *start;
    vkv_json_doc *doc;
    int depth;
} parser;

static void *arena_alloc(vkv_json_doc *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = d->chunks;
        nc->used = 0;
        nc->cap = cap;
        d->chunks = nc;
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static vkv_status fail(parser *p, const char *what)
{
    int line = 1, col = 1;
    for (const char *q = p->start; q < p->s && q < p->end; q++) {
        if (*q == '\n') { line++; col = 1; }
        else col++;
    }
    return vkv_error(VKV_ERR_FORMAT, "JSON: %s at line %d, column %d", what, line, col);
}

static void skip_ws(parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static vkv_status parse_string(parser *p, char **out, size_t *out_len)
{
    p->s++; /* opening quote */
    const char *q = p->s;
    while (q < p->end && *q != '"') q += *q == '\\' ? 2 : 1;
    if (q >= p->end) return fail(p, "unterminated string");
    /* Decoded length never exceeds the escaped length. */
    char *o = arena_alloc(p->doc, (size_t)(q - p->s) + 1);
    if (!o) return vkv_error(VKV_ERR_OOM, "out of memory parsing JSON");
    size_t n = 0;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) return fail(p, "control character in string");
        if (c != '\\') { o[n++] = (char)c; p->s++; continue; }
        if (p->s + 1 >= p->end) return fail(p, "bad escape");
        char e = p->s[1];
        p->s += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            if (p->end - p->s < 4) return fail(p, "bad \\u escape");
            int cp = vkv_hex4(p->s);
            if (cp < 0) return fail(p, "bad \\u escape");
            p->s += 4;
            uint32_t u = (uint32_t)cp;
            if (u >= 0xd800 && u < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u') {
                int lo = vkv_hex4(p->s + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    u = 0x10000 + ((u - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                    p->s += 6;
                }
            }
            if (u >= 0xd800 && u < 0xe000) u = 0xfffd; /* lone surrogate */
            n += vkv_utf8_encode(u, o + n);
            break;
        }
        default: return fail(p, "bad escape");
        }
    }
    p->s++; /* closing quote */
    o[n] = 0;
    *out = o;
    *out_len = n;
    return VKV_OK;
}

static vkv_status parse_value(parser *p, vkv_json **out);

/* Children are collected in a growing heap array, then copied to the arena. */
static vkv_status parse_container(parser *p, vkv_json *v, bool object)
{
    char close = object ? '}' : ']';
    p->s++;
    size_t cap = 0, n = 0;
    vkv_json **items = NULL;
    char **keys = NULL;
    vkv_status st = VKV_OK;
    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        goto done;
    }
    for (;;) {
        char *key = NULL;
        size_t klen;
        skip_ws(p);
        if (object) {
            if (p->s >= p->end || *p->s != '"') { st = fail(p, "expected a string key"); goto done; }
            if ((st = parse_string(p, &key, &klen))) goto done;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') { st = fail(p, "expected ':'"); goto done; }
            p->s++;
        }
        vkv_json *child;
        if ((st = parse_value(p, &child))) goto done;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            vkv_json **ni = realloc(items, cap * sizeof *ni);
            if (!ni) { st = vkv_error(VKV_ERR_OOM, "out of memory parsing JSON"); goto done; }
            items = ni;
            if (object) {
                char **nk = realloc(keys, cap * sizeof *nk);
                if (!nk) { st = vkv_error(VKV_ERR_OOM, "out of memory parsing JSON"); goto done; }
                keys = nk;
            }
        }
        items[n] = child;
        if (object) keys[n] = key;
        n++;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') { p->s++; continue; }
        if (p->s < p->end && *p->s == close) { p->s++; break; }
        st = fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto done;
    }
done:
    if (!st && n) {
        v->items = arena_alloc(p->doc, n * sizeof *v->items);
        if (object) v->keys = arena_alloc(p->doc, n * sizeof *v->keys);
        if (!v->items || (object && !v->keys)) st = vkv_error(VKV_ERR_OOM, "out of memory parsing JSON");
        else {
            memcpy(v->items, items, n * sizeof *items);
            if (object) memcpy(v->keys, keys, n * sizeof *keys);
            v->n_items = n;
        }
    }
    free(items);
    free(keys);
    return st;
}

static vkv_status parse_value(parser *p, vkv_json **out)
{
    skip_ws(p);
    if (p->s >= p->end) return fail(p, "unexpected end of input");
    vkv_json *v = arena_alloc(p->doc, sizeof *v);
    if (!v) return vkv_error(VKV_ERR_OOM, "out of memory parsing JSON");
    memset(v, 0, sizeof *v);
    *out = v;
    char c = *p->s;
    if (c == '{' || c == '[') {
        if (++p->depth > MAX_DEPTH) return fail(p, "nesting too deep");
        v->type = c == '{' ? VKV_JSON_OBJECT : VKV_JSON_ARRAY;
        vkv_status st = parse_container(p, v, c == '{');
        p->depth--;
        return st;
    }
    if (c == '"') {
        v->type = VKV_JSON_STRING;
        return parse_string(p, &v->string, &v->string_len);
    }
    if (p->end - p->s >= 4 && !memcmp(p->s, "true", 4)) { v->type = VKV_JSON_BOOL; v->boolean = true; p->s += 4; return VKV_OK; }
    if (p->end - p->s >= 5 && !memcmp(p->s, "false", 5)) { v->type = VKV_JSON_BOOL; p->s += 5; return VKV_OK; }
    if (p->end - p->s >= 4 && !memcmp(p->s, "null", 4)) { v->type = VKV_JSON_NULL; p->s += 4; return VKV_OK; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (p->s + n < p->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[n])) n++;
        memcpy(buf, p->s, n);
        buf[n] = 0;
        char *e;
        errno = 0;
        v->number = strtod(buf, &e);
        if (e != buf + n || n == 0) return fail(p, "bad number");
        v->type = VKV_JSON_NUMBER;
        p->s += n;
        return VKV_OK;
    }
    return fail(p, "unexpected character");
}

vkv_status vkv_json_parse(const char *text, size_t len, vkv_json_doc **out)
{
    *out = NULL;
    vkv_json_doc *d = calloc(1, sizeof *d);
    if (!d) return vkv_error(VKV_ERR_OOM, "out of memory parsing JSON");
    parser p = {text, text + len, text, d, 0};
    vkv_status st = parse_value(&p, &d->root);
    if (!st) {
        skip_ws(&p);
        if (p.s != p.end) st = fail(&p, "trailing characters after the value");
    }
    if (st) {
        vkv_json_free(d);
        return st;
    }
    *out = d;
    return VKV_OK;
}

vkv_status vkv_json_parse_file(const char *path, vkv_json_doc **out)
{
    char *buf;
    size_t n;
    vkv_status st = vkv_read_file(path, VKV_MAX_DOC_BYTES, &buf, &n);
    if (st) return st;
    st = vkv_json_parse(buf, n, out);
    free(buf);
    if (st) vkv_error_context(st, "%s", path);
    return st;
}

void vkv_json_free(vkv_json_doc *d)
{
    if (!d) return;
    for (arena_chunk *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d);
}

const vkv_json *vkv_json_root(const vkv_json_doc *d) { return d->root; }

const vkv_json *vkv_json_get(const vkv_json *o, const char *key)
{
    if (!o || o->type != VKV_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < o->n_items; i++)
        if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

const vkv_json *vkv_json_at(const vkv_json *a, size_t i)
{
    if (!a || a->type != VKV_JSON_ARRAY || i >= a->n_items) return NULL;
    return a->items[i];
}
