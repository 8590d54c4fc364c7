/* Convolutions: conv1d, conv2d and conv_transpose2d against PyTorch
   (tests/ref/conv, written by tests/ref/make_conv_refs.py): outputs and
   both gradients, compiled with the fast and the reference kernels and run
   dynamically; finite-difference gradient checks of first and second
   order; the fast kernels against the reference on random shapes; build
   errors; a symbolic batch. */
#include <inttypes.h>

#include "test_helpers.h"

#include "cpu/dispatch.h"
#include "cpu/kernels.h"
#include "graph/conv.h"

#include "test_alloc_count.h"
#include "test_conv_check.h"

#define RTOL 1e-4
#define ATOL 1e-5
#define MAXT 10

typedef struct tensor_ref {
    char kind[8], name[8];
    kiln_shape shape;
    double *v;
    float *f; /* the values as f32 */
} tensor_ref;

typedef struct conv_ref {
    char op[16];
    int nd, stride[2], pad[2], dil[2], outpad[2], groups, same, bias, relu;
    tensor_ref t[MAXT];
    int n;
} conv_ref;

static void read_tensor(FILE *f, const char *path, tensor_ref *t)
{
    char dt[8];
    if (fscanf(f, "%7s %7s %7s %d", t->kind, t->name, dt, &t->shape.ndim) != 4)
        fail_msg("%s: bad tensor header", path);
    for (int i = 0; i < t->shape.ndim; i++)
        assert_int_equal(fscanf(f, "%" SCNd64, &t->shape.d[i]), 1);
    int64_t n = kiln_shape_numel(t->shape);
    t->v = malloc(((size_t)n + 1) * sizeof *t->v);
    t->f = malloc(((size_t)n + 1) * sizeof *t->f);
    assert_true(t->v && t->f);
    for (int64_t i = 0; i < n; i++) {
        if (fscanf(f, "%lf", &t->v[i]) != 1)
            fail_msg("%s: %s: value %lld missing", path, t->name, (long long)i);
        t->f[i] = (float)t->v[i];
    }
}

static void ref_load(const char *name, conv_ref *r)
{
    char path[512];
    snprintf(path, sizeof path, "%s/conv/%s.txt", KILN_TEST_REF_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run tests/ref/make_conv_refs.py)", path);
    memset(r, 0, sizeof *r);
    if (fscanf(f, "params %15s %d %d %d %d %d %d %d %d %d %d %d %d %d", r->op,
               &r->nd, &r->stride[0], &r->stride[1], &r->pad[0], &r->pad[1],
               &r->dil[0], &r->dil[1], &r->outpad[0], &r->outpad[1], &r->groups,
               &r->same, &r->bias, &r->relu) != 14)
        fail_msg("%s: bad params line", path);
    int c;
    while (r->n < MAXT && fscanf(f, " %c", (char *)&c) == 1) {
        ungetc(c, f);
        read_tensor(f, path, &r->t[r->n++]);
    }
    fclose(f);
}

static tensor_ref *ref_get(conv_ref *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name))
            return &r->t[i];
    return NULL;
}

static void ref_free(conv_ref *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->t[i].v);
        free(r->t[i].f);
    }
}

static kiln_conv_params params_of(const conv_ref *r)
{
    kiln_conv_params p = {.groups = r->groups,
                          .flags = (r->same ? KILN_PAD_SAME : 0) |
                                   (r->relu ? KILN_CONV_RELU : 0)};
    for (int i = 0; i < 2; i++) {
        p.stride[i] = r->stride[i];
        p.padding[i] = r->same ? 0 : r->pad[i];
        p.dilation[i] = r->dil[i];
        p.output_padding[i] = r->outpad[i];
    }
    return p;
}

static kiln_node *var_of(kiln_graph *g, tensor_ref *t)
{
    return kiln_variable(g, t->name, KILN_F32, t->shape,
                         kiln_init_values(t->f));
}

static kiln_node *build_case(kiln_graph *g, conv_ref *r, kiln_node *x,
                             kiln_node *w, kiln_node *b)
{
    kiln_conv_params p = params_of(r);
    if (!strcmp(r->op, "transpose"))
        return kiln_conv_transpose2d(g, x, w, b, &p);
    return r->nd == 1 ? kiln_conv1d(g, x, w, b, &p)
                      : kiln_conv2d(g, x, w, b, &p);
}

