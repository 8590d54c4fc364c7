/* Dynamic execution (Marian): nodes run in creation order as they are
   built, values live in the session's run state of the graph (run_state.c,
   workspace.c), and clearing the graph releases them all at once while the
   session keeps the variables.  Nothing here writes into the graph but the
   gradient nodes kiln_backward builds once per loss (grad/memo.c); the
   graph's lock is held for reading around everything that reads its nodes,
   so a build on another thread cannot move them underneath. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/dispatch.h"
#include "cpu/fpu.h"
#include "grad/grad.h"
#include "runtime/dynamic.h"

/* ------------------------------------------------------------ execution */

int kiln_dynamic_node_ok(kiln_session *s, const kiln_node *n, const char *fn)
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

/* kiln_feed's work once the arguments are checked, under g's read lock. */
static kiln_status feed(kiln_session *s, kiln_graph *g, kiln_node *input,
                        const kiln_tensor *t)
{
    kiln_run_state *rs = kiln_run_get(s, g, "kiln_feed");
    if (!rs)
        return KILN_ERR_MEMORY;
    kiln_run_ctx r = {.s = s, .g = g, .rs = rs, .fn = "kiln_feed"};
    size_t bytes = kiln_tensor_bytes(t);
    /* a new value for the same input: overwrite the old one in place */
    void *v = rs->e[input->id].value;
    if (!v && !(v = kiln_ws_alloc(&r, input, bytes)))
        return KILN_ERR_MEMORY;
    memcpy(v, t->data, bytes);
    rs->e[input->id].value = v;
    /* what was computed from the old value is recomputed by kiln_forward,
       with fresh random bits */
    kiln_run_invalidate(rs, g, input->id + 1);
    rs->rekey = 1;
    return KILN_OK;
}

kiln_status kiln_feed(kiln_session *s, kiln_node *input, const kiln_tensor *t)
{
    char b1[96], b2[96];
    if (kiln_session_begin(s, "kiln_feed") != KILN_OK)
        return KILN_ERR_ARG;
    if (!kiln_dynamic_node_ok(s, input, "kiln_feed"))
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
    kiln_graph_read_lock(g);
    kiln_status st = feed(s, g, input, t);
    kiln_graph_unlock(g);
    return st;
}

/* Index of the first NaN or infinity of n's f32 value, or -1. */
static int64_t first_nonfinite(const float *v, const kiln_node *n)
{
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        if (!isfinite(v[i]))
            return i;
    return -1;
}

