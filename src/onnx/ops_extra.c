/* Converters of small ops composed from Kiln primitives: ReduceProd,
   ReduceLogSum, CumSum, Hardmax, IsInf, IsNaN, Shrink, ThresholdedRelu,
   Mod, Tile and Range. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* The axes attribute as a mask over rank nd (every axis when empty). */
static int axes_mask(ox_ctx *c, const ox_node *n, int nd, unsigned *mask)
{
    const int64_t *axes;
    int64_t count;
    if (ox_attr_ints(c, n, "axes", &axes, &count))
        return -1;
    *mask = count ? 0 : nd ? KILN_AXIS(nd) - 1 : 0;
    for (int64_t k = 0; k < count; k++) {
        int a = ox_axis(c, n, axes[k], nd);
        if (a < 0)
            return -1;
        *mask |= KILN_AXIS(a);
    }
    return 0;
}

static int conv_reduce_more(ox_ctx *c, ox_node *n)
{
    int64_t keep;
    unsigned mask;
    kiln_node *x = ox_f32(c, n, 0);
    if (ox_attr_int(c, n, "keepdims", 1, &keep) ||
        axes_mask(c, n, kiln_node_shape(x).ndim, &mask))
        return -1;
    kiln_node *y = !strcmp(n->p->op_type, "ReduceProd")
                       ? kiln_prod(c->g, x, mask, keep != 0)
                       : kiln_log(c->g, kiln_sum(c->g, x, mask, keep != 0));
    ox_out(c, n, mask ? y : x, ox_in_type(n, 0));
    return 0;
}

kiln_node *ox_flip(ox_ctx *c, const ox_node *n, kiln_node *x, int axis)
{
    int64_t len = kiln_node_shape(x).d[axis];
    if (len > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "reversing %lld points of axis %d (positions past "
                          "i32)",
                          (long long)len, axis),
               NULL;
    kiln_node *i = ox_arith_indices(c, n, len - 1, -1, len);
    return i ? kiln_index_select(c->g, x, axis, i) : NULL;
}

static int conv_cumsum(ox_ctx *c, ox_node *n)
{
    int64_t exclusive, reverse;
    const ox_host *h = ox_known_ints(c, n, 1);
    kiln_node *x = ox_f32(c, n, 0);
    if (!h || ox_attr_int(c, n, "exclusive", 0, &exclusive) ||
        ox_attr_int(c, n, "reverse", 0, &reverse))
        return -1;
    int a =
        h->numel == 1 ? ox_axis(c, n, h->i[0], kiln_node_shape(x).ndim) : -1;
    if (a < 0)
        return h->numel == 1 ? -1
                             : (ox_problem(c, n, KILN_ERR_ARG, "bad axis"), -1);
    kiln_node *y = reverse ? ox_flip(c, n, x, a) : x;
    if (!y)
        return -1;
    kiln_node *s = kiln_cumsum(c->g, y, a);
    if (exclusive) /* the sum of the elements before: a shifted copy */ {
        kiln_shape ys = kiln_node_shape(y);
        int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS] = {0};
        int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
        for (int k = 0; k < ys.ndim; k++)
            stop[k] = ys.d[k];
        stop[a] = ys.d[a] > 0 ? ys.d[a] - 1 : 0;
        lo[a] = ys.d[a] > 0 ? 1 : 0;
        s = kiln_pad(c->g, kiln_slice(c->g, s, start, stop), lo, hi, 0);
    }
    if (reverse && !(s = ox_flip(c, n, s, a)))
        return -1;
    ox_out(c, n, s, ox_in_type(n, 0));
    return 0;
}

/* 1 at the first largest element along axis, 0 elsewhere; before opset 13
   the input is seen as 2-D [before axis, from axis on]. */
