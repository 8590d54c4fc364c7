/* The convolution kernels (cpu/conv_ref.c, cpu/conv_fast.c): their
   geometry, the reference kernels and the fast kernels with the scratch
   memory they are given. */
#ifndef KILN_CPU_CONV_H
#define KILN_CPU_CONV_H

#include "graph/graph.h"

/* A convolution's sizes, spatial dims padded to 3 with size 1: x [n, c,
 *in], y [n, o, *out], w [o, c / groups, *k]. */
typedef struct kiln_conv_geom {
    int64_t n, c, o, groups;
    int64_t in[3], out[3], k[3];
    int64_t stride[3], dil[3], pad[3]; /* pad: before each dim */
} kiln_conv_geom;

/* The geometry of a conv, conv_transpose or conv_weight_grad node. */
kiln_conv_geom kiln_conv_geom_of(const kiln_node *n);

/* The fused end of a conv: y [channels, size] plus bias[channel] (NULL:
   none), then relu when asked. */
void kiln_conv_finish(float *y, int64_t channels, int64_t size,
                      const float *bias, int relu);

void kiln_ref_CONV(const kiln_node *n, void *out, void *const *in);
void kiln_ref_CONV_TRANSPOSE(const kiln_node *n, void *out, void *const *in);
void kiln_ref_CONV_WGRAD(const kiln_node *n, void *out, void *const *in);

#endif
