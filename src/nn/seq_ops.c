/* Composites that sequence models and stable losses need, each a
   decomposition into primitives that autodiff differentiates: masking and
   triangles (select), leaky_relu, elu and clamp (select on comparisons,
   with PyTorch's gradients at the kinks), reduce_min, logsumexp, var and
   std. */
#include <math.h>

#include "graph/builders.h"

static int operand(kiln_graph *g, const char *fn, kiln_node *x)
{
    return kiln_graph_check(g, fn, x) && check_f32(g, fn, x);
}

kiln_node *kiln_masked_fill(kiln_graph *g, kiln_node *x, kiln_node *mask,
                            float value)
{
    const char *fn = "kiln_masked_fill";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x) || !kiln_graph_check(g, fn, mask))
        return &g->poison;
    kiln_shape s;
    if (!kiln_shape_broadcast(x->shape, mask->shape, &s) ||
        !kiln_shape_equal(s, x->shape))
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: mask %s does not broadcast to %s", fn,
                               S(mask->shape, b1), S(x->shape, b2));
    if (mask->dtype == KILN_I32)
        mask = kiln_cast(g, mask, KILN_F32);
    return kiln_select(g, mask, kiln_scalar(g, value), x);
}

/* x where the [R, C] mask of the last two dims keeps (col - row <= k for
   the lower triangle, >= k for the upper), else 0. */
static kiln_node *triangle(kiln_graph *g, const char *fn, kiln_node *x, int k,
                           int lower)
{
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    if (x->shape.ndim < 2)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %s has fewer than 2 dims", fn,
                               S(x->shape, b));
    int64_t r = x->shape.d[x->shape.ndim - 2],
            c = x->shape.d[x->shape.ndim - 1];
    float *m = kiln_graph_alloc(g, (size_t)(r * c) * sizeof *m);
    if (!m)
        return kiln_graph_fail(g, KILN_ERR_MEMORY,
                               "%s: out of memory for the [%lld,%lld] mask of "
                               "%s",
                               fn, (long long)r, (long long)c, S(x->shape, b));
    kiln_node *mask = kiln_node_make(g, KILN_OP_CONSTANT, KILN_F32,
                                     KILN_SHAPE(r, c), NULL, 0);
    if (mask->op != KILN_OP_CONSTANT)
        return mask;
    mask->at.data = m;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            m[i * c + j] = (lower ? j - i <= k : j - i >= k) ? 1.0f : 0.0f;
    return kiln_select(g, mask, x, kiln_scalar(g, 0.0f));
}

kiln_node *kiln_tril(kiln_graph *g, kiln_node *x, int k)
{
    return triangle(g, "kiln_tril", x, k, 1);
}

kiln_node *kiln_triu(kiln_graph *g, kiln_node *x, int k)
{
    return triangle(g, "kiln_triu", x, k, 0);
}

/* x > 0 ? x : slope x; the gradient at 0 is slope, as PyTorch's. */
kiln_node *kiln_leaky_relu(kiln_graph *g, kiln_node *x, float slope)
{
    const char *fn = "kiln_leaky_relu";
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    kiln_node *pos = kiln_gt(g, x, kiln_scalar(g, 0.0f));
    return kiln_select(g, pos, x, kiln_scale(g, x, slope));
}

/* x > 0 ? x : alpha expm1(x), the exponential taken of min(x, 0) only, so
   that a large x gives no inf for its unused branch to turn into NaN in
   the gradient; the gradient at 0 is alpha, as PyTorch's. */
kiln_node *kiln_elu(kiln_graph *g, kiln_node *x, float alpha)
{
    const char *fn = "kiln_elu";
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    kiln_node *zero = kiln_scalar(g, 0.0f), *pos = kiln_gt(g, x, zero);
    kiln_node *neg = kiln_select(g, pos, zero, x);
    return kiln_select(g, pos, x, kiln_scale(g, kiln_expm1(g, neg), alpha));
}

/* min(max(x, lo), hi) as two selects: the gradient is 1 on [lo, hi] ends
   included (PyTorch's), NaN stays NaN, and lo > hi gives hi everywhere. */
