/* Lifetimes and stale state from legal call sequences (issue 9): a dynamic
   graph run with a second session (each keeps its own run state), checkpointing
   switched off between backward passes, front-end objects outliving their
   session, node pointers kept across kiln_graph_clear, feeding after forward,
   streams bound twice, two updates of one variable in one function and two
   optimiser kinds sharing their step state.  Memory errors among these
   are caught by the ASan build. */
#include "test_helpers.h"

/* ------------------------------------------------------------ helpers */

static const float W0[3] = {1.0f, 2.0f, 3.0f};
static const float X0[3] = {0.5f, -1.0f, 2.0f};

/* loss = sum(W * x): dloss/dW = x, loss(W0, X0) = 0.5 - 2 + 6 = 4.5. */
typedef struct linear {
    kiln_node *x, *w, *loss;
} linear;

static linear build_linear(kiln_graph *g)
{
    linear m;
    m.x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    m.w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3), kiln_init_values(W0));
    m.loss = kiln_sum(g, kiln_mul(g, m.w, m.x), KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    return m;
}

static void feed3(kiln_session *s, kiln_node *x, const float *v)
{
    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(3), v);
    assert_non_null(t);
    assert_int_equal(kiln_feed(s, x, t), KILN_OK);
    kiln_tensor_free(t);
}

static void read3(kiln_session *s, const char *name, float *out)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    assert_non_null(t);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    memcpy(out, kiln_tensor_f32(t), 3 * sizeof *out);
    kiln_tensor_free(t);
}

/* One SGD step (lr 0.1) of g with s, checking the loss it saw. */
static void sgd_step(kiln_session *s, kiln_graph *g, const linear *m,
                     float want_loss)
{
    if (kiln_forward(s, g) != KILN_OK)
        fail_msg("kiln_forward: %s", kiln_session_error(s));
    kiln_tensor *l = kiln_node_value(s, m->loss);
    assert_non_null(l);
    assert_float_equal(kiln_tensor_f32(l)[0], want_loss, 1e-6);
    kiln_tensor_free(l);
    if (kiln_backward(s, g, m->loss) != KILN_OK)
        fail_msg("kiln_backward: %s", kiln_session_error(s));
    assert_int_equal(kiln_sgd_step(s, g, 0.1f), KILN_OK);
}

/* W0 - k * 0.1 * X0 and the loss sum(W x) for it. */
static void after_steps(int k, float *w, float *loss)
{
    double l = 0;
    for (int i = 0; i < 3; i++) {
        w[i] = W0[i] - (float)k * (0.1f * X0[i]);
        l += (double)w[i] * X0[i];
    }
    *loss = (float)l;
}

static void expect_error(const char *got, const char *needle)
{
    if (!got || !strstr(got, needle))
        fail_msg("error '%s' lacks '%s'", got ? got : "(null)", needle);
}

/* ------------------------------------------------------------ sessions */

/* A graph run with s1, s1 freed, then run with s2: s2's variables are
   used and trained, nothing points into s1's freed storage, and s2 starts
   from nothing of s1's (not even its fed input). */
static void test_graph_second_session_after_free(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    linear m = build_linear(g);
    kiln_session *s1 = kiln_session_new(NULL);
    feed3(s1, m.x, X0);
    sgd_step(s1, g, &m, 4.5f);
    kiln_session_free(s1);

    kiln_session *s2 = kiln_session_new(NULL);
    assert_null(kiln_node_value_f32(s2, m.w));
    assert_null(kiln_node_value_f32(s2, m.loss));
    assert_null(kiln_node_grad_f32(s2, m.w));
    assert_int_equal(kiln_forward(s2, g), KILN_ERR_STATE);
    expect_error(kiln_session_error(s2), "input 'x' (%0) was not fed");
    feed3(s2, m.x, X0);
    sgd_step(s2, g, &m, 4.5f);
    float w[3], want[3], loss;
    read3(s2, "W", w);
    after_steps(1, want, &loss);
    th_assert_close_f("W in s2", w, want, 3, 0, 1e-6);
    /* and again (feeding makes the next forward recompute): the second
       step reads s2's updated W */
    feed3(s2, m.x, X0);
    sgd_step(s2, g, &m, loss);
    read3(s2, "W", w);
    after_steps(2, want, &loss);
    th_assert_close_f("W in s2 after two steps", w, want, 3, 0, 1e-6);
    kiln_session_free(s2);
    kiln_graph_free(g);
}

