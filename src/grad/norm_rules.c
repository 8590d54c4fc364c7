/* Gradient rules of the normalisation and dropout ops.  norm's rule is the
   fused backward: norm_grad gives dx (through the batch statistics too, in
   training) and norm_param_grad dweight and dbias.  Those two, and
   norm_stats, are differentiated through their decomposition into
   primitives (built on the node's own inputs and differentiated above it),
   so every order of gradient exists.  dropout's gradient is the same mask
   (the same op, key and stream) applied to the adjoint. */
#include <stdlib.h>
#include <string.h>

#include "grad/norm_rules.h"
#include "graph/norm_view.h"

#define NEED(i) (need & (1u << (i)))
#define B(op, a, b) kiln_binary_op(g, KILN_OP_##op, (a), (b))

/* The decomposition's shapes: V the view of x ([dims before axis, C, S]
   or [dims before axis, G, C / G, S]), R the axes statistics reduce, K a
   statistic's keepdims shape, P a parameter's shape broadcasting to V. */
typedef struct decomp {
    kiln_graph *g;
    kiln_node *n;
    kiln_norm_attr a;
    kiln_shape x, v, k, p;
    unsigned r;
} decomp;

static decomp decomp_of(kiln_graph *g, kiln_node *n)
{
    decomp d = {g, n, n->at.norm, n->in[0]->shape, {0}, {0}, {0}, 0};
    kiln_norm_view nv = kiln_norm_view_of(d.x, d.a);
    int ax = d.a.axis, grouped = d.a.groups != 0;
    d.v.ndim = ax + 2 + grouped;
    d.k.ndim = d.v.ndim;
    for (int i = 0; i < ax; i++) {
        d.v.d[i] = d.x.d[i];
        d.k.d[i] = grouped ? d.x.d[i] : 1;
    }
    d.v.sym = d.x.sym & ((1u << ax) - 1);
    d.k.sym = grouped ? d.v.sym : 0;
    if (grouped) {
        d.v.d[ax] = d.k.d[ax] = d.a.groups;
        d.v.d[ax + 1] = nv.c / d.a.groups;
        d.k.d[ax + 1] = 1;
        d.p = (kiln_shape){.ndim = 3, .d = {d.a.groups, nv.c / d.a.groups, 1}};
        d.r = 3u << (ax + 1);
    } else {
        d.v.d[ax] = d.k.d[ax] = nv.c;
        d.p = (kiln_shape){.ndim = 2, .d = {nv.c, 1}};
        d.r = ((1u << ax) - 1) | 1u << (ax + 1);
    }
    d.v.d[d.v.ndim - 1] = nv.s;
    d.k.d[d.k.ndim - 1] = 1;
    return d;
}

static kiln_node *view(const decomp *d, kiln_node *t)
{
    return kiln_reshape(d->g, t, d->v);
}

static kiln_node *param(const decomp *d, kiln_node *w)
{
    return kiln_reshape(d->g, w, d->p);
}

/* The mean over R, keepdims. */
static kiln_node *stat_mean(const decomp *d, kiln_node *t)
{
    kiln_graph *g = d->g;
    kiln_node *s = kiln_sum(g, t, d->r, 1);
    return B(MUL, s, kiln_count_scalar(g, d->v, d->r, 1.0f, 1));
}

/* Row r of statistics s [2, ...], in shape K. */
static kiln_node *stat_row(const decomp *d, kiln_node *s, int r)
{
    int64_t lo[KILN_MAX_DIMS] = {r}, hi[KILN_MAX_DIMS] = {r + 1};
    for (int i = 1; i < s->shape.ndim; i++)
        hi[i] = s->shape.d[i];
    return kiln_reshape(d->g, kiln_slice(d->g, s, lo, hi), d->k);
}

/* [2, ...] from two tensors of K's numel (rows of the statistics' shape). */
static kiln_node *stack_rows(const decomp *d, kiln_node *a, kiln_node *b,
                             kiln_shape rest)
{
    kiln_shape row = {.ndim = rest.ndim + 1, .sym = rest.sym << 1};
    row.d[0] = 1;
    for (int i = 0; i < rest.ndim; i++)
        row.d[i + 1] = rest.d[i];
    kiln_node *rows[2] = {kiln_reshape(d->g, a, row),
                          kiln_reshape(d->g, b, row)};
    return kiln_concat(d->g, rows, 2, 0);
}

