/* Direct AVX-512 convolutions of many channels: 2-D, one group, unit
   stride and dilation, padding under the kernel's size (the residual
   block's 64->64 3x3 on 32x32).  Through columns and a GEMM these ran at
   under half the FMA peak: the columns are nine copies of the input
   written and read again, and the product's K (576) is split into panels
   that reload the output.  Here the input planes are copied once into
   zero-padded planes and every output vector is summed in a register.

   Forward: 8 output channels times 2 vectors of 16 positions (a row of
   32, or two rows of 16 or fewer: the vectors of all rows are taken in
   pairs) in 16 registers; each (input channel, tap) step loads the two
   vectors shifted by the tap and broadcasts one weight per channel.
   Input gradient: the same kernel on the padded output gradient, with the
   weights' taps flipped and their two channel dims swapped (a stride-1
   conv_transpose is the convolution of dy padded by k - 1 - pad).
   Weight gradient: the lanes are output channels, so nothing needs a
   horizontal sum: dy is transposed to [position][channel] and 64 output
   channels (4 vectors) times 6 rows (input channel, tap) are summed over
   an image's positions in 24 registers, each position one broadcast of
   the padded input per row; the sums stay [row][channel] per slot until
   its last image, then go back to [channel][row]. */

#include "cpu/conv.h"
#include "cpu/conv_simd.h"
#include "cpu/pool.h"

#ifdef KILN_CONV_AVX512
#define ROWS_AVX512 1
#endif

/* CH channels per forward block, WV vectors of output channels times WR
   rows per weight-gradient block */
enum { VEC = 16, CH = 8, WV = 4, WO = WV * VEC, WR = 6 };

/* The convolution as the kernels see it: src planes [in0, in1] read,
   placed at (at0, at1) of padded planes [prow, pw]; dst planes [out0,
   out1] written (the weight gradient: dy's planes). */
typedef struct rows_geom {
    int64_t src, dst, k0, k1, ksz;
    int64_t out0, out1, in0, in1, at0, at1;
    int64_t pw, prow, plane;
    int64_t nv, nblk; /* output vectors of a plane, forward blocks */
} rows_geom;

static rows_geom rows_geom_of(const kiln_conv_geom *g, kiln_op op)
{
    rows_geom r = {.src = g->c, .dst = g->o, .k0 = g->k[0], .k1 = g->k[1]};
    r.ksz = r.k0 * r.k1;
    const int64_t *out = g->out, *in = g->in;
    r.at0 = g->pad[0];
    r.at1 = g->pad[1];
    if (op == KILN_OP_CONV_TRANSPOSE) {
        r.src = g->o;
        r.dst = g->c;
        out = g->in;
        in = g->out;
        r.at0 = r.k0 - 1 - g->pad[0];
        r.at1 = r.k1 - 1 - g->pad[1];
    }
    r.out0 = out[0];
    r.out1 = out[1];
    r.in0 = in[0];
    r.in1 = in[1];
    int64_t vpr = (r.out1 + VEC - 1) / VEC;
    r.nv = r.out0 * vpr;
    r.pw = vpr * VEC + r.k1 - 1;
    r.prow = r.out0 + r.k0 - 1;
    r.plane = r.pw * r.prow;
    r.nblk = (r.dst + CH - 1) / CH;
    return r;
}

int kiln_conv_rows_ok(const kiln_conv_geom *g)
{
#ifdef ROWS_AVX512
    if (g->groups != 1 || g->k[2] != 1 || g->in[2] != 1 || g->c < 8 ||
        g->o < 8 || g->in[1] < 8 || g->out[1] < 8)
        return 0;
    for (int d = 0; d < 2; d++) {
        int64_t after = g->out[d] + g->k[d] - 1 - g->in[d] - g->pad[d];
        if (g->stride[d] != 1 || g->dil[d] != 1 || g->pad[d] < 0 ||
            g->pad[d] >= g->k[d] || after < 0 || after >= g->k[d])
            return 0;
    }
    return __builtin_cpu_supports("avx512f") != 0;
#else
    (void)g;
    return 0;
#endif
}

