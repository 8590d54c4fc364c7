/* Hardening of shape arithmetic (issue 9): every element count and byte size
   is checked against KILN_MAX_NUMEL, zero-size dimensions follow one rule
   (docs/ops.md, "Zero-size dimensions"), and kiln_call cannot write past its
   node map. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "test_helpers.h"

#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "base/shape.h"
#include "cpu/dispatch.h"
#include "graph/graph.h"

/* Under AddressSanitizer a failed huge allocation returns NULL, as it does
   in a release build, instead of aborting (ctest sets this too). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

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
    /* at the limit the shape is valid: the allocation succeeds or fails
       with a message (2^42 bytes) */
    kiln_tensor *big = kiln_tensor_new(KILN_F32, KILN_SHAPE(P40));
    if (!big)
        assert_contains(kiln_last_error(), "kiln_tensor_new: out of memory");
    kiln_tensor_free(big);
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

/* Building costs memory independent of the shapes: composites and
   gradients that fill a value of an operand's shape (batch norm's missing
   weight and bias, a zero gradient, the seed of a gradient) over a valid
   2^40-element shape build at once (they allocated 4 TB and failed "out of
   memory", or, where the allocation succeeds, filled it: fuzz_graph timed
   out in a batch norm of [1, 2^31, ...]), and small ones stay constants. */
static void test_builders_fill_nothing_huge(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    assert_non_null(g);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(1, P40 / 2, 2));
    kiln_node *y = kiln_batch_norm(g, x, NULL, NULL, NULL, NULL, 0.1f, 1e-5f);
    th_assert_graph_ok(g);
    assert_int_equal(kiln_node_shape(y).d[1], P40 / 2);
    kiln_node *big = kiln_input(g, "big", KILN_F32, KILN_SHAPE(P40));
    kiln_node *small = kiln_input(g, "small", KILN_F32, KILN_SHAPE(2));
    kiln_node *loss = kiln_sum(g, small, KILN_ALL_AXES, 0);
    kiln_node *d = kiln_grad(g, loss, big); /* zero: loss ignores big */
    th_assert_graph_ok(g);
    assert_int_equal(kiln_node_shape(d).d[0], P40);
    /* the seed of y's gradient has y's shape */
    kiln_node *wrt[1] = {x}, *dx = NULL;
    assert_int_equal(
        kiln_grads(g, kiln_sum(g, y, KILN_ALL_AXES, 0), NULL, wrt, 1, &dx),
        KILN_OK);
    assert_int_equal(kiln_node_shape(dx).d[1], P40 / 2);
    /* a small zero gradient is a filled constant, as before */
    assert_string_equal(kiln_node_op_name(kiln_grad(g, loss, x)), "broadcast");
    kiln_node *z =
        kiln_grad(g, loss, kiln_input(g, "z", KILN_F32, KILN_SHAPE(3, 4)));
    assert_string_equal(kiln_node_op_name(z), "constant");
    th_assert_graph_ok(g);
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

/* ------------------------------------------------------------ zero-size */

/* A zero-size case: f32 variables of the given shapes holding 1, 2, 3...,
   an output built from them, its value, and the gradients of sum(y) with
   respect to each variable (PyTorch's values for the same graph). */
typedef kiln_node *(*zbuild)(kiln_graph *g, kiln_node **v);
typedef struct zcase {
    const char *name;
    int nv;
    kiln_shape vs[3];
    zbuild build;
    kiln_shape ys;
    double y[8];
    int grads;
    double dv[3][8];
} zcase;

static kiln_node *z_leaves(kiln_graph *g, const zcase *c, kiln_node **v)
{
    float vals[64];
    for (int i = 0; i < 64; i++)
        vals[i] = (float)(i + 1);
    for (int i = 0; i < c->nv; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        assert_true(kiln_shape_numel(c->vs[i]) <= 64);
        v[i] =
            kiln_variable(g, name, KILN_F32, c->vs[i], kiln_init_values(vals));
    }
    return c->build(g, v);
}

