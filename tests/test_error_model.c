/* The error model (issue 10, part 5), the rule kiln.h states once: a
   graph's error is sticky until kiln_graph_clear; a session's and a
   program's message is cleared when a call that can fail on it starts, so
   a success never leaves an older failure readable as current; the
   thread-local kiln_last_error is for calls with no object (constructors
   returning NULL, NULL objects). */
#include "test_helpers.h"

/* A session with a dynamic graph y = x * w (x [2], w a variable) and a
   compiled function of the same graph. */
typedef struct fixture {
    kiln_session *s;
    kiln_graph *g;
    kiln_node *x, *w, *y;
    kiln_function *f;
    kiln_tensor *good, *bad, *out;
} fixture;

static void setup(fixture *t)
{
    t->s = kiln_session_new(NULL);
    t->g = kiln_graph_new();
    t->x = kiln_input(t->g, "x", KILN_F32, KILN_SHAPE(2));
    t->w = kiln_variable(t->g, "w", KILN_F32, KILN_SHAPE(2), kiln_init_ones());
    t->y = kiln_sum(t->g, kiln_mul(t->g, t->x, t->w), KILN_ALL_AXES, 0);
    th_assert_graph_ok(t->g);
    t->f = kiln_compile(t->s, t->g, &t->y, 1, &t->x, 1);
    assert_non_null(t->f);
    t->good = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    t->bad = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    t->out = kiln_function_new_output(t->f, 0);
    assert_non_null(t->out);
    assert_string_equal(kiln_session_error(t->s), "");
}

static void teardown(fixture *t)
{
    kiln_tensor_free(t->good);
    kiln_tensor_free(t->bad);
    kiln_tensor_free(t->out);
    kiln_graph_free(t->g);
    kiln_session_free(t->s);
}

/* The session's message after a failed call says why; after the next
   successful call it is "". */
static void expect_failed(kiln_session *s, kiln_status st, const char *needle)
{
    assert_int_not_equal(st, KILN_OK);
    if (!strstr(kiln_session_error(s), needle))
        fail_msg("message '%s' lacks '%s'", kiln_session_error(s), needle);
}

static void expect_clean(kiln_session *s, kiln_status st)
{
    assert_int_equal(st, KILN_OK);
    assert_string_equal(kiln_session_error(s), "");
}

/* Each kind of call on a session: a failure, then a success of the same
   call clears the message. */
static void test_session_success_clears(void **state)
{
    (void)state;
    fixture t;
    setup(&t);
    kiln_session *s = t.s;
    kiln_param_info info;
    expect_failed(s, kiln_feed(s, t.x, t.bad), "kiln_feed");
    expect_clean(s, kiln_feed(s, t.x, t.good));
    expect_failed(s, kiln_run(t.f, &t.bad, &t.out), "kiln_run");
    expect_clean(s, kiln_run(t.f, &t.good, &t.out));
    expect_failed(s, kiln_variable_read(s, "nope", t.good),
                  "kiln_variable_read");
    expect_clean(s, kiln_variable_read(s, "w", t.good));
    expect_failed(s, kiln_variable_write(s, "w", t.bad), "kiln_variable_write");
    expect_clean(s, kiln_variable_write(s, "w", t.good));
    expect_failed(s,
                  kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(5),
                                       kiln_init_zeros(), 1),
                  "variable 'w' is f32[2]");
    expect_clean(s, kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                         kiln_init_zeros(), 1));
    expect_failed(s, kiln_session_set_trainable(s, "nope", 1),
                  "kiln_session_set_trainable");
    expect_clean(s, kiln_session_set_trainable(s, "w", 1));
    expect_failed(s, kiln_session_variable_info(s, 7, &info),
                  "kiln_session_variable_info");
    expect_clean(s, kiln_session_variable_info(s, 0, &info));
    expect_failed(s, kiln_backward(s, t.g, t.y), "kiln_backward");
    expect_clean(s, kiln_forward(s, t.g));
    expect_clean(s, kiln_backward(s, t.g, t.y));
    expect_failed(s, kiln_session_set_checkpointing(s, NULL, 1),
                  "kiln_session_set_checkpointing");
    expect_clean(s, kiln_session_set_checkpointing(s, t.g, 0));
    expect_failed(s, kiln_session_set_threads(s, -4),
                  "kiln_session_set_threads");
    expect_clean(s, kiln_session_set_threads(s, 1));
    teardown(&t);
}

/* A success of any call clears a failure of another: no message outlives
   the call after it. */
