/* Shape rules of the movement ops.  Reshape, broadcast, slice and pad have
   their result shape as an attribute (the node's own shape): the rule
   checks it fits the input. */
#include "graph/builders.h"

kiln_status kiln_infer_reshape(const kiln_node *n, kiln_shape *s,
                               kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_node *x = n->in[0];
    *s = n->shape;
    *dt = x->dtype;
    if (kiln_shape_numel(n->shape) != kiln_shape_numel(x->shape))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "%s to %s changes the element count",
                              S(x->shape, b1), S(n->shape, b2));
    return KILN_OK;
}

kiln_status kiln_infer_permute(const kiln_node *n, kiln_shape *s,
                               kiln_dtype *dt, char *why, size_t len)
{
    const kiln_node *x = n->in[0];
    unsigned seen = 0;
    *s = x->shape;
    *dt = x->dtype;
    for (int d = 0; d < x->shape.ndim; d++) {
        int p = n->at.perm[d];
        if (p < 0 || p >= x->shape.ndim || (seen & (1u << p)))
            return kiln_infer_why(why, len, KILN_ERR_ARG,
                                  "perm is not a permutation of %d axes",
                                  x->shape.ndim);
        seen |= 1u << p;
        s->d[d] = x->shape.d[p];
    }
    return KILN_OK;
}

kiln_status kiln_infer_broadcast(const kiln_node *n, kiln_shape *s,
                                 kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_node *x = n->in[0];
    kiln_shape b;
    *s = n->shape;
    *dt = x->dtype;
    if (x->shape.ndim > n->shape.ndim ||
        !kiln_shape_broadcast(x->shape, n->shape, &b) ||
        !kiln_shape_equal(b, n->shape))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "cannot broadcast %s to %s", S(x->shape, b1),
                              S(n->shape, b2));
    return KILN_OK;
}

/* slice: the node's shape starting at lo lies inside the input; pad: the
   input starting at lo lies inside the node's shape. */
kiln_status kiln_infer_window(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    kiln_shape in = n->in[0]->shape;
    int slice = n->op == KILN_OP_SLICE;
    kiln_shape small = slice ? n->shape : in, big = slice ? in : n->shape;
    *s = n->shape;
    *dt = n->in[0]->dtype;
    int ok = n->shape.ndim == in.ndim;
    for (int d = 0; ok && d < in.ndim; d++)
        ok = n->at.lo[d] >= 0 && n->at.lo[d] <= big.d[d] - small.d[d];
    if (!ok)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "%s at the offsets given does not lie inside %s",
                              S(small, b1), S(big, b2));
    /* an i32 pad takes the value truncated; (int32_t) of NaN or beyond
       the range is undefined (PyTorch refuses it too) */
    float v = n->at.value;
    if (!slice && *dt == KILN_I32 &&
        !(v >= -2147483648.0f && v < 2147483648.0f))
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "padding value %g is not an i32 (finite, in "
                              "[-2^31, 2^31))",
                              (double)v);
    return KILN_OK;
}

kiln_status kiln_infer_concat(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_node *x = n->in[0];
    int ax = n->at.axis;
    *s = x->shape;
    *dt = x->dtype;
    if (ax < 0 || ax >= s->ndim)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "axis %d out of range for %d dims", ax, s->ndim);
    for (int k = 1; k < n->n_in; k++) {
        kiln_shape t = n->in[k]->shape;
        int ok = t.ndim == s->ndim && n->in[k]->dtype == x->dtype;
        for (int d = 0; ok && d < t.ndim; d++)
            ok = d == ax || t.d[d] == s->d[d];
        if (!ok)
            return kiln_infer_why(
                why, len, KILN_ERR_SHAPE, "%s%s and %s%s differ off axis %d",
                kiln_dtype_name(x->dtype), S(x->shape, b1),
                kiln_dtype_name(n->in[k]->dtype), S(t, b2), ax);
        if (!kiln_dim_add(s->d[ax], t.d[ax], &s->d[ax]))
            return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                                  "concatenated axis %d exceeds 2^40 elements",
                                  ax);
    }
    return KILN_OK;
}
