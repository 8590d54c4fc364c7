/* Fast normalisation kernels: the same sums as the reference (double
   accumulation, two passes), vectorised over contiguous segments of S
   elements (one sample, one channel) and split over the thread pool by
   statistic (norm_stats, norm_grad), by segment (norm) or by channel
   (norm_param_grad), so every share sums its elements in the same order
   whatever the thread count. */
#include <math.h>
#include <string.h>

#include "cpu/fast.h"
#include "cpu/norm.h"
#include "cpu/pool.h"
#include "graph/norm_view.h"

KILN_CLONES static double seg_sum(const float *x, int64_t n)
{
    double acc = 0;
    _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)
        acc += (double)x[i];
    return acc;
}

/* Σ (x - mean)^2 */
KILN_CLONES static double seg_dev2(const float *x, int64_t n, float mean)
{
    double acc = 0;
    _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)
    {
        float d = x[i] - mean;
        acc += (double)(d * d);
    }
    return acc;
}

/* Σ dy and Σ dy (x - mean) */
KILN_CLONES static void seg_grad_sums(const float *x, const float *dy,
                                      int64_t n, float mean, double *sum_dy,
                                      double *sum_dy_dev)
{
    double a = 0, b = 0;
    _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < n; i++)
    {
        a += (double)dy[i];
        b += (double)(dy[i] * (x[i] - mean));
    }
    *sum_dy = a;
    *sum_dy_dev = b;
}

/* y = (x - mean) * scale + shift */
KILN_CLONES static void seg_apply(float *y, const float *x, int64_t n,
                                  float mean, float scale, float shift)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] =
        (x[i] - mean) * scale + shift;
}

/* dx = k * (dy * w - a - (x - mean) * b) */
KILN_CLONES static void seg_dx(float *dx, const float *x, const float *dy,
                               int64_t n, float mean, float k, float w, float a,
                               float b)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dx[i] =
        k * (dy[i] * w - a - (x[i] - mean) * b);
}

/* The same three over a row whose every element is its own channel (layer
   norm over the last axis: S = 1), the weights a vector beside it. */
KILN_CLONES static void row_apply(float *y, const float *x, const float *w,
                                  const float *b, int64_t n, float mean,
                                  float rstd)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] =
        (x[i] - mean) * (rstd * w[i]) + b[i];
}

KILN_CLONES static void row_grad_sums(const float *x, const float *dy,
                                      const float *w, int64_t n, float mean,
                                      double *sum_dyw, double *sum_dyw_dev)
{
    double a = 0, b = 0;
    _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < n; i++)
    {
        float g = dy[i] * w[i];
        a += (double)g;
        b += (double)(g * (x[i] - mean));
    }
    *sum_dyw = a;
    *sum_dyw_dev = b;
}

KILN_CLONES static void row_dx(float *dx, const float *x, const float *dy,
                               const float *w, int64_t n, float mean, float k,
                               float a, float b)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dx[i] =
        k * (dy[i] * w[i] - a - (x[i] - mean) * b);
}

typedef struct norm_job {
    const kiln_node *n;
    kiln_norm_view v;
    void *const *in;
    float *out;
} norm_job;

/* The segments of statistic q: count, and the offset and channel of the
   k-th. */
static int64_t seg_count(const kiln_norm_view *v)
{
    return v->groups ? v->c / v->groups : v->n;
}

static int64_t seg_at(const kiln_norm_view *v, int64_t q, int64_t k, int64_t *c)
{
    if (!v->groups) {
        *c = q;
        return (k * v->c + q) * v->s;
    }
    int64_t cg = v->c / v->groups, n = q / v->groups;
    *c = q % v->groups * cg + k;
    return (n * v->c + *c) * v->s;
}

static float rstd_of(const norm_job *j, const float *st, int64_t q)
{
    return (float)(1.0 /
                   sqrt((double)st[j->v.q + q] + (double)j->n->at.norm.eps));
}

static void stats_range(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0];
    int64_t segs = seg_count(&j->v), c;
    /* a group's channels are adjacent: one run of m elements */
    int64_t len = j->v.groups ? j->v.m : j->v.s;
    if (j->v.groups)
        segs = 1;
    for (int64_t q = lo; q < hi; q++) {
        double sum = 0, dev = 0;
        for (int64_t k = 0; k < segs; k++)
            sum += seg_sum(x + seg_at(&j->v, q, k, &c), len);
        float mean = (float)(sum / (double)j->v.m);
        for (int64_t k = 0; k < segs; k++)
            dev += seg_dev2(x + seg_at(&j->v, q, k, &c), len, mean);
        j->out[q] = mean;
        j->out[j->v.q + q] = (float)(dev / (double)j->v.m);
    }
}

void kiln_fast_NORM_STATS(const kiln_node *n, void *out, void *const *in)
{
    norm_job j = {n, kiln_norm_view_of(n->in[0]->shape, n->at.norm), in, out};
    if (n->n_in == 4 && !*(const int32_t *)in[3]) {
        memcpy(j.out, in[1], (size_t)j.v.q * sizeof(float));
        memcpy(j.out + j.v.q, in[2], (size_t)j.v.q * sizeof(float));
        return;
    }
    kiln_par_for(j.v.q, 2 * j.v.m, stats_range, &j);
}