static int input_summary(const kiln_run_state *rs, const kiln_node *x,
                         char *buf, size_t size)
{
    char d[160];
    const float *v = rs->e[x->id].value;
    kiln_node_format(x, NULL, '\'', d, sizeof d);
    if (x->dtype != KILN_F32 || !v)
        return snprintf(buf, size, "%s", d);
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
    float bad = ((const float *)r->rs->e[n->id].value)[at];
    kiln_node_format(n, NULL, '\'', d, sizeof d);
    if (n->id >= r->grad_first) {
        for (int id = 0; id < r->grad_first; id++)
            if (r->rs->e[id].grad == n) {
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
            k +=
                input_summary(r->rs, n->in[i], msg + k, sizeof msg - (size_t)k);
    }
    if (n->n_in == 0 && k > 0 && (size_t)k < sizeof msg)
        snprintf(msg + k, sizeof msg - (size_t)k, "none");
    return kiln_session_fail(r->s, KILN_ERR_NUMERIC, "%s", msg);
}

/* The variable's storage in s, created on first use.  A variable frozen in
   s stays frozen whatever the node says; the node is left as built. */
static kiln_status bind_variable(kiln_run_ctx *r, const kiln_node *n)
{
    const kiln_var *old = kiln_session_find(r->s, n->name);
    int frozen = old && !old->trainable;
    kiln_var *v = kiln_session_bind(r->s, n);
    if (!v)
        return KILN_ERR_SHAPE;
    if (frozen)
        v->trainable = 0;
    r->rs->e[n->id].value = v->data;
    return KILN_OK;
}

/* Runs n's kernel into its block (taken on its first run, reused when it
   is recomputed after kiln_feed). */
static kiln_status run_kernel(kiln_run_ctx *r, const kiln_node *n)
{
    kiln_run_state *rs = r->rs;
    void *in_stack[8];
    void **in = in_stack;
    if (n->n_in > 8 &&
        !(in = kiln_ws_alloc(r, NULL, (size_t)n->n_in * sizeof *in)))
        return KILN_ERR_MEMORY;
    size_t bytes = (size_t)kiln_node_numel(n) * kiln_dtype_size(n->dtype);
    void *out = rs->e[n->id].block;
    if (out)
        memset(out, 0, bytes);
    else if (!(out = rs->e[n->id].block = kiln_ws_alloc(r, n, bytes)))
        return KILN_ERR_MEMORY;
    for (int k = 0; k < n->n_in; k++)
        in[k] = rs->e[n->in[k]->id].value;
    size_t sb = kiln_cpu_scratch_bytes(n);
    void *scratch = sb ? kiln_ws_scratch(r, n, sb) : NULL;
    if (sb && !scratch)
        return KILN_ERR_MEMORY;
    char msg[KILN_ERRMSG_MAX - 32];
    if (kiln_cpu_run_kernel(&r->s->exec, n, out, in, scratch, msg,
                            sizeof msg) != KILN_OK)
        return kiln_session_fail(r->s, KILN_ERR_ARG, "%s: %s", r->fn, msg);
    rs->e[n->id].value = out;
    return KILN_OK;
}

kiln_status kiln_run_compute(kiln_run_ctx *r, kiln_node *n)
{
    kiln_run_state *rs = r->rs;
    kiln_status st = KILN_OK;
    switch (n->op) {
    case KILN_OP_VARIABLE:
        st = bind_variable(r, n);
        break;
    case KILN_OP_CONSTANT:
        rs->e[n->id].value = (void *)n->at.data;
        break;
    case KILN_OP_MODE:
    case KILN_OP_RNG_KEY:
        st = kiln_run_bound_leaf(r, n);
        break;
    case KILN_OP_INPUT:
        if (!rs->e[n->id].value)
            return kiln_session_fail(r->s, KILN_ERR_STATE,
                                     "%s: input '%s' (%%%d) was not fed", r->fn,
                                     kiln_node_name(n), n->id);
        break;
    default:
        st = run_kernel(r, n);
    }
    if (st != KILN_OK)
        return st;
    if (rs->check_finite && n->dtype == KILN_F32 && n->op != KILN_OP_CONSTANT) {
        int64_t at = first_nonfinite(rs->e[n->id].value, n);
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
static kiln_status compute_nodes(kiln_run_ctx *r, int first)
{
    kiln_graph *g = r->g;
    kiln_run_state *rs = r->rs;
    kiln_status st = check_assignments(r, first);
    if (st != KILN_OK)
        return st;
    /* values released while checkpointing was on are recomputed when
       needed even after it was turned off */
    if ((rs->checkpointing || rs->ckpt_released) &&
        (st = kiln_ckpt_prepare(r)) != KILN_OK)
        return st;
    for (int id = rs->n_computed; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (r->last_use && (st = kiln_ckpt_restore_inputs(r, n)) != KILN_OK)
            return st;
        st = kiln_run_compute(r, n);
        if (st != KILN_OK && st != KILN_ERR_NUMERIC)
            return st;
        rs->n_computed = id + 1; /* a non-finite value stays for inspection */
        if (st != KILN_OK)
            return st;
        if (n->debug && id < r->grad_first)
            kiln_debug_print(r->s->exec.debug, n, rs->e[id].value, "value");
        /* a hooked node of a dynamic graph: the optimiser's gather of
           sharded updates (ZeRO-1) */
        if (n->hook && !r->s->sync)
            return kiln_session_fail(
                r->s, KILN_ERR_STATE,
                "kiln_forward: the optimiser step was built to gather "
                "updates over a communicator, and none is attached now");
        if (r->s->sync && n->hook &&
            (st = r->s->sync->computed(r->s->sync->ctx, n->hook,
                                       rs->e[id].value)) != KILN_OK)
            return st;
        if (r->s->sync && id >= r->grad_first) {
            r->s->sync->node_done(r->s->sync->ctx, n, rs->e[id].value);
            r->s->sync->progress(r->s->sync->ctx);
        }
        if (r->last_use && rs->checkpointing)
            kiln_ckpt_release_after(r, n);
    }
    for (int id = rs->n_computed - 1; id >= first; id--) {
        kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_ASSIGN)
            memcpy(rs->e[n->in[0]->id].value, rs->e[id].value,
                   (size_t)kiln_shape_numel(n->shape) *
                       kiln_dtype_size(n->dtype));
    }
    return KILN_OK;
}

/* compute_nodes in the session's denormal mode, set once for the run
   rather than around each kernel. */
static kiln_status run_nodes(kiln_run_ctx *r, int first)
{
    unsigned saved = kiln_fpu_enter(r->s->exec.flush_denormals);
    kiln_status st = compute_nodes(r, first);
    kiln_fpu_leave(saved);
    return st;
}

/* kiln_forward's work on a graph given, under its read lock: another
   session's kiln_backward may be building nodes on another thread. */
static kiln_status forward(kiln_session *s, kiln_graph *g)
{
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status,
                                 "kiln_forward: the graph failed: %s", g->err);
    kiln_run_state *rs = kiln_run_get(s, g, "kiln_forward");
    if (!rs)
        return KILN_ERR_MEMORY;
    kiln_run_ctx r = {
        .s = s, .g = g, .rs = rs, .fn = "kiln_forward", .grad_first = INT_MAX};
    kiln_run_bind(s, g, rs);
    return run_nodes(&r, rs->n_computed);
}

kiln_status kiln_forward(kiln_session *s, kiln_graph *g)
{
    if (kiln_session_begin(s, "kiln_forward") != KILN_OK)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_forward: graph is NULL");
    kiln_graph_read_lock(g);
    kiln_status st = forward(s, g);
    kiln_graph_unlock(g);
    return st;
}

/* KILN_OK with s's run state of g in *rs when loss can be differentiated
   in it, else the status with the session's error. */
static kiln_status check_loss(kiln_session *s, kiln_graph *g, kiln_node *loss,
                              kiln_run_state **rs)
{
    const char *fn = "kiln_backward";
    if (!kiln_dynamic_node_ok(s, loss, fn))
        return KILN_ERR_ARG;
    if (loss->graph != g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "%s: loss belongs to another graph", fn);
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "%s: the graph failed: %s", fn,
                                 g->err);
    *rs = kiln_run_find(s, g);
    if (!*rs || loss->id >= (*rs)->n_computed)
        return kiln_session_fail(s, KILN_ERR_STATE,
                                 "%s: loss %%%d has no value: run kiln_forward "
                                 "first",
                                 fn, loss->id);
    if (kiln_shape_numel(loss->shape) != 1 || loss->dtype != KILN_F32)
        return kiln_session_fail(s, KILN_ERR_SHAPE,
                                 "%s: loss %%%d must be an f32 scalar", fn,
                                 loss->id);
    return KILN_OK;
}

