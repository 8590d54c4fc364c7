/* Op builders: argument checks and shape inference.  Every builder checks
   its operands, records a message naming the op and the shapes on error,
   and returns the graph's poison node then. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

#define SHAPE_BUF 96
#define S(sh, buf) kiln_shape_str((sh), (buf), sizeof(buf))
#define check_f32 kiln_graph_check_f32

int kiln_graph_check_f32(kiln_graph *g, const char *fn, kiln_node *x)
{
    if (x->dtype == KILN_F32)
        return 1;
    kiln_graph_fail(
        g, KILN_ERR_DTYPE,
        "%s: operand %%%d has dtype %s, expected f32 (use kiln_cast)", fn,
        x->id, kiln_dtype_name(x->dtype));
    return 0;
}

static int norm_axis(kiln_graph *g, const char *fn, int axis, int ndim)
{
    if (axis < -ndim || axis >= ndim) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: axis %d out of range for %d dims",
                        fn, axis, ndim);
        return -1;
    }
    return axis < 0 ? axis + ndim : axis;
}

static int check_shape(kiln_graph *g, const char *fn, kiln_shape s)
{
    char b[SHAPE_BUF];
    if (kiln_shape_valid(s))
        return 1;
    if (s.ndim < 0 || s.ndim > KILN_MAX_DIMS)
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %d dims (at most %d)", fn,
                        s.ndim, KILN_MAX_DIMS);
    else
        kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: invalid shape %s", fn, S(s, b));
    return 0;
}

static int check_dtype(kiln_graph *g, const char *fn, kiln_dtype dt)
{
    if (kiln_dtype_supported(dt))
        return 1;
    kiln_graph_fail(g, KILN_ERR_DTYPE, "%s: dtype %s is not supported", fn,
                    kiln_dtype_name(dt));
    return 0;
}

/* ---------------------------------------------------------------- leaves */

kiln_node *kiln_input(kiln_graph *g, const char *name, kiln_dtype dt,
                      kiln_shape shape)
{
    if (!g || g->status)
        return g ? &g->poison : NULL;
    if (!check_dtype(g, "kiln_input", dt) ||
        !check_shape(g, "kiln_input", shape))
        return &g->poison;
    kiln_node *n = kiln_node_make(g, KILN_OP_INPUT, dt, shape, NULL, 0);
    return kiln_node_set_name(n, name);
}

kiln_node *kiln_constant(kiln_graph *g, kiln_dtype dt, kiln_shape shape,
                         const void *data)
{
    if (!g || g->status)
        return g ? &g->poison : NULL;
    if (!check_dtype(g, "kiln_constant", dt) ||
        !check_shape(g, "kiln_constant", shape))
        return &g->poison;
    size_t bytes = (size_t)kiln_shape_numel(shape) * kiln_dtype_size(dt);
    if (!data && bytes)
        return kiln_graph_fail(g, KILN_ERR_ARG, "kiln_constant: data is NULL");
    void *copy = kiln_graph_alloc(g, bytes);
    if (!copy)
        return kiln_graph_fail(g, KILN_ERR_MEMORY,
                               "kiln_constant: out of memory");
    if (bytes)
        memcpy(copy, data, bytes);
    kiln_node *n = kiln_node_make(g, KILN_OP_CONSTANT, dt, shape, NULL, 0);
    n->at.data = copy;
    return n;
}

kiln_node *kiln_fill(kiln_graph *g, kiln_shape shape, float v)
{
    if (!g || g->status)
        return g ? &g->poison : NULL;
    if (!check_shape(g, "kiln_fill", shape))
        return &g->poison;
    int64_t numel = kiln_shape_numel(shape);
    float *data = kiln_graph_alloc(g, (size_t)numel * sizeof(float));
    if (!data)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_fill: out of memory");
    for (int64_t i = 0; i < numel; i++)
        data[i] = v;
    kiln_node *n =
        kiln_node_make(g, KILN_OP_CONSTANT, KILN_F32, shape, NULL, 0);
    n->at.data = data;
    return n;
}

