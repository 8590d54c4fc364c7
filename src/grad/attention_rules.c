/* Gradient rules of the attention group.  attention's is attention_grad,
   which gives dq, dk and dv in one packed tensor (sliced apart here) and
   has no gradient of its own, as PyTorch's fused attention has none; the
   mask gets none either.  rms_norm's is rms_norm_grad, linear in dy with a
   symmetric Jacobian (so its dy gradient is rms_norm_grad again); its x
   gradient is written out in primitives below. */
#include "grad/attention_rules.h"
#include "graph/attention.h"

#define NEED(i) (need & (1u << (i)))
#define B(op, a, b) kiln_binary_op(g, KILN_OP_##op, (a), (b))

void kiln_grad_rule_ATTENTION(kiln_graph *g, kiln_node *n, kiln_node *adj,
                              unsigned need, kiln_node **gin)
{
    kiln_attn_dims a = kiln_attn_dims_of(n);
    kiln_node *d = kiln_attention_grad_node(g, n, adj);
    int64_t nq = a.h * a.tq * a.d, nk = a.h * a.tk * a.d;
    if (NEED(0))
        gin[0] = kiln_attention_unpack(g, d, 0, nq, n->in[0]->shape);
    if (NEED(1))
        gin[1] = kiln_attention_unpack(g, d, nq, nk, n->in[1]->shape);
    if (NEED(2))
        gin[2] = kiln_attention_unpack(g, d, nq + nk, a.h * a.tk * a.e,
                                       n->in[2]->shape);
}

void kiln_grad_rule_RMS_NORM(kiln_graph *g, kiln_node *n, kiln_node *adj,
                             unsigned need, kiln_node **gin)
{
    (void)need;
    gin[0] = kiln_rms_norm_grad_node(g, n, n->in[0], adj);
}

/* The row mean of x over n's axes, kept as size 1. */
static kiln_node *row_mean(kiln_graph *g, const kiln_node *n, kiln_node *x)
{
    kiln_node *s = kiln_reduce_op(g, KILN_OP_SUM, x, n->at.axes, 1, "grad");
    return B(MUL, s, kiln_count_scalar(g, x->shape, n->at.axes, 1.0f, 1));
}

/* With r = (mean(x^2) + eps)^-1/2 and m = mean(dy x), rms_norm_grad is
   dx = r dy - r^3 m x; for an adjoint a of dx, with A = mean(a dy) and
   X = mean(a x), its x gradient is
   r^3 (3 r^2 m X x - A x - X dy - m a). */
void kiln_grad_rule_RMS_NORM_GRAD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                                  unsigned need, kiln_node **gin)
{
    kiln_node *x = n->in[0], *dy = n->in[1];
    if (NEED(1))
        gin[1] = kiln_rms_norm_grad_node(g, n, x, adj);
    if (!NEED(0))
        return;
    kiln_node *ms =
        B(ADD, row_mean(g, n, B(MUL, x, x)), kiln_scalar(g, n->at.value));
    kiln_node *r =
        B(DIV, kiln_scalar(g, 1.0f), kiln_unary_op(g, KILN_OP_SQRT, ms));
    kiln_node *r2 = B(MUL, r, r), *r3 = B(MUL, r2, r);
    kiln_node *m = row_mean(g, n, B(MUL, dy, x));
    kiln_node *A = row_mean(g, n, B(MUL, adj, dy));
    kiln_node *X = row_mean(g, n, B(MUL, adj, x));
    kiln_node *cx =
        B(SUB, B(MUL, kiln_scalar(g, 3.0f), B(MUL, r2, B(MUL, m, X))), A);
    kiln_node *t = B(SUB, B(MUL, cx, x), B(ADD, B(MUL, X, dy), B(MUL, m, adj)));
    gin[0] = B(MUL, r3, t);
}
