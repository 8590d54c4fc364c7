/* The .npy array header (NPY format 1.0 to 3.0): magic, version, a Python
   dict literal giving dtype, memory order and shape. */
#ifndef KILN_IO_NPY_H
#define KILN_IO_NPY_H

#include "io/io_util.h"

/* Room for the longest header we write (8 dims of 19 digits). */
#define NPY_HEADER_MAX 384

typedef struct npy_header {
    io_elem elem;
    kiln_shape shape;
    int64_t numel;
    int64_t header_bytes; /* magic to the end of the padding */
} npy_header;

/* Reads and validates a header from r: magic "\x93NUMPY", version, header
   length, dict syntax, a supported little-endian descr, C order and a sane
   shape.  -1 with a message on error. */
int npy_read_header(io_reader *r, npy_header *h, io_err *e);
/* Writes a version 1.0 header into buf (NPY_HEADER_MAX bytes) padded with
   spaces to a multiple of 64 bytes, the last one '\n'; returns its length. */
size_t npy_format_header(unsigned char *buf, io_elem el, kiln_shape shape);

#endif
