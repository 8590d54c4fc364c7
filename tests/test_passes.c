#define _POSIX_C_SOURCE 200809L
/* Compiler passes and memory planning: every pass, alone and together,
   against the unoptimised graph on random shapes (odd sizes, size 1, empty
   dims, broadcasting); specific rewrites; memory plan validity and peak;
   error paths. */
#include "test_helpers.h"

#include "cpu/dispatch.h"
#include "passes/passes.h"

/* ------------------------------------------------------------ harness */

enum { MAX_IO = 12, MAX_VARS = 10 };

/* A graph with its fed inputs and outputs, and variables to read back. */
typedef struct net {
    kiln_graph *g;
    kiln_node *in[MAX_IO], *out[MAX_IO];
    int n_in, n_out;
    const char *vars[MAX_VARS];
    int n_vars;
    int steps;   /* runs per check (training steps change variables) */
    int threads; /* kernel threads (0: one) */
} net;

/* Everything off: the reference every configuration must reproduce. */
static kiln_compile_options no_passes(void)
{
    kiln_compile_options o = kiln_compile_defaults();
    o.dce = o.cse = o.fold = o.simplify = o.gemm_acc = o.fuse = o.plan_memory =
        0;
    return o;
}

/* Results of one configuration: outputs after the last run, then
   variables. */
typedef struct results {
    kiln_tensor *t[MAX_IO + MAX_VARS];
    int n;
    int kernels;
    size_t memory, unplanned;
} results;

static void results_free(results *r)
{
    for (int i = 0; i < r->n; i++)
        kiln_tensor_free(r->t[i]);
    r->n = 0;
}

static kiln_tensor *random_feed(kiln_rng *r, const kiln_node *n)
{
    kiln_tensor *t = kiln_tensor_new(kiln_node_dtype(n), kiln_node_shape(n));
    assert_non_null(t);
    if (kiln_node_dtype(n) == KILN_I32) {
        int32_t *p = kiln_tensor_i32(t);
        for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
            p[i] = (int32_t)(kiln_rng_u32(r) % 4);
    } else {
        th_fill(r, t, -2, 2, 0);
    }
    return t;
}

static void run_config(const net *m, const kiln_compile_options *o,
                       uint64_t feed_seed, results *res)
{
    kiln_session_options so = {.seed = 7,
                               .threads = m->threads ? m->threads : 1};
    kiln_session *s = kiln_session_new(&so);
    kiln_function *f =
        kiln_compile_ex(s, m->g, m->out, m->n_out, m->in, m->n_in, o);
    if (!f)
        fail_msg("kiln_compile_ex: %s", kiln_session_error(s));
    kiln_rng r;
    kiln_rng_seed(&r, feed_seed);
    kiln_tensor *feeds[MAX_IO];
    for (int i = 0; i < m->n_in; i++)
        feeds[i] = random_feed(&r, m->in[i]);
    memset(res, 0, sizeof *res);
    for (int i = 0; i < m->n_out; i++)
        assert_non_null(res->t[res->n++] = kiln_function_new_output(f, i));
    for (int step = 0; step < (m->steps ? m->steps : 1); step++)
        if (kiln_run(f, feeds, res->t) != KILN_OK)
            fail_msg("kiln_run: %s", kiln_session_error(s));
    for (int v = 0; v < m->n_vars; v++) {
        kiln_param_info info;
        int found = 0;
        for (int i = 0; i < kiln_session_num_variables(s) && !found; i++) {
            kiln_session_variable_info(s, i, &info);
            found = !strcmp(info.name, m->vars[v]);
        }
        assert_true(found);
        kiln_tensor *t = kiln_tensor_new(info.dtype, info.shape);
        assert_int_equal(kiln_variable_read(s, m->vars[v], t), KILN_OK);
        res->t[res->n++] = t;
    }
    res->kernels = kiln_function_num_kernels(f);
    res->memory = kiln_function_memory(f);
    res->unplanned = kiln_function_memory_unplanned(f);
    for (int i = 0; i < m->n_in; i++)
        kiln_tensor_free(feeds[i]);
    kiln_session_free(s);
}

static void assert_same_results(const char *what, const results *got,
                                const results *want)
{
    assert_int_equal(got->n, want->n);
    for (int i = 0; i < got->n; i++) {
        char label[96];
        snprintf(label, sizeof label, "%s, result %d", what, i);
        th_assert_shape(kiln_tensor_shape(got->t[i]),
                        kiln_tensor_shape(want->t[i]));
        if (kiln_tensor_dtype(want->t[i]) == KILN_I32) {
            assert_memory_equal(kiln_tensor_data(got->t[i]),
                                kiln_tensor_data(want->t[i]),
                                (size_t)kiln_tensor_numel(want->t[i]) * 4);
            continue;
        }
        th_assert_close_f(label, kiln_tensor_f32(got->t[i]),
                          kiln_tensor_f32(want->t[i]),
                          kiln_tensor_numel(want->t[i]), 1e-6, 1e-6);
    }
}

/* Every pass alone, planning alone, and everything, against no passes. */
static void check_all_configs(const net *m, uint64_t seed)
{
    results want, got;
    kiln_compile_options ref = no_passes();
    run_config(m, &ref, seed, &want);
    static const char *const names[] = {
        "dce",      "cse",  "fold",        "simplify",
        "gemm_acc", "fuse", "plan_memory", "with finite_math",
        ""};
    enum { N = 7 }; /* flags */
    /* 0-6: one pass on; 7, 8: all on (with finite_math); 9-15: one off */
    for (int c = 0; c < 2 * N + 2; c++) {
        kiln_compile_options o = c < N ? no_passes() : kiln_compile_defaults();
        int *flag[N] = {&o.dce,      &o.cse,  &o.fold,       &o.simplify,
                        &o.gemm_acc, &o.fuse, &o.plan_memory};
        if (c < N)
            *flag[c] = 1;
        else if (c >= N + 2)
            *flag[c - N - 2] = 0;
        o.finite_math = c == N;
        run_config(m, &o, seed, &got);
        char what[64];
        snprintf(what, sizeof what, "%s %s (seed %llu)",
                 c < N       ? "only"
                 : c < N + 2 ? "all passes"
                             : "all but",
                 names[c < N + 2 ? c : c - N - 2], (unsigned long long)seed);
        assert_same_results(what, &got, &want);
        if (c == N + 1)
            assert_true(got.kernels <= want.kernels);
        results_free(&got);
    }
    results_free(&want);
}

/* A random dimension: odd sizes, 1, and now and then 0. */
static int64_t rand_dim(kiln_rng *r, int allow_empty)
{
    static const int64_t dims[] = {1, 2, 3, 5, 7, 9, 13, 17, 33};
    if (allow_empty && kiln_rng_u32(r) % 10 == 0)
        return 0;
    return dims[kiln_rng_u32(r) % (sizeof dims / sizeof *dims)];
}

static void add_in(net *m, kiln_node *n)
{
    m->in[m->n_in++] = n;
}
static void add_out(net *m, kiln_node *n)
{
    m->out[m->n_out++] = n;
}

/* ------------------------------------------------------------ random graphs */

/* Elementwise trees with broadcasting, identities and an intermediate
   output (which must stay materialised). */
