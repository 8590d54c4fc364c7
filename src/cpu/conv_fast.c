/* Fast convolutions: columns (im2col) into one GEMM per image and group.

   With the columns of x (one row per channel of the group and tap, over
   the output positions) each op is one matrix product:
     conv:           y[o, q]   = w[o, (c,t)] col[(c,t), q]
     conv_transpose: col       = w^T dy, then added back into dx (col2im)
     weight grad:    dw[o, (c,t)] += dy[o, q] col^T[q, (c,t)]
   Three ways to build the columns:
   - direct: a 1x1 kernel, stride 1, no padding: x is its own columns.
   - flat (stride 1, more rows of columns than output channels: the CNN's
     second convolution, the residual block's): x is copied once into a
     zero-padded buffer; output positions are then numbered as the padded
     input's (rows as wide as the padded rows, their last positions unused),
     so that every row of the columns is one contiguous slice of the
     padded input, shifted by the tap.  The product runs over those unused
     positions too (27% more for 5x5 on 14x14, 6% for 3x3 on 32x32) and
     the results are cropped, but the columns cost a memcpy per row
     instead of a loop per output row: for small images that per-row cost
     was twice the product's.  dy is spread to the same numbering with
     zeros at the unused positions for the gradients.
   - strided (any other): a row of the columns is built output row by
     output row.
   A 2-D convolution of one input channel (and its weight gradient) runs
   no product at all where AVX-512 is there: cpu/conv_direct.c; nor do
   2-D stride-1 convolutions of 8 or more channels: cpu/conv_rows.c (all
   three ops, its packed weights shared by the slots ahead of them), nor
   the forward of 2-D convolutions whose rows fill vectors of 16 output
   channels better than vectors of 16 positions (rows of 14: the MNIST
   CNN's second layer): cpu/conv_lanes.c.

   Scratch.  The buffers live in scratch memory the caller hands the kernel
   (the memory planner places it in a compiled function's block, the
   dynamic path in its workspace): kiln_conv_scratch_bytes says how much.
   It holds SLOTS sets of buffers (fewer for a smaller batch), whatever
   the thread count, which may change after a function is planned: the
   batch is split into that many contiguous ranges, a set each, spread over
   the pool.  The weight gradient also keeps one partial sum per slot,
   added together in slot order, so that its result does not depend on
   the thread count either. */
#include <string.h>

#include "cpu/conv.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "cpu/prepared.h"
#include "cpu/threads.h"

enum { SLOTS = 8 };
enum { DIRECT, FLAT, STRIDED, SINGLE, ROWS, LANES };

typedef struct conv_job {
    const kiln_node *node;
    kiln_conv_geom g;
    int how; /* DIRECT, FLAT, STRIDED, SINGLE, ROWS, LANES */
    int64_t cg, og, ksz, isz, osz, rows; /* rows: cg * ksz */
    int64_t pdim[3], plane;              /* FLAT: the padded input */
    int64_t cols; /* columns of the product: osz, or FLAT's numbering */
    /* floats per slot: padded input, columns, spread output, partial dw */
    int64_t n_pad, n_col, n_out, n_acc, per_slot, slots;
    int64_t n_shared; /* ROWS: packed weights, ahead of the slots */
    int split;        /* fewer slots than threads: the products use the pool */
    const float *a, *b; /* the op's two inputs */
    const float *wp;    /* ROWS, LANES: the packed weights */
    const float *bias;  /* conv's fused bias, or NULL */
    float *out, *scratch;
} conv_job;

