/* Kernels of cumsum, prod and topk.  cumsum and prod accumulate in double
   as PyTorch does on the CPU; the fast cumsum threads over the lines along
   its axis with the reference's arithmetic (the same bits).  topk sorts
   each line by value, NaN largest as torch.topk, ties by index. */
#include <math.h>

#include "cpu/fast.h"
#include "cpu/pool.h"
#include "cpu/scan.h"

typedef struct line_geom {
    int64_t outer, size, inner;
} line_geom;

static line_geom lines_of(const kiln_shape *s, int axis)
{
    line_geom g = {1, s->d[axis], 1};
    for (int d = 0; d < s->ndim; d++) {
        if (d < axis)
            g.outer *= s->d[d];
        else if (d > axis)
            g.inner *= s->d[d];
    }
    return g;
}

/* cumsum of lines [lo, hi) of outer * inner, each strided by inner */
typedef struct cumsum_job {
    line_geom g;
    const float *x;
    float *out;
} cumsum_job;

static void cumsum_lines(void *ctx, int64_t lo, int64_t hi)
{
    const cumsum_job *j = ctx;
    for (int64_t l = lo; l < hi; l++) {
        int64_t o = l / j->g.inner, i = l % j->g.inner;
        const float *x = j->x + o * j->g.size * j->g.inner + i;
        float *out = j->out + o * j->g.size * j->g.inner + i;
        double acc = 0;
        for (int64_t k = 0; k < j->g.size; k++) {
            acc += x[k * j->g.inner];
            out[k * j->g.inner] = (float)acc;
        }
    }
}

void kiln_ref_CUMSUM(const kiln_node *n, void *o, void *const *in)
{
    cumsum_job j = {lines_of(&n->shape, n->at.axis), in[0], o};
    cumsum_lines(&j, 0, j.g.outer * j.g.inner);
}

void kiln_fast_CUMSUM(const kiln_node *n, void *o, void *const *in)
{
    cumsum_job j = {lines_of(&n->shape, n->at.axis), in[0], o};
    kiln_par_for(j.g.outer * j.g.inner, j.g.size * 2 + 8, cumsum_lines, &j);
}

/* Each output element's product in double, over its inputs in order. */
void kiln_ref_PROD(const kiln_node *n, void *o, void *const *in)
{
    kiln_shape x = n->in[0]->shape;
    int64_t st[KILN_MAX_DIMS], m = 1, reduced = 1;
    for (int d = x.ndim - 1; d >= 0; d--) {
        st[d] = m;
        m *= x.d[d];
        if (n->at.axes >> d & 1u)
            reduced *= x.d[d];
    }
    const float *v = in[0];
    float *out = o;
    for (int64_t i = 0, nout = kiln_shape_numel(n->shape); i < nout; i++) {
        double acc = 1.0;
        for (int64_t j = 0; j < reduced; j++) {
            int64_t at = 0, ki = i, rj = j;
            for (int d = x.ndim - 1; d >= 0; d--) {
                int red = n->at.axes >> d & 1u;
                int64_t *c = red ? &rj : &ki;
                at += (*c % x.d[d]) * st[d];
                *c /= x.d[d];
            }
            acc *= v[at];
        }
        out[i] = (float)acc;
    }
}

/* a ranks before b: larger, NaN largest, equal values by index. */
static int before(float a, int64_t ia, float b, int64_t ib)
{
    int an = isnan(a), bn = isnan(b);
    if (an != bn)
        return an;
    if (!an && a != b)
        return a > b;
    return ia < ib;
}

/* Each line's k first in rank order, the next one each time the first
   after the last chosen (ranks are a total order). */
void kiln_ref_TOPK(const kiln_node *n, void *o, void *const *in)
{
    line_geom g = lines_of(&n->in[0]->shape, n->at.axis);
    int64_t k = n->at.depth;
    const float *x = in[0];
    int32_t *out = o;
    for (int64_t l = 0; l < g.outer * g.inner; l++) {
        const float *xl = x + (l / g.inner) * g.size * g.inner + l % g.inner;
        int32_t *ol = out + (l / g.inner) * k * g.inner + l % g.inner;
        int64_t last = -1;
        for (int64_t r = 0; r < k; r++) {
            int64_t best = -1;
            for (int64_t j = 0; j < g.size; j++) {
                float v = xl[j * g.inner];
                if (last >= 0 && !before(xl[last * g.inner], last, v, j))
                    continue;
                if (best < 0 || before(v, j, xl[best * g.inner], best))
                    best = j;
            }
            ol[r * g.inner] = (int32_t)(last = best);
        }
    }
}