static net elementwise_net(kiln_rng *r)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    int64_t a = rand_dim(r, 1), b = rand_dim(r, 1);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(a, b));
    kiln_node *bias = kiln_input(g, "bias", KILN_F32, KILN_SHAPE(b));
    kiln_node *col = kiln_input(g, "col", KILN_F32, KILN_SHAPE(a, 1));
    add_in(&m, x);
    add_in(&m, bias);
    add_in(&m, col);
    kiln_node *t1 = kiln_add(g, kiln_mul(g, x, kiln_scalar(g, 1.0f)), bias);
    kiln_node *t2 = kiln_relu(g, t1);
    kiln_node *t3 = kiln_mul(g, kiln_sigmoid(g, col), t2);
    kiln_node *t4 = kiln_select(g, kiln_gt(g, x, kiln_scalar(g, 0.0f)), t3,
                                kiln_neg(g, kiln_neg(g, x)));
    kiln_node *t5 =
        kiln_mul(g, kiln_tanh(g, kiln_add(g, t4, kiln_scalar(g, 0.0f))),
                 kiln_scalar(g, 0.5f));
    kiln_node *t6 = kiln_max(g, t5, col);
    kiln_node *t7 =
        kiln_div(g, kiln_exp(g, kiln_sub(g, t6, t6)), kiln_scalar(g, 1.0f));
    kiln_node *t8 =
        kiln_add(g, kiln_mul(g, t7, t7), kiln_sqrt(g, kiln_abs(g, t3)));
    add_out(&m, t3);
    add_out(&m, kiln_sum(g, t8, KILN_AXIS(0), 0));
    add_out(&m, kiln_sub(g, t8,
                         kiln_log(g, kiln_add(g, kiln_abs(g, bias),
                                              kiln_scalar(g, 1.0f)))));
    th_assert_graph_ok(g);
    return m;
}

/* Movement and contraction: permute and reshape chains, transposes into
   matmul, sum of a broadcast, duplicate subexpressions and constant
   subgraphs. */
static net movement_net(kiln_rng *r)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    int64_t a = rand_dim(r, 1), k = rand_dim(r, 1), n = rand_dim(r, 0);
    kiln_node *at = kiln_input(g, "at", KILN_F32, KILN_SHAPE(k, a));
    kiln_node *w = kiln_input(g, "w", KILN_F32, KILN_SHAPE(k, n));
    kiln_node *v = kiln_input(g, "v", KILN_F32, KILN_SHAPE(n));
    add_in(&m, at);
    add_in(&m, w);
    add_in(&m, v);
    kiln_node *x = kiln_transpose(g, at); /* [a, k] */
    kiln_node *xx = kiln_transpose(g, kiln_transpose(g, x));
    kiln_node *p = kiln_matmul(g, xx, w, 0, 0); /* [a, n] */
    kiln_node *q = kiln_matmul(g, kiln_transpose(g, kiln_transpose(g, at)),
                               kiln_transpose(g, w), 1, 1); /* [a, n]^T... */
    kiln_node *flat = kiln_reshape(g, kiln_reshape(g, p, KILN_SHAPE(a * n)),
                                   KILN_SHAPE(n, a));
    kiln_node *vb = kiln_broadcast(g, v, KILN_SHAPE(a, n), KILN_AXIS(0));
    kiln_node *sb = kiln_sum(g, vb, KILN_AXIS(0), 0);
    kiln_node *sbk = kiln_sum(
        g,
        kiln_broadcast(g, v, KILN_SHAPE(3, 2, n), KILN_AXIS(0) | KILN_AXIS(1)),
        KILN_AXIS(0) | KILN_AXIS(1), 1);
    kiln_node *e1 = kiln_exp(g, kiln_scale(g, p, 0.1f));
    kiln_node *e2 = kiln_exp(g, kiln_scale(g, p, 0.1f));
    float cdata[6] = {1, 2, 3, 4, 5, 6};
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(2, 3), cdata);
    kiln_node *cf =
        kiln_sum(g, kiln_mul(g, c, kiln_transpose(g, kiln_transpose(g, c))),
                 KILN_ALL_AXES, 0);
    add_out(&m, kiln_add(g, e1, kiln_mul(g, e2, cf)));
    add_out(&m, flat);
    add_out(&m, kiln_add(g, sb, kiln_reshape(g, sbk, KILN_SHAPE(n))));
    add_out(&m,
            kiln_stop_gradient(
                g, kiln_reduce_max(g, kiln_reshape(g, q, KILN_SHAPE(n, a, 1)),
                                   KILN_AXIS(2), 0)));
    th_assert_graph_ok(g);
    return m;
}

/* A training step: MLP with gelu and relu, softmax cross-entropy, SGD
   through assign or Adam (kiln_optimizer_build_step); checked on the loss,
   a gradient and the variables after three steps. */
static net training_net(kiln_rng *r, int adam)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    int64_t batch = rand_dim(r, 0), in = rand_dim(r, 0),
            hidden = rand_dim(r, 0);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(batch, in));
    kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(batch));
    add_in(&m, x);
    add_in(&m, y);
    kiln_node *w0 = kiln_variable(g, "w0", KILN_F32, KILN_SHAPE(in, hidden),
                                  kiln_init_uniform(-0.5, 0.5));
    kiln_node *b0 = kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(hidden),
                                  kiln_init_uniform(-0.1, 0.1));
    kiln_node *w1 = kiln_variable(g, "w1", KILN_F32, KILN_SHAPE(hidden, 4),
                                  kiln_init_uniform(-0.5, 0.5));
    kiln_node *b1 =
        kiln_variable(g, "b1", KILN_F32, KILN_SHAPE(4), kiln_init_zeros());
    kiln_node *h = kiln_gelu(g, kiln_affine(g, x, w0, b0));
    kiln_node *logits = kiln_affine(g, kiln_relu(g, h), w1, b1);
    kiln_node *loss = kiln_softmax_cross_entropy(g, logits, y);
    kiln_node *grads[4], *vars[4] = {w0, b0, w1, b1};
    assert_int_equal(kiln_grads(g, loss, NULL, vars, 4, grads), KILN_OK);
    add_out(&m, loss);
    if (adam) {
        /* the optimiser's state variables live in the run's session; this
           one only declares them */
        kiln_session *s = kiln_session_new(NULL);
        kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
        oo.lr = 0.01f;
        kiln_optimizer *o = kiln_optimizer_new(s, &oo);
        add_out(&m, kiln_optimizer_build_step(o, g, loss));
        kiln_optimizer_free(o);
        kiln_session_free(s);
    } else {
        kiln_node *assigns[4];
        for (int i = 0; i < 4; i++)
            assigns[i] = kiln_assign(
                g, vars[i],
                kiln_sub(g, vars[i], kiln_scale(g, grads[i], 0.1f)));
        add_out(&m, kiln_doall(g, assigns, 4));
    }
    add_out(&m, grads[1]);
    m.vars[0] = "w0";
    m.vars[1] = "b0";
    m.vars[2] = "w1";
    m.vars[3] = "b1";
    m.n_vars = 4;
    m.steps = 3;
    th_assert_graph_ok(g);
    return m;
}

/* Reductions absorbing elementwise producers: sums and maxes over rows,
   columns, a middle axis, everything and two non-adjacent axes (fused only
   when size-1 axes make them adjacent), inputs that all broadcast to the
   domain, a producer that is also an output (stays materialised) and a
   cheap value shared by several groups (recomputed in each). */
static net reduction_net(kiln_rng *r)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    int64_t a = rand_dim(r, 1), b = rand_dim(r, 1), c = rand_dim(r, 1);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(a, b, c));
    kiln_node *y = kiln_input(g, "y", KILN_F32, KILN_SHAPE(a, b, c));
    kiln_node *row = kiln_input(g, "row", KILN_F32, KILN_SHAPE(c));
    kiln_node *col = kiln_input(g, "col", KILN_F32, KILN_SHAPE(a, 1, 1));
    add_in(&m, x);
    add_in(&m, y);
    add_in(&m, row);
    add_in(&m, col);
    /* a max over an empty axis is refused (docs/ops.md): sum those */
    kiln_node *(*max1)(kiln_graph *, kiln_node *, unsigned, int) =
        b ? kiln_reduce_max : kiln_sum;
    kiln_node *(*max02)(kiln_graph *, kiln_node *, unsigned, int) =
        a && c ? kiln_reduce_max : kiln_sum;
    kiln_node *z = kiln_add(g, x, row); /* shared by three groups */
    kiln_node *d = kiln_sub(g, x, y);   /* also an output */
    add_out(&m, kiln_sum(g, kiln_mul(g, x, y), KILN_AXIS(2), 0));
    add_out(&m, kiln_sum(g, kiln_relu(g, z), KILN_AXIS(0), 1));
    add_out(&m,
            max1(g, kiln_scale(g, kiln_add(g, z, col), 0.5f), KILN_AXIS(1), 0));
    add_out(&m, kiln_sum(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0));
    add_out(&m, max02(g,
                      kiln_select(g, kiln_gt(g, z, kiln_scalar(g, 0.0f)), y,
                                  kiln_neg(g, x)),
                      KILN_AXIS(0) | KILN_AXIS(2), 1));
    add_out(&m, d);
    add_out(&m,
            kiln_sum(g, kiln_mul(g, row, col), KILN_AXIS(0) | KILN_AXIS(2), 0));
    add_out(&m, kiln_sum(g, kiln_exp(g, kiln_scale(g, x, 0.1f)),
                         KILN_AXIS(1) | KILN_AXIS(2), 1));
    th_assert_graph_ok(g);
    return m;
}

