/* Builders of movement ops: reshape, permute, broadcast, slice, pad,
   concat. */
#include <string.h>

#include "graph/builders.h"

/* ---------------------------------------------------------------- movement */

kiln_node *kiln_reshape(kiln_graph *g, kiln_node *x, kiln_shape shape)
{
    const char *fn = "kiln_reshape";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (shape.ndim < 0 || shape.ndim > KILN_MAX_DIMS)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %d dims (at most %d)",
                               fn, shape.ndim, KILN_MAX_DIMS);
    int infer = -1;
    kiln_shape rest = shape; /* the -1 counted as 1 */
    for (int i = 0; i < shape.ndim; i++) {
        if (shape.d[i] == -1 && infer < 0) {
            infer = i;
            rest.d[i] = 1;
        }
    }
    int64_t known, numel = kiln_shape_numel(x->shape);
    const char *why = kiln_shape_size(rest, 0, &known, NULL);
    if (why)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: invalid shape %s: it %s",
                               fn, S(shape, b1), why);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return kiln_graph_fail(g, KILN_ERR_SHAPE,
                                   "%s: cannot infer -1 reshaping %s to %s", fn,
                                   S(x->shape, b1), S(shape, b2));
        shape.d[infer] = numel / known;
    }
    kiln_node p = {.op = KILN_OP_RESHAPE, .shape = shape, .n_in = 1, .in = &x};
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_permute(kiln_graph *g, kiln_node *x, const int *perm)
{
    const char *fn = "kiln_permute";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!perm)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: perm is NULL", fn);
    kiln_node p = {.op = KILN_OP_PERMUTE, .n_in = 1, .in = &x};
    for (int i = 0; i < x->shape.ndim; i++)
        p.at.perm[i] = perm[i];
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_transpose(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_transpose", x))
        return &g->poison;
    int nd = x->shape.ndim;
    if (nd < 2)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "kiln_transpose: needs 2 or more dims, got %d",
                               nd);
    int perm[KILN_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return kiln_permute(g, x, perm);
}

kiln_node *kiln_broadcast_to(kiln_graph *g, kiln_node *x, kiln_shape shape)
{
    const char *fn = "kiln_broadcast_to";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_shape(g, fn, shape))
        return &g->poison;
    if (kiln_shape_equal(x->shape, shape))
        return x;
    kiln_node p = {
        .op = KILN_OP_BROADCAST, .shape = shape, .n_in = 1, .in = &x};
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_broadcast(kiln_graph *g, kiln_node *x, kiln_shape shape,
                          unsigned new_axes)
{
    const char *fn = "kiln_broadcast";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_shape(g, fn, shape))
        return &g->poison;
    kiln_shape kept = shape;
    int j = 0;
    for (int i = 0; i < shape.ndim; i++) {
        if (new_axes & (1u << i)) {
            kept.d[i] = 1;
        } else {
            if (j >= x->shape.ndim || x->shape.d[j] != shape.d[i])
                break;
            j++;
        }
    }
    if (j != x->shape.ndim || (new_axes >> shape.ndim) ||
        shape.ndim - __builtin_popcount(new_axes) != x->shape.ndim)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %s with new axes 0x%x does not give %s", fn,
                               S(x->shape, b1), new_axes, S(shape, b2));
    kiln_node *r = kiln_reshape(g, x, kept);
    return kiln_broadcast_to(g, r, shape);
}

static int64_t norm_range(int64_t v, int64_t dim)
{
    return v < 0 ? v + dim : v;
}

kiln_node *kiln_slice(kiln_graph *g, kiln_node *x, const int64_t *start,
                      const int64_t *stop)
{
    const char *fn = "kiln_slice";
    char b1[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!start || !stop)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: start or stop is NULL",
                               fn);
    kiln_shape out = x->shape;
    int64_t lo[KILN_MAX_DIMS];
    for (int i = 0; i < x->shape.ndim; i++) {
        int64_t dim = x->shape.d[i];
        int64_t a = norm_range(start[i], dim), b = norm_range(stop[i], dim);
        if (a < 0 || b > dim || a > b)
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: range [%lld:%lld] out of bounds on axis %d "
                "of %s",
                fn, (long long)start[i], (long long)stop[i], i,
                S(x->shape, b1));
        lo[i] = a;
        out.d[i] = b - a;
    }
    kiln_node p = {.op = KILN_OP_SLICE, .shape = out, .n_in = 1, .in = &x};
    memcpy(p.at.lo, lo, sizeof lo);
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_pad(kiln_graph *g, kiln_node *x, const int64_t *lo,
                    const int64_t *hi, float value)
{
    const char *fn = "kiln_pad";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!lo || !hi)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: lo or hi is NULL", fn);
    char b1[SHAPE_BUF];
    kiln_shape out = x->shape;
    for (int i = 0; i < x->shape.ndim; i++) {
        if (lo[i] < 0 || hi[i] < 0)
            return kiln_graph_fail(g, KILN_ERR_ARG,
                                   "%s: negative padding on axis %d", fn, i);
        if (!kiln_dim_add(out.d[i], lo[i], &out.d[i]) ||
            !kiln_dim_add(out.d[i], hi[i], &out.d[i]))
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: invalid shape: padding %s by %lld and %lld on axis %d "
                "gives more than 2^40 elements",
                fn, S(x->shape, b1), (long long)lo[i], (long long)hi[i], i);
    }
    if (!check_shape(g, fn, out))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_PAD, .shape = out, .n_in = 1, .in = &x};
    memcpy(p.at.lo, lo, (size_t)x->shape.ndim * sizeof *lo);
    p.at.value = value;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_concat(kiln_graph *g, kiln_node *const *xs, int n, int axis)
{
    const char *fn = "kiln_concat";
    if (!g)
        return kiln_null_graph(fn);
    if (g->status)
        return &g->poison;
    if (!xs || n < 1)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: needs at least one node",
                               fn);
    for (int i = 0; i < n; i++)
        if (!kiln_graph_check(g, fn, xs[i]))
            return &g->poison;
    int ax = norm_axis(g, fn, axis, xs[0]->shape.ndim);
    if (ax < 0)
        return &g->poison;
    kiln_node p = {.op = KILN_OP_CONCAT, .n_in = n, .in = (kiln_node **)xs};
    p.at.axis = ax;
    return kiln_node_build(g, fn, &p);
}
