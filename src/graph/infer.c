/* Shape and dtype rules of the ops that are not movement (infer_move.c):
   one function per row of ops.def, called by the builders on the node they
   are about to add and by the validator on every node of a program. */
#include <stdarg.h>
#include <stdio.h>

#include "graph/builders.h"
#include "graph/fused_program.h"

kiln_status kiln_infer_why(char *why, size_t len, kiln_status st,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return st;
}

kiln_status kiln_infer_f32(const kiln_node *n, int first, int count, char *why,
                           size_t len)
{
    for (int k = first; k < first + count; k++)
        if (n->in[k]->dtype != KILN_F32)
            return kiln_infer_why(
                why, len, KILN_ERR_DTYPE,
                "operand %%%d has dtype %s, expected f32 (use kiln_cast)",
                n->in[k]->id, kiln_dtype_name(n->in[k]->dtype));
    return KILN_OK;
}

kiln_status kiln_infer_leaf(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    *s = n->shape;
    *dt = n->dtype;
    if (!kiln_dtype_supported(n->dtype) || !kiln_shape_valid(n->shape))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "invalid shape or dtype");
    if (n->op == KILN_OP_CONSTANT && !n->at.data && kiln_shape_numel(n->shape))
        return kiln_infer_why(why, len, KILN_ERR_ARG, "constant without data");
    return KILN_OK;
}

kiln_status kiln_infer_error(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                             char *why, size_t len)
{
    (void)n, (void)s, (void)dt;
    return kiln_infer_why(why, len, KILN_ERR_STATE, "invalid op");
}

/* "[2,3] and [4,3] do not broadcast": apart from kiln_infer_map, whose
   every call would otherwise pay for this frame's buffers. */
KILN_COLD static kiln_status no_broadcast(const kiln_node *n, char *why,
                                          size_t len)
{
    char shapes[3 * SHAPE_BUF + 16], b[SHAPE_BUF];
    size_t at = 0;
    for (int k = 0; k < n->n_in && at < sizeof shapes; k++)
        at += (size_t)snprintf(shapes + at, sizeof shapes - at, "%s%s",
                               k == 0             ? ""
                               : k == n->n_in - 1 ? " and "
                                                  : ", ",
                               S(n->in[k]->shape, b));
    return kiln_infer_why(why, len, KILN_ERR_SHAPE, "%s do not broadcast",
                          shapes);
}

/* Elementwise: f32 operands broadcast together (numpy rules). */
kiln_status kiln_infer_map(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                           char *why, size_t len)
{
    kiln_status st = kiln_infer_f32(n, 0, n->n_in, why, len);
    if (st != KILN_OK)
        return st;
    *dt = KILN_F32;
    *s = n->in[0]->shape;
    for (int k = 1; k < n->n_in; k++) {
        const kiln_shape *b = &n->in[k]->shape;
        /* equal shapes, the common case, without copying shapes around:
           every node of a dynamic graph comes through here */
        if (kiln_shape_same(b, s))
            s->sym |= b->sym;
        else if (!kiln_shape_broadcast(*s, *b, s))
            return no_broadcast(n, why, len);
    }
    return KILN_OK;
}

/* Reductions over the axes of a mask; a sum over nothing is 0 (a product
   1), but a max has no value (docs/ops.md, "Zero-size dimensions"). */
kiln_status kiln_infer_reduce(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    kiln_shape x = n->in[0]->shape;
    unsigned axes = n->at.axes;
    char b[SHAPE_BUF];
    kiln_status st = kiln_infer_f32(n, 0, 1, why, len);
    if (st != KILN_OK)
        return st;
    if (axes >> x.ndim)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "axis mask 0x%x names axes beyond the %d dims",
                              axes, x.ndim);
    *s = (kiln_shape){0};
    for (int d = 0; d < x.ndim; d++) {
        if (!(axes & (1u << d)))
            s->d[s->ndim++] = x.d[d];
        else if (x.d[d] == 0 && n->op != KILN_OP_SUM && n->op != KILN_OP_PROD)
            return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                                  "cannot reduce over a zero-size dimension "
                                  "(axis %d of %s)",
                                  d, S(x, b));
        else if (n->at.keepdims)
            s->d[s->ndim++] = 1;
    }
    *dt = n->op == KILN_OP_ARGMAX ? KILN_I32 : KILN_F32;
    return KILN_OK;
}

