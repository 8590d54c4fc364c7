/* ONNX export: an MLP, a CNN (conv with bias and fused relu, grouped and
   dilated conv, pools, batch norm in evaluation, flatten, dense, dropout),
   a residual block and a graph of movement and elementwise ops are saved
   with kiln_onnx_save, loaded back into a fresh graph with kiln_onnx_load
   and run at another batch size than they were built at: every output
   matches the original within 1e-6.  onnx.checker (full_check) accepts the
   files when /usr/bin/python3 has onnx.  Errors: every unsupported node
   listed at once, NULL and foreign arguments, unwritable paths, variables
   without values; a failed save leaves an existing file as it was. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"

enum { BUILD_BATCH = 3, RUN_BATCH = 5, MAX_OUT = 6 };

/* A model: its graph, session, input and outputs. */
typedef struct model {
    kiln_graph *g;
    kiln_session *s;
    kiln_node *x;
    kiln_node *out[MAX_OUT];
    int n_out;
} model;

static kiln_node *var(model *m, const char *name, kiln_shape s, double lim)
{
    return kiln_variable(m->g, name, KILN_F32, s, kiln_init_uniform(-lim, lim));
}

static void model_begin(model *m, kiln_shape xs)
{
    memset(m, 0, sizeof *m);
    m->g = kiln_graph_new();
    m->s = kiln_session_new(NULL);
    assert_non_null(m->g);
    assert_non_null(m->s);
    xs.d[0] = BUILD_BATCH;
    m->x = kiln_input_sym(m->g, "X", KILN_F32, xs, KILN_AXIS(0));
}

static void model_free(model *m)
{
    kiln_session_free(m->s);
    kiln_graph_free(m->g);
}

static void build_mlp(model *m)
{
    model_begin(m, KILN_SHAPE(0, 20));
    kiln_graph *g = m->g;
    kiln_node *h = kiln_relu(
        g, kiln_affine(g, m->x, var(m, "fc0.W", KILN_SHAPE(20, 16), 0.5),
                       var(m, "fc0.b", KILN_SHAPE(16), 0.5)));
    h = kiln_tanh(g, kiln_affine(g, h, var(m, "fc1.W", KILN_SHAPE(16, 12), 0.5),
                                 var(m, "fc1.b", KILN_SHAPE(12), 0.5)));
    h = kiln_affine(g, h, var(m, "fc2.W", KILN_SHAPE(12, 10), 0.5),
                    var(m, "fc2.b", KILN_SHAPE(10), 0.5));
    m->out[0] = kiln_softmax(g, h, 1);
    m->out[1] = kiln_log_softmax(g, kiln_sigmoid(g, h), -1);
    m->n_out = 2;
}

/* Batch norm over c channels with variable statistics (set to values
   away from 0 and 1 once the session has them). */
static kiln_node *bn(model *m, kiln_node *x, const char *name, int64_t c)
{
    char n[4][32];
    const char *part[4] = {"weight", "bias", "mean", "var"};
    for (int k = 0; k < 4; k++)
        snprintf(n[k], sizeof n[k], "%s.%s", name, part[k]);
    kiln_shape s = KILN_SHAPE(c);
    return kiln_batch_norm(
        m->g, x, var(m, n[0], s, 1.0), var(m, n[1], s, 1.0),
        kiln_variable(m->g, n[2], KILN_F32, s, kiln_init_uniform(-0.5, 0.5)),
        kiln_variable(m->g, n[3], KILN_F32, s, kiln_init_uniform(0.5, 2.0)),
        0.1f, 1e-5f);
}