/* Output channels rounded up to the weight gradient's vectors. */
static int64_t wgrad_width(const kiln_conv_geom *g)
{
    return (g->o + WO - 1) / WO * WO;
}

int64_t kiln_conv_rows_shared_floats(const kiln_conv_geom *g, kiln_op op)
{
    rows_geom r = rows_geom_of(g, op);
    return op == KILN_OP_CONV_WGRAD ? 0 : r.nblk * CH * r.src * r.ksz;
}

int64_t kiln_conv_rows_floats(const kiln_conv_geom *g, kiln_op op)
{
    rows_geom r = rows_geom_of(g, op);
    int64_t n = r.src * r.plane;
    if (op == KILN_OP_CONV_WGRAD)
        n += (r.out0 * r.out1 + r.src * r.ksz) * wgrad_width(g);
    return n;
}

void kiln_conv_rows_pack(const kiln_conv_geom *g, kiln_op op, const float *w,
                         float *wp)
{
    rows_geom r = rows_geom_of(g, op);
    int flip = op == KILN_OP_CONV_TRANSPOSE;
    for (int64_t d = 0; d < r.nblk * CH; d++)
        for (int64_t s = 0; s < r.src; s++)
            for (int64_t t = 0; t < r.ksz; t++) {
                float v = 0;
                if (d < r.dst)
                    v = flip ? w[(s * g->c + d) * r.ksz + r.ksz - 1 - t]
                             : w[(d * g->c + s) * r.ksz + t];
                wp[((d / CH * r.src + s) * r.ksz + t) * CH + d % CH] = v;
            }
}

/* The src planes at x into the padded planes p, zero around them. */
static void pad_planes(const rows_geom *r, const float *x, float *p)
{
    kiln_conv_pad d = {r->src, r->in0, r->in1, r->prow, r->pw, r->at0, r->at1};
    kiln_conv_pad_planes(&d, x, p);
}

#ifdef ROWS_AVX512
/* One forward block's operands. */
typedef struct fwd_block {
    const rows_geom *r;
    const float *p, *wp, *bias; /* wp: [src][taps][CH] of the block */
    float *y;                   /* the block's first plane */
    int64_t nch;
    int relu;
} fwd_block;

/* Output vector v of a plane: its offset in the padded numbering, where
   it is stored and which of its lanes are inside the row. */
typedef struct out_vec {
    int64_t at, dst;
    __mmask16 m;
} out_vec;

static out_vec out_vec_of(const rows_geom *r, int64_t v)
{
    int64_t vpr = (r->out1 + VEC - 1) / VEC, row = v / vpr;
    int64_t x0 = v % vpr * VEC;
    return (out_vec){row * r->pw + x0, row * r->out1 + x0,
                     v < r->nv ? kiln_conv_lanes(x0, r->out1) : 0};
}

/* The block's CH channels at output vectors v and v + 1 (past the last:
   computed at v, not stored). */
__attribute__((target("avx512f"))) static void fwd_pair(const fwd_block *k,
                                                        int64_t v)
{
    const rows_geom *r = k->r;
    out_vec o0 = out_vec_of(r, v), o1 = out_vec_of(r, v + 1);
    int64_t at1 = v + 1 < r->nv ? o1.at : o0.at;
    KILN_CONV_DECL8;
    const float *wp = k->wp;
    for (int64_t c = 0; c < r->src; c++)
        for (int64_t a = 0; a < r->k0; a++) {
            const float *s = k->p + c * r->plane + a * r->pw;
            for (int64_t b = 0; b < r->k1; b++, wp += CH) {
                __m512 v0 = _mm512_loadu_ps(s + o0.at + b),
                       v1 = _mm512_loadu_ps(s + at1 + b);
                KILN_CONV_FMA8;
            }
        }
    __m512 out[CH][2];
    KILN_CONV_OUT8(out);
    kiln_conv_store st = {k->y,   k->bias,          r->out0 * r->out1,
                          k->nch, {o0.dst, o1.dst}, {o0.m, o1.m},
                          k->relu};
    kiln_conv_store_block(&st, out);
}

