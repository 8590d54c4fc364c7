/* Kiln's AVX-512 matrix product (src/cpu/gemm_avx512.c) against OpenBLAS's
   cblas_sgemm on one thread, in GFLOP/s, on the products of the benchmark
   models: the MLPs' forward products (x w^T) and both backward ones (dy^T x
   for the weights, dy w for the input), the CNN's fully connected layers
   and its second convolution through columns; "packed" is Kiln's with
   op(b) packed once beforehand (kiln_gemm_avx512_pack_b), as a compiled
   function does for a constant weight.  Times are this thread's CPU time
   (a machine shared with other work), the best of REPS measurements of
   about 50 ms each.

       bench/gemm [REPS]     (default 7) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/gemm_avx512.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rand_floats(long n)
{
    float *p = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n && p; i++)
        p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

typedef struct shape {
    const char *what;
    int m, n, k, ta, tb;
} shape;

enum { OPENBLAS, KILN, KILN_PACKED };

/* seconds per call of one product, the best of reps (packed: op(b) for
   KILN_PACKED) */
static double best_time(const shape *s, int how, int reps, const float *a,
                        const float *b, const float *packed, float *c)
{
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        int calls = 0;
        double t0 = now_s(), t;
        do {
            if (how == KILN)
                kiln_gemm_avx512(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda,
                                 b, ldb, 0.0f, c, s->n);
            else if (how == KILN_PACKED)
                kiln_gemm_avx512_packed(s->ta, s->m, s->n, s->k, 1.0f, a, lda,
                                        packed, 0, 0.0f, c, s->n);
            else
                cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                            s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k,
                            1.0f, a, lda, b, ldb, 0.0f, c, s->n);
            calls++;
        } while ((t = now_s() - t0) < 0.05);
        if (t / calls < best)
            best = t / calls;
    }
    return best;
}

int main(int argc, char **argv)
{
    static const shape shapes[] = {
        {"MLP 784-600-10 b128 fwd", 128, 600, 784, 0, 1},
        {"MLP 784-600-10 b128 dW", 600, 784, 128, 1, 0},
        {"MLP 784-600-10 b128 dX", 128, 784, 600, 0, 0},
        {"MLP 784-1024-1024-10 b128 fwd 1", 128, 1024, 784, 0, 1},
        {"MLP 784-1024-1024-10 b128 fwd 2", 128, 1024, 1024, 0, 1},
        {"MLP 784-1024-1024-10 b256 fwd 2", 256, 1024, 1024, 0, 1},
        {"MLP 784-1024-1024-10 b256 dW 2", 1024, 1024, 256, 1, 0},
        {"MLP 784-1024-1024-10 b256 dX 2", 256, 1024, 1024, 0, 0},
        {"MLP 784-1024-1024-10 b256 dW 1", 1024, 784, 256, 1, 0},
        {"CNN fc 3136-512 b64 fwd", 64, 512, 3136, 0, 1},
        {"CNN conv2 columns (one image)", 64, 196, 800, 0, 0},
    };
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (!kiln_gemm_avx512_ok()) {
        printf("no AVX-512F on this CPU\n");
        return 0;
    }
    openblas_set_num_threads(1);
    printf("%-34s %16s %10s %10s %6s %10s\n", "product", "m x n x k",
           "OpenBLAS", "Kiln", "ratio", "packed");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        float *a = rand_floats((long)s->m * s->k),
              *b = rand_floats((long)s->k * s->n),
              *c = rand_floats((long)s->m * s->n),
              *packed = aligned_alloc(
                  64, (size_t)kiln_gemm_avx512_packed_floats(s->n, s->k) *
                          sizeof(float));
        if (!a || !b || !c || !packed)
            return 1;
        kiln_gemm_avx512_pack_b(s->tb, s->n, s->k, b, s->tb ? s->k : s->n,
                                packed);
        double flop = 2.0 * s->m * s->n * s->k;
        double tb = best_time(s, OPENBLAS, reps, a, b, NULL, c),
               tk = best_time(s, KILN, reps, a, b, NULL, c),
               tp = best_time(s, KILN_PACKED, reps, a, b, packed, c);
        char dims[32];
        snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
        printf("%-34s %16s %10.1f %10.1f %6.2f %10.1f\n", s->what, dims,
               flop / tb * 1e-9, flop / tk * 1e-9, tb / tk, flop / tp * 1e-9);
        free(packed);
        free(a);
        free(b);
        free(c);
    }
    printf("GFLOP/s, one thread, best of %d\n", reps);
    return 0;
}
