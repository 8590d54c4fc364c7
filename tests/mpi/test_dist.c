/* Data-parallel training, run by ctest under mpirun with 2 ranks: each
   rank trains its shard of every global batch with a communicator and,
   beside it, the same model alone on the whole batches; the two must
   agree step by step (losses) and at the end (every variable, in L2
   norm) within 1e-5 relative, in the compiled and in the dynamic path, for an
   MLP and a small CNN.  Also: the start-up check of mismatched models and
   configurations fails on every rank with the same message. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    kiln_node *x, *y, *loss, *w1;
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
    m.w1 = param(g, "W1", KILN_SHAPE(hidden, CLASSES));
    kiln_node *z = kiln_affine(g, h, m.w1, param(g, "b1", KILN_SHAPE(CLASSES)));
    m.loss = kiln_softmax_cross_entropy(g, z, m.y);
    return m;
}

/* One training run: on this rank's shards with the communicator (dist),
   or alone on whole batches.  losses[STEPS] gets the global batch's mean
   loss of each step; the session is returned for its variables.  A run
   may train only steps [first, last) after loading the checkpoint
   resume, and save a checkpoint after its last step. */
typedef struct run {
    kiln_session *s;
    double losses[STEPS];
    int dist, zero1, sgd;
    int plain_sgd; /* no momentum */
    int grad_out;  /* the step also outputs W1's gradient */
    float penalty; /* the loss plus penalty * sum(W1^2) */
    int first, last;
    const char *resume, *save;
} run;

static run plain(int dist)
{
    return (run){.dist = dist, .last = STEPS};
}

static kiln_optimizer *optimizer(const run *r, kiln_session *s)
{
    kiln_optim_options o = kiln_optim_defaults(r->sgd ? KILN_SGD : KILN_ADAM);
    o.lr = r->sgd ? 0.1f : 0.02f;
    o.momentum = r->plain_sgd ? 0.0f : 0.9f;
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
static kiln_session *session(int dist, int zero1)
{
    kiln_session_options so = {.seed = dist ? 100 + kiln_comm_rank(comm) : 100,
                               .threads = 1};
    kiln_session *s = kiln_session_new(&so);
    assert_non_null(s);
    if (dist) {
        assert_int_equal(kiln_comm_set_zero1(comm, zero1), KILN_OK);
        assert_int_equal(kiln_session_set_comm(s, comm), KILN_OK);
    }
    return s;
}

/* The checkpoint r->resume, through the communicator when distributed. */
static void resume(const run *r)
{
    if (r->dist)
        assert_int_equal(kiln_comm_load_session(comm, r->s, r->resume),
                         KILN_OK);
    else
        assert_int_equal(kiln_session_load(r->s, r->resume), KILN_OK);
}

static void save(const run *r)
{
    if (r->dist)
        assert_int_equal(kiln_comm_save_session(comm, r->s, r->save), KILN_OK);
    else if (!comm || kiln_comm_rank(comm) == 0)
        assert_int_equal(kiln_session_save(r->s, r->save), KILN_OK);
}

static void train_compiled(run *r, int hidden)
{
    int dist = r->dist;
    kiln_session *s = r->s = session(dist, r->zero1);
    kiln_graph *g = kiln_graph_new();
    model m = build(g, BATCH, hidden);
    if (r->penalty != 0)
        m.loss = kiln_add(
            g, m.loss,
            kiln_mul(g, kiln_scalar(g, r->penalty),
                     kiln_sum(g, kiln_mul(g, m.w1, m.w1), KILN_ALL_AXES, 0)));
    kiln_optimizer *opt = optimizer(r, s);
    kiln_node *outs[3] = {m.loss, kiln_optimizer_build_step(opt, g, m.loss),
                          NULL};
    kiln_node *ins[2] = {m.x, m.y};
    if (r->grad_out)
        outs[2] = kiln_grad(g, m.loss, m.w1);
    kiln_function *f = kiln_compile(s, g, outs, r->grad_out ? 3 : 2, ins, 2);
    assert_non_null(f);
    if (r->resume)
        resume(r);
    if (dist)
        assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    kiln_tensor *xb, *yb, *x, *y,
        *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_batcher *b = batches(dist, &xb, &yb);
    for (int i = 0; i < r->last; i++) {
        int rows = next_batch(b, dist, xb, yb, &x, &y);
        kiln_tensor *in[2] = {x, y}, *out[3] = {loss, NULL, NULL};
        if (i >= r->first) {
            assert_int_equal(kiln_run(f, in, out), KILN_OK);
            r->losses[i] = global_loss(b, dist, kiln_tensor_f32(loss)[0], rows);
        }
        kiln_tensor_free(x);
        kiln_tensor_free(y);
    }
    if (r->save)
        save(r);
    kiln_tensor_free(loss);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_batcher_free(b);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
}

/* Marian's way: the graph rebuilt for every batch, kiln_backward then
   kiln_optimizer_update. */
static void train_dynamic(run *r, int hidden)
{
    int dist = r->dist;
    kiln_session *s = r->s = session(dist, r->zero1);
    kiln_graph *g = kiln_graph_new();
    kiln_optimizer *opt = optimizer(r, s);
    kiln_tensor *xb, *yb, *x, *y;
    kiln_batcher *b = batches(dist, &xb, &yb);
    for (int i = 0; i < r->last; i++) {
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
static void assert_close_variables(kiln_session *a, kiln_session *b, double tol)
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
        if (sqrt(diff) > tol * sqrt(norm))
            fail_msg("%s: |difference| %g, |values| %g", pb.name, sqrt(diff),
                     sqrt(norm));
    }
}

/* The losses of steps [from, STEPS) of a and b within tol relative. */
static void assert_close_losses(const run *a, const run *b, int from,
                                double tol)
{
    for (int i = from; i < STEPS; i++)
        if (fabs(a->losses[i] - b->losses[i]) > tol * fabs(b->losses[i]))
            fail_msg("step %d: loss %.9g against %.9g (tolerance %g)", i + 1,
                     a->losses[i], b->losses[i], tol);
}

static void assert_same_run(run *d, run *one)
{
    assert_close_losses(d, one, 0, 1e-5);
    assert_true(one->losses[STEPS - 1] < 0.8 * one->losses[0]);
    assert_close_variables(d->s, one->s, 1e-5);
    kiln_session_free(d->s);
    kiln_session_free(one->s);
}

/* The MLP compiled, its buckets summed through shared memory (every rank
   is on this machine) or by MPI_Iallreduce. */
static void check_compiled_mlp(int shm)
{
    run d = plain(1), one = plain(0);
    assert_int_equal(kiln_comm_set_shared_memory(comm, shm), KILN_OK);
    kiln_comm_reset_stats(comm);
    train_compiled(&d, 24);
    train_compiled(&one, 24);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    /* every gradient's values, once per step */
    int64_t values = FEATURES * 24 + 24 + 24 * CLASSES + CLASSES;
    assert_int_equal(st.bytes, (int64_t)STEPS * values * 4);
    assert_true(st.allreduces >= STEPS);
    assert_int_equal(st.shared, shm ? st.allreduces : 0);
    assert_same_run(&d, &one);
    assert_int_equal(kiln_comm_set_shared_memory(comm, 1), KILN_OK);
}

static void test_compiled_mlp(void **state)
{
    (void)state;
    check_compiled_mlp(1);
}

static void test_compiled_mlp_small_buckets(void **state)
{
    (void)state;
    run d = plain(1), one = plain(0);
    /* one bucket per gradient: four all-reduces in flight per step */
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 64), KILN_OK);
    kiln_comm_reset_stats(comm);
    train_compiled(&d, 24);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    assert_int_equal(st.allreduces, 4 * STEPS);
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 1 << 20), KILN_OK);
    train_compiled(&one, 24);
    assert_same_run(&d, &one);
}

