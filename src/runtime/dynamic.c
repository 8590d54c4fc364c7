/* Dynamic execution (Marian): nodes run in creation order as they are
   built, values live in the graph's workspace (workspace.c), and clearing
   the graph releases them all at once while the session keeps the
   variables. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/dispatch.h"
#include "grad/grad.h"
#include "runtime/dynamic.h"

kiln_status kiln_graph_set_check_finite(kiln_graph *g, int on)
{
    if (!g)
        return kiln_null_arg("kiln_graph_set_check_finite", "graph");
    g->check_finite = on != 0;
    return KILN_OK;
}

/* ------------------------------------------------------------ sessions */

/* Values from node `from` on go stale: fed inputs keep theirs, the others
   are recomputed by the next kiln_forward, into the same blocks. */
static void invalidate_from(kiln_graph *g, int from)
{
    for (int id = from; id < g->n_nodes; id++)
        if (g->nodes[id]->op != KILN_OP_INPUT)
            g->nodes[id]->value = NULL;
    if (g->n_computed > from)
        g->n_computed = from;
}

/* Forgets every value computed with the graph's session, and the freezes
   it applied to variable nodes (another session may train them). */
static void drop_run_state(kiln_graph *g)
{
    invalidate_from(g, 0);
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->frozen_by_session) {
            g->vars[i]->frozen_by_session = 0;
            g->vars[i]->at.trainable = 1;
        }
    g->backward_loss = NULL;
    g->ckpt_released = 0;
}

static void graph_forget_session(void *holder)
{
    kiln_graph *g = holder;
    drop_run_state(g);
    g->session = NULL;
    g->session_id = 0;
    g->on_free = NULL;
}

static void graph_detach(kiln_graph *g)
{
    kiln_session_detach(g->session, g);
}

/* Makes s the session g computes with: another one's values (variables
   included) are dropped, so nothing runs on or writes into its storage,
   which kiln_session_free may release before the graph goes. */
static kiln_status bind_session(kiln_session *s, kiln_graph *g, const char *fn)
{
    if (g->session_id == s->id)
        return KILN_OK;
    kiln_status st = kiln_session_attach(s, g, graph_forget_session, fn);
    if (st != KILN_OK)
        return st;
    kiln_session_detach(g->session, g);
    drop_run_state(g);
    g->session = s;
    g->session_id = s->id;
    g->on_free = graph_detach;
    return KILN_OK;
}

kiln_status kiln_dynamic_check_session(kiln_session *s, kiln_graph *g,
                                       const char *fn)
{
    if (g->session_id == 0 || g->session_id == s->id)
        return KILN_OK;
    return kiln_session_fail(s, KILN_ERR_STATE,
                             "%s: the graph was last run with another session "
                             "(its values belong to that one): run "
                             "kiln_forward with this session first",
                             fn);
}

kiln_status kiln_dynamic_gradients(kiln_session *s, kiln_graph *g,
                                   const char *fn)
{
    kiln_status st = kiln_dynamic_check_session(s, g, fn);
    if (st != KILN_OK)
        return st;
    if (!g->backward_loss)
        return kiln_session_fail(
            s, KILN_ERR_STATE, "%s: no gradients: run kiln_backward first", fn);
    for (int i = 0; i < g->n_vars; i++) {
        const kiln_node *v = g->vars[i];
        if (v->at.trainable && v->grad && v->grad->id >= g->n_computed)
            return kiln_session_fail(
                s, KILN_ERR_STATE,
                "%s: the gradients are stale (an input was fed after "
                "kiln_backward): run kiln_forward first",
                fn);
    }
    return KILN_OK;
}

/* ------------------------------------------------------------ execution */

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
    if (kiln_node_stale(n)) {
        kiln_session_fail(s, KILN_ERR_ARG,
                          "%s: node %%%d was built before kiln_graph_clear "
                          "(node pointers do not survive a clear)",
                          fn, n->id);
        return 0;
    }
    return 1;
}

