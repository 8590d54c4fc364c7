/* Symbolic sizes: the marks kiln_input_sym puts on a graph, and compiled
   functions that run one graph at every batch size. */
#include "test_helpers.h"

static unsigned sym_of(const kiln_node *n)
{
    return kiln_node_shape(n).sym;
}

/* The batch axis is followed through the ops that keep it, and dropped by
   those that reduce it away. */
static void test_sym_marks(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(4, 3), KILN_AXIS(0));
    kiln_node *w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3, 5),
                                 kiln_init_uniform(-1, 1));
    kiln_node *h = kiln_relu(g, kiln_matmul(g, x, w, 0, 0));
    assert_int_equal(sym_of(x), 1u);
    assert_int_equal(sym_of(w), 0u);
    assert_int_equal(sym_of(h), 1u);
    assert_int_equal(sym_of(kiln_add(g, h, kiln_fill(g, KILN_SHAPE(5), 1))),
                     1u);
    assert_int_equal(sym_of(kiln_sum(g, h, KILN_AXIS(1), 0)), 1u);
    assert_int_equal(sym_of(kiln_sum(g, h, KILN_AXIS(0), 1)), 0u);
    assert_int_equal(sym_of(kiln_transpose(g, h)), 2u);
    assert_int_equal(sym_of(kiln_matmul(g, h, h, 0, 1)), 3u);
    assert_int_equal(sym_of(kiln_matmul(g, h, h, 1, 0)), 0u);
    assert_int_equal(sym_of(kiln_reshape(g, h, KILN_SHAPE(4, 5, 1))), 1u);
    assert_int_equal(sym_of(kiln_reshape(g, h, KILN_SHAPE(1, 4, 5))), 2u);
    assert_int_equal(sym_of(kiln_reshape(g, h, KILN_SHAPE(20))), 0u);
    int64_t lo[2] = {0, 1}, hi[2] = {4, 3};
    assert_int_equal(sym_of(kiln_slice(g, h, lo, hi)), 1u);
    int64_t lo2[2] = {1, 0};
    assert_int_equal(sym_of(kiln_slice(g, h, lo2, hi)), 0u);
    kiln_node *labels =
        kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(4), KILN_AXIS(0));
    assert_int_equal(sym_of(kiln_one_hot(g, labels, 5)), 1u);
    kiln_node *loss = kiln_softmax_cross_entropy(g, h, labels);
    assert_int_equal(sym_of(loss), 0u);
    /* a gradient has the shape of what it differentiates */
    kiln_node *dx = kiln_grad(g, kiln_mean(g, h, KILN_ALL_AXES, 0), x);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_int_equal(sym_of(dx), 1u);
    assert_int_equal(sym_of(kiln_grad(g, loss, w)), 0u);
    kiln_node *fill = kiln_fill(g, kiln_node_shape(h), 0);
    assert_int_equal(sym_of(fill), 1u);
    kiln_shape s = kiln_node_shape(h);
    kiln_node *c = kiln_constant(g, KILN_F32, s, (float[20]){0});
    assert_int_equal(sym_of(c), 0u);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    kiln_graph_free(g);
}

static void test_sym_input_refused(void **state)
{
    (void)state;
    struct {
        kiln_shape s;
        unsigned sym;
        const char *msg;
    } cases[] = {
        {KILN_SHAPE(4, 3), KILN_AXIS(2), "symbolic axes 0x4 beyond the 2 dims"},
        {KILN_SHAPE(0, 3), KILN_AXIS(0), "one size >= 1"},
        {KILN_SHAPE(4, 3), KILN_AXIS(0) | KILN_AXIS(1), "one size >= 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x =
            kiln_input_sym(g, "X", KILN_F32, cases[i].s, cases[i].sym);
        assert_int_not_equal(kiln_graph_status(g), KILN_OK);
        assert_non_null(strstr(kiln_graph_error(g), cases[i].msg));
        assert_non_null(strstr(kiln_graph_error(g), "kiln_input_sym"));
        (void)x;
        kiln_graph_free(g);
    }
    /* shapes of tensors are never symbolic */
    kiln_shape s = KILN_SHAPE(2, 2);
    s.sym = 1;
    kiln_tensor *t = kiln_tensor_new(KILN_F32, s);
    assert_int_equal(kiln_tensor_shape(t).sym, 0u);
    kiln_tensor_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sym_marks),
        cmocka_unit_test(test_sym_input_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
