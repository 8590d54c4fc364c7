/* GridSample (opset 16) as PyTorch's grid_sample computes it, from Kiln
   ops: the grid is unnormalised to pixel coordinates, each tap's pixel is
   gathered from X seen as [N, C, H W] (its flat index computed in f32,
   exact below 2^24, and cast), and the taps are weighted.  Floors and
   casts stop the gradient; the weights carry it to the grid, the gather
   to X.  Modes nearest, bilinear and bicubic; padding zeros (taps outside
   count 0), border (coordinates clamped) and reflection (coordinates
   reflected off the borders). */
#include <string.h>

#include "onnx/onnx_internal.h"

enum { NEAREST, BILINEAR, BICUBIC };
enum { ZEROS, BORDER, REFLECTION };

typedef struct grid_ctx {
    kiln_graph *g;
    kiln_node *x;  /* [N, C, H W] */
    kiln_shape xs; /* X's shape [N, C, H, W] */
    int64_t p;     /* output points per image, Ho Wo */
    int mode, pad, align;
} grid_ctx;

static kiln_node *num(kiln_graph *g, float v)
{
    return kiln_scalar(g, v);
}

/* Pixel coordinate of a normalised one along an axis of `size`. */
static kiln_node *unnormalize(const grid_ctx *q, kiln_node *v, int64_t size)
{
    kiln_graph *g = q->g;
    float s = (float)size;
    kiln_node *p = kiln_add(g, v, num(g, 1));
    return q->align ? kiln_scale(g, p, (s - 1) / 2)
                    : kiln_scale(g, kiln_sub(g, kiln_scale(g, p, s), num(g, 1)),
                                 0.5f);
}

/* v reflected into [lo, hi] (PyTorch's reflect_coordinates, v - lo >= 0
   after the abs, so fmod is a floor division). */
static kiln_node *reflect(kiln_graph *g, kiln_node *v, float lo, float hi)
{
    float span = hi - lo;
    if (span <= 0)
        return kiln_scale(g, v, 0);
    kiln_node *d = kiln_abs(g, kiln_sub(g, v, num(g, lo)));
    kiln_node *flips = kiln_floor(g, kiln_scale(g, d, 1 / span));
    kiln_node *extra = kiln_sub(g, d, kiln_scale(g, flips, span));
    kiln_node *odd = kiln_sub(
        g, flips, kiln_scale(g, kiln_floor(g, kiln_scale(g, flips, 0.5f)), 2));
    /* even: lo + extra; odd: hi - extra */
    kiln_node *r = kiln_add(
        g, extra,
        kiln_mul(g, odd, kiln_sub(g, num(g, span), kiln_scale(g, extra, 2))));
    return kiln_add(g, r, num(g, lo));
}

/* The padding mode applied to coordinates along an axis of `size`. */
static kiln_node *pad_coords(const grid_ctx *q, kiln_node *v, int64_t size)
{
    kiln_graph *g = q->g;
    float s = (float)size;
    if (q->pad == ZEROS)
        return v;
    if (q->pad == REFLECTION)
        v = q->align ? reflect(g, v, 0, s - 1) : reflect(g, v, -0.5f, s - 0.5f);
    return kiln_clamp(g, v, 0, s - 1);
}

/* X at integer pixel coordinates (ix, iy) [N, P], 0 outside: [N, C, P]. */
static kiln_node *pixel(const grid_ctx *q, kiln_node *ix, kiln_node *iy)
{
    kiln_graph *g = q->g;
    float w = (float)q->xs.d[3], h = (float)q->xs.d[2];
    kiln_node *in = kiln_mul(
        g,
        kiln_mul(g, kiln_ge(g, ix, num(g, 0)), kiln_le(g, ix, num(g, w - 1))),
        kiln_mul(g, kiln_ge(g, iy, num(g, 0)), kiln_le(g, iy, num(g, h - 1))));
    kiln_node *flat = kiln_add(g, kiln_scale(g, kiln_clamp(g, iy, 0, h - 1), w),
                               kiln_clamp(g, ix, 0, w - 1));
    int64_t n = q->xs.d[0], c = q->xs.d[1];
    kiln_node *idx =
        kiln_reshape(g, kiln_cast(g, flat, KILN_I32), KILN_SHAPE(n, 1, q->p));
    idx = kiln_broadcast_to(g, idx, KILN_SHAPE(n, c, q->p));
    kiln_node *v = kiln_gather(g, q->x, 2, idx);
    return kiln_mul(g, v, kiln_reshape(g, in, KILN_SHAPE(n, 1, q->p)));
}

