/* Execution settings belong to the session (issue 10, part 4): thread
   count, kernel choice, denormal mode, profile and debug stream are fields
   of each session's execution context.  Two sessions with different
   settings run at once in two threads give each the results, profile and
   debug output it gives alone, and neither they nor the process-wide
   setters called meanwhile change the other's settings.  Labelled
   "threads": CI runs it under -fsanitize=thread. */
#include <pthread.h>
#include <stdatomic.h>

#include "test_helpers.h"

enum { STEPS = 3, ROWS = 24, IN = 33, HID = 17, N_OUT = ROWS * HID + 2 };

/* One session's work, run in any thread: it records failures instead of
   asserting (cmocka asserts only on the main thread). */
typedef struct work {
    kiln_session_options opt;
    FILE *debug; /* the session's debug stream */
    /* results */
    char err[256];
    float out[STEPS][N_OUT]; /* exp(2 tanh(x W)) and the denormal product */
    long profile_calls;
    char profile[4096];        /* the profile's kernel column, one per line */
    kiln_session_options seen; /* kiln_session_get_options at the end */
} work;

static void work_fail(work *w, const char *what, const char *msg)
{
    if (!w->err[0])
        snprintf(w->err, sizeof w->err, "%s: %s", what, msg);
}

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The kernel column of a printed profile, one per line in sorted order:
   without the times, and the order by time, which vary between runs. */
static void profile_kernels(kiln_session *s, char *buf, size_t len)
{
    static _Thread_local char rows[64][128];
    char line[512];
    int n = 0;
    FILE *f = tmpfile();
    buf[0] = 0;
    if (f && kiln_session_print_profile(s, f) == KILN_OK) {
        rewind(f);
        while (fgets(line, sizeof line, f) && n < 64) {
            const char *k = strstr(line, "  %");
            if (k && k[3] >= '0' && k[3] <= '9')
                snprintf(rows[n++], sizeof rows[0], "%s", k + 2);
        }
    }
    if (f)
        fclose(f);
    qsort(rows, (size_t)n, sizeof rows[0], by_text);
    for (int i = 0, used = 0; i < n && used < (int)len; i++)
        used += snprintf(buf + used, len - (size_t)used, "%s", rows[i]);
}

/* exp(2 tanh(x W)) of a [ROWS, IN] input, and a * b on denormal-making
   inputs, compiled once and run STEPS times. */
static kiln_function *build(kiln_session *s, kiln_graph *g, kiln_node **in)
{
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    float w[IN * HID];
    for (int i = 0; i < IN * HID; i++)
        w[i] = (float)(kiln_rng_uniform(&r) - 0.5);
    in[0] = kiln_input(g, "x", KILN_F32, KILN_SHAPE(ROWS, IN));
    in[1] = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2));
    kiln_node *wn = kiln_constant(g, KILN_F32, KILN_SHAPE(IN, HID), w);
    kiln_node *h = kiln_tanh(g, kiln_matmul(g, in[0], wn, 0, 0));
    kiln_node *out[2] = {kiln_exp(g, kiln_mul(g, h, kiln_scalar(g, 2.0f))),
                         kiln_mul(g, in[1], in[1])};
    return kiln_compile(s, g, out, 2, in, 2);
}

static void run_steps(work *w, kiln_session *s, kiln_function *f)
{
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(ROWS, IN));
    float av[2] = {1e-20f, 3.0f};
    kiln_tensor *a = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), av);
    kiln_rng r;
    kiln_rng_seed(&r, 9);
    for (int t = 0; t < STEPS && x && a; t++) {
        float *xv = kiln_tensor_f32(x);
        for (int64_t i = 0; i < ROWS * IN; i++)
            xv[i] = (float)(2 * kiln_rng_uniform(&r) - 1);
        kiln_tensor *o[2] = {
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(ROWS, HID), w->out[t]),
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), w->out[t] + N_OUT - 2)};
        if (kiln_run(f, (kiln_tensor *[]){x, a}, o) != KILN_OK)
            work_fail(w, "kiln_run", kiln_session_error(s));
        kiln_tensor_free(o[0]);
        kiln_tensor_free(o[1]);
    }
    kiln_tensor_free(x);
    kiln_tensor_free(a);
}

/* A dynamic graph with a kiln_debug node: forward prints it to the
   session's debug stream. */
static void run_debug(work *w, kiln_session *s)
{
    kiln_graph *g = kiln_graph_new();
    float v[3] = {1, 2, 3};
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(3), v);
    kiln_debug(kiln_exp(g, c), "probe");
    if (kiln_forward(s, g) != KILN_OK)
        work_fail(w, "kiln_forward", kiln_session_error(s));
    kiln_graph_free(g);
}

