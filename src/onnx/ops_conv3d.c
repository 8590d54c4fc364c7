/* Conv, MaxPool and AveragePool over 3 spatial dims (video, volumes), from
   Kiln's 2-D ops: x is padded explicitly, then each depth tap t of the
   kernel selects the input planes it reads for every output depth (x_t,
   [N, C, od, H, W]).  A convolution is the sum over t of the 2-D
   convolution of x_t (the output depths as a batch) by the kernel's slice
   t; a pool takes the max or sum over t and then pools each plane in 2-D.
   Differentiable as any graph; kd 2-D products instead of a 3-D kernel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* The deepest kernel: each depth tap is a few ops of its own. */
#define MAX_DEPTH_TAPS 4096

typedef struct geom3 {
    int64_t k[3], in[3], lo[3], hi[3], out[3];
    int stride[3], dil[3];
} geom3;

/* Strides, dilations, pads (or auto_pad) and the output size per axis. */
static int read_geom(ox_ctx *c, const ox_node *n, kiln_shape xs,
                     const int64_t *k, geom3 *w)
{
    int64_t st[3], dl[3], pads[6];
    char mode[16];
    if (ox_ints_attr(c, n, "strides", 3, 1, st) ||
        ox_ints_attr(c, n, "dilations", 3, 1, dl) ||
        ox_ints_attr(c, n, "pads", 6, 0, pads) ||
        ox_attr_string(c, n, "auto_pad", "NOTSET", mode, sizeof mode))
        return -1;
    int same = !strncmp(mode, "SAME_", 5);
    if (!same && strcmp(mode, "NOTSET") && strcmp(mode, "VALID"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "auto_pad '%s'", mode),
               -1;
    if (k[0] > MAX_DEPTH_TAPS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a kernel %lld deep (at most %d)", (long long)k[0],
                          MAX_DEPTH_TAPS),
               -1;
    for (int i = 0; i < 3; i++) {
        w->k[i] = k[i];
        w->in[i] = xs.d[2 + i];
        w->stride[i] = (int)st[i];
        w->dil[i] = (int)dl[i];
        w->lo[i] = strcmp(mode, "VALID") ? pads[i] : 0;
        w->hi[i] = strcmp(mode, "VALID") ? pads[3 + i] : 0;
        int64_t span = (k[i] - 1) * dl[i] + 1;
        if (same) {
            int64_t out = (w->in[i] + st[i] - 1) / st[i];
            int64_t total = (out - 1) * st[i] + span - w->in[i];
            total = total < 0 ? 0 : total;
            w->lo[i] =
                strcmp(mode, "SAME_UPPER") ? total - total / 2 : total / 2;
            w->hi[i] = total - w->lo[i];
        }
        int64_t padded = w->in[i] + w->lo[i] + w->hi[i];
        if (padded < span || span > INT32_MAX || padded > KILN_MAX_NUMEL)
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "axis %d: a window of %lld over %lld", 2 + i,
                              (long long)span, (long long)padded),
                   -1;
        w->out[i] = (padded - span) / st[i] + 1;
        /* a strided depth is an index select: i32 positions */
        if (i == 0 && st[0] != 1 && padded > INT32_MAX)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "a strided depth of %lld (at most 2^31 - 1)",
                              (long long)padded),
                   -1;
    }
    return 0;
}

static kiln_node *pad_all(kiln_graph *g, kiln_node *x, const geom3 *w,
                          float value)
{
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS] = {0};
    int any = 0;
    for (int i = 0; i < 3; i++) {
        lo[2 + i] = w->lo[i];
        hi[2 + i] = w->hi[i];
        any |= w->lo[i] || w->hi[i];
    }
    return any ? kiln_pad(g, x, lo, hi, value) : x;
}

/* The planes depth tap t reads: x[:, :, t dil + j stride] for each output
   depth j. */
static kiln_node *tap(ox_ctx *c, const ox_node *n, kiln_node *x, const geom3 *w,
                      int64_t t)
{
    kiln_graph *g = c->g;
    kiln_shape s = kiln_node_shape(x);
    int64_t first = t * w->dil[0], od = w->out[0];
    if (w->stride[0] == 1 || od == 1) {
        int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
        for (int k = 0; k < s.ndim; k++)
            stop[k] = s.d[k];
        start[2] = first;
        stop[2] = first + od;
        return kiln_slice(g, x, start, stop);
    }
    /* the NULL of a failed table fails the op that takes it (recorded) */
    kiln_node *in = ox_arith_indices(c, n, first, w->stride[0], od);
    return in ? kiln_index_select(g, x, 2, in) : NULL;
}

/* [N, C, od, H, W] as [N, C od, H, W]: planes for a 2-D pool. */
static kiln_node *planes(kiln_graph *g, kiln_node *x)
{
    kiln_shape s = kiln_node_shape(x);
    return kiln_reshape(g, x,
                        KILN_SHAPE(s.d[0], s.d[1] * s.d[2], s.d[3], s.d[4]));
}

