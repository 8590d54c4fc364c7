/* The named-axes front end (Nervana graph): a kiln_ax is a node plus one
   axis per dimension, and remembers the kiln_ax operands it was built from
   so that variables() can walk the front end's own op graph. */
#ifndef KILN_AXES_AXES_H
#define KILN_AXES_AXES_H

#include "graph/graph.h"

struct kiln_ax {
    kiln_node *node; /* dims in the order of axes */
    kiln_axes axes;
    int is_variable;
    int n_args;
    kiln_ax **args;
};

/* A new kiln_ax over node (poisoned when node is), recording its operands. */
kiln_ax *kiln_ax_make(kiln_graph *g, kiln_node *node, kiln_axes axes,
                      kiln_ax *const *args, int n_args);
/* The poisoned kiln_ax of g (NULL only when out of memory). */
kiln_ax *kiln_ax_poison(kiln_graph *g);
/* 1 when t is a usable operand of g; otherwise records why (naming fn). */
int kiln_ax_check(kiln_graph *g, const char *fn, const kiln_ax *t);
/* Index of a in axes, or -1. */
int kiln_axes_find(const kiln_axes *axes, kiln_axis a);
/* x's node laid out as the axes out (a superset of x's axes): permuted into
   out's order, with size-1 dims where x lacks an axis, ready to broadcast. */
kiln_node *kiln_ax_align(kiln_graph *g, const kiln_ax *x, const kiln_axes *out);

#endif
