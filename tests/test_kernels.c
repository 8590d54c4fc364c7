/* Differential tests: every fast kernel against the reference kernel on
   random operands, at 1 and 2 threads: sizes that are not multiples of the
   vector width, size-1 and empty axes, every broadcasting pattern, tensors
   large enough to be split over the pool, and in-place outputs.  Movement
   must match exactly; arithmetic to 1e-6 relative (the fast exp, log, tanh
   and sigmoid are polynomial, the others the same expressions). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/dispatch.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "kiln.h"

#define RTOL 1e-6

static const int THREADS[] = {1, 2};

/* Random values in [lo, hi) for every f32 input of n; i32 inputs get
   labels in [0, 10). */
static void **make_inputs(kiln_rng *r, const kiln_node *n, double lo, double hi)
{
    void **in = calloc((size_t)n->n_in + 1, sizeof *in);
    assert_non_null(in);
    for (int k = 0; k < n->n_in; k++) {
        int64_t len = kiln_shape_numel(n->in[k]->shape);
        in[k] = malloc((size_t)(len + 1) * 4);
        assert_non_null(in[k]);
        for (int64_t i = 0; i < len; i++) {
            if (n->in[k]->dtype == KILN_I32)
                ((int32_t *)in[k])[i] = (int32_t)(kiln_rng_u32(r) % 10);
            else
                ((float *)in[k])[i] =
                    (float)(lo + (hi - lo) * kiln_rng_uniform(r));
        }
    }
    return in;
}

static void free_inputs(const kiln_node *n, void **in)
{
    for (int k = 0; k < n->n_in; k++)
        free(in[k]);
    free(in);
}

static int close_enough(float got, float want, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs((double)got - want) <= atol + rtol * fabs((double)want);
}

/* Runs n's reference kernel and its fast kernel (through kiln_cpu_exec) at
   every thread count and compares: exactly when exact, else within rtol
   (plus atol).  With inplace, the fast kernel writes over input 0. */
static void check_node_tol(const kiln_node *n, void **in, int exact,
                           double rtol, double atol, int inplace)
{
    assert_int_equal(kiln_graph_status(n->graph), KILN_OK);
    int64_t len = kiln_shape_numel(n->shape);
    size_t bytes = (size_t)(len + 1) * 4;
    float *want = malloc(bytes), *got = malloc(bytes), *save = NULL;
    assert_non_null(want);
    assert_non_null(got);
    kiln_ref_kernels[n->op](n, want, in);
    if (inplace) {
        save = malloc(bytes);
        assert_non_null(save);
        memcpy(save, in[0], (size_t)len * 4);
    }
    char shape[96];
    kiln_shape_str(n->shape, shape, sizeof shape);
    for (size_t t = 0; t < sizeof THREADS / sizeof *THREADS; t++) {
        kiln_set_num_threads(THREADS[t]);
        kiln_set_reference_kernels(0);
        memset(got, 0xA5, bytes);
        float *out = got;
        if (inplace) {
            memcpy(in[0], save, (size_t)len * 4);
            out = in[0];
        }
        kiln_cpu_exec(n, out, in, NULL, 0);
        if (inplace)
            memcpy(got, out, (size_t)len * 4);
        if (exact) {
            for (int64_t i = 0; i < len; i++)
                if (memcmp(&got[i], &want[i], 4) != 0 &&
                    !(isnan(got[i]) && isnan(want[i])))
                    fail_msg(
                        "%s %s, %d threads: element %lld: %.9g, reference %.9g",
                        kiln_op_table[n->op].name, shape, THREADS[t],
                        (long long)i, got[i], want[i]);
        } else {
            for (int64_t i = 0; i < len; i++)
                if (!close_enough(got[i], want[i], rtol, atol))
                    fail_msg(
                        "%s %s, %d threads: element %lld: %.9g, reference %.9g",
                        kiln_op_table[n->op].name, shape, THREADS[t],
                        (long long)i, got[i], want[i]);
        }
    }
    if (inplace) {
        memcpy(in[0], save, (size_t)len * 4);
        free(save);
    }
    kiln_set_num_threads(1);
    free(want);
    free(got);
}

static void check_node(const kiln_node *n, void **in, int exact)
{
    check_node_tol(n, in, exact, RTOL, 0, 0);
}

static kiln_node *input(kiln_graph *g, kiln_shape s)
{
    return kiln_input(g, "x", KILN_F32, s);
}

/* ------------------------------------------------------------ elementwise */

typedef kiln_node *(*unary_builder)(kiln_graph *, kiln_node *);
typedef kiln_node *(*binary_builder)(kiln_graph *, kiln_node *, kiln_node *);

/* Every elementwise op of the table on its row's domain (both signs of an
   AWAY domain), with its formula: the fast kernel must equal the reference
   bit for bit unless the formula uses an approximated function. */
