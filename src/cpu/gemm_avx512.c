/* Kiln's own AVX-512 single-precision matrix product, in the Goto / BLIS
   structure: op(b) is copied a block of KC rows times NC columns at a
   time into panels of NR columns ([p][NR] each, zero-padded), op(a) a
   block of MC rows at a time into panels of MR rows ([p][MR]), and a
   register-blocked kernel sums an MR x NR tile of out over the block's
   KC in 2*MR zmm registers: per step two vectors of b and one broadcast
   of a per row.  The copies take the transposes, so one kernel serves
   all four ta/tb; edge tiles are zero-padded in the panels and written
   with masked stores; a last panel of at most 16 columns runs a kernel of
   one vector per row (the CNN's 196 and 784 columns of pixels).  The B
   panel a kernel walks (KC x NR floats) stays
   in L1 while the A block (MC x KC) streams from L2.

   OpenBLAS as packaged here runs its Haswell (AVX2) kernels on this
   AVX-512 CPU (OPENBLAS_CORETYPE=Haswell); this kernel doubles the width. */
#include <pthread.h>
#include <stdlib.h>

#include "cpu/gemm_avx512.h"
#include "cpu/transpose16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_AVX512 1
#endif

#ifdef GEMM_AVX512

/* MR rows x NR columns per kernel tile; KC, MC, NC the block sizes */
enum {
    VEC = 16,
    MR = 12,
    NR = KILN_GEMM_AVX512_PANEL,
    KC = 256,
    MC = 144,
    NC = 1024
};

#define AVX512 __attribute__((target("avx512f,prfchw")))

/* Lanes [0, w) of a vector, w clamped to [0, 16]. */
static inline __mmask16 lanes(int64_t w)
{
    return w >= VEC ? (__mmask16)0xffff
           : w <= 0 ? 0
                    : (__mmask16)((1u << w) - 1);
}

/* Copies rows x cols floats of src (stride ld, rows and cols <= 16)
   transposed: column q of the block goes to dst + q * dstride, the lanes
   of mask written (zeros beyond rows). */
AVX512 static void pack_transposed(const float *src, int64_t ld, int64_t rows,
                                   int64_t cols, float *dst, int64_t dstride,
                                   __mmask16 mask)
{
    __m512 v[VEC];
    __mmask16 cm = lanes(cols);
#pragma GCC unroll 16
    for (int r = 0; r < VEC; r++)
        v[r] = r < rows ? _mm512_maskz_loadu_ps(cm, src + r * ld)
                        : _mm512_setzero_ps();
    kiln_transpose16(v);
    /* a constant count lets v stay in registers */
    if (cols == VEC) {
#pragma GCC unroll 16
        for (int q = 0; q < VEC; q++)
            _mm512_mask_storeu_ps(dst + q * dstride, mask, v[q]);
        return;
    }
    for (int64_t q = 0; q < cols; q++)
        _mm512_mask_storeu_ps(dst + q * dstride, mask, v[q]);
}

/* Copies rows rows of w (<= 16) floats of src (stride ld) to dst (stride
   dstride), the lanes of mask written (zeros beyond w). */
AVX512 static void pack_rows(const float *src, int64_t ld, int64_t rows,
                             int64_t w, float *dst, int64_t dstride,
                             __mmask16 mask)
{
    __mmask16 wm = lanes(w);
    for (int64_t p = 0; p < rows; p++)
        _mm512_mask_storeu_ps(dst + p * dstride, mask,
                              _mm512_maskz_loadu_ps(wm, src + p * ld));
}

/* A KC x NC block of op(b) (rows p0.., columns j0.., kc x nc) into panels
   of NR columns, each [kc][NR]. */
AVX512 static void pack_b(int tb, const float *b, int64_t ldb, int64_t p0,
                          int64_t j0, int64_t kc, int64_t nc, float *bp)
{
    if (!tb) {
        /* along each row of b: its 4 KiB pages stream in order (a walk
           down a panel's 32 columns touches a new page every row, which
           the hardware prefetcher does not follow) */
        const float *src = b + p0 * ldb + j0;
        for (int64_t p = 0; p < kc; p++, src += ldb)
            for (int64_t j = 0; j < nc; j += NR) {
                float *dst = bp + j * kc + p * NR;
                int64_t w = nc - j;
                _mm512_store_ps(dst, _mm512_maskz_loadu_ps(lanes(w), src + j));
                _mm512_store_ps(dst + VEC, _mm512_maskz_loadu_ps(
                                               lanes(w - VEC), src + j + VEC));
            }
        return;
    }
    for (int64_t j = 0; j < nc; j += NR, bp += kc * NR)
        for (int64_t h = 0; h < NR; h += VEC) {
            int64_t w = nc - j - h < VEC ? nc - j - h : VEC;
            /* b is [n,k]: 16 columns of op(b) are 16 rows of b */
            for (int64_t p = 0; p < kc; p += VEC)
                pack_transposed(b + (j0 + j + h) * ldb + p0 + p, ldb, w,
                                kc - p < VEC ? kc - p : VEC, bp + p * NR + h,
                                NR, 0xffff);
        }
}

