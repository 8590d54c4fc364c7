/* Kiln: reverse-mode autodiff and gradient checking.
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_AUTODIFF_H
#define KILN_AUTODIFF_H

#include "kiln/graph.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- autodiff */

/* dy/dx for a scalar y, as a new node of x's shape.  A zero node when y does
   not depend on x. */
kiln_node *kiln_grad(kiln_graph *g, kiln_node *y, kiln_node *x);
/* Gradients of y (seeded with delta, of y's shape; NULL delta means 1 for a
   scalar y) with respect to n nodes xs, written to out[0..n-1]; the
   gradients share intermediate nodes.  KILN_OK or the graph's error. */
kiln_status kiln_grads(kiln_graph *g, kiln_node *y, kiln_node *delta,
                       kiln_node *const *xs, int n, kiln_node **out);
/* nGraph backprop_node(x, delta): the adjoint of x with y seeded by delta. */
kiln_node *kiln_backprop_node(kiln_graph *g, kiln_node *y, kiln_node *delta,
                              kiln_node *x);

/* ---------------------------------------------- gradient checking */

typedef struct kiln_gradcheck_result {
    double max_abs_err;  /* largest |autodiff - numeric| */
    double max_rel_err;  /* largest |a-n| / max(1, |a|, |n|)... see docs */
    int worst_node;      /* index into wrt of the worst element */
    int64_t worst_index; /* element index within that node */
} kiln_gradcheck_result;

/* Compares autodiff gradients of the scalar loss with respect to the n_wrt
   variables or inputs in wrt against central finite differences with step
   eps (double accumulation).  Inputs in feeds (n_feed pairs) are fed by
   value.  KILN_OK when every element satisfies |a-n| <= tol*(1+|n|), else
   KILN_ERR_NUMERIC with the worst element in res.  KILN_ERR_ARG
   (kiln_session_error) for bad arguments (eps or tol not finite and > 0, a
   loss not of g, a wrt that is not an f32 variable or input of g) and
   KILN_ERR_SHAPE for a loss that is not an f32 scalar, both checked before
   g is touched. */
kiln_status kiln_gradcheck(kiln_session *s, kiln_graph *g, kiln_node *loss,
                           kiln_node *const *wrt, int n_wrt,
                           kiln_node *const *feed_nodes,
                           kiln_tensor *const *feeds, int n_feed, double eps,
                           double tol, kiln_gradcheck_result *res);

KILN_DECLS_END
#endif /* KILN_AUTODIFF_H */