kiln_node *kiln_scalar(kiln_graph *g, float v)
{
    return kiln_fill(g, KILN_SCALAR, v);
}

kiln_node *kiln_zeros_like(kiln_graph *g, kiln_node *x)
{
    return kiln_fill(g, x->shape, 0.0f);
}

kiln_node *kiln_variable(kiln_graph *g, const char *name, kiln_dtype dt,
                         kiln_shape shape, kiln_init init)
{
    const char *fn = "kiln_variable";
    if (!g || g->status)
        return g ? &g->poison : NULL;
    if (!name || !*name)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: a variable needs a name",
                               fn);
    if (!check_dtype(g, fn, dt) || !check_shape(g, fn, shape))
        return &g->poison;
    if ((unsigned)init.kind > KILN_INIT_GLOROT_UNIFORM)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s '%s': unknown initialiser %d", fn, name,
                               (int)init.kind);
    if (init.kind == KILN_INIT_VALUES) {
        size_t bytes = (size_t)kiln_shape_numel(shape) * sizeof(float);
        if (!init.values && bytes)
            return kiln_graph_fail(g, KILN_ERR_ARG, "%s '%s': values is NULL",
                                   fn, name);
        float *copy = kiln_graph_alloc(g, bytes);
        if (!copy)
            return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        if (bytes)
            memcpy(copy, init.values, bytes);
        init.values = copy;
    }
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i];
        if (strcmp(v->name, name) != 0)
            continue;
        if (v->dtype != dt || !kiln_shape_equal(v->shape, shape)) {
            char b1[SHAPE_BUF], b2[SHAPE_BUF];
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: '%s' already in this graph as %s%s, not "
                "%s%s",
                fn, name, kiln_dtype_name(v->dtype), S(v->shape, b1),
                kiln_dtype_name(dt), S(shape, b2));
        }
        return v; /* one node per variable, so gradients accumulate */
    }
    if (g->n_vars == g->cap_vars) {
        int cap = g->cap_vars ? 2 * g->cap_vars : 16;
        kiln_node **vars = realloc(g->vars, (size_t)cap * sizeof *vars);
        if (!vars)
            return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        g->vars = vars;
        g->cap_vars = cap;
    }
    kiln_node *n = kiln_node_make(g, KILN_OP_VARIABLE, dt, shape, NULL, 0);
    if (n->op != KILN_OP_VARIABLE)
        return n;
    g->vars[g->n_vars++] = n;
    n->at.init = init;
    n->at.trainable = dt == KILN_F32;
    return kiln_node_set_name(n, name);
}

/* ---------------------------------------------------------------- elementwise
 */

kiln_node *kiln_unary_op(kiln_graph *g, kiln_op op, kiln_node *x)
{
    return kiln_node_make(g, op, x->dtype, x->shape, &x, 1);
}

static kiln_node *unary(kiln_graph *g, kiln_op op, kiln_node *x, const char *fn)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    return kiln_unary_op(g, op, x);
}

#define UNARY_BUILDER(fname, OP)                                               \
    kiln_node *kiln_##fname(kiln_graph *g, kiln_node *x)                       \
    {                                                                          \
        return unary(g, KILN_OP_##OP, x, "kiln_" #fname);                      \
    }
UNARY_BUILDER(neg, NEG)
UNARY_BUILDER(abs, ABS)
UNARY_BUILDER(sign, SIGN)
UNARY_BUILDER(exp, EXP)
UNARY_BUILDER(log, LOG)
UNARY_BUILDER(sqrt, SQRT)
UNARY_BUILDER(sin, SIN)
UNARY_BUILDER(cos, COS)
UNARY_BUILDER(tanh, TANH)
UNARY_BUILDER(sigmoid, SIGMOID)
UNARY_BUILDER(relu, RELU)
UNARY_BUILDER(erf, ERF)
#undef UNARY_BUILDER

kiln_node *kiln_binary_op(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b)
{
    kiln_shape out;
    char ba[SHAPE_BUF], bb[SHAPE_BUF];
    if (!kiln_shape_broadcast(a->shape, b->shape, &out))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "kiln_%s: %s and %s do not broadcast",
            kiln_op_table[op].name, S(a->shape, ba), S(b->shape, bb));
    kiln_node *in[2] = {a, b};
    return kiln_node_make(g, op, KILN_F32, out, in, 2);
}

