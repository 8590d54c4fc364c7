/* Normalisation layers: batch norm (training and evaluation, running
   statistics), layer, group and instance norm against PyTorch (forward,
   gradients of x, weight and bias, running statistics after one and two
   steps), in compiled functions and the dynamic path; finite-difference
   checks of first and second order; the fast kernels against the
   reference; symbolic batch; error cases. */
#include "norm_refs.h"

#include "graph/graph.h"

typedef enum { BN, LN, GN, IN } norm_kind;

/* One layer of a reference case built on g: its input, output, loss
   sum(y * dy) and the gradients of x, weight and bias (NULL without). */
typedef struct layer {
    kiln_node *x, *y, *loss, *grads[3];
    int n_grads;
} layer;

static kiln_node *values_var(kiln_graph *g, const char *name,
                             const ref_entry *t, int trainable)
{
    if (!t)
        return NULL;
    kiln_node *v =
        kiln_variable(g, name, KILN_F32, t->shape, kiln_init_values(t->f));
    return kiln_node_set_trainable(v, trainable);
}

static layer build_layer(kiln_graph *g, const ref_case *c, norm_kind k,
                         unsigned sym)
{
    layer l = {0};
    const ref_entry *x = ref_need(c, "x");
    l.x = kiln_input_sym(g, "x", KILN_F32, x->shape, sym);
    kiln_node *w = values_var(g, "weight", ref_get(c, "weight"), 1);
    kiln_node *b = values_var(g, "bias", ref_get(c, "bias"), 1);
    float eps = (float)ref_attr(c, "eps");
    if (k == BN) {
        kiln_node *rm = values_var(g, "rm", ref_need(c, "running_mean"), 0);
        kiln_node *rv = values_var(g, "rv", ref_need(c, "running_var"), 0);
        l.y = kiln_batch_norm(g, l.x, w, b, rm, rv,
                              (float)ref_attr(c, "momentum"), eps);
    } else if (k == LN) {
        kiln_shape ns = {.ndim = (int)ref_attr(c, "dims")};
        for (int i = 0; i < ns.ndim; i++)
            ns.d[i] = x->shape.d[x->shape.ndim - ns.ndim + i];
        l.y = kiln_layer_norm(g, l.x, ns, w, b, eps);
    } else if (k == GN) {
        l.y = kiln_group_norm(g, l.x, (int)ref_attr(c, "groups"), w, b, eps);
    } else {
        l.y = kiln_instance_norm(g, l.x, w, b, eps);
    }
    const ref_entry *dy = ref_need(c, "dy");
    kiln_node *dyc = kiln_constant(g, KILN_F32, dy->shape, dy->f);
    l.loss = kiln_sum(g, kiln_mul(g, l.y, dyc), KILN_ALL_AXES, 0);
    kiln_node *wrt[3] = {l.x, w, b};
    l.n_grads = w ? 3 : 1;
    assert_int_equal(kiln_grads(g, l.loss, NULL, wrt, l.n_grads, l.grads),
                     KILN_OK);
    th_assert_graph_ok(g);
    return l;
}

static void expect(const char *what, const float *got, const ref_entry *want,
                   double tol)
{
    assert_non_null(got);
    th_assert_close(what, got, want->d, want->numel, tol, tol);
}

static void expect_var(kiln_session *s, const char *name, const ref_entry *want,
                       double tol)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, want->shape);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    expect(name, kiln_tensor_f32(t), want, tol);
    kiln_tensor_free(t);
}

/* Runs layer l on x in s: compiled (f) or dynamic (f NULL); out[0] the
   output, out[1..] the gradients. */
