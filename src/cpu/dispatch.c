/* Kernel dispatch: fast or reference table, under the run's execution
   context and denormal mode. */

#include "cpu/check.h"
#include "cpu/dispatch.h"
#include "cpu/fast.h"
#include "cpu/fpu.h"
#include "cpu/kernels.h"
#include "cpu/profile.h"

kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, char *msg,
                                size_t len)
{
    kiln_status st = kiln_cpu_check_inputs(n, in, msg, len);
    if (st != KILN_OK)
        return st;
    kiln_exec_ctx defaults;
    if (!ctx) {
        defaults = kiln_exec_defaults();
        ctx = &defaults;
    }
    kiln_kernel_fn k = ctx->reference ? NULL : kiln_fast_kernels[n->op];
    if (!k)
        k = kiln_ref_kernels[n->op];
    if (!k)
        return KILN_OK;
    const kiln_exec_ctx *prev = kiln_exec_enter(ctx);
    unsigned saved = kiln_fpu_enter(ctx->flush_denormals);
    if (ctx->profile) {
        double t0 = kiln_profile_now();
        k(n, out, in);
        kiln_profile_record(ctx->profile, n, kiln_profile_now() - t0);
    } else {
        k(n, out, in);
    }
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
    if (st == KILN_OK)
        kiln_ref_kernels[n->op](n, out, in);
    return st;
}

kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len)
{
    return kiln_cpu_run_kernel(NULL, n, out, in, msg, len);
}
