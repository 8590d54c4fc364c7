/* ONNX import: small models made by tests/ref/make_onnx_models.py run on
   both execution paths and match NumPy; unsupported ops, attributes and
   dtypes are listed all at once by node; hostile, truncated and corrupted
   files are refused with a message and never crash. */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "test_refs.h"

#define ONNX_DIR KILN_TEST_REF_DIR "/onnx/"

#define MAX_REFS 16

typedef struct refs {
    ref_tensor t[MAX_REFS];
    char kind[MAX_REFS][8];
    int n;
} refs;

static void read_refs(const char *name, refs *r)
{
    char path[512];
    snprintf(path, sizeof path, ONNX_DIR "%s.txt", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    memset(r, 0, sizeof *r);
    while (r->n < MAX_REFS && ref_read_tensor(f, path, &r->t[r->n], r->kind[r->n]))
        r->n++;
    fclose(f);
}

static void free_refs(refs *r)
{
    for (int k = 0; k < r->n; k++)
        free(r->t[k].v);
}

static kiln_onnx_model *load_ok(kiln_graph *g, const char *name,
                                const kiln_onnx_options *opt)
{
    char path[512];
    kiln_onnx_model *m = NULL;
    snprintf(path, sizeof path, ONNX_DIR "%s.onnx", name);
    kiln_status st = kiln_onnx_load(g, path, opt, &m);
    if (st != KILN_OK)
        fail_msg("%s: %s", name, kiln_onnx_error(m));
    assert_non_null(m);
    assert_string_equal(kiln_onnx_error(m), "");
    return m;
}

/* Tolerance of the comparisons: 1e-5 for NumPy's small models, 1e-4 for
   PyTorch's exports (longer sums). */
static double tol = 1e-5;

static void check_output(const ref_tensor *want, const kiln_tensor *got)
{
    kiln_shape s = kiln_tensor_shape(got);
    assert_int_equal(s.ndim, want->shape.ndim);
    for (int d = 0; d < s.ndim; d++)
        assert_int_equal(s.d[d], want->shape.d[d]);
    int64_t n = kiln_tensor_numel(got);
    if (want->dt == KILN_I32) {
        assert_int_equal(kiln_tensor_dtype(got), KILN_I32);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(kiln_tensor_i32(got)[i], (int32_t)want->v[i]);
    } else
        th_assert_close(want->name, kiln_tensor_f32(got), want->v, n, tol, tol);
}

/* Loads name, runs it compiled and dynamically on its reference inputs
   and compares every output. */
static void run_model(const char *name, const char *ref_name)
{
    refs r;
    read_refs(ref_name, &r);
    kiln_graph *g = kiln_graph_new();
    /* Named dims take the reference's batch: the dynamic path runs at the
       size the graph was built at. */
    kiln_onnx_options opt = {.named_dim_size = r.t[0].shape.d[0]};
    kiln_onnx_model *m = load_ok(g, name, &opt);
    int n_in = kiln_onnx_num_inputs(m), n_out = kiln_onnx_num_outputs(m);
    kiln_node *ins[MAX_REFS], *outs[MAX_REFS];
    kiln_tensor *in_t[MAX_REFS], *out_t[MAX_REFS];
    assert_true(n_in + n_out <= r.n);
    for (int k = 0; k < n_in; k++) {
        ins[k] = kiln_onnx_input(m, k);
        assert_string_equal(kiln_onnx_input_name(m, k), r.t[k].name);
        in_t[k] = ref_tensor_new(&r.t[k]);
    }
    for (int k = 0; k < n_out; k++) {
        outs[k] = kiln_onnx_output(m, k);
        assert_string_equal(kiln_onnx_output_name(m, k), r.t[n_in + k].name);
        out_t[k] = ref_tensor_new(&r.t[n_in + k]);
    }
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, outs, n_out, ins, n_in);
    if (!f)
        fail_msg("%s: %s", name, kiln_session_error(s));
    if (kiln_run(f, in_t, out_t) != KILN_OK)
        fail_msg("%s: %s", name, kiln_session_error(s));
    for (int k = 0; k < n_out; k++)
        check_output(&r.t[n_in + k], out_t[k]);
    for (int k = 0; k < n_in; k++)
        assert_int_equal(kiln_feed(s, ins[k], in_t[k]), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    for (int k = 0; k < n_out; k++) {
        kiln_tensor *v = kiln_node_value(s, outs[k]);
        check_output(&r.t[n_in + k], v);
        kiln_tensor_free(v);
    }
    for (int k = 0; k < n_in; k++)
        kiln_tensor_free(in_t[k]);
    for (int k = 0; k < n_out; k++)
        kiln_tensor_free(out_t[k]);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    free_refs(&r);
}

static void test_mlp(void **state)
{
    (void)state;
    run_model("mlp", "mlp");
}

static void test_cnn(void **state)
{
    (void)state;
    run_model("cnn", "cnn");
}

static void test_shapes(void **state)
{
    (void)state;
    run_model("shapes", "shapes");
}

static void test_shape_arithmetic(void **state)
{
    (void)state;
    run_model("shape_arith", "shape_arith");
    run_model("fold_floats", "fold_floats");
    run_model("bit_shift", "bit_shift");
    run_model("quant", "quant");
    run_model("train_ops", "train_ops");
}

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part))
        fail_msg("'%s' not in:\n%s", part, msg);
}