/* With both alive, running g with s2 trains s2's variables, not s1's; in
   both orders. */
static void test_graph_two_live_sessions(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        kiln_graph *g = kiln_graph_new();
        linear m = build_linear(g);
        kiln_session *s1 = kiln_session_new(NULL);
        kiln_session *s2 = kiln_session_new(NULL);
        kiln_session *first = order ? s2 : s1, *second = order ? s1 : s2;
        float w[3], want[3], loss1, loss2;
        feed3(first, m.x, X0);
        feed3(second, m.x, X0);
        after_steps(1, want, &loss1);
        after_steps(2, want, &loss2);
        sgd_step(first, g, &m, 4.5f);
        sgd_step(second, g, &m, 4.5f);
        /* feeding makes first's next forward recompute, with its W */
        feed3(first, m.x, X0);
        sgd_step(first, g, &m, loss1);
        /* first took two steps, second one */
        read3(first, "W", w);
        after_steps(2, want, &loss2);
        th_assert_close_f("W of the first session", w, want, 3, 0, 1e-6);
        read3(second, "W", w);
        after_steps(1, want, &loss1);
        th_assert_close_f("W of the second session", w, want, 3, 0, 1e-6);
        kiln_session_free(s1);
        kiln_session_free(s2);
        kiln_graph_free(g);
    }
}

/* Results are the session's: reading values or gradients, backward and
   updates with a session that did not run the graph are refused, and
   leave the results of the one that did alone. */
static void test_graph_other_session_refused(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    linear m = build_linear(g);
    kiln_session *s1 = kiln_session_new(NULL);
    kiln_session *s2 = kiln_session_new(NULL);
    feed3(s1, m.x, X0);
    assert_int_equal(kiln_backprop(s1, g, m.loss), KILN_OK);
    assert_null(kiln_node_value(s2, m.loss));
    expect_error(kiln_session_error(s2), "has no value: run kiln_forward");
    assert_null(kiln_node_value_f32(s2, m.loss));
    assert_null(kiln_node_grad(s2, m.w));
    expect_error(kiln_session_error(s2), "has no gradient: run kiln_backward");
    assert_null(kiln_node_grad_f32(s2, m.w));
    assert_int_equal(kiln_backward(s2, g, m.loss), KILN_ERR_STATE);
    expect_error(kiln_session_error(s2), "has no value: run kiln_forward");
    assert_int_equal(kiln_sgd_step(s2, g, 0.1f), KILN_ERR_STATE);
    expect_error(kiln_session_error(s2), "no gradients: run kiln_backward");
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    kiln_optimizer *o2 = kiln_optimizer_new(s2, &oo);
    assert_non_null(o2);
    assert_int_equal(kiln_optimizer_update(o2, g), KILN_ERR_STATE);
    expect_error(kiln_session_error(s2), "no gradients: run kiln_backward");
    /* nothing of s1 was changed by the refusals */
    float w[3];
    read3(s1, "W", w);
    th_assert_close_f("W of s1", w, W0, 3, 0, 0);
    /* s1's results are still there */
    const float *l = kiln_node_value_f32(s1, m.loss);
    assert_non_null(l);
    assert_float_equal(l[0], 4.5f, 1e-6);
    th_assert_close_f("grad in s1", kiln_node_grad_f32(s1, m.w), X0, 3, 0, 0);
    kiln_optimizer_free(o2);
    kiln_session_free(s2);
    kiln_session_free(s1);
    kiln_graph_free(g);
}

