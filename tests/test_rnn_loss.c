/* Cross-entropy with ignore_index, label_smoothing and reductions, and the
   LSTM and GRU cells, against PyTorch (tests/ref/index, written by
   tests/ref/make_index_refs.py): values and the gradients of every input
   and weight, compiled with the fast and the reference kernels and run
   dynamically; finite-difference gradient checks of first and second
   order; the fused path for the default case; errors; a symbolic batch. */
#include "index_ref.h"

#include "graph/graph.h"

#define RTOL 1e-5
#define ATOL 1e-6

static const char *CASES[] = {
    "ce_ignore_mean",
    "ce_ignore_sum",
    "ce_ignore_none",
    "ce_smooth_ignore_mean",
    "ce_smooth_ignore_none",
    "ce_ignore0_smooth_sum",
    "ce_smooth_mean",
    "ce_none",
    "ce_mean",
    "lstm_cell",
    "lstm_cell_nobias",
    "gru_cell",
    "gru_cell_nobias",
};
#define N_CASES (int)(sizeof CASES / sizeof *CASES)

typedef struct built {
    kiln_node *out[2], *wrt[IREF_MAXT], *loss;
    const char *out_name[2];
    int n_out, n_wrt;
} built;

static kiln_node *input_node(kiln_graph *g, iref *r, const char *name)
{
    iref_tensor *t = iref_get(r, name);
    return t ? iref_node(g, t) : NULL;
}

/* The case's op on its inputs (f32 ones as variables, in b->wrt) and the
   loss sum(out * g_out) whose gradients PyTorch gave. */
static built build_case(kiln_graph *g, iref *r)
{
    built b = {.n_out = 1};
    kiln_node *in[8] = {0};
    static const char *const names[8] = {"x",    "h",    "c",    "w_ih",
                                         "w_hh", "b_ih", "b_hh", "idx"};
    for (int i = 0; i < 8; i++)
        if ((in[i] = input_node(g, r, names[i])) && i < 7)
            b.wrt[b.n_wrt++] = in[i];
    if (!strcmp(r->op, "ce")) {
        b.out[0] =
            kiln_cross_entropy_loss(g, in[0], in[7], (kiln_reduction)r->p[0],
                                    (int)r->p[1], (float)r->p[2]);
        b.out_name[0] = "y";
    } else if (!strcmp(r->op, "lstm_cell")) {
        kiln_lstm_cell(g, in[0], in[1], in[2], in[3], in[4], in[5], in[6],
                       &b.out[0], &b.out[1]);
        b.out_name[0] = "h2";
        b.out_name[1] = "c2";
        b.n_out = 2;
    } else {
        b.out[0] = kiln_gru_cell(g, in[0], in[1], in[3], in[4], in[5], in[6]);
        b.out_name[0] = "h2";
    }
    b.loss = kiln_scalar(g, 0.0f);
    for (int k = 0; k < b.n_out; k++) {
        char gname[8];
        snprintf(gname, sizeof gname, "g%s",
                 b.out_name[k][0] == 'y'   ? "y"
                 : b.out_name[k][0] == 'h' ? "h"
                                           : "c");
        b.loss = kiln_add(g, b.loss,
                          iref_weighted_sum(g, b.out[k], iref_get(r, gname)));
    }
    th_assert_graph_ok(g);
    return b;
}

static void compare(const char *what, const kiln_tensor *got, iref_tensor *want)
{
    th_assert_shape(kiln_tensor_shape(got), want->shape);
    th_assert_close(what, kiln_tensor_f32(got), want->v,
                    kiln_shape_numel(want->shape), RTOL, ATOL);
}

/* Outputs and gradients: compiled (reference > 0: reference kernels, < 0:
   fast) or dynamic (reference 0). */