static void layout(conv_job *j)
{
    const kiln_conv_geom *g = &j->g;
    j->cols = j->osz;
    if (j->how == FLAT) {
        for (int d = 0; d < 3; d++)
            j->pdim[d] = g->out[d] + g->dil[d] * (g->k[d] - 1);
        j->plane = j->pdim[0] * j->pdim[1] * j->pdim[2];
        /* up to the last output position, in the padded numbering */
        j->cols = j->osz ? ((g->out[0] - 1) * j->pdim[1] + g->out[1] - 1) *
                                   j->pdim[2] +
                               g->out[2]
                         : 0;
        j->n_pad = j->cg * j->plane;
        j->n_out = j->og * j->cols;
    }
    if (j->how == SINGLE)
        j->n_pad = kiln_conv_direct_floats(g);
    if (j->how == ROWS) {
        j->n_pad = kiln_conv_rows_floats(g, j->node->op);
        j->n_shared = kiln_conv_rows_shared_floats(g, j->node->op);
    }
    if (j->how == LANES) {
        j->n_pad = kiln_conv_lanes_floats(g);
        j->n_shared = kiln_conv_lanes_shared_floats(g);
    }
    j->n_col = j->how == DIRECT || j->how == SINGLE || j->how == ROWS ||
                       j->how == LANES
                   ? 0
                   : j->rows * j->cols;
    j->n_acc = j->node->op == KILN_OP_CONV_WGRAD ? g->o * j->rows : 0;
    j->per_slot = j->n_pad + j->n_col + j->n_out + j->n_acc;
}

/* Multiply-adds per (input channel, tap) of conv_rows' forward (8
   channels times vectors of 16 positions, taken in pairs) and of
   conv_lanes' (32 channels times 14 positions of a row): lanes spent on
   padding count, so that each kernel takes the shapes it fills best (rows
   of 14: lanes; of 32: rows). */
static int64_t rows_cost(const kiln_conv_geom *g)
{
    int64_t nv = g->out[0] * ((g->out[1] + 15) / 16);
    return (g->o + 7) / 8 * 8 * (nv + nv % 2) * 16;
}

static int64_t lanes_cost(const kiln_conv_geom *g)
{
    return (g->o + 31) / 32 * 32 * g->out[0] * ((g->out[1] + 13) / 14 * 14);
}

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
    int unit = 1, padded = 0;
    for (int d = 0; d < 3; d++) {
        unit &= g->stride[d] == 1;
        padded |= g->pad[d] != 0 || g->in[d] != g->out[d];
    }
    /* flat trades cropping (or spreading) og output planes for building
       rows planes of columns position by position: worth it when the
       columns have more rows (32->64 5x5: 800 against 64; 1->32 5x5: 25
       against 32 is not) */
    j.how = !unit                   ? STRIDED
            : j.ksz == 1 && !padded ? DIRECT
            : j.rows > j.og         ? FLAT
                                    : STRIDED;
    if (n->op != KILN_OP_CONV_TRANSPOSE && kiln_conv_direct_ok(g))
        j.how = SINGLE;
    if (kiln_conv_rows_ok(g))
        j.how = ROWS;
    if (n->op == KILN_OP_CONV && j.how != SINGLE && kiln_conv_lanes_ok(g) &&
        (j.how != ROWS || lanes_cost(g) < rows_cost(g)))
        j.how = LANES;
    j.slots = g->n < SLOTS ? g->n : SLOTS;
    layout(&j);
    return j;
}

size_t kiln_conv_scratch_bytes(const kiln_node *n)
{
    conv_job j = job_of(n);
    return (size_t)(j.n_shared + j.slots * j.per_slot) * sizeof(float);
}

/* ------------------------------------------------------------ flat */

/* Offset of tap t in the padded numbering. */
static int64_t flat_tap(const conv_job *j, const int64_t *t)
{
    const kiln_conv_geom *g = &j->g;
    return ((t[0] * g->dil[0]) * j->pdim[1] + t[1] * g->dil[1]) * j->pdim[2] +
           t[2] * g->dil[2];
}

/* Rows of a few floats: a vector loop, not a call. */
static inline void copy_row(float *restrict dst, const float *restrict src,
                            int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        dst[e] = src[e];
}

/* Copies every row of n planes [*dims] (dense) to or from the matching
   row of the padded numbering (flat; zeroed first when written): dims and
   offsets are the output's (crop, spread) or the input's (pad, unpad). */
