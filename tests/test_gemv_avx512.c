/* Kiln's AVX-512 matrix-vector product (cpu/gemv_avx512.c) against sums
   in double: called directly on random sizes (rows around its blocks of
   8, columns around its vectors of 16, a leading dimension past the
   columns, alpha, beta 0 or not), and through kiln_cpu_gemm's one-row and
   one-column products at 1 and 2 threads (the outputs split over the
   pool), which take it in their dot-product forms; the other forms keep
   agreeing too. */
#include "test_helpers.h"

#include "cpu/gemm.h"
#include "cpu/gemv_avx512.h"

static int rnd(kiln_rng *r, int lo, int hi)
{
    return lo + (int)(kiln_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

static float *random_floats(kiln_rng *r, int64_t n)
{
    float *v = malloc(((size_t)n + 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)kiln_rng_uniform(r) * 2 - 1;
    return v;
}

static void test_direct(void **state)
{
    (void)state;
    if (!kiln_gemv_avx512_ok())
        skip();
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    for (int it = 0; it < 60; it++) {
        int64_t rows = rnd(&r, 1, 27), cols = rnd(&r, 1, 70),
                ld = cols + rnd(&r, 0, 5);
        float alpha = it % 3 ? 1.0f : (float)kiln_rng_uniform(&r) * 4 - 2;
        float beta = it % 2 ? 0.0f : (float)kiln_rng_uniform(&r) * 2 - 1;
        float *mat = random_floats(&r, rows * ld), *x = random_floats(&r, cols);
        float *y = random_floats(&r, rows);
        double *want = malloc((size_t)rows * sizeof *want);
        assert_non_null(want);
        for (int64_t i = 0; i < rows; i++) {
            double s = 0;
            for (int64_t p = 0; p < cols; p++)
                s += (double)mat[i * ld + p] * x[p];
            want[i] = alpha * s + (beta == 0.0f ? 0.0 : beta * (double)y[i]);
        }
        if (beta == 0.0f) /* not read: a NaN there must not matter */
            y[0] = NAN;
        kiln_gemv_avx512(rows, cols, ld, alpha, mat, x, beta, y);
        th_assert_close("gemv", y, want, rows, 1e-5, 1e-5);
        free(mat);
        free(x);
        free(y);
        free(want);
    }
}

/* out = op(a) op(b) of a 1-row (m = 1) or 1-column (n = 1) product,
   every transpose, against double sums. */
static void check_product(kiln_rng *r, int ta, int tb, int64_t m, int64_t n,
                          int64_t k)
{
    float *a = random_floats(r, m * k), *b = random_floats(r, k * n);
    float *out = calloc((size_t)(m * n), sizeof *out);
    double *want = malloc((size_t)(m * n) * sizeof *want);
    assert_true(out && want);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * m + i] : a[i * k + p]) *
                     (tb ? b[j * k + p] : b[p * n + j]);
            want[i * n + j] = s;
        }
    kiln_cpu_gemm(ta, tb, m, n, k, a, b, out);
    /* float sums of k terms of about 1/3: errors of about k eps */
    th_assert_close("gemm", out, want, m * n, 1e-5, (double)k * 1e-7);
    free(a);
    free(b);
    free(out);
    free(want);
}

static void test_through_gemm(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 12);
    /* 3136 x 515: split over the pool in blocks of 64 outputs, the last
       one short */
    for (int t = 1; t <= 2; t++) {
        kiln_set_num_threads(t);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_product(&r, ta, tb, 1, 515, 3136);
                check_product(&r, ta, tb, 515, 1, 3136);
                check_product(&r, ta, tb, 1, 13, 37);
            }
    }
    kiln_set_num_threads(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct),
        cmocka_unit_test(test_through_gemm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
