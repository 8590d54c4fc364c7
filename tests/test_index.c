/* Indexing: index_select, index_add, gather, scatter_add and the embedding
   lookup against PyTorch (tests/ref/index, written by
   tests/ref/make_index_refs.py): outputs and gradients, compiled with the
   fast and the reference kernels and run dynamically; finite-difference
   gradient checks of first and second order; the fast kernels against the
   reference on random shapes and thread counts; indices out of range as
   run-time errors naming the index and its position; build errors; a
   symbolic batch. */
#include "index_ref.h"

#define RTOL 1e-5
#define ATOL 1e-6

static kiln_node *build_op(kiln_graph *g, const char *op, int axis,
                           kiln_node *x, kiln_node *idx, kiln_node *src)
{
    if (!strcmp(op, "index_select"))
        return kiln_index_select(g, x, axis, idx);
    if (!strcmp(op, "index_add"))
        return kiln_index_add(g, x, axis, idx, src);
    if (!strcmp(op, "gather"))
        return kiln_gather(g, x, axis, idx);
    if (!strcmp(op, "scatter_add"))
        return kiln_scatter_add(g, x, axis, idx, src);
    return kiln_embedding(g, x, idx);
}

static const char *CASES[] = {
    "index_select_rows",   "index_select_axis1", "index_select_last",
    "index_add_rows",      "index_add_axis1",    "gather_axis1",
    "gather_axis0",        "gather_smaller",     "scatter_add_axis1",
    "scatter_add_smaller", "embedding",
};
#define N_CASES (int)(sizeof CASES / sizeof *CASES)

typedef struct built {
    kiln_node *y, *x, *src, *loss;
} built;

static built build_case(kiln_graph *g, iref *r)
{
    built b = {0};
    iref_tensor *src = iref_get(r, "src");
    b.x = iref_node(g, iref_get(r, "x"));
    b.src = src ? iref_node(g, src) : NULL;
    b.y = build_op(g, r->op, (int)r->p[0], b.x,
                   iref_node(g, iref_get(r, "idx")), b.src);
    b.loss = iref_weighted_sum(g, b.y, iref_get(r, "gy"));
    th_assert_graph_ok(g);
    return b;
}

/* y, dx (and dsrc) compiled in a session with the reference (1) or the
   fast kernels (-1) at the given thread count. */
static void check_compiled(const char *name, int reference, int threads)
{
    iref r;
    iref_load(name, &r);
    kiln_session_options o = {.reference_kernels = reference,
                              .threads = threads};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    built b = build_case(g, &r);
    kiln_node *outs[3] = {b.y, kiln_grad(g, b.loss, b.x),
                          b.src ? kiln_grad(g, b.loss, b.src) : NULL};
    const char *names[3] = {"y", "dx", "dsrc"};
    int n_out = b.src ? 3 : 2;
    kiln_tensor *got[3] = {0};
    th_run(s, g, outs, n_out, NULL, NULL, 0, got);
    for (int i = 0; i < n_out; i++) {
        iref_tensor *want = iref_get(&r, names[i]);
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
    iref_free(&r);
}

static void test_pytorch_compiled(void **state)
{
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        check_compiled(CASES[i], -1, 2);
        check_compiled(CASES[i], 1, 1);
    }
}

static void test_pytorch_dynamic(void **state)
{
    (void)state;
    for (int c = 0; c < N_CASES; c++) {
        iref r;
        iref_load(CASES[c], &r);
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        built b = build_case(g, &r);
        assert_int_equal(kiln_backprop(s, g, b.loss), KILN_OK);
        kiln_node *nodes[3] = {b.y, b.x, b.src};
        const char *names[3] = {"y", "dx", "dsrc"};
        for (int i = 0; i < (b.src ? 3 : 2); i++) {
            iref_tensor *want = iref_get(&r, names[i]);
            const float *got = i ? kiln_node_grad_f32(s, nodes[i])
                                 : kiln_node_value_f32(s, nodes[i]);
            assert_non_null(got);
            th_assert_close(CASES[c], got, want->v,
                            kiln_shape_numel(want->shape), RTOL, ATOL);
        }
        kiln_graph_free(g);
        kiln_session_free(s);
        iref_free(&r);
    }
}

/* ------------------------------------------------------------ gradcheck */

/* Indices of shape s drawn uniformly from [0, size) (malloc'd). */
static int32_t *random_indices(kiln_rng *rng, kiln_shape s, int64_t size)
{
    int64_t n = kiln_shape_numel(s);
    int32_t *iv = malloc((size_t)n * sizeof *iv + 1);
    assert_non_null(iv);
    for (int64_t i = 0; i < n; i++)
        iv[i] = (int32_t)(kiln_rng_uniform(rng) * (double)size) % (int)size;
    return iv;
}

