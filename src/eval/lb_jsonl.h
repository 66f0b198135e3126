/* LongBench-format JSONL for the harness and its report: line-by-line
 * reading (each line parsed on its own, malformed ones reported by number)
 * and the fields of a sample or a prediction. */
#ifndef VKV_EVAL_LB_JSONL_H
#define VKV_EVAL_LB_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/json.h"

typedef struct jsonl_reader {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    size_t line_no;      /* of the line last returned (1-based) */
    vkv_status error;    /* why jsonl_next last returned false: VKV_OK at the end of the file */
} jsonl_reader;

/* Opens a regular file (a device or FIFO is refused: it may never end);
 * false with the reason as vkv_last_error(). */
bool jsonl_open(jsonl_reader *r, const char *path);
/* The next non-blank line, parsed into *doc (a JSON object): returns true
 * with *st = VKV_OK, or with *st = VKV_ERR_FORMAT and *doc NULL for a
 * malformed line (vkv_last_error() says why; r->line_no is its number): not
 * JSON, not an object, invalid UTF-8, or longer than VKV_MAX_LINE_BYTES (its
 * rest is skipped unread). False at the end of the file, or with r->error
 * set (and the message in vkv_last_error()) on a read error. */
bool jsonl_next(jsonl_reader *r, vkv_json_doc **doc, vkv_status *st);
void jsonl_close(jsonl_reader *r);

/* An array of strings (numbers are written as Python's str() would for
 * integers, %.17g otherwise): malloc'ed copies, NULL-terminated list. A
 * missing member or null gives an empty list; anything else is false. */
bool json_string_list(const vkv_json *v, char ***out, size_t *n);
void string_list_free(char **l);

/* The members of a LongBench sample (LongBench's data lines)
 * have their types: "context" and "_id" strings, "input" a string or null,
 * "answers" an array of strings, "all_classes" null or an array of strings,
 * "dataset" a string and "length" a whole number or null when present. A
 * row that breaks one is malformed: NULL when it holds, else the reason. */
const char *lb_sample_check(const vkv_json *row);

/* A string member, or NULL when absent / not a string. */
const char *json_get_str(const vkv_json *obj, const char *key);

#endif
