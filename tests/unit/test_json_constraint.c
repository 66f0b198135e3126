/* response_format's constrained decoding (src/serve/json_constraint.c):
 * schemas compiled or refused by name, the matcher byte by byte on valid
 * and invalid documents, the token masks against a brute force over a
 * random vocabulary, random walks over the masks that always give JSON the
 * schema validates, and the masks' speed over a 150K-token vocabulary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <cmocka.h>

#include "core/json.h"
#include "core/rng.h"
#include "core/utf8.h"
#include "serve/json_constraint.h"

#define P VKV_JSON_CONSTRAINT_PARAM

/* ---- schemas ---- */

static const char *const person_schema =
    "{\"type\": \"object\", \"description\": \"a person\", \"properties\": {"
    "\"name\": {\"type\": \"string\", \"title\": \"Name\"},"
    "\"age\": {\"type\": \"integer\"},"
    "\"email\": {\"type\": [\"string\", \"null\"]},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 3},"
    "\"role\": {\"enum\": [\"admin\", \"user\", 7, null, true]},"
    "\"score\": {\"type\": \"number\", \"default\": 0}},"
    "\"required\": [\"name\", \"age\", \"score\"], \"additionalProperties\": false, \"$schema\": \"x\"}";

static const char *const tree_schema =
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {"
    "\"value\": {\"type\": \"integer\"},"
    "\"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}},"
    "\"required\": [\"value\"], \"additionalProperties\": false}},"
    "\"$ref\": \"#/$defs/node\"}";

/* OpenAI's example: a user or an address */
static const char *const union_schema =
    "{\"type\": \"object\", \"properties\": {\"item\": {\"anyOf\": ["
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"number\"}},"
    " \"required\": [\"name\", \"age\"], \"additionalProperties\": false},"
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"city\": {\"const\": \"Paris\"}},"
    " \"required\": [\"name\", \"city\"], \"additionalProperties\": false},"
    "{\"type\": \"null\"}]}},"
    "\"required\": [\"item\"], \"additionalProperties\": false}";

/* additionalProperties absent: extra keys with any values */
static const char *const open_schema =
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {\"type\": \"boolean\"}},"
    " \"required\": [\"a\"]}";

/* what zodResponseFormat makes of
 * z.object({n: z.number().int(), p: z.number().min(0).max(1), k: z.number().positive()}) */
static const char *const zod_schema =
    "{\"type\": \"object\", \"properties\": {"
    "\"n\": {\"type\": \"integer\", \"minimum\": -9007199254740991, \"maximum\": 9007199254740991},"
    "\"p\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 1},"
    "\"k\": {\"type\": \"number\", \"exclusiveMinimum\": 0}},"
    "\"required\": [\"n\", \"p\", \"k\"], \"additionalProperties\": false, "
    "\"$schema\": \"http://json-schema.org/draft-07/schema#\"}";

/* bounds of every kind side by side: an anyOf whose alternatives keep their own */
static const char *const bounded_schema =
    "{\"type\": \"array\", \"maxItems\": 6, \"items\": {\"anyOf\": ["
    "{\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99},"
    "{\"type\": \"integer\", \"exclusiveMinimum\": -300, \"exclusiveMaximum\": -200},"
    "{\"type\": \"number\", \"exclusiveMinimum\": -2.5, \"maximum\": 0.125},"
    "{\"type\": [\"number\", \"null\"], \"minimum\": 1e-3, \"maximum\": 2e-3},"
    "{\"enum\": [1, 7, 12, 2000, \"x\"], \"minimum\": 7}]}}";

static const char *const list_schema =
    "{\"type\": \"array\", \"minItems\": 1, \"maxItems\": 4, \"items\": {\"anyOf\": ["
    "{\"type\": \"integer\"}, {\"type\": \"string\"}, {\"$ref\": \"#\"}]}}";

static vkv_json_doc *parse_doc(const char *text)
{
    vkv_json_doc *d;
    assert_int_equal(vkv_json_parse(text, strlen(text), &d), VKV_OK);
    return d;
}

/* Compiles schema text (NULL: json_object mode); its document in *doc when doc. */
static vkv_json_constraint *compile(const char *schema, vkv_json_doc **doc)
{
    vkv_json_doc *d = schema ? parse_doc(schema) : NULL;
    vkv_json_constraint *c;
    char param[256], msg[512];
    if (!vkv_json_constraint_compile(d ? vkv_json_root(d) : NULL, &c, param, sizeof param, msg, sizeof msg))
        fail_msg("refused: %s (%s)", msg, param);
    if (doc) *doc = d;
    else vkv_json_free(d);
    return c;
}

static void refused(const char *schema, const char *param)
{
    vkv_json_doc *d = parse_doc(schema);
    vkv_json_constraint *c = (vkv_json_constraint *)1;
    char p[1024] = "x", msg[1024] = "";
    bool ok = vkv_json_constraint_compile(vkv_json_root(d), &c, p, sizeof p, msg, sizeof msg);
    vkv_json_free(d);
    if (ok) fail_msg("accepted: %s", schema);
    assert_null(c);
    if (strcmp(p, param)) fail_msg("param '%s', wanted '%s' (%s) for %s", p, param, msg, schema);
    char quoted[1100];
    snprintf(quoted, sizeof quoted, "'%s' ", param);
    assert_non_null(strstr(msg, quoted));
}

/* ---- feeding documents ---- */

#define COMPLETE ((size_t)-1)
#define INCOMPLETE ((size_t)-2)
#define AT_MARK ((size_t)-3)

static bool adv(vkv_json_matcher *m, const char *s) { return vkv_json_matcher_advance(m, s, strlen(s)); }

/* Feeds doc byte by byte: the index of the first byte refused, else
 * COMPLETE or INCOMPLETE. Runs of accepted bytes fed at once agree. */
static size_t feed_n(const vkv_json_constraint *c, const char *doc, size_t len)
{
    vkv_json_matcher *m = vkv_json_matcher_new(c), *whole = vkv_json_matcher_new(c);
    assert_true(m && whole);
    size_t i = 0;
    for (; i < len; i++) {
        /* a byte refused leaves the state as it was: a second try sees the same */
        if (!vkv_json_matcher_advance(m, doc + i, 1)) {
            assert_false(vkv_json_matcher_advance(m, doc + i, 1));
            break;
        }
    }
    bool done = vkv_json_matcher_complete(m);
    assert_true(vkv_json_matcher_advance(whole, doc, i));
    assert_int_equal(vkv_json_matcher_complete(whole), done);
    if (i < len) assert_false(vkv_json_matcher_advance(whole, doc + i, len - i));
    assert_int_equal(vkv_json_matcher_complete(whole), done);
    vkv_json_matcher_free(m);
    vkv_json_matcher_free(whole);
    return i < len ? i : done ? COMPLETE : INCOMPLETE;
}

/* A document and what becomes of it: COMPLETE, INCOMPLETE, the index of the
 * byte refused, or AT_MARK: refused at the byte after a '`' (not part of it). */
typedef struct doc_case {
    const char *doc;
    size_t at;
} doc_case;
#define OK COMPLETE
#define PART INCOMPLETE
#define NO AT_MARK

static void check_docs(const char *schema, const doc_case *cases, size_t n)
{
    vkv_json_constraint *c = compile(schema, NULL);
    for (size_t i = 0; i < n; i++) {
        char doc[1024];
        size_t len = 0, want = cases[i].at;
        for (const char *p = cases[i].doc; *p; p++) {
            if (*p == '`' && want == AT_MARK) want = len;
            else doc[len++] = *p;
        }
        assert_true(want != AT_MARK);
        size_t got = feed_n(c, doc, len);
        if (got != want) fail_msg("'%s': refused at %ld, wanted %ld", cases[i].doc, (long)got, (long)want);
    }
    vkv_json_constraint_free(c);
}
#define CHECK_DOCS(schema, ...)                                                                                       \
    do {                                                                                                              \
        const doc_case cases_[] = {__VA_ARGS__};                                                                      \
        check_docs(schema, cases_, sizeof cases_ / sizeof *cases_);                                                   \
    } while (0)

/* ---- compiling ---- */

static void compile_takes_the_subset(void **state)
{
    (void)state;
    const char *const schemas[] = {
        person_schema, tree_schema, union_schema, open_schema, list_schema,
        "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}",
        "{}",
        "{\"type\": [\"integer\", \"boolean\", \"null\"]}",
        "{\"const\": 3}",
        "{\"enum\": [\"a\", \"a\", 1, 1.0, -0.5, 1e300, true, false, null], \"type\": [\"string\", \"number\"]}",
        "{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"minItems\": 2, \"maxItems\": 2}",
        "{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}, \"strict\": true}",
        "{\"anyOf\": [{\"anyOf\": [{\"type\": \"string\"}, {\"$ref\": \"#/$defs/n\"}]}, {\"type\": \"null\"}],"
        " \"$defs\": {\"n\": {\"type\": \"number\"}, \"unused\": {\"type\": \"string\"}, \"a~b/c\": {}}}",
        "{\"$ref\": \"#/$defs/a~0b~1c\", \"$defs\": {\"a~b/c\": {\"type\": \"boolean\"}}}",
        "{\"type\": \"object\", \"properties\": {\"self\": {\"$ref\": \"#\"}, \"q\\\"uote\": {\"type\": \"null\"}}}",
        "{\"examples\": [1], \"$comment\": \"c\", \"$id\": \"x\", \"deprecated\": false, \"readOnly\": true,"
        " \"writeOnly\": false, \"type\": \"string\"}",
        zod_schema, bounded_schema,
        "{\"type\": \"integer\", \"minimum\": -9007199254740991, \"maximum\": 9007199254740991}",
        "{\"type\": \"number\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 1e-300}",
        "{\"minimum\": 0}", /* no type: numbers at least 0, anything else */
        "{\"type\": [\"number\", \"null\", \"string\"], \"maximum\": -1e300}",
        "{\"type\": \"number\", \"exclusiveMaximum\": -1.7976931348623157e308}", /* -1.8e308 reads as -inf */
        "{\"type\": \"integer\", \"minimum\": 2.5, \"exclusiveMinimum\": 2.5, \"maximum\": 3, \"exclusiveMaximum\": 4}",
        "{\"type\": \"number\", \"minimum\": 0.3, \"maximum\": 0.3}",
        "{\"type\": \"integer\", \"minimum\": 1e31}", /* 32 digits: every byte a number may have */
        "{\"enum\": [1, 5, \"a\"], \"exclusiveMaximum\": 5}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) vkv_json_constraint_free(compile(schemas[i], NULL));
    vkv_json_constraint_free(compile(NULL, NULL));
}

static void compile_refuses_by_name(void **state)
{
    (void)state;
    refused("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"multipleOf\": 2}}}",
            P ".properties.n.multipleOf");
    refused("{\"type\": \"number\", \"minimum\": 0, \"multipleOf\": 0.5}", P ".multipleOf");
    /* numeric bounds: numbers, on schemas that can be numbers, with a number between them */
    refused("{\"type\": \"string\", \"minimum\": 1}", P ".minimum");
    refused("{\"type\": [\"string\", \"null\"], \"exclusiveMaximum\": 1}", P ".exclusiveMaximum");
    refused("{\"type\": \"integer\", \"minimum\": \"1\"}", P ".minimum");
    refused("{\"type\": \"integer\", \"minimum\": 0, \"exclusiveMaximum\": true}", P ".exclusiveMaximum");
    refused("{\"type\": \"number\", \"maximum\": null}", P ".maximum");
    refused("{\"type\": \"integer\", \"minimum\": 1e999}", P ".minimum");
    refused("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 5, \"maximum\": 3}}}",
            P ".properties.n.minimum");
    refused("{\"type\": \"number\", \"exclusiveMinimum\": 3, \"maximum\": 3}", P ".exclusiveMinimum");
    refused("{\"type\": \"number\", \"minimum\": 3, \"exclusiveMaximum\": 3}", P ".minimum");
    refused("{\"type\": \"number\", \"minimum\": 1, \"exclusiveMinimum\": 2, \"maximum\": 1.5}", P ".exclusiveMinimum");
    refused("{\"type\": \"integer\", \"minimum\": 1.2, \"maximum\": 1.8}", P ".minimum"); /* no integer */
    refused("{\"type\": \"integer\", \"exclusiveMinimum\": 1, \"exclusiveMaximum\": 2}", P ".exclusiveMinimum");
    refused("{\"type\": \"integer\", \"minimum\": 1e32}", P ".minimum"); /* 33 digits */
    refused("{\"type\": [\"integer\", \"null\"], \"maximum\": -1e300}", P ".maximum"); /* 301 digits */
    /* no double lies strictly between two neighbours */
    refused("{\"type\": \"number\", \"exclusiveMinimum\": 1, \"exclusiveMaximum\": 1.0000000000000002}",
            P ".exclusiveMinimum");
    refused("{\"enum\": [1, 2, \"a\"], \"type\": \"integer\", \"minimum\": 3}", P ".enum");
    refused("{\"const\": 2, \"exclusiveMaximum\": 2}", P ".const");
    refused("{\"enum\": [1, 2], \"minimum\": 3, \"maximum\": 2}", P ".minimum");
    refused("{\"enum\": [\"a\"], \"type\": \"string\", \"maximum\": 2}", P ".maximum");
    refused("{\"anyOf\": [{\"type\": \"integer\"}], \"minimum\": 1}", P ".minimum");
    refused("{\"type\": \"string\", \"pattern\": \"^a\"}", P ".pattern");
    refused("{\"type\": \"string\", \"format\": \"date\"}", P ".format");
    refused("{\"type\": \"string\", \"minLength\": 1}", P ".minLength");
    refused("{\"oneOf\": [{\"type\": \"string\"}]}", P ".oneOf");
    refused("{\"allOf\": [{\"type\": \"string\"}]}", P ".allOf");
    refused("{\"not\": {\"type\": \"string\"}}", P ".not");
    refused("{\"type\": \"object\", \"patternProperties\": {\"a\": {}}}", P ".patternProperties");
    refused("{\"type\": \"array\", \"items\": [{\"type\": \"string\"}]}", P ".items");
    refused("{\"type\": \"array\", \"prefixItems\": [{}]}", P ".prefixItems");
    refused("{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 3}}", P ".items.maxLength");
    refused("{\"type\": \"int\"}", P ".type");
    refused("{\"type\": [\"string\", 3]}", P ".type");
    refused("{\"type\": []}", P ".type");
    refused("{\"$ref\": \"#/definitions/a\", \"definitions\": {\"a\": {}}}", P ".definitions");
    refused("{\"$ref\": \"#/definitions/a\"}", P ".$ref");
    refused("{\"$ref\": \"#/$defs/missing\", \"$defs\": {\"a\": {}}}", P ".$ref");
    refused("{\"$ref\": \"#/$defs/a/b\", \"$defs\": {\"a\": {}}}", P ".$ref");
    refused("{\"$ref\": \"http://example.com/s.json\"}", P ".$ref");
    refused("{\"$ref\": \"#\", \"type\": \"string\"}", P ".type");
    refused("{\"anyOf\": [{\"type\": \"string\"}], \"enum\": [\"a\"]}", P ".enum");
    refused("{\"anyOf\": []}", P ".anyOf");
    refused("{\"anyOf\": [{\"type\": \"string\"}, 7]}", P ".anyOf.[1]");
    refused("{\"enum\": []}", P ".enum");
    refused("{\"enum\": [1, {\"a\": 1}]}", P ".enum.[1]");
    refused("{\"enum\": [\"a\"], \"type\": \"integer\"}", P ".enum");
    refused("{\"enum\": [1, 2], \"const\": 3}", P ".enum");
    refused("{\"const\": [1]}", P ".const");
    refused("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}", P ".required.[0]");
    refused("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": \"a\"}", P ".required");
    refused("{\"type\": \"object\", \"properties\": {\"a\": {}, \"a\": {}}}", P ".properties.a");
    refused("{\"type\": \"object\", \"properties\": [1]}", P ".properties");
    refused("{\"type\": \"object\", \"additionalProperties\": 1}", P ".additionalProperties");
    refused("{\"type\": \"object\", \"properties\": {\"a\": {\"$defs\": {}}}}", P ".properties.a.$defs");
    refused("{\"$defs\": [1]}", P ".$defs");
    refused("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", P ".minItems");
    refused("{\"type\": \"array\", \"minItems\": -1}", P ".minItems");
    refused("{\"type\": \"array\", \"maxItems\": 1.5}", P ".maxItems");
    refused("[1]", P);
    refused("{\"properties\": {\"a\": true}}", P ".properties.a");
    refused("{\"nullable\": true, \"type\": \"string\"}", P ".nullable");
    /* $ref and anyOf cycles that consume nothing; values that can never end */
    refused("{\"$defs\": {\"A\": {\"anyOf\": [{\"$ref\": \"#/$defs/A\"}, {\"type\": \"string\"}]}},"
            " \"$ref\": \"#/$defs/A\"}", P ".$defs.A");
    refused("{\"$defs\": {\"A\": {\"$ref\": \"#/$defs/B\"}, \"B\": {\"$ref\": \"#/$defs/A\"}}, \"type\": \"null\"}",
            P ".$defs.B");
    refused("{\"anyOf\": [{\"$ref\": \"#\"}]}", P);
    refused("{\"$defs\": {\"A\": {\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": \"#/$defs/A\"}},"
            " \"required\": [\"a\"]}}, \"$ref\": \"#/$defs/A\"}", P ".$defs.A");
    refused("{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}, \"minItems\": 1}", P);
    /* schemas nested past the limit */
    char deep[4096] = "";
    for (int i = 0; i < VKV_JSON_CONSTRAINT_MAX_DEPTH + 1; i++) strcat(deep, "{\"type\": \"array\", \"items\": ");
    strcat(deep, "{}");
    for (int i = 0; i < VKV_JSON_CONSTRAINT_MAX_DEPTH + 1; i++) strcat(deep, "}");
    char want[1024] = P;
    for (int i = 0; i < VKV_JSON_CONSTRAINT_MAX_DEPTH + 1; i++) strcat(want, ".items");
    refused(deep, want);
    /* one level less compiles */
    char ok[4096] = "";
    for (int i = 0; i < VKV_JSON_CONSTRAINT_MAX_DEPTH; i++) strcat(ok, "{\"type\": \"array\", \"items\": ");
    strcat(ok, "{}");
    for (int i = 0; i < VKV_JSON_CONSTRAINT_MAX_DEPTH; i++) strcat(ok, "}");
    vkv_json_constraint_free(compile(ok, NULL));
}

/* ---- the matcher, byte by byte ---- */

static void json_object_mode(void **state)
{
    (void)state;
    CHECK_DOCS(NULL,
               {"{}", OK},
               {"{\"a\": [1, -2.5e+3, true, false, null, \"x\"], \"b\": {\"c\": {}}, \"a\": 0}", OK},
               {"{ \"k\" : \"v\" }` ", NO}, /* nothing after the top-level value, white space neither */
               {"` {}", NO},                        /* nor before it */
               {"{\"a\":1}`x", NO},
               {"`[1]", NO},                        /* the top level is an object */
               {"`\"s\"", NO},
               {"{\"a\"`}", NO},
               {"{\"a\":`}", NO},
               {"{`,}", NO},
               {"{\"a\":1,`}", NO},
               {"{\"a\":1 `\"b\":2}", NO},
               {"{`'a':1}", NO},
               {"{\"a\":[1,`]}", NO},
               {"{\"a\":tru`}", NO},
               {"{\"a\":nul", PART},
               {"{\"a\\n\\u00e9\":1}", OK},         /* keys with escapes */
               {"{\"a\"", PART});
}

static void whitespace_is_capped(void **state)
{
    (void)state;
    char doc[512], ind[64];
    int cap = VKV_JSON_CONSTRAINT_MAX_WS;
    /* each gap between tokens: one space, or a newline and up to cap spaces or tabs */
    snprintf(ind, sizeof ind, "\n%*s", cap, "");
    snprintf(doc, sizeof doc, "{%s\"a\"%s:%s[%s1%s]%s}", ind, ind, ind, ind, ind, ind);
    CHECK_DOCS(NULL, {doc, OK}, {"{ \"a\" : [ 1 , 2 ] , \"b\" : { } }", OK}, {"{\n\t\t\"a\":\n\t1\n}", OK});
    for (int where = 0; where < 3; where++) {
        /* one more indentation byte is refused at that byte */
        const char *fmt = where == 0 ? "{\n%*s}" : where == 1 ? "{\"a\"\n%*s:1}" : "{\"a\":\n%*s1}";
        snprintf(doc, sizeof doc, fmt, cap + 1, "");
        size_t at = (size_t)cap + (where == 0 ? 2 : where == 1 ? 5 : 6);
        CHECK_DOCS(NULL, {doc, at});
    }
    /* no runs of blank lines, nothing after a single space, no carriage returns or form feeds */
    CHECK_DOCS(NULL, {"{\n`\n}", NO}, {"{ ` }", NO}, {"{ `\n}", NO}, {"{\"a\":1 `\n}", NO}, {"{`\r\n}", NO},
               {"{`\t}", NO}, {"{`\v}", NO}, {"{`\f}", NO}, {"{\n \t \t}", OK});
}

static void strings_are_json_strings(void **state)
{
    (void)state;
    CHECK_DOCS("{\"type\": \"string\"}",
               {"\"plain\"", OK},
               {"\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", OK},
               {"\"\\u0041\\u00e9\\u20AC\\uFFFF\\u0000\"", OK},
               {"\"\\ud83d\\ude00\\uD83D\\uDE00\\udbff\\udfff\"", OK}, /* surrogate pairs */
               {"\"\\ud`e00\"", NO},                                     /* a low surrogate alone */
               {"\"\\ud83d`\"", NO},                                     /* a high one alone */
               {"\"\\ud83d`x\"", NO},
               {"\"\\ud83d\\u`0041\"", NO},                              /* not followed by a low one */
               {"\"\\ud83d\\ud`83d\"", NO},
               {"\"\\`x\"", NO},
               {"\"\\u12`g4\"", NO},
               {"\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xef\xbf\xbd\"", OK}, /* valid UTF-8 */
               {"\"`\xc0\x80\"", NO},                                   /* overlong */
               {"\"`\xc1\xbf\"", NO},
               {"\"\xe0`\x80\x80\"", NO},                               /* overlong, 3 bytes */
               {"\"\xed`\xa0\x80\"", NO},                               /* a surrogate in UTF-8 */
               {"\"\xf4`\x90\x80\x80\"", NO},                           /* past U+10FFFF */
               {"\"`\xf5\x80\"", NO},
               {"\"`\xff\"", NO},
               {"\"`\x80\"", NO},                                       /* a continuation byte alone */
               {"\"\xc3`\"", NO},                                       /* a character cut */
               {"\"\xe6\x97`x\"", NO},
               {"\"a`\x01\"", NO},                                      /* control characters raw */
               {"\"a`\nb\"", NO},
               {"\"\x7f\"", OK},                                        /* DEL is no control character to JSON */
               {"\"open", PART},
               {"\"\"`x", NO});
}

static void numbers_and_integers(void **state)
{
    (void)state;
    CHECK_DOCS("{\"type\": \"number\"}",
               {"0", OK}, {"-0", OK}, {"12.50", OK}, {"-1e5", OK}, {"1E+2", OK}, {"3.25e-007", OK}, {"-", PART},
               {"1.", PART}, {"1e", PART}, {"1e+", PART}, {"0`1", NO}, {"-0`1", NO}, {"`+1", NO}, {"`.5", NO},
               {"1.`e3", NO}, {"1e3`.5", NO}, {"-`-1", NO}, {"1` ", NO}, {"`NaN", NO}, {"1e5`e", NO});
    CHECK_DOCS("{\"type\": \"integer\"}",
               {"0", OK}, {"-42", OK}, {"12345678901234567890", OK}, {"1`.5", NO}, {"1`e3", NO}, {"-", PART},
               {"`\"1\"", NO});
    /* a number's length is capped, with room for the digit that must follow */
    char doc[64];
    int cap = VKV_JSON_CONSTRAINT_MAX_NUMBER;
    memset(doc, '1', (size_t)cap);
    doc[cap] = 0;
    CHECK_DOCS("{\"type\": \"number\"}", {doc, OK});
    doc[cap] = '1';
    doc[cap + 1] = 0;
    CHECK_DOCS("{\"type\": \"number\"}", {doc, (size_t)cap});
    doc[cap - 1] = 'e';
    doc[cap] = 0;
    CHECK_DOCS("{\"type\": \"number\"}", {doc, (size_t)cap - 1}); /* an 'e' with no room for a digit */
    CHECK_DOCS("{\"type\": [\"integer\", \"string\"]}", {"7", OK}, {"7`.5", NO}, {"\"7.5\"", OK});
}

/* minimum, maximum, exclusiveMinimum, exclusiveMaximum: a byte is taken when some completion is within them */
static void numbers_within_bounds(void **state)
{
    (void)state;
    CHECK_DOCS("{\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99}",
               {"5", PART},    /* 50 to 59 to come */
               {"50", OK}, {"10", OK}, {"99", OK}, {"10`0", NO}, {"99`9", NO}, {"`0", NO}, {"`-1", NO}, {"1", PART});
    /* the byte after a number ends it: only inside the bounds */
    CHECK_DOCS("{\"type\": \"array\", \"items\": {\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99}}",
               {"[50, 10]", OK}, {"[5`]", NO}, {"[5`,", NO}, {"[42 ,99\n]", OK}, {"[9` ]", NO});
    CHECK_DOCS("{\"type\": \"integer\", \"minimum\": -99, \"maximum\": -10}",
               {"-5", PART}, {"-50", OK}, {"-10", OK}, {"-99", OK}, {"-10`0", NO}, {"`5", NO}, {"-`0", NO},
               {"-", PART});
    CHECK_DOCS("{\"type\": \"integer\", \"exclusiveMinimum\": -3, \"exclusiveMaximum\": 7}",
               {"-2", OK}, {"-`3", NO}, {"-`4", NO}, {"0", OK}, {"-0", OK}, {"6", OK}, {"`7", NO}, {"1`0", NO},
               {"-", PART});
    /* zodResponseFormat's z.number().int() */
    CHECK_DOCS("{\"type\": \"integer\", \"minimum\": -9007199254740991, \"maximum\": 9007199254740991}",
               {"0", OK}, {"-3", OK}, {"9007199254740991", OK}, {"900719925474099`2", NO}, {"-9007199254740991", OK},
               {"-900719925474099`2", NO}, {"1234567890123456`7", NO}, {"9007199254740990", OK},
               {"8999999999999999", OK}, {"900719925474099`9", NO});
    CHECK_DOCS("{\"type\": \"integer\", \"minimum\": 0}", {"0", OK}, {"-0", OK}, {"-`1", NO}, {"12345", OK});
    CHECK_DOCS("{\"type\": \"integer\", \"exclusiveMinimum\": 0.5, \"maximum\": 2.5}",
               {"1", OK}, {"2", OK}, {"`0", NO}, {"`3", NO}, {"2`0", NO});
    /* 2^60 - 64 is halfway to the double below 2^60, and a double reader rounds it up to 2^60 */
    CHECK_DOCS("{\"type\": \"integer\", \"exclusiveMaximum\": 1152921504606846976}",
               {"1152921504606846911", OK}, {"115292150460684691`2", NO}, {"1152921504606846848", OK});
    /* a number: its fraction and exponent, at the bounds */
    CHECK_DOCS("{\"type\": \"number\", \"minimum\": 0.5, \"maximum\": 0.7}",
               {"0.5", OK}, {"0.7", OK}, {"0.69999", OK}, {"0.70000", OK}, {"0.70`1", NO}, {"0.`8", NO}, {"0.`4", NO},
               {"0.07", PART}, {"0.07e1", OK}, {"`1", NO}, {"`-0.5", NO}, {"0", PART});
    CHECK_DOCS("{\"type\": \"number\", \"minimum\": 0.5, \"maximum\": 0.7}",
               {"6e-1", OK}, {"5e-1", OK}, {"7e-1", OK}, {"7.0e-1", OK}, {"7.`1e-1", NO}, {"5", PART}, {"5e`0", NO},
               {"5e-`2", NO}, {"5e-1`0", NO}, {"5e-01", OK}, {"0.05e1", OK}, {"50e-2", OK}, {"500E-3", OK},
               {"5E`+1", NO}, {"7e-1`1", NO});
    CHECK_DOCS("{\"type\": \"number\", \"minimum\": -2.5, \"maximum\": 0.125}",
               {"-2.5", OK}, {"-2.51", PART} /* -2.51e-1 is in */, {"-2.51e-1", OK}, {"-2.51e`0", NO}, {"-2.50", OK},
               {"-3", PART}, {"-3e-1", OK}, {"0.125", OK}, {"0.1251", PART}, {"0.12", OK}, {"-0", OK}, {"0", OK},
               {"0.2", PART}, {"0.2e`1", NO}, {"-25e-1", OK}, {"-26e-1", PART}, {"-26e-10", OK}, {"1e`1", NO},
               {"1e`+", NO});
    /* exclusive bounds also hold as a double reader reads the number: 0.99999999999999995 reads as 1 */
    CHECK_DOCS("{\"type\": \"number\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 1}",
               {"0.5", OK}, {"0", PART}, {"1", PART}, {"1e-1", OK}, {"1e`1", NO}, {"0.9999999999999999", OK},
               {"0.99999999999999994", OK}, {"0.99999999999999995", PART}, {"3e-324", OK}, {"2e-32`4", NO},
               {"1e-40`0", NO}, {"0.", PART});
    CHECK_DOCS("{\"type\": \"array\", \"items\": {\"type\": \"number\", \"exclusiveMinimum\": 0,"
               " \"exclusiveMaximum\": 1}}",
               {"[0.9999999999999999, 0.99999999999999994]", OK}, {"[0.99999999999999995`]", NO},
               {"[0.99999999999999995e-1]", OK}, {"[0.999999999999999999`,", NO}, {"[1`]", NO}, {"[0`]", NO},
               {"[0.0`]", NO}, {"[`-0]", NO});
    CHECK_DOCS("{\"type\": \"number\", \"exclusiveMaximum\": 0}",
               {"-0.5", OK}, {"-0", PART}, {"`0", NO}, {"-1e-323", OK}, {"-1e-40`0", NO}, {"-3e-324", OK});
    /* both bounds at one exponent: enough digits must fit to land between them */
    CHECK_DOCS("{\"type\": \"number\", \"minimum\": 123.456, \"maximum\": 123.457}",
               {"123.456", OK}, {"123.4565", OK}, {"123.457", OK}, {"123.45`8", NO}, {"123.4`6", NO},
               {"123.`5", NO}, {"123", PART}, {"0.123456", PART}, {"0.1234565e3", OK}, {"12`4", NO});
    CHECK_DOCS("{\"type\": \"number\", \"minimum\": 1.2345671e-24, \"maximum\": 1.2345679e-24}",
               {"1.2345675e-24", OK}, {"12345671e-31", OK}, {"0.00000000000000012345671e-8", OK},
               {"1.234567`0e-24", NO}, {"1.2345679e-24", OK}, {"1.2345679`9", NO},
               /* 0.000... spelled out: 23 zeros and 8 digits do not fit in 32 bytes, nor fewer zeros and an exponent */
               {"0.0000000000000000000`0", NO}, {"0.000000000000000000012345671e-4", OK});
    /* a type array, an anyOf whose alternatives keep their own bounds, enum values outside them dropped */
    CHECK_DOCS("{\"type\": [\"integer\", \"null\"], \"minimum\": 1}", {"null", OK}, {"`0", NO}, {"1", OK});
    CHECK_DOCS("{\"anyOf\": [{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9},"
               " {\"type\": \"integer\", \"minimum\": 100, \"maximum\": 199}]}",
               {"5", OK}, {"1", OK}, {"10", PART}, {"100", OK}, {"199", OK}, {"2`0", NO}, {"19", PART},
               {"199", OK});
    CHECK_DOCS("{\"enum\": [1, 5, 10, 12.5, \"a\"], \"minimum\": 2}",
               {"5", OK}, {"10", OK}, {"12.5", OK}, {"1", PART}, {"\"a\"", OK}, {"`2", NO});
}

static void objects_follow_properties(void **state)
{
    (void)state;
    CHECK_DOCS(person_schema,
               {"{\"name\": \"Ann\", \"age\": 41, \"score\": 1.5}", OK},
               {"{\"name\":\"A\",\"age\":1,\"email\":null,\"tags\":[\"x\",\"y\"],\"role\":\"admin\",\"score\":0}", OK},
               {"{\"name\":\"A\",\"age\":1,\"email\":\"a@b\",\"role\":7,\"score\":-2}", OK},
               {"{\"name\":\"A\",\"age\":1,\"role\":null,\"score\":1}", OK},
               {"{\"name\":\"A\",\"age\":1,\"role\":true,\"score\":1}", OK},
               {"{\"name\" : \"A\" , \"age\" : 1 , \"score\" : 1 }", OK},
               {"{\"`age\": 41}", NO},                                 /* the required name comes first */
               {"{`}", NO},
               {"{\"name\":\"A\",\"age\":1`}", NO},                    /* score is required */
               {"{\"name\":\"A\",\"age\":1`.5", NO},                   /* age is an integer */
               {"{\"name\":\"A\",\"age\":1,\"`nick\":\"x\"}", NO},     /* additionalProperties false */
               {"{\"name\":\"A\",\"age\":1,\"`name\":\"B\"}", NO},     /* no key twice */
               {"{\"name\":\"A\",\"age\":1,\"score\":1`,\"role\":7}", NO}, /* keys in schema order */
               {"{\"name\":\"A\",\"age\":1,\"role\":\"`guest\"", NO},  /* enum */
               {"{\"name\":\"A\",\"age\":1,\"role\":`false", NO},
               {"{\"name\":\"A\",\"age\":1,\"role\":7`0", NO},
               {"{\"name\":\"A\",\"age\":1,\"tags\":[\"a\",\"b\",\"c\"`,\"d\"]", NO}, /* maxItems 3 */
               {"{\"name\":\"A\",\"age\":1,\"email\":`1", NO},
               {"{\"nam`\":", NO});
    /* additionalProperties absent: extra keys once the required ones are in, never a declared name */
    CHECK_DOCS(open_schema,
               {"{\"a\": 1, \"zz\": {\"q\": [null]}, \"b\": true, \"c\": \"x\"}", OK},
               {"{\"a\": 1, \"b\": true}", OK},
               {"{\"`zz\": 1, \"a\": 1}", NO},                         /* before the required a */
               {"{\"a\": 1, \"a`\": 2}", NO},                          /* a declared name, at its closing quote */
               {"{\"a\": 1, \"ab\": 2}", OK},
               {"{\"a\": 1, \"b\": true, \"b`\": 1}", NO},
               {"{\"a\": 1, \"`\\u0062\": 1}", NO},                    /* extra keys have no escapes */
               {"{\"a\": 1, \"\xc3\xa9\": 1}", OK});
    CHECK_DOCS("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}",
               {"{\"x\": 1, \"y\\n\": 2}", OK}, {"{\"x\": `\"1\"}", NO});
    CHECK_DOCS("{\"type\": \"object\", \"properties\": {\"q\\\"uote\": {\"const\": 1}}, \"additionalProperties\": false}",
               {"{\"q\\\"uote\": 1}", OK}, {"{\"q\\`u0022uote\": 1}", NO}, {"{\"q\\\"uote\": `2}", NO});
    CHECK_DOCS("{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}", {"{}", OK},
               {"{`\"", NO});
}

static void enum_const_and_types(void **state)
{
    (void)state;
    CHECK_DOCS("{\"enum\": [\"a\", \"ab\", \"a\\nb\", 1, 12, -0.5, 1e300, null, 1.0]}",
               {"\"a\"", OK}, {"\"ab\"", OK}, {"\"a\\nb\"", OK}, {"\"`b\"", NO}, {"\"ab`c\"", NO}, {"1", OK},
               {"12", OK}, {"12`3", NO}, {"-0.5", OK}, {"-0.5`0", NO}, {"null", OK}, {"1e+300", OK}, {"1e`300", NO},
               {"1`.0", NO}, {"\"`\\u0061\"", NO}, {"`true", NO}, {"-", PART});
    CHECK_DOCS("{\"const\": \"Paris\"}", {"\"Paris\"", OK}, {"\"Pari`\"", NO}, {"\"Paris`x", NO});
    CHECK_DOCS("{\"type\": \"boolean\"}", {"true", OK}, {"false", OK}, {"tru", PART}, {"tr`Ue", NO}, {"`null", NO},
               {"true`x", NO});
    CHECK_DOCS("{\"type\": [\"null\", \"string\"]}", {"null", OK}, {"\"x\"", OK}, {"`1", NO});
    CHECK_DOCS("{}", {"[{\"a\": [null]}, \"b\"]", OK}, {"1.5", OK}, {"`x", NO});
    /* enum values of another type are dropped */
    CHECK_DOCS("{\"enum\": [\"a\", 1, 2.5], \"type\": \"integer\"}", {"1", OK}, {"`2", NO}, {"`\"a\"", NO});
}

static void any_of_and_refs(void **state)
{
    (void)state;
    CHECK_DOCS(union_schema,
               {"{\"item\": {\"name\": \"Bo\", \"age\": 3}}", OK},
               {"{\"item\": {\"name\": \"Bo\", \"city\": \"Paris\"}}", OK},
               {"{\"item\": null}", OK},
               {"{\"item\": {\"name\": \"Bo\", \"city\": \"`Rome\"}}", NO},
               {"{\"item\": {\"name\": \"Bo\"`}}", NO},
               {"{\"item\": {\"`age\": 3}}", NO},
               {"{\"item\": {\"name\": \"Bo\", \"age\": 3`, \"city\": \"Paris\"}}", NO},
               {"{\"item\": `\"x\"}", NO});
    CHECK_DOCS(tree_schema,
               {"{\"value\": 1}", OK},
               {"{\"value\": 1, \"kids\": [{\"value\": 2, \"kids\": []}, {\"value\": 3, \"kids\": [{\"value\": 4}]}]}",
                OK},
               {"{\"value\": 1, \"kids\": [{\"`kids\": []}]}", NO},
               {"{\"value\": 1, \"kids\": [`1]}", NO});
    CHECK_DOCS(list_schema,
               {"[1, \"a\", [2, [\"b\"]], 3]", OK},
               {"[`]", NO},                                   /* minItems 1, at every level */
               {"[[`]]", NO},
               {"[1, 2, 3, 4`, 5]", NO},                      /* maxItems 4 */
               {"[1`.5]", NO},
               {"[`null]", NO});
    CHECK_DOCS("{\"type\": \"object\", \"properties\": {\"self\": {\"$ref\": \"#\"}, \"v\": {\"type\": \"null\"}},"
               " \"additionalProperties\": false}",
               {"{\"self\": {\"self\": {\"v\": null}}, \"v\": null}", OK}, {"{\"self\": `1}", NO});
    /* one text read through several alternatives */
    CHECK_DOCS("{\"anyOf\": [{\"type\": \"string\"}, {\"enum\": [\"ab\", \"cd\"]}, {\"type\": [\"string\", \"null\"]}]}",
               {"\"ab\"", OK}, {"\"x\"", OK}, {"null", OK});
}

/* ---- numeric bounds, against an oracle ---- */

/* A JSON number's exact value: sign x 0.d x 10^q (d without leading or trailing zeros; n 0: zero). */
typedef struct dec {
    int sign, n;
    long long q;
    char d[64];
} dec;

static dec dec_of(const char *t, size_t len)
{
    dec x = {.sign = 1};
    size_t i = 0;
    if (i < len && t[i] == '-') x.sign = -1, i++;
    bool fraction = false;
    for (; i < len && (t[i] == '.' || (t[i] >= '0' && t[i] <= '9')); i++) {
        if (t[i] == '.') fraction = true;
        else if (!x.n && t[i] == '0') x.q -= fraction;
        else {
            x.d[x.n++] = t[i];
            x.q += !fraction;
        }
    }
    if (i < len && (t[i] == 'e' || t[i] == 'E')) {
        int es = 1;
        long long e = 0;
        if (++i < len && (t[i] == '+' || t[i] == '-')) es = t[i++] == '-' ? -1 : 1;
        for (; i < len && t[i] >= '0' && t[i] <= '9'; i++) e = e < 1000000000000LL ? e * 10 + (t[i] - '0') : e;
        x.q += es * e;
    }
    while (x.n && x.d[x.n - 1] == '0') x.n--;
    if (!x.n) x.sign = 0;
    return x;
}

static int dec_cmp(const dec *a, const dec *b)
{
    if (a->sign != b->sign) return a->sign < b->sign ? -1 : 1;
    if (!a->sign) return 0;
    int c = a->q != b->q ? (a->q < b->q ? -1 : 1) : 0;
    for (int i = 0; !c && i < (a->n > b->n ? a->n : b->n); i++) {
        char x = i < a->n ? a->d[i] : '0', y = i < b->n ? b->d[i] : '0';
        c = (x > y) - (x < y);
    }
    return a->sign * c;
}

/* Bounds as a schema writes them (their shortest spelling), NULL: absent. */
typedef struct bounds_case {
    const char *type, *min, *xmin, *max, *xmax;
} bounds_case;

static const char number_bytes[] = "0123456789.e-"; /* enough to spell any number's value */

static int number_state(int st, char c, bool integer);

/* t[0, len) is a whole JSON number (an integer: no fraction or exponent) of at most the matcher's length. */
static bool json_number(const char *t, size_t len, bool integer)
{
    int st = 0;
    for (size_t i = 0; i < len && st >= 0; i++) st = number_state(st, t[i], integer);
    return len <= VKV_JSON_CONSTRAINT_MAX_NUMBER && (st == 2 || st == 3 || st == 5 || st == 8);
}

/* The bounds of the case being checked, read once. */
static struct {
    const bounds_case *b;
    bool on[4];
    dec d[4];
    double x[4];
} oracle;

/* The value within the bounds: JSON Schema's exact comparison, and for an
 * exclusive bound the value as a double reader reads it too. */
static bool in_bounds(const bounds_case *b, const char *t, size_t len)
{
    const char *const text[4] = {b->min, b->xmin, b->max, b->xmax};
    if (oracle.b != b) {
        oracle.b = b;
        for (int i = 0; i < 4; i++)
            if ((oracle.on[i] = text[i])) {
                oracle.d[i] = dec_of(text[i], strlen(text[i]));
                oracle.x[i] = strtod(text[i], NULL);
            }
    }
    dec v = dec_of(t, len);
    double x = 0;
    if (oracle.on[1] || oracle.on[3]) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.*s", (int)len, t);
        x = strtod(tmp, NULL);
    }
    for (int i = 0; i < 4; i++) {
        if (!oracle.on[i]) continue;
        int c = dec_cmp(&v, &oracle.d[i]);
        double y = oracle.x[i];
        bool ok = i == 0 ? c >= 0 : i == 1 ? c > 0 && x > y : i == 2 ? c <= 0 : c < 0 && x < y;
        if (!ok) return false;
    }
    return true;
}

static char *bounds_schema(const bounds_case *b, char *o, size_t cap)
{
    int n = snprintf(o, cap, "{\"type\": \"%s\"", b->type);
    const char *const text[4] = {b->min, b->xmin, b->max, b->xmax};
    static const char *const names[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++)
        if (text[i]) n += snprintf(o + n, cap - (size_t)n, ", \"%s\": %s", names[i], text[i]);
    snprintf(o + n, cap - (size_t)n, "}");
    return o;
}


/* The number grammar's state after c (from st: 0 start, 1 '-', 2 a leading 0, 3 integer digits, 4 '.', 5 fraction
 * digits, 6 'e', 7 the exponent's sign, 8 its digits); -1: c cannot come there. */
static int number_state(int st, char c, bool integer)
{
    bool d = c >= '0' && c <= '9';
    if (st == 0 && c == '-') return 1;
    if ((st == 0 || st == 1) && d) return c == '0' ? 2 : 3;
    if (st == 3 && d) return 3;
    if ((st == 2 || st == 3) && c == '.' && !integer) return 4;
    if ((st == 4 || st == 5) && d) return 5;
    if ((st == 2 || st == 3 || st == 5) && (c == 'e' || c == 'E') && !integer) return 6;
    if (st == 6 && (c == '+' || c == '-')) return 7;
    if (st >= 6 && d) return 8;
    return -1;
}

/* Some completion of t[0, len) (grammar state st) with at most `more` bytes is a number within the bounds. */
static bool completes_from(const bounds_case *b, bool integer, char *t, size_t len, int st, size_t more)
{
    if (st < 0) return false;
    if ((st == 2 || st == 3 || st == 5 || st == 8) && in_bounds(b, t, len)) return true;
    if (!more || len >= VKV_JSON_CONSTRAINT_MAX_NUMBER) return false;
    for (const char *c = number_bytes; *c; c++) {
        t[len] = *c;
        if (completes_from(b, integer, t, len + 1, number_state(st, *c, integer), more - 1)) return true;
    }
    return false;
}

static bool completes(const bounds_case *b, bool integer, char *t, size_t len, size_t more)
{
    int st = 0;
    for (size_t i = 0; i < len && st >= 0; i++) st = number_state(st, t[i], integer);
    return len <= VKV_JSON_CONSTRAINT_MAX_NUMBER && completes_from(b, integer, t, len, st, more);
}

static const bounds_case bounds_cases[] = {
    {"integer", "10", NULL, "99", NULL},
    {"integer", "-99", NULL, "-10", NULL},
    {"integer", NULL, "-3", NULL, "7"},
    {"integer", "-9007199254740991", NULL, "9007199254740991", NULL}, /* zod's int() */
    {"integer", "0", NULL, NULL, NULL},
    {"integer", NULL, NULL, "-1", NULL},
    {"integer", "1e+30", NULL, "2e+30", NULL},
    {"integer", "1e+31", NULL, NULL, NULL},                   /* 32 digits: every byte */
    {"integer", NULL, NULL, NULL, "1152921504606846976"}, /* 2^60: 2^60 - 64 reads as 2^60 */
    {"integer", NULL, "0.5", "2.5", NULL},
    {"integer", "12.5", NULL, "13.5", NULL},
    {"number", "0.5", NULL, "0.7", NULL},
    {"number", NULL, "0", NULL, "1"},
    {"number", "-2.5", NULL, "0.125", NULL},
    {"number", "1e-05", NULL, "100000", NULL},
    {"number", "0.3", NULL, "0.3", NULL},
    {"number", NULL, NULL, NULL, "1"},
    {"number", "123.456", NULL, "123.457", NULL},
    {"number", "1.5", NULL, "1.9", NULL},
    {"number", NULL, NULL, "-0.001", NULL},
    {"number", "-10000000000", NULL, "-1000000000", NULL},
    {"number", NULL, "0", NULL, NULL},
    {"number", NULL, NULL, NULL, "0"},
    {"number", "1e-300", NULL, "2e-300", NULL},
    {"number", "1e+300", NULL, NULL, NULL},
    {"number", NULL, "0.1", NULL, "0.2"},
    {"number", "5e-324", NULL, NULL, NULL},
    {"number", NULL, "-1e-07", "0", NULL},
    {"number", "99.99", NULL, "100.01", NULL},
    {"number", "1.2345671e-24", NULL, "1.2345679e-24", NULL}, /* 8 digits between, 0.000... spends the bytes */
    {"number", NULL, NULL, "1e-30", NULL},
    {"number", "1e-30", NULL, "2e-30", NULL},              /* 0. and 29 zeros: the zeros spend the bytes */
    {"number", NULL, "1e+23", NULL, NULL}, /* 10^23 is halfway from it to the next double */
    {"number", NULL, NULL, NULL, "1.0000000000000001e+23"},
    {"number", "-1.7976931348623157e+308", NULL, NULL, "-1e+308"},
};

/* The bound values a number meets the bounds at: the bounds as spelled,
 * and where a double reader stops reading a number as an exclusive bound
 * (printed from a long double, exact where it is wider than a double). */
static size_t bound_hints(const bounds_case *b, char hints[8][64])
{
    size_t n = 0;
    const char *const text[4] = {b->min, b->xmin, b->max, b->xmax};
    for (int i = 0; i < 4; i++) {
        if (!text[i]) continue;
        snprintf(hints[n++], 64, "%s", text[i]);
        if (i % 2) {
            double x = strtod(text[i], NULL), y = nextafter(x, i == 1 ? HUGE_VAL : -HUGE_VAL);
            if (isfinite(y)) snprintf(hints[n++], 64, "%.40Le", ((long double)x + (long double)y) / 2);
        }
    }
    return n;
}

/* A number's text near a hint: in positional or scientific notation,
 * padded with zeros or nines, a digit changed, a sign flipped, cut short,
 * random bytes after; or random bytes. */
static size_t random_number_text(vkv_rng *r, const bounds_case *b, char *o)
{
    static const char alphabet[] = "00123456789999.eE+-";
    char hints[8][64];
    size_t n_hints = bound_hints(b, hints), n = 0;
    if (n_hints && vkv_rng_below(r, 5)) {
        const char *hint = hints[vkv_rng_below(r, (uint32_t)n_hints)];
        dec h = dec_of(hint, strlen(hint));
        char digits[80];
        int nd = h.n < 40 ? h.n : 40;
        memcpy(digits, h.d, (size_t)nd);
        for (int pad = (int)vkv_rng_below(r, 3) ? 0 : (int)vkv_rng_below(r, 30); pad-- && nd < 60;)
            digits[nd++] = vkv_rng_below(r, 2) ? '0' : '9';
        if (!nd) digits[nd++] = '0';
        if (vkv_rng_below(r, 3) == 0) { /* one digit up or down */
            int i = (int)vkv_rng_below(r, (uint32_t)nd);
            digits[i] = digits[i] == '9' ? '8' : digits[i] == '0' ? '1' : digits[i] + (vkv_rng_below(r, 2) ? 1 : -1);
        }
        bool neg = (h.sign < 0) != (vkv_rng_below(r, 8) == 0);
        if (neg) o[n++] = '-';
        long long q = h.q;
        if (vkv_rng_below(r, 2) && q > -30 && q < 33) { /* positional */
            if (q <= 0) {
                o[n++] = '0';
                o[n++] = '.';
                for (long long z = 0; z < -q && n < 60; z++) o[n++] = '0';
                for (int i = 0; i < nd && n < 60; i++) o[n++] = digits[i];
            } else {
                for (int i = 0; i < q && n < 60; i++) o[n++] = i < nd ? digits[i] : '0';
                if (nd > q) o[n++] = '.';
                for (int i = (int)q; i < nd && n < 60; i++) o[n++] = digits[i];
            }
        } else { /* scientific, the point after k digits */
            int k = 1 + (int)vkv_rng_below(r, 3);
            k = k > nd ? nd : k;
            for (int i = 0; i < nd && n < 60; i++) {
                if (i == k) o[n++] = '.';
                o[n++] = digits[i];
            }
            n += (size_t)snprintf(o + n, 24, "e%lld", q - k);
        }
        if (vkv_rng_below(r, 2)) n = vkv_rng_below(r, (uint32_t)n + 1);
    } else if (vkv_rng_below(r, 2)) {
        o[n++] = '-';
    }
    for (size_t more = vkv_rng_below(r, 4) ? vkv_rng_below(r, 4) : vkv_rng_below(r, 34); more-- && n < 60;)
        o[n++] = vkv_rng_below(r, 2) ? '0' + (char)vkv_rng_below(r, 10)
                                     : alphabet[vkv_rng_below(r, sizeof alphabet - 1)];
    return n;
}

/* Every byte the matcher takes leaves a number some completion of which is
 * within the bounds (a walk from it never sticks, a brute force over the
 * last bytes finds one); a number it completes is within them; a byte it
 * refuses has no completion the brute force finds. */
static void number_bounds_are_exact(void **state)
{
    (void)state;
    vkv_rng r = vkv_rng_new(17);
    size_t prefixes = 0, brute = 0;
    for (size_t bi = 0; bi < sizeof bounds_cases / sizeof *bounds_cases; bi++) {
        const bounds_case *b = &bounds_cases[bi];
        bool integer = !strcmp(b->type, "integer");
        char schema[512];
        vkv_json_constraint *c = compile(bounds_schema(b, schema, sizeof schema), NULL);
        for (int it = 0; it < 500; it++) {
            char text[128], t[128];
            size_t len = random_number_text(&r, b, text), n = 0;
            vkv_json_matcher *m = vkv_json_matcher_new(c);
            while (n < len && vkv_json_matcher_advance(m, text + n, 1)) n++;
            prefixes++;
            memcpy(t, text, n);
            if (vkv_json_matcher_complete(m) != (json_number(t, n, integer) && in_bounds(b, t, n)))
                fail_msg("%s: '%.*s' complete: %d", schema, (int)n, t, vkv_json_matcher_complete(m));
            /* near the length cap, the brute force sees every completion */
            if (n >= VKV_JSON_CONSTRAINT_MAX_NUMBER - 4) {
                brute++;
                if (!completes(b, integer, t, n, 4)) fail_msg("%s: '%.*s' taken, and no completion", schema, (int)n, t);
            }
            /* a refused byte: no short completion */
            if (n < len && n < VKV_JSON_CONSTRAINT_MAX_NUMBER) {
                t[n] = text[n];
                brute++;
                if (completes(b, integer, t, n + 1, 3))
                    fail_msg("%s: '%.*s' refused at its last byte, which completes", schema, (int)n + 1, t);
            }
            /* a walk over the bytes the matcher takes ends within the bounds */
            for (;;) {
                bool done = vkv_json_matcher_complete(m);
                if (done && (vkv_rng_below(&r, 4) == 0 || n >= VKV_JSON_CONSTRAINT_MAX_NUMBER)) break;
                char next[sizeof number_bytes];
                size_t k = 0;
                for (const char *p = number_bytes; *p; p++) {
                    vkv_json_matcher *x = vkv_json_matcher_clone(m);
                    if (vkv_json_matcher_advance(x, p, 1)) next[k++] = *p;
                    vkv_json_matcher_free(x);
                }
                if (!k && done) break;
                if (!k) fail_msg("%s: stuck after '%.*s'", schema, (int)n, t);
                t[n] = next[vkv_rng_below(&r, (uint32_t)k)];
                assert_true(vkv_json_matcher_advance(m, t + n, 1));
                n++;
            }
            if (!json_number(t, n, integer) || !in_bounds(b, t, n))
                fail_msg("%s: walked to '%.*s', out of bounds", schema, (int)n, t);
            vkv_json_matcher_free(m);
        }
        vkv_json_constraint_free(c);
    }
    printf("bounds: %zu prefixes over %zu bound sets, %zu brute forces\n", prefixes,
           sizeof bounds_cases / sizeof *bounds_cases, brute);
}

/* Nesting stops at VKV_JSON_CONSTRAINT_MAX_NEST, where only closing is offered. */
static void nesting_is_bounded(void **state)
{
    (void)state;
    enum { N = VKV_JSON_CONSTRAINT_MAX_NEST };
    char doc[8 * N + 64];
    /* json_object mode: N containers open at once, not one more */
    strcpy(doc, "{\"a\":");
    size_t n = strlen(doc);
    memset(doc + n, '[', N - 1);
    doc[n + N - 1] = 0;
    vkv_json_constraint *c = compile(NULL, NULL);
    vkv_json_matcher *m = vkv_json_matcher_new(c);
    assert_true(vkv_json_matcher_advance(m, doc, strlen(doc)));
    assert_false(vkv_json_matcher_advance(m, "[", 1));
    assert_false(vkv_json_matcher_advance(m, "{", 1));
    assert_true(vkv_json_matcher_advance(m, "1,\"s\",", 6));
    assert_false(vkv_json_matcher_advance(m, "[", 1));
    memset(doc, ']', N - 1);
    doc[N - 1] = '}';
    assert_true(vkv_json_matcher_advance(m, "2", 1));
    assert_true(vkv_json_matcher_advance(m, doc, N));
    assert_true(vkv_json_matcher_complete(m));
    vkv_json_matcher_free(m);
    vkv_json_constraint_free(c);
    /* a schema: a key whose value could not fit is not offered, '"' included */
    c = compile("{\"anyOf\": [{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}},"
                " {\"type\": \"object\", \"properties\": {\"k\": {\"$ref\": \"#\"}}, \"additionalProperties\": false}]}",
                NULL);
    m = vkv_json_matcher_new(c);
    memset(doc, '[', N - 1);
    assert_true(vkv_json_matcher_advance(m, doc, N - 1));
    assert_false(vkv_json_matcher_advance(m, "{\"", 2));
    assert_true(vkv_json_matcher_advance(m, "{}", 2));
    vkv_json_matcher_free(m);
    m = vkv_json_matcher_new(c);
    assert_true(vkv_json_matcher_advance(m, doc, N - 2));
    assert_true(vkv_json_matcher_advance(m, "{\"k\":{}}", 8));
    vkv_json_matcher_free(m);
    vkv_json_constraint_free(c);
    /* of two keys that start alike, the one whose value fits */
    c = compile("{\"anyOf\": [{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}},"
                " {\"type\": \"object\", \"properties\": {\"ka\": {\"type\": \"null\"}, \"kb\": {\"$ref\": \"#\"}},"
                " \"additionalProperties\": false}]}",
                NULL);
    m = vkv_json_matcher_new(c);
    assert_true(vkv_json_matcher_advance(m, doc, N - 1));
    assert_true(adv(m, "{\"k"));
    assert_false(adv(m, "b"));
    assert_true(adv(m, "a\": null}"));
    vkv_json_matcher_free(m);
    vkv_json_constraint_free(c);
}

static void clones_go_their_own_way(void **state)
{
    (void)state;
    vkv_json_constraint *c = compile(union_schema, NULL);
    vkv_json_matcher *m = vkv_json_matcher_new(c);
    assert_true(adv(m, "{\"item\": {\"name\": \"x\", "));
    vkv_json_matcher *k = vkv_json_matcher_clone(m);
    assert_true(adv(m, "\"age\": 1}}"));
    assert_true(vkv_json_matcher_complete(m));
    assert_false(vkv_json_matcher_complete(k));
    assert_false(adv(k, "\"age\": 1}}x"));
    assert_true(adv(k, "\"city\": \"Paris\"}}"));
    assert_true(vkv_json_matcher_complete(k));
    vkv_json_matcher_free(m);
    vkv_json_matcher_free(k);
    vkv_json_constraint_free(c);
}

/* ---- token masks ---- */

typedef struct vocab {
    vkv_token_bytes *tokens;
    size_t n;
    char *bytes; /* every token's bytes, in one block */
} vocab;

static void vocab_free(vocab *v)
{
    free(v->tokens);
    free(v->bytes);
}

/* Tokens made of JSON's pieces: every single byte (so any text can be
 * spelled), punctuation, literals, numbers, escapes, the schemas' keys,
 * UTF-8 whole and cut, and random joins of them; a special and an empty one. */
static vocab random_vocab(uint64_t seed, size_t n_joined)
{
    static const char *const pieces[] = {
        "{", "}", "[", "]", ",", ":", "\"", "\":", "\",", "{\"", "\"}", "\"]", "[\"", ", \"", "\": ", "\": \"",
        "},", "}]", "]}", "[{", "{}", "[]", "\"\"", "null", "true", "false", "nu", "ll", "tr", "ue", "fa", "lse",
        "0", "1", "7", "12", "-", "-1", ".", ".5", "e", "E", "+", "e-", "007", "42", "3.14", "1e5", " ", "  ", "\n",
        "\t", "\r\n", "    ", "\n    ", "                        ", "\\", "\\n", "\\\"", "\\u", "\\u00", "e9",
        "d83d", "\\ud83d", "\\ude00", "DE00", "\\/", "\\b", "\\x", "a", "b", "x", "hello", " world", "name", "age",
        "email", "tags", "role", "score", "admin", "user", "item", "city", "Paris", "value", "kids", "\"name\"",
        "\"age\":", "\"value\": ", "\"kids\": [", "na", "me", "\xc3\xa9", "\xc3", "\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
        "\xe6\x97", "\xa5", "\xf0\x9f\x98\x80", "\xf0\x9f", "\x98\x80", "\xff", "\xc0\x80", "\xed\xa0\x80", "\x7f",
        "\x01",
    };
    size_t n_pieces = sizeof pieces / sizeof *pieces, n = 255 + n_pieces + n_joined + 2;
    vocab v = {calloc(n, sizeof *v.tokens), 0, malloc(n * 64)};
    assert_true(v.tokens && v.bytes);
    char *o = v.bytes;
    for (int b = 1; b < 256; b++) {
        *o = (char)b;
        v.tokens[v.n++] = (vkv_token_bytes){o++, 1, false};
    }
    for (size_t i = 0; i < n_pieces; i++) {
        size_t len = strlen(pieces[i]);
        memcpy(o, pieces[i], len);
        v.tokens[v.n++] = (vkv_token_bytes){o, len, false};
        o += len;
    }
    vkv_rng r = vkv_rng_new(seed);
    for (size_t i = 0; i < n_joined; i++) {
        size_t len = 0;
        for (int k = 1 + (int)vkv_rng_below(&r, 3); k--;) {
            const char *p = pieces[vkv_rng_below(&r, (uint32_t)n_pieces)];
            size_t pl = strlen(p);
            if (len + pl > 60) break;
            memcpy(o + len, p, pl);
            len += pl;
        }
        v.tokens[v.n++] = (vkv_token_bytes){o, len, false};
        o += len;
    }
    memcpy(o, "<|end|>", 7);
    v.tokens[v.n++] = (vkv_token_bytes){o, 7, true};
    o += 7;
    v.tokens[v.n++] = (vkv_token_bytes){o, 0, false};
    return v;
}

/* The mask by brute force: each token's bytes fed to a copy. */
static void brute_allowed(const vkv_json_matcher *m, const vocab *v, bool *allowed)
{
    for (size_t i = 0; i < v->n; i++) {
        allowed[i] = false;
        if (v->tokens[i].special || !v->tokens[i].n) continue;
        vkv_json_matcher *k = vkv_json_matcher_clone(m);
        assert_non_null(k);
        allowed[i] = vkv_json_matcher_advance(k, v->tokens[i].p, v->tokens[i].n);
        vkv_json_matcher_free(k);
    }
}

/* Tokens that close things, weighted up so that walks end. */
static bool closer(const vkv_token_bytes *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (strchr("\"}]0123456789", t->p[i]) && t->p[i]) return true;
    return t->n == 4 && !memcmp(t->p, "null", 4);
}

/* A random allowed token, closers more likely the longer the walk; -1 when none. */
static long pick(vkv_rng *r, const vocab *v, const bool *allowed, size_t step)
{
    uint64_t total = 0, heavy = step < 30 ? 4 : step < 200 ? 32 : 1024;
    for (size_t i = 0; i < v->n; i++)
        if (allowed[i]) total += closer(&v->tokens[i]) ? heavy : 1;
    if (!total) return -1;
    uint64_t x = vkv_rng_u64(r) % total;
    for (size_t i = 0; i < v->n; i++) {
        if (!allowed[i]) continue;
        uint64_t w = closer(&v->tokens[i]) ? heavy : 1;
        if (x < w) return (long)i;
        x -= w;
    }
    return -1;
}

static void masks_agree_with_brute_force(void **state)
{
    (void)state;
    vocab v = random_vocab(7, 1200);
    vkv_json_vocab *tv = vkv_json_vocab_new(v.tokens, v.n);
    assert_non_null(tv);
    bool *fast = malloc(v.n), *slow = malloc(v.n);
    assert_true(fast && slow);
    const char *const schemas[] = {
        NULL, person_schema, tree_schema, union_schema, open_schema, list_schema,
        "{\"type\": \"array\", \"items\": {\"enum\": [\"name\", \"na\", \"n\", \"age\", \"a\\\"b\", 1, 12, 127, -1,"
        " 0.5, true, false, null, \"\u00e9\"]}}",
        zod_schema, bounded_schema, bounded_schema,
        "{\"type\": \"number\", \"minimum\": 1.2345671e-24, \"maximum\": 1.2345679e-24}"};
    vkv_rng r = vkv_rng_new(11);
    size_t states = 0;
    for (size_t s = 0; s < sizeof schemas / sizeof *schemas; s++) {
        vkv_json_constraint *c = compile(schemas[s], NULL);
        for (int w = 0; w < 3; w++) {
            vkv_json_matcher *m = vkv_json_matcher_new(c);
            for (size_t step = 0; step < 60 && !vkv_json_matcher_complete(m); step++) {
                assert_true(vkv_json_matcher_allowed(m, tv, fast));
                brute_allowed(m, &v, slow);
                states++;
                for (size_t i = 0; i < v.n; i++)
                    if (fast[i] != slow[i])
                        fail_msg("schema %zu, walk %d, step %zu: token %zu '%.*s': mask %d, brute force %d", s, w,
                                 step, i, (int)v.tokens[i].n, v.tokens[i].p, fast[i], slow[i]);
                long t = pick(&r, &v, fast, step);
                assert_true(t >= 0); /* never a dead end */
                assert_true(vkv_json_matcher_advance(m, v.tokens[t].p, v.tokens[t].n));
            }
            vkv_json_matcher_free(m);
        }
        vkv_json_constraint_free(c);
    }
    printf("masks: %zu states of %zu tokens agree with the brute force\n", states, v.n);
    free(fast);
    free(slow);
    vkv_json_vocab_free(tv);
    vocab_free(&v);
}

/* ---- random walks give valid JSON ---- */

static bool scalar_equal(const vkv_json *a, const vkv_json *b)
{
    if (a->type != b->type) return false;
    if (a->type == VKV_JSON_NUMBER) return a->number == b->number;
    if (a->type == VKV_JSON_STRING) return a->string_len == b->string_len && !memcmp(a->string, b->string, a->string_len);
    if (a->type == VKV_JSON_BOOL) return a->boolean == b->boolean;
    return a->type == VKV_JSON_NULL;
}

static bool has_type(const vkv_json *v, const char *t)
{
    if (!strcmp(t, "integer")) return v->type == VKV_JSON_NUMBER && v->number == floor(v->number);
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return !strcmp(t, names[v->type]);
}

/* JSON Schema's meaning for the subset, plus the matcher's order: declared keys in schema order, once. */
static bool valid(const vkv_json *v, const vkv_json *s, const vkv_json *root)
{
    const vkv_json *x;
    if ((x = vkv_json_get(s, "$ref")))
        return valid(v, strcmp(x->string, "#") ? vkv_json_get(vkv_json_get(root, "$defs"), x->string + 8) : root, root);
    if ((x = vkv_json_get(s, "anyOf"))) {
        for (size_t i = 0; i < x->n_items; i++)
            if (valid(v, x->items[i], root)) return true;
        return false;
    }
    if ((x = vkv_json_get(s, "enum"))) {
        bool in = false;
        for (size_t i = 0; i < x->n_items; i++) in |= scalar_equal(v, x->items[i]);
        if (!in) return false;
    }
    if ((x = vkv_json_get(s, "const")) && !scalar_equal(v, x)) return false;
    if (v->type == VKV_JSON_NUMBER) { /* the bounds, as a double reader sees them */
        double n = v->number;
        if (((x = vkv_json_get(s, "minimum")) && !(n >= x->number)) ||
            ((x = vkv_json_get(s, "exclusiveMinimum")) && !(n > x->number)) ||
            ((x = vkv_json_get(s, "maximum")) && !(n <= x->number)) ||
            ((x = vkv_json_get(s, "exclusiveMaximum")) && !(n < x->number)))
            return false;
    }
    if ((x = vkv_json_get(s, "type"))) {
        bool ok = x->type == VKV_JSON_STRING && has_type(v, x->string);
        for (size_t i = 0; x->type == VKV_JSON_ARRAY && i < x->n_items; i++) ok |= has_type(v, x->items[i]->string);
        if (!ok) return false;
    }
    if (v->type == VKV_JSON_OBJECT) {
        const vkv_json *props = vkv_json_get(s, "properties"), *extra = vkv_json_get(s, "additionalProperties");
        long last = -1;
        for (size_t i = 0; i < v->n_items; i++) {
            long at = -1;
            for (size_t j = 0; props && j < props->n_items; j++)
                if (!strcmp(props->keys[j], v->keys[i])) at = (long)j;
            if (at >= 0) {
                if (at <= last || !valid(v->items[i], props->items[at], root)) return false;
                last = at;
            } else if (extra && extra->type == VKV_JSON_BOOL && !extra->boolean) {
                return false;
            } else if (extra && extra->type == VKV_JSON_OBJECT && !valid(v->items[i], extra, root)) {
                return false;
            }
        }
        const vkv_json *req = vkv_json_get(s, "required");
        for (size_t i = 0; req && i < req->n_items; i++)
            if (!vkv_json_get(v, req->items[i]->string)) return false;
    }
    if (v->type == VKV_JSON_ARRAY) {
        const vkv_json *items = vkv_json_get(s, "items"), *lo = vkv_json_get(s, "minItems"), *hi = vkv_json_get(s, "maxItems");
        for (size_t i = 0; items && i < v->n_items; i++)
            if (!valid(v->items[i], items, root)) return false;
        if ((lo && v->n_items < lo->number) || (hi && v->n_items > hi->number)) return false;
    }
    return true;
}

static bool utf8_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t len = vkv_utf8_valid_len((const unsigned char *)s + i, n - i);
        if (!len) return false;
        i += len;
    }
    return true;
}