/* sum(sin(op(x, idx, src)) * y) with random indices in range (repeated
   ones included); order 2 differentiates the sum of squares of the first
   gradients, which runs through each op's partner (grad of grad). */
static void gradcheck_op(const char *op, int axis, kiln_shape xs, kiln_shape is,
                         kiln_shape ss, int order)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_rng rng;
    kiln_rng_seed(&rng, 7);
    int32_t *iv = random_indices(&rng, is, xs.d[axis]);
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, xs, kiln_init_uniform(-1, 1));
    kiln_node *src = ss.ndim ? kiln_variable(g, "src", KILN_F32, ss,
                                             kiln_init_uniform(-1, 1))
                             : NULL;
    kiln_node *idx = kiln_constant(g, KILN_I32, is, iv);
    kiln_node *y = build_op(g, op, axis, x, idx, src);
    kiln_node *l = kiln_sum(g, kiln_mul(g, kiln_sin(g, y), kiln_tanh(g, y)),
                            KILN_ALL_AXES, 0);
    kiln_node *wrt[2] = {x, src};
    int n_wrt = src ? 2 : 1;
    if (order == 2) {
        kiln_node *q = kiln_scalar(g, 0.0f);
        for (int i = 0; i < n_wrt; i++) {
            kiln_node *d = kiln_grad(g, l, wrt[i]);
            q = kiln_add(g, q,
                         kiln_sum(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0));
        }
        l = q;
    }
    th_assert_graph_ok(g);
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, l, wrt, n_wrt, NULL, NULL, 0, 1e-3, 1e-2, &res) !=
        KILN_OK)
        fail_msg("%s order %d: %s (max abs err %g)", op, order,
                 kiln_session_error(s), res.max_abs_err);
    free(iv);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_gradcheck(void **state)
{
    (void)state;
    for (int order = 1; order <= 2; order++) {
        gradcheck_op("index_select", 1, KILN_SHAPE(2, 4, 3), KILN_SHAPE(5),
                     KILN_SCALAR, order);
        gradcheck_op("index_add", 0, KILN_SHAPE(4, 3), KILN_SHAPE(6),
                     KILN_SHAPE(6, 3), order);
        gradcheck_op("gather", 1, KILN_SHAPE(3, 4), KILN_SHAPE(2, 6),
                     KILN_SCALAR, order);
        gradcheck_op("scatter_add", 0, KILN_SHAPE(3, 4), KILN_SHAPE(5, 3),
                     KILN_SHAPE(6, 4), order);
        gradcheck_op("embedding", 0, KILN_SHAPE(6, 3), KILN_SHAPE(2, 4),
                     KILN_SCALAR, order);
    }
}

/* ------------------------------------------------------------ fast vs ref */

/* op on random shapes (odd sizes, size-1 dims, large enough to thread)
   run with the reference kernels, and with the fast ones on 1 and 3
   threads: the same bits, as both add in index order. */
static void fast_vs_ref(const char *op, int axis, kiln_shape xs, kiln_shape is,
                        kiln_shape ss, uint64_t seed)
{
    kiln_rng rng_state, *rng = &rng_state;
    kiln_rng_seed(rng, seed);
    int32_t *iv = random_indices(rng, is, xs.d[axis]);
    kiln_tensor *xt = th_rand(rng, xs, -1, 1);
    kiln_tensor *st = ss.ndim ? th_rand(rng, ss, -1, 1) : NULL;
    kiln_tensor *got[3];
    for (int k = 0; k < 3; k++) {
        kiln_session_options o = {.reference_kernels = k ? -1 : 1,
                                  .threads = k == 2 ? 3 : 1};
        kiln_session *s = kiln_session_new(&o);
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_constant(g, KILN_F32, xs, kiln_tensor_f32(xt));
        kiln_node *src =
            st ? kiln_constant(g, KILN_F32, ss, kiln_tensor_f32(st)) : NULL;
        kiln_node *y =
            build_op(g, op, axis, x, kiln_constant(g, KILN_I32, is, iv), src);
        got[k] = th_eval(s, g, y);
        kiln_graph_free(g);
        kiln_session_free(s);
    }
    int64_t len = kiln_tensor_numel(got[0]);
    for (int k = 1; k < 3; k++)
        if (memcmp(kiln_tensor_f32(got[0]), kiln_tensor_f32(got[k]),
                   (size_t)len * 4))
            fail_msg("%s: fast kernel on %d threads differs from reference", op,
                     k == 2 ? 3 : 1);
    for (int k = 0; k < 3; k++)
        kiln_tensor_free(got[k]);
    kiln_tensor_free(xt);
    kiln_tensor_free(st);
    free(iv);
}

