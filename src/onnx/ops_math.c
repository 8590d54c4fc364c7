/* Converters of the elementwise, comparison and activation ops.  Integer
   operands are computed in f32 and cast back (exact below 2^24, which
   covers the index arithmetic models do). */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

typedef kiln_node *(*unary_fn)(kiln_graph *, kiln_node *);
typedef kiln_node *(*binary_fn)(kiln_graph *, kiln_node *, kiln_node *);

static const struct {
    const char *name;
    unary_fn fn;
} unary_ops[] = {
    {"Abs", kiln_abs},           {"Neg", kiln_neg},     {"Exp", kiln_exp},
    {"Log", kiln_log},           {"Sqrt", kiln_sqrt},   {"Relu", kiln_relu},
    {"Sigmoid", kiln_sigmoid},   {"Tanh", kiln_tanh},   {"Erf", kiln_erf},
    {"Sin", kiln_sin},           {"Cos", kiln_cos},     {"Floor", kiln_floor},
    {"Ceil", kiln_ceil},         {"Round", kiln_round}, {"Sign", kiln_sign},
    {"Softplus", kiln_softplus}, {"Asin", kiln_asin},   {"Acos", kiln_acos},
    {"Atan", kiln_atan},
};

static const struct {
    const char *name;
    binary_fn fn;
    int logical; /* the result is a bool */
} binary_ops[] = {
    {"Add", kiln_add, 0},        {"Sub", kiln_sub, 0},
    {"Mul", kiln_mul, 0},        {"Div", kiln_div, 0},
    {"Pow", kiln_pow, 0},        {"Max", kiln_max, 0},
    {"Min", kiln_min, 0},        {"Sum", kiln_add, 0},
    {"Mean", kiln_add, 0},       {"Equal", kiln_eq, 1},
    {"Less", kiln_lt, 1},        {"Greater", kiln_gt, 1},
    {"LessOrEqual", kiln_le, 1}, {"GreaterOrEqual", kiln_ge, 1},
    {"And", kiln_mul, 1},        {"Or", kiln_max, 1},
};

static int conv_unary(ox_ctx *c, ox_node *n)
{
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        if (!strcmp(n->p->op_type, unary_ops[k].name)) {
            ox_out(c, n, unary_ops[k].fn(c->g, ox_f32(c, n, 0)),
                   ox_in_type(n, 0));
            ox_fold_ints(n);
            ox_fold_floats(n);
            return 0;
        }
    return -1;
}

/* Binary and variadic (Max, Min, Sum, Mean) ops, numpy broadcasting. */
static int conv_binary(ox_ctx *c, ox_node *n)
{
    size_t k = 0;
    while (strcmp(n->p->op_type, binary_ops[k].name))
        k++;
    kiln_node *y = ox_f32(c, n, 0);
    if (!y)
        return ox_problem(c, n, KILN_ERR_IO, "missing input"), -1;
    for (int i = 1; i < n->n_in; i++)
        y = binary_ops[k].fn(c->g, y, ox_legacy_broadcast(c, n, y, i));
    if (!strcmp(n->p->op_type, "Mean"))
        y = kiln_scale(c->g, y, 1.0f / (float)n->n_in);
    ox_out(c, n, y, binary_ops[k].logical ? OX_BOOL : ox_in_type(n, 0));
    ox_fold_ints(n);
    ox_fold_floats(n);
    return 0;
}

static int conv_xor(ox_ctx *c, ox_node *n)
{
    kiln_node *d = kiln_sub(c->g, ox_f32(c, n, 0), ox_f32(c, n, 1));
    ox_out(c, n, kiln_abs(c->g, d), OX_BOOL);
    return 0;
}

static int conv_not(ox_ctx *c, ox_node *n)
{
    ox_out(c, n, kiln_sub(c->g, kiln_scalar(c->g, 1), ox_f32(c, n, 0)),
           OX_BOOL);
    return 0;
}

static int conv_reciprocal(ox_ctx *c, ox_node *n)
{
    ox_out(c, n, kiln_div(c->g, kiln_scalar(c->g, 1), ox_f32(c, n, 0)),
           ox_in_type(n, 0));
    return 0;
}

static int conv_where(ox_ctx *c, ox_node *n)
{
    ox_out(c, n,
           kiln_select(c->g, ox_f32(c, n, 0), ox_f32(c, n, 1), ox_f32(c, n, 2)),
           ox_in_type(n, 1));
    return 0;
}

