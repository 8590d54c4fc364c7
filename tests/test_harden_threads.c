/* Threads (issue 9): sessions on separate graphs run at once in separate
   threads give bitwise the values they give alone; the process-wide
   setters may be called while another thread runs and only give new
   sessions their defaults; kiln_session_options.threads is what a run
   splits its work by.  Labelled "threads": CI runs it under
   -fsanitize=thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "test_helpers.h"

#include "cpu/threads.h"

enum { STEPS = 3, MAX_VARS = 4 };

/* One training run from scratch: a compiled MLP step (SGD) or a dynamic
   graph rebuilt every step (Adam), in its own session.  It
   runs in any thread, so it records failures instead of asserting
   (cmocka asserts only on the main thread). */
typedef struct job {
    int dynamic;
    int batch, in, hidden, out;
    int threads; /* kiln_session_options.threads */
    uint64_t seed;
    /* results */
    char err[256];
    float loss[STEPS];
    int n_vars;
    kiln_tensor *vars[MAX_VARS];
} job;

static const char *const VAR_NAMES[MAX_VARS] = {"W0", "b0", "W1", "b1"};

static void job_fail(job *j, const char *what, const char *msg)
{
    if (!j->err[0])
        snprintf(j->err, sizeof j->err, "%s: %s", what, msg);
}

/* Inputs of the run: x uniform in [-1, 1), labels (or targets) from seed. */
static void make_data(const job *j, kiln_tensor *x, kiln_tensor *y)
{
    kiln_rng r;
    kiln_rng_seed(&r, j->seed + 1000);
    th_fill(&r, x, -1, 1, 0);
    if (kiln_tensor_dtype(y) == KILN_I32) {
        int32_t *l = kiln_tensor_i32(y);
        for (int64_t i = 0; i < kiln_tensor_numel(y); i++)
            l[i] = (int32_t)(kiln_rng_u32(&r) % (uint32_t)j->out);
    } else {
        th_fill(&r, y, -1, 1, 0);
    }
}

/* The model's forward pass and loss: relu and softmax cross-entropy for
   the compiled job, gelu and mean squared error for the dynamic one. */
static kiln_node *model_loss(const job *j, kiln_graph *g, kiln_node *x,
                             kiln_node *y)
{
    kiln_node *w0 =
        kiln_variable(g, "W0", KILN_F32, KILN_SHAPE(j->in, j->hidden),
                      kiln_init_glorot_uniform());
    kiln_node *b0 = kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(j->hidden),
                                  kiln_init_uniform(-0.1, 0.1));
    kiln_node *w1 =
        kiln_variable(g, "W1", KILN_F32, KILN_SHAPE(j->hidden, j->out),
                      kiln_init_glorot_uniform());
    kiln_node *b1 = kiln_variable(g, "b1", KILN_F32, KILN_SHAPE(j->out),
                                  kiln_init_uniform(-0.1, 0.1));
    kiln_node *h = kiln_affine(g, x, w0, b0);
    h = j->dynamic ? kiln_gelu(g, h) : kiln_relu(g, h);
    kiln_node *o = kiln_affine(g, h, w1, b1);
    if (!j->dynamic)
        return kiln_softmax_cross_entropy(g, o, y);
    kiln_node *d = kiln_sub(g, o, y);
    return kiln_mean(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0);
}

static void run_compiled(job *j, kiln_session *s, kiln_tensor *xt,
                         kiln_tensor *yt)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(j->batch, j->in));
    kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(j->batch));
    kiln_node *loss = model_loss(j, g, x, y);
    /* plain SGD: the compiler folds weight updates into accumulating
       products (gemm_acc) */
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 0.1f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    kiln_node *outs[2] = {loss,
                          opt ? kiln_optimizer_build_step(opt, g, loss) : NULL};
    kiln_node *ins[2] = {x, y};
    kiln_function *f = opt ? kiln_compile(s, g, outs, 2, ins, 2) : NULL;
    kiln_tensor *lt = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *feeds[2] = {xt, yt}, *res[2] = {lt, NULL};
    if (!f || !lt)
        job_fail(j, "compile", kiln_session_error(s));
    for (int step = 0; step < STEPS && !j->err[0]; step++) {
        if (kiln_run(f, feeds, res) != KILN_OK)
            job_fail(j, "kiln_run", kiln_session_error(s));
        else
            j->loss[step] = kiln_tensor_f32(lt)[0];
    }
    kiln_tensor_free(lt);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
}