static void z_check(const char *what, const zcase *c, const kiln_tensor *t,
                    kiln_shape want_shape, const double *want)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s: %s", c->name, what);
    assert_non_null(t);
    th_assert_shape(kiln_tensor_shape(t), want_shape);
    int64_t n = kiln_tensor_numel(t);
    float got[8];
    assert_true(n <= 8);
    for (int64_t i = 0; i < n; i++)
        got[i] = kiln_tensor_dtype(t) == KILN_I32 ? (float)kiln_tensor_i32(t)[i]
                                                  : kiln_tensor_f32(t)[i];
    th_assert_close(msg, got, want, n, 1e-6, 1e-6);
}

static void z_compiled(const zcase *c)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *v[3], *outs[4], *loss = NULL;
    outs[0] = z_leaves(g, c, v);
    if (c->grads) {
        loss = kiln_sum(g, outs[0], KILN_ALL_AXES, 0);
        assert_int_equal(kiln_grads(g, loss, NULL, v, c->nv, outs + 1),
                         KILN_OK);
    }
    int n_out = 1 + (c->grads ? c->nv : 0);
    kiln_tensor *got[4] = {0};
    kiln_session *s = kiln_session_new(NULL);
    th_run(s, g, outs, n_out, NULL, NULL, 0, got);
    z_check("compiled value", c, got[0], c->ys, c->y);
    for (int i = 1; i < n_out; i++)
        z_check("compiled gradient", c, got[i], c->vs[i - 1], c->dv[i - 1]);
    for (int i = 0; i < n_out; i++)
        kiln_tensor_free(got[i]);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void z_dynamic(const zcase *c)
{
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *v[3];
    kiln_node *y = z_leaves(g, c, v);
    kiln_node *loss = c->grads ? kiln_sum(g, y, KILN_ALL_AXES, 0) : NULL;
    th_assert_graph_ok(g);
    if (kiln_forward(s, g) != KILN_OK)
        fail_msg("%s: kiln_forward: %s", c->name, kiln_session_error(s));
    kiln_tensor *t = kiln_node_value(s, y);
    z_check("dynamic value", c, t, c->ys, c->y);
    kiln_tensor_free(t);
    if (c->grads) {
        if (kiln_backward(s, g, loss) != KILN_OK)
            fail_msg("%s: kiln_backward: %s", c->name, kiln_session_error(s));
        for (int i = 0; i < c->nv; i++) {
            t = kiln_node_grad(s, v[i]);
            if (!t)
                fail_msg("%s: kiln_node_grad: %s", c->name,
                         kiln_session_error(s));
            z_check("dynamic gradient", c, t, c->vs[i], c->dv[i]);
            kiln_tensor_free(t);
        }
    }
    kiln_session_free(s);
    kiln_graph_free(g);
}

