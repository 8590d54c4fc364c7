/* Builders of reflect and replicate padding and of nearest and bilinear
   upsampling: resample2d nodes (graph/resample.h) with PyTorch's argument
   rules and errors. */
#include <math.h>

#include "graph/builders.h"
#include "graph/resample.h"

enum { BIG = 1 << 30 }; /* sizes and paddings beyond this are refused */

static kiln_node *resample(kiln_graph *g, const char *fn, kiln_node *x,
                           kiln_shape s, const kiln_window *w)
{
    if (!check_shape(g, fn, s))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_RESAMPLE2D, .shape = s, .n_in = 1, .in = &x};
    p.at.win = *w;
    return kiln_node_build(g, fn, &p);
}

/* Padding along dim d (0: H, 1: W) of the window by lo and hi. */
static int pad_dim(kiln_graph *g, const char *fn, kiln_node *x, int d,
                   int64_t lo, int64_t hi, kiln_window *w, kiln_shape *s)
{
    char b[SHAPE_BUF];
    int axis = x->shape.ndim - 2 + d;
    int64_t in = x->shape.d[axis];
    if (lo < 0 || hi < 0 || lo > BIG || hi > BIG) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "%s: padding (%lld, %lld) must be in [0, 2^30]", fn,
                        (long long)lo, (long long)hi);
        return 0;
    }
    if (w->mode == KILN_RESAMPLE_REFLECT ? (lo >= in || hi >= in)
                                         : (in < 1 && (lo || hi))) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: padding size should be less than the "
                        "corresponding input dimension, but got: padding "
                        "(%lld, %lld) at dimension %d of input %s",
                        fn, (long long)lo, (long long)hi, axis, S(x->shape, b));
        return 0;
    }
    w->pad_lo[d] = (int)lo;
    w->pad_hi[d] = (int)hi;
    s->d[axis] = in + lo + hi;
    return 1;
}

kiln_node *kiln_pad_mode(kiln_graph *g, kiln_node *x, const int64_t *pad,
                         int n_pad, kiln_padding mode)
{
    const char *fn = "kiln_pad_mode";
    if (!g)
        return kiln_null_graph(fn);
    if (!pad)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: pad is NULL", fn);
    if (n_pad != 2 && n_pad != 4)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: want 2 or 4 pad sizes (left, right[, top, "
                               "bottom]), got %d",
                               fn, n_pad);
    if (mode != KILN_PAD_REFLECT && mode != KILN_PAD_REPLICATE)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: unknown mode %d", fn,
                               (int)mode);
    int dims = n_pad / 2;
    if (!kiln_pool_check_input(g, fn, x, dims + 1, dims + 2))
        return &g->poison;
    kiln_window w = {.nd = 2};
    w.mode = mode == KILN_PAD_REFLECT ? KILN_RESAMPLE_REFLECT
                                      : KILN_RESAMPLE_REPLICATE;
    kiln_shape s = x->shape;
    /* F.pad's order: the last dim's (left, right) first */
    if (!pad_dim(g, fn, x, 1, pad[0], pad[1], &w, &s) ||
        (dims == 2 && !pad_dim(g, fn, x, 0, pad[2], pad[3], &w, &s)))
        return &g->poison;
    return resample(g, fn, x, s, &w);
}

/* Output size along dim d from size (non-NULL) or scale. */
static int64_t up_size(int64_t in, const int64_t *size, const double *scale,
                       int d, kiln_window *w)
{
    if (size)
        return size[d];
    if (in * scale[d] > BIG) /* refused by the caller as too large */
        return (int64_t)BIG + 1;
    w->inv_scale[d] = (float)(1.0 / scale[d]);
    return (int64_t)floor((double)in * scale[d]);
}

kiln_node *kiln_upsample2d(kiln_graph *g, kiln_node *x, const int64_t *size,
                           const double *scale, kiln_upsample mode,
                           int align_corners)
{
    const char *fn = "kiln_upsample2d";
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_pool_check_input(g, fn, x, 4, 4))
        return &g->poison;
    if (!size == !scale)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: give either size or scale, not %s", fn,
                               size ? "both" : "neither");
    if (mode != KILN_UPSAMPLE_NEAREST && mode != KILN_UPSAMPLE_BILINEAR)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: unknown mode %d", fn,
                               (int)mode);
    if (mode == KILN_UPSAMPLE_NEAREST && align_corners)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: align_corners can only be set with "
                               "bilinear, not nearest",
                               fn);
    kiln_window w = {.nd = 2};
    w.mode = mode == KILN_UPSAMPLE_NEAREST ? KILN_RESAMPLE_NEAREST
                                           : KILN_RESAMPLE_BILINEAR;
    w.flags = align_corners ? KILN_WINDOW_ALIGN_CORNERS : 0;
    kiln_shape s = x->shape;
    for (int d = 0; d < 2 && scale; d++)
        if (!isfinite(scale[d]) || scale[d] <= 0)
            return kiln_graph_fail(g, KILN_ERR_ARG,
                                   "%s: scale %g along dim %d must be positive "
                                   "and finite",
                                   fn, scale[d], 2 + d);
    for (int d = 0; d < 2; d++) {
        int64_t in = s.d[2 + d], out = up_size(in, size, scale, d, &w);
        if (in < 1 || out < 1 || out > BIG)
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: input and output sizes should be greater than 0 (and "
                "below 2^30), got %lld -> %lld along dim %d of input %s",
                fn, (long long)in, (long long)out, 2 + d, S(x->shape, b));
        s.d[2 + d] = out;
    }
    return resample(g, fn, x, s, &w);
}