#define UNI(lo, hi) lo, hi
#define AWAY(lo, hi) -(hi), hi
#define DISTINCT(lo, hi) lo, hi
#define KILN_UNARY(OP, name, f, grad, dom, doc) {#name, kiln_##name, dom, #f},
#define KILN_BINARY(OP, name, f, grad, dom, doc)
static const struct {
    const char *name;
    unary_builder f;
    double lo, hi;
    const char *formula;
} UNARY[] = {
#include "graph/elementwise.def"
};
#undef KILN_UNARY
#undef KILN_BINARY

#define KILN_UNARY(OP, name, f, grad, dom, doc)
#define KILN_BINARY(OP, name, f, grad, dom, doc) {#name, kiln_##name, dom, #f},
static const struct {
    const char *name;
    binary_builder f;
    double lo, hi;
    const char *formula;
} BINARY[] = {
#include "graph/elementwise.def"
};
#undef KILN_UNARY
#undef KILN_BINARY

static int exact(const char *formula)
{
    return !strstr(formula, "EXP(") && !strstr(formula, "EXPN(") &&
           !strstr(formula, "LOG(") && !strstr(formula, "TANH(");
}

/* Shapes not multiples of any vector width, size 1 and empty, and one
   large enough for the pool. */
static const int64_t SIZES[] = {0, 1, 7, 17, 33, 1003, 70003};

static void test_unary(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (size_t u = 0; u < sizeof UNARY / sizeof *UNARY; u++) {
        for (size_t s = 0; s < sizeof SIZES / sizeof *SIZES; s++) {
            kiln_graph *g = kiln_graph_new();
            kiln_node *n = UNARY[u].f(g, input(g, KILN_SHAPE(SIZES[s])));
            void **in = make_inputs(&r, n, UNARY[u].lo, UNARY[u].hi);
            check_node(n, in, exact(UNARY[u].formula));
            check_node_tol(n, in, exact(UNARY[u].formula), RTOL, 0, 1);
            free_inputs(n, in);
            kiln_graph_free(g);
        }
    }
}

static void test_binary(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 2);
    /* Pairs of operand shapes covering every broadcasting pattern. */
    const struct {
        kiln_shape a, b;
    } pairs[] = {
        {KILN_SHAPE(1003), KILN_SHAPE(1003)},
        {KILN_SHAPE(7, 33), KILN_SHAPE(33)}, /* bias: row broadcast */
        {KILN_SHAPE(7, 33), KILN_SHAPE(1, 33)},
        {KILN_SHAPE(17, 33), KILN_SHAPE(17, 1)}, /* column broadcast */
        {KILN_SHAPE(17, 1), KILN_SHAPE(17, 33)},
        {KILN_SHAPE(17, 33), KILN_SCALAR}, /* scalar */
        {KILN_SCALAR, KILN_SHAPE(17, 33)},
        {KILN_SCALAR, KILN_SCALAR},
        {KILN_SHAPE(5, 1, 7), KILN_SHAPE(5, 3, 7)}, /* middle axis */
        {KILN_SHAPE(5, 3, 1), KILN_SHAPE(1, 3, 7)}, /* both broadcast */
        {KILN_SHAPE(2, 1, 3, 1), KILN_SHAPE(1, 4, 1, 5)},
        {KILN_SHAPE(1, 1, 9), KILN_SHAPE(9)},
        {KILN_SHAPE(0, 5), KILN_SHAPE(5)}, /* empty */
        {KILN_SHAPE(3, 0), KILN_SHAPE(3, 1)},
        {KILN_SHAPE(70003), KILN_SHAPE(70003)}, /* threaded */
        {KILN_SHAPE(300, 257), KILN_SHAPE(257)},
        {KILN_SHAPE(300, 257), KILN_SHAPE(300, 1)},
        {KILN_SHAPE(3, 40000), KILN_SHAPE(1, 40000)},
        /* equal shapes of several axes: one contiguous walk (ew_plan.c) */
        {KILN_SHAPE(7, 33), KILN_SHAPE(7, 33)},
        {KILN_SHAPE(2, 3, 1, 5), KILN_SHAPE(2, 3, 1, 5)},
        {KILN_SHAPE(1, 1, 1), KILN_SHAPE(1, 1, 1)},
        {KILN_SHAPE(3, 0), KILN_SHAPE(3, 0)},
        {KILN_SHAPE(300, 257), KILN_SHAPE(300, 257)}, /* threaded */
    };
    for (size_t b = 0; b < sizeof BINARY / sizeof *BINARY; b++) {
        for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
            kiln_graph *g = kiln_graph_new();
            kiln_node *n =
                BINARY[b].f(g, input(g, pairs[p].a), input(g, pairs[p].b));
            void **in = make_inputs(&r, n, BINARY[b].lo, BINARY[b].hi);
            if (!strcmp(BINARY[b].name, "eq")) /* some equal pairs */
                for (int64_t i = 0; i < kiln_shape_numel(pairs[p].a); i += 3)
                    ((float *)in[0])[i] = 0.5f;
            check_node(n, in, exact(BINARY[b].formula));
            if (kiln_shape_equal(pairs[p].a, n->shape))
                check_node_tol(n, in, exact(BINARY[b].formula), 0, 0, 1);
            free_inputs(n, in);
            kiln_graph_free(g);
        }
    }
}

