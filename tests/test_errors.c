/* Error paths of the public API: every function given bad input returns the
   error its header comment documents, leaves a message where the error model
   says (graph, session or kiln_last_error) and never crashes.  The `files`
   section of kiln.h is tested in test_io.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

/* ------------------------------------------------------------ helpers */

#define SHAPE9 ((kiln_shape){.ndim = 9, .d = {1, 1, 1, 1, 1, 1, 1, 1}})

static void assert_contains(const char *haystack, const char *needle)
{
    if (!haystack || !strstr(haystack, needle))
        fail_msg("message \"%s\" does not contain \"%s\"",
                 haystack ? haystack : "(null)", needle);
}

static int is_poison(const kiln_node *n)
{
    return n && kiln_node_id(n) == -1 &&
           strcmp(kiln_node_op_name(n), "error") == 0;
}

/* Checks that g failed with st and a message containing want, and that n is
   the poisoned node. */
static void assert_failed(kiln_graph *g, kiln_node *n, kiln_status st,
                          const char *want)
{
    if (kiln_graph_status(g) != st)
        fail_msg("status %s, expected %s (message \"%s\")",
                 kiln_status_str(kiln_graph_status(g)), kiln_status_str(st),
                 kiln_graph_error(g));
    assert_contains(kiln_graph_error(g), want);
    assert_true(is_poison(n));
}

/* Runs one builder on a fresh graph with an f32 [2,3] input and expects it
   to fail with st and a message containing want. */
typedef kiln_node *(*build_fn)(kiln_graph *g, kiln_node *x);

static void expect_build_error(build_fn build, kiln_dtype dt, kiln_shape shape,
                               kiln_status st, const char *want)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", dt, shape);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    kiln_node *r = build(g, x);
    assert_failed(g, r, st, want);
    int count = kiln_graph_node_count(g);
    assert_true(is_poison(kiln_neg(g, x)));
    assert_int_equal(kiln_graph_node_count(g), count);
    kiln_graph_free(g);
}

static kiln_tensor *tensor_filled(kiln_shape s, float v)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, s);
    assert_non_null(t);
    float *p = kiln_tensor_f32(t);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
        p[i] = v;
    return t;
}

static void assert_all(const kiln_tensor *t, float v)
{
    const float *p = kiln_tensor_f32(t);
    assert_non_null(p);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
        assert_float_equal(p[i], v, 0);
}

/* ------------------------------------------------------------ basics */

static void test_basics(void **state)
{
    (void)state;
    for (int st = KILN_OK; st <= KILN_ERR_UNSUPPORTED; st++)
        assert_true(strlen(kiln_status_str((kiln_status)st)) > 0);
    assert_string_equal(kiln_status_str((kiln_status)99), "unknown status");
    assert_string_equal(kiln_status_str(KILN_ERR_SHAPE), "shape error");
    assert_int_equal(kiln_dtype_size((kiln_dtype)99), 0);
    assert_string_equal(kiln_dtype_name((kiln_dtype)99), "?");
    assert_int_equal(kiln_shape_numel(KILN_SCALAR), 1);
    assert_int_equal(kiln_shape_numel(KILN_SHAPE(2, 0, 3)), 0);
    assert_null(kiln_shape_str(KILN_SHAPE(1, 2), NULL, 0));
    char tiny[4];
    kiln_shape_str(KILN_SHAPE(128, 784), tiny, sizeof tiny);
    assert_int_equal(strlen(tiny), 3); /* truncated, terminated */
    char buf[64];
    assert_string_equal(kiln_shape_str(SHAPE9, buf, sizeof buf),
                        "[1,1,1,1,1,1,1,1]");
    assert_non_null(kiln_last_error());
}

static void test_rng_null(void **state)
{
    (void)state;
    kiln_rng_seed(NULL, 1);
    assert_int_equal(kiln_rng_u32(NULL), 0);
    assert_true(kiln_rng_uniform(NULL) == 0.0);
    assert_true(kiln_rng_normal(NULL) == 0.0);
}

/* ------------------------------------------------------------ tensors */

static void test_tensor_errors(void **state)
{
    (void)state;
    kiln_shape neg = KILN_SHAPE(2, -1);
    kiln_shape bad_ndim = {.ndim = -1};
    assert_null(kiln_tensor_new(KILN_F32, neg));
    assert_contains(kiln_last_error(), "kiln_tensor_new: invalid shape");
    assert_null(kiln_tensor_new(KILN_F32, SHAPE9));
    assert_contains(kiln_last_error(), "kiln_tensor_new");
    assert_null(kiln_tensor_new(KILN_F32, bad_ndim));
    assert_contains(kiln_last_error(), "invalid shape");
    assert_null(kiln_tensor_new(KILN_F16, KILN_SHAPE(2)));
    assert_contains(kiln_last_error(), "unsupported dtype f16");
    assert_null(kiln_tensor_new((kiln_dtype)99, KILN_SHAPE(2)));
    assert_contains(kiln_last_error(), "unsupported dtype ?");

    assert_null(kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2, 3), NULL));
    assert_contains(kiln_last_error(), "kiln_tensor_wrap: data is NULL");
    float data[4] = {0};
    assert_null(kiln_tensor_wrap(KILN_BF16, KILN_SHAPE(2), data));
    assert_contains(kiln_last_error(), "kiln_tensor_wrap: unsupported dtype");
    assert_null(kiln_tensor_wrap(KILN_F32, neg, data));
    assert_contains(kiln_last_error(), "kiln_tensor_wrap: invalid shape");
    kiln_tensor *empty = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(0, 3), NULL);
    assert_non_null(empty); /* no elements, no data needed */
    kiln_tensor_free(empty);

    assert_null(kiln_tensor_from_f32(KILN_SHAPE(2), NULL));
    assert_contains(kiln_last_error(), "kiln_tensor_from_f32: values is NULL");
    assert_null(kiln_tensor_from_f32(neg, data));
    assert_contains(kiln_last_error(), "invalid shape");

    /* accessors on NULL and on the wrong dtype */
    assert_null(kiln_tensor_data(NULL));
    assert_null(kiln_tensor_f32(NULL));
    assert_null(kiln_tensor_i32(NULL));
    assert_int_equal(kiln_tensor_numel(NULL), 0);
    assert_int_equal(kiln_tensor_shape(NULL).ndim, 0);
    kiln_tensor *ti = kiln_tensor_new(KILN_I32, KILN_SHAPE(2));
    assert_null(kiln_tensor_f32(ti));
    assert_non_null(kiln_tensor_i32(ti));
    kiln_tensor_free(ti);
}

static void test_init_fill_errors(void **state)
{
    (void)state;
    float buf[6];
    kiln_rng rng;
    kiln_rng_seed(&rng, 1);
    kiln_init bad = {(kiln_init_kind)42, 0, 0, NULL};
    assert_int_equal(kiln_init_fill(bad, KILN_SHAPE(2, 3), buf, &rng),
                     KILN_ERR_ARG);
    assert_contains(kiln_last_error(), "unknown initialiser 42");
    assert_int_equal(
        kiln_init_fill(kiln_init_values(NULL), KILN_SHAPE(2, 3), buf, &rng),
        KILN_ERR_ARG);
    assert_contains(kiln_last_error(), "values is NULL");
    assert_int_equal(
        kiln_init_fill(kiln_init_zeros(), KILN_SHAPE(2, 3), NULL, &rng),
        KILN_ERR_ARG);
    assert_contains(kiln_last_error(), "kiln_init_fill: data is NULL");
    assert_int_equal(
        kiln_init_fill(kiln_init_uniform(0, 1), KILN_SHAPE(2, 3), buf, NULL),
        KILN_ERR_ARG);
    assert_contains(kiln_last_error(), "kiln_init_fill: rng is NULL");
    assert_int_equal(
        kiln_init_fill(kiln_init_ones(), KILN_SHAPE(2, -3), buf, &rng),
        KILN_ERR_ARG);
    assert_contains(kiln_last_error(), "invalid shape");
    /* the deterministic kinds need no generator */
    assert_int_equal(
        kiln_init_fill(kiln_init_value(2.5), KILN_SHAPE(2, 3), buf, NULL),
        KILN_OK);
    assert_float_equal(buf[5], 2.5f, 0);
}

/* ------------------------------------------------------------ NULL graph */

