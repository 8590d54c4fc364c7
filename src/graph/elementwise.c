/* Builders of elementwise ops: unary, binary with numpy broadcasting,
   select. */
#include "graph/builders.h"

/* ---------------------------------------------------------------- elementwise
 */

kiln_node *kiln_unary_op(kiln_graph *g, kiln_op op, kiln_node *x)
{
    return kiln_node_make(g, op, x->dtype, x->shape, &x, 1);
}

static kiln_node *unary(kiln_graph *g, kiln_op op, kiln_node *x, const char *fn)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    return kiln_unary_op(g, op, x);
}

#define UNARY_BUILDER(fname, OP)                                               \
    kiln_node *kiln_##fname(kiln_graph *g, kiln_node *x)                       \
    {                                                                          \
        return unary(g, KILN_OP_##OP, x, "kiln_" #fname);                      \
    }
UNARY_BUILDER(neg, NEG)
UNARY_BUILDER(abs, ABS)
UNARY_BUILDER(sign, SIGN)
UNARY_BUILDER(exp, EXP)
UNARY_BUILDER(log, LOG)
UNARY_BUILDER(sqrt, SQRT)
UNARY_BUILDER(sin, SIN)
UNARY_BUILDER(cos, COS)
UNARY_BUILDER(tanh, TANH)
UNARY_BUILDER(sigmoid, SIGMOID)
UNARY_BUILDER(relu, RELU)
UNARY_BUILDER(erf, ERF)
#undef UNARY_BUILDER

kiln_node *kiln_binary_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b)
{
    kiln_shape out;
    char ba[SHAPE_BUF], bb[SHAPE_BUF];
    if (!kiln_shape_broadcast(a->shape, b->shape, &out))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "kiln_%s: %s and %s do not broadcast",
            kiln_op_table[op].name, S(a->shape, ba), S(b->shape, bb));
    kiln_node *in[2] = {a, b};
    return kiln_node_make(g, op, KILN_F32, out, in, 2);
}

static kiln_node *binary(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                         const char *fn)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    return kiln_binary_op(g, op, a, b);
}

#define BINARY_BUILDER(fname, OP)                                              \
    kiln_node *kiln_##fname(kiln_graph *g, kiln_node *a, kiln_node *b)         \
    {                                                                          \
        return binary(g, KILN_OP_##OP, a, b, "kiln_" #fname);                  \
    }
BINARY_BUILDER(add, ADD)
BINARY_BUILDER(sub, SUB)
BINARY_BUILDER(mul, MUL)
BINARY_BUILDER(div, DIV)
BINARY_BUILDER(pow, POW)
BINARY_BUILDER(max, MAX)
BINARY_BUILDER(min, MIN)
BINARY_BUILDER(lt, LT)
BINARY_BUILDER(le, LE)
BINARY_BUILDER(gt, GT)
BINARY_BUILDER(ge, GE)
BINARY_BUILDER(eq, EQ)
#undef BINARY_BUILDER

kiln_node *kiln_select(kiln_graph *g, kiln_node *cond, kiln_node *a,
                       kiln_node *b)
{
    const char *fn = "kiln_select";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, cond) || !kiln_graph_check(g, fn, a) ||
        !kiln_graph_check(g, fn, b) || !check_f32(g, fn, cond) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    kiln_shape s1, out;
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    if (!kiln_shape_broadcast(cond->shape, a->shape, &s1) ||
        !kiln_shape_broadcast(s1, b->shape, &out))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "%s: %s, %s and %s do not broadcast", fn,
            S(cond->shape, b1), S(a->shape, b2), S(b->shape, b3));
    kiln_node *in[3] = {cond, a, b};
    return kiln_node_make(g, KILN_OP_SELECT, KILN_F32, out, in, 3);
}

kiln_node *kiln_scale(kiln_graph *g, kiln_node *x, float s)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_scale", x) || !check_f32(g, "kiln_scale", x))
        return &g->poison;
    return kiln_mul(g, x, kiln_scalar(g, s));
}
