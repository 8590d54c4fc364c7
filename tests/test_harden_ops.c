/* Careless and hostile calls of the ops of issues 11 and 12 (convolution,
   pooling, padding, resampling, normalisation, dropout, indexing, scans,
   attention, integer math, losses, recurrent cells): NULL graphs and
   operands, operands of another graph, wrong dtypes and ranks, mismatched
   shapes, zero or negative sizes, NaN and infinite scalars, sizes whose
   products overflow, and at run time out-of-range indices and empty
   batches.  Every bad call must poison the graph with a KILN_ERR_* status
   and a message naming the function and the problem; the ASan/UBSan build
   stops on any memory error or undefined behaviour on the way. */
#include "test_helpers.h"

#include <float.h>
#include <limits.h>

/* Operands every case may use, in a fresh graph g; o lives in another
   graph. */
typedef struct fx {
    kiln_graph *g, *g2;
    kiln_node *x;   /* f32 [2,4,8,8] */
    kiln_node *xi;  /* i32 [2,4,8,8] */
    kiln_node *x3;  /* f32 [2,4,8] */
    kiln_node *m;   /* f32 [5,6] */
    kiln_node *mi;  /* i32 [5,6] */
    kiln_node *w;   /* f32 [6,4,3,3] */
    kiln_node *w1;  /* f32 [6,4,3] */
    kiln_node *b6;  /* f32 [6] */
    kiln_node *c4;  /* f32 [4] */
    kiln_node *idx; /* i32 [3] */
    kiln_node *q;   /* f32 [2,2,5,8] */
    kiln_node *o;   /* f32 [2,4,8,8] of g2 */
} fx;

static void fx_new(fx *f)
{
    f->g = kiln_graph_new();
    f->g2 = kiln_graph_new();
    assert_non_null(f->g);
    assert_non_null(f->g2);
    kiln_graph *g = f->g;
    f->x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 4, 8, 8));
    f->xi = kiln_input(g, "xi", KILN_I32, KILN_SHAPE(2, 4, 8, 8));
    f->x3 = kiln_input(g, "x3", KILN_F32, KILN_SHAPE(2, 4, 8));
    f->m = kiln_input(g, "m", KILN_F32, KILN_SHAPE(5, 6));
    f->mi = kiln_input(g, "mi", KILN_I32, KILN_SHAPE(5, 6));
    f->w = kiln_input(g, "w", KILN_F32, KILN_SHAPE(6, 4, 3, 3));
    f->w1 = kiln_input(g, "w1", KILN_F32, KILN_SHAPE(6, 4, 3));
    f->b6 = kiln_input(g, "b6", KILN_F32, KILN_SHAPE(6));
    f->c4 = kiln_input(g, "c4", KILN_F32, KILN_SHAPE(4));
    f->idx = kiln_input(g, "idx", KILN_I32, KILN_SHAPE(3));
    f->q = kiln_input(g, "q", KILN_F32, KILN_SHAPE(2, 2, 5, 8));
    f->o = kiln_input(f->g2, "o", KILN_F32, KILN_SHAPE(2, 4, 8, 8));
    th_assert_graph_ok(g);
}

static void fx_free(fx *f)
{
    kiln_graph_free(f->g);
    kiln_graph_free(f->g2);
}

/* Failures of expect_bad so far: each is printed and the test goes on, so
   one run lists every bad case (check_all fails the test at its end). */
static int n_bad;

#define REPORT(...)                                                            \
    do {                                                                       \
        print_error(__VA_ARGS__);                                              \
        n_bad++;                                                               \
        return;                                                                \
    } while (0)

/* The call poisoned f's graph: the node it gave is the poison node, the
   status an error, the message names fn and holds needle (NULL: fn only),
   and a later builder leaves the first message in place. */
static void expect_bad(fx *f, kiln_node *got, const char *fn,
                       const char *needle, int line)
{
    const char *msg = kiln_graph_error(f->g);
    if (kiln_graph_status(f->g) == KILN_OK)
        REPORT("line %d: %s succeeded (node %d %s)\n", line, fn,
               kiln_node_id(got), kiln_node_op_name(got));
    if (!got || kiln_node_id(got) != -1)
        REPORT("line %d: %s: graph failed (\"%s\") but the node is not "
               "the poison node\n",
               line, fn, msg);
    if (strncmp(msg, fn, strlen(fn)) || msg[strlen(fn)] != ':')
        REPORT("line %d: message \"%s\" does not start with \"%s:\"\n", line,
               msg, fn);
    if (needle && !strstr(msg, needle))
        REPORT("line %d: message \"%s\" lacks \"%s\"\n", line, msg, needle);
    char first[1024];
    snprintf(first, sizeof first, "%s", msg);
    kiln_status st = kiln_graph_status(f->g);
    assert_int_equal(kiln_node_id(kiln_relu(f->g, f->x)), -1);
    assert_int_equal(kiln_graph_status(f->g), st);
    assert_string_equal(kiln_graph_error(f->g), first);
}

static void check_all(void)
{
    int n = n_bad;
    n_bad = 0;
    if (n)
        fail_msg("%d bad case(s) above", n);
}

/* One bad call in a fresh fixture. */
#define BAD(call, fn, needle)                                                  \
    do {                                                                       \
        fx f_;                                                                 \
        fx_new(&f_);                                                           \
        fx *f = &f_;                                                           \
        expect_bad(f, (call), fn, needle, __LINE__);                           \
        fx_free(&f_);                                                          \
    } while (0)

/* A call that must build (valid edge case), with the result's shape. */
#define GOOD(call, ...)                                                        \
    do {                                                                       \
        fx f_;                                                                 \
        fx_new(&f_);                                                           \
        fx *f = &f_;                                                           \
        kiln_node *r_ = (call);                                                \
        if (kiln_graph_status(f->g) != KILN_OK)                                \
            fail_msg("line %d: %s", __LINE__, kiln_graph_error(f->g));         \
        th_assert_shape(kiln_node_shape(r_), KILN_SHAPE(__VA_ARGS__));         \
        fx_free(&f_);                                                          \
    } while (0)

/* A builder given a NULL graph returns NULL and names itself. */
#define NULL_GRAPH(call, fn)                                                   \
    do {                                                                       \
        fx f_;                                                                 \
        fx_new(&f_);                                                           \
        fx *f = &f_;                                                           \
        (void)f;                                                               \
        if ((call) || !strstr(kiln_last_error(), fn ": graph is NULL")) {      \
            print_error("line %d: last error \"%s\"\n", __LINE__,              \
                        kiln_last_error());                                    \
            n_bad++;                                                           \
        }                                                                      \
        fx_free(&f_);                                                          \
    } while (0)

static kiln_conv_params cp(int stride, int pad, int dil, int groups)
{
    kiln_conv_params p = {{stride, stride}, {pad, pad}, {dil, dil},
                          {0, 0},           groups,     0};
    return p;
}

/* ------------------------------------------------------------ NULL graph */

static void test_null_graph(void **state)
{
    (void)state;
    kiln_node *vals = NULL, *ids = NULL, *h = NULL, *c = NULL;
    const int k2[2] = {2, 2};
    const int64_t pad2[2] = {1, 1};
    NULL_GRAPH(kiln_conv2d(NULL, f->x, f->w, NULL, NULL), "kiln_conv2d");
    NULL_GRAPH(kiln_conv1d(NULL, f->x3, f->w1, NULL, NULL), "kiln_conv1d");
    NULL_GRAPH(kiln_conv_transpose2d(NULL, f->x, f->w, NULL, NULL),
               "kiln_conv_transpose2d");
    NULL_GRAPH(kiln_max_pool2d(NULL, f->x, k2, NULL, NULL, NULL, 0),
               "kiln_max_pool2d");
    NULL_GRAPH(kiln_avg_pool2d(NULL, f->x, k2, NULL, NULL, 0, 1),
               "kiln_avg_pool2d");
    NULL_GRAPH(kiln_adaptive_avg_pool2d(NULL, f->x, 1, 1),
               "kiln_adaptive_avg_pool2d");
    NULL_GRAPH(kiln_pad_mode(NULL, f->x, pad2, 2, KILN_PAD_REFLECT),
               "kiln_pad_mode");
    NULL_GRAPH(kiln_upsample2d(NULL, f->x, (int64_t[]){4, 4}, NULL,
                               KILN_UPSAMPLE_NEAREST, 0),
               "kiln_upsample2d");
    NULL_GRAPH(kiln_flatten(NULL, f->x, 1, -1), "kiln_flatten");
    NULL_GRAPH(kiln_batch_norm(NULL, f->x, NULL, NULL, NULL, NULL, 0.1f, 1e-5f),
               "kiln_batch_norm");
    NULL_GRAPH(kiln_layer_norm(NULL, f->x, KILN_SHAPE(8), NULL, NULL, 1e-5f),
               "kiln_layer_norm");
    NULL_GRAPH(kiln_group_norm(NULL, f->x, 2, NULL, NULL, 1e-5f),
               "kiln_group_norm");
    NULL_GRAPH(kiln_instance_norm(NULL, f->x, NULL, NULL, 1e-5f),
               "kiln_instance_norm");
    NULL_GRAPH(kiln_rms_norm(NULL, f->x, 1, NULL, 1e-5f), "kiln_rms_norm");
    NULL_GRAPH(kiln_dropout(NULL, f->x, 0.5f), "kiln_dropout");
    NULL_GRAPH(kiln_dropout2d(NULL, f->x, 0.5f), "kiln_dropout2d");
    NULL_GRAPH(kiln_index_select(NULL, f->m, 0, f->idx), "kiln_index_select");
    NULL_GRAPH(kiln_index_add(NULL, f->m, 0, f->idx, f->m), "kiln_index_add");
    NULL_GRAPH(kiln_gather(NULL, f->m, 0, f->mi), "kiln_gather");
    NULL_GRAPH(kiln_scatter_add(NULL, f->m, 0, f->mi, f->m),
               "kiln_scatter_add");
    NULL_GRAPH(kiln_embedding(NULL, f->m, f->idx), "kiln_embedding");
    NULL_GRAPH(kiln_cumsum(NULL, f->m, 0), "kiln_cumsum");
    NULL_GRAPH(kiln_prod(NULL, f->m, 1u, 0), "kiln_prod");
    NULL_GRAPH(kiln_masked_fill(NULL, f->m, f->mi, 0.0f), "kiln_masked_fill");
    NULL_GRAPH(kiln_tril(NULL, f->m, 0), "kiln_tril");
    NULL_GRAPH(kiln_triu(NULL, f->m, 0), "kiln_triu");
    NULL_GRAPH(kiln_clamp(NULL, f->m, 0.0f, 1.0f), "kiln_clamp");
    NULL_GRAPH(kiln_reduce_min(NULL, f->m, 1u, 0), "kiln_reduce_min");
    NULL_GRAPH(kiln_logsumexp(NULL, f->m, 1u, 0), "kiln_logsumexp");
    NULL_GRAPH(kiln_variance(NULL, f->m, 1u, 1.0f, 0), "kiln_variance");
    NULL_GRAPH(kiln_std(NULL, f->m, 1u, 1.0f, 0), "kiln_std");
    NULL_GRAPH(kiln_select(NULL, f->mi, f->m, f->m), "kiln_select");
    NULL_GRAPH(kiln_int_add(NULL, f->mi, f->mi), "kiln_int_add");
    NULL_GRAPH(kiln_int_mod(NULL, f->mi, f->mi), "kiln_int_mod");
    NULL_GRAPH(
        kiln_scaled_dot_product_attention(NULL, f->q, f->q, f->q, NULL, NULL),
        "kiln_scaled_dot_product_attention");
    NULL_GRAPH(kiln_split_heads(NULL, f->x3, 2), "kiln_split_heads");
    NULL_GRAPH(kiln_merge_heads(NULL, f->q), "kiln_merge_heads");
    NULL_GRAPH(kiln_cross_entropy_loss(NULL, f->m, f->idx, KILN_REDUCE_MEAN,
                                       KILN_IGNORE_NONE, 0.0f),
               "kiln_cross_entropy_loss");
    NULL_GRAPH(kiln_gru_cell(NULL, f->m, f->m, f->m, f->m, NULL, NULL),
               "kiln_gru_cell");
    /* The functions returning a status name themselves too. */
    kiln_graph *g = kiln_graph_new();
    kiln_node *m = kiln_input(g, "m", KILN_F32, KILN_SHAPE(5, 6));
    assert_int_equal(kiln_topk(NULL, m, 2, 1, &vals, &ids), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_last_error(), "kiln_topk: graph is NULL"));
    assert_int_equal(kiln_lstm_cell(NULL, m, m, m, m, m, NULL, NULL, &h, &c),
                     KILN_ERR_ARG);
    assert_non_null(strstr(kiln_last_error(), "kiln_lstm_cell: graph is NULL"));
    kiln_graph_free(g);
    check_all();
}

