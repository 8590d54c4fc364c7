/* Shape helpers: validity, equality, strides and numpy broadcasting. */
#ifndef KILN_BASE_SHAPE_H
#define KILN_BASE_SHAPE_H

#include "kiln.h"

int kiln_dtype_supported(kiln_dtype dt);

/* Checked shape arithmetic: the one place sizes are multiplied.  A shape is
   valid when ndim is in [0, KILN_MAX_DIMS], every dimension is >= 0, and the
   product of its dimensions, zeros counted as 1, is at most the limit
   (KILN_MAX_NUMEL unless a reader sets a smaller one).  Every partial product
   of a valid shape's dimensions (strides, row lengths, batch counts) is then
   at most the limit, and numel * elem_size at most 2^43 bytes.

   Checks s against max_numel (clamped to KILN_MAX_NUMEL) and sets *numel and
   *bytes (numel * elem_size) when not NULL.  Returns NULL when valid;
   otherwise a static message saying why ("has a negative dimension", ...),
   leaving *numel and *bytes untouched. */
const char *kiln_shape_size_max(kiln_shape s, int64_t max_numel,
                                size_t elem_size, int64_t *numel,
                                size_t *bytes);
/* kiln_shape_size_max with the limit KILN_MAX_NUMEL. */
const char *kiln_shape_size(kiln_shape s, size_t elem_size, int64_t *numel,
                            size_t *bytes);
/* 1 when kiln_shape_size accepts s. */
int kiln_shape_valid(kiln_shape s);
/* Checked dimension arithmetic for builders (pad, concat): *out = a + b
   when a, b >= 0 and the sum is at most KILN_MAX_NUMEL; otherwise 0. */
int kiln_dim_add(int64_t a, int64_t b, int64_t *out);
int kiln_shape_equal(kiln_shape a, kiln_shape b);
/* kiln_shape_equal without copying the shapes: shape rules and kernels
   compare the shapes of every node they see. */
static inline int kiln_shape_same(const kiln_shape *a, const kiln_shape *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i])
            return 0;
    return 1;
}
/* Row-major element strides. */
void kiln_shape_strides(kiln_shape s, int64_t *strides);
/* numpy broadcast of a and b into out; 0 when incompatible. */
int kiln_shape_broadcast(kiln_shape a, kiln_shape b, kiln_shape *out);
/* Strides of in viewed as out (0 on broadcast axes), out.ndim entries. */
void kiln_broadcast_strides(kiln_shape in, kiln_shape out, int64_t *strides);

/* Merges s's axes, size-1 axes dropped, into [outer kept, red reduced,
   inner kept]; 0 when the reduced axes are not one contiguous run. */
int kiln_reduce_split(kiln_shape s, unsigned axes, int64_t *outer, int64_t *red,
                      int64_t *inner);

#endif