/* A variable frozen in s1 is not frozen for s2 by running the graph with
   s1 first: s2 keeps training its own. */
static void test_freeze_stays_in_its_session(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    linear m = build_linear(g);
    kiln_session *s1 = kiln_session_new(NULL);
    kiln_session *s2 = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s1, "W", KILN_F32, KILN_SHAPE(3),
                                          kiln_init_values(W0), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_set_trainable(s1, "W", 0), KILN_OK);
    feed3(s1, m.x, X0);
    sgd_step(s1, g, &m, 4.5f);
    float w[3], want[3], loss;
    read3(s1, "W", w);
    th_assert_close_f("frozen W of s1", w, W0, 3, 0, 0);
    feed3(s2, m.x, X0);
    sgd_step(s2, g, &m, 4.5f);
    read3(s2, "W", w);
    after_steps(1, want, &loss);
    th_assert_close_f("W of s2", w, want, 3, 0, 1e-6);
    kiln_param_info info;
    assert_int_equal(kiln_session_variable_info(
                         s2, kiln_session_find_variable(s2, "W"), &info),
                     KILN_OK);
    assert_int_equal(info.trainable, 1);
    /* and back to s1: still frozen there */
    feed3(s1, m.x, X0);
    sgd_step(s1, g, &m, 4.5f);
    read3(s1, "W", w);
    th_assert_close_f("frozen W of s1 again", w, W0, 3, 0, 0);
    kiln_graph_free(g);
    kiln_session_free(s1);
    kiln_session_free(s2);
}

/* Freeing the graph first, then the session, and the reverse. */
static void test_graph_and_session_any_free_order(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        kiln_graph *g = kiln_graph_new();
        linear m = build_linear(g);
        kiln_session *s = kiln_session_new(NULL);
        feed3(s, m.x, X0);
        assert_int_equal(kiln_backprop(s, g, m.loss), KILN_OK);
        if (order) {
            kiln_graph_free(g);
            kiln_session_free(s);
        } else {
            kiln_session_free(s);
            kiln_graph_free(g);
        }
    }
}

/* ------------------------------------------------------------ checkpointing */

enum { DEPTH = 6, WIDTH = 4 };

/* h = tanh(h W_i), loss = mean(h^2). */
static kiln_node *build_chain(kiln_graph *g, kiln_node **x, kiln_node **vars)
{
    *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, WIDTH));
    kiln_node *h = *x;
    for (int i = 0; i < DEPTH; i++) {
        char name[16];
        snprintf(name, sizeof name, "W%d", i);
        vars[i] = kiln_variable(g, name, KILN_F32, KILN_SHAPE(WIDTH, WIDTH),
                                kiln_init_glorot_uniform());
        h = kiln_tanh(g, kiln_matmul(g, h, vars[i], 0, 0));
    }
    return kiln_mean(g, kiln_mul(g, h, h), KILN_ALL_AXES, 0);
}

