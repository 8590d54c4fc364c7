/* The tanh gelu written out in primitives, 0.5 x (1 + tanh(c (x + k x^3)))
   with c = sqrt(2/pi) and k = 0.044715, found under any order and grouping
   of its products and sums (kiln_gelu builds one, PyTorch's ONNX export
   another), becomes one gelu_tanh op: its kernels run it in one loop where
   the written-out form runs ten, each over the whole tensor. */
#include <math.h>

#include "passes/passes.h"

enum { MAX_FACTORS = 6 };

/* A product's factors: nodes not multiplied further (a node marked for
   debugging counts as one factor, so that it is still computed), and the
   product of its scalar constants. */
typedef struct factors {
    const kiln_node *n[MAX_FACTORS];
    int count;
    double scale;
} factors;

static int scalar_const(const kiln_node *n, double *v)
{
    if (n->op != KILN_OP_CONSTANT || n->dtype != KILN_F32 ||
        kiln_shape_numel(n->shape) != 1)
        return 0;
    *v = ((const float *)n->at.data)[0];
    return 1;
}

static int gather(const kiln_node *n, factors *f)
{
    double v;
    if (n->op == KILN_OP_MUL && !kiln_node_pinned(n))
        return gather(n->in[0], f) && gather(n->in[1], f);
    if (scalar_const(n, &v)) {
        f->scale *= v;
        return 1;
    }
    if (f->count == MAX_FACTORS)
        return 0;
    f->n[f->count++] = n;
    return 1;
}

static int factors_of(const kiln_node *n, factors *f)
{
    *f = (factors){.scale = 1.0};
    return gather(n, f);
}

static int near(double v, double want)
{
    return fabs(v - want) <= 1e-6 * fabs(want);
}

/* The term of an add other than x, or NULL when neither operand is x. */
static const kiln_node *other_term(const kiln_node *add, const kiln_node *x)
{
    if (add->op != KILN_OP_ADD || kiln_node_pinned(add))
        return NULL;
    return add->in[0] == x ? add->in[1] : add->in[1] == x ? add->in[0] : NULL;
}

/* Whether u is c (x + k x^3). */
static int is_inner(const kiln_node *u, const kiln_node *x)
{
    factors fu, fc;
    if (!factors_of(u, &fu) || fu.count != 1 ||
        !near(fu.scale, 0.7978845608028654))
        return 0;
    const kiln_node *cube = other_term(fu.n[0], x);
    if (!cube || !factors_of(cube, &fc) || fc.count != 3 ||
        !near(fc.scale, 0.044715))
        return 0;
    return fc.n[0] == x && fc.n[1] == x && fc.n[2] == x;
}

/* Whether t is 1 + tanh(c (x + k x^3)). */
static int is_one_plus_tanh(const kiln_node *t, const kiln_node *x)
{
    double one;
    if (t->op != KILN_OP_ADD || kiln_node_pinned(t))
        return 0;
    for (int k = 0; k < 2; k++) {
        const kiln_node *h = t->in[1 - k];
        if (scalar_const(t->in[k], &one) && one == 1.0 &&
            h->op == KILN_OP_TANH && !kiln_node_pinned(h) &&
            is_inner(h->in[0], x))
            return 1;
    }
    return 0;
}

kiln_node *kiln_match_gelu_tanh(kiln_rewriter *rw, const kiln_node *old)
{
    factors f;
    if (old->op != KILN_OP_MUL || old->dtype != KILN_F32 ||
        !factors_of(old, &f) || f.count != 2 || !near(f.scale, 0.5))
        return NULL;
    for (int k = 0; k < 2; k++) {
        const kiln_node *x = f.n[k];
        kiln_node *nx = rw->map[x->id];
        if (nx && kiln_shape_equal(x->shape, old->shape) &&
            is_one_plus_tanh(f.n[1 - k], x))
            return kiln_gelu_tanh(rw->out->g, nx);
    }
    return NULL;
}
