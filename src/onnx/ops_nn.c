/* Converters of convolution, pooling and normalisation (inference). */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* A window op's geometry over its (1 or 2) spatial dims, with ONNX's
   begin/end pads resolved from pads or auto_pad. */
typedef struct window {
    int nsp;
    int64_t in[2], k[2];
    int stride[2], dil[2];
    int64_t lo[2], hi[2];
} window;

int ox_ints_attr(ox_ctx *c, const ox_node *n, const char *name, int count,
                 int64_t def, int64_t *out)
{
    const int64_t *v;
    int64_t got;
    if (ox_attr_ints(c, n, name, &v, &got))
        return -1;
    if (got && got != count)
        return ox_problem(c, n, KILN_ERR_ARG, "%s has %lld entries, not %d",
                          name, (long long)got, count),
               -1;
    for (int k = 0; k < count; k++) {
        out[k] = got ? v[k] : def;
        if (out[k] > INT32_MAX || out[k] < (def == 0 ? 0 : 1))
            return ox_problem(c, n, KILN_ERR_ARG, "bad %s", name), -1;
    }
    return 0;
}

static int auto_pad(ox_ctx *c, const ox_node *n, window *w, const char *mode,
                    int ceil_mode)
{
    if (!strcmp(mode, "VALID") || !strcmp(mode, "NOTSET"))
        return 0;
    int upper = !strcmp(mode, "SAME_UPPER");
    if (!upper && strcmp(mode, "SAME_LOWER"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "auto_pad '%s'", mode),
               -1;
    (void)ceil_mode;
    for (int k = 0; k < w->nsp; k++) {
        int64_t out = (w->in[k] + w->stride[k] - 1) / w->stride[k];
        int64_t total =
            (out - 1) * w->stride[k] + (w->k[k] - 1) * w->dil[k] + 1 - w->in[k];
        if (total < 0)
            total = 0;
        w->lo[k] = upper ? total / 2 : total - total / 2;
        w->hi[k] = total - w->lo[k];
    }
    return 0;
}

/* Reads strides, dilations, pads and auto_pad for a window of kernel k
   over x's spatial dims. */
static int read_window(ox_ctx *c, const ox_node *n, kiln_shape xs,
                       const int64_t *k, window *w)
{
    int64_t st[2], dl[2], pads[4];
    char mode[16];
    memset(w, 0, sizeof *w);
    w->nsp = xs.ndim - 2;
    if (w->nsp < 1 || w->nsp > 2)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%d spatial dims (Kiln has 1 to 3)", w->nsp),
               -1;
    if (ox_ints_attr(c, n, "strides", w->nsp, 1, st) ||
        ox_ints_attr(c, n, "dilations", w->nsp, 1, dl) ||
        ox_ints_attr(c, n, "pads", 2 * w->nsp, 0, pads) ||
        ox_attr_string(c, n, "auto_pad", "NOTSET", mode, sizeof mode))
        return -1;
    for (int i = 0; i < w->nsp; i++) {
        if (k[i] > INT32_MAX) /* a weight's: (k - 1) dil must not overflow */
            return ox_problem(c, n, KILN_ERR_SHAPE, "kernel size %lld",
                              (long long)k[i]),
                   -1;
        w->in[i] = xs.d[2 + i];
        w->k[i] = k[i];
        w->stride[i] = (int)st[i];
        w->dil[i] = (int)dl[i];
        w->lo[i] = pads[i];
        w->hi[i] = pads[w->nsp + i];
    }
    return auto_pad(c, n, w, mode, 0);
}

/* Pads x explicitly by what its begin and end pads do not share, so the
   op itself sees symmetric padding (with all set, by every pad: PyTorch's
   pools take at most half the kernel); value fills. */
static kiln_node *even_pads(ox_ctx *c, kiln_node *x, window *w, float value,
                            int all)
{
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS] = {0};
    int uneven = 0;
    for (int k = 0; k < w->nsp; k++) {
        int64_t m = w->lo[k] < w->hi[k] ? w->lo[k] : w->hi[k];
        if (all)
            m = 0;
        lo[2 + k] = w->lo[k] - m;
        hi[2 + k] = w->hi[k] - m;
        uneven |= lo[2 + k] || hi[2 + k];
        w->lo[k] = w->hi[k] = m;
    }
    return uneven ? kiln_pad(c->g, x, lo, hi, value) : x;
}