kiln_status kiln_feed(kiln_session *s, kiln_node *input, const kiln_tensor *t)
{
    char b1[96], b2[96];
    if (!s)
        return kiln_null_arg("kiln_feed", "session");
    if (!node_ok(s, input, "kiln_feed"))
        return KILN_ERR_ARG;
    if (!t)
        return kiln_session_fail(s, KILN_ERR_ARG, "kiln_feed: tensor is NULL");
    if (input->op != KILN_OP_INPUT)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_feed: %%%d is a %s, not an input",
                                 input->id, kiln_op_table[input->op].name);
    if (t->dtype != input->dtype || !kiln_shape_equal(t->shape, input->shape))
        return kiln_session_fail(
            s, t->dtype != input->dtype ? KILN_ERR_DTYPE : KILN_ERR_SHAPE,
            "kiln_feed: input '%s' wants %s%s, got %s%s", kiln_node_name(input),
            kiln_dtype_name(input->dtype),
            kiln_shape_str(input->shape, b1, sizeof b1),
            kiln_dtype_name(t->dtype), kiln_shape_str(t->shape, b2, sizeof b2));
    kiln_graph *g = input->graph;
    kiln_status st = bind_session(s, g, "kiln_feed");
    if (st != KILN_OK)
        return st;
    kiln_run_ctx r = {.s = s, .g = g, .fn = "kiln_feed"};
    size_t bytes = kiln_tensor_bytes(t);
    /* a new value for the same input: overwrite the old one in place */
    void *v = input->value ? input->value : kiln_ws_alloc(&r, input, bytes);
    if (!v)
        return KILN_ERR_MEMORY;
    memcpy(v, t->data, bytes);
    input->value = v;
    /* what was computed from the old value is recomputed by kiln_forward */
    invalidate_from(g, input->id + 1);
    return KILN_OK;
}

/* Index of the first NaN or infinity of n's f32 value, or -1. */
static int64_t first_nonfinite(const kiln_node *n)
{
    const float *v = n->value;
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        if (!isfinite(v[i]))
            return i;
    return -1;
}

static int input_summary(const kiln_node *x, char *buf, size_t size)
{
    char d[160];
    kiln_node_format(x, NULL, '\'', d, sizeof d);
    if (x->dtype != KILN_F32 || !x->value)
        return snprintf(buf, size, "%s", d);
    const float *v = x->value;
    double mn = INFINITY, mx = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < kiln_shape_numel(x->shape); i++) {
        nan |= isnan(v[i]);
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    return snprintf(buf, size, "%s in [%g, %g]%s", d, mn, mx,
                    nan ? " with NaN" : "");
}

static kiln_status nonfinite_error(kiln_run_ctx *r, kiln_node *n, int64_t at)
{
    char msg[KILN_ERRMSG_MAX], d[160], of[200] = "";
    kiln_graph *g = r->g;
    float bad = ((const float *)n->value)[at];
    kiln_node_format(n, NULL, '\'', d, sizeof d);
    if (n->id >= r->grad_first) {
        for (int id = 0; id < r->grad_first; id++)
            if (g->nodes[id]->grad == n) {
                char f[160];
                kiln_node_format(g->nodes[id], NULL, '\'', f, sizeof f);
                snprintf(of, sizeof of, " (the gradient of %s)", f);
                break;
            }
    }
    int k = snprintf(
        msg, sizeof msg,
        "%s: %s%s%s is not finite: %s at element %lld; inputs: ", r->fn,
        n->id >= r->grad_first ? "gradient node " : "", d, of,
        isnan(bad) ? "nan"
        : bad > 0  ? "inf"
                   : "-inf",
        (long long)at);
    for (int i = 0; i < n->n_in && k > 0 && (size_t)k < sizeof msg; i++) {
        k += snprintf(msg + k, sizeof msg - (size_t)k, "%s", i ? "; " : "");
        if (k > 0 && (size_t)k < sizeof msg)
            k += input_summary(n->in[i], msg + k, sizeof msg - (size_t)k);
    }
    if (n->n_in == 0 && k > 0 && (size_t)k < sizeof msg)
        snprintf(msg + k, sizeof msg - (size_t)k, "none");
    return kiln_session_fail(r->s, KILN_ERR_NUMERIC, "%s", msg);
}

