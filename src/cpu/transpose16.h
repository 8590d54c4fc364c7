/* The 16x16 float transpose in zmm registers that the AVX-512 matrix
   product's packing (gemm_avx512.c) and the lane-wise convolution
   (conv_lanes.c) share.  Callers include it inside their AVX-512 code. */
#ifndef KILN_CPU_TRANSPOSE16_H
#define KILN_CPU_TRANSPOSE16_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The 16x16 transpose, in place: v[i] becomes column i.  Pairs of rows
   are interleaved by floats, then by pairs of floats, then 128-bit lanes
   twice. */
__attribute__((always_inline, target("avx512f"))) static inline void
kiln_transpose16(__m512 v[16])
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 2]),
                c = _mm512_castps_pd(t[i + 1]), d = _mm512_castps_pd(t[i + 3]);
        v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        v[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        v[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    /* v[4g + c] now holds, in 128-bit lane L, column 4L + c of rows
       4g..4g+3 */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xdd);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

#endif

#endif
