#define _DEFAULT_SOURCE
/* Sessions and compiled functions: shared variables, assign semantics,
   doall, variables by name, host tensors, dynamic values. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

static float read1(kiln_session *s, const char *name, kiln_shape shape, int i)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, shape);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    float v = kiln_tensor_f32(t)[i];
    kiln_tensor_free(t);
    return v;
}

/* ngraph-python's update_fun and eval_fun: two functions on one session
   see the same variable; assign applies after the run and every read in the
   run sees the old value. */
static void test_functions_share_variables(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2), kiln_init_value(1.0));
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2));
    kiln_node *seen = kiln_mul(g, w, x); /* uses the old w */
    kiln_node *upd = kiln_assign(g, w, kiln_add(g, w, x));
    kiln_node *outs[2] = {seen, upd};
    kiln_function *update = kiln_compile(s, g, outs, 2, &x, 1);
    kiln_graph *g2 = kiln_graph_new();
    kiln_node *w2 =
        kiln_variable(g2, "w", KILN_F32, KILN_SHAPE(2), kiln_init_value(99.0));
    kiln_node *twice = kiln_scale(g2, w2, 2.0f);
    kiln_function *eval = kiln_compile(s, g2, &twice, 1, NULL, 0);
    assert_non_null(update);
    assert_non_null(eval);

    float xv[2] = {3, 4};
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), xv);
    kiln_tensor *o0 = kiln_function_new_output(update, 0),
                *o1 = kiln_function_new_output(update, 1);
    kiln_tensor *e = kiln_function_new_output(eval, 0);
    kiln_tensor *o[2] = {o0, o1};
    assert_int_equal(kiln_run(update, &xt, o), KILN_OK);
    assert_float_equal(kiln_tensor_f32(o0)[1], 4.0f, 0); /* 1 * 4 */
    assert_float_equal(kiln_tensor_f32(o1)[1], 5.0f, 0); /* the new value */
    assert_int_equal(kiln_run(eval, NULL, &e), KILN_OK);
    assert_float_equal(kiln_tensor_f32(e)[0], 8.0f,
                       0); /* 2 * (1 + 3): shared */
    assert_int_equal(kiln_run(update, &xt, o), KILN_OK);
    assert_float_equal(kiln_tensor_f32(o0)[0], 12.0f, 0); /* 4 * 3 */
    assert_float_equal(read1(s, "w", KILN_SHAPE(2), 0), 7.0f, 0);

    /* writing by name is seen by the next run */
    float nv[2] = {10, 20};
    kiln_tensor *nt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), nv);
    assert_int_equal(kiln_variable_write(s, "w", nt), KILN_OK);
    assert_int_equal(kiln_run(eval, NULL, &e), KILN_OK);
    assert_float_equal(kiln_tensor_f32(e)[1], 40.0f, 0);
    assert_int_equal(kiln_session_num_variables(s), 1);
    kiln_param_info info;
    assert_int_equal(kiln_session_variable_info(s, 0, &info), KILN_OK);
    assert_string_equal(info.name, "w");
    assert_int_equal(info.trainable, 1);

    kiln_tensor *all[] = {xt, o0, o1, e, nt};
    for (size_t i = 0; i < 5; i++)
        kiln_tensor_free(all[i]);
    kiln_graph_free(g);
    kiln_graph_free(g2);
    kiln_session_free(s); /* frees both functions */
}

/* doall runs every grouped assignment; two assignments swap values because
   both read before either writes. */
static void test_doall_swap(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *a =
        kiln_variable(g, "a", KILN_F32, KILN_SCALAR, kiln_init_value(1.0));
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SCALAR, kiln_init_value(2.0));
    kiln_node *both[2] = {kiln_assign(g, a, b), kiln_assign(g, b, a)};
    kiln_node *all = kiln_doall(g, both, 2);
    kiln_function *f = kiln_compile(s, g, &all, 1, NULL, 0);
    assert_non_null(f);
    kiln_tensor *out[1] = {NULL};
    assert_int_equal(kiln_run(f, NULL, out), KILN_OK);
    assert_float_equal(read1(s, "a", KILN_SCALAR, 0), 2.0f, 0);
    assert_float_equal(read1(s, "b", KILN_SCALAR, 0), 1.0f, 0);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Initialisers come from the session's seeded RNG: the same seed gives the
   same values, ranges and moments are right. */
static void test_initialisers(void **state)
{
    (void)state;
    enum { N = 4000 };
    kiln_session_options o = {.seed = 123, .threads = 1};
    kiln_session *s1 = kiln_session_new(&o), *s2 = kiln_session_new(&o);
    kiln_shape sh = KILN_SHAPE(40, 100);
    assert_int_equal(kiln_session_declare(s1, "u", KILN_F32, sh,
                                          kiln_init_uniform(-2, 3), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(s2, "u", KILN_F32, sh,
                                          kiln_init_uniform(-2, 3), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(s1, "n", KILN_F32, sh,
                                          kiln_init_normal(1, 0.5), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(s1, "g", KILN_F32, sh,
                                          kiln_init_glorot_uniform(), 1),
                     KILN_OK);
    kiln_param_info u1, u2, n, gl;
    kiln_session_variable_info(s1, 0, &u1);
    kiln_session_variable_info(s2, 0, &u2);
    kiln_session_variable_info(s1, 1, &n);
    kiln_session_variable_info(s1, 2, &gl);
    assert_memory_equal(u1.data, u2.data, N * sizeof(float));
    double mean = 0, var = 0, lim = sqrt(6.0 / 140), gmax = 0;
    const float *uv = u1.data, *nv = n.data, *gv = gl.data;
    for (int i = 0; i < N; i++) {
        assert_true(uv[i] >= -2 && uv[i] < 3);
        mean += nv[i];
        gmax = fabs(gv[i]) > gmax ? fabs(gv[i]) : gmax;
    }
    mean /= N;
    for (int i = 0; i < N; i++)
        var += (nv[i] - mean) * (nv[i] - mean) / N;
    assert_true(fabs(mean - 1) < 0.05);
    assert_true(fabs(sqrt(var) - 0.5) < 0.05);
    assert_true(gmax <= lim && gmax > 0.9 * lim);
    kiln_session_free(s1);
    kiln_session_free(s2);
}

/* The compiled schedule prints its buffers and kernel calls. */
static void test_function_print(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *y = kiln_exp(g, kiln_add(g, x, kiln_scalar(g, 1)));
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    char buf[4096] = {0};
    FILE *m = fmemopen(buf, sizeof buf - 1, "w");
    assert_int_equal(kiln_function_print(f, m), KILN_OK);
    fclose(m);
    assert_non_null(strstr(buf, "input x f32[3]"));
    assert_non_null(strstr(buf, "exp("));
    assert_non_null(strstr(buf, "add("));
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_functions_share_variables),
        cmocka_unit_test(test_doall_swap),
        cmocka_unit_test(test_initialisers),
        cmocka_unit_test(test_function_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
