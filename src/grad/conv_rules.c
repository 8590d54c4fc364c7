/* Gradient rules of the convolutions.  The three ops are the one bilinear
   form <dy, conv(x, w)> = <conv_transpose(dy, w), x> =
   <conv_weight_grad(x, dy), w> read three ways, so each op's gradients are
   the other two (and grad-of-grad stays within the three):
     y = conv(x, w):              dx = conv_transpose(a, w), dw = wgrad(x, a)
     x = conv_transpose(dy, w):   ddy = conv(a, w),          dw = wgrad(a, dy)
     w = wgrad(x, dy):            dx = conv_transpose(dy, a), ddy = conv(x, a)
   for the adjoint a of the op's output.  conv_transpose's output padding
   is recomputed for the size its result must have. */
#include "grad/conv_rules.h"
#include "graph/conv.h"

#define NEED(i) (need & (1u << (i)))

static kiln_window plain(const kiln_window *w)
{
    kiln_window p = *w;
    for (int i = 0; i < 3; i++)
        p.out_pad[i] = 0;
    return p;
}

/* conv_transpose(dy, w) with the output padding that gives x's shape. */
static kiln_node *transpose_to(kiln_graph *g, kiln_node *dy, kiln_node *w,
                               const kiln_window *win, kiln_shape x)
{
    kiln_window t = kiln_conv_window_to(win, x, dy->shape);
    return kiln_conv_op(g, KILN_OP_CONV_TRANSPOSE, dy, w, &t, "grad");
}

void grad_CONV(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
               kiln_node **gin)
{
    kiln_node *x = n->in[0], *w = n->in[1];
    if (NEED(0))
        gin[0] = transpose_to(g, adj, w, &n->at.win, x->shape);
    if (NEED(1))
        gin[1] =
            kiln_conv_op(g, KILN_OP_CONV_WGRAD, x, adj, &n->at.win, "grad");
}

void grad_CONV_TRANSPOSE(kiln_graph *g, kiln_node *n, kiln_node *adj,
                         unsigned need, kiln_node **gin)
{
    kiln_node *dy = n->in[0];
    kiln_window win = plain(&n->at.win);
    if (NEED(0))
        gin[0] = kiln_conv_op(g, KILN_OP_CONV, adj, n->in[1], &win, "grad");
    if (NEED(1))
        gin[1] = kiln_conv_op(g, KILN_OP_CONV_WGRAD, adj, dy, &win, "grad");
}

void grad_CONV_WGRAD(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                     kiln_node **gin)
{
    kiln_node *x = n->in[0], *dy = n->in[1];
    if (NEED(0))
        gin[0] = transpose_to(g, dy, adj, &n->at.win, x->shape);
    if (NEED(1))
        gin[1] = kiln_conv_op(g, KILN_OP_CONV, x, adj, &n->at.win, "grad");
}
