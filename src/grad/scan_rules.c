/* Gradient rules of cumsum and prod. */
#include "grad/index_rules.h"
#include "graph/index.h"

#define B(op, a, b) kiln_binary_op(g, KILN_OP_##op, (a), (b))

/* x reversed along axis: an index_select at size-1 ... 0. */
static kiln_node *flip(kiln_graph *g, kiln_node *x, int axis)
{
    int64_t size = x->shape.d[axis];
    int32_t *rev = kiln_graph_alloc(g, (size_t)size * sizeof *rev + 1);
    if (!rev)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "grad: out of memory");
    for (int64_t i = 0; i < size; i++)
        rev[i] = (int32_t)(size - 1 - i);
    kiln_node *idx = kiln_constant(g, KILN_I32, KILN_SHAPE(size), rev);
    return kiln_index_op(g, KILN_OP_INDEX_SELECT, x, axis, idx, NULL, "grad");
}

/* out_j = sum of x_i for i <= j: dx_i = sum of adj_j for j >= i, the
   cumsum of adj reversed (exact, unlike total - cumsum + adj). */
void grad_CUMSUM(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                 kiln_node **gin)
{
    (void)need;
    int a = n->at.axis;
    gin[0] = flip(g, kiln_cumsum_op(g, flip(g, adj, a), a), a);
}

/* v (a reduction's result or adjoint) with the reduced axes kept as 1 */
static kiln_node *kept(kiln_graph *g, const kiln_node *n, kiln_node *v)
{
    if (n->at.keepdims)
        return v;
    kiln_shape s = n->in[0]->shape;
    for (int d = 0; d < s.ndim; d++)
        if (n->at.axes >> d & 1u)
            s.d[d] = 1;
    return kiln_reshape(g, v, s);
}

/* d out / d x_i is the product of the others, PyTorch's gradient zeros
   included: p / x_i when no x is zero; at the one zero x_i, the product p'
   of the nonzero others; 0 everywhere when two or more are zero.  From p'
   (the product with zeros as ones) and z (the count of zeros). */
void grad_PROD(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
               kiln_node **gin)
{
    (void)need;
    kiln_node *x = n->in[0], *zero = kiln_scalar(g, 0.0f);
    kiln_node *one = kiln_scalar(g, 1.0f);
    kiln_node *isz = B(EQ, x, zero);
    kiln_node *safe = kiln_select(g, isz, one, x);
    kiln_node *p = kiln_reduce_op(g, KILN_OP_PROD, safe, n->at.axes, 1, "grad");
    kiln_node *z = kiln_reduce_op(g, KILN_OP_SUM, isz, n->at.axes, 1, "grad");
    kiln_node *at_zero = B(MUL, p, B(EQ, z, one));
    kiln_node *elsewhere = B(DIV, B(MUL, p, B(EQ, z, zero)), safe);
    gin[0] = B(MUL, kept(g, n, adj), kiln_select(g, isz, at_zero, elsewhere));
}