/* Upsample at opsets 7 and 9 and Resize at opset 10 (NumPy references of
   ONNX Runtime's rule, tests/ref/make_onnx_models.py). */
static void test_upsample(void **state)
{
    (void)state;
    run_model("upsample9", "upsample9");
    run_model("upsample7", "upsample7");
    run_model("resize10", "resize10");
}

/* ReverseSequence with the lengths given when running, and MaxUnpool of
   overlapping windows (NumPy references). */
static void test_reorder(void **state)
{
    (void)state;
    run_model("revseq_time", "revseq_time");
    run_model("revseq_batch", "revseq_batch");
    run_model("unpool_1d", "unpool_1d");
}

/* A length past the sequence is an error of the run naming the op that
   reads out of range, not a read past x. */
static void test_reverse_sequence_bad_length(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_options opt = {.named_dim_size = 5};
    kiln_onnx_model *m = load_ok(g, "revseq_time", &opt);
    kiln_node *ins[2] = {kiln_onnx_input(m, 0), kiln_onnx_input(m, 1)};
    kiln_node *out = kiln_onnx_output(m, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &out, 1, ins, 2);
    assert_non_null(f);
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 3, 2));
    kiln_tensor *lens = kiln_tensor_new(KILN_I32, KILN_SHAPE(3));
    kiln_tensor *y = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 3, 2));
    int32_t *l = kiln_tensor_i32(lens);
    l[0] = 9, l[1] = 1, l[2] = 1;
    kiln_tensor *in_t[2] = {x, lens};
    assert_int_not_equal(kiln_run(f, in_t, &y), KILN_OK);
    assert_has(kiln_session_error(s), "index");
    kiln_tensor_free(x);
    kiln_tensor_free(lens);
    kiln_tensor_free(y);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
}

/* If on a condition given when running, Loop stopped by data, Loop with
   a scan output, Scan of two inputs one reversed (NumPy references); and
   the gradient through the unrolled Scan by finite differences. */
static void test_control_flow(void **state)
{
    (void)state;
    run_model("if_true", "if_true");
    run_model("if_false", "if_false");
    run_model("loop_cond", "loop_cond");
    run_model("loop_scan", "loop_scan");
    run_model("scan_rev", "scan_rev");
    refs r;
    read_refs("scan_rev", &r);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = load_ok(g, "scan_rev", NULL);
    kiln_node *ins[2] = {kiln_onnx_input(m, 0), kiln_onnx_input(m, 1)};
    kiln_node *run = kiln_onnx_output(m, 1);
    kiln_node *loss = kiln_sum(g, kiln_mul(g, run, run), KILN_ALL_AXES, 0);
    kiln_tensor *vals[2] = {ref_tensor_new(&r.t[0]), ref_tensor_new(&r.t[1])};
    kiln_session *s = kiln_session_new(NULL);
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, loss, ins, 2, ins, vals, 2, 1e-3, 1e-2, &res) !=
        KILN_OK)
        fail_msg("scan_rev: gradcheck: %s", kiln_session_error(s));
    kiln_tensor_free(vals[0]);
    kiln_tensor_free(vals[1]);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    free_refs(&r);
}

