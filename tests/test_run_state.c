/* The IR holds no run-time state (issue 10): one graph run dynamically by
   two sessions, one after the other and at once on two threads, with
   different variable values, gives each session its own results (checked
   against values computed here by hand), and leaves the graph's bytes as
   they were.  Labelled "threads": CI runs it under -fsanitize=thread. */
#include <pthread.h>

#include "test_helpers.h"

#include "runtime/dynamic.h"
#include "runtime/runtime.h"

enum { N = 4, ITERS = 40 };

/* y = W * x + b, loss = sum(y * y); dloss/dW = 2 y x, dloss/db = 2 sum(y). */
typedef struct model {
    kiln_node *x, *w, *b, *loss, *dw, *db;
} model;

static model build(kiln_graph *g, int grad_nodes)
{
    static const float w0[N] = {1, 1, 1, 1};
    static const float b0[1] = {0};
    model m = {0};
    m.x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(N));
    m.w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(N), kiln_init_values(w0));
    m.b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(1), kiln_init_values(b0));
    kiln_node *y = kiln_add(g, kiln_mul(g, m.w, m.x), m.b);
    m.loss = kiln_sum(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0);
    if (grad_nodes) {
        m.dw = kiln_grad(g, m.loss, m.w);
        m.db = kiln_grad(g, m.loss, m.b);
    }
    th_assert_graph_ok(g);
    return m;
}

/* What the model gives for w, b, x, in double. */
typedef struct expect {
    double loss, dw[N], db;
} expect;

static expect by_hand(const float *w, float b, const float *x)
{
    expect e = {0};
    for (int i = 0; i < N; i++) {
        double y = (double)w[i] * x[i] + b;
        e.loss += y * y;
        e.dw[i] = 2 * y * x[i];
        e.db += 2 * y;
    }
    return e;
}

/* The session's W, b and input x for iteration k of worker `who`. */
static void values_for(int who, int k, float *w, float *b, float *x)
{
    for (int i = 0; i < N; i++) {
        w[i] = (float)(who ? -0.5 * (i + 1) + 0.01 * k : 0.25 * i - 0.02 * k);
        x[i] = (float)(who ? 1.5 - i + 0.1 * k : 0.5 * i - 1 - 0.05 * k);
    }
    *b = (float)(who ? 0.75 - 0.01 * k : -0.25 + 0.03 * k);
}

static kiln_status set_tensor(kiln_session *s, const char *var,
                              kiln_node *input, const float *v, int64_t n)
{
    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(n), v);
    if (!t)
        return KILN_ERR_MEMORY;
    kiln_status st =
        var ? kiln_variable_write(s, var, t) : kiln_feed(s, input, t);
    kiln_tensor_free(t);
    return st;
}

/* The graph and every node as bytes: a run must not change one of them. */
typedef struct snapshot {
    kiln_graph g;
    int n;
    kiln_node *nodes;
    kiln_node **ins; /* each node's inputs, concatenated */
    int n_ins;
} snapshot;

static snapshot take(const kiln_graph *g)
{
    snapshot sn = {.g = *g, .n = g->n_nodes};
    sn.nodes = malloc((size_t)sn.n * sizeof *sn.nodes);
    sn.ins = malloc((size_t)sn.n * 3 * sizeof *sn.ins + 1);
    assert_non_null(sn.nodes);
    assert_non_null(sn.ins);
    for (int i = 0; i < sn.n; i++) {
        sn.nodes[i] = *g->nodes[i];
        assert_true(g->nodes[i]->n_in <= 3);
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            sn.ins[sn.n_ins++] = g->nodes[i]->in[k];
    }
    return sn;
}

/* The first sn.n nodes (all of them when whole) are as in sn; when whole,
   the graph's own bytes too. */
static void same_as(const snapshot *sn, const kiln_graph *g, int whole)
{
    if (whole)
        assert_memory_equal(&sn->g, g, sizeof *g);
    for (int i = 0, at = 0; i < sn->n; i++) {
        assert_memory_equal(&sn->nodes[i], g->nodes[i], sizeof(kiln_node));
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            assert_ptr_equal(sn->ins[at++], g->nodes[i]->in[k]);
    }
}

static void drop(snapshot *sn)
{
    free(sn->nodes);
    free(sn->ins);
}

