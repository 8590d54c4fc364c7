/* The public API under hostile calls: absurd shapes (dimensions near
   INT64_MAX, negative, ranks past KILN_MAX_DIMS), unknown dtypes, NULLs,
   and calls in the wrong order (run after a failed compile, a function or
   program kept past its session, backward before forward).  Each must fail
   with a non-zero status and a message naming the call and the problem,
   leave what the caller already holds as it was, and stay clean under the
   sanitizer build (ASan, UBSan, LeakSanitizer). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "test_helpers.h"

#include <limits.h>
#include <unistd.h>

/* Under AddressSanitizer a failed huge allocation returns NULL, as it does
   in a release build, instead of aborting (ctest sets this too). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static void want_msg(const char *msg, const char *part)
{
    if (!msg || !strstr(msg, part))
        fail_msg("message \"%s\" lacks \"%s\"", msg ? msg : "(null)", part);
}

/* A shape of ndim dims, each d (ndim is stored as given, even past the
   array). */
static kiln_shape shape_of(int ndim, int64_t d)
{
    kiln_shape s = {.ndim = ndim};
    for (int k = 0; k < KILN_MAX_DIMS; k++)
        s.d[k] = d;
    return s;
}

/* ------------------------------------------------------ shapes, tensors */

static void test_tensor_hostile_shapes(void **state)
{
    (void)state;
    const kiln_shape bad[] = {
        shape_of(-1, 1),
        shape_of(KILN_MAX_DIMS + 1, 1),
        shape_of(INT_MAX, 1),
        shape_of(INT_MIN, 1),
        KILN_SHAPE(INT64_MAX),
        KILN_SHAPE(INT64_MIN),
        KILN_SHAPE(2, -1),
        KILN_SHAPE(INT64_MAX, INT64_MAX),
        KILN_SHAPE((int64_t)1 << 32, (int64_t)1 << 32),
        KILN_SHAPE(3, (int64_t)1 << 62, 0), /* zero does not hide a bad dim */
        shape_of(KILN_MAX_DIMS, 1 << 6),    /* 2^48 elements */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char buf[16];
        assert_int_equal(kiln_shape_numel(bad[k]), -1);
        /* printing any shape into a short buffer stays inside it */
        assert_ptr_equal(kiln_shape_str(bad[k], buf, sizeof buf), buf);
        assert_true(strlen(buf) < sizeof buf);
        assert_null(kiln_tensor_new(KILN_F32, bad[k]));
        want_msg(kiln_last_error(), "kiln_tensor_new: invalid shape");
        float x = 0;
        assert_null(kiln_tensor_wrap(KILN_F32, bad[k], &x));
        want_msg(kiln_last_error(), "kiln_tensor_wrap: invalid shape");
        assert_null(kiln_tensor_from_f32(bad[k], &x));
        want_msg(kiln_last_error(), "kiln_tensor_from_f32");
    }
    char one[1] = {'x'};
    kiln_shape_str(KILN_SHAPE(1, 2), one, 1);
    assert_int_equal(one[0], 0);
}

static void test_tensor_bad_dtypes(void **state)
{
    (void)state;
    const kiln_dtype bad[] = {KILN_F16, KILN_BF16,      KILN_F64,
                              KILN_U8,  (kiln_dtype)99, (kiln_dtype)-1};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        assert_null(kiln_tensor_new(bad[k], KILN_SHAPE(2)));
        want_msg(kiln_last_error(), "kiln_tensor_new: unsupported dtype");
    }
    assert_string_equal(kiln_dtype_name((kiln_dtype)99), "?");
    assert_int_equal(kiln_dtype_size((kiln_dtype)-1), 0);
    assert_non_null(kiln_status_str((kiln_status)-5));
    assert_non_null(kiln_status_str((kiln_status)1000));
    /* typed views refuse the other dtype */
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(3));
    assert_non_null(t);
    assert_null(kiln_tensor_f32(t));
    assert_non_null(kiln_tensor_i32(t));
    kiln_tensor_free(t);
    assert_null(kiln_tensor_data(NULL));
    assert_int_equal(kiln_tensor_numel(NULL), 0);
}

/* ------------------------------------------------------------- builders */

static void test_builders_hostile_shapes(void **state)
{
    (void)state;
    const kiln_shape bad[] = {
        shape_of(-1, 1),
        shape_of(KILN_MAX_DIMS + 1, 1),
        KILN_SHAPE(INT64_MAX),
        KILN_SHAPE(-3, 2),
        KILN_SHAPE((int64_t)1 << 32, (int64_t)1 << 32),
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        kiln_graph *g = kiln_graph_new();
        float v[4] = {0};
        kiln_node *x = kiln_input(g, "x", KILN_F32, bad[k]);
        assert_non_null(x); /* a poisoned node */
        assert_int_equal(kiln_graph_status(g), KILN_ERR_SHAPE);
        want_msg(kiln_graph_error(g), "kiln_input");
        kiln_graph_clear(g);
        kiln_constant(g, KILN_F32, bad[k], v);
        want_msg(kiln_graph_error(g), "kiln_constant");
        kiln_graph_clear(g);
        kiln_fill(g, bad[k], 1.0f);
        want_msg(kiln_graph_error(g), "kiln_fill");
        kiln_graph_clear(g);
        kiln_variable(g, "W", KILN_F32, bad[k], kiln_init_zeros());
        want_msg(kiln_graph_error(g), "kiln_variable");
        kiln_graph_clear(g);
        kiln_node *ok = kiln_input(g, "y", KILN_F32, KILN_SHAPE(2, 2));
        kiln_reshape(g, ok, bad[k]);
        want_msg(kiln_graph_error(g), "kiln_reshape");
        kiln_graph_clear(g);
        ok = kiln_input(g, "y", KILN_F32, KILN_SHAPE(2, 2));
        kiln_broadcast_to(g, ok, bad[k]);
        want_msg(kiln_graph_error(g), "kiln_broadcast_to");
        /* a session refuses the shape too, keeping what it holds */
        kiln_session *s = kiln_session_new(NULL);
        assert_int_equal(kiln_session_declare(s, "W", KILN_F32, KILN_SHAPE(2),
                                              kiln_init_value(3), 1),
                         KILN_OK);
        assert_int_not_equal(kiln_session_declare(s, "V", KILN_F32, bad[k],
                                                  kiln_init_zeros(), 1),
                             KILN_OK);
        want_msg(kiln_session_error(s), "kiln_session_declare");
        assert_int_equal(kiln_session_num_variables(s), 1);
        kiln_session_free(s);
        kiln_graph_free(g);
    }
}

