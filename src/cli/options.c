/* The option tables' parser and --help printer (cli/options.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"

/* Help text starts at this column, unless every option's left part is
 * shorter; a longer left part puts its help on the next line. */
#define HELP_COLUMN_MAX 24

void cli_model_opts_init(cli_model_opts *mo)
{
    const char *env = getenv("VKVECTOR_MODEL");
    *mo = (cli_model_opts){.model_path = env ? env : VKV_DEFAULT_MODEL, .device = cli_device_index_from_env(),
                           .n_ctx = 0, .n_batch = 512, .kv_type = 0, .k_type = -1, .v_type = -1};
}

vkv_dtype cli_kv_dtype(int kv_type)
{
    static const vkv_dtype types[] = {VKV_F16, VKV_F32, VKV_Q8_0, VKV_Q4_0}; /* CLI_KV_TYPES */
    return kv_type >= 0 && kv_type < 4 ? types[kv_type] : VKV_F16;
}
vkv_dtype cli_k_dtype(const cli_model_opts *mo) { return cli_kv_dtype(mo->k_type >= 0 ? mo->k_type : mo->kv_type); }
vkv_dtype cli_v_dtype(const cli_model_opts *mo) { return cli_kv_dtype(mo->v_type >= 0 ? mo->v_type : mo->kv_type); }

void cli_press_opts_init(cli_press_opts *po)
{
    *po = (cli_press_opts){.press = NULL, .compression_ratio = -1, .vector = false, .pa = -1, .calib = NULL,
                           .aware_flag = false, .agnostic_flag = false, .query_aware = false,
                           .materialized = false, .vector_pool = -1, .press_seed = -1};
}

/* The i-th of the '|'-separated words of list (as a pointer and length);
 * false past the last. */
static bool list_word(const char *list, size_t i, const char **word, size_t *len)
{
    const char *p = list;
    for (; i > 0; i--) {
        p = strchr(p, '|');
        if (!p) return false;
        p++;
    }
    const char *bar = strchr(p, '|');
    *word = p;
    *len = bar ? (size_t)(bar - p) : strlen(p);
    return true;
}

static bool list_has(const char *list, const char *s, size_t len, size_t *index)
{
    const char *w;
    size_t wl;
    for (size_t i = 0; list_word(list, i, &w, &wl); i++)
        if (wl == len && !memcmp(w, s, len)) {
            if (index) *index = i;
            return true;
        }
    return false;
}

/* "a|b|c" -> "a, b or c" */
static void choices_text(const char *choices, char *out, size_t size)
{
    const char *w;
    size_t wl, n = 0, used = 0;
    while (list_word(choices, n, &w, &wl)) n++;
    out[0] = 0;
    for (size_t i = 0; i < n && list_word(choices, i, &w, &wl); i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int k = snprintf(out + used, size - used, "%s%.*s", sep, (int)wl, w);
        if (k < 0 || (size_t)k >= size - used) return;
        used += (size_t)k;
    }
}

/* The integer range of an I64/I32/U64 entry: exclusive ends made inclusive,
 * clamped to the destination type. Signed types use lo and hi, CLI_U64 ulo
 * and uhi; open_top: the top is the type's largest value. */
typedef struct int_range {
    int64_t lo, hi;
    uint64_t ulo, uhi;
    bool open_top;
} int_range;

/* x (a whole number) as an int32_t (i32) or int64_t, saturated. */
static int64_t clamp_to_int(double x, bool i32)
{
    if (i32) return x <= INT32_MIN ? INT32_MIN : x >= INT32_MAX ? INT32_MAX : (int64_t)x;
    return x <= -0x1p63 ? INT64_MIN : x >= 0x1p63 ? INT64_MAX : (int64_t)x;
}

static int_range integer_range(const cli_opt *o)
{
    double lo = ceil(o->min), hi = floor(o->max);
    if ((o->flags & CLI_MIN_EXCLUSIVE) && lo == o->min) lo += 1;
    if ((o->flags & CLI_MAX_EXCLUSIVE) && hi == o->max) hi -= 1;
    int_range r = {0};
    if (o->type == CLI_U64) {
        r.ulo = lo <= 0 ? 0 : lo >= 0x1p64 ? UINT64_MAX : (uint64_t)lo;
        r.uhi = hi <= 0 ? 0 : hi >= 0x1p64 ? UINT64_MAX : (uint64_t)hi;
        r.open_top = r.uhi == UINT64_MAX;
        return r;
    }
    const bool i32 = o->type == CLI_I32;
    r.lo = clamp_to_int(lo, i32);
    r.hi = clamp_to_int(hi, i32);
    r.open_top = r.hi == (i32 ? INT32_MAX : INT64_MAX);
    return r;
}

