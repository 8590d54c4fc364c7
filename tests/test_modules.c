/* The PopXL front end: calls inline subgraphs with their bindings recorded;
   autodiff of a subgraph gives the gradients of differentiating the inlined
   graph; a test program given the training program's weights computes the
   same outputs; streams, in-place updates and the error paths. */
#include "test_helpers.h"

enum { B = 4, IN = 5, OUT = 3 };

/* Linear with gelu, as in the document. */
typedef struct linear {
    int out_features;
    kiln_node *W, *b;
} linear;

static void linear_build(kiln_subgraph *sg, void *module, kiln_node *const *xs,
                         int n)
{
    linear *self = module;
    kiln_graph *g = kiln_subgraph_graph(sg);
    assert_int_equal(n, 1);
    kiln_shape s = kiln_node_shape(xs[0]);
    self->W = kiln_subgraph_input(
        sg, "W", KILN_F32, KILN_SHAPE(s.d[s.ndim - 1], self->out_features));
    self->b =
        kiln_subgraph_input(sg, "b", KILN_F32, KILN_SHAPE(self->out_features));
    kiln_node *y = kiln_add(g, kiln_matmul(g, xs[0], self->W, 0, 0), self->b);
    kiln_subgraph_output(sg, kiln_gelu(g, y));
}

/* The loss used around the layer: sum(y * y) / 2, so dy = y. */
static kiln_node *half_square(kiln_graph *g, kiln_node *y)
{
    return kiln_scale(g, kiln_sum(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0),
                      0.5f);
}

static void test_call_info(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN));
    kiln_node *W =
        kiln_variable(g, "W0", KILN_F32, KILN_SHAPE(IN, OUT), kiln_init_ones());
    kiln_node *b =
        kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(OUT), kiln_init_zeros());
    linear lin = {OUT, NULL, NULL};
    kiln_subgraph *sg = kiln_module_create_graph(linear_build, &lin, &x, 1);
    th_assert_graph_ok(kiln_subgraph_graph(sg));
    assert_int_equal(kiln_subgraph_num_inputs(sg), 3);
    assert_int_equal(kiln_subgraph_num_outputs(sg), 1);
    assert_ptr_equal(kiln_subgraph_input_at(sg, 1), lin.W);
    kiln_binding dict[2] = {{lin.W, W}, {lin.b, b}};
    kiln_call_info *ci = kiln_call_with_info(g, sg, &x, 1, dict, 2);
    th_assert_graph_ok(g);
    assert_ptr_equal(kiln_call_info_graph(ci), sg);
    assert_ptr_equal(
        kiln_call_info_parent_input(ci, kiln_subgraph_input_at(sg, 0)), x);
    assert_ptr_equal(kiln_call_info_parent_input(ci, lin.W), W);
    assert_ptr_equal(kiln_call_info_parent_input(ci, lin.b), b);
    kiln_node *y = kiln_call_info_output(ci, 0);
    th_assert_shape(kiln_node_shape(y), KILN_SHAPE(B, OUT));
    /* x = 1 everywhere, W = 1, b = 0: y = gelu(5) */
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(B, IN)), *yt = NULL;
    for (int i = 0; i < B * IN; i++)
        kiln_tensor_f32(xt)[i] = 1;
    th_run(s, g, &y, 1, &x, &xt, 1, &yt);
    double g5 = 0.5 * 5 * (1 + tanh(0.7978845608028654 * (5 + 0.044715 * 125)));
    for (int i = 0; i < B * OUT; i++)
        assert_float_equal(kiln_tensor_f32(yt)[i], g5, 1e-5);
    /* a second call of the same graph is independent */
    kiln_node *y2;
    assert_int_equal(kiln_call(g, sg, &x, 1, dict, 2, &y2), KILN_OK);
    assert_ptr_not_equal(y2, y);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_session_free(s);
    kiln_subgraph_free(sg);
    kiln_graph_free(g);
}

/* Autodiff of the layer's subgraph, called with the activations of the
   forward call, against kiln_grads on the inlined graph. */
