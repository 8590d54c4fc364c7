/* The ONNX imports of issue 13's follow-up (tests/ref/make_onnx_more_refs.py):
   float16 and bfloat16 tensors held in f32 and Cast rounding to them, with
   values and gradients of sum(y) checked against PyTorch's on both
   execution paths (and by finite differences where the op is smooth); the
   hostile models (bad_*.onnx) are refused with a message naming what is
   wrong. */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "test_onnx_refs.h"

/* The load of a hostile model fails with status want and a message
   holding each of the two strings (the second may be NULL). */
static void refused(const char *name, kiln_status want, const char *a,
                    const char *b)
{
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    assert_int_equal(load(g, name, NULL, &m), want);
    const char *msg = kiln_onnx_error(m);
    if (!strstr(msg, a) || (b && !strstr(msg, b)))
        fail_msg("%s: message '%s' lacks '%s' / '%s'", name, msg, a,
                 b ? b : "");
    kiln_onnx_free(m);
    kiln_graph_free(g);
}

/* float16 initializers from raw_data and from int32_data read exactly; Cast
   to float16 and to bfloat16 round to nearest even (ties, half's overflow
   to inf) and keep the values in f32; the gradient passes the casts
   straight through, as torch's x.half() does (a rounding has no useful
   finite difference, so none is taken).  PyTorch's gradient of a half
   tensor is itself half, Kiln's stays f32: they agree to half's precision
   (2^-11 relative). */
static void test_half(void **state)
{
    (void)state;
    check_model("more_half", 4.9e-4, 0);
    refused("bad_half_raw", KILN_ERR_IO, "initializer 'w'",
            "raw_data size does not match");
}

/* kiln_round_f16 and kiln_round_bf16 export as Casts there and back, and
   the saved model computes the same values when loaded again. */
static void test_half_export(void **state)
{
    (void)state;
    float xv[6] = {1.00146484375f, 70000.0f, -3e-7f, 1.01171875f, 0.1f, -2.5f};
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(6));
    kiln_node *y = kiln_add(g, kiln_round_f16(g, x), kiln_round_bf16(g, x));
    kiln_session *s = kiln_session_new(NULL);
    char path[] = "/tmp/kiln_half_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kiln_onnx_save(g, s, &y, 1, NULL, path), KILN_OK);
    kiln_graph *g2 = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    assert_int_equal(kiln_onnx_load(g2, path, NULL, &m), KILN_OK);
    unlink(path);
    kiln_node *x2 = kiln_onnx_input(m, 0), *y2 = kiln_onnx_output(m, 0);
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(6), xv);
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_int_equal(kiln_feed(s, x2, xt), KILN_OK);
    assert_int_equal(kiln_forward(s, g2), KILN_OK);
    const float *a = kiln_node_value_f32(s, y), *b = kiln_node_value_f32(s, y2);
    /* (1 + 2^-9) + 1: ties to even in half, down in bfloat16; inf */
    assert_true(a[0] == 2.001953125f && isinf(a[1]));
    for (int k = 0; k < 6; k++)
        assert_true(a[k] == b[k]);
    kiln_tensor_free(xt);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g2);
    kiln_graph_free(g);
}

/* Slice with steps: backward over a whole axis, forward by 2, backward by 2
   from a start past the end, a negative axis, and the extreme int64 steps
   (one position each); values, gradients (an index add) and finite
   differences.  A step of 0 is refused naming the node. */
static void test_slice_steps(void **state)
{
    (void)state;
    check_model("more_slice", TOL, 1);
    check_model("more_slice_extreme", TOL, 1);
    refused("bad_slice_step0", KILN_ERR_ARG, "(Slice): axis 0: step 0", NULL);
}

/* ScatterND with reduction 'mul', a row updated three times by updates
   computed from x: the product in index order, the gradient reaching x
   both as data and through the updates; a row updated 100 times is
   refused. */
static void test_scatter_mul(void **state)
{
    (void)state;
    check_model("more_scatter_mul", TOL, 1);
    refused("bad_scatter_mul_repeat", KILN_ERR_UNSUPPORTED,
            "(ScatterND): reduction 'mul' with a row updated 100 times", NULL);
}