static void test_select(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    const kiln_shape shapes[][3] = {
        {KILN_SHAPE(1003), KILN_SHAPE(1003), KILN_SHAPE(1003)},
        {KILN_SHAPE(7, 33), KILN_SHAPE(33), KILN_SCALAR},
        {KILN_SHAPE(17, 1), KILN_SHAPE(1, 33), KILN_SHAPE(17, 33)},
        {KILN_SHAPE(0, 3), KILN_SHAPE(3), KILN_SHAPE(1)},
        {KILN_SHAPE(300, 257), KILN_SHAPE(300, 257), KILN_SHAPE(257)},
        {KILN_SHAPE(17, 33), KILN_SHAPE(17, 33), KILN_SHAPE(17, 33)},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *c = kiln_gt(g, input(g, shapes[i][0]), kiln_scalar(g, 0.0f));
        kiln_node *n =
            kiln_select(g, c, input(g, shapes[i][1]), input(g, shapes[i][2]));
        void **in = make_inputs(&r, n, -1, 1);
        for (int64_t j = 0; j < kiln_shape_numel(shapes[i][0]); j++)
            ((float *)in[0])[j] = ((float *)in[0])[j] > 0 ? 1.0f : 0.0f;
        check_node(n, in, 1);
        free_inputs(n, in);
        kiln_graph_free(g);
    }
}

/* Edge values of the polynomial functions, denormals kept (IEEE mode). */
static void test_special_values(void **state)
{
    (void)state;
    static const float v[] = {
        0.0f,     -0.0f,  1.0f,      -1.0f,    INFINITY,        -INFINITY,
        NAN,      88.7f,  88.8f,     -87.0f,   -88.0f,          -103.0f,
        -104.0f,  1e-30f, 1e-40f,    -1e-40f,  1.17549435e-38f, 3.4e38f,
        0.39999f, 0.4f,   0.40001f,  1e-8f,    -1e-8f,          20.0f,
        -20.0f,   30.0f,  0.999999f, 1.000001f};
    enum { N = sizeof v / sizeof *v };
    unary_builder fs[] = {kiln_exp, kiln_log, kiln_tanh, kiln_sigmoid};
    kiln_set_flush_denormals(0);
    for (size_t f = 0; f < sizeof fs / sizeof *fs; f++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *n = fs[f](g, input(g, KILN_SHAPE(N)));
        void *in[1] = {(void *)v};
        /* denormal results carry fewer bits: compare them absolutely */
        check_node_tol(n, in, 0, RTOL, 1e-44, 0);
        kiln_graph_free(g);
    }
    kiln_set_flush_denormals(1);
}

/* A dense sweep of the polynomial functions over their useful ranges. */
static void test_function_sweep(void **state)
{
    (void)state;
    enum { N = 400003 };
    float *x = malloc(N * sizeof *x);
    assert_non_null(x);
    const struct {
        unary_builder f;
        double lo, hi;
    } sweeps[] = {{kiln_exp, -103, 88.7}, {kiln_log, 1e-37, 3e38},
                  {kiln_log, 0.5, 2},     {kiln_tanh, -12, 12},
                  {kiln_tanh, -0.5, 0.5}, {kiln_sigmoid, -90, 90}};
    for (size_t s = 0; s < sizeof sweeps / sizeof *sweeps; s++) {
        double lo = sweeps[s].lo, hi = sweeps[s].hi;
        int geometric = lo > 0 && hi / lo > 1e6;
        for (int i = 0; i < N; i++) {
            double t = (double)i / (N - 1);
            x[i] =
                (float)(geometric ? lo * pow(hi / lo, t) : lo + (hi - lo) * t);
        }
        kiln_graph *g = kiln_graph_new();
        kiln_node *n = sweeps[s].f(g, input(g, KILN_SHAPE(N)));
        void *in[1] = {x};
        check_node_tol(n, in, 0, RTOL, 1e-37, 0);
        kiln_graph_free(g);
    }
    free(x);
}

/* ------------------------------------------------------------ reductions */

