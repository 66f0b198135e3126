/* GGUF v2/v3 reader (over mmap or a memory buffer) and writer.
 *
 * The reader validates the whole header up front: every count, string length,
 * array length, tensor dimension, offset and byte range is checked against the
 * file size before anything is exposed, so later accessors cannot read out of
 * bounds. Malformed files give VKV_ERR_FORMAT with a message naming the field
 * and the byte offset. */
#ifndef VKV_GGUF_H
#define VKV_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum vkv_gguf_type {
    VKV_GGUF_UINT8 = 0,
    VKV_GGUF_INT8 = 1,
    VKV_GGUF_UINT16 = 2,
    VKV_GGUF_INT16 = 3,
    VKV_GGUF_UINT32 = 4,
    VKV_GGUF_INT32 = 5,
    VKV_GGUF_FLOAT32 = 6,
    VKV_GGUF_BOOL = 7,
    VKV_GGUF_STRING = 8,
    VKV_GGUF_ARRAY = 9,
    VKV_GGUF_UINT64 = 10,
    VKV_GGUF_INT64 = 11,
    VKV_GGUF_FLOAT64 = 12,
} vkv_gguf_type;

#define VKV_GGUF_MAX_DIMS 4

/* A string inside the file: not NUL-terminated. */
typedef struct vkv_gguf_str {
    const char *data;
    uint64_t len;
} vkv_gguf_str;

typedef struct vkv_gguf_tensor {
    char *name;                      /* NUL-terminated copy */
    uint32_t type;                   /* vkv_dtype number */
    uint32_t n_dims;
    uint64_t ne[VKV_GGUF_MAX_DIMS];  /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint64_t offset;                 /* from the start of the data section */
    uint64_t nbytes;
    const void *data;                /* points into the mapping */
} vkv_gguf_tensor;

typedef struct vkv_gguf vkv_gguf;

vkv_status vkv_gguf_open(const char *path, vkv_gguf **out);
/* The buffer must outlive the handle (it is not copied). */
vkv_status vkv_gguf_open_memory(const void *data, size_t size, vkv_gguf **out);
void vkv_gguf_close(vkv_gguf *g);

uint32_t vkv_gguf_version(const vkv_gguf *g);
uint64_t vkv_gguf_alignment(const vkv_gguf *g);

/* Metadata. Keys are looked up by exact name; -1 when absent. */
int64_t vkv_gguf_n_kv(const vkv_gguf *g);
int64_t vkv_gguf_find_key(const vkv_gguf *g, const char *key);
vkv_gguf_str vkv_gguf_key_name(const vkv_gguf *g, int64_t i);
vkv_gguf_type vkv_gguf_kv_type(const vkv_gguf *g, int64_t i);
/* The file offset of entry i's value (a scalar's bytes, a string's length
 * field, an array's first element), -1 when i is out of range; and the file's bytes
 * (what a checksum over the file reads). */
int64_t vkv_gguf_kv_value_offset(const vkv_gguf *g, int64_t i);
const uint8_t *vkv_gguf_bytes(const vkv_gguf *g, size_t *size);

/* Typed getters: VKV_OK, or VKV_ERR_FORMAT if the key is missing or has an
 * incompatible type (the message names the key). Integer getters accept any
 * integer type whose value fits; get_f32 accepts f32/f64 and integers. */
vkv_status vkv_gguf_get_u32(const vkv_gguf *g, const char *key, uint32_t *out);
vkv_status vkv_gguf_get_u64(const vkv_gguf *g, const char *key, uint64_t *out);
vkv_status vkv_gguf_get_i64(const vkv_gguf *g, const char *key, int64_t *out);
vkv_status vkv_gguf_get_f32(const vkv_gguf *g, const char *key, float *out);
vkv_status vkv_gguf_get_bool(const vkv_gguf *g, const char *key, bool *out);
vkv_status vkv_gguf_get_str(const vkv_gguf *g, const char *key, vkv_gguf_str *out);
/* Same, but a missing key leaves *out unchanged and returns VKV_OK. */
vkv_status vkv_gguf_get_u32_opt(const vkv_gguf *g, const char *key, uint32_t *out);
vkv_status vkv_gguf_get_f32_opt(const vkv_gguf *g, const char *key, float *out);
vkv_status vkv_gguf_get_bool_opt(const vkv_gguf *g, const char *key, bool *out);

/* Arrays: element type and count. For numeric element types *data points at
 * the packed little-endian elements inside the mapping (may be unaligned: copy
 * with memcpy). For string arrays use vkv_gguf_arr_str. */
vkv_status vkv_gguf_get_arr(const vkv_gguf *g, const char *key, vkv_gguf_type *elem_type,
                            uint64_t *count, const void **data);
/* i-th string of a string array (bounds-checked; O(1) after open). */
vkv_status vkv_gguf_arr_str(const vkv_gguf *g, const char *key, uint64_t i, vkv_gguf_str *out);

/* Tensors. */
int64_t vkv_gguf_n_tensors(const vkv_gguf *g);
const vkv_gguf_tensor *vkv_gguf_tensor_at(const vkv_gguf *g, int64_t i);
const vkv_gguf_tensor *vkv_gguf_find_tensor(const vkv_gguf *g, const char *name); /* NULL if absent */
/* Drops the pages of [data, data + size) of a file opened with vkv_gguf_open
 * from the process's memory once they are copied elsewhere (weights on the
 * device), so they stop counting toward its resident size; touching them
 * again reads the file again. No effect on a caller's buffer. */
void vkv_gguf_release(const vkv_gguf *g, const void *data, uint64_t size);

/* Writer: collects metadata and tensors in memory order, then writes a GGUF v3
 * file with the given alignment (32 if 0). Copies everything it is given. */
typedef struct vkv_gguf_writer vkv_gguf_writer;
vkv_gguf_writer *vkv_gguf_writer_new(uint32_t alignment);
void vkv_gguf_writer_free(vkv_gguf_writer *w);
vkv_status vkv_gguf_set_u32(vkv_gguf_writer *w, const char *key, uint32_t v);
vkv_status vkv_gguf_set_i32(vkv_gguf_writer *w, const char *key, int32_t v);
vkv_status vkv_gguf_set_u64(vkv_gguf_writer *w, const char *key, uint64_t v);
vkv_status vkv_gguf_set_f32(vkv_gguf_writer *w, const char *key, float v);
vkv_status vkv_gguf_set_bool(vkv_gguf_writer *w, const char *key, bool v);
vkv_status vkv_gguf_set_str(vkv_gguf_writer *w, const char *key, const char *v);
vkv_status vkv_gguf_set_arr(vkv_gguf_writer *w, const char *key, vkv_gguf_type elem_type,
                            const void *data, uint64_t count);
vkv_status vkv_gguf_set_arr_str(vkv_gguf_writer *w, const char *key, const char *const *strs,
                                uint64_t count);
vkv_status vkv_gguf_add_tensor(vkv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                               const uint64_t *ne, const void *data, uint64_t nbytes);
/* Serialise to a heap buffer (caller frees) or to a file. */
vkv_status vkv_gguf_writer_to_memory(vkv_gguf_writer *w, void **data, size_t *size);
vkv_status vkv_gguf_writer_to_file(vkv_gguf_writer *w, const char *path);

#endif
