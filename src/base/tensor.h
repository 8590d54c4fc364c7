/* The host tensor's layout, shared inside the library. */
#ifndef KILN_BASE_TENSOR_H
#define KILN_BASE_TENSOR_H

#include "kiln.h"

struct kiln_tensor {
    kiln_dtype dtype;
    kiln_shape shape;
    void *data;
    int owned;
};

size_t kiln_tensor_bytes(const kiln_tensor *t);

#endif