static void test_null_graph(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *xs[2] = {x, x};
    int64_t lo[2] = {0, 0}, hi[2] = {1, 1};
    int perm[2] = {1, 0};

    assert_null(kiln_input(NULL, "x", KILN_F32, KILN_SHAPE(2)));
    assert_null(kiln_scalar(NULL, 1.0f));
    assert_null(kiln_constant(NULL, KILN_F32, KILN_SHAPE(1), lo));
    assert_null(kiln_fill(NULL, KILN_SHAPE(2), 1.0f));
    assert_null(
        kiln_variable(NULL, "w", KILN_F32, KILN_SHAPE(2), kiln_init_zeros()));
    kiln_node *(*unary[])(kiln_graph *, kiln_node *) = {
        kiln_neg,  kiln_abs,      kiln_sign,      kiln_exp,
        kiln_log,  kiln_sqrt,     kiln_sin,       kiln_cos,
        kiln_tanh, kiln_sigmoid,  kiln_relu,      kiln_erf,
        kiln_gelu, kiln_gelu_erf, kiln_transpose, kiln_stop_gradient};
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++)
        assert_null(unary[i](NULL, x));
    kiln_node *(*binary[])(kiln_graph *, kiln_node *,
                           kiln_node *) = {kiln_add,
                                           kiln_sub,
                                           kiln_mul,
                                           kiln_div,
                                           kiln_pow,
                                           kiln_max,
                                           kiln_min,
                                           kiln_lt,
                                           kiln_le,
                                           kiln_gt,
                                           kiln_ge,
                                           kiln_eq,
                                           kiln_softmax_cross_entropy,
                                           kiln_binary_cross_entropy,
                                           kiln_assign};
    for (size_t i = 0; i < sizeof binary / sizeof *binary; i++)
        assert_null(binary[i](NULL, x, x));
    assert_null(kiln_scale(NULL, x, 2.0f));
    assert_null(kiln_select(NULL, x, x, x));
    assert_null(kiln_sum(NULL, x, KILN_ALL_AXES, 0));
    assert_null(kiln_reduce_max(NULL, x, KILN_ALL_AXES, 0));
    assert_null(kiln_mean(NULL, x, KILN_ALL_AXES, 0));
    assert_null(kiln_argmax(NULL, x, 0));
    assert_null(kiln_reshape(NULL, x, KILN_SHAPE(6)));
    assert_null(kiln_permute(NULL, x, perm));
    assert_null(kiln_broadcast_to(NULL, x, KILN_SHAPE(4, 2, 3)));
    assert_null(kiln_broadcast(NULL, x, KILN_SHAPE(4, 2, 3), KILN_AXIS(0)));
    assert_null(kiln_slice(NULL, x, lo, hi));
    assert_null(kiln_concat(NULL, xs, 2, 0));
    assert_null(kiln_pad(NULL, x, lo, hi, 0));
    assert_null(kiln_matmul(NULL, x, x, 0, 1));
    assert_null(kiln_dot(NULL, x, x, 1));
    assert_null(kiln_one_hot(NULL, x, 3));
    assert_null(kiln_cast(NULL, x, KILN_I32));
    assert_null(kiln_softmax(NULL, x, 1));
    assert_null(kiln_log_softmax(NULL, x, 1));
    assert_null(kiln_affine(NULL, x, x, x));
    assert_null(kiln_cross_entropy(NULL, x, x, x, -50.0f));
    assert_null(kiln_doall(NULL, xs, 2));
    assert_null(kiln_grad(NULL, x, x));
    assert_null(kiln_backprop_node(NULL, x, x, x));
    kiln_node *out[2];
    assert_int_equal(kiln_grads(NULL, x, NULL, xs, 2, out), KILN_ERR_ARG);

    /* graph functions */
    assert_int_equal(kiln_graph_status(NULL), KILN_ERR_ARG);
    assert_string_equal(kiln_graph_error(NULL), "graph is NULL");
    assert_int_equal(kiln_graph_node_count(NULL), 0);
    kiln_graph_clear(NULL);
    assert_int_equal(kiln_graph_print(NULL, stdout), KILN_ERR_ARG);
    assert_int_equal(kiln_graph_print(g, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_graph_write_dot(NULL, stdout), KILN_ERR_ARG);
    assert_int_equal(kiln_graph_write_dot(g, NULL), KILN_ERR_ARG);

    /* nothing above touched g */
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_int_equal(kiln_graph_node_count(g), 1);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ bad operands */

/* One entry per builder taking nodes: the builder is called with the bad
   operand `bad` in the position named, good nodes elsewhere. */
static kiln_node *good_f32; /* f32 [2,3] in the graph under test */

typedef struct builder_case {
    const char *fn; /* name the message must contain */
    kiln_node *(*call)(kiln_graph *g, kiln_node *bad);
} builder_case;

#define G good_f32
static kiln_node *b_neg(kiln_graph *g, kiln_node *b)
{
    return kiln_neg(g, b);
}
static kiln_node *b_abs(kiln_graph *g, kiln_node *b)
{
    return kiln_abs(g, b);
}
static kiln_node *b_sign(kiln_graph *g, kiln_node *b)
{
    return kiln_sign(g, b);
}
static kiln_node *b_exp(kiln_graph *g, kiln_node *b)
{
    return kiln_exp(g, b);
}
static kiln_node *b_log(kiln_graph *g, kiln_node *b)
{
    return kiln_log(g, b);
}
static kiln_node *b_sqrt(kiln_graph *g, kiln_node *b)
{
    return kiln_sqrt(g, b);
}
static kiln_node *b_sin(kiln_graph *g, kiln_node *b)
{
    return kiln_sin(g, b);
}
static kiln_node *b_cos(kiln_graph *g, kiln_node *b)
{
    return kiln_cos(g, b);
}
static kiln_node *b_tanh(kiln_graph *g, kiln_node *b)
{
    return kiln_tanh(g, b);
}
static kiln_node *b_sigmoid(kiln_graph *g, kiln_node *b)
{
    return kiln_sigmoid(g, b);
}
static kiln_node *b_relu(kiln_graph *g, kiln_node *b)
{
    return kiln_relu(g, b);
}
static kiln_node *b_erf(kiln_graph *g, kiln_node *b)
{
    return kiln_erf(g, b);
}
static kiln_node *b_scale(kiln_graph *g, kiln_node *b)
{
    return kiln_scale(g, b, 2.0f);
}
static kiln_node *b_gelu(kiln_graph *g, kiln_node *b)
{
    return kiln_gelu(g, b);
}
static kiln_node *b_gelu_erf(kiln_graph *g, kiln_node *b)
{
    return kiln_gelu_erf(g, b);
}
static kiln_node *b_add_a(kiln_graph *g, kiln_node *b)
{
    return kiln_add(g, b, G);
}
static kiln_node *b_add_b(kiln_graph *g, kiln_node *b)
{
    return kiln_add(g, G, b);
}
static kiln_node *b_sub(kiln_graph *g, kiln_node *b)
{
    return kiln_sub(g, G, b);
}
static kiln_node *b_mul(kiln_graph *g, kiln_node *b)
{
    return kiln_mul(g, b, G);
}
static kiln_node *b_div(kiln_graph *g, kiln_node *b)
{
    return kiln_div(g, G, b);
}
static kiln_node *b_pow(kiln_graph *g, kiln_node *b)
{
    return kiln_pow(g, b, G);
}
static kiln_node *b_max(kiln_graph *g, kiln_node *b)
{
    return kiln_max(g, G, b);
}
static kiln_node *b_min(kiln_graph *g, kiln_node *b)
{
    return kiln_min(g, b, G);
}
static kiln_node *b_lt(kiln_graph *g, kiln_node *b)
{
    return kiln_lt(g, b, G);
}
static kiln_node *b_le(kiln_graph *g, kiln_node *b)
{
    return kiln_le(g, G, b);
}
static kiln_node *b_gt(kiln_graph *g, kiln_node *b)
{
    return kiln_gt(g, b, G);
}
static kiln_node *b_ge(kiln_graph *g, kiln_node *b)
{
    return kiln_ge(g, G, b);
}
static kiln_node *b_eq(kiln_graph *g, kiln_node *b)
{
    return kiln_eq(g, b, G);
}
static kiln_node *b_select_c(kiln_graph *g, kiln_node *b)
{
    return kiln_select(g, b, G, G);
}
static kiln_node *b_select_b(kiln_graph *g, kiln_node *b)
{
    return kiln_select(g, G, G, b);
}
static kiln_node *b_sum(kiln_graph *g, kiln_node *b)
{
    return kiln_sum(g, b, KILN_ALL_AXES, 0);
}
static kiln_node *b_rmax(kiln_graph *g, kiln_node *b)
{
    return kiln_reduce_max(g, b, KILN_AXIS(0), 1);
}
static kiln_node *b_mean(kiln_graph *g, kiln_node *b)
{
    return kiln_mean(g, b, KILN_AXIS(1), 0);
}
static kiln_node *b_argmax(kiln_graph *g, kiln_node *b)
{
    return kiln_argmax(g, b, 0);
}
static kiln_node *b_reshape(kiln_graph *g, kiln_node *b)
{
    return kiln_reshape(g, b, KILN_SHAPE(-1));
}
static kiln_node *b_permute(kiln_graph *g, kiln_node *b)
{
    static const int perm[2] = {1, 0};
    return kiln_permute(g, b, perm);
}
static kiln_node *b_transpose(kiln_graph *g, kiln_node *b)
{
    return kiln_transpose(g, b);
}
static kiln_node *b_broadcast_to(kiln_graph *g, kiln_node *b)
{
    return kiln_broadcast_to(g, b, KILN_SHAPE(4, 2, 3));
}
static kiln_node *b_broadcast(kiln_graph *g, kiln_node *b)
{
    return kiln_broadcast(g, b, KILN_SHAPE(4, 2, 3), KILN_AXIS(0));
}
static kiln_node *b_slice(kiln_graph *g, kiln_node *b)
{
    static const int64_t lo[2] = {0, 0}, hi[2] = {1, 2};
    return kiln_slice(g, b, lo, hi);
}
static kiln_node *b_pad(kiln_graph *g, kiln_node *b)
{
    static const int64_t lo[2] = {0, 1}, hi[2] = {1, 0};
    return kiln_pad(g, b, lo, hi, 0.0f);
}
static kiln_node *b_concat(kiln_graph *g, kiln_node *b)
{
    kiln_node *xs[3] = {G, b, G};
    return kiln_concat(g, xs, 3, 0);
}
static kiln_node *b_matmul_a(kiln_graph *g, kiln_node *b)
{
    return kiln_matmul(g, b, G, 0, 1);
}
static kiln_node *b_matmul_b(kiln_graph *g, kiln_node *b)
{
    return kiln_matmul(g, G, b, 0, 1);
}
static kiln_node *b_dot(kiln_graph *g, kiln_node *b)
{
    return kiln_dot(g, G, b, 1);
}
static kiln_node *b_one_hot(kiln_graph *g, kiln_node *b)
{
    return kiln_one_hot(g, b, 3);
}
static kiln_node *b_cast(kiln_graph *g, kiln_node *b)
{
    return kiln_cast(g, b, KILN_I32);
}
static kiln_node *b_stopgrad(kiln_graph *g, kiln_node *b)
{
    return kiln_stop_gradient(g, b);
}
static kiln_node *b_softmax(kiln_graph *g, kiln_node *b)
{
    return kiln_softmax(g, b, 1);
}
static kiln_node *b_log_softmax(kiln_graph *g, kiln_node *b)
{
    return kiln_log_softmax(g, b, -1);
}
static kiln_node *b_affine_x(kiln_graph *g, kiln_node *b)
{
    return kiln_affine(g, b, G, G);
}
static kiln_node *b_affine_b(kiln_graph *g, kiln_node *b)
{
    return kiln_affine(g, G, kiln_transpose(g, G), b);
}
static kiln_node *b_cross_entropy(kiln_graph *g, kiln_node *b)
{
    return kiln_cross_entropy(g, G, b, kiln_scalar(g, 2.0f), -50.0f);
}
static kiln_node *b_sce(kiln_graph *g, kiln_node *b)
{
    return kiln_softmax_cross_entropy(g, b, G);
}
static kiln_node *b_bce(kiln_graph *g, kiln_node *b)
{
    return kiln_binary_cross_entropy(g, G, b);
}
static kiln_node *b_assign_var(kiln_graph *g, kiln_node *b)
{
    return kiln_assign(g, b, G);
}
static kiln_node *b_assign_val(kiln_graph *g, kiln_node *b)
{
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2, 3), kiln_init_zeros());
    return kiln_assign(g, w, b);
}
static kiln_node *b_doall(kiln_graph *g, kiln_node *b)
{
    kiln_node *xs[2] = {G, b};
    return kiln_doall(g, xs, 2);
}
static kiln_node *b_grad_y(kiln_graph *g, kiln_node *b)
{
    return kiln_grad(g, b, G);
}
static kiln_node *b_grad_x(kiln_graph *g, kiln_node *b)
{
    return kiln_grad(g, kiln_sum(g, G, KILN_ALL_AXES, 0), b);
}
static kiln_node *b_backprop_x(kiln_graph *g, kiln_node *b)
{
    return kiln_backprop_node(g, G, kiln_fill(g, KILN_SHAPE(2, 3), 1), b);
}
static kiln_node *b_grads(kiln_graph *g, kiln_node *b)
{
    kiln_node *xs[2] = {G, b}, *out[2] = {NULL, NULL};
    kiln_status st =
        kiln_grads(g, kiln_sum(g, G, KILN_ALL_AXES, 0), NULL, xs, 2, out);
    assert_int_not_equal(st, KILN_OK);
    assert_true(is_poison(out[0]) && is_poison(out[1]));
    return out[1];
}
#undef G