static void test_reductions(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 4);
    const struct {
        kiln_shape s;
        unsigned axes;
    } cases[] = {
        {KILN_SHAPE(1003), 1},
        {KILN_SHAPE(7, 33), 1},
        {KILN_SHAPE(7, 33), 2},
        {KILN_SHAPE(7, 33), 3},
        {KILN_SHAPE(128, 10), 2},
        {KILN_SHAPE(128, 600), 1},
        {KILN_SHAPE(5, 17, 3), 2},
        {KILN_SHAPE(5, 17, 3), 3},
        {KILN_SHAPE(5, 17, 3), 6},
        {KILN_SHAPE(5, 17, 3), 5}, /* reference */
        {KILN_SHAPE(5, 1, 3), 2},
        {KILN_SHAPE(1, 1), 3},
        {KILN_SHAPE(0, 5), 1},
        {KILN_SHAPE(0, 5), 2},
        {KILN_SHAPE(5, 0), 2},
        {KILN_SCALAR, 0},
        {KILN_SHAPE(300, 257), 1},
        {KILN_SHAPE(300, 257), 2},
        {KILN_SHAPE(3, 40000), 2},
        {KILN_SHAPE(40000, 3), 1},
        {KILN_SHAPE(2, 300, 600), 2},
        {KILN_SHAPE(1, 513), 1},
        /* [reduced, kept, reduced]: per-channel sums of NCHW */
        {KILN_SHAPE(4, 3, 5, 7), 13},
        {KILN_SHAPE(9, 33, 1, 17), 13},
        {KILN_SHAPE(2, 3, 4, 5, 6), 25},
        {KILN_SHAPE(1, 6, 1, 1), 13},
        {KILN_SHAPE(3, 1, 5), 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int op = 0; op < 2; op++) {
            kiln_graph *g = kiln_graph_new();
            kiln_node *x = input(g, cases[c].s);
            kiln_node *n = op ? kiln_reduce_max(g, x, cases[c].axes, c % 2)
                              : kiln_sum(g, x, cases[c].axes, c % 2);
            if (op && kiln_graph_status(g) != KILN_OK) {
                /* a max over an empty axis is refused (docs/ops.md) */
                assert_non_null(
                    strstr(kiln_graph_error(g), "zero-size dimension"));
                kiln_graph_free(g);
                continue;
            }
            void **in = make_inputs(&r, n, -1, 1);
            /* sums may cancel: the tolerance scales with the terms */
            check_node_tol(n, in, op, RTOL,
                           1e-9 * (double)kiln_shape_numel(cases[c].s), 0);
            free_inputs(n, in);
            kiln_graph_free(g);
        }
    }
}

static void test_reduce_max_nan(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    for (unsigned axes = 1; axes <= 3; axes++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *n = kiln_reduce_max(g, input(g, KILN_SHAPE(9, 37)), axes, 0);
        void **in = make_inputs(&r, n, -1, 1);
        ((float *)in[0])[5 * 37 + 11] = NAN;
        ((float *)in[0])[2 * 37 + 30] = -INFINITY;
        check_node(n, in, 1);
        free_inputs(n, in);
        kiln_graph_free(g);
    }
}

/* ------------------------------------------------------------ movement */

static void check_permute(kiln_rng *r, kiln_shape s, const int *perm)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *n = kiln_permute(g, input(g, s), perm);
    void **in = make_inputs(r, n, -1, 1);
    check_node(n, in, 1);
    free_inputs(n, in);
    kiln_graph_free(g);
}

static void test_movement(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 6);
    const struct {
        kiln_shape s;
        int perm[4];
    } perms[] = {
        {KILN_SHAPE(7, 33), {1, 0}},
        {KILN_SHAPE(33, 7), {1, 0}},
        {KILN_SHAPE(300, 257), {1, 0}},
        {KILN_SHAPE(1, 33), {1, 0}},
        {KILN_SHAPE(0, 3), {1, 0}},
        {KILN_SHAPE(3, 5, 7), {0, 2, 1}},
        {KILN_SHAPE(3, 5, 7), {2, 0, 1}},
        {KILN_SHAPE(3, 5, 7), {1, 2, 0}},
        {KILN_SHAPE(3, 5, 7), {1, 0, 2}},
        {KILN_SHAPE(2, 3, 4, 5), {0, 2, 1, 3}},
        {KILN_SHAPE(2, 3, 4, 5), {3, 1, 2, 0}},
        {KILN_SHAPE(4, 1, 5), {2, 1, 0}},
        {KILN_SHAPE(4, 1, 5), {1, 0, 2}},
    };
    for (size_t p = 0; p < sizeof perms / sizeof *perms; p++)
        check_permute(&r, perms[p].s, perms[p].perm);
    const kiln_shape bc[][2] = {
        {KILN_SHAPE(33), KILN_SHAPE(7, 33)},
        {KILN_SHAPE(7, 1), KILN_SHAPE(7, 33)},
        {KILN_SCALAR, KILN_SHAPE(17)},
        {KILN_SHAPE(1), KILN_SHAPE(0)},
        {KILN_SHAPE(3, 1, 5), KILN_SHAPE(2, 3, 4, 5)},
        {KILN_SHAPE(257), KILN_SHAPE(300, 257)},
    };
    for (size_t b = 0; b < sizeof bc / sizeof *bc; b++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *n = kiln_broadcast_to(g, input(g, bc[b][0]), bc[b][1]);
        void **in = make_inputs(&r, n, -1, 1);
        check_node(n, in, 1);
        free_inputs(n, in);
        kiln_graph_free(g);
    }
    for (size_t s = 0; s < sizeof SIZES / sizeof *SIZES; s++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = input(g, KILN_SHAPE(SIZES[s]));
        kiln_node *n = kiln_reshape(g, x, KILN_SHAPE(1, SIZES[s]));
        void **in = make_inputs(&r, n, -1, 1);
        check_node(n, in, 1);
        free_inputs(n, in);
        kiln_node *sg = kiln_stop_gradient(g, x);
        in = make_inputs(&r, sg, -1, 1);
        check_node(sg, in, 1);
        free_inputs(sg, in);
        kiln_node *v = kiln_variable(g, "v", KILN_F32, KILN_SHAPE(SIZES[s]),
                                     kiln_init_zeros());
        kiln_node *a = kiln_assign(g, v, x);
        in = make_inputs(&r, a, -1, 1);
        check_node(a, in, 1);
        free_inputs(a, in);
        kiln_graph_free(g);
    }
}