static kiln_node *z_add(kiln_graph *g, kiln_node **v)
{
    return kiln_add(g, v[0], v[1]);
}
static kiln_node *z_sum0(kiln_graph *g, kiln_node **v)
{
    return kiln_sum(g, v[0], KILN_AXIS(0), 0);
}
static kiln_node *z_mean0(kiln_graph *g, kiln_node **v)
{
    return kiln_mean(g, v[0], KILN_AXIS(0), 0);
}
static kiln_node *z_sum_all(kiln_graph *g, kiln_node **v)
{
    return kiln_sum(g, v[0], KILN_ALL_AXES, 0);
}
static kiln_node *z_mean_all(kiln_graph *g, kiln_node **v)
{
    return kiln_mean(g, v[0], KILN_ALL_AXES, 0);
}
static kiln_node *z_sum1_keep(kiln_graph *g, kiln_node **v)
{
    return kiln_sum(g, v[0], KILN_AXIS(1), 1);
}
static kiln_node *z_mean1_keep(kiln_graph *g, kiln_node **v)
{
    return kiln_mean(g, v[0], KILN_AXIS(1), 1);
}
static kiln_node *z_matmul(kiln_graph *g, kiln_node **v)
{
    return kiln_matmul(g, v[0], v[1], 0, 0);
}
static kiln_node *z_matmul_tt(kiln_graph *g, kiln_node **v)
{
    return kiln_matmul(g, v[0], v[1], 1, 1);
}
static kiln_node *z_softmax1(kiln_graph *g, kiln_node **v)
{
    return kiln_softmax(g, v[0], 1);
}
static kiln_node *z_ce_labels(kiln_graph *g, kiln_node **v, kiln_reduction red)
{
    kiln_node *lab = kiln_constant(g, KILN_I32, KILN_SHAPE(0), NULL);
    return kiln_softmax_cross_entropy_reduce(g, v[0], lab, red);
}
static kiln_node *z_ce_mean(kiln_graph *g, kiln_node **v)
{
    return z_ce_labels(g, v, KILN_REDUCE_MEAN);
}
static kiln_node *z_ce_sum(kiln_graph *g, kiln_node **v)
{
    return z_ce_labels(g, v, KILN_REDUCE_SUM);
}
static kiln_node *z_nll(kiln_graph *g, kiln_node **v)
{
    kiln_node *lab = kiln_constant(g, KILN_I32, KILN_SHAPE(0), NULL);
    kiln_node *loss = NULL, *d = NULL;
    kiln_nll_loss_with_softmax_grad(g, kiln_softmax(g, v[0], 1), lab, &loss,
                                    &d);
    return loss;
}
static kiln_node *z_bce(kiln_graph *g, kiln_node **v)
{
    kiln_node *p = kiln_sigmoid(g, v[0]);
    return kiln_binary_cross_entropy(g, p, kiln_scale(g, p, 0.5f));
}
static kiln_node *z_pad(kiln_graph *g, kiln_node **v)
{
    int64_t lo[2] = {1, 0}, hi[2] = {1, 0};
    return kiln_pad(g, v[0], lo, hi, 5.0f);
}
static kiln_node *z_concat(kiln_graph *g, kiln_node **v)
{
    kiln_node *xs[3] = {v[1], v[0], v[1]};
    return kiln_concat(g, xs, 3, 0);
}
static kiln_node *z_slice(kiln_graph *g, kiln_node **v)
{
    int64_t a[2] = {1, 0}, b[2] = {1, 3};
    return kiln_slice(g, v[0], a, b);
}
static kiln_node *z_reshape(kiln_graph *g, kiln_node **v)
{
    return kiln_reshape(g, v[0], KILN_SHAPE(3, -1));
}
static kiln_node *z_transpose(kiln_graph *g, kiln_node **v)
{
    return kiln_transpose(g, v[0]);
}
static kiln_node *z_broadcast(kiln_graph *g, kiln_node **v)
{
    return kiln_broadcast_to(g, v[0], KILN_SHAPE(0, 3));
}
static kiln_node *z_rmax1(kiln_graph *g, kiln_node **v)
{
    return kiln_reduce_max(g, v[0], KILN_AXIS(1), 0);
}
static kiln_node *z_chain(kiln_graph *g, kiln_node **v)
{
    kiln_node *x = v[0];
    return kiln_add(g, kiln_mul(g, kiln_exp(g, x), kiln_relu(g, x)),
                    kiln_scalar(g, 1.0f));
}
static kiln_node *z_gelu(kiln_graph *g, kiln_node **v)
{
    return kiln_gelu(g, v[0]);
}
static kiln_node *z_argmax(kiln_graph *g, kiln_node **v)
{
    return kiln_argmax(g, v[0], 1);
}
static kiln_node *z_one_hot(kiln_graph *g, kiln_node **v)
{
    (void)v;
    return kiln_one_hot(g, kiln_constant(g, KILN_I32, KILN_SHAPE(0), NULL), 4);
}
static kiln_node *z_fused_sum(kiln_graph *g, kiln_node **v)
{
    return kiln_sum(g, kiln_exp(g, kiln_scale(g, v[0], 2.0f)), KILN_AXIS(0), 1);
}
static kiln_node *z_select(kiln_graph *g, kiln_node **v)
{
    return kiln_select(g, kiln_gt(g, v[0], kiln_scalar(g, 1.0f)), v[0], v[1]);
}
static kiln_node *z_permute3(kiln_graph *g, kiln_node **v)
{
    int perm[3] = {2, 0, 1};
    return kiln_permute(g, v[0], perm);
}
static kiln_node *z_mean_max(kiln_graph *g, kiln_node **v)
{
    /* a max over the non-empty axis, then a mean over the empty one */
    return kiln_mean(g, kiln_reduce_max(g, v[0], KILN_AXIS(1), 0),
                     KILN_ALL_AXES, 0);
}
static kiln_node *z_cast(kiln_graph *g, kiln_node **v)
{
    return kiln_cast(g, v[0], KILN_I32);
}

