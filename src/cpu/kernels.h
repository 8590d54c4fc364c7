/* CPU kernels: one function per op, indexed by the op enum. */
#ifndef KILN_CPU_KERNELS_H
#define KILN_CPU_KERNELS_H

#include "graph/graph.h"

/* Computes node n into out from its inputs' buffers in[0..n_in-1].  Shapes
   come from the node and its inputs; buffers are contiguous row-major. */
typedef void (*kiln_kernel_fn)(const kiln_node *n, void *out, void *const *in);

/* Reference kernels (NULL for leaves, whose buffers are bound, not
   computed).  They define what every op computes. */
extern const kiln_kernel_fn kiln_ref_kernels[KILN_OP_COUNT];

/* Fast kernels: vectorised for the processor at run time and threaded over
   large tensors.  NULL where an op has no fast version: the reference runs
   instead. */
extern const kiln_kernel_fn kiln_fast_kernels[KILN_OP_COUNT];

/* How one run (kiln_run, kiln_forward, kiln_backward...) executes its
   kernels, fixed by its session when the session was made: kernels read it
   from the run, never from process-wide settings that another thread may
   change mid-run.  Work is split into shares by threads alone, so a run's
   results never depend on timing or on other sessions running. */
typedef struct kiln_exec_ctx {
    int threads;         /* kernel threads, the caller included: 1 to 256 */
    int flush_denormals; /* FTZ and DAZ while kernels run */
} kiln_exec_ctx;

#define KILN_MAX_THREADS 256

/* The process-wide defaults new sessions take (kiln_set_num_threads,
   kiln_set_flush_denormals). */
kiln_exec_ctx kiln_exec_defaults(void);

/* Checks the input values n's kernel relies on: the labels of softmax
   cross-entropy (and its gradient) and of a strict one_hot lie in [0, C).
   Inputs whose buffer is NULL (not computed yet) are not checked.  KILN_OK,
   or KILN_ERR_ARG with a message naming the node, the bad value and where
   it is written to msg (when msg is not NULL). */
kiln_status kiln_cpu_check_inputs(const kiln_node *n, void *const *in,
                                  char *msg, size_t len);

/* Checks n's inputs (kiln_cpu_check_inputs), then runs node n's kernel under
   ctx (NULL: the process defaults as they are now): the fast one unless the
   reference is forced, with denormals flushed to zero while it runs when
   ctx says so.  Returns the check's status; the kernel does not run when it
   fails. */
kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, char *msg,
                                size_t len);
/* kiln_cpu_run_kernel with the process defaults. */
kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len);

/* Forces the reference kernels (1) or the fast ones (0); -1 only reads.
   Starts from the environment: KILN_REFERENCE=1 forces the reference.
   Returns the setting in force. */
int kiln_cpu_use_reference(int on);

/* out = a(MxK, or KxM when ta) x b(KxN, or NxK when tb), row-major. */
void kiln_cpu_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *out);
/* out += alpha a x b (one GEMM with beta = 1; shapes as kiln_cpu_gemm).
   out must not overlap a or b.  Both calls split large products over the
   running kernel's threads (a fixed split for a thread count) and run
   those with one row or column as a GEMV; this one only where the GEMV
   takes dot products, and otherwise (x^T [k,m] times a [k,1] column, a
   [1,k] row times [k,n]) sums rows in a plain loop, so that each result is
   added to out once. */
void kiln_cpu_gemm_acc(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, const float *b,
                       float *out);

#endif
