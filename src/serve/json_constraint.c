#include "serve/json_constraint.h"

#include "core/strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define INF_NEED 0x7fffffffu
#define MAX_NEST ((uint32_t)VKV_JSON_CONSTRAINT_MAX_NEST)
/* Readings of the output alive at once (anyOf alternatives that agree so
 * far); past it later alternatives are dropped, which only narrows what the
 * model may write. */
#define MAX_BRANCHES 32
/* The largest schema compiled: schemas, properties, enum values, their
 * bytes, and the alternatives one anyOf flattens to. */
#define MAX_NODES 10000
#define MAX_LITERALS 10000
#define MAX_TEXT (1u << 20)
#define MAX_ALTERNATIVES 256

/* ---- the compiled schema ---- */

enum { T_NULL = 1, T_BOOLEAN = 2, T_INTEGER = 4, T_NUMBER = 8, T_STRING = 16, T_ARRAY = 32, T_OBJECT = 64 };
#define T_ALL 127u
#define T_SCALARS (T_NULL | T_BOOLEAN | T_INTEGER | T_NUMBER | T_STRING)

typedef enum node_kind {
    N_TYPES,    /* values of the types `types`, objects and arrays as the fields below say */
    N_LITERALS, /* one of the literals [first, first + n) */
    N_ANYOF,    /* one of the alternatives [first, first + n) of alts, none of them an anyOf */
    N_REF,      /* while compiling only: the node `first` ($ref, $defs entries, the root) */
} node_kind;

typedef struct node {
    node_kind kind;
    unsigned types; /* N_TYPES: T_* */
    /* objects: properties [prop, prop + n_props) of props and keys */
    uint32_t prop, n_props;
    uint32_t req_end; /* every required property comes before it: '}' once past it */
    uint32_t extra;   /* extra keys' values; NONE: additionalProperties false */
    /* arrays */
    uint32_t items, min_items, max_items; /* max_items NONE: unbounded */
    uint32_t first, n;                    /* see node_kind */
    uint32_t bounds;                      /* numbers' bounds: 1 + their index in bounds; 0: none */
    /* The fewest objects and arrays a value of the node nests, its own
     * included (INF_NEED: it has no finite value): a value starting inside d
     * open ones fits when d + need <= MAX_NEST. */
    uint32_t need, need_object, need_array;
} node;

typedef struct span {
    uint32_t off, len; /* bytes of text */
} span;

typedef struct prop {
    uint32_t node;
    bool required;
} prop;

/* Numeric bounds, as two intervals of magnitudes: one for the numbers
 * spelled without '-', one for those with it. A magnitude bound is an exact
 * decimal 0.d1 d2 d3... x 10^q (d1 not 0), and a number is compared with it
 * by its significant digits, position by position, and its decimal
 * exponent: the matcher never holds a number's value, only whether its
 * digits so far are below, above or equal to each bound's, how many there
 * are, and the exponent (see the matcher's "numbers within bounds"). */
#define MAG_DIGITS (VKV_JSON_CONSTRAINT_MAX_NUMBER + 1) /* digits of a bound that a number can meet */
#define NO_GRID 255u
#define Q_INF (1 << 30) /* past any exponent a number of VKV_JSON_CONSTRAINT_MAX_NUMBER bytes spells */
enum { MAG_NONE, MAG_ZERO, MAG_POS }; /* no bound, 0, 0.d1 d2... x 10^q */

typedef struct mag {
    uint8_t kind, strict; /* strict: the bound itself is out */
    int16_t q;
    uint8_t d[MAG_DIGITS + 2];    /* d[i] for i in [1, MAG_DIGITS + 1]; 0 past the last */
    uint8_t rest[MAG_DIGITS + 2]; /* rest[i]: a digit after the i-th is not 0 */
    uint8_t non9[MAG_DIGITS + 2]; /* non9[i]: the first position after i whose digit is not 9 */
} mag;

typedef struct side {
    mag lo, hi;     /* lo <= magnitude <= hi (< where strict); hi MAG_ZERO and strict: no magnitude at all */
    int32_t lq, uq; /* the exponents of lo and hi (none: below and above all; hi MAG_ZERO: uq below all) */
    uint8_t grid;   /* lo and hi both 0.x x 10^q: the fewest significant digits of a magnitude between them
                     * (NO_GRID: none) */
    bool zero;      /* 0 is within the bounds */
} side;

typedef struct num_bounds {
    side s[2]; /* [0]: numbers without '-', [1]: with it */
} num_bounds;

struct vkv_json_constraint {
    node *nodes;
    uint32_t n_nodes;
    prop *props;
    span *keys; /* each property's key as written: "name", quotes included */
    uint32_t n_props;
    span *lits; /* enum and const values as written, each node's sorted by bytes; false, true and null first */
    uint32_t n_lits;
    uint32_t *alts;
    uint32_t n_alts;
    num_bounds *bounds;
    uint32_t n_bounds;
    char *text;
    uint32_t root;
};

enum { LIT_FALSE, LIT_TRUE, LIT_NULL };
enum { NODE_ANY, NODE_ANY_OBJECT }; /* any value; json_object mode's root */

void vkv_json_constraint_free(vkv_json_constraint *c)
{
    if (!c) return;
    free(c->nodes);
    free(c->props);
    free(c->keys);
    free(c->lits);
    free(c->alts);
    free(c->bounds);
    free(c->text);
    free(c);
}

/* ---- UTF-8 in strings ---- */

/* UTF-8 in a string: between characters, or the continuation bytes to come and the next one's range. */
enum { U_NONE, U_TAIL1, U_TAIL2, U_TAIL2_A0, U_TAIL2_9F, U_TAIL3, U_TAIL3_90, U_TAIL3_8F, N_UTF8, U_FAIL = 0xff };

/* The UTF-8 state after byte ch in a string, for a byte that is (part of) a
 * character as it is; U_FAIL for '"', '\', control characters and bytes
 * that are not UTF-8 there. */
static unsigned plain_next(unsigned u, unsigned ch)
{
    switch (u) {
    case U_NONE:
        if (ch < 0x80) return ch >= 0x20 && ch != '"' && ch != '\\' ? U_NONE : U_FAIL;
        if (ch >= 0xc2 && ch <= 0xdf) return U_TAIL1;
        if (ch == 0xe0) return U_TAIL2_A0; /* no overlong forms */
        if (ch == 0xed) return U_TAIL2_9F; /* no surrogates */
        if (ch >= 0xe1 && ch <= 0xef) return U_TAIL2;
        if (ch == 0xf0) return U_TAIL3_90;
        if (ch >= 0xf1 && ch <= 0xf3) return U_TAIL3;
        if (ch == 0xf4) return U_TAIL3_8F; /* nothing past U+10FFFF */
        return U_FAIL;
    case U_TAIL1: return ch >= 0x80 && ch <= 0xbf ? U_NONE : U_FAIL;
    case U_TAIL2: return ch >= 0x80 && ch <= 0xbf ? U_TAIL1 : U_FAIL;
    case U_TAIL2_A0: return ch >= 0xa0 && ch <= 0xbf ? U_TAIL1 : U_FAIL;
    case U_TAIL2_9F: return ch >= 0x80 && ch <= 0x9f ? U_TAIL1 : U_FAIL;
    case U_TAIL3: return ch >= 0x80 && ch <= 0xbf ? U_TAIL2 : U_FAIL;
    case U_TAIL3_90: return ch >= 0x90 && ch <= 0xbf ? U_TAIL2 : U_FAIL;
    case U_TAIL3_8F: return ch >= 0x80 && ch <= 0x8f ? U_TAIL2 : U_FAIL;
    }
    return U_FAIL;
}

/* s[0, n) is valid UTF-8: the automaton's reading, with the bytes it leaves
 * to the string grammar ('"', '\', control characters) taken as characters. */
static bool utf8_valid(const char *s, size_t n)
{
    unsigned u = U_NONE;
    for (size_t i = 0; i < n && u != U_FAIL; i++) {
        unsigned ch = (unsigned char)s[i];
        u = u == U_NONE && ch < 0x80 ? U_NONE : plain_next(u, ch);
    }
    return u == U_NONE;
}

/* ---- compiling ---- */

typedef struct compiler {
    vkv_json_constraint *c;
    uint32_t cap_nodes, cap_paths, cap_props, cap_keys, cap_lits, cap_alts, cap_bounds;
    vkv_strbuf text;
    vkv_strbuf paths;  /* each node's path, for refusals found after the walk */
    uint32_t *path_at; /* per node: where its path starts in paths */
    char path[512];    /* the schema being compiled */
    size_t path_len;
    uint32_t root;          /* "$ref": "#" */
    const vkv_json *defs;   /* the top-level $defs */
    uint32_t *def_nodes;    /* one per entry of defs */
    char *param, *msg;
    size_t param_size, msg_size;
} compiler;

static bool vrefuse(compiler *k, const char *keyword, const char *fmt, va_list ap)
{
    char p[640], m[512];
    snprintf(p, sizeof p, "%s%s%s", k->path, keyword ? "." : "", keyword ? keyword : "");
    vsnprintf(m, sizeof m, fmt, ap);
    if (k->param_size) snprintf(k->param, k->param_size, "%s", p);
    if (k->msg_size) snprintf(k->msg, k->msg_size, "'%s' %s", p, m);
    return false;
}

/* A refusal naming keyword under the current path; returns false. */
static bool refuse(compiler *k, const char *keyword, const char *fmt, ...) VKV_PRINTF(3, 4);
static bool refuse(compiler *k, const char *keyword, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(k, keyword, fmt, ap);
    va_end(ap);
    return false;
}

/* A refusal naming a node found wrong after the walk. */
static bool refuse_at(compiler *k, uint32_t ni, const char *fmt, ...) VKV_PRINTF(3, 4);
static bool refuse_at(compiler *k, uint32_t ni, const char *fmt, ...)
{
    snprintf(k->path, sizeof k->path, "%s", k->paths.p + k->path_at[ni]);
    va_list ap;
    va_start(ap, fmt);
    vrefuse(k, NULL, fmt, ap);
    va_end(ap);
    return false;
}

static bool out_of_memory(compiler *k)
{
    if (k->param_size) k->param[0] = 0;
    if (k->msg_size) snprintf(k->msg, k->msg_size, "out of memory compiling response_format");
    return false;
}

/* Appends to the path; returns the length to go back to. A path too long is cut. */
static size_t path_push(compiler *k, const char *fmt, ...) VKV_PRINTF(2, 3);
static size_t path_push(compiler *k, const char *fmt, ...)
{
    size_t len = k->path_len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(k->path + len, sizeof k->path - len, fmt, ap);
    va_end(ap);
    k->path_len = n < 0 ? len : len + (size_t)n < sizeof k->path ? len + (size_t)n : sizeof k->path - 1;
    k->path[k->path_len] = 0;
    return len;
}

static void path_pop(compiler *k, size_t len)
{
    k->path_len = len;
    k->path[len] = 0;
}

/* Room for `need` elements of `size` bytes in *p. */
static bool grow(void *p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap) return true;
    uint32_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *np = realloc(*(void **)p, (size_t)cap2 * size);
    if (!np) return false;
    *(void **)p = np;
    *cap = cap2;
    return true;
}

/* A new node at the current path; NONE after a refusal. */
static uint32_t new_node(compiler *k, const node *n)
{
    vkv_json_constraint *c = k->c;
    if (c->n_nodes >= MAX_NODES) {
        refuse(k, NULL, "makes the schema too large (more than %d schemas)", MAX_NODES);
        return NONE;
    }
    if (!grow(&c->nodes, &k->cap_nodes, c->n_nodes + 1, sizeof *c->nodes) ||
        !grow(&k->path_at, &k->cap_paths, c->n_nodes + 1, sizeof *k->path_at)) {
        out_of_memory(k);
        return NONE;
    }
    k->path_at[c->n_nodes] = (uint32_t)k->paths.n;
    vkv_strbuf_put(&k->paths, k->path, k->path_len + 1);
    if (k->paths.oom) {
        out_of_memory(k);
        return NONE;
    }
    c->nodes[c->n_nodes] = *n;
    return c->n_nodes++;
}

/* s[0, n) as a JSON string, quotes included, with the shortest escapes. */
static void put_string(vkv_strbuf *b, const char *s, size_t n)
{
    vkv_strbuf_put(b, "\"", 1);
    size_t from = 0; /* bytes since the last escape go as they are */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        vkv_strbuf_put(b, s + from, i - from);
        from = i + 1;
        char e[8];
        switch (ch) {
        case '"': snprintf(e, sizeof e, "\\\""); break;
        case '\\': snprintf(e, sizeof e, "\\\\"); break;
        case '\b': snprintf(e, sizeof e, "\\b"); break;
        case '\f': snprintf(e, sizeof e, "\\f"); break;
        case '\n': snprintf(e, sizeof e, "\\n"); break;
        case '\r': snprintf(e, sizeof e, "\\r"); break;
        case '\t': snprintf(e, sizeof e, "\\t"); break;
        default: snprintf(e, sizeof e, "\\u%04x", ch);
        }
        vkv_strbuf_puts(b, e);
    }
    vkv_strbuf_put(b, s + from, n - from);
    vkv_strbuf_put(b, "\"", 1);
}

