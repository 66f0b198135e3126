/* The CLI's option tables (src/cli/options.c): every value type, ranges and
 * their exclusive ends, the error messages, --help, and the shared groups;
 * the press group's compression, range rule and help (src/cli/press_options.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/options.h"
#include "press/press.h"
#include "session/session.h"

#define MAX_ARGS 32

/* What one cli_parse call returned and printed. */
typedef struct parse_result {
    int rc;
    char out[8192], err[4096];
} parse_result;

/* What was written to tmp, NUL-terminated; closes tmp. */
static void read_back(FILE *tmp, char *buf, size_t size)
{
    rewind(tmp);
    size_t n = fread(buf, 1, size - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

/* Runs cli_parse on "cmd" + the NULL-terminated arguments, with stdout and
 * stderr captured. */
static parse_result parse(const cli_opt *opts, size_t n_opts, ...)
{
    char *argv[MAX_ARGS] = {"cmd"};
    int argc = 1;
    va_list ap;
    va_start(ap, n_opts);
    for (char *a; (a = va_arg(ap, char *)) && argc < MAX_ARGS;) argv[argc++] = a;
    va_end(ap);

    parse_result r;
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    r.rc = cli_parse("test", "vkvector test [options]", opts, n_opts, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    read_back(out, r.out, sizeof r.out);
    read_back(err, r.err, sizeof r.err);
    return r;
}


/* The rejected value's message, e.g. "--n wants an integer in 1..10, got '11'". */
static void assert_error(const parse_result *r, const char *message)
{
    assert_int_equal(r->rc, CLI_USAGE_ERROR);
    if (!strstr(r->err, message)) fail_msg("stderr '%s' lacks '%s'", r->err, message);
    assert_non_null(strstr(r->err, "vkvector test: "));
}

#define N_ALL_TYPES 10
/* Parses with a table array, or with the test's all-types table. */
#define PARSE(table, ...) parse(table, CLI_N(table), __VA_ARGS__, (char *)NULL)
#define PARSE_ALL(...) parse(fx->opts, N_ALL_TYPES, __VA_ARGS__, (char *)NULL)
#define EXPECT_ERROR_IN(table, message, ...)                                                                   \
    do {                                                                                                       \
        parse_result r_ = PARSE(table, __VA_ARGS__);                                                           \
        assert_error(&r_, message);                                                                            \
    } while (0)
#define EXPECT_ERROR(message, ...)                                                                             \
    do {                                                                                                       \
        parse_result r_ = PARSE_ALL(__VA_ARGS__);                                                              \
        assert_error(&r_, message);                                                                            \
    } while (0)

/* The column of p in its line of text. */
static size_t line_column(const char *text, const char *p)
{
    const char *line = p;
    while (line > text && line[-1] != '\n') line--;
    return (size_t)(p - line);
}

typedef struct all_types {
    bool flag, flag_given, count_given;
    const char *str;
    int64_t i64;
    int32_t i32;
    uint64_t u64;
    double f64;
    float f32;
    int choice;
    const char *items[MAX_ARGS];
    cli_str_list list;
} all_types;

typedef struct fixture {
    all_types v;
    cli_opt opts[N_ALL_TYPES];
} fixture;

static void all_types_table(all_types *v, cli_opt opts[N_ALL_TYPES])
{
    *v = (all_types){.list = {v->items, 0, MAX_ARGS}};
    const cli_opt table[N_ALL_TYPES] = {
        {.type = CLI_SECTION, .names = "A heading:"},
        {.type = CLI_FLAG, .names = "-f|--flag", .dest = &v->flag, .given = &v->flag_given, .help = "a flag"},
        {.type = CLI_STR, .names = "-s|--str", .metavar = "TEXT", .dest = &v->str, .help = "a string"},
        {.type = CLI_I64, .names = "--count", .metavar = "N", .dest = &v->i64, .min = 1, .max = 10,
         .given = &v->count_given, .help = "an int64\nsecond line"},
        {.type = CLI_I32, .names = "--i32", .metavar = "N", .dest = &v->i32, .min = -5, .max = 5, .help = "an int32"},
        {.type = CLI_U64, .names = "--u64", .metavar = "N", .dest = &v->u64, .min = 0, .max = (double)UINT64_MAX,
         .help = "a uint64"},
        {.type = CLI_F64, .names = "--ratio", .metavar = "P", .dest = &v->f64, .min = 0, .max = 1,
         .flags = CLI_MIN_EXCLUSIVE | CLI_MAX_EXCLUSIVE, .help = "a double in (0, 1)"},
        {.type = CLI_F32, .names = "--temp", .metavar = "T", .dest = &v->f32, .min = 0, .max = 100, .help = "a float"},
        {.type = CLI_ENUM, .names = "--mode", .dest = &v->choice, .choices = "on|off|auto", .help = "an enum"},
        {.type = CLI_STR_LIST, .names = "--files", .metavar = "FILE...", .dest = &v->list,
         .help = "a list"},
    };
    memcpy(opts, table, sizeof table);
}

/* Each test starts from a fresh all-types table. */
static int fresh_table(void **state)
{
    fixture *fx = malloc(sizeof *fx);
    if (!fx) return -1;
    all_types_table(&fx->v, fx->opts);
    *state = fx;
    return 0;
}

static int free_table(void **state)
{
    free(*state);
    return 0;
}

static void every_type_parses(void **state)
{
    fixture *fx = *state;
    all_types *const v = &fx->v;
    parse_result r = PARSE_ALL("-f", "--str", "hello", "--count", "10", "--i32", "-5", "--u64",
                               "18446744073709551615", "--ratio", "0.25", "--temp", "0.8", "--mode", "auto",
                               "--files", "a", "b", "--files", "c");
    assert_int_equal(r.rc, CLI_OK);
    assert_string_equal(r.err, "");
    assert_true(v->flag);
    assert_true(v->flag_given);
    assert_string_equal(v->str, "hello");
    assert_int_equal(v->i64, 10);
    assert_true(v->count_given);
    assert_int_equal(v->i32, -5);
    assert_true(v->u64 == UINT64_MAX);
    assert_true(v->f64 == 0.25);
    assert_true(v->f32 == (float)0.8); /* rounded from the double, as strtod then a cast */
    assert_int_equal(v->choice, 2);
    assert_int_equal(v->list.n, 3);
    assert_string_equal(v->items[0], "a");
    assert_string_equal(v->items[2], "c");
}

static void untouched_without_the_option(void **state)
{
    fixture *fx = *state;
    all_types *const v = &fx->v;
    v->i64 = 7;
    assert_int_equal(PARSE_ALL("--str", "x").rc, CLI_OK);
    assert_int_equal(v->i64, 7);
    assert_false(v->count_given);
    assert_false(v->flag);
    assert_int_equal(parse(fx->opts, N_ALL_TYPES, (char *)NULL).rc, CLI_OK);
}

static void ranges_and_exclusive_ends(void **state)
{
    fixture *fx = *state;
    assert_int_equal(PARSE_ALL("--count", "1").rc, CLI_OK);
    EXPECT_ERROR("--count wants an integer in 1..10, got '11'", "--count", "11");
    EXPECT_ERROR("--count wants an integer in 1..10, got '0'", "--count", "0");
    EXPECT_ERROR("--i32 wants an integer in -5..5, got '6'", "--i32", "6");
    EXPECT_ERROR("--ratio wants a number in (0, 1), got '0'", "--ratio", "0");
    EXPECT_ERROR("--ratio wants a number in (0, 1), got '1'", "--ratio", "1");
    assert_int_equal(PARSE_ALL("--ratio", "1e-9").rc, CLI_OK);
    EXPECT_ERROR("--temp wants a number in [0, 100], got '100.5'", "--temp", "100.5");
    assert_int_equal(PARSE_ALL("--temp", "100").rc, CLI_OK);
    /* a value starting with '-' is still the value */
    EXPECT_ERROR("--temp wants a number in [0, 100], got '-1'", "--temp", "-1");
    EXPECT_ERROR("--u64 wants an integer >= 0, got '-1'", "--u64", "-1");
    EXPECT_ERROR("--u64 wants an integer >= 0", "--u64", "18446744073709551616");

    /* an exclusive integer end moves inward */
    int64_t n = 0;
    const cli_opt excl[] = {{.type = CLI_I64, .names = "--n", .metavar = "N", .dest = &n, .min = 0, .max = 8,
                             .flags = CLI_MIN_EXCLUSIVE | CLI_MAX_EXCLUSIVE}};
    EXPECT_ERROR_IN(excl, "--n wants an integer in 1..7, got '0'", "--n", "0");
    EXPECT_ERROR_IN(excl, "--n wants an integer in 1..7, got '8'", "--n", "8");
    assert_int_equal(PARSE(excl, "--n", "7").rc, CLI_OK);
    assert_int_equal(n, 7);
}

static void malformed_numbers(void **state)
{
    fixture *fx = *state;
    const char *bad_ints[] = {"", "x", "1.5", "3abc", "0x3", "99999999999999999999"};
    for (size_t i = 0; i < CLI_N(bad_ints); i++) {
        EXPECT_ERROR("--count wants an integer in 1..10", "--count", bad_ints[i]);
    }
    const char *bad_reals[] = {"", "nan", "inf", "0.5x", "1e999"};
    for (size_t i = 0; i < CLI_N(bad_reals); i++) {
        EXPECT_ERROR("--temp wants a number in [0, 100]", "--temp", bad_reals[i]);
    }
}

static void unknown_and_missing(void **state)
{
    fixture *fx = *state;
    parse_result r = PARSE_ALL("--bogus");
    assert_error(&r, "unknown option '--bogus'");
    assert_non_null(strstr(r.err, "vkvector test --help"));
    EXPECT_ERROR("unexpected argument 'stray'", "stray"); /* the table takes no arguments */
    EXPECT_ERROR("unknown option '--coun'", "--coun", "3"); /* no prefix matching */
    EXPECT_ERROR("--count needs a value", "--count");
    EXPECT_ERROR("-s needs a value", "-s");
    EXPECT_ERROR("--files needs at least one file", "--files", "--flag");
    EXPECT_ERROR("unexpected argument 'A heading:'", "A heading:"); /* a heading is not an option */
}

static void enum_errors_list_the_choices(void **state)
{
    fixture *fx = *state;
    EXPECT_ERROR("--mode wants on, off or auto, got 'maybe'", "--mode", "maybe");
    /* a choice's prefix is not the choice */
    EXPECT_ERROR("--mode wants on, off or auto, got 'o'", "--mode", "o");

    cli_model_opts mo;
    cli_model_opts_init(&mo);
    const cli_opt model[] = {CLI_MODEL_OPTIONS(mo)};
    EXPECT_ERROR_IN(model, "--kv-type wants f16, f32, q8_0 or q4_0, got 'q4'", "--kv-type", "q4");
}

static void equals_form(void **state)
{
    fixture *fx = *state;
    all_types *const v = &fx->v;
    parse_result r = PARSE_ALL("--count=4", "--str=a=b", "--mode=off", "--files=x", "y");
    assert_int_equal(r.rc, CLI_OK);
    assert_int_equal(v->i64, 4);
    assert_string_equal(v->str, "a=b");
    assert_int_equal(v->choice, 1);
    assert_int_equal(v->list.n, 2);
    EXPECT_ERROR("--count wants an integer in 1..10, got ''", "--count=");
    EXPECT_ERROR("--flag takes no value, got '1'", "--flag=1");
    EXPECT_ERROR("unknown option '-s=x'", "-s=x"); /* short names take no '=' */
}

/* CLI_ARGS collects what is not an option, "-" (standard input) included,
 * wherever it stands; a full list is an error. */
static void arguments_between_options(void **state)
{
    (void)state;
    const char *items[2];
    cli_str_list args = {.items = items, .cap = 2};
    bool flag = false;
    const cli_opt table[] = {
        {.type = CLI_ARGS, .names = "FILE...", .dest = &args, .help = "inputs"},
        {.type = CLI_FLAG, .names = "--flag", .dest = &flag, .help = "a flag"},
    };
    parse_result r = PARSE(table, "a.json", "--flag", "-");
    assert_int_equal(r.rc, CLI_OK);
    assert_true(flag);
    assert_int_equal(args.n, 2);
    assert_string_equal(items[0], "a.json");
    assert_string_equal(items[1], "-");
    args.n = 0;
    EXPECT_ERROR_IN(table, "more than 2 FILE...", "a", "b", "c");
}

static void given_twice(void **state)
{
    fixture *fx = *state;
    all_types *const v = &fx->v;
    assert_int_equal(PARSE_ALL("--count", "2", "--count", "3").rc, CLI_OK);
    assert_int_equal(v->i64, 3);
    assert_int_equal(PARSE_ALL("-s", "a", "--str", "b").rc, CLI_OK);
    assert_string_equal(v->str, "b");
    EXPECT_ERROR("--count wants", "--count", "2", "--count", "x"); /* every value is checked */
}

static void help_lists_every_option(void **state)
{
    fixture *fx = *state;
    parse_result r = PARSE_ALL("--count", "3", "--help", "--bogus");
    assert_int_equal(r.rc, CLI_HELP);
    assert_string_equal(r.err, "");
    const char *head = "usage: vkvector test [options]\n\n";
    assert_true(!strncmp(r.out, head, strlen(head)));
    const char *expect[] = {"\nA heading:\n", "  -f, --flag ", "a flag", "  -s, --str TEXT ", "  --count N ",
                            "an int64\n", "second line\n", "  --u64 N ", "  --ratio P ", "a double in (0, 1)",
                            "  --mode on|off|auto ", "  --files FILE... ", "  -h, --help ", "this help"};
    for (size_t i = 0; i < CLI_N(expect); i++)
        if (!strstr(r.out, expect[i])) fail_msg("--help lacks '%s':\n%s", expect[i], r.out);
    /* the help column lines up, continuation lines included */
    const char *a = strstr(r.out, "a flag"), *b = strstr(r.out, "second line");
    assert_int_equal(line_column(r.out, a), line_column(r.out, b));
    assert_int_equal(PARSE_ALL("-h").rc, CLI_HELP);
}

static void shared_groups(void **state)
{
    (void)state;
    unsetenv("VKVECTOR_MODEL");
    unsetenv("VKVECTOR_DEVICE");
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    assert_string_equal(mo.model_path, "default-model.gguf");
    assert_int_equal(mo.device, -1);
    assert_int_equal(mo.n_ctx, 0);
    assert_int_equal(mo.n_batch, 512);
    assert_int_equal(cli_kv_dtype(mo.kv_type), VKV_F16);
    setenv("VKVECTOR_MODEL", "env.gguf", 1);
    setenv("VKVECTOR_DEVICE", "2", 1);
    cli_model_opts_init(&mo);
    assert_string_equal(mo.model_path, "env.gguf");
    assert_int_equal(mo.device, 2);
    unsetenv("VKVECTOR_MODEL");
    unsetenv("VKVECTOR_DEVICE");

    vkv_sampler_params sp = vkv_sampler_defaults(), defaults = sp;
    cli_press_opts po;
    cli_press_opts_init(&po);
    assert_null(po.press);
    assert_true(po.compression_ratio == -1 && po.pa == -1);
    const cli_opt groups[] = {CLI_MODEL_OPTIONS(mo), CLI_SAMPLING_OPTIONS(sp), CLI_PRESS_OPTIONS(po)};
    parse_result r = PARSE(groups, "-m", "x.gguf", "--device", "1", "--ctx", "256", "--kv-type", "f32", "--temp", "0",
                           "--seed", "9", "--press", "snapkv", "--compression", "0.5", "--vector", "--pa", "0.25");
    assert_int_equal(r.rc, CLI_OK);
    assert_string_equal(mo.model_path, "x.gguf");
    assert_int_equal(mo.device, 1);
    assert_int_equal(mo.n_ctx, 256);
    assert_int_equal(mo.n_batch, 512);
    assert_int_equal(cli_kv_dtype(mo.kv_type), VKV_F32);
    assert_true(cli_k_dtype(&mo) == VKV_F32 && cli_v_dtype(&mo) == VKV_F32);
    r = PARSE(groups, "--kv-type", "q4_0", "--k-type", "q8_0");
    assert_int_equal(r.rc, CLI_OK);
    assert_true(cli_k_dtype(&mo) == VKV_Q8_0 && cli_v_dtype(&mo) == VKV_Q4_0); /* --k-type overrides K alone */
    assert_true(sp.temperature == 0);
    assert_true(sp.seed == 9);
    assert_true(sp.top_p == defaults.top_p && sp.top_k == defaults.top_k && sp.min_p == defaults.min_p);
    assert_string_equal(po.press, "snapkv");
    /* --compression and --pa stay text until cli_press_opts_check reads them (lists in ruler and longbench) */
    assert_true(po.compression_ratio == -1 && po.vector);
    assert_string_equal(po.compression_arg, "0.5");
    assert_string_equal(po.pa_arg, "0.25");
    assert_false(po.query_aware || po.materialized);

    /* run's ranges */
    EXPECT_ERROR_IN(groups, "--top-p wants a number in (0, 1], got '0'", "--top-p", "0");
    EXPECT_ERROR_IN(groups, "--repeat-penalty wants a number in (0, 100]", "--repeat-penalty", "0");
    EXPECT_ERROR_IN(groups, "--top-k wants an integer >= 0, got '-3'", "--top-k", "-3");
    EXPECT_ERROR_IN(groups, "--seed wants an integer >= 0", "--seed", "18446744073709551616");
    assert_int_equal(PARSE(groups, "--seed", "18446744073709551615").rc, CLI_OK);
    assert_true(sp.seed == UINT64_MAX);
    EXPECT_ERROR_IN(groups, "--ctx wants an integer in 1..16777216, got 'x'", "--ctx", "x");

    r = PARSE(groups, "--help");
    const char *names[] = {"-m, --model PATH", "--device N", "--ctx N", "--batch N", "--kv-type f16|f32", "--seed S",
                           "--temp T", "--top-k K", "--top-p P", "--min-p P", "--repeat-penalty R",
                           "--repeat-last-n N", "--press NAME", "--compression P", "--vector", "--pa X",
                           "--calib FILE", "--query-aware", "--materialized", "default: default-model.gguf"};
    for (size_t i = 0; i < CLI_N(names); i++)
        if (!strstr(r.out, names[i])) fail_msg("--help lacks '%s':\n%s", names[i], r.out);
}

/* cli_press_compression: each parsed press option reaches its field of the
 * session's vkv_compression. */
static void press_options_build_the_compression(void **state)
{
    (void)state;
    cli_press_opts po;
    cli_press_opts_init(&po);
    const cli_opt opts[] = {CLI_PRESS_OPTIONS(po)};
    const vkv_press_ops *press;
    vkv_compression c;

    /* compression during generation alone: no --compression is p_c 0 */
    assert_int_equal(PARSE(opts, "--press", "keydiff", "--compress-every", "8", "--max-kv-tokens", "32").rc, CLI_OK);
    assert_true(cli_press_opts_check("test", &po, &press));
    cli_press_compression(&po, press, false, &c);
    assert_ptr_equal(c.press, vkv_press_find("keydiff"));
    assert_true(c.compression_ratio == 0 && c.p_a < 0);
    assert_true(c.compress_every == 8 && c.max_kv_tokens == 32);
    assert_false(c.vector || c.materialized || c.plain_prompt || c.query_aware || c.keep_details || c.lean);
    assert_int_equal(c.pool, VKV_POOL_DEFAULT);
    assert_int_equal(c.map, VKV_MAP_HEAD);

    cli_press_opts_init(&po);
    assert_int_equal(PARSE(opts, "--press", "snapkv", "--compression", "0.75", "--vector", "--pa", "0.125",
                           "--vector-pool", "global", "--vector-map", "joint", "--materialized", "--query-agnostic")
                         .rc,
                     CLI_OK);
    assert_true(cli_press_opts_check("test", &po, &press));
    cli_press_compression(&po, press, true, &c);
    assert_ptr_equal(c.press, vkv_press_find("snapkv"));
    assert_true(c.compression_ratio == 0.75 && c.vector && c.p_a == 0.125);
    assert_int_equal(c.pool, VKV_POOL_GLOBAL);
    assert_int_equal(c.map, VKV_MAP_JOINT);
    assert_true(c.materialized && c.plain_prompt);
    assert_false(c.query_aware); /* --query-agnostic over snapkv's query-aware default */
    assert_true(c.compress_every == 0 && c.max_kv_tokens == 0);
}

/* cli_press_opts_check on po; its message on stderr into msg ("" when it passes). */
static bool check_with_message(cli_press_opts *po, char *msg, size_t size)
{
    const vkv_press_ops *press;
    fflush(stderr);
    int saved_err = dup(2);
    FILE *sink = tmpfile();
    assert_non_null(sink);
    dup2(fileno(sink), 2);
    bool ok = cli_press_opts_check("test", po, &press);
    fflush(stderr);
    dup2(saved_err, 2);
    close(saved_err);
    rewind(sink);
    size_t n = fread(msg, 1, size - 1, sink);
    msg[n] = 0;
    fclose(sink);
    return ok;
}

/* Whether cli_press_opts_check takes press options with these ratios
 * (p_a < 0: no --pa), its message on stderr kept out of the test's output. */
static bool ratios_accepted(double compression_ratio, const char *pa, bool vector)
{
    cli_press_opts po;
    cli_press_opts_init(&po);
    po.press = "keydiff";
    po.compression_ratio = compression_ratio;
    po.pa_arg = pa;
    po.vector = vector;
    char msg[512];
    return check_with_message(&po, msg, sizeof msg);
}

/* --compression: one p_c in [0, 1), or where the command runs a list (ruler)
 * a comma list, each value checked with every p_a. */
static void compression_takes_a_list_where_the_command_runs_one(void **state)
{
    (void)state;
    static const struct {
        const char *compression, *pa;
        bool list_ok, vector;
        const char *error; /* NULL: accepted */
    } cases[] = {
        {"0.5", NULL, false, false, NULL},
        {"0", NULL, false, false, NULL},
        {"1", NULL, false, false, "--compression wants a number in [0, 1), got '1'"},
        {"-0.1", NULL, true, false, "--compression wants a number in [0, 1) or a comma list of up to 16, got '-0.1'"},
        {"0.25,0.5", NULL, false, false, "--compression wants a number in [0, 1), got '0.25,0.5'"},
        {"0.25,0.5,0.75", NULL, true, false, NULL},
        {"0.25,,x", NULL, true, false, "got '0.25,,x'"},
        {"0.25,,0.5", NULL, true, false, "got '0.25,,0.5'"}, /* empty items are refused, not skipped */
        {"0.5,", NULL, true, false, "got '0.5,'"},
        {",0.5", NULL, true, false, "got ',0.5'"},
        {"", NULL, true, false, "--compression wants"},
        {"0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", NULL, true, false, "up to 16"},
        {"0.5,0.9", "0.25", true, true, "0.9"}, /* p_a + p_c > 1 at the second value */
        {"0.5,0.75", "0.25", true, true, NULL},
    };
    for (size_t i = 0; i < CLI_N(cases); i++) {
        cli_press_opts po;
        cli_press_opts_init(&po);
        po.press = "keydiff";
        po.compression_arg = cases[i].compression;
        po.compression_list_ok = cases[i].list_ok;
        po.pa_arg = cases[i].pa;
        po.vector = cases[i].vector;
        char msg[512];
        bool ok = check_with_message(&po, msg, sizeof msg);
        if (ok != !cases[i].error || (cases[i].error && !strstr(msg, cases[i].error)))
            fail_msg("--compression '%s': %s '%s'", cases[i].compression, ok ? "accepted" : "refused", msg);
    }
    cli_press_opts po;
    cli_press_opts_init(&po);
    po.press = "keydiff";
    po.compression_arg = "0.25,0.5,0.75";
    po.compression_list_ok = true;
    char msg[512];
    assert_true(check_with_message(&po, msg, sizeof msg));
    assert_int_equal(po.n_compressions, 3);
    assert_true(po.compressions[0] == 0.25 && po.compressions[1] == 0.5 && po.compressions[2] == 0.75);
    assert_true(po.compression_ratio == 0.25); /* the first, until the command sets each */
}

/* The one range rule (vkv_kv_check_ratios) decides for options that did not
 * come through the parser's range: 0 <= p_c < 1, p_a <= 1 - p_c. */
static void the_ratios_obey_one_rule(void **state)
{
    (void)state;
    assert_true(ratios_accepted(0, NULL, false));
    assert_true(ratios_accepted(0.999, NULL, false));
    assert_false(ratios_accepted(1, NULL, false));
    assert_false(ratios_accepted(1.5, NULL, false));
    assert_false(ratios_accepted(NAN, NULL, false));
    assert_true(ratios_accepted(0.75, "0.25", true)); /* p_a + p_c = 1 exactly, as decimals */
    assert_false(ratios_accepted(0.75, "0.3", true));
    assert_false(ratios_accepted(0.9, "0.5", true));
}

/* --press's help lists the press table, in its order, wrapped at 80 columns:
 * today's table gives the text the help always had. */
static void press_help_lists_the_press_table(void **state)
{
    (void)state;
    const char *help = cli_press_help(), *at = help;
    for (const vkv_press_ops *const *p = vkv_press_all(); *p; p++) {
        const char *hit = strstr(at, (*p)->name);
        if (!hit) fail_msg("'%s' lacks '%s' after '%s'", help, (*p)->name, at);
        at = hit + strlen((*p)->name);
    }
    for (const char *line = help; line;) {
        const char *nl = strchr(line, '\n');
        assert_true((nl ? (size_t)(nl - line) : strlen(line)) <= 80);
        line = nl ? nl + 1 : NULL;
    }
    assert_string_equal(help, "importance scorer: knorm, keydiff, streamingllm, snapkv, pyramidkv, tova,\n"
                              "observed, expected, kvzip, chunkkv, chunkkv-knorm, chunkkv-keydiff,\n"
                              "chunkkv-tova, lagkv, random, adakv-snapkv, adakv-keydiff, adakv-expected,\n"
                              "critical-snapkv, critical-keydiff, critical-expected, critical-adakv-snapkv,\n"
                              "critical-adakv-keydiff, critical-adakv-expected");
}

/* The KV-type group of a command whose default is not f16 (perplexity's f32)
 * says so, and takes the four types and --k-type / --v-type. */
static void kv_type_group_with_another_default(void **state)
{
    (void)state;
    cli_model_opts mo;
    cli_model_opts_init(&mo);
    mo.kv_type = 1;
    const cli_opt opts[] = {CLI_KV_TYPE_OPTIONS_DEFAULT(mo, "f32")};
    parse_result r = PARSE(opts, "--help");
    assert_int_equal(r.rc, CLI_HELP);
    if (!strstr(r.out, "KV cache storage, K and V (default f32;")) fail_msg("%s", r.out);
    assert_true(cli_k_dtype(&mo) == VKV_F32 && cli_v_dtype(&mo) == VKV_F32);
    assert_int_equal(PARSE(opts, "--v-type", "q4_0").rc, CLI_OK);
    assert_true(cli_k_dtype(&mo) == VKV_F32 && cli_v_dtype(&mo) == VKV_Q4_0);
    EXPECT_ERROR_IN(opts, "--kv-type wants f16, f32, q8_0 or q4_0, got 'q9'", "--kv-type", "q9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_type_parses, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(untouched_without_the_option, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(ranges_and_exclusive_ends, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(malformed_numbers, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(unknown_and_missing, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(enum_errors_list_the_choices, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(equals_form, fresh_table, free_table),
        cmocka_unit_test_setup_teardown(given_twice, fresh_table, free_table),
        cmocka_unit_test(arguments_between_options),
        cmocka_unit_test_setup_teardown(help_lists_every_option, fresh_table, free_table),
        cmocka_unit_test(shared_groups),
        cmocka_unit_test(press_options_build_the_compression),
        cmocka_unit_test(the_ratios_obey_one_rule),
        cmocka_unit_test(compression_takes_a_list_where_the_command_runs_one),
        cmocka_unit_test(press_help_lists_the_press_table),
        cmocka_unit_test(kv_type_group_with_another_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
