/* Silent wrong answers (issue 9): each case must match PyTorch's semantics
   or be refused with a message, on every path a graph can run: compiled
   without passes on the reference and the fast kernels, compiled with the
   default passes (fusion) on both, folded at compile time (leaves as
   constants), and dynamic (kiln_forward / kiln_backward) on both kernel
   sets.

   Values marked "torch 1.13" were computed with PyTorch 1.13.1 on CPU in
   float32 (/usr/bin/python3, Debian's python3-torch): the output and the
   .grad of each input after out.sum().backward(), e.g. for max
     a = torch.tensor([1., 2, 3, nan, nan, 5, -0.], requires_grad=True)
     b = torch.tensor([1., 3, 2, 1, nan, 5, 0.], requires_grad=True)
     torch.maximum(a, b).sum().backward(); a.grad, b.grad
   The tests do not need PyTorch. */
#include "test_helpers.h"

#include "graph/graph.h" /* kiln_node_make: a gradient node alone */

/* ---------------------------------------------------------------- paths */

typedef enum path {
    REF,        /* compiled, no passes, reference kernels */
    FAST,       /* compiled, no passes, fast kernels */
    FUSED_REF,  /* compiled, default passes, reference kernels */
    FUSED_FAST, /* compiled, default passes, fast kernels */
    FOLDED,     /* leaves are constants: folding computes at compile time */
    DYN_REF,    /* kiln_forward, reference kernels */
    DYN_FAST,   /* kiln_forward, fast kernels */
    N_PATHS
} path;

static const char *const PATH_NAME[N_PATHS] = {
    "compiled/reference", "compiled/fast", "fused/reference",
    "fused/fast",         "folded",        "dynamic/reference",
    "dynamic/fast"};

enum { MAX_LEAVES = 4, MAX_OUTS = 8 };

/* A leaf of a case: fed as an input, or baked in as a constant (FOLDED). */
typedef struct leaf {
    kiln_dtype dt;
    kiln_shape shape;
    const void *data;
} leaf;

typedef void (*build_fn)(kiln_graph *g, kiln_node *const *x, kiln_node **out);

static kiln_tensor *leaf_tensor(const leaf *l)
{
    kiln_tensor *t = kiln_tensor_new(l->dt, l->shape);
    assert_non_null(t);
    memcpy(kiln_tensor_data(t), l->data,
           (size_t)kiln_tensor_numel(t) * 4); /* f32 and i32 */
    return t;
}

static int uses_reference(path p)
{
    return p == REF || p == FUSED_REF || p == FOLDED || p == DYN_REF;
}

/* Builds the case for path p in a new graph and computes its n_out outputs
   into new tensors t[] (NULL on failure).  Returns the run's status; the
   session holds the message. */
static kiln_status run_path(path p, kiln_session *s, const leaf *lv, int nl,
                            build_fn build, int n_out, kiln_tensor **t)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x[MAX_LEAVES], *out[MAX_OUTS];
    kiln_tensor *feed[MAX_LEAVES];
    char name[16];
    for (int i = 0; i < nl; i++) {
        feed[i] = leaf_tensor(&lv[i]);
        snprintf(name, sizeof name, "x%d", i);
        x[i] = p == FOLDED ? kiln_constant(g, lv[i].dt, lv[i].shape, lv[i].data)
                           : kiln_input(g, name, lv[i].dt, lv[i].shape);
    }
    build(g, x, out);
    th_assert_graph_ok(g);
    kiln_session_set_reference_kernels(s, uses_reference(p));
    kiln_status st;
    for (int k = 0; k < n_out; k++)
        t[k] = NULL;
    if (p >= DYN_REF) {
        for (int i = 0; i < nl; i++)
            assert_int_equal(kiln_feed(s, x[i], feed[i]), KILN_OK);
        st = kiln_forward(s, g);
        for (int k = 0; k < n_out && st == KILN_OK; k++)
            assert_non_null(t[k] = kiln_node_value(s, out[k]));
    } else {
        kiln_compile_options o = kiln_compile_defaults();
        if (p == REF || p == FAST)
            o.dce = o.cse = o.fold = o.simplify = o.gemm_acc = o.fuse =
                o.plan_memory = 0;
        int n_in = p == FOLDED ? 0 : nl;
        kiln_function *f = kiln_compile_ex(s, g, out, n_out, x, n_in, &o);
        if (!f)
            fail_msg("%s: kiln_compile: %s", PATH_NAME[p],
                     kiln_session_error(s));
        for (int k = 0; k < n_out; k++)
            assert_non_null(t[k] = kiln_function_new_output(f, k));
        st = kiln_run(f, feed, t);
        kiln_function_free(f);
    }
    kiln_session_set_reference_kernels(s, 0);
    for (int i = 0; i < nl; i++)
        kiln_tensor_free(feed[i]);
    kiln_graph_free(g);
    return st;
}

/* Every path gives want[k] (n[k] values; NaN matches NaN, infinities must
   be exact) for output k. */