static int conv_hardmax(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    if (ox_attr_int(c, n, "axis", c->opset < 13 ? 1 : -1, &axis))
        return -1;
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    kiln_node *v = x;
    if (c->opset < 13) {
        v = a ? kiln_flatten(c->g, x, a, -1)
              : kiln_reshape(c->g, x, KILN_SHAPE(1, -1));
        if (a > 1)
            v = kiln_flatten(c->g, v, 0, a - 1);
        a = 1;
    }
    kiln_shape vs = kiln_node_shape(v);
    int nd = vs.ndim, perm[KILN_MAX_DIMS];
    kiln_node *h = kiln_one_hot(c->g, kiln_argmax(c->g, v, a), (int)vs.d[a]);
    for (int k = 0, at = 0; k < nd; k++)
        perm[k] = k == a ? nd - 1 : at++;
    h = kiln_permute(c->g, h, perm);
    ox_out(c, n, kiln_reshape(c->g, h, s), ox_in_type(n, 0));
    return 0;
}

static int conv_isinf(ox_ctx *c, ox_node *n)
{
    int64_t neg, pos;
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0);
    if (!strcmp(n->p->op_type, "IsNaN")) {
        ox_out(c, n, kiln_sub(g, kiln_scalar(g, 1), kiln_eq(g, x, x)), OX_BOOL);
        return 0;
    }
    if (ox_attr_int(c, n, "detect_negative", 1, &neg) ||
        ox_attr_int(c, n, "detect_positive", 1, &pos))
        return -1;
    kiln_node *p = kiln_eq(g, x, kiln_scalar(g, INFINITY));
    kiln_node *m = kiln_eq(g, x, kiln_scalar(g, -INFINITY));
    kiln_node *y = neg && pos ? kiln_add(g, p, m)
                   : neg      ? m
                   : pos      ? p
                              : kiln_scale(g, p, 0);
    ox_out(c, n, y, OX_BOOL);
    return 0;
}

/* Shrink: x + bias below -lambd, x - bias above lambd, else 0;
   ThresholdedRelu: x above alpha, else 0. */
static int conv_shrink(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *zero = kiln_scalar(g, 0), *y;
    float lambd, bias, alpha;
    if (!strcmp(n->p->op_type, "ThresholdedRelu")) {
        if (ox_attr_float(c, n, "alpha", 1, &alpha))
            return -1;
        y = kiln_select(g, kiln_gt(g, x, kiln_scalar(g, alpha)), x, zero);
    } else {
        if (ox_attr_float(c, n, "lambd", 0.5f, &lambd) ||
            ox_attr_float(c, n, "bias", 0, &bias))
            return -1;
        kiln_node *b = kiln_scalar(g, bias);
        y = kiln_select(g, kiln_gt(g, x, kiln_scalar(g, lambd)),
                        kiln_sub(g, x, b), zero);
        y = kiln_select(g, kiln_lt(g, x, kiln_scalar(g, -lambd)),
                        kiln_add(g, x, b), y);
    }
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

/* fmod 0: the sign of the divisor (integers; i32 arithmetic); fmod 1: the
   sign of the dividend, a - b trunc(a / b) in f32 (exact for integers
   below 2^24). */
static int conv_mod(ox_ctx *c, ox_node *n)
{
    int64_t fmod_;
    kiln_graph *g = c->g;
    if (ox_attr_int(c, n, "fmod", 0, &fmod_))
        return -1;
    int ints = ox_kiln_dtype(ox_in_type(n, 0)) == KILN_I32;
    if (!fmod_ && !ints)
        return ox_problem(c, n, KILN_ERR_ARG, "fmod=0 on floats"), -1;
    if (!fmod_) {
        ox_out(c, n, kiln_int_mod(g, ox_in(c, n, 0), ox_in(c, n, 1)),
               ox_in_type(n, 0));
        return 0;
    }
    kiln_node *a = ox_f32(c, n, 0), *b = ox_f32(c, n, 1);
    kiln_node *q = kiln_div(g, a, b);
    kiln_node *t = kiln_mul(g, kiln_sign(g, q), kiln_floor(g, kiln_abs(g, q)));
    ox_out(c, n, kiln_sub(g, a, kiln_mul(g, b, t)), ox_in_type(n, 0));
    return 0;
}

/* x [d...] tiled r times per axis: [1, d0, 1, d1, ...] broadcast to
   [r0, d0, r1, d1, ...], then merged. */
static int conv_tile(ox_ctx *c, ox_node *n)
{
    const ox_host *h = ox_known_ints(c, n, 1);
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x), wide = {0}, big = {0}, out = s;
    if (!h)
        return -1;
    if (h->numel != s.ndim || 2 * s.ndim > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "repeats of %lld entries for rank %d",
                          (long long)h->numel, s.ndim),
               -1;
    for (int k = 0; k < s.ndim; k++) {
        if (h->i[k] < 0)
            return ox_problem(c, n, KILN_ERR_ARG, "negative repeats"), -1;
        if (__builtin_mul_overflow(s.d[k], h->i[k], &out.d[k]))
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "%lld repeats of axis %d of size %lld",
                              (long long)h->i[k], k, (long long)s.d[k]),
                   -1;
        wide.d[wide.ndim] = 1, big.d[wide.ndim++] = h->i[k];
        wide.d[wide.ndim] = s.d[k], big.d[wide.ndim++] = s.d[k];
    }
    big.ndim = wide.ndim;
    kiln_node *y = kiln_broadcast_to(c->g, kiln_reshape(c->g, x, wide), big);
    n->out[0] = kiln_reshape(c->g, y, out);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* A known scalar input as a double; -1 (recorded) when not known. */