static void test_zero_size_ops(void **state)
{
    (void)state;
    /* clang-format off */
    const zcase zcases[] = {
        {"add broadcast", 2, {KILN_SHAPE(0, 3), KILN_SHAPE(3)}, z_add,
         KILN_SHAPE(0, 3), {0}, 1, {{0}, {0, 0, 0}}},
        {"sum over an empty axis", 1, {KILN_SHAPE(0, 3)}, z_sum0,
         KILN_SHAPE(3), {0, 0, 0}, 1, {{0}}},
        {"mean over an empty axis", 1, {KILN_SHAPE(0, 3)}, z_mean0,
         KILN_SHAPE(3), {NAN, NAN, NAN}, 1, {{0}}},
        {"sum of nothing", 1, {KILN_SHAPE(2, 0)}, z_sum_all,
         KILN_SCALAR, {0}, 1, {{0}}},
        {"mean of nothing", 1, {KILN_SHAPE(2, 0)}, z_mean_all,
         KILN_SCALAR, {NAN}, 1, {{0}}},
        {"sum keepdims", 1, {KILN_SHAPE(2, 0)}, z_sum1_keep,
         KILN_SHAPE(2, 1), {0, 0}, 1, {{0}}},
        {"mean keepdims", 1, {KILN_SHAPE(2, 0)}, z_mean1_keep,
         KILN_SHAPE(2, 1), {NAN, NAN}, 1, {{0}}},
        {"matmul with k = 0", 2, {KILN_SHAPE(2, 0), KILN_SHAPE(0, 3)},
         z_matmul, KILN_SHAPE(2, 3), {0, 0, 0, 0, 0, 0}, 1, {{0}, {0}}},
        {"matmul^T with k = 0", 2, {KILN_SHAPE(0, 2), KILN_SHAPE(3, 0)},
         z_matmul_tt, KILN_SHAPE(2, 3), {0, 0, 0, 0, 0, 0}, 1, {{0}, {0}}},
        {"matmul with m = 0", 2, {KILN_SHAPE(0, 2), KILN_SHAPE(2, 3)},
         z_matmul, KILN_SHAPE(0, 3), {0}, 1, {{0}, {0, 0, 0, 0, 0, 0}}},
        {"batched matmul with k = 0", 2,
         {KILN_SHAPE(2, 1, 0), KILN_SHAPE(2, 0, 2)}, z_matmul,
         KILN_SHAPE(2, 1, 2), {0, 0, 0, 0}, 1, {{0}, {0}}},
        {"batched matmul with no batches", 2,
         {KILN_SHAPE(0, 1, 2), KILN_SHAPE(2, 3)}, z_matmul,
         KILN_SHAPE(0, 1, 3), {0}, 1, {{0}, {0, 0, 0, 0, 0, 0}}},
        {"softmax of no rows", 1, {KILN_SHAPE(0, 3)}, z_softmax1,
         KILN_SHAPE(0, 3), {0}, 1, {{0}}},
        {"softmax cross-entropy mean of no rows", 1, {KILN_SHAPE(0, 3)},
         z_ce_mean, KILN_SCALAR, {NAN}, 1, {{0}}},
        {"softmax cross-entropy sum of no rows", 1, {KILN_SHAPE(0, 3)},
         z_ce_sum, KILN_SCALAR, {0}, 1, {{0}}},
        {"nll loss of no rows", 1, {KILN_SHAPE(0, 3)}, z_nll,
         KILN_SCALAR, {NAN}, 0, {{0}}},
        {"binary cross-entropy of nothing", 1, {KILN_SHAPE(0, 3)}, z_bce,
         KILN_SCALAR, {NAN}, 1, {{0}}},
        {"pad an empty tensor", 1, {KILN_SHAPE(0, 2)}, z_pad,
         KILN_SHAPE(2, 2), {5, 5, 5, 5}, 1, {{0}}},
        {"concat with an empty part", 2, {KILN_SHAPE(0, 2), KILN_SHAPE(1, 2)},
         z_concat, KILN_SHAPE(2, 2), {1, 2, 1, 2}, 1, {{0}, {2, 2}}},
        {"empty slice", 1, {KILN_SHAPE(2, 3)}, z_slice,
         KILN_SHAPE(0, 3), {0}, 1, {{0, 0, 0, 0, 0, 0}}},
        {"reshape inferring around 0", 1, {KILN_SHAPE(0, 3)}, z_reshape,
         KILN_SHAPE(3, 0), {0}, 1, {{0}}},
        {"transpose", 1, {KILN_SHAPE(0, 3)}, z_transpose,
         KILN_SHAPE(3, 0), {0}, 1, {{0}}},
        {"permute 3-d", 1, {KILN_SHAPE(2, 0, 3)}, z_permute3,
         KILN_SHAPE(3, 2, 0), {0}, 1, {{0}}},
        {"broadcast to zero rows", 1, {KILN_SHAPE(1, 3)}, z_broadcast,
         KILN_SHAPE(0, 3), {0}, 1, {{0, 0, 0}}},
        {"max over a non-empty axis", 1, {KILN_SHAPE(0, 3)}, z_rmax1,
         KILN_SHAPE(0), {0}, 1, {{0}}},
        {"mean of maxes of no rows", 1, {KILN_SHAPE(0, 3)}, z_mean_max,
         KILN_SCALAR, {NAN}, 1, {{0}}},
        {"fused chain", 1, {KILN_SHAPE(2, 0)}, z_chain,
         KILN_SHAPE(2, 0), {0}, 1, {{0}}},
        {"fused sum over an empty axis", 1, {KILN_SHAPE(0, 3)}, z_fused_sum,
         KILN_SHAPE(1, 3), {0, 0, 0}, 1, {{0}}},
        {"select", 2, {KILN_SHAPE(0, 3), KILN_SHAPE(3)}, z_select,
         KILN_SHAPE(0, 3), {0}, 1, {{0}, {0, 0, 0}}},
        {"gelu", 1, {KILN_SHAPE(0, 3)}, z_gelu,
         KILN_SHAPE(0, 3), {0}, 1, {{0}}},
        {"argmax over a non-empty axis", 1, {KILN_SHAPE(0, 3)}, z_argmax,
         KILN_SHAPE(0), {0}, 0, {{0}}},
        {"one-hot of no labels", 0, {KILN_SCALAR}, z_one_hot,
         KILN_SHAPE(0, 4), {0}, 0, {{0}}},
        {"cast", 1, {KILN_SHAPE(0, 3)}, z_cast,
         KILN_SHAPE(0, 3), {0}, 0, {{0}}},
    };
    /* clang-format on */
    int saved = kiln_set_reference_kernels(-1);
    for (int ref = 0; ref < 2; ref++) {
        kiln_set_reference_kernels(ref);
        for (size_t i = 0; i < sizeof zcases / sizeof *zcases; i++) {
            z_compiled(&zcases[i]);
            z_dynamic(&zcases[i]);
        }
    }
    kiln_set_reference_kernels(saved);
}