kiln_status kiln_run_compute(kiln_run_ctx *r, kiln_node *n)
{
    kiln_session *s = r->s;
    switch (n->op) {
    case KILN_OP_VARIABLE: {
        kiln_var *old = kiln_session_find(s, n->name);
        if (old && !old->trainable && n->at.trainable) { /* frozen in s */
            n->at.trainable = 0;
            n->frozen_by_session = 1;
        }
        kiln_var *v = kiln_session_bind(s, n);
        if (!v)
            return KILN_ERR_SHAPE;
        n->value = v->data;
        break;
    }
    case KILN_OP_CONSTANT:
        n->value = (void *)n->at.data;
        break;
    case KILN_OP_INPUT:
        if (!n->value)
            return kiln_session_fail(s, KILN_ERR_STATE,
                                     "%s: input '%s' (%%%d) was not fed", r->fn,
                                     kiln_node_name(n), n->id);
        break;
    default: {
        void *in_stack[8];
        void **in = in_stack;
        if (n->n_in > 8 &&
            !(in = kiln_ws_alloc(r, NULL, (size_t)n->n_in * sizeof *in)))
            return KILN_ERR_MEMORY;
        size_t bytes =
            (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
        void *out = n->block;
        if (out) /* recomputed after kiln_feed or a change of session */
            memset(out, 0, bytes);
        else if (!(out = n->block = kiln_ws_alloc(r, n, bytes)))
            return KILN_ERR_MEMORY;
        for (int k = 0; k < n->n_in; k++)
            in[k] = n->in[k]->value;
        char msg[KILN_ERRMSG_MAX - 32];
        if (kiln_cpu_run_kernel(&s->exec, n, out, in, msg, sizeof msg) !=
            KILN_OK)
            return kiln_session_fail(s, KILN_ERR_ARG, "%s: %s", r->fn, msg);
        n->value = out;
    }
    }
    if (r->g->check_finite && n->dtype == KILN_F32 &&
        n->op != KILN_OP_CONSTANT) {
        int64_t at = first_nonfinite(n);
        if (at >= 0)
            return nonfinite_error(r, n, at);
    }
    return KILN_OK;
}

/* Refuses two assignments of one variable among nodes [first, n_nodes):
   they would be applied together at the end of the pass. */
static kiln_status check_assignments(kiln_run_ctx *r, int first)
{
    const kiln_node *v = NULL;
    int found = kiln_graph_find_double_assign(r->g, first, NULL, &v);
    if (found < 0)
        return kiln_session_fail(r->s, KILN_ERR_MEMORY, "%s: out of memory",
                                 r->fn);
    if (found)
        return kiln_session_fail(
            r->s, KILN_ERR_ARG,
            "%s: variable '%s' is assigned twice in one pass (e.g. by two "
            "optimiser updates): the updates would race; assign it once",
            r->fn, v->name);
    return KILN_OK;
}

/* Computes every node not yet computed, then applies the assignments among
   nodes [first, n_nodes) once all of them have run. */
static kiln_status run_nodes(kiln_run_ctx *r, int first)
{
    kiln_graph *g = r->g;
    kiln_status st = check_assignments(r, first);
    if (st != KILN_OK)
        return st;
    /* values released while checkpointing was on are recomputed when
       needed even after it was turned off */
    if ((g->checkpointing || g->ckpt_released) &&
        (st = kiln_ckpt_prepare(r)) != KILN_OK)
        return st;
    for (int id = g->n_computed; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (r->last_use && (st = kiln_ckpt_restore_inputs(r, n)) != KILN_OK)
            return st;
        st = kiln_run_compute(r, n);
        if (st != KILN_OK && st != KILN_ERR_NUMERIC)
            return st;
        g->n_computed = id + 1; /* a non-finite value stays for inspection */
        if (st != KILN_OK)
            return st;
        if (n->debug && id < r->grad_first)
            kiln_debug_print(n, n->value, "value");
        if (r->last_use && g->checkpointing)
            kiln_ckpt_release_after(r, n);
    }
    for (int id = g->n_computed - 1; id >= first; id--) {
        kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_ASSIGN)
            memcpy(n->in[0]->value, n->value,
                   (size_t)kiln_shape_numel(n->shape) *
                       kiln_dtype_size(n->dtype));
    }
    return KILN_OK;
}

