/* Symbolic sizes: the marks kiln_input_sym puts on a graph, and compiled
   functions that run one graph at every batch size. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include "test_helpers.h"

#include "test_alloc_count.h"

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
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(5), kiln_init_zeros());
    assert_int_equal(
        sym_of(kiln_broadcast(g, b, kiln_node_shape(h), KILN_AXIS(0))), 1u);
    assert_int_equal(
        sym_of(kiln_broadcast(g, b, KILN_SHAPE(4, 5), KILN_AXIS(0))), 0u);
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

/* ------------------------------------------------------------ compiled */

enum { IN = 6, OUT = 5 };

static const float W0[IN * OUT] = {
    0.1f,  -0.2f, 0.3f,  0.05f,  -0.4f, 0.2f,  0.1f,   -0.3f, 0.25f, 0.15f,
    -0.1f, 0.4f,  0.2f,  -0.05f, 0.3f,  0.35f, -0.25f, 0.1f,  0.2f,  -0.15f,
    0.05f, 0.3f,  -0.2f, 0.1f,   0.4f,  -0.3f, 0.2f,   0.15f, -0.1f, 0.25f};

typedef struct net {
    kiln_graph *g;
    kiln_node *x, *y, *out[4];
} net;

/* logits = relu(x W + b) W2-free head, the mean loss, a mean over the
   batch axis and a column sum: built at batch n, with a symbolic batch or
   not. */
static net build_net(int64_t n, int sym)
{
    net m;
    m.g = kiln_graph_new();
    kiln_graph *g = m.g;
    unsigned b0 = sym ? KILN_AXIS(0) : 0;
    m.x = kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(n, IN), b0);
    m.y = kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(n), b0);
    kiln_node *w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(IN, OUT),
                                 kiln_init_values(W0));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(OUT),
                                 kiln_init_uniform(-0.5f, 0.5f));
    kiln_node *logits =
        kiln_tanh(g, kiln_add(g, kiln_matmul(g, m.x, w, 0, 0), b));
    m.out[0] = logits;
    m.out[1] = kiln_softmax_cross_entropy(g, logits, m.y);
    m.out[2] = kiln_mean(g, logits, KILN_AXIS(0), 0);
    m.out[3] = kiln_grad(g, m.out[1], w);
    th_assert_graph_ok(g);
    return m;
}

static void feed(kiln_tensor *x, kiln_tensor *y, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    th_fill(&r, x, -1, 1, 0);
    int32_t *l = kiln_tensor_data(y);
    for (int64_t i = 0; i < kiln_tensor_numel(y); i++)
        l[i] = (int32_t)(kiln_rng_uniform(&r) * OUT) % OUT;
}

/* A batch of n rows for build_net's inputs and tensors for its outputs. */
static void batch_tensors(int64_t n, kiln_tensor **x, kiln_tensor **y,
                          kiln_tensor **out)
{
    *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(n, IN));
    *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(n));
    feed(*x, *y, 100 + (uint64_t)n);
    kiln_shape shapes[4] = {KILN_SHAPE(n, OUT), KILN_SCALAR, KILN_SHAPE(OUT),
                            KILN_SHAPE(IN, OUT)};
    for (int i = 0; i < 4; i++)
        out[i] = kiln_tensor_new(KILN_F32, shapes[i]);
}

/* build_net at batch 4, symbolic, compiled. */
static kiln_function *compile_net(kiln_session *s, net *m)
{
    *m = build_net(4, 1);
    kiln_node *ins[2] = {m->x, m->y};
    kiln_function *f = kiln_compile(s, m->g, m->out, 4, ins, 2);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    return f;
}

/* Runs f on a batch of n and returns its four outputs. */
static void run_at(kiln_function *f, kiln_session *s, int64_t n,
                   kiln_tensor **out)
{
    kiln_tensor *x, *y;
    batch_tensors(n, &x, &y, out);
    kiln_tensor *in[2] = {x, y};
    if (kiln_run(f, in, out) != KILN_OK)
        fail_msg("kiln_run at %lld: %s", (long long)n, kiln_session_error(s));
    kiln_tensor_free(x);
    kiln_tensor_free(y);
}

