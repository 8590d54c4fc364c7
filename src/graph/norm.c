/* Builders of the normalisation layers (batch, layer, group and instance
   norm), the run's mode leaf and the effects registry that batch norm's
   running statistics use.  Each layer is a norm_stats node (the mean and
   biased variance, or the running ones in evaluation) and a norm node (the
   normalisation and the per-channel affine), both with fused kernels. */
#include <math.h>
#include <stdlib.h>

#include "graph/builders.h"

int kiln_graph_add_effect(kiln_graph *g, kiln_node *trigger, kiln_node *effect)
{
    if (g->n_effects == g->cap_effects) {
        int cap = g->cap_effects ? 2 * g->cap_effects : 8;
        kiln_node **t = realloc(g->effect_trigger, (size_t)cap * sizeof *t);
        if (t)
            g->effect_trigger = t;
        kiln_node **e = t ? realloc(g->effect, (size_t)cap * sizeof *e) : NULL;
        if (!e) {
            kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_graph: out of memory");
            return 0;
        }
        g->effect = e;
        g->cap_effects = cap;
    }
    g->effect_trigger[g->n_effects] = trigger;
    g->effect[g->n_effects++] = effect;
    return 1;
}

kiln_node *kiln_mode(kiln_graph *g)
{
    if (!g)
        return kiln_null_graph(__func__);
    return kiln_node_make(g, KILN_OP_MODE, KILN_I32, KILN_SCALAR, NULL, 0);
}

/* p is NULL or an f32 node of shape want; else records why naming fn. */
static int check_param(kiln_graph *g, const char *fn, const char *what,
                       kiln_node *p, kiln_shape want)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!p)
        return 1;
    if (!kiln_graph_check(g, fn, p) || !check_f32(g, fn, p))
        return 0;
    if (kiln_shape_equal(p->shape, want))
        return 1;
    kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %s is %s, expected %s", fn, what,
                    S(p->shape, b1), S(want, b2));
    return 0;
}

static int check_eps(kiln_graph *g, const char *fn, float eps)
{
    if (eps >= 0.0f && isfinite(eps))
        return 1;
    kiln_graph_fail(g, KILN_ERR_ARG, "%s: eps = %g: give a finite eps >= 0", fn,
                    (double)eps);
    return 0;
}

/* x is an f32 [N, C, ...] with at least min_dims dims and C >= 1. */
static int check_input(kiln_graph *g, const char *fn, kiln_node *x,
                       int min_dims)
{
    char b[SHAPE_BUF];
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return 0;
    if (x->shape.ndim >= min_dims && x->shape.d[min_dims - 1] >= 1 &&
        !(x->shape.sym >> (min_dims - 1) & 1u))
        return 1;
    kiln_graph_fail(g, KILN_ERR_SHAPE,
                    "%s: input %s: expected [N, C, ...] with a fixed C >= 1",
                    fn, S(x->shape, b));
    return 0;
}

/* norm(x, stats, w or ones, b or zeros) with stats from stats_in[0..n). */
static kiln_node *normalise(kiln_graph *g, const char *fn, kiln_node **stats_in,
                            int n_stats, kiln_norm_attr a, kiln_node *w,
                            kiln_node *b, kiln_node **stats_out)
{
    kiln_node *x = stats_in[0];
    kiln_shape c = KILN_SHAPE(x->shape.d[a.axis]);
    kiln_node ps = {.op = KILN_OP_NORM_STATS, .n_in = n_stats, .in = stats_in};
    ps.at.norm = a;
    kiln_node *stats = kiln_node_build(g, fn, &ps);
    kiln_node *in[4] = {x, stats, w ? w : kiln_splat(g, c, 1.0f),
                        b ? b : kiln_splat(g, c, 0.0f)};
    kiln_node pn = {.op = KILN_OP_NORM, .n_in = 4, .in = in};
    pn.at.norm = a;
    if (stats_out)
        *stats_out = stats;
    return kiln_node_build(g, fn, &pn);
}

/* Row r of batch norm's statistics [2, C], as [C]. */
static kiln_node *stats_row(kiln_graph *g, kiln_node *stats, int r)
{
    int64_t c = stats->shape.d[1];
    int64_t lo[2] = {r, 0}, hi[2] = {r + 1, c};
    return kiln_reshape(g, kiln_slice(g, stats, lo, hi), KILN_SHAPE(c));
}

/* In training, running = (1 - momentum) running + momentum batch (the
   variance unbiased by count / (count - 1) = 1 / (1 - 1 / count)); in
   evaluation, and as PyTorch for an empty batch (1 / count NaN: a compiled
   function may run at batch 0), unchanged. */
static void update_running(kiln_graph *g, kiln_node *y, kiln_node *stats,
                           kiln_node *const run[2], kiln_node *mode,
                           float momentum)
{
    kiln_node *x = stats->in[0];
    unsigned axes = KILN_ALL_AXES & ~2u & ((1u << x->shape.ndim) - 1);
    kiln_node *inv = kiln_count_scalar(g, x->shape, axes, 1.0f, 1);
    kiln_node *unbias = kiln_div(g, kiln_scalar(g, 1.0f),
                                 kiln_sub(g, kiln_scalar(g, 1.0f), inv));
    kiln_node *rows = kiln_eq(g, inv, inv);
    /* the select on the mode itself: the inference passes look for it */
    kiln_node *training = kiln_cast(g, mode, KILN_F32);
    for (int r = 0; r < 2; r++) {
        kiln_node *batch = stats_row(g, stats, r);
        if (r == 1)
            batch = kiln_mul(g, batch, unbias);
        kiln_node *mixed = kiln_add(g, kiln_scale(g, run[r], 1.0f - momentum),
                                    kiln_scale(g, batch, momentum));
        mixed = kiln_select(g, rows, mixed, run[r]);
        kiln_node *next = kiln_select(g, training, mixed, run[r]);
        kiln_graph_add_effect(g, y, kiln_assign(g, run[r], next));
    }
}

