/* Data-parallel training step of the 784-1024-1024-10 relu MLP (global
   batch 256 by default) or of the MNIST CNN (kiln train --model cnn's:
   two 5x5 convolutions of 32 and 64 channels, each with relu and a 2x2 max
   pool, dense 128, 10) on one rank or, under mpirun, on each rank's shard.
   bench/dist_run runs it as 1 rank x 1 thread, 1 rank x 2 threads and 2
   ranks x 1 thread and prints the table.

     [mpirun -np N] dist [--model mlp|cnn] [--threads T] [--batch B]
                         [--steps S] [--bucket-bytes N] [--adam 1]
                         [--zero1 1] [--shm 0] [--gemm-acc 0]
                         [--shared-weights 0|1|2]

   SGD by default; --adam 1 trains with Adam (two moments of state per
   value), --zero1 1 shards that state over the ranks (ZeRO-1); --shm 0
   all-reduces the buckets with MPI_Iallreduce where the ranks share a
   machine (by default they are summed through shared memory);
   --shared-weights 0 builds the SGD step with gradient buckets where the
   ranks share a machine (by default they share one copy of the weights,
   each adding its share of the update: docs/distributed.md), 2 with
   private copies and each update's change all-reduced;
   --gemm-acc 0 compiles without the gemm_acc pass (the SGD update of a
   weight is then a pass of its own after its gradient's product, as a
   data-parallel step's always is: bench/dist_run's bounds).

   Rank 0 prints one line, key=value: ranks, threads, batch, samples_per_s
   (median over S steps after 3 warm-up steps, each timed from a barrier
   so that a step counts its slowest rank), bytes_per_step (gradient bytes
   all-reduced per step), wait_ms_per_step (time blocked in the waits for
   all-reduces: communication not hidden behind backward), buckets,
   gathered_bytes_per_step (ZeRO-1's all-gather of updated values),
   gather_ms_per_step, state_bytes (rank 0's optimiser state) and
   cpu_ms_per_step (the median CPU time of kiln_run per step, the mean
   over the ranks: on a busy machine, what a step costs a rank whatever
   the others get of the cores; it includes any time spent polling MPI
   while waiting for the other ranks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

static const char *PROG = "bench/dist";
static const int WIDTHS[4] = {784, 1024, 1024, 10};

typedef struct opts {
    int threads, batch, steps, cnn, adam, zero1, shm, gemm_acc;
    size_t bucket_bytes;
    int shared_weights;
} opts;

static opts parse(int argc, char **argv)
{
    opts o = {1, 256, 20, 0, 0, 0, 1, 1, 0, 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            o.batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            o.steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model"))
            o.cnn = !strcmp(argv[i + 1], "cnn");
        else if (!strcmp(argv[i], "--adam"))
            o.adam = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shm"))
            o.shm = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--zero1"))
            o.zero1 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--gemm-acc"))
            o.gemm_acc = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--shared-weights"))
            o.shared_weights = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bucket-bytes"))
            o.bucket_bytes = (size_t)atoll(argv[i + 1]);
        else
            bench_die(PROG, "usage", argv[i]);
    }
    if (o.threads < 1 || o.batch < 1 || o.steps < 1)
        bench_die(PROG, "usage", "threads, batch and steps must be positive");
    return o;
}

static kiln_node *param(kiln_graph *g, const char *name, kiln_shape shape,
                        double lim)
{
    return kiln_variable(g, name, KILN_F32, shape,
                         kiln_init_uniform(-lim, lim));
}

/* The MLP's logits on x [rows, 784]. */
static kiln_node *mlp(kiln_graph *g, kiln_node *x)
{
    kiln_node *h = x;
    for (int i = 0; i < 3; i++) {
        char wn[8], bn[8];
        snprintf(wn, sizeof wn, "W%d", i);
        snprintf(bn, sizeof bn, "b%d", i);
        kiln_node *w = param(g, wn, KILN_SHAPE(WIDTHS[i], WIDTHS[i + 1]), 0.05);
        kiln_node *b = kiln_variable(g, bn, KILN_F32, KILN_SHAPE(WIDTHS[i + 1]),
                                     kiln_init_zeros());
        h = kiln_affine(g, h, w, b);
        if (i < 2)
            h = kiln_relu(g, h);
    }
    return h;
}

/* The CNN's logits on x [rows, 784]. */
static kiln_node *cnn(kiln_graph *g, kiln_node *x, int rows)
{
    const kiln_conv_params same = {.padding = {2, 2}};
    const int pool[2] = {2, 2}, ch[3] = {1, 32, 64};
    kiln_node *h = kiln_reshape(g, x, KILN_SHAPE(rows, 1, 28, 28));
    for (int k = 0; k < 2; k++) {
        char wn[8], bn[8];
        snprintf(wn, sizeof wn, "C%d", k);
        snprintf(bn, sizeof bn, "c%d", k);
        kiln_node *w = param(g, wn, KILN_SHAPE(ch[k + 1], ch[k], 5, 5), 0.1);
        kiln_node *b = param(g, bn, KILN_SHAPE(ch[k + 1]), 0.1);
        h = kiln_relu(g, kiln_conv2d(g, h, w, b, &same));
        h = kiln_max_pool2d(g, h, pool, NULL, NULL, NULL, 0);
    }
    h = kiln_flatten(g, h, 1, -1);
    h = kiln_relu(g,
                  kiln_affine(g, h, param(g, "W0", KILN_SHAPE(3136, 128), 0.02),
                              param(g, "b0", KILN_SHAPE(128), 0.02)));
    return kiln_affine(g, h, param(g, "W1", KILN_SHAPE(128, 10), 0.1),
                       param(g, "b1", KILN_SHAPE(10), 0.1));
}

