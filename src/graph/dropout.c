/* Builders of the random ops: dropout and dropout2d.  The mask is not
   host-side state: each node draws from the counter-based generator at the
   run's rng_key (the session's seed and step) and its own stream, so a
   compiled function draws afresh at every run and the same seed and step
   give the same mask whatever the thread count. */
#include "graph/builders.h"

static kiln_node *dropout(kiln_graph *g, const char *fn, kiln_node *x, float p,
                          int per_channel)
{
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    if (!(p >= 0.0f && p < 1.0f))
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: p = %g is outside [0, 1)",
                               fn, (double)p);
    if (p == 0.0f)
        return x;
    kiln_node *in[3] = {
        x, kiln_node_make(g, KILN_OP_RNG_KEY, KILN_I32, KILN_SHAPE(4), NULL, 0),
        kiln_mode(g)};
    kiln_node proto = {.op = KILN_OP_DROPOUT, .n_in = 3, .in = in};
    proto.at.random = (kiln_random_attr){p, g->n_nodes, per_channel};
    return kiln_node_build(g, fn, &proto);
}

kiln_node *kiln_dropout(kiln_graph *g, kiln_node *x, float p)
{
    return dropout(g, "kiln_dropout", x, p, 0);
}

kiln_node *kiln_dropout2d(kiln_graph *g, kiln_node *x, float p)
{
    return dropout(g, "kiln_dropout2d", x, p, 1);
}
