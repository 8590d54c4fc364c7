/* Hardening of shape arithmetic (issue 9): every element count and byte size
   is checked against KILN_MAX_NUMEL, zero-size dimensions follow one rule
   (docs/ops.md, "Zero-size dimensions"), and kiln_call cannot write past its
   node map. */
#include "test_helpers.h"

#include "base/shape.h"

#define P32 ((int64_t)1 << 32)
#define P40 ((int64_t)1 << 40)

static void assert_contains(const char *haystack, const char *needle)
{
    if (!haystack || !strstr(haystack, needle))
        fail_msg("message \"%s\" does not contain \"%s\"",
                 haystack ? haystack : "(null)", needle);
}

/* ------------------------------------------------------------ the helper */

static void test_shape_size_helper(void **state)
{
    (void)state;
    int64_t n = -7;
    size_t bytes = 7;
    assert_null(kiln_shape_size(KILN_SHAPE(3, 4), 4, &n, &bytes));
    assert_int_equal(n, 12);
    assert_int_equal(bytes, 48);
    assert_null(kiln_shape_size(KILN_SCALAR, 8, &n, &bytes));
    assert_int_equal(n, 1);
    assert_int_equal(bytes, 8);
    assert_null(kiln_shape_size(KILN_SHAPE(5, 0, 7), 4, &n, &bytes));
    assert_int_equal(n, 0);
    assert_int_equal(bytes, 0);
    /* exactly at the limit, and one past it */
    assert_null(kiln_shape_size(KILN_SHAPE(P32, 256), 8, &n, &bytes));
    assert_int_equal(n, P40);
    assert_int_equal(bytes, (size_t)P40 * 8);
    n = 5;
    assert_non_null(kiln_shape_size(KILN_SHAPE(P32, 257), 1, &n, NULL));
    assert_int_equal(n, 5); /* untouched on failure */

    /* [2^32, 2^32] used to wrap to 0 elements */
    assert_contains(kiln_shape_size(KILN_SHAPE(P32, P32), 4, NULL, NULL),
                    "more than 2^40");
    /* products that wrap int64_t exactly to 0 or to a small count */
    assert_non_null(kiln_shape_size(KILN_SHAPE(P32, P32, P32), 4, NULL, NULL));
    assert_non_null(kiln_shape_size(KILN_SHAPE(INT64_MAX, 2), 1, NULL, NULL));
    /* a zero dimension does not excuse the others: strides would overflow */
    assert_non_null(kiln_shape_size(KILN_SHAPE(0, P32, P32), 4, NULL, NULL));
    assert_contains(kiln_shape_size(KILN_SHAPE(2, -1), 4, NULL, NULL),
                    "negative");
    assert_non_null(
        kiln_shape_size(KILN_SHAPE(INT64_MIN, INT64_MIN), 4, NULL, NULL));
    kiln_shape nine = {.ndim = 9, .d = {1, 1, 1, 1, 1, 1, 1, 1}};
    assert_non_null(kiln_shape_size(nine, 4, NULL, NULL));
    kiln_shape neg = {.ndim = -1};
    assert_non_null(kiln_shape_size(neg, 4, NULL, NULL));
    /* a reader's smaller limit */
    assert_null(kiln_shape_size_max(KILN_SHAPE(1024), 1024, 1, NULL, NULL));
    assert_non_null(kiln_shape_size_max(KILN_SHAPE(1025), 1024, 1, NULL, NULL));

    assert_int_equal(kiln_shape_numel(KILN_SHAPE(P32, P32)), -1);
    assert_int_equal(kiln_shape_numel(KILN_SHAPE(2, -3)), -1);
    assert_int_equal(kiln_shape_numel(KILN_SHAPE(2, 0, 3)), 0);

    int64_t s;
    assert_true(kiln_dim_add(P40 - 1, 1, &s));
    assert_int_equal(s, P40);
    assert_false(kiln_dim_add(P40, 1, &s));
    assert_false(kiln_dim_add(INT64_MAX, INT64_MAX, &s));
    assert_false(kiln_dim_add(-1, 1, &s));
    assert_true(kiln_dim_mul(P32, 256, &s));
    assert_int_equal(s, P40);
    assert_false(kiln_dim_mul(P32, P32, &s));
    assert_true(kiln_dim_mul(0, P40, &s));
    assert_int_equal(s, 0);
}