typedef struct rows_map {
    int64_t dims[3], at[3]; /* at: where dim starts in the padded one */
    int64_t fsz;            /* floats per plane of the flat buffer */
} rows_map;

static void map_rows(const conv_job *j, const rows_map *m, float *flat,
                     float *dense, int64_t n, int to_dense)
{
    int64_t p1 = j->pdim[1], p2 = j->pdim[2], w = m->dims[2];
    int64_t dsz = m->dims[0] * m->dims[1] * w, fsz = m->fsz;
    if (n && !to_dense)
        memset(flat, 0, (size_t)(n * fsz) * sizeof(float));
    for (int64_t c = 0; c < n; c++)
        for (int64_t i0 = 0; i0 < m->dims[0]; i0++)
            for (int64_t i1 = 0; i1 < m->dims[1]; i1++) {
                float *d = dense + c * dsz + (i0 * m->dims[1] + i1) * w;
                float *f = flat + c * fsz +
                           ((i0 + m->at[0]) * p1 + i1 + m->at[1]) * p2 +
                           m->at[2];
                if (to_dense)
                    copy_row(d, f, w);
                else
                    copy_row(f, d, w);
            }
}

static rows_map input_map(const conv_job *j)
{
    rows_map m;
    for (int d = 0; d < 3; d++) {
        m.dims[d] = j->g.in[d];
        m.at[d] = j->g.pad[d];
    }
    m.fsz = j->plane;
    return m;
}

static rows_map output_map(const conv_job *j)
{
    rows_map m;
    for (int d = 0; d < 3; d++) {
        m.dims[d] = j->g.out[d];
        m.at[d] = 0;
    }
    m.fsz = j->cols;
    return m;
}

/* The columns of the padded planes xp: row (c, t) is xp[c] from t's
   offset on; or the reverse (add: each row added into xp there). */
static void flat_columns(const conv_job *j, float *xp, float *col, int add)
{
    const kiln_conv_geom *g = &j->g;
    int64_t t[3], ti = 0, n = j->cols;
    for (t[0] = 0; t[0] < g->k[0]; t[0]++)
        for (t[1] = 0; t[1] < g->k[1]; t[1]++)
            for (t[2] = 0; t[2] < g->k[2]; t[2]++, ti++) {
                int64_t off = flat_tap(j, t);
                for (int64_t c = 0; c < j->cg; c++) {
                    float *row = col + (c * j->ksz + ti) * n;
                    float *x = xp + c * j->plane + off;
                    if (!add)
                        memcpy(row, x, (size_t)n * sizeof(float));
                    else
                        for (int64_t e = 0; e < n; e++)
                            x[e] += row[e];
                }
            }
}

/* ------------------------------------------------------------ strided */

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

/* Where tap t reads: per dim the output positions [lo, hi) inside the
   input, and the input offset of output position 0 (may be negative). */
typedef struct tap {
    int64_t lo[3], hi[3], off[3];
} tap;

static tap tap_of(const kiln_conv_geom *g, const int64_t *t)
{
    tap p;
    for (int d = 0; d < 3; d++) {
        valid_range(g, d, t[d], &p.lo[d], &p.hi[d]);
        p.off[d] = t[d] * g->dil[d] - g->pad[d];
    }
    return p;
}

/* One row of the columns: the plane x read by tap p at every output
   position, zero where it falls in the padding. */
static void im2col_row(const kiln_conv_geom *g, const tap *p, const float *x,
                       float *row)
{
    int64_t o1 = g->out[1], o2 = g->out[2], s2 = g->stride[2];
    for (int64_t q0 = 0; q0 < g->out[0]; q0++) {
        float *r0 = row + q0 * o1 * o2;
        if (q0 < p->lo[0] || q0 >= p->hi[0]) {
            memset(r0, 0, (size_t)(o1 * o2) * sizeof(float));
            continue;
        }
        const float *x0 =
            x + (q0 * g->stride[0] + p->off[0]) * g->in[1] * g->in[2];
        for (int64_t q1 = 0; q1 < o1; q1++) {
            float *r = r0 + q1 * o2;
            int64_t a = p->lo[2], b = p->hi[2];
            if (q1 < p->lo[1] || q1 >= p->hi[1])
                a = b = o2;
            const float *src =
                x0 + (q1 * g->stride[1] + p->off[1]) * g->in[2] + p->off[2];
            for (int64_t q2 = 0; q2 < a; q2++)
                r[q2] = 0;
            for (int64_t q2 = a; q2 < b; q2++)
                r[q2] = src[q2 * s2];
            for (int64_t q2 = b; q2 < o2; q2++)
                r[q2] = 0;
        }
    }
}