static int known_scalar(ox_ctx *c, const ox_node *n, int i, double *v)
{
    const ox_value *x = i < n->n_in ? n->in[i] : NULL;
    if (!x || !x->known || x->known->numel != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "input %d must be a scalar known while loading", i),
               -1;
    *v = x->known->f ? x->known->f[0] : (double)x->known->i[0];
    return 0;
}

/* np.arange(start, limit, delta), a constant. */
static int conv_range(ox_ctx *c, ox_node *n)
{
    double start, limit, delta;
    if (known_scalar(c, n, 0, &start) || known_scalar(c, n, 1, &limit) ||
        known_scalar(c, n, 2, &delta))
        return -1;
    double count = delta ? ceil((limit - start) / delta) : -1;
    if (!(count >= 0 && count <= INT32_MAX))
        return ox_problem(c, n, KILN_ERR_ARG, "bad range"), -1;
    if (count > OX_MAX_COMPUTED)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a range of %.0f values (at most %lld)", count,
                          (long long)OX_MAX_COMPUTED),
               -1;
    int64_t len = (int64_t)count;
    float *v = malloc((size_t)len * sizeof *v + 1);
    if (!v)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t k = 0; k < len; k++)
        v[k] = (float)(start + (double)k * delta);
    ox_out(c, n, kiln_constant(c->g, KILN_F32, KILN_SHAPE(len), v),
           ox_in_type(n, 0));
    free(v);
    return 0;
}

const ox_op ox_extra_ops[] = {
    {"ReduceProd", conv_reduce_more, "axes,keepdims"},
    {"ReduceLogSum", conv_reduce_more, "axes,keepdims"},
    {"CumSum", conv_cumsum, "exclusive,reverse"},
    {"Hardmax", conv_hardmax, "axis"},
    {"IsInf", conv_isinf, "detect_negative,detect_positive"},
    {"IsNaN", conv_isinf, ""},
    {"Shrink", conv_shrink, "bias,lambd"},
    {"ThresholdedRelu", conv_shrink, "alpha"},
    {"Mod", conv_mod, "fmod"},
    {"Tile", conv_tile, ""},
    {"Range", conv_range, ""},
    {NULL, NULL, NULL},
};
