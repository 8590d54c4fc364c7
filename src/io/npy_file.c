/* kiln_npy_read: one numpy .npy array file (np.save). */
#include <stdio.h>

#include "base/error.h"
#include "io/npy.h"

static int64_t file_read(void *ctx, void *buf, size_t n, io_err *e)
{
    size_t k = fread(buf, 1, n, (FILE *)ctx);
    if (k < n && ferror((FILE *)ctx))
        return io_fail(e, "read error");
    return (int64_t)k;
}

kiln_tensor *kiln_npy_read(const char *path)
{
    io_err e = IO_ERR_INIT;
    if (!path) {
        kiln_set_last_error("kiln_npy_read: path is NULL");
        return NULL;
    }
    FILE *f = io_open_read(path, &e);
    kiln_tensor *t = NULL;
    if (f) {
        io_reader r = {file_read, f};
        npy_header h;
        /* The tensor grows as its data arrives: a header claiming more
           than the file holds fails "truncated" without allocating it. */
        if (npy_read_header(&r, &h, &e) == 0 &&
            (t = io_read_tensor_growing(&r, h.elem, io_elem_natural(h.elem),
                                        h.shape, &e)) &&
            io_expect_end(&r, 0, &e)) {
            kiln_tensor_free(t);
            t = NULL;
        }
        fclose(f);
    }
    if (!t)
        kiln_set_last_error("%s: %s", path, e.msg);
    return t;
}
