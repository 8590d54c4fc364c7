/* Converters of GatherElements, Trilu and ConvTranspose. */
#include <string.h>

#include "onnx/onnx_internal.h"

/* torch.gather; ONNX indices may count from the end. */
static int conv_gather_elements(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    kiln_node *x = ox_in(c, n, 0), *idx = ox_in(c, n, 1);
    kiln_shape s = kiln_node_shape(x);
    if (ox_attr_int(c, n, "axis", 0, &axis))
        return -1;
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    idx = ox_wrap_indices(c, idx, s.d[a]);
    n->out[0] = kiln_gather(c->g, x, a, idx);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* Trilu: the upper (or lower) triangle of the last two dims from diagonal
   k (input 1, a known scalar; 0 when absent). */
static int conv_trilu(ox_ctx *c, ox_node *n)
{
    int64_t upper, k = 0;
    if (ox_attr_int(c, n, "upper", 1, &upper))
        return -1;
    if (n->n_in > 1 && n->in[1]) {
        const ox_host *h = ox_known_ints(c, n, 1);
        if (!h)
            return -1;
        if (h->numel != 1)
            return ox_problem(c, n, KILN_ERR_ARG, "k is not a scalar"), -1;
        k = h->i[0];
    }
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    /* Past the matrix's extent every diagonal keeps all or nothing. */
    int64_t far = s.ndim >= 2 ? s.d[s.ndim - 1] + s.d[s.ndim - 2] + 1 : 1;
    k = k < -far ? -far : k > far ? far : k;
    ox_out(c, n,
           upper ? kiln_triu(c->g, x, (int)k) : kiln_tril(c->g, x, (int)k),
           ox_in_type(n, 0));
    return 0;
}

/* A transposed convolution's geometry per spatial dim: what Kiln computes
   without padding (full), and how many of its positions ONNX drops at the
   begin and end (negative: zeros it adds); out = full + op - begin - end. */
typedef struct deconv {
    int nsp;
    int64_t in[3], k[3], full[3], begin[3], end[3];
    int64_t stride[3], dil[3], op[3];
} deconv;

/* a * b + c for a, b, c >= 0; -1 past KILN_MAX_NUMEL. */
static int64_t mul_add(int64_t a, int64_t b, int64_t c)
{
    int64_t r;
    if (c < 0 || __builtin_mul_overflow(a, b, &r) ||
        __builtin_add_overflow(r, c, &r) || r > KILN_MAX_NUMEL)
        return -1;
    return r;
}

/* ONNX's pads from output_shape or auto_pad: total = full + op - out,
   split with the odd one at the end for SAME_UPPER, else at the begin. */
static void pads_for(deconv *d, int i, int64_t out, int upper)
{
    int64_t total = d->full[i] + d->op[i] - out;
    int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
    d->begin[i] = upper ? half : total - half;
    d->end[i] = total - d->begin[i];
}

static int deconv_pads(ox_ctx *c, const ox_node *n, deconv *d)
{
    int64_t pads[6], out[3];
    const int64_t *shape;
    int64_t count;
    char mode[16];
    if (ox_ints_attr(c, n, "pads", 2 * d->nsp, 0, pads) ||
        ox_attr_ints(c, n, "output_shape", &shape, &count) ||
        ox_attr_string(c, n, "auto_pad", "NOTSET", mode, sizeof mode))
        return -1;
    int same = !strncmp(mode, "SAME_", 5), upper = !strcmp(mode, "SAME_UPPER");
    if (strcmp(mode, "NOTSET") && strcmp(mode, "VALID") && !upper &&
        strcmp(mode, "SAME_LOWER"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "auto_pad '%s'", mode),
               -1;
    if (count && count != d->nsp && count != d->nsp + 2)
        return ox_problem(c, n, KILN_ERR_ARG, "output_shape has %lld entries",
                          (long long)count),
               -1;
    for (int i = 0; i < d->nsp; i++) {
        out[i] = count ? shape[count - d->nsp + i]
                       : mul_add(d->in[i], d->stride[i], 0);
        if ((count || same) && (out[i] < 1 || out[i] > KILN_MAX_NUMEL))
            return ox_problem(c, n, KILN_ERR_ARG,
                              "output size %lld of spatial dim %d",
                              (long long)out[i], i),
                   -1;
        if (count || same)
            pads_for(d, i, out[i], upper);
        else {
            d->begin[i] = pads[i];
            d->end[i] = pads[d->nsp + i];
        }
        int64_t size = d->full[i] + d->op[i] - d->begin[i] - d->end[i];
        if (size < 1 || size > KILN_MAX_NUMEL)
            return ox_problem(c, n, KILN_ERR_ARG,
                              "output size %lld of spatial dim %d",
                              (long long)size, i),
                   -1;
    }
    return 0;
}

static int deconv_read(ox_ctx *c, const ox_node *n, kiln_shape xs,
                       kiln_shape ws, deconv *d)
{
    int64_t ks[3];
    char b1[64], b2[64];
    memset(d, 0, sizeof *d);
    d->nsp = xs.ndim - 2;
    if (d->nsp < 1 || d->nsp > 3)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%d spatial dims (Kiln has 1 to 3)", d->nsp),
               -1;
    if (ws.ndim != xs.ndim)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "input %s and weight %s differ in rank",
                          kiln_shape_str(xs, b1, sizeof b1),
                          kiln_shape_str(ws, b2, sizeof b2)),
               -1;
    if (ox_ints_attr(c, n, "strides", d->nsp, 1, d->stride) ||
        ox_ints_attr(c, n, "dilations", d->nsp, 1, d->dil) ||
        ox_ints_attr(c, n, "output_padding", d->nsp, 0, d->op) ||
        ox_ints_attr(c, n, "kernel_shape", d->nsp, 1, ks))
        return -1;
    for (int i = 0; i < d->nsp; i++) {
        d->in[i] = xs.d[2 + i];
        d->k[i] = ws.d[2 + i];
        if (ox_attr(n, "kernel_shape") && ks[i] != d->k[i])
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "kernel_shape differs from the weight's"),
                   -1;
        d->full[i] = d->in[i] < 1 || d->k[i] < 1
                         ? -1
                         : mul_add(d->stride[i], d->in[i] - 1,
                                   mul_add(d->dil[i], d->k[i] - 1, 1));
        if (d->full[i] < 1)
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "input %s, weight %s: spatial dim %d is empty "
                              "or its output too large",
                              kiln_shape_str(xs, b1, sizeof b1),
                              kiln_shape_str(ws, b2, sizeof b2), i),
                   -1;
    }
    return deconv_pads(c, n, d);
}

