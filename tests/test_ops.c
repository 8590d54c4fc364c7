/* Forward values of every op against PyTorch reference values.

   tests/ref/make_op_refs.py wrote one file per case in tests/ref/ops/: the
   inputs (float32 or int32) and the output torch computed in float64.  Each
   case below names its file and builds the op from input nodes; the test
   runs it both compiled (kiln_compile/kiln_run) and dynamically
   (kiln_feed/kiln_forward) and compares with the reference. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <inttypes.h>

#include "test_refs.h"

#define RTOL 1e-5
#define ATOL 1e-6
#define MAX_REF 8

/* ------------------------------------------------------------ ref files */

typedef struct ref_case {
    int n_in;
    ref_tensor in[MAX_REF];
    ref_tensor out;
} ref_case;

static void ref_load(const char *name, ref_case *rc)
{
    char path[512], kind[8];
    snprintf(path, sizeof path, "%s/ops/%s.txt", KILN_TEST_REF_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run tests/ref/make_op_refs.py)", path);
    memset(rc, 0, sizeof *rc);
    for (;;) {
        ref_tensor t;
        if (!ref_read_tensor(f, path, &t, kind))
            fail_msg("%s: bad tensor header", path);
        if (strcmp(kind, "out") == 0) {
            rc->out = t;
            break;
        }
        assert_true(rc->n_in < MAX_REF);
        rc->in[rc->n_in++] = t;
    }
    fclose(f);
}

static void ref_free(ref_case *rc)
{
    for (int i = 0; i < rc->n_in; i++)
        free(rc->in[i].v);
    free(rc->out.v);
}

static void check_output(const char *what, const ref_case *rc,
                         const kiln_tensor *got)
{
    assert_int_equal(kiln_tensor_dtype(got), rc->out.dt);
    th_assert_shape(kiln_tensor_shape(got), rc->out.shape);
    int64_t n = kiln_tensor_numel(got);
    if (rc->out.dt == KILN_I32) {
        for (int64_t i = 0; i < n; i++)
            if (kiln_tensor_i32(got)[i] != (int32_t)rc->out.v[i])
                fail_msg("%s: element %lld: got %d, want %d", what,
                         (long long)i, kiln_tensor_i32(got)[i],
                         (int)rc->out.v[i]);
        return;
    }
    th_assert_close(what, kiln_tensor_f32(got), rc->out.v, n, RTOL, ATOL);
}

/* ------------------------------------------------------------ cases */

/* A builder gets the input nodes (in file order) and the case's integer
   parameters. */
typedef kiln_node *(*build_fn)(kiln_graph *g, kiln_node **x, const int *p);

typedef struct op_case {
    const char *name; /* the reference file tests/ref/ops/<name>.txt */
    build_fn build;
    int p[8];
} op_case;

#define BUILD(fname, expr)                                                     \
    static kiln_node *fname(kiln_graph *g, kiln_node **x, const int *p)        \
    {                                                                          \
        (void)p;                                                               \
        return (expr);                                                         \
    }