/* One function compiled at batch 4 gives, at every batch, the outputs of a
   function compiled for that batch alone, bit for bit. */
static void test_any_batch_matches_fixed(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    net m;
    kiln_function *f = compile_net(s, &m);
    size_t mem4 = kiln_function_memory(f);
    const int64_t sizes[] = {1, 7, 128, 4, 0, 7, 1};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        net fx = build_net(n, 0);
        kiln_node *fins[2] = {fx.x, fx.y};
        kiln_function *ff = kiln_compile(s, fx.g, fx.out, 4, fins, 2);
        assert_non_null(ff);
        kiln_tensor *got[4], *want[4];
        run_at(f, s, n, got);
        run_at(ff, s, n, want);
        for (int i = 0; i < 4; i++) {
            th_assert_shape(kiln_tensor_shape(got[i]),
                            kiln_tensor_shape(want[i]));
            th_assert_close_f("output", kiln_tensor_f32(got[i]),
                              kiln_tensor_f32(want[i]),
                              kiln_tensor_numel(got[i]), 0, 0);
            kiln_tensor_free(got[i]);
            kiln_tensor_free(want[i]);
        }
        if (n == 128) /* memory is planned for each size */
            assert_true(kiln_function_memory(f) > mem4);
        kiln_function_free(ff);
        kiln_graph_free(fx.g);
    }
    kiln_graph_free(m.g);
    kiln_session_free(s);
}

/* A training step over a batch of any size: the loss is the mean over the
   rows fed, and the update uses its gradient, checked by hand.
   loss = mean((x w - t)^2), dw = 2/n x^T (x w - t), w <- w - 0.1 dw. */
