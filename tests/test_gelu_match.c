/* The simplify pass's gelu rewrite (passes/gelu_match.c): the tanh gelu
   written out in primitives becomes one gelu_tanh op, whichever order and
   grouping its products and sums take (kiln_gelu's, PyTorch's ONNX
   export's), with the values of the unsimplified graph; near misses (a
   different constant, a different operand, a broadcast) stay as they
   are. */
#define _POSIX_C_SOURCE 200809L
#include "test_schedule.h"

typedef kiln_node *(*gelu_form)(kiln_graph *g, kiln_node *x);

/* PyTorch 1.13's export: 0.5 (x (1 + tanh(c (x + k (x x) x)))), each
   constant on the left. */
static kiln_node *onnx_form(kiln_graph *g, kiln_node *x)
{
    kiln_node *cube = kiln_mul(g, kiln_mul(g, x, x), x);
    kiln_node *in =
        kiln_add(g, x, kiln_mul(g, kiln_scalar(g, 0.044715f), cube));
    kiln_node *t = kiln_tanh(g, kiln_mul(g, kiln_scalar(g, 0.7978845608f), in));
    kiln_node *one = kiln_add(g, kiln_scalar(g, 1.0f), t);
    return kiln_mul(g, kiln_scalar(g, 0.5f), kiln_mul(g, x, one));
}

/* (x 0.5) times (tanh(...) + 1), k split over two factors of x^3. */
static kiln_node *regrouped_form(kiln_graph *g, kiln_node *x)
{
    kiln_node *kx = kiln_scale(g, x, 0.5f * 0.044715f);
    kiln_node *cube = kiln_mul(g, kiln_scale(g, kx, 2.0f), kiln_mul(g, x, x));
    kiln_node *u = kiln_scale(g, kiln_add(g, cube, x), 0.7978845608f);
    return kiln_mul(g, kiln_scale(g, x, 0.5f),
                    kiln_add(g, kiln_tanh(g, u), kiln_scalar(g, 1.0f)));
}

/* k = 0.044 instead of 0.044715: not the gelu. */
static kiln_node *wrong_constant(kiln_graph *g, kiln_node *x)
{
    kiln_node *cube = kiln_mul(g, kiln_mul(g, x, x), x);
    kiln_node *u =
        kiln_scale(g, kiln_add(g, x, kiln_scale(g, cube, 0.044f)), 0.79788f);
    return kiln_mul(g, kiln_scale(g, x, 0.5f),
                    kiln_add(g, kiln_scalar(g, 1.0f), kiln_tanh(g, u)));
}

/* The outer factor is not the x inside: 0.5 exp(x) (1 + tanh(u(x))). */
static kiln_node *other_operand(kiln_graph *g, kiln_node *x)
{
    kiln_node *cube = kiln_mul(g, kiln_mul(g, x, x), x);
    kiln_node *u = kiln_scale(g, kiln_add(g, x, kiln_scale(g, cube, 0.044715f)),
                              0.7978845608f);
    return kiln_mul(g, kiln_scale(g, kiln_exp(g, x), 0.5f),
                    kiln_add(g, kiln_scalar(g, 1.0f), kiln_tanh(g, u)));
}

/* Compiles form(x) (simplify on or off) and runs it on feed; returns
   whether the schedule holds a gelu_tanh kernel. */
static int run_form(gelu_form form, kiln_tensor *feed, int simplify,
                    kiln_tensor **out)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, kiln_tensor_shape(feed));
    kiln_node *y = form(g, x);
    th_assert_graph_ok(g);
    kiln_session *s = kiln_session_new(NULL);
    kiln_compile_options o = kiln_compile_defaults();
    o.simplify = simplify;
    kiln_function *f = kiln_compile_ex(s, g, &y, 1, &x, 1, &o);
    if (!f)
        fail_msg("kiln_compile_ex: %s", kiln_session_error(s));
    assert_non_null(*out = kiln_function_new_output(f, 0));
    assert_int_equal(kiln_run(f, &feed, out), KILN_OK);
    int found = th_schedule_has(f, "gelu_tanh");
    kiln_session_free(s);
    kiln_graph_free(g);
    return found;
}

static void check_form(gelu_form form, int matches, const char *what)
{
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    const kiln_shape shapes[] = {KILN_SHAPE(1), KILN_SHAPE(3, 37),
                                 KILN_SHAPE(2, 5, 600)};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_tensor *feed = th_rand(&r, shapes[i], -6, 6);
        kiln_tensor *got, *want;
        assert_int_equal(run_form(form, feed, 1, &got), matches);
        assert_int_equal(run_form(form, feed, 0, &want), 0);
        th_assert_close_f(what, kiln_tensor_f32(got), kiln_tensor_f32(want),
                          kiln_tensor_numel(want), 1e-5, 1e-6);
        kiln_tensor_free(got);
        kiln_tensor_free(want);
        kiln_tensor_free(feed);
    }
}

static void test_forms_match(void **state)
{
    (void)state;
    check_form(kiln_gelu, 1, "kiln_gelu");
    check_form(onnx_form, 1, "ONNX export's form");
    check_form(regrouped_form, 1, "regrouped form");
}

static void test_near_misses_stay(void **state)
{
    (void)state;
    check_form(wrong_constant, 0, "another constant");
    check_form(other_operand, 0, "another operand");
}

/* 0.5 as a [1, 1] constant: the product is [1, n], not x's [n], so it is
   not gelu_tanh(x) (which would have x's shape). */
static kiln_node *broadcast_half(kiln_graph *g, kiln_node *x)
{
    static const float half = 0.5f;
    kiln_node *cube = kiln_mul(g, kiln_mul(g, x, x), x);
    kiln_node *u = kiln_scale(g, kiln_add(g, x, kiln_scale(g, cube, 0.044715f)),
                              0.7978845608f);
    kiln_node *t = kiln_add(g, kiln_scalar(g, 1.0f), kiln_tanh(g, u));
    return kiln_mul(g, kiln_constant(g, KILN_F32, KILN_SHAPE(1, 1), &half),
                    kiln_mul(g, x, t));
}

static void test_broadcast_stays(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 6);
    kiln_tensor *feed = th_rand(&r, KILN_SHAPE(37), -6, 6);
    kiln_tensor *got, *want;
    assert_int_equal(run_form(broadcast_half, feed, 1, &got), 0);
    run_form(kiln_gelu, feed, 0, &want);
    th_assert_shape(kiln_tensor_shape(got), KILN_SHAPE(1, 37));
    th_assert_close_f("broadcast half", kiln_tensor_f32(got),
                      kiln_tensor_f32(want), 37, 1e-5, 1e-6);
    kiln_tensor_free(got);
    kiln_tensor_free(want);
    kiln_tensor_free(feed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_match),
        cmocka_unit_test(test_near_misses_stay),
        cmocka_unit_test(test_broadcast_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
