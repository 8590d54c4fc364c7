/* Shape rules of the pooling group (ops.def): max pooling, its gradient and
   gather, and resample2d with its transpose. */
#include "graph/builders.h"
#include "graph/resample.h"

const char *kiln_resample_mode_name(int mode)
{
    static const char *const names[] = {"none",    "avg",       "adaptive",
                                        "reflect", "replicate", "nearest",
                                        "bilinear"};
    return mode >= 0 && mode <= KILN_RESAMPLE_BILINEAR ? names[mode] : "?";
}

/* Division rounding toward minus infinity (PyTorch's div_rtn). */
static int64_t div_floor(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t kiln_pool_out_size(const kiln_window *w, int d, int64_t in)
{
    int64_t s = w->stride[d],
            span = (int64_t)w->dilation[d] * (w->kernel[d] - 1);
    int ceil = (w->flags & KILN_WINDOW_CEIL) != 0;
    int64_t out = div_floor(in + w->pad_lo[d] + w->pad_hi[d] - span - 1 +
                                (ceil ? s - 1 : 0),
                            s) +
                  1;
    if (ceil && (out - 1) * s >= in + w->pad_lo[d])
        out--;
    return out;
}

kiln_status kiln_pool_window_check(const kiln_window *w, char *why, size_t len)
{
    if (w->nd != 2)
        return kiln_infer_why(why, len, KILN_ERR_ARG, "a %d-D window (want 2)",
                              w->nd);
    for (int d = 0; d < 2; d++) {
        if (w->kernel[d] < 1 || w->stride[d] < 1 || w->dilation[d] < 1)
            return kiln_infer_why(why, len, KILN_ERR_ARG,
                                  "kernel [%d,%d], stride [%d,%d] and dilation "
                                  "[%d,%d] must be positive",
                                  w->kernel[0], w->kernel[1], w->stride[0],
                                  w->stride[1], w->dilation[0], w->dilation[1]);
        if (w->pad_lo[d] < 0 || w->pad_lo[d] != w->pad_hi[d] ||
            w->pad_lo[d] > w->kernel[d] / 2)
            return kiln_infer_why(why, len, KILN_ERR_ARG,
                                  "pad should be at most half of kernel size, "
                                  "but got pad [%d,%d] "
                                  "and kernel [%d,%d]",
                                  w->pad_lo[0], w->pad_lo[1], w->kernel[0],
                                  w->kernel[1]);
    }
    return KILN_OK;
}

/* x's shape pooled by the window in *s, or why not. */
static kiln_status pooled_shape(const kiln_window *w, kiln_shape x,
                                kiln_shape *s, char *why, size_t len)
{
    char b[SHAPE_BUF];
    kiln_status st = kiln_pool_window_check(w, why, len);
    if (st != KILN_OK)
        return st;
    if (x.ndim < 3)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "input %s: expected 3 or more dims (C,H,W)",
                              S(x, b));
    *s = x;
    for (int d = 0; d < 2; d++) {
        int64_t in = x.d[x.ndim - 2 + d], out = kiln_pool_out_size(w, d, in);
        if (out < 1)
            return kiln_infer_why(
                why, len, KILN_ERR_SHAPE,
                "input %s is too small for kernel [%d,%d] (dilation [%d,%d], "
                "pad [%d,%d]): output size %lld",
                S(x, b), w->kernel[0], w->kernel[1], w->dilation[0],
                w->dilation[1], w->pad_lo[0], w->pad_lo[1], (long long)out);
        s->d[x.ndim - 2 + d] = out;
    }
    return KILN_OK;
}

kiln_status kiln_infer_max_pool(const kiln_node *n, kiln_shape *s,
                                kiln_dtype *dt, char *why, size_t len)
{
    *dt = KILN_F32;
    kiln_status st = kiln_infer_f32(n, 0, 1, why, len);
    return st ? st : pooled_shape(&n->at.win, n->in[0]->shape, s, why, len);
}

