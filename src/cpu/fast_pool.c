/* Fast kernels of the pooling group, threaded over the N*C planes: max
   pooling with a vectorised path for 2x2 windows of stride 2 (the common
   CNN case) and the reference's scan for other windows (resample2d's are
   in fast_resample.c). */
#include <math.h>
#include <string.h>

#include "cpu/fast.h"
#include "cpu/pool.h"
#include "cpu/pool_kernels.h"

/* Windows 2x2, stride 2, no padding or dilation, all inside the input. */
static int is_2x2(const kiln_window *w, const kiln_planes *p)
{
    for (int d = 0; d < 2; d++)
        if (w->kernel[d] != 2 || w->stride[d] != 2 || w->pad_lo[d] ||
            w->dilation[d] != 1)
            return 0;
    return 2 * p->oh <= p->ih && 2 * p->ow <= p->iw;
}

/* Four outputs at a time in vector registers, branch-free (the argmax of
   random data defeats branch prediction); rows of at least four outputs
   end with a chunk overlapping the one before, which writes the same
   values again. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store4(float *p, v4f v)
{
    memcpy(p, &v, sizeof v);
}

/* b replaces the maximum m so far when greater or NaN (the scan's rule). */
static inline v4i wins(v4f b, v4f m)
{
    return (b > m) | (b != b);
}

static inline v4f pick(v4i c, v4f a, v4f b)
{
    return (v4f)(((v4i)a & c) | ((v4i)b & ~c));
}

/* The four elements of windows j..j+3 (rows r0, r1), and masks of which
   one is each window's argmax, in scan order a, b, c, d. */
typedef struct quad {
    v4f m;
    v4i is_a, is_b, is_c, is_d;
} quad;

static inline quad window4(const float *r0, const float *r1, int64_t j)
{
    v4f x0 = load4(r0 + 2 * j), x1 = load4(r0 + 2 * j + 4);
    v4f y0 = load4(r1 + 2 * j), y1 = load4(r1 + 2 * j + 4);
    v4f a = __builtin_shufflevector(x0, x1, 0, 2, 4, 6);
    v4f b = __builtin_shufflevector(x0, x1, 1, 3, 5, 7);
    v4f c = __builtin_shufflevector(y0, y1, 0, 2, 4, 6);
    v4f d = __builtin_shufflevector(y0, y1, 1, 3, 5, 7);
    quad q;
    v4i wb = wins(b, a);
    q.m = pick(wb, b, a);
    v4i wc = wins(c, q.m);
    q.m = pick(wc, c, q.m);
    q.is_d = wins(d, q.m);
    q.m = pick(q.is_d, d, q.m);
    q.is_c = wc & ~q.is_d;
    q.is_b = wb & ~wc & ~q.is_d;
    q.is_a = ~wb & ~wc & ~q.is_d;
    return q;
}

/* The chunk after the one at j in a row of ow >= 4 outputs: 0, 4, ...,
   the last at ow - 4. */
static inline int64_t next_chunk(int64_t j, int64_t ow)
{
    return j + 8 <= ow ? j + 4 : ow - 4;
}

/* One window at a time, for rows of fewer than four outputs. */
static int64_t argmax4(const float *r0, const float *r1, int64_t j, float *m)
{
    float v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
    int64_t at = 0;
    for (int k = 1; k < 4; k++)
        if (v[k] > v[at] || isnan(v[k]))
            at = k;
    *m = v[at];
    return at;
}

KILN_CLONES static void max_2x2_row(const float *r0, const float *r1, float *y,
                                    int64_t ow)
{
    if (ow < 4) {
        for (int64_t j = 0; j < ow; j++)
            argmax4(r0, r1, j, &y[j]);
        return;
    }
    for (int64_t j = 0;; j = next_chunk(j, ow)) {
        store4(y + j, window4(r0, r1, j).m);
        if (j + 4 == ow)
            break;
    }
}

/* dy of each window written at its argmax, 0 at the other three. */
KILN_CLONES static void max_2x2_grad_row(const float *r0, const float *r1,
                                         const float *dy, float *d0, float *d1,
                                         int64_t ow)
{
    float m;
    if (ow < 4) {
        for (int64_t j = 0; j < ow; j++) {
            int64_t at = argmax4(r0, r1, j, &m);
            d0[2 * j] = at == 0 ? dy[j] : 0.0f;
            d0[2 * j + 1] = at == 1 ? dy[j] : 0.0f;
            d1[2 * j] = at == 2 ? dy[j] : 0.0f;
            d1[2 * j + 1] = at == 3 ? dy[j] : 0.0f;
        }
        return;
    }
    for (int64_t j = 0;; j = next_chunk(j, ow)) {
        quad q = window4(r0, r1, j);
        v4i g = (v4i)load4(dy + j);
        v4f ga = (v4f)(g & q.is_a), gb = (v4f)(g & q.is_b);
        v4f gc = (v4f)(g & q.is_c), gd = (v4f)(g & q.is_d);
        store4(d0 + 2 * j, __builtin_shufflevector(ga, gb, 0, 4, 1, 5));
        store4(d0 + 2 * j + 4, __builtin_shufflevector(ga, gb, 2, 6, 3, 7));
        store4(d1 + 2 * j, __builtin_shufflevector(gc, gd, 0, 4, 1, 5));
        store4(d1 + 2 * j + 4, __builtin_shufflevector(gc, gd, 2, 6, 3, 7));
        if (j + 4 == ow)
            break;
    }
}

