/* flock is a BSD extension (not in POSIX). */
#define _DEFAULT_SOURCE
#include "io/atomic_file.h"
#include "base/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
/* ".<prefix>.<8 hex>.<6 random>.tmp": 21 bytes around the prefix. */
enum {
    HASH_LEN = 8,
    RAND_LEN = 6,
    TMP_EXTRA = 1 + 1 + HASH_LEN + 1 + RAND_LEN + 4
};
enum { MAX_LINKS = 40 };

static char *str_ndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Follows path while it names a symlink, so that the rename replaces the
   file the chain ends at (which need not exist yet).  NULL with a message
   on a loop or out of memory. */
static char *resolve_links(const char *path, io_err *e)
{
    char *cur = str_ndup(path, strlen(path));
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        if (hops == MAX_LINKS) {
            io_fail(e, "too many levels of symbolic links");
            free(cur);
            return NULL;
        }
        size_t cap =
            (size_t)st.st_size + 1 > 256 ? (size_t)st.st_size + 1 : 256;
        char *link = malloc(cap);
        ssize_t n = link ? readlink(cur, link, cap) : -1;
        if (n < 0 || (size_t)n >= cap) {
            /* vanished or grew while we looked: write the name as given */
            free(link);
            return cur;
        }
        const char *slash = strrchr(cur, '/');
        size_t dir_len =
            link[0] != '/' && slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(dir_len + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dir_len);
            memcpy(next + dir_len, link, (size_t)n);
            next[dir_len + (size_t)n] = '\0';
        }
        free(link);
        free(cur);
        cur = next;
    }
    io_fail(e, "out of memory");
    return NULL;
}

/* The directory part of path ("." when there is none, "/" for the root). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return str_ndup(".", 1);
    return str_ndup(path, slash == path ? 1 : (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* How much of a name its temporaries carry, so they stay within NAME_MAX. */
static size_t prefix_len(const char *name)
{
    size_t n = strlen(name), max = NAME_MAX - TMP_EXTRA;
    return n < max ? n : max;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Only uniqueness matters (O_EXCL makes creation safe): time, process,
   an address and a per-call counter, mixed. */
static uint64_t random_bits(void)
{
    static _Atomic unsigned long counter;
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007u + (uint64_t)ts.tv_nsec;
    x = mix64(x ^ ((uint64_t)getpid() << 32));
    x = mix64(x ^ (uint64_t)(uintptr_t)&ts);
    return mix64(x ^ (uint64_t)++counter);
}

static const char RAND_CHARS[] = "abcdefghijklmnopqrstuvwxyz0123456789";

/* "<dir>/.<prefix>.<hash>.<random>.tmp" */
static char *temp_name(const char *dir, const char *name)
{
    size_t pre = prefix_len(name), dl = strlen(dir);
    char *t = malloc(dl + 1 + pre + TMP_EXTRA + 1);
    if (!t)
        return NULL;
    uint64_t r = random_bits();
    char rnd[RAND_LEN + 1];
    for (int i = 0; i < RAND_LEN; i++, r /= 36)
        rnd[i] = RAND_CHARS[r % 36];
    rnd[RAND_LEN] = '\0';
    sprintf(t, "%s/.%.*s.%08x.%s.tmp", dir, (int)pre, name,
            (unsigned)name_hash(name), rnd);
    return t;
}

static int all_of(const char *s, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i]))
            return 0;
    return 1;
}

/* Whether entry is one of our temporaries of the file name. Names in any
   other pattern (earlier versions' "<name>.tmp.XXXXXX" among them) are
   left alone: a user's "<name>.tmp.backup" must never be deleted. */
static int is_temp_of(const char *entry, const char *name)
{
    size_t pre = prefix_len(name), n = strlen(entry);
    char head[HASH_LEN + 3];
    snprintf(head, sizeof head, ".%08x.", (unsigned)name_hash(name));
    return n == pre + TMP_EXTRA && entry[0] == '.' &&
           !memcmp(entry + 1, name, pre) &&
           !memcmp(entry + 1 + pre, head, HASH_LEN + 2) &&
           all_of(entry + pre + HASH_LEN + 3, RAND_LEN, RAND_CHARS) &&
           !strcmp(entry + n - 4, ".tmp");
}

/* Removes the temporaries of name in dir that no writer holds: a live
   writer keeps its flock until it has renamed or removed its file. */
static void remove_stale(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d);
    for (struct dirent *ent; (ent = readdir(d));) {
        if (!is_temp_of(ent->d_name, name))
            continue;
        int fd = openat(dfd, ent->d_name,
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dfd, ent->d_name, 0);
        close(fd);
    }
    closedir(d);
}

/* Creates and locks a fresh temporary; a cleaner may have removed it
   between creation and lock, then we try another name. */
