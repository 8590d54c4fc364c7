/* Builders of the convolutions (PyTorch's conv1d, conv2d and
   conv_transpose2d): the window from kiln_conv_params, the bias as a
   broadcast add over the channel dim. */
#include <limits.h>

#include "graph/builders.h"
#include "graph/conv.h"

kiln_node *kiln_conv_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                        const kiln_window *win, const char *fn)
{
    kiln_node *in[2] = {a, b};
    kiln_node p = {.op = op, .n_in = 2, .in = in};
    p.at.win = *win;
    return kiln_node_build(g, fn, &p);
}

kiln_node *kiln_conv_fused(kiln_graph *g, kiln_node *x, kiln_node *w,
                           kiln_node *bias, const kiln_window *win,
                           const char *fn)
{
    kiln_node *in[3] = {x, w, bias};
    kiln_node p = {.op = KILN_OP_CONV, .n_in = bias ? 3 : 2, .in = in};
    p.at.win = *win;
    return kiln_node_build(g, fn, &p);
}

kiln_window kiln_conv_window_to(const kiln_window *win, kiln_shape in,
                                kiln_shape out)
{
    kiln_window w = *win;
    for (int i = 0; i < w.nd; i++) {
        int64_t used = (out.d[2 + i] - 1) * w.stride[i] - w.pad_lo[i] -
                       w.pad_hi[i] +
                       (int64_t)w.dilation[i] * (w.kernel[i] - 1) + 1;
        w.out_pad[i] = (int)(in.d[2 + i] - used);
    }
    return w;
}

/* The window of a convolution of nd spatial dims with weight w from p
   (NULL: defaults); 0 with the graph's error when a setting is refused. */
static int conv_window(kiln_graph *g, const char *fn, const kiln_conv_params *p,
                       int nd, kiln_shape w, int transpose, kiln_window *win)
{
    kiln_conv_params d = {0};
    if (!p)
        p = &d;
    *win = (kiln_window){.nd = nd, .groups = p->groups ? p->groups : 1};
    if (p->groups < 0 || (p->flags & ~(KILN_PAD_SAME | KILN_CONV_RELU)) ||
        (transpose && (p->flags & KILN_PAD_SAME))) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: groups %d or flags 0x%x refused",
                        fn, p->groups, p->flags);
        return 0;
    }
    for (int i = 0; i < nd; i++) {
        int s = p->stride[i], dil = p->dilation[i], pad = p->padding[i];
        if (s < 0 || dil < 0 || pad < 0 || p->output_padding[i] < 0 ||
            (!transpose && p->output_padding[i])) {
            kiln_graph_fail(g, KILN_ERR_ARG,
                            "%s: dim %d: stride %d, dilation %d, padding %d, "
                            "output padding %d refused",
                            fn, i, s, dil, pad, p->output_padding[i]);
            return 0;
        }
        win->stride[i] = s ? s : 1;
        win->dilation[i] = dil ? dil : 1;
        /* a kernel beyond int fits no input: clamped, the shape rule
           then names the weight */
        win->kernel[i] =
            w.ndim == nd + 2
                ? (int)(w.d[2 + i] < INT_MAX ? w.d[2 + i] : INT_MAX)
                : 1;
        win->out_pad[i] = p->output_padding[i];
        win->pad_lo[i] = win->pad_hi[i] = pad;
        if (p->flags & KILN_PAD_SAME) {
            if (win->stride[i] != 1) {
                kiln_graph_fail(g, KILN_ERR_ARG,
                                "%s: 'same' padding needs stride 1 (dim %d "
                                "has %d)",
                                fn, i, win->stride[i]);
                return 0;
            }
            int64_t total = (int64_t)win->dilation[i] * (win->kernel[i] - 1);
            if (total > INT_MAX) {
                kiln_graph_fail(g, KILN_ERR_ARG,
                                "%s: 'same' padding of dim %d: dilation %d "
                                "times kernel %d - 1 is too large",
                                fn, i, win->dilation[i], win->kernel[i]);
                return 0;
            }
            win->pad_lo[i] = (int)(total / 2);
            win->pad_hi[i] = (int)(total - total / 2);
        }
    }
    return 1;
}

/* y + bias over dim 1 (bias [C] for y [N, C, ...]), checked. */
static kiln_node *add_bias(kiln_graph *g, const char *fn, kiln_node *y,
                           kiln_node *bias)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!bias || y->op == KILN_OP_ERROR)
        return y;
    if (bias->shape.ndim != 1 || bias->shape.d[0] != y->shape.d[1])
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "%s: bias %s for output %s: want [%lld]", fn,
            S(bias->shape, b1), S(y->shape, b2), (long long)y->shape.d[1]);
    kiln_shape s = {.ndim = y->shape.ndim};
    for (int i = 0; i < s.ndim; i++)
        s.d[i] = i == 1 ? y->shape.d[1] : 1;
    return kiln_add(g, y, kiln_reshape(g, bias, s));
}

static kiln_node *conv_build(kiln_graph *g, const char *fn, kiln_op op, int nd,
                             kiln_node *x, kiln_node *w, kiln_node *bias,
                             const kiln_conv_params *p)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !kiln_graph_check(g, fn, w) ||
        (bias && (!kiln_graph_check(g, fn, bias) || !check_f32(g, fn, bias))))
        return &g->poison;
    kiln_window win;
    if (!conv_window(g, fn, p, nd, w->shape, op == KILN_OP_CONV_TRANSPOSE,
                     &win))
        return &g->poison;
    int relu = p && (p->flags & KILN_CONV_RELU);
    if (op == KILN_OP_CONV) { /* bias and relu fused into the node */
        win.flags |= relu ? KILN_WINDOW_RELU : 0;
        return kiln_conv_fused(g, x, w, bias, &win, fn);
    }
    kiln_node *y = add_bias(g, fn, kiln_conv_op(g, op, x, w, &win, fn), bias);
    return relu ? kiln_relu(g, y) : y;
}

kiln_node *kiln_conv2d(kiln_graph *g, kiln_node *x, kiln_node *w,
                       kiln_node *bias, const kiln_conv_params *p)
{
    return conv_build(g, "kiln_conv2d", KILN_OP_CONV, 2, x, w, bias, p);
}

kiln_node *kiln_conv1d(kiln_graph *g, kiln_node *x, kiln_node *w,
                       kiln_node *bias, const kiln_conv_params *p)
{
    return conv_build(g, "kiln_conv1d", KILN_OP_CONV, 1, x, w, bias, p);
}

kiln_node *kiln_conv_transpose2d(kiln_graph *g, kiln_node *x, kiln_node *w,
                                 kiln_node *bias, const kiln_conv_params *p)
{
    return conv_build(g, "kiln_conv_transpose2d", KILN_OP_CONV_TRANSPOSE, 2, x,
                      w, bias, p);
}
