#include "grad/grad.h"

#include <stdlib.h>

static kiln_node *accumulate(kiln_graph *g, kiln_node *acc, kiln_node *c)
{
    return acc ? kiln_binary_op(g, KILN_OP_ADD, acc, c) : c;
}

/* Marks the nodes that depend on a wrt node: only their adjoints are
   needed, which keeps gradient graphs free of dead branches. */
static unsigned char *mark_needed(kiln_graph *g, kiln_node *y,
                                  kiln_node *const *wrt, int n_wrt)
{
    unsigned char *need = calloc((size_t)y->id + 1, 1);
    if (!need)
        return NULL;
    for (int i = 0; i < n_wrt; i++)
        if (wrt[i]->id <= y->id)
            need[wrt[i]->id] = 1;
    for (int id = 0; id <= y->id; id++) {
        kiln_node *n = g->nodes[id];
        if (!wrt && n->dtype == KILN_F32)
            need[id] = 1;
        if (n->op == KILN_OP_STOPGRAD || n->dtype != KILN_F32)
            continue;
        for (int k = 0; k < n->n_in && !need[id]; k++)
            need[id] = need[n->in[k]->id];
    }
    return need;
}

/* kiln_build_adjoints over the nodes above floor only. */
static kiln_status build_adjoints(kiln_graph *g, kiln_node *y, kiln_node *delta,
                                  kiln_node *const *wrt, int n_wrt, int floor,
                                  kiln_node **adj_out);

kiln_status kiln_build_adjoints(kiln_graph *g, kiln_node *y, kiln_node *delta,
                                kiln_node *const *wrt, int n_wrt,
                                kiln_node **adj_out)
{
    return build_adjoints(g, y, delta, wrt, n_wrt, -1, adj_out);
}

kiln_status kiln_build_adjoints_above(kiln_graph *g, kiln_node *y,
                                      kiln_node *delta, int floor,
                                      kiln_node **adj_out)
{
    return build_adjoints(g, y, delta, NULL, 0, floor, adj_out);
}

static kiln_status build_adjoints(kiln_graph *g, kiln_node *y, kiln_node *delta,
                                  kiln_node *const *wrt, int n_wrt, int floor,
                                  kiln_node **adj_out)
{
    int top = y->id;
    kiln_node **adj = calloc((size_t)top + 1, sizeof *adj);
    unsigned char *need = mark_needed(g, y, wrt, n_wrt);
    if (!adj || !need) {
        free(adj);
        free(need);
        kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_grad: out of memory");
        return g->status;
    }
    adj[top] = delta ? delta : kiln_splat(g, y->shape, 1.0f);
    for (int id = top; id > floor && g->status == KILN_OK; id--) {
        kiln_node *n = g->nodes[id];
        kiln_grad_rule rule = kiln_grad_rules[n->op];
        if (!adj[id] || !need[id] || !rule)
            continue;
        unsigned mask = 0;
        for (int k = 0; k < n->n_in; k++)
            if (need[n->in[k]->id])
                mask |= 1u << k;
        if (!mask)
            continue;
        kiln_node *stack_gin[4] = {0};
        kiln_node **gin = stack_gin;
        if (n->n_in > 4 && !(gin = calloc((size_t)n->n_in, sizeof *gin))) {
            kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_grad: out of memory");
            break;
        }
        rule(g, n, adj[id], mask, gin);
        for (int k = 0; k < n->n_in; k++) {
            kiln_node *x = n->in[k];
            if (!gin[k] || !(mask & (1u << k)))
                continue;
            kiln_node *c = kiln_reduce_to_shape(g, gin[k], x->shape);
            adj[x->id] = accumulate(g, adj[x->id], c);
        }
        if (gin != stack_gin)
            free(gin);
    }
    if (adj_out)
        for (int id = 0; id <= top; id++)
            adj_out[id] = need[id] ? adj[id] : NULL;
    free(adj);
    free(need);
    return g->status;
}