static void check_autodiff(int required_only)
{
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    kiln_tensor *xv = th_rand(&r, KILN_SHAPE(B, IN), -1, 1);
    kiln_tensor *wv = th_rand(&r, KILN_SHAPE(IN, OUT), -1, 1);
    kiln_tensor *bv = th_rand(&r, KILN_SHAPE(OUT), -1, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN));
    kiln_node *W = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(IN, OUT),
                                 kiln_init_values(kiln_tensor_f32(wv)));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(OUT),
                                 kiln_init_values(kiln_tensor_f32(bv)));
    linear lin = {OUT, NULL, NULL};
    kiln_subgraph *sg = kiln_module_create_graph(linear_build, &lin, &x, 1);
    kiln_binding dict[2] = {{lin.W, W}, {lin.b, b}};
    kiln_call_info *fwd = kiln_call_with_info(g, sg, &x, 1, dict, 2);
    kiln_node *y = kiln_call_info_output(fwd, 0);
    kiln_node *loss = half_square(g, y);

    kiln_node *wrt[3] = {x, W, b}, *want[3];
    assert_int_equal(kiln_grads(g, loss, NULL, wrt, 3, want), KILN_OK);

    kiln_node *req[2] = {lin.W, lin.b};
    kiln_grad_info *gi =
        required_only ? kiln_autodiff(sg, req, 2) : kiln_autodiff(sg, NULL, 0);
    kiln_subgraph *bwd = kiln_grad_info_graph(gi);
    th_assert_graph_ok(kiln_subgraph_graph(bwd));
    assert_int_equal(kiln_subgraph_num_outputs(bwd), required_only ? 2 : 3);
    kiln_binding acts[16];
    int n_act = kiln_grad_info_inputs_dict(gi, fwd, acts, 16);
    assert_true(n_act > 0 && n_act <= 16);
    assert_int_equal(kiln_subgraph_num_inputs(bwd), 1 + n_act);
    kiln_call_info *gc =
        kiln_call_with_info(g, bwd, &y, 1, acts, n_act); /* dy = y */
    th_assert_graph_ok(g);
    kiln_node *got[3];
    for (int i = required_only; i < 3; i++)
        got[i] = kiln_grad_info_parent_grad(gi, fwd, gc, wrt[i]);
    th_assert_graph_ok(g);

    kiln_session *s = kiln_session_new(NULL);
    kiln_node *outs[6];
    int n = 0;
    for (int i = required_only; i < 3; i++) {
        outs[n++] = want[i];
        outs[n++] = got[i];
    }
    kiln_tensor *res[6] = {0};
    th_run(s, g, outs, n, &x, &xv, 1, res);
    for (int i = 0; i < n; i += 2) {
        int64_t k = kiln_tensor_numel(res[i]);
        th_assert_close_f("autodiff vs inlined", kiln_tensor_f32(res[i + 1]),
                          kiln_tensor_f32(res[i]), k, 1e-5, 1e-6);
    }
    for (int i = 0; i < n; i++)
        kiln_tensor_free(res[i]);
    if (required_only) {
        kiln_node *bad = kiln_grad_info_parent_grad(gi, fwd, gc, x);
        assert_string_equal(kiln_node_op_name(bad), "error");
        assert_non_null(strstr(kiln_graph_error(g), "was required"));
    }
    kiln_tensor_free(xv);
    kiln_tensor_free(wv);
    kiln_tensor_free(bv);
    kiln_grad_info_free(gi);
    kiln_subgraph_free(sg);
    kiln_session_free(s);
    kiln_graph_free(g);
}

static void test_autodiff_matches_inlined(void **state)
{
    (void)state;
    check_autodiff(0);
}

static void test_autodiff_grads_required(void **state)
{
    (void)state;
    check_autodiff(1);
}

/* The gradient graph takes activations instead of recomputing: it has no
   tanh of its own (gelu's tanh comes in as an input). */