/* The shortest text that reads back as x (finite). */
static void number_text(double x, char *o, size_t cap)
{
    if (x == floor(x) && fabs(x) < 1e21) {
        snprintf(o, cap, "%.0f", x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(o, cap, "%.*g", prec, x);
        if (strtod(o, NULL) == x) return;
    }
}

static bool is_scalar(const vkv_json *v) { return v->type != VKV_JSON_ARRAY && v->type != VKV_JSON_OBJECT; }

/* The types a scalar value has. */
static unsigned value_types(const vkv_json *v)
{
    switch (v->type) {
    case VKV_JSON_NULL: return T_NULL;
    case VKV_JSON_BOOL: return T_BOOLEAN;
    case VKV_JSON_NUMBER: return v->number == floor(v->number) ? T_NUMBER | T_INTEGER : T_NUMBER;
    case VKV_JSON_STRING: return T_STRING;
    default: return 0;
    }
}

static bool same_scalar(const vkv_json *a, const vkv_json *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case VKV_JSON_BOOL: return a->boolean == b->boolean;
    case VKV_JSON_NUMBER: return a->number == b->number;
    case VKV_JSON_STRING: return a->string_len == b->string_len && !memcmp(a->string, b->string, a->string_len);
    default: return true;
    }
}

static bool text_fits(compiler *k, const char *what)
{
    if (k->text.oom) return out_of_memory(k);
    if (k->text.n > MAX_TEXT)
        return refuse(k, what, "makes the schema too large (more than %u bytes of keys and enum values)", MAX_TEXT);
    return true;
}

/* Appends a scalar as written to the literals; false after a refusal. */
static bool add_literal(compiler *k, const char *what, const vkv_json *v)
{
    vkv_json_constraint *c = k->c;
    if (c->n_lits >= MAX_LITERALS)
        return refuse(k, what, "makes the schema too large (more than %d enum values)", MAX_LITERALS);
    if (!grow(&c->lits, &k->cap_lits, c->n_lits + 1, sizeof *c->lits)) return out_of_memory(k);
    size_t at = k->text.n;
    char num[40];
    switch (v->type) {
    case VKV_JSON_NULL: vkv_strbuf_puts(&k->text, "null"); break;
    case VKV_JSON_BOOL: vkv_strbuf_puts(&k->text, v->boolean ? "true" : "false"); break;
    case VKV_JSON_NUMBER:
        if (!isfinite(v->number)) return refuse(k, what, "is too large a number");
        number_text(v->number, num, sizeof num);
        vkv_strbuf_puts(&k->text, num);
        break;
    case VKV_JSON_STRING:
        if (!utf8_valid(v->string, v->string_len)) return refuse(k, what, "is not valid UTF-8");
        put_string(&k->text, v->string, v->string_len);
        break;
    default:
        return refuse(k, what, "must be a string, a number, a boolean or null, not %s (objects and arrays are not "
                      "supported)", vkv_json_type_name(v->type));
    }
    if (!text_fits(k, what)) return false;
    c->lits[c->n_lits++] = (span){(uint32_t)at, (uint32_t)(k->text.n - at)};
    return true;
}

enum { KW_TYPE, KW_PROPERTIES, KW_REQUIRED, KW_ADDITIONAL, KW_ITEMS, KW_MIN_ITEMS, KW_MAX_ITEMS, KW_ENUM, KW_CONST,
       KW_ANYOF, KW_REF, KW_DEFS, KW_MINIMUM, KW_EXCL_MIN, KW_MAXIMUM, KW_EXCL_MAX, N_KEYWORDS };
static const char *const keyword_names[N_KEYWORDS] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "$ref", "$defs", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
/* Keywords that say nothing about the values. */
static const char *const annotations[] = {"description", "title", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "strict"};

static int keyword(const char *key)
{
    for (int i = 0; i < N_KEYWORDS; i++)
        if (!strcmp(key, keyword_names[i])) return i;
    return -1;
}

static bool annotation(const char *key)
{
    for (size_t i = 0; i < sizeof annotations / sizeof *annotations; i++)
        if (!strcmp(key, annotations[i])) return true;
    return false;
}

static bool parse_type(compiler *k, const vkv_json *t, unsigned *types)
{
    static const struct { const char *name; unsigned bits; } names[] = {
        {"null", T_NULL}, {"boolean", T_BOOLEAN}, {"integer", T_INTEGER}, {"number", T_NUMBER},
        {"string", T_STRING}, {"array", T_ARRAY}, {"object", T_OBJECT}};
    const vkv_json *const *v = &t;
    size_t n = 1;
    if (t->type == VKV_JSON_ARRAY) {
        if (!t->n_items) return refuse(k, "type", "must name at least one type");
        v = (const vkv_json *const *)t->items;
        n = t->n_items;
    }
    *types = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i]->type != VKV_JSON_STRING)
            return refuse(k, "type", "must be a type name or an array of them, not %s", vkv_json_type_name(v[i]->type));
        unsigned bits = 0;
        for (size_t j = 0; j < sizeof names / sizeof *names; j++)
            if (!strcmp(v[i]->string, names[j].name)) bits = names[j].bits;
        if (!bits)
            return refuse(k, "type", "names '%.64s', not one of object, array, string, number, integer, boolean, null",
                          v[i]->string);
        *types |= bits;
    }
    return true;
}

/* minItems, maxItems: absent is dflt. */
static bool count_keyword(compiler *k, const vkv_json *v, const char *name, uint32_t dflt, uint32_t *out)
{
    *out = dflt;
    if (!v) return true;
    uint64_t x;
    const char *why = vkv_json_as_uint(v, &x);
    if (why) return refuse(k, name, "must be a non-negative integer (got %s)", why);
    if (x >= NONE) return refuse(k, name, "is too large");
    *out = (uint32_t)x;
    return true;
}

/* ---- numeric bounds ---- */

/* An exact decimal: sign x 0.d[0] d[1] ... d[n - 1] x 10^q, without leading
 * or trailing zero digits (n 0, sign 0: zero). */
typedef struct decimal {
    int sign, q, n;
    char d[64]; /* the digits that matter: at most MAG_DIGITS and a few */
} decimal;

static void decimal_trim(decimal *x)
{
    while (x->n && x->d[x->n - 1] == '0') x->n--;
    if (!x->n) x->sign = 0;
}

/* A JSON number's text as a decimal. */
static void text_decimal(const char *t, decimal *x)
{
    x->sign = *t == '-' ? -1 : 1;
    t += *t == '-';
    x->n = x->q = 0;
    bool fraction = false;
    for (; (*t >= '0' && *t <= '9') || *t == '.'; t++) {
        if (*t == '.') fraction = true;
        else if (!x->n && *t == '0') x->q -= fraction; /* a leading zero */
        else {
            if (x->n < (int)sizeof x->d) x->d[x->n++] = *t; /* a double's shortest spelling: 17 at most */
            x->q += !fraction;
        }
    }
    if (*t == 'e' || *t == 'E') x->q += atoi(t + 1);
    decimal_trim(x);
}

/* m x 2^e, exactly (m > 0): m times 2^e, or m times 5^-e over 10^-e, in limbs of 9 digits. */
static void dyadic_decimal(uint64_t m, int e, decimal *x)
{
    enum { BASE = 1000000000 };
    uint32_t limb[100]; /* 5^1075 x 2^55 has 769 digits */
    int n = 0;
    for (; !(m & 1); m >>= 1) e++;
    for (; m; m /= BASE) limb[n++] = (uint32_t)(m % BASE);
    for (int left = e < 0 ? -e : e; left > 0;) {
        int step = e < 0 ? (left < 13 ? left : 13) : (left < 29 ? left : 29);
        uint64_t f = 1, carry = 0;
        for (int i = 0; i < step; i++) f *= e < 0 ? 5 : 2;
        for (int i = 0; i < n; i++) {
            uint64_t v = limb[i] * f + carry;
            limb[i] = (uint32_t)(v % BASE);
            carry = v / BASE;
        }
        for (; carry && n < (int)(sizeof limb / sizeof *limb); carry /= BASE) limb[n++] = (uint32_t)(carry % BASE);
        left -= step;
    }
    /* the leading limbs' digits, then 1 for any digit not 0 below them: enough to compare numbers with */
    enum { KEEP = (MAG_DIGITS + 17) / 9 };
    int top = n > KEEP ? n - KEEP : 0, len = snprintf(x->d, sizeof x->d, "%u", (unsigned)limb[n - 1]);
    for (int i = n - 2; i >= top; i--)
        len += snprintf(x->d + len, sizeof x->d - (size_t)len, "%09u", (unsigned)limb[i]);
    x->sign = 1;
    x->q = len + 9 * top + (e < 0 ? e : 0);
    bool below = false;
    for (int i = 0; i < top; i++) below |= limb[i] != 0;
    x->n = len;
    decimal_trim(x);
    if (below) {
        x->sign = 1;
        while (x->n < len) x->d[x->n++] = '0';
        x->d[x->n++] = '1';
    }
}

/* |x| = *m x 2^*e, *m below 2^53 (0 for 0). */
static void split_double(double x, uint64_t *m, int *e)
{
    int k;
    double f = frexp(fabs(x), &k);
    *m = (uint64_t)ldexp(f, 53);
    *e = k - 53;
}

/* The number halfway between b and the next double toward dir (+1, -1), as
 * a decimal; *to_next: a double reader takes it as that next double (ties
 * go to the even one), not as b. */
static void halfway(double b, int dir, decimal *x, bool *to_next)
{
    double nb = nextafter(b, dir > 0 ? HUGE_VAL : -HUGE_VAL);
    uint64_t bits, ma, mc = 0, sum;
    int ea, ec = 0, e;
    memcpy(&bits, &nb, sizeof bits);
    *to_next = !(bits & 1);
    split_double(b, &ma, &ea);
    if (!isinf(nb)) split_double(nb, &mc, &ec);
    if (isinf(nb)) { /* past the largest double: halfway to 2^1024 */
        sum = 2 * ma + 1;
        e = ea - 1;
    } else if (!ma || !mc) {
        sum = ma | mc;
        e = (ma ? ea : ec) - 1;
    } else { /* neighbours: exponents one apart at most */
        e = ea < ec ? ea : ec;
        sum = (ma << (ea - e)) + (mc << (ec - e));
        e--;
    }
    dyadic_decimal(sum, e, x);
    x->sign = (b != 0 ? b : nb) < 0 ? -1 : 1;
}

/* A bound in values: x, the bound itself out when strict (absent: none). */
typedef struct vbound {
    bool on, strict;
    decimal x;
} vbound;

/* minimum and maximum are their shortest decimal spelling (what a schema
 * writes: maximum 0.3 holds 0.3); an exclusive bound b is where a double
 * reader stops reading numbers as b: halfway to the next double inward. */
static void value_bound(vbound *v, const vkv_json *kw, int dir)
{
    v->on = true;
    v->strict = false;
    if (!dir) {
        char text[40];
        number_text(kw->number, text, sizeof text);
        text_decimal(text, &v->x);
        return;
    }
    bool to_next;
    halfway(kw->number, dir, &v->x, &to_next);
    v->strict = !to_next;
}

/* g: the magnitude bound |v| of a non-zero v. */
static void set_mag(mag *g, const vbound *v)
{
    *g = (mag){.kind = MAG_POS, .strict = v->strict, .q = (int16_t)v->x.q};
    for (int i = 1; i <= MAG_DIGITS + 1; i++) g->d[i] = (uint8_t)(i <= v->x.n ? v->x.d[i - 1] - '0' : 0);
    for (int i = 0; i <= MAG_DIGITS + 1; i++) {
        g->rest[i] = v->x.n > i;
        int p = i + 1;
        while (p <= MAG_DIGITS + 1 && g->d[p] == 9) p++;
        g->non9[i] = (uint8_t)p;
    }
}

/* Magnitudes m of one sign (flip -1: the numbers -m) at least v, or, upper, at most v. */
static void magnitude_bound(mag *g, const vbound *v, int flip, bool upper)
{
    int sign = v->on ? v->x.sign * flip : 0;
    *g = (mag){.kind = MAG_NONE};
    if (!v->on) return;
    if (sign > 0) set_mag(g, v);
    else if (upper) *g = (mag){.kind = MAG_ZERO, .strict = sign < 0 || v->strict}; /* 0 at most, or nothing */
    else if (!sign && v->strict) *g = (mag){.kind = MAG_ZERO, .strict = true}; /* above 0 */
}

