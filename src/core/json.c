#include "core/json.h"

#include "core/file.h"
#include "core/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

/* ---- the pull reader ---- */

void vkv_json_reader_init(vkv_json_reader *r, const char *text, size_t len)
{
    memset(r, 0, sizeof *r);
    r->start = r->s = text;
    r->end = text + len;
}

void vkv_json_reader_free(vkv_json_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->buf_len = r->buf_cap = 0;
}

static vkv_status oom(void) { return vkv_error(VKV_ERR_OOM, "out of memory parsing JSON"); }

static void line_col(const vkv_json_reader *r, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = r->start; q < at && q < r->end; q++) {
        if (*q == '\n') { ++*line; *col = 1; }
        else if (((unsigned char)*q & 0xc0) != 0x80) ++*col; /* count characters, not UTF-8 bytes */
    }
}

vkv_status vkv_json_syntax(vkv_json_reader *r, const char *expected)
{
    int line, col;
    line_col(r, r->s, &line, &col);
    char where[128];
    if (r->field) snprintf(where, sizeof where, "%s\"%s\": ", r->where, r->field);
    else snprintf(where, sizeof where, "%s", r->where);
    if (r->s >= r->end)
        return vkv_error(VKV_ERR_FORMAT, "%sJSON: the file ends at line %d, column %d where %s was expected "
                         "(is the file truncated?)", where, line, col, expected);
    unsigned char c = (unsigned char)*r->s;
    char found[16];
    if (c >= 0x20 && c < 0x7f) snprintf(found, sizeof found, "'%c'", c);
    else snprintf(found, sizeof found, "byte 0x%02x", c);
    return vkv_error(VKV_ERR_FORMAT, "%sJSON: expected %s at line %d, column %d, found %s", where, expected, line,
                     col, found);
}

vkv_status vkv_json_field_error(vkv_json_reader *r, const char *at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    line_col(r, at, &line, &col);
    return vkv_error(VKV_ERR_FORMAT, "%s%s (line %d, column %d)", r->where, msg, line, col);
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

void vkv_json_ws(vkv_json_reader *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) r->s++;
}

vkv_status vkv_json_read_string(vkv_json_reader *r)
{
    const char *q = r->s + 1;
    while (q < r->end && *q != '"') q += *q == '\\' ? 2 : 1;
    size_t need = (size_t)(q - r->s) + 1; /* decoding never grows the text */
    if (need > r->buf_cap) {
        size_t cap = r->buf_cap ? r->buf_cap : 256;
        while (cap < need) cap *= 2;
        char *nb = realloc(r->buf, cap);
        if (!nb) return oom();
        r->buf = nb;
        r->buf_cap = cap;
    }
    r->s++;
    char *o = r->buf;
    size_t n = 0;
    for (;;) {
        if (r->s >= r->end) return vkv_json_syntax(r, "the end of the string ('\"')");
        unsigned char c = (unsigned char)*r->s;
        if (c == '"') break;
        if (c < 0x20) return vkv_json_syntax(r, "a string character (control characters must be escaped)");
        if (c != '\\') { o[n++] = (char)c; r->s++; continue; }
        if (r->s + 1 >= r->end) { r->s = r->end; return vkv_json_syntax(r, "an escape"); }
        char e = r->s[1];
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
            if (r->end - r->s < 6) { /* cut short by the end of the file? */
                const char *h = r->s + 2;
                while (h < r->end && is_hex(*h)) h++;
                if (h == r->end) { r->s = r->end; return vkv_json_syntax(r, "the rest of a \\u escape"); }
            }
            int cp = r->end - r->s >= 6 ? vkv_hex4(r->s + 2) : -1;
            if (cp < 0) { r->s++; return vkv_json_syntax(r, "a \\u escape with 4 hex digits"); }
            r->s += 4;
            uint32_t u = (uint32_t)cp;
            if (u >= 0xd800 && u < 0xdc00 && r->end - r->s >= 8 && r->s[2] == '\\' && r->s[3] == 'u') {
                int lo = vkv_hex4(r->s + 4);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    u = 0x10000 + ((u - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                    r->s += 6;
                }
            }
            if (u >= 0xd800 && u < 0xe000) u = 0xfffd; /* lone surrogate */
            n += vkv_utf8_encode(u, o + n);
            break;
        }
        default: r->s++; return vkv_json_syntax(r, "an escape (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
        }
        r->s += 2;
    }
    r->s++;
    o[n] = 0;
    r->buf_len = n;
    return VKV_OK;
}