/* sum(y * gy): the loss whose gradient for y is gy. */
static kiln_node *weighted_sum(kiln_graph *g, kiln_node *y, tensor_ref *gy)
{
    kiln_node *c = kiln_constant(g, KILN_F32, gy->shape, gy->f);
    return kiln_sum(g, kiln_mul(g, y, c), KILN_ALL_AXES, 0);
}

/* y and the gradients of sum(y * gy) for x, w (and b), compiled in a
   session with the reference (1) or the fast kernels (-1). */
static void check_case_compiled(const char *name, int reference)
{
    conv_ref r;
    ref_load(name, &r);
    kiln_session_options o = {.reference_kernels = reference};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = var_of(g, ref_get(&r, "x")),
              *w = var_of(g, ref_get(&r, "w"));
    kiln_node *b = r.bias ? var_of(g, ref_get(&r, "b")) : NULL;
    tensor_ref *gy = ref_get(&r, "gy");
    kiln_node *y = build_case(g, &r, x, w, b);
    kiln_node *loss = weighted_sum(g, y, gy);
    kiln_node *outs[4] = {y, kiln_grad(g, loss, x), kiln_grad(g, loss, w),
                          b ? kiln_grad(g, loss, b) : NULL};
    const char *names[4] = {"y", "dx", "dw", "db"};
    int n_out = b ? 4 : 3;
    kiln_tensor *got[4] = {0};
    th_run(s, g, outs, n_out, NULL, NULL, 0, got);
    for (int i = 0; i < n_out; i++) {
        tensor_ref *want = ref_get(&r, names[i]);
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", name, names[i],
                 reference > 0 ? "reference" : "fast");
        th_assert_shape(kiln_tensor_shape(got[i]), want->shape);
        th_assert_close(what, kiln_tensor_f32(got[i]), want->v,
                        kiln_shape_numel(want->shape), RTOL, ATOL);
        kiln_tensor_free(got[i]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
    ref_free(&r);
}

static const char *CASES[] = {
    "conv_basic",
    "conv_stride2_pad1",
    "conv_same",
    "conv_dilation2",
    "conv_groups2",
    "conv_depthwise",
    "conv_nonsquare",
    "conv_1x1",
    "conv_mnist",
    "conv_relu",
    "conv_relu_strided",
    "conv1d",
    "conv1d_same_dilation2",
    "conv_transpose",
    "conv_transpose_groups2",
    "conv_transpose_dilation2",
};
#define N_CASES (int)(sizeof CASES / sizeof *CASES)

static void test_pytorch_compiled(void **state)
{
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        check_case_compiled(CASES[i], -1);
        check_case_compiled(CASES[i], 1);
    }
}

/* The dynamic path: forward, backward, values and gradients. */
static void test_pytorch_dynamic(void **state)
{
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        conv_ref r;
        ref_load(CASES[c], &r);
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = var_of(g, ref_get(&r, "x"));
        kiln_node *w = var_of(g, ref_get(&r, "w"));
        kiln_node *b = r.bias ? var_of(g, ref_get(&r, "b")) : NULL;
        tensor_ref *gy = ref_get(&r, "gy");
        kiln_node *y = build_case(g, &r, x, w, b);
        kiln_node *loss = weighted_sum(g, y, gy);
        th_assert_graph_ok(g);
        assert_int_equal(kiln_backprop(s, g, loss), KILN_OK);
        kiln_node *nodes[4] = {y, x, w, b};
        const char *names[4] = {"y", "dx", "dw", "db"};
        for (int i = 0; i < (b ? 4 : 3); i++) {
            tensor_ref *want = ref_get(&r, names[i]);
            const float *got = i ? kiln_node_grad_f32(s, nodes[i])
                                 : kiln_node_value_f32(s, nodes[i]);
            assert_non_null(got);
            th_assert_close(CASES[c], got, want->v,
                            kiln_shape_numel(want->shape), RTOL, ATOL);
        }
        kiln_graph_free(g);
        kiln_session_free(s);
        ref_free(&r);
    }
}

