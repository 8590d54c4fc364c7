/* Results of dynamic runs: values and gradients as a session's run state
   holds them, and the plain SGD step on them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dynamic.h"

int kiln_dynamic_trains(kiln_session *s, const kiln_node *v)
{
    const kiln_var *var = kiln_session_find(s, v->name);
    return v->at.trainable && var && var->trainable;
}

/* n's value in s's run state of its graph, or NULL. */
static void *value_of(kiln_session *s, const kiln_node *n)
{
    kiln_run_state *rs = kiln_run_find(s, n->graph);
    return rs && n->id < rs->cap ? rs->e[n->id].value : NULL;
}

/* n's gradient node from s's last kiln_backward of its graph, or NULL. */
static const kiln_node *grad_of(kiln_session *s, const kiln_node *n)
{
    kiln_run_state *rs = kiln_run_find(s, n->graph);
    return rs && rs->backward_loss && n->id <= rs->backward_loss->id
               ? rs->e[n->id].grad
               : NULL;
}

int kiln_dynamic_trained(kiln_session *s, kiln_graph *g, const char *fn,
                         kiln_node **vars, kiln_node **grads)
{
    kiln_run_state *rs = kiln_run_find(s, g);
    if (!rs || !rs->backward_loss) {
        kiln_session_fail(s, KILN_ERR_STATE,
                          "%s: no gradients: run kiln_backward first", fn);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i], *d;
        if (v->id > rs->backward_loss->id || !kiln_dynamic_trains(s, v) ||
            !(d = rs->e[v->id].grad))
            continue;
        if (d->id >= rs->n_computed) {
            kiln_session_fail(s, KILN_ERR_STATE,
                              "%s: the gradients are stale (an input was fed "
                              "after kiln_backward): run kiln_forward first",
                              fn);
            return -1;
        }
        if (rs->e[d->id].value) {
            vars[n] = v;
            grads[n++] = d;
        }
    }
    return n;
}

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
    const char *fn = "kiln_node_value";
    if (kiln_session_begin(s, fn) != KILN_OK || !kiln_dynamic_node_ok(s, n, fn))
        return NULL;
    void *v = value_of(s, n);
    if (v)
        return copy_out(s, n, v);
    kiln_run_state *rs = kiln_run_find(s, n->graph);
    if (rs && kiln_ckpt_released(rs, n))
        kiln_session_fail(s, KILN_ERR_STATE, "%s: %%%d (%s) %s", fn, n->id,
                          kiln_op_table[n->op].name, RELEASED);
    else
        kiln_session_fail(s, KILN_ERR_STATE,
                          "%s: %%%d (%s) has no value: run kiln_forward "
                          "first",
                          fn, n->id, kiln_op_table[n->op].name);
    return NULL;
}

/* Why n has no gradient to read in rs (NULL when it has one). */
static const char *no_grad(kiln_run_state *rs, const kiln_node *n)
{
    if (!rs || !rs->backward_loss || n->id > rs->backward_loss->id)
        return "has no gradient: run kiln_backward first";
    const kiln_node *d = rs->e[n->id].grad;
    if (d && d->id >= rs->n_computed)
        return "has a stale gradient (an input was fed after "
               "kiln_backward): run kiln_forward first";
    if (d && kiln_ckpt_released(rs, d))
        return "has a gradient that was released by gradient checkpointing "
               "(mark it with kiln_checkpoint to keep it)";
    if (!d || !rs->e[d->id].value)
        return "has no gradient: the loss does not depend on it through a "
               "trainable variable";
    return NULL;
}

kiln_tensor *kiln_node_grad(kiln_session *s, kiln_node *n)
{
    const char *fn = "kiln_node_grad";
    if (kiln_session_begin(s, fn) != KILN_OK || !kiln_dynamic_node_ok(s, n, fn))
        return NULL;
    kiln_run_state *rs = kiln_run_find(s, n->graph);
    const char *why = no_grad(rs, n);
    if (why) {
        kiln_session_fail(s, KILN_ERR_STATE, "%s: %%%d (%s) %s", fn, n->id,
                          kiln_op_table[n->op].name, why);
        return NULL;
    }
    return copy_out(s, n, rs->e[rs->e[n->id].grad->id].value);
}

const float *kiln_node_value_f32(kiln_session *s, const kiln_node *n)
{
    return s && n && n->dtype == KILN_F32 && n->op != KILN_OP_ERROR &&
                   !kiln_node_stale(n)
               ? value_of(s, n)
               : NULL;
}

const float *kiln_node_grad_f32(kiln_session *s, const kiln_node *n)
{
    const kiln_node *d = s && n && n->op != KILN_OP_ERROR && !kiln_node_stale(n)
                             ? grad_of(s, n)
                             : NULL;
    return d ? value_of(s, d) : NULL;
}

kiln_status kiln_sgd_step(kiln_session *s, kiln_graph *g, float lr)
{
    const char *fn = "kiln_sgd_step";
    if (kiln_session_begin(s, fn) != KILN_OK)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: graph is NULL", fn);
    /* a NaN or infinite rate would write NaN into every variable */
    if (!isfinite(lr))
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: lr is %g, not finite",
                                 fn, (double)lr);
    kiln_node **vars = malloc((size_t)(2 * g->n_vars + 1) * sizeof *vars);
    if (!vars)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", fn);
    kiln_node **grads = vars + g->n_vars;
    int n = kiln_dynamic_trained(s, g, fn, vars, grads);
    for (int i = 0; i < n; i++) {
        float *w = value_of(s, vars[i]);
        const float *d = value_of(s, grads[i]);
        int64_t len = kiln_shape_numel(vars[i]->shape);
        for (int64_t j = 0; j < len; j++)
            w[j] -= lr * d[j];
    }
    free(vars);
    return n < 0 ? KILN_ERR_STATE : KILN_OK;
}