static void test_builders_bad_dtypes(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_input(g, "h", KILN_F16, KILN_SHAPE(2));
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    want_msg(kiln_graph_error(g), "kiln_input");
    kiln_graph_clear(g);
    kiln_input(g, "h", (kiln_dtype)77, KILN_SHAPE(2));
    want_msg(kiln_graph_error(g), "kiln_input");
    kiln_graph_clear(g);
    int32_t iv[2] = {1, 2};
    kiln_constant(g, (kiln_dtype)-4, KILN_SHAPE(2), iv);
    want_msg(kiln_graph_error(g), "kiln_constant");
    kiln_graph_clear(g);
    kiln_variable(g, "V", KILN_U8, KILN_SHAPE(2), kiln_init_zeros());
    want_msg(kiln_graph_error(g), "kiln_variable");
    kiln_graph_clear(g);
    /* f32 and i32 operands do not mix */
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 2));
    kiln_node *b = kiln_input(g, "b", KILN_I32, KILN_SHAPE(2, 2));
    kiln_add(g, a, b);
    assert_int_equal(kiln_graph_status(g), KILN_ERR_DTYPE);
    want_msg(kiln_graph_error(g), "kiln_add");
    kiln_graph_clear(g);
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 2));
    b = kiln_input(g, "b", KILN_I32, KILN_SHAPE(2, 2));
    kiln_matmul(g, b, b, 0, 0);
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    want_msg(kiln_graph_error(g), "kiln_matmul");
    kiln_graph_clear(g);
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 2));
    kiln_cast(g, a, KILN_F64);
    want_msg(kiln_graph_error(g), "kiln_cast");
    kiln_graph_clear(g);
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 2));
    kiln_embedding(g, a, a);
    want_msg(kiln_graph_error(g), "kiln_embedding");
    kiln_graph_free(g);
}

static void test_builders_bad_arguments(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    /* introspection past the ends */
    assert_null(kiln_node_input(x, -1));
    assert_null(kiln_node_input(x, INT_MAX));
    assert_null(kiln_node_input(NULL, 0));
    assert_int_equal(kiln_node_num_inputs(NULL), 0);
    assert_string_equal(kiln_node_op_name(NULL), "");
    assert_null(kiln_node_set_name(NULL, "n"));
    assert_ptr_equal(kiln_node_set_name(x, NULL), x);
    /* axes out of range, hostile counts */
    kiln_softmax(g, x, 2);
    want_msg(kiln_graph_error(g), "kiln_softmax");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_softmax(g, x, INT_MIN);
    want_msg(kiln_graph_error(g), "kiln_softmax");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_sum(g, x, KILN_AXIS(5), 0);
    want_msg(kiln_graph_error(g), "kiln_sum");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *xs[2] = {x, x};
    kiln_concat(g, xs, -1, 0);
    want_msg(kiln_graph_error(g), "kiln_concat");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    xs[0] = xs[1] = x;
    kiln_concat(g, xs, 2, 7);
    want_msg(kiln_graph_error(g), "kiln_concat");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_concat(g, NULL, 2, 0);
    want_msg(kiln_graph_error(g), "kiln_concat");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_doall(g, NULL, 3);
    want_msg(kiln_graph_error(g), "kiln_doall");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    const int64_t lo[2] = {INT64_MAX, 0}, hi[2] = {INT64_MAX, 0};
    kiln_pad(g, x, lo, hi, 0.0f);
    want_msg(kiln_graph_error(g), "kiln_pad");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    const int64_t st[2] = {INT64_MIN, 0}, en[2] = {INT64_MAX, 3};
    kiln_slice(g, x, st, en);
    want_msg(kiln_graph_error(g), "kiln_slice");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_one_hot(g, kiln_input(g, "l", KILN_I32, KILN_SHAPE(2)), -1);
    want_msg(kiln_graph_error(g), "kiln_one_hot");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_split_heads(g, x, 0);
    want_msg(kiln_graph_error(g), "kiln_split_heads");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_topk(g, x, INT_MAX, 1, NULL, NULL);
    want_msg(kiln_graph_error(g), "kiln_topk");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_input_sym(g, "s", KILN_F32, KILN_SHAPE(2, 3), 0xFFFFFFFFu);
    want_msg(kiln_graph_error(g), "kiln_input_sym");
    kiln_graph_free(g);
}

/* Shapes within KILN_MAX_NUMEL but far past memory: the graph builds,
   then running it fails for want of memory, by both paths. */
/* An i32 variable's KILN_INIT_VALUE must be an i32: NaN, infinities and
   values outside [-2^31, 2^31) are refused by kiln_variable and
   kiln_session_declare (the conversion was undefined behaviour: UBSan in
   fuzz_graph), leaving no variable; others are truncated toward zero. */
static void test_i32_init_value_range(void **state)
{
    (void)state;
    const double bad[] = {NAN,          INFINITY,      -INFINITY,
                          2147483648.0, -2147483649.0, 1e300};
    kiln_session *s = kiln_session_new(NULL);
    assert_non_null(s);
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        kiln_graph *g = kiln_graph_new();
        assert_non_null(g);
        kiln_variable(g, "n", KILN_I32, KILN_SHAPE(2), kiln_init_value(bad[k]));
        assert_int_equal(kiln_graph_status(g), KILN_ERR_ARG);
        want_msg(kiln_graph_error(g), "kiln_variable 'n': value ");
        want_msg(kiln_graph_error(g), "is not an i32");
        kiln_graph_free(g);
        assert_int_equal(kiln_session_declare(s, "n", KILN_I32, KILN_SHAPE(2),
                                              kiln_init_value(bad[k]), 0),
                         KILN_ERR_ARG);
        want_msg(kiln_session_error(s), "kiln_session_declare: 'n': value ");
        assert_int_equal(kiln_session_find_variable(s, "n"), -1);
    }
    const double good[] = {-7.9, 2147483647.9, -2147483648.9};
    const int32_t want[] = {-7, INT32_MAX, INT32_MIN};
    for (int k = 0; k < 3; k++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", k);
        assert_int_equal(kiln_session_declare(s, name, KILN_I32, KILN_SHAPE(2),
                                              kiln_init_value(good[k]), 0),
                         KILN_OK);
        kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(2));
        assert_non_null(t);
        assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
        assert_int_equal(kiln_tensor_i32(t)[0], want[k]);
        assert_int_equal(kiln_tensor_i32(t)[1], want[k]);
        kiln_tensor_free(t);
    }
    kiln_session_free(s);
}