static void run_layer(kiln_session *s, kiln_graph *g, kiln_function *f,
                      const layer *l, const ref_entry *x, const float **out,
                      kiln_tensor **keep)
{
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, x->shape, x->f);
    kiln_node *nodes[4] = {l->y, l->grads[0], l->grads[1], l->grads[2]};
    if (f) {
        for (int i = 0; i <= l->n_grads; i++) {
            kiln_tensor_free(keep[i]);
            keep[i] = kiln_function_new_output(f, i);
        }
        if (kiln_run(f, &xt, keep) != KILN_OK)
            fail_msg("kiln_run: %s", kiln_session_error(s));
        for (int i = 0; i <= l->n_grads; i++)
            out[i] = kiln_tensor_f32(keep[i]);
    } else {
        assert_int_equal(kiln_feed(s, l->x, xt), KILN_OK);
        if (kiln_forward(s, g) != KILN_OK)
            fail_msg("kiln_forward: %s", kiln_session_error(s));
        for (int i = 0; i <= l->n_grads; i++)
            out[i] = kiln_node_value_f32(s, nodes[i]);
    }
    kiln_tensor_free(xt);
}

static kiln_function *compile_layer(kiln_session *s, kiln_graph *g,
                                    const layer *l)
{
    kiln_node *outs[4] = {l->y, l->grads[0], l->grads[1], l->grads[2]};
    kiln_node *x = l->x;
    kiln_function *f = kiln_compile(s, g, outs, l->n_grads + 1, &x, 1);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    return f;
}

static void check_outputs(const char *name, const ref_case *c,
                          const float **out, int n_grads, double tol)
{
    char what[96];
    const char *grad_names[3] = {"dx", "dweight", "dbias"};
    snprintf(what, sizeof what, "%s y", name);
    expect(what, out[0], ref_need(c, "y"), tol);
    for (int i = 0; i < n_grads; i++) {
        snprintf(what, sizeof what, "%s %s", name, grad_names[i]);
        expect(what, out[i + 1], ref_need(c, grad_names[i]), tol);
    }
}

/* Batch norm case name: a training step on x, one on x2, evaluation on x. */
static void bn_case(const char *name, int compiled, unsigned sym, double tol)
{
    ref_case c;
    ref_load(name, &c);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    layer l = build_layer(g, &c, BN, sym);
    kiln_function *f = compiled ? compile_layer(s, g, &l) : NULL;
    const float *out[4];
    kiln_tensor *keep[4] = {0};
    char what[96];
    run_layer(s, g, f, &l, ref_need(&c, "x"), out, keep);
    check_outputs(name, &c, out, l.n_grads, tol);
    expect_var(s, "rm", ref_need(&c, "running_mean1"), 1e-5);
    expect_var(s, "rv", ref_need(&c, "running_var1"), 1e-4);
    run_layer(s, g, f, &l, ref_need(&c, "x2"), out, keep);
    snprintf(what, sizeof what, "%s y2", name);
    expect(what, out[0], ref_need(&c, "y2"), tol);
    expect_var(s, "rm", ref_need(&c, "running_mean2"), 1e-5);
    expect_var(s, "rv", ref_need(&c, "running_var2"), 1e-4);
    assert_int_equal(kiln_session_set_training(s, 0), KILN_OK);
    run_layer(s, g, f, &l, ref_need(&c, "x"), out, keep);
    snprintf(what, sizeof what, "%s eval y", name);
    expect(what, out[0], ref_need(&c, "ye"), tol);
    snprintf(what, sizeof what, "%s eval dx", name);
    expect(what, out[1], ref_need(&c, "dxe"), tol);
    /* evaluation leaves the running statistics as they were */
    expect_var(s, "rm", ref_need(&c, "running_mean2"), 1e-5);
    expect_var(s, "rv", ref_need(&c, "running_var2"), 1e-4);
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(keep[i]);
    kiln_session_free(s);
    kiln_graph_free(g);
    ref_free(&c);
}

static const char *const BN_CASES[] = {"bn_2d", "bn_4d",  "bn_4d_plain",
                                       "bn_c1", "bn_hw1", "bn_3d"};

static void test_batch_norm_matches_pytorch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BN_CASES / sizeof *BN_CASES; i++) {
        bn_case(BN_CASES[i], 1, 0, 1e-4);
        bn_case(BN_CASES[i], 0, 0, 1e-4);
    }
}

