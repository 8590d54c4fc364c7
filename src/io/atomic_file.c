#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *str_concat(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

int io_atomic_begin(io_atomic *a, const char *path, io_err *e)
{
    a->fd = -1;
    a->path = str_concat(path, "");
    a->tmp = str_concat(path, ".tmp.XXXXXX");
    if (!a->path || !a->tmp) {
        io_atomic_abort(a);
        return io_fail(e, "out of memory");
    }
    a->fd = mkstemp(a->tmp);
    if (a->fd < 0) {
        int err = errno;
        io_atomic_abort(a);
        return io_fail(e, "cannot create temporary file '%s.tmp.XXXXXX': %s",
                       path, strerror(err));
    }
    return 0;
}

/* mkstemp creates files 0600; the result should look like any other new
   file (0666 less the umask), or keep the mode of the file it replaces. */
static mode_t target_mode(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return st.st_mode & 07777;
    /* umask can only be read by setting it; libzip does the same. */
    mode_t mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

/* Durability of the rename itself: the directory entry must reach disk.
   Best effort, since some file systems refuse fsync on directories. */
static void sync_parent_dir(const char *path)
{
    char *dir = str_concat(path, "");
    if (!dir)
        return;
    char *slash = strrchr(dir, '/');
    const char *name = ".";
    if (slash == dir)
        name = "/";
    else if (slash) {
        *slash = '\0';
        name = dir;
    }
    int fd = open(name, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

static int sync_and_chmod(const char *tmp, mode_t mode, io_err *e)
{
    int fd = open(tmp, O_RDWR);
    if (fd < 0)
        return io_fail(e, "cannot reopen temporary file '%s': %s", tmp,
                       strerror(errno));
    int bad = fchmod(fd, mode) != 0 || fsync(fd) != 0;
    int err = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad)
        return io_fail(e, "cannot sync temporary file '%s': %s", tmp,
                       strerror(err));
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
    if (sync_and_chmod(a->tmp, target_mode(a->path), e)) {
        io_atomic_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        io_fail(e, "cannot rename '%s' to '%s': %s", a->tmp, a->path,
                strerror(errno));
        io_atomic_abort(a);
        return -1;
    }
    sync_parent_dir(a->path);
    free(a->tmp);
    a->tmp = NULL;
    io_atomic_abort(a);
    return 0;
}

void io_atomic_abort(io_atomic *a)
{
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    if (a->tmp)
        unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    a->tmp = NULL;
    a->path = NULL;
}