static void expect_values(const char *what, const leaf *lv, int nl,
                          build_fn build, int n_out, const double *const *want,
                          const int64_t *n)
{
    for (int p = 0; p < N_PATHS; p++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_tensor *t[MAX_OUTS];
        if (run_path((path)p, s, lv, nl, build, n_out, t) != KILN_OK)
            fail_msg("%s, %s: %s", what, PATH_NAME[p], kiln_session_error(s));
        for (int k = 0; k < n_out; k++) {
            char label[128];
            snprintf(label, sizeof label, "%s, %s, output %d", what,
                     PATH_NAME[p], k);
            assert_int_equal(kiln_tensor_numel(t[k]), n[k]);
            float *got = malloc(((size_t)n[k] + 1) * sizeof *got);
            assert_non_null(got);
            for (int64_t i = 0; i < n[k]; i++)
                got[i] = kiln_tensor_dtype(t[k]) == KILN_I32
                             ? (float)kiln_tensor_i32(t[k])[i]
                             : kiln_tensor_f32(t[k])[i];
            th_assert_close(label, got, want[k], n[k], 1e-6, 1e-7);
            free(got);
            kiln_tensor_free(t[k]);
        }
        kiln_session_free(s);
    }
}

/* Every path refuses the run with KILN_ERR_ARG and a message containing
   needle. */
static void expect_run_error(const char *what, const leaf *lv, int nl,
                             build_fn build, int n_out, const char *needle)
{
    for (int p = 0; p < N_PATHS; p++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_tensor *t[MAX_OUTS];
        kiln_status st = run_path((path)p, s, lv, nl, build, n_out, t);
        if (st != KILN_ERR_ARG)
            fail_msg("%s, %s: status %d, want KILN_ERR_ARG", what, PATH_NAME[p],
                     (int)st);
        if (!strstr(kiln_session_error(s), needle))
            fail_msg("%s, %s: error '%s' lacks '%s'", what, PATH_NAME[p],
                     kiln_session_error(s), needle);
        for (int k = 0; k < n_out; k++)
            kiln_tensor_free(t[k]);
        kiln_session_free(s);
    }
}

/* Dynamic backward: leaves become trainable variables with the leaf values;
   kiln_backward of build's out[0] (a scalar loss) gives want[i] as the
   gradient of variable i, on both kernel sets. */
static void expect_backward(const char *what, const leaf *lv, int nl,
                            build_fn build, const double *const *want)
{
    for (int ref = 0; ref < 2; ref++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        kiln_node *x[MAX_LEAVES], *out[MAX_OUTS];
        char name[16];
        for (int i = 0; i < nl; i++) {
            snprintf(name, sizeof name, "v%d", i);
            x[i] = kiln_variable(g, name, KILN_F32, lv[i].shape,
                                 kiln_init_values((const float *)lv[i].data));
        }
        build(g, x, out);
        kiln_session_set_reference_kernels(s, ref);
        if (kiln_backprop(s, g, out[0]) != KILN_OK)
            fail_msg("%s: kiln_backprop: %s", what, kiln_session_error(s));
        for (int i = 0; i < nl; i++) {
            kiln_tensor *gt = kiln_node_grad(s, x[i]);
            assert_non_null(gt);
            char label[128];
            snprintf(label, sizeof label, "%s, backward%s, d/dv%d", what,
                     ref ? "/reference" : "/fast", i);
            th_assert_close(label, kiln_tensor_f32(gt), want[i],
                            kiln_tensor_numel(gt), 1e-6, 1e-7);
            kiln_tensor_free(gt);
        }
        kiln_graph_free(g);
        kiln_session_free(s);
    }
}

/* ---------------------------------------------------- NaN propagation */

/* NaN-aware references, written independently of the kernels: libm's fmax
   and fmin drop NaN, so NaN is tested first. */
static double want_max(double x, double y)
{
    return isnan(x) || isnan(y) ? NAN : fmax(x, y);
}

static double want_min(double x, double y)
{
    return isnan(x) || isnan(y) ? NAN : fmin(x, y);
}

static double want_relu(double x)
{
    return isnan(x) ? NAN : x < 0 ? 0 : x;
}

/* Long enough for several vector widths and fused blocks (512), and not a
   multiple of either; NaN, infinities and ties spread through. */
enum { LONG = 1037 };

static void long_operands(float *a, float *b)
{
    for (int i = 0; i < LONG; i++) {
        a[i] = (float)(4 * sin(i * 1.3));
        b[i] = (float)(4 * cos(i * 0.7));
        if (i % 13 == 0)
            b[i] = a[i];
        if (i % 17 == 2)
            a[i] = INFINITY;
        if (i % 19 == 4)
            b[i] = -INFINITY;
        if (i % 7 == 3)
            a[i] = NAN;
        if (i % 11 == 5)
            b[i] = NAN;
    }
}

static void build_nan_ops(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    kiln_node *a = x[0], *b = x[1], *c = x[2];
    kiln_node *mx = kiln_max(g, a, b), *mn = kiln_min(g, a, b);
    out[0] = mx;
    out[1] = mn;
    out[2] = kiln_relu(g, a);
    /* clamp to [0, 1] */
    out[3] = kiln_min(g, kiln_max(g, a, kiln_scalar(g, 0)), kiln_scalar(g, 1));
    /* a chain fusion turns into one program */
    out[4] = kiln_relu(g, kiln_sub(g, kiln_max(g, a, b), kiln_min(g, a, b)));
    /* a NaN scalar broadcast on either side */
    out[5] = kiln_max(g, a, c);
    out[6] = kiln_min(g, c, b);
    out[7] = kiln_relu(g, kiln_add(g, b, c));
}

/* max, min, relu and clamp propagate NaN (torch.maximum(nan, 1) = nan,
   torch.relu(nan) = nan), where x >= y ? x : y dropped it. */
