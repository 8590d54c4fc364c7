/* Models the ONNX fuzzer (fuzz/fuzz_onnx.c) found crashing, kept as
   hostile-file regression cases (tests/ref/onnx/fuzz_*.onnx, the
   fuzzer's inputs as found), and the like found by reading the converters
   (tests/ref/onnx/audit_*.onnx, made by
   tests/ref/make_onnx_audit_models.py): each is refused with the message
   stated, or loads and runs on zero inputs, compiled and dynamically, to
   the outputs stated (or only loads, when its declared sizes are too large
   to run).  The sanitizer build catches the reads and undefined behaviour
   the fixes removed. */
#include "test_helpers.h"

#define ONNX_DIR KILN_TEST_REF_DIR "/onnx/"
#define MAX_IO 8

/* What the run on zero inputs must give: NaN everywhere, or anything (it
   must run, sanitizer-clean); LOAD_ONLY: it must load (inputs of 2^40
   elements: loading must not allocate their size), not run. */
typedef enum { ALL_NAN, ANY, LOAD_ONLY } expect_out;

typedef struct fuzz_case {
    const char *name;
    kiln_status load; /* kiln_onnx_load's status */
    const char *part; /* in its message, when it fails */
    expect_out out;   /* when it loads */
} fuzz_case;