static const builder_case builders[] = {
    {"kiln_neg", b_neg},
    {"kiln_abs", b_abs},
    {"kiln_sign", b_sign},
    {"kiln_exp", b_exp},
    {"kiln_log", b_log},
    {"kiln_sqrt", b_sqrt},
    {"kiln_sin", b_sin},
    {"kiln_cos", b_cos},
    {"kiln_tanh", b_tanh},
    {"kiln_sigmoid", b_sigmoid},
    {"kiln_relu", b_relu},
    {"kiln_erf", b_erf},
    {"kiln_scale", b_scale},
    {"kiln_gelu", b_gelu},
    {"kiln_gelu_erf", b_gelu_erf},
    {"kiln_add", b_add_a},
    {"kiln_add", b_add_b},
    {"kiln_sub", b_sub},
    {"kiln_mul", b_mul},
    {"kiln_div", b_div},
    {"kiln_pow", b_pow},
    {"kiln_max", b_max},
    {"kiln_min", b_min},
    {"kiln_lt", b_lt},
    {"kiln_le", b_le},
    {"kiln_gt", b_gt},
    {"kiln_ge", b_ge},
    {"kiln_eq", b_eq},
    {"kiln_select", b_select_c},
    {"kiln_select", b_select_b},
    {"kiln_sum", b_sum},
    {"kiln_reduce_max", b_rmax},
    {"kiln_mean", b_mean},
    {"kiln_argmax", b_argmax},
    {"kiln_reshape", b_reshape},
    {"kiln_permute", b_permute},
    {"kiln_transpose", b_transpose},
    {"kiln_broadcast_to", b_broadcast_to},
    {"kiln_broadcast", b_broadcast},
    {"kiln_slice", b_slice},
    {"kiln_pad", b_pad},
    {"kiln_concat", b_concat},
    {"kiln_matmul", b_matmul_a},
    {"kiln_matmul", b_matmul_b},
    {"kiln_dot", b_dot},
    {"kiln_one_hot", b_one_hot},
    {"kiln_cast", b_cast},
    {"kiln_stop_gradient", b_stopgrad},
    {"kiln_softmax", b_softmax},
    {"kiln_log_softmax", b_log_softmax},
    {"kiln_affine", b_affine_x},
    {"kiln_affine", b_affine_b},
    {"kiln_cross_entropy", b_cross_entropy},
    {"kiln_softmax_cross_entropy", b_sce},
    {"kiln_binary_cross_entropy", b_bce},
    {"kiln_assign", b_assign_var},
    {"kiln_assign", b_assign_val},
    {"kiln_doall", b_doall},
    {"kiln_grad", b_grad_y},
    {"kiln_grad", b_grad_x},
    {"kiln_backprop_node", b_backprop_x},
    {"kiln_grads", b_grads},
};
#define N_BUILDERS (sizeof builders / sizeof *builders)

enum bad_kind { BAD_NULL, BAD_FOREIGN, BAD_POISONED };

/* Runs every builder with one kind of bad operand.  Each must fail with
   KILN_ERR_ARG and a message naming it; the failure is sticky. */
static void run_bad_operand(enum bad_kind kind, const char *want)
{
    kiln_graph *other = kiln_graph_new();
    kiln_node *foreign = kiln_input(other, "f", KILN_F32, KILN_SHAPE(2, 3));
    for (size_t i = 0; i < N_BUILDERS; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *bad = NULL;
        if (kind == BAD_FOREIGN) {
            bad = foreign;
        } else if (kind == BAD_POISONED) {
            /* a poisoned node of g that outlived the error (cleared graph) */
            bad = kiln_neg(g, NULL);
            assert_true(is_poison(bad));
            kiln_graph_clear(g);
        }
        good_f32 = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
        kiln_node *r = builders[i].call(g, bad);
        if (kiln_graph_status(g) != KILN_ERR_ARG || !is_poison(r))
            fail_msg("%s (case %zu): status %s, message \"%s\"", builders[i].fn,
                     i, kiln_status_str(kiln_graph_status(g)),
                     kiln_graph_error(g));
        char want_fn[64];
        snprintf(want_fn, sizeof want_fn, "%s: ", builders[i].fn);
        assert_contains(kiln_graph_error(g), want_fn);
        assert_contains(kiln_graph_error(g), want);

        /* sticky: later builders give the poisoned node, message kept */
        char first[512];
        snprintf(first, sizeof first, "%s", kiln_graph_error(g));
        int count = kiln_graph_node_count(g);
        assert_true(is_poison(kiln_add(g, good_f32, good_f32)));
        assert_true(is_poison(kiln_matmul(g, good_f32, good_f32, 0, 0)));
        assert_true(is_poison(kiln_input(g, "y", KILN_F32, KILN_SCALAR)));
        assert_true(is_poison(kiln_scalar(g, 1.0f)));
        assert_true(is_poison(
            kiln_variable(g, "v", KILN_F32, KILN_SHAPE(2), kiln_init_zeros())));
        assert_true(is_poison(builders[i].call(g, good_f32)));
        assert_int_equal(kiln_graph_status(g), KILN_ERR_ARG);
        assert_string_equal(kiln_graph_error(g), first);
        assert_int_equal(kiln_graph_node_count(g), count);
        kiln_graph_free(g);
    }
    kiln_graph_free(other);
}

static void test_null_operand(void **state)
{
    (void)state;
    run_bad_operand(BAD_NULL, "NULL");
}

static void test_foreign_operand(void **state)
{
    (void)state;
    run_bad_operand(BAD_FOREIGN, "belongs to another graph");
}

static void test_poisoned_operand(void **state)
{
    (void)state;
    run_bad_operand(BAD_POISONED, "poisoned");
}

/* A poisoned node from another, failed graph is refused as foreign. */
static void test_poison_of_other_graph(void **state)
{
    (void)state;
    kiln_graph *h = kiln_graph_new();
    kiln_node *p = kiln_exp(h, NULL);
    assert_true(is_poison(p));
    kiln_graph *g = kiln_graph_new();
    kiln_node *r = kiln_exp(g, p);
    assert_failed(g, r, KILN_ERR_ARG,
                  "kiln_exp: operand %-1 belongs to another graph");
    kiln_graph_free(g);
    kiln_graph_free(h);
}

/* ------------------------------------------------------------ sticky errors */

static void test_sticky_and_clear(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(128, 784));
    kiln_node *w = kiln_variable(g, "W0", KILN_F32, KILN_SHAPE(785, 600),
                                 kiln_init_uniform(-1, 1));
    kiln_node *h = kiln_matmul(g, x, w, 0, 0);
    assert_failed(g, h, KILN_ERR_SHAPE, "");
    assert_string_equal(kiln_graph_error(g),
                        "kiln_matmul: [128,784] x [785,600]: inner dimensions "
                        "differ (784 vs 785)");
    /* the chain continues cheaply; the first message stays */
    kiln_node *r = kiln_relu(g, h);
    kiln_node *l = kiln_sum(g, kiln_add(g, r, kiln_fill(g, KILN_SHAPE(3), 1)),
                            KILN_ALL_AXES, 0);
    assert_true(is_poison(r) && is_poison(l));
    assert_true(
        is_poison(kiln_add(g, x, kiln_input(g, "Z", KILN_F32, KILN_SHAPE(7)))));
    assert_int_equal(kiln_graph_status(g), KILN_ERR_SHAPE);
    assert_string_equal(kiln_graph_error(g),
                        "kiln_matmul: [128,784] x [785,600]: inner dimensions "
                        "differ (784 vs 785)");
    assert_int_equal(kiln_graph_node_count(g), 2);
    /* printing a failed graph still works */
    FILE *null_out = fopen("/dev/null", "w");
    assert_non_null(null_out);
    assert_int_equal(kiln_graph_print(g, null_out), KILN_OK);
    assert_int_equal(kiln_graph_write_dot(g, null_out), KILN_OK);
    fclose(null_out);

    /* transposed operands show up in the message */
    kiln_graph_clear(g);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_string_equal(kiln_graph_error(g), "");
    assert_int_equal(kiln_graph_node_count(g), 0);
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(4, 5));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(6, 4));
    assert_failed(
        g, kiln_matmul(g, a, b, 0, 1), KILN_ERR_SHAPE,
        "kiln_matmul: [4,5] x [6,4]^T: inner dimensions differ (5 vs 4)");

    /* after a clear the graph builds normally again */
    kiln_graph_clear(g);
    a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(4, 5));
    kiln_node *ok = kiln_matmul(g, a, a, 1, 0);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_false(is_poison(ok));
    assert_int_equal(kiln_node_shape(ok).d[0], 5);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ shapes */

