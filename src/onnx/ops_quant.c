/* ONNX's quantized ops, computed in f32 from the integers Kiln holds in
   i32: QuantizeLinear (round half to even, plus the zero point, saturated
   to uint8 or int8), DequantizeLinear, DynamicQuantizeLinear, and the
   integer products MatMulInteger, ConvInteger, QLinearMatMul and
   QLinearConv as f32 products of (x - zero point) rounded back to
   integers: exact while every sum stays below 2^24 (a uint8 product has
   at most 255^2 per term, so at least 258 terms), which covers small
   layers, not a fast integer kernel. */
#include <string.h>

#include "onnx/onnx_internal.h"

/* Input i as f32 to broadcast against x of shape xs: a scalar (or one
   element) as it is, a vector along axis a (its length xs.d[a]) as [1, ..,
   C, .., 1]; NULL when absent (zero points) or (recorded) otherwise. */
static kiln_node *along(ox_ctx *c, const ox_node *n, int i, kiln_shape xs,
                        int a)
{
    if (i >= n->n_in || !n->in[i])
        return NULL;
    kiln_node *v = ox_f32(c, n, i);
    int64_t count = kiln_shape_numel(kiln_node_shape(v));
    if (count == 1)
        return kiln_reshape(c->g, v, KILN_SCALAR);
    kiln_shape s = {.ndim = xs.ndim};
    for (int k = 0; k < xs.ndim; k++)
        s.d[k] = k == a ? count : 1;
    if (a < 0 || a >= xs.ndim || count != xs.d[a])
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "input %d has %lld values: want 1 or one per index "
                          "of axis %d",
                          i, (long long)count, a),
               NULL;
    return kiln_reshape(c->g, v, s);
}

/* x minus the zero point of input i (along axis a), as f32. */
static kiln_node *centred(ox_ctx *c, const ox_node *n, kiln_node *x, int i,
                          int a)
{
    kiln_node *xf = kiln_cast(c->g, x, KILN_F32);
    kiln_node *z = along(c, n, i, kiln_node_shape(xf), a);
    return z ? kiln_sub(c->g, xf, z) : xf;
}

/* round(v) + zp (NULL: 0), saturated to type (uint8 unless int8), set as
   n's output k. */
static void quantize(ox_ctx *c, ox_node *n, int k, kiln_node *v, kiln_node *zp,
                     int type)
{
    int s8 = type == OX_INT8;
    kiln_node *q = kiln_round(c->g, v);
    if (zp)
        q = kiln_add(c->g, q, zp);
    q = kiln_cast(c->g, kiln_clamp(c->g, q, s8 ? -128 : 0, s8 ? 127 : 255),
                  KILN_I32);
    n->out[k] = q;
    n->out_type[k] = s8 ? OX_INT8 : OX_UINT8;
}

/* The scale (input 1) of x along the axis attribute (opset 13; default 1)
   into *a; an axis out of range matters only for a vector of scales
   (along reports it then).  NULL (recorded) on failure. */
static kiln_node *scale_of(ox_ctx *c, const ox_node *n, kiln_shape xs, int *a)
{
    int64_t axis;
    if (ox_attr_int(c, n, "axis", 1, &axis))
        return NULL;
    if (axis < 0)
        axis += xs.ndim;
    *a = axis >= 0 && axis < xs.ndim ? (int)axis : -1;
    return along(c, n, 1, xs, *a);
}

static int conv_quantize(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape xs = kiln_node_shape(x);
    int a, type = n->n_in > 2 && n->in[2] ? ox_in_type(n, 2) : OX_UINT8;
    kiln_node *scale = scale_of(c, n, xs, &a);
    if (!scale)
        return -1;
    if (type != OX_UINT8 && type != OX_INT8)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "zero points other than uint8 and int8"),
               -1;
    quantize(c, n, 0, kiln_div(c->g, x, scale), along(c, n, 2, xs, a), type);
    return 0;
}

static int conv_dequantize(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_in(c, n, 0);
    int a;
    kiln_node *scale = scale_of(c, n, kiln_node_shape(x), &a);
    if (!scale)
        return -1;
    ox_out(c, n, kiln_mul(c->g, centred(c, n, x, 2, a), scale), OX_FLOAT);
    return 0;
}

/* uint8 y, its scale and zero point from x's range widened to hold 0,
   as ONNX defines it: scale (max - min) / 255, zero point round(clamp(-min
   / scale)). */
static int conv_dynamic_quantize(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_node *zero = kiln_scalar(g, 0);
    kiln_node *lo = kiln_min(g, kiln_reduce_min(g, x, KILN_ALL_AXES, 0), zero);
    kiln_node *hi = kiln_max(g, kiln_reduce_max(g, x, KILN_ALL_AXES, 0), zero);
    kiln_node *scale = kiln_scale(g, kiln_sub(g, hi, lo), 1.0f / 255);
    kiln_node *zp = kiln_round(
        g, kiln_clamp(g, kiln_sub(g, zero, kiln_div(g, lo, scale)), 0, 255));
    quantize(c, n, 0, kiln_div(g, x, scale), zp, OX_UINT8);
    for (int k = 1; k < 3 && k < n->n_out; k++) {
        n->out[k] = k == 1 ? scale : kiln_cast(g, zp, KILN_I32);
        n->out_type[k] = k == 1 ? OX_FLOAT : OX_UINT8;
    }
    return 0;
}