/* grads: 0 none, 1 of W and b, 2 of W only (b frozen in s). */
static void expect_results(kiln_session *s, const model *m, const expect *e,
                           int grads)
{
    const float *l = kiln_node_value_f32(s, m->loss);
    assert_non_null(l);
    assert_float_equal(l[0], e->loss, 1e-4 * (1 + e->loss));
    if (!grads)
        return;
    const float *dw = kiln_node_grad_f32(s, m->w);
    const float *db = kiln_node_grad_f32(s, m->b);
    assert_non_null(dw);
    th_assert_close("dW", dw, e->dw, N, 1e-5, 1e-5);
    if (grads == 2) {
        assert_null(db);
        return;
    }
    assert_non_null(db);
    assert_float_equal(db[0], e->db, 1e-4);
}

static void declare(kiln_session *s, const float *w, float b, int train_b)
{
    const float bb[1] = {b};
    assert_int_equal(kiln_session_declare(s, "W", KILN_F32, KILN_SHAPE(N),
                                          kiln_init_values(w), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(s, "b", KILN_F32, KILN_SHAPE(1),
                                          kiln_init_values(bb), train_b),
                     KILN_OK);
}

static void read_var(kiln_session *s, const char *name, float *out, int n)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(n));
    assert_non_null(t);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    memcpy(out, kiln_tensor_f32(t), (size_t)n * sizeof *out);
    kiln_tensor_free(t);
}

/* Two sessions, one after the other, interleaved: forward, backward and
   an SGD step each on its own variables, b frozen in the second only;
   results never mix, and only kiln_backward (which builds gradient nodes)
   adds to the graph: the freeze is not written into the variable node. */
static void test_two_sessions_in_turn(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    model m = build(g, 0);
    kiln_session *s[2] = {kiln_session_new(NULL), kiln_session_new(NULL)};
    float w[2][N], b[2], x[2][N];
    expect e[2];
    snapshot sn = take(g);
    for (int who = 0; who < 2; who++) {
        values_for(who, 0, w[who], &b[who], x[who]);
        e[who] = by_hand(w[who], b[who], x[who]);
        declare(s[who], w[who], b[who], who == 0);
        assert_int_equal(set_tensor(s[who], NULL, m.x, x[who], N), KILN_OK);
    }
    assert_true(fabs(e[0].loss - e[1].loss) > 1);
    for (int who = 0; who < 2; who++)
        assert_int_equal(kiln_forward(s[who], g), KILN_OK);
    for (int who = 0; who < 2; who++)
        expect_results(s[who], &m, &e[who], 0);
    same_as(&sn, g, 1);

    for (int who = 0; who < 2; who++)
        assert_int_equal(kiln_backward(s[who], g, m.loss), KILN_OK);
    for (int who = 0; who < 2; who++)
        expect_results(s[who], &m, &e[who], who ? 2 : 1);
    same_as(&sn, g, 0);
    drop(&sn);

    sn = take(g);
    for (int who = 0; who < 2; who++)
        assert_int_equal(kiln_sgd_step(s[who], g, 0.125f), KILN_OK);
    same_as(&sn, g, 1);
    for (int who = 0; who < 2; who++) {
        float got[N], want[N], got_b;
        read_var(s[who], "W", got, N);
        for (int i = 0; i < N; i++)
            want[i] = (float)(w[who][i] - 0.125 * e[who].dw[i]);
        th_assert_close_f("W after the step", got, want, N, 1e-6, 1e-6);
        read_var(s[who], "b", &got_b, 1);
        assert_float_equal(got_b, who ? b[1] : b[0] - 0.125 * e[0].db, 1e-6);
    }
    assert_int_equal(kiln_node_trainable(m.b), 1);
    drop(&sn);

    /* a clear drops the values of both; the new nodes have none yet */
    kiln_graph_clear(g);
    model m2 = build(g, 0);
    for (int who = 0; who < 2; who++) {
        kiln_workspace_stats ws;
        assert_null(kiln_node_value_f32(s[who], m.loss));
        assert_null(kiln_node_value_f32(s[who], m2.loss));
        assert_int_equal(kiln_session_workspace_stats(s[who], g, &ws), KILN_OK);
        assert_int_equal(ws.used, 0);
    }
    kiln_session_free(s[0]);
    kiln_session_free(s[1]);
    kiln_graph_free(g);
}

/* One thread's run of the shared graph: its own session, variable values
   and inputs, ITERS forwards, each checked by hand; with backward, each
   followed by kiln_backward, which reads the gradients the graph has (m's
   dw and db unused).  It records failures instead of asserting (cmocka
   asserts only on the main thread). */