static void test_training_step_by_hand(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(4, 2), KILN_AXIS(0));
    kiln_node *t =
        kiln_input_sym(g, "T", KILN_F32, KILN_SHAPE(4, 1), KILN_AXIS(0));
    const float w0[2] = {0.5f, -0.25f};
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(2, 1), kiln_init_values(w0));
    kiln_node *e = kiln_sub(g, kiln_matmul(g, x, w, 0, 0), t);
    kiln_node *loss = kiln_mean(g, kiln_mul(g, e, e), KILN_ALL_AXES, 0);
    kiln_node *step = kiln_assign(
        g, w, kiln_sub(g, w, kiln_scale(g, kiln_grad(g, loss, w), 0.1f)));
    kiln_node *outs[2] = {loss, step}, *ins[2] = {x, t};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    assert_non_null(f);
    double wv[2] = {w0[0], w0[1]};
    const int64_t sizes[] = {3, 5, 1, 3};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(n, 2));
        kiln_tensor *tt = kiln_tensor_new(KILN_F32, KILN_SHAPE(n, 1));
        float *xp = kiln_tensor_f32(xt), *tp = kiln_tensor_f32(tt);
        double want_loss = 0, dw[2] = {0, 0};
        for (int64_t r = 0; r < n; r++) {
            xp[2 * r] = 0.5f + (float)r;
            xp[2 * r + 1] = 1.0f - 0.25f * (float)(r + k);
            tp[r] = 0.1f * (float)(r * r);
            double err = xp[2 * r] * wv[0] + xp[2 * r + 1] * wv[1] - tp[r];
            want_loss += err * err / (double)n;
            dw[0] += 2 * err * xp[2 * r] / (double)n;
            dw[1] += 2 * err * xp[2 * r + 1] / (double)n;
        }
        kiln_tensor *lt = kiln_tensor_new(KILN_F32, KILN_SCALAR);
        kiln_tensor *feeds[2] = {xt, tt}, *res[2] = {lt, NULL};
        assert_int_equal(kiln_run(f, feeds, res), KILN_OK);
        th_assert_close("loss", kiln_tensor_f32(lt), &want_loss, 1, 1e-6, 0);
        wv[0] -= 0.1 * dw[0];
        wv[1] -= 0.1 * dw[1];
        kiln_tensor *wt = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 1));
        assert_int_equal(kiln_variable_read(s, "w", wt), KILN_OK);
        th_assert_close("w", kiln_tensor_f32(wt), wv, 2, 1e-6, 1e-7);
        kiln_tensor_free(wt);
        kiln_tensor_free(lt);
        kiln_tensor_free(xt);
        kiln_tensor_free(tt);
    }
    /* inputs that disagree on the batch are refused, and change nothing */
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 2));
    kiln_tensor *tt = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 1));
    kiln_tensor *feeds[2] = {xt, tt}, *res[2] = {NULL, NULL};
    float before[2], after[2];
    kiln_tensor *wt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2, 1), before);
    assert_int_equal(kiln_variable_read(s, "w", wt), KILN_OK);
    assert_int_equal(kiln_run(f, feeds, res), KILN_ERR_SHAPE);
    assert_string_equal(kiln_session_error(s),
                        "kiln_run: inputs 'X' [5,2] and 'T' [3,1] disagree "
                        "on the symbolic size (5 and 3)");
    kiln_tensor_free(wt);
    wt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2, 1), after);
    assert_int_equal(kiln_variable_read(s, "w", wt), KILN_OK);
    assert_memory_equal(before, after, sizeof before);
    kiln_tensor_free(wt);
    kiln_tensor_free(xt);
    kiln_tensor_free(tt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* A run at a size seen before allocates nothing; a new size plans (and
   allocates) once. */
static void test_seen_sizes_allocate_nothing(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    net m;
    kiln_function *f = compile_net(s, &m);
    const int64_t sizes[3] = {3, 9, 4};
    kiln_tensor *x[3], *y[3], *out[3][4];
    for (int k = 0; k < 3; k++)
        batch_tensors(sizes[k], &x[k], &y[k], out[k]);
    long before = allocations;
    for (int k = 0; k < 2; k++) {
        kiln_tensor *in[2] = {x[k], y[k]};
        assert_int_equal(kiln_run(f, in, out[k]), KILN_OK);
    }
    assert_true(allocations > before); /* sizes 3 and 9 were new */
    before = allocations;
    for (int r = 0; r < 6; r++) {
        kiln_tensor *in[2] = {x[r % 3], y[r % 3]};
        assert_int_equal(kiln_run(f, in, out[r % 3]), KILN_OK);
    }
    assert_int_equal(allocations, before);
    for (int k = 0; k < 3; k++) {
        kiln_tensor_free(x[k]);
        kiln_tensor_free(y[k]);
        for (int i = 0; i < 4; i++)
            kiln_tensor_free(out[k][i]);
    }
    kiln_graph_free(m.g);
    kiln_session_free(s);
}

/* A graph that keeps the size it was built at cannot run at another: the
   compiler names the node. */
static void test_baked_size_refused(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    for (int c = 0; c < 3; c++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x =
            kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(4, 3), KILN_AXIS(0));
        kiln_node *y =
            c == 0 ? kiln_add(g, x, kiln_fill(g, KILN_SHAPE(4, 3), 1))
            : c == 1
                ? kiln_reshape(g, x, KILN_SHAPE(12))
                : kiln_matmul(g, x, kiln_fill(g, KILN_SHAPE(4, 5), 1), 1, 0);
        th_assert_graph_ok(g);
        assert_null(kiln_compile(s, g, &y, 1, &x, 1));
        const char *op[] = {"kiln_compile: %2 = add of [4,3] and [4,3]",
                            "kiln_compile: %1 = reshape of [4,3]",
                            "kiln_compile: %2 = matmul of [4,3] and [4,5]"};
        if (strncmp(kiln_session_error(s), op[c], strlen(op[c])) ||
            !strstr(kiln_session_error(s), "does not follow the symbolic "
                                           "size of the inputs (built at 4"))
            fail_msg("case %d: %s", c, kiln_session_error(s));
        kiln_graph_free(g);
    }
    /* a fill shaped like a symbolic node follows it */
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(4, 3), KILN_AXIS(0));
    kiln_node *y = kiln_add(g, x, kiln_fill(g, kiln_node_shape(x), 1));
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    kiln_tensor *xt =
        kiln_tensor_from_f32(KILN_SHAPE(2, 3), (float[]){1, 2, 3, 4, 5, 6});
    kiln_tensor *yt = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    assert_int_equal(kiln_run(f, &xt, &yt), KILN_OK);
    th_assert_close_f("x + 1", kiln_tensor_f32(yt), (float[]){2, 3, 4, 5, 6, 7},
                      6, 0, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_int_equal(kiln_function_print(f, mem), KILN_OK);
    fclose(mem);
    assert_non_null(strstr(text, "\nsymbolic size: 2 (the size it ran at "
                                 "last)\n"));
    assert_non_null(strstr(text, "add(%0, %1) f32[2,3]"));
    free(text);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* An empty batch runs where the graph has a value for it (a mean is NaN),
   and is refused where a max over the batch has none; the function then
   runs at other sizes as before. */
static void test_empty_batch(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(4, 2), KILN_AXIS(0));
    kiln_node *outs[2] = {kiln_mean(g, x, KILN_AXIS(0), 0),
                          kiln_reduce_max(g, x, KILN_AXIS(0), 0)};
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    kiln_function *fm = kiln_compile(s, g, outs, 1, &x, 1);
    assert_non_null(f);
    assert_non_null(fm);
    kiln_tensor *x0 = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 2));
    kiln_tensor *o[2] = {kiln_tensor_new(KILN_F32, KILN_SHAPE(2)),
                         kiln_tensor_new(KILN_F32, KILN_SHAPE(2))};
    assert_int_equal(kiln_run(fm, &x0, o), KILN_OK);
    assert_true(isnan(kiln_tensor_f32(o[0])[0]));
    assert_int_equal(kiln_run(f, &x0, o), KILN_ERR_SHAPE);
    assert_string_equal(kiln_session_error(s),
                        "kiln_run: at symbolic size 0: %4 = reduce_max of "
                        "[4,2]: reduces a symbolic axis, which has no "
                        "elements");
    kiln_tensor *x3 =
        kiln_tensor_from_f32(KILN_SHAPE(3, 2), (float[]){1, -1, 4, 2, -3, 0});
    assert_int_equal(kiln_run(f, &x3, o), KILN_OK);
    th_assert_close_f("mean", kiln_tensor_f32(o[0]),
                      (float[]){2.0f / 3, 1.0f / 3}, 2, 1e-6, 0);
    th_assert_close_f("max", kiln_tensor_f32(o[1]), (float[]){4, 2}, 2, 0, 0);
    /* an input of another rank gives no size: its shape is refused */
    kiln_tensor *x1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(6));
    assert_int_equal(kiln_run(f, &x1, o), KILN_ERR_SHAPE);
    assert_string_equal(kiln_session_error(s),
                        "kiln_run: input 0 ('X') wants f32[3,2], got f32[6]");
    kiln_tensor_free(x1);
    kiln_tensor_free(x0);
    kiln_tensor_free(x3);
    kiln_tensor_free(o[0]);
    kiln_tensor_free(o[1]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sym_marks),
        cmocka_unit_test(test_sym_input_refused),
        cmocka_unit_test(test_any_batch_matches_fixed),
        cmocka_unit_test(test_training_step_by_hand),
        cmocka_unit_test(test_seen_sizes_allocate_nothing),
        cmocka_unit_test(test_baked_size_refused),
        cmocka_unit_test(test_empty_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
