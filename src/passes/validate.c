/* The invariants a compile unit keeps through every pass, and its printout. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/fused_program.h"
#include "passes/passes.h"

static kiln_status bad(char *err, size_t len, const kiln_node *n,
                       const char *fmt, ...) KILN_PRINTF(4, 5);

static kiln_status bad(char *err, size_t len, const kiln_node *n,
                       const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(err, len, "%%%d = %s: %s", n->id, kiln_op_table[n->op].name,
                 msg);
    else
        snprintf(err, len, "%s", msg);
    return KILN_ERR_STATE;
}

static int broadcast_all(const kiln_node *n, kiln_shape *out)
{
    *out = n->in[0]->shape;
    for (int k = 1; k < n->n_in; k++)
        if (!kiln_shape_broadcast(*out, n->in[k]->shape, out))
            return 0;
    return 1;
}

static kiln_shape reduced(const kiln_node *n)
{
    kiln_shape x = n->in[0]->shape, out = {0};
    for (int d = 0; d < x.ndim; d++) {
        if (!(n->at.axes & (1u << d)))
            out.d[out.ndim++] = x.d[d];
        else if (n->at.keepdims)
            out.d[out.ndim++] = 1;
    }
    return out;
}

static int matmul_shape(const kiln_node *n, kiln_shape *out)
{
    int acc = n->op == KILN_OP_MATMUL_ACC; /* c, a, b, alpha */
    kiln_shape a = n->in[acc]->shape, b = n->in[acc + 1]->shape;
    if (acc &&
        (a.ndim != 2 || b.ndim != 2 || kiln_shape_numel(n->in[3]->shape) != 1))
        return 0;
    if (a.ndim < 2 || b.ndim < 2)
        return 0;
    int64_t m = a.d[a.ndim - (n->at.trans_a ? 1 : 2)];
    int64_t ka = a.d[a.ndim - (n->at.trans_a ? 2 : 1)];
    int64_t kb = b.d[b.ndim - (n->at.trans_b ? 1 : 2)];
    int64_t nn = b.d[b.ndim - (n->at.trans_b ? 2 : 1)];
    a.ndim -= 2;
    b.ndim -= 2;
    if (ka != kb || !kiln_shape_broadcast(a, b, out))
        return 0;
    out->d[out->ndim++] = m;
    out->d[out->ndim++] = nn;
    /* matmul_acc: c has the product's shape (it does not broadcast) */
    return !acc || kiln_shape_equal(n->in[0]->shape, *out);
}

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
static int fused_shape(const kiln_node *n, kiln_shape *s)
{
    const kiln_fused_program *p = n->at.data;
    kiln_shape dom = kiln_fused_domain(n), b;
    if (p->reduce && ((p->reduce != KILN_OP_SUM && p->reduce != KILN_OP_RMAX) ||
                      !kiln_shape_valid(p->domain) ||
                      !kiln_fused_reduce_ok(p->domain, p->axes)))
        return 0;
    for (int k = 0; k < n->n_in; k++)
        if (!kiln_shape_broadcast(n->in[k]->shape, dom, &b) ||
            !kiln_shape_equal(b, dom))
            return 0;
    if (!p->reduce) {
        *s = dom;
        return 1;
    }
    *s = (kiln_shape){0};
    for (int d = 0; d < dom.ndim; d++) {
        if (!(p->axes & (1u << d)))
            s->d[s->ndim++] = dom.d[d];
        else if (p->keepdims)
            s->d[s->ndim++] = 1;
    }
    return 1;
}

/* The shape n's op gives its inputs; 0 when the inputs or attributes are
   not valid for the op. */
/* Shape of a movement op (reshape, permute, broadcast, slice, pad, concat)
   from its input; 0 when the attributes do not fit the input. */
