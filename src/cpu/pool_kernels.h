/* The pooling group's kernels: references (pool_ref.c) and fast versions
   (fast_pool.c), with what both share. */
#ifndef KILN_CPU_POOL_KERNELS_H
#define KILN_CPU_POOL_KERNELS_H

#include "cpu/kernels.h"
#include "graph/resample.h"

/* An N...HW tensor as planes of ih x iw inputs and oh x ow outputs. */
typedef struct kiln_planes {
    int64_t n, ih, iw, oh, ow;
} kiln_planes;

/* x: the input side's shape, y: the output side's. */
static inline kiln_planes kiln_planes_of(kiln_shape x, kiln_shape y)
{
    kiln_planes p;
    p.ih = x.d[x.ndim - 2];
    p.iw = x.d[x.ndim - 1];
    p.oh = y.d[y.ndim - 2];
    p.ow = y.d[y.ndim - 1];
    p.n = 1;
    for (int i = 0; i < x.ndim - 2; i++)
        p.n *= x.d[i];
    return p;
}

/* Offset in a plane of x of the maximum of output (oh, ow)'s window,
   PyTorch's scan: row by row, a later element wins when greater or NaN
   (so ties go to the first maximum, NaN to the last NaN); -1 for an empty
   window.  *best is the maximum (-inf for an empty window). */
static inline int64_t kiln_window_argmax(const kiln_window *w, const float *x,
                                         const kiln_planes *p, int64_t oh,
                                         int64_t ow, float *best)
{
    kiln_span sh = kiln_max_pool_span(w, 0, p->ih, oh);
    kiln_span sw = kiln_max_pool_span(w, 1, p->iw, ow);
    float m = -INFINITY;
    int64_t arg = -1;
    for (int64_t h = sh.first; h < sh.end; h += sh.step)
        for (int64_t c = sw.first; c < sw.end; c += sw.step) {
            float v = x[h * p->iw + c];
            if (arg < 0 || v > m || isnan(v)) {
                m = v;
                arg = h * p->iw + c;
            }
        }
    *best = m;
    return arg;
}

/* What a fast kernel's shares read: the window, the planes, the inputs
   and the output. */
typedef struct kiln_pool_job {
    const kiln_window *w;
    kiln_planes p;
    const float *x, *v; /* x (dy for resample2d_grad); max pooling's dy or a */
    float *y;
} kiln_pool_job;

/* x: the input side's shape, y: the output side's. */
static inline kiln_pool_job kiln_pool_job_of(const kiln_node *n, kiln_shape x,
                                             kiln_shape y, void *out,
                                             void *const *in)
{
    kiln_pool_job j = {&n->at.win, kiln_planes_of(x, y), in[0],
                       n->n_in > 1 ? in[1] : NULL, out};
    return j;
}

#define KILN_POOL_KERNEL(name)                                                 \
    void name(const kiln_node *n, void *out, void *const *in);
KILN_POOL_KERNEL(kiln_ref_max_pool2d)
KILN_POOL_KERNEL(kiln_ref_max_pool2d_grad)
KILN_POOL_KERNEL(kiln_ref_max_pool2d_gather)
KILN_POOL_KERNEL(kiln_ref_resample2d)
KILN_POOL_KERNEL(kiln_ref_resample2d_grad)
#undef KILN_POOL_KERNEL

#endif