static void test_fast_matches_reference(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        fast_vs_ref("index_select", 0, KILN_SHAPE(1000, 67), KILN_SHAPE(1531),
                    KILN_SCALAR, seed);
        fast_vs_ref("index_select", 1, KILN_SHAPE(3, 17, 1), KILN_SHAPE(9),
                    KILN_SCALAR, seed);
        fast_vs_ref("index_add", 0, KILN_SHAPE(301, 129), KILN_SHAPE(2001),
                    KILN_SHAPE(2001, 129), seed);
        fast_vs_ref("index_add", 1, KILN_SHAPE(37, 5, 1), KILN_SHAPE(11),
                    KILN_SHAPE(37, 11, 1), seed);
        fast_vs_ref("gather", 1, KILN_SHAPE(513, 71), KILN_SHAPE(513, 301),
                    KILN_SCALAR, seed);
        fast_vs_ref("gather", 0, KILN_SHAPE(7, 1, 5), KILN_SHAPE(3, 1, 4),
                    KILN_SCALAR, seed);
        fast_vs_ref("scatter_add", 0, KILN_SHAPE(97, 301), KILN_SHAPE(513, 300),
                    KILN_SHAPE(513, 301), seed);
        fast_vs_ref("scatter_add", 2, KILN_SHAPE(3, 1, 5), KILN_SHAPE(3, 1, 7),
                    KILN_SHAPE(3, 2, 7), seed);
        fast_vs_ref("embedding", 0, KILN_SHAPE(50, 33), KILN_SHAPE(7, 1, 13),
                    KILN_SCALAR, seed);
    }
}

/* ------------------------------------------------------------ errors */

/* op with these indices fails when run, compiled and dynamically, with a
   message containing want; nothing is read or written out of bounds (the
   sanitizer build checks that). */
static void expect_run_error(const char *op, int axis, kiln_shape xs,
                             kiln_shape is, const int32_t *iv, kiln_shape ss,
                             const char *want)
{
    for (int dynamic = 0; dynamic <= 1; dynamic++) {
        kiln_session *s = kiln_session_new(NULL);
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_variable(g, "x", KILN_F32, xs, kiln_init_zeros());
        kiln_node *src =
            ss.ndim ? kiln_variable(g, "s", KILN_F32, ss, kiln_init_zeros())
                    : NULL;
        kiln_node *idx = kiln_input(g, "idx", KILN_I32, is);
        kiln_node *y = build_op(g, op, axis, x, idx, src);
        kiln_node *l = kiln_sum(g, y, KILN_ALL_AXES, 0);
        kiln_tensor *t = kiln_tensor_wrap(KILN_I32, is, (void *)iv);
        kiln_status st;
        if (dynamic) {
            assert_int_equal(kiln_feed(s, idx, t), KILN_OK);
            st = kiln_backprop(s, g, l);
        } else {
            kiln_node *outs[2] = {l, kiln_grad(g, l, x)};
            kiln_function *f = kiln_compile(s, g, outs, 2, &idx, 1);
            assert_non_null(f);
            kiln_tensor *o[2] = {kiln_function_new_output(f, 0),
                                 kiln_function_new_output(f, 1)};
            st = kiln_run(f, &t, o);
            kiln_tensor_free(o[0]);
            kiln_tensor_free(o[1]);
        }
        assert_int_equal(st, KILN_ERR_ARG);
        if (!strstr(kiln_session_error(s), want))
            fail_msg("%s: error '%s' lacks '%s'", op, kiln_session_error(s),
                     want);
        kiln_tensor_free(t);
        kiln_graph_free(g);
        kiln_session_free(s);
    }
}

static void test_out_of_range_is_a_run_error(void **state)
{
    (void)state;
    const int32_t high[3] = {0, 5, 1}, neg[3] = {2, 1, -1};
    expect_run_error("index_select", 0, KILN_SHAPE(5, 2), KILN_SHAPE(3), high,
                     KILN_SCALAR,
                     "index_select %2: index 5 at [1] of indices [3] is "
                     "outside [0, 5) (axis 0 of [5,2])");
    expect_run_error("embedding", 0, KILN_SHAPE(5, 2), KILN_SHAPE(1, 3), neg,
                     KILN_SCALAR, "index -1 at [0,2] of indices [1,3]");
    expect_run_error("index_add", 1, KILN_SHAPE(2, 5), KILN_SHAPE(3), neg,
                     KILN_SHAPE(2, 3), "index_add %3: index -1 at [2]");
    const int32_t g2[6] = {0, 1, 2, 3, 4, 0};
    expect_run_error("gather", 1, KILN_SHAPE(2, 4), KILN_SHAPE(2, 3), g2,
                     KILN_SCALAR, "gather %2: index 4 at [1,1]");
    expect_run_error("scatter_add", 1, KILN_SHAPE(2, 4), KILN_SHAPE(2, 3), g2,
                     KILN_SHAPE(2, 3), "scatter_add %3: index 4 at [1,1]");
}

