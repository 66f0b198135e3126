#include "core/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Written in place rather than renamed over: a target that exists and is not
 * a regular file, or a path in /dev or /proc (/dev/stdout may stand for a
 * regular file, and renaming over what it resolves to would take the file
 * from whoever redirected the output there). */
static bool in_place(const char *path, const struct stat *sb, bool exists)
{
    if (exists && !S_ISREG(sb->st_mode)) return true;
    return !strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6);
}

/* The directory part of path ("." for a bare name), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Creates a new file beside dest with a unique name: "DIR/.BASE.PID-N.tmp".
 * Returns its descriptor and the name in *tmp (malloc'ed), or -1 with errno. */
static int create_beside(const char *dest, char **tmp)
{
    static atomic_uint counter;
    const char *slash = strrchr(dest, '/');
    size_t dir_len = slash ? (size_t)(slash - dest) + 1 : 0;
    const char *base = dest + dir_len;
    size_t cap = strlen(dest) + 48;
    char *name = malloc(cap);
    if (!name) {
        errno = ENOMEM;
        return -1;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(name, cap, "%.*s.%s.%ld-%u.tmp", (int)dir_len, dest, base, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp = name;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(name);
    errno = e;
    return -1;
}

static const char *named(const char *option, char *buf, size_t size)
{
    if (!option) return "";
    snprintf(buf, size, "%s: ", option);
    return buf;
}

vkv_status vkv_out_check(const char *option, const char *path)
{
    char ob[64];
    const char *opt = named(option, ob, sizeof ob);
    if (!path || !*path) return vkv_error(VKV_ERR_ARG, "%san empty file name", opt);
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (!exists && errno != ENOENT)
        return vkv_error(VKV_ERR_IO, "%scannot write '%s': %s", opt, path, strerror(errno));
    if (exists && S_ISDIR(sb.st_mode))
        return vkv_error(VKV_ERR_IO, "%scannot write '%s': it is a directory", opt, path);
    if (in_place(path, &sb, exists)) {
        /* a device or a pipe: may it be opened for writing? (a FIFO is not
         * opened here: that would wait for its reader) */
        if (exists && S_ISFIFO(sb.st_mode)) {
            if (access(path, W_OK) != 0)
                return vkv_error(VKV_ERR_IO, "%scannot write '%s': %s", opt, path, strerror(errno));
            return VKV_OK;
        }
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | (exists ? 0 : O_CREAT | O_EXCL), 0666);
        if (fd < 0) return vkv_error(VKV_ERR_IO, "%scannot write '%s': %s", opt, path, strerror(errno));
        close(fd);
        if (!exists) unlink(path);
        return VKV_OK;
    }
    char *dir = dir_of(path);
    if (!dir) return vkv_error(VKV_ERR_OOM, "out of host memory");
    struct stat db;
    vkv_status st = VKV_OK;
    if (stat(dir, &db) != 0)
        st = vkv_error(VKV_ERR_IO, "%scannot write '%s': its directory '%s': %s", opt, path, dir, strerror(errno));
    else if (!S_ISDIR(db.st_mode))
        st = vkv_error(VKV_ERR_IO, "%scannot write '%s': '%s' is not a directory", opt, path, dir);
    else if (exists && access(path, W_OK) != 0)
        st = vkv_error(VKV_ERR_IO, "%scannot write '%s': %s", opt, path, strerror(errno));
    free(dir);
    if (st) return st;
    /* The real test, which holds for root too (access() grants root every
     * permission): a file can be created beside the target. */
    char *real = exists ? realpath(path, NULL) : NULL;
    char *tmp = NULL;
    int fd = create_beside(real ? real : path, &tmp);
    if (fd < 0) st = vkv_error(VKV_ERR_IO, "%scannot write '%s': %s", opt, path, strerror(errno));
    else {
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    free(real);
    return st;
}

vkv_status vkv_append_check(const char *option, const char *path)
{
    struct stat sb;
    if (!path || !*path || stat(path, &sb) != 0 || S_ISDIR(sb.st_mode) || S_ISFIFO(sb.st_mode))
        return vkv_out_check(option, path);
    /* opened for appending, nothing truncated or written */
    int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        char ob[64];
        return vkv_error(VKV_ERR_IO, "%scannot append to '%s': %s", named(option, ob, sizeof ob), path,
                         strerror(errno));
    }
    close(fd);
    return VKV_OK;
}

/* The stream under vkv_out.f: stdio's buffer over write(2), which keeps the
 * first failed write's errno (stdio keeps only its error flag, and errno is
 * long gone when the commit looks) and counts the bytes written (ftell). */
struct vkv_out_sink {
    int fd;
    int err;
    off64_t pos;
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    struct vkv_out_sink *k = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(k->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!k->err) k->err = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    k->pos += (off64_t)done;
    return done == n ? (ssize_t)n : -1;
}

/* ftell only: the stream cannot seek */
static int sink_seek(void *cookie, off64_t *pos, int whence)
{
    struct vkv_out_sink *k = cookie;
    if (whence != SEEK_CUR || *pos != 0) {
        errno = ESPIPE;
        return -1;
    }
    *pos = k->pos;
    return 0;
}

/* the descriptor is closed by the commit, which checks it */
static int sink_close(void *cookie)
{
    (void)cookie;
    return 0;
}

static void out_free(vkv_out *o)
{
    free(o->path);
    free(o->dest);
    free(o->tmp);
    free(o->sink);
    *o = (vkv_out){0};
}

static vkv_status open_failed(vkv_out *o, int fd, int e)
{
    if (fd >= 0) close(fd);
    if (o->tmp) unlink(o->tmp);
    vkv_status st = vkv_error(VKV_ERR_IO, "cannot write '%s': %s", o->path, strerror(e));
    out_free(o);
    return st;
}

vkv_status vkv_out_open(vkv_out *o, const char *path)
{
    *o = (vkv_out){0};
    if (!path || !*path) return vkv_error(VKV_ERR_ARG, "an empty file name");
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode)) return vkv_error(VKV_ERR_IO, "cannot write '%s': it is a directory", path);
    if (!(o->path = strdup(path)) || !(o->sink = calloc(1, sizeof *o->sink))) {
        out_free(o);
        return vkv_error(VKV_ERR_OOM, "out of host memory");
    }
    int fd;
    if (in_place(path, &sb, exists)) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) return open_failed(o, -1, errno);
    } else {
        /* a symbolic link stays one: the file it points to is replaced */
        o->dest = exists ? realpath(path, NULL) : NULL;
        if (!o->dest && !(o->dest = strdup(path))) return open_failed(o, -1, ENOMEM);
        if ((fd = create_beside(o->dest, &o->tmp)) < 0) return open_failed(o, -1, errno);
        /* a file written over keeps its permissions */
        if (exists) (void)fchmod(fd, sb.st_mode & 07777);
    }
    o->sink->fd = fd;
    cookie_io_functions_t io = {.write = sink_write, .seek = sink_seek, .close = sink_close};
    if (!(o->f = fopencookie(o->sink, "wb", io))) return open_failed(o, fd, errno);
    return VKV_OK;
}