/* Permutes that are not a batched transpose, slices and constant pads:
   strided copies (cpu/fast_strided.c), by rows or by transposed tiles. */
static void test_strided(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    const struct {
        kiln_shape s;
        int perm[5];
    } perms[] = {
        {KILN_SHAPE(4, 128, 4, 32), {0, 2, 1, 3}},
        {KILN_SHAPE(4, 4, 128, 32), {0, 2, 1, 3}},
        {KILN_SHAPE(3, 5, 7, 9), {0, 2, 3, 1}},
        {KILN_SHAPE(3, 5, 7, 9), {3, 2, 1, 0}},
        {KILN_SHAPE(2, 33, 3, 40), {1, 3, 0, 2}},
        {KILN_SHAPE(2, 3, 1, 4, 5), {4, 2, 0, 3, 1}},
        {KILN_SHAPE(2, 1, 3, 1, 5), {0, 3, 2, 1, 4}},
        {KILN_SHAPE(2, 0, 3, 4), {2, 1, 0, 3}},
        {KILN_SHAPE(1, 1, 1, 1), {3, 2, 1, 0}},
    };
    for (size_t p = 0; p < sizeof perms / sizeof *perms; p++)
        check_permute(&r, perms[p].s, perms[p].perm);
    const struct {
        kiln_shape s;
        int64_t a[4], b[4];
    } windows[] = {
        {KILN_SHAPE(32, 128, 384), {0, 0, 128}, {0, 0, 128}},
        {KILN_SHAPE(7, 9), {2, 1}, {3, 0}},
        {KILN_SHAPE(5, 6, 7), {0, 2, 0}, {1, 1, 0}},
        {KILN_SHAPE(3, 1, 4, 5), {1, 0, 0, 2}, {0, 0, 1, 1}},
        {KILN_SHAPE(64, 300), {0, 1}, {0, 0}},
        {KILN_SHAPE(2, 0, 3), {0, 0, 1}, {1, 0, 0}},
    };
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
        kiln_shape s = windows[w].s;
        int64_t start[4], stop[4];
        for (int d = 0; d < s.ndim; d++) {
            start[d] = windows[w].a[d];
            stop[d] = s.d[d] - windows[w].b[d];
        }
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = input(g, s);
        kiln_node *sl = kiln_slice(g, x, start, stop);
        void **in = make_inputs(&r, sl, -1, 1);
        check_node(sl, in, 1);
        free_inputs(sl, in);
        kiln_node *pd = kiln_pad(g, x, windows[w].a, windows[w].b, 0.5f);
        in = make_inputs(&r, pd, -1, 1);
        check_node(pd, in, 1);
        free_inputs(pd, in);
        kiln_node *xi = kiln_input(g, "i", KILN_I32, s);
        kiln_node *pi = kiln_pad(g, xi, windows[w].a, windows[w].b, -3.0f);
        in = make_inputs(&r, pi, -1, 1);
        check_node(pi, in, 1);
        free_inputs(pi, in);
        kiln_graph_free(g);
    }
}

/* ------------------------------------------------------------ matmul */