static void test_build_errors(void **state)
{
    (void)state;
    struct {
        const char *op;
        int axis;
        kiln_shape xs, is, ss;
        kiln_dtype idt;
        const char *want;
    } cases[] = {
        {"index_select", 0, KILN_SHAPE(4, 2), KILN_SHAPE(3), KILN_SCALAR,
         KILN_F32, "kiln_index_select: indices have dtype f32, expected i32"},
        {"index_select", 2, KILN_SHAPE(4, 2), KILN_SHAPE(3), KILN_SCALAR,
         KILN_I32, "kiln_index_select: axis 2 out of range for 2 dims"},
        {"index_select", 0, KILN_SHAPE(4, 2), KILN_SHAPE(3, 1), KILN_SCALAR,
         KILN_I32, "kiln_index_select: indices [3,1] must have at most one"},
        {"index_add", 0, KILN_SHAPE(4, 2), KILN_SHAPE(3), KILN_SHAPE(3, 3),
         KILN_I32,
         "kiln_index_add: source [3,3] for [4,2] with indices [3] along axis "
         "0: want [3,2]"},
        {"gather", 1, KILN_SHAPE(4, 2), KILN_SHAPE(5, 2), KILN_SCALAR, KILN_I32,
         "kiln_gather: indices [5,2] for [4,2] along axis 1: want its rank"},
        {"scatter_add", 0, KILN_SHAPE(4, 2), KILN_SHAPE(3, 2), KILN_SHAPE(2, 2),
         KILN_I32, "kiln_scatter_add: indices [3,2] and source [2,2]"},
        {"embedding", 0, KILN_SHAPE(4, 2, 1), KILN_SHAPE(3), KILN_SCALAR,
         KILN_I32,
         "kiln_embedding: table [4,2,1] must be [num_embeddings, "
         "dim]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_F32, cases[i].xs);
        kiln_node *idx = kiln_input(g, "i", cases[i].idt, cases[i].is);
        kiln_node *src =
            cases[i].ss.ndim ? kiln_input(g, "s", KILN_F32, cases[i].ss) : NULL;
        build_op(g, cases[i].op, cases[i].axis, x, idx, src);
        th_expect_graph_error(g, cases[i].want);
        kiln_graph_free(g);
    }
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4, 2));
    kiln_index_add(g, x, 0, kiln_input(g, "i", KILN_I32, KILN_SHAPE(1)), NULL);
    th_expect_graph_error(g, "kiln_index_add: src is NULL");
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ symbolic */

/* An embedding of ids [B, 3] with B symbolic, and its gradient for the
   table: one compiled function at B = 2 and B = 5, each row by hand. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    float table[4 * 2] = {0, 1, 10, 11, 20, 21, 30, 31};
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *t = kiln_variable(g, "t", KILN_F32, KILN_SHAPE(4, 2),
                                 kiln_init_values(table));
    kiln_node *ids = kiln_input_sym(g, "ids", KILN_I32, KILN_SHAPE(2, 3), 1u);
    kiln_node *e = kiln_embedding(g, t, ids);
    assert_int_equal(kiln_node_shape(e).sym, 1u);
    kiln_node *outs[2] = {e, kiln_grad(g, kiln_sum(g, e, KILN_ALL_AXES, 0), t)};
    kiln_function *f = kiln_compile(s, g, outs, 2, &ids, 1);
    assert_non_null(f);
    for (int64_t b = 2; b <= 5; b += 3) {
        int32_t iv[15];
        for (int i = 0; i < 15; i++)
            iv[i] = (int32_t)((i * 7) % 4);
        kiln_tensor *in = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(b, 3), iv);
        kiln_tensor *o[2] = {kiln_tensor_new(KILN_F32, KILN_SHAPE(b, 3, 2)),
                             kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 2))};
        if (kiln_run(f, &in, o) != KILN_OK)
            fail_msg("B = %lld: %s", (long long)b, kiln_session_error(s));
        const float *v = kiln_tensor_f32(o[0]), *d = kiln_tensor_f32(o[1]);
        float count[4] = {0};
        for (int64_t i = 0; i < b * 3; i++) {
            assert_float_equal(v[2 * i], table[2 * iv[i]], 0);
            assert_float_equal(v[2 * i + 1], table[2 * iv[i] + 1], 0);
            count[iv[i]] += 1;
        }
        for (int r = 0; r < 4; r++)
            assert_float_equal(d[2 * r], count[r], 0);
        kiln_tensor_free(in);
        kiln_tensor_free(o[0]);
        kiln_tensor_free(o[1]);
    }
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_compiled),
        cmocka_unit_test(test_pytorch_dynamic),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_out_of_range_is_a_run_error),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
