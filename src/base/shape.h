/* Shape helpers: validity, equality, strides and numpy broadcasting. */
#ifndef KILN_BASE_SHAPE_H
#define KILN_BASE_SHAPE_H

#include "kiln.h"

int kiln_dtype_supported(kiln_dtype dt);
/* ndim in [0, 8], dims >= 0, numel bounded. */
int kiln_shape_valid(kiln_shape s);
int kiln_shape_equal(kiln_shape a, kiln_shape b);
/* Row-major element strides. */
void kiln_shape_strides(kiln_shape s, int64_t *strides);
/* numpy broadcast of a and b into out; 0 when incompatible. */
int kiln_shape_broadcast(kiln_shape a, kiln_shape b, kiln_shape *out);
/* Strides of in viewed as out (0 on broadcast axes), out.ndim entries. */
void kiln_broadcast_strides(kiln_shape in, kiln_shape out, int64_t *strides);

#endif