/* weight gradient: rows i's sums of output channel vectors 0 to 3 */
#define W_DECL(i) KILN_CONV_ZERO4(s##i)
#define W_FMA(i)                                                               \
    do {                                                                       \
        __m512 u = _mm512_set1_ps(src[off[i]]);                                \
        s##i##0 = _mm512_fmadd_ps(u, d0, s##i##0);                             \
        s##i##1 = _mm512_fmadd_ps(u, d1, s##i##1);                             \
        s##i##2 = _mm512_fmadd_ps(u, d2, s##i##2);                             \
        s##i##3 = _mm512_fmadd_ps(u, d3, s##i##3);                             \
    } while (0)
#define W_OUT(i)                                                               \
    sum[i][0] = s##i##0, sum[i][1] = s##i##1, sum[i][2] = s##i##2,             \
    sum[i][3] = s##i##3

/* One weight-gradient block's operands: rows [t0, t0 + WR) of the sums
   acct [rows][width], channels [o0, o0 + WO). */
typedef struct wgrad_block {
    const rows_geom *r;
    const float *p, *dyt; /* padded input, dy as [position][width] */
    float *acct;
    int64_t width, t0, o0;
    int first;
} wgrad_block;

/* Rows past the last repeat it (their sums are dropped). */
__attribute__((target("avx512f"))) static void wgrad_rows(const wgrad_block *k)
{
    const rows_geom *r = k->r;
    int64_t rows = r->src * r->ksz, off[WR];
    for (int i = 0; i < WR; i++) {
        int64_t t = k->t0 + i < rows ? k->t0 + i : rows - 1, tap = t % r->ksz;
        off[i] = t / r->ksz * r->plane + tap / r->k1 * r->pw + tap % r->k1;
    }
    W_DECL(0);
    W_DECL(1);
    W_DECL(2);
    W_DECL(3);
    W_DECL(4);
    W_DECL(5);
    for (int64_t y = 0; y < r->out0; y++) {
        const float *src = k->p + y * r->pw;
        const float *d = k->dyt + y * r->out1 * k->width + k->o0;
        for (int64_t x = 0; x < r->out1; x++, src++, d += k->width) {
            __m512 d0 = _mm512_loadu_ps(d), d1 = _mm512_loadu_ps(d + VEC),
                   d2 = _mm512_loadu_ps(d + 2 * VEC),
                   d3 = _mm512_loadu_ps(d + 3 * VEC);
            W_FMA(0);
            W_FMA(1);
            W_FMA(2);
            W_FMA(3);
            W_FMA(4);
            W_FMA(5);
        }
    }
    __m512 sum[WR][WV];
    W_OUT(0);
    W_OUT(1);
    W_OUT(2);
    W_OUT(3);
    W_OUT(4);
    W_OUT(5);
    for (int i = 0; i < WR && k->t0 + i < rows; i++)
        for (int v = 0; v < WV; v++) {
            float *a = k->acct + (k->t0 + i) * k->width + k->o0 + v * VEC;
            _mm512_storeu_ps(
                a, k->first ? sum[i][v]
                            : _mm512_add_ps(_mm512_loadu_ps(a), sum[i][v]));
        }
}
#endif

/* ------------------------------------------------------------ drivers */

/* One image's work, split over blocks (forward: output channel blocks;
   weight gradient: (channel vector block, row block) pairs). */
typedef struct image_job {
    const kiln_conv_geom *g;
    rows_geom r;
    const float *p, *wp, *bias, *dyt;
    float *out;
    int relu, first;
    int64_t width, row_blocks;
} image_job;