/* DFT and STFT against numpy.fft, and the gradient through a complex DFT
   by finite differences. */
static void test_spectral(void **state)
{
    (void)state;
    run_model("dft_complex", "dft_complex");
    run_model("dft_onesided", "dft_onesided");
    run_model("dft_inverse", "dft_inverse");
    run_model("stft_complex", "stft_complex");
    refs r;
    read_refs("dft_complex", &r);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = load_ok(g, "dft_complex", NULL);
    kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
    kiln_node *loss = kiln_sum(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0);
    kiln_tensor *xt = ref_tensor_new(&r.t[0]);
    kiln_session *s = kiln_session_new(NULL);
    kiln_gradcheck_result res;
    /* the loss is quadratic in x: central differences are exact for any
       step, and a large one keeps float32 rounding out of them */
    if (kiln_gradcheck(s, g, loss, &x, 1, &x, &xt, 1, 5e-2, 1e-2, &res) !=
        KILN_OK)
        fail_msg("dft_complex: gradcheck: %s", kiln_session_error(s));
    kiln_tensor_free(xt);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    free_refs(&r);
}

/* torch.onnx.export of PyTorch 1.13 (tests/ref/make_torch_onnx.py). */
static void test_torch_exports(void **state)
{
    (void)state;
    tol = 1e-4;
    run_model("torch_mlp", "torch_mlp");
    run_model("torch_cnn", "torch_cnn");
    run_model("torch_residual", "torch_residual");
    run_model("torch_gpt", "torch_gpt");
    tol = 1e-4;
}

static void test_external_data(void **state)
{
    (void)state;
    run_model("mlp_ext", "mlp");
}

/* The model's named batch dim is symbolic: one compiled function serves a
   batch of 3 (the reference) and a batch of 1 (its first row). */
static void test_symbolic_batch(void **state)
{
    (void)state;
    refs r;
    read_refs("mlp", &r);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = load_ok(g, "mlp", NULL);
    assert_int_equal(kiln_onnx_opset(m), 13);
    assert_int_equal(kiln_onnx_input_type(m, 0), 1);
    kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    float row[4];
    for (int k = 0; k < 4; k++)
        row[k] = (float)r.t[0].v[k];
    kiln_tensor *x1 = kiln_tensor_from_f32(KILN_SHAPE(1, 4), row);
    kiln_tensor *y1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(1, 3));
    assert_int_equal(kiln_run(f, &x1, &y1), KILN_OK);
    th_assert_close("y[0]", kiln_tensor_f32(y1), r.t[1].v, 3, 1e-5, 1e-5);
    kiln_tensor_free(x1);
    kiln_tensor_free(y1);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    free_refs(&r);
}

/* Trainable initializers become variables of the session, named with the
   prefix, initialised with the file's values: before training the output
   is the reference's, and an SGD step on sum(y^2) lowers it. */
