/* Batch norm alone on the residual block's activations ([32,64,32,32]):
 * a training forward (statistics, normalisation, running-statistic
 * updates), a training forward and backward (dx, dweight, dbias from dy)
 * and an evaluation forward.  bench/norm.py runs the same in PyTorch.
 *
 *   norm THREADS
 *
 * Prints "KERNEL <train-fwd|train-fwd+bwd|eval-fwd> <ms> ms", timed over
 * KILN_BENCH_SECONDS (default 1) split between the three, medians of five
 * timings.  Built by bench/CMakeLists.txt as <build>/bench/norm.
 */
#include "kiln.h"
#include "timing.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: norm THREADS\n");
        return 2;
    }
    const char *e = getenv("KILN_BENCH_SECONDS");
    double budget = (e && atof(e) > 0 ? atof(e) : 1.0) / 3;
    kiln_session_options o = {.threads = atoi(argv[1])};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_shape xs = KILN_SHAPE(32, 64, 32, 32);
    kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
    kiln_node *dy = kiln_input(g, "dy", KILN_F32, xs);
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(64), kiln_init_ones());
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(64), kiln_init_zeros());
    kiln_node *rm = kiln_node_set_trainable(
        kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(64), kiln_init_zeros()), 0);
    kiln_node *rv = kiln_node_set_trainable(
        kiln_variable(g, "rv", KILN_F32, KILN_SHAPE(64), kiln_init_ones()), 0);
    kiln_node *out[4] = {kiln_batch_norm(g, x, w, b, rm, rv, 0.1f, 1e-5f)};
    kiln_node *wrt[3] = {x, w, b}, *ins[2] = {x, dy};
    if (kiln_grads(g, out[0], dy, wrt, 3, out + 1) != KILN_OK) {
        fprintf(stderr, "norm: %s\n", kiln_graph_error(g));
        return 1;
    }
    bench_report(s, g, out, 1, ins, 2, "train-fwd", budget, "norm");
    bench_report(s, g, out, 4, ins, 2, "train-fwd+bwd", budget, "norm");
    kiln_session_set_training(s, 0);
    bench_report(s, g, out, 1, ins, 2, "eval-fwd", budget, "norm");
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