/* ------------------------------------------------------------ tensors */

static void test_tensor_new_huge(void **state)
{
    (void)state;
    assert_null(kiln_tensor_new(KILN_F32, KILN_SHAPE(P32, P32)));
    assert_contains(kiln_last_error(), "kiln_tensor_new: invalid shape");
    assert_contains(kiln_last_error(), "more than 2^40 elements");
    assert_null(kiln_tensor_new(KILN_F32, KILN_SHAPE(0, P32, P32)));
    assert_contains(kiln_last_error(), "kiln_tensor_new");
    assert_null(kiln_tensor_new(KILN_I32, KILN_SHAPE(3, -2)));
    assert_contains(kiln_last_error(), "negative dimension");
    float x = 0;
    assert_null(kiln_tensor_wrap(KILN_F32, KILN_SHAPE(P32, P32), &x));
    assert_contains(kiln_last_error(), "kiln_tensor_wrap: invalid shape");
    assert_null(kiln_tensor_from_f32(KILN_SHAPE(P32, P32), &x));
    assert_contains(kiln_last_error(), "invalid shape");
    /* zero-size tensors are fine, with or without data */
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 0));
    assert_non_null(t);
    assert_int_equal(kiln_tensor_numel(t), 0);
    kiln_tensor_free(t);
    t = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(0, 3), NULL);
    assert_non_null(t);
    kiln_tensor_free(t);
}

/* ------------------------------------------------------------ builders */

static void test_input_huge_poisons(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(P32, P32));
    assert_int_equal(kiln_node_id(x), -1);
    th_expect_graph_error(g,
                          "kiln_input: invalid shape [4294967296,4294967296]");
    /* later ops on the failed graph are cheap poison, not crashes */
    kiln_node *y = kiln_relu(g, x);
    assert_int_equal(kiln_node_id(y), -1);
    kiln_graph_free(g);

    const char *fns[] = {"kiln_variable", "kiln_fill", "kiln_constant"};
    for (int i = 0; i < 3; i++) {
        g = kiln_graph_new();
        kiln_shape s = KILN_SHAPE(P32, P32, 0);
        float v = 1;
        if (i == 0)
            kiln_variable(g, "w", KILN_F32, s, kiln_init_zeros());
        else if (i == 1)
            kiln_fill(g, s, 1.0f);
        else
            kiln_constant(g, KILN_F32, s, &v);
        th_expect_graph_error(g, fns[i]);
        th_expect_graph_error(g, "more than 2^40");
        kiln_graph_free(g);
    }
}

static void test_pad_huge(void **state)
{
    (void)state;
    int64_t cases[][2] = {{INT64_MAX, INT64_MAX},
                          {INT64_MAX - 2, 0},
                          {P40, 0},
                          {P40 - 2, 0},
                          {0, INT64_MAX - 1},
                          {(int64_t)1 << 62, (int64_t)1 << 62}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
        int64_t lo[2] = {0, cases[c][0]}, hi[2] = {0, cases[c][1]};
        kiln_node *p = kiln_pad(g, x, lo, hi, 0.0f);
        assert_int_equal(kiln_node_id(p), -1);
        th_expect_graph_error(g, "kiln_pad: invalid shape");
        kiln_graph_free(g);
    }
    /* each dimension fits but the product does not */
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    int64_t lo[2] = {P32, 0}, hi[2] = {0, P32};
    kiln_pad(g, x, lo, hi, 0.0f);
    th_expect_graph_error(g, "kiln_pad: invalid shape");
    kiln_graph_free(g);
}

