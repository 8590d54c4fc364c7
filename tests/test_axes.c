/* The named-axes front end: dual-offset dot against a plain matmul on
   permuted layouts, alignment of element-wise operands by axis identity,
   batch axes held out of default reductions, variables(), computations
   sharing a session, printing, and the error paths. */
#include "test_helpers.h"

static kiln_tensor *transposed(const kiln_tensor *t)
{
    kiln_shape s = kiln_tensor_shape(t);
    kiln_tensor *r = kiln_tensor_new(KILN_F32, KILN_SHAPE(s.d[1], s.d[0]));
    for (int64_t i = 0; i < s.d[0]; i++)
        for (int64_t j = 0; j < s.d[1]; j++)
            kiln_tensor_f32(r)[j * s.d[0] + i] =
                kiln_tensor_f32(t)[i * s.d[1] + j];
    return r;
}

static void matmul_ref(const float *a, const float *b, double *c, int m, int k,
                       int n)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++)
                acc += (double)a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
}

/* Runs one result of g fed by the placeholders. */
static kiln_tensor *run_ax(kiln_session *s, kiln_graph *g, kiln_ax *y,
                           kiln_ax *const *ph, kiln_tensor *const *feeds, int n)
{
    th_assert_graph_ok(g);
    kiln_computation *c = kiln_computation_new(s, g, &y, 1, ph, n);
    assert_non_null(c);
    if (kiln_computation_call(c, feeds) != KILN_OK)
        fail_msg("call: %s", kiln_session_error(s));
    const kiln_tensor *r = kiln_computation_result(c, 0);
    kiln_tensor *copy = kiln_tensor_new(KILN_F32, kiln_tensor_shape(r));
    memcpy(kiln_tensor_f32(copy), kiln_tensor_f32(r),
           (size_t)kiln_tensor_numel(r) * sizeof(float));
    kiln_computation_free(c);
    return copy;
}

static void test_dot_permuted_layouts(void **state)
{
    (void)state;
    enum { M = 5, K = 7, N = 3 };
    kiln_axis am = kiln_axis_make("M", M, 0), ak = kiln_axis_make("K", K, 0),
              an = kiln_axis_make("N", N, 1);
    kiln_axis ak1 = kiln_axis_dual(ak, -1);
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_tensor *A = th_rand(&r, KILN_SHAPE(M, K), -1, 1);
    kiln_tensor *B = th_rand(&r, KILN_SHAPE(K, N), -1, 1);
    kiln_tensor *At = transposed(A), *Bt = transposed(B);
    double want[M * N];
    matmul_ref(kiln_tensor_f32(A), kiln_tensor_f32(B), want, M, K, N);
    /* every combination of the two layouts of each operand */
    for (int la = 0; la < 2; la++)
        for (int lb = 0; lb < 2; lb++) {
            kiln_graph *g = kiln_graph_new();
            kiln_session *s = kiln_session_new(NULL);
            kiln_ax *a = kiln_ax_placeholder(
                g, "a", la ? KILN_AXES(ak1, am) : KILN_AXES(am, ak1));
            kiln_ax *b = kiln_ax_placeholder(
                g, "b", lb ? KILN_AXES(an, ak) : KILN_AXES(ak, an));
            kiln_ax *y = kiln_ax_dot(g, a, b);
            kiln_axes ya = kiln_ax_axes(y);
            assert_int_equal(ya.n, 2);
            assert_true(kiln_axis_same(ya.a[0], am) &&
                        kiln_axis_same(ya.a[1], an));
            kiln_ax *ph[2] = {a, b};
            kiln_tensor *feeds[2] = {la ? At : A, lb ? Bt : B};
            kiln_tensor *out = run_ax(s, g, y, ph, feeds, 2);
            th_assert_close("dot", kiln_tensor_f32(out), want, M * N, 1e-5,
                            1e-5);
            kiln_tensor_free(out);
            kiln_session_free(s);
            kiln_graph_free(g);
        }
    kiln_tensor_free(A);
    kiln_tensor_free(B);
    kiln_tensor_free(At);
    kiln_tensor_free(Bt);
}