/* An MC x KC block of op(a) (rows i0.., columns p0.., mc x kc) into
   panels of MR rows, each [kc][MR]. */
AVX512 static void pack_a(int ta, const float *a, int64_t lda, int64_t i0,
                          int64_t p0, int64_t mc, int64_t kc, float *ap)
{
    for (int64_t i = 0; i < mc; i += MR, ap += kc * MR) {
        int64_t rows = mc - i < MR ? mc - i : MR;
        if (ta) { /* a is [k,m]: the panel's rows are contiguous in a */
            pack_rows(a + p0 * lda + i0 + i, lda, kc, rows, ap, MR, lanes(MR));
            continue;
        }
        for (int64_t p = 0; p < kc; p += VEC)
            pack_transposed(a + (i0 + i) * lda + p0 + p, lda, rows,
                            kc - p < VEC ? kc - p : VEC, ap + p * MR, MR,
                            lanes(MR));
    }
}

/* What a kernel call writes: rows x up to NR columns of out at c (the
   columns of m0 and m1), out = (alpha sum + add) + beta out, add (at the
   same offsets as c, leading dimension ldc) NULL for none. */
typedef struct tile_out {
    float *c;
    const float *add;
    int64_t ldc;
    __mmask16 m0, m1;
    float alpha, beta;
} tile_out;

/* The kernel for ROWS rows and NV vectors of columns (constants once
   inlined): the sums stay in registers while GCC unrolls the loops over
   rows and vectors.  The k loop is unrolled too: its counter and pointer
   updates were a tenth of the instructions of a step. */
__attribute__((always_inline, target("avx512f,prfchw"))) static inline void
tile(int rows, int nv, int64_t kc, const float *ap, const float *bp,
     const tile_out *o)
{
    __m512 acc[MR][2];
#pragma GCC unroll 16
    for (int r = 0; r < rows; r++) {
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        /* the tile's lines of out asked for now (for writing), arriving
           while the k loop runs: a cold out (a weight gradient of 4 MB)
           otherwise stalls every store; 1.2-1.4x on 1024x1024x128 */
        __builtin_prefetch(o->c + r * o->ldc, 1, 3);
        if (nv > 1)
            __builtin_prefetch(o->c + r * o->ldc + VEC, 1, 3);
        if (o->add) { /* the term added at the end, as cold */
            __builtin_prefetch(o->add + r * o->ldc, 0, 3);
            if (nv > 1)
                __builtin_prefetch(o->add + r * o->ldc + VEC, 0, 3);
        }
    }
#pragma GCC unroll 4
    for (int64_t p = 0; p < kc; p++, ap += MR, bp += NR) {
        __m512 b0 = _mm512_load_ps(bp),
               b1 = nv > 1 ? _mm512_load_ps(bp + VEC) : b0;
#pragma GCC unroll 16
        for (int r = 0; r < rows; r++) {
            __m512 av = _mm512_set1_ps(ap[r]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    /* locals: stores through c could alias *o as far as GCC knows */
    float *c = o->c;
    const float *add = o->add;
    int64_t ldc = o->ldc;
    __mmask16 m[2] = {o->m0, o->m1};
    int scale = o->beta != 0.0f;
    __m512 alpha = _mm512_set1_ps(o->alpha), beta = _mm512_set1_ps(o->beta);
#pragma GCC unroll 16
    for (int r = 0; r < rows; r++, c += ldc)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            __m512 x = _mm512_mul_ps(alpha, acc[r][v]);
            if (add)
                x = _mm512_add_ps(
                    x, _mm512_maskz_loadu_ps(m[v], add + r * ldc + v * VEC));
            if (scale)
                x = _mm512_fmadd_ps(
                    beta, _mm512_maskz_loadu_ps(m[v], c + v * VEC), x);
            _mm512_mask_storeu_ps(c + v * VEC, m[v], x);
        }
}

typedef void (*tile_fn)(int64_t kc, const float *ap, const float *bp,
                        const tile_out *o);

/* tile_R: R rows of two vectors; tile_R_1: R rows of one (a last panel
   of at most 16 columns) */
#define TILE(R)                                                                \
    AVX512 static void tile_##R(int64_t kc, const float *ap, const float *bp,  \
                                const tile_out *o)                             \
    {                                                                          \
        tile(R, 2, kc, ap, bp, o);                                             \
    }                                                                          \
    AVX512 static void tile_##R##_1(int64_t kc, const float *ap,               \
                                    const float *bp, const tile_out *o)        \
    {                                                                          \
        tile(R, 1, kc, ap, bp, o);                                             \
    }
