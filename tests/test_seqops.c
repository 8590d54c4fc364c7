/* Issue 12's small ops: cumsum, prod, topk, masked_fill, tril, triu,
   leaky_relu, elu, clamp, reduce_min, logsumexp, variance and std against
   PyTorch (tests/ref/index, written by tests/ref/make_index_refs.py):
   values and gradients compiled with the fast and the reference kernels
   and run dynamically; finite-difference gradient checks of first and
   second order; the fast cumsum against the reference; topk's indices and
   ties; edge values; build errors; a symbolic batch. */
#include "index_ref.h"

#define RTOL 1e-5
#define ATOL 1e-6

static kiln_node *build_op(kiln_graph *g, const char *op, const double *p,
                           kiln_node *x, kiln_node *mask)
{
    int a = (int)p[0], b = (int)p[1], c = (int)p[2];
    kiln_node *v, *i;
    if (!strcmp(op, "cumsum"))
        return kiln_cumsum(g, x, a);
    if (!strcmp(op, "prod"))
        return kiln_prod(g, x, (unsigned)a, b);
    if (!strcmp(op, "topk")) {
        kiln_topk(g, x, a, b, &v, &i);
        return v; /* the poison node on error */
    }
    if (!strcmp(op, "masked_fill"))
        return kiln_masked_fill(g, x, mask, (float)p[0]);
    if (!strcmp(op, "tril"))
        return kiln_tril(g, x, a);
    if (!strcmp(op, "triu"))
        return kiln_triu(g, x, a);
    if (!strcmp(op, "leaky_relu"))
        return kiln_leaky_relu(g, x, (float)p[0]);
    if (!strcmp(op, "elu"))
        return kiln_elu(g, x, (float)p[0]);
    if (!strcmp(op, "clamp"))
        return kiln_clamp(g, x, (float)p[0], (float)p[1]);
    if (!strcmp(op, "reduce_min"))
        return kiln_reduce_min(g, x, (unsigned)a, b);
    if (!strcmp(op, "logsumexp"))
        return kiln_logsumexp(g, x, (unsigned)a, b);
    if (!strcmp(op, "variance"))
        return kiln_variance(g, x, (unsigned)a, (float)p[1], c);
    return kiln_std(g, x, (unsigned)a, (float)p[1], c);
}

static const char *CASES[] = {
    "cumsum_axis1",
    "cumsum_axis0",
    "prod_axis1",
    "prod_zeros",
    "prod_all",
    "topk",
    "masked_fill",
    "masked_fill_i32",
    "tril_k0",
    "triu_k0",
    "tril_km1",
    "triu_km1",
    "tril_k2",
    "triu_k2",
    "leaky_relu",
    "elu",
    "clamp",
    "reduce_min",
    "logsumexp",
    "logsumexp_keep",
    "variance_unbiased",
    "variance_biased",
    "std",
};
#define N_CASES (int)(sizeof CASES / sizeof *CASES)

typedef struct built {
    kiln_node *y, *x, *loss;
} built;

static built build_case(kiln_graph *g, iref *r)
{
    built b;
    iref_tensor *mask = iref_get(r, "mask");
    b.x = iref_node(g, iref_get(r, "x"));
    kiln_node *m = NULL;
    if (mask)
        m = kiln_constant(g, mask->dt, mask->shape,
                          mask->dt == KILN_I32 ? (void *)mask->i
                                               : (void *)mask->f);
    b.y = build_op(g, r->op, r->p, b.x, m);
    b.loss = iref_weighted_sum(g, b.y, iref_get(r, "gy"));
    th_assert_graph_ok(g);
    return b;
}

static void check_compiled(const char *name, int reference)
{
    iref r;
    iref_load(name, &r);
    kiln_session_options o = {.reference_kernels = reference};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    built b = build_case(g, &r);
    kiln_node *outs[2] = {b.y, kiln_grad(g, b.loss, b.x)};
    const char *names[2] = {"y", "dx"};
    kiln_tensor *got[2] = {0};
    th_run(s, g, outs, 2, NULL, NULL, 0, got);
    for (int i = 0; i < 2; i++) {
        iref_tensor *want = iref_get(&r, names[i]);
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", name, names[i],
                 reference > 0 ? "reference" : "fast");
        th_assert_shape(kiln_tensor_shape(got[i]), want->shape);
        th_assert_close(what, kiln_tensor_f32(got[i]), want->v,
                        kiln_shape_numel(want->shape), RTOL, ATOL);
        kiln_tensor_free(got[i]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
    iref_free(&r);
}

static void test_pytorch_compiled(void **state)
{
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        check_compiled(CASES[i], -1);
        check_compiled(CASES[i], 1);
    }
}