/* ------------------------------------------------ operands: NULL, foreign,
   dtype, rank */

static void test_conv_operands(void **state)
{
    (void)state;
    const char *c2 = "kiln_conv2d", *c1 = "kiln_conv1d",
               *ct = "kiln_conv_transpose2d";
    BAD(kiln_conv2d(f->g, NULL, f->w, NULL, NULL), c2, "NULL");
    BAD(kiln_conv2d(f->g, f->x, NULL, NULL, NULL), c2, "NULL");
    BAD(kiln_conv2d(f->g, f->o, f->w, NULL, NULL), c2, "another graph");
    BAD(kiln_conv2d(f->g, f->x, f->w, f->o, NULL), c2, "another graph");
    BAD(kiln_conv2d(f->g, f->xi, f->w, NULL, NULL), c2, "i32");
    BAD(kiln_conv2d(f->g, f->x, kiln_cast(f->g, f->w, KILN_I32), NULL, NULL),
        c2, "i32");
    BAD(kiln_conv2d(f->g, f->x3, f->w, NULL, NULL), c2, "[2,4,8]");
    BAD(kiln_conv2d(f->g, f->x, f->w1, NULL, NULL), c2, "[6,4,3]");
    BAD(kiln_conv2d(f->g, f->x, f->w, f->c4, NULL), c2, "[4]");
    BAD(kiln_conv2d(f->g, f->x, f->w, kiln_cast(f->g, f->b6, KILN_I32), NULL),
        c2, "i32");
    BAD(kiln_conv1d(f->g, f->x, f->w1, NULL, NULL), c1, "[2,4,8,8]");
    BAD(kiln_conv1d(f->g, f->x3, f->w, NULL, NULL), c1, "[6,4,3,3]");
    BAD(kiln_conv1d(f->g, f->o, f->w1, NULL, NULL), c1, "another graph");
    BAD(kiln_conv1d(f->g, NULL, f->w1, NULL, NULL), c1, "NULL");
    BAD(kiln_conv_transpose2d(f->g, f->x3, f->w, NULL, NULL), ct, "[2,4,8]");
    BAD(kiln_conv_transpose2d(f->g, f->xi, f->w, NULL, NULL), ct, "i32");
    BAD(kiln_conv_transpose2d(f->g, NULL, f->w, NULL, NULL), ct, "NULL");
    /* conv_transpose2d's weight is [C_in, C_out/groups, kh, kw]: 6 != 4 */
    BAD(kiln_conv_transpose2d(f->g, f->x, f->w, NULL, NULL), ct, "[6,4,3,3]");
    check_all();
}

/* Channels, groups, kernels and settings that PyTorch refuses. */
static void test_conv_settings(void **state)
{
    (void)state;
    const char *c2 = "kiln_conv2d", *c1 = "kiln_conv1d",
               *ct = "kiln_conv_transpose2d";
    kiln_conv_params p;
#define W(...) kiln_input(f->g, "w2", KILN_F32, KILN_SHAPE(__VA_ARGS__))
    BAD(kiln_conv2d(f->g, f->x, W(6, 3, 3, 3), NULL, NULL), c2, "[6,3,3,3]");
    p = cp(-1, 0, 1, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "stride");
    p = cp(INT_MIN, 0, 1, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "stride");
    p = cp(1, -1, 1, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "padding");
    p = cp(1, 0, -2, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "dilation");
    p = cp(1, 0, 1, -2);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "groups");
    p = cp(1, 0, 1, 3); /* 3 does not divide 4 input channels */
    BAD(kiln_conv2d(f->g, f->x, W(6, 1, 3, 3), NULL, &p), c2, "groups");
    p = cp(1, 0, 1, 4); /* 4 does not divide 6 output channels */
    BAD(kiln_conv2d(f->g, f->x, W(6, 1, 3, 3), NULL, &p), c2, "groups");
    p = cp(1, 0, 1, 2); /* w's channels must be 4 / 2 */
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "[6,4,3,3]");
    BAD(kiln_conv2d(f->g, f->x, W(6, 4, 9, 3), NULL, NULL), c2, "[6,4,9,3]");
    p = cp(1, 1, 1, 1); /* 10 padded rows, kernel 11 */
    BAD(kiln_conv2d(f->g, f->x, W(6, 4, 11, 1), NULL, &p), c2, "[6,4,11,1]");
    p = cp(1, 0, 4, 1); /* dilated extent 9 > 8 */
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "[6,4,3,3]");
    BAD(kiln_conv2d(f->g, f->x, W(6, 4, 0, 3), NULL, NULL), c2, "kernel 0");
    BAD(kiln_conv2d(f->g, f->x, W(0, 4, 3, 3), NULL, NULL), c2, "[0,4,3,3]");
    /* a kernel dim beyond int */
    BAD(kiln_conv2d(f->g, f->x, W(1, 4, (INT64_C(1) << 32) + 3, 1), NULL, NULL),
        c2, "4294967299");
    /* the dilated extent d (k - 1) + 1 overflows an int */
    p = cp(1, 0, INT_MAX, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, NULL);
    /* padding INT_MAX twice: the output would be 2^32 x 2^32 per plane */
    p = cp(1, INT_MAX, 1, 1);
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, NULL);
    /* PyTorch refuses padding='same' with strides */
    p = cp(2, 0, 1, 1);
    p.flags = KILN_PAD_SAME;
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "same");
    p = cp(1, 0, 1, 1);
    p.flags = 0x80u;
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "flags");
    /* [1,1,2^20,2^20] by 16 output channels: 2^44 elements */
    BAD(kiln_conv2d(
            f->g,
            kiln_input(f->g, "xh", KILN_F32,
                       KILN_SHAPE(1, 1, INT64_C(1) << 20, INT64_C(1) << 20)),
            W(16, 1, 1, 1), NULL, NULL),
        c2, "too large");
    /* 'same' padding of a kernel dilated beyond int */
    p = cp(1, 0, INT_MAX, 1);
    p.flags = KILN_PAD_SAME;
    BAD(kiln_conv2d(f->g, f->x, f->w, NULL, &p), c2, "same");
    p = cp(-1, 0, 1, 1);
    BAD(kiln_conv1d(f->g, f->x3, f->w1, NULL, &p), c1, "stride");
    BAD(kiln_conv1d(f->g, f->x3, W(6, 4, 9), NULL, NULL), c1, "[6,4,9]");
    p = cp(1, 0, 1, 3);
    BAD(kiln_conv1d(f->g, f->x3, W(6, 1, 3), NULL, &p), c1, "groups");
    /* transpose: w [C=4, O/groups, kh, kw] */
    p = cp(2, 0, 1, 1);
    p.output_padding[0] = 2; /* must be below the stride */
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct,
        "output padding");
    p = cp(1, 0, 1, 1);
    p.output_padding[1] = -1;
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct,
        "output padding");
    p = cp(1, 0, 1, 1);
    p.flags = KILN_PAD_SAME;
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct, NULL);
    p = cp(1, 6, 1, 1); /* (8-1) - 12 + 3 < 1 */
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct, NULL);
    p = cp(1, 0, 1, 3);
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 2, 3, 3), NULL, &p), ct,
        "groups");
    p = cp(1, 0, 1, 1);
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), f->c4, &p), ct, "[4]");
    p = cp(-3, 0, 1, 1);
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct,
        "stride");
    /* (H - 1) * stride overflows: H near 2^31, stride INT_MAX, and the
       element count of what it would give */
    p = cp(INT_MAX, 0, INT_MAX, 1);
    BAD(kiln_conv_transpose2d(f->g, f->x, W(4, 6, 3, 3), NULL, &p), ct, NULL);
    p = cp(INT_MAX, 0, 1, 1);
    BAD(kiln_conv_transpose2d(
            f->g,
            kiln_input(f->g, "xh", KILN_F32,
                       KILN_SHAPE(1, 4, INT64_C(1) << 18, INT64_C(1) << 18)),
            W(4, 6, 3, 3), NULL, &p),
        ct, "result");
#undef W
    check_all();
}

/* ------------------------------------------------ pooling, padding,
   resampling, flatten */

static void test_pool_args(void **state)
{
    (void)state;
    const char *mp = "kiln_max_pool2d", *ap = "kiln_avg_pool2d",
               *aa = "kiln_adaptive_avg_pool2d";
    const int k2[2] = {2, 2}, k0[2] = {0, 2}, kneg[2] = {2, -1}, k9[2] = {9, 2},
              kbig[2] = {INT_MAX, INT_MAX}, z[2] = {0, 0}, neg[2] = {-1, -1},
              pad2[2] = {2, 2}, big[2] = {INT_MAX, 1};
    BAD(kiln_max_pool2d(f->g, NULL, k2, NULL, NULL, NULL, 0), mp, "NULL");
    BAD(kiln_max_pool2d(f->g, f->o, k2, NULL, NULL, NULL, 0), mp,
        "another graph");
    BAD(kiln_max_pool2d(f->g, f->x, NULL, NULL, NULL, NULL, 0), mp, "kernel");
    BAD(kiln_max_pool2d(f->g, f->m, k2, NULL, NULL, NULL, 0), mp, "[5,6]");
    BAD(kiln_max_pool2d(f->g, f->x, k0, NULL, NULL, NULL, 0), mp, "kernel");
    BAD(kiln_max_pool2d(f->g, f->x, kneg, NULL, NULL, NULL, 0), mp, "kernel");
    BAD(kiln_max_pool2d(f->g, f->x, k9, NULL, NULL, NULL, 0), mp, NULL);
    BAD(kiln_max_pool2d(f->g, f->x, k2, z, NULL, NULL, 0), mp, "stride");
    BAD(kiln_max_pool2d(f->g, f->x, k2, neg, NULL, NULL, 0), mp, "stride");
    BAD(kiln_max_pool2d(f->g, f->x, k2, NULL, pad2, NULL, 0), mp, "pad");
    BAD(kiln_max_pool2d(f->g, f->x, k2, NULL, neg, NULL, 0), mp, "pad");
    BAD(kiln_max_pool2d(f->g, f->x, k2, NULL, NULL, z, 0), mp, "dilation");
    BAD(kiln_max_pool2d(f->g, f->x, kbig, NULL, NULL, NULL, 0), mp, NULL);
    BAD(kiln_max_pool2d(f->g, f->x, k2, NULL, NULL, big, 0), mp, NULL);
    BAD(kiln_max_pool2d(f->g, f->x, kbig, NULL, NULL, kbig, 1), mp, NULL);
    BAD(kiln_avg_pool2d(f->g, NULL, k2, NULL, NULL, 0, 1), ap, "NULL");
    BAD(kiln_avg_pool2d(f->g, f->xi, k2, NULL, NULL, 0, 1), ap, "i32");
    BAD(kiln_avg_pool2d(f->g, f->x, NULL, NULL, NULL, 0, 1), ap, "kernel");
    BAD(kiln_avg_pool2d(f->g, f->x, k0, NULL, NULL, 0, 1), ap, "kernel");
    BAD(kiln_avg_pool2d(f->g, f->x, k2, neg, NULL, 0, 1), ap, "stride");
    BAD(kiln_avg_pool2d(f->g, f->x, k2, NULL, pad2, 0, 1), ap, "pad");
    BAD(kiln_avg_pool2d(f->g, f->x, k9, NULL, NULL, 0, 0), ap, NULL);
    BAD(kiln_avg_pool2d(f->g, f->x, kbig, NULL, NULL, 0, 0), ap, NULL);
    BAD(kiln_avg_pool2d(f->g, f->m, k2, NULL, NULL, 0, 1), ap, "[5,6]");
    BAD(kiln_adaptive_avg_pool2d(f->g, NULL, 1, 1), aa, "NULL");
    BAD(kiln_adaptive_avg_pool2d(f->g, f->xi, 1, 1), aa, "i32");
    BAD(kiln_adaptive_avg_pool2d(f->g, f->m, 1, 1), aa, "[5,6]");
    BAD(kiln_adaptive_avg_pool2d(f->g, f->x, 0, 1), aa, NULL);
    BAD(kiln_adaptive_avg_pool2d(f->g, f->x, 1, -1), aa, NULL);
    BAD(kiln_adaptive_avg_pool2d(f->g, f->x, INT64_MAX, INT64_MAX), aa, NULL);
    BAD(kiln_adaptive_avg_pool2d(f->g, f->x, INT64_MIN, 1), aa, NULL);
    check_all();
}

