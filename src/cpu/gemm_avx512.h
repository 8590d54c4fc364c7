/* Kiln's own AVX-512 single-precision matrix product (gemm_avx512.c). */
#ifndef KILN_CPU_GEMM_AVX512_H
#define KILN_CPU_GEMM_AVX512_H

#include <stdint.h>

/* 1 when this build has the kernel and this CPU has AVX-512F. */
int kiln_gemm_avx512_ok(void);

/* out = alpha op(a) op(b) + beta out (beta 0: out is not read) on the
   calling thread, row-major with leading dimensions, op(a) [m,k] (a is
   [k,m] when ta), op(b) [k,n] (b is [n,k] when tb); m, n, k > 0.  Each
   element is summed in float in k order within blocks of k, the blocks
   added to out in order, so a result depends on the shapes alone.  0
   (nothing written) when the packing buffers cannot be allocated. */
int kiln_gemm_avx512(int ta, int tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *out, int64_t ldo);

#endif