kiln_node *kiln_clamp(kiln_graph *g, kiln_node *x, float lo, float hi)
{
    const char *fn = "kiln_clamp";
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    if (isnan(lo) || isnan(hi))
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: bound %g or %g is NaN", fn,
                               (double)lo, (double)hi);
    kiln_node *l = kiln_scalar(g, lo), *h = kiln_scalar(g, hi);
    kiln_node *up = kiln_select(g, kiln_lt(g, x, l), l, x);
    return kiln_select(g, kiln_gt(g, up, h), h, up);
}

kiln_node *kiln_reduce_min(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims)
{
    const char *fn = "kiln_reduce_min";
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    kiln_node *m =
        kiln_reduce_op(g, KILN_OP_RMAX, kiln_neg(g, x), axes, keepdims, fn);
    return m->op == KILN_OP_ERROR ? m : kiln_neg(g, m);
}

/* m + log(sum(exp(x - m))) with m the (gradient-free) max, taken as 0
   where it is infinite (all -inf gives -inf, an inf gives inf, as
   PyTorch).  Without keepdims, a sum over the kept size-1 axes drops
   them (a copy; the simplifier makes it a reshape). */
kiln_node *kiln_logsumexp(kiln_graph *g, kiln_node *x, unsigned axes,
                          int keepdims)
{
    const char *fn = "kiln_logsumexp";
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    kiln_node *m = kiln_reduce_op(g, KILN_OP_RMAX, x, axes, 1, fn);
    if (m->op == KILN_OP_ERROR)
        return m;
    unsigned ax = m->at.axes;
    kiln_node *inf = kiln_eq(g, kiln_abs(g, m), kiln_scalar(g, INFINITY));
    m = kiln_stop_gradient(g, kiln_select(g, inf, kiln_scalar(g, 0.0f), m));
    kiln_node *s = kiln_sum(g, kiln_exp(g, kiln_sub(g, x, m)), ax, 1);
    kiln_node *r = kiln_add(g, kiln_log(g, s), m);
    return keepdims ? r : kiln_sum(g, r, ax, 0);
}

/* sum((x - mean)^2) / (N - correction), N the count over the axes: 1 / N
   is a count constant (re-derived per symbolic size), and 1 / (N - c) =
   (1/N) / (1 - c/N).  N <= correction gives inf or NaN, as PyTorch; a
   correction that is not finite would make every result NaN or 0. */
static kiln_node *variance(kiln_graph *g, const char *fn, kiln_node *x,
                           unsigned axes, float correction, int keepdims)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!operand(g, fn, x))
        return &g->poison;
    if (!isfinite(correction))
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: correction %g is not finite", fn,
                               (double)correction);
    kiln_node *s = kiln_reduce_op(g, KILN_OP_SUM, x, axes, 1, fn);
    if (s->op == KILN_OP_ERROR)
        return s;
    unsigned ax = s->at.axes;
    kiln_node *inv_n = kiln_count_scalar(g, x->shape, ax, 1, 1);
    kiln_node *d = kiln_sub(g, x, kiln_mul(g, s, inv_n));
    kiln_node *ss = kiln_sum(g, kiln_mul(g, d, d), ax, keepdims);
    kiln_node *k = kiln_div(
        g, inv_n,
        kiln_sub(g, kiln_scalar(g, 1.0f), kiln_scale(g, inv_n, correction)));
    return kiln_mul(g, ss, k);
}

kiln_node *kiln_variance(kiln_graph *g, kiln_node *x, unsigned axes,
                         float correction, int keepdims)
{
    return variance(g, "kiln_variance", x, axes, correction, keepdims);
}

kiln_node *kiln_std(kiln_graph *g, kiln_node *x, unsigned axes,
                    float correction, int keepdims)
{
    kiln_node *v = variance(g, "kiln_std", x, axes, correction, keepdims);
    return g && v->op != KILN_OP_ERROR ? kiln_sqrt(g, v) : v;
}
