/* Algebraic simplification: identities that remove a kernel or merge two.
   Each rule returns the replacement of a node (built from the already
   rewritten inputs) or NULL to keep it.  Rules never look through a node
   marked for debugging, so its value is still computed and printed. */
#include <stdlib.h>

#include "passes/passes.h"

static int plain(const kiln_node *n)
{
    return !kiln_node_pinned(n);
}

static int is_zero(const kiln_node *n)
{
    return kiln_is_constant_value(n, 0.0f) || kiln_is_constant_value(n, -0.0f);
}

/* x when it can stand for old as is (same shape and dtype), else NULL. */
static kiln_node *as_is(const kiln_node *old, kiln_node *x)
{
    return x->dtype == old->dtype && kiln_shape_equal(x->shape, old->shape)
               ? x
               : NULL;
}

static kiln_node *simplify_arith(kiln_rewriter *rw, const kiln_node *old,
                                 kiln_node **in)
{
    kiln_node *a = in[0], *b = in[1], *r = NULL;
    switch (old->op) {
    case KILN_OP_MUL:
        if ((r = kiln_match_gelu_tanh(rw, old)))
            return r;
        if (kiln_is_constant_value(b, 1.0f))
            r = as_is(old, a);
        if (!r && kiln_is_constant_value(a, 1.0f))
            r = as_is(old, b);
        return r;
    case KILN_OP_DIV:
        return kiln_is_constant_value(b, 1.0f) ? as_is(old, a) : NULL;
    case KILN_OP_ADD:
        if (is_zero(b))
            r = as_is(old, a);
        if (!r && is_zero(a))
            r = as_is(old, b);
        return r;
    case KILN_OP_SUB:
        if (is_zero(b))
            return as_is(old, a);
        /* NaN - NaN and inf - inf are NaN, so only under finite_math */
        if (a == b && rw->opt->finite_math)
            return kiln_fill(rw->out->g, old->shape, 0.0f);
        return NULL;
    case KILN_OP_NEG:
        return a->op == KILN_OP_NEG && plain(a) ? as_is(old, a->in[0]) : NULL;
    default:
        return NULL;
    }
}

static int is_identity(const int *perm, int nd)
{
    for (int d = 0; d < nd; d++)
        if (perm[d] != d)
            return 0;
    return 1;
}

/* 1 when perm only swaps the last two of nd axes. */
static int is_last_two_swap(const kiln_node *p)
{
    int nd = p->shape.ndim;
    if (p->op != KILN_OP_PERMUTE || !plain(p) || nd < 2)
        return 0;
    for (int d = 0; d < nd - 2; d++)
        if (p->at.perm[d] != d)
            return 0;
    return p->at.perm[nd - 2] == nd - 1 && p->at.perm[nd - 1] == nd - 2;
}

static kiln_node *simplify_movement(kiln_rewriter *rw, const kiln_node *old,
                                    kiln_node **in)
{
    kiln_graph *g = rw->out->g;
    kiln_node *x = in[0];
    switch (old->op) {
    case KILN_OP_STOPGRAD:
        return as_is(old, x); /* gradients are already built */
    case KILN_OP_CAST:
    case KILN_OP_BROADCAST:
        return as_is(old, x);
    case KILN_OP_RESHAPE:
        if (as_is(old, x))
            return x;
        if (x->op == KILN_OP_RESHAPE && plain(x))
            return as_is(old, x->in[0]) ? x->in[0]
                                        : kiln_reshape(g, x->in[0], old->shape);
        return NULL;
    case KILN_OP_PERMUTE: {
        int nd = old->shape.ndim, perm[KILN_MAX_DIMS];
        if (is_identity(old->at.perm, nd))
            return x;
        if (x->op != KILN_OP_PERMUTE || !plain(x))
            return NULL;
        /* out axis d = x axis perm[d] = x's input axis x.perm[perm[d]] */
        for (int d = 0; d < nd; d++)
            perm[d] = x->at.perm[old->at.perm[d]];
        return is_identity(perm, nd) ? x->in[0]
                                     : kiln_permute(g, x->in[0], perm);
    }
    case KILN_OP_MATMUL: {
        kiln_node *a = in[0], *b = in[1], *r;
        int ta = old->at.trans_a, tb = old->at.trans_b;
        if ((r = kiln_match_attention(rw, old)))
            return r;
        if (!is_last_two_swap(a) && !is_last_two_swap(b))
            return NULL;
        if (is_last_two_swap(a)) {
            a = a->in[0];
            ta = !ta;
        }
        if (is_last_two_swap(b)) {
            b = b->in[0];
            tb = !tb;
        }
        return kiln_matmul(g, a, b, ta, tb);
    }
    default:
        return NULL;
    }
}

