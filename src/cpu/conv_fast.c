/* Fast convolutions: im2col into the GEMM path (cpu/gemm.h).

   Per image and group, the columns of x (every tap of every channel of the
   group, one row each, over the output positions) make each op one GEMM:
     conv:           y[o, q]   = w[o, (c,t)] col[(c,t), q]
     conv_transpose: col       = w^T dy, then added back into dx (col2im)
     weight grad:    dw[o, (c,t)] += dy[o, q] col^T[q, (c,t)]
   A 1x1 kernel with stride 1 and no padding needs no columns: x is its own.

   Scratch.  The columns live in scratch memory the caller hands the kernel
   (the memory planner places it in a compiled function's block, the
   dynamic path in its workspace): kiln_conv_scratch_bytes says how much.
   It holds SLOTS column buffers (fewer for a smaller batch), whatever the
   thread count, which may change after a function is planned: the batch
   is split into that many contiguous ranges, a slot each, spread over the
   pool.  The weight gradient also keeps one partial sum per slot, added
   together in slot order, so its result does not depend on the thread
   count either. */
#include <string.h>

#include "cpu/conv.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

enum { SLOTS = 8 };

typedef struct conv_job {
    const kiln_node *node;
    kiln_conv_geom g;
    int64_t cg, og, ksz, isz, osz, rows; /* rows: cg * ksz */
    int64_t slots, per_slot;             /* scratch floats per slot */
    int direct;                          /* 1x1, stride 1, no padding */
    const float *a, *b;                  /* the op's two inputs */
    float *out, *scratch;
} conv_job;

static conv_job job_of(const kiln_node *n)
{
    conv_job j = {.node = n, .g = kiln_conv_geom_of(n)};
    kiln_conv_geom *g = &j.g;
    j.cg = g->c / g->groups;
    j.og = g->o / g->groups;
    j.ksz = g->k[0] * g->k[1] * g->k[2];
    j.isz = g->in[0] * g->in[1] * g->in[2];
    j.osz = g->out[0] * g->out[1] * g->out[2];
    j.rows = j.cg * j.ksz;
    j.direct = j.ksz == 1;
    for (int d = 0; d < 3; d++)
        j.direct &=
            g->stride[d] == 1 && g->pad[d] == 0 && g->in[d] == g->out[d];
    j.slots = g->n < SLOTS ? g->n : SLOTS;
    int64_t col = j.direct ? 0 : j.rows * j.osz;
    j.per_slot = col + (n->op == KILN_OP_CONV_WGRAD ? g->o * j.rows : 0);
    return j;
}

size_t kiln_conv_scratch_bytes(const kiln_node *n)
{
    conv_job j = job_of(n);
    return (size_t)(j.slots * j.per_slot) * sizeof(float);
}

/* The output positions q of one dim whose tap t lands inside the input:
   [lo, hi). */
static void valid_range(const kiln_conv_geom *g, int d, int64_t t, int64_t *lo,
                        int64_t *hi)
{
    int64_t off = t * g->dil[d] - g->pad[d], s = g->stride[d];
    /* q s + off >= 0 and q s + off < in */
    *lo = off >= 0 ? 0 : (-off + s - 1) / s;
    *hi = g->in[d] - off <= 0 ? 0 : (g->in[d] - off + s - 1) / s;
    if (*hi > g->out[d])
        *hi = g->out[d];
    if (*lo > *hi)
        *lo = *hi;
}

/* One row of the columns (channel plane x, taps t) over the output
   positions, or the reverse (add: the row added back into the plane). */
static void row_copy(const kiln_conv_geom *g, const float *x, float *xw,
                     const int64_t *t, float *row, const float *rowr)
{
    int64_t lo[3], hi[3];
    for (int d = 0; d < 3; d++)
        valid_range(g, d, t[d], &lo[d], &hi[d]);
    int64_t s2 = g->stride[2], off2 = t[2] * g->dil[2] - g->pad[2];
    for (int64_t q0 = 0; q0 < g->out[0]; q0++)
        for (int64_t q1 = 0; q1 < g->out[1]; q1++) {
            int64_t at = (q0 * g->out[1] + q1) * g->out[2];
            int inside = q0 >= lo[0] && q0 < hi[0] && q1 >= lo[1] && q1 < hi[1];
            int64_t a = inside ? lo[2] : g->out[2], b = inside ? hi[2] : a;
            int64_t p =
                inside ? ((q0 * g->stride[0] + t[0] * g->dil[0] - g->pad[0]) *
                              g->in[1] +
                          q1 * g->stride[1] + t[1] * g->dil[1] - g->pad[1]) *
                                 g->in[2] +
                             off2
                       : 0;
            if (rowr) { /* col2im: add the valid span back */
                for (int64_t q2 = a; q2 < b; q2++)
                    xw[p + q2 * s2] += rowr[at + q2];
                continue;
            }
            float *r = row + at;
            memset(r, 0, (size_t)a * sizeof(float));
            if (s2 == 1 && b > a)
                memcpy(r + a, x + p + a, (size_t)(b - a) * sizeof(float));
            else
                for (int64_t q2 = a; q2 < b; q2++)
                    r[q2] = x[p + q2 * s2];
            memset(r + b, 0, (size_t)(g->out[2] - b) * sizeof(float));
        }
}

