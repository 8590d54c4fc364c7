/* The op table's descriptors: each op's shape rule gives what its builder
   built, the validator reports the rule's reason, attributes compare, hash
   and print by the op's mask, and the aliasing rule says which input an
   output may overwrite. */
#include "test_helpers.h"

#include "graph/graph.h"
#include "passes/passes.h"

/* One node of every shape rule a builder runs. */
static int build_all(kiln_graph *g, kiln_node **out)
{
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(4, 3));
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(2));
    int perm[2] = {1, 0};
    int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
    kiln_node *ab[2] = {a, a};
    int n = 0;
    out[n++] = kiln_exp(g, a);
    out[n++] = kiln_add(g, a, kiln_scalar(g, 1.0f));
    out[n++] = kiln_select(g, a, a, kiln_scalar(g, 0.0f));
    out[n++] = kiln_matmul(g, a, b, 0, 1);
    out[n++] = kiln_sum(g, a, KILN_AXIS(1), 1);
    out[n++] = kiln_reduce_max(g, a, KILN_AXIS(0), 0);
    out[n++] = kiln_argmax(g, a, 1);
    out[n++] = kiln_reshape(g, a, KILN_SHAPE(3, -1));
    out[n++] = kiln_permute(g, a, perm);
    out[n++] = kiln_broadcast_to(g, a, KILN_SHAPE(5, 2, 3));
    out[n++] = kiln_slice(g, a, lo, (int64_t[]){2, 3});
    out[n++] = kiln_pad(g, a, lo, hi, 0.5f);
    out[n++] = kiln_concat(g, ab, 2, 1);
    out[n++] = kiln_one_hot(g, l, 4);
    out[n++] = kiln_cast(g, l, KILN_F32);
    out[n++] = kiln_stop_gradient(g, a);
    out[n++] = kiln_softmax_cross_entropy(g, a, l);
    return n;
}

static void test_rules_give_what_builders_built(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *nodes[32];
    int n = build_all(g, nodes);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    for (int id = 0; id < g->n_nodes; id++) {
        const kiln_node *x = g->nodes[id];
        kiln_shape s;
        kiln_dtype dt;
        char why[256] = "";
        kiln_status st =
            kiln_op_table[x->op].infer(x, &s, &dt, why, sizeof why);
        if (st != KILN_OK)
            fail_msg("%%%d %s: %s", id, kiln_op_table[x->op].name, why);
        th_assert_shape(s, x->shape);
        assert_int_equal(dt, x->dtype);
    }
    assert_true(n > 10);
    kiln_graph_free(g);
}

/* A node built around the builders with a wrong shape: the validator says
   what the op's rule says. */
static void test_validator_reports_the_rule(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[2] = {kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 3)),
                        kiln_input(g, "b", KILN_F32, KILN_SHAPE(4, 3))};
    kiln_node *m =
        kiln_node_make(g, KILN_OP_MATMUL, KILN_F32, KILN_SHAPE(2, 4), in, 2);
    kiln_unit p = {g, &m, 1, in, 2};
    char err[256];
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_ERR_STATE);
    assert_string_equal(err, "%2 = matmul: [2,3] x [4,3]: inner dimensions "
                             "differ (3 vs 4)");
    m->at.trans_b = 1;
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_OK);
    kiln_graph_free(g);
}

static void test_attributes_by_mask(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    int p01[2] = {0, 1}, p10[2] = {1, 0};
    kiln_node *t1 = kiln_permute(g, x, p10), *t2 = kiln_permute(g, x, p10);
    kiln_node *t3 = kiln_permute(g, x, p01);
    assert_true(kiln_attrs_equal(t1, t2));
    assert_false(kiln_attrs_equal(t1, t3));
    assert_true(kiln_attrs_hash(t1, 7) == kiln_attrs_hash(t2, 7));
    assert_true(kiln_attrs_hash(t1, 7) != kiln_attrs_hash(t3, 7));
    /* an attribute the op does not read does not count */
    kiln_node *e1 = kiln_exp(g, x), *e2 = kiln_exp(g, x);
    e2->at.axes = 5;
    assert_true(kiln_attrs_equal(e1, e2));
    char line[256];
    kiln_node_format(t1, NULL, '"', line, sizeof line);
    assert_string_equal(line, "%1 = permute(%0) f32[3,2] perm=[1,0]");
    int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
    kiln_node_format(kiln_pad(g, x, lo, hi, 0.5f), NULL, 0, line, sizeof line);
    assert_string_equal(line, "%6 = pad(%0) f32[3,5] lo=[1,0] value=0.5");
    kiln_node_format(kiln_sum(g, x, KILN_AXIS(1), 1), NULL, 0, line,
                     sizeof line);
    assert_string_equal(line, "%7 = sum(%0) f32[2,1] axes=0x2 keepdims");
    kiln_graph_free(g);
}

static void test_alias_rules(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *v =
        kiln_variable(g, "v", KILN_F32, KILN_SHAPE(2, 3), kiln_init_zeros());
    const struct {
        kiln_node *n;
        kiln_alias want;
    } cases[] = {
        {kiln_add(g, x, x), {0, 2, 0, 1}},
        {kiln_reshape(g, x, KILN_SHAPE(6)), {0, 1, 1, 0}},
        {kiln_stop_gradient(g, x), {0, 1, 1, 0}},
        {kiln_assign(g, v, x), {1, 1, 1, 0}},
        {kiln_cast(g, x, KILN_I32), {0, 1, 0, 0}},
        {kiln_cast(g, x, KILN_F32), {0, 1, 1, 0}},
        {kiln_sum(g, x, KILN_ALL_AXES, 0), {0, 0, 0, 0}},
        {kiln_matmul(g, x, x, 0, 1), {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_alias a = kiln_node_alias(cases[i].n);
        if (a.first != cases[i].want.first || a.count != cases[i].want.count ||
            a.copy != cases[i].want.copy || a.map != cases[i].want.map)
            fail_msg("%s: alias {%d, %d, %d, %d}",
                     kiln_op_table[cases[i].n->op].name, a.first, a.count,
                     a.copy, a.map);
    }
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_give_what_builders_built),
        cmocka_unit_test(test_validator_reports_the_rule),
        cmocka_unit_test(test_attributes_by_mask),
        cmocka_unit_test(test_alias_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
