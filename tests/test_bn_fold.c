/* The inference passes (passes/bn_fold.c): eval_mode fixes the mode to
   evaluation, bn_fold turns batch norm after a conv into one conv.  The
   folded function's values equal the unfolded one's (pass off, and a
   function compiled without inference run in evaluation), it has one conv
   and no norm left, and the fold does not fire in a training function nor
   where the conv's value has another reader. */
#include <stdio.h>
#include <string.h>

#include "test_helpers.h"

/* conv2d 3->5 3x3 pad 1 (bias or not), batch norm with running
   statistics, relu; other: the conv's value also added to the result. */
static kiln_node *build(kiln_graph *g, kiln_node *x, int bias, int other)
{
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(5, 3, 3, 3),
                                 kiln_init_uniform(-1, 1));
    kiln_node *b = bias ? kiln_variable(g, "b", KILN_F32, KILN_SHAPE(5),
                                        kiln_init_uniform(-1, 1))
                        : NULL;
    kiln_node *gamma = kiln_variable(g, "gamma", KILN_F32, KILN_SHAPE(5),
                                     kiln_init_uniform(0.5, 2));
    kiln_node *beta = kiln_variable(g, "beta", KILN_F32, KILN_SHAPE(5),
                                    kiln_init_uniform(-1, 1));
    kiln_node *mean = kiln_node_set_trainable(
        kiln_variable(g, "mean", KILN_F32, KILN_SHAPE(5),
                      kiln_init_uniform(-1, 1)),
        0);
    kiln_node *var =
        kiln_node_set_trainable(kiln_variable(g, "var", KILN_F32, KILN_SHAPE(5),
                                              kiln_init_uniform(0.2, 3)),
                                0);
    kiln_conv_params p = {.padding = {1, 1}};
    kiln_node *c = kiln_conv2d(g, x, w, b, &p);
    kiln_node *h = kiln_batch_norm(g, c, gamma, beta, mean, var, 0.1f, 1e-3f);
    if (other)
        h = kiln_add(g, h, c);
    return kiln_relu(g, h);
}

/* How many times op names appear in f's printed IR ("conv(" etc.). */
static int count_in(kiln_function *f, const char *what)
{
    FILE *t = tmpfile();
    assert_non_null(t);
    kiln_function_print(f, t);
    rewind(t);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, t))
        for (const char *p = line; (p = strstr(p, what)); p++)
            n++;
    fclose(t);
    return n;
}

typedef struct compiled {
    kiln_tensor *y;
    int convs, norms;
} compiled;

static compiled run(kiln_session *s, kiln_graph *g, kiln_node *y, kiln_node *x,
                    kiln_tensor *xt, int inference, int fold)
{
    kiln_compile_options o = kiln_compile_defaults();
    o.inference = inference;
    o.bn_fold = fold;
    kiln_function *f = kiln_compile_ex(s, g, &y, 1, &x, 1, &o);
    assert_non_null(f);
    compiled c = {kiln_function_new_output(f, 0), count_in(f, " conv("),
                  count_in(f, " norm")};
    assert_int_equal(kiln_run(f, &xt, &c.y), KILN_OK);
    kiln_function_free(f);
    return c;
}

static void check(int bias, int other)
{
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3, 6, 7));
    kiln_node *y = build(g, x, bias, other);
    th_assert_graph_ok(g);
    kiln_tensor *xt = th_rand(&r, KILN_SHAPE(2, 3, 6, 7), -2, 2);
    kiln_session_set_training(s, 0);
    compiled plain = run(s, g, y, x, xt, 0, 1);
    compiled off = run(s, g, y, x, xt, 1, 0);
    /* an inference function ignores the session's mode */
    kiln_session_set_training(s, 1);
    compiled on = run(s, g, y, x, xt, 1, 1);
    compiled train = run(s, g, y, x, xt, 0, 1);
    int64_t n = kiln_tensor_numel(plain.y);
    th_assert_close_f("bn_fold off", kiln_tensor_f32(off.y),
                      kiln_tensor_f32(plain.y), n, 1e-6, 1e-6);
    th_assert_close_f("bn_fold", kiln_tensor_f32(on.y),
                      kiln_tensor_f32(plain.y), n, 1e-5, 1e-5);
    assert_true(plain.norms > 0 && off.norms > 0 && train.norms > 0);
    assert_int_equal(on.convs, 1);
    assert_int_equal(on.norms, other ? off.norms : 0);
    /* training statistics differ from the running ones */
    int differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ |= kiln_tensor_f32(train.y)[i] != kiln_tensor_f32(plain.y)[i];
    assert_true(differ);
    compiled all[4] = {plain, off, on, train};
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(all[i].y);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_folds_with_bias(void **state)
{
    (void)state;
    check(1, 0);
}

static void test_folds_without_bias(void **state)
{
    (void)state;
    check(0, 0);
}

static void test_conv_read_elsewhere(void **state)
{
    (void)state;
    check(1, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folds_with_bias),
        cmocka_unit_test(test_folds_without_bias),
        cmocka_unit_test(test_conv_read_elsewhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