/* [N, C od, oh, ow] back to [N, C, od, oh, ow]. */
static kiln_node *volumes(kiln_graph *g, kiln_node *y, int64_t ch, int64_t od)
{
    kiln_shape s = kiln_node_shape(y);
    return kiln_reshape(
        g, y, (kiln_shape){.ndim = 5, .d = {s.d[0], ch, od, s.d[2], s.d[3]}});
}

int ox_conv3d(ox_ctx *c, ox_node *n, int64_t group)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *wt = ox_f32(c, n, 1);
    kiln_shape xs = kiln_node_shape(x), ws = kiln_node_shape(wt);
    int64_t ks[3];
    geom3 w;
    /* kernel_shape may be left out: the weight's */
    if (ws.ndim == 5 && !ox_attr(n, "kernel_shape"))
        memcpy(ks, ws.d + 2, sizeof ks);
    if (ws.ndim != 5 ||
        (ox_attr(n, "kernel_shape") &&
         ox_ints_attr(c, n, "kernel_shape", 3, 1, ks)) ||
        memcmp(ks, ws.d + 2, sizeof ks) || ks[0] > INT32_MAX ||
        ks[1] > INT32_MAX || ks[2] > INT32_MAX || read_geom(c, n, xs, ks, &w))
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "the weight must be [O, C/group, kd, kh, kw] "
                          "matching kernel_shape"),
               -1;
    x = pad_all(g, x, &w, 0);
    kiln_conv_params p = {.groups = (int)group};
    for (int k = 0; k < 2; k++) {
        p.stride[k] = w.stride[1 + k];
        p.dilation[k] = w.dil[1 + k];
    }
    kiln_node *sum = NULL;
    int64_t od = w.out[0], o = ws.d[0];
    for (int64_t t = 0; t < ks[0]; t++) {
        kiln_node *xt =
            kiln_permute(g, tap(c, n, x, &w, t), (const int[]){0, 2, 1, 3, 4});
        kiln_shape ts = kiln_node_shape(xt);
        xt = kiln_reshape(g, xt,
                          KILN_SHAPE(ts.d[0] * od, ts.d[2], ts.d[3], ts.d[4]));
        int64_t start[5] = {0, 0, t, 0, 0},
                stop[5] = {o, ws.d[1], t + 1, ws.d[3], ws.d[4]};
        kiln_node *wk = kiln_reshape(g, kiln_slice(g, wt, start, stop),
                                     KILN_SHAPE(o, ws.d[1], ws.d[3], ws.d[4]));
        kiln_node *yt = kiln_conv2d(g, xt, wk, NULL, &p);
        sum = sum ? kiln_add(g, sum, yt) : yt;
    }
    kiln_shape ys = kiln_node_shape(sum);
    kiln_node *y = kiln_reshape(
        g, sum,
        (kiln_shape){.ndim = 5, .d = {xs.d[0], od, o, ys.d[2], ys.d[3]}});
    y = kiln_permute(g, y, (const int[]){0, 2, 1, 3, 4});
    kiln_node *b = n->n_in > 2 && n->in[2] ? ox_f32(c, n, 2) : NULL;
    if (b)
        y = kiln_add(
            g, y,
            kiln_reshape(g, b, (kiln_shape){.ndim = 5, .d = {1, o, 1, 1, 1}}));
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

/* Max, or sum, over the depth taps, then the 2-D pool of every plane. */
static kiln_node *pool(ox_ctx *c, const ox_node *n, kiln_node *x,
                       const geom3 *w, int max)
{
    kiln_graph *g = c->g;
    kiln_node *acc = NULL;
    for (int64_t t = 0; t < w->k[0]; t++) {
        kiln_node *xt = tap(c, n, x, w, t);
        acc = !acc ? xt : max ? kiln_max(g, acc, xt) : kiln_add(g, acc, xt);
    }
    int ch = (int)kiln_node_shape(x).d[1];
    int kern[2] = {(int)w->k[1], (int)w->k[2]}, pad[2] = {0, 0},
        st[2] = {w->stride[1], w->stride[2]}, dl[2] = {w->dil[1], w->dil[2]};
    kiln_node *y =
        max ? kiln_max_pool2d(g, planes(g, acc), kern, st, pad, dl, 0)
            : kiln_avg_pool2d(g, planes(g, acc), kern, st, pad, 0, 1);
    return volumes(g, y, ch, w->out[0]);
}