static const double pow10_exact[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Reads a JSON number at r->s. Short decimals (all a dump holds) take the
 * exact fast path: an integer mantissa below 2^53 times or divided by an exact
 * power of ten rounds correctly; anything else goes to strtod. */
vkv_status vkv_json_read_number(vkv_json_reader *r, double *out)
{
    const char *b = r->s, *s = r->s;
    bool neg = false;
    uint64_t m = 0;
    int digits = 0, exp10 = 0;
    bool exact = true;
    if (s < r->end && *s == '-') { neg = true; s++; }
    if (s >= r->end || *s < '0' || *s > '9') { r->s = s; return vkv_json_syntax(r, "a digit"); }
    if (*s == '0') s++;
    else
        while (s < r->end && *s >= '0' && *s <= '9') {
            if (m < (1ull << 53) / 10) m = m * 10 + (uint64_t)(*s - '0');
            else exact = false;
            digits++;
            s++;
        }
    if (s < r->end && *s == '.') {
        s++;
        if (s >= r->end || *s < '0' || *s > '9') { r->s = s; return vkv_json_syntax(r, "a digit after '.'"); }
        while (s < r->end && *s >= '0' && *s <= '9') {
            if (m < (1ull << 53) / 10) { m = m * 10 + (uint64_t)(*s - '0'); exp10--; }
            else exact = false;
            s++;
        }
    }
    if (s < r->end && (*s == 'e' || *s == 'E')) {
        s++;
        int esign = 1, e = 0;
        if (s < r->end && (*s == '+' || *s == '-')) esign = *s++ == '-' ? -1 : 1;
        if (s >= r->end || *s < '0' || *s > '9') { r->s = s; return vkv_json_syntax(r, "a digit in the exponent"); }
        while (s < r->end && *s >= '0' && *s <= '9') {
            if (e < 100000) e = e * 10 + (*s - '0');
            s++;
        }
        exp10 += esign * e;
    }
    r->s = s;
    if (exact && exp10 >= -22 && exp10 <= 22) {
        double v = (double)m;
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
        *out = neg ? -v : v;
        return VKV_OK;
    }
    char tmp[128];
    size_t len = (size_t)(s - b);
    char *t = len < sizeof tmp ? tmp : malloc(len + 1);
    if (!t) return oom();
    memcpy(t, b, len);
    t[len] = 0;
    *out = strtod(t, NULL);
    if (t != tmp) free(t);
    return VKV_OK;
}

bool vkv_json_literal(vkv_json_reader *r, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->s) < n || memcmp(r->s, lit, n)) return false;
    r->s += n;
    return true;
}

/* A literal (true, false, null) cut by the end of the file: a truncation,
 * not a wrong value. */
vkv_status vkv_json_cut_literal(vkv_json_reader *r)
{
    size_t left = (size_t)(r->end - r->s);
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++)
        if (left < strlen(lits[i]) && !memcmp(r->s, lits[i], left)) {
            r->s = r->end;
            return vkv_json_syntax(r, "the rest of a value");
        }
    return VKV_OK;
}

vkv_status vkv_json_object_next(vkv_json_reader *r, bool *first, bool *done)
{
    vkv_json_ws(r);
    if (r->s < r->end && *r->s == '}') {
        r->s++;
        *done = true;
        return VKV_OK;
    }
    if (!*first) {
        if (r->s >= r->end || *r->s != ',') return vkv_json_syntax(r, "',' or '}'");
        r->s++;
        vkv_json_ws(r);
    }
    if (r->s >= r->end || *r->s != '"') return vkv_json_syntax(r, *first ? "a string key or '}'" : "a string key");
    *first = false;
    vkv_status st = vkv_json_read_string(r);
    if (st) return st;
    vkv_json_ws(r);
    if (r->s >= r->end || *r->s != ':') return vkv_json_syntax(r, "':'");
    r->s++;
    vkv_json_ws(r);
    *done = false;
    return VKV_OK;
}

vkv_status vkv_json_array_next(vkv_json_reader *r, bool *first, bool *done)
{
    vkv_json_ws(r);
    if (r->s < r->end && *r->s == ']') {
        r->s++;
        *done = true;
        return VKV_OK;
    }
    if (!*first) {
        if (r->s >= r->end || *r->s != ',') return vkv_json_syntax(r, "',' or ']'");
        r->s++;
        vkv_json_ws(r);
    }
    *first = false;
    *done = false;
    return VKV_OK;
}

vkv_status vkv_json_skip_value(vkv_json_reader *r)
{
    vkv_json_ws(r);
    if (r->s >= r->end) return vkv_json_syntax(r, "a value");
    char c = *r->s;
    vkv_status st;
    if (c == '{' || c == '[') {
        if (++r->depth > MAX_DEPTH) return vkv_json_syntax(r, "less nesting");
        r->s++;
        bool first = true, done = false;
        for (;;) {
            st = c == '{' ? vkv_json_object_next(r, &first, &done) : vkv_json_array_next(r, &first, &done);
            if (st) return st;
            if (done) break;
            if ((st = vkv_json_skip_value(r))) return st;
        }
        r->depth--;
        return VKV_OK;
    }
    if (c == '"') return vkv_json_read_string(r);
    if (c == '-' || (c >= '0' && c <= '9')) {
        double v;
        return vkv_json_read_number(r, &v);
    }
    if (vkv_json_literal(r, "true") || vkv_json_literal(r, "false") || vkv_json_literal(r, "null")) return VKV_OK;
    if ((st = vkv_json_cut_literal(r))) return st;
    return vkv_json_syntax(r, "a value");
}

