/* The pooling group against PyTorch: max, average and adaptive average
   pooling, reflect and replicate padding, nearest and bilinear upsampling,
   flatten.  tests/ref/make_pool_refs.py wrote one file per case in
   tests/ref/pool/: the builder's arguments, x, an upstream gradient dy
   (and for max pooling v), and torch's op(x), its vector-Jacobian product
   with dy and, for max pooling, the gradient of <dx, v> with respect to dy
   (grad-of-grad).  Each case runs compiled and dynamically, with the
   reference and the fast kernels. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>

#include "test_refs.h"

#include "graph/graph.h"

#define RTOL 1e-5
#define ATOL 1e-6

/* ------------------------------------------------------------ ref files */

typedef struct pool_case {
    char op[32];
    double prm[12];
    int n_in, n_out;
    ref_tensor in[3], out[3];
} pool_case;

static void case_load(const char *name, pool_case *c)
{
    char path[512], kind[8], line[256];
    snprintf(path, sizeof path, "%s/pool/%s.txt", KILN_TEST_REF_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run tests/ref/make_pool_refs.py)", path);
    memset(c, 0, sizeof *c);
    assert_non_null(fgets(line, sizeof line, f));
    char *p = line + strlen("params ");
    int used;
    assert_int_equal(sscanf(p, "%31s%n", c->op, &used), 1);
    for (p += used;
         c->n_out < 12 && sscanf(p, "%lf%n", &c->prm[c->n_out], &used) == 1;
         p += used)
        c->n_out++;
    c->n_out = 0;
    ref_tensor t;
    while (ref_read_tensor(f, path, &t, kind)) {
        if (!strcmp(kind, "in"))
            c->in[c->n_in++] = t;
        else
            c->out[c->n_out++] = t;
    }
    fclose(f);
}

static void case_free(pool_case *c)
{
    for (int i = 0; i < c->n_in; i++)
        free(c->in[i].v);
    for (int i = 0; i < c->n_out; i++)
        free(c->out[i].v);
}

/* ------------------------------------------------------------ builders */

static void ints(const double *p, int n, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (int)p[i];
}

/* The op of a case's "params" line applied to x. */
static kiln_node *build_op(kiln_graph *g, kiln_node *x, const char *op,
                           const double *p)
{
    int k[2], s[2], pad[2], d[2];
    ints(p, 2, k);
    ints(p + 2, 2, s);
    ints(p + 4, 2, pad);
    ints(p + 6, 2, d);
    if (!strcmp(op, "max_pool2d"))
        return kiln_max_pool2d(g, x, k, s, pad, d, (int)p[8]);
    if (!strcmp(op, "avg_pool2d"))
        return kiln_avg_pool2d(g, x, k, s, pad, (int)p[6], (int)p[7]);
    if (!strcmp(op, "adaptive_avg_pool2d"))
        return kiln_adaptive_avg_pool2d(g, x, (int64_t)p[0], (int64_t)p[1]);
    if (!strcmp(op, "reflect") || !strcmp(op, "replicate")) {
        int64_t pads[4];
        for (int i = 0; i < (int)p[0]; i++)
            pads[i] = (int64_t)p[1 + i];
        return kiln_pad_mode(g, x, pads, (int)p[0],
                             op[2] == 'f' ? KILN_PAD_REFLECT
                                          : KILN_PAD_REPLICATE);
    }
    int64_t size[2] = {(int64_t)p[0], (int64_t)p[1]};
    double scale[2] = {p[2], p[3]};
    kiln_upsample m =
        op[0] == 'n' ? KILN_UPSAMPLE_NEAREST : KILN_UPSAMPLE_BILINEAR;
    return kiln_upsample2d(g, x, size[0] ? size : NULL, size[0] ? NULL : scale,
                           m, (int)p[4]);
}

/* y = op(x), dx = its vector-Jacobian product with dy, and (three inputs)
   gg = d<dx, v>/d dy; the nodes in out[], their count returned. */
static int build_case(kiln_graph *g, const pool_case *c, kiln_node **in,
                      kiln_node **out)
{
    for (int i = 0; i < c->n_in; i++)
        in[i] = kiln_input(g, c->in[i].name, KILN_F32, c->in[i].shape);
    out[0] = build_op(g, in[0], c->op, c->prm);
    if (kiln_grads(g, out[0], in[1], in, 1, &out[1]) != KILN_OK)
        fail_msg("%s: %s", c->op, kiln_graph_error(g));
    if (c->n_in > 2)
        out[2] = kiln_grad(
            g, kiln_sum(g, kiln_mul(g, out[1], in[2]), KILN_ALL_AXES, 0),
            in[1]);
    th_assert_graph_ok(g);
    return c->n_in > 2 ? 3 : 2;
}

