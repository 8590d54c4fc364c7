/* Builders of contractions (matmul, nGraph Dot) and conversions (one-hot,
   cast, stop_gradient). */
#include "graph/builders.h"

/* ---------------------------------------------------------------- contraction
 */

kiln_node *kiln_matmul(kiln_graph *g, kiln_node *a, kiln_node *b, int trans_a,
                       int trans_b)
{
    const char *fn = "kiln_matmul";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b))
        return &g->poison;
    kiln_node *in[2] = {a, b};
    kiln_node p = {.op = KILN_OP_MATMUL, .n_in = 2, .in = in};
    p.at.trans_a = trans_a != 0;
    p.at.trans_b = trans_b != 0;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_dot(kiln_graph *g, kiln_node *a, kiln_node *b, int n)
{
    const char *fn = "kiln_dot";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    kiln_shape sa = a->shape, sb = b->shape;
    if (n < 0 || n > sa.ndim || n > sb.ndim)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: cannot contract %d axes of %s and %s", fn,
                               n, S(sa, b1), S(sb, b2));
    int64_t k = 1;
    for (int i = 0; i < n; i++) {
        if (sa.d[sa.ndim - n + i] != sb.d[i])
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: %s . %s: contracted axes differ (%lld vs "
                "%lld)",
                fn, S(sa, b1), S(sb, b2), (long long)sa.d[sa.ndim - n + i],
                (long long)sb.d[i]);
        k *= sb.d[i];
    }
    kiln_shape out = {0};
    if (sa.ndim - n + sb.ndim - n > KILN_MAX_DIMS)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: result has too many dims", fn);
    int64_t m = 1, nn = 1;
    for (int i = 0; i < sa.ndim - n; i++) {
        out.d[out.ndim++] = sa.d[i];
        m *= sa.d[i];
    }
    for (int i = n; i < sb.ndim; i++) {
        out.d[out.ndim++] = sb.d[i];
        nn *= sb.d[i];
    }
    kiln_node *a2 = kiln_reshape(g, a, KILN_SHAPE(m, k));
    kiln_node *b2_ = kiln_reshape(g, b, KILN_SHAPE(k, nn));
    kiln_node *p = kiln_matmul(g, a2, b2_, 0, 0);
    return kiln_reshape(g, p, out);
}

/* ---------------------------------------------------------------- conversion
 */

kiln_node *kiln_one_hot(kiln_graph *g, kiln_node *labels, int depth)
{
    const char *fn = "kiln_one_hot";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, labels))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_ONEHOT, .n_in = 1, .in = &labels};
    p.at.depth = depth;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_cast(kiln_graph *g, kiln_node *x, kiln_dtype dt)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_cast", x) ||
        !check_dtype(g, "kiln_cast", dt))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_CAST, .dtype = dt, .n_in = 1, .in = &x};
    return kiln_node_build(g, "kiln_cast", &p);
}

kiln_node *kiln_stop_gradient(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_stop_gradient", x))
        return &g->poison;
    kiln_node p = {.op = KILN_OP_STOPGRAD, .n_in = 1, .in = &x};
    return kiln_node_build(g, "kiln_stop_gradient", &p);
}