/* A value of no elements whose other dimensions are huge ([2^18, 2^20, 0,
   3]: 2^38 batches of empty products) costs nothing to compute: kernels
   of an empty result are skipped (fuzz_graph found a [2^32, 0, 0] matmul
   running 2^32 empty products).  Compiled with and without folding (a
   fill operand is folded by the reference kernels) and dynamic, with both
   kernel sets; the whole test takes milliseconds, a loop over the batches
   hours. */
static kiln_node *e_matmul(kiln_graph *g, kiln_node *x)
{
    return kiln_matmul(g, x, kiln_fill(g, KILN_SHAPE(3, 2), 1.0f), 0, 0);
}
static kiln_node *e_concat(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[2] = {x, x};
    return kiln_concat(g, xs, 2, 2);
}
static kiln_node *e_sum(kiln_graph *g, kiln_node *x)
{
    return kiln_sum(g, x, KILN_AXIS(0) | KILN_AXIS(1), 0);
}
static kiln_node *e_exp(kiln_graph *g, kiln_node *x)
{
    return kiln_exp(g, x);
}

static void test_empty_huge_dims_cost_nothing(void **state)
{
    (void)state;
    kiln_node *(*const ops[])(kiln_graph *, kiln_node *) = {e_matmul, e_concat,
                                                            e_sum, e_exp};
    const kiln_shape xs = KILN_SHAPE((int64_t)1 << 18, (int64_t)1 << 20, 0, 3);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int ref = -1; ref <= 1; ref += 2)
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
            for (int mode = 0; mode < 3; mode++) {
                kiln_session_options so = {.seed = 1, .reference_kernels = ref};
                kiln_session *s = kiln_session_new(&so);
                kiln_graph *g = kiln_graph_new();
                assert_non_null(s);
                assert_non_null(g);
                /* mode 2: the operand is a constant (numel 0, no data) */
                kiln_node *x = mode == 2 ? kiln_constant(g, KILN_F32, xs, NULL)
                                         : kiln_input(g, "x", KILN_F32, xs);
                kiln_node *y = ops[i](g, x);
                assert_int_equal(kiln_graph_status(g), KILN_OK);
                assert_int_equal(kiln_shape_numel(kiln_node_shape(y)), 0);
                kiln_tensor *t = kiln_tensor_new(KILN_F32, xs);
                assert_non_null(t);
                if (mode == 1) {
                    assert_int_equal(kiln_feed(s, x, t), KILN_OK);
                    assert_int_equal(kiln_forward(s, g), KILN_OK);
                } else {
                    kiln_function *f =
                        kiln_compile(s, g, &y, 1, &x, mode == 0 ? 1 : 0);
                    assert_non_null(f);
                    kiln_tensor *out = kiln_function_new_output(f, 0);
                    assert_non_null(out);
                    assert_int_equal(kiln_run(f, &t, &out), KILN_OK);
                    kiln_tensor_free(out);
                }
                kiln_tensor_free(t);
                kiln_graph_free(g);
                kiln_session_free(s);
            }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (secs > 10)
        fail_msg("24 runs of empty values took %.1f s", secs);
}