kiln_status kiln_forward(kiln_session *s, kiln_graph *g)
{
    if (!s)
        return kiln_null_arg("kiln_forward", "session");
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_forward: graph is NULL");
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status,
                                 "kiln_forward: the graph failed: %s", g->err);
    kiln_status st = bind_session(s, g, "kiln_forward");
    if (st != KILN_OK)
        return st;
    kiln_run_ctx r = {
        .s = s, .g = g, .fn = "kiln_forward", .grad_first = INT_MAX};
    return run_nodes(&r, g->n_computed);
}

static kiln_status check_loss(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_backward: graph is NULL");
    if (!node_ok(s, loss, "kiln_backward"))
        return KILN_ERR_ARG;
    if (loss->graph != g)
        return kiln_session_fail(
            s, KILN_ERR_ARG, "kiln_backward: loss belongs to another graph");
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status,
                                 "kiln_backward: the graph failed: %s", g->err);
    kiln_status st = kiln_dynamic_check_session(s, g, "kiln_backward");
    if (st != KILN_OK)
        return st;
    if (!loss->value && !kiln_ckpt_released(loss))
        return kiln_session_fail(s, KILN_ERR_STATE,
                                 "kiln_backward: loss %%%d has no value: run "
                                 "kiln_forward first",
                                 loss->id);
    if (kiln_shape_numel(loss->shape) != 1 || loss->dtype != KILN_F32)
        return kiln_session_fail(
            s, KILN_ERR_SHAPE, "kiln_backward: loss %%%d must be an f32 scalar",
            loss->id);
    return KILN_OK;
}

/* With checkpointing, what backward must not release: the loss and the
   gradients of variables and debug nodes. */
static void keep_results(kiln_graph *g, kiln_node *loss, kiln_node **adj)
{
    loss->checkpoint |= KILN_KEEP_INTERNAL;
    for (int id = 0; id <= loss->id; id++) {
        kiln_node *n = g->nodes[id];
        if (adj[id] && (n->op == KILN_OP_VARIABLE || n->debug))
            adj[id]->checkpoint |= KILN_KEEP_INTERNAL;
    }
}

kiln_status kiln_backward(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    if (!s)
        return kiln_null_arg("kiln_backward", "session");
    kiln_status st = check_loss(s, g, loss);
    if (st != KILN_OK)
        return st;
    kiln_run_ctx r = {
        .s = s, .g = g, .fn = "kiln_backward", .grad_first = INT_MAX};
    if (!loss->value && ((st = kiln_ckpt_prepare(&r)) != KILN_OK ||
                         (st = kiln_ckpt_restore(&r, loss)) != KILN_OK))
        return st;
    int top = loss->id;
    kiln_node **wrt =
        kiln_ws_alloc(&r, NULL, (size_t)(g->n_vars + 1) * sizeof *wrt);
    kiln_node **adj =
        wrt ? kiln_ws_alloc(&r, NULL, (size_t)(top + 1) * sizeof *adj) : NULL;
    if (!adj)
        return KILN_ERR_MEMORY;
    int n_wrt = 0;
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->at.trainable && g->vars[i]->id <= top)
            wrt[n_wrt++] = g->vars[i];
    r.grad_first = g->n_nodes;
    if (kiln_build_adjoints(g, loss, NULL, wrt, n_wrt, adj) != KILN_OK)
        return kiln_session_fail(s, g->status, "kiln_backward: %s", g->err);
    for (int id = 0; id <= top; id++)
        g->nodes[id]->grad = adj[id];
    if (g->checkpointing)
        keep_results(g, loss, adj);
    st = run_nodes(&r, g->n_computed);
    if (st != KILN_OK)
        return st;
    g->backward_loss = loss;
    for (int id = top; id >= 0; id--) {
        kiln_node *n = g->nodes[id];
        if (n->debug && n->grad && n->grad->value)
            kiln_debug_print(n, n->grad->value, "gradient");
    }
    return KILN_OK;
}