static void run_dynamic(job *j, kiln_session *s, kiln_tensor *xt,
                        kiln_tensor *yt)
{
    kiln_graph *g = kiln_graph_new();
    kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
    oo.lr = 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    if (!g || !opt)
        job_fail(j, "setup", kiln_session_error(s));
    for (int step = 0; step < STEPS && !j->err[0]; step++) {
        kiln_graph_clear(g);
        kiln_node *x =
            kiln_input(g, "x", KILN_F32, KILN_SHAPE(j->batch, j->in));
        kiln_node *y =
            kiln_input(g, "y", KILN_F32, KILN_SHAPE(j->batch, j->out));
        kiln_node *loss = model_loss(j, g, x, y);
        if (kiln_feed(s, x, xt) != KILN_OK || kiln_feed(s, y, yt) != KILN_OK ||
            kiln_backprop(s, g, loss) != KILN_OK ||
            kiln_optimizer_update(opt, g) != KILN_OK)
            job_fail(j, "dynamic step", kiln_session_error(s));
        else
            j->loss[step] = kiln_node_value_f32(s, loss)[0];
    }
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
}

static void read_vars(job *j, kiln_session *s)
{
    kiln_shape shapes[MAX_VARS] = {
        KILN_SHAPE(j->in, j->hidden), KILN_SHAPE(j->hidden),
        KILN_SHAPE(j->hidden, j->out), KILN_SHAPE(j->out)};
    for (int v = 0; v < MAX_VARS && !j->err[0]; v++) {
        kiln_tensor *t = kiln_tensor_new(KILN_F32, shapes[v]);
        if (!t || kiln_variable_read(s, VAR_NAMES[v], t) != KILN_OK) {
            job_fail(j, "kiln_variable_read", kiln_session_error(s));
            kiln_tensor_free(t);
            return;
        }
        j->vars[j->n_vars++] = t;
    }
}

static void *run_job(void *arg)
{
    job *j = arg;
    kiln_session_options so = {.seed = j->seed, .threads = j->threads};
    kiln_session *s = kiln_session_new(&so);
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(j->batch, j->in));
    kiln_tensor *y =
        j->dynamic ? kiln_tensor_new(KILN_F32, KILN_SHAPE(j->batch, j->out))
                   : kiln_tensor_new(KILN_I32, KILN_SHAPE(j->batch));
    if (!s || !x || !y) {
        job_fail(j, "setup", kiln_last_error());
    } else {
        make_data(j, x, y);
        if (j->dynamic)
            run_dynamic(j, s, x, y);
        else
            run_compiled(j, s, x, y);
        read_vars(j, s);
    }
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_session_free(s);
    return NULL;
}

static void job_clear(job *j)
{
    for (int v = 0; v < j->n_vars; v++)
        kiln_tensor_free(j->vars[v]);
    j->n_vars = 0;
    j->err[0] = 0;
    memset(j->loss, 0, sizeof j->loss);
}

/* The MNIST-sized MLP (every product of its step is split over threads)
   and a differently shaped dynamic one. */
static job mlp_job(int threads)
{
    job j = {0};
    j.batch = 128, j.in = 784, j.hidden = 600, j.out = 10;
    j.threads = threads;
    j.seed = 11;
    return j;
}

static job dynamic_job(int threads)
{
    job j = {0};
    j.dynamic = 1;
    j.batch = 48, j.in = 300, j.hidden = 256, j.out = 200;
    j.threads = threads;
    j.seed = 5;
    return j;
}

/* Bitwise: every loss and every variable. */
static void assert_same_run(const char *what, const job *got, const job *want)
{
    if (got->err[0])
        fail_msg("%s: %s", what, got->err);
    assert_int_equal(got->n_vars, MAX_VARS);
    for (int i = 0; i < STEPS; i++)
        if (memcmp(&got->loss[i], &want->loss[i], sizeof(float)) != 0)
            fail_msg("%s: loss of step %d is %.9g, alone %.9g", what, i,
                     got->loss[i], want->loss[i]);
    for (int v = 0; v < MAX_VARS; v++) {
        const float *g = kiln_tensor_f32(got->vars[v]),
                    *w = kiln_tensor_f32(want->vars[v]);
        for (int64_t i = 0; i < kiln_tensor_numel(want->vars[v]); i++)
            if (memcmp(&g[i], &w[i], sizeof(float)) != 0)
                fail_msg("%s: %s[%lld] is %.9g, alone %.9g", what, VAR_NAMES[v],
                         (long long)i, g[i], w[i]);
    }
}

static void run_alone(job *j)
{
    run_job(j);
    if (j->err[0])
        fail_msg("alone: %s", j->err);
    /* the run trained: its loss moved */
    assert_true(j->loss[STEPS - 1] != j->loss[0]);
}