/* select(x < 0, neg, x). */
static kiln_node *negative_part(ox_ctx *c, kiln_node *x, kiln_node *neg)
{
    kiln_node *lt = kiln_lt(c->g, x, kiln_scalar(c->g, 0));
    return kiln_select(c->g, lt, neg, x);
}

static int conv_leaky_relu(ox_ctx *c, ox_node *n)
{
    float alpha;
    if (ox_attr_float(c, n, "alpha", 0.01f, &alpha))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    ox_out(c, n, negative_part(c, x, kiln_scale(c->g, x, alpha)), OX_FLOAT);
    return 0;
}

static int conv_prelu(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0), *slope = ox_f32(c, n, 1);
    kiln_shape xs = kiln_node_shape(x), ss = kiln_node_shape(slope);
    /* Opsets before 7 (and PyTorch's old exports) give one slope per
       channel as a vector: it runs along dim 1. */
    if (ss.ndim == 1 && xs.ndim > 2 && ss.d[0] == xs.d[1] &&
        ss.d[0] != xs.d[xs.ndim - 1]) {
        kiln_shape per = {.ndim = xs.ndim - 1};
        per.d[0] = ss.d[0];
        for (int k = 1; k < per.ndim; k++)
            per.d[k] = 1;
        slope = kiln_reshape(c->g, slope, per);
    }
    ox_out(c, n, negative_part(c, x, kiln_mul(c->g, x, slope)), OX_FLOAT);
    return 0;
}

/* Elu and Selu: gamma * (x > 0 ? x : alpha (e^x - 1)). */
static int conv_elu(ox_ctx *c, ox_node *n)
{
    int selu = !strcmp(n->p->op_type, "Selu");
    float alpha, gamma;
    if (ox_attr_float(c, n, "alpha", selu ? 1.67326319f : 1.0f, &alpha) ||
        ox_attr_float(c, n, "gamma", 1.05070102f, &gamma))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_node *y =
        negative_part(c, x, kiln_scale(c->g, kiln_expm1(c->g, x), alpha));
    ox_out(c, n, selu ? kiln_scale(c->g, y, gamma) : y, OX_FLOAT);
    return 0;
}

static kiln_node *clamp(ox_ctx *c, kiln_node *x, kiln_node *lo, kiln_node *hi)
{
    if (lo)
        x = kiln_max(c->g, x, lo);
    return hi ? kiln_min(c->g, x, hi) : x;
}

static int conv_hard_sigmoid(ox_ctx *c, ox_node *n)
{
    float alpha, beta;
    if (ox_attr_float(c, n, "alpha", 0.2f, &alpha) ||
        ox_attr_float(c, n, "beta", 0.5f, &beta))
        return -1;
    kiln_node *x = kiln_add(c->g, kiln_scale(c->g, ox_f32(c, n, 0), alpha),
                            kiln_scalar(c->g, beta));
    ox_out(c, n, clamp(c, x, kiln_scalar(c->g, 0), kiln_scalar(c->g, 1)),
           OX_FLOAT);
    return 0;
}

static int conv_softsign(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0);
    kiln_node *d = kiln_add(c->g, kiln_scalar(c->g, 1), kiln_abs(c->g, x));
    ox_out(c, n, kiln_div(c->g, x, d), OX_FLOAT);
    return 0;
}

/* Clip: bounds are attributes before opset 11, optional inputs after. */
static int conv_clip(ox_ctx *c, ox_node *n)
{
    kiln_node *lo = NULL, *hi = NULL;
    if (c->opset < 11) {
        float a, b;
        if (ox_attr_float(c, n, "min", -INFINITY, &a) ||
            ox_attr_float(c, n, "max", INFINITY, &b))
            return -1;
        lo = isinf(a) ? NULL : kiln_scalar(c->g, a);
        hi = isinf(b) ? NULL : kiln_scalar(c->g, b);
    } else {
        lo = ox_f32(c, n, 1);
        hi = ox_f32(c, n, 2);
    }
    ox_out(c, n, clamp(c, ox_f32(c, n, 0), lo, hi), ox_in_type(n, 0));
    return 0;
}

/* Softmax and LogSoftmax: one axis from opset 13; before, the input is
   seen as 2-D [prod(dims < axis), prod(dims >= axis)]. */