/* conv_weight_grad on its own: torch.nn.grad.conv2d_weight. */
static void test_weight_grad_op(void **state)
{
    (void)state;
    conv_ref r;
    ref_load("conv_weight_grad", &r);
    tensor_ref *x = ref_get(&r, "x"), *gy = ref_get(&r, "gy"),
               *want = ref_get(&r, "y");
    kiln_graph *g = kiln_graph_new();
    kiln_window win = {.nd = 2, .groups = r.groups};
    for (int i = 0; i < 2; i++) {
        win.kernel[i] = (int)want->shape.d[2 + i];
        win.stride[i] = r.stride[i];
        win.dilation[i] = r.dil[i];
        win.pad_lo[i] = win.pad_hi[i] = r.pad[i];
    }
    kiln_node *dw = kiln_conv_op(
        g, KILN_OP_CONV_WGRAD, kiln_constant(g, KILN_F32, x->shape, x->f),
        kiln_constant(g, KILN_F32, gy->shape, gy->f), &win, NULL);
    for (int ref = -1; ref <= 1; ref += 2) {
        kiln_session_options o = {.reference_kernels = ref};
        kiln_session *s = kiln_session_new(&o);
        kiln_tensor *t = th_eval(s, g, dw);
        th_assert_close("conv_weight_grad", kiln_tensor_f32(t), want->v,
                        kiln_shape_numel(want->shape), RTOL, ATOL);
        kiln_tensor_free(t);
        kiln_session_free(s);
    }
    kiln_graph_free(g);
    ref_free(&r);
}

/* ------------------------------------------------------------ gradcheck */

/* sum(r * tanh(conv(x, w) + b)) for a random case: first order for x, w
   and b; then the sum of the squares of its gradients for x and w, whose
   gradients run through the rules of conv_transpose and conv_weight_grad
   (grad of grad). */
typedef struct gc_case {
    int nd, transpose;
    kiln_shape x, w;
    kiln_conv_params p;
} gc_case;

static kiln_node *gc_loss(kiln_graph *g, const gc_case *c, kiln_node *x,
                          kiln_node *w, kiln_node *b, int order)
{
    kiln_node *y = c->transpose ? kiln_conv_transpose2d(g, x, w, b, &c->p)
                   : c->nd == 1 ? kiln_conv1d(g, x, w, b, &c->p)
                                : kiln_conv2d(g, x, w, b, &c->p);
    kiln_node *l = kiln_sum(g, kiln_mul(g, kiln_tanh(g, y), kiln_sin(g, y)),
                            KILN_ALL_AXES, 0);
    if (order == 1)
        return l;
    kiln_node *gx = kiln_grad(g, l, x), *gw = kiln_grad(g, l, w);
    return kiln_add(g, kiln_sum(g, kiln_mul(g, gx, gx), KILN_ALL_AXES, 0),
                    kiln_sum(g, kiln_mul(g, gw, gw), KILN_ALL_AXES, 0));
}

