/* Convolution nodes for the builders, the gradient rules and the passes
   (graph/conv.c). */
#ifndef KILN_GRAPH_CONV_H
#define KILN_GRAPH_CONV_H

#include "graph/graph.h"

/* A node of op (KILN_OP_CONV, _CONV_TRANSPOSE or _CONV_WGRAD) on a and b
   with window win, checked by its shape rule; errors name fn (NULL: the
   op). */
kiln_node *kiln_conv_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                        const kiln_window *win, const char *fn);
/* conv(x, w) plus bias (NULL: none), then relu when win's flags say so,
   as one node; errors as kiln_conv_op. */
kiln_node *kiln_conv_fused(kiln_graph *g, kiln_node *x, kiln_node *w,
                           kiln_node *bias, const kiln_window *win,
                           const char *fn);
/* win with the output padding that makes conv_transpose of a convolution's
   output gradient (spatial dims out) give input spatial dims in: the
   positions past the last window the stride skipped. */
kiln_window kiln_conv_window_to(const kiln_window *win, kiln_shape in,
                                kiln_shape out);

#endif