static int check_grad_args(kiln_graph *g, const char *fn, kiln_node *y,
                           kiln_node *delta)
{
    char b1[96], b2[96];
    if (!kiln_graph_check(g, fn, y))
        return 0;
    if (y->dtype != KILN_F32) {
        kiln_graph_fail(g, KILN_ERR_DTYPE, "%s: target %%%d has dtype %s", fn,
                        y->id, kiln_dtype_name(y->dtype));
        return 0;
    }
    if (!delta) {
        if (kiln_shape_numel(y->shape) != 1) {
            kiln_graph_fail(g, KILN_ERR_SHAPE,
                            "%s: target %%%d has shape %s; a non-scalar target "
                            "needs a delta",
                            fn, y->id, kiln_shape_str(y->shape, b1, sizeof b1));
            return 0;
        }
        return 1;
    }
    if (!kiln_graph_check(g, fn, delta))
        return 0;
    if (!kiln_shape_equal(delta->shape, y->shape) || delta->dtype != KILN_F32) {
        kiln_graph_fail(g, KILN_ERR_SHAPE,
                        "%s: delta %s%s does not match target %s", fn,
                        kiln_dtype_name(delta->dtype),
                        kiln_shape_str(delta->shape, b1, sizeof b1),
                        kiln_shape_str(y->shape, b2, sizeof b2));
        return 0;
    }
    return 1;
}

/* kiln_grads, with fn naming the public function in messages. */
static kiln_status grads(kiln_graph *g, const char *fn, kiln_node *y,
                         kiln_node *delta, kiln_node *const *xs, int n,
                         kiln_node **out)
{
    if (!out || (!xs && n > 0) || n < 0) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: xs or out is NULL", fn);
        return g->status;
    }
    for (int i = 0; i < n; i++)
        out[i] = &g->poison;
    if (!check_grad_args(g, fn, y, delta))
        return g->status;
    for (int i = 0; i < n; i++) {
        if (!kiln_graph_check(g, fn, xs[i]))
            return g->status;
        if (xs[i]->dtype != KILN_F32) {
            kiln_graph_fail(g, KILN_ERR_DTYPE,
                            "%s: %%%d has dtype %s (no gradient)", fn,
                            xs[i]->id, kiln_dtype_name(xs[i]->dtype));
            return g->status;
        }
    }
    kiln_node **adj = calloc((size_t)y->id + 1, sizeof *adj);
    if (!adj) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        return g->status;
    }
    if (kiln_build_adjoints(g, y, delta, xs, n, adj) == KILN_OK) {
        for (int i = 0; i < n; i++) {
            kiln_node *a = xs[i]->id <= y->id ? adj[xs[i]->id] : NULL;
            out[i] = a ? a : kiln_splat(g, xs[i]->shape, 0.0f);
        }
    }
    free(adj);
    if (g->status != KILN_OK)
        for (int i = 0; i < n; i++)
            out[i] = &g->poison;
    return g->status;
}

kiln_status kiln_grads(kiln_graph *g, kiln_node *y, kiln_node *delta,
                       kiln_node *const *xs, int n, kiln_node **out)
{
    if (!g)
        return kiln_null_arg("kiln_grads", "graph");
    return grads(g, "kiln_grads", y, delta, xs, n, out);
}

kiln_node *kiln_grad(kiln_graph *g, kiln_node *y, kiln_node *x)
{
    if (!g)
        return NULL;
    kiln_node *out = &g->poison;
    if (!x) {
        kiln_graph_fail(g, KILN_ERR_ARG, "kiln_grad: x is NULL");
        return out;
    }
    grads(g, "kiln_grad", y, NULL, &x, 1, &out);
    return out;
}

kiln_node *kiln_backprop_node(kiln_graph *g, kiln_node *y, kiln_node *delta,
                              kiln_node *x)
{
    if (!g)
        return NULL;
    kiln_node *out = &g->poison;
    if (!x) {
        kiln_graph_fail(g, KILN_ERR_ARG, "kiln_backprop_node: x is NULL");
        return out;
    }
    grads(g, "kiln_backprop_node", y, delta, &x, 1, &out);
    return out;
}