static void test_huge_valid_shapes_run_out_of_memory(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(4));
    kiln_node *h = kiln_one_hot(g, l, INT_MAX); /* 2^33 elements: 32 GiB */
    kiln_node *y = kiln_sum(g, h, KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(4));
    assert_int_equal(kiln_feed(s, l, t), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_MEMORY);
    want_msg(kiln_session_error(s), "memory");
    assert_null(kiln_node_value(s, y));
    kiln_compile_options o = kiln_compile_defaults();
    o.fuse = 0; /* keep the one-hot a buffer of its own */
    kiln_function *f = kiln_compile_ex(s, g, &y, 1, &l, 1, &o);
    if (f) {
        kiln_tensor *out = kiln_function_new_output(f, 0);
        assert_int_equal(kiln_run(f, &t, &out), KILN_ERR_MEMORY);
        want_msg(kiln_session_error(s), "memory");
        kiln_tensor_free(out);
    } else {
        want_msg(kiln_session_error(s), "memory");
    }
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* A node of one graph handed to another graph's builders and compile. */
static void test_foreign_nodes(void **state)
{
    (void)state;
    kiln_graph *g1 = kiln_graph_new(), *g2 = kiln_graph_new();
    kiln_node *a = kiln_input(g1, "a", KILN_F32, KILN_SHAPE(2));
    kiln_node *b = kiln_input(g2, "b", KILN_F32, KILN_SHAPE(2));
    kiln_add(g2, a, b);
    assert_int_equal(kiln_graph_status(g2), KILN_ERR_ARG);
    want_msg(kiln_graph_error(g2), "kiln_add");
    assert_int_equal(kiln_graph_status(g1), KILN_OK);
    kiln_graph_clear(g2);
    b = kiln_input(g2, "b", KILN_F32, KILN_SHAPE(2));
    kiln_node *y = kiln_neg(g2, b);
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *outs[1] = {a}, *ins[1] = {b};
    assert_null(kiln_compile(s, g2, outs, 1, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    outs[0] = y;
    ins[0] = a;
    assert_null(kiln_compile(s, g2, outs, 1, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    /* feeding a node the graph does not hold, or a computed node */
    assert_int_equal(kiln_feed(s, y, t), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), "kiln_feed");
    assert_int_not_equal(kiln_backward(s, g2, a), KILN_OK);
    want_msg(kiln_session_error(s), "kiln_backward");
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g1);
    kiln_graph_free(g2);
}

/* ---------------------------------------------------- compile and run */

/* y = relu(x), x [2, 3], compiled in a session of its own. */
typedef struct net {
    kiln_graph *g;
    kiln_node *x, *y;
    kiln_session *s;
    kiln_function *f;
} net;

static net net_new(void)
{
    net n;
    n.g = kiln_graph_new();
    n.x = kiln_input(n.g, "x", KILN_F32, KILN_SHAPE(2, 3));
    n.y = kiln_relu(n.g, n.x);
    th_assert_graph_ok(n.g);
    n.s = kiln_session_new(NULL);
    n.f = kiln_compile(n.s, n.g, &n.y, 1, &n.x, 1);
    assert_non_null(n.f);
    return n;
}

static void test_compile_bad_counts(void **state)
{
    (void)state;
    net n = net_new();
    kiln_session *s = n.s;
    kiln_node *outs[2] = {n.y, NULL}, *ins[2] = {n.x, n.x};
    assert_null(kiln_compile(s, n.g, outs, -1, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(s, n.g, outs, 1, ins, -1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(s, n.g, NULL, 1, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(s, n.g, outs, 1, NULL, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(s, n.g, outs, 2, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(s, n.g, outs, 1, ins, 2));
    want_msg(kiln_session_error(s), "kiln_compile");
    ins[1] = n.y; /* not an input */
    assert_null(kiln_compile(s, n.g, outs, 1, ins + 1, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    assert_null(kiln_compile(NULL, n.g, outs, 1, ins, 1));
    want_msg(kiln_last_error(), "kiln_compile");
    assert_null(kiln_compile(s, NULL, outs, 1, ins, 1));
    want_msg(kiln_session_error(s), "kiln_compile");
    kiln_compile_options o = kiln_compile_defaults();
    o.pipeline = "dce,,nope";
    assert_null(kiln_compile_ex(s, n.g, outs, 1, ins, 1, &o));
    want_msg(kiln_session_error(s), "kiln_compile");
    o = kiln_compile_defaults();
    o.fold_max_elements = INT64_MIN;
    assert_null(kiln_compile_ex(s, n.g, outs, 1, ins, 1, &o));
    want_msg(kiln_session_error(s), "fold_max_elements");
    /* after all that the session runs as ever */
    kiln_function *f = n.f;
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *out = kiln_function_new_output(f, 0);
    kiln_tensor_f32(in)[4] = 5.0f;
    kiln_tensor_f32(in)[5] = -5.0f;
    assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
    assert_true(kiln_tensor_f32(out)[4] == 5.0f);
    assert_true(kiln_tensor_f32(out)[5] == 0.0f);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_session_free(s);
    kiln_graph_free(n.g);
}

/* Runs with wrong tensors fail naming the problem and write nothing. */
static void test_run_bad_tensors(void **state)
{
    (void)state;
    net n = net_new();
    kiln_session *s = n.s;
    kiln_function *f = n.f;
    kiln_tensor *out = kiln_function_new_output(f, 0);
    kiln_tensor_f32(out)[0] = 42.0f;
    kiln_tensor *wrong[] = {
        kiln_tensor_new(KILN_I32, KILN_SHAPE(2, 3)),
        kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 2)),
        kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3, 1)),
        kiln_tensor_new(KILN_F32, KILN_SCALAR),
    };
    for (size_t k = 0; k < sizeof wrong / sizeof *wrong; k++) {
        assert_non_null(wrong[k]);
        assert_int_not_equal(kiln_run(f, &wrong[k], &out), KILN_OK);
        want_msg(kiln_session_error(s), "kiln_run");
        kiln_tensor *good = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
        assert_int_not_equal(kiln_run(f, &good, &wrong[k]), KILN_OK);
        want_msg(kiln_session_error(s), "kiln_run");
        kiln_tensor_free(good);
        assert_true(kiln_tensor_f32(out)[0] == 42.0f);
    }
    kiln_tensor *none[1] = {NULL};
    assert_int_equal(kiln_run(f, none, &out), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), "kiln_run");
    assert_int_equal(kiln_run(f, NULL, &out), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), "kiln_run");
    assert_int_equal(kiln_run(f, &out, NULL), KILN_ERR_ARG);
    assert_true(kiln_tensor_f32(out)[0] == 42.0f);
    assert_int_equal(kiln_run(NULL, &out, &out), KILN_ERR_ARG);
    want_msg(kiln_last_error(), "kiln_run");
    assert_null(kiln_function_new_output(f, -1));
    assert_null(kiln_function_new_output(f, 1));
    assert_null(kiln_function_new_output(f, INT_MAX));
    assert_null(kiln_function_new_output(NULL, 0));
    /* the input's own tensor as the output: computed in place */
    kiln_tensor *io = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor_f32(io)[0] = -1.0f;
    kiln_tensor_f32(io)[1] = 2.0f;
    assert_int_equal(kiln_run(f, &io, &io), KILN_OK);
    assert_true(kiln_tensor_f32(io)[0] == 0.0f);
    assert_true(kiln_tensor_f32(io)[1] == 2.0f);
    kiln_tensor_free(io);
    for (size_t k = 0; k < sizeof wrong / sizeof *wrong; k++)
        kiln_tensor_free(wrong[k]);
    kiln_tensor_free(out);
    kiln_session_free(s);
    kiln_graph_free(n.g);
}

/* A run after a failed compile has nothing to run: NULL is refused. */
static void test_use_after_failed_compile(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2));
    kiln_node *bad = kiln_matmul(g, x, x, 0, 0); /* 1-D: refused */
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &bad, 1, &x, 1);
    assert_null(f);
    want_msg(kiln_session_error(s), "kiln_compile");
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    assert_int_equal(kiln_run(f, &t, &t), KILN_ERR_ARG);
    assert_null(kiln_function_new_output(f, 0));
    assert_int_equal(kiln_function_print(f, stderr), KILN_ERR_ARG);
    assert_int_equal(kiln_function_num_kernels(f), -1);
    assert_int_equal(kiln_function_memory(f), 0);
    kiln_function_free(f);
    /* the dynamic path refuses the failed graph too */
    assert_int_not_equal(kiln_forward(s, g), KILN_OK);
    assert_null(kiln_node_value(s, bad));
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* The function is freed with its session: freeing or running it later is
   refused, not a use of freed memory. */
static void test_function_after_session_free(void **state)
{
    (void)state;
    net n = net_new();
    kiln_session *s = n.s;
    kiln_function *f = n.f;
    kiln_function *f2 = kiln_compile(s, n.g, &n.y, 1, &n.x, 1);
    assert_non_null(f2);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *out = kiln_function_new_output(f, 0);
    kiln_function_free(f2);
    kiln_session_free(s);
    assert_int_equal(kiln_run(f, &in, &out), KILN_ERR_STATE);
    want_msg(kiln_last_error(), "kiln_run: the function was freed");
    assert_null(kiln_function_new_output(f, 0));
    assert_int_equal(kiln_function_num_kernels(f), -1);
    assert_int_equal(kiln_function_print(f, stderr), KILN_ERR_STATE);
    kiln_function_free(f);  /* freed with the session: a no-op */
    kiln_function_free(f2); /* freed twice: a no-op */
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_graph_free(n.g);
}

/* Graph freed first: the compiled function keeps its own copy. */
static void test_function_outlives_graph(void **state)
{
    (void)state;
    net n = net_new();
    kiln_session *s = n.s;
    kiln_function *f = n.f;
    kiln_graph_free(n.g);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *out = kiln_function_new_output(f, 0);
    kiln_tensor_f32(in)[2] = 7.0f;
    assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
    assert_true(kiln_tensor_f32(out)[2] == 7.0f);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_session_free(s);
}

/* --------------------------------------------------- dynamic call order */

static void test_dynamic_call_order(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *w =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3), kiln_init_value(2));
    kiln_node *loss = kiln_sum(g, kiln_mul(g, w, x), KILN_ALL_AXES, 0);
    kiln_session *s = kiln_session_new(NULL);
    /* before any feed or forward */
    assert_int_equal(kiln_backward(s, g, loss), KILN_ERR_STATE);
    want_msg(kiln_session_error(s), "kiln_backward");
    assert_null(kiln_node_value(s, loss));
    assert_null(kiln_node_grad(s, w));
    assert_null(kiln_node_value_f32(s, loss));
    assert_int_equal(kiln_sgd_step(s, g, 0.1f), KILN_ERR_STATE);
    want_msg(kiln_session_error(s), "kiln_sgd_step");
    /* forward without the input fed */
    assert_int_not_equal(kiln_forward(s, g), KILN_OK);
    want_msg(kiln_session_error(s), "x");
    /* a loss that is not a scalar */
    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(3), (float[]){1, 2, 3});
    assert_int_equal(kiln_feed(s, x, t), KILN_OK);
    assert_int_equal(kiln_backward(s, g, x), KILN_ERR_STATE);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_int_equal(kiln_backward(s, g, x), KILN_ERR_SHAPE);
    want_msg(kiln_session_error(s), "kiln_backward");
    assert_int_equal(kiln_backward(s, g, NULL), KILN_ERR_ARG);
    /* and all still works */
    assert_int_equal(kiln_backward(s, g, loss), KILN_OK);
    const float *gw = kiln_node_grad_f32(s, w);
    assert_non_null(gw);
    assert_true(gw[0] == 1.0f && gw[1] == 2.0f && gw[2] == 3.0f);
    assert_int_equal(kiln_sgd_step(s, g, NAN), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), "kiln_sgd_step: lr is nan");
    assert_int_equal(kiln_sgd_step(s, g, -INFINITY), KILN_ERR_ARG);
    kiln_tensor *wv = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    assert_int_equal(kiln_variable_read(s, "W", wv), KILN_OK);
    assert_true(kiln_tensor_f32(wv)[0] == 2.0f);
    /* wrong reads and writes of variables */
    kiln_tensor *wi = kiln_tensor_new(KILN_I32, KILN_SHAPE(3));
    assert_int_equal(kiln_variable_read(s, "W", wi), KILN_ERR_DTYPE);
    assert_int_equal(kiln_variable_write(s, "W", wi), KILN_ERR_DTYPE);
    kiln_tensor *w4 = kiln_tensor_new(KILN_F32, KILN_SHAPE(4));
    assert_int_equal(kiln_variable_write(s, "W", w4), KILN_ERR_SHAPE);
    assert_int_equal(kiln_variable_read(s, "nope", wv), KILN_ERR_NOTFOUND);
    assert_int_equal(kiln_variable_read(s, NULL, wv), KILN_ERR_ARG);
    assert_int_equal(kiln_variable_read(s, "W", NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_variable_read(s, "W", wv), KILN_OK);
    assert_true(kiln_tensor_f32(wv)[2] == 2.0f);
    kiln_tensor_free(w4);
    kiln_tensor_free(wi);
    kiln_tensor_free(wv);
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* --------------------------------------------------- training helpers */

static void test_optimizer_bad_options(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    const float bad_floats[] = {NAN, -1.0f, INFINITY};
    for (size_t k = 0; k < sizeof bad_floats / sizeof *bad_floats; k++) {
        o = kiln_optim_defaults(KILN_ADAM);
        o.lr = bad_floats[k];
        assert_null(kiln_optimizer_new(s, &o));
        want_msg(kiln_session_error(s), "kiln_optimizer_new");
        o = kiln_optim_defaults(KILN_ADAM);
        o.beta1 = bad_floats[k];
        assert_null(kiln_optimizer_new(s, &o));
        want_msg(kiln_session_error(s), "kiln_optimizer_new");
    }
    o = kiln_optim_defaults(KILN_ADAM);
    o.beta2 = 1.0f;
    assert_null(kiln_optimizer_new(s, &o));
    o = kiln_optim_defaults((kiln_optim_kind)42);
    o.kind = (kiln_optim_kind)42;
    assert_null(kiln_optimizer_new(s, &o));
    want_msg(kiln_session_error(s), "kiln_optimizer_new");
    o = kiln_optim_defaults(KILN_SGD);
    o.schedule = (kiln_schedule_kind)-1;
    assert_null(kiln_optimizer_new(s, &o));
    o = kiln_optim_defaults(KILN_SGD);
    o.schedule = KILN_LR_STEP;
    o.step_size = 0;
    assert_null(kiln_optimizer_new(s, &o));
    o = kiln_optim_defaults(KILN_SGD);
    o.warmup_steps = -5;
    assert_null(kiln_optimizer_new(s, &o));
    o = kiln_optim_defaults(KILN_SGD);
    o.accumulate = INT_MIN;
    assert_null(kiln_optimizer_new(s, &o));
    assert_null(kiln_optimizer_new(s, NULL));
    assert_null(kiln_optimizer_new(NULL, &o));
    /* no variable was left behind by the refused ones */
    assert_int_equal(kiln_session_num_variables(s), 0);
    /* an update before any backward pass */
    kiln_graph *g = kiln_graph_new();
    kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2), kiln_init_ones());
    o = kiln_optim_defaults(KILN_SGD);
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    assert_non_null(opt);
    assert_int_equal(kiln_optimizer_update(opt, g), KILN_ERR_STATE);
    assert_int_equal(kiln_optimizer_update(opt, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_optimizer_update(NULL, g), KILN_ERR_ARG);
    assert_int_equal(kiln_optimizer_step_count(opt), 0);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_batcher_hostile(void **state)
{
    (void)state;
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 2));
    kiln_tensor *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(4));
    kiln_tensor *y5 = kiln_tensor_new(KILN_I32, KILN_SHAPE(5));
    kiln_tensor *sc = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    assert_null(kiln_batcher_new(x, y, 2, 0, 0, 1));
    want_msg(kiln_last_error(), "kiln_batcher_new");
    assert_null(kiln_batcher_new(x, y5, 0, 0, 0, 1));
    assert_null(kiln_batcher_new(x, y5, -3, 0, 0, 1));
    assert_null(kiln_batcher_new(NULL, y5, 2, 0, 0, 1));
    assert_null(kiln_batcher_new(sc, NULL, 1, 0, 0, 1));
    /* a batch above the row count: one short batch (or none, dropped) */
    kiln_batcher *b = kiln_batcher_new(x, y5, INT_MAX, 1, 0, 1);
    if (b) {
        assert_int_equal(kiln_batcher_num_batches(b), 1);
        kiln_batcher_free(b);
    }
    b = kiln_batcher_new(x, y5, 2, 1, 0, 1);
    assert_non_null(b);
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(2));
    assert_int_equal(kiln_batcher_next(b, xb, yb), -1);
    want_msg(kiln_batcher_error(b), "kiln_batcher_next");
    assert_int_equal(kiln_batcher_next(b, NULL, yb), -1);
    assert_int_equal(kiln_batcher_shard(b, 2, 2), KILN_ERR_ARG);
    assert_int_equal(kiln_batcher_shard(b, -1, 2), KILN_ERR_ARG);
    assert_int_equal(kiln_batcher_shard(b, 0, 3), KILN_ERR_ARG);
    assert_int_equal(kiln_batcher_shard(b, 0, INT_MIN), KILN_ERR_ARG);
    kiln_tensor_free(xb);
    kiln_batcher_free(b);
    kiln_tensor_free(yb);
    kiln_tensor_free(sc);
    kiln_tensor_free(y5);
    kiln_tensor_free(y);
    kiln_tensor_free(x);
    /* mixtures */
    double p[2] = {0.5, 0.5};
    assert_null(kiln_mixture_new(p, 0, 2, 1));
    assert_null(kiln_mixture_new(p, 2, 0, 1));
    assert_null(kiln_mixture_new(p, 2, INT_MAX, 1));
    assert_null(kiln_mixture_new(NULL, 2, 2, 1));
    kiln_mixture *m = kiln_mixture_new(p, 2, 2, 1);
    assert_non_null(m);
    assert_null(kiln_mixture_mean(m, -1));
    assert_null(kiln_mixture_mean(m, 2));
    assert_int_not_equal(kiln_mixture_batch(m, -1, NULL, NULL), KILN_OK);
    assert_int_not_equal(kiln_mixture_batch(m, 3, NULL, NULL), KILN_OK);
    kiln_mixture_free(m);
}