/* The reverse: the row added back into the plane xw where tap p read. */
static void col2im_row(const kiln_conv_geom *g, const tap *p, const float *row,
                       float *xw)
{
    int64_t o1 = g->out[1], o2 = g->out[2], s2 = g->stride[2];
    for (int64_t q0 = p->lo[0]; q0 < p->hi[0]; q0++) {
        float *x0 = xw + (q0 * g->stride[0] + p->off[0]) * g->in[1] * g->in[2];
        for (int64_t q1 = p->lo[1]; q1 < p->hi[1]; q1++) {
            const float *r = row + (q0 * o1 + q1) * o2;
            float *dst =
                x0 + (q1 * g->stride[1] + p->off[1]) * g->in[2] + p->off[2];
            for (int64_t q2 = p->lo[2]; q2 < p->hi[2]; q2++)
                dst[q2 * s2] += r[q2];
        }
    }
}

/* im2col of the cg channel planes at x into col [rows, osz] (row c * ksz
   + tap), or col2im (add: col added into the planes at xw).  Taps outside,
   channels inside: a tap's ranges serve every channel. */
static void strided_columns(const conv_job *j, const float *x, float *xw,
                            float *col, int add)
{
    const kiln_conv_geom *g = &j->g;
    int64_t t[3], ti = 0;
    for (t[0] = 0; t[0] < g->k[0]; t[0]++)
        for (t[1] = 0; t[1] < g->k[1]; t[1]++)
            for (t[2] = 0; t[2] < g->k[2]; t[2]++, ti++) {
                tap p = tap_of(g, t);
                for (int64_t c = 0; c < j->cg; c++) {
                    float *row = col + (c * j->ksz + ti) * j->osz;
                    if (add)
                        col2im_row(g, &p, row, xw + c * j->isz);
                    else
                        im2col_row(g, &p, x + c * j->isz, row);
                }
            }
}

/* ------------------------------------------------------------ the ops */

/* One slot's buffers. */
typedef struct slot {
    float *pad, *col, *spread, *acc;
} slot;

/* The columns of the cg planes at x, in s (x itself when direct). */
static const float *columns_of(const conv_job *j, const float *x, const slot *s)
{
    if (j->how == DIRECT)
        return x;
    if (j->how == STRIDED) {
        strided_columns(j, x, NULL, s->col, 0);
        return s->col;
    }
    rows_map m = input_map(j);
    map_rows(j, &m, s->pad, (float *)x, j->cg, 0);
    flat_columns(j, s->pad, s->col, 0);
    return s->col;
}

/* dy's og planes at dy in the product's numbering (spread when flat). */
static const float *dy_of(const conv_job *j, const float *dy, const slot *s)
{
    if (j->how != FLAT)
        return dy;
    rows_map m = output_map(j);
    map_rows(j, &m, s->spread, (float *)dy, j->og, 0);
    return s->spread;
}

/* out = op(a) op(b) + beta out, every matrix dense: on the slot's thread,
   or split over the pool when there are fewer slots than threads (a small
   batch: inference of one image). */
static void product(const conv_job *j, int ta, int tb, int64_t m, int64_t n,
                    int64_t k, const float *a, const float *b, float beta,
                    float *out)
{
    if (j->split && beta == 0.0f)
        kiln_cpu_gemm(ta, tb, m, n, k, a, b, out);
    else if (j->split)
        kiln_cpu_gemm_acc(ta, tb, m, n, k, 1.0f, a, b, out);
    else
        kiln_cpu_gemm_serial(ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n,
                             beta, out, n);
}