static void build_cnn(model *m)
{
    model_begin(m, KILN_SHAPE(0, 1, 12, 12));
    kiln_graph *g = m->g;
    const int two[2] = {2, 2}, three[2] = {3, 3}, one[2] = {1, 1};
    kiln_conv_params p1 = {.padding = {1, 1}, .flags = KILN_CONV_RELU};
    kiln_conv_params p2 = {
        .stride = {2, 2}, .padding = {2, 2}, .dilation = {2, 2}, .groups = 2};
    kiln_node *h =
        kiln_conv2d(g, m->x, var(m, "c0.W", KILN_SHAPE(4, 1, 3, 3), 0.6),
                    var(m, "c0.b", KILN_SHAPE(4), 0.3), &p1);
    h = kiln_max_pool2d(g, h, two, NULL, NULL, NULL, 0);
    kiln_conv_params up = {.stride = {2, 2},
                           .padding = {1, 1},
                           .output_padding = {1, 1},
                           .groups = 2};
    m->out[1] =
        kiln_conv_transpose2d(g, h, var(m, "up.W", KILN_SHAPE(4, 1, 3, 3), 0.5),
                              var(m, "up.b", KILN_SHAPE(2), 0.5), &up);
    h = kiln_conv2d(g, h, var(m, "c1.W", KILN_SHAPE(6, 2, 3, 3), 0.4), NULL,
                    &p2);
    h = kiln_relu(g, bn(m, h, "bn1", 6));
    h = kiln_avg_pool2d(g, h, three, one, one, 0, 0);
    h = kiln_flatten(g, h, 1, -1);
    h = kiln_affine(g, h, var(m, "fc0.W", KILN_SHAPE(54, 16), 0.3),
                    var(m, "fc0.b", KILN_SHAPE(16), 0.3));
    h = kiln_dropout(g, kiln_relu(g, h), 0.5f);
    m->out[0] = kiln_affine(g, h, var(m, "fc1.W", KILN_SHAPE(16, 10), 0.3),
                            var(m, "fc1.b", KILN_SHAPE(10), 0.3));
    m->n_out = 2;
}

static kiln_node *conv3(model *m, kiln_node *x, const char *name)
{
    kiln_conv_params p = {.padding = {1, 1}};
    return kiln_conv2d(m->g, x, var(m, name, KILN_SHAPE(4, 4, 3, 3), 0.3), NULL,
                       &p);
}

/* conv-bn-relu-conv-bn + x, relu, global average pool, a transposed
   dense layer (Gemm) and layer norm. */
static void build_resblock(model *m)
{
    model_begin(m, KILN_SHAPE(0, 4, 8, 8));
    kiln_graph *g = m->g;
    kiln_node *h = kiln_relu(g, bn(m, conv3(m, m->x, "conv0.W"), "bn0", 4));
    h = bn(m, conv3(m, h, "conv1.W"), "bn1", 4);
    h = kiln_relu(g, kiln_add(g, h, m->x));
    h = kiln_adaptive_avg_pool2d(g, h, 1, 1);
    h = kiln_reshape(g, h, KILN_SHAPE(BUILD_BATCH, 4));
    h = kiln_matmul(g, h, var(m, "head.W", KILN_SHAPE(6, 4), 0.5), 0, 1);
    m->out[0] = kiln_layer_norm(g, h, KILN_SHAPE(6),
                                var(m, "ln.weight", KILN_SHAPE(6), 1.0),
                                var(m, "ln.bias", KILN_SHAPE(6), 1.0), 1e-5f);
    m->n_out = 1;
}

/* permute, slice, pad, concat, broadcast, select, comparisons, sums,
   max, argmax, cast, division, pow, silu, batched matmul with a trans. */
