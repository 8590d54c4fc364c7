/* Builders of the pooling group: max, average and adaptive average pooling,
   flatten, and the nodes their gradient rules build. */
#include "graph/builders.h"
#include "graph/resample.h"

/* x is an f32 C,H,W or N,C,H,W tensor whose H and W are not symbolic;
   else records why, naming fn. */
int kiln_pool_check_input(kiln_graph *g, const char *fn, kiln_node *x,
                          int min_nd, int max_nd)
{
    char b[SHAPE_BUF];
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return 0;
    int nd = x->shape.ndim;
    if (nd < min_nd || nd > max_nd) {
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: input %s: expected %dD or %dD",
                        fn, S(x->shape, b), min_nd, max_nd);
        return 0;
    }
    if (x->shape.sym >> (nd - 2)) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: input %s: the last two dims cannot be symbolic",
                        fn, S(x->shape, b));
        return 0;
    }
    return 1;
}

/* A 2-D window from kernel, stride (NULL: the kernel), padding (NULL: 0)
   and dilation (NULL: 1); NULL kernel records an error. */
static int make_window(kiln_graph *g, const char *fn, const int *kernel,
                       const int *stride, const int *padding,
                       const int *dilation, kiln_window *w)
{
    if (!kernel) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: kernel is NULL", fn);
        return 0;
    }
    *w = (kiln_window){.nd = 2};
    for (int d = 0; d < 2; d++) {
        w->kernel[d] = kernel[d];
        w->stride[d] = stride ? stride[d] : kernel[d];
        w->pad_lo[d] = w->pad_hi[d] = padding ? padding[d] : 0;
        w->dilation[d] = dilation ? dilation[d] : 1;
    }
    return 1;
}

kiln_node *kiln_max_pool2d(kiln_graph *g, kiln_node *x, const int *kernel,
                           const int *stride, const int *padding,
                           const int *dilation, int ceil_mode)
{
    const char *fn = "kiln_max_pool2d";
    if (!g)
        return kiln_null_graph(fn);
    kiln_node p = {.op = KILN_OP_MAX_POOL2D, .n_in = 1, .in = &x};
    if (!kiln_pool_check_input(g, fn, x, 3, 4) ||
        !make_window(g, fn, kernel, stride, padding, dilation, &p.at.win))
        return &g->poison;
    p.at.win.flags = ceil_mode ? KILN_WINDOW_CEIL : 0;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_avg_pool2d(kiln_graph *g, kiln_node *x, const int *kernel,
                           const int *stride, const int *padding, int ceil_mode,
                           int count_include_pad)
{
    const char *fn = "kiln_avg_pool2d";
    char why[KILN_ERRMSG_MAX];
    if (!g)
        return kiln_null_graph(fn);
    kiln_node p = {.op = KILN_OP_RESAMPLE2D, .n_in = 1, .in = &x};
    kiln_window *w = &p.at.win;
    if (!kiln_pool_check_input(g, fn, x, 3, 4) ||
        !make_window(g, fn, kernel, stride, padding, NULL, w))
        return &g->poison;
    w->mode = KILN_RESAMPLE_AVG;
    w->flags = (ceil_mode ? KILN_WINDOW_CEIL : 0) |
               (count_include_pad ? KILN_WINDOW_COUNT_PAD : 0);
    kiln_node m = {.op = KILN_OP_MAX_POOL2D, .n_in = 1, .in = &x, .at = p.at};
    kiln_dtype dt;
    kiln_status st = kiln_infer_max_pool(&m, &p.shape, &dt, why, sizeof why);
    if (st != KILN_OK)
        return kiln_graph_fail(g, st, "%s: %s", fn, why);
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_adaptive_avg_pool2d(kiln_graph *g, kiln_node *x, int64_t out_h,
                                    int64_t out_w)
{
    const char *fn = "kiln_adaptive_avg_pool2d";
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_pool_check_input(g, fn, x, 3, 4))
        return &g->poison;
    kiln_shape s = x->shape;
    int nd = s.ndim;
    if (out_h < 1 || out_w < 1 || out_h > (1 << 30) || out_w > (1 << 30))
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: output size [%lld,%lld] must be positive",
                               fn, (long long)out_h, (long long)out_w);
    if (s.d[nd - 2] < 1 || s.d[nd - 1] < 1)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: input %s has an empty spatial dim", fn,
                               S(s, b));
    s.d[nd - 2] = out_h;
    s.d[nd - 1] = out_w;
    if (!check_shape(g, fn, s))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_RESAMPLE2D, .shape = s, .n_in = 1, .in = &x};
    p.at.win = (kiln_window){.nd = 2, .mode = KILN_RESAMPLE_ADAPTIVE};
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_flatten(kiln_graph *g, kiln_node *x, int start_dim, int end_dim)
{
    const char *fn = "kiln_flatten";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    int nd = x->shape.ndim ? x->shape.ndim : 1; /* a scalar flattens to [1] */
    int lo = norm_axis(g, fn, start_dim, nd),
        hi = norm_axis(g, fn, end_dim, nd);
    if (lo < 0 || hi < 0)
        return &g->poison;
    if (lo > hi)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: start_dim %d cannot come after end_dim %d",
                               fn, start_dim, end_dim);
    kiln_shape s = {.ndim = 0};
    for (int i = 0; i < nd; i++) {
        int64_t di = x->shape.ndim ? x->shape.d[i] : 1;
        if (i <= lo || i > hi)
            s.d[s.ndim++] = di;
        else
            s.d[s.ndim - 1] *= di; /* numel of x bounds it: no overflow */
    }
    return kiln_reshape(g, x, s);
}

/* ------------------------------------------------ for the gradient rules */

kiln_node *kiln_max_pool_pair(kiln_graph *g, kiln_op op, const kiln_node *n,
                              kiln_node *x, kiln_node *v)
{
    kiln_node *in[2] = {x, v};
    kiln_node p = {.op = op, .n_in = 2, .in = in};
    p.at.win = n->at.win;
    return kiln_node_build(g, "grad", &p);
}

kiln_node *kiln_resample_node(kiln_graph *g, kiln_op op, const kiln_node *n,
                              kiln_node *v, kiln_shape s)
{
    kiln_node p = {.op = op, .shape = s, .n_in = 1, .in = &v};
    p.at.win = n->at.win;
    return kiln_node_build(g, "grad", &p);
}
