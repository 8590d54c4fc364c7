/* Data-parallel training, run by ctest under mpirun with 2 ranks: each
   rank trains its shard of every global batch with a communicator and,
   beside it, the same model alone on the whole batches; the two must
   agree step by step (losses) and at the end (every variable, in L2
   norm) within 1e-5 relative, in the compiled and in the dynamic path, for an
   MLP and a small CNN.  Also: the start-up check of mismatched models and
   configurations fails on every rank with the same message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

enum { ROWS = 501, FEATURES = 16, CLASSES = 4, BATCH = 128, STEPS = 50 };

static kiln_comm *comm;
static kiln_tensor *data_x, *data_y;

/* Deterministic data, the same on every rank: labels from a fixed linear
   map of the features, so that training makes progress. */
static void make_data(void)
{
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    data_x = kiln_tensor_new(KILN_F32, KILN_SHAPE(ROWS, FEATURES));
    data_y = kiln_tensor_new(KILN_I32, KILN_SHAPE(ROWS));
    float *x = kiln_tensor_f32(data_x);
    int32_t *y = kiln_tensor_i32(data_y);
    for (int i = 0; i < ROWS; i++) {
        double score[CLASSES] = {0};
        for (int f = 0; f < FEATURES; f++) {
            x[i * FEATURES + f] = (float)(2 * kiln_rng_uniform(&r) - 1);
            score[f % CLASSES] += x[i * FEATURES + f] * (f + 1);
        }
        y[i] = 0;
        for (int k = 1; k < CLASSES; k++)
            y[i] = score[k] > score[y[i]] ? k : y[i];
    }
}

typedef struct model {
    kiln_node *x, *y, *loss;
} model;

static kiln_node *param(kiln_graph *g, const char *name, kiln_shape s)
{
    return kiln_variable(g, name, KILN_F32, s, kiln_init_uniform(-0.3, 0.3));
}

/* An MLP (hidden > 0) or a small CNN (hidden = 0) on rows of x. */
static model build(kiln_graph *g, int rows, int hidden)
{
    model m;
    m.x = kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(rows, FEATURES),
                         KILN_AXIS(0));
    m.y = kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(rows), KILN_AXIS(0));
    kiln_node *h;
    if (hidden > 0) {
        h = kiln_relu(
            g, kiln_affine(g, m.x, param(g, "W0", KILN_SHAPE(FEATURES, hidden)),
                           param(g, "b0", KILN_SHAPE(hidden))));
    } else {
        const kiln_conv_params same = {.padding = {1, 1}};
        const int pool[2] = {2, 2};
        h = kiln_reshape(g, m.x, KILN_SHAPE(rows, 1, 4, 4));
        h = kiln_relu(g,
                      kiln_conv2d(g, h, param(g, "C", KILN_SHAPE(3, 1, 3, 3)),
                                  param(g, "c", KILN_SHAPE(3)), &same));
        h = kiln_flatten(g, kiln_max_pool2d(g, h, pool, NULL, NULL, NULL, 0), 1,
                         -1);
        hidden = 12;
    }
    kiln_node *z =
        kiln_affine(g, h, param(g, "W1", KILN_SHAPE(hidden, CLASSES)),
                    param(g, "b1", KILN_SHAPE(CLASSES)));
    m.loss = kiln_softmax_cross_entropy(g, z, m.y);
    return m;
}

/* One training run: on this rank's shards with the communicator (dist),
   or alone on whole batches.  losses[STEPS] gets the global batch's mean
   loss of each step; the session is returned for its variables. */
typedef struct run {
    kiln_session *s;
    double losses[STEPS];
} run;

static kiln_optimizer *adam(kiln_session *s)
{
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    o.lr = 0.02f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    assert_non_null(opt);
    return opt;
}

/* The batcher of the run and its batch tensors. */
static kiln_batcher *batches(int dist, kiln_tensor **xb, kiln_tensor **yb)
{
    int size = dist ? kiln_comm_size(comm) : 1;
    int local = (BATCH + size - 1) / size;
    kiln_batcher *b = kiln_batcher_new(data_x, data_y, BATCH, 1, 0, 11);
    assert_non_null(b);
    assert_int_equal(
        kiln_batcher_shard(b, dist ? kiln_comm_rank(comm) : 0, size), KILN_OK);
    *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(local, FEATURES));
    *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(local));
    return b;
}

/* The next batch (a new epoch when one ends), its rows given to the
   communicator; xb and yb are cut to the rows drawn. */
static int next_batch(kiln_batcher *b, int dist, kiln_tensor *xb,
                      kiln_tensor *yb, kiln_tensor **x, kiln_tensor **y)
{
    int rows = kiln_batcher_next(b, xb, yb);
    if (rows == 0)
        rows = kiln_batcher_next(b, xb, yb);
    assert_true(rows > 0);
    if (dist)
        assert_int_equal(
            kiln_comm_set_rows(comm, rows, kiln_batcher_global_rows(b)),
            KILN_OK);
    *x = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, FEATURES),
                          kiln_tensor_data(xb));
    *y = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(rows), kiln_tensor_data(yb));
    return rows;
}

