/* Kernel profiles: every kernel call of a profiling session's runs is
   timed into the session's table.  Calls are grouped by node id, op and
   shape, so a compiled function's steps and the nodes of a dynamic graph
   rebuilt every step each get one row.  The table belongs to one session,
   used by one thread at a time, so it needs no lock. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/profile.h"
#include "graph/fused_program.h"

enum { FIRST_ROWS = 64, MAX_ROWS = 4096, DESC = 200 };

typedef struct row {
    int id;
    kiln_op op;
    kiln_shape shape;
    long calls;
    double seconds;
    char desc[DESC];
} row;

struct kiln_profile {
    row *rows;
    int n, cap, dropped;
};

int kiln_profile_env(void)
{
    static atomic_int env = -1;
    int v = atomic_load_explicit(&env, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("KILN_PROFILE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&env, v);
    }
    return v;
}

kiln_profile *kiln_profile_new(void)
{
    return calloc(1, sizeof(kiln_profile));
}

void kiln_profile_free(kiln_profile *p)
{
    if (p)
        free(p->rows);
    free(p);
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

long kiln_profile_calls(const kiln_profile *p)
{
    long calls = 0;
    for (int i = 0; i < p->n; i++)
        calls += p->rows[i].calls;
    return calls;
}

void kiln_profile_print(kiln_profile *p, FILE *out)
{
    double total = 0;
    for (int i = 0; i < p->n; i++)
        total += p->rows[i].seconds;
    if (p->n)
        qsort(p->rows, (size_t)p->n, sizeof *p->rows, by_time_desc);
    fprintf(out,
            "KILN_PROFILE: %ld kernel calls, %.3f ms in kernels\n"
            "%10s %6s %9s %10s  kernel\n",
            kiln_profile_calls(p), 1e3 * total, "total ms", "%", "calls",
            "us/call");
    for (int i = 0; i < p->n; i++) {
        const row *r = &p->rows[i];
        fprintf(out, "%10.3f %6.1f %9ld %10.2f  %s\n", 1e3 * r->seconds,
                total > 0 ? 100 * r->seconds / total : 0.0, r->calls,
                1e6 * r->seconds / (double)r->calls, r->desc);
    }
    if (p->dropped)
        fprintf(out, "(%d kernel calls not shown: table full)\n", p->dropped);
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

/* A new row for n, or NULL when the table is full or out of memory. */
static row *add_row(kiln_profile *p, const kiln_node *n)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : FIRST_ROWS;
        row *rows =
            cap <= MAX_ROWS ? realloc(p->rows, cap * sizeof *rows) : NULL;
        if (!rows)
            return NULL;
        p->rows = rows;
        p->cap = cap;
    }
    row *r = &p->rows[p->n++];
    *r = (row){.id = n->id, .op = n->op, .shape = n->shape};
    describe(n, r->desc);
    return r;
}

void kiln_profile_record(kiln_profile *p, const kiln_node *n, double seconds)
{
    int i = 0;
    while (i < p->n && !(p->rows[i].id == n->id && p->rows[i].op == n->op &&
                         kiln_shape_equal(p->rows[i].shape, n->shape)))
        i++;
    row *r = i < p->n ? &p->rows[i] : add_row(p, n);
    if (!r) {
        p->dropped++;
        return;
    }
    r->calls++;
    r->seconds += seconds;
}
