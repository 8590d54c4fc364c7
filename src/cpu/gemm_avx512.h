/* Kiln's own AVX-512 single-precision matrix product (gemm_avx512.c). */
#ifndef KILN_CPU_GEMM_AVX512_H
#define KILN_CPU_GEMM_AVX512_H

#include <stdint.h>

/* Columns of op(b) per packed panel: column blocks of a packed op(b)
   start at multiples of it. */
#define KILN_GEMM_AVX512_PANEL 32

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

/* kiln_gemm_avx512 with a third term: out = (alpha op(a) op(b) + add) +
   beta out, add [m,n] with out's leading dimension, added once (with the
   first block of k). */
int kiln_gemm_avx512_add(int ta, int tb, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, const float *add,
                         float beta, float *out, int64_t ldo);

/* op(b) [k,n] packed once for kiln_gemm_avx512_packed (a constant weight
   reused by every product): the floats it takes, 0 without the kernel. */
int64_t kiln_gemm_avx512_packed_floats(int64_t n, int64_t k);
/* Packs op(b) (b [k,n], or [n,k] when tb) into dst, 64-byte aligned, of
   kiln_gemm_avx512_packed_floats(n, k) floats. */
void kiln_gemm_avx512_pack_b(int tb, int64_t n, int64_t k, const float *b,
                             int64_t ldb, float *dst);
/* kiln_gemm_avx512 with op(b) packed by kiln_gemm_avx512_pack_b: op(b)'s
   columns j0..j0+n-1 (j0 a multiple of KILN_GEMM_AVX512_PANEL, k its
   whole k), giving the same floats as kiln_gemm_avx512; 0 (nothing
   written) when the buffers cannot be allocated or j0 is not a multiple. */
int kiln_gemm_avx512_packed(int ta, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda,
                            const float *packed, int64_t j0, float beta,
                            float *out, int64_t ldo);

#endif