static void build_misc(model *m)
{
    model_begin(m, KILN_SHAPE(0, 4, 6));
    kiln_graph *g = m->g;
    int perm[3] = {0, 2, 1};
    int64_t lo[3] = {0, 1, 0}, hi[3] = {BUILD_BATCH, 5, 4}, pl[3] = {0, 0, 1},
            ph[3] = {0, 2, 0};
    kiln_node *t = kiln_permute(g, m->x, perm);  /* [B,6,4] */
    kiln_node *s = kiln_slice(g, t, lo, hi);     /* [B,4,4] */
    kiln_node *p = kiln_pad(g, s, pl, ph, 0.5f); /* [B,6,5] */
    kiln_node *parts[2] = {p, kiln_silu(g, p)};
    kiln_node *cat = kiln_concat(g, parts, 2, 2); /* [B,6,10] */
    kiln_node *pos = kiln_gt(g, cat, kiln_scalar(g, 0.1f));
    kiln_node *sel = kiln_select(g, pos, cat, kiln_scale(g, cat, -0.25f));
    kiln_node *b = kiln_broadcast_to(
        g, var(m, "row", KILN_SHAPE(1, 1, 10), 1.0), KILN_SHAPE(1, 6, 10));
    kiln_node *y = kiln_div(g, kiln_add(g, sel, b),
                            kiln_add(g, kiln_abs(g, b), kiln_scalar(g, 1)));
    kiln_node *w = var(m, "proj", KILN_SHAPE(1, 3, 10), 0.5);
    m->out[0] = kiln_matmul(g, y, w, 0, 1); /* [B,6,3] */
    m->out[1] = kiln_sum(g, kiln_pow(g, kiln_abs(g, y), kiln_scalar(g, 1.5f)),
                         KILN_AXIS(2), 0);
    m->out[2] = kiln_reduce_max(g, y, KILN_AXIS(1), 1);
    m->out[3] = kiln_cast(g, kiln_argmax(g, y, 2), KILN_F32);
    /* the batch moved to axis 1 and back: Reshape infers it (-1) */
    kiln_node *moved = kiln_reshape(g, y, KILN_SHAPE(1, BUILD_BATCH, 60));
    m->out[4] =
        kiln_reshape(g, kiln_exp(g, moved), KILN_SHAPE(BUILD_BATCH, 60));
    /* an input and a variable as outputs: Identity nodes */
    m->out[5] = m->x;
    m->n_out = 6;
}

/* instance, group and layer norm (over two dims), adaptive average
   pooling, conv1d, pools of an unbatched [C,H,W] tensor, index_select. */
static void build_norms(model *m)
{
    model_begin(m, KILN_SHAPE(0, 6, 8, 8));
    kiln_graph *g = m->g;
    const int two[2] = {2, 2};
    kiln_node *h = kiln_instance_norm(g, m->x, var(m, "in.w", KILN_SHAPE(6), 1),
                                      var(m, "in.b", KILN_SHAPE(6), 1), 1e-5f);
    h = kiln_tanh(g, h);
    /* beside the chain: its decomposition's separate affine rounds apart
       from Kiln's fused one, which a layer norm downstream magnifies */
    m->out[2] = kiln_group_norm(g, h, 3, var(m, "gn.w", KILN_SHAPE(6), 1),
                                var(m, "gn.b", KILN_SHAPE(6), 1), 1e-5f);
    h = kiln_adaptive_avg_pool2d(g, h, 4, 4);
    m->out[1] = kiln_layer_norm(g, h, KILN_SHAPE(4, 4),
                                var(m, "ln.w", KILN_SHAPE(4, 4), 1),
                                var(m, "ln.b", KILN_SHAPE(4, 4), 1), 1e-5f);
    kiln_conv_params p = {.padding = {1}, .dilation = {1}};
    h = kiln_reshape(g, m->out[1], KILN_SHAPE(BUILD_BATCH, 6, 16));
    h = kiln_conv1d(g, h, var(m, "c1d.W", KILN_SHAPE(5, 6, 3), 0.4),
                    var(m, "c1d.b", KILN_SHAPE(5), 0.4), &p); /* [B,5,16] */
    kiln_node *img = var(m, "img", KILN_SHAPE(2, 4, 4), 1);
    kiln_node *pools[2] = {kiln_avg_pool2d(g, img, two, NULL, NULL, 0, 0),
                           kiln_max_pool2d(g, img, two, NULL, NULL, NULL, 0)};
    kiln_node *pooled = kiln_concat(g, pools, 2, 0); /* [4,2,2] */
    h = kiln_add(g, h, kiln_reshape(g, pooled, KILN_SHAPE(16)));
    const int32_t pick[3] = {4, 0, 2};
    m->out[0] = kiln_index_select(
        g, h, 1, kiln_constant(g, KILN_I32, KILN_SHAPE(3), pick));
    m->out[3] = kiln_rms_norm(g, m->out[2], 2,
                              var(m, "rms.w", KILN_SHAPE(8, 8), 1), 1e-6f);
    m->n_out = 4;
}