/* Batch norm with loss sum(y * y) on x [batch, 3, 2, 2] built at build_n
   (symbolic when sym): outputs y, dx, dweight, dbias. */
static void sym_graph(kiln_graph *g, int64_t build_n, unsigned sym,
                      kiln_node **x, kiln_node **outs)
{
    kiln_shape xs = KILN_SHAPE(build_n, 3, 2, 2);
    *x = kiln_input_sym(g, "x", KILN_F32, xs, sym);
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3),
                                 kiln_init_uniform(0.5f, 1.5f));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3),
                                 kiln_init_uniform(-1, 1));
    kiln_node *rm = kiln_node_set_trainable(
        kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(3), kiln_init_zeros()), 0);
    kiln_node *rv = kiln_node_set_trainable(
        kiln_variable(g, "rv", KILN_F32, KILN_SHAPE(3), kiln_init_ones()), 0);
    outs[0] = kiln_batch_norm(g, *x, w, b, rm, rv, 0.1f, 1e-5f);
    kiln_node *loss =
        kiln_sum(g, kiln_mul(g, outs[0], outs[0]), KILN_ALL_AXES, 0);
    kiln_node *wrt[3] = {*x, w, b};
    assert_int_equal(kiln_grads(g, loss, NULL, wrt, 3, outs + 1), KILN_OK);
}

static void expect_same_var(kiln_session *a, kiln_session *b, const char *name)
{
    kiln_tensor *ta = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_tensor *tb = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    assert_int_equal(kiln_variable_read(a, name, ta), KILN_OK);
    assert_int_equal(kiln_variable_read(b, name, tb), KILN_OK);
    th_assert_close_f(name, kiln_tensor_f32(ta), kiln_tensor_f32(tb), 3, 1e-6,
                      1e-6);
    kiln_tensor_free(ta);
    kiln_tensor_free(tb);
}

/* A function compiled with a symbolic batch (built at 2) run at 5 and 7
   gives what a graph built at that batch gives, running statistics too. */
static void test_batch_norm_symbolic_batch(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    for (int64_t n = 5; n <= 7; n += 2) {
        kiln_graph *g = kiln_graph_new(), *h = kiln_graph_new();
        kiln_node *x, *outs[4], *hx, *houts[4];
        sym_graph(g, 2, 1u, &x, outs);
        sym_graph(h, n, 0, &hx, houts);
        kiln_session *s = kiln_session_new(NULL), *hs = kiln_session_new(NULL);
        kiln_function *f = kiln_compile(s, g, outs, 4, &x, 1);
        assert_non_null(f);
        kiln_tensor *xt = th_rand(&r, KILN_SHAPE(n, 3, 2, 2), -2, 3);
        kiln_tensor *got[4], *want[4];
        for (int i = 0; i < 4; i++)
            got[i] = kiln_tensor_new(KILN_F32, i < 2 ? KILN_SHAPE(n, 3, 2, 2)
                                                     : KILN_SHAPE(3));
        assert_int_equal(kiln_run(f, &xt, got), KILN_OK);
        th_run(hs, h, houts, 4, &hx, &xt, 1, want);
        for (int i = 0; i < 4; i++) {
            th_assert_close_f("symbolic", kiln_tensor_f32(got[i]),
                              kiln_tensor_f32(want[i]),
                              kiln_tensor_numel(want[i]), 1e-5, 1e-5);
            kiln_tensor_free(got[i]);
            kiln_tensor_free(want[i]);
        }
        expect_same_var(s, hs, "rm");
        expect_same_var(s, hs, "rv");
        kiln_tensor_free(xt);
        kiln_session_free(s);
        kiln_session_free(hs);
        kiln_graph_free(g);
        kiln_graph_free(h);
    }
}

/* Inputs 1e4 + U(-2, 2) in f32: two-pass statistics keep the variance; the
   output is right to the inputs' own resolution (f32 spacing at 1e4 is
   1e-3). */
static void test_batch_norm_large_offset(void **state)
{
    (void)state;
    bn_case("bn_offset", 1, 0, 3e-3);
    bn_case("bn_offset", 0, 0, 3e-3);
}