static void test_random_reductions(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 15);
    for (int rep = 0; rep < 16; rep++) {
        net m = reduction_net(&r);
        check_all_configs(&m, 400 + (uint64_t)rep);
        kiln_graph_free(m.g);
    }
}

static void test_random_elementwise(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    for (int rep = 0; rep < 12; rep++) {
        net m = elementwise_net(&r);
        check_all_configs(&m, 100 + (uint64_t)rep);
        kiln_graph_free(m.g);
    }
}

static void test_random_movement(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 12);
    for (int rep = 0; rep < 12; rep++) {
        net m = movement_net(&r);
        check_all_configs(&m, 200 + (uint64_t)rep);
        kiln_graph_free(m.g);
    }
}

static void test_random_training(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    for (int rep = 0; rep < 8; rep++) {
        net m = training_net(&r, rep % 2);
        check_all_configs(&m, 300 + (uint64_t)rep);
        kiln_graph_free(m.g);
    }
}

/* ------------------------------------------------------------ rewrites */

/* Compiles outs of g fed by ins with opt (NULL: defaults); returns the
   number of kernels and, when text is given, the printed schedule. */
static int compile_count(kiln_graph *g, kiln_node **outs, int n_out,
                         kiln_node **ins, int n_in,
                         const kiln_compile_options *opt, char **text)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile_ex(s, g, outs, n_out, ins, n_in, opt);
    if (!f)
        fail_msg("kiln_compile_ex: %s", kiln_session_error(s));
    if (text) {
        size_t len;
        FILE *mem = open_memstream(text, &len);
        kiln_function_print(f, mem);
        fclose(mem);
    }
    int k = kiln_function_num_kernels(f);
    kiln_session_free(s);
    return k;
}

static kiln_compile_options only(const char *pass)
{
    kiln_compile_options o = no_passes();
    o.plan_memory = 1;
    o.dce = 1; /* clears what the pass leaves dead */
    if (!strcmp(pass, "cse"))
        o.cse = 1;
    else if (!strcmp(pass, "fold"))
        o.fold = 1;
    else if (!strcmp(pass, "simplify"))
        o.simplify = 1;
    else if (!strcmp(pass, "fuse"))
        o.fuse = 1;
    return o;
}

static void test_identities_disappear(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 5));
    kiln_node *outs[6] = {
        kiln_relu(g, kiln_mul(g, x, kiln_scalar(g, 1.0f))),
        kiln_relu(g, kiln_mul(g, kiln_scalar(g, 1.0f), x)),
        kiln_relu(g, kiln_add(g, x, kiln_scalar(g, 0.0f))),
        kiln_relu(g, kiln_sub(g, x, kiln_fill(g, KILN_SHAPE(3, 5), 0.0f))),
        kiln_relu(
            g, kiln_div(g, kiln_neg(g, kiln_neg(g, x)), kiln_scalar(g, 1.0f))),
        kiln_relu(g, kiln_reshape(g,
                                  kiln_reshape(g, kiln_stop_gradient(g, x),
                                               KILN_SHAPE(15)),
                                  KILN_SHAPE(3, 5))),
    };
    kiln_compile_options none = only("none"), simp = only("simplify");
    for (int i = 0; i < 6; i++) {
        int before = compile_count(g, &outs[i], 1, &x, 1, &none, NULL);
        int after = compile_count(g, &outs[i], 1, &x, 1, &simp, NULL);
        assert_true(before >= 2);
        if (after != 1)
            fail_msg("output %d: %d kernels after simplify, want 1 (relu)", i,
                     after);
    }
    /* x - x only under finite_math; NaN - NaN stays NaN otherwise */
    kiln_node *d = kiln_sub(g, x, x);
    assert_int_equal(compile_count(g, &d, 1, &x, 1, &simp, NULL), 1);
    simp.finite_math = 1;
    assert_int_equal(compile_count(g, &d, 1, &x, 1, &simp, NULL), 0);
    kiln_graph_free(g);
}

static void test_cse_and_fold(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4, 7));
    kiln_node *y = kiln_add(g, kiln_exp(g, x), kiln_exp(g, x));
    kiln_compile_options none = only("none"), cse = only("cse"),
                         fold = only("fold");
    assert_int_equal(compile_count(g, &y, 1, &x, 1, &none, NULL), 3);
    assert_int_equal(compile_count(g, &y, 1, &x, 1, &cse, NULL), 2);
    /* constants merge by value, so their uses merge too */
    kiln_node *z = kiln_add(g, kiln_mul(g, x, kiln_scalar(g, 2.0f)),
                            kiln_mul(g, x, kiln_scalar(g, 2.0f)));
    assert_int_equal(compile_count(g, &z, 1, &x, 1, &cse, NULL), 2);
    /* a constant subgraph folds into one constant */
    kiln_node *c = kiln_sum(g,
                            kiln_mul(g, kiln_fill(g, KILN_SHAPE(3, 3), 2.0f),
                                     kiln_fill(g, KILN_SHAPE(3, 3), 3.0f)),
                            KILN_ALL_AXES, 0);
    kiln_node *w = kiln_mul(g, x, kiln_exp(g, c));
    assert_int_equal(compile_count(g, &w, 1, &x, 1, &none, NULL), 4);
    assert_int_equal(compile_count(g, &w, 1, &x, 1, &fold, NULL), 1);
    /* beyond fold_max_elements nothing folds */
    fold.fold_max_elements = 0;
    assert_int_equal(compile_count(g, &w, 1, &x, 1, &fold, NULL), 4);
    kiln_graph_free(g);
}

static void test_transpose_into_matmul(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 6, 5));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(2, 4, 6));
    kiln_node *ins[2] = {a, b};
    kiln_node *y =
        kiln_matmul(g, kiln_transpose(g, a), kiln_transpose(g, b), 0, 0);
    kiln_compile_options simp = only("simplify");
    char *text = NULL;
    assert_int_equal(compile_count(g, &y, 1, ins, 2, &simp, &text), 1);
    assert_non_null(strstr(text, "trans_a=1 trans_b=1"));
    free(text);
    /* a permute that moves batch axes is not a transpose */
    int perm[3] = {1, 0, 2};
    kiln_node *c = kiln_input(g, "c", KILN_F32, KILN_SHAPE(5, 2, 6));
    kiln_node *y2 = kiln_matmul(
        g, kiln_permute(g, c, perm),
        kiln_transpose(g, kiln_transpose(g, kiln_transpose(g, b))), 0, 0);
    kiln_node *ins2[2] = {c, b};
    assert_int_equal(compile_count(g, &y2, 1, ins2, 2, &simp, NULL), 2);
    kiln_graph_free(g);
}

