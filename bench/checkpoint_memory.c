/* Gradient checkpointing on a deep MLP: peak workspace memory and time of
 * one training step (build, forward, backward) with and without a
 * checkpoint every EVERY layers, checked against the targets: memory at
 * most half, time at most 1.4 times the unmarked run's.
 *
 *   checkpoint_memory [LAYERS WIDTH BATCH EVERY]   default 32 256 256 4
 *
 * Memory is the workspace's peak of live values (activations, gradients
 * and their temporaries; variables and optimiser state live in the session,
 * outside it) and its footprint (bytes handed out since the clear).  Time
 * is the fastest of 15 interleaved runs of each (the least disturbed by
 * other processes), one thread.  Prints a table, then (for bench/run)
 *   MEMORY_RATIO <ratio> ratio
 *   TIME_RATIO <ratio> ratio
 * and exits 1 when a target is missed.
 *
 * Built by bench/CMakeLists.txt as <build>/bench/checkpoint_memory; bench/run
 * runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

enum { REPS = 15 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct cfg {
    int layers, width, batch, every;
    kiln_tensor *x;
} cfg;

typedef struct result {
    double seconds;
    kiln_workspace_stats ws;
    float grad0; /* first element of dL/dW0, to compare the runs */
} result;

static result run(kiln_session *s, kiln_graph *g, const cfg *c,
                  int checkpointing)
{
    result res;
    double t0 = now_s();
    kiln_graph_clear(g);
    kiln_session_set_checkpointing(s, g, checkpointing);
    kiln_node *h = kiln_input(g, "x", KILN_F32, KILN_SHAPE(c->batch, c->width));
    kiln_node *w0 = NULL;
    kiln_status st = kiln_feed(s, h, c->x);
    for (int i = 0; i < c->layers; i++) {
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "W%d", i);
        snprintf(bn, sizeof bn, "b%d", i);
        kiln_node *w =
            kiln_variable(g, wn, KILN_F32, KILN_SHAPE(c->width, c->width),
                          kiln_init_glorot_uniform());
        kiln_node *b = kiln_variable(g, bn, KILN_F32, KILN_SHAPE(c->width),
                                     kiln_init_uniform(-0.1, 0.1));
        w0 = w0 ? w0 : w;
        h = kiln_relu(g, kiln_affine(g, h, w, b));
        if (checkpointing && (i + 1) % c->every == 0)
            kiln_checkpoint(h);
    }
    kiln_node *loss = kiln_mean(g, kiln_mul(g, h, h), KILN_ALL_AXES, 0);
    if (st == KILN_OK)
        st = kiln_backprop(s, g, loss);
    if (st != KILN_OK) {
        fprintf(stderr, "checkpoint_memory: %s\n", kiln_session_error(s));
        exit(2);
    }
    res.seconds = now_s() - t0;
    kiln_session_workspace_stats(s, g, &res.ws);
    res.grad0 = kiln_node_grad_f32(s, w0)[0];
    return res;
}

int main(int argc, char **argv)
{
    cfg c = {32, 256, 256, 4, NULL};
    if (argc == 5) {
        c.layers = atoi(argv[1]);
        c.width = atoi(argv[2]);
        c.batch = atoi(argv[3]);
        c.every = atoi(argv[4]);
    } else if (argc != 1) {
        fprintf(stderr,
                "usage: checkpoint_memory [LAYERS WIDTH BATCH EVERY]\n");
        return 2;
    }
    if (c.layers < 1 || c.width < 1 || c.batch < 1 || c.every < 1) {
        fprintf(stderr, "checkpoint_memory: sizes must be positive\n");
        return 2;
    }
    kiln_set_num_threads(1);
    kiln_set_logging_level(KILN_LOGGING_WARN);
    c.x = kiln_tensor_new(KILN_F32, KILN_SHAPE(c.batch, c.width));
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (int i = 0; i < c.batch * c.width; i++)
        kiln_tensor_f32(c.x)[i] = (float)(2 * kiln_rng_uniform(&r) - 1);
    kiln_session *s = kiln_session_new(NULL);
    /* one graph per mode, so each keeps its own workspace blocks */
    kiln_graph *g[2] = {kiln_graph_new(), kiln_graph_new()};
    result best[2], warm[2];
    double t[2][REPS];
    for (int m = 0; m < 2; m++)
        warm[m] = run(s, g[m], &c, m);
    for (int k = 0; k < REPS; k++)
        for (int m = 0; m < 2; m++) {
            best[m] = run(s, g[m], &c, m);
            t[m][k] = best[m].seconds;
        }
    (void)warm;
    for (int m = 0; m < 2; m++)
        qsort(t[m], REPS, sizeof t[m][0], cmp_double); /* t[m][0]: fastest */
    double mem = (double)best[1].ws.peak / (double)best[0].ws.peak;
    double time = t[1][0] / t[0][0];
    printf("%d-layer MLP, width %d, batch %d, one thread\n", c.layers, c.width,
           c.batch);
    printf("%-26s %12s %12s %10s\n", "", "peak MiB", "footprint", "ms/step");
    printf("%-26s %12.2f %12.2f %10.2f\n", "no checkpoints",
           best[0].ws.peak / 1048576.0, best[0].ws.used / 1048576.0,
           1e3 * t[0][0]);
    char label[64];
    snprintf(label, sizeof label, "checkpoint every %d layers", c.every);
    printf("%-26s %12.2f %12.2f %10.2f\n", label, best[1].ws.peak / 1048576.0,
           best[1].ws.used / 1048576.0, 1e3 * t[1][0]);
    printf(
        "memory ratio %.3f (target <= 0.50), time ratio %.3f (target <= 1.40), "
        "gradients %s\n",
        mem, time,
        memcmp(&best[0].grad0, &best[1].grad0, sizeof(float)) == 0 ? "identical"
                                                                   : "DIFFER");
    printf("MEMORY_RATIO %.4f ratio\n", mem);
    printf("TIME_RATIO %.4f ratio\n", time);
    kiln_graph_free(g[0]);
    kiln_graph_free(g[1]);
    kiln_session_free(s);
    kiln_tensor_free(c.x);
    return mem <= 0.5 && time <= 1.4 ? 0 : 1;
}
