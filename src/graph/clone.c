/* Node cloning: the copy every pass and the compiler start from. */
#include "graph/clone.h"

kiln_node *kiln_node_clone(kiln_graph *g, const kiln_node *old,
                           kiln_node *const *in)
{
    kiln_node *c =
        kiln_node_make(g, old->op, old->dtype, old->shape, in, old->n_in);
    if (c->op == KILN_OP_ERROR)
        return c;
    c->name = kiln_graph_strdup(g, old->name);
    c->debug = old->debug;
    c->hook = old->hook;
    c->debug_msg = kiln_graph_strdup(g, old->debug_msg);
    if (!kiln_attrs_copy(g, c, old))
        return kiln_graph_fail(g, KILN_ERR_MEMORY,
                               "kiln_compile: out of memory");
    return c;
}