static kiln_shape rest_of(kiln_shape s)
{
    kiln_shape r = {.ndim = s.ndim - 1, .sym = s.sym >> 1};
    for (int i = 1; i < s.ndim; i++)
        r.d[i - 1] = s.d[i];
    return r;
}

/* 1 / sqrt(var + eps) of statistics s, in shape K. */
static kiln_node *stat_rstd(const decomp *d, kiln_node *s)
{
    kiln_graph *g = d->g;
    kiln_node *var = B(ADD, stat_row(d, s, 1), kiln_scalar(g, d->a.eps));
    return B(DIV, kiln_scalar(g, 1.0f), kiln_sqrt(g, var));
}

static kiln_node *xhat(const decomp *d, kiln_node *x, kiln_node *s)
{
    kiln_graph *g = d->g;
    return B(MUL, B(SUB, view(d, x), stat_row(d, s, 0)), stat_rstd(d, s));
}

static kiln_node *decompose_stats(const decomp *d)
{
    kiln_graph *g = d->g;
    kiln_node *n = d->n, *xv = view(d, n->in[0]);
    kiln_node *mean = stat_mean(d, xv), *dev = B(SUB, xv, mean);
    kiln_node *var = stat_mean(d, B(MUL, dev, dev));
    kiln_node *batch = stack_rows(d, mean, var, rest_of(n->shape));
    if (n->n_in == 1)
        return batch;
    kiln_node *run = stack_rows(d, n->in[1], n->in[2], rest_of(n->shape));
    return kiln_select(g, kiln_cast(g, n->in[3], KILN_F32), batch, run);
}

static kiln_node *decompose_norm(const decomp *d)
{
    kiln_graph *g = d->g;
    kiln_node *n = d->n;
    kiln_node *y = B(MUL, xhat(d, n->in[0], n->in[1]), param(d, n->in[2]));
    return kiln_reshape(g, B(ADD, y, param(d, n->in[3])), d->x);
}

static kiln_node *decompose_norm_grad(const decomp *d)
{
    kiln_graph *g = d->g;
    kiln_node *n = d->n, *s = n->in[1];
    kiln_node *xh = xhat(d, n->in[0], s);
    kiln_node *dyw = B(MUL, view(d, n->in[3]), param(d, n->in[2]));
    kiln_node *a = stat_mean(d, dyw), *b = stat_mean(d, B(MUL, dyw, xh));
    kiln_node *through =
        B(MUL, kiln_cast(g, n->in[4], KILN_F32), B(ADD, a, B(MUL, xh, b)));
    kiln_node *dx = B(MUL, stat_rstd(d, s), B(SUB, dyw, through));
    return kiln_reshape(g, dx, d->x);
}

static kiln_node *decompose_param_grad(const decomp *d)
{
    kiln_graph *g = d->g;
    kiln_node *n = d->n, *dyv = view(d, n->in[2]);
    /* every axis but the channel's (two axes when grouped) */
    unsigned ch = d->a.groups ? 3u << d->a.axis : 1u << d->a.axis;
    unsigned axes = ((1u << d->v.ndim) - 1) & ~ch;
    kiln_node *dw =
        kiln_sum(g, B(MUL, dyv, xhat(d, n->in[0], n->in[1])), axes, 0);
    kiln_node *db = kiln_sum(g, dyv, axes, 0);
    return stack_rows(d, dw, db, rest_of(n->shape));
}

/* The adjoints of n's inputs from its decomposition, differentiated alone
   (the nodes it is built from are left to the caller's engine).  norm_grad's
   optional sums are a function of its other inputs: the decomposition
   computes them from those and gives them no adjoint. */
static void by_decomposition(kiln_graph *g, kiln_node *n, kiln_node *adj,
                             unsigned need, kiln_node **gin)
{
    int floor = g->n_nodes - 1;
    decomp d = decomp_of(g, n);
    kiln_node *y = n->op == KILN_OP_NORM_STATS  ? decompose_stats(&d)
                   : n->op == KILN_OP_NORM      ? decompose_norm(&d)
                   : n->op == KILN_OP_NORM_GRAD ? decompose_norm_grad(&d)
                                                : decompose_param_grad(&d);
    if (g->status != KILN_OK)
        return;
    kiln_node **adjs = calloc((size_t)y->id + 1, sizeof *adjs);
    if (!adjs) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_grad: out of memory");
        return;
    }
    if (kiln_build_adjoints_above(g, y, adj, floor, adjs) == KILN_OK)
        for (int k = 0; k < n->n_in; k++) {
            int first = 1; /* an input listed twice gets its sum once */
            for (int j = 0; j < k; j++)
                first = first && n->in[j] != n->in[k];
            if (NEED(k) && first)
                gin[k] = adjs[n->in[k]->id];
        }
    free(adjs);
}