static const fuzz_case cases[] = {
    /* A NaN weight reaches Softmax: the fast exp converted NaN to an
       integer (undefined; UBSan in vmath.h). */
    {"fuzz_softmax_nan", KILN_OK, NULL, ALL_NAN},
    /* Gather given one input read the missing indices' known values. */
    {"fuzz_gather_one_input", KILN_ERR_IO,
     "node 'gather' (Gather): data and indices are required", ALL_NAN},
    /* An Unsqueeze of known shape values whose output has no name: the
       values were never freed (LeakSanitizer). */
    {"fuzz_unnamed_output", KILN_ERR_IO, "input 'n1' is not defined", ALL_NAN},
    /* Resize by a scale of -inf: converted to an integer size (UBSan). */
    {"fuzz_resize_inf_scale", KILN_ERR_ARG, "bad size on axis", ALL_NAN},
    /* Upsample of a [1,2,3,4] input by 2.7e8: the weights of an axis were
       allocated (4 GiB) before any limit. */
    {"fuzz_resize_huge_scale", KILN_ERR_UNSUPPORTED,
     "resizing axis 1 from 2 to 536870912 points", ALL_NAN},
    /* A QLinearConv of a 1x1 kernel: the conv kernel, needing no scratch,
       offset its NULL scratch pointer (UBSan in cpu/conv_fast.c). */
    {"fuzz_conv_no_scratch", KILN_OK, NULL, ANY},
    /* A ConvTranspose whose weight disagrees with its input: the result
       was trimmed as if it had its 4 dims (an index of -2; UBSan). */
    {"fuzz_deconv_poisoned", KILN_ERR_SHAPE,
     "input [1,1,3,3] has 1 channels, weight [9,2,3,3] wants 9", ALL_NAN},
    /* A 3-D AveragePool (count_include_pad 0) after a Pad grown to 227M
       elements: the count of inputs per window was a constant of that size
       made while loading (910 MB; the fuzzer's allocation limit). */
    {"fuzz_avgpool3d_huge_input", KILN_ERR_IO,
     "input '/Constant_1_output_0' is not defined", ALL_NAN},
    /* MaxPool's Indices output after a pool that failed: its geometry
       was read from the poisoned result's dims (index -1; UBSan). */
    {"fuzz_pool_indices_poisoned", KILN_ERR_SHAPE,
     "kiln_max_pool2d: input [1,1,5,5] is too small for kernel [5,37]",
     ALL_NAN},
    /* A GRU (mutated from audit_fills_huge) whose input product failed:
       its gates' columns were cut along axis -1 of the poisoned result
       (UBSan). */
    {"fuzz_gru_poisoned", KILN_ERR_SHAPE,
     "node 'gru' (GRU): kiln_matmul: result shape [124,1048576,786432] has "
     "more than 2^40 elements",
     ALL_NAN},
    /* A QLinearConv that failed read its channels from the poisoned
       result and gave up with a problem of its own; the loader then built
       the next node, an STFT, on the poisoned graph (index -1; UBSan). */
    {"audit_poison_then_stft", KILN_ERR_SHAPE,
     "node 'qconv' (QLinearConv): kiln_conv2d: input [1,3,4,4] has 3 "
     "channels, weight [2,2,3,3] wants 2",
     ALL_NAN},
    /* Sizes computed from a file's values overflowed int64 (UBSan). */
    {"audit_tile_overflow", KILN_ERR_SHAPE,
     "node 'tile' (Tile): 4611686018427387904 repeats of axis 0 of size 2",
     ALL_NAN},
    {"audit_depth_to_space", KILN_ERR_SHAPE,
     "node 'd2s' (DepthToSpace): blocksize 4294967296 for this input", ALL_NAN},
    {"audit_einsum_broadcast", KILN_ERR_SHAPE,
     "node 'es' (Einsum): operand 1: sizes of a shared label differ, a "
     "diagonal over 4096, more than 8 dims or over 2^40 elements",
     ALL_NAN},
    {"audit_conv_same_kernel", KILN_ERR_SHAPE,
     "node 'conv' (Conv): kernel size 34359738368", ALL_NAN},
    {"audit_lstm_hidden", KILN_ERR_ARG,
     "node 'lstm' (LSTM): hidden_size 4611686018427387904: must be "
     "positive, at most 2^40",
     ALL_NAN},
    {"audit_pad_huge", KILN_ERR_SHAPE,
     "node 'pad' (Pad): pad 4611686018427387904", ALL_NAN},
    /* A scan output of 8 dims was stacked into 9, written past the
       shape's dims. */
    {"audit_loop_nine_dims", KILN_ERR_UNSUPPORTED,
     "node 'loop' (Loop): scan output of 8 dims: stacked it would have "
     "more than 8",
     ALL_NAN},
    /* DFT of a 0-d signal: its complex dim was read at index -1. */
    {"audit_dft_scalar", KILN_ERR_SHAPE,
     "node 'dft' (DFT): a signal of 0 dims: want [..., 1 or 2] with the axis "
     "before the last",
     ALL_NAN},
    /* Resize whose first axis's product failed: the next axis divided by
       its input size read from the poisoned result (0; SIGFPE). */
    {"audit_resize_poisoned", KILN_ERR_SHAPE,
     "node 'resize' (Resize): kiln_matmul: result shape "
     "[1,1024,549755813888] has more than 2^40 elements",
     ALL_NAN},
    /* MatMul of a vector whose product failed: the vector's axis was
       dropped from the poisoned result's dims (index -2; UBSan). */
    {"audit_matmul_vector", KILN_ERR_SHAPE, "node 'mm' (MatMul): kiln_matmul",
     ALL_NAN},
    /* MelWeightMatrix of 1e30 bands: converted to int64 before its range
       was checked (UBSan). */
    {"audit_mel_huge", KILN_ERR_ARG,
     "node 'mel' (MelWeightMatrix): num_mel_bins 1e+30", ALL_NAN},
    /* Tables of positions as long as a declared dim, past i32: a 3-D
       pool strided over 2^31 depths, a reversed CumSum of 2^32 points. */
    {"audit_pool3d_depth", KILN_ERR_UNSUPPORTED,
     "node 'pool3d' (MaxPool): a strided depth of 2147483648 (at most 2^31 "
     "- 1)",
     ALL_NAN},
    {"audit_cumsum_long", KILN_ERR_UNSUPPORTED,
     "node 'cumsum' (CumSum): reversing 4294967296 points of axis 0 "
     "(positions past i32)",
     ALL_NAN},
    /* MaxUnpool of 2^39 points by a stride of 2^31 - 1: the unpooled
       size overflowed int64 (UBSan). */
    {"audit_unpool_stride", KILN_ERR_SHAPE,
     "node 'unpool' (MaxUnpool): spatial axis 0 unpools to 1099511627777 "
     "points",
     ALL_NAN},
    /* Nodes per channel or tap of a declared size: an LRN window of 2^31
       channels, a 3-D pool 2^30 deep (billions of nodes). */
    {"audit_lrn_window", KILN_ERR_UNSUPPORTED,
     "node 'lrn' (LRN): a window of 2147483647 channels (at most 4096)",
     ALL_NAN},
    {"audit_pool3d_deep", KILN_ERR_UNSUPPORTED,
     "node 'pool3d' (MaxPool): a kernel 1073741824 deep (at most 4096)",
     ALL_NAN},
    /* Range of 2^30 values from a file of a few bytes: a 4 GiB constant
       made while loading. */
    {"audit_range_huge", KILN_ERR_UNSUPPORTED,
     "node 'range' (Range): a range of 1073741824 values (at most 16777216)",
     ALL_NAN},
    /* GatherND with a batch dim of 0: 0 rows divided by 0 batches. */
    {"audit_gather_nd_empty", KILN_OK, NULL, ANY},
    /* Constants of the declared sizes made while loading (4 TB for
       ConstantOfShape, Dropout's mask, AveragePool's divisor,
       ScatterElements, ScatterND, MaxUnpool, EyeLike, Det, GRU's state,
       MaxPool's Indices grids): now broadcast while running. */
    {"audit_fills_huge", KILN_OK, NULL, LOAD_ONLY},
    /* Tables of 2^31 - 1 positions (a strided Slice, a reversed CumSum, a
       3-D pool strided in depth): 4 to 8 GiB while loading, now two
       tables of about 2^16 entries each. */
    {"audit_tables_huge", KILN_OK, NULL, LOAD_ONLY},
};

