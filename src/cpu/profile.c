/* KILN_PROFILE=1: every kernel call is timed, and at exit a table of the
   kernels by total time goes to stderr.  Calls are grouped by node id, op
   and shape, so a compiled function's steps and the nodes of a dynamic
   graph rebuilt every step each get one row. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/fused_program.h"
#include "cpu/profile.h"

enum { MAX_ROWS = 4096, DESC = 200 };

typedef struct row {
    int id;
    kiln_op op;
    kiln_shape shape;
    long calls;
    double seconds;
    char desc[DESC];
} row;

static struct {
    pthread_mutex_t lock;
    row *rows;
    int n, dropped;
} prof = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static atomic_int enabled = -1;

int kiln_profile_enabled(void)
{
    int v = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("KILN_PROFILE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&enabled, v);
    }
    return v;
}

double kiln_profile_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const row *)a)->seconds, y = ((const row *)b)->seconds;
    return (x < y) - (x > y);
}

static void print_profile(void)
{
    pthread_mutex_lock(&prof.lock);
    double total = 0;
    long calls = 0;
    for (int i = 0; i < prof.n; i++) {
        total += prof.rows[i].seconds;
        calls += prof.rows[i].calls;
    }
    qsort(prof.rows, (size_t)prof.n, sizeof *prof.rows, by_time_desc);
    fprintf(stderr,
            "KILN_PROFILE: %ld kernel calls, %.3f ms in kernels\n"
            "%10s %6s %9s %10s  kernel\n",
            calls, 1e3 * total, "total ms", "%", "calls", "us/call");
    for (int i = 0; i < prof.n; i++) {
        const row *r = &prof.rows[i];
        fprintf(stderr, "%10.3f %6.1f %9ld %10.2f  %s\n", 1e3 * r->seconds,
                total > 0 ? 100 * r->seconds / total : 0.0, r->calls,
                1e6 * r->seconds / (double)r->calls, r->desc);
    }
    if (prof.dropped)
        fprintf(stderr, "(%d kernels not shown: table full)\n", prof.dropped);
    free(prof.rows);
    prof.rows = NULL;
    prof.n = 0;
    pthread_mutex_unlock(&prof.lock);
}

static void describe(const kiln_node *n, char *buf)
{
    char shape[96], prog[DESC];
    kiln_shape_str(n->shape, shape, sizeof shape);
    const char *name = kiln_op_table[n->op].name;
    if (n->op == KILN_OP_FUSED)
        name = kiln_fused_format(n, prog, sizeof prog);
    snprintf(buf, DESC, "%%%d = %s%s%s %s", n->id,
             n->op == KILN_OP_FUSED ? "fused[" : "", name,
             n->op == KILN_OP_FUSED ? "]" : "", shape);
}

void kiln_profile_record(const kiln_node *n, double seconds)
{
    pthread_mutex_lock(&prof.lock);
    if (!prof.rows) {
        prof.rows = calloc(MAX_ROWS, sizeof *prof.rows);
        if (!prof.rows) {
            pthread_mutex_unlock(&prof.lock);
            return;
        }
        atexit(print_profile);
    }
    int i = 0;
    while (i < prof.n &&
           !(prof.rows[i].id == n->id && prof.rows[i].op == n->op &&
             kiln_shape_equal(prof.rows[i].shape, n->shape)))
        i++;
    if (i == prof.n) {
        if (prof.n == MAX_ROWS) {
            prof.dropped++;
            pthread_mutex_unlock(&prof.lock);
            return;
        }
        row *r = &prof.rows[prof.n++];
        r->id = n->id;
        r->op = n->op;
        r->shape = n->shape;
        describe(n, r->desc);
    }
    prof.rows[i].calls++;
    prof.rows[i].seconds += seconds;
    pthread_mutex_unlock(&prof.lock);
}
