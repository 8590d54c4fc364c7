/* Builders of elementwise ops: unary, binary with numpy broadcasting,
   select. */
#include "graph/builders.h"

/* ---------------------------------------------------------------- elementwise
 */

/* A node of op on inputs in, by the op's shape rule.  The prototype sets
   only what kiln_node_build reads of an op without attributes: zeroing a
   whole node per elementwise op was a tenth of building a dynamic graph. */
static kiln_node *map_op(kiln_graph *g, kiln_op op, kiln_node **in, int n_in,
                         const char *fn)
{
    kiln_node p;
    p.op = op;
    p.n_in = n_in;
    p.in = in;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_unary_op(kiln_graph *g, kiln_op op, kiln_node *x)
{
    return map_op(g, op, &x, 1, NULL);
}

static kiln_node *unary(kiln_graph *g, kiln_op op, kiln_node *x, const char *fn)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    return map_op(g, op, &x, 1, fn);
}

kiln_node *kiln_binary_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b)
{
    kiln_node *in[2] = {a, b};
    return map_op(g, op, in, 2, NULL);
}

static kiln_node *binary(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                         const char *fn)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b))
        return &g->poison;
    kiln_node *in[2] = {a, b};
    return map_op(g, op, in, 2, fn);
}

/* The public builders kiln_<name>, one per row of the table. */
#define KILN_UNARY(OP, name, ...)                                              \
    kiln_node *kiln_##name(kiln_graph *g, kiln_node *x)                        \
    {                                                                          \
        return unary(g, KILN_OP_##OP, x, "kiln_" #name);                       \
    }
#define KILN_BINARY(OP, name, ...)                                             \
    kiln_node *kiln_##name(kiln_graph *g, kiln_node *a, kiln_node *b)          \
    {                                                                          \
        return binary(g, KILN_OP_##OP, a, b, "kiln_" #name);                   \
    }
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY

kiln_node *kiln_select(kiln_graph *g, kiln_node *cond, kiln_node *a,
                       kiln_node *b)
{
    const char *fn = "kiln_select";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, cond) || !kiln_graph_check(g, fn, a) ||
        !kiln_graph_check(g, fn, b))
        return &g->poison;
    kiln_node *in[3] = {cond, a, b};
    return map_op(g, KILN_OP_SELECT, in, 3, fn);
}

kiln_node *kiln_scale(kiln_graph *g, kiln_node *x, float s)
{
    if (!g)
        return kiln_null_graph(__func__);
    if (!kiln_graph_check(g, "kiln_scale", x) || !check_f32(g, "kiln_scale", x))
        return &g->poison;
    return kiln_mul(g, x, kiln_scalar(g, s));
}
