/* Attention written out in primitives, softmax(q k^T / c + mask) v with
   the softmax as kiln_softmax builds it (an ONNX export's MatMul, Div, Add,
   Softmax, MatMul chain imports as exactly that), becomes one fused
   attention op: its kernel never stores the [Tq,Tk] scores of all heads,
   and runs the scaling, mask, max, exponentials and sum in one pass over
   each tile where the written-out form runs six kernels over all of them.

   The fused op differs from the written-out form only on a row of scores
   that are all -inf (it gives 0, the softmax NaN), so the mask must be a
   constant with a value above -inf in every row.  Every node between the
   two products must be used only inside the pattern: a gradient built
   from them (training) would need them computed anyway. */
#include <math.h>

#include "passes/passes.h"

/* Whether x is an f32 node, not pinned, with exactly uses uses. */
static int inner(const kiln_rewriter *rw, const kiln_node *x, int uses)
{
    const int *use = rw->state;
    return x->dtype == KILN_F32 && !kiln_node_pinned(x) && use[x->id] == uses;
}

/* A reduction over the last axis only, keeping it. */
static int last_axis(const kiln_node *r, kiln_op op)
{
    return r->op == op && r->at.keepdims &&
           r->at.axes == 1u << (r->shape.ndim - 1);
}

static int scalar_const(const kiln_node *n, float *v)
{
    if (n->op != KILN_OP_CONSTANT || n->dtype != KILN_F32 ||
        kiln_shape_numel(n->shape) != 1 || n->shape.sym)
        return 0;
    *v = ((const float *)n->at.data)[0];
    return 1;
}

/* A constant f32 mask with a value above -inf in every row of its last
   axis (a row broadcast over the keys is its one value). */
static int mask_ok(const kiln_node *m)
{
    if (m->op != KILN_OP_CONSTANT || m->dtype != KILN_F32 || m->shape.sym ||
        m->shape.ndim < 1)
        return 0;
    const float *v = m->at.data;
    int64_t n = kiln_shape_numel(m->shape), w = m->shape.d[m->shape.ndim - 1];
    for (int64_t r = 0; r < n; r += w) {
        int seen = 0;
        for (int64_t j = 0; j < w && !seen; j++)
            seen = v[r + j] > -INFINITY;
        if (!seen)
            return 0;
    }
    return 1;
}

/* The pieces of softmax(matmul(q, k) * scale + mask) found in the graph
   being rewritten. */
typedef struct attn_parts {
    const kiln_node *scores; /* matmul(q, k) */
    const kiln_node *mask;   /* NULL: none */
    float scale;
} attn_parts;

/* s = x * scale (+ mask): the scaled scores x and the mask. */
static int scaled_scores(const kiln_rewriter *rw, const kiln_node *s,
                         int s_uses, attn_parts *p)
{
    const kiln_node *x = s;
    int x_uses = s_uses;
    p->mask = NULL;
    p->scale = 1.0f;
    if (s->op == KILN_OP_ADD) {
        if (!inner(rw, s, s_uses))
            return 0;
        for (int k = 0; k < 2 && !p->mask; k++)
            if (mask_ok(s->in[k]) &&
                kiln_shape_equal(s->in[1 - k]->shape, s->shape)) {
                p->mask = s->in[k];
                x = s->in[1 - k];
            }
        if (!p->mask)
            return 0;
        x_uses = 1;
    }
    float c;
    if ((x->op == KILN_OP_DIV || x->op == KILN_OP_MUL) &&
        inner(rw, x, x_uses)) {
        int k = x->op == KILN_OP_MUL && scalar_const(x->in[0], &c) ? 0 : 1;
        if (!scalar_const(x->in[k], &c) || !isfinite(c) || c == 0.0f)
            return 0;
        p->scale = x->op == KILN_OP_DIV ? 1.0f / c : c;
        if (!isfinite(p->scale) || p->scale == 0.0f)
            return 0;
        x = x->in[1 - k];
        x_uses = 1;
    }
    p->scores = x;
    return x->op == KILN_OP_MATMUL && inner(rw, x, x_uses);
}

/* probs = exp(s - max(s)) / sum(exp(s - max(s))) over the last axis, max
   possibly behind a stop_gradient; fills p from s. */
static int softmax_of(const kiln_rewriter *rw, const kiln_node *probs,
                      attn_parts *p)
{
    if (probs->op != KILN_OP_DIV || !inner(rw, probs, 1))
        return 0;
    const kiln_node *e = probs->in[0], *sum = probs->in[1];
    if (e->op != KILN_OP_EXP || !inner(rw, e, 2) ||
        !last_axis(sum, KILN_OP_SUM) || sum->in[0] != e || !inner(rw, sum, 1))
        return 0;
    const kiln_node *z = e->in[0];
    if (z->op != KILN_OP_SUB || !inner(rw, z, 1))
        return 0;
    const kiln_node *s = z->in[0], *m = z->in[1];
    if (m->op == KILN_OP_STOPGRAD) {
        if (!inner(rw, m, 1))
            return 0;
        m = m->in[0];
    }
    if (!last_axis(m, KILN_OP_RMAX) || m->in[0] != s || !inner(rw, m, 1))
        return 0;
    return scaled_scores(rw, s, 2, p);
}

/* x with its last two axes swapped when swap, as built in out. */
static kiln_node *swapped(kiln_graph *g, kiln_node *x, int swap)
{
    if (!swap)
        return x;
    int nd = x->shape.ndim, perm[KILN_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return kiln_permute(g, x, perm);
}

/* q, k, v of the same rank (3 or 4) and the same leading axes: the fused
   op broadcasts none of them. */
static int same_batch(const kiln_node *q, const kiln_node *k,
                      const kiln_node *v)
{
    int nd = q->shape.ndim;
    if ((nd != 3 && nd != 4) || k->shape.ndim != nd || v->shape.ndim != nd ||
        q->shape.sym || k->shape.sym || v->shape.sym)
        return 0;
    for (int d = 0; d < nd - 2; d++)
        if (q->shape.d[d] != k->shape.d[d] || q->shape.d[d] != v->shape.d[d])
            return 0;
    return 1;
}

kiln_node *kiln_match_attention(kiln_rewriter *rw, const kiln_node *old)
{
    attn_parts p;
    if (!rw->state || old->op != KILN_OP_MATMUL || old->dtype != KILN_F32 ||
        old->at.trans_a || !softmax_of(rw, old->in[0], &p) ||
        p.scores->at.trans_a)
        return NULL;
    kiln_graph *g = rw->out->g;
    kiln_node *q = rw->map[p.scores->in[0]->id],
              *kt = rw->map[p.scores->in[1]->id], *v = rw->map[old->in[1]->id];
    kiln_node *mask = p.mask ? rw->map[p.mask->id] : NULL;
    if (!q || !kt || !v || (p.mask && !mask) || !same_batch(q, kt, v))
        return NULL;
    kiln_node *k = swapped(g, kt, !p.scores->at.trans_b);
    v = swapped(g, v, old->at.trans_b);
    kiln_attention_options o = {.scale = p.scale};
    kiln_node *r = kiln_scaled_dot_product_attention(g, q, k, v, mask, &o);
    return kiln_shape_equal(r->shape, old->shape) ? r : NULL;
}