static void test_matmul(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    const struct {
        kiln_shape a, b;
        int ta, tb;
    } cases[] = {
        {KILN_SHAPE(7, 33), KILN_SHAPE(33, 17), 0, 0},
        {KILN_SHAPE(33, 7), KILN_SHAPE(33, 17), 1, 0},
        {KILN_SHAPE(7, 33), KILN_SHAPE(17, 33), 0, 1},
        {KILN_SHAPE(33, 7), KILN_SHAPE(17, 33), 1, 1},
        {KILN_SHAPE(1, 1), KILN_SHAPE(1, 1), 0, 0},
        {KILN_SHAPE(0, 5), KILN_SHAPE(5, 3), 0, 0},
        {KILN_SHAPE(4, 0), KILN_SHAPE(0, 3), 0, 0},
        {KILN_SHAPE(3, 7, 33), KILN_SHAPE(33, 17), 0, 0}, /* folded batch */
        {KILN_SHAPE(3, 7, 33), KILN_SHAPE(17, 33), 0, 1},
        {KILN_SHAPE(3, 33, 7), KILN_SHAPE(33, 17), 1, 0},
        {KILN_SHAPE(5, 7, 33), KILN_SHAPE(5, 33, 17), 0, 0}, /* batched */
        {KILN_SHAPE(2, 1, 7, 9), KILN_SHAPE(1, 3, 9, 4), 0, 0},
        {KILN_SHAPE(7, 33), KILN_SHAPE(4, 33, 17), 0, 0},
        {KILN_SHAPE(64, 128, 100), KILN_SHAPE(64, 100, 30), 0, 0},
        {KILN_SHAPE(0, 7, 33), KILN_SHAPE(33, 17), 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *n =
            kiln_matmul(g, input(g, cases[c].a), input(g, cases[c].b),
                        cases[c].ta, cases[c].tb);
        void **in = make_inputs(&r, n, -1, 1);
        /* the same products, blocked differently by BLAS */
        check_node_tol(n, in, 0, 1e-5, 1e-5, 0);
        free_inputs(n, in);
        kiln_graph_free(g);
    }
}

/* matmul_acc (built by the gemm_acc pass): c + alpha op(a) op(b), the fast
   kernel copying c into its output or, in place, accumulating into c;
   vectors (GEMV forms), thin and empty products, each transpose. */
static void test_matmul_acc(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 8);
    const int64_t dims[][3] = {{7, 17, 33}, {1, 17, 33},  {7, 1, 33},
                               {1, 1, 33},  {7, 17, 1},   {7, 17, 0},
                               {0, 17, 5},  {65, 70, 300}};
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            int64_t m = dims[d][0], n = dims[d][1], k = dims[d][2];
            kiln_graph *g = kiln_graph_new();
            kiln_node *in[4] = {
                input(g, KILN_SHAPE(m, n)),
                input(g, ta ? KILN_SHAPE(k, m) : KILN_SHAPE(m, k)),
                input(g, tb ? KILN_SHAPE(n, k) : KILN_SHAPE(k, n)),
                input(g, KILN_SCALAR)};
            kiln_node *x = kiln_node_make(g, KILN_OP_MATMUL_ACC, KILN_F32,
                                          KILN_SHAPE(m, n), in, 4);
            x->at.trans_a = ta;
            x->at.trans_b = tb;
            void **v = make_inputs(&r, x, -1, 1);
            *(float *)v[3] = -0.37f;
            check_node_tol(x, v, 0, 1e-5, 1e-5, 0);
            check_node_tol(x, v, 0, 1e-5, 1e-5, 1);
            free_inputs(x, v);
            kiln_graph_free(g);
        }
}

/* The reference switch and denormal option read back. */
static void test_switches(void **state)
{
    (void)state;
    assert_int_equal(kiln_set_reference_kernels(1), 1);
    assert_int_equal(kiln_set_reference_kernels(-1), 1);
    assert_int_equal(kiln_set_reference_kernels(0), 0);
    assert_int_equal(kiln_set_flush_denormals(-1), 1);
    assert_int_equal(kiln_set_flush_denormals(0), 0);
    assert_int_equal(kiln_set_flush_denormals(1), 1);
    /* flushing: a denormal product comes out zero, IEEE mode keeps it */
    kiln_graph *g = kiln_graph_new();
    kiln_node *n =
        kiln_mul(g, input(g, KILN_SHAPE(3)), input(g, KILN_SHAPE(3)));
    float a[3] = {1e-20f, 1e-20f, 2.0f}, b[3] = {1e-20f, 1e-19f, 3.0f}, o[3];
    void *in[2] = {a, b};
    kiln_cpu_exec(n, o, in, NULL, 0);
    assert_true(o[0] == 0.0f && o[1] == 0.0f && o[2] == 6.0f);
    kiln_set_flush_denormals(0);
    kiln_cpu_exec(n, o, in, NULL, 0);
    assert_true(o[0] > 0.0f && o[1] > 0.0f);
    kiln_set_flush_denormals(1);
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ softmax CE */

/* The fused loss and its gradient kernel against their references: row
   lengths not multiples of the vector width, empty and single rows, and
   enough rows for the pool.  Labels outside [0, C) are refused before
   either runs (tests/test_harden_numerics.c checks the messages). */
static void test_softmax_ce(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    const int64_t shapes[][2] = {{0, 10},   {1, 1},     {1, 10},   {7, 17},
                                 {128, 10}, {33, 1003}, {5000, 7}, {3, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = input(g, KILN_SHAPE(shapes[s][0], shapes[s][1]));
        kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(shapes[s][0]));
        kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SCALAR);
        kiln_node *loss = kiln_softmax_cross_entropy(g, x, y);
        assert_int_equal(loss->op, KILN_OP_SOFTMAX_CE);
        kiln_node *gin[3] = {x, y, a};
        kiln_node *grad = kiln_node_make(g, KILN_OP_SOFTMAX_CE_GRAD, KILN_F32,
                                         x->shape, gin, 3);
        void **in = make_inputs(&r, grad, -20, 20);
        int32_t *lab = in[1];
        for (int64_t i = 0; i < shapes[s][0]; i++)
            lab[i] %= (int32_t)shapes[s][1];
        check_node_tol(loss, in, 0, 1e-5, 1e-6, 0);
        check_node_tol(grad, in, 0, 1e-5, 1e-6, 0);
        free_inputs(grad, in);
        kiln_graph_free(g);
    }
}