/* Reductions that have no value over an empty axis are refused when built,
   naming the op; so are softmaxes over an empty axis. */
static void test_zero_size_refused(void **state)
{
    (void)state;
    struct {
        kiln_shape s;
        int what;
        const char *msg;
    } cases[] = {
        {KILN_SHAPE(0, 3), 0,
         "kiln_reduce_max: cannot reduce over a zero-size dimension"},
        {KILN_SHAPE(2, 0), 1,
         "kiln_reduce_max: cannot reduce over a zero-size dimension"},
        {KILN_SHAPE(3, 0), 2, "kiln_argmax: axis 1 is empty"},
        {KILN_SHAPE(3, 0), 3, "kiln_softmax: cannot take a softmax over"},
        {KILN_SHAPE(3, 0), 4, "kiln_log_softmax: cannot take a softmax over"},
        {KILN_SHAPE(4, 0), 5, "kiln_softmax_cross_entropy: logits [4,0]"},
        {KILN_SHAPE(0, 0), 5, "kiln_softmax_cross_entropy: logits [0,0]"},
        {KILN_SHAPE(4, 0), 6, "kiln_nll_loss_with_softmax_grad: probs [4,0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, cases[i].s);
        kiln_node *lab =
            kiln_input(g, "l", KILN_I32, KILN_SHAPE(cases[i].s.d[0]));
        kiln_node *y = NULL, *d = NULL;
        switch (cases[i].what) {
        case 0:
            y = kiln_reduce_max(g, x, KILN_AXIS(0), 0);
            break;
        case 1:
            y = kiln_reduce_max(g, x, KILN_ALL_AXES, 1);
            break;
        case 2:
            y = kiln_argmax(g, x, -1);
            break;
        case 3:
            y = kiln_softmax(g, x, 1);
            break;
        case 4:
            y = kiln_log_softmax(g, x, -1);
            break;
        case 5:
            y = kiln_softmax_cross_entropy(g, x, lab);
            break;
        case 6:
            kiln_nll_loss_with_softmax_grad(g, x, lab, &y, &d);
            break;
        }
        assert_int_equal(kiln_node_id(y), -1);
        th_expect_graph_error(g, cases[i].msg);
        kiln_graph_free(g);
    }
}

/* The kernels the issue named: softmax cross-entropy of [N, 0] logits used
   to divide by zero; with the builder refusing it, a graph that reaches the
   kernel anyway (through a node made without the builder) must not crash
   either. */
static void test_softmax_ce_no_classes_kernel(void **state)
{
    (void)state;
    int saved = kiln_set_reference_kernels(-1);
    for (int ref = 0; ref < 2; ref++) {
        kiln_set_reference_kernels(ref);
        kiln_graph *g = kiln_graph_new();
        float dummy = 0;
        kiln_node *x = kiln_constant(g, KILN_F32, KILN_SHAPE(3, 0), &dummy);
        int32_t l[3] = {0, 1, 2};
        kiln_node *lab = kiln_constant(g, KILN_I32, KILN_SHAPE(3), l);
        kiln_node *in[2] = {x, lab};
        kiln_node *y =
            kiln_node_make(g, KILN_OP_SOFTMAX_CE, KILN_F32, KILN_SCALAR, in, 2);
        y->at.axes = 3u;
        kiln_session *s = kiln_session_new(NULL);
        assert_int_equal(kiln_forward(s, g), KILN_OK);
        assert_true(isnan(kiln_node_value_f32(s, y)[0]));
        kiln_session_free(s);
        kiln_graph_free(g);
    }
    kiln_set_reference_kernels(saved);
}

/* ------------------------------------------------------------ elsewhere */

static void test_mixture_huge(void **state)
{
    (void)state;
    double p[2] = {0.5, 0.5};
    /* 2 x 2^20 x 2^20 floats: the int product used to wrap to 0 */
    assert_null(kiln_mixture_new(p, 2, 1 << 20, 1));
    assert_contains(kiln_last_error(), "kiln_mixture_new: [2,1048576,1048576]");
    assert_contains(kiln_last_error(), "more than 2^40");
    kiln_mixture *m = kiln_mixture_new(p, 2, 3, 1);
    assert_non_null(m);
    float x[6];
    int32_t y[2];
    assert_int_equal(kiln_mixture_batch(m, 2, x, y), KILN_OK);
    kiln_mixture_free(m);
}

static void test_too_many_classes(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input(g, "x", KILN_F32, KILN_SHAPE(1, (int64_t)1 << 31));
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(1));
    th_assert_graph_ok(g);
    kiln_softmax_cross_entropy(g, x, l);
    th_expect_graph_error(g, "more than 2147483647 classes");
    kiln_graph_free(g);
}

