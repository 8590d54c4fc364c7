/* Resize (opset 11 to 17): nearest, linear and cubic, every coordinate
   transformation.  Each of ONNX's modes is separable: along one axis,
   output x is a weighted sum of input points, the weights depending only
   on x, the sizes and the attributes.  They are computed here, while
   loading, exactly as ONNX's reference
   (onnx/backend/test/case/node/resize.py) does, into a matrix W [out, in]
   per resized axis; the op is then one product with W per axis, which
   Kiln differentiates like any product. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Most elements of one axis's W (64 MiB): W is dense, so a tiny model
   asking for a huge scale would otherwise allocate and fill gigabytes
   while loading. */
#define MAX_WEIGHTS ((int64_t)1 << 24)

enum { M_NEAREST, M_LINEAR, M_CUBIC };
enum {
    C_HALF_PIXEL,
    C_ASYMMETRIC,
    C_ALIGN_CORNERS,
    C_PYTORCH_HALF_PIXEL,
    C_TF_HALF_PIXEL_NN,
    C_TF_CROP_AND_RESIZE
};
enum { N_PREFER_FLOOR, N_PREFER_CEIL, N_FLOOR, N_CEIL };

typedef struct resize_attrs {
    int mode, coord, nearest, exclude;
    double cubic_a;
    float extrapolation;
    double roi_start, roi_end; /* tf_crop_and_resize's, the current axis's */
} resize_attrs;

/* Index of s in names (n of them), -1 when absent. */
static int lookup(const char *s, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(s, names[k]))
            return k;
    return -1;
}

static int read_attrs(ox_ctx *c, const ox_node *n, resize_attrs *a)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {
        "half_pixel",         "asymmetric",           "align_corners",
        "pytorch_half_pixel", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {
        "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    char mode[32], coord[32], nearest[32];
    int64_t exclude;
    float cubic_a, extrapolation;
    if (ox_attr_string(c, n, "mode", "nearest", mode, sizeof mode) ||
        ox_attr_string(c, n, "coordinate_transformation_mode", "half_pixel",
                       coord, sizeof coord) ||
        ox_attr_string(c, n, "nearest_mode", "round_prefer_floor", nearest,
                       sizeof nearest) ||
        ox_attr_int(c, n, "exclude_outside", 0, &exclude) ||
        ox_attr_float(c, n, "cubic_coeff_a", -0.75f, &cubic_a) ||
        ox_attr_float(c, n, "extrapolation_value", 0, &extrapolation))
        return -1;
    a->mode = lookup(mode, modes, 3);
    a->coord = lookup(coord, coords, 6);
    a->nearest = lookup(nearest, nearests, 4);
    a->exclude = exclude != 0;
    a->cubic_a = cubic_a;
    a->extrapolation = extrapolation;
    if (a->mode < 0 || a->coord < 0 || a->nearest < 0)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "mode '%s', coordinate_transformation_mode '%s', "
                          "nearest_mode '%s'",
                          mode, coord, nearest),
               -1;
    return 0;
}

/* The source coordinate of output x (ONNX's x_original). */
static double source_x(const resize_attrs *a, double x, double scale,
                       int64_t in)
{
    double out_width = scale * (double)in;
    switch (a->coord) {
    case C_ASYMMETRIC:
        return x / scale;
    case C_ALIGN_CORNERS:
        return out_width == 1 ? 0 : x * (double)(in - 1) / (out_width - 1);
    case C_PYTORCH_HALF_PIXEL:
        return out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case C_TF_HALF_PIXEL_NN:
        return (x + 0.5) / scale;
    case C_TF_CROP_AND_RESIZE:
        return out_width > 1
                   ? a->roi_start * (double)(in - 1) +
                         x * (a->roi_end - a->roi_start) * (double)(in - 1) /
                             (out_width - 1)
                   : 0.5 * (a->roi_start + a->roi_end) * (double)(in - 1);
    default:
        return (x + 0.5) / scale - 0.5;
    }
}