kiln_status kiln_matmul_shape(kiln_shape a, kiln_shape b, int ta, int tb,
                              kiln_shape *out, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (a.ndim < 2 || b.ndim < 2)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "%s x %s: operands need 2 or more dims", S(a, b1),
                              S(b, b2));
    int64_t m = a.d[a.ndim - (ta ? 1 : 2)], ka = a.d[a.ndim - (ta ? 2 : 1)];
    int64_t kb = b.d[b.ndim - (tb ? 1 : 2)], nn = b.d[b.ndim - (tb ? 2 : 1)];
    if (ka != kb)
        return kiln_infer_why(
            why, len, KILN_ERR_SHAPE,
            "%s%s x %s%s: inner dimensions differ (%lld vs %lld)", S(a, b1),
            ta ? "^T" : "", S(b, b2), tb ? "^T" : "", (long long)ka,
            (long long)kb);
    kiln_shape ba = a, bb = b;
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (!kiln_shape_broadcast(ba, bb, out))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "batch dims of %s and %s do not broadcast",
                              S(a, b1), S(b, b2));
    out->d[out->ndim++] = m;
    out->d[out->ndim++] = nn;
    return KILN_OK;
}

kiln_status kiln_infer_matmul(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    kiln_status st = kiln_infer_f32(n, 0, 2, why, len);
    *dt = KILN_F32;
    return st != KILN_OK
               ? st
               : kiln_matmul_shape(n->in[0]->shape, n->in[1]->shape,
                                   n->at.trans_a, n->at.trans_b, s, why, len);
}

/* c + alpha op(a) op(b): 2-D a and b, c of the product's shape (it does
   not broadcast), alpha of one element. */
kiln_status kiln_infer_matmul_acc(const kiln_node *n, kiln_shape *s,
                                  kiln_dtype *dt, char *why, size_t len)
{
    kiln_shape a = n->in[1]->shape, b = n->in[2]->shape;
    kiln_status st = kiln_infer_f32(n, 0, 4, why, len);
    *dt = KILN_F32;
    if (st == KILN_OK &&
        (a.ndim != 2 || b.ndim != 2 || kiln_shape_numel(n->in[3]->shape) != 1))
        st = kiln_infer_why(why, len, KILN_ERR_SHAPE,
                            "needs 2-D a and b and one alpha");
    if (st == KILN_OK)
        st = kiln_matmul_shape(a, b, n->at.trans_a, n->at.trans_b, s, why, len);
    if (st == KILN_OK && !kiln_shape_equal(n->in[0]->shape, *s))
        st = kiln_infer_why(why, len, KILN_ERR_SHAPE,
                            "c does not have the product's shape");
    return st;
}

kiln_status kiln_infer_one_hot(const kiln_node *n, kiln_shape *s,
                               kiln_dtype *dt, char *why, size_t len)
{
    const kiln_node *x = n->in[0];
    if (x->dtype != KILN_I32)
        return kiln_infer_why(why, len, KILN_ERR_DTYPE,
                              "labels have dtype %s, expected i32",
                              kiln_dtype_name(x->dtype));
    if (n->at.depth <= 0)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "depth %d must be positive", n->at.depth);
    if (x->shape.ndim >= KILN_MAX_DIMS)
        return kiln_infer_why(why, len, KILN_ERR_SHAPE, "too many dims");
    *s = x->shape;
    s->d[s->ndim++] = n->at.depth;
    *dt = KILN_F32;
    return KILN_OK;
}