/* Plain SGD on one machine: one copy of the variables shared by the
   ranks, each adding its share of the update in turns (mode 1), or the
   same step with private copies and each update's change all-reduced
   (mode 2); against one process. */
static void check_shared_weights(int mode, int hidden, int blocked)
{
    run d = plain(1), one = plain(0);
    d.sgd = one.sgd = d.plain_sgd = one.plain_sgd = 1;
    assert_int_equal(kiln_comm_set_shared_weights(comm, mode), KILN_OK);
    assert_int_equal(kiln_comm_shared_weights(comm), mode);
    int shared = (mode == 1 || mode == 3) && !blocked;
    kiln_comm_reset_stats(comm);
    train_compiled(&d, hidden);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    /* shared: no gradient moves at all, but variables under 4 KiB stay
       private (b1; W0, b0 and W1 are shared); private: each variable's
       change, once per step */
    int64_t numel[4] = {FEATURES * hidden, hidden, hidden * CLASSES, CLASSES},
            values = 0;
    int n_private = 0;
    for (int i = 0; i < 4; i++)
        if (!shared || numel[i] * 4 < 4096) {
            values += numel[i];
            n_private++;
        }
    assert_true(!shared || n_private == 1);
    assert_int_equal(st.bytes, (int64_t)STEPS * values * 4);
    assert_int_equal(st.allreduces, n_private * STEPS);
    train_compiled(&one, hidden);
    assert_close_losses(&d, &one, 0, 1e-5);
    /* plain SGD at 0.1 learns slower than with momentum */
    assert_true(one.losses[STEPS - 1] < 0.95 * one.losses[0]);
    assert_close_variables(d.s, one.s, 1e-5);

    /* detached, the session keeps a private copy: rank 1's write is its
       own */
    int rank = kiln_comm_rank(comm);
    assert_int_equal(kiln_session_set_comm(d.s, NULL), KILN_OK);
    kiln_param_info info;
    int idx = kiln_session_find_variable(d.s, "W1");
    assert_true(idx >= 0);
    assert_int_equal(kiln_session_variable_info(d.s, idx, &info), KILN_OK);
    float before = ((const float *)info.data)[0];
    double sync = 0;
    assert_int_equal(kiln_comm_allreduce_sum(comm, &sync, 1), KILN_OK);
    if (rank == 1) {
        kiln_tensor *t = kiln_tensor_new(KILN_F32, info.shape);
        assert_int_equal(kiln_variable_write(d.s, "W1", t), KILN_OK);
        kiln_tensor_free(t);
    }
    assert_int_equal(kiln_comm_allreduce_sum(comm, &sync, 1), KILN_OK);
    float after = ((const float *)info.data)[0];
    assert_true(rank == 1 ? after == 0.0f : after == before);
    assert_true(before != 0.0f);
    kiln_session_free(d.s);
    kiln_session_free(one.s);
    assert_int_equal(kiln_comm_set_shared_weights(comm, 1), KILN_OK);
}

/* share.c's names for its shared-memory objects:
   /kiln-<rank 0's pid>-<communicator>-<step>; the tests build fewer than
   SETS steps on communicator 0. */
enum { SETS = 64 };

static void shm_name(char *name, size_t size, long pid, int comm_index, int k)
{
    snprintf(name, size, "/kiln-%ld-%d-%d", pid, comm_index, k);
}

/* A shared-memory object of 4 KiB called name. */
static void make_object(const char *name)
{
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    close(fd);
}