/* -sum(log_softmax(x) * one_hot(y)) / N: the decomposition the fused op
   replaced. */
static kiln_node *softmax_ce_composite(kiln_graph *g, kiln_node *x,
                                       kiln_node *y)
{
    kiln_node *oh = kiln_one_hot(g, y, (int)kiln_node_shape(x).d[1]);
    kiln_node *picked = kiln_sum(g, kiln_mul(g, kiln_log_softmax(g, x, 1), oh),
                                 KILN_ALL_AXES, 0);
    return kiln_scale(g, picked, -1.0f / (float)kiln_node_shape(x).d[0]);
}

/* Loss and gradient of the fused op equal the decomposition's, compiled
   and run with the fast kernels, for the mean and the sum. */
static void test_softmax_ce_matches_composite(void **state)
{
    (void)state;
    enum { N = 37, C = 13 };
    kiln_rng r;
    kiln_rng_seed(&r, 12);
    kiln_tensor *xt = kiln_tensor_new(KILN_F32, KILN_SHAPE(N, C));
    kiln_tensor *yt = kiln_tensor_new(KILN_I32, KILN_SHAPE(N));
    for (int i = 0; i < N * C; i++)
        kiln_tensor_f32(xt)[i] = (float)(8 * kiln_rng_uniform(&r) - 4);
    for (int i = 0; i < N; i++)
        kiln_tensor_i32(yt)[i] = (int32_t)(kiln_rng_u32(&r) % C);
    kiln_session *ss = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(N, C));
    kiln_node *y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(N));
    kiln_node *ref = softmax_ce_composite(g, x, y);
    kiln_node *outs[6] = {
        kiln_softmax_cross_entropy(g, x, y),
        kiln_softmax_cross_entropy_reduce(g, x, y, KILN_REDUCE_SUM), ref,
        kiln_scale(g, ref, (float)N)};
    outs[4] = kiln_grad(g, outs[0], x);
    outs[5] = kiln_grad(g, ref, x);
    kiln_node *ins[2] = {x, y};
    kiln_function *f = kiln_compile(ss, g, outs, 6, ins, 2);
    assert_non_null(f);
    kiln_tensor *in[2] = {xt, yt}, *out[6];
    for (int i = 0; i < 6; i++)
        out[i] = kiln_function_new_output(f, i);
    assert_int_equal(kiln_run(f, in, out), KILN_OK);
    for (int i = 0; i < 2; i++) {
        float got = kiln_tensor_f32(out[i])[0],
              want = kiln_tensor_f32(out[i + 2])[0];
        assert_true(close_enough(got, want, 1e-6, 0));
    }
    for (int i = 0; i < N * C; i++)
        assert_true(close_enough(kiln_tensor_f32(out[4])[i],
                                 kiln_tensor_f32(out[5])[i], 1e-5, 1e-7));
    for (int i = 0; i < 6; i++)
        kiln_tensor_free(out[i]);
    kiln_tensor_free(xt);
    kiln_tensor_free(yt);
    kiln_graph_free(g);
    kiln_session_free(ss);
}

/* The gradient op's own gradient (primitives): gradcheck of sum(dL/dx * R)
   for L = softmax_ce(x) * s, with respect to x and to s, which reaches the
   gradient op through its adjoint input. */
static void test_softmax_ce_second_order(void **state)
{
    (void)state;
    enum { N = 5, C = 7 };
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    float xv[N * C], rv[N * C];
    int32_t lab[N];
    for (int i = 0; i < N * C; i++) {
        xv[i] = (float)(6 * kiln_rng_uniform(&r) - 3);
        rv[i] = (float)kiln_rng_normal(&r);
    }
    for (int i = 0; i < N; i++)
        lab[i] = (int32_t)(kiln_rng_u32(&r) % C);
    kiln_session *ss = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, KILN_SHAPE(N, C), kiln_init_values(xv));
    kiln_node *sv =
        kiln_variable(g, "s", KILN_F32, KILN_SCALAR, kiln_init_value(1.7));
    kiln_node *y = kiln_constant(g, KILN_I32, KILN_SHAPE(N), lab);
    kiln_node *loss = kiln_mul(g, kiln_softmax_cross_entropy(g, x, y), sv);
    kiln_node *dx = kiln_grad(g, loss, x);
    kiln_node *l2 = kiln_sum(
        g, kiln_mul(g, dx, kiln_constant(g, KILN_F32, KILN_SHAPE(N, C), rv)),
        KILN_ALL_AXES, 0);
    kiln_node *wrt[2] = {x, sv};
    kiln_gradcheck_result res;
    kiln_status st =
        kiln_gradcheck(ss, g, l2, wrt, 2, NULL, NULL, 0, 1e-3, 1e-2, &res);
    if (st != KILN_OK)
        fail_msg("%s (abs err %.3g)", kiln_session_error(ss), res.max_abs_err);
    kiln_graph_free(g);
    kiln_session_free(ss);
}