/* ------------------------------------------------------------- files */

static void test_files_missing_and_odd(void **state)
{
    (void)state;
    const char *paths[] = {"/nonexistent/kiln/x.npz", "", "/dev/null",
                           "/proc/self", "/dev/zero"};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        if (!strcmp(paths[k], "/dev/zero"))
            continue; /* endless: only the readers with a size check */
        assert_null(kiln_npz_read(paths[k]));
        assert_true(kiln_last_error()[0]);
        assert_null(kiln_npy_read(paths[k]));
        assert_null(kiln_safetensors_read(paths[k]));
        assert_null(kiln_bin_read(paths[k]));
        assert_null(kiln_idx_read(paths[k], KILN_F32));
        assert_null(kiln_file_read(paths[k]));
        assert_int_not_equal(kiln_file_info(paths[k], stderr), KILN_OK);
        assert_null(kiln_onnx_tensor_read(paths[k], NULL));
        assert_int_not_equal(kiln_onnx_info(paths[k], stderr), KILN_OK);
        kiln_graph *g = kiln_graph_new();
        kiln_onnx_model *m = NULL;
        assert_int_not_equal(kiln_onnx_load(g, paths[k], NULL, &m), KILN_OK);
        assert_true(kiln_onnx_error(m)[0]);
        assert_int_equal(kiln_onnx_num_inputs(m), 0);
        assert_null(kiln_onnx_output(m, 0));
        kiln_onnx_free(m);
        assert_int_equal(kiln_graph_node_count(g), 0);
        kiln_graph_free(g);
    }
    assert_null(kiln_npz_read(NULL));
    want_msg(kiln_last_error(), "NULL");
    assert_null(kiln_idx_read(NULL, KILN_F32));
    assert_null(kiln_idx_read("/dev/null", (kiln_dtype)9));
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    assert_int_equal(kiln_onnx_load(NULL, "x.onnx", NULL, &m), KILN_ERR_ARG);
    kiln_onnx_free(m);
    m = NULL;
    assert_int_equal(kiln_onnx_load(g, NULL, NULL, &m), KILN_ERR_ARG);
    kiln_onnx_free(m);
    assert_int_equal(kiln_onnx_load(g, "x.onnx", NULL, NULL), KILN_ERR_ARG);
    kiln_onnx_options o = {0};
    o.n_input_shapes = -1;
    o.input_shapes = NULL;
    m = NULL;
    kiln_onnx_load(g, "/nonexistent.onnx", &o, &m);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    /* writers: no directory, a NULL list */
    kiln_tensor_list *l = kiln_tensor_list_new();
    assert_int_equal(kiln_npz_write("/nonexistent/kiln/x.npz", l, 0),
                     KILN_ERR_IO);
    assert_int_not_equal(kiln_npz_write("x.npz", NULL, 0), KILN_OK);
    assert_int_not_equal(kiln_bin_write(NULL, l), KILN_OK);
    assert_int_not_equal(kiln_safetensors_write("", l), KILN_OK);
    assert_int_not_equal(kiln_file_write("/", l), KILN_OK);
    kiln_tensor_list_free(l);
}

