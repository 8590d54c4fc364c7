/* ONNX's training operators (domain ai.onnx.preview.training): Gradient
   through Kiln's own reverse mode (kiln_grad), and the optimiser steps
   Adagrad, Momentum (standard and Nesterov) and Adam as elementwise Kiln
   ops, with the formulas of the operators' definitions.  The step count T
   and the rate R stay graph values, so one imported step serves every
   iteration. */
#include <stdio.h>
#include <string.h>

#include "onnx/onnx_internal.h"
#include "kiln/autodiff.h"

/* Gradient: for each name in xs, d sum(y) / d x (y's gradient seeded with
   ones, as ONNX's definition has it). */
static int conv_gradient(ox_ctx *c, ox_node *n)
{
    const Onnx__AttributeProto *xs = ox_attr(n, "xs"), *y = ox_attr(n, "y");
    if (!xs || !y ||
        xs->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS ||
        y->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "attributes xs (strings) and y (a string) are "
                          "needed"),
               -1;
    if ((int)xs->n_strings != n->n_out)
        return ox_problem(c, n, KILN_ERR_ARG, "%zu names in xs, %d outputs",
                          xs->n_strings, n->n_out),
               -1;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)y->s.len, (const char *)y->s.data);
    const ox_value *yv = ox_lookup(c, name);
    if (!yv || !yv->node)
        return ox_problem(c, n, KILN_ERR_ARG, "y '%s' is not a value", name),
               -1;
    kiln_node *loss =
        kiln_sum(c->g, kiln_cast(c->g, yv->node, KILN_F32), KILN_ALL_AXES, 0);
    for (int k = 0; k < n->n_out; k++) {
        snprintf(name, sizeof name, "%.*s", (int)xs->strings[k].len,
                 (const char *)xs->strings[k].data);
        const ox_value *xv = ox_lookup(c, name);
        if (!xv || !xv->node)
            return ox_problem(c, n, KILN_ERR_ARG, "x '%s' is not a value",
                              name),
                   -1;
        n->out[k] = kiln_grad(c->g, loss, xv->node);
        n->out_type[k] = OX_FLOAT;
    }
    return 0;
}

/* The shared inputs of the optimiser steps: R and T as scalars, and the
   count of tensors (inputs after R and T, in groups of per). */
static int step_inputs(ox_ctx *c, const ox_node *n, int per, kiln_node **r,
                       kiln_node **t)
{
    int count = (n->n_in - 2) / per;
    if (n->n_in < 2 + per || (n->n_in - 2) % per ||
        n->n_out != count * (per - 1))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "%d inputs and %d outputs: want R, T, then %d "
                          "groups of tensors and %d outputs each",
                          n->n_in, n->n_out, per, per - 1),
               -1;
    *r = kiln_reshape(c->g, ox_f32(c, n, 0), KILN_SCALAR);
    *t = kiln_reshape(c->g, ox_f32(c, n, 1), KILN_SCALAR);
    return count;
}

static void set_out(ox_node *n, int k, kiln_node *v)
{
    n->out[k] = v;
    n->out_type[k] = OX_FLOAT;
}

/* norm * X + G */
static kiln_node *regularised(ox_ctx *c, kiln_node *x, kiln_node *g, float norm)
{
    return norm != 0 ? kiln_add(c->g, kiln_scale(c->g, x, norm), g) : g;
}

static int conv_adagrad(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    float decay, eps, norm;
    kiln_node *r, *t;
    if (ox_attr_float(c, n, "decay_factor", 0, &decay) ||
        ox_attr_float(c, n, "epsilon", 0, &eps) ||
        ox_attr_float(c, n, "norm_coefficient", 0, &norm))
        return -1;
    int count = step_inputs(c, n, 3, &r, &t);
    if (count < 0)
        return -1;
    /* r = R / (1 + T decay) */
    r = kiln_div(g, r, kiln_add(g, kiln_scalar(g, 1), kiln_scale(g, t, decay)));
    for (int k = 0; k < count; k++) {
        kiln_node *x = ox_f32(c, n, 2 + k);
        kiln_node *gr = regularised(c, x, ox_f32(c, n, 2 + count + k), norm);
        kiln_node *h =
            kiln_add(g, ox_f32(c, n, 2 + 2 * count + k), kiln_mul(g, gr, gr));
        kiln_node *den = kiln_add(g, kiln_sqrt(g, h), kiln_scalar(g, eps));
        set_out(n, k, kiln_sub(g, x, kiln_mul(g, r, kiln_div(g, gr, den))));
        set_out(n, count + k, h);
    }
    return 0;
}