static void test_sum_of_broadcast(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *v = kiln_input(g, "v", KILN_F32, KILN_SHAPE(5, 1));
    kiln_node *bc = kiln_broadcast_to(g, v, KILN_SHAPE(3, 5, 7));
    kiln_node *s =
        kiln_sum(g, bc, KILN_AXIS(0) | KILN_AXIS(2), 1); /* [1,5,1] */
    kiln_compile_options simp = only("simplify");
    char *text = NULL;
    compile_count(g, &s, 1, &v, 1, &simp, &text);
    assert_null(strstr(text, "sum("));
    assert_null(strstr(text, "broadcast("));
    assert_non_null(strstr(text, "mul("));
    free(text);
    /* summing fewer axes than the broadcast added is not a scale */
    kiln_node *s2 = kiln_sum(g, bc, KILN_AXIS(0), 0);
    compile_count(g, &s2, 1, &v, 1, &simp, &text);
    assert_non_null(strstr(text, "sum("));
    free(text);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 1));
    for (int i = 0; i < 5; i++)
        kiln_tensor_f32(in)[i] = 0.1f * (float)(i + 1);
    kiln_session *ss = kiln_session_new(NULL);
    kiln_function *f = kiln_compile_ex(ss, g, &s, 1, &v, 1, &simp);
    kiln_tensor *out = kiln_function_new_output(f, 0);
    assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
    for (int i = 0; i < 5; i++)
        assert_float_equal(kiln_tensor_f32(out)[i],
                           21.0f * 0.1f * (float)(i + 1), 1e-6);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_session_free(ss);
    kiln_graph_free(g);
}

static void test_fusion(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(37, 19));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(19));
    kiln_node *ins[2] = {x, b};
    kiln_node *t =
        kiln_mul(g, kiln_relu(g, kiln_add(g, x, b)), kiln_scalar(g, 0.5f));
    kiln_node *y = kiln_add(g, t, kiln_tanh(g, t)); /* t used twice */
    kiln_compile_options fuse = only("fuse"), none = only("none");
    char *text = NULL;
    assert_int_equal(compile_count(g, &y, 1, ins, 2, &none, NULL), 5);
    assert_int_equal(compile_count(g, &y, 1, ins, 2, &fuse, &text), 1);
    assert_non_null(
        strstr(text, "fused[add(%0, %1) -> relu(_) -> mul(_, 0.5) as $"));
    free(text);
    /* a value that is also an output stays a kernel of its own */
    kiln_node *outs[2] = {y, t};
    assert_int_equal(compile_count(g, outs, 2, ins, 2, &fuse, NULL), 2);
    /* a smaller-shaped producer is not recomputed per element */
    kiln_node *eb = kiln_exp(g, b);
    kiln_node *z = kiln_relu(g, kiln_mul(g, x, eb));
    assert_int_equal(compile_count(g, &z, 1, ins, 2, &fuse, NULL), 2);
    kiln_graph_free(g);
}

static void test_reduction_fusion(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(37, 19));
    kiln_node *y = kiln_input(g, "y", KILN_F32, KILN_SHAPE(37, 19));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(19));
    kiln_node *ins[3] = {x, y, b};
    kiln_compile_options fuse = only("fuse");
    char *text = NULL;
    kiln_node *rows = kiln_sum(g, kiln_mul(g, x, y), KILN_AXIS(1), 0);
    assert_int_equal(compile_count(g, &rows, 1, ins, 3, &fuse, &text), 1);
    assert_non_null(strstr(text, "fused[mul(%0, %1) -> sum(_) axes=0x2]"));
    free(text);
    kiln_node *cols =
        kiln_sum(g, kiln_relu(g, kiln_add(g, x, b)), KILN_AXIS(0), 1);
    assert_int_equal(compile_count(g, &cols, 1, ins, 3, &fuse, &text), 1);
    assert_non_null(strstr(text, "-> relu(_) -> sum(_) axes=0x1 keepdims"));
    free(text);
    kiln_node *all = kiln_reduce_max(g, kiln_sub(g, x, b), KILN_ALL_AXES, 0);
    assert_int_equal(compile_count(g, &all, 1, ins, 3, &fuse, &text), 1);
    assert_non_null(strstr(text, "-> reduce_max(_) axes=0x3"));
    free(text);
    /* a producer that is an output, or read by something else, stays */
    kiln_node *p = kiln_mul(g, x, y);
    kiln_node *outs[2] = {kiln_sum(g, p, KILN_AXIS(1), 0), p};
    assert_int_equal(compile_count(g, outs, 2, ins, 3, &fuse, NULL), 2);
    /* reduced axes that are not adjacent keep the plain reduction */
    kiln_node *t = kiln_input(g, "t", KILN_F32, KILN_SHAPE(3, 4, 5));
    kiln_node *s = kiln_sum(g, kiln_exp(g, t), KILN_AXIS(0) | KILN_AXIS(2), 0);
    assert_int_equal(compile_count(g, &s, 1, &t, 1, &fuse, NULL), 2);
    kiln_graph_free(g);
}

/* Fused reductions large enough to run on several threads, rows and
   columns, against the unfused graph. */
static void test_reduction_threads(void **state)
{
    (void)state;
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(301, 1031));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(1031));
    add_in(&m, x);
    add_in(&m, b);
    kiln_node *z = kiln_relu(g, kiln_add(g, x, b));
    add_out(&m, kiln_sum(g, z, KILN_AXIS(0), 0));
    add_out(&m, kiln_sum(g, kiln_mul(g, x, x), KILN_AXIS(1), 1));
    add_out(&m, kiln_reduce_max(g, kiln_sub(g, x, b), KILN_AXIS(0), 0));
    add_out(&m,
            kiln_sum(g, kiln_exp(g, kiln_scale(g, x, 0.5f)), KILN_ALL_AXES, 0));
    th_assert_graph_ok(g);
    for (int t = 1; t <= 3; t++) {
        m.threads = t;
        results want, got;
        kiln_compile_options ref = no_passes(), all = kiln_compile_defaults();
        run_config(&m, &ref, 600, &want);
        run_config(&m, &all, 600, &got);
        assert_int_equal(got.kernels, 4);
        assert_same_results("threaded fused reductions", &got, &want);
        results_free(&want);
        results_free(&got);
    }
    kiln_graph_free(g);
}

/* A cheap value read by several groups is computed in each of them and
   never written out; an expensive one is written once. */
static void test_recompute_shared(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(13, 21));
    kiln_node *dy = kiln_input(g, "dy", KILN_F32, KILN_SHAPE(13, 21));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(21));
    kiln_node *ins[3] = {x, dy, b};
    kiln_compile_options fuse = only("fuse");
    char *text = NULL;
    /* relu forward and its backward mask, as in a training step */
    kiln_node *z = kiln_add(g, x, b);
    kiln_node *outs[2] = {
        kiln_relu(g, z),
        kiln_sum(g, kiln_mul(g, dy, kiln_gt(g, z, kiln_scalar(g, 0.0f))),
                 KILN_AXIS(0), 0)};
    assert_int_equal(compile_count(g, outs, 2, ins, 3, &fuse, &text), 2);
    assert_non_null(strstr(text, "fused[add(%0, %2) -> relu(_)]"));
    assert_non_null(strstr(text, "fused[add(%0, %2) -> gt(_, 0)"));
    free(text);
    kiln_node *e = kiln_exp(g, x);
    kiln_node *outs2[2] = {kiln_relu(g, e), kiln_neg(g, e)};
    assert_int_equal(compile_count(g, outs2, 2, ins, 3, &fuse, NULL), 3);
    kiln_graph_free(g);
}

/* The MNIST MLP (784-600-10, batch 128) training step with SGD or Adam. */
static net mnist_step(int adam)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(128, 784));
    kiln_node *y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(128));
    add_in(&m, x);
    add_in(&m, y);
    kiln_node *w0 = kiln_variable(g, "W0", KILN_F32, KILN_SHAPE(784, 600),
                                  kiln_init_uniform(-0.05, 0.05));
    kiln_node *b0 = kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(600),
                                  kiln_init_uniform(-0.05, 0.05));
    kiln_node *w1 = kiln_variable(g, "W1", KILN_F32, KILN_SHAPE(600, 10),
                                  kiln_init_uniform(-0.05, 0.05));
    kiln_node *b1 =
        kiln_variable(g, "b1", KILN_F32, KILN_SHAPE(10), kiln_init_zeros());
    kiln_node *h = kiln_relu(g, kiln_affine(g, x, w0, b0));
    kiln_node *loss =
        kiln_softmax_cross_entropy(g, kiln_affine(g, h, w1, b1), y);
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(adam ? KILN_ADAM : KILN_SGD);
    oo.lr = 0.01f;
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    add_out(&m, loss);
    add_out(&m, kiln_optimizer_build_step(o, g, loss));
    kiln_optimizer_free(o);
    kiln_session_free(s);
    m.vars[0] = "W0";
    m.vars[1] = "b0";
    m.vars[2] = "W1";
    m.vars[3] = "b1";
    m.n_vars = 4;
    m.steps = 3;
    th_assert_graph_ok(g);
    return m;
}