static double global_loss(kiln_batcher *b, int dist, double loss, int rows)
{
    if (!dist)
        return loss;
    double share = loss * rows / kiln_batcher_global_rows(b);
    assert_int_equal(kiln_comm_allreduce_sum(comm, &share, 1), KILN_OK);
    return share;
}

/* A session whose initial variables differ on every rank unless
   synchronised: seeded by rank when distributed. */
static kiln_session *session(int dist)
{
    kiln_session_options so = {.seed = dist ? 100 + kiln_comm_rank(comm) : 100,
                               .threads = 1};
    kiln_session *s = kiln_session_new(&so);
    assert_non_null(s);
    if (dist)
        assert_int_equal(kiln_session_set_comm(s, comm), KILN_OK);
    return s;
}

static void train_compiled(run *r, int dist, int hidden)
{
    kiln_session *s = r->s = session(dist);
    kiln_graph *g = kiln_graph_new();
    model m = build(g, BATCH, hidden);
    kiln_optimizer *opt = adam(s);
    kiln_node *outs[2] = {m.loss, kiln_optimizer_build_step(opt, g, m.loss)};
    kiln_node *ins[2] = {m.x, m.y};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    assert_non_null(f);
    if (dist)
        assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    kiln_tensor *xb, *yb, *x, *y,
        *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_batcher *b = batches(dist, &xb, &yb);
    for (int i = 0; i < STEPS; i++) {
        int rows = next_batch(b, dist, xb, yb, &x, &y);
        kiln_tensor *in[2] = {x, y}, *out[2] = {loss, NULL};
        assert_int_equal(kiln_run(f, in, out), KILN_OK);
        r->losses[i] = global_loss(b, dist, kiln_tensor_f32(loss)[0], rows);
        kiln_tensor_free(x);
        kiln_tensor_free(y);
    }
    kiln_tensor_free(loss);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_batcher_free(b);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
}

/* Marian's way: the graph rebuilt for every batch, kiln_backward then
   kiln_optimizer_update. */
static void train_dynamic(run *r, int dist, int hidden)
{
    kiln_session *s = r->s = session(dist);
    kiln_graph *g = kiln_graph_new();
    kiln_optimizer *opt = adam(s);
    kiln_tensor *xb, *yb, *x, *y;
    kiln_batcher *b = batches(dist, &xb, &yb);
    for (int i = 0; i < STEPS; i++) {
        int rows = next_batch(b, dist, xb, yb, &x, &y);
        kiln_graph_clear(g);
        model m = build(g, rows, hidden);
        assert_int_equal(kiln_feed(s, m.x, x), KILN_OK);
        assert_int_equal(kiln_feed(s, m.y, y), KILN_OK);
        assert_int_equal(kiln_forward(s, g), KILN_OK);
        if (i == 0 && dist) /* the variables exist once forward ran */
            assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
        if (i == 0 && dist) { /* again, from rank 0's values */
            assert_int_equal(kiln_feed(s, m.x, x), KILN_OK);
            assert_int_equal(kiln_forward(s, g), KILN_OK);
        }
        assert_int_equal(kiln_backward(s, g, m.loss), KILN_OK);
        r->losses[i] =
            global_loss(b, dist, kiln_node_value_f32(s, m.loss)[0], rows);
        assert_int_equal(kiln_optimizer_update(opt, g), KILN_OK);
        kiln_tensor_free(x);
        kiln_tensor_free(y);
    }
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_batcher_free(b);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
}

/* |a - b| <= 1e-5 |b| (L2 norms) for every variable of the two
   sessions. */
static void assert_same_variables(kiln_session *a, kiln_session *b)
{
    int n = kiln_session_num_variables(b);
    assert_int_equal(kiln_session_num_variables(a), n);
    for (int i = 0; i < n; i++) {
        kiln_param_info pa, pb;
        assert_int_equal(kiln_session_variable_info(b, i, &pb), KILN_OK);
        assert_int_equal(kiln_session_variable_info(
                             a, kiln_session_find_variable(a, pb.name), &pa),
                         KILN_OK);
        if (pb.dtype != KILN_F32)
            continue;
        const float *va = pa.data, *vb = pb.data;
        double diff = 0, norm = 0;
        for (int64_t j = 0; j < kiln_shape_numel(pb.shape); j++) {
            diff += ((double)va[j] - vb[j]) * ((double)va[j] - vb[j]);
            norm += (double)vb[j] * vb[j];
        }
        if (sqrt(diff) > 1e-5 * sqrt(norm))
            fail_msg("%s: |difference| %g, |values| %g", pb.name, sqrt(diff),
                     sqrt(norm));
    }
}