static void gradcheck_case(const gc_case *c, int order)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, c->x, kiln_init_uniform(-1, 1));
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, c->w, kiln_init_uniform(-1, 1));
    int64_t o =
        c->transpose ? c->w.d[1] * (c->p.groups ? c->p.groups : 1) : c->w.d[0];
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(o),
                                 kiln_init_uniform(-1, 1));
    kiln_node *loss = gc_loss(g, c, x, w, b, order);
    th_assert_graph_ok(g);
    kiln_node *wrt[3] = {x, w, b};
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, loss, wrt, 3, NULL, NULL, 0, 1e-3, 2e-2, &res) !=
        KILN_OK)
        fail_msg("order %d: %s (max abs err %g)", order, kiln_session_error(s),
                 res.max_abs_err);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_gradcheck(void **state)
{
    (void)state;
    const gc_case cases[] = {
        {2,
         0,
         KILN_SHAPE(2, 2, 5, 4),
         KILN_SHAPE(3, 2, 3, 2),
         {.stride = {2, 1}, .padding = {1, 1}}},
        {2,
         0,
         KILN_SHAPE(1, 4, 5, 5),
         KILN_SHAPE(4, 2, 2, 2),
         {.dilation = {2, 1}, .groups = 2}},
        {2,
         0,
         KILN_SHAPE(1, 3, 4, 4),
         KILN_SHAPE(3, 1, 3, 3),
         {.groups = 3, .flags = KILN_PAD_SAME}},
        {1,
         0,
         KILN_SHAPE(2, 2, 7),
         KILN_SHAPE(3, 2, 3),
         {.stride = {2}, .padding = {1}}},
        {2,
         0,
         KILN_SHAPE(2, 2, 5, 5),
         KILN_SHAPE(3, 2, 3, 3),
         {.padding = {1, 1}, .flags = KILN_CONV_RELU}},
        {2,
         1,
         KILN_SHAPE(1, 2, 3, 3),
         KILN_SHAPE(2, 2, 3, 2),
         {.stride = {2, 2}, .padding = {1, 0}, .output_padding = {1, 0}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int order = 1; order <= 2; order++)
            gradcheck_case(&cases[i], order);
}

/* ------------------------------------------------------------ fast */

static int rnd(kiln_rng *r, int lo, int hi)
{
    return lo + (int)(kiln_rng_uniform(r) * (hi - lo + 1)) % (hi - lo + 1);
}

/* A random window over nd dims and operand shapes a conv of it takes:
   odd sizes, size-1 dims, groups, strides, dilations, padding; with unit
   strides for kind 1 and a 1x1 kernel with no padding for kind 2 (the
   fast kernels' flat and direct ways). */
static void random_conv(kiln_rng *r, int nd, int kind, kiln_window *w,
                        kiln_shape *x, kiln_shape *wt)
{
    *w = (kiln_window){.nd = nd, .groups = rnd(r, 1, 3)};
    int cg = rnd(r, 1, 3), og = rnd(r, 1, 3);
    *x = (kiln_shape){.ndim = nd + 2, .d = {rnd(r, 1, 3), cg * w->groups}};
    *wt = (kiln_shape){.ndim = nd + 2, .d = {og * w->groups, cg}};
    for (int i = 0; i < nd; i++) {
        w->kernel[i] = rnd(r, 1, 4);
        w->stride[i] = rnd(r, 1, 3);
        w->dilation[i] = rnd(r, 1, 2);
        w->pad_lo[i] = rnd(r, 0, 2);
        w->pad_hi[i] = rnd(r, 0, 2);
        int span = w->dilation[i] * (w->kernel[i] - 1) + 1;
        x->d[2 + i] = rnd(r, span > 3 ? span - 3 : 1, span + 8);
        if (x->d[2 + i] + w->pad_lo[i] + w->pad_hi[i] < span)
            x->d[2 + i] = span;
        if (kind >= 1)
            w->stride[i] = 1;
        if (kind == 2) {
            w->kernel[i] = 1;
            w->pad_lo[i] = w->pad_hi[i] = 0;
        }
        wt->d[2 + i] = w->kernel[i];
    }
}

static void test_fast_matches_reference(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    for (int it = 0; it < 120; it++) {
        kiln_graph *g = kiln_graph_new();
        kiln_window win;
        kiln_shape xs, ws;
        random_conv(&r, 1 + it % 3, it / 3 % 3, &win, &xs, &ws);
        kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
        kiln_node *w = kiln_input(g, "w", KILN_F32, ws);
        kiln_node *y = kiln_conv_op(g, KILN_OP_CONV, x, w, &win, NULL);
        th_assert_graph_ok(g);
        kiln_node *ops[3];
        conv_and_grads(g, x, w, y, win, ops);
        th_assert_graph_ok(g);
        for (int k = 0; k < 3; k++)
            fast_matches_reference(&r, ops[k]);
        kiln_graph_free(g);
    }
}

/* One input channel, 2-D, unit stride (cpu/conv_direct.c where AVX-512
   is present): rows of 8 to 40 (tails of both vectors of a span), channel
   counts off the blocks of 8 and 4, taps off the blocks of 4; forward
   with bias and relu fused, and the weight gradient; at 1 and 2 threads
   (a batch under the thread count splits the forward's blocks). */
static void test_direct_matches_reference(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    for (int it = 0; it < 40; it++) {
        kiln_set_num_threads(1 + it / 2 % 2);
        kiln_graph *g = kiln_graph_new();
        kiln_window win = {.nd = 2, .groups = 1};
        win.flags = it % 2 ? KILN_WINDOW_RELU : 0;
        for (int d = 0; d < 2; d++) {
            win.kernel[d] = rnd(&r, 1, 5);
            win.stride[d] = win.dilation[d] = 1;
            win.pad_lo[d] = win.pad_hi[d] = rnd(&r, 0, 2);
        }
        int64_t o = rnd(&r, 1, 19), h = win.kernel[0] + rnd(&r, 0, 6);
        int64_t w = rnd(&r, 8, 40);
        kiln_node *x =
            kiln_input(g, "x", KILN_F32, KILN_SHAPE(rnd(&r, 1, 3), 1, h, w));
        kiln_node *wt = kiln_input(
            g, "w", KILN_F32, KILN_SHAPE(o, 1, win.kernel[0], win.kernel[1]));
        kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(o));
        kiln_node *y = kiln_conv_fused(g, x, wt, it % 3 ? b : NULL, &win, NULL);
        win.flags = 0;
        kiln_node *dy = kiln_input(g, "dy", KILN_F32, kiln_node_shape(y));
        kiln_node *dw = kiln_conv_op(g, KILN_OP_CONV_WGRAD, x, dy, &win, NULL);
        th_assert_graph_ok(g);
        fast_matches_reference(&r, y);
        fast_matches_reference(&r, dw);
        kiln_graph_free(g);
    }
    kiln_set_num_threads(0);
}

/* ------------------------------------------------------------ errors */

static void expect_error(kiln_node *(*build)(kiln_graph *g), const char *msg)
{
    kiln_graph *g = kiln_graph_new();
    build(g);
    th_expect_graph_error(g, msg);
    kiln_graph_free(g);
}

#define IN(...) kiln_input(g, "x", KILN_F32, KILN_SHAPE(__VA_ARGS__))
#define WT(...) kiln_input(g, "w", KILN_F32, KILN_SHAPE(__VA_ARGS__))

static kiln_node *bad_channels(kiln_graph *g)
{
    return kiln_conv2d(g, IN(2, 3, 8, 8), WT(4, 2, 3, 3), NULL, NULL);
}

static kiln_node *bad_groups(kiln_graph *g)
{
    kiln_conv_params p = {.groups = 3};
    return kiln_conv2d(g, IN(2, 3, 8, 8), WT(4, 1, 3, 3), NULL, &p);
}

static kiln_node *bad_input_groups(kiln_graph *g)
{
    kiln_conv_params p = {.groups = 2};
    return kiln_conv2d(g, IN(2, 3, 8, 8), WT(4, 1, 3, 3), NULL, &p);
}

static kiln_node *kernel_too_large(kiln_graph *g)
{
    kiln_conv_params p = {.dilation = {2, 1}};
    return kiln_conv2d(g, IN(1, 1, 4, 8), WT(1, 1, 3, 3), NULL, &p);
}

static kiln_node *negative_stride(kiln_graph *g)
{
    kiln_conv_params p = {.stride = {-1, 1}};
    return kiln_conv2d(g, IN(1, 1, 4, 4), WT(1, 1, 3, 3), NULL, &p);
}

static kiln_node *same_strided(kiln_graph *g)
{
    kiln_conv_params p = {.stride = {2, 2}, .flags = KILN_PAD_SAME};
    return kiln_conv2d(g, IN(1, 1, 4, 4), WT(1, 1, 3, 3), NULL, &p);
}

static kiln_node *bad_bias(kiln_graph *g)
{
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(3));
    return kiln_conv2d(g, IN(1, 1, 4, 4), WT(2, 1, 3, 3), b, NULL);
}

