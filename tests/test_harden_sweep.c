/* Sweep of the public API with careless and hostile calls (issue 9): NULL
   objects and arguments, bad counts, values that slip past comparisons
   (NaN, infinities), overflowing positions and tensors given two owners.
   Each call must fail with the documented status and a message naming the
   function and the problem, with no memory error or undefined behaviour
   (the ASan/UBSan build stops on either). */
#define _DEFAULT_SOURCE
#include <unistd.h>
#include "test_helpers.h"

#include <limits.h>
#include <sys/stat.h>

/* got must be want, and msg must hold every needle. */
static void want_err(kiln_status got, kiln_status want, const char *msg,
                     const char *needle1, const char *needle2)
{
    if (got != want)
        fail_msg("status %d (%s), want %d (%s); message \"%s\"", (int)got,
                 kiln_status_str(got), (int)want, kiln_status_str(want),
                 msg ? msg : "(null)");
    assert_non_null(msg);
    if (needle1 && !strstr(msg, needle1))
        fail_msg("message \"%s\" lacks \"%s\"", msg, needle1);
    if (needle2 && !strstr(msg, needle2))
        fail_msg("message \"%s\" lacks \"%s\"", msg, needle2);
}

/* A message nobody would write, so that a stale kiln_last_error shows. */
static void poison_last_error(void)
{
    kiln_tensor_free(kiln_tensor_new((kiln_dtype)99, KILN_SHAPE(1)));
    assert_non_null(strstr(kiln_last_error(), "unsupported dtype"));
}

/* ------------------------------------------- NULL objects: kiln_last_error */

/* Functions whose object is NULL have nowhere else to put the message:
   kiln_last_error must name the function and the NULL argument, not keep
   an older message. */