kiln_status kiln_backprop(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    kiln_status st = kiln_forward(s, g);
    return st != KILN_OK ? st : kiln_backward(s, g, loss);
}

/* ------------------------------------------------------------ results */

static kiln_tensor *copy_out(kiln_session *s, const kiln_node *n,
                             const void *data)
{
    kiln_tensor *t = kiln_tensor_new(n->dtype, n->shape);
    if (!t) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "out of memory");
        return NULL;
    }
    memcpy(t->data, data, kiln_tensor_bytes(t));
    return t;
}

static const char *RELEASED = "was released by gradient checkpointing (mark it "
                              "with kiln_checkpoint to keep it)";

kiln_tensor *kiln_node_value(kiln_session *s, kiln_node *n)
{
    if (!s || !node_ok(s, n, "kiln_node_value") ||
        kiln_dynamic_check_session(s, n->graph, "kiln_node_value") != KILN_OK)
        return NULL;
    if (!n->value) {
        if (kiln_ckpt_released(n))
            kiln_session_fail(s, KILN_ERR_STATE,
                              "kiln_node_value: %%%d (%s) %s", n->id,
                              kiln_op_table[n->op].name, RELEASED);
        else
            kiln_session_fail(s, KILN_ERR_STATE,
                              "kiln_node_value: %%%d (%s) has no value: run "
                              "kiln_forward first",
                              n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    return copy_out(s, n, n->value);
}

kiln_tensor *kiln_node_grad(kiln_session *s, kiln_node *n)
{
    if (!s || !node_ok(s, n, "kiln_node_grad") ||
        kiln_dynamic_check_session(s, n->graph, "kiln_node_grad") != KILN_OK)
        return NULL;
    if (!n->graph->backward_loss || n->id > n->graph->backward_loss->id) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_grad: %%%d (%s) has no gradient: run "
                          "kiln_backward first",
                          n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    if (n->grad && n->grad->id >= n->graph->n_computed) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_grad: the gradient of %%%d (%s) is stale "
                          "(an input was fed after kiln_backward): run "
                          "kiln_forward first",
                          n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    if (n->grad && kiln_ckpt_released(n->grad)) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "kiln_node_grad: the gradient of %%%d (%s) %s", n->id,
                          kiln_op_table[n->op].name, RELEASED);
        return NULL;
    }
    if (!n->grad || !n->grad->value) {
        kiln_session_fail(
            s, KILN_ERR_STATE,
            "kiln_node_grad: the loss does not depend on %%%d (%s) "
            "through a trainable variable",
            n->id, kiln_op_table[n->op].name);
        return NULL;
    }
    return copy_out(s, n, n->grad->value);
}

const float *kiln_node_value_f32(const kiln_node *n)
{
    return n && n->dtype == KILN_F32 && !kiln_node_stale(n) ? n->value : NULL;
}

const float *kiln_node_grad_f32(const kiln_node *n)
{
    return n && n->grad && n->graph->backward_loss && !kiln_node_stale(n)
               ? n->grad->value
               : NULL;
}

kiln_status kiln_sgd_step(kiln_session *s, kiln_graph *g, float lr)
{
    if (!s)
        return kiln_null_arg("kiln_sgd_step", "session");
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_sgd_step: graph is NULL");
    kiln_status st = kiln_dynamic_gradients(s, g, "kiln_sgd_step");
    if (st != KILN_OK)
        return st;
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
