/* Matrix products for the matmul kernels (Kiln's AVX-512 kernel where the
   CPU has it, else OpenBLAS when built with it, else a portable loop). */
#ifndef KILN_CPU_GEMM_H
#define KILN_CPU_GEMM_H

#include <stdint.h>

/* A matrix product with M*N*K above this is split over the pool;
   OpenBLAS itself stays on one thread up to the same size. */
#define KILN_GEMM_SPLIT_MIN (4 * 65536)

/* out = a(MxK, or KxM when ta) x b(KxN, or NxK when tb), row-major. */
void kiln_cpu_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *out);
/* out += alpha a x b (one GEMM with beta = 1; shapes as kiln_cpu_gemm).
   out must not overlap a or b.  Both calls split large products over the
   running kernel's threads (a fixed split for a thread count) and run
   those with one row or column as a GEMV; this one only where the GEMV
   takes dot products, and otherwise (x^T [k,m] times a [k,1] column, a
   [1,k] row times [k,n]) sums rows in a plain loop, so that each result is
   added to out once. */
void kiln_cpu_gemm_acc(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, const float *b, float *out);
/* Rows r0..r1 of out = (alpha op(a) op(b) + add) + beta out (out and add
   m x n; add NULL for none; beta 0: out is not read), the other rows
   untouched, on the calling thread.  Rows of add may be overwritten (a
   scratch: where the AVX-512 kernel cannot add it in its last step, the
   product is summed into it first). */
void kiln_cpu_gemm_rows_into(int ta, int tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float *a, const float *b,
                             float beta, float *add, float *out, int64_t r0,
                             int64_t r1);

/* A constant op(b) [k,n] (a weight) packed once into the AVX-512 kernel's
   panels, read by every later product instead of packing it per call:
   the floats it takes for products of m rows, 0 when they would not read
   it (no AVX-512 kernel, too few columns, a GEMV). */
int64_t kiln_cpu_gemm_packed_floats(int64_t m, int64_t n, int64_t k);
/* Packs op(b) (b [k,n], or [n,k] when tb) into packed, 64-byte aligned, of
   kiln_cpu_gemm_packed_floats floats. */
void kiln_cpu_gemm_pack_b(int tb, int64_t n, int64_t k, const float *b,
                          float *packed);
/* kiln_cpu_gemm with op(b) also packed by kiln_cpu_gemm_pack_b (NULL: the
   same as kiln_cpu_gemm): the same floats, split the same way. */
void kiln_cpu_gemm_packed(int ta, int tb, int64_t m, int64_t n, int64_t k,
                          const float *a, const float *b, const float *packed,
                          float *out);

/* out = op(a) op(b) + beta out (beta 0: out is not read, or 1) on the
   calling thread, with leading dimensions: for kernels that split their
   own work over the pool (a convolution's images). */
void kiln_cpu_gemm_serial(int ta, int tb, int64_t m, int64_t n, int64_t k,
                          const float *a, int64_t lda, const float *b,
                          int64_t ldb, float beta, float *out, int64_t ldo);

#endif
