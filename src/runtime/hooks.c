/* Scheduling of hooked nodes (kiln_node.hook): the optimiser's graph form
   builds them after the whole backward pass, but a data-parallel step wants
   each gradient's transfer to start as soon as backward computed it, so
   that it overlaps the rest of backward. */
#include <stdlib.h>

#include "runtime/variant.h"

/* The hooked nodes anchored at x (their last input), in id order, each
   followed by those anchored at it, appended to order. */
static void emit_anchored(kiln_graph *g, const int *anchor, int x, int *order,
                          int *n)
{
    for (int id = x + 1; id < g->n_nodes; id++)
        if (g->nodes[id]->hook && anchor[id] == x) {
            order[(*n)++] = id;
            emit_anchored(g, anchor, id, order, n);
        }
}

kiln_status kiln_schedule_hooks(kiln_graph *g)
{
    int any = 0;
    for (int id = 0; id < g->n_nodes && !any; id++)
        any = g->nodes[id]->hook != 0;
    if (!any)
        return KILN_OK;
    int *anchor = malloc(2 * ((size_t)g->n_nodes + 1) * sizeof *anchor);
    kiln_node **nodes = malloc(((size_t)g->n_nodes + 1) * sizeof *nodes);
    if (!anchor || !nodes) {
        free(anchor);
        free(nodes);
        return KILN_ERR_MEMORY;
    }
    int *order = anchor + g->n_nodes + 1, n = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const kiln_node *x = g->nodes[id];
        anchor[id] = -1;
        for (int k = 0; k < x->n_in; k++)
            if (x->in[k]->id > anchor[id])
                anchor[id] = x->in[k]->id;
    }
    for (int id = 0; id < g->n_nodes; id++)
        if (!g->nodes[id]->hook) {
            order[n++] = id;
            emit_anchored(g, anchor, id, order, &n);
        } else if (anchor[id] < 0) { /* no inputs: stays where it is */
            order[n++] = id;
            emit_anchored(g, anchor, id, order, &n);
        }
    for (int i = 0; i < n; i++)
        nodes[i] = g->nodes[order[i]];
    for (int i = 0; i < n; i++) {
        g->nodes[i] = nodes[i];
        g->nodes[i]->id = i;
    }
    free(anchor);
    free(nodes);
    return KILN_OK;
}
