/* The indexing ops' builders for gradient rules and composites
   (graph/index.c) and their symbolic axes. */
#ifndef KILN_GRAPH_INDEX_H
#define KILN_GRAPH_INDEX_H

#include "graph/graph.h"

/* op (index_select, gather: src NULL; index_add, scatter_add) along axis
   (non-negative), without the public checks; errors name fn. */
kiln_node *kiln_index_op(kiln_graph *g, kiln_op op, kiln_node *x, int axis,
                         kiln_node *idx, kiln_node *src, const char *fn);

/* cumsum along a non-negative axis, without the public checks. */
kiln_node *kiln_cumsum_op(kiln_graph *g, kiln_node *x, int axis);

/* The symbolic axes of n when its op is one of the indexing block's whose
   result does not keep its first input's axes (*sym set, returns 1);
   else 0. */
int kiln_index_sym(const kiln_node *n, unsigned *sym);

#endif
