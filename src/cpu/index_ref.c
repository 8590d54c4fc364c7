/* Reference kernels of the indexing ops: plain loops that define them.
   Indices were checked before a kernel runs (kiln_cpu_check_index); the
   adding kernels add in index order, as the fast ones do. */
#include <stdio.h>
#include <string.h>

#include "cpu/index.h"

static int64_t prod(const kiln_shape *s, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= s->d[d];
    return p;
}

/* Row-major strides of s into st. */
static void strides(const kiln_shape *s, int64_t *st)
{
    int64_t m = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = m;
        m *= s->d[d];
    }
}

kiln_index_geom kiln_index_geom_of(const kiln_node *n)
{
    const kiln_shape *x = &n->in[0]->shape, *idx = &n->in[1]->shape;
    kiln_index_geom g = {.axis = n->at.axis};
    g.outer = prod(x, 0, g.axis);
    g.size = x->d[g.axis];
    g.inner = prod(x, g.axis + 1, x->ndim);
    g.k = kiln_shape_numel(*idx);
    if (n->op == KILN_OP_GATHER || n->op == KILN_OP_SCATTER_ADD) {
        g.nd = idx->ndim;
        memcpy(g.dims, idx->d, sizeof g.dims);
        strides(x, g.xs);
        strides(idx, g.is);
        if (n->n_in == 3)
            strides(&n->in[2]->shape, g.ss);
    }
    return g;
}

void kiln_index_line(const kiln_index_geom *g, int64_t line, int64_t *xo,
                     int64_t *io, int64_t *so)
{
    *xo = *io = *so = 0;
    for (int d = g->nd - 1; d >= 0; d--) {
        if (d == g->axis)
            continue;
        int64_t c = line % g->dims[d];
        line /= g->dims[d];
        *xo += c * g->xs[d];
        *io += c * g->is[d];
        *so += c * g->ss[d];
    }
}

/* ------------------------------------------------------------ checks */

void kiln_index_position(kiln_shape s, int64_t i, char *buf, size_t len)
{
    int64_t c[KILN_MAX_DIMS];
    for (int d = s.ndim - 1; d >= 0; d--) {
        c[d] = s.d[d] ? i % s.d[d] : 0;
        i = s.d[d] ? i / s.d[d] : 0;
    }
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < s.ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? "," : "",
                               (long long)c[d]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

kiln_status kiln_cpu_check_index(const kiln_node *n, void *const *in, char *msg,
                                 size_t len)
{
    if (n->op != KILN_OP_INDEX_SELECT && n->op != KILN_OP_INDEX_ADD &&
        n->op != KILN_OP_GATHER && n->op != KILN_OP_SCATTER_ADD)
        return KILN_OK;
    const int32_t *idx = in[1];
    kiln_shape is = n->in[1]->shape, xs = n->in[0]->shape;
    int64_t size = xs.d[n->at.axis], k = kiln_shape_numel(is), i = 0;
    if (!idx)
        return KILN_OK;
    while (i < k && idx[i] >= 0 && idx[i] < size)
        i++;
    if (i == k)
        return KILN_OK;
    if (msg && len) {
        char at[KILN_MAX_DIMS * 21 + 3], b1[96], b2[96];
        kiln_index_position(is, i, at, sizeof at);
        snprintf(msg, len,
                 "%s %%%d: index %d at %s of indices %s is outside [0, %lld) "
                 "(axis %d of %s)",
                 kiln_op_table[n->op].name, n->id, (int)idx[i], at,
                 kiln_shape_str(is, b1, sizeof b1), (long long)size, n->at.axis,
                 kiln_shape_str(xs, b2, sizeof b2));
    }
    return KILN_ERR_ARG;
}

/* ------------------------------------------------------------ kernels */

/* index_select copies 4-byte elements whatever the dtype. */
void kiln_ref_INDEX_SELECT(const kiln_node *n, void *o, void *const *in)
{
    kiln_index_geom g = kiln_index_geom_of(n);
    const uint32_t *x = in[0];
    const int32_t *idx = in[1];
    uint32_t *out = o;
    for (int64_t a = 0; a < g.outer; a++)
        for (int64_t j = 0; j < g.k; j++)
            for (int64_t i = 0; i < g.inner; i++)
                out[(a * g.k + j) * g.inner + i] =
                    x[(a * g.size + idx[j]) * g.inner + i];
}

void kiln_ref_INDEX_ADD(const kiln_node *n, void *o, void *const *in)
{
    kiln_index_geom g = kiln_index_geom_of(n);
    const float *src = in[2];
    const int32_t *idx = in[1];
    float *out = o;
    if (out != in[0])
        memcpy(out, in[0], (size_t)kiln_shape_numel(n->shape) * 4);
    for (int64_t a = 0; a < g.outer; a++)
        for (int64_t j = 0; j < g.k; j++)
            for (int64_t i = 0; i < g.inner; i++)
                out[(a * g.size + idx[j]) * g.inner + i] +=
                    src[(a * g.k + j) * g.inner + i];
}

void kiln_ref_GATHER(const kiln_node *n, void *o, void *const *in)
{
    kiln_index_geom g = kiln_index_geom_of(n);
    const uint32_t *x = in[0];
    const int32_t *idx = in[1];
    uint32_t *out = o;
    int64_t along = g.dims[g.axis], lines = along ? g.k / along : 0;
    for (int64_t l = 0; l < lines; l++) {
        int64_t xo, io, so;
        kiln_index_line(&g, l, &xo, &io, &so);
        for (int64_t j = 0; j < along; j++) {
            int64_t p = io + j * g.is[g.axis];
            out[p] = x[xo + idx[p] * g.xs[g.axis]];
        }
    }
}

void kiln_ref_SCATTER_ADD(const kiln_node *n, void *o, void *const *in)
{
    kiln_index_geom g = kiln_index_geom_of(n);
    const float *src = in[2];
    const int32_t *idx = in[1];
    float *out = o;
    if (out != in[0])
        memcpy(out, in[0], (size_t)kiln_shape_numel(n->shape) * 4);
    int64_t along = g.dims[g.axis], lines = along ? g.k / along : 0;
    for (int64_t l = 0; l < lines; l++) {
        int64_t xo, io, so;
        kiln_index_line(&g, l, &xo, &io, &so);
        for (int64_t j = 0; j < along; j++) {
            int64_t p = io + j * g.is[g.axis];
            out[xo + idx[p] * g.xs[g.axis]] += src[so + j * g.ss[g.axis]];
        }
    }
}