/* 1 when the shared-memory object name exists. */
static int object_exists(const char *name)
{
    int fd = shm_open(name, O_RDONLY, 0600);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* Objects that killed runs left in /dev/shm: one of each name this
   process would use (a dead process of the same PID left them) is
   replaced, so the variables are still shared, and one named after a
   process that no longer exists is removed; one of a live process
   stays. */
static void test_shared_weights(void **state)
{
    (void)state;
    char name[64], gone[64], live[64];
    int rank = kiln_comm_rank(comm);
    shm_name(gone, sizeof gone, INT_MAX, 0, 0); /* above any PID */
    shm_name(live, sizeof live, (long)getppid(), 99, 0);
    for (int k = 0; rank == 0 && k < SETS; k++) {
        shm_name(name, sizeof name, (long)getpid(), 0, k);
        make_object(name);
    }
    if (rank == 0) {
        make_object(gone);
        make_object(live);
    }
    check_shared_weights(1, 1024, 0);
    if (rank == 0) {
        assert_false(object_exists(gone));
        assert_true(object_exists(live));
        shm_unlink(live);
    }
    for (int k = 0; rank == 0 && k < SETS; k++) {
        shm_name(name, sizeof name, (long)getpid(), 0, k);
        shm_unlink(name);
    }
}

static void test_shared_weights_private(void **state)
{
    (void)state;
    check_shared_weights(2, 1024, 0);
}

/* The same with the changes summed apart and added once (exact). */
static void test_shared_weights_exact(void **state)
{
    (void)state;
    check_shared_weights(3, 1024, 0);
}

/* 1 when Kiln's products run its AVX-512 kernel (cpu/gemm_avx512.c). */
static int avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

/* Variable name of a and b: the same floats (exact), or within 1e-7 of
   b's L2 norm. */
static void assert_same_variable(kiln_session *a, kiln_session *b,
                                 const char *name, int exact)
{
    kiln_param_info ia, ib;
    int at = kiln_session_find_variable(a, name),
        bt = kiln_session_find_variable(b, name);
    assert_true(at >= 0 && bt >= 0);
    assert_int_equal(kiln_session_variable_info(a, at, &ia), KILN_OK);
    assert_int_equal(kiln_session_variable_info(b, bt, &ib), KILN_OK);
    int64_t n = kiln_shape_numel(ia.shape);
    assert_int_equal(n, kiln_shape_numel(ib.shape));
    const float *x = ia.data, *y = ib.data;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; i++) {
        diff += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        norm += (double)y[i] * y[i];
    }
    if (exact ? diff != 0 : sqrt(diff) > 1e-7 * sqrt(norm))
        fail_msg("%s: shared and private copies %.3g apart (L2, of %.3g)", name,
                 sqrt(diff), sqrt(norm));
}

/* The exact shared step sums the ranks' changes apart and adds them to a
   variable once (share.c), as private copies do through the all-reduce
   of the changes: on 2 ranks, where both sums are d0 + d1, a step gives
   the same floats either way where Kiln's kernels compute it (W0: the
   AVX-512 product; b0: the fused update), and W1 (4 columns, products by
   OpenBLAS, whose accumulating call rounds apart from its plain one)
   within 1e-7.  Adding each rank's share to the variable in turn (the
   default) rounds at the variable's size and fails this. */
static void test_shared_weights_sum_once(void **state)
{
    (void)state;
    if (kiln_comm_size(comm) != 2)
        skip();
    run sh = plain(1), pv = plain(1);
    sh.sgd = pv.sgd = sh.plain_sgd = pv.plain_sgd = 1;
    sh.last = pv.last = 1;
    assert_int_equal(kiln_comm_set_shared_weights(comm, 3), KILN_OK);
    kiln_comm_reset_stats(comm);
    train_compiled(&sh, 1024);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    assert_int_equal(st.allreduces, 1); /* b1 alone: shared for real */
    /* detached: a private copy, values kept (a communicator serves one
       session at a time) */
    assert_int_equal(kiln_session_set_comm(sh.s, NULL), KILN_OK);
    assert_int_equal(kiln_comm_set_shared_weights(comm, 2), KILN_OK);
    train_compiled(&pv, 1024);
    assert_same_variable(sh.s, pv.s, "W0", avx512());
    assert_same_variable(sh.s, pv.s, "b0", 1);
    assert_same_variable(sh.s, pv.s, "W1", 0);
    assert_same_variable(sh.s, pv.s, "b1", 1);
    kiln_session_free(sh.s);
    kiln_session_free(pv.s);
    assert_int_equal(kiln_comm_set_shared_weights(comm, 1), KILN_OK);
}

/* Mappings of this process's shared-memory objects of share.c. */
static int shm_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, "/dev/shm/kiln-") != NULL;
    fclose(f);
    return n;
}

/* A session freed while it is attached and its variables are shared
   (exact: each with a scratch): nothing of them stays mapped, and the
   communicator serves a new session (in turns: no scratches). */
static void test_shared_weights_session_freed(void **state)
{
    (void)state;
    run d = plain(1);
    d.sgd = d.plain_sgd = 1;
    d.last = 3;
    assert_int_equal(kiln_comm_set_shared_weights(comm, 3), KILN_OK);
    train_compiled(&d, 1024);
    /* W0, b0 and W1, each with its scratch */
    assert_int_equal(shm_mappings(), 6);
    kiln_session_free(d.s);
    assert_int_equal(shm_mappings(), 0);
    run again = plain(1);
    again.sgd = again.plain_sgd = 1;
    again.last = 2;
    assert_int_equal(kiln_comm_set_shared_weights(comm, 1), KILN_OK);
    train_compiled(&again, 1024);
    assert_int_equal(shm_mappings(), 3);
    assert_int_equal(kiln_session_set_comm(again.s, NULL), KILN_OK);
    assert_int_equal(shm_mappings(), 0);
    kiln_session_free(again.s);
}

/* A penalty on the weights in the loss, whose gradient reads W1 (W1 -
   lr (g + 2 c W1), the gradient computed before the update's phases):
   in turns and exact, the run follows one process. */
static void test_shared_weights_penalty(void **state)
{
    (void)state;
    for (int mode = 1; mode <= 3; mode += 2) {
        run d = plain(1), one = plain(0);
        d.sgd = one.sgd = d.plain_sgd = one.plain_sgd = 1;
        d.penalty = one.penalty = 0.05f;
        assert_int_equal(kiln_comm_set_shared_weights(comm, mode), KILN_OK);
        train_compiled(&d, 1024);
        train_compiled(&one, 1024);
        assert_close_losses(&d, &one, 0, 1e-5);
        assert_close_variables(d.s, one.s, 1e-5);
        kiln_session_free(d.s);
        kiln_session_free(one.s);
    }
    assert_int_equal(kiln_comm_set_shared_weights(comm, 1), KILN_OK);
}

/* Rank 0 cannot make the shared-memory object (its names taken by
   directories, which neither shm_open nor shm_unlink can replace): every
   rank keeps a private copy and all-reduces each update's change
   instead, with the same results. */
