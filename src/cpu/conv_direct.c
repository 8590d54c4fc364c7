/* Direct AVX-512 convolutions of one input channel (a network's first
   layer: MNIST's 1->32 5x5).  Its columns have one row per tap, so the
   product y = w col has K = taps (25): too short for a GEMM to reach its
   speed, while the columns cost as much to build as the product.  Here
   the image is copied once into a zero-padded plane and each output row is
   computed straight from it: 8 output channels times 32 positions in 16
   vector registers, each tap one load of the row shifted by the tap and
   one broadcast weight per channel.  The weight gradient likewise: 4
   channels times 4 taps in 16 registers, each position's dy read once per
   block of taps.  2-D, one channel per group, unit stride and dilation;
   the fast kernels take the columns otherwise (and on processors without
   AVX-512). */
#include <string.h>

#include "cpu/conv.h"
#include "cpu/conv_simd.h"
#include "cpu/pool.h"

#ifdef KILN_CONV_AVX512
#define DIRECT_AVX512 1
enum { VEC = KILN_CONV_VEC, SPAN = 2 * VEC, CH = KILN_CONV_CH };
#else
enum { VEC = 16, SPAN = 2 * VEC, CH = 8 };
#endif

int kiln_conv_direct_ok(const kiln_conv_geom *g)
{
#ifdef DIRECT_AVX512
    int unit = 1;
    for (int d = 0; d < 3; d++)
        unit &= g->stride[d] == 1 && g->dil[d] == 1;
    /* a row at least half a vector wide, else the vectors mostly idle */
    return unit && g->c == g->groups && g->groups == 1 && g->k[2] == 1 &&
           g->in[2] == 1 && g->out[1] >= VEC / 2 &&
           __builtin_cpu_supports("avx512f");
#else
    (void)g;
    return 0;
#endif
}

/* The padded plane: the output rows rounded up to SPAN wide, plus the
   taps' reach on both dims. */
static int64_t plane_width(const kiln_conv_geom *g)
{
    return (g->out[1] + SPAN - 1) / SPAN * SPAN + g->k[1] - 1;
}

static int64_t plane_rows(const kiln_conv_geom *g)
{
    return g->out[0] + g->k[0] - 1;
}

int64_t kiln_conv_direct_floats(const kiln_conv_geom *g)
{
    int64_t ksz = g->k[0] * g->k[1];
    return plane_rows(g) * plane_width(g) + (g->o + CH - 1) / CH * CH * ksz;
}

/* x's plane [in0, in1] into the zeroed padded plane p. */
static void pad_plane(const kiln_conv_geom *g, const float *x, float *p)
{
    int64_t pw = plane_width(g);
    memset(p, 0, (size_t)(plane_rows(g) * pw) * sizeof(float));
    for (int64_t r = 0; r < g->in[0]; r++)
        memcpy(p + (r + g->pad[0]) * pw + g->pad[1], x + r * g->in[1],
               (size_t)g->in[1] * sizeof(float));
}

#ifdef DIRECT_AVX512
typedef struct fwd_block {
    const float *p, *wp, *bias; /* wp: [taps][CH] of this channel block */
    float *y;                   /* the block's first channel */
    int64_t pw, osz, nch;       /* osz: floats per output plane */
    int relu;
} fwd_block;

/* Outputs [x0, x0 + SPAN) of row r of the block's channels. */
__attribute__((target("avx512f"))) static void
fwd_span(const kiln_conv_geom *g, const fwd_block *k, int64_t r, int64_t x0)
{
    KILN_CONV_DECL8;
    const float *wp = k->wp;
    for (int64_t a = 0; a < g->k[0]; a++) {
        const float *src = k->p + (r + a) * k->pw + x0;
        for (int64_t b = 0; b < g->k[1]; b++, wp += CH) {
            __m512 v0 = _mm512_loadu_ps(src + b),
                   v1 = _mm512_loadu_ps(src + b + VEC);
            KILN_CONV_FMA8;
        }
    }
    __m512 out[CH][2];
    KILN_CONV_OUT8(out);
    int64_t at = r * g->out[1] + x0;
    kiln_conv_store st = {
        k->y,
        k->bias,
        k->osz,
        k->nch,
        {at, at + VEC},
        {kiln_conv_lanes(x0, g->out[1]), kiln_conv_lanes(x0 + VEC, g->out[1])},
        k->relu};
    kiln_conv_store_block(&st, out);
}

/* weight gradient: channel c's sums of taps 0 to 3 */
#define W_DECL(c) KILN_CONV_ZERO4(s##c)
#define W_FMA(c)                                                               \
    do {                                                                       \
        __m512 u = _mm512_maskz_loadu_ps(m, d[c] + at);                        \
        s##c##0 = _mm512_fmadd_ps(u, v0, s##c##0);                             \
        s##c##1 = _mm512_fmadd_ps(u, v1, s##c##1);                             \
        s##c##2 = _mm512_fmadd_ps(u, v2, s##c##2);                             \
        s##c##3 = _mm512_fmadd_ps(u, v3, s##c##3);                             \
    } while (0)