/* im2col of the cg channel planes at x into col [rows, osz], or col2im
   (add: col added into the planes at xw). */
static void columns(const conv_job *j, const float *x, float *xw, float *col,
                    int add)
{
    const kiln_conv_geom *g = &j->g;
    int64_t t[3], r = 0;
    for (int64_t c = 0; c < j->cg; c++)
        for (t[0] = 0; t[0] < g->k[0]; t[0]++)
            for (t[1] = 0; t[1] < g->k[1]; t[1]++)
                for (t[2] = 0; t[2] < g->k[2]; t[2]++, r++) {
                    float *row = col + r * j->osz;
                    if (add)
                        row_copy(g, NULL, xw + c * j->isz, t, NULL, row);
                    else
                        row_copy(g, x + c * j->isz, NULL, t, row, NULL);
                }
}

/* Image i, group k of each op, with its slot's columns col. */
static void forward_one(const conv_job *j, int64_t i, int64_t k, float *col)
{
    const float *x = j->a + (i * j->g.c + k * j->cg) * j->isz;
    const float *w = j->b + k * j->og * j->rows;
    if (!j->direct)
        columns(j, x, NULL, col, 0);
    kiln_cpu_gemm(0, 0, j->og, j->osz, j->rows, w, j->direct ? x : col,
                  j->out + (i * j->g.o + k * j->og) * j->osz);
}

static void input_grad_one(const conv_job *j, int64_t i, int64_t k, float *col)
{
    const float *dy = j->a + (i * j->g.o + k * j->og) * j->osz;
    const float *w = j->b + k * j->og * j->rows;
    float *dx = j->out + (i * j->g.c + k * j->cg) * j->isz;
    if (j->direct) {
        kiln_cpu_gemm(1, 0, j->rows, j->osz, j->og, w, dy, dx);
        return;
    }
    kiln_cpu_gemm(1, 0, j->rows, j->osz, j->og, w, dy, col);
    memset(dx, 0, (size_t)(j->cg * j->isz) * sizeof(float));
    columns(j, NULL, dx, col, 1);
}

/* first: the slot's partial sum is written, not added to */
static void weight_grad_one(const conv_job *j, int64_t i, int64_t k, float *col,
                            float *acc, int first)
{
    const float *x = j->a + (i * j->g.c + k * j->cg) * j->isz;
    const float *dy = j->b + (i * j->g.o + k * j->og) * j->osz;
    float *dw = acc + k * j->og * j->rows;
    if (!j->direct)
        columns(j, x, NULL, col, 0);
    const float *c = j->direct ? x : col;
    if (first)
        kiln_cpu_gemm(0, 1, j->og, j->rows, j->osz, dy, c, dw);
    else
        kiln_cpu_gemm_acc(0, 1, j->og, j->rows, j->osz, 1.0f, dy, c, dw);
}

/* Slots [lo, hi): each runs its range of images, every group. */
static void run_slots(void *ctx, int64_t lo, int64_t hi)
{
    const conv_job *j = ctx;
    for (int64_t s = lo; s < hi; s++) {
        float *col = j->scratch + s * j->per_slot;
        float *acc = col + (j->direct ? 0 : j->rows * j->osz);
        int64_t i0 = s * j->g.n / j->slots, i1 = (s + 1) * j->g.n / j->slots;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t k = 0; k < j->g.groups; k++) {
                if (j->node->op == KILN_OP_CONV)
                    forward_one(j, i, k, col);
                else if (j->node->op == KILN_OP_CONV_TRANSPOSE)
                    input_grad_one(j, i, k, col);
                else
                    weight_grad_one(j, i, k, col, acc, i == i0);
            }
    }
}

static void run(const kiln_node *n, void *out, void *const *in, void *scratch)
{
    conv_job j = job_of(n);
    j.a = in[0];
    j.b = in[1];
    j.out = out;
    j.scratch = scratch;
    int64_t flops = j.g.o * j.rows * j.osz / (j.slots ? j.slots : 1);
    if (j.slots > 0)
        kiln_par_for(j.slots, flops * (j.g.n / j.slots), run_slots, &j);
}

void kiln_fast_CONV(const kiln_node *n, void *out, void *const *in,
                    void *scratch)
{
    run(n, out, in, scratch);
}

void kiln_fast_CONV_TRANSPOSE(const kiln_node *n, void *out, void *const *in,
                              void *scratch)
{
    run(n, out, in, scratch);
}

/* The slots' partial sums added in slot order (none: a zero batch). */
void kiln_fast_CONV_WGRAD(const kiln_node *n, void *out, void *const *in,
                          void *scratch)
{
    conv_job j = job_of(n);
    int64_t len = j.g.o * j.rows, col = j.direct ? 0 : j.rows * j.osz;
    run(n, out, in, scratch);
    float *o = out;
    memset(o, 0, (size_t)len * sizeof(float));
    for (int64_t s = 0; s < j.slots; s++) {
        const float *acc = (const float *)scratch + s * j.per_slot + col;
        for (int64_t e = 0; e < len; e++)
            o[e] += acc[e];
    }
}