/* Ops whose ONNX forms (CumSum, ReduceProd, TopK, GatherElements, Mod)
   Kiln's importer does not read yet: onnx.checker only. */
static void build_scans(model *m)
{
    model_begin(m, KILN_SHAPE(0, 5));
    kiln_graph *g = m->g;
    kiln_node *values, *idx;
    const int32_t three = 3;
    m->out[0] = kiln_cumsum(g, m->x, 1);
    m->out[1] = kiln_prod(g, m->x, KILN_AXIS(1), 0);
    assert_int_equal(kiln_topk(g, m->x, 2, 1, &values, &idx), KILN_OK);
    m->out[2] = values;
    m->out[3] = kiln_int_mod(g, kiln_int_add(g, idx, idx),
                             kiln_constant(g, KILN_I32, KILN_SCALAR, &three));
    m->n_out = 4;
}

typedef void (*builder)(model *);

/* Runs m's outputs compiled in s on x; new tensors in out. */
static void run_outputs(kiln_session *s, kiln_graph *g, kiln_node *x,
                        kiln_node *const *outs, int n_out, kiln_tensor *in,
                        kiln_tensor **out)
{
    kiln_function *f = kiln_compile(s, g, outs, n_out, &x, 1);
    if (!f)
        fail_msg("compile: %s", kiln_session_error(s));
    for (int k = 0; k < n_out; k++) {
        kiln_shape sh = kiln_node_shape(outs[k]);
        for (int d = 0; d < sh.ndim; d++)
            if (sh.sym >> d & 1u)
                sh.d[d] = kiln_tensor_shape(in).d[0];
        sh.sym = 0;
        out[k] = kiln_tensor_new(kiln_node_dtype(outs[k]), sh);
    }
    if (kiln_run(f, &in, out) != KILN_OK)
        fail_msg("run: %s", kiln_session_error(s));
}

/* Puts values away from the initialisers in the batch norm statistics,
   once compiling created them in the session. */
static void touch_statistics(model *m)
{
    kiln_node *outs[MAX_OUT];
    memcpy(outs, m->out, sizeof outs);
    assert_non_null(kiln_compile(m->s, m->g, outs, m->n_out, &m->x, 1));
    kiln_session_set_training(m->s, 0);
}

static void build(builder b, model *m, kiln_tensor **x)
{
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    b(m);
    if (kiln_graph_status(m->g) != KILN_OK)
        fail_msg("build: %s", kiln_graph_error(m->g));
    touch_statistics(m);
    kiln_shape xs = kiln_node_shape(m->x);
    xs.d[0] = RUN_BATCH;
    xs.sym = 0;
    *x = th_rand(&r, xs, -1, 1);
}

static void save_ok(model *m, const char *path)
{
    if (kiln_onnx_save(m->g, m->s, m->out, m->n_out, NULL, path) != KILN_OK)
        fail_msg("save: %s", kiln_last_error());
}