static void test_autodiff_uses_activations(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN));
    linear lin = {OUT, NULL, NULL};
    kiln_subgraph *sg = kiln_module_create_graph(linear_build, &lin, &x, 1);
    kiln_grad_info *gi = kiln_autodiff(sg, NULL, 0);
    kiln_graph *bg = kiln_subgraph_graph(kiln_grad_info_graph(gi));
    th_assert_graph_ok(bg);
    char buf[8192] = {0};
    FILE *f = tmpfile();
    kiln_graph_print(bg, f);
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    assert_null(strstr(buf, "= tanh("));
    assert_null(strstr(buf, "= matmul(%1, %2)"));
    kiln_grad_info_free(gi);
    kiln_subgraph_free(sg);
    kiln_graph_free(g);
}

/* A subgraph with two outputs: gradients seeded by one delta per output. */
static void test_autodiff_two_outputs(void **state)
{
    (void)state;
    kiln_subgraph *sg = kiln_subgraph_new("two");
    kiln_graph *sgg = kiln_subgraph_graph(sg);
    kiln_node *a = kiln_subgraph_input(sg, "a", KILN_F32, KILN_SHAPE(3));
    kiln_subgraph_output(sg, kiln_mul(sgg, a, a));
    kiln_subgraph_output(sg, kiln_scale(sgg, a, 3));
    kiln_grad_info *gi = kiln_autodiff(sg, NULL, 0);
    kiln_graph *g = kiln_graph_new();
    kiln_node *av =
        kiln_constant(g, KILN_F32, KILN_SHAPE(3), (float[]){1, 2, 3});
    kiln_call_info *fwd = kiln_call_with_info(g, sg, &av, 1, NULL, 0);
    kiln_node *d[2] = {kiln_fill(g, KILN_SHAPE(3), 1),
                       kiln_fill(g, KILN_SHAPE(3), 10)};
    kiln_binding acts[4];
    int n = kiln_grad_info_inputs_dict(gi, fwd, acts, 4);
    kiln_call_info *gc =
        kiln_call_with_info(g, kiln_grad_info_graph(gi), d, 2, acts, n);
    kiln_node *da = kiln_grad_info_parent_grad(gi, fwd, gc, av);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *t = th_eval(s, g, da);
    double want[3] = {2 + 30, 4 + 30, 6 + 30};
    th_assert_close("two outputs", kiln_tensor_f32(t), want, 3, 1e-6, 1e-6);
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
    kiln_grad_info_free(gi);
    kiln_subgraph_free(sg);
}

/* ------------------------------------------------------------ programs */

typedef struct prog {
    kiln_program *p;
    kiln_stream *in, *out, *label, *loss;
    kiln_subgraph *sg;
    kiln_grad_info *gi;
} prog;

/* One Linear layer program; train adds the loss, autodiff and the update. */
static void build_prog(prog *pr, int train)
{
    *pr = (prog){.p = kiln_program_new()};
    kiln_graph *g = kiln_program_graph(pr->p);
    pr->in = kiln_h2d_stream(pr->p, "in", KILN_F32, KILN_SHAPE(B, IN));
    kiln_node *x = kiln_host_load(pr->p, pr->in, "x");
    kiln_node *W = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(IN, OUT),
                                 kiln_init_normal(0, 0.5));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(OUT),
                                 kiln_init_normal(0, 0.5));
    linear lin = {OUT, NULL, NULL};
    pr->sg = kiln_module_create_graph(linear_build, &lin, &x, 1);
    kiln_binding dict[2] = {{lin.W, W}, {lin.b, b}};
    kiln_call_info *fwd = kiln_call_with_info(g, pr->sg, &x, 1, dict, 2);
    kiln_node *y = kiln_call_info_output(fwd, 0);
    pr->out = kiln_d2h_stream(pr->p, "out", KILN_F32, KILN_SHAPE(B, OUT));
    assert_int_equal(kiln_host_store(pr->p, pr->out, y), KILN_OK);
    if (!train)
        return;
    pr->label = kiln_h2d_stream(pr->p, "labels", KILN_I32, KILN_SHAPE(B));
    kiln_node *labels = kiln_host_load(pr->p, pr->label, NULL);
    kiln_node *loss, *dy;
    kiln_nll_loss_with_softmax_grad(g, kiln_softmax(g, y, 1), labels, &loss,
                                    &dy);
    kiln_node *req[2] = {lin.W, lin.b}, *grads[2];
    pr->gi = kiln_autodiff(pr->sg, req, 2);
    kiln_binding acts[16];
    int n = kiln_grad_info_inputs_dict(pr->gi, fwd, acts, 16);
    kiln_call(g, kiln_grad_info_graph(pr->gi), &dy, 1, acts, n, grads);
    kiln_scaled_add_inplace(pr->p, W, grads[0], 1, -0.5f);
    kiln_scaled_add_inplace(pr->p, b, grads[1], 1, -0.5f);
    pr->loss = kiln_d2h_stream(pr->p, "loss", KILN_F32, KILN_SCALAR);
    kiln_host_store(pr->p, pr->loss, loss);
    th_assert_graph_ok(g);
}

