/* Gradient rules of the pooling group.  Max pooling routes the adjoint to
   each window's argmax (max_pool2d_grad); that is linear in the adjoint,
   and its own gradient reads the adjoint back at the argmaxes
   (max_pool2d_gather), whose gradient is max_pool2d_grad again: as
   PyTorch, the argmax positions are constant (no gradient reaches x
   through them).  resample2d is linear: its gradient is its transpose and
   the transpose's is resample2d. */
#include "grad/pool_rules.h"
#include "graph/resample.h"

#define NEED(i) (need & (1u << (i)))

void kiln_grad_rule_MAX_POOL2D(kiln_graph *g, kiln_node *n, kiln_node *adj,
                               unsigned need, kiln_node **gin)
{
    (void)need;
    gin[0] = kiln_max_pool_pair(g, KILN_OP_MAX_POOL2D_GRAD, n, n->in[0], adj);
}

void kiln_grad_rule_MAX_POOL2D_GRAD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                                    unsigned need, kiln_node **gin)
{
    if (NEED(1))
        gin[1] =
            kiln_max_pool_pair(g, KILN_OP_MAX_POOL2D_GATHER, n, n->in[0], adj);
}

void kiln_grad_rule_MAX_POOL2D_GATHER(kiln_graph *g, kiln_node *n,
                                      kiln_node *adj, unsigned need,
                                      kiln_node **gin)
{
    if (NEED(1))
        gin[1] =
            kiln_max_pool_pair(g, KILN_OP_MAX_POOL2D_GRAD, n, n->in[0], adj);
}

void kiln_grad_rule_RESAMPLE2D(kiln_graph *g, kiln_node *n, kiln_node *adj,
                               unsigned need, kiln_node **gin)
{
    (void)need;
    gin[0] =
        kiln_resample_node(g, KILN_OP_RESAMPLE2D_GRAD, n, adj, n->in[0]->shape);
}

void kiln_grad_rule_RESAMPLE2D_GRAD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                                    unsigned need, kiln_node **gin)
{
    (void)need;
    gin[0] = kiln_resample_node(g, KILN_OP_RESAMPLE2D, n, adj, n->in[0]->shape);
}