static void range_text(const cli_opt *o, char *out, size_t size)
{
    if (o->type == CLI_F64 || o->type == CLI_F32) {
        const char *open = (o->flags & CLI_MIN_EXCLUSIVE) ? "(" : "[";
        const char *close = (o->flags & CLI_MAX_EXCLUSIVE) ? ")" : "]";
        if (isinf(o->max)) snprintf(out, size, "a number %s %g", *open == '(' ? ">" : ">=", o->min);
        else snprintf(out, size, "a number in %s%g, %g%s", open, o->min, o->max, close);
        return;
    }
    int_range r = integer_range(o);
    if (o->type == CLI_U64 && r.open_top) snprintf(out, size, "an integer >= %llu", (unsigned long long)r.ulo);
    else if (o->type == CLI_U64)
        snprintf(out, size, "an integer in %llu..%llu", (unsigned long long)r.ulo, (unsigned long long)r.uhi);
    else if (r.open_top) snprintf(out, size, "an integer >= %lld", (long long)r.lo);
    else snprintf(out, size, "an integer in %lld..%lld", (long long)r.lo, (long long)r.hi);
}

/* The whole of s as a decimal integer in range, stored in the entry's
 * destination. */
static bool store_integer(const cli_opt *o, const char *s)
{
    int_range r = integer_range(o);
    if (o->type != CLI_U64) {
        int64_t v;
        if (!cli_parse_i64(s, r.lo, r.hi, &v)) return false;
        if (o->type == CLI_I64) *(int64_t *)o->dest = v;
        else *(int32_t *)o->dest = (int32_t)v;
        return true;
    }
    /* strtoull would take "-1" as 2^64 - 1 */
    if (!isdigit((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < r.ulo || v > r.uhi) return false;
    *(uint64_t *)o->dest = v;
    return true;
}

static bool parse_real(const cli_opt *o, const char *s, double *out)
{
    double v;
    if (!cli_parse_f64(s, o->min, o->max, &v)) return false;
    if ((o->flags & CLI_MIN_EXCLUSIVE) && v == o->min) return false;
    if ((o->flags & CLI_MAX_EXCLUSIVE) && v == o->max) return false;
    *out = v;
    return true;
}

/* Stores value into the entry's destination; false (message printed) when
 * it is not one the entry accepts. name: the option as typed. */
static bool store_value(const char *cmd, const cli_opt *o, const char *name, const char *value)
{
    char what[160];
    switch (o->type) {
    case CLI_STR:
        *(const char **)o->dest = value;
        return true;
    case CLI_ENUM: {
        size_t index;
        if (list_has(o->choices, value, strlen(value), &index)) {
            *(int *)o->dest = (int)index;
            return true;
        }
        choices_text(o->choices, what, sizeof what);
        break;
    }
    case CLI_F64:
    case CLI_F32: {
        double v;
        if (parse_real(o, value, &v)) {
            if (o->type == CLI_F64) *(double *)o->dest = v;
            else *(float *)o->dest = (float)v;
            return true;
        }
        range_text(o, what, sizeof what);
        break;
    }
    case CLI_I64:
    case CLI_I32:
    case CLI_U64:
        if (store_integer(o, value)) return true;
        range_text(o, what, sizeof what);
        break;
    default:
        snprintf(what, sizeof what, "no value");
        break;
    }
    cli_usage_error(cmd, "%s wants %s, got '%s'", name, what, value);
    return false;
}

/* "FILE..." -> "file": the word a list's "needs at least one ..." uses. */
static void metavar_word(const char *metavar, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = metavar ? metavar : "value"; *p && *p != '.' && n + 1 < size; p++)
        out[n++] = (char)tolower((unsigned char)*p);
    out[n] = 0;
}

/* CLI_STR_LIST: value (from "--opt=value") and the arguments after argv[*i]
 * up to the next option. */
static bool store_list(const char *cmd, const cli_opt *o, const char *name, const char *value, int argc, char **argv,
                       int *i)
{
    cli_str_list *list = o->dest;
    size_t before = list->n;
    for (;;) {
        if (!value && *i + 1 < argc && argv[*i + 1][0] != '-') value = argv[++*i];
        if (!value) break;
        if (list->n == list->cap) {
            cli_usage_error(cmd, "%s: more than %zu values", name, list->cap);
            return false;
        }
        list->items[list->n++] = value;
        value = NULL;
    }
    if (list->n == before) {
        char word[32];
        metavar_word(o->metavar, word, sizeof word);
        cli_usage_error(cmd, "%s needs at least one %s", name, word);
        return false;
    }
    return true;
}

static const cli_opt *find_option(const cli_opt *opts, size_t n_opts, const char *name, size_t len)
{
    for (size_t k = 0; k < n_opts; k++)
        if (opts[k].type != CLI_SECTION && opts[k].type != CLI_ARGS && list_has(opts[k].names, name, len, NULL))
            return &opts[k];
    return NULL;
}

/* An argument that is not an option ("-" alone is one: standard input). */
static bool store_arg(const char *cmd, const cli_opt *opts, size_t n_opts, const char *arg)
{
    for (size_t k = 0; k < n_opts; k++)
        if (opts[k].type == CLI_ARGS) {
            cli_str_list *list = opts[k].dest;
            if (list->n == list->cap) {
                cli_usage_error(cmd, "more than %zu %s", list->cap, opts[k].names);
                return false;
            }
            list->items[list->n++] = arg;
            return true;
        }
    cli_usage_error(cmd, "unexpected argument '%s'", arg);
    return false;
}

int cli_parse(const char *cmd, const char *usage_line, const cli_opt *opts, size_t n_opts, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            cli_print_usage(stdout, usage_line, opts, n_opts);
            return CLI_HELP;
        }
        if (arg[0] != '-' || !arg[1]) {
            if (!store_arg(cmd, opts, n_opts, arg)) return CLI_USAGE_ERROR;
            continue;
        }
        size_t len = strlen(arg);
        const char *eq = strncmp(arg, "--", 2) ? NULL : strchr(arg, '=');
        if (eq) { /* "--name=value" */
            len = (size_t)(eq - arg);
            value = eq + 1;
        }
        const cli_opt *o = find_option(opts, n_opts, arg, len);
        if (!o) {
            cli_usage_error(cmd, "unknown option '%s'", arg);
            return CLI_USAGE_ERROR;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, arg);
        /* Given again, an option takes its last value (scripts append
         * overrides to a base command line); a list collects every value. */
        if (o->given) *o->given = true;
        if (o->type == CLI_FLAG) {
            if (value) {
                cli_usage_error(cmd, "%s takes no value, got '%s'", name, value);
                return CLI_USAGE_ERROR;
            }
            *(bool *)o->dest = true;
            continue;
        }
        if (o->type == CLI_STR_LIST) {
            if (!store_list(cmd, o, name, value, argc, argv, &i)) return CLI_USAGE_ERROR;
            continue;
        }
        if (!value && i + 1 < argc) value = argv[++i];
        if (!value) {
            cli_usage_error(cmd, "%s needs a value", name);
            return CLI_USAGE_ERROR;
        }
        if (!store_value(cmd, o, name, value)) return CLI_USAGE_ERROR;
    }
    return CLI_OK;
}