static void test_shared_weights_unavailable(void **state)
{
    (void)state;
    char name[64], path[80];
    int rank = kiln_comm_rank(comm);
    for (int k = 0; rank == 0 && k < SETS; k++) {
        shm_name(name, sizeof name, (long)getpid(), 0, k);
        snprintf(path, sizeof path, "/dev/shm%s", name);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    check_shared_weights(1, 1024, 1);
    for (int k = 0; rank == 0 && k < SETS; k++) {
        shm_name(name, sizeof name, (long)getpid(), 0, k);
        snprintf(path, sizeof path, "/dev/shm%s", name);
        assert_int_equal(rmdir(path), 0);
    }
}

/* The same through MPI_Iallreduce (on one machine, buckets are summed
   through shared memory unless told otherwise), also the CNN with small
   buckets. */
static void test_compiled_iallreduce(void **state)
{
    (void)state;
    check_compiled_mlp(0);
    run d = plain(1), one = plain(0);
    assert_int_equal(kiln_comm_set_shared_memory(comm, 0), KILN_OK);
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 64), KILN_OK);
    train_compiled(&d, 0);
    assert_int_equal(kiln_comm_set_bucket_bytes(comm, 1 << 20), KILN_OK);
    assert_int_equal(kiln_comm_set_shared_memory(comm, 1), KILN_OK);
    train_compiled(&one, 0);
    assert_same_run(&d, &one);
}

/* A gradient read besides the optimiser (an output of the step): the
   all-reduce works on a copy of it, the output stays this rank's own. */
static void test_compiled_mlp_gradient_output(void **state)
{
    (void)state;
    run d = plain(1), one = plain(0);
    d.grad_out = one.grad_out = 1;
    train_compiled(&d, 24);
    train_compiled(&one, 24);
    assert_same_run(&d, &one);
}

static void test_compiled_cnn(void **state)
{
    (void)state;
    run d = plain(1), one = plain(0);
    train_compiled(&d, 0);
    train_compiled(&one, 0);
    assert_same_run(&d, &one);
}

static void test_dynamic_mlp(void **state)
{
    (void)state;
    run d = plain(1), one = plain(0);
    train_dynamic(&d, 24);
    train_dynamic(&one, 24);
    assert_same_run(&d, &one);
}

static void test_dynamic_cnn(void **state)
{
    (void)state;
    run d = plain(1), one = plain(0);
    train_dynamic(&d, 0);
    train_dynamic(&one, 0);
    assert_same_run(&d, &one);
}

/* The start-up check: a rank with another model or another config gets
   the same error as every other rank, and nothing is copied. */
