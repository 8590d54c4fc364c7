/* Node cloning, for passes and the compiler, which build new graphs from
   old ones node by node. */
#ifndef KILN_GRAPH_CLONE_H
#define KILN_GRAPH_CLONE_H

#include "graph/graph.h"

/* Copies old into g with inputs in: attributes, name, debug mark and a
   constant's data (copied into g's arena). */
kiln_node *kiln_node_clone(kiln_graph *g, const kiln_node *old,
                           kiln_node *const *in);

#endif