static void free_prog(prog *pr)
{
    kiln_grad_info_free(pr->gi);
    kiln_subgraph_free(pr->sg);
    kiln_program_free(pr->p);
}

static void test_train_and_test_programs(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    prog tr, te;
    build_prog(&tr, 1);
    build_prog(&te, 0);
    kiln_session *s1 = kiln_session_new(NULL);
    kiln_session *s2 = kiln_session_new(&(kiln_session_options){.seed = 99});
    assert_int_equal(kiln_program_compile(tr.p, s1), KILN_OK);
    assert_int_equal(kiln_program_compile(te.p, s2), KILN_OK);
    kiln_tensor *x = th_rand(&r, KILN_SHAPE(B, IN), -1, 1);
    kiln_tensor *lab = kiln_tensor_new(KILN_I32, KILN_SHAPE(B));
    for (int i = 0; i < B; i++)
        kiln_tensor_i32(lab)[i] = i % OUT;
    kiln_tensor *y1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(B, OUT));
    kiln_tensor *y2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(B, OUT));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_stream_data io[4] = {
        {tr.in, x}, {tr.label, lab}, {tr.out, y1}, {tr.loss, loss}};
    float first = 0;
    for (int step = 0; step < 20; step++) {
        assert_int_equal(kiln_program_run(tr.p, io, 4), KILN_OK);
        if (step == 0)
            first = kiln_tensor_f32(loss)[0];
    }
    assert_true(kiln_tensor_f32(loss)[0] < first); /* the updates train */
    /* get_tensors_data / write_variables_data, then the same batch through
       both programs: a training run's outputs use the weights from before
       its own update */
    kiln_tensor *w = kiln_tensor_new(KILN_F32, KILN_SHAPE(IN, OUT));
    kiln_tensor *bb = kiln_tensor_new(KILN_F32, KILN_SHAPE(OUT));
    assert_int_equal(kiln_variable_read(s1, "W", w), KILN_OK);
    assert_int_equal(kiln_variable_read(s1, "b", bb), KILN_OK);
    assert_int_equal(kiln_variable_write(s2, "W", w), KILN_OK);
    assert_int_equal(kiln_variable_write(s2, "b", bb), KILN_OK);
    kiln_stream_data tio[2] = {{te.in, x}, {te.out, y2}};
    assert_int_equal(kiln_program_run(te.p, tio, 2), KILN_OK);
    assert_int_equal(kiln_program_run(tr.p, io, 4), KILN_OK);
    th_assert_close_f("test vs train outputs", kiln_tensor_f32(y2),
                      kiln_tensor_f32(y1), B * OUT, 1e-6, 1e-6);
    kiln_tensor_free(x);
    kiln_tensor_free(lab);
    kiln_tensor_free(y1);
    kiln_tensor_free(y2);
    kiln_tensor_free(loss);
    kiln_tensor_free(w);
    kiln_tensor_free(bb);
    free_prog(&tr);
    free_prog(&te);
    kiln_session_free(s1);
    kiln_session_free(s2);
}