static void test_pytorch_dynamic(void **state)
{
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        iref r;
        iref_load(CASES[c], &r);
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        built b = build_case(g, &r);
        assert_int_equal(kiln_backprop(s, g, b.loss), KILN_OK);
        iref_tensor *y = iref_get(&r, "y"), *dx = iref_get(&r, "dx");
        th_assert_close(CASES[c], kiln_node_value_f32(s, b.y), y->v,
                        kiln_shape_numel(y->shape), RTOL, ATOL);
        th_assert_close(CASES[c], kiln_node_grad_f32(s, b.x), dx->v,
                        kiln_shape_numel(dx->shape), RTOL, ATOL);
        kiln_graph_free(g);
        kiln_session_free(s);
        iref_free(&r);
    }
}

/* topk's indices as torch.topk's; ties by lower index, NaN largest. */
static void test_topk_indices(void **state)
{
    (void)state;
    iref r;
    iref_load("topk", &r);
    iref_tensor *x = iref_get(&r, "x"), *want = iref_get(&r, "idx");
    const float tie[6] = {1, 3, NAN, 3, 2, 3};
    const int32_t tie_want[4] = {2, 1, 3, 5};
    for (int ref = -1; ref <= 1; ref += 2) {
        kiln_session_options o = {.reference_kernels = ref};
        kiln_session *s = kiln_session_new(&o);
        kiln_graph *g = kiln_graph_new();
        kiln_node *v, *i, *v2, *i2;
        kiln_topk(g, kiln_constant(g, KILN_F32, x->shape, x->f), 3, -1, &v, &i);
        kiln_topk(g, kiln_constant(g, KILN_F32, KILN_SHAPE(6), tie), 4, 0, &v2,
                  &i2);
        kiln_tensor *t = th_eval(s, g, i), *t2 = th_eval(s, g, i2);
        assert_memory_equal(kiln_tensor_i32(t), want->i,
                            (size_t)kiln_shape_numel(want->shape) * 4);
        assert_memory_equal(kiln_tensor_i32(t2), tie_want, sizeof tie_want);
        kiln_tensor_free(t);
        kiln_tensor_free(t2);
        kiln_graph_free(g);
        kiln_session_free(s);
    }
    iref_free(&r);
}

/* ------------------------------------------------------------ gradcheck */

/* sum(sin(op(x)) * tanh(op(x))) at x in [lo, hi) (away from kinks),
   first order, then the sum of squares of the gradient (grad of grad). */
static void gradcheck_op(const char *op, double p0, double p1, double p2,
                         kiln_shape xs, double lo, double hi)
{
    const double p[3] = {p0, p1, p2};
    for (int order = 1; order <= 2; order++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        kiln_rng rng;
        kiln_rng_seed(&rng, 11);
        kiln_tensor *xt = th_rand(&rng, xs, lo, hi);
        th_fill(&rng, xt, lo, hi, lo > 0);
        kiln_node *x = kiln_variable(g, "x", KILN_F32, xs,
                                     kiln_init_values(kiln_tensor_f32(xt)));
        kiln_node *mask =
            kiln_constant(g, KILN_F32, KILN_SHAPE(1, 3), (float[]){1, 0, 1});
        kiln_node *y = build_op(g, op, p, x, mask);
        kiln_node *l = kiln_sum(g, kiln_mul(g, kiln_sin(g, y), kiln_tanh(g, y)),
                                KILN_ALL_AXES, 0);
        if (order == 2) {
            kiln_node *d = kiln_grad(g, l, x);
            l = kiln_sum(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0);
        }
        th_assert_graph_ok(g);
        kiln_gradcheck_result res;
        if (kiln_gradcheck(s, g, l, &x, 1, NULL, NULL, 0, 1e-3, 1e-2, &res) !=
            KILN_OK)
            fail_msg("%s order %d: %s (max abs err %g)", op, order,
                     kiln_session_error(s), res.max_abs_err);
        kiln_tensor_free(xt);
        kiln_graph_free(g);
        kiln_session_free(s);
    }
}

