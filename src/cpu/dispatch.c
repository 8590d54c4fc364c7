/* Kernel dispatch: fast or reference table, under the run's execution
   context and denormal mode. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/check.h"
#include "cpu/dispatch.h"
#include "cpu/fast.h"
#include "cpu/fpu.h"
#include "cpu/profile.h"

/* -1 until first read from KILN_REFERENCE. */
static atomic_int use_reference = -1;

int kiln_cpu_use_reference(int on)
{
    if (on >= 0) {
        atomic_store(&use_reference, on ? 1 : 0);
        return on ? 1 : 0;
    }
    int v = atomic_load_explicit(&use_reference, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("KILN_REFERENCE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&use_reference, v);
    }
    return v;
}

kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, char *msg,
                                size_t len)
{
    kiln_status st = kiln_cpu_check_inputs(n, in, msg, len);
    if (st != KILN_OK)
        return st;
    kiln_kernel_fn k =
        kiln_cpu_use_reference(-1) ? NULL : kiln_fast_kernels[n->op];
    if (!k)
        k = kiln_ref_kernels[n->op];
    if (!k)
        return KILN_OK;
    kiln_exec_ctx defaults;
    if (!ctx) {
        defaults = kiln_exec_defaults();
        ctx = &defaults;
    }
    const kiln_exec_ctx *prev = kiln_exec_enter(ctx);
    unsigned saved = kiln_fpu_enter(ctx->flush_denormals);
    if (kiln_profile_enabled()) {
        double t0 = kiln_profile_now();
        k(n, out, in);
        kiln_profile_record(n, kiln_profile_now() - t0);
    } else {
        k(n, out, in);
    }
    kiln_fpu_leave(saved);
    kiln_exec_leave(prev);
    return KILN_OK;
}

kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len)
{
    return kiln_cpu_run_kernel(NULL, n, out, in, msg, len);
}
