/* What the direct AVX-512 convolutions (cpu/conv_direct.c,
   cpu/conv_rows.c, cpu/conv_lanes.c) share: the zero-padded input copy,
   row masks, relu, and the forward register block of 8 output channels
   times 2 vectors of positions with its store. */
#ifndef KILN_CPU_CONV_SIMD_H
#define KILN_CPU_CONV_SIMD_H

#include <stdint.h>
#include <string.h>

/* The n planes [in0, in1] at x into the zeroed planes p [rows, width],
   placed at row at0 and column at1 (what lies past p's edges is
   dropped: the kernels never read it). */
typedef struct kiln_conv_pad {
    int64_t n, in0, in1, rows, width, at0, at1;
} kiln_conv_pad;

static inline void kiln_conv_pad_planes(const kiln_conv_pad *d, const float *x,
                                        float *p)
{
    int64_t plane = d->rows * d->width;
    memset(p, 0, (size_t)(d->n * plane) * sizeof(float));
    int64_t rows = d->in0 < d->rows - d->at0 ? d->in0 : d->rows - d->at0;
    int64_t cols = d->in1 < d->width - d->at1 ? d->in1 : d->width - d->at1;
    for (int64_t c = 0; c < d->n; c++)
        for (int64_t i = 0; i < rows; i++)
            memcpy(p + c * plane + (i + d->at0) * d->width + d->at1,
                   x + (c * d->in0 + i) * d->in1, (size_t)cols * sizeof(float));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>
#define KILN_CONV_AVX512 1

/* lanes per vector, output channels per forward block */
enum { KILN_CONV_VEC = 16, KILN_CONV_CH = 8 };

/* Lanes [from, from + 16) of a row n wide that lie inside it. */
static inline __mmask16 kiln_conv_lanes(int64_t from, int64_t n)
{
    int64_t k = n - from;
    return k >= KILN_CONV_VEC ? (__mmask16)0xffff
           : k <= 0           ? 0
                              : (__mmask16)((1u << k) - 1);
}

/* max(v, 0) but NaN and -0 kept, as kiln_s_relu */
__attribute__((target("avx512f"))) static inline __m512 kiln_conv_relu(__m512 v)
{
    __m512 z = _mm512_setzero_ps();
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), z);
}

/* The block's sums live in named variables a<channel><vector>: GCC keeps
   an array of vectors in memory (a store per update) whenever any loop
   indexes it.  KILN_CONV_FMA8 adds wp[c] times v0 and v1 to channel c's
   sums; KILN_CONV_OUT8 copies them to out[8][2] once the loop is done. */
#define KILN_CONV_DECL(c)                                                      \
    __m512 a##c##0 = _mm512_setzero_ps(), a##c##1 = _mm512_setzero_ps()
#define KILN_CONV_DECL8                                                        \
    KILN_CONV_DECL(0);                                                         \
    KILN_CONV_DECL(1);                                                         \
    KILN_CONV_DECL(2);                                                         \
    KILN_CONV_DECL(3);                                                         \
    KILN_CONV_DECL(4);                                                         \
    KILN_CONV_DECL(5);                                                         \
    KILN_CONV_DECL(6);                                                         \
    KILN_CONV_DECL(7)
#define KILN_CONV_FMA(c)                                                       \
    do {                                                                       \
        __m512 w = _mm512_set1_ps(wp[c]);                                      \
        a##c##0 = _mm512_fmadd_ps(w, v0, a##c##0);                             \
        a##c##1 = _mm512_fmadd_ps(w, v1, a##c##1);                             \
    } while (0)
#define KILN_CONV_FMA8                                                         \
    KILN_CONV_FMA(0);                                                          \
    KILN_CONV_FMA(1);                                                          \
    KILN_CONV_FMA(2);                                                          \
    KILN_CONV_FMA(3);                                                          \
    KILN_CONV_FMA(4);                                                          \
    KILN_CONV_FMA(5);                                                          \
    KILN_CONV_FMA(6);                                                          \
    KILN_CONV_FMA(7)
#define KILN_CONV_OUT(c) out[c][0] = a##c##0, out[c][1] = a##c##1
#define KILN_CONV_OUT8(out)                                                    \
    KILN_CONV_OUT(0);                                                          \
    KILN_CONV_OUT(1);                                                          \
    KILN_CONV_OUT(2);                                                          \
    KILN_CONV_OUT(3);                                                          \
    KILN_CONV_OUT(4);                                                          \
    KILN_CONV_OUT(5);                                                          \
    KILN_CONV_OUT(6);                                                          \
    KILN_CONV_OUT(7)

/* Four zeroed sums p0 to p3 (the weight gradients' blocks). */
#define KILN_CONV_ZERO4(p)                                                     \
    __m512 p##0 = _mm512_setzero_ps(), p##1 = _mm512_setzero_ps(),             \
           p##2 = _mm512_setzero_ps(), p##3 = _mm512_setzero_ps()

/* Where a forward block's two vectors go: channel c's at y + c * osz +
   at[v], lanes m[v]; plus bias[c] (NULL: none), then relu when asked. */
typedef struct kiln_conv_store {
    float *y;
    const float *bias;
    int64_t osz, nch, at[2];
    __mmask16 m[2];
    int relu;
} kiln_conv_store;

__attribute__((target("avx512f"))) static inline void
kiln_conv_store_block(const kiln_conv_store *s, __m512 out[][2])
{
    for (int64_t c = 0; c < s->nch; c++)
        for (int v = 0; v < 2; v++) {
            __m512 u = out[c][v];
            if (s->bias)
                u = _mm512_add_ps(u, _mm512_set1_ps(s->bias[c]));
            if (s->relu)
                u = kiln_conv_relu(u);
            _mm512_mask_storeu_ps(s->y + c * s->osz + s->at[v], s->m[v], u);
        }
}
#endif

#endif
