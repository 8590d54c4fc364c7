/* Reference kernels of the pooling group: plain loops over planes, the
   window geometry of graph/resample.h, sums in double. */
#include <string.h>

#include "cpu/pool_kernels.h"

/* One output (i, j) of plane x (a: the plane of a second input). */
typedef float (*output_fn)(const kiln_node *n, const kiln_planes *p,
                           const float *x, const float *a, int64_t i,
                           int64_t j);

/* Every output of every plane, in order, from in[0] (and in[1], of in[0]'s
   size, when n has two inputs). */
static void each_output(const kiln_node *n, kiln_planes p, void *const *in,
                        float *y, output_fn one)
{
    const float *x = in[0], *a = n->n_in > 1 ? in[1] : NULL;
    int64_t plane = p.ih * p.iw;
    for (int64_t k = 0; k < p.n; k++)
        for (int64_t i = 0; i < p.oh; i++)
            for (int64_t j = 0; j < p.ow; j++)
                *y++ =
                    one(n, &p, x + k * plane, a ? a + k * plane : NULL, i, j);
}

static float max_one(const kiln_node *n, const kiln_planes *p, const float *x,
                     const float *a, int64_t i, int64_t j)
{
    float best;
    (void)a;
    kiln_window_argmax(&n->at.win, x, p, i, j, &best);
    return best;
}

void kiln_ref_max_pool2d(const kiln_node *n, void *o, void *const *in)
{
    each_output(n, kiln_planes_of(n->in[0]->shape, n->shape), in, o, max_one);
}

/* dx = 0, then each dy added at its window's argmax. */
void kiln_ref_max_pool2d_grad(const kiln_node *n, void *o, void *const *in)
{
    kiln_planes p = kiln_planes_of(n->in[0]->shape, n->in[1]->shape);
    const float *x = in[0], *dy = in[1];
    float *dx = o, best;
    memset(dx, 0, (size_t)(p.n * p.ih * p.iw) * sizeof *dx);
    for (int64_t k = 0; k < p.n; k++, x += p.ih * p.iw, dx += p.ih * p.iw)
        for (int64_t i = 0; i < p.oh; i++)
            for (int64_t j = 0; j < p.ow; j++, dy++) {
                int64_t a = kiln_window_argmax(&n->at.win, x, &p, i, j, &best);
                if (a >= 0)
                    dx[a] += *dy;
            }
}

/* Each output reads a at its window's argmax in x. */
static float gather_one(const kiln_node *n, const kiln_planes *p,
                        const float *x, const float *a, int64_t i, int64_t j)
{
    float best;
    int64_t at = kiln_window_argmax(&n->at.win, x, p, i, j, &best);
    return at >= 0 ? a[at] : 0.0f;
}

void kiln_ref_max_pool2d_gather(const kiln_node *n, void *o, void *const *in)
{
    each_output(n, kiln_planes_of(n->in[0]->shape, n->shape), in, o,
                gather_one);
}

static float tap_weight(const kiln_taps *t, int64_t k)
{
    return k ? t->w1 : t->w0;
}

/* One output of resample2d: its taps along H and W over plane x. */
static float resample_one(const kiln_node *n, const kiln_planes *p,
                          const float *x, const float *unused, int64_t i,
                          int64_t j)
{
    const kiln_window *w = &n->at.win;
    (void)unused;
    kiln_taps th = kiln_resample_taps(w, 0, p->ih, p->oh, i);
    kiln_taps tw = kiln_resample_taps(w, 1, p->iw, p->ow, j);
    double acc = 0;
    for (int64_t a = 0; a < th.count; a++)
        for (int64_t b = 0; b < tw.count; b++)
            acc += (double)tap_weight(&th, a) * tap_weight(&tw, b) *
                   x[(th.start + a * th.step) * p->iw + tw.start + b * tw.step];
    return (float)acc;
}

void kiln_ref_resample2d(const kiln_node *n, void *o, void *const *in)
{
    each_output(n, kiln_planes_of(n->in[0]->shape, n->shape), in, o,
                resample_one);
}

/* The transpose: each dy spread over its output's taps (in float, as
   PyTorch's backward kernels accumulate). */
void kiln_ref_resample2d_grad(const kiln_node *n, void *o, void *const *in)
{
    kiln_planes p = kiln_planes_of(n->shape, n->in[0]->shape);
    const kiln_window *w = &n->at.win;
    const float *dy = in[0];
    float *dx = o;
    memset(dx, 0, (size_t)(p.n * p.ih * p.iw) * sizeof *dx);
    for (int64_t k = 0; k < p.n; k++, dx += p.ih * p.iw)
        for (int64_t i = 0; i < p.oh; i++) {
            kiln_taps th = kiln_resample_taps(w, 0, p.ih, p.oh, i);
            for (int64_t j = 0; j < p.ow; j++, dy++) {
                kiln_taps tw = kiln_resample_taps(w, 1, p.iw, p.ow, j);
                for (int64_t a = 0; a < th.count; a++)
                    for (int64_t b = 0; b < tw.count; b++)
                        dx[(th.start + a * th.step) * p.iw + tw.start +
                           b * tw.step] +=
                            tap_weight(&th, a) * tap_weight(&tw, b) * *dy;
            }
        }
}