/* A checkpoint cut at every length: each load fails and changes nothing. */
static void test_session_load_truncated(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln_hostile_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *exts[] = {".npz", ".safetensors", ".bin"};
    for (size_t e = 0; e < sizeof exts / sizeof *exts; e++) {
        char path[256], cut[256];
        snprintf(path, sizeof path, "%s/ck%s", dir, exts[e]);
        snprintf(cut, sizeof cut, "%s/cut%s", dir, exts[e]);
        kiln_session *s = kiln_session_new(NULL);
        assert_int_equal(kiln_session_declare(s, "W", KILN_F32,
                                              KILN_SHAPE(3, 5),
                                              kiln_init_value(1.5), 1),
                         KILN_OK);
        assert_int_equal(kiln_session_save(s, path), KILN_OK);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char buf[8192];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        assert_true(n > 0 && n < sizeof buf);
        kiln_session *t = kiln_session_new(NULL);
        assert_int_equal(kiln_session_declare(t, "W", KILN_F32,
                                              KILN_SHAPE(3, 5),
                                              kiln_init_value(-2), 1),
                         KILN_OK);
        for (size_t len = 0; len < n; len++) {
            FILE *c = fopen(cut, "wb");
            assert_non_null(c);
            assert_int_equal(fwrite(buf, 1, len, c), len);
            fclose(c);
            if (kiln_session_load(t, cut) == KILN_OK)
                fail_msg("%s cut to %zu of %zu bytes loads", exts[e], len, n);
            assert_true(kiln_session_error(t)[0]);
            kiln_param_info info;
            assert_int_equal(kiln_session_variable_info(t, 0, &info), KILN_OK);
            assert_true(((float *)info.data)[14] == -2.0f);
            assert_int_equal(kiln_session_num_variables(t), 1);
        }
        kiln_session_free(t);
        kiln_session_free(s);
        unlink(cut);
        unlink(path);
    }
    rmdir(dir);
}