static kiln_node *e_matmul_1d(kiln_graph *g, kiln_node *x)
{
    return kiln_matmul(g, kiln_reshape(g, x, KILN_SHAPE(6)), x, 0, 0);
}
static kiln_node *e_matmul_batch(kiln_graph *g, kiln_node *x)
{
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(3, 2, 3));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(4, 3, 5));
    (void)x;
    return kiln_matmul(g, a, b, 0, 0);
}
static kiln_node *e_add(kiln_graph *g, kiln_node *x)
{
    return kiln_add(g, x, kiln_input(g, "y", KILN_F32, KILN_SHAPE(4, 3)));
}
static kiln_node *e_pow(kiln_graph *g, kiln_node *x)
{
    return kiln_pow(g, x, kiln_input(g, "y", KILN_F32, KILN_SHAPE(2)));
}
static kiln_node *e_select(kiln_graph *g, kiln_node *x)
{
    return kiln_select(g, kiln_fill(g, KILN_SHAPE(5, 1, 1), 1), x,
                       kiln_fill(g, KILN_SHAPE(3, 3), 0));
}
static kiln_node *e_sum_axes(kiln_graph *g, kiln_node *x)
{
    return kiln_sum(g, x, KILN_AXIS(2), 0);
}
static kiln_node *e_mean_axes(kiln_graph *g, kiln_node *x)
{
    return kiln_mean(g, x, KILN_AXIS(3), 1);
}
static kiln_node *e_argmax_axis(kiln_graph *g, kiln_node *x)
{
    return kiln_argmax(g, x, 5);
}
static kiln_node *e_argmax_empty(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_argmax(g, kiln_input(g, "e", KILN_F32, KILN_SHAPE(2, 0)), 1);
}
static kiln_node *e_softmax_axis(kiln_graph *g, kiln_node *x)
{
    return kiln_softmax(g, x, -3);
}
static kiln_node *e_log_softmax_axis(kiln_graph *g, kiln_node *x)
{
    return kiln_log_softmax(g, x, 2);
}
static kiln_node *e_concat_axis(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[2] = {x, x};
    return kiln_concat(g, xs, 2, 2);
}
static kiln_node *e_perm_dup(kiln_graph *g, kiln_node *x)
{
    static const int perm[2] = {0, 0};
    return kiln_permute(g, x, perm);
}
static kiln_node *e_perm_range(kiln_graph *g, kiln_node *x)
{
    static const int perm[2] = {1, 2};
    return kiln_permute(g, x, perm);
}
static kiln_node *e_perm_null(kiln_graph *g, kiln_node *x)
{
    return kiln_permute(g, x, NULL);
}
static kiln_node *e_transpose_1d(kiln_graph *g, kiln_node *x)
{
    return kiln_transpose(g, kiln_reshape(g, x, KILN_SHAPE(6)));
}
static kiln_node *e_slice_stop(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {0, 0}, hi[2] = {2, 4};
    return kiln_slice(g, x, lo, hi);
}
static kiln_node *e_slice_reversed(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {1, 0}, hi[2] = {0, 3};
    return kiln_slice(g, x, lo, hi);
}
static kiln_node *e_slice_negative(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {-3, 0}, hi[2] = {2, 3};
    return kiln_slice(g, x, lo, hi);
}
static kiln_node *e_slice_huge(kiln_graph *g, kiln_node *x)
{
    /* 2^32 + 1 must not wrap to 1 */
    static const int64_t lo[2] = {0, 0}, hi[2] = {2, ((int64_t)1 << 32) + 1};
    return kiln_slice(g, x, lo, hi);
}
static kiln_node *e_slice_null(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {0, 0};
    return kiln_slice(g, x, lo, NULL);
}
static kiln_node *e_pad_negative(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {0, -1}, hi[2] = {1, 1};
    return kiln_pad(g, x, lo, hi, 0.0f);
}
static kiln_node *e_pad_null(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {0, 1};
    return kiln_pad(g, x, lo, NULL, 0.0f);
}
static kiln_node *e_pad_huge(kiln_graph *g, kiln_node *x)
{
    static const int64_t lo[2] = {(int64_t)1 << 50, 0}, hi[2] = {0, 0};
    return kiln_pad(g, x, lo, hi, 0.0f);
}
static kiln_node *e_reshape_count(kiln_graph *g, kiln_node *x)
{
    return kiln_reshape(g, x, KILN_SHAPE(4, 2));
}
static kiln_node *e_reshape_infer(kiln_graph *g, kiln_node *x)
{
    return kiln_reshape(g, x, KILN_SHAPE(4, -1));
}
static kiln_node *e_reshape_two(kiln_graph *g, kiln_node *x)
{
    return kiln_reshape(g, x, KILN_SHAPE(-1, -1));
}
static kiln_node *e_reshape_neg(kiln_graph *g, kiln_node *x)
{
    return kiln_reshape(g, x, KILN_SHAPE(-2, -3));
}
static kiln_node *e_concat_shape(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[2] = {x, kiln_input(g, "y", KILN_F32, KILN_SHAPE(2, 4))};
    return kiln_concat(g, xs, 2, 0);
}
static kiln_node *e_concat_ndim(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[2] = {x, kiln_input(g, "y", KILN_F32, KILN_SHAPE(2, 3, 1))};
    return kiln_concat(g, xs, 2, 0);
}
static kiln_node *e_concat_dtype(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[2] = {x, kiln_input(g, "y", KILN_I32, KILN_SHAPE(2, 3))};
    return kiln_concat(g, xs, 2, 0);
}
static kiln_node *e_concat_empty(kiln_graph *g, kiln_node *x)
{
    kiln_node *xs[1] = {x};
    return kiln_concat(g, xs, 0, 0);
}
static kiln_node *e_broadcast_to(kiln_graph *g, kiln_node *x)
{
    return kiln_broadcast_to(g, x, KILN_SHAPE(2, 4));
}
static kiln_node *e_broadcast_to_fewer(kiln_graph *g, kiln_node *x)
{
    return kiln_broadcast_to(g, x, KILN_SHAPE(3));
}
static kiln_node *e_broadcast_axes(kiln_graph *g, kiln_node *x)
{
    return kiln_broadcast(g, x, KILN_SHAPE(2, 3, 4), KILN_AXIS(0));
}
static kiln_node *e_dot_shape(kiln_graph *g, kiln_node *x)
{
    return kiln_dot(g, x, x, 1);
}
static kiln_node *e_dot_n(kiln_graph *g, kiln_node *x)
{
    return kiln_dot(g, x, x, 3);
}
static kiln_node *e_one_hot_depth(kiln_graph *g, kiln_node *x)
{
    return kiln_one_hot(g, x, 0);
}
static kiln_node *e_one_hot_dims(kiln_graph *g, kiln_node *x)
{
    (void)x;
    kiln_node *l =
        kiln_input(g, "l", KILN_I32, KILN_SHAPE(1, 1, 1, 1, 1, 1, 1, 2));
    return kiln_one_hot(g, l, 3);
}
static kiln_node *e_reshape_dims(kiln_graph *g, kiln_node *x)
{
    return kiln_reshape(g, x, SHAPE9);
}
static kiln_node *e_input_dims(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_input(g, "big", KILN_F32, SHAPE9);
}
static kiln_node *e_fill_dims(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_fill(g, SHAPE9, 1.0f);
}
static kiln_node *e_broadcast_dims(kiln_graph *g, kiln_node *x)
{
    return kiln_broadcast_to(g, x, SHAPE9);
}
static kiln_node *e_variable_dims(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_variable(g, "w", KILN_F32, SHAPE9, kiln_init_zeros());
}
static kiln_node *e_input_shape(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_input(g, "neg", KILN_F32, KILN_SHAPE(2, -1));
}
static kiln_node *e_input_dtype(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_input(g, "half", KILN_F16, KILN_SHAPE(2));
}
static kiln_node *e_constant_null(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_constant(g, KILN_F32, KILN_SHAPE(2), NULL);
}
static kiln_node *e_constant_dtype(kiln_graph *g, kiln_node *x)
{
    static const float v[2] = {1, 2};
    (void)x;
    return kiln_constant(g, KILN_F64, KILN_SHAPE(2), v);
}
static kiln_node *e_cast_dtype(kiln_graph *g, kiln_node *x)
{
    return kiln_cast(g, x, KILN_U8);
}
static kiln_node *e_variable_null(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_variable(g, NULL, KILN_F32, KILN_SHAPE(2), kiln_init_zeros());
}
static kiln_node *e_variable_empty(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_variable(g, "", KILN_F32, KILN_SHAPE(2), kiln_init_zeros());
}
static kiln_node *e_variable_dtype(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_variable(g, "w", KILN_BF16, KILN_SHAPE(2), kiln_init_zeros());
}
static kiln_node *e_variable_init(kiln_graph *g, kiln_node *x)
{
    (void)x;
    kiln_init bad = {(kiln_init_kind)17, 0, 0, NULL};
    return kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2), bad);
}
static kiln_node *e_variable_values(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2),
                         kiln_init_values(NULL));
}
static kiln_node *e_variable_clash(kiln_graph *g, kiln_node *x)
{
    (void)x;
    kiln_node *w =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2, 3), kiln_init_zeros());
    assert_ptr_equal(
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2, 3), kiln_init_ones()), w);
    return kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3, 3), kiln_init_zeros());
}
static kiln_node *e_variable_clash_dtype(kiln_graph *g, kiln_node *x)
{
    (void)x;
    kiln_variable(g, "W", KILN_F32, KILN_SHAPE(2, 3), kiln_init_zeros());
    return kiln_variable(g, "W", KILN_I32, KILN_SHAPE(2, 3), kiln_init_zeros());
}
static kiln_node *e_trainable(kiln_graph *g, kiln_node *x)
{
    (void)g;
    return kiln_node_set_trainable(x, 0);
}
static kiln_node *e_assign_target(kiln_graph *g, kiln_node *x)
{
    return kiln_assign(g, x, kiln_fill(g, KILN_SHAPE(2, 3), 1));
}
static kiln_node *e_assign_shape(kiln_graph *g, kiln_node *x)
{
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3, 2), kiln_init_zeros());
    return kiln_assign(g, w, x);
}
static kiln_node *e_doall_empty(kiln_graph *g, kiln_node *x)
{
    (void)x;
    return kiln_doall(g, NULL, 0);
}
static kiln_node *e_cross_entropy(kiln_graph *g, kiln_node *x)
{
    return kiln_cross_entropy(g, x, kiln_fill(g, KILN_SHAPE(3, 2), 0),
                              kiln_scalar(g, 2), -50);
}
static kiln_node *e_sce_shape(kiln_graph *g, kiln_node *x)
{
    return kiln_softmax_cross_entropy(
        g, x, kiln_input(g, "l", KILN_I32, KILN_SHAPE(3)));
}
static kiln_node *e_sce_dtype(kiln_graph *g, kiln_node *x)
{
    return kiln_softmax_cross_entropy(
        g, x, kiln_input(g, "l", KILN_F32, KILN_SHAPE(2)));
}
static kiln_node *e_bce(kiln_graph *g, kiln_node *x)
{
    return kiln_binary_cross_entropy(g, x, kiln_fill(g, KILN_SHAPE(4), 0));
}
static kiln_node *e_affine(kiln_graph *g, kiln_node *x)
{
    return kiln_affine(g, x, kiln_fill(g, KILN_SHAPE(4, 4), 0),
                       kiln_fill(g, KILN_SHAPE(4), 0));
}