static void random_walks_give_valid_json(void **state)
{
    (void)state;
    vocab v = random_vocab(3, 2000);
    vkv_json_vocab *tv = vkv_json_vocab_new(v.tokens, v.n);
    bool *allowed = malloc(v.n);
    assert_true(tv && allowed);
    const char *const schemas[] = {NULL, person_schema, tree_schema, union_schema, open_schema, list_schema,
                                   "{\"type\": \"number\"}", "{\"enum\": [1, 12, \"x\", null]}", "{}", zod_schema,
                                   bounded_schema,
                                   "{\"type\": \"number\", \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 1}",
                                   "{\"type\": \"integer\", \"minimum\": 10, \"maximum\": 99}",
                                   "{\"type\": \"number\", \"minimum\": -1e-300, \"maximum\": -1e-301}"};
    vkv_rng r = vkv_rng_new(5);
    size_t walks = 0, done = 0;
    for (size_t s = 0; s < sizeof schemas / sizeof *schemas; s++) {
        vkv_json_doc *sd = NULL;
        vkv_json_constraint *c = compile(schemas[s], &sd);
        for (int w = 0; w < 40; w++) {
            vkv_json_matcher *m = vkv_json_matcher_new(c);
            char out[65536];
            size_t n = 0, step = 0;
            for (; step < 2000 && !vkv_json_matcher_complete(m); step++) {
                assert_true(vkv_json_matcher_allowed(m, tv, allowed));
                long t = pick(&r, &v, allowed, step);
                assert_true(t >= 0); /* a prefix the matcher took can always go on */
                if (n + v.tokens[t].n > sizeof out) break;
                assert_true(vkv_json_matcher_advance(m, v.tokens[t].p, v.tokens[t].n));
                memcpy(out + n, v.tokens[t].p, v.tokens[t].n);
                n += v.tokens[t].n;
            }
            walks++;
            if (vkv_json_matcher_complete(m)) {
                done++;
                vkv_json_doc *d;
                if (vkv_json_parse(out, n, &d)) fail_msg("schema %zu: '%.*s' is not JSON", s, (int)n, out);
                const vkv_json *root = vkv_json_root(d);
                assert_true(utf8_text(out, n));
                if (sd) {
                    if (!valid(root, vkv_json_root(sd), vkv_json_root(sd)))
                        fail_msg("schema %zu: '%.*s' does not validate", s, (int)n, out);
                } else {
                    assert_int_equal(root->type, VKV_JSON_OBJECT);
                }
                vkv_json_free(d);
            }
            vkv_json_matcher_free(m);
        }
        vkv_json_constraint_free(c);
        vkv_json_free(sd);
    }
    printf("walks: %zu of %zu ended, each valid\n", done, walks);
    assert_true(done * 10 >= walks * 9);
    free(allowed);
    vkv_json_vocab_free(tv);
    vocab_free(&v);
}