/* Image i, group k of each op. */
static void forward_one(const conv_job *j, int64_t i, int64_t k, const slot *s)
{
    const float *x = j->a + (i * j->g.c + k * j->cg) * j->isz;
    const float *w = j->b + k * j->og * j->rows;
    float *y = j->out + (i * j->g.o + k * j->og) * j->osz;
    if (j->how == LANES) {
        kiln_conv_lanes_image(
            &j->g, x, j->wp, j->node->n_in > 2 ? j->bias : NULL,
            j->node->at.win.flags & KILN_WINDOW_RELU, y, s->pad, j->split);
        return;
    }
    if (j->how == ROWS) {
        kiln_conv_rows_image(
            &j->g, KILN_OP_CONV, x, j->wp, j->node->n_in > 2 ? j->bias : NULL,
            j->node->at.win.flags & KILN_WINDOW_RELU, y, s->pad, j->split);
        return;
    }
    if (j->how == SINGLE) {
        kiln_conv_direct_fwd(&j->g, x, w, j->node->n_in > 2 ? j->bias : NULL,
                             j->node->at.win.flags & KILN_WINDOW_RELU, y,
                             s->pad, j->split);
        return;
    }
    const float *col = columns_of(j, x, s);
    float *dst = j->how == FLAT ? s->spread : y;
    product(j, 0, 0, j->og, j->cols, j->rows, w, col, 0.0f, dst);
    if (j->how == FLAT) {
        rows_map m = output_map(j);
        map_rows(j, &m, s->spread, y, j->og, 1);
    }
    /* while y is in cache */
    kiln_conv_finish(y, j->og, j->osz,
                     j->node->n_in > 2 ? j->bias + k * j->og : NULL,
                     j->node->at.win.flags & KILN_WINDOW_RELU);
}

static void input_grad_one(const conv_job *j, int64_t i, int64_t k,
                           const slot *s)
{
    const float *dy = dy_of(j, j->a + (i * j->g.o + k * j->og) * j->osz, s);
    const float *w = j->b + k * j->og * j->rows;
    float *dx = j->out + (i * j->g.c + k * j->cg) * j->isz;
    if (j->how == ROWS) {
        kiln_conv_rows_image(&j->g, KILN_OP_CONV_TRANSPOSE, dy, j->wp, NULL, 0,
                             dx, s->pad, j->split);
        return;
    }
    float *col = j->how == DIRECT ? dx : s->col;
    product(j, 1, 0, j->rows, j->cols, j->og, w, dy, 0.0f, col);
    if (j->how == STRIDED) {
        memset(dx, 0, (size_t)(j->cg * j->isz) * sizeof(float));
        strided_columns(j, NULL, dx, col, 1);
    } else if (j->how == FLAT) {
        memset(s->pad, 0, (size_t)j->n_pad * sizeof(float));
        flat_columns(j, s->pad, col, 1);
        rows_map m = input_map(j);
        map_rows(j, &m, s->pad, dx, j->cg, 1);
    }
}

/* first: the slot's partial sum is written, not added to; last: the
   slot's last image */
static void weight_grad_one(const conv_job *j, int64_t i, int64_t k,
                            const slot *s, int first, int last)
{
    const float *x = j->a + (i * j->g.c + k * j->cg) * j->isz;
    if (j->how == ROWS) {
        kiln_conv_rows_wgrad(&j->g, x, j->b + i * j->g.o * j->osz, s->acc,
                             first, last, s->pad, j->split);
        return;
    }
    if (j->how == SINGLE) {
        kiln_conv_direct_wgrad(&j->g, x, j->b + i * j->g.o * j->osz, s->acc,
                               first, s->pad);
        return;
    }
    const float *dy = dy_of(j, j->b + (i * j->g.o + k * j->og) * j->osz, s);
    const float *col = columns_of(j, x, s);
    product(j, 0, 1, j->og, j->rows, j->cols, dy, col, first ? 0.0f : 1.0f,
            s->acc + k * j->og * j->rows);
}