bool vkv_json_number_ahead(const vkv_json_reader *r)
{
    return r->s < r->end && (*r->s == '-' || (*r->s >= '0' && *r->s <= '9'));
}

/* ---- the tree, built on the pull reader ---- */

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

/* The string the reader just decoded, copied into the arena. */
static char *arena_string(vkv_json_doc *d, const vkv_json_reader *r)
{
    char *s = arena_alloc(d, r->buf_len + 1);
    if (s) memcpy(s, r->buf ? r->buf : "", r->buf_len + 1);
    return s;
}

static vkv_status parse_value(vkv_json_reader *r, vkv_json_doc *d, vkv_json **out);

/* Children are collected in a growing heap array, then copied to the arena. */
static vkv_status parse_container(vkv_json_reader *r, vkv_json_doc *d, vkv_json *v, bool object)
{
    r->s++;
    size_t cap = 0, n = 0;
    vkv_json **items = NULL;
    char **keys = NULL;
    bool first = true, done = false;
    vkv_status st = VKV_OK;
    for (;;) {
        st = object ? vkv_json_object_next(r, &first, &done) : vkv_json_array_next(r, &first, &done);
        if (st || done) break;
        char *key = object ? arena_string(d, r) : NULL;
        if (object && !key) { st = oom(); break; }
        vkv_json *child;
        if ((st = parse_value(r, d, &child))) break;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            vkv_json **ni = realloc(items, cap * sizeof *ni);
            if (!ni) { st = oom(); break; }
            items = ni;
            if (object) {
                char **nk = realloc(keys, cap * sizeof *nk);
                if (!nk) { st = oom(); break; }
                keys = nk;
            }
        }
        items[n] = child;
        if (object) keys[n] = key;
        n++;
    }
    if (!st && n) {
        v->items = arena_alloc(d, n * sizeof *v->items);
        if (object) v->keys = arena_alloc(d, n * sizeof *v->keys);
        if (!v->items || (object && !v->keys)) st = oom();
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

static vkv_status parse_value(vkv_json_reader *r, vkv_json_doc *d, vkv_json **out)
{
    vkv_json_ws(r);
    if (r->s >= r->end) return vkv_json_syntax(r, "a value");
    vkv_json *v = arena_alloc(d, sizeof *v);
    if (!v) return oom();
    memset(v, 0, sizeof *v);
    *out = v;
    char c = *r->s;
    if (c == '{' || c == '[') {
        if (++r->depth > MAX_DEPTH) return vkv_json_syntax(r, "less nesting");
        v->type = c == '{' ? VKV_JSON_OBJECT : VKV_JSON_ARRAY;
        vkv_status st = parse_container(r, d, v, c == '{');
        r->depth--;
        return st;
    }
    if (c == '"') {
        v->type = VKV_JSON_STRING;
        vkv_status st = vkv_json_read_string(r);
        if (st) return st;
        v->string_len = r->buf_len;
        return (v->string = arena_string(d, r)) ? VKV_OK : oom();
    }
    if (vkv_json_number_ahead(r)) {
        v->type = VKV_JSON_NUMBER;
        return vkv_json_read_number(r, &v->number);
    }
    if (vkv_json_literal(r, "true")) { v->type = VKV_JSON_BOOL; v->boolean = true; return VKV_OK; }
    if (vkv_json_literal(r, "false")) { v->type = VKV_JSON_BOOL; return VKV_OK; }
    if (vkv_json_literal(r, "null")) { v->type = VKV_JSON_NULL; return VKV_OK; }
    vkv_status st = vkv_json_cut_literal(r);
    return st ? st : vkv_json_syntax(r, "a value");
}

vkv_status vkv_json_parse(const char *text, size_t len, vkv_json_doc **out)
{
    *out = NULL;
    vkv_json_doc *d = calloc(1, sizeof *d);
    if (!d) return oom();
    vkv_json_reader r;
    vkv_json_reader_init(&r, text, len);
    vkv_status st = parse_value(&r, d, &d->root);
    if (!st) {
        vkv_json_ws(&r);
        if (r.s < r.end) st = vkv_json_syntax(&r, "nothing after the value");
    }
    vkv_json_reader_free(&r);
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

const char *vkv_json_type_name(vkv_json_type t)
{
    static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

const char *vkv_json_as_uint(const vkv_json *v, uint64_t *out)
{
    if (v->type != VKV_JSON_NUMBER) return vkv_json_type_name(v->type);
    if (v->number < 0) return "negative";
    /* compared before the cast, which would be undefined past 2^64 */
    if (!(v->number < 9007199254740992.0) || v->number != (double)(uint64_t)v->number) return "not an integer";
    *out = (uint64_t)v->number;
    return NULL;
}
