/* i32 arithmetic (int_add, int_sub, int_mul, int_floor_div, int_mod)
   against PyTorch (tests/ref/index, written by tests/ref/make_index_refs.py)
   compiled with the fast and the reference kernels and run dynamically; the
   fast kernels against the reference on random broadcast shapes; a zero
   divisor as a run-time error; INT_MIN / -1; build errors; a symbolic
   batch. */
#include <limits.h>

#include "index_ref.h"

typedef kiln_node *(*int_builder)(kiln_graph *, kiln_node *, kiln_node *);

static const struct {
    const char *op;
    int_builder build;
} OPS[] = {
    {"int_add", kiln_int_add}, {"int_sub", kiln_int_sub},
    {"int_mul", kiln_int_mul}, {"int_floor_div", kiln_int_floor_div},
    {"int_mod", kiln_int_mod},
};
#define N_OPS (int)(sizeof OPS / sizeof *OPS)

/* y of case c, compiled (reference > 0: reference kernels) or dynamic. */
static void check_case(int c, int reference, int dynamic)
{
    iref r;
    iref_load(OPS[c].op, &r);
    kiln_session_options o = {.reference_kernels = reference, .threads = 2};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    iref_tensor *a = iref_get(&r, "a"), *b = iref_get(&r, "b"),
                *want = iref_get(&r, "y");
    kiln_node *an = iref_node(g, a),
              *bn = kiln_input(g, "b", KILN_I32, b->shape);
    kiln_node *y = OPS[c].build(g, an, bn);
    kiln_tensor *bt = kiln_tensor_wrap(KILN_I32, b->shape, b->i);
    const int32_t *got;
    kiln_tensor *out = NULL;
    if (dynamic) {
        assert_int_equal(kiln_feed(s, bn, bt), KILN_OK);
        assert_int_equal(kiln_forward(s, g), KILN_OK);
        out = kiln_node_value(s, y);
    } else {
        th_run(s, g, &y, 1, &bn, &bt, 1, &out);
    }
    assert_non_null(out);
    th_assert_shape(kiln_tensor_shape(out), want->shape);
    got = kiln_tensor_data(out);
    for (int64_t i = 0; i < kiln_shape_numel(want->shape); i++)
        if (got[i] != want->i[i])
            fail_msg("%s %s: y[%lld] = %d, PyTorch %d", OPS[c].op,
                     dynamic         ? "dynamic"
                     : reference > 0 ? "ref"
                                     : "fast",
                     (long long)i, got[i], want->i[i]);
    kiln_tensor_free(out);
    kiln_tensor_free(bt);
    kiln_graph_free(g);
    kiln_session_free(s);
    iref_free(&r);
}

static void test_pytorch(void **state)
{
    (void)state;
    for (int c = 0; c < N_OPS; c++) {
        check_case(c, -1, 0);
        check_case(c, 1, 0);
        check_case(c, 0, 1);
    }
}

/* Random i32 values in [lo, hi] with no zero (they serve as divisors). */
static kiln_tensor *rand_ints(kiln_rng *r, kiln_shape s, int32_t lo, int32_t hi)
{
    kiln_tensor *t = kiln_tensor_new(KILN_I32, s);
    int32_t *v = kiln_tensor_data(t);
    for (int64_t i = 0; i < kiln_shape_numel(s); i++) {
        double span = (double)hi - (double)lo + 1;
        v[i] = (int32_t)(lo + (int64_t)(kiln_rng_uniform(r) * span));
        if (v[i] == 0)
            v[i] = 1;
    }
    return t;
}

/* The fast kernels (3 threads) give the reference's values on broadcast
   shapes: odd sizes, size-1 and empty dims, a threaded size. */
static void test_fast_matches_reference(void **state)
{
    (void)state;
    const kiln_shape as[] = {KILN_SHAPE(301, 257), KILN_SHAPE(7, 1, 9),
                             KILN_SHAPE(1, 5), KILN_SHAPE(0, 3), KILN_SCALAR};
    const kiln_shape bs[] = {KILN_SHAPE(257), KILN_SHAPE(1, 4, 1),
                             KILN_SHAPE(3, 1), KILN_SHAPE(1, 3),
                             KILN_SHAPE(2, 2)};
    kiln_rng rng;
    kiln_rng_seed(&rng, 5);
    for (size_t c = 0; c < sizeof as / sizeof *as; c++) {
        kiln_tensor *at = rand_ints(&rng, as[c], INT_MIN, INT_MAX);
        kiln_tensor *bt = rand_ints(&rng, bs[c], -70000, 70000);
        for (int op = 0; op < N_OPS; op++) {
            kiln_tensor *got[2];
            for (int k = 0; k < 2; k++) {
                kiln_session_options o = {.reference_kernels = k ? -1 : 1,
                                          .threads = k ? 3 : 1};
                kiln_session *s = kiln_session_new(&o);
                kiln_graph *g = kiln_graph_new();
                kiln_node *a =
                    kiln_constant(g, KILN_I32, as[c], kiln_tensor_data(at));
                kiln_node *b = kiln_input(g, "b", KILN_I32, bs[c]);
                kiln_node *y = OPS[op].build(g, a, b);
                got[k] = NULL;
                th_run(s, g, &y, 1, &b, &bt, 1, &got[k]);
                kiln_graph_free(g);
                kiln_session_free(s);
            }
            assert_memory_equal(kiln_tensor_data(got[0]),
                                kiln_tensor_data(got[1]),
                                (size_t)kiln_tensor_numel(got[0]) * 4);
            kiln_tensor_free(got[0]);
            kiln_tensor_free(got[1]);
        }
        kiln_tensor_free(at);
        kiln_tensor_free(bt);
    }
}