/* det of a zero column is 0 exactly, of two equal rows 0 to rounding. */
static void check_singular(void)
{
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    assert_int_equal(load(g, "more_det", NULL, &m), KILN_OK);
    float xv[48], yv[3];
    for (int k = 0; k < 48; k++)
        xv[k] = (float)((k * 7) % 11) - 5.0f;
    for (int r = 0; r < 4; r++) {
        xv[r * 4 + 2] = 0;                       /* matrix 0: column 2 */
        xv[16 + 3 * 4 + r] = xv[16 + 1 * 4 + r]; /* matrix 1: rows 1, 3 */
    }
    kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
    assert_non_null(f);
    kiln_tensor *xt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3, 4, 4), xv);
    kiln_tensor *yt = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3), yv);
    assert_int_equal(kiln_run(f, &xt, &yt), KILN_OK);
    assert_true(yv[0] == 0.0f);
    assert_true(fabsf(yv[1]) < 1e-4f);
    assert_true(fabsf(yv[2]) > 1.0f);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
}

/* Det of a batch of 4 x 4 matrices and of a 5 x 5 whose first pivot is 0:
   torch.linalg.det's values and gradients (det X X^-T), finite
   differences; singular matrices give 0; matrices that are not square or
   too large to unroll are refused naming the node. */
static void test_det(void **state)
{
    (void)state;
    check_model("more_det", 1e-4, 1);
    check_model("more_det_2d", 1e-4, 1);
    check_singular();
    refused("bad_det_shape", KILN_ERR_SHAPE,
            "(Det): X [2,3,4] is not [..., M, M]", NULL);
    refused("bad_det_huge", KILN_ERR_UNSUPPORTED, "(Det): matrices",
            "at most 256 x 256");
}

/* MelWeightMatrix computed while loading (64-point DFT at 16 kHz, 10 bands
   from 100 to 7000 Hz) applied to a power spectrum: ONNX's reference
   formula's values, the product's gradient; bands past the spectrum and a
   matrix of 10^12 elements are refused naming the node. */
static void test_mel(void **state)
{
    (void)state;
    check_model("more_mel", TOL, 1);
    refused("bad_mel_edges", KILN_ERR_ARG,
            "(MelWeightMatrix): the mel bands between 100 and 30000 Hz leave "
            "the 33 DFT bins",
            NULL);
    refused("bad_mel_huge", KILN_ERR_ARG,
            "(MelWeightMatrix): num_mel_bins 1e+06", "out of range");
}

/* RoiAlign (avg, sampling_ratio 2, spatial_scale 0.5) of rois inside,
   across and outside the map, in half_pixel (opset 16) and
   output_half_pixel (opset 10) modes: ONNX Runtime's rule in plain loops
   gives the values and the gradient; finite differences; a NaN
   spatial_scale and a 2^40 output are refused naming the node. */
static void test_roi_align(void **state)
{
    (void)state;
    check_model("more_roi", TOL, 1);
    check_model("more_roi_v10", TOL, 1);
    refused("bad_roi_nan_scale", KILN_ERR_ARG, "(RoiAlign): output 1 x 1",
            "spatial_scale nan out of range");
    refused("bad_roi_huge", KILN_ERR_ARG, "(RoiAlign): output 1099511627776",
            NULL);
}

/* Resize nearest with tf_half_pixel_for_nn coordinates ((x + 0.5) /
   scale on every axis, ties rounding down): the picks of ONNX's formula
   and their gradient. */
static void test_resize_tf_nn(void **state)
{
    (void)state;
    check_model("more_resize_tf_nn", TOL, 1);
}

/* Resize linear with tf_crop_and_resize, the roi reaching past the input
   on H and W: ONNX's reference's values (extrapolation_value 10 outside)
   and the gradient of the sum; finite differences. */
static void test_resize_crop(void **state)
{
    (void)state;
    check_model("more_resize_crop", TOL, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half),        cmocka_unit_test(test_half_export),
        cmocka_unit_test(test_slice_steps), cmocka_unit_test(test_scatter_mul),
        cmocka_unit_test(test_det),         cmocka_unit_test(test_mel),
        cmocka_unit_test(test_roi_align),   cmocka_unit_test(test_resize_tf_nn),
        cmocka_unit_test(test_resize_crop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