static void test_null_objects_set_last_error(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_workspace_stats ws;
    kiln_param_info info;
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    assert_non_null(g);
    assert_non_null(s);
    assert_non_null(t);
    struct {
        kiln_status st;
        const char *fn, *what;
    } cases[20];
    int n = 0;
#define CASE(call, fn_, what_)                                                 \
    do {                                                                       \
        poison_last_error();                                                   \
        kiln_status st_ = (call);                                              \
        want_err(st_, KILN_ERR_ARG, kiln_last_error(), fn_ ":", what_);        \
        cases[n].st = st_;                                                     \
        n++;                                                                   \
    } while (0)
    CASE(kiln_graph_print(NULL, stdout), "kiln_graph_print", "graph is NULL");
    CASE(kiln_graph_print(g, NULL), "kiln_graph_print", "stream is NULL");
    CASE(kiln_graph_write_dot(NULL, stdout), "kiln_graph_write_dot",
         "graph is NULL");
    CASE(kiln_graph_write_dot(g, NULL), "kiln_graph_write_dot",
         "stream is NULL");
    CASE(kiln_session_workspace_stats(NULL, g, &ws),
         "kiln_session_workspace_stats", "session is NULL");
    CASE(kiln_session_reserve_workspace_mb(NULL, g, 1),
         "kiln_session_reserve_workspace_mb", "session is NULL");
    CASE(kiln_session_set_checkpointing(NULL, g, 1),
         "kiln_session_set_checkpointing", "session is NULL");
    CASE(kiln_session_set_check_finite(NULL, g, 1),
         "kiln_session_set_check_finite", "session is NULL");
    CASE(kiln_grads(NULL, NULL, NULL, NULL, 0, NULL), "kiln_grads",
         "graph is NULL");
    CASE(kiln_nll_loss_with_softmax_grad(NULL, NULL, NULL, NULL, NULL),
         "kiln_nll_loss_with_softmax_grad", "graph is NULL");
    CASE(kiln_feed(NULL, NULL, t), "kiln_feed", "session is NULL");
    CASE(kiln_forward(NULL, g), "kiln_forward", "session is NULL");
    CASE(kiln_backward(NULL, g, NULL), "kiln_backward", "session is NULL");
    CASE(kiln_sgd_step(NULL, g, 0.1f), "kiln_sgd_step", "session is NULL");
    CASE(kiln_session_variable_info(NULL, 0, &info),
         "kiln_session_variable_info", "session is NULL");
    CASE(kiln_session_variable_info(s, 0, NULL), "kiln_session_variable_info",
         "info is NULL");
    CASE(kiln_variable_read(NULL, "w", t), "kiln_variable_read",
         "session is NULL");
    CASE(kiln_variable_write(NULL, "w", t), "kiln_variable_write",
         "session is NULL");
    CASE(kiln_session_declare(NULL, "w", KILN_F32, KILN_SHAPE(2),
                              kiln_init_zeros(), 1),
         "kiln_session_declare", "session is NULL");
    CASE(kiln_session_set_trainable(NULL, "w", 1), "kiln_session_set_trainable",
         "session is NULL");
    assert_int_equal(n, 20);
    n = 0;
    CASE(kiln_session_print_variables(NULL, stdout),
         "kiln_session_print_variables", "session is NULL");
    CASE(kiln_session_print_variables(s, NULL), "kiln_session_print_variables",
         "stream is NULL");
    CASE(kiln_session_save(NULL, "x.npz"), "kiln_session_save",
         "session is NULL");
    CASE(kiln_session_load(NULL, "x.npz"), "kiln_session_load",
         "session is NULL");
    CASE(kiln_run(NULL, NULL, NULL), "kiln_run", "function is NULL");
    CASE(kiln_function_print(NULL, stdout), "kiln_function_print",
         "function is NULL");
    CASE(
        kiln_gradcheck(NULL, g, NULL, NULL, 0, NULL, NULL, 0, 1e-3, 1e-2, NULL),
        "kiln_gradcheck", "session is NULL");
    CASE(kiln_computation_call(NULL, NULL), "kiln_computation_call",
         "computation is NULL");
    CASE(kiln_computation_print(NULL, stdout), "kiln_computation_print",
         "computation is NULL");
    CASE(kiln_program_compile(NULL, s), "kiln_program_compile",
         "program is NULL");
    CASE(kiln_program_run(NULL, NULL, 0), "kiln_program_run",
         "program is NULL");
    CASE(kiln_host_store(NULL, NULL, NULL), "kiln_host_store",
         "program is NULL");
    CASE(kiln_dataset_load(NULL, "a", "b", 10, 1.0f), "kiln_dataset_load",
         "dataset is NULL");
    CASE(kiln_mnist_dataset(NULL, "dir", 1, 1.0f), "kiln_mnist_dataset",
         "dataset is NULL");
#undef CASE
    (void)cases;
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* An index outside the variables is an error that says so (it used to
   return KILN_ERR_ARG with no message at all). */
static void test_variable_info_index_out_of_range(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_param_info info;
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_OK);
    int bad[] = {-1, 1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        poison_last_error();
        want_err(kiln_session_variable_info(s, bad[i], &info), KILN_ERR_ARG,
                 kiln_last_error(), "kiln_session_variable_info: index",
                 "is outside [0, 1)");
    }
    assert_int_equal(kiln_session_variable_info(s, 0, &info), KILN_OK);
    assert_string_equal(info.name, "w");
    assert_int_equal(info.shape.ndim, 1);
    assert_int_equal(info.shape.d[0], 2);
    assert_float_equal(((const float *)info.data)[1], 1.0f, 0);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ progress */

/* A NULL progress bar is ignored (it used to dereference NULL), and any
   done and total are drawn without overflow. */
static void test_progress_null_and_extreme_counts(void **state)
{
    (void)state;
    kiln_progress_begin(NULL, stdout, "x", 5);
    kiln_progress_update(NULL, 1, 0.5, 1);
    kiln_progress_end(NULL, "done");
    FILE *f = tmpfile();
    assert_non_null(f);
    kiln_progress p;
    kiln_progress_begin(&p, f, "run", -5);
    kiln_progress_update(&p, INT64_MAX, NAN, 1e300);
    kiln_progress_update(&p, INT64_MIN, INFINITY, -1);
    kiln_progress_end(&p, NULL);
    kiln_progress_begin(&p, f, NULL, INT64_MAX);
    kiln_progress_update(&p, INT64_MAX, 1.0, 1.0);
    kiln_progress_end(&p, "ok");
    /* Not a terminal: one line per _end, with the counts as given. */
    rewind(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "run -9223372036854775808/-5 steps"));
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, " 9223372036854775807/9223372036854775807 "
                                 "steps"));
    assert_non_null(strstr(line, " ok"));
    fclose(f);
}

