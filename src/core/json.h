/* A small JSON reader: parses a whole document into a tree of values held in
 * one allocation arena. Enough for golden files, LongBench JSONL lines and
 * tier dumps; strings are decoded (escapes, \u surrogate pairs) to UTF-8. */
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

#endif
