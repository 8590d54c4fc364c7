/* Accumulating products: an update v - s * (a b), v + s * (a b), v - a b or
   v + a b becomes one matmul_acc(v, a, b, alpha) with alpha = -s, s, -1 or
   1 (s may itself be a product of two one-element scales, s * (s2 (a b))),
   run as one GEMM with beta = 1.  An SGD step's weight update
   W - lr * (x^T dy) is then a single sgemm (alpha = -lr) accumulating into
   W's storage when the memory plan writes the update over W: no gradient
   buffer and no elementwise pass after the GEMM.

   A match needs: the add or sub, the mul and the matmul not marked for
   debugging; the matmul (and the mul) read only there and not outputs, so
   they disappear; 2-D matmul operands; v, the product and the result of
   one shape (v does not broadcast); s an f32 value of one element that
   does not add axes.  add is matched on either side, mul on either side.
   The pass runs before fuse (which would take the add or sub into a fused
   program); after it, nothing matches.  Results change by rounding only:
   the product is no longer rounded before it is scaled and added. */
#include <stdlib.h>

#include "passes/passes.h"

typedef struct acc_match {
    int v, mm, s;  /* node ids; s = -1: no scale (alpha is +-1) */
    int s2, inner; /* s * (s2 (a b)): the second scale and its mul, or -1 */
    int neg;       /* a sub: alpha is -s (or -1) */
} acc_match;

typedef struct acc_state {
    acc_match *m; /* by root node id; mm < 0: no match */
} acc_state;

static int plain_f32(const kiln_node *n)
{
    return !kiln_node_pinned(n) && n->dtype == KILN_F32;
}

/* mm when it is a matmul of 2-D operands with shape s read once (by the
   pattern), else NULL. */
static const kiln_node *product(const kiln_node *mm, kiln_shape s,
                                const int *uses)
{
    if (mm->op != KILN_OP_MATMUL || !plain_f32(mm) || uses[mm->id] != 1 ||
        mm->in[0]->shape.ndim != 2 || mm->in[1]->shape.ndim != 2 ||
        !kiln_shape_equal(mm->shape, s))
        return NULL;
    return mm;
}

/* Matches p as s * (a b) (either side) with s of one element, filling
   m->mm and m->s; 1 on a match. */
static int scaled_product(const kiln_node *p, kiln_shape s, const int *uses,
                          acc_match *m)
{
    if (p->op != KILN_OP_MUL || !plain_f32(p) || uses[p->id] != 1 ||
        !kiln_shape_equal(p->shape, s))
        return 0;
    for (int k = 0; k < 2; k++) {
        const kiln_node *sc = p->in[1 - k], *mm = product(p->in[k], s, uses);
        if (mm && sc->dtype == KILN_F32 && kiln_shape_numel(sc->shape) == 1) {
            m->mm = mm->id;
            m->s = sc->id;
            return 1;
        }
    }
    return 0;
}

/* Matches p, the operand of root r that is not v, as a, b, s * (a b) or
   s * (s2 * (a b)) (a data-parallel rank's share of a gradient, scaled
   by the learning rate), filling m; 1 on a match. */
static int match_term(const kiln_node *p, kiln_shape s, const int *uses,
                      acc_match *m)
{
    const kiln_node *mm = product(p, s, uses);
    m->s2 = m->inner = -1;
    if (mm) {
        m->mm = mm->id;
        m->s = -1;
        return 1;
    }
    if (scaled_product(p, s, uses, m))
        return 1;
    if (p->op != KILN_OP_MUL || !plain_f32(p) || uses[p->id] != 1 ||
        !kiln_shape_equal(p->shape, s))
        return 0;
    for (int k = 0; k < 2; k++) {
        const kiln_node *sc = p->in[1 - k];
        if (sc->dtype == KILN_F32 && kiln_shape_numel(sc->shape) == 1 &&
            scaled_product(p->in[k], s, uses, m)) {
            m->s2 = m->s;
            m->s = sc->id;
            m->inner = p->in[k]->id;
            return 1;
        }
    }
    return 0;
}

