/* Gradient rules of the indexing ops.  Selecting and adding at the same
   indices are adjoint: <adj, index_select(x, idx)> = <index_add(0, idx,
   adj), x>, and likewise gather and scatter_add, so each op's gradients
   are the other's (and gradients of gradients stay within the four). */
#include "grad/index_rules.h"
#include "graph/index.h"

#define NEED(i) (need & (1u << (i)))

/* Zeros of x's shape as a broadcast scalar: no table-sized constant in
   the graph (an embedding's gradient starts from zeros of the table). */
static kiln_node *zeros_of(kiln_graph *g, kiln_node *x)
{
    return kiln_broadcast_to(g, kiln_scalar(g, 0.0f), x->shape);
}

void grad_INDEX_SELECT(kiln_graph *g, kiln_node *n, kiln_node *adj,
                       unsigned need, kiln_node **gin)
{
    if (NEED(0))
        gin[0] = kiln_index_op(g, KILN_OP_INDEX_ADD, zeros_of(g, n->in[0]),
                               n->at.axis, n->in[1], adj, "grad");
}

void grad_INDEX_ADD(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                    kiln_node **gin)
{
    if (NEED(0))
        gin[0] = adj;
    if (NEED(2))
        gin[2] = kiln_index_op(g, KILN_OP_INDEX_SELECT, adj, n->at.axis,
                               n->in[1], NULL, "grad");
}

void grad_GATHER(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                 kiln_node **gin)
{
    if (NEED(0))
        gin[0] = kiln_index_op(g, KILN_OP_SCATTER_ADD, zeros_of(g, n->in[0]),
                               n->at.axis, n->in[1], adj, "grad");
}

/* src's positions beyond idx's (PyTorch lets idx be smaller) add nothing:
   their gradient is zero, padded after the gathered part. */
void grad_SCATTER_ADD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                      unsigned need, kiln_node **gin)
{
    if (NEED(0))
        gin[0] = adj;
    if (!NEED(2))
        return;
    kiln_node *src = n->in[2];
    kiln_node *d = kiln_index_op(g, KILN_OP_GATHER, adj, n->at.axis, n->in[1],
                                 NULL, "grad");
    if (kiln_shape_equal(d->shape, src->shape) || d->op == KILN_OP_ERROR) {
        gin[2] = d;
        return;
    }
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS];
    for (int i = 0; i < src->shape.ndim; i++)
        hi[i] = src->shape.d[i] - d->shape.d[i];
    gin[2] = kiln_pad(g, d, lo, hi, 0.0f);
}