/* ------------------------------------------------------------ named axes */

/* kiln_axis_dual with an offset that would overflow int used to be signed
   overflow (UB); it now gives an invalid axis that builders refuse. */
static void test_axis_dual_overflow_is_invalid(void **state)
{
    (void)state;
    kiln_axis a = kiln_axis_make("C", 4, 0);
    kiln_axis m = kiln_axis_dual(a, -1);
    assert_int_equal(m.dual, -1);
    assert_int_equal(m.length, 4);
    kiln_axis lo = kiln_axis_dual(m, INT_MIN);
    assert_int_equal(lo.length, -1);
    kiln_axis hi = kiln_axis_dual(kiln_axis_dual(a, INT_MAX / 2), INT_MAX);
    assert_int_equal(hi.length, -1);
    kiln_axis edge = kiln_axis_dual(a, INT_MAX / 2);
    assert_int_equal(edge.length, 4);
    assert_int_equal(edge.dual, INT_MAX / 2);
    kiln_graph *g = kiln_graph_new();
    kiln_ax *x = kiln_ax_placeholder(g, "x", KILN_AXES(lo));
    assert_non_null(x);
    want_err(kiln_graph_status(g), KILN_ERR_ARG, kiln_graph_error(g),
             "kiln_ax_placeholder: axis 0 ('C') is invalid", NULL);
    kiln_graph_clear(g);
    /* dot pairs a's axis with b's one dual position higher: at the edge of
       the range that +1 must not overflow either. */
    kiln_ax *p = kiln_ax_placeholder(g, "p", KILN_AXES(edge));
    kiln_ax *q = kiln_ax_placeholder(g, "q", KILN_AXES(a));
    kiln_ax_dot(g, p, q);
    want_err(kiln_graph_status(g), KILN_ERR_ARG, kiln_graph_error(g),
             "kiln_ax_dot:", "contracts no axis");
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ tensor lists */

/* One tensor added twice (under two names, or to two lists) had two owners
   and was freed twice; the second add is now refused and the caller keeps
   the tensor. */
static void test_tensor_list_refuses_second_owner(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor_list *l2 = kiln_tensor_list_new();
    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(2), (float[]){1, 2});
    assert_int_equal(kiln_tensor_list_add(l, "a", t), KILN_OK);
    want_err(kiln_tensor_list_add(l, "b", t), KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_list_add:", "already belongs to a list");
    want_err(kiln_tensor_list_add(l2, "a", t), KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_list_add:", "already belongs to a list");
    assert_int_equal(kiln_tensor_list_count(l), 1);
    assert_int_equal(kiln_tensor_list_count(l2), 0);
    assert_ptr_equal(kiln_tensor_list_get(l, 0), t);
    assert_null(kiln_tensor_list_get(l, 1));
    assert_null(kiln_tensor_list_get(l, -1));
    assert_null(kiln_tensor_list_find(l, "b"));
    /* The list still round-trips through a file with its one entry. */
    char path[] = "/tmp/kiln_sweep_XXXXXX.npz";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kiln_npz_write(path, l, 0), KILN_OK);
    kiln_tensor_list *r = kiln_npz_read(path);
    assert_non_null(r);
    assert_int_equal(kiln_tensor_list_count(r), 1);
    assert_float_equal(kiln_tensor_f32(kiln_tensor_list_get(r, 0))[1], 2.0f, 0);
    /* A tensor read from a file is owned by its list too. */
    want_err(kiln_tensor_list_add(l2, "again", kiln_tensor_list_get(r, 0)),
             KILN_ERR_ARG, kiln_last_error(), "already belongs to a list",
             NULL);
    kiln_tensor_list_free(r);
    unlink(path);
    kiln_tensor_list_free(l);
    kiln_tensor_list_free(l2);
}

/* ------------------------------------------------------------ gradcheck */

typedef struct gc_model {
    kiln_session *s;
    kiln_graph *g;
    kiln_node *w, *x, *loss;
    kiln_tensor *t;
} gc_model;

/* loss = sum(w * x), w = [1, 1], x fed [0, 0]: dloss/dw = x. */
static gc_model gc_make(void)
{
    gc_model m;
    m.s = kiln_session_new(NULL);
    m.g = kiln_graph_new();
    m.w = kiln_variable(m.g, "w", KILN_F32, KILN_SHAPE(2), kiln_init_ones());
    m.x = kiln_input(m.g, "x", KILN_F32, KILN_SHAPE(2));
    m.loss = kiln_sum(m.g, kiln_mul(m.g, m.w, m.x), KILN_ALL_AXES, 0);
    m.t = kiln_tensor_from_f32(KILN_SHAPE(2), (float[]){0.5f, -2.0f});
    th_assert_graph_ok(m.g);
    return m;
}

static void gc_free(gc_model *m)
{
    kiln_tensor_free(m->t);
    kiln_session_free(m->s);
    kiln_graph_free(m->g);
}

static kiln_status gc_run(gc_model *m, kiln_node *loss, kiln_node *wrt,
                          double eps, double tol, kiln_gradcheck_result *res)
{
    return kiln_gradcheck(m->s, m->g, loss, &wrt, 1, &m->x, &m->t, 1, eps, tol,
                          res);
}

/* A NaN eps or tol made every comparison false: a NaN tol passed any
   gradient, a NaN eps reported a numeric failure.  Both, and infinite
   ones, are bad arguments now. */
static void test_gradcheck_nan_eps_tol_refused(void **state)
{
    (void)state;
    gc_model m = gc_make();
    kiln_gradcheck_result res;
    double bad[][2] = {{NAN, 1e-2},
                       {1e-3, NAN},
                       {INFINITY, 1e-2},
                       {1e-3, INFINITY},
                       {-1e-3, 1e-2}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        want_err(gc_run(&m, m.loss, m.w, bad[i][0], bad[i][1], &res),
                 KILN_ERR_ARG, kiln_session_error(m.s),
                 "kiln_gradcheck: bad arguments", NULL);
    assert_int_equal(kiln_gradcheck(m.s, m.g, m.loss, &m.w, 1, &m.x, &m.t, -1,
                                    1e-3, 1e-2, &res),
                     KILN_ERR_ARG);
    assert_string_equal(kiln_session_error(m.s),
                        "kiln_gradcheck: bad arguments");
    /* The graph is untouched: a good check still passes. */
    th_assert_graph_ok(m.g);
    assert_int_equal(gc_run(&m, m.loss, m.w, 1e-3, 1e-2, &res), KILN_OK);
    assert_true(res.max_abs_err < 1e-2);
    gc_free(&m);
}

/* A loss or wrt the check cannot use used to reach kiln_grads, which
   poisoned the caller's graph: every later call on it then failed.  They
   are refused first now, and the graph stays usable. */
static void test_gradcheck_bad_loss_leaves_graph_usable(void **state)
{
    (void)state;
    gc_model m = gc_make();
    kiln_gradcheck_result res;
    kiln_graph *h = kiln_graph_new();
    kiln_node *foreign =
        kiln_variable(h, "f", KILN_F32, KILN_SCALAR, kiln_init_ones());
    kiln_node *labels = kiln_input(m.g, "labels", KILN_I32, KILN_SHAPE(2));
    kiln_node *iloss = kiln_cast(m.g, m.loss, KILN_I32);
    th_assert_graph_ok(m.g);
    want_err(gc_run(&m, m.w, m.w, 1e-3, 1e-2, &res), KILN_ERR_SHAPE,
             kiln_session_error(m.s), "kiln_gradcheck: loss %0",
             "must be an f32 scalar node of g");
    want_err(gc_run(&m, iloss, m.w, 1e-3, 1e-2, &res), KILN_ERR_SHAPE,
             kiln_session_error(m.s), "kiln_gradcheck: loss", "f32 scalar");
    want_err(gc_run(&m, foreign, m.w, 1e-3, 1e-2, &res), KILN_ERR_ARG,
             kiln_session_error(m.s), "kiln_gradcheck: loss",
             "must be a live node of g");
    want_err(gc_run(&m, m.loss, foreign, 1e-3, 1e-2, &res), KILN_ERR_ARG,
             kiln_session_error(m.s), "wrt[0] must be a variable or an input",
             "of g");
    want_err(gc_run(&m, m.loss, labels, 1e-3, 1e-2, &res), KILN_ERR_ARG,
             kiln_session_error(m.s), "wrt[0]", "dtype f32");
    th_assert_graph_ok(m.g);
    assert_int_equal(gc_run(&m, m.loss, m.w, 1e-3, 1e-2, &res), KILN_OK);
    /* d loss / d x = w = 1: the check of x passes too. */
    assert_int_equal(gc_run(&m, m.loss, m.x, 1e-3, 1e-2, &res), KILN_OK);
    /* A graph that failed before the check is reported as such. */
    kiln_add(m.g, m.w, foreign);
    want_err(gc_run(&m, m.loss, m.w, 1e-3, 1e-2, &res), KILN_ERR_ARG,
             kiln_session_error(m.s), "kiln_gradcheck: the graph failed",
             "belongs to another graph");
    kiln_graph_free(h);
    gc_free(&m);
}

/* ------------------------------------------------------------ mixtures */

/* Priors whose sum overflows to infinity made every p / sum 0, so every
   sample fell in the last class: a silent wrong answer.  NaN priors were
   called "negative". */
static void test_mixture_priors_must_be_finite(void **state)
{
    (void)state;
    poison_last_error();
    assert_null(kiln_mixture_new((double[]){1e308, 1e308}, 2, 2, 1));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_mixture_new: priors sum to inf", NULL);
    assert_null(kiln_mixture_new((double[]){INFINITY, 1}, 2, 2, 1));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_mixture_new: prior 0 is inf", "finite and >= 0");
    assert_null(kiln_mixture_new((double[]){1, NAN}, 2, 2, 1));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_mixture_new: prior 1 is nan", NULL);
    assert_null(kiln_mixture_new((double[]){0, 0}, 2, 2, 1));
    assert_non_null(strstr(kiln_last_error(), "priors sum to 0"));
    assert_null(kiln_mixture_new((double[]){-0.5, 1.5}, 2, 2, 1));
    assert_non_null(strstr(kiln_last_error(), "prior 0 is -0.5"));
    /* Large but finite priors are fine and draw both classes. */
    kiln_mixture *m = kiln_mixture_new((double[]){1e300, 1e300}, 2, 2, 7);
    assert_non_null(m);
    float x[2 * 64];
    int32_t y[64];
    assert_int_equal(kiln_mixture_batch(m, 64, x, y), KILN_OK);
    int ones = 0;
    for (int i = 0; i < 64; i++) {
        assert_true(y[i] == 0 || y[i] == 1);
        ones += y[i];
    }
    assert_true(ones > 8 && ones < 56);
    kiln_mixture_free(m);
}

/* ------------------------------------------------------------ directories */

/* Number of entries of dir other than . and .. */
static int dir_entries(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = -1;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

/* Reading a directory gave misleading messages ("cannot map: No such
   device", "file too short for a safetensors header (4096 bytes)"); every
   reader now says it is a directory. */
static void test_readers_refuse_a_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln_sweep_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    poison_last_error();
    assert_null(kiln_npz_read(dir));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_npz_read:", ": is a directory");
    assert_null(kiln_safetensors_read(dir));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_safetensors_read:", ": is a directory");
    assert_null(kiln_bin_read(dir));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_bin_read:", ": is a directory");
    assert_null(kiln_file_read(dir));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_file_read:", ": is a directory");
    assert_null(kiln_idx_read(dir, KILN_F32));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_idx_read:", ": is a directory");
    want_err(kiln_file_info(dir, stdout), KILN_ERR_IO, kiln_last_error(),
             "kiln_file_info:", ": is a directory");
    kiln_session *s = kiln_session_new(NULL);
    want_err(kiln_session_load(s, dir), KILN_ERR_IO, kiln_session_error(s),
             "kiln_session_load:", ": is a directory");
    kiln_session_free(s);
    kiln_dataset d;
    want_err(kiln_dataset_load(&d, dir, dir, 10, 1.0f), KILN_ERR_IO,
             kiln_last_error(), "kiln_idx_read:", ": is a directory");
    assert_null(d.images);
    assert_int_equal(rmdir(dir), 0);
}

/* A device never ends (/dev/zero filled memory up to a reader's cap, 2 GiB
   for ONNX) and a FIFO without a writer blocked the open for ever: every
   reader refuses a device by name, and reads a FIFO without a writer as an
   empty file (an error about its contents), at once. */
static void test_readers_refuse_devices_and_do_not_block(void **state)
{
    (void)state;
    const char *dev = "/dev/zero", *want = ": not a regular file or a pipe";
    poison_last_error();
    assert_null(kiln_npz_read(dev));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_npz_read:", want);
    assert_null(kiln_safetensors_read(dev));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_safetensors_read:", want);
    assert_null(kiln_bin_read(dev));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_bin_read:", want);
    assert_null(kiln_idx_read(dev, KILN_F32));
    want_err(KILN_ERR_IO, KILN_ERR_IO, kiln_last_error(),
             "kiln_idx_read:", want);
    assert_null(kiln_npy_read(dev));
    assert_non_null(strstr(kiln_last_error(), want));

    char dir[] = "/tmp/kiln_sweep_fifo_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/f.npz", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_null(kiln_npz_read(path)); /* returns: the test ends */
    assert_non_null(strstr(kiln_last_error(), "kiln_npz_read:"));
    assert_null(kiln_safetensors_read(path));
    assert_null(kiln_bin_read(path));
    assert_null(kiln_idx_read(path, KILN_F32));
    assert_null(kiln_npy_read(path));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* Saving over a directory made a temporary beside it (in its parent) and
   then failed to rename; it is refused first now, leaving the parent as
   it was. */
static void test_writers_refuse_a_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln_sweep_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[64], link[64];
    snprintf(sub, sizeof sub, "%s/sub.npz", dir);
    snprintf(link, sizeof link, "%s/link.bin", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(symlink("sub.npz", link), 0);
    kiln_tensor_list *l = kiln_tensor_list_new();
    assert_int_equal(
        kiln_tensor_list_add(l, "a", kiln_tensor_new(KILN_F32, KILN_SHAPE(2))),
        KILN_OK);
    const char *paths[] = {sub, link};
    for (int i = 0; i < 2; i++) {
        want_err(kiln_npz_write(paths[i], l, 1), KILN_ERR_IO, kiln_last_error(),
                 "kiln_npz_write:", ": is a directory");
        want_err(kiln_safetensors_write(paths[i], l), KILN_ERR_IO,
                 kiln_last_error(),
                 "kiln_safetensors_write:", ": is a directory");
        want_err(kiln_bin_write(paths[i], l), KILN_ERR_IO, kiln_last_error(),
                 "kiln_bin_write:", ": is a directory");
        want_err(kiln_file_write(paths[i], l), KILN_ERR_IO, kiln_last_error(),
                 ": is a directory", NULL);
        want_err(kiln_file_check_writable(paths[i]), KILN_ERR_IO,
                 kiln_last_error(), "is a directory", NULL);
    }
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_OK);
    want_err(kiln_session_save(s, sub), KILN_ERR_IO, kiln_session_error(s),
             "kiln_session_save:", ": is a directory");
    /* Nothing was left beside the directory, and it is still empty. */
    assert_int_equal(dir_entries(dir), 2);
    assert_int_equal(dir_entries(sub), 0);
    kiln_session_free(s);
    kiln_tensor_list_free(l);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* ------------------------------------------------------------ initialisers */

/* uniform(1, 0) drew reversed values and normal(0, NaN) or normal(0, -1)
   filled NaN or mirrored values without a word; torch's uniform_ and
   normal_ refuse these, and so do kiln_init_fill and the builders and
   sessions that use it. */
static void test_init_fill_refuses_bad_ranges(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    float data[4] = {7, 7, 7, 7};
    struct {
        kiln_init init;
        const char *needle;
    } bad[] = {
        {kiln_init_uniform(1, 0), "uniform range [1, 0)"},
        {kiln_init_uniform(NAN, 1), "uniform range [nan, 1)"},
        {kiln_init_uniform(0, INFINITY), "uniform range [0, inf)"},
        {kiln_init_normal(0, NAN), "standard deviation nan"},
        {kiln_init_normal(0, -1), "standard deviation -1"},
        {kiln_init_normal(INFINITY, 1), "normal mean inf"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        want_err(kiln_init_fill(bad[i].init, KILN_SHAPE(4), data, &r),
                 KILN_ERR_ARG, kiln_last_error(),
                 "kiln_init_fill:", bad[i].needle);
        for (int j = 0; j < 4; j++)
            assert_float_equal(data[j], 7.0f, 0);
    }
    /* The edges stay legal: an empty range and a zero deviation give the
       constant itself. */
    assert_int_equal(
        kiln_init_fill(kiln_init_uniform(2, 2), KILN_SHAPE(4), data, &r),
        KILN_OK);
    for (int j = 0; j < 4; j++)
        assert_float_equal(data[j], 2.0f, 0);
    assert_int_equal(
        kiln_init_fill(kiln_init_normal(-3, 0), KILN_SHAPE(4), data, &r),
        KILN_OK);
    for (int j = 0; j < 4; j++)
        assert_float_equal(data[j], -3.0f, 0);
    /* Through a variable: the graph error names the variable. */
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_variable(g, "w", KILN_F32, KILN_SHAPE(4), kiln_init_uniform(1, -1));
    want_err(kiln_graph_status(g), KILN_ERR_ARG, kiln_graph_error(g),
             "kiln_variable 'w': kiln_init_fill: uniform range [1, -1)", NULL);
    want_err(kiln_session_declare(s, "v", KILN_F32, KILN_SHAPE(2),
                                  kiln_init_normal(0, -2), 1),
             KILN_ERR_ARG, kiln_session_error(s), "'v'",
             "standard deviation -2");
    assert_int_equal(kiln_session_find_variable(s, "v"), -1);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ tensors */

/* kiln_tensor_from_f32 reported its shape errors as kiln_tensor_new's. */
static void test_tensor_from_f32_names_itself(void **state)
{
    (void)state;
    float v[2] = {1, 2};
    poison_last_error();
    assert_null(
        kiln_tensor_from_f32((kiln_shape){.ndim = KILN_MAX_DIMS + 1}, v));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_from_f32: invalid shape",
             "dimension count outside [0, 8]");
    assert_null(kiln_tensor_from_f32(KILN_SHAPE(-2), v));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_from_f32: invalid shape [-2]", "negative");
    assert_null(kiln_tensor_from_f32(KILN_SHAPE((int64_t)1 << 62, 4), v));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_from_f32: invalid shape", "2^40");
    assert_null(kiln_tensor_from_f32(KILN_SHAPE(2), NULL));
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_tensor_from_f32: values is NULL", NULL);
    kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(2), v);
    assert_non_null(t);
    assert_float_equal(kiln_tensor_f32(t)[1], 2.0f, 0);
    assert_null(kiln_tensor_i32(t));
    kiln_tensor_free(t);
    /* An empty tensor needs no values. */
    t = kiln_tensor_from_f32(KILN_SHAPE(0, 3), NULL);
    assert_non_null(t);
    assert_int_equal(kiln_tensor_numel(t), 0);
    kiln_tensor_free(t);
}

/* ------------------------------------------------------------ batcher */

/* A NULL batcher was reported as a batch of the wrong shape. */
static void test_batcher_next_null_batcher(void **state)
{
    (void)state;
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 2));
    poison_last_error();
    assert_int_equal(kiln_batcher_next(NULL, xb, NULL), -1);
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(),
             "kiln_batcher_next: batcher is NULL", NULL);
    kiln_tensor *x =
        kiln_tensor_from_f32(KILN_SHAPE(3, 2), (float[]){1, 2, 3, 4, 5, 6});
    kiln_batcher *b = kiln_batcher_new(x, NULL, 2, 0, 0, 1);
    assert_non_null(b);
    assert_int_equal(kiln_batcher_next(b, NULL, NULL), -1);
    want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_batcher_error(b),
             "kiln_batcher_next: batch tensors must be shaped", NULL);
    assert_int_equal(kiln_batcher_next(b, xb, NULL), 2);
    assert_float_equal(kiln_tensor_f32(xb)[3], 4.0f, 0);
    kiln_batcher_free(b);
    kiln_tensor_free(x);
    kiln_tensor_free(xb);
}

