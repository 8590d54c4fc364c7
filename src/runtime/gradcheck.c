/* Gradient checking: autodiff against central finite differences. */
#include <math.h>
#include <stdlib.h>

#include "runtime/runtime.h"

static float *element_storage(kiln_session *s, kiln_node *x,
                              kiln_node *const *feed_nodes,
                              kiln_tensor *const *feeds, int n_feed)
{
    if (x->op == KILN_OP_VARIABLE) {
        kiln_var *v = kiln_session_find(s, x->name);
        return v ? v->data : NULL;
    }
    for (int i = 0; i < n_feed; i++)
        if (feed_nodes[i] == x)
            return kiln_tensor_f32(feeds[i]);
    return NULL;
}

static kiln_status run_loss(kiln_function *f, kiln_tensor *const *feeds,
                            kiln_tensor *out, double *loss)
{
    kiln_status st = kiln_run(f, feeds, &out);
    *loss = kiln_tensor_f32(out)[0];
    return st;
}

/* Arguments are checked before kiln_grads, so that bad ones leave the
   caller's graph unpoisoned. */
static kiln_status check_args(kiln_session *s, kiln_graph *g, kiln_node *loss,
                              kiln_node *const *wrt, int n_wrt,
                              kiln_node *const *feed_nodes,
                              kiln_tensor *const *feeds, int n_feed, double eps,
                              double tol)
{
    const char *fn = "kiln_gradcheck";
    /* NaN eps or tol would pass every comparison: a check that cannot fail;
       they must be finite and > 0. */
    if (!g || !loss || !wrt || n_wrt < 1 || n_feed < 0 ||
        (n_feed && (!feed_nodes || !feeds)) || !(eps > 0) || !isfinite(eps) ||
        !(tol > 0) || !isfinite(tol))
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: bad arguments", fn);
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "%s: the graph failed: %s", fn,
                                 g->err);
    if (loss->graph != g || kiln_node_stale(loss) || loss->op == KILN_OP_ERROR)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "%s: loss must be a live node of g", fn);
    if (loss->dtype != KILN_F32 || kiln_shape_numel(loss->shape) != 1)
        return kiln_session_fail(
            s, KILN_ERR_SHAPE, "%s: loss %%%d must be an f32 scalar node of g",
            fn, loss->id);
    for (int i = 0; i < n_wrt; i++)
        if (!wrt[i] || wrt[i]->graph != g || kiln_node_stale(wrt[i]) ||
            wrt[i]->dtype != KILN_F32 ||
            (wrt[i]->op != KILN_OP_VARIABLE && wrt[i]->op != KILN_OP_INPUT))
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: wrt[%d] must be a variable or an "
                                     "input of g, of dtype f32",
                                     fn, i);
    return KILN_OK;
}

/* Central differences of the loss in every element x[0..n) of wrt[i],
   compared with the analytic gradient a; the worst error goes to res. */
static kiln_status compare_one(kiln_function *fl, kiln_tensor *const *feeds,
                               kiln_tensor *lt, float *x, const float *a,
                               int64_t n, int i, double eps,
                               kiln_gradcheck_result *res)
{
    for (int64_t j = 0; j < n; j++) {
        float saved = x[j];
        double lp, lm;
        x[j] = (float)(saved + eps);
        double hp = (double)x[j] - saved;
        kiln_status st = run_loss(fl, feeds, lt, &lp);
        x[j] = (float)(saved - eps);
        double hm = saved - (double)x[j];
        if (st == KILN_OK)
            st = run_loss(fl, feeds, lt, &lm);
        x[j] = saved;
        if (st != KILN_OK)
            return st;
        double num = (lp - lm) / (hp + hm);
        double err = fabs(a[j] - num);
        double rel = err / (1.0 + fabs(num));
        if (err > res->max_abs_err)
            res->max_abs_err = err;
        if (rel > res->max_rel_err || isnan(rel)) {
            res->max_rel_err = isnan(rel) ? INFINITY : rel;
            res->worst_node = i;
            res->worst_index = j;
        }
    }
    return KILN_OK;
}

kiln_status kiln_gradcheck(kiln_session *s, kiln_graph *g, kiln_node *loss,
                           kiln_node *const *wrt, int n_wrt,
                           kiln_node *const *feed_nodes,
                           kiln_tensor *const *feeds, int n_feed, double eps,
                           double tol, kiln_gradcheck_result *res)
{
    const char *fn = "kiln_gradcheck";
    if (kiln_session_begin(s, fn) != KILN_OK)
        return KILN_ERR_ARG;
    kiln_status ck =
        check_args(s, g, loss, wrt, n_wrt, feed_nodes, feeds, n_feed, eps, tol);
    if (ck != KILN_OK)
        return ck;
    kiln_gradcheck_result local = {0};
    if (!res)
        res = &local;
    *res = (kiln_gradcheck_result){0};
    kiln_node **outs = calloc((size_t)n_wrt + 1, sizeof *outs);
    kiln_tensor **vals = calloc((size_t)n_wrt + 1, sizeof *vals);
    kiln_function *fg = NULL, *fl = NULL;
    kiln_tensor *lt = NULL;
    kiln_status st = KILN_ERR_MEMORY;
    if (!outs || !vals)
        goto done;
    outs[0] = loss;
    if ((st = kiln_grads(g, loss, NULL, wrt, n_wrt, outs + 1)) != KILN_OK) {
        kiln_session_fail(s, st, "%s: %s", fn, g->err);
        goto done;
    }
    st = KILN_ERR_ARG;
    if (!(fg = kiln_compile(s, g, outs + 1, n_wrt, feed_nodes, n_feed)) ||
        !(fl = kiln_compile(s, g, &loss, 1, feed_nodes, n_feed)))
        goto done;
    st = KILN_ERR_MEMORY;
    if (!(lt = kiln_function_new_output(fl, 0)))
        goto done;
    for (int i = 0; i < n_wrt; i++)
        if (!(vals[i] = kiln_function_new_output(fg, i)))
            goto done;
    if ((st = kiln_run(fg, feeds, vals)) != KILN_OK)
        goto done;
    for (int i = 0; i < n_wrt && st == KILN_OK; i++) {
        float *x = element_storage(s, wrt[i], feed_nodes, feeds, n_feed);
        if (!x) {
            st = kiln_session_fail(s, KILN_ERR_ARG, "%s: wrt[%d] is not fed",
                                   fn, i);
            break;
        }
        st = compare_one(fl, feeds, lt, x, kiln_tensor_f32(vals[i]),
                         kiln_shape_numel(wrt[i]->shape), i, eps, res);
    }
    if (st == KILN_OK && res->max_rel_err > tol)
        st = kiln_session_fail(
            s, KILN_ERR_NUMERIC,
            "%s: wrt[%d] element %lld: error %.3g exceeds %.3g", fn,
            res->worst_node, (long long)res->worst_index, res->max_rel_err,
            tol);
done:
    if (st == KILN_ERR_MEMORY && !s->err[0])
        kiln_session_fail(s, st, "%s: out of memory", fn);
    for (int i = 0; vals && i < n_wrt; i++)
        kiln_tensor_free(vals[i]);
    free(vals);
    free(outs);
    kiln_tensor_free(lt);
    kiln_function_free(fg);
    kiln_function_free(fl);
    return st;
}