static int conv_softmax(ox_ctx *c, ox_node *n)
{
    int log = !strcmp(n->p->op_type, "LogSoftmax");
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    int64_t axis;
    if (ox_attr_int(c, n, "axis", c->opset >= 13 ? -1 : 1, &axis))
        return -1;
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    if (c->opset >= 13 || a == s.ndim - 1) {
        ox_out(c, n,
               log ? kiln_log_softmax(c->g, x, a) : kiln_softmax(c->g, x, a),
               OX_FLOAT);
        return 0;
    }
    int64_t rows = 1;
    for (int k = 0; k < a; k++)
        rows *= s.d[k];
    kiln_node *flat = kiln_reshape(c->g, x, KILN_SHAPE(rows, -1));
    kiln_node *y =
        log ? kiln_log_softmax(c->g, flat, 1) : kiln_softmax(c->g, flat, 1);
    ox_out(c, n, kiln_reshape(c->g, y, s), OX_FLOAT);
    return 0;
}

static int conv_identity(ox_ctx *c, ox_node *n)
{
    (void)c;
    const ox_host *k = n->in[0] ? n->in[0]->known : NULL;
    n->out[0] = ox_in(c, n, 0);
    n->out_type[0] = ox_in_type(n, 0);
    if (k && (k->i || n->out_type[0] == OX_BOOL))
        n->out_known[0] = ox_host_dup(k);
    return 0;
}

/* Dropout in inference: the identity; its optional mask is all true. */
static int conv_dropout(ox_ctx *c, ox_node *n)
{
    int64_t training = 0;
    if (c->opset < 7) {
        int64_t is_test;
        if (ox_attr_int(c, n, "is_test", 0, &is_test))
            return -1;
        training = !is_test;
    } else if (n->n_in > 2 && n->in[2]) {
        const ox_host *t = n->in[2]->known,
                      *r = n->in[1] ? n->in[1]->known : NULL;
        if (!t || t->numel != 1)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "training_mode must be known while loading"),
                   -1;
        training = t->f ? t->f[0] != 0 : t->i[0] != 0;
        /* Dropping nothing is the identity, in training too. */
        if (r && r->numel == 1 && (r->f ? r->f[0] == 0 : r->i[0] == 0))
            training = 0;
    }
    if (training)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "training mode (only inference is imported)"),
               -1;
    conv_identity(c, n);
    if (n->n_out > 1)
        n->out[1] = ox_fill(c->g, kiln_node_shape(n->out[0]), 1);
    n->out_type[1] = OX_BOOL;
    return 0;
}

const ox_op ox_math_ops[] = {
    {"Abs", conv_unary, ""},
    {"Neg", conv_unary, ""},
    {"Asin", conv_unary, ""},
    {"Acos", conv_unary, ""},
    {"Atan", conv_unary, ""},
    {"Exp", conv_unary, ""},
    {"Log", conv_unary, ""},
    {"Sqrt", conv_unary, ""},
    {"Relu", conv_unary, ""},
    {"Sigmoid", conv_unary, ""},
    {"Tanh", conv_unary, ""},
    {"Erf", conv_unary, ""},
    {"Sin", conv_unary, ""},
    {"Cos", conv_unary, ""},
    {"Floor", conv_unary, ""},
    {"Ceil", conv_unary, ""},
    {"Round", conv_unary, ""},
    {"Sign", conv_unary, ""},
    {"Softplus", conv_unary, ""},
    {"Add", conv_binary, "axis,broadcast"},
    {"Sub", conv_binary, "axis,broadcast"},
    {"Mul", conv_binary, "axis,broadcast"},
    {"Div", conv_binary, "axis,broadcast"},
    {"Pow", conv_binary, "axis,broadcast"},
    {"Max", conv_binary, ""},
    {"Min", conv_binary, ""},
    {"Sum", conv_binary, ""},
    {"Mean", conv_binary, ""},
    {"Equal", conv_binary, ""},
    {"Less", conv_binary, ""},
    {"Greater", conv_binary, ""},
    {"LessOrEqual", conv_binary, ""},
    {"GreaterOrEqual", conv_binary, ""},
    {"And", conv_binary, ""},
    {"Or", conv_binary, ""},
    {"Xor", conv_xor, ""},
    {"Not", conv_not, ""},
    {"Reciprocal", conv_reciprocal, ""},
    {"Where", conv_where, ""},
    {"LeakyRelu", conv_leaky_relu, "alpha"},
    {"PRelu", conv_prelu, ""},
    {"Elu", conv_elu, "alpha"},
    {"Selu", conv_elu, "alpha,gamma"},
    {"HardSigmoid", conv_hard_sigmoid, "alpha,beta"},
    {"Softsign", conv_softsign, ""},
    {"Clip", conv_clip, "min,max"},
    {"Softmax", conv_softmax, "axis"},
    {"LogSoftmax", conv_softmax, "axis"},
    {"Identity", conv_identity, ""},
    {"Dropout", conv_dropout, "ratio,seed,is_test"},
    {NULL, NULL, NULL},
};