/* ---------------------------------------------------- other front ends */

static void test_axes_and_modules_hostile(void **state)
{
    (void)state;
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(kiln_axis_make(longname, 3, 0).length, -1);
    assert_int_equal(kiln_axis_make(NULL, 3, 0).length, -1);
    assert_int_equal(kiln_axis_make("C", -1, 0).length, -1);
    assert_int_equal(kiln_axis_make("C", INT64_MAX, 0).length, INT64_MAX);
    kiln_graph *g = kiln_graph_new();
    kiln_axis big = kiln_axis_make("C", INT64_MAX, 0);
    kiln_axis big2 = kiln_axis_make("D", INT64_MAX, 0);
    kiln_ax_placeholder(g, "p", KILN_AXES(big, big2));
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    want_msg(kiln_graph_error(g), "invalid shape");
    kiln_graph_clear(g);
    kiln_axes many = {.n = KILN_MAX_DIMS + 1};
    for (int k = 0; k < KILN_MAX_DIMS; k++)
        many.a[k] = kiln_axis_make("Q", 1, 0);
    kiln_ax_placeholder(g, "p", many);
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    kiln_graph_clear(g);
    many.n = -1;
    kiln_ax_placeholder(g, "p", many);
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    char buf[8];
    many.n = 100;
    kiln_axes_str(many, buf, sizeof buf);
    assert_true(strlen(buf) < sizeof buf);
    kiln_graph_free(g);
    /* computations */
    kiln_session *s = kiln_session_new(NULL);
    assert_null(kiln_computation_new(s, NULL, NULL, 1, NULL, 0));
    assert_int_equal(kiln_computation_call(NULL, NULL), KILN_ERR_ARG);
    assert_null(kiln_computation_result(NULL, 0));
    kiln_session_free(s);
    /* programs and subgraphs */
    kiln_program *p = kiln_program_new();
    assert_null(kiln_h2d_stream(p, NULL, KILN_F32, KILN_SHAPE(2)));
    assert_null(kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(-2)));
    assert_null(kiln_h2d_stream(p, "in", (kiln_dtype)55, KILN_SHAPE(2)));
    assert_int_not_equal(kiln_program_run(p, NULL, 0), KILN_OK);
    assert_int_not_equal(kiln_program_compile(p, NULL), KILN_OK);
    kiln_program_free(p);
    kiln_subgraph *sg = kiln_subgraph_new(NULL);
    if (sg) {
        kiln_subgraph_input(sg, "x", KILN_F32, shape_of(KILN_MAX_DIMS + 3, 1));
        assert_int_not_equal(kiln_graph_status(kiln_subgraph_graph(sg)),
                             KILN_OK);
        assert_null(kiln_subgraph_input_at(sg, -1));
        assert_null(kiln_subgraph_output_at(sg, 5));
        kiln_subgraph_free(sg);
    }
}

/* ---------------------------------------------------- second sweep */