/* With checkpointing, what backward must not release: the loss and the
   gradients of variables and debug nodes. */
static void keep_results(kiln_run_ctx *r, const kiln_node *loss,
                         kiln_node **adj)
{
    r->rs->e[loss->id].keep = 1;
    for (int id = 0; id <= loss->id; id++) {
        const kiln_node *n = r->g->nodes[id];
        if (adj[id] && (n->op == KILN_OP_VARIABLE || n->debug))
            r->rs->e[adj[id]->id].keep = 1;
    }
}

/* The gradient subgraph of loss for the variables trained in s, from the
   graph's memo (built there on first use).  Keyed by the trained set
   rather than built once for the union of every variable: a session that
   freezes a variable (say a pretrained embedding) then builds no gradient
   nodes for it, as when it ran alone, and sessions that train the same
   variables -- the usual case -- share one subgraph; each distinct set
   adds one, once per generation.  The price: a run computes every node of
   the graph, so sessions training different sets of one graph each
   compute the other's gradient nodes too. */
static kiln_status find_gradients(kiln_run_ctx *r, kiln_node *loss,
                                  kiln_grad_memo *m)
{
    kiln_graph *g = r->g;
    kiln_graph_read_lock(g);
    int n_vars = g->n_vars, n_wrt = 0;
    kiln_node **wrt =
        kiln_ws_alloc(r, NULL, (size_t)(n_vars + 1) * sizeof *wrt);
    for (int i = 0; wrt && i < n_vars; i++)
        if (g->vars[i]->id <= loss->id && kiln_dynamic_trains(r->s, g->vars[i]))
            wrt[n_wrt++] = g->vars[i];
    kiln_graph_unlock(g);
    if (!wrt)
        return KILN_ERR_MEMORY;
    if (kiln_grad_memo_get(g, loss, wrt, n_wrt, m) == KILN_OK)
        return KILN_OK;
    kiln_graph_read_lock(g);
    kiln_status st =
        kiln_session_fail(r->s, g->status, "%s: %s", r->fn, g->err);
    kiln_graph_unlock(g);
    return st;
}

