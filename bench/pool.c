/* Max pooling alone: 2x2 windows of stride 2 on the MNIST CNN's two pooled
 * activations, the forward op, its gradient op (x, dy -> dx) and both in
 * one compiled function (a training step's share).  bench/pool.py runs the
 * same in PyTorch.
 *
 *   pool CASE THREADS    CASE: mnist1 ([128,32,28,28]), mnist2 ([128,64,14,14])
 *
 * Prints per kernel "KERNEL <fwd|bwd|fwd+bwd> <ms> ms", timed over
 * KILN_BENCH_SECONDS (default 1) split between the three, medians of five
 * timings.  Built by bench/CMakeLists.txt as <build>/bench/pool.
 */
#include <string.h>

#include "kiln.h"
#include "timing.h"

static const struct {
    const char *name;
    int64_t c, h;
} CASES[] = {{"mnist1", 32, 28}, {"mnist2", 64, 14}};

int main(int argc, char **argv)
{
    int c = -1;
    for (int i = 0; argc == 3 && i < 2; i++)
        if (!strcmp(argv[1], CASES[i].name))
            c = i;
    if (c < 0) {
        fprintf(stderr, "usage: pool mnist1|mnist2 THREADS\n");
        return 2;
    }
    const char *e = getenv("KILN_BENCH_SECONDS");
    double budget = (e && atof(e) > 0 ? atof(e) : 1.0) / 3;
    kiln_session_options o = {.threads = atoi(argv[2])};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    int64_t ch = CASES[c].c, h = CASES[c].h;
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(128, ch, h, h));
    kiln_node *y = kiln_max_pool2d(g, x, (int[]){2, 2}, NULL, NULL, NULL, 0);
    kiln_node *dy =
        kiln_input(g, "dy", KILN_F32, KILN_SHAPE(128, ch, h / 2, h / 2));
    kiln_node *out[2] = {y, NULL}, *ins[2] = {x, dy};
    if (kiln_grads(g, y, dy, &x, 1, &out[1]) != KILN_OK) {
        fprintf(stderr, "pool: %s\n", kiln_graph_error(g));
        return 1;
    }
    bench_report(s, g, out, 1, ins, 2, "fwd", budget, "pool");
    bench_report(s, g, out + 1, 1, ins, 2, "bwd", budget, "pool");
    bench_report(s, g, out, 2, ins, 2, "fwd+bwd", budget, "pool");
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