/* The fewest significant digits of a magnitude between lo and hi where both are 0.x x 10^q of one q. */
static uint8_t side_grid(const side *sd)
{
    const mag *l = &sd->lo, *u = &sd->hi;
    if (l->kind != MAG_POS || u->kind != MAG_POS || l->q != u->q) return NO_GRID;
    for (int n = 1; n <= MAG_DIGITS; n++) {
        /* the least n digits at or above lo */
        uint8_t y[MAG_DIGITS + 2];
        memcpy(y, l->d, sizeof y);
        int i = n;
        if (l->rest[n] || l->strict)
            for (; i >= 1 && y[i] == 9; i--) y[i] = 0;
        if (!i) continue; /* 1.0 x 10^q: above hi */
        if (l->rest[n] || l->strict) y[i]++;
        int c = 0;
        for (i = 1; i <= n && !c; i++) c = (y[i] > u->d[i]) - (y[i] < u->d[i]);
        if (c < 0 || (!c && (!u->strict || u->rest[n]))) return (uint8_t)n;
    }
    return NO_GRID;
}

static bool bounds_hold_a_number(const num_bounds *b, bool integer);

/* minimum, exclusiveMinimum, maximum, exclusiveMaximum: numbers, on a
 * schema that can be a number, with some number between them. *lo, *hi:
 * the keywords that bound from below and above (-1: none). */
static bool read_bounds(compiler *k, const vkv_json *const *kw, unsigned types, int *lo, int *hi)
{
    *lo = *hi = -1;
    int first = -1;
    for (int w = KW_MINIMUM; w <= KW_EXCL_MAX; w++) {
        const vkv_json *v = kw[w];
        if (!v) continue;
        if (v->type != VKV_JSON_NUMBER)
            return refuse(k, keyword_names[w], "must be a number%s, not %s",
                          w == KW_EXCL_MIN || w == KW_EXCL_MAX ? " (the bound itself, as in JSON Schema 2020-12)" : "",
                          vkv_json_type_name(v->type));
        if (!isfinite(v->number)) return refuse(k, keyword_names[w], "is too large a number");
        if (first < 0) first = w;
    }
    if (first < 0) return true;
    if (!(types & (T_INTEGER | T_NUMBER)))
        return refuse(k, keyword_names[first], "bounds numbers, and 'type' allows none");
    const vkv_json *mn = kw[KW_MINIMUM], *xmn = kw[KW_EXCL_MIN], *mx = kw[KW_MAXIMUM], *xmx = kw[KW_EXCL_MAX];
    /* of two bounds on one end, the tighter */
    *lo = xmn && (!mn || xmn->number >= mn->number) ? KW_EXCL_MIN : mn ? KW_MINIMUM : -1;
    *hi = xmx && (!mx || xmx->number <= mx->number) ? KW_EXCL_MAX : mx ? KW_MAXIMUM : -1;
    if (*lo >= 0 && *hi >= 0) {
        double a = kw[*lo]->number, z = kw[*hi]->number;
        char at[40], zt[40];
        number_text(a, at, sizeof at);
        number_text(z, zt, sizeof zt);
        if (a > z || (a == z && (*lo == KW_EXCL_MIN || *hi == KW_EXCL_MAX)))
            return refuse(k, keyword_names[*lo], "is %s, %s %s %s: no number lies between them", at,
                          a > z ? "above" : "and", keyword_names[*hi], zt);
    }
    return true;
}

/* A numeric value within the bounds kw has (other values are). */
static bool within_bounds(const vkv_json *v, const vkv_json *const *kw)
{
    if (v->type != VKV_JSON_NUMBER) return true;
    double x = v->number;
    return (!kw[KW_MINIMUM] || x >= kw[KW_MINIMUM]->number) && (!kw[KW_EXCL_MIN] || x > kw[KW_EXCL_MIN]->number) &&
           (!kw[KW_MAXIMUM] || x <= kw[KW_MAXIMUM]->number) && (!kw[KW_EXCL_MAX] || x < kw[KW_EXCL_MAX]->number);
}

/* A schema's numeric bounds: *out 1 + their index in bounds, 0 without any. */
static bool compile_bounds(compiler *k, const vkv_json *const *kw, unsigned types, uint32_t *out)
{
    vkv_json_constraint *c = k->c;
    int lo, hi;
    *out = 0;
    if (!read_bounds(k, kw, types, &lo, &hi)) return false;
    if (lo < 0 && hi < 0) return true;
    if (!grow(&c->bounds, &k->cap_bounds, c->n_bounds + 1, sizeof *c->bounds)) return out_of_memory(k);
    vbound *v = calloc(2, sizeof *v);
    if (!v) return out_of_memory(k);
    if (lo >= 0) value_bound(&v[0], kw[lo], lo == KW_EXCL_MIN ? 1 : 0);
    if (hi >= 0) value_bound(&v[1], kw[hi], hi == KW_EXCL_MAX ? -1 : 0);
    num_bounds *b = &c->bounds[c->n_bounds];
    for (int neg = 0; neg < 2; neg++) {
        side *sd = &b->s[neg];
        /* m >= lo and m <= hi; -m >= lo and -m <= hi: m <= -lo and m >= -hi */
        magnitude_bound(&sd->lo, &v[neg], neg ? -1 : 1, false);
        magnitude_bound(&sd->hi, &v[!neg], neg ? -1 : 1, true);
        sd->grid = side_grid(sd);
        sd->lq = sd->lo.kind == MAG_POS ? sd->lo.q : -Q_INF;
        sd->uq = sd->hi.kind == MAG_POS ? sd->hi.q : sd->hi.kind == MAG_NONE ? Q_INF : -Q_INF;
        sd->zero = sd->lo.kind == MAG_NONE && !(sd->hi.kind == MAG_ZERO && sd->hi.strict);
    }
    free(v);
    bool integer = (types & T_INTEGER) && !(types & T_NUMBER);
    if (!bounds_hold_a_number(b, integer)) {
        char range[128] = "", text[40];
        for (int i = 0, w = lo; i < 2; i++, w = hi) {
            if (w < 0) continue;
            number_text(kw[w]->number, text, sizeof text);
            size_t at = strlen(range);
            snprintf(range + at, sizeof range - at, "%s%s %s", at ? ", " : "", keyword_names[w], text);
        }
        return refuse(k, keyword_names[lo >= 0 ? lo : hi], "leaves no %s of at most %d bytes (%s)",
                      integer ? "integer" : "number", VKV_JSON_CONSTRAINT_MAX_NUMBER, range);
    }
    *out = ++c->n_bounds;
    return true;
}

static bool compile_schema(compiler *k, const vkv_json *s, unsigned depth, uint32_t *out);

static bool compile_ref(compiler *k, const vkv_json *ref, uint32_t *out)
{
    if (ref->type != VKV_JSON_STRING) return refuse(k, "$ref", "must be a string, not %s", vkv_json_type_name(ref->type));
    const char *r = ref->string;
    if (!strcmp(r, "#")) {
        *out = k->root;
        return true;
    }
    static const char prefix[] = "#/$defs/";
    if (strncmp(r, prefix, sizeof prefix - 1))
        return refuse(k, "$ref", "is '%.64s': only \"#\" and \"#/$defs/NAME\" are supported", r);
    /* the name, its JSON pointer escapes undone */
    const char *p = r + sizeof prefix - 1;
    char *name = malloc(strlen(p) + 1);
    if (!name) return out_of_memory(k);
    size_t n = 0;
    bool nested = false;
    for (; *p; p++) {
        if (*p == '/') nested = true;
        if (*p == '~' && (p[1] == '0' || p[1] == '1')) name[n++] = *++p == '0' ? '~' : '/';
        else name[n++] = *p;
    }
    name[n] = 0;
    bool found = false;
    for (size_t i = 0; !nested && k->defs && i < k->defs->n_items && !found; i++)
        if (!strcmp(k->defs->keys[i], name)) {
            *out = k->def_nodes[i];
            found = true;
        }
    free(name);
    if (nested) return refuse(k, "$ref", "is '%.64s': only \"#\" and \"#/$defs/NAME\" are supported", r);
    if (!found) return refuse(k, "$ref", "is '%.64s', which names no entry of the top-level $defs", r);
    return true;
}

static bool compile_any_of(compiler *k, const vkv_json *a, unsigned depth, uint32_t *out)
{
    vkv_json_constraint *c = k->c;
    if (a->type != VKV_JSON_ARRAY || !a->n_items) return refuse(k, "anyOf", "must be a non-empty array of schemas");
    uint32_t *alts = malloc(a->n_items * sizeof *alts);
    if (!alts) return out_of_memory(k);
    bool ok = true;
    for (size_t i = 0; ok && i < a->n_items; i++) {
        size_t mark = path_push(k, ".anyOf.[%zu]", i);
        ok = compile_schema(k, a->items[i], depth + 1, &alts[i]);
        path_pop(k, mark);
    }
    if (ok && c->n_alts + a->n_items > MAX_NODES)
        ok = refuse(k, "anyOf", "makes the schema too large (more than %d alternatives)", MAX_NODES);
    if (ok && !grow(&c->alts, &k->cap_alts, c->n_alts + (uint32_t)a->n_items, sizeof *c->alts)) ok = out_of_memory(k);
    if (ok) {
        node n = {.kind = N_ANYOF, .first = c->n_alts, .n = (uint32_t)a->n_items};
        memcpy(c->alts + c->n_alts, alts, a->n_items * sizeof *alts);
        c->n_alts += (uint32_t)a->n_items;
        ok = (*out = new_node(k, &n)) != NONE;
    }
    free(alts);
    return ok;
}

typedef struct sorted_literal {
    const char *p;
    span s;
} sorted_literal;

static int by_literal(const void *a, const void *b)
{
    const sorted_literal *x = a, *y = b;
    int d = memcmp(x->p, y->p, x->s.len < y->s.len ? x->s.len : y->s.len);
    return d ? d : (x->s.len > y->s.len) - (x->s.len < y->s.len);
}

/* Literals [first, n_lits) sorted by bytes, the same one twice kept once:
 * the ones that start alike are then side by side. */
static bool sort_literals(compiler *k, uint32_t first)
{
    vkv_json_constraint *c = k->c;
    uint32_t n = c->n_lits - first, kept = 0;
    sorted_literal *l = malloc((n + 1) * sizeof *l);
    if (!l) return out_of_memory(k);
    for (uint32_t i = 0; i < n; i++) l[i] = (sorted_literal){k->text.p + c->lits[first + i].off, c->lits[first + i]};
    qsort(l, n, sizeof *l, by_literal);
    for (uint32_t i = 0; i < n; i++)
        if (!kept || by_literal(&l[i], &l[i - 1])) c->lits[first + kept++] = l[i].s;
    c->n_lits = first + kept;
    free(l);
    return true;
}

static bool compile_literals(compiler *k, const vkv_json *const *kw, uint32_t *out)
{
    vkv_json_constraint *c = k->c;
    unsigned types = T_ALL;
    if (kw[KW_TYPE] && !parse_type(k, kw[KW_TYPE], &types)) return false;
    const vkv_json *e = kw[KW_ENUM], *cv = kw[KW_CONST];
    if (e && (e->type != VKV_JSON_ARRAY || !e->n_items)) return refuse(k, "enum", "must be a non-empty array of values");
    if (e && cv && !is_scalar(cv))
        return refuse(k, "const", "must be a string, a number, a boolean or null, not %s (objects and arrays are not "
                      "supported)", vkv_json_type_name(cv->type));
    int lo, hi;
    if (!read_bounds(k, kw, types, &lo, &hi)) return false;
    uint32_t first = c->n_lits;
    size_t n = e ? e->n_items : 1;
    for (size_t i = 0; i < n; i++) {
        const vkv_json *v = e ? e->items[i] : cv;
        char what[32] = "const";
        if (e) snprintf(what, sizeof what, "enum.[%zu]", i);
        if (!add_literal(k, what, v)) return false;
        /* kept when it has the type, is within the bounds and equals const */
        if (!(value_types(v) & types) || !within_bounds(v, kw) || (e && cv && !same_scalar(v, cv))) {
            k->text.n = c->lits[--c->n_lits].off;
            k->text.p[k->text.n] = 0;
        }
    }
    if (c->n_lits == first)
        return refuse(k, e ? "enum" : "const", "leaves no value: %s%s",
                      e && cv ? "'const' is not in it or not of 'type'" : "none is of 'type'",
                      lo >= 0 || hi >= 0 ? " and within the bounds" : "");
    if (!sort_literals(k, first)) return false;
    node nd = {.kind = N_LITERALS, .first = first, .n = c->n_lits - first};
    return (*out = new_node(k, &nd)) != NONE;
}

