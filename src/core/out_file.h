/* The one way the program writes files (docs/ARCHITECTURE.md §6).
 *
 * A file is written to a temporary file beside its target (same directory,
 * a unique hidden name), flushed, fsync'ed and renamed over the target, so a
 * reader never sees half a file and a failure leaves the old file (or none)
 * in place: the temporary file is removed and the error names the target and
 * the reason. A target that is not a regular file (a device such as
 * /dev/null or /dev/full, a pipe, /dev/stdout) cannot be renamed over: it is
 * written in place, every write and the close checked.
 *
 * Outputs are checked before the work that fills them (vkv_out_check), so a
 * directory, a missing directory or a read-only one is refused at once. */
#ifndef VKV_OUT_FILE_H
#define VKV_OUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

typedef struct vkv_out {
    FILE *f;    /* write through this; NULL once committed or dropped */
    char *path; /* the target as given: what messages name */
    char *dest; /* what the temporary file is renamed to (symbolic links resolved) */
    char *tmp;  /* the temporary file; NULL when the target is written in place */
    struct vkv_out_sink *sink; /* under f: the descriptor and the first write error's errno */
} vkv_out;

/* VKV_OK when path can be written; else VKV_ERR_IO (VKV_ERR_ARG for an empty
 * path) with a message naming `option` ("--out", "-o"; NULL for none) and
 * the path: it is a directory, its directory is missing or not writable. A
 * regular target is checked by creating and removing a file beside it (so
 * the check holds for root too); nothing is left behind. */
vkv_status vkv_out_check(const char *option, const char *path);

/* The same for a results file appended to (vkv_append_open): an existing
 * file need only be writable itself; a new one, creatable. */
vkv_status vkv_append_check(const char *option, const char *path);

/* Starts writing path: o->f is open for writing ("wb"). VKV_ERR_IO naming
 * path when the file cannot be created. */
vkv_status vkv_out_open(vkv_out *o, const char *path);

/* Ends the file: flushes, checks every write, fsyncs and renames it into
 * place. On any failure nothing is left but the old target (the temporary
 * file is removed) and VKV_ERR_IO names the target and the reason. o is
 * closed either way. */
vkv_status vkv_out_commit(vkv_out *o);

/* Abandons the file (a failure of the work that filled it): the temporary
 * file is removed, the target untouched. Does nothing on a closed o. */
void vkv_out_drop(vkv_out *o);

/* vkv_out_open, one buffer, vkv_out_commit. */
vkv_status vkv_out_write_file(const char *path, const void *data, size_t n);

/* Results files appended to one record at a time (resumable runs): opened
 * "ab"; vkv_append writes one record, flushes and fsyncs it. Both fail with
 * VKV_ERR_IO naming path. */
vkv_status vkv_append_open(const char *path, FILE **f);
vkv_status vkv_append(FILE *f, const char *path, const void *data, size_t n);

/* Flushes standard output: false when any write to it failed so far (the
 * reason is kept for vkv_close_stdout). For loops that stream to it. */
bool vkv_stdout_ok(void);

/* Standard output at the end of the program: flushed and closed, every
 * earlier write checked. VKV_ERR_IO ("error writing standard output: ...")
 * when any failed. */
vkv_status vkv_close_stdout(void);

/* s with its control characters (bytes below 0x20 and 0x7f) shown as \xNN,
 * for printing a string that came from a file to a terminal: a name holding
 * an escape sequence cannot drive the terminal. Writes into buf (size bytes,
 * truncated to fit) and returns it. */
const char *vkv_printable(const char *s, char *buf, size_t size);

#endif