/* A row vector times a large matrix is split over the threads (column
   slices of one-thread GEMVs): check every column against double sums, at
   widths that leave a partial last slice, with and without a transposed
   operand (which takes the unsplit path). */
static void test_gemv_split(void **state)
{
    (void)state;
    static const int64_t widths[] = {600, 1000, 129};
    for (int t = 1; t <= 2; t++) {
        kiln_set_num_threads(t);
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++) {
            int64_t k = 1031, n = widths[w];
            kiln_rng rng;
            kiln_rng_seed(&rng, (uint64_t)(7 + w));
            float *a = malloc(sizeof(float) * (size_t)k);
            float *b = malloc(sizeof(float) * (size_t)(k * n));
            float *out = malloc(sizeof(float) * (size_t)n);
            for (int64_t i = 0; i < k; i++)
                a[i] = (float)(2 * kiln_rng_uniform(&rng) - 1);
            for (int64_t i = 0; i < k * n; i++)
                b[i] = (float)(2 * kiln_rng_uniform(&rng) - 1);
            kiln_cpu_gemm(0, 0, 1, n, k, a, b, out);
            for (int64_t j = 0; j < n; j++) {
                double want = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    want += (double)a[p] * b[p * n + j];
                    mag += fabs((double)a[p] * b[p * n + j]);
                }
                assert_true(fabs(out[j] - want) <= 1e-5 * mag);
            }
            free(a);
            free(b);
            free(out);
        }
    }
    kiln_set_num_threads(1);
}

/* Thin products with enough work are split into row blocks over the
   threads: every transpose combination, plain and accumulating, at row
   counts that leave a partial block, against double sums. */
static void test_gemm_row_split(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        {200, 32, 784}, {784, 32, 128}, {129, 10, 1000}};
    for (int t = 1; t <= 2; t++) {
        kiln_set_num_threads(t);
        for (size_t c = 0; c < 3 * 4 * 2; c++) {
            int64_t m = shapes[c / 8][0], n = shapes[c / 8][1],
                    k = shapes[c / 8][2];
            int ta = (int)(c / 2) % 2, tb = (int)(c / 4) % 2, acc = (int)c % 2;
            kiln_rng rng;
            kiln_rng_seed(&rng, (uint64_t)c);
            float *a = malloc(sizeof(float) * (size_t)(m * k));
            float *b = malloc(sizeof(float) * (size_t)(k * n));
            float *out = malloc(sizeof(float) * (size_t)(m * n));
            for (int64_t i = 0; i < m * k; i++)
                a[i] = (float)(2 * kiln_rng_uniform(&rng) - 1);
            for (int64_t i = 0; i < k * n; i++)
                b[i] = (float)(2 * kiln_rng_uniform(&rng) - 1);
            for (int64_t i = 0; i < m * n; i++)
                out[i] = acc ? (float)i / (float)(m * n) : 0;
            if (acc)
                kiln_cpu_gemm_acc(ta, tb, m, n, k, -0.5f, a, b, out);
            else
                kiln_cpu_gemm(ta, tb, m, n, k, a, b, out);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double want = 0, mag = 0;
                    for (int64_t p = 0; p < k; p++) {
                        double av = ta ? a[p * m + i] : a[i * k + p];
                        double bv = tb ? b[j * k + p] : b[p * n + j];
                        want += av * bv;
                        mag += fabs(av * bv);
                    }
                    double base =
                        acc ? (double)(i * n + j) / (double)(m * n) : 0;
                    want = acc ? base - 0.5 * want : want;
                    assert_true(fabs(out[i * n + j] - want) <=
                                1e-5 * (mag + 1));
                }
            free(a);
            free(b);
            free(out);
        }
    }
    kiln_set_num_threads(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_function_sweep),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_reduce_max_nan),
        cmocka_unit_test(test_movement),
        cmocka_unit_test(test_strided),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_acc),
        cmocka_unit_test(test_gemv_split),
        cmocka_unit_test(test_gemm_row_split),
        cmocka_unit_test(test_switches),
        cmocka_unit_test(test_softmax_ce),
        cmocka_unit_test(test_softmax_ce_matches_composite),
        cmocka_unit_test(test_softmax_ce_second_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