static void test_pad_upsample_flatten_args(void **state)
{
    (void)state;
    const char *pm = "kiln_pad_mode", *up = "kiln_upsample2d",
               *fl = "kiln_flatten";
    const int64_t p1[4] = {1, 1, 1, 1}, p8[2] = {8, 0}, pn[2] = {0, -1},
                  pbig[2] = {INT64_MAX, INT64_MAX},
                  pmin[4] = {0, 0, INT64_MIN, 0};
    /* kiln_pad of an i32 x takes the value truncated: one that is no i32
       (NaN, infinite, out of range) is refused (the kernels' (int32_t) of
       it was undefined: UBSan in fuzz_graph); -2^31 and 7.9 build */
    const float no_i32[] = {NAN,           INFINITY,       -INFINITY,
                            2147483648.0f, -2147483904.0f, 1e30f};
    const int64_t z4[4] = {0, 0, 1, 1};
    for (int i = 0; i < 6; i++)
        BAD(kiln_pad(f->g, f->xi, z4, z4, no_i32[i]), "kiln_pad",
            "is not an i32");
    GOOD(kiln_pad(f->g, f->xi, z4, z4, -2147483648.0f), 2, 4, 10, 10);
    GOOD(kiln_pad(f->g, f->x, z4, z4, NAN), 2, 4, 10, 10); /* f32: any */
    {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = kiln_input(g, "x", KILN_I32, KILN_SHAPE(1));
        const int64_t one[1] = {1};
        kiln_node *y = kiln_pad(g, x, one, one, 7.9f);
        kiln_tensor *in = kiln_tensor_new(KILN_I32, KILN_SHAPE(1)), *got;
        assert_non_null(in);
        kiln_tensor_i32(in)[0] = -3;
        kiln_session *s = kiln_session_new(NULL);
        th_run(s, g, &y, 1, &x, &in, 1, &got);
        assert_int_equal(kiln_tensor_i32(got)[0], 7);
        assert_int_equal(kiln_tensor_i32(got)[1], -3);
        assert_int_equal(kiln_tensor_i32(got)[2], 7);
        kiln_tensor_free(got);
        kiln_tensor_free(in);
        kiln_session_free(s);
        kiln_graph_free(g);
    }
    BAD(kiln_pad_mode(f->g, NULL, p1, 2, KILN_PAD_REFLECT), pm, "NULL");
    BAD(kiln_pad_mode(f->g, f->o, p1, 2, KILN_PAD_REFLECT), pm,
        "another graph");
    BAD(kiln_pad_mode(f->g, f->x, NULL, 2, KILN_PAD_REFLECT), pm, "NULL");
    BAD(kiln_pad_mode(f->g, f->x, p8, 2, KILN_PAD_REFLECT), pm, "8");
    BAD(kiln_pad_mode(f->g, f->x3, pn, 2, KILN_PAD_REPLICATE), pm, "-1");
    BAD(kiln_pad_mode(f->g, f->x, pn, 2, KILN_PAD_REPLICATE), pm, "[2,4,8,8]");
    BAD(kiln_pad_mode(f->g, f->x, p1, 3, KILN_PAD_REFLECT), pm, "3");
    BAD(kiln_pad_mode(f->g, f->x, p1, -2, KILN_PAD_REFLECT), pm, NULL);
    BAD(kiln_pad_mode(f->g, f->x, p1, INT_MAX, KILN_PAD_REFLECT), pm, NULL);
    BAD(kiln_pad_mode(f->g, f->m, p1, 4, KILN_PAD_REFLECT), pm, "[5,6]");
    BAD(kiln_pad_mode(f->g, f->x, p1, 2, (kiln_padding)0), pm, "mode");
    BAD(kiln_pad_mode(f->g, f->x, p1, 2, (kiln_padding)77), pm, "mode");
    BAD(kiln_pad_mode(f->g, f->x, pbig, 2, KILN_PAD_REPLICATE), pm, NULL);
    BAD(kiln_pad_mode(f->g, f->x, pmin, 4, KILN_PAD_REPLICATE), pm, NULL);
    /* reflecting an empty dim has nothing to reflect */
    BAD(kiln_pad_mode(f->g,
                      kiln_input(f->g, "e", KILN_F32, KILN_SHAPE(2, 3, 0)), p1,
                      2, KILN_PAD_REPLICATE),
        pm, NULL);
    const int64_t s44[2] = {4, 4}, s0[2] = {0, 4}, sn[2] = {4, -4},
                  sbig[2] = {INT64_MAX, INT64_MAX};
    const double sc2[2] = {2, 2}, sc0[2] = {0, 2}, scn[2] = {-1, 2},
                 scnan[2] = {NAN, 2}, scinf[2] = {INFINITY, 2},
                 schuge[2] = {1e300, 1e300};
    BAD(kiln_upsample2d(f->g, NULL, s44, NULL, KILN_UPSAMPLE_NEAREST, 0), up,
        "NULL");
    BAD(kiln_upsample2d(f->g, f->o, s44, NULL, KILN_UPSAMPLE_NEAREST, 0), up,
        "another graph");
    BAD(kiln_upsample2d(f->g, f->xi, s44, NULL, KILN_UPSAMPLE_BILINEAR, 0), up,
        "i32");
    BAD(kiln_upsample2d(f->g, f->x3, s44, NULL, KILN_UPSAMPLE_NEAREST, 0), up,
        "[2,4,8]");
    BAD(kiln_upsample2d(f->g, f->x, s44, sc2, KILN_UPSAMPLE_NEAREST, 0), up,
        NULL);
    BAD(kiln_upsample2d(f->g, f->x, NULL, NULL, KILN_UPSAMPLE_NEAREST, 0), up,
        NULL);
    const int64_t *bad_size[] = {s0, sn, sbig};
    for (int i = 0; i < 3; i++)
        BAD(kiln_upsample2d(f->g, f->x, bad_size[i], NULL,
                            KILN_UPSAMPLE_NEAREST, 0),
            up, "sizes");
    const double *bad_scale[] = {sc0, scn, scnan, scinf};
    for (int i = 0; i < 4; i++)
        BAD(kiln_upsample2d(f->g, f->x, NULL, bad_scale[i],
                            KILN_UPSAMPLE_BILINEAR, 0),
            up, "scale");
    /* an empty spatial dim has nothing to interpolate */
    BAD(kiln_upsample2d(f->g,
                        kiln_input(f->g, "e", KILN_F32, KILN_SHAPE(1, 1, 0, 4)),
                        s44, NULL, KILN_UPSAMPLE_BILINEAR, 0),
        up, "got 0 -> 4 along dim 2");
    /* a scale that gives an output beyond 2^30 */
    BAD(kiln_upsample2d(f->g, f->x, NULL, schuge, KILN_UPSAMPLE_NEAREST, 0), up,
        "sizes");
    BAD(kiln_upsample2d(f->g, f->x, s44, NULL, (kiln_upsample)9, 0), up,
        "mode");
    /* PyTorch: align_corners only with the interpolating modes */
    BAD(kiln_upsample2d(f->g, f->x, s44, NULL, KILN_UPSAMPLE_NEAREST, 1), up,
        "align_corners");
    BAD(kiln_flatten(f->g, NULL, 0, -1), fl, "NULL");
    BAD(kiln_flatten(f->g, f->o, 0, -1), fl, "another graph");
    BAD(kiln_flatten(f->g, f->x, 2, 1), fl, NULL);
    BAD(kiln_flatten(f->g, f->x, 4, 4), fl, "4");
    BAD(kiln_flatten(f->g, f->x, 0, -5), fl, "-5");
    BAD(kiln_flatten(f->g, f->x, INT_MIN, 0), fl, NULL);
    BAD(kiln_flatten(f->g, f->x, 0, INT_MAX), fl, NULL);
    check_all();
}

/* ------------------------------------------------ normalisation, dropout */

