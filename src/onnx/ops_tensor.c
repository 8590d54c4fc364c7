/* Converters of products, reductions, casts, constants and padding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* numpy matmul: a 1-D operand gains an axis for the product, removed
   after. */
static int conv_matmul(ox_ctx *c, ox_node *n)
{
    kiln_node *a = ox_f32(c, n, 0), *b = ox_f32(c, n, 1);
    kiln_shape sa = kiln_node_shape(a), sb = kiln_node_shape(b);
    if (sa.ndim == 0 || sb.ndim == 0)
        return ox_problem(c, n, KILN_ERR_ARG, "scalar operand"), -1;
    if (sa.ndim == 1)
        a = kiln_reshape(c->g, a, KILN_SHAPE(1, sa.d[0]));
    if (sb.ndim == 1)
        b = kiln_reshape(c->g, b, KILN_SHAPE(sb.d[0], 1));
    kiln_node *y = kiln_matmul(c->g, a, b, 0, 0);
    kiln_shape s = kiln_node_shape(y);
    if (kiln_graph_status(c->g) != KILN_OK) /* y poisoned: no dims to drop */
        return 0;
    if (sa.ndim == 1 || sb.ndim == 1) {
        int drop = sa.ndim == 1 ? s.ndim - 2 : s.ndim - 1;
        for (int k = drop; k + 1 < s.ndim; k++)
            s.d[k] = s.d[k + 1];
        s.ndim--;
        if (sa.ndim == 1 && sb.ndim == 1)
            s.ndim--;
        y = kiln_reshape(c->g, y, s);
    }
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

/* alpha op(A) op(B) + beta C. */
static int conv_gemm(ox_ctx *c, ox_node *n)
{
    float alpha, beta;
    int64_t ta, tb;
    if (ox_attr_float(c, n, "alpha", 1, &alpha) ||
        ox_attr_float(c, n, "beta", 1, &beta) ||
        ox_attr_int(c, n, "transA", 0, &ta) ||
        ox_attr_int(c, n, "transB", 0, &tb))
        return -1;
    kiln_node *y =
        kiln_matmul(c->g, ox_f32(c, n, 0), ox_f32(c, n, 1), ta != 0, tb != 0);
    if (alpha != 1)
        y = kiln_scale(c->g, y, alpha);
    kiln_node *bias = ox_f32(c, n, 2);
    if (bias && beta != 0)
        y = kiln_add(c->g, y, beta != 1 ? kiln_scale(c->g, bias, beta) : bias);
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_SQ, R_L1, R_L2, R_LSE } red_kind;

static const char *const red_names[] = {
    "ReduceSum",       "ReduceMean", "ReduceMax", "ReduceMin",
    "ReduceSumSquare", "ReduceL1",   "ReduceL2",  "ReduceLogSumExp"};

static kiln_node *reduce(ox_ctx *c, red_kind kind, kiln_node *x, unsigned mask,
                         int keep)
{
    kiln_graph *g = c->g;
    switch (kind) {
    case R_SUM:
        return kiln_sum(g, x, mask, keep);
    case R_MEAN:
        return kiln_mean(g, x, mask, keep);
    case R_MAX:
        return kiln_reduce_max(g, x, mask, keep);
    case R_MIN:
        return kiln_neg(g, kiln_reduce_max(g, kiln_neg(g, x), mask, keep));
    case R_SQ:
        return kiln_sum(g, kiln_mul(g, x, x), mask, keep);
    case R_L1:
        return kiln_sum(g, kiln_abs(g, x), mask, keep);
    case R_L2:
        return kiln_sqrt(g, kiln_sum(g, kiln_mul(g, x, x), mask, keep));
    default: {
        kiln_node *m = kiln_reduce_max(g, x, mask, 1);
        kiln_node *s = kiln_sum(g, kiln_exp(g, kiln_sub(g, x, m)), mask, keep);
        kiln_node *mk = keep ? m : kiln_reduce_max(g, x, mask, 0);
        return kiln_add(g, kiln_log(g, s), mk);
    }
    }
}

static int conv_reduce(ox_ctx *c, ox_node *n)
{
    int kind = 0;
    while (strcmp(n->p->op_type, red_names[kind]))
        kind++;
    int64_t keep, noop, count = 0;
    const int64_t *axes = NULL;
    if (ox_attr_int(c, n, "keepdims", 1, &keep) ||
        ox_attr_int(c, n, "noop_with_empty_axes", 0, &noop))
        return -1;
    if (kind == R_SUM && c->opset >= 13) {
        if (n->n_in > 1 && n->in[1]) {
            const ox_host *h = ox_known_ints(c, n, 1);
            if (!h)
                return -1;
            axes = h->i;
            count = h->numel;
        }
    } else if (ox_attr_ints(c, n, "axes", &axes, &count))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    int nd = kiln_node_shape(x).ndim;
    unsigned mask = 0;
    for (int64_t k = 0; k < count; k++) {
        int a = ox_axis(c, n, axes[k], nd);
        if (a < 0)
            return -1;
        mask |= KILN_AXIS(a);
    }
    if (!count && noop) {
        ox_out(c, n, x, ox_in_type(n, 0));
        return 0;
    }
    if (!count)
        mask = nd ? (KILN_AXIS(nd) - 1) : 0;
    ox_out(c, n, mask ? reduce(c, (red_kind)kind, x, mask, keep != 0) : x,
           ox_in_type(n, 0));
    return 0;
}

static int conv_argmax(ox_ctx *c, ox_node *n)
{
    int64_t axis, keep, last;
    if (ox_attr_int(c, n, "axis", 0, &axis) ||
        ox_attr_int(c, n, "keepdims", 1, &keep) ||
        ox_attr_int(c, n, "select_last_index", 0, &last))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    if (!strcmp(n->p->op_type, "ArgMin"))
        x = kiln_neg(c->g, x);
    /* The last of equal values: the first one of x reversed. */
    if (last && !(x = ox_flip(c, n, x, a)))
        return -1;
    kiln_node *y = kiln_argmax(c->g, x, a);
    if (last) {
        int32_t end = (int32_t)(s.d[a] - 1);
        y = kiln_int_sub(c->g, kiln_constant(c->g, KILN_I32, KILN_SCALAR, &end),
                         y);
    }
    if (keep) {
        s.d[a] = 1;
        y = kiln_reshape(c->g, y, s);
    }
    n->out[0] = y;
    n->out_type[0] = OX_INT64;
    return 0;
}

static int conv_cast(ox_ctx *c, ox_node *n)
{
    int64_t to;
    char b[32];
    if (ox_attr_int(c, n, "to", OX_FLOAT, &to))
        return -1;
    if (!ox_type_supported((int)to))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "cast to %s",
                          ox_type_name((int)to, b, sizeof b)),
               -1;
    kiln_node *x = ox_in(c, n, 0);
    if (to == OX_BOOL) {
        kiln_node *z = kiln_eq(c->g, ox_f32(c, n, 0), kiln_scalar(c->g, 0));
        x = kiln_sub(c->g, kiln_scalar(c->g, 1), z);
    }
    ox_out(c, n, ox_round_to(c, x, (int)to), (int)to);
    const ox_host *k = n->in[0] ? n->in[0]->known : NULL;
    if (k && k->i && !ox_type_is_float((int)to) && to != OX_BOOL)
        n->out_known[0] = ox_host_ints(k->shape, k->i);
    ox_fold_cast(n, (int)to);
    return 0;
}

