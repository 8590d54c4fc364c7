/* Kernel dispatch: fast or reference table, under the run's execution
   context and denormal mode. */

#include <stdlib.h>

#include "cpu/check.h"
#include "cpu/dispatch.h"
#include "cpu/fast.h"
#include "cpu/fpu.h"
#include "cpu/kernels.h"
#include "cpu/prepared.h"
#include "cpu/profile.h"

size_t kiln_cpu_scratch_bytes(const kiln_node *n)
{
    const kiln_scratch_kernel *k = &kiln_scratch_kernels[n->op];
    return k->run ? k->bytes(n) : 0;
}

/* A node of no elements has nothing to write: its kernel is skipped (its
   inputs still checked), since its loops may run over the other axes,
   which can be as large as 2^40 beside a zero ([2^32, 0, 0] @ [1, 0, 0]
   would run 2^32 empty products). */
static int empty(const kiln_node *n)
{
    return kiln_shape_numel(n->shape) == 0;
}

/* The kernel to run and, for one that takes scratch, *with (ref: the
   reference kernel, which takes none). */
static kiln_kernel_fn pick(const kiln_node *n, int ref,
                           const kiln_scratch_kernel **with)
{
    *with = NULL;
    if (!ref && kiln_scratch_kernels[n->op].run) {
        *with = &kiln_scratch_kernels[n->op];
        return NULL;
    }
    kiln_kernel_fn k = ref ? NULL : kiln_fast_kernels[n->op];
    return k ? k : kiln_ref_kernels[n->op];
}

kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, void *scratch,
                                char *msg, size_t len)
{
    return kiln_cpu_run_prepared(ctx, n, out, in, scratch, NULL, msg, len);
}

kiln_status kiln_cpu_run_prepared(const kiln_exec_ctx *ctx, const kiln_node *n,
                                  void *out, void *const *in, void *scratch,
                                  const kiln_cpu_prepared *prep, char *msg,
                                  size_t len)
{
    kiln_status st = kiln_cpu_check_inputs(n, in, msg, len);
    if (st != KILN_OK || empty(n))
        return st;
    kiln_exec_ctx defaults;
    if (!ctx) {
        defaults = kiln_exec_defaults();
        ctx = &defaults;
    }
    const kiln_scratch_kernel *with;
    kiln_kernel_fn k = pick(n, ctx->reference, &with);
    if (!k && !with)
        return KILN_OK;
    const kiln_exec_ctx *prev = kiln_exec_enter(ctx);
    unsigned saved = kiln_fpu_enter(ctx->flush_denormals);
    double t0 = ctx->profile ? kiln_profile_now() : 0;
    if (prep && !ctx->reference)
        kiln_cpu_prepared_run(prep, n, out, in, scratch);
    else if (with)
        with->run(n, out, in, scratch);
    else
        k(n, out, in);
    if (ctx->profile)
        kiln_profile_record(ctx->profile, n, kiln_profile_now() - t0);
    kiln_fpu_leave(saved);
    kiln_exec_leave(prev);
    return KILN_OK;
}

kiln_status kiln_cpu_run_reference(const kiln_node *n, void *out,
                                   void *const *in)
{
    if (!kiln_ref_kernels[n->op])
        return KILN_ERR_ARG;
    kiln_status st = kiln_cpu_check_inputs(n, in, NULL, 0);
    if (st == KILN_OK && !empty(n))
        kiln_ref_kernels[n->op](n, out, in);
    return st;
}

kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len)
{
    size_t bytes = kiln_cpu_scratch_bytes(n);
    void *scratch = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    if (bytes && !scratch)
        return KILN_ERR_MEMORY;
    kiln_status st = kiln_cpu_run_kernel(NULL, n, out, in, scratch, msg, len);
    free(scratch);
    return st;
}