/* A 1-D window op runs as 2-D with height 1. */
static kiln_node *to_2d(ox_ctx *c, kiln_node *x, window *w)
{
    if (w->nsp == 2)
        return x;
    kiln_shape s = kiln_node_shape(x);
    w->in[1] = w->in[0], w->k[1] = w->k[0], w->lo[1] = w->lo[0];
    w->hi[1] = w->hi[0], w->stride[1] = w->stride[0], w->dil[1] = w->dil[0];
    w->in[0] = w->k[0] = w->stride[0] = w->dil[0] = 1;
    w->lo[0] = w->hi[0] = 0;
    return kiln_reshape(c->g, x, KILN_SHAPE(s.d[0], s.d[1], 1, s.d[2]));
}

static kiln_node *from_2d(ox_ctx *c, kiln_node *y, int nsp)
{
    if (nsp == 2)
        return y;
    kiln_shape s = kiln_node_shape(y);
    return kiln_reshape(c->g, y, KILN_SHAPE(s.d[0], s.d[1], s.d[3]));
}

kiln_node *ox_conv_build(ox_ctx *c, const ox_node *n, kiln_node *x,
                         kiln_node *wt, kiln_node *bias)
{
    kiln_shape ws = kiln_node_shape(wt);
    int64_t group, ks[2];
    window w;
    if (ox_attr_int(c, n, "group", 1, &group))
        return NULL;
    if (group < 1 || group > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_ARG, "bad group"), NULL;
    if (read_window(c, n, kiln_node_shape(x), ws.d + 2, &w))
        return NULL;
    if (ws.ndim != w.nsp + 2 ||
        ox_ints_attr(c, n, "kernel_shape", w.nsp, 1, ks))
        return ox_problem(c, n, KILN_ERR_SHAPE, "weight rank"), NULL;
    x = to_2d(c, even_pads(c, x, &w, 0, 0), &w);
    if (w.nsp == 1)
        wt = kiln_reshape(c->g, wt, KILN_SHAPE(ws.d[0], ws.d[1], 1, ws.d[2]));
    kiln_conv_params p = {.groups = (int)group};
    for (int k = 0; k < 2; k++) {
        p.stride[k] = w.stride[k];
        p.dilation[k] = w.dil[k];
        p.padding[k] = (int)w.lo[k];
    }
    return from_2d(c, kiln_conv2d(c->g, x, wt, bias, &p), w.nsp);
}

static int conv_conv(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0);
    if (kiln_node_shape(x).ndim == 5) {
        int64_t group;
        if (ox_attr_int(c, n, "group", 1, &group))
            return -1;
        if (group < 1 || group > INT32_MAX)
            return ox_problem(c, n, KILN_ERR_ARG, "bad group"), -1;
        return ox_conv3d(c, n, group);
    }
    kiln_node *y = ox_conv_build(c, n, x, ox_f32(c, n, 1), ox_f32(c, n, 2));
    if (!y)
        return -1;
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

static int conv_pool(ox_ctx *c, ox_node *n)
{
    int max = !strcmp(n->p->op_type, "MaxPool");
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape xs = kiln_node_shape(x);
    int64_t ks[2], ceil_mode, cip = 0, order = 0;
    window w;
    int nsp = xs.ndim - 2;
    int indices = n->n_out > 1 && n->p->output[1] && *n->p->output[1];
    if (indices && (!max || nsp == 3))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "the Indices output (of a 1-D or 2-D MaxPool only)"),
               -1;
    if (nsp == 3)
        return ox_pool3d(c, n, max);
    if (nsp < 1 || nsp > 2)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%d spatial dims (Kiln has 1 to 3)", nsp),
               -1;
    if (ox_ints_attr(c, n, "kernel_shape", nsp >= 1 && nsp <= 2 ? nsp : 0, 1,
                     ks) ||
        read_window(c, n, xs, ks, &w) ||
        ox_attr_int(c, n, "ceil_mode", 0, &ceil_mode) ||
        ox_attr_int(c, n, "count_include_pad", 0, &cip) ||
        ox_attr_int(c, n, "storage_order", 0, &order))
        return -1;
    int wide = 0;
    for (int k = 0; k < w.nsp; k++)
        wide |= 2 * w.lo[k] > w.k[k] || 2 * w.hi[k] > w.k[k];
    /* Kiln's pool cannot leave such pads out of the count: all pads are
       explicit zeros and the sum is divided by the pool of a ones mask. */
    int exact = 0;
    for (int k = 0; !max && !cip && k < w.nsp; k++)
        exact |= w.lo[k] != w.hi[k] || wide;
    if (exact && ceil_mode)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "ceil_mode with pads uneven or over half the kernel "
                          "without count_include_pad"),
               -1;
    window wc = w;
    kiln_node *x0 = x;
    kiln_node *count =
        exact ? to_2d(c, even_pads(c, ox_fill(c->g, xs, 1), &wc, 0, 1), &wc)
              : NULL;
    x = to_2d(c, even_pads(c, x, &w, max ? -INFINITY : 0, wide || exact), &w);
    int kk[2] = {(int)w.k[0], (int)w.k[1]}, st[2] = {w.stride[0], w.stride[1]};
    int pd[2] = {(int)w.lo[0], (int)w.lo[1]}, dl[2] = {w.dil[0], w.dil[1]};
    kiln_node *y;
    if (max)
        y = kiln_max_pool2d(c->g, x, kk, st, pd, dl, ceil_mode != 0);
    else if (dl[0] != 1 || dl[1] != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "dilated average pool"),
               -1;
    else
        y = kiln_avg_pool2d(c->g, x, kk, st, pd, ceil_mode != 0, cip != 0);
    if (count)
        y = kiln_div(c->g, y, kiln_avg_pool2d(c->g, count, kk, st, pd, 0, 1));
    y = from_2d(c, y, w.nsp);
    ox_out(c, n, y, max ? ox_in_type(n, 0) : OX_FLOAT);
    return indices ? ox_pool_indices(c, n, x0, y) : 0;
}

