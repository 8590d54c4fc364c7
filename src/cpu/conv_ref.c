/* Reference convolutions: one loop nest over every (output element, tap)
   pair defines all three ops.  conv sums x * w into y (in double per
   output element), conv_transpose adds w * dy into x and conv_weight_grad
   adds x * dy into w, in the same order. */
#include <string.h>

#include "cpu/conv.h"
#include "cpu/scalar.h"

kiln_conv_geom kiln_conv_geom_of(const kiln_node *n)
{
    /* the x side and the y side of the op's operands and result */
    kiln_shape x = n->op == KILN_OP_CONV_TRANSPOSE ? n->shape : n->in[0]->shape;
    kiln_shape y = n->op == KILN_OP_CONV         ? n->shape
                   : n->op == KILN_OP_CONV_WGRAD ? n->in[1]->shape
                                                 : n->in[0]->shape;
    const kiln_window *w = &n->at.win;
    kiln_conv_geom g = {x.d[0],    x.d[1],    y.d[1],    w->groups, {1, 1, 1},
                        {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}};
    for (int i = 0; i < w->nd; i++) {
        g.in[i] = x.d[2 + i];
        g.out[i] = y.d[2 + i];
        g.k[i] = w->kernel[i];
        g.stride[i] = w->stride[i];
        g.dil[i] = w->dilation[i];
        g.pad[i] = w->pad_lo[i];
    }
    return g;
}

enum { FORWARD, INPUT_GRAD, WEIGHT_GRAD };

/* Position of tap t at output position o along dim d, or -1 outside the
   input (in the padding). */
static int64_t tap_at(const kiln_conv_geom *g, int d, int64_t o, int64_t t)
{
    int64_t p = o * g->stride[d] - g->pad[d] + t * g->dil[d];
    return p >= 0 && p < g->in[d] ? p : -1;
}

/* The sum of x[n, c, taps] w[o, c', taps] over the taps and the group's
   channels for output element (n, o, q); mode says which array takes what
   (forward: the sum is returned). */
static double one_output(const kiln_conv_geom *g, int mode, int64_t n,
                         int64_t o, const int64_t *q, float *x, float *w,
                         float dy)
{
    int64_t cg = g->c / g->groups, og = g->o / g->groups;
    int64_t c0 = o / og * cg, ksz = g->k[0] * g->k[1] * g->k[2];
    int64_t isz = g->in[0] * g->in[1] * g->in[2];
    double acc = 0;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t t0 = 0; t0 < g->k[0]; t0++)
            for (int64_t t1 = 0; t1 < g->k[1]; t1++)
                for (int64_t t2 = 0; t2 < g->k[2]; t2++) {
                    int64_t p0 = tap_at(g, 0, q[0], t0),
                            p1 = tap_at(g, 1, q[1], t1),
                            p2 = tap_at(g, 2, q[2], t2);
                    if (p0 < 0 || p1 < 0 || p2 < 0)
                        continue;
                    int64_t xi = ((n * g->c + c0 + c) * isz) +
                                 (p0 * g->in[1] + p1) * g->in[2] + p2;
                    int64_t wi =
                        (o * cg + c) * ksz + (t0 * g->k[1] + t1) * g->k[2] + t2;
                    if (mode == FORWARD)
                        acc += (double)x[xi] * w[wi];
                    else if (mode == INPUT_GRAD)
                        x[xi] += w[wi] * dy;
                    else
                        w[wi] += x[xi] * dy;
                }
    return acc;
}

static void conv_loops(const kiln_node *node, int mode, float *x, float *w,
                       float *y)
{
    kiln_conv_geom g = kiln_conv_geom_of(node);
    int64_t q[3];
    float *yi = y;
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t o = 0; o < g.o; o++)
            for (q[0] = 0; q[0] < g.out[0]; q[0]++)
                for (q[1] = 0; q[1] < g.out[1]; q[1]++)
                    for (q[2] = 0; q[2] < g.out[2]; q[2]++, yi++) {
                        double s = one_output(&g, mode, n, o, q, x, w,
                                              mode == FORWARD ? 0.0f : *yi);
                        if (mode == FORWARD)
                            *yi = (float)s;
                    }
}

static void zero(const kiln_node *n, void *out)
{
    memset(out, 0, (size_t)kiln_shape_numel(n->shape) * sizeof(float));
}

void kiln_conv_finish(float *y, int64_t channels, int64_t size,
                      const float *bias, int relu)
{
    if (!bias && !relu)
        return;
    for (int64_t c = 0; c < channels; c++) {
        float b = bias ? bias[c] : 0.0f, *row = y + c * size;
        for (int64_t e = 0; e < size; e++) {
            float v = bias ? row[e] + b : row[e];
            row[e] = relu ? kiln_s_relu(v) : v;
        }
    }
}

void kiln_ref_CONV(const kiln_node *n, void *out, void *const *in)
{
    conv_loops(n, FORWARD, in[0], in[1], out);
    int64_t batch = n->shape.d[0],
            per = kiln_shape_numel(n->shape) / (batch ? batch : 1);
    for (int64_t i = 0; i < batch; i++)
        kiln_conv_finish((float *)out + i * per, n->shape.d[1],
                         per / (n->shape.d[1] ? n->shape.d[1] : 1),
                         n->n_in > 2 ? in[2] : NULL,
                         n->at.win.flags & KILN_WINDOW_RELU);
}

void kiln_ref_CONV_TRANSPOSE(const kiln_node *n, void *out, void *const *in)
{
    zero(n, out);
    conv_loops(n, INPUT_GRAD, out, in[1], in[0]);
}

void kiln_ref_CONV_WGRAD(const kiln_node *n, void *out, void *const *in)
{
    zero(n, out);
    conv_loops(n, WEIGHT_GRAD, in[0], out, in[1]);
}