static void check_outputs(const char *name, const char *how, const pool_case *c,
                          kiln_tensor **got, int n)
{
    assert_int_equal(n, c->n_out);
    for (int i = 0; i < n; i++) {
        char what[300];
        snprintf(what, sizeof what, "%s %s %s", name, how, c->out[i].name);
        th_assert_shape(kiln_tensor_shape(got[i]), c->out[i].shape);
        th_assert_close(what, kiln_tensor_f32(got[i]), c->out[i].v,
                        kiln_tensor_numel(got[i]), RTOL, ATOL);
    }
}

static void run_case(const char *name, const pool_case *c, int reference,
                     int dynamic)
{
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_reference_kernels(s, reference), KILN_OK);
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[3], *out[3];
    kiln_tensor *feeds[3], *got[3] = {0};
    int n = build_case(g, c, in, out);
    for (int i = 0; i < c->n_in; i++)
        feeds[i] = ref_tensor_new(&c->in[i]);
    if (dynamic) {
        for (int i = 0; i < c->n_in; i++)
            assert_int_equal(kiln_feed(s, in[i], feeds[i]), KILN_OK);
        if (kiln_forward(s, g) != KILN_OK)
            fail_msg("kiln_forward: %s", kiln_session_error(s));
        for (int i = 0; i < n; i++)
            assert_non_null(got[i] = kiln_node_value(s, out[i]));
    } else {
        th_run(s, g, out, n, in, feeds, c->n_in, got);
    }
    check_outputs(name, reference ? "reference" : "fast", c, got, n);
    for (int i = 0; i < c->n_in; i++)
        kiln_tensor_free(feeds[i]);
    for (int i = 0; i < n; i++)
        kiln_tensor_free(got[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* One file of tests/ref/pool, four ways. */
static void check_case(const char *name, void *ctx)
{
    (void)ctx;
    pool_case c;
    case_load(name, &c);
    for (int k = 0; k < 4; k++)
        run_case(name, &c, k & 1, k >> 1);
    case_free(&c);
}

static void test_pytorch_cases(void **state)
{
    (void)state;
    assert_true(ref_each_file("pool", check_case, NULL) >= 40);
}

/* ------------------------------------------------------------ gradchecks */

/* One op of the group on x, from a small table of configurations. */
static kiln_node *config_op(kiln_graph *g, kiln_node *x, int k)
{
    static const double P[][10] = {
        {3, 3, 2, 2, 1, 1, 1, 1, 1}, /* max k3 s2 p1 ceil */
        {2, 3, 1, 2, 1, 0, 2, 1, 0}, /* max k(2,3) s(1,2) p(1,0) d(2,1) */
        {3, 3, 2, 2, 1, 1, 1, 0},    /* avg ceil, padding not counted */
        {3, 2, 1, 2, 1, 1, 0, 1},    /* avg, padding counted */
        {3, 2},                      /* adaptive to 3x2 */
        {4, 2, 1, 1, 2},             /* reflect (2,1,1,2) */
        {4, 3, 0, 1, 4},             /* replicate (3,0,1,4) */
        {7, 9, 0, 0, 0},             /* nearest to 7x9 */
        {0, 0, 1.7, 0.6, 0},         /* bilinear by (1.7, 0.6) */
        {2, 7, 0, 0, 1},             /* bilinear to 2x7, align_corners */
        {2, 2, 2, 2, 0, 0, 1, 1, 0}, /* max 2x2 stride 2: vectorised */
        {2, 2, 2, 2, 0, 0, 1, 1, 1}, /* the same in ceil mode */
    };
    static const char *const OP[] = {"max_pool2d",
                                     "max_pool2d",
                                     "avg_pool2d",
                                     "avg_pool2d",
                                     "adaptive_avg_pool2d",
                                     "reflect",
                                     "replicate",
                                     "nearest",
                                     "bilinear",
                                     "bilinear",
                                     "max_pool2d",
                                     "max_pool2d"};
    return build_op(g, x, OP[k], P[k]);
}
enum { N_CONFIGS = 12 };

static void gradcheck_config(int k, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(2, 2, 5 + (int64_t)(seed % 3), 6);
    kiln_node *x = kiln_input(g, "x", KILN_F32, sh);
    kiln_node *y = config_op(g, x, k);
    kiln_node *loss =
        kiln_sum(g, kiln_mul(g, y, th_normal_const(g, &r, kiln_node_shape(y))),
                 KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_tensor *xt = th_rand(&r, sh, -2, 2); /* distinct: no ties */
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, loss, &x, 1, &x, &xt, 1, 1e-3, 1e-2, &res) !=
        KILN_OK)
        fail_msg("config %d seed %llu: %s (abs err %.3g)", k,
                 (unsigned long long)seed, kiln_session_error(s),
                 res.max_abs_err);
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* The gradient ops' own gradients (grad-of-grad): the loss sum(dx * v) of
   dx = vjp(x; dy), checked with respect to dy by finite differences. */
static void gradcheck_backward(int k, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(1, 2, 6, 5);
    kiln_node *x = kiln_input(g, "x", KILN_F32, sh);
    kiln_node *y = config_op(g, x, k), *dx;
    kiln_node *dy = kiln_input(g, "dy", KILN_F32, kiln_node_shape(y));
    assert_int_equal(kiln_grads(g, y, dy, &x, 1, &dx), KILN_OK);
    kiln_node *loss = kiln_sum(
        g, kiln_mul(g, dx, th_normal_const(g, &r, kiln_node_shape(dx))),
        KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_node *feed[2] = {x, dy};
    kiln_tensor *ft[2] = {th_rand(&r, sh, -2, 2),
                          th_rand(&r, kiln_node_shape(y), -2, 2)};
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, loss, &dy, 1, feed, ft, 2, 1e-3, 1e-2, &res) !=
        KILN_OK)
        fail_msg("config %d: %s (abs err %.3g)", k, kiln_session_error(s),
                 res.max_abs_err);
    kiln_tensor_free(ft[0]);
    kiln_tensor_free(ft[1]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_gradcheck(void **state)
{
    (void)state;
    for (int k = 0; k < N_CONFIGS; k++) {
        for (uint64_t seed = 1; seed <= 3; seed++)
            gradcheck_config(k, seed + 10 * (uint64_t)k);
        gradcheck_backward(k, 7 + (uint64_t)k);
    }
}

/* ------------------------------------------------------------ fast kernels */

/* y, dx and d<dx, v>/d dy of config k on a random shape, with the fast or
   the reference kernels. */
static void run_kernels(int k, kiln_shape sh, int reference, uint64_t seed,
                        kiln_tensor **got)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_session_set_reference_kernels(s, reference);
    kiln_session_set_threads(s, 2);
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[3], *out[3];
    in[0] = kiln_input(g, "x", KILN_F32, sh);
    out[0] = config_op(g, in[0], k);
    in[1] = kiln_input(g, "dy", KILN_F32, kiln_node_shape(out[0]));
    in[2] = kiln_input(g, "v", KILN_F32, sh);
    assert_int_equal(kiln_grads(g, out[0], in[1], in, 1, &out[1]), KILN_OK);
    out[2] = kiln_grad(
        g, kiln_sum(g, kiln_mul(g, out[1], in[2]), KILN_ALL_AXES, 0), in[1]);
    kiln_tensor *ft[3] = {th_rand(&r, sh, -2, 2),
                          th_rand(&r, kiln_node_shape(out[0]), -2, 2),
                          th_rand(&r, sh, -2, 2)};
    /* ties and a NaN in x: both kernels must pick the same argmax */
    float *xv = kiln_tensor_f32(ft[0]);
    for (int64_t i = 0; i < kiln_tensor_numel(ft[0]); i += 3)
        xv[i] = (float)(i % 2);
    xv[kiln_tensor_numel(ft[0]) / 2] = NAN;
    th_run(s, g, out, 3, in, ft, 3, got);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(ft[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_fast_matches_reference(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 99);
    /* the last two: rows and outputs too wide for the two-pass resample */
    const kiln_shape fixed[] = {KILN_SHAPE(1, 1, 4, 4), KILN_SHAPE(3, 1, 9, 6),
                                KILN_SHAPE(1, 300, 8, 8),
                                KILN_SHAPE(1, 1, 4, 4100),
                                KILN_SHAPE(1, 2, 3, 1100)};
    for (int t = 0; t < 14; t++) {
        kiln_shape sh = t < 5 ? fixed[t]
                              : KILN_SHAPE(1 + kiln_rng_u32(&r) % 3,
                                           1 + kiln_rng_u32(&r) % 5,
                                           4 + kiln_rng_u32(&r) % 27,
                                           4 + kiln_rng_u32(&r) % 300);
        for (int k = 0; k < N_CONFIGS; k++) {
            kiln_tensor *fast[3], *ref[3];
            run_kernels(k, sh, 0, (uint64_t)t, fast);
            run_kernels(k, sh, 1, (uint64_t)t, ref);
            char what[64];
            snprintf(what, sizeof what, "config %d shape %d", k, t);
            th_assert_outputs_close_free(what, fast, ref, 3, 1e-5, 1e-6);
        }
    }
}

/* ------------------------------------------------------------ errors */

typedef kiln_node *(*bad_fn)(kiln_graph *g, kiln_node *x);

#define BAD(name, expr)                                                        \
    static kiln_node *name(kiln_graph *g, kiln_node *x)                        \
    {                                                                          \
        return (expr);                                                         \
    }
static const int K2[2] = {2, 2}, K3[2] = {3, 3}, P2[2] = {2, 2}, Z[2] = {0, 1};
static const int64_t BIG_PAD[4] = {4, 0, 0, 0}, PAD4[4] = {1, 1, 1, 1},
                     SIZE[2] = {4, 4}, NEG[2] = {-1, 0};
static const double SCALE[2] = {2.0, 2.0}, TINY[2] = {0.1, 2.0};
BAD(bad_pad_half, kiln_max_pool2d(g, x, K2, NULL, P2, NULL, 0))
BAD(bad_kernel, kiln_max_pool2d(g, x, Z, NULL, NULL, NULL, 0))
BAD(bad_small, kiln_avg_pool2d(g, x, (int[]){5, 5}, NULL, NULL, 0, 1))
BAD(bad_null, kiln_avg_pool2d(g, x, NULL, NULL, NULL, 0, 1))
BAD(bad_rank, kiln_max_pool2d(g, kiln_reshape(g, x, KILN_SHAPE(8, 4)), K3, NULL,
                              NULL, NULL, 0))
BAD(bad_adaptive, kiln_adaptive_avg_pool2d(g, x, 0, 2))
BAD(bad_reflect, kiln_pad_mode(g, x, BIG_PAD, 4, KILN_PAD_REFLECT))
BAD(bad_pad_count, kiln_pad_mode(g, x, PAD4, 3, KILN_PAD_REPLICATE))
BAD(bad_pad_neg, kiln_pad_mode(g, kiln_reshape(g, x, KILN_SHAPE(8, 4)), NEG, 2,
                               KILN_PAD_REPLICATE))
BAD(bad_pad_rank, kiln_pad_mode(g, kiln_reshape(g, x, KILN_SHAPE(32)), NEG, 2,
                                KILN_PAD_REFLECT))
BAD(bad_both, kiln_upsample2d(g, x, SIZE, SCALE, KILN_UPSAMPLE_NEAREST, 0))
BAD(bad_align, kiln_upsample2d(g, x, SIZE, NULL, KILN_UPSAMPLE_NEAREST, 1))
BAD(bad_scale, kiln_upsample2d(g, x, NULL, TINY, KILN_UPSAMPLE_BILINEAR, 0))
BAD(bad_flatten, kiln_flatten(g, x, 3, 1))
BAD(bad_flatten_dim, kiln_flatten(g, x, 0, 4))
BAD(bad_i32,
    kiln_max_pool2d(g, kiln_cast(g, x, KILN_I32), K2, NULL, NULL, NULL, 0))

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        bad_fn fn;
        kiln_status st;
        const char *msg;
    } cases[] = {
        {bad_pad_half, KILN_ERR_ARG,
         "kiln_max_pool2d: pad should be at most half of kernel size, but got "
         "pad [2,2] and kernel [2,2]"},
        {bad_kernel, KILN_ERR_ARG,
         "kiln_max_pool2d: kernel [0,1], stride [0,1] and dilation [1,1] must "
         "be positive"},
        {bad_small, KILN_ERR_SHAPE,
         "kiln_avg_pool2d: input [1,2,4,4] is too small for kernel [5,5] "
         "(dilation [1,1], pad [0,0]): output size 0"},
        {bad_null, KILN_ERR_ARG, "kiln_avg_pool2d: kernel is NULL"},
        {bad_rank, KILN_ERR_SHAPE,
         "kiln_max_pool2d: input [8,4]: expected 3D or 4D"},
        {bad_adaptive, KILN_ERR_ARG,
         "kiln_adaptive_avg_pool2d: output size [0,2] must be positive"},
        {bad_reflect, KILN_ERR_SHAPE,
         "kiln_pad_mode: padding size should be less than the corresponding "
         "input dimension, but got: padding (4, 0) at dimension 3 of input "
         "[1,2,4,4]"},
        {bad_pad_count, KILN_ERR_ARG,
         "kiln_pad_mode: want 2 or 4 pad sizes (left, right[, top, bottom]), "
         "got 3"},
        {bad_pad_neg, KILN_ERR_ARG,
         "kiln_pad_mode: padding (-1, 0) must be in [0, 2^30]"},
        {bad_pad_rank, KILN_ERR_SHAPE,
         "kiln_pad_mode: input [32]: expected 2D or 3D"},
        {bad_both, KILN_ERR_ARG,
         "kiln_upsample2d: give either size or scale, not both"},
        {bad_align, KILN_ERR_ARG,
         "kiln_upsample2d: align_corners can only be set with bilinear, not "
         "nearest"},
        {bad_scale, KILN_ERR_SHAPE,
         "kiln_upsample2d: input and output sizes should be greater than 0 "
         "(and below 2^30), got 4 -> 0 along dim 2 of input [1,2,4,4]"},
        {bad_flatten, KILN_ERR_ARG,
         "kiln_flatten: start_dim 3 cannot come after end_dim 1"},
        {bad_flatten_dim, KILN_ERR_ARG, "kiln_flatten"},
        {bad_i32, KILN_ERR_DTYPE, "kiln_max_pool2d"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(1, 2, 4, 4));
        kiln_node *y = cases[i].fn(g, x);
        assert_true(y && kiln_node_id(y) == -1 &&
                    !strcmp(kiln_node_op_name(y), "error"));
        if (kiln_graph_status(g) != cases[i].st ||
            !strstr(kiln_graph_error(g), cases[i].msg))
            fail_msg("case %zu: status %d, error '%s'", i,
                     (int)kiln_graph_status(g), kiln_graph_error(g));
        kiln_graph_free(g);
    }
    /* a NULL graph is refused, not dereferenced */
    assert_null(kiln_max_pool2d(NULL, NULL, K2, NULL, NULL, NULL, 0));
    assert_null(kiln_flatten(NULL, NULL, 0, -1));
}

/* ------------------------------------------------------------ symbolic */

/* The CNN's pooling path on a symbolic batch: one compiled function runs
   batches 4 and 2, and each sample's values do not depend on the batch. */
static kiln_node *cnn_path(kiln_graph *g, kiln_node *x)
{
    kiln_node *h = kiln_max_pool2d(g, x, K2, NULL, NULL, NULL, 0);
    h = kiln_avg_pool2d(g, h, K3, (int[]){1, 1}, (int[]){1, 1}, 1, 0);
    h = kiln_pad_mode(g, h, PAD4, 4, KILN_PAD_REFLECT);
    h = kiln_upsample2d(g, h, NULL, SCALE, KILN_UPSAMPLE_BILINEAR, 0);
    h = kiln_adaptive_avg_pool2d(g, h, 3, 2);
    return kiln_flatten(g, h, 1, -1);
}

static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(4, 3, 8, 6), KILN_AXIS(0));
    kiln_node *y = cnn_path(g, x);
    assert_int_equal(kiln_node_shape(y).sym, 1u);
    th_assert_shape(kiln_node_shape(y), KILN_SHAPE(4, 18));
    kiln_node *dx =
        kiln_grad(g, kiln_sum(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0), x);
    assert_int_equal(kiln_node_shape(dx).sym, 1u);
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *outs[2] = {y, dx};
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    assert_non_null(f);
    kiln_tensor *x4 = th_rand(&r, KILN_SHAPE(4, 3, 8, 6), -1, 1);
    kiln_tensor *x2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3, 8, 6));
    memcpy(kiln_tensor_f32(x2), kiln_tensor_f32(x4), 2 * 3 * 8 * 6 * 4);
    kiln_tensor *o4[2] = {kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 18)),
                          kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 3, 8, 6))};
    kiln_tensor *o2[2] = {kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 18)),
                          kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3, 8, 6))};
    if (kiln_run(f, &x4, o4) != KILN_OK || kiln_run(f, &x2, o2) != KILN_OK)
        fail_msg("kiln_run: %s", kiln_session_error(s));
    th_assert_close_f("y", kiln_tensor_f32(o2[0]), kiln_tensor_f32(o4[0]),
                      2 * 18, 0, 0);
    th_assert_close_f("dx", kiln_tensor_f32(o2[1]), kiln_tensor_f32(o4[1]),
                      2 * 3 * 8 * 6, 0, 0);
    for (int i = 0; i < 2; i++) {
        kiln_tensor_free(o4[i]);
        kiln_tensor_free(o2[i]);
    }
    kiln_tensor_free(x4);
    kiln_tensor_free(x2);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* An empty batch: every op of the group gives an empty result, as do
   their gradients. */