static void chain_grads(int checkpointing, kiln_tensor **grads)
{
    kiln_session_options so = {.seed = 3};
    kiln_session *s = kiln_session_new(&so);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x, *vars[DEPTH];
    assert_int_equal(kiln_session_set_checkpointing(s, g, checkpointing),
                     KILN_OK);
    kiln_node *loss = build_chain(g, &x, vars);
    th_assert_graph_ok(g);
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    kiln_tensor *xt = th_rand(&r, KILN_SHAPE(2, WIDTH), -1, 1);
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    kiln_tensor_free(xt);
    assert_int_equal(kiln_backprop(s, g, loss), KILN_OK);
    if (checkpointing) {
        /* off now: the next backward needs the released values again */
        assert_int_equal(kiln_session_set_checkpointing(s, g, 0), KILN_OK);
        if (kiln_backward(s, g, loss) != KILN_OK)
            fail_msg("second backward: %s", kiln_session_error(s));
    }
    for (int i = 0; i < DEPTH; i++)
        assert_non_null(grads[i] = kiln_node_grad(s, vars[i]));
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_checkpointing_off_after_checkpointed_backward(void **state)
{
    (void)state;
    kiln_tensor *plain[DEPTH], *ckpt[DEPTH];
    chain_grads(0, plain);
    chain_grads(1, ckpt);
    for (int i = 0; i < DEPTH; i++) {
        assert_memory_equal(kiln_tensor_data(plain[i]),
                            kiln_tensor_data(ckpt[i]),
                            (size_t)kiln_tensor_numel(plain[i]) * 4);
        kiln_tensor_free(plain[i]);
        kiln_tensor_free(ckpt[i]);
    }
}

/* ------------------------------------------------------------ front ends */

/* A computation called after its session was freed fails cleanly, whether
   it was called (compiled) before or not. */
static void test_computation_after_session_free(void **state)
{
    (void)state;
    for (int called = 0; called < 2; called++) {
        kiln_graph *g = kiln_graph_new();
        kiln_session *s = kiln_session_new(NULL);
        kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_NO_AXES);
        kiln_ax *y = kiln_ax_add(g, x, kiln_ax_scalar(g, 1));
        kiln_computation *c = kiln_computation_new(s, g, &y, 1, &x, 1);
        assert_non_null(c);
        kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SCALAR);
        kiln_tensor_f32(in)[0] = 2.0f;
        if (called) {
            assert_int_equal(kiln_computation_call(c, &in), KILN_OK);
            assert_float_equal(kiln_computation_scalar(c, 0), 3.0f, 0);
        }
        kiln_session_free(s);
        assert_int_equal(kiln_computation_call(c, &in), KILN_ERR_STATE);
        expect_error(kiln_last_error(), "session was freed");
        FILE *f = tmpfile();
        assert_non_null(f);
        assert_int_equal(kiln_computation_print(c, f), KILN_ERR_STATE);
        fclose(f);
        /* the last good result is still readable */
        if (called)
            assert_float_equal(kiln_computation_scalar(c, 0), 3.0f, 0);
        kiln_computation_free(c);
        kiln_tensor_free(in);
        kiln_graph_free(g);
    }
}

/* A program whose session was freed says so, and compiles into a new one. */
static void test_program_after_session_free(void **state)
{
    (void)state;
    kiln_program *p = kiln_program_new();
    kiln_graph *g = kiln_program_graph(p);
    kiln_stream *in = kiln_h2d_stream(p, "in", KILN_F32, KILN_SHAPE(3));
    kiln_stream *out = kiln_d2h_stream(p, "out", KILN_F32, KILN_SHAPE(3));
    kiln_node *w =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3), kiln_init_values(W0));
    kiln_node *x = kiln_host_load(p, in, NULL);
    assert_int_equal(kiln_host_store(p, out, kiln_mul(g, w, x)), KILN_OK);
    kiln_tensor *xt = kiln_tensor_from_f32(KILN_SHAPE(3), X0);
    kiln_tensor *yt = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_stream_data io[2] = {{in, xt}, {out, yt}};
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    assert_int_equal(kiln_program_run(p, io, 2), KILN_OK);
    kiln_session_free(s);
    assert_int_equal(kiln_program_run(p, io, 2), KILN_ERR_STATE);
    expect_error(kiln_program_error(p), "session was freed");
    s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    memset(kiln_tensor_f32(yt), 0, 3 * sizeof(float));
    assert_int_equal(kiln_program_run(p, io, 2), KILN_OK);
    for (int i = 0; i < 3; i++)
        assert_float_equal(kiln_tensor_f32(yt)[i], W0[i] * X0[i], 0);
    /* the program freed before its session, then the session */
    kiln_program_free(p);
    kiln_session_free(s);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
}