static kiln_node *i32_scalar(kiln_graph *g, int32_t v)
{
    return kiln_constant(g, KILN_I32, KILN_SCALAR, &v);
}

/* Whether n's statistics are norm_stats of its own x, and the mode that
   says when they depend on x (1 always, batch norm's mode, or 0). */
static kiln_node *stats_mode(kiln_graph *g, kiln_node *n, int *of_x)
{
    kiln_node *s = n->in[1];
    *of_x = s->op == KILN_OP_NORM_STATS && s->in[0] == n->in[0] &&
            !memcmp(&s->at.norm, &n->at.norm, sizeof n->at.norm);
    if (!*of_x)
        return i32_scalar(g, 0);
    return s->n_in == 4 ? s->in[3] : i32_scalar(g, 1);
}

static kiln_node *norm_node(kiln_graph *g, kiln_op op, kiln_node *from,
                            kiln_node **in, int n_in)
{
    kiln_node p = {.op = op, .n_in = n_in, .in = in};
    p.at.norm = from->at.norm;
    return kiln_node_build(g, "grad", &p);
}

/* Row r of a [2, C] node, as [C]. */
static kiln_node *param_row(kiln_graph *g, kiln_node *p, int r)
{
    int64_t c = p->shape.d[1], lo[2] = {r, 0}, hi[2] = {r + 1, c};
    return kiln_reshape(g, kiln_slice(g, p, lo, hi), KILN_SHAPE(c));
}

void kiln_grad_NORM(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                    kiln_node **gin)
{
    int of_x;
    kiln_node *mode = stats_mode(g, n, &of_x), *p = NULL;
    /* per channel, dx through the statistics needs the sums that dweight
       and dbias are: computed once, x and adj are read twice, not four
       times */
    int share = NEED(0) && of_x && !n->at.norm.groups;
    if (NEED(2) || NEED(3) || share) {
        kiln_node *in[3] = {n->in[0], n->in[1], adj};
        p = norm_node(g, KILN_OP_NORM_PARAM_GRAD, n, in, 3);
        gin[2] = NEED(2) ? param_row(g, p, 0) : NULL;
        gin[3] = NEED(3) ? param_row(g, p, 1) : NULL;
    }
    if (NEED(0)) {
        kiln_node *in[6] = {n->in[0], n->in[1], n->in[2], adj, mode, p};
        gin[0] = norm_node(g, KILN_OP_NORM_GRAD, n, in, share ? 6 : 5);
    }
    /* statistics of x are accounted for in dx; others have their own */
    if (NEED(1) && !of_x) {
        kiln_node *part[4] = {0};
        by_decomposition(g, n, adj, 2u, part);
        gin[1] = part[1];
    }
}

void kiln_grad_NORM_STATS(kiln_graph *g, kiln_node *n, kiln_node *adj,
                          unsigned need, kiln_node **gin)
{
    by_decomposition(g, n, adj, need, gin);
}

void kiln_grad_NORM_GRAD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                         unsigned need, kiln_node **gin)
{
    by_decomposition(g, n, adj, need, gin);
}

void kiln_grad_NORM_PARAM_GRAD(kiln_graph *g, kiln_node *n, kiln_node *adj,
                               unsigned need, kiln_node **gin)
{
    by_decomposition(g, n, adj, need, gin);
}

void kiln_grad_DROPOUT(kiln_graph *g, kiln_node *n, kiln_node *adj,
                       unsigned need, kiln_node **gin)
{
    (void)need;
    kiln_node *in[3] = {adj, n->in[1], n->in[2]};
    kiln_node p = {.op = KILN_OP_DROPOUT, .n_in = 3, .in = in};
    p.at.random = n->at.random;
    gin[0] = kiln_node_build(g, "grad", &p);
}