static kiln_node *binary(kiln_graph *g, kiln_op op, kiln_node *a, kiln_node *b,
                         const char *fn)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    return kiln_binary_op(g, op, a, b);
}

#define BINARY_BUILDER(fname, OP)                                              \
    kiln_node *kiln_##fname(kiln_graph *g, kiln_node *a, kiln_node *b)         \
    {                                                                          \
        return binary(g, KILN_OP_##OP, a, b, "kiln_" #fname);                  \
    }
BINARY_BUILDER(add, ADD)
BINARY_BUILDER(sub, SUB)
BINARY_BUILDER(mul, MUL)
BINARY_BUILDER(div, DIV)
BINARY_BUILDER(pow, POW)
BINARY_BUILDER(max, MAX)
BINARY_BUILDER(min, MIN)
BINARY_BUILDER(lt, LT)
BINARY_BUILDER(le, LE)
BINARY_BUILDER(gt, GT)
BINARY_BUILDER(ge, GE)
BINARY_BUILDER(eq, EQ)
#undef BINARY_BUILDER

kiln_node *kiln_select(kiln_graph *g, kiln_node *cond, kiln_node *a,
                       kiln_node *b)
{
    const char *fn = "kiln_select";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, cond) || !kiln_graph_check(g, fn, a) ||
        !kiln_graph_check(g, fn, b) || !check_f32(g, fn, cond) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    kiln_shape s1, out;
    char b1[SHAPE_BUF], b2[SHAPE_BUF], b3[SHAPE_BUF];
    if (!kiln_shape_broadcast(cond->shape, a->shape, &s1) ||
        !kiln_shape_broadcast(s1, b->shape, &out))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "%s: %s, %s and %s do not broadcast", fn,
            S(cond->shape, b1), S(a->shape, b2), S(b->shape, b3));
    kiln_node *in[3] = {cond, a, b};
    return kiln_node_make(g, KILN_OP_SELECT, KILN_F32, out, in, 3);
}

kiln_node *kiln_scale(kiln_graph *g, kiln_node *x, float s)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_scale", x) || !check_f32(g, "kiln_scale", x))
        return &g->poison;
    return kiln_mul(g, x, kiln_scalar(g, s));
}

/* ---------------------------------------------------------------- reductions
 */

kiln_node *kiln_reduce_op(kiln_graph *g, kiln_op op, kiln_node *x,
                          unsigned axes, int keepdims, const char *fn)
{
    unsigned all = (1u << x->shape.ndim) - 1;
    if (axes == KILN_ALL_AXES)
        axes = all;
    if (axes & ~all)
        return kiln_graph_fail(
            g, KILN_ERR_ARG, "%s: axis mask 0x%x names axes beyond the %d dims",
            fn, axes, x->shape.ndim);
    kiln_shape out = {0};
    for (int i = 0; i < x->shape.ndim; i++) {
        if (axes & (1u << i)) {
            if (keepdims)
                out.d[out.ndim++] = 1;
        } else {
            out.d[out.ndim++] = x->shape.d[i];
        }
    }
    kiln_node *n = kiln_node_make(g, op, x->dtype, out, &x, 1);
    n->at.axes = axes;
    n->at.keepdims = keepdims != 0;
    return n;
}

kiln_node *kiln_sum(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_sum", x) || !check_f32(g, "kiln_sum", x))
        return &g->poison;
    return kiln_reduce_op(g, KILN_OP_SUM, x, axes, keepdims, "kiln_sum");
}

kiln_node *kiln_reduce_max(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims)
{
    const char *fn = "kiln_reduce_max";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    return kiln_reduce_op(g, KILN_OP_RMAX, x, axes, keepdims, fn);
}