static void max_pool_range(void *ctx, int64_t lo, int64_t hi)
{
    kiln_pool_job *j = ctx;
    const kiln_planes *p = &j->p;
    int fast = is_2x2(j->w, p);
    for (int64_t k = lo; k < hi; k++) {
        const float *x = j->x + k * p->ih * p->iw;
        float *y = j->y + k * p->oh * p->ow;
        for (int64_t i = 0; i < p->oh; i++, y += p->ow) {
            if (fast) {
                max_2x2_row(x + 2 * i * p->iw, x + (2 * i + 1) * p->iw, y,
                            p->ow);
                continue;
            }
            for (int64_t c = 0; c < p->ow; c++)
                kiln_window_argmax(j->w, x, p, i, c, y + c);
        }
    }
}

void kiln_fast_MAX_POOL2D(const kiln_node *n, void *out, void *const *in)
{
    kiln_pool_job j = kiln_pool_job_of(n, n->in[0]->shape, n->shape, out, in);
    int64_t cost = j.p.ih * j.p.iw + j.p.oh * j.p.ow;
    kiln_par_for(j.p.n, cost, max_pool_range, &j);
}

/* One plane of dx for 2x2 windows: the windows' rows, then zeros for a
   last odd row or column no window covers. */
static void max_2x2_grad_plane(const kiln_pool_job *j, const float *x,
                               const float *dy, float *dx)
{
    const kiln_planes *p = &j->p;
    for (int64_t i = 0; i < p->oh; i++) {
        float *d0 = dx + 2 * i * p->iw, *d1 = d0 + p->iw;
        max_2x2_grad_row(x + 2 * i * p->iw, x + (2 * i + 1) * p->iw,
                         dy + i * p->ow, d0, d1, p->ow);
        for (int64_t c = 2 * p->ow; c < p->iw; c++)
            d0[c] = d1[c] = 0.0f;
    }
    int64_t done = 2 * p->oh * p->iw;
    memset(dx + done, 0, (size_t)(p->ih * p->iw - done) * sizeof *dx);
}

static void max_pool_grad_range(void *ctx, int64_t lo, int64_t hi)
{
    kiln_pool_job *j = ctx;
    const kiln_planes *p = &j->p;
    int64_t plane = p->ih * p->iw, oplane = p->oh * p->ow;
    int fast = is_2x2(j->w, p);
    float best;
    for (int64_t k = lo; k < hi; k++) {
        const float *x = j->x + k * plane, *dy = j->v + k * oplane;
        float *dx = j->y + k * plane;
        if (fast) {
            max_2x2_grad_plane(j, x, dy, dx);
            continue;
        }
        memset(dx, 0, (size_t)plane * sizeof *dx);
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t c = 0; c < p->ow; c++, dy++) {
                int64_t a = kiln_window_argmax(j->w, x, p, i, c, &best);
                if (a >= 0)
                    dx[a] += *dy;
            }
    }
}

void kiln_fast_MAX_POOL2D_GRAD(const kiln_node *n, void *out, void *const *in)
{
    kiln_pool_job j =
        kiln_pool_job_of(n, n->in[0]->shape, n->in[1]->shape, out, in);
    int64_t cost = 2 * j.p.ih * j.p.iw + j.p.oh * j.p.ow;
    kiln_par_for(j.p.n, cost, max_pool_grad_range, &j);
}

static void max_pool_gather_range(void *ctx, int64_t lo, int64_t hi)
{
    kiln_pool_job *j = ctx;
    const kiln_planes *p = &j->p;
    int64_t plane = p->ih * p->iw;
    float best;
    for (int64_t k = lo; k < hi; k++) {
        const float *x = j->x + k * plane, *a = j->v + k * plane;
        float *y = j->y + k * p->oh * p->ow;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t c = 0; c < p->ow; c++) {
                int64_t at = kiln_window_argmax(j->w, x, p, i, c, &best);
                *y++ = at >= 0 ? a[at] : 0.0f;
            }
    }
}

void kiln_fast_MAX_POOL2D_GATHER(const kiln_node *n, void *out, void *const *in)
{
    kiln_pool_job j = kiln_pool_job_of(n, n->in[0]->shape, n->shape, out, in);
    int64_t cost = j.p.ih * j.p.iw + j.p.oh * j.p.ow;
    kiln_par_for(j.p.n, cost, max_pool_gather_range, &j);
}
