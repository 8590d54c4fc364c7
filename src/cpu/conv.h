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

/* The direct kernels of one input channel (cpu/conv_direct.c): whether
   they take g (2-D, one channel per group, unit stride and dilation, rows
   of 8 or more, AVX-512 present), the scratch floats they need, and one
   image: y [o, out] from x [1, in] (bias NULL: none; split: its blocks of
   output channels go over the pool), or the weight
   gradient of x and dy [o, out] written (first) or added into acc [o,
   taps]. */
int kiln_conv_direct_ok(const kiln_conv_geom *g);
int64_t kiln_conv_direct_floats(const kiln_conv_geom *g);
void kiln_conv_direct_fwd(const kiln_conv_geom *g, const float *x,
                          const float *w, const float *bias, int relu, float *y,
                          float *scratch, int split);
void kiln_conv_direct_wgrad(const kiln_conv_geom *g, const float *x,
                            const float *dy, float *acc, int first,
                            float *scratch);

/* The direct kernels of many channels (cpu/conv_rows.c): whether they take
   g (2-D, one group, unit stride and dilation, padding under the kernel,
   8 or more channels each side, rows of 8 or more, AVX-512 present), the
   floats shared by a call (the packed weights of conv and
   conv_transpose, which kiln_conv_rows_pack writes from w) and the
   floats each image's scratch needs.  kiln_conv_rows_image runs one image
   of conv (bias NULL: none) or conv_transpose: out from a (x or dy);
   kiln_conv_rows_wgrad adds one image's weight gradient into its scratch
   (first: written) and on the last image writes acc [o, c * taps].
   split: the image's blocks go over the pool. */
int kiln_conv_rows_ok(const kiln_conv_geom *g);
int64_t kiln_conv_rows_shared_floats(const kiln_conv_geom *g, kiln_op op);
int64_t kiln_conv_rows_floats(const kiln_conv_geom *g, kiln_op op);
void kiln_conv_rows_pack(const kiln_conv_geom *g, kiln_op op, const float *w,
                         float *wp);
void kiln_conv_rows_image(const kiln_conv_geom *g, kiln_op op, const float *a,
                          const float *wp, const float *bias, int relu,
                          float *out, float *scratch, int split);
void kiln_conv_rows_wgrad(const kiln_conv_geom *g, const float *x,
                          const float *dy, float *acc, int first, int last,
                          float *scratch, int split);

/* The direct kernel with output channels in the vector lanes
   (cpu/conv_lanes.c), conv's forward only: whether it takes g (2-D, one
   group, 16 or more output channels, rows of 8 or more, unit stride along
   rows, AVX-512 present), the floats shared by a call (the weights
   packed by kiln_conv_lanes_pack) and those of one image's scratch; one
   image y [o, out] from x [c, in] (bias NULL: none), its tiles split over
   the pool when split. */
int kiln_conv_lanes_ok(const kiln_conv_geom *g);
int64_t kiln_conv_lanes_shared_floats(const kiln_conv_geom *g);
int64_t kiln_conv_lanes_floats(const kiln_conv_geom *g);
void kiln_conv_lanes_pack(const kiln_conv_geom *g, const float *w, float *wp);
void kiln_conv_lanes_image(const kiln_conv_geom *g, const float *x,
                           const float *wp, const float *bias, int relu,
                           float *y, float *scratch, int split);

void kiln_ref_CONV(const kiln_node *n, void *out, void *const *in);
void kiln_ref_CONV_TRANSPOSE(const kiln_node *n, void *out, void *const *in);
void kiln_ref_CONV_WGRAD(const kiln_node *n, void *out, void *const *in);

#endif