static void check_case(const char *name, int reference)
{
    iref r;
    iref_load(name, &r);
    kiln_session_options o = {.reference_kernels = reference};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    built b = build_case(g, &r);
    kiln_node *outs[2 + IREF_MAXT];
    const char *want[2 + IREF_MAXT];
    char dnames[IREF_MAXT][12];
    int n = 0;
    for (int k = 0; k < b.n_out; k++) {
        want[n] = b.out_name[k];
        outs[n++] = b.out[k];
    }
    for (int k = 0; k < b.n_wrt; k++) {
        snprintf(dnames[k], sizeof dnames[k], "d%s", kiln_node_name(b.wrt[k]));
        want[n] = dnames[k];
        outs[n++] = kiln_grad(g, b.loss, b.wrt[k]);
    }
    kiln_tensor *got[2 + IREF_MAXT] = {0};
    if (reference) {
        th_run(s, g, outs, n, NULL, NULL, 0, got);
    } else {
        assert_int_equal(kiln_backprop(s, g, b.loss), KILN_OK);
        for (int k = 0; k < n; k++)
            got[k] = k < b.n_out ? kiln_node_value(s, outs[k])
                                 : kiln_node_grad(s, b.wrt[k - b.n_out]);
    }
    for (int k = 0; k < n; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", name, want[k],
                 reference > 0 ? "reference"
                 : reference   ? "fast"
                               : "dynamic");
        assert_non_null(got[k]);
        compare(what, got[k], iref_get(&r, want[k]));
        kiln_tensor_free(got[k]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
    iref_free(&r);
}

static void test_pytorch(void **state)
{
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        check_case(CASES[c], -1);
        check_case(CASES[c], 1);
        check_case(CASES[c], 0);
    }
}

/* Finite differences of every case's loss for every f32 input, then of
   the squared gradient of its first input (grad of grad). */
static void test_gradcheck(void **state)
{
    (void)state;
    for (int c = 0; c < N_CASES; c++)
        for (int order = 1; order <= 2; order++) {
            iref r;
            iref_load(CASES[c], &r);
            kiln_session *s = kiln_session_new(NULL);
            kiln_graph *g = kiln_graph_new();
            built b = build_case(g, &r);
            kiln_node *l = b.loss;
            if (order == 2) {
                kiln_node *d = kiln_grad(g, l, b.wrt[0]);
                l = kiln_sum(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0);
            }
            th_assert_graph_ok(g);
            kiln_gradcheck_result res;
            if (kiln_gradcheck(s, g, l, b.wrt, b.n_wrt, NULL, NULL, 0, 1e-3,
                               1e-2, &res) != KILN_OK)
                fail_msg("%s order %d: %s (max abs err %g)", CASES[c], order,
                         kiln_session_error(s), res.max_abs_err);
            kiln_graph_free(g);
            kiln_session_free(s);
            iref_free(&r);
        }
}

/* Without ignoring or smoothing a mean or sum is the fused op; a label
   neither ignored nor a class fails the run. */
static void test_fused_default_and_bad_label(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(3));
    kiln_node *y =
        kiln_cross_entropy_loss(g, x, l, KILN_REDUCE_MEAN, KILN_IGNORE_NONE, 0);
    assert_int_equal(y->op, KILN_OP_SOFTMAX_CE);
    kiln_node *z = kiln_cross_entropy_loss(g, x, l, KILN_REDUCE_MEAN, -100, 0);
    assert_int_not_equal(z->op, KILN_OP_SOFTMAX_CE);
    kiln_session *s = kiln_session_new(NULL);
    const int32_t lv[3] = {1, -100, 7};
    kiln_tensor *lt = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(3), (void *)lv);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 4));
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_feed(s, l, lt), KILN_OK);
    kiln_graph_clear(g);
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(3));
    kiln_cross_entropy_loss(g, x, l, KILN_REDUCE_NONE, -100, 0);
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_feed(s, l, lt), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_ARG);
    if (!strstr(kiln_session_error(s), "index 7 at [2,0]"))
        fail_msg("error '%s' lacks the label", kiln_session_error(s));
    kiln_tensor_free(lt);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_build_errors(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(3));
    kiln_cross_entropy_loss(g, x, l, KILN_REDUCE_MEAN, -100, 1.5f);
    th_expect_graph_error(
        g, "kiln_cross_entropy_loss: label_smoothing 1.5 is outside [0, 1]");
    kiln_graph_free(g);
    g = kiln_graph_new();
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *h = kiln_input(g, "h", KILN_F32, KILN_SHAPE(3, 5));
    kiln_node *w = kiln_input(g, "w", KILN_F32, KILN_SHAPE(15, 4));
    kiln_node *u = kiln_input(g, "u", KILN_F32, KILN_SHAPE(15, 4));
    kiln_gru_cell(g, x, h, w, u, NULL, NULL);
    th_expect_graph_error(g, "kiln_gru_cell: x [3,4], h [3,5], w_ih [15,4], "
                             "w_hh [15,4]: want x [B,I], h [B,H]");
    kiln_graph_free(g);
    g = kiln_graph_new();
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *ho, *co;
    assert_int_equal(kiln_lstm_cell(g, x, x, NULL, x, x, NULL, NULL, &ho, &co),
                     KILN_ERR_ARG);
    assert_int_equal(ho->op, KILN_OP_ERROR);
    kiln_graph_free(g);
}