/* Fusion leaves no [128,600] elementwise kernel but the fused forward
   relu and backward mask, cuts the kernel count, and changes no result. */
static void test_mlp_step_fusion(void **state)
{
    (void)state;
    for (int adam = 0; adam < 2; adam++) {
        net m = mnist_step(adam);
        kiln_compile_options all = kiln_compile_defaults(),
                             nofuse = kiln_compile_defaults();
        nofuse.fuse = 0;
        char *text = NULL;
        int fused =
            compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &all, &text);
        int unfused =
            compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &nofuse, NULL);
        print_message("MLP 784-600-10 b128 %s step: %d kernels (%d without "
                      "fusion)\n",
                      adam ? "Adam" : "SGD", fused, unfused);
        assert_true(fused < unfused);
        assert_true(fused <= (adam ? 30 : 18));
        /* every [128,600] kernel is a matmul or a fused program */
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save))
            if (strstr(l, " = ") && strstr(l, "f32[128,600]") &&
                !strstr(l, "matmul(") && !strstr(l, "= fused["))
                fail_msg("unfused kernel: %s", l);
        free(text);
        compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &all, &text);
        assert_non_null(strstr(text, "-> relu(_)]"));
        assert_non_null(strstr(text, "-> le(_, 0) -> select(_, 0, "));
        free(text);
        results want, got;
        kiln_compile_options ref = no_passes();
        run_config(&m, &ref, 500 + (uint64_t)adam, &want);
        run_config(&m, &all, 500 + (uint64_t)adam, &got);
        assert_same_results(adam ? "MLP Adam step" : "MLP SGD step", &got,
                            &want);
        results_free(&want);
        results_free(&got);
        kiln_graph_free(m.g);
    }
}

/* ------------------------------------------------------------ memory plan */

/* Checks a plan against an independent liveness computation: two values
   that are live at once never share bytes, unless one took the other's
   buffer in place at its last use. */
static void check_plan(const kiln_unit *p, const kiln_memory_plan *mp)
{
    const kiln_graph *g = p->g;
    int n = g->n_nodes;
    int *first = calloc((size_t)n, sizeof *first),
        *last = calloc((size_t)n, sizeof *last);
    for (int id = 0; id < n; id++) {
        first[id] = last[id] = id;
        for (int k = 0; k < g->nodes[id]->n_in; k++)
            if (last[g->nodes[id]->in[k]->id] < id)
                last[g->nodes[id]->in[k]->id] = id;
    }
    for (int id = 0; id < n; id++)
        if (g->nodes[id]->op == KILN_OP_ASSIGN)
            last[id] = n;
    for (int i = 0; i < p->n_out; i++)
        last[p->outputs[i]->id] = n;
    for (int a = 0; a < n; a++) {
        const kiln_node *x = g->nodes[a];
        size_t xa = mp->offset[a], xb = xa + kiln_shape_numel(x->shape) * 4;
        /* the GEMM of a matmul_acc never writes over a, b or alpha (not
           even where a is c, which it may take over otherwise) */
        for (int k = 1; x->op == KILN_OP_MATMUL_ACC && k < 4; k++) {
            const kiln_node *o = x->in[k];
            if (mp->storage[a] >= 0)
                assert_true(mp->storage[a] != o->id &&
                            mp->storage[a] != mp->storage[o->id]);
            else if (kiln_op_table[o->op].kind != KILN_KIND_LEAF &&
                     mp->storage[o->id] < 0)
                for (int c = a; c >= 0; c = mp->inplace[c])
                    assert_true(c != o->id);
        }
        if (mp->storage[a] >= 0) {
            /* written into a variable: nothing reads the variable later */
            const kiln_node *v = g->nodes[mp->storage[a]];
            assert_int_equal(v->op, KILN_OP_VARIABLE);
            for (int b = a + 1; b < n; b++)
                for (int k = g->nodes[b]->op == KILN_OP_ASSIGN;
                     k < g->nodes[b]->n_in; k++)
                    assert_true(g->nodes[b]->in[k] != v);
            for (int i = 0; i < p->n_out; i++)
                assert_true(p->outputs[i] != v);
            continue;
        }
        if (kiln_op_table[x->op].kind == KILN_KIND_LEAF || xa == xb)
            continue;
        assert_int_equal(xa % 64, 0);
        assert_true(xb <= mp->peak);
        for (int b = a + 1; b < n; b++) {
            const kiln_node *y = g->nodes[b];
            size_t ya = mp->offset[b], yb = ya + kiln_shape_numel(y->shape) * 4;
            if (kiln_op_table[y->op].kind == KILN_KIND_LEAF || ya == yb ||
                mp->storage[b] >= 0)
                continue;
            int overlap_time = first[b] <= last[a] && first[a] <= last[b];
            int overlap_mem = xa < yb && ya < xb;
            int chain = 0; /* b reaches a through in-place links */
            for (int c = b; c >= 0 && !chain; c = mp->inplace[c])
                chain = c == a;
            if (overlap_time && overlap_mem && !chain)
                fail_msg("%%%d and %%%d are live together and share memory", a,
                         b);
            if (mp->inplace[b] == a)
                assert_int_equal(last[a], first[b]); /* at a's last use */
        }
    }
    free(first);
    free(last);
}

static void plan_program(const net *m, int passes, int reuse,
                         kiln_memory_plan *mp, kiln_unit *p)
{
    /* the private graph a compile would plan: the passes over a copy */
    kiln_unit src = {m->g, (kiln_node **)m->out, m->n_out, (kiln_node **)m->in,
                     m->n_in};
    p->g = kiln_graph_new();
    p->n_out = m->n_out;
    p->n_in = m->n_in;
    p->outputs = calloc(MAX_IO, sizeof *p->outputs);
    p->inputs = calloc(MAX_IO, sizeof *p->inputs);
    kiln_compile_options o = kiln_compile_defaults();
    assert_int_equal(kiln_rewrite(&src, p, &o, NULL, NULL, NULL, NULL),
                     KILN_OK);
    char err[256];
    if (passes)
        assert_int_equal(
            kiln_passes_run(p, &o, kiln_cpu_run_reference, err, sizeof err),
            KILN_OK);
    assert_int_equal(kiln_plan_memory(p, reuse, mp), KILN_OK);
}

static void program_free(kiln_unit *p)
{
    kiln_graph_free(p->g);
    free(p->outputs);
    free(p->inputs);
}

static void test_plan_is_valid(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 14);
    for (int rep = 0; rep < 24; rep++) {
        net m = rep % 3 == 0   ? elementwise_net(&r)
                : rep % 3 == 1 ? movement_net(&r)
                               : training_net(&r, rep % 2);
        for (int passes = 0; passes < 2; passes++) {
            kiln_memory_plan mp;
            kiln_unit p;
            plan_program(&m, passes, 1, &mp, &p);
            check_plan(&p, &mp);
            assert_true(mp.peak <= mp.unplanned);
            kiln_memory_plan_free(&mp);
            program_free(&p);
        }
        kiln_graph_free(m.g);
    }
}

/* The MNIST MLP training step (784-600-10, batch 128, SGD through assign):
   planning cuts the buffer memory well below one buffer per value. */