static int movement_shape(const kiln_node *n, kiln_shape *s)
{
    const kiln_node *x = n->in[0];
    *s = x->shape;
    switch (n->op) {
    case KILN_OP_RESHAPE:
        *s = n->shape;
        return kiln_shape_numel(n->shape) == kiln_shape_numel(x->shape);
    case KILN_OP_PERMUTE: {
        unsigned seen = 0;
        for (int d = 0; d < x->shape.ndim; d++) {
            int p = n->at.perm[d];
            if (p < 0 || p >= x->shape.ndim || (seen & (1u << p)))
                return 0;
            seen |= 1u << p;
            s->d[d] = x->shape.d[p];
        }
        return 1;
    }
    case KILN_OP_BROADCAST: {
        kiln_shape b;
        *s = n->shape;
        return x->shape.ndim <= n->shape.ndim &&
               kiln_shape_broadcast(x->shape, n->shape, &b) &&
               kiln_shape_equal(b, n->shape);
    }
    case KILN_OP_SLICE:
    case KILN_OP_PAD:
        *s = n->shape;
        for (int d = 0; d < x->shape.ndim; d++) {
            int64_t lo = n->at.lo[d], small = n->op == KILN_OP_SLICE
                                                  ? n->shape.d[d]
                                                  : x->shape.d[d];
            int64_t big =
                n->op == KILN_OP_SLICE ? x->shape.d[d] : n->shape.d[d];
            if (lo < 0 || lo + small > big)
                return 0;
        }
        return s->ndim == x->shape.ndim;
    case KILN_OP_CONCAT: {
        int ax = n->at.axis;
        if (ax < 0 || ax >= s->ndim)
            return 0;
        for (int k = 1; k < n->n_in; k++) {
            kiln_shape t = n->in[k]->shape;
            if (t.ndim != s->ndim)
                return 0;
            for (int d = 0; d < t.ndim; d++)
                if (d != ax && t.d[d] != s->d[d])
                    return 0;
            s->d[ax] += t.d[ax];
        }
        return 1;
    }
    default:
        return 0;
    }
}

static int infer_shape(const kiln_node *n, kiln_shape *s)
{
    const kiln_node *x = n->n_in ? n->in[0] : NULL;
    switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_LEAF:
        *s = n->shape;
        return n->op != KILN_OP_CONSTANT || n->at.data ||
               !kiln_shape_numel(n->shape);
    case KILN_KIND_UNARY:
        *s = x->shape;
        return 1;
    case KILN_KIND_BINARY:
    case KILN_KIND_TERNARY:
        return broadcast_all(n, s);
    case KILN_KIND_FUSED:
        return fused_program_ok(n) && fused_shape(n, s);
    case KILN_KIND_REDUCE:
        *s = reduced(n);
        return !(n->at.axes >> x->shape.ndim);
    case KILN_KIND_CONTRACT:
        return matmul_shape(n, s);
    case KILN_KIND_STATE:
        *s = n->op == KILN_OP_DOALL ? KILN_SCALAR : n->in[1]->shape;
        return n->op == KILN_OP_DOALL ||
               (x->op == KILN_OP_VARIABLE && kiln_shape_equal(x->shape, *s));
    case KILN_KIND_CONVERT:
        *s = x->shape;
        if (n->op == KILN_OP_ONEHOT) {
            if (s->ndim >= KILN_MAX_DIMS)
                return 0;
            s->d[s->ndim++] = n->at.depth;
        }
        return 1;
    case KILN_KIND_MOVE:
        return movement_shape(n, s);
    }
    return 0;
}

static kiln_dtype infer_dtype(const kiln_node *n)
{
    switch (n->op) {
    case KILN_OP_ARGMAX:
        return KILN_I32;
    case KILN_OP_ONEHOT:
    case KILN_OP_DOALL:
    case KILN_OP_MATMUL:
    case KILN_OP_MATMUL_ACC:
        return KILN_F32;
    case KILN_OP_CAST:
        return n->dtype;
    default:
        break;
    }
    kiln_op_kind k = kiln_op_table[n->op].kind;
    if (k == KILN_KIND_LEAF)
        return n->dtype;
    if (k == KILN_KIND_BINARY || k == KILN_KIND_TERNARY || k == KILN_KIND_FUSED)
        return KILN_F32;
    return n->in[n->op == KILN_OP_ASSIGN ? 1 : 0]->dtype;
}