/* Runs jobs[0..n) at once, one thread each. */
static void run_together(job *jobs, int n)
{
    pthread_t tid[4];
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, run_job, &jobs[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
}

static void test_concurrent_sessions_match_serial(void **state)
{
    (void)state;
    job alone[3] = {mlp_job(2), dynamic_job(2), mlp_job(3)};
    for (int i = 0; i < 3; i++)
        run_alone(&alone[i]);
    for (int round = 0; round < 3; round++) {
        job both[3] = {mlp_job(2), dynamic_job(2), mlp_job(3)};
        run_together(both, 3);
        assert_same_run("MLP, 2 threads, beside others", &both[0], &alone[0]);
        assert_same_run("dynamic, 2 threads, beside others", &both[1],
                        &alone[1]);
        assert_same_run("MLP, 3 threads, beside others", &both[2], &alone[2]);
        for (int i = 0; i < 3; i++)
            job_clear(&both[i]);
    }
    /* two sessions of the same model on separate graphs */
    job twins[2] = {mlp_job(2), mlp_job(2)};
    run_together(twins, 2);
    assert_same_run("MLP twin 1", &twins[0], &alone[0]);
    assert_same_run("MLP twin 2", &twins[1], &alone[0]);
    for (int i = 0; i < 2; i++)
        job_clear(&twins[i]);
    for (int i = 0; i < 3; i++)
        job_clear(&alone[i]);
}

/* The setters race with nothing a running session reads: a session keeps
   the thread count and denormal mode it was made with. */
typedef struct setter_arg {
    atomic_int done;
    long calls;
} setter_arg;

static void *call_setters(void *arg)
{
    setter_arg *a = arg;
    while (!atomic_load(&a->done)) {
        kiln_set_num_threads((int)(a->calls % 4) + 1);
        kiln_set_flush_denormals(1);
        a->calls++;
    }
    return NULL;
}

static void test_setters_during_runs(void **state)
{
    (void)state;
    job alone = mlp_job(2);
    run_alone(&alone);
    for (int round = 0; round < 2; round++) {
        setter_arg a = {0, 0};
        pthread_t tid;
        job busy = mlp_job(2);
        assert_int_equal(pthread_create(&tid, NULL, call_setters, &a), 0);
        run_job(&busy);
        atomic_store(&a.done, 1);
        pthread_join(tid, NULL);
        assert_true(a.calls > 0);
        assert_same_run("MLP while setters run", &busy, &alone);
        job_clear(&busy);
    }
    kiln_set_num_threads(0);
    job_clear(&alone);
}

/* kiln_set_num_threads: 0 means one per core, large counts are capped. */
static void test_set_num_threads_values(void **state)
{
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(kiln_set_num_threads(0), cores > 0 ? (int)cores : 1);
    assert_int_equal(kiln_set_num_threads(-5), cores > 0 ? (int)cores : 1);
    assert_int_equal(kiln_set_num_threads(100000), 256);
    assert_int_equal(kiln_set_num_threads(2), 2);
    kiln_set_num_threads(0);
}

/* out = a b for [m,k] x [k,n] computed in session s (compiled), checked
   against double sums; returns the shares its product was split into. */
static int product_shares(kiln_session *s, int64_t m, int64_t n, int64_t k)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(m, k));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(k, n));
    kiln_node *p = kiln_matmul(g, a, b, 0, 0);
    kiln_function *f = kiln_compile(s, g, &p, 1, (kiln_node *[]){a, b}, 2);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_tensor *at = th_rand(&r, KILN_SHAPE(m, k), -1, 1);
    kiln_tensor *bt = th_rand(&r, KILN_SHAPE(k, n), -1, 1);
    kiln_tensor *ot = kiln_function_new_output(f, 0);
    assert_int_equal(kiln_run(f, (kiln_tensor *[]){at, bt}, &ot), KILN_OK);
    int shares = kiln_par_last_shares();
    const float *av = kiln_tensor_f32(at), *bv = kiln_tensor_f32(bt),
                *ov = kiln_tensor_f32(ot);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t q = 0; q < k; q++)
                want += (double)av[i * k + q] * bv[q * n + j];
            if (fabs(ov[i * n + j] - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("[%lld,%lld]x[%lld,%lld]: out[%lld,%lld] %.7g, want "
                         "%.7g",
                         (long long)m, (long long)k, (long long)k, (long long)n,
                         (long long)i, (long long)j, ov[i * n + j], want);
        }
    kiln_tensor_free(at);
    kiln_tensor_free(bt);
    kiln_tensor_free(ot);
    kiln_graph_free(g);
    return shares;
}

/* kiln_session_options.threads is what the session's runs split by,
   whatever the process default is then; 0 takes the default of the time
   the session is made. */