static int conv_momentum(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    float alpha, beta, norm;
    char mode[16];
    kiln_node *r, *t;
    if (ox_attr_float(c, n, "alpha", 0, &alpha) ||
        ox_attr_float(c, n, "beta", 0, &beta) ||
        ox_attr_float(c, n, "norm_coefficient", 0, &norm) ||
        ox_attr_string(c, n, "mode", "standard", mode, sizeof mode))
        return -1;
    int nesterov = !strcmp(mode, "nesterov");
    if (!nesterov && strcmp(mode, "standard"))
        return ox_problem(c, n, KILN_ERR_ARG, "mode '%s'", mode), -1;
    int count = step_inputs(c, n, 3, &r, &t);
    if (count < 0)
        return -1;
    /* beta, or 1 at the first step (T = 0) */
    kiln_node *b = kiln_select(g, kiln_gt(g, t, kiln_scalar(g, 0)),
                               kiln_scalar(g, beta), kiln_scalar(g, 1));
    for (int k = 0; k < count; k++) {
        kiln_node *x = ox_f32(c, n, 2 + k);
        kiln_node *gr = regularised(c, x, ox_f32(c, n, 2 + count + k), norm);
        kiln_node *v =
            kiln_add(g, kiln_scale(g, ox_f32(c, n, 2 + 2 * count + k), alpha),
                     kiln_mul(g, b, gr));
        kiln_node *d = nesterov ? kiln_add(g, gr, kiln_scale(g, v, alpha)) : v;
        set_out(n, k, kiln_sub(g, x, kiln_mul(g, r, d)));
        set_out(n, count + k, v);
    }
    return 0;
}

static int conv_adam(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    float alpha, beta, eps, norm, post;
    kiln_node *r, *t;
    if (ox_attr_float(c, n, "alpha", 0.9f, &alpha) ||
        ox_attr_float(c, n, "beta", 0.999f, &beta) ||
        ox_attr_float(c, n, "epsilon", 1e-6f, &eps) ||
        ox_attr_float(c, n, "norm_coefficient", 0, &norm) ||
        ox_attr_float(c, n, "norm_coefficient_post", 0, &post))
        return -1;
    int count = step_inputs(c, n, 4, &r, &t);
    if (count < 0)
        return -1;
    /* R sqrt(1 - beta^T) / (1 - alpha^T) once T > 0, else R */
    kiln_node *one = kiln_scalar(g, 1);
    kiln_node *ra = kiln_div(
        g,
        kiln_mul(g, r,
                 kiln_sqrt(g, kiln_sub(g, one,
                                       kiln_pow(g, kiln_scalar(g, beta), t)))),
        kiln_sub(g, one, kiln_pow(g, kiln_scalar(g, alpha), t)));
    ra = kiln_select(g, kiln_gt(g, t, kiln_scalar(g, 0)), ra, r);
    for (int k = 0; k < count; k++) {
        kiln_node *x = ox_f32(c, n, 2 + k);
        kiln_node *gr = regularised(c, x, ox_f32(c, n, 2 + count + k), norm);
        kiln_node *v =
            kiln_add(g, kiln_scale(g, ox_f32(c, n, 2 + 2 * count + k), alpha),
                     kiln_scale(g, gr, 1 - alpha));
        kiln_node *h =
            kiln_add(g, kiln_scale(g, ox_f32(c, n, 2 + 3 * count + k), beta),
                     kiln_scale(g, kiln_mul(g, gr, gr), 1 - beta));
        kiln_node *den = kiln_add(g, kiln_sqrt(g, h), kiln_scalar(g, eps));
        kiln_node *xn = kiln_sub(g, x, kiln_mul(g, ra, kiln_div(g, v, den)));
        set_out(n, k, post != 0 ? kiln_scale(g, xn, 1 - post) : xn);
        set_out(n, count + k, v);
        set_out(n, 2 * count + k, h);
    }
    return 0;
}

const ox_op ox_train_ops[] = {
    {"ai.onnx.preview.training.Gradient", conv_gradient, "xs,y"},
    {"ai.onnx.preview.training.Adagrad", conv_adagrad,
     "decay_factor,epsilon,norm_coefficient"},
    {"ai.onnx.preview.training.Momentum", conv_momentum,
     "alpha,beta,mode,norm_coefficient"},
    {"ai.onnx.preview.training.Adam", conv_adam,
     "alpha,beta,epsilon,norm_coefficient,norm_coefficient_post"},
    {NULL, NULL, NULL},
};