/* Appends an object's properties and their keys. */
static bool add_properties(compiler *k, const vkv_json *props, const uint32_t *nodes, const bool *required, node *n)
{
    vkv_json_constraint *c = k->c;
    uint32_t count = (uint32_t)props->n_items;
    if (c->n_props + count > MAX_NODES)
        return refuse(k, "properties", "makes the schema too large (more than %d properties)", MAX_NODES);
    if (!grow(&c->props, &k->cap_props, c->n_props + count, sizeof *c->props) ||
        !grow(&c->keys, &k->cap_keys, c->n_props + count, sizeof *c->keys))
        return out_of_memory(k);
    n->prop = c->n_props;
    n->n_props = count;
    for (uint32_t i = 0; i < count; i++) {
        size_t at = k->text.n;
        put_string(&k->text, props->keys[i], strlen(props->keys[i]));
        if (!text_fits(k, "properties")) return false;
        c->keys[c->n_props] = (span){(uint32_t)at, (uint32_t)(k->text.n - at)};
        c->props[c->n_props++] = (prop){nodes[i], required[i]};
        if (required[i]) n->req_end = i + 1;
    }
    return true;
}

static bool compile_types(compiler *k, const vkv_json *const *kw, unsigned depth, uint32_t *out)
{
    node n = {.kind = N_TYPES, .types = T_ALL, .extra = NODE_ANY, .items = NODE_ANY, .max_items = NONE};
    if (kw[KW_TYPE] && !parse_type(k, kw[KW_TYPE], &n.types)) return false;
    const vkv_json *props = kw[KW_PROPERTIES], *req = kw[KW_REQUIRED], *add = kw[KW_ADDITIONAL], *items = kw[KW_ITEMS];
    if (props && props->type != VKV_JSON_OBJECT)
        return refuse(k, "properties", "must be an object of schemas, not %s", vkv_json_type_name(props->type));
    if (req && req->type != VKV_JSON_ARRAY)
        return refuse(k, "required", "must be an array of property names, not %s", vkv_json_type_name(req->type));
    size_t n_props = props ? props->n_items : 0;
    uint32_t *nodes = malloc((n_props + 1) * sizeof *nodes);
    bool *required = calloc(n_props + 1, sizeof *required);
    bool ok = nodes && required ? true : out_of_memory(k);
    for (size_t i = 0; ok && i < n_props; i++) {
        const char *name = props->keys[i];
        size_t mark = path_push(k, ".properties.%s", name);
        for (size_t j = 0; ok && j < i; j++)
            if (!strcmp(props->keys[j], name)) ok = refuse(k, NULL, "is defined twice");
        if (ok && !utf8_valid(name, strlen(name))) ok = refuse(k, NULL, "is not valid UTF-8");
        if (ok) ok = compile_schema(k, props->items[i], depth + 1, &nodes[i]);
        path_pop(k, mark);
    }
    for (size_t i = 0; ok && req && i < req->n_items; i++) {
        const vkv_json *r = req->items[i];
        char what[32];
        snprintf(what, sizeof what, "required.[%zu]", i);
        if (r->type != VKV_JSON_STRING) {
            ok = refuse(k, what, "must be a property name, not %s", vkv_json_type_name(r->type));
            break;
        }
        size_t j = 0;
        while (j < n_props && strcmp(props->keys[j], r->string)) j++;
        if (j == n_props) ok = refuse(k, what, "is '%.64s', which is not in 'properties'", r->string);
        else required[j] = true;
    }
    if (ok && add) {
        if (add->type == VKV_JSON_BOOL) {
            n.extra = add->boolean ? NODE_ANY : NONE;
        } else {
            size_t mark = path_push(k, ".additionalProperties");
            ok = compile_schema(k, add, depth + 1, &n.extra);
            path_pop(k, mark);
        }
    }
    if (ok && items) {
        if (items->type == VKV_JSON_ARRAY) {
            ok = refuse(k, "items", "must be one schema: tuples (arrays of schemas) are not supported");
        } else {
            size_t mark = path_push(k, ".items");
            ok = compile_schema(k, items, depth + 1, &n.items);
            path_pop(k, mark);
        }
    }
    if (ok) ok = count_keyword(k, kw[KW_MIN_ITEMS], "minItems", 0, &n.min_items) &&
                 count_keyword(k, kw[KW_MAX_ITEMS], "maxItems", NONE, &n.max_items);
    if (ok && n.min_items > n.max_items) ok = refuse(k, "minItems", "is larger than maxItems");
    if (ok) ok = compile_bounds(k, kw, n.types, &n.bounds);
    if (ok && n_props) ok = add_properties(k, props, nodes, required, &n);
    free(nodes);
    free(required);
    return ok && (*out = new_node(k, &n)) != NONE;
}

static bool compile_schema(compiler *k, const vkv_json *s, unsigned depth, uint32_t *out)
{
    if (depth > VKV_JSON_CONSTRAINT_MAX_DEPTH)
        return refuse(k, NULL, "nests schemas more than %d deep", VKV_JSON_CONSTRAINT_MAX_DEPTH);
    if (s->type != VKV_JSON_OBJECT)
        return refuse(k, NULL, "must be a schema (an object), not %s", vkv_json_type_name(s->type));
    const vkv_json *kw[N_KEYWORDS] = {0};
    for (size_t i = 0; i < s->n_items; i++) {
        const char *key = s->keys[i];
        int w = keyword(key);
        if (w < 0) {
            if (annotation(key)) continue;
            return refuse(k, key, "is not supported (response_format schemas take type, properties, required, "
                          "additionalProperties, items, minItems, maxItems, enum, const, minimum, maximum, "
                          "exclusiveMinimum, exclusiveMaximum, anyOf, $ref and $defs)");
        }
        if (w == KW_DEFS && depth) return refuse(k, key, "is supported at the top of the schema only");
        kw[w] = s->items[i];
    }
    if (kw[KW_REF] || kw[KW_ANYOF]) {
        int alone = kw[KW_REF] ? KW_REF : KW_ANYOF;
        for (size_t i = 0; i < s->n_items; i++) {
            int w = keyword(s->keys[i]);
            if (w >= 0 && w != alone && w != KW_DEFS)
                return refuse(k, s->keys[i], "cannot be used next to '%s'", keyword_names[alone]);
        }
        return alone == KW_REF ? compile_ref(k, kw[KW_REF], out) : compile_any_of(k, kw[KW_ANYOF], depth, out);
    }
    if (kw[KW_ENUM] || kw[KW_CONST]) return compile_literals(k, kw, out);
    return compile_types(k, kw, depth, out);
}

/* The root and the top-level $defs, each a node that $ref can name before it is compiled. */
static bool compile_root(compiler *k, const vkv_json *schema)
{
    vkv_json_constraint *c = k->c;
    node ref = {.kind = N_REF, .first = NONE};
    if ((k->root = new_node(k, &ref)) == NONE) return false;
    if (schema->type != VKV_JSON_OBJECT)
        return refuse(k, NULL, "must be a schema (an object), not %s", vkv_json_type_name(schema->type));
    const vkv_json *defs = vkv_json_get(schema, "$defs");
    if (defs) {
        if (defs->type != VKV_JSON_OBJECT)
            return refuse(k, "$defs", "must be an object of schemas, not %s", vkv_json_type_name(defs->type));
        k->defs = defs;
        if (!(k->def_nodes = malloc((defs->n_items + 1) * sizeof *k->def_nodes))) return out_of_memory(k);
        for (size_t i = 0; i < defs->n_items; i++) {
            size_t mark = path_push(k, ".$defs.%s", defs->keys[i]);
            k->def_nodes[i] = new_node(k, &ref);
            path_pop(k, mark);
            if (k->def_nodes[i] == NONE) return false;
        }
        for (size_t i = 0; i < defs->n_items; i++) {
            size_t mark = path_push(k, ".$defs.%s", defs->keys[i]);
            uint32_t body;
            bool ok = compile_schema(k, defs->items[i], 1, &body);
            path_pop(k, mark);
            if (!ok) return false;
            c->nodes[k->def_nodes[i]].first = body;
        }
    }
    uint32_t body;
    if (!compile_schema(k, schema, 0, &body)) return false;
    c->nodes[k->root].first = body;
    return true;
}

static uint32_t add1(uint32_t x) { return x >= INF_NEED - 1 ? INF_NEED : x + 1; }

/* Each node's need, to a fixpoint (recursion): they only fall, from INF_NEED. */
static void compute_needs(vkv_json_constraint *c)
{
    for (uint32_t i = 0; i < c->n_nodes; i++) c->nodes[i].need = c->nodes[i].need_object = c->nodes[i].need_array = INF_NEED;
    for (uint32_t pass = 0; pass <= c->n_nodes; pass++) {
        bool changed = false;
        for (uint32_t i = 0; i < c->n_nodes; i++) {
            node *n = &c->nodes[i];
            uint32_t need = INF_NEED, obj = INF_NEED, arr = INF_NEED;
            if (n->kind == N_LITERALS) need = 0;
            else if (n->kind == N_ANYOF)
                for (uint32_t a = 0; a < n->n; a++) {
                    uint32_t x = c->nodes[c->alts[n->first + a]].need;
                    need = x < need ? x : need;
                }
            else if (n->kind == N_TYPES) {
                if (n->types & T_OBJECT) {
                    obj = 1;
                    for (uint32_t p = n->prop; p < n->prop + n->n_props; p++) {
                        uint32_t x = c->props[p].required ? add1(c->nodes[c->props[p].node].need) : 0;
                        obj = x > obj ? x : obj;
                    }
                }
                if (n->types & T_ARRAY) arr = add1(n->min_items ? c->nodes[n->items].need : 0);
                need = n->types & T_SCALARS ? 0 : obj < arr ? obj : arr;
            }
            if (need != n->need || obj != n->need_object || arr != n->need_array) {
                n->need = need;
                n->need_object = obj;
                n->need_array = arr;
                changed = true;
            }
        }
        if (!changed) break;
    }
}

/* After the walk: $ref cycles that consume nothing refused, every reference
 * to a $ref replaced by its target, anyOf flattened, needs computed. */
static bool link_nodes(compiler *k)
{
    vkv_json_constraint *c = k->c;
    uint32_t nn = c->n_nodes;
    uint8_t *color = calloc(nn, 1); /* 1: on the walk's stack, 2: done */
    uint32_t *post = malloc(nn * sizeof *post), *resolved = malloc(nn * sizeof *resolved);
    uint32_t *stack = malloc(nn * sizeof *stack), *edge = malloc(nn * sizeof *edge);
    bool ok = color && post && resolved && stack && edge ? true : out_of_memory(k);
    /* depth first along $ref and anyOf, which consume no input: post-order, and no cycle */
    uint32_t n_post = 0;
    for (uint32_t s = 0; ok && s < nn; s++) {
        if (color[s]) continue;
        uint32_t sp = 1;
        stack[0] = s;
        edge[0] = 0;
        color[s] = 1;
        while (ok && sp) {
            uint32_t v = stack[sp - 1];
            const node *n = &c->nodes[v];
            uint32_t n_edges = n->kind == N_REF ? 1 : n->kind == N_ANYOF ? n->n : 0;
            if (edge[sp - 1] < n_edges) {
                uint32_t w = n->kind == N_REF ? n->first : c->alts[n->first + edge[sp - 1]];
                edge[sp - 1]++;
                if (color[w] == 1)
                    ok = refuse_at(k, v, "refers back to itself through $ref or anyOf with no object or array "
                                   "between");
                else if (!color[w]) {
                    color[w] = 1;
                    stack[sp] = w;
                    edge[sp++] = 0;
                }
            } else {
                color[v] = 2;
                post[n_post++] = v;
                sp--;
            }
        }
    }
    if (ok) {
        for (uint32_t i = 0; i < n_post; i++) {
            uint32_t v = post[i];
            resolved[v] = c->nodes[v].kind == N_REF ? resolved[c->nodes[v].first] : v;
        }
        for (uint32_t i = 0; i < c->n_props; i++) c->props[i].node = resolved[c->props[i].node];
        for (uint32_t i = 0; i < c->n_alts; i++) c->alts[i] = resolved[c->alts[i]];
        for (uint32_t i = 0; i < nn; i++) {
            node *n = &c->nodes[i];
            if (n->kind != N_TYPES) continue;
            n->items = resolved[n->items];
            if (n->extra != NONE) n->extra = resolved[n->extra];
        }
        c->root = resolved[k->root];
    }
    /* anyOf flattened in post-order: the ones nested in it are flat already */
    for (uint32_t i = 0; ok && i < n_post; i++) {
        uint32_t v = post[i];
        if (c->nodes[v].kind != N_ANYOF) continue;
        uint32_t first = c->n_alts, from = c->nodes[v].first, n = c->nodes[v].n;
        for (uint32_t a = 0; ok && a < n; a++) {
            uint32_t alt = c->alts[from + a];
            bool nested = c->nodes[alt].kind == N_ANYOF;
            uint32_t lo = nested ? c->nodes[alt].first : 0, count = nested ? c->nodes[alt].n : 1;
            for (uint32_t j = 0; ok && j < count; j++) {
                uint32_t leaf = nested ? c->alts[lo + j] : alt, x = first;
                while (x < c->n_alts && c->alts[x] != leaf) x++;
                if (x < c->n_alts) continue;
                if (c->n_alts - first >= MAX_ALTERNATIVES)
                    ok = refuse_at(k, v, "has more than %d alternatives once nested anyOf are flattened",
                                   MAX_ALTERNATIVES);
                else if (!grow(&c->alts, &k->cap_alts, c->n_alts + 1, sizeof *c->alts))
                    ok = out_of_memory(k);
                else
                    c->alts[c->n_alts++] = leaf;
            }
        }
        c->nodes[v].first = first;
        c->nodes[v].n = c->n_alts - first;
    }
    if (ok) {
        compute_needs(c);
        for (uint32_t i = 0; ok && i < nn; i++)
            if (c->nodes[i].kind != N_REF && c->nodes[i].need >= INF_NEED)
                ok = refuse_at(k, i, "has no finite value: its required properties or items lead back to it");
        if (ok && c->nodes[c->root].need > MAX_NEST)
            ok = refuse_at(k, k->root, "needs objects and arrays nested more than %d deep", MAX_NEST);
    }
    free(color);
    free(post);
    free(resolved);
    free(stack);
    free(edge);
    return ok;
}