TILE(1)
TILE(2)
TILE(3)
TILE(4)
TILE(5)
TILE(6)
TILE(7)
TILE(8)
TILE(9)
TILE(10)
TILE(11)
TILE(12)

/* tiles[v - 1][r - 1]: the kernel for r rows of v vectors */
static const tile_fn tiles[2][MR] = {
    {tile_1_1, tile_2_1, tile_3_1, tile_4_1, tile_5_1, tile_6_1, tile_7_1,
     tile_8_1, tile_9_1, tile_10_1, tile_11_1, tile_12_1},
    {tile_1, tile_2, tile_3, tile_4, tile_5, tile_6, tile_7, tile_8, tile_9,
     tile_10, tile_11, tile_12}};

/* The product as the blocked loops see it: bp the B block the kernels
   read, its panels bstride floats apart (kc * NR when packed per block,
   k * NR in a whole op(b) packed once, pre non-NULL). */
typedef struct gemm_args {
    int64_t m, n, k;
    float alpha, beta;
    float *out, *ap, *buf;
    const float *bp, *pre, *add;
    int64_t ldo, bstride;
} gemm_args;

/* All tiles of one packed A block (mc rows from i0) times one packed B
   block (nc columns from j0), beta the block's (the caller's for the
   first block of k, 1 after), g's add with the first block only. */
AVX512 static void macro(const gemm_args *g, int64_t i0, int64_t mc, int64_t j0,
                         int64_t nc, int64_t kc, int first)
{
    float beta = first ? g->beta : 1.0f;
    const float *add = first ? g->add : NULL;
    tile_out o = {.ldc = g->ldo, .alpha = g->alpha, .beta = beta};
    for (int64_t j = 0; j < nc; j += NR) {
        o.m0 = lanes(nc - j);
        o.m1 = lanes(nc - j - VEC);
        const float *bp = g->bp + j / NR * g->bstride;
        const tile_fn *by_rows = tiles[nc - j > VEC];
        for (int64_t i = 0; i < mc; i += MR) {
            int64_t rows = mc - i < MR ? mc - i : MR;
            o.c = g->out + (i0 + i) * g->ldo + j0 + j;
            o.add = add ? add + (i0 + i) * g->ldo + j0 + j : NULL;
            by_rows[rows - 1](kc, g->ap + i * kc, bp, &o);
        }
    }
}

/* count blocks of at most most, as equal as possible: the size of each
   (the last may be shorter), rounded up to a multiple of unit */
static int64_t block_size(int64_t count, int64_t most, int64_t unit)
{
    int64_t blocks = (count + most - 1) / most;
    int64_t size = (count + blocks - 1) / blocks;
    return (size + unit - 1) / unit * unit;
}

AVX512 static void blocked(int ta, int tb, const float *a, int64_t lda,
                           const float *b, int64_t ldb, gemm_args *g,
                           int64_t kcb, int64_t mcb, int64_t ncb)
{
    for (int64_t j0 = 0; j0 < g->n; j0 += ncb) {
        int64_t nc = g->n - j0 < ncb ? g->n - j0 : ncb;
        for (int64_t p0 = 0; p0 < g->k; p0 += kcb) {
            int64_t kc = g->k - p0 < kcb ? g->k - p0 : kcb;
            if (g->pre) {
                g->bp = g->pre + j0 / NR * g->bstride + p0 * NR;
            } else {
                pack_b(tb, b, ldb, p0, j0, kc, nc, g->buf);
                g->bp = g->buf;
                g->bstride = kc * NR;
            }
            for (int64_t i0 = 0; i0 < g->m; i0 += mcb) {
                int64_t mc = g->m - i0 < mcb ? g->m - i0 : mcb;
                pack_a(ta, a, lda, i0, p0, mc, kc, g->ap);
                macro(g, i0, mc, j0, nc, kc, p0 == 0);
            }
        }
    }
}