static void check_mismatch(int hidden1, const char *config1, const char *want)
{
    int rank = kiln_comm_rank(comm);
    kiln_session *s = session(1, kiln_comm_zero1(comm));
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

/* One rank summing through shared memory, the other by MPI_Iallreduce,
   would wait for each other: the start-up check stops both. */
static void test_mismatched_shared_memory(void **state)
{
    (void)state;
    int rank = kiln_comm_rank(comm);
    assert_int_equal(kiln_comm_set_shared_memory(comm, rank != 1), KILN_OK);
    check_mismatch(24, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'comm: buckets of "
                   "1048576 bytes, shared memory, shared weights', rank 1 has "
                   "'comm: buckets of 1048576 bytes, MPI_Iallreduce'");
    assert_int_equal(kiln_comm_set_shared_memory(comm, 1), KILN_OK);
    /* one rank sharing plain SGD's variables, the other not */
    assert_int_equal(kiln_comm_set_shared_weights(comm, rank != 1), KILN_OK);
    check_mismatch(24, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'comm: buckets of "
                   "1048576 bytes, shared memory, shared weights', rank 1 has "
                   "'comm: buckets of 1048576 bytes, shared memory'");
    /* one rank sharing them, the other keeping private copies: the first
       would wait in the shared updates' barriers, the other in the
       all-reduce of its changes */
    assert_int_equal(kiln_comm_set_shared_weights(comm, rank != 1 ? 1 : 2),
                     KILN_OK);
    check_mismatch(24, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'comm: buckets of "
                   "1048576 bytes, shared memory, shared weights', rank 1 has "
                   "'comm: buckets of 1048576 bytes, shared memory, shared "
                   "weights (private copies)'");
    /* in turns against exact: the second reads a scratch the first never
       writes */
    assert_int_equal(kiln_comm_set_shared_weights(comm, rank != 1 ? 1 : 3),
                     KILN_OK);
    check_mismatch(24, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'comm: buckets of "
                   "1048576 bytes, shared memory, shared weights', rank 1 has "
                   "'comm: buckets of 1048576 bytes, shared memory, shared "
                   "weights (changes summed once)'");
    assert_int_equal(kiln_comm_set_shared_weights(comm, 1), KILN_OK);
    /* one rank with ZeRO-1 (it gathers where the other shares; plain
       SGD has no state slots that would tell them apart) */
    assert_int_equal(kiln_comm_set_zero1(comm, rank == 1), KILN_OK);
    check_mismatch(24, "batch 128",
                   "rank 1 differs from rank 0: rank 0 has 'comm: buckets of "
                   "1048576 bytes, shared memory, shared weights', rank 1 has "
                   "'comm: buckets of 1048576 bytes, shared memory, shared "
                   "weights, ZeRO-1'");
    assert_int_equal(kiln_comm_set_zero1(comm, 0), KILN_OK);
    assert_int_equal(kiln_comm_set_shared_memory(NULL, 1), KILN_ERR_ARG);
}

/* A rank with a timeout and one without would never meet: the first
   runs MPI's non-blocking collectives, the other its blocking ones.  The
   start-up check and the checkpoints find it first, on every rank, with
   the same message, writing nothing; agreed again, they work. */
static void test_mismatched_timeouts(void **state)
{
    (void)state;
    int rank = kiln_comm_rank(comm);
    const char *path = "test_dist_never_written.npz";
    kiln_session *s = session(1, 0);
    assert_int_equal(kiln_session_declare(s, "W1", KILN_F32,
                                          KILN_SHAPE(8, CLASSES),
                                          kiln_init_uniform(-1, 1), 1),
                     KILN_OK);
    assert_int_equal(kiln_comm_set_timeout(comm, rank == 1 ? 30 : 0), KILN_OK);
    const char *fns[3] = {"kiln_comm_sync_session", "kiln_comm_save_session",
                          "kiln_comm_load_session"};
    for (int i = 0; i < 3; i++) {
        kiln_status st = i == 0   ? kiln_comm_sync_session(comm, s, "test")
                         : i == 1 ? kiln_comm_save_session(comm, s, path)
                                  : kiln_comm_load_session(comm, s, path);
        assert_int_equal(st, KILN_ERR_ARG);
        char want[256];
        snprintf(want, sizeof want,
                 "%s: rank 1 differs from rank 0: rank 0 has none, rank 1 has "
                 "a timeout of 30 s (kiln_comm_set_timeout, KILN_DIST_TIMEOUT)",
                 fns[i]);
        if (!strstr(kiln_comm_error(comm), want))
            fail_msg("rank %d: '%s' lacks '%s'", rank, kiln_comm_error(comm),
                     want);
        assert_string_equal(kiln_session_error(s), kiln_comm_error(comm));
    }
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(kiln_comm_set_timeout(comm, rank == 1 ? 30 : 20), KILN_OK);
    assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    assert_int_equal(kiln_comm_set_timeout(comm, 0), KILN_OK);
    assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    kiln_session_free(s);
}

/* ---------------------------------------------- ZeRO-1 */

/* Waits until every rank got here (a file rank 0 wrote is complete). */
static void barrier(void)
{
    double one = 1;
    assert_int_equal(kiln_comm_allreduce_sum(comm, &one, 1), KILN_OK);
}

/* A file name of stem for this number of ranks: ctest runs the 2-rank
   and the 3-rank tests side by side in one directory, and one must not
   read (or remove) the other's checkpoint. */
static const char *ranks_path(char *buf, size_t size, const char *stem)
{
    snprintf(buf, size, "%s_%dranks.npz", stem, kiln_comm_size(comm));
    return buf;
}

/* A ZeRO-1 run's variables whole (its sharded optimiser state gathered
   by kiln_comm_save_session), loaded by a session of its own. */
static kiln_session *gathered(const run *z, const char *stem)
{
    char path[64];
    ranks_path(path, sizeof path, stem);
    assert_int_equal(kiln_comm_save_session(comm, z->s, path), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    assert_non_null(s);
    assert_int_equal(kiln_session_load(s, path), KILN_OK);
    barrier();
    if (kiln_comm_rank(comm) == 0)
        remove(path);
    return s;
}

/* Values of the trained variables of s, and bytes of its optimiser state
   (momentum buffers, Adam moments). */
static int64_t trained_values(kiln_session *s, int64_t *state_bytes)
{
    int64_t values = 0;
    *state_bytes = 0;
    for (int i = 0; i < kiln_session_num_variables(s); i++) {
        kiln_param_info p;
        assert_int_equal(kiln_session_variable_info(s, i, &p), KILN_OK);
        int64_t n = kiln_shape_numel(p.shape);
        if (p.trainable && !strchr(p.name, '.'))
            values += n;
        if (strstr(p.name, ".adam_") || strstr(p.name, ".momentum"))
            *state_bytes += 4 * n;
    }
    return values;
}

/* 2 ranks with ZeRO-1 against 2 ranks without it and one process alone:
   losses and every variable (the sharded state gathered) within 1e-6 of
   the 2 ranks; each rank holds its range's state: 1/size of it, shared
   out to one value when the values do not divide evenly (hidden 23 gives
   487 trained values, the CNN 82: a range ends inside a variable). */
static void check_zero1(int sgd, int hidden, int dynamic)
{
    run z = plain(1), d = plain(1), one = plain(0);
    z.zero1 = 1;
    z.sgd = d.sgd = one.sgd = sgd;
    void (*train)(run *, int) = dynamic ? train_dynamic : train_compiled;
    kiln_comm_reset_stats(comm);
    train(&z, hidden);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(comm, &st), KILN_OK);
    kiln_session *whole = gathered(&z, "test_dist_zero1");
    assert_int_equal(kiln_session_set_comm(z.s, NULL), KILN_OK);
    train(&d, hidden);
    train(&one, hidden);
    assert_close_losses(&z, &d, 0, 1e-6);
    assert_close_losses(&z, &one, 0, 1e-5);
    assert_true(one.losses[STEPS - 1] < 0.8 * one.losses[0]);
    assert_close_variables(whole, d.s, 1e-6);
    assert_close_variables(whole, one.s, 1e-5);

    int64_t full, mine, total = trained_values(d.s, &full);
    trained_values(z.s, &mine);
    int r = kiln_comm_rank(comm), n = kiln_comm_size(comm);
    int64_t range = total * (r + 1) / n - total * r / n;
    assert_true(full == (sgd ? 4 : 8) * total);
    assert_int_equal(mine, full / total * range);
    assert_int_equal(st.gathers, STEPS);
    assert_int_equal(st.gathered_bytes, STEPS * 4 * total);
    kiln_session_free(whole);
    kiln_session_free(z.s);
    kiln_session_free(d.s);
    kiln_session_free(one.s);
    assert_int_equal(kiln_comm_set_zero1(comm, 0), KILN_OK);
}

static void test_zero1_compiled_mlp_adam(void **state)
{
    (void)state;
    check_zero1(0, 23, 0);
}

static void test_zero1_compiled_mlp_sgd(void **state)
{
    (void)state;
    check_zero1(1, 23, 0);
}

static void test_zero1_compiled_cnn(void **state)
{
    (void)state;
    check_zero1(0, 0, 0);
    check_zero1(1, 0, 0);
}

static void test_zero1_dynamic(void **state)
{
    (void)state;
    check_zero1(0, 23, 1);
    check_zero1(1, 0, 1);
}

/* A ZeRO-1 checkpoint after half the steps (the state gathered, rank 0
   writes) resumed by one process alone and by 2 ranks with ZeRO-1: each
   continues its own uninterrupted run. */
static void test_zero1_resume(void **state)
{
    (void)state;
    char buf[64];
    const char *path = ranks_path(buf, sizeof buf, "test_dist_zero1_half");
    run half = plain(1), z = plain(1), zr = plain(1), one = plain(0),
        oner = plain(0);
    half.zero1 = z.zero1 = zr.zero1 = 1;
    half.last = STEPS / 2;
    half.save = path;
    zr.first = oner.first = STEPS / 2;
    zr.resume = oner.resume = path;
    train_compiled(&half, 23);
    assert_int_equal(kiln_session_set_comm(half.s, NULL), KILN_OK);
    train_compiled(&z, 23);
    kiln_session *a = gathered(&z, "test_dist_zero1_a");
    assert_int_equal(kiln_session_set_comm(z.s, NULL), KILN_OK);
    train_compiled(&zr, 23);
    kiln_session *b = gathered(&zr, "test_dist_zero1_b");
    train_compiled(&one, 23);
    train_compiled(&oner, 23);
    assert_close_losses(&zr, &z, STEPS / 2, 1e-6);
    assert_close_losses(&oner, &one, STEPS / 2, 1e-5);
    assert_close_variables(b, a, 1e-6);
    assert_close_variables(oner.s, one.s, 1e-5);
    barrier();
    if (kiln_comm_rank(comm) == 0)
        remove(path);
    kiln_session *ss[] = {a, b, half.s, z.s, zr.s, one.s, oner.s};
    for (int i = 0; i < 7; i++)
        kiln_session_free(ss[i]);
    assert_int_equal(kiln_comm_set_zero1(comm, 0), KILN_OK);
}

/* Fewer trained values than ranks cannot be sharded; a checkpoint whose
   state slot has another shape is refused by name. */
static void test_zero1_errors(void **state)
{
    (void)state;
    kiln_session *s = session(1, 1);
    kiln_graph *g = kiln_graph_new();
    kiln_node *w = param(g, "w", KILN_SCALAR);
    kiln_optimizer *opt = optimizer(&(run){0}, s);
    kiln_node *step = kiln_optimizer_build_step(opt, g, kiln_mul(g, w, w));
    char want[64];
    snprintf(want, sizeof want, "ZeRO-1: 1 trained values over %d ranks",
             kiln_comm_size(comm));
    assert_non_null(step);
    assert_non_null(strstr(kiln_graph_error(g), want));
    kiln_session *other = session(0, 0);
    assert_int_equal(kiln_comm_save_session(comm, other, "x.npz"),
                     KILN_ERR_ARG);
    assert_int_equal(kiln_comm_load_session(comm, other, "x.npz"),
                     KILN_ERR_ARG);
    assert_non_null(strstr(kiln_comm_error(comm),
                           "kiln_comm_load_session: the session is not the "
                           "communicator's"));
    kiln_session_free(other);
    kiln_graph_free(g);
    kiln_optimizer_free(opt);
    kiln_session_free(s);
    assert_int_equal(kiln_comm_set_zero1(NULL, 1), KILN_ERR_ARG);
    assert_int_equal(kiln_comm_zero1(comm), 1);
    assert_int_equal(kiln_comm_set_zero1(comm, 0), KILN_OK);
}

static void test_errors(void **state)
{
    (void)state;
    kiln_session *a = session(1, 0), *b = session(0, 0);
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

/* The first BATCH / 2 rows of the data. */
static void half_batch(kiln_tensor **x, kiln_tensor **y)
{
    *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH / 2, FEATURES));
    *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(BATCH / 2));
    assert_true(*x && *y);
    memcpy(kiln_tensor_data(*x), kiln_tensor_data(data_x),
           sizeof(float) * (BATCH / 2) * FEATURES);
    memcpy(kiln_tensor_data(*y), kiln_tensor_data(data_y),
           sizeof(int32_t) * (BATCH / 2));
}

