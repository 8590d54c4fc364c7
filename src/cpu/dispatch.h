/* Running one node's kernel: the entry point of cpu/ for the layers above
   (dispatch.c). */
#ifndef KILN_CPU_DISPATCH_H
#define KILN_CPU_DISPATCH_H

#include "cpu/threads.h"

/* Checks n's inputs (kiln_cpu_check_inputs), then runs node n's kernel under
   ctx (NULL: the process defaults as they are now): the fast one unless ctx
   asks for the reference, with denormals flushed to zero while it runs and
   the call timed into ctx's profile when ctx says so.  Returns the check's
   status; the kernel does not run when it fails. */
kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, char *msg,
                                size_t len);
/* kiln_cpu_run_kernel with the process defaults. */
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