static void test_empty_batch(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    for (int k = 0; k < N_CONFIGS; k++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(0, 2, 6, 5));
        kiln_node *y = config_op(g, x, k);
        kiln_node *dx = kiln_grad(g, kiln_sum(g, y, KILN_ALL_AXES, 0), x);
        kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 2, 6, 5));
        kiln_node *outs[2] = {y, dx};
        kiln_tensor *got[2];
        th_run(s, g, outs, 2, &x, &xt, 1, got);
        assert_int_equal(kiln_tensor_numel(got[0]), 0);
        th_assert_shape(kiln_tensor_shape(got[1]), KILN_SHAPE(0, 2, 6, 5));
        for (int i = 0; i < 2; i++)
            kiln_tensor_free(got[i]);
        kiln_tensor_free(xt);
        kiln_graph_free(g);
    }
    kiln_session_free(s);
}

/* ------------------------------------------------------------ flatten */

static void test_flatten(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3, 4, 5));
    th_assert_shape(kiln_node_shape(kiln_flatten(g, x, 1, -1)),
                    KILN_SHAPE(2, 60));
    th_assert_shape(kiln_node_shape(kiln_flatten(g, x, 0, 1)),
                    KILN_SHAPE(6, 4, 5));
    th_assert_shape(kiln_node_shape(kiln_flatten(g, x, -2, -1)),
                    KILN_SHAPE(2, 3, 20));
    th_assert_shape(kiln_node_shape(kiln_flatten(g, x, 2, 2)),
                    KILN_SHAPE(2, 3, 4, 5));
    th_assert_shape(kiln_node_shape(kiln_flatten(g, x, 0, -1)),
                    KILN_SHAPE(120));
    kiln_node *sc = kiln_scalar(g, 2.5f);
    th_assert_shape(kiln_node_shape(kiln_flatten(g, sc, 0, -1)), KILN_SHAPE(1));
    /* a reshape: the same values in the same order, and its gradient */
    kiln_node *f = kiln_flatten(g, x, 1, 2);
    assert_string_equal(kiln_node_op_name(f), "reshape");
    th_assert_graph_ok(g);
    kiln_graph_free(g);
}