/* Crops the begin / end positions ONNX drops, pads the ones it adds. */
static kiln_node *deconv_trim(ox_ctx *c, kiln_node *y, const deconv *d)
{
    kiln_shape s = kiln_node_shape(y);
    int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS] = {0};
    int crop = 0, pad = 0;
    if (s.ndim < d->nsp) /* a poisoned y: the graph holds the error */
        return y;
    for (int k = 0; k < s.ndim; k++)
        stop[k] = s.d[k];
    for (int i = 0; i < d->nsp; i++) {
        int ax = s.ndim - d->nsp + i;
        int64_t tail = d->op[i] - d->end[i];
        start[ax] = d->begin[i] > 0 ? d->begin[i] : 0;
        stop[ax] = s.d[ax] + (tail < 0 ? tail : 0);
        lo[ax] = d->begin[i] < 0 ? -d->begin[i] : 0;
        hi[ax] = tail > 0 ? tail : 0;
        crop |= start[ax] > 0 || stop[ax] < s.d[ax];
        pad |= lo[ax] > 0 || hi[ax] > 0;
    }
    if (crop)
        y = kiln_slice(c->g, y, start, stop);
    return pad ? kiln_pad(c->g, y, lo, hi, 0) : y;
}

/* The 1-D or 2-D transposed convolution without padding: Kiln's
   conv_transpose2d, 1-D as 2-D of height 1. */
static kiln_node *deconv_2d(ox_ctx *c, kiln_node *x, kiln_node *w,
                            const deconv *d, int group)
{
    kiln_shape xs = kiln_node_shape(x), ws = kiln_node_shape(w);
    kiln_conv_params p = {.groups = group};
    for (int i = 0; i < 2; i++) {
        int at = d->nsp == 1 ? 0 : i;
        p.stride[i] = d->nsp == 1 && i == 0 ? 1 : (int)d->stride[at];
        p.dilation[i] = d->nsp == 1 && i == 0 ? 1 : (int)d->dil[at];
    }
    if (d->nsp == 1) {
        x = kiln_reshape(c->g, x, KILN_SHAPE(xs.d[0], xs.d[1], 1, xs.d[2]));
        w = kiln_reshape(c->g, w, KILN_SHAPE(ws.d[0], ws.d[1], 1, ws.d[2]));
    }
    kiln_node *y = kiln_conv_transpose2d(c->g, x, w, NULL, &p);
    if (d->nsp == 1) {
        kiln_shape ys = kiln_node_shape(y);
        if (ys.ndim != 4) /* poisoned: the graph holds the error */
            return y;
        y = kiln_reshape(c->g, y, KILN_SHAPE(ys.d[0], ys.d[1], ys.d[3]));
    }
    return y;
}

/* The transposed convolution without padding (3-D from 2-D products,
   ops_conv3d.c), then ONNX's pads by cropping or zero-padding the result,
   then the bias. */
static int conv_conv_transpose(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0), *w = ox_f32(c, n, 1), *b = ox_f32(c, n, 2);
    kiln_shape xs = kiln_node_shape(x), ws = kiln_node_shape(w);
    int64_t group;
    deconv d;
    if (ox_attr_int(c, n, "group", 1, &group) || deconv_read(c, n, xs, ws, &d))
        return -1;
    if (group < 1 || group > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_ARG, "bad group"), -1;
    kiln_node *y = d.nsp == 3 ? ox_conv_transpose3d(c, n, x, w, (int)group,
                                                    d.stride, d.dil, d.full)
                              : deconv_2d(c, x, w, &d, (int)group);
    if (!y)
        return -1;
    y = deconv_trim(c, y, &d);
    if (b) {
        kiln_shape bs = {.ndim = xs.ndim};
        for (int k = 0; k < bs.ndim; k++)
            bs.d[k] = k == 1 ? kiln_shape_numel(kiln_node_shape(b)) : 1;
        y = kiln_add(c->g, y, kiln_reshape(c->g, b, bs));
    }
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

const ox_op ox_more_ops[] = {
    {"GatherElements", conv_gather_elements, "axis"},
    {"Trilu", conv_trilu, "upper"},
    {"ConvTranspose", conv_conv_transpose,
     "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,"
     "strides"},
    {NULL, NULL, NULL},
};
