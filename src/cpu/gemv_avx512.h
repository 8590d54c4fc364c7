/* Kiln's AVX-512 matrix-vector product in its dot-product form
   (cpu/gemv_avx512.c): a layer's weights [outputs, inputs] times one
   input vector, batch 1's fully connected layers. */
#ifndef KILN_CPU_GEMV_AVX512_H
#define KILN_CPU_GEMV_AVX512_H

#include <stdint.h>

/* Whether the CPU has AVX-512F (checked once). */
int kiln_gemv_avx512_ok(void);

/* y[i] = alpha (mat[i, :] . x) + beta y[i] for i < rows, mat [rows, cols]
   row-major with leading dimension ld; beta 0: y is not read.  Each dot
   product is summed in float over 16 lanes, lanes added at the end.
   Call only where kiln_gemv_avx512_ok. */
void kiln_gemv_avx512(int64_t rows, int64_t cols, int64_t ld, float alpha,
                      const float *mat, const float *x, float beta, float *y);

#endif
