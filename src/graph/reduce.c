/* Builders of reductions, and the sum that undoes a broadcast. */
#include <math.h>

#include "graph/builders.h"

/* ---------------------------------------------------------------- reductions
 */

/* axis is argmax's (its one axis); the rest read the mask. */
static kiln_node *reduce(kiln_graph *g, kiln_op op, kiln_node *x, unsigned axes,
                         int keepdims, int axis, const char *fn)
{
    kiln_node p = {.op = op, .n_in = 1, .in = &x};
    p.at.axes = axes == KILN_ALL_AXES ? (1u << x->shape.ndim) - 1 : axes;
    p.at.keepdims = keepdims != 0;
    p.at.axis = axis;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_reduce_op(kiln_graph *g, kiln_op op, kiln_node *x,
                          unsigned axes, int keepdims, const char *fn)
{
    return reduce(g, op, x, axes, keepdims, 0, fn);
}

kiln_node *kiln_sum(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_sum", x) || !check_f32(g, "kiln_sum", x))
        return &g->poison;
    return kiln_reduce_op(g, KILN_OP_SUM, x, axes, keepdims, "kiln_sum");
}

kiln_node *kiln_reduce_max(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims)
{
    const char *fn = "kiln_reduce_max";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    return kiln_reduce_op(g, KILN_OP_RMAX, x, axes, keepdims, fn);
}

kiln_node *kiln_mean(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_mean", x) || !check_f32(g, "kiln_mean", x))
        return &g->poison;
    kiln_node *s =
        kiln_reduce_op(g, KILN_OP_SUM, x, axes, keepdims, "kiln_mean");
    if (s->op == KILN_OP_ERROR)
        return s;
    return kiln_binary_op(g, KILN_OP_MUL, s,
                          kiln_count_scalar(g, x->shape, s->at.axes, 1, 1));
}

kiln_node *kiln_argmax(kiln_graph *g, kiln_node *x, int axis)
{
    const char *fn = "kiln_argmax";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    int ax = norm_axis(g, fn, axis, x->shape.ndim);
    if (ax < 0)
        return &g->poison;
    if (x->shape.d[ax] == 0)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: axis %d is empty", fn,
                               ax);
    return reduce(g, KILN_OP_ARGMAX, x, 1u << ax, 0, ax, fn);
}

/* Sums x over the axes broadcasting added, so the result has shape s. */
kiln_node *kiln_reduce_to_shape(kiln_graph *g, kiln_node *x, kiln_shape s)
{
    if (kiln_shape_equal(x->shape, s))
        return x;
    int off = x->shape.ndim - s.ndim;
    unsigned axes = 0;
    for (int i = 0; i < x->shape.ndim; i++) {
        int j = i - off;
        if (j < 0 || (s.d[j] == 1 && x->shape.d[i] != 1))
            axes |= 1u << i;
    }
    kiln_node *r =
        axes ? kiln_reduce_op(g, KILN_OP_SUM, x, axes, 1, "grad") : x;
    if (kiln_shape_equal(r->shape, s))
        return r;
    kiln_node *n = kiln_node_make(g, KILN_OP_RESHAPE, r->dtype, s, &r, 1);
    kiln_node_derive_sym(n);
    return n;
}