kiln_status kiln_infer_cast(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = n->dtype;
    if (!kiln_dtype_supported(n->dtype))
        return kiln_infer_why(why, len, KILN_ERR_DTYPE,
                              "dtype %s is not supported",
                              kiln_dtype_name(n->dtype));
    return KILN_OK;
}

kiln_status kiln_infer_same(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    (void)why, (void)len;
    *s = n->in[0]->shape;
    *dt = n->in[0]->dtype;
    return KILN_OK;
}

kiln_status kiln_infer_assign(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                              char *why, size_t len)
{
    const kiln_node *var = n->in[0], *val = n->in[1];
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    *s = val->shape;
    *dt = val->dtype;
    if (var->op != KILN_OP_VARIABLE)
        return kiln_infer_why(why, len, KILN_ERR_ARG,
                              "target %%%d is a %s, not a variable", var->id,
                              kiln_op_table[var->op].name);
    if (var->dtype != val->dtype || !kiln_shape_equal(var->shape, val->shape))
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "variable '%s' is %s%s, value is %s%s", var->name,
                              kiln_dtype_name(var->dtype), S(var->shape, b1),
                              kiln_dtype_name(val->dtype), S(val->shape, b2));
    return KILN_OK;
}

kiln_status kiln_infer_doall(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                             char *why, size_t len)
{
    (void)n, (void)why, (void)len;
    *s = KILN_SCALAR;
    *dt = KILN_F32;
    return KILN_OK;
}

/* f32 logits [N,C] and i32 labels [N]: the mean loss, a scalar. */
static kiln_status scores_labels(const kiln_node *n, char *why, size_t len)
{
    kiln_shape x = n->in[0]->shape, l = n->in[1]->shape;
    if (n->in[0]->dtype != KILN_F32 || n->in[1]->dtype != KILN_I32 ||
        x.ndim != 2 || l.ndim != 1 || l.d[0] != x.d[0])
        return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                              "needs f32 [N,C] logits and i32 [N] labels");
    return KILN_OK;
}

kiln_status kiln_infer_softmax_ce(const kiln_node *n, kiln_shape *s,
                                  kiln_dtype *dt, char *why, size_t len)
{
    *s = KILN_SCALAR;
    *dt = KILN_F32;
    return scores_labels(n, why, len);
}

kiln_status kiln_infer_softmax_ce_grad(const kiln_node *n, kiln_shape *s,
                                       kiln_dtype *dt, char *why, size_t len)
{
    *s = n->in[0]->shape;
    *dt = KILN_F32;
    kiln_status st = scores_labels(n, why, len);
    if (st == KILN_OK &&
        (n->in[2]->dtype != KILN_F32 || kiln_shape_numel(n->in[2]->shape) != 1))
        st = kiln_infer_why(why, len, KILN_ERR_SHAPE,
                            "needs an f32 adjoint of one element");
    return st;
}

/* 1 when a result of shape s and dtype dt has its first input's dims and
   dtype: that input passed the size check already (every elementwise
   node of a dynamic graph). */
static int sized_like_input(const kiln_node *proto, const kiln_shape *s,
                            kiln_dtype dt)
{
    return proto->n_in > 0 && proto->in[0]->dtype == dt &&
           kiln_shape_same(&proto->in[0]->shape, s);
}

KILN_COLD static kiln_node *too_big(kiln_graph *g, const char *fn, kiln_op op,
                                    kiln_shape s, const char *big)
{
    char b[SHAPE_BUF];
    return fn ? kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: result shape %s %s", fn,
                                S(s, b), big)
              : kiln_graph_fail(g, KILN_ERR_SHAPE,
                                "kiln_%s: result shape %s %s",
                                kiln_op_table[op].name, S(s, b), big);
}