/* ------------------------------------------------------------ main */

/* Builders given a NULL graph have nowhere to keep their error: they return
   NULL and name themselves and the graph in kiln_last_error. */
static void test_null_graph_builders_set_last_error(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
#define NULL_GRAPH(call, fn_)                                                  \
    do {                                                                       \
        poison_last_error();                                                   \
        assert_null(call);                                                     \
        want_err(KILN_ERR_ARG, KILN_ERR_ARG, kiln_last_error(), fn_ ":",       \
                 "graph is NULL");                                             \
    } while (0)
    NULL_GRAPH(kiln_input(NULL, "x", KILN_F32, KILN_SHAPE(2)), "kiln_input");
    NULL_GRAPH(kiln_add(NULL, x, x), "kiln_add");
    NULL_GRAPH(kiln_relu(NULL, x), "kiln_relu");
    NULL_GRAPH(kiln_sum(NULL, x, 1u, 0), "kiln_sum");
    NULL_GRAPH(kiln_matmul(NULL, x, x, 0, 1), "kiln_matmul");
    NULL_GRAPH(kiln_reshape(NULL, x, KILN_SHAPE(6)), "kiln_reshape");
    NULL_GRAPH(kiln_softmax(NULL, x, 1), "kiln_softmax");
    NULL_GRAPH(kiln_cast(NULL, x, KILN_I32), "kiln_cast");
    NULL_GRAPH(kiln_ax_scalar(NULL, 1.0f), "kiln_ax_scalar");
#undef NULL_GRAPH
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_objects_set_last_error),
        cmocka_unit_test(test_null_graph_builders_set_last_error),
        cmocka_unit_test(test_variable_info_index_out_of_range),
        cmocka_unit_test(test_progress_null_and_extreme_counts),
        cmocka_unit_test(test_axis_dual_overflow_is_invalid),
        cmocka_unit_test(test_tensor_list_refuses_second_owner),
        cmocka_unit_test(test_gradcheck_nan_eps_tol_refused),
        cmocka_unit_test(test_gradcheck_bad_loss_leaves_graph_usable),
        cmocka_unit_test(test_mixture_priors_must_be_finite),
        cmocka_unit_test(test_readers_refuse_a_directory),
        cmocka_unit_test(test_readers_refuse_devices_and_do_not_block),
        cmocka_unit_test(test_init_fill_refuses_bad_ranges),
        cmocka_unit_test(test_tensor_from_f32_names_itself),
        cmocka_unit_test(test_batcher_next_null_batcher),
        cmocka_unit_test(test_writers_refuse_a_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
