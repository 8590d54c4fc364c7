/* The ONNX ops of issue 13's second round, imported from PyTorch 1.13's
   own exports (tests/ref/make_onnx_ops_refs.py): SoftmaxCrossEntropyLoss
   and NegativeLogLikelihoodLoss with weights and ignore_index,
   GatherElements, Trilu, ConvTranspose and Resize agree with PyTorch's
   values and with its gradients of sum(y) with respect to the input, on
   both execution paths, and pass a finite-difference gradient check.  A
   Reshape whose shape is a graph input loads only when
   kiln_onnx_options.input_values gives it, and wrong values are refused. */
#define _POSIX_C_SOURCE 200809L
#include "test_onnx_refs.h"

/* F.cross_entropy(weight, ignore_index=1): mean over [4, 5, 3] scores and
   sum over [5, 6]; F.nll_loss(reduction="none") over [3, 5, 2, 2]. */
static void test_losses(void **state)
{
    (void)state;
    check_model("ops_sce", TOL, 1);
    check_model("ops_sce_sum", TOL, 1);
    check_model("ops_nll_none", TOL, 1);
}

/* torch.gather, torch.triu + torch.tril (Trilu with k), a grouped
   ConvTranspose2d (stride 2, padding 1, output_padding 1) and interpolate
   by 2: nearest, bilinear, bilinear with align_corners. */
static void test_indexing_and_resampling(void **state)
{
    (void)state;
    check_model("ops_gather", TOL, 1);
    check_model("ops_triu", TOL, 1);
    check_model("ops_deconv", TOL, 1);
    check_model("ops_resize", TOL, 1);
}

/* nn.LSTM (2 layers, bidirectional, batch_first), nn.GRU (bidirectional)
   and nn.RNN (relu, 2 layers) as PyTorch exports them: outputs, final
   states and gradients with respect to the sequence. */
static void test_recurrent(void **state)
{
    (void)state;
    check_model("ops_lstm", TOL, 1);
    check_model("ops_gru", TOL, 1);
    check_model("ops_rnn", TOL, 1);
}

/* F.hardswish and F.celu (alpha 0.7): HardSwish and Celu nodes. */
static void test_activations(void **state)
{
    (void)state;
    check_model("ops_act", TOL, 1);
}

/* torch.einsum: products (batched, transposed, with ellipsis, of three
   operands), sums, a diagonal, an outer product, an implicit output. */
static void test_einsum(void **state)
{
    (void)state;
    check_model("ops_einsum", TOL, 1);
}

/* F.conv3d (grouped, strided, padded, dilated, with bias), F.max_pool3d
   and F.avg_pool3d (pads counted and not). */
static void test_volumes(void **state)
{
    (void)state;
    check_model("ops_volumes", TOL, 1);
}

/* F.grid_sample in every mode (bilinear, nearest, bicubic) and padding
   (zeros, border, reflection), with and without align_corners, on a grid
   computed from x: the gradient reaches x through both operands. */
static void test_grid_sample(void **state)
{
    (void)state;
    check_model("ops_grid", TOL, 1);
}

static char *load_message(const kiln_tensor *values, kiln_status want)
{
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    const kiln_tensor *v[2] = {NULL, values};
    kiln_onnx_options opt = {.input_values = v, .n_input_values = 2};
    assert_int_equal(load(g, "ops_reshape_input", &opt, &m), want);
    char *msg = strdup(kiln_onnx_error(m));
    kiln_onnx_free(m);
    kiln_graph_free(g);
    return msg;
}

/* Reshape(X [2, 3], S): S's value is needed while building. */
/* F.max_pool2d / max_pool1d with return_indices: MaxPool's Indices. */
static void test_pool_indices(void **state)
{
    (void)state;
    check_model("ops_pool_idx", TOL, 1);
}

/* nn.BatchNorm2d exported in training mode: batch statistics, and the
   gradient through them. */
static void test_batch_norm_training(void **state)
{
    (void)state;
    check_model("ops_bn_train", TOL, 1);
}

static void test_input_values(void **state)
{
    (void)state;
    int32_t shape[2] = {3, 2}, bad[3] = {3, 2, 1};
    float fshape[2] = {3, 2};
    kiln_tensor *ok = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(2), shape);
    kiln_tensor *wrong_dt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), fshape);
    kiln_tensor *wrong_shape = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(3), bad);
    char *msg = load_message(NULL, KILN_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "('S') must be a constant integer tensor"));
    free(msg);
    msg = load_message(wrong_dt, KILN_ERR_DTYPE);
    assert_non_null(strstr(msg, "input 'S': given f32 values"));
    free(msg);
    msg = load_message(wrong_shape, KILN_ERR_SHAPE);
    assert_non_null(strstr(msg, "input 'S': given values [3]"));
    free(msg);

    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    const kiln_tensor *v[2] = {NULL, ok};
    kiln_onnx_options opt = {.input_values = v, .n_input_values = 2};
    assert_int_equal(load(g, "ops_reshape_input", &opt, &m), KILN_OK);
    kiln_shape ys = kiln_node_shape(kiln_onnx_output(m, 0));
    assert_int_equal(ys.ndim, 2);
    assert_int_equal(ys.d[0], 3);
    assert_int_equal(ys.d[1], 2);
    /* The shape input stays an input: the function takes both. */
    kiln_node *ins[2] = {kiln_onnx_input(m, 0), kiln_onnx_input(m, 1)};
    kiln_node *y = kiln_onnx_output(m, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &y, 1, ins, 2);
    assert_non_null(f);
    float xv[6] = {1, 2, 3, 4, 5, 6}, yv[6] = {0};
    kiln_tensor *in[2] = {kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2, 3), xv), ok};
    kiln_tensor *out = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3, 2), yv);
    assert_int_equal(kiln_run(f, in, &out), KILN_OK);
    for (int k = 0; k < 6; k++)
        assert_true(yv[k] == xv[k]);
    kiln_tensor_free(in[0]);
    kiln_tensor_free(out);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    kiln_tensor_free(ok);
    kiln_tensor_free(wrong_dt);
    kiln_tensor_free(wrong_shape);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_losses),
        cmocka_unit_test(test_indexing_and_resampling),
        cmocka_unit_test(test_recurrent),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_einsum),
        cmocka_unit_test(test_volumes),
        cmocka_unit_test(test_grid_sample),
        cmocka_unit_test(test_pool_indices),
        cmocka_unit_test(test_batch_norm_training),
        cmocka_unit_test(test_input_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