int ox_pool3d(ox_ctx *c, ox_node *n, int max)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0);
    int64_t ks[3], ceil_mode, cip;
    geom3 w;
    if (ox_ints_attr(c, n, "kernel_shape", 3, 1, ks) ||
        read_geom(c, n, kiln_node_shape(x), ks, &w) ||
        ox_attr_int(c, n, "ceil_mode", 0, &ceil_mode) ||
        ox_attr_int(c, n, "count_include_pad", 0, &cip))
        return -1;
    if (ceil_mode)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "ceil_mode in 3-D"), -1;
    if (!max && (w.dil[0] != 1 || w.dil[1] != 1 || w.dil[2] != 1))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "dilated average pool"),
               -1;
    kiln_node *y = pool(c, n, pad_all(g, x, &w, max ? -INFINITY : 0), &w, max);
    int padded = 0;
    for (int i = 0; i < 3; i++)
        padded |= w.lo[i] || w.hi[i];
    if (!max && padded && !cip) { /* divide by the inputs in each window */
        /* the counts depend on the volume only: ones of one image and
           channel, broadcast while running (a constant of x's shape would
           take x's size in the graph while loading) */
        kiln_shape os = kiln_node_shape(x);
        os.d[0] = os.d[1] = 1;
        os.sym = 0;
        kiln_node *ones = kiln_broadcast_to(g, kiln_scalar(g, 1), os);
        y = kiln_div(g, y, pool(c, n, pad_all(g, ones, &w, 0), &w, 0));
    } else if (!max)
        y = kiln_scale(g, y, 1.0f / (float)ks[0]);
    ox_out(c, n, y, OX_FLOAT);
    return 0;
}

/* ConvTranspose over 3 spatial dims: every input depth i is a batch entry
   of one conv_transpose2d by the weight with its depth taps t as extra
   output channels ([C, O/group kd, kh, kw], the same memory), giving the
   planes of output depth i s + t d; an index add sums them into place. */
kiln_node *ox_conv_transpose3d(ox_ctx *c, const ox_node *n, kiln_node *x,
                               kiln_node *wt, int group, const int64_t *stride,
                               const int64_t *dil, const int64_t *full)
{
    kiln_graph *g = c->g;
    kiln_shape xs = kiln_node_shape(x), ws = kiln_node_shape(wt);
    char b1[64], b2[64];
    int64_t nb = xs.d[0], ch = ws.d[0], og = ws.d[1], kd = ws.d[2];
    int64_t depth = xs.d[2], taps;
    if (xs.d[1] != ch || ch < 1 || ch % group)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "input %s and weight %s: the weight's dim 0 must "
                          "be the input's channels, a multiple of group %d",
                          kiln_shape_str(xs, b1, sizeof b1),
                          kiln_shape_str(ws, b2, sizeof b2), group),
               NULL;
    /* depth * kd positions to place, each a known index below 2^31 */
    if (__builtin_mul_overflow(depth, kd, &taps) || taps > OX_MAX_DEPTH_TAPS ||
        full[0] > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "input depth %lld times kernel depth %lld (at "
                          "most %lld) into %lld output depths",
                          (long long)depth, (long long)kd,
                          (long long)OX_MAX_DEPTH_TAPS, (long long)full[0]),
               NULL;
    int64_t o = og * group; /* group divides ch: at most the weight's size */
    kiln_shape ys = {.ndim = 5, .d = {nb, o, full[0], full[1], full[2]}};
    if (kiln_shape_numel(KILN_SHAPE(full[0], full[1], full[2])) < 0 ||
        kiln_shape_numel(ys) < 0)
        return ox_problem(c, n, KILN_ERR_SHAPE, "output %s is too large",
                          kiln_shape_str(ys, b1, sizeof b1)),
               NULL;
    kiln_conv_params p = {.groups = group};
    for (int k = 0; k < 2; k++) {
        p.stride[k] = (int)stride[1 + k];
        p.dilation[k] = (int)dil[1 + k];
    }
    int64_t plane = full[1] * full[2];
    x = kiln_reshape(g, kiln_permute(g, x, (const int[]){0, 2, 1, 3, 4}),
                     KILN_SHAPE(nb * depth, ch, xs.d[3], xs.d[4]));
    wt = kiln_reshape(g, wt, KILN_SHAPE(ch, og * kd, ws.d[3], ws.d[4]));
    kiln_node *y = kiln_conv_transpose2d(g, x, wt, NULL, &p);
    /* [N D, O kd, h, w] -> [N, O, D kd, h w]: entry i kd + t of dim 2 is
       output depth i s + t d */
    y = kiln_permute(g, kiln_reshape(g, y, KILN_SHAPE(nb, depth, o, kd, plane)),
                     (const int[]){0, 2, 1, 3, 4});
    y = kiln_reshape(g, y, KILN_SHAPE(nb, o, taps, plane));
    int32_t *idx = malloc((size_t)taps * sizeof *idx);
    if (!idx)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    int moved = taps != full[0];
    for (int64_t i = 0; i < depth; i++)
        for (int64_t t = 0; t < kd; t++) {
            idx[i * kd + t] = (int32_t)(i * stride[0] + t * dil[0]);
            moved |= idx[i * kd + t] != i * kd + t;
        }
    if (moved) {
        kiln_shape zs = KILN_SHAPE(nb, o, full[0], plane);
        kiln_node *at = kiln_constant(g, KILN_I32, KILN_SHAPE(taps), idx);
        y = kiln_index_add(g, kiln_broadcast_to(g, kiln_scalar(g, 0), zs), 2,
                           at, y);
    }
    free(idx);
    return kiln_reshape(g, y, ys);
}