/* Largest |a - b| / (1 + |b|) over the elements of two f32 / i32 tensors. */
static double max_diff(const kiln_tensor *a, const kiln_tensor *b)
{
    double worst = 0;
    assert_int_equal(kiln_tensor_numel(a), kiln_tensor_numel(b));
    for (int64_t i = 0; i < kiln_tensor_numel(a); i++) {
        double u = kiln_tensor_f32(a)[i], v = kiln_tensor_f32(b)[i];
        double d = fabs(u - v) / (1 + fabs(v));
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

/* kiln info's op histogram of the file holds each op of the
   space-separated list, and none of those written "-Op". */
static void expect_ops(const char *path, const char *ops)
{
    char *text = NULL, op[64];
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    assert_int_equal(kiln_onnx_info(path, f), KILN_OK);
    fclose(f);
    for (const char *p = ops; sscanf(p, "%63s", op) == 1;) {
        char line[80];
        snprintf(line, sizeof line, "\n  %s ", op[0] == '-' ? op + 1 : op);
        if (!strstr(text, line) != (op[0] == '-'))
            fail_msg("%s: %s %s:\n%s", path, op + (op[0] == '-'),
                     op[0] == '-' ? "written" : "missing", text);
        p = strstr(p, op) + strlen(op);
    }
    free(text);
}

/* Saves the model b builds (its file holding ops, as expect_ops), loads
   it into a fresh graph and session, and compares every output at
   RUN_BATCH rows. */
static void round_trip(builder b, const char *file, const char *ops)
{
    model m;
    kiln_tensor *x, *want[MAX_OUT], *got[MAX_OUT];
    build(b, &m, &x);
    run_outputs(m.s, m.g, m.x, m.out, m.n_out, x, want);
    save_ok(&m, tmp_path(file));
    expect_ops(tmp_path(file), ops);

    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_onnx_model *om = NULL;
    if (kiln_onnx_load(g, tmp_path(file), NULL, &om) != KILN_OK)
        fail_msg("load: %s", kiln_onnx_error(om));
    assert_int_equal(kiln_onnx_num_inputs(om), 1);
    assert_string_equal(kiln_onnx_input_name(om, 0), "X");
    assert_int_equal(kiln_onnx_opset(om), 17);
    assert_int_equal(kiln_onnx_num_outputs(om), m.n_out);
    kiln_node *outs[MAX_OUT];
    for (int k = 0; k < m.n_out; k++)
        outs[k] = kiln_onnx_output(om, k);
    run_outputs(s, g, kiln_onnx_input(om, 0), outs, m.n_out, x, got);
    double worst = 0;
    for (int k = 0; k < m.n_out; k++) {
        double d = max_diff(got[k], want[k]);
        worst = d > worst ? d : worst;
        kiln_tensor_free(got[k]);
        kiln_tensor_free(want[k]);
    }
    print_message("%s: largest relative difference after the round trip: "
                  "%.3g\n",
                  file, worst);
    assert_true(worst <= 1e-6);
    kiln_onnx_free(om);
    kiln_session_free(s);
    kiln_graph_free(g);
    kiln_tensor_free(x);
    model_free(&m);
}

static void test_mlp(void **state)
{
    (void)state;
    round_trip(build_mlp, "mlp.onnx", "Softmax LogSoftmax -ReduceMax -Exp");
}

static void test_cnn(void **state)
{
    (void)state;
    round_trip(
        build_cnn, "cnn.onnx",
        "Conv ConvTranspose MaxPool AveragePool BatchNormalization -Dropout");
}

static void test_resblock(void **state)
{
    (void)state;
    round_trip(build_resblock, "resblock.onnx",
               "GlobalAveragePool Gemm LayerNormalization");
}

static void test_misc(void **state)
{
    (void)state;
    round_trip(build_misc, "misc.onnx",
               "Transpose Slice Pad Concat Where Expand ArgMax Identity");
}

static void test_norms(void **state)
{
    (void)state;
    round_trip(build_norms, "norms.onnx",
               "InstanceNormalization LayerNormalization AveragePool Gather "
               "ReduceMean");
}

static const char *const CHECKER =
    "/usr/bin/python3 -c 'import onnx, sys\n"
    "for p in sys.argv[1:]:\n"
    "    onnx.checker.check_model(onnx.load(p), full_check=True)\n"
    "    print(p, \"ok\")'";

/* onnx.checker with full_check (strict shape inference) on every model,
   when Debian's python3-onnx is there. */
static void test_checker(void **state)
{
    (void)state;
    if (system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") != 0) {
        print_message("skipped: /usr/bin/python3 cannot import onnx "
                      "(apt-get install python3-onnx)\n");
        skip();
    }
    static const builder builders[] = {build_mlp,  build_cnn,   build_resblock,
                                       build_misc, build_norms, build_scans};
    static const char *const files[] = {"c_mlp.onnx",  "c_cnn.onnx",
                                        "c_res.onnx",  "c_misc.onnx",
                                        "c_norm.onnx", "c_scan.onnx"};
    char cmd[4096];
    int len = snprintf(cmd, sizeof cmd, "%s", CHECKER);
    for (int k = 0; k < 6; k++) {
        model m;
        kiln_tensor *x;
        build(builders[k], &m, &x);
        save_ok(&m, tmp_path(files[k]));
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s",
                        tmp_path(files[k]));
        kiln_tensor_free(x);
        model_free(&m);
    }
    assert_true(len < (int)sizeof cmd);
    assert_int_equal(system(cmd), 0);
}

/* f32 or i32 values of t, raw, to tmp_dir/name. */
static void write_raw(const char *name, const kiln_tensor *t)
{
    FILE *f = fopen(tmp_path(name), "wb");
    assert_non_null(f);
    assert_int_equal(
        fwrite(kiln_tensor_data(t), 4, (size_t)kiln_tensor_numel(t), f),
        kiln_tensor_numel(t));
    assert_int_equal(fclose(f), 0);
}

/* The model b builds, its input and Kiln's outputs, as
   tests/onnx_save_ort.js reads them. */
static void write_for_ort(builder b, const char *name)
{
    model m;
    kiln_tensor *x, *out[MAX_OUT];
    char file[64];
    build(b, &m, &x);
    run_outputs(m.s, m.g, m.x, m.out, m.n_out, x, out);
    snprintf(file, sizeof file, "%s.onnx", name);
    save_ok(&m, tmp_path(file));
    snprintf(file, sizeof file, "%s.x.bin", name);
    write_raw(file, x);
    snprintf(file, sizeof file, "%s.meta", name);
    FILE *f = fopen(tmp_path(file), "w");
    assert_non_null(f);
    kiln_shape xs = kiln_tensor_shape(x);
    for (int d = 0; d < xs.ndim; d++)
        fprintf(f, "%lld ", (long long)xs.d[d]);
    for (int k = 0; k < m.n_out; k++) {
        fprintf(f, "\n%d", kiln_tensor_dtype(out[k]) == KILN_I32);
        snprintf(file, sizeof file, "%s.out%d.bin", name, k);
        write_raw(file, out[k]);
        kiln_tensor_free(out[k]);
    }
    fprintf(f, "\n");
    assert_int_equal(fclose(f), 0);
    kiln_tensor_free(x);
    model_free(&m);
}

/* ONNX Runtime (npm's onnxruntime-node, as bench/ort installs it, or the
   folder KILN_ONNXRUNTIME_NODE names) runs the exported models and agrees
   with Kiln within 1e-5: a reading of the files independent of Kiln's
   importer. */
static void test_onnx_runtime(void **state)
{
    (void)state;
    const char *mod = getenv("KILN_ONNXRUNTIME_NODE");
    char def[512], cmd[2048];
    snprintf(def, sizeof def, "%s/bench/ort/node_modules/onnxruntime-node",
             KILN_SOURCE_DIR);
    if (!mod || !*mod)
        mod = def;
    snprintf(cmd, sizeof cmd,
             "node -e 'require(process.argv[1])' '%s' "
             ">/dev/null 2>&1",
             mod);
    if (system(cmd) != 0) {
        print_message("skipped: node cannot load %s (npm install "
                      "--ignore-scripts in bench/ort, or set "
                      "KILN_ONNXRUNTIME_NODE)\n",
                      mod);
        skip();
    }
    static const builder builders[] = {build_mlp,  build_cnn,   build_resblock,
                                       build_misc, build_norms, build_scans};
    static const char *const names[] = {"o_mlp",  "o_cnn",   "o_res",
                                        "o_misc", "o_norms", "o_scans"};
    int len = snprintf(cmd, sizeof cmd,
                       "node '%s/tests/onnx_save_ort.js' "
                       "'%s' '%s'",
                       KILN_SOURCE_DIR, mod, tmp_dir);
    for (int k = 0; k < 6; k++) {
        write_for_ort(builders[k], names[k]);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", names[k]);
    }
    assert_true(len < (int)sizeof cmd);
    assert_int_equal(system(cmd), 0);
}

/* Past what the message holds, the count of the nodes left out. */
static void test_many_unsupported(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *h = kiln_input(g, "X", KILN_F32, KILN_SHAPE(4));
    for (int k = 0; k < 40; k++)
        h = kiln_log1p(g, h);
    assert_int_equal(kiln_onnx_save(g, NULL, &h, 1, NULL, tmp_path("x.onnx")),
                     KILN_ERR_UNSUPPORTED);
    assert_error_has("%1 (log1p)");
    assert_error_has("%11 (log1p): no ONNX opset 17 equivalent (and 29 more)");
    assert_true(strlen(kiln_last_error()) < 512);
    assert_int_not_equal(access(tmp_path("x.onnx"), F_OK), 0);
    kiln_graph_free(g);
}

/* A graph whose nodes Kiln cannot write: every one is named in the
   message, nothing is written, and an existing file stays as it was. */
static void test_unsupported(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *lab = kiln_input(g, "labels", KILN_I32, KILN_SHAPE(2));
    kiln_node *a = kiln_node_set_name(kiln_log1p(g, x), "soft");
    kiln_node *b = kiln_one_hot(g, lab, 3);
    kiln_node *c = kiln_expm1(g, kiln_add(g, a, b));
    const char *path = tmp_path("kept.onnx");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    assert_int_equal(kiln_onnx_save(g, NULL, &c, 1, NULL, path),
                     KILN_ERR_UNSUPPORTED);
    print_message("%s\n", kiln_last_error());
    assert_error_has("kiln_onnx_save");
    assert_error_has("log1p 'soft'");
    assert_error_has("one_hot");
    assert_error_has("expm1");
    char buf[64] = "";
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "old contents");
    /* a good save then replaces it */
    kiln_node *ok = kiln_exp(g, x);
    assert_int_equal(kiln_onnx_save(g, NULL, &ok, 1, NULL, path), KILN_OK);
    FILE *null = fopen("/dev/null", "w");
    assert_int_equal(kiln_onnx_info(path, null), KILN_OK);
    fclose(null);
    kiln_graph_free(g);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new(), *other = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *y = kiln_relu(g, x),
              *z = kiln_relu(other, kiln_scalar(other, 1));
    kiln_node *none = NULL;
    const char *path = tmp_path("bad.onnx");
    assert_int_equal(kiln_onnx_save(NULL, NULL, &y, 1, NULL, path),
                     KILN_ERR_ARG);
    assert_error_has("graph is NULL");
    assert_int_equal(kiln_onnx_save(g, NULL, NULL, 1, NULL, path),
                     KILN_ERR_ARG);
    assert_error_has("outputs is NULL");
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, NULL, NULL), KILN_ERR_ARG);
    assert_error_has("path is NULL");
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 0, NULL, path), KILN_ERR_ARG);
    assert_error_has("0 outputs");
    assert_int_equal(kiln_onnx_save(g, NULL, &none, 1, NULL, path),
                     KILN_ERR_ARG);
    assert_error_has("output 0 is NULL");
    assert_int_equal(kiln_onnx_save(g, NULL, &z, 1, NULL, path), KILN_ERR_ARG);
    assert_error_has("another graph");
    const char *names[2] = {"X", "Y"};
    kiln_onnx_save_options opt = {.output_names = names};
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, &opt, path), KILN_ERR_ARG);
    assert_error_has("output name 'X'");
    assert_int_equal(
        kiln_onnx_save(g, NULL, &y, 1, NULL, "/nonexistent/dir/model.onnx"),
        KILN_ERR_IO);
    assert_error_has("/nonexistent/dir/model.onnx");
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, NULL, tmp_dir),
                     KILN_ERR_IO);
    assert_int_equal(count_entries(1), count_entries(0)); /* no temporary */
    assert_int_not_equal(access(path, F_OK), 0);
    kiln_reshape(g, x, KILN_SHAPE(7));
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, NULL, path),
                     KILN_ERR_SHAPE);
    assert_error_has("the graph failed");
    kiln_graph_free(g);
    kiln_graph_free(other);
}