static void test_max_min_relu_propagate_nan(void **state)
{
    (void)state;
    static float a[LONG], b[LONG];
    static double w[8][LONG];
    float c = NAN;
    long_operands(a, b);
    for (int i = 0; i < LONG; i++) {
        w[0][i] = want_max(a[i], b[i]);
        w[1][i] = want_min(a[i], b[i]);
        w[2][i] = want_relu(a[i]);
        w[3][i] = want_min(want_max(a[i], 0), 1);
        w[4][i] = want_relu(w[0][i] - w[1][i]);
        w[5][i] = NAN;
        w[6][i] = NAN;
        w[7][i] = NAN;
    }
    leaf lv[3] = {{KILN_F32, KILN_SHAPE(LONG), a},
                  {KILN_F32, KILN_SHAPE(LONG), b},
                  {KILN_F32, KILN_SCALAR, &c}};
    const double *want[8];
    int64_t n[8];
    for (int k = 0; k < 8; k++) {
        want[k] = w[k];
        n[k] = LONG;
    }
    expect_values("max/min/relu with NaN", lv, 3, build_nan_ops, 8, want, n);
}

/* relu keeps -0 as torch.relu does, and max(-0, 0) is its first operand
   (torch 1.13: relu(-0.) = -0., maximum(-0., 0.) = -0.). */
static void build_signed_zero(kiln_graph *g, kiln_node *const *x,
                              kiln_node **out)
{
    out[0] = kiln_relu(g, x[0]);
    out[1] = kiln_max(g, x[0], kiln_scalar(g, 0.0f));
}

static void test_relu_keeps_negative_zero(void **state)
{
    (void)state;
    float z = -0.0f;
    leaf lv[1] = {{KILN_F32, KILN_SHAPE(1), &z}};
    for (int p = 0; p < N_PATHS; p++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_tensor *t[2];
        assert_int_equal(run_path((path)p, s, lv, 1, build_signed_zero, 2, t),
                         KILN_OK);
        for (int k = 0; k < 2; k++) {
            float v = kiln_tensor_f32(t[k])[0];
            if (v != 0.0f || !signbit(v))
                fail_msg("%s, output %d: %g, want -0", PATH_NAME[p], k, v);
            kiln_tensor_free(t[k]);
        }
        kiln_session_free(s);
    }
}

/* ---------------------------------------------------- reductions */

enum { ROWS = 5, COLS = 37 };

static void reduce_operand(float *x)
{
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = (float)(3 * sin(i * 0.37));
    x[1 * COLS + 5] = NAN; /* row 1: one NaN inside */
    x[2 * COLS + 0] = NAN; /* row 2: NaN first and last */
    x[2 * COLS + 36] = NAN;
    x[3 * COLS + 20] = 7; /* row 3: a tie for the largest */
    x[3 * COLS + 30] = 7;
    for (int j = 0; j < COLS; j++) /* row 4: all -inf */
        x[4 * COLS + j] = -INFINITY;
}

static void build_reductions(kiln_graph *g, kiln_node *const *x,
                             kiln_node **out)
{
    out[0] = kiln_reduce_max(g, x[0], 2u, 0); /* along rows */
    out[1] = kiln_reduce_max(g, x[0], 1u, 0); /* down columns */
    out[2] = kiln_argmax(g, x[0], 1);
    out[3] = kiln_argmax(g, x[0], 0);
    /* reductions fusion merges with their elementwise producers */
    out[4] = kiln_reduce_max(g, kiln_relu(g, x[0]), 2u, 0);
    out[5] = kiln_reduce_max(g, kiln_max(g, x[0], kiln_scalar(g, 0.5f)), 1u, 0);
    out[6] = kiln_reduce_max(g, x[0], KILN_ALL_AXES, 0);
}

/* The largest of n values a stride apart, NaN when any is NaN (torch.amax);
   with idx, the index torch.argmax gives: the first NaN, else the first
   largest. */
static double want_reduce(const float *x, int n, int stride, int relu,
                          float floor_, int *idx)
{
    double m = -INFINITY;
    int at = 0, nan = 0;
    for (int j = 0; j < n; j++) {
        double v = x[j * stride];
        if (relu)
            v = want_relu(v);
        v = want_max(v, floor_);
        if (isnan(v) && !nan) {
            nan = 1;
            at = j;
        } else if (!nan && v > m) {
            m = v;
            at = j;
        }
    }
    if (idx)
        *idx = at;
    return nan ? NAN : m;
}

/* reduce_max and argmax over rows, columns and everything, plain and fused
   with an elementwise producer: a NaN wins (torch.amax gives nan, and
   torch.argmax the index of the first NaN). */
static void test_reductions_propagate_nan(void **state)
{
    (void)state;
    static float x[ROWS * COLS];
    static double w[7][ROWS * COLS];
    reduce_operand(x);
    for (int r = 0; r < ROWS; r++) {
        int at;
        w[0][r] = want_reduce(x + r * COLS, COLS, 1, 0, -INFINITY, &at);
        w[2][r] = at;
        w[4][r] = want_reduce(x + r * COLS, COLS, 1, 1, -INFINITY, NULL);
    }
    for (int c = 0; c < COLS; c++) {
        int at;
        w[1][c] = want_reduce(x + c, ROWS, COLS, 0, -INFINITY, &at);
        w[3][c] = at;
        w[5][c] = want_reduce(x + c, ROWS, COLS, 0, 0.5f, NULL);
    }
    w[6][0] = NAN;
    /* the references themselves: row 1's argmax is its NaN's index, row 2's
       its first NaN, row 3's the first of the tie */
    assert_true(w[2][1] == 5 && w[2][2] == 0 && w[2][3] == 20);
    assert_true(isnan(w[0][1]) && isnan(w[0][2]) && w[0][3] == 7);
    leaf lv[1] = {{KILN_F32, KILN_SHAPE(ROWS, COLS), x}};
    const double *want[7] = {w[0], w[1], w[2], w[3], w[4], w[5], w[6]};
    const int64_t n[7] = {ROWS, COLS, ROWS, COLS, ROWS, COLS, 1};
    expect_values("reduce_max/argmax with NaN", lv, 1, build_reductions, 7,
                  want, n);
}