static int conv_global_pool(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0);
    int nd = kiln_node_shape(x).ndim;
    if (nd < 3)
        return ox_problem(c, n, KILN_ERR_SHAPE, "rank %d below 3", nd), -1;
    unsigned mask = (KILN_AXIS(nd) - 1) & ~3u;
    ox_out(c, n,
           strcmp(n->p->op_type, "GlobalMaxPool")
               ? kiln_mean(c->g, x, mask, 1)
               : kiln_reduce_max(c->g, x, mask, 1),
           OX_FLOAT);
    return 0;
}

/* v [C] as [1, C, 1, ...] to broadcast over x of rank nd. */
static kiln_node *per_channel(ox_ctx *c, kiln_node *v, int nd)
{
    kiln_shape s = {.ndim = nd};
    for (int k = 0; k < nd; k++)
        s.d[k] = 1;
    s.d[1] = kiln_shape_numel(kiln_node_shape(v));
    return kiln_reshape(c->g, v, s);
}

/* BatchNormalization with training_mode: normalised by the batch's mean
   and biased variance over every axis but 1; outputs 1 and 2 the running
   statistics, input * momentum + batch's * (1 - momentum), as ONNX's
   reference computes them. */
static int batch_norm_train(ox_ctx *c, ox_node *n, kiln_node *x, float eps)
{
    kiln_graph *g = c->g;
    float momentum;
    if (ox_attr_float(c, n, "momentum", 0.9f, &momentum))
        return -1;
    kiln_shape xs = kiln_node_shape(x);
    unsigned mask = (KILN_AXIS(xs.ndim) - 1) & ~KILN_AXIS(1);
    kiln_node *mean = kiln_mean(g, x, mask, 1), *d = kiln_sub(g, x, mean);
    kiln_node *var = kiln_mean(g, kiln_mul(g, d, d), mask, 1);
    kiln_node *inv =
        kiln_div(g, per_channel(c, ox_f32(c, n, 1), xs.ndim),
                 kiln_sqrt(g, kiln_add(g, var, kiln_scalar(g, eps))));
    ox_out(c, n,
           kiln_add(g, kiln_mul(g, d, inv),
                    per_channel(c, ox_f32(c, n, 2), xs.ndim)),
           OX_FLOAT);
    kiln_node *stats[2] = {mean, var};
    for (int k = 0; k < 2 && k + 1 < n->n_out; k++) {
        kiln_node *run = ox_f32(c, n, 3 + k);
        kiln_node *now = kiln_reshape(g, stats[k], kiln_node_shape(run));
        n->out[1 + k] = kiln_add(g, kiln_scale(g, run, momentum),
                                 kiln_scale(g, now, 1 - momentum));
        n->out_type[1 + k] = OX_FLOAT;
    }
    return 0;
}

/* Inference: (x - mean) * scale / sqrt(var + eps) + bias. */
static int conv_batch_norm(ox_ctx *c, ox_node *n)
{
    float eps;
    int64_t training, spatial, is_test;
    if (ox_attr_float(c, n, "epsilon", 1e-5f, &eps) ||
        ox_attr_int(c, n, "training_mode", 0, &training) ||
        ox_attr_int(c, n, "spatial", 1, &spatial) ||
        ox_attr_int(c, n, "is_test", c->opset >= 7, &is_test))
        return -1;
    training |= !is_test; /* before opset 7, training unless is_test */
    /* training with opset 14's outputs only (earlier opsets had others) */
    if ((training && c->opset < 14) || (!training && n->n_out > 1) || !spatial)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "training mode before opset 14, or non-spatial "
                          "statistics"),
               -1;
    kiln_node *x = ox_f32(c, n, 0);
    int nd = kiln_node_shape(x).ndim;
    if (nd < 2)
        return ox_problem(c, n, KILN_ERR_SHAPE, "rank below 2"), -1;
    if (training)
        return batch_norm_train(c, n, x, eps);
    kiln_graph *g = c->g;
    kiln_node *var = per_channel(c, ox_f32(c, n, 4), nd);
    kiln_node *inv =
        kiln_div(g, per_channel(c, ox_f32(c, n, 1), nd),
                 kiln_sqrt(g, kiln_add(g, var, kiln_scalar(g, eps))));
    kiln_node *y =
        kiln_mul(g, kiln_sub(g, x, per_channel(c, ox_f32(c, n, 3), nd)), inv);
    ox_out(c, n, kiln_add(g, y, per_channel(c, ox_f32(c, n, 2), nd)), OX_FLOAT);
    return 0;
}

