/* The convolution kernels alone: forward, input gradient and weight
 * gradient of the convolutions of the CNN workloads, each compiled
 * on its own.  bench/conv.py runs the same in PyTorch (oneDNN).
 *
 *   conv CASE THREADS    CASE: mnist1 (1->32 5x5 pad 2, 28x28, batch 128),
 *                        mnist2 (32->64 5x5 pad 2, 14x14, batch 128),
 *                        res (64->64 3x3 pad 1, 32x32, batch 32)
 *
 * Prints per kernel "KERNEL <fwd|dx|dw> <ms> ms <GFLOP/s> GFLOP/s <share>%
 * of peak" (peak: 115 GFLOP/s of FMA per core times THREADS) and their
 * backward, dx + dw ("bwd", as bench/conv.py measures it), timed over
 * KILN_BENCH_SECONDS (default 1) split between the three, medians of five
 * runs.  Built by bench/CMakeLists.txt as <build>/bench/conv.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/conv.h"
#include "kiln.h"
#include "timing.h"

#define PEAK_PER_CORE 115.0

static void report(const char *what, double t, double flops, int threads)
{
    double gf = flops / t * 1e-9;
    printf("KERNEL %s %.3f ms %.1f GFLOP/s %.0f%% of peak\n", what, t * 1e3, gf,
           100.0 * gf / (PEAK_PER_CORE * threads));
}

typedef struct conv_case {
    const char *name;
    int64_t n, c, o, h, k, pad;
    int need_dx;
} conv_case;

static const conv_case CASES[] = {
    {"mnist1", 128, 1, 32, 28, 5, 2, 0},
    {"mnist2", 128, 32, 64, 14, 5, 2, 1},
    {"res", 32, 64, 64, 32, 3, 1, 1},
};

/* Times y's function; prints and returns seconds per run. */
static double bench_kernel(kiln_session *s, kiln_graph *g, kiln_node *y,
                           kiln_node **ins, int n_in, const char *what,
                           double flops, int threads, double budget)
{
    kiln_function *f = kiln_compile(s, g, &y, 1, ins, n_in);
    if (!f) {
        fprintf(stderr, "conv: %s\n", kiln_session_error(s));
        exit(1);
    }
    kiln_tensor *in[2], *out = kiln_function_new_output(f, 0);
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (int i = 0; i < n_in; i++) {
        in[i] = kiln_tensor_new(KILN_F32, ins[i]->shape);
        float *p = kiln_tensor_f32(in[i]);
        for (int64_t e = 0; e < kiln_tensor_numel(in[i]); e++)
            p[e] = (float)kiln_rng_uniform(&r) - 0.5f;
    }
    double t = bench_time_fn(f, in, &out, budget);
    report(what, t, flops, threads);
    for (int i = 0; i < n_in; i++)
        kiln_tensor_free(in[i]);
    kiln_tensor_free(out);
    kiln_function_free(f);
    return t;
}

int main(int argc, char **argv)
{
    const conv_case *c = NULL;
    for (size_t i = 0; argc == 3 && i < sizeof CASES / sizeof *CASES; i++)
        if (!strcmp(argv[1], CASES[i].name))
            c = &CASES[i];
    if (!c) {
        fprintf(stderr, "usage: conv mnist1|mnist2|res THREADS\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    const char *e = getenv("KILN_BENCH_SECONDS");
    double budget = (e && atof(e) > 0 ? atof(e) : 1.0) / 3;
    kiln_session_options o = {.threads = threads};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input(g, "x", KILN_F32, KILN_SHAPE(c->n, c->c, c->h, c->h));
    kiln_node *w =
        kiln_input(g, "w", KILN_F32, KILN_SHAPE(c->o, c->c, c->k, c->k));
    kiln_node *dy =
        kiln_input(g, "dy", KILN_F32, KILN_SHAPE(c->n, c->o, c->h, c->h));
    kiln_window win = {.nd = 2, .groups = 1};
    for (int i = 0; i < 2; i++) {
        win.kernel[i] = (int)c->k;
        win.stride[i] = win.dilation[i] = 1;
        win.pad_lo[i] = win.pad_hi[i] = (int)c->pad;
    }
    kiln_node *y = kiln_conv_op(g, KILN_OP_CONV, x, w, &win, NULL);
    kiln_node *dx = kiln_conv_op(g, KILN_OP_CONV_TRANSPOSE, dy, w, &win, NULL);
    kiln_node *dw = kiln_conv_op(g, KILN_OP_CONV_WGRAD, x, dy, &win, NULL);
    if (kiln_graph_status(g) != KILN_OK) {
        fprintf(stderr, "conv: %s\n", kiln_graph_error(g));
        return 1;
    }
    double flops = 2.0 * c->n * c->o * c->h * c->h * c->c * c->k * c->k;
    bench_kernel(s, g, y, (kiln_node *[]){x, w}, 2, "fwd", flops, threads,
                 budget);
    double t = 0;
    if (c->need_dx)
        t += bench_kernel(s, g, dx, (kiln_node *[]){dy, w}, 2, "dx", flops,
                          threads, budget);
    t += bench_kernel(s, g, dw, (kiln_node *[]){x, dy}, 2, "dw", flops, threads,
                      budget);
    report("bwd", t, flops * (c->need_dx ? 2 : 1), threads);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
