/* Direct AVX-512 convolution with the output channels in the vector lanes:
   the forward of a 2-D convolution at small batch (the MNIST CNN's 32->64
   5x5 on 14x14 at batch 1).  cpu/conv_rows.c puts output positions in the
   lanes, so a 14-wide row fills 14 of 16 and an eighth of its products
   are padding; here the lanes are 16 output channels, which a network's
   widths fill.

   A tile is 32 output channels (2 vectors) times P = 14 consecutive
   positions of an output row, 28 sums in registers; each (input channel,
   tap) step loads the block's 32 weights (packed once per call as
   [block][channel, tap][32]) and broadcasts the 14 input values the tap
   reads (one row of the zero-padded input copy, so the 14 addresses are
   one pointer plus constants: the stride along rows must be 1, the
   stride down and the dilations are free).  The sums are [position]
   [channel]; a 16x16 transpose in registers turns each vector's into
   [channel][position], stored as 14 contiguous outputs of a channel's
   row, bias and relu fused.  Rows wider than P take several tiles, the
   last computing past the row's end (the padded copy is wide enough)
   and storing only what lies inside. */
#include "cpu/conv.h"
#include "cpu/conv_simd.h"
#include "cpu/pool.h"
#include "cpu/transpose16.h"

#ifdef KILN_CONV_AVX512
#define LANES_AVX512 1
#endif

/* lanes per vector, output channels per tile, positions per tile */
enum { VEC = 16, BLK = 2 * VEC, P = 14 };

typedef struct lanes_geom {
    int64_t c, o, nblk, k0, k1, ksz, steps; /* steps: c * ksz */
    int64_t s0, d0, d1;                     /* stride down, dilations */
    int64_t in0, in1, at0, at1;             /* input, placed at (at0, at1) */
    int64_t out0, out1, osz, segs;          /* segs: tiles per output row */
    int64_t pw, ph, plane;                  /* the padded copy */
} lanes_geom;

static lanes_geom lanes_geom_of(const kiln_conv_geom *g)
{
    lanes_geom r = {.c = g->c, .o = g->o, .k0 = g->k[0], .k1 = g->k[1]};
    r.nblk = (r.o + BLK - 1) / BLK;
    r.ksz = r.k0 * r.k1;
    r.steps = r.c * r.ksz;
    r.s0 = g->stride[0];
    r.d0 = g->dil[0];
    r.d1 = g->dil[1];
    r.in0 = g->in[0];
    r.in1 = g->in[1];
    r.at0 = g->pad[0];
    r.at1 = g->pad[1];
    r.out0 = g->out[0];
    r.out1 = g->out[1];
    r.osz = r.out0 * r.out1;
    r.segs = (r.out1 + P - 1) / P;
    r.pw = r.segs * P + (r.k1 - 1) * r.d1;
    r.ph = r.out0 ? (r.out0 - 1) * r.s0 + (r.k0 - 1) * r.d0 + 1 : 0;
    r.plane = r.pw * r.ph;
    return r;
}

int kiln_conv_lanes_ok(const kiln_conv_geom *g)
{
#ifdef LANES_AVX512
    /* 16 or more output channels, else most lanes idle; rows of 8 or
       more, else most of a tile's positions are past the row */
    if (g->groups != 1 || g->k[2] != 1 || g->in[2] != 1 || g->o < VEC ||
        g->out[1] < 8 || g->stride[1] != 1 || g->pad[0] < 0 || g->pad[1] < 0)
        return 0;
    return __builtin_cpu_supports("avx512f") != 0;
#else
    (void)g;
    return 0;
#endif
}

int64_t kiln_conv_lanes_shared_floats(const kiln_conv_geom *g)
{
    lanes_geom r = lanes_geom_of(g);
    return r.nblk * BLK * r.steps;
}

int64_t kiln_conv_lanes_floats(const kiln_conv_geom *g)
{
    lanes_geom r = lanes_geom_of(g);
    return r.c * r.plane;
}

/* The channel planes at x into the zeroed padded copy p (the input's rows
   and columns past the copy's reach are never read). */
static void pad_input(const lanes_geom *r, const float *x, float *p)
{
    kiln_conv_pad d = {r->c, r->in0, r->in1, r->ph, r->pw, r->at0, r->at1};
    kiln_conv_pad_planes(&d, x, p);
}

/* wp [block][step][32] from w [o][step], zeros past o: 16x16 transposes. */
#ifdef LANES_AVX512
__attribute__((target("avx512f")))
#endif
void kiln_conv_lanes_pack(const kiln_conv_geom *g, const float *w, float *wp)
{
#ifdef LANES_AVX512
    lanes_geom r = lanes_geom_of(g);
    for (int64_t ch = 0; ch < r.nblk * BLK; ch += VEC)
        for (int64_t s = 0; s < r.steps; s += VEC) {
            __mmask16 m = kiln_conv_lanes(s, r.steps);
            __m512 v[16];
            for (int i = 0; i < 16; i++)
                v[i] =
                    ch + i < r.o
                        ? _mm512_maskz_loadu_ps(m, w + (ch + i) * r.steps + s)
                        : _mm512_setzero_ps();
            kiln_transpose16(v);
            float *dst = wp + (ch / BLK * r.steps + s) * BLK + ch % BLK;
            for (int i = 0; i < 16 && s + i < r.steps; i++)
                _mm512_storeu_ps(dst + i * BLK, v[i]);
        }
#else
    (void)g, (void)w, (void)wp;
#endif
}

