/* Dynamic execution (Marian): nodes run in creation order as they are
   built, values live in the graph's workspace arena, and clearing the graph
   releases them all at once while the session keeps the variables. */
#include <string.h>

#include "cpu/kernels.h"
#include "grad/grad.h"
#include "runtime/runtime.h"

static int node_ok(kiln_session *s, kiln_node *n, const char *fn)
{
    if (!n) {
        kiln_session_fail(s, KILN_ERR_ARG, "%s: node is NULL", fn);
        return 0;
    }
    if (n->op == KILN_OP_ERROR) {
        kiln_session_fail(s, KILN_ERR_ARG, "%s: node is poisoned: %s", fn,
                          n->graph->err);
        return 0;
    }
    return 1;
}

kiln_status kiln_feed(kiln_session *s, kiln_node *input, const kiln_tensor *t)
{
    char b1[96], b2[96];
    if (!s)
        return KILN_ERR_ARG;
    if (!node_ok(s, input, "kiln_feed"))
        return KILN_ERR_ARG;
    if (!t)
        return kiln_session_fail(s, KILN_ERR_ARG, "kiln_feed: tensor is NULL");
    if (input->op != KILN_OP_INPUT)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_feed: %%%d is a %s, not an input", input->id,
                                 kiln_op_table[input->op].name);
    if (t->dtype != input->dtype || !kiln_shape_equal(t->shape, input->shape))
        return kiln_session_fail(s, t->dtype != input->dtype ? KILN_ERR_DTYPE
                                                             : KILN_ERR_SHAPE,
                                 "kiln_feed: input '%s' wants %s%s, got %s%s",
                                 kiln_node_name(input),
                                 kiln_dtype_name(input->dtype),
                                 kiln_shape_str(input->shape, b1, sizeof b1),
                                 kiln_dtype_name(t->dtype),
                                 kiln_shape_str(t->shape, b2, sizeof b2));
    size_t bytes = kiln_tensor_bytes(t);
    void *v = kiln_arena_alloc(&input->graph->workspace, bytes);
    if (!v)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_feed: out of memory");
    memcpy(v, t->data, bytes);
    input->value = v;
    return KILN_OK;
}

static kiln_status compute(kiln_session *s, kiln_graph *g, kiln_node *n)
{
    void *in_stack[8];
    void **in = in_stack;
    switch (n->op) {
    case KILN_OP_VARIABLE: {
        kiln_var *v = kiln_session_bind(s, n);
        if (!v)
            return KILN_ERR_SHAPE;
        n->value = v->data;
        return KILN_OK;
    }
    case KILN_OP_CONSTANT:
        n->value = (void *)n->at.data;
        return KILN_OK;
    case KILN_OP_INPUT:
        if (!n->value)
            return kiln_session_fail(s, KILN_ERR_STATE,
                                     "kiln_forward: input '%s' (%%%d) was not fed",
                                     kiln_node_name(n), n->id);
        return KILN_OK;
    default:
        break;
    }
    size_t bytes = (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
    n->value = kiln_arena_alloc(&g->workspace, bytes);
    if (n->n_in > 8)
        in = kiln_arena_alloc(&g->workspace, (size_t)n->n_in * sizeof *in);
    if (!n->value || !in)
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "kiln_forward: workspace out of memory at %%%d",
                                 n->id);
    for (int k = 0; k < n->n_in; k++)
        in[k] = n->in[k]->value;
    kiln_cpu_exec(n, n->value, in);
    return KILN_OK;
}

static kiln_status forward_from(kiln_session *s, kiln_graph *g, int first)
{
    for (int id = g->n_computed; id < g->n_nodes; id++) {
        kiln_status st = compute(s, g, g->nodes[id]);
        if (st != KILN_OK)
            return st;
        g->n_computed = id + 1;
    }
    for (int id = g->n_computed - 1; id >= first; id--) {
        kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_ASSIGN) /* applied once every node has run */
            memcpy(n->in[0]->value, n->value,
                   (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype));
    }
    return KILN_OK;
}

kiln_status kiln_forward(kiln_session *s, kiln_graph *g)
{
    if (!s)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "kiln_forward: graph is NULL");
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "kiln_forward: the graph failed: %s",
                                 g->err);
    int first = g->n_computed;
    kiln_status st = forward_from(s, g, first);
    for (int id = first; id < g->n_computed; id++)
        if (g->nodes[id]->debug)
            kiln_debug_print(g->nodes[id], g->nodes[id]->value, "value");
    return st;
}