static void test_gradcheck(void **state)
{
    (void)state;
    gradcheck_op("cumsum", 1, 0, 0, KILN_SHAPE(2, 5, 3), -1, 1);
    gradcheck_op("prod", 2, 0, 0, KILN_SHAPE(3, 4), 0.5, 1.5);
    gradcheck_op("prod", 5, 1, 0, KILN_SHAPE(2, 3, 2), 0.5, 1.5);
    gradcheck_op("topk", 2, 1, 0, KILN_SHAPE(3, 5), -1, 1);
    gradcheck_op("masked_fill", 0.5, 0, 0, KILN_SHAPE(2, 3), -1, 1);
    gradcheck_op("tril", 0, 0, 0, KILN_SHAPE(2, 3, 4), -1, 1);
    gradcheck_op("triu", 1, 0, 0, KILN_SHAPE(3, 3), -1, 1);
    gradcheck_op("leaky_relu", 0.1, 0, 0, KILN_SHAPE(3, 4), 0.1, 2);
    gradcheck_op("elu", 1.5, 0, 0, KILN_SHAPE(3, 4), 0.1, 2);
    gradcheck_op("clamp", -0.5, 0.5, 0, KILN_SHAPE(3, 4), -1, 1);
    gradcheck_op("reduce_min", 2, 0, 0, KILN_SHAPE(3, 4), -1, 1);
    gradcheck_op("logsumexp", 2, 1, 0, KILN_SHAPE(3, 4), -2, 2);
    gradcheck_op("variance", 3, 1, 0, KILN_SHAPE(3, 4), -1, 1);
    gradcheck_op("std", 1, 0, 1, KILN_SHAPE(3, 4), -1, 1);
}

/* ------------------------------------------------------------ kernels */

/* The fast cumsum threads over lines with the reference's arithmetic. */
static void test_fast_cumsum_matches_reference(void **state)
{
    (void)state;
    const kiln_shape shapes[] = {KILN_SHAPE(301, 257), KILN_SHAPE(7, 1, 9),
                                 KILN_SHAPE(1, 5001), KILN_SHAPE(0, 3)};
    kiln_rng rng;
    kiln_rng_seed(&rng, 3);
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        kiln_tensor *xt = th_rand(&rng, shapes[c], -1, 1);
        for (int axis = 0; axis < shapes[c].ndim; axis++) {
            kiln_tensor *got[2];
            for (int k = 0; k < 2; k++) {
                kiln_session_options o = {.reference_kernels = k ? -1 : 1,
                                          .threads = k ? 3 : 1};
                kiln_session *s = kiln_session_new(&o);
                kiln_graph *g = kiln_graph_new();
                kiln_node *x =
                    kiln_constant(g, KILN_F32, shapes[c], kiln_tensor_f32(xt));
                got[k] = th_eval(s, g, kiln_cumsum(g, x, axis));
                kiln_graph_free(g);
                kiln_session_free(s);
            }
            assert_memory_equal(kiln_tensor_f32(got[0]),
                                kiln_tensor_f32(got[1]),
                                (size_t)kiln_tensor_numel(xt) * 4);
            kiln_tensor_free(got[0]);
            kiln_tensor_free(got[1]);
        }
        kiln_tensor_free(xt);
    }
}