/* Matches root r (an add or sub), filling m; 1 on a match. */
static int match_root(const kiln_node *r, const int *uses, acc_match *m)
{
    if ((r->op != KILN_OP_ADD && r->op != KILN_OP_SUB) || !plain_f32(r) ||
        r->shape.ndim != 2)
        return 0;
    for (int k = 1; k >= (r->op == KILN_OP_ADD ? 0 : 1); k--) {
        const kiln_node *v = r->in[1 - k];
        if (v->dtype != KILN_F32 || !kiln_shape_equal(v->shape, r->shape))
            continue;
        if (match_term(r->in[k], r->shape, uses, m)) {
            m->v = v->id;
            m->neg = r->op == KILN_OP_SUB;
            return 1;
        }
    }
    return 0;
}

static kiln_node *rewrite(kiln_rewriter *rw, const kiln_node *old,
                          kiln_node **in)
{
    (void)in;
    const acc_match *m = &((acc_state *)rw->state)->m[old->id];
    if (m->mm < 0)
        return NULL;
    kiln_graph *g = rw->out->g;
    const kiln_node *mm = rw->in->g->nodes[m->mm];
    kiln_node *alpha, *s = m->s >= 0 ? rw->map[m->s] : NULL;
    if (s && m->s2 >= 0) {
        kiln_node *s2 = rw->map[m->s2];
        if (!s2)
            return kiln_graph_fail(g, KILN_ERR_STATE,
                                   "gemm_acc: %%%d lost an operand", old->id);
        s = kiln_mul(g, s, s2);
        alpha = m->neg ? kiln_neg(g, s) : s;
    } else if (!s)
        alpha = kiln_scalar(g, m->neg ? -1.0f : 1.0f);
    else if (s->op == KILN_OP_CONSTANT)
        alpha = kiln_scalar(g, m->neg ? -*(const float *)s->at.data
                                      : *(const float *)s->at.data);
    else
        alpha = m->neg ? kiln_neg(g, s) : s;
    kiln_node *ins[4] = {rw->map[m->v], rw->map[mm->in[0]->id],
                         rw->map[mm->in[1]->id], alpha};
    for (int k = 0; k < 4; k++)
        if (!ins[k]) /* never: only products and muls read once are dropped */
            return kiln_graph_fail(g, KILN_ERR_STATE,
                                   "gemm_acc: %%%d lost an operand", old->id);
    kiln_node *r =
        kiln_node_make(g, KILN_OP_MATMUL_ACC, KILN_F32, old->shape, ins, 4);
    if (r->op != KILN_OP_MATMUL_ACC)
        return r;
    r->at.trans_a = mm->at.trans_a;
    r->at.trans_b = mm->at.trans_b;
    r->name = kiln_graph_strdup(g, old->name);
    return r;
}

kiln_status kiln_pass_gemm_acc(const kiln_unit *in, kiln_unit *out,
                               const kiln_compile_options *opt,
                               kiln_eval_fn eval)
{
    const kiln_graph *g = in->g;
    int n = g->n_nodes;
    int *uses = kiln_unit_uses(in);
    unsigned char *keep = malloc((size_t)n + 1);
    acc_state st = {malloc(((size_t)n + 1) * sizeof *st.m)};
    kiln_status s = KILN_ERR_MEMORY;
    if (!uses || !keep || !st.m) {
        kiln_graph_fail(out->g, s, "kiln_compile: out of memory");
        goto done;
    }
    for (int id = 0; id < n; id++) {
        keep[id] = 1;
        st.m[id] = (acc_match){-1, -1, -1, -1, -1, 0};
    }
    for (int id = 0; id < n; id++) {
        acc_match *m = &st.m[id];
        if (!match_root(g->nodes[id], uses, m)) {
            *m = (acc_match){-1, -1, -1, -1, -1, 0};
            continue;
        }
        /* the product (and the mul around it) are absorbed */
        const kiln_node *r = g->nodes[id];
        for (int k = 0; k < 2; k++)
            if (r->in[k]->id != m->v)
                keep[r->in[k]->id] = 0;
        keep[m->mm] = 0;
        if (m->inner >= 0)
            keep[m->inner] = 0;
    }
    s = kiln_rewrite(in, out, opt, eval, keep, rewrite, &st);
done:
    free(uses);
    free(keep);
    free(st.m);
    return s;
}