static void test_session_threads_option(void **state)
{
    (void)state;
    kiln_set_num_threads(3);
    kiln_session_options o1 = {.seed = 1, .threads = 1},
                         o2 = {.seed = 1, .threads = 2},
                         o0 = {.seed = 1, .threads = 0},
                         big = {.seed = 1, .threads = 100000};
    kiln_session *s1 = kiln_session_new(&o1), *s2 = kiln_session_new(&o2),
                 *s0 = kiln_session_new(&o0), *sb = kiln_session_new(&big),
                 *sn = kiln_session_new(NULL);
    assert_non_null(s1);
    assert_non_null(s2);
    assert_non_null(s0);
    assert_non_null(sb);
    assert_non_null(sn);
    kiln_set_num_threads(1);
    assert_int_equal(kiln_session_threads(s1), 1);
    assert_int_equal(kiln_session_threads(s2), 2);
    assert_int_equal(kiln_session_threads(s0), 3);
    assert_int_equal(kiln_session_threads(sn), 3);
    assert_int_equal(kiln_session_threads(sb), 256);
    assert_int_equal(kiln_session_threads(NULL), 0);
    /* row blocks of a tall product, column blocks of a wide one (too few
       rows to share), output blocks of a GEMV */
    static const int64_t mnk[][3] = {
        {256, 200, 300}, {8, 2048, 300}, {1, 4096, 300}};
    for (size_t c = 0; c < sizeof mnk / sizeof *mnk; c++) {
        int64_t m = mnk[c][0], n = mnk[c][1], k = mnk[c][2];
        assert_int_equal(product_shares(s1, m, n, k), 1);
        assert_int_equal(product_shares(s2, m, n, k), 2);
        assert_int_equal(product_shares(s0, m, n, k), 3);
    }
    /* the dynamic path too */
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_fill(g, KILN_SHAPE(512, 512), 0.5f);
    kiln_node *y = kiln_matmul(g, x, x, 0, 0);
    assert_int_equal(kiln_forward(s2, g), KILN_OK);
    assert_int_equal(kiln_par_last_shares(), 2);
    assert_true(kiln_node_value_f32(s2, y)[0] == 128.0f);
    kiln_graph_free(g);
    kiln_session_free(s1);
    kiln_session_free(s2);
    kiln_session_free(s0);
    kiln_session_free(sb);
    kiln_session_free(sn);
    kiln_set_num_threads(0);
}

static void test_session_threads_negative(void **state)
{
    (void)state;
    kiln_session_options o = {.seed = 1, .threads = -2};
    assert_null(kiln_session_new(&o));
    assert_non_null(strstr(kiln_last_error(), "threads is -2"));
}

#if defined(__x86_64__) || defined(__SSE__)
/* Runs a * b on denormal-making inputs in s; returns out[0]. */
static float denormal_product(kiln_session *s)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(2));
    kiln_node *p = kiln_mul(g, a, b);
    kiln_function *f = kiln_compile(s, g, &p, 1, (kiln_node *[]){a, b}, 2);
    assert_non_null(f);
    float av[2] = {1e-20f, 2.0f}, bv[2] = {1e-20f, 3.0f}, ov[2] = {-1, -1};
    kiln_tensor *at = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), av);
    kiln_tensor *bt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), bv);
    kiln_tensor *ot = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), ov);
    assert_int_equal(kiln_run(f, (kiln_tensor *[]){at, bt}, &ot), KILN_OK);
    assert_true(ov[1] == 6.0f);
    kiln_tensor_free(at);
    kiln_tensor_free(bt);
    kiln_tensor_free(ot);
    kiln_graph_free(g);
    return ov[0];
}

/* kiln_set_flush_denormals gives new sessions their mode; a session keeps
   the one it was made with. */
static void test_flush_denormals_per_session(void **state)
{
    (void)state;
    kiln_set_flush_denormals(1);
    kiln_session *flush = kiln_session_new(NULL);
    kiln_set_flush_denormals(0);
    kiln_session *ieee = kiln_session_new(NULL);
    assert_true(denormal_product(flush) == 0.0f);
    assert_true(denormal_product(ieee) > 0.0f);
    kiln_set_flush_denormals(1);
    assert_true(denormal_product(ieee) > 0.0f);
    kiln_set_flush_denormals(0);
    assert_true(denormal_product(flush) == 0.0f);
    kiln_set_flush_denormals(1);
    kiln_session_free(flush);
    kiln_session_free(ieee);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_sessions_match_serial),
        cmocka_unit_test(test_setters_during_runs),
        cmocka_unit_test(test_set_num_threads_values),
        cmocka_unit_test(test_session_threads_option),
        cmocka_unit_test(test_session_threads_negative),
#if defined(__x86_64__) || defined(__SSE__)
        cmocka_unit_test(test_flush_denormals_per_session),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