/* ---------------------------------------------------- gradients */

static const float TIE_A[7] = {1, 2, 3, NAN, NAN, 5, -0.0f};
static const float TIE_B[7] = {1, 3, 2, 1, NAN, 5, 0};

static void build_max_min_grads(kiln_graph *g, kiln_node *const *x,
                                kiln_node **out)
{
    kiln_node *ymax = kiln_sum(g, kiln_max(g, x[0], x[1]), KILN_ALL_AXES, 0);
    kiln_node *ymin = kiln_sum(g, kiln_min(g, x[0], x[1]), KILN_ALL_AXES, 0);
    out[0] = kiln_grad(g, ymax, x[0]);
    out[1] = kiln_grad(g, ymax, x[1]);
    out[2] = kiln_grad(g, ymin, x[0]);
    out[3] = kiln_grad(g, ymin, x[1]);
}

/* torch 1.13, torch.maximum / torch.minimum of TIE_A, TIE_B: a tie splits
   the gradient evenly, a NaN on either side passes it to both. */
static const double MAX_DA[7] = {0.5, 0, 1, 1, 1, 0.5, 0.5};
static const double MAX_DB[7] = {0.5, 1, 0, 1, 1, 0.5, 0.5};
static const double MIN_DA[7] = {0.5, 1, 0, 1, 1, 0.5, 0.5};
static const double MIN_DB[7] = {0.5, 0, 1, 1, 1, 0.5, 0.5};

static void test_max_min_grad_ties(void **state)
{
    (void)state;
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(7), TIE_A},
                  {KILN_F32, KILN_SHAPE(7), TIE_B}};
    const double *want[4] = {MAX_DA, MAX_DB, MIN_DA, MIN_DB};
    const int64_t n[4] = {7, 7, 7, 7};
    expect_values("max/min gradient at ties", lv, 2, build_max_min_grads, 4,
                  want, n);
}

static void build_max_loss(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    out[0] = kiln_sum(g, kiln_max(g, x[0], x[1]), KILN_ALL_AXES, 0);
}

static void build_min_loss(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    out[0] = kiln_sum(g, kiln_min(g, x[0], x[1]), KILN_ALL_AXES, 0);
}

static void test_max_min_backward_ties(void **state)
{
    (void)state;
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(7), TIE_A},
                  {KILN_F32, KILN_SHAPE(7), TIE_B}};
    const double *wmax[2] = {MAX_DA, MAX_DB}, *wmin[2] = {MIN_DA, MIN_DB};
    expect_backward("max at ties", lv, 2, build_max_loss, wmax);
    expect_backward("min at ties", lv, 2, build_min_loss, wmin);
}

/* A scalar tied with some elements of a vector: its gradient sums its
   shares, whole where it wins and half at a tie (torch 1.13:
   maximum(tensor([1., 2, 2, 3]), tensor(2.)) gives the vector [0, .5, .5, 1]
   and the scalar 1 + .5 + .5 = 2). */
static void build_broadcast_tie(kiln_graph *g, kiln_node *const *x,
                                kiln_node **out)
{
    kiln_node *y = kiln_sum(g, kiln_max(g, x[0], x[1]), KILN_ALL_AXES, 0);
    out[0] = kiln_grad(g, y, x[0]);
    out[1] = kiln_grad(g, y, x[1]);
}

static void test_max_grad_broadcast_tie(void **state)
{
    (void)state;
    static const float v[4] = {1, 2, 2, 3}, s = 2;
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(4), v}, {KILN_F32, KILN_SCALAR, &s}};
    static const double dv[4] = {0, 0.5, 0.5, 1}, ds[1] = {2};
    const double *want[2] = {dv, ds};
    const int64_t n[2] = {4, 1};
    expect_values("max gradient, broadcast tie", lv, 2, build_broadcast_tie, 2,
                  want, n);
}

static void build_relu_grad(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    kiln_node *y = kiln_relu(g, x[0]);
    out[0] = y;
    out[1] = kiln_grad(g, kiln_sum(g, y, KILN_ALL_AXES, 0), x[0]);
}

/* torch 1.13: relu of [nan, 0, -1, 2, -0.] is [nan, 0, 0, 2, -0.] with
   gradient [1, 0, 0, 1, 0] (threshold_backward passes it unless x <= 0). */
static void test_relu_grad(void **state)
{
    (void)state;
    static const float x[5] = {NAN, 0, -1, 2, -0.0f};
    leaf lv[1] = {{KILN_F32, KILN_SHAPE(5), x}};
    static const double y[5] = {NAN, 0, 0, 2, 0}, dx[5] = {1, 0, 0, 1, 0};
    const double *want[2] = {y, dx};
    const int64_t n[2] = {5, 5};
    expect_values("relu gradient", lv, 1, build_relu_grad, 2, want, n);
}

