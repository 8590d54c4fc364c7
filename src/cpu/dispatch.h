/* Running one node's kernel: the entry point of cpu/ for the layers above
   (dispatch.c). */
#ifndef KILN_CPU_DISPATCH_H
#define KILN_CPU_DISPATCH_H

#include "cpu/prepared.h"
#include "cpu/threads.h"

/* Bytes of scratch memory node n's fast kernel needs besides its output
   (0 for most ops; a convolution's im2col columns), whatever the thread
   count.  The memory planner places it in a compiled function's block for
   the node's step and the dynamic path takes it from its workspace, so
   that running a kernel never allocates. */
size_t kiln_cpu_scratch_bytes(const kiln_node *n);

/* Checks n's inputs (kiln_cpu_check_inputs), then runs node n's kernel under
   ctx (NULL: the process defaults as they are now): the fast one unless ctx
   asks for the reference, with denormals flushed to zero while it runs and
   the call timed into ctx's profile when ctx says so.  scratch holds
   kiln_cpu_scratch_bytes(n) bytes, 64-byte aligned (NULL when that is 0).
   Returns the check's status; the kernel does not run when it fails. */
kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, void *scratch,
                                char *msg, size_t len);
/* kiln_cpu_run_kernel for a step of a compiled function, with what
   kiln_cpu_prepare(n) kept for it (NULL: none; unused when ctx asks for
   the reference kernels). */
kiln_status kiln_cpu_run_prepared(const kiln_exec_ctx *ctx, const kiln_node *n,
                                  void *out, void *const *in, void *scratch,
                                  const kiln_cpu_prepared *prep, char *msg,
                                  size_t len);
/* kiln_cpu_run_kernel with the process defaults and scratch allocated for
   the call (KILN_ERR_MEMORY when that fails): for tests and tools, not for
   runs. */
kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len);

/* Checks n's inputs (kiln_cpu_check_inputs), then runs its reference kernel
   on the calling thread, outside any run: what constant folding evaluates
   with (the runtime hands it to the pass pipeline as its kiln_eval_fn).
   The check's status, or KILN_ERR_ARG for a node without a kernel (a
   leaf). */
kiln_status kiln_cpu_run_reference(const kiln_node *n, void *out,
                                   void *const *in);

#endif