/* INT_MIN / -1 wraps (PyTorch dies of SIGFPE there); so do sums. */
static void test_wrap_around(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    const int32_t av[3] = {INT_MIN, INT_MIN, INT_MAX}, bv[3] = {-1, 1, -1};
    kiln_node *a = kiln_constant(g, KILN_I32, KILN_SHAPE(3), av);
    kiln_node *b = kiln_input(g, "b", KILN_I32, KILN_SHAPE(3));
    kiln_node *outs[3] = {kiln_int_floor_div(g, a, b), kiln_int_mod(g, a, b),
                          kiln_int_sub(g, a, b)};
    kiln_tensor *bt = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(3), (void *)bv);
    kiln_tensor *o[3] = {0};
    th_run(s, g, outs, 3, &b, &bt, 1, o);
    const int32_t want[3][3] = {{INT_MIN, INT_MIN, -INT_MAX},
                                {0, 0, 0},
                                {INT_MIN + 1, INT_MAX, INT_MIN}};
    for (int k = 0; k < 3; k++) {
        assert_memory_equal(kiln_tensor_data(o[k]), want[k], sizeof want[k]);
        kiln_tensor_free(o[k]);
    }
    kiln_tensor_free(bt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* A zero divisor fails the run, compiled and dynamic, naming the op and
   the divisor's position. */
static void test_zero_divisor_is_a_run_error(void **state)
{
    (void)state;
    const int32_t bv[4] = {1, 2, 0, 3};
    for (int op = 3; op < N_OPS; op++)
        for (int dynamic = 0; dynamic <= 1; dynamic++) {
            kiln_session *s = kiln_session_new(NULL);
            kiln_graph *g = kiln_graph_new();
            kiln_node *a =
                kiln_constant(g, KILN_I32, KILN_SHAPE(1), (int32_t[]){5});
            kiln_node *b = kiln_input(g, "b", KILN_I32, KILN_SHAPE(2, 2));
            kiln_node *y = OPS[op].build(g, a, b);
            kiln_tensor *bt =
                kiln_tensor_wrap(KILN_I32, KILN_SHAPE(2, 2), (void *)bv);
            kiln_status st;
            if (dynamic) {
                assert_int_equal(kiln_feed(s, b, bt), KILN_OK);
                st = kiln_forward(s, g);
            } else {
                kiln_function *f = kiln_compile(s, g, &y, 1, &b, 1);
                assert_non_null(f);
                kiln_tensor *o = kiln_function_new_output(f, 0);
                st = kiln_run(f, &bt, &o);
                kiln_tensor_free(o);
            }
            assert_int_equal(st, KILN_ERR_ARG);
            char want[96];
            snprintf(want, sizeof want,
                     "%s %%2: division by zero at [1,0] of the divisor [2,2]",
                     OPS[op].op);
            if (!strstr(kiln_session_error(s), want))
                fail_msg("error '%s' lacks '%s'", kiln_session_error(s), want);
            kiln_tensor_free(bt);
            kiln_graph_free(g);
            kiln_session_free(s);
        }
}

static void test_build_errors(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *i = kiln_input(g, "i", KILN_I32, KILN_SHAPE(2, 3));
    kiln_int_add(g, i, kiln_input(g, "f", KILN_F32, KILN_SHAPE(3)));
    th_expect_graph_error(
        g, "kiln_int_add: operands have dtypes i32 and f32, expected i32");
    kiln_graph_free(g);
    g = kiln_graph_new();
    i = kiln_input(g, "i", KILN_I32, KILN_SHAPE(2, 3));
    kiln_int_mod(g, i, kiln_input(g, "j", KILN_I32, KILN_SHAPE(2)));
    th_expect_graph_error(g, "kiln_int_mod: [2,3] and [2] do not broadcast");
    kiln_graph_free(g);
    assert_null(kiln_int_mul(NULL, NULL, NULL));
}

/* Flat positions from [B, T] coordinates, B symbolic: row * T + col and
   back by floor division and remainder, one function for B = 2 and 5. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *rows = kiln_input_sym(g, "rows", KILN_I32, KILN_SHAPE(2, 1), 1u);
    kiln_node *t = kiln_constant(g, KILN_I32, KILN_SHAPE(1), (int32_t[]){4});
    kiln_node *cols =
        kiln_constant(g, KILN_I32, KILN_SHAPE(4), (int32_t[]){0, 1, 2, 3});
    kiln_node *flat = kiln_int_add(g, kiln_int_mul(g, rows, t), cols);
    assert_int_equal(kiln_node_shape(flat).sym, 1u);
    kiln_node *outs[2] = {kiln_int_floor_div(g, flat, t),
                          kiln_int_mod(g, flat, t)};
    kiln_function *f = kiln_compile(s, g, outs, 2, &rows, 1);
    assert_non_null(f);
    for (int64_t b = 2; b <= 5; b += 3) {
        int32_t rv[5] = {0, 1, 2, 3, 4};
        kiln_tensor *in = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(b, 1), rv);
        kiln_tensor *o[2] = {kiln_tensor_new(KILN_I32, KILN_SHAPE(b, 4)),
                             kiln_tensor_new(KILN_I32, KILN_SHAPE(b, 4))};
        if (kiln_run(f, &in, o) != KILN_OK)
            fail_msg("B = %lld: %s", (long long)b, kiln_session_error(s));
        const int32_t *q = kiln_tensor_data(o[0]), *m = kiln_tensor_data(o[1]);
        for (int64_t i = 0; i < b * 4; i++) {
            assert_int_equal(q[i], i / 4);
            assert_int_equal(m[i], i % 4);
        }
        kiln_tensor_free(in);
        kiln_tensor_free(o[0]);
        kiln_tensor_free(o[1]);
    }
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_zero_divisor_is_a_run_error),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