static void build_rmax_grads(kiln_graph *g, kiln_node *const *x,
                             kiln_node **out)
{
    out[0] = kiln_grad(
        g, kiln_sum(g, kiln_reduce_max(g, x[0], 2u, 0), KILN_ALL_AXES, 0),
        x[0]);
    out[1] = kiln_grad(
        g, kiln_sum(g, kiln_reduce_max(g, x[1], 1u, 1), KILN_ALL_AXES, 0),
        x[1]);
    out[2] = kiln_grad(g, kiln_reduce_max(g, x[2], KILN_ALL_AXES, 0), x[2]);
}

/* reduce_max is torch.amax: the gradient is split evenly among the tied
   largest elements (torch.max(x, dim) would give it all to one index), and
   a row holding a NaN gets NaN everywhere.  torch 1.13:
     amax(X1, 1), X1 = [[1,3,3],[2,2,2],[nan,2,1],[5,1,0]]:
       [[0,.5,.5],[1/3,1/3,1/3],[nan,nan,nan],[1,0,0]]
     amax(X0, 0), X0 = [[1,3,3],[2,3,nan],[2,0,1]]:
       [[0,.5,nan],[.5,.5,nan],[.5,0,nan]]
     amax(XA), XA = [[1,3,3],[2,3,0]]: [[0,1/3,1/3],[0,1/3,0]] */
static void test_reduce_max_grad_ties(void **state)
{
    (void)state;
    static const float x1[12] = {1, 3, 3, 2, 2, 2, NAN, 2, 1, 5, 1, 0};
    static const float x0[9] = {1, 3, 3, 2, 3, NAN, 2, 0, 1};
    static const float xa[6] = {1, 3, 3, 2, 3, 0};
    const double t = 1.0 / 3;
    static double d1[12], d0[9], da[6];
    const double w1[12] = {0, .5, .5, t, t, t, NAN, NAN, NAN, 1, 0, 0};
    const double w0[9] = {0, .5, NAN, .5, .5, NAN, .5, 0, NAN};
    const double wa[6] = {0, t, t, 0, t, 0};
    memcpy(d1, w1, sizeof d1);
    memcpy(d0, w0, sizeof d0);
    memcpy(da, wa, sizeof da);
    leaf lv[3] = {{KILN_F32, KILN_SHAPE(4, 3), x1},
                  {KILN_F32, KILN_SHAPE(3, 3), x0},
                  {KILN_F32, KILN_SHAPE(2, 3), xa}};
    const double *want[3] = {d1, d0, da};
    const int64_t n[3] = {12, 9, 6};
    expect_values("reduce_max gradient at ties", lv, 3, build_rmax_grads, 3,
                  want, n);
}

static void build_pow_grads(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    kiln_node *y = kiln_pow(g, x[0], x[1]);
    kiln_node *l = kiln_sum(g, y, KILN_ALL_AXES, 0);
    out[0] = y;
    out[1] = kiln_grad(g, l, x[0]);
    out[2] = kiln_grad(g, l, x[1]);
}

static void build_pow_loss(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    out[0] = kiln_sum(g, kiln_pow(g, x[0], x[1]), KILN_ALL_AXES, 0);
}

/* torch 1.13, pow(a, b) for a = [0,0,0,0,2,-1,0,3], b = [0,1,2,-1,0,.5,.5,2]:
   value [1,0,0,inf,1,nan,0,9], d/da [0,1,0,-inf,0,nan,inf,6] (0 where b ==
   0: 0^0 has slope 0, not 0 * inf), d/db [0,0,0,-inf,ln 2,nan,0,9 ln 3] (0
   where a == 0 and b >= 0, not 0 * log 0). */
static void test_pow_grad_zero_base(void **state)
{
    (void)state;
    static const float a[8] = {0, 0, 0, 0, 2, -1, 0, 3};
    static const float b[8] = {0, 1, 2, -1, 0, 0.5f, 0.5f, 2};
    static const double y[8] = {1, 0, 0, INFINITY, 1, NAN, 0, 9};
    static const double da[8] = {0, 1, 0, -INFINITY, 0, NAN, INFINITY, 6};
    static const double db[8] = {
        0, 0, 0, -INFINITY, 0.6931471824645996, NAN, 0, 9.887510299682617};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(8), a}, {KILN_F32, KILN_SHAPE(8), b}};
    const double *want[3] = {y, da, db};
    const int64_t n[3] = {8, 8, 8};
    expect_values("pow gradient at base 0", lv, 2, build_pow_grads, 3, want, n);
    const double *grads[2] = {da, db};
    expect_backward("pow gradient at base 0", lv, 2, build_pow_loss, grads);
}

/* ---------------------------------------------------- losses */

enum { N = 3, C = 5 };

static const float LOGITS[N * C] = {0.5f, -1, 2, 0,     1,     3, 1, 0,
                                    -2,   0,  1, 0.25f, -0.5f, 2, 1};

static void build_sce(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    kiln_node *loss = kiln_softmax_cross_entropy(g, x[0], x[1]);
    out[0] = loss;
    out[1] = kiln_grad(g, loss, x[0]);
}

/* Labels outside [0, C) are refused, forward and backward alike, on every
   path (PyTorch raises "Target 5 is out of bounds"); before, the forward
   pass skipped such a row and the backward pass did not. */
static void test_softmax_ce_bad_label_refused(void **state)
{
    (void)state;
    static const int32_t high[N] = {1, 4, 5}, low[N] = {-1, 0, 2};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(N, C), LOGITS},
                  {KILN_I32, KILN_SHAPE(N), high}};
    expect_run_error("label C", lv, 2, build_sce, 2,
                     "label 5 at row 2 is outside [0, 5)");
    lv[1].data = low;
    expect_run_error("label -1", lv, 2, build_sce, 2,
                     "label -1 at row 0 is outside [0, 5)");
}

