/* Gradient rules, one per primitive op.  A rule receives the node n, its
   adjoint adj and a mask of the inputs that need a gradient, and writes the
   contribution for input i to gin[i] (any shape that broadcasts to the
   input's; the engine sums broadcast axes away).  Rules build ordinary nodes,
   so gradients can themselves be differentiated. */
#include "grad/attention_rules.h"
#include "grad/conv_rules.h"
#include "grad/grad.h"
#include "grad/pool_rules.h"
#include "grad/norm_rules.h"
#include "grad/index_rules.h"

#define NEED(i) (need & (1u << (i)))
#define B(op, a, b) kiln_binary_op(g, KILN_OP_##op, (a), (b))
#define U(op, a) kiln_unary_op(g, KILN_OP_##op, (a))
#define C(v) kiln_scalar(g, (v))

#define RULE(OP)                                                               \
    static void grad_##OP(kiln_graph *g, kiln_node *n, kiln_node *adj,         \
                          unsigned need, kiln_node **gin)

#define SEL(c, a, b) kiln_select(g, (c), (a), (b))

/* The rules of the elementwise ops whose rows (graph/elementwise.def) give
   their gradient as a formula: D(dx), or D2(dx, dy) for binary ops, in the
   node x (and y), the result out and its adjoint adj.  GRAD_DEF_<kind>
   turns a row's gradient into (emit, formulas...), so that the rows whose
   rule is written out below (RULE) or that have none (NONE) emit nothing. */
#define GRAD_DEF(def, OP) GRAD_EMIT(def, OP)
#define GRAD_EMIT(emit, ...) emit(__VA_ARGS__)
#define GRAD_DEF_D(dx) GRAD_UNARY, dx
#define GRAD_DEF_D2(dx, dy) GRAD_BINARY, dx, dy
#define GRAD_DEF_RULE GRAD_NOTHING, ~
#define GRAD_DEF_NONE GRAD_NOTHING, ~
#define GRAD_NOTHING(...)
#define GRAD_UNARY(dx, OP)                                                     \
    RULE(OP)                                                                   \
    {                                                                          \
        kiln_node *x = n->in[0], *out = n;                                     \
        (void)g, (void)x, (void)out, (void)need;                               \
        gin[0] = (dx);                                                         \
    }
#define GRAD_BINARY(dx, dy, OP)                                                \
    RULE(OP)                                                                   \
    {                                                                          \
        kiln_node *x = n->in[0], *y = n->in[1], *out = n;                      \
        (void)g, (void)x, (void)y, (void)out;                                  \
        if (NEED(0))                                                           \
            gin[0] = (dx);                                                     \
        if (NEED(1))                                                           \
            gin[1] = (dy);                                                     \
    }
#define KILN_UNARY(OP, name, f, grad, ...) GRAD_DEF(GRAD_DEF_##grad, OP)
#define KILN_BINARY(OP, name, f, grad, ...) GRAD_DEF(GRAD_DEF_##grad, OP)
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY

/* As PyTorch: d/da is 0 where b == 0 (so 0^0 has slope 0, not 0 * inf),
   d/db is 0 where a == 0 and b >= 0 (not 0 * log 0). */
RULE(POW)
{
    kiln_node *a = n->in[0], *b = n->in[1], *zero = C(0.0f);
    if (NEED(0)) {
        kiln_node *d = B(MUL, adj, B(MUL, b, B(POW, a, B(SUB, b, C(1.0f)))));
        gin[0] = kiln_select(g, B(EQ, b, zero), zero, d);
    }
    if (NEED(1)) {
        kiln_node *flat = B(MUL, B(EQ, a, zero), B(GE, b, zero));
        gin[1] = kiln_select(g, flat, zero, B(MUL, adj, B(MUL, n, U(LOG, a))));
    }
}

/* The gradient of max(a, b) (or min) for a, given where a loses to b:
   where(loses, 0, where(a == b, adj / 2, adj)) as torch.maximum and
   torch.minimum give: ties split evenly, and where either is NaN neither
   loses nor ties, so both get adj. */
static kiln_node *winner_grad(kiln_graph *g, kiln_node *a, kiln_node *b,
                              kiln_node *loses, kiln_node *adj)
{
    kiln_node *shared = kiln_select(g, B(EQ, a, b), B(MUL, adj, C(0.5f)), adj);
    return kiln_select(g, loses, C(0.0f), shared);
}

