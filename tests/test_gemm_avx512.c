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
    const float *add; /* a third term (kiln_cpu_gemm_rows_into), or NULL */
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
            double add = p->add ? p->add[at] : 0,
                   was = p->beta != 0 ? p->was[at] : 0;
            double want = p->alpha * sum + add + p->beta * was;
            double tol =
                (double)(p->k + 4) * u *
                (fabs(p->alpha) * mag + fabs(add) + fabs(p->beta * was));
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

/* kiln_cpu_gemm_rows_into accumulating (beta 1, nothing added): a
   product cut into 1 to 3 blocks of rows (the phases of a shared-weights
   update in turns, src/dist/share.c), each row added once, the same as
   the whole product. */
static void test_gemm_acc_rows(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {1024, 1024, 128}, {784, 1024, 128}, {1024, 10, 128},
        {5, 300, 7},       {1, 64, 33},      {300, 1, 20},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 37);
    for (int it = 0; it < 72; it++) {
        const int64_t *sh = shapes[it % 6];
        int t = it / 6 % 4, blocks = 1 + it / 24;
        prod p = prod_new(&r, t % 2, t / 2, sh[0], sh[1], sh[2], 0);
        p.beta = 1;
        for (int b = blocks - 1; b >= 0; b--) /* in any order */
            kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a,
                                    p.b, 1.0f, NULL, p.out, p.m * b / blocks,
                                    p.m * (b + 1) / blocks);
        /* empty and out-of-range blocks change nothing */
        kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.b,
                                1.0f, NULL, p.out, 0, 0);
        kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.b,
                                1.0f, NULL, p.out, 0, p.m + 1);
        prod_check(&p);
        prod_free(&p);
    }
}

/* kiln_cpu_gemm_rows_into, the three writes of a shared update's phases
   (src/dist/share.c) cut into 1 to 3 blocks of rows in any order: beta 0
   (out is not read: NaN before), beta 1, and beta 1 with a third term
   added, whose rows the call may use as its scratch. */
static void test_gemm_rows_into(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {1024, 1024, 128}, {784, 1024, 300}, {1024, 10, 128},
        {5, 300, 7},       {1, 64, 33},      {300, 1, 20},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 41);
    for (int it = 0; it < 72 * 3; it++) {
        const int64_t *sh = shapes[it % 6];
        int t = it / 6 % 4, blocks = 1 + it / 24 % 3, mode = it / 72;
        prod p = prod_new(&r, t % 2, t / 2, sh[0], sh[1], sh[2], 0);
        float *add = NULL, *scratch = NULL;
        p.beta = mode == 0 ? 0.0f : 1.0f;
        if (mode == 0)
            for (int64_t i = 0; i < p.m * p.n; i++)
                p.out[i] = p.was[i] = NAN;
        if (mode == 2) {
            add = rand_floats(&r, p.m * p.n);
            scratch = malloc((size_t)(p.m * p.n) * sizeof(float));
            assert_non_null(scratch);
            memcpy(scratch, add, (size_t)(p.m * p.n) * sizeof(float));
            p.add = add;
        }
        for (int b = blocks - 1; b >= 0; b--)
            kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a,
                                    p.b, p.beta, scratch, p.out,
                                    p.m * b / blocks, p.m * (b + 1) / blocks);
        /* empty and out-of-range blocks change nothing */
        kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.b,
                                p.beta, scratch, p.out, 2, 1);
        kiln_cpu_gemm_rows_into(p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a, p.b,
                                p.beta, scratch, p.out, -1, p.m);
        prod_check(&p);
        free(add);
        free(scratch);
        prod_free(&p);
    }
}

/* op(b) packed once for p's product, or NULL without the kernel. */
static float *pack_once(const prod *p)
{
    int64_t floats = kiln_gemm_avx512_packed_floats(p->n, p->k);
    if (floats == 0)
        return NULL;
    float *packed = aligned_alloc(64, (size_t)floats * sizeof(float));
    assert_non_null(packed);
    kiln_gemm_avx512_pack_b(p->tb, p->n, p->k, p->b, p->ldb, packed);
    return packed;
}

/* The product with op(b) packed once gives the floats of the plain one,
   bit for bit (the same blocks of k), on the whole of op(b) and on
   column blocks starting at a panel, and leaves out's padding alone;
   a block starting between panels is refused with out untouched. */