/* A node holding h, and h kept as the output's known values. */
static int constant_out(ox_ctx *c, ox_node *n, ox_host *h)
{
    char err[KILN_ERRMSG_MAX];
    kiln_node *y;
    if (h->i) {
        int32_t *v;
        if (ox_host_i32(h, &v, err, sizeof err))
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "%s", err), -1;
        y = kiln_constant(c->g, KILN_I32, h->shape, v);
        free(v);
    } else
        y = h->f ? kiln_constant(c->g, KILN_F32, h->shape, h->f)
                 : kiln_fill(c->g, h->shape, 0);
    n->out[0] = y;
    n->out_type[0] = h->type;
    n->out_known[0] = h;
    return 0;
}

/* A Constant's value attribute: a tensor, or a float(s) / int(s). */
static int constant_host(ox_ctx *c, ox_node *n, ox_host *h)
{
    const Onnx__AttributeProto *a =
        n->p->n_attribute == 1 ? n->p->attribute[0] : NULL;
    char err[KILN_ERRMSG_MAX];
    int unsupported;
    if (!a || !a->name)
        return ox_problem(c, n, KILN_ERR_IO, "needs one value attribute"), -1;
    if (!strcmp(a->name, "value") && a->t) {
        if (!ox_host_read(a->t, NULL, h, err, sizeof err, &unsupported))
            return 0;
        return ox_problem(c, n,
                          unsupported ? KILN_ERR_UNSUPPORTED : KILN_ERR_IO,
                          "%s", err),
               -1;
    }
    int ints = !strcmp(a->name, "value_int") || !strcmp(a->name, "value_ints");
    int list =
        !strcmp(a->name, "value_ints") || !strcmp(a->name, "value_floats");
    int64_t count = list ? (int64_t)(ints ? a->n_ints : a->n_floats) : 1;
    memset(h, 0, sizeof *h);
    h->type = ints ? OX_INT64 : OX_FLOAT;
    h->shape = list ? KILN_SHAPE(count) : KILN_SCALAR;
    h->numel = count;
    if (ints)
        h->i = malloc((size_t)count * sizeof(int64_t) + 1);
    else
        h->f = malloc((size_t)count * sizeof(float) + 1);
    if (!h->i && !h->f)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t k = 0; k < count; k++) {
        if (ints)
            h->i[k] = list ? a->ints[k] : a->i;
        else
            h->f[k] = list ? a->floats[k] : a->f;
    }
    return 0;
}