static void test_plan_peak_mlp(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(128, 784));
    kiln_node *y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(128));
    kiln_node *w0 = kiln_variable(g, "W0", KILN_F32, KILN_SHAPE(784, 600),
                                  kiln_init_uniform(-0.05, 0.05));
    kiln_node *b0 =
        kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(600), kiln_init_zeros());
    kiln_node *w1 = kiln_variable(g, "W1", KILN_F32, KILN_SHAPE(600, 10),
                                  kiln_init_uniform(-0.05, 0.05));
    kiln_node *b1 =
        kiln_variable(g, "b1", KILN_F32, KILN_SHAPE(10), kiln_init_zeros());
    kiln_node *h = kiln_relu(g, kiln_affine(g, x, w0, b0));
    kiln_node *loss =
        kiln_softmax_cross_entropy(g, kiln_affine(g, h, w1, b1), y);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    kiln_node *step = kiln_optimizer_build_step(opt, g, loss);
    th_assert_graph_ok(g);
    kiln_node *outs[2] = {loss, step}, *ins[2] = {x, y};
    kiln_compile_options on = kiln_compile_defaults(),
                         off = kiln_compile_defaults();
    off.plan_memory = 0;
    kiln_function *fp = kiln_compile_ex(s, g, outs, 2, ins, 2, &on);
    kiln_function *fu = kiln_compile_ex(s, g, outs, 2, ins, 2, &off);
    assert_non_null(fp);
    assert_non_null(fu);
    size_t planned = kiln_function_memory(fp),
           unplanned = kiln_function_memory(fu);
    print_message(
        "MLP 784-600-10 b128 step: %zu bytes planned, %zu unplanned (%.1f%%), "
        "%d kernels\n",
        planned, unplanned, 100.0 * (double)planned / (double)unplanned,
        kiln_function_num_kernels(fp));
    assert_int_equal(kiln_function_memory_unplanned(fp), unplanned);
    assert_true(planned < unplanned);
    assert_true(planned * 10 <= unplanned * 6); /* the target: <= 60% */
    kiln_optimizer_free(opt);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Outputs that are also intermediate values keep their values when later
   ops could have reused their buffers; two runs give identical bits. */
static void test_outputs_and_repeat_runs(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(9, 11));
    kiln_node *a = kiln_exp(g, kiln_scale(g, x, 0.3f));
    kiln_node *b = kiln_relu(g, kiln_sub(g, a, kiln_scalar(g, 1.0f)));
    kiln_node *c = kiln_tanh(g, b);
    kiln_node *d = kiln_sum(g, kiln_mul(g, c, c), KILN_AXIS(1), 0);
    kiln_node *outs[4] = {a, b, d, a};
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, outs, 4, &x, 1);
    assert_non_null(f);
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_tensor *in = th_rand(&r, KILN_SHAPE(9, 11), -2, 2);
    kiln_tensor *o1[4], *o2[4];
    for (int i = 0; i < 4; i++) {
        o1[i] = kiln_function_new_output(f, i);
        o2[i] = kiln_function_new_output(f, i);
    }
    assert_int_equal(kiln_run(f, &in, o1), KILN_OK);
    assert_int_equal(kiln_run(f, &in, o2), KILN_OK);
    const float *xv = kiln_tensor_f32(in);
    for (int i = 0; i < 99; i++) {
        float av = expf(xv[i] * 0.3f), bv = av - 1.0f > 0 ? av - 1.0f : 0.0f;
        assert_float_equal(kiln_tensor_f32(o1[0])[i], av, 1e-5 * av);
        assert_float_equal(kiln_tensor_f32(o1[1])[i], bv, 1e-5 * av);
        assert_float_equal(kiln_tensor_f32(o1[3])[i], av, 1e-5 * av);
    }
    for (int i = 0; i < 4; i++) {
        assert_memory_equal(kiln_tensor_data(o1[i]), kiln_tensor_data(o2[i]),
                            (size_t)kiln_tensor_numel(o1[i]) * 4);
        kiln_tensor_free(o1[i]);
        kiln_tensor_free(o2[i]);
    }
    kiln_tensor_free(in);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Updates written straight into their variable: a later reader of the new
   value, a later reader of the old value, an output of the variable and two
   assigns of one value all keep their meaning. */
static void test_update_in_variable(void **state)
{
    (void)state;
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(6, 5));
    add_in(&m, x);
    kiln_node *u = kiln_variable(g, "u", KILN_F32, KILN_SHAPE(6, 5),
                                 kiln_init_uniform(-1, 1));
    kiln_node *v = kiln_variable(g, "v", KILN_F32, KILN_SHAPE(6, 5),
                                 kiln_init_uniform(-1, 1));
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(6, 5),
                                 kiln_init_uniform(-1, 1));
    kiln_node *z = kiln_variable(g, "z", KILN_F32, KILN_SHAPE(6, 5),
                                 kiln_init_uniform(-1, 1));
    kiln_node *nu =
        kiln_sub(g, u, kiln_scale(g, x, 0.5f)); /* new u, read later */
    kiln_node *nv = kiln_add(g, v, x);          /* v read after it */
    kiln_node *nw =
        kiln_mul(g, w, kiln_scalar(g, 0.9f)); /* assigned to w and z */
    kiln_node *as[4] = {kiln_assign(g, u, nu), kiln_assign(g, v, nv),
                        kiln_assign(g, w, nw), kiln_assign(g, z, nw)};
    kiln_node *later = kiln_exp(g, kiln_add(g, nu, kiln_tanh(g, v)));
    add_out(&m, kiln_doall(g, as, 4));
    add_out(&m, later);
    add_out(&m, v);
    add_out(&m, nw);
    m.vars[0] = "u";
    m.vars[1] = "v";
    m.vars[2] = "w";
    m.vars[3] = "z";
    m.n_vars = 4;
    m.steps = 2;
    th_assert_graph_ok(g);
    check_all_configs(&m, 400);
    kiln_memory_plan mp;
    kiln_unit p;
    plan_program(&m, 1, 1, &mp, &p);
    check_plan(&p, &mp);
    kiln_memory_plan_free(&mp);
    program_free(&p);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ gemm_acc */

/* Occurrences of s in text. */
static int count_str(const char *text, const char *s)
{
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

/* Number of matmul_acc kernels in a printed function, and how many of them
   write into a variable's storage. */
static int count_acc(const char *text, int *in_variable)
{
    int n = 0;
    *in_variable = 0;
    for (const char *p = strstr(text, "= matmul_acc("); p;
         p = strstr(p + 1, "= matmul_acc(")) {
        const char *l = p;
        while (l > text && l[-1] != '%')
            l--;
        char want[64];
        snprintf(want, sizeof want, "  %%%d: in the storage of variable",
                 atoi(l));
        *in_variable += strstr(text, want) != NULL;
        n++;
    }
    return n;
}

/* The SGD step of the 784-600-10 MLP: both weight updates become one
   matmul_acc each, accumulating straight into the weights, two kernels and
   the [784,600] gradient buffer fewer, and the results stay those of the
   unoptimised graph. */
static void test_gemm_acc_sgd_step(void **state)
{
    (void)state;
    net m = mnist_step(0);
    kiln_compile_options on = kiln_compile_defaults(), off = on;
    off.gemm_acc = 0;
    char *t_on = NULL, *t_off = NULL;
    int k_on = compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &on, &t_on);
    int k_off = compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &off, &t_off);
    int in_var = 0;
    assert_int_equal(count_acc(t_on, &in_var), 2);
    assert_int_equal(in_var, 2);
    assert_int_equal(count_str(t_off, "matmul_acc"), 0);
    assert_int_equal(k_on, k_off - 2);
    /* the weight gradient is never stored */
    assert_int_equal(count_str(t_off, "bytes f32[784,600]\n"), 3);
    assert_int_equal(count_str(t_off, "variable %2 1881600 bytes"), 2);
    assert_int_equal(count_str(t_on, "bytes f32[784,600]\n"), 2);
    assert_int_equal(count_str(t_on, "variable %2 1881600 bytes"), 2);
    assert_non_null(strstr(t_on, "matmul_acc(%2, %0, "));
    results want, got, base;
    kiln_compile_options ref = no_passes();
    run_config(&m, &ref, 510, &want);
    run_config(&m, &on, 510, &got);
    run_config(&m, &off, 510, &base);
    print_message("MLP 784-600-10 b128 SGD step: %d kernels, %zu bytes of "
                  "buffers (%d, %zu without gemm_acc)\n",
                  k_on, got.memory, k_off, base.memory);
    assert_true(got.memory <= base.memory);
    assert_same_results("MLP SGD step with gemm_acc", &got, &want);
    results_free(&want);
    results_free(&got);
    results_free(&base);
    free(t_on);
    free(t_off);
    kiln_graph_free(m.g);
}

