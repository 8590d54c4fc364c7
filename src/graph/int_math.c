/* Integer arithmetic on i32 tensors for index math (positions, offsets,
   buckets): add, sub, mul, floor division and remainder with numpy
   broadcasting and PyTorch's semantics (two's complement wrap-around,
   torch.div(rounding_mode="floor"), torch.remainder: the sign of the
   divisor).  No gradient: integers carry none. */
#include "graph/builders.h"

kiln_status kiln_infer_int_map(const kiln_node *n, kiln_shape *s,
                               kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_node *a = n->in[0], *b = n->in[1];
    *dt = KILN_I32;
    *s = a->shape;
    if (a->dtype != KILN_I32 || b->dtype != KILN_I32)
        return kiln_infer_why(
            why, len, KILN_ERR_DTYPE,
            "operands have dtypes %s and %s, expected i32 (use kiln_cast)",
            kiln_dtype_name(a->dtype), kiln_dtype_name(b->dtype));
    if (!kiln_shape_broadcast(a->shape, b->shape, s))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "%s and %s do not broadcast", S(a->shape, b1),
                              S(b->shape, b2));
    return KILN_OK;
}

static kiln_node *int_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                         const char *fn)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b))
        return &g->poison;
    kiln_node *in[2] = {a, b};
    kiln_node p = {.op = op, .n_in = 2, .in = in};
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_int_add(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return int_op(g, KILN_OP_INT_ADD, a, b, "kiln_int_add");
}

kiln_node *kiln_int_sub(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return int_op(g, KILN_OP_INT_SUB, a, b, "kiln_int_sub");
}

kiln_node *kiln_int_mul(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return int_op(g, KILN_OP_INT_MUL, a, b, "kiln_int_mul");
}

kiln_node *kiln_int_floor_div(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return int_op(g, KILN_OP_INT_FLOOR_DIV, a, b, "kiln_int_floor_div");
}

kiln_node *kiln_int_mod(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return int_op(g, KILN_OP_INT_MOD, a, b, "kiln_int_mod");
}