static void per_sample_case(const char *name, norm_kind k, int compiled)
{
    ref_case c;
    ref_load(name, &c);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    layer l = build_layer(g, &c, k, 0);
    kiln_function *f = compiled ? compile_layer(s, g, &l) : NULL;
    const float *out[4];
    kiln_tensor *keep[4] = {0};
    run_layer(s, g, f, &l, ref_need(&c, "x"), out, keep);
    check_outputs(name, &c, out, l.n_grads, 1e-4);
    /* evaluation mode changes nothing for them */
    kiln_session_set_training(s, 0);
    run_layer(s, g, f, &l, ref_need(&c, "x"), out, keep);
    check_outputs(name, &c, out, l.n_grads, 1e-4);
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(keep[i]);
    kiln_session_free(s);
    kiln_graph_free(g);
    ref_free(&c);
}

static void test_layer_group_instance_norm_match_pytorch(void **state)
{
    (void)state;
    const struct {
        const char *name;
        norm_kind k;
    } cases[] = {{"ln_2d", LN},  {"ln_3d_two", LN}, {"ln_plain", LN},
                 {"ln_one", LN}, {"gn_4d", GN},     {"gn_3d", GN},
                 {"gn_c1", GN},  {"gn_hw1", GN},    {"in_4d", IN},
                 {"in_c1", IN},  {"in_3d", IN}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        per_sample_case(cases[i].name, cases[i].k, 1);
        per_sample_case(cases[i].name, cases[i].k, 0);
    }
}

/* One layer of kind k on a variable x of shape xs with weight and bias
   variables; y. */
static kiln_node *grad_layer(kiln_graph *g, norm_kind k, kiln_shape xs,
                             kiln_node **wrt)
{
    int64_t c = k == LN ? xs.d[xs.ndim - 1] : xs.d[1];
    wrt[0] = kiln_variable(g, "x", KILN_F32, xs, kiln_init_uniform(-2, 2));
    wrt[1] = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(c),
                           kiln_init_uniform(0.5f, 1.5f));
    wrt[2] = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(c),
                           kiln_init_uniform(-1, 1));
    if (k == BN) {
        kiln_node *rm = kiln_node_set_trainable(
            kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(c),
                          kiln_init_uniform(-1, 1)),
            0);
        kiln_node *rv = kiln_node_set_trainable(
            kiln_variable(g, "rv", KILN_F32, KILN_SHAPE(c),
                          kiln_init_uniform(0.5f, 2)),
            0);
        return kiln_batch_norm(g, wrt[0], wrt[1], wrt[2], rm, rv, 0.1f, 1e-5f);
    }
    if (k == LN)
        return kiln_layer_norm(g, wrt[0], KILN_SHAPE(c), wrt[1], wrt[2], 1e-5f);
    if (k == GN)
        return kiln_group_norm(g, wrt[0], 2, wrt[1], wrt[2], 1e-5f);
    return kiln_instance_norm(g, wrt[0], wrt[1], wrt[2], 1e-5f);
}

/* sum(t * r) for a fixed random r of t's shape. */
static kiln_node *weighted_sum(kiln_graph *g, kiln_rng *r, kiln_node *t)
{
    kiln_tensor *v = th_rand(r, kiln_node_shape(t), -1, 1);
    kiln_node *c =
        kiln_constant(g, KILN_F32, kiln_node_shape(t), kiln_tensor_f32(v));
    kiln_tensor_free(v);
    return kiln_sum(g, kiln_mul(g, t, c), KILN_ALL_AXES, 0);
}

/* Central differences against autodiff of sum(y * r) (order 1) or of
   sum(d/dx sum(y * r) * r2) (order 2) for x, weight and bias. */