/* "  -m, --model FILE" of an entry; its length. */
static size_t left_part(const cli_opt *o, char *out, size_t size)
{
    size_t used = (size_t)snprintf(out, size, "  ");
    const char *w;
    size_t wl;
    for (size_t i = 0; list_word(o->names, i, &w, &wl) && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%.*s", i ? ", " : "", (int)wl, w);
    const char *meta = o->metavar ? o->metavar : o->type == CLI_ENUM ? o->choices : NULL;
    if (meta && o->type != CLI_FLAG && used < size) used += (size_t)snprintf(out + used, size - used, " %s", meta);
    return used < size ? used : size - 1;
}

static void print_entry(FILE *f, const char *left, size_t left_len, const char *help, size_t column)
{
    fputs(left, f);
    if (left_len + 2 > column) fprintf(f, "\n%*s", (int)column, "");
    else fprintf(f, "%*s", (int)(column - left_len), "");
    for (const char *p = help ? help : ""; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fprintf(f, "%*s", (int)column, "");
    }
    fputc('\n', f);
}

void cli_print_usage(FILE *f, const char *usage_line, const cli_opt *opts, size_t n_opts)
{
    char left[160];
    size_t widest = strlen("  -h, --help");
    for (size_t k = 0; k < n_opts; k++) {
        size_t n = opts[k].type == CLI_SECTION ? 0 : left_part(&opts[k], left, sizeof left);
        if (n <= HELP_COLUMN_MAX - 2 && n > widest) widest = n;
    }
    size_t column = widest + 2;
    fprintf(f, "usage: %s\n\n", usage_line);
    for (size_t k = 0; k < n_opts; k++) {
        if (opts[k].type == CLI_SECTION) {
            fprintf(f, "\n%s\n", opts[k].names);
            continue;
        }
        size_t n = left_part(&opts[k], left, sizeof left);
        print_entry(f, left, n, opts[k].help, column);
    }
    print_entry(f, "  -h, --help", strlen("  -h, --help"), "this help", column);
}
