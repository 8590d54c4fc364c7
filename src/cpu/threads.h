/* Execution contexts: how a run's kernels execute (threads, denormals,
   kernel choice, profile, debug stream),
   the process-wide defaults new sessions copy, and the context of the
   kernel running on each thread.  A leaf of cpu/: it uses nothing else. */
#ifndef KILN_CPU_THREADS_H
#define KILN_CPU_THREADS_H

#include "graph/graph.h"

/* How one run (kiln_run, kiln_forward, kiln_backward...) executes its
   kernels: its session's execution context, passed down with each kernel
   call.  Kernels read it from the run, never from process-wide settings
   that another thread may change mid-run.  Work is split into shares by
   threads alone, so a run's results never depend on timing or on other
   sessions running. */
struct kiln_profile;
typedef struct kiln_exec_ctx {
    int threads;         /* kernel threads, the caller included: 1 to 256 */
    int flush_denormals; /* FTZ and DAZ while kernels run */
    int reference;       /* 1: the reference kernels, 0: the fast ones */
    struct kiln_profile *profile; /* non-NULL: each kernel call timed in it */
    FILE *debug; /* where kiln_debug output goes; NULL: the log */
} kiln_exec_ctx;

#define KILN_MAX_THREADS 256

/* The process-wide defaults new sessions take (kiln_set_num_threads,
   kiln_set_flush_denormals, kiln_set_reference_kernels and KILN_REFERENCE,
   kiln_set_debug_stream); no profile. */
kiln_exec_ctx kiln_exec_defaults(void);

/* The execution context of the kernel running on this thread (set by
   kiln_cpu_run_kernel, and on pool threads for their share): enter makes
   ctx current and returns the previous one to give back to leave.  NULL
   when no kernel runs (then the process defaults apply). */
const kiln_exec_ctx *kiln_exec_enter(const kiln_exec_ctx *ctx);
void kiln_exec_leave(const kiln_exec_ctx *prev);
const kiln_exec_ctx *kiln_exec_current(void);

/* Threads the running kernel uses, the caller included: its context's, or
   the process default outside a run. */
int kiln_cpu_threads(void);

/* Shares the last kiln_par_for on this thread split its work into since
   the last kernel started on it (1 when none split): lets tests see the
   thread count a run used.  Recorded by kiln_par_for. */
int kiln_par_last_shares(void);
void kiln_par_record_shares(int shares);

#endif
