/* Data-parallel training step of the 784-1024-1024-10 relu MLP (SGD,
   global batch 256 by default) on one rank or, under mpirun, on each rank's
   shard.  bench/dist_run runs it as 1 rank x 1 thread, 1 rank x 2 threads
   and 2 ranks x 1 thread and prints the table.

     [mpirun -np N] dist [--threads T] [--batch B] [--steps S]
                         [--bucket-bytes N]

   Rank 0 prints one line, key=value: ranks, threads, batch, samples_per_s
   (median over S steps after 3 warm-up steps, each timed from a barrier
   so that a step counts its slowest rank), bytes_per_step (gradient bytes
   all-reduced per step), wait_ms_per_step (time blocked in the waits for
   all-reduces: communication not hidden behind backward) and buckets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

static const char *PROG = "bench/dist";
static const int WIDTHS[4] = {784, 1024, 1024, 10};

typedef struct opts {
    int threads, batch, steps;
    size_t bucket_bytes;
} opts;

static opts parse(int argc, char **argv)
{
    opts o = {1, 256, 20, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            o.batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            o.steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bucket-bytes"))
            o.bucket_bytes = (size_t)atoll(argv[i + 1]);
        else
            bench_die(PROG, "usage", argv[i]);
    }
    if (o.threads < 1 || o.batch < 1 || o.steps < 1)
        bench_die(PROG, "usage", "threads, batch and steps must be positive");
    return o;
}

/* The model's loss on X [rows, 784] and Y [rows], its SGD step compiled
   with the communicator (if any) attached first. */
static kiln_function *build(kiln_session *s, kiln_graph *g, int rows)
{
    kiln_node *x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(rows, 784));
    kiln_node *y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(rows));
    kiln_node *h = x;
    for (int i = 0; i < 3; i++) {
        char wn[8], bn[8];
        snprintf(wn, sizeof wn, "W%d", i);
        snprintf(bn, sizeof bn, "b%d", i);
        kiln_node *w =
            kiln_variable(g, wn, KILN_F32, KILN_SHAPE(WIDTHS[i], WIDTHS[i + 1]),
                          kiln_init_uniform(-0.05, 0.05));
        kiln_node *b = kiln_variable(g, bn, KILN_F32, KILN_SHAPE(WIDTHS[i + 1]),
                                     kiln_init_zeros());
        h = kiln_affine(g, h, w, b);
        if (i < 2)
            h = kiln_relu(g, h);
    }
    kiln_node *loss = kiln_softmax_cross_entropy(g, h, y);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(opt, g, loss)};
    kiln_node *ins[2] = {x, y};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    if (!f)
        bench_die(PROG, "compile", kiln_session_error(s));
    return f;
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
    if (c && (kiln_session_set_comm(s, c) != KILN_OK ||
              (o.bucket_bytes &&
               kiln_comm_set_bucket_bytes(c, o.bucket_bytes) != KILN_OK)))
        bench_die(PROG, "communicator", kiln_session_error(s));
    kiln_function *f = build(s, g, rows);
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
    double *t = malloc((size_t)o.steps * sizeof *t);
    for (int i = -3; i < o.steps; i++) {
        if (i == 0 && c)
            kiln_comm_reset_stats(c);
        barrier(c);
        double t0 = bench_now_s();
        if (kiln_run(f, in, out) != KILN_OK)
            bench_die(PROG, "run", kiln_session_error(s));
        barrier(c);
        if (i >= 0)
            t[i] = bench_now_s() - t0;
    }
    qsort(t, (size_t)o.steps, sizeof *t, bench_by_value);
    kiln_comm_stats st = {0};
    if (c)
        kiln_comm_get_stats(c, &st);
    if (rank == 0)
        printf("ranks=%d threads=%d batch=%d samples_per_s=%.1f "
               "bytes_per_step=%lld wait_ms_per_step=%.3f buckets=%lld\n",
               size, o.threads, rows * size, rows * size / t[o.steps / 2],
               (long long)(st.bytes / o.steps), 1e3 * st.wait_seconds / o.steps,
               (long long)(st.allreduces / o.steps));
    free(t);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_graph_free(g);
    kiln_session_free(s);
    kiln_comm_free(c);
    return 0;
}