/* The mode's coefficients for ratio in (0, 1]; their count. */
static int coeffs(const resize_attrs *a, double r, double *w)
{
    if (a->mode == M_NEAREST) {
        int right = r == 1 || a->nearest == N_CEIL ||
                    (a->nearest == N_PREFER_FLOOR && r > 0.5) ||
                    (a->nearest == N_PREFER_CEIL && r >= 0.5);
        w[0] = !right;
        w[1] = right;
        return 2;
    }
    if (a->mode == M_LINEAR) {
        w[0] = 1 - r;
        w[1] = r;
        return 2;
    }
    double A = a->cubic_a, s = r + 1, t = 1 - r, u = 2 - r;
    w[0] = ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[3] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
    return 4;
}

/* ONNX's neighbours: the count integers nearest to x (ties to the smaller)
   among the edge-padded indices [-pad, in + pad), ascending. */
static void neighbours(double x, int count, int64_t in, int64_t *idx)
{
    int64_t pad = (count + 1) / 2, base = (int64_t)floor(x);
    int taken = 0;
    while (taken < count) {
        int64_t best = 0;
        double best_d = INFINITY;
        for (int64_t i = base - count; i <= base + count; i++) {
            int used = 0;
            for (int k = 0; k < taken; k++)
                used |= idx[k] == i;
            double d = fabs(x - (double)i);
            if (!used && i >= -pad && i < in + pad && d < best_d)
                best = i, best_d = d;
        }
        idx[taken++] = best;
    }
    for (int k = 1; k < count; k++)
        for (int j = k; j > 0 && idx[j - 1] > idx[j]; j--) {
            int64_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
}

/* Row x of W [out, in]: the weights of the input points; 0 (a zero row)
   when tf_crop_and_resize puts x outside the input, 1 otherwise. */
static int weights_row(const resize_attrs *a, int64_t x, double scale,
                       int64_t in, float *row)
{
    double xo = source_x(a, (double)x, scale, in), w[4], sum = 0;
    if (a->coord == C_TF_CROP_AND_RESIZE && !(xo >= 0 && xo <= in - 1))
        return 0;
    double fl = floor(xo);
    int count = coeffs(a, xo == fl ? 1 : xo - fl, w);
    int64_t idx[4];
    neighbours(xo, count, in, idx);
    for (int k = 0; k < count; k++) {
        if (a->exclude && (idx[k] < 0 || idx[k] >= in))
            w[k] = 0;
        sum += w[k];
    }
    for (int k = 0; k < count; k++) {
        int64_t i = idx[k] < 0 ? 0 : idx[k] >= in ? in - 1 : idx[k];
        row[i] += (float)(a->exclude ? w[k] / sum : w[k]);
    }
    return 1;
}

/* x with axis resized from in to out points by W; NULL (recorded) when
   out of memory.  An identity W leaves x as it is.  inside[k] (out of
   them) is 1 when output point k is inside the input, 0 when
   tf_crop_and_resize puts it outside. */
static kiln_node *resize_axis(ox_ctx *c, const ox_node *n, kiln_node *x,
                              int axis, int64_t out, double scale,
                              const resize_attrs *a, float *inside)
{
    kiln_shape s = kiln_node_shape(x);
    int64_t in = s.d[axis], pre = 1, post = 1;
    if (out > MAX_WEIGHTS / in)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "resizing axis %d from %lld to %lld points needs "
                          "a weight matrix over %lld elements",
                          axis, (long long)in, (long long)out,
                          (long long)MAX_WEIGHTS),
               NULL;
    float *w = calloc((size_t)(out * in) + 1, sizeof *w);
    if (!w)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    int identity = out == in;
    for (int64_t k = 0; k < out; k++) {
        inside[k] = (float)weights_row(a, k, scale, in, w + k * in);
        for (int64_t i = 0; identity && i < in; i++)
            identity = w[k * in + i] == (i == k);
    }
    kiln_node *wn =
        identity ? NULL : kiln_constant(c->g, KILN_F32, KILN_SHAPE(out, in), w);
    free(w);
    if (identity)
        return x;
    for (int k = 0; k < axis; k++)
        pre *= s.d[k];
    for (int k = axis + 1; k < s.ndim; k++)
        post *= s.d[k];
    kiln_node *y =
        post == 1
            ? kiln_matmul(c->g, kiln_reshape(c->g, x, KILN_SHAPE(pre, in)), wn,
                          0, 1)
            : kiln_matmul(c->g, wn,
                          kiln_reshape(c->g, x, KILN_SHAPE(pre, in, post)), 0,
                          0);
    s.d[axis] = out;
    return kiln_reshape(c->g, y, s);
}