static int create_temp(io_atomic *a, const char *dir, io_err *e)
{
    const char *name = base_of(a->path);
    for (int tries = 0; tries < 100; tries++) {
        free(a->tmp);
        if (!(a->tmp = temp_name(dir, name)))
            return io_fail(e, "out of memory");
        a->fd = open(a->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (a->fd < 0 && errno == EEXIST)
            continue;
        if (a->fd < 0) {
            int err = errno;
            free(a->tmp);
            a->tmp = NULL; /* not ours: abort must not remove it */
            return io_fail(e, "cannot create temporary file in '%s': %s", dir,
                           strerror(err));
        }
        struct stat st;
        if (flock(a->fd, LOCK_EX) == 0 && fstat(a->fd, &st) == 0 &&
            st.st_nlink == 0) {
            close(a->fd); /* a cleaner took it: the name is not ours now */
            a->fd = -1;
            continue;
        }
        if ((a->hold = fcntl(a->fd, F_DUPFD_CLOEXEC, 0)) < 0)
            return io_fail(e, "cannot duplicate a descriptor: %s",
                           strerror(errno));
        return 0;
    }
    free(a->tmp);
    a->tmp = NULL;
    return io_fail(e, "cannot create temporary file in '%s'", dir);
}

/* Why an existing target of this mode, not a regular file, is refused. */
static const char *not_a_file(mode_t mode)
{
    return S_ISDIR(mode) ? "is a directory"
                         : "is not a regular file (a device, FIFO or socket), "
                           "which saving would replace";
}

int io_atomic_begin(io_atomic *a, const char *path, io_err *e)
{
    *a = (io_atomic){NULL, NULL, -1, -1};
    const char *name = base_of(path);
    if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return io_fail(e, "not a file name");
    if (!(a->path = resolve_links(path, e)))
        return -1;
    struct stat st;
    if (stat(a->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* Refused before a temporary is made beside it: the rename would
           replace a device (/dev/full), a FIFO or a socket by a file */
        io_atomic_abort(a);
        return io_fail(e, "%s", not_a_file(st.st_mode));
    }
    char *dir = dir_of(a->path);
    int rc = dir ? create_temp(a, dir, e) : io_fail(e, "out of memory");
    free(dir);
    if (rc)
        io_atomic_abort(a);
    return rc;
}

/* Durability of the rename itself: the directory entry must reach disk.
   Best effort, since some file systems refuse fsync on directories. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* A replaced file keeps its mode; a new one has the mode open gave it. */
static int sync_temp(io_atomic *a, io_err *e)
{
    struct stat st;
    if (stat(a->path, &st) == 0 && S_ISREG(st.st_mode) &&
        fchmod(a->hold, st.st_mode & 07777) != 0)
        return io_fail(e, "cannot set the mode of '%s': %s", a->tmp,
                       strerror(errno));
    if (fsync(a->hold) != 0)
        return io_fail(e, "cannot sync '%s': %s", a->tmp, strerror(errno));
    return 0;
}

int io_atomic_commit(io_atomic *a, io_err *e)
{
    if (a->fd >= 0) {
        int rc = close(a->fd);
        a->fd = -1;
        if (rc != 0) {
            io_fail(e, "cannot close '%s': %s", a->tmp, strerror(errno));
            io_atomic_abort(a);
            return -1;
        }
    }
    if (sync_temp(a, e)) {
        io_atomic_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        io_fail(e, "cannot rename '%s' to '%s': %s", a->tmp, a->path,
                strerror(errno));
        io_atomic_abort(a);
        return -1;
    }
    free(a->tmp);
    a->tmp = NULL;
    char *dir = dir_of(a->path);
    if (dir) {
        sync_dir(dir);
        remove_stale(dir, base_of(a->path));
        free(dir);
    }
    io_atomic_abort(a);
    return 0;
}

void io_atomic_abort(io_atomic *a)
{
    if (a->fd >= 0)
        close(a->fd);
    if (a->tmp)
        unlink(a->tmp);
    /* the lock goes last: no cleaner may take the name before unlink */
    if (a->hold >= 0)
        close(a->hold);
    free(a->tmp);
    free(a->path);
    *a = (io_atomic){NULL, NULL, -1, -1};
}

int io_atomic_check(const char *path, io_err *e)
{
    const char *name = base_of(path);
    if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return io_fail(e, "not a file name");
    char *target = resolve_links(path, e);
    char *dir = target ? dir_of(target) : NULL;
    struct stat st;
    int rc = 0;
    if (!target || !dir)
        rc = target ? io_fail(e, "out of memory") : -1;
    else if (stat(target, &st) == 0 && !S_ISREG(st.st_mode))
        rc = io_fail(e, "%s", not_a_file(st.st_mode));
    else if (stat(dir, &st) != 0)
        rc = io_fail(e, "directory '%s' does not exist", dir);
    else if (!S_ISDIR(st.st_mode))
        rc = io_fail(e, "'%s' is not a directory", dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = io_fail(e, "cannot write in directory '%s': %s", dir,
                     strerror(errno));
    free(dir);
    free(target);
    return rc;
}

kiln_status kiln_file_check_writable(const char *path)
{
    if (!path) {
        kiln_set_last_error("kiln_file_check_writable: NULL path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    if (io_atomic_check(path, &e)) {
        kiln_set_last_error("%s: %s", path, e.msg);
        return KILN_ERR_IO;
    }
    return KILN_OK;
}