#define W_SUM(c)                                                               \
    sum[c][0] = _mm512_reduce_add_ps(s##c##0),                                 \
    sum[c][1] = _mm512_reduce_add_ps(s##c##1),                                 \
    sum[c][2] = _mm512_reduce_add_ps(s##c##2),                                 \
    sum[c][3] = _mm512_reduce_add_ps(s##c##3)

/* dw[4 channels][4 taps] of one block: dy's lanes outside the rows are
   read as zeros, the plane's there hold real values.  Channels and taps
   past the ends repeat the last (their sums are dropped). */
__attribute__((target("avx512f"))) static void
wgrad_block(const kiln_conv_geom *g, const float *p, int64_t pw,
            const float *dy, int64_t o0, int64_t t0, float *acc, int first)
{
    enum { BC = 4, BT = 4 };
    int64_t ksz = g->k[0] * g->k[1], osz = g->out[0] * g->out[1];
    int64_t w = g->out[1];
    const float *d[BC];
    int64_t off[BT];
    for (int c = 0; c < BC; c++)
        d[c] = dy + (o0 + c < g->o ? o0 + c : g->o - 1) * osz;
    for (int t = 0; t < BT; t++) {
        int64_t tt = t0 + t < ksz ? t0 + t : ksz - 1;
        off[t] = tt / g->k[1] * pw + tt % g->k[1];
    }
    W_DECL(0);
    W_DECL(1);
    W_DECL(2);
    W_DECL(3);
    for (int64_t r = 0; r < g->out[0]; r++)
        for (int64_t x0 = 0; x0 < w; x0 += VEC) {
            __mmask16 m = kiln_conv_lanes(x0, w);
            const float *src = p + r * pw + x0;
            int64_t at = r * w + x0;
            __m512 v0 = _mm512_loadu_ps(src + off[0]),
                   v1 = _mm512_loadu_ps(src + off[1]),
                   v2 = _mm512_loadu_ps(src + off[2]),
                   v3 = _mm512_loadu_ps(src + off[3]);
            W_FMA(0);
            W_FMA(1);
            W_FMA(2);
            W_FMA(3);
        }
    float sum[BC][BT];
    W_SUM(0);
    W_SUM(1);
    W_SUM(2);
    W_SUM(3);
    for (int c = 0; c < BC && o0 + c < g->o; c++)
        for (int t = 0; t < BT && t0 + t < ksz; t++) {
            float *a = acc + (o0 + c) * ksz + t0 + t;
            *a = first ? sum[c][t] : *a + sum[c][t];
        }
}
#endif

#ifdef DIRECT_AVX512
/* One image's forward, its blocks of CH channels split over the pool when
   the batch is too small to give every thread images. */
typedef struct fwd_job {
    const kiln_conv_geom *g;
    const float *p, *wp, *bias;
    float *y;
    int relu;
} fwd_job;

static void fwd_blocks(void *ctx, int64_t lo, int64_t hi)
{
    const fwd_job *j = ctx;
    const kiln_conv_geom *g = j->g;
    int64_t ksz = g->k[0] * g->k[1], osz = g->out[0] * g->out[1];
    for (int64_t o0 = lo * CH; o0 < hi * CH && o0 < g->o; o0 += CH) {
        fwd_block k = {.p = j->p,
                       .wp = j->wp + o0 * ksz,
                       .bias = j->bias ? j->bias + o0 : NULL,
                       .y = j->y + o0 * osz,
                       .pw = plane_width(g),
                       .osz = osz,
                       .nch = g->o - o0 < CH ? g->o - o0 : CH,
                       .relu = j->relu};
        for (int64_t r = 0; r < g->out[0]; r++)
            for (int64_t x0 = 0; x0 < g->out[1]; x0 += SPAN)
                fwd_span(g, &k, r, x0);
    }
}
#endif

void kiln_conv_direct_fwd(const kiln_conv_geom *g, const float *x,
                          const float *w, const float *bias, int relu, float *y,
                          float *scratch, int split)
{
#ifdef DIRECT_AVX512
    int64_t ksz = g->k[0] * g->k[1], pw = plane_width(g);
    float *p = scratch, *wp = scratch + plane_rows(g) * pw;
    pad_plane(g, x, p);
    /* w [o][taps] as [block][taps][CH], zeros past the last channel */
    for (int64_t o = 0; o < (g->o + CH - 1) / CH * CH; o++)
        for (int64_t t = 0; t < ksz; t++)
            wp[(o / CH * ksz + t) * CH + o % CH] =
                o < g->o ? w[o * ksz + t] : 0;
    fwd_job j = {g, p, wp, bias, y, relu};
    int64_t blocks = (g->o + CH - 1) / CH;
    if (split)
        kiln_par_for(blocks, CH * g->out[0] * g->out[1] * ksz, fwd_blocks, &j);
    else
        fwd_blocks(&j, 0, blocks);
#else /* not called: kiln_conv_direct_ok is 0 */
    (void)g, (void)x, (void)w, (void)bias, (void)relu, (void)y, (void)scratch,
        (void)split;
#endif
}

void kiln_conv_direct_wgrad(const kiln_conv_geom *g, const float *x,
                            const float *dy, float *acc, int first,
                            float *scratch)
{
#ifdef DIRECT_AVX512
    int64_t ksz = g->k[0] * g->k[1], pw = plane_width(g);
    pad_plane(g, x, scratch);
    for (int64_t o0 = 0; o0 < g->o; o0 += 4)
        for (int64_t t0 = 0; t0 < ksz; t0 += 4)
            wgrad_block(g, scratch, pw, dy, o0, t0, acc, first);
#else /* not called: kiln_conv_direct_ok is 0 */
    (void)g, (void)x, (void)dy, (void)acc, (void)first, (void)scratch;
#endif
}