/* The output size and scale of every axis from scales, each output size
   floor(scale * in). */
static int from_scales(ox_ctx *c, const ox_node *n, kiln_shape xs,
                       const float *sc, int64_t count, int64_t *out,
                       double *scale)
{
    if (count != xs.ndim)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "%lld scales for an input of %d dims",
                          (long long)count, xs.ndim),
               -1;
    for (int k = 0; k < xs.ndim; k++) {
        scale[k] = sc[k];
        double size = scale[k] * (double)xs.d[k];
        /* checked before the conversion: inf, NaN or past int64 is
           undefined */
        out[k] = size >= 1 && size <= INT32_MAX ? (int64_t)size : 0;
    }
    return 0;
}

/* The output size and scale of every axis, from sizes (input 3) or scales
   (input isc), whichever is given. */
static int target(ox_ctx *c, const ox_node *n, int isc, kiln_shape xs,
                  int64_t *out, double *scale)
{
    const ox_value *sc = n->n_in > isc ? n->in[isc] : NULL;
    const ox_value *sz = n->n_in > 3 && isc == 2 ? n->in[3] : NULL;
    if (sz && !(sz->known && sz->known->numel == 0)) {
        const ox_host *h = ox_known_ints(c, n, 3);
        if (!h)
            return -1;
        if (h->numel != xs.ndim)
            return ox_problem(c, n, KILN_ERR_ARG, "sizes has %lld entries",
                              (long long)h->numel),
                   -1;
        for (int k = 0; k < xs.ndim; k++) {
            out[k] = h->i[k];
            scale[k] = (double)out[k] / (double)xs.d[k];
        }
    } else if (sc && sc->known && sc->known->f) {
        if (from_scales(c, n, xs, sc->known->f, sc->known->numel, out, scale))
            return -1;
    } else
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "scales or sizes must be known while loading"),
               -1;
    for (int k = 0; k < xs.ndim; k++)
        if (out[k] < 1 || xs.d[k] < 1 || !(scale[k] > 0) || out[k] > INT32_MAX)
            return ox_problem(c, n, KILN_ERR_ARG, "bad size on axis %d", k), -1;
    return 0;
}

/* y plus the extrapolation value where an axis put the output point
   outside the input (a product of the axes' inside vectors); NULL when
   out of memory. */
static kiln_node *extrapolate(kiln_graph *g, kiln_node *y, float *const *inside,
                              const int64_t *out, int ndim, float value)
{
    kiln_node *in = NULL;
    for (int k = 0; k < ndim; k++) {
        kiln_shape s = {.ndim = ndim};
        for (int d = 0; d < ndim; d++)
            s.d[d] = d == k ? out[k] : 1;
        kiln_node *m = kiln_constant(g, KILN_F32, s, inside[k]);
        in = in ? kiln_mul(g, in, m) : m;
    }
    return kiln_add(g, y,
                    kiln_scale(g, kiln_sub(g, kiln_scalar(g, 1), in), value));
}

/* x with every axis resized to out (roi: tf_crop_and_resize's starts and
   ends, 2 ndim of them, else NULL); 0 when its output is recorded. */
