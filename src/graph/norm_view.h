/* The [N, C, S] view normalisation ops take of their input (kiln_norm_attr
   in graph/graph.h), shared by the shape rules, the kernels and the
   gradient rules. */
#ifndef KILN_GRAPH_NORM_VIEW_H
#define KILN_GRAPH_NORM_VIEW_H

#include "graph/graph.h"

typedef struct kiln_norm_view {
    int64_t n, c, s; /* samples, channels, elements per channel plane */
    int64_t groups;  /* statistics groups per sample (0: per channel) */
    int64_t q;       /* statistics: c (groups 0) or n * groups */
    int64_t m;       /* elements each statistic is over */
} kiln_norm_view;

static inline kiln_norm_view kiln_norm_view_of(kiln_shape x, kiln_norm_attr a)
{
    kiln_norm_view v = {1, 1, 1, a.groups, 0, 0};
    for (int d = 0; d < x.ndim; d++) {
        if (d < a.axis)
            v.n *= x.d[d];
        else if (d == a.axis)
            v.c = x.d[d];
        else
            v.s *= x.d[d];
    }
    v.q = a.groups ? v.n * a.groups : v.c;
    v.m = a.groups ? (v.groups ? v.c / v.groups : 0) * v.s : v.n * v.s;
    return v;
}

/* The index of element (n, c, s)'s statistic. */
static inline int64_t kiln_norm_stat(const kiln_norm_view *v, int64_t n,
                                     int64_t c)
{
    return v->groups ? n * v->groups + c / (v->c / v->groups) : c;
}

/* The elements of statistic q: runs of len contiguous elements, the first
   at start(q), each stride after the one before. */
typedef struct kiln_norm_runs {
    int64_t runs, len, stride;
} kiln_norm_runs;

static inline kiln_norm_runs kiln_norm_runs_of(const kiln_norm_view *v)
{
    if (v->groups)
        return (kiln_norm_runs){1, v->m, 0};
    return (kiln_norm_runs){v->n, v->s, v->c * v->s};
}

static inline int64_t kiln_norm_run_start(const kiln_norm_view *v, int64_t q)
{
    return v->groups ? q * v->m : q * v->s;
}

#endif