#ifdef LANES_AVX512
/* The tile's sums live in named variables a<position><vector> (GCC keeps
   an array of vectors in memory when a loop indexes it); L_FMA(i) adds
   the input value at s[i] times the step's weights w0, w1. */
#define L_DECL(i)                                                              \
    __m512 a##i##0 = _mm512_setzero_ps(), a##i##1 = _mm512_setzero_ps()
#define L_FMA(i)                                                               \
    do {                                                                       \
        __m512 u = _mm512_set1_ps(s[i]);                                       \
        a##i##0 = _mm512_fmadd_ps(u, w0, a##i##0);                             \
        a##i##1 = _mm512_fmadd_ps(u, w1, a##i##1);                             \
    } while (0)
#define L_OUT(i) t[0][i] = a##i##0, t[1][i] = a##i##1
#define L_EACH(M)                                                              \
    M(0);                                                                      \
    M(1);                                                                      \
    M(2);                                                                      \
    M(3);                                                                      \
    M(4);                                                                      \
    M(5);                                                                      \
    M(6);                                                                      \
    M(7);                                                                      \
    M(8);                                                                      \
    M(9);                                                                      \
    M(10);                                                                     \
    M(11);                                                                     \
    M(12);                                                                     \
    M(13)

/* One image's operands. */
typedef struct lanes_job {
    lanes_geom r;
    const float *p, *wp, *bias;
    float *y;
    int relu;
} lanes_job;

/* The tile's sums t[vector][position] as [channel][position], plus bias,
   relu, stored at y[channel] + at over lanes m. */
__attribute__((target("avx512f"))) static void
store_tile(const lanes_job *j, __m512 t[2][16], int64_t blk, int64_t at,
           __mmask16 m)
{
    for (int v = 0; v < 2; v++) {
        t[v][14] = t[v][15] = _mm512_setzero_ps();
        kiln_transpose16(t[v]);
        for (int i = 0; i < VEC; i++) {
            int64_t ch = blk * BLK + v * VEC + i;
            if (ch >= j->r.o)
                return;
            __m512 u = t[v][i];
            if (j->bias)
                u = _mm512_add_ps(u, _mm512_set1_ps(j->bias[ch]));
            if (j->relu)
                u = kiln_conv_relu(u);
            _mm512_mask_storeu_ps(j->y + ch * j->r.osz + at, m, u);
        }
    }
}

/* Channel block blk at output row y, positions [x0, x0 + P). */
__attribute__((target("avx512f"))) static void
lanes_tile(const lanes_job *j, int64_t blk, int64_t y, int64_t x0)
{
    const lanes_geom *r = &j->r;
    const float *base = j->p + y * r->s0 * r->pw + x0;
    const float *wp = j->wp + blk * r->steps * BLK;
    L_EACH(L_DECL);
    for (int64_t c = 0; c < r->c; c++)
        for (int64_t a = 0; a < r->k0; a++) {
            const float *row = base + c * r->plane + a * r->d0 * r->pw;
            for (int64_t b = 0; b < r->k1; b++, wp += BLK) {
                const float *s = row + b * r->d1;
                __m512 w0 = _mm512_loadu_ps(wp), w1 = _mm512_loadu_ps(wp + VEC);
                L_EACH(L_FMA);
            }
        }
    __m512 t[2][16];
    L_EACH(L_OUT);
    int64_t end = x0 + P < r->out1 ? x0 + P : r->out1;
    store_tile(j, t, blk, y * r->out1 + x0, kiln_conv_lanes(x0, end));
}
#endif

/* Tiles [lo, hi), numbered (block, output row, segment). */
static void lanes_tiles(void *ctx, int64_t lo, int64_t hi)
{
#ifdef LANES_AVX512
    const lanes_job *j = ctx;
    const lanes_geom *r = &j->r;
    for (int64_t t = lo; t < hi; t++) {
        int64_t seg = t % r->segs, y = t / r->segs % r->out0,
                blk = t / (r->segs * r->out0);
        lanes_tile(j, blk, y, seg * P);
    }
#else
    (void)ctx, (void)lo, (void)hi;
#endif
}

void kiln_conv_lanes_image(const kiln_conv_geom *g, const float *x,
                           const float *wp, const float *bias, int relu,
                           float *y, float *scratch, int split)
{
    lanes_job j = {.r = lanes_geom_of(g),
                   .p = scratch,
                   .wp = wp,
                   .bias = bias,
                   .y = y,
                   .relu = relu};
    pad_input(&j.r, x, scratch);
    int64_t tiles = j.r.nblk * j.r.out0 * j.r.segs;
    if (split)
        kiln_par_for(tiles, BLK * P * j.r.steps, lanes_tiles, &j);
    else
        lanes_tiles(&j, 0, tiles);
}