kiln_node *kiln_mean(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_mean", x) || !check_f32(g, "kiln_mean", x))
        return &g->poison;
    kiln_node *s =
        kiln_reduce_op(g, KILN_OP_SUM, x, axes, keepdims, "kiln_mean");
    if (s->op == KILN_OP_ERROR)
        return s;
    int64_t outn = kiln_shape_numel(s->shape);
    int64_t count = outn ? kiln_shape_numel(x->shape) / outn : 1;
    return kiln_binary_op(g, KILN_OP_MUL, s,
                          kiln_scalar(g, count ? 1.0f / (float)count : NAN));
}

kiln_node *kiln_argmax(kiln_graph *g, kiln_node *x, int axis)
{
    const char *fn = "kiln_argmax";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x) || !check_f32(g, fn, x))
        return &g->poison;
    int ax = norm_axis(g, fn, axis, x->shape.ndim);
    if (ax < 0)
        return &g->poison;
    if (x->shape.d[ax] == 0)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: axis %d is empty", fn,
                               ax);
    kiln_node *n = kiln_reduce_op(g, KILN_OP_ARGMAX, x, 1u << ax, 0, fn);
    n->dtype = KILN_I32;
    n->at.axis = ax;
    return n;
}

/* ---------------------------------------------------------------- movement */

kiln_node *kiln_reshape(kiln_graph *g, kiln_node *x, kiln_shape shape)
{
    const char *fn = "kiln_reshape";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (shape.ndim < 0 || shape.ndim > KILN_MAX_DIMS)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: %d dims (at most %d)",
                               fn, shape.ndim, KILN_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < shape.ndim; i++) {
        if (shape.d[i] == -1 && infer < 0)
            infer = i;
        else if (shape.d[i] < 0)
            return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: invalid shape %s",
                                   fn, S(shape, b1));
        else
            known *= shape.d[i];
    }
    int64_t numel = kiln_shape_numel(x->shape);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return kiln_graph_fail(g, KILN_ERR_SHAPE,
                                   "%s: cannot infer -1 reshaping %s to %s", fn,
                                   S(x->shape, b1), S(shape, b2));
        shape.d[infer] = numel / known;
    }
    if (kiln_shape_numel(shape) != numel)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %s to %s changes the element count", fn,
                               S(x->shape, b1), S(shape, b2));
    return kiln_node_make(g, KILN_OP_RESHAPE, x->dtype, shape, &x, 1);
}

kiln_node *kiln_permute(kiln_graph *g, kiln_node *x, const int *perm)
{
    const char *fn = "kiln_permute";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!perm)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: perm is NULL", fn);
    unsigned seen = 0;
    kiln_shape out = x->shape;
    for (int i = 0; i < x->shape.ndim; i++) {
        if (perm[i] < 0 || perm[i] >= x->shape.ndim || (seen & (1u << perm[i])))
            return kiln_graph_fail(g, KILN_ERR_ARG,
                                   "%s: perm is not a permutation of %d axes",
                                   fn, x->shape.ndim);
        seen |= 1u << perm[i];
        out.d[i] = x->shape.d[perm[i]];
    }
    kiln_node *n = kiln_node_make(g, KILN_OP_PERMUTE, x->dtype, out, &x, 1);
    for (int i = 0; i < x->shape.ndim; i++)
        n->at.perm[i] = perm[i];
    return n;
}

kiln_node *kiln_transpose(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_transpose", x))
        return &g->poison;
    int nd = x->shape.ndim;
    if (nd < 2)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "kiln_transpose: needs 2 or more dims, got %d",
                               nd);
    int perm[KILN_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return kiln_permute(g, x, perm);
}

kiln_node *kiln_broadcast_to(kiln_graph *g, kiln_node *x, kiln_shape shape)
{
    const char *fn = "kiln_broadcast_to";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x) || !check_shape(g, fn, shape))
        return &g->poison;
    kiln_shape out;
    if (x->shape.ndim > shape.ndim ||
        !kiln_shape_broadcast(x->shape, shape, &out) ||
        !kiln_shape_equal(out, shape))
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: cannot broadcast %s to %s", fn,
                               S(x->shape, b1), S(shape, b2));
    if (kiln_shape_equal(x->shape, shape))
        return x;
    return kiln_node_make(g, KILN_OP_BROADCAST, x->dtype, shape, &x, 1);
}