/* Every matched form, each transpose combination, a computed v, and forms
   that must stay: a matmul with another reader, v or s that broadcast, a
   batched product. */
static net acc_patterns_net(kiln_rng *r, int *expect)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    kiln_node *lr = kiln_input(g, "lr", KILN_F32, KILN_SCALAR);
    add_in(&m, lr);
    kiln_node *mm[4];
    kiln_shape out[4];
    for (int c = 0; c < 4; c++) {
        int ta = c & 1, tb = c >> 1;
        int64_t i = rand_dim(r, 0), k = rand_dim(r, 0), j = rand_dim(r, 0);
        char na[8], nb[8];
        snprintf(na, sizeof na, "a%d", c);
        snprintf(nb, sizeof nb, "b%d", c);
        kiln_node *a = kiln_input(g, na, KILN_F32,
                                  ta ? KILN_SHAPE(k, i) : KILN_SHAPE(i, k));
        kiln_node *b = kiln_input(g, nb, KILN_F32,
                                  tb ? KILN_SHAPE(j, k) : KILN_SHAPE(k, j));
        add_in(&m, a);
        add_in(&m, b);
        mm[c] = kiln_matmul(g, a, b, ta, tb);
        out[c] = KILN_SHAPE(i, j);
    }
    /* the four transpose combinations, each read once */
    const char *names[] = {"v0", "v1", "v2", "v3", "v4", "v5", "v6"};
    kiln_node *v[7];
    for (int c = 0; c < 7; c++) {
        static const int shape_of[7] = {0, 1, 2, 3, 0, 1, 0};
        v[c] = kiln_variable(g, names[c], KILN_F32, out[shape_of[c]],
                             kiln_init_uniform(-1, 1));
        m.vars[m.n_vars++] = names[c];
    }
    kiln_node *as[10];
    as[0] = kiln_assign(
        g, v[0], kiln_sub(g, v[0], kiln_mul(g, mm[0], kiln_scalar(g, 0.25f))));
    as[1] = kiln_assign(g, v[1], kiln_sub(g, v[1], kiln_mul(g, lr, mm[1])));
    as[2] = kiln_assign(g, v[2], kiln_add(g, v[2], kiln_mul(g, mm[2], lr)));
    as[3] = kiln_assign(g, v[3], kiln_sub(g, v[3], mm[3]));
    /* the same products again, with the matmul on the left of the add and
       a computed v that dies there (written over in place) */
    kiln_node *a0 = m.in[1], *b0 = m.in[2], *a1 = m.in[3], *b1 = m.in[4];
    as[4] = kiln_assign(
        g, v[4], kiln_add(g, kiln_matmul(g, kiln_tanh(g, a0), b0, 0, 0), v[4]));
    kiln_node *e = kiln_add(g, kiln_exp(g, kiln_scale(g, v[5], 0.5f)),
                            kiln_matmul(g, kiln_sigmoid(g, a1), b1, 1, 0));
    add_out(&m, kiln_relu(g, e));
    *expect = 6;
    /* not rewritten: the product is also an output, or read by a sum; v
       broadcasts; s is not one element; a batched product (operands
       differ, so that cse merges none of them) */
    kiln_node *shared = kiln_matmul(g, kiln_abs(g, a0), b0, 0, 0);
    add_out(&m, shared);
    as[5] = kiln_assign(
        g, v[6], kiln_sub(g, v[6], kiln_mul(g, shared, kiln_scalar(g, 0.5f))));
    kiln_node *read = kiln_matmul(g, kiln_neg(g, a1), b1, 1, 0);
    add_out(&m, kiln_sum(g, read, KILN_ALL_AXES, 0));
    kiln_node *row = kiln_sum(g, v[5], KILN_AXIS(0), 0);
    add_out(
        &m,
        kiln_add(g, kiln_sub(g, row, kiln_matmul(g, kiln_cos(g, a1), b1, 1, 0)),
                 read));
    kiln_node *p = kiln_input(g, "p", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *q = kiln_input(g, "q", KILN_F32, KILN_SHAPE(4, 5));
    add_in(&m, p);
    add_in(&m, q);
    add_out(&m, kiln_sub(g, kiln_fill(g, KILN_SHAPE(3, 5), 0.5f),
                         kiln_mul(g, kiln_matmul(g, p, q, 0, 0),
                                  kiln_sum(g, q, KILN_AXIS(0), 1))));
    kiln_node *a3 = kiln_reshape(g, a0, KILN_SHAPE(1, out[0].d[0], -1));
    add_out(&m, kiln_sub(g,
                         kiln_reshape(g, v[0],
                                      KILN_SHAPE(1, out[0].d[0], out[0].d[1])),
                         kiln_matmul(g, a3, b0, 0, 0)));
    as[6] = kiln_assign(g, v[5], kiln_scale(g, v[5], 0.5f));
    /* v is also the left operand (a variable, then a computed value): the
       GEMM must not write over it, so neither goes in place */
    kiln_node *t = kiln_input(g, "t", KILN_F32, KILN_SHAPE(4, 4));
    add_in(&m, t);
    kiln_node *sq = kiln_variable(g, "sq", KILN_F32, KILN_SHAPE(4, 4),
                                  kiln_init_uniform(-1, 1));
    m.vars[m.n_vars++] = "sq";
    as[7] = kiln_assign(g, sq,
                        kiln_sub(g, sq,
                                 kiln_mul(g, kiln_matmul(g, sq, t, 0, 0),
                                          kiln_scalar(g, 0.05f))));
    kiln_node *et = kiln_exp(g, kiln_scale(g, t, 0.25f));
    add_out(&m, kiln_add(g, et, kiln_matmul(g, t, et, 1, 0)));
    *expect += 2;
    /* momentum-like updates whose c does not read v: into v's storage
       unless v is read afterwards */
    kiln_node *ma = m.in[7], *mb = m.in[8];
    kiln_node *mv =
        kiln_variable(g, "mv", KILN_F32, out[3], kiln_init_uniform(-1, 1));
    kiln_node *mw =
        kiln_variable(g, "mw", KILN_F32, out[3], kiln_init_uniform(-1, 1));
    m.vars[m.n_vars++] = "mv";
    m.vars[m.n_vars++] = "mw";
    as[8] = kiln_assign(g, mv,
                        kiln_add(g, kiln_scale(g, mv, 0.9f),
                                 kiln_matmul(g, kiln_relu(g, ma), mb, 1, 1)));
    as[9] = kiln_assign(g, mw,
                        kiln_add(g, kiln_scale(g, mw, 0.9f),
                                 kiln_matmul(g, kiln_abs(g, ma), mb, 1, 1)));
    add_out(&m, kiln_tanh(g, mv));
    *expect += 2;
    add_out(&m, kiln_doall(g, as, 10));
    m.steps = 3;
    th_assert_graph_ok(g);
    return m;
}

static void test_gemm_acc_patterns(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 16);
    for (int rep = 0; rep < 10; rep++) {
        int expect = 0, in_var = 0;
        net m = acc_patterns_net(&r, &expect);
        char *text = NULL;
        kiln_compile_options o = kiln_compile_defaults();
        compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &o, &text);
        if (count_acc(text, &in_var) != expect)
            fail_msg("%d matmul_acc kernels, want %d:\n%s",
                     count_acc(text, &in_var), expect, text);
        /* v1-v4 and mw; v0 and mv are read afterwards, sq is an operand,
           e and et are computed */
        if (in_var != 5)
            fail_msg("%d in variables, want 5:\n%s", in_var, text);
        free(text);
        check_all_configs(&m, 600 + (uint64_t)rep);
        kiln_memory_plan mp;
        kiln_unit p;
        plan_program(&m, 1, 1, &mp, &p);
        check_plan(&p, &mp);
        kiln_memory_plan_free(&mp);
        program_free(&p);
        kiln_graph_free(m.g);
    }
}