static void test_shape_errors(void **state)
{
    (void)state;
    const kiln_shape s = KILN_SHAPE(2, 3);
    struct {
        build_fn f;
        kiln_status st;
        const char *want;
    } cases[] = {
        {e_matmul_1d, KILN_ERR_SHAPE,
         "kiln_matmul: [6] x [2,3]: operands need 2 or more dims"},
        {e_matmul_batch, KILN_ERR_SHAPE,
         "kiln_matmul: batch dims of [3,2,3] and [4,3,5] do not broadcast"},
        {e_add, KILN_ERR_SHAPE, "kiln_add: [2,3] and [4,3] do not broadcast"},
        {e_pow, KILN_ERR_SHAPE, "kiln_pow: [2,3] and [2] do not broadcast"},
        {e_select, KILN_ERR_SHAPE,
         "kiln_select: [5,1,1], [2,3] and [3,3] do not broadcast"},
        {e_sum_axes, KILN_ERR_ARG,
         "kiln_sum: axis mask 0x4 names axes beyond the 2 dims"},
        {e_mean_axes, KILN_ERR_ARG, "kiln_mean: axis mask 0x8"},
        {e_argmax_axis, KILN_ERR_ARG,
         "kiln_argmax: axis 5 out of range for 2 dims"},
        {e_argmax_empty, KILN_ERR_SHAPE, "kiln_argmax: axis 1 is empty"},
        {e_softmax_axis, KILN_ERR_ARG,
         "kiln_softmax: axis -3 out of range for 2 dims"},
        {e_log_softmax_axis, KILN_ERR_ARG,
         "kiln_log_softmax: axis 2 out of range"},
        {e_concat_axis, KILN_ERR_ARG,
         "kiln_concat: axis 2 out of range for 2 dims"},
        {e_perm_dup, KILN_ERR_ARG,
         "kiln_permute: perm is not a permutation of 2 axes"},
        {e_perm_range, KILN_ERR_ARG, "kiln_permute: perm is not a permutation"},
        {e_perm_null, KILN_ERR_ARG, "kiln_permute: perm is NULL"},
        {e_transpose_1d, KILN_ERR_SHAPE,
         "kiln_transpose: needs 2 or more dims, got 1"},
        {e_slice_stop, KILN_ERR_SHAPE,
         "kiln_slice: range [0:4] out of bounds on axis 1 of [2,3]"},
        {e_slice_reversed, KILN_ERR_SHAPE,
         "kiln_slice: range [1:0] out of bounds on axis 0"},
        {e_slice_negative, KILN_ERR_SHAPE,
         "kiln_slice: range [-3:2] out of bounds on axis 0"},
        {e_slice_huge, KILN_ERR_SHAPE,
         "kiln_slice: range [0:4294967297] out of bounds on axis 1"},
        {e_slice_null, KILN_ERR_ARG, "kiln_slice: start or stop is NULL"},
        {e_pad_negative, KILN_ERR_ARG, "kiln_pad: negative padding on axis 1"},
        {e_pad_null, KILN_ERR_ARG, "kiln_pad: lo or hi is NULL"},
        {e_pad_huge, KILN_ERR_SHAPE, "kiln_pad: invalid shape"},
        {e_reshape_count, KILN_ERR_SHAPE,
         "kiln_reshape: [2,3] to [4,2] changes the element count"},
        {e_reshape_infer, KILN_ERR_SHAPE,
         "kiln_reshape: cannot infer -1 reshaping [2,3] to [4,-1]"},
        {e_reshape_two, KILN_ERR_SHAPE, "kiln_reshape: invalid shape [-1,-1]"},
        {e_reshape_neg, KILN_ERR_SHAPE, "kiln_reshape: invalid shape [-2,-3]"},
        {e_concat_shape, KILN_ERR_SHAPE,
         "kiln_concat: f32[2,3] and f32[2,4] differ off axis 0"},
        {e_concat_ndim, KILN_ERR_SHAPE,
         "kiln_concat: f32[2,3] and f32[2,3,1] differ"},
        {e_concat_dtype, KILN_ERR_SHAPE,
         "kiln_concat: f32[2,3] and i32[2,3] differ"},
        {e_concat_empty, KILN_ERR_ARG, "kiln_concat: needs at least one node"},
        {e_broadcast_to, KILN_ERR_SHAPE,
         "kiln_broadcast_to: cannot broadcast [2,3] to [2,4]"},
        {e_broadcast_to_fewer, KILN_ERR_SHAPE,
         "kiln_broadcast_to: cannot broadcast [2,3] to [3]"},
        {e_broadcast_axes, KILN_ERR_SHAPE,
         "kiln_broadcast: [2,3] with new axes 0x1 does not give [2,3,4]"},
        {e_dot_shape, KILN_ERR_SHAPE,
         "kiln_dot: [2,3] . [2,3]: contracted axes differ (3 vs 2)"},
        {e_dot_n, KILN_ERR_ARG,
         "kiln_dot: cannot contract 3 axes of [2,3] and [2,3]"},
        {e_one_hot_dims, KILN_ERR_SHAPE, "kiln_one_hot: too many dims"},
        {e_reshape_dims, KILN_ERR_SHAPE, "kiln_reshape: 9 dims (at most 8)"},
        {e_input_dims, KILN_ERR_SHAPE, "kiln_input: 9 dims (at most 8)"},
        {e_fill_dims, KILN_ERR_SHAPE, "kiln_fill: 9 dims (at most 8)"},
        {e_broadcast_dims, KILN_ERR_SHAPE,
         "kiln_broadcast_to: 9 dims (at most 8)"},
        {e_variable_dims, KILN_ERR_SHAPE, "kiln_variable: 9 dims (at most 8)"},
        {e_input_shape, KILN_ERR_SHAPE, "kiln_input: invalid shape [2,-1]"},
        {e_input_dtype, KILN_ERR_DTYPE,
         "kiln_input: dtype f16 is not supported"},
        {e_constant_null, KILN_ERR_ARG, "kiln_constant: data is NULL"},
        {e_constant_dtype, KILN_ERR_DTYPE,
         "kiln_constant: dtype f64 is not supported"},
        {e_cast_dtype, KILN_ERR_DTYPE, "kiln_cast: dtype u8 is not supported"},
        {e_variable_null, KILN_ERR_ARG,
         "kiln_variable: a variable needs a name"},
        {e_variable_empty, KILN_ERR_ARG,
         "kiln_variable: a variable needs a name"},
        {e_variable_dtype, KILN_ERR_DTYPE,
         "kiln_variable: dtype bf16 is not supported"},
        {e_variable_init, KILN_ERR_ARG,
         "kiln_variable 'w': unknown initialiser 17"},
        {e_variable_values, KILN_ERR_ARG, "kiln_variable 'w': values is NULL"},
        {e_variable_clash, KILN_ERR_SHAPE,
         "kiln_variable: 'W' already in this graph as f32[2,3], not f32[3,3]"},
        {e_variable_clash_dtype, KILN_ERR_SHAPE,
         "'W' already in this graph as f32[2,3], not i32[2,3]"},
        {e_trainable, KILN_ERR_ARG,
         "kiln_node_set_trainable: %0 is a input, not a variable"},
        {e_assign_target, KILN_ERR_ARG,
         "kiln_assign: target %0 is a input, not a variable"},
        {e_assign_shape, KILN_ERR_SHAPE,
         "kiln_assign: variable 'w' is f32[3,2], value is f32[2,3]"},
        {e_doall_empty, KILN_ERR_ARG, "kiln_doall: needs at least one node"},
        {e_cross_entropy, KILN_ERR_SHAPE,
         "kiln_cross_entropy: probabilities [2,3] and one-hot labels [3,2] "
         "differ"},
        {e_sce_shape, KILN_ERR_SHAPE,
         "kiln_softmax_cross_entropy: logits [2,3] and labels [3]: want [N,C] "
         "and [N]"},
        {e_sce_dtype, KILN_ERR_DTYPE,
         "kiln_softmax_cross_entropy: labels have dtype f32, expected i32"},
        {e_bce, KILN_ERR_SHAPE, "do not broadcast"},
        {e_affine, KILN_ERR_SHAPE,
         "kiln_matmul: [2,3] x [4,4]: inner dimensions differ (3 vs 4)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_build_error(cases[i].f, KILN_F32, s, cases[i].st, cases[i].want);
    /* one_hot wants i32 labels; a positive depth */
    expect_build_error(e_one_hot_depth, KILN_I32, KILN_SHAPE(4), KILN_ERR_ARG,
                       "kiln_one_hot: depth 0 must be positive");
}

/* ------------------------------------------------------------ dtypes */

static kiln_node *d_exp(kiln_graph *g, kiln_node *x)
{
    return kiln_exp(g, x);
}
static kiln_node *d_relu(kiln_graph *g, kiln_node *x)
{
    return kiln_relu(g, x);
}
static kiln_node *d_scale(kiln_graph *g, kiln_node *x)
{
    return kiln_scale(g, x, 2.0f);
}
static kiln_node *d_gelu(kiln_graph *g, kiln_node *x)
{
    return kiln_gelu(g, x);
}
static kiln_node *d_add(kiln_graph *g, kiln_node *x)
{
    return kiln_add(g, kiln_fill(g, KILN_SHAPE(4), 1), x);
}
static kiln_node *d_eq(kiln_graph *g, kiln_node *x)
{
    return kiln_eq(g, x, x);
}
static kiln_node *d_select(kiln_graph *g, kiln_node *x)
{
    kiln_node *f = kiln_fill(g, KILN_SHAPE(4), 1);
    return kiln_select(g, f, f, x);
}
static kiln_node *d_sum(kiln_graph *g, kiln_node *x)
{
    return kiln_sum(g, x, KILN_ALL_AXES, 0);
}
static kiln_node *d_rmax(kiln_graph *g, kiln_node *x)
{
    return kiln_reduce_max(g, x, KILN_ALL_AXES, 0);
}
static kiln_node *d_mean(kiln_graph *g, kiln_node *x)
{
    return kiln_mean(g, x, KILN_ALL_AXES, 0);
}
static kiln_node *d_argmax(kiln_graph *g, kiln_node *x)
{
    return kiln_argmax(g, x, 0);
}
static kiln_node *d_matmul(kiln_graph *g, kiln_node *x)
{
    kiln_node *m = kiln_reshape(g, x, KILN_SHAPE(2, 2));
    return kiln_matmul(g, m, m, 0, 0);
}
static kiln_node *d_dot(kiln_graph *g, kiln_node *x)
{
    return kiln_dot(g, kiln_fill(g, KILN_SHAPE(4), 1), x, 1);
}
static kiln_node *d_softmax(kiln_graph *g, kiln_node *x)
{
    return kiln_softmax(g, x, 0);
}
static kiln_node *d_grad(kiln_graph *g, kiln_node *x)
{
    return kiln_grad(
        g, kiln_sum(g, kiln_cast(g, x, KILN_F32), KILN_ALL_AXES, 0), x);
}
static kiln_node *d_grad_y(kiln_graph *g, kiln_node *x)
{
    kiln_node *y = kiln_reshape(
        g, kiln_slice(g, x, (int64_t[]){0}, (int64_t[]){1}), KILN_SCALAR);
    return kiln_grad(g, y, kiln_fill(g, KILN_SHAPE(2), 1));
}

static void test_dtype_errors(void **state)
{
    (void)state;
    const kiln_shape s = KILN_SHAPE(4);
    struct {
        build_fn f;
        const char *want;
    } cases[] = {
        {d_exp,
         "kiln_exp: operand %0 has dtype i32, expected f32 (use kiln_cast)"},
        {d_relu, "kiln_relu: operand %0 has dtype i32, expected f32"},
        {d_scale, "kiln_scale: operand %0 has dtype i32, expected f32"},
        {d_gelu, "kiln_gelu: operand %0 has dtype i32, expected f32"},
        {d_add, "kiln_add: operand %0 has dtype i32"},
        {d_eq, "kiln_eq: operand %0 has dtype i32"},
        {d_select, "kiln_select: operand %0 has dtype i32"},
        {d_sum, "kiln_sum: operand %0 has dtype i32"},
        {d_rmax, "kiln_reduce_max: operand %0 has dtype i32"},
        {d_mean, "kiln_mean: operand %0 has dtype i32"},
        {d_argmax, "kiln_argmax: operand %0 has dtype i32"},
        {d_matmul, "kiln_matmul: operand %1 has dtype i32"},
        {d_dot, "kiln_dot: operand %0 has dtype i32"},
        {d_softmax, "kiln_softmax: operand %0 has dtype i32, expected f32"},
        {d_grad, "kiln_grad: %0 has dtype i32 (no gradient)"},
        {d_grad_y, "kiln_grad: target %2 has dtype i32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_build_error(cases[i].f, KILN_I32, s, KILN_ERR_DTYPE,
                           cases[i].want);
    /* one_hot of f32 labels */
    expect_build_error(b_one_hot, KILN_F32, KILN_SHAPE(4), KILN_ERR_DTYPE,
                       "kiln_one_hot: labels have dtype f32, expected i32");
}

/* ------------------------------------------------------------ autodiff */

static void test_grad_errors(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *y = kiln_exp(g, x);
    assert_failed(g, kiln_grad(g, y, x), KILN_ERR_SHAPE,
                  "kiln_grad: target %1 has shape [2,3]; a non-scalar target "
                  "needs a delta");

    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    y = kiln_exp(g, x);
    kiln_node *delta = kiln_fill(g, KILN_SHAPE(3, 2), 1);
    assert_failed(
        g, kiln_backprop_node(g, y, delta, x), KILN_ERR_SHAPE,
        "kiln_backprop_node: delta f32[3,2] does not match target [2,3]");

    /* a NULL, foreign or poisoned delta */
    kiln_graph *other = kiln_graph_new();
    kiln_node *od = kiln_fill(other, KILN_SHAPE(2, 3), 1);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    y = kiln_exp(g, x);
    assert_failed(g, kiln_backprop_node(g, y, od, x), KILN_ERR_ARG,
                  "kiln_backprop_node: operand %0 belongs to another graph");
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    y = kiln_sum(g, kiln_exp(g, x), KILN_ALL_AXES, 0);
    assert_failed(g, kiln_backprop_node(g, y, kiln_neg(other, NULL), x),
                  KILN_ERR_ARG, "belongs to another graph");
    kiln_graph_free(other);

    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    y = kiln_exp(g, x);
    kiln_node *xs[1] = {x};
    assert_int_equal(kiln_grads(g, y, NULL, xs, 1, NULL), KILN_ERR_ARG);
    assert_contains(kiln_graph_error(g), "kiln_grads: xs or out is NULL");

    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *out[1];
    assert_int_equal(
        kiln_grads(g, kiln_sum(g, x, KILN_ALL_AXES, 0), NULL, NULL, 1, out),
        KILN_ERR_ARG);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    assert_int_equal(
        kiln_grads(g, kiln_sum(g, x, KILN_ALL_AXES, 0), NULL, xs, -1, out),
        KILN_ERR_ARG);

    /* a working case after clearing: the error model does not leak */
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    y = kiln_exp(g, x);
    delta = kiln_fill(g, KILN_SHAPE(2, 3), 1);
    kiln_node *dx = kiln_backprop_node(g, y, delta, x);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_int_equal(kiln_node_shape(dx).ndim, 2);
    /* y does not depend on an unrelated node: a zero node, not an error */
    kiln_node *z = kiln_input(g, "z", KILN_F32, KILN_SHAPE(4));
    kiln_node *dz = kiln_grad(g, kiln_sum(g, y, KILN_ALL_AXES, 0), z);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_int_equal(kiln_node_shape(dz).d[0], 4);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ introspection */

static void test_node_introspection_null(void **state)
{
    (void)state;
    assert_int_equal(kiln_node_id(NULL), -1);
    assert_string_equal(kiln_node_op_name(NULL), "");
    assert_int_equal(kiln_node_shape(NULL).ndim, 0);
    assert_string_equal(kiln_node_name(NULL), "");
    assert_int_equal(kiln_node_num_inputs(NULL), 0);
    assert_null(kiln_node_input(NULL, 0));
    assert_null(kiln_node_set_name(NULL, "n"));
    assert_null(kiln_node_set_trainable(NULL, 1));
    assert_int_equal(kiln_node_trainable(NULL), 0);
    assert_null(kiln_debug(NULL, "msg"));
    assert_null(kiln_node_value_f32(NULL, NULL));
    assert_null(kiln_node_grad_f32(NULL, NULL));

    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2));
    kiln_node *y = kiln_neg(g, x);
    assert_null(kiln_node_input(y, 1));
    assert_null(kiln_node_input(y, -1));
    assert_ptr_equal(kiln_node_input(y, 0), x);
    assert_ptr_equal(kiln_node_set_name(y, NULL), y);
    assert_int_equal(kiln_node_trainable(x), 0);
    /* the poisoned node answers introspection too */
    kiln_node *p = kiln_neg(g, NULL);
    assert_int_equal(kiln_node_id(p), -1);
    assert_string_equal(kiln_node_op_name(p), "error");
    assert_int_equal(kiln_node_num_inputs(p), 0);
    assert_ptr_equal(kiln_node_set_name(p, "p"), p);
    assert_string_equal(kiln_node_name(p), "");
    assert_ptr_equal(kiln_node_set_trainable(p, 0), p);
    assert_ptr_equal(kiln_debug(p, "p"), p);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ sessions */

static void test_session_null(void **state)
{
    (void)state;
    kiln_session_free(NULL);
    assert_string_equal(kiln_session_error(NULL), "session is NULL");
    assert_null(kiln_session_rng(NULL));
    assert_int_equal(kiln_session_num_variables(NULL), 0);
    kiln_param_info info;
    assert_int_equal(kiln_session_variable_info(NULL, 0, &info), KILN_ERR_ARG);
    kiln_session *s = kiln_session_new(NULL);
    assert_string_equal(kiln_session_error(s), "");
    assert_int_equal(kiln_session_variable_info(s, 0, &info), KILN_ERR_ARG);
    assert_int_equal(kiln_session_variable_info(s, -1, &info), KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_zeros(), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_variable_info(s, 0, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_session_variable_info(s, 1, &info), KILN_ERR_ARG);
    assert_int_equal(kiln_session_variable_info(s, 0, &info), KILN_OK);
    assert_string_equal(info.name, "w");
    kiln_session_free(s);
}

static void test_declare_errors(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(NULL, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, NULL, KILN_F32, KILN_SHAPE(2),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "a variable needs a name");
    assert_int_equal(kiln_session_declare(s, "", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F16, KILN_SHAPE(2),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "'w': bad dtype or shape");
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(-2),
                                          kiln_init_zeros(), 1),
                     KILN_ERR_ARG);
    /* a bad initialiser leaves no half-made variable behind */
    kiln_init bad = {(kiln_init_kind)23, 0, 0, NULL};
    assert_int_equal(
        kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2), bad, 1),
        KILN_ERR_ARG);
    assert_contains(kiln_session_error(s),
                    "variable 'w': kiln_init_fill: unknown initialiser 23");
    assert_int_equal(kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_values(NULL), 1),
                     KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "variable 'v'");
    assert_int_equal(kiln_session_num_variables(s), 0);
    /* declared once, a different shape or dtype is refused */
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(3),
                                          kiln_init_ones(), 1),
                     KILN_ERR_SHAPE);
    assert_contains(
        kiln_session_error(s),
        "variable 'w' is f32[2] in the session, the graph wants f32[3]");
    assert_int_equal(kiln_session_declare(s, "w", KILN_I32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_ERR_SHAPE);
    assert_int_equal(kiln_session_num_variables(s), 1);
    kiln_session_free(s);
}