kiln_node *kiln_broadcast(kiln_graph *g, kiln_node *x, kiln_shape shape,
                          unsigned new_axes)
{
    const char *fn = "kiln_broadcast";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x) || !check_shape(g, fn, shape))
        return &g->poison;
    kiln_shape kept = shape;
    int j = 0;
    for (int i = 0; i < shape.ndim; i++) {
        if (new_axes & (1u << i)) {
            kept.d[i] = 1;
        } else {
            if (j >= x->shape.ndim || x->shape.d[j] != shape.d[i])
                break;
            j++;
        }
    }
    if (j != x->shape.ndim || (new_axes >> shape.ndim) ||
        shape.ndim - __builtin_popcount(new_axes) != x->shape.ndim)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %s with new axes 0x%x does not give %s", fn,
                               S(x->shape, b1), new_axes, S(shape, b2));
    kiln_node *r = kiln_reshape(g, x, kept);
    return kiln_broadcast_to(g, r, shape);
}

static int64_t norm_range(int64_t v, int64_t dim)
{
    return v < 0 ? v + dim : v;
}

kiln_node *kiln_slice(kiln_graph *g, kiln_node *x, const int64_t *start,
                      const int64_t *stop)
{
    const char *fn = "kiln_slice";
    char b1[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!start || !stop)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: start or stop is NULL",
                               fn);
    kiln_shape out = x->shape;
    int64_t lo[KILN_MAX_DIMS];
    for (int i = 0; i < x->shape.ndim; i++) {
        int64_t dim = x->shape.d[i];
        int64_t a = norm_range(start[i], dim), b = norm_range(stop[i], dim);
        if (a < 0 || b > dim || a > b)
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: range [%lld:%lld] out of bounds on axis %d "
                "of %s",
                fn, (long long)start[i], (long long)stop[i], i,
                S(x->shape, b1));
        lo[i] = a;
        out.d[i] = b - a;
    }
    kiln_node *n = kiln_node_make(g, KILN_OP_SLICE, x->dtype, out, &x, 1);
    memcpy(n->at.lo, lo, sizeof lo);
    return n;
}

kiln_node *kiln_pad(kiln_graph *g, kiln_node *x, const int64_t *lo,
                    const int64_t *hi, float value)
{
    const char *fn = "kiln_pad";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, x))
        return &g->poison;
    if (!lo || !hi)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: lo or hi is NULL", fn);
    kiln_shape out = x->shape;
    for (int i = 0; i < x->shape.ndim; i++) {
        if (lo[i] < 0 || hi[i] < 0)
            return kiln_graph_fail(g, KILN_ERR_ARG,
                                   "%s: negative padding on axis %d", fn, i);
        out.d[i] += lo[i] + hi[i];
    }
    if (!check_shape(g, fn, out))
        return &g->poison;
    kiln_node *n = kiln_node_make(g, KILN_OP_PAD, x->dtype, out, &x, 1);
    memcpy(n->at.lo, lo, (size_t)x->shape.ndim * sizeof *lo);
    n->at.value = value;
    return n;
}

kiln_node *kiln_concat(kiln_graph *g, kiln_node *const *xs, int n, int axis)
{
    const char *fn = "kiln_concat";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (g->status)
        return &g->poison;
    if (!xs || n < 1)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: needs at least one node",
                               fn);
    for (int i = 0; i < n; i++)
        if (!kiln_graph_check(g, fn, xs[i]))
            return &g->poison;
    int ax = norm_axis(g, fn, axis, xs[0]->shape.ndim);
    if (ax < 0)
        return &g->poison;
    kiln_shape out = xs[0]->shape;
    for (int i = 1; i < n; i++) {
        kiln_shape s = xs[i]->shape;
        int ok = s.ndim == out.ndim && xs[i]->dtype == xs[0]->dtype;
        for (int d = 0; ok && d < s.ndim; d++)
            ok = d == ax || s.d[d] == out.d[d];
        if (!ok)
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE, "%s: %s%s and %s%s differ off axis %d", fn,
                kiln_dtype_name(xs[0]->dtype), S(xs[0]->shape, b1),
                kiln_dtype_name(xs[i]->dtype), S(s, b2), ax);
        out.d[ax] += s.d[ax];
    }
    kiln_node *r = kiln_node_make(g, KILN_OP_CONCAT, xs[0]->dtype, out, xs, n);
    r->at.axis = ax;
    return r;
}