static void fwd_blocks(void *ctx, int64_t lo, int64_t hi)
{
#ifdef ROWS_AVX512
    const image_job *j = ctx;
    const rows_geom *r = &j->r;
    for (int64_t b = lo; b < hi; b++) {
        fwd_block k = {.r = r,
                       .p = j->p,
                       .wp = j->wp + b * CH * r->src * r->ksz,
                       .bias = j->bias ? j->bias + b * CH : NULL,
                       .y = j->out + b * CH * r->out0 * r->out1,
                       .nch = r->dst - b * CH < CH ? r->dst - b * CH : CH,
                       .relu = j->relu};
        for (int64_t v = 0; v < r->nv; v += 2)
            fwd_pair(&k, v);
    }
#else
    (void)ctx, (void)lo, (void)hi;
#endif
}

static void wgrad_blocks(void *ctx, int64_t lo, int64_t hi)
{
#ifdef ROWS_AVX512
    const image_job *j = ctx;
    for (int64_t b = lo; b < hi; b++) {
        wgrad_block k = {.r = &j->r,
                         .p = j->p,
                         .dyt = j->dyt,
                         .acct = j->out,
                         .width = j->width,
                         .t0 = b % j->row_blocks * WR,
                         .o0 = b / j->row_blocks * WO,
                         .first = j->first};
        wgrad_rows(&k);
    }
#else
    (void)ctx, (void)lo, (void)hi;
#endif
}

/* Work per block, for kiln_par_for. */
static int64_t block_cost(const rows_geom *r, int64_t lanes)
{
    return r->out0 * r->out1 * lanes;
}

void kiln_conv_rows_image(const kiln_conv_geom *g, kiln_op op, const float *a,
                          const float *wp, const float *bias, int relu,
                          float *out, float *scratch, int split)
{
    image_job j = {.g = g,
                   .r = rows_geom_of(g, op),
                   .p = scratch,
                   .wp = wp,
                   .bias = bias,
                   .out = out,
                   .relu = relu};
    pad_planes(&j.r, a, scratch);
    if (split)
        kiln_par_for(j.r.nblk, block_cost(&j.r, CH * j.r.src * j.r.ksz),
                     fwd_blocks, &j);
    else
        fwd_blocks(&j, 0, j.r.nblk);
}

/* dy [o][positions] as dyt [positions][width], zeros past o. */
static void transpose_dy(const kiln_conv_geom *g, const float *dy, float *dyt,
                         int64_t width)
{
    int64_t osz = g->out[0] * g->out[1];
    for (int64_t q0 = 0; q0 < osz; q0 += VEC) {
        int64_t q1 = q0 + VEC < osz ? q0 + VEC : osz;
        for (int64_t o = 0; o < width; o++)
            for (int64_t q = q0; q < q1; q++)
                dyt[q * width + o] = o < g->o ? dy[o * osz + q] : 0;
    }
}

void kiln_conv_rows_wgrad(const kiln_conv_geom *g, const float *x,
                          const float *dy, float *acc, int first, int last,
                          float *scratch, int split)
{
    image_job j = {.g = g, .r = rows_geom_of(g, KILN_OP_CONV_WGRAD)};
    int64_t rows = j.r.src * j.r.ksz;
    j.width = wgrad_width(g);
    j.row_blocks = (rows + WR - 1) / WR;
    j.p = scratch;
    j.dyt = scratch + j.r.src * j.r.plane;
    j.out = scratch + j.r.src * j.r.plane + j.r.out0 * j.r.out1 * j.width;
    j.first = first;
    pad_planes(&j.r, x, scratch);
    transpose_dy(g, dy, (float *)j.dyt, j.width);
    int64_t n = j.width / WO * j.row_blocks;
    if (split)
        kiln_par_for(n, block_cost(&j.r, WO * WR), wgrad_blocks, &j);
    else
        wgrad_blocks(&j, 0, n);
    if (!last)
        return;
    /* acct [row][width] back to acc [o][row] */
    for (int64_t o = 0; o < g->o; o++)
        for (int64_t t = 0; t < rows; t++)
            acc[o * rows + t] = j.out[t * j.width + o];
}
