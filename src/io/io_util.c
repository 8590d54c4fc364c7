#include "io/io_util.h"

#include "base/tensor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int io_fail(io_err *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int io_prefix(io_err *e, const char *fmt, ...)
{
    char head[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t h = n < 0                     ? 0
               : (size_t)n < sizeof head ? (size_t)n
                                         : sizeof head - 1;
    size_t t = strlen(e->msg);
    if (h + t >= sizeof e->msg)
        t = sizeof e->msg - 1 - h;
    memmove(e->msg + h, e->msg, t);
    memcpy(e->msg, head, h);
    e->msg[h + t] = '\0';
    return -1;
}

size_t io_elem_size(io_elem el)
{
    switch (el) {
    case IO_F32:
        return 4;
    case IO_F64:
        return 8;
    case IO_I32:
        return 4;
    case IO_I64:
        return 8;
    case IO_U8:
        return 1;
    }
    return 0;
}

kiln_dtype io_elem_natural(io_elem el)
{
    return (el == IO_F32 || el == IO_F64) ? KILN_F32 : KILN_I32;
}

const char *io_elem_name(io_elem el)
{
    switch (el) {
    case IO_F32:
        return "<f4";
    case IO_F64:
        return "<f8";
    case IO_I32:
        return "<i4";
    case IO_I64:
        return "<i8";
    case IO_U8:
        return "|u1";
    }
    return "?";
}

uint32_t io_load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

uint64_t io_load_le64(const unsigned char *p)
{
    return (uint64_t)io_load_le32(p) | (uint64_t)io_load_le32(p + 4) << 32;
}

uint32_t io_load_be32(const unsigned char *p)
{
    return (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 |
           (uint32_t)p[0] << 24;
}

void io_store_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void convert_to_f32(const unsigned char *src, io_elem el, float *dst,
                           int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (el == IO_F32) {
            uint32_t u = io_load_le32(src + 4 * i);
            memcpy(&dst[i], &u, 4);
        } else if (el == IO_F64) {
            uint64_t u = io_load_le64(src + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            dst[i] = (float)d;
        } else {
            dst[i] = (float)src[i];
        }
    }
}

static int convert_to_i32(const unsigned char *src, io_elem el, int32_t *dst,
                          int64_t n, int64_t base_index, io_err *e)
{
    for (int64_t i = 0; i < n; i++) {
        if (el == IO_I32) {
            uint32_t u = io_load_le32(src + 4 * i);
            memcpy(&dst[i], &u, 4);
        } else if (el == IO_I64) {
            uint64_t u = io_load_le64(src + 8 * i);
            int64_t v;
            memcpy(&v, &u, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                return io_fail(e,
                               "int64 value %" PRId64 " at element %" PRId64
                               " does not fit in int32",
                               v, base_index + i);
            dst[i] = (int32_t)v;
        } else {
            dst[i] = (int32_t)src[i];
        }
    }
    return 0;
}

int io_convert(const unsigned char *src, io_elem el, void *dst, kiln_dtype dt,
               int64_t n, int64_t base_index, io_err *e)
{
    if (dt == KILN_F32 && (el == IO_F32 || el == IO_F64 || el == IO_U8)) {
        convert_to_f32(src, el, dst, n);
        return 0;
    }
    if (dt == KILN_I32 && (el == IO_I32 || el == IO_I64 || el == IO_U8))
        return convert_to_i32(src, el, dst, n, base_index, e);
    return io_fail(e, "cannot convert %s elements to %s", io_elem_name(el),
                   kiln_dtype_name(dt));
}

/* Reads exactly n bytes unless the source ends first; returns the count. */
static int64_t read_full(io_reader *r, void *buf, size_t n, io_err *e)
{
    size_t got = 0;
    while (got < n) {
        int64_t k = r->read(r->ctx, (unsigned char *)buf + got, n - got, e);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (int64_t)got;
}

int io_read_exact(io_reader *r, void *buf, size_t n, const char *what,
                  io_err *e)
{
    int64_t got = read_full(r, buf, n, e);
    if (got < 0)
        return -1;
    if ((size_t)got < n)
        return io_fail(e, "truncated %s", what);
    return 0;
}

int io_read_tensor(io_reader *r, io_elem el, kiln_tensor *t, io_err *e)
{
    enum { CHUNK = 1 << 16 };
    unsigned char buf[CHUNK];
    size_t esz = io_elem_size(el);
    size_t dsz = kiln_dtype_size(kiln_tensor_dtype(t));
    int64_t numel = kiln_tensor_numel(t);
    int64_t per_chunk = (int64_t)(CHUNK / esz);
    unsigned char *dst = kiln_tensor_data(t);
    for (int64_t done = 0; done < numel;) {
        int64_t n = numel - done < per_chunk ? numel - done : per_chunk;
        int64_t got = read_full(r, buf, (size_t)n * esz, e);
        if (got < 0)
            return -1;
        if (got < n * (int64_t)esz)
            return io_fail(
                e, "truncated: expected %" PRId64 " data bytes, got %" PRId64,
                numel * (int64_t)esz, done * (int64_t)esz + got);
        if (io_convert(buf, el, dst + (size_t)done * dsz, kiln_tensor_dtype(t),
                       n, done, e))
            return -1;
        done += n;
    }
    return 0;
}

/* The next buffer size for n elements of data arriving when cap are held:
   doubling, from 1 MiB, never past the header's claim. */
static int64_t grown_capacity(int64_t cap, int64_t need, int64_t numel,
                              size_t dsz)
{
    int64_t next =
        cap ? (cap > numel / 2 ? numel : 2 * cap) : (int64_t)((1u << 20) / dsz);
    if (next > numel)
        next = numel;
    return next < need ? need : next;
}

kiln_tensor *io_read_tensor_growing(io_reader *r, io_elem el, kiln_dtype dt,
                                    kiln_shape shape, io_err *e)
{
    enum { CHUNK = 1 << 16 };
    unsigned char buf[CHUNK];
    size_t esz = io_elem_size(el), dsz = kiln_dtype_size(dt);
    int64_t numel = kiln_shape_numel(shape), cap = 0, done = 0;
    int64_t per_chunk = (int64_t)(CHUNK / esz);
    unsigned char *data = calloc(1, 1);
    while (data && done < numel) {
        int64_t n = numel - done < per_chunk ? numel - done : per_chunk;
        int64_t got = read_full(r, buf, (size_t)n * esz, e);
        if (got < 0)
            goto fail;
        int64_t k = got / (int64_t)esz;
        if (done + k > cap) {
            cap = grown_capacity(cap, done + k, numel, dsz);
            unsigned char *p = realloc(data, (size_t)cap * dsz);
            if (!p) {
                e->status = KILN_ERR_MEMORY;
                io_fail(e, "out of memory (%" PRId64 " bytes)",
                        cap * (int64_t)dsz);
                goto fail;
            }
            data = p;
        }
        if (io_convert(buf, el, data + (size_t)done * dsz, dt, k, done, e))
            goto fail;
        done += k;
        if (got < n * (int64_t)esz) {
            io_fail(
                e, "truncated: expected %" PRId64 " data bytes, got %" PRId64,
                numel * (int64_t)esz, done * (int64_t)esz + got % (int64_t)esz);
            goto fail;
        }
    }
    kiln_tensor *t = data ? kiln_tensor_wrap(dt, shape, data) : NULL;
    if (t) {
        t->owned = 1;
        return t;
    }
    e->status = KILN_ERR_MEMORY;
    io_fail(e, "%s", data ? kiln_last_error() : "out of memory");
fail:
    free(data);
    return NULL;
}

int io_expect_end(io_reader *r, int64_t expected, io_err *e)
{
    unsigned char buf[4096];
    int64_t extra = 0;
    for (;;) {
        int64_t k = r->read(r->ctx, buf, sizeof buf, e);
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        extra += k;
    }
    if (extra > 0)
        return io_fail(e,
                       "size mismatch: expected %" PRId64
                       " data bytes, found %" PRId64 " more (trailing data)",
                       expected, extra);
    return 0;
}

int io_elem_of_dtype(kiln_dtype dt, io_elem *el, io_err *e)
{
    if (dt == KILN_F32) {
        *el = IO_F32;
        return 0;
    }
    if (dt == KILN_I32) {
        *el = IO_I32;
        return 0;
    }
    e->status = KILN_ERR_DTYPE;
    return io_fail(e, "dtype %s cannot be saved (only f32 and i32)",
                   kiln_dtype_name(dt));
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

const void *io_le_data(const kiln_tensor *t, void **owned, io_err *e)
{
    *owned = NULL;
    if (host_is_little_endian())
        return kiln_tensor_data(t);
    /* Every dtype we write is 4 bytes wide (io_elem_of_dtype). */
    size_t bytes = (size_t)kiln_tensor_numel(t) * 4;
    unsigned char *copy = malloc(bytes ? bytes : 1);
    if (!copy) {
        io_fail(e, "out of memory");
        return NULL;
    }
    const unsigned char *src = kiln_tensor_data(t);
    for (size_t i = 0; i < bytes; i += 4)
        for (int k = 0; k < 4; k++)
            copy[i + (size_t)k] = src[i + 3 - (size_t)k];
    *owned = copy;
    return copy;
}

int io_refuse_dir(int fd, io_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))
        return 0; /* a pipe is read as it comes and ends */
    if (S_ISDIR(st.st_mode))
        return io_fail(e, "is a directory");
    /* a device may never end (/dev/zero) */
    return io_fail(e, "not a regular file or a pipe (a device or socket)");
}

int io_open_fd(const char *path, io_err *e)
{
    /* O_NONBLOCK: a FIFO without a writer would block open */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return io_fail(e, "cannot open: %s", strerror(errno));
    if (io_refuse_dir(fd, e)) {
        close(fd);
        return -1;
    }
    /* reads block again, as on any file */
    int flags = fcntl(fd, F_GETFL);
    if (flags != -1)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

FILE *io_open_read(const char *path, io_err *e)
{
    int fd = io_open_fd(path, e);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) {
        io_fail(e, "cannot open: %s", strerror(errno));
        close(fd);
    }
    return f;
}