/* The IR line says which map a resample2d node is. */
static void test_ir_names_the_map(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(1, 2, 5, 4));
    kiln_node *y[3] = {
        kiln_avg_pool2d(g, x, K2, NULL, NULL, 1, 0),
        kiln_upsample2d(g, x, NULL, (double[]){2.0, 1.5},
                        KILN_UPSAMPLE_BILINEAR, 0),
        kiln_max_pool2d(g, x, K3, (int[]){1, 2}, (int[]){1, 1}, NULL, 0)};
    const char *want[3] = {
        "%1 = resample2d(%0) f32[1,2,3,2] kernel=[2,2] stride=[2,2] "
        "pad=[0,0][0,0] dilation=[1,1] ceil mode=avg",
        "%2 = resample2d(%0) f32[1,2,10,6] pad=[0,0][0,0] mode=bilinear "
        "inv_scale=[0.5,0.666667]",
        "%3 = max_pool2d(%0) f32[1,2,5,2] kernel=[3,3] stride=[1,2] "
        "pad=[1,1][1,1] dilation=[1,1]"};
    for (int i = 0; i < 3; i++) {
        char line[256];
        kiln_node_format(y[i], NULL, 0, line, sizeof line);
        assert_string_equal(line, want[i]);
    }
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_cases),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_ir_names_the_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