static void test_session_settings_hostile(void **state)
{
    (void)state;
    kiln_session_options o = {.threads = -1};
    assert_null(kiln_session_new(&o));
    want_msg(kiln_last_error(), "kiln_session_new");
    o = (kiln_session_options){.reference_kernels = 2};
    assert_null(kiln_session_new(&o));
    o = (kiln_session_options){.flush_denormals = INT_MIN};
    assert_null(kiln_session_new(&o));
    o = (kiln_session_options){.threads = INT_MAX};
    kiln_session *s = kiln_session_new(&o);
    assert_non_null(s);
    assert_int_equal(kiln_session_threads(s), 256);
    assert_int_equal(kiln_session_set_threads(s, INT_MIN), KILN_ERR_ARG);
    assert_int_equal(kiln_session_threads(s), 256);
    kiln_graph *g = kiln_graph_new();
    assert_int_equal(kiln_session_reserve_workspace_mb(s, g, SIZE_MAX),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_reserve_workspace_mb(s, NULL, 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_set_workspace_strict(s, g, 1),
                     KILN_ERR_STATE);
    assert_int_equal(kiln_session_workspace_stats(s, g, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_session_variable_info(s, INT_MIN, NULL),
                     KILN_ERR_ARG);
    kiln_param_info info;
    assert_int_equal(kiln_session_variable_info(s, INT_MAX, &info),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, NULL, KILN_F32, KILN_SHAPE(1),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "", KILN_F32, KILN_SHAPE(1),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    kiln_init bad = {.kind = (kiln_init_kind)99};
    assert_int_equal(
        kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(1), bad, 1),
        KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_values(NULL), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_uniform(1, -1), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_normal(0, NAN), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_num_variables(s), 0);
    assert_int_equal(
        kiln_init_fill(kiln_init_ones(), KILN_SHAPE(-1), NULL, NULL),
        KILN_ERR_ARG);
    float v[2];
    assert_int_not_equal(
        kiln_init_fill(kiln_init_uniform(0, 1), KILN_SHAPE(2), v, NULL),
        KILN_OK);
    assert_int_equal(kiln_session_print_profile(s, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_session_save(s, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_session_load(s, NULL), KILN_ERR_ARG);
    assert_int_not_equal(kiln_session_save(s, "/nonexistent/dir/x.bin"),
                         KILN_OK);
    want_msg(kiln_session_error(s), "x.bin");
    kiln_set_logging_level((kiln_logging_level)99);
    assert_int_equal(kiln_get_logging_level(), KILN_LOGGING_INFO);
    kiln_logging_printf((kiln_logging_level)-3, NULL, "%s", "x");
    kiln_logging_printf(KILN_LOGGING_DEBUG, NULL, NULL);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_autodiff_hostile(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *y = kiln_sum(g, kiln_mul(g, x, x), KILN_ALL_AXES, 0);
    kiln_node *out[2] = {NULL, NULL};
    kiln_node *xs[2] = {x, NULL};
    assert_int_not_equal(kiln_grads(g, y, NULL, xs, -1, out), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    y = kiln_sum(g, kiln_mul(g, x, x), KILN_ALL_AXES, 0);
    xs[0] = x;
    assert_int_not_equal(kiln_grads(g, y, NULL, xs, 2, out), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    y = kiln_sum(g, kiln_mul(g, x, x), KILN_ALL_AXES, 0);
    xs[0] = x;
    assert_int_not_equal(kiln_grads(g, y, NULL, xs, 1, NULL), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_grad(g, x, x); /* not a scalar */
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    want_msg(kiln_graph_error(g), "kiln_grad");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *d = kiln_input(g, "d", KILN_F32, KILN_SHAPE(4));
    kiln_backprop_node(g, x, d, x); /* delta of the wrong shape */
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_I32, KILN_SHAPE(3));
    kiln_node *yi = kiln_sum(g, x, KILN_ALL_AXES, 0);
    kiln_grad(g, yi, x); /* integer: no gradient */
    assert_int_not_equal(kiln_graph_status(g), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    y = kiln_sum(g, kiln_mul(g, x, x), KILN_ALL_AXES, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_gradcheck_result r;
    assert_int_equal(
        kiln_gradcheck(s, g, y, &x, -1, NULL, NULL, 0, 1e-3, 1e-2, &r),
        KILN_ERR_ARG);
    assert_int_equal(
        kiln_gradcheck(s, g, y, NULL, 1, NULL, NULL, 0, 1e-3, 1e-2, &r),
        KILN_ERR_ARG);
    assert_int_not_equal(
        kiln_gradcheck(s, g, y, &x, 1, NULL, NULL, -2, 1e-3, 1e-2, &r),
        KILN_OK);
    assert_int_not_equal(
        kiln_gradcheck(s, g, y, &x, 1, &x, NULL, 1, 1e-3, 1e-2, &r), KILN_OK);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_lists_and_onnx_options_hostile(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    assert_int_equal(kiln_tensor_list_add(l, "", t), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, NULL, t), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, "t", NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, "t", t), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "u", t), KILN_ERR_ARG);
    assert_null(kiln_tensor_list_get(l, -1));
    assert_null(kiln_tensor_list_get(l, INT_MAX));
    assert_null(kiln_tensor_list_name(l, 1));
    assert_null(kiln_tensor_list_find(l, NULL));
    assert_null(kiln_tensor_list_find(NULL, "t"));
    char longname[70000];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    kiln_tensor *t2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(1));
    if (kiln_tensor_list_add(l, longname, t2) != KILN_OK)
        kiln_tensor_free(t2);
    char dir[] = "/tmp/kiln_hostile_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    const char *exts[] = {"a.npz", "a.safetensors", "a.bin"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, exts[k]);
        kiln_status st = kiln_file_write(path, l);
        if (st == KILN_OK) {
            kiln_tensor_list *r = kiln_file_read(path);
            assert_non_null(r);
            assert_int_equal(kiln_tensor_list_count(r),
                             kiln_tensor_list_count(l));
            kiln_tensor_list_free(r);
            unlink(path);
        } else {
            want_msg(kiln_last_error(), "name");
        }
    }
    rmdir(dir);
    kiln_tensor_list_free(l);
    /* ONNX options: shapes and values that cannot be */
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_options o = {0};
    kiln_shape shapes[1] = {shape_of(KILN_MAX_DIMS + 5, -1)};
    o.input_shapes = shapes;
    o.n_input_shapes = 1;
    kiln_onnx_model *m = NULL;
    kiln_status st = kiln_onnx_load(
        g, KILN_TEST_REF_DIR "/onnx/fuzz_softmax_nan.onnx", &o, &m);
    assert_int_not_equal(st, KILN_OK);
    want_msg(kiln_onnx_error(m), "shape");
    kiln_onnx_free(m);
    kiln_graph_clear(g);
    o = (kiln_onnx_options){.named_dim_size = INT64_MAX};
    m = NULL;
    st = kiln_onnx_load(g, KILN_TEST_REF_DIR "/onnx/fuzz_softmax_nan.onnx", &o,
                        &m);
    kiln_onnx_free(m);
    kiln_graph_clear(g);
    /* saving: bad outputs */
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2));
    kiln_node *y = kiln_relu(g, x);
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 0, NULL, "/tmp/x.onnx"),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_onnx_save(g, NULL, &y, -1, NULL, "/tmp/x.onnx"),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_onnx_save(g, NULL, NULL, 1, NULL, "/tmp/x.onnx"),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, NULL, NULL), KILN_ERR_ARG);
    kiln_node *two[2] = {y, y};
    const char *names[2] = {"o", NULL};
    kiln_onnx_save_options so = {.output_names = names};
    assert_int_not_equal(kiln_onnx_save(g, NULL, two, 2, &so, "/tmp/x.onnx"),
                         KILN_OK);
    assert_int_not_equal(
        kiln_onnx_save(g, NULL, &y, 1, NULL, "/nonexistent/d/x.onnx"), KILN_OK);
    kiln_graph_free(g);
}

/* Programs: streams of another program, runs with wrong bindings, a
   compile into a second session, out-of-order calls. */