bool vkv_json_constraint_compile(const vkv_json *schema, vkv_json_constraint **out, char *param, size_t param_size,
                                 char *msg, size_t msg_size)
{
    *out = NULL;
    compiler k = {.param = param, .param_size = param_size, .msg = msg, .msg_size = msg_size};
    if (param_size) param[0] = 0;
    if (msg_size) msg[0] = 0;
    path_push(&k, "%s", VKV_JSON_CONSTRAINT_PARAM);
    if (!(k.c = calloc(1, sizeof *k.c))) return out_of_memory(&k);
    static const vkv_json builtins[] = {{.type = VKV_JSON_BOOL}, {.type = VKV_JSON_BOOL, .boolean = true},
                                        {.type = VKV_JSON_NULL}};
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof builtins / sizeof *builtins; i++) ok = add_literal(&k, NULL, &builtins[i]);
    const node any = {.kind = N_TYPES, .types = T_ALL, .extra = NODE_ANY, .items = NODE_ANY, .max_items = NONE};
    const node any_object = {.kind = N_TYPES, .types = T_OBJECT, .extra = NODE_ANY, .items = NODE_ANY,
                             .max_items = NONE};
    ok = ok && new_node(&k, &any) == NODE_ANY && new_node(&k, &any_object) == NODE_ANY_OBJECT;
    k.root = NODE_ANY_OBJECT; /* json_object mode */
    if (ok && schema) ok = compile_root(&k, schema);
    if (ok) ok = link_nodes(&k);
    if (ok) {
        k.c->text = k.text.p;
        k.text.p = NULL;
    }
    free(k.text.p);
    free(k.paths.p);
    free(k.path_at);
    free(k.def_nodes);
    if (!ok) {
        vkv_json_constraint_free(k.c);
        return false;
    }
    *out = k.c;
    return true;
}

/* ---- the matcher ---- */

/* The output is read as a pushdown automaton: a stack of frames, one per
 * value open, whose top takes the next byte. anyOf alternatives that agree
 * so far are read side by side, each reading with its own stack. Stacks live
 * in a pool of frames, shared below the point where readings forked, and a
 * frame in the pool never changes (a byte changes the tops, which are
 * outside it): saving a state is copying its tops and the pool's length. */

typedef enum frame_kind { F_VALUE, F_OBJECT, F_ARRAY, F_STRING, F_NUMBER, F_LITERAL, F_DONE } frame_kind;
/* objects: after '{', after ',', after a key, in a value, after a value */
enum { O_KEY_OR_END, O_KEY, O_COLON, O_VALUE, O_AFTER_VALUE };
/* arrays: after '[', in an item, after an item */
enum { A_ITEM_OR_END, A_ITEM, A_AFTER_ITEM };
/* strings: characters (their UTF-8 state in utf8), after '\', in \u's hex digits, a low surrogate's '\' and 'u' */
enum { S_CHARS, S_ESCAPE, S_HEX, S_LOW_BACKSLASH, S_LOW_U };
/* numbers: after '-', a leading 0, integer digits, '.', fraction digits, 'e', the exponent's sign, its digits */
enum { NUM_MINUS, NUM_ZERO, NUM_INT, NUM_DOT, NUM_FRACTION, NUM_EXP_MARK, NUM_EXP_SIGN, NUM_EXPONENT, NUM_FAIL };
/* a key (literal or string), a key without escapes, an integer, a \u that must be a low surrogate, a number
 * whose node has bounds */
enum { FL_KEY = 1, FL_NO_ESCAPE = 2, FL_INTEGER = 4, FL_LOW = 8, FL_BOUNDS = 16 };

typedef struct frame {
    uint32_t node;   /* VALUE, OBJECT, ARRAY, NUMBER: the schema node; LITERAL, key STRING: the last candidate */
    uint32_t parent; /* the frame below, in the pool; NONE at the bottom */
    uint32_t at;     /* OBJECT: the next declared property; ARRAY: items done; NUMBER: its bytes;
                      * LITERAL, key STRING: the first candidate spelled so far (NONE: none) */
    uint32_t pos;    /* LITERAL, key STRING: bytes spelled; OBJECT: the node of its last key's value;
                      * NUMBER with bounds: the exponent's value so far */
    uint16_t depth;  /* frames below: the objects and arrays open around it */
    uint16_t code;   /* STRING: the \u escape's value so far; NUMBER with bounds: its digits against the
                      * bounds' and its signs (see num) */
    uint8_t kind, st, flags, ws;
    uint8_t utf8;    /* STRING: the UTF-8 state; NUMBER with bounds: its decimal exponent (two's complement) */
    uint8_t hex;     /* STRING: \u's hex digits; NUMBER with bounds: its significant digits */
    uint8_t spare[2];
} frame;

static bool is_space(unsigned ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }
static bool is_digit(unsigned ch) { return ch >= '0' && ch <= '9'; }

static int hex_digit(unsigned ch)
{
    if (is_digit(ch)) return (int)(ch - '0');
    if (ch >= 'a' && ch <= 'f') return (int)(ch - 'a' + 10);
    if (ch >= 'A' && ch <= 'F') return (int)(ch - 'A' + 10);
    return -1;
}

typedef struct level {
    uint32_t off, n, pool_n; /* readings after a trie node's bytes: walk[off, off + n); the pool's length then */
} level;

struct vkv_json_matcher {
    const vkv_json_constraint *c;
    frame top[MAX_BRANCHES]; /* the readings of the output */
    uint32_t n_top;
    frame next[MAX_BRANCHES];
    frame *pool;
    uint32_t pool_n, pool_cap;
    bool oom;
    frame *spare; /* compaction's new pool */
    uint32_t spare_cap;
    uint32_t *remap;
    uint32_t remap_cap;
    frame *walk; /* allowed()'s readings, level by level */
    uint32_t walk_cap;
    level *levels;
    uint32_t levels_cap;
};

static uint32_t push(vkv_json_matcher *m, const frame *f)
{
    if (!grow(&m->pool, &m->pool_cap, m->pool_n + 1, sizeof *m->pool)) {
        m->oom = true;
        return NONE;
    }
    m->pool[m->pool_n] = *f;
    return m->pool_n++;
}

/* One byte's step over the readings: what they become goes to out. */
typedef struct stepper {
    vkv_json_matcher *m;
    const vkv_json_constraint *c;
    frame *out; /* MAX_BRANCHES at most */
    uint32_t n;
} stepper;

static bool same_frame(const frame *a, const frame *b)
{
    return a->node == b->node && a->at == b->at && a->pos == b->pos && a->depth == b->depth && a->code == b->code &&
           a->kind == b->kind && a->st == b->st && a->flags == b->flags && a->ws == b->ws && a->utf8 == b->utf8 &&
           a->hex == b->hex;
}

/* Readings with the same stack read the rest alike. */
static bool same_reading(const frame *pool, const frame *a, const frame *b)
{
    for (;;) {
        if (!same_frame(a, b)) return false;
        if (a->parent == b->parent) return true;
        if (a->parent == NONE || b->parent == NONE) return false;
        a = &pool[a->parent];
        b = &pool[b->parent];
    }
}

static void emit(stepper *s, const frame *t)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (same_reading(s->m->pool, &s->out[i], t)) return;
    if (s->n < MAX_BRANCHES) s->out[s->n++] = *t;
}

static bool number_start(const vkv_json_constraint *c, span s)
{
    return c->text[s.off] == '-' || is_digit((unsigned char)c->text[s.off]);
}

/* Candidates [lo, hi] of table t spell what candidate lo spells in its
 * first pos bytes: the first of them whose next byte is ch, NONE if none.
 * With a budget (keys only), a key whose value would nest more objects and
 * arrays than it is no candidate. Value literals are sorted: the search
 * stops where they stop starting alike. */
static uint32_t next_candidate(const vkv_json_constraint *c, const span *t, uint32_t lo, uint32_t hi, uint32_t pos,
                               unsigned ch, uint32_t budget)
{
    const char *spelled = c->text + t[lo].off;
    if (t != c->lits) {
        for (uint32_t i = lo; i <= hi; i++)
            if (t[i].len > pos && (unsigned char)c->text[t[i].off + pos] == ch &&
                (i == lo || !memcmp(c->text + t[i].off, spelled, pos)) &&
                (budget == NONE || c->nodes[c->props[i].node].need <= budget))
                return i;
        return NONE;
    }
    for (uint32_t i = lo; i <= hi; i++) {
        const char *b = c->text + t[i].off;
        if (i != lo && (t[i].len < pos || memcmp(b, spelled, pos))) break;
        if (t[i].len == pos) continue;
        if ((unsigned char)b[pos] == ch) return i;
        if ((unsigned char)b[pos] > ch) break;
    }
    return NONE;
}

/* The candidate in [lo, hi] that is exactly the pos bytes spelled (lo spells them), NONE if none. */
static uint32_t exact_candidate(const vkv_json_constraint *c, const span *t, uint32_t lo, uint32_t hi, uint32_t pos,
                                uint32_t budget)
{
    if (t == c->lits) return t[lo].len == pos ? lo : NONE; /* sorted: the shortest comes first */
    const char *spelled = c->text + t[lo].off;
    for (uint32_t i = lo; i <= hi; i++)
        if (t[i].len == pos && (i == lo || !memcmp(c->text + t[i].off, spelled, pos)) &&
            (budget == NONE || c->nodes[c->props[i].node].need <= budget))
            return i;
    return NONE;
}

/* The value in t is complete: the reading goes on in its container, after
 * the value (F_DONE after the top-level value). */
static frame container_after(const vkv_json_matcher *m, const frame *t)
{
    if (t->parent == NONE) return (frame){.kind = F_DONE, .parent = NONE};
    frame p = m->pool[t->parent];
    p.ws = 0;
    if (p.kind == F_OBJECT) {
        p.st = O_AFTER_VALUE;
    } else {
        p.st = A_AFTER_ITEM;
        if (p.at < NONE - 1) p.at++;
    }
    return p;
}

static void emit_after(stepper *s, const frame *t)
{
    frame after = container_after(s->m, t);
    emit(s, &after);
}

/* A key is complete: its object waits for ':' and a value of node `value`.
 * next: the declared property after the key's (NONE: an extra key). */
static void key_done(stepper *s, const frame *key, uint32_t next, uint32_t value)
{
    frame o = s->m->pool[key->parent];
    o.st = O_COLON;
    o.ws = 0;
    o.pos = value;
    if (next != NONE) o.at = next;
    emit(s, &o);
}

/* t->ws once a gap's white space is a single space: nothing more. */
#define WS_SHUT 255u

/* White space in a gap between tokens: one space, or a newline and then up
 * to VKV_JSON_CONSTRAINT_MAX_WS spaces or tabs of indentation (compact and
 * pretty-printed JSON both fit), so a model cannot pad a document with runs
 * of blank lines. t->ws counts the gap's bytes. */
static void space(stepper *s, frame *t, unsigned ch)
{
    if (t->ws == 0 && ch == ' ') t->ws = WS_SHUT;
    else if (t->ws == 0 && ch == '\n') t->ws = 1;
    else if (t->ws != 0 && t->ws <= VKV_JSON_CONSTRAINT_MAX_WS && (ch == ' ' || ch == '\t')) t->ws++;
    else return;
    emit(s, t);
}

/* t, an object or array, waits for a value of node `value` in a frame above it. */
static void push_value(stepper *s, const frame *t, uint32_t value)
{
    uint32_t p = push(s->m, t);
    if (p == NONE) return;
    frame v = {.kind = F_VALUE, .node = value, .parent = p, .depth = (uint16_t)(t->depth + 1)};
    emit(s, &v);
}

