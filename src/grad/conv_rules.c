/* Gradient rules of the convolutions.  The three ops are the one bilinear
   form <dy, conv(x, w)> = <conv_transpose(dy, w), x> =
   <conv_weight_grad(x, dy), w> read three ways, so each op's gradients are
   the other two (and grad-of-grad stays within the three):
     y = conv(x, w):              dx = conv_transpose(a, w), dw = wgrad(x, a)
     x = conv_transpose(dy, w):   ddy = conv(a, w),          dw = wgrad(a, dy)
     w = wgrad(x, dy):            dx = conv_transpose(dy, a), ddy = conv(x, a)
   for the adjoint a of the op's output.  conv_transpose's output padding
   is recomputed for the size its result must have.  A conv with a fused
   bias and relu first masks a where its output is <= 0 (PyTorch's
   threshold_backward: relu(z) <= 0 exactly where z <= 0, NaN included),
   and the bias's gradient is a summed over everything but the channels. */
#include "grad/conv_rules.h"
#include "graph/conv.h"

#define NEED(i) (need & (1u << (i)))

/* w without output padding or fused relu. */
static kiln_window plain(const kiln_window *w)
{
    kiln_window p = *w;
    for (int i = 0; i < 3; i++)
        p.out_pad[i] = 0;
    p.flags = 0;
    return p;
}

/* a [N, C, *S] summed to [C], contiguous runs first: the spatial dims,
   then the batch. */
static kiln_node *channel_sum(kiln_graph *g, kiln_node *a)
{
    kiln_shape s = a->shape;
    int64_t rest = 1;
    for (int i = 2; i < s.ndim; i++)
        rest *= s.d[i];
    kiln_node *r = kiln_reshape(g, a, KILN_SHAPE(s.d[0], s.d[1], rest));
    r = kiln_reduce_op(g, KILN_OP_SUM, r, 1u << 2, 0, "grad");
    return kiln_reduce_op(g, KILN_OP_SUM, r, 1u << 0, 0, "grad");
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
    kiln_window win = plain(&n->at.win);
    if (n->at.win.flags & KILN_WINDOW_RELU) {
        kiln_node *zero = kiln_scalar(g, 0.0f);
        adj = kiln_select(g, kiln_binary_op(g, KILN_OP_LE, n, zero), zero, adj);
    }
    if (NEED(0))
        gin[0] = transpose_to(g, adj, w, &win, x->shape);
    if (NEED(1))
        gin[1] = kiln_conv_op(g, KILN_OP_CONV_WGRAD, x, adj, &win, "grad");
    if (NEED(2))
        gin[2] = channel_sum(g, adj);
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
