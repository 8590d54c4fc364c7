/* The attention group's nodes (graph/attention.c) and the layout of the
   packed tensors its ops exchange, shared by the shape rules, the gradient
   rules and the kernels. */
#ifndef KILN_GRAPH_ATTENTION_H
#define KILN_GRAPH_ATTENTION_H

#include "graph/graph.h"

/* q [b,h,tq,d], k [b,h,tk,d], v [b,h,tk,e]. */
typedef struct kiln_attn_dims {
    int64_t b, h, tq, tk, d, e;
} kiln_attn_dims;

/* The dims of an attention or attention_grad node (its first three inputs
   are q, k, v). */
static inline kiln_attn_dims kiln_attn_dims_of(const kiln_node *n)
{
    const int64_t *q = n->in[0]->shape.d, *k = n->in[1]->shape.d,
                  *v = n->in[2]->shape.d;
    return (kiln_attn_dims){q[0], q[1], q[2], k[2], q[3], v[3]};
}

/* Floats per batch row of attention's packed output: h*tq*e outputs, then
   h*tq log-sum-exps. */
static inline int64_t kiln_attn_out_row(kiln_attn_dims a)
{
    return a.h * a.tq * (a.e + 1);
}

/* Floats per batch row of attention_grad's output: dq, dk, dv. */
static inline int64_t kiln_attn_grad_row(kiln_attn_dims a)
{
    return a.h * (a.tq * a.d + a.tk * (a.d + a.e));
}

/* The mask input of an attention node (the last after q, k, v or, for the
   gradient, after q, k, v, packed, dpacked), NULL when none. */
static inline const kiln_node *kiln_attn_mask(const kiln_node *n)
{
    int first = n->op == KILN_OP_ATTENTION ? 3 : 5;
    return n->n_in > first ? n->in[first] : NULL;
}

/* attention_grad of attention node n (packed output) for the adjoint adj,
   and the slice [lo, lo + len) of each batch row of its result, reshaped
   to s: dq, dk or dv. */
kiln_node *kiln_attention_grad_node(kiln_graph *g, const kiln_node *n,
                                    kiln_node *adj);
kiln_node *kiln_attention_unpack(kiln_graph *g, kiln_node *packed, int64_t lo,
                                 int64_t len, kiln_shape s);
/* rms_norm_grad(x, dy) with the attributes of rms_norm node n. */
kiln_node *kiln_rms_norm_grad_node(kiln_graph *g, const kiln_node *n,
                                   kiln_node *x, kiln_node *dy);

#endif