/* LayerNormalization's optional outputs: the mean and 1 / sqrt(var + eps)
   over the normalised axes (from axis a on), kept as size 1. */
static void layer_norm_stats(ox_ctx *c, ox_node *n, kiln_node *x, int a,
                             float eps)
{
    kiln_graph *g = c->g;
    unsigned mask =
        (KILN_AXIS(kiln_node_shape(x).ndim) - 1) & ~(KILN_AXIS(a) - 1);
    kiln_node *mean = kiln_mean(g, x, mask, 1), *d = kiln_sub(g, x, mean);
    kiln_node *var = kiln_mean(g, kiln_mul(g, d, d), mask, 1);
    n->out[1] = mean;
    n->out[2] =
        n->n_out > 2
            ? kiln_div(g, kiln_scalar(g, 1),
                       kiln_sqrt(g, kiln_add(g, var, kiln_scalar(g, eps))))
            : NULL;
    n->out_type[1] = n->out_type[2] = OX_FLOAT;
}

static int conv_layer_norm(ox_ctx *c, ox_node *n)
{
    float eps;
    int64_t axis, stash;
    if (ox_attr_float(c, n, "epsilon", 1e-5f, &eps) ||
        ox_attr_int(c, n, "axis", -1, &axis) ||
        ox_attr_int(c, n, "stash_type", 1, &stash))
        return -1;
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x), ns = {0};
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    for (int k = a; k < s.ndim; k++)
        ns.d[ns.ndim++] = s.d[k];
    kiln_node *w = ox_f32(c, n, 1), *b = ox_f32(c, n, 2);
    w = w ? kiln_broadcast_to(c->g, w, ns) : NULL;
    b = b ? kiln_broadcast_to(c->g, b, ns) : NULL;
    ox_out(c, n, kiln_layer_norm(c->g, x, ns, w, b, eps), OX_FLOAT);
    if (n->n_out > 1)
        layer_norm_stats(c, n, x, a, eps);
    return 0;
}

static int conv_instance_norm(ox_ctx *c, ox_node *n)
{
    float eps;
    if (ox_attr_float(c, n, "epsilon", 1e-5f, &eps))
        return -1;
    ox_out(c, n,
           kiln_instance_norm(c->g, ox_f32(c, n, 0), ox_f32(c, n, 1),
                              ox_f32(c, n, 2), eps),
           OX_FLOAT);
    return 0;
}

const ox_op ox_nn_ops[] = {
    {"Conv", conv_conv, "auto_pad,dilations,group,kernel_shape,pads,strides"},
    {"MaxPool", conv_pool,
     "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"},
    {"AveragePool", conv_pool,
     "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides"},
    {"GlobalAveragePool", conv_global_pool, ""},
    {"GlobalMaxPool", conv_global_pool, ""},
    {"BatchNormalization", conv_batch_norm,
     "epsilon,is_test,momentum,training_mode,spatial"},
    {"LayerNormalization", conv_layer_norm, "axis,epsilon,stash_type"},
    {"InstanceNormalization", conv_instance_norm, "epsilon"},
    {NULL, NULL, NULL},
};

static const ox_op *const tables[] = {
    ox_math_ops,    ox_shape_ops,  ox_tensor_ops, ox_nn_ops,    ox_loss_ops,
    ox_more_ops,    ox_resize_ops, ox_extra_ops,  ox_misc_ops,  ox_nd_ops,
    ox_rnn_ops,     ox_act_ops,    ox_einsum_ops, ox_grid_ops,  ox_reorder_ops,
    ox_control_ops, ox_dft_ops,    ox_quant_ops,  ox_train_ops, ox_det_ops,
    ox_mel_ops,     ox_roi_ops};

const ox_op *ox_find_op(const char *type)
{
    if (!type)
        return NULL;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const ox_op *op = tables[t]; op->name; op++)
            if (!strcmp(op->name, type))
                return op;
    return NULL;
}