typedef struct worker {
    kiln_graph *g;
    const model *m;
    int who;
    int backward;
    int checked;     /* iterations whose results matched */
    int nodes_after; /* the graph's node count after the first backward */
    char err[256];
} worker;

static int close_to(const float *got, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (!got || !(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            return 0;
    return 1;
}

static int check_iteration(worker *wk, kiln_session *s, int k)
{
    float w[N], b, x[N];
    values_for(wk->who, k, w, &b, x);
    if (set_tensor(s, "W", NULL, w, N) != KILN_OK ||
        set_tensor(s, "b", NULL, &b, 1) != KILN_OK ||
        set_tensor(s, NULL, wk->m->x, x, N) != KILN_OK ||
        kiln_forward(s, wk->g) != KILN_OK ||
        (wk->backward && kiln_backward(s, wk->g, wk->m->loss) != KILN_OK)) {
        snprintf(wk->err, sizeof wk->err, "iteration %d: %s", k,
                 kiln_session_error(s));
        return 0;
    }
    if (k == 0) {
        kiln_graph_read_lock(wk->g); /* the other thread may be building */
        wk->nodes_after = wk->g->n_nodes;
        kiln_graph_unlock(wk->g);
    }
    expect e = by_hand(w, b, x);
    const float *dw = wk->backward ? kiln_node_grad_f32(s, wk->m->w)
                                   : kiln_node_value_f32(s, wk->m->dw);
    const float *db = wk->backward ? kiln_node_grad_f32(s, wk->m->b)
                                   : kiln_node_value_f32(s, wk->m->db);
    if (!close_to(kiln_node_value_f32(s, wk->m->loss), &e.loss, 1, 1e-5) ||
        !close_to(dw, e.dw, N, 1e-5) || !close_to(db, &e.db, 1, 1e-5)) {
        snprintf(wk->err, sizeof wk->err, "iteration %d: wrong results", k);
        return 0;
    }
    return 1;
}

static void *work(void *arg)
{
    worker *wk = arg;
    kiln_session *s = kiln_session_new(NULL);
    float w[N], b, x[N];
    values_for(wk->who, 0, w, &b, x);
    const float bb[1] = {b};
    if (!s ||
        kiln_session_declare(s, "W", KILN_F32, KILN_SHAPE(N),
                             kiln_init_values(w), 1) != KILN_OK ||
        kiln_session_declare(s, "b", KILN_F32, KILN_SHAPE(1),
                             kiln_init_values(bb), 1) != KILN_OK ||
        /* modes are the session's: one worker checks and checkpoints */
        kiln_session_set_checkpointing(s, wk->g, wk->who) != KILN_OK ||
        kiln_session_set_check_finite(s, wk->g, wk->who) != KILN_OK) {
        snprintf(wk->err, sizeof wk->err, "setup failed");
        kiln_session_free(s);
        return NULL;
    }
    for (int k = 0; k < ITERS && check_iteration(wk, s, k); k++)
        wk->checked++;
    kiln_session_free(s);
    return NULL;
}

/* Two workers on g at once, each checking all ITERS iterations. */
static void run_workers(worker *wk)
{
    pthread_t tid[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, work, &wk[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < 2; i++) {
        if (wk[i].err[0])
            fail_msg("worker %d: %s", i, wk[i].err);
        assert_int_equal(wk[i].checked, ITERS);
    }
}

/* The same graph, with its gradient nodes built beforehand, run by two
   threads at once: each gets its own results, the graph stays as built. */
static void test_two_sessions_in_threads(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    model m = build(g, 1);
    snapshot sn = take(g);
    worker wk[2] = {{.g = g, .m = &m, .who = 0}, {.g = g, .m = &m, .who = 1}};
    run_workers(wk);
    same_as(&sn, g, 1);
    drop(&sn);
    kiln_graph_free(g);
}

/* Two threads each run forward and kiln_backward on one graph with no
   gradient nodes yet: whichever backward comes first builds them (while
   the other thread may be running the graph), the other reuses them, and
   ITERS iterations later the graph has the nodes it had after the first
   backward; every result matches the session's own values by hand. */
static void test_backward_in_threads(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    model m = build(g, 0);
    snapshot sn = take(g);
    worker wk[2] = {{.g = g, .m = &m, .who = 0, .backward = 1},
                    {.g = g, .m = &m, .who = 1, .backward = 1}};
    run_workers(wk);
    assert_true(g->n_nodes > sn.n);
    assert_int_equal(g->n_memo, 1);
    for (int i = 0; i < 2; i++)
        assert_int_equal(wk[i].nodes_after, g->n_nodes);
    same_as(&sn, g, 0);
    drop(&sn);
    kiln_graph_free(g);
}

/* One session: kiln_backward twice for the same loss builds gradient
   nodes once and uses the same ones; a session freezing b gets its own
   subgraph, once; kiln_graph_clear drops the memo with the nodes. */
static void test_backward_builds_once(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    model m = build(g, 0);
    kiln_session *s[2] = {kiln_session_new(NULL), kiln_session_new(NULL)};
    float w[N], b, x[N];
    values_for(0, 3, w, &b, x);
    expect e = by_hand(w, b, x);
    for (int who = 0; who < 2; who++) {
        declare(s[who], w, b, who == 0);
        assert_int_equal(set_tensor(s[who], NULL, m.x, x, N), KILN_OK);
        assert_int_equal(kiln_forward(s[who], g), KILN_OK);
    }
    assert_int_equal(kiln_backward(s[0], g, m.loss), KILN_OK);
    int built = g->n_nodes;
    const kiln_node *dw = kiln_run_find(s[0], g)->e[m.w->id].grad;
    assert_int_equal(g->n_memo, 1);
    assert_int_equal(kiln_backward(s[0], g, m.loss), KILN_OK);
    assert_int_equal(kiln_backprop(s[0], g, m.loss), KILN_OK);
    assert_int_equal(g->n_nodes, built);
    assert_ptr_equal(kiln_run_find(s[0], g)->e[m.w->id].grad, dw);
    expect_results(s[0], &m, &e, 1);

    for (int k = 0; k < 2; k++)
        assert_int_equal(kiln_backward(s[1], g, m.loss), KILN_OK);
    assert_int_equal(g->n_memo, 2);
    int frozen = g->n_nodes;
    assert_true(frozen > built);
    assert_int_equal(kiln_backward(s[0], g, m.loss), KILN_OK);
    assert_int_equal(g->n_nodes, frozen);
    expect_results(s[0], &m, &e, 1);
    expect_results(s[1], &m, &e, 2);

    kiln_graph_clear(g);
    assert_int_equal(g->n_memo, 0);
    m = build(g, 0);
    assert_int_equal(set_tensor(s[0], NULL, m.x, x, N), KILN_OK);
    assert_int_equal(kiln_backprop(s[0], g, m.loss), KILN_OK);
    assert_int_equal(g->n_memo, 1);
    assert_int_equal(g->n_nodes, built);
    expect_results(s[0], &m, &e, 1);
    kiln_session_free(s[0]);
    kiln_session_free(s[1]);
    kiln_graph_free(g);
}

/* A session keeps one run state per live graph: two graphs at once keep
   their own values; the state of a freed graph is reclaimed, so building
   a graph per batch does not accumulate them. */
static void test_run_state_per_graph(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *a = kiln_graph_new(), *b = kiln_graph_new();
    kiln_node *va = kiln_fill(a, KILN_SHAPE(2), 3.0f);
    kiln_node *vb = kiln_fill(b, KILN_SHAPE(2), 5.0f);
    assert_int_equal(kiln_forward(s, a), KILN_OK);
    assert_int_equal(kiln_forward(s, b), KILN_OK);
    assert_int_equal(s->n_runs, 2);
    assert_float_equal(kiln_node_value_f32(s, va)[1], 3.0f, 0);
    assert_float_equal(kiln_node_value_f32(s, vb)[1], 5.0f, 0);
    kiln_graph_free(a);
    kiln_graph_free(b);
    for (int batch = 0; batch < 8; batch++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *v = kiln_fill(g, KILN_SHAPE(3), (float)batch);
        assert_int_equal(kiln_forward(s, g), KILN_OK);
        assert_int_equal(s->n_runs, 1);
        assert_float_equal(kiln_node_value_f32(s, v)[2], (float)batch, 0);
        kiln_graph_free(g);
    }
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_sessions_in_turn),
        cmocka_unit_test(test_two_sessions_in_threads),
        cmocka_unit_test(test_backward_in_threads),
        cmocka_unit_test(test_backward_builds_once),
        cmocka_unit_test(test_run_state_per_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