static kiln_node *bad_rank(kiln_graph *g)
{
    return kiln_conv1d(g, IN(1, 1, 4, 4), WT(2, 1, 3, 3), NULL, NULL);
}

static kiln_node *transpose_empty(kiln_graph *g)
{
    kiln_conv_params p = {.padding = {2, 0}};
    return kiln_conv_transpose2d(g, IN(1, 2, 1, 3), WT(2, 1, 3, 3), NULL, &p);
}

static kiln_node *transpose_outpad(kiln_graph *g)
{
    kiln_conv_params p = {.stride = {2, 2}, .output_padding = {2, 0}};
    return kiln_conv_transpose2d(g, IN(1, 2, 3, 3), WT(2, 1, 3, 3), NULL, &p);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error(bad_channels, "kiln_conv2d: input [2,3,8,8] has 3 channels, "
                               "weight [4,2,3,3] wants 2");
    expect_error(bad_groups, "kiln_conv2d: groups 3 do not divide the "
                             "weight [4,1,3,3]'s 4 output channels");
    expect_error(bad_input_groups, "kiln_conv2d: groups 2 do not divide the "
                                   "input [2,3,8,8]'s 3 channels");
    expect_error(kernel_too_large,
                 "kiln_conv2d: input [1,1,4,8], weight [1,1,3,3]: the kernel "
                 "(dilated to 5) is larger than dim 0 padded to 4");
    expect_error(negative_stride, "kiln_conv2d: dim 0: stride -1");
    expect_error(same_strided, "'same' padding needs stride 1");
    expect_error(bad_bias, "kiln_conv2d: bias [3] for weight [2,1,3,3]: "
                           "want [2]");
    expect_error(bad_rank, "kiln_conv1d: input [1,1,4,4] and weight [2,1,3,3] "
                           "must both have 3 dims");
    expect_error(transpose_empty, "kiln_conv_transpose2d: input [1,2,1,3], "
                                  "weight [2,1,3,3]: output size -1 of dim 0");
    expect_error(transpose_outpad, "output padding 2 of dim 0 must be below "
                                   "the stride 2");
    assert_ptr_equal(kiln_conv2d(NULL, NULL, NULL, NULL, NULL), NULL);
}