RULE(MAX)
{
    kiln_node *a = n->in[0], *b = n->in[1];
    if (NEED(0))
        gin[0] = winner_grad(g, a, b, B(LT, a, b), adj);
    if (NEED(1))
        gin[1] = winner_grad(g, b, a, B(LT, b, a), adj);
}
RULE(MIN)
{
    kiln_node *a = n->in[0], *b = n->in[1];
    if (NEED(0))
        gin[0] = winner_grad(g, a, b, B(GT, a, b), adj);
    if (NEED(1))
        gin[1] = winner_grad(g, b, a, B(GT, b, a), adj);
}
RULE(SELECT)
{
    kiln_node *zero = C(0.0f);
    kiln_node *in1[3] = {n->in[0], adj, zero};
    kiln_node *in2[3] = {n->in[0], zero, adj};
    if (NEED(1))
        gin[1] =
            kiln_node_make(g, KILN_OP_SELECT, KILN_F32, adj->shape, in1, 3);
    if (NEED(2))
        gin[2] =
            kiln_node_make(g, KILN_OP_SELECT, KILN_F32, adj->shape, in2, 3);
}

/* adj of a reduction, reshaped so that it broadcasts against the input. */
static kiln_node *keepdims_view(kiln_graph *g, kiln_node *n, kiln_node *v)
{
    if (n->at.keepdims)
        return v;
    kiln_shape ks = n->in[0]->shape;
    for (int d = 0; d < ks.ndim; d++)
        if (n->at.axes & (1u << d))
            ks.d[d] = 1;
    kiln_node *r = kiln_node_make(g, KILN_OP_RESHAPE, v->dtype, ks, &v, 1);
    kiln_node_derive_sym(r);
    return r;
}

RULE(SUM)
{
    (void)need;
    kiln_node *a = keepdims_view(g, n, adj);
    gin[0] =
        kiln_node_make(g, KILN_OP_BROADCAST, KILN_F32, n->in[0]->shape, &a, 1);
}
RULE(RMAX)
{
    (void)need;
    kiln_node *x = n->in[0];
    kiln_node *mask = B(EQ, x, keepdims_view(g, n, n));
    kiln_node *count =
        kiln_reduce_op(g, KILN_OP_SUM, mask, n->at.axes, 1, "grad");
    gin[0] = B(MUL, B(DIV, mask, count), keepdims_view(g, n, adj));
}

RULE(RESHAPE)
{
    (void)need;
    gin[0] = kiln_node_make(g, KILN_OP_RESHAPE, adj->dtype, n->in[0]->shape,
                            &adj, 1);
    kiln_node_derive_sym(gin[0]);
}
RULE(STOPGRAD)
{
    (void)g, (void)n, (void)adj, (void)need, (void)gin;
}
RULE(PERMUTE)
{
    (void)need;
    int inv[KILN_MAX_DIMS];
    for (int d = 0; d < n->shape.ndim; d++)
        inv[n->at.perm[d]] = d;
    kiln_node *r = kiln_node_make(g, KILN_OP_PERMUTE, adj->dtype,
                                  n->in[0]->shape, &adj, 1);
    for (int d = 0; d < n->shape.ndim; d++)
        r->at.perm[d] = inv[d];
    kiln_node_derive_sym(r);
    gin[0] = r;
}
RULE(BROADCAST)
{
    (void)g, (void)n, (void)need;
    gin[0] = adj; /* the engine reduces it to the input's shape */
}
RULE(SLICE)
{
    (void)need;
    kiln_node *r =
        kiln_node_make(g, KILN_OP_PAD, adj->dtype, n->in[0]->shape, &adj, 1);
    for (int d = 0; d < n->shape.ndim; d++)
        r->at.lo[d] = n->at.lo[d];
    kiln_node_derive_sym(r);
    gin[0] = r;
}
RULE(PAD)
{
    (void)need;
    kiln_node *r =
        kiln_node_make(g, KILN_OP_SLICE, adj->dtype, n->in[0]->shape, &adj, 1);
    for (int d = 0; d < n->shape.ndim; d++)
        r->at.lo[d] = n->at.lo[d];
    kiln_node_derive_sym(r);
    gin[0] = r;
}
RULE(CONCAT)
{
    int64_t off = 0;
    for (int k = 0; k < n->n_in; k++) {
        kiln_shape s = n->in[k]->shape;
        if (NEED(k)) {
            kiln_node *r =
                kiln_node_make(g, KILN_OP_SLICE, adj->dtype, s, &adj, 1);
            r->at.lo[n->at.axis] = off;
            kiln_node_derive_sym(r);
            gin[k] = r;
        }
        off += s.d[n->at.axis];
    }
}

