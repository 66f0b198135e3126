/* Hugging Face safetensors reader (over mmap or a memory buffer): one file,
 * or a checkpoint folder (one `model.safetensors`, or the shards a
 * `model.safetensors.index.json` names), behind one lookup.
 *
 * File layout (docs/ARCHITECTURE.md §1, "Hugging Face checkpoints"):
 *   u64 little-endian N | N bytes of JSON header | data section
 * The header is an object: each member but `__metadata__` is a tensor,
 *   "name": {"dtype": "F16", "shape": [rows, cols], "data_offsets": [begin, end]}
 * with begin and end relative to the data section; `__metadata__`, when
 * present, maps names to strings.
 *
 * Like the GGUF reader, everything is checked at open: the header length
 * (at most 100 MB, and inside the file), every dtype, shape and offset
 * (begin <= end, end inside the file, end - begin the shape's bytes, no two
 * tensors overlapping; gaps are allowed), duplicate names (in a file and
 * across shards), and each tensor of an index in the shard it names. Errors
 * are VKV_ERR_FORMAT (VKV_ERR_IO for files that cannot be read) with a
 * message naming the file and the tensor or field. A dtype the runtime does
 * not compute in (I64, F64, U8, F8_E4M3, ...) still opens: it is refused, by
 * name, only when the tensor is used (vkv_st_require_float). */
#ifndef VKV_SAFETENSORS_H
#define VKV_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Every dtype of the format whose elements are whole bytes; the first three
 * are the ones vkvector reads weights from. (The sub-byte F4 and F6 types of
 * newer files are unknown dtypes here: such a file does not open.) */
typedef enum vkv_st_dtype {
    VKV_ST_F32,
    VKV_ST_F16,
    VKV_ST_BF16,
    VKV_ST_F64,
    VKV_ST_I64,
    VKV_ST_U64,
    VKV_ST_I32,
    VKV_ST_U32,
    VKV_ST_I16,
    VKV_ST_U16,
    VKV_ST_I8,
    VKV_ST_U8,
    VKV_ST_BOOL,
    VKV_ST_F8_E4M3,
    VKV_ST_F8_E5M2,
    VKV_ST_F8_E8M0,
    VKV_ST_DTYPE_COUNT,
} vkv_st_dtype;

#define VKV_ST_MAX_DIMS 8
/* The format's own bound on the header (its reference reader refuses more). */
#define VKV_ST_MAX_HEADER_BYTES ((uint64_t)100000000)
#define VKV_ST_INDEX_FILE "model.safetensors.index.json"
#define VKV_ST_SINGLE_FILE "model.safetensors"

typedef struct vkv_st_tensor {
    const char *name;                /* NUL-terminated */
    vkv_st_dtype dtype;
    uint32_t n_dims;                 /* 0 for a scalar */
    uint64_t shape[VKV_ST_MAX_DIMS]; /* row-major as written: shape[n_dims - 1] is contiguous */
    uint64_t n_elems;
    uint64_t begin, nbytes;          /* in the data section of its file */
    const void *data;                /* points into the mapping; may be unaligned */
    const char *file;                /* the path (or name) of the file holding it */
} vkv_st_tensor;

typedef struct vkv_st vkv_st;

/* One .safetensors file. */
vkv_status vkv_st_open(const char *path, vkv_st **out);
/* The same over a caller's buffer, which must outlive the handle; name is
 * what messages call it. */
vkv_status vkv_st_open_memory(const void *data, size_t size, const char *name, vkv_st **out);
/* A checkpoint folder: its model.safetensors.index.json when present (every
 * shard its weight_map names, plain file names in the folder), else its
 * model.safetensors. */
vkv_status vkv_st_open_dir(const char *dir, vkv_st **out);
void vkv_st_close(vkv_st *st);

/* Tensors of every file, in file order (shards in the order the index first
 * names them). */
size_t vkv_st_n_tensors(const vkv_st *st);
const vkv_st_tensor *vkv_st_tensor_at(const vkv_st *st, size_t i);
const vkv_st_tensor *vkv_st_find(const vkv_st *st, const char *name); /* NULL if absent */
size_t vkv_st_n_files(const vkv_st *st);

/* A `__metadata__` value of any file (the first file that has the key), NULL
 * when absent. */
const char *vkv_st_metadata(const vkv_st *st, const char *key);

/* Drops a tensor's mapped pages once it is on the device (as
 * vkv_gguf_release does): host memory then holds at most the slice being
 * uploaded. Data outside every mapping is ignored. */
void vkv_st_release(const vkv_st *st, const void *data, uint64_t size);

const char *vkv_st_dtype_name(vkv_st_dtype t);
size_t vkv_st_dtype_size(vkv_st_dtype t);
/* VKV_OK for F32, F16 and BF16; otherwise VKV_ERR_UNSUPPORTED naming the
 * tensor, its file and its dtype. */
vkv_status vkv_st_require_float(const vkv_st_tensor *t);

#endif