static void test_other_builders_huge(void **state)
{
    (void)state;
    /* broadcasting two fine shapes into one too large */
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(P32, 1));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(1, 1024));
    th_assert_graph_ok(g);
    kiln_node *c = kiln_add(g, a, b);
    assert_int_equal(kiln_node_id(c), -1);
    th_expect_graph_error(g, "more than 2^40");
    kiln_graph_free(g);

    /* an outer product by matmul */
    g = kiln_graph_new();
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(P32, 1));
    b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(1, P32));
    kiln_matmul(g, a, b, 0, 0);
    th_expect_graph_error(g, "kiln_matmul");
    th_expect_graph_error(g, "more than 2^40");
    kiln_graph_free(g);

    /* concat whose axis sum passes the limit */
    g = kiln_graph_new();
    kiln_node *xs[3];
    for (int i = 0; i < 3; i++)
        xs[i] = kiln_input(g, "x", KILN_F32, KILN_SHAPE(P40 / 2));
    th_assert_graph_ok(g);
    kiln_concat(g, xs, 3, 0);
    th_expect_graph_error(g, "kiln_concat");
    kiln_graph_free(g);

    /* reshape targets whose product wraps */
    kiln_shape bad[] = {KILN_SHAPE(P32, P32), KILN_SHAPE(-1, P32, P32),
                        KILN_SHAPE(0, P32, P32), KILN_SHAPE(-1, 0, P32, P32)};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(0, 4));
        kiln_node *r = kiln_reshape(g, x, bad[i]);
        assert_int_equal(kiln_node_id(r), -1);
        th_expect_graph_error(g, "kiln_reshape");
        kiln_graph_free(g);
    }

    /* broadcast_to and one_hot */
    g = kiln_graph_new();
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(1, 1));
    kiln_broadcast_to(g, a, KILN_SHAPE(P32, P32));
    th_expect_graph_error(g, "kiln_broadcast_to: invalid shape");
    kiln_graph_free(g);
    g = kiln_graph_new();
    a = kiln_input(g, "l", KILN_I32, KILN_SHAPE(P32));
    kiln_one_hot(g, a, 1 << 30);
    th_expect_graph_error(g, "more than 2^40");
    kiln_graph_free(g);
}

static void test_session_declare_huge(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    assert_int_not_equal(kiln_session_declare(s, "w", KILN_F32,
                                              KILN_SHAPE(P32, P32),
                                              kiln_init_zeros(), 1),
                         KILN_OK);
    kiln_session_free(s);
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    float x;
    assert_int_not_equal(
        kiln_init_fill(kiln_init_zeros(), KILN_SHAPE(P32, P32), &x, &r),
        KILN_OK);
}

/* ------------------------------------------------------------ kiln_call */

static void test_call_into_own_graph(void **state)
{
    (void)state;
    kiln_subgraph *sg = kiln_subgraph_new("twice");
    kiln_graph *sgg = kiln_subgraph_graph(sg);
    kiln_node *x = kiln_subgraph_input(sg, "x", KILN_F32, KILN_SHAPE(2));
    kiln_subgraph_output(sg, kiln_scale(sgg, x, 2.0f));
    th_assert_graph_ok(sgg);
    int before = kiln_graph_node_count(sgg);
    kiln_node *out = NULL;
    assert_int_equal(kiln_call(sgg, sg, &x, 1, NULL, 0, &out), KILN_ERR_ARG);
    th_expect_graph_error(sgg, "kiln_call: cannot call subgraph 'twice' "
                               "into its own graph");
    assert_int_equal(kiln_node_id(out), -1);
    assert_int_equal(kiln_graph_node_count(sgg), before);
    assert_null(kiln_call_info_parent_input(
        kiln_call_with_info(sgg, sg, &x, 1, NULL, 0), x));

    /* the subgraph still works when called into another graph */
    kiln_subgraph *sg2 = kiln_subgraph_new("twice2");
    kiln_graph *g2 = kiln_subgraph_graph(sg2);
    kiln_node *x2 = kiln_subgraph_input(sg2, "x", KILN_F32, KILN_SHAPE(2));
    kiln_subgraph_output(sg2, kiln_scale(g2, x2, 2.0f));
    kiln_graph *g = kiln_graph_new();
    float v[2] = {1.5f, -3.0f};
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(2), v);
    assert_int_equal(kiln_call(g, sg2, &c, 1, NULL, 0, &out), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *t = th_eval(s, g, out);
    float want[2] = {3.0f, -6.0f};
    th_assert_close_f("call", kiln_tensor_f32(t), want, 2, 0, 0);
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
    kiln_subgraph_free(sg2);
    kiln_subgraph_free(sg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_size_helper),
        cmocka_unit_test(test_tensor_new_huge),
        cmocka_unit_test(test_input_huge_poisons),
        cmocka_unit_test(test_pad_huge),
        cmocka_unit_test(test_other_builders_huge),
        cmocka_unit_test(test_session_declare_huge),
        cmocka_unit_test(test_call_into_own_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
