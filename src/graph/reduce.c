/* Builders of reductions, and the sum that undoes a broadcast. */
#include <math.h>

#include "graph/builders.h"

/* ---------------------------------------------------------------- reductions
 */

kiln_node *kiln_reduce_op(kiln_graph *g, kiln_op op, kiln_node *x,
                          unsigned axes, int keepdims, const char *fn)
{
    unsigned all = (1u << x->shape.ndim) - 1;
    if (axes == KILN_ALL_AXES)
        axes = all;
    if (axes & ~all)
        return kiln_graph_fail(
            g, KILN_ERR_ARG, "%s: axis mask 0x%x names axes beyond the %d dims",
            fn, axes, x->shape.ndim);
    kiln_shape out = {0};
    for (int i = 0; i < x->shape.ndim; i++) {
        /* A sum over nothing is 0, but a max has no value (docs/ops.md,
           "Zero-size dimensions"). */
        if ((axes & (1u << i)) && x->shape.d[i] == 0 && op != KILN_OP_SUM) {
            char b[SHAPE_BUF];
            return kiln_graph_fail(g, KILN_ERR_SHAPE,
                                   "%s: cannot reduce over a zero-size "
                                   "dimension (axis %d of %s)",
                                   fn, i, S(x->shape, b));
        }
        if (axes & (1u << i)) {
            if (keepdims)
                out.d[out.ndim++] = 1;
        } else {
            out.d[out.ndim++] = x->shape.d[i];
        }
    }
    kiln_node *n = kiln_node_make(g, op, x->dtype, out, &x, 1);
    n->at.axes = axes;
    n->at.keepdims = keepdims != 0;
    kiln_node_derive_sym(n);
    return n;
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
    kiln_node *n = kiln_reduce_op(g, KILN_OP_ARGMAX, x, 1u << ax, 0, fn);
    n->dtype = KILN_I32;
    n->at.axis = ax;
    return n;
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