static void test_norm_args(void **state)
{
    (void)state;
    const char *bn = "kiln_batch_norm", *ln = "kiln_layer_norm",
               *gn = "kiln_group_norm", *in = "kiln_instance_norm",
               *rn = "kiln_rms_norm";
#define RV(name, dt, n)                                                        \
    kiln_node_set_trainable(                                                   \
        kiln_variable(f->g, name, dt, KILN_SHAPE(n), kiln_init_zeros()), 0)
    BAD(kiln_batch_norm(f->g, NULL, NULL, NULL, NULL, NULL, 0.1f, 1e-5f), bn,
        "NULL");
    BAD(kiln_batch_norm(f->g, f->o, NULL, NULL, NULL, NULL, 0.1f, 1e-5f), bn,
        "another graph");
    BAD(kiln_batch_norm(f->g, f->xi, NULL, NULL, NULL, NULL, 0.1f, 1e-5f), bn,
        "i32");
    BAD(kiln_batch_norm(f->g, f->c4, NULL, NULL, NULL, NULL, 0.1f, 1e-5f), bn,
        "[4]");
    BAD(kiln_batch_norm(f->g, f->x, f->b6, NULL, NULL, NULL, 0.1f, 1e-5f), bn,
        "[6]");
    BAD(kiln_batch_norm(f->g, f->x, NULL, f->o, NULL, NULL, 0.1f, 1e-5f), bn,
        "another graph");
    BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, RV("rm", KILN_F32, 4), NULL,
                        0.1f, 1e-5f),
        bn, NULL);
    BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, RV("rm", KILN_F32, 6),
                        RV("rv", KILN_F32, 6), 0.1f, 1e-5f),
        bn, "[6]");
    BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, RV("rm", KILN_I32, 4),
                        RV("rv", KILN_F32, 4), 0.1f, 1e-5f),
        bn, "i32");
    /* running statistics must be variables the update can assign */
    BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, f->c4, f->c4, 0.1f, 1e-5f), bn,
        NULL);
    float badm[] = {-0.1f, 1.5f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof badm / sizeof *badm; i++)
        BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, RV("rm", KILN_F32, 4),
                            RV("rv", KILN_F32, 4), badm[i], 1e-5f),
            bn, "momentum");
    float bade[] = {-1e-5f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bade / sizeof *bade; i++) {
        BAD(kiln_batch_norm(f->g, f->x, NULL, NULL, NULL, NULL, 0.1f, bade[i]),
            bn, "eps");
        BAD(kiln_layer_norm(f->g, f->x, KILN_SHAPE(8), NULL, NULL, bade[i]), ln,
            "eps");
        BAD(kiln_group_norm(f->g, f->x, 2, NULL, NULL, bade[i]), gn, "eps");
        BAD(kiln_instance_norm(f->g, f->x, NULL, NULL, bade[i]), in, "eps");
    }
    /* rms_norm: a negative eps means the default, a NaN or infinite one is
       refused */
    BAD(kiln_rms_norm(f->g, f->x, 1, NULL, NAN), rn, "eps");
    BAD(kiln_rms_norm(f->g, f->x, 1, NULL, INFINITY), rn, "eps");
    BAD(kiln_layer_norm(f->g, NULL, KILN_SHAPE(8), NULL, NULL, 1e-5f), ln,
        "NULL");
    BAD(kiln_layer_norm(f->g, f->xi, KILN_SHAPE(8), NULL, NULL, 1e-5f), ln,
        "i32");
    BAD(kiln_layer_norm(f->g, f->x, KILN_SHAPE(7), NULL, NULL, 1e-5f), ln,
        "[7]");
    BAD(kiln_layer_norm(f->g, f->x, KILN_SHAPE(4, 4, 8, 8), NULL, NULL, 1e-5f),
        ln, "[4,4,8,8]");
    BAD(kiln_layer_norm(f->g, f->x, KILN_SHAPE(8), f->c4, NULL, 1e-5f), ln,
        "[4]");
    BAD(kiln_layer_norm(f->g, f->x, KILN_SHAPE(8), NULL, f->o, 1e-5f), ln,
        "another graph");
    /* PyTorch: normalized_shape must have at least one dim */
    BAD(kiln_layer_norm(f->g, f->x, KILN_SCALAR, NULL, NULL, 1e-5f), ln, NULL);
    BAD(kiln_layer_norm(f->g, f->x, (kiln_shape){.ndim = -1, .d = {0}}, NULL,
                        NULL, 1e-5f),
        ln, NULL);
    BAD(kiln_layer_norm(f->g, f->x, (kiln_shape){.ndim = 99, .d = {0}}, NULL,
                        NULL, 1e-5f),
        ln, NULL);
    BAD(kiln_group_norm(f->g, NULL, 2, NULL, NULL, 1e-5f), gn, "NULL");
    BAD(kiln_group_norm(f->g, f->xi, 2, NULL, NULL, 1e-5f), gn, "i32");
    BAD(kiln_group_norm(f->g, f->x, 3, NULL, NULL, 1e-5f), gn, "3");
    BAD(kiln_group_norm(f->g, f->x, 0, NULL, NULL, 1e-5f), gn, "0");
    BAD(kiln_group_norm(f->g, f->x, -2, NULL, NULL, 1e-5f), gn, "-2");
    BAD(kiln_group_norm(f->g, f->x, INT_MIN, NULL, NULL, 1e-5f), gn, NULL);
    BAD(kiln_group_norm(f->g, f->x, 2, f->b6, NULL, 1e-5f), gn, "[6]");
    BAD(kiln_group_norm(f->g, f->c4, 2, NULL, NULL, 1e-5f), gn, "[4]");
    BAD(kiln_instance_norm(f->g, NULL, NULL, NULL, 1e-5f), in, "NULL");
    BAD(kiln_instance_norm(f->g, f->xi, NULL, NULL, 1e-5f), in, "i32");
    BAD(kiln_instance_norm(f->g, f->x, NULL, f->b6, 1e-5f), in, "[6]");
    BAD(kiln_instance_norm(f->g, f->c4, NULL, NULL, 1e-5f), in, "[4]");
    BAD(kiln_rms_norm(f->g, NULL, 1, NULL, 1e-5f), rn, "NULL");
    BAD(kiln_rms_norm(f->g, f->xi, 1, NULL, 1e-5f), rn, "i32");
    BAD(kiln_rms_norm(f->g, f->x, 0, NULL, 1e-5f), rn, "0");
    BAD(kiln_rms_norm(f->g, f->x, 5, NULL, 1e-5f), rn, "5");
    BAD(kiln_rms_norm(f->g, f->x, -1, NULL, 1e-5f), rn, "-1");
    BAD(kiln_rms_norm(f->g, f->x, 1, f->c4, 1e-5f), rn, "[4]");
    BAD(kiln_rms_norm(f->g, f->x, 1, f->o, 1e-5f), rn, "another graph");
#undef RV
    check_all();
}

static void test_dropout_args(void **state)
{
    (void)state;
    float bad[] = {-0.1f, 1.0f, 1.5f, NAN, INFINITY, -INFINITY, -0.0f - 1e-30f};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        BAD(kiln_dropout(f->g, f->x, bad[i]), "kiln_dropout", "p");
        BAD(kiln_dropout2d(f->g, f->x, bad[i]), "kiln_dropout2d", "p");
    }
    BAD(kiln_dropout(f->g, NULL, 0.5f), "kiln_dropout", "NULL");
    BAD(kiln_dropout(f->g, f->o, 0.5f), "kiln_dropout", "another graph");
    BAD(kiln_dropout(f->g, f->xi, 0.5f), "kiln_dropout", "i32");
    BAD(kiln_dropout2d(f->g, NULL, 0.5f), "kiln_dropout2d", "NULL");
    BAD(kiln_dropout2d(f->g, f->xi, 0.5f), "kiln_dropout2d", "i32");
    /* PyTorch: feature dropout needs at least 2 dims */
    BAD(kiln_dropout2d(f->g, f->c4, 0.5f), "kiln_dropout2d", "[4]");
    check_all();
}

/* ------------------------------------------------ indexing */

static void test_index_args(void **state)
{
    (void)state;
    const char *is = "kiln_index_select", *ia = "kiln_index_add",
               *ga = "kiln_gather", *sa = "kiln_scatter_add",
               *em = "kiln_embedding";
#define I32(...) kiln_input(f->g, "ii", KILN_I32, KILN_SHAPE(__VA_ARGS__))
#define F32(...) kiln_input(f->g, "ff", KILN_F32, KILN_SHAPE(__VA_ARGS__))
    BAD(kiln_index_select(f->g, NULL, 0, f->idx), is, "NULL");
    BAD(kiln_index_select(f->g, f->m, 0, NULL), is, "NULL");
    BAD(kiln_index_select(f->g, f->o, 0, f->idx), is, "another graph");
    BAD(kiln_index_select(f->g, f->m, 2, f->idx), is, "axis");
    BAD(kiln_index_select(f->g, f->m, -3, f->idx), is, "axis");
    BAD(kiln_index_select(f->g, f->m, INT_MIN, f->idx), is, "axis");
    BAD(kiln_index_select(f->g, f->m, 0, F32(3)), is, "f32");
    BAD(kiln_index_select(f->g, f->m, 0, I32(3, 1)), is, "[3,1]");
    BAD(kiln_index_add(f->g, NULL, 0, f->idx, F32(3, 6)), ia, "NULL");
    BAD(kiln_index_add(f->g, f->m, 0, f->idx, NULL), ia, "NULL");
    BAD(kiln_index_add(f->g, f->mi, 0, f->idx, I32(3, 6)), ia, "i32");
    BAD(kiln_index_add(f->g, f->m, 0, F32(3), F32(3, 6)), ia, "f32");
    BAD(kiln_index_add(f->g, f->m, 0, f->idx, F32(4, 6)), ia, "[4,6]");
    BAD(kiln_index_add(f->g, f->m, 0, f->idx, F32(3, 5)), ia, "[3,5]");
    BAD(kiln_index_add(f->g, f->m, 5, f->idx, F32(3, 6)), ia, "axis");
    BAD(kiln_gather(f->g, NULL, 0, f->mi), ga, "NULL");
    BAD(kiln_gather(f->g, f->m, 0, f->o), ga, "another graph");
    BAD(kiln_gather(f->g, f->m, 0, f->m), ga, "f32");
    BAD(kiln_gather(f->g, f->m, 0, f->idx), ga, "[3]");
    BAD(kiln_gather(f->g, f->m, 0, I32(2, 7)), ga, "[2,7]");
    BAD(kiln_gather(f->g, f->m, 2, f->mi), ga, "axis");
    BAD(kiln_scatter_add(f->g, NULL, 0, f->mi, f->m), sa, "NULL");
    BAD(kiln_scatter_add(f->g, f->m, 0, f->mi, NULL), sa, "NULL");
    BAD(kiln_scatter_add(f->g, f->mi, 0, f->mi, f->mi), sa, "i32");
    BAD(kiln_scatter_add(f->g, f->m, 0, f->m, f->m), sa, "f32");
    BAD(kiln_scatter_add(f->g, f->m, 0, I32(6, 6), f->m), sa, "[6,6]");
    BAD(kiln_scatter_add(f->g, f->m, 0, f->mi, F32(5, 5)), sa, "[5,5]");
    BAD(kiln_scatter_add(f->g, f->m, 0, f->idx, f->m), sa, "[3]");
    BAD(kiln_scatter_add(f->g, f->m, -3, f->mi, f->m), sa, "axis");
    BAD(kiln_embedding(f->g, NULL, f->idx), em, "NULL");
    BAD(kiln_embedding(f->g, f->m, NULL), em, "NULL");
    BAD(kiln_embedding(f->g, f->c4, f->idx), em, "[4]");
    BAD(kiln_embedding(f->g, f->x, f->idx), em, "[2,4,8,8]");
    BAD(kiln_embedding(f->g, f->m, F32(3)), em, "f32");
    BAD(kiln_embedding(f->g, f->o, f->idx), em, "another graph");
    /* ids [8,8,8,8,8,8,8] + [D] is 9 dims */
    BAD(kiln_embedding(f->g, f->m, I32(2, 2, 2, 2, 2, 2, 2, 2)), em, NULL);
    /* 2^40 ids of 2^30 floats: 2^70 elements */
    BAD(kiln_embedding(f->g, F32(4, INT64_C(1) << 30), I32(INT64_C(1) << 40)),
        em, NULL);
    check_all();
}

/* ------------------------------------------------ scans, reductions, small
   ops */