/* Tells the session's gradient sync which gradients the backward pass
   about to run computes: those of the variables s trains. */
static kiln_status sync_begin(kiln_run_ctx *r, const kiln_node *loss)
{
    kiln_graph *g = r->g;
    kiln_node **grads =
        kiln_ws_alloc(r, NULL, (size_t)(g->n_vars + 1) * sizeof *grads);
    if (!grads)
        return KILN_ERR_MEMORY;
    int n = 0;
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i];
        if (v->id <= loss->id && kiln_dynamic_trains(r->s, v) &&
            r->rs->e[v->id].grad)
            grads[n++] = r->rs->e[v->id].grad;
    }
    r->s->sync->backward_begin(r->s->sync->ctx, grads, n);
    return KILN_OK;
}

/* Records m's adjoints in s's run state and computes them; under the
   graph's read lock. */
static kiln_status run_gradients(kiln_run_ctx *r, kiln_node *loss,
                                 const kiln_grad_memo *m)
{
    kiln_status st;
    if (!(r->rs = kiln_run_get(r->s, r->g, r->fn)))
        return KILN_ERR_MEMORY;
    for (int id = 0; id <= loss->id; id++)
        r->rs->e[id].grad = m->adj[id];
    if (r->rs->checkpointing)
        keep_results(r, loss, m->adj);
    r->grad_first = m->first;
    if (r->s->sync && (st = sync_begin(r, loss)) != KILN_OK)
        return st;
    if ((st = run_nodes(r, r->rs->n_computed)) != KILN_OK)
        return st;
    r->rs->backward_loss = loss;
    for (int id = loss->id; id >= 0; id--) {
        const kiln_node *n = r->g->nodes[id], *d = r->rs->e[id].grad;
        if (n->debug && d && r->rs->e[d->id].value)
            kiln_debug_print(r->s->exec.debug, n, r->rs->e[d->id].value,
                             "gradient");
    }
    return KILN_OK;
}

/* The gradient nodes are IR, built once per loss and trained set (see
   find_gradients), so backward builds on the graph only the first time;
   the build holds the graph's write lock and every run its read lock, so
   sessions on other threads may run the graph meanwhile. */
kiln_status kiln_backward(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    if (kiln_session_begin(s, "kiln_backward") != KILN_OK)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_backward: graph is NULL");
    kiln_run_ctx r = {
        .s = s, .g = g, .fn = "kiln_backward", .grad_first = INT_MAX};
    kiln_graph_read_lock(g);
    kiln_status st = check_loss(s, g, loss, &r.rs);
    if (st == KILN_OK && !r.rs->e[loss->id].value &&
        (st = kiln_ckpt_prepare(&r)) == KILN_OK)
        st = kiln_ckpt_restore(&r, loss);
    kiln_graph_unlock(g);
    kiln_grad_memo m;
    if (st != KILN_OK || (st = find_gradients(&r, loss, &m)) != KILN_OK)
        return st;
    kiln_graph_read_lock(g);
    st = run_gradients(&r, loss, &m);
    kiln_graph_unlock(g);
    return st;
}

kiln_status kiln_backprop(kiln_session *s, kiln_graph *g, kiln_node *loss)
{
    kiln_status st = kiln_forward(s, g);
    return st != KILN_OK ? st : kiln_backward(s, g, loss);
}