static void test_packed_same(void **state)
{
    (void)state;
    if (!kiln_gemm_avx512_ok())
        skip();
    static const int64_t sizes[] = {1,  2,  7,   12,  13,  31,  32,
                                    33, 65, 145, 257, 300, 600, 1030};
    kiln_rng r;
    kiln_rng_seed(&r, 37);
    for (int it = 0; it < 60; it++) {
        int64_t m = pick(&r, sizes, 11), n = pick(&r, sizes, 14),
                k = pick(&r, sizes, 14);
        prod p = prod_new(&r, it % 2, it / 2 % 2, m, n, k, it % 3 ? 5 : 0);
        float *packed = pack_once(&p),
              *plain = malloc((size_t)(m * p.ldo) * sizeof(float));
        assert_non_null(packed);
        assert_non_null(plain);
        int64_t j0 = n > 2 * KILN_GEMM_AVX512_PANEL && it % 2
                         ? KILN_GEMM_AVX512_PANEL
                         : 0;
        memcpy(plain, p.out, (size_t)(m * p.ldo) * sizeof(float));
        const float *bj = p.tb ? p.b + j0 * p.ldb : p.b + j0;
        assert_int_equal(kiln_gemm_avx512(p.ta, p.tb, m, n - j0, k, p.alpha,
                                          p.a, p.lda, bj, p.ldb, p.beta,
                                          plain + j0, p.ldo),
                         1);
        assert_int_equal(kiln_gemm_avx512_packed(p.ta, m, n - j0, k, p.alpha,
                                                 p.a, p.lda, packed, j0, p.beta,
                                                 p.out + j0, p.ldo),
                         1);
        assert_memory_equal(p.out, plain, (size_t)(m * p.ldo) * sizeof(float));
        if (j0 == 0)
            prod_check(&p);
        assert_int_equal(kiln_gemm_avx512_packed(p.ta, m, n - 1, k, p.alpha,
                                                 p.a, p.lda, packed, 1, p.beta,
                                                 p.out + 1, p.ldo),
                         0);
        assert_memory_equal(p.out, plain, (size_t)(m * p.ldo) * sizeof(float));
        free(packed);
        free(plain);
        prod_free(&p);
    }
}

/* kiln_cpu_gemm_packed against kiln_cpu_gemm, bit for bit, at 1 and 2
   threads (split by rows, and by columns: blocks of the packed op(b)),
   packed where kiln_cpu_gemm_packed_floats offers it (not a GEMV, not
   without the kernel), else NULL. */
static void test_cpu_gemm_packed(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {128, 600, 784}, {300, 40, 70}, {20, 300, 90}, {64, 196, 800},
        {17, 33, 5},     {2, 1030, 40}, {1, 600, 784},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 41);
    for (int it = 0; it < 28; it++) {
        const int64_t *sh = shapes[it % 7];
        int t = it / 7 % 4;
        kiln_set_num_threads(1 + it % 2);
        prod p = prod_new(&r, t % 2, t / 2, sh[0], sh[1], sh[2], 0);
        int64_t floats = kiln_cpu_gemm_packed_floats(p.m, p.n, p.k);
        assert_true(floats == 0 || floats >= p.n * p.k);
        assert_true(floats > 0 || !kiln_gemm_avx512_ok() || p.m == 1);
        float *packed =
            floats ? aligned_alloc(64, (size_t)floats * sizeof(float)) : NULL;
        assert_true(packed || !floats);
        if (packed)
            kiln_cpu_gemm_pack_b(p.tb, p.n, p.k, p.b, packed);
        kiln_cpu_gemm(p.ta, p.tb, p.m, p.n, p.k, p.a, p.b, p.was);
        kiln_cpu_gemm_packed(p.ta, p.tb, p.m, p.n, p.k, p.a, p.b, packed,
                             p.out);
        assert_memory_equal(p.out, p.was, (size_t)(p.m * p.n) * sizeof(float));
        p.beta = 0;
        p.alpha = 1;
        prod_check(&p);
        free(packed);
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
        cmocka_unit_test(test_gemm_acc_rows),
        cmocka_unit_test(test_gemm_rows_into),
        cmocka_unit_test(test_packed_same),
        cmocka_unit_test(test_cpu_gemm_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