static void gradcheck_layer(norm_kind k, kiln_shape xs, int training, int order)
{
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    kiln_node *wrt[3];
    kiln_node *loss = weighted_sum(g, &r, grad_layer(g, k, xs, wrt));
    if (order == 2) {
        kiln_node *d[3];
        assert_int_equal(kiln_grads(g, loss, NULL, wrt, 3, d), KILN_OK);
        loss =
            kiln_add(g, weighted_sum(g, &r, d[0]), weighted_sum(g, &r, d[1]));
    }
    th_assert_graph_ok(g);
    kiln_session_set_training(s, training);
    kiln_gradcheck_result res;
    /* the second-order loss does not depend on the bias */
    if (kiln_gradcheck(s, g, loss, wrt, order == 1 ? 3 : 2, NULL, NULL, 0, 1e-3,
                       1e-2, &res) != KILN_OK) {
        char b[96];
        fail_msg("kind %d %s training %d order %d: %s (operand %d element "
                 "%lld, abs err %.3g)",
                 (int)k, kiln_shape_str(xs, b, sizeof b), training, order,
                 kiln_session_error(s), res.worst_node,
                 (long long)res.worst_index, res.max_abs_err);
    }
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_gradients_by_finite_differences(void **state)
{
    (void)state;
    for (int order = 1; order <= 2; order++) {
        gradcheck_layer(BN, KILN_SHAPE(4, 3, 2, 2), 1, order);
        gradcheck_layer(BN, KILN_SHAPE(5, 2), 1, order);
        gradcheck_layer(BN, KILN_SHAPE(3, 2, 3), 0, order);
        gradcheck_layer(LN, KILN_SHAPE(3, 5), 1, order);
        gradcheck_layer(LN, KILN_SHAPE(2, 3, 4), 1, order);
        gradcheck_layer(GN, KILN_SHAPE(2, 4, 3), 1, order);
        gradcheck_layer(GN, KILN_SHAPE(3, 6, 2, 2), 1, order);
        gradcheck_layer(IN, KILN_SHAPE(2, 3, 5), 1, order);
    }
}

/* y, dx, dweight and dbias of a layer with reference or fast kernels. */
static void run_kernels(norm_kind k, kiln_shape xs, int training, int reference,
                        kiln_tensor **out)
{
    kiln_graph *g = kiln_graph_new();
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_node *wrt[3], *outs[4];
    outs[0] = grad_layer(g, k, xs, wrt);
    kiln_node *loss = weighted_sum(g, &r, outs[0]);
    assert_int_equal(kiln_grads(g, loss, NULL, wrt, 3, outs + 1), KILN_OK);
    kiln_session_options o = {
        .seed = 9, .threads = 2, .reference_kernels = reference ? 1 : -1};
    kiln_session *s = kiln_session_new(&o);
    kiln_session_set_training(s, training);
    th_run(s, g, outs, 4, NULL, NULL, 0, out);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* The fast kernels (vectorised, on 2 threads) against the reference on
   shapes with odd and size-1 dims, both modes, every layer. */
static void test_fast_kernels_match_reference(void **state)
{
    (void)state;
    const struct {
        norm_kind k;
        kiln_shape s;
    } cases[] = {
        {BN, KILN_SHAPE(7, 5, 3, 9)}, {BN, KILN_SHAPE(2, 1, 1, 33)},
        {BN, KILN_SHAPE(33, 17)},     {BN, KILN_SHAPE(16, 64, 8, 8)},
        {LN, KILN_SHAPE(5, 1, 31)},   {LN, KILN_SHAPE(9, 130)},
        {LN, KILN_SHAPE(4, 64, 128)}, {GN, KILN_SHAPE(4, 32, 1, 1)},
        {GN, KILN_SHAPE(3, 6, 5, 5)}, {GN, KILN_SHAPE(4, 32, 16, 16)},
        {IN, KILN_SHAPE(2, 5, 1, 7)}, {IN, KILN_SHAPE(5, 3, 1, 1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int training = 0; training <= 1; training++) {
            if (cases[i].k == IN && cases[i].s.d[2] * cases[i].s.d[3] == 1 &&
                training)
                continue;
            kiln_tensor *ref[4], *fast[4];
            run_kernels(cases[i].k, cases[i].s, training, 1, ref);
            run_kernels(cases[i].k, cases[i].s, training, 0, fast);
            for (int j = 0; j < 4; j++) {
                th_assert_close_f("fast", kiln_tensor_f32(fast[j]),
                                  kiln_tensor_f32(ref[j]),
                                  kiln_tensor_numel(ref[j]), 1e-4, 1e-5);
                kiln_tensor_free(ref[j]);
                kiln_tensor_free(fast[j]);
            }
        }
}

/* Compiling something that does not need the output leaves the running
   statistics alone; compiling the output updates them with no doall. */
static void test_updates_follow_the_output(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *wrt[3];
    kiln_node *y = grad_layer(g, BN, KILN_SHAPE(4, 3), wrt);
    kiln_node *other = kiln_sum(g, wrt[1], KILN_ALL_AXES, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_tensor *before = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_tensor_free(th_eval(s, g, other));
    assert_int_equal(kiln_variable_read(s, "rm", before), KILN_ERR_NOTFOUND);
    kiln_session_set_training(s, 0);
    kiln_tensor_free(th_eval(s, g, y)); /* evaluation: no change */
    assert_int_equal(kiln_variable_read(s, "rm", before), KILN_OK);
    kiln_tensor_free(th_eval(s, g, y));
    assert_int_equal(kiln_variable_read(s, "rm", t), KILN_OK);
    assert_memory_equal(kiln_tensor_f32(t), kiln_tensor_f32(before), 12);
    kiln_session_set_training(s, 1);
    kiln_tensor_free(th_eval(s, g, y));
    assert_int_equal(kiln_variable_read(s, "rm", t), KILN_OK);
    assert_memory_not_equal(kiln_tensor_f32(t), kiln_tensor_f32(before), 12);
    kiln_tensor_free(t);
    kiln_tensor_free(before);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Builds a norm on g from an x of shape xs and expects an error with
   needle. */
static void expect_build_error(kiln_shape xs, int which, const char *needle)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
    kiln_node *w3 =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3), kiln_init_ones());
    kiln_node *rm =
        kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(3), kiln_init_zeros());
    switch (which) {
    case 0: /* weight of the wrong channel count */
        kiln_batch_norm(g, x, w3, NULL, NULL, NULL, 0.1f, 1e-5f);
        break;
    case 1:
        kiln_batch_norm(g, x, NULL, NULL, rm, NULL, 0.1f, 1e-5f);
        break;
    case 2:
        kiln_batch_norm(g, x, NULL, NULL, NULL, NULL, 1.5f, 1e-5f);
        break;
    case 3:
        kiln_batch_norm(g, x, NULL, NULL, NULL, NULL, 0.1f, -1.0f);
        break;
    case 4:
        kiln_group_norm(g, x, 4, NULL, NULL, 1e-5f);
        break;
    case 5:
        kiln_layer_norm(g, x, KILN_SHAPE(5), NULL, NULL, 1e-5f);
        break;
    case 6:
        kiln_batch_norm(g, NULL, NULL, NULL, NULL, NULL, 0.1f, 1e-5f);
        break;
    case 7:
        kiln_instance_norm(g, x, NULL, NULL, NAN);
        break;
    default: {
        kiln_node *r = kiln_input(g, "r", KILN_F32, KILN_SHAPE(3));
        kiln_batch_norm(g, x, NULL, NULL, r, r, 0.1f, 1e-5f);
    }
    }
    th_expect_graph_error(g, needle);
    kiln_graph_free(g);
}

static void test_errors(void **state)
{
    (void)state;
    expect_build_error(KILN_SHAPE(2, 4), 0,
                       "kiln_batch_norm: weight is [3], expected [4]");
    expect_build_error(KILN_SHAPE(2, 3), 1,
                       "both running_mean and running_var");
    expect_build_error(KILN_SHAPE(2, 3), 2, "momentum = 1.5 is outside [0, 1]");
    expect_build_error(KILN_SHAPE(2, 3), 3, "eps = -1");
    expect_build_error(KILN_SHAPE(2, 6, 3), 4,
                       "kiln_group_norm: 6 channels of [2,6,3] do not split "
                       "into 4 groups");
    expect_build_error(KILN_SHAPE(2, 4), 5, "does not end in normalized_shape");
    expect_build_error(KILN_SHAPE(2, 3), 6, "kiln_batch_norm");
    expect_build_error(KILN_SHAPE(2, 3), 7, "eps = nan");
    expect_build_error(KILN_SHAPE(3), 0, "expected [N, C, ...]");
    expect_build_error(KILN_SHAPE(2, 3), 8, "must be a variable");
    assert_null(kiln_batch_norm(NULL, NULL, NULL, NULL, NULL, NULL, 0, 0));
    /* training on one value per channel fails at run time, as PyTorch */
    kiln_graph *g = kiln_graph_new();
    kiln_node *wrt[3];
    kiln_node *y = grad_layer(g, BN, KILN_SHAPE(1, 3), wrt);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &y, 1, NULL, 0);
    assert_non_null(f);
    kiln_tensor *out = kiln_function_new_output(f, 0);
    assert_int_equal(kiln_run(f, NULL, &out), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_session_error(s),
                           "expected more than 1 value per channel when "
                           "training, got input [1,3]"));
    assert_int_equal(kiln_forward(s, g), KILN_ERR_ARG);
    kiln_session_set_training(s, 0);
    assert_int_equal(kiln_run(f, NULL, &out), KILN_OK);
    kiln_tensor_free(out);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* norm_grad's optional sixth operand, norm_param_grad's [2, C] sums, is
   checked where the rule builds it: only per channel, only [2, C]. */
static kiln_node *norm_op(kiln_graph *g, kiln_op op, kiln_norm_attr a,
                          kiln_node **in, int n_in)
{
    kiln_node p = {.op = op, .n_in = n_in, .in = in};
    p.at.norm = a;
    return kiln_node_build(g, NULL, &p);
}

static void norm_grad_case(kiln_norm_attr a, kiln_shape ps, const char *needle)
{
    kiln_graph *g = kiln_graph_new();
    kiln_shape xs = KILN_SHAPE(4, 6);
    kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
    kiln_node *dy = kiln_input(g, "dy", KILN_F32, xs);
    kiln_node *w = kiln_input(g, "w", KILN_F32, KILN_SHAPE(6));
    int32_t one = 1;
    kiln_node *mode = kiln_constant(g, KILN_I32, KILN_SCALAR, &one);
    kiln_node *st = norm_op(g, KILN_OP_NORM_STATS, a, &x, 1);
    kiln_node *in[6] = {x, st, w, dy, mode, kiln_input(g, "p", KILN_F32, ps)};
    kiln_node *dx = norm_op(g, KILN_OP_NORM_GRAD, a, in, 6);
    if (needle)
        th_expect_graph_error(g, needle);
    else {
        th_assert_graph_ok(g);
        assert_memory_equal(kiln_node_shape(dx).d, xs.d, sizeof xs.d);
    }
    kiln_graph_free(g);
}

static void test_norm_grad_sums_operand(void **state)
{
    (void)state;
    kiln_norm_attr bn = {1, 0, 1e-5f}, gn = {1, 2, 1e-5f};
    norm_grad_case(bn, KILN_SHAPE(2, 6), NULL);
    norm_grad_case(bn, KILN_SHAPE(2, 4),
                   "parameter gradients is f32[2,4], "
                   "expected f32[2,6]");
    norm_grad_case(gn, KILN_SHAPE(2, 6), "groups must be 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_norm_matches_pytorch),
        cmocka_unit_test(test_batch_norm_symbolic_batch),
        cmocka_unit_test(test_batch_norm_large_offset),
        cmocka_unit_test(test_layer_group_instance_norm_match_pytorch),
        cmocka_unit_test(test_gradients_by_finite_differences),
        cmocka_unit_test(test_fast_kernels_match_reference),
        cmocka_unit_test(test_updates_follow_the_output),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_norm_grad_sums_operand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