static kiln_status variable_write(kiln_session *s, const char *name,
                                  kiln_tensor *t)
{
    return kiln_variable_write(s, name, t);
}

static void test_variable_read_write(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2, 3),
                                          kiln_init_value(7.0), 1),
                     KILN_OK);
    kiln_tensor *good = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *shape = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 2));
    kiln_tensor *dtype = kiln_tensor_new(KILN_I32, KILN_SHAPE(2, 3));

    kiln_status (*rw[2])(kiln_session *, const char *,
                         kiln_tensor *) = {kiln_variable_read, variable_write};
    const char *fn[2] = {"kiln_variable_read", "kiln_variable_write"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rw[i](NULL, "w", good), KILN_ERR_ARG);
        assert_int_equal(rw[i](s, NULL, good), KILN_ERR_ARG);
        assert_contains(kiln_session_error(s), fn[i]);
        assert_contains(kiln_session_error(s), "name or tensor is NULL");
        assert_int_equal(rw[i](s, "w", NULL), KILN_ERR_ARG);
        assert_contains(kiln_session_error(s), "name or tensor is NULL");
        assert_int_equal(rw[i](s, "nope", good), KILN_ERR_NOTFOUND);
        assert_contains(kiln_session_error(s), "no variable named 'nope'");
        assert_int_equal(rw[i](s, "w", shape), KILN_ERR_SHAPE);
        assert_contains(kiln_session_error(s),
                        "variable 'w' is f32[2,3], tensor is f32[3,2]");
        assert_int_equal(rw[i](s, "w", dtype), KILN_ERR_DTYPE);
        assert_contains(kiln_session_error(s),
                        "variable 'w' is f32[2,3], tensor is i32[2,3]");
        assert_contains(kiln_last_error(), "tensor is i32[2,3]");
    }
    /* nothing above changed the variable */
    assert_int_equal(kiln_variable_read(s, "w", good), KILN_OK);
    assert_all(good, 7.0f);
    kiln_tensor_free(good);
    kiln_tensor_free(shape);
    kiln_tensor_free(dtype);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ compile */