/* Two contracted axes (W x H, as in logistic regression part 2) and a
   shared axis that becomes a batch of products. */
static void test_dot_multi_axis_and_shared(void **state)
{
    (void)state;
    enum { W = 3, H = 2, N = 4, B = 2 };
    kiln_axis aw = kiln_axis_make("W", W, 0), ah = kiln_axis_make("H", H, 0),
              an = kiln_axis_make("N", N, 1), ab = kiln_axis_make("B", B, 0);
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_tensor *w =
        th_rand(&r, KILN_SHAPE(H, W), -1, 1); /* stored (H-1, W-1) */
    kiln_tensor *x = th_rand(&r, KILN_SHAPE(W, H, N), -1, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *pw = kiln_ax_placeholder(
        g, "w", KILN_AXES(kiln_axis_dual(ah, -1), kiln_axis_dual(aw, -1)));
    kiln_ax *px = kiln_ax_placeholder(g, "x", KILN_AXES(aw, ah, an));
    kiln_ax *ph[2] = {pw, px};
    kiln_tensor *feeds[2] = {w, x};
    kiln_tensor *out = run_ax(s, g, kiln_ax_dot(g, pw, px), ph, feeds, 2);
    double want[N];
    for (int n = 0; n < N; n++) {
        want[n] = 0;
        for (int i = 0; i < W; i++)
            for (int j = 0; j < H; j++)
                want[n] += kiln_tensor_f32(w)[j * W + i] *
                           kiln_tensor_f32(x)[(i * H + j) * N + n];
    }
    th_assert_close("dot W x H", kiln_tensor_f32(out), want, N, 1e-5, 1e-5);
    kiln_tensor_free(out);

    /* shared axis B: per-b matrix-vector products */
    kiln_tensor *m = th_rand(&r, KILN_SHAPE(B, N, W), -1, 1);
    kiln_tensor *v = th_rand(&r, KILN_SHAPE(W, B), -1, 1);
    kiln_ax *pm =
        kiln_ax_placeholder(g, "m", KILN_AXES(ab, an, kiln_axis_dual(aw, -1)));
    kiln_ax *pv = kiln_ax_placeholder(g, "v", KILN_AXES(aw, ab));
    kiln_ax *y = kiln_ax_dot(g, pm, pv);
    kiln_axes ya = kiln_ax_axes(y);
    assert_int_equal(ya.n, 2);
    assert_true(kiln_axis_same(ya.a[0], ab) && kiln_axis_same(ya.a[1], an));
    kiln_ax *ph2[2] = {pm, pv};
    kiln_tensor *feeds2[2] = {m, v};
    out = run_ax(s, g, y, ph2, feeds2, 2);
    double want2[B * N];
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            want2[b * N + n] = 0;
            for (int i = 0; i < W; i++)
                want2[b * N + n] += kiln_tensor_f32(m)[(b * N + n) * W + i] *
                                    kiln_tensor_f32(v)[i * B + b];
        }
    th_assert_close("dot shared", kiln_tensor_f32(out), want2, B * N, 1e-5,
                    1e-5);
    kiln_tensor_free(out);
    kiln_tensor_free(m);
    kiln_tensor_free(v);
    kiln_tensor_free(w);
    kiln_tensor_free(x);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_elementwise_aligns_by_identity(void **state)
{
    (void)state;
    enum { C = 3, N = 4 };
    kiln_axis ac = kiln_axis_make("C", C, 0), an = kiln_axis_make("N", N, 1);
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    kiln_tensor *a = th_rand(&r, KILN_SHAPE(C, N), -1, 1);
    kiln_tensor *b = th_rand(&r, KILN_SHAPE(N, C), -1, 1);
    kiln_tensor *c = th_rand(&r, KILN_SHAPE(C), -1, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *pa = kiln_ax_placeholder(g, "a", KILN_AXES(ac, an));
    kiln_ax *pb = kiln_ax_placeholder(g, "b", KILN_AXES(an, ac));
    kiln_ax *pc = kiln_ax_placeholder(g, "c", KILN_AXES(ac));
    kiln_ax *y = kiln_ax_add(g, kiln_ax_sub(g, pa, pb),
                             kiln_ax_mul(g, pc, kiln_ax_scalar(g, 2)));
    assert_true(kiln_axis_same(kiln_ax_axes(y).a[0], ac));
    kiln_ax *ph[3] = {pa, pb, pc};
    kiln_tensor *feeds[3] = {a, b, c};
    kiln_tensor *out = run_ax(s, g, y, ph, feeds, 3);
    double want[C * N];
    for (int i = 0; i < C; i++)
        for (int n = 0; n < N; n++)
            want[i * N + n] = kiln_tensor_f32(a)[i * N + n] -
                              kiln_tensor_f32(b)[n * C + i] +
                              2 * kiln_tensor_f32(c)[i];
    th_assert_close("align", kiln_tensor_f32(out), want, C * N, 1e-6, 1e-6);
    kiln_tensor_free(out);
    kiln_tensor_free(a);
    kiln_tensor_free(b);
    kiln_tensor_free(c);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_batch_axes_held_out(void **state)
{
    (void)state;
    enum { C = 3, N = 5 };
    kiln_axis ac = kiln_axis_make("C", C, 0), an = kiln_axis_make("N", N, 1);
    kiln_rng r;
    kiln_rng_seed(&r, 9);
    kiln_tensor *x = th_rand(&r, KILN_SHAPE(N, C), -1, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *px = kiln_ax_placeholder(g, "x", KILN_AXES(an, ac));
    kiln_ax *sum = kiln_ax_sum(g, px, NULL);
    assert_int_equal(kiln_ax_axes(sum).n, 1);
    assert_true(kiln_axis_same(kiln_ax_axes(sum).a[0], an));
    kiln_axes none = KILN_NO_AXES, only_c = KILN_AXES(ac);
    kiln_ax *total = kiln_ax_sum(g, px, &none);
    kiln_ax *over_n = kiln_ax_mean(g, px, &only_c);
    kiln_ax *ph[1] = {px};
    double want_sum[N], want_total = 0, want_mean[C] = {0};
    for (int n = 0; n < N; n++) {
        want_sum[n] = 0;
        for (int c = 0; c < C; c++) {
            float v = kiln_tensor_f32(x)[n * C + c];
            want_sum[n] += v;
            want_total += v;
            want_mean[c] += v / N;
        }
    }
    kiln_tensor *o1 = run_ax(s, g, sum, ph, &x, 1);
    kiln_tensor *o2 = run_ax(s, g, total, ph, &x, 1);
    kiln_tensor *o3 = run_ax(s, g, over_n, ph, &x, 1);
    th_assert_close("default sum keeps N", kiln_tensor_f32(o1), want_sum, N,
                    1e-5, 1e-5);
    th_assert_close("sum to ()", kiln_tensor_f32(o2), &want_total, 1, 1e-5,
                    1e-5);
    th_assert_close("mean to (C)", kiln_tensor_f32(o3), want_mean, C, 1e-5,
                    1e-5);
    kiln_ax *bs = kiln_ax_batch_size(g, px), *ts = kiln_ax_tensor_size(g, px);
    kiln_tensor *o4 = run_ax(s, g, bs, NULL, NULL, 0);
    kiln_tensor *o5 = run_ax(s, g, ts, NULL, NULL, 0);
    assert_float_equal(kiln_tensor_f32(o4)[0], N, 0);
    assert_float_equal(kiln_tensor_f32(o5)[0], N * C, 0);
    kiln_tensor_free(o1);
    kiln_tensor_free(o2);
    kiln_tensor_free(o3);
    kiln_tensor_free(o4);
    kiln_tensor_free(o5);
    kiln_tensor_free(x);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* x + 1 as a computation called five times, printed as compiled code. */
static void test_computation_x_plus_one(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_NO_AXES);
    kiln_ax *y = kiln_ax_add(g, x, kiln_ax_scalar(g, 1));
    kiln_computation *plus_one = kiln_computation_new(s, g, &y, 1, &x, 1);
    assert_null(kiln_computation_result(plus_one, 0));
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    for (int i = 0; i < 5; i++) {
        kiln_tensor_f32(in)[0] = (float)i;
        assert_int_equal(kiln_computation_call(plus_one, &in), KILN_OK);
        assert_float_equal(kiln_computation_scalar(plus_one, 0), i + 1, 0);
    }
    kiln_graph_free(g); /* compiled at the first call: the graph may go */
    char buf[4096] = {0};
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(kiln_computation_print(plus_one, f), KILN_OK);
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    assert_non_null(strstr(buf, "computation(x()) -> add()"));
    assert_non_null(strstr(buf, "add(%0, %1)"));
    kiln_tensor_free(in);
    kiln_computation_free(plus_one);
    kiln_session_free(s);
}

/* variables() in order of use; deriv and assign; two computations on one
   session see the same variables. */
static void test_variables_deriv_assign_shared(void **state)
{
    (void)state;
    kiln_axis ac = kiln_axis_make("C", 2, 0), an = kiln_axis_make("N", 3, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_AXES(ac, an));
    kiln_ax *w = kiln_ax_variable(g, "w", KILN_AXES(kiln_axis_dual(ac, -1)),
                                  kiln_init_values(((float[]){1, 2})));
    kiln_ax *b = kiln_ax_variable(g, "b", KILN_NO_AXES, kiln_init_value(0.5));
    kiln_axes none = KILN_NO_AXES;
    kiln_ax *L = kiln_ax_sum(g, kiln_ax_add(g, kiln_ax_dot(g, w, x), b), &none);
    kiln_ax *vars[4];
    assert_int_equal(kiln_ax_variables(L, vars, 4), 2);
    assert_string_equal(kiln_node_name(kiln_ax_node(vars[0])), "w");
    assert_string_equal(kiln_node_name(kiln_ax_node(vars[1])), "b");
    assert_int_equal(kiln_ax_variables(L, vars, 1), 2);
    /* dL/dw = sum over N of x, dL/db = N */
    kiln_ax *upd[2];
    for (int i = 0; i < 2; i++)
        upd[i] = kiln_ax_assign(
            g, vars[i], kiln_ax_sub(g, vars[i], kiln_ax_deriv(g, L, vars[i])));
    kiln_ax *step = kiln_ax_doall(g, upd, 2);
    th_assert_graph_ok(g);
    kiln_ax *r1[2] = {L, step};
    kiln_computation *train = kiln_computation_new(s, g, r1, 2, &x, 1);
    kiln_computation *eval = kiln_computation_new(s, g, &L, 1, &x, 1);
    kiln_tensor *xt =
        kiln_tensor_from_f32(KILN_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    assert_int_equal(kiln_computation_call(eval, &xt), KILN_OK);
    float l0 = kiln_computation_scalar(eval, 0); /* 6 + 2*15 + 3*0.5 */
    assert_float_equal(l0, 37.5f, 1e-5);
    assert_int_equal(kiln_computation_call(train, &xt), KILN_OK);
    assert_float_equal(kiln_computation_scalar(train, 0), l0, 1e-5);
    assert_int_equal(kiln_computation_call(eval, &xt), KILN_OK);
    /* w = (1-6, 2-15), b = 0.5-3 -> -5*6 - 13*15 - 3*2.5 */
    assert_float_equal(kiln_computation_scalar(eval, 0), -30 - 195 - 7.5f,
                       1e-4);
    kiln_tensor_free(xt);
    kiln_computation_free(train);
    kiln_computation_free(eval);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Binary cross-entropy through a sigmoid: value and gradient y_hat - y
   also where the sigmoid saturates. */
static void test_cross_entropy_binary(void **state)
{
    (void)state;
    kiln_axis an = kiln_axis_make("N", 3, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *z = kiln_ax_variable(g, "z", KILN_AXES(an),
                                  kiln_init_values(((float[]){0, 2, -200})));
    kiln_ax *y = kiln_ax_placeholder(g, "y", KILN_AXES(an));
    kiln_axes none = KILN_NO_AXES;
    kiln_ax *L =
        kiln_ax_cross_entropy_binary(g, kiln_ax_sigmoid(g, z), y, &none);
    kiln_ax *dz = kiln_ax_deriv(g, L, z);
    kiln_tensor *yt = kiln_tensor_from_f32(KILN_SHAPE(3), (float[]){1, 0, 1});
    kiln_tensor *lv = run_ax(s, g, L, &y, &yt, 1);
    kiln_tensor *gv = run_ax(s, g, dz, &y, &yt, 1);
    double s2 = 1 / (1 + exp(-2.0));
    double want_l = log(2.0) - log(1 - s2) + 50; /* safelog clips at e^-50 */
    th_assert_close("loss", kiln_tensor_f32(lv), &want_l, 1, 1e-5, 1e-5);
    double want_g[3] = {0.5 - 1, s2, 0 - 1};
    th_assert_close("grad", kiln_tensor_f32(gv), want_g, 3, 1e-5, 1e-6);
    kiln_tensor_free(lv);
    kiln_tensor_free(gv);
    kiln_tensor_free(yt);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_errors(void **state)
{
    (void)state;
    kiln_axis a3 = kiln_axis_make("A", 3, 0), a4 = kiln_axis_make("A", 4, 0);
    kiln_axis bad = kiln_axis_make("", 2, 0);
    assert_int_equal(bad.length, -1);

    kiln_graph *g = kiln_graph_new();
    kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_AXES(a3));
    kiln_ax *w = kiln_ax_placeholder(g, "w", KILN_AXES(kiln_axis_dual(a4, -1)));
    kiln_ax *y = kiln_ax_dot(g, w, x);
    assert_non_null(y);
    assert_string_equal(kiln_node_op_name(kiln_ax_node(y)), "error");
    th_expect_graph_error(g, "kiln_ax_dot");
    th_expect_graph_error(g, "length 4, its match 3");
    /* later builders return poisoned tensors cheaply */
    assert_non_null(kiln_ax_add(g, y, x));
    assert_int_equal(kiln_ax_variables(y, NULL, 0), 0);
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_ax_placeholder(g, "p", KILN_AXES(bad));
    th_expect_graph_error(g, "invalid");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_ax_placeholder(g, "p", KILN_AXES(a3, a3));
    th_expect_graph_error(g, "appears twice");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_ax_add(g, kiln_ax_placeholder(g, "p", KILN_AXES(a3)),
                kiln_ax_placeholder(g, "q", KILN_AXES(a4)));
    th_expect_graph_error(g, "has length 3");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_ax *v = kiln_ax_variable(g, "v", KILN_AXES(a3), kiln_init_zeros());
    kiln_ax_assign(g, v, kiln_ax_scalar(g, 1));
    th_expect_graph_error(g, "kiln_ax_assign");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_axes other = KILN_AXES(a4);
    kiln_ax_sum(g, kiln_ax_placeholder(g, "p", KILN_AXES(a3)), &other);
    th_expect_graph_error(g, "out_axes");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_ax_sigmoid(g, NULL);
    th_expect_graph_error(g, "operand is NULL");
    kiln_graph_free(g);

    assert_null(kiln_computation_new(NULL, NULL, NULL, 0, NULL, 0));
    assert_int_equal(kiln_computation_call(NULL, NULL), KILN_ERR_ARG);
}

/* The unary ops, div, apply, wrap, named and the axes string, against
   values computed here: y = -exp(log(x) / 2) on (C, N) aligned with a
   wrapped tanh of the transposed layout (N, C). */
static void test_unary_wrap_named(void **state)
{
    (void)state;
    enum { C = 3, N = 5 };
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_axis ac = kiln_axis_make("C", C, 0), an = kiln_axis_make("N", N, 1);
    kiln_ax *x =
        kiln_ax_named(kiln_ax_placeholder(g, "x", KILN_AXES(ac, an)), "xs");
    assert_string_equal(kiln_node_name(kiln_ax_node(x)), "xs");
    char buf[64];
    assert_string_equal(kiln_axes_str(kiln_ax_axes(x), buf, sizeof buf),
                        "(C:3, N:5*)");
    kiln_ax *root =
        kiln_ax_exp(g, kiln_ax_div(g, kiln_ax_log(g, x), kiln_ax_scalar(g, 2)));
    kiln_node *t = kiln_tanh(g, kiln_transpose(g, kiln_ax_node(x)));
    kiln_ax *tw = kiln_ax_wrap(g, t, KILN_AXES(an, ac));
    kiln_ax *y =
        kiln_ax_add(g, kiln_ax_neg(g, root), kiln_ax_apply(g, kiln_relu, tw));
    kiln_axes ya = kiln_ax_axes(y);
    assert_int_equal(ya.n, 2);
    assert_true(kiln_axis_same(ya.a[0], ac) && kiln_axis_same(ya.a[1], an));
    float xv[C * N];
    for (int i = 0; i < C * N; i++)
        xv[i] = 0.1f + 0.2f * (float)i;
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(C, N), xv);
    kiln_tensor *out = run_ax(s, g, y, &x, &xt, 1);
    for (int i = 0; i < C * N; i++) {
        double want = -sqrt(xv[i]) + fmax(0, tanh(xv[i]));
        assert_true(fabs(kiln_tensor_f32(out)[i] - want) < 1e-5);
    }
    /* wrap with lengths that do not match the node's shape */
    kiln_graph *g2 = kiln_graph_new();
    kiln_node *n2 = kiln_fill(g2, KILN_SHAPE(2, 2), 1);
    kiln_ax_wrap(g2, n2, KILN_AXES(ac, an));
    assert_int_not_equal(kiln_graph_status(g2), KILN_OK);
    kiln_graph_free(g2);
    kiln_tensor_free(out);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* A computation and its session may be freed in either order. */
static void test_free_order(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_NO_AXES);
        kiln_ax *y = kiln_ax_add(g, x, kiln_ax_scalar(g, 1));
        kiln_computation *c = kiln_computation_new(s, g, &y, 1, &x, 1);
        kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SCALAR);
        assert_int_equal(kiln_computation_call(c, &in), KILN_OK);
        assert_float_equal(kiln_computation_scalar(c, 0), 1.0f, 0);
        if (order == 0) {
            kiln_session_free(s); /* frees the compiled function */
            kiln_computation_free(c);
        } else {
            kiln_computation_free(c);
            kiln_session_free(s);
        }
        kiln_tensor_free(in);
        kiln_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_order),
        cmocka_unit_test(test_unary_wrap_named),
        cmocka_unit_test(test_dot_permuted_layouts),
        cmocka_unit_test(test_dot_multi_axis_and_shared),
        cmocka_unit_test(test_elementwise_aligns_by_identity),
        cmocka_unit_test(test_batch_axes_held_out),
        cmocka_unit_test(test_computation_x_plus_one),
        cmocka_unit_test(test_variables_deriv_assign_shared),
        cmocka_unit_test(test_cross_entropy_binary),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
