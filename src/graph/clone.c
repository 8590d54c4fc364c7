/* Node cloning: the copy every pass and the compiler start from. */
#include <string.h>

#include "graph/clone.h"
#include "graph/fused_program.h"

kiln_node *kiln_node_clone(kiln_graph *g, const kiln_node *old,
                           kiln_node *const *in)
{
    kiln_node *c =
        kiln_node_make(g, old->op, old->dtype, old->shape, in, old->n_in);
    if (c->op == KILN_OP_ERROR)
        return c;
    c->at = old->at;
    c->name = kiln_graph_strdup(g, old->name);
    c->debug = old->debug;
    c->debug_msg = kiln_graph_strdup(g, old->debug_msg);
    size_t bytes = 0;
    if (old->op == KILN_OP_CONSTANT)
        bytes =
            (size_t)kiln_shape_numel(old->shape) * kiln_dtype_size(old->dtype);
    else if (old->op == KILN_OP_FUSED)
        bytes = sizeof(kiln_fused_program);
    if (bytes) {
        void *d = kiln_graph_alloc(g, bytes);
        if (!d)
            return kiln_graph_fail(g, KILN_ERR_MEMORY,
                                   "kiln_compile: out of memory");
        memcpy(d, old->at.data, bytes);
        c->at.data = d;
    }
    return c;
}