static void test_errors(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN));
    linear lin = {OUT, NULL, NULL};
    kiln_subgraph *sg = kiln_module_create_graph(linear_build, &lin, &x, 1);
    kiln_call_info *ci = kiln_call_with_info(g, sg, &x, 1, NULL, 0);
    th_expect_graph_error(g, "input 'W' of 'subgraph' is not bound");
    assert_string_equal(kiln_node_op_name(kiln_call_info_output(ci, 0)),
                        "error");
    kiln_graph_free(g);

    g = kiln_graph_new();
    kiln_node *wrong = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN + 1));
    kiln_node *W = kiln_input(g, "W", KILN_F32, KILN_SHAPE(IN, OUT));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(OUT));
    kiln_binding dict[2] = {{lin.W, W}, {lin.b, b}};
    kiln_call_with_info(g, sg, &wrong, 1, dict, 2);
    th_expect_graph_error(g, "wants f32[4,5], got f32[4,6]");
    kiln_graph_free(g);

    g = kiln_graph_new();
    x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(B, IN));
    kiln_binding twice[2] = {{lin.W, x}, {lin.W, x}};
    kiln_call_with_info(g, sg, &x, 1, twice, 2);
    th_expect_graph_error(g, "already bound");
    kiln_graph_free(g);

    kiln_node *not_input = kiln_subgraph_output_at(sg, 0);
    kiln_grad_info *gi = kiln_autodiff(sg, &not_input, 1);
    th_expect_graph_error(kiln_subgraph_graph(kiln_grad_info_graph(gi)),
                 "not a graph input");
    assert_int_equal(kiln_grad_info_inputs_dict(gi, NULL, NULL, 0), -1);
    kiln_grad_info_free(gi);
    kiln_subgraph_free(sg);

    kiln_subgraph *empty = kiln_subgraph_new("empty");
    gi = kiln_autodiff(empty, NULL, 0);
    th_expect_graph_error(kiln_subgraph_graph(kiln_grad_info_graph(gi)), "no outputs");
    kiln_grad_info_free(gi);
    kiln_subgraph_free(empty);

    kiln_program *p = kiln_program_new();
    kiln_stream *in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(2));
    kiln_stream *out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(3));
    assert_int_equal(kiln_program_run(p, NULL, 0), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_program_error(p), "compile the program first"));
    kiln_node *v = kiln_host_load(p, in, NULL);
    assert_int_equal(kiln_host_store(p, out, v), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_program_error(p), "stream 'out' is f32[3]"));
    kiln_program_free(p);

    p = kiln_program_new();
    in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(2));
    out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(2));
    kiln_host_store(
        p, out, kiln_neg(kiln_program_graph(p), kiln_host_load(p, in, NULL)));
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    kiln_stream_data only_out = {out, t};
    assert_int_equal(kiln_program_run(p, &only_out, 1), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_program_error(p), "stream 'in' is not bound"));
    kiln_node *notvar = kiln_scaled_add_inplace(
        p, kiln_host_load(p, in, NULL), kiln_host_load(p, in, NULL), 1, 1);
    assert_string_equal(kiln_node_op_name(notvar), "error");
    assert_non_null(strstr(kiln_program_error(p), "not a variable"));
    kiln_tensor_free(t);
    kiln_program_free(p);
    kiln_session_free(s);

    assert_null(kiln_call_with_info(NULL, NULL, NULL, 0, NULL, 0));
    assert_int_equal(kiln_program_compile(NULL, NULL), KILN_ERR_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_info),
        cmocka_unit_test(test_autodiff_matches_inlined),
        cmocka_unit_test(test_autodiff_grads_required),
        cmocka_unit_test(test_autodiff_uses_activations),
        cmocka_unit_test(test_autodiff_two_outputs),
        cmocka_unit_test(test_train_and_test_programs),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
