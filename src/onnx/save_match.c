/* Which ONNX form a Kiln node takes.  Most ops map one to one; composites
   Kiln builds from primitives (softmax, log_softmax) and the normalisation
   pair norm_stats + norm are recognised by their shape in the graph, so
   the file holds one Softmax or BatchNormalization node, as PyTorch's
   exporter writes, instead of their pieces. */
#include "onnx/save.h"

/* The one axis of a reduction with keepdims, -1 otherwise. */
static int one_axis(const kiln_node *r, kiln_op op)
{
    if (r->op != op || !r->at.keepdims || !r->at.axes ||
        (r->at.axes & (r->at.axes - 1)))
        return -1;
    return __builtin_ctz(r->at.axes);
}

/* z = x - stop_gradient(reduce_max(x, axis, keepdims)): the shifted input
   of Kiln's softmax; its axis, or -1. */
static int shifted(const kiln_node *z, const kiln_node **x)
{
    if (z->op != KILN_OP_SUB || z->in[1]->op != KILN_OP_STOPGRAD)
        return -1;
    const kiln_node *m = z->in[1]->in[0];
    int a = one_axis(m, KILN_OP_RMAX);
    if (a < 0 || m->in[0] != z->in[0])
        return -1;
    *x = z->in[0];
    return a;
}

/* div(e, sum(e, axis)) with e = exp(shifted x): softmax(x, axis). */
static int softmax_of(const kiln_node *n, const kiln_node **x)
{
    if (n->op != KILN_OP_DIV || n->in[0]->op != KILN_OP_EXP)
        return -1;
    const kiln_node *e = n->in[0], *s = n->in[1];
    int a = one_axis(s, KILN_OP_SUM);
    if (a < 0 || s->in[0] != e || shifted(e->in[0], x) != a)
        return -1;
    return a;
}

/* z - log(sum(exp(z), axis)) with z the shifted x: log_softmax(x). */
static int log_softmax_of(const kiln_node *n, const kiln_node **x)
{
    if (n->op != KILN_OP_SUB || n->in[1]->op != KILN_OP_LOG)
        return -1;
    const kiln_node *z = n->in[0], *s = n->in[1]->in[0];
    int a = one_axis(s, KILN_OP_SUM);
    if (a < 0 || s->in[0]->op != KILN_OP_EXP || s->in[0]->in[0] != z ||
        shifted(z, x) != a)
        return -1;
    return a;
}

/* The node's kind and operands: n of them, in[] (copied when own). */
static void deps(sv_match *m, sv_kind kind, const kiln_node *const *in, int n,
                 int own)
{
    m->kind = kind;
    m->n_dep = n;
    m->dep = in;
    if (own) {
        for (int k = 0; k < n; k++)
            m->own[k] = in[k];
        m->dep = m->own;
    }
}

static void inputs(sv_match *m, sv_kind kind, const kiln_node *n)
{
    deps(m, kind, (const kiln_node *const *)n->in, n->n_in, 0);
}

/* norm(x, stats, w, b): the three forms ONNX opset 17 has. */
static void match_norm(const kiln_node *n, sv_match *m)
{
    const kiln_node *st = n->in[1];
    kiln_norm_attr a = n->at.norm;
    int64_t ch = n->shape.d[a.axis];
    const kiln_node *in[5] = {n->in[0], n->in[2], n->in[3]};
    inputs(m, SV_UNSUPPORTED, n);
    if (st->op != KILN_OP_NORM_STATS || st->in[0] != n->in[0])
        return;
    if (a.groups == 0 && a.axis == 1 && st->n_in == 4) {
        in[3] = st->in[1];
        in[4] = st->in[2];
        deps(m, SV_BATCH_NORM, in, 5, 1);
    } else if (a.groups == 1 && st->n_in == 1)
        deps(m, SV_LAYER_NORM, in, 3, 1);
    else if (a.axis == 1 && a.groups == ch && n->shape.ndim >= 3 &&
             st->n_in == 1)
        deps(m, SV_INSTANCE_NORM, in, 3, 1);
    else if (a.axis == 1 && a.groups > 1 && st->n_in == 1)
        deps(m, SV_GROUP_NORM, in, 3, 1);
}

void sv_match_node(const kiln_node *n, sv_match *m)
{
    const kiln_node *x;
    m->axis = -1;
    if (kiln_op_table[n->op].kind == KILN_KIND_LEAF && n->op != KILN_OP_RNG_KEY)
        deps(m, SV_LEAF, NULL, 0, 0);
    else if ((m->axis = softmax_of(n, &x)) >= 0)
        deps(m, SV_SOFTMAX, &x, 1, 1);
    else if ((m->axis = log_softmax_of(n, &x)) >= 0)
        deps(m, SV_LOG_SOFTMAX, &x, 1, 1);
    else if (n->op == KILN_OP_DROPOUT || n->op == KILN_OP_STOPGRAD)
        deps(m, SV_ALIAS, (const kiln_node *const *)n->in, 1, 0);
    else if (n->op == KILN_OP_NORM)
        match_norm(n, m);
    else
        inputs(m, SV_OP, n);
}