static void test_small_op_args(void **state)
{
    (void)state;
    kiln_node *v = NULL, *ix = NULL;
    BAD(kiln_cumsum(f->g, NULL, 0), "kiln_cumsum", "NULL");
    BAD(kiln_cumsum(f->g, f->o, 0), "kiln_cumsum", "another graph");
    BAD(kiln_cumsum(f->g, f->mi, 0), "kiln_cumsum", "i32");
    BAD(kiln_cumsum(f->g, f->m, 2), "kiln_cumsum", "axis");
    BAD(kiln_cumsum(f->g, f->m, INT_MIN), "kiln_cumsum", "axis");
    BAD(kiln_prod(f->g, NULL, 1u, 0), "kiln_prod", "NULL");
    BAD(kiln_prod(f->g, f->mi, 1u, 0), "kiln_prod", "i32");
    BAD(kiln_prod(f->g, f->m, 4u, 0), "kiln_prod", "axes");
    BAD(kiln_prod(f->g, f->m, 1u << 31, 0), "kiln_prod", "axes");
    BAD(kiln_reduce_min(f->g, f->m, 4u, 0), "kiln_reduce_min", "axes");
    BAD(kiln_reduce_min(f->g, NULL, 1u, 0), "kiln_reduce_min", "NULL");
    BAD(kiln_reduce_min(f->g, f->o, 1u, 0), "kiln_reduce_min", "another graph");
    BAD(kiln_logsumexp(f->g, f->m, 4u, 0), "kiln_logsumexp", "axes");
    BAD(kiln_logsumexp(f->g, f->mi, 1u, 0), "kiln_logsumexp", "i32");
    BAD(kiln_logsumexp(f->g, NULL, 1u, 0), "kiln_logsumexp", "NULL");
    BAD(kiln_variance(f->g, f->m, 4u, 1.0f, 0), "kiln_variance", "axes");
    BAD(kiln_variance(f->g, f->mi, 1u, 1.0f, 0), "kiln_variance", "i32");
    BAD(kiln_variance(f->g, f->m, 1u, NAN, 0), "kiln_variance", "correction");
    BAD(kiln_variance(f->g, f->m, 1u, INFINITY, 0), "kiln_variance",
        "correction");
    BAD(kiln_std(f->g, f->m, 1u, NAN, 0), "kiln_std", "correction");
    BAD(kiln_std(f->g, NULL, 1u, 1.0f, 0), "kiln_std", "NULL");
    BAD(kiln_std(f->g, f->m, 8u, 1.0f, 0), "kiln_std", "axes");
    BAD(kiln_masked_fill(f->g, NULL, f->mi, 0.0f), "kiln_masked_fill", "NULL");
    BAD(kiln_masked_fill(f->g, f->m, NULL, 0.0f), "kiln_masked_fill", "NULL");
    BAD(kiln_masked_fill(f->g, f->m, f->o, 0.0f), "kiln_masked_fill",
        "another graph");
    BAD(kiln_masked_fill(f->g, f->m, f->idx, 0.0f), "kiln_masked_fill", "[3]");
    BAD(kiln_masked_fill(f->g, f->m,
                         kiln_input(f->g, "mm", KILN_I32, KILN_SHAPE(2, 5, 6)),
                         0.0f),
        "kiln_masked_fill", "[2,5,6]");
    BAD(kiln_masked_fill(f->g, f->mi, f->mi, 0.0f), "kiln_masked_fill", "i32");
    BAD(kiln_tril(f->g, NULL, 0), "kiln_tril", "NULL");
    BAD(kiln_tril(f->g, f->c4, 0), "kiln_tril", "[4]");
    BAD(kiln_triu(f->g, f->c4, 0), "kiln_triu", "[4]");
    BAD(kiln_triu(f->g, f->o, 0), "kiln_triu", "another graph");
    BAD(kiln_clamp(f->g, f->m, NAN, 1.0f), "kiln_clamp", "NaN");
    BAD(kiln_clamp(f->g, f->m, 0.0f, NAN), "kiln_clamp", "NaN");
    BAD(kiln_clamp(f->g, NULL, 0.0f, 1.0f), "kiln_clamp", "NULL");
    BAD(kiln_clamp(f->g, f->mi, 0.0f, 1.0f), "kiln_clamp", "i32");
    BAD(kiln_select(f->g, f->idx, f->m, f->m), "kiln_select", NULL);
    BAD(kiln_select(f->g, f->mi, f->m, f->mi), "kiln_select", NULL);
    BAD(kiln_select(f->g, NULL, f->m, f->m), "kiln_select", "NULL");
    BAD(kiln_select(f->g, f->mi, f->o, f->m), "kiln_select", "another graph");
    /* topk: k outside [0, size], a bad axis, NULL outputs */
    int badk[] = {-1, 7, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof badk / sizeof *badk; i++) {
        fx f_;
        fx_new(&f_);
        assert_int_not_equal(kiln_topk(f_.g, f_.m, badk[i], 1, &v, &ix),
                             KILN_OK);
        expect_bad(&f_, v, "kiln_topk", "k", __LINE__);
        assert_int_equal(kiln_node_id(ix), -1);
        fx_free(&f_);
    }
    {
        fx f_;
        fx_new(&f_);
        assert_int_equal(kiln_topk(f_.g, f_.m, 2, 2, &v, &ix), KILN_ERR_ARG);
        expect_bad(&f_, v, "kiln_topk", "axis", __LINE__);
        fx_free(&f_);
        fx_new(&f_);
        assert_int_not_equal(kiln_topk(f_.g, f_.mi, 2, 1, &v, &ix), KILN_OK);
        expect_bad(&f_, v, "kiln_topk", "i32", __LINE__);
        fx_free(&f_);
        fx_new(&f_);
        assert_int_equal(kiln_topk(f_.g, f_.m, 2, 1, NULL, &ix), KILN_ERR_ARG);
        expect_bad(&f_, kiln_relu(f_.g, f_.m), "kiln_topk", "NULL", __LINE__);
        fx_free(&f_);
    }
    check_all();
}

/* ------------------------------------------------ attention, integer math */

static void test_attention_args(void **state)
{
    (void)state;
    const char *sd = "kiln_scaled_dot_product_attention";
    kiln_attention_options o = {0, NAN};
    BAD(kiln_scaled_dot_product_attention(f->g, NULL, f->q, f->q, NULL, NULL),
        sd, "NULL");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, NULL, f->q, NULL, NULL),
        sd, "NULL");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, f->o, NULL, NULL),
        sd, "another graph");
    BAD(kiln_scaled_dot_product_attention(f->g, f->m, f->m, f->m, NULL, NULL),
        sd, "[5,6]");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->x3, f->q, NULL, NULL),
        sd, "[2,4,8]");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, F32(2, 2, 5, 7),
                                          F32(2, 2, 5, 8), NULL, NULL),
        sd, "[2,2,5,7]");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, F32(2, 2, 4, 8),
                                          NULL, NULL),
        sd, "[2,2,4,8]");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, F32(3, 2, 5, 8),
                                          F32(3, 2, 5, 8), NULL, NULL),
        sd, "[3,2,5,8]");
    BAD(kiln_scaled_dot_product_attention(f->g, kiln_cast(f->g, f->q, KILN_I32),
                                          f->q, f->q, NULL, NULL),
        sd, "i32");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, f->q, F32(3, 5),
                                          NULL),
        sd, "[3,5]");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, f->q, f->o, NULL),
        sd, "another graph");
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, f->q, NULL, &o), sd,
        "scale");
    o.scale = INFINITY;
    BAD(kiln_scaled_dot_product_attention(f->g, f->q, f->q, f->q, NULL, &o), sd,
        "scale");
    BAD(kiln_split_heads(f->g, NULL, 2), "kiln_split_heads", "NULL");
    BAD(kiln_split_heads(f->g, f->x3, 0), "kiln_split_heads", "0");
    BAD(kiln_split_heads(f->g, f->x3, -2), "kiln_split_heads", "-2");
    BAD(kiln_split_heads(f->g, f->x3, 3), "kiln_split_heads", "3");
    BAD(kiln_split_heads(f->g, f->x3, INT_MIN), "kiln_split_heads", NULL);
    BAD(kiln_split_heads(f->g, f->x, 2), "kiln_split_heads", "[2,4,8,8]");
    BAD(kiln_merge_heads(f->g, NULL), "kiln_merge_heads", "NULL");
    BAD(kiln_merge_heads(f->g, f->x3), "kiln_merge_heads", "[2,4,8]");
    BAD(kiln_merge_heads(f->g, f->o), "kiln_merge_heads", "another graph");
    check_all();
}

static void test_int_args(void **state)
{
    (void)state;
    kiln_node *(*ops[])(kiln_graph *, kiln_node *, kiln_node *) = {
        kiln_int_add, kiln_int_sub, kiln_int_mul, kiln_int_floor_div,
        kiln_int_mod};
    const char *names[] = {"kiln_int_add", "kiln_int_sub", "kiln_int_mul",
                           "kiln_int_floor_div", "kiln_int_mod"};
    for (int i = 0; i < 5; i++) {
        BAD(ops[i](f->g, f->m, f->mi), names[i], "f32");
        BAD(ops[i](f->g, f->mi, f->m), names[i], "f32");
        BAD(ops[i](f->g, f->mi, I32(5, 5)), names[i], "[5,5]");
        BAD(ops[i](f->g, NULL, f->mi), names[i], "NULL");
        BAD(ops[i](f->g, f->mi, NULL), names[i], "NULL");
        BAD(ops[i](f->g, f->mi, kiln_cast(f->g2, f->o, KILN_I32)), names[i],
            "another graph");
    }
    check_all();
}

/* ------------------------------------------------ losses, recurrent cells */

static void test_loss_and_cell_args(void **state)
{
    (void)state;
    const char *ce = "kiln_cross_entropy_loss";
#define CE(logits, labels, red, smooth)                                        \
    kiln_cross_entropy_loss(f->g, logits, labels, red, KILN_IGNORE_NONE, smooth)
    BAD(CE(NULL, I32(5), KILN_REDUCE_MEAN, 0.0f), ce, "NULL");
    BAD(CE(f->m, NULL, KILN_REDUCE_MEAN, 0.0f), ce, "NULL");
    BAD(CE(f->m, F32(5), KILN_REDUCE_MEAN, 0.0f), ce, "f32");
    BAD(CE(f->mi, I32(5), KILN_REDUCE_MEAN, 0.0f), ce, "i32");
    BAD(CE(f->m, I32(4), KILN_REDUCE_MEAN, 0.0f), ce, "[4]");
    BAD(CE(f->x3, I32(2), KILN_REDUCE_MEAN, 0.0f), ce, "[2,4,8]");
    BAD(CE(f->m, I32(5), (kiln_reduction)7, 0.0f), ce, "reduction");
    BAD(CE(f->m, I32(5), (kiln_reduction)-1, 0.1f), ce, "reduction");
    float bads[] = {-0.1f, 1.5f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++)
        BAD(CE(f->m, I32(5), KILN_REDUCE_NONE, bads[i]), ce, "label_smoothing");
    BAD(CE(f->m, f->o, KILN_REDUCE_SUM, 0.0f), ce, "another graph");
#undef CE
    kiln_node *ho = NULL, *co = NULL;
#define LSTM(x, h, c, wih, whh, bih, bhh)                                      \
    do {                                                                       \
        fx f_;                                                                 \
        fx_new(&f_);                                                           \
        fx *f = &f_;                                                           \
        assert_int_not_equal(                                                  \
            kiln_lstm_cell(f->g, x, h, c, wih, whh, bih, bhh, &ho, &co),       \
            KILN_OK);                                                          \
        expect_bad(f, ho, "kiln_lstm_cell", NULL, __LINE__);                   \
        assert_int_equal(kiln_node_id(co), -1);                                \
        fx_free(&f_);                                                          \
    } while (0)
    /* x [B=5, I=6], h c [5, 3], w_ih [12, 6], w_hh [12, 3], biases [12] */
    LSTM(NULL, F32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->m, F32(5, 3), NULL, F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->m, F32(5, 3), F32(5, 3), F32(12, 5), F32(12, 3), NULL, NULL);
    LSTM(f->m, F32(5, 3), F32(5, 3), F32(9, 6), F32(9, 3), NULL, NULL);
    LSTM(f->m, F32(5, 3), F32(5, 4), F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->m, F32(4, 3), F32(4, 3), F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->m, I32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->mi, F32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->m, F32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), F32(9), NULL);
    LSTM(f->m, F32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), NULL, I32(12));
    LSTM(f->m, F32(5, 3), f->o, F32(12, 6), F32(12, 3), NULL, NULL);
    LSTM(f->x3, F32(5, 3), F32(5, 3), F32(12, 6), F32(12, 3), NULL, NULL);
#undef LSTM
    {
        fx f_;
        fx_new(&f_);
        assert_int_equal(kiln_lstm_cell(f_.g, f_.m, f_.m, f_.m, f_.m, f_.m,
                                        NULL, NULL, NULL, &co),
                         KILN_ERR_ARG);
        expect_bad(&f_, kiln_relu(f_.g, f_.m), "kiln_lstm_cell", "NULL",
                   __LINE__);
        fx_free(&f_);
    }
    const char *gr = "kiln_gru_cell";
    BAD(kiln_gru_cell(f->g, NULL, F32(5, 3), F32(9, 6), F32(9, 3), NULL, NULL),
        gr, "NULL");
    BAD(kiln_gru_cell(f->g, f->m, F32(5, 3), F32(12, 6), F32(12, 3), NULL,
                      NULL),
        gr, NULL);
    BAD(kiln_gru_cell(f->g, f->m, F32(5, 3), F32(9, 6), F32(9, 4), NULL, NULL),
        gr, "[9,4]");
    BAD(kiln_gru_cell(f->g, f->m, F32(5, 3), F32(9, 6), F32(9, 3), F32(3),
                      NULL),
        gr, "[3]");
    BAD(kiln_gru_cell(f->g, f->mi, F32(5, 3), F32(9, 6), F32(9, 3), NULL, NULL),
        gr, "i32");
    BAD(kiln_gru_cell(f->g, f->m, f->o, F32(9, 6), F32(9, 3), NULL, NULL), gr,
        "another graph");
    BAD(kiln_gru_cell(f->g, f->m, F32(5, 3), F32(9, 6), I32(9, 3), NULL, NULL),
        gr, "i32");
