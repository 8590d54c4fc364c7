/* Reverse-mode autodiff as graph transformation. */
#ifndef KILN_GRAD_GRAD_H
#define KILN_GRAD_GRAD_H

#include "graph/graph.h"

typedef void (*kiln_grad_rule)(kiln_graph *g, kiln_node *n, kiln_node *adj,
                               unsigned need, kiln_node **gin);

/* NULL for ops with no gradient (comparisons, argmax, leaves...). */
extern const kiln_grad_rule kiln_grad_rules[KILN_OP_COUNT];

/* Builds adjoints of every node y depends on that depends on one of the
   n_wrt nodes (all nodes when wrt is NULL); adj_out (sized for the node count
   before the call, may be NULL) receives them by node id. */
kiln_status kiln_build_adjoints(kiln_graph *g, kiln_node *y, kiln_node *delta,
                                kiln_node *const *wrt, int n_wrt,
                                kiln_node **adj_out);

/* The adjoints that the nodes above floor (by id) alone give, from delta
   at y: rules run for those nodes only, and the adjoints they give nodes
   at or below floor are left there unpropagated.  Gradient rules use it to
   differentiate a decomposition built on their node's inputs. */
kiln_status kiln_build_adjoints_above(kiln_graph *g, kiln_node *y,
                                      kiln_node *delta, int floor,
                                      kiln_node **adj_out);

/* The adjoints of loss (a scalar) for the n_wrt nodes wrt, in ascending
   id order, as *out: built on the first request of the graph's generation
   and kept in g, so every later request for the same loss and nodes --
   from any session, on any thread -- gets the same nodes and the graph
   does not grow.  Takes g's lock itself: callers must not hold it.  g's
   status (and error) when building fails. */
kiln_status kiln_grad_memo_get(kiln_graph *g, kiln_node *loss,
                               kiln_node *const *wrt, int n_wrt,
                               kiln_grad_memo *out);

#endif