static void assert_same_run(run *d, run *one)
{
    for (int i = 0; i < STEPS; i++)
        if (fabs(d->losses[i] - one->losses[i]) > 1e-5 * fabs(one->losses[i]))
            fail_msg("step %d: loss %.9g with %d ranks, %.9g alone", i + 1,
                     d->losses[i], kiln_comm_size(comm), one->losses[i]);
    assert_true(one->losses[STEPS - 1] < 0.8 * one->losses[0]);
    assert_same_variables(d->s, one->s);
    kiln_session_free(d->s);
    kiln_session_free(one->s);
}

static void test_compiled_mlp(void **state)
{
    (void)state;
    run d, one;
    kiln_comm_reset_stats(comm);
    train_compiled(&d, 1, 24);
    train_compiled(&one, 0, 24);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    /* every gradient's values, once per step */
    int64_t values = FEATURES * 24 + 24 + 24 * CLASSES + CLASSES;
    assert_int_equal(st.bytes, (int64_t)STEPS * values * 4);
    assert_true(st.allreduces >= STEPS);
    assert_same_run(&d, &one);
}

static void test_compiled_mlp_small_buckets(void **state)
{
    (void)state;
    run d, one;
    /* one bucket per gradient: four all-reduces in flight per step */
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 64), KILN_OK);
    kiln_comm_reset_stats(comm);
    train_compiled(&d, 1, 24);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    assert_int_equal(st.allreduces, 4 * STEPS);
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 1 << 20), KILN_OK);
    train_compiled(&one, 0, 24);
    assert_same_run(&d, &one);
}

static void test_compiled_cnn(void **state)
{
    (void)state;
    run d, one;
    train_compiled(&d, 1, 0);
    train_compiled(&one, 0, 0);
    assert_same_run(&d, &one);
}

static void test_dynamic_mlp(void **state)
{
    (void)state;
    run d, one;
    train_dynamic(&d, 1, 24);
    train_dynamic(&one, 0, 24);
    assert_same_run(&d, &one);
}

static void test_dynamic_cnn(void **state)
{
    (void)state;
    run d, one;
    train_dynamic(&d, 1, 0);
    train_dynamic(&one, 0, 0);
    assert_same_run(&d, &one);
}

/* The start-up check: a rank with another model or another config gets
   the same error as every other rank, and nothing is copied. */
static void check_mismatch(int hidden1, const char *config1, const char *want)
{
    int rank = kiln_comm_rank(comm);
    kiln_session *s = session(1);
    kiln_graph *g = kiln_graph_new();
    model m = build(g, BATCH, rank == 1 ? hidden1 : 24);
    kiln_function *f = kiln_compile(s, g, &m.loss, 1, &m.x, 2);
    assert_non_null(f);
    kiln_param_info w;
    assert_int_equal(kiln_session_variable_info(s, 0, &w), KILN_OK);
    float before = ((float *)w.data)[0];
    assert_int_equal(
        kiln_comm_sync_session(comm, s, rank == 1 ? config1 : "batch 128"),
        KILN_ERR_ARG);
    if (!strstr(kiln_comm_error(comm), want))
        fail_msg("rank %d: '%s' lacks '%s'", rank, kiln_comm_error(comm), want);
    assert_string_equal(kiln_session_error(s), kiln_comm_error(comm));
    assert_true(((float *)w.data)[0] == before);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_mismatched_model(void **state)
{
    (void)state;
    check_mismatch(20, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'b0 f32 [24]', "
                   "rank 1 has 'b0 f32 [20]'");
}

static void test_mismatched_config(void **state)
{
    (void)state;
    check_mismatch(24, "batch 64",
                   "rank 1 differs from rank 0: rank 0 has 'config: batch "
                   "128', rank 1 has 'config: batch 64'");
}

static void test_errors(void **state)
{
    (void)state;
    kiln_session *a = session(1), *b = session(0);
    assert_int_equal(kiln_session_set_comm(b, comm), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_session_error(b), "another session"));
    assert_int_equal(kiln_comm_set_rows(comm, 3, 2), KILN_ERR_ARG);
    assert_non_null(
        strstr(kiln_comm_error(comm), "3 rows of a global batch of 2"));
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 0), KILN_ERR_ARG);
    /* freeing the session detaches the communicator */
    kiln_session_free(a);
    assert_int_equal(kiln_session_set_comm(b, comm), KILN_OK);
    assert_int_equal(kiln_session_set_comm(b, NULL), KILN_OK);
    kiln_session_free(b);
    assert_int_equal(kiln_dist_available(), 1);
}

int main(void)
{
    comm = kiln_comm_world();
    if (!comm) {
        fprintf(stderr, "%s\n", kiln_last_error());
        return 1;
    }
    make_data();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_mlp),
        cmocka_unit_test(test_compiled_mlp_small_buckets),
        cmocka_unit_test(test_compiled_cnn),
        cmocka_unit_test(test_dynamic_mlp),
        cmocka_unit_test(test_dynamic_cnn),
        cmocka_unit_test(test_mismatched_model),
        cmocka_unit_test(test_mismatched_config),
        cmocka_unit_test(test_errors),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_tensor_free(data_x);
    kiln_tensor_free(data_y);
    kiln_comm_free(comm);
    return failed ? 1 : 0;
}
