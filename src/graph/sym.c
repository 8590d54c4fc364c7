/* Symbolic sizes: which axes of a node follow the symbolic size declared by
   kiln_input_sym, and the counts (a mean's 1 / N) that depend on it.

   A graph is built, and runs dynamically, at the sizes its inputs were
   given; the marks say which of those sizes a compiled function may change
   (passes/symbolic.c substitutes them).  Builders that copy an input's
   shape carry its marks; kiln_shape_broadcast carries them for elementwise
   ops; every other builder calls kiln_node_derive_sym. */
#include <math.h>

#include "graph/graph.h"
#include "graph/index.h"

static int has(unsigned sym, int axis)
{
    return (sym >> axis) & 1u;
}

/* A reshape keeps a symbolic axis where the elements before it, and its
   size, are the same in both shapes; one merged with or split across other
   axes is lost (a compiled function then refuses the graph). */
static unsigned reshape_sym(kiln_shape in, kiln_shape out)
{
    unsigned sym = 0;
    int64_t before_in = 1;
    for (int i = 0; i < in.ndim; before_in *= in.d[i], i++) {
        if (!has(in.sym, i))
            continue;
        int64_t before = 1;
        for (int j = 0; j < out.ndim; before *= out.d[j], j++) {
            if (before == before_in && out.d[j] == in.d[i] && !has(sym, j)) {
                sym |= 1u << j;
                break;
            }
        }
    }
    return sym;
}

static unsigned reduce_sym(const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape;
    unsigned sym = 0;
    int j = 0;
    for (int i = 0; i < in.ndim; i++) {
        if (!has(n->at.axes, i))
            sym |= (unsigned)has(in.sym, i) << j++;
        else if (n->at.keepdims)
            j++;
    }
    return sym;
}

/* The axes of n's shape equal to an axis of x's that follows the size,
   aligning trailing axes (numpy broadcasting). */
static unsigned carried(const kiln_node *n, kiln_shape x)
{
    unsigned sym = 0;
    int off = n->shape.ndim - x.ndim;
    for (int i = off < 0 ? -off : 0; i < x.ndim; i++)
        if (has(x.sym, i) && x.d[i] == n->shape.d[i + off])
            sym |= 1u << (i + off);
    return sym;
}

static unsigned move_sym(const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape;
    unsigned sym = 0;
    switch (n->op) {
    case KILN_OP_RESHAPE:
        return reshape_sym(in, n->shape);
    case KILN_OP_PERMUTE:
        for (int i = 0; i < in.ndim; i++)
            sym |= (unsigned)has(in.sym, n->at.perm[i]) << i;
        return sym;
    case KILN_OP_BROADCAST:
        return n->shape.sym | carried(n, in);
    case KILN_OP_CONCAT:
        return in.sym & ~(1u << n->at.axis);
    default: /* slice, pad: an axis kept whole */
        for (int i = 0; i < in.ndim; i++)
            if (has(in.sym, i) && n->at.lo[i] == 0 && in.d[i] == n->shape.d[i])
                sym |= 1u << i;
        return sym;
    }
}

/* Batch axes broadcast, rows from a, columns from b. */
static unsigned matmul_sym(const kiln_node *n)
{
    kiln_shape a = n->in[0]->shape, b = n->in[1]->shape, out;
    int ra = a.ndim - (n->at.trans_a ? 1 : 2);
    int cb = b.ndim - (n->at.trans_b ? 2 : 1);
    unsigned row = has(a.sym, ra), col = has(b.sym, cb);
    a.ndim -= 2;
    b.ndim -= 2;
    if (!kiln_shape_broadcast(a, b, &out))
        return 0;
    return out.sym | row << out.ndim | col << (out.ndim + 1);
}

static unsigned derive(const kiln_node *n)
{
    kiln_shape s;
    unsigned sym;
    if (kiln_index_sym(n, &sym))
        return sym;
    switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_LEAF:
    case KILN_KIND_FUSED:
        return n->shape.sym;
    case KILN_KIND_BINARY:
    case KILN_KIND_TERNARY:
        /* most graphs have no marks: skip the broadcast (a dynamic run
           builds every node of every step) */
        if (!(n->in[0]->shape.sym | n->in[1]->shape.sym |
              (n->n_in > 2 ? n->in[2]->shape.sym : 0)))
            return 0;
        s = n->in[0]->shape;
        for (int k = 1; k < n->n_in; k++)
            if (!kiln_shape_broadcast(s, n->in[k]->shape, &s))
                return 0;
        return s.sym;
    case KILN_KIND_REDUCE:
        return reduce_sym(n);
    case KILN_KIND_MOVE:
        return move_sym(n);
    case KILN_KIND_CONTRACT:
        return n->op == KILN_OP_MATMUL ? matmul_sym(n) : n->shape.sym;
    case KILN_KIND_STATE:
        return n->op == KILN_OP_ASSIGN ? n->in[1]->shape.sym : 0;
    default: /* unary and conversions keep their input's axes */
        return n->in[0]->shape.sym;
    }
}

void kiln_node_derive_sym(kiln_node *n)
{
    if (n->op != KILN_OP_ERROR)
        n->shape.sym = derive(n);
}

float kiln_count_value(const kiln_count *c, int64_t size)
{
    int64_t count = c->base;
    for (int i = 0; i < c->k; i++)
        if (__builtin_mul_overflow(count, size, &count))
            return NAN;
    if (!c->recip)
        return c->sign * (float)count;
    return count ? c->sign * (1.0f / (float)count) : NAN;
}

kiln_node *kiln_count_scalar(kiln_graph *g, kiln_shape x, unsigned axes,
                             float sign, int recip)
{
    kiln_count c = {1, 0, recip != 0, sign};
    int64_t size = 0;
    for (int i = 0; i < x.ndim; i++) {
        if (!has(axes, i))
            continue;
        if (has(x.sym, i)) {
            c.k++;
            size = x.d[i];
        } else {
            c.base *= x.d[i];
        }
    }
    kiln_node *n = kiln_scalar(g, kiln_count_value(&c, size));
    if (n->op == KILN_OP_CONSTANT && c.k)
        n->at.count = c;
    return n;
}