/* An optimiser outliving its session fails cleanly. */
static void test_optimizer_after_session_free(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    assert_non_null(o);
    assert_int_equal(kiln_optimizer_step_count(o), 0);
    kiln_session_free(s);
    assert_int_equal(kiln_optimizer_step_count(o), -1);
    assert_float_equal(kiln_optimizer_lr(o), 0.0f, 0);
    kiln_graph *g = kiln_graph_new();
    assert_int_equal(kiln_optimizer_update(o, g), KILN_ERR_STATE);
    expect_error(kiln_last_error(), "session was freed");
    kiln_graph_free(g);
    kiln_optimizer_free(o);
}

/* ------------------------------------------------------------ stale nodes */

/* A node kept across kiln_graph_clear is refused by builders, even when a
   new node took its id. */
static void test_stale_node_refused_by_builders(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *old = kiln_input(g, "a", KILN_F32, KILN_SHAPE(3));
    kiln_node *old_sum = kiln_sum(g, old, KILN_ALL_AXES, 0);
    kiln_graph_clear(g);
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(3));
    assert_int_equal(kiln_node_id(a), kiln_node_id(old));
    th_assert_graph_ok(g);
    kiln_add(g, a, old);
    th_expect_graph_error(g, "kiln_add: operand node");
    th_expect_graph_error(g, "built before kiln_graph_clear");

    /* unary, reductions and composites go through the same check */
    kiln_graph_clear(g);
    kiln_relu(g, old_sum);
    th_expect_graph_error(g, "kiln_relu");
    th_expect_graph_error(g, "built before kiln_graph_clear");
    kiln_graph_clear(g);
    kiln_softmax(g, kiln_input(g, "b", KILN_F32, KILN_SHAPE(2, 2)), -1);
    th_assert_graph_ok(g);
    kiln_node *kept = kiln_input(g, "c", KILN_F32, KILN_SHAPE(2));
    kiln_graph_clear(g);
    kiln_input(g, "c", KILN_F32, KILN_SHAPE(2));
    kiln_sum(g, kept, KILN_ALL_AXES, 0);
    th_expect_graph_error(g, "kiln_sum");
    th_expect_graph_error(g, "built before kiln_graph_clear");

    /* gradients and the axes front end too */
    kiln_graph_clear(g);
    kiln_node *w =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3), kiln_init_zeros());
    kiln_node *l = kiln_sum(g, w, KILN_ALL_AXES, 0);
    kiln_graph_clear(g);
    kiln_node *w2 =
        kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3), kiln_init_zeros());
    kiln_sum(g, w2, KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_grad(g, l, w2);
    th_expect_graph_error(g, "built before kiln_graph_clear");
    kiln_graph_clear(g);
    kiln_axis an = kiln_axis_make("N", 3, 0);
    kiln_ax *px = kiln_ax_placeholder(g, "x", KILN_AXES(an));
    kiln_graph_clear(g);
    kiln_ax *py = kiln_ax_placeholder(g, "x", KILN_AXES(an));
    th_assert_graph_ok(g);
    kiln_ax_add(g, py, px);
    th_expect_graph_error(g, "built before kiln_graph_clear");
    kiln_graph_free(g);
}

/* The run-time functions refuse a stale node too, and its value and
   gradient read as NULL. */
