/* Fast resample2d and its transpose, threaded over the N*C planes.  The
   map is separable, so each output row is two passes: the rows its H taps
   read combined into one input-wide row (contiguous, vectorised), then
   each output column read through its W taps, computed once per share.
   Rows wider than ROW_MAX or outputs wider than TAPS_MAX (no room on the
   stack) take each output's taps in turn. */
#include <string.h>

#include "cpu/fast.h"
#include "cpu/pool.h"
#include "cpu/pool_kernels.h"

enum { ROW_MAX = 4096, TAPS_MAX = 1024 };

static float weight(const kiln_taps *t, int64_t k)
{
    return k ? t->w1 : t->w0;
}

/* One output column c read through its taps from row v. */
static inline float read_taps(const kiln_taps *t, const float *v)
{
    float s = t->w0 * v[t->start];
    for (int64_t b = 1; b < t->count; b++)
        s += t->w1 * v[t->start + b * t->step];
    return s;
}

/* v = the rows of plane x that th reads, weighted. */
KILN_CLONES static void combine_rows(const kiln_taps *th, const float *x,
                                     int64_t iw, float *v)
{
    const float *r = x + th->start * iw;
    for (int64_t c = 0; c < iw; c++)
        v[c] = th->w0 * r[c];
    for (int64_t a = 1; a < th->count; a++) {
        r = x + (th->start + a * th->step) * iw;
        for (int64_t c = 0; c < iw; c++)
            v[c] += th->w1 * r[c];
    }
}

/* row of dx += w * u. */
KILN_CLONES static void add_row(float *row, float w, const float *u, int64_t iw)
{
    for (int64_t c = 0; c < iw; c++)
        row[c] += w * u[c];
}

/* Output (i, j) of plane x with both taps computed here. */
static float one_output(const kiln_pool_job *j, const float *x, int64_t i,
                        int64_t c)
{
    const kiln_planes *p = &j->p;
    kiln_taps th = kiln_resample_taps(j->w, 0, p->ih, p->oh, i);
    kiln_taps tw = kiln_resample_taps(j->w, 1, p->iw, p->ow, c);
    float s = 0;
    for (int64_t a = 0; a < th.count; a++)
        s += weight(&th, a) *
             read_taps(&tw, x + (th.start + a * th.step) * p->iw);
    return s;
}

/* Fills tw with the W taps of every output column and returns 1 when the
   rows fit the two passes; else 0. */
static int column_taps(const kiln_pool_job *j, kiln_taps *tw)
{
    const kiln_planes *p = &j->p;
    if (p->iw > ROW_MAX || p->ow > TAPS_MAX)
        return 0;
    for (int64_t c = 0; c < p->ow; c++)
        tw[c] = kiln_resample_taps(j->w, 1, p->iw, p->ow, c);
    return 1;
}

/* Plane k of resample2d: y = the map of x. */
static void map_plane(const kiln_pool_job *j, const kiln_taps *tw, int fast,
                      int64_t k, float *v)
{
    const kiln_planes *p = &j->p;
    const float *x = j->x + k * p->ih * p->iw;
    float *y = j->y + k * p->oh * p->ow;
    for (int64_t i = 0; i < p->oh; i++, y += p->ow) {
        if (!fast) {
            for (int64_t c = 0; c < p->ow; c++)
                y[c] = one_output(j, x, i, c);
            continue;
        }
        kiln_taps th = kiln_resample_taps(j->w, 0, p->ih, p->oh, i);
        combine_rows(&th, x, p->iw, v);
        for (int64_t c = 0; c < p->ow; c++)
            y[c] = read_taps(&tw[c], v);
    }
}

/* The transpose of one output row i: dy's row spread over the W taps into
   u, then u added to the rows of dx the H taps read. */
static void spread_row(const kiln_pool_job *j, const kiln_taps *tw,
                       const float *dy, int64_t i, float *u, float *dx)
{
    const kiln_planes *p = &j->p;
    memset(u, 0, (size_t)p->iw * sizeof *u);
    for (int64_t c = 0; c < p->ow; c++)
        for (int64_t b = 0; b < tw[c].count; b++)
            u[tw[c].start + b * tw[c].step] += weight(&tw[c], b) * dy[c];
    kiln_taps th = kiln_resample_taps(j->w, 0, p->ih, p->oh, i);
    for (int64_t a = 0; a < th.count; a++)
        add_row(dx + (th.start + a * th.step) * p->iw, weight(&th, a), u,
                p->iw);
}

/* The same one output at a time. */
static void spread_each(const kiln_pool_job *j, const float *dy, int64_t i,
                        float *dx)
{
    const kiln_planes *p = &j->p;
    kiln_taps th = kiln_resample_taps(j->w, 0, p->ih, p->oh, i);
    for (int64_t c = 0; c < p->ow; c++) {
        kiln_taps tw = kiln_resample_taps(j->w, 1, p->iw, p->ow, c);
        for (int64_t a = 0; a < th.count; a++)
            for (int64_t b = 0; b < tw.count; b++)
                dx[(th.start + a * th.step) * p->iw + tw.start + b * tw.step] +=
                    weight(&th, a) * weight(&tw, b) * dy[c];
    }
}

/* Plane k of resample2d_grad: dx = the transpose of the map of dy. */
static void transpose_plane(const kiln_pool_job *j, const kiln_taps *tw,
                            int fast, int64_t k, float *u)
{
    const kiln_planes *p = &j->p;
    float *dx = j->y + k * p->ih * p->iw;
    const float *dy = j->x + k * p->oh * p->ow;
    memset(dx, 0, (size_t)(p->ih * p->iw) * sizeof *dx);
    for (int64_t i = 0; i < p->oh; i++, dy += p->ow) {
        if (fast)
            spread_row(j, tw, dy, i, u, dx);
        else
            spread_each(j, dy, i, dx);
    }
}

typedef struct resample_job {
    kiln_pool_job j;
    int transpose; /* resample2d_grad */
} resample_job;

static void resample_range(void *ctx, int64_t lo, int64_t hi)
{
    const resample_job *r = ctx;
    kiln_taps tw[TAPS_MAX];
    float row[ROW_MAX];
    int fast = column_taps(&r->j, tw);
    for (int64_t k = lo; k < hi; k++) {
        if (r->transpose)
            transpose_plane(&r->j, tw, fast, k, row);
        else
            map_plane(&r->j, tw, fast, k, row);
    }
}

static void run_resample(const kiln_node *n, kiln_shape x, kiln_shape y,
                         void *out, void *const *in)
{
    resample_job r = {kiln_pool_job_of(n, x, y, out, in),
                      n->op == KILN_OP_RESAMPLE2D_GRAD};
    const kiln_planes *p = &r.j.p;
    kiln_par_for(p->n, 4 * p->oh * p->ow + p->ih * p->iw, resample_range, &r);
}

void kiln_fast_RESAMPLE2D(const kiln_node *n, void *out, void *const *in)
{
    run_resample(n, n->in[0]->shape, n->shape, out, in);
}

void kiln_fast_RESAMPLE2D_GRAD(const kiln_node *n, void *out, void *const *in)
{
    run_resample(n, n->shape, n->in[0]->shape, out, in);
}