/* Labels computed in the graph (not fed) are checked when the kernel runs. */
static void build_sce_computed_labels(kiln_graph *g, kiln_node *const *x,
                                      kiln_node **out)
{
    kiln_node *labels = kiln_cast(g, x[1], KILN_I32);
    kiln_node *loss =
        kiln_softmax_cross_entropy_reduce(g, x[0], labels, KILN_REDUCE_SUM);
    out[0] = loss;
    out[1] = kiln_grad(g, loss, x[0]);
}

static void test_softmax_ce_computed_bad_label(void **state)
{
    (void)state;
    static const float labels[N] = {0, 7, 1};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(N, C), LOGITS},
                  {KILN_F32, KILN_SHAPE(N), labels}};
    expect_run_error("computed label", lv, 2, build_sce_computed_labels, 2,
                     "label 7 at row 1 is outside [0, 5)");
}

/* The gradient kernel checks its labels too (it runs alone in a gradient
   graph, or where the forward value came from elsewhere). */
static void build_sce_grad_alone(kiln_graph *g, kiln_node *const *x,
                                 kiln_node **out)
{
    kiln_node *in[3] = {x[0], x[1], kiln_scalar(g, 1.0f)};
    out[0] = kiln_node_make(g, KILN_OP_SOFTMAX_CE_GRAD, KILN_F32,
                            kiln_node_shape(x[0]), in, 3);
}

static void test_softmax_ce_grad_checks_labels(void **state)
{
    (void)state;
    static const int32_t bad[N] = {0, 9, 2};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(N, C), LOGITS},
                  {KILN_I32, KILN_SHAPE(N), bad}};
    expect_run_error("gradient alone", lv, 2, build_sce_grad_alone, 1,
                     "softmax_cross_entropy_grad %");
    expect_run_error("gradient alone", lv, 2, build_sce_grad_alone, 1,
                     "label 9 at row 1 is outside [0, 5)");
}

/* A refused training step changes no variable, even where the memory plan
   updates the weights in place (gemm_acc accumulates into W). */
static void test_refused_step_keeps_variables(void **state)
{
    (void)state;
    enum { D = 4 };
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(N, D));
    kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(N));
    kiln_node *w = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(D, C),
                                 kiln_init_uniform(-1, 1));
    kiln_node *loss =
        kiln_softmax_cross_entropy(g, kiln_matmul(g, x, w, 0, 0), y);
    kiln_node *upd = kiln_assign(
        g, w, kiln_sub(g, w, kiln_scale(g, kiln_grad(g, loss, w), 0.5f)));
    kiln_node *outs[2] = {loss, upd}, *ins[2] = {x, y};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    assert_non_null(f);
    kiln_tensor *before = kiln_tensor_new(KILN_F32, KILN_SHAPE(D, C));
    kiln_tensor *after = kiln_tensor_new(KILN_F32, KILN_SHAPE(D, C));
    assert_int_equal(kiln_variable_read(s, "W", before), KILN_OK);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(N, D));
    kiln_tensor *yt = kiln_tensor_new(KILN_I32, KILN_SHAPE(N));
    for (int i = 0; i < N * D; i++)
        kiln_tensor_f32(xt)[i] = (float)(i % 5) - 2;
    kiln_tensor_i32(yt)[0] = 1;
    kiln_tensor_i32(yt)[1] = C;
    kiln_tensor_i32(yt)[2] = 0;
    kiln_tensor *feeds[2] = {xt, yt}, *res[2] = {NULL, NULL};
    assert_int_equal(kiln_run(f, feeds, res), KILN_ERR_ARG);
    if (!strstr(kiln_session_error(s), "label 5 at row 1 is outside [0, 5)"))
        fail_msg("error '%s'", kiln_session_error(s));
    assert_int_equal(kiln_variable_read(s, "W", after), KILN_OK);
    assert_memory_equal(kiln_tensor_data(before), kiln_tensor_data(after),
                        D * C * sizeof(float));
    /* the same step with good labels trains */
    kiln_tensor_i32(yt)[1] = 2;
    assert_int_equal(kiln_run(f, feeds, res), KILN_OK);
    assert_int_equal(kiln_variable_read(s, "W", after), KILN_OK);
    assert_memory_not_equal(kiln_tensor_data(before), kiln_tensor_data(after),
                            D * C * sizeof(float));
    kiln_tensor_free(before);
    kiln_tensor_free(after);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void build_sce_both(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    out[0] = kiln_softmax_cross_entropy(g, x[0], x[1]);
    out[1] = kiln_softmax_cross_entropy_reduce(g, x[0], x[1], KILN_REDUCE_SUM);
}

/* An empty batch: the mean is NaN and the sum 0, as torch 1.13's
   cross_entropy(zeros(0, 3), zeros(0, dtype=long)) gives (reduction 'mean'
   and 'sum'); the mean used to be a silent 0. */
static void test_softmax_ce_empty_batch(void **state)
{
    (void)state;
    static const float none_f[1] = {0};
    static const int32_t none_i[1] = {0};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(0, C), none_f},
                  {KILN_I32, KILN_SHAPE(0), none_i}};
    static const double mean[1] = {NAN}, sum[1] = {0};
    const double *want[2] = {mean, sum};
    const int64_t n[2] = {1, 1};
    expect_values("softmax cross-entropy of no rows", lv, 2, build_sce_both, 2,
                  want, n);
}