/* A small plain-SGD training step compiled on session s, a half batch to
   feed it, and two tensors for W1's values before and after a run. */
typedef struct small_step {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *f;
    kiln_tensor *x, *y, *w0, *w1;
} small_step;

static small_step small_step_new(kiln_session *s)
{
    small_step t = {.s = s, .g = kiln_graph_new()};
    model m = build(t.g, BATCH / 2, 8);
    run r = plain(1);
    r.sgd = 1;
    t.opt = optimizer(&r, s);
    kiln_node *outs[2] = {m.loss,
                          kiln_optimizer_build_step(t.opt, t.g, m.loss)};
    kiln_node *ins[2] = {m.x, m.y};
    t.f = kiln_compile(s, t.g, outs, 2, ins, 2);
    assert_non_null(t.f);
    half_batch(&t.x, &t.y);
    t.w0 = kiln_tensor_new(KILN_F32, KILN_SHAPE(8, CLASSES));
    t.w1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(8, CLASSES));
    return t;
}

static void small_step_free(small_step *t)
{
    kiln_tensor_free(t->w0);
    kiln_tensor_free(t->w1);
    kiln_tensor_free(t->x);
    kiln_tensor_free(t->y);
    kiln_optimizer_free(t->opt);
    kiln_graph_free(t->g);
    kiln_session_free(t->s);
}

/* A training step built with the communicator attached refuses to run
   without it (it would scale unsummed gradients) or with another one (its
   hook keys are not that one's), changing nothing; attached again, it
   runs. */
