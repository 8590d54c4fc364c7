/* Autodiff of a subgraph (PopXL's transforms.autodiff): the forward graph
   is copied into a scratch graph, differentiated there with one incoming
   gradient per output, and the gradient nodes are then copied into the
   gradient subgraph with every forward value they use turned into an input
   (an activation), so calling it never recomputes the forward pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/modules.h"

struct kiln_grad_info {
    kiln_subgraph *fwd, *bwd;
    kiln_node **required; /* forward inputs; bwd output k is the gradient of
                             required[k] */
    int n_req;
    kiln_node **act_fwd; /* forward node behind bwd input n_dy + k */
    int n_act, cap_act;
    int n_dy;
};

static int required_inputs(kiln_grad_info *gi, kiln_node *const *req, int n_req)
{
    kiln_subgraph *fwd = gi->fwd;
    kiln_graph *G = gi->bwd->g;
    int n = req ? n_req : fwd->n_in;
    gi->required = calloc((size_t)n + 1, sizeof *gi->required);
    if (!gi->required) {
        kiln_graph_fail(G, KILN_ERR_MEMORY, "kiln_autodiff: out of memory");
        return 0;
    }
    for (int i = 0; i < n; i++) {
        kiln_node *x = req ? req[i] : fwd->inputs[i];
        int found = 0;
        for (int k = 0; k < fwd->n_in && !found; k++)
            found = fwd->inputs[k] == x;
        if (!found) {
            char what[64];
            snprintf(what, sizeof what, "%s node",
                     x ? kiln_op_table[x->op].name : "");
            kiln_graph_fail(G, KILN_ERR_ARG,
                            "kiln_autodiff: grads_required[%d] is not a graph "
                            "input of '%s' (%s)",
                            i, fwd->name,
                            !x                   ? "NULL"
                            : x->graph != fwd->g ? "a node of another graph"
                                                 : what);
            return 0;
        }
        if (x->dtype == KILN_F32 || req)
            gi->required[gi->n_req++] = x;
    }
    if (gi->n_req == 0) { /* a gradient graph with no outputs is a mistake */
        kiln_graph_fail(G, KILN_ERR_ARG,
                        "kiln_autodiff: no gradient to compute: %s",
                        req ? "grads_required is empty (n_req 0)"
                            : "the graph has no f32 input");
        return 0;
    }
    return 1;
}

/* Copies fwd into T and returns the gradients there (in grads). */
static kiln_status differentiate(kiln_grad_info *gi, kiln_graph *T,
                                 kiln_node **fmap, kiln_node **dy,
                                 kiln_node **grads)
{
    kiln_subgraph *fwd = gi->fwd;
    for (int id = 0; id < fwd->g->n_nodes; id++) {
        kiln_node *n = fwd->g->nodes[id];
        fmap[id] = n->op == KILN_OP_INPUT
                       ? kiln_input(T, n->name, n->dtype, n->shape)
                       : kiln_clone_into(T, n, fmap);
    }
    for (int i = 0; i < fwd->n_out; i++) {
        kiln_node *y = fwd->outputs[i];
        char name[96];
        snprintf(name, sizeof name, "d%s", y->name ? y->name : "y");
        dy[i] = kiln_input(T, name, y->dtype, y->shape);
    }
    kiln_node **xs = calloc((size_t)gi->n_req + 1, sizeof *xs);
    if (!xs) {
        kiln_graph_fail(T, KILN_ERR_MEMORY, "kiln_autodiff: out of memory");
        return T->status;
    }
    for (int k = 0; k < gi->n_req; k++)
        xs[k] = fmap[gi->required[k]->id];
    kiln_node *y = fmap[fwd->outputs[0]->id], *delta = dy[0];
    if (fwd->n_out > 1) {
        /* several outputs: the gradient of sum_i <y_i, dy_i> */
        kiln_node *l = NULL;
        for (int i = 0; i < fwd->n_out; i++) {
            kiln_node *t =
                kiln_sum(T, kiln_mul(T, fmap[fwd->outputs[i]->id], dy[i]),
                         KILN_ALL_AXES, 0);
            l = l ? kiln_add(T, l, t) : t;
        }
        y = l;
        delta = NULL;
    }
    kiln_grads(T, y, delta, xs, gi->n_req, grads);
    free(xs);
    return T->status;
}

/* Copies what the gradients need from T into the gradient subgraph; forward
   values (nodes of T below n_fwd) become activation inputs. */