static kiln_status validate_node(const kiln_graph *g, const kiln_node *n,
                                 int id, char *err, size_t len)
{
    char b1[96], b2[96];
    if (n->id != id || n->graph != g)
        return bad(err, len, n, "node %d has id %d or belongs to another graph",
                   id, n->id);
    if (n->op >= KILN_OP_COUNT || n->op == KILN_OP_ERROR)
        return bad(err, len, n, "invalid op");
    int ar = kiln_op_table[n->op].arity;
    if ((ar >= 0 && n->n_in != ar) || (ar < 0 && n->n_in < 1))
        return bad(err, len, n, "%d inputs, the op takes %d", n->n_in, ar);
    for (int k = 0; k < n->n_in; k++) {
        const kiln_node *x = n->in[k];
        if (!x || x->graph != g || x->id < 0 || x->id >= id ||
            g->nodes[x->id] != x)
            return bad(err, len, n, "input %d is not defined before its use",
                       k);
    }
    if (!kiln_shape_valid(n->shape) || !kiln_dtype_supported(n->dtype))
        return bad(err, len, n, "invalid shape or dtype");
    kiln_shape s;
    if (!infer_shape(n, &s))
        return bad(err, len, n, "inputs or attributes do not fit the op");
    if (!kiln_shape_equal(s, n->shape))
        return bad(err, len, n, "shape %s, its inputs give %s",
                   kiln_shape_str(n->shape, b1, sizeof b1),
                   kiln_shape_str(s, b2, sizeof b2));
    if (infer_dtype(n) != n->dtype)
        return bad(err, len, n, "dtype %s, its inputs give %s",
                   kiln_dtype_name(n->dtype), kiln_dtype_name(infer_dtype(n)));
    kiln_op_kind k = kiln_op_table[n->op].kind;
    for (int i = 0; i < n->n_in; i++)
        if ((k == KILN_KIND_UNARY || k == KILN_KIND_BINARY ||
             k == KILN_KIND_TERNARY || k == KILN_KIND_FUSED ||
             k == KILN_KIND_CONTRACT) &&
            n->in[i]->dtype != KILN_F32)
            return bad(err, len, n, "input %d is %s, not f32", i,
                       kiln_dtype_name(n->in[i]->dtype));
    return KILN_OK;
}

kiln_status kiln_unit_validate(const kiln_unit *p, char *err, size_t len)
{
    const kiln_graph *g = p->g;
    if (g->status != KILN_OK)
        return bad(err, len, NULL, "%s", g->err);
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_status st = validate_node(g, g->nodes[id], id, err, len);
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < p->n_out; i++) {
        const kiln_node *n = p->outputs[i];
        if (!n || n->graph != g || g->nodes[n->id] != n)
            return bad(err, len, NULL, "output %d is not a node of the graph",
                       i);
    }
    for (int i = 0; i < p->n_in; i++) {
        const kiln_node *n = p->inputs[i];
        if (!n || n->graph != g || g->nodes[n->id] != n ||
            n->op != KILN_OP_INPUT)
            return bad(err, len, NULL,
                       "input %d is not an input node of the graph", i);
    }
    return KILN_OK;
}

void kiln_unit_print(const kiln_unit *p, FILE *out)
{
    char prog[1024], op[1040], line[2048];
    const kiln_graph *g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        if (n->op == KILN_OP_FUSED)
            snprintf(op, sizeof op, "fused[%s]",
                     kiln_fused_format(n, prog, sizeof prog));
        kiln_node_format(n, n->op == KILN_OP_FUSED ? op : NULL, '"', line,
                         sizeof line);
        fprintf(out, "%s\n", line);
    }
    fprintf(out, "outputs:");
    for (int i = 0; i < p->n_out; i++)
        fprintf(out, " %%%d", p->outputs[i]->id);
    fputc('\n', out);
}