/* True when the literal (a number) ended before ch: t is then its
 * container, which takes ch. */
static bool step_literal(stepper *s, frame *t, unsigned ch)
{
    const vkv_json_constraint *c = s->c;
    bool key = t->flags & FL_KEY;
    const span *table = key ? c->keys : c->lits;
    uint32_t budget = key ? MAX_NEST - t->depth : NONE;
    uint32_t i = next_candidate(c, table, t->at, t->node, t->pos, ch, budget);
    if (i != NONE) {
        t->at = i;
        t->pos++;
        /* strings and true, false, null end at their last byte; numbers at the byte after */
        uint32_t done = number_start(c, table[i]) ? NONE : exact_candidate(c, table, i, t->node, t->pos, budget);
        if (done == NONE) emit(s, t);
        else if (key) key_done(s, t, done - c->nodes[s->m->pool[t->parent].node].prop + 1, c->props[done].node);
        else emit_after(s, t);
        return false;
    }
    if (key || !number_start(c, table[t->at]) || exact_candidate(c, table, t->at, t->node, t->pos, NONE) == NONE)
        return false;
    *t = container_after(s->m, t);
    return true;
}

/* ---- numbers within bounds ---- */

/* A number of a node with bounds, so far: its significant digits D (n of
 * them; none while it is 0 so far), its magnitude so far 0.D x 10^q, how D
 * compares with the first n digits of the bounds on its side, and the
 * exponent's digits so far (e). Kept in its frame: code (cl, cu, the
 * signs), hex (n), utf8 (q), pos (e).
 *
 * A completion is some digits more, maybe a fraction, maybe an exponent:
 * the magnitudes it reaches at a decimal exponent q' (0.D' x 10^q') are D
 * with any digits after it, as many as the bytes left allow. Those are all
 * within the bounds at a q' strictly between the bounds' exponents; at a
 * bound's own exponent, the digits decide: D followed by zeros against the
 * upper bound, D followed by nines (as many as fit) against the lower one,
 * and, when both bounds share that exponent and D is both their first
 * digits, whether enough digits fit to land between them (side.grid). The
 * exponents a completion reaches form one range, found from the bytes left;
 * once in the exponent, D is final and only the exponent's digits vary. */
enum { C_EQ, C_LT, C_GT }; /* D against a bound's first digits: equal, below, above */
#define E_CAP 100000000 /* exponents saturate there, far past any bound's (and below Q_INF) */

typedef struct num {
    int n, q;
    unsigned cl, cu; /* against the side's lo and hi */
    bool neg, eneg;
    int64_t e;
} num;

static num num_of(const frame *t)
{
    return (num){.n = t->hex, .q = t->utf8 < 128 ? t->utf8 : t->utf8 - 256, .cl = t->code & 3u,
                 .cu = t->code >> 2 & 3u, .neg = t->code >> 4 & 1u, .eneg = t->code >> 5 & 1u, .e = t->pos};
}

static void num_keep(frame *t, const num *s)
{
    t->hex = (uint8_t)s->n;
    t->utf8 = (uint8_t)s->q;
    t->code = (uint16_t)(s->cl | s->cu << 2 | (unsigned)s->neg << 4 | (unsigned)s->eneg << 5);
    t->pos = (uint32_t)s->e;
}

static const num_bounds *bounds_of(const vkv_json_constraint *c, uint32_t ni)
{
    uint32_t b = c->nodes[ni].bounds;
    return b ? &c->bounds[b - 1] : NULL;
}

/* 10^k - 1, saturating at E_CAP. */
static int64_t nines(int k)
{
    static const int64_t n[] = {0, 9, 99, 999, 9999, 99999, 999999, 9999999, 99999999};
    return k < (int)(sizeof n / sizeof *n) ? n[k] : E_CAP;
}

/* The largest exponent b bytes spell upward ('e' and digits) and downward ('e', '-' and digits). */
static int64_t exp_up(int b) { return b >= 2 ? nines(b - 1) : 0; }
static int64_t exp_down(int b) { return b >= 3 ? nines(b - 2) : 0; }

/* The bytes of the shortest exponent that moves a number by delta (none for 0). */
static int exp_bytes(int64_t delta)
{
    if (!delta) return 0;
    int b = delta < 0 ? 2 : 1;
    for (int64_t a = delta < 0 ? -delta : delta; a; a /= 10) b++;
    return b;
}

/* D against bound g once digit d is D's (n + 1)-th, from c, D's first n against g's. */
static unsigned digit_cmp(unsigned c, const mag *g, unsigned n, unsigned d)
{
    if (c != C_EQ || g->kind != MAG_POS) return c;
    return d < g->d[n + 1] ? C_LT : d > g->d[n + 1] ? C_GT : C_EQ;
}

/* The least completion of D at exponent q (D and zeros; without D, 1 and zeros) is within hi. */
static bool hi_ok(const side *sd, const num *s, int64_t q)
{
    const mag *u = &sd->hi;
    if (u->kind != MAG_POS) return u->kind == MAG_NONE;
    if (q != u->q) return q < u->q;
    if (!s->n) return !u->strict || u->d[1] > 1 || u->rest[1];
    return s->cu == C_LT || (s->cu == C_EQ && (!u->strict || u->rest[s->n]));
}

/* Whether lo_ok at exponent q turns on how many digits completions have. */
static bool lo_tight(const side *sd, const num *s, int64_t q)
{
    return sd->lo.kind == MAG_POS && q == sd->lo.q && s->cl == C_EQ;
}

/* The greatest completion of D at exponent q with N significant digits (D
 * and nines) is within lo; where D is the first digits of both bounds at
 * their one exponent, N digits are enough to land between them. */
static bool lo_ok(const side *sd, const num *s, int64_t q, int N)
{
    const mag *l = &sd->lo;
    if (!lo_tight(sd, s, q)) return l->kind != MAG_POS || q > l->q || (q == l->q && s->cl == C_GT);
    if (N < s->n || N < 1) return false;
    bool both = sd->hi.kind == MAG_POS && q == sd->hi.q && s->cu == C_EQ;
    return (l->non9[s->n] <= N || (!l->rest[N] && !l->strict)) && (!both || N >= sd->grid);
}

/* D itself at exponent q is within the bounds. */
static bool exact_ok(const side *sd, const num *s, int64_t q) { return hi_ok(sd, s, q) && lo_ok(sd, s, q, s->n); }

/* The most significant digits of a completion at exponent q from a point
 * with exponent q0, N0 digits and b bytes left: inside the fraction with
 * at least frac more digits (frac >= 0), or where a fraction may start
 * ('.' and digits; frac < 0); an integer has neither fraction nor
 * exponent. -1: none reaches q. */
static int base_digits(int64_t q0, int N0, int b, int frac, bool integer, int64_t q)
{
    if (integer) return q == q0 && N0 ? N0 : -1;
    int rem = b - exp_bytes(q - q0);
    if (rem < 0 || rem < frac) return -1;
    int N = N0 + (frac >= 0 ? rem : rem >= 2 ? rem - 1 : 0);
    return N >= 1 ? N : -1;
}

/* The same after "0." and z zeros, r bytes left: more zeros, then a digit that is not. */
static int zeros_digits(int z, int r, int64_t q)
{
    int best = -1;
    for (int more = 0; more < r; more++) {
        int N = base_digits(-(int64_t)(z + more), 0, r - more, 1, false, q);
        best = N > best ? N : best;
    }
    return best;
}

/* The most significant digits of a completion of t at exponent q (-1: none). */
static int best_digits(const frame *t, const num *s, bool integer, int64_t q)
{
    int r = VKV_JSON_CONSTRAINT_MAX_NUMBER - (int)t->at, best = -1, N;
    switch (t->st) {
    case NUM_INT:
        for (int k = 0; k <= r; k++)
            if ((N = base_digits(s->q + k, s->n + k, r - k, -1, integer, q)) > best) best = N;
        return best;
    case NUM_MINUS:
        for (int k = 1; k <= r; k++)
            if ((N = base_digits(k, k, r - k, -1, integer, q)) > best) best = N;
        return integer || (N = zeros_digits(0, r - 2, q)) < best ? best : N;
    case NUM_ZERO: return integer ? -1 : zeros_digits(0, r - 1, q);
    default: return s->n ? base_digits(s->q, s->n, r, t->st == NUM_DOT, false, q) : zeros_digits(-s->q, r, q);
    }
}

/* The exponents [lo, hi] of "0." and z zeros' completions that are not 0, r bytes left. */
static bool zeros_reach(int z, int r, int64_t *lo, int64_t *hi)
{
    if (r < 1) return false;
    int64_t down = exp_down(r - 1);
    *lo = -(int64_t)z - (down > r - 1 ? down : r - 1);
    *hi = -(int64_t)z + exp_up(r - 1);
    return true;
}

/* The exponents [lo, hi] that t's completions other than 0 reach, each of
 * them by some completion; false: none. */
static bool reach(const frame *t, const num *s, bool integer, int64_t *lo, int64_t *hi)
{
    int r = VKV_JSON_CONSTRAINT_MAX_NUMBER - (int)t->at;
    int64_t up;
    switch (t->st) {
    case NUM_INT:
        up = integer ? r : exp_up(r) > r ? exp_up(r) : r;
        *lo = s->q - (integer ? 0 : exp_down(r));
        *hi = s->q + up;
        return true;
    case NUM_MINUS: {
        if (r < 1) return false;
        up = integer ? r - 1 : exp_up(r - 1) > r - 1 ? exp_up(r - 1) : r - 1;
        *lo = 1 - (integer ? 0 : exp_down(r - 1));
        *hi = 1 + up;
        int64_t a, b; /* "0." and more */
        if (!integer && zeros_reach(0, r - 2, &a, &b)) *lo = a < *lo ? a : *lo;
        return true;
    }
    case NUM_ZERO: return !integer && zeros_reach(0, r - 1, lo, hi);
    default:
        if (!s->n) return zeros_reach(-s->q, r, lo, hi);
        r -= t->st == NUM_DOT;
        *lo = s->q - exp_down(r);
        *hi = s->q + exp_up(r);
        return r >= 0;
    }
}

/* Some completion of t at exponent q (within [lo, hi], which t reaches) is within the bounds. */
static bool reach_ok(const side *sd, const frame *t, const num *s, bool integer, int64_t q, int64_t lo, int64_t hi)
{
    if (q < lo || q > hi || !hi_ok(sd, s, q)) return false;
    return lo_ok(sd, s, q, lo_tight(sd, s, q) ? best_digits(t, s, integer, q) : 0);
}

/* Some exponent made of e0's digits and j more (jmin <= j <= jmax) moves
 * exponent q into [a, b], upward or (neg) downward. */
static bool exp_reach(int64_t e0, int jmin, int jmax, int64_t q, int64_t a, int64_t b, bool neg)
{
    int64_t lo = neg ? q - b : a - q, hi = neg ? q - a : b - q;
    if (lo < 0) lo = 0;
    if (lo > hi) return false;
    int64_t first = e0, width = 1; /* with j more digits: [first, first + width) */
    for (int j = 0; j <= jmax && first <= hi; j++) {
        if (j >= jmin && first + width > lo) return true;
        first = first < E_CAP / 10 ? first * 10 : E_CAP;
        width = width < E_CAP / 10 ? width * 10 : E_CAP;
    }
    return false;
}

/* Some completion of t, a number of bounds b, is within them. */
static bool num_feasible(const side *sd, const frame *t, const num *s, bool integer)
{
    if (!s->n && sd->zero) return true; /* 0 */
    int64_t lq = sd->lq, uq = sd->uq;
    if (uq == -Q_INF) return false; /* 0 at most */
    int r = VKV_JSON_CONSTRAINT_MAX_NUMBER - (int)t->at;
    if (t->st >= NUM_EXP_MARK) {
        if (!s->n) return false;
        /* D is final: the exponents [a, b] that put it within the bounds */
        int64_t a = lq + (sd->lo.kind == MAG_POS && !exact_ok(sd, s, lq));
        int64_t b = uq - (sd->hi.kind == MAG_POS && !exact_ok(sd, s, uq));
        if (t->st == NUM_EXP_MARK) /* 'e' and digits, or 'e', '-' and digits */
            return exp_reach(0, 1, r, s->q, a, b, false) || exp_reach(0, 1, r - 1, s->q, a, b, true);
        return exp_reach(s->e, t->st == NUM_EXPONENT ? 0 : 1, r, s->q, a, b, s->eneg);
    }
    int64_t lo, hi;
    if (!reach(t, s, integer, &lo, &hi)) return false;
    if ((lo > lq + 1 ? lo : lq + 1) <= (hi < uq - 1 ? hi : uq - 1)) return true;
    return reach_ok(sd, t, s, integer, uq, lo, hi) || (lq != uq && reach_ok(sd, t, s, integer, lq, lo, hi));
}