static void test_session_no_stale_message(void **state)
{
    (void)state;
    fixture t;
    setup(&t);
    kiln_session *s = t.s;
    kiln_node *none = NULL;
    assert_null(kiln_compile(s, t.g, &none, 1, &t.x, 1));
    assert_non_null(strstr(kiln_session_error(s), "kiln_compile"));
    expect_clean(s, kiln_run(t.f, &t.good, &t.out));
    expect_failed(s, kiln_feed(s, t.x, t.bad), "kiln_feed");
    kiln_tensor *v = kiln_node_value(s, t.y);
    assert_null(v); /* not computed yet: a failure of its own */
    assert_non_null(strstr(kiln_session_error(s), "kiln_node_value"));
    expect_clean(s, kiln_feed(s, t.x, t.good));
    expect_clean(s, kiln_forward(s, t.g));
    assert_non_null(v = kiln_node_value(s, t.y));
    assert_string_equal(kiln_session_error(s), "");
    kiln_tensor_free(v);
    /* a call that cannot fail on the session leaves the message alone */
    expect_failed(s, kiln_session_set_threads(s, -1),
                  "kiln_session_set_threads");
    assert_int_equal(kiln_session_set_reference_kernels(s, 0), KILN_OK);
    assert_int_equal(kiln_session_num_variables(s), 1);
    assert_non_null(strstr(kiln_session_error(s), "kiln_session_set_threads"));
    teardown(&t);
}

/* The graph's error is sticky: later successful builders and runs of
   other graphs keep it, kiln_graph_clear clears it. */
static void test_graph_error_sticky(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 3));
    assert_int_equal(kiln_node_id(kiln_matmul(g, a, a, 0, 0)), -1);
    const char *want = "kiln_matmul: [2,3] x [2,3]";
    assert_non_null(strstr(kiln_graph_error(g), want));
    assert_int_equal(kiln_node_id(kiln_relu(g, a)), -1); /* poisoned */
    assert_int_equal(kiln_graph_status(g), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_graph_error(g), want));
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_session_error(s), want));
    assert_non_null(strstr(kiln_graph_error(g), want));
    kiln_graph_clear(g);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    assert_string_equal(kiln_graph_error(g), "");
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* A program's own message (compile, run) is cleared by its next call. */
static void test_program_message_cleared(void **state)
{
    (void)state;
    kiln_program *p = kiln_program_new();
    kiln_stream *in = kiln_h2d_stream(p, "x", KILN_F32, KILN_SHAPE(2));
    kiln_stream *out = kiln_d2h_stream(p, "y", KILN_F32, KILN_SHAPE(2));
    kiln_graph *g = kiln_program_graph(p);
    kiln_node *x = kiln_host_load(p, in, "x");
    assert_int_equal(kiln_host_store(p, out, kiln_relu(g, x)), KILN_OK);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    kiln_stream_data d = {in, xt};
    assert_int_equal(kiln_program_run(p, &d, 1), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_program_error(p), "compile the program"));
    assert_int_equal(kiln_program_compile(p, NULL), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_program_error(p), "session is NULL"));
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_program_compile(p, s), KILN_OK);
    assert_string_equal(kiln_program_error(p), "");
    assert_int_equal(kiln_program_run(p, &d, 1), KILN_OK);
    assert_string_equal(kiln_program_error(p), "");
    kiln_stream_data twice[2] = {{in, xt}, {in, xt}};
    assert_int_equal(kiln_program_run(p, twice, 2), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_program_error(p), "bound twice"));
    assert_int_equal(kiln_program_run(p, &d, 1), KILN_OK);
    assert_string_equal(kiln_program_error(p), "");
    kiln_tensor_free(xt);
    kiln_session_free(s);
    kiln_program_free(p);
}

/* The thread-local message is for calls with no object: constructors
   returning NULL and NULL objects. */
static void test_last_error_without_object(void **state)
{
    (void)state;
    kiln_session_options bad = {.threads = -1};
    assert_null(kiln_session_new(&bad));
    assert_non_null(strstr(kiln_last_error(), "kiln_session_new"));
    assert_null(kiln_tensor_new((kiln_dtype)99, KILN_SHAPE(1)));
    assert_non_null(strstr(kiln_last_error(), "unsupported dtype"));
    assert_int_equal(kiln_forward(NULL, NULL), KILN_ERR_ARG);
    assert_string_equal(kiln_last_error(), "kiln_forward: session is NULL");
    assert_null(kiln_compile(NULL, NULL, NULL, 0, NULL, 0));
    assert_string_equal(kiln_last_error(), "kiln_compile: session is NULL");
    assert_null(kiln_node_value(NULL, NULL));
    assert_string_equal(kiln_last_error(), "kiln_node_value: session is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_success_clears),
        cmocka_unit_test(test_session_no_stale_message),
        cmocka_unit_test(test_graph_error_sticky),
        cmocka_unit_test(test_program_message_cleared),
        cmocka_unit_test(test_last_error_without_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
