/* The embedding lookup and its gradient for the table (issue 12):
 *
 *   embedding V D N THREADS
 *
 * rows of a [V, D] table at N random ids, and the table's gradient for the
 * loss sum(rows * G) with G fixed (index_add of G into zeros), one
 * compiled function; prints "RESULT <ms> ms" per lookup + gradient (and
 * FORWARD, the lookup alone).  bench/embedding.py is PyTorch's side.
 * KILN_BENCH_SECONDS sets the timed duration (default 1).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kiln.h"
#include "timing.h"

static double budget(void)
{
    const char *e = getenv("KILN_BENCH_SECONDS");
    double v = e ? atof(e) : 1.0;
    return v > 0 ? v : 1.0;
}

/* Median ms per run of the function of outputs outs[0..n_out) of g. */
static double time_outputs(kiln_session *s, kiln_graph *g, kiln_node **outs,
                           int n_out, kiln_node *ids, kiln_tensor *idt)
{
    kiln_function *f = kiln_compile(s, g, outs, n_out, &ids, 1);
    if (!f) {
        fprintf(stderr, "embedding: %s\n", kiln_session_error(s));
        exit(1);
    }
    /* the caller reads no output back: both frameworks leave them where
       they were computed */
    kiln_tensor *out[2] = {NULL, NULL};
    double t = bench_time_fn(f, &idt, out, budget() / 2);
    kiln_function_free(f);
    return t * 1e3;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: embedding V D N THREADS\n");
        return 2;
    }
    int64_t v = atoll(argv[1]), d = atoll(argv[2]), n = atoll(argv[3]);
    kiln_session_options o = {.threads = atoi(argv[4])};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_tensor *idt = kiln_tensor_new(KILN_I32, KILN_SHAPE(n));
    float *gv = malloc((size_t)(n * d) * sizeof *gv);
    if (!s || !g || !idt || !gv)
        return 1;
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (int64_t i = 0; i < n; i++)
        kiln_tensor_i32(idt)[i] = (int32_t)(kiln_rng_u32(&r) % (uint32_t)v);
    for (int64_t i = 0; i < n * d; i++)
        gv[i] = (float)kiln_rng_uniform(&r) - 0.5f;
    kiln_node *table = kiln_variable(g, "table", KILN_F32, KILN_SHAPE(v, d),
                                     kiln_init_uniform(-1, 1));
    kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(n));
    kiln_node *rows = kiln_embedding(g, table, ids);
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(n, d), gv);
    kiln_node *loss = kiln_sum(g, kiln_mul(g, rows, c), KILN_ALL_AXES, 0);
    kiln_node *outs[2] = {rows, kiln_grad(g, loss, table)};
    printf("FORWARD %.4f ms\n", time_outputs(s, g, outs, 1, ids, idt));
    printf("RESULT %.4f ms\n", time_outputs(s, g, outs, 2, ids, idt));
    free(gv);
    kiln_tensor_free(idt);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