static void *run_work(void *arg)
{
    work *w = arg;
    w->opt.debug_stream = w->debug;
    kiln_session *s = kiln_session_new(&w->opt);
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[2];
    kiln_function *f = s ? build(s, g, in) : NULL;
    if (!f) {
        work_fail(w, "setup", s ? kiln_session_error(s) : kiln_last_error());
    } else {
        run_steps(w, s, f);
        run_debug(w, s);
        w->profile_calls = kiln_session_profile_calls(s);
        profile_kernels(s, w->profile, sizeof w->profile);
        kiln_session_get_options(s, &w->seen);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
    return NULL;
}

/* Reads a debug stream back and counts its "Debug: probe" heads. */
static int probes(FILE *f)
{
    char line[512];
    int n = 0;
    rewind(f);
    while (fgets(line, sizeof line, f))
        n += strstr(line, "Debug: probe op=exp") != NULL;
    return n;
}

/* Session A: one thread, reference kernels, flushing, profiling.  Session
   B: two threads, fast kernels, IEEE denormals, no profile. */
static void make_pair(work *a, work *b)
{
    memset(a, 0, sizeof *a);
    memset(b, 0, sizeof *b);
    a->opt = (kiln_session_options){.seed = 3,
                                    .threads = 1,
                                    .reference_kernels = 1,
                                    .flush_denormals = 1,
                                    .profile = 1};
    b->opt = (kiln_session_options){.seed = 4,
                                    .threads = 2,
                                    .reference_kernels = -1,
                                    .flush_denormals = -1,
                                    .profile = -1};
    assert_non_null(a->debug = tmpfile());
    assert_non_null(b->debug = tmpfile());
}

static void check_alone(const work *w)
{
    if (w->err[0])
        fail_msg("%s", w->err);
}

/* What a session reports of its settings is what it was made with. */
static void check_settings(const work *w)
{
    assert_int_equal(w->seen.seed, w->opt.seed);
    assert_int_equal(w->seen.threads, w->opt.threads);
    assert_int_equal(w->seen.reference_kernels, w->opt.reference_kernels);
    assert_int_equal(w->seen.flush_denormals, w->opt.flush_denormals);
    assert_int_equal(w->seen.profile, w->opt.profile);
    assert_ptr_equal(w->seen.debug_stream, w->debug);
}

static atomic_int running;

static void *run_and_count(void *arg)
{
    run_work(arg);
    atomic_fetch_sub(&running, 1);
    return NULL;
}

/* Runs a and b at once while the process defaults flip under them. */
static void run_together(work *a, work *b)
{
    pthread_t ta, tb;
    atomic_store(&running, 2);
    assert_int_equal(pthread_create(&ta, NULL, run_and_count, a), 0);
    assert_int_equal(pthread_create(&tb, NULL, run_and_count, b), 0);
    for (int i = 0; atomic_load(&running) > 0; i++) {
        kiln_set_reference_kernels(i & 1);
        kiln_set_flush_denormals(i & 1);
        kiln_set_num_threads(1 + i % 3);
        kiln_set_debug_stream(i & 1 ? stderr : NULL);
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    kiln_set_reference_kernels(0);
    kiln_set_flush_denormals(1);
    kiln_set_num_threads(0);
    kiln_set_debug_stream(NULL);
}

static void test_two_sessions_two_settings(void **state)
{
    (void)state;
    static work a1, b1, a2, b2; /* large: off the stack */
    make_pair(&a1, &b1);
    make_pair(&a2, &b2);
    run_work(&a1);
    run_work(&b1);
    check_alone(&a1);
    check_alone(&b1);
    run_together(&a2, &b2);
    check_alone(&a2);
    check_alone(&b2);
    /* each gives bitwise what it gives alone */
    assert_memory_equal(a1.out, a2.out, sizeof a1.out);
    assert_memory_equal(b1.out, b2.out, sizeof b1.out);
    /* the kernel choice is the session's: the reference exp and tanh are
       libm's, the fast ones vectorised, and they differ in the last bits */
    for (int t = 0; t < STEPS; t++)
        assert_memory_not_equal(a1.out[t], b1.out[t],
                                ROWS * HID * sizeof(float));
    /* and so is the denormal mode: A flushes 1e-40 to 0, B keeps it */
    for (int t = 0; t < STEPS; t++) {
        assert_true(a2.out[t][N_OUT - 2] == 0.0f);
        assert_true(b2.out[t][N_OUT - 2] > 0.0f);
        assert_true(a2.out[t][N_OUT - 1] == 9.0f);
    }
    /* the profile is A's alone, the same kernels and calls as alone: at
       least the matmul and the elementwise work STEPS times and the exp of
       the debug graph once; B has none */
    assert_true(a1.profile_calls >= 2 * STEPS + 1);
    assert_int_equal(a2.profile_calls, a1.profile_calls);
    assert_string_equal(a2.profile, a1.profile);
    assert_non_null(strstr(a1.profile, "matmul"));
    assert_int_equal(b1.profile_calls, -1);
    assert_int_equal(b2.profile_calls, -1);
    /* each debug stream holds its own session's probe, once per run */
    assert_int_equal(probes(a1.debug), 1);
    assert_int_equal(probes(b1.debug), 1);
    assert_int_equal(probes(a2.debug), 1);
    assert_int_equal(probes(b2.debug), 1);
    check_settings(&a2);
    check_settings(&b2);
    fclose(a1.debug);
    fclose(b1.debug);
    fclose(a2.debug);
    fclose(b2.debug);
}

/* Zero options take the process defaults as they are when the session is
   made; -1 and 1 override them. */
static void test_options_and_defaults(void **state)
{
    (void)state;
    kiln_set_reference_kernels(1);
    kiln_set_flush_denormals(0);
    kiln_set_num_threads(3);
    kiln_set_debug_stream(stdout);
    kiln_session *d = kiln_session_new(NULL);
    kiln_session_options o = {
        .seed = 8, .reference_kernels = -1, .flush_denormals = 1};
    kiln_session *s = kiln_session_new(&o);
    kiln_set_reference_kernels(0);
    kiln_set_flush_denormals(1);
    kiln_set_num_threads(0);
    kiln_set_debug_stream(NULL);
    kiln_session_options got;
    assert_int_equal(kiln_session_get_options(d, &got), KILN_OK);
    assert_int_equal(got.seed, 42);
    assert_int_equal(got.threads, 3);
    assert_int_equal(got.reference_kernels, 1);
    assert_int_equal(got.flush_denormals, -1);
    assert_ptr_equal(got.debug_stream, stdout);
    assert_int_equal(kiln_session_get_options(s, &got), KILN_OK);
    assert_int_equal(got.seed, 8);
    assert_int_equal(got.threads, 3);
    assert_int_equal(got.reference_kernels, -1);
    assert_int_equal(got.flush_denormals, 1);
    kiln_session_free(d);
    kiln_session_free(s);
}

/* The session setters change one session only. */
static void test_setters(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL), *t = kiln_session_new(NULL);
    kiln_session_options before, got;
    assert_int_equal(kiln_session_get_options(t, &before), KILN_OK);
    assert_int_equal(kiln_session_set_threads(s, 5), KILN_OK);
    assert_int_equal(kiln_session_set_reference_kernels(s, 1), KILN_OK);
    assert_int_equal(kiln_session_set_flush_denormals(s, 0), KILN_OK);
    assert_int_equal(kiln_session_set_debug_stream(s, stdout), KILN_OK);
    assert_int_equal(kiln_session_set_profiling(s, 1), KILN_OK);
    assert_int_equal(kiln_session_get_options(s, &got), KILN_OK);
    assert_int_equal(got.threads, 5);
    assert_int_equal(got.reference_kernels, 1);
    assert_int_equal(got.flush_denormals, -1);
    assert_int_equal(got.profile, 1);
    assert_ptr_equal(got.debug_stream, stdout);
    assert_int_equal(kiln_session_profile_calls(s), 0);
    assert_int_equal(kiln_session_get_options(t, &got), KILN_OK);
    assert_memory_equal(&got, &before, sizeof got);
    assert_int_equal(kiln_session_set_profiling(s, 0), KILN_OK);
    assert_int_equal(kiln_session_profile_calls(s), -1);
    assert_int_equal(kiln_session_print_profile(s, stderr), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_session_error(s), "profiling is off"));
    assert_int_equal(kiln_session_set_threads(s, -1), KILN_ERR_ARG);
    assert_string_equal(kiln_session_error(s),
                        "kiln_session_set_threads: -1 threads: give 0 for "
                        "the default or a count from 1");
    /* a success clears the message */
    assert_int_equal(kiln_session_set_threads(s, 0), KILN_OK);
    assert_string_equal(kiln_session_error(s), "");
    assert_int_equal(kiln_session_threads(s), kiln_session_threads(t));
    kiln_session_free(s);
    kiln_session_free(t);
}

static void test_bad_options(void **state)
{
    (void)state;
    kiln_session_options o = {.profile = 2};
    assert_null(kiln_session_new(&o));
    assert_string_equal(kiln_last_error(),
                        "kiln_session_new: profile is 2: give 1 (on), -1 "
                        "(off) or 0 (the default)");
    o = (kiln_session_options){.reference_kernels = -3};
    assert_null(kiln_session_new(&o));
    assert_non_null(strstr(kiln_last_error(), "reference_kernels is -3"));
    kiln_session_options got;
    assert_int_equal(kiln_session_get_options(NULL, &got), KILN_ERR_ARG);
    assert_string_equal(kiln_last_error(),
                        "kiln_session_get_options: session is NULL");
    assert_int_equal(kiln_session_set_profiling(NULL, 1), KILN_ERR_ARG);
    assert_int_equal(kiln_session_profile_calls(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_sessions_two_settings),
        cmocka_unit_test(test_options_and_defaults),
        cmocka_unit_test(test_setters),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
