/* The PopXL front end: subgraphs called by inlining, autodiff of a
   subgraph into a gradient subgraph, and programs with host streams. */
#ifndef KILN_MODULES_MODULES_H
#define KILN_MODULES_MODULES_H

#include "graph/graph.h"

struct kiln_subgraph {
    kiln_graph *g;
    char *name;
    kiln_node **inputs, **outputs;
    int n_in, cap_in, n_out, cap_out;
};

/* Allocated in the parent graph's arena. */
struct kiln_call_info {
    kiln_subgraph *sg;
    kiln_graph *parent;
    int n_nodes;     /* nodes of sg when called */
    kiln_node **map; /* sg node id -> its copy (or bound tensor) in parent */
    kiln_node **outputs;
    int n_out;
};

/* Copies node n of another graph into g, with inputs through map:
   variables by name (kiln_variable), constants with their data, other ops
   as they are.  Poisoned node with g's error on failure. */
kiln_node *kiln_clone_into(kiln_graph *g, const kiln_node *n,
                           kiln_node *const *map);
/* Appends x to a growing array; 0 when out of memory. */
int kiln_push_node(kiln_node ***arr, int *n, int *cap, kiln_node *x);

#endif