#undef I32
#undef F32
    check_all();
}

/* ------------------------------------------------ run time: indices */

static kiln_tensor *i32_tensor(kiln_shape s, const int32_t *v)
{
    kiln_tensor *t = kiln_tensor_new(KILN_I32, s);
    assert_non_null(t);
    memcpy(kiln_tensor_data(t), v, (size_t)kiln_tensor_numel(t) * 4);
    return t;
}

static kiln_tensor *f32_tensor(kiln_shape s, float v)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, s);
    assert_non_null(t);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
        kiln_tensor_f32(t)[i] = v + (float)i;
    return t;
}

static void want_msg(const char *msg, const char *n1, const char *n2,
                     const char *path, int line)
{
    if ((n1 && !strstr(msg, n1)) || (n2 && !strstr(msg, n2)))
        fail_msg("line %d (%s): message \"%s\" lacks \"%s\" or \"%s\"", line,
                 path, msg, n1, n2 ? n2 : "");
}

/* y fails at run time with KILN_ERR_ARG and a message holding n1 and n2 on
   the compiled and the dynamic path, and the same session then runs good
   feeds (good[i] replacing bad[i]) again. */
static void expect_run_fail(kiln_graph *g, kiln_node *y, kiln_node *const *ins,
                            kiln_tensor *const *bad, kiln_tensor *const *good,
                            int n_in, const char *n1, const char *n2, int line)
{
    th_assert_graph_ok(g);
    kiln_session *s = kiln_session_new(NULL);
    assert_non_null(s);
    kiln_function *fn = kiln_compile(s, g, &y, 1, ins, n_in);
    if (!fn)
        fail_msg("line %d: kiln_compile: %s", line, kiln_session_error(s));
    kiln_tensor *out = kiln_function_new_output(fn, 0);
    assert_int_equal(kiln_run(fn, bad, &out), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), n1, n2, "compiled", line);
    if (kiln_run(fn, good, &out) != KILN_OK)
        fail_msg("line %d: good run: %s", line, kiln_session_error(s));
    assert_string_equal(kiln_session_error(s), "");
    for (int i = 0; i < n_in; i++)
        assert_int_equal(kiln_feed(s, ins[i], bad[i]), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_ARG);
    want_msg(kiln_session_error(s), n1, n2, "dynamic", line);
    for (int i = 0; i < n_in; i++)
        assert_int_equal(kiln_feed(s, ins[i], good[i]), KILN_OK);
    if (kiln_forward(s, g) != KILN_OK)
        fail_msg("line %d: good forward: %s", line, kiln_session_error(s));
    kiln_tensor_free(out);
    kiln_function_free(fn);
    kiln_session_free(s);
    for (int i = 0; i < n_in; i++) {
        kiln_tensor_free(bad[i]);
        kiln_tensor_free(good[i]);
    }
}

/* One op reading i32 indices: its inputs (the indices at ins[1]) and
   node, the axis size they index, where the bad one sits and what the
   message calls the op. */
typedef struct index_case {
    const char *op, *at;
    kiln_shape shapes[3];
    int n_in, pos; /* inputs; flat position of the bad index */
    int64_t size;
} index_case;

static kiln_node *index_case_node(int c, kiln_graph *g, kiln_node *const *in)
{
    switch (c) {
    case 0:
        return kiln_index_select(g, in[0], 0, in[1]);
    case 1:
        return kiln_index_add(g, in[0], 0, in[1], in[2]);
    case 2:
        return kiln_gather(g, in[0], 1, in[1]);
    case 3:
        return kiln_scatter_add(g, in[0], 1, in[1], in[2]);
    case 4:
        return kiln_embedding(g, in[0], in[1]);
    default:
        return kiln_cross_entropy_loss(g, in[0], in[1], KILN_REDUCE_NONE, -100,
                                       0.1f);
    }
}

/* Every index op, fed an index outside its axis (its size, -1, INT_MIN,
   INT_MAX), names the op, the index and its position. */
static void test_run_bad_indices(void **state)
{
    (void)state;
    /* KILN_SHAPE is no constant expression: a table of automatic storage */
    const index_case index_cases[] = {
        {"index_select", "[2]", {KILN_SHAPE(5, 6), KILN_SHAPE(3)}, 2, 2, 5},
        {"index_add",
         "[2]",
         {KILN_SHAPE(5, 6), KILN_SHAPE(3), KILN_SHAPE(3, 6)},
         3,
         2,
         5},
        {"gather", "[2,1]", {KILN_SHAPE(5, 6), KILN_SHAPE(3, 3)}, 2, 7, 6},
        {"scatter_add",
         "[2,1]",
         {KILN_SHAPE(5, 6), KILN_SHAPE(3, 3), KILN_SHAPE(4, 4)},
         3,
         7,
         6},
        /* embedding is an index_select of the table's rows */
        {"index_select",
         "[1,0]",
         {KILN_SHAPE(5, 6), KILN_SHAPE(2, 2)},
         2,
         2,
         5},
        /* the loss with smoothing picks each label's logit with a gather of
           the labels as a column */
        {"gather", "[1,0]", {KILN_SHAPE(3, 5), KILN_SHAPE(3)}, 2, 1, 5},
    };
    for (int c = 0; c < (int)(sizeof index_cases / sizeof *index_cases); c++) {
        const index_case *ic = &index_cases[c];
        const int32_t hostile[] = {(int32_t)ic->size, -1, INT_MIN, INT_MAX};
        for (int h = 0; h < 4; h++) {
            kiln_graph *g = kiln_graph_new();
            kiln_node *ins[3];
            kiln_tensor *bad[3], *good[3];
            for (int i = 0; i < ic->n_in; i++) {
                kiln_dtype dt = i == 1 ? KILN_I32 : KILN_F32;
                ins[i] = kiln_input(g, i == 1 ? "idx" : "x", dt, ic->shapes[i]);
                bad[i] = i == 1 ? kiln_tensor_new(KILN_I32, ic->shapes[1])
                                : f32_tensor(ic->shapes[i], (float)i);
                good[i] = i == 1 ? kiln_tensor_new(KILN_I32, ic->shapes[1])
                                 : f32_tensor(ic->shapes[i], (float)i);
            }
            /* indices j % size, the one at pos hostile in bad */
            int32_t *vb = kiln_tensor_data(bad[1]),
                    *vg = kiln_tensor_data(good[1]);
            for (int64_t j = 0; j < kiln_tensor_numel(bad[1]); j++)
                vb[j] = vg[j] = (int32_t)(j % ic->size);
            vb[ic->pos] = hostile[h];
            char at[64];
            snprintf(at, sizeof at, "index %d at %s", (int)hostile[h], ic->at);
            expect_run_fail(g, index_case_node(c, g, ins), ins, bad, good,
                            ic->n_in, ic->op, at, __LINE__);
            kiln_graph_free(g);
        }
    }
    /* a zero divisor names its position */
    for (int op = 0; op < 2; op++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *ins[2] = {kiln_input(g, "a", KILN_I32, KILN_SHAPE(2, 2)),
                             kiln_input(g, "b", KILN_I32, KILN_SHAPE(2, 2))};
        expect_run_fail(
            g, (op ? kiln_int_mod : kiln_int_floor_div)(g, ins[0], ins[1]), ins,
            (kiln_tensor *[]){
                i32_tensor(KILN_SHAPE(2, 2), (int32_t[]){1, INT_MIN, 3, 4}),
                i32_tensor(KILN_SHAPE(2, 2), (int32_t[]){1, -1, 0, 2})},
            (kiln_tensor *[]){
                i32_tensor(KILN_SHAPE(2, 2), (int32_t[]){1, INT_MIN, 3, 4}),
                i32_tensor(KILN_SHAPE(2, 2), (int32_t[]){1, -1, 7, 2})},
            2, op ? "int_mod" : "int_floor_div", "[1,0]", __LINE__);
        kiln_graph_free(g);
    }
}

/* ------------------------------------------------ valid edge cases */

/* y of g, fed x = 0, 1, 2, ... of x's shape, on the compiled and the
   dynamic path, has PyTorch's shape and values (want, n of them). */
static void expect_values(kiln_graph *g, kiln_node *x, kiln_node *y,
                          kiln_shape shape, const double *want, int64_t n)
{
    th_assert_graph_ok(g);
    kiln_tensor *in = f32_tensor(kiln_node_shape(x), 0), *got[2];
    kiln_session *s = kiln_session_new(NULL);
    th_run(s, g, &y, 1, &x, &in, 1, &got[0]);
    th_forward(s, g, &y, 1, &x, &in, 1, &got[1]);
    for (int i = 0; i < 2; i++) {
        th_assert_shape(kiln_tensor_shape(got[i]), shape);
        assert_int_equal(kiln_tensor_numel(got[i]), n);
        th_assert_close(i ? "dynamic" : "compiled", kiln_tensor_f32(got[i]),
                        want, n, 1e-6, 1e-6);
        kiln_tensor_free(got[i]);
    }
    kiln_tensor_free(in);
    kiln_session_free(s);
    kiln_graph_free(g);
}

#define EDGE(xshape, build, yshape, ...)                                       \
    do {                                                                       \
        kiln_graph *g = kiln_graph_new();                                      \
        kiln_node *x = kiln_input(g, "x", KILN_F32, xshape);                   \
        const double want_[] = {__VA_ARGS__};                                  \
        expect_values(g, x, (build), yshape, want_,                            \
                      (int64_t)(sizeof want_ / sizeof *want_));                \
    } while (0)

/* Sizes at the edge of what PyTorch accepts build and give its values
   (tests/ref-free: the figures are PyTorch 1.13's, quoted). */
