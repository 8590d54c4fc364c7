/* MaxPool's second output, Indices: for each pooled point the flat index
   (over the whole N x C x H x W input, row-major, or column-major within a
   plane with storage_order 1) of the maximum its window took, the first in
   the window's scan order on ties, as ONNX Runtime gives it.

   Built from Kiln ops: the input padded with -inf, each of the kernel's
   taps gathered as a [N, C, OH, OW] grid, argmax over the taps, and the
   index the window's base position plus the chosen tap's offset, in exact
   int32 arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

typedef struct pool_geom {
    int64_t h, w, oh, ow;              /* input and output plane */
    int64_t k[2], st[2], dl[2], lo[2]; /* kernel, stride, dilation, pad */
} pool_geom;

/* The window geometry of n for x (1-D as height 1) and pooled y. */
static int read_geom(ox_ctx *c, const ox_node *n, kiln_shape xs, kiln_shape ys,
                     pool_geom *g)
{
    int sp = xs.ndim - 2;
    int64_t k[2], st[2], dl[2], pads[4];
    char mode[16];
    if (ox_ints_attr(c, n, "kernel_shape", sp, 1, k) ||
        ox_ints_attr(c, n, "strides", sp, 1, st) ||
        ox_ints_attr(c, n, "dilations", sp, 1, dl) ||
        ox_ints_attr(c, n, "pads", 2 * sp, 0, pads) ||
        ox_attr_string(c, n, "auto_pad", "NOTSET", mode, sizeof mode))
        return -1;
    if (strcmp(mode, "NOTSET") && strcmp(mode, "VALID"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "auto_pad %s with the Indices output", mode),
               -1;
    int valid = !strcmp(mode, "VALID");
    int off = 2 - sp; /* a 1-D pool is the second axis of a 2-D one */
    memset(g, 0, sizeof *g);
    g->h = g->oh = 1;
    g->k[0] = g->st[0] = g->dl[0] = 1;
    for (int a = 0; a < sp; a++) {
        g->k[off + a] = k[a];
        g->st[off + a] = st[a];
        g->dl[off + a] = dl[a];
        g->lo[off + a] = valid ? 0 : pads[a];
    }
    g->w = xs.d[xs.ndim - 1];
    g->ow = ys.d[ys.ndim - 1];
    if (sp == 2) {
        g->h = xs.d[2];
        g->oh = ys.d[2];
    }
    return 0;
}

/* An int32 tensor of shape s whose element at (i0, i1, ...) is add +
   the sum of coef[k] ik (the caller bounds the values).  Only one vector
   per axis is made while loading (the sum of the dims, where s may be as
   large as the input); their sum is broadcast to s while running. */
static kiln_node *axis_grid(ox_ctx *c, const ox_node *n, kiln_shape s,
                            const int64_t *coef, int64_t add)
{
    kiln_graph *kg = c->g;
    kiln_node *y = NULL;
    for (int k = 0; k < s.ndim; k++) {
        if (!coef[k] && (y || k + 1 < s.ndim))
            continue; /* the last axis carries add when no other did */
        int32_t *v = malloc((size_t)s.d[k] * sizeof *v + 1);
        if (!v)
            return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
        for (int64_t i = 0; i < s.d[k]; i++)
            v[i] = (int32_t)(i * coef[k] + (y ? 0 : add));
        kiln_shape one = {.ndim = s.ndim};
        for (int d = 0; d < s.ndim; d++)
            one.d[d] = d == k ? s.d[k] : 1;
        kiln_node *t = kiln_constant(kg, KILN_I32, one, v);
        free(v);
        y = y ? kiln_int_add(kg, y, t) : t;
    }
    return kiln_broadcast_to(kg, y, s);
}

/* The taps of xp [N, C, Hp, Wp] (padded) at the window positions:
   [N, C, OH, OW, kh * kw]. */
static kiln_node *taps(ox_ctx *c, const ox_node *n, kiln_node *xp,
                       const pool_geom *g)
{
    kiln_graph *kg = c->g;
    int64_t kk = g->k[0] * g->k[1];
    kiln_node **t = calloc((size_t)kk, sizeof *t);
    if (!t)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    kiln_shape xs = kiln_node_shape(xp);
    kiln_shape one = KILN_SHAPE(xs.d[0], xs.d[1], g->oh, g->ow, 1);
    for (int64_t i = 0; i < g->k[0]; i++) {
        kiln_node *rows = kiln_index_select(
            kg, xp, 2, axis_grid(c, n, KILN_SHAPE(g->oh), g->st, i * g->dl[0]));
        for (int64_t j = 0; j < g->k[1]; j++)
            t[i * g->k[1] + j] = kiln_reshape(
                kg,
                kiln_index_select(kg, rows, 3,
                                  axis_grid(c, n, KILN_SHAPE(g->ow), g->st + 1,
                                            j * g->dl[1])),
                one);
    }
    kiln_node *y = kiln_concat(kg, t, (int)kk, 4);
    free(t);
    return y;
}

int ox_pool_indices(ox_ctx *c, ox_node *n, kiln_node *x, kiln_node *y)
{
    kiln_graph *kg = c->g;
    kiln_shape xs = kiln_node_shape(x), ys = kiln_node_shape(y);
    int64_t order;
    pool_geom g;
    /* y poisoned (its pool failed) has no dims to read the geometry
       from: the loader reports the graph's error */
    if (kiln_graph_status(kg) != KILN_OK)
        return 0;
    if (xs.ndim < 3 || xs.ndim > 4 || ys.ndim != xs.ndim)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "Indices of a %d-D input pooled to %d dims", xs.ndim,
                          ys.ndim),
               -1;
    if (ox_attr_int(c, n, "storage_order", 0, &order) ||
        read_geom(c, n, xs, ys, &g))
        return -1;
    int64_t total = kiln_shape_numel(xs), kk = g.k[0] * g.k[1];
    if (total < 0 || total > INT32_MAX || kk > 4096)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "the Indices output of %lld elements and %lld taps "
                          "(at most 2^31 and 4096)",
                          (long long)total, (long long)kk),
               -1;
    int64_t hi[2];
    for (int a = 0; a < 2; a++) {
        int64_t in = a ? g.w : g.h, out = a ? g.ow : g.oh;
        int64_t end = (out - 1) * g.st[a] + (g.k[a] - 1) * g.dl[a] + 1;
        hi[a] = end - in - g.lo[a] > 0 ? end - in - g.lo[a] : 0;
    }
    kiln_node *x4 = kiln_reshape(kg, x, KILN_SHAPE(xs.d[0], xs.d[1], g.h, g.w));
    kiln_node *xp = kiln_pad(kg, x4, (const int64_t[]){0, 0, g.lo[0], g.lo[1]},
                             (const int64_t[]){0, 0, hi[0], hi[1]}, -INFINITY);
    kiln_node *all = taps(c, n, xp, &g);
    if (!all)
        return -1;
    /* row-major: r * W + col; column-major within a plane: r + col * H */
    int64_t rs = order ? 1 : g.w, cs = order ? g.h : 1;
    kiln_shape os = KILN_SHAPE(xs.d[0], xs.d[1], g.oh, g.ow);
    int64_t planes = xs.d[0] * xs.d[1], plane = g.h * g.w;
    /* the largest value any step below takes (in double: the attributes
       may be large enough to overflow int64 here) */
    double most =
        (double)planes * (double)plane +
        ((double)g.oh * (double)g.st[0] + (double)g.k[0] * (double)g.dl[0]) *
            (double)rs +
        ((double)g.ow * (double)g.st[1] + (double)g.k[1] * (double)g.dl[1]) *
            (double)cs;
    if (most > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "the Indices output: positions past 2^31"),
               -1;
    /* window base: plane (n C + c) and the window's first position */
    kiln_node *base = axis_grid(
        c, n, os,
        (const int64_t[]){xs.d[1] * plane, plane, g.st[0] * rs, g.st[1] * cs},
        -g.lo[0] * rs - g.lo[1] * cs);
    kiln_node *offs = kiln_reshape(
        kg,
        axis_grid(c, n, KILN_SHAPE(g.k[0], g.k[1]),
                  (const int64_t[]){g.dl[0] * rs, g.dl[1] * cs}, 0),
        KILN_SHAPE(kk));
    kiln_node *pick = kiln_reshape(kg, kiln_argmax(kg, all, 4),
                                   KILN_SHAPE(kiln_shape_numel(os)));
    kiln_node *idx = kiln_int_add(
        kg, base, kiln_reshape(kg, kiln_index_select(kg, offs, 0, pick), os));
    n->out[1] = kiln_reshape(kg, idx, ys);
    n->out_type[1] = OX_INT64;
    return 0;
}
