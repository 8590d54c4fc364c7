/* One .npy array from memory: the header parser, then the data (grown as
   it arrives, as for a deflated .npz member) and the end check. */
#include <stdlib.h>
#include <string.h>

#include "io/npy.h"

typedef struct mem {
    const uint8_t *p;
    size_t left;
} mem;

static int64_t mem_read(void *ctx, void *buf, size_t n, io_err *e)
{
    (void)e;
    mem *m = ctx;
    if (n > m->left)
        n = m->left;
    memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return (int64_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mem m = {data, size};
    io_reader r = {mem_read, &m};
    io_err e = IO_ERR_INIT;
    npy_header h;
    if (npy_read_header(&r, &h, &e) != 0)
        return 0;
    kiln_tensor *t = io_read_tensor_growing(&r, h.elem, io_elem_natural(h.elem),
                                            h.shape, &e);
    if (t) {
        if (kiln_tensor_numel(t) != h.numel)
            abort();
        io_expect_end(&r, h.numel * (int64_t)io_elem_size(h.elem), &e);
    }
    kiln_tensor_free(t);
    return 0;
}