static void test_stale_node_refused_at_run_time(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    linear old = build_linear(g);
    feed3(s, old.x, X0);
    assert_int_equal(kiln_backprop(s, g, old.loss), KILN_OK);
    assert_non_null(kiln_node_value_f32(s, old.loss));
    kiln_graph_clear(g);
    linear m = build_linear(g); /* the same ids as before */
    assert_null(kiln_node_value_f32(s, old.loss));
    assert_null(kiln_node_value_f32(s, old.w));
    assert_null(kiln_node_grad_f32(s, old.w));
    assert_string_equal(kiln_node_name(old.w), "");
    assert_null(kiln_node_input(old.loss, 0));

    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(3), X0);
    assert_int_equal(kiln_feed(s, old.x, t), KILN_ERR_ARG);
    expect_error(kiln_session_error(s), "built before kiln_graph_clear");
    assert_int_equal(kiln_feed(s, m.x, t), KILN_OK);
    kiln_tensor_free(t);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_null(kiln_node_value(s, old.loss));
    expect_error(kiln_session_error(s), "built before kiln_graph_clear");
    assert_int_equal(kiln_backward(s, g, old.loss), KILN_ERR_ARG);
    expect_error(kiln_session_error(s), "built before kiln_graph_clear");
    assert_null(kiln_compile(s, g, &old.loss, 1, &m.x, 1));
    expect_error(kiln_session_error(s), "built before kiln_graph_clear");
    assert_null(kiln_compile(s, g, &m.loss, 1, &old.x, 1));
    expect_error(kiln_session_error(s), "built before kiln_graph_clear");
    /* the new nodes work */
    assert_int_equal(kiln_backward(s, g, m.loss), KILN_OK);
    assert_float_equal(kiln_node_value_f32(s, m.loss)[0], 4.5f, 1e-6);
    /* marking a stale node is an error of the graph, not a write into it */
    th_assert_graph_ok(g);
    kiln_checkpoint(old.loss);
    th_expect_graph_error(g, "built before kiln_graph_clear");
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ feeding */

/* kiln_feed after kiln_forward: the next forward recomputes with the new
   value, and re-feeding in a loop does not grow the workspace. */