/* ------------------------------------------------------------ symbolic */

/* One compiled function at batches 3 and 5 (with its gradients), against
   the same graph built at each batch and run dynamically. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_conv_params p = {.stride = {2, 1}, .padding = {1, 1}};
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(2, 2, 6, 5), KILN_AXIS(0));
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(3, 2, 3, 3),
                                 kiln_init_uniform(-1, 1));
    kiln_node *y = kiln_relu(g, kiln_conv2d(g, x, w, NULL, &p));
    kiln_node *loss = kiln_mean(g, y, KILN_ALL_AXES, 0);
    kiln_node *outs[2] = {y, kiln_grad(g, loss, w)};
    th_assert_graph_ok(g);
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    assert_non_null(f);
    for (int64_t n = 3; n <= 5; n += 2) {
        kiln_tensor *xt = th_rand(&r, KILN_SHAPE(n, 2, 6, 5), -1, 1);
        kiln_tensor *got[2] = {
            kiln_tensor_new(KILN_F32, KILN_SHAPE(n, 3, 3, 5)),
            kiln_tensor_new(KILN_F32, kiln_node_shape(w))};
        assert_int_equal(kiln_run(f, &xt, got), KILN_OK);
        kiln_graph *h = kiln_graph_new();
        kiln_node *hx = kiln_input(h, "x", KILN_F32, KILN_SHAPE(n, 2, 6, 5));
        kiln_node *hw = kiln_variable(h, "w", KILN_F32, kiln_node_shape(w),
                                      kiln_init_zeros());
        kiln_node *hy = kiln_relu(h, kiln_conv2d(h, hx, hw, NULL, &p));
        kiln_node *hl = kiln_mean(h, hy, KILN_ALL_AXES, 0);
        assert_int_equal(kiln_feed(s, hx, xt), KILN_OK);
        assert_int_equal(kiln_backprop(s, h, hl), KILN_OK);
        th_assert_close_f("symbolic y", kiln_tensor_f32(got[0]),
                          kiln_node_value_f32(s, hy), kiln_tensor_numel(got[0]),
                          1e-5, 1e-6);
        th_assert_close_f("symbolic dw", kiln_tensor_f32(got[1]),
                          kiln_node_grad_f32(s, hw), kiln_tensor_numel(got[1]),
                          1e-4, 1e-6);
        kiln_graph_free(h);
        kiln_tensor_free(xt);
        kiln_tensor_free(got[0]);
        kiln_tensor_free(got[1]);
    }
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ fusion */

/* The builder fuses a bias and KILN_CONV_RELU into the conv node. */
static void test_builder_fuses(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3, 6, 6));
    kiln_node *w = kiln_input(g, "w", KILN_F32, KILN_SHAPE(4, 3, 3, 3));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(4));
    kiln_conv_params p = {.flags = KILN_CONV_RELU};
    kiln_node *y = kiln_conv2d(g, x, w, b, &p);
    th_assert_graph_ok(g);
    assert_int_equal(y->op, KILN_OP_CONV);
    assert_int_equal(y->n_in, 3);
    char line[256];
    kiln_node_format(y, NULL, 0, line, sizeof line);
    assert_string_equal(line, "%3 = conv(%0, %1, %2) f32[2,4,4,4] kernel=[3,3] "
                              "stride=[1,1] pad=[0,0][0,0] dilation=[1,1] "
                              "relu");
    kiln_graph_free(g);
}