/* Bilinear: the four corners around (ix, iy), weighted by distance. */
static kiln_node *bilinear(const grid_ctx *q, kiln_node *ix, kiln_node *iy)
{
    kiln_graph *g = q->g;
    int64_t n = q->xs.d[0];
    kiln_node *x0 = kiln_floor(g, ix), *y0 = kiln_floor(g, iy);
    kiln_node *tx = kiln_sub(g, ix, x0), *ty = kiln_sub(g, iy, y0);
    kiln_node *sum = NULL;
    for (int k = 0; k < 4; k++) {
        int dx = k & 1, dy = k >> 1;
        kiln_node *wx = dx ? tx : kiln_sub(g, num(g, 1), tx),
                  *wy = dy ? ty : kiln_sub(g, num(g, 1), ty);
        kiln_node *wgt =
            kiln_reshape(g, kiln_mul(g, wx, wy), KILN_SHAPE(n, 1, q->p));
        kiln_node *v = kiln_mul(g,
                                pixel(q, kiln_add(g, x0, num(g, (float)dx)),
                                      kiln_add(g, y0, num(g, (float)dy))),
                                wgt);
        sum = sum ? kiln_add(g, sum, v) : v;
    }
    return sum;
}

/* The cubic convolution weight (A = -0.75) of a tap at distance d. */
static kiln_node *cubic(kiln_graph *g, kiln_node *d, int far)
{
    const float a = -0.75f;
    if (far) /* 1 <= d < 2: ((A d - 5A) d + 8A) d - 4A */
        return kiln_add(
            g,
            kiln_mul(
                g,
                kiln_add(
                    g,
                    kiln_mul(
                        g, kiln_add(g, kiln_scale(g, d, a), num(g, -5 * a)), d),
                    num(g, 8 * a)),
                d),
            num(g, -4 * a));
    /* d < 1: ((A + 2) d - (A + 3)) d d + 1 */
    kiln_node *inner = kiln_add(g, kiln_scale(g, d, a + 2), num(g, -(a + 3)));
    return kiln_add(g, kiln_mul(g, kiln_mul(g, inner, d), d), num(g, 1));
}

/* Bicubic: 4 x 4 taps around (ix, iy), each tap's coordinates padded. */
static kiln_node *bicubic(const grid_ctx *q, kiln_node *ix, kiln_node *iy)
{
    kiln_graph *g = q->g;
    int64_t n = q->xs.d[0];
    kiln_node *x0 = kiln_floor(g, ix), *y0 = kiln_floor(g, iy);
    kiln_node *tx = kiln_sub(g, ix, x0), *ty = kiln_sub(g, iy, y0);
    kiln_node *wx[4], *wy[4], *sum = NULL;
    for (int k = 0; k < 4; k++) { /* taps at -1, 0, 1, 2: distances */
        kiln_node *dx = kiln_abs(g, kiln_sub(g, tx, num(g, (float)(k - 1))));
        kiln_node *dy = kiln_abs(g, kiln_sub(g, ty, num(g, (float)(k - 1))));
        wx[k] = cubic(g, dx, k == 0 || k == 3);
        wy[k] = cubic(g, dy, k == 0 || k == 3);
    }
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) {
            kiln_node *px = pad_coords(
                q, kiln_add(g, x0, num(g, (float)(i - 1))), q->xs.d[3]);
            kiln_node *py = pad_coords(
                q, kiln_add(g, y0, num(g, (float)(j - 1))), q->xs.d[2]);
            kiln_node *wgt = kiln_reshape(g, kiln_mul(g, wx[i], wy[j]),
                                          KILN_SHAPE(n, 1, q->p));
            kiln_node *v = kiln_mul(g, pixel(q, px, py), wgt);
            sum = sum ? kiln_add(g, sum, v) : v;
        }
    return sum;
}