kiln_node *kiln_node_build(kiln_graph *g, const char *fn,
                           const kiln_node *proto)
{
    char why[KILN_ERRMSG_MAX];
    kiln_shape s;
    kiln_dtype dt;
    if (g->status != KILN_OK)
        return &g->poison;
    kiln_status st =
        kiln_op_table[proto->op].infer(proto, &s, &dt, why, sizeof why);
    if (st != KILN_OK)
        return fn ? kiln_graph_fail(g, st, "%s: %s", fn, why)
                  : kiln_graph_fail(g, st, "kiln_%s: %s",
                                    kiln_op_table[proto->op].name, why);
    if (!sized_like_input(proto, &s, dt)) {
        const char *big = kiln_shape_size(s, kiln_dtype_size(dt), NULL, NULL);
        if (big)
            return too_big(g, fn, proto->op, s, big);
    }
    kiln_node *n =
        kiln_node_append(g, proto->op, dt, &s, proto->in, proto->n_in);
    if (n->op == proto->op) {
        if (kiln_op_table[n->op].attrs) /* else n->at is the arena's zeros */
            n->at = proto->at;
        /* the elementwise rule has merged the inputs' marks already */
        if (kiln_op_table[n->op].infer != kiln_infer_map)
            kiln_node_derive_sym(n);
    }
    return n;
}

/* A program's instructions read only earlier values and the node's inputs
   and are ops a program can run. */
static int fused_program_ok(const kiln_node *n)
{
    const kiln_fused_program *p = n->at.data;
    if (!p || p->n < 1 || p->n > KILN_FUSED_MAX_INSTRS ||
        n->n_in > KILN_FUSED_MAX_INPUTS)
        return 0;
    for (int i = 0; i < p->n; i++) {
        const kiln_fused_instr *ins = &p->ins[i];
        if (ins->op == KILN_FUSED_LOAD) {
            if (ins->arg[0] < 0 || ins->arg[0] >= n->n_in)
                return 0;
        } else if (ins->op != KILN_FUSED_IMM) {
            if (ins->op < 0 || ins->op >= KILN_OP_COUNT ||
                !kiln_fused_op_ok(ins->op))
                return 0;
            for (int k = 0; k < kiln_op_table[ins->op].arity; k++)
                if (ins->arg[k] < 0 || ins->arg[k] >= i)
                    return 0;
        }
    }
    return 1;
}

/* A program runs over its domain (the node's shape unless it reduces):
   every input broadcasts to the domain, a reduction is one the kernel
   runs, and the node's shape is the domain, reduced. */
kiln_status kiln_infer_fused(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                             char *why, size_t len)
{
    kiln_status st = kiln_infer_f32(n, 0, n->n_in, why, len);
    if (st != KILN_OK)
        return st;
    *dt = KILN_F32;
    *s = n->shape;
    if (!fused_program_ok(n))
        return kiln_infer_why(why, len, KILN_ERR_STATE, "invalid program");
    const kiln_fused_program *p = n->at.data;
    kiln_shape dom = kiln_fused_domain(n), b;
    if (p->reduce && ((p->reduce != KILN_OP_SUM && p->reduce != KILN_OP_RMAX) ||
                      !kiln_shape_valid(p->domain) ||
                      !kiln_fused_reduce_ok(p->domain, p->axes)))
        return kiln_infer_why(why, len, KILN_ERR_STATE, "invalid reduction");
    for (int k = 0; k < n->n_in; k++)
        if (!kiln_shape_broadcast(n->in[k]->shape, dom, &b) ||
            !kiln_shape_equal(b, dom))
            return kiln_infer_why(why, len, KILN_ERR_SHAPE,
                                  "input %d does not broadcast to the domain",
                                  k);
    if (!p->reduce) {
        *s = dom;
        return KILN_OK;
    }
    /* the reduction's own rule, on a value of the domain's shape */
    kiln_node x = {.dtype = KILN_F32, .shape = dom}, *xp = &x;
    kiln_node r = {.op = (kiln_op)p->reduce, .n_in = 1, .in = &xp};
    r.at.axes = p->axes;
    r.at.keepdims = p->keepdims;
    return kiln_infer_reduce(&r, s, dt, why, len);
}
