/* Per-node cost of Marian-style dynamic graphs: build, forward and backward
 * a graph that is rebuilt on every step.  bench/dynamic.py does the same in
 * PyTorch eager mode with the same arguments.
 *
 *   dynamic chain N             a chain of N scalar ops (sin, *x, +x, tanh
 *                               in turn) on one variable x, then the
 *                               gradient of x: microseconds per op
 *   dynamic mlp LAYERS WIDTH BATCH
 *                               relu(h W + b) LAYERS times, mean square
 *                               loss, all gradients: microseconds per step
 *
 * One thread (kiln_set_num_threads(1); run with OPENBLAS_NUM_THREADS=1).
 * Prints the breakdown, then "RESULT <median> <unit>" over REPS timed runs
 * of KILN_BENCH_SECONDS (default 1) / REPS seconds each, and "NODES <count>
 * nodes", the nodes of the forward graph (bench/run's per-node cost of the
 * MLP divides both libraries' step times by it).
 *
 * Built by bench/CMakeLists.txt as <build>/bench/dynamic; bench/run runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

enum { REPS = 5 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double budget(void)
{
    const char *e = getenv("KILN_BENCH_SECONDS");
    double v = e ? atof(e) : 1.0;
    return (v > 0 ? v : 1.0) / REPS;
}

static void check(kiln_status st, kiln_session *s, const char *what)
{
    if (st != KILN_OK) {
        fprintf(stderr, "dynamic: %s: %s\n", what, kiln_session_error(s));
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times of the three phases of one step, accumulated. */
typedef struct phases {
    double build, forward, backward;
} phases;

static kiln_node *build_chain(kiln_graph *g, int n)
{
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, KILN_SHAPE(1), kiln_init_value(0.5));
    kiln_node *y = x;
    for (int i = 0; i < n; i++) {
        switch (i % 4) {
        case 0:
            y = kiln_sin(g, y);
            break;
        case 1:
            y = kiln_mul(g, y, x);
            break;
        case 2:
            y = kiln_add(g, y, x);
            break;
        default:
            y = kiln_tanh(g, y);
            break;
        }
    }
    return kiln_sum(g, y, KILN_ALL_AXES, 0);
}

typedef struct mlp_cfg {
    int layers, width, batch;
    kiln_tensor *x;
} mlp_cfg;

static kiln_node *build_mlp(kiln_graph *g, kiln_session *s, const mlp_cfg *c)
{
    kiln_node *h = kiln_input(g, "x", KILN_F32, KILN_SHAPE(c->batch, c->width));
    check(kiln_feed(s, h, c->x), s, "feed");
    for (int i = 0; i < c->layers; i++) {
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "W%d", i);
        snprintf(bn, sizeof bn, "b%d", i);
        kiln_node *w =
            kiln_variable(g, wn, KILN_F32, KILN_SHAPE(c->width, c->width),
                          kiln_init_glorot_uniform());
        kiln_node *b = kiln_variable(g, bn, KILN_F32, KILN_SHAPE(c->width),
                                     kiln_init_zeros());
        h = kiln_relu(g, kiln_affine(g, h, w, b));
    }
    return kiln_mean(g, kiln_mul(g, h, h), KILN_ALL_AXES, 0);
}

/* One step: clear, build, forward, backward. */
static void step(kiln_session *s, kiln_graph *g, int chain_n, const mlp_cfg *c,
                 phases *p)
{
    double t0 = now_s();
    kiln_graph_clear(g);
    kiln_node *loss = c ? build_mlp(g, s, c) : build_chain(g, chain_n);
    double t1 = now_s();
    check(kiln_forward(s, g), s, "forward");
    double t2 = now_s();
    check(kiln_backward(s, g, loss), s, "backward");
    double t3 = now_s();
    p->build += t1 - t0;
    p->forward += t2 - t1;
    p->backward += t3 - t2;
}

int main(int argc, char **argv)
{
    int chain = argc == 3 && strcmp(argv[1], "chain") == 0;
    int mlp = argc == 5 && strcmp(argv[1], "mlp") == 0;
    if (!chain && !mlp) {
        fprintf(stderr,
                "usage: dynamic chain N | dynamic mlp LAYERS WIDTH BATCH\n");
        return 2;
    }
    kiln_set_num_threads(1);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    check(kiln_session_reserve_workspace_mb(s, g, 64), s, "reserve");
    int n = chain ? atoi(argv[2]) : 0;
    mlp_cfg cfg = {0};
    if (mlp) {
        cfg.layers = atoi(argv[2]);
        cfg.width = atoi(argv[3]);
        cfg.batch = atoi(argv[4]);
        cfg.x = kiln_tensor_new(KILN_F32, KILN_SHAPE(cfg.batch, cfg.width));
        kiln_rng r;
        kiln_rng_seed(&r, 1);
        for (int i = 0; i < cfg.batch * cfg.width; i++)
            kiln_tensor_f32(cfg.x)[i] = (float)(2 * kiln_rng_uniform(&r) - 1);
    }
    if ((chain && n < 1) ||
        (mlp && (cfg.layers < 1 || cfg.width < 1 || cfg.batch < 1))) {
        fprintf(stderr, "dynamic: sizes must be positive\n");
        return 2;
    }
    phases warm = {0};
    for (int i = 0; i < 20; i++)
        step(s, g, n, mlp ? &cfg : NULL, &warm);
    int fwd_nodes = 0;
    {
        /* nodes of the forward graph (what the user built), for per-node costs
         */
        kiln_graph_clear(g);
        if (mlp)
            build_mlp(g, s, &cfg);
        else
            build_chain(g, n);
        fwd_nodes = kiln_graph_node_count(g);
    }
    double med[REPS];
    phases total = {0};
    long total_steps = 0;
    for (int r = 0; r < REPS; r++) {
        phases p = {0};
        long steps = 0;
        double t0 = now_s();
        while (now_s() - t0 < budget()) {
            step(s, g, n, mlp ? &cfg : NULL, &p);
            steps++;
        }
        double per = (p.build + p.forward + p.backward) / (double)steps;
        med[r] = chain ? 1e6 * per / n : 1e6 * per;
        total.build += p.build;
        total.forward += p.forward;
        total.backward += p.backward;
        total_steps += steps;
    }
    qsort(med, REPS, sizeof med[0], cmp_double);
    int all_nodes = kiln_graph_node_count(g);
    double us = 1e6 / (double)total_steps;
    printf("graph: %d forward nodes, %d with the gradient graph\n", fwd_nodes,
           all_nodes);
    printf("per step: build %.1f us, forward %.1f us, backward %.1f us\n",
           total.build * us, total.forward * us, total.backward * us);
    printf("per forward node: %.3f us (build + forward + backward)\n",
           (total.build + total.forward + total.backward) * us / fwd_nodes);
    printf("RESULT %.4f %s\n", med[REPS / 2], chain ? "us/op" : "us/step");
    printf("NODES %d nodes\n", fwd_nodes);
    kiln_tensor_free(cfg.x);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
