/* IDX (the MNIST files): 2 zero bytes, an element type byte, the number of
   dimensions, one big-endian u32 per dimension, then the data.  zlib's gz
   functions read both plain and gzip-compressed files. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/io_util.h"
#include "kiln.h"

#ifdef KILN_HAVE_ZLIB
#include <zlib.h>
#endif

/* 2^31 bytes: eight times the full MNIST training set is still far under
   this, and a corrupt header cannot ask for more. */
#define IDX_MAX_NUMEL (INT64_C(1) << 31)
#define IDX_TYPE_U8 0x08

#ifdef KILN_HAVE_ZLIB
typedef gzFile idx_file;

static idx_file idx_open(int fd)
{
    return gzdopen(fd, "rb");
}
static void idx_close(idx_file f)
{
    gzclose(f);
}
/* Valid once something was read: 0 for a gzip stream. */
static int idx_is_plain(idx_file f)
{
    return gzdirect(f);
}

static int64_t idx_reader_read(void *ctx, void *buf, size_t n, io_err *e)
{
    int errnum;
    int k = gzread((gzFile)ctx, buf, (unsigned)(n < (1u << 30) ? n : 1u << 30));
    if (k < 0)
        return io_fail(e, "read failed: %s", gzerror((gzFile)ctx, &errnum));
    return k;
}
#else
typedef FILE *idx_file;

static idx_file idx_open(int fd)
{
    return fdopen(fd, "rb");
}
static void idx_close(idx_file f)
{
    fclose(f);
}
static int idx_is_plain(idx_file f)
{
    (void)f;
    return 1;
}

static int64_t idx_reader_read(void *ctx, void *buf, size_t n, io_err *e)
{
    size_t k = fread(buf, 1, n, (FILE *)ctx);
    if (k < n && ferror((FILE *)ctx))
        return io_fail(e, "read failed: %s", strerror(errno));
    return (int64_t)k;
}
#endif

static int check_magic(const unsigned char m[4], io_err *e)
{
    if (m[0] == 0x1f && m[1] == 0x8b)
        return io_fail(e, "gzip file, but Kiln was built without zlib");
    if (m[0] != 0 || m[1] != 0)
        return io_fail(e,
                       "bad IDX magic 0x%02x%02x%02x%02x (expected "
                       "0x000008nn)",
                       m[0], m[1], m[2], m[3]);
    if (m[2] != IDX_TYPE_U8)
        return io_fail(e,
                       "IDX element type 0x%02x not supported (only 0x08, "
                       "unsigned byte)",
                       m[2]);
    if (m[3] < 1 || m[3] > 4)
        return io_fail(e, "IDX file has %d dimensions (1 to 4 supported)",
                       m[3]);
    return 0;
}

static int read_idx_header(io_reader *r, kiln_shape *shape, io_err *e)
{
    unsigned char m[4], dims[16];
    if (io_read_exact(r, m, 4, "IDX header", e) || check_magic(m, e) ||
        io_read_exact(r, dims, 4u * m[3], "IDX header", e))
        return -1;
    shape->ndim = m[3];
    for (int i = 0; i < shape->ndim; i++)
        shape->d[i] = io_load_be32(dims + 4 * i);
    const char *why = kiln_shape_size_max(*shape, IDX_MAX_NUMEL, 1, NULL, NULL);
    if (why)
        return io_fail(e, "IDX dimensions too large: the shape %s", why);
    return 0;
}

/* A plain file's size bounds the data before anything is allocated; a
   gzip stream's size (or a pipe's, file_size -1) is unknown until read, so
   its buffer grows as the data arrives. */
static kiln_tensor *read_idx(io_reader *r, idx_file f, int64_t file_size,
                             kiln_dtype as, io_err *e)
{
    kiln_shape shape;
    if (read_idx_header(r, &shape, e))
        return NULL;
    int64_t numel = kiln_shape_numel(shape);
    int64_t have = file_size - 4 - 4 * (int64_t)shape.ndim;
    kiln_tensor *t = NULL;
    if (!idx_is_plain(f) || file_size < 0) {
        t = io_read_tensor_growing(r, IO_U8, as, shape, e);
    } else if (have < numel) {
        io_fail(e, "truncated: expected %" PRId64 " data bytes, got %" PRId64,
                numel, have);
    } else if (!(t = kiln_tensor_new(as, shape))) {
        io_fail(e, "%s", kiln_last_error());
    } else if (io_read_tensor(r, IO_U8, t, e)) {
        kiln_tensor_free(t);
        t = NULL;
    }
    if (t && io_expect_end(r, numel, e)) {
        kiln_tensor_free(t);
        t = NULL;
    }
    return t;
}

static kiln_tensor *read_idx_fd(int fd, kiln_dtype as, io_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        io_fail(e, "cannot stat: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    idx_file f = idx_open(fd);
    if (!f) {
        io_fail(e, "cannot open: out of memory");
        close(fd);
        return NULL;
    }
    io_reader r = {idx_reader_read, f};
    kiln_tensor *t =
        read_idx(&r, f, S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1, as, e);
    idx_close(f);
    return t;
}

kiln_tensor *kiln_idx_read(const char *path, kiln_dtype as)
{
    if (!path || (as != KILN_F32 && as != KILN_I32)) {
        kiln_set_last_error("kiln_idx_read: %s", path ? "dtype must be f32 "
                                                        "or i32"
                                                      : "NULL path");
        return NULL;
    }
    io_err e = IO_ERR_INIT;
    int fd = io_open_fd(path, &e);
    kiln_tensor *t = fd < 0 ? NULL : read_idx_fd(fd, as, &e);
    if (!t)
        kiln_set_last_error("kiln_idx_read: %s: %s", path, e.msg);
    return t;
}
