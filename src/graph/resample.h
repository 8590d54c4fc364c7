/* The pooling group's geometry, shared by the shape rules (graph/pool_infer.c)
   and the kernels (cpu/pool_ref.c, cpu/fast_pool.c): which inputs each
   output of a dim reads, as PyTorch computes them.  Dims d = 0, 1 are the
   last two (H, W) of an N...HW tensor. */
#ifndef KILN_GRAPH_RESAMPLE_H
#define KILN_GRAPH_RESAMPLE_H

#include <math.h>

#include "graph/graph.h"

/* PyTorch's pooling output size along dim d for an input of size in
   (pooling_output_shape: floor or ceil mode, the last window starting
   inside the input or its left padding); < 1 when no window fits. */
int64_t kiln_pool_out_size(const kiln_window *w, int d, int64_t in);

/* KILN_OK when w is a valid 2-D pooling window (kernel, stride and
   dilation >= 1, 0 <= padding <= kernel / 2), else why.  */
kiln_status kiln_pool_window_check(const kiln_window *w, char *why, size_t len);

/* Max pooling: output o of dim d reads inputs first, first + step, ...
   below end (PyTorch's scan: the window clipped to the input, its start
   moved past the padding by whole dilations; empty when first >= end). */
typedef struct kiln_span {
    int64_t first, end, step;
} kiln_span;

static inline kiln_span kiln_max_pool_span(const kiln_window *w, int d,
                                           int64_t in, int64_t o)
{
    kiln_span s;
    s.step = w->dilation[d];
    s.first = o * w->stride[d] - w->pad_lo[d];
    s.end = s.first + (int64_t)(w->kernel[d] - 1) * s.step + 1;
    if (s.end > in)
        s.end = in;
    while (s.first < 0)
        s.first += s.step;
    return s;
}

/* Resample2d: output o of dim d is the sum over t < count of weight(t) *
   input[start + t * step], weight(t) = t ? w1 : w0. */
typedef struct kiln_taps {
    int64_t start, step;
    int64_t count;
    float w0, w1;
} kiln_taps;

static inline kiln_taps kiln_taps_one(int64_t j)
{
    kiln_taps t = {j, 1, 1, 1.0f, 1.0f};
    return t;
}

/* Average pooling: the window clipped to the input, divided by its size
   clipped (count_include_pad off) or clipped to the padded input only. */
static inline kiln_taps kiln_avg_taps(const kiln_window *w, int d, int64_t in,
                                      int64_t o)
{
    int64_t lo = o * w->stride[d] - w->pad_lo[d];
    int64_t hi = lo + w->kernel[d];
    if (hi > in + w->pad_hi[d])
        hi = in + w->pad_hi[d];
    int64_t padded = hi - lo;
    lo = lo < 0 ? 0 : lo;
    hi = hi > in ? in : hi;
    int64_t count = hi > lo ? hi - lo : 0;
    int64_t div = (w->flags & KILN_WINDOW_COUNT_PAD) ? padded : count;
    float wt = count ? 1.0f / (float)div : 0.0f;
    kiln_taps t = {lo, 1, count, wt, wt};
    return t;
}

static inline kiln_taps kiln_adaptive_taps(int64_t in, int64_t out, int64_t o)
{
    int64_t lo = o * in / out, hi = ((o + 1) * in + out - 1) / out;
    float wt = 1.0f / (float)(hi - lo);
    kiln_taps t = {lo, 1, hi - lo, wt, wt};
    return t;
}

static inline int64_t kiln_nearest_index(const kiln_window *w, int d,
                                         int64_t in, int64_t out, int64_t o)
{
    if (out == in)
        return o;
    if (out == 2 * in)
        return o >> 1;
    float scale = w->inv_scale[d] > 0 ? w->inv_scale[d] : (float)in / out;
    int64_t j = (int64_t)floorf((float)o * scale);
    return j < in - 1 ? j : in - 1;
}

/* Bilinear: PyTorch's source index in float, its floor and the next
   input (the same one at the last), weighted by distance. */
static inline kiln_taps kiln_bilinear_taps(const kiln_window *w, int d,
                                           int64_t in, int64_t out, int64_t o)
{
    float src;
    if (w->flags & KILN_WINDOW_ALIGN_CORNERS) {
        float scale = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        src = scale * (float)o;
    } else {
        float scale =
            w->inv_scale[d] > 0 ? w->inv_scale[d] : (float)in / (float)out;
        src = scale * ((float)o + 0.5f) - 0.5f;
        src = src < 0 ? 0 : src;
    }
    int64_t j = (int64_t)src;
    float l1 = src - (float)j;
    kiln_taps t = {j, j < in - 1 ? 1 : 0, 2, 1.0f - l1, l1};
    return t;
}

static inline kiln_taps kiln_resample_taps(const kiln_window *w, int d,
                                           int64_t in, int64_t out, int64_t o)
{
    int64_t j = o - w->pad_lo[d];
    switch (w->mode) {
    case KILN_RESAMPLE_AVG:
        return kiln_avg_taps(w, d, in, o);
    case KILN_RESAMPLE_ADAPTIVE:
        return kiln_adaptive_taps(in, out, o);
    case KILN_RESAMPLE_REFLECT:
        j = j < 0 ? -j : j;
        return kiln_taps_one(j >= in ? 2 * (in - 1) - j : j);
    case KILN_RESAMPLE_REPLICATE:
        return kiln_taps_one(j < 0 ? 0 : j >= in ? in - 1 : j);
    case KILN_RESAMPLE_NEAREST:
        return kiln_taps_one(kiln_nearest_index(w, d, in, out, o));
    default:
        return kiln_bilinear_taps(w, d, in, out, o);
    }
}

/* The input (x) and output (y) sizes of resample node n along dim d: its
   input's and its own, swapped for resample2d_grad. */
static inline void kiln_resample_sizes(const kiln_node *n, int d, int64_t *in,
                                       int64_t *out)
{
    const kiln_shape *x = &n->in[0]->shape, *y = &n->shape;
    if (n->op == KILN_OP_RESAMPLE2D_GRAD) {
        const kiln_shape *t = x;
        x = y;
        y = t;
    }
    *in = x->d[x->ndim - 2 + d];
    *out = y->d[y->ndim - 2 + d];
}

/* For the builders (graph/pool.c): 1 when x is an f32 tensor of min_nd to
   max_nd dims whose last two are not symbolic; else records why. */
int kiln_pool_check_input(kiln_graph *g, const char *fn, kiln_node *x,
                          int min_nd, int max_nd);
/* For the gradient rules: op (max_pool2d_grad or _gather) of (x, v) with
   n's window; resample2d or its transpose of v, shaped s, with n's. */
kiln_node *kiln_max_pool_pair(kiln_graph *g, kiln_op op, const kiln_node *n,
                              kiln_node *x, kiln_node *v);
kiln_node *kiln_resample_node(kiln_graph *g, kiln_op op, const kiln_node *n,
                              kiln_node *v, kiln_shape s);

#endif