static void test_compile_errors(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *y = kiln_exp(g, x);

    assert_null(kiln_compile(NULL, g, &y, 1, &x, 1));
    assert_null(kiln_compile(s, NULL, &y, 1, &x, 1));
    assert_contains(kiln_session_error(s), "kiln_compile: graph is NULL");
    assert_null(kiln_compile(s, g, NULL, 1, &x, 1));
    assert_contains(kiln_session_error(s), "outputs or inputs array is NULL");
    assert_null(kiln_compile(s, g, &y, 1, NULL, 1));
    assert_null(kiln_compile(s, g, &y, -1, &x, 1));
    kiln_node *null_out = NULL;
    assert_null(kiln_compile(s, g, &null_out, 1, &x, 1));
    assert_contains(kiln_session_error(s),
                    "output 0 is NULL, poisoned or from another graph");

    /* missing input */
    assert_null(kiln_compile(s, g, &y, 1, NULL, 0));
    assert_string_equal(kiln_session_error(s),
                        "kiln_compile: input 'x' (%0) is needed but not in the "
                        "inputs list");
    /* an input that is not an input, listed twice, or foreign */
    kiln_node *twice[2] = {x, x};
    assert_null(kiln_compile(s, g, &y, 1, twice, 2));
    assert_contains(kiln_session_error(s), "input 'x' is listed twice");
    assert_null(kiln_compile(s, g, &y, 1, &y, 1));
    assert_contains(kiln_session_error(s),
                    "input 0 (%1) is a exp, not an input");
    kiln_graph *h = kiln_graph_new();
    kiln_node *hx = kiln_input(h, "hx", KILN_F32, KILN_SHAPE(2, 3));
    assert_null(kiln_compile(s, g, &y, 1, &hx, 1));
    assert_contains(kiln_session_error(s),
                    "input 0 is NULL or from another graph");
    assert_null(kiln_compile(s, g, &hx, 1, &x, 1));
    assert_contains(kiln_session_error(s),
                    "output 0 is NULL, poisoned or from another graph");

    /* a failed graph: its error is copied to the session */
    kiln_node *bad = kiln_matmul(g, x, x, 0, 0);
    assert_null(kiln_compile(s, g, &y, 1, &x, 1));
    assert_string_equal(kiln_session_error(s),
                        "kiln_compile: the graph failed: kiln_matmul: [2,3] x "
                        "[2,3]: inner dimensions differ (3 vs 2)");
    assert_null(kiln_compile(s, g, &bad, 1, &x, 1));
    assert_contains(kiln_session_error(s), "inner dimensions differ");

    /* nothing was created in the session by the failures */
    assert_int_equal(kiln_session_num_variables(s), 0);
    kiln_graph_free(h);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* One session, two graphs: the second declares W with another shape. */
static void test_variable_clash_across_graphs(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g1 = kiln_graph_new();
    kiln_node *w1 =
        kiln_variable(g1, "W", KILN_F32, KILN_SHAPE(2, 3), kiln_init_ones());
    kiln_node *o1 = kiln_sum(g1, w1, KILN_ALL_AXES, 0);
    kiln_function *f1 = kiln_compile(s, g1, &o1, 1, NULL, 0);
    assert_non_null(f1);

    kiln_graph *g2 = kiln_graph_new();
    kiln_node *w2 =
        kiln_variable(g2, "W", KILN_F32, KILN_SHAPE(3, 3), kiln_init_ones());
    kiln_node *o2 = kiln_sum(g2, w2, KILN_ALL_AXES, 0);
    assert_int_equal(kiln_graph_status(g2),
                     KILN_OK); /* graphs alone are fine */
    assert_null(kiln_compile(s, g2, &o2, 1, NULL, 0));
    assert_contains(
        kiln_session_error(s),
        "variable 'W' is f32[2,3] in the session, the graph wants f32[3,3]");

    /* the dynamic path reports the same clash */
    assert_int_equal(kiln_forward(s, g2), KILN_ERR_SHAPE);
    assert_contains(kiln_session_error(s), "variable 'W'");

    /* the first function still runs and W is unchanged */
    kiln_tensor *out = kiln_function_new_output(f1, 0);
    assert_int_equal(kiln_run(f1, NULL, &out), KILN_OK);
    assert_float_equal(kiln_tensor_f32(out)[0], 6.0f, 0);
    assert_int_equal(kiln_session_num_variables(s), 1);
    kiln_tensor_free(out);
    kiln_graph_free(g1);
    kiln_graph_free(g2);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ run */

typedef struct run_fixture {
    kiln_session *s;
    kiln_graph *g;
    kiln_function *f;
} run_fixture;

/* f(x, y) = (x * w, assign(w, w + y)) with w = ones [2,3]. */
static run_fixture make_assign_function(void)
{
    run_fixture r;
    r.s = kiln_session_new(NULL);
    r.g = kiln_graph_new();
    kiln_node *x = kiln_input(r.g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *y = kiln_input(r.g, "y", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *w =
        kiln_variable(r.g, "w", KILN_F32, KILN_SHAPE(2, 3), kiln_init_ones());
    kiln_node *outs[2] = {kiln_mul(r.g, x, w),
                          kiln_assign(r.g, w, kiln_add(r.g, w, y))};
    kiln_node *ins[2] = {x, y};
    r.f = kiln_compile(r.s, r.g, outs, 2, ins, 2);
    assert_non_null(r.f);
    return r;
}

static void assert_w(kiln_session *s, float v)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    assert_int_equal(kiln_variable_read(s, "w", t), KILN_OK);
    assert_all(t, v);
    kiln_tensor_free(t);
}

static void test_run_errors(void **state)
{
    (void)state;
    run_fixture r = make_assign_function();
    kiln_tensor *x = tensor_filled(KILN_SHAPE(2, 3), 2.0f);
    kiln_tensor *y = tensor_filled(KILN_SHAPE(2, 3), 10.0f);
    kiln_tensor *y_shape = tensor_filled(KILN_SHAPE(3, 2), 10.0f);
    kiln_tensor *y_dtype = kiln_tensor_new(KILN_I32, KILN_SHAPE(2, 3));
    kiln_tensor *o0 = tensor_filled(KILN_SHAPE(2, 3), -1.0f);
    kiln_tensor *o1 = tensor_filled(KILN_SHAPE(2, 3), -1.0f);
    kiln_tensor *o_shape = tensor_filled(KILN_SHAPE(6), -1.0f);

    assert_int_equal(kiln_run(NULL, NULL, NULL), KILN_ERR_ARG);

    kiln_tensor *outs[2] = {o0, o1};
    kiln_tensor *in_bad_shape[2] = {x, y_shape};
    assert_int_equal(kiln_run(r.f, in_bad_shape, outs), KILN_ERR_SHAPE);
    assert_string_equal(kiln_session_error(r.s),
                        "kiln_run: input 1 ('y') wants f32[2,3], got f32[3,2]");
    kiln_tensor *in_bad_dtype[2] = {x, y_dtype};
    assert_int_equal(kiln_run(r.f, in_bad_dtype, outs), KILN_ERR_DTYPE);
    assert_contains(kiln_session_error(r.s),
                    "input 1 ('y') wants f32[2,3], got i32[2,3]");
    kiln_tensor *in_null[2] = {x, NULL};
    assert_int_equal(kiln_run(r.f, in_null, outs), KILN_ERR_ARG);
    assert_contains(kiln_session_error(r.s),
                    "kiln_run: input 1 ('y') is not fed");
    assert_int_equal(kiln_run(r.f, NULL, outs), KILN_ERR_ARG);
    assert_contains(kiln_session_error(r.s), "inputs or outputs array is NULL");
    kiln_tensor *in_ok[2] = {x, y};
    assert_int_equal(kiln_run(r.f, in_ok, NULL), KILN_ERR_ARG);
    kiln_tensor *outs_bad[2] = {o0, o_shape};
    assert_int_equal(kiln_run(r.f, in_ok, outs_bad), KILN_ERR_SHAPE);
    assert_contains(kiln_session_error(r.s),
                    "kiln_run: output 1 ('') wants f32[2,3], got f32[6]");

    /* every failed run changed nothing: w and the outputs are as they were */
    assert_w(r.s, 1.0f);
    assert_all(o0, -1.0f);
    assert_all(o1, -1.0f);
    assert_all(o_shape, -1.0f);

    /* a good run applies the assignment once; NULL outputs are skipped */
    kiln_tensor *skip[2] = {o0, NULL};
    assert_int_equal(kiln_run(r.f, in_ok, skip), KILN_OK);
    assert_all(o0, 2.0f);
    assert_all(o1, -1.0f);
    assert_w(r.s, 11.0f);
    /* and the next failure still changes nothing */
    assert_int_equal(kiln_run(r.f, in_bad_shape, outs), KILN_ERR_SHAPE);
    assert_w(r.s, 11.0f);
    assert_all(o0, 2.0f);

    assert_null(kiln_function_new_output(r.f, 2));
    assert_contains(kiln_last_error(), "kiln_function_new_output: no output 2");
    assert_null(kiln_function_new_output(r.f, -1));
    assert_null(kiln_function_new_output(NULL, 0));
    assert_int_equal(kiln_function_print(NULL, stdout), KILN_ERR_ARG);
    assert_int_equal(kiln_function_print(r.f, NULL), KILN_ERR_ARG);

    kiln_tensor *all[] = {x, y, y_shape, y_dtype, o0, o1, o_shape};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        kiln_tensor_free(all[i]);
    kiln_function_free(r.f);
    kiln_graph_free(r.g);
    kiln_session_free(r.s);
}

/* ------------------------------------------------------------ dynamic */

static void test_dynamic_errors(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2, 3), kiln_init_ones());
    kiln_node *h = kiln_mul(g, x, w);
    kiln_node *loss = kiln_sum(g, h, KILN_ALL_AXES, 0);

    /* NULL arguments */
    assert_int_equal(kiln_forward(NULL, g), KILN_ERR_ARG);
    assert_int_equal(kiln_forward(s, NULL), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "kiln_forward: graph is NULL");
    assert_int_equal(kiln_backward(NULL, g, loss), KILN_ERR_ARG);
    assert_int_equal(kiln_backward(s, NULL, loss), KILN_ERR_ARG);
    assert_int_equal(kiln_backward(s, g, NULL), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "kiln_backward: node is NULL");
    assert_int_equal(kiln_backprop(NULL, g, loss), KILN_ERR_ARG);
    assert_int_equal(kiln_sgd_step(NULL, g, 0.1f), KILN_ERR_ARG);
    assert_int_equal(kiln_sgd_step(s, NULL, 0.1f), KILN_ERR_ARG);
    assert_null(kiln_node_value(NULL, h));
    assert_null(kiln_node_value(s, NULL));
    assert_contains(kiln_session_error(s), "kiln_node_value: node is NULL");
    assert_null(kiln_node_grad(s, NULL));

    /* before anything ran */
    assert_null(kiln_node_value(s, h));
    assert_contains(
        kiln_session_error(s),
        "kiln_node_value: %2 (mul) has no value: run kiln_forward first");
    assert_null(kiln_node_grad(s, w));
    assert_contains(kiln_session_error(s),
                    "kiln_node_grad: %1 (variable) has no gradient: run "
                    "kiln_backward first");
    assert_int_equal(kiln_backward(s, g, loss), KILN_ERR_STATE);
    assert_contains(
        kiln_session_error(s),
        "kiln_backward: loss %3 has no value: run kiln_forward first");
    assert_int_equal(kiln_sgd_step(s, g, 0.1f), KILN_ERR_STATE);
    assert_contains(kiln_session_error(s), "kiln_sgd_step: no gradients");
    assert_null(kiln_node_value_f32(s, h));
    assert_null(kiln_node_grad_f32(s, w));

    /* unfed input */
    assert_int_equal(kiln_forward(s, g), KILN_ERR_STATE);
    assert_string_equal(kiln_session_error(s),
                        "kiln_forward: input 'x' (%0) was not fed");
    assert_int_equal(kiln_backprop(s, g, loss), KILN_ERR_STATE);
    assert_null(kiln_node_value(s, loss));

    /* feed errors */
    kiln_tensor *good = tensor_filled(KILN_SHAPE(2, 3), 3.0f);
    kiln_tensor *shape = tensor_filled(KILN_SHAPE(3, 2), 3.0f);
    kiln_tensor *dtype = kiln_tensor_new(KILN_I32, KILN_SHAPE(2, 3));
    assert_int_equal(kiln_feed(NULL, x, good), KILN_ERR_ARG);
    assert_int_equal(kiln_feed(s, NULL, good), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "kiln_feed: node is NULL");
    assert_int_equal(kiln_feed(s, x, NULL), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s), "kiln_feed: tensor is NULL");
    assert_int_equal(kiln_feed(s, w, good), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s),
                    "kiln_feed: %1 is a variable, not an input");
    assert_int_equal(kiln_feed(s, x, shape), KILN_ERR_SHAPE);
    assert_contains(kiln_session_error(s),
                    "kiln_feed: input 'x' wants f32[2,3], got f32[3,2]");
    assert_int_equal(kiln_feed(s, x, dtype), KILN_ERR_DTYPE);
    assert_contains(kiln_session_error(s), "got i32[2,3]");

    /* backward on a non-scalar node, on a node of another graph */
    assert_int_equal(kiln_feed(s, x, good), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_int_equal(kiln_backward(s, g, h), KILN_ERR_SHAPE);
    assert_contains(kiln_session_error(s),
                    "kiln_backward: loss %2 must be an f32 scalar");
    assert_null(kiln_node_grad(s, w));
    kiln_graph *other = kiln_graph_new();
    kiln_node *ol = kiln_scalar(other, 1.0f);
    assert_int_equal(kiln_backward(s, g, ol), KILN_ERR_ARG);
    assert_contains(kiln_session_error(s),
                    "kiln_backward: loss belongs to another graph");

    /* a poisoned node */
    kiln_node *p = kiln_exp(other, NULL);
    assert_int_equal(kiln_backward(s, other, p), KILN_ERR_ARG);
    assert_contains(
        kiln_session_error(s),
        "kiln_backward: node is poisoned: kiln_exp: operand is NULL");
    assert_null(kiln_node_value(s, p));
    assert_contains(kiln_session_error(s), "kiln_node_value: node is poisoned");
    assert_int_equal(kiln_forward(s, other), KILN_ERR_ARG);
    assert_contains(
        kiln_session_error(s),
        "kiln_forward: the graph failed: kiln_exp: operand is NULL");

    /* the working path, then gradients of nodes the loss does not reach */
    assert_int_equal(kiln_backward(s, g, loss), KILN_OK);
    kiln_tensor *dw = kiln_node_grad(s, w);
    assert_non_null(dw);
    assert_all(dw, 3.0f);
    kiln_tensor_free(dw);
    kiln_node *late = kiln_exp(g, h);
    assert_null(kiln_node_grad(s, late));
    assert_contains(kiln_session_error(s),
                    "has no gradient: run kiln_backward first");
    assert_null(kiln_node_value(s, late)); /* built after the last forward */
    assert_contains(kiln_session_error(s), "has no value");
    assert_int_equal(kiln_sgd_step(s, g, 0.5f), KILN_OK);

    kiln_tensor_free(good);
    kiln_tensor_free(shape);
    kiln_tensor_free(dtype);
    kiln_graph_free(other);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Clearing a graph after backward keeps the session's variables. */
static void test_clear_after_backward(void **state)
{
    (void)state;
    static const float w0[3] = {1, 2, 3};
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3), kiln_init_values(w0));
    kiln_node *loss = kiln_sum(g, kiln_mul(g, w, w), KILN_ALL_AXES, 0);
    assert_int_equal(kiln_backprop(s, g, loss), KILN_OK);
    assert_int_equal(kiln_sgd_step(s, g, 0.25f), KILN_OK); /* w -= 0.25 * 2w */

    /* a failed builder, then clear: error and nodes gone, variables kept */
    assert_true(is_poison(kiln_add(g, w, NULL)));
    assert_int_equal(kiln_graph_status(g), KILN_ERR_ARG);
    kiln_graph_clear(g);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_string_equal(kiln_graph_error(g), "");
    assert_int_equal(kiln_graph_node_count(g), 0);
    assert_int_equal(kiln_session_num_variables(s), 1);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    assert_int_equal(kiln_variable_read(s, "w", t), KILN_OK);
    for (int i = 0; i < 3; i++)
        assert_float_equal(kiln_tensor_f32(t)[i], 0.5f * w0[i], 1e-6);

    /* a rebuilt variable binds to the kept storage, not its initialiser */
    w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3), kiln_init_zeros());
    loss = kiln_sum(g, w, KILN_ALL_AXES, 0);
    assert_null(kiln_node_grad(s, w)); /* no backward on the new graph yet */
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_float_equal(kiln_node_value_f32(s, loss)[0], 3.0f, 1e-6);
    assert_int_equal(kiln_sgd_step(s, g, 0.1f), KILN_ERR_STATE);
    kiln_tensor_free(t);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ gradcheck */

