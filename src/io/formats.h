/* Loaders shared by the public readers and kiln_file_info. */
#ifndef KILN_IO_FORMATS_H
#define KILN_IO_FORMATS_H

#include "io/io_util.h"

/* Called once per tensor, in file order, with its stored element type. */
typedef void (*io_info_fn)(void *ctx, const char *name, io_elem el,
                           kiln_shape shape);

/* Reads path and appends every tensor to out; with out NULL, reads only the
   headers and reports each tensor to fn instead.  -1 with a message. */
int npz_load(const char *path, kiln_tensor_list *out, io_info_fn fn, void *ctx,
             io_err *e);
int safetensors_load(const char *path, kiln_tensor_list *out, io_info_fn fn,
                     void *ctx, io_err *e);

/* Reads the tensors of path into a new list with load (a loader above);
   NULL with kiln_last_error "fn: path: why" for a NULL path or any error. */
kiln_tensor_list *
io_read_list(const char *fn, const char *path,
             int (*load)(const char *path, kiln_tensor_list *out,
                         io_info_fn info, void *ctx, io_err *e));
/* Kiln's .bin (io/bin.c); it has no header-only mode: out is never NULL. */
int bin_load(const char *path, kiln_tensor_list *out, io_info_fn info,
             void *ctx, io_err *e);

/* Adds a freshly read tensor to out, freeing it when that fails (a file
   with a name twice). */
int io_list_add(kiln_tensor_list *out, const char *name, kiln_tensor *t,
                io_err *e);

#endif
