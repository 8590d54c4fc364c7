/* Timing shared by the benchmarks (bench/conv.c, bench/pool.c,
   bench/cnn.c, bench/kiln_bench.c): the timed duration, failing, and the
   median time of a compiled function's run. */
#ifndef KILN_BENCH_TIMING_H
#define KILN_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln.h"

enum { BENCH_REPS = 5 };

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

#endif