/* sum(broadcast(x)) over exactly the axes the broadcast expanded (plus any
   of size 1) is x * count; the sum of count equal floats in double, rounded
   once, equals the rounded product, so the result is unchanged. */
static kiln_node *sum_of_broadcast(kiln_graph *g, const kiln_node *old,
                                   kiln_node *b)
{
    if (b->op != KILN_OP_BROADCAST || !plain(b) || b->dtype != KILN_F32)
        return NULL;
    kiln_node *x = b->in[0];
    kiln_shape o = b->shape;
    int off = o.ndim - x->shape.ndim;
    int64_t count = 1;
    for (int d = 0; d < o.ndim; d++) {
        int summed = (old->at.axes >> d) & 1;
        int expanded = d < off ? o.d[d] != 1 : x->shape.d[d - off] != o.d[d];
        if ((expanded && !summed) || (summed && !expanded && o.d[d] != 1))
            return NULL;
        if (summed)
            count *= o.d[d];
    }
    if (count <= 0 || count > (1 << 24))
        return NULL;
    kiln_node *y =
        count == 1 ? x : kiln_mul(g, x, kiln_scalar(g, (float)count));
    return kiln_shape_equal(y->shape, old->shape)
               ? y
               : kiln_reshape(g, y, old->shape);
}

static kiln_node *simplify_reduce(kiln_rewriter *rw, const kiln_node *old,
                                  kiln_node **in)
{
    kiln_graph *g = rw->out->g;
    kiln_node *x = in[0];
    if (old->op != KILN_OP_SUM && old->op != KILN_OP_RMAX)
        return NULL;
    int trivial = 1; /* every reduced axis has size 1 */
    for (int d = 0; d < x->shape.ndim; d++)
        if ((old->at.axes >> d) & 1 && x->shape.d[d] != 1)
            trivial = 0;
    if (trivial)
        return as_is(old, x) ? x : kiln_reshape(g, x, old->shape);
    return old->op == KILN_OP_SUM ? sum_of_broadcast(g, old, x) : NULL;
}

static kiln_node *simplify(kiln_rewriter *rw, const kiln_node *old,
                           kiln_node **in)
{
    if (kiln_node_pinned(old))
        return NULL;
    switch (kiln_op_table[old->op].kind) {
    case KILN_KIND_UNARY:
    case KILN_KIND_BINARY:
        return simplify_arith(rw, old, in);
    case KILN_KIND_MOVE:
    case KILN_KIND_CONVERT:
    case KILN_KIND_CONTRACT:
        return simplify_movement(rw, old, in);
    case KILN_KIND_REDUCE:
        return simplify_reduce(rw, old, in);
    default:
        return NULL;
    }
}

kiln_status kiln_pass_simplify(const kiln_unit *in, kiln_unit *out,
                               const kiln_compile_options *opt,
                               kiln_eval_fn eval)
{
    /* the attention rule needs each node's uses */
    int *uses = kiln_unit_uses(in);
    if (!uses) {
        kiln_graph_fail(out->g, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        return KILN_ERR_MEMORY;
    }
    kiln_status s = kiln_rewrite(in, out, opt, eval, NULL, simplify, uses);
    free(uses);
    return s;
}