/* ---------------------------------------------------------------- contraction
 */

kiln_node *kiln_matmul(kiln_graph *g, kiln_node *a, kiln_node *b, int trans_a,
                       int trans_b)
{
    const char *fn = "kiln_matmul";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    kiln_shape sa = a->shape, sb = b->shape;
    if (sa.ndim < 2 || sb.ndim < 2)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: %s x %s: operands need 2 or more dims", fn,
                               S(sa, b1), S(sb, b2));
    int64_t m = sa.d[sa.ndim - (trans_a ? 1 : 2)];
    int64_t ka = sa.d[sa.ndim - (trans_a ? 2 : 1)];
    int64_t kb = sb.d[sb.ndim - (trans_b ? 1 : 2)];
    int64_t nn = sb.d[sb.ndim - (trans_b ? 2 : 1)];
    if (ka != kb)
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE,
            "%s: %s%s x %s%s: inner dimensions differ (%lld vs "
            "%lld)",
            fn, S(sa, b1), trans_a ? "^T" : "", S(sb, b2), trans_b ? "^T" : "",
            (long long)ka, (long long)kb);
    kiln_shape ba = sa, bb = sb, out;
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (!kiln_shape_broadcast(ba, bb, &out))
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: batch dims of %s and %s do not broadcast",
                               fn, S(sa, b1), S(sb, b2));
    out.d[out.ndim++] = m;
    out.d[out.ndim++] = nn;
    kiln_node *in[2] = {a, b};
    kiln_node *r = kiln_node_make(g, KILN_OP_MATMUL, KILN_F32, out, in, 2);
    r->at.trans_a = trans_a != 0;
    r->at.trans_b = trans_b != 0;
    return r;
}

kiln_node *kiln_dot(kiln_graph *g, kiln_node *a, kiln_node *b, int n)
{
    const char *fn = "kiln_dot";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, a) || !kiln_graph_check(g, fn, b) ||
        !check_f32(g, fn, a) || !check_f32(g, fn, b))
        return &g->poison;
    kiln_shape sa = a->shape, sb = b->shape;
    if (n < 0 || n > sa.ndim || n > sb.ndim)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: cannot contract %d axes of %s and %s", fn,
                               n, S(sa, b1), S(sb, b2));
    int64_t k = 1;
    for (int i = 0; i < n; i++) {
        if (sa.d[sa.ndim - n + i] != sb.d[i])
            return kiln_graph_fail(
                g, KILN_ERR_SHAPE,
                "%s: %s . %s: contracted axes differ (%lld vs "
                "%lld)",
                fn, S(sa, b1), S(sb, b2), (long long)sa.d[sa.ndim - n + i],
                (long long)sb.d[i]);
        k *= sb.d[i];
    }
    kiln_shape out = {0};
    if (sa.ndim - n + sb.ndim - n > KILN_MAX_DIMS)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: result has too many dims", fn);
    int64_t m = 1, nn = 1;
    for (int i = 0; i < sa.ndim - n; i++) {
        out.d[out.ndim++] = sa.d[i];
        m *= sa.d[i];
    }
    for (int i = n; i < sb.ndim; i++) {
        out.d[out.ndim++] = sb.d[i];
        nn *= sb.d[i];
    }
    kiln_node *a2 = kiln_reshape(g, a, KILN_SHAPE(m, k));
    kiln_node *b2_ = kiln_reshape(g, b, KILN_SHAPE(k, nn));
    kiln_node *p = kiln_matmul(g, a2, b2_, 0, 0);
    return kiln_reshape(g, p, out);
}

