/* RoiAlign (opsets 10 and 16), mode avg, with rois and batch indices that
   may be known only when running.  A sample's bilinear weights are a
   product of one weight along H and one along W, and so is the
   average over the sampling grid, so each roi's output is Wy X[b] Wx^T:
   Wy [R, oh, H] and Wx [R, ow, W] average, over the sampling_ratio samples
   of each output cell, the two taps around each sample (ONNX Runtime's
   rule: a sample outside [-1, size] counts 0, coordinates below 0 read 0,
   the last pixel's neighbour is itself).  The weights are computed in the
   graph from the rois (the taps' positions by floor and one-hot), X[b] is
   an index select of X, and the gradient reaches X. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Bounds on the attributes: the weights are [R, out * ratio, size]. */
#define ROI_MAX_OUT 1024
#define ROI_MAX_RATIO 64
#define ROI_MAX_WEIGHTS ((int64_t)1 << 26)

/* The [R, out, size] weights along one axis of the rois starting at start
   and len long ([R, 1] each), grid samples per output cell. */
static kiln_node *axis_weights(kiln_graph *g, kiln_node *start, kiln_node *len,
                               int64_t out, int64_t grid, int64_t size)
{
    int64_t k_n = out * grid, r = kiln_node_shape(start).d[0];
    float *t = malloc((size_t)k_n * sizeof *t);
    if (!t)
        return NULL;
    /* sample iy of cell p sits at (p + (iy + 0.5) / grid) / out of the roi */
    for (int64_t k = 0; k < k_n; k++)
        t[k] = ((float)(k / grid) + ((float)(k % grid) + 0.5f) / (float)grid) /
               (float)out;
    kiln_node *pos = kiln_add(
        g, start,
        kiln_mul(g, len, kiln_constant(g, KILN_F32, KILN_SHAPE(1, k_n), t)));
    free(t);
    float last = (float)(size - 1);
    kiln_node *valid = kiln_mul(g, kiln_ge(g, pos, kiln_scalar(g, -1)),
                                kiln_le(g, pos, kiln_scalar(g, (float)size)));
    kiln_node *y = kiln_clamp(g, pos, 0, (float)size);
    kiln_node *lo = kiln_min(g, kiln_floor(g, y), kiln_scalar(g, last));
    kiln_node *ly = kiln_select(g, kiln_ge(g, lo, kiln_scalar(g, last)),
                                kiln_scalar(g, 0), kiln_sub(g, y, lo));
    kiln_node *hi =
        kiln_min(g, kiln_add(g, lo, kiln_scalar(g, 1)), kiln_scalar(g, last));
    kiln_shape col = KILN_SHAPE(r, k_n, 1);
    kiln_node *w_lo = kiln_reshape(
        g, kiln_mul(g, valid, kiln_sub(g, kiln_scalar(g, 1), ly)), col);
    kiln_node *w_hi = kiln_reshape(g, kiln_mul(g, valid, ly), col);
    kiln_node *w = kiln_add(
        g,
        kiln_mul(g, w_lo,
                 kiln_one_hot(g, kiln_cast(g, lo, KILN_I32), (int)size)),
        kiln_mul(g, w_hi,
                 kiln_one_hot(g, kiln_cast(g, hi, KILN_I32), (int)size)));
    w = kiln_reshape(g, w, KILN_SHAPE(r, out, grid, size));
    return kiln_scale(g, kiln_sum(g, w, 1u << 2, 0), 1.0f / (float)grid);
}

/* Column k of the rois [R, 4], times scale, less offset: [R, 1]. */
static kiln_node *roi_col(kiln_graph *g, kiln_node *rois, int k, float scale,
                          float offset)
{
    int64_t r = kiln_node_shape(rois).d[0];
    int64_t start[2] = {0, k}, stop[2] = {r, k + 1};
    kiln_node *v = kiln_scale(g, kiln_slice(g, rois, start, stop), scale);
    return offset ? kiln_sub(g, v, kiln_scalar(g, offset)) : v;
}

typedef struct roi_attrs {
    int64_t oh, ow, ratio;
    float scale;
    int half_pixel;
} roi_attrs;