static void extract(kiln_grad_info *gi, kiln_graph *T, int n_fwd,
                    kiln_node **dy, kiln_node **grads)
{
    kiln_subgraph *bwd = gi->bwd;
    kiln_graph *G = bwd->g;
    unsigned char *live = calloc((size_t)T->n_nodes + 1, 1);
    kiln_node **map = calloc((size_t)T->n_nodes + 1, sizeof *map);
    if (!live || !map) {
        kiln_graph_fail(G, KILN_ERR_MEMORY, "kiln_autodiff: out of memory");
        goto done;
    }
    for (int k = 0; k < gi->n_req; k++)
        live[grads[k]->id] = 1;
    for (int id = T->n_nodes - 1; id >= n_fwd; id--)
        if (live[id])
            for (int k = 0; k < T->nodes[id]->n_in; k++)
                live[T->nodes[id]->in[k]->id] = 1;
    for (int i = 0; i < gi->n_dy; i++)
        map[dy[i]->id] =
            kiln_subgraph_input(bwd, dy[i]->name, dy[i]->dtype, dy[i]->shape);
    for (int id = 0; id < T->n_nodes && G->status == KILN_OK; id++) {
        kiln_node *n = T->nodes[id];
        if (!live[id] || map[id])
            continue;
        int leaf = n->op == KILN_OP_CONSTANT || n->op == KILN_OP_VARIABLE;
        if (id < n_fwd && !leaf) {
            char name[96];
            snprintf(name, sizeof name, "%s", n->name ? n->name : "");
            if (!n->name)
                snprintf(name, sizeof name, "act%d", gi->n_act);
            map[id] = kiln_subgraph_input(bwd, name, n->dtype, n->shape);
            if (!kiln_push_node(&gi->act_fwd, &gi->n_act, &gi->cap_act,
                                gi->fwd->g->nodes[id]))
                kiln_graph_fail(G, KILN_ERR_MEMORY,
                                "kiln_autodiff: out of memory");
        } else {
            map[id] = kiln_clone_into(G, n, map);
        }
    }
    for (int k = 0; k < gi->n_req && G->status == KILN_OK; k++)
        kiln_subgraph_output(bwd, map[grads[k]->id]);
done:
    free(live);
    free(map);
}

kiln_grad_info *kiln_autodiff(kiln_subgraph *fwd,
                              kiln_node *const *grads_required, int n_req)
{
    kiln_grad_info *gi = calloc(1, sizeof *gi);
    char name[160];
    snprintf(name, sizeof name, "%s.grad", fwd ? fwd->name : "?");
    if (!gi || !(gi->bwd = kiln_subgraph_new(name))) {
        free(gi);
        return NULL;
    }
    gi->fwd = fwd;
    kiln_graph *G = gi->bwd->g;
    if (!fwd || fwd->g->status != KILN_OK || fwd->n_out < 1 || n_req < 0) {
        kiln_graph_fail(G, KILN_ERR_ARG, "kiln_autodiff: %s",
                        !fwd                        ? "graph is NULL"
                        : fwd->g->status != KILN_OK ? fwd->g->err
                        : n_req < 0                 ? "negative n_req"
                                    : "the graph has no outputs");
        return gi;
    }
    if (!required_inputs(gi, grads_required, n_req))
        return gi;
    gi->n_dy = fwd->n_out;
    kiln_graph *T = kiln_graph_new();
    kiln_node **fmap = calloc((size_t)fwd->g->n_nodes + 1, sizeof *fmap);
    kiln_node **dy = calloc((size_t)fwd->n_out, sizeof *dy);
    kiln_node **grads = calloc((size_t)gi->n_req + 1, sizeof *grads);
    if (!T || !fmap || !dy || !grads)
        kiln_graph_fail(G, KILN_ERR_MEMORY, "kiln_autodiff: out of memory");
    else if (differentiate(gi, T, fmap, dy, grads) != KILN_OK)
        kiln_graph_fail(G, T->status, "kiln_autodiff of '%s': %s", fwd->name,
                        T->err);
    else
        extract(gi, T, fwd->g->n_nodes, dy, grads);
    kiln_graph_free(T);
    free(fmap);
    free(dy);
    free(grads);
    return gi;
}

void kiln_grad_info_free(kiln_grad_info *gi)
{
    if (!gi)
        return;
    kiln_subgraph_free(gi->bwd);
    free(gi->required);
    free(gi->act_fwd);
    free(gi);
}

kiln_subgraph *kiln_grad_info_graph(const kiln_grad_info *gi)
{
    return gi ? gi->bwd : NULL;
}

int kiln_grad_info_inputs_dict(const kiln_grad_info *gi,
                               const kiln_call_info *fwd_ci, kiln_binding *out,
                               int max)
{
    if (!gi || !fwd_ci || fwd_ci->sg != gi->fwd || !fwd_ci->map)
        return -1;
    for (int k = 0; k < gi->n_act && k < max && out; k++)
        out[k] = (kiln_binding){gi->bwd->inputs[gi->n_dy + k],
                                fwd_ci->map[gi->act_fwd[k]->id]};
    return gi->n_act;
}

kiln_node *kiln_grad_info_parent_grad(const kiln_grad_info *gi,
                                      const kiln_call_info *fwd_ci,
                                      const kiln_call_info *grad_ci,
                                      kiln_node *x)
{
    if (!fwd_ci)
        return grad_ci ? &grad_ci->parent->poison : NULL;
    kiln_graph *parent = fwd_ci->parent;
    const char *fn = "kiln_grad_info_parent_grad";
    if (parent->status != KILN_OK)
        return &parent->poison;
    if (!gi || !grad_ci || fwd_ci->sg != gi->fwd || grad_ci->sg != gi->bwd ||
        grad_ci->parent != parent)
        return kiln_graph_fail(
            parent, KILN_ERR_ARG,
            "%s: the call infos are not calls of this autodiff's "
            "forward and gradient graphs in one parent",
            fn);
    for (int k = 0; k < gi->n_req; k++)
        if (fwd_ci->map[gi->required[k]->id] == x)
            return grad_ci->outputs[k];
    return kiln_graph_fail(
        parent, KILN_ERR_NOTFOUND,
        "%s: %%%d is not bound to a forward input whose gradient "
        "was required",
        fn, x ? x->id : -1);
}