BUILD(b_gelu, kiln_gelu(g, x[0]))
BUILD(b_gelu_erf, kiln_gelu_erf(g, x[0]))
BUILD(b_scale, kiln_scale(g, x[0], -1.5f))
BUILD(b_select, kiln_select(g, x[0], x[1], x[2]))
/* p: axis mask, keepdims */
BUILD(b_sum, kiln_sum(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_mean, kiln_mean(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_rmax, kiln_reduce_max(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_argmax, kiln_argmax(g, x[0], p[0]))
/* p: the target shape (ndim, d...) */
BUILD(b_reshape,
      kiln_reshape(g, x[0], ((kiln_shape){p[0], {p[1], p[2], p[3]}, 0})))
BUILD(b_permute, kiln_permute(g, x[0], p))
BUILD(b_transpose, kiln_transpose(g, x[0]))
BUILD(b_broadcast_to,
      kiln_broadcast_to(g, x[0], ((kiln_shape){p[0], {p[1], p[2], p[3]}, 0})))
/* p: ndim, d0..d2, new-axes mask */
BUILD(b_broadcast,
      kiln_broadcast(g, x[0], ((kiln_shape){p[0], {p[1], p[2], p[3]}, 0}),
                     (unsigned)p[4]))
BUILD(b_concat2, kiln_concat(g, x, 2, p[0]))
BUILD(b_concat3, kiln_concat(g, x, 3, p[0]))
/* p: ta, tb / n */
BUILD(b_matmul, kiln_matmul(g, x[0], x[1], p[0], p[1]))
BUILD(b_dot, kiln_dot(g, x[0], x[1], p[0]))
BUILD(b_one_hot, kiln_one_hot(g, x[0], p[0]))
BUILD(b_cast, kiln_cast(g, x[0], (kiln_dtype)p[0]))
BUILD(b_stop_gradient, kiln_stop_gradient(g, x[0]))
BUILD(b_softmax, kiln_softmax(g, x[0], p[0]))
BUILD(b_log_softmax, kiln_log_softmax(g, x[0], p[0]))
BUILD(b_affine, kiln_affine(g, x[0], x[1], x[2]))
BUILD(b_cross_entropy, kiln_cross_entropy(g, x[0], x[1], x[2], -5.0f))
BUILD(b_softmax_ce, kiln_softmax_cross_entropy(g, x[0], x[1]))
/* the fused loss's gradient op, built by autodiff */
BUILD(b_softmax_ce_grad,
      kiln_grad(g, kiln_softmax_cross_entropy(g, x[0], x[1]), x[0]))
BUILD(b_bce, kiln_binary_cross_entropy(g, x[0], x[1]))

/* The elementwise ops of the table: a reference file named after one
   (log1p.txt, or add_bcast.txt: the name and "_" and any suffix) builds it
   on the file's inputs, with no row here. */
typedef kiln_node *(*unary_fn)(kiln_graph *, kiln_node *);
typedef kiln_node *(*binary_fn)(kiln_graph *, kiln_node *, kiln_node *);
static const struct {
    const char *name;
    unary_fn unary;
    binary_fn binary;
} TABLE[] = {
#define KILN_UNARY(OP, name, ...) {#name, kiln_##name, NULL},
#define KILN_BINARY(OP, name, ...) {#name, NULL, kiln_##name},
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
};
enum {
#define KILN_UNARY(OP, ...) TABLE_##OP,
#define KILN_BINARY(OP, ...) TABLE_##OP,
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
    N_TABLE
};

/* p: the op's index in TABLE */
static kiln_node *b_table(kiln_graph *g, kiln_node **x, const int *p)
{
    return TABLE[p[0]].unary ? TABLE[p[0]].unary(g, x[0])
                             : TABLE[p[0]].binary(g, x[0], x[1]);
}

/* p: ndim, start[ndim], stop[ndim] (at most 3 dims) */
static kiln_node *b_slice(kiln_graph *g, kiln_node **x, const int *p)
{
    int64_t start[3], stop[3];
    for (int i = 0; i < p[0]; i++) {
        start[i] = p[1 + i];
        stop[i] = p[1 + p[0] + i];
    }
    return kiln_slice(g, x[0], start, stop);
}

/* p: ndim, lo[ndim], hi[ndim]; value in tenths in p[7] */
static kiln_node *b_pad(kiln_graph *g, kiln_node **x, const int *p)
{
    int64_t lo[3], hi[3];
    for (int i = 0; i < p[0]; i++) {
        lo[i] = p[1 + i];
        hi[i] = p[1 + p[0] + i];
    }
    return kiln_pad(g, x[0], lo, hi, (float)p[7] / 10.0f);
}

#define RED(op, m, mask)                                                       \
    {#op "_" m "_k0", b_##op, {mask, 0}},                                      \
    {                                                                          \
#op "_" m "_k1", b_##op,                                               \
        {                                                                      \
            mask, 1                                                            \
        }                                                                      \
    }
#define RED5(op)                                                               \
    RED(op, "a0", 1), RED(op, "a1", 2), RED(op, "a2", 4), RED(op, "a02", 5),   \
        RED(op, "all", KILN_ALL_AXES)
#define MM(ta, tb)                                                             \
    {"matmul_" #ta #tb, b_matmul, {ta, tb}},                                   \
        {"matmul_batch_" #ta #tb, b_matmul, {ta, tb}},                         \
    {                                                                          \
        "matmul_bbcast_" #ta #tb, b_matmul,                                    \
        {                                                                      \
            ta, tb                                                             \
        }                                                                      \
    }
#define SM(op, sfx)                                                            \
    {#op sfx "_0", b_##op, {0}}, {#op sfx "_1", b_##op, {1}},                  \
    {                                                                          \
#op sfx "_m1", b_##op,                                                 \
        {                                                                      \
            -1                                                                 \
        }                                                                      \
    }

static const op_case cases[] = {
    /* elementwise ops of the table: found by file name (table_case) */
    {"gelu", b_gelu, {0}},
    {"gelu_erf", b_gelu_erf, {0}},
    {"scale", b_scale, {0}},
    {"unary_empty", b_table, {TABLE_EXP}},
    {"unary_scalar", b_table, {TABLE_TANH}},
    {"select", b_select, {0}},
    {"select_full", b_select, {0}},
    /* reductions */
    RED5(sum),
    RED5(mean),
    RED5(rmax),
    {"sum_empty", b_sum, {1, 0}},
    {"sum_scalar", b_sum, {KILN_ALL_AXES, 0}},
    {"sum_ones", b_sum, {5, 0}},
    {"argmax_0", b_argmax, {0}},
    {"argmax_1", b_argmax, {1}},
    {"argmax_m1", b_argmax, {-1}},
    /* movement */
    {"reshape", b_reshape, {2, 4, -1}},
    {"reshape_flat", b_reshape, {1, -1}},
    {"permute", b_permute, {2, 0, 1}},
    {"permute4", b_permute, {3, 1, 0, 2}},
    {"transpose", b_transpose, {0}},
    {"broadcast_to", b_broadcast_to, {3, 2, 3, 4}},
    {"broadcast_to_same", b_broadcast_to, {2, 3, 4}},
    {"bcast_new02", b_broadcast, {3, 2, 3, 4, 5}},
    {"bcast_new1", b_broadcast, {3, 2, 3, 4, 2}},
    {"slice", b_slice, {2, 1, -3, -1, 5}},
    {"slice3", b_slice, {3, 1, 0, -2, 2, 3, -1}},
    {"slice_empty", b_slice, {2, 2, 0, 2, 5}},
    {"concat1", b_concat3, {1}},
    {"concat_last", b_concat2, {-1}},
    {"concat0", b_concat2, {0}},
    {"pad", b_pad, {2, 1, 0, 2, 1, 0, 0, 5}},
    {"pad3", b_pad, {3, 2, 0, 1, 0, 0, 1, -10}},
    {"pad_i32", b_pad, {2, 1, 0, 2, 1, 0, 0, 30}},
    {"slice_i32", b_slice, {2, 1, -2, 2, 3}},
    {"concat_i32", b_concat2, {0}},
    {"transpose_i32", b_transpose, {0}},
    {"broadcast_to_i32", b_broadcast_to, {3, 2, 3, 4}},
    {"reshape_i32", b_reshape, {2, 3, 2}},
    /* contraction */
    MM(0, 0),
    MM(0, 1),
    MM(1, 0),
    MM(1, 1),
    {"matmul_bone", b_matmul, {0, 0}},
    {"matmul_k0", b_matmul, {0, 0}},
    {"matmul_1x1", b_matmul, {0, 0}},
    {"dot0", b_dot, {0}},
    {"dot1", b_dot, {1}},
    {"dot2", b_dot, {2}},
    {"dot_scalar", b_dot, {1}},
    /* conversion */
    {"one_hot", b_one_hot, {4}},
    {"cast_f2i", b_cast, {KILN_I32}},
    {"cast_i2f", b_cast, {KILN_F32}},
    {"stop_gradient", b_stop_gradient, {0}},
    /* composites */
    SM(softmax, ""),
    SM(softmax, "_big"),
    SM(log_softmax, ""),
    SM(log_softmax, "_big"),
    {"softmax3_1", b_softmax, {1}},
    {"log_softmax3_1", b_log_softmax, {1}},
    {"affine", b_affine, {0}},
    {"cross_entropy", b_cross_entropy, {0}},
    {"softmax_ce", b_softmax_ce, {0}},
    {"softmax_ce_big", b_softmax_ce, {0}},
    {"softmax_ce_grad", b_softmax_ce_grad, {0}},
    {"bce", b_bce, {0}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* ------------------------------------------------------------ runner */

/* Input nodes named as in the file, then the op; checks dtype and shape. */
static kiln_node *build_case(const op_case *c, const ref_case *rc,
                             kiln_graph *g, kiln_node **x)
{
    for (int i = 0; i < rc->n_in; i++)
        x[i] = kiln_input(g, rc->in[i].name, rc->in[i].dt, rc->in[i].shape);
    kiln_node *y = c->build(g, x, c->p);
    th_assert_graph_ok(g);
    assert_int_equal(kiln_node_dtype(y), rc->out.dt);
    th_assert_shape(kiln_node_shape(y), rc->out.shape);
    return y;
}

static void run_compiled(const op_case *c, const ref_case *rc,
                         kiln_tensor *const *feeds)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x[MAX_REF];
    kiln_node *y = build_case(c, rc, g, x);
    kiln_tensor *out = NULL;
    th_run(s, g, &y, 1, x, feeds, rc->n_in, &out);
    check_output("compiled", rc, out);
    kiln_tensor_free(out);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void run_dynamic(const op_case *c, const ref_case *rc,
                        kiln_tensor *const *feeds)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x[MAX_REF];
    kiln_node *y = build_case(c, rc, g, x);
    for (int i = 0; i < rc->n_in; i++)
        assert_int_equal(kiln_feed(s, x[i], feeds[i]), KILN_OK);
    if (kiln_forward(s, g) != KILN_OK)
        fail_msg("kiln_forward: %s", kiln_session_error(s));
    kiln_tensor *out = kiln_node_value(s, y);
    assert_non_null(out);
    check_output("dynamic", rc, out);
    kiln_tensor_free(out);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_op_case(void **state)
{
    const op_case *c = *state;
    ref_case rc;
    ref_load(c->name, &rc);
    kiln_tensor *feeds[MAX_REF];
    for (int i = 0; i < rc.n_in; i++)
        feeds[i] = ref_tensor_new(&rc.in[i]);
    run_compiled(c, &rc, feeds);
    run_dynamic(c, &rc, feeds);
    for (int i = 0; i < rc.n_in; i++)
        kiln_tensor_free(feeds[i]);
    ref_free(&rc);
}

/* The cases: those above, then one per reference file named after an
   elementwise op of the table that none of them names. */
static op_case *all_cases;
static int n_all;

static int explicit_case(const char *name)
{
    for (int i = 0; i < N_CASES; i++)
        if (!strcmp(cases[i].name, name))
            return 1;
    return 0;
}

/* The index in TABLE of the op name names (exactly, or before a "_"), -1
   when none; an exact name wins (round_f16 is not round with a suffix). */
static int table_op(const char *name)
{
    for (int i = 0; i < N_TABLE; i++)
        if (!strcmp(name, TABLE[i].name))
            return i;
    for (int i = 0; i < N_TABLE; i++) {
        size_t len = strlen(TABLE[i].name);
        if (!strncmp(name, TABLE[i].name, len) &&
            (name[len] == 0 || name[len] == '_'))
            return i;
    }
    return -1;
}

/* The reference file names, without ".txt", in ascending order. */
static int ref_names(char ***names)
{
    DIR *d = opendir(KILN_TEST_REF_DIR "/ops");
    assert_non_null(d);
    int n = 0, cap = 256;
    *names = malloc((size_t)cap * sizeof **names);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        if (n == cap)
            *names = realloc(*names, (size_t)(cap *= 2) * sizeof **names);
        (*names)[n++] = strndup(e->d_name, len - 4);
    }
    closedir(d);
    return n;
}

static void collect_cases(void)
{
    char **names;
    int n = ref_names(&names);
    all_cases = calloc((size_t)(N_CASES + n) + 1, sizeof *all_cases);
    assert_non_null(all_cases);
    memcpy(all_cases, cases, sizeof cases);
    n_all = N_CASES;
    for (int i = 0; i < n; i++) {
        int op = explicit_case(names[i]) ? -1 : table_op(names[i]);
        if (op >= 0)
            all_cases[n_all++] = (op_case){names[i], b_table, {op}};
        else
            free(names[i]);
    }
    free(names);
}

/* Every reference file has one case, and every case its file. */
static void test_every_ref_file_has_a_case(void **state)
{
    (void)state;
    char **names;
    int n = ref_names(&names);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < n_all; k++)
            found += strcmp(all_cases[k].name, names[i]) == 0;
        if (found != 1)
            fail_msg("%s.txt: %d cases in test_ops.c", names[i], found);
        free(names[i]);
    }
    free(names);
    assert_int_equal(n, n_all);
}

int main(void)
{
    collect_cases();
    struct CMUnitTest *tests = calloc((size_t)n_all + 1, sizeof *tests);
    assert_non_null(tests);
    tests[0] =
        (struct CMUnitTest)cmocka_unit_test(test_every_ref_file_has_a_case);
    for (int i = 0; i < n_all; i++)
        tests[i + 1] = (struct CMUnitTest){all_cases[i].name, test_op_case,
                                           NULL, NULL, (void *)&all_cases[i]};
    int rc =
        _cmocka_run_group_tests("ops", tests, (size_t)n_all + 1, NULL, NULL);
    for (int i = N_CASES; i < n_all; i++)
        free((char *)all_cases[i].name);
    free(all_cases);
    free(tests);
    return rc;
}