static void test_valid_edges(void **state)
{
    (void)state;
    const kiln_conv_params big_stride = cp(INT_MAX, 0, 1, 1);
    const int k3[2] = {3, 3}, k9[2] = {9, 2}, kbig[2] = {INT_MAX, INT_MAX};
    /* conv2d: the kernel the input's size, and a stride beyond it */
    EDGE(KILN_SHAPE(1, 1, 3, 3),
         kiln_conv2d(g, x, kiln_fill(g, KILN_SHAPE(1, 1, 3, 3), 1.0f), NULL,
                     NULL),
         KILN_SHAPE(1, 1, 1, 1), 36);
    EDGE(KILN_SHAPE(1, 1, 8, 8),
         kiln_conv2d(g, x, kiln_fill(g, KILN_SHAPE(1, 1, 3, 3), 1.0f), NULL,
                     &big_stride),
         KILN_SHAPE(1, 1, 1, 1), 81);
    /* F.max_pool2d(arange(9).view(1,1,3,3), 3) */
    EDGE(KILN_SHAPE(1, 1, 3, 3), kiln_max_pool2d(g, x, k3, NULL, NULL, NULL, 0),
         KILN_SHAPE(1, 1, 1, 1), 8);
    /* ceil mode lets a kernel larger than the input through (one window) */
    EDGE(KILN_SHAPE(1, 1, 8, 8), kiln_max_pool2d(g, x, k9, NULL, NULL, NULL, 1),
         KILN_SHAPE(1, 1, 1, 4), 57, 59, 61, 63);
    EDGE(KILN_SHAPE(1, 1, 8, 8), kiln_avg_pool2d(g, x, k9, NULL, NULL, 1, 0),
         KILN_SHAPE(1, 1, 1, 4), 28.5, 30.5, 32.5, 34.5);
    EDGE(KILN_SHAPE(1, 2, 8, 8), kiln_avg_pool2d(g, x, kbig, NULL, NULL, 1, 0),
         KILN_SHAPE(1, 2, 1, 1), 31.5, 95.5);
    /* F.adaptive_avg_pool2d(arange(6).view(1,1,2,3), (5,7)): larger output */
    EDGE(KILN_SHAPE(1, 1, 2, 3), kiln_adaptive_avg_pool2d(g, x, 5, 7),
         KILN_SHAPE(1, 1, 5, 7), 0, 0, 0.5, 1, 1.5, 2, 2, 0, 0, 0.5, 1, 1.5, 2,
         2, 1.5, 1.5, 2, 2.5, 3, 3.5, 3.5, 3, 3, 3.5, 4, 4.5, 5, 5, 3, 3, 3.5,
         4, 4.5, 5, 5);
    /* reflect by size - 1, the most allowed; replicate by more than the
       size */
    EDGE(KILN_SHAPE(1, 1, 3),
         kiln_pad_mode(g, x, (const int64_t[]){2, 2}, 2, KILN_PAD_REFLECT),
         KILN_SHAPE(1, 1, 7), 2, 1, 0, 1, 2, 1, 0);
    EDGE(KILN_SHAPE(1, 2, 3),
         kiln_pad_mode(g, x, (const int64_t[]){2, 4, 1, 1}, 4,
                       KILN_PAD_REPLICATE),
         KILN_SHAPE(1, 4, 9), 0, 0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 0, 1, 2, 2, 2, 2,
         2, 3, 3, 3, 4, 5, 5, 5, 5, 5, 3, 3, 3, 4, 5, 5, 5, 5, 5);
    /* F.interpolate(arange(4).view(1,1,2,2), scale_factor=1.5, bilinear) */
    EDGE(KILN_SHAPE(1, 1, 2, 2),
         kiln_upsample2d(g, x, NULL, (const double[]){1.5, 1.5},
                         KILN_UPSAMPLE_BILINEAR, 0),
         KILN_SHAPE(1, 1, 3, 3), 0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3);
    /* torch.clamp(x, 3, 1): every element is hi */
    EDGE(KILN_SHAPE(3), kiln_clamp(g, x, 3.0f, 1.0f), KILN_SHAPE(3), 1, 1, 1);
    /* infinite bounds are one-sided */
    EDGE(KILN_SHAPE(3), kiln_clamp(g, x, -INFINITY, 1.0f), KILN_SHAPE(3), 0, 1,
         1);
    /* any diagonal, however far */
    EDGE(KILN_SHAPE(2, 2), kiln_tril(g, x, INT_MAX), KILN_SHAPE(2, 2), 0, 1, 2,
         3);
    EDGE(KILN_SHAPE(2, 2), kiln_tril(g, x, INT_MIN), KILN_SHAPE(2, 2), 0, 0, 0,
         0);
    EDGE(KILN_SHAPE(2, 2), kiln_triu(g, x, INT_MIN), KILN_SHAPE(2, 2), 0, 1, 2,
         3);
    /* F.group_norm(arange(8).view(1,4,2), 4, eps=0): one group per channel */
    EDGE(KILN_SHAPE(1, 4, 2), kiln_group_norm(g, x, 4, NULL, NULL, 0.0f),
         KILN_SHAPE(1, 4, 2), -1, 1, -1, 1, -1, 1, -1, 1);
    /* torch.index_select with a 0-d index keeps the axis, size 1 */
    EDGE(KILN_SHAPE(3, 2),
         kiln_index_select(
             g, x, 0,
             kiln_constant(g, KILN_I32, KILN_SCALAR, (const int32_t[]){2})),
         KILN_SHAPE(1, 2), 4, 5);
    /* ceil mode drops a last window that would start in the padding
       (PyTorch): 3 x 3, not 4 x 4 with a window of no element */
    const int k2[2] = {2, 2}, p1[2] = {1, 1};
    EDGE(KILN_SHAPE(1, 1, 5, 5), kiln_avg_pool2d(g, x, k2, k2, p1, 1, 0),
         KILN_SHAPE(1, 1, 3, 3), 0, 1.5, 3.5, 7.5, 9, 11, 17.5, 19, 21);
    EDGE(KILN_SHAPE(1, 1, 5, 5), kiln_max_pool2d(g, x, k2, k2, p1, NULL, 1),
         KILN_SHAPE(1, 1, 3, 3), 0, 2, 4, 10, 12, 14, 20, 22, 24);
    /* F.group_norm(arange(8).view(2,4), 2): no spatial dims */
    EDGE(KILN_SHAPE(2, 4), kiln_group_norm(g, x, 2, NULL, NULL, 1e-5f),
         KILN_SHAPE(2, 4), -0.99998, 0.99998, -0.99998, 0.99998, -0.99998,
         0.99998, -0.99998, 0.99998);
    /* torch.flatten of a 0-d tensor is [1] */
    EDGE(KILN_SCALAR, kiln_flatten(g, x, 0, -1), KILN_SHAPE(1), 0);
    /* attention over no keys gives 0 (documented; PyTorch NaN) */
    EDGE(KILN_SHAPE(1, 1, 2, 3),
         kiln_scaled_dot_product_attention(
             g, x, kiln_fill(g, KILN_SHAPE(1, 1, 0, 3), 1.0f),
             kiln_fill(g, KILN_SHAPE(1, 1, 0, 3), 1.0f), NULL, NULL),
         KILN_SHAPE(1, 1, 2, 3), 0, 0, 0, 0, 0, 0);
    /* topk of none, flatten of one dim */
    GOOD(kiln_flatten(f->g, f->x, 2, 2), 2, 4, 8, 8);
    GOOD(kiln_flatten(f->g, f->x, -1, -1), 2, 4, 8, 8);
    {
        fx f_;
        fx_new(&f_);
        kiln_node *v = NULL, *ix = NULL;
        assert_int_equal(kiln_topk(f_.g, f_.m, 0, -1, &v, &ix), KILN_OK);
        th_assert_shape(kiln_node_shape(v), KILN_SHAPE(5, 0));
        th_assert_shape(kiln_node_shape(ix), KILN_SHAPE(5, 0));
        assert_int_equal(kiln_topk(f_.g, f_.m, 6, 1, &v, &ix), KILN_OK);
        th_assert_shape(kiln_node_shape(v), KILN_SHAPE(5, 6));
        fx_free(&f_);
    }
}

/* i32 arithmetic wraps as PyTorch's (two's complement), with no signed
   overflow in the kernels (UBSan stops on one), INT_MIN / -1 included. */
static void test_int_wraparound(void **state)
{
    (void)state;
    const int32_t a[4] = {INT_MAX, INT_MIN, -7, 7}, b[4] = {1, -1, 2, -2};
    kiln_node *(*ops[5])(kiln_graph *, kiln_node *, kiln_node *) = {
        kiln_int_add, kiln_int_sub, kiln_int_mul, kiln_int_floor_div,
        kiln_int_mod};
    const int32_t want[5][4] = {
        {INT_MIN, INT_MAX, -5, 5},
        {INT_MAX - 1, INT_MIN + 1, -9, 9},
        {INT_MAX, INT_MIN, -14, -14},
        {INT_MAX, INT_MIN, -4, -4},
        {0, 0, 1, -1},
    };
    for (int op = 0; op < 5; op++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *ins[2] = {kiln_input(g, "a", KILN_I32, KILN_SHAPE(4)),
                             kiln_input(g, "b", KILN_I32, KILN_SHAPE(4))};
        kiln_node *y = ops[op](g, ins[0], ins[1]);
        kiln_tensor *feed[2] = {i32_tensor(KILN_SHAPE(4), a),
                                i32_tensor(KILN_SHAPE(4), b)},
                    *got[2];
        kiln_session *s = kiln_session_new(NULL);
        th_run(s, g, &y, 1, ins, feed, 2, &got[0]);
        th_forward(s, g, &y, 1, ins, feed, 2, &got[1]);
        for (int p = 0; p < 2; p++) {
            const int32_t *v = kiln_tensor_data(got[p]);
            for (int i = 0; i < 4; i++)
                if (v[i] != want[op][i])
                    fail_msg("op %d path %d element %d: %d, want %d", op, p, i,
                             (int)v[i], (int)want[op][i]);
            kiln_tensor_free(got[p]);
        }
        kiln_tensor_free(feed[0]);
        kiln_tensor_free(feed[1]);
        kiln_session_free(s);
        kiln_graph_free(g);
    }
}

/* ------------------------------------------------ run time: empty batch */

/* y from x (f32, batch first) and ids (i32 [B, 3]) in g. */
typedef kiln_node *(*batch_op)(kiln_graph *g, kiln_node *x, kiln_node *ids);

static kiln_node *var(kiln_graph *g, const char *name, kiln_shape s)
{
    return kiln_variable(g, name, KILN_F32, s, kiln_init_uniform(-0.5, 0.5));
}

