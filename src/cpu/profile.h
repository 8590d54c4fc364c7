/* Per-kernel timing (KILN_PROFILE=1), used by kiln_cpu_exec. */
#ifndef KILN_CPU_PROFILE_H
#define KILN_CPU_PROFILE_H

#include "graph/graph.h"

/* 1 when KILN_PROFILE is set (and not "0"); read once. */
int kiln_profile_enabled(void);
/* Monotonic seconds. */
double kiln_profile_now(void);
/* Adds one call of n's kernel taking seconds; the table prints at exit. */
void kiln_profile_record(const kiln_node *n, double seconds);

#endif