static void check_out(const fuzz_case *c, const kiln_tensor *t)
{
    assert_non_null(t);
    if (c->out == ANY)
        return;
    const float *v = kiln_tensor_f32(t);
    assert_non_null(v);
    assert_true(kiln_tensor_numel(t) > 0);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
        if (c->out == ALL_NAN && v[i] == v[i])
            fail_msg("%s: output %lld is %g, not NaN", c->name, (long long)i,
                     (double)v[i]);
}

/* Runs the loaded model on zero inputs both ways and checks the outputs. */
static void run_zeros(const fuzz_case *c, kiln_graph *g, kiln_onnx_model *m)
{
    int n_in = kiln_onnx_num_inputs(m), n_out = kiln_onnx_num_outputs(m);
    assert_true(n_in <= MAX_IO && n_out <= MAX_IO);
    kiln_node *ins[MAX_IO], *outs[MAX_IO];
    kiln_tensor *in[MAX_IO], *out[MAX_IO];
    kiln_session *s = kiln_session_new(NULL);
    for (int k = 0; k < n_in; k++) {
        ins[k] = kiln_onnx_input(m, k);
        in[k] =
            kiln_tensor_new(kiln_node_dtype(ins[k]), kiln_node_shape(ins[k]));
        assert_int_equal(kiln_feed(s, ins[k], in[k]), KILN_OK);
    }
    for (int k = 0; k < n_out; k++)
        outs[k] = kiln_onnx_output(m, k);
    kiln_function *f = kiln_compile(s, g, outs, n_out, ins, n_in);
    if (!f)
        fail_msg("%s: %s", c->name, kiln_session_error(s));
    for (int k = 0; k < n_out; k++)
        out[k] = kiln_function_new_output(f, k);
    assert_int_equal(kiln_run(f, in, out), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    for (int k = 0; k < n_out; k++) {
        check_out(c, out[k]);
        kiln_tensor *v = kiln_node_value(s, outs[k]);
        check_out(c, v);
        kiln_tensor_free(v);
        kiln_tensor_free(out[k]);
    }
    for (int k = 0; k < n_in; k++)
        kiln_tensor_free(in[k]);
    kiln_session_free(s);
}

static void test_fuzz_cases(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const fuzz_case *c = &cases[k];
        char path[512];
        snprintf(path, sizeof path, ONNX_DIR "%s.onnx", c->name);
        kiln_graph *g = kiln_graph_new();
        kiln_onnx_model *m = NULL;
        kiln_status st = kiln_onnx_load(g, path, NULL, &m);
        assert_non_null(m);
        if (st != c->load)
            fail_msg("%s: status %d, want %d: %s", c->name, st, c->load,
                     kiln_onnx_error(m));
        if (st == KILN_OK) {
            if (c->out != LOAD_ONLY)
                run_zeros(c, g, m);
        } else if (!c->part || !strstr(kiln_onnx_error(m), c->part))
            fail_msg("%s: '%s' lacks '%s'", c->name, kiln_onnx_error(m),
                     c->part);
        kiln_onnx_free(m);
        kiln_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