/* A variable needs a value: from the session, or an initialiser without
   randomness. */
static void test_variable_values(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3), kiln_init_uniform(0, 1));
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3), kiln_init_value(0.25));
    /* a second node of b: the same variable, one initializer */
    kiln_node *b2 =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3), kiln_init_value(0.25));
    kiln_node *y = kiln_add(g, kiln_mul(g, x, w), b),
              *yb = kiln_add(g, kiln_add(g, x, b), b2);
    const char *path = tmp_path("vars.onnx");
    assert_int_equal(kiln_onnx_save(g, NULL, &y, 1, NULL, path),
                     KILN_ERR_UNSUPPORTED);
    assert_error_has("variable 'w'");
    assert_error_has("session is NULL");
    assert_int_equal(kiln_onnx_save(g, NULL, &yb, 1, NULL, path), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_onnx_save(g, s, &y, 1, NULL, path),
                     KILN_ERR_UNSUPPORTED);
    assert_error_has("does not hold it");
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(3),
                                          kiln_init_value(2), 1),
                     KILN_OK);
    assert_int_equal(kiln_onnx_save(g, s, &y, 1, NULL, path), KILN_OK);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    for (int i = 0; i < 6; i++)
        kiln_tensor_f32(in)[i] = (float)i;
    kiln_graph *g2 = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    assert_int_equal(kiln_onnx_load(g2, path, NULL, &m), KILN_OK);
    kiln_session *s2 = kiln_session_new(NULL);
    kiln_tensor *out[1];
    kiln_node *o = kiln_onnx_output(m, 0);
    run_outputs(s2, g2, kiln_onnx_input(m, 0), &o, 1, in, out);
    for (int i = 0; i < 6; i++)
        assert_float_equal(kiln_tensor_f32(out[0])[i], 2.0f * i + 0.25f, 0);
    assert_int_equal(kiln_onnx_save(g, s, &yb, 1, NULL, path), KILN_OK);
    expect_ops(path, "Add");
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_int_equal(kiln_onnx_info(path, f), KILN_OK);
    fclose(f);
    assert_has(text, "parameters: 3 in 1 initializers");
    free(text);
    kiln_tensor_free(out[0]);
    kiln_tensor_free(in);
    kiln_onnx_free(m);
    kiln_session_free(s2);
    kiln_graph_free(g2);
    kiln_session_free(s);
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_cnn),
        cmocka_unit_test(test_resblock),
        cmocka_unit_test(test_misc),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_checker),
        cmocka_unit_test(test_onnx_runtime),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_many_unsupported),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_variable_values),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