/* (a - za) times (b - zb) in f32; a's zero point per row, b's per column. */
static kiln_node *product(ox_ctx *c, const ox_node *n, int ia, int iza, int ib,
                          int izb)
{
    kiln_node *a = ox_in(c, n, ia), *b = ox_in(c, n, ib);
    int na = kiln_node_shape(a).ndim, nb = kiln_node_shape(b).ndim;
    return kiln_matmul(c->g, centred(c, n, a, iza, na - 2),
                       centred(c, n, b, izb, nb - 1), 0, 0);
}

static int conv_matmul_integer(ox_ctx *c, ox_node *n)
{
    kiln_node *y = product(c, n, 0, 2, 1, 3);
    ox_out(c, n, kiln_cast(c->g, kiln_round(c->g, y), KILN_I32), OX_INT32);
    return 0;
}

/* The scalar product of inputs i and j divided by input k. */
static kiln_node *rescale(ox_ctx *c, const ox_node *n, int i, int j, int k)
{
    kiln_graph *g = c->g;
    kiln_node *s[3];
    int at[3] = {i, j, k};
    for (int t = 0; t < 3; t++) {
        s[t] = ox_f32(c, n, at[t]);
        if (kiln_shape_numel(kiln_node_shape(s[t])) != 1)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "input %d: only one scale", at[t]),
                   NULL;
        s[t] = kiln_reshape(g, s[t], KILN_SCALAR);
    }
    return kiln_div(g, kiln_mul(g, s[0], s[1]), s[2]);
}

static int conv_qlinear_matmul(ox_ctx *c, ox_node *n)
{
    kiln_node *y = product(c, n, 0, 2, 3, 5), *m = rescale(c, n, 1, 4, 6);
    if (!m)
        return -1;
    quantize(c, n, 0, kiln_mul(c->g, y, m),
             along(c, n, 7, kiln_node_shape(y), 0), ox_in_type(n, 7));
    return 0;
}

/* conv(x - xz, w - wz): w's zero point one or one per output channel. */
static kiln_node *int_conv(ox_ctx *c, const ox_node *n, int ix, int ixz, int iw,
                           int iwz)
{
    kiln_node *x = centred(c, n, ox_in(c, n, ix), ixz, 0);
    kiln_node *w = centred(c, n, ox_in(c, n, iw), iwz, 0);
    return ox_conv_build(c, n, x, w, NULL);
}

static int conv_conv_integer(ox_ctx *c, ox_node *n)
{
    kiln_node *y = int_conv(c, n, 0, 2, 1, 3);
    if (!y)
        return -1;
    ox_out(c, n, kiln_cast(c->g, kiln_round(c->g, y), KILN_I32), OX_INT32);
    return 0;
}

/* (conv(x - xz, w - wz) + B) * x_scale * w_scale / y_scale, quantized to
   y's zero point; w_scale one or one per output channel. */
static int conv_qlinear_conv(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *y = int_conv(c, n, 0, 2, 3, 5);
    if (!y)
        return -1;
    if (kiln_graph_status(g) != KILN_OK) /* y poisoned: the graph's error */
        return 0;
    kiln_shape ys = kiln_node_shape(y);
    if (n->n_in > 8 && n->in[8])
        y = kiln_add(g, y, along(c, n, 8, ys, 1));
    kiln_node *sw = along(c, n, 4, ys, 1), *sx = ox_f32(c, n, 1),
              *sy = ox_f32(c, n, 6);
    if (!sw || kiln_shape_numel(kiln_node_shape(sx)) != 1 ||
        kiln_shape_numel(kiln_node_shape(sy)) != 1)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "x_scale and y_scale must be one value, w_scale "
                          "one or one per output channel"),
               -1;
    kiln_node *m =
        kiln_div(g, kiln_mul(g, sw, kiln_reshape(g, sx, KILN_SCALAR)),
                 kiln_reshape(g, sy, KILN_SCALAR));
    quantize(c, n, 0, kiln_mul(g, y, m), along(c, n, 7, ys, 1),
             ox_in_type(n, 7));
    return 0;
}

#define CONV_ATTRS "auto_pad,dilations,group,kernel_shape,pads,strides"

const ox_op ox_quant_ops[] = {
    {"QuantizeLinear", conv_quantize, "axis"},
    {"DequantizeLinear", conv_dequantize, "axis"},
    {"DynamicQuantizeLinear", conv_dynamic_quantize, ""},
    {"MatMulInteger", conv_matmul_integer, ""},
    {"QLinearMatMul", conv_qlinear_matmul, ""},
    {"ConvInteger", conv_conv_integer, CONV_ATTRS},
    {"QLinearConv", conv_qlinear_conv, CONV_ATTRS},
    {NULL, NULL, NULL},
};