static void build_nll(kiln_graph *g, kiln_node *const *x, kiln_node **out)
{
    assert_int_equal(
        kiln_nll_loss_with_softmax_grad(g, x[0], x[1], &out[0], &out[1]),
        KILN_OK);
}

/* nll_loss_with_softmax_grad picks the target's probability: zero
   probabilities of other classes leave the loss finite.  torch 1.13:
   nll_loss(log(P), [0, 1, 2]) = 0.3269430696964264 for P below; the
   gradient is (P - onehot) / 3. */
static void test_nll_loss_zero_probability(void **state)
{
    (void)state;
    static const float p[9] = {0.5f, 0.5f, 0, 0, 1, 0, 0.25f, 0, 0.75f};
    static const int32_t lab[3] = {0, 1, 2};
    static double loss[1] = {0.3269430696964264}, d[9];
    for (int i = 0; i < 9; i++)
        d[i] = (p[i] - (i % 3 == lab[i / 3] ? 1.0 : 0.0)) / 3;
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(3, 3), p},
                  {KILN_I32, KILN_SHAPE(3), lab}};
    const double *want[2] = {loss, d};
    const int64_t n[2] = {1, 9};
    expect_values("nll loss with zero probabilities", lv, 2, build_nll, 2, want,
                  n);
}

/* nll_loss_with_softmax_grad refuses labels outside [0, C) as
   softmax_cross_entropy does (PyTorch's nll_loss raises too), instead of a
   loss of inf beside a gradient without the -1. */
static void test_nll_loss_bad_label_refused(void **state)
{
    (void)state;
    static const float p[9] = {0.5f, 0.5f, 0, 0, 1, 0, 0.25f, 0, 0.75f};
    static const int32_t lab[3] = {0, 3, 1};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(3, 3), p},
                  {KILN_I32, KILN_SHAPE(3), lab}};
    expect_run_error("nll label 3", lv, 2, build_nll, 2,
                     "label 3 at row 1 is outside [0, 3)");
}

/* The mean over an empty batch is NaN (torch 1.13: nll_loss(zeros(0, 3),
   zeros(0, dtype=long)) = nan). */
static void test_nll_loss_empty_batch(void **state)
{
    (void)state;
    static const float none_f[1] = {0};
    static const int32_t none_i[1] = {0};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(0, 3), none_f},
                  {KILN_I32, KILN_SHAPE(0), none_i}};
    static const double loss[1] = {NAN}, d[1] = {0};
    const double *want[2] = {loss, d};
    const int64_t n[2] = {1, 0};
    expect_values("nll loss of no rows", lv, 2, build_nll, 2, want, n);
}

static void build_clipped_losses(kiln_graph *g, kiln_node *const *x,
                                 kiln_node **out)
{
    kiln_node *oh = kiln_one_hot(g, x[1], 3);
    out[0] = kiln_cross_entropy(g, x[0], oh, kiln_scalar(g, 2), -50);
    out[1] = kiln_binary_cross_entropy(g, x[0], oh);
}

/* The clipped losses (max(p, eps), min(max(p, eps), 1 - eps)) no longer
   turn a NaN probability into a finite loss. */
static void test_clipped_losses_propagate_nan(void **state)
{
    (void)state;
    static const float p[6] = {0.2f, NAN, 0.5f, 0.1f, 0.1f, 0.8f};
    static const int32_t lab[2] = {0, 2};
    leaf lv[2] = {{KILN_F32, KILN_SHAPE(2, 3), p},
                  {KILN_I32, KILN_SHAPE(2), lab}};
    static const double nan1[1] = {NAN};
    const double *want[2] = {nan1, nan1};
    const int64_t n[2] = {1, 1};
    expect_values("clipped losses with NaN", lv, 2, build_clipped_losses, 2,
                  want, n);
}

/* ---------------------------------------------------- refused at build */