/* A training step of relu(conv2d(x, w, b)) compiled with and without the
   conv_fuse pass (elementwise fusion off): the relu runs inside the conv
   kernel, one kernel fewer, with the same loss and gradients. */
static void test_conv_fuse_pass(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 9);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 2, 7, 7));
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(4, 2, 3, 3),
                                 kiln_init_uniform(-1, 1));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(4),
                                 kiln_init_uniform(-1, 1));
    kiln_conv_params p = {.padding = {1, 1}};
    kiln_node *h = kiln_relu(g, kiln_conv2d(g, x, w, b, &p));
    kiln_node *loss = kiln_mean(g, kiln_mul(g, h, h), KILN_ALL_AXES, 0);
    kiln_node *outs[3] = {loss, kiln_grad(g, loss, w), kiln_grad(g, loss, b)};
    th_assert_graph_ok(g);
    kiln_tensor *xt = th_rand(&r, KILN_SHAPE(3, 2, 7, 7), -1, 1);
    kiln_tensor *got[2][3];
    int kernels[2];
    for (int fused = 0; fused < 2; fused++) {
        kiln_compile_options o = kiln_compile_defaults();
        o.conv_fuse = fused;
        o.fuse = 0; /* which would take the relu into its readers' programs */
        kiln_function *f = kiln_compile_ex(s, g, outs, 3, &x, 1, &o);
        assert_non_null(f);
        kernels[fused] = kiln_function_num_kernels(f);
        for (int i = 0; i < 3; i++)
            got[fused][i] = kiln_function_new_output(f, i);
        assert_int_equal(kiln_run(f, &xt, got[fused]), KILN_OK);
        kiln_function_free(f);
    }
    assert_int_equal(kernels[1], kernels[0] - 1);
    for (int i = 0; i < 3; i++) {
        th_assert_close_f("conv_fuse", kiln_tensor_f32(got[1][i]),
                          kiln_tensor_f32(got[0][i]),
                          kiln_tensor_numel(got[0][i]), 1e-6, 1e-7);
        kiln_tensor_free(got[0][i]);
        kiln_tensor_free(got[1][i]);
    }
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ memory */

/* A compiled training step of two convolutions: the scratch of every
   kernel is in the function's one block (its listing shows the block's
   size), and running it allocates nothing, also on more threads. */
static void test_compiled_run_allocates_nothing(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_session_options o = {.threads = 2};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4, 2, 9, 9));
    kiln_node *w1 = kiln_variable(g, "w1", KILN_F32, KILN_SHAPE(8, 2, 3, 3),
                                  kiln_init_uniform(-1, 1));
    /* 8 channels each side: cpu/conv_rows.c's kernels and shared weights */
    kiln_node *w2 = kiln_variable(g, "w2", KILN_F32, KILN_SHAPE(8, 8, 3, 3),
                                  kiln_init_uniform(-1, 1));
    kiln_conv_params p = {.padding = {1, 1}};
    kiln_node *h = kiln_relu(g, kiln_conv2d(g, x, w1, NULL, &p));
    kiln_node *y = kiln_conv2d(g, h, w2, NULL, &p);
    kiln_node *loss = kiln_mean(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0);
    kiln_node *outs[3] = {loss, kiln_grad(g, loss, w1), kiln_grad(g, loss, w2)};
    th_assert_graph_ok(g);
    kiln_function *f = kiln_compile(s, g, outs, 3, &x, 1);
    assert_non_null(f);
    kiln_tensor *xt = th_rand(&r, KILN_SHAPE(4, 2, 9, 9), -1, 1), *out[3];
    for (int i = 0; i < 3; i++)
        out[i] = kiln_function_new_output(f, i);
    assert_int_equal(kiln_run(f, &xt, out), KILN_OK);
    long before = allocations;
    for (int k = 0; k < 3; k++)
        assert_int_equal(kiln_run(f, &xt, out), KILN_OK);
    assert_int_equal(allocations, before);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(out[i]);
    kiln_tensor_free(xt);
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_compiled),
        cmocka_unit_test(test_pytorch_dynamic),
        cmocka_unit_test(test_weight_grad_op),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_direct_matches_reference),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_compiled_run_allocates_nothing),
        cmocka_unit_test(test_builder_fuses),
        cmocka_unit_test(test_conv_fuse_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
