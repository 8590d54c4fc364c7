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

/* F.conv_transpose3d (grouped, strided, padded, dilated, output padding,
   bias; depthwise; a kernel one deep), the weights and a bias partly
   taken from the input so that the gradient covers them; ConvTranspose
   nodes with auto_pad SAME_UPPER / SAME_LOWER and output_shape (cropping
   and zero-padding), against PyTorch by ONNX's padding rule; and a 3-D
   Conv without kernel_shape (taken from the weight). */
static void test_deconv3d(void **state)
{
    (void)state;
    check_model("ops_deconv3d", TOL, 1);
    check_model("ops_deconv3d_pads", TOL, 1);
}

/* Position tables past 4096 entries (two short tables summed while
   running): strided and reversed Slices of 20000 points, ArgMax's
   select_last_index (x reversed). */
static void test_long_positions(void **state)
{
    (void)state;
    check_model("ops_long_positions", TOL, 0);
}

/* Hostile 3-D ConvTranspose nodes are refused naming the node (made by
   tests/ref/make_onnx_deconv3d_refs.py). */
static void test_deconv3d_hostile(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        kiln_status st;
        const char *part;
    } cases[] = {
        {"stride0", KILN_ERR_ARG, "bad strides"},
        {"stride_neg", KILN_ERR_ARG, "bad strides"},
        {"huge", KILN_ERR_SHAPE,
         "output [1,1,4,4294967296,4294967296] is too large"},
        {"channels", KILN_ERR_SHAPE,
         "input [1,3,3,3,3] and weight [2,1,3,3,3]: the weight's dim 0 must "
         "be the input's channels, a multiple of group 1"},
        {"rank", KILN_ERR_SHAPE,
         "input [1,2,3,3,3] and weight [2,1,3,3] differ in rank"},
        {"group", KILN_ERR_SHAPE, "a multiple of group 3"},
        {"kernel", KILN_ERR_SHAPE, "kernel_shape differs from the weight's"},
        {"out_neg", KILN_ERR_ARG, "output size -4 of spatial dim 0"},
        {"out_huge", KILN_ERR_ARG,
         "output size 1125899906842624 of spatial dim 1"},
        {"out_pad", KILN_ERR_SHAPE,
         "kiln_pad: invalid shape [1,1,2147483651,2147483651,2147483651]"},
        {"taps", KILN_ERR_UNSUPPORTED,
         "input depth 4100 times kernel depth 4100 (at most 16777216)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char name[64];
        snprintf(name, sizeof name, "bad_deconv3d_%s", cases[k].name);
        kiln_graph *g = kiln_graph_new();
        kiln_onnx_model *m = NULL;
        kiln_status st = load(g, name, NULL, &m);
        const char *msg = kiln_onnx_error(m);
        if (st != cases[k].st || !strstr(msg, "node 'dc' (ConvTranspose): ") ||
            !strstr(msg, cases[k].part))
            fail_msg("%s: status %d, want %d: '%s'", name, st, cases[k].st,
                     msg);
        kiln_onnx_free(m);
        kiln_graph_free(g);
    }
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
        cmocka_unit_test(test_deconv3d),
        cmocka_unit_test(test_deconv3d_hostile),
        cmocka_unit_test(test_long_positions),
        cmocka_unit_test(test_grid_sample),
        cmocka_unit_test(test_pool_indices),
        cmocka_unit_test(test_batch_norm_training),
        cmocka_unit_test(test_input_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