/* Extreme arguments anywhere a size is computed: an error, never a crash
   or a UBSan report (the sanitizer build aborts on one). */
static void test_extreme_arguments(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    int64_t a[2] = {INT64_MIN, INT64_MIN}, b[2] = {INT64_MAX, INT64_MAX};
    kiln_slice(g, x, a, b);
    th_expect_graph_error(g, "kiln_slice");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_slice(g, x, b, a);
    th_expect_graph_error(g, "kiln_slice");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_pad(g, x, a, b, 0.0f);
    th_expect_graph_error(g, "kiln_pad");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_reshape(g, x, KILN_SHAPE(INT64_MIN, -1));
    th_expect_graph_error(g, "kiln_reshape");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_reshape(g, x, KILN_SHAPE(-1, INT64_MAX));
    th_expect_graph_error(g, "kiln_reshape");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_concat(g, &x, 1, INT_MIN);
    th_expect_graph_error(g, "kiln_concat");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_softmax(g, x, INT_MIN);
    th_expect_graph_error(g, "kiln_softmax");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_dot(g, x, x, INT_MAX);
    th_expect_graph_error(g, "kiln_dot");
    kiln_graph_clear(g);
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(P32));
    kiln_one_hot(g, l, INT_MAX);
    th_expect_graph_error(g, "kiln_one_hot");
    kiln_graph_clear(g);

    /* named axes: lengths and dual positions at their limits */
    kiln_axis big = kiln_axis_make("B", P32, 0);
    kiln_axis c = kiln_axis_make("C", P32, 0);
    kiln_ax_placeholder(g, "x", KILN_AXES(big, c));
    th_expect_graph_error(g, "more than 2^40");
    kiln_graph_clear(g);
    kiln_axis d = kiln_axis_dual(kiln_axis_dual(c, INT_MAX), 1);
    assert_int_equal(d.length, -1);
    d = kiln_axis_dual(kiln_axis_dual(c, INT_MIN), -1);
    assert_int_equal(d.length, -1);
    kiln_ax_placeholder(g, "x", KILN_AXES(d));
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    kiln_graph_free(g);
}

