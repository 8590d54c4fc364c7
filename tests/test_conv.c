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
    int nd, stride[2], pad[2], dil[2], outpad[2], groups, same, bias;
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
    if (fscanf(f, "params %15s %d %d %d %d %d %d %d %d %d %d %d %d", r->op,
               &r->nd, &r->stride[0], &r->stride[1], &r->pad[0], &r->pad[1],
               &r->dil[0], &r->dil[1], &r->outpad[0], &r->outpad[1], &r->groups,
               &r->same, &r->bias) != 13)
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
                          .flags = r->same ? KILN_PAD_SAME : 0};
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
         1,
         KILN_SHAPE(1, 2, 3, 3),
         KILN_SHAPE(2, 2, 3, 2),
         {.stride = {2, 2}, .padding = {1, 0}, .output_padding = {1, 0}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int order = 1; order <= 2; order++)
            gradcheck_case(&cases[i], order);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_compiled),
        cmocka_unit_test(test_pytorch_dynamic),
        cmocka_unit_test(test_weight_grad_op),
        cmocka_unit_test(test_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