static int lookup(const char *s, const char *const *names, int count)
{
    for (int k = 0; k < count; k++)
        if (!strcmp(s, names[k]))
            return k;
    return -1;
}

static int conv_grid_sample(ox_ctx *c, ox_node *n)
{
    static const char *const modes[] = {"nearest", "bilinear", "bicubic"},
                             *pads[] = {"zeros", "border", "reflection"};
    char mode[16], pad[16];
    int64_t align;
    grid_ctx q = {.g = c->g};
    if (ox_attr_string(c, n, "mode", "bilinear", mode, sizeof mode) ||
        ox_attr_string(c, n, "padding_mode", "zeros", pad, sizeof pad) ||
        ox_attr_int(c, n, "align_corners", 0, &align))
        return -1;
    q.mode = lookup(mode, modes, 3);
    q.pad = lookup(pad, pads, 3);
    q.align = align != 0;
    if (q.mode < 0 || q.pad < 0)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "mode '%s' padding '%s'",
                          mode, pad),
               -1;
    kiln_node *x = ox_f32(c, n, 0), *grid = ox_f32(c, n, 1);
    kiln_shape gs = kiln_node_shape(grid);
    q.xs = kiln_node_shape(x);
    if (!x || !grid || q.xs.ndim != 4 || gs.ndim != 4 || gs.d[0] != q.xs.d[0] ||
        gs.d[3] != 2 || q.xs.sym || gs.sym ||
        q.xs.d[2] * q.xs.d[3] >= (1 << 24))
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "X must be [N, C, H, W] (H W below 2^24) and the "
                          "grid [N, Ho, Wo, 2], of fixed sizes"),
               -1;
    int64_t nb = q.xs.d[0];
    q.p = gs.d[1] * gs.d[2];
    q.x =
        kiln_reshape(c->g, x, KILN_SHAPE(nb, q.xs.d[1], q.xs.d[2] * q.xs.d[3]));
    kiln_node *flat = kiln_reshape(c->g, grid, KILN_SHAPE(nb, q.p, 2));
    int64_t a0[3] = {0, 0, 0}, a1[3] = {nb, q.p, 1}, b0[3] = {0, 0, 1},
            b1[3] = {nb, q.p, 2};
    kiln_node *ix = unnormalize(
        &q,
        kiln_reshape(c->g, kiln_slice(c->g, flat, a0, a1), KILN_SHAPE(nb, q.p)),
        q.xs.d[3]);
    kiln_node *iy = unnormalize(
        &q,
        kiln_reshape(c->g, kiln_slice(c->g, flat, b0, b1), KILN_SHAPE(nb, q.p)),
        q.xs.d[2]);
    kiln_node *y;
    if (q.mode == BICUBIC)
        y = bicubic(&q, ix, iy);
    else {
        ix = pad_coords(&q, ix, q.xs.d[3]);
        iy = pad_coords(&q, iy, q.xs.d[2]);
        y = q.mode == BILINEAR
                ? bilinear(&q, ix, iy)
                : pixel(&q, kiln_round(c->g, ix), kiln_round(c->g, iy));
    }
    ox_out(c, n,
           kiln_reshape(c->g, y, KILN_SHAPE(nb, q.xs.d[1], gs.d[1], gs.d[2])),
           OX_FLOAT);
    return 0;
}

const ox_op ox_grid_ops[] = {
    {"GridSample", conv_grid_sample, "align_corners,mode,padding_mode"},
    {NULL, NULL, NULL},
};
