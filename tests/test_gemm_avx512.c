/* Kiln's AVX-512 matrix product (cpu/gemm_avx512.c) and the products of
   cpu/gemm.c that use it, against a plain double-precision loop: random
   shapes from 1 to past each block size (tiles of 12 rows and 32
   columns, blocks of 256 of k, 144 rows, 1024 columns), all four
   transposes, leading dimensions wider than the operands, beta 0 and 1,
   alpha != 1.  Each result is a float sum of k products: its error is at
   most about k u sum |alpha a b| (u = 2^-24) plus the rounding of alpha
   and of beta out; the bound checked is (k + 4) u (alpha sum |a b| +
   |beta out|), and the floats out of the product's rows and columns
   (the leading dimensions' padding) must be left as they were. */
#include "test_helpers.h"

#include <float.h>

#include "cpu/gemm.h"
#include "cpu/gemm_avx512.h"

/* One product's operands, with a margin of ld - width floats per row. */
typedef struct prod {
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldo;
    float alpha, beta;
    float *a, *b, *out, *was;
} prod;

static int64_t pick(kiln_rng *r, const int64_t *from, int count)
{
    return from[kiln_rng_u32(r) % (uint32_t)count];
}

static float *rand_floats(kiln_rng *r, int64_t count)
{
    float *p = malloc((size_t)count * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < count; i++)
        p[i] = (float)(2 * kiln_rng_uniform(r) - 1);
    return p;
}

/* Operands for m x n x k, each leading dimension its width plus pad. */
static prod prod_new(kiln_rng *r, int ta, int tb, int64_t m, int64_t n,
                     int64_t k, int64_t pad)
{
    prod p = {.ta = ta,
              .tb = tb,
              .m = m,
              .n = n,
              .k = k,
              .lda = (ta ? m : k) + pad,
              .ldb = (tb ? k : n) + pad,
              .ldo = n + pad};
    p.alpha = kiln_rng_u32(r) % 2 ? 1.0f : -0.75f;
    p.beta = (float)(kiln_rng_u32(r) % 2);
    p.a = rand_floats(r, (ta ? k : m) * p.lda);
    p.b = rand_floats(r, (tb ? n : k) * p.ldb);
    p.out = rand_floats(r, m * p.ldo);
    p.was = malloc((size_t)(m * p.ldo) * sizeof(float));
    assert_non_null(p.was);
    memcpy(p.was, p.out, (size_t)(m * p.ldo) * sizeof(float));
    return p;
}

/* out as computed against the double loop, the padding unchanged. */
static void prod_check(const prod *p)
{
    double u = FLT_EPSILON / 2;
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->ldo; j++) {
            int64_t at = i * p->ldo + j;
            if (j >= p->n) {
                assert_true(p->out[at] == p->was[at]);
                continue;
            }
            double sum = 0, mag = 0;
            for (int64_t q = 0; q < p->k; q++) {
                double x = p->ta ? p->a[q * p->lda + i] : p->a[i * p->lda + q];
                double y = p->tb ? p->b[j * p->ldb + q] : p->b[q * p->ldb + j];
                sum += x * y;
                mag += fabs(x * y);
            }
            double want = p->alpha * sum + p->beta * p->was[at];
            double tol = (double)(p->k + 4) * u *
                         (fabs(p->alpha) * mag + fabs(p->beta * p->was[at]));
            if (fabs(p->out[at] - want) > tol)
                fail_msg("ta %d tb %d %lldx%lldx%lld: out[%lld][%lld] %.9g, "
                         "want %.9g (tol %.3g)",
                         p->ta, p->tb, (long long)p->m, (long long)p->n,
                         (long long)p->k, (long long)i, (long long)j,
                         p->out[at], want, tol);
        }
}

static void prod_free(prod *p)
{
    free(p->a);
    free(p->b);
    free(p->out);
    free(p->was);
}

static void run_avx512(prod *p)
{
    assert_int_equal(kiln_gemm_avx512(p->ta, p->tb, p->m, p->n, p->k, p->alpha,
                                      p->a, p->lda, p->b, p->ldb, p->beta,
                                      p->out, p->ldo),
                     1);
}

static void test_random_shapes(void **state)
{
    (void)state;
    if (!kiln_gemm_avx512_ok())
        skip();
    static const int64_t sizes[] = {1,  2,  3,  5,  11, 12, 13,
                                    16, 17, 31, 32, 33, 47, 65};
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    for (int it = 0; it < 200; it++) {
        int64_t m = pick(&r, sizes, 14), n = pick(&r, sizes, 14),
                k = pick(&r, sizes, 14);
        prod p = prod_new(&r, it % 2, it / 2 % 2, m, n, k,
                          kiln_rng_u32(&r) % 3 == 0 ? 0 : 7);
        run_avx512(&p);
        prod_check(&p);
        prod_free(&p);
    }
}

/* Sizes on both sides of the blocks of k (256), rows (144) and columns
   (1024), for each transpose: blocks of k added to out in turn, more
   than one A and B block. */
static void test_block_edges(void **state)
{
    (void)state;
    if (!kiln_gemm_avx512_ok())
        skip();
    static const int64_t shapes[][3] = {
        {144, 96, 256}, {145, 33, 257}, {13, 1025, 40},
        {289, 64, 513}, {7, 1024, 600}, {1, 1057, 300},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 29);
    for (int s = 0; s < 6; s++)
        for (int t = 0; t < 4; t++) {
            prod p = prod_new(&r, t % 2, t / 2, shapes[s][0], shapes[s][1],
                              shapes[s][2], 3);
            run_avx512(&p);
            prod_check(&p);
            prod_free(&p);
        }
}

/* kiln_cpu_gemm (beta 0, alpha 1), kiln_cpu_gemm_acc and
   kiln_cpu_gemm_serial at 1 and 2 threads: products split over the pool
   by rows or columns, vectors (GEMV), and the serial one's leading
   dimensions, whichever kernel takes them. */
static void test_cpu_gemm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {128, 600, 784}, {1, 600, 784}, {64, 10, 128},
        {300, 40, 70},   {20, 300, 90}, {45, 1, 33},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 31);
    for (int it = 0; it < 48; it++) {
        const int64_t *sh = shapes[it % 6];
        int t = it / 6 % 4, how = it / 24;
        kiln_set_num_threads(1 + it % 2);
        prod p = prod_new(&r, t % 2, t / 2, sh[0], sh[1], sh[2], how ? 5 : 0);
        if (how) {
            p.alpha = 1;
            kiln_cpu_gemm_serial(p.ta, p.tb, p.m, p.n, p.k, p.a, p.lda, p.b,
                                 p.ldb, p.beta, p.out, p.ldo);
        } else if (p.beta == 0) {
            p.alpha = 1;
            kiln_cpu_gemm(p.ta, p.tb, p.m, p.n, p.k, p.a, p.b, p.out);
        } else
            kiln_cpu_gemm_acc(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.b,
                              p.out);
        prod_check(&p);
        prod_free(&p);
    }
    kiln_set_num_threads(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_block_edges),
        cmocka_unit_test(test_cpu_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
