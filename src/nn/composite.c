/* Composite ops, defined by their decomposition into primitives; autodiff
   differentiates the decomposition. */
#include <limits.h>
#include <math.h>

#include "graph/graph.h"
#include "nn/nn_check.h"

/* Checks an operand in the composite's own name, so that errors name the op
   the caller used rather than a primitive of its decomposition. */
static int check_f32_operand(kiln_graph *g, const char *fn, kiln_node *x)
{
    return kiln_graph_check(g, fn, x) && kiln_graph_check_f32(g, fn, x);
}

kiln_node *kiln_gelu(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!check_f32_operand(g, "kiln_gelu", x))
        return &g->poison;
    kiln_node *x3 = kiln_mul(g, kiln_mul(g, x, x), x);
    kiln_node *inner =
        kiln_scale(g, kiln_add(g, x, kiln_scale(g, x3, 0.044715f)),
                   0.7978845608028654f); /* sqrt(2/pi) */
    kiln_node *t = kiln_add(g, kiln_scalar(g, 1.0f), kiln_tanh(g, inner));
    return kiln_mul(g, kiln_scale(g, x, 0.5f), t);
}

kiln_node *kiln_gelu_erf(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!check_f32_operand(g, "kiln_gelu_erf", x))
        return &g->poison;
    kiln_node *e = kiln_erf(g, kiln_scale(g, x, 0.7071067811865476f));
    return kiln_mul(g, kiln_scale(g, x, 0.5f),
                    kiln_add(g, kiln_scalar(g, 1.0f), e));
}

/* x minus its (gradient-free) max along axis: softmax is invariant to the
   shift, so no gradient needs to flow through the max. */
static kiln_node *shifted(kiln_graph *g, kiln_node *x, int axis, const char *fn)
{
    if (!check_f32_operand(g, fn, x))
        return &g->poison;
    int nd = x->shape.ndim;
    if (axis < -nd || axis >= nd)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: axis %d out of range for %d dims", fn, axis,
                               nd);
    int a = axis < 0 ? axis + nd : axis;
    if (x->shape.d[a] == 0) {
        char b[96];
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: cannot take a softmax over axis %d of %s: "
                               "it has size zero",
                               fn, a, kiln_shape_str(x->shape, b, sizeof b));
    }
    kiln_node *m = kiln_stop_gradient(g, kiln_reduce_max(g, x, 1u << a, 1));
    return kiln_sub(g, x, m);
}

kiln_node *kiln_softmax(kiln_graph *g, kiln_node *x, int axis)
{
    if (!g)
        return kiln_null_graph(__func__);
    kiln_node *z = shifted(g, x, axis, "kiln_softmax");
    if (z->op == KILN_OP_ERROR)
        return z;
    int nd = x->shape.ndim;
    kiln_node *e = kiln_exp(g, z);
    return kiln_div(g, e,
                    kiln_sum(g, e, 1u << (axis < 0 ? axis + nd : axis), 1));
}

kiln_node *kiln_log_softmax(kiln_graph *g, kiln_node *x, int axis)
{
    if (!g)
        return kiln_null_graph(__func__);
    kiln_node *z = shifted(g, x, axis, "kiln_log_softmax");
    if (z->op == KILN_OP_ERROR)
        return z;
    int nd = x->shape.ndim;
    unsigned ax = 1u << (axis < 0 ? axis + nd : axis);
    return kiln_sub(g, z, kiln_log(g, kiln_sum(g, kiln_exp(g, z), ax, 1)));
}

kiln_node *kiln_affine(kiln_graph *g, kiln_node *x, kiln_node *w, kiln_node *b)
{
    const char *fn = "kiln_affine";
    if (!g)
        return kiln_null_graph(fn);
    if (!check_f32_operand(g, fn, x) || !check_f32_operand(g, fn, w) ||
        !check_f32_operand(g, fn, b))
        return &g->poison;
    return kiln_add(g, kiln_matmul(g, x, w, 0, 0), b);
}

kiln_node *kiln_cross_entropy(kiln_graph *g, kiln_node *probs,
                              kiln_node *onehot, kiln_node *n, float log_min)
{
    const char *fn = "kiln_cross_entropy";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, probs) || !kiln_graph_check(g, fn, onehot) ||
        !kiln_graph_check(g, fn, n))
        return &g->poison;
    char b1[96], b2[96];
    /* n divides the whole sum: a tensor n would broadcast it instead */
    if (kiln_shape_numel(n->shape) != 1 || n->dtype != KILN_F32)
        return kiln_graph_fail(
            g, n->dtype != KILN_F32 ? KILN_ERR_DTYPE : KILN_ERR_SHAPE,
            "%s: n must be an f32 scalar (one element), got %s%s", fn,
            kiln_dtype_name(n->dtype), kiln_shape_str(n->shape, b1, sizeof b1));
    if (!kiln_shape_equal(probs->shape, onehot->shape))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE,
            "%s: probabilities %s and one-hot labels %s differ", fn,
            kiln_shape_str(probs->shape, b1, sizeof b1),
            kiln_shape_str(onehot->shape, b2, sizeof b2));
    kiln_node *clipped = kiln_max(g, probs, kiln_scalar(g, expf(log_min)));
    kiln_node *s = kiln_sum(g, kiln_mul(g, kiln_log(g, clipped), onehot),
                            KILN_ALL_AXES, 0);
    return kiln_neg(g, kiln_div(g, s, n));
}