static void test_feed_after_forward_recomputes(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(3), X0);
    kiln_node *before = kiln_sum(g, c, KILN_ALL_AXES, 0); /* 1.5 */
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *y = kiln_mul(g, x, kiln_scalar(g, 2.0f));
    kiln_node *total = kiln_sum(g, y, KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    const float a[3] = {1, 2, 3}, b[3] = {-4, 5, 0.5f};
    feed3(s, x, a);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_float_equal(kiln_node_value_f32(s, total)[0], 12.0f, 0);
    feed3(s, x, b);
    /* stale until the next forward */
    assert_null(kiln_node_value_f32(s, y));
    assert_null(kiln_node_value(s, total));
    expect_error(kiln_session_error(s), "kiln_forward");
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    const float *yv = kiln_node_value_f32(s, y);
    assert_non_null(yv);
    for (int i = 0; i < 3; i++)
        assert_float_equal(yv[i], 2 * b[i], 0);
    assert_float_equal(kiln_node_value_f32(s, total)[0], 3.0f, 0);
    assert_float_equal(kiln_node_value_f32(s, before)[0], 1.5f, 1e-6);

    kiln_workspace_stats st0, st1;
    assert_int_equal(kiln_session_workspace_stats(s, g, &st0), KILN_OK);
    for (int k = 0; k < 20; k++) {
        float v[3] = {(float)k, 1, 1};
        feed3(s, x, v);
        assert_int_equal(kiln_forward(s, g), KILN_OK);
        assert_float_equal(kiln_node_value_f32(s, total)[0], 2.0f * (k + 2), 0);
    }
    assert_int_equal(kiln_session_workspace_stats(s, g, &st1), KILN_OK);
    assert_true(st1.used == st0.used);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Feeding after backward: the next forward recomputes the gradients too. */
static void test_feed_after_backward_recomputes_gradients(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    linear m = build_linear(g);
    feed3(s, m.x, X0);
    assert_int_equal(kiln_backprop(s, g, m.loss), KILN_OK);
    th_assert_close_f("grad", kiln_node_grad_f32(s, m.w), X0, 3, 0, 0);
    const float x1[3] = {3, 4, 5};
    feed3(s, m.x, x1);
    assert_null(kiln_node_grad(s, m.w));
    expect_error(kiln_session_error(s), "kiln_forward");
    assert_int_equal(kiln_sgd_step(s, g, 0.1f), KILN_ERR_STATE);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    th_assert_close_f("grad after refeed", kiln_node_grad_f32(s, m.w), x1, 3, 0,
                      0);
    assert_float_equal(kiln_node_value_f32(s, m.loss)[0], 3 + 8 + 15, 0);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ programs */

static void test_program_stream_bound_twice(void **state)
{
    (void)state;
    kiln_program *p = kiln_program_new();
    kiln_graph *g = kiln_program_graph(p);
    kiln_stream *in = kiln_h2d_stream(p, "images", KILN_F32, KILN_SHAPE(3));
    kiln_stream *out = kiln_d2h_stream(p, "scores", KILN_F32, KILN_SHAPE(3));
    kiln_node *x = kiln_host_load(p, in, NULL);
    assert_int_equal(kiln_host_store(p, out, kiln_scale(g, x, 2.0f)), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    kiln_tensor *a = kiln_tensor_from_f32(KILN_SHAPE(3), X0);
    kiln_tensor *b = kiln_tensor_from_f32(KILN_SHAPE(3), W0);
    kiln_tensor *y = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_tensor *y2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_stream_data twice_in[3] = {{in, a}, {out, y}, {in, b}};
    assert_int_equal(kiln_program_run(p, twice_in, 3), KILN_ERR_ARG);
    expect_error(kiln_program_error(p), "stream 'images' is bound twice");
    for (int i = 0; i < 3; i++) /* nothing ran */
        assert_float_equal(kiln_tensor_f32(y)[i], 0, 0);
    kiln_stream_data twice_out[3] = {{out, y}, {in, a}, {out, y2}};
    assert_int_equal(kiln_program_run(p, twice_out, 3), KILN_ERR_ARG);
    expect_error(kiln_program_error(p), "stream 'scores' is bound twice");
    kiln_stream_data once[2] = {{in, a}, {out, y}};
    assert_int_equal(kiln_program_run(p, once, 2), KILN_OK);
    for (int i = 0; i < 3; i++)
        assert_float_equal(kiln_tensor_f32(y)[i], 2 * X0[i], 0);
    kiln_tensor_free(a);
    kiln_tensor_free(b);
    kiln_tensor_free(y);
    kiln_tensor_free(y2);
    kiln_program_free(p);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ updates */

/* Two optimiser steps on the same variables in one compiled function are
   refused, naming the variable. */
static void test_two_optimizer_steps_in_one_function(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oa = kiln_optim_defaults(KILN_SGD);
    kiln_optim_options ob = kiln_optim_defaults(KILN_ADAM);
    ob.name = "second";
    kiln_optimizer *a = kiln_optimizer_new(s, &oa);
    kiln_optimizer *b = kiln_optimizer_new(s, &ob);
    assert_non_null(a);
    assert_non_null(b);
    for (int same = 0; same < 2; same++) {
        kiln_graph *g = kiln_graph_new();
        linear m = build_linear(g);
        kiln_node *outs[3] = {
            m.loss, kiln_optimizer_build_step(a, g, m.loss),
            kiln_optimizer_build_step(same ? a : b, g, m.loss)};
        th_assert_graph_ok(g);
        assert_null(kiln_compile(s, g, outs, 3, &m.x, 1));
        /* the same optimiser twice: its step counter comes first */
        expect_error(kiln_session_error(s), same ? "variable 'optim.step' is "
                                                   "assigned twice"
                                                 : "variable 'W' is assigned "
                                                   "twice");
        /* one step compiles and runs */
        kiln_function *f = kiln_compile(s, g, outs, 2, &m.x, 1);
        assert_non_null(f);
        kiln_function_free(f);
        kiln_graph_free(g);
    }
    kiln_optimizer_free(a);
    kiln_optimizer_free(b);
    kiln_session_free(s);
}

/* The same for assignments run dynamically and in-place updates of a
   program. */
static void test_two_assignments_in_one_pass(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s, "V", KILN_F32, KILN_SHAPE(3),
                                          kiln_init_values(W0), 1),
                     KILN_OK);
    kiln_graph *g = kiln_graph_new();
    kiln_node *w =
        kiln_variable(g, "V", KILN_F32, KILN_SHAPE(3), kiln_init_values(W0));
    kiln_assign(g, w, kiln_scale(g, w, 2.0f));
    kiln_assign(g, w, kiln_scale(g, w, 3.0f));
    th_assert_graph_ok(g);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_ARG);
    expect_error(kiln_session_error(s), "variable 'V' is assigned twice");
    float v[3];
    read3(s, "V", v);
    th_assert_close_f("V untouched", v, W0, 3, 0, 0);
    kiln_graph_free(g);

    kiln_program *p = kiln_program_new();
    g = kiln_program_graph(p);
    w = kiln_variable(g, "V", KILN_F32, KILN_SHAPE(3), kiln_init_values(W0));
    kiln_node *one = kiln_fill(g, KILN_SHAPE(3), 1.0f);
    kiln_scaled_add_inplace(p, w, one, 1.0f, 1.0f);
    kiln_scaled_add_inplace(p, w, one, 1.0f, 2.0f);
    assert_int_not_equal(kiln_program_compile(p, s), KILN_OK);
    expect_error(kiln_program_error(p), "variable 'V' is assigned twice");
    kiln_program_free(p);
    kiln_session_free(s);
}

/* Two optimiser kinds cannot share their step state (the same name) on one
   session while both are alive; the same kind can, another name can, and
   after the first is freed the name is free again. */
static void test_optimizer_kinds_sharing_state(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options sgd = kiln_optim_defaults(KILN_SGD);
    kiln_optim_options adam = kiln_optim_defaults(KILN_ADAM);
    kiln_optimizer *a = kiln_optimizer_new(s, &sgd);
    assert_non_null(a);
    assert_null(kiln_optimizer_new(s, &adam));
    expect_error(kiln_session_error(s), "'optim'");
    expect_error(kiln_session_error(s), "SGD");
    expect_error(kiln_session_error(s), "Adam");
    kiln_optimizer *a2 = kiln_optimizer_new(s, &sgd);
    assert_non_null(a2);
    adam.name = "adam";
    kiln_optimizer *b = kiln_optimizer_new(s, &adam);
    assert_non_null(b);
    kiln_optimizer_free(a);
    kiln_optimizer_free(a2);
    adam.name = NULL;
    kiln_optimizer *c = kiln_optimizer_new(s, &adam);
    assert_non_null(c);
    kiln_optimizer_free(b);
    kiln_optimizer_free(c);
    kiln_session_free(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_second_session_after_free),
        cmocka_unit_test(test_graph_two_live_sessions),
        cmocka_unit_test(test_graph_other_session_refused),
        cmocka_unit_test(test_freeze_stays_in_its_session),
        cmocka_unit_test(test_graph_and_session_any_free_order),
        cmocka_unit_test(test_checkpointing_off_after_checkpointed_backward),
        cmocka_unit_test(test_computation_after_session_free),
        cmocka_unit_test(test_program_after_session_free),
        cmocka_unit_test(test_optimizer_after_session_free),
        cmocka_unit_test(test_stale_node_refused_by_builders),
        cmocka_unit_test(test_stale_node_refused_at_run_time),
        cmocka_unit_test(test_feed_after_forward_recomputes),
        cmocka_unit_test(test_feed_after_backward_recomputes_gradients),
        cmocka_unit_test(test_program_stream_bound_twice),
        cmocka_unit_test(test_two_optimizer_steps_in_one_function),
        cmocka_unit_test(test_two_assignments_in_one_pass),
        cmocka_unit_test(test_optimizer_kinds_sharing_state),
    };
    if (argc > 1) /* one test by name, e.g. to see each ASan report */
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