static void test_trainable(void **state)
{
    (void)state;
    refs r;
    read_refs("mlp", &r);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_options opt = {.trainable_initializers = 1,
                             .variable_prefix = "mlp.",
                             .named_dim_size = 3};
    kiln_onnx_model *m = load_ok(g, "mlp", &opt);
    kiln_node *y = kiln_onnx_output(m, 0);
    kiln_node *loss =
        kiln_sum(g, kiln_mul(g, y, y), KILN_AXIS(0) | KILN_AXIS(1), 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *x = ref_tensor_new(&r.t[0]);
    assert_int_equal(kiln_feed(s, kiln_onnx_input(m, 0), x), KILN_OK);
    assert_int_equal(kiln_backprop(s, g, loss), KILN_OK);
    assert_true(kiln_session_find_variable(s, "mlp.w1") >= 0);
    assert_true(kiln_session_find_variable(s, "mlp.b2") >= 0);
    assert_int_equal(kiln_session_find_variable(s, "w1"), -1);
    th_assert_close("y", kiln_node_value_f32(s, y), r.t[1].v, 9, 1e-5, 1e-5);
    float before = kiln_node_value_f32(s, loss)[0];
    assert_int_equal(kiln_sgd_step(s, g, 0.05f), KILN_OK);
    assert_int_equal(kiln_feed(s, kiln_onnx_input(m, 0), x), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_true(kiln_node_value_f32(s, loss)[0] < before - 1e-4f);
    kiln_tensor_free(x);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    free_refs(&r);
}

static char *load_fails(const char *name, kiln_status want)
{
    char path[512];
    kiln_onnx_model *m = NULL;
    snprintf(path, sizeof path, ONNX_DIR "%s.onnx", name);
    kiln_graph *g = kiln_graph_new();
    kiln_status st = kiln_onnx_load(g, path, NULL, &m);
    if (st != want)
        fail_msg("%s: status %s, want %s: %s", name, kiln_status_str(st),
                 kiln_status_str(want), m ? kiln_onnx_error(m) : "");
    assert_non_null(m);
    assert_int_equal(kiln_onnx_status(m), want);
    char *msg = strdup(kiln_onnx_error(m));
    assert_true(strlen(msg) > 0);
    assert_int_equal(kiln_onnx_num_outputs(m), 0);
    assert_null(kiln_onnx_output(m, 0));
    kiln_onnx_free(m);
    kiln_graph_free(g);
    return msg;
}

static void test_unsupported_listed(void **state)
{
    (void)state;
    char *msg = load_fails("unsupported", KILN_ERR_UNSUPPORTED);
    assert_has(msg,
               "initializer 'cplx': tensor of unsupported type complex64");
    assert_has(msg, "node 'nms' (NonMaxSuppression): unsupported op "
                    "NonMaxSuppression");
    assert_has(msg, "node 'custom' (Frobnicate): unsupported op "
                    "com.example.Frobnicate");
    assert_has(msg, "node 'leaky' (LeakyRelu): unsupported attribute 'bogus'");
    int lines = 1;
    for (const char *p = msg; *p; p++)
        lines += *p == '\n';
    if (lines != 4)
        fail_msg("%d lines, want 4:\n%s", lines, msg);
    free(msg);
}

static void test_hostile_files(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        kiln_status st;
        const char *part;
    } cases[] = {
        {"bad_huge_dims", KILN_ERR_IO, "too many elements"},
        {"bad_negative_dim", KILN_ERR_IO, "negative"},
        {"bad_short_data", KILN_ERR_IO, "raw_data size does not match"},
        {"bad_long_data", KILN_ERR_IO, "raw_data size does not match"},
        {"bad_many_dims", KILN_ERR_IO, "more than 8 dims"},
        {"bad_typed_count", KILN_ERR_IO, "element count does not match"},
        {"bad_input_dims", KILN_ERR_IO, "input 'x': bad dims"},
        {"bad_undefined", KILN_ERR_IO, "input 'nowhere' is not defined"},
        {"bad_cycle", KILN_ERR_IO, "input 'y' is not defined"},
        {"bad_reshape", KILN_ERR_SHAPE, "node 'big' (Reshape)"},
        {"bad_matmul", KILN_ERR_SHAPE, "node 'mm' (MatMul): kiln_matmul"},
        {"bad_lstm_weights", KILN_ERR_SHAPE,
         "node 'lstm' (LSTM): W has shape [1,6,3], want [1,8,3]"},
        {"bad_gru_activation", KILN_ERR_UNSUPPORTED,
         "node 'gru' (GRU): activation 'Frob'"},
        {"bad_einsum_label", KILN_ERR_ARG,
         "node 'es' (Einsum): equation 'ij,jk->iq': output label 1 repeated "
         "or not in any input"},
        {"bad_einsum_rank", KILN_ERR_ARG,
         "equation 'ijk,jk->ik' does not match input 0"},
        {"bad_einsum_sizes", KILN_ERR_SHAPE,
         "operand 1: sizes of a shared label differ"},
        {"bad_shape_divzero", KILN_ERR_UNSUPPORTED,
         "node 'r0' (Reshape): input 1 ('s') must be a constant integer"},
        {"bad_upsample_count", KILN_ERR_ARG,
         "node 'up' (Upsample): 3 scales for an input of 4 dims"},
        {"bad_upsample_nan", KILN_ERR_ARG,
         "node 'up' (Upsample): bad size on axis 2"},
        {"bad_revseq_axes", KILN_ERR_ARG,
         "node 'rs' (ReverseSequence): batch_axis 2 and time_axis 0"},
        {"bad_unpool_huge", KILN_ERR_SHAPE,
         "node 'up' (MaxUnpool): output_shape has too many elements"},
        {"bad_loop_trips", KILN_ERR_UNSUPPORTED,
         "node 'loop' (Loop): trip count 1099511627776: at most 1024 steps"},
        {"bad_loop_body", KILN_ERR_ARG,
         "node 'loop' (Loop): the body has 3 inputs and 2 outputs, want 4 "
         "and 3"},
        {"bad_if_nesting", KILN_ERR_UNSUPPORTED, "subgraphs nested over 32"},
        {"bad_loop_nest", KILN_ERR_UNSUPPORTED, "unrolled past 65536 nodes"},
        {"bad_deep_graphs", KILN_ERR_IO, "messages nested over 256 deep"},
        {"bad_deep_types", KILN_ERR_IO, "messages nested over 256 deep"},
        {"bad_dft_length", KILN_ERR_UNSUPPORTED,
         "node 'dft' (DFT): a transform of 16777216 points"},
        {"bad_stft_frame", KILN_ERR_SHAPE,
         "node 'stft' (STFT): signal [B, N >= 16"},
        {"bad_ext_escape", KILN_ERR_IO, "leaves the model's folder"},
        {"missing_file", KILN_ERR_IO, "cannot open"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *msg = load_fails(cases[k].name, cases[k].st);
        assert_has(msg, cases[k].part);
        free(msg);
    }
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* Loads the bytes as a model: it either loads or fails with a message. */
static int load_bytes(const char *tmp, const unsigned char *b, size_t n)
{
    FILE *f = fopen(tmp, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    kiln_status st = kiln_onnx_load(g, tmp, NULL, &m);
    assert_non_null(m);
    if (st != KILN_OK)
        assert_true(strlen(kiln_onnx_error(m)) > 0);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    return st == KILN_OK;
}

/* Every prefix of a model is refused or loads (a protobuf prefix cut at a
   field boundary is itself a valid message); random byte changes never
   crash (the sanitizer build checks the reads). */
static void test_truncated_and_corrupt(void **state)
{
    (void)state;
    size_t n;
    unsigned char *b = slurp(ONNX_DIR "cnn.onnx", &n);
    char tmp[] = "/tmp/kiln_onnx_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    int loaded = 0;
    for (size_t len = 0; len < n; len++)
        loaded += load_bytes(tmp, b, len);
    assert_true(loaded < (int)n / 2);
    assert_int_equal(load_bytes(tmp, b, n), 1);
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    unsigned char *c = malloc(n);
    for (int trial = 0; trial < 300; trial++) {
        memcpy(c, b, n);
        for (int k = 0; k < 1 + trial % 4; k++)
            c[kiln_rng_u32(&r) % n] = (unsigned char)kiln_rng_u32(&r);
        load_bytes(tmp, c, n);
    }
    free(c);
    free(b);
    remove(tmp);
}

static void test_null_args(void **state)
{
    (void)state;
    kiln_onnx_model *m = NULL;
    kiln_graph *g = kiln_graph_new();
    assert_int_equal(kiln_onnx_load(NULL, "x.onnx", NULL, &m), KILN_ERR_ARG);
    assert_null(m);
    assert_int_equal(kiln_onnx_load(g, NULL, NULL, &m), KILN_ERR_ARG);
    assert_int_equal(kiln_onnx_load(g, "x.onnx", NULL, NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_onnx_status(NULL), KILN_ERR_ARG);
    assert_string_equal(kiln_onnx_error(NULL), "model is NULL");
    assert_int_equal(kiln_onnx_num_inputs(NULL), 0);
    assert_null(kiln_onnx_input(NULL, 0));
    assert_null(kiln_onnx_input_name(NULL, 0));
    kiln_onnx_free(NULL);
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_shape_arithmetic),
        cmocka_unit_test(test_upsample),
        cmocka_unit_test(test_reorder),
        cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_spectral),
        cmocka_unit_test(test_reverse_sequence_bad_length),
        cmocka_unit_test(test_torch_exports),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_trainable),
        cmocka_unit_test(test_unsupported_listed),
        cmocka_unit_test(test_hostile_files),
        cmocka_unit_test(test_truncated_and_corrupt),
        cmocka_unit_test(test_null_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