/* Values at the edges, as PyTorch gives them. */
static void test_edge_values(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    const float rows[6] = {-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2};
    kiln_node *x = kiln_constant(g, KILN_F32, KILN_SHAPE(2, 3), rows);
    kiln_tensor *t = th_eval(s, g, kiln_logsumexp(g, x, KILN_AXIS(1), 0));
    assert_true(isinf(kiln_tensor_f32(t)[0]) && kiln_tensor_f32(t)[0] < 0);
    assert_true(isinf(kiln_tensor_f32(t)[1]) && kiln_tensor_f32(t)[1] > 0);
    kiln_tensor_free(t);
    /* a product over nothing is 1; var of one element with correction 1
       is NaN; clamp keeps NaN */
    kiln_node *e = kiln_input(g, "e", KILN_F32, KILN_SHAPE(2, 0));
    kiln_node *one = kiln_constant(g, KILN_F32, KILN_SHAPE(1), (float[]){3});
    kiln_node *nan = kiln_constant(g, KILN_F32, KILN_SHAPE(1), (float[]){NAN});
    kiln_node *outs[3] = {kiln_prod(g, e, KILN_AXIS(1), 0),
                          kiln_variance(g, one, KILN_ALL_AXES, 1, 0),
                          kiln_clamp(g, nan, 0, 1)};
    kiln_tensor *o[3] = {0}, *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 0));
    th_run(s, g, outs, 3, &e, &in, 1, o);
    assert_float_equal(kiln_tensor_f32(o[0])[0], 1, 0);
    assert_float_equal(kiln_tensor_f32(o[0])[1], 1, 0);
    assert_true(isnan(kiln_tensor_f32(o[1])[0]));
    assert_true(isnan(kiln_tensor_f32(o[2])[0]));
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(o[i]);
    kiln_tensor_free(in);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_build_errors(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3)), *v, *i;
    kiln_node *v1 = kiln_input(g, "v", KILN_F32, KILN_SHAPE(3));
    assert_int_not_equal(kiln_topk(g, x, 4, 1, &v, &i), KILN_OK);
    th_expect_graph_error(g, "kiln_topk: k = 4 is outside [0, 3] (axis 1 of "
                             "[2,3])");
    kiln_graph_free(g);
    struct {
        int what;
        const char *want;
    } cases[] = {
        {0, "kiln_tril: [3] has fewer than 2 dims"},
        {1, "kiln_masked_fill: mask [3,3] does not broadcast to [2,3]"},
        {2, "kiln_cumsum: axis 2 out of range for 2 dims"},
        {3, "kiln_clamp: bound nan or 1 is NaN"},
        {4, "kiln_variance: axis mask 0x4 names axes beyond the 2 dims"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        g = kiln_graph_new();
        x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
        v1 = kiln_input(g, "v", KILN_F32, KILN_SHAPE(3));
        kiln_node *m = kiln_input(g, "m", KILN_F32, KILN_SHAPE(3, 3));
        switch (cases[c].what) {
        case 0:
            kiln_tril(g, v1, 0);
            break;
        case 1:
            kiln_masked_fill(g, x, m, 0);
            break;
        case 2:
            kiln_cumsum(g, x, 2);
            break;
        case 3:
            kiln_clamp(g, x, NAN, 1);
            break;
        default:
            kiln_variance(g, x, KILN_AXIS(2), 1, 0);
        }
        th_expect_graph_error(g, cases[c].want);
        kiln_graph_free(g);
    }
}

/* Unbiased variance over a symbolic batch axis: 1 / (N - 1) follows N. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(3, 2), 1u);
    kiln_node *outs[2] = {kiln_variance(g, x, KILN_AXIS(0), 1, 0),
                          kiln_cumsum(g, x, 0)};
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    assert_non_null(f);
    for (int64_t n = 2; n <= 5; n += 3) {
        float xv[10];
        double mean[2] = {0}, ss[2] = {0};
        for (int i = 0; i < n * 2; i++) {
            xv[i] = (float)((i * 37) % 11) / 4;
            mean[i % 2] += xv[i] / (double)n;
        }
        for (int i = 0; i < n * 2; i++)
            ss[i % 2] += (xv[i] - mean[i % 2]) * (xv[i] - mean[i % 2]);
        kiln_tensor *in = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(n, 2), xv);
        kiln_tensor *o[2] = {kiln_tensor_new(KILN_F32, KILN_SHAPE(2)),
                             kiln_tensor_new(KILN_F32, KILN_SHAPE(n, 2))};
        assert_int_equal(kiln_run(f, &in, o), KILN_OK);
        for (int j = 0; j < 2; j++)
            assert_float_equal(kiln_tensor_f32(o[0])[j], ss[j] / (n - 1), 1e-5);
        assert_float_equal(kiln_tensor_f32(o[1])[2 * n - 1],
                           mean[1] * (double)n, 1e-5);
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
        cmocka_unit_test(test_pytorch_compiled),
        cmocka_unit_test(test_pytorch_dynamic),
        cmocka_unit_test(test_topk_indices),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fast_cumsum_matches_reference),
        cmocka_unit_test(test_edge_values),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