/* A zero-size variable trains (Adam with gradient clipping, whose global
   norm includes the empty gradient) and saves and loads in every format. */
static void test_zero_size_variable_train_save(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln_harden_shapes_XXXXXX", paths[3][64];
    assert_non_null(mkdtemp(dir));
    const char *ext[] = {"npz", "bin", "safetensors"};
    for (int f = 0; f < 3; f++) {
        snprintf(paths[f], sizeof paths[f], "%s/zero.%s", dir, ext[f]);
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        float bv[3] = {1, 2, 3};
        kiln_node *w =
            kiln_variable(g, "w", KILN_F32, KILN_SHAPE(0, 3), kiln_init_ones());
        kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3),
                                     kiln_init_values(bv));
        kiln_node *loss =
            kiln_add(g, kiln_sum(g, kiln_add(g, w, b), KILN_ALL_AXES, 0),
                     kiln_sum(g, b, KILN_ALL_AXES, 0));
        kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
        o.lr = 0.1f;
        o.clip_norm = 10.0f;
        kiln_optimizer *opt = kiln_optimizer_new(s, &o);
        assert_non_null(opt);
        if (kiln_backprop(s, g, loss) != KILN_OK ||
            kiln_optimizer_update(opt, g) != KILN_OK)
            fail_msg("%s", kiln_session_error(s));
        /* the first Adam step moves every element by lr (dloss/db = 1) */
        kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
        assert_int_equal(kiln_variable_read(s, "b", t), KILN_OK);
        float want[3] = {0.9f, 1.9f, 2.9f};
        th_assert_close_f("b after one step", kiln_tensor_f32(t), want, 3, 1e-5,
                          1e-6);
        if (kiln_session_save(s, paths[f]) != KILN_OK)
            fail_msg("save %s: %s", paths[f], kiln_session_error(s));
        kiln_session *s2 = kiln_session_new(NULL);
        if (kiln_session_load(s2, paths[f]) != KILN_OK)
            fail_msg("load %s: %s", paths[f], kiln_session_error(s2));
        kiln_tensor *e = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 3));
        assert_int_equal(kiln_variable_read(s2, "w", e), KILN_OK);
        assert_int_equal(kiln_variable_read(s2, "b", t), KILN_OK);
        th_assert_close_f("b loaded", kiln_tensor_f32(t), want, 3, 1e-6, 0);
        remove(paths[f]);
        kiln_tensor_free(e);
        kiln_tensor_free(t);
        kiln_session_free(s2);
        kiln_optimizer_free(opt);
        kiln_graph_free(g);
        kiln_session_free(s);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_size_helper),
        cmocka_unit_test(test_tensor_new_huge),
        cmocka_unit_test(test_input_huge_poisons),
        cmocka_unit_test(test_pad_huge),
        cmocka_unit_test(test_other_builders_huge),
        cmocka_unit_test(test_builders_fill_nothing_huge),
        cmocka_unit_test(test_session_declare_huge),
        cmocka_unit_test(test_call_into_own_graph),
        cmocka_unit_test(test_zero_size_ops),
        cmocka_unit_test(test_zero_size_refused),
        cmocka_unit_test(test_empty_huge_dims_cost_nothing),
        cmocka_unit_test(test_softmax_ce_no_classes_kernel),
        cmocka_unit_test(test_mixture_huge),
        cmocka_unit_test(test_too_many_classes),
        cmocka_unit_test(test_extreme_arguments),
        cmocka_unit_test(test_zero_size_variable_train_save),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