kiln_node *kiln_batch_norm(kiln_graph *g, kiln_node *x, kiln_node *weight,
                           kiln_node *bias, kiln_node *running_mean,
                           kiln_node *running_var, float momentum, float eps)
{
    const char *fn = "kiln_batch_norm";
    if (!g)
        return kiln_null_graph(fn);
    if (!check_input(g, fn, x, 2))
        return &g->poison;
    kiln_shape c = KILN_SHAPE(x->shape.d[1]);
    if (!check_param(g, fn, "weight", weight, c) ||
        !check_param(g, fn, "bias", bias, c) ||
        !check_param(g, fn, "running_mean", running_mean, c) ||
        !check_param(g, fn, "running_var", running_var, c) ||
        !check_eps(g, fn, eps))
        return &g->poison;
    if (!running_mean != !running_var)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: give both running_mean and running_var "
                               "or neither",
                               fn);
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: momentum = %g is outside [0, 1]", fn,
                               (double)momentum);
    kiln_node *run[2] = {running_mean, running_var};
    for (int r = 0; r < 2 && running_mean; r++)
        if (run[r]->op != KILN_OP_VARIABLE)
            return kiln_graph_fail(g, KILN_ERR_ARG,
                                   "%s: %s must be a variable (%%%d is a %s)",
                                   fn, r ? "running_var" : "running_mean",
                                   run[r]->id, kiln_op_table[run[r]->op].name);
    kiln_node *mode = running_mean ? kiln_mode(g) : NULL;
    kiln_node *in[4] = {x, running_mean, running_var, mode};
    kiln_norm_attr a = {1, 0, eps};
    kiln_node *stats;
    kiln_node *y =
        normalise(g, fn, in, running_mean ? 4 : 1, a, weight, bias, &stats);
    if (running_mean && g->status == KILN_OK)
        update_running(g, y, stats, run, mode, momentum);
    return g->status == KILN_OK ? y : &g->poison;
}

kiln_node *kiln_layer_norm(kiln_graph *g, kiln_node *x,
                           kiln_shape normalized_shape, kiln_node *weight,
                           kiln_node *bias, float eps)
{
    const char *fn = "kiln_layer_norm";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    kiln_shape xs = x->shape, ns = normalized_shape;
    int axis = xs.ndim - ns.ndim, ok = ns.ndim >= 1 && axis >= 0;
    for (int d = 0; ok && d < ns.ndim; d++)
        ok = xs.d[axis + d] == ns.d[d] && !(xs.sym >> (axis + d) & 1u);
    if (!ok)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: input %s does not end in normalized_shape "
                               "%s",
                               fn, S(xs, b1), S(ns, b2));
    ns.sym = 0;
    if (!check_param(g, fn, "weight", weight, ns) ||
        !check_param(g, fn, "bias", bias, ns) || !check_eps(g, fn, eps))
        return &g->poison;
    kiln_norm_attr a = {axis, 1, eps};
    kiln_node *y = normalise(g, fn, &x, 1, a, NULL, NULL, NULL);
    /* the affine is per element of normalized_shape, not per channel */
    if (weight)
        y = kiln_mul(g, y, weight);
    if (bias)
        y = kiln_add(g, y, bias);
    return y;
}

kiln_node *kiln_group_norm(kiln_graph *g, kiln_node *x, int num_groups,
                           kiln_node *weight, kiln_node *bias, float eps)
{
    const char *fn = "kiln_group_norm";
    char b[SHAPE_BUF];
    if (!g)
        return kiln_null_graph(fn);
    if (!check_input(g, fn, x, 2))
        return &g->poison;
    kiln_shape c = KILN_SHAPE(x->shape.d[1]);
    if (num_groups < 1 || c.d[0] % num_groups)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %lld channels of %s do not split into %d "
                               "groups",
                               fn, (long long)c.d[0], S(x->shape, b),
                               num_groups);
    if (!check_param(g, fn, "weight", weight, c) ||
        !check_param(g, fn, "bias", bias, c) || !check_eps(g, fn, eps))
        return &g->poison;
    kiln_norm_attr a = {1, num_groups, eps};
    return normalise(g, fn, &x, 1, a, weight, bias, NULL);
}

kiln_node *kiln_instance_norm(kiln_graph *g, kiln_node *x, kiln_node *weight,
                              kiln_node *bias, float eps)
{
    const char *fn = "kiln_instance_norm";
    if (!g)
        return kiln_null_graph(fn);
    if (!check_input(g, fn, x, 2))
        return &g->poison;
    if (x->shape.d[1] > INT32_MAX)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: too many channels", fn);
    kiln_shape c = KILN_SHAPE(x->shape.d[1]);
    if (!check_param(g, fn, "weight", weight, c) ||
        !check_param(g, fn, "bias", bias, c) || !check_eps(g, fn, eps))
        return &g->poison;
    kiln_norm_attr a = {1, (int)c.d[0], eps};
    return normalise(g, fn, &x, 1, a, weight, bias, NULL);
}
