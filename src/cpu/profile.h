/* Per-kernel timing: a session that profiles owns one table, which
   kiln_cpu_run_kernel fills for the runs made under its context. */
#ifndef KILN_CPU_PROFILE_H
#define KILN_CPU_PROFILE_H

#include <stdio.h>

#include "graph/graph.h"

typedef struct kiln_profile kiln_profile;

/* 1 when KILN_PROFILE is set (and not "0"); read once. */
int kiln_profile_env(void);
/* An empty table; NULL when out of memory. */
kiln_profile *kiln_profile_new(void);
void kiln_profile_free(kiln_profile *p);
/* Monotonic seconds. */
double kiln_profile_now(void);
/* Adds one call of n's kernel taking seconds. */
void kiln_profile_record(kiln_profile *p, const kiln_node *n, double seconds);
/* Kernel calls recorded so far. */
long kiln_profile_calls(const kiln_profile *p);
/* Prints the kernels by total time, most first, to out. */
void kiln_profile_print(kiln_profile *p, FILE *out);

#endif