int kiln_nn_check_scores_labels(kiln_graph *g, const char *fn,
                                kiln_node *scores, kiln_node *labels,
                                const char *what)
{
    char b1[96], b2[96];
    if (!check_f32_operand(g, fn, scores) || !kiln_graph_check(g, fn, labels))
        return 0;
    if (scores->shape.ndim != 2 || labels->shape.ndim != 1 ||
        labels->shape.d[0] != scores->shape.d[0]) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: %s %s and labels %s: want [N,C] and [N]", fn, what,
                        kiln_shape_str(scores->shape, b1, sizeof b1),
                        kiln_shape_str(labels->shape, b2, sizeof b2));
        return 0;
    }
    if (labels->dtype != KILN_I32) {
        kiln_graph_fail(g, KILN_ERR_DTYPE,
                        "%s: labels have dtype %s, expected i32", fn,
                        kiln_dtype_name(labels->dtype));
        return 0;
    }
    if (scores->shape.d[1] > INT_MAX) { /* one_hot's depth is an int */
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: %s %s have more than %d classes", fn, what,
                        kiln_shape_str(scores->shape, b1, sizeof b1), INT_MAX);
        return 0;
    }
    if (scores->shape.d[1] == 0) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: %s %s have no classes (C = 0): a softmax over "
                        "zero classes is undefined",
                        fn, what, kiln_shape_str(scores->shape, b1, sizeof b1));
        return 0;
    }
    return 1;
}

kiln_node *kiln_softmax_cross_entropy(kiln_graph *g, kiln_node *logits,
                                      kiln_node *labels)
{
    return kiln_softmax_cross_entropy_reduce(g, logits, labels,
                                             KILN_REDUCE_MEAN);
}

kiln_status kiln_nll_loss_with_softmax_grad(kiln_graph *g, kiln_node *probs,
                                            kiln_node *labels, kiln_node **loss,
                                            kiln_node **dlogits)
{
    const char *fn = "kiln_nll_loss_with_softmax_grad";
    if (!g)
        return kiln_null_arg(fn, "graph");
    if (!loss || !dlogits) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: loss or dlogits is NULL", fn);
        return g->status;
    }
    *loss = *dlogits = &g->poison;
    if (!kiln_nn_check_scores_labels(g, fn, probs, labels, "probs"))
        return g->status;
    kiln_node *oh = kiln_one_hot(g, labels, (int)probs->shape.d[1]);
    if (oh->op == KILN_OP_ONEHOT)
        oh->at.strict = 1; /* a label outside [0, C) is a run-time error */
    /* the target's probability selected, not log(probs) * onehot, where a
       zero probability of another class would give 0 * -inf = NaN */
    kiln_node *target =
        kiln_sum(g, kiln_select(g, oh, probs, kiln_scalar(g, 0.0f)), 2u, 0);
    kiln_node *picked = kiln_sum(g, kiln_log(g, target), KILN_ALL_AXES, 0);
    /* 1 / N, NaN for the mean of no rows, re-derived at each batch size */
    kiln_node *l =
        kiln_mul(g, picked, kiln_count_scalar(g, probs->shape, 1u, -1, 1));
    kiln_node *d = kiln_mul(g, kiln_sub(g, probs, oh),
                            kiln_count_scalar(g, probs->shape, 1u, 1, 1));
    if (g->status == KILN_OK) {
        *loss = l;
        *dlogits = d;
    }
    return g->status;
}

kiln_node *kiln_softmax_cross_entropy_reduce(kiln_graph *g, kiln_node *logits,
                                             kiln_node *labels,
                                             kiln_reduction reduction)
{
    const char *fn = "kiln_softmax_cross_entropy";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_nn_check_scores_labels(g, fn, logits, labels, "logits"))
        return &g->poison;
    if (reduction != KILN_REDUCE_MEAN && reduction != KILN_REDUCE_SUM)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: unknown reduction %d", fn,
                               (int)reduction);
    /* one fused op (the mean; its gradient is fused too) instead of the
       decomposition -sum(log_softmax(logits) * one_hot(labels)) / N */
    kiln_node *in[2] = {logits, labels};
    kiln_node *mean =
        kiln_node_make(g, KILN_OP_SOFTMAX_CE, KILN_F32, KILN_SCALAR, in, 2);
    int64_t n = logits->shape.d[0];
    if (reduction == KILN_REDUCE_MEAN)
        return mean;
    /* The mean of no rows is NaN, but their sum is 0. */
    return n ? kiln_mul(g, mean, kiln_count_scalar(g, logits->shape, 1u, 1, 0))
             : kiln_sum(g, logits, KILN_ALL_AXES, 0);
}

kiln_node *kiln_binary_cross_entropy(kiln_graph *g, kiln_node *p, kiln_node *y)
{
    const char *fn = "kiln_binary_cross_entropy";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, p) || !kiln_graph_check(g, fn, y))
        return &g->poison;
    const float eps = 1e-7f;
    kiln_node *pc = kiln_min(g, kiln_max(g, p, kiln_scalar(g, eps)),
                             kiln_scalar(g, 1.0f - eps));
    kiln_node *one = kiln_scalar(g, 1.0f);
    kiln_node *t = kiln_add(
        g, kiln_mul(g, y, kiln_log(g, pc)),
        kiln_mul(g, kiln_sub(g, one, y), kiln_log(g, kiln_sub(g, one, pc))));
    return kiln_neg(g, kiln_mean(g, t, KILN_ALL_AXES, 0));
}