static int resize_all(ox_ctx *c, ox_node *n, kiln_node *y, const int64_t *out,
                      const double *scale, resize_attrs *a, const float *roi)
{
    kiln_shape xs = kiln_node_shape(y);
    float *inside[KILN_MAX_DIMS] = {0};
    int outside = 0;
    /* an axis whose product failed leaves y poisoned: the next would read
       its input size from it (0) */
    for (int k = 0; y && k < xs.ndim && kiln_graph_status(c->g) == KILN_OK;
         k++) {
        /* resize_axis refuses an axis whose W passes MAX_WEIGHTS before
           anything out long is allocated */
        int fits = xs.d[k] > 0 && out[k] <= MAX_WEIGHTS / xs.d[k];
        inside[k] = fits ? malloc((size_t)out[k] * sizeof **inside) : NULL;
        a->roi_start = roi ? roi[k] : 0;
        a->roi_end = roi ? roi[xs.ndim + k] : 1;
        if (fits && !inside[k]) {
            ox_problem(c, n, KILN_ERR_MEMORY, "out of memory");
            y = NULL;
            break;
        }
        y = resize_axis(c, n, y, k, out[k], scale[k], a, inside[k]);
        for (int64_t i = 0; y && i < out[k]; i++)
            outside |= inside[k][i] == 0;
    }
    if (y && outside && a->extrapolation != 0)
        y = extrapolate(c->g, y, inside, out, xs.ndim, a->extrapolation);
    for (int k = 0; k < xs.ndim; k++)
        free(inside[k]);
    if (!y)
        return -1;
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

static int conv_resize(ox_ctx *c, ox_node *n)
{
    resize_attrs a;
    int64_t out[KILN_MAX_DIMS];
    double scale[KILN_MAX_DIMS];
    kiln_node *y = ox_f32(c, n, 0);
    kiln_shape xs = kiln_node_shape(y);
    if (read_attrs(c, n, &a) || target(c, n, 2, xs, out, scale))
        return -1;
    const ox_value *roi = n->n_in > 1 ? n->in[1] : NULL;
    if (a.coord != C_TF_CROP_AND_RESIZE)
        return resize_all(c, n, y, out, scale, &a, NULL);
    if (!roi || !roi->known || !roi->known->f ||
        roi->known->numel != 2 * xs.ndim)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "tf_crop_and_resize needs roi, 2 x %d floats known "
                          "while loading",
                          xs.ndim),
               -1;
    return resize_all(c, n, y, out, scale, &a, roi->known->f);
}

/* Upsample (opsets 7 to 9) and Resize of opset 10: nearest or linear, the
   scales an attribute (opset 7 and 8) or input 1.  Their output point x
   reads input point x / scale (ONNX's "asymmetric" coordinates), the
   nearest the one below it, as ONNX Runtime does; output sizes are
   floor(scale * in). */
static int conv_upsample(ox_ctx *c, ox_node *n)
{
    int64_t out[KILN_MAX_DIMS];
    double scale[KILN_MAX_DIMS];
    char mode[32];
    if (ox_attr_string(c, n, "mode", "nearest", mode, sizeof mode))
        return -1;
    resize_attrs a = {.mode =
                          !strcmp(mode, "nearest") ? M_NEAREST
                          : !strcmp(mode, "linear") || !strcmp(mode, "bilinear")
                              ? M_LINEAR
                              : -1,
                      .coord = C_ASYMMETRIC,
                      .nearest = N_FLOOR,
                      .cubic_a = -0.75};
    if (a.mode < 0)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "mode '%s'", mode), -1;
    kiln_node *y = ox_f32(c, n, 0);
    kiln_shape xs = kiln_node_shape(y);
    const Onnx__AttributeProto *at = ox_attr(n, "scales");
    if (at && n->n_in < 2) {
        if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
            return ox_problem(c, n, KILN_ERR_ARG, "scales must be floats"), -1;
        if (from_scales(c, n, xs, at->floats, (int64_t)at->n_floats, out,
                        scale))
            return -1;
    } else if (target(c, n, 1, xs, out, scale))
        return -1;
    for (int k = 0; k < xs.ndim; k++)
        if (out[k] < 1 || xs.d[k] < 1 || !(scale[k] > 0))
            return ox_problem(c, n, KILN_ERR_ARG, "bad size on axis %d", k), -1;
    return resize_all(c, n, y, out, scale, &a, NULL);
}

static int conv_resize_any(ox_ctx *c, ox_node *n)
{
    return c->opset < 11 ? conv_upsample(c, n) : conv_resize(c, n);
}

const ox_op ox_resize_ops[] = {
    {"Resize", conv_resize_any,
     "coordinate_transformation_mode,cubic_coeff_a,exclude_outside,"
     "extrapolation_value,mode,nearest_mode"},
    {"Upsample", conv_upsample, "mode,scales"},
    {NULL, NULL, NULL},
};
