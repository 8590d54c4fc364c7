/* Shared helpers of the file-format readers and writers: error messages,
   element types as stored in files, little-endian conversion into tensors. */
#ifndef KILN_IO_UTIL_H
#define KILN_IO_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/shape.h" /* checked sizes: kiln_shape_size_max */
#include "kiln.h"

/* Readers build their message bottom-up in a buffer of their own and only
   the public entry point publishes it (with the path) through
   kiln_set_last_error, so a nested helper never formats from the buffer it
   is writing to. */
typedef struct io_err {
    kiln_status status; /* KILN_ERR_IO unless a helper knows better */
    char msg[512];
} io_err;

#define IO_ERR_INIT                                                            \
    {                                                                          \
        KILN_ERR_IO, ""                                                        \
    }

#if defined(__GNUC__)
#define IO_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define IO_PRINTF(a, b)
#endif

/* Formats a message into e (when e is not NULL); always returns -1 so that
   callers can write `return io_fail(e, ...)`. */
int io_fail(io_err *e, const char *fmt, ...) IO_PRINTF(2, 3);
/* Prepends formatted context ("member 'W.npy': ") to e's message; -1. */
int io_prefix(io_err *e, const char *fmt, ...) IO_PRINTF(2, 3);
/* Every reader calls this on the file it opened: -1 with "is a directory"
   when it is one (reading one gives misleading errors) or "not a regular
   file or a pipe" for a device or socket (/dev/zero never ends), else 0. */
int io_refuse_dir(int fd, io_err *e);
/* A descriptor of path open for reading, refusing what io_refuse_dir
   refuses; opening does not block on a FIFO (one without a writer reads
   as empty).  -1 with a message. */
int io_open_fd(const char *path, io_err *e);
/* io_open_fd as a stream; NULL with a message. */
FILE *io_open_read(const char *path, io_err *e);

/* Longest tensor name the file formats accept, in bytes. */
#define IO_NAME_MAX 1000

/* Element types as stored in a file, always little-endian. */
typedef enum io_elem {
    IO_F32,
    IO_F64,
    IO_I32,
    IO_I64,
    IO_U8,
} io_elem;

size_t io_elem_size(io_elem el);
/* The Kiln dtype an element type loads as (f64 -> f32, i64/u8 -> i32). */
kiln_dtype io_elem_natural(io_elem el);
/* numpy-style name ("<f8") used in messages and by kiln_file_info. */
const char *io_elem_name(io_elem el);

/* Converts n little-endian elements of type el at src into dst of dtype dt,
   element base_index onwards (used in messages).  Supported: f32/f64/u8 to
   f32, i32/i64/u8 to i32; i64 values outside int32 are an error. */
int io_convert(const unsigned char *src, io_elem el, void *dst, kiln_dtype dt,
               int64_t n, int64_t base_index, io_err *e);

/* A byte source: read returns the number of bytes read (0 at the end) or -1
   with a message in e. */
typedef struct io_reader {
    int64_t (*read)(void *ctx, void *buf, size_t n, io_err *e);
    void *ctx;
} io_reader;

/* Reads exactly n bytes into buf: -1 with "truncated WHAT" when the
   source ends first, or the source's own error. */
int io_read_exact(io_reader *r, void *buf, size_t n, const char *what,
                  io_err *e);
/* Reads numel(t) elements of type el from r in chunks, converting into t.
   Fails on a short read with "truncated: expected N data bytes, got M". */
int io_read_tensor(io_reader *r, io_elem el, kiln_tensor *t, io_err *e);
/* Reads a tensor of dtype dt and shape (valid, already size-checked) from r
   when nothing has verified that r holds that much data (a compressed
   stream): the buffer grows geometrically as the data arrives, so a header
   claiming gigabytes over a few bytes fails with "truncated" having
   allocated no more than about twice the data really there.  NULL with a
   message in e. */
kiln_tensor *io_read_tensor_growing(io_reader *r, io_elem el, kiln_dtype dt,
                                    kiln_shape shape, io_err *e);
/* Fails when r has any byte left ("trailing data"). */
int io_expect_end(io_reader *r, int64_t expected, io_err *e);

/* The element type a tensor is written as (f32 -> IO_F32, i32 -> IO_I32);
   -1 with a message for dtypes no file format here can hold. */
int io_elem_of_dtype(kiln_dtype dt, io_elem *el, io_err *e);
/* The tensor's data in little-endian byte order: the data itself on a
   little-endian host, else a swapped copy returned in *owned (free it). */
const void *io_le_data(const kiln_tensor *t, void **owned, io_err *e);

uint32_t io_load_le32(const unsigned char *p);
uint64_t io_load_le64(const unsigned char *p);
uint32_t io_load_be32(const unsigned char *p);
void io_store_le64(unsigned char *p, uint64_t v);

#endif