static void test_step_without_its_communicator(void **state)
{
    (void)state;
    small_step t = small_step_new(session(1, 0));
    kiln_session *s = t.s;
    kiln_function *f = t.f;
    kiln_tensor *w0 = t.w0, *w1 = t.w1;
    assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    kiln_tensor *in[2] = {t.x, t.y}, *out[2] = {NULL, NULL};
    const size_t bytes = sizeof(float) * 8 * CLASSES;
    assert_int_equal(kiln_variable_read(s, "W1", w0), KILN_OK);

    assert_int_equal(kiln_session_set_comm(s, NULL), KILN_OK);
    assert_int_equal(kiln_run(f, in, out), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_session_error(s), "none is attached now"));
    kiln_comm *other = kiln_comm_world();
    assert_non_null(other);
    assert_int_equal(kiln_session_set_comm(s, other), KILN_OK);
    assert_int_equal(kiln_run(f, in, out), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_session_error(s), "another communicator"));
    assert_int_equal(kiln_variable_read(s, "W1", w1), KILN_OK);
    assert_memory_equal(kiln_tensor_data(w0), kiln_tensor_data(w1), bytes);

    assert_int_equal(kiln_session_set_comm(s, comm), KILN_OK);
    assert_int_equal(kiln_run(f, in, out), KILN_OK);
    assert_int_equal(kiln_variable_read(s, "W1", w1), KILN_OK);
    assert_memory_not_equal(kiln_tensor_data(w0), kiln_tensor_data(w1), bytes);
    kiln_comm_free(other);
    small_step_free(&t);
}

/* The converse: a training step built before the communicator was
   attached averages nothing, so while one is attached it refuses to run
   (each rank would train alone), changing nothing; detached, it runs. */
static void test_step_built_before_attaching(void **state)
{
    (void)state;
    small_step t = small_step_new(session(0, 0));
    kiln_session *s = t.s;
    kiln_function *f = t.f;
    kiln_tensor *w0 = t.w0, *w1 = t.w1;
    assert_int_equal(kiln_session_set_comm(s, comm), KILN_OK);
    assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    kiln_tensor *in[2] = {t.x, t.y}, *out[2] = {NULL, NULL};
    const size_t bytes = sizeof(float) * 8 * CLASSES;
    assert_int_equal(kiln_variable_read(s, "W1", w0), KILN_OK);
    assert_int_equal(kiln_run(f, in, out), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_session_error(s),
                           "built without a communicator, and one is "
                           "attached now"));
    assert_int_equal(kiln_variable_read(s, "W1", w1), KILN_OK);
    assert_memory_equal(kiln_tensor_data(w0), kiln_tensor_data(w1), bytes);
    assert_int_equal(kiln_session_set_comm(s, NULL), KILN_OK);
    assert_int_equal(kiln_run(f, in, out), KILN_OK);
    assert_int_equal(kiln_variable_read(s, "W1", w1), KILN_OK);
    assert_memory_not_equal(kiln_tensor_data(w0), kiln_tensor_data(w1), bytes);
    small_step_free(&t);
}

/* A new communicator's defaults from the environment: KILN_DIST_TIMEOUT
   seconds, KILN_DIST_SHARED_WEIGHTS 0, 1, exact or private, unset or empty for
   the default; any other value refuses the communicator, naming the
   variable and (cut short) its value, rather than waiting for ever or
   sharing what the user meant to keep private. */
static void test_environment(void **state)
{
    (void)state;
    static const struct {
        const char *var, *value;
        double timeout;
        int shared;
    } good[] = {
        {"KILN_DIST_TIMEOUT", "", 0, 1},
        {"KILN_DIST_TIMEOUT", "2.5", 2.5, 1},
        {"KILN_DIST_TIMEOUT", "0", 0, 1},
        {"KILN_DIST_SHARED_WEIGHTS", "", 0, 1},
        {"KILN_DIST_SHARED_WEIGHTS", "0", 0, 0},
        {"KILN_DIST_SHARED_WEIGHTS", "1", 0, 1},
        {"KILN_DIST_SHARED_WEIGHTS", "private", 0, 2},
        {"KILN_DIST_SHARED_WEIGHTS", "exact", 0, 3},
    };
    static const char *const bad[][2] = {
        {"KILN_DIST_TIMEOUT", "abc"},       {"KILN_DIST_TIMEOUT", "30s"},
        {"KILN_DIST_TIMEOUT", "-1"},        {"KILN_DIST_TIMEOUT", "1e10"},
        {"KILN_DIST_TIMEOUT", "nan"},       {"KILN_DIST_SHARED_WEIGHTS", "off"},
        {"KILN_DIST_SHARED_WEIGHTS", "2"},  {"KILN_DIST_SHARED_WEIGHTS", " 0"},
        {"KILN_DIST_SHARED_WEIGHTS", NULL}, /* 100,000 characters */
    };
    char *huge = malloc(100001);
    assert_non_null(huge);
    memset(huge, '9', 100000);
    huge[100000] = 0;
    assert_null(getenv("KILN_DIST_TIMEOUT"));
    assert_null(getenv("KILN_DIST_SHARED_WEIGHTS"));
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        setenv(good[i].var, good[i].value, 1);
        kiln_comm *c = kiln_comm_world();
        if (!c)
            fail_msg("%s='%s': %s", good[i].var, good[i].value,
                     kiln_last_error());
        assert_true(kiln_comm_timeout(c) == good[i].timeout);
        assert_int_equal(kiln_comm_shared_weights(c), good[i].shared);
        kiln_comm_free(c);
        unsetenv(good[i].var);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *value = bad[i][1] ? bad[i][1] : huge;
        setenv(bad[i][0], value, 1);
        assert_null(kiln_comm_world());
        const char *e = kiln_last_error();
        char want[128];
        snprintf(want, sizeof want, "kiln_comm_world: %s is '%.20s", bad[i][0],
                 value);
        if (!strstr(e, want))
            fail_msg("%s='%.20s': '%s'", bad[i][0], value, e);
        assert_true(strlen(e) < 300);
        unsetenv(bad[i][0]);
    }
    free(huge);
}

/* A checkpoint that one rank cannot read (missing or corrupt there) fails
   the load on every rank with that rank's reason, and no rank's variables
   change: no rank is left waiting for the other in a later collective. */
