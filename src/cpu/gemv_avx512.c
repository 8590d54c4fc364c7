/* The dot-product matrix-vector product with AVX-512: batch 1's fully
   connected layers (the MNIST CNN's 3136->512, 6.4 MB of weights) are
   bound by reading the matrix, from L3 at best.  OpenBLAS's sgemv runs
   its AVX2 kernels here (OPENBLAS_CORETYPE=Haswell) and read that matrix
   at about 60 GB/s; 8 rows at a time, one 16-lane sum each, reach about
   75 (one thread, hot L3): 8 sequential streams keep the prefetchers
   busy and 8 independent sums hide the FMA latency.  16 rows gave the
   same, 4 or 2 rows and software prefetch less. */
#include "cpu/gemv_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMV_AVX512 1
#endif

enum { VEC = 16, ROWS = 8 };

int kiln_gemv_avx512_ok(void)
{
#ifdef GEMV_AVX512
    static int ok = -1;
    if (ok < 0)
        ok = __builtin_cpu_supports("avx512f") != 0;
    return ok;
#else
    return 0;
#endif
}

#ifdef GEMV_AVX512
/* The final value of one output from its 16 lanes. */
__attribute__((target("avx512f"))) static inline float
finish(__m512 sum, float alpha, float beta, const float *y)
{
    float v = alpha * _mm512_reduce_add_ps(sum);
    return beta == 0.0f ? v : v + beta * *y;
}

/* R rows (R constant where inlined: 8 for the body, 1 for the rest). */
__attribute__((target("avx512f"), always_inline)) static inline void
rows_dot(int R, int64_t cols, int64_t ld, float alpha, const float *mat,
         const float *x, float beta, float *y)
{
    __m512 s[ROWS];
    for (int i = 0; i < R; i++)
        s[i] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + VEC <= cols; p += VEC) {
        __m512 xv = _mm512_loadu_ps(x + p);
        for (int i = 0; i < R; i++)
            s[i] = _mm512_fmadd_ps(_mm512_loadu_ps(mat + i * ld + p), xv, s[i]);
    }
    if (p < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - p)) - 1);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + p);
        for (int i = 0; i < R; i++)
            s[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, mat + i * ld + p),
                                   xv, s[i]);
    }
    for (int i = 0; i < R; i++)
        y[i] = finish(s[i], alpha, beta, y + i);
}

__attribute__((target("avx512f"))) static void
rows8(int64_t cols, int64_t ld, float alpha, const float *mat, const float *x,
      float beta, float *y)
{
    rows_dot(ROWS, cols, ld, alpha, mat, x, beta, y);
}

__attribute__((target("avx512f"))) static void
row1(int64_t cols, int64_t ld, float alpha, const float *mat, const float *x,
     float beta, float *y)
{
    rows_dot(1, cols, ld, alpha, mat, x, beta, y);
}
#endif

void kiln_gemv_avx512(int64_t rows, int64_t cols, int64_t ld, float alpha,
                      const float *mat, const float *x, float beta, float *y)
{
#ifdef GEMV_AVX512
    int64_t i = 0;
    for (; i + ROWS <= rows; i += ROWS)
        rows8(cols, ld, alpha, mat + i * ld, x, beta, y + i);
    for (; i < rows; i++)
        row1(cols, ld, alpha, mat + i * ld, x, beta, y + i);
#else
    (void)rows, (void)cols, (void)ld, (void)alpha, (void)mat, (void)x,
        (void)beta, (void)y;
#endif
}