static int conv_constant(ox_ctx *c, ox_node *n)
{
    ox_host *h = calloc(1, sizeof *h);
    if (!h)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    if (constant_host(c, n, h) || constant_out(c, n, h)) {
        ox_host_free(h);
        free(h);
        return -1;
    }
    return 0;
}

static int known_shape(ox_ctx *c, ox_node *n, int i, kiln_shape *s)
{
    const ox_host *h = ox_known_ints(c, n, i);
    if (!h)
        return -1;
    if (h->numel > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than 8 dims"), -1;
    memset(s, 0, sizeof *s);
    s->ndim = (int)h->numel;
    for (int k = 0; k < s->ndim; k++)
        s->d[k] = h->i[k];
    if (kiln_shape_numel(*s) < 0)
        return ox_problem(c, n, KILN_ERR_ARG, "bad shape"), -1;
    return 0;
}

static int conv_constant_of_shape(ox_ctx *c, ox_node *n)
{
    kiln_shape s;
    float v = 0;
    int64_t iv = 0, is_int = 0;
    int type = OX_FLOAT;
    if (known_shape(c, n, 0, &s))
        return -1;
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    if (a && a->t) {
        ox_host h;
        char err[KILN_ERRMSG_MAX];
        int unsupported;
        if (ox_host_read(a->t, NULL, &h, err, sizeof err, &unsupported) ||
            h.numel != 1) {
            ox_host_free(&h);
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "bad value"), -1;
        }
        v = h.f ? h.f[0] : (float)h.i[0];
        iv = h.i ? h.i[0] : 0;
        is_int = h.i != NULL;
        type = h.type;
        ox_host_free(&h);
    }
    ox_out(c, n, ox_fill(c->g, s, v), type);
    /* Integers filled into a small shape are shape arithmetic (a suffix
       of ones to concatenate into a target shape): keep them known. */
    int64_t count = kiln_shape_numel(s);
    int64_t *fill = is_int && count <= 4096
                        ? malloc((size_t)(count ? count : 1) * sizeof *fill)
                        : NULL;
    for (int64_t k = 0; fill && k < count; k++)
        fill[k] = iv;
    if (fill)
        n->out_known[0] = ox_host_ints(s, fill);
    free(fill);
    return 0;
}