static void apply_range(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0], *st = j->in[1], *w = j->in[2], *b = j->in[3];
    for (int64_t it = lo; it < hi; it++) {
        int64_t i = it / j->v.c, c = it % j->v.c;
        int64_t q = kiln_norm_stat(&j->v, i, c);
        seg_apply(j->out + it * j->v.s, x + it * j->v.s, j->v.s, st[q],
                  rstd_of(j, st, q) * w[c], b[c]);
    }
}

/* S = 1 with groups: one row per statistic. */
static void apply_rows(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0], *st = j->in[1], *w = j->in[2], *b = j->in[3];
    for (int64_t q = lo; q < hi; q++) {
        int64_t c, at = seg_at(&j->v, q, 0, &c);
        row_apply(j->out + at, x + at, w + c, b + c, j->v.m, st[q],
                  rstd_of(j, st, q));
    }
}

void kiln_fast_NORM(const kiln_node *n, void *out, void *const *in)
{
    norm_job j = {n, kiln_norm_view_of(n->in[0]->shape, n->at.norm), in, out};
    if (j.v.groups && j.v.s == 1) {
        kiln_par_for(j.v.q, j.v.m, apply_rows, &j);
        return;
    }
    kiln_par_for(j.v.n * j.v.c, j.v.s, apply_range, &j);
}

/* dx = rstd (dy w - mean(dy w) - x̂ mean(dy w x̂)) per statistic, the means
   over its elements (mode 0: the statistics are constants, dx = rstd dy
   w). */
static void grad_range(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0], *st = j->in[1], *w = j->in[2], *dy = j->in[3];
    int mode = *(const int32_t *)j->in[4] != 0;
    int64_t segs = seg_count(&j->v), c;
    for (int64_t q = lo; q < hi; q++) {
        float mean = st[q], rstd = rstd_of(j, st, q);
        double a = 0, b = 0;
        int sum_here = mode;
        if (mode && j->n->n_in == 6) { /* per channel: the sums given */
            const float *p = j->in[5];
            a = (double)w[q] * p[j->v.c + q];
            b = (double)w[q] * p[q] / rstd;
            sum_here = 0;
        }
        for (int64_t k = 0; sum_here && k < segs; k++) {
            int64_t at = seg_at(&j->v, q, k, &c);
            double sdy, sdev;
            seg_grad_sums(x + at, dy + at, j->v.s, mean, &sdy, &sdev);
            a += w[c] * sdy;
            b += w[c] * sdev;
        }
        float ma = (float)(a / (double)j->v.m);
        float mb = (float)(b * rstd * rstd / (double)j->v.m);
        for (int64_t k = 0; k < segs; k++) {
            int64_t at = seg_at(&j->v, q, k, &c);
            seg_dx(j->out + at, x + at, dy + at, j->v.s, mean, rstd, w[c], ma,
                   mb);
        }
    }
}

/* S = 1 with groups: one row per statistic, its weights a vector. */
static void grad_rows(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0], *st = j->in[1], *w = j->in[2], *dy = j->in[3];
    int mode = *(const int32_t *)j->in[4] != 0;
    for (int64_t q = lo; q < hi; q++) {
        int64_t c, at = seg_at(&j->v, q, 0, &c);
        float mean = st[q], rstd = rstd_of(j, st, q);
        double a = 0, b = 0;
        if (mode)
            row_grad_sums(x + at, dy + at, w + c, j->v.m, mean, &a, &b);
        float ma = (float)(a / (double)j->v.m);
        float mb = (float)(b * rstd * rstd / (double)j->v.m);
        row_dx(j->out + at, x + at, dy + at, w + c, j->v.m, mean, rstd, ma, mb);
    }
}

void kiln_fast_NORM_GRAD(const kiln_node *n, void *out, void *const *in)
{
    norm_job j = {n, kiln_norm_view_of(n->in[0]->shape, n->at.norm), in, out};
    if (j.v.groups && j.v.s == 1 && n->n_in != 6) {
        kiln_par_for(j.v.q, 3 * j.v.m, grad_rows, &j);
        return;
    }
    kiln_par_for(j.v.q, 3 * j.v.m, grad_range, &j);
}

static void param_range(void *ctx, int64_t lo, int64_t hi)
{
    norm_job *j = ctx;
    const float *x = j->in[0], *st = j->in[1], *dy = j->in[2];
    for (int64_t c = lo; c < hi; c++) {
        double dw = 0, db = 0;
        for (int64_t i = 0; i < j->v.n; i++) {
            int64_t q = kiln_norm_stat(&j->v, i, c),
                    at = (i * j->v.c + c) * j->v.s;
            double sdy, sdev;
            seg_grad_sums(x + at, dy + at, j->v.s, st[q], &sdy, &sdev);
            dw += sdev * rstd_of(j, st, q);
            db += sdy;
        }
        j->out[c] = (float)dw;
        j->out[j->v.c + c] = (float)db;
    }
}

void kiln_fast_NORM_PARAM_GRAD(const kiln_node *n, void *out, void *const *in)
{
    norm_job j = {n, kiln_norm_view_of(n->in[0]->shape, n->at.norm), in, out};
    kiln_par_for(j.v.c, 2 * j.v.n * j.v.s, param_range, &j);
}
