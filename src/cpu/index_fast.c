/* Fast indexing kernels: row copies and row adds, threaded so that each
   output element is written by one share only, in the reference's order
   (index order), so results do not depend on the thread count.
   index_add splits the output's rows between shares, each share scanning
   all indices for its own rows: no races, no per-thread copies. */
#include <string.h>

#include "cpu/fast.h"
#include "cpu/index.h"
#include "cpu/pool.h"

typedef struct index_job {
    kiln_index_geom g;
    const void *x, *src;
    const int32_t *idx;
    void *out;
} index_job;

/* index_select: rows (a, j) of the output, each a copy of x's row
   (a, idx[j]) of inner elements. */
static void select_rows(void *ctx, int64_t lo, int64_t hi)
{
    const index_job *j = ctx;
    const kiln_index_geom *g = &j->g;
    const uint32_t *x = j->x;
    uint32_t *out = j->out;
    size_t bytes = (size_t)g->inner * 4;
    for (int64_t r = lo; r < hi; r++) {
        int64_t a = r / g->k, k = r % g->k;
        memcpy(out + r * g->inner, x + (a * g->size + j->idx[k]) * g->inner,
               bytes);
    }
}

void kiln_fast_INDEX_SELECT(const kiln_node *n, void *o, void *const *in)
{
    index_job j = {kiln_index_geom_of(n), in[0], NULL, in[1], o};
    kiln_par_for(j.g.outer * j.g.k, j.g.inner + 8, select_rows, &j);
}

KILN_CLONES static void add_row(float *restrict o, const float *restrict s,
                                int64_t len)
{
    for (int64_t i = 0; i < len; i++)
        o[i] += s[i];
}

/* index_add: output rows [lo, hi) of outer * size, each share adding the
   source rows whose index falls among its own rows. */
static void add_rows(void *ctx, int64_t lo, int64_t hi)
{
    const index_job *j = ctx;
    const kiln_index_geom *g = &j->g;
    const float *src = j->src;
    float *out = j->out;
    for (int64_t a = lo / g->size; a * g->size < hi; a++) {
        int64_t first = a * g->size;
        for (int64_t k = 0; k < g->k; k++) {
            int64_t r = first + j->idx[k];
            if (r >= lo && r < hi)
                add_row(out + r * g->inner, src + (a * g->k + k) * g->inner,
                        g->inner);
        }
    }
}

static void copy_input(const kiln_node *n, void *o, const void *x)
{
    if (o != x)
        kiln_fast_RESHAPE(n, o, (void *const[]){(void *)x});
}

void kiln_fast_INDEX_ADD(const kiln_node *n, void *o, void *const *in)
{
    index_job j = {kiln_index_geom_of(n), NULL, in[2], in[1], o};
    copy_input(n, o, in[0]);
    int64_t rows = j.g.outer * j.g.size;
    if (rows == 0)
        return;
    /* a share reads every index once, adds its own rows */
    int64_t per_row = rows ? j.g.k * j.g.outer * (j.g.inner + 4) / rows : 0;
    kiln_par_for(rows, per_row + 1, add_rows, &j);
}

/* gather / scatter_add: lines of idx along the axis, each reading (gather)
   or writing (scatter_add) x's line at the same other coordinates. */
static void gather_lines(void *ctx, int64_t lo, int64_t hi)
{
    const index_job *j = ctx;
    const kiln_index_geom *g = &j->g;
    const uint32_t *x = j->x;
    uint32_t *out = j->out;
    int64_t along = g->dims[g->axis], is = g->is[g->axis], xs = g->xs[g->axis];
    for (int64_t l = lo; l < hi; l++) {
        int64_t xo, io, so;
        kiln_index_line(g, l, &xo, &io, &so);
        for (int64_t k = 0; k < along; k++, io += is)
            out[io] = x[xo + j->idx[io] * xs];
    }
}

static void scatter_lines(void *ctx, int64_t lo, int64_t hi)
{
    const index_job *j = ctx;
    const kiln_index_geom *g = &j->g;
    const float *src = j->src;
    float *out = j->out;
    int64_t along = g->dims[g->axis], is = g->is[g->axis], xs = g->xs[g->axis],
            ss = g->ss[g->axis];
    for (int64_t l = lo; l < hi; l++) {
        int64_t xo, io, so;
        kiln_index_line(g, l, &xo, &io, &so);
        for (int64_t k = 0; k < along; k++, io += is, so += ss)
            out[xo + j->idx[io] * xs] += src[so];
    }
}

static int64_t lines_of(const kiln_index_geom *g)
{
    int64_t along = g->dims[g->axis];
    return along ? g->k / along : 0;
}

void kiln_fast_GATHER(const kiln_node *n, void *o, void *const *in)
{
    index_job j = {kiln_index_geom_of(n), in[0], NULL, in[1], o};
    kiln_par_for(lines_of(&j.g), j.g.dims[j.g.axis] * 2 + 16, gather_lines, &j);
}

void kiln_fast_SCATTER_ADD(const kiln_node *n, void *o, void *const *in)
{
    index_job j = {kiln_index_geom_of(n), NULL, in[2], in[1], o};
    copy_input(n, o, in[0]);
    kiln_par_for(lines_of(&j.g), j.g.dims[j.g.axis] * 2 + 16, scatter_lines,
                 &j);
}