static void test_gradcheck_errors(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3),
                                 kiln_init_uniform(-1, 1));
    kiln_node *h = kiln_mul(g, kiln_tanh(g, w), x);
    kiln_node *loss = kiln_sum(g, h, KILN_ALL_AXES, 0);
    kiln_tensor *xt = tensor_filled(KILN_SHAPE(3), 0.5f);
    kiln_node *wrt[1] = {w};
    kiln_node *feed_nodes[1] = {x};
    kiln_tensor *feeds[1] = {xt};
    kiln_gradcheck_result res;

    assert_int_equal(kiln_gradcheck(NULL, g, loss, wrt, 1, feed_nodes, feeds, 1,
                                    1e-3, 1e-2, &res),
                     KILN_ERR_ARG);
    struct {
        kiln_graph *g;
        kiln_node *loss;
        kiln_node *const *wrt;
        int n_wrt;
        kiln_node *const *fn;
        kiln_tensor *const *ft;
        int n_feed;
        double eps, tol;
    } bad[] = {
        {NULL, loss, wrt, 1, feed_nodes, feeds, 1, 1e-3, 1e-2},
        {g, NULL, wrt, 1, feed_nodes, feeds, 1, 1e-3, 1e-2},
        {g, loss, NULL, 1, feed_nodes, feeds, 1, 1e-3, 1e-2},
        {g, loss, wrt, 0, feed_nodes, feeds, 1, 1e-3, 1e-2},
        {g, loss, wrt, 1, NULL, feeds, 1, 1e-3, 1e-2},
        {g, loss, wrt, 1, feed_nodes, NULL, 1, 1e-3, 1e-2},
        {g, loss, wrt, 1, feed_nodes, feeds, 1, 0, 1e-2},
        {g, loss, wrt, 1, feed_nodes, feeds, 1, 1e-3, -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(kiln_gradcheck(s, bad[i].g, bad[i].loss, bad[i].wrt,
                                        bad[i].n_wrt, bad[i].fn, bad[i].ft,
                                        bad[i].n_feed, bad[i].eps, bad[i].tol,
                                        &res),
                         KILN_ERR_ARG);
        assert_string_equal(kiln_session_error(s),
                            "kiln_gradcheck: bad arguments");
    }
    kiln_node *not_leaf[1] = {h};
    assert_int_equal(kiln_gradcheck(s, g, loss, not_leaf, 1, feed_nodes, feeds,
                                    1, 1e-3, 1e-2, &res),
                     KILN_ERR_ARG);
    assert_contains(kiln_session_error(s),
                    "wrt[0] must be a variable or an input");
    kiln_node *null_wrt[1] = {NULL};
    assert_int_equal(kiln_gradcheck(s, g, loss, null_wrt, 1, feed_nodes, feeds,
                                    1, 1e-3, 1e-2, &res),
                     KILN_ERR_ARG);
    /* x is needed but not fed */
    assert_int_equal(
        kiln_gradcheck(s, g, loss, wrt, 1, NULL, NULL, 0, 1e-3, 1e-2, &res),
        KILN_ERR_ARG);
    assert_contains(kiln_session_error(s),
                    "input 'x' (%0) is needed but not in the inputs list");
    /* a feed of the wrong shape */
    kiln_tensor *wrong = tensor_filled(KILN_SHAPE(4), 0.5f);
    kiln_tensor *wrong_feeds[1] = {wrong};
    assert_int_not_equal(kiln_gradcheck(s, g, loss, wrt, 1, feed_nodes,
                                        wrong_feeds, 1, 1e-3, 1e-2, &res),
                         KILN_OK);
    assert_contains(kiln_session_error(s),
                    "kiln_run: input 0 ('x') wants f32[3], got f32[4]");
    /* the graph is still usable: the good call passes */
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_int_equal(kiln_gradcheck(s, g, loss, wrt, 1, feed_nodes, feeds, 1,
                                    1e-3, 1e-2, &res),
                     KILN_OK);
    /* a non-scalar loss fails in the session, leaving the graph usable */
    assert_int_equal(
        kiln_gradcheck(s, g, h, wrt, 1, feed_nodes, feeds, 1, 1e-3, 1e-2, &res),
        KILN_ERR_SHAPE);
    assert_contains(kiln_session_error(s),
                    "kiln_gradcheck: loss %3 must be an f32 scalar");
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    kiln_tensor_free(wrong);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ misc */

static void test_free_null(void **state)
{
    (void)state;
    kiln_tensor_free(NULL);
    kiln_graph_free(NULL);
    kiln_session_free(NULL);
    kiln_function_free(NULL);
    kiln_tensor_print(NULL, "msg", 4, stdout);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    kiln_tensor_print(t, NULL, -1, NULL); /* NULL stream: nothing printed */
    kiln_tensor_free(t);
    kiln_set_debug_stream(NULL);
    /* a function freed before its session is not freed twice */
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SCALAR);
    kiln_node *y = kiln_neg(g, x);
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_rng_null),
        cmocka_unit_test(test_tensor_errors),
        cmocka_unit_test(test_init_fill_errors),
        cmocka_unit_test(test_null_graph),
        cmocka_unit_test(test_null_operand),
        cmocka_unit_test(test_foreign_operand),
        cmocka_unit_test(test_poisoned_operand),
        cmocka_unit_test(test_poison_of_other_graph),
        cmocka_unit_test(test_sticky_and_clear),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_dtype_errors),
        cmocka_unit_test(test_grad_errors),
        cmocka_unit_test(test_node_introspection_null),
        cmocka_unit_test(test_session_null),
        cmocka_unit_test(test_declare_errors),
        cmocka_unit_test(test_variable_read_write),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_variable_clash_across_graphs),
        cmocka_unit_test(test_run_errors),
        cmocka_unit_test(test_dynamic_errors),
        cmocka_unit_test(test_clear_after_backward),
        cmocka_unit_test(test_gradcheck_errors),
        cmocka_unit_test(test_free_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
