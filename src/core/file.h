/* Reading a whole file, or one line of a file, into memory: never more than
 * a cap the caller chooses, and only from a regular file unless the caller
 * hands over a stream the user asked for (standard input as "-"). A device
 * such as /dev/zero, a FIFO or a runaway file then fails fast with a message
 * naming it, instead of growing until the host runs out of memory. */
#ifndef VKV_FILE_H
#define VKV_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

/* Caps for callers. A whole document (a JSON file, a tier dump, a text to
 * tokenize) is at most 1 GiB: far beyond any real one, and still a size the
 * host can hold. One JSONL line (a LongBench sample with its whole context, a
 * corpus document) is at most 64 MiB: the longest LongBench contexts are a
 * few MiB. */
#define VKV_MAX_DOC_BYTES ((size_t)1 << 30)
#define VKV_MAX_LINE_BYTES ((size_t)64 << 20)

/* *data: the file's bytes plus a terminating NUL (malloc'ed; free() it),
 * *len: their number. VKV_ERR_IO naming the file and the reason: it cannot
 * be opened or read, is not a regular file, or holds more than max_bytes
 * (the message gives the cap). VKV_ERR_OOM when the host cannot hold it. */
vkv_status vkv_read_file(const char *path, size_t max_bytes, char **data, size_t *len);

/* The same for a stream already open (standard input when the user asked for
 * it); name is what messages call it. */
vkv_status vkv_read_stream(FILE *f, const char *name, size_t max_bytes, char **data, size_t *len);

/* fopen(path, "rb") when path is a regular file; otherwise NULL with
 * VKV_ERR_IO recorded (vkv_last_error() names the file and why; `what`, when
 * not NULL, says what the file is for: "cannot open corpus file 'x'").
 * Checked before opening, so a FIFO never blocks the caller. */
FILE *vkv_open_regular(const char *path, const char *what);

/* The next line of f, its '\n' included when present, into *buf (grown as
 * needed; *cap is its size; free() it at the end) with a terminating NUL.
 * VKV_OK with *len > 0 for a line, VKV_OK with *len == 0 at the end of the
 * stream. VKV_ERR_FORMAT for a line longer than max_bytes (without its
 * newline; the message gives the cap), VKV_ERR_IO on a read error: the
 * caller adds the file and line number as context, and stops reading (the
 * stream is left mid-line). */
vkv_status vkv_read_line(FILE *f, size_t max_bytes, char **buf, size_t *cap, size_t *len);

/* Maps a regular file read-only (a private mapping, which keeps the file
 * after the descriptor is closed): *map and *size; an empty file gives NULL
 * and 0 (nothing to unmap). VKV_ERR_IO naming the file and why, each message
 * prefixed with `who` ("gguf: cannot open 'x': ..."). Opened without
 * blocking, so a FIFO is refused instead of hanging the open. */
vkv_status vkv_map_file(const char *path, const char *who, void **map, size_t *size);

/* Drops the pages of [data, data + size) from memory once they are on the
 * device (whole pages, rounded outwards: the mapping is private and
 * read-only, so a neighbour's dropped page is read back from the file, never
 * lost). A range outside map[0, map_size) is ignored. */
void vkv_map_release(const void *map, size_t map_size, const void *data, uint64_t size);

#endif