/* Slots [lo, hi): each runs its range of images, every group. */
static void run_slots(void *ctx, int64_t lo, int64_t hi)
{
    const conv_job *j = ctx;
    for (int64_t si = lo; si < hi; si++) {
        /* no scratch (NULL) when no slot needs any: no offsets from it */
        float *base =
            j->scratch ? j->scratch + j->n_shared + si * j->per_slot : NULL;
        slot s = {0};
        if (base)
            s = (slot){base, base + j->n_pad, base + j->n_pad + j->n_col,
                       base + j->n_pad + j->n_col + j->n_out};
        int64_t i0 = si * j->g.n / j->slots, i1 = (si + 1) * j->g.n / j->slots;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t k = 0; k < j->g.groups; k++) {
                if (j->node->op == KILN_OP_CONV)
                    forward_one(j, i, k, &s);
                else if (j->node->op == KILN_OP_CONV_TRANSPOSE)
                    input_grad_one(j, i, k, &s);
                else
                    weight_grad_one(j, i, k, &s, i == i0, i == i1 - 1);
            }
    }
}

/* The weights of j's direct kernels (w) packed into wp. */
static void pack(const conv_job *j, const float *w, float *wp)
{
    if (j->how == LANES)
        kiln_conv_lanes_pack(&j->g, w, wp);
    else
        kiln_conv_rows_pack(&j->g, j->node->op, w, wp);
}

/* packed: the weights packed once (kiln_cpu_prepare), or NULL: packed
   here into the scratch's shared part. */
static conv_job run(const kiln_node *n, void *out, void *const *in,
                    void *scratch, const float *packed)
{
    conv_job j = job_of(n);
    j.a = in[0];
    j.b = in[1];
    j.bias = n->n_in > 2 ? in[2] : NULL;
    j.out = out;
    j.scratch = scratch;
    j.split = j.slots < kiln_cpu_threads();
    j.wp = packed ? packed : j.scratch;
    if (j.n_shared && j.slots > 0 && !packed)
        pack(&j, j.b, j.scratch);
    int64_t per_image = j.g.o * j.rows * j.cols;
    if (j.slots > 0)
        kiln_par_for(j.slots, per_image * (j.g.n / j.slots), run_slots, &j);
    return j;
}

int64_t kiln_fast_conv_packed_floats(const kiln_node *n)
{
    conv_job j = job_of(n);
    return n->op == KILN_OP_CONV ? j.n_shared : 0;
}

void kiln_fast_conv_pack(const kiln_node *n, const float *w, float *packed)
{
    conv_job j = job_of(n);
    pack(&j, w, packed);
}

void kiln_fast_conv_packed(const kiln_node *n, void *out, void *const *in,
                           void *scratch, const float *packed)
{
    run(n, out, in, scratch, packed);
}

void kiln_fast_CONV(const kiln_node *n, void *out, void *const *in,
                    void *scratch)
{
    run(n, out, in, scratch, NULL);
}

void kiln_fast_CONV_TRANSPOSE(const kiln_node *n, void *out, void *const *in,
                              void *scratch)
{
    run(n, out, in, scratch, NULL);
}

/* The slots' partial sums added in slot order (none: a zero batch). */
void kiln_fast_CONV_WGRAD(const kiln_node *n, void *out, void *const *in,
                          void *scratch)
{
    conv_job j = run(n, out, in, scratch, NULL);
    float *o = out;
    memset(o, 0, (size_t)j.n_acc * sizeof(float));
    for (int64_t s = 0; j.n_acc && s < j.slots; s++) {
        const float *acc =
            j.scratch + j.n_shared + (s + 1) * j.per_slot - j.n_acc;
        for (int64_t e = 0; e < j.n_acc; e++)
            o[e] += acc[e];
    }
}
