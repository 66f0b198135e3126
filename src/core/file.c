#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* "1 GiB", "64 MiB", else bytes: the caps in messages. */
static void format_cap(size_t n, char *out, size_t size)
{
    if (n >= (1u << 30) && n % (1u << 30) == 0) snprintf(out, size, "%zu GiB", n >> 30);
    else if (n >= (1u << 20) && n % (1u << 20) == 0) snprintf(out, size, "%zu MiB", n >> 20);
    else snprintf(out, size, "%zu bytes", n);
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

FILE *vkv_open_regular(const char *path, const char *what)
{
    const char *w = what ? what : "", *sp = what ? " " : "";
    /* Opened without blocking and checked on the descriptor: a FIFO put in
     * the path's place can neither block the open nor pass the check. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        vkv_error(VKV_ERR_IO, "cannot open %s%s'%s': %s", w, sp, path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        vkv_error(VKV_ERR_IO, "cannot stat %s%s'%s': %s", w, sp, path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        vkv_error(VKV_ERR_IO, "cannot read %s%s'%s': it is %s, not a regular file", w, sp, path,
                  file_kind(sb.st_mode));
        close(fd);
        return NULL;
    }
    FILE *f = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        vkv_error(VKV_ERR_IO, "cannot open %s%s'%s': %s", w, sp, path, strerror(errno));
        close(fd);
    }
    return f;
}

static vkv_status too_long(const char *name, size_t max_bytes)
{
    char c[32];
    format_cap(max_bytes, c, sizeof c);
    return vkv_error(VKV_ERR_IO, "refusing to read '%s': it holds more than %s, the limit for this input", name, c);
}

/* Reads at most max_bytes + 1 bytes, so that one too many tells a stream
 * over the cap from one exactly at it. size_hint: the expected length (a
 * regular file's size), 0 when unknown. */
static vkv_status read_capped(FILE *f, const char *name, size_t max_bytes, size_t size_hint, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n > max_bytes) {
            free(buf);
            return too_long(name, max_bytes);
        }
        if (n == cap) {
            size_t next = cap ? cap * 2 : (size_hint ? size_hint + 1 : 65536);
            if (next > max_bytes + 1) next = max_bytes + 1;
            char *nb = realloc(buf, next + 1); /* + 1: the terminating NUL */
            if (!nb) {
                free(buf);
                return vkv_error(VKV_ERR_OOM, "out of host memory reading '%s'", name);
            }
            buf = nb;
            cap = next;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (!r) break;
    }
    if (ferror(f)) {
        free(buf);
        return vkv_error(VKV_ERR_IO, "error reading '%s'", name);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return VKV_OK;
}

vkv_status vkv_read_stream(FILE *f, const char *name, size_t max_bytes, char **data, size_t *len)
{
    return read_capped(f, name, max_bytes, 0, data, len);
}

vkv_status vkv_read_file(const char *path, size_t max_bytes, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    FILE *f = vkv_open_regular(path, NULL);
    if (!f) return VKV_ERR_IO;
    struct stat sb;
    size_t hint = fstat(fileno(f), &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size : 0;
    /* the size is only a hint (the file may change while read), but one
     * already over the cap need not be read to be refused */
    vkv_status st = hint > max_bytes ? too_long(path, max_bytes) : read_capped(f, path, max_bytes, hint, data, len);
    fclose(f);
    return st;
}

vkv_status vkv_read_line(FILE *f, size_t max_bytes, char **buf, size_t *cap, size_t *len)
{
    *len = 0;
    size_t n = 0;
    vkv_status st = VKV_OK;
    flockfile(f);
    for (;;) {
        int c = getc_unlocked(f);
        if (c == EOF) break;
        if (c != '\n' && n >= max_bytes) {
            char s[32];
            format_cap(max_bytes, s, sizeof s);
            st = vkv_error(VKV_ERR_FORMAT, "line longer than %s, the limit for one line of this input", s);
            break;
        }
        if (n + 2 > *cap) { /* this byte and the NUL */
            size_t next = *cap ? *cap * 2 : 4096;
            if (next > max_bytes + 2) next = max_bytes + 2;
            char *nb = realloc(*buf, next);
            if (!nb) {
                st = vkv_error(VKV_ERR_OOM, "out of host memory");
                break;
            }
            *buf = nb;
            *cap = next;
        }
        (*buf)[n++] = (char)c;
        if (c == '\n') break;
    }
    if (!st && ferror(f)) st = vkv_error(VKV_ERR_IO, "read error: %s", strerror(errno));
    funlockfile(f);
    if (st) return st;
    if (n) (*buf)[n] = 0;
    *len = n;
    return VKV_OK;
}

vkv_status vkv_map_file(const char *path, const char *who, void **map, size_t *size)
{
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return vkv_error(VKV_ERR_IO, "%s: cannot open '%s': %s", who, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vkv_error(VKV_ERR_IO, "%s: cannot stat '%s': %s", who, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return vkv_error(VKV_ERR_IO, "%s: '%s' is not a regular file", who, path);
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        return VKV_OK;
    }
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED) return vkv_error(VKV_ERR_IO, "%s: cannot map '%s': %s", who, path, strerror(e));
    *map = m;
    *size = n;
    return VKV_OK;
}

void vkv_map_release(const void *map, size_t map_size, const void *data, uint64_t size)
{
    uintptr_t base = (uintptr_t)map, lo = (uintptr_t)data, hi = lo + size;
    if (!map || !size || lo < base || hi < lo || hi > base + map_size) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    lo &= ~(page - 1);
    hi = (hi + page - 1) & ~(page - 1);
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