/* Makes a rename durable: the directory's entry is synced too. */
static void sync_dir(const char *dest)
{
    char *dir = dir_of(dest);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

vkv_status vkv_out_commit(vkv_out *o)
{
    if (!o->f) return vkv_error(VKV_ERR_ARG, "vkv_out_commit: no file open");
    struct vkv_out_sink *k = o->sink;
    bool failed = fflush(o->f) != 0 || ferror(o->f);
    failed |= fclose(o->f) != 0;
    o->f = NULL;
    int e = k->err;
    if (!failed && o->tmp && fsync(k->fd) != 0) e = errno, failed = true;
    if (close(k->fd) != 0 && !failed) e = errno, failed = true;
    if (!failed && o->tmp && rename(o->tmp, o->dest) != 0) e = errno, failed = true;
    if (failed) {
        if (o->tmp) unlink(o->tmp);
        vkv_status st = vkv_error(VKV_ERR_IO, "cannot write '%s': %s", o->path, strerror(e ? e : EIO));
        out_free(o);
        return st;
    }
    if (o->tmp) sync_dir(o->dest);
    out_free(o);
    return VKV_OK;
}

void vkv_out_drop(vkv_out *o)
{
    if (!o->f) return;
    fclose(o->f);
    close(o->sink->fd);
    if (o->tmp) unlink(o->tmp);
    out_free(o);
}

vkv_status vkv_out_write_file(const char *path, const void *data, size_t n)
{
    vkv_out o;
    vkv_status st = vkv_out_open(&o, path);
    if (st) return st;
    if (n) (void)fwrite(data, 1, n, o.f); /* checked by the commit (ferror) */
    return vkv_out_commit(&o);
}

vkv_status vkv_append_open(const char *path, FILE **f)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return vkv_error(VKV_ERR_IO, "cannot append to '%s': it is a directory", path);
    if (!(*f = fopen(path, "ab"))) return vkv_error(VKV_ERR_IO, "cannot append to '%s': %s", path, strerror(errno));
    return VKV_OK;
}

vkv_status vkv_append(FILE *f, const char *path, const void *data, size_t n)
{
    int e = 0;
    if (n && fwrite(data, 1, n, f) != n) e = errno ? errno : EIO;
    if (!e && fflush(f) != 0) e = errno;
    if (!e && ferror(f)) e = EIO;
    /* a device or a pipe cannot be synced: EINVAL then, and nothing to lose */
    if (!e && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) e = errno;
    if (e) return vkv_error(VKV_ERR_IO, "cannot append to '%s': %s", path, strerror(e));
    return VKV_OK;
}

/* the reason standard output failed, when vkv_stdout_ok saw it fail */
static int stdout_errno;

bool vkv_stdout_ok(void)
{
    if (fflush(stdout) != 0) {
        if (!stdout_errno) stdout_errno = errno;
        return false;
    }
    return !ferror(stdout);
}

vkv_status vkv_close_stdout(void)
{
    int e = stdout_errno;
    bool failed = ferror(stdout);
    if (fflush(stdout) != 0) e = e ? e : errno, failed = true;
    if (fclose(stdout) != 0 && !failed) e = errno, failed = true;
    if (failed) return vkv_error(VKV_ERR_IO, "error writing standard output: %s", strerror(e ? e : EIO));
    return VKV_OK;
}

const char *vkv_printable(const char *s, char *buf, size_t size)
{
    if (!size) return buf;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        bool ctl = *p < 0x20 || *p == 0x7f;
        size_t need = ctl ? 4 : 1;
        if (n + need + 1 > size) break;
        if (ctl) snprintf(buf + n, 5, "\\x%02x", *p);
        else buf[n] = (char)*p;
        n += need;
    }
    buf[n] = 0;
    return buf;
}