/* kiln_cross_entropy divides by n: a tensor n would broadcast instead. */
static void test_cross_entropy_needs_scalar_n(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *p = kiln_input(g, "p", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *oh = kiln_input(g, "oh", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *n = kiln_input(g, "n", KILN_F32, KILN_SHAPE(3));
    kiln_node *l = kiln_cross_entropy(g, p, oh, n, -50);
    assert_string_equal(kiln_node_op_name(l), "error");
    th_expect_graph_error(g, "kiln_cross_entropy: n must be an f32 scalar");
    th_expect_graph_error(g, "[3]");
    assert_int_equal(kiln_graph_status(g), KILN_ERR_SHAPE);
    kiln_graph_free(g);
    /* a one-element n of any rank is a scalar */
    g = kiln_graph_new();
    p = kiln_input(g, "p", KILN_F32, KILN_SHAPE(2, 3));
    oh = kiln_input(g, "oh", KILN_F32, KILN_SHAPE(2, 3));
    n = kiln_input(g, "n", KILN_F32, KILN_SHAPE(1, 1));
    l = kiln_cross_entropy(g, p, oh, n, -50);
    th_assert_graph_ok(g);
    kiln_graph_free(g);
    g = kiln_graph_new();
    p = kiln_input(g, "p", KILN_F32, KILN_SHAPE(2, 3));
    oh = kiln_input(g, "oh", KILN_F32, KILN_SHAPE(2, 3));
    n = kiln_input(g, "n", KILN_I32, KILN_SCALAR);
    kiln_cross_entropy(g, p, oh, n, -50);
    th_expect_graph_error(g, "n must be an f32 scalar");
    assert_int_equal(kiln_graph_status(g), KILN_ERR_DTYPE);
    kiln_graph_free(g);
}

/* ng.dot pairs an axis with its dual; with no pair it would silently be an
   elementwise (or outer) product. */
static void test_ax_dot_needs_a_dual_pair(void **state)
{
    (void)state;
    kiln_axis ac = kiln_axis_make("C", 4, 0), an = kiln_axis_make("N", 2, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_ax *a = kiln_ax_placeholder(g, "a", KILN_AXES(ac));
    kiln_ax *b = kiln_ax_placeholder(g, "b", KILN_AXES(ac, an));
    kiln_ax *y = kiln_ax_dot(g, a, b);
    assert_non_null(y);
    assert_string_equal(kiln_node_op_name(kiln_ax_node(y)), "error");
    th_expect_graph_error(g, "kiln_ax_dot");
    th_expect_graph_error(g, "contracts no axis");
    kiln_graph_free(g);
    /* disjoint axes: no pair either */
    g = kiln_graph_new();
    a = kiln_ax_placeholder(g, "a", KILN_AXES(ac));
    b = kiln_ax_placeholder(g, "b", KILN_AXES(an));
    kiln_ax_dot(g, a, b);
    th_expect_graph_error(g, "contracts no axis");
    kiln_graph_free(g);
    /* with the dual the same operands contract */
    g = kiln_graph_new();
    a = kiln_ax_placeholder(g, "a", KILN_AXES(kiln_axis_dual(ac, -1)));
    b = kiln_ax_placeholder(g, "b", KILN_AXES(ac, an));
    kiln_ax_dot(g, a, b);
    th_assert_graph_ok(g);
    kiln_graph_free(g);
}

/* kiln_autodiff refuses what it cannot differentiate for, instead of an
   empty gradient graph with status OK. */
static void expect_autodiff_error(kiln_subgraph *sg, kiln_node *const *req,
                                  int n, const char *needle)
{
    kiln_grad_info *gi = kiln_autodiff(sg, req, n);
    assert_non_null(gi);
    kiln_graph *bg = kiln_subgraph_graph(kiln_grad_info_graph(gi));
    th_expect_graph_error(bg, needle);
    assert_int_equal(kiln_graph_status(bg), KILN_ERR_ARG);
    kiln_grad_info_free(gi);
}

static void test_autodiff_refuses_bad_requests(void **state)
{
    (void)state;
    kiln_subgraph *sg = kiln_subgraph_new("f");
    kiln_graph *g = kiln_subgraph_graph(sg);
    kiln_node *a = kiln_subgraph_input(sg, "a", KILN_F32, KILN_SHAPE(3));
    kiln_node *y = kiln_mul(g, a, a);
    kiln_subgraph_output(sg, y);
    kiln_graph *other = kiln_graph_new();
    kiln_node *elsewhere = kiln_input(other, "a", KILN_F32, KILN_SHAPE(3));
    kiln_node *none = NULL;
    expect_autodiff_error(sg, &y, 1,
                          "grads_required[0] is not a graph input of 'f' "
                          "(mul node)");
    expect_autodiff_error(sg, &elsewhere, 1, "(a node of another graph)");
    expect_autodiff_error(sg, &none, 1, "(NULL)");
    expect_autodiff_error(sg, &a, 0, "grads_required is empty");
    /* a graph without an f32 input has nothing to differentiate for */
    kiln_subgraph *ints = kiln_subgraph_new("ints");
    kiln_node *i = kiln_subgraph_input(ints, "i", KILN_I32, KILN_SHAPE(3));
    kiln_subgraph_output(ints,
                         kiln_cast(kiln_subgraph_graph(ints), i, KILN_F32));
    expect_autodiff_error(ints, NULL, 0, "the graph has no f32 input");
    /* a good request still works */
    kiln_grad_info *gi = kiln_autodiff(sg, &a, 1);
    th_assert_graph_ok(kiln_subgraph_graph(kiln_grad_info_graph(gi)));
    assert_int_equal(kiln_subgraph_num_outputs(kiln_grad_info_graph(gi)), 1);
    kiln_grad_info_free(gi);
    kiln_subgraph_free(ints);
    kiln_subgraph_free(sg);
    kiln_graph_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_min_relu_propagate_nan),
        cmocka_unit_test(test_relu_keeps_negative_zero),
        cmocka_unit_test(test_reductions_propagate_nan),
        cmocka_unit_test(test_max_min_grad_ties),
        cmocka_unit_test(test_max_min_backward_ties),
        cmocka_unit_test(test_max_grad_broadcast_tie),
        cmocka_unit_test(test_relu_grad),
        cmocka_unit_test(test_reduce_max_grad_ties),
        cmocka_unit_test(test_pow_grad_zero_base),
        cmocka_unit_test(test_softmax_ce_bad_label_refused),
        cmocka_unit_test(test_softmax_ce_computed_bad_label),
        cmocka_unit_test(test_softmax_ce_grad_checks_labels),
        cmocka_unit_test(test_refused_step_keeps_variables),
        cmocka_unit_test(test_softmax_ce_empty_batch),
        cmocka_unit_test(test_nll_loss_zero_probability),
        cmocka_unit_test(test_nll_loss_bad_label_refused),
        cmocka_unit_test(test_nll_loss_empty_batch),
        cmocka_unit_test(test_clipped_losses_propagate_nan),
        cmocka_unit_test(test_cross_entropy_needs_scalar_n),
        cmocka_unit_test(test_ax_dot_needs_a_dual_pair),
        cmocka_unit_test(test_autodiff_refuses_bad_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