static void test_load_fails_on_one_rank(void **state)
{
    (void)state;
    kiln_session *s = session(1, 0);
    kiln_tensor *w0 = kiln_tensor_new(KILN_F32, KILN_SHAPE(8, CLASSES)),
                *w1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(8, CLASSES));
    assert_int_equal(kiln_session_declare(s, "W1", KILN_F32,
                                          KILN_SHAPE(8, CLASSES),
                                          kiln_init_uniform(-1, 1), 1),
                     KILN_OK);
    assert_int_equal(kiln_comm_sync_session(comm, s, "test"), KILN_OK);
    char good[64], path[64];
    snprintf(good, sizeof good, "load_one_rank_%d.npz", kiln_comm_size(comm));
    assert_int_equal(kiln_comm_save_session(comm, s, good), KILN_OK);
    assert_int_equal(kiln_variable_read(s, "W1", w0), KILN_OK);
    /* the last rank reads a file that is not there */
    int last = kiln_comm_rank(comm) == kiln_comm_size(comm) - 1;
    snprintf(path, sizeof path, "%s", last ? "no_such_checkpoint.npz" : good);
    assert_int_equal(kiln_comm_load_session(comm, s, path), KILN_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "rank %d: ", kiln_comm_size(comm) - 1);
    assert_non_null(strstr(kiln_comm_error(comm), want));
    assert_non_null(strstr(kiln_comm_error(comm), "no_such_checkpoint.npz"));
    assert_int_equal(kiln_variable_read(s, "W1", w1), KILN_OK);
    assert_memory_equal(kiln_tensor_data(w0), kiln_tensor_data(w1),
                        sizeof(float) * 8 * CLASSES);
    /* readable everywhere: loads */
    assert_int_equal(kiln_comm_load_session(comm, s, good), KILN_OK);
    if (kiln_comm_rank(comm) == 0)
        remove(good);
    kiln_tensor_free(w0);
    kiln_tensor_free(w1);
    kiln_session_free(s);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double seconds)
{
    struct timespec t = {(time_t)seconds,
                         (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&t, NULL);
}

/* A collective the other ranks join late: within the timeout it
   succeeds; one they never join (a rank stopped) fails on the rank that
   waited, after its timeout, with KILN_ERR_IO and a message naming the
   timeout, and its communicator then refuses every later collective at
   once (its ranks no longer agree on which call is next). */
static void test_timeout(void **state)
{
    (void)state;
    kiln_comm *c = kiln_comm_world(); /* its own: this test breaks it */
    assert_non_null(c);
    int rank = kiln_comm_rank(c), size = kiln_comm_size(c);
    assert_true(kiln_comm_timeout(c) == 0.0); /* MPI's: for ever */
    assert_int_equal(kiln_comm_set_timeout(c, -1), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_comm_error(c), "kiln_comm_set_timeout"));
    assert_int_equal(kiln_comm_set_timeout(c, NAN), KILN_ERR_ARG);
    assert_int_equal(kiln_comm_set_timeout(c, INFINITY), KILN_ERR_ARG);
    assert_int_equal(kiln_comm_set_timeout(NULL, 1), KILN_ERR_ARG);
    assert_true(kiln_comm_timeout(NULL) == -1.0);
    assert_true(kiln_comm_timeout(c) == 0.0); /* unchanged by the errors */

    /* late by 0.2 s, within 30 s */
    assert_int_equal(kiln_comm_set_timeout(c, 30), KILN_OK);
    double v = rank + 1;
    if (rank != 0)
        sleep_s(0.2);
    assert_int_equal(kiln_comm_allreduce_sum(c, &v, 1), KILN_OK);
    assert_true(v == size * (size + 1) / 2.0);

    /* rank 0 waits 0.3 s for ranks that never come */
    if (rank == 0) {
        assert_int_equal(kiln_comm_set_timeout(c, 0.3), KILN_OK);
        v = 1;
        double t0 = now_s();
        assert_int_equal(kiln_comm_allreduce_sum(c, &v, 1), KILN_ERR_IO);
        double waited = now_s() - t0;
        assert_true(waited >= 0.3 && waited < 5);
        assert_true(v == 1); /* the caller's value untouched */
        assert_non_null(strstr(kiln_comm_error(c), "within 0.3 s"));
        assert_non_null(strstr(kiln_comm_error(c), "a rank died or stopped"));
        /* broken: the next collective fails at once, calling no MPI */
        t0 = now_s();
        assert_int_equal(kiln_comm_allreduce_sum(c, &v, 1), KILN_ERR_IO);
        assert_true(now_s() - t0 < 0.25);
        assert_non_null(strstr(kiln_comm_error(c), "no answer"));
    }
    kiln_comm_free(c);
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
        cmocka_unit_test(test_shared_weights),
        cmocka_unit_test(test_shared_weights_private),
        cmocka_unit_test(test_shared_weights_exact),
        cmocka_unit_test(test_shared_weights_sum_once),
        cmocka_unit_test(test_shared_weights_penalty),
        cmocka_unit_test(test_shared_weights_session_freed),
        cmocka_unit_test(test_shared_weights_unavailable),
        cmocka_unit_test(test_compiled_iallreduce),
        cmocka_unit_test(test_compiled_mlp_gradient_output),
        cmocka_unit_test(test_compiled_cnn),
        cmocka_unit_test(test_dynamic_mlp),
        cmocka_unit_test(test_dynamic_cnn),
        cmocka_unit_test(test_mismatched_model),
        cmocka_unit_test(test_mismatched_config),
        cmocka_unit_test(test_mismatched_shared_memory),
        cmocka_unit_test(test_mismatched_timeouts),
        cmocka_unit_test(test_zero1_compiled_mlp_adam),
        cmocka_unit_test(test_zero1_compiled_mlp_sgd),
        cmocka_unit_test(test_zero1_compiled_cnn),
        cmocka_unit_test(test_zero1_dynamic),
        cmocka_unit_test(test_zero1_resume),
        cmocka_unit_test(test_zero1_errors),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_step_without_its_communicator),
        cmocka_unit_test(test_step_built_before_attaching),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_load_fails_on_one_rank),
        cmocka_unit_test(test_timeout),
    };
    /* e.g. KILN_TEST_FILTER='test_zero1*' to run some only */
    if (getenv("KILN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("KILN_TEST_FILTER"));
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    kiln_tensor_free(data_x);
    kiln_tensor_free(data_y);
    kiln_comm_free(comm);
    return failed ? 1 : 0;
}