static int read_attrs(ox_ctx *c, const ox_node *n, roi_attrs *a)
{
    char mode[16], ctm[32];
    if (ox_attr_int(c, n, "output_height", 1, &a->oh) ||
        ox_attr_int(c, n, "output_width", 1, &a->ow) ||
        ox_attr_int(c, n, "sampling_ratio", 0, &a->ratio) ||
        ox_attr_float(c, n, "spatial_scale", 1.0f, &a->scale) ||
        ox_attr_string(c, n, "mode", "avg", mode, sizeof mode) ||
        ox_attr_string(c, n, "coordinate_transformation_mode",
                       c->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm,
                       sizeof ctm))
        return -1;
    a->half_pixel = !strcmp(ctm, "half_pixel");
    if (strcmp(mode, "avg") ||
        (!a->half_pixel && strcmp(ctm, "output_half_pixel")))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "mode '%s', coordinate_transformation_mode '%s' "
                          "(avg with half_pixel or output_half_pixel)",
                          mode, ctm),
               -1;
    if (a->ratio == 0)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "sampling_ratio 0 (adaptive: the number of samples "
                          "would depend on the rois' values)"),
               -1;
    if (a->oh < 1 || a->oh > ROI_MAX_OUT || a->ow < 1 || a->ow > ROI_MAX_OUT ||
        a->ratio < 0 || a->ratio > ROI_MAX_RATIO || !isfinite(a->scale))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "output %lld x %lld (1 to %d), sampling_ratio %lld "
                          "(1 to %d) or spatial_scale %g out of range",
                          (long long)a->oh, (long long)a->ow, ROI_MAX_OUT,
                          (long long)a->ratio, ROI_MAX_RATIO, (double)a->scale),
               -1;
    return 0;
}

/* X [N, C, H, W], rois [R, 4] and R batch indices, and weights of at most
   ROI_MAX_WEIGHTS entries; -1 recorded otherwise. */
static int check_shapes(ox_ctx *c, const ox_node *n, kiln_shape xs,
                        kiln_shape rs, kiln_node *bi, const roi_attrs *a)
{
    char b1[128], b2[128];
    int fits = xs.ndim == 4 && rs.ndim == 2 && rs.d[1] == 4 && bi &&
               kiln_node_shape(bi).ndim == 1 &&
               kiln_node_shape(bi).d[0] == rs.d[0];
    int64_t per = fits ? a->oh * xs.d[2] : 0, r = fits ? rs.d[0] : 0;
    per = fits && a->ow * xs.d[3] > per ? a->ow * xs.d[3] : per;
    int small = per <= ROI_MAX_WEIGHTS / a->ratio &&
                (!r || per * a->ratio <= ROI_MAX_WEIGHTS / r);
    if (fits && small)
        return 0;
    ox_problem(c, n, fits ? KILN_ERR_UNSUPPORTED : KILN_ERR_SHAPE,
               "X %s, rois %s: %s", kiln_shape_str(xs, b1, sizeof b1),
               kiln_shape_str(rs, b2, sizeof b2),
               fits ? "the sampling weights would pass 2^26 entries"
                    : "want [N, C, H, W], [R, 4] and R batch indices");
    return -1;
}

static int conv_roi_align(ox_ctx *c, ox_node *n)
{
    roi_attrs a;
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *rois = ox_f32(c, n, 1);
    kiln_node *bi = ox_in(c, n, 2);
    if (read_attrs(c, n, &a))
        return -1;
    kiln_shape xs = kiln_node_shape(x), rs = kiln_node_shape(rois);
    if (check_shapes(c, n, xs, rs, bi, &a))
        return -1;
    int64_t r = rs.d[0];
    float off = a.half_pixel ? 0.5f : 0.0f;
    kiln_node *x1 = roi_col(g, rois, 0, a.scale, off);
    kiln_node *y1 = roi_col(g, rois, 1, a.scale, off);
    kiln_node *w = kiln_sub(g, roi_col(g, rois, 2, a.scale, off), x1);
    kiln_node *h = kiln_sub(g, roi_col(g, rois, 3, a.scale, off), y1);
    if (!a.half_pixel) { /* the old mode makes every roi at least 1 x 1 */
        w = kiln_max(g, w, kiln_scalar(g, 1));
        h = kiln_max(g, h, kiln_scalar(g, 1));
    }
    kiln_node *wy = axis_weights(g, y1, h, a.oh, a.ratio, xs.d[2]);
    kiln_node *wx = axis_weights(g, x1, w, a.ow, a.ratio, xs.d[3]);
    if (kiln_node_dtype(bi) != KILN_I32)
        bi = kiln_cast(g, bi, KILN_I32);
    kiln_node *xb = kiln_index_select(g, x, 0, bi); /* [R, C, H, W] */
    wy = kiln_reshape(g, wy, KILN_SHAPE(r, 1, a.oh, xs.d[2]));
    wx = kiln_reshape(g, wx, KILN_SHAPE(r, 1, a.ow, xs.d[3]));
    kiln_node *y = kiln_matmul(g, kiln_matmul(g, wy, xb, 0, 0), wx, 0, 1);
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

const ox_op ox_roi_ops[] = {
    {"RoiAlign", conv_roi_align,
     "mode,output_height,output_width,sampling_ratio,spatial_scale,"
     "coordinate_transformation_mode"},
    {NULL, NULL, NULL},
};