/* ---------------------------------------------------------------- conversion
 */

kiln_node *kiln_one_hot(kiln_graph *g, kiln_node *labels, int depth)
{
    const char *fn = "kiln_one_hot";
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, labels))
        return &g->poison;
    if (labels->dtype != KILN_I32)
        return kiln_graph_fail(g, KILN_ERR_DTYPE,
                               "%s: labels have dtype %s, expected i32", fn,
                               kiln_dtype_name(labels->dtype));
    if (depth <= 0)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: depth %d must be positive",
                               fn, depth);
    if (labels->shape.ndim >= KILN_MAX_DIMS)
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s: too many dims", fn);
    kiln_shape out = labels->shape;
    out.d[out.ndim++] = depth;
    kiln_node *n = kiln_node_make(g, KILN_OP_ONEHOT, KILN_F32, out, &labels, 1);
    n->at.depth = depth;
    return n;
}

kiln_node *kiln_cast(kiln_graph *g, kiln_node *x, kiln_dtype dt)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_cast", x) ||
        !check_dtype(g, "kiln_cast", dt))
        return &g->poison;
    return kiln_node_make(g, KILN_OP_CAST, dt, x->shape, &x, 1);
}

kiln_node *kiln_stop_gradient(kiln_graph *g, kiln_node *x)
{
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, "kiln_stop_gradient", x))
        return &g->poison;
    return kiln_node_make(g, KILN_OP_STOPGRAD, x->dtype, x->shape, &x, 1);
}

/* ---------------------------------------------------------------- state */

kiln_node *kiln_assign(kiln_graph *g, kiln_node *variable, kiln_node *value)
{
    const char *fn = "kiln_assign";
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    if (!g)
        return NULL;
    if (!kiln_graph_check(g, fn, variable) || !kiln_graph_check(g, fn, value))
        return &g->poison;
    if (variable->op != KILN_OP_VARIABLE)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: target %%%d is a %s, not a variable", fn,
                               variable->id, kiln_op_table[variable->op].name);
    if (variable->dtype != value->dtype ||
        !kiln_shape_equal(variable->shape, value->shape))
        return kiln_graph_fail(
            g, KILN_ERR_SHAPE, "%s: variable '%s' is %s%s, value is %s%s", fn,
            variable->name, kiln_dtype_name(variable->dtype),
            S(variable->shape, b1), kiln_dtype_name(value->dtype),
            S(value->shape, b2));
    kiln_node *in[2] = {variable, value};
    return kiln_node_make(g, KILN_OP_ASSIGN, value->dtype, value->shape, in, 2);
}

kiln_node *kiln_doall(kiln_graph *g, kiln_node *const *xs, int n)
{
    if (!g)
        return NULL;
    if (g->status)
        return &g->poison;
    if (!xs || n < 1)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "kiln_doall: needs at least one node");
    for (int i = 0; i < n; i++)
        if (!kiln_graph_check(g, "kiln_doall", xs[i]))
            return &g->poison;
    return kiln_node_make(g, KILN_OP_DOALL, KILN_F32, KILN_SCALAR, xs, n);
}

/* Sums x over the axes broadcasting added, so the result has shape s. */
kiln_node *kiln_reduce_to_shape(kiln_graph *g, kiln_node *x, kiln_shape s)
{
    if (kiln_shape_equal(x->shape, s))
        return x;
    int off = x->shape.ndim - s.ndim;
    unsigned axes = 0;
    for (int i = 0; i < x->shape.ndim; i++) {
        int j = i - off;
        if (j < 0 || (s.d[j] == 1 && x->shape.d[i] != 1))
            axes |= 1u << i;
    }
    kiln_node *r =
        axes ? kiln_reduce_op(g, KILN_OP_SUM, x, axes, 1, "grad") : x;
    if (kiln_shape_equal(r->shape, s))
        return r;
    return kiln_node_make(g, KILN_OP_RESHAPE, r->dtype, s, &r, 1);
}