/* An LSTM step and a smoothed cross-entropy ignoring class 0 of its
   output with the batch B symbolic: one function at B = 2 and at B = 4
   (the same two rows twice) gives the same mean loss and gradient. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(2, 3), 1u);
    kiln_node *l = kiln_input_sym(g, "l", KILN_I32, KILN_SHAPE(2), 1u);
    /* [B, 4] zeros: the first column of x times a zero row */
    kiln_node *h0 =
        kiln_mul(g, kiln_slice(g, x, (int64_t[]){0, 0}, (int64_t[]){2, 1}),
                 kiln_fill(g, KILN_SHAPE(1, 4), 0.0f));
    kiln_node *w_ih = kiln_variable(g, "w_ih", KILN_F32, KILN_SHAPE(16, 3),
                                    kiln_init_uniform(-1, 1));
    kiln_node *w_hh = kiln_variable(g, "w_hh", KILN_F32, KILN_SHAPE(16, 4),
                                    kiln_init_uniform(-1, 1));
    kiln_node *h, *c;
    assert_int_equal(
        kiln_lstm_cell(g, x, h0, h0, w_ih, w_hh, NULL, NULL, &h, &c), KILN_OK);
    kiln_node *loss =
        kiln_cross_entropy_loss(g, h, l, KILN_REDUCE_MEAN, 0, 0.1f);
    kiln_node *outs[2] = {loss, kiln_grad(g, loss, w_ih)};
    kiln_node *ins[2] = {x, l};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    if (!f)
        fail_msg("%s", kiln_session_error(s));
    const float xv[12] = {0.5f, -1, 0.25f, 1, 0.75f, -0.5f,
                          0.5f, -1, 0.25f, 1, 0.75f, -0.5f};
    const int32_t lv[4] = {3, 0, 3, 0};
    float got[2][1 + 48];
    for (int k = 0; k < 2; k++) {
        int64_t b = k ? 4 : 2;
        kiln_tensor *in[2] = {
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(b, 3), (void *)xv),
            kiln_tensor_wrap(KILN_I32, KILN_SHAPE(b), (void *)lv)};
        kiln_tensor *o[2] = {kiln_tensor_new(KILN_F32, KILN_SCALAR),
                             kiln_tensor_new(KILN_F32, KILN_SHAPE(16, 3))};
        if (kiln_run(f, in, o) != KILN_OK)
            fail_msg("B = %lld: %s", (long long)b, kiln_session_error(s));
        got[k][0] = kiln_tensor_f32(o[0])[0];
        memcpy(got[k] + 1, kiln_tensor_f32(o[1]), 48 * sizeof(float));
        for (int i = 0; i < 2; i++) {
            kiln_tensor_free(in[i]);
            kiln_tensor_free(o[i]);
        }
    }
    assert_true(got[0][0] > 0.1f);
    for (int i = 0; i < 49; i++)
        assert_float_equal(got[0][i], got[1][i], 1e-6);
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fused_default_and_bad_label),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