static kiln_node *mm(kiln_graph *g, kiln_node *a, kiln_node *b, int ta, int tb)
{
    kiln_node *in[2] = {a, b};
    kiln_node p = {.op = KILN_OP_MATMUL, .n_in = 2, .in = in};
    p.at.trans_a = ta;
    p.at.trans_b = tb;
    return kiln_node_build(g, "grad", &p);
}

/* C = op(A) op(B): d op(A) = adj op(B)^T and d op(B) = op(A)^T adj, with
   the transposes folded into the matmul flags rather than materialised. */
RULE(MATMUL)
{
    kiln_node *a = n->in[0], *b = n->in[1];
    int ta = n->at.trans_a, tb = n->at.trans_b;
    if (NEED(0))
        gin[0] = ta ? mm(g, b, adj, tb, 1) : mm(g, adj, b, 0, !tb);
    if (NEED(1))
        gin[1] = tb ? mm(g, adj, a, 1, ta) : mm(g, a, adj, !ta, 0);
}

RULE(CAST)
{
    (void)need;
    if (n->dtype == KILN_F32 && n->in[0]->dtype == KILN_F32)
        gin[0] = adj;
    (void)g;
}

/* The fused loss's gradient is the fused SOFTMAX_CE_GRAD op; labels get
   none. */
RULE(SOFTMAX_CE)
{
    (void)need;
    kiln_node *in[3] = {n->in[0], n->in[1], adj};
    gin[0] = kiln_node_make(g, KILN_OP_SOFTMAX_CE_GRAD, KILN_F32,
                            n->in[0]->shape, in, 3);
}

/* out = (p - onehot) * a / N with p = softmax(x) over rows: dx = a/N *
   p * (G - rowsum(G p)) and da = sum(G (p - onehot)) / N, in primitives so
   that they can be differentiated again. */
RULE(SOFTMAX_CE_GRAD)
{
    kiln_node *x = n->in[0];
    int64_t rows = x->shape.d[0];
    kiln_node *inv_n = C(rows ? 1.0f / (float)rows : 0.0f);
    kiln_node *m = kiln_stop_gradient(
        g, kiln_reduce_op(g, KILN_OP_RMAX, x, 2u, 1, "grad"));
    kiln_node *e = U(EXP, B(SUB, x, m));
    kiln_node *p = B(DIV, e, kiln_reduce_op(g, KILN_OP_SUM, e, 2u, 1, "grad"));
    if (NEED(0)) {
        kiln_node *gp =
            kiln_reduce_op(g, KILN_OP_SUM, B(MUL, adj, p), 2u, 1, "grad");
        gin[0] = B(MUL, B(MUL, n->in[2], inv_n), B(MUL, p, B(SUB, adj, gp)));
    }
    if (NEED(2)) {
        kiln_node *oh = kiln_one_hot(g, n->in[1], (int)x->shape.d[1]);
        kiln_node *d = B(MUL, adj, B(SUB, p, oh));
        gin[2] =
            B(MUL, kiln_reduce_op(g, KILN_OP_SUM, d, KILN_ALL_AXES, 0, "grad"),
              inv_n);
    }
}

/* Ops without a rule: NONE and INTERNAL in the op table. */
#define GRAD_ENTRY_OF(kind, op) GRAD_ENTRY(kind, op)
#define GRAD_ENTRY(kind, op) GRAD_ENTRY_##kind(op)
#define GRAD_ENTRY_RULE(op) grad_##op
#define GRAD_ENTRY_NONE(op) NULL
#define GRAD_ENTRY_INTERNAL(op) NULL

const kiln_grad_rule kiln_grad_rules[KILN_OP_COUNT] = {
#define X(op, name, arity, kind, infer, attrs, alias, grad)                    \
    [KILN_OP_##op] = GRAD_ENTRY_OF(grad, op),
#include "graph/ops.def"
#undef X
};
