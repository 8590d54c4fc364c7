/* Timing shared by the benchmarks (bench/conv.c, bench/pool.c,
   bench/cnn.c, bench/kiln_bench.c): the timed duration, failing, and the
   median time of a compiled function's run. */
#ifndef KILN_BENCH_TIMING_H
#define KILN_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

enum { BENCH_REPS = 5 };

/* KILN_BENCH_CLOCK=cpu times with the process's CPU time instead of the
   wall clock: on a machine shared with other work, a one-thread run's CPU
   time is what the wall time would be alone (with threads it sums them). */
static inline double bench_now_s(void)
{
    struct timespec ts;
    const char *c = getenv("KILN_BENCH_CLOCK");
    clock_gettime(c && !strcmp(c, "cpu") ? CLOCK_PROCESS_CPUTIME_ID
                                         : CLOCK_MONOTONIC,
                  &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* KILN_BENCH_SECONDS, the timed duration of one measurement (default 1). */
static inline double bench_seconds(void)
{
    const char *e = getenv("KILN_BENCH_SECONDS");
    double v = e ? atof(e) : 1.0;
    return v > 0 ? v : 1.0;
}

/* Prints "<prog>: what: msg" and exits 1. */
static inline void bench_die(const char *prog, const char *what,
                             const char *msg)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
    exit(1);
}

static inline int bench_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds per run of f over BENCH_REPS timings of budget /
   BENCH_REPS each (after one warm-up run); exits on a failed run. */
static inline double bench_time_fn(kiln_function *f, kiln_tensor **in,
                                   kiln_tensor **out, double budget)
{
    double t[BENCH_REPS];
    kiln_run(f, in, out); /* warm: workers, caches */
    for (int r = 0; r < BENCH_REPS; r++) {
        int runs = 0;
        double t0 = bench_now_s(), el;
        do {
            if (kiln_run(f, in, out) != KILN_OK) {
                fprintf(stderr, "bench: run failed\n");
                exit(1);
            }
            runs++;
        } while ((el = bench_now_s() - t0) < budget / BENCH_REPS);
        t[r] = el / runs;
    }
    qsort(t, BENCH_REPS, sizeof *t, bench_by_value);
    return t[BENCH_REPS / 2];
}

/* Compiles outputs of g fed by n_in inputs (uniform in [-0.5, 0.5)),
   prints "KERNEL <what> <ms> ms" of its median run; exits on failure
   (prog names the benchmark). */
static inline void bench_report(kiln_session *s, kiln_graph *g,
                                kiln_node **outs, int n_out, kiln_node **ins,
                                int n_in, const char *what, double budget,
                                const char *prog)
{
    kiln_function *f = kiln_compile(s, g, outs, n_out, ins, n_in);
    if (!f) {
        fprintf(stderr, "%s: %s\n", prog, kiln_session_error(s));
        exit(1);
    }
    kiln_tensor *in[8], *out[8];
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (int i = 0; i < n_in; i++) {
        in[i] = kiln_tensor_new(KILN_F32, kiln_node_shape(ins[i]));
        float *p = kiln_tensor_f32(in[i]);
        for (int64_t e = 0; e < kiln_tensor_numel(in[i]); e++)
            p[e] = (float)kiln_rng_uniform(&r) - 0.5f;
    }
    for (int i = 0; i < n_out; i++)
        out[i] = kiln_function_new_output(f, i);
    printf("KERNEL %s %.3f ms\n", what,
           1e3 * bench_time_fn(f, in, out, budget));
    for (int i = 0; i < n_in; i++)
        kiln_tensor_free(in[i]);
    for (int i = 0; i < n_out; i++)
        kiln_tensor_free(out[i]);
    kiln_function_free(f);
}

#endif