/* t, a number of bounds b, took ch (prev: its state before); false when
 * no completion of it is within them any more. */
static bool num_step(const num_bounds *b, frame *t, unsigned prev, unsigned ch, bool integer)
{
    unsigned st = t->st, n = t->hex;
    if ((st == NUM_INT || (st == NUM_FRACTION && (n || ch != '0'))) && is_digit(ch)) {
        /* the common step, a significant digit more: done here when the
         * exponents the number reaches go strictly between the bounds' */
        const side *sd = &b->s[t->code >> 4 & 1u];
        int r = VKV_JSON_CONSTRAINT_MAX_NUMBER - (int)t->at;
        int q = (t->utf8 < 128 ? t->utf8 : t->utf8 - 256) + (prev == NUM_INT || prev == NUM_MINUS);
        int64_t lo = q - (integer ? 0 : exp_down(r)), hi = q + (integer || r < 2 ? r : exp_up(r));
        if (st == NUM_FRACTION) hi = q + exp_up(r);
        if ((lo > sd->lq ? lo : sd->lq + 1) <= (hi < sd->uq ? hi : sd->uq - 1)) {
            unsigned cl = digit_cmp(t->code & 3u, &sd->lo, n, ch - '0');
            unsigned cu = digit_cmp(t->code >> 2 & 3u, &sd->hi, n, ch - '0');
            t->hex = (uint8_t)(n + 1);
            t->utf8 = (uint8_t)q;
            t->code = (uint16_t)((t->code & ~15u) | cl | cu << 2);
            return true;
        }
    }
    num s = num_of(t);
    if (ch == '-') {
        if (prev >= NUM_EXP_MARK) s.eneg = true;
        else s.neg = true;
    } else if (is_digit(ch)) {
        const side *sd = &b->s[s.neg];
        unsigned d = ch - '0';
        /* a significant digit, or a zero before the first */
        bool digit = prev == NUM_INT || (prev == NUM_MINUS && d) ||
                     ((prev == NUM_DOT || prev == NUM_FRACTION) && (s.n || d));
        if (digit) {
            s.cl = digit_cmp(s.cl, &sd->lo, (unsigned)s.n, d);
            s.cu = digit_cmp(s.cu, &sd->hi, (unsigned)s.n, d);
            s.n++;
            s.q += prev == NUM_INT || prev == NUM_MINUS;
        } else if (prev >= NUM_EXP_MARK) {
            s.e = s.e < E_CAP / 10 ? s.e * 10 + d : E_CAP;
        } else if (prev != NUM_MINUS) {
            s.q--; /* a zero before the fraction's first significant digit */
        }
    }
    if (!num_feasible(&b->s[s.neg], t, &s, integer)) return false;
    num_keep(t, &s);
    return true;
}

/* A number t may end here: unbounded, or its value is within the bounds. */
static bool num_ends(const vkv_json_constraint *c, const frame *t)
{
    if (!(t->flags & FL_BOUNDS)) return true;
    const num_bounds *b = bounds_of(c, t->node);
    num s = num_of(t);
    const side *sd = &b->s[s.neg];
    if (!s.n) return sd->zero;
    return exact_ok(sd, &s, s.q + (t->st != NUM_EXPONENT ? 0 : s.eneg ? -s.e : s.e));
}

static bool bounds_hold_a_number(const num_bounds *b, bool integer)
{
    for (const char *p = "-0123456789"; *p; p++) {
        frame v = {.kind = F_NUMBER, .at = 1, .st = *p == '-' ? NUM_MINUS : *p == '0' ? NUM_ZERO : NUM_INT};
        if (num_step(b, &v, NUM_MINUS, (unsigned char)*p, integer)) return true;
    }
    return false;
}

/* t, a VALUE frame, starts a value of node ni (not an anyOf) with ch. */
static void start_node(stepper *s, const frame *t, uint32_t ni, unsigned ch)
{
    const node *n = &s->c->nodes[ni];
    uint32_t budget = MAX_NEST - t->depth;
    frame v = {.node = ni, .parent = t->parent, .depth = t->depth};
    if (n->kind == N_LITERALS) {
        v.kind = F_LITERAL;
        v.at = n->first;
        v.node = n->first + n->n - 1;
        step_literal(s, &v, ch);
        return;
    }
    if (ch == '{') {
        if (!(n->types & T_OBJECT) || n->need_object > budget) return;
        v.kind = F_OBJECT;
        v.st = O_KEY_OR_END;
    } else if (ch == '[') {
        if (!(n->types & T_ARRAY) || n->need_array > budget) return;
        v.kind = F_ARRAY;
        v.st = A_ITEM_OR_END;
    } else if (ch == '"') {
        if (!(n->types & T_STRING)) return;
        v.kind = F_STRING;
        v.st = S_CHARS;
        v.at = NONE;
    } else if (ch == 't' || ch == 'f' || ch == 'n') {
        if (!(n->types & (ch == 'n' ? T_NULL : T_BOOLEAN))) return;
        v.kind = F_LITERAL;
        v.at = ch == 'n' ? LIT_NULL : LIT_FALSE;
        v.node = ch == 'n' ? LIT_NULL : LIT_TRUE;
        step_literal(s, &v, ch);
        return;
    } else if (ch == '-' || is_digit(ch)) {
        if (!(n->types & (T_INTEGER | T_NUMBER))) return;
        v.kind = F_NUMBER;
        v.flags = n->types & T_NUMBER ? 0 : FL_INTEGER;
        v.st = ch == '-' ? NUM_MINUS : ch == '0' ? NUM_ZERO : NUM_INT;
        v.at = 1;
        const num_bounds *b = bounds_of(s->c, ni);
        if (b) v.flags |= FL_BOUNDS;
        if (b && !num_step(b, &v, NUM_MINUS, ch, v.flags & FL_INTEGER)) return;
    } else {
        return;
    }
    emit(s, &v);
}

static void start_value(stepper *s, const frame *t, unsigned ch)
{
    const node *n = &s->c->nodes[t->node];
    if (n->kind != N_ANYOF) {
        start_node(s, t, t->node, ch);
        return;
    }
    for (uint32_t i = 0; i < n->n; i++) start_node(s, t, s->c->alts[n->first + i], ch);
}

/* Whether object t can take a key next: a declared one up to the next
 * required one, or an extra one, whose value fits. */
static bool key_possible(const vkv_json_constraint *c, const frame *t)
{
    const node *n = &c->nodes[t->node];
    uint32_t budget = MAX_NEST - (t->depth + 1u);
    if (n->extra != NONE && t->at >= n->req_end && c->nodes[n->extra].need <= budget) return true;
    for (uint32_t p = n->prop + t->at; p < n->prop + n->n_props; p++) {
        if (c->nodes[c->props[p].node].need <= budget) return true;
        if (c->props[p].required) break;
    }
    return false;
}

/* '"' opens a key of object t: a declared one (a literal among its keys) or an extra one (a string). */
static void start_key(stepper *s, const frame *t)
{
    const vkv_json_constraint *c = s->c;
    const node *n = &c->nodes[t->node];
    uint16_t depth = (uint16_t)(t->depth + 1);
    uint32_t budget = MAX_NEST - depth;
    bool extra = n->extra != NONE && t->at >= n->req_end && c->nodes[n->extra].need <= budget;
    uint32_t lo = n->prop + t->at, hi = lo, first = NONE;
    if (t->at < n->n_props) {
        while (hi + 1 < n->prop + n->n_props && !c->props[hi].required) hi++;
        first = next_candidate(c, c->keys, lo, hi, 0, '"', budget);
    }
    if (first == NONE && !extra) return;
    uint32_t p = push(s->m, t);
    if (p == NONE) return;
    if (first != NONE) {
        frame key = {.kind = F_LITERAL, .flags = FL_KEY, .node = hi, .at = first, .pos = 1, .parent = p, .depth = depth};
        emit(s, &key);
    }
    if (extra) {
        /* beside declared keys, it must not spell one: which one it still spells is followed */
        frame key = {.kind = F_STRING, .st = S_CHARS, .flags = FL_KEY, .at = NONE, .parent = p, .depth = depth};
        if (n->n_props) {
            key.flags |= FL_NO_ESCAPE;
            key.at = n->prop;
            key.node = n->prop + n->n_props - 1;
            key.pos = 1;
        }
        emit(s, &key);
    }
}

static void step_object(stepper *s, frame t, unsigned ch)
{
    const node *n = &s->c->nodes[t.node];
    if (is_space(ch)) {
        space(s, &t, ch);
        return;
    }
    t.ws = 0;
    if (ch == '}' && (t.st == O_KEY_OR_END || t.st == O_AFTER_VALUE)) {
        if (t.at >= n->req_end) emit_after(s, &t);
    } else if (ch == '"' && (t.st == O_KEY_OR_END || t.st == O_KEY)) {
        start_key(s, &t);
    } else if (ch == ',' && t.st == O_AFTER_VALUE) {
        if (!key_possible(s->c, &t)) return;
        t.st = O_KEY;
        emit(s, &t);
    } else if (ch == ':' && t.st == O_COLON) {
        t.st = O_VALUE;
        push_value(s, &t, t.pos);
    }
}

/* True when t became the VALUE frame of an item, which takes ch. */
static bool step_array(stepper *s, frame *t, unsigned ch)
{
    const node *n = &s->c->nodes[t->node];
    if (is_space(ch)) {
        space(s, t, ch);
        return false;
    }
    t->ws = 0;
    if (ch == ']') {
        if (t->at >= n->min_items) emit_after(s, t);
        return false;
    }
    if (t->st == A_AFTER_ITEM) {
        if (ch == ',' && t->at < n->max_items) {
            t->st = A_ITEM;
            push_value(s, t, n->items);
        }
        return false;
    }
    if (n->max_items == 0) return false;
    t->st = A_ITEM;
    uint32_t p = push(s->m, t);
    if (p == NONE) return false;
    *t = (frame){.kind = F_VALUE, .node = n->items, .parent = p, .depth = (uint16_t)(t->depth + 1)};
    return true;
}

static void step_string(stepper *s, frame t, unsigned ch)
{
    const vkv_json_constraint *c = s->c;
    /* an extra key beside declared ones: the first declared key it still spells */
    uint32_t spelled = t.at == NONE ? NONE : next_candidate(c, c->keys, t.at, t.node, t.pos, ch, NONE);
    switch (t.st) {
    case S_CHARS:
        if (t.utf8 == U_NONE && ch == '"') {
            if (!(t.flags & FL_KEY)) emit_after(s, &t);
            else if (spelled == NONE || exact_candidate(c, c->keys, spelled, t.node, t.pos + 1, NONE) == NONE)
                key_done(s, &t, NONE, c->nodes[s->m->pool[t.parent].node].extra);
            return;
        }
        if (t.utf8 == U_NONE && ch == '\\') {
            if (t.flags & FL_NO_ESCAPE) return;
            t.st = S_ESCAPE;
        } else {
            unsigned u = plain_next(t.utf8, ch);
            if (u == U_FAIL) return;
            t.utf8 = (uint8_t)u;
        }
        break;
    case S_ESCAPE:
        if (ch == 'u') t.st = S_HEX;
        else if (ch && strchr("\"\\/bfnrt", (int)ch)) t.st = S_CHARS;
        else return;
        break;
    case S_HEX: {
        int h = hex_digit(ch);
        if (h < 0) return;
        t.code = (uint16_t)(t.code << 4 | (unsigned)h);
        t.hex++;
        /* surrogates in pairs only: a low one right after a high one, nowhere else */
        bool low = t.flags & FL_LOW;
        if (t.hex == 1 && low && t.code != 0xd) return;
        if (t.hex == 2 && low != (t.code >= 0xdc && t.code <= 0xdf)) return;
        if (t.hex == 4) {
            t.st = !low && t.code >= 0xd800 && t.code <= 0xdbff ? S_LOW_BACKSLASH : S_CHARS;
            t.flags &= (uint8_t)~FL_LOW;
            t.code = 0;
            t.hex = 0;
        }
        break;
    }
    case S_LOW_BACKSLASH:
        if (ch != '\\') return;
        t.st = S_LOW_U;
        break;
    case S_LOW_U:
        if (ch != 'u') return;
        t.st = S_HEX;
        t.flags |= FL_LOW;
        break;
    }
    if (t.at != NONE) {
        t.at = spelled;
        t.pos = spelled == NONE ? 0 : t.pos + 1;
        if (spelled == NONE) t.node = 0;
    }
    emit(s, &t);
}

static bool accepting(unsigned st)
{
    return st == NUM_ZERO || st == NUM_INT || st == NUM_FRACTION || st == NUM_EXPONENT;
}