/* Training with kiln_optimizer_build_step(SGD) on odd shapes, with weights
   used as x W, h W^T, W x and W^T x^T, so that the weight gradients take
   every transpose combination: plain SGD, momentum (v = buf * mu, written
   into the momentum buffer), Nesterov (the gradient is read twice: no
   rewrite) and weight decay; three steps against the unoptimised graph. */
static net acc_training_net(kiln_rng *r, int variant, int *expect)
{
    net m = {0};
    kiln_graph *g = m.g = kiln_graph_new();
    int64_t b = rand_dim(r, 0), i = rand_dim(r, 0), h = rand_dim(r, 0),
            p = rand_dim(r, 0);
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(b, i));
    kiln_node *xt = kiln_input(g, "xt", KILN_F32, KILN_SHAPE(i, b));
    kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(b));
    add_in(&m, x);
    add_in(&m, xt);
    add_in(&m, y);
    kiln_init u = kiln_init_uniform(-0.5, 0.5);
    kiln_node *w0 = kiln_variable(g, "w0", KILN_F32, KILN_SHAPE(i, h), u);
    kiln_node *b0 = kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(h), u);
    kiln_node *w1 = kiln_variable(g, "w1", KILN_F32, KILN_SHAPE(4, h), u);
    kiln_node *w2 = kiln_variable(g, "w2", KILN_F32, KILN_SHAPE(p, i), u);
    kiln_node *w3 = kiln_variable(g, "w3", KILN_F32, KILN_SHAPE(i, p), u);
    kiln_node *h0 = kiln_relu(g, kiln_affine(g, x, w0, b0));    /* dW (1,0) */
    kiln_node *logits = kiln_matmul(g, h0, w1, 0, 1);           /* (1,0) */
    kiln_node *z2 = kiln_tanh(g, kiln_matmul(g, w2, xt, 0, 0)); /* (0,1) */
    kiln_node *z3 = kiln_tanh(g, kiln_matmul(g, w3, x, 1, 1));  /* (1,1) */
    kiln_node *loss =
        kiln_add(g, kiln_softmax_cross_entropy(g, logits, y),
                 kiln_mean(g, kiln_mul(g, z2, z3), KILN_ALL_AXES, 0));
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 0.1f;
    oo.momentum = variant >= 1 ? 0.9f : 0.0f;
    oo.nesterov = variant == 2;
    oo.weight_decay = variant == 3 ? 0.01f : 0.0f;
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    add_out(&m, loss);
    add_out(&m, kiln_optimizer_build_step(o, g, loss));
    kiln_optimizer_free(o);
    kiln_session_free(s);
    /* one per weight (not the bias, whose gradient is a sum), none with
       Nesterov; with weight decay the product goes into mul(w, wd) */
    *expect = variant == 2 ? 0 : 4;
    const char *vars[] = {"w0", "b0", "w1", "w2", "w3"};
    for (int k = 0; k < 5; k++)
        m.vars[m.n_vars++] = vars[k];
    m.steps = 3;
    th_assert_graph_ok(g);
    return m;
}

static void test_gemm_acc_training(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 17);
    for (int rep = 0; rep < 8; rep++) {
        int expect = 0, in_var = 0;
        net m = acc_training_net(&r, rep % 4, &expect);
        char *text = NULL;
        kiln_compile_options o = kiln_compile_defaults();
        compile_count(m.g, m.out, m.n_out, m.in, m.n_in, &o, &text);
        if (count_acc(text, &in_var) != expect)
            fail_msg("variant %d: %d matmul_acc kernels, want %d:\n%s", rep % 4,
                     count_acc(text, &in_var), expect, text);
        /* plain SGD into the weights, momentum into the buffers; with
           weight decay v is mul(w, wd), which dies there */
        assert_int_equal(in_var, rep % 4 == 3 ? 0 : expect);
        free(text);
        check_all_configs(&m, 700 + (uint64_t)rep);
        kiln_graph_free(m.g);
    }
}

/* ------------------------------------------------------------ errors, dump */

static void test_bad_options(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2));
    kiln_node *y = kiln_exp(g, x);
    kiln_session *s = kiln_session_new(NULL);
    kiln_compile_options o = kiln_compile_defaults();
    o.pipeline = "dce,cse,unroll";
    assert_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    assert_non_null(strstr(kiln_session_error(s), "unknown pass 'unroll'"));
    o.pipeline = "dce,,cse";
    assert_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    o = kiln_compile_defaults();
    o.fold_max_elements = -1;
    assert_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    assert_non_null(strstr(kiln_session_error(s), "fold_max_elements"));
    /* a pipeline of one pass, run twice, and the empty pipeline work */
    o = kiln_compile_defaults();
    o.pipeline = "fuse,fuse";
    assert_non_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    o.pipeline = "";
    assert_non_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    assert_null(kiln_compile_ex(NULL, g, &y, 1, &x, 1, &o));
    assert_int_equal(kiln_function_memory(NULL), 0);
    assert_int_equal(kiln_function_num_kernels(NULL), -1);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* The validator catches what a broken pass would produce. */
static void test_validator(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *bad =
        kiln_node_make(g, KILN_OP_EXP, KILN_F32, KILN_SHAPE(3, 2), &x, 1);
    kiln_unit p = {g, &bad, 1, &x, 1};
    char err[256];
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_ERR_STATE);
    assert_non_null(
        strstr(err, "%1 = exp: shape [3,2], its inputs give [2,3]"));
    bad->shape = KILN_SHAPE(2, 3);
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_OK);
    kiln_node *in2[2] = {x, x};
    kiln_node *mm =
        kiln_node_make(g, KILN_OP_MATMUL, KILN_F32, KILN_SHAPE(2, 2), in2, 2);
    p.outputs = &mm;
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_ERR_STATE);
    assert_non_null(strstr(err, "matmul"));
    p.inputs = &bad; /* not an input node */
    mm->shape = KILN_SHAPE(2, 2);
    mm->at.trans_b = 1;
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_ERR_STATE);
    assert_non_null(strstr(err, "input 0"));
    kiln_graph_free(g);
}

static void test_dump(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4));
    kiln_node *y =
        kiln_relu(g, kiln_add(g, kiln_mul(g, x, kiln_scalar(g, 1.0f)), x));
    kiln_session *s = kiln_session_new(NULL);
    kiln_compile_options o = kiln_compile_defaults();
    char *text = NULL;
    size_t len;
    o.dump = open_memstream(&text, &len);
    assert_non_null(kiln_compile_ex(s, g, &y, 1, &x, 1, &o));
    fclose(o.dump);
    assert_non_null(strstr(text, "--- IR before the passes"));
    assert_non_null(strstr(text, "--- IR after simplify"));
    assert_non_null(strstr(text, "--- IR after fuse"));
    assert_non_null(strstr(text, "= mul(%0, %1) f32[4]"));
    assert_non_null(strstr(text, "= fused[add(%0, %0) -> relu(_)](%0) f32[4]"));
    free(text);
    kiln_session_free(s);
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_elementwise),
        cmocka_unit_test(test_random_movement),
        cmocka_unit_test(test_random_training),
        cmocka_unit_test(test_random_reductions),
        cmocka_unit_test(test_identities_disappear),
        cmocka_unit_test(test_cse_and_fold),
        cmocka_unit_test(test_transpose_into_matmul),
        cmocka_unit_test(test_sum_of_broadcast),
        cmocka_unit_test(test_fusion),
        cmocka_unit_test(test_reduction_fusion),
        cmocka_unit_test(test_reduction_threads),
        cmocka_unit_test(test_recompute_shared),
        cmocka_unit_test(test_mlp_step_fusion),
        cmocka_unit_test(test_gemm_acc_sgd_step),
        cmocka_unit_test(test_gemm_acc_patterns),
        cmocka_unit_test(test_gemm_acc_training),
        cmocka_unit_test(test_plan_is_valid),
        cmocka_unit_test(test_plan_peak_mlp),
        cmocka_unit_test(test_outputs_and_repeat_runs),
        cmocka_unit_test(test_update_in_variable),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_validator),
        cmocka_unit_test(test_dump),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