static kiln_node *op_conv2d(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_conv_params p = cp(1, 1, 1, 2);
    p.flags = KILN_CONV_RELU;
    return kiln_conv2d(g, x, var(g, "w", KILN_SHAPE(6, 2, 3, 3)),
                       var(g, "b", KILN_SHAPE(6)), &p);
}
static kiln_node *op_conv1d(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    return kiln_conv1d(g, kiln_reshape(g, x, KILN_SHAPE(-1, 4, 64)),
                       var(g, "w", KILN_SHAPE(6, 4, 3)), NULL, NULL);
}
static kiln_node *op_convt(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_conv_params p = cp(2, 1, 1, 1);
    p.output_padding[0] = 1;
    return kiln_conv_transpose2d(g, x, var(g, "w", KILN_SHAPE(4, 3, 3, 3)),
                                 var(g, "b", KILN_SHAPE(3)), &p);
}
static kiln_node *op_pools(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    const int k[2] = {3, 3}, st[2] = {2, 2}, pad[2] = {1, 1};
    kiln_node *m = kiln_max_pool2d(g, x, k, st, pad, NULL, 1);
    kiln_node *a = kiln_avg_pool2d(g, x, k, st, pad, 1, 0);
    return kiln_add(g, kiln_add(g, m, a), kiln_adaptive_avg_pool2d(g, x, 5, 5));
}
static kiln_node *op_resample(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_node *p =
        kiln_pad_mode(g, x, (const int64_t[]){3, 1, 2, 2}, 4, KILN_PAD_REFLECT);
    kiln_node *r = kiln_pad_mode(g, x, (const int64_t[]){1, 3, 2, 2}, 4,
                                 KILN_PAD_REPLICATE);
    kiln_node *u = kiln_upsample2d(g, x, (const int64_t[]){12, 12}, NULL,
                                   KILN_UPSAMPLE_BILINEAR, 1);
    return kiln_flatten(
        g,
        kiln_add(g, kiln_add(g, p, r),
                 kiln_upsample2d(g, u, (const int64_t[]){12, 12}, NULL,
                                 KILN_UPSAMPLE_NEAREST, 0)),
        1, -1);
}
static kiln_node *op_batch_norm(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_node *rm = kiln_node_set_trainable(
        kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(4), kiln_init_zeros()), 0);
    kiln_node *rv = kiln_node_set_trainable(
        kiln_variable(g, "rv", KILN_F32, KILN_SHAPE(4), kiln_init_ones()), 0);
    return kiln_batch_norm(g, x, var(g, "bw", KILN_SHAPE(4)),
                           var(g, "bb", KILN_SHAPE(4)), rm, rv, 0.1f, 1e-5f);
}
static kiln_node *op_norms(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_node *y = kiln_layer_norm(g, x, KILN_SHAPE(8, 8),
                                   var(g, "lw", KILN_SHAPE(8, 8)), NULL, 1e-5f);
    y = kiln_group_norm(g, y, 2, NULL, var(g, "gb", KILN_SHAPE(4)), 1e-5f);
    y = kiln_instance_norm(g, y, NULL, NULL, 1e-5f);
    return kiln_rms_norm(g, y, 2, var(g, "rw", KILN_SHAPE(8, 8)), -1.0f);
}
static kiln_node *op_dropout(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    return kiln_dropout2d(g, kiln_dropout(g, x, 0.3f), 0.5f);
}
static kiln_node *op_scans(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_node *y = kiln_cumsum(g, x, 1), *v = NULL, *ix = NULL;
    y = kiln_clamp(g, kiln_tril(g, y, -1), -3.0f, 3.0f);
    y = kiln_masked_fill(
        g, y, kiln_triu(g, kiln_fill(g, KILN_SHAPE(8, 8), 1), 2), -1.0f);
    kiln_topk(g, y, 3, -1, &v, &ix);
    kiln_node *r = kiln_add(g, kiln_logsumexp(g, v, KILN_AXIS(3), 0),
                            kiln_reduce_min(g, y, KILN_AXIS(3), 0));
    r = kiln_add(g, r, kiln_std(g, y, KILN_AXIS(3), 1.0f, 0));
    return kiln_add(g, r,
                    kiln_prod(g, kiln_scale(g, y, 0.1f), KILN_AXIS(3), 0));
}
static kiln_node *op_attention(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_attention_options o = {1, 0.0f};
    kiln_node *m = kiln_merge_heads(g, x); /* [B, 8, 32] */
    kiln_node *h = kiln_split_heads(g, m, 2);
    return kiln_scaled_dot_product_attention(g, h, h, h, NULL, &o);
}
static kiln_node *op_index(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    kiln_node *t = var(g, "t", KILN_SHAPE(5, 8));
    kiln_node *e = kiln_embedding(
        g, t,
        kiln_int_mod(g, ids,
                     kiln_constant(g, KILN_I32, KILN_SCALAR, (int32_t[]){5})));
    kiln_node *sel = kiln_index_select(
        g, x, 1, kiln_constant(g, KILN_I32, KILN_SHAPE(2), (int32_t[]){3, 0}));
    kiln_node *flat = kiln_reshape(g, sel, KILN_SHAPE(-1, 2 * 64));
    kiln_node *ga = kiln_gather(g, flat, 1, kiln_int_add(g, ids, ids));
    kiln_node *sa = kiln_scatter_add(g, flat, 1, ids, kiln_scale(g, ga, 2.0f));
    kiln_node *ia = kiln_index_add(
        g, sa, 1,
        kiln_constant(g, KILN_I32, KILN_SHAPE(3), (int32_t[]){7, 7, 0}), ga);
    kiln_node *es = kiln_sum(g, e, KILN_AXIS(2), 0);
    return kiln_concat(g, (kiln_node *[]){ia, es}, 2, 1);
}
static kiln_node *op_cells(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    (void)ids;
    kiln_node *in = kiln_reshape(g, x, KILN_SHAPE(-1, 256)), *h = NULL,
              *c = NULL;
    kiln_node *h0 = kiln_index_select(
        g, in, 1,
        kiln_constant(g, KILN_I32, KILN_SHAPE(3), (int32_t[]){0, 1, 2}));
    kiln_lstm_cell(g, in, h0, h0, var(g, "li", KILN_SHAPE(12, 256)),
                   var(g, "lh", KILN_SHAPE(12, 3)),
                   var(g, "lb", KILN_SHAPE(12)), NULL, &h, &c);
    kiln_node *gr = kiln_gru_cell(g, in, h, var(g, "gi", KILN_SHAPE(9, 256)),
                                  var(g, "gh", KILN_SHAPE(9, 3)), NULL,
                                  var(g, "gb", KILN_SHAPE(9)));
    return kiln_add(g, gr, c);
}
static kiln_node *op_loss(kiln_graph *g, kiln_node *x, kiln_node *ids)
{
    kiln_node *logits = kiln_reshape(g, x, KILN_SHAPE(-1, 4, 64));
    logits = kiln_sum(g, logits, KILN_AXIS(2), 0); /* [B, 4] */
    kiln_node *lab = kiln_reshape(
        g,
        kiln_index_select(
            g, ids, 1, kiln_constant(g, KILN_I32, KILN_SCALAR, (int32_t[]){0})),
        KILN_SHAPE(-1));
    return kiln_cross_entropy_loss(g, logits, lab, KILN_REDUCE_NONE, 1, 0.2f);
}

static const struct {
    const char *name;
    batch_op build;
} batch_ops[] = {
    {"conv2d", op_conv2d},
    {"conv1d", op_conv1d},
    {"conv_transpose2d", op_convt},
    {"pools", op_pools},
    {"pad/upsample/flatten", op_resample},
    {"batch_norm", op_batch_norm},
    {"norms", op_norms},
    {"dropout", op_dropout},
    {"scans", op_scans},
    {"attention", op_attention},
    {"index", op_index},
    {"cells", op_cells},
    {"loss", op_loss},
};

/* The op's output and the gradients of sum(y) for x and its variables at
   batch size b, compiled (symbolic batch, built at 2) or dynamic (built at
   b); their shapes must have b rows, and at b = 0 the weights' gradients
   are zeros. */
static void run_batch(int op, int64_t b, int dynamic)
{
    kiln_graph *g = kiln_graph_new();
    int64_t nb = dynamic ? b : 2;
    /* a symbolic size is built at >= 1 */
    unsigned sym = dynamic ? 0 : KILN_AXIS(0);
    kiln_node *x =
        kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(nb, 4, 8, 8), sym);
    kiln_node *ids = kiln_input_sym(g, "ids", KILN_I32, KILN_SHAPE(nb, 3), sym);
    kiln_node *y = batch_ops[op].build(g, x, ids);
    kiln_node *loss = kiln_sum(g, y, KILN_ALL_AXES, 0);
    kiln_node *dx = kiln_grad(g, loss, x);
    if (kiln_graph_status(g) != KILN_OK)
        fail_msg("%s: %s", batch_ops[op].name, kiln_graph_error(g));
    kiln_shape ys = kiln_node_shape(y), xs = KILN_SHAPE(b, 4, 8, 8);
    ys.d[0] = b;
    kiln_tensor *feed[2] = {f32_tensor(xs, -1.0f),
                            kiln_tensor_new(KILN_I32, KILN_SHAPE(b, 3))};
    for (int64_t i = 0; i < 3 * b; i++)
        ((int32_t *)kiln_tensor_data(feed[1]))[i] = (int32_t)(i * 7 % 4);
    kiln_session *s = kiln_session_new(NULL);
    kiln_session_set_training(s, 1);
    kiln_node *ins[2] = {x, ids}, *outs[2] = {y, dx};
    kiln_tensor *got[2];
    if (dynamic) {
        /* dx as a node of the graph, the variables' by kiln_backward */
        th_forward(s, g, outs, 2, ins, feed, 2, got);
        if (kiln_backward(s, g, loss) != KILN_OK)
            fail_msg("%s: backward: %s", batch_ops[op].name,
                     kiln_session_error(s));
    } else {
        kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
        if (!f)
            fail_msg("%s: compile: %s", batch_ops[op].name,
                     kiln_session_error(s));
        got[0] = kiln_tensor_new(KILN_F32, ys);
        got[1] = kiln_tensor_new(KILN_F32, xs);
        if (kiln_run(f, feed, got) != KILN_OK)
            fail_msg("%s at batch %lld: %s", batch_ops[op].name, (long long)b,
                     kiln_session_error(s));
        kiln_function_free(f);
    }
    th_assert_shape(kiln_tensor_shape(got[0]), ys);
    th_assert_shape(kiln_tensor_shape(got[1]), xs);
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; j < kiln_tensor_numel(got[i]); j++)
            if (!isfinite(kiln_tensor_f32(got[i])[j]))
                fail_msg("%s at batch %lld: %s element %lld is %g",
                         batch_ops[op].name, (long long)b, i ? "dx" : "y",
                         (long long)j, (double)kiln_tensor_f32(got[i])[j]);
    kiln_tensor_free(got[0]);
    kiln_tensor_free(got[1]);
    kiln_tensor_free(feed[0]);
    kiln_tensor_free(feed[1]);
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Every op runs at batch 0 (an empty result, as PyTorch) and then at 3 on
   one compiled function, and at 0 on the dynamic path, forward and
   backward, with finite values. */
static void test_empty_batch(void **state)
{
    (void)state;
    for (int op = 0; op < (int)(sizeof batch_ops / sizeof *batch_ops); op++) {
        run_batch(op, 0, 0);
        run_batch(op, 3, 0);
        run_batch(op, 0, 1);
        run_batch(op, 1, 1);
    }
}

/* F.batch_norm in training on an empty batch gives an empty result and
   leaves the running statistics as they were (PyTorch 1.13); it used to be
   refused ("expected more than 1 value per channel"), and a compiled
   function could not run at batch 0 at all. */
static void test_batch_norm_empty_keeps_running_stats(void **state)
{
    (void)state;
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        kiln_graph *g = kiln_graph_new();
        kiln_session *s = kiln_session_new(NULL);
        kiln_session_set_training(s, 1);
        kiln_node *x = kiln_input_sym(g, "x", KILN_F32,
                                      KILN_SHAPE(dynamic ? 0 : 2, 4, 8, 8),
                                      dynamic ? 0 : KILN_AXIS(0));
        kiln_node *y = op_batch_norm(g, x, NULL);
        kiln_tensor *in = f32_tensor(KILN_SHAPE(0, 4, 8, 8), 0), *out;
        if (dynamic)
            th_forward(s, g, &y, 1, &x, &in, 1, &out);
        else {
            kiln_function *f = kiln_compile(s, g, &y, 1, &x, 1);
            assert_non_null(f);
            out = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 4, 8, 8));
            assert_int_equal(kiln_run(f, &in, &out), KILN_OK);
            kiln_function_free(f);
        }
        th_assert_shape(kiln_tensor_shape(out), KILN_SHAPE(0, 4, 8, 8));
        kiln_tensor *r = kiln_tensor_new(KILN_F32, KILN_SHAPE(4));
        const char *names[2] = {"rm", "rv"};
        for (int i = 0; i < 2; i++) {
            assert_int_equal(kiln_variable_read(s, names[i], r), KILN_OK);
            for (int c = 0; c < 4; c++)
                assert_float_equal(kiln_tensor_f32(r)[c], (float)i, 0);
        }
        kiln_tensor_free(r);
        kiln_tensor_free(out);
        kiln_tensor_free(in);
        kiln_session_free(s);
        kiln_graph_free(g);
    }
}

/* A triangle's mask is a constant of the last two dims: one of 2^40
   elements (4 TiB) must be refused, not allocated. */
static void test_hostile_triangle(void **state)
{
    (void)state;
    BAD(kiln_tril(f->g,
                  kiln_input(f->g, "big", KILN_F32,
                             KILN_SHAPE(INT64_C(1) << 20, INT64_C(1) << 20)),
                  0),
        "kiln_tril", NULL);
    check_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_graph),
        cmocka_unit_test(test_conv_operands),
        cmocka_unit_test(test_conv_settings),
        cmocka_unit_test(test_pool_args),
        cmocka_unit_test(test_pad_upsample_flatten_args),
        cmocka_unit_test(test_norm_args),
        cmocka_unit_test(test_dropout_args),
        cmocka_unit_test(test_index_args),
        cmocka_unit_test(test_small_op_args),
        cmocka_unit_test(test_attention_args),
        cmocka_unit_test(test_int_args),
        cmocka_unit_test(test_loss_and_cell_args),
        cmocka_unit_test(test_run_bad_indices),
        cmocka_unit_test(test_valid_edges),
        cmocka_unit_test(test_int_wraparound),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_batch_norm_empty_keeps_running_stats),
        cmocka_unit_test(test_hostile_triangle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