/* True when the number ended before ch: t is then its container, which takes ch. */
static bool step_number(stepper *s, frame *t, unsigned ch)
{
    bool integer = t->flags & FL_INTEGER;
    unsigned st = t->st, next = NUM_FAIL;
    if (is_digit(ch)) {
        if (st == NUM_MINUS) next = ch == '0' ? NUM_ZERO : NUM_INT;
        else if (st == NUM_INT) next = NUM_INT;
        else if (st == NUM_DOT || st == NUM_FRACTION) next = NUM_FRACTION;
        else if (st >= NUM_EXP_MARK) next = NUM_EXPONENT;
    } else if (ch == '.') {
        if (!integer && (st == NUM_ZERO || st == NUM_INT)) next = NUM_DOT;
    } else if (ch == 'e' || ch == 'E') {
        if (!integer && (st == NUM_ZERO || st == NUM_INT || st == NUM_FRACTION)) next = NUM_EXP_MARK;
    } else if (ch == '+' || ch == '-') {
        if (st == NUM_EXP_MARK) next = NUM_EXP_SIGN;
    }
    if (next != NUM_FAIL) {
        /* within the length, with room for the digit that must follow */
        if (t->at + (accepting(next) ? 1u : 2u) <= VKV_JSON_CONSTRAINT_MAX_NUMBER) {
            t->at++;
            t->st = (uint8_t)next;
            if (!(t->flags & FL_BOUNDS) || num_step(bounds_of(s->c, t->node), t, st, ch, integer)) emit(s, t);
        }
        return false;
    }
    if (!accepting(st) || !num_ends(s->c, t)) return false;
    *t = container_after(s->m, t);
    return true;
}

static void step(stepper *s, frame t, unsigned ch)
{
    for (;;) {
        switch ((frame_kind)t.kind) {
        case F_VALUE:
            /* the document starts with its value, no white space before it */
            if (is_space(ch)) {
                if (t.parent != NONE) space(s, &t, ch);
            } else start_value(s, &t, ch);
            return;
        case F_OBJECT: step_object(s, t, ch); return;
        case F_ARRAY:
            if (step_array(s, &t, ch)) continue;
            return;
        case F_STRING: step_string(s, t, ch); return;
        case F_NUMBER:
            if (step_number(s, &t, ch)) continue;
            return;
        case F_LITERAL:
            if (step_literal(s, &t, ch)) continue;
            return;
        case F_DONE: return;
        }
        return;
    }
}

static uint32_t step_all(vkv_json_matcher *m, const frame *in, uint32_t n, unsigned ch, frame *out)
{
    stepper s = {m, m->c, out, 0};
    for (uint32_t i = 0; i < n; i++) step(&s, in[i], ch);
    return s.n;
}

vkv_json_matcher *vkv_json_matcher_new(const vkv_json_constraint *c)
{
    vkv_json_matcher *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->c = c;
    m->top[0] = (frame){.kind = F_VALUE, .node = c->root, .parent = NONE};
    m->n_top = 1;
    return m;
}

vkv_json_matcher *vkv_json_matcher_clone(const vkv_json_matcher *m)
{
    vkv_json_matcher *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->c = m->c;
    memcpy(k->top, m->top, m->n_top * sizeof *k->top);
    k->n_top = m->n_top;
    if (m->pool_n && !grow(&k->pool, &k->pool_cap, m->pool_n, sizeof *k->pool)) {
        free(k);
        return NULL;
    }
    if (m->pool_n) memcpy(k->pool, m->pool, m->pool_n * sizeof *k->pool);
    k->pool_n = m->pool_n;
    return k;
}

void vkv_json_matcher_free(vkv_json_matcher *m)
{
    if (!m) return;
    free(m->pool);
    free(m->spare);
    free(m->remap);
    free(m->walk);
    free(m->levels);
    free(m);
}

/* Drops the frames no reading reaches any more (popped ones); shared ones stay shared. */
static void compact(vkv_json_matcher *m)
{
    if (!grow(&m->remap, &m->remap_cap, m->pool_n + 1, sizeof *m->remap) ||
        !grow(&m->spare, &m->spare_cap, m->pool_n + 1, sizeof *m->spare))
        return; /* out of memory: they stay */
    for (uint32_t i = 0; i < m->pool_n; i++) m->remap[i] = NONE;
    uint32_t n = 0;
    for (uint32_t t = 0; t < m->n_top; t++)
        for (uint32_t i = m->top[t].parent; i != NONE && m->remap[i] == NONE; i = m->pool[i].parent) m->remap[i] = n++;
    for (uint32_t i = 0; i < m->pool_n; i++) {
        if (m->remap[i] == NONE) continue;
        frame f = m->pool[i];
        if (f.parent != NONE) f.parent = m->remap[f.parent];
        m->spare[m->remap[i]] = f;
    }
    for (uint32_t t = 0; t < m->n_top; t++)
        if (m->top[t].parent != NONE) m->top[t].parent = m->remap[m->top[t].parent];
    frame *p = m->pool;
    uint32_t cap = m->pool_cap;
    m->pool = m->spare;
    m->pool_cap = m->spare_cap;
    m->spare = p;
    m->spare_cap = cap;
    m->pool_n = n;
}

bool vkv_json_matcher_advance(vkv_json_matcher *m, const char *bytes, size_t n)
{
    frame saved[MAX_BRANCHES];
    uint32_t n_saved = m->n_top, pool_saved = m->pool_n;
    memcpy(saved, m->top, n_saved * sizeof *saved);
    for (size_t i = 0; i < n; i++) {
        uint32_t n_next = step_all(m, m->top, m->n_top, (unsigned char)bytes[i], m->next);
        if (!n_next || m->oom) {
            memcpy(m->top, saved, n_saved * sizeof *saved);
            m->n_top = n_saved;
            m->pool_n = pool_saved;
            m->oom = false;
            return false;
        }
        memcpy(m->top, m->next, n_next * sizeof *m->top);
        m->n_top = n_next;
    }
    compact(m);
    return true;
}

bool vkv_json_matcher_complete(const vkv_json_matcher *m)
{
    const vkv_json_constraint *c = m->c;
    for (uint32_t i = 0; i < m->n_top; i++) {
        const frame *t = &m->top[i];
        if (t->kind == F_DONE) return true;
        if (t->parent != NONE) continue;
        /* a top-level number may end here, or go on */
        if (t->kind == F_NUMBER && accepting(t->st) && num_ends(c, t)) return true;
        if (t->kind == F_LITERAL && exact_candidate(c, c->lits, t->at, t->node, t->pos, NONE) != NONE) return true;
    }
    return false;
}

/* ---- token masks ---- */

typedef struct trie_node {
    uint32_t end;   /* past this node's subtree (nodes are in depth-first order) */
    uint32_t first; /* the subtree's tokens are ids[first, last), those ending here first */
    uint32_t last;
    uint16_t depth; /* this node's byte is its tokens' depth-th */
    uint8_t byte;
    /* bit u: inside a string in UTF-8 state u, every token through this node
     * reads as characters from its byte on */
    uint8_t plain;
} trie_node;

struct vkv_json_vocab {
    trie_node *nodes;
    uint32_t n_nodes;
    uint32_t *ids; /* token ids sorted by their bytes */
    size_t n_vocab;
    uint32_t max_len;
};

typedef struct sorted_token {
    const unsigned char *p;
    uint32_t n, id;
} sorted_token;

static int by_bytes(const void *a, const void *b)
{
    const sorted_token *x = a, *y = b;
    int d = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    if (d) return d;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void vkv_json_vocab_free(vkv_json_vocab *v)
{
    if (!v) return;
    free(v->nodes);
    free(v->ids);
    free(v);
}

vkv_json_vocab *vkv_json_vocab_new(const vkv_token_bytes *tokens, size_t n_vocab)
{
    if (n_vocab >= NONE) return NULL;
    vkv_json_vocab *v = calloc(1, sizeof *v);
    sorted_token *sorted = malloc((n_vocab + 1) * sizeof *sorted);
    uint32_t *open = NULL; /* the nodes on the path to the last token, by depth */
    if (!v || !sorted) goto fail;
    v->n_vocab = n_vocab;
    uint32_t n = 0;
    for (size_t i = 0; i < n_vocab; i++) {
        const vkv_token_bytes *t = &tokens[i];
        if (t->special || !t->n || !t->p || t->n > UINT16_MAX) continue; /* never allowed */
        sorted[n++] = (sorted_token){(const unsigned char *)t->p, (uint32_t)t->n, (uint32_t)i};
        if (t->n > v->max_len) v->max_len = (uint32_t)t->n;
    }
    qsort(sorted, n, sizeof *sorted, by_bytes);
    v->ids = malloc((n + 1) * sizeof *v->ids);
    open = malloc((v->max_len + 1) * sizeof *open);
    if (!v->ids || !open) goto fail;
    uint32_t cap = 0, depth = 0;
    for (uint32_t k = 0; k < n; k++) {
        const sorted_token *t = &sorted[k];
        v->ids[k] = t->id;
        uint32_t common = 0;
        if (k)
            while (common < sorted[k - 1].n && common < t->n && sorted[k - 1].p[common] == t->p[common]) common++;
        for (; depth > common; depth--) {
            v->nodes[open[depth]].end = v->n_nodes;
            v->nodes[open[depth]].last = k;
        }
        while (depth < t->n) {
            if (v->n_nodes >= NONE - 1 || !grow(&v->nodes, &cap, v->n_nodes + 1, sizeof *v->nodes)) goto fail;
            depth++;
            v->nodes[v->n_nodes] = (trie_node){.first = k, .depth = (uint16_t)depth, .byte = t->p[depth - 1]};
            open[depth] = v->n_nodes++;
        }
    }
    for (; depth > 0; depth--) {
        v->nodes[open[depth]].end = v->n_nodes;
        v->nodes[open[depth]].last = n;
    }
    /* children before parents */
    for (uint32_t i = v->n_nodes; i-- > 0;) {
        trie_node *t = &v->nodes[i];
        unsigned below = 0xff; /* the states every child reads as characters from */
        for (uint32_t j = i + 1; j < t->end; j = v->nodes[j].end) below &= v->nodes[j].plain;
        unsigned plain = 0;
        for (unsigned u = 0; u < N_UTF8; u++) {
            unsigned next = plain_next(u, t->byte);
            if (next != U_FAIL && (below >> next & 1)) plain |= 1u << u;
        }
        t->plain = (uint8_t)plain;
    }
    free(sorted);
    free(open);
    return v;
fail:
    free(sorted);
    free(open);
    vkv_json_vocab_free(v);
    return NULL;
}

/* Some reading is inside a string's characters in a UTF-8 state from which
 * every token through the node reads as characters: all of them continue it. */
static bool reads_as_characters(const frame *in, uint32_t n, unsigned plain)
{
    for (uint32_t i = 0; i < n; i++)
        if (in[i].kind == F_STRING && in[i].st == S_CHARS && in[i].at == NONE && (plain >> in[i].utf8 & 1))
            return true;
    return false;
}

/* Depth first over the trie: a node's readings are its parent's stepped
 * over its byte; a subtree no reading survives is skipped whole. */
bool vkv_json_matcher_allowed(vkv_json_matcher *m, const vkv_json_vocab *v, bool *allowed)
{
    memset(allowed, 0, v->n_vocab * sizeof *allowed);
    if (!grow(&m->levels, &m->levels_cap, v->max_len + 1, sizeof *m->levels) ||
        !grow(&m->walk, &m->walk_cap, MAX_BRANCHES, sizeof *m->walk))
        return false;
    level *lv = m->levels;
    memcpy(m->walk, m->top, m->n_top * sizeof *m->walk);
    lv[0] = (level){0, m->n_top, m->pool_n};
    for (uint32_t i = 0; i < v->n_nodes;) {
        const trie_node *t = &v->nodes[i];
        const level *in = &lv[t->depth - 1];
        m->pool_n = in->pool_n; /* what earlier subtrees pushed is gone */
        if (reads_as_characters(m->walk + in->off, in->n, t->plain)) {
            for (uint32_t k = t->first; k < t->last; k++) allowed[v->ids[k]] = true;
            i = t->end;
            continue;
        }
        uint32_t off = in->off + in->n;
        if (!grow(&m->walk, &m->walk_cap, off + MAX_BRANCHES, sizeof *m->walk)) {
            m->oom = true;
            break;
        }
        uint32_t n = step_all(m, m->walk + in->off, in->n, t->byte, m->walk + off);
        if (m->oom) break;
        if (!n) {
            i = t->end;
            continue;
        }
        lv[t->depth] = (level){off, n, m->pool_n};
        uint32_t ends = i + 1 < t->end ? v->nodes[i + 1].first : t->last;
        for (uint32_t k = t->first; k < ends; k++) allowed[v->ids[k]] = true;
        i++;
    }
    m->pool_n = lv[0].pool_n;
    if (!m->oom) return true;
    m->oom = false;
    memset(allowed, 0, v->n_vocab * sizeof *allowed);
    return false;
}