/* Each thread packs into its own buffer of BUF_FLOATS, allocated at its
   first product and freed when it exits: compiled runs allocate
   nothing. */
enum { BUF_FLOATS = MC * KC + KC * NC };
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int buf_key_ok;

static void buf_key_make(void)
{
    buf_key_ok = pthread_key_create(&buf_key, free) == 0;
}

static float *thread_buffer(void)
{
    pthread_once(&buf_once, buf_key_make);
    if (!buf_key_ok)
        return NULL;
    float *buf = pthread_getspecific(buf_key);
    if (buf == NULL) {
        buf = aligned_alloc(64, BUF_FLOATS * sizeof(float));
        if (buf != NULL && pthread_setspecific(buf_key, buf) != 0) {
            free(buf);
            buf = NULL;
        }
    }
    return buf;
}

/* The product with op(b) packed per block (pre NULL) or once (pre, the
   whole of op(b)'s columns from the product's first): the same blocks of
   k either way, so the same sums. */
static int product(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb,
                   const float *pre, const float *add, float beta, float *out,
                   int64_t ldo)
{
    float *buf = thread_buffer();
    if (buf == NULL)
        return 0;
    int64_t kcb = block_size(k, KC, 1), mcb = block_size(m, MC, MR),
            ncb = block_size(n, NC, NR);
    /* the B block first: NC * KC floats keep the A block 64-byte aligned */
    gemm_args g = {.m = m,
                   .n = n,
                   .k = k,
                   .alpha = alpha,
                   .beta = beta,
                   .out = out,
                   .ap = buf + KC * NC,
                   .buf = buf,
                   .pre = pre,
                   .add = add,
                   .ldo = ldo,
                   .bstride = k * NR};
    blocked(ta, tb, a, lda, b, ldb, &g, kcb, mcb, ncb);
    return 1;
}

int kiln_gemm_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *out, int64_t ldo)
{
    return product(ta, tb, m, n, k, alpha, a, lda, b, ldb, NULL, NULL, beta,
                   out, ldo);
}

int kiln_gemm_avx512_add(int ta, int tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, const float *add,
                         float beta, float *out, int64_t ldo)
{
    return product(ta, tb, m, n, k, alpha, a, lda, b, ldb, NULL, add, beta, out,
                   ldo);
}

int64_t kiln_gemm_avx512_packed_floats(int64_t n, int64_t k)
{
    return (n + NR - 1) / NR * NR * k;
}

/* One panel of NR columns after another, each all k rows ([k][NR]): the
   panels of every block of k and of columns are slices of it. */
AVX512 void kiln_gemm_avx512_pack_b(int tb, int64_t n, int64_t k,
                                    const float *b, int64_t ldb, float *dst)
{
    pack_b(tb, b, ldb, 0, 0, k, n, dst);
}

int kiln_gemm_avx512_packed(int ta, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda,
                            const float *packed, int64_t j0, float beta,
                            float *out, int64_t ldo)
{
    if (j0 % NR != 0)
        return 0;
    return product(ta, 0, m, n, k, alpha, a, lda, NULL, 0,
                   packed + j0 / NR * (k * NR), NULL, beta, out, ldo);
}

int kiln_gemm_avx512_ok(void)
{
    return __builtin_cpu_supports("avx512f") != 0;
}

#else

int kiln_gemm_avx512_ok(void)
{
    return 0;
}

int kiln_gemm_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *out, int64_t ldo)
{
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)lda, (void)b, (void)ldb, (void)beta, (void)out, (void)ldo;
    return 0;
}

int kiln_gemm_avx512_add(int ta, int tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, const float *add,
                         float beta, float *out, int64_t ldo)
{
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)lda, (void)b, (void)ldb, (void)add, (void)beta, (void)out, (void)ldo;
    return 0;
}

int64_t kiln_gemm_avx512_packed_floats(int64_t n, int64_t k)
{
    (void)n, (void)k;
    return 0;
}

void kiln_gemm_avx512_pack_b(int tb, int64_t n, int64_t k, const float *b,
                             int64_t ldb, float *dst)
{
    (void)tb, (void)n, (void)k, (void)b, (void)ldb, (void)dst;
}

int kiln_gemm_avx512_packed(int ta, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda,
                            const float *packed, int64_t j0, float beta,
                            float *out, int64_t ldo)
{
    (void)ta, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)packed, (void)j0, (void)beta, (void)out, (void)ldo;
    return 0;
}

#endif
