/* The host tensor's layout, shared inside the library. */
#ifndef KILN_BASE_TENSOR_H
#define KILN_BASE_TENSOR_H

#include "kiln.h"

struct kiln_tensor {
    kiln_dtype dtype;
    kiln_shape shape;
    void *data;
    int owned;
    int listed; /* owned by a kiln_tensor_list: a second add is refused */
};

size_t kiln_tensor_bytes(const kiln_tensor *t);

#endif
