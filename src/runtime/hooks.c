/* Scheduling of hooked nodes (kiln_node.hook): the optimiser's graph form
   builds them after the whole backward pass, but a data-parallel step wants
   each gradient's transfer to start as soon as backward computed it, so
   that it overlaps the rest of backward. */
#include <stdlib.h>
#include <string.h>

#include "runtime/variant.h"

/* Scheduled right after their last input: hooked nodes, and one-value
   nodes computed from one-value nodes only (a step's scale factors, such
   as a shared-weights update's -lr * share), so that they do not sit
   between the updates that run together (runtime/variant.c). */
static int anchored(const kiln_node *n)
{
    if (n->hook)
        return 1;
    if (n->debug || n->n_in == 0 || n->op == KILN_OP_ASSIGN ||
        n->op == KILN_OP_DOALL || kiln_shape_numel(n->shape) != 1)
        return 0;
    for (int k = 0; k < n->n_in; k++)
        if (kiln_shape_numel(n->in[k]->shape) != 1)
            return 0;
    return 1;
}

/* The anchored nodes anchored at x (their last input), in id order, each
   followed by those anchored at it, appended to order. */
static void emit_anchored(kiln_graph *g, const int *anchor, int x, int *order,
                          int *n)
{
    for (int id = x + 1; id < g->n_nodes; id++)
        if (anchored(g->nodes[id]) && anchor[id] == x) {
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
        if (!anchored(g->nodes[id])) {
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

/* ------------------------------------------------------------ storage */

/* The nodes below hooked node h whose buffer h's is: h, then down
   through the inputs it (or a view that runs no kernel) writes over, while
   each such input is read by nothing else, so that no other step sees its
   value change while the sync works on it.  Their count into chain, root
   last; 0 when the root is not a computed buffer of the block. */
static int hook_chain(const kiln_variant *v, const int *readers,
                      const kiln_node *h, int *chain)
{
    const kiln_graph *g = v->u.g;
    int n = 0, x = h->id;
    chain[n++] = x;
    while (v->inplace[x] >= 0 && (x == h->id || kiln_variant_noop(v, x))) {
        x = v->inplace[x];
        if (readers[x] != 1)
            return 0;
        chain[n++] = x;
    }
    const kiln_node *root = g->nodes[x];
    if (kiln_op_table[root->op].kind == KILN_KIND_LEAF || v->storage[x] >= 0)
        return 0;
    return n;
}

/* Adds the views that run no kernel over a node of the group (marked) to
   it; 0 when one of them is an assign (copied by address after the run). */
static int add_views(const kiln_variant *v, int from, unsigned char *mark)
{
    const kiln_graph *g = v->u.g;
    for (int id = from + 1; id < g->n_nodes; id++)
        if (v->inplace[id] >= 0 && mark[v->inplace[id]] &&
            kiln_variant_noop(v, id)) {
            if (g->nodes[id]->op == KILN_OP_ASSIGN)
                return 0;
            mark[id] = 1;
        }
    return 1;
}

/* Records the group of hooked node h (marked) as v's external values. */
static void record_group(kiln_variant *v, const kiln_node *h,
                         const unsigned char *mark, const int *step_of)
{
    for (int id = 0; id < v->u.g->n_nodes; id++)
        if (mark[id])
            v->ext[v->n_ext++] =
                (kiln_external){id, h->hook, step_of[id], v->buf[id]};
}

static void count_readers(const kiln_variant *v, int *readers)
{
    const kiln_graph *g = v->u.g;
    for (int id = 0; id < g->n_nodes; id++)
        for (int k = 0; k < g->nodes[id]->n_in; k++)
            readers[g->nodes[id]->in[k]->id]++;
    for (int i = 0; i < v->u.n_out; i++)
        readers[v->u.outputs[i]->id]++;
}

kiln_status kiln_hooks_find_storage(kiln_variant *v)
{
    const kiln_graph *g = v->u.g;
    int n = g->n_nodes;
    if (!v->hooked)
        return KILN_OK;
    int *readers = calloc(3 * ((size_t)n + 1), sizeof *readers);
    unsigned char *mark = calloc((size_t)n + 1, 1);
    v->ext = calloc((size_t)n + 1, sizeof *v->ext);
    if (!readers || !mark || !v->ext) {
        free(readers);
        free(mark);
        return KILN_ERR_MEMORY;
    }
    int *chain = readers + n + 1, *step_of = chain + n + 1;
    count_readers(v, readers);
    for (int id = 0; id < n; id++)
        step_of[id] = -1;
    for (int i = 0; i < v->n_steps; i++)
        step_of[v->steps[i].n->id] = i;
    for (int id = 0; id < n; id++) {
        const kiln_node *h = g->nodes[id];
        int len = h->hook ? hook_chain(v, readers, h, chain) : 0;
        if (!len)
            continue;
        memset(mark, 0, (size_t)n);
        for (int k = 0; k < len; k++)
            mark[chain[k]] = 1;
        if (add_views(v, id, mark))
            record_group(v, h, mark, step_of);
    }
    free(readers);
    free(mark);
    return KILN_OK;
}

/* Points the group's buffers (and its steps' outputs) at p. */
static void point_at(kiln_variant *v, const kiln_external *e, void *p)
{
    v->buf[e->id] = p;
    if (e->step >= 0)
        v->steps[e->step].out = p;
}

void kiln_hooks_bind(kiln_variant *v, const kiln_grad_sync *sync)
{
    for (int i = 0; sync && sync->storage && i < v->n_ext; i++) {
        const kiln_external *e = &v->ext[i];
        const kiln_node *n = v->u.g->nodes[e->id];
        void *p = sync->storage(sync->ctx, e->hook,
                                (size_t)kiln_shape_numel(n->shape) *
                                    kiln_dtype_size(n->dtype));
        if (p)
            point_at(v, e, p);
    }
}

void kiln_hooks_unbind(kiln_variant *v)
{
    for (int i = 0; i < v->n_ext; i++)
        point_at(v, &v->ext[i], v->ext[i].block);
}