kiln_status kiln_backward(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    if (!s)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "kiln_backward: graph is NULL");
    if (!node_ok(s, loss, "kiln_backward"))
        return KILN_ERR_ARG;
    if (loss->graph != g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_backward: loss belongs to another graph");
    if (!loss->value)
        return kiln_session_fail(s, KILN_ERR_STATE,
                                 "kiln_backward: loss %%%d has no value: run "
                                 "kiln_forward first", loss->id);
    if (kiln_shape_numel(loss->shape) != 1 || loss->dtype != KILN_F32)
        return kiln_session_fail(s, KILN_ERR_SHAPE,
                                 "kiln_backward: loss %%%d must be an f32 scalar",
                                 loss->id);
    int top = loss->id;
    kiln_node **wrt = kiln_arena_alloc(&g->workspace, (size_t)(g->n_vars + 1) * sizeof *wrt);
    kiln_node **adj = kiln_arena_alloc(&g->workspace, (size_t)(top + 1) * sizeof *adj);
    if (!wrt || !adj)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_backward: out of memory");
    int n_wrt = 0;
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->at.trainable && g->vars[i]->id <= top)
            wrt[n_wrt++] = g->vars[i];
    if (kiln_build_adjoints(g, loss, NULL, wrt, n_wrt, adj) != KILN_OK)
        return kiln_session_fail(s, g->status, "kiln_backward: %s", g->err);
    for (int id = 0; id <= top; id++)
        g->nodes[id]->grad = adj[id];
    int first = g->n_computed;
    kiln_status st = forward_from(s, g, first);
    if (st != KILN_OK)
        return st;
    g->backward_loss = loss;
    for (int id = 0; id <= top; id++) {
        kiln_node *n = g->nodes[id];
        if (n->debug && n->grad)
            kiln_debug_print(n, n->grad->value, "gradient");
    }
    return KILN_OK;
}

kiln_status kiln_backprop(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    kiln_status st = kiln_forward(s, g);
    return st != KILN_OK ? st : kiln_backward(s, g, loss);
}

static kiln_tensor *copy_out(kiln_session *s, const kiln_node *n, const void *data)
{
    kiln_tensor *t = kiln_tensor_new(n->dtype, n->shape);
    if (!t) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "out of memory");
        return NULL;
    }
    memcpy(t->data, data, kiln_tensor_bytes(t));
    return t;
}

kiln_tensor *kiln_node_value(kiln_session *s, kiln_node *n)
{
    if (!s || !node_ok(s, n, "kiln_node_value"))
        return NULL;
    if (!n->value) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_value: %%%d (%s) has no value: run "
                          "kiln_forward first", n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    return copy_out(s, n, n->value);
}

kiln_tensor *kiln_node_grad(kiln_session *s, kiln_node *n)
{
    if (!s || !node_ok(s, n, "kiln_node_grad"))
        return NULL;
    if (!n->graph->backward_loss || n->id > n->graph->backward_loss->id) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_grad: %%%d (%s) has no gradient: run "
                          "kiln_backward first", n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    if (!n->grad || !n->grad->value) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_grad: the loss does not depend on %%%d (%s) "
                          "through a trainable variable", n->id,
                          kiln_op_table[n->op].name);
        return NULL;
    }
    return copy_out(s, n, n->grad->value);
}

const float *kiln_node_value_f32(const kiln_node *n)
{
    return n && n->dtype == KILN_F32 ? n->value : NULL;
}

const float *kiln_node_grad_f32(const kiln_node *n)
{
    return n && n->grad && n->graph->backward_loss ? n->grad->value : NULL;
}

kiln_status kiln_sgd_step(kiln_session *s, kiln_graph *g, float lr)
{
    if (!s)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "kiln_sgd_step: graph is NULL");
    if (!g->backward_loss)
        return kiln_session_fail(s, KILN_ERR_STATE,
                                 "kiln_sgd_step: no gradients: run kiln_backward "
                                 "first");
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i];
        if (!v->at.trainable || !v->grad || !v->grad->value || !v->value)
            continue;
        float *w = v->value;
        const float *d = v->grad->value;
        int64_t n = kiln_shape_numel(v->shape);
        for (int64_t j = 0; j < n; j++)
            w[j] -= lr * d[j];
    }
    return KILN_OK;
}
