/* Converters of the loss ops, NegativeLogLikelihoodLoss and
   SoftmaxCrossEntropyLoss, as Kiln primitives (so an imported loss is
   differentiable like any other graph):

     picked[n, d...] = x[n, t[n, d...], d...]       a one-hot product
     w_t = weight[t] (1 without weights), 0 where t == ignore_index
     loss = -picked * w_t; mean: sum(loss) / sum(w_t); sum; none.

   Classes are axis 1 of x [N, C, d...]; the one-hot puts them last, so x
   is permuted to [N, d..., C] first.  A label outside [0, C) that is not
   ignored gets a zero row, hence a zero term (ONNX leaves it undefined). */
#include <string.h>

#include "onnx/onnx_internal.h"

/* x [N, C, d...] with its class axis moved last. */
static kiln_node *classes_last(ox_ctx *c, kiln_node *x)
{
    int nd = kiln_node_shape(x).ndim, perm[KILN_MAX_DIMS];
    if (nd == 2)
        return x;
    for (int k = 0, at = 0; k < nd; k++)
        if (k != 1)
            perm[at++] = k;
    perm[nd - 1] = 1;
    return kiln_permute(c->g, x, perm);
}

/* The loss of log-probabilities logp [N, C, d...] (n's inputs 1 and 2 are
   the labels and the optional weights). */
static kiln_node *nll(ox_ctx *c, ox_node *n, kiln_node *logp, int mean_kind,
                      int has_ignore, int64_t ignore)
{
    kiln_graph *g = c->g;
    kiln_shape xs = kiln_node_shape(logp);
    kiln_node *t = ox_in(c, n, 1), *w = ox_f32(c, n, 2);
    if (xs.ndim < 2 || !t || kiln_node_dtype(t) != KILN_I32)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "needs scores [N, C, ...] and integer labels"),
               NULL;
    int64_t classes = xs.d[1];
    if (classes > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "too many classes"), NULL;
    kiln_node *onehot = kiln_one_hot(g, t, (int)classes);
    unsigned last = KILN_AXIS(xs.ndim - 1);
    kiln_node *picked =
        kiln_sum(g, kiln_mul(g, classes_last(c, logp), onehot), last, 0);
    kiln_node *wt = w ? kiln_sum(g, kiln_mul(g, onehot, w), last, 0) : NULL;
    if (has_ignore) {
        kiln_node *keep = kiln_sub(g, kiln_scalar(g, 1),
                                   kiln_eq(g, kiln_cast(g, t, KILN_F32),
                                           kiln_scalar(g, (float)ignore)));
        wt = wt ? kiln_mul(g, wt, keep) : keep;
    }
    kiln_node *loss = kiln_neg(g, wt ? kiln_mul(g, picked, wt) : picked);
    if (mean_kind < 0)
        return loss;
    kiln_node *total = kiln_sum(g, loss, KILN_ALL_AXES, 0);
    if (mean_kind == 0)
        return total;
    if (!wt)
        return kiln_mean(g, loss, KILN_ALL_AXES, 0);
    return kiln_div(g, total, kiln_sum(g, wt, KILN_ALL_AXES, 0));
}

/* reduction: -1 none, 0 sum, 1 mean; ignore_index when present. */
static int loss_attrs(ox_ctx *c, const ox_node *n, int *kind, int *has_ignore,
                      int64_t *ignore)
{
    char red[16];
    if (ox_attr_string(c, n, "reduction", "mean", red, sizeof red) ||
        ox_attr_int(c, n, "ignore_index", 0, ignore))
        return -1;
    *has_ignore = ox_attr(n, "ignore_index") != NULL;
    if (!strcmp(red, "none"))
        *kind = -1;
    else if (!strcmp(red, "sum"))
        *kind = 0;
    else if (!strcmp(red, "mean"))
        *kind = 1;
    else
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "reduction '%s'", red),
               -1;
    return 0;
}

static int conv_nll_loss(ox_ctx *c, ox_node *n)
{
    int kind, has_ignore;
    int64_t ignore;
    if (loss_attrs(c, n, &kind, &has_ignore, &ignore))
        return -1;
    kiln_node *y = nll(c, n, ox_f32(c, n, 0), kind, has_ignore, ignore);
    if (!y)
        return -1;
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

/* The loss of log_softmax(scores, axis 1); output 1, when asked for, is
   the log-probabilities. */
static int conv_softmax_ce(ox_ctx *c, ox_node *n)
{
    int kind, has_ignore;
    int64_t ignore;
    if (loss_attrs(c, n, &kind, &has_ignore, &ignore))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    if (kiln_node_shape(x).ndim < 2)
        return ox_problem(c, n, KILN_ERR_SHAPE, "scores of rank below 2"), -1;
    kiln_node *logp = kiln_log_softmax(c->g, x, 1);
    kiln_node *y = nll(c, n, logp, kind, has_ignore, ignore);
    if (!y)
        return -1;
    ox_out(c, n, y, ox_in_type(n, 0));
    if (n->n_out > 1) {
        n->out[1] = logp;
        n->out_type[1] = ox_in_type(n, 0);
    }
    return 0;
}

const ox_op ox_loss_ops[] = {
    {"NegativeLogLikelihoodLoss", conv_nll_loss, "ignore_index,reduction"},
    {"SoftmaxCrossEntropyLoss", conv_softmax_ce, "ignore_index,reduction"},
    {NULL, NULL, NULL},
};
