/* A compiled matmul whose right operand is a constant packs it once, when
   the function is planned (cpu/prepared.c), and every run reads the
   packed copy: its outputs must be those of the product packing at every
   call bit for bit, at every batch size of a symbolic
   axis and thread count, and its listing says so.  A variable's product
   is never prepared: after kiln_variable_write the next run must use the
   new weights. */
#include "test_helpers.h"

#include "cpu/gemm.h"
#include "cpu/gemm_avx512.h"

enum { K = 300, N = 200 };

/* The listing of f contains what (1) or not (0). */
static int listing_has(const kiln_function *f, const char *what)
{
    FILE *fp = tmpfile();
    assert_non_null(fp);
    assert_int_equal(kiln_function_print(f, fp), KILN_OK);
    long len = ftell(fp);
    char *text = malloc((size_t)len + 1);
    assert_non_null(text);
    rewind(fp);
    assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
    text[len] = 0;
    fclose(fp);
    int has = strstr(text, what) != NULL;
    free(text);
    return has;
}

/* y = x w^T for x [rows, K], w [N, K] (ONNX Gemm's transB), in double. */
static void want_product(const float *x, const float *w, int64_t rows,
                         double *y)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t q = 0; q < K; q++)
                s += (double)x[i * K + q] * w[j * K + q];
            y[i * N + j] = s;
        }
}

/* The compiled output at batch rows against the unpacked product on the
   same threads (kiln_cpu_gemm, packing op(b) per call), bit for bit, and
   against the double product. */
static void check_batch(kiln_function *f, const float *w, int64_t rows,
                        kiln_rng *r)
{
    kiln_tensor *in = th_rand(r, KILN_SHAPE(rows, K), -1, 1);
    kiln_tensor *out = kiln_tensor_new(KILN_F32, KILN_SHAPE(rows, N));
    float *plain = malloc((size_t)(rows * N) * sizeof *plain);
    double *want = malloc((size_t)(rows * N) * sizeof *want);
    assert_non_null(out);
    assert_non_null(plain);
    assert_non_null(want);
    assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
    kiln_cpu_gemm(0, 1, rows, N, K, kiln_tensor_f32(in), w, plain);
    assert_memory_equal(kiln_tensor_f32(out), plain,
                        (size_t)(rows * N) * sizeof(float));
    want_product(kiln_tensor_f32(in), w, rows, want);
    th_assert_close("x w^T", kiln_tensor_f32(out), want, rows * N, 1e-5, 1e-5);
    free(plain);
    free(want);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
}

static void test_constant_packed_once(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 43);
    float *w = malloc((size_t)(N * K) * sizeof *w);
    assert_non_null(w);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = (float)(2 * kiln_rng_uniform(&r) - 1);
    for (int threads = 1; threads <= 2; threads++) {
        /* the session's threads, and kiln_cpu_gemm's outside a run */
        kiln_set_num_threads(threads);
        kiln_session_options so = {.threads = threads};
        kiln_session *s = kiln_session_new(&so);
        kiln_graph *g = kiln_graph_new();
        assert_non_null(s);
        assert_non_null(g);
        kiln_node *x = kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(128, K), 1);
        kiln_node *wc = kiln_constant(g, KILN_F32, KILN_SHAPE(N, K), w);
        kiln_node *y = kiln_matmul(g, x, wc, 0, 1);
        kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
        assert_non_null(f);
        static const int64_t batches[] = {128, 1, 5, 300};
        for (int b = 0; b < 4; b++) {
            check_batch(f, w, batches[b], &r);
            /* a GEMV (batch 1, OpenBLAS) reads the weight as it is */
            assert_int_equal(listing_has(f, "prepared once"),
                             kiln_gemm_avx512_ok() && batches[b] > 1);
        }
        kiln_graph_free(g);
        kiln_session_free(s);
    }
    kiln_set_num_threads(1);
    free(w);
}

/* A variable's product at run 2 uses the value written after run 1. */
static void test_variable_not_cached(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 47);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    assert_non_null(s);
    assert_non_null(g);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(64, K));
    kiln_node *wv = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(N, K),
                                  kiln_init_uniform(-1, 1));
    kiln_node *y = kiln_matmul(g, x, wv, 0, 1);
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    assert_false(listing_has(f, "prepared once"));
    kiln_tensor *in = th_rand(&r, KILN_SHAPE(64, K), -1, 1);
    kiln_tensor *out = kiln_tensor_new(KILN_F32, KILN_SHAPE(64, N));
    kiln_tensor *w = kiln_tensor_new(KILN_F32, KILN_SHAPE(N, K));
    double *want = malloc(64 * N * sizeof *want);
    assert_non_null(out);
    assert_non_null(w);
    assert_non_null(want);
    for (int run = 0; run < 2; run++) {
        assert_int_equal(kiln_variable_read(s, "w", w), KILN_OK);
        assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
        want_product(kiln_tensor_f32(in), kiln_tensor_f32(w), 64, want);
        th_assert_close("x w^T", kiln_tensor_f32(out), want, 64 * N, 1e-5,
                        1e-5);
        th_fill(&r, w, -2, 2, 0);
        assert_int_equal(kiln_variable_write(s, "w", w), KILN_OK);
    }
    free(want);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_tensor_free(w);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_packed_once),
        cmocka_unit_test(test_variable_not_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