/* Expand: numpy broadcast of x and the given shape. */
static int conv_expand(ox_ctx *c, ox_node *n)
{
    kiln_shape s, x = kiln_node_shape(ox_in(c, n, 0)), out = {0};
    if (known_shape(c, n, 1, &s))
        return -1;
    out.ndim = s.ndim > x.ndim ? s.ndim : x.ndim;
    for (int k = 0; k < out.ndim; k++) {
        int ks = k - (out.ndim - s.ndim), kx = k - (out.ndim - x.ndim);
        int64_t a = ks >= 0 ? s.d[ks] : 1, b = kx >= 0 ? x.d[kx] : 1;
        out.d[k] = a == 1 ? b : a;
    }
    n->out[0] = kiln_broadcast_to(c->g, ox_in(c, n, 0), out);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

static int conv_pad(ox_ctx *c, ox_node *n)
{
    char mode[16];
    const int64_t *pads;
    int64_t count;
    float value = 0;
    if (ox_attr_string(c, n, "mode", "constant", mode, sizeof mode))
        return -1;
    if (c->opset < 11) {
        if (ox_attr_ints(c, n, "pads", &pads, &count) ||
            ox_attr_float(c, n, "value", 0, &value))
            return -1;
    } else {
        const ox_host *h = ox_known_ints(c, n, 1);
        if (!h)
            return -1;
        pads = h->i;
        count = h->numel;
        const ox_value *v = n->n_in > 2 ? n->in[2] : NULL;
        if (v && (!v->known || v->known->numel != 1))
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "constant_value must be a known scalar"),
                   -1;
        if (v)
            value = v->known->f ? v->known->f[0] : (float)v->known->i[0];
    }
    kiln_node *x = ox_in(c, n, 0);
    int nd = kiln_node_shape(x).ndim;
    if (count != 2 * nd)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "pads has %lld entries for rank %d", (long long)count,
                          nd),
               -1;
    for (int k = 0; k < count; k++)
        if (pads[k] < 0 || pads[k] > KILN_MAX_NUMEL)
            return ox_problem(c, n,
                              pads[k] < 0 ? KILN_ERR_UNSUPPORTED
                                          : KILN_ERR_SHAPE,
                              "pad %lld", (long long)pads[k]),
                   -1;
    n->out[0] = strcmp(mode, "constant")
                    ? ox_pad_mode(c, n, x, pads, mode)
                    : kiln_pad(c->g, x, pads, pads + nd, value);
    if (!n->out[0])
        return -1;
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

const ox_op ox_tensor_ops[] = {
    {"MatMul", conv_matmul, ""},
    {"Gemm", conv_gemm, "alpha,beta,broadcast,transA,transB"},
    {"ReduceSum", conv_reduce, "axes,keepdims,noop_with_empty_axes"},
    {"ReduceMean", conv_reduce, "axes,keepdims"},
    {"ReduceMax", conv_reduce, "axes,keepdims"},
    {"ReduceMin", conv_reduce, "axes,keepdims"},
    {"ReduceSumSquare", conv_reduce, "axes,keepdims"},
    {"ReduceL1", conv_reduce, "axes,keepdims"},
    {"ReduceL2", conv_reduce, "axes,keepdims"},
    {"ReduceLogSumExp", conv_reduce, "axes,keepdims"},
    {"ArgMax", conv_argmax, "axis,keepdims,select_last_index"},
    {"ArgMin", conv_argmax, "axis,keepdims,select_last_index"},
    {"Cast", conv_cast, "to"},
    {"Constant", conv_constant,
     "value,value_float,value_floats,value_int,"
     "value_ints"},
    {"ConstantOfShape", conv_constant_of_shape, "value"},
    {"Expand", conv_expand, ""},
    {"Pad", conv_pad, "mode,pads,value"},
    {NULL, NULL, NULL},
};