/* (x, v): v must have the shape want; the result has shape res. */
static kiln_status pair_rule(const kiln_node *n, kiln_shape want,
                             kiln_shape res, kiln_shape *s, char *why,
                             size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!kiln_shape_equal(n->in[1]->shape, want))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "operand %s does not match %s",
                              S(n->in[1]->shape, b1), S(want, b2));
    *s = res;
    return KILN_OK;
}

/* (x, dy) -> dx: dy has the pooled shape, dx x's. */
kiln_status kiln_infer_max_pool_grad(const kiln_node *n, kiln_shape *s,
                                     kiln_dtype *dt, char *why, size_t len)
{
    kiln_shape p;
    *dt = KILN_F32;
    kiln_status st = kiln_infer_f32(n, 0, 2, why, len);
    st = st ? st : pooled_shape(&n->at.win, n->in[0]->shape, &p, why, len);
    return st ? st : pair_rule(n, p, n->in[0]->shape, s, why, len);
}

/* (x, a) -> pooled: a has x's shape. */
kiln_status kiln_infer_max_pool_gather(const kiln_node *n, kiln_shape *s,
                                       kiln_dtype *dt, char *why, size_t len)
{
    kiln_shape p;
    *dt = KILN_F32;
    kiln_status st = kiln_infer_f32(n, 0, 2, why, len);
    st = st ? st : pooled_shape(&n->at.win, n->in[0]->shape, &p, why, len);
    return st ? st : pair_rule(n, n->in[0]->shape, p, s, why, len);
}

/* Whether out is what the mode gives for an input of size in along d. */
static int resample_size_ok(const kiln_window *w, int d, int64_t in,
                            int64_t out)
{
    switch (w->mode) {
    case KILN_RESAMPLE_AVG:
        return out == kiln_pool_out_size(w, d, in);
    case KILN_RESAMPLE_REFLECT:
        return w->pad_lo[d] >= 0 && w->pad_hi[d] >= 0 && w->pad_lo[d] < in &&
               w->pad_hi[d] < in && out == in + w->pad_lo[d] + w->pad_hi[d];
    case KILN_RESAMPLE_REPLICATE:
        return w->pad_lo[d] >= 0 && w->pad_hi[d] >= 0 && in >= 1 &&
               out == in + w->pad_lo[d] + w->pad_hi[d];
    default: /* adaptive, nearest, bilinear: any sizes */
        return in >= 1 && out >= 1;
    }
}

/* resample2d: the node's shape is an attribute (the output size is the
   builder's); its leading dims are x's and each spatial size is what the
   mode gives.  resample2d_grad: the same with x and y swapped. */
kiln_status kiln_infer_resample(const kiln_node *n, kiln_shape *s,
                                kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_window *w = &n->at.win;
    int grad = n->op == KILN_OP_RESAMPLE2D_GRAD;
    kiln_shape x = grad ? n->shape : n->in[0]->shape;
    kiln_shape y = grad ? n->in[0]->shape : n->shape;
    *s = n->shape;
    *dt = KILN_F32;
    kiln_status st = kiln_infer_f32(n, 0, 1, why, len);
    if (st != KILN_OK)
        return st;
    if (w->mode == KILN_RESAMPLE_AVG)
        st = kiln_pool_window_check(w, why, len);
    else if (w->nd != 2 || w->mode < KILN_RESAMPLE_AVG ||
             w->mode > KILN_RESAMPLE_BILINEAR)
        st = kiln_infer_why(why, len, KILN_ERR_ARG, "bad mode %d", w->mode);
    if (st != KILN_OK)
        return st;
    int ok = x.ndim >= 2 && x.ndim == y.ndim;
    for (int i = 0; ok && i < x.ndim - 2; i++)
        ok = x.d[i] == y.d[i];
    for (int d = 0; ok && d < 2; d++)
        ok = resample_size_ok(w, d, x.d[x.ndim - 2 + d], y.d[y.ndim - 2 + d]);
    if (!ok)
        return kiln_infer_why(
            why, len, KILN_ERR_SHAPE, "%s cannot map %s to %s",
            kiln_resample_mode_name(w->mode), S(x, b1), S(y, b2));
    return KILN_OK;
}
