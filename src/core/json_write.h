/* A small streaming JSON writer: keeps track of commas and nesting so callers
 * write values in order. Output goes to a FILE. */
#ifndef VKV_JSON_WRITE_H
#define VKV_JSON_WRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define VKV_JSON_MAX_DEPTH 32

typedef struct vkv_json_writer {
    FILE *f;
    int depth;
    bool first[VKV_JSON_MAX_DEPTH]; /* no value written yet at this level */
    bool pretty;
    bool after_key; /* a key was written; its value comes next */
} vkv_json_writer;

void vkv_json_init(vkv_json_writer *w, FILE *f, bool pretty);
void vkv_json_begin_object(vkv_json_writer *w);
void vkv_json_end_object(vkv_json_writer *w);
void vkv_json_begin_array(vkv_json_writer *w);
void vkv_json_end_array(vkv_json_writer *w);
/* Writes "key": inside an object; the next value call writes its value. */
void vkv_json_key(vkv_json_writer *w, const char *key);
void vkv_json_str(vkv_json_writer *w, const char *s);
void vkv_json_strn(vkv_json_writer *w, const char *s, size_t n);
void vkv_json_int(vkv_json_writer *w, int64_t v);
void vkv_json_uint(vkv_json_writer *w, uint64_t v);
/* Non-finite numbers are written as null (JSON has no NaN). */
void vkv_json_num(vkv_json_writer *w, double v);
void vkv_json_bool(vkv_json_writer *w, bool v);
void vkv_json_null(vkv_json_writer *w);
/* Writes a string escaped for JSON (with quotes) to f; bytes that are not
 * valid UTF-8 become U+FFFD. */
void vkv_json_escape(FILE *f, const char *s, size_t n);

#endif
