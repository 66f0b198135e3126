/* A small JSON reader, in two forms over one lexer:
 * - a pull reader that walks a whole text value by value, for documents too
 *   big for a tree (a tier dump of a long context holds millions of numbers,
 *   which its reader parses straight into flat arrays);
 * - a tree of values held in one allocation arena, built on the pull reader,
 *   for golden files and LongBench JSONL lines.
 * Strings are decoded (escapes, \u surrogate pairs) to UTF-8. Syntax errors
 * give the line and column and what the grammar wanted there. */
#ifndef VKV_JSON_H
#define VKV_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum vkv_json_type {
    VKV_JSON_NULL,
    VKV_JSON_BOOL,
    VKV_JSON_NUMBER,
    VKV_JSON_STRING,
    VKV_JSON_ARRAY,
    VKV_JSON_OBJECT,
} vkv_json_type;

typedef struct vkv_json vkv_json;
struct vkv_json {
    vkv_json_type type;
    bool boolean;
    double number;
    char *string;        /* NUL-terminated UTF-8 (may contain NULs: see string_len) */
    size_t string_len;
    /* arrays and objects: children in order; objects also have keys */
    vkv_json **items;
    char **keys;
    size_t n_items;
};

typedef struct vkv_json_doc vkv_json_doc;

/* Parses text[0, len). On error returns VKV_ERR_FORMAT with the line and
 * column of the problem. */
vkv_status vkv_json_parse(const char *text, size_t len, vkv_json_doc **out);
vkv_status vkv_json_parse_file(const char *path, vkv_json_doc **out);
void vkv_json_free(vkv_json_doc *doc);
const vkv_json *vkv_json_root(const vkv_json_doc *doc);

/* Member of an object by key, NULL if absent or not an object. */
const vkv_json *vkv_json_get(const vkv_json *obj, const char *key);
/* Element i of an array, NULL if out of range or not an array. */
const vkv_json *vkv_json_at(const vkv_json *arr, size_t i);
/* "null", "a boolean", "a number", "a string", "an array", "an object": for
 * messages saying what a value is instead of what was wanted. */
const char *vkv_json_type_name(vkv_json_type t);
/* A non-negative integer a double holds exactly (below 2^53): NULL with *out
 * set; else what the value is instead, for a message ("negative", "not an
 * integer", or its type's name). */
const char *vkv_json_as_uint(const vkv_json *v, uint64_t *out);

/* ---- the pull reader ---- */

typedef struct vkv_json_reader {
    const char *start, *s, *end; /* the text and the read position */
    char *buf;                   /* the last string or key read, decoded (NUL-terminated) */
    size_t buf_len, buf_cap;
    char where[64];              /* prefixed to messages, e.g. "layer 3 head 1: " */
    const char *field;           /* the member being read, named in syntax errors inside it */
    int depth;
} vkv_json_reader;

void vkv_json_reader_init(vkv_json_reader *r, const char *text, size_t len);
void vkv_json_reader_free(vkv_json_reader *r);

/* Skips white space. */
void vkv_json_ws(vkv_json_reader *r);
/* A syntax error at the read position: `expected` says what the grammar
 * wanted there ("':'"). At the end of the text it says the file is cut. */
vkv_status vkv_json_syntax(vkv_json_reader *r, const char *expected);
/* A well-formed value that is not what the caller's format says, at `at`. */
vkv_status vkv_json_field_error(vkv_json_reader *r, const char *at, const char *fmt, ...) VKV_PRINTF(3, 4);

/* The value at the read position (after vkv_json_ws). */
vkv_status vkv_json_read_string(vkv_json_reader *r);      /* at '"': into r->buf, r->buf_len */
vkv_status vkv_json_read_number(vkv_json_reader *r, double *out);
bool vkv_json_number_ahead(const vkv_json_reader *r);    /* '-' or a digit */
bool vkv_json_literal(vkv_json_reader *r, const char *lit); /* consumes lit if it is there */
/* A literal (true, false, null) cut by the end of the text is a syntax error
 * (a truncation, not a wrong value); VKV_OK otherwise. */
vkv_status vkv_json_cut_literal(vkv_json_reader *r);
vkv_status vkv_json_skip_value(vkv_json_reader *r);

/* Members of an object whose '{' was consumed: call with *first = true; each
 * call leaves the key in r->buf and the read position at its value, or sets
 * *done after the closing '}'. */
vkv_status vkv_json_object_next(vkv_json_reader *r, bool *first, bool *done);
/* Elements of an array whose '[' was consumed, the same way. */
vkv_status vkv_json_array_next(vkv_json_reader *r, bool *first, bool *done);

#endif