/* The model's loss on X [rows, 784] and Y [rows], its training step
   compiled with the communicator (if any) attached first. */
static kiln_function *build(kiln_session *s, kiln_graph *g, int rows,
                            const opts *o)
{
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(rows, 784));
    kiln_node *y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(rows));
    kiln_node *h = o->cnn ? cnn(g, x, rows) : mlp(g, x);
    kiln_node *loss = kiln_softmax_cross_entropy(g, h, y);
    kiln_optim_options oo = kiln_optim_defaults(o->adam ? KILN_ADAM : KILN_SGD);
    oo.lr = o->adam ? 1e-4f : 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(opt, g, loss)};
    kiln_node *ins[2] = {x, y};
    kiln_compile_options co = kiln_compile_defaults();
    co.gemm_acc = o->gemm_acc;
    kiln_function *f = kiln_compile_ex(s, g, outs, 2, ins, 2, &co);
    if (!f)
        bench_die(PROG, "compile", kiln_session_error(s));
    return f;
}

/* Bytes of s's optimiser state (Adam's moments, momentum buffers). */
static long long state_bytes(const kiln_session *s)
{
    long long bytes = 0;
    for (int i = 0; i < kiln_session_num_variables(s); i++) {
        kiln_param_info p;
        if (kiln_session_variable_info(s, i, &p) == KILN_OK &&
            (strstr(p.name, ".adam_") || strstr(p.name, ".momentum")))
            bytes += 4 * kiln_shape_numel(p.shape);
    }
    return bytes;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void barrier(kiln_comm *c)
{
    double v = 0;
    if (c && kiln_comm_allreduce_sum(c, &v, 1) != KILN_OK)
        bench_die(PROG, "barrier", kiln_comm_error(c));
}

int main(int argc, char **argv)
{
    opts o = parse(argc, argv);
    kiln_comm *c = getenv("OMPI_COMM_WORLD_SIZE") ? kiln_comm_world() : NULL;
    int rank = c ? kiln_comm_rank(c) : 0, size = c ? kiln_comm_size(c) : 1;
    int rows = o.batch / size;
    kiln_session_options so = {.seed = 1, .threads = o.threads};
    kiln_session *s = kiln_session_new(&so);
    kiln_graph *g = kiln_graph_new();
    if (c && (kiln_comm_set_zero1(c, o.zero1) != KILN_OK ||
              kiln_comm_set_shared_memory(c, o.shm) != KILN_OK ||
              kiln_comm_set_shared_weights(c, o.shared_weights) != KILN_OK ||
              kiln_session_set_comm(s, c) != KILN_OK ||
              (o.bucket_bytes &&
               kiln_comm_set_bucket_bytes(c, o.bucket_bytes) != KILN_OK)))
        bench_die(PROG, "communicator", kiln_session_error(s));
    kiln_function *f = build(s, g, rows, &o);
    if (c && kiln_comm_sync_session(c, s, "bench") != KILN_OK)
        bench_die(PROG, "sync", kiln_comm_error(c));
    kiln_rng r;
    kiln_rng_seed(&r, 2 + (uint64_t)rank);
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(rows, 784));
    kiln_tensor *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(rows));
    for (int64_t i = 0; i < (int64_t)rows * 784; i++)
        kiln_tensor_f32(x)[i] = (float)kiln_rng_uniform(&r);
    for (int i = 0; i < rows; i++)
        kiln_tensor_i32(y)[i] = (int32_t)(kiln_rng_u32(&r) % 10);
    kiln_tensor *in[2] = {x, y}, *out[2] = {NULL, NULL};
    double *t = malloc(2 * (size_t)o.steps * sizeof *t), *cpu = t + o.steps;
    for (int i = -3; i < o.steps; i++) {
        if (i == 0 && c)
            kiln_comm_reset_stats(c);
        barrier(c);
        double t0 = bench_now_s(), c0 = thread_cpu_s();
        if (kiln_run(f, in, out) != KILN_OK)
            bench_die(PROG, "run", kiln_session_error(s));
        double c1 = thread_cpu_s();
        barrier(c);
        if (i >= 0) {
            t[i] = bench_now_s() - t0;
            cpu[i] = c1 - c0;
        }
    }
    qsort(t, (size_t)o.steps, sizeof *t, bench_by_value);
    qsort(cpu, (size_t)o.steps, sizeof *cpu, bench_by_value);
    double cpu_ms = 1e3 * cpu[o.steps / 2] / size;
    if (c)
        kiln_comm_allreduce_sum(c, &cpu_ms, 1);
    kiln_comm_stats st = {0};
    if (c)
        kiln_comm_get_stats(c, &st);
    if (rank == 0)
        printf("ranks=%d threads=%d batch=%d samples_per_s=%.1f "
               "bytes_per_step=%lld wait_ms_per_step=%.3f buckets=%lld "
               "gathered_bytes_per_step=%lld gather_ms_per_step=%.3f "
               "state_bytes=%lld cpu_ms_per_step=%.3f\n",
               size, o.threads, rows * size, rows * size / t[o.steps / 2],
               (long long)(st.bytes / o.steps), 1e3 * st.wait_seconds / o.steps,
               (long long)(st.allreduces / o.steps),
               (long long)(st.gathered_bytes / o.steps),
               1e3 * st.gather_seconds / o.steps, state_bytes(s), cpu_ms);
    free(t);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_graph_free(g);
    kiln_session_free(s);
    kiln_comm_free(c);
    return 0;
}