/* ---- speed ---- */

/* ~150K tokens like a large BPE vocabulary's: words with and without a
 * leading space, punctuation runs, digits, white space runs, UTF-8 pieces
 * (CJK, accented, emoji, cut ones), lengths 1 to 16. */
static vocab big_vocab(size_t n)
{
    vocab v = {calloc(n, sizeof *v.tokens), 0, malloc(n * 16)};
    assert_true(v.tokens && v.bytes);
    vkv_rng r = vkv_rng_new(42);
    char *o = v.bytes;
    static const char punct[] = "{}[],:\"'.;!?()-_/\\*+=<>#@&%$|~`";
    for (size_t i = 0; i < n; i++) {
        size_t len = 0, want = 1 + vkv_rng_below(&r, 16);
        uint32_t kind = vkv_rng_below(&r, 100);
        if (kind < 45) { /* a word, half with a leading space */
            if (vkv_rng_below(&r, 2)) o[len++] = ' ';
            while (len < want) o[len++] = (char)((vkv_rng_below(&r, 5) ? 'a' : 'A') + vkv_rng_below(&r, 26));
        } else if (kind < 55) { /* punctuation */
            while (len < want && len < 4) o[len++] = punct[vkv_rng_below(&r, sizeof punct - 1)];
        } else if (kind < 63) { /* digits */
            while (len < want && len < 6) o[len++] = (char)('0' + vkv_rng_below(&r, 10));
        } else if (kind < 68) { /* white space */
            o[len++] = vkv_rng_below(&r, 2) ? '\n' : ' ';
            while (len < want) o[len++] = vkv_rng_below(&r, 8) ? ' ' : '\t';
        } else { /* UTF-8: whole characters, sometimes cut at either end */
            while (len + 4 <= want || !len) {
                char ch[4];
                uint32_t cp = vkv_rng_below(&r, 4) ? 0x4e00 + vkv_rng_below(&r, 0x5000)
                              : vkv_rng_below(&r, 2) ? 0xc0 + vkv_rng_below(&r, 0x100) : 0x1f600 + vkv_rng_below(&r, 80);
                size_t cl = vkv_utf8_encode(cp, ch);
                memcpy(o + len, ch, cl);
                len += cl;
            }
            if (vkv_rng_below(&r, 4) == 0 && len > 1) len--;
            if (vkv_rng_below(&r, 8) == 0 && len > 1) {
                memmove(o, o + 1, --len);
            }
        }
        v.tokens[v.n++] = (vkv_token_bytes){o, len, false};
        o += len;
    }
    return v;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void masks_are_fast(void **state)
{
    (void)state;
    enum { N = 150000, CALLS = 20 };
    vocab v = big_vocab(N);
    double t0 = now_ms();
    vkv_json_vocab *tv = vkv_json_vocab_new(v.tokens, v.n);
    double build = now_ms() - t0;
    bool *allowed = malloc(v.n);
    assert_true(tv && allowed);
    static const struct { const char *schema, *prefix, *what; } cases[] = {
        {NULL, "{\"text\": \"Once upon", "in a string"},
        {NULL, "{", "at a key"},
        {NULL, "{\"a\": ", "at a value"},
        {NULL, "{\"a\": 12", "in a number"},
        {NULL, "{\"ke", "in a key"},
        {NULL, "", "at the start"},
        {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}",
         "{\"name\": \"Jo", "in a schema's string"},
        {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}}",
         "{", "at a schema's key"},
        {zod_schema, "{\"n\": ", "at a bounded integer"},
        {zod_schema, "{\"n\": 9007", "in a bounded integer"},
        {zod_schema, "{\"n\": 900719925474099", "at an integer's bound"},
        {zod_schema, "{\"n\": 1, \"p\": 0.", "in a bounded fraction"},
        {zod_schema, "{\"n\": 1, \"p\": 1", "at a number's bound"},
        {zod_schema, "{\"n\": 1, \"p\": 0.5e", "in a bounded exponent"},
        {bounded_schema, "[", "at anyOf's bounds"},
        {bounded_schema, "[1", "in anyOf's bounds"},
        {"{\"type\": \"array\", \"maxItems\": 6, \"items\": {\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"integer\"},"
         " {\"type\": \"number\"}, {\"type\": [\"number\", \"null\"]}, {\"enum\": [1, 7, 12, 2000, \"x\"]}]}}",
         "[1", "in that anyOf unbounded"},
    };
    double total = 0, worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vkv_json_constraint *c = compile(cases[i].schema, NULL);
        vkv_json_matcher *m = vkv_json_matcher_new(c);
        assert_true(vkv_json_matcher_advance(m, cases[i].prefix, strlen(cases[i].prefix)));
        assert_true(vkv_json_matcher_allowed(m, tv, allowed)); /* warm */
        size_t count = 0;
        for (size_t k = 0; k < v.n; k++) count += allowed[k];
        t0 = now_ms();
        for (int k = 0; k < CALLS; k++) assert_true(vkv_json_matcher_allowed(m, tv, allowed));
        double ms = (now_ms() - t0) / CALLS;
        printf("allowed() %-22s %7.3f ms per call, %6zu of %zu tokens allowed\n", cases[i].what, ms, count, v.n);
        total += ms;
        worst = ms > worst ? ms : worst;
        vkv_json_matcher_free(m);
        vkv_json_constraint_free(c);
    }
    printf("allowed(): %.3f ms per call on average, %.3f at worst; the vocabulary's trie built in %.1f ms\n",
           total / (sizeof cases / sizeof *cases), worst, build);
    free(allowed);
    vkv_json_vocab_free(tv);
    vocab_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compile_takes_the_subset),
        cmocka_unit_test(compile_refuses_by_name),
        cmocka_unit_test(json_object_mode),
        cmocka_unit_test(whitespace_is_capped),
        cmocka_unit_test(strings_are_json_strings),
        cmocka_unit_test(numbers_and_integers),
        cmocka_unit_test(numbers_within_bounds),
        cmocka_unit_test(objects_follow_properties),
        cmocka_unit_test(enum_const_and_types),
        cmocka_unit_test(any_of_and_refs),
        cmocka_unit_test(number_bounds_are_exact),
        cmocka_unit_test(nesting_is_bounded),
        cmocka_unit_test(clones_go_their_own_way),
        cmocka_unit_test(masks_agree_with_brute_force),
        cmocka_unit_test(random_walks_give_valid_json),
        cmocka_unit_test(masks_are_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
