/* Row maximum, shared by the fast reductions and softmax kernels. */
#ifndef KILN_CPU_FAST_REDUCE_H
#define KILN_CPU_FAST_REDUCE_H

#include <stdint.h>

/* The largest of n floats, NaN when any is NaN (vectorised). */
float kiln_row_max(const float *x, int64_t n);

#endif