static void test_program_hostile(void **state)
{
    (void)state;
    kiln_program *p = kiln_program_new(), *q = kiln_program_new();
    kiln_stream *in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(2));
    kiln_stream *out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(2));
    kiln_stream *qin = kiln_h2d_stream(q, "in", KILN_F32, KILN_SHAPE(2));
    assert_non_null(in);
    assert_non_null(qin);
    /* q's stream in p */
    kiln_host_load(p, qin, "x");
    assert_int_not_equal(kiln_graph_status(kiln_program_graph(p)), KILN_OK);
    want_msg(kiln_graph_error(kiln_program_graph(p)), "kiln_host_load");
    assert_int_not_equal(kiln_host_store(q, in, NULL), KILN_OK);
    want_msg(kiln_graph_error(kiln_program_graph(q)), "kiln_host_store");
    kiln_graph_clear(kiln_program_graph(p));
    kiln_program_free(p);
    p = kiln_program_new();
    in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(2));
    out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(2));
    kiln_node *x = kiln_host_load(p, in, "x");
    kiln_graph *g = kiln_program_graph(p);
    kiln_node *w =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2), kiln_init_value(1));
    assert_int_equal(kiln_host_store(p, out, kiln_mul(g, x, w)), KILN_OK);
    kiln_tensor *ti = kiln_tensor_from_f32(KILN_SHAPE(2), (float[]){3, 4});
    kiln_tensor *to = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    kiln_stream_data d[2] = {{in, ti}, {out, to}};
    /* before compile */
    assert_int_equal(kiln_program_run(p, d, 2), KILN_ERR_STATE);
    want_msg(kiln_program_error(p), "kiln_program_run");
    kiln_program_free(p);
    p = kiln_program_new();
    in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(2));
    out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(2));
    x = kiln_host_load(p, in, "x");
    g = kiln_program_graph(p);
    w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2), kiln_init_value(1));
    assert_int_equal(kiln_host_store(p, out, kiln_mul(g, x, w)), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    d[0] = (kiln_stream_data){in, ti};
    d[1] = (kiln_stream_data){out, to};
    /* bad bindings */
    assert_int_equal(kiln_program_run(p, d, -1), KILN_ERR_ARG);
    assert_int_not_equal(kiln_program_run(p, NULL, 2), KILN_OK);
    kiln_stream_data dq[2] = {{qin, ti}, {out, to}};
    assert_int_not_equal(kiln_program_run(p, dq, 2), KILN_OK);
    want_msg(kiln_program_error(p), "kiln_program_run");
    kiln_stream_data dn[2] = {{in, NULL}, {out, to}};
    assert_int_not_equal(kiln_program_run(p, dn, 2), KILN_OK);
    kiln_stream_data ds[2] = {{NULL, ti}, {out, to}};
    assert_int_not_equal(kiln_program_run(p, ds, 2), KILN_OK);
    kiln_tensor *ti3 = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_stream_data dw[2] = {{in, ti3}, {out, to}};
    assert_int_not_equal(kiln_program_run(p, dw, 2), KILN_OK);
    assert_true(kiln_tensor_f32(to)[0] == 0.0f);
    assert_int_equal(kiln_program_run(p, d, 2), KILN_OK);
    assert_true(kiln_tensor_f32(to)[1] == 4.0f);
    /* the session freed: refused; compiled into another, runs */
    kiln_session_free(s);
    assert_int_equal(kiln_program_run(p, d, 2), KILN_ERR_STATE);
    s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    assert_int_equal(kiln_program_run(p, d, 2), KILN_OK);
    assert_true(kiln_tensor_f32(to)[0] == 3.0f);
    kiln_program_free(p);
    kiln_session_free(s);
    kiln_program_free(q);
    kiln_tensor_free(ti3);
    kiln_tensor_free(ti);
    kiln_tensor_free(to);
}

/* The communicator calls on NULL: refused by name, never a crash (no MPI
   is started here). */
static void test_dist_null_comm(void **state)
{
    (void)state;
    double v[2] = {1, 2};
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_rank(NULL), -1);
    assert_int_equal(kiln_comm_size(NULL), -1);
    assert_non_null(kiln_comm_error(NULL));
    assert_int_not_equal(kiln_comm_set_bucket_bytes(NULL, 1), KILN_OK);
    assert_int_not_equal(kiln_comm_set_shared_memory(NULL, 1), KILN_OK);
    assert_int_not_equal(kiln_comm_set_rows(NULL, 1, 2), KILN_OK);
    assert_int_not_equal(kiln_comm_allreduce_sum(NULL, v, 2), KILN_OK);
    assert_int_not_equal(kiln_comm_set_zero1(NULL, 1), KILN_OK);
    assert_int_equal(kiln_comm_zero1(NULL), 0);
    assert_int_not_equal(kiln_comm_get_stats(NULL, &st), KILN_OK);
    assert_int_not_equal(kiln_comm_sync_session(NULL, NULL, NULL), KILN_OK);
    assert_int_not_equal(kiln_comm_save_session(NULL, NULL, "x.npz"), KILN_OK);
    assert_int_not_equal(kiln_comm_load_session(NULL, NULL, "x.npz"), KILN_OK);
    assert_null(kiln_comm_from_mpi(NULL));
    want_msg(kiln_last_error(), "kiln_comm_from_mpi");
    kiln_comm_reset_stats(NULL);
    kiln_comm_abort(NULL, 3);
    kiln_comm_free(NULL);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_comm(s, NULL), KILN_OK);
    assert_int_not_equal(kiln_session_set_comm(NULL, NULL), KILN_OK);
    kiln_session_free(s);
}

/* Printing what hostile names and limits describe stays in bounds. */
static void test_printing_hostile(void **state)
{
    (void)state;
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    size_t len = 1 << 20;
    char *name = malloc(len + 1);
    assert_non_null(name);
    memset(name, '%', len);
    name[len] = 0;
    name[10] = '"';
    name[11] = '\n';
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, name, KILN_F32, KILN_SHAPE(2, 3));
    kiln_node_set_name(x, name);
    kiln_node *y = kiln_debug(kiln_relu(g, x), name);
    kiln_node_set_name(y, name);
    th_assert_graph_ok(g);
    assert_int_equal(kiln_graph_print(g, null), KILN_OK);
    assert_int_equal(kiln_graph_write_dot(g, null), KILN_OK);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(7, 9, 11));
    kiln_tensor_print(t, name, -5, null);
    kiln_tensor_print(t, NULL, INT_MAX, null);
    kiln_tensor_print(NULL, name, 3, null);
    kiln_tensor_print(t, name, 3, NULL);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_debug_stream(s, null), KILN_OK);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    assert_int_equal(kiln_feed(s, x, in), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    assert_int_equal(kiln_function_print(f, null), KILN_OK);
    assert_int_equal(kiln_session_set_profiling(s, 1), KILN_OK);
    kiln_tensor *out = kiln_function_new_output(f, 0);
    assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
    assert_int_equal(kiln_session_print_profile(s, null), KILN_OK);
    /* a graph holding an error prints and refuses to compile */
    kiln_reshape(g, x, KILN_SHAPE(7));
    assert_int_equal(kiln_graph_print(g, null), KILN_OK);
    assert_null(kiln_compile(s, g, &y, 1, &x, 1));
    want_msg(kiln_session_error(s), "kiln_reshape");
    kiln_tensor_free(out);
    kiln_tensor_free(in);
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
    free(name);
    fclose(null);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_hostile_shapes),
        cmocka_unit_test(test_tensor_bad_dtypes),
        cmocka_unit_test(test_builders_hostile_shapes),
        cmocka_unit_test(test_builders_bad_dtypes),
        cmocka_unit_test(test_builders_bad_arguments),
        cmocka_unit_test(test_i32_init_value_range),
        cmocka_unit_test(test_huge_valid_shapes_run_out_of_memory),
        cmocka_unit_test(test_foreign_nodes),
        cmocka_unit_test(test_compile_bad_counts),
        cmocka_unit_test(test_run_bad_tensors),
        cmocka_unit_test(test_use_after_failed_compile),
        cmocka_unit_test(test_function_after_session_free),
        cmocka_unit_test(test_function_outlives_graph),
        cmocka_unit_test(test_dynamic_call_order),
        cmocka_unit_test(test_optimizer_bad_options),
        cmocka_unit_test(test_batcher_hostile),
        cmocka_unit_test(test_files_missing_and_odd),
        cmocka_unit_test(test_session_load_truncated),
        cmocka_unit_test(test_axes_and_modules_hostile),
        cmocka_unit_test(test_session_settings_hostile),
        cmocka_unit_test(test_autodiff_hostile),
        cmocka_unit_test(test_lists_and_onnx_options_hostile),
        cmocka_unit_test(test_program_hostile),
        cmocka_unit_test(test_dist_null_comm),
        cmocka_unit_test(test_printing_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
