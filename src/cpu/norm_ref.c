/* Reference kernels of the normalisation ops: plain loops over the
   [N, C, S] view (graph/norm_view.h), every sum in double, statistics in
   two passes (the mean, then the squared deviations from it), so that a
   large common offset does not cancel the variance away. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/norm.h"
#include "graph/norm_view.h"

static kiln_norm_view view_of(const kiln_node *n)
{
    return kiln_norm_view_of(n->in[0]->shape, n->at.norm);
}

/* Mode of a node whose input k is a mode (1 when it has none). */
static int training(const kiln_node *n, void *const *in, int k)
{
    return n->n_in <= k || *(const int32_t *)in[k] != 0;
}

/* Sum over statistic q's elements of f(x) - shift for f the identity
   (sq 0) or the square (sq 1). */
static double stat_sum(const kiln_norm_view *v, const float *x, int64_t q,
                       double shift, int sq)
{
    kiln_norm_runs r = kiln_norm_runs_of(v);
    const float *p = x + kiln_norm_run_start(v, q);
    double acc = 0;
    for (int64_t i = 0; i < r.runs; i++, p += r.stride)
        for (int64_t j = 0; j < r.len; j++) {
            double d = (double)p[j] - shift;
            acc += sq ? d * d : d;
        }
    return acc;
}

void kiln_ref_norm_stats(const kiln_node *n, void *out, void *const *in)
{
    kiln_norm_view v = view_of(n);
    float *o = out;
    if (!training(n, in, 3)) {
        memcpy(o, in[1], (size_t)v.q * sizeof *o);
        memcpy(o + v.q, in[2], (size_t)v.q * sizeof *o);
        return;
    }
    for (int64_t q = 0; q < v.q; q++) {
        double mean = stat_sum(&v, in[0], q, 0, 0) / (double)v.m;
        o[q] = (float)mean;
        o[v.q + q] = (float)(stat_sum(&v, in[0], q, mean, 1) / (double)v.m);
    }
}

static double rstd_of(const kiln_node *n, const float *stats, int64_t nq,
                      int64_t q)
{
    return 1.0 / sqrt((double)stats[nq + q] + (double)n->at.norm.eps);
}

void kiln_ref_norm(const kiln_node *n, void *out, void *const *in)
{
    kiln_norm_view v = view_of(n);
    const float *x = in[0], *st = in[1], *w = in[2], *b = in[3];
    float *y = out;
    for (int64_t i = 0; i < v.n; i++)
        for (int64_t c = 0; c < v.c; c++) {
            int64_t q = kiln_norm_stat(&v, i, c), at = (i * v.c + c) * v.s;
            double rstd = rstd_of(n, st, v.q, q);
            for (int64_t s = 0; s < v.s; s++)
                y[at + s] =
                    (float)(((double)x[at + s] - st[q]) * rstd * w[c] + b[c]);
        }
}

/* The channel of element j of a run of statistic q. */
static int64_t run_channel(const kiln_norm_view *v, int64_t q, int64_t j)
{
    return v->groups ? q % v->groups * (v->c / v->groups) + j / v->s : q;
}

/* Per statistic: the means of dy * w and of dy * w * xhat over its
   elements. */
static void grad_means(const kiln_norm_view *v, void *const *in, int64_t q,
                       double rstd, double *mean_dyw, double *mean_dyw_xhat)
{
    const float *x = in[0], *st = in[1], *w = in[2], *dy = in[3];
    kiln_norm_runs r = kiln_norm_runs_of(v);
    int64_t at = kiln_norm_run_start(v, q);
    double a = 0, b = 0;
    for (int64_t i = 0; i < r.runs; i++, at += r.stride)
        for (int64_t j = 0; j < r.len; j++) {
            double dyw = (double)dy[at + j] * w[run_channel(v, q, j)];
            a += dyw;
            b += dyw * ((double)x[at + j] - st[q]) * rstd;
        }
    *mean_dyw = a / (double)v->m;
    *mean_dyw_xhat = b / (double)v->m;
}

void kiln_ref_norm_grad(const kiln_node *n, void *out, void *const *in)
{
    kiln_norm_view v = view_of(n);
    kiln_norm_runs r = kiln_norm_runs_of(&v);
    const float *x = in[0], *st = in[1], *w = in[2], *dy = in[3];
    int train = training(n, in, 4);
    float *dx = out;
    for (int64_t q = 0; q < v.q; q++) {
        double a = 0, b = 0, rstd = rstd_of(n, st, v.q, q);
        if (train && n->n_in == 6) { /* per channel: the sums given */
            const float *p = in[5];
            a = (double)w[q] * p[v.c + q] / (double)v.m;
            b = (double)w[q] * p[q] / (double)v.m;
        } else if (train)
            grad_means(&v, in, q, rstd, &a, &b);
        int64_t at = kiln_norm_run_start(&v, q);
        for (int64_t i = 0; i < r.runs; i++, at += r.stride)
            for (int64_t j = 0; j < r.len; j++) {
                double xhat = ((double)x[at + j] - st[q]) * rstd;
                double dyw = (double)dy[at + j] * w[run_channel(&v, q, j)];
                dx[at + j] = (float)(rstd * (dyw - a - xhat * b));
            }
    }
}

void kiln_ref_norm_param_grad(const kiln_node *n, void *out, void *const *in)
{
    kiln_norm_view v = view_of(n);
    const float *x = in[0], *st = in[1], *dy = in[2];
    float *o = out;
    for (int64_t c = 0; c < v.c; c++) {
        double dw = 0, db = 0;
        for (int64_t i = 0; i < v.n; i++) {
            int64_t q = kiln_norm_stat(&v, i, c), at = (i * v.c + c) * v.s;
            double rstd = rstd_of(n, st, v.q, q);
            for (int64_t s = 0; s < v.s; s++) {
                dw += (double)dy[at + s] * ((double)x[at + s] - st[q]) * rstd;
                db += dy[at + s];
            }
        }
        o[c] = (float)dw;
        o[v.c + c] = (float)db;
    }
}

kiln_status kiln_cpu_check_norm(const kiln_node *n, void *const *in, char *msg,
                                size_t len)
{
    if (n->op != KILN_OP_NORM_STATS || n->n_in != 4 || !in[3] ||
        !training(n, in, 3))
        return KILN_OK;
    kiln_norm_view v = view_of(n);
    /* PyTorch refuses exactly one value; none gives an empty result and
       leaves the running statistics alone */
    if (v.m != 1)
        return KILN_OK;
    char b[96];
    if (msg && len)
        snprintf(msg, len,
                 "batch norm %%%d: expected more than 1 value per channel "
                 "when training, got input %s",
                 n->id, kiln_shape_str(n->in[0]->shape, b, sizeof b));
    return KILN_ERR_ARG;
}
